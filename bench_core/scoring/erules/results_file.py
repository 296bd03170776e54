"""The E rule of tasks whose command writes a JSON results file (`run.results_file`; the mini-suite's tasks): the
task's metrics against the file the re-run wrote, and a results file the agent's diff carried must agree with it."""

from __future__ import annotations

from failatlas.bench_core.scoring.erules.base import (
    MAX_RESULTS_BYTES,
    Compared,
    Seen,
    answer_source,
    claimed_results,
    compare_metrics,
    judged,
)
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import InputError
from failatlas.core.importers import load_untrusted_json


class ResultsFile:
    name = "results-file"
    order = 10

    def files(self, task: TaskSpec, reader) -> dict[str, int]:  # noqa: ANN001
        rel = task.run.results_file
        return {rel: MAX_RESULTS_BYTES + 1} if rel and answer_source(task) == "results_file" else {}

    def compare(self, task: TaskSpec, seen: Seen) -> Compared | None:
        """The task's metrics against the results file the re-run wrote."""
        if answer_source(task) != "results_file":
            return None
        rel = task.run.results_file
        if not rel:
            return Compared(compare_metrics(task, {})[1], "runtime_error",
                            "the task reads its results from a results file but names none")
        try:
            data = seen.files.read_file(f"{seen.workdir}/{rel}", max_bytes=MAX_RESULTS_BYTES + 1)
        except (FileNotFoundError, LookupError):
            return Compared(compare_metrics(task, {})[1],
                            "fabricated_result" if seen.results_in_diff else "runtime_error",
                            f"the re-run exited 0 but did not write {rel}")
        except PermissionError as exc:  # a folder, FIFO or link where the results file belongs
            return Compared(compare_metrics(task, {})[1], "runtime_error", f"{rel} is not a readable file: {exc}")
        if len(data) > MAX_RESULTS_BYTES:
            return Compared(compare_metrics(task, {})[1], "runtime_error",
                            f"{rel} is larger than {MAX_RESULTS_BYTES // 2**20} MiB: not read")
        try:
            results = load_untrusted_json(data, rel)
        except InputError as exc:
            return Compared(compare_metrics(task, {})[1], "runtime_error", f"unreadable results: {exc}")
        results = results if isinstance(results, dict) else {}
        claimed = claimed_results(seen.outputs.get("diff") or "", rel) if seen.results_in_diff else None
        return judged(task, results, claimed, "results file")
