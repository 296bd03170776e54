"""The tables of a task validation: counts per benchmark and status, and one row per task (Markdown, CSV, JSON)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from failatlas.bench_core.task_validation.model import STATUSES, TaskVerdict, ValidateResult
from failatlas.core.tables import to_csv, to_markdown


def counts_table(result: ValidateResult) -> tuple[list[str], list[list[object]]]:
    """(headers, rows): one row per benchmark, one column per status that occurs, and the total."""
    counts = result.counts()
    present = [s for s in STATUSES if any(s in c for c in counts.values())]
    rows: list[list[object]] = [[b, *(c.get(s, 0) for s in present), sum(c.values())] for b, c in counts.items()]
    if len(rows) > 1:
        rows.append(["all", *(sum(c.get(s, 0) for c in counts.values()) for s in present),
                     sum(sum(c.values()) for c in counts.values())])
    return ["benchmark", *present, "tasks"], rows


def mutation_cell(verdict: TaskVerdict) -> str:
    """`0.95 (19/20, 3 equivalent)`: the mutation score with killed / judged mutants and those equivalent on the
    task's outputs; `–` with none measured."""
    m = verdict.mutation
    if m is None or m.score is None:
        return "–"
    same = f", {m.equivalent} equivalent" if m.equivalent else ""
    return f"{m.score:.2f} ({m.killed}/{m.killed + m.survived}{same})"


def task_rows(result: ValidateResult) -> tuple[list[str], list[list[object]]]:
    headers = ["task", "benchmark", "status", "reason", "mutation score", "surviving mutants", "gold run",
               "null run"]
    return headers, [[v.task_id, v.benchmark, v.status, v.reason, mutation_cell(v),
                      "; ".join(v.mutation.survivors) if v.mutation else "", v.gold_run_id or "", v.null_run_id or ""]
                     for v in result.verdicts]


def _write(path: Path, text: str) -> None:
    """Write all or nothing: a temporary file beside `path`, renamed over it."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_report(result: ValidateResult, out: Path) -> list[Path]:
    """`task_validation.md` (counts, then every task), `.csv` (every task) and `.json` into folder `out`."""
    out.mkdir(parents=True, exist_ok=True)
    headers, rows = counts_table(result)
    t_headers, t_rows = task_rows(result)
    legend = [[status, meaning] for status, meaning in STATUSES.items()]
    markdown = ("# Task validation\n\n" + to_markdown(headers, rows) + "\n\n## Statuses\n\n"
                + to_markdown(["status", "meaning"], legend) + "\n\n## Tasks\n\n" + to_markdown(t_headers, t_rows)
                + "\n")
    files = {"task_validation.md": markdown, "task_validation.csv": to_csv(t_headers, t_rows),
             "task_validation.json": json.dumps({"counts": result.counts(),
                                                 "tasks": [v.model_dump() for v in result.verdicts]}, indent=1)}
    written = []
    for name, text in files.items():
        _write(out / name, text)
        written.append(out / name)
    return written
