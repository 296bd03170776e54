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


def compile_latex(tex: Path | list[Path], tmp: Path, packages: list[str], *, preamble: str | None = None) -> Path:
    """pdflatex a plain article that \\input's `tex` (one file, or several one after the other), with `packages`
    (or, given, the whole `preamble` from \\documentclass on); fails on an error or an overfull box. Returns the
    PDF."""
    if not shutil.which("pdflatex"):
        pytest.fail("pdflatex is not installed: run scripts/setup.sh (it installs texlive-latex-base); "
                    "a LaTeX export that was never compiled proves nothing")
    files = tex if isinstance(tex, list) else [tex]
    doc = tmp / f"doc-{files[0].stem}.tex"
    head = preamble if preamble is not None else "\\documentclass{article}\n" + "".join(
        f"\\usepackage{p}\n" if p.startswith("[") else f"\\usepackage{{{p}}}\n" for p in packages)
    doc.write_text(head.rstrip("\n") + "\n\\begin{document}\nSome text before the table.\n\n"
                   + "".join(f"\\input{{{f.with_suffix('').as_posix()}}}\n" for f in files) + "\\end{document}\n")
    proc = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", doc.name],
        cwd=tmp, capture_output=True, text=True, timeout=120,
    )
    log = doc.with_suffix(".log").read_text(errors="replace")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert doc.with_suffix(".pdf").read_bytes().startswith(b"%PDF")
    overfull = [line for line in log.splitlines() if "Overfull" in line]
    assert not overfull, f"{', '.join(f.name for f in files)} does not fit the text width: {overfull}"
    return doc.with_suffix(".pdf")


# What pdftotext gives for a glyph whose font maps it to no character (bitmap T1 fonts without cmap): T1's slot,
# a control character, which a reader's copy drops ("0.57\x151.00" pasted as "0.571.00"). Form feeds part pages.
_UNMAPPED = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")


def pdf_text(pdf: Path) -> str:
    """The compiled PDF's text as a reader copies it, laid out line by line (poppler's `pdftotext -layout`), taken
    as it is: no character is mapped back (issue 54: a test that mapped bitmap fonts' control characters back to
    the en dash and the ligatures hid "0.571.00" and "RidgeRegression.t" from every test that read the PDF)."""
    if not shutil.which("pdftotext"):
        pytest.fail("pdftotext is not installed: run scripts/setup.sh (it installs poppler-utils)")
    proc = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    unmapped = sorted({repr(c) for c in _UNMAPPED.findall(proc.stdout)})
    assert not unmapped, f"{pdf.name}: glyphs whose text is a control character, lost when copied: {unmapped}"
    return proc.stdout
