"""Task validation (`failatlas tasks validate`): is each imported task sound? One status per task, decided by
preparing it and running `gold` and `null` through the ordinary run and score stages (tables in `schema.py`,
writes in `writes.py`, the decision rules in `classify.py`)."""

from failatlas.bench_core.task_validation.model import STATUSES, TaskVerdict, ValidateParams, ValidateResult
from failatlas.bench_core.task_validation.stage import run

__all__ = ["STATUSES", "TaskVerdict", "ValidateParams", "ValidateResult", "run"]
