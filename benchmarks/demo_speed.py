"""`failatlas demo` end to end, an older version beside this one, in one run: each in a fresh temporary folder with a
fresh store, one after the other (two demos at once would share run ids and so container names), wall seconds and
the ratio printed.

The older version is any Python whose `failatlas` is that version, e.g. a commit installed editable into a venv that
sees this machine's packages:

    git worktree add /tmp/base 9d2b8df
    python3 -m venv --system-site-packages /tmp/basevenv
    /tmp/basevenv/bin/pip install -q wheel setuptools
    /tmp/basevenv/bin/pip install -q --no-deps --no-build-isolation -e /tmp/base
    python3 benchmarks/demo_speed.py --before /tmp/basevenv/bin/python

Or one version with other options on each side, e.g. the demo without its impossible twins beside the demo with
them (issue 54), keeping each demo's output:

    python3 benchmarks/demo_speed.py --before python3 --before-arg=--no-twins --log /tmp/demo-logs

Or one version with a switch of its environment on one side, e.g. Docker sandboxes each with a network namespace
of its own beside the reused ones (`bench_core/sandbox/docker_netns.py`):

    python3 benchmarks/demo_speed.py --before python3 --before-env FAILATLAS_DOCKER_NETNS_POOL=0 --rounds 2

Both demos use the same sandbox image and the same Docker engine; the image must exist (scripts/setup.sh). The
load average (1 minute) is printed at each demo's start and end: on a busy machine the times say as much about
the other work as about the demo. So each demo's CPU time is printed too, which other work sharing the cores
changes much less: the demo's own processes (their rusage), its containers (the `docker` cpuacct cgroup, cgroup v1
with the cgroupfs driver) and the engine's daemons (dockerd and containerd, from /proc); a part this host cannot
see is printed as "-". Another program using Docker at the same time is counted in the last two. Last, the CPU time
the whole machine was busy (/proc/stat), which holds what those parts miss (the FUSE daemons of a fuse-overlayfs
engine, the kernel's own work) and anything else that ran.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DOCKER_CPUACCT = Path("/sys/fs/cgroup/cpuacct/docker/cpuacct.usage")


def _cpu() -> dict[str, float | None]:
    """CPU seconds so far: this process's waited-for children, the Docker containers' cgroup, dockerd, containerd."""
    import resource

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    found: dict[str, float | None] = {"demo": children.ru_utime + children.ru_stime}
    try:
        found["containers"] = int(DOCKER_CPUACCT.read_text()) / 1e9
    except (OSError, ValueError):
        found["containers"] = None
    tick = os.sysconf("SC_CLK_TCK")
    for name in ("dockerd", "containerd"):
        total = None
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                text = stat.read_text()
            except OSError:
                continue
            if text[text.index("(") + 1:text.rindex(")")] == name:  # its own time and its waited-for children's
                fields = text[text.rindex(")") + 2:].split()
                total = (total or 0.0) + sum(int(v) for v in fields[11:15]) / tick
        found[name] = total
    return found


def _busy() -> float:
    """CPU seconds the whole machine has been busy (/proc/stat: all but idle and iowait), every process and the
    kernel: what the per-part counts miss, such as the storage driver's FUSE daemons (one per container)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def _cpu_line(before: dict[str, float | None], after: dict[str, float | None]) -> str:
    parts, total = [], 0.0
    for key in before:
        if before[key] is None or after[key] is None:
            parts.append(f"{key} -")
            continue
        spent = after[key] - before[key]
        total += spent
        parts.append(f"{key} {spent:.0f} s")
    return f"CPU {total:.0f} s ({', '.join(parts)})"


def _demo(python: str, label: str, extra: list[str], log: Path | None = None, n: int = 0,
          env: dict[str, str] | None = None) -> float:
    with tempfile.TemporaryDirectory(prefix=f"demo-{label}-") as tmp:
        version = subprocess.run([python, "-m", "failatlas", "version"], capture_output=True, text=True,
                                 check=False).stdout.strip()
        settings = "".join(f"{k}={v} " for k, v in (env or {}).items())
        print(f"{label}: {settings}{version or python} demo {' '.join(extra)} in {tmp}; "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
        cpu, busy = _cpu(), _busy()
        start = time.perf_counter()
        proc = subprocess.run([python, "-m", "failatlas", "--db", str(Path(tmp) / "demo.duckdb"), "demo", *extra],
                              cwd=tmp, capture_output=True, text=True, check=False,
                              env={**os.environ, "COLUMNS": "120", **(env or {})})
        seconds = time.perf_counter() - start
        if log is not None:
            log.mkdir(parents=True, exist_ok=True)
            (log / f"{label}-{n + 1}.log").write_text(proc.stdout + proc.stderr)
        if proc.returncode != 0:
            sys.exit(f"{label}: failatlas demo exited {proc.returncode}:\n{(proc.stdout + proc.stderr)[-3000:]}")
        print(f"{label}: {seconds:.0f} s; load {os.getloadavg()[0]:.1f}; {_cpu_line(cpu, _cpu())}; machine busy "
              f"{_busy() - busy:.0f} s", flush=True)
        return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="a Python whose failatlas is the older version")
    parser.add_argument("--after", default=sys.executable, help="a Python whose failatlas is this version")
    parser.add_argument("--demo-arg", action="append", default=[], help="passed to both demos (repeatable)")
    parser.add_argument("--before-arg", action="append", default=[], help="passed to the older one (repeatable)")
    parser.add_argument("--after-arg", action="append", default=[], help="passed to this one (repeatable)")
    parser.add_argument("--before-env", action="append", default=[], metavar="NAME=VALUE",
                        help="set in the older one's environment (repeatable), e.g. a switch of this version")
    parser.add_argument("--after-env", action="append", default=[], metavar="NAME=VALUE",
                        help="set in this one's environment (repeatable)")
    parser.add_argument("--log", type=Path, help="keep each demo's output here (<label>-<round>.log)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="pairs of demos; the order alternates (before-after, after-before, ...) so that a "
                        "machine's load drifting during the measurement weighs on both alike")
    args = parser.parse_args()
    envs = {}
    for label in ("before", "after"):
        pairs = getattr(args, f"{label}_env")
        bad = [p for p in pairs if "=" not in p or not p.split("=", 1)[0]]
        if bad:
            parser.error(f"--{label}-env takes NAME=VALUE, not {bad[0]!r}")
        envs[label] = dict(p.split("=", 1) for p in pairs)
    totals = {"before": 0.0, "after": 0.0}
    for n in range(args.rounds):
        order = ("before", "after") if n % 2 == 0 else ("after", "before")
        seconds = {label: _demo(getattr(args, label), label, [*args.demo_arg, *getattr(args, f"{label}_arg")],
                                args.log, n, envs[label]) for label in order}
        for label in order:
            totals[label] += seconds[label]
        print(f"round {n + 1}: before {seconds['before']:.0f} s, after {seconds['after']:.0f} s: "
              f"after / before = {seconds['after'] / seconds['before']:.2f}", flush=True)
    print(f"before {totals['before']:.0f} s, after {totals['after']:.0f} s in {args.rounds} round(s): "
          f"after / before = {totals['after'] / totals['before']:.2f}")


if __name__ == "__main__":
    main()
