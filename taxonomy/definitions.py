"""Definitions that reconstruct their types. A type's name is judged by name fidelity (`taxonomy show --quality`):
each insight goes to the type whose "name: definition" vector is nearest, and the share landing in its own type
is the score. Offline and seed definitions are a sentence plus representative insights; which insights, and how
many, decides where the definition's vector lies. So each such type gets a few candidate definitions (members
ordered by closeness to their own centroid, or by how much closer they are to it than to the nearest other
type's; 3 to 12 of them, shortened so that the text fits a sentence model's 256-token window), and a coordinate
ascent keeps, per type, the candidate under which the most insights of the phase land in their own type. It
starts from the labeller's own definition and accepts only improvements, so fitting never lowers the score on
the taxonomy's own insights. The candidate set is fixed here, not searched on any data set.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from failatlas.taxonomy.model import CategoryEvidence, FailureType

# (order, how many representatives, characters each): the candidates every fitted type gets
CANDIDATES: tuple[tuple[str, int, int], ...] = tuple(
    (order, n, limit)
    for order in ("central", "distinctive")
    for n, limit in ((3, 200), (5, 140), (6, 120), (8, 100), (10, 80), (12, 70))
)


def shorten(text: str, limit: int = 180) -> str:
    """`text` on one line, cut at a word boundary to at most `limit` characters (then ' ...')."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return cut.rstrip(",;:.") + " ..."


def with_examples(head: str, texts: Sequence[str], n: int = 5, limit: int = 140) -> str:
    """A definition: `head`, then the first `n` of `texts` quoted, each shortened to `limit` characters (texts
    that read the same once shortened are quoted once)."""
    shown: list[str] = []
    for t in texts:
        short = shorten(t, limit)
        if short not in shown:
            shown.append(short)
        if len(shown) == n:
            break
    quoted = "; ".join(f'"{t}"' for t in shown)
    return f"{head}, e.g. {quoted}." if quoted else f"{head}."


def name_text(name: str, definition: str) -> str:
    """What a type's name is judged by: its name and definition, as one text."""
    return f"{name}: {definition}"


@dataclass
class DefinitionSlot:
    """One type of a phase as the fitting sees it: `head` is None where the definition is fixed (written whole,
    e.g. by an LLM); `texts` and `vectors` are its members, most central first."""

    name: str
    definition: str
    head: str | None
    texts: list[str]
    vectors: np.ndarray


def fit_definitions(
    slots: Sequence[DefinitionSlot],
    vectors: np.ndarray,
    assigned: np.ndarray,
    encode: Callable[[list[str]], np.ndarray],
    *,
    passes: int = 3,
) -> tuple[list[str], float, float]:
    """Per slot, the candidate definition (see the module docstring) that makes the most of `vectors` (the
    phase's assigned insights, unit length) land in their own slot (`assigned`: slot index per row, -1 none);
    returns (definitions, fidelity before, fidelity after), fidelity measured as `name_fidelity` does."""
    k = len(slots)
    keep = assigned >= 0
    x, a = vectors[keep], assigned[keep]
    if k < 2 or len(a) == 0:
        return [s.definition for s in slots], float("nan"), float("nan")
    options = [_candidates(s, j, slots) for j, s in enumerate(slots)]
    flat = [name_text(s.name, d) for s, opts in zip(slots, options, strict=True) for d in opts]
    encoded = _unit(np.asarray(encode(flat), dtype=np.float32))
    sims, start = [], 0
    for opts in options:
        sims.append(x @ encoded[start:start + len(opts)].T)  # rows x candidates
        start += len(opts)
    choice = np.zeros(k, dtype=int)  # candidate 0: the labeller's own definition
    current = np.stack([s[:, 0] for s in sims], axis=1)
    before = _hits(current, a) / len(a)
    rows = np.arange(len(a))
    for _ in range(passes):
        changed = False
        for g in range(k):
            if len(options[g]) < 2:
                continue
            others = current.copy()
            others[:, g] = -np.inf
            best_other = others.max(axis=1)
            own = others[rows, a]
            own_is_best = own >= best_other  # among the other slots' definitions
            mine = a == g
            cand = sims[g]
            # hits under each candidate: own rows beat every other slot; the others' rows keep beating slot g
            score = ((cand > best_other[:, None]) & mine[:, None]).sum(0) + (
                (own_is_best & ~mine)[:, None] & (own[:, None] > cand)
            ).sum(0)
            j = int(np.argmax(score))
            if j == choice[g] or score[j] <= score[choice[g]]:
                continue
            trial = current.copy()
            trial[:, g] = cand[:, j]
            if _hits(trial, a) > _hits(current, a):  # exact, ties broken as `name_fidelity` breaks them
                choice[g], current, changed = j, trial, True
        if not changed:
            break
    after = _hits(current, a) / len(a)
    return [opts[c] for opts, c in zip(options, choice, strict=True)], float(before), float(after)


