"""Runs of tasks whose repository is not bundled (EXP-Bench's shape): the repository each run is prepared from,
what the run records about its inputs, when a stored infra_error run is redone, the user's resource overrides,
GPU leases reaching the sandbox, and task settings. Real git, real local sandboxes, a real DuckDB file."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from failatlas.bench_core.runs import BenchParams, ResourceOverrides, run
from failatlas.bench_core.tasks import save_tasks
from failatlas.bench_core.tasks.model import (
    DesignSpec,
    ExpectedMetric,
    Masking,
    RepoRef,
    RunSpec,
    Setting,
    TaskSpec,
)
from failatlas.cli import app
from failatlas.core.errors import ConfigError

pytestmark = pytest.mark.slow  # runs sandboxes (Docker, bwrap) or the app server: out of the README's quick command

URL = "https://example.org/toy/scaling.git"
MODEL = "def predict(x):\n    return 3 * x + 1\n"
RUNNER = ("import json\nfrom src.model import predict\n"
          "json.dump({'prediction': predict(2)}, open('results.json', 'w'))\n")
SHOW_PROMPT = 'mkdir -p .failatlas && cp "$FAILATLAS_PROMPT_FILE" .failatlas/conclusion.md'


def _git(repo: Path, *args: str) -> str:
    env = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "PATH": "/usr/bin:/bin:/usr/local/bin",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def _commit(repo: Path, files: dict[str, str]) -> str:
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "change")
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A real git checkout of the task's repository, as a user clones it (never bundled with the task)."""
    repo = tmp_path / "checkout"
    repo.mkdir()
    _git(repo, "init", "-q", "--initial-branch=main")
    _commit(repo, {"src/model.py": MODEL, "src/__init__.py": "", "run.py": RUNNER, "README.md": "# scaling\n"})
    return repo


def _task(task_id: str = "toy-external", **extra) -> TaskSpec:
    """An EXP-Bench-shaped task built in code: its repository is named by URL only, nothing bundled."""
    fields = dict(
        id=task_id, benchmark="toy", kind="T1", repository=RepoRef(url=URL),
        question="Does the linear predictor give seven at two?", method="Evaluate the predictor at x = 2.",
        design=DesignSpec(constant={"x": 2}, dependent={"prediction": "the predictor's output"}),
        expected_conclusion="Yes: the linear predictor returns exactly seven for an input of two.",
        masking=Masking(files=["src/model.py"]),
        run=RunSpec(command="python3 run.py", results_file="results.json", timeout_s=60),
        expected_results=[ExpectedMetric(name="prediction", value=7.0)],
    )
    return TaskSpec(**{**fields, **extra})


def _params(tmp_path: Path, **extra) -> BenchParams:
    fields = {"agent": "gold", "task_ids": ["toy-external"], "sandbox": "local", "runs_dir": tmp_path / "runs"}
    return BenchParams(**{**fields, **extra})


def _row(store, task_id: str = "toy-external", agent: str = "gold") -> dict:
    [row] = store.query_dicts("SELECT * FROM runs WHERE task_id = ? AND agent = ?", [task_id, agent])
    return row


def _conclusion(row: dict) -> str:
    return (json.loads(row["outputs"])["conclusion"] or "").strip()


def test_gold_on_a_task_whose_repository_is_not_bundled_completes_and_records_the_commit(store, tmp_path,
                                                                                         checkout):
    save_tasks(store, [_task()])
    head = _git(checkout, "rev-parse", "HEAD")
    result = run(store, _params(tmp_path, repo=checkout))
    assert result.by_status == {"completed": 1} and result.infra_errors == [] and result.not_run == []
    row = _row(store)
    assert row["status"] == "completed" and row["infra_error"] is None
    assert (row["repo_url"], row["repo_commit"]) == (str(checkout.resolve()), head)
    outputs = json.loads(row["outputs"])
    assert "src/model.py" in outputs["changed_files"] and "3 * x + 1" in outputs["diff"]  # restored from the ref.
    [(code,)] = store.query("SELECT exit_code FROM sandbox_commands WHERE run_id = ? AND command LIKE "
                            "'bash .failatlas/run.sh'", [row["id"]])
    assert code == 0
    inputs = json.loads(row["inputs"])
    assert inputs["repo_commit"] == head and inputs["sandbox"] == "local" and row["inputs_hash"]


