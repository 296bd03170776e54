"""Collecting an agent's outputs on the local backend (real files, a real DuckDB file): output files that are not
files make the run the agent's failure, never an infrastructure error; files the copy leaves out are recorded and
diffed as their masked version, never as deleted; a copy stopped by its limits is the agent's failure."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest

from failatlas.bench_core.runs.collect import collect_outputs
from failatlas.bench_core.runs.execute import RunConfig
from failatlas.bench_core.runs.runner import plan, run_batch
from failatlas.bench_core.sandbox import CopyLimits, SandboxSpec, create_sandbox
from failatlas.bench_core.suites import load_suite
from failatlas.bench_core.tasks import save_tasks

COMMANDS = {
    "folder": "mkdir -p .failatlas/conclusion.md",
    "fifo": "mkfifo .failatlas/conclusion.md",
    "loop": "ln -s conclusion.md .failatlas/conclusion.md",
    "design-link": "ln -s ../README.md .failatlas/design.json && echo fine > .failatlas/conclusion.md",
}


def test_outputs_that_are_not_files_are_the_agents_failure_locally(store, tmp_path: Path) -> None:
    [task] = [t for t in load_suite("failatlas-mini") if t.id == "mini-ridge-cv"]
    save_tasks(store, [task], source="failatlas-mini")
    work = []
    for command in COMMANDS.values():
        work += plan(store, [task], "command", agent_params={"command": command}).todo
    done = threading.Thread(target=run_batch, args=(store, work, RunConfig(runs_dir=tmp_path / "runs",
                                                                           sandbox="local")), daemon=True)
    done.start()
    done.join(120)
    assert not done.is_alive(), "collecting the outputs blocked (a FIFO opened for reading?)"
    rows = {r["agent_params"]: r for r in store.query_dicts("SELECT * FROM runs")}
    got = {name: rows[json.dumps({"command": c}, sort_keys=True)] for name, c in COMMANDS.items()}
    assert {n: r["status"] for n, r in got.items()} == dict.fromkeys(COMMANDS, "agent_error"), \
        {n: r["infra_error"] for n, r in got.items()}
    errors = {n: json.loads(r["outputs"])["agent_error"] for n, r in got.items()}
    assert "is a folder, not a file" in errors["folder"] and "is a FIFO" in errors["fifo"]
    assert "is a symlink" in errors["loop"] and "design.json in the sandbox is a symlink" in errors["design-link"]
    assert json.loads(got["design-link"]["outputs"])["conclusion"] == "fine\n"
    assert all(plan(store, [task], "command", agent_params={"command": c}, retry_infra=True).todo == []
               for c in COMMANDS.values())


@pytest.fixture
def masked(tmp_path: Path) -> Path:
    root = tmp_path / "masked"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "model.py").write_text("def fit():\n    raise NotImplementedError\n")
    (root / "data.csv").write_text("x,y\n1,2\n")
    for i in range(6):
        (root / f"f{i}.txt").write_text(f"{i}\n" * 20_000)
    return root


def _collect(masked: Path, tmp_path: Path, command: str, limits: CopyLimits):
    with create_sandbox("local", SandboxSpec(), workspace=masked) as box:
        result = box.exec(command, timeout=60)
        assert result.returncode == 0, result.stderr
        return collect_outputs(box, box.workdir, masked, tmp_path / "scratch", file_limit=1000, copy_limits=limits)


def test_a_repository_file_left_out_is_diffed_as_its_masked_version(masked: Path, tmp_path: Path) -> None:
    command = ("printf 'def fit():\\n    return 1\\n' > pkg/model.py && truncate -s 1G data.csv"
               " && mkdir -p .failatlas && head -c 5000 /dev/zero > .failatlas/conclusion.md")
    outputs = _collect(masked, tmp_path, command, CopyLimits(max_file_bytes=1_000_000))
    assert outputs.changed_files == ["pkg/model.py"] and outputs.errors == []
    cut = "\n".join(outputs.cut)
    assert "working copy: data.csv (1073741824 bytes): over the per-file cap of 1000000 bytes" in cut
    assert "masked version of 1 file(s) left out is diffed instead: data.csv" in cut
    assert ".failatlas/conclusion.md: larger than its 1000-byte cap; the first 1000 bytes kept" in cut
    assert len(outputs.conclusion) == 1000


def test_a_copy_stopped_by_its_limits_is_the_agents_failure_and_shows_no_false_deletion(masked: Path,
                                                                                        tmp_path: Path) -> None:
    outputs = _collect(masked, tmp_path, "echo changed > data.csv", CopyLimits(max_total_bytes=200_000))
    assert outputs.errors == [next(e for e in outputs.errors if e.startswith(
        "the working copy was not copied out whole: the total cap of 200000 bytes was reached at"))]
    assert not any(line.startswith("deleted file") for line in outputs.diff.splitlines())
    assert "copy stopped" in "\n".join(outputs.cut)


@pytest.mark.docker
def test_unreadable_folders_are_recorded_and_never_diffed_as_deleted(sandbox_image, masked: Path,
                                                                     tmp_path: Path) -> None:
    spec = SandboxSpec(image=sandbox_image, memory_mb=512, pids_limit=64, run_id="test-collect-unreadable")
    with create_sandbox("docker", spec, workspace=masked) as box:
        assert box.exec("echo changed > data.csv && chmod 000 pkg", timeout=30).returncode == 0
        outputs = collect_outputs(box, box.workdir, masked, tmp_path / "one", copy_limits=CopyLimits())
        assert outputs.changed_files == ["data.csv"] and outputs.errors == []
        assert "working copy: pkg: unreadable by the sandbox user" in outputs.cut
        assert box.exec("chmod 000 .", timeout=30).returncode == 0
        whole = collect_outputs(box, box.workdir, masked, tmp_path / "two", copy_limits=CopyLimits())
    assert whole.errors == ["the working copy could not be copied out"] and whole.changed_files == []


def test_a_diff_over_the_cap_leaves_out_whole_files_largest_first_and_still_applies(tmp_path):
    """An honest agent that leaves a large data file beside its fix keeps a diff that applies (cutting the text
    mid-file made the validator's patch fail) and the cut is recorded."""
    from failatlas.bench_core.runs.collect import fit_diff
    from failatlas.bench_core.runs.diff import tree_diff
    from failatlas.bench_core.scoring.evidence.rerun import apply_diff

    before, after = tmp_path / "before", tmp_path / "after"
    before.mkdir()
    (before / "ridge.py").write_text("def fit():\n    raise NotImplementedError\n")
    (before / "old.txt").write_text("gone\n")
    shutil.copytree(before, after)
    (after / "ridge.py").write_text("def fit():\n    return 1\n")
    (after / "old.txt").unlink()
    (after / "empty.py").write_text("")
    (after / "results.csv").write_text("".join(f"{i},{i * i}\n" for i in range(20_000)))
    (after / "notes.md").write_text("n" * 5_000 + "\n")
    diff, _ = tree_diff(before, after)
    kept, dropped = fit_diff(diff, 20_000)
    assert len(kept.encode()) <= 20_000 < len(diff.encode())
    assert [h for h, _ in dropped] == ["a/results.csv b/results.csv"]
    work = tmp_path / "work"
    shutil.copytree(before, work)
    assert apply_diff(work, kept) is None
    assert (work / "ridge.py").read_text() == "def fit():\n    return 1\n"
    assert (work / "empty.py").exists() and not (work / "old.txt").exists() and not (work / "results.csv").exists()
    assert fit_diff(diff, len(diff.encode())) == (diff, [])
