"""What tracing the agent's commands costs (issue 49's provenance): the same commands untraced and traced, side by side
in one sandbox of each kind, alternating, with the ratio of medians.

Commands: the mini-suite's ridge experiment (`python3 run.py`: numpy, a few hundred file opens), a short shell command,
and one that opens many files (2,000 small reads and writes), the shape that costs a ptrace tracer most.

    python benchmarks/provenance_overhead.py [--kinds docker bwrap] [--n 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1] / "bench_core" / "suites" / "mini" / "ridge-cv" / "repo"
COMMANDS = {
    "ridge experiment": "python3 run.py > /dev/null",
    "shell one-liner": "echo hi > x.txt && cat x.txt > /dev/null",
    "2,000 files": "python3 -c \"[open(f'f{i}.txt', 'w').write(str(i)) or open(f'f{i}.txt').read() "
                   "for i in range(2000)]\"",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", nargs="+", default=["docker", "bwrap"])
    parser.add_argument("--n", type=int, default=5)
    args = parser.parse_args()

    from failatlas.bench_core.prepare import reference_workspace
    from failatlas.bench_core.sandbox import SandboxSpec, create_sandbox
    from failatlas.bench_core.suites import load_suite

    task = next(t for t in load_suite("failatlas-mini") if t.id == "mini-ridge-cv")
    print("| sandbox | command | untraced median s | traced median s | ratio |")
    print("|---|---|---|---|---|")
    for kind in args.kinds:
        with tempfile.TemporaryDirectory() as tmp:
            tree = Path(reference_workspace(task, Path(tmp) / "repo", repo=REPO))
            spec = SandboxSpec(run_id=f"overhead-{kind}", trace_processes=True, memory_mb=2048)
            with create_sandbox(kind, spec, workspace=tree) as box:
                for name, command in COMMANDS.items():
                    box.exec(command, timeout=300, trace=True)  # warm: page cache, the tracer's setup
                    plain, traced = [], []
                    for _ in range(args.n):
                        for trace, out in ((False, plain), (True, traced)):
                            start = time.perf_counter()
                            res = box.exec(command, timeout=300, trace=trace)
                            out.append(time.perf_counter() - start)
                            assert res.returncode == 0, res.stderr
                            assert not trace or "unavailable" not in (res.provenance or {}), res.provenance
                    a, b = statistics.median(plain), statistics.median(traced)
                    print(f"| {kind} | {name} | {a:.3f} | {b:.3f} | {b / a:.2f} |", flush=True)


if __name__ == "__main__":
    main()
