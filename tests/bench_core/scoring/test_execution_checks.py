"""The validator compares something or says `not_scored`: real re-runs in local sandboxes, from clean trees
prepared from a bundled repository in a temporary folder, checked by user-supplied checks (RExBench), by the
numbers of an expected outcome (EXP-Bench, the agent's run script re-run), or handed to the execution judge."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from failatlas.bench_core.runs.diff import tree_diff
from failatlas.bench_core.scoring.checks.base import Verdict
from failatlas.bench_core.scoring.checks.execution import validate
from failatlas.bench_core.scoring.evidence.rerun import patched_workspace
from failatlas.bench_core.scoring.settle import settle_execution as settle
from failatlas.bench_core.tasks.model import OutputCheck, RepoRef, RunSpec, TaskKind, TaskSpec

MAKE_OUTPUTS = textwrap.dedent("""
    import json, os, sys
    scale = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    os.makedirs("out", exist_ok=True)
    with open("out/metrics.csv", "w") as f:
        f.write("epoch,acc\\n1,0.70\\n2,%.2f\\n3,0.88\\n" % (0.93 * scale))
    with open("out/result.json", "w") as f:
        json.dump({"eval": {"name": "bleu", "scores": [0.1, 0.5 * scale]}}, f)
    print("training done")
    print("final accuracy: %.3f" % (0.91 * scale))
