"""The `derived-tests` judge (issue 38, "Hidden tests derived from the reference"): the masked functions' calls
recorded while the reference command runs, replayed on the judged tree through the hidden-test boundary.

The agents' verdicts come from the whole pipeline (runs and scoring in Docker, the recording made on first need);
the logic (zeros, answers hard-coded for the recorded inputs, reuse, nothing encodable) is checked by calling the
judge on trees built here, in local sandboxes (real subprocesses)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from failatlas.bench_core import scoring
from failatlas.bench_core.prepare import prepare_workspace
from failatlas.bench_core.runs.execute import RunConfig
from failatlas.bench_core.runs.runner import plan, run_batch
from failatlas.bench_core.sandbox import SandboxSpec, create_sandbox
from failatlas.bench_core.scoring.checks.derived_tests import judge_derived
from failatlas.bench_core.scoring.evidence.recording import (
    cache_folder,
    ensure_recording,
    load_recording,
    recording_key,
    targets_of,
)
from failatlas.bench_core.suites import load_suite
from failatlas.bench_core.task_validation.model import ValidateParams
from failatlas.bench_core.task_validation.recordings import record_derived_tests
from failatlas.bench_core.tasks import save_tasks
from failatlas.store import open_store

pytestmark = pytest.mark.slow  # runs sandboxes (Docker, bwrap) or the app server: out of the README's quick command

RIDGE, KMEANS = "mini-ridge-cv", "mini-kmeans-init"
FAILING = ("null", "fault-missing-component", "fault-wrong-constant", "fault-crash")
SUITE = Path(__file__).resolve().parents[3] / "bench_core" / "suites" / "mini"


def _task(task_id: str):
    return next(t for t in load_suite("failatlas-mini") if t.id == task_id)


def _reference(task_id: str) -> Path:
    return SUITE / task_id.removeprefix("mini-") / "repo"


def _local(tree: Path):
    def start(_read_only: dict[str, str]):
        return create_sandbox("local", SandboxSpec(run_id="derived-test"), workspace=tree)

    return start


def _judge(task, tree: Path, folder: Path, reference: Path | None = None):
    return judge_derived(task, _local(tree), reference or _reference(task.id), folder=folder)


def _with_fit(tmp_path: Path, body: str, extra: str = "") -> Path:
    """The masked ridge-cv repository with `fit` given `body` (and module-level `extra` code above the class)."""
    tree = Path(prepare_workspace(_task(RIDGE), tmp_path / "tree", repo=_reference(RIDGE)).path)
    source = (tree / "ridge.py").read_text()
    start = source.index("    def fit(self, X, y):")
    end = source.index("    def predict(self, X):")
    source = source[:start] + "    def fit(self, X, y):\n" + body + "\n" + source[end:]
    source = source.replace("\n\nclass RidgeRegression", "\n\n" + extra + "\n\nclass RidgeRegression", 1)
    (tree / "ridge.py").write_text(source)
    return tree


# ----------------------------------------------------------------------------------- the pipeline, in Docker


@pytest.fixture(scope="module")
def scored(sandbox_image: str, tmp_path_factory: pytest.TempPathFactory):
    """gold, null and three fault agents on mini-ridge-cv, gold and null on mini-kmeans-init, run and scored in
    Docker with the two implementation checks; no recording existed before scoring."""
    root = tmp_path_factory.mktemp("derived")
    store = open_store(root / "store.duckdb")
    save_tasks(store, [_task(RIDGE), _task(KMEANS)], source="failatlas-mini")
    common = {"sandbox": "docker", "image": sandbox_image, "runs_dir": root / "runs", "workers": 2}
    # one batch of the 7 runs on 2 workers (a `bench run` per agent would run its single run alone)
    work = [item for agent in ("gold", *FAILING) for item in plan(store, [_task(RIDGE)], agent).todo]
    work += [item for agent in ("gold", "null") for item in plan(store, [_task(KMEANS)], agent).todo]
    batch = run_batch(store, work, RunConfig(runs_dir=root / "runs", image=sandbox_image), workers=2)
    assert batch.planned == 7 and not batch.infra_errors, batch
    assert not (cache_folder(store) or Path("/nonexistent")).exists()
    result = scoring.run(store, scoring.ScoreParams(judges=["derived-tests", "hidden-tests"], **common))
    assert result.ok, result
    rows = store.query_dicts(
        "SELECT r.task_id, r.agent, j.judge, j.status, j.passed, j.score, j.verdict, j.error_analysis, j.reason"
        " FROM judgements j JOIN runs r ON r.id = j.run_id WHERE j.judge IN ('derived-tests', 'hidden-tests')")
    verdicts = {(r["task_id"], r["agent"]): {**r, "verdict": json.loads(r["verdict"])} for r in rows
                if r["judge"] == "derived-tests"}
    hidden = {(r["task_id"], r["agent"]): r for r in rows if r["judge"] == "hidden-tests"}
    return store, verdicts, hidden


def test_gold_passes_and_every_failing_agent_fails(scored):
    _store, verdicts, hidden = scored
    gold = verdicts[(RIDGE, "gold")]
    assert gold["status"] == "ok" and gold["passed"] is True and gold["score"] == 1.0
    assert gold["verdict"]["cases"] == gold["verdict"]["matched"] >= 8
    assert gold["verdict"]["perturbed"] >= 2 and gold["verdict"]["skipped_unencodable"] == 0
    for agent in FAILING:
        row = verdicts[(RIDGE, agent)]
        assert row["status"] == "ok" and row["passed"] is False, (agent, row)
        assert row["score"] < 1.0 and "RidgeRegression.fit" in row["error_analysis"], (agent, row)
        assert row["verdict"]["functions"]["RidgeRegression.fit"]["first_failure"], agent


def test_every_agent_is_judged_as_the_hand_written_tests_judge_it(scored):
    _store, verdicts, hidden = scored
    assert set(verdicts) == set(hidden) and len(verdicts) == 7
    for key, derived in verdicts.items():
        assert derived["status"] == hidden[key]["status"] == "ok", key
        assert derived["passed"] == hidden[key]["passed"], (key, derived, hidden[key])


def test_a_second_task_with_an_unencodable_function_records_the_rest(scored):
    _store, verdicts, _hidden = scored
    gold, null = verdicts[(KMEANS, "gold")], verdicts[(KMEANS, "null")]
    assert gold["passed"] is True and null["passed"] is False and null["score"] == 0.0
    # kmeanspp_init takes a RandomState: its calls are skipped and counted, KMeans.fit's are replayed
    assert gold["verdict"]["skipped_unencodable"] > 0
    assert set(gold["verdict"]["functions"]) == {"KMeans.fit"}


def test_scoring_stored_one_recording_per_task_and_reused_it(scored):
    store, verdicts, _hidden = scored
    files = sorted((cache_folder(store)).glob("*.wire"))
    assert len(files) == 2
    keys = {verdicts[(RIDGE, a)]["verdict"]["recording"] for a in ("gold", *FAILING)}
    assert len(keys) == 1 and f"{keys.pop()}.wire" in {f.name for f in files}


# ---------------------------------------------------------------------------------- the logic, local sandboxes


def test_a_fit_that_returns_zeros_fails(tmp_path):
    tree = _with_fit(tmp_path, "        self.coef_ = np.zeros(np.shape(X)[1])\n        self.intercept_ = 0.0\n"
                     "        return self\n")
    verdict = _judge(_task(RIDGE), tree, tmp_path / "cache")
    assert verdict.status == "ok" and verdict.passed is False and verdict.score == 0.0
    assert "attribute coef_" in verdict.verdict["functions"]["RidgeRegression.fit"]["first_failure"]


def test_a_fit_right_only_on_the_recorded_inputs_fails_on_the_perturbed_ones(tmp_path):
    task, folder = _task(RIDGE), tmp_path / "cache"
    assert _judge(task, _reference_copy(tmp_path), folder).passed is True
    targets, _ = targets_of(task, _reference(RIDGE))
    recording = load_recording(folder, recording_key(task, _reference(RIDGE), targets))
    answers = {}
    for case in recording.cases:
        if not case["perturbed"]:
            X, y = (case["args"][0], case["args"][1])
            key = hashlib.sha256(X.tobytes() + y.tobytes() + repr(float(case["state"]["alpha"])).encode())
            answers[key.hexdigest()] = ([float(v) for v in case["after"]["coef_"]], case["after"]["intercept_"])
    body = ("        X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)\n"
            "        key = hashlib.sha256(X.tobytes() + y.tobytes() + repr(float(self.alpha)).encode()).hexdigest()\n"
            "        coef, self.intercept_ = _ANSWERS.get(key, ([0.0] * X.shape[1], 0.0))\n"
            "        self.coef_ = np.array(coef)\n        return self\n")
    tree = _with_fit(tmp_path, body, f"import hashlib\n\n_ANSWERS = {answers!r}\n")
    verdict = _judge(task, tree, folder)
    perturbed = [c["id"] for c in recording.cases if c["perturbed"]]
    failed = {f["test"] for f in verdict.verdict["failures"]}
    assert verdict.passed is False and len(perturbed) >= 2
    assert failed == {f"test_derived[{i}]" for i in perturbed}
    assert verdict.verdict["matched"] == len(recording.cases) - len(perturbed)


def _reference_copy(tmp_path: Path) -> Path:
    tree = tmp_path / "gold"
    shutil.copytree(_reference(RIDGE), tree)
    return tree


def test_the_recording_is_made_once_and_read_back_after(tmp_path):
    counter = tmp_path / "reference-runs"
    task = _task(RIDGE)
    task = task.model_copy(update={"run": task.run.model_copy(
        update={"command": f"python3 run.py && echo ran >> {counter}"})})
    folder = tmp_path / "cache"
    first = _judge(task, _reference_copy(tmp_path), folder)
    null = _judge(task, Path(prepare_workspace(task, tmp_path / "masked", repo=_reference(RIDGE)).path), folder)
    assert first.passed is True and null.passed is False
    assert counter.read_text().splitlines() == ["ran"]  # the reference ran once, for the first judgement
    key, recording, made = ensure_recording(task, _reference(RIDGE), lambda _tree: pytest.fail("recorded again"),
                                            folder=folder)
    assert made is False and key == first.verdict["recording"] and len(recording.cases) == first.verdict["cases"]
    assert counter.read_text().splitlines() == ["ran"]


def test_a_recording_with_nothing_encodable_is_not_scored(tmp_path):
    task = _task(KMEANS)
    only_seeding = [f for f in task.masking.functions if f.qualname == "kmeanspp_init"]
    task = task.model_copy(update={"masking": task.masking.model_copy(update={"functions": only_seeding})})
    tree = tmp_path / "gold"
    shutil.copytree(_reference(KMEANS), tree)
    verdict = _judge(task, tree, tmp_path / "cache")
    assert verdict.status == "not_run" and verdict.passed is None and verdict.score is None
    assert "no call of a masked function" in verdict.reason and "RandomState" in verdict.reason
    assert verdict.verdict["skipped_unencodable"] > 0 and verdict.verdict["recorded"] == 0


def test_a_task_without_masked_functions_is_not_scored(tmp_path):
    task = next(t for t in load_suite("failatlas-mini") if t.id == "mini-logreg-scaling")
    verdict = judge_derived(task, _local(tmp_path), tmp_path, folder=tmp_path / "cache")
    assert verdict.status == "not_run" and "masks no functions" in verdict.reason


def test_tasks_validate_records_ahead_and_finds_it_stored_after(tmp_path):
    store = open_store(tmp_path / "store.duckdb")
    tasks = [_task(RIDGE)]
    save_tasks(store, tasks, source="failatlas-mini")
    params = ValidateParams(sandbox="local")
    first = record_derived_tests(store, tasks, params)
    again = record_derived_tests(store, tasks, params)
    assert first[RIDGE].startswith("recorded: 12 case(s), 4 perturbed"), first
    assert again[RIDGE].startswith("stored: 12 case(s)"), again
    assert len(list(cache_folder(store).glob("*.wire"))) == 1


def test_cases_that_a_tree_passes_are_dropped_as_stub_passes(tmp_path):
    """`drop_stub_passes` keeps only the cases the masked stubs fail: replayed on a tree that passes them all (the
    reference), nothing is left, and each is counted."""
    from failatlas.bench_core.hidden.record import drop_stub_passes

    task, folder = _task(RIDGE), tmp_path / "cache"
    assert _judge(task, _reference_copy(tmp_path), folder).passed is True
    targets, _ = targets_of(task, _reference(RIDGE))
    recording = load_recording(folder, recording_key(task, _reference(RIDGE), targets))
    cases = len(recording.cases)
    assert recording.stub_passes == 0 and cases == 12
    with create_sandbox("local", SandboxSpec(run_id="derived-test"), workspace=_reference(RIDGE)) as sandbox:
        drop_stub_passes(recording, sandbox, timeout_s=60)
    assert recording.cases == [] and recording.stub_passes == cases


# ------------------------------------------------------------------------------ the recorder on a crafted tree

CRAFTED = {
    "src/pkg/__init__.py": "",
    "src/pkg/mod.py": (
        "import numpy as np\n\nSCALE = {'k': 1.0}\n\n\n"
        "def scaled(x, by=2.0):\n    return np.asarray(x, dtype=float) * by\n\n\n"
        "def uses_global(x):\n    return float(np.sum(x)) * SCALE['k']\n\n\n"
        "def takes_object(obj):\n    return 1\n\n\n"
        "class Box:\n    @staticmethod\n    def total(values):\n        return int(sum(values))\n"),
    "main.py": (
        "import sys\nsys.path.insert(0, 'src')\nimport numpy as np\nfrom pkg import mod\nfrom pkg.mod import Box\n\n\n"
        "def twice(n):\n    return [n, n]\n\n\n"
        "def run():\n    mod.SCALE['k'] = 3.0\n"
        "    for i in range(5):\n        mod.scaled(np.arange(4.0) + i)\n        mod.uses_global(np.ones(3))\n"
        "    mod.takes_object(object())\n    Box.total([1, 2, 3])\n    print(twice(7))\n\n\nrun()\n"),
}
CRAFTED_TARGETS = [{"path": "src/pkg/mod.py", "qualname": q} for q in ("scaled", "uses_global", "takes_object")] + [
    {"path": "src/pkg/mod.py", "qualname": "Box.total"}, {"path": "main.py", "qualname": "twice"}]


def test_the_recorder_finds_packages_static_methods_and_the_main_script_and_drops_what_a_fresh_process_changes(
        tmp_path):
    from failatlas.bench_core.hidden.record import record_calls, self_check

    tree = tmp_path / "tree"
    for rel, text in CRAFTED.items():
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(text)
    with create_sandbox("local", SandboxSpec(run_id="derived-test"), workspace=tree) as sandbox:
        recording = record_calls(sandbox, command="python3 main.py", targets=CRAFTED_TARGETS, timeout_s=60)
        assert recording.exit_code == 0
        by_name: dict[str, list[dict]] = {}
        for case in recording.cases:
            by_name.setdefault(case["qualname"], []).append(case)
        # calls 1, 2, 3, 4 of five (5 is not a power of two); perturbed copies only where floats are there
        assert [c["perturbed"] for c in by_name["scaled"]].count(False) == 4
        assert [c["perturbed"] for c in by_name["scaled"]].count(True) == 4
        assert {(c["module"], c["root"]) for c in by_name["scaled"]} == {("pkg.mod", "src")}
        assert by_name["Box.total"][0]["ret"] == 6 and by_name["Box.total"][0]["kind"] == "function"
        assert by_name["twice"][0]["module"] == "main" and by_name["twice"][0]["ret"] == [7, 7]
        assert "takes_object" not in by_name and recording.skipped["unencodable"] == 1
        assert recording.calls_seen == 5 + 5 + 1 + 1 + 1
        self_check(recording, sandbox, timeout_s=60)
    kept = {c["qualname"] for c in recording.cases}
    # uses_global read SCALE['k'] = 3.0, set by the run: a fresh process sees 1.0, so its cases are dropped
    assert kept == {"scaled", "Box.total", "twice"}
    assert recording.unreproducible == len(by_name["uses_global"]) == 8  # 4 recorded, 4 perturbed


def test_a_recording_whose_reference_failed_is_kept_for_scoring_and_made_again_by_validate(tmp_path):
    counter = tmp_path / "reference-runs"
    task = _task(RIDGE)
    task = task.model_copy(update={"run": task.run.model_copy(update={"command": f"echo ran >> {counter}; exit 3"})})
    folder = tmp_path / "cache"

    def start(tree):
        return create_sandbox("local", SandboxSpec(run_id="derived-test"), workspace=tree)

    _key, first, made = ensure_recording(task, _reference(RIDGE), start, folder=folder)
    assert made and first.cases == [] and first.exit_code == 3 and "exited with 3" in first.notes[0]
    assert ensure_recording(task, _reference(RIDGE), start, folder=folder)[2] is False  # scoring: stored, kept
    assert counter.read_text().count("ran") == 1
    assert ensure_recording(task, _reference(RIDGE), start, folder=folder, redo_failed=True)[2] is True
    assert counter.read_text().count("ran") == 2


def test_a_case_that_needs_what_the_run_command_left_behind_is_not_kept(tmp_path):
    """The recording is reproduced where a judge replays it (a fresh sandbox on an unrun copy of the reference):
    a masked function that reads a file its run command wrote first (or a package the command installed) cannot
    be replayed on a judged tree, so its cases are dropped and gold is not failed for it (CI, failatlas-env: gold's
    textdistance, installed by `pip install --user` in the run command, was missing from the judge's sandbox)."""
    reference = tmp_path / "reference"
    shutil.copytree(_reference(RIDGE), reference)
    source = (reference / "ridge.py").read_text()
    fit = "    def fit(self, X, y):\n"
    source = source.replace(fit, fit + "        _scale = float((__import__('pathlib').Path(__file__).parent"
                                       " / 'written_by_the_run.txt').read_text())\n", 1)
    (reference / "ridge.py").write_text(source)
    task = _task(RIDGE)
    task = task.model_copy(update={"run": task.run.model_copy(
        update={"command": "echo 1.0 > written_by_the_run.txt && python3 run.py"})})

    def start(tree):
        return create_sandbox("local", SandboxSpec(run_id="derived-test"), workspace=tree)

    _key, recording, made = ensure_recording(task, reference, start, folder=tmp_path / "cache")
    assert made and recording.exit_code == 0 and recording.cases == []
    assert recording.unreproducible > 0 and any("written_by_the_run.txt" in n for n in recording.notes)
    gold = tmp_path / "gold"
    shutil.copytree(reference, gold)
    verdict = _judge(task, gold, tmp_path / "cache", reference)
    assert verdict.status == "not_run" and verdict.passed is None, verdict


INPLACE = Path(__file__).resolve().parents[2] / "fixtures" / "inplace_task"


def test_a_function_that_works_in_place_is_judged_on_what_it_does_to_its_arguments(tmp_path):
    """Red team (issue 38): `standardize_(X)` standardises X in place and returns None; the derived tests compared
    only the return value, so a body of `return None` passed every case, perturbed ones too. The arguments a call
    changes are recorded after it and compared."""
    from failatlas.bench_core.tasks.importers.suite import load_task

    task = load_task(INPLACE / "task.yaml")
    reference = INPLACE / "repo"
    folder = tmp_path / "cache"
    gold = tmp_path / "gold"
    shutil.copytree(reference, gold)
    passed = _judge(task, gold, folder, reference)
    assert passed.passed is True and passed.verdict["cases"] >= 3, passed
    _key, recording, _made = ensure_recording(task, reference, lambda tree: pytest.fail("recorded again"),
                                              folder=folder)
    assert all(case["mutated"]["args"]["0"] is not None for case in recording.cases)
    for body, why in (("    return None\n", "argument 0 after the call"),
                      ("    X -= X.mean(axis=0)\n", "argument 0 after the call"),       # centred, not scaled
                      ("    return (X - X.mean(axis=0)) / X.std(axis=0)\n", "the return value")):  # a copy
        tree = tmp_path / f"agent-{len(body)}"
        shutil.copytree(reference, tree)
        source = (tree / "prep.py").read_text()
        start = source.index('    """Standardise the columns')
        end = source.index("def fit_predict")
        (tree / "prep.py").write_text(source[:start] + '    """Agent."""\n' + body + "\n\n" + source[end:])
        verdict = _judge(task, tree, folder, reference)
        assert verdict.passed is False and verdict.verdict["matched"] == 0, (body, verdict)
        assert why in verdict.error_analysis, (body, verdict.error_analysis)


def test_a_kfold_that_ignores_its_seed_fails_on_the_perturbed_seed(tmp_path):
    """Red team attack 4: `kfold_indices(n_samples, n_folds, seed)` takes no array, so no float could be perturbed
    and its one recorded call was all there was; a body that shuffles with a fixed seed passed it. The numbers
    among the arguments are now perturbed too (the seed by 1, then 2, within what the reference accepts)."""
    task = _task(RIDGE)
    kfold = [f for f in task.masking.maskable_functions if f.qualname == "kfold_indices"]
    task = task.model_copy(update={"masking": task.masking.model_copy(update={"functions": kfold})})
    folder = tmp_path / "cache"
    assert _judge(task, _reference_copy(tmp_path), folder).passed is True
    recording = load_recording(folder, recording_key(task, _reference(RIDGE), targets_of(task, _reference(RIDGE))[0]))
    seeds = {c["args"][2] for c in recording.cases if c["perturbed"]}
    assert len(recording.cases) >= 2 and seeds - {0}, recording.cases
    tree = Path(prepare_workspace(task, tmp_path / "fixed-seed", repo=_reference(RIDGE)).path)
    source = (tree / "ridge.py").read_text()
    start = source.index("def kfold_indices(")
    end = source.index("def cross_validate_alpha(")
    fixed = (_reference(RIDGE) / "ridge.py").read_text()
    body = fixed[fixed.index("def kfold_indices("):fixed.index("def cross_validate_alpha(")]
    (tree / "ridge.py").write_text(source[:start] + body.replace("RandomState(seed)", "RandomState(0)")
                                   + source[end:])
    verdict = _judge(task, tree, folder)
    failed = {f["test"] for f in verdict.verdict["failures"]}
    assert verdict.passed is False
    assert failed and failed <= {f"test_derived[{c['id']}]" for c in recording.cases if c["perturbed"]}
