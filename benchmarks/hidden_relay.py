"""The hidden-test relay in Docker, the zygote over a channel against the zygote over files, side by side.

One judge run of N calls (a tiny agent module that imports numpy) in a fresh Docker sandbox per round, alternating
the two ways; counts the sandbox operations each made (`write_file`, `write_files`, `read_file`, `exec`: each a
daemon call or more) and prints seconds per call and the ratio:

    python benchmarks/hidden_relay.py [--calls 60] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from failatlas.bench_core.hidden import relay, run_judge, zygote
from failatlas.bench_core.sandbox import DEFAULT_IMAGE, SandboxSpec, create_sandbox

MODULE = "import numpy\n\n\ndef f(x):\n    return [x, numpy.arange(3).tolist()]\n"
TESTS = """
import pytest


@pytest.mark.parametrize("i", range({calls}))
def test_f(agent, i):
    assert agent.call("mod:f", i) == [i, [0, 1, 2]]
"""
OPERATIONS = ("write_file", "write_files", "read_file", "exec", "open_channel")


def one(way: str, folder: Path, calls: int) -> tuple[float, dict[str, int]]:
    """Seconds of one judge run relayed `way`, and the sandbox operations it made."""
    start_zygote = zygote.start_zygote if way == "channel" else zygote.FileZygote
    relay.start_zygote = start_zygote
    counts = dict.fromkeys(OPERATIONS, 0)
    with create_sandbox("docker", SandboxSpec(image=DEFAULT_IMAGE, memory_mb=2048), workspace=folder / "work") as box:
        for name in OPERATIONS:
            original = getattr(box, name, None)
            if original is None:
                continue

            def counted(*args, _original=original, _name=name, **kwargs):
                counts[_name] += 1
                return _original(*args, **kwargs)

            setattr(box, name, counted)
        start = time.monotonic()
        run = run_judge([folder / "test_hidden.py"], box, pristine=None, timeout_s=300)
        took = time.monotonic() - start
    if len(run.passed) != calls or run.failures or run.problems:
        raise SystemExit(f"the {way} run did not pass all {calls} calls: {run.failures[:2]} {run.problems}")
    return took, counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    original = relay.start_zygote
    with tempfile.TemporaryDirectory(prefix="failatlas-relay-bench-") as tmp:
        folder = Path(tmp)
        (folder / "work").mkdir()
        (folder / "work" / "mod.py").write_text(MODULE)
        (folder / "test_hidden.py").write_text(TESTS.format(calls=args.calls))
        times: dict[str, list[float]] = {"files": [], "channel": []}
        ops: dict[str, dict[str, int]] = {}
        try:
            for round_ in range(args.rounds):
                for way in ("files", "channel") if round_ % 2 == 0 else ("channel", "files"):
                    took, ops[way] = one(way, folder, args.calls)
                    times[way].append(took)
                    print(f"round {round_ + 1} {way:8s} {took:6.2f} s  {took / args.calls * 1000:6.1f} ms/call  "
                          + " ".join(f"{k}={v}" for k, v in ops[way].items() if v), flush=True)
        finally:
            relay.start_zygote = original
    files, channel = statistics.median(times["files"]), statistics.median(times["channel"])
    print(f"median of {args.rounds}, {args.calls} calls: files {files:.2f} s, channel {channel:.2f} s, "
          f"channel/files {channel / files:.2f}x")


if __name__ == "__main__":
    main()
