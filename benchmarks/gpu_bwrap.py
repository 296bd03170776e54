"""GPU proof of the bwrap sandbox (issue 33), for a GPU host without Docker, such as the machine behind the `device`
tool (see docs/gpu.md for how it was run there and what it printed).

    FAILATLAS_BWRAP=/path/to/bwrap python3 benchmarks/gpu_bwrap.py --out DIR

For each sandbox kind (bwrap, then local on the same host and card, for the overhead), in a fresh store:
`failatlas tasks import-mini`, `bench run` of the mini-suite's GPU task `mini-mlp-bf16` by `gold` and `null`, then
`bench score` with no `--sandbox` (scoring re-runs each run in the kind it ran in); the bwrap `null` run is started
without `--sandbox`, so the automatic choice (no Docker here) and its console line show. Then, in sandboxes of the
task's own spec (`spec_for_task`) with one leased GPU and with none: the device nodes, `nvidia-smi -L`, torch's
devices and a bf16 matmul on the GPU, a connection to a service on the host's 127.0.0.1 and on its address, and
writes outside the working copy. On a host of two GPUs or more, `gpucheck` runs two sandboxes at once, one GPU each.
Writes DIR/gpu_bwrap.json and prints it. With `--overhead N`, only the experiment's time: N runs of
`python3 run.py` on the reference tree with one GPU in bwrap pinned to one core (as the task's runs are), bwrap on
every core, and local; DIR/gpu_bwrap_overhead.json.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

TASK = os.environ.get("GPU_BWRAP_TASK", "mini-mlp-bf16")  # another task only to try the script on a CPU host
PROBE = r"""
import json, os, socket, subprocess, sys, time
out = {"dev_nvidia": sorted(n for n in os.listdir("/dev") if n.startswith("nvidia")),
       "proc_gpus": sorted(os.listdir("/proc/driver/nvidia/gpus")) if os.path.isdir("/proc/driver/nvidia/gpus") else [],
       "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES")}
try:
    smi = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    out["nvidia_smi"] = (smi.stdout or smi.stderr).strip().splitlines()[:4]
except OSError as exc:
    out["nvidia_smi"] = str(exc)
try:
    import torch
    out["torch_devices"] = [[torch.cuda.get_device_name(i), str(torch.cuda.get_device_properties(i).uuid)]
                            for i in range(torch.cuda.device_count())]
except ImportError:
    out["torch_devices"] = "no torch"
if out["torch_devices"] and out["torch_devices"] != "no torch":
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(20): b = a @ a
    torch.cuda.synchronize(); out["bf16_matmul_tflops"] = round(20 * 2 * 4096**3 / (time.perf_counter() - t) / 1e12, 1)
net = {}
for host, port in json.loads(sys.argv[1]):
    try:
        socket.create_connection((host, port), timeout=3).close(); net[f"{host}:{port}"] = "CONNECTED"
    except OSError as exc:
        net[f"{host}:{port}"] = f"refused: {exc.strerror or exc}"
out["network"] = net
writes = {}
for path in ["/etc/failatlas-probe", "/usr/failatlas-probe", "/opt/failatlas-probe", sys.argv[2] + "/failatlas-probe"]:
    try:
        open(path, "w").write("x"); writes[path] = "WRITTEN"; os.unlink(path)
    except OSError as exc:
        writes[path] = f"refused: {exc.strerror}"
