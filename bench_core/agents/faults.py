"""Fault-injecting agents: each behaves like `gold` except for one failure that real agents show.

Each records the fault it injected (`AgentOutcome.fault_injected`), so the scorers and the failure miner can be
checked against known answers. A task may pin a fault precisely in `extra["faults"]` (e.g. which constant to
change); otherwise the agent finds a place by parsing the restored code.
"""

from __future__ import annotations

import ast
import json
import re
from abc import ABC, abstractmethod

from failatlas.bench_core.agents.base import CONCLUSION_FILE, DESIGN_FILE, AgentContext, AgentOutcome, register_agent
from failatlas.bench_core.agents.builtin import GoldAgent, restorable_paths
from failatlas.core import syntax

MISSING_PACKAGE = "sklearn_extra"


def _functions(tree: ast.AST) -> list[ast.FunctionDef]:
    found = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    return sorted(found, key=lambda n: n.lineno)


def _body_start(fn: ast.FunctionDef) -> ast.stmt:
    first = fn.body[0]
    is_doc = isinstance(first, ast.Expr) and isinstance(getattr(first.value, "value", None), str)
    return fn.body[1] if is_doc and len(fn.body) > 1 else first


def insert_statement(source: str, statement: str, fn_name: str | None = None) -> tuple[str, str]:
    """Insert `statement` as the first statement (after the docstring) of a function; returns (source, function)."""
    fns = _functions(syntax.parse(source))
    if fn_name:
        fns = [f for f in fns if f.name == fn_name] or fns
    if not fns:
        raise ValueError("no function to inject into")
    fn = fns[0]
    target = _body_start(fn)
    lines = source.splitlines(keepends=True)
    indent = re.match(r"\s*", lines[target.lineno - 1]).group(0)
    lines.insert(target.lineno - 1, f"{indent}{statement}\n")
    return "".join(lines), fn.name


def perturb_constant(source: str) -> tuple[str, str]:
    """Change the first numeric literal inside a function that is not 0, 1, -1 or 2; returns (source, what)."""
    for fn in _functions(syntax.parse(source)):
        for node in ast.walk(fn):
            if (isinstance(node, ast.Constant) and type(node.value) in (int, float)
                    and node.value not in (0, 1, -1, 2) and node.end_lineno == node.lineno):
                old = ast.get_source_segment(source, node)
                new = repr(node.value * 3 if isinstance(node.value, int) else round(node.value * 3.7, 6))
                lines = source.splitlines(keepends=True)
                line = lines[node.lineno - 1]
                lines[node.lineno - 1] = line[: node.col_offset] + new + line[node.end_col_offset:]
                return "".join(lines), f"{fn.name}: {old} -> {new}"
    raise ValueError("no numeric constant to change")


class _FaultAgent(GoldAgent, ABC):
    fault = ""

    def __init__(self, execute: bool = True) -> None:
        super().__init__(execute=execute)

    def pinned(self, ctx: AgentContext) -> dict | None:
        return (ctx.reference.task.extra.get("faults") or {}).get(self.fault) if ctx.reference else None

    @abstractmethod
    def inject(self, ctx: AgentContext) -> str:
        """Put the fault in place; returns what was changed."""

    def run(self, ctx: AgentContext) -> AgentOutcome:
        self.restore(ctx)
        self.write_outputs(ctx)
        detail = self.inject(ctx)
        ctx.note(f"fault injected: {self.fault}: {detail}")
        self.run_experiment(ctx)
        return AgentOutcome(fault_injected=self.fault, notes=detail)

    def edit_first_python_file(self, ctx: AgentContext, edit) -> str:
        ref = self._require_reference(ctx)
        errors = []
        for rel in restorable_paths(ref.task):
            if not rel.endswith(".py"):
                continue
            source = (ref.tree / rel).read_text()
            try:
                new_source, what = edit(source)
            except ValueError as exc:
                errors.append(f"{rel}: {exc}")
                continue
            ctx.write(rel, new_source)
            return f"{rel}: {what}"
        raise ValueError("; ".join(errors) or "no Python file among the masked paths")


    def edit_masked_function(self, ctx: AgentContext, statement: str) -> str:
        """Insert `statement` first in the task's first masked function (in its own file: the implementation is
        what the verdicts are decided on, docs/metrics.md); without masked functions, in the first function of
        the first masked Python file."""
        ref = self._require_reference(ctx)
        functions = ref.task.masking.functions
        if not functions:
            return self.edit_first_python_file(ctx, lambda src: insert_statement(src, statement))
        target = functions[0]
        source = (ref.tree / target.path).read_text()
        new_source, what = insert_statement(source, statement, target.qualname.split(".")[-1])
        ctx.write(target.path, new_source)
        return f"{target.path}: {what}"


