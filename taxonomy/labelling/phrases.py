"""Offline names that state a failure: phrase candidates taken from a type's own insights (word runs between
punctuation, 2 to 6 words, not starting or ending on a filler word), scored by how many of the type's insights
say them against how many of its nearest neighbours' insights do, so that a name tells the type apart. An error
signature (the exception class most members name) leads the name when it is what the type is about."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from failatlas.taxonomy.keywords import DOMAIN_STOP_WORDS
from failatlas.taxonomy.signatures import error_signature

_CLAUSE = re.compile(r"[.,;:!?()\[\]{}|=\n]+|\s-\s|\s—\s")
_QUOTES = re.compile(r"[\"`<>*‘’“”]|(?<![A-Za-z])'|'(?![A-Za-z])")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_\-]*(?:'[a-z]+)?")
# Words a name may hold inside a phrase but neither start nor end on.
_EDGE_TEXT = """
    a an the this that these those it its is are was were be been being has have had do does did to of in on
    at by for from with as and or but not no so than then there here when while which who whose what where why how
    into onto about after before again also any all some each every other another same such very more most many
    much few can could would should will shall may might must one two three first second third instead because
    since although though if else once just only even still already yet ever never both either neither per via
    e g eg ie etc system agent model llm assistant without instead not no named called
"""
# Words that say something went wrong: a phrase holding one states a failure rather than a topic.
_CUE_TEXT = """
    failed fails failing failure error errors incorrect incorrectly wrong wrongly missing missed miss invalid
    unexpected unsupported repeated repeatedly repeating ignored ignoring without instead deviated deviation
    hallucinated fabricated invented misinterpreted misread misunderstood misunderstanding misclassified
    unable cannot couldn't not no never timed timeout exceeded denied forbidden refused crashed raised
    broken mismatch mismatched inconsistent unverified unsupported skipped omitted forgot lost redundant
"""
CUES = frozenset(_CUE_TEXT.split())
_EDGE_WORDS = (frozenset(_EDGE_TEXT.split()) | DOMAIN_STOP_WORDS) - (CUES - {"not", "no", "without", "instead"})
# Language and tool tokens that are no failure on their own ("Py", "bash"): kept only inside a longer phrase.
_BARE_TEXT = """
    py python python3 pip bash sh shell git docker conda js javascript ts java c cpp go rust r sql json yaml
    csv txt md html ipynb notebook jupyter torch pytorch numpy pandas tf tensorflow sklearn
