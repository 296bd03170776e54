"""Deterministic judges: they need no LLM, so the offline default can score every phase the task allows.

- `design-match`: the agent's design variables against the ground truth by normalised name and role.
- `conclusion-reference`: strict reference match (every number of the expected conclusion present, and most of its
  content words). Semantic judging of free text is the LLM judge's job; this one exists so harness-validation
  agents and offline runs get a verdict, and it says so in its error analysis.
- `hidden-tests`: the task's hidden tests of the masked code, run in the validator's clean sandbox.
Each returns a `Verdict` with an error analysis in words: what `ingest/` mines. Each is registered in `JUDGES`
under its name, as a judge of kind `offline`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from failatlas.bench_core.scoring.judges import JUDGES, JudgeInput, JudgeOptions, Verdict
from failatlas.bench_core.tasks.model import DesignSpec, TaskSpec
from failatlas.core.errors import InfrastructureError

DESIGN_PASS = 0.8
CONCLUSION_PASS = 0.6
ROLES = ("constant", "independent", "dependent")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_WORD = re.compile(r"[a-z][a-z0-9]{2,}")
_STOP = frozenset(("the", "and", "for", "with", "that", "this", "than", "are", "was", "were", "has", "have", "from",
                   "into", "not", "but", "its", "can", "all", "any", "per"))


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
    rows += [{"variable": k, "role": agent[k], "status": "extraneous"} for k in extraneous]
    total = len(truth.variable_names())
    score = matched / total if total else 0.0
    if not isinstance(design, dict):
        problems.insert(0, "The agent wrote no experiment design")
    analysis = "; ".join(problems)
    if extraneous:
        analysis += ("; " if analysis else "") + f"{len(extraneous)} extraneous variable(s) not in the ground truth"
    return Verdict("design", "design-match", score=score, passed=score >= DESIGN_PASS,
                   verdict={"variables": rows, "threshold": DESIGN_PASS}, error_analysis=analysis)


def _numbers(text: str) -> list[float]:
    return [float(x) for x in _NUMBER.findall(text)]


def judge_conclusion(task: TaskSpec, conclusion: str | None) -> Verdict:
    if not task.expected_conclusion:
        return Verdict("conclusion", "conclusion-reference", status="not_run",
                       reason="the task has no ground-truth conclusion")
    if not conclusion or not conclusion.strip():
        return Verdict("conclusion", "conclusion-reference", score=0.0, passed=False,
                       error_analysis="The agent wrote no conclusion, so the research question is left unanswered.")
    expected = task.expected_conclusion
    want_numbers = _numbers(expected)
    got_numbers = _numbers(conclusion)
    missing_numbers = [n for n in want_numbers
                       if not any(abs(n - g) <= 0.005 * max(1.0, abs(n)) for g in got_numbers)]
    want_words = {w for w in _WORD.findall(expected.lower()) if w not in _STOP}
    got_words = set(_WORD.findall(conclusion.lower()))
    recall = len(want_words & got_words) / len(want_words) if want_words else 1.0
    number_share = 1 - len(missing_numbers) / len(want_numbers) if want_numbers else 1.0
    score = 0.5 * recall + 0.5 * number_share
    passed = not missing_numbers and recall >= CONCLUSION_PASS
    problems = []
    if missing_numbers:
        problems.append("the conclusion does not report the expected result(s) "
                        + ", ".join(f"{n:g}" for n in missing_numbers))
    if recall < CONCLUSION_PASS:
        problems.append(f"the conclusion does not state the expected finding (content overlap {recall:.0%})")
    return Verdict("conclusion", "conclusion-reference", score=score, passed=passed,
                   verdict={"missing_numbers": missing_numbers, "word_recall": recall},
                   error_analysis="; ".join(problems))


def hidden_test_paths(task: TaskSpec) -> list[Path]:
    """Paths of the task's hidden test files (relative entries are relative to the task file's folder)."""
    from failatlas.bench_core.prepare.leaks import task_path

    paths: list[Path] = []
    for entry in task.implementation.hidden_tests:
        path = task_path(task, entry)
        paths.extend(sorted(path.glob("test*.py")) if path.is_dir() else [path])
    return paths


# Runs one hidden test file inside the validator's sandbox and prints a JSON summary. With pytest in the sandbox
# (the image has it) the file runs under pytest, parametrised tests and `pytest.raises` included; without it,
# importing the file runs script-style checks and every top-level `test_*` function is called.
HIDDEN_RUNNER = """
import json, os, runpy, sys, traceback
sys.path.insert(0, os.getcwd())
passed, failed = 0, []
try:
    import pytest
except ImportError:
    pytest = None
