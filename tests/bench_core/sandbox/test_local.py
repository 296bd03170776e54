"""The local backend: real subprocesses on this host."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from failatlas.bench_core.sandbox import (
    SandboxError,
    SandboxFileNotFoundError,
    SandboxSpec,
    cleanup_local_orphans,
    create_sandbox,
)
from failatlas.bench_core.sandbox.procs import is_alive
from failatlas.core.errors import InputError


@pytest.fixture
def box(repo: Path):
    with create_sandbox("local", SandboxSpec(memory_mb=512), workspace=repo) as b:
        yield b


def test_exec_runs_in_a_private_copy(box, repo: Path) -> None:
    r = box.exec("python3 src/train.py; echo err >&2; exit 4", timeout=20)
    assert (r.returncode, r.stdout, r.stderr) == (4, "training\n", "err\n")
    assert box.exec("echo changed > README.md", timeout=10).returncode == 0
    assert (repo / "README.md").read_text() == "# toy\n"
    assert Path(box.workdir) != repo and Path(box.workdir).is_relative_to(box.root)


def test_environment_is_scrubbed_and_gpus_hidden(box, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "secret-key")
    out = box.exec("env", timeout=10, env={"EXTRA": "1"}).stdout
    assert "secret-key" not in out and "EXTRA=1" in out
    assert "CUDA_VISIBLE_DEVICES=\n" in out


def test_deadline_kills_the_whole_process_group_and_grandchildren(box, tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    script = f"bash -c 'sleep 1000 & echo $! > {pidfile}; wait' & setsid sleep 1000 & sleep 1000"
    start = time.monotonic()
    r = box.exec(script, timeout=1.5)
    assert time.monotonic() - start < 1.5 + 2
    assert r.timed_out and r.killed_reason == "timeout" and r.returncode == 137
    grandchild = int(pidfile.read_text())
    time.sleep(0.2)
    assert not is_alive(grandchild)


def test_memory_rlimit_stops_a_hog(box) -> None:
    r = box.exec(["python3", "-c", "a = bytearray(2**31); print('survived')"], timeout=30)
    assert r.returncode != 0 and "survived" not in r.stdout
    assert r.killed_reason == "oom" and "MemoryError" in r.stderr


def test_output_cap(box) -> None:
    r = box.exec(["python3", "-c", "import sys; sys.stdout.write('y' * 100_000_000)"], timeout=60,
                 output_limit=4096)
    assert r.returncode == 0 and r.truncated and len(r.stdout) < 4200
    assert r.stdout.startswith("y" * 100) and r.stdout.endswith("y" * 100)


def test_files_stay_inside_the_sandbox(box, tmp_path: Path) -> None:
    box.write_file("out/result.json", '{"acc": 1}')
    assert box.read_file("out/result.json") == b'{"acc": 1}'
    assert box.read_file("/workspace/out/result.json") == b'{"acc": 1}'
    box.copy_out("out", tmp_path / "out")
    assert (tmp_path / "out" / "result.json").exists()
    (tmp_path / "in.txt").write_text("in")
    box.copy_in(tmp_path / "in.txt", "data/in.txt")
    assert box.exec("cat data/in.txt", timeout=10).stdout == "in"
    with pytest.raises(SandboxFileNotFoundError):
        box.read_file("nope")
    with pytest.raises(InputError):
        box.read_file("../../../../etc/passwd")


def test_read_only_inputs_are_linked(tmp_path: Path) -> None:
    data = tmp_path / "d"
    data.mkdir()
    (data / "x.txt").write_text("x")
    with create_sandbox("local", SandboxSpec(read_only_inputs={str(data): "/data"})) as box:
        assert box.exec('cat "$FAILATLAS_SANDBOX_ROOT/data/x.txt"', timeout=10).stdout == "x"
        assert box.read_file("/data/x.txt") == b"x"


def test_close_removes_the_folder_and_is_idempotent(repo: Path) -> None:
    box = create_sandbox("local", SandboxSpec(), workspace=repo)
    root = box.root
    box.close()
    box.close()
    assert not root.exists()
    with pytest.raises(SandboxError):
        box.exec("true", timeout=1)


def test_process_count_sampler_stops_a_spawner(tmp_path: Path) -> None:
    with create_sandbox("local", SandboxSpec(pids_limit=10)) as box:
        r = box.exec("for i in $(seq 30); do sleep 60 & done; wait", timeout=30)
    assert r.killed_reason == "pids" and not r.timed_out and r.duration_s < 10


def test_rss_sampler_stops_a_hog_when_rlimit_is_off_for_gpus() -> None:
    hog = "import time; a = bytearray(600 * 2**20); time.sleep(30)"
    with create_sandbox("local", SandboxSpec(memory_mb=256, gpu_ids=["0"])) as box:
        assert "CUDA_VISIBLE_DEVICES=0\n" in box.exec("env", timeout=10).stdout
        r = box.exec(["python3", "-c", hog], timeout=30)
    assert r.killed_reason == "oom" and r.returncode == 137 and r.duration_s < 10


def test_orphaned_local_folders_are_removed(tmp_path: Path) -> None:
    code = ("import os; from bench_core.sandbox import SandboxSpec, create_sandbox; "
            "create_sandbox('local', SandboxSpec(run_id='orphan')); os._exit(0)")
    env = {**os.environ, "FAILATLAS_SANDBOX_TMP": str(tmp_path)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=60)
    (orphan,) = tmp_path.glob("failatlas-sbx-*")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FAILATLAS_SANDBOX_TMP", str(tmp_path))
        with create_sandbox("local", SandboxSpec(run_id="orphan")) as mine:
            assert cleanup_local_orphans(run_id="other") == []
            assert cleanup_local_orphans(run_id="orphan") == [str(orphan)]
            assert mine.root.exists() and not orphan.exists()
