"""`failatlas sandbox build-env` in real Docker: the environment task's requirements.txt becomes an image layer
through the registries route, a second build is a cache hit, and a `prebuilt` task runs (and is re-run by the
validator) from that image with no network at all."""

from __future__ import annotations

import json

import docker
import pytest
from typer.testing import CliRunner

from failatlas.bench_core import runs, scoring
from failatlas.bench_core.sandbox.envbuild import build_task_env
from failatlas.bench_core.suites import load_suite
from failatlas.bench_core.tasks import save_tasks
from failatlas.cli import app
from tests.bench_core.envtask import env_task_store

pytestmark = pytest.mark.slow  # runs sandboxes (Docker, bwrap) or the app server: out of the README's quick command

TASK = "env-typo-similarity"


@pytest.fixture(scope="module")
def built(sandbox_image: str, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("env-build")
    store = env_task_store(root)
    first = build_task_env(store, TASK, force=True)
    yield store, root, first
    docker.from_env().images.remove(first.tag, force=True)


def test_build_installs_the_spec_and_the_second_build_is_a_cache_hit(built):
    store, root, first = built
    assert (first.cached, first.spec_file, first.spec_kind) == (False, "requirements.txt", "requirements")
    assert first.installed == ["textdistance==4.6.3"] and first.failed == []
    image = docker.from_env().images.get(first.tag)
    assert image.attrs["Config"]["User"] == "1000:1000"
    env = dict(e.split("=", 1) for e in image.attrs["Config"]["Env"])
    assert "HTTPS_PROXY" not in env and "PIP_CERT" not in env  # the build's proxy and CA are not baked in
    result = CliRunner().invoke(app, ["--db", str(root / "store.duckdb"), "sandbox", "build-env", "--task", TASK])
    assert result.exit_code == 0, result.output
    assert f"cache hit: {first.tag}" in result.output


def test_prebuilt_task_runs_without_network(built):
    store, root, first = built
    runs.run(store, runs.BenchParams(agent="gold", task_ids=[TASK], runs_dir=root / "runs", network="none"))
    [row] = store.query_dicts("SELECT id, status, inputs FROM runs")
    inputs = json.loads(row["inputs"])
    assert (row["status"], inputs["image"], inputs["environment"], inputs["network"]) == (
        "completed", first.tag, "prebuilt", "none")
    scoring.run(store, scoring.ScoreParams(runs_dir=root / "runs", sandbox="docker"))
    [validation] = store.query_dicts("SELECT outcome, detail FROM validations WHERE run_id = ?", [row["id"]])
    assert validation["outcome"] == "passed", validation


def test_missing_environment_is_an_infrastructure_error(built, tmp_path):
    """A prebuilt task whose image is not built is not the agent's failure: infra_error naming the command."""
    from failatlas.store import open_store

    store = open_store(tmp_path / "other.duckdb")
    [task] = load_suite("failatlas-env")
    resources = task.resources.model_copy(update={"environment": "prebuilt", "env_spec": "README.md"})
    save_tasks(store, [task.model_copy(update={"resources": resources})], source="failatlas-env")
    result = runs.run(store, runs.BenchParams(agent="null", task_ids=[TASK], runs_dir=tmp_path / "runs"))
    assert result.by_status == {"infra_error": 1}
    assert "failatlas sandbox build-env --task env-typo-similarity" in result.infra_errors[0]


def test_best_effort_keeps_what_installs_and_classifies_the_rest(sandbox_image: str):
    """A pin the index lacks does not stop the others; pip calls it a conflict under the spec's constraints, the
    build asks about it alone and records `package_not_found`."""
    from failatlas.bench_core.sandbox.envbuild import EnvSpec, build_env
    from failatlas.bench_core.sandbox.policy import default_ca_bundle, registry_hosts

    spec = EnvSpec(kind="requirements", file="requirements.txt",
                   requirements=["textdistance==4.6.3", "tomli-w==0.0.0"])
    result = build_env("t-best-effort", spec, allow_hosts=registry_hosts(), ca_bundle=default_ca_bundle(),
                       best_effort=True, force=True)
    try:
        assert result.installed == ["textdistance==4.6.3"]
        assert [(f["requirement"], f["kind"]) for f in result.failed] == [("tomli-w==0.0.0", "package_not_found")]
        labels = docker.from_env().images.get(result.tag).labels
        assert json.loads(labels["failatlas.env.failed"])[0]["kind"] == "package_not_found"
    finally:
        docker.from_env().images.remove(result.tag, force=True)
