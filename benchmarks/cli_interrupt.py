"""How long Ctrl-C takes to stop a long command: SIGINT to the command's process group (as a terminal sends it)
while parallel runs are under way, until the command has exited (target, issue 32: within 2 s). Each repeat
uses a fresh store with toy tasks whose agent command sleeps; the same command run again must then do every run
once (resumable), and no agent command may outlive the interrupt.

    python benchmarks/cli_interrupt.py [--repeats 3] [--sandbox docker local] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SLEEP = "113.5"


def _sleeping() -> int:
    found = 0
    for proc in Path("/proc").iterdir():
        try:
            found += proc.name.isdigit() and (proc / "cmdline").read_bytes() == f"sleep\0{SLEEP}\0".encode()
        except OSError:
            continue
    return found


def one(sandbox: str, root: Path) -> dict:
    from failatlas.bench_core.tasks.catalog import save_tasks
    from failatlas.bench_core.tasks.model import RepoRef, TaskSpec
    from failatlas.store import open_store

    db = root / "s.duckdb"
    tasks = []
    for i in range(4):
        (root / f"t{i}" / "repo").mkdir(parents=True)
        (root / f"t{i}" / "repo" / "a.py").write_text("x = 1\n")
        (root / f"t{i}" / "task.json").write_text("{}")
        tasks.append(TaskSpec(id=f"toy-{i}", benchmark="toy", kind="full_code", question="Wait.",
                              repository=RepoRef(local_path="repo"), source=str(root / f"t{i}" / "task.json")))
    save_tasks(open_store(db), tasks)
    flag = root / "go"
    cmd = [sys.executable, "-m", "failatlas", "--db", str(db), "bench", "run", "--agent", "command", "--param",
           f"command=test -e {flag} || sleep {SLEEP}", "--benchmark", "toy", "--workers", "2", "--sandbox",
           sandbox, "--runs-dir", str(root / "runs")]
    env = {**os.environ, "FAILATLAS_NO_PROGRESS": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                            env=env)
    deadline = time.monotonic() + 300
    while _sleeping() < 2 and time.monotonic() < deadline:  # a container's processes are this host's too
        time.sleep(0.2)
    time.sleep(1.0)
    started = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    proc.wait(timeout=120)
    seconds = time.monotonic() - started
    time.sleep(3)
    left = _sleeping()
    flag.touch()
    again = subprocess.run(cmd, capture_output=True, env=env, timeout=900)
    runs = open_store(db).query("SELECT count(*), count(DISTINCT task_id) FROM runs WHERE status = 'completed'")
    return {"seconds": seconds, "exit": proc.returncode, "left_running_3s_later": left,
            "resumed": again.returncode == 0 and runs == [(4, 4)], "load": os.getloadavg()[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sandbox", nargs="+", default=["docker", "local"])
    parser.add_argument("--json")
    args = parser.parse_args()
    results: dict[str, list[dict]] = {}
    for _ in range(args.repeats):
        for sandbox in args.sandbox:
            with tempfile.TemporaryDirectory() as tmp:
                results.setdefault(sandbox, []).append(one(sandbox, Path(tmp)))
    print("| sandbox | SIGINT to exit, s: median (min-max) | exit codes | left running 3 s later | resumed | load |")
    print("|---|---|---|---|---|---|")
    for sandbox, rows in results.items():
        s = [r["seconds"] for r in rows]
        print(f"| {sandbox} | {statistics.median(s):.2f} ({min(s):.2f}-{max(s):.2f}) | "
              f"{sorted({r['exit'] for r in rows})} | {[r['left_running_3s_later'] for r in rows]} | "
              f"{all(r['resumed'] for r in rows)} | {statistics.median(r['load'] for r in rows):.1f} |")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