if pytest is not None:
    class Collect:
        def pytest_runtest_logreport(self, report):
            global passed
            if report.when == "call" and report.passed:
                passed += 1
            elif report.failed:
                last = (report.longreprtext or "").strip().splitlines()[-1:] or [""]
                failed.append(report.nodeid.split("::", 1)[-1] + ": " + last[0][:200])
        def pytest_collectreport(self, report):
            if report.failed:
                failed.append("collection: " + (report.longreprtext or "").strip()[-200:])
    pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir", os.getcwd(), sys.argv[1]], plugins=[Collect()])
else:
    try:
        ns = runpy.run_path(sys.argv[1], run_name="hidden_test")
    except BaseException as exc:
        traceback.print_exc()
        failed.append(f"import: {type(exc).__name__}: {exc}")
        ns = {}
    for name, fn in sorted(ns.items()):
        if name.startswith("test_") and callable(fn):
            try:
                fn()
                passed += 1
            except BaseException as exc:
                failed.append(f"{name}: {type(exc).__name__}: {str(exc)[:200]}")
print("FAILATLAS_HIDDEN " + json.dumps({"passed": passed, "failed": failed}))
sys.exit(1 if failed or not passed else 0)
"""


def judge_hidden_tests(task: TaskSpec, sandbox, workdir: str) -> Verdict:
    """Run the hidden tests inside the validator's clean sandbox (never the agent's)."""
    paths = hidden_test_paths(task)
    if not paths:
        return Verdict("implementation", "hidden-tests", status="not_run", reason="the task has no hidden tests")
    if sandbox is None:
        return Verdict("implementation", "hidden-tests", score=0.0, passed=False,
                       error_analysis="The agent's changes could not be applied, so no hidden test could run.")
    failures: list[str] = []
    passed = total = 0
    # Inside the validator's own working copy (Docker's archive API cannot write into a tmpfs /tmp).
    folder = f"{workdir}/.failatlas_hidden"
    sandbox.exec(f"mkdir -p {folder}", timeout=30)
    sandbox.write_file(f"{folder}/_run.py", HIDDEN_RUNNER.encode())
    for path in paths:
        target = f"{folder}/{path.name}"
        sandbox.write_file(target, path.read_bytes())
        result = sandbox.exec(f"python3 {folder}/_run.py {target}", timeout=task.run.timeout_s, cwd=workdir)
        summary = next((json.loads(line.split(" ", 1)[1]) for line in (result.stdout or "").splitlines()
                        if line.startswith("FAILATLAS_HIDDEN ")), None)
        if summary is None:  # killed, timed out or crashed before reporting
            total += 1
            tail = [ln for ln in ((result.stderr or "") + (result.stdout or "")).splitlines() if ln.strip()]
            failures.append(f"hidden tests in {path.name} did not run to the end: {tail[-1][:300] if tail else ''}")
            continue
        passed += summary["passed"]
        total += summary["passed"] + len(summary["failed"])
        failures += [f"hidden test {f}" for f in summary["failed"]]
    score = passed / total if total else 0.0
    return Verdict("implementation", "hidden-tests", score=score, passed=total > 0 and not failures,
                   verdict={"passed": passed, "total": total, "failures": failures},
                   error_analysis="; ".join(failures))


class _OfflineJudge:
    kind = "offline"
    needs_sandbox = False
    name = ""

    def __init__(self, options: JudgeOptions | None = None) -> None:
        self.options = options


@JUDGES.register("design-match")
class DesignMatchJudge(_OfflineJudge):
    name = "design-match"

    def __call__(self, inp: JudgeInput) -> list[Verdict]:
        if "design" not in inp.task.judgeable_phases:
            return []
        return [judge_design(inp.task, inp.outputs.get("design"))]


@JUDGES.register("conclusion-reference")
class ConclusionReferenceJudge(_OfflineJudge):
    name = "conclusion-reference"

    def __call__(self, inp: JudgeInput) -> list[Verdict]:
        if "conclusion" not in inp.task.judgeable_phases:
            return []
        return [judge_conclusion(inp.task, inp.outputs.get("conclusion"))]


@JUDGES.register("hidden-tests")
class HiddenTestsJudge(_OfflineJudge):
    """Runs only where the validator re-ran the run, in its clean sandbox."""

    name = "hidden-tests"
    needs_sandbox = True

    def __call__(self, inp: JudgeInput) -> list[Verdict]:
        if not inp.validated:
            return []
        try:
            return [judge_hidden_tests(inp.task, inp.sandbox, inp.workdir)]
        except (OSError, LookupError, InfrastructureError) as exc:
            return [Verdict("implementation", "hidden-tests", status="judge_failed",
                            reason=f"hidden tests could not run: {exc}")]
