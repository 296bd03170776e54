"""E on real tasks through the stages, in a real DuckDB file and local sandboxes: a copy of a real AutoExperiment
row (mlrc_n=1.jsonl, paper 2205.00048, read in place; its `code/` folder copied beside it as the importer expects)
with its run command changed, run by an agent whose run script runs it, and scored. A run that prints nothing
never passes: its 72 expected numbers are checked, and none was printed; one whose command prints the stored answer
matches every number but needs none of the masked code, so its E is not scored. A run whose repository is
unavailable is reported and left unscored."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from failatlas.bench_core import runs, scoring
from failatlas.bench_core.scoring.metrics import run_scores
from failatlas.bench_core.tasks import TaskImportParams, save_tasks
from failatlas.bench_core.tasks import run as import_tasks
from failatlas.bench_core.tasks.catalog import get_task

pytestmark = pytest.mark.slow  # runs sandboxes (Docker, bwrap) or the app server: out of the README's quick command

PAPER = "2205.00048"
PRINT_ANSWER = "import json, sys\nprint('metrics computed')\nprint(json.dumps(json.load(open(sys.argv[1]))))\n"


@pytest.fixture(autouse=True)
def _no_llm(monkeypatch):
    for name in list(os.environ):
        if name.startswith("FAILATLAS_LLM"):
            monkeypatch.delenv(name)


def _rows(shared_data: Path) -> list[dict]:
    path = shared_data / "autoexperiment" / "MLRC" / "mlrc_n=1.jsonl"
    return [row for row in map(json.loads, path.read_text().splitlines()) if row["paper_id"] == PAPER]


def _answer(results: dict, *, scale_first: float = 1.0) -> dict:
    """The row's gold results, with Experiment 1's first metric scaled."""
    answer = json.loads(json.dumps(results))
    first = next(iter(answer["Experiment 1"]))
    answer["Experiment 1"][first] = [v * scale_first for v in answer["Experiment 1"][first]]
    return answer


@pytest.fixture
def autoexperiment_store(store, tmp_path, shared_data):
    """Three real rows of one paper, each with its command replaced: one prints nothing to compare, one prints the
    gold answer, one an answer with one metric 10 % off (tolerance: 5 %). Imported into the store."""
    folder = tmp_path / "MLRC"
    shutil.copytree(shared_data / "autoexperiment" / "MLRC" / PAPER / "code", folder / PAPER / "code")
    rows = _rows(shared_data)[:3]
    answers = {"gold.json": _answer(rows[1]["results"]), "off.json": _answer(rows[2]["results"], scale_first=1.1)}
    for name, answer in answers.items():
        (folder / PAPER / "code" / name).write_text(json.dumps(answer))
    (folder / PAPER / "code" / "print_answer.py").write_text(PRINT_ANSWER)
    commands = ['python3 -c "print(42)"', "python3 print_answer.py gold.json", "python3 print_answer.py off.json"]
    with (folder / "mlrc_n=1.jsonl").open("w") as out:
        for row, command in zip(rows, commands, strict=True):
            out.write(json.dumps({**row, "solution": command}) + "\n")
    import_tasks(store, TaskImportParams(paths=[folder / "mlrc_n=1.jsonl"]))
    ids = [f"autoexperiment-{PAPER}_{row['func_ids']}" for row in rows]
    # the answer is what the agent's own run script prints (the task's command is the hidden reference run, never
    # run for the agent): each agent leaves the script that runs its row's command
    for task_id, command in zip(ids, commands, strict=True):
        script = f"mkdir -p .failatlas && cat > .failatlas/run.sh <<'RUN'\n{command}\nRUN"
        runs.run(store, runs.BenchParams(agent="command", agent_params={"command": script}, task_ids=[task_id],
                                         sandbox="local", runs_dir=tmp_path / "runs"))
    return store, ids


def _outcomes(store) -> dict[str, dict]:
    rows = store.query_dicts("SELECT r.task_id, v.outcome, v.detail, v.metrics FROM runs r"
                             " JOIN validations v ON v.run_id = r.id")
    return {r["task_id"]: {**r, "metrics": json.loads(r["metrics"])} for r in rows}


def test_the_null_agent_never_passes_a_real_row_that_prints_no_answer(autoexperiment_store, tmp_path):
    store, (printed_nothing, printed_gold, printed_off) = autoexperiment_store
    task = get_task(store, printed_nothing)
    assert len(task.expected_results) == 72 and task.run.command == 'python3 -c "print(42)"'
    result = scoring.run(store, scoring.ScoreParams(sandbox="local", runs_dir=tmp_path / "runs"))
    assert result.scored == 3 and result.infra_errors == [] and result.unavailable == []
    got = _outcomes(store)
    nothing = got[printed_nothing]
    assert nothing["outcome"] == "wrong_value" and "no JSON answer in the output" in nothing["detail"]
    assert len(nothing["metrics"]) == 72 and not any(m["ok"] for m in nothing["metrics"].values())
    # the task's own command prints the stored answer: E runs it on the constructed tree, read where the reference's
    # own run printed it, and every number matches; but it passes with every masked part left as its stub too, so
    # the task's check does not depend on the implementation: not scored, never a pass (issue 38)
    gold = got[printed_gold]
    assert gold["outcome"] == "not_scored" and "do not depend on the implementation" in gold["detail"], gold["detail"]
    assert all(m["ok"] for m in gold["metrics"].values())
    off = got[printed_off]
    assert off["outcome"] == "wrong_value" and "Experiment 1.IIF[0]" in off["detail"]
    assert [k for k, m in off["metrics"].items() if not m["ok"]] == ["Experiment 1.IIF[0]"]
    scores = {r["task_id"]: r["E"] for r in run_scores(store).iter_rows(named=True)}
    assert scores == {printed_nothing: 0, printed_gold: None, printed_off: 0}


def test_a_run_whose_repository_is_gone_or_unusable_is_reported_and_not_scored(autoexperiment_store, tmp_path):
    store, ids = autoexperiment_store
    code = tmp_path / "MLRC" / PAPER / "code"
    masked = code / "src" / "utils" / "evaluation_functions" / "fairness_metrics.py"
    masked.rename(masked.with_suffix(".bak"))  # the masked functions' file: the task cannot be prepared
    result = scoring.run(store, scoring.ScoreParams(sandbox="local", runs_dir=tmp_path / "runs"))
    assert result.scored == 0 and len(result.unavailable) == 3
    assert all("cannot be prepared" in line and "fairness_metrics.py" in line for line in result.unavailable)
    shutil.rmtree(code)
    result = scoring.run(store, scoring.ScoreParams(sandbox="local", runs_dir=tmp_path / "runs"))
    assert result.scored == 0 and len(result.unavailable) == 3
    assert all("repository not available" in line for line in result.unavailable)
    assert store.query("SELECT count(*) FROM validations")[0][0] == 0
    assert store.query("SELECT count(*) FROM runs WHERE status = 'infra_error'")[0][0] == 0


def test_a_prose_outcome_without_a_judge_leaves_e_unscored(store, tmp_path, shared_data):
    """An EXP-Bench-like task (a real prose expected outcome) whose agent leaves a run script: the clean re-run
    runs it, the execution judge has no endpoint, so E is not scored, never passed."""
    from failatlas.bench_core.tasks.model import RepoRef, RunSpec, TaskKind, TaskSpec

    (tmp_path / "task" / "repo").mkdir(parents=True)
    (tmp_path / "task" / "repo" / "README.md").write_text("code\n")
    outcome = json.loads((shared_data / "expbench" / "iclr2024" / "17388.json").read_text())
    task = TaskSpec(id="expbench-prose", benchmark="expbench", kind=TaskKind.T3, question="Do API LLMs win?",
                    repository=RepoRef(local_path="repo"), source=str(tmp_path / "task" / "task.json"),
                    run=RunSpec(agent_script=True),
                    expected_conclusion=outcome["questions"][0]["expected_outcome"])
    save_tasks(store, [task])
    script = "mkdir -p .failatlas && echo 'echo gpt-4 scores 4.01, llama-2-13b 0.55' > .failatlas/run.sh"
    runs.run(store, runs.BenchParams(agent="command", agent_params={"command": script}, task_ids=[task.id],
                                     sandbox="local", runs_dir=tmp_path / "runs"))
    result = scoring.run(store, scoring.ScoreParams(sandbox="local", runs_dir=tmp_path / "runs"))
    assert result.outcomes == {"not_scored": 1}
    [v] = store.query_dicts("SELECT outcome, command, detail, stdout_tail FROM validations")
    assert v["command"] == "bash .failatlas/run.sh" and "gpt-4 scores" in v["stdout_tail"]
    assert "execution-llm" in v["detail"] and "no LLM endpoint configured" in v["detail"]
    [judge] = store.query_dicts("SELECT status, passed FROM judgements WHERE judge = 'execution-llm'")
    assert judge == {"status": "not_run", "passed": None}
    [row] = run_scores(store).iter_rows(named=True)
    assert row["E"] is None and row["M·C·D·I·E"] is None
