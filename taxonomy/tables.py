"""Rendering the prevalence table as LaTeX (booktabs, ready to \\input), Markdown and CSV.

All three take the same frame (`prevalence_table`) and the same formatted cells, so they cannot disagree. Each is a
`TableFormat` registered in `TABLE_FORMATS` by its file suffix; `failatlas taxonomy export` writes every registered
one, so a new format is a class registered here (or in its own module imported by the package) and nothing else.
"""

from __future__ import annotations

from typing import Protocol

import polars as pl

from failatlas.core.registry import Registry
from failatlas.core.tables import latex_escape  # the one LaTeX escaping of every export


def pct(x: float | None) -> str:
    """A share as a percentage with one decimal ('12.3'); '' for missing."""
    return "" if x is None else f"{100 * x:.1f}"


def has_runs(frame: pl.DataFrame) -> bool:
    return "runs_total" in frame.columns and frame["runs_total"].drop_nulls().len() > 0


def one_line(text: str) -> str:
    """Text as one line: any run of whitespace (line breaks included) becomes one space, so a name with a line
    break cannot split a Markdown row or end a LaTeX paragraph inside the tabular."""
    return " ".join(text.split())


def display_rows(frame: pl.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Headers and formatted cells, one row per (phase, failure type), in the frame's order."""
    headers = ["Phase", "Category", "Failure type", "n", "Share (%)", "95% CI (%)"]
    runs = has_runs(frame)
    if runs:
        headers += ["Runs affected", "Runs (%)"]
    rows = []
    for r in frame.iter_rows(named=True):
        cells = [
            one_line(r["phase"]),
            one_line(r["category"] or ""),
            one_line(r["failure_type"] or r["failure_type_id"]),
            str(r["count"]),
            pct(r["share"]),
            f"{pct(r['ci_low'])}–{pct(r['ci_high'])}",
        ]
        if runs:
            affected = "" if r["runs_count"] is None else f"{r['runs_count']}/{r['runs_total']}"
            cells += [affected, pct(r["runs_share"])]
        rows.append(cells)
    return headers, rows


def to_markdown(frame: pl.DataFrame, *, title: str | None = None) -> str:
    """A GitHub-flavoured Markdown table (pipes in cells escaped)."""
    headers, rows = display_rows(frame)
    numeric = {"n", "Share (%)", "95% CI (%)", "Runs affected", "Runs (%)"}

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    out = [f"**{title}**", ""] if title else []
    out += [line(headers), "|" + "|".join("---:" if h in numeric else "---" for h in headers) + "|"]
    out += [line(r) for r in rows]
    return "\n".join(out) + "\n"


def to_latex(frame: pl.DataFrame, *, comment: str | None = None) -> str:
    """A booktabs `tabular` to \\input inside a table float; needs only \\usepackage{booktabs}. The phase is
    printed once per block of rows, blocks are separated by \\midrule."""
    headers, rows = display_rows(frame)
    align = "lllrrr" + ("rr" if len(headers) > 6 else "")
    out = [f"% {line}" for line in (comment or "").splitlines()]
    out += [f"\\begin{{tabular}}{{{align}}}", r"\toprule"]
    out.append(" & ".join(latex_escape(h) for h in headers) + r" \\")
    out.append(r"\midrule")
    previous = None
    for cells in rows:
        phase = cells[0]
        if previous is not None and phase != previous:
            out.append(r"\midrule")
        shown = [latex_escape(phase) if phase != previous else ""] + [latex_escape(c) for c in cells[1:]]
        shown = [s.replace("–", "--") for s in shown]
        out.append(" & ".join(shown) + r" \\")
        previous = phase
    out += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(out) + "\n"


CSV_COLUMNS = [
    "taxonomy_id",
    "phase",
    "category_id",
    "category",
    "failure_type_id",
    "failure_type",
    "count",
    "total",
    "share",
    "ci_low",
    "ci_high",
    "runs_count",
    "runs_total",
    "runs_share",
    "runs_ci_low",
    "runs_ci_high",
    "tasks_count",
    "tasks_total",
    "tasks_share",
    "tasks_ci_low",
    "tasks_ci_high",
]


def to_csv(frame: pl.DataFrame) -> str:
    """Every number unrounded, counts beside shares."""
    return frame.select([c for c in CSV_COLUMNS if c in frame.columns]).write_csv()


class TableFormat(Protocol):
    """One file format of the prevalence table: `prevalence.<name>`."""

    def render(self, frame: pl.DataFrame, *, title: str, comment: str) -> str: ...


TABLE_FORMATS: Registry[TableFormat] = Registry("table format")


@TABLE_FORMATS.register("tex")
class LatexTable:
    """booktabs LaTeX; `comment` (provenance, the packages needed) goes in % lines above the table."""

    def render(self, frame: pl.DataFrame, *, title: str, comment: str) -> str:
        return to_latex(frame, comment=comment)


@TABLE_FORMATS.register("md")
class MarkdownTable:
    def render(self, frame: pl.DataFrame, *, title: str, comment: str) -> str:
        return to_markdown(frame, title=title)


@TABLE_FORMATS.register("csv")
class CsvTable:
    """Every number unrounded."""

    def render(self, frame: pl.DataFrame, *, title: str, comment: str) -> str:
        return to_csv(frame)
