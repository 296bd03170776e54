"""AutoExperiment's E rules: the task's metrics in the last JSON answer the re-run printed (`run.answer =
stdout_json`), or, where the task's own command prints logs rather than an answer, read where the reference's own run
of that command showed them (`answer-reader`, a reader derived from the reference: `evidence/reference_answer.py`).
The agent's conclusion, when it holds an answer too, must agree with the printed one."""

from __future__ import annotations

from failatlas.bench_core.scoring.answers import observed, printed_answer
from failatlas.bench_core.scoring.erules.base import (
    Compared,
    Seen,
    answer_source,
    compare_metrics,
    judged,
    metric_names,
)
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import InputError

MAX_TEXT = 1024 * 1024  # a file a reader reads (the reference's own run wrote it)


class StdoutJson:
    name = "stdout-json"
    order = 20

    def files(self, task: TaskSpec, reader) -> dict[str, int]:  # noqa: ANN001
        return {}

    def compare(self, task: TaskSpec, seen: Seen) -> Compared | None:
        """The task's metrics against the last JSON object the re-run printed."""
        if seen.reader is not None or answer_source(task) != "stdout_json":
            return None
        experiments = {m.experiment for m in task.expected_results if m.experiment}
        names = metric_names(task)
        printed = printed_answer(seen.stdout, experiments)
        claim = printed_answer(seen.outputs.get("conclusion"), experiments)
        claimed = observed(claim, names) if claim else None
        if printed is None:
            note = " (the agent's conclusion holds one)" if claimed else ""
            return Compared(compare_metrics(task, {})[1], "wrong_value", f"no JSON answer in the output{note}")
        return judged(task, observed(printed, names), claimed, "conclusion")


class AnswerReader:
    name = "answer-reader"
    order = 21

    def files(self, task: TaskSpec, reader) -> dict[str, int]:  # noqa: ANN001
        if reader is None:
            return {}
        return {source: MAX_TEXT for source in dict.fromkeys(loc.source for loc in reader.locators)
                if source != "stdout"}

    def compare(self, task: TaskSpec, seen: Seen) -> Compared | None:
        """The task's metrics read from the re-run where the reference's own run showed them."""
        reader = seen.reader
        if reader is None:
            return None
        files = {}
        for source in self.files(task, reader):
            try:
                files[source] = seen.files.read_file(f"{seen.workdir}/{source}", max_bytes=MAX_TEXT).decode(
                    errors="replace")
            except (FileNotFoundError, LookupError, PermissionError, InputError):
                continue  # not written, or a folder, FIFO or link there: what the agent's code can cause
        ok, detail = compare_metrics(task, reader.values(seen.stdout, files))
        if ok:
            return Compared(detail)
        missing = [name for name, row in detail.items() if row.get("observed") is None]
        problem = ("not shown where the reference's own run shows it: " + ", ".join(missing[:5])) if missing else \
            "values off: " + ", ".join(name for name, row in detail.items() if not row["ok"])
        return Compared(detail, "wrong_value", problem)


def from_stdout_json(task: TaskSpec, stdout: str, outputs: dict) -> Compared | None:
    """The `stdout-json` rule on a re-run that printed `stdout`, with the agent's `outputs` (its conclusion)."""
    return StdoutJson().compare(task, Seen(files=None, workdir="", stdout=stdout, stderr="", outputs=outputs,
                                           carried=set()))
