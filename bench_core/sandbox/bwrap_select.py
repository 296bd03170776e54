"""Which sandbox kind a command uses when the user names none (`--sandbox auto`, the default): Docker where its
engine answers, else bwrap where it can make a sandbox, said on the console; never `local` without being asked."""

from __future__ import annotations

from collections.abc import Callable

from failatlas.bench_core.sandbox.bwrap_setup import bwrap_problem
from failatlas.core.errors import ConfigError

AUTO = "auto"


def docker_problem() -> str | None:
    """Why the Docker engine cannot be used here (no SDK, no daemon, a dead DOCKER_HOST); None when it answers."""
    try:
        import docker
    except ImportError:
        return "the docker package is not installed"
    try:
        client = docker.from_env(timeout=5)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as exc:  # noqa: BLE001 - any failure to reach the engine means: no Docker here
        return f"{type(exc).__name__}: {str(exc)[:200]}"
    return None


UNISOLATED = ("the agent's code runs as host processes with this user's permissions, unisolated: it can write the "
              "harness's own files (the store, the derived tests' recordings), so a score holds only for a trusted "
              "agent (bench report and bench show mark such runs)")


def resolve_sandbox_kind(kind: str | None, *, say: Callable[[str], None] = lambda _text: None) -> str:
    """The sandbox kind to use for `kind`: itself when named, and for None or 'auto' docker where the engine
    answers, else bwrap where it works (saying so through `say`). Raises ConfigError when neither works: `local`
    isolates nothing and is only used when asked for."""
    if kind == "local":
        say(f"sandbox: local: {UNISOLATED}")
    if kind not in (None, "", AUTO):
        return kind
    docker_why = docker_problem()
    if docker_why is None:
        return "docker"
    bwrap_why = bwrap_problem()
    if bwrap_why is None:
        say(f"sandbox: Docker is not reachable here ({docker_why}); using bwrap sandboxes (namespaces, the host's "
            "system folders read-only, only leased GPUs; see docs/sandbox.md)")
        return "bwrap"
    raise ConfigError(f"no sandbox can be made here: Docker is not reachable ({docker_why}) and bwrap does not work "
                      f"({bwrap_why})",
                      hint="start Docker, or install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap); "
                           "--sandbox local runs agents unisolated, for trusted agents only")
