"""Sandbox overhead: a trivial command through FailAtlas's Docker sandbox (traced) vs a raw `docker run`.

    python benchmarks/sandbox_overhead.py [--n 20] [--image failatlas/sandbox:bookworm-v4] [--harness 5] [--json OUT]

Timed, interleaved (A B C A B C ...) so drift hits all alike, `n` times each:
- raw: `docker run --rm IMAGE true` through the CLI;
- raw, same limits: the same with the limits FailAtlas sets (--cpus 1 --memory 2g --pids-limit 256 --network none,
  /tmp tmpfs), so the ratio shows what the harness itself adds;
- failatlas: `create_sandbox('docker', SandboxSpec(image=IMAGE))` + `TracedSandbox` + `exec('true')` + `close()`.
Then the per-run harness overhead: `execute_run` of the `command` agent running `true` on the mini-suite task
`tree-depth` (prepare the workspace, start the sandbox, run, collect outputs and the diff, trace, close), minus the
agent's own command time, `--harness` times. Medians and min-max.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # for tests/ helpers; the installed failatlas comes first

IMAGE = "failatlas/sandbox:bookworm-v4"
LIMITS = ["--cpus", "1", "--memory", "2g", "--pids-limit", "256", "--network", "none",
          "--tmpfs", "/tmp:size=512m", "--shm-size", "256m"]


def raw(image: str, limits: bool) -> float:
    cmd = ["docker", "run", "--rm", *(LIMITS if limits else []), image, "true"]
    t = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - t


def failatlas(image: str) -> float:
    from failatlas.bench_core.sandbox import SandboxSpec, TracedSandbox, create_sandbox

    events: list = []
    t = time.perf_counter()
    box = TracedSandbox(create_sandbox("docker", SandboxSpec(image=image)), events.append)
    r = box.exec("true", timeout=60)
    box.close()
    elapsed = time.perf_counter() - t
    assert r.returncode == 0 and len(events) == 1, (r, events)
    return elapsed


def harness(image: str, runs_dir: Path, i: int) -> dict[str, float]:
    from failatlas.bench_core.runs.execute import RunConfig, execute_run
    from failatlas.bench_core.runs.model import RunRequest
    from failatlas.bench_core.suites.loader import load_suite

    task = next(t for t in load_suite() if t.id.endswith("tree-depth"))
    request = RunRequest(task_id=task.id, agent="command", agent_params={"command": "true"}, attempt=i + 1)
    t = time.perf_counter()
    record = execute_run(request, task, RunConfig(runs_dir=runs_dir, sandbox="docker", image=image,
                                                  keep_workspace=False))
    total = time.perf_counter() - t
    assert record.status == "completed", (record.status, record.infra_error)
    agent_cmds = [c for c in record.commands if c.command == "true"]
    agent_s = sum(c.duration_s for c in agent_cmds)
    return {"total": total, "agent": agent_s, "overhead": total - agent_s,
            "all_commands": sum(c.duration_s for c in record.commands)}


def fmt(xs: list[float]) -> str:
    return f"{statistics.median(xs):.3f} s ({min(xs):.3f}-{max(xs):.3f})"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--image", default=IMAGE)
    ap.add_argument("--harness", type=int, default=5)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    raw(args.image, False)  # warm-up: image layers in the page cache, the docker client imported
    failatlas(args.image)
    times: dict[str, list[float]] = {"raw docker run": [], "raw docker run, same limits": [],
                                     "failatlas TracedSandbox": []}
    for _ in range(args.n):
        times["raw docker run"].append(raw(args.image, False))
        times["raw docker run, same limits"].append(raw(args.image, True))
        times["failatlas TracedSandbox"].append(failatlas(args.image))
    runs: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.harness):
            runs.append(harness(args.image, Path(tmp), i))
    med = {k: statistics.median(v) for k, v in times.items()}
    ratio = med["failatlas TracedSandbox"] / med["raw docker run"]
    ratio_limits = med["failatlas TracedSandbox"] / med["raw docker run, same limits"]
    print(f"\n`true` in {args.image}, n={args.n} each, interleaved; median (min-max)\n")
    print("| path | time |")
    print("|---|---|")
    for k, v in times.items():
        print(f"| {k} | {fmt(v)} |")
    print(f"\n- failatlas / raw: {ratio:.2f} (target <= 1.3); failatlas / raw with the same limits: "
          f"{ratio_limits:.2f}")
    if runs:
        print(f"\n`execute_run` of the command agent running `true` on tree-depth, n={args.harness}\n")
        print("| part | time |")
        print("|---|---|")
        for k in ("total", "agent", "all_commands", "overhead"):
            print(f"| {k} | {fmt([r[k] for r in runs])} |")
        print(f"\n- per-run harness overhead: {statistics.median(r['overhead'] for r in runs):.2f} s (target < 2 s)")
    result = {"times": times, "ratio": ratio, "ratio_same_limits": ratio_limits, "harness": runs}
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
