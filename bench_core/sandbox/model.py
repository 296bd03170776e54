"""Typed values at the sandbox boundary: what to start (`SandboxSpec`), what a command did (`ExecResult`), how much
a copy out of a sandbox may take (`CopyLimits`) and what it left out (`CopyReport`)."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from failatlas.bench_core.sandbox.policy import NetworkPolicy, as_policy, check_host
from failatlas.bench_core.tasks.data import check_name, data_target, data_var

DEFAULT_IMAGE = "failatlas/sandbox:bookworm-v4"  # v3: strace (provenance); v4: distutils without setuptools
VENV_TARGET = "/failatlas-env"  # where a task environment built as a venv is seen (venvs.py)
DEFAULT_OUTPUT_LIMIT = 1024 * 1024
DEFAULT_READ_LIMIT = 64 * 1024 * 1024
MAX_CUT_RECORDS = 200

KilledReason = Literal["timeout", "oom", "pids"]


class SandboxSpec(BaseModel):
    """Everything needed to start a sandbox. Limits apply to the whole sandbox, not to one command."""

    model_config = ConfigDict(extra="forbid")

    image: str = DEFAULT_IMAGE
    workdir: str = "/workspace"
    cpus: float = Field(default=1.0, gt=0)
    memory_mb: int = Field(default=2048, ge=64)
    pids_limit: int = Field(default=256, ge=8)
    network: NetworkPolicy = Field(default="none", description="none | registries | full (true: full)")
    allow_hosts: list[str] = Field(default_factory=list, description="registries: the host names allowed")
    ca_bundle: str | None = Field(default=None, description="host CA bundle given to the sandbox with network")
    upstream_proxy: str | None = Field(default=None, description="registries: the host's proxy, chained to")
    network_env_per_command: bool = Field(
        default=False, description="give the proxy and CA variables to each command instead of the container "
        "(an image committed from the sandbox then carries none of them)")
    gpu_ids: list[str] = Field(default_factory=list, description="leased from a GpuAllocator, never 'all'")
    read_only_inputs: dict[str, str] = Field(
        default_factory=dict, description="host path -> sandbox path, mounted read-only"
    )
    data: dict[str, str] = Field(
        default_factory=dict, description="data input name -> host path, mounted read-only at /data/NAME in this "
        "sandbox and in every sandbox started from a copy of this spec (re-runs, judges): tasks/data.py")
    env_dir: str | None = Field(
        default=None, description="a task environment built as a venv (`venvs.py`): its host folder, mounted "
        "read-only at VENV_TARGET with its bin first on PATH (bwrap only)")
    env: dict[str, str] = Field(default_factory=dict)
    labels: dict[str, str] = Field(default_factory=dict)
    run_id: str | None = Field(default=None, description="recorded as the label failatlas.run_id")
    user: str = "agent"
    shell: list[str] = Field(default_factory=lambda: ["/bin/bash", "-c"], description="runs string commands")
    tmp_mb: int = Field(default=512, ge=1, description="size of the /tmp tmpfs (counts against memory)")
    shm_mb: int = Field(default=256, ge=1)
    disk_mb: int | None = Field(
        default=None, description="writable-layer quota; only storage drivers with quotas support it"
    )
    read_only_root: bool = Field(default=False, description="root filesystem read-only but workdir and /tmp")
    trace_processes: bool = Field(
        default=False, description="the agent's commands may be traced (`provenance.py`): a Docker sandbox then "
        "gets the SETUID and SETGID capabilities, for its root tracer to drop to the sandbox user")

    @field_validator("network", mode="before")
    @classmethod
    def _policy(cls, v: Any) -> str:
        return as_policy(v)

    @field_validator("allow_hosts")
    @classmethod
    def _hosts(cls, v: list[str]) -> list[str]:
        return [check_host(h) for h in v]

    @property
    def has_network(self) -> bool:
        return self.network != "none"

    @field_validator("workdir")
    @classmethod
    def _absolute(cls, v: str) -> str:
        if not v.startswith("/"):
            raise ValueError("workdir must be an absolute path")
        return str(PurePosixPath(v))

    @field_validator("read_only_inputs")
    @classmethod
    def _absolute_targets(cls, v: dict[str, str]) -> dict[str, str]:
        for target in v.values():
            if not target.startswith("/"):
                raise ValueError(f"sandbox path {target!r} of a read-only input must be absolute")
        return v

    @field_validator("env_dir")
    @classmethod
    def _env_dir(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith("/"):
            raise ValueError(f"host path {v!r} of the task environment must be absolute")
        return v

    @field_validator("data")
    @classmethod
    def _data(cls, v: dict[str, str]) -> dict[str, str]:
        for name, host in v.items():
            check_name(name, field="data input")
            if not host.startswith("/"):
                raise ValueError(f"host path {host!r} of data input {name!r} must be absolute")
        return v

    def mounts(self) -> list[tuple[str, str]]:
        """Every read-only mount as (host path, sandbox path): the read-only inputs, the data inputs, then the
        task environment."""
        return [*self.read_only_inputs.items(), *((host, data_target(name)) for name, host in self.data.items()),
                *([(self.env_dir, VENV_TARGET)] if self.env_dir else [])]

    def venv_env(self, path: str) -> dict[str, str]:
        """The variables that put the task environment first, on a PATH of `path` (none without one)."""
        if not self.env_dir:
            return {}
        return {"PATH": f"{VENV_TARGET}/bin:{path}", "VIRTUAL_ENV": VENV_TARGET}

    def data_env(self) -> dict[str, str]:
        """`$FAILATLAS_DATA_NAME` of each data input, where a sandbox that mounts it shows it."""
        return {data_var(name): data_target(name) for name in self.data}

    @field_validator("gpu_ids")
    @classmethod
    def _no_all(cls, v: list[str]) -> list[str]:
        if any(g.strip().lower() in ("all", "") for g in v):
            raise ValueError("gpu_ids must name devices (lease them from a GpuAllocator), never 'all'")
        return v


class ExecResult(BaseModel):
    """What one command did. A non-zero exit, a timeout or a kill are all results, not exceptions.

    `stdout`/`stderr` keep the head and the tail of each stream up to the output limit; `truncated` says bytes
    were dropped from the middle of either. `killed_reason` says why the sandbox stopped the command:
    'timeout' (deadline), 'oom' (memory limit) or 'pids' (process-count limit); None when it ended by itself.
    """

    model_config = ConfigDict(extra="forbid")

    command: str
    returncode: int | None
    stdout: str = ""
    stderr: str = ""
    truncated: bool = False
    duration_s: float
    timed_out: bool = False
    killed_reason: KilledReason | None = None
    # the command's process and file events (`provenance.py`) when it ran traced; `{"unavailable": why}` when it
    # was asked for and could not be recorded; None when it was not asked for
    provenance: dict | None = None

    @property
    def success(self) -> bool:
        return self.returncode == 0 and not self.timed_out and self.killed_reason is None


class CopyLimits(BaseModel):
    """Bounds on one `copy_out`, so that what an agent leaves in its working copy (sparse files of terabytes,
    millions of files, deep nesting) costs the harness bounded time, memory and disk. What they leave out is
    recorded in the `CopyReport`."""

    model_config = ConfigDict(extra="forbid")

    max_file_bytes: int = Field(default=32 * 1024 * 1024, ge=0, description="a larger file is not copied")
    max_total_bytes: int = Field(default=512 * 1024 * 1024, ge=0,
                                 description="file bytes in all; the copy stops at the file that would pass it")
    max_entries: int = Field(default=100_000, ge=1, description="files, folders and links; the copy stops past it")
    max_depth: int = Field(default=64, ge=1, description="deeper entries are not copied")
    deadline_s: float = Field(default=300.0, gt=0, description="the copy stops when it passes")
    skip_top: tuple[str, ...] = Field(default=(), description="top-level names not copied and not counted: the "
                                      "harness's own folders in a working copy (issue 52, R5: its .git)")


class CopyCut(BaseModel):
    """One entry a copy left out, and why."""

    path: str = Field(description="relative to the copied path; '' is the copied path itself")
    reason: str
    size: int | None = None

    def line(self) -> str:
        size = f" ({self.size} bytes)" if self.size is not None else ""
        return f"{self.path or '.'}{size}: {self.reason}"


class CopyReport(BaseModel):
    """What one `copy_out` copied, what it left out (the first `MAX_CUT_RECORDS` entries, and how many more) and
    why it stopped early, if it did."""

    files: int = 0
    bytes: int = 0
    cut: list[CopyCut] = Field(default_factory=list)
    more_cut: int = 0
    stopped: str | None = None
    over_total: bool = Field(default=False, description="the copy stopped at `CopyLimits.max_total_bytes`")

    def add_cut(self, path: str, reason: str, size: int | None = None) -> None:
        if len(self.cut) < MAX_CUT_RECORDS:
            self.cut.append(CopyCut(path=path, reason=reason, size=size))
        else:
            self.more_cut += 1

    def lines(self) -> list[str]:
        """The report in words, one line per cut, for a run's record."""
        out = [c.line() for c in self.cut]
        if self.more_cut:
            out.append(f"... and {self.more_cut} more entries left out")
        if self.stopped:
            out.append(f"copy stopped: {self.stopped}")
        return out
