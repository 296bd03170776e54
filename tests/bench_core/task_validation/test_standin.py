"""Expected values from the reference's own run on given data (issue 40): a task whose expected values are the
paper's, measured on data that is not here, is `gold-fails` on a stand-in; `tasks validate --expected-from-reference`
validates its variant instead, valued by the reference's printed answer on that data, where gold passes because the
constructed tree reproduces the reference and null fails; the variant is stored, reused, and refuses other data."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from failatlas.bench_core.runs import BenchParams
from failatlas.bench_core.runs import run as run_agents
from failatlas.bench_core.task_validation import ValidateParams, run
from failatlas.bench_core.task_validation.standin import KEY, SUFFIX
from failatlas.bench_core.tasks import get_task
from failatlas.bench_core.tasks.catalog import save_tasks
from failatlas.bench_core.tasks.model import ExpectedMetric, Masking, RepoRef, RunSpec, TaskSpec

pytestmark = pytest.mark.slow  # runs sandboxes (Docker, bwrap) or the app server: out of the README's quick command

RUN = '''import json, os
from stats import mean_of, spread_of
values = [float(x) for x in open(os.path.join(os.environ["FAILATLAS_DATA_nums"], "values.txt")).read().split()]
print("loaded", len(values), "values")
print("Experiment 1")
print({"mean": [mean_of(values)], "spread": [spread_of(values)]})
'''
STATS = '''def mean_of(values):
    """The arithmetic mean of `values`."""
    return sum(values) / len(values)


def spread_of(values):
    """The largest value minus the smallest."""
    return max(values) - min(values)
'''


@pytest.fixture
def nums() -> Iterator[Path]:
    """Two data folders sandbox users can reach (pytest's tmp_path is the harness's alone)."""
    with tempfile.TemporaryDirectory(prefix="failatlas-standin-test-", dir="/tmp") as name:
        top = Path(name)
        top.chmod(0o755)
        for folder, values in (("nums", "1 2 3 4 10\n"), ("other", "5 5 5 6\n")):
            (top / folder).mkdir()
            (top / folder / "values.txt").write_text(values)
        yield top


def _task(tmp_path: Path) -> TaskSpec:
    """An AutoExperiment-shaped task: masked functions, the reference command prints the answer (a Python dict
    per experiment), the agent's script is the claim, and the expected values are the 'paper's' (data not here)."""
    folder = tmp_path / "paper-task"
    (folder / "repo").mkdir(parents=True)
    (folder / "repo" / "run.py").write_text(RUN)
    (folder / "repo" / "stats.py").write_text(STATS)
    (folder / "task.json").write_text("{}")
    return TaskSpec(id="toy-paper_0", benchmark="toy", kind="masked_functions",
                    question="What are the mean and spread of the values?", repository=RepoRef(local_path="repo"),
                    source=str(folder / "task.json"), masking=Masking(functions=[
                        {"path": "stats.py", "qualname": "mean_of"}, {"path": "stats.py", "qualname": "spread_of"}]),
                    run=RunSpec(command="echo Experiment 1\npython3 run.py", agent_script=True, timeout_s=120),
                    data={"nums": None},
                    expected_results=[ExpectedMetric(name="Experiment 1.mean", experiment="Experiment 1",
                                                     value=123.4, rtol=0.01),
                                      ExpectedMetric(name="Experiment 1.spread", experiment="Experiment 1",
                                                     value=77.7, rtol=0.01)])


def test_a_stand_in_gold_fails_on_paper_values_and_is_valid_on_the_references(store, tmp_path, nums):
    task = _task(tmp_path)
    save_tasks(store, [task], source="toy")
    common = dict(task_ids=[task.id], sandbox="local", runs_dir=tmp_path / "runs", mutants=0, method_mutants=0,
                  data={"nums": nums / "nums"})
    [plain] = run(store, ValidateParams(**common)).verdicts
    assert plain.task_id == task.id and plain.status == "gold-fails", plain

    [verdict] = run(store, ValidateParams(**common, expected_from_reference=True)).verdicts
    assert verdict.task_id.startswith(task.id + SUFFIX) and verdict.status == "valid", verdict
    variant = get_task(store, verdict.task_id)
    values = {m.name: m.value for m in variant.expected_results}
    assert values == {"Experiment 1.mean": 4.0, "Experiment 1.spread": 9.0}  # 1 2 3 4 10, from the reference
    made = variant.extra[KEY]
    assert made["of"] == task.id and made["paper_values"]["Experiment 1.mean"] == 123.4
    assert set(made["data"]) == {"nums"} and "path" not in made["data"]["nums"]
    assert any("not the paper's" in w for w in variant.warnings)
    assert get_task(store, task.id).expected_results[0].value == 123.4  # the paper-valued task is unchanged

    from failatlas.bench_core.scoring.report import report_notes

    said = [line for line in report_notes(store) if "+ref-" in line]
    agents = [a for (a,) in store.query("SELECT agent FROM runs WHERE task_id = ?", [verdict.task_id])]
    assert {"gold", "null"} <= set(agents)  # every run validation made of the stand-in
    assert said and said[0].startswith(f"{len(agents)} scored run(s) of 1 task(s) are judged against the reference's"
                                       " own run")

    [again] = run(store, ValidateParams(**common, expected_from_reference=True)).verdicts
    assert again.task_id == verdict.task_id  # the same data: the stored variant, not a new one
    [(count,)] = store.query(f"SELECT count(*) FROM tasks WHERE id LIKE '{task.id}{SUFFIX}%'")
    assert count == 1

    result = run_agents(store, BenchParams(agent="null", task_ids=[verdict.task_id], sandbox="local",
                                           runs_dir=tmp_path / "runs2", data={"nums": nums / "other"}))
    assert result.run_ids == [] and any("taken on other data for nums" in line for line in result.not_run)


def test_a_reference_that_names_no_value_keeps_the_task(store, tmp_path, nums):
    task = _task(tmp_path)
    (Path(task.source).parent / "repo" / "run.py").write_text(RUN.replace('print({"mean"', 'print("m", {"avg"'))
    save_tasks(store, [task], source="toy")
    result = run(store, ValidateParams(task_ids=[task.id], sandbox="local", runs_dir=tmp_path / "runs", mutants=0,
                                       method_mutants=0, data={"nums": nums / "nums"}, expected_from_reference=True))
    [verdict] = result.verdicts
    assert verdict.task_id == task.id and verdict.status == "gold-fails"
    [(summary,)] = store.query("SELECT summary FROM stage_runs WHERE id = ?", [result.stage_run_id])
    assert "names no value for 1 expected metric(s)" in str(summary)


def test_the_cli_takes_the_option(store, tmp_path, nums):
    from failatlas.cli import app

    task = _task(tmp_path)
    save_tasks(store, [task], source="toy")
    res = CliRunner().invoke(app, ["--db", str(store.path), "tasks", "validate", "--task", task.id, "--sandbox",
                                   "local", "--runs-dir", str(tmp_path / "runs"), "--mutants", "0",
                                   "--method-mutants", "0", "--data",
                                   f"nums={nums / 'nums'}", "--expected-from-reference"])
    assert res.exit_code == 0, res.output
    assert f"{task.id}{SUFFIX}" in res.output and "valid" in res.output


def test_a_variant_runs_on_the_repository_its_task_was_given(store, tmp_path, nums):
    """`repos add COPY --task T` (a copy whose data paths are links into /data) serves T's variant too; a repository
    bound to the variant itself still wins."""
    from failatlas.bench_core.repos import AddParams, add, repository_for
    from failatlas.bench_core.runs.data import fingerprints
    from failatlas.bench_core.task_validation.standin import variant

    task = _task(tmp_path)
    save_tasks(store, [task], source="toy")
    copy = tmp_path / "copy"
    shutil.copytree(Path(task.source).parent / "repo", copy)
    add(store, AddParams(source=str(copy), task_ids=[task.id]))
    made = variant(task, {"Experiment 1.mean": 4.0, "Experiment 1.spread": 9.0},
                   fingerprints({"nums": nums / "nums"}), exit_code=0, seconds=1.0)
    save_tasks(store, [made], source="toy")
    original = repository_for(store, task)
    assert original is not None and repository_for(store, made).path == original.path
    other = tmp_path / "other"
    shutil.copytree(copy, other)
    (other / "marker.txt").write_text("the variant's own\n")
    add(store, AddParams(source=str(other), task_ids=[made.id]))
    assert repository_for(store, made).path != original.path


def test_a_task_file_cannot_borrow_another_tasks_repository(store, tmp_path):
    """A task that only claims, in its `extra`, to be made from another task does not get that task's repository."""
    from failatlas.bench_core.repos import AddParams, add, repository_for

    task = _task(tmp_path)
    save_tasks(store, [task], source="toy")
    copy = tmp_path / "copy"
    shutil.copytree(Path(task.source).parent / "repo", copy)
    add(store, AddParams(source=str(copy), task_ids=[task.id]))
    claimer = task.model_copy(update={"id": "toy-claimer", "extra": {KEY: {"of": task.id, "data": {}}}})
    save_tasks(store, [claimer], source="toy")
    assert repository_for(store, task) is not None and repository_for(store, claimer) is None


