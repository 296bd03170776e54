"""Claims of a conclusion that contradict the reference conclusion's (docs/metrics.md, "C from evidence").

Deterministic and offline, at the level of units: sentences, cut also at `;` and `:`. Three kinds of contradiction:

- **answer**: the reference answers the question Yes or No, and the conclusion gives the other answer anywhere:
  every answer it gives is read (`answers`): a `yes` or `no` (or a hedge such as "hardly", "not really") that
  starts the text, a line or a sentence, or follows a colon, when the sentence ends there or goes on after a comma
  ("No.", "No, ridge does not help"; not "No further tuning was needed"); "the answer (to the question) is no",
  "the answer is negative"; "in short, no", "so, yes";
- **reversed**: a unit of the conclusion makes a comparison or states a direction on the same axis as the reference
  unit it is about, the other way round. Axes: magnitude (less/more, lower/higher, smaller/larger, fewer, below/
  above), quality (better/worse, improves/hurts, outperforms), change (increases/decreases, rises/falls, grows/
  shrinks). A negation up to 6 words in front flips a cue (`not less` is `more`, `does not predict held-out data
  better`; `it is not the case that` every cue after it); when the conclusion names first what the
  reference names after the cue (`OLS's error is higher than ridge's` for `ridge's error is less than OLS's`), the
  comparison is read the other way round, so a swapped paraphrase agrees. The words around the two cues (4 content
  words each side, asides in parentheses skipped) must be at least half the reference's;
- **negated**: the conclusion negates (`not`, `no`, `never`, `n't`, `cannot`, `fails to`, `... none`,
  `... nothing`) a word the reference unit states plainly (`removes none of it` for `removes much of it`), in a unit
  that shares at least half of that reference unit's content words.

Where the reference answers the question, the question is one more reference unit: with a Yes its comparisons
hold as asked, with a No they are reversed and its effect verbs (change, affect, ...) are negated, so
`X changes Y` contradicts a No to `Does X change Y?`.

A unit of the conclusion is about the reference units that share the most content words with it (stems: the first
five letters of words of 3+ letters, stop words, cues and negators out), at least 2 and at least half of the
smaller unit's; it contradicts when it contradicts one of them and agrees with none. A unit longer than 2000
characters is cut, so the work is linear in the text. Known limits: a claim in words the reference does not use, a
hedge that states both directions on one axis (`lower or higher`), comparisons whose two sides share their words,
and two subjects that differ in one word (`test` vs `training accuracy rises`) are not read.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

_TOKEN = re.compile(r"[a-z]+(?:'[a-z]+)?|\d+(?:\.\d+)?|[,()]")
_BREAKS = frozenset(",()")
NEGATION_REACH, WINDOW = 6, 4
MAX_UNIT_CHARS = 2000
_UNIT_END = re.compile(r"(?<=[.!?;:])\s+|\n+")
# hedged answers read as the answer they hedge: "Hardly." / "Not really" are No (a hidden No must not pass as no
# answer at all)
_NO_HEDGES = r"no|hardly|barely|scarcely|not really|not quite|not at all|nope"
_ANSWER = re.compile(rf"(?:^|[:\n])[\W_]*(yes|{_NO_HEDGES})\b|\bthe answer is\W*(yes|{_NO_HEDGES})\b",
                     re.IGNORECASE)
ANSWER_CHARS = 200
_YES_WORDS = r"yes|yep|affirmative"
_NO_WORDS = rf"{_NO_HEDGES}|negative"
_AN_ANSWER = rf"({_YES_WORDS}|{_NO_WORDS})"
# every answer form, anywhere in the text (the first form needs the word to end its sentence or a comma after it)
_ANSWERS = re.compile(
    rf"(?:^|[:\n]|[.!?;]\s)[\W_]*{_AN_ANSWER}(?=\s*(?:[,.!?;:]|$))"
    rf"|\bthe (?:short |final |overall )?answer(?: to (?:the|this|our) (?:research )?question)?"
    rf"(?: (?:here|then))? (?:is|was|would be)\W*(?:a |an |clearly |simply )?{_AN_ANSWER}\b"
    rf"|\b(?:in short|in summary|in sum|overall|so|thus|hence|therefore|in brief|briefly|answer)"
    rf"\s*[,:\u2014\u2013-]?\s+{_AN_ANSWER}(?=\s*(?:[,.!?;:]|$))"
    rf"|\b(?:we|i) (?:answer|conclude|say)(?: that)?:?\s+{_AN_ANSWER}\b"
    rf"|\b(?:my|our|the|this) (?:short |final |overall |honest )?answer(?: to (?:the|this|our) (?:research )?"
    rf"question)? (?:turns out to be|remains|has to be|must be|would have to be|is clearly|is simply)\W*"
    rf"{_AN_ANSWER}\b"
    rf"|\b(?:my|our) (?:short |final |overall )?answer (?:is|was|would be)\W*{_AN_ANSWER}\b"
    rf"|\banswer(?:ed|s)? (?:the|this|our) (?:research )?question in the ({_NO_WORDS}|affirmative)\b"
    rf"|\bin the (negative|affirmative)\b(?=\s*[.!?;]|\s*$)",
    re.IGNORECASE)
# a sentence that is only an emphatic No ("Definitely not.", "Of course not.", "No way.", "Certainly not!")
_EMPHATIC_NO = re.compile(r"(?:^|[:\n]|[.!?;]\s)[\W_]*(?:(?:definitely|certainly|absolutely|surely|of course|clearly|"
                          r"obviously|sadly|unfortunately)\s+not|no way|not at all|by no means)(?=\s*(?:[.!?;]|$))",
                          re.IGNORECASE)
# the answer as a truth value or a verdict on the hypothesis ("the answer is false", "the hypothesis is rejected"),
# and a reply that opens the text with a bare "Not ..." sentence ("Not in our run.")
_VERDICT_NO = r"false|rejected|refuted|disproved|disconfirmed|unsupported|not supported|not confirmed|wrong"
_VERDICT_YES = r"true|confirmed|supported|verified|accepted|correct"
_VERDICTS = re.compile(
    rf"\b(?:the|our|this) (?:answer|hypothesis|claim|statement|premise)(?: to (?:the|this|our) (?:research )?"
    rf"question)? (?:is|was|would be|has been|must be)\W*(?:thus |therefore |clearly |then )?"
    rf"({_VERDICT_NO}|{_VERDICT_YES})\b"
    rf"|\A[\W_]*(not)(?:\s+[\w'-]+){{0,4}}\s*[.!?](?=\s|$)",
    re.IGNORECASE)
_WHOLE_CLAUSE = (("the", "case", "that"), ("true", "that"))
_AXES = {
    "magnitude": ("less lower smaller fewer below low lowest smallest",
                  "more greater higher larger above high highest largest greatest exceeds exceed"),
    "quality": ("worse hurts hurt degrades degrade degraded degradation deteriorates deteriorated deterioration "
                "worsens worsen worsened underperforms underperform underperformed inferior poorer poorest weaker "
                "weakest lags lag lagged lagging trails trailed loses lose lost losing",
                "better improves improve improved improvement improvements outperforms outperform outperformed "
                "beats beat helps help superior enhances enhance enhanced surpasses surpass surpassed stronger "
                "strongest preferable wins win won winning"),
    "change": ("decreases decrease decreased decreasing falls fall fell falling drops drop dropped declines decline "
               "declined reduces reduce reduced shrinks shrink shrank lowers lowered",
               "increases increase increased increasing rises rise rose rising raises raise raised grows grow grew "
               "growing climbs climb gains gain boosts boost boosted"),
}
CUES: dict[str, tuple[str, int]] = {w: (axis, sign) for axis, (down, up) in _AXES.items()
                                    for sign, words in ((-1, down), (1, up)) for w in words.split()}
_NEGATORS = frozenset(("not", "never", "cannot", "neither", "nor", "hardly", "scarcely"))
_AFTER_NEGATOR = frozenset(("is", "are", "was", "were", "be", "been", "do", "does", "did", "to", "have", "has",
                            "had", "a", "an", "the", "any", "much", "really", "actually", "significantly",
                            "substantially", "meaningfully", "always", "necessarily", "so", "very", "at", "all",
                            "even", "it", "make", "makes"))
_BEFORE_NONE = frozenset(("essentially", "almost", "virtually", "basically", "practically", "next", "to", "of",
                          "at", "all", "is", "are", "was", "were"))
_STOP_WORDS = (
    "the and for with that this than are was were has have had from into but its can all any per which when while "
    "because about also then there their these those such both only very much many some each is be been being does "
    "did do it as at on in of to by or an so we our would will could should may might after before same between "
    "over under almost nearly roughly essentially far here what how whose who them they one two")
_STOP = frozenset(_STOP_WORDS.split())
EFFECT_VERBS = ("chang", "affec", "alter", "diffe", "matte", "influ", "impac")


def _stem(token: str) -> str | None:
    token = token.removesuffix("'s")
    if not token.isalpha() or len(token) < 3 or token in _STOP or token in CUES or token in _NEGATORS:
        return None
    if token.endswith("s") and not token.endswith("ss") and len(token) > 3:
        token = token[:-1]
    return token[:5]


@dataclass
class Unit:
    """One sentence or clause: its tokens, per token its content stem (None for the rest), its cues (token index,
    axis, sign after negation), the stems it negates (stem -> token index) and which tokens stand in parentheses."""

    text: str
    tokens: list[str]
    stems: list[str | None]
    cues: list[tuple[int, str, int]] = field(default_factory=list)
    negated: dict[str, int] = field(default_factory=dict)
    question: bool = False
    aside: list[bool] = field(default_factory=list)

    @property
    def content(self) -> set[str]:
        return {s for s in self.stems if s}

    def plain(self) -> set[str]:
        return self.content - set(self.negated)

    def index(self, stem: str) -> int:
        return self.stems.index(stem)


def _negate(tokens: list[str], at: int, flipped: set[int], negated: dict[str, int]) -> bool:
    """Negate the cue or content word at token `at`; False when it is neither."""
    if not 0 <= at < len(tokens):
        return False
    if tokens[at] in CUES:  # a second negation of one cue turns it back ("not true that it fails to ... better")
        flipped.symmetric_difference_update({at})
        return True
    stem = _stem(tokens[at])
    if stem:
        negated.setdefault(stem, at)
        return True
    return False


def _scope(tokens: list[str], i: int, flipped: set[int], negated: dict[str, int]) -> None:
    """Apply the negator at `i`: to the first cue within NEGATION_REACH tokens of its clause (`does not predict
    held-out data better` negates `better`), else to the first content word after it (`no` to the first two)."""
    whole = next((len(w) for w in _WHOLE_CLAUSE if tuple(tokens[i + 1:i + 1 + len(w)]) == w), 0)
    if whole:  # `it is not the case that X is less ...`: every cue of the unit after it
        for j in range(i + 1 + whole, len(tokens)):
            if tokens[j] in CUES:
                _negate(tokens, j, flipped, negated)
        return
    reach = []
    for j in range(i + 1, min(len(tokens), i + 1 + NEGATION_REACH)):
        if tokens[j] in _BREAKS:
            break
        reach.append(j)
    cue = next((j for j in reach if tokens[j] in CUES), None)
    if cue is not None:
        _negate(tokens, cue, flipped, negated)
        return
    want = 2 if tokens[i] == "no" else 1
    for j in reach:
        if tokens[j] not in _AFTER_NEGATOR:
            want -= _negate(tokens, j, flipped, negated)
            if want <= 0:
                return


def parse_unit(text: str) -> Unit:
    """`text` as a unit: tokens, stems, cues with the negations applied, negated words."""
    tokens = _TOKEN.findall(text.lower().replace("\u2019", "'"))
    flipped: set[int] = set()
    negated: dict[str, int] = {}
    for i, tok in enumerate(tokens):
        if tok in ("none", "nothing"):
            j = i - 1
            while j >= 0 and tokens[j] in _BEFORE_NONE:
                j -= 1
            _negate(tokens, j, flipped, negated)
            continue
        negator = tok in _NEGATORS or tok.endswith("n't") or tok.startswith("fail") and tokens[i + 1:i + 2] == ["to"]
        if (tok == "no" or negator) and tokens[i + 1:i + 2] != ["only"]:
            _scope(tokens, i, flipped, negated)
    cues = [(i, *CUES[t]) for i, t in enumerate(tokens) if t in CUES]
    cues = [(i, axis, -sign if i in flipped else sign) for i, axis, sign in cues]
    aside, depth = [], 0
    for tok in tokens:
        depth = max(0, depth + (tok == "(") - (tok == ")"))
        aside.append(depth > 0)
    return Unit(text, tokens, [_stem(t) for t in tokens], cues, negated, aside=aside)


def units(text: str) -> list[Unit]:
    """The units of `text`, empty ones left out; a unit longer than MAX_UNIT_CHARS (no sentence) is cut into pieces
    of about that length, so the work stays linear in the text."""
    parts = []
    for part in _UNIT_END.split(text):
        while len(part) > MAX_UNIT_CHARS:
            cut = part.rfind(" ", MAX_UNIT_CHARS // 2, MAX_UNIT_CHARS)
            cut = cut if cut > 0 else MAX_UNIT_CHARS
            parts.append(part[:cut])
            part = part[cut:]
        parts.append(part)
    out = [parse_unit(part) for part in parts]
    return [u for u in out if u.stems]


def answer(text: str | None) -> str | None:
    """`yes` or `no` where `text` starts with one, or one of its first ANSWER_CHARS characters starts a line or
    follows a colon (`Yes.`, `**Conclusion:** No, ...`, `No meaningful change`), or "the answer is ...", else
    None."""
    m = _ANSWER.search((text or "")[:ANSWER_CHARS])
    if not m:
        return None
    said = " ".join((m.group(1) or m.group(2)).lower().split())
    return "no" if re.fullmatch(_NO_HEDGES, said) else "yes"


def answers(text: str | None) -> list[str]:
    """Every answer `text` gives to a yes/no question, in order (`yes` or `no`; module docstring)."""
    found = []
    for m in _ANSWERS.finditer(text or ""):
        word = " ".join(next(g for g in m.groups() if g).lower().split())
        found.append((m.start(), "yes" if re.fullmatch(_YES_WORDS + "|affirmative", word) else "no"))
    for m in _VERDICTS.finditer(text or ""):
        word = " ".join(next(g for g in m.groups() if g).lower().split())
        found.append((m.start(), "yes" if re.fullmatch(_VERDICT_YES, word) else "no"))
    found += [(m.start(), "no") for m in _EMPHATIC_NO.finditer(text or "")]
    return [said for _, said in sorted(found)]


def question_unit(question: str, said: str) -> Unit:
    """The question as a claim the reference's answer `said` makes: with `no` its cues are reversed and its effect
    verbs negated."""
    unit = parse_unit(question)
    unit.question = True
    if said == "no":
        unit.cues = [(i, axis, -sign) for i, axis, sign in unit.cues]
        for i, stem in enumerate(unit.stems):
            if stem in EFFECT_VERBS:
                unit.negated.setdefault(stem, i)
    return unit


def _shared(a: Unit, r: Unit) -> int:
    return len(a.content & r.content)


def _about(a: Unit, r: Unit) -> bool:
    need = max(2, math.ceil(0.5 * min(len(a.content), len(r.content))))
    return _shared(a, r) >= need


def _sides(u: Unit, i: int) -> tuple[set[str], set[str]]:
    return set(filter(None, u.stems[:i])), set(filter(None, u.stems[i + 1:]))


def _near(u: Unit, i: int) -> tuple[list[str], list[str]]:
    """The WINDOW content stems before and after token `i`, asides in parentheses skipped."""
    before = [s for s, aside in zip(u.stems[:i], u.aside[:i], strict=True) if s and not aside][-WINDOW:]
    after = [s for s, aside in zip(u.stems[i + 1:], u.aside[i + 1:], strict=True) if s and not aside][:WINDOW]
    return before, after


def _window(u: Unit, i: int) -> set[str]:
    before, after = _near(u, i)
    return set(before + after)


def _swapped(a: Unit, i: int, r: Unit, j: int) -> bool:
    """Whether `a` names before its position `i` what `r` names after its position `j`, or after what `r` names
    before (the words just before `r`'s cue left out: they are its predicate, not a side)."""
    ba, aa = _sides(a, i)
    ba, aa = ba - aa, aa - ba
    br, ar = _sides(r, j)
    far, near = ar - br, br - ar - set(_near(r, j)[0])
    return len(far & ba) + len(near & aa) > len(far & aa) + len(near & ba)


def _cue_text(u: Unit, i: int) -> str:
    sign = next(s for k, _, s in u.cues if k == i)
    return ("not " if CUES[u.tokens[i]][1] != sign else "") + u.tokens[i]


def _reversed(a: Unit, r: Unit) -> tuple[str, str]:
    """(`contradicts` with why, `agrees`, or `silent`): each cue of `a` is read against the cue of `r` on its axis
    whose words around it it shares most (at least half of them); `contradicts` where every cue of `a` read
    against one cue of `r` says the opposite, `agrees` where one says the same."""
    agrees = False
    for axis in dict.fromkeys(ax for _, ax, _ in a.cues):
        theirs = [(j, s) for j, ax, s in r.cues if ax == axis]
        verdicts = []
        for i, ax, sign in a.cues:
            if ax != axis or not theirs:
                continue
            near = {j: len(_window(a, i) & _window(r, j)) for j, _ in theirs}
            j, s = max(theirs, key=lambda t: near[t[0]])
            if near[j] < max(2, math.ceil(0.5 * len(_window(r, j)))):
                continue
            swapped = _swapped(a, i, r, j)
            verdicts.append(((-sign if swapped else sign) == -s, i, j, swapped))
        for ref_cue in dict.fromkeys(j for _, _, j, _ in verdicts):  # per reference cue, what was said of it
            said = [v for v in verdicts if v[2] == ref_cue]
            if all(v[0] for v in said):
                _, i, j, swapped = said[0]
                turned = ", its sides the other way round" if swapped else ""
                return "contradicts", (f"'{_cue_text(a, i)}'{turned} where the reference says '{_cue_text(r, j)}' "
                                       f"({axis})")
        agrees = agrees or bool(verdicts)
    return ("agrees", "") if agrees else ("silent", "")


def _negated(a: Unit, r: Unit) -> tuple[str, str]:
    """`contradicts` where `a` negates a word `r` states plainly (a near copy of `r`), or, `r` being the question
    answered No, states plainly an effect verb the answer negates; else `silent`."""
    if r.question:
        for stem in sorted(set(r.negated) & a.plain()):
            return "contradicts", f"it states '{stem}...' where the reference answers that it does not"
    elif _shared(a, r) * 2 >= len(r.content):
        for stem, i in a.negated.items():
            if stem in r.plain() and not _swapped(a, i, r, r.index(stem)):
                return "contradicts", f"it negates '{stem}...', which the reference states"
    return "silent", ""


def contradictions(reference: str, question: str | None, conclusion: str, *, limit: int = 20) -> list[dict]:
    """The claims of `conclusion` that contradict `reference` (and the question as the reference answers it): one
    row per contradicting unit (`kind`, `conclusion`, `reference`, `detail`), at most `limit`. A unit contradicts
    when it contradicts one of the reference units it is about and agrees with none of them."""
    found: list[dict] = []
    said = answer(reference)
    says = [a for a in ([answer(conclusion)] + answers(conclusion)) if a]
    other = next((a for a in says if said and a != said), None)
    if other:
        found.append({"kind": "answer", "conclusion": conclusion[:120], "reference": reference[:120],
                      "detail": f"it answers {other.capitalize()} where the reference answers {said.capitalize()}"})
    ref_units = units(reference)
    if said and question:
        ref_units.append(question_unit(question, said))
    for a in units(conclusion):
        about = [r for r in ref_units if _about(a, r)]
        if not about:
            continue
        best = max(_shared(a, r) for r in about)
        about = [r for r in about if _shared(a, r) == best]
        for kind, test in (("reversed", _reversed), ("negated", _negated)):
            results = [(test(a, r), r) for r in about]
            hit = next((((state, why), r) for (state, why), r in results if state == "contradicts"), None)
            if hit and not any(state == "agrees" for (state, _), _ in results):
                found.append({"kind": kind, "conclusion": a.text[:300], "reference": hit[1].text[:300],
                              "detail": hit[0][1]})
                break
        if len(found) >= limit:
            break
    return found


def contradiction_sentence(row: dict) -> str:
    """One sentence for a contradicting claim."""
    if row["kind"] == "answer":
        return f"the conclusion contradicts the reference's answer: {row['detail']}"
    what = "reverses a comparison" if row["kind"] == "reversed" else "negates a finding"
    return f"the conclusion {what} of the reference ({row['detail']}): \"{row['conclusion'][:160]}\""
