"""Orphaned containers (owner process dead) are found by label and removed; live ones are kept."""

from __future__ import annotations

import subprocess
import sys

import docker
import pytest

from failatlas.bench_core.sandbox import SandboxSpec, cleanup_orphans, create_sandbox, list_sandboxes
from failatlas.bench_core.sandbox.cleanup import LABEL_RUN

pytestmark = pytest.mark.docker

_OWNER = """
import sys
from failatlas.bench_core.sandbox import SandboxSpec, create_sandbox
box = create_sandbox("docker", SandboxSpec(image=sys.argv[1], run_id=sys.argv[2]))
print(box.container.id, flush=True)
sys.stdin.read()  # holds its container until it is killed, which leaves the container an orphan
"""


def test_cleanup_removes_orphans_only(sandbox_image: str, run_id: str) -> None:
    """The owner dies only right before the orphan is looked for: every `bench run` of another test worker reaps
    the machine's orphans when it starts, and an orphan made a second earlier was once gone before this listed it."""
    client = docker.from_env()
    owner = subprocess.Popen([sys.executable, "-c", _OWNER, sandbox_image, run_id], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    live = None
    try:
        orphan_id = owner.stdout.readline().strip()
        assert orphan_id, "the owner process made no sandbox"
        live = create_sandbox("docker", SandboxSpec(image=sandbox_image, run_id=run_id))
        rows = {r["name"]: r for r in list_sandboxes() if r["run_id"] == run_id}
        assert sorted(r["owner_alive"] for r in rows.values()) == ["true", "true"]
        owner.kill()  # dies without closing: its container is an orphan from now on
        owner.wait(timeout=60)
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
        owner.kill()
        owner.wait(timeout=60)
        if live is not None:
            live.close()
        cleanup_orphans(run_id=run_id, include_live=True)
