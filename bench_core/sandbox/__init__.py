"""Sandboxes: where agents' and validators' commands run, with deadlines, limits and a trace of every command.

The API the runner and agents use::

    from failatlas.bench_core.sandbox import (SandboxSpec, create_sandbox, TracedSandbox, GpuAllocator,
                                    cleanup_orphans, SandboxError)

    cleanup_orphans()                                   # reap containers of dead runners (do it at start)
    with GpuAllocator().lease(task.resources.gpus, owner=run_id, wait_s=600) as gpus:
        spec = spec_for_task(task, run_id=run_id, gpu_ids=gpus.ids)   # or SandboxSpec(...)
        events = []
        with TracedSandbox(create_sandbox("docker", spec, workspace=prepared_repo), events.append) as box:
            r = box.exec("python train.py", timeout=600)   # -> ExecResult, never raises for a failed command
            r.returncode, r.stdout, r.timed_out, r.killed_reason   # killed_reason: 'timeout' | 'oom' | 'pids'
            box.write_file("notes.md", "...")               # relative paths are relative to box.workdir
            box.copy_out(box.workdir, host_dir / "final")   # the agent's working copy
        rows = [e.to_row(run_id) for e in events]           # -> the sandbox_commands table

Contract:

- `Sandbox` (protocol): `exec(cmd, *, timeout, cwd=None, env=None, output_limit=1 MiB) -> ExecResult`,
  `read_file(path, *, max_bytes=64 MiB) -> bytes`, `write_file(path, data)`, `copy_in(host_src, dest)`,
  `copy_out(src, host_dest, *, limits=CopyLimits()) -> CopyReport`, `close()` (idempotent; also a context
  manager), attributes `backend`, `spec`, `workdir`. Reading back never trusts the agent's files: `read_file`
  reads a regular file as the sandbox user without following links (SandboxPathError for a folder, FIFO or
  link); `copy_out` stays within `CopyLimits` (per-file and total bytes, entries, depth, a deadline), keeps no
  link that resolves outside the copy, and reports what it left out. A string command runs through
  `spec.shell` (bash -c); a list runs as argv. `cwd` and file paths are relative to `workdir` unless absolute.
  `copy_in`/`copy_out` name the copy's own path, not its parent.
- `create_sandbox(kind, spec, *, workspace)`: kinds by name from the `SANDBOXES` registry ('docker', 'bwrap',
  'local'); `resolve_sandbox_kind('auto')` picks docker where its engine answers, else bwrap (never local).
  The host folder `workspace` is COPIED into `workdir` (docker: a tar stream owned by the sandbox user; local:
  a private temp folder), never bind-mounted: the prepared repository on the host stays pristine for the clean
  re-run, and the agent's copy is read back with `copy_out`. Large read-only data goes in
  `spec.read_only_inputs` instead.
- `ExecResult`: command, returncode (128+signal when killed), stdout/stderr (head and tail kept up to
  `output_limit` bytes each, `truncated` when bytes were dropped), duration_s, timed_out, killed_reason.
- Errors: `SandboxError` (an InfrastructureError: the sandbox is unusable; retry, not the agent's fault),
  `SandboxTimeoutError` (also TimeoutError), `SandboxFileNotFoundError` (also FileNotFoundError),
  `SandboxPathError` (also PermissionError: e.g. writing a read-only input), `GpuUnavailableError`.
- `TracedSandbox(inner, sink, purpose="agent")` wraps any backend and emits one `SandboxEvent` per `exec`;
  `SandboxEvent.to_row(run_id)` matches the `sandbox_commands` table. Use one wrapper per (run, purpose).
- `GpuAllocator(gpu_ids=None, state_dir=None).lease(k, owner=..., wait_s=0) -> GpuLease` (`.ids`,
  `.cuda_visible_devices`, `.release()`); across threads and processes of a host, never two leases on one GPU.
  Docker gets the ids as a device request, local as CUDA_VISIBLE_DEVICES; no ids means no GPU, never all.
- Sandbox kinds (`SandboxKind`, registered in `SANDBOXES`; `sandbox_kind(name)`) carry the lifecycle hooks:
  `prepare(image, say=...)` (docker: build the base image if missing), `clean_orphans(run_id=None,
  include_live=False)` and `list_sandboxes()`, each doing nothing by default. A new kind is its module (a
  `SandboxKind` subclass registered with `@SANDBOXES.register("name")`) plus one import line here.
- `build_base_image(tag, force=False, mirror=None)` builds `DEFAULT_IMAGE` offline;
  `cleanup_orphans(run_id=None, include_live=False)` removes labelled containers whose owner process is dead,
  `cleanup_local_orphans(...)` the same for local sandbox folders.

What each backend enforces is in the docstrings of `docker_sandbox` and `local`, and in docs/sandbox.md.
"""

from failatlas.bench_core.sandbox.bwrap_sandbox import BwrapKind
from failatlas.bench_core.sandbox.bwrap_select import resolve_sandbox_kind
from failatlas.bench_core.sandbox.cleanup import cleanup_orphans, list_sandboxes
from failatlas.bench_core.sandbox.docker_sandbox import DockerKind
from failatlas.bench_core.sandbox.errors import (
    GpuUnavailableError,
    SandboxError,
    SandboxFileNotFoundError,
    SandboxPathError,
    SandboxTimeoutError,
)
from failatlas.bench_core.sandbox.gpus import GpuAllocator, GpuLease, detect_gpus
from failatlas.bench_core.sandbox.image import DEFAULT_PACKAGES, ImageBuild, build_base_image, detect_debian_mirror
from failatlas.bench_core.sandbox.local import LocalKind, cleanup_local_orphans
from failatlas.bench_core.sandbox.model import (
    DEFAULT_IMAGE,
    DEFAULT_OUTPUT_LIMIT,
    DEFAULT_READ_LIMIT,
    CopyCut,
    CopyLimits,
    CopyReport,
    ExecResult,
    KilledReason,
    SandboxSpec,
)
from failatlas.bench_core.sandbox.protocol import SANDBOXES, Sandbox, SandboxKind, create_sandbox, sandbox_kind
from failatlas.bench_core.sandbox.spec import spec_for_task
from failatlas.bench_core.sandbox.tracing import SandboxEvent, TracedSandbox

__all__ = [
    "DEFAULT_IMAGE",
    "DEFAULT_OUTPUT_LIMIT",
    "DEFAULT_READ_LIMIT",
    "DEFAULT_PACKAGES",
    "BwrapKind",
    "CopyCut",
    "CopyLimits",
    "CopyReport",
    "DockerKind",
    "ExecResult",
    "GpuAllocator",
    "GpuLease",
    "GpuUnavailableError",
    "ImageBuild",
    "KilledReason",
    "LocalKind",
    "SANDBOXES",
    "Sandbox",
    "SandboxKind",
    "SandboxError",
    "SandboxEvent",
    "SandboxFileNotFoundError",
    "SandboxPathError",
    "SandboxSpec",
    "SandboxTimeoutError",
    "TracedSandbox",
    "build_base_image",
    "cleanup_local_orphans",
    "cleanup_orphans",
    "create_sandbox",
    "detect_debian_mirror",
    "detect_gpus",
    "list_sandboxes",
    "resolve_sandbox_kind",
    "sandbox_kind",
    "spec_for_task",
]