def test_a_checkout_that_is_not_a_git_repository_records_no_commit(store, tmp_path, checkout):
    plain = tmp_path / "plain"
    plain.mkdir()
    for rel in ("src/model.py", "src/__init__.py", "run.py"):
        (plain / rel).parent.mkdir(parents=True, exist_ok=True)
        (plain / rel).write_text((checkout / rel).read_text())
    save_tasks(store, [_task()])
    assert run(store, _params(tmp_path, repo=plain)).by_status == {"completed": 1}
    row = _row(store)
    assert row["repo_url"] == str(plain.resolve()) and row["repo_commit"] is None


def test_a_task_without_a_repository_is_not_run_with_one_line_and_the_batch_goes_on(store, tmp_path):
    from failatlas.bench_core.suites import load_suite

    save_tasks(store, [_task()] + [t for t in load_suite("failatlas-mini") if t.id == "mini-ridge-cv"])
    params = _params(tmp_path, agent="null", task_ids=["toy-external", "mini-ridge-cv"])
    result = run(store, params)
    assert result.not_run == [f"toy-external: repository not available: {URL}; add it with `failatlas repos add`"]
    assert result.by_status == {"completed": 1}
    assert store.query("SELECT task_id, status FROM runs") == [("mini-ridge-cv", "completed")]  # nothing stored
    summary = json.loads(store.query("SELECT summary FROM stage_runs WHERE id = ?", [result.stage_run_id])[0][0])
    assert summary["not_run"] == result.not_run

    db = store.path
    out = CliRunner().invoke(app, ["--db", str(db), "bench", "run", "--agent", "null", "--sandbox", "local",
                                   "--runs-dir", str(tmp_path / "runs"), "--task", "toy-external",
                                   "--task", "mini-ridge-cv"], env={"FAILATLAS_NO_PROGRESS": "1", "COLUMNS": "300"})
    assert out.exit_code == 0, out.output
    assert "1 already stored" in out.output
    assert f"not run: toy-external: repository not available: {URL}; add it with `failatlas repos add`" in out.output


def test_once_the_repository_is_cached_the_task_runs_from_the_cache_without_repo(store, tmp_path, checkout):
    from failatlas.bench_core.repos import AddParams, add, normalise_url

    save_tasks(store, [_task()])
    before = run(store, _params(tmp_path))
    assert before.planned == 0 and len(before.not_run) == 1  # nothing remembered as a failure
    head = _git(checkout, "rev-parse", "HEAD")
    add(store, AddParams(source=str(checkout), url=URL, cache_dir=tmp_path / "cache"))
    after = run(store, _params(tmp_path))
    assert after.not_run == [] and after.by_status == {"completed": 1}
    row = _row(store)
    assert (row["repo_url"], row["repo_commit"]) == (normalise_url(URL), head)
    assert "3 * x + 1" in json.loads(row["outputs"])["diff"]  # gold's reference came from the cached checkout


def test_an_infra_error_run_is_redone_when_its_repository_changes_and_skipped_when_nothing_did(store, tmp_path,
                                                                                              checkout):
    save_tasks(store, [_task(masking=Masking(files=["src/missing.py"]))])
    first = run(store, _params(tmp_path, repo=checkout))
    assert first.by_status == {"infra_error": 1}
    [line] = first.infra_errors
    assert line.startswith("toy-external · gold: ") and "src/missing.py" in line
    stored = _row(store)

    same = run(store, _params(tmp_path, repo=checkout))
    assert same.planned == 0 and same.skipped == 1 and same.redone == 0
    assert same.kept_infra == [f"toy-external · gold: {stored['infra_error']}"]
    out = CliRunner().invoke(app, ["--db", str(store.path), "bench", "run", "--agent", "gold", "--sandbox", "local",
                                   "--runs-dir", str(tmp_path / "runs"), "--task", "toy-external",
                                   "--repo", str(checkout)], env={"FAILATLAS_NO_PROGRESS": "1", "COLUMNS": "300"})
    assert out.exit_code == 0, out.output
    assert "infra_error (stored): toy-external · gold:" in out.output and "--retry-infra" in out.output

    fixed = _commit(checkout, {"src/missing.py": "VALUE = 1\n"})
    again = run(store, _params(tmp_path, repo=checkout))
    assert again.redone == 1 and again.by_status == {"completed": 1}
    row = _row(store)
    assert row["id"] == stored["id"] and row["repo_commit"] == fixed and row["inputs_hash"] != stored["inputs_hash"]

    _commit(checkout, {"README.md": "# changed again\n"})  # a completed run is never redone by this rule
    assert run(store, _params(tmp_path, repo=checkout)).planned == 0


