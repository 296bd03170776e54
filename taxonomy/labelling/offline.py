"""Offline naming: a phrase from the type's own insights that states the failure (labelling/phrases.py), a
definition saying what is inside (with representative insights) and what is not. Deterministic, no network.
`readable_name` (keywords joined into a short name) remains for callers that only have keywords."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from failatlas.taxonomy.definitions import category_definition, with_examples
from failatlas.taxonomy.definitions import shorten as shorten  # re-exported: callers name it here
from failatlas.taxonomy.labelling.base import register_labeller
from failatlas.taxonomy.labelling.condense import condensed_candidates, condensed_name, is_clause, shared_phrases
from failatlas.taxonomy.labelling.phrases import (
    category_term,
    category_word,
    failure_name,
    sentence_case,
    shared_phrase,
    shared_word,
    states_failure,
)
from failatlas.taxonomy.labelling.readable import fragment, honest_name, withheld_note
from failatlas.taxonomy.model import CategoryEvidence, CategoryLabel, Example, TypeEvidence, TypeLabel

_TOKEN = re.compile(r"(?u)\b[a-zA-Z_][a-zA-Z0-9_\-]+\b")


def _tokens(text: str) -> list[str]:
    return [t.lower() for t in _TOKEN.findall(text)]


def _bigram_counts(texts: Sequence[str]) -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = {}
    for text in texts:
        toks = _tokens(text)
        for pair in set(zip(toks, toks[1:], strict=False)):
            counts[pair] = counts.get(pair, 0) + 1
    return counts


def _phrase(head: str, candidates: list[str], bigrams: dict[tuple[str, str], int], min_count: int) -> str:
    """Join a single-word keyword with another keyword it usually stands beside ('final' + 'answer')."""
    if " " in head:
        return head
    for other in candidates:
        if " " in other and head in other.split():
            return other
    best, best_n = head, min_count - 1
    for other in candidates:
        if " " in other or other == head:
            continue
        for pair in ((head, other), (other, head)):
            n = bigrams.get(pair, 0)
            if n > best_n:
                best, best_n = " ".join(pair), n
    return best


def readable_name(keywords: Sequence[str], texts: Sequence[str] = (), *, parts: int = 2) -> str:
    """A short name such as "Final answer / plan" from ranked keywords; words that usually stand together in
    `texts` are joined into one phrase. Returns "Miscellaneous" when there are no keywords."""
    remaining = [k for k in keywords if k]
    if not remaining:
        return "Miscellaneous"
    bigrams = _bigram_counts(texts)
    min_count = max(2, len(texts) // 5)
    chosen: list[str] = []
    while remaining and len(chosen) < parts:
        head = remaining.pop(0)
        phrase = _phrase(head, remaining[:5], bigrams, min_count)
        chosen.append(phrase)
        taken = set(" ".join(chosen).split())
        remaining = [k for k in remaining if not set(k.split()) & taken]
    name = " / ".join(chosen)
    return name[0].upper() + name[1:]


def _join_terms(terms: Sequence[str]) -> str:
    quoted = [f"'{t}'" for t in terms]
    if len(quoted) <= 1:
        return "".join(quoted)
    return ", ".join(quoted[:-1]) + " and " + quoted[-1]


def examples_of(evidence: TypeEvidence, n: int) -> list[Example]:
    """The `n` members closest to the centroid, most central first."""
    return [
        Example(insight_id=i, text=t, similarity=round(float(s), 4))
        for i, t, s in zip(
            evidence.insight_ids[:n], evidence.texts[:n], evidence.similarities[:n], strict=True
        )
    ]


@register_labeller("offline")
class OfflineLabeller:
    """Names a type by the phrase its insights share and its nearest neighbours' do not (led by the error
    signature most members name); defines it by what is inside, with representative insights, and by what is
    not (the nearest other types)."""

    name = "offline"

    def __init__(self, n_examples: int = 5, name_parts: int = 2, *, store: object = None) -> None:
        # `store` is part of every labeller's constructor (an LLM labeller logs its calls there); unused here.
        self.n_examples = n_examples
        self.name_parts = name_parts

    def label(self, evidence: TypeEvidence) -> TypeLabel:
        contrast = [t for other in evidence.neighbours for t in other.texts]
        return self.label_as(evidence, _by_content(evidence.texts, contrast, evidence.keywords))

    def candidates(self, evidence: TypeEvidence) -> list[str]:
        """Every name the type's own statements offer, the one `label` gives first: the phrase most of them say,
        then the runs of words from its most central statements that a half, a third or a quarter of them share
        in content (`condense.condensed_candidates`), each saying what went wrong ('Failed to include the
        mandatory tag', not 'Include the required end_plan tag' nor 'Tool call in the previous step'); none a
        fragment or a clause. [] when they share nothing."""
        contrast = [t for other in evidence.neighbours for t in other.texts]
        first = _by_content(evidence.texts, contrast, evidence.keywords)
        if not first:
            return []
        others = [n for n in condensed_candidates(evidence.texts, contrast) if fragment(n) is None
                  and not is_clause(n.split(), strict=False) and states_failure(n)]
        return list(dict.fromkeys([first, *others]))

    def label_as(self, evidence: TypeEvidence, named: str) -> TypeLabel:
        """The type's label under the name `named` (one of its `candidates`; "" for none: it is then unnamed)."""
        name = named or honest_name(evidence)
        neighbours = [n for n in (_by_content(o.texts, evidence.texts, o.keywords) for o in evidence.neighbours) if n]
        size = f"{evidence.size} {evidence.phase} insight{'s' if evidence.size != 1 else ''}"
        head = f"{name} ({size})"
        said = shared_phrases(evidence.texts, name)
        if named and said:  # the one-line definition: what most of its statements say besides the name
            head += "; its statements say " + _join_terms(said)
        if not named:  # the statements share nothing to name them by: say so (no placeholder), the examples speak
            head = withheld_note("", "empty") + f"Statements that share no common phrase ({size})"
        definition = with_examples(head, evidence.texts)
        criteria = [f"Inside: the insight reports {name[0].lower() + name[1:] if name[:1].isupper() else name}."
                    ] if named else []
        if evidence.keywords:
            criteria.append(f"Terms typical of it: {_join_terms(evidence.keywords[:5])}.")
        if neighbours:
            criteria.append("Not inside: " + "; ".join(neighbours) + " (the nearest other types).")
        return TypeLabel(
            name=name,
            definition=definition,
            inclusion_criteria=criteria,
            examples=examples_of(evidence, self.n_examples),
            naming_method="offline",
            definition_head=head,
        )

    def label_category(self, evidence: CategoryEvidence) -> CategoryLabel | None:
        """A category of two or more types is named by the failure two or more of its types' insights state,
        else '<term> failures' with the phrase or word its types share (in their insights or their names),
        more general than any one of them; None when they share nothing to name it by (a top keyword of one
        type would misname the others). The definition lists the member types."""
        # never a type's own name, nor the topic of a type named '<topic> failures'
        taken = [*evidence.type_names, *(n.removesuffix(" failures") for n in evidence.type_names)]
        phrase = shared_phrase(evidence.type_texts, evidence.contrast_texts, taken)
        if phrase and states_failure(phrase):
            return CategoryLabel(name=sentence_case(phrase), definition=category_definition(evidence),
                                 naming_method="offline")
        lowered = {n.lower() for n in evidence.type_names}
        terms = (phrase, _shared_term(evidence.type_names), shared_word(evidence.type_texts, evidence.contrast_texts))
        shared = next((t for t in terms if t and category_term(t) and f"{_modifier(t)} failures".lower() not in
                       lowered), None)
        if not shared:
            return None
        return CategoryLabel(name=f"{sentence_case(_modifier(shared))} failures",
                             definition=category_definition(evidence), naming_method="offline")


def _by_content(texts: Sequence[str], contrast: Sequence[str], keywords: Sequence[str]) -> str:
    """The type's name from its statements: the phrase most of them say (`failure_name`) where it is a name and
    not a clause or a fragment, else a run of words from the most central statements that most of them share in
    content (`condense.condensed_name`); "" when they share nothing to name them by."""
    named = failure_name(texts, contrast, keywords)
    if named and fragment(named) is None and not is_clause(named.split(), strict=False):
        return named
    return condensed_name(texts, contrast) or ""


def _modifier(term: str) -> str:
    """`term` as the word before "failures": a plain plural's last word in the singular ("Results" -> "Result",
    "Files" -> "File"; "Queries", "Indices", "Series", "Processes" as they are)."""
    head, _, last = term.rpartition(" ")
    if len(last) > 4 and last.endswith("s") and not last.endswith(
            ("ss", "us", "is", "ies", "ices", "ses", "xes", "ches", "shes")):
        last = last[:-1]
    return f"{head} {last}" if head else last


def _shared_term(names: Sequence[str]) -> str | None:
    """What two or more of `names` share: the longest run of two or more words (not one of the names itself,
    not ending on a filler word), else the word (not a filler, a bare tool token, an identifier or a verb form
    such as 'accessed'; plurals count as one) that most of them, and at least two, contain, in the form the
    names use."""
    runs: Counter[str] = Counter()
    whole = {n.lower() for n in names}
    for n in names:
        words = re.findall(r"[A-Za-z][A-Za-z_\-]*", n.lower())
        found = {" ".join(words[i:j]) for i in range(len(words)) for j in range(i + 2, min(i + 3, len(words)) + 1)}
        runs.update(r for r in found if r not in whole and category_term(r))
    shared_runs = [r for r, c in runs.items() if c >= 2]
    if shared_runs:
        return max(shared_runs, key=lambda r: (runs[r], len(r.split()), r))
    counts: Counter[str] = Counter()
    forms: dict[str, str] = {}
    for n in names:
        words = re.findall(r"[A-Za-z][A-Za-z_\-]{3,}", n)
        for w in {_stem(w) for w in words}:
            counts[w] += 1
        for w in words:
            forms.setdefault(_stem(w), w.lower() if w[1:].islower() else w)
    common = [w for w, c in counts.items() if c >= 2 and w not in _FILLER and category_word(w)]
    return forms[max(common, key=lambda w: (counts[w], len(w), w))] if common else None


def _stem(word: str) -> str:
    w = word.lower()
    return w[:-1] if len(w) > 4 and w.endswith("s") and not w.endswith("ss") else w


# Words of names that say nothing of a category (fillers are already refused by `category_word`).
_FILLER = frozenset({"insight", "insights", "failures", "failure", "error", "errors"})


