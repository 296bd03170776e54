"""Data inputs (`SandboxSpec.data`): mounted read-only at /data/NAME by Docker and bwrap, named by
$FAILATLAS_DATA_NAME in every kind (the local sandbox points it at the host path)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from failatlas.bench_core.sandbox import SandboxSpec, create_sandbox

READ_AND_WRITE = ('cat "$FAILATLAS_DATA_ml/rows.csv"; cat /data/ml/rows.csv; '
                  "echo y >> /data/ml/rows.csv; echo append=$?; touch /data/ml/new; echo touch=$?")


@pytest.fixture
def data() -> Iterator[Path]:
    top = Path(tempfile.mkdtemp(prefix="failatlas-data-test-", dir="/tmp"))  # reachable by bwrap's own uid
    top.chmod(0o755)
    folder = top / "ml"
    folder.mkdir()
    (folder / "rows.csv").write_text("x\n1\n")
    folder.chmod(0o777)  # writable by anyone on the host: only the read-only mount may stop the agent
    (folder / "rows.csv").chmod(0o666)
    yield folder
    shutil.rmtree(top)


def _assert_read_only(out: str, data: Path) -> None:
    assert out.startswith("x\n1\nx\n1\n"), out
    assert "append=0" not in out and "touch=0" not in out, out
    assert (data / "rows.csv").read_text() == "x\n1\n" and not (data / "new").exists()


@pytest.mark.docker
def test_docker_mounts_data_read_only(sandbox_image: str, run_id: str, data: Path, repo: Path) -> None:
    spec = SandboxSpec(image=sandbox_image, run_id=run_id, data={"ml": str(data)})
    with create_sandbox("docker", spec, workspace=repo) as box:
        res = box.exec(READ_AND_WRITE, timeout=30)
        assert box.exec("echo $FAILATLAS_DATA_ml", timeout=20).stdout == "/data/ml\n"
        assert box.exec("ls /workspace", timeout=20).stdout.split() == sorted(p.name for p in repo.iterdir())
    _assert_read_only(res.stdout, data)


@pytest.mark.docker
def test_a_copy_of_the_spec_keeps_the_data_when_its_read_only_inputs_are_replaced(sandbox_image: str, run_id: str,
                                                                                   data: Path, tmp_path: Path) -> None:
    """What a judge's sandbox starter does (`read_only_inputs` of its own): the data stays mounted."""
    other = tmp_path / "tests"
    other.mkdir()
    (other / "t.txt").write_text("t\n")
    spec = SandboxSpec(image=sandbox_image, run_id=run_id, data={"ml": str(data)}, read_only_inputs={})
    judge = spec.model_copy(update={"read_only_inputs": {str(other): "/judge"}})
    with create_sandbox("docker", judge) as box:
        assert box.exec("cat /data/ml/rows.csv /judge/t.txt", timeout=20).stdout == "x\n1\nt\n"


def test_bwrap_binds_data_read_only(bwrap_works, data: Path, repo: Path) -> None:
    with create_sandbox("bwrap", SandboxSpec(data={"ml": str(data)}), workspace=repo) as box:
        res = box.exec(READ_AND_WRITE, timeout=30)
        assert box.exec("echo $FAILATLAS_DATA_ml", timeout=20).stdout == "/data/ml\n"
    _assert_read_only(res.stdout, data)


def test_local_names_the_host_path_in_its_variable(data: Path) -> None:
    with create_sandbox("local", SandboxSpec(data={"ml": str(data)})) as box:
        res = box.exec('cat "$FAILATLAS_DATA_ml/rows.csv"; echo "$FAILATLAS_DATA_ml"', timeout=30)
    assert res.stdout == f"x\n1\n{data.resolve()}\n"


@pytest.mark.parametrize("data", [{"1ml": "/srv"}, {"ml-1m": "/srv"}, {"ml": "relative/path"}])
def test_the_spec_refuses_bad_names_and_relative_paths(data: dict[str, str]) -> None:
    with pytest.raises(ValidationError):
        SandboxSpec(data=data)
