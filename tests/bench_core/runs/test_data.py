"""Data inputs of runs (`--data NAME=PATH`, a task's `data:`): parsed and checked with errors naming the option,
mounted read-only in the run's sandbox, recorded with the run, and mounted again (or refused, when changed) by the
re-score; `tasks validate` takes the same options as `bench run`."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from failatlas.bench_core.runs import BenchParams, run
from failatlas.bench_core.runs.data import DataInput, parse_data_options, task_data
from failatlas.bench_core.scoring import ScoreParams
from failatlas.bench_core.scoring import run as score
from failatlas.bench_core.suites import load_suite
from failatlas.bench_core.tasks import save_tasks
from failatlas.core.errors import ConfigError

TASK = "mini-ridge-cv"


@pytest.fixture
def data() -> Iterator[Path]:
    top = Path(tempfile.mkdtemp(prefix="failatlas-data-test-", dir="/tmp"))
    top.chmod(0o755)
    (top / "ml").mkdir()
    (top / "ml" / "rows.csv").write_text("x\n1\n")
    yield top / "ml"
    shutil.rmtree(top)


@pytest.fixture
def mini(store):
    save_tasks(store, load_suite("failatlas-mini"), source="failatlas-mini")
    return store


@pytest.mark.parametrize(("value", "message"), [
    ("ml", "is not NAME=PATH"), ("=/tmp", "is not an identifier"), ("ml-1m=/tmp", "is not an identifier"),
    ("ml=/no/such/folder", "does not exist"),
])
def test_bad_values_name_the_option(value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as raised:
        parse_data_options([value])
    assert str(raised.value).startswith("--data")


def test_a_name_given_twice_is_refused(data: Path) -> None:
    with pytest.raises(ConfigError, match="given twice"):
        parse_data_options([f"ml={data}", f"ml={data}"])
    assert parse_data_options([f"ml={data}/../ml"]) == {"ml": data.resolve()}


@pytest.mark.parametrize("where", ["store", "runs"])
def test_the_cli_refuses_data_holding_or_inside_the_store_folders(mini, tmp_path: Path, where: str) -> None:
    from failatlas.cli import app

    path = mini.path.parent if where == "store" else tmp_path / "runs" / "x"
    path.mkdir(parents=True, exist_ok=True)
    for command in (["bench", "run", "--agent", "null", "--runs-dir", str(tmp_path / "runs")],
                    ["tasks", "validate", "--runs-dir", str(tmp_path / "runs")]):
        res = CliRunner().invoke(app, ["--db", str(mini.path), *command, "--task", TASK, "--sandbox", "local",
                                       "--data", f"ml={path}"])
        said = _error(res)
        assert "--data ml=" in said and ("hold the store" if where == "store" else "lie inside") in said


def test_validate_takes_the_run_options(mini, data: Path) -> None:
    from failatlas.cli import app

    res = CliRunner().invoke(app, ["--db", str(mini.path), "tasks", "validate", "--task", "no-such-task",
                                   "--sandbox", "local", "--gpus", "0", "--timeout", "30", "--network", "none",
                                   "--allow-host", "pypi.org", "--max-copy-mib", "64", "--data", f"ml={data}"])
    assert res.exit_code == 3 and "no-such-task" in res.output  # parsed; then the task is not found
    bad = CliRunner().invoke(app, ["--db", str(mini.path), "tasks", "validate", "--task", TASK, "--sandbox",
                                   "local", "--network", "everything"])
    assert "--network" in _error(bad)


def _error(res) -> str:
    """What a command that failed with a ConfigError said (as one line on stderr, or as the exception CliRunner
    caught from a group that leaves the mapping to `failatlas.cli.main`)."""
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        assert isinstance(res.exception, ConfigError), res.exception
        return str(res.exception)
    assert res.exit_code == 2, res.output
    return res.output


def test_a_declared_input_must_be_given_or_bundled(mini, data: Path) -> None:
    from failatlas.bench_core.tasks.catalog import get_task

    task = get_task(mini, TASK).model_copy(update={"data": {"ml": None}})
    assert task_data(task, {}) == ({}, "data input ml is not given; pass --data ml=PATH")
    assert task_data(task, {"ml": data}) == ({"ml": data}, None)
    holding = task.model_copy(update={"data": {"suite": "."}})  # the task's own folder holds its ground truth
    assert "holds the task file" in task_data(holding, {})[1]


@pytest.mark.docker
def test_a_run_reads_its_data_read_only_and_a_rescore_refuses_changed_data(mini, data: Path, tmp_path: Path,
                                                                           sandbox_image: str) -> None:
    command = ("mkdir -p .failatlas && { cat /data/ml/rows.csv; touch /data/ml/new && echo wrote; "
               "echo $FAILATLAS_DATA_ml; } > .failatlas/conclusion.md 2>/dev/null")
    result = run(mini, BenchParams(agent="command", agent_params={"command": command}, task_ids=[TASK],
                                   sandbox="docker", runs_dir=tmp_path / "runs", data={"ml": data}))
    assert result.by_status == {"completed": 1}, result
    run_id = result.run_ids[0]
    outputs, inputs = mini.query("SELECT outputs, inputs FROM runs WHERE id = ?", [run_id])[0]
    assert json.loads(outputs)["conclusion"] == "x\n1\n/data/ml\n"
    used = DataInput.model_validate(json.loads(inputs)["data"]["ml"])
    assert (used.path, used.files, used.bytes) == (str(data.resolve()), 1, 4) and used.changed() is None
    assert not (data / "new").exists()
    (data / "more.csv").write_text("2\n")
    scored = score(mini, ScoreParams(run_ids=[run_id], runs_dir=tmp_path / "runs", llm=False))
    assert scored.scored == 0 and "data input ml" in scored.infra_errors[0] and "changed" in scored.infra_errors[0]


def test_the_copy_out_cap_is_an_option_and_its_error_points_at_data(mini, tmp_path: Path) -> None:
    command = "head -c 1500000 /dev/zero > big.bin; head -c 1500000 /dev/zero > big2.bin"
    params = BenchParams(agent="command", agent_params={"command": command}, task_ids=[TASK], sandbox="local",
                         runs_dir=tmp_path / "runs", max_copy_mib=2)
    result = run(mini, params)
    assert result.by_status == {"agent_error": 1}
    error = json.loads(mini.query("SELECT outputs FROM runs WHERE id = ?", [result.run_ids[0]])[0][0])["log"]
    assert f"total cap of {2 * 1024 * 1024} bytes" in error and "--data NAME=PATH" in error
    assert "--max-copy-mib" in error
