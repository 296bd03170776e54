"""The sandbox a task asks for, from the task's declared resources."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from failatlas.bench_core.sandbox.model import SandboxSpec
from failatlas.bench_core.tasks.model import TaskSpec


def spec_for_task(
    task: TaskSpec,
    *,
    run_id: str | None = None,
    gpu_ids: Sequence[str] = (),
    read_only_inputs: Mapping[str, str] | None = None,
    **overrides: Any,
) -> SandboxSpec:
    """A `SandboxSpec` sized by `task.resources` (image, CPUs, memory, network) with leased `gpu_ids`.

    Only agent-visible inputs belong in `read_only_inputs`; ground truth must never be passed here.
    Raises ValueError when the leased GPUs do not match the task's GPU count.
    """
    res = task.resources
    if len(gpu_ids) != res.gpus:
        raise ValueError(f"task {task.id} needs {res.gpus} GPU(s) but {len(gpu_ids)} were leased")
    fields: dict[str, Any] = dict(
        cpus=res.cpus, memory_mb=int(res.memory_gb * 1024),
        network=res.network, allow_hosts=list(res.allow_hosts) if res.network == "registries" else [],
        gpu_ids=list(gpu_ids), read_only_inputs=dict(read_only_inputs or {}),
        run_id=run_id, labels={"failatlas.task_id": task.id},
    )
    if res.image:  # only an image the task names is set: bwrap runs on the host's root unless one is (bwrap_rootfs)
        fields["image"] = res.image
    fields.update(overrides)
    return SandboxSpec(**fields)
