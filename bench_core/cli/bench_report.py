"""`failatlas bench report`: phase and conjunctive scores with their intervals in the terminal, and the notes a
reader of them needs; `--out` writes them as Markdown, CSV and LaTeX (thin: compute, print)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from failatlas.core.cli import console, store
from failatlas.core.errors import ConfigError


def report(
    by: Annotated[list[str] | None, typer.Option(
        help="Group by agent, task, benchmark, fault, paper, setting (benchmark, task kind, setting and "
        "number of masked functions n), kind (task kind) or n. Repeat it (or separate by commas) for several "
        "breakdowns in one call: with --out, each writes its own report_by_<grouping> files.")] = None,
    k: Annotated[int | None, typer.Option(
        help="Also compute pass@k and pass^k over attempts (k >= 1; a task counts once it has k scored attempts).")
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Write Markdown, CSV and LaTeX tables to this folder.")] = None,
) -> None:
    """Phase scores (M, D, I, E, C) and conjunctive scores with 95% Wilson intervals; see docs/metrics.md. Below the
    table: per agent, the runs stored and how many each denominator holds, a warning for runs in no score, and
    the runs whose E is not scored because this environment cannot run their task."""
    groupings = list(dict.fromkeys(g.strip() for value in by or ["agent"] for g in value.split(",") if g.strip()))
    if k is not None and k < 1:
        raise ConfigError(f"--k {k}: pass@k needs k >= 1 (k attempts per task)")
    _report(groupings or ["agent"], k, out)


def _report(groupings: list[str], k: int | None, out: Path | None) -> None:
    from failatlas.bench_core.scoring.metrics import run_scores
    from failatlas.bench_core.scoring.report import (
        attempts_note,
        check_report_folder,
        report_notes,
        report_table,
        write_report,
    )

    if out:
        check_report_folder(out)  # before the scores are computed, not after
    s = store(create=False)
    scores = run_scores(s)
    tables = {by: report_table(s, by=by, k=k, scores=scores) for by in groupings}  # all checked first
    notes = report_notes(s, scores)
    for by, table in tables.items():
        if len(tables) > 1:
            console.print(f"[bold]by {escape(by)}[/]", highlight=False)
        for t in report_tables(table, by):
            console.print(t)
        if k and (line := attempts_note(table, scores, by, k)):
            console.print(escape(line), highlight=False)
    for line in notes:  # wrapped at the terminal's width, as the tables above are
        style = "yellow" if line.startswith("warning:") else "default"
        console.print(f"[{style}]{escape(line)}[/]", highlight=False)
    if out:
        for by, table in tables.items():
            line = attempts_note(table, scores, by, k) if k else None
            for path in write_report(table, by, out, [*notes, *([line] if line else [])]):
                console.print(f"wrote {path}")


def report_tables(table, by: str, width: int | None = None) -> list[Table]:  # noqa: ANN001 - polars frame
    """`bench report` in the terminal: one table per family of scores (phases, conjunctive, pass@k), as in the
    LaTeX export, each with its 95% CIs: a cell is the mean over its interval (lo–hi), `–` where no run was
    scored (E: with the runs left out for this environment). Laid out by `split_columns` on `width` columns: no
    score column is ever dropped (a family too wide is split into parts, or its group's columns joined into
    one), and a group's name is never broken inside a word. A group column no run has a value for is left out
    (the grouping's own: a note under the first table says so); one with the same value in every row is said
    once, in the titles."""
    from failatlas.bench_core.scoring.metrics import CONJUNCTIVE, PHASES
    from failatlas.bench_core.scoring.report import DIMENSION, GROUPINGS, NO_DIMENSION, score_interval_text
    from failatlas.core.cli import split_columns
    from failatlas.core.tables import fmt

    rows = list(table.iter_rows(named=True))

    def name(r: dict, key: str) -> str:
        return escape(str(r[key])) if r[key] not in (None, "") else "–"

    keys = [k for k in GROUPINGS[by] if any(r[k] not in (None, "") for r in rows)] or GROUPINGS[by][:1]
    note = None if DIMENSION[by] in keys else NO_DIMENSION[DIMENSION[by]]
    # a group column with one value in every row (one benchmark's runs) is said once, in the titles
    same = [k for k in keys if len(rows) > 1 and len({name(r, k) for r in rows}) == 1][:len(keys) - 1]
    keys = [k for k in keys if k not in same]
    said = "; ".join(f"{k} {name(rows[0], k)}" for k in same)
    families = [("phase scores, mean and 95% CI", PHASES), ("conjunctive scores, mean and 95% CI", tuple(CONJUNCTIVE))]
    extra = tuple(c for c in table.columns if c.startswith("pass"))
    if extra:
        families.append(("pass@k and pass^k over attempts (M·C·D·I·E)", extra))
    if "cheat_n" in table.columns and table["cheat_n"].sum():  # runs of impossible twins (docs/metrics.md)
        families.append(("cheat rate on impossible twins, mean and 95% CI (n: twin runs)", ("cheat",)))
    tables = []
    for title, metrics in families:
        cells = []
        for r in rows:
            runs = str(r["runs"]) if r.get("stored", r["runs"]) == r["runs"] else f"{r['runs']} of {r['stored']}"
            line = [name(r, k) for k in keys] + [runs]
            for m in metrics:
                if m in extra:
                    line.append("–" if r[m] is None else fmt(r[m]))
                elif not r[f"{m}_n"]:
                    line.append(f"– (left out {r['E_env_n']})" if m == "E" and r.get("E_env_n") else "–")
                else:
                    line.append(f"{fmt(r[m])}\n{score_interval_text(r, m)}"
                                + (f"\nn={r['cheat_n']}" if m == "cheat" else ""))
            cells.append(line)
        tables += split_columns([*keys, "runs", *metrics], cells, names=len(keys), keep=1,
                                title=f"{title}; {said}" if said else title, width=width,
                                note=note if not tables else None)
    return tables
