"""A task's method mutation score, and the tolerances its method mutants show to be too wide (issue 50).

Syntax mutants (`mutation.py`) test whether the checks notice a small change to the reference; a check of an
outcome that another method also reaches passes that method. So each valid task also runs its **method mutants**
(`agents/method_mutant.py`: the task file's declared ones, then generic ones made from every masked function), up
to `ValidateParams.method_mutants`, each as the `method-mutant` agent and scored by the ordinary stage. A method
mutant is

- killed when I rejects it (a hidden or derived test fails) or E does (a re-run value outside its tolerance, a
  crash, a timeout);
- survived when both accept it (every check that ran);
- equivalent, in neither count, only when it is generic, survived, and its clean re-run reported exactly gold's
  values (a `defaults` mutant that drops `indent=` from `json.dump`): a declared mutant is its author's word that it
  is another method, so one that passes is a survivor whatever its values;
- not scored when nothing could judge it.

**Tolerances from the effect.** For every method mutant whose re-run values all lie inside their tolerances (whatever
I says: scoring reports a passing E beside failing tests as `fabricated_result`), `tolerance_warnings` compares each
metric of its re-run with gold's re-run: a metric that moved but stayed inside its tolerance, or a declared mutant whose
values did not move at all, is a warning naming the metric, the gap, the tolerance and whether I still rejects the
mutant: the expected values alone would let that method pass.
"""

from __future__ import annotations

from collections.abc import Callable

from failatlas.bench_core.agents.method_mutant import MethodMutant, method_candidates
from failatlas.bench_core.scoring.answers import as_number
from failatlas.bench_core.task_validation.model import (
    VALID,
    MethodMutantResult,
    MethodMutationScore,
    TaskVerdict,
    ValidateParams,
)
from failatlas.bench_core.task_validation.mutation import (
    checks_of,
    fate,
    gold_run,
    metrics_of,
    mutation_score,
    reference_of,
    run_mutants,
)
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.store import Store

MAX_METRICS_SAID = 5  # a real task reports dozens of metrics: a warning names the first five it moved


def _gap(gold: object, mine: object) -> float | None:
    a, b = as_number(gold), as_number(mine)
    return None if a is None or b is None else abs(a - b)


def _room(row: dict) -> str:
    """What a metric's tolerance admits, in words: `±0.02 around 0.809`, `the band [0.7494, 0.7976]`."""
    expected = row.get("expected")
    if isinstance(expected, list) and len(expected) == 2:
        return f"the band [{expected[0]:.4g}, {expected[1]:.4g}]"
    number = as_number(expected)
    if number is None:
        return "exactly"
    allowed = float(row.get("atol") or 0) + float(row.get("rtol") or 0) * abs(number)
    return f"±{allowed:.4g} around {number:.6g}"


def _result(store: Store, mutant: MethodMutant, run_id: str | None, gold_metrics: dict) -> MethodMutantResult:
    if run_id is None:
        return MethodMutantResult(name=mutant.name, what=mutant.what, declared=mutant.declared, fate="not_scored")
    tests, outcome = checks_of(store, run_id)
    mine = metrics_of(store, run_id)
    verdict = fate(store, run_id)
    gold = {name: row.get("observed") for name, row in gold_metrics.items()}
    if verdict == "survived" and not mutant.declared and gold and \
            {name: row.get("observed") for name, row in mine.items()} == gold:
        verdict = "equivalent"
    i = None if not tests else ("failed" if any(p is False for p in tests) else "passed")
    gaps = {name: _gap(gold.get(name), row.get("observed")) for name, row in mine.items()}
    inside = all(bool(row.get("ok")) for row in mine.values()) if mine else None
    return MethodMutantResult(name=mutant.name, what=mutant.what, declared=mutant.declared, fate=verdict, i=i,
                              e=outcome, within_tolerance=inside, gaps=gaps)


def tolerance_warnings(results: list[MethodMutantResult], gold_metrics: dict) -> list[str]:
    """One line per method mutant that E's expected values admit (module docstring): the metrics it moved and by
    how much, each metric's tolerance, and whether I still rejects it."""
    lines = []
    for r in results:
        if not r.within_tolerance:  # its values, whatever I says (a passing E beside failing tests is reported
            continue                # as fabricated_result by scoring's consistency rule)
        moved = {name: gap for name, gap in r.gaps.items() if gap}
        if not moved and not r.declared:
            continue  # gold's values exactly: nothing a tolerance could do
        if moved:
            shown = list(moved.items())[:MAX_METRICS_SAID]
            said = "; ".join(f"{name} moved {gap:.4g} from gold's {gold_metrics.get(name, {}).get('observed')!r}, "
                             f"inside {_room(gold_metrics.get(name, {}))}" for name, gap in shown)
            said += f"; and {len(moved) - len(shown)} more metric(s)" if len(moved) > len(shown) else ""
        else:
            said = "its values equal gold's: the expected values cannot tell this method from the reference"
        also = {"failed": "I rejects it", "passed": "I passes it too"}.get(r.i or "", "I did not judge it")
        lines.append(f"tolerance admits {r.name} ({r.what}): {said} ({also})")
    return lines


def method_mutation_score(store: Store, task: TaskSpec, params: ValidateParams,
                          on_step: Callable[[str], None] | None = None) -> MethodMutationScore | None:
    """The method mutation score of one valid task (module docstring); None when `params.method_mutants` is 0 or
    the task has no method mutant. Raises InputError when a declared mutant is malformed (naming its field)."""
    if params.method_mutants <= 0:
        return None
    found = [m for m, _ in method_candidates(task, reference_of(store, task, params))][:params.method_mutants]
    if not found:
        return None
    ids = run_mutants(store, task, params, "method-mutant", [m.name for m in found], on_step)
    gold_metrics = metrics_of(store, gold_run(store, task.id))
    results = [_result(store, m, ids.get(m.name), gold_metrics) for m in found]
    killed = sum(r.fate == "killed" for r in results)
    survived = [r for r in results if r.fate == "survived"]
    equivalent = [r for r in results if r.fate == "equivalent"]
    judged = killed + len(survived)
    return MethodMutationScore(
        mutants=len(results), declared=sum(r.declared for r in results), killed=killed, survived=len(survived),
        not_scored=len(results) - judged - len(equivalent), equivalent=len(equivalent),
        score=killed / judged if judged else None, survivors=[f"{r.name}: {r.what}" for r in survived],
        equivalents=[f"{r.name}: {r.what}" for r in equivalent], results=results,
        warnings=tolerance_warnings(results, gold_metrics))


def add_mutation_scores(store: Store, tasks: list[TaskSpec], verdicts: dict[str, TaskVerdict], params: ValidateParams,
                        on_step: Callable[[str], None] | None = None) -> None:
    """Set the syntax and method mutation scores of each of `tasks` whose verdict is `valid` (a task whose gold
    fails, or whose null passes, has no score to speak of)."""
    for task in tasks:
        verdict = verdicts.get(task.id)
        if verdict is not None and verdict.status == VALID:
            verdict.mutation = mutation_score(store, task, params, on_step)
            verdict.method_mutation = method_mutation_score(store, task, params, on_step)
