"""Compiling an exported LaTeX table the way a paper would: a plain `article`, only the packages the file names."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest


def header_packages(tex: Path) -> list[str]:
    """The packages named in the file's header comment (before its first float)."""
    return re.findall(r"\\usepackage\{(\w+)\}", tex.read_text().split(r"\begin{table}")[0])


def compile_latex(tex: Path, tmp: Path, packages: list[str]) -> Path:
    """pdflatex a plain article that \\input's `tex`; fails on an error or an overfull box. Returns the PDF."""
    if not shutil.which("pdflatex"):
        pytest.fail("pdflatex is not installed: run scripts/setup.sh (it installs texlive-latex-base); "
                    "a LaTeX export that was never compiled proves nothing")
    doc = tmp / f"doc-{tex.stem}.tex"
    doc.write_text(
        "\\documentclass{article}\n" + "".join(f"\\usepackage{{{p}}}\n" for p in packages)
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


def pdf_text(pdf: Path) -> str:
    """The compiled PDF's text as a reader sees it, laid out line by line (poppler's `pdftotext -layout`)."""
    if not shutil.which("pdftotext"):
        pytest.fail("pdftotext is not installed: run scripts/setup.sh (it installs poppler-utils)")
    proc = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout
