"""Rendering the prevalence table as LaTeX (booktabs, ready to \\input), Markdown and CSV.

All three take the same frame (`prevalence_table`) and the same formatted cells, so they cannot disagree. Each is a
`TableFormat` registered in `TABLE_FORMATS` by its file suffix; `failatlas taxonomy export` writes every registered
one, so a new format is a class registered here (or in its own module imported by the package) and nothing else.
"""

from __future__ import annotations

from typing import Protocol

import polars as pl

from failatlas.core.registry import Registry
from failatlas.core.tables import (  # one of each
    CONTINUED_PACKAGE,
    NAME_COLUMN,
    counted,
    csv_cell,
    interval_text,
    latex_cell,
    one_line,
    paper_table,
)

# What a count of each unit counts, in the same words on the app's pages, in the CLI and in every export.
UNIT_NOUNS = {"insights": "insight occurrences", "runs": "runs", "tasks": "tasks"}
COUNT_HEADERS = {"insights": "occurrences", "runs": "runs affected", "tasks": "tasks affected"}
_UNIT_SINGULAR = {"insights": "insight occurrence", "runs": "run", "tasks": "task"}


def unit_count(n: int, unit: str) -> str:
    """'1 insight occurrence', '45 runs': a count with the noun of its unit, singular or plural."""
    return counted(n, _UNIT_SINGULAR.get(unit, unit), UNIT_NOUNS.get(unit, unit))


def pct(x: float | None) -> str:
    """A share as a percentage with one decimal ('12.3'); '' for missing."""
    return "" if x is None else f"{100 * x:.1f}"


def has_runs(frame: pl.DataFrame) -> bool:
    return "runs_total" in frame.columns and frame["runs_total"].drop_nulls().len() > 0


def display_rows(frame: pl.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Headers and formatted cells, one row per (phase, failure type), in the frame's order."""
    headers = ["Phase", "Category", "Failure type", "n (occurrences)", "Share (%)", "95% CI (%)"]
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
            interval_text(r["ci_low"], r["ci_high"]),
        ]
        if runs:
            affected = "" if r["runs_count"] is None else f"{r['runs_count']}/{r['runs_total']}"
            cells += [affected, pct(r["runs_share"])]
        rows.append(cells)
    return headers, rows


def has_objects(frame: pl.DataFrame) -> bool:
    """Whether the frame lists objects (`facets.with_objects`) for at least one type."""
    return "objects" in frame.columns and any(frame["objects"].fill_null("").to_list())


def to_markdown(frame: pl.DataFrame, *, title: str | None = None) -> str:
    """A GitHub-flavoured Markdown table (each cell on one line and inert: `one_line(..., markdown="cell")`, pipes
    and '<', '>' escaped); an Objects column after the type's name where
    the frame lists objects."""
    headers, rows = display_rows(frame)
    if has_objects(frame):
        headers = [*headers[:3], "Objects", *headers[3:]]
        rows = [[*r[:3], one_line(o or ""), *r[3:]] for r, o in zip(rows, frame["objects"].to_list(), strict=True)]
    numeric = {"n (occurrences)", "Share (%)", "95% CI (%)", "Runs affected", "Runs (%)"}

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(one_line(c, markdown="cell") for c in cells) + " |"

    out = [f"**{title}**", ""] if title else []
    out += [line(headers), "|" + "|".join("---:" if h in numeric else "---" for h in headers) + "|"]
    out += [line(r) for r in rows]
    return "\n".join(out) + "\n"


def _same_name(a: str, b: str) -> bool:
    return " ".join(a.lower().split()) == " ".join(b.lower().split())


def _stacked(*lines: str) -> str:
    """A header cell on several lines (a nested tabular: no extra package), so a number column is as wide as its
    numbers, not as its header, and the failure type column keeps the room."""
    return r"\begin{tabular}[b]{@{}r@{}}" + r" \\ ".join(lines) + r"\end{tabular}"


