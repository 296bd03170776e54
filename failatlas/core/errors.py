"""One error hierarchy for every stage.

Each class also inherits the builtin a caller would naturally catch, so `except ValueError` still works for bad
input and `except TimeoutError` for deadlines. The CLI maps any `FailAtlasError` to one line and `exit_code`.
"""

from __future__ import annotations


class FailAtlasError(Exception):
    """Base of every error FailAtlas raises on purpose. `hint` says what the user can do about it."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint

    def one_line(self) -> str:
        text = str(self)
        return f"{text} ({self.hint})" if self.hint else text


class InputError(FailAtlasError, ValueError):
    """A file, row or field supplied by the user is malformed. The message names file, line or field."""

    exit_code = 2

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 field: str | None = None, hint: str | None = None) -> None:
        where = ""
        if path is not None:
            where = str(path) + (f":{line}" if line is not None else "")
        if field is not None:
            where = f"{where} field '{field}'" if where else f"field '{field}'"
        super().__init__(f"{where}: {message}" if where else message, hint=hint)
        self.path = path
        self.line = line
        self.field = field


class ConfigError(FailAtlasError, ValueError):
    """A setting, flag or environment variable is missing or inconsistent."""

    exit_code = 2


class NotFoundError(FailAtlasError, LookupError):
    """A named thing (task, run, taxonomy, model) does not exist."""

    exit_code = 3


class MissingDependencyError(FailAtlasError, ImportError):
    """An optional dependency is not installed; the message says which extra to install."""

    exit_code = 4

    def __init__(self, module: str, extra: str) -> None:
        super().__init__(
            f"the optional dependency '{module}' is not installed",
            hint=f"install it with: pip install 'failatlas[{extra}]'",
        )


class StoreError(FailAtlasError, RuntimeError):
    """The DuckDB store cannot be opened, migrated or written."""

    exit_code = 5


class StoreLockedError(StoreError):
    """Another process held the store's write lock for longer than the wait allowed."""


class InfrastructureError(FailAtlasError, RuntimeError):
    """Something outside the agent failed (image, Docker daemon, LLM endpoint): retryable, never the agent's fault."""

    exit_code = 6


class HarnessSetupError(InfrastructureError):
    """The harness could not set up its own part of a sandbox (a mount point on the sandbox's root, outside
    anything the agent can write): infrastructure even after the agent's code ran there, never an AgentFaultError."""


class AgentFaultError(FailAtlasError, RuntimeError):
    """A sandbox or judge failed after the agent's code had started in it (a refused or starved exec, a process
    limit, a dead worker, a deadline): what that code can cause, so the agent's failure, never infrastructure."""

    exit_code = 1
