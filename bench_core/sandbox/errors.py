"""Errors the sandbox layer raises. A failed command is never one of these: it is an `ExecResult`."""

from __future__ import annotations

from failatlas.core.errors import FailAtlasError, HarnessSetupError, InfrastructureError, NotFoundError


class SandboxError(InfrastructureError):
    """The sandbox cannot be used (daemon down, image missing, container gone): not the agent's fault."""


class SandboxSetupError(SandboxError, HarnessSetupError):
    """bwrap could not make a mount the harness needs at a path the agent cannot reach (the root's staging folder,
    a data input's mount point): the harness's failure whatever the agent did."""


class SandboxTimeoutError(SandboxError, TimeoutError):
    """A sandbox operation other than a command (start, copy, kill) did not finish in time."""


class SandboxFileNotFoundError(NotFoundError, FileNotFoundError):
    """A path asked for in the sandbox does not exist (a caller's mistake, not an infrastructure failure)."""


class GpuUnavailableError(InfrastructureError):
    """Not enough free GPUs to lease, within the wait allowed."""


class SandboxPathError(FailAtlasError, PermissionError):
    """A sandbox path cannot be used as asked (a read-only mount, a folder where a file was expected)."""
