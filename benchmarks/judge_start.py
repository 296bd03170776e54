"""Hidden-test judges forked by the server (`hidden/judge_start.py`) against fresh `python3 -I -B` processes, side
by side: whole `run_judge` runs (the staged judge, pytest over a hidden test file of three tests, each relayed
once to a tiny agent module in a local sandbox), alternating the two ways per round. Prints each way's wall and CPU
seconds per judge run (CPU: this process's and its reaped children's, the servers closed and reaped at the end of
each batch so that their judges count too) and the ratios:

    python benchmarks/judge_start.py [--judges 10] [--rounds 3]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from pathlib import Path

from failatlas.bench_core.hidden import judge_start, run_judge
from failatlas.bench_core.sandbox import SandboxSpec, create_sandbox

MODULE = "def f(x):\n    return [x, x * 2]\n"
TESTS = """
import pytest


@pytest.mark.parametrize("i", range(3))
def test_f(agent, i):
    assert agent.call("mod:f", i) == [i, 2 * i]
"""


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def batch(fork: bool, folder: Path, judges: int) -> tuple[float, float]:
    """(wall, CPU) seconds per judge run of `judges` runs one way."""
    wall, cpu = time.monotonic(), _cpu()
    with create_sandbox("local", SandboxSpec(), workspace=folder / "work") as box:
        for _ in range(judges):
            run = run_judge([folder / "test_hidden.py"], box, pristine=None, timeout_s=120, fork=fork)
            if len(run.passed) != 3:
                raise SystemExit(f"a judge run did not pass its three tests: {run}")
    judge_start._close_servers()  # its judges' time reaches this process's children's time only when it is reaped
    return (time.monotonic() - wall) / judges, (_cpu() - cpu) / judges


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judges", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="failatlas-judge-start-") as tmp:
        folder = Path(tmp)
        (folder / "work").mkdir()
        (folder / "work" / "mod.py").write_text(MODULE)
        (folder / "test_hidden.py").write_text(TESTS)
        seen: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
        for round_ in range(args.rounds):
            for fork in ((False, True) if round_ % 2 == 0 else (True, False)):
                seen[fork].append(batch(fork, folder, args.judges))
                wall, cpu = seen[fork][-1]
                print(f"round {round_ + 1}, {'forked' if fork else 'fresh '}: {wall:.3f} s wall, {cpu:.3f} s CPU "
                      "per judge run", flush=True)
    fresh = [statistics.median(v) for v in zip(*seen[False], strict=True)]
    forked = [statistics.median(v) for v in zip(*seen[True], strict=True)]
    print(f"medians of {args.rounds} rounds of {args.judges} judge runs: fresh {fresh[0]:.3f} s wall, {fresh[1]:.3f} s "
          f"CPU; forked {forked[0]:.3f} s wall, {forked[1]:.3f} s CPU; forked / fresh = {forked[0] / fresh[0]:.2f} "
          f"(wall), {forked[1] / fresh[1]:.2f} (CPU)")


if __name__ == "__main__":
    main()
