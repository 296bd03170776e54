"""Exports: LaTeX, Markdown and CSV agree with each other and with `prevalence`; the LaTeX compiles; figures
are written and non-empty."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import polars as pl
import pytest

from failatlas.core.errors import ConfigError
from failatlas.core.tables import BREAK_IF_NEEDED, latex_cell, one_line
from failatlas.taxonomy import BuildParams, export_taxonomy, prevalence
from failatlas.taxonomy import run as build
from tests.paper_latex import compile_latex, header_packages, pdf_text
from tests.taxonomy.conftest import TRAIL_PARAMS

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _csv_rows(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text())))


def _markdown_rows(path: Path) -> list[list[str]]:
    lines = [ln for ln in path.read_text().splitlines() if ln.startswith("| ")]
    return [[c.strip() for c in re.split(r"(?<!\\)\|", ln)[1:-1]] for ln in lines[1:]]


def _latex_rows(path: Path) -> list[list[str]]:
    """The failure-type rows of the LaTeX table, over all its floats (heading rows for phases and categories have
    no count)."""
    floats = path.read_text().split(r"\begin{table}")[1:]
    body = "\n".join(f.split(r"\midrule", 1)[1].split(r"\bottomrule")[0] for f in floats)
    rows = []
    for line in body.splitlines():
        line = line.strip()
        if line.endswith(r"\\"):
            cells = [c.strip() for c in re.split(r"(?<!\\)&", line[:-2])]
            if len(cells) > 1 and cells[1]:
                cells[0] = re.sub(r"^\\leftskip=[0-9.]+em\\relax ", "", cells[0])
                rows.append(cells)
    return rows


def _alone(rows: list[dict[str, str]], row: dict[str, str]) -> bool:
    return sum(r["phase"] == row["phase"] for r in rows) == 1


def _check_agreement(out: Path, with_runs: bool) -> int:
    csv_rows = _csv_rows(out / "prevalence.csv")
    md_rows = _markdown_rows(out / "prevalence.md")
    tex_rows = _latex_rows(out / "prevalence.tex")
    assert len(csv_rows) == len(md_rows) == len(tex_rows) > 0
    for c, m, t in zip(csv_rows, md_rows, tex_rows, strict=True):
        share = f"{100 * float(c['share']):.1f}"
        # one rule: no interval (a phase's only type, 100% by construction) is '–' in every format, '' in the CSV
        ci = "–" if c["ci_low"] == "" else f"{100 * float(c['ci_low']):.1f}–{100 * float(c['ci_high']):.1f}"
        assert (c["ci_low"] == "") == (c["ci_high"] == "") == (c["count"] == c["total"] and _alone(csv_rows, c))
        assert m[:6] == [  # the Markdown's cells inert: '|' escaped, '<' and '>' as entities (`one_line`)
            c["phase"],
            one_line(c["category"], markdown="cell"),
            one_line(c["failure_type"], markdown="cell"),
            c["count"],
            share,
            ci,
        ]
        assert t[:4] == [latex_cell(c["failure_type"]), c["count"], share, ci.replace("–", "--")]
        if with_runs:
            assert m[6] == f"{c['runs_count']}/{c['runs_total']}"
            assert m[7] == f"{100 * float(c['runs_share']):.1f}"
            assert t[4] == m[6]
    return len(csv_rows)


def _check_latex(tex: Path, tmp: Path) -> str:
    """Compile the exported file as it is, \\input into a plain `article` that loads only the packages its header
    comment names: it must build, carry a caption and a label, and fit the text width (no overfull box)."""
    text = tex.read_text()
    packages = header_packages(tex)
    assert packages, "the header comment names no package"
    assert r"\caption{" in text and r"\label{" in text
    lines = text.splitlines()
    for k, line in enumerate(lines[:-2]):  # a category of one type of the same name is printed once
        heading = re.match(r"\\hspace\*\{[0-9.]+em\}\\emph\{(.*)\}( &)+ \\\\$", line)
        if heading and lines[k + 1].split(" & ")[0].endswith(" " + heading.group(1)):
            assert lines[k + 2].startswith("\\leftskip=1em"), lines[k : k + 3]
    return pdf_text(compile_latex(tex, tmp, packages))


def test_trail_exports_agree_and_compile(trail_store, tmp_path):
    tax = build(trail_store, TRAIL_PARAMS)
    out = tmp_path / "export"
    result = export_taxonomy(trail_store, tax.id, out)
    n_rows = _check_agreement(out, with_runs=True)
    frame = prevalence(trail_store, tax.id)
    assert n_rows == frame.height
    csv_counts = [int(r["count"]) for r in _csv_rows(out / "prevalence.csv")]
    assert csv_counts == frame["count"].to_list()  # the exports are the app's numbers
    _check_latex(out / "prevalence.tex", tmp_path)
    assert (out / "prevalence_by_phase.png").read_bytes().startswith(PNG_MAGIC)
    assert (out / "prevalence_by_phase.pdf").read_bytes().startswith(b"%PDF")
    assert (out / "prevalence_by_phase.png").stat().st_size > 10_000
    # one agent (TRAIL's traces are all one system's): a heatmap of one row compares nothing
    assert "agent_heatmap" in result.skipped and not (out / "agent_heatmap.png").exists()
    assert "funnel" in result.skipped and not (out / "funnel.png").exists()
    appendix = (out / "failure_types.md").read_text()
    assert all(t.name in appendix and t.examples[0].insight_id in appendix for t in tax.types)


def test_mini_suite_exports_include_the_funnel(mini_store, tmp_path):
    tax = build(mini_store, BuildParams())
    out = tmp_path / "paper"
    result = export_taxonomy(mini_store, None, out)
    assert result.taxonomy_id == tax.id and result.skipped == {}
    _check_agreement(out, with_runs=True)
    _check_latex(out / "prevalence.tex", tmp_path)
    for stem in ("prevalence_by_phase", "agent_heatmap", "funnel"):
        assert (out / f"{stem}.png").read_bytes().startswith(PNG_MAGIC)
        assert (out / f"{stem}.pdf").read_bytes().startswith(b"%PDF")
    phases = [r["phase"] for r in _csv_rows(out / "prevalence.csv")]
    assert phases == sorted(phases, key=["design", "implementation", "conclusion"].index)


def test_latex_escapes_special_characters(mini_store, tmp_path):
    tax = build(mini_store, BuildParams())
    with mini_store.write() as conn:
        conn.execute(
            "UPDATE failure_types SET name = ? WHERE taxonomy_id = ? AND id = ?",
            ["100% of runs: {x}_y & $z #1 ~^\\ <end_plan> | pipe → ✓ 😀 café 数据", tax.id, tax.types[0].id],
        )
    out = tmp_path / "esc"
    export_taxonomy(mini_store, tax.id, out, formats=["tex", "md", "csv"])
    tex = (out / "prevalence.tex").read_text()
    assert r"100\% of runs: \{x\}\_" + BREAK_IF_NEEDED + r"y \& \$z \#1" in tex
    _check_agreement(out, with_runs=True)
    _check_latex(out / "prevalence.tex", tmp_path)
    assert not (out / "funnel.png").exists()  # only the formats asked for


def test_unknown_format_is_refused(mini_store, tmp_path):
    build(mini_store, BuildParams())
    with pytest.raises(ConfigError):
        export_taxonomy(mini_store, None, tmp_path, formats=["docx"])


def test_exports_without_runs_columns_when_no_insight_names_a_run(mini_store, tmp_path):
    tax = build(mini_store, BuildParams())
    with mini_store.write() as conn:
        conn.execute("UPDATE insight_sources SET run_id = NULL, task_id = NULL")
        conn.execute("DELETE FROM runs")
    export_taxonomy(mini_store, tax.id, tmp_path, formats=["csv", "md", "tex"])
    header = (tmp_path / "prevalence.md").read_text().splitlines()[2]
    assert "Runs affected" not in header
    _check_agreement(tmp_path, with_runs=False)
    assert pl.read_csv(tmp_path / "prevalence.csv")["runs_count"].null_count() > 0


def test_a_table_format_added_by_registration_alone_is_exported(mini_store, tmp_path):
    """An export format is a registered class; `export_taxonomy` and `failatlas taxonomy export` pick it up."""
    from failatlas.taxonomy.export import export_formats
    from failatlas.taxonomy.tables import TABLE_FORMATS

    @TABLE_FORMATS.register("tsv")
    class TsvTable:
        def render(self, frame, *, title, comment):  # noqa: ANN001, ANN201
            return frame.select("failure_type", "count").write_csv(separator="\t")

    try:
        assert "tsv" in export_formats()
        tax = build(mini_store, BuildParams())
        result = export_taxonomy(mini_store, tax.id, tmp_path, formats=["tsv"])
        (path,) = result.written
        lines = Path(path).read_text().splitlines()
        assert Path(path).name == "prevalence.tsv" and lines[0] == "failure_type\tcount" and len(lines) > 1
    finally:
        TABLE_FORMATS.unregister("tsv")
    assert "tsv" not in export_formats()


def _svg_texts(path: Path) -> list[str]:
    import html

    return [html.unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", path.read_text())]


def test_heatmap_shows_every_agent_and_one_quantity(mini_store, tmp_path):
    """Colour and number are both the share (%); an agent with runs but no insight (gold) is a column of '–';
    names wrap instead of being cut."""
    import matplotlib

    from failatlas.taxonomy.figures import agent_heatmap

    tax = build(mini_store, BuildParams())
    frame = prevalence(mini_store, tax.id, by="agent")
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        (svg,) = agent_heatmap(frame, tmp_path / "heat", ("svg",), agents=["gold"])
    shown = _svg_texts(svg)
    assert any(t.startswith("gold") for t in shown)
    numbers = [t for t in shown if re.fullmatch(r"\d+|–", t)]
    shares = {f"{100 * s:.0f}" for s in frame["share"].to_list()}
    ticks = {"0", "20", "40", "60", "80", "100"}  # the colour bar's
    assert shares <= set(numbers)  # cells print the share ...
    counts_only = {str(c) for c in frame["count"].to_list()} - shares - ticks
    assert counts_only and not counts_only & set(numbers)  # ... not the count
    assert numbers.count("–") == frame["failure_type_id"].n_unique()  # gold's column
    assert not [t for t in shown if t.endswith("…")]  # nothing cut


def test_prevalence_figure_has_no_empty_panel_and_no_legend_over_bars(mini_store, tmp_path):
    import matplotlib

    from failatlas.taxonomy.figures import prevalence_by_phase
    from failatlas.taxonomy.prevalence import prevalence_table

    tax = build(mini_store, BuildParams())
    frame = prevalence_table(mini_store, tax.id)
    empty_phase = frame.head(1).with_columns(pl.lit("monitor").alias("phase"),
                                             pl.lit(0, frame["count"].dtype).alias("count"))
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        (svg,) = prevalence_by_phase(pl.concat([frame, empty_phase]), tmp_path / "bars", ("svg",))
    titles = [t for t in _svg_texts(svg) if "(N=" in t]
    assert [t.split(" ")[0] for t in titles] == list(dict.fromkeys(frame["phase"].to_list()))  # no monitor panel


def test_the_compiled_prevalence_table_reads_as_a_paper_table(mini_store, tmp_path):
    """pdftotext of the compiled table (issue 34): each failure type's name on one line of the PDF (the number
    columns are as wide as their numbers, not their headers), every phase's total named with its unit, and the
    phase whose only type holds 100% of it by construction printing no interval, never '100.0–100.0'."""
    tax = build(mini_store, BuildParams())
    # names as long as the demo's (issue 34 quotes "ModuleNotFoundError: hidden test collection")
    names = ["ModuleNotFoundError: hidden test collection", "Results were not produced by re-running it",
             "Python module is not installed in the sandbox", "Shape mismatch between tensors in forward",
             "Accessed ground-truth files it must not read", "Research question is left unanswered here"]
    with mini_store.write() as conn:
        for t, name in zip(tax.types, names * 3, strict=False):
            conn.execute("UPDATE failure_types SET name = ? WHERE taxonomy_id = ? AND id = ?", [name, tax.id, t.id])
    out = tmp_path / "pdf"
    export_taxonomy(mini_store, tax.id, out, formats=["tex", "csv"])
    text = _check_latex(out / "prevalence.tex", tmp_path)
    lines = [" ".join(line.split()) for line in text.splitlines()]
    rows = _csv_rows(out / "prevalence.csv")
    for r in rows:
        name = " ".join(r["failure_type"].split())
        assert any(name in line for line in lines), f"{name!r} is broken across lines:\n{text}"
        row = next(line for line in lines if name in line)
        assert f" {r['count']} " in f" {row} ", row  # the numbers stand on the name's line
    for phase in {r["phase"] for r in rows}:
        total = next(r["total"] for r in rows if r["phase"] == phase)
        assert f"{phase.capitalize()} (N = {total} insight occurrences" in " ".join(lines), phase
    alone = [r for r in rows if _alone(rows, r)]
    assert alone, "the mini-suite has a phase of one type (conclusion)"
    for r in alone:
        row = next(line for line in lines if " ".join(r["failure_type"].split()) in line)
        assert row.endswith("100.0 –") or " 100.0 – " in f"{row} ", row
    assert "100.0–100.0" not in text and "100.0–100.0" not in (out / "prevalence.csv").read_text()
