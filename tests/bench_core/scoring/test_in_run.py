"""The masked functions observed in E's own re-run (issue 38, "the replay can be told apart from the real run";
`hidden/observe.py`): a derived test replays a call in a fresh worker (`python3 -I`), which a function can detect;
the experiment's own calls cannot be told from the experiment. A function right only under replay passed I before;
now I compares the calls E's re-run made with the reference's.

The trees are built here from the mini ridge-cv task and run in local sandboxes (real subprocesses); the whole
pipeline, in Docker, is the hostile agent's row in tests/reliability/test_attack_scores.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from failatlas.bench_core.hidden.observe import Observed, agreement
from failatlas.bench_core.prepare import prepare_workspace
from failatlas.bench_core.sandbox import SandboxSpec, create_sandbox
from failatlas.bench_core.scoring.checks.derived_tests import judge_derived
from failatlas.bench_core.scoring.checks.execution import validate
from failatlas.bench_core.scoring.evidence.recording import watch_of
from failatlas.bench_core.suites import load_suite

pytestmark = pytest.mark.slow  # runs sandboxes (Docker, bwrap) or the app server: out of the README's quick command

RIDGE = "mini-ridge-cv"
SUITE = Path(__file__).resolve().parents[3] / "bench_core" / "suites" / "mini"
REFERENCE = SUITE / "ridge-cv" / "repo"
CORRECT = """        X = np.asarray(X, dtype=float)
        y = np.asarray(y, dtype=float)
        x_mean, y_mean = X.mean(axis=0), y.mean()
        Xc = X - x_mean
        self.coef_ = np.linalg.solve(Xc.T @ Xc + self.alpha * np.eye(X.shape[1]), Xc.T @ (y - y_mean))
        self.intercept_ = float(y_mean - x_mean @ self.coef_)
        return self"""
ZEROS = """        self.coef_ = np.zeros(np.asarray(X).shape[1])
        self.intercept_ = 0.0
        return self"""
# right only where the derived tests' worker runs it (`python3 -I`), zeros in the experiment itself
REPLAY_AWARE = "        import sys\n        if not sys.flags.isolated:\n" + ZEROS.replace("        ", "            ") \
    + "\n" + CORRECT
# right only when a frame of the derived tests' worker is on the stack
CALLER_AWARE = ("        import inspect\n        if not any('worker' in f.filename for f in inspect.stack()):\n"
                + ZEROS.replace("        ", "            ") + "\n" + CORRECT)
# right, and then empties the run's recording of its calls
ERASES = CORRECT.replace("        return self", "        import glob, os\n        for path in glob.glob("
                         "'.failatlas-record/*.jsonl'):\n            os.truncate(path, 0)\n        return self")
# right on the first call only
FIRST_ONLY = ("        import builtins\n        n = getattr(builtins, '_fits', 0) + 1\n        builtins._fits = n\n"
              "        if n > 1:\n" + ZEROS.replace("        ", "            ") + "\n" + CORRECT)


def _task():
    return next(t for t in load_suite("failatlas-mini") if t.id == RIDGE)


def _local(tree: Path):
    def start(_read_only: dict[str, str]):
        return create_sandbox("local", SandboxSpec(run_id="in-run-test"), workspace=tree)

    start.tree = tree  # type: ignore[attr-defined]
    return start


def _tree(tmp_path: Path, body: str, name: str) -> Path:
    """The masked ridge-cv repository with `fit` given `body`, as the constructed tree would hold it."""
    tree = Path(prepare_workspace(_task(), tmp_path / name, repo=REFERENCE).path)
    source = (tree / "ridge.py").read_text()
    start, end = source.index("    def fit(self, X, y):"), source.index("    def predict(self, X):")
    (tree / "ridge.py").write_text(source[:start] + "    def fit(self, X, y):\n" + body + "\n\n" + source[end:])
    return tree


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("recordings")


def _judged(tmp_path: Path, folder: Path, body: str, name: str):
    """(E's validation, I's derived-tests verdict) of the tree whose `fit` is `body`, E observed."""
    task, tree = _task(), _tree(tmp_path, body, name)
    watch = watch_of(task, REFERENCE, lambda t: _local(t)({}), folder=folder)
    assert watch is not None and watch.targets == [{"path": "ridge.py", "qualname": "RidgeRegression.fit"}]
    validation = validate(task, {"changed_files": ["ridge.py"]}, workspace=tree, patch_error=None,
                          sandbox_backend="local", spec_fields={"run_id": "in-run-test"}, watch=watch)
    verdict = judge_derived(task, _local(tree), REFERENCE, folder=folder, validation=validation)
    return validation, verdict


def test_a_correct_fit_agrees_in_the_run_and_passes(tmp_path, folder):
    validation, verdict = _judged(tmp_path, folder, CORRECT, "correct")
    assert validation.outcome == "passed"
    assert validation.observed is not None and validation.observed.completed and validation.observed.cases
    in_run = verdict.verdict["in_run"]
    assert in_run["cases"] >= 3 and in_run["agreed"] == in_run["cases"], in_run
    assert verdict.passed is True and verdict.score == 1.0


@pytest.mark.parametrize("body,name", [(REPLAY_AWARE, "isolated-flag"), (CALLER_AWARE, "caller-frame")])
def test_a_fit_right_only_under_replay_fails_i(tmp_path, folder, body, name):
    validation, verdict = _judged(tmp_path, folder, body, name)
    assert validation.outcome == "wrong_value"  # zeros in the experiment
    # the replay alone is fooled: every replayed case matches
    assert verdict.verdict["matched"] == verdict.verdict["cases"]
    # the run's own calls are not
    row = verdict.verdict["in_run"]["functions"]["RidgeRegression.fit"]
    assert row["differed"] >= 1 and "coef_" in row["first_difference"], row
    assert verdict.passed is False and verdict.score < 1.0
    assert "In E's re-run, RidgeRegression.fit gave other results" in verdict.error_analysis


def test_a_fit_right_on_its_first_call_only_fails_i(tmp_path, folder):
    _validation, verdict = _judged(tmp_path, folder, FIRST_ONLY, "first-only")
    row = verdict.verdict["in_run"]["functions"]["RidgeRegression.fit"]
    assert row["agreed"] >= 1 and row["differed"] >= 1, row
    assert verdict.passed is False


def test_a_fit_that_empties_its_recording_is_not_observed_and_fails_i(tmp_path, folder):
    validation, verdict = _judged(tmp_path, folder, ERASES, "erases")
    assert validation.outcome == "passed"  # the experiment itself is right
    row = verdict.verdict["in_run"]["functions"]["RidgeRegression.fit"]
    assert row["agreed"] == 0 and row["unmet"] == row["cases"], row
    assert verdict.passed is False and "not observed" in verdict.error_analysis


def test_without_an_observed_run_i_says_so_and_rests_on_the_replay(tmp_path, folder):
    task, tree = _task(), _tree(tmp_path, CORRECT, "unobserved")
    verdict = judge_derived(task, _local(tree), REFERENCE, folder=folder, validation=None)
    assert verdict.passed is True
    assert verdict.verdict["in_run"] == {"checked": False, "reason": "the task has no execution phase, so no run "
                                         "of its command was observed"}


# --------------------------------------------------------------------------------------------- the rule itself


def _case(number: int, x: float, ret: float, *, t: int = 0, perturbed: bool = False) -> dict:
    return {"t": t, "qualname": "f" if t == 0 else "g", "kind": "function", "number": number, "perturbed": perturbed,
            "args": [np.array([x])], "kwargs": {}, "state": None, "self": False, "ret": ret, "mutated": None}


REFERENCE_CALLS = [_case(1, 1.0, 2.0), _case(2, 2.0, 4.0), _case(3, 3.0, 6.0), _case(1, 9.0, 1.0, perturbed=True)]


def test_a_finished_run_must_meet_every_recorded_call():
    every = agreement(REFERENCE_CALLS, Observed(cases=[_case(n, x, r) for n, x, r in ((1, 1.0, 2.0), (2, 2.0,
                                                                                       4.0), (3, 3.0, 6.0))],
                                                   completed=True))
    assert every.passed and every.checked == 3 and every.agreed == 3  # the perturbed call is not looked for
    some = agreement(REFERENCE_CALLS, Observed(cases=[_case(1, 1.0, 2.0)], completed=True))
    assert not some.passed and "2 of 3 calls of f" in some.failures()[0]


def test_a_stopped_run_must_agree_where_it_got_and_meet_each_function_once():
    stopped = agreement(REFERENCE_CALLS, Observed(cases=[_case(1, 1.0, 2.0)], completed=False))
    assert stopped.passed and stopped.functions["f"]["unmet"] == 2
    nothing = agreement(REFERENCE_CALLS, Observed(completed=False))
    assert not nothing.passed and "the run stopped before any was" in nothing.failures()[0]


def test_a_forged_line_counts_only_with_the_references_inputs_and_results():
    # a line on other inputs is not a meeting; on the same inputs with other results it is a difference
    other_inputs = agreement(REFERENCE_CALLS[:1], Observed(cases=[_case(1, 0.0, 0.0)], completed=True))
    assert other_inputs.functions["f"]["unmet"] == 1 and not other_inputs.passed
    wrong = agreement(REFERENCE_CALLS[:1], Observed(cases=[_case(1, 1.0, 2.5)], completed=True))
    assert wrong.functions["f"]["differed"] == 1 and "expected 2.0, got 2.5" in wrong.failures()[0]
    # values no comparison can take are a difference, never an exception
    odd = _case(1, 1.0, 2.0)
    odd["ret"] = {"nested": [object()]}
    assert not agreement(REFERENCE_CALLS[:1], Observed(cases=[odd], completed=True)).passed


# ------------------------------------------------------------------------- red team of this check (helper, 28 Nov)

# correct, keeping one attribute of its own that is not plain data (a generator): the honest agent the first version
# failed on I and, through the consistency rule, on E
KEEPS_A_GENERATOR = CORRECT.replace("        return self", "        self._rng = np.random.RandomState(0)\n"
                                    "        return self")


def test_a_correct_fit_with_an_attribute_of_its_own_that_is_not_plain_data_passes(tmp_path, folder):
    validation, verdict = _judged(tmp_path, folder, KEEPS_A_GENERATOR, "keeps-generator")
    assert validation.outcome == "passed"
    in_run = verdict.verdict["in_run"]
    assert in_run["agreed"] == in_run["cases"] >= 3, in_run
    assert verdict.passed is True


def test_a_second_line_claiming_the_references_results_does_not_outvote_the_recorders():
    forged, own = _case(1, 1.0, 2.0), _case(1, 1.0, 0.0)
    result = agreement(REFERENCE_CALLS[:1], Observed(cases=[own, forged], completed=True))
    assert result.functions["f"]["differed"] == 1 and not result.passed


def _lines(*lines: bytes) -> bytes:
    return b"\n".join(lines) + b"\n"


def test_lines_of_the_wrong_types_are_unreadable_never_an_exception():
    from failatlas.bench_core.hidden import wire
    from failatlas.bench_core.hidden.record import Limits, Recording, read_lines

    good = {"t": 0, "module": "m", "root": "", "qualname": "f", "kind": "function", "args": [1], "kwargs": {},
            "state": None, "self": False, "ret": 2, "perturbed": False}
    odd = [{**good, "t": np.array([0, 0])}, {**good, "t": np.array([0])}, {**good, "perturbed": np.array([1, 1])},
           {**good, "kind": ["method"]}, {**good, "qualname": np.array([1.0])}, {**good, "t": True},
           {**good, "args": {"0": 1}}, {**good, "state": [1]}]
    recording = Recording(targets=[{"path": "m.py", "qualname": "f"}])
    read_lines(recording, _lines(*(wire.encode(x) for x in [*odd, good])), Limits())
    assert len(recording.cases) == 1 and recording.skipped == {"unreadable": len(odd)}


def test_a_record_of_millions_of_tiny_lines_is_read_within_the_line_cap():
    from failatlas.bench_core.hidden.record import MAX_LINES, Limits, Recording, read_lines

    recording = Recording(targets=[{"path": "m.py", "qualname": "f"}])
    read_lines(recording, b"\n" * (13 << 20) + b"0\n" * (1 << 20), Limits())
    assert recording.cases == [] and recording.skipped == {"unread": 1}
    assert f"lines past the first {MAX_LINES} were not read" in recording.notes
