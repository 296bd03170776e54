"""Seeded taxonomies: map insights onto a published scheme (per phase, categories with a one-line definition and
optional example insights), and leave the rest to clustering as new types.

A seed file is YAML or JSON:

    name: TRAIL error taxonomy
    source: Deshpande et al. 2025, TRAIL (arXiv 2505.08638)
    phases:
      "*":                        # any phase; or design / implementation / execution / conclusion / ...
        - name: Formatting Errors
          parent: Output Generation          # optional: seed types sharing a parent form a category
          definition: The output or a tool call breaks the syntax or structure it was asked to follow.
          examples: ["The agent called a tool with arguments its signature does not declare."]

An insight joins the seed category whose prototype (the mean of the unit vectors of its name, definition and
examples) is nearest, when that cosine clears a threshold calibrated on the data itself: the `null_quantile`
quantile of the cosines between insights and the seed categories that are *not* their nearest. So an insight is
explained by the seed only when its match is closer than (1 - q) of the mismatched pairs of this very corpus,
whatever the embedding model's cosine scale; no number is fitted on one data set.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from failatlas.core.errors import InputError

ANY_PHASE = "*"
SEED_DIR = Path(__file__).resolve().parent / "seeds"


class SeedCategory(BaseModel):
    """One category of a published scheme."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    definition: str = Field(min_length=1, max_length=2000)
    parent: str | None = Field(None, max_length=200)
    examples: list[str] = Field(default_factory=list, max_length=50)

    @field_validator("examples")
    @classmethod
    def _examples_are_text(cls, v: list[str]) -> list[str]:
        if any(not e.strip() or len(e) > 2000 for e in v):
            raise ValueError("an example must be non-empty text of at most 2000 characters")
        return v


class Seed(BaseModel):
    """A seed taxonomy: categories per phase (`*` for any phase)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    source: str = ""
    phases: dict[str, list[SeedCategory]] = Field(min_length=1)

    @field_validator("phases")
    @classmethod
    def _distinct_names(cls, v: dict[str, list[SeedCategory]]) -> dict[str, list[SeedCategory]]:
        for phase, cats in v.items():
            if not cats:
                raise ValueError(f"phase '{phase}' lists no category")
            names = [c.name.lower() for c in cats]
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                raise ValueError(f"phase '{phase}' names a category twice: {dup[0]}")
        return v

    def categories_for(self, phase: str) -> list[SeedCategory]:
        """The categories a phase's insights may join: the phase's own, else those for any phase."""
        return self.phases.get(phase) or self.phases.get(ANY_PHASE) or []


def builtin_seeds() -> list[str]:
    """Names of the seeds shipped with FailAtlas (`--seed trail`, `--seed expbench`)."""
    return sorted(p.stem for p in SEED_DIR.glob("*.yaml"))


def load_seed(path: str | Path) -> Seed:
    """A seed from a YAML or JSON file, or a shipped seed by name (see `builtin_seeds`). Raises InputError naming
    the file and the field at fault, NotFoundError-like InputError when the file does not exist."""
    p = Path(path)
    if not p.exists() and str(path) in builtin_seeds():
        p = SEED_DIR / f"{path}.yaml"
    if not p.is_file():
        raise InputError(f"seed file {path} does not exist",
                         hint=f"pass a YAML/JSON file or one of the shipped seeds: {', '.join(builtin_seeds())}")
    if p.stat().st_size > 2_000_000:
        raise InputError(f"seed file {p} is larger than 2 MB")
    text = p.read_text(encoding="utf-8", errors="strict")
    import yaml

    try:
        raw = json.loads(text) if p.suffix.lower() == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:  # both name the line and column
        kind = "JSON" if p.suffix.lower() == ".json" else "YAML"
        raise InputError(f"seed file {p} is not valid {kind}: {exc}") from exc
    if not isinstance(raw, dict):
        raise InputError(f"seed file {p}: the top level must be a mapping with 'name' and 'phases'")
    try:
        return Seed.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise InputError(f"seed file {p}, field '{where}': {err['msg']}") from exc


def prototype_texts(category: SeedCategory) -> list[str]:
    """The texts whose vectors make a seed category's prototype: its name, definition and examples."""
    return [category.name, f"{category.name}: {category.definition}", *category.examples]


def prototypes(categories: Sequence[SeedCategory], encode: Callable[[list[str]], np.ndarray]) -> np.ndarray:
    """One unit-length prototype per category: the mean of the unit vectors of the name, the definition and the
    mean of the examples (each part weighs the same, however many examples there are)."""
    out = []
    for c in categories:
        vecs = _unit(np.asarray(encode(prototype_texts(c)), dtype=np.float32))
        parts = [vecs[0], vecs[1]] + ([_unit(vecs[2:].mean(axis=0, keepdims=True))[0]] if len(vecs) > 2 else [])
        out.append(np.mean(parts, axis=0))
    return _unit(np.stack(out)) if out else np.zeros((0, 0), dtype=np.float32)


def calibrate_threshold(sims: np.ndarray, null_quantile: float) -> float:
    """The least cosine for an insight to join its nearest seed category: the `null_quantile` quantile of the
    cosines of insights to the categories that are not their nearest (the corpus' own scale of a mismatch).
    With one category there is no mismatch to measure: -1 (everything is explained)."""
    n, k = sims.shape
    if k < 2 or n == 0:
        return -1.0
    best = sims.argmax(axis=1)
    mask = np.ones_like(sims, dtype=bool)
    mask[np.arange(n), best] = False
    return float(np.quantile(sims[mask], null_quantile))


def assign_to_seed(
    vectors: np.ndarray, protos: np.ndarray, threshold: float, *, refine: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """(index of the nearest prototype or -1 below `threshold`, that cosine) per unit-length vector.

    With `refine` > 0, that many rounds of seeded k-means follow: each category's centre becomes the unit mean of
    its prototype and its members (the prototype weighs as much as the members together, so a category keeps
    its meaning), and the insights explained by the seed are reassigned to the nearest centre."""
    if len(protos) == 0 or len(vectors) == 0:
        return np.full(len(vectors), -1), np.full(len(vectors), np.nan)
    centres = protos
    sims = vectors @ centres.T
    labels = sims.argmax(axis=1)
    score = sims[np.arange(len(vectors)), labels]
    covered = score >= threshold
    for _ in range(refine):
        new = []
        for c in range(len(protos)):
            members = vectors[covered & (labels == c)]
            new.append(protos[c] if len(members) == 0 else protos[c] + _unit(members.mean(0, keepdims=True))[0])
        centres = _unit(np.stack(new))
        relabel = (vectors @ centres.T).argmax(axis=1)
        if np.array_equal(relabel[covered], labels[covered]):
            break
        labels = np.where(covered, relabel, labels)
    final = vectors @ protos.T
    score = final[np.arange(len(vectors)), labels]
    return np.where(covered, labels, -1), score.astype(float)


def _unit(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return (m / np.where(norms == 0, 1.0, norms)).astype(np.float32)
