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


# the bidirectional controls (embeddings, overrides, isolates and the implicit marks): text an agent or an imported
# file wrote could reorder what a reader sees around it ("Trojan Source"), in a table cell, a CSV cell or the
# terminal; they are dropped (shown escaped on the terminal) like the other controls
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_CONTROLS = re.compile(rf"[\x00-\x1f\x7f-\x9f{BIDI_CONTROLS}]")
# Markdown (`one_line(..., markdown=...)`): a backslash before ASCII punctuation, doubled so that it stays a
# backslash and cannot take back an escape added here ('a\\|b' would otherwise end a table cell); an '&' that
# starts an entity; a link's '](' ; and, at the start of a line, what opens a block: a heading, quote, list item,
# code fence, thematic break, setext underline, table or link definition, or an ordered list's '1.' / '1)'.
_MD_BACKSLASH = re.compile(r"\\(?=[!-/:-@\[-`{-~])")
_MD_ENTITY = re.compile(r"&(?=#?[0-9A-Za-z]+;)")
_MD_BLOCK = re.compile(r"^(?:[#*+=_~`\[-]|\d+(?=[.)]))")  # '>', '|', '<' are escaped anyway
MARKDOWN_MODES = ("cell", "line")


def one_line(text: object, *, markdown: str | None = None) -> str:
    """Text as one line: any run of whitespace (line breaks included) becomes one space and other control
    characters are dropped, so a name with a line break cannot split a Markdown row or end a LaTeX paragraph inside
    a tabular, and no escape sequence reaches a file a reader will `cat`.

    `markdown` makes the line inert where a Markdown file inserts it, for text from imported files, agents, labels
    or seeds: "cell" (a table cell, or text inside a line) escapes '|', '<' and '>' (as `&lt;` `&gt;`: no HTML),
    an '&' that starts an entity, a link's '](' and a backslash before punctuation; "line" (text that starts a line,
    a heading or a list item) also escapes a character that would open a block there ('#', '>', '-', '*', '+',
    '=', '_', '~', '`', '|', '[', or a number followed by '.' or ')'). A viewer shows the text as it was."""
    line = " ".join(_CONTROLS.sub("", " ".join(str(text).split())).split())
    if markdown is None:
        return line
    if markdown not in MARKDOWN_MODES:
        raise ValueError(f"markdown must be one of {MARKDOWN_MODES}, not {markdown!r}")
    line = _MD_ENTITY.sub("&amp;", _MD_BACKSLASH.sub(r"\\\\", line))
    line = line.replace("<", "&lt;").replace(">", "&gt;").replace("|", r"\|").replace("](", r"]\(")
    if markdown == "line":
        line = _MD_BLOCK.sub(lambda m: m.group(0) + "\\" if m.group(0)[0].isdigit() else "\\" + m.group(0), line)
    return line


def code_span(text: object) -> str:
    """`text` (`one_line`) as a Markdown code span: shown verbatim (no HTML, link or emphasis inside one), its
    fence one backtick longer than the longest run of backticks in it, so the text cannot close it."""
    line = one_line(text)
    if not line:
        return ""
    fence = "`" * (max((len(run) for run in re.findall(r"`+", line)), default=0) + 1)
    pad = " " if line.startswith("`") or line.endswith("`") else ""
    return f"{fence}{pad}{line}{pad}{fence}"


# CSV (OWASP's rule against formula injection): a text cell a spreadsheet would read as a formula (its first
# character '=', '+', '-', '@', a tab or a carriage return) is written with a leading "'"; a number, or text that is
# only a number ('-0.5', '-3', '1e-3'), is left as it is. Control characters but newline and tab are dropped, and
# the bidirectional ones.
_CSV_CONTROLS = re.compile(rf"[\x00-\x08\x0b-\x1f\x7f-\x9f{BIDI_CONTROLS}]")
_CSV_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def csv_cell(value: object) -> object:
    """A CSV cell safe to open in a spreadsheet (the rule above); anything but text is returned as it is."""
    if not isinstance(value, str):
        return value
    value = _CSV_CONTROLS.sub("", value)  # first: a control character before '=' must not hide it
    return "'" + value if value[:1] in _CSV_FORMULA_START and not _NUMBER.fullmatch(value) else value


def latex_escape(text: object) -> str:
    """Escape LaTeX's special characters in a cell, on one line (`one_line`)."""
    return _LATEX_RE.sub(lambda m: _LATEX_SPECIALS[m.group(0)], one_line(text))