def test_the_cli_says_why_a_run_ended_in_infra_error_and_that_changed_inputs_redo_it(store, tmp_path, checkout):
    save_tasks(store, [_task(masking=Masking(files=["src/missing.py"]))])
    args = ["--db", str(store.path), "bench", "run", "--agent", "gold", "--sandbox", "local", "--runs-dir",
            str(tmp_path / "runs"), "--task", "toy-external", "--repo", str(checkout)]
    env = {"FAILATLAS_NO_PROGRESS": "1", "COLUMNS": "300"}
    out = CliRunner().invoke(app, args, env=env)
    assert out.exit_code == 0, out.output
    assert "infra_error: toy-external · gold: " in out.output and "src/missing.py" in out.output
    out = CliRunner().invoke(app, [*args, "--memory", "3"], env=env)  # other resources: other inputs
    assert "1 infra_error run(s) redone: inputs changed" in out.output


def test_runs_stored_before_fingerprints_are_redone_when_they_failed_for_infrastructure(store, tmp_path, checkout):
    save_tasks(store, [_task(masking=Masking(files=["src/missing.py"]))])
    assert run(store, _params(tmp_path, repo=checkout)).by_status == {"infra_error": 1}
    with store.write() as conn:
        conn.execute("UPDATE runs SET inputs = NULL, inputs_hash = NULL")
    assert run(store, _params(tmp_path, repo=checkout)).redone == 1
    assert run(store, _params(tmp_path, repo=checkout)).redone == 0


def test_retry_infra_still_redoes_every_infra_error_run(store, tmp_path, checkout):
    save_tasks(store, [_task(masking=Masking(files=["src/missing.py"]))])
    run(store, _params(tmp_path, repo=checkout))
    again = run(store, _params(tmp_path, repo=checkout, retry_infra=True))
    assert again.planned == 1 and again.redone == 0 and again.by_status == {"infra_error": 1}


def test_memory_and_timeout_overrides_reach_the_sandbox_and_are_recorded(store, tmp_path, checkout):
    slow = _task(run=RunSpec(command="sleep 5 && python3 run.py", results_file="results.json", timeout_s=600))
    save_tasks(store, [slow])
    overrides = ResourceOverrides(memory_gb=1, timeout_s=1)  # under the runner's 2 GB floor: an override wins
    result = run(store, _params(tmp_path, repo=checkout, resources=overrides))
    assert result.by_status == {"completed": 1}
    row = _row(store)
    [(timed_out, seconds)] = store.query("SELECT timed_out, duration_s FROM sandbox_commands WHERE run_id = ? AND "
                                         "command = 'bash .failatlas/run.sh'", [row["id"]])
    assert timed_out and seconds < 4  # gold's experiment got the 1 s limit, not the task's 600 s
    assert json.loads(row["inputs"])["resources"] == {"cpus": 1.0, "memory_mb": 1024, "pids_limit": 256,
                                                      "network": "none", "gpus": 0, "timeout_s": 1}

    save_tasks(store, [_task("toy-memory")])
    params = _params(tmp_path, agent="command", task_ids=["toy-memory"], repo=checkout, resources=overrides,
                     agent_params={"command": "mkdir -p .failatlas && ulimit -v > .failatlas/conclusion.md"})
    run(store, params)
    assert _conclusion(_row(store, "toy-memory", "command")) == str(1024 * 1024)  # KiB: the 1 GB override


