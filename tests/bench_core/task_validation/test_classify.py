"""The rules that turn a gold and a null run's scores into a task status (pure: no store, no sandbox)."""

from failatlas.bench_core.task_validation.classify import RunFacts, gold_status, null_status


def facts(status="completed", outcome="passed", output="", error="", failures=(), code_run="IE", **phases):
    base = {"M": 1, "D": None, "I": None, "E": None, "C": None}
    base.update(phases)
    return RunFacts(run_id="run-1", status=status, phases=base, outcome=outcome, detail="", output=output,
                    error=error, failures=tuple(failures), code_run=frozenset(code_run))


def test_gold_passing_everything_checked_leaves_the_decision_to_null():
    assert gold_status(facts(D=1, I=1, E=1, C=1)) is None


def test_nothing_checked_is_not_checkable_never_valid():
    assert gold_status(facts(outcome="not_scored"))[0] == "not-checkable"


def test_environment_data_and_gpu_failures_are_told_apart_from_a_broken_task():
    env = facts(E=0, outcome="env_setup", output="ModuleNotFoundError: No module named 'torch'")
    data = facts(E=0, outcome="runtime_error",
                 output="FileNotFoundError: [Errno 2] No such file or directory: 'data/celeba/list_attr.txt'")
    net = facts(E=0, outcome="runtime_error", output="OSError: Temporary failure in name resolution")
    gpu = facts(E=0, outcome="runtime_error", output="AssertionError: Torch not compiled with CUDA enabled")
    broken = facts(E=0, outcome="wrong_value", output="accuracy 0.12")
    assert gold_status(env)[0] == "env-failed"
    assert gold_status(data)[0] == "data-unavailable"
    assert gold_status(net)[0] == "data-unavailable"
    assert gold_status(gpu)[0] == "needs-gpu"
    status, reason = gold_status(broken)
    assert status == "gold-fails" and "wrong_value" in reason


def test_a_missing_python_file_is_not_mistaken_for_missing_data():
    code = facts(E=0, outcome="runtime_error", output="python3: can't open file 'train.py': [Errno 2] No such file"
                 " or directory")
    assert gold_status(code)[0] == "gold-fails"


def test_gold_failing_a_judge_names_it():
    status, reason = gold_status(facts(D=0, I=1, failures=["design (design-offline) failed: 2 of 5 variables"]))
    assert status == "gold-fails" and "design" in reason


def test_harness_and_agent_failures_of_gold():
    assert gold_status(facts(status="infra_error", error="docker: image missing"))[0] == "infra-error"
    assert gold_status(facts(status="agent_error", error="ConfigError: no reference"))[0] == "gold-fails"
    assert gold_status(None)[0] == "infra-error"


def test_null_decides_valid_or_null_passes():
    gold = facts(I=1, E=1)
    assert null_status(gold, facts(I=0, E=0))[0] == "valid"
    assert null_status(gold, facts(I=1, E=1))[0] == "null-passes"
    # null failing design and conclusion does not hide it passing a check that runs code
    full = facts(D=1, I=1, E=1, C=1)
    status, reason = null_status(full, facts(D=0, I=0, E=1, C=0))
    assert status == "null-passes" and "execution" in reason
    # a phase null was not scored on is not a pass
    assert null_status(gold, facts(I=0, E=None))[0] == "valid"
    # the monitor flagging null does not excuse a check it passes by doing nothing
    assert null_status(gold, facts(M=0, I=0, E=0))[0] == "valid"
    assert null_status(gold, None)[0] == "infra-error"


def test_execution_without_any_reference_command_is_left_unvalidated_not_failed():
    # EXP-Bench: no run command in the task, and gold (which restores the reference) has no script to write
    gold = RunFacts(run_id="g", status="completed", phases={"M": 1, "D": 1, "I": None, "E": 0, "C": 1},
                    outcome="not_run", detail="the task has no run command and the agent left no run script",
                    code_run=frozenset("E"))
    assert gold_status(gold) is None
    null = facts(D=0, E=0, C=0)
    status, reason = null_status(gold, null)
    # only judges compared gold's text with the text it was made from: never `valid`
    assert status == "judges-only", reason
    assert "no reference command" in reason and "null fails design, conclusion" in reason
    # the same outcome with nothing else checked is not-checkable, never valid
    only_e = RunFacts(run_id="g", status="completed", phases={"M": 1, "D": None, "I": None, "E": 0, "C": None},
                      outcome="not_run", detail="the task has no run command and the agent left no run script")
    assert gold_status(only_e)[0] == "not-checkable"


def test_valid_needs_a_check_that_ran_code():
    """EXP-Bench 18439's shape: gold passes design and conclusion (its own ground truth, judged), null fails
    both, nothing ran code. That is `judges-only`, with the reason; the same task with hidden tests is `valid`."""
    text_only = facts(D=1, C=1, I=1, E=None, outcome=None, code_run="")
    status, reason = null_status(text_only, facts(D=0, C=0, I=0, code_run=""))
    assert status == "judges-only"
    assert "implementation judged from the diff, no hidden tests" in reason and "execution is not a phase" in reason
    tested = facts(D=1, C=1, I=1, E=None, outcome=None, code_run="I")
    status, reason = null_status(tested, facts(D=0, C=0, I=0, code_run="I"))
    assert status == "valid" and "code run: implementation" in reason
    # a re-run that compared nothing is not a code check either
    nothing = RunFacts(run_id="g", status="completed", phases={"M": 1, "D": 1, "I": None, "E": None, "C": 1},
                       outcome="not_scored", detail="the task gives nothing to compare it with")
    status, reason = null_status(nothing, facts(D=0, C=0, E=0))
    assert status == "judges-only" and "nothing to compare" in reason
    # null passing a code check is still the worst finding, whatever the rest
    assert null_status(tested, facts(D=0, C=0, I=1, code_run="I"))[0] == "null-passes"
