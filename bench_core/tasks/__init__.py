"""Task specs for every benchmark, their importers and the catalog in the store."""

from bench_core.tasks.model import (
    AgentView,
    Benchmark,
    DesignSpec,
    ExpectedMetric,
    FunctionRef,
    ImplementationTruth,
    Masking,
    PaperMeta,
    RepoRef,
    Resources,
    RunSpec,
    SuccessCriterion,
    TaskKind,
    TaskSpec,
    stable_id,
)

__all__ = [
    "AgentView",
    "Benchmark",
    "DesignSpec",
    "ExpectedMetric",
    "FunctionRef",
    "ImplementationTruth",
    "Masking",
    "PaperMeta",
    "RepoRef",
    "Resources",
    "RunSpec",
    "SuccessCriterion",
    "TaskKind",
    "TaskSpec",
    "stable_id",
]
