"""Blame in `tasks validate` (issue 40): hidden files named outside the repository never reach the agent and make
the task `prepare-fails` (N4); a bwrap run on the host's folders records that and is never reused by a Docker
validation (N5); a RExBench task on the user's base repository has no reference for gold (N6); bwrap on an
image's root filesystem can write, and a harness failure there is never the task's (N10)."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest

from failatlas.bench_core.prepare import prepare_workspace
from failatlas.bench_core.sandbox.model import DEFAULT_IMAGE
from failatlas.bench_core.task_validation import ValidateParams, run
from failatlas.bench_core.tasks import TaskImportParams, get_task
from failatlas.bench_core.tasks import run as import_tasks
from failatlas.bench_core.tasks.catalog import save_tasks
from failatlas.bench_core.tasks.model import ExpectedMetric, RepoRef, RunSpec, TaskSpec
from failatlas.core.errors import InputError
from tests.bench_core.sandbox.test_bwrap_rootfs import image_cache  # noqa: F401 - a fixture (the image's root, unpacked once)

pytestmark = pytest.mark.slow  # runs sandboxes (Docker, bwrap) or the app server: out of the README's quick command

WRITE_ONE = "python3 -c 'import json; json.dump({\"acc\": 1.0}, open(\"results.json\", \"w\"))'"


@pytest.fixture(scope="session")
def bwrap_works() -> None:
    """bwrap tests fail, never skip, where bubblewrap cannot run: scripts/setup.sh installs it."""
    from failatlas.bench_core.sandbox.bwrap_setup import bwrap_problem

    problem = bwrap_problem()
    if problem is not None:
        pytest.fail(f"bwrap sandboxes cannot run here ({problem}): run scripts/setup.sh")


@pytest.fixture
def open_dir():
    """A folder a sandbox's own uid can reach (pytest's are private to root)."""
    path = Path(tempfile.mkdtemp(prefix="failatlas-blame-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _toy(tmp_path: Path) -> TaskSpec:
    """A bundled task whose command writes the expected value itself (so null passes wherever it runs)."""
    folder = tmp_path / "toy-null-passes"
    (folder / "repo").mkdir(parents=True)
    (folder / "repo" / "model.py").write_text("def predict(x):\n    return 2 * x + 3\n")
    (folder / "task.json").write_text("{}")
    return TaskSpec(id="toy-null-passes", benchmark="toy", kind="full_code", question="Is the accuracy one?",
                    repository=RepoRef(local_path="repo"), source=str(folder / "task.json"),
                    run=RunSpec(command=WRITE_ONE, results_file="results.json"),
                    expected_results=[ExpectedMetric(name="acc", value=1.0)])


# -- N4 -------------------------------------------------------------------------------------------------------


def test_hidden_files_named_outside_the_repository_make_the_task_unpreparable(store, tmp_path):
    paper = tmp_path / "95333.json"
    paper.write_text(json.dumps({"questions": [{
        "question": "Does the evaluation show the gain?", "method": "Evaluate it.", "expected_outcome": "Yes.",
        "masked_source": ["/tmp/repos/Paper/eval.py", "/tmp/repos/Paper/eval.sh", "/workspace/train.py"],
        "agent_instructions": "Write eval.py and eval.sh."}]}))
    import_tasks(store, TaskImportParams(paths=[paper], format="expbench"))
    [(task_id,)] = store.query("SELECT id FROM tasks")
    repo = tmp_path / "checkout"
    repo.mkdir()
    for name, text in (("eval.py", "print('the answer')\n"), ("eval.sh", "python3 eval.py\n"),
                       ("train.py", "print('train')\n")):
        (repo / name).write_text(text)
    task = get_task(store, task_id)
    assert task.masking.files == ["train.py"]
    with pytest.raises(InputError, match="named outside the repository") as err:
        prepare_workspace(task, tmp_path / "workspace", repo=repo)
    assert "/tmp/repos/Paper/eval.py" in str(err.value)
    assert not (tmp_path / "workspace" / "eval.py").exists()  # the answer never reaches a workspace

    [verdict] = run(store, ValidateParams(task_ids=[task_id], sandbox="local", repo=repo,
                                          runs_dir=tmp_path / "runs")).verdicts
    assert verdict.status == "prepare-fails", verdict
    assert "/tmp/repos/Paper/eval.py" in verdict.reason and verdict.gold_run_id is None


# -- N6 -------------------------------------------------------------------------------------------------------


def test_a_rexbench_task_on_the_users_base_repository_is_not_checkable_not_gold_failing(store, tmp_path):
    folder = tmp_path / "instructions" / "probe"
    folder.mkdir(parents=True)
    (folder / "instructions.md").write_text("# Background\nA probe.\n\n# Extension to be implemented\n"
                                            "Add the new probe.\n\n# Evaluation\nRun `python3 run.py`.\n")
    checks = tmp_path / "checks.json"
    checks.write_text(json.dumps({"probe": {"command": "python3 run.py", "checks": [
        {"name": "acc", "source": "stdout_regex", "pattern": "acc: ([0-9.]+)", "value": 0.9, "atol": 0.01}]}}))
    import_tasks(store, TaskImportParams(paths=[folder], format="rexbench", options={"checks": str(checks)}))
    base = tmp_path / "base"
    base.mkdir()
    (base / "run.py").write_text("print('acc: 0.1')\n")  # the base repository: the extension is not there
    [verdict] = run(store, ValidateParams(task_ids=["rexbench-probe"], sandbox="local", repo=base,
                                          runs_dir=tmp_path / "runs")).verdicts
    assert verdict.status == "not-checkable", verdict
    assert verdict.reason.startswith("no reference to restore") and verdict.gold_run_id is None
    assert store.query("SELECT count(*) FROM runs") == [(0,)]


# -- N5 -------------------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("bwrap_works", "sandbox_image")
def test_a_bwrap_run_on_the_host_records_it_and_a_docker_validation_makes_its_own(store, tmp_path, monkeypatch):
    from failatlas.bench_core.sandbox.bwrap_setup import ROOTFS_ENV

    monkeypatch.delenv(ROOTFS_ENV, raising=False)
    save_tasks(store, [_toy(tmp_path)])
    runs_dir = tmp_path / "runs"
    [on_bwrap] = run(store, ValidateParams(task_ids=["toy-null-passes"], sandbox="bwrap", runs_dir=runs_dir,
                                           mutants=0, method_mutants=0)).verdicts
    [on_docker] = run(store, ValidateParams(task_ids=["toy-null-passes"], sandbox="docker", runs_dir=runs_dir,
                                            mutants=0, method_mutants=0)).verdicts
    assert on_bwrap.status == on_docker.status == "null-passes", (on_bwrap, on_docker)
    ids = {on_bwrap.gold_run_id, on_bwrap.null_run_id, on_docker.gold_run_id, on_docker.null_run_id}
    assert len(ids) == 4  # no run of one sandbox taken for the other's
    rows = {r["id"]: r for r in store.query_dicts("SELECT id, sandbox, inputs FROM runs")}
    for run_id in (on_bwrap.gold_run_id, on_bwrap.null_run_id):
        inputs = json.loads(rows[run_id]["inputs"])
        assert (rows[run_id]["sandbox"], inputs["root"], inputs["image"]) == ("bwrap", "host", None)
    for run_id in (on_docker.gold_run_id, on_docker.null_run_id):
        inputs = json.loads(rows[run_id]["inputs"])
        assert (rows[run_id]["sandbox"], inputs["root"], inputs["image"]) == (
            "docker", f"image {DEFAULT_IMAGE}", DEFAULT_IMAGE)
    assert dict(store.query("SELECT task_id, sandbox FROM task_validations")) == {"toy-null-passes": "docker"}


# -- N10 ------------------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("bwrap_works", "image_cache")
def test_bwrap_on_an_image_root_writes_files_and_mounts_data(tmp_path, open_dir, monkeypatch):
    from failatlas.bench_core.sandbox import SandboxSpec, create_sandbox
    from failatlas.bench_core.sandbox.bwrap_setup import ROOTFS_ENV

    monkeypatch.delenv(ROOTFS_ENV, raising=False)
    data = open_dir / "data"
    data.mkdir()
    data.chmod(0o755)
    (data / "ratings.dat").write_text("1::2::5\n")
    (data / "ratings.dat").chmod(0o644)
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.txt").write_text("a\n")
    spec = SandboxSpec(image=DEFAULT_IMAGE, memory_mb=1024, run_id="test-rootfs-writes", data={"ml": str(data)})
    with create_sandbox("bwrap", spec, workspace=repo) as box:
        box.write_file("/workspace/sub/b.txt", "written\n")  # the harness's staging mount on the image's root
        res = box.exec("cat /workspace/sub/b.txt /data/ml/ratings.dat; cat /etc/debian_version >/dev/null && "
                       "echo image; touch /x 2>/dev/null || echo root-read-only", timeout=60)
        assert res.stdout.splitlines() == ["written", "1::2::5", "image", "root-read-only"], res
        assert box.read_file("/workspace/sub/b.txt") == b"written\n"


@pytest.mark.usefixtures("bwrap_works", "image_cache")
def test_validate_under_bwrap_on_an_image_root_blames_no_one_but_the_task(store, tmp_path, monkeypatch):
    from failatlas.bench_core.sandbox.bwrap_setup import ROOTFS_ENV

    monkeypatch.delenv(ROOTFS_ENV, raising=False)
    save_tasks(store, [_toy(tmp_path)])
    [verdict] = run(store, ValidateParams(task_ids=["toy-null-passes"], sandbox="bwrap", image=DEFAULT_IMAGE,
                                          runs_dir=tmp_path / "runs", mutants=0, method_mutants=0)).verdicts
    assert verdict.status == "null-passes", verdict  # as under Docker: never gold-fails for the harness's mount
    inputs = json.loads(store.query("SELECT inputs FROM runs WHERE id = ?", [verdict.gold_run_id])[0][0])
    assert (inputs["root"], inputs["image"]) == (f"image {DEFAULT_IMAGE}", DEFAULT_IMAGE)


@pytest.mark.usefixtures("bwrap_works")
def test_a_harness_mount_failing_after_the_agents_code_ran_stays_infrastructure(tmp_path, open_dir, monkeypatch):
    from failatlas.bench_core.sandbox import SandboxSpec, create_sandbox
    from failatlas.bench_core.sandbox.bwrap_setup import ROOTFS_ENV
    from failatlas.core.errors import AgentFaultError, HarnessSetupError

    monkeypatch.delenv(ROOTFS_ENV, raising=False)
    data = open_dir / "data"
    data.mkdir()
    data.chmod(0o755)
    repo = tmp_path / "repo"
    repo.mkdir()
    with create_sandbox("bwrap", SandboxSpec(memory_mb=512, data={"d": str(data)}), workspace=repo) as box:
        assert box.exec("true", timeout=30).success  # the agent's code has run here
        shutil.rmtree(data)  # the harness's data mount can no longer be made
        with pytest.raises(HarnessSetupError) as err:  # not a SandboxPathError: no agent's failure to write
            box.write_file("/workspace/request.json", "{}")
        assert not isinstance(err.value, (AgentFaultError, PermissionError))
        assert "not the agent's doing" in str(err.value) and str(data) in str(err.value)
