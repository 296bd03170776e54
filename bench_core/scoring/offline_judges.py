"""Deterministic judges: they need no LLM, so the offline default can score every phase the task allows.

- `design-match`: the agent's design variables against the ground truth by normalised name and role.
- `conclusion-reference`: strict reference match (every number of the expected conclusion present, and most of its
  content words). Semantic judging of free text is the LLM judge's job; this one exists so harness-validation
  agents and offline runs get a verdict, and it says so in its error analysis.
- `hidden-tests`: the task's hidden tests of the masked code, run in a fresh sandbox holding only the prepared
  repository with the agent's diff applied, the tests and their runner out of the agent's reach.
Each returns a `Verdict` with an error analysis in words: what `ingest/` mines. Each is registered in `JUDGES`
under its name, as a judge of kind `offline`.
"""

from __future__ import annotations

import json
import re
import secrets
import shlex
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from failatlas.bench_core.scoring.judges import JUDGES, JudgeInput, JudgeOptions, Verdict
from failatlas.bench_core.scoring.monitor import test_infrastructure_findings
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
        path = task_path(task, entry, field="implementation.hidden_tests")
        if path.is_dir():  # each file found in the folder obeys the same rule (a link in it may lead out)
            paths.extend(task_path(task, str(p), field="implementation.hidden_tests")
                         for p in sorted(path.glob("test*.py")))
        else:
            paths.append(path)
    return paths


# The hidden-test runner. It runs in a fresh sandbox that holds the prepared repository with the agent's diff applied
# and nothing else of the agent's: no process, no file outside the working copy. The runner, its pytest.ini and
# the tests are mounted read-only outside the working copy (`JUDGE_MOUNT`). `python3 -I` puts neither the working
# copy nor PYTHONPATH on sys.path and skips the user's site-packages, so a pytest.py, sitecustomize.py,
# usercustomize.py or .pth file of the repository is never imported; `-c` with our own ini file, `--noconftest`
# and PYTEST_DISABLE_PLUGIN_AUTOLOAD keep the repository's pytest.ini/setup.cfg/tox.ini/pyproject.toml, conftest.py
# files and plugins out. The working copy goes on sys.path only once pytest and its plugins are imported, at the
# start of the session. The result goes to a copy of stdout taken before any of that (pytest's own output goes to
# stderr) and carries a nonce that the harness wrote to a file the runner deletes before any code of the agent can
# run: a line without it is a forgery. Code under test still runs in this process, so it could find the nonce in
# memory or patch pytest; docs/sandbox.md names that residual risk.
HIDDEN_RUNNER = """
import json, os, runpy, sys


def main(judge, nonce_file, test):
    with open(nonce_file) as handle:
        nonce = handle.read().strip()
    os.unlink(nonce_file)
    workspace = os.getcwd()
    result = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    passed, failed = [], []
    try:
        import pytest
    except ImportError:
        pytest = None
    if pytest is not None:
        class Collect:
            def pytest_sessionstart(self, session):
                sys.path.insert(0, workspace)

            def pytest_runtest_logreport(self, report):
                if report.when == "call" and report.passed:
                    passed.append(report.nodeid)
                elif report.failed:
                    last = (report.longreprtext or "").strip().splitlines()[-1:] or [""]
                    failed.append(report.nodeid.split("::", 1)[-1] + ": " + last[0][:200])

            def pytest_collectreport(self, report):
                if report.failed:
                    failed.append("collection: " + (report.longreprtext or "").strip()[-200:])

        code = pytest.main(["-q", "-c", os.path.join(judge, "pytest.ini"), "--rootdir", judge, "--noconftest",
                            "-p", "no:cacheprovider", test], plugins=[Collect()])
        if int(code) not in (0, 1) and not failed:
            failed.append(f"pytest ended with exit code {int(code)}")
    else:
        sys.path.insert(0, workspace)
        try:
            ns = runpy.run_path(test, run_name="hidden_test")
        except BaseException as exc:
            failed.append(f"import: {type(exc).__name__}: {exc}")
            ns = {}
        for name, fn in sorted(ns.items()):
            if name.startswith("test_") and callable(fn):
                try:
                    fn()
                    passed.append(name)
                except BaseException as exc:
                    failed.append(f"{name}: {type(exc).__name__}: {str(exc)[:200]}")
    summary = json.dumps({"passed": len(passed), "failed": failed})
    result.write("FAILATLAS_HIDDEN " + nonce + " " + summary + "\\n")
    result.flush()
    os._exit(1 if failed or not passed else 0)


main(*sys.argv[1:4])
"""
MARKER = "FAILATLAS_HIDDEN"
JUDGE_MOUNT = "/failatlas-judge"
# the variables pytest reads for options and plugins, set for the runner (the container's own are the image's)
RUNNER_ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTEST_ADDOPTS": "", "PYTEST_PLUGINS": ""}

StartSandbox = Callable[[dict[str, str]], Any]


def _stage_judge(paths: list[Path], judge: Path) -> list[str]:
    """Write the runner, its ini file and one folder per test file under `judge`, readable by everyone; returns
    each test's path relative to `judge`."""
    (judge / "tests").mkdir(parents=True)
    (judge / "runner.py").write_text(HIDDEN_RUNNER)
    (judge / "pytest.ini").write_text("[pytest]\n")
    relative = []
    for index, path in enumerate(paths):
        folder = judge / "tests" / str(index)
        folder.mkdir()
        shutil.copyfile(path, folder / path.name)
        relative.append(f"tests/{index}/{path.name}")
    for item in [judge, *judge.rglob("*")]:
        item.chmod(0o755 if item.is_dir() else 0o644)
    return relative


