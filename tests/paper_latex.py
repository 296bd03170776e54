"""Compiling an exported LaTeX table the way a paper would: a plain `article`, only the packages the file names."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest


def header_packages(tex: Path) -> list[str]:
    """The packages named in the file's header comment (before its first float): 'booktabs', or with its options
    '[T1]{fontenc}'."""
    found = re.findall(r"\\usepackage(\[[^\]]*\])?\{(\w+)\}", tex.read_text().split(r"\begin{table}")[0])
    return [f"{options}{{{name}}}" if options else name for options, name in found]


def compile_latex(tex: Path, tmp: Path, packages: list[str]) -> Path:
    """pdflatex a plain article that \\input's `tex`; fails on an error or an overfull box. Returns the PDF."""
    if not shutil.which("pdflatex"):
        pytest.fail("pdflatex is not installed: run scripts/setup.sh (it installs texlive-latex-base); "
                    "a LaTeX export that was never compiled proves nothing")
    doc = tmp / f"doc-{tex.stem}.tex"
    doc.write_text(
        "\\documentclass{article}\n"
        + "".join(f"\\usepackage{p}\n" if p.startswith("[") else f"\\usepackage{{{p}}}\n" for p in packages)
        + "\\begin{document}\nSome text before the table.\n\n\\input{" + tex.with_suffix("").as_posix()
        + "}\n\\end{document}\n"
    )
    proc = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", doc.name],
        cwd=tmp, capture_output=True, text=True, timeout=120,
    )
    log = doc.with_suffix(".log").read_text(errors="replace")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert doc.with_suffix(".pdf").read_bytes().startswith(b"%PDF")
    overfull = [line for line in log.splitlines() if "Overfull" in line]
    assert not overfull, f"{tex.name} does not fit the text width: {overfull}"
    return doc.with_suffix(".pdf")


# Where TeX has no Type 1 fonts for T1 (cm-super, lmodern: the README names them), pdflatex draws bitmap EC fonts,
# whose text layer gives T1's slots for the right quote, the en dash and the f-ligatures; mapped back here as
# those fonts would.
_BITMAP_T1 = str.maketrans({"'": "’", "\x15": "–", "\x1b": "ff", "\x1c": "fi", "\x1d": "fl", "\x1e": "ffi",
                            "\x1f": "ffl"})


def pdf_text(pdf: Path) -> str:
    """The compiled PDF's text as a reader sees it, laid out line by line (poppler's `pdftotext -layout`)."""
    if not shutil.which("pdftotext"):
        pytest.fail("pdftotext is not installed: run scripts/setup.sh (it installs poppler-utils)")
    proc = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.translate(_BITMAP_T1)
