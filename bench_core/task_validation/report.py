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


def method_cell(verdict: TaskVerdict) -> str:
    """`0.90 (9/10, 2 declared, 1 equivalent)`: the method mutation score with killed / judged method mutants, how
    many of them the task file declared, and generic ones equivalent on its outputs; `–` with none measured."""
    m = verdict.method_mutation
    if m is None or m.score is None:
        return "–"
    same = f", {m.equivalent} equivalent" if m.equivalent else ""
    return f"{m.score:.2f} ({m.killed}/{m.killed + m.survived}, {m.declared} declared{same})"


def task_rows(result: ValidateResult) -> tuple[list[str], list[list[object]]]:
    headers = ["task", "benchmark", "status", "reason", "next step", "syntax mutation score", "surviving mutants",
               "method mutation score", "surviving method mutants", "tolerance warnings", "gold run", "null run"]
    return headers, [[v.task_id, v.benchmark, v.status, v.reason, v.next_step, mutation_cell(v),
                      "; ".join(v.mutation.survivors) if v.mutation else "", method_cell(v),
                      "; ".join(v.method_mutation.survivors) if v.method_mutation else "",
                      len(v.method_mutation.warnings) if v.method_mutation else 0,
                      v.gold_run_id or "", v.null_run_id or ""] for v in result.verdicts]


def mutation_rows(result: ValidateResult) -> tuple[list[str], list[list[object]]]:
    """(headers, rows): one row per task with a mutation score, syntax and method side by side."""
    headers = ["task", "syntax mutation score", "method mutation score", "method survivors", "tolerance warnings"]
    return headers, [[v.task_id, mutation_cell(v), method_cell(v),
                      len(v.method_mutation.survivors) if v.method_mutation else 0,
                      len(v.method_mutation.warnings) if v.method_mutation else 0]
                     for v in result.verdicts if v.mutation or v.method_mutation]


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


PHASES = ("D", "I", "E", "C")


def _phase_cell(phases: dict[str, int | None] | None) -> str:
    """`D1 I1 E1 C-`: each checked phase's 1 or 0, `-` where it was not checked."""
    if not phases:
        return "–"
    return " ".join(f"{p}{'-' if phases.get(p) is None else phases[p]}" for p in PHASES)


def folder_bytes(path: Path) -> int:
    """Bytes a file or folder takes on disk (allocated blocks; links not followed); 0 when it is not there."""
    total = 0
    try:
        if path.is_file():
            return path.stat().st_blocks * 512
        for here, dirs, files in os.walk(path):
            for name in [*dirs, *files]:
                try:
                    total += os.lstat(os.path.join(here, name)).st_blocks * 512
                except OSError:
                    continue
    except OSError:
        return total
    return total


def paper_rows(verdicts: list[TaskVerdict]) -> tuple[list[str], list[list[object]]]:
    """One row per task of a paper: status, cause in one line, next step, gold's and null's phases, mutation
    score, seconds of its runs and re-runs."""
    headers = ["task", "status", "cause", "next step", "gold", "null", "mutation score", "method mutation score",
               "seconds"]
    return headers, [[v.task_id, v.status, v.reason, v.next_step or "–", _phase_cell(v.phases.get("gold")),
                      _phase_cell(v.phases.get("null")), mutation_cell(v), method_cell(v),
                      "–" if v.seconds is None else f"{v.seconds:.0f}"] for v in verdicts]


def write_paper_reports(result: ValidateResult, out: Path, *, wall_s: float, disk: dict[str, int]) -> list[Path]:
    """`paper_<id>.md` and `.json` per paper of `result` into `out`: its statuses, then each task's row
    (`paper_rows`), the call's wall time and what its folders take on disk (`disk`: name -> bytes)."""
    out.mkdir(parents=True, exist_ok=True)
    papers: dict[str, list[TaskVerdict]] = {}
    for v in result.verdicts:
        papers.setdefault(v.paper_id or "(no paper)", []).append(v)
    written = []
    for paper, verdicts in papers.items():
        counts: dict[str, int] = {}
        for v in verdicts:
            counts[v.status] = counts.get(v.status, 0) + 1
        valid = counts.get("valid", 0)
        headers, rows = paper_rows(verdicts)
        lines = [f"# Paper {paper}: task validation", "",
                 f"{len(verdicts)} task(s): " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items(),
                                                                                       key=lambda kv: -kv[1]))
                 + f" ({100 * valid / len(verdicts):.0f}% valid)", "",
                 f"Wall time of the call: {wall_s:.0f} s. Disk: "
                 + ", ".join(f"{name} {size / 2**20:.0f} MiB" for name, size in disk.items()) + ".", "",
                 "Phases: D design, I implementation, E execution, C conclusion; 1 passed, 0 failed, - not "
                 "checked. Seconds: the gold and null runs and their clean re-runs.", "",
                 to_markdown(headers, rows), ""]
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in paper)[:80]
        md, js = out / f"paper_{safe}.md", out / f"paper_{safe}.json"
        _write(md, "\n".join(lines))
        _write(js, json.dumps({"paper": paper, "counts": counts, "wall_s": round(wall_s, 1), "disk": disk,
                               "tasks": [v.model_dump() for v in verdicts]}, indent=1))
        written += [md, js]
    return written


def footprint(store, params) -> dict[str, int]:  # noqa: ANN001
    """What a validation's folders take on disk, by name: the store file, the runs' workspaces, the task
    environments (venvs), the derived tests' recordings, the repository cache."""
    from failatlas.bench_core.runs import runs_dir_for
    from failatlas.bench_core.sandbox.venvs import env_root

    base = Path(store.path).resolve().parent
    return {"store": folder_bytes(Path(store.path)), "runs": folder_bytes(runs_dir_for(store, params.runs_dir)),
            "venvs": folder_bytes(env_root(store.path)), "recordings": folder_bytes(base / "derived-tests"),
            "repositories": folder_bytes(base / "repos")}