""")
CHECKS = [
    OutputCheck(name="acc-stdout", source="stdout_regex", pattern=r"final accuracy: ([\d.]+)", value=0.91,
                rtol=0.01),
    OutputCheck(name="acc-last", source="csv_column", file="out/metrics.csv", column="acc", value=0.88),
    OutputCheck(name="acc-max", source="csv_column", file="out/metrics.csv", column="acc", row="max", value=0.93,
                atol=0.005),
    OutputCheck(name="score", source="json_field", file="out/result.json", field="eval.scores[1]", value=0.5),
    OutputCheck(name="metric-name", source="json_field", file="out/result.json", field="eval.name", value="bleu"),
]


def _task(tmp_path: Path, files: dict[str, str], **fields) -> TaskSpec:
    """A task whose bundled repository (beside its task file in `tmp_path`) holds `files`."""
    repo = tmp_path / "task" / "repo"
    repo.mkdir(parents=True)
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    base = dict(id="t-exec", benchmark="rexbench", kind=TaskKind.EXTENSION, question="Does the extension work?",
                repository=RepoRef(local_path="repo"), source=str(tmp_path / "task" / "task.json"))
    return TaskSpec(**{**base, **fields})


def _validate(tmp_path: Path, task: TaskSpec, outputs: dict | None = None):
    outputs = outputs or {"diff": "", "changed_files": []}
    scratch = tmp_path / f"scratch-{len(list(tmp_path.glob('scratch-*')))}"
    clean, error = patched_workspace(task, outputs.get("diff") or "", scratch=scratch)
    return validate(task, outputs, workspace=clean, patch_error=error, sandbox_backend="local",
                    spec_fields={"workdir": "/workspace"})


def _agent_diff(tmp_path: Path, task: TaskSpec, files: dict[str, str]) -> dict:
    """The outputs of an agent that added `files` to the prepared tree: its diff and changed files."""
    before = patched_workspace(task, "", scratch=tmp_path / "agent-before")[0]
    after = tmp_path / "agent-after"
    shutil.copytree(before, after, symlinks=True)
    for rel, text in files.items():
        (after / rel).parent.mkdir(parents=True, exist_ok=True)
        (after / rel).write_text(text)
    diff, changed = tree_diff(before, after)
    return {"diff": diff, "changed_files": changed}


def test_a_rerun_with_nothing_to_compare_is_not_scored_never_passed(tmp_path):
    task = _task(tmp_path, {"main.py": "print(42)\n"}, run=RunSpec(command="python3 main.py"))
    v = _validate(tmp_path, task)
    assert (v.outcome, v.exit_code) == ("not_scored", 0)
    assert "nothing to compare" in v.detail and v.metrics == {} and "42" in v.stdout_tail
    crash = _task(tmp_path / "crash", {"main.py": "raise SystemExit(3)\n"}, run=RunSpec(command="python3 main.py"))
    assert _validate(tmp_path, crash).outcome == "runtime_error"  # a re-run that fails is still a failure


def test_every_check_source_passes_on_files_the_rerun_wrote(tmp_path):
    task = _task(tmp_path, {"make.py": MAKE_OUTPUTS}, run=RunSpec(command="python3 make.py"), checks=CHECKS)
    v = _validate(tmp_path, task)
    assert v.outcome == "passed", v.detail
    assert {name: row["ok"] for name, row in v.metrics.items()} == {c.name: True for c in CHECKS}
    assert v.metrics["acc-stdout"]["observed"] == "0.910" and v.metrics["metric-name"]["observed"] == "bleu"
    assert v.metrics["acc-max"]["observed"] == pytest.approx(0.93)


def test_every_check_source_fails_when_the_rerun_wrote_other_values(tmp_path):
    task = _task(tmp_path, {"make.py": MAKE_OUTPUTS}, run=RunSpec(command="python3 make.py 0.8"), checks=CHECKS)
    v = _validate(tmp_path, task)
    assert v.outcome == "wrong_value"
    failed = {name for name, row in v.metrics.items() if not row["ok"]}
    assert failed == {"acc-stdout", "acc-max", "score"}  # the others do not depend on the scale
    assert all(name in v.detail for name in failed)
    renamed = _task(tmp_path / "b", {"make.py": MAKE_OUTPUTS}, run=RunSpec(command="python3 make.py"), checks=[
        OutputCheck(name="missing-column", source="csv_column", file="out/metrics.csv", column="f1", value=1.0),
        OutputCheck(name="missing-file", source="json_field", file="out/none.json", field="a", value=1.0),
        OutputCheck(name="string", source="json_field", file="out/result.json", field="eval.name", value="rouge")])
    v = _validate(tmp_path, renamed)
    assert v.outcome == "wrong_value" and not any(row["ok"] for row in v.metrics.values())
    assert "no column 'f1'" in v.metrics["missing-column"]["problem"]
    assert "did not write out/none.json" in v.metrics["missing-file"]["problem"]


def test_a_check_never_reads_through_a_link_or_a_fifo(tmp_path):
    host = tmp_path / "host.json"
    host.write_text(json.dumps({"eval": {"scores": [0, 0.5]}}))
    plant = textwrap.dedent(f"""
        import os
        os.makedirs("out", exist_ok=True)
        os.symlink({str(host)!r}, "out/result.json")
        os.mkfifo("out/metrics.csv")
    """)
    task = _task(tmp_path, {"plant.py": plant}, run=RunSpec(command="python3 plant.py"),
                 checks=[CHECKS[1], CHECKS[3]])
    v = _validate(tmp_path, task)
    assert v.outcome == "wrong_value"
    assert all("not a readable file" in row["problem"] for row in v.metrics.values()), v.metrics


def test_check_files_carried_by_the_diff_are_deleted_before_the_rerun(tmp_path):
    task = _task(tmp_path, {"main.py": "print('nothing written')\n"}, run=RunSpec(command="python3 main.py"),
                 checks=[CHECKS[3]])
    outputs = _agent_diff(tmp_path, task, {"out/result.json": json.dumps({"eval": {"scores": [0.1, 0.5]}})})
    assert outputs["changed_files"] == ["out/result.json"]
    v = _validate(tmp_path, task, outputs)
    assert v.outcome == "fabricated_result" and "did not write out/result.json" in v.detail


def _report(mse: float, mae: float) -> str:
    """A script logging the way a run script might, then printing its answer as one JSON object: a percentage
    and a fraction."""
    return (f"print('epoch 10, loss 0.731, MSE reduction vs TimesNet: {mse}%')\n"
            f"print('{{\"MSE reduction\": \"{mse}%\", \"MAE reduction\": {mae}}}')\n")


def _expbench_task(tmp_path: Path, shared_data: Path, paper: str, index: int) -> TaskSpec:
    outcome = json.loads((shared_data / "expbench" / "iclr2024" / f"{paper}.json").read_text())
    return _task(tmp_path, {"README.md": "the paper's code\n"}, benchmark="expbench", kind=TaskKind.T3,
                 run=RunSpec(agent_script=True), expected_conclusion=outcome["questions"][index]["expected_outcome"])


def test_expbench_rerun_of_the_agents_script_must_print_the_expected_numbers(tmp_path, shared_data):
    task = _expbench_task(tmp_path, shared_data, "18244", 1)  # "approximately 24.61% in MSE and 19.91% in MAE"
    assert "execution" in task.judgeable_phases
    outputs = _agent_diff(tmp_path, task, {"report.py": _report(24.3, 0.2)})
    v = _validate(tmp_path, task, {**outputs, "run_script": "python3 report.py\n"})
    assert v.outcome == "passed", v.detail
    assert v.command == "bash .failatlas/run.sh" and set(v.metrics) == {"24.61%", "19.91%"}
    wrong = _agent_diff(tmp_path / "w", task, {"report.py": _report(24.3, 0.31)})
    v = _validate(tmp_path, task, {**wrong, "run_script": "python3 report.py\n"})
    assert v.outcome == "wrong_value" and "19.91%" in v.detail and "24.61%" not in v.detail
    assert _validate(tmp_path, task, outputs).outcome == "not_run"  # no run script: nothing of the agent's to run


def test_expbench_numbers_count_only_in_the_declared_answer_and_a_spread_of_values_is_no_answer(tmp_path,
                                                                                              shared_data):
    task = _expbench_task(tmp_path, shared_data, "18244", 1)  # "approximately 24.61% in MSE and 19.91% in MAE"
    # the right numbers in the log but no JSON answer: not checked, not passed
    log_only = "print('MSE reduction: 24.61%'); print('MAE reduction: 19.91%')"
    v = _validate(tmp_path, task, {"diff": "", "changed_files": [], "run_script": f'python3 -c "{log_only}"\n'})
    assert v.outcome == "wrong_value" and "no JSON answer" in v.detail
    # 400 values spaced on a log scale cover every number within 5 %: printed or as an answer, never a pass
    spread = "import numpy as n; v = n.round(n.geomspace(1e-4, 1e5, 400), 6)"
    for script in (f"{spread}; print(*v)", f"{spread}; import json; print(json.dumps(dict(enumerate(v.tolist()))))"):
        v = _validate(tmp_path, task, {"diff": "", "changed_files": [], "run_script": f'python3 -c "{script}"\n'})
        assert v.outcome == "wrong_value", (script, v.detail)
    assert "a spread of values is not an answer" in v.detail


def test_a_prose_outcome_waits_for_the_execution_judge(tmp_path, shared_data):
    task = _expbench_task(tmp_path, shared_data, "17388", 0)  # prose: no number is a result
    v = _validate(tmp_path, task, {"diff": "", "changed_files": [], "run_script": "echo 'gpt-4 wins: 4.2 vs 2.1'\n"})
    assert (v.outcome, v.awaiting_judge) == ("not_scored", True)
    assert "gpt-4 wins" in v.judge_output and "execution-llm" in v.detail
    not_run = Verdict("execution", "execution-llm", status="not_run", reason="no LLM endpoint configured")
    undecided = settle(v, [not_run])
    assert undecided.outcome == "not_scored" and "no LLM endpoint configured" in undecided.detail
    assert "no LLM endpoint configured" not in v.detail  # the reducer makes a new record, never changes the check's
    consistent = Verdict("execution", "execution-llm", score=1.0, passed=True, kind="llm")
    assert settle(v, [consistent]).outcome == "passed"
    failing = _validate(tmp_path, task, {"diff": "", "changed_files": [], "run_script": "exit 1\n"})
    assert failing.outcome == "runtime_error" and not failing.awaiting_judge


def test_the_run_script_is_placed_even_when_the_clean_tree_has_an_output_folder(tmp_path):
    task = _task(tmp_path, {".failatlas/keep": "x\n", "data.txt": "0.5\n"}, run=RunSpec(agent_script=True),
                 checks=[OutputCheck(name="v", source="stdout_regex", pattern=r"v=([\d.]+)", value=0.5)])
    v = _validate(tmp_path, task, {"diff": "", "changed_files": [], "run_script": "echo v=$(cat data.txt)\n"})
    assert v.outcome == "passed", v.detail


def test_the_execution_judge_decides_a_prose_outcome_over_real_http(tmp_path, shared_data):
    """Against the scripted fake OpenAI-compatible server (a stand-in for a paid model): its verdict settles the
    re-run; a reply that never parses leaves it not scored; a re-run that awaits no judge gets no verdict."""
    from failatlas.bench_core.scoring.checks.base import JudgeInput
    from failatlas.bench_core.scoring.checks.llm import ExecutionLLMJudge
    from failatlas.core.llm import LLMClient, LLMConfig
    from failatlas.core.llm.testing import ScriptedOpenAIServer, ScriptedReply

    task = _expbench_task(tmp_path, shared_data, "17388", 0)
    outputs = {"diff": "", "changed_files": [], "run_script": "echo 'overall: gpt-4 4.01, llama-2-13b 0.55'\n"}
    replies = [ScriptedReply.json({"consistent": True, "error_analysis": ""}),
               ScriptedReply.json({"consistent": False, "error_analysis": "The output compares no OSS model."})]
    verdicts = []
    with ScriptedOpenAIServer(replies + [ScriptedReply.text("{not json")] * 3) as server:
        judge = ExecutionLLMJudge(LLMClient(LLMConfig(base_url=server.base_url, model="scripted", max_retries=0,
                                                      timeout_s=10)))
        for _ in range(3):
            v = _validate(tmp_path, task, outputs)
            [verdict] = judge(JudgeInput(task=task, outputs=outputs, validation=v))
            verdicts.append((verdict, settle(v, [verdict])))
        prompt = server.requests[0].body["messages"][-1]["content"]
        assert "gpt-4 4.01" in prompt and task.expected_conclusion[:80] in prompt
        assert judge(JudgeInput(task=task, outputs=outputs, validation=None)) == []
    (ok, passed), (bad, failed), (broken, unsettled) = verdicts
    assert (ok.phase, ok.judge, ok.passed, passed.outcome) == ("execution", "execution-llm", True, "passed")
    assert (bad.passed, failed.outcome) == (False, "wrong_value") and "no OSS model" in failed.detail
    assert broken.status == "judge_failed" and broken.passed is None
    assert unsettled.outcome == "not_scored" and "did not parse" in unsettled.detail
