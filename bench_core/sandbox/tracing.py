"""Tracing that wraps any sandbox: one `SandboxEvent` per command, whatever the backend."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from failatlas.bench_core.sandbox.model import (
    DEFAULT_OUTPUT_LIMIT,
    DEFAULT_READ_LIMIT,
    CopyLimits,
    CopyReport,
    ExecResult,
    KilledReason,
)
from failatlas.bench_core.sandbox.output import command_text
from failatlas.bench_core.sandbox.protocol import Sandbox, read_files, write_folder

TAIL_CHARS = 4000

Purpose = Literal["agent", "harness", "validator"]


class SandboxEvent(BaseModel):
    """One command run in a sandbox; fields match the `sandbox_commands` table (plus `run_id` at write time).

    `exit_code` is None when the sandbox failed under the command (the wrapper re-raises the SandboxError).
    """

    model_config = ConfigDict(extra="forbid")

    seq: int
    purpose: str
    command: str
    started_at: datetime
    duration_s: float
    exit_code: int | None
    timed_out: bool
    killed_reason: KilledReason | None
    output_truncated: bool
    stdout_tail: str | None
    stderr_tail: str | None
    provenance: dict | None = None

    def to_row(self, run_id: str) -> dict[str, Any]:
        """A row for `sandbox_commands` (started_at as naive UTC, as DuckDB's TIMESTAMP stores it)."""
        row = self.model_dump()
        row["started_at"] = self.started_at.astimezone(UTC).replace(tzinfo=None)
        return {"run_id": run_id, **row}


class TracedSandbox:
    """Wraps any `Sandbox`; every `exec` emits one `SandboxEvent` to `sink` (then returns the inner result).

    Sequence numbers start at `first_seq` and count per wrapper, so give each purpose of a run its own wrapper
    (the table's key is run_id, purpose, seq). File operations pass through untraced.
    """

    def __init__(self, inner: Sandbox, sink: Callable[[SandboxEvent], None], purpose: str = "agent",
                 *, first_seq: int = 0, tail_chars: int = TAIL_CHARS) -> None:
        self.inner = inner
        self.sink = sink
        self.purpose = purpose
        self.tail_chars = tail_chars
        self._seq = first_seq
        self._lock = threading.Lock()

    @property
    def backend(self) -> str:
        return self.inner.backend

    @property
    def spec(self) -> Any:
        return self.inner.spec

    @property
    def workdir(self) -> str:
        return self.inner.workdir

    def _next_seq(self) -> int:
        with self._lock:
            seq = self._seq
            self._seq += 1
            return seq

    def _tail(self, text: str) -> str:
        return text[-self.tail_chars:] if len(text) > self.tail_chars else text

    def exec(
        self,
        cmd: str | Sequence[str],
        *,
        timeout: float,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
    ) -> ExecResult:
        seq = self._next_seq()
        started_at = datetime.now(UTC)
        t0 = time.monotonic()
        try:
            # the agent's own commands are traced (which processes ran, which wrote what), where the kind can
            result = self.inner.exec(cmd, timeout=timeout, cwd=cwd, env=env, output_limit=output_limit,
                                     trace=self.purpose == "agent")
        except Exception:
            self.sink(SandboxEvent(
                seq=seq, purpose=self.purpose, command=command_text(cmd), started_at=started_at,
                duration_s=time.monotonic() - t0, exit_code=None, timed_out=False, killed_reason=None,
                output_truncated=False, stdout_tail=None, stderr_tail=None,
            ))
            raise
        self.sink(SandboxEvent(
            seq=seq, purpose=self.purpose, command=result.command, started_at=started_at,
            duration_s=result.duration_s, exit_code=result.returncode, timed_out=result.timed_out,
            killed_reason=result.killed_reason, output_truncated=result.truncated,
            stdout_tail=self._tail(result.stdout), stderr_tail=self._tail(result.stderr),
            provenance=result.provenance,
        ))
        return result

    def read_file(self, path: str, *, max_bytes: int = DEFAULT_READ_LIMIT) -> bytes:
        return self.inner.read_file(path, max_bytes=max_bytes)

    def read_files(self, paths: list[str], *, max_bytes: int = DEFAULT_READ_LIMIT) -> list[bytes | Exception]:
        return read_files(self.inner, paths, max_bytes=max_bytes)  # in one step where the inner kind can

    def write_file(self, path: str, data: bytes | str) -> None:
        self.inner.write_file(path, data)

    def write_folder(self, folder: str, files: list[tuple[str, bytes]]) -> None:
        write_folder(self.inner, folder, files)  # in one copy where the inner kind can (`protocol.write_folder`)

    def copy_in(self, host_src: str | Path, dest: str) -> None:
        self.inner.copy_in(host_src, dest)

    def copy_out(self, src: str, host_dest: str | Path, *, limits: CopyLimits | None = None) -> CopyReport:
        return self.inner.copy_out(src, host_dest, limits=limits)

    def close(self) -> None:
        self.inner.close()

    def __enter__(self) -> TracedSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
