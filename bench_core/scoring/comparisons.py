"""What a successful clean re-run is compared with, one function per source of expectations.

Each returns a `Compared` (None when the task has nothing of that kind): the per-value detail stored in
`validations.metrics`, and on failure the outcome it implies and why. The validator runs every one that applies;
all must pass, and when none applies the run is `not_scored`.

- `from_results_file`: the JSON file the task's command writes (`run.results_file`);
- `from_stdout_json`: the last JSON object the re-run printed (`run.answer = stdout_json`, AutoExperiment);
- `from_checks`: the user's `OutputCheck`s (RExBench);
- `from_expected_outcome`: the numbers of the expected outcome (EXP-Bench, `run.agent_script`), or, where it is
  prose, a hand-over to the `execution-llm` judge.

Every value compared here was written by the agent's code, so none is trusted to be a sane number: a value counts
as a number only when it is an int or float (never a bool) that a float holds and is finite (`as_number`); a
400-digit integer, NaN or an infinity matches nothing. The results file is read through the one bounded reader
for agent JSON (`load_untrusted_json`): past `MAX_RESULTS_BYTES`, nested past 100 levels, holding an integer a
float cannot hold (past 4,300 digits Python cannot even parse it) or a lone surrogate, it is unreadable, which is
the run's `runtime_error`. What is stored of an observed value is bounded too (`shown`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from failatlas.bench_core.scoring.answers import (
    as_number,
    flatten,
    last_json_object,
    observed,
    printed_answer,
    shown,
)
from failatlas.bench_core.scoring.checks import evaluate_checks
from failatlas.bench_core.scoring.outcome_numbers import answer_cap, answer_numbers, expected_numbers, match_numbers
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import InputError
from failatlas.core.importers import MAX_JSON_DEPTH, load_untrusted_json

JUDGE_OUTPUT_CHARS = 12_000
MAX_RESULTS_BYTES = 16 * 1024 * 1024


@dataclass
class Compared:
    """One comparison's result. `outcome`: `passed`, the failure it implies (`wrong_value`, `runtime_error`,
    `fabricated_result`), or `not_scored` when it could not decide (prose for the judge)."""

    metrics: dict = field(default_factory=dict)
    outcome: str = "passed"
    problem: str = ""


def isclose(observed: object, expected: float, rtol: float, atol: float) -> bool:
    """numpy.isclose semantics: |observed - expected| <= atol + rtol * |expected|; False for anything
    `as_number` does not take (and for a non-finite expected value)."""
    number = as_number(observed)
    if number is None or not math.isfinite(expected):
        return False
    return abs(number - expected) <= atol + rtol * abs(expected)


def _exactly(observed: object, expected: object) -> bool:
    """An `exact` criterion: equal values of the same kind (a number equals a number, a string a string, a bool a
    bool)."""
    for kind in (str, bool):
        if isinstance(expected, kind) or isinstance(observed, kind):
            return isinstance(expected, kind) and isinstance(observed, kind) and observed == expected
    number = as_number(observed)
    return number is not None and number == as_number(expected)


def compare_metrics(task: TaskSpec, results: dict) -> tuple[bool, dict]:
    """Compare observed results with the task's expectations; returns (all ok, per-metric detail)."""
    detail: dict = {}
    for m in task.expected_results:
        observed = results.get(m.name)
        ok = isclose(observed, m.value, m.rtol, m.atol)
        detail[m.name] = {"observed": shown(observed), "expected": m.value, "rtol": m.rtol, "atol": m.atol,
                          "ok": ok}
    crit = task.success
    if crit is not None:
        observed = results.get(crit.metric)
        if crit.kind == "exact":
            ok = _exactly(observed, crit.value)
            expected = crit.value
        elif crit.kind == "tolerance":
            target = as_number(crit.value)
            ok = target is not None and isclose(observed, target, crit.rtol, crit.atol)
            expected = crit.value
        else:
            low, high = min(crit.oracle_values) - crit.band, max(crit.oracle_values) + crit.band
            number = as_number(observed)
            ok = number is not None and low <= number <= high
            expected = [low, high]
        detail[crit.metric] = {"observed": shown(observed), "expected": expected, "criterion": crit.kind,
                               "ok": ok}
    return bool(detail) and all(d["ok"] for d in detail.values()), detail


