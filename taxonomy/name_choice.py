"""Names chosen so that a reader can tell a phase's types apart by them (issue 53): each type offers the names its own
statements give (`OfflineLabeller.candidates`, the labeller's own name first), and a type takes another of its names
only where more of the phase's most central statements then sit nearest, in the taxonomy's embedding model, to
their own type's name, and no type's count falls (coordinate ascent over the types until nothing changes: the
total only rises, so it ends). A reader matching statements to names does the same: a name picks out its type's
statements among the phase's other names, not only describes them (`name_fit.py` measures it).

Where no name a type's statements offer picks them out, most of them sit nearest one other type's name, and the
two are closer than any two types their names do tell apart, the two are one failure a reader cannot tell apart:
the type joins that one (`indistinct_joins`), and the phase is named again.

Labels are never read: only the statements, their vectors and the names. Types named by a seed or a learned
category, by their kind, or honestly unnamed keep their names and compete with theirs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

CENTRAL = 5


def _unit(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float64)
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


@dataclass
class NameChoice:
    """The outcome: per type the index of its chosen option, and its central statements' hits (nearest to their
    own type's name) with the first options and with the chosen ones."""

    chosen: list[int]
    hits_before: list[int]
    hits_after: list[int]
    rounds: int
    changed: list[int] = field(default_factory=list)


def choose_names(central: Sequence[np.ndarray], options: Sequence[Sequence[str]],
                 encode: Callable[[list[str]], np.ndarray], max_rounds: int = 20) -> NameChoice:
    """For a phase's types in order, `central[t]` the vectors of type t's most central statements (most central
    first; the first `CENTRAL` count) and `options[t]` its names, its current one first (one option: the name is
    fixed), the index of each type's chosen name. A type moves to the option that most raises the number of the
    phase's central statements nearest (cosine) to their own type's name among all types' chosen names, with no
    type's number lower; between equals, the one its own statements are nearer to than to the next name. A name
    another type holds (any case) is not taken."""
    flat = list(dict.fromkeys(n for opts in options for n in opts))
    column = {n: k for k, n in enumerate(flat)}
    vectors = _unit(encode(flat)) if flat else np.zeros((0, 1))
    sims = [_unit(np.asarray(c, dtype=np.float64)[:CENTRAL]) @ vectors.T if len(c) else np.zeros((0, len(flat)))
            for c in central]
    cols = [[column[n] for n in opts] for opts in options]

    def hits(choice: list[int]) -> np.ndarray:
        picked = [cols[t][c] for t, c in enumerate(choice)]
        return np.array([int((np.argmax(s[:, picked], axis=1) == t).sum()) if len(s) else 0
                         for t, s in enumerate(sims)])

    def margin(t: int, choice: list[int]) -> float:
        if not len(sims[t]) or len(choice) < 2:
            return 0.0
        picked = [cols[u][c] for u, c in enumerate(choice)]
        own = sims[t][:, picked[t]]
        other = np.delete(sims[t][:, picked], t, axis=1).max(axis=1)
        return float((own - other).mean())

    choice = [0] * len(options)
    current = hits(choice)
    first = current.copy()
    rounds = 0
    for rounds in range(1, max_rounds + 1):  # noqa: B007 (the count is reported)
        moved = False
        for t, opts in enumerate(options):
            taken = {options[u][c].lower() for u, c in enumerate(choice) if u != t}
            best: tuple[int, float] | None = None
            best_c = choice[t]
            for c in range(len(opts)):
                if c == choice[t] or opts[c].lower() in taken:
                    continue
                trial = [*choice[:t], c, *choice[t + 1:]]
                found = hits(trial)
                if (found < current).any() or found.sum() <= current.sum():
                    continue
                key = (int(found.sum()), margin(t, trial))
                if best is None or key > best:
                    best, best_c = key, c
            if best is not None:
                choice[t] = best_c
                current = hits(choice)
                moved = True
        if not moved:
            break
    return NameChoice(chosen=choice, hits_before=first.tolist(), hits_after=current.tolist(), rounds=rounds,
                      changed=[t for t, c in enumerate(choice) if c != 0])


