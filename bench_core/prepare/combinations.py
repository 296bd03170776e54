"""AutoExperiment-style tasks: one task per n-combination of a task's maskable functions."""

from __future__ import annotations

from itertools import combinations

from failatlas.bench_core.tasks.model import TaskKind, TaskSpec
from failatlas.core.errors import InputError


def function_combinations(task: TaskSpec, n: int) -> list[TaskSpec]:
    """Every task masking n of `task.masking.maskable_functions`; ids are `<base>_<i>,<j>` (0-based indexes).

    Each copy keeps the base task's masked files and replaces its masked functions by the combination.
    Raises InputError when the task declares no maskable functions or n is outside 1..len(maskable_functions).
    """
    maskable = task.masking.maskable_functions
    if not maskable:
        raise InputError(f"task {task.id} declares no maskable functions", field="masking.maskable_functions")
    if not 1 <= n <= len(maskable):
        raise InputError(f"task {task.id}: n must be between 1 and {len(maskable)}, not {n}",
                         field="masking.maskable_functions")
    tasks = []
    for combo in combinations(range(len(maskable)), n):
        variant = task.model_copy(deep=True)
        variant.id = f"{task.id}_{','.join(str(i) for i in combo)}"
        variant.kind = TaskKind.MASKED_FUNCTIONS
        variant.masking.functions = [maskable[i].model_copy() for i in combo]
        variant.extra = {**variant.extra, "base_task_id": task.id, "masked_combination": list(combo)}
        tasks.append(TaskSpec.model_validate(variant.model_dump()))
    return tasks