def fmt(value: object, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def interval_text(low: float | None, high: float | None, *, digits: int = 1, scale: float = 100.0,
                  dash: str = "–") -> str:
    """A 95% interval as every table, page and command prints it: 'low–high' in percent (`scale`) with `digits`
    decimals, or '–' when there is none. The one rule: an interval is missing (null) only where the share is fixed by
    construction (a phase's only failure type holds 100% of the phase's insights; see `taxonomy.prevalence`), and
    every other interval is printed as it is, even when it is narrow."""
    if low is None or high is None or low != low or high != high:
        return dash
    return f"{scale * low:.{digits}f}{dash}{scale * high:.{digits}f}"


def counted(n: int, singular: str, plural: str | None = None) -> str:
    """'1 insight', '3 insights', '1,204 runs': a number with its unit, singular or plural as English wants."""
    word = singular if n == 1 else (plural or singular + "s")
    return f"{n:,} {word}"


def to_markdown(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table; every cell on one line and inert (`one_line(..., markdown="cell")`)."""
    def cell(v: object) -> str:
        return one_line(fmt(v), markdown="cell")

    lines = ["| " + " | ".join(cell(h) for h in headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def to_csv(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A CSV table; text cells safe to open in a spreadsheet (`csv_cell`), numbers as they are, None and NaN
    empty."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([csv_cell(h) for h in headers])
    for row in rows:
        writer.writerow(["" if v is None or (isinstance(v, float) and math.isnan(v)) else csv_cell(v) for v in row])
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


# -- paper tables (issue 20): floats that compile in a plain `article` and fit \textwidth ----------------------------
# What every paper table needs in the preamble, in this order. T1 font encoding keeps '_' an underscore in the PDF's
# text layer (with OT1, pdflatex draws \_ as a rule, so 'RidgeRegression.__init__' copies as 'RidgeRegression.
# init'). cmap, loaded before fontenc, gives T1's fonts the map from glyphs to characters: without it, where TeX has
# no vector T1 fonts (texlive-latex-recommended alone: no lmodern, no cm-super) pdflatex draws bitmap fonts whose
# text copies an en dash as a control character and a ligature as nothing ("0.571.00", "RidgeRegression.t" for
# '.fit', issue 54). cmap is in texlive-latex-recommended, which scripts/setup.sh installs.
PAPER_PACKAGES = (r"\usepackage{cmap}", r"\usepackage[T1]{fontenc}", r"\usepackage{booktabs}",
                  r"\usepackage{tabularx}")
# Also needed by a table that continues over several floats under one number (\ContinuedFloat).
CONTINUED_PACKAGE = r"\usepackage{caption}"
# The name column of a paper table: the width the other columns leave (tabularx X), ragged right, and never
# hyphenated inside a word: a name wraps at its spaces; a break at a name's own '-' costs more than one at a space,
# and one inside a token at '/', '_' or '.' (`BREAK_IF_NEEDED`) is taken only where the token alone is wider than
# the column, so 'experiment.py' and 'accuracy_reweighted' stay whole.
NAME_COLUMN = r">{\raggedright\arraybackslash\hyphenpenalty=10000\exhyphenpenalty=1000\relax}X"
# A line break TeX may take inside a token, after '/', '_' or '.', only when nothing else fits: with a ragged right
# margin every line is equally good, so a break costing a penalty just under "never" (10000) loses to any set of
# breaks at spaces and wins only over an overfull line.
BREAK_IF_NEEDED = r"\penalty9999{}"
_INSIDE_TOKEN = re.compile(r"(/|\\_|\.)(?=\S)")
# What pdflatex's default utf8 input and OT1 fonts typeset besides Latin-1; anything else (emoji, CJK, arrows) would
# stop the paper's build with "Unicode character not set up for use with LaTeX".
_TYPESET = set("–—‘’“”…") | {chr(c) for c in range(0x20, 0x7F)} | {chr(c) for c in range(0xC0, 0x100)}


def latex_cell(text: object) -> str:
    """`text` as a cell pdflatex typesets with no extra package: specials escaped, other characters pdflatex cannot
    set replaced by their ASCII decomposition (or '?'), and a line break allowed after a '/', '_' or '.' inside a
    token only where the token would otherwise overflow its column (`BREAK_IF_NEEDED`): text wraps at its spaces."""
    import unicodedata

    out = []
    for ch in one_line(text):  # controls, bidirectional ones included, dropped first
        if ch in _TYPESET or ch in _LATEX_SPECIALS:
            out.append(ch)
        else:
            ascii_ = unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode()
            out.append(ascii_ or "?")
    escaped = latex_escape("".join(out)).replace(r"\checkmark{}", r"$\surd$")
    return _INSIDE_TOKEN.sub(lambda m: m.group(1) + BREAK_IF_NEEDED, escaped)


def paper_table(spec: str, header: Sequence[str], body: Sequence[str], *, caption: str, label: str,
                comment: str = "", column_gap: str | None = None, needs: bool = True, continues: bool = False,
                more_packages: Sequence[str] = ()) -> str:
    """One `table` float holding a `tabularx` of \\textwidth (`spec` names its columns; one X column takes the room
    left and wraps), with caption and label, in \\small. `header` cells and `body` lines are LaTeX already. The
    comment (provenance) goes in % lines above, followed by the packages the table needs. `column_gap` (e.g. '4pt')
    sets \\tabcolsep inside the float only, leaving more of the width to the X column. `needs=False` leaves out
    the packages line, for a float that follows another in the same file; `more_packages` adds to it.
    `continues=True` makes the float the continuation of the one before (`\\ContinuedFloat`, from the caption
    package: the same table number), its caption kept out of the list of tables and no label."""
    lines = [f"% {line}" for line in comment.splitlines()]
    lines += [] if not needs else ["% Needs " + " ".join((*PAPER_PACKAGES, *more_packages))
                                   + " (cmap before fontenc, so the PDF's text copies as typeset)."]
    gap = [rf"\setlength{{\tabcolsep}}{{{column_gap}}}"] if column_gap else []
    opening = [r"\begin{table}[tbp]", r"\ContinuedFloat"] if continues else [r"\begin{table}[tbp]"]
    captioned = [rf"\caption[]{{{caption}}}"] if continues else [rf"\caption{{{caption}}}", rf"\label{{{label}}}"]
    lines += [*opening, r"\centering", r"\small", *gap, *captioned,
              rf"\begin{{tabularx}}{{\textwidth}}{{{spec}}}", r"\toprule", " & ".join(header) + r" \\", r"\midrule",
              *body, r"\bottomrule", r"\end{tabularx}", r"\end{table}"]
    return "\n".join(lines) + "\n"