def _candidates(slot: DefinitionSlot, index: int, slots: Sequence[DefinitionSlot]) -> list[str]:
    """The slot's own definition first, then the distinct candidates of CANDIDATES (none for a fixed one)."""
    out = [slot.definition]
    if slot.head is None or not slot.texts:
        return out
    own_centroid = _unit(slot.vectors.mean(0, keepdims=True))[0]
    others = [_unit(s.vectors.mean(0, keepdims=True))[0] for j, s in enumerate(slots) if j != index and len(s.vectors)]
    own = slot.vectors @ own_centroid
    margin = own - (slot.vectors @ np.stack(others).T).max(axis=1) if others else own
    orders = {
        "central": np.argsort(-own, kind="stable"),
        "distinctive": np.argsort(-margin, kind="stable"),
    }
    for order, n, limit in CANDIDATES:
        text = with_examples(slot.head, [slot.texts[i] for i in orders[order]], n, limit)
        if text not in out:
            out.append(text)
    return out


def _hits(sims: np.ndarray, assigned: np.ndarray) -> int:
    return int((sims.argmax(axis=1) == assigned).sum())


def _unit(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return (m / np.where(norms == 0, 1.0, norms)).astype(np.float32)


def fit_type_definitions(
    types: Sequence[FailureType],
    heads: dict[str, str | None],
    members: dict[str, tuple[list[str], list[str]]],
    records: Sequence[tuple[str, str, float | None, str]],
    vector_of: Callable[[list[str]], np.ndarray],
    encode: Callable[[list[str]], np.ndarray],
) -> tuple[list[FailureType], dict[str, dict[str, float]]]:
    """`types` with fitted definitions (`fit_definitions` per phase, over the insights `records` assign to each
    type), and per phase the name fidelity before and after. `heads` (None: keep the definition) and `members`
    (the insight ids and texts a type's representatives come from, most central first) are keyed by type id;
    `vector_of` gives the unit vectors of insight ids."""
    out: dict[str, str] = {}
    report: dict[str, dict[str, float]] = {}
    for phase in dict.fromkeys(t.phase for t in types):
        mine = [t for t in types if t.phase == phase]
        index = {t.id: j for j, t in enumerate(mine)}
        assigned = [(iid, index[tid]) for tid, iid, _, _ in records if tid in index]
        if len(mine) < 2 or not assigned:
            continue
        slots = []
        for t in mine:
            ids, texts = members.get(t.id, ([], []))
            slots.append(DefinitionSlot(name=t.name, definition=t.definition, head=heads.get(t.id) if ids else None,
                                        texts=texts, vectors=vector_of(ids) if ids else np.zeros((0, 0))))
        definitions, before, after = fit_definitions(
            slots, vector_of([iid for iid, _ in assigned]), np.array([j for _, j in assigned]), encode
        )
        out.update({t.id: d for t, d in zip(mine, definitions, strict=True)})
        report[phase] = {"before": round(before, 4), "after": round(after, 4)}
    return [t.model_copy(update={"definition": out.get(t.id, t.definition)}) for t in types], report


def category_definition(evidence: CategoryEvidence) -> str:
    """An offline category's definition: its member types by name (a type without a name as what it is, never
    its placeholder name)."""
    names = [n for n in evidence.type_names if not n.startswith("Unnamed type ")]
    unnamed = len(evidence.type_names) - len(names)
    if unnamed:
        names.append(f"{unnamed} type(s) whose statements share no common phrase")
    return f"{len(evidence.type_names)} failure type(s): " + "; ".join(names) + "."
