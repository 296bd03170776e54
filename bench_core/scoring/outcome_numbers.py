"""EXP-Bench's execution check where the expected outcome has numbers: which numbers of the prose are results, and
whether the clean re-run printed each of them.

A number of the expected outcome counts as an expected result when it is written as a measurement: with a decimal
point (`79.0`, `0.42`), a percent sign (`99%`, `75–78%`) or a stated spread (`4916 ±30`). Left out:

- plain integers: counts and sizes of the setup (`8 GPUs`, `200 or 400 samples`, `27 tasks`), years (`2019`,
  `ICLR 2024`) and list markers (`1.`);
- numbers that name things: attached to letters or symbols (`ResNet-50`, `llama-2-13b`, `1F1B`, `6.2B`, `ETTh1`,
  `acc@1`, `224x224`, `64-channel`) or in parentheses right after a name (`PDF(720)`);
- references: `Table 4`, `Tables 5, 6, and 7`, `Figures 11-14`, `Section 3.2`, `Eq. (2)`, `Appendix D`;
- settings assigned to a one-letter or snake_case name (`M=6`, `δ = 0.6`, `pred_len=720`);
- bounds, which no single printed value equals (`less than 1%`, `above 95%`, `at least 0.9`, `> 0.7`, `up to`).

A range (`4.32–4.39`, `50-96.7%`) is one expected result that any value inside it satisfies. Tolerance: a printed
value `o` matches an expected `v` when `|o - v| <= atol + EXPECTED_RTOL·|v|` (EXPECTED_RTOL = 0.05, AutoExperiment's
5 %), where `atol` is the larger of the stated spread (`±0.18`) and half a unit of the last written digit (`79.0`
-> 0.05, `99%` -> 0.5); a range matches when `o` lies in it, widened the same way at each end. A percentage also
matches its fraction (`24.61%` and `0.2461`).

Which printed numbers count: only the run's declared answer, the last JSON object its script prints on stdout
(the prompt asks for it), never the whole log: a script that prints a spread of numbers (`seq 0 0.001 100`, or 220
values spaced on a log scale) would otherwise match any expected value within 5 %. The answer may hold at most
`answer_cap(n)` numbers for n expected results (`max(20, 4n)`), so that a dictionary of guesses cannot cover a
range either. The check passes when every expected result matches some number of the answer. Matching is
generous by design, since the outcome says "approximately".
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

EXPECTED_RTOL = 0.05
MAX_OUTPUT_NUMBERS = 1_000_000
ANSWER_MIN_CAP, ANSWER_FACTOR = 20, 4

_NUM = r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_CANDIDATE = re.compile(
    rf"(?P<a>{_NUM})(?P<ap>\s?%)?"
    rf"(?:\s*[–—-]\s*(?P<b>{_NUM.removeprefix('[-+]?')})(?P<bp>\s?%)?)?"
    rf"(?:\s*(?:±|\+/-|\+-)\s*(?P<s>{_NUM.removeprefix('[-+]?')})(?P<sp>\s?%)?)?"
)
_REFERENCE = re.compile(
    r"\b(?:Tables?|Tab\.|Fig(?:ure)?s?\.?|Sec(?:tion)?s?\.?|§|Eqs?\.|Equations?|Appendix|Appendices|Algorithms?|"
    r"Alg\.|Chapters?|Lines?|Rows?|Columns?|Steps?|Stages?|Phases?|Parts?)\s*\(?\d+(?:\.\d+)*[a-z]?\)?"
    r"(?:\s*(?:,\s*and|,|and|or|&|-|–|to)\s*\(?\d+(?:\.\d+)*[a-z]?\)?)*",
    re.IGNORECASE,
)
_SETTING = re.compile(r"(?:\b[A-Za-z]|[α-ωΑ-Ω]|\b\w*_\w*)\s*=\s*$")
_BOUND = (r"\b(?:(?:less|fewer|more|greater|lower|higher|smaller|larger)\s+than|below|above|under|over|"
          r"exceed(?:s|ing)?|in\s+excess\s+of|at\s+least|at\s+most|up\s+to|surpass(?:es|ing)?|within)|[<>≤≥]=?")
_BOUND_BEFORE = re.compile(rf"(?:{_BOUND})\s*(?:an?\s+)?(?:approximately|about|around|roughly|nearly)?\s*~?\s*$",
                           re.IGNORECASE)
_ATTACHED = re.compile(r"[\w@×*/.]")
_PRINTED = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


@dataclass(frozen=True)
class ExpectedNumber:
    """One expected result: `low` == `high` for a value, else a range; `atol` as the module's docstring says."""

    text: str
    low: float
    high: float
    percent: bool
    atol: float


def _value(text: str) -> float:
    return float(text.replace(",", ""))


def _half_unit(text: str) -> float:
    decimals = len(text.split(".", 1)[1]) if "." in text else 0
    return 0.5 * 10.0 ** -decimals


def _masked(text: str) -> str:
    """`text` with references blanked out (same length, so offsets keep their meaning)."""
    return _REFERENCE.sub(lambda m: " " * len(m.group()), text)


