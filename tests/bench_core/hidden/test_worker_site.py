"""The hidden-test worker runs with `python3 -I`, which drops the sandbox user's own site-packages; a task
environment built as an image installs there (`pip install --user`), so the worker puts that folder back before
the system's, as Python itself would have it: the agent's code is called with its task's environment (issue 40: a
Docker run of 2205.00048 failed its derived tests with "a tensor, and torch is not installed here")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import failatlas.bench_core.hidden.worker as worker

PROBE = """
import sys
sys.path.insert(0, {folder!r})
import worker
worker._environment_site()
import fa_user_only
import site
user = site.getusersitepackages()
system = next(i for i, p in enumerate(sys.path) if p.endswith(("site-packages", "dist-packages")) and p != user)
print(fa_user_only.VALUE, sys.path.index(user) < system, sys.path.index({pth!r}) < system)
"""


def test_the_worker_sees_the_users_site_packages_before_the_systems(tmp_path: Path) -> None:
    home = tmp_path / "home"
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    user_site = home / ".local" / "lib" / version / "site-packages"
    user_site.mkdir(parents=True)
    (user_site / "fa_user_only.py").write_text("VALUE = 41 + 1\n")
    extra = tmp_path / "from-pth"
    extra.mkdir()
    (user_site / "fa.pth").write_text(f"{extra}\n")
    folder = Path(worker.__file__).parent
    env = {"HOME": str(home), "PATH": os.environ.get("PATH", "")}
    out = subprocess.run([sys.executable, "-I", "-B", "-c", PROBE.format(folder=str(folder), pth=str(extra))],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["42", "True", "True"]


def test_without_a_user_site_nothing_changes(tmp_path: Path) -> None:
    folder = Path(worker.__file__).parent
    probe = (f"import sys; sys.path.insert(0, {str(folder)!r}); import worker; before = list(sys.path); "
             "worker._environment_site(); print(sys.path == before)")
    out = subprocess.run([sys.executable, "-I", "-B", "-c", probe], capture_output=True, text=True,
                         env={"HOME": str(tmp_path)}, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"