out["writes"] = writes
print("PROBE " + json.dumps(out))
"""


def sh(argv: list[str], env: dict | None = None, timeout: int = 900) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    res = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)
    return time.perf_counter() - started, res


def cli(db: Path, *args: str) -> dict:
    seconds, res = sh([sys.executable, "-c", "from failatlas.cli import main; main()", "--db", str(db), *args])
    return {"argv": "failatlas " + " ".join(args), "seconds": round(seconds, 2), "exit": res.returncode,
            "output": (res.stdout + res.stderr).strip()[-1500:]}


def run_kind(kind: str, root: Path) -> dict:
    """gold and null on the task under `kind` in a fresh store, then scoring with each run's own kind."""
    db = root / f"{kind}.duckdb"
    steps = [cli(db, "tasks", "import-mini")]
    steps.append(cli(db, "bench", "run", "--agent", "gold", "--task", TASK, "--sandbox", kind))
    null_args = ["bench", "run", "--agent", "null", "--task", TASK]
    steps.append(cli(db, *(null_args if kind == "bwrap" else [*null_args, "--sandbox", kind])))
    steps.append(cli(db, "bench", "score"))
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    runs = {}
    for run in rows(con, "SELECT id, agent, status, sandbox, infra_error FROM runs ORDER BY agent"):
        run["validation"] = rows(con, "SELECT * FROM validations WHERE run_id = ?", run["id"])
        run["judgements"] = rows(con, "SELECT judge, status, passed, score, reason FROM judgements WHERE run_id = ?",
                                 run["id"])
        run["commands"] = rows(con, "SELECT purpose, command, exit_code, duration_s, killed_reason FROM "
                               "sandbox_commands WHERE run_id = ? ORDER BY purpose, seq", run["id"])
        runs[run["agent"]] = run
    con.close()
    return {"steps": steps, "runs": runs}


def rows(con, sql: str, *args) -> list[dict]:  # noqa: ANN001
    """The rows of `sql` as dicts of short strings; an error (a schema mid-change, say) as one row saying so."""
    try:
        cur = con.execute(sql, list(args))
        names = [d[0] for d in cur.description]
        return [{n: str(v)[:400] for n, v in zip(names, row, strict=True)} for row in cur.fetchall()]
    except Exception as exc:  # noqa: BLE001 - the report says what could not be read, and goes on
        return [{"error": f"{type(exc).__name__}: {exc}"[:400]}]


def serve(address: str) -> tuple[socket.socket, list]:
    server = socket.socket()
    server.bind((address, 0))
    server.listen(8)
    seen: list = []

    def accept() -> None:
        while True:
            try:
                conn, peer = server.accept()
            except OSError:
                return
            seen.append(peer[0])
            conn.close()

    threading.Thread(target=accept, daemon=True).start()
    return server, seen


def probes(kind: str, root: Path) -> dict:
    """The probe in sandboxes of the task's spec: one GPU leased, then none; host services listening meanwhile."""
    from failatlas.bench_core.sandbox import GpuAllocator, create_sandbox, spec_for_task
    from failatlas.bench_core.suites import load_suite

    task = next(t for t in load_suite("failatlas-mini") if t.id == TASK)
    host_ip = subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split()[:1] or ["127.0.0.1"]
    servers = [serve(a) for a in ["127.0.0.1", *host_ip]]
    targets = json.dumps([s.getsockname() for s, _ in servers])
    workspace = root / f"probe-{kind}"
    workspace.mkdir()
    (workspace / "probe.py").write_text(PROBE)
    out = {}
    alloc = GpuAllocator(state_dir=root / f"leases-{kind}")
    for label, count in (("one_gpu_leased", min(1, len(alloc.gpu_ids))), ("no_gpu_leased", 0)):
        with alloc.lease(count, owner=f"probe-{kind}") as lease:
            sized = task.model_copy(update={"resources": task.resources.model_copy(update={"gpus": len(lease.ids)})})
            spec = spec_for_task(sized, run_id=f"probe-{kind}-{label}", gpu_ids=lease.ids)
            box = create_sandbox(kind, spec, workspace=workspace)
            try:
                res = box.exec(["python3", "probe.py", targets, str(root)], timeout=300)
                lines = [ln for ln in res.stdout.splitlines() if ln.startswith("PROBE ")]
                out[label] = {"leased": lease.ids, "exit": res.returncode, "seconds": round(res.duration_s, 2),
                              "gpu_note": getattr(box, "gpu_note", ""),
                              "probe": json.loads(lines[-1][6:]) if lines else None,
                              "stderr": res.stderr[-800:] if not lines else ""}
                latencies = [box.exec("true", timeout=30).duration_s for _ in range(20)]
                out[label]["exec_true_ms_median"] = round(sorted(latencies)[10] * 1000, 1)
            finally:
                box.close()
    out["host_services_saw"] = [seen for _, seen in servers]
    for server, _ in servers:
        server.close()
    return out


