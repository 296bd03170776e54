"""`failatlas app`: the command line it runs and the environment that names the store."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from failatlas.app_launcher import app_env, app_script, command
from failatlas.core.errors import ConfigError
from tests.app.server import alive, children, free_port, start, wait_healthy

ROOT = Path(__file__).resolve().parents[2]


def test_command_runs_this_checkouts_app_headless() -> None:
    cmd = command(port=8765)
    assert cmd[:4] == [sys.executable, "-m", "failatlas.appdata.serve", "run"]
    assert Path(cmd[4]) == app_script() and app_script().name == "main.py"
    assert cmd[cmd.index("--server.port") + 1] == "8765"
    assert cmd[cmd.index("--server.headless") + 1] == "true"


def test_the_app_listens_on_loopback_unless_told_otherwise() -> None:
    for cmd in (command(), command(address=None)):
        assert cmd[cmd.index("--server.address") + 1] == "127.0.0.1"
    cmd = command(address="0.0.0.0")  # noqa: S104 - asked for explicitly
    assert cmd[cmd.index("--server.address") + 1] == "0.0.0.0"  # noqa: S104
    assert cmd[cmd.index("--client.showSidebarNavigation") + 1] == "false"
    with pytest.raises(ConfigError):
        command(address=" ")


def test_env_names_the_store_by_absolute_path(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.chdir(tmp_path)
    assert app_env("rel.duckdb")["FAILATLAS_DB"] == str(tmp_path / "rel.duckdb")


def test_app_command_has_help() -> None:
    out = subprocess.run([sys.executable, "-m", "failatlas", "app", "--help"], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout
    assert "Streamlit" in out and "--port" in out and "--address" in out and "127.0.0.1" in out


def _wait_gone(pid: int, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.2)
    return False


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to find the Streamlit child")
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_stopping_the_launcher_stops_its_streamlit_server(tmp_path: Path, how: signal.Signals) -> None:
    """A real `failatlas app`: TERM (what `kill` and service managers send) and even KILL of the launcher alone,
    not its process group, leave no Streamlit server behind holding the port."""
    port = free_port()
    launcher = start(tmp_path / "none.duckdb", port)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", launcher)
        (server,) = children(launcher.pid)
        assert alive(server)
        os.kill(launcher.pid, how)
        launcher.wait(timeout=30)
        assert _wait_gone(server), f"the Streamlit server {server} outlived its launcher ({how.name})"
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