def test_a_task_file_cannot_borrow_a_repository_by_naming_itself_a_variant(store, tmp_path):
    """A task file that takes a variant's id (`<task>+ref-<anything>`) and claims that task as its origin, but
    runs something else on it (another command, masking, hidden tests), gets no repository: a variant borrows its
    origin's repository only when it is that task in all but its expected values (what `variant` makes)."""
    from failatlas.bench_core.repos import AddParams, add, repository_for
    from failatlas.bench_core.runs.data import DataInput

    task = _task(tmp_path)
    save_tasks(store, [task], source="toy")
    copy = tmp_path / "copy"
    shutil.copytree(Path(task.source).parent / "repo", copy)
    add(store, AddParams(source=str(copy), task_ids=[task.id]))
    claim = {KEY: {"of": task.id, "data": {}}}
    for update in ({"run": task.run.model_copy(update={"command": "cat secrets.txt"})},
                   {"masking": Masking()}, {"question": "another question"}):
        claimer = task.model_copy(update={"id": f"{task.id}{SUFFIX}00000000", "extra": claim, **update})
        save_tasks(store, [claimer], source="toy")
        assert repository_for(store, claimer) is None, update
    from failatlas.bench_core.task_validation.standin import variant

    made = variant(task, {m.name: m.value + 1 for m in task.expected_results},
                   {"movielens": DataInput(name="movielens", path="/x", files=1, bytes=3, mtime_ns=0)},
                   exit_code=0, seconds=1.0)
    save_tasks(store, [made], source="tasks validate --expected-from-reference")
    assert repository_for(store, made) is not None  # the harness's own variant still runs on its task's repository