# A float's height, estimated in points, against the page of a plain `article` (\textheight 550pt, letter paper;
# A4's is taller). Measured (issue 54) by compiling 53 tables of the demo's types, one float each, on a page too
# short for any (the log says by how much each is too tall), and fitting: the float's frame (header, rules) plus its
# caption's lines, a line per name line and per objects line in the name column (46 characters each; names wrap
# at spaces), a phase heading and a category heading each. The largest error of the fit was 11.2pt, so a float is
# filled up to the page less 15pt: a table that fits on a page is one float (the old count of lines, 36 characters
# and 44 lines to the page, split the demo's 12 types into two floats, the second holding one row).
PAGE_PT = 550.0 - 15.0
FRAME_PT = 37.0
CAPTION_LINE_PT, CAPTION_LINE_CHARS = 11.0, 85
NAME_LINE_PT, OBJECTS_LINE_PT, NAME_LINE_CHARS = 10.4, 11.0, 46
PHASE_HEADING_PT, CATEGORY_HEADING_PT = 17.4, 13.1


def _lines(name: str, per_line: int = NAME_LINE_CHARS) -> int:
    """The lines a text is estimated to take at `per_line` characters a line (it wraps at spaces)."""
    lines, used = 1, 0
    for word in name.split():
        if used and used + 1 + len(word) > per_line:
            lines, used = lines + 1, 0
        used += (1 if used else 0) + len(word)
        while used > per_line:  # a token longer than a line breaks inside (`BREAK_IF_NEEDED`)
            lines, used = lines + 1, used - per_line
    return lines


def _room(caption: str) -> float:
    """The points a float captioned `caption` leaves for its rows (`PAGE_PT` less its frame and caption)."""
    return PAGE_PT - FRAME_PT - CAPTION_LINE_PT * _lines("Table 1: " + caption, CAPTION_LINE_CHARS)


def to_latex(frame: pl.DataFrame, *, caption: str, label: str = "tab:failatlas-prevalence",
             comment: str | None = None, unit: str = "insights") -> str:
    """One `table` float ready to \\input into a plain `article` with the packages its header comment names (T1
    fonts, booktabs, tabularx): a `tabularx` of \\textwidth whose first column wraps. Number headers stand on two
    lines and the column gap is narrowed, so the failure type column gets the width the numbers do not need.
    Phases (a row across the table, with the phase's total and its unit) and categories are heading rows, so the
    category is printed once, above its types; a category holding one type of the same name shows that name once.
    Numbers as in the Markdown and CSV (`display_rows`). `caption` is plain text (escaped here).

    A table too tall for one page (estimated in points: `PAGE_PT`) continues in further floats under the same table
    number (`\\ContinuedFloat`, so the header also names the caption package), each filled before the next starts:
    a phase that does not fit goes on in the next float under its heading marked '(continued)', and a float never
    ends on a heading. The first float carries `caption` and `label`; each later one the caption '... (continued)'."""
    _, rows = display_rows(frame)
    runs = has_runs(frame)
    objects = frame["objects"].fill_null("").to_list() if has_objects(frame) else [""] * frame.height
    header = ["Failure type", "$n$", _stacked("Share", r"(\%)"), _stacked(r"95\% CI", r"(\%)")]
    header += [_stacked("Runs", "affected")] if runs else []
    width = len(header)
    blank = " &" * (width - 1)
    categories = frame.group_by("phase", "category", maintain_order=True).agg(pl.len().alias("k"))
    sizes = {(r["phase"], r["category"]): r["k"] for r in categories.iter_rows(named=True)}
    noun = UNIT_NOUNS.get(unit, unit)

    def phase_heading(r: dict, phase: str, more: str = "") -> str:
        runs_total = f", {r['runs_total']} runs" if runs and r.get("runs_total") is not None else ""
        return (rf"\multicolumn{{{width}}}{{@{{}}l}}{{\textbf{{{latex_cell(phase.capitalize())}}}{more} "
                rf"($N={r['total']}$ {noun}{runs_total})}} \\")

    def category_heading(category: str, more: str = "") -> str:
        return rf"\hspace*{{0.5em}}\emph{{{latex_cell(category)}}}{more}" + blank + r" \\"

    # one entry per failure type: (phase, category heading or None, its row, estimated lines), category heading
    # kept with the type under it so that no float ends on a heading
    items: list[tuple[str, str | None, str, int]] = []
    previous_phase = previous_category = None
    for r, cells, listed in zip(frame.iter_rows(named=True), rows, objects, strict=True):
        phase, category, name = cells[0], cells[1], cells[2]
        if phase != previous_phase:
            previous_category = None
        alone = sizes.get((r["phase"], r["category"]), 0) == 1 and _same_name(category, name)
        heading = category if category != previous_category and category and not alone else None
        previous_phase, previous_category = phase, category
        numbers = [cells[3], cells[4], cells[5].replace("–", "--")]
        if runs:
            numbers.append(cells[6] or "--")  # k/n says the share exactly; the name keeps the width
        indent = "0.5em" if alone else "1em"
        under = rf"\newline{{\footnotesize {latex_cell('Objects: ' + one_line(listed))}}}" if listed else ""
        row = " & ".join([rf"\leftskip={indent}\relax {latex_cell(name)}{under}", *numbers]) + r" \\"
        size = NAME_LINE_PT * _lines(name) + (OBJECTS_LINE_PT * _lines("Objects: " + listed) if listed else 0)
        items.append((phase, heading, row, size + (CATEGORY_HEADING_PT if heading is not None else 0.0)))
    firsts = {r["phase"]: r for r in frame.iter_rows(named=True)}
    floats: list[list[str]] = [[]]
    continued = f"{caption.split('. ')[0].rstrip('.')} (continued)."
    used, room = 0.0, _room(caption)
    category_now: str | None = None
    for k, (phase, heading, row, n) in enumerate(items):
        starts = k == 0 or items[k - 1][0] != phase
        category_now = heading if heading is not None else (None if starts else category_now)
        if floats[-1] and used + n + (PHASE_HEADING_PT if starts else 0.0) > room:
            floats.append([])
            used, room = 0.0, _room(continued)
            if not starts:  # a phase continued from the previous float
                floats[-1].append(phase_heading(firsts[phase], phase, " (continued)"))
                used += PHASE_HEADING_PT
                if heading is None and category_now is not None:
                    floats[-1].append(category_heading(category_now, " (continued)"))
                    used += CATEGORY_HEADING_PT
        if starts:
            if floats[-1]:
                floats[-1].append(r"\midrule")
            floats[-1].append(phase_heading(firsts[phase], phase))
            used += PHASE_HEADING_PT
        if heading is not None:
            floats[-1].append(category_heading(heading))
        floats[-1].append(row)
        used += n
    spec = "@{}" + NAME_COLUMN + "r" * (width - 1) + "@{}"
    parts = [paper_table(spec, header, floats[0], caption=latex_cell(caption), label=label, comment=comment or "",
                         column_gap="4pt", more_packages=[CONTINUED_PACKAGE] if len(floats) > 1 else [])]
    parts += [paper_table(spec, header, body, caption=latex_cell(continued), label=label, column_gap="4pt",
                          needs=False, continues=True) for body in floats[1:]]
    return "\n".join(parts)