"""
BARE_TOKENS = frozenset(_BARE_TEXT.split())


def candidate_phrases(text: str, *, min_words: int = 2, max_words: int = 6) -> dict[str, str]:
    """Every run of `min_words`..`max_words` words inside one clause of `text` that neither starts nor ends on a
    filler word and holds no id-like word (three digits, or a long snake_case name such as a test function),
    lower-cased, mapped to its form in the text."""
    out: dict[str, str] = {}
    for clause in _CLAUSE.split(_QUOTES.sub(" ", text)):
        words = _WORD.findall(clause)
        low = [w.lower() for w in words]
        for i in range(len(words)):
            if low[i] in _EDGE_WORDS or len(low[i]) < 2:
                continue
            for j in range(i + min_words, min(i + max_words, len(words)) + 1):
                last = low[j - 1]
                if last in _EDGE_WORDS or len(last) < 2:
                    continue
                span = low[i:j]
                if any(_id_like(w) for w in span):
                    break
                out.setdefault(" ".join(span), " ".join(words[i:j]))
    return out


def _id_like(word: str) -> bool:
    return sum(ch.isdigit() for ch in word) >= 3 or word.count("_") >= 2 or len(word) > 30


def _document_frequency(texts: Sequence[str], limit: int = 200, forms: dict[str, Counter[str]] | None = None
                        ) -> Counter[str]:
    counts: Counter[str] = Counter()
    for text in texts[:limit]:
        found = candidate_phrases(text)
        counts.update(found.keys())
        if forms is not None:
            for low, original in found.items():
                forms.setdefault(low, Counter())[original] += 1
    return counts


def best_phrase(texts: Sequence[str], contrast: Sequence[str] = (), *, limit: int = 200) -> str | None:
    """The phrase that most of `texts` (a type's insights, most central first) say and fewest of `contrast`
    (its neighbours' insights) say; longer phrases win ties of support, since they say more. None when no
    phrase is said by two or more insights (or by the only one)."""
    forms: dict[str, Counter[str]] = {}
    inside = _document_frequency(texts, limit, forms)
    if not inside:
        return None
    outside = _document_frequency(contrast, limit)
    n_in = max(min(len(texts), limit), 1)
    n_out = max(min(len(contrast), limit), 1)
    least = 1 if n_in == 1 else 2
    best, best_score = None, 0.0
    for phrase, df in inside.items():
        if df < least:
            continue
        words = phrase.split()
        if all(w in _EDGE_WORDS or w in BARE_TOKENS for w in words):
            continue
        support = df / n_in
        score = (support - outside.get(phrase, 0) / n_out) * (1.0 + 0.25 * min(len(words), 4))
        if any(w in CUES for w in words):
            score *= 1.5
        if score > best_score or (score == best_score and best is not None and len(phrase) > len(best)):
            best, best_score = phrase, score
    if best is None:  # nothing sets the type apart in words: the phrase most of its insights say
        shared = [(df * (1.0 + 0.25 * min(len(p.split()), 4)), p) for p, df in inside.items() if df >= least
                  and not all(w in _EDGE_WORDS or w in BARE_TOKENS for w in p.split())]
        best = max(shared)[1] if shared else None
    if best is None:
        return None
    chosen = _extend(best, inside, outside, n_out)
    return forms[chosen].most_common(1)[0][0]


def _extend(best: str, inside: Counter[str], outside: Counter[str], n_out: int) -> str:
    """The longest phrase containing `best` that most insights saying `best` also say (a verb gets its object:
    'failed to include' -> 'failed to include the required end_plan tag') and the neighbours say no more."""
    base = inside[best]
    padded = f" {best} "
    longer = [
        q for q, df in inside.items()
        if len(q) > len(best) and padded in f" {q} " and df >= 0.6 * base
        and outside.get(q, 0) / n_out <= outside.get(best, 0) / n_out
    ]
    return max(longer, key=lambda q: (inside[q], len(q.split()), q)) if longer else best


def dominant_signature(texts: Sequence[str], share: float = 0.5) -> str | None:
    """The exception class named by at least `share` of `texts`, or None."""
    sigs = Counter(s for s in (error_signature(t) for t in texts) if s)
    if not sigs:
        return None
    sig, n = sigs.most_common(1)[0]
    return sig if n >= share * len(texts) else None


def sentence_case(phrase: str) -> str:
    """Capitalise the first word unless it is an identifier (page_down, NotImplementedError)."""
    first = phrase.split(" ", 1)[0]
    if not first.replace("-", "").replace("'", "").isalpha() or any(ch.isupper() for ch in first[1:]):
        return phrase
    return phrase[0].upper() + phrase[1:]


def failure_name(texts: Sequence[str], contrast: Sequence[str] = (), keywords: Sequence[str] = ()) -> str:
    """A short phrase that states the failure: the dominant error signature, if any, joined to the best
    contrastive phrase of the insights ("ModuleNotFoundError: no module named bio"); falls back to the top
    keywords when no phrase is shared."""
    phrase = best_phrase(texts, contrast)
    sig = dominant_signature(texts)
    if phrase is None:
        if sig:
            return f"{sig} raised"
        words = [k for k in keywords if k.lower() not in BARE_TOKENS][:2]
        phrase = " and ".join(words) if words else "unclassified failures"
    if sig and sig.lower() not in phrase.lower():
        return f"{sig}: {phrase}"
    return sentence_case(phrase)
