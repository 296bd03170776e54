"""Issue 50, every call counts: E's re-run keeps a reservoir of every call of the masked functions (an equal chance
for each, drawn after the call returned), and scoring draws the calls to check with a fresh secret after the run,
replaying the reference on each drawn call's inputs (`evidence/calls.py`).

Here the ridge-cv tree runs in local sandboxes (real subprocesses): a command that calls `fit` 600 times, so the
reservoir (128 slots) holds a fifth of the calls and the draw (64) a tenth. One observed run of a `fit` wrong on 10%
of its calls is scored 20 times with 20 secrets (each draw that meets a wrong call fails); a correct one too. The
reproductions through the whole pipeline, in Docker and bwrap, are in test_every_call_pipeline.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from failatlas.bench_core.hidden.observe import SAMPLE_SLOTS
from failatlas.bench_core.prepare import prepare_workspace
from failatlas.bench_core.sandbox import SandboxSpec, create_sandbox
from failatlas.bench_core.scoring.checks.derived_tests import judge_derived, with_calls
from failatlas.bench_core.scoring.checks.execution import validate
from failatlas.bench_core.scoring.evidence.calls import DRAW, draw, drawn_calls
from failatlas.bench_core.scoring.evidence.recording import key_of, load_recording, watch_of
from failatlas.bench_core.suites import load_suite

pytestmark = pytest.mark.slow  # runs sandboxes (Docker, bwrap) or the app server: out of the README's quick command

SUITE = Path(__file__).resolve().parents[3] / "bench_core" / "suites" / "mini"
CALLS = 600
MANY = f"""import json
import numpy as np
from ridge import RidgeRegression

