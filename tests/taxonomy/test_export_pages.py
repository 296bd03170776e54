"""The exported prevalence table on a page (pdflatex, then pdftotext): a table too long for one page continues in
floats that each fit it under one table number (issue 42: not "Table 2: Table 1, continued"), names keep their
underscores in the PDF's text (T1 fonts), and names wrap at their spaces, never inside a file name or an identifier
that fits.

`data/demo_prevalence.csv` is `failatlas demo`'s `taxonomy/prevalence.csv` as a new user got it (25 types in five
phases; its table was one float 86.7pt taller than the page); `data/demo12_prevalence.csv` the demo's at 168ddcc (12
types with their objects, which fit on one page and were split into two floats, the second holding one row)."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

from failatlas.taxonomy.tables import to_latex
from tests.paper_latex import compile_latex, header_packages, pdf_text

DEMO = Path(__file__).parent / "data" / "demo_prevalence.csv"
DEMO12 = Path(__file__).parent / "data" / "demo12_prevalence.csv"
CAPTION = ("Failure types per phase (FailAtlas taxonomy v1). n: insight occurrences of the type (one per statement of a"
           " failure in a run or trace); share: of the phase's occurrences, with a 95% Wilson interval (none where a"
           " phase has a single type, which holds 100% by construction); runs affected: k/n, the runs with at least"
           " one such occurrence of all the runs counted.")
PHASES = ["design", "implementation", "execution", "conclusion", "monitor"]
_NUMBERS = re.compile(r"(\s+(\d[\d./–-]*|–|--|\?\?))+\s*$")


def _demo() -> pl.DataFrame:
    return pl.read_csv(DEMO)


def _larger(frame: pl.DataFrame, times: int) -> pl.DataFrame:
    """`times` as many types in every phase, each copy's names marked apart."""
    if times == 1:
        return frame
    copies = [frame.with_columns((pl.col("failure_type") + f" (variant {k})").alias("failure_type"),
                                 (pl.col("failure_type_id") + f"-{k}").alias("failure_type_id"))
              for k in range(times)]
    return pl.concat(copies).with_row_index("_k").sort(
        pl.col("phase").replace_strict(PHASES, list(range(len(PHASES)))), "category", "_k").drop("_k")


def _compiled(frame: pl.DataFrame, tmp_path: Path) -> tuple[str, str, str]:
    """The .tex, pdflatex's log, and the PDF's text (a plain article, only the packages the file names)."""
    tex = tmp_path / "prevalence.tex"
    tex.write_text(to_latex(frame, caption="Failure types per phase (FailAtlas taxonomy v2).", comment="test"))
    pdf = compile_latex(tex, tmp_path, header_packages(tex))
    return tex.read_text(), pdf.with_suffix(".log").read_text(errors="replace"), pdf_text(pdf)


def _read(name: str) -> str:
    """A name as pdftotext reads it: with T1 fonts an underscore stays one."""
    return " ".join(name.split())


def _name_text(text: str) -> str:
    """The PDF's text with the number columns dropped and the lines joined: a wrapped name reads whole."""
    return " ".join(" ".join(_NUMBERS.sub("", line) for line in text.splitlines()).split())


@pytest.mark.parametrize("times", [1, 3])
def test_a_table_too_long_for_a_page_is_split_into_floats_that_fit(tmp_path, times):
    frame = _larger(_demo(), times)
    tex, log, text = _compiled(frame, tmp_path)
    assert "Float too large" not in log and "Overfull" not in log
    floats = tex.count(r"\begin{table}")
    assert floats >= 2  # the demo's 25 types are taller than a page
    assert floats <= 2 * times  # each float filled before the next: none holds a lone phase
    assert tex.count(r"\ContinuedFloat") == floats - 1 and tex.count(r"\caption[]{") == floats - 1
    assert tex.count(r"\label{") == 1 and tex.count(r"\label{tab:failatlas-prevalence}") == 1
    assert header_packages(Path(tmp_path / "prevalence.tex")) == [
        "cmap", "[T1]{fontenc}", "booktabs", "tabularx", *(["caption"] if floats > 1 else [])]
    assert re.findall(r"Table (\d+):", text) == ["1"] * floats  # one number, every part
    assert "continued" in text.split("Table 1:")[-1]
    names = _name_text(text)
    for name in frame["failure_type"].to_list():
        assert _read(name) in names, name
    headings = re.findall(r"\b(Design|Implementation|Execution|Conclusion|Monitor)( \(continued\))? \(N =", text)
    assert [h for h, more in headings if not more] == [p.capitalize() for p in PHASES]  # each phase once ...
    assert any("_" in name for name in frame["failure_type"].to_list()), "the demo names identifiers"