def claimed_results(diff: str, results_file: str) -> dict | None:
    """The results the agent's own changes carry (the file's content as added by the diff), if any."""
    marker = f"+++ b/{results_file}"
    if marker not in diff:
        return None
    lines = []
    for line in diff.split(marker, 1)[1].splitlines()[1:]:
        if line.startswith("diff --git "):
            break
        if line.startswith("+"):
            lines.append(line[1:])
    try:
        value = load_untrusted_json("\n".join(lines), results_file, max_depth=MAX_JSON_DEPTH)
    except InputError:
        return None
    return value if isinstance(value, dict) else None


def disagreements(task: TaskSpec, claimed: dict, observed: dict) -> list[str]:
    """Metrics whose claimed value differs from what the clean re-run produced (beyond the metric's tolerance)."""
    names = [(m.name, m.rtol, m.atol) for m in task.expected_results]
    if task.success is not None:
        names.append((task.success.metric, task.success.rtol, task.success.atol))
    out = []
    for name, rtol, atol in names:
        c, o = as_number(claimed.get(name)), as_number(observed.get(name))
        if c is None:
            continue
        if o is None:
            out.append(f"{name}: claimed {c}, the re-run produced none")
        elif not isclose(c, o, max(rtol, 1e-6), atol):
            out.append(f"{name}: claimed {c}, re-run {o}")
    return out


def answer_source(task: TaskSpec) -> str | None:
    """Where the observed values of the task's expected metrics come from: `run.answer` when set, else the
    results file when the task names one, else the re-run's stdout; None when nothing is expected."""
    if not (task.expected_results or task.success):
        return None
    if task.run.answer:
        return task.run.answer
    return "results_file" if task.run.results_file else "stdout_json"


def _metric_names(task: TaskSpec) -> list[str]:
    return [m.name for m in task.expected_results] + ([task.success.metric] if task.success else [])


def _judged(task: TaskSpec, results: dict, claimed: dict | None, what: str) -> Compared:
    """Compare `results` with the task's metrics; a `claimed` value the re-run contradicts makes it fabricated."""
    ok, metrics = compare_metrics(task, results)
    lies = disagreements(task, claimed, results) if claimed else []
    if lies:
        return Compared(metrics, "fabricated_result", f"the agent's {what} disagrees with the clean re-run: "
                        + "; ".join(lies))
    if not ok:
        wrong = [k for k, d in metrics.items() if not d["ok"]]
        return Compared(metrics, "wrong_value", "metrics off their expected values: " + ", ".join(wrong))
    return Compared(metrics)


def from_results_file(task: TaskSpec, sandbox, workdir: str, outputs: dict, results_in_diff: bool
                      ) -> Compared | None:
    """The task's metrics against the results file the re-run wrote."""
    if answer_source(task) != "results_file":
        return None
    rel = task.run.results_file
    if not rel:
        return Compared(compare_metrics(task, {})[1], "runtime_error",
                        "the task reads its results from a results file but names none")
    try:
        data = sandbox.read_file(f"{workdir}/{rel}", max_bytes=MAX_RESULTS_BYTES + 1)
    except (FileNotFoundError, LookupError):
        return Compared(compare_metrics(task, {})[1], "fabricated_result" if results_in_diff else "runtime_error",
                        f"the re-run exited 0 but did not write {rel}")
    except PermissionError as exc:  # SandboxPathError: a folder, FIFO or link where the results file belongs
        return Compared(compare_metrics(task, {})[1], "runtime_error", f"{rel} is not a readable file: {exc}")
    if len(data) > MAX_RESULTS_BYTES:
        return Compared(compare_metrics(task, {})[1], "runtime_error",
                        f"{rel} is larger than {MAX_RESULTS_BYTES // 2**20} MiB: not read")
    try:
        results = load_untrusted_json(data, rel)
    except InputError as exc:
        return Compared(compare_metrics(task, {})[1], "runtime_error", f"unreadable results: {exc}")
    results = results if isinstance(results, dict) else {}
    claimed = claimed_results(outputs.get("diff") or "", rel) if results_in_diff else None
    return _judged(task, results, claimed, "results file")


