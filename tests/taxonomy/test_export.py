"""Exports: LaTeX, Markdown and CSV agree with each other and with `prevalence`; the LaTeX compiles; figures
are written and non-empty."""

from __future__ import annotations

import csv
import io
import re
import shutil
import subprocess
from pathlib import Path

import polars as pl
import pytest

from failatlas.core.errors import ConfigError
from failatlas.taxonomy import BuildParams, export_taxonomy, prevalence
from failatlas.taxonomy import run as build
from failatlas.taxonomy.tables import latex_escape
from tests.taxonomy.conftest import TRAIL_PARAMS

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _csv_rows(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text())))


def _markdown_rows(path: Path) -> list[list[str]]:
    lines = [ln for ln in path.read_text().splitlines() if ln.startswith("| ")]
    return [[c.strip() for c in re.split(r"(?<!\\)\|", ln)[1:-1]] for ln in lines[1:]]


def _latex_rows(path: Path) -> list[list[str]]:
    body = path.read_text().split(r"\midrule", 1)[1].split(r"\bottomrule")[0]
    rows = []
    for line in body.splitlines():
        line = line.strip()
        if line.endswith(r"\\"):
            rows.append([c.strip() for c in re.split(r"(?<!\\)&", line[:-2])])
    return rows


def _check_agreement(out: Path, with_runs: bool) -> int:
    csv_rows = _csv_rows(out / "prevalence.csv")
    md_rows = _markdown_rows(out / "prevalence.md")
    tex_rows = _latex_rows(out / "prevalence.tex")
    assert len(csv_rows) == len(md_rows) == len(tex_rows) > 0
    for c, m, t in zip(csv_rows, md_rows, tex_rows, strict=True):
        share = f"{100 * float(c['share']):.1f}"
        ci = f"{100 * float(c['ci_low']):.1f}–{100 * float(c['ci_high']):.1f}"
        assert m[:6] == [
            c["phase"],
            c["category"],
            c["failure_type"].replace("|", "\\|"),
            c["count"],
            share,
            ci,
        ]
        assert t[0] in ("", latex_escape(c["phase"]))
        assert t[1:6] == [
            latex_escape(c["category"]),
            latex_escape(c["failure_type"]),
            c["count"],
            share,
            ci.replace("–", "--"),
        ]
        if with_runs:
            assert m[6] == f"{c['runs_count']}/{c['runs_total']}" == t[6]
            assert m[7] == f"{100 * float(c['runs_share']):.1f}" == t[7]
    return len(csv_rows)


def _check_latex(tex: Path, tmp: Path) -> str:
    """Compile a document that \\input's the table with pdflatex when TeX is installed, else parse it."""
    doc = tmp / "doc.tex"
    doc.write_text(
        "\\documentclass{article}\n\\usepackage[T1]{fontenc}\n\\usepackage[utf8]{inputenc}\n"
        "\\usepackage{booktabs}\n\\usepackage{graphicx}\n\\begin{document}\n\\begin{table}\n\\centering\n"
        "\\resizebox{\\linewidth}{!}{\\input{" + tex.with_suffix("").as_posix() + "}}\n\\end{table}\n"
        "\\end{document}\n"
    )
    if shutil.which("pdflatex"):
        proc = subprocess.run(
            ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", doc.name],
            cwd=tmp,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stdout[-3000:]
        assert (tmp / "doc.pdf").read_bytes().startswith(b"%PDF")
        return "pdflatex"
    from pylatexenc.latexwalker import LatexEnvironmentNode, LatexWalker

    nodes, _, _ = LatexWalker(tex.read_text(), tolerant_parsing=False).get_latex_nodes()
    envs = [n for n in nodes if isinstance(n, LatexEnvironmentNode)]
    assert [e.environmentname for e in envs] == ["tabular"]
    return "pylatexenc"


def test_trail_exports_agree_and_compile(trail_store, tmp_path):
    tax = build(trail_store, TRAIL_PARAMS)
    out = tmp_path / "export"
    result = export_taxonomy(trail_store, tax.id, out, n_boot=300)
    n_rows = _check_agreement(out, with_runs=True)
    frame = prevalence(trail_store, tax.id, n_boot=300)
    assert n_rows == frame.height
    csv_counts = [int(r["count"]) for r in _csv_rows(out / "prevalence.csv")]
    assert csv_counts == frame["count"].to_list()  # the exports are the app's numbers
    assert _check_latex(out / "prevalence.tex", tmp_path) in ("pdflatex", "pylatexenc")
    for stem in ("prevalence_by_phase", "agent_heatmap"):
        assert (out / f"{stem}.png").read_bytes().startswith(PNG_MAGIC)
        assert (out / f"{stem}.pdf").read_bytes().startswith(b"%PDF")
        assert (out / f"{stem}.png").stat().st_size > 10_000
    assert "funnel" in result.skipped and not (out / "funnel.png").exists()
    appendix = (out / "failure_types.md").read_text()
    assert all(t.name in appendix and t.examples[0].insight_id in appendix for t in tax.types)


def test_mini_suite_exports_include_the_funnel(mini_store, tmp_path):
    tax = build(mini_store, BuildParams())
    out = tmp_path / "paper"
    result = export_taxonomy(mini_store, None, out, n_boot=200)
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
            ["100% of runs: {x}_y & $z #1 ~^\\ <end_plan> | pipe", tax.id, tax.types[0].id],
        )
    out = tmp_path / "esc"
    export_taxonomy(mini_store, tax.id, out, formats=["tex", "md", "csv"], n_boot=50)
    tex = (out / "prevalence.tex").read_text()
    assert r"100\% of runs: \{x\}\_y \& \$z \#1" in tex
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
    export_taxonomy(mini_store, tax.id, tmp_path, formats=["csv", "md", "tex"], n_boot=50)
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
        result = export_taxonomy(mini_store, tax.id, tmp_path, formats=["tsv"], n_boot=20)
        (path,) = result.written
        lines = Path(path).read_text().splitlines()
        assert Path(path).name == "prevalence.tsv" and lines[0] == "failure_type\tcount" and len(lines) > 1
    finally:
        TABLE_FORMATS.unregister("tsv")
    assert "tsv" not in export_formats()
