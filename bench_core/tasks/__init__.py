"""Task specs for every benchmark, their importers and the catalog in the store.

The stage entry is `run(store, TaskImportParams) -> TaskImportResult` (`tasks.import`, one `stage_runs` row).
"""

from failatlas.bench_core.tasks.catalog import (
    FileReport,
    SaveReport,
    get_task,
    list_tasks,
    public_view,
    save_tasks,
)
from failatlas.bench_core.tasks.importers import TASK_IMPORTERS, discover
from failatlas.bench_core.tasks.model import (
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
from failatlas.bench_core.tasks.stage import TaskImportParams, TaskImportResult, run

__all__ = [
    "TASK_IMPORTERS",
    "AgentView",
    "Benchmark",
    "DesignSpec",
    "ExpectedMetric",
    "FileReport",
    "FunctionRef",
    "ImplementationTruth",
    "Masking",
    "PaperMeta",
    "RepoRef",
    "Resources",
    "RunSpec",
    "SaveReport",
    "SuccessCriterion",
    "TaskImportParams",
    "TaskImportResult",
    "TaskKind",
    "TaskSpec",
    "discover",
    "get_task",
    "list_tasks",
    "public_view",
    "run",
    "save_tasks",
    "stable_id",
]
