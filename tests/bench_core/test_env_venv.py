"""Task environments for bwrap (issue 40): `failatlas sandbox build-env --venv` makes the environment task's
requirements.txt a venv through the registries route, inside a bwrap sandbox; a second build is a cache hit; a
`prebuilt` task runs under bwrap with no network from that venv (read-only at /failatlas-env), and so does its
validator re-run; offline, with only the host's packages and a wheels folder, what cannot be had is listed per
requirement with its class."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from failatlas.bench_core import runs, scoring
from failatlas.bench_core.sandbox.bwrap_setup import bwrap_binary, bwrap_problem
from failatlas.bench_core.sandbox.envbuild import EnvSpec
from failatlas.bench_core.sandbox.errors import SandboxError
from failatlas.bench_core.sandbox.venvs import RECORD, build_task_venv, build_venv
from failatlas.cli import app
from tests.bench_core.envtask import env_task_store

pytestmark = pytest.mark.slow  # runs sandboxes (Docker, bwrap) or the app server: out of the README's quick command

TASK = "env-typo-similarity"
# the interpreter venvs are made with here: this suite runs in a venv under /work, which sandboxes cannot see
SANDBOX_PYTHON = "/usr/bin/python3"


@pytest.fixture(scope="module", autouse=True)
def bwrap_works() -> None:
    """These tests fail, never skip, where bubblewrap cannot run: scripts/setup.sh installs it."""
    problem = bwrap_problem(bwrap_binary())
    if problem is not None:
        pytest.fail(f"bwrap sandboxes cannot run here ({problem}): run scripts/setup.sh")


@pytest.fixture(scope="module", autouse=True)
def reachable_envs():
    """Environments in a folder every sandbox user may pass through (pytest's own is the harness's alone)."""
    import os
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="failatlas-envs-")
    os.chmod(folder, 0o755)
    before = os.environ.get("FAILATLAS_ENV_DIR")
    os.environ["FAILATLAS_ENV_DIR"] = folder
    yield Path(folder)
    if before is None:
        os.environ.pop("FAILATLAS_ENV_DIR", None)
    else:
        os.environ["FAILATLAS_ENV_DIR"] = before
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, reachable_envs: Path):
    root = tmp_path_factory.mktemp("env-venv")
    store = env_task_store(root)
    first = build_task_venv(store, TASK, force=True, python=SANDBOX_PYTHON)
    yield store, root, first


def test_venv_build_installs_the_spec_and_the_second_build_is_a_cache_hit(built):
    store, root, first = built
    venv = Path(first.tag)
    assert venv.parent == Path(__import__("os").environ["FAILATLAS_ENV_DIR"]) and (venv / RECORD).is_file()
    assert (first.cached, first.spec_file, first.installed, first.failed) == (
        False, "requirements.txt", ["textdistance==4.6.3"], [])
    assert not list(venv.parent.glob("*.part-*"))  # built whole, then renamed
    assert venv.stat().st_uid == __import__("os").getuid() and not venv.stat().st_mode & 0o022
    probe = subprocess.run([str(venv / "bin" / "python"), "-c", "import textdistance"], capture_output=True,
                           text=True)
    assert probe.returncode == 0, probe.stderr
    result = CliRunner().invoke(app, ["--db", str(root / "store.duckdb"), "sandbox", "build-env", "--venv",
                                      "--task", TASK, "--python", SANDBOX_PYTHON])
    assert result.exit_code == 0, result.output
    assert f"cache hit: {venv}" in result.output


def test_prebuilt_task_runs_under_bwrap_from_the_venv_without_network(built):
    store, root, first = built
    runs.run(store, runs.BenchParams(agent="gold", task_ids=[TASK], runs_dir=root / "runs", network="none",
                                     sandbox="bwrap"))
    [row] = store.query_dicts("SELECT id, status, inputs FROM runs")
    inputs = json.loads(row["inputs"])
    assert (row["status"], inputs["env_dir"], inputs["environment"], inputs["network"], inputs["sandbox"]) == (
        "completed", first.tag, "prebuilt", "none", "bwrap")
    scoring.run(store, scoring.ScoreParams(runs_dir=root / "runs", sandbox="bwrap"))
    [validation] = store.query_dicts("SELECT outcome, detail FROM validations WHERE run_id = ?", [row["id"]])
    assert validation["outcome"] == "passed", validation


def test_the_same_run_without_the_environment_fails(built, tmp_path):
    """The venv is what makes it pass: the task left to the agent, under bwrap with no network, cannot import."""
    # the sandbox's python3 is the one under /usr (not a root-only pyenv): it has no textdistance of its own
    assert subprocess.run(["/usr/bin/python3", "-c", "import textdistance"], capture_output=True).returncode != 0

    store = env_task_store(tmp_path, prebuilt=False)
    runs.run(store, runs.BenchParams(agent="gold", task_ids=[TASK], runs_dir=tmp_path / "runs", network="none",
                                     sandbox="bwrap"))
    [row] = store.query_dicts("SELECT id, inputs FROM runs")
    assert json.loads(row["inputs"]).get("env_dir") is None
    scoring.run(store, scoring.ScoreParams(runs_dir=tmp_path / "runs", sandbox="bwrap"))
    [validation] = store.query_dicts("SELECT outcome FROM validations WHERE run_id = ?", [row["id"]])
    assert validation["outcome"] != "passed"


def test_a_missing_venv_names_the_command_that_builds_it(tmp_path, reachable_envs, monkeypatch):

    empty = reachable_envs / "none-built-here"
    empty.mkdir()
    monkeypatch.setenv("FAILATLAS_ENV_DIR", str(empty))

    store = env_task_store(tmp_path)
    runs.run(store, runs.BenchParams(agent="gold", task_ids=[TASK], runs_dir=tmp_path / "runs", network="none",
                                     sandbox="bwrap"))
    [row] = store.query_dicts("SELECT status, infra_error AS error FROM runs")
    assert row["status"] == "infra_error"
    assert "build-env --venv --task env-typo-similarity" in row["error"]


def test_offline_build_lists_what_it_cannot_have_per_requirement(tmp_path, reachable_envs):
    """No index: a requirement the host already has is satisfied, one it lacks is `package_not_found`, a wheel
    from the folder installs; nothing is a traceback."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    pkg = tmp_path / "pkg"
    (pkg / "fa_standin_pkg").mkdir(parents=True)
    (pkg / "fa_standin_pkg" / "__init__.py").write_text("VALUE = 41 + 1\n")
    (pkg / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools"]\nbuild-backend = '
                                        '"setuptools.build_meta"\n[project]\nname = "fa-standin-pkg"\n'
                                        'version = "1.0"\n')
    built_wheel = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                                  "-w", str(wheels), str(pkg)], capture_output=True, text=True)
    assert built_wheel.returncode == 0, built_wheel.stderr[-2000:]
    spec = EnvSpec(kind="requirements", file="requirements.txt",
                   requirements=["numpy", "fa-standin-pkg==1.0", "no-such-package-failatlas==9.9"])
    shared = reachable_envs / "wheels"
    shutil.copytree(wheels, shared)
    result = build_venv("t", spec, root=reachable_envs / "offline", wheels=shared, offline=True, best_effort=True,
                        python=SANDBOX_PYTHON)
    assert result.installed == ["numpy", "fa-standin-pkg==1.0"]
    [failed] = result.failed
    assert (failed["requirement"], failed["kind"]) == ("no-such-package-failatlas==9.9", "package_not_found")
    assert "Traceback" not in failed["evidence"]
    with pytest.raises(Exception) as strict:
        build_venv("t", spec, root=reachable_envs / "offline-strict", wheels=shared, offline=True,
                   python=SANDBOX_PYTHON)
    assert "package_not_found" in str(strict.value)


def test_docker_and_local_refuse_a_venv(tmp_path):
    from failatlas.bench_core.sandbox import SandboxSpec, create_sandbox

    spec = SandboxSpec(env_dir=str(tmp_path))
    for kind in ("local", "docker"):
        with pytest.raises(SandboxError, match="venv"):
            create_sandbox(kind, spec)


def test_tasks_show_says_which_environment_the_task_gets(built):
    store, root, first = built
    result = CliRunner().invoke(app, ["--db", str(root / "store.duckdb"), "tasks", "show", TASK])
    assert result.exit_code == 0, result.output
    said = result.output.split("environment", 1)[1]
    assert "prebuilt: runs start from the environment built from the spec" in said
    assert "spec: requirements.txt (requirements, 1 pip requirement(s))" in said
    assert f"venv (bwrap): {first.tag} (1 installed, 0 failed)" in said
    assert "image (Docker):" in said
