"""Start the Streamlit app (`app.py`) over the store chosen by --db."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from failatlas.cli_support import db_path
from failatlas.errors import MissingDependencyError


def app_script() -> Path:
    """Path of app.py, whether FailAtlas runs from a checkout or an installed wheel."""
    import app as app_module

    return Path(app_module.__file__).resolve()


def launch(*, port: int = 8501, headless: bool = True) -> None:
    """Run `streamlit run app.py` in the foreground; the app opens the store read-only."""
    try:
        import streamlit  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError("streamlit", "app") from exc
    env = dict(os.environ, FAILATLAS_DB=str(Path(db_path()).resolve()))
    cmd = [sys.executable, "-m", "streamlit", "run", str(app_script()), "--server.port", str(port),
           "--server.headless", "true" if headless else "false", "--browser.gatherUsageStats", "false"]
    subprocess.run(cmd, env=env, check=False)
