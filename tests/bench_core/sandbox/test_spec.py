"""Sandbox specs: validation and sizing from a task's resources."""

from __future__ import annotations

import pytest

from failatlas.bench_core.sandbox import (
    DEFAULT_IMAGE,
    Sandbox,
    SandboxSpec,
    TracedSandbox,
    create_sandbox,
    spec_for_task,
)
from failatlas.bench_core.tasks.model import Resources, TaskKind, TaskSpec
from failatlas.core.errors import ConfigError


def _task(**resources) -> TaskSpec:
    return TaskSpec(id="mini/t1", benchmark="failatlas-mini", kind=TaskKind.T1, question="q",
                    resources=Resources(**resources))


def test_spec_follows_task_resources() -> None:
    spec = spec_for_task(_task(gpus=1, memory_gb=2.5, cpus=2, network=True), run_id="r1", gpu_ids=["3"])
    assert (spec.image, spec.memory_mb, spec.cpus, spec.network) == (DEFAULT_IMAGE, 2560, 2.0, "full")
    registries = spec_for_task(_task(network="registries", allow_hosts=["huggingface.co"]))
    assert (registries.network, registries.allow_hosts) == ("registries", ["huggingface.co"])
    assert spec.gpu_ids == ["3"] and spec.run_id == "r1" and spec.labels["failatlas.task_id"] == "mini/t1"
    assert spec_for_task(_task(image="custom:1"), pids_limit=99).pids_limit == 99
    with pytest.raises(ValueError, match="needs 1 GPU"):
        spec_for_task(_task(gpus=1))


def test_spec_validation() -> None:
    with pytest.raises(ValueError):
        SandboxSpec(workdir="relative")
    with pytest.raises(ValueError):
        SandboxSpec(read_only_inputs={"/host": "relative"})
    with pytest.raises(ValueError):
        SandboxSpec(unknown_field=1)


def test_unknown_backend_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="podman") as err:
        create_sandbox("podman", SandboxSpec())
    assert "docker, local" in err.value.hint


def test_backends_and_the_wrapper_satisfy_the_protocol() -> None:
    with create_sandbox("local", SandboxSpec()) as box:
        assert isinstance(box, Sandbox)
        assert isinstance(TracedSandbox(box, lambda e: None), Sandbox)