def needed(n: int) -> int:
    """Of a type's `n` (at most CENTRAL) most central statements, how many make a name theirs: 4 of 5, all but one
    of 2-4, the one of 1 (`name_fit.py`'s rule)."""
    return 1 if n <= 1 else n - 1


def indistinct_joins(central: Sequence[np.ndarray], centroids: np.ndarray, names: Sequence[str],
                     free: Sequence[bool], encode: Callable[[list[str]], np.ndarray]) -> list[tuple[int, int, int]]:
    """Types that are no failure of their own by their statements' content, each with the type it is a variant
    of: `(t, u, k)` where free type t's central statements do not sit nearest its own name (fewer than `needed`),
    k >= `needed` of them sit nearest free type u's name, among the phase's `names` (cosine, the names as chosen),
    and t's centroid is nearer u's than the centroids of any two types whose names do tell their statements apart
    (both picked by `needed` of their own: two failures known to differ are that close, so a pair less close is
    not shown to be one; with fewer than two such types nothing joins). Most such statements first, then the
    smaller t; no type in two pairs of a round. A type is free where its name is its own (`free`: no seed's,
    kind's or placeholder); fixed names neither join nor take in, but tell apart."""
    if len(names) < 2 or sum(free) < 2:
        return []
    vectors = _unit(encode(list(names)))
    nearest = [np.argmax(_unit(np.asarray(c, dtype=np.float64)[:CENTRAL]) @ vectors.T, axis=1) if len(c) else
               np.zeros(0, dtype=int) for c in central]
    apart = [t for t, near in enumerate(nearest) if len(near) and int((near == t).sum()) >= needed(len(near))]
    if len(apart) < 2:
        return []
    cosines = _unit(np.asarray(centroids, dtype=np.float64))
    cosines = cosines @ cosines.T
    bar = max(cosines[a, b] for a in apart for b in apart if a < b)
    found: list[tuple[int, int, int]] = []
    for t, near in enumerate(nearest):
        if not free[t] or t in apart or not len(near):
            continue
        counts = np.bincount(near, minlength=len(names))
        u = int(np.argmax(counts))
        if u != t and free[u] and counts[u] >= needed(len(near)) and cosines[t, u] > bar:
            found.append((t, u, int(counts[u])))
    pairs: list[tuple[int, int, int]] = []
    busy: set[int] = set()
    for t, u, k in sorted(found, key=lambda j: (-j[2], len(central[j[0]]), j[0])):
        if t not in busy and u not in busy:
            pairs.append((t, u, k))
            busy |= {t, u}
    return pairs


def distinct_labels(drafts: Sequence, evidence: Sequence, labels: list, own_names: Sequence[str], labeller: object,
                    vector_of: Callable[[list[str]], np.ndarray],
                    encode: Callable[[list[str]], np.ndarray] | None) -> tuple[list, list[dict]]:
    """A phase's labels with names chosen by `choose_names`, and a note per renamed type. A type may take another
    name where its draft is no seed's, its label is still the labeller's own (`own_names`: not renamed by its kind
    or as a seed's variant) and not the honest "Unnamed type"; its options are the labeller's `candidates`, and it
    is labelled again with `label_as`. As they are where the labeller offers no candidates or `encode` is None."""
    from failatlas.taxonomy.labelling.readable import is_honest

    offer, relabel = getattr(labeller, "candidates", None), getattr(labeller, "label_as", None)
    if encode is None or offer is None or relabel is None or len(drafts) < 2:
        return labels, []
    options: list[list[str]] = []
    for d, ev, lab, own in zip(drafts, evidence, labels, own_names, strict=True):
        free = d.seed_category is None and lab.name == own and not is_honest(own)
        options.append([lab.name, *(c for c in offer(ev) if c.lower() != lab.name.lower())] if free else [lab.name])
    if all(len(o) < 2 for o in options):
        return labels, []
    result = choose_names([vector_of(d.insight_ids[:CENTRAL]) for d in drafts], options, encode)
    out = list(labels)
    for t in result.changed:
        out[t] = relabel(evidence[t], options[t][result.chosen[t]])
    notes = [{"type": ev.key, "labelled": options[t][0], "chosen": out[t].name, "of": len(options[t]),
              "central_nearest_own": [result.hits_before[t], result.hits_after[t]],
              "phase_central_nearest_own": [sum(result.hits_before), sum(result.hits_after)]}
             for t, ev in enumerate(evidence) if t in result.changed]
    return out, notes


