"""Orphaned containers (owner process dead) are found by label and removed; live ones are kept."""

from __future__ import annotations

import subprocess
import sys

import docker
import pytest

from failatlas.bench_core.sandbox import SandboxSpec, cleanup_orphans, create_sandbox, list_sandboxes
from failatlas.bench_core.sandbox.cleanup import LABEL_RUN

pytestmark = pytest.mark.docker

_ORPHAN = """
import os, sys
from failatlas.bench_core.sandbox import SandboxSpec, create_sandbox
box = create_sandbox("docker", SandboxSpec(image=sys.argv[1], run_id=sys.argv[2]))
print(box.container.id, flush=True)
os._exit(0)  # dies without closing: the container is an orphan
"""


def test_cleanup_removes_orphans_only(sandbox_image: str, run_id: str) -> None:
    client = docker.from_env()
    orphan_id = subprocess.run([sys.executable, "-c", _ORPHAN, sandbox_image, run_id], check=True,
                               capture_output=True, text=True, timeout=120).stdout.strip()
    live = create_sandbox("docker", SandboxSpec(image=sandbox_image, run_id=run_id))
    try:
        rows = {r["name"]: r for r in list_sandboxes() if r["run_id"] == run_id}
        assert sorted(r["owner_alive"] for r in rows.values()) == ["false", "true"]
        orphan_name = client.containers.get(orphan_id).name
        assert cleanup_orphans(run_id=run_id) == [orphan_name]
        with pytest.raises(docker.errors.NotFound):
            client.containers.get(orphan_id)
        assert client.containers.get(live.container.id).status == "running"
        assert cleanup_orphans(run_id=run_id, include_live=True) == [live.container.name]
        assert not client.containers.list(all=True, filters={"label": f"{LABEL_RUN}={run_id}"})
    finally:
        live.close()