rng = np.random.RandomState(0)
total = 0.0
for i in range({CALLS}):
    X = rng.normal(size=(12, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + rng.normal(size=12)
    model = RidgeRegression(alpha=float(i % 7)).fit(X, y)
    total += float(np.sum(model.coef_))
json.dump({{"total": round(total, 6)}}, open("results.json", "w"))
"""
CORRECT = """        X = np.asarray(X, dtype=float)
        y = np.asarray(y, dtype=float)
        x_mean, y_mean = X.mean(axis=0), y.mean()
        Xc = X - x_mean
        self.coef_ = np.linalg.solve(Xc.T @ Xc + self.alpha * np.eye(X.shape[1]), Xc.T @ (y - y_mean))
        self.intercept_ = float(y_mean - x_mean @ self.coef_)
        return self"""
# wrong (the penalty dropped) on every tenth call: 10% of its calls, none of them on the recorder's fixed schedule
TENTH = ("        import builtins\n        n = builtins.__dict__['_fits'] = builtins.__dict__.get('_fits', 0) + 1\n"
         "        alpha = 0.0 if n % 10 == 7 else self.alpha\n"
         + CORRECT.replace("self.alpha * np.eye", "alpha * np.eye"))


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """The ridge-cv repository with the many-calls command beside it."""
    tree = tmp_path_factory.mktemp("reference") / "repo"
    shutil.copytree(SUITE / "ridge-cv" / "repo", tree)
    (tree / "many.py").write_text(MANY)
    return tree


@pytest.fixture(scope="module")
def task():
    base = next(t for t in load_suite("failatlas-mini") if t.id == "mini-ridge-cv")
    return base.model_copy(update={"id": "mini-ridge-many-calls", "expected_results": [],
                                   "run": base.run.model_copy(update={"command": "python3 many.py",
                                                                      "timeout_s": 300})})


def _local(tree: Path):
    def start(_read_only: dict[str, str]):
        return create_sandbox("local", SandboxSpec(run_id="every-call-test"), workspace=tree)

    return start


def _observed(tmp_path: Path, task, reference: Path, folder: Path, body: str):
    """One observed E re-run of the tree whose `fit` is `body`: (validation, watch, recording)."""
    tree = Path(prepare_workspace(task, tmp_path / "tree", repo=reference).path)
    source = (tree / "ridge.py").read_text()
    start, end = source.index("    def fit(self, X, y):"), source.index("    def predict(self, X):")
    (tree / "ridge.py").write_text(source[:start] + "    def fit(self, X, y):\n" + body + "\n\n" + source[end:])
    watch = watch_of(task, reference, lambda t: _local(t)({}), folder=folder)
    assert watch is not None and watch.sample == SAMPLE_SLOTS
    validation = validate(task, {"changed_files": ["ridge.py"]}, workspace=tree, patch_error=None,
                          sandbox_backend="local", spec_fields={"run_id": "every-call-test"}, watch=watch)
    recording = load_recording(folder, key_of(task, reference, None))
    assert recording is not None
    return tree, validation, watch, recording


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("recordings")


def _twenty(tree, task, reference, folder, validation, watch, recording, memo: dict):
    """The derived-tests verdict with 20 draws of fresh secrets, each with the batch `memo` (`calls.case_key`);
    and how many replay sandboxes the draws started."""
    names = [t["qualname"] for t in watch.targets]
    base = judge_derived(task, _local(tree), reference, folder=folder, validation=validation)
    started: list[Path] = []

    def counting(tree_: Path):
        started.append(tree_)
        return _local(tree_)

    verdicts = []
    for _ in range(20):
        payload = drawn_calls(task, reference, recording, validation.observed, names, counting, memo=memo,
                              reference_key=key_of(task, reference, None))
        verdicts.append(with_calls(base, payload))
    return base, verdicts, len(started)


def test_the_reservoir_keeps_an_even_share_of_every_call(tmp_path, task, reference, folder):
    _tree, validation, _watch, _recording = _observed(tmp_path, task, reference, folder, CORRECT)
    observed = validation.observed
    assert observed is not None and observed.completed  # no expected values: E is not scored here
    kept = [c for c in observed.sample if c["qualname"] == "RidgeRegression.fit"]
    assert len(kept) == SAMPLE_SLOTS and observed.population == {0: CALLS}
    assert observed.sample_missing == {}
    numbers = sorted(c["n"] for c in kept)
    assert len(set(numbers)) == SAMPLE_SLOTS and numbers[-1] > SAMPLE_SLOTS  # not just the first 128
    # calls past the fixed schedule's (1-3 and powers of two) are kept
    assert sum(1 for n in numbers if n > 3 and n & (n - 1)) > SAMPLE_SLOTS // 2
    # the same secret draws the same calls; two secrets draw other calls
    one, again, other = ([(c["pid"], c["n"]) for c in draw(observed.sample, [0], s)[0]]
                         for s in ("a" * 32, "a" * 32, "b" * 32))
    assert one == again and len(one) == DRAW and one != other


def test_a_correct_fit_passes_twenty_scorings_and_one_wrong_on_a_tenth_fails_every_draw_that_meets_it(
        tmp_path, task, reference, folder):
    memo: dict = {}  # one scoring batch's: both runs' draws share it, as runs of one task do
    tree, validation, watch, recording = _observed(tmp_path / "correct", task, reference, folder, CORRECT)
    base, verdicts, started = _twenty(tree, task, reference, folder, validation, watch, recording, memo)
    assert base.passed is True
    assert all(v.passed for v in verdicts), [v.error_analysis for v in verdicts if not v.passed][:2]
    secrets_seen = {v.verdict["drawn_calls"]["secret"] for v in verdicts}
    assert len(secrets_seen) == 20
    assert all(v.verdict["drawn_calls"]["functions"]["RidgeRegression.fit"]["checked"] == DRAW for v in verdicts)
    # the 20 draws come from the same 128 kept calls: once each has been replayed, a draw starts no sandbox
    assert 1 <= started < 20, started

    tree, validation, watch, recording = _observed(tmp_path / "tenth", task, reference, folder, TENTH)
    base, verdicts, _started = _twenty(tree, task, reference, folder, validation, watch, recording, memo)
    # the fixed schedule (calls 1-3 and the powers of two) never meets a wrong call: the old checks pass it
    assert base.passed is True, base.error_analysis
    failed = [v for v in verdicts if not v.passed]
    # which draws meet a wrong call (the 7th of every 10 fits) is known from the kept sample and each secret: every
    # one of those fails and no other; the reservoir (a fifth of the calls, at random) and the draw (half of it)
    # leave a draw without a wrong call with probability about 0.5^k for k wrong calls kept (k is 12.8 on average),
    # so a fixed count ("at least 19 of 20") failed about once in a hundred runs (CI, 2026-12-05: 18)
    # (a 7th fit whose alpha is 0 anyway, `i % 7 == 0` in MANY: calls 57, 127, 197, ..., is right: dropping the penalty
    # changes nothing there, so meeting only such calls passes; counted as wrong, a draw holding one of them and no
    # other failed this test about once in 40 runs, the verdict being right)
    meets = [any(c["n"] % 10 == 7 and (c["n"] - 1) % 7 != 0
                 for c in draw(validation.observed.sample, [0], v.verdict["drawn_calls"]["secret"])[0])
             for v in verdicts]
    assert [not v.passed for v in verdicts] == meets
    assert sum(meets) >= 15, sum(meets)
    row = failed[0].verdict["drawn_calls"]["functions"]["RidgeRegression.fit"]
    assert row["differed"] >= 1 and row["calls"] == CALLS
    assert "drawn at random after the run" in failed[0].error_analysis
    # the memo changes no row: three of the wrong run's draws replayed afresh, without it, give the same rows
    names = [t["qualname"] for t in watch.targets]
    for verdict in verdicts[:3]:
        drawn = verdict.verdict["drawn_calls"]
        plain = drawn_calls(task, reference, recording, validation.observed, names, _local, drawn["secret"])
        assert plain["functions"] == drawn["functions"]


# ------------------------------------------------------------------------- what the sample folder may hold

TARGETS = [{"path": "ridge.py", "qualname": "RidgeRegression.fit"}]


def _call(pid: int, n: int) -> dict:
    return {"t": 0, "module": "ridge", "root": "", "qualname": "RidgeRegression.fit", "kind": "method",
            "args": [[1.0]], "kwargs": {}, "state": {"alpha": 1.0}, "self": True, "ret": None, "after": {},
            "perturbed": False, "duration": 0.001, "n": n, "pid": pid}


def _collected(tmp_path: Path, files: dict[str, object], *, completed: bool = True, seen_in_record: bool = True):
    """collect_sample over a working copy whose sample folder holds `files` (name -> call dict, bytes or a link
    target); a local sandbox copies it out as Docker and bwrap do."""
    from failatlas.bench_core.hidden.observe import SAMPLE_DIR, Observed, Watch, collect_sample
    from failatlas.bench_core.hidden.record import Limits

    work = tmp_path / "work"
    folder = work / SAMPLE_DIR
    folder.mkdir(parents=True)
    for name, body in files.items():
        if isinstance(body, Path):
            (folder / name).symlink_to(body)
        else:
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(body if isinstance(body, bytes) else json.dumps(body).encode())
    out = Observed(completed=completed, cases=[_call(1, 1)] if seen_in_record else [])
    with create_sandbox("local", SandboxSpec(run_id="sample-test"), workspace=work) as sandbox:
        collect_sample(sandbox, Watch(TARGETS, Limits(), sample=SAMPLE_SLOTS), out)
    return out


def _reservoir(pid: int, calls: int) -> dict[str, dict]:
    """What the recorder leaves for one process that called the function `calls` times (<= the slots)."""
    return {f"{pid}-0-{n - 1}.json": _call(pid, n) for n in range(1, calls + 1)}


def test_a_whole_sample_is_read_and_counted(tmp_path):
    out = _collected(tmp_path, {**_reservoir(11, 5), **_reservoir(12, 3), "11-0-9.json.140.tmp": b"{"})
    assert len(out.sample) == 8 and out.population == {0: 8}
    assert out.sample_missing == {} and out.sample_foreign == 0


@pytest.mark.parametrize("change", ["renamed", "other-pid", "slot-too-high", "duplicate-number", "link", "junk",
                                    "folder", "extra"])
def test_a_file_the_recorder_did_not_write_is_foreign(tmp_path, change):
    files: dict[str, object] = _reservoir(11, 5)
    if change == "renamed":
        files["11-0-7.json"] = files.pop("11-0-4.json")  # the slot's name no longer says which call
        files["11-0-7.json"] = {**_call(11, 5)}
        files["x.json"] = _call(11, 5)
    elif change == "other-pid":
        files["99-0-0.json"] = _call(11, 1)  # a copy of a kept call under another process's name
    elif change == "slot-too-high":
        files[f"11-0-{SAMPLE_SLOTS}.json"] = _call(11, 6)
    elif change == "duplicate-number":
        files["11-0-5.json"] = _call(11, 3)
    elif change == "link":
        outside = tmp_path / "outside.json"
        outside.write_text(json.dumps(_call(11, 6)))
        files["11-0-5.json"] = outside
    elif change == "junk":
        files["11-0-5.json"] = b"not json"
    elif change == "folder":
        files["nested/11-0-5.json"] = _call(11, 6)
    elif change == "extra":
        files["11-0-5.json"] = _call(11, 4) | {"n": 6}
        files["11-0-6.json"] = _call(11, 2) | {"n": 2}  # two files with number 2
    out = _collected(tmp_path, files)
    assert out.sample_foreign >= 1, (change, out.notes)
    assert "not written by the recorder" in " ".join(out.notes)


def test_a_finished_run_whose_sample_lost_files_is_missing_some(tmp_path):
    files = _reservoir(11, 5)
    del files["11-0-2.json"]
    assert _collected(tmp_path, files).sample_missing == {0: 1}
    # a run killed on the way may lose the call it was writing: not held against it
    assert _collected(tmp_path / "killed", files, completed=False).sample_missing == {}


def test_a_finished_run_with_no_sample_of_a_function_it_called_is_missing_it(tmp_path):
    assert _collected(tmp_path, {}).sample_missing == {0: 1}
    assert _collected(tmp_path / "never", {}, seen_in_record=False).sample_missing == {}


def test_missing_or_foreign_sample_files_fail_i():
    from failatlas.bench_core.scoring.checks.base import Verdict

    passed = Verdict("implementation", "derived-tests", score=1.0, passed=True, verdict={"cases": 4})
    for calls in ({"secret": "s", "functions": {}, "missing": {"RidgeRegression.fit": 3}, "foreign": 0},
                  {"secret": "s", "functions": {}, "missing": {}, "foreign": 2}):
        verdict = with_calls(passed, calls)
        assert verdict.passed is False and "E's re-run" in verdict.error_analysis
    assert with_calls(passed, {"secret": "s", "functions": {}, "missing": {}, "foreign": 0}).passed is True
