"""Reading an agent's three output files back out of one Docker sandbox: one `read_file` command per file (as
collection did) beside one command for all three (`protocol.read_files`, issue 54), interleaved, in one run.

    python benchmarks/readback_speed.py [--rounds 30] [--image failatlas/sandbox:bookworm-v4]

Each round reads `.failatlas/design.json`, `conclusion.md` and `run.sh` both ways (the order alternating per round)
and checks both saw the same bytes. Wall seconds, and CPU seconds of every process of this host (from /proc/stat:
the harness, dockerd, containerd, runc and the container together), per collection and as a ratio.
"""

from __future__ import annotations

import argparse
import time

FILES = (".failatlas/design.json", ".failatlas/conclusion.md", ".failatlas/run.sh")


def _cpu_s() -> float:
    """CPU seconds every process of this host spent (busy, not idle or waiting), from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / 100


def main() -> None:
    from failatlas.bench_core.runs import readback
    from failatlas.bench_core.sandbox import SandboxSpec, create_sandbox
    from failatlas.bench_core.sandbox.model import DEFAULT_IMAGE

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--image", default=DEFAULT_IMAGE)
    args = parser.parse_args()
    ways = {
        "one command per file": lambda box: {r: readback.read_seen(box, box.workdir, r, 1 << 20) for r in FILES},
        "one command for all": lambda box: readback.read_all_seen(box, box.workdir, list(FILES), 1 << 20),
    }
    spent = {name: [0.0, 0.0] for name in ways}
    with create_sandbox("docker", SandboxSpec(image=args.image, run_id="bench-readback")) as box:
        box.exec("mkdir -p .failatlas && echo '{\"constant\": {}}' > .failatlas/design.json"
                 " && echo 'Ridge wins.' > .failatlas/conclusion.md && echo 'python3 run.py' > .failatlas/run.sh",
                 timeout=30)
        for k in range(args.rounds):
            seen = []
            for name in (list(ways) if k % 2 == 0 else list(ways)[::-1]):
                wall, cpu = time.perf_counter(), _cpu_s()
                seen.append(ways[name](box))
                spent[name][0] += time.perf_counter() - wall
                spent[name][1] += _cpu_s() - cpu
            if seen[0] != seen[1] or any(s.state != "file" for s in seen[0].values()):
                raise SystemExit(f"round {k}: the two ways read different things: {seen}")
    for name, (wall, cpu) in spent.items():
        print(f"{name}: {wall / args.rounds * 1000:.0f} ms wall, {cpu / args.rounds * 1000:.0f} ms CPU per collection")
    (w1, c1), (w2, c2) = spent.values()
    print(f"one command for all / one per file: wall {w2 / w1:.2f}x, CPU {c2 / c1:.2f}x ({args.rounds} rounds)")


if __name__ == "__main__":
    main()
