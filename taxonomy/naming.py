"""Naming a phase's failure types and grouping them into categories (split from build.py): each draft's evidence
with its nearest other drafts as contrast, names made distinct within a phase, and the categories a labeller names
over groups of two or more types."""

from __future__ import annotations

from itertools import zip_longest

import numpy as np

from failatlas.taxonomy.drafts import Draft
from failatlas.taxonomy.hierarchy import group_centroids
from failatlas.taxonomy.keywords import class_tfidf
from failatlas.taxonomy.labelling import Labeller
from failatlas.taxonomy.model import BuildParams, CategoryEvidence, FailureCategory, TypeEvidence, TypeLabel


def type_evidence(drafts: list[Draft], type_ids: list[str], n_neighbours: int = 2) -> list[TypeEvidence]:
    """Each draft's evidence, with the nearest other drafts of its phase as contrast."""
    plain = [
        TypeEvidence(
            key=t,
            phase=d.phase,
            insight_ids=d.insight_ids,
            texts=d.texts,
            similarities=d.similarities,
            keywords=d.keywords,
        )
        for t, d in zip(type_ids, drafts, strict=True)
    ]
    if len(drafts) > 1:
        centroids = np.stack([d.centroid for d in drafts])
        sims = centroids @ centroids.T
        for i, ev in enumerate(plain):
            order = [j for j in np.argsort(-sims[i], kind="stable") if j != i][:n_neighbours]
            ev.neighbours = [plain[j] for j in order]
    return plain


def unique_names(names: list[str], keywords: list[list[str]]) -> list[str]:
    """Make names distinct within a phase by adding a distinguishing keyword (then a number) to repeats."""
    out: list[str] = []
    for name, kws in zip(names, keywords, strict=True):
        candidate = name
        for kw in kws:
            if candidate.lower() not in {o.lower() for o in out}:
                break
            if kw.lower() not in name.lower():
                candidate = f"{name} ({kw})"
        n = 2
        while candidate.lower() in {o.lower() for o in out}:
            candidate, n = f"{name} #{n}", n + 1
        out.append(candidate)
    return out


def _interleave(groups: list[list[str]]) -> list[str]:
    """The texts of `groups` taken in turn, most central first, so that any first part of the list (a labeller
    reads the first few hundred) holds every group, not only the largest."""
    return [t for row in zip_longest(*groups) for t in row if t is not None]


def phase_categories(
    phase: str,
    drafts: list[Draft],
    labels: list[TypeLabel],
    names: list[str],
    labeller: Labeller,
    params: BuildParams,
) -> tuple[list[FailureCategory], list[str]]:
    """The phase's categories and each draft's category id ('' for a type that stands alone).

    A category exists only where it groups two or more types under a more general name: seed types sharing a
    seed `parent` form one (named by it); the other types are grouped by their centroids and named by
    `labeller`, and a group of one type, or one group holding every type of the phase, is no category."""
    member_lists: list[list[int]] = []
    seeded: dict[str, list[int]] = {}
    for i, d in enumerate(drafts):
        if d.seed_category is not None and d.seed_category.parent:
            seeded.setdefault(d.seed_category.parent, []).append(i)
    seed_groups = [(parent, m) for parent, m in seeded.items() if len(m) >= 2]
    rest = [i for i, d in enumerate(drafts) if d.origin != "seed"]
    if len(rest) >= 3:
        centroids = np.stack([drafts[i].centroid for i in rest])
        sizes = np.array([len(drafts[i].insight_ids) for i in rest], dtype=float)
        groups = group_centroids(centroids, sizes, max_categories=params.max_categories)
        if groups.max() > 0:
            member_lists = [[rest[j] for j in np.flatnonzero(groups == g)] for g in range(int(groups.max()) + 1)]
            member_lists = [m for m in member_lists if len(m) >= 2]
    texts = [t for m in member_lists for i in m for t in drafts[i].texts]
    text_groups = [g for g, m in enumerate(member_lists) for i in m for _ in drafts[i].texts]
    keywords = class_tfidf(texts, text_groups, top_n=6) if len(member_lists) > 1 else {0: []}
    evidence = [
        CategoryEvidence(
            key=f"{phase}/C{g + 1}",
            phase=phase,
            type_names=[names[i] for i in m],
            type_definitions=[labels[i].definition for i in m],
            keywords=[t for t, _ in keywords.get(g, [])] or drafts[m[0]].keywords,
            texts=[t for i in m for t in drafts[i].texts],
            # for contrast: the phase's other categories, and each type that stands alone as one of its own
            other_categories=[[names[i] for i in o] for h, o in enumerate(member_lists) if h != g]
            + [[names[i]] for i in range(len(drafts)) if not any(i in o for o in member_lists)],
            type_texts=[drafts[i].texts for i in m],
            contrast_texts=_interleave([drafts[i].texts for i in range(len(drafts)) if i not in m]),
        )
        for g, m in enumerate(member_lists)
    ]
    labelled = [labeller.label_category(ev) for ev in evidence]
    # a group the labeller cannot name more generally than its types is no category: its types stand alone
    kept = [g for g, lab in enumerate(labelled) if lab is not None]
    evidence = [evidence[g] for g in kept]
    member_lists = [member_lists[g] for g in kept]
    named = [lab for lab in labelled if lab is not None]
    member_names = [{names[i].lower() for i in m} for m in member_lists]
    plain = [
        lab.name if lab.name.lower() not in taken else f"{lab.name} and related failures"
        for lab, taken in zip(named, member_names, strict=True)
    ]
    unique = unique_names(plain, [ev.keywords for ev in evidence])
    keys = [f"{phase}/C{k + 1}" for k in range(len(evidence))]  # numbered again once unnamed groups are gone
    out = [
        FailureCategory(
            id=key,
            phase=phase,
            name=name,
            definition=lab.definition,
            keywords=ev.keywords,
            naming_method=lab.naming_method,
            prompt=lab.prompt,
            raw_reply=lab.raw_reply,
        )
        for key, ev, lab, name in zip(keys, evidence, named, unique, strict=True)
    ]
    category_of = {i: key for key, m in zip(keys, member_lists, strict=True) for i in m}
    for parent, m in seed_groups:
        key = f"{phase}/C{len(out) + 1}"
        out.append(
            FailureCategory(
                id=key,
                phase=phase,
                name=parent,
                definition=f"Seed category grouping {len(m)} types: " + "; ".join(names[i] for i in m) + ".",
                keywords=[],
                naming_method="seed",
            )
        )
        category_of.update({i: key for i in m})
    return out, [category_of.get(i, "") for i in range(len(drafts))]


