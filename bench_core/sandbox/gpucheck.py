"""Check on a GPU host that a sandbox sees exactly the GPUs it leased.

    python -m failatlas.bench_core.sandbox.gpucheck [--sandbox local|docker] [--image IMAGE]

Leases one GPU per sandbox (two sandboxes at once when the host has two or more GPUs) from a private
`GpuAllocator`, starts each sandbox (`--sandbox local` by default: GPU hosts often have no Docker), and runs a small
task in it that prints `torch.cuda.device_count()`, the devices' names and UUIDs and `CUDA_VISIBLE_DEVICES`. Passes
(exit 0) when every sandbox sees exactly as many devices as it leased, the UUID `nvidia-smi` gives the leased id,
and two sandboxes never see the same device. Prints one JSON report.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from failatlas.bench_core.sandbox.gpus import GpuAllocator, detect_gpus
from failatlas.bench_core.sandbox.model import SandboxSpec
from failatlas.bench_core.sandbox.protocol import create_sandbox

TASK = """import json, os
import torch
n = torch.cuda.device_count()
devices = [torch.cuda.get_device_properties(i) for i in range(n)]
print(json.dumps({"CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"), "device_count": n,
                  "names": [d.name for d in devices],
                  "uuids": [str(getattr(d, "uuid", "")) for d in devices], "torch": torch.__version__}))
"""


def smi_uuids() -> dict[str, str]:
    """GPU index -> UUID as `nvidia-smi` lists them ({} without nvidia-smi)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return {i.strip(): u.strip() for i, u in (line.split(",", 1) for line in out.splitlines() if "," in line)}


def check(sandbox: str = "local", image: str | None = None) -> dict:
    """Run the check; returns the report (`ok` says whether it passed)."""
    ids = detect_gpus()
    report: dict = {"host_gpus": ids, "sandbox": sandbox, "runs": [], "ok": False}
    if not ids:
        report["problem"] = "no GPU on this host (nvidia-smi -L / CUDA_VISIBLE_DEVICES)"
        return report
    uuids = smi_uuids()
    with tempfile.TemporaryDirectory(prefix="failatlas-gpucheck-") as tmp:
        workspace = Path(tmp) / "task"
        workspace.mkdir()
        (workspace / "check.py").write_text(TASK)
        alloc = GpuAllocator(state_dir=Path(tmp) / "leases")
        leases = [alloc.lease(1, owner=f"gpucheck-{k}") for k in range(min(2, len(ids)))]
        boxes = []
        try:
            for lease in leases:
                fields = {"gpu_ids": list(lease.ids), "memory_mb": 16384, "run_id": f"gpucheck-{lease.ids[0]}"}
                if image:
                    fields["image"] = image
                boxes.append(create_sandbox(sandbox, SandboxSpec(**fields), workspace=workspace))
            for lease, box in zip(leases, boxes, strict=True):  # both sandboxes exist while each one looks
                res = box.exec("python3 check.py", timeout=600)
                seen = json.loads(res.stdout.strip().splitlines()[-1]) if res.success else {}
                report["runs"].append({"leased": list(lease.ids), "expected_uuids": [uuids.get(i) for i in lease.ids],
                                       "seen": seen, "exit": res.returncode, "stderr": res.stderr[-1500:]})
        finally:
            for box in boxes:
                box.close()
            for lease in leases:
                lease.release()
    seen_uuids = [u for run in report["runs"] for u in run["seen"].get("uuids", [])]
    report["ok"] = bool(report["runs"]) and all(
        run["seen"].get("device_count") == len(run["leased"])
        and (not uuids or [u.removeprefix("GPU-") for u in run["seen"].get("uuids", [])]
             == [(e or "").removeprefix("GPU-") for e in run["expected_uuids"]])
        for run in report["runs"]) and len(seen_uuids) == len(set(seen_uuids))
    return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sandbox", default="local", help="sandbox kind (local, docker)")
    parser.add_argument("--image", default=None, help="docker: an image with torch and CUDA")
    args = parser.parse_args(argv)
    report = check(args.sandbox, args.image)
    print(json.dumps(report, indent=2))
    sys.exit(0 if report["ok"] else 1)


if __name__ == "__main__":
    main()