def _names_a_thing(text: str, start: int, end: int) -> bool:
    """The number at text[start:end] is part of a name: attached to letters or symbols, or `Name(720)`."""
    before = text[start - 1] if start else " "
    before2 = text[start - 2] if start > 1 else " "
    after = text[end] if end < len(text) else " "
    after2 = text[end + 1] if end + 1 < len(text) else " "
    if _ATTACHED.match(before) or _ATTACHED.match(after) and after != ".":
        return True
    if before in "-–(" and _ATTACHED.match(before2) and before2 != ".":
        return True
    return after in "-–" and after2.isalpha()


def _excluded(text: str, match: re.Match) -> bool:
    start, end = match.span()
    if text[start] in "+-" and start and text[start - 1].isalnum():
        start += 1  # `ZB-2p`: the hyphen is part of the name, not a sign
    prefix = text[max(0, start - 40):start].rstrip("~ ")
    return (_names_a_thing(text, start, end) or bool(_SETTING.search(text[max(0, start - 40):start]))
            or bool(_BOUND_BEFORE.search(prefix + " ")))


def expected_numbers(text: str | None) -> list[ExpectedNumber]:
    """The expected results written in an expected outcome, in order, each once (rule: the module's docstring)."""
    masked = _masked(text or "")
    found: dict[tuple[float, float, bool], ExpectedNumber] = {}
    for m in _CANDIDATE.finditer(masked):
        if _excluded(masked, m):
            continue
        percent = bool(m["ap"] or m["bp"])
        if not (percent or m["s"] or "." in m["a"] or (m["b"] and "." in m["b"])):
            continue  # a plain integer: a count, a size, a year or a list marker
        low = _value(m["a"])
        high = _value(m["b"]) if m["b"] else low
        if high < low or not (math.isfinite(low) and math.isfinite(high)):  # `5-3` is no range; 400 digits no value
            continue
        digits = m["b"] or m["a"]
        atol = max(_value(m["s"]) if m["s"] else 0.0, _half_unit(digits))
        key = (low, high, percent)
        found.setdefault(key, ExpectedNumber(text=m.group().strip(), low=low, high=high, percent=percent,
                                             atol=atol))
    return list(found.values())


def printed_numbers(output: str) -> np.ndarray:
    """Every number in `output` (at most `MAX_OUTPUT_NUMBERS`, the last ones), as floats."""
    values = []
    for token in _PRINTED.findall(output):
        try:
            values.append(float(token))
        except ValueError:
            continue
    arr = np.asarray(values[-MAX_OUTPUT_NUMBERS:], dtype=float)
    return np.unique(arr[np.isfinite(arr)])


def _distance(expected: ExpectedNumber, printed: np.ndarray) -> tuple[np.ndarray, float]:
    """Each printed value's distance outside the widened interval (0 inside it), with the tolerance used."""
    tol_low = expected.atol + EXPECTED_RTOL * abs(expected.low)
    tol_high = expected.atol + EXPECTED_RTOL * abs(expected.high)
    scales = [printed, printed * 100.0] if expected.percent else [printed]
    best = None
    for values in scales:
        below = np.maximum(expected.low - tol_low - values, 0.0)
        above = np.maximum(values - expected.high - tol_high, 0.0)
        dist = below + above
        best = dist if best is None else np.minimum(best, dist)
    return best, max(tol_low, tol_high)


def answer_cap(n_expected: int) -> int:
    """How many numbers an answer may hold for `n_expected` expected results before it is a spread of guesses."""
    return max(ANSWER_MIN_CAP, ANSWER_FACTOR * n_expected)


def answer_numbers(leaves: dict[str, object]) -> np.ndarray:
    """The distinct finite numbers among an answer's leaves (numbers, or strings that hold one number)."""
    values = []
    for value in leaves.values():
        if isinstance(value, bool):
            continue
        if isinstance(value, str):
            found = _PRINTED.fullmatch(value.strip().rstrip("%").strip())
            value = found.group() if found else None
        try:
            values.append(float(value))
        except (TypeError, ValueError, OverflowError):
            continue
    arr = np.asarray(values, dtype=float)
    return np.unique(arr[np.isfinite(arr)])


def match_numbers(expected: list[ExpectedNumber], output: str | np.ndarray) -> tuple[bool, dict[str, dict]]:
    """Whether every expected number appears in `output` (text, or the numbers of an answer) within tolerance,
    and per expected number its detail (`expected`, `percent`, `rtol`, `atol`, the closest printed value as
    `observed`, `ok`)."""
    printed = printed_numbers(output) if isinstance(output, str) else output
    detail: dict[str, dict] = {}
    for number in expected:
        row: dict = {"expected": number.low if number.low == number.high else [number.low, number.high],
                     "percent": number.percent, "rtol": EXPECTED_RTOL, "atol": number.atol,
                     "observed": None, "ok": False}
        if printed.size:
            dist, _ = _distance(number, printed)
            i = int(np.argmin(dist))
            row["observed"], row["ok"] = float(printed[i]), bool(dist[i] == 0.0)
        name, n = number.text, 2
        while name in detail:
            name, n = f"{number.text} #{n}", n + 1
        detail[name] = row
    return bool(detail) and all(d["ok"] for d in detail.values()), detail