def overhead(root: Path, repeats: int) -> dict:
    """The task's experiment (`python3 run.py` on the reference tree) with one GPU, `repeats` times in each of: bwrap
    pinned to the cores the task's runs get (1), bwrap on every core, local (no CPU limit); seconds per run."""
    from failatlas.bench_core.prepare import reference_workspace
    from failatlas.bench_core.sandbox import GpuAllocator, SandboxSpec, create_sandbox
    from failatlas.bench_core.suites import load_suite

    task = next(t for t in load_suite("failatlas-mini") if t.id == TASK)
    tree = reference_workspace(task, root / "reference")
    cores = len(os.sched_getaffinity(0))
    out: dict = {"cores": cores}
    alloc = GpuAllocator(state_dir=root / "leases-overhead")
    with alloc.lease(min(1, len(alloc.gpu_ids)), owner="overhead") as lease:
        for label, kind, cpus in (("bwrap_1_core", "bwrap", 1.0), ("bwrap_all_cores", "bwrap", float(cores)),
                                  ("local", "local", 1.0)):
            spec = SandboxSpec(gpu_ids=lease.ids, cpus=cpus, memory_mb=8192, run_id=f"overhead-{label}")
            with create_sandbox(kind, spec, workspace=tree) as box:
                times = []
                for _ in range(repeats):
                    res = box.exec(task.run.command, timeout=300)
                    times.append(round(res.duration_s, 2) if res.success else f"exit {res.returncode}: "
                                 f"{res.stderr[-300:]}")
            out[label] = times
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("."))
    parser.add_argument("--overhead", type=int, default=0, metavar="N",
                        help="only time the experiment N times per sandbox setting (overhead against local)")
    parser.add_argument("--kinds", default="bwrap,local", help="sandbox kinds to run, comma-separated")
    args = parser.parse_args()
    from failatlas.bench_core.sandbox.bwrap_setup import bwrap_binary, bwrap_problem
    from failatlas.bench_core.sandbox.gpucheck import check, smi_uuids
    from failatlas.bench_core.sandbox.gpus import detect_gpus

    report: dict = {"host": {"gpus": smi_uuids(), "detected": detect_gpus(), "bwrap": bwrap_binary(),
                             "bwrap_problem": bwrap_problem(), "uid": os.geteuid(), "python": sys.version.split()[0],
                             "kernel": os.uname().release}}
    name = "gpu_bwrap_overhead.json" if args.overhead else "gpu_bwrap.json"
    with tempfile.TemporaryDirectory(prefix="gpu-bwrap-") as tmp:
        root = Path(tmp)
        os.chmod(root, 0o755)
        if args.overhead:
            report["overhead_s"] = overhead(root, args.overhead)
        else:
            for kind in args.kinds.split(","):
                started = time.perf_counter()
                report[kind] = run_kind(kind, root)
                report[kind]["probes"] = probes(kind, root)
                report[kind]["seconds"] = round(time.perf_counter() - started, 1)
                print(json.dumps({kind: report[kind]}, indent=1, default=str), flush=True)
            if len(detect_gpus()) >= 2 and args.kinds == "bwrap,local":
                report["two_sandboxes_one_gpu_each"] = {kind: check(kind) for kind in ("bwrap", "local")}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / name).write_text(json.dumps(report, indent=1, default=str))
    print(json.dumps({k: v for k, v in report.items() if k in ("host", "two_sandboxes_one_gpu_each", "overhead_s")},
                     indent=1, default=str))


if __name__ == "__main__":
    main()
