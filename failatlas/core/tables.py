"""Render one table as Markdown, CSV or LaTeX (booktabs), from the same rows, so the formats always agree."""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Sequence

_LATEX_SPECIALS = {"&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}",
                   "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "\\": r"\textbackslash{}",
                   "<": r"\textless{}", ">": r"\textgreater{}",
                   "·": r"$\cdot$", "✓": r"\checkmark{}"}
_LATEX_RE = re.compile("|".join(re.escape(k) for k in _LATEX_SPECIALS))


def latex_escape(text: object) -> str:
    """Escape LaTeX's special characters in a cell."""
    return _LATEX_RE.sub(lambda m: _LATEX_SPECIALS[m.group(0)], str(text))


def fmt(value: object, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def to_markdown(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    def cell(v: object) -> str:
        return fmt(v).replace("|", r"\|")

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def to_csv(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(headers)
    for row in rows:
        writer.writerow(["" if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in row])
    return buf.getvalue()


def to_latex(headers: Sequence[str], rows: Sequence[Sequence[object]], *, caption: str | None = None,
             label: str | None = None, align: str | None = None) -> str:
    """A booktabs table ready to \\input (needs \\usepackage{booktabs}; \\checkmark needs amssymb)."""
    align = align or "l" * len(headers)
    out = [r"\begin{table}[t]", r"\centering"]
    if caption:
        out.append(rf"\caption{{{latex_escape(caption)}}}")
    if label:
        out.append(rf"\label{{{label}}}")
    out += [rf"\begin{{tabular}}{{{align}}}", r"\toprule",
            " & ".join(latex_escape(h) for h in headers) + r" \\", r"\midrule"]
    out += [" & ".join(latex_escape(fmt(v)) for v in row) + r" \\" for row in rows]
    out += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(out) + "\n"
