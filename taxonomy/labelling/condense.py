"""A name from the most central statements, condensed (issue 53): where no phrase is said word for word by enough
of a type's statements (annotators each write their own sentence), the type is named by a short run of words
from one of its most central statements, chosen for how many of the type's statements share its content words and
how few of its neighbours' statements do.

Candidates are the runs of 2 to 8 words inside one clause of the 5 most central statements (quotes, paths and URLs
left out, as for phrases), neither starting nor ending on a filler word, never a clause ("Error was with the
formatting": a subject and its verb) and never a fragment shape (`readable.unreadable_reason`). Support is soft:
for each statement, the share of the run's content words (lower case, a plural's final s dropped) it holds. The run
with the best support inside minus support outside, favouring runs that state a failure and runs of 3-6 words,
names the type, when at least half of the statements hold most of its content words (else a third, else a
quarter); otherwise None (the members share nothing to name them by).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from itertools import islice

import numpy as np

from failatlas.taxonomy.labelling.phrases import (
    _BINDING_NEXT,
    _EDGE_WORDS,
    _FUNCTION_WORDS,
    _id_like,
    _may_start,
    _words_of_clauses,
    sentence_case,
    states_failure,
)
from failatlas.taxonomy.labelling.readable import fragment

CENTRAL = 5
_CLAUSE_VERBS = frozenset(["is", "are", "was", "were", "be", "been", "being", "seems", "seemed"])
_NEGATIONS = frozenset(["not", "never", "no"])
_CONTENT_SKIP = _EDGE_WORDS | frozenset(["agent", "agents", "model", "tool", "tools", "step", "steps", "task", "tasks"])


def _stem(word: str) -> str:
    w = word.lower()
    return w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w


def _content(words: Sequence[str]) -> set[str]:
    return {_stem(w) for w in words if w.lower() not in _CONTENT_SKIP and len(w) > 2}


_AUXILIARY_TEXT = "do does did has have had can could would should will may might must"
_AUXILIARIES = frozenset(_AUXILIARY_TEXT.split())
# words that open a clause of their own or stand for its subject: a run holding one is a sentence, not a name
_OPENER_TEXT = """because since although though while whereas which who whom whose that where when if unless until so
    they it he she we you i there this these those"""
_CLAUSE_OPENERS = frozenset(_OPENER_TEXT.split())
# words that need what follows them (an adverb, an adjective that qualifies a noun): a name cannot end on one
_NEEDS_MORE_TEXT = """previous initial same other another required correct incorrect proper multiple several various
    certain specific particular additional further first last next many much more most any each every both either
    neither such own final wrong new full entire whole relevant necessary given main similar different"""
_NEEDS_MORE = frozenset(_NEEDS_MORE_TEXT.split())


def is_clause(words: Sequence[str], *, strict: bool = True) -> bool:
    """Whether a run of words is a clause rather than a name: it holds a copula that is not a negated state ("Error
    was with the formatting"; "package is not installed" states a failure and is kept for `readable` to judge),
    an auxiliary after its first word ("plan does not ask"), a pronoun or a subordinating word ("because they
    repeatedly"), or it ends on an adverb or on a word that needs a noun after it ("errors in the previous").
    An auxiliary with a negation after it states a failure ("the re-run did not pass"); with `strict` False (a
    phrase members say word for word) only the copula counts."""
    low = [w.lower() for w in words]
    if any(w in _CLAUSE_VERBS and (k + 1 >= len(low) or low[k + 1] not in _NEGATIONS) for k, w in enumerate(low)):
        return True
    if not strict:  # a phrase members say word for word: only a copula makes it a clause ("did not pass" states)
        return False
    if any(w in _AUXILIARIES and (k + 2 > len(low) or low[k + 1] not in _NEGATIONS)
           for k, w in enumerate(low) if k) or any(w in _CLAUSE_OPENERS for w in low):
        return True
    return low[0].endswith("ly") or low[-1].endswith("ly") or low[-1] in _NEEDS_MORE


_ASIDES = re.compile(r"\s*\([^()]*\)|\s*`[^`]*`")


def _without_asides(text: str) -> str:
    """`text` without its parenthesised asides and code spans: "Package `x` (module `y`) is not installed" reads
    "Package is not installed", a clause the runs may then be taken from."""
    return _ASIDES.sub("", text)


def _bags(texts: Sequence[str]) -> list[set[str]]:
    return [_content([w for clause in _words_of_clauses(t) for w in clause]) for t in texts]


def _support(content: set[str], bags: list[set[str]]) -> np.ndarray:
    if not bags:
        return np.zeros(0)
    return np.array([len(content & b) / len(content) for b in bags])


def condensed_name(texts: Sequence[str], contrast: Sequence[str] = (), *, limit: int = 200) -> str | None:
    """A short name from the most central of `texts` (a type's statements, most central first) that most of them
    share in content and `contrast` (the nearest other types' statements) does not; None when no run of words
    is held, for most of its content words, by half of the statements (or by the only one)."""
    inside, outside = _bags(texts[:limit]), _bags(contrast[:limit])
    if not inside:
        return None
    for share in SHARES:  # most of them first; a third, then a quarter, before saying they share nothing
        found = _best_run(texts, inside, outside, share)
        if found:
            return sentence_case(found)
    return None


# the share of a type's statements that must hold most of a name's content words, tried in turn
SHARES = (0.5, 1 / 3, 0.25)


def _best_run(texts: Sequence[str], inside: list[set[str]], outside: list[set[str]], share: float) -> str | None:
    return next(iter(_ranked_runs(texts, inside, outside, share, 1)), None)


def _ranked_runs(texts: Sequence[str], inside: list[set[str]], outside: list[set[str]], share: float, k: int,
                 *, whole: bool = False) -> list[str]:
    """Up to `k` runs held by `share` of the statements, best first (ties: the first found), none a fragment; with
    `whole`, only whole phrases (`_ends_whole`: not "... and chose" + "to", "the required end_plan" + "tag")."""
    scored: dict[str, tuple[float, int]] = {}
    for text in [v for t in texts[:CENTRAL] for v in (t, _without_asides(t))]:
        for words in _words_of_clauses(text):
            low = [w.lower() for w in words]
            for i in range(len(words)):
                if _id_like(words[i]) or not _may_start(low, i):
                    continue
                for j in range(i + 2, min(i + 8, len(words)) + 1):
                    if _id_like(words[j - 1]):
                        break
                    if low[j - 1] in _EDGE_WORDS or len(low[j - 1]) < 2 or whole and not _ends_whole(low, i, j):
                        continue
                    run = words[i:j]
                    content = _content(run)
                    if len(content) < 2 or is_clause(run):
                        continue
                    held = _support(content, inside)
                    if (held >= 0.5).mean() < share and len(inside) > 1:
                        continue
                    score = float(held.mean() - (_support(content, outside).mean() if outside else 0.0))
                    score *= (1.0 + 0.15 * min(len(content), 4)) * (1.3 if states_failure(" ".join(low[i:j])) else 1.0)
                    score *= 0.8 if j - i > 6 else 1.0
                    phrase = " ".join(run)
                    if score > 0 and score > scored.get(phrase, (0.0, 0))[0]:
                        scored[phrase] = (score, scored.get(phrase, (0.0, len(scored)))[1])
    ranked = sorted(scored, key=lambda p: (-scored[p][0], scored[p][1]))
    return list(islice((p for p in ranked if fragment(sentence_case(p)) is None), k))


_JOINS = frozenset(["and", "or", "but", "nor"])


def _ends_whole(low: list[str], i: int, j: int) -> bool:
    """Whether the run `low[i:j]` is one whole phrase: it joins no two parts ("Information and instead relied") and
    its statement ends after it or goes on with a function word that binds nothing to it (not an article, 'of',
    'to' or a negation: "the tool failure as a file" + "not found")."""
    if any(w in _JOINS for w in low[i:j]):
        return False
    return j >= len(low) or (low[j] in _FUNCTION_WORDS and low[j] not in _BINDING_NEXT and low[j] not in _NEGATIONS)


def condensed_candidates(texts: Sequence[str], contrast: Sequence[str] = (), *, per_share: int = 6,
                         limit: int = 200) -> list[str]:
    """The runs `condensed_name` chooses among that end whole (`_ranked_runs`), best first at each share of the
    statements that holds them (half, a third, a quarter), `per_share` of each, no two the same: the other names
    a type's own statements offer."""
    inside, outside = _bags(texts[:limit]), _bags(contrast[:limit])
    if not inside:
        return []
    found: list[str] = []
    for share in SHARES:
        found += [sentence_case(p) for p in _ranked_runs(texts, inside, outside, share, per_share, whole=True)]
    return list(dict.fromkeys(found))


def shared_phrases(texts: Sequence[str], name: str, k: int = 3, *, limit: int = 200) -> list[str]:
    """Up to `k` phrases (2 to 8 words, as `phrases` finds them) that the most of `texts` say, each said by two or
    more of them and by a fifth or more, none inside `name` or another chosen phrase, longest first among equals:
    what a one-line definition quotes of its members."""
    from failatlas.taxonomy.labelling.phrases import _document_frequency

    forms: dict[str, Counter[str]] = {}
    counts = _document_frequency(texts, limit, forms)
    need = max(2, 0.2 * min(len(texts), limit))
    ranked = sorted((p for p, n in counts.items() if n >= need and not is_clause(p.split())
                     and fragment(sentence_case(p)) is None),
                    key=lambda p: (-counts[p], -len(p.split()), p))
    chosen: list[str] = []
    for p in ranked:
        if p in name.lower() or any(p in c or c in p for c in chosen):
            continue
        chosen.append(forms[p].most_common(1)[0][0])
        if len(chosen) == k:
            break
    return chosen


def short(name: str, words: int = 10) -> str:
    """`name` cut to `words` words at most (a name is a phrase, not a sentence)."""
    parts = re.split(r"\s+", name.strip())
    return " ".join(parts[:words])
