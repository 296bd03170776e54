"""What starting the `failatlas` command costs: CPU seconds (user + system, of the process and its children) of
`failatlas --help` and `failatlas version`, side by side with `python -c "import duckdb, rich"` (the floor any
command that opens a store pays) and with importing every stage's CLI module, as the command did before its
groups were loaded lazily. Runs are interleaved, so a load spike hits every row alike; the target (issue 32) is
under 0.3 s CPU for `--help` and `version`.

    python benchmarks/cli_startup.py [--n 15] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

EAGER = ("import importlib, failatlas.cli as c, failatlas.store; "
         "[importlib.import_module(m) for _, m, _ in c.SUBCOMMANDS]")
ROWS = {
    'python -c "import duckdb, rich"': [sys.executable, "-c", "import duckdb, rich"],
    "failatlas --help": [sys.executable, "-m", "failatlas", "--help"],
    "failatlas version": [sys.executable, "-m", "failatlas", "version"],
    "failatlas tasks --help (loads one group)": [sys.executable, "-m", "failatlas", "tasks", "--help"],
    "every stage's CLI imported (the command before)": [sys.executable, "-c", EAGER],
}


def cpu_seconds(argv: list[str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one run of `argv`, its output discarded."""
    import time

    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "COLUMNS": "120"})
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv)} failed")
    return usage.ru_utime + usage.ru_stime, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=15, help="runs of each command")
    parser.add_argument("--json", help="write the raw numbers here")
    args = parser.parse_args()
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in ROWS}
    for argv in ROWS.values():  # one warm-up each: the file cache, compiled bytecode
        cpu_seconds(argv)
    for _ in range(args.n):
        for name, argv in ROWS.items():
            samples[name].append(cpu_seconds(argv))
    floor = statistics.median(c for c, _ in samples['python -c "import duckdb, rich"'])
    print(f"n={args.n} each, interleaved; median (min-max); load average {os.getloadavg()[0]:.1f}\n")
    print("| command | CPU s | wall s | CPU / import duckdb, rich |")
    print("|---|---|---|---|")
    for name, runs in samples.items():
        cpu = [c for c, _ in runs]
        wall = [w for _, w in runs]
        print(f"| {name} | {statistics.median(cpu):.3f} ({min(cpu):.3f}-{max(cpu):.3f}) | "
              f"{statistics.median(wall):.3f} | {statistics.median(cpu) / floor:.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(samples, f, indent=1)


if __name__ == "__main__":
    main()