def test_a_gpu_task_gets_a_leased_device_in_the_local_sandbox(store, tmp_path, checkout, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")  # this host's GPUs, as gpus.detect_gpus reads them
    monkeypatch.setenv("FAILATLAS_GPU_STATE", str(tmp_path / "gpu-state"))
    save_tasks(store, [_task()])
    command = 'mkdir -p .failatlas && echo "gpus=[$CUDA_VISIBLE_DEVICES]" > .failatlas/conclusion.md'
    params = _params(tmp_path, agent="command", agent_params={"command": command}, repo=checkout,
                     resources=ResourceOverrides(gpus=1))
    assert run(store, params).by_status == {"completed": 1}
    row = _row(store, agent="command")
    assert _conclusion(row) == "gpus=[3]"
    assert json.loads(row["inputs"])["resources"]["gpus"] == 1


def test_a_gpu_task_on_a_host_without_gpus_is_not_run_unless_asked(store, tmp_path, checkout, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    save_tasks(store, [_task()])
    command = 'mkdir -p .failatlas && echo "gpus=[$CUDA_VISIBLE_DEVICES]" > .failatlas/conclusion.md'
    params = _params(tmp_path, agent="command", agent_params={"command": command}, repo=checkout,
                     resources=ResourceOverrides(gpus=2))
    skipped = run(store, params)
    assert skipped.not_run == ["toy-external: needs 2 GPU(s), this host has 0"] and skipped.planned == 0
    anyway = run(store, params.model_copy(update={"gpu_tasks": True}))
    assert anyway.by_status == {"completed": 1}
    assert _conclusion(_row(store, agent="command")) == "gpus=[]"  # it runs, with no GPU visible


def _settings_task() -> TaskSpec:
    return _task(settings=[Setting(name="partial-code"), Setting(name="no-command", show_run_command=False)])


def test_a_setting_changes_the_run_id_and_what_the_agent_is_shown(store, tmp_path, checkout):
    save_tasks(store, [_settings_task()])
    params = _params(tmp_path, agent="command", agent_params={"command": SHOW_PROMPT}, repo=checkout)
    default = run(store, params)
    hidden = run(store, params.model_copy(update={"setting": "no-command"}))
    assert default.by_status == hidden.by_status == {"completed": 1}
    assert default.run_ids != hidden.run_ids
    rows = {r["setting"]: r for r in store.query_dicts("SELECT * FROM runs")}
    assert set(rows) == {"partial-code", "no-command"}
    assert "python3 run.py" in _conclusion(rows["partial-code"])
    assert "python3 run.py" not in _conclusion(rows["no-command"])
    assert run(store, params.model_copy(update={"setting": "no-command"})).skipped == 1  # its own stored run


def test_an_unknown_setting_is_a_config_error_before_anything_runs(store, tmp_path, checkout):
    save_tasks(store, [_settings_task()])
    with pytest.raises(ConfigError) as err:
        run(store, _params(tmp_path, repo=checkout, setting="refsol"))
    assert "toy-external" in str(err.value) and "partial-code, no-command" in str(err.value)
    assert store.query("SELECT count(*) FROM runs") == [(0,)]


def test_the_prompt_names_the_materials_given_with_the_task(store, tmp_path, checkout):
    (tmp_path / "task").mkdir()
    (tmp_path / "task" / "paper.txt").write_text("The paper, in plain text.\n")
    task = _task(materials={"paper.txt": "paper.txt"}, source=str(tmp_path / "task" / "task.json"))
    save_tasks(store, [task])
    run(store, _params(tmp_path, agent="command", agent_params={"command": SHOW_PROMPT}, repo=checkout))
    assert "`paper.txt` is in your workspace" in _conclusion(_row(store, agent="command"))


def test_gold_on_real_expbench_tasks_from_the_repository_cache_completes(store, tmp_path, shared_data):
    """EXP-Bench 18439 and 18244, their repositories the real tarballs in the cache, no --repo: every gold run
    completes (`infra_error` on all of them was the bug) and records the pinned commit."""
    from failatlas.bench_core.repos import AddParams, add
    from failatlas.bench_core.tasks import TaskImportParams
    from failatlas.bench_core.tasks import run as import_tasks

    papers = [shared_data / "expbench" / "iclr2024" / f"{paper}.json" for paper in (18439, 18244)]
    import_tasks(store, TaskImportParams(paths=papers, options={"index": shared_data / "expbench" /
                                                                "iclr2024_index.jsonl"}))
    pins = {}
    for tarball in ("apple__ml-calibration.tar.gz", "Hank0626__PDF.tar.gz"):
        entry = add(store, AddParams(source=str(shared_data / "repos" / tarball), cache_dir=tmp_path / "cache")).entry
        pins[entry.url] = entry.commit
    result = run(store, BenchParams(agent="gold", benchmark="expbench", sandbox="local", gpu_tasks=True, workers=2,
                                    runs_dir=tmp_path / "runs"))
    rows = store.query_dicts("SELECT task_id, status, infra_error, repo_url, repo_commit, outputs FROM runs")
    assert result.not_run == [] and len(rows) == 13
    assert {r["status"] for r in rows} == {"completed"}, [r["infra_error"] for r in rows]
    assert {r["repo_url"]: r["repo_commit"] for r in rows} == pins
    assert pins["https://github.com/apple/ml-calibration"] == "18ff21a7e4e409fc4885690129f50211b32ea144"
    assert all(json.loads(r["outputs"])["changed_files"] for r in rows if "18439" in r["task_id"])
