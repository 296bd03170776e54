"""Typed records at the taxonomy's boundaries: build parameters, what a labeller sees and returns, and the
failure types and categories of a snapshot."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from failatlas.taxonomy.seeding import Seed

UNASSIGNED = "unassigned"
PHASE_ORDER = ("design", "implementation", "execution", "conclusion", "monitor", "cheating", "other")


def phase_rank(phase: str) -> int:
    """Position of a phase in the order a paper lists them; unknown phases come last, alphabetically."""
    return PHASE_ORDER.index(phase) if phase in PHASE_ORDER else len(PHASE_ORDER)


class BuildParams(BaseModel):
    """Everything that shapes a taxonomy snapshot; stored with it so the snapshot can be rebuilt."""

    model_config = ConfigDict(extra="forbid")

    clustering_ids: list[str] | None = None  # default: the newest clustering of each phase
    labeller: str = "offline"
    labeller_args: dict[str, Any] = Field(default_factory=dict)
    merge_threshold: float = Field(
        0.9, ge=0.0, le=1.0, description="centroid cosine above which types may merge"
    )
    merge_min_shared_keywords: int = Field(1, ge=0, description="top keywords two types must share to merge")
    max_categories: int = Field(5, ge=1, description="most categories per phase")
    assign_threshold: float = Field(0.45, ge=-1.0, le=1.0, description="least cosine to join a type")
    n_examples: int = Field(5, ge=1)
    n_keywords: int = Field(10, ge=1)
    seed: int = 0
    split_signatures: bool = Field(True, description="split a type whose insights name different exceptions")
    seed_taxonomy: Seed | None = Field(
        None, description="a published scheme to map insights onto first (`taxonomy build --seed FILE`)"
    )
    seed_null_quantile: float = Field(
        0.8, gt=0.0, lt=1.0,
        description="an insight joins a seed category when its cosine beats this share of mismatched pairs",
    )
    seed_refine: int = Field(10, ge=0, description="rounds of seeded k-means after the first assignment")
    examples: list[str] = Field(
        default_factory=list, description="files of labelled statements to learn the seed's categories from"
        " (`--examples`; any format `ingest file` reads; used to train, never stored as insights)")
    use_labels: bool = Field(True, description="learn from the labels a person gave (`failatlas label`)")
    label_threshold: float = Field(
        0.2, ge=0.0, le=1.0, description="least calibrated probability for an insight to join a learned category;"
        " below it, insights are clustered into new types")
    fit_definitions: bool = Field(
        False, description="choose each offline or seed definition's representative insights so that names"
        " reconstruct their types (opt-in: 10-20x a build's time, and the gain is measured in-sample only, see"
        " docs/quality.md; needs the embedding model; skipped, and noted, where it is not on this machine)",
    )


class Example(BaseModel):
    """An insight shown as evidence for a failure type: the link from every name back to the data."""

    insight_id: str
    text: str
    similarity: float


class TypeLabel(BaseModel):
    """What a labeller returns for one failure type."""

    name: str = Field(min_length=1)
    definition: str = Field(min_length=1)
    inclusion_criteria: list[str]
    examples: list[Example]
    naming_method: str
    prompt: list[dict[str, Any]] | None = None
    raw_reply: str | None = None
    # The definition before its representative insights, where the labeller composes it so (offline, seed): the
    # build may then choose other representatives (taxonomy/definitions.py). None: the definition stays whole.
    definition_head: str | None = None


@dataclass
class TypeEvidence:
    """What a labeller sees of one failure type: members ordered by closeness to the centroid."""

    key: str
    phase: str
    insight_ids: list[str]
    texts: list[str]
    similarities: np.ndarray
    keywords: list[str]
    neighbours: list[TypeEvidence] = field(default_factory=list)

    @property
    def size(self) -> int:
        return len(self.insight_ids)


@dataclass
class CategoryEvidence:
    """What a labeller sees of one category: its failure types (already named) and the phase's other
    categories, for contrast."""

    key: str
    phase: str
    type_names: list[str]
    type_definitions: list[str]
    keywords: list[str]
    texts: list[str]  # member insights, the most central of each type first
    other_categories: list[list[str]]  # type names of the phase's other categories
    type_texts: list[list[str]] = field(default_factory=list)  # each type's insights, most central first
    contrast_texts: list[str] = field(default_factory=list)  # insights of the phase's other types


class CategoryLabel(BaseModel):
    """What a labeller returns for one category."""

    name: str = Field(min_length=1)
    definition: str = Field(min_length=1)
    naming_method: str
    prompt: list[dict[str, Any]] | None = None
    raw_reply: str | None = None


class FailureCategory(BaseModel):
    id: str
    phase: str
    name: str
    definition: str
    keywords: list[str]
    naming_method: str = "offline"
    prompt: list[dict[str, Any]] | None = None
    raw_reply: str | None = None


class FailureType(BaseModel):
    id: str
    phase: str
    category_id: str
    name: str
    definition: str
    inclusion_criteria: list[str]
    examples: list[Example]
    keywords: list[str]
    centroid: list[float]
    n_insights: int
    merged_from: list[str]
    naming_method: str
    prompt: list[dict[str, Any]] | None = None
    raw_reply: str | None = None
    origin: str = "cluster"  # cluster | seed (a seed taxonomy's category) | new (not explained by the seed)


class SeedReport(BaseModel):
    """How much of a phase a seed taxonomy explains, and the threshold calibrated for it."""

    phase: str
    n_insights: int
    n_explained: int
    threshold: float
    null_quantile: float
    method: str = "prototype"  # prototype (cosine to the seed's texts) | learned (a classifier on labelled rows)
    n_training_rows: int = 0  # learned: labelled statements the classifier learned from

    @property
    def coverage(self) -> float:
        return self.n_explained / self.n_insights if self.n_insights else 0.0


class LabelEffect(BaseModel):
    """What the stored labels of one category did in a build, in one phase and kind: how many insights the learned
    category took there, or why they taught nothing."""

    label: str
    phase: str
    kind: str
    n_labelled: int  # labelled statements of this phase and kind with this label
    moved: int = 0  # insights the label's learned category took (the labelled ones included)
    spread_to: list[str] = Field(default_factory=list)  # ids of the insights it took that no label was given on
    margin: float | None = None  # the calibrated margin they had to clear (taxonomy/margin.py); None: no margin
    not_used: str | None = None

    def describe(self) -> str:
        where = f"label '{self.label}' ({self.phase}/{self.kind})"
        if self.not_used:
            return f"{where}: not used: {self.not_used}"
        spread = ""
        if self.margin is not None:
            spread = (f"; spread to {len(self.spread_to)} unlabelled insight(s) nearer its examples than to any"
                      f" other category by at least {self.margin:.3f}")
            if self.spread_to:
                spread += ": " + ", ".join(self.spread_to[:5]) + (" ..." if len(self.spread_to) > 5 else "")
        return f"{where}: moved {self.moved} insight(s) into its category ({self.n_labelled} labelled){spread}"


class Taxonomy(BaseModel):
    """One versioned snapshot: its failure types grouped into categories, per phase."""

    id: str
    version: int
    clustering_ids: list[str]
    embed_model: str
    normalisation: str = "none"
    embedding_set_id: str | None = None  # embedding_sets.id of the centroids' vectors
    params: BuildParams
    code_version: str
    categories: list[FailureCategory]
    types: list[FailureType]
    n_assigned: int = 0
    n_unassigned: int = 0
    seed_reports: list[SeedReport] = Field(default_factory=list)  # when built with a seed taxonomy
    labelled_by: dict[str, str] = Field(default_factory=dict)  # the LLM labeller's model and endpoint host ({} offline)
    edit_notes: list[str] = Field(default_factory=list)  # what each saved edit did in this build (when just built)
    label_effects: list[LabelEffect] = Field(default_factory=list)  # what each label did (when just built)
    stage_run_id: str | None = None  # the stage_runs row of the build (when just built)
