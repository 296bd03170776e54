"""Paper tables as a reader copies them out of the PDF (issue 54, item 3): the README's preamble compiles after
`scripts/setup.sh` (it stopped with "lmodern.sty not found"), and with it, or with only the packages an exported
file names, pdftotext reads an interval as '0.57–1.00' (not "0.571.00") and `.fit` as '.fit' (not ".t"). The
files' own packages give bitmap fonts (no lmodern): `cmap` is what makes their text right, which the last test
shows by leaving it out."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import polars as pl
import pytest

from failatlas.bench_core.scoring.metrics import PHASES, summarise
from failatlas.bench_core.scoring.report import score_interval_text, write_report
from failatlas.core.tables import interval_text
from failatlas.taxonomy.tables import to_latex
from tests.bench_core.scoring.test_report_latex_pdf import _scores
from tests.paper_latex import compile_latex, header_packages, pdf_text

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "tests" / "taxonomy" / "data" / "demo_prevalence.csv"
CODE_NAMES = ["RidgeRegression.fit left unimplemented", "KMeans.fit_predict official offline baseline"]


def readme_preamble() -> str:
    """The preamble the README gives for the paper exports: its ```latex block."""
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```latex\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 1, "the README gives one LaTeX preamble"
    return blocks[0]


def _exports(tmp: Path) -> tuple[list[Path], list[str], list[str]]:
    """A prevalence table whose first types are named after code (`.fit`, ligatures) and a score report: the files,
    the names, and every interval they print."""
    frame = pl.read_csv(DEMO)
    names = [*CODE_NAMES, *frame["failure_type"].to_list()[len(CODE_NAMES):]]
    frame = frame.with_columns(pl.Series("failure_type", names))
    prevalence = tmp / "prevalence.tex"
    prevalence.write_text(to_latex(frame, caption="Failure types per phase.", comment="test"))
    intervals = [interval_text(r["ci_low"], r["ci_high"]) for r in frame.iter_rows(named=True)
                 if r["ci_low"] is not None]
    table = summarise(_scores(model=None), ["agent", "model"])
    report = write_report(table, "agent", tmp)[2]
    intervals += [score_interval_text(r, m) for r in table.iter_rows(named=True) for m in PHASES if r[f"{m}_n"]]
    return [prevalence, report], CODE_NAMES, intervals


def _fonts(pdf: Path) -> str:
    return subprocess.run(["pdffonts", str(pdf)], capture_output=True, text=True, check=True).stdout


def _check_copies_right(text: str, names: list[str], intervals: list[str]) -> None:
    joined = " ".join(text.split())
    for name in names:
        assert name in joined, f"{name!r} does not read whole in the PDF's text"
    assert intervals and all(re.fullmatch(r"\d+\.\d+–\d+\.\d+", i) for i in intervals)
    words = set(text.split())
    missing = [i for i in intervals if i not in words]
    assert not missing, f"intervals not read as printed: {missing[:5]}"
    assert not re.search(r"\b\d+\.\d{1,2}\d+\.\d+\b", joined), "an interval read without its dash"


def test_the_readme_preamble_compiles_and_copies_right(tmp_path):
    """lmodern comes with scripts/setup.sh: its vector fonts, no bitmap (Type 3) font in the PDF."""
    files, names, intervals = _exports(tmp_path)
    pdf = compile_latex(files, tmp_path, [], preamble=readme_preamble())
    assert "lmodern" in readme_preamble() and "Type 3" not in _fonts(pdf)
    _check_copies_right(pdf_text(pdf), names, intervals)


def test_the_files_own_packages_copy_right_with_bitmap_fonts(tmp_path):
    files, names, intervals = _exports(tmp_path)
    packages = header_packages(files[0])
    assert packages[:2] == ["cmap", "[T1]{fontenc}"], "cmap must come before fontenc"
    assert header_packages(files[1])[:2] == packages[:2]
    pdf = compile_latex(files, tmp_path, packages)
    assert "Type 3" in _fonts(pdf), "no bitmap font: this test would not show what cmap does"
    _check_copies_right(pdf_text(pdf), names, intervals)


def test_without_cmap_the_bitmap_text_is_what_the_issue_read(tmp_path):
    """The control: the same files without cmap copy as the issue found them, so the tests above can fail."""
    files, names, _ = _exports(tmp_path)
    pdf = compile_latex(files, tmp_path, [p for p in header_packages(files[0]) if p != "cmap"])
    assert shutil.which("pdftotext")
    raw = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True).stdout
    copied = re.sub(r"[\x00-\x08\x0b\x0e-\x1f]", "", raw)  # what a paste keeps
    assert "RidgeRegression.fit" not in copied and "RidgeRegression.t" in copied
    assert re.search(r"\b0\.\d\d1\.00\b", copied) or re.search(r"\b\d+\.\d\d+\.\d\b", copied)


@pytest.mark.parametrize("package", ["cmap.sty", "lmodern.sty", "booktabs.sty", "tabularx.sty", "caption.sty"])
def test_setup_installs_what_the_preamble_loads(package):
    """Each package of the README's preamble is installed here and named by scripts/setup.sh's checks."""
    assert package.removesuffix(".sty") in readme_preamble()
    assert subprocess.run(["kpsewhich", package], capture_output=True).returncode == 0, (
        f"{package} is not installed: run scripts/setup.sh")
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    base = package == "tabularx.sty"  # part of texlive-latex-base, which setup.sh installs with pdflatex itself
    assert base or package in setup, f"scripts/setup.sh does not check for {package}"