class NameSpace:
    """The build's view for choosing names: the members' stored vectors by insight id (`of`) and the embedding
    set's model to encode names with (`encoder`: made on first use; None, with the reason kept for `note`, where
    the model is not on this machine or gives vectors of another size than the stored ones)."""

    def __init__(self, member_vectors: Sequence[tuple[list[str], np.ndarray]], embedding_set: object,
                 embedder: object) -> None:
        self.member_vectors = member_vectors
        self.embedding_set = embedding_set
        self.embedder = embedder
        self._row: dict[str, tuple[int, int]] | None = None
        self._encode: list[Callable[[list[str]], np.ndarray] | None] = []
        self.reason: str | None = None

    def of(self, ids: list[str]) -> np.ndarray:
        if self._row is None:
            self._row = {i: (b, r) for b, (block, _) in enumerate(self.member_vectors) for r, i in enumerate(block)}
        return np.stack([self.member_vectors[self._row[i][0]][1][self._row[i][1]] for i in ids])

    def encoder(self) -> Callable[[list[str]], np.ndarray] | None:
        if not self._encode:
            self._encode.append(self._make())
        return self._encode[0]

    def _make(self) -> Callable[[list[str]], np.ndarray] | None:
        from failatlas.core.errors import MissingDependencyError, NotFoundError
        from failatlas.taxonomy.encoders import prototype_encoder

        try:
            encode = prototype_encoder(self.embedding_set, self.embedder)  # type: ignore[arg-type]
            dims = np.asarray(encode(["name"])).shape[1]
        except (NotFoundError, MissingDependencyError) as exc:
            self.reason = str(exc)
            return None
        stored = self.member_vectors[0][1].shape[1] if self.member_vectors else dims
        if dims != stored:
            self.reason = f"the model gives {dims} dimensions, the embedding set {stored}"
            return None
        return encode

    def note(self, renamed: list[dict]) -> dict:
        """What the build records: the renamed types, or why names were not chosen."""
        return {"renamed": renamed} if self.reason is None else {"not_chosen_because": self.reason}


def join_indistinct(drafts: Sequence, names: Sequence[str], free: Sequence[bool], space: NameSpace,
                    n_keywords: int) -> tuple[list, list[dict]]:
    """A phase's drafts with this round's `indistinct_joins` done (each joined type's members added to the type it
    is a variant of, keywords of the joined types computed again against the phase's others) and a note per join;
    the drafts as they are and no note where none joins or the names cannot be encoded here."""
    from failatlas.taxonomy.drafts import joined_draft
    from failatlas.taxonomy.keywords import class_tfidf

    encode = space.encoder()
    if encode is None:
        return list(drafts), []
    pairs = indistinct_joins([space.of(d.insight_ids[:CENTRAL]) for d in drafts],
                             np.stack([d.centroid for d in drafts]), names, free, encode)
    if not pairs:
        return list(drafts), []
    into = {t: u for t, u, _ in pairs}
    texts = [x for d in drafts for x in d.texts]
    classes = [into.get(j, j) for j, d in enumerate(drafts) for _ in d.texts]
    keywords = class_tfidf(texts, classes, top_n=n_keywords)
    out = list(drafts)
    notes = []
    for t, u, k in pairs:
        keep, other = drafts[u], drafts[t]
        out[u] = joined_draft(keep, other, space.of([*keep.insight_ids, *other.insight_ids]),
                              [w for w, _ in keywords.get(u, [])])
        notes.append({"phase": keep.phase, "joined": names[t], "into": names[u], "n_insights": len(other.insight_ids),
                      "central_nearest_into": [k, min(CENTRAL, len(other.insight_ids))]})
    return [d for j, d in enumerate(out) if j not in into], notes
