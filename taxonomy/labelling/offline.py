"""Offline naming: a readable name from the type's c-TF-IDF keywords, a definition templated from its most
central insight. Deterministic, no network."""

from __future__ import annotations

import re
from collections.abc import Sequence

from failatlas.taxonomy.labelling.base import register_labeller
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


def _shorten(text: str, limit: int = 180) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return cut.rstrip(",;:.") + " ..."


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
    """Names a type from its top keywords; defines it by those keywords and its most central insight."""

    name = "offline"

    def __init__(self, n_examples: int = 5, name_parts: int = 2, *, store: object = None) -> None:
        # `store` is part of every labeller's constructor (an LLM labeller logs its calls there); unused here.
        self.n_examples = n_examples
        self.name_parts = name_parts

    def label(self, evidence: TypeEvidence) -> TypeLabel:
        name = readable_name(evidence.keywords, evidence.texts, parts=self.name_parts)
        top = evidence.keywords[:3]
        central = _shorten(evidence.texts[0]) if evidence.texts else ""
        definition = (
            f'Failures characterised by {_join_terms(top)}, as in the most typical case: "{central}"'
            if top
            else f'Failures like the most typical case: "{central}"'
        )
        criteria = [f"The insight is about {_join_terms(evidence.keywords[:5])}."] if top else []
        return TypeLabel(
            name=name,
            definition=definition,
            inclusion_criteria=criteria,
            examples=examples_of(evidence, self.n_examples),
            naming_method="offline",
        )

    def label_category(self, evidence: CategoryEvidence) -> CategoryLabel:
        """A one-type category takes its type's name; the only category of a phase is "All <phase> failures";
        otherwise a name from the category's keywords. The definition lists the member types."""
        if len(evidence.type_names) == 1:
            name = evidence.type_names[0]
        elif not evidence.other_categories:
            name = f"All {evidence.phase} failures"
        else:
            name = readable_name(evidence.keywords, evidence.texts, parts=self.name_parts)
        return CategoryLabel(name=name, definition=category_definition(evidence), naming_method="offline")


def category_definition(evidence: CategoryEvidence) -> str:
    return f"{len(evidence.type_names)} failure type(s): " + "; ".join(evidence.type_names) + "."
