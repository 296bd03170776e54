"""The sandbox protocol and the registry of backends by name."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from failatlas.bench_core.sandbox.model import DEFAULT_OUTPUT_LIMIT, ExecResult, SandboxSpec

from failatlas.core.errors import ConfigError


@runtime_checkable
class Sandbox(Protocol):
    """An isolated place to run an agent's commands.

    `workdir` is where the working copy lives as commands see it; relative paths given to the file methods are
    relative to it. `close()` is idempotent, and a sandbox is a context manager that closes on exit.
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
    ) -> ExecResult: ...

    def read_file(self, path: str) -> bytes: ...

    def write_file(self, path: str, data: bytes | str) -> None: ...

    def copy_in(self, host_src: str | Path, dest: str) -> None: ...

    def copy_out(self, src: str, host_dest: str | Path) -> None: ...

    def close(self) -> None: ...

    def __enter__(self) -> Sandbox: ...

    def __exit__(self, *exc: object) -> None: ...


SandboxFactory = Callable[..., Sandbox]

_BACKENDS: dict[str, Callable[[], SandboxFactory]] = {}


def register_backend(name: str, loader: Callable[[], SandboxFactory]) -> None:
    """Register a backend by name. `loader` returns the factory `(spec, *, workspace) -> Sandbox`; it is
    called only when the backend is first used, so heavy imports (docker) stay out of unrelated commands."""
    _BACKENDS[name] = loader


def backend_names() -> list[str]:
    return sorted(_BACKENDS)


def create_sandbox(backend: str, spec: SandboxSpec, *, workspace: str | Path | None = None) -> Sandbox:
    """Start a sandbox of the named backend ('docker' or 'local') whose working copy starts as `workspace`.

    The host folder `workspace` is copied in (never mounted), so the agent cannot change it; read the agent's
    working copy back with `copy_out(sandbox.workdir, dest)`. None starts an empty working copy.
    Raises ConfigError for an unknown backend, SandboxError when the sandbox cannot start.
    """
    try:
        loader = _BACKENDS[backend]
    except KeyError:
        raise ConfigError(
            f"unknown sandbox backend {backend!r}", hint=f"choose one of: {', '.join(backend_names())}"
        ) from None
    if workspace is not None and not Path(workspace).is_dir():
        raise ConfigError(f"workspace {workspace} is not a folder")
    return loader()(spec, workspace=Path(workspace) if workspace is not None else None)


def _docker_loader() -> SandboxFactory:
    from failatlas.bench_core.sandbox.docker_sandbox import DockerSandbox

    return DockerSandbox.start


def _local_loader() -> SandboxFactory:
    from failatlas.bench_core.sandbox.local import LocalSandbox

    return LocalSandbox.start


register_backend("docker", _docker_loader)
register_backend("local", _local_loader)
