"""Issue 52, R1 and R4: which interpreter a task's venv is made with, and what its cache key holds.

R1: the default is the Python running FailAtlas where a sandbox can see it; this suite runs from a venv under
/work (or a pyenv under /root), which no sandbox sees, so the build stops with a message naming why and what to
pass, and `--python` an interpreter under /usr works. A build whose spec asks for torch and ends with none
importable fails naming it. R4: an offline build is never an online build's cache hit."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from failatlas.bench_core.sandbox.bwrap_setup import bwrap_binary, bwrap_problem
from failatlas.bench_core.sandbox.envbuild import EnvBuildError, EnvSpec
from failatlas.bench_core.sandbox.venv_python import choose, visible_candidates
from failatlas.bench_core.sandbox.venvs import RECORD, build_venv, find_venv, source_of
from failatlas.core.errors import ConfigError

pytestmark = pytest.mark.slow  # runs sandboxes (Docker, bwrap) or the app server: out of the README's quick command

SANDBOX_PYTHON = "/usr/bin/python3"


@pytest.fixture(scope="module", autouse=True)
def bwrap_works() -> None:
    problem = bwrap_problem(bwrap_binary())
    if problem is not None:
        pytest.fail(f"bwrap sandboxes cannot run here ({problem}): run scripts/setup.sh")


@pytest.fixture
def envs():
    folder = Path(tempfile.mkdtemp(prefix="failatlas-envs-"))
    os.chmod(folder, 0o755)
    yield folder
    import shutil

    shutil.rmtree(folder, ignore_errors=True)


def test_the_default_interpreter_hidden_from_sandboxes_is_refused_with_what_to_pass(envs):
    """R1: this test's own Python lives under /work or /root: never silently swapped for Debian's."""
    assert not sys.executable.startswith(("/usr/", "/opt/"))  # the premise: the harness's Python is hidden
    spec = EnvSpec(kind="requirements", file="requirements.txt", requirements=["numpy"])
    with pytest.raises(ConfigError) as refused:
        build_venv("t", spec, root=envs, offline=True)
    text = refused.value.one_line()
    assert "the Python that runs FailAtlas" in text and "outside the folders they see" in text
    assert "--python PATH" in text and SANDBOX_PYTHON in text  # the way out, with one that works here
    assert not list(envs.iterdir())  # nothing built


def test_python_option_builds_with_the_named_interpreter_and_refuses_hidden_ones(envs, tmp_path):
    assert SANDBOX_PYTHON in visible_candidates()
    with pytest.raises(ConfigError, match="sandboxes cannot see"):
        choose(sys.executable)
    with pytest.raises(ConfigError, match="no executable file"):
        choose(str(tmp_path / "nope"))
    spec = EnvSpec(kind="requirements", file="requirements.txt", requirements=["numpy"])
    built = build_venv("t", spec, root=envs, offline=True, python=SANDBOX_PYTHON)
    record = __import__("json").loads((Path(built.tag) / RECORD).read_text())
    assert (record["python_path"], record["source"], built.installed) == (SANDBOX_PYTHON, "offline", ["numpy"])


def test_an_offline_build_is_not_the_online_builds_cache_hit(envs):
    """R4: the same spec built offline, then online: two environments, the second not a cache hit."""
    spec = EnvSpec(kind="requirements", file="requirements.txt", requirements=["numpy"])
    offline = build_venv("t", spec, root=envs, offline=True, python=SANDBOX_PYTHON)
    again = build_venv("t", spec, root=envs, offline=True, python=SANDBOX_PYTHON)
    online = build_venv("t", spec, root=envs, python=SANDBOX_PYTHON)
    assert (offline.cached, again.cached, online.cached) == (False, True, False)
    assert offline.tag == again.tag != online.tag
    assert find_venv(spec, envs) in (Path(offline.tag), Path(online.tag))
    assert source_of(None, True) != source_of(None, False)


def test_a_wheels_folder_is_part_of_the_key(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    empty = source_of(wheels, True)
    (wheels / "x-1.0-py3-none-any.whl").write_bytes(b"not really")
    assert source_of(wheels, True) != empty and source_of(wheels, True).startswith("offline+wheels:")


def test_a_build_without_any_of_the_specs_heavy_packages_fails_naming_them(envs):
    spec = EnvSpec(kind="requirements", file="requirements.txt", requirements=["numpy", "torch==1.13.1"])
    with pytest.raises(EnvBuildError) as failed:
        build_venv("t", spec, root=envs, offline=True, best_effort=True, python=SANDBOX_PYTHON)
    text = failed.value.one_line()
    assert "none of the spec's heavy packages: torch==1.13.1 (package_not_found)" in text
    assert "--python" in text
    assert not [p for p in envs.iterdir() if (p / RECORD).exists()]  # no environment runs could take


def test_build_env_cli_takes_python_and_groups_failures(tmp_path, envs, monkeypatch):
    """The CLI's --python reaches the build; a second build is a cache hit that names --force and prints one line
    per failure kind, not one per pin (R7)."""
    from failatlas.cli import app
    from tests.bench_core.envtask import env_task_store

    monkeypatch.setenv("FAILATLAS_ENV_DIR", str(envs))
    root = tmp_path / "s"
    env_task_store(root)
    repo = root / "repo-copy"
    import shutil

    from failatlas.bench_core.sandbox.envbuild import task_env_inputs
    from failatlas.core.store import Store

    got = task_env_inputs(Store(root / "store.duckdb"), "env-typo-similarity")
    shutil.rmtree(repo, ignore_errors=True)
    repo.mkdir()
    (repo / "requirements.txt").write_text(
        "\n".join([*got.spec.requirements, "no-such-pkg-a==1", "no-such-pkg-b==1"]) + "\n")
    args = ["--db", str(root / "store.duckdb"), "sandbox", "build-env", "--venv", "--task", "env-typo-similarity",
            "--repo", str(repo), "--offline", "--best-effort", "--python", SANDBOX_PYTHON]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    second = CliRunner().invoke(app, args)
    assert second.exit_code == 0, second.output
    assert "cache hit" in second.output and "--force" in second.output
    assert "failed, 3 package_not_found: " in second.output  # textdistance too: offline, not on this host
    assert second.output.count("no-such-pkg-a") == 1
