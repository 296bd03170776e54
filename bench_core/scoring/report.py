"""`failatlas bench report`: metric tables per agent, model, task or benchmark, as Markdown, CSV and LaTeX."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from failatlas.bench_core.scoring.metrics import CONJUNCTIVE, PHASES, run_scores, summarise
from failatlas.core.errors import NotFoundError
from failatlas.core.store import Store
from failatlas.core.tables import fmt, to_csv, to_latex, to_markdown

GROUPINGS = {"agent": ["agent", "model"], "task": ["task_id", "agent", "model"], "benchmark": ["benchmark", "agent"],
             "fault": ["fault_injected", "agent"]}
METRICS = (*PHASES, *CONJUNCTIVE)


def report_table(store: Store, *, by: str = "agent", k: int | None = None, n_boot: int = 1000,
                 seed: int = 0) -> pl.DataFrame:
    if by not in GROUPINGS:
        raise NotFoundError(f"unknown grouping '{by}'", hint="use one of: " + ", ".join(GROUPINGS))
    scores = run_scores(store)
    if scores.height == 0:
        raise NotFoundError("no scored runs in the store",
                            hint="run `failatlas bench run` then `failatlas bench score`")
    return summarise(scores, GROUPINGS[by], n_boot=n_boot, seed=seed, k=k)


def _rows(table: pl.DataFrame, by: str, with_ci: bool, with_n: bool = True) -> tuple[list[str], list[list[object]]]:
    keys = GROUPINGS[by]
    extra = [c for c in table.columns if c.startswith("pass")]
    headers = [*keys, "runs", *METRICS, *extra]
    rows = []
    for r in table.iter_rows(named=True):
        row: list[object] = [r[k] or "–" for k in keys] + [r["runs"]]
        for m in METRICS:
            if r[f"{m}_n"] == 0:
                row.append("–")
            elif with_ci:
                cell = f"{fmt(r[m])} [{fmt(r[m + '_lo'])}, {fmt(r[m + '_hi'])}]"
                row.append(f"{cell} (n={r[m + '_n']})" if with_n else cell)
            else:
                row.append(r[m])
        row += [r[e] for e in extra]
        rows.append(row)
    return headers, rows


def write_report(table: pl.DataFrame, by: str, out_dir: Path) -> list[Path]:
    """Write report.md, report.csv (numbers, CIs and denominators as columns) and report.tex."""
    out_dir.mkdir(parents=True, exist_ok=True)
    headers, rows = _rows(table, by, with_ci=True)
    md = out_dir / f"report_by_{by}.md"
    md.write_text(to_markdown(headers, rows))
    tex = out_dir / f"report_by_{by}.tex"
    _, tex_rows = _rows(table, by, with_ci=True, with_n=False)  # denominators are in the CSV and Markdown
    tex.write_text(to_latex(headers, tex_rows, caption=f"Phase and conjunctive scores by {by} (95% bootstrap CI).",
                            label=f"tab:failatlas-scores-{by}", align="l" * len(GROUPINGS[by]) + "r" * (len(headers)
                            - len(GROUPINGS[by]))))
    csv = out_dir / f"report_by_{by}.csv"
    csv.write_text(to_csv(table.columns, table.rows()))
    return [md, csv, tex]


def render_terminal(table: pl.DataFrame, by: str) -> tuple[list[str], list[list[object]]]:
    return _rows(table, by, with_ci=False)
