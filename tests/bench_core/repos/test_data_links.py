"""Links into a data input's mount (issue 40): a repository whose code reads a fixed path (2205.00048 reads
`src/datasets/ml-1m/ratings.dat`) reaches `--data NAME=PATH` through a link to `/data/NAME/...`. Such a link is the
one absolute link the repository cache and the prepared workspace keep; every other link leading out (`/etc`,
`/data/../etc`, `..`) is still dropped, and the harness never reads a file through a link on the host."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from failatlas.bench_core.prepare import prepare_workspace
from failatlas.bench_core.repos.trees import drop_outside_links
from failatlas.bench_core.tasks.data import is_data_link
from failatlas.bench_core.tasks.model import Masking, RepoRef, RunSpec, TaskSpec


@pytest.mark.parametrize(("target", "kept"), [
    ("/data/ml1m/ratings.dat", True), ("/data/ml1m", True), ("/data/ml_1m/runs/a.gz", True),
    ("/data", False), ("/data/", False), ("/data/../etc/passwd", False), ("/data/ml1m/../../etc", False),
    ("/data//ml1m", False), ("/data/ml-1m/x", False), ("/data/1ml/x", False), ("/etc/passwd", False),
    ("../outside", False), ("data/ml1m", False), ("/database/x", False),
])
def test_only_normalised_links_into_a_named_data_mount_count(target: str, kept: bool) -> None:
    assert is_data_link(target) is kept


def _repo(root: Path) -> Path:
    (root / "src" / "datasets").mkdir(parents=True)
    (root / "src" / "main.py").write_text("def f():\n    return 1\n")
    os.symlink("/data/ml1m/ratings.dat", root / "src" / "datasets" / "ratings.dat")
    os.symlink("/data/ml1m/evil.py", root / "src" / "evil.py")  # a .py link: never read on the host
    os.symlink("/etc/passwd", root / "src" / "passwd")
    os.symlink("/data/../etc/shadow", root / "src" / "shadow")
    os.symlink("../../outside", root / "src" / "up")
    return root


def test_the_cache_keeps_data_links_and_drops_the_rest(tmp_path: Path) -> None:
    root = _repo(tmp_path / "repo")
    dropped = drop_outside_links(root)
    assert dropped == ["src/passwd", "src/shadow", "src/up"]
    assert os.readlink(root / "src" / "datasets" / "ratings.dat") == "/data/ml1m/ratings.dat"
    assert os.readlink(root / "src" / "evil.py") == "/data/ml1m/evil.py"


def test_the_prepared_workspace_keeps_data_links_in_its_commit(tmp_path: Path) -> None:
    _repo(tmp_path / "task" / "repo")
    (tmp_path / "task" / "task.json").write_text("{}")
    task = TaskSpec(id="toy-links", benchmark="toy", kind="masked_functions", question="q?",
                    repository=RepoRef(local_path="repo"), source=str(tmp_path / "task" / "task.json"),
                    masking=Masking(functions=[{"path": "src/main.py", "qualname": "f"}]),
                    run=RunSpec(command="python3 src/main.py"))
    ws = prepare_workspace(task, tmp_path / "ws")
    dest = Path(ws.path)
    assert os.readlink(dest / "src" / "datasets" / "ratings.dat") == "/data/ml1m/ratings.dat"
    for gone in ("passwd", "shadow", "up"):
        assert not os.path.lexists(dest / "src" / gone)
    assert not any("evil.py" in w and "compile" in w for w in ws.warnings)  # not read through the link
    import subprocess

    tracked = subprocess.run(["git", "-C", str(dest), "ls-files", "-s", "src/datasets/ratings.dat"],
                             capture_output=True, text=True, check=True).stdout
    assert tracked.startswith("120000")  # a link in the single commit: part of the baseline, not the agent's diff


@pytest.mark.parametrize("kind", ["local", "bwrap", "docker"])
def test_a_sandbox_copy_out_keeps_data_links_and_cuts_the_rest(tmp_path: Path, kind: str) -> None:
    """The agent's tree comes out with the repository's data links as they were, so its diff never shows them
    deleted (a re-run on the agent's own tree keeps its data); links leading anywhere else are still cut."""
    from failatlas.bench_core.sandbox import SandboxSpec, create_sandbox

    tree = tmp_path / "tree"
    (tree / "src" / "datasets").mkdir(parents=True)
    os.symlink("/data/ml1m/ratings.dat", tree / "src" / "datasets" / "ratings.dat")
    with create_sandbox(kind, SandboxSpec(), workspace=tree) as box:
        made = box.exec("ln -s /etc/passwd src/passwd && ln -s /data/../etc/shadow src/shadow && "
                        "ln -s ../../outside src/up && ln -s /data/ml1m/new.csv src/new.csv", timeout=60,
                        cwd=box.workdir)
        assert made.success, made.stderr
        report = box.copy_out(box.workdir, tmp_path / "out")
    out = tmp_path / "out"
    assert os.readlink(out / "src" / "datasets" / "ratings.dat") == "/data/ml1m/ratings.dat"
    assert os.readlink(out / "src" / "new.csv") == "/data/ml1m/new.csv"
    for gone in ("passwd", "shadow", "up"):
        assert not os.path.lexists(out / "src" / gone)
    assert {c.path for c in report.cut} >= {"src/passwd", "src/shadow", "src/up"}