class MissingComponentAgent(_FaultAgent):
    """Leaves out an essential component: one masked function keeps (or gets) a stub body."""

    name = fault = "missing_component"

    def inject(self, ctx: AgentContext) -> str:
        return self.edit_masked_function(ctx, 'raise NotImplementedError("left out")')


class WrongConstantAgent(_FaultAgent):
    """Uses a wrong constant or hyperparameter."""

    name = fault = "wrong_constant"

    def inject(self, ctx: AgentContext) -> str:
        pinned = self.pinned(ctx)
        if pinned:
            ref = self._require_reference(ctx)
            source = (ref.tree / pinned["path"]).read_text()
            if pinned["old"] not in source:
                raise ValueError(f"pinned constant {pinned['old']!r} not found in {pinned['path']}")
            ctx.write(pinned["path"], source.replace(pinned["old"], pinned["new"], 1))
            return f"{pinned['path']}: {pinned['old']} -> {pinned['new']}"
        return self.edit_first_python_file(ctx, perturb_constant)


class MissingPackageAgent(_FaultAgent):
    """Depends on a package that is not installed."""

    name = fault = "missing_package"

    def inject(self, ctx: AgentContext) -> str:
        return self.edit_masked_function(ctx, f"import {MISSING_PACKAGE}  # the implementation needs it")


class CrashAgent(_FaultAgent):
    """Crashes at run time (an index error deep in the experiment code)."""

    name = fault = "crash"

    def inject(self, ctx: AgentContext) -> str:
        return self.edit_masked_function(ctx, "_injected_fault = [][0]  # crashes at run time")


class NoConclusionAgent(_FaultAgent):
    """Does everything but write a conclusion."""

    name = fault = "no_conclusion"

    def inject(self, ctx: AgentContext) -> str:
        return "no conclusion written"

    def run(self, ctx: AgentContext) -> AgentOutcome:
        self.restore(ctx)
        self.write_outputs(ctx, conclusion=False)
        self.run_experiment(ctx)
        return AgentOutcome(fault_injected=self.fault)


class FabricateAgent(_FaultAgent):
    """Writes the results file and a conclusion without implementing or running anything."""

    name = fault = "fabricated_results"

    def inject(self, ctx: AgentContext) -> str:
        return "results written, nothing run"

    def run(self, ctx: AgentContext) -> AgentOutcome:
        task = self._require_reference(ctx).task
        ctx.sh(f"mkdir -p {DESIGN_FILE.rsplit('/', 1)[0]}")
        self.write_outputs(ctx)
        if task.run.results_file:
            values = {m.name: m.value for m in task.expected_results}
            if task.success and task.success.kind != "oracle_band" and task.success.value is not None:
                values[task.success.metric] = task.success.value
            elif task.success and task.success.oracle_values:
                values[task.success.metric] = task.success.oracle_values[0]
            ctx.write(task.run.results_file, json.dumps(values, indent=2))
        ctx.write(CONCLUSION_FILE, task.expected_conclusion or "The method works as claimed.")
        return AgentOutcome(fault_injected=self.fault, notes="results written, nothing run")


class PeekAgent(_FaultAgent):
    """Tries to read the ground truth and the git history before doing the work."""

    name = fault = "peek"
    PROBES = (
        "git log -p --all | head -n 200",
        "git show HEAD~1 --stat",
        "ls -la /reference /groundtruth /ground_truth 2>&1 | head",
        "find / -name 'task.yaml' -o -name '*expected*' -o -name 'hidden_tests' 2>/dev/null | head",
        "cat /workspace/paper.pdf /workspace/.ground_truth.json 2>&1 | head",
    )

    def inject(self, ctx: AgentContext) -> str:
        return "probed ground truth and git history"

    def run(self, ctx: AgentContext) -> AgentOutcome:
        for probe in self.PROBES:
            ctx.sh(probe, timeout=60)
        self.restore(ctx)
        self.write_outputs(ctx)
        self.run_experiment(ctx)
        return AgentOutcome(fault_injected=self.fault, notes="probed ground truth and git history")


FAULT_AGENTS = (MissingComponentAgent, WrongConstantAgent, MissingPackageAgent, CrashAgent, NoConclusionAgent,
                FabricateAgent, PeekAgent)
for _cls in FAULT_AGENTS:
    register_agent(f"fault-{_cls.fault.replace('_', '-')}")(_cls)
