"""`tasks prepare` before and after issue 32 item 8's speed-up, side by side in one run: the old code of
`bench_core/prepare` is read from git (`--base`, a commit before the change) into a private package, the new one is
the installed `failatlas`; both prepare the same real AutoExperiment tasks (../shared/data), interleaved, and the
trees they build are checked to be byte-identical (every file, the commit id, every git object).

Two shapes: `batch` (one process prepares many tasks of one repository, as `bench run` and `tasks validate` do) and
`cold` (a fresh process per task, as one `failatlas tasks prepare` call: imports included).

    python benchmarks/prepare_speed.py [--data ../shared/data] [--paper 2303.11932] [--tasks 40] [--cold 5]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASE = "af172ac"  # main before the speed-up
PACKAGE = "failatlas.bench_core.prepare"


def old_package(base: str, into: Path, repo: Path) -> str:
    """Write `bench_core/prepare` as of `base` into `into/prepare_old/` (its own imports pointed at itself);
    the package's name."""
    folder = into / "prepare_old"
    folder.mkdir(parents=True, exist_ok=True)
    names = subprocess.run(["git", "ls-tree", "--name-only", base, "bench_core/prepare/"], cwd=repo, check=True,
                           capture_output=True, text=True).stdout.split()
    for name in names:
        if name.endswith(".py"):
            text = subprocess.run(["git", "show", f"{base}:{name}"], cwd=repo, check=True, capture_output=True,
                                  text=True).stdout
            (folder / Path(name).name).write_text(text.replace(PACKAGE, "prepare_old"))
    return "prepare_old"


def tree_digest(path: Path) -> str:
    """One hash of a prepared tree: every path with its mode and bytes outside .git, the commit HEAD names and
    every git object (id and content). The index and the object files' compression are not part of it."""
    h = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if ".git" not in p.relative_to(path).parts):
        h.update(f"{file.relative_to(path).as_posix()}\0{file.lstat().st_mode:o}\0".encode())
        h.update(os.readlink(file).encode() if file.is_symlink() else file.read_bytes() if file.is_file() else b"")
    git = ["git", "-C", str(path)]
    h.update(subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, check=True).stdout)
    h.update(subprocess.run([*git, "cat-file", "--batch-all-objects", "--batch"], capture_output=True,
                            check=True).stdout)
    return h.hexdigest()


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def tasks_of(data: Path, paper: str, store_dir: Path) -> list:
    from failatlas.bench_core.tasks import TaskImportParams
    from failatlas.bench_core.tasks import run as import_tasks
    from failatlas.bench_core.tasks.catalog import get_task, list_tasks
    from failatlas.store import open_store

    store = open_store(store_dir / "tasks.duckdb")
    import_tasks(store, TaskImportParams(paths=[data / "autoexperiment" / "MLRC"], format="auto"))
    return [get_task(store, row["id"]) for row in list_tasks(store, benchmark="autoexperiment", paper=paper)]


COLD = """
import sys, time, importlib
from pathlib import Path
sys.path.insert(0, sys.argv[1])
started = time.perf_counter()
from failatlas.bench_core.tasks.model import TaskSpec
prepare = importlib.import_module(sys.argv[2]).prepare_workspace
task = TaskSpec.model_validate_json(Path(sys.argv[3]).read_text())
prepare(task, Path(sys.argv[4]))
print(time.perf_counter() - started)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--paper", default="2303.11932")
    parser.add_argument("--tasks", type=int, default=40, help="tasks prepared by each code path in one process")
    parser.add_argument("--cold", type=int, default=5, help="tasks prepared each in a fresh process, per path")
    parser.add_argument("--base", default=BASE)
    args = parser.parse_args()
    import importlib

    from failatlas.bench_core import prepare as new

    root = Path(tempfile.mkdtemp(prefix="prepare-speed-"))
    name = old_package(args.base, root, Path(__file__).resolve().parents[1])
    sys.path.insert(0, str(root))
    old = importlib.import_module(name)
    tasks = tasks_of(args.data, args.paper, root)[:max(args.tasks, args.cold)]
    print(f"{len(tasks)} task(s) of paper {args.paper}; old code: bench_core/prepare at {args.base}; "
          f"load {os.getloadavg()[0]:.1f}")
    times: dict[str, list[float]] = {"old": [], "new": []}
    cpu: dict[str, list[float]] = {"old": [], "new": []}
    for i, task in enumerate(tasks[:args.tasks]):
        digests = {}
        for name, module in (("old", old), ("new", new)) if i % 2 else (("new", new), ("old", old)):
            dest = root / name / task.id
            started, cpu_started = time.perf_counter(), _cpu()
            module.prepare_workspace(task, dest)
            times[name].append(time.perf_counter() - started)
            cpu[name].append(_cpu() - cpu_started)
            digests[name] = tree_digest(dest)
        assert digests["old"] == digests["new"], f"{task.id}: the trees differ"
    cold: dict[str, list[float]] = {"old": [], "new": []}
    for i, task in enumerate(tasks[:args.cold]):
        spec = root / f"{i}.json"
        spec.write_text(task.model_dump_json())
        for name, package in (("old", "prepare_old"), ("new", "failatlas.bench_core.prepare")):
            out = subprocess.run([sys.executable, "-c", COLD, str(root), package, str(spec),
                                  str(root / f"cold-{name}" / task.id)], capture_output=True, text=True, check=True)
            cold[name].append(float(out.stdout.strip().splitlines()[-1]))
    print("| shape | old s per task: median (min-max) | new s per task | old / new | trees identical |")
    print("|---|---|---|---|---|")
    for shape, t in (("batch (one process, tasks in a row), wall", times),
                     ("batch, CPU (the process and its git children)", cpu), ("cold (a process per task), wall", cold)):
        if t["old"]:
            o, n = statistics.median(t["old"]), statistics.median(t["new"])
            print(f"| {shape}, n={len(t['old'])} | {o:.3f} ({min(t['old']):.3f}-{max(t['old']):.3f}) | "
                  f"{n:.3f} ({min(t['new']):.3f}-{max(t['new']):.3f}) | {o / n:.2f} | "
                  f"{'yes' if shape.startswith('batch') else 'not checked'} |")
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
