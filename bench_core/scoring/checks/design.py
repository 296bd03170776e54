"""The `design-match` check: the agent's design variables against the ground truth by normalised name and role
(docs/metrics.md, "D"). It needs no LLM, so the offline default can score D wherever the task has a design."""

from __future__ import annotations

import re

from failatlas.bench_core.scoring.checks.base import CHECKS, CheckInput, CheckOptions, Verdict
from failatlas.bench_core.tasks.model import DesignSpec, TaskSpec

DESIGN_PASS = 0.8
# at least this share of the design's variables must be true ones (docs/metrics.md, "Precision")
DESIGN_PRECISION_FLOOR = 0.5
ROLES = ("constant", "independent", "dependent")


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", str(name).lower())


def judge_design(task: TaskSpec, design: object) -> Verdict:
    if task.design is None:
        return Verdict("design", "design-match", status="not_run", reason="the task has no ground-truth design")
    truth: DesignSpec = task.design
    agent: dict[str, str] = {}
    if isinstance(design, dict):
        for role in ROLES:
            block = design.get(role) or {}
            names = block.keys() if isinstance(block, dict) else block if isinstance(block, list) else []
            for name in names:
                agent[_norm(name)] = role
    rows, matched = [], 0
    problems = []
    seen = set()
    for role, name in truth.variable_names():
        key = _norm(name)
        seen.add(key)
        if key not in agent:
            rows.append({"variable": name, "role": role, "status": "missing"})
            problems.append(f"the {role} variable '{name}' is missing from the design")
        elif agent[key] != role:
            rows.append({"variable": name, "role": role, "status": "misclassified", "agent_role": agent[key]})
            problems.append(f"'{name}' is treated as a {agent[key]} variable but it is {role}")
        else:
            rows.append({"variable": name, "role": role, "status": "matched"})
            matched += 1
    extraneous = [k for k in agent if k not in seen]
    rows += [{"variable": k[:200], "role": agent[k], "status": "extraneous"} for k in extraneous[:50]]
    total = len(truth.variable_names())
    recall = matched / total if total else 0.0
    precision = matched / len(agent) if agent else 0.0
    # extraneous variables may not swamp the true ones: below the floor the score shrinks in proportion
    score = recall * min(1.0, precision / DESIGN_PRECISION_FLOOR) if total else 0.0
    if not isinstance(design, dict):
        problems.insert(0, "The agent wrote no experiment design")
    if extraneous and precision < DESIGN_PRECISION_FLOOR:
        problems.append(f"{len(extraneous)} extraneous variable(s) outnumber the {matched} true one(s) it names "
                        f"(precision {precision:.0%}, at least {DESIGN_PRECISION_FLOOR:.0%} needed)")
    elif extraneous:
        problems.append(f"{len(extraneous)} extraneous variable(s) not in the ground truth")
    analysis = "; ".join(problems)
    return Verdict("design", "design-match", score=score, passed=score >= DESIGN_PASS,
                   verdict={"variables": rows, "threshold": DESIGN_PASS, "recall": recall, "precision": precision,
                            "precision_floor": DESIGN_PRECISION_FLOOR}, error_analysis=analysis)



@CHECKS.register("design-match")
class DesignMatchJudge:
    name = "design-match"
    kind = "offline"
    reads = ()

    def __init__(self, options: CheckOptions | None = None) -> None:
        self.options = options

    def __call__(self, inp: CheckInput) -> list[Verdict]:
        if "design" not in inp.task.judgeable_phases:
            return []
        return [judge_design(inp.task, inp.outputs.get("design"))]
