"""The sandbox protocol, sandbox kinds with their lifecycle hooks, and the registry of kinds by name."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from failatlas.bench_core.sandbox.model import (
    DEFAULT_OUTPUT_LIMIT,
    DEFAULT_READ_LIMIT,
    CopyLimits,
    CopyReport,
    ExecResult,
    SandboxSpec,
)
from failatlas.core.errors import ConfigError
from failatlas.core.registry import Registry


@runtime_checkable
class Sandbox(Protocol):
    """An isolated place to run an agent's commands.

    `workdir` is where the working copy lives as commands see it; relative paths given to the file methods are
    relative to it. `exec(..., trace=True)` records the command's process and file events where the kind can
    (`ExecResult.provenance`; `provenance.py`), and says why where it cannot. `close()` is idempotent, and a
    sandbox is a context manager that closes on exit.

    Reading back is the agent's files, so it is bounded and never privileged: `read_file` returns at most
    `max_bytes` bytes of a regular file read as the sandbox user, and raises SandboxPathError (not an
    infrastructure error) for a folder, FIFO or link where a file should be; `copy_out` copies within `limits`,
    keeps no link that resolves outside the copy, and returns a `CopyReport` of what it left out.

    Optional: `open_channel(cmd, *, timeout, cwd=None, env=None, limit=...)` starts a command with its stdin and
    stdout held open and returns a `channel.Channel` (Docker has it: one attached exec instead of a daemon call per
    message); callers test for it with `hasattr` and fall back to the methods above. `write_folder(folder, files)`
    creates a folder holding files in one step, and `read_files(paths, max_bytes=...)` reads several files in one
    step (`write_folder` and `read_files` below use them where a kind has them).
    """

    backend: str
    spec: SandboxSpec
    workdir: str

    def exec(
        self,
        cmd: str | Sequence[str],
        *,
        timeout: float,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
        trace: bool = False,
    ) -> ExecResult: ...

    def read_file(self, path: str, *, max_bytes: int = DEFAULT_READ_LIMIT) -> bytes: ...

    def write_file(self, path: str, data: bytes | str) -> None: ...

    def copy_in(self, host_src: str | Path, dest: str) -> None: ...

    def copy_out(self, src: str, host_dest: str | Path, *, limits: CopyLimits | None = None) -> CopyReport: ...

    def close(self) -> None: ...

    def __enter__(self) -> Sandbox: ...

    def __exit__(self, *exc: object) -> None: ...


class SandboxKind:
    """A kind of sandbox (`docker`, `local`, ...): how to start one, and its lifecycle hooks.

    Subclass it, override `start` and whichever hooks the kind needs (they default to doing nothing), and register
    the subclass with `@SANDBOXES.register("name")` in the kind's own module; `sandbox/__init__.py` imports that
    module. Code outside the kind's module never tests the kind's name: it calls the hooks.
    """

    name: str = ""

    def start(self, spec: SandboxSpec, *, workspace: Path | None) -> Sandbox:
        """Start a sandbox whose working copy starts as a copy of `workspace` (None: empty)."""
        raise NotImplementedError

    def prepare(self, image: str | None = None, *, say: Callable[[str], None] = lambda _text: None) -> None:
        """Make the kind ready to start sandboxes from `image` (e.g. build or check it), saying what it does."""
        say(f"{self.name} sandboxes: no image needed")

    def clean_orphans(self, *, run_id: str | None = None, include_live: bool = False) -> list[str]:
        """Remove sandboxes whose owner process has died (all with `include_live`), optionally only those of
        `run_id`; returns what was removed. Raises SandboxError when the kind's engine is unreachable."""
        return []

    def root(self, spec: SandboxSpec) -> str:
        """What a sandbox of `spec` runs on, as a run records it: `image NAME` (the default), `host` (the host's own
        system folders), or `root filesystem PATH`. Raises nothing."""
        return f"image {spec.image}"

    def list_sandboxes(self) -> list[dict[str, str]]:
        """This kind's live sandboxes: name, status, run_id, owner_pid, owner_alive."""
        return []


SANDBOXES: Registry[SandboxKind] = Registry("sandbox")


def sandbox_kind(name: str) -> SandboxKind:
    """The registered sandbox kind `name`. Raises ConfigError naming the known kinds."""
    return SANDBOXES.create(name)


def write_folder(sandbox: Sandbox, folder: str, files: list[tuple[str, bytes]]) -> None:
    """Create `folder` (relative to the working copy; its parent exists) holding `files` (names and contents, in
    this order): in one copy where the kind can (Docker: instead of a failed copy, a `mkdir` and a copy per file),
    else a `write_file` each."""
    if any(not name or "/" in name or name in (".", "..") for name, _data in files):
        raise ValueError(f"file names, not paths, are written into {folder}")
    at_once = getattr(sandbox, "write_folder", None)
    if at_once is not None:
        at_once(folder, files)
        return
    for name, data in files:
        sandbox.write_file(f"{folder}/{name}", data)


def read_files(sandbox: Sandbox, paths: list[str], *, max_bytes: int = DEFAULT_READ_LIMIT
               ) -> list[bytes | Exception]:
    """Each of `paths` as `sandbox.read_file` reads it: its bytes, or the error it raises for that file (missing, or
    not a regular file the user can read: FileNotFoundError, PermissionError); in one step where
    the kind can (Docker: one command instead of one per file), else a `read_file` each."""
    at_once = getattr(sandbox, "read_files", None)
    if at_once is not None:
        return at_once(paths, max_bytes=max_bytes)
    out: list[bytes | Exception] = []
    for path in paths:
        try:
            out.append(sandbox.read_file(path, max_bytes=max_bytes))
        except (FileNotFoundError, LookupError, PermissionError) as exc:  # missing; a folder, FIFO or link there
            out.append(exc)
    return out


def create_sandbox(backend: str, spec: SandboxSpec, *, workspace: str | Path | None = None) -> Sandbox:
    """Start a sandbox of the named kind (`SANDBOXES.names()`) whose working copy starts as `workspace`.

    The host folder `workspace` is copied in (never mounted), so the agent cannot change it; read the agent's
    working copy back with `copy_out(sandbox.workdir, dest)`. None starts an empty working copy.
    Raises ConfigError for an unknown kind, SandboxError when the sandbox cannot start.
    """
    kind = sandbox_kind(backend)
    if workspace is not None and not Path(workspace).is_dir():
        raise ConfigError(f"workspace {workspace} is not a folder")
    return kind.start(spec, workspace=Path(workspace) if workspace is not None else None)
