"""Start the Streamlit explorer (`app.py`) over the store chosen by --db."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from failatlas.cli_support import db_path
from failatlas.errors import MissingDependencyError, StoreError
from failatlas.store import DB_ENV_VAR, resolve_db_path


def app_script() -> Path:
    """Path of app.py, whether FailAtlas runs from a checkout or an installed wheel (found without running it)."""
    spec = importlib.util.find_spec("app")
    if spec is None or spec.origin is None:
        raise StoreError("cannot find the explorer's app.py", hint="reinstall FailAtlas")
    return Path(spec.origin).resolve()


def command(*, port: int = 8501, headless: bool = True, address: str | None = None) -> list[str]:
    """The `streamlit run app.py` command line."""
    cmd = [sys.executable, "-m", "streamlit", "run", str(app_script()), "--server.port", str(port),
           "--server.headless", "true" if headless else "false", "--browser.gatherUsageStats", "false",
           "--server.runOnSave", "false", "--server.fileWatcherType", "none", "--client.toolbarMode", "minimal"]
    if address:
        cmd += ["--server.address", address]
    return cmd


def app_env(db: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """The environment the app runs in: $FAILATLAS_DB set to the store's absolute path."""
    path = resolve_db_path(db) if db is not None else Path(db_path())
    return dict(os.environ, **{DB_ENV_VAR: str(path.resolve())})


def launch(*, port: int = 8501, headless: bool = True, db: str | os.PathLike[str] | None = None,
           address: str | None = None) -> int:
    """Run the explorer in the foreground until interrupted; it opens the store read-only. A missing store is
    not an error: the app says what to run to create one. Returns Streamlit's exit code."""
    if importlib.util.find_spec("streamlit") is None:
        raise MissingDependencyError("streamlit", "app")
    return subprocess.run(command(port=port, headless=headless, address=address), env=app_env(db),
                          check=False).returncode
