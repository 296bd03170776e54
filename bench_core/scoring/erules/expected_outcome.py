"""EXP-Bench's E rule: the numbers of the expected outcome against the answer the agent's run script printed
(`outcome_numbers`); where the outcome has none, `not_scored`, handed to the `execution-llm` check."""

from __future__ import annotations

from failatlas.bench_core.scoring.answers import flatten, last_json_object
from failatlas.bench_core.scoring.erules.base import Compared, Seen
from failatlas.bench_core.scoring.outcome_numbers import answer_cap, answer_numbers, expected_numbers, match_numbers
from failatlas.bench_core.tasks.model import TaskSpec


class ExpectedOutcome:
    name = "expected-outcome"
    order = 40

    def files(self, task: TaskSpec, reader) -> dict[str, int]:  # noqa: ANN001
        return {}

    def compare(self, task: TaskSpec, seen: Seen) -> Compared | None:
        if not (task.run.agent_script and task.expected_conclusion) or task.expected_results or task.success \
                or task.checks:
            return None
        numbers = expected_numbers(task.expected_conclusion)
        if not numbers:
            return Compared({}, "not_scored", "the expected outcome is prose: the execution-llm judge compares the "
                            "re-run's output with it")
        answer = last_json_object(seen.stdout)
        if answer is None:
            return Compared({}, "wrong_value", "no JSON answer in the output: the run script must end by printing "
                            f"its results as one JSON object ({len(numbers)} expected number(s) unchecked)")
        values = answer_numbers(flatten(answer))
        if values.size > answer_cap(len(numbers)):
            return Compared({}, "wrong_value", f"the answer holds {values.size} numbers for {len(numbers)} "
                            f"expected result(s) (at most {answer_cap(len(numbers))}): a spread of values is not "
                            "an answer")
        ok, metrics = match_numbers(numbers, values)
        if ok:
            return Compared(metrics)
        missing = [k for k, d in metrics.items() if not d["ok"]]
        return Compared(metrics, "wrong_value", "expected numbers not in the re-run's answer: " + ", ".join(missing))


def from_expected_outcome(task: TaskSpec, stdout: str, stderr: str = "") -> Compared | None:
    """The rule on a re-run that printed `stdout` (nothing else of it is read)."""
    return ExpectedOutcome().compare(task, Seen(files=None, workdir="", stdout=stdout, stderr=stderr, outputs={},
                                                carried=set()))