def from_stdout_json(task: TaskSpec, stdout: str, outputs: dict) -> Compared | None:
    """The task's metrics against the last JSON object the re-run printed; the agent's conclusion, when it holds
    an answer too, must agree with it."""
    if answer_source(task) != "stdout_json":
        return None
    experiments = {m.experiment for m in task.expected_results if m.experiment}
    names = _metric_names(task)
    printed = printed_answer(stdout, experiments)
    claim = printed_answer(outputs.get("conclusion"), experiments)
    claimed = observed(claim, names) if claim else None
    if printed is None:
        note = " (the agent's conclusion holds one)" if claimed else ""
        return Compared(compare_metrics(task, {})[1], "wrong_value", f"no JSON answer in the output{note}")
    return _judged(task, observed(printed, names), claimed, "conclusion")


def from_checks(task: TaskSpec, sandbox, workdir: str, stdout: str, carried: set[str]) -> Compared | None:
    """Every user-supplied check; a check file the agent's diff carried and the re-run did not write is
    fabricated."""
    if not task.checks:
        return None
    metrics = evaluate_checks(task.checks, sandbox, workdir, stdout)
    failed = [c for c in task.checks if not metrics[c.name]["ok"]]
    if not failed:
        return Compared(metrics)
    fabricated = any(c.file in carried and metrics[c.name].get("observed") is None for c in failed)
    why = ", ".join(f"{c.name} ({metrics[c.name].get('problem') or 'observed ' + repr(metrics[c.name]['observed'])})"
                    for c in failed)
    return Compared(metrics, "fabricated_result" if fabricated else "wrong_value", "checks failed: " + why)


def from_expected_outcome(task: TaskSpec, stdout: str, stderr: str) -> Compared | None:
    """EXP-Bench: the numbers of the expected outcome against the re-run's output (`outcome_numbers`); where the
    outcome has none, `not_scored` for the `execution-llm` judge to decide."""
    if not (task.run.agent_script and task.expected_conclusion) or task.expected_results or task.success \
            or task.checks:
        return None
    numbers = expected_numbers(task.expected_conclusion)
    if not numbers:
        return Compared({}, "not_scored", "the expected outcome is prose: the execution-llm judge compares the "
                        "re-run's output with it")
    answer = last_json_object(stdout)
    if answer is None:
        return Compared({}, "wrong_value", "no JSON answer in the output: the run script must end by printing its "
                        f"results as one JSON object ({len(numbers)} expected number(s) unchecked)")
    values = answer_numbers(flatten(answer))
    if values.size > answer_cap(len(numbers)):
        return Compared({}, "wrong_value", f"the answer holds {values.size} numbers for {len(numbers)} expected "
                        f"result(s) (at most {answer_cap(len(numbers))}): a spread of values is not an answer")
    ok, metrics = match_numbers(numbers, values)
    if ok:
        return Compared(metrics)
    missing = [k for k, d in metrics.items() if not d["ok"]]
    return Compared(metrics, "wrong_value", "expected numbers not in the re-run's answer: " + ", ".join(missing))


def judge_excerpt(stdout: str, stderr: str) -> str:
    """The end of the re-run's output, as the execution judge reads it."""
    half = JUDGE_OUTPUT_CHARS // 2
    return f"stdout (end):\n{stdout[-half:]}\n\nstderr (end):\n{stderr[-half:]}"