@pytest.mark.parametrize("printed", ['{"acc": "high"}', '{"acc": null}', '{"acc": true}', '{"acc": NaN}',
                                     '{"acc": 1e999}', '{"acc": ' + "9" * 400 + "}", '{"acc": [1, 2]}',
                                     '{"acc": {"a": 1}}'])
def test_a_printed_answer_that_is_no_finite_number_values_nothing(printed):
    """The reference's output is the repository's: text, null, a boolean, NaN, infinity or a number past float's
    range is no expected value (it crashed the whole validation with ValueError or TypeError, or became one)."""
    from failatlas.bench_core.task_validation.standin import reference_values

    task = TaskSpec(id="t", benchmark="toy", kind="full_code", question="q?", repository=RepoRef(local_path="r"),
                    run=RunSpec(command="c"), expected_results=[ExpectedMetric(name="acc", value=1.0)])
    assert reference_values(task, printed) == ({}, ["acc"])
    assert reference_values(task, '{"acc": "0.5"}') == ({"acc": 0.5}, [])


@pytest.mark.parametrize("data", [[1], "x", {"movielens": "x"}, {"movielens": [1]}])
def test_a_task_files_malformed_variant_record_is_refused_not_a_crash(data):
    from failatlas.bench_core.runs.data import valued_on_problem

    task = TaskSpec(id="t+ref-00000000", benchmark="toy", kind="full_code", question="q?",
                    repository=RepoRef(local_path="r"), run=RunSpec(command="c"),
                    extra={KEY: {"of": "t", "data": data}})
    assert "unreadable" in valued_on_problem(task, {})


def test_a_variant_is_stored_without_the_validations_overrides_and_keeps_its_repository(store, tmp_path, nums):
    """`--timeout`/`--environment` apply to this validation's runs, not to the stored variant, and a run's copy of
    the variant (overrides applied) still runs on the repository its task was given."""
    from failatlas.bench_core.repos import AddParams, add, repository_for
    from failatlas.bench_core.runs import ResourceOverrides

    task = _task(tmp_path)
    save_tasks(store, [task], source="toy")
    copy = tmp_path / "copy"
    shutil.copytree(Path(task.source).parent / "repo", copy)
    add(store, AddParams(source=str(copy), task_ids=[task.id]))
    overrides = ResourceOverrides(timeout_s=77)
    [verdict] = run(store, ValidateParams(task_ids=[task.id], sandbox="local", runs_dir=tmp_path / "runs",
                                          mutants=0, method_mutants=0, data={"nums": nums / "nums"},
                                          expected_from_reference=True,
                                          resources=overrides)).verdicts
    assert verdict.status == "valid", verdict
    stored = get_task(store, verdict.task_id)
    assert stored.run.timeout_s == task.run.timeout_s == 120
    assert repository_for(store, overrides.apply(stored)).path == repository_for(store, task).path