def test_names_wrap_at_spaces_and_tokens_break_only_when_wider_than_the_column(tmp_path):
    """'experiment.py' and 'accuracy_reweighted' at every position on a line stay whole in the PDF; a path longer
    than the column breaks at its own separators rather than overflow."""
    demo = _demo().filter(pl.col("phase") == "execution").head(1)
    names = [f"Crash in {'the ' * k}script: build_model in experiment.py, accuracy_reweighted missing"
             for k in range(14)]
    long_token = "src/failatlas_experiments/reweighting/balanced_scores_per_class_evaluation.py"
    frame = pl.concat([demo.with_columns(pl.lit(n).alias("failure_type"), pl.lit(f"t{k}").alias("failure_type_id"))
                       for k, n in enumerate([*names, f"Missing file {long_token}"])])
    _, log, text = _compiled(frame, tmp_path)
    assert "Overfull" not in log
    lines = [" ".join(line.split()) for line in text.splitlines()]
    assert sum(" experiment.py," in f" {line}" for line in lines) == len(names), text
    assert sum("accuracy_reweighted" in line for line in lines) == len(names), text  # its underscore kept (T1)
    token = _read(long_token)
    assert not any(token in line for line in lines) and token.replace(" ", "") in _name_text(text).replace(" ", "")


def test_the_demos_twelve_types_are_one_float(tmp_path):
    frame = pl.read_csv(DEMO12)
    assert frame.height == 12 and frame["objects"].drop_nulls().len() > 0
    tex = tmp_path / "prevalence.tex"
    tex.write_text(to_latex(frame, caption=CAPTION, comment="test"))
    pdf = compile_latex(tex, tmp_path, header_packages(tex))
    log, text = pdf.with_suffix(".log").read_text(errors="replace"), pdf_text(pdf)
    assert tex.read_text().count(r"\begin{table}") == 1 and "caption" not in header_packages(tex)
    assert "Float too large" not in log
    assert re.findall(r"Table (\d+):", text) == ["1"] and "continued" not in text
    names = _name_text(text)
    assert all(_read(name) in names for name in frame["failure_type"].to_list())


def _height(tex: str, tmp: Path) -> float:
    """The height of a one-float table in points, as LaTeX sets it: compiled on a page 40pt tall, the log says by
    how much the float is too large for it."""
    (tmp / "one.tex").write_text(tex)
    preamble = ("\\documentclass{article}\n\\usepackage{cmap}\n\\usepackage[T1]{fontenc}\n\\usepackage{booktabs}\n"
                "\\usepackage{tabularx}\n\\setlength{\\textheight}{40pt}\n")
    pdf = compile_latex(tmp / "one.tex", tmp, [], preamble=preamble)
    found = re.search(r"Float too large for page by ([\d.]+)pt", pdf.with_suffix(".log").read_text(errors="replace"))
    assert found
    return 40.0 + float(found.group(1))


@pytest.mark.parametrize("source", [DEMO, DEMO12])
def test_a_table_that_fits_on_a_page_is_one_float(tmp_path, source, monkeypatch):
    """For tables of the demo's types around a page's height: one whose single float LaTeX sets at most the page's
    height less the estimate's margin (550pt - 15pt: `PAGE_PT`) is one float, and one split into several is taller
    than the page."""
    from failatlas.taxonomy import tables

    frame = pl.read_csv(source)
    sizes = range(14, 23) if frame.height > 20 else range(frame.height - 2, frame.height + 1)
    for n in sizes:
        part = frame.head(n)
        split = to_latex(part, caption=CAPTION, comment="test").count(r"\begin{table}")
        with monkeypatch.context() as m:
            m.setattr(tables, "PAGE_PT", 1e6)
            height = _height(to_latex(part, caption=CAPTION, comment="test"), tmp_path)
        if height <= tables.PAGE_PT:
            assert split == 1, f"{n} types, {height:.0f}pt tall, split into {split} floats"
        if split > 1:
            assert height > 550.0 - 30.0, f"{n} types, {height:.0f}pt tall, split into {split} floats"
