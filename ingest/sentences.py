"""Deterministic sentence splitting of judges' error analyses, and the filter that keeps only errors."""

from __future__ import annotations

import re

# Tokens that end in a period without ending a sentence (lower-cased, without the final period).
_ABBREVIATIONS = frozenset(
    {
        "e.g",
        "i.e",
        "vs",
        "cf",
        "al",
        "fig",
        "figs",
        "eq",
        "eqs",
        "sec",
        "no",
        "nos",
        "dr",
        "mr",
        "mrs",
        "ms",
        "approx",
        "resp",
        "incl",
        "w.r.t",
        "wrt",
        "st",
        "ca",
        "viz",
        "p",
        "pp",
        "ref",
        "refs",
        "tab",
        "appx",
    }
)

# A sentence end: terminal punctuation, optional closing quotes/brackets, then whitespace and a capital,
# digit, opening quote/bracket or list marker.
_END = re.compile(r"""[.!?]+["')\]’”]*\s+(?=[A-Z0-9"'(\[`‘“*•-])""")
# A new line that starts a list item, or a blank line: always a boundary.
_LINE_BREAK = re.compile(r"\n[ \t]*(?:\n\s*|(?=(?:[-*•]|\d{1,3}[.)])\s))")
_TOKEN_BEFORE = re.compile(r"(\S+)$")
_LIST_MARKER = re.compile(r"^(?:[-*•]+|\d{1,3}[.)])\s+")

_NO_ERROR = re.compile(
    r"^(?:n/?a|none|nothing|nil|-+|not applicable|no errors?|no issues?|no problems?|no mistakes?"
    r"|no (?:errors?|issues?|problems?|mistakes?) (?:were |was )?(?:found|detected|identified|observed)"
    r"|there (?:were|are|is) no (?:errors?|issues?|problems?|mistakes?)(?: (?:found|detected|identified))?"
    r"|error parsing response"
    r"|the (?:output|design|conclusion|implementation|setup|result|results) (?:is|was|were|are) "
    r"(?:fully |entirely |completely )?correct)[.!]?$",
    re.IGNORECASE,
)


# A sentence that only praises ("The design correctly identifies the variables.") is not an error statement;
# one with any of the negative cues is kept even when it also praises.
_PRAISE = re.compile(
    r"\b(?:correctly|properly|accurately|successfully|appropriately|matches|match the|aligns? with"
    r"|consistent with"
    r"|(?:is|are|was|were) (?:fully |entirely |mostly )?(?:correct|accurate|complete|sound))\b",
    re.IGNORECASE,
)
_NEGATIVE = re.compile(
    r"\b(?:not|no|never|none|fail\w*|miss\w*|incorrect\w*|wrong\w*|instead|lack\w*|omit\w*|without|error\w*"
    r"|but|however|although|though|only|mismatch\w*|ignor\w*|unclear|incomplete|should|neither|nor|absent"
    r"|insufficient\w*|partial\w*|inconsistent|invalid|unrelated|does ?n[o']t|did ?n[o']t|cannot|can't)\b",
    re.IGNORECASE,
)


def _is_abbreviation(before: str) -> bool:
    match = _TOKEN_BEFORE.search(before)
    if not match:
        return False
    token = match.group(1).lstrip("(\"'[").lower()
    if token in _ABBREVIATIONS or token.rstrip(".") in _ABBREVIATIONS:
        return True
    return len(token) == 1 and token.isalpha()  # an initial, e.g. "J. Smith"


def _is_item_number(text: str, punct_at: int) -> bool:
    """True for the "3." that numbers a list item: a bare number at a line start or after a sentence end."""
    match = re.search(r"(^|[\n.!?:;]\s*|\s)(\d{1,3})$", text[:punct_at])
    if not match:
        return False
    before = text[: match.start(2)].rstrip()
    return not before or before[-1] in ".!?:;" or text[match.start(2) - 1] == "\n"


def split_sentences(text: str) -> list[str]:
    """Split prose into sentences. Lossless: joined, the pieces hold every non-whitespace character of `text`.

    Boundaries are terminal punctuation followed by a capitalised start (not after abbreviations such as
    "e.g." or initials), blank lines, and new lines that open a list item. Pieces are stripped; empty ones
    are dropped.
    """
    if not text or not text.strip():
        return []
    cuts: set[int] = set()
    for match in _END.finditer(text):
        punct_at = match.start()
        if text[punct_at] == "." and (_is_abbreviation(text[:punct_at]) or _is_item_number(text, punct_at)):
            continue
        cuts.add(match.end())
    cuts.update(match.end() for match in _LINE_BREAK.finditer(text))
    pieces: list[str] = []
    start = 0
    for cut in sorted(cuts):
        piece = text[start:cut].strip()
        if piece:
            pieces.append(piece)
        start = cut
    tail = text[start:].strip()
    if tail:
        pieces.append(tail)
    return pieces


def clean_sentence(sentence: str) -> str:
    """A sentence as an insight: list markers removed, whitespace collapsed."""
    return " ".join(_LIST_MARKER.sub("", sentence.strip()).split())


def is_error_statement(sentence: str) -> bool:
    """False for sentences saying there is no error ("N/A", "No errors found."), praise only, or no words."""
    cleaned = clean_sentence(sentence)
    if not any(ch.isalpha() for ch in cleaned):
        return False
    if _NO_ERROR.match(cleaned):
        return False
    return not (_PRAISE.search(cleaned) and not _NEGATIVE.search(cleaned))


def error_sentences(text: str | None) -> list[str]:
    """The cleaned sentences of an error analysis that state an error, in order."""
    if not text:
        return []
    return [clean_sentence(s) for s in split_sentences(text) if is_error_statement(s)]
