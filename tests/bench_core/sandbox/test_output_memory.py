"""A 100 MB print costs the harness almost no memory: output is streamed and capped, never buffered whole."""

from __future__ import annotations

import subprocess
import sys

import pytest

from failatlas.bench_core.sandbox import DEFAULT_IMAGE

_MEASURE = """
import sys
from failatlas.bench_core.sandbox import SandboxSpec, create_sandbox
with create_sandbox(sys.argv[1], SandboxSpec(image=sys.argv[2], memory_mb=1024)) as box:
    base = int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1])  # own peak (VmHWM)
    r = box.exec(["python3", "-c", "import sys; sys.stdout.write('x' * 100_000_000)"], timeout=60,
                 output_limit=10_000)
    peak = int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1])
assert r.returncode == 0 and r.truncated, r
print((peak - base) // 1024)
"""


@pytest.mark.parametrize(("backend", "image_fixture"), [
    pytest.param("docker", "sandbox_image", marks=pytest.mark.docker), ("local", None)])
def test_huge_output_does_not_grow_the_harness(backend: str, image_fixture: str | None,
                                               request: pytest.FixtureRequest) -> None:
    image = request.getfixturevalue(image_fixture) if image_fixture else DEFAULT_IMAGE
    out = subprocess.run([sys.executable, "-c", _MEASURE, backend, image], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    grown_mib = int(out.stdout.strip())
    assert grown_mib < 20, f"the harness grew by {grown_mib} MiB for a 100 MB print"
