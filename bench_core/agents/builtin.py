"""Harness-validation agents: `gold` must score as a success everywhere, `null` as a failure everywhere."""

from __future__ import annotations

import json
import posixpath

from failatlas.bench_core.agents.base import (
    CONCLUSION_FILE,
    DESIGN_FILE,
    OUTPUT_DIR,
    RUN_SCRIPT,
    AgentContext,
    AgentOutcome,
    register_agent,
)
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import ConfigError


def restorable_paths(task: TaskSpec) -> list[str]:
    """Files the masking removed, stubbed or replaced by a base version: what a perfect agent would (re)write."""
    from failatlas.bench_core.prepare.leaks import task_path

    paths = list(task.masking.files) + [f.path for f in task.masking.functions]
    if task.masking.overlay:
        overlay = task_path(task, task.masking.overlay)
        paths += sorted(p.relative_to(overlay).as_posix() for p in overlay.rglob("*")
                        if p.is_file() and "__pycache__" not in p.parts)
    return list(dict.fromkeys(paths))


def design_json(task: TaskSpec) -> str:
    design = task.design
    body = {"constant": design.constant, "independent": design.independent, "dependent": design.dependent} \
        if design else {}
    return json.dumps(body, indent=2, sort_keys=True)


def run_script(task: TaskSpec) -> str:
    return f"#!/usr/bin/env bash\nset -euo pipefail\ncd \"$(dirname \"$0\")/..\"\n{task.run.command}\n"


class GoldAgent:
    """Restores the reference implementation and writes the ground-truth design and conclusion."""

    name = "gold"
    needs_reference = True

    def __init__(self, execute: bool = True) -> None:
        self.execute = execute

    def _require_reference(self, ctx: AgentContext):
        if ctx.reference is None:
            raise ConfigError(f"agent '{self.name}' needs the reference tree, which only the runner can give")
        return ctx.reference

    def restore(self, ctx: AgentContext, skip: set[str] = frozenset()) -> list[str]:
        ref = self._require_reference(ctx)
        restored = []
        for rel in restorable_paths(ref.task):
            if rel in skip:
                continue
            ctx.write(rel, (ref.tree / rel).read_text())
            restored.append(rel)
        return restored

    def write_outputs(self, ctx: AgentContext, *, conclusion: bool = True) -> None:
        task = self._require_reference(ctx).task
        files = [(DESIGN_FILE, design_json(task))]
        if conclusion and task.expected_conclusion:
            files.append((CONCLUSION_FILE, task.expected_conclusion))
        if task.run.command:
            files.append((RUN_SCRIPT, run_script(task)))
        # the three files sit in OUTPUT_DIR: one copy creates it with them (no `mkdir` command, no copy per file)
        ctx.write_folder(OUTPUT_DIR, [(posixpath.basename(path), text) for path, text in files])

    def run_experiment(self, ctx: AgentContext) -> None:
        task = self._require_reference(ctx).task
        if self.execute and task.run.command:
            ctx.sh(f"bash {RUN_SCRIPT}", timeout=task.run.timeout_s)

    def run(self, ctx: AgentContext) -> AgentOutcome:
        self.restore(ctx)
        self.write_outputs(ctx)
        self.run_experiment(ctx)
        return AgentOutcome()


class NullAgent:
    """Does nothing at all."""

    name = "null"
    needs_reference = False

    def run(self, ctx: AgentContext) -> AgentOutcome:
        ctx.note("null agent: doing nothing")
        return AgentOutcome()


register_agent("gold")(GoldAgent)
register_agent("null")(NullAgent)
