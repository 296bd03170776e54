"""Real EXP-Bench tasks (18439, 18244) prepared from their real repositories: what an agent sees inside the Docker
sandbox holds none of the masked files, and no git object in its workspace holds their content."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from failatlas.bench_core.repos import AddParams, add, repository_for
from failatlas.bench_core.runs import BenchParams, run
from failatlas.bench_core.tasks import TaskImportParams
from failatlas.bench_core.tasks import run as import_tasks
from failatlas.bench_core.tasks.catalog import get_task

pytestmark = pytest.mark.slow  # runs sandboxes (Docker, bwrap) or the app server: out of the README's quick command


def _distinctive_lines(tree: Path, rel: str, n: int = 3) -> list[str]:
    """The longest lines of masked file `rel` that no other file of the repository holds: text that is nowhere in
    the agent's tree if the file is really gone. (18244's masked `run_longExp.py` has a near-copy upstream,
    `Formers/FEDformer/run.py`: the lines they share are legitimately in the tree and are not asked about.)"""
    others = "\n".join(f.read_text(errors="replace") for f in tree.rglob("*")
                       if f.is_file() and f.relative_to(tree).as_posix() != rel and f.stat().st_size < 5_000_000)
    lines = {line.strip() for line in (tree / rel).read_text(errors="replace").splitlines()}
    unique = sorted((line for line in lines if "'" not in line and 20 <= len(line) <= 300 and line not in others),
                    key=len, reverse=True)
    return unique[:n]


def _probe(masked: list[str], needles: list[str]) -> str:
    """A shell command, run by the agent in the sandbox, that reports every masked path present and every needle
    found in any git object (blobs, trees, commits, dangling or not) into the agent's conclusion."""
    checks = [f"[ -e {shlex.quote(p)} ] && echo PRESENT {shlex.quote(p)};" for p in masked]
    greps = [f"git cat-file --batch-all-objects --batch | grep -qF -- {shlex.quote(n)} && echo LEAKED {i};"
             for i, n in enumerate(needles)]
    return ("mkdir -p .failatlas; { " + " ".join(checks + greps) + " echo objects $(git cat-file --batch-all-objects"
            " --batch-check | wc -l); echo files $(find . -path ./.git -prune -o -type f -print | wc -l); }"
            " > .failatlas/conclusion.md 2>&1")


@pytest.mark.parametrize("paper", [18439, 18244])
def test_masked_files_are_absent_from_the_sandbox_and_every_git_object(store, tmp_path, shared_data,
                                                                        sandbox_image, paper):
    iclr = shared_data / "expbench"
    import_tasks(store, TaskImportParams(paths=[iclr / "iclr2024" / f"{paper}.json"],
                                         options={"index": iclr / "iclr2024_index.jsonl"}))
    tarball = {18439: "apple__ml-calibration.tar.gz", 18244: "Hank0626__PDF.tar.gz"}[paper]
    add(store, AddParams(source=str(shared_data / "repos" / tarball), cache_dir=tmp_path / "cache"))
    ids = [r[0] for r in store.query("SELECT id FROM tasks WHERE kind = 'T1' ORDER BY id")]
    task = get_task(store, ids[0])
    assert task.masking.files, "a T1 task masks files"
    tree = repository_for(store, task).path
    needles = [line for rel in task.masking.files if (tree / rel).is_file() for line in _distinctive_lines(tree, rel)]
    assert needles

    result = run(store, BenchParams(agent="command", agent_params={"command": _probe(task.masking.files, needles)},
                                    task_ids=[task.id], sandbox="docker", image=sandbox_image, gpu_tasks=True,
                                    runs_dir=tmp_path / "runs"))
    assert result.by_status == {"completed": 1}
    outputs = json.loads(store.query("SELECT outputs FROM runs WHERE task_id = ?", [task.id])[0][0])
    report = outputs["conclusion"]
    assert "objects" in report and "files" in report, report  # the probe ran and could read the objects
    assert int(report.split("objects ")[1].split()[0]) > 0
    assert "PRESENT" not in report and "LEAKED" not in report, report