CSV_COLUMNS = [
    "taxonomy_id",
    "phase",
    "category_id",
    "category",
    "failure_type_id",
    "failure_type",
    "objects",
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
    """Every number unrounded, counts beside shares; text cells (names, categories, objects) safe to open in a
    spreadsheet (`csv_cell`: a cell that would start a formula gets a leading "'", control characters but newline
    and tab dropped), number columns as they are."""
    columns = [c for c in CSV_COLUMNS if c in frame.columns]
    return frame.select([
        pl.col(c).map_elements(csv_cell, return_dtype=pl.String) if frame.schema[c] == pl.String else pl.col(c)
        for c in columns]).write_csv()


class TableFormat(Protocol):
    """One file format of the prevalence table: `prevalence.<name>`."""

    def render(self, frame: pl.DataFrame, *, title: str, comment: str) -> str: ...


TABLE_FORMATS: Registry[TableFormat] = Registry("table format")


@TABLE_FORMATS.register("tex")
class LatexTable:
    """A booktabs/tabularx table float with `title` as its caption; `comment` (provenance) goes in % lines above."""

    def render(self, frame: pl.DataFrame, *, title: str, comment: str) -> str:
        return to_latex(frame, caption=title, comment=comment)


@TABLE_FORMATS.register("md")
class MarkdownTable:
    def render(self, frame: pl.DataFrame, *, title: str, comment: str) -> str:
        return to_markdown(frame, title=title)


@TABLE_FORMATS.register("csv")
class CsvTable:
    """Every number unrounded."""

    def render(self, frame: pl.DataFrame, *, title: str, comment: str) -> str:
        return to_csv(frame)