def _read_result(result, nonce: str, name: str) -> tuple[dict | None, list[str]]:
    """The runner's summary (None when it did not report) and the problems its output shows."""
    own = f"{MARKER} {nonce} "
    stdout = (result.stdout or "").splitlines()
    mine = [line[len(own):] for line in stdout if line.startswith(own)]
    forged = list(dict.fromkeys(line.strip() for line in stdout + (result.stderr or "").splitlines()
                                if MARKER in line and not line.startswith(own)))
    problems = [f"a result line not written by the runner was printed (forged): {line[:200]}" for line in forged[:3]]
    if len(mine) > 1:
        problems.append(f"the runner's result line was printed {len(mine)} times (forged)")
        return None, problems
    if not mine:
        tail = [ln for ln in ((result.stderr or "") + "\n" + (result.stdout or "")).splitlines() if ln.strip()]
        problems.append(f"hidden tests in {name} did not run to the end: {tail[-1][:300] if tail else ''}")
        return None, problems
    try:
        summary = json.loads(mine[0])
    except json.JSONDecodeError:
        summary = None
    if not (isinstance(summary, dict) and isinstance(summary.get("passed"), int)
            and isinstance(summary.get("failed"), list)):
        problems.append(f"hidden tests in {name} reported an unreadable result")
        return None, problems
    return summary, problems


def judge_hidden_tests(task: TaskSpec, start_sandbox: StartSandbox | None) -> Verdict:
    """Run the hidden tests in a fresh sandbox from `start_sandbox(read_only_inputs)`, which holds the prepared
    repository with the agent's diff applied (None: the diff did not apply). Raises InfrastructureError
    (SandboxError) when the sandbox cannot start."""
    paths = hidden_test_paths(task)
    if not paths:
        return Verdict("implementation", "hidden-tests", status="not_run", reason="the task has no hidden tests")
    if start_sandbox is None:
        return Verdict("implementation", "hidden-tests", score=0.0, passed=False,
                       error_analysis="The agent's changes could not be applied, so no hidden test could run.")
    failures: list[str] = []
    passed = total = 0
    with tempfile.TemporaryDirectory(prefix="failatlas-judge-") as tmp:
        judge = Path(tmp) / "judge"
        tests = _stage_judge(paths, judge)
        with start_sandbox({str(judge): JUDGE_MOUNT}) as sandbox:
            workdir = getattr(sandbox, "workdir", None) or "/workspace"
            for path, test in zip(paths, tests, strict=True):
                nonce, nonce_file = secrets.token_hex(16), f".failatlas-nonce-{secrets.token_hex(6)}"
                sandbox.write_file(f"{workdir}/{nonce_file}", nonce.encode())
                # the local kind maps sandbox paths under $FAILATLAS_SANDBOX_ROOT; Docker mounts them as they are
                command = (f'J="${{FAILATLAS_SANDBOX_ROOT:-}}{JUDGE_MOUNT}"; '
                           f'exec python3 -I -B "$J/runner.py" "$J" {nonce_file} "$J"/{shlex.quote(test)}')
                result = sandbox.exec(command, timeout=task.run.timeout_s, cwd=workdir, env=RUNNER_ENV)
                summary, problems = _read_result(result, nonce, path.name)
                failures += problems
                if summary is None:
                    total += 1
                    continue
                passed += summary["passed"]
                total += summary["passed"] + len(summary["failed"])
                failures += [f"hidden test {f}" for f in summary["failed"]]
                total += len(problems)
    score = passed / total if total else 0.0
    return Verdict("implementation", "hidden-tests", score=score, passed=total > 0 and not failures,
                   verdict={"passed": passed, "total": total, "failures": failures},
                   error_analysis="; ".join(failures))


def distrust_tampering(verdict: Verdict, outputs: dict) -> Verdict:
    """A passing hidden-tests verdict does not stand when the agent's diff reaches into the test runner's process
    (its result marker, frames or objects: `monitor.RUNNER_TAMPERING`) or plants a pytest hook or plugin: the code
    under test runs in the runner's process, so such a diff can forge the result from inside (docs/sandbox.md).
    The counts the runner reported are kept in the verdict; it fails, saying why."""
    if verdict.status != "ok" or not verdict.passed:
        return verdict
    reasons = [f.evidence for f in test_infrastructure_findings(outputs) if f.severity == "fail"]
    if not reasons:
        return verdict
    why = "hidden-test results not trusted: " + "; ".join(reasons[:3])
    return Verdict("implementation", "hidden-tests", score=0.0, passed=False,
                   verdict={**(verdict.verdict or {}), "reported_score": verdict.score, "not_trusted": reasons},
                   error_analysis=why)


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
    """Runs only where scoring prepared the clean tree, in a fresh sandbox of its own."""

    name = "hidden-tests"
    needs_sandbox = True

    def __call__(self, inp: JudgeInput) -> list[Verdict]:
        if not inp.validated:
            return []
        try:
            verdict = judge_hidden_tests(inp.task, inp.start_sandbox)
        except (OSError, LookupError, InfrastructureError) as exc:
            return [Verdict("implementation", "hidden-tests", status="judge_failed",
                            reason=f"hidden tests could not run: {exc}")]
        return [distrust_tampering(verdict, inp.outputs)]
