"""Start the Streamlit explorer (`app.py`) over the store chosen by --db."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
from pathlib import Path

from failatlas.core.cli import db_path
from failatlas.core.errors import ConfigError, MissingDependencyError, StoreError
from failatlas.core.store import DB_ENV_VAR, resolve_db_path

# Loopback: a sandbox, a container or another machine cannot reach the app (it shows tasks' ground truth).
DEFAULT_ADDRESS = "127.0.0.1"


def app_script() -> Path:
    """Path of the explorer's Streamlit script inside the package (found without running it), so that an installed
    wheel needs no top-level `app` module."""
    spec = importlib.util.find_spec("failatlas.appdata.main")
    if spec is None or spec.origin is None:
        raise StoreError("cannot find the explorer's script failatlas/appdata/main.py", hint="reinstall FailAtlas")
    return Path(spec.origin).resolve()


def command(*, port: int = 8501, headless: bool = True, address: str | None = DEFAULT_ADDRESS) -> list[str]:
    """The `streamlit run app.py` command line; the server listens on `address` only (None: 127.0.0.1). Raises
    ConfigError for an empty address."""
    address = DEFAULT_ADDRESS if address is None else address
    if not address.strip():
        raise ConfigError("the app's --address is empty", hint=f"use {DEFAULT_ADDRESS}, or 0.0.0.0 for every network")
    # Streamlit's command line, after the pages' modules are imported (failatlas/appdata/serve.py)
    return [sys.executable, "-m", "failatlas.appdata.serve", "run", str(app_script()), "--server.port", str(port),
            "--server.address", address.strip(),
            "--server.headless", "true" if headless else "false", "--browser.gatherUsageStats", "false",
            "--server.runOnSave", "false", "--server.fileWatcherType", "none", "--client.toolbarMode", "minimal",
            # Streamlit takes the page modules beside main.py (appdata/pages/) for a multipage app's pages
            "--client.showSidebarNavigation", "false"]


def app_env(db: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """The environment the app runs in: $FAILATLAS_DB set to the store's absolute path."""
    path = resolve_db_path(db) if db is not None else Path(db_path())
    return dict(os.environ, **{DB_ENV_VAR: str(path.resolve())})


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: the kernel sends the child SIGTERM when the launcher dies, even by SIGKILL."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def launch(*, port: int = 8501, headless: bool = True, db: str | os.PathLike[str] | None = None,
           address: str | None = DEFAULT_ADDRESS) -> int:
    """Run the explorer in the foreground until interrupted; it reads the store in short read-only connections,
    writes only what a person does in it (labels, taxonomy edits), and listens on `address` (this machine only
    by default: its pages show tasks' ground truth). A missing store is not an error: the app says what to run
    to create one. Stopping the launcher (Ctrl-C, SIGTERM, SIGHUP, or killing
    it on Linux) stops the Streamlit server too, so no server is left holding the port. Returns Streamlit's
    exit code."""
    if importlib.util.find_spec("streamlit") is None:
        raise MissingDependencyError("streamlit", "app")
    child = subprocess.Popen(command(port=port, headless=headless, address=address), env=app_env(db),
                             preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)  # noqa: PLW1509

    def stop(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP) if hasattr(signal, sig.name)}
    try:
        return child.wait()
    except (KeyboardInterrupt, SystemExit):
        return _stop(child)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if child.poll() is None:
            _stop(child)


def _stop(child: subprocess.Popen, grace: float = 10.0) -> int:
    """Ask the server to stop, then make it."""
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    return child.returncode
