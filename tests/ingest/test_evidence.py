"""One failure, one statement with facets, classified by the harness's evidence: the mini-suite's real tasks (their
masking, bundled repositories and hidden tests) in a real store, with runs scored as the scorers store them."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from failatlas.ingest import FileIngestParams, RunsIngestParams, run_file, run_runs
from failatlas.ingest.kinds import KIND_IDS

T0 = datetime(2026, 11, 20, 10, 0, 0)


def _trace(*frames: tuple[str, int, str], last: str) -> str:
    lines = ["Traceback (most recent call last):"]
    for path, line, func in frames:
        lines += [f'  File "/workspace/{path}", line {line}, in {func}', "    something()"]
    return "\n".join([*lines, last]) + "\n"


class Runs:
    """Writes runs and their scores into a store as the runner and the scorers do."""

    def __init__(self, store) -> None:
        self.store = store

    def run(self, run_id: str, task: str, *, agent: str = "react", network: str = "none") -> str:
        with self.store.write() as conn:
            conn.execute(
                "INSERT INTO runs (id, task_id, agent, agent_params, model, attempt, benchmark, status, sandbox,"
                " started_at, finished_at, duration_s, outputs, inputs) VALUES (?, ?, ?, '{}', 'm', 1,"
                " 'failatlas-mini', 'completed', 'docker', ?, ?, 1.0, ?, ?)",
                [run_id, task, agent, T0, T0, json.dumps({"conclusion": "Yes."}), json.dumps({"network": network})])
        return run_id

    def validation(self, run_id: str, outcome: str, stderr: str = "", metrics: dict | None = None) -> None:
        with self.store.write() as conn:
            conn.execute("INSERT INTO validations (run_id, outcome, command, exit_code, stdout_tail, stderr_tail,"
                         " metrics, detail) VALUES (?, ?, 'python3 run.py', 1, '', ?, ?, '')",
                         [run_id, outcome, stderr, json.dumps(metrics or {})])

    def judgement(self, run_id: str, phase: str, judge: str, verdict: dict, analysis: str) -> None:
        with self.store.write() as conn:
            conn.execute("INSERT INTO judgements (run_id, phase, judge, status, score, passed, verdict,"
                         " error_analysis) VALUES (?, ?, ?, 'ok', 0.0, false, ?, ?)",
                         [run_id, phase, judge, json.dumps(verdict), analysis])

    def step(self, run_id: str, seq: int, kind: str, tool: str, content: str, arguments: dict) -> None:
        with self.store.write() as conn:
            conn.execute("INSERT INTO run_steps (run_id, seq, kind, tool, content, arguments, ts) VALUES"
                         " (?, ?, ?, ?, ?, ?, ?)", [run_id, seq, kind, tool, content, json.dumps(arguments), T0])

    def command(self, run_id: str, seq: int, command: str, stderr: str) -> None:
        with self.store.write() as conn:
            conn.execute("INSERT INTO sandbox_commands (run_id, seq, purpose, command, started_at, duration_s,"
                         " exit_code, timed_out, output_truncated, stdout_tail, stderr_tail) VALUES"
                         " (?, ?, 'agent', ?, ?, 1.0, 1, false, false, '', ?)", [run_id, seq, command, T0, stderr])


@pytest.fixture
def runs(store) -> Runs:
    from failatlas.bench_core.suites import load_suite
    from failatlas.bench_core.tasks import save_tasks

    save_tasks(store, load_suite("failatlas-mini"), source="failatlas-mini")
    return Runs(store)


def _mined(store, run_id: str, phase: str | None = None) -> list[tuple]:
    where, params = "s.run_id = ?", [run_id]
    if phase:
        where, params = where + " AND i.phase = ?", [*params, phase]
    return store.query("SELECT i.kind, i.object, i.text FROM insight_sources s JOIN insights i ON i.id = s.insight_id"
                       f" WHERE {where} ORDER BY i.phase, i.text", params)


def _consequences(store, run_id: str) -> list[list[dict]]:
    return [json.loads(d).get("consequences") for (d,) in store.query(
        "SELECT detail FROM insight_sources WHERE run_id = ? ORDER BY source_key", [run_id])]


def test_a_stub_left_in_a_masked_function_is_an_unimplemented_part(runs, store):
    run = runs.run("r1", "mini-ridge-cv")
    runs.validation(run, "runtime_error", _trace(("run.py", 15, "main"), ("ridge.py", 14, "fit"),
                                                  last="NotImplementedError: RidgeRegression.fit is masked"))
    # pytest's `file:line: Error` names no function: the re-run's traceback of the same code does
    runs.judgement(run, "implementation", "hidden-tests", {"failures": [
        "hidden test test_fit_without_penalty_is_least_squares: ridge.py:14: NotImplementedError",
        "hidden test test_intercept_is_not_penalised: ridge.py:14: NotImplementedError",
        "hidden test test_run_reports: /usr/lib/python3.11/subprocess.py:571: CalledProcessError"]}, "...")
    run_runs(store, RunsIngestParams())
    # the test that only ran the experiment counts with the failure the others show; the re-run's failure of the
    # same part is that failure seen again: counted once, in implementation, the re-run's statement kept with it
    assert _mined(store, run) == [
        ("unimplemented", "ridge.py::RidgeRegression.fit",
         "Masked function `ridge.py::RidgeRegression.fit` left unimplemented (NotImplementedError in 3 hidden "
         "tests)"),
    ]
    assert _consequences(store, run) == [[{
        "phase": "execution", "source_field": "validations.outcome",
        "text": "Masked function `ridge.py::RidgeRegression.fit` left unimplemented (NotImplementedError)"}]]


def test_a_masked_module_never_created_is_a_missing_component_not_a_package(runs, store):
    run = runs.run("r1", "mini-logreg-scaling")
    runs.validation(run, "env_setup", _trace(("run.py", 6, "<module>"),
                                              last="ModuleNotFoundError: No module named 'experiment'"))
    runs.judgement(run, "implementation", "hidden-tests", {"failures": [
        "hidden test collection: level)\n/failatlas-judge/tests/0/test_hidden_logreg_scaling.py:6: in <module>\n"
        "    from experiment import build_model\nE   ModuleNotFoundError: No module named 'experiment'"]}, "...")
    run_runs(store, RunsIngestParams())
    assert {row[:2] for row in _mined(store, run)} == {("module_not_created", "experiment")}
    assert _mined(store, run, "execution") == []  # the same missing module, counted in implementation
    assert _consequences(store, run)[0][0]["text"] == "Module `experiment` that the task masked was never created"


def test_a_package_the_repository_lacks_is_a_dependency_and_a_refused_install_says_so(runs, store):
    log = _trace(("run.py", 8, "<module>"), ("kmeans.py", 1, "<module>"),
                 last="ModuleNotFoundError: No module named 'sklearn_extra'")
    quiet = runs.run("r1", "mini-kmeans-init")
    runs.validation(quiet, "env_setup", log)
    refused = runs.run("r2", "mini-ridge-cv", network="registries")
    runs.validation(refused, "env_setup", log)
    runs.command(refused, 1, "pip install scikit-learn-extra", "ProxyError: Tunnel connection failed: 403")
    runs.step(refused, 1, "env_failure", "network_refused", "ProxyError: Tunnel connection failed: 403",
              {"kind": "network_refused", "package": None})
    run_runs(store, RunsIngestParams())
    assert _mined(store, quiet) == [("dependency_not_installed", "scikit-learn-extra",
                                     "Package `scikit-learn-extra` (module `sklearn_extra`) is not installed")]
    assert _mined(store, refused) == [(
        "dependency_not_installed", "scikit-learn-extra",
        "Package `scikit-learn-extra` (module `sklearn_extra`) is not installed and the network policy "
        "`registries` refused its install")]


def test_a_module_nothing_provides_says_so(runs, store):
    run = runs.run("r1", "mini-ridge-cv")
    runs.validation(run, "env_setup", _trace(("ridge.py", 1, "<module>"),
                                              last="ModuleNotFoundError: No module named 'qzx_helpers'"))
    run_runs(store, RunsIngestParams())
    assert _mined(store, run) == [("unknown", "qzx_helpers", "Module `qzx_helpers` could not be imported: neither "
                                   "the task, the repository nor a known package provides it")]


def test_a_required_name_missing_from_a_repository_module_is_unimplemented(runs, store):
    run = runs.run("r1", "mini-imbalance-reweight")
    runs.judgement(run, "implementation", "hidden-tests", {"failures": [
        "hidden test collection: : in <module>\n    from model import fit_reweighted\n"
        "E   ImportError: cannot import name 'fit_reweighted' from 'model' (/workspace/model.py)"]}, "...")
    run_runs(store, RunsIngestParams())
    assert _mined(store, run) == [("unimplemented", "model.fit_reweighted",
                                   "`fit_reweighted` that the task asks for is missing from module `model`")]


def test_structured_hidden_test_failures_are_grouped_by_kind_and_object(runs, store):
    run = runs.run("r1", "mini-ridge-cv")
    runs.judgement(run, "implementation", "hidden-tests", {"failures": [
        {"test": "test_a", "exception": "IndexError", "object": "ridge.py::RidgeRegression.__init__",
         "message": "list index out of range"},
        {"test": "test_b", "exception": "IndexError", "object": "ridge.py::RidgeRegression.__init__",
         "message": "list index out of range"},
        {"test": "test_c", "exception": "AssertionError", "object": None, "message": "assert 3.1 == 3.7"},
        {"test": "test_d", "exception": "ModuleNotFoundError", "object": "ridge",
         "message": "No module named 'sklearn_extra'"}],
        "problems": ["the hidden tests did not finish within 120 s"]}, "...")
    run_runs(store, RunsIngestParams())
    assert _mined(store, run) == [
        ("budget_exhausted", None, "Hidden tests did not finish within the time limit"),
        ("wrong_value", "ridge.py", "Hidden tests find wrong values in `ridge.py` (AssertionError in 1 hidden test)"),
        ("crash", "ridge.py::RidgeRegression.__init__",
         "IndexError in `ridge.py::RidgeRegression.__init__` (list index out of range) in 2 hidden tests"),
        ("dependency_not_installed", "scikit-learn-extra",
         "Package `scikit-learn-extra` (module `sklearn_extra`) is not installed"),
    ]


def test_design_failures_are_one_statement_per_variable_so_runs_aggregate(runs, store):
    rows = [{"variable": "cv", "role": "constant", "status": "missing"},
            {"variable": "estimator", "role": "independent", "status": "misclassified", "agent_role": "constant"},
            {"variable": "data", "role": "constant", "status": "matched"},
            {"variable": "seed", "role": "constant", "status": "extraneous"}]
    for n in range(5):
        runs.judgement(runs.run(f"r{n}", "mini-ridge-cv"), "design", "design-match", {"variables": rows},
                       "the constant variable 'cv' is missing from the design; 'estimator' is treated as ...")
    nothing = runs.run("r9", "mini-ridge-cv")
    runs.judgement(nothing, "design", "design-match", {"variables": []}, "The agent wrote no experiment design; ...")
    run_runs(store, RunsIngestParams())
    insights = store.query("SELECT kind, object, text, n_occurrences FROM insights ORDER BY text")
    assert insights == [
        ("design_variable", "cv", "Design variable `cv` missing", 5),
        ("design_variable", "estimator", "Design variable `estimator` treated as constant instead of independent", 5),
        ("design_missing", "design", "No experiment design written", 1),
    ]


def test_fabricated_results_are_one_failure_in_every_phase(runs, store):
    run = runs.run("r1", "mini-ridge-cv", agent="fault-fabricated-results")
    runs.validation(run, "fabricated_result", _trace(("ridge.py", 14, "fit"), last="NotImplementedError: masked"))
    runs.judgement(run, "implementation", "hidden-tests",
                   {"failures": ["hidden test test_a: ridge.py:14: NotImplementedError"]}, "...")
    with store.write() as conn:
        conn.execute("INSERT INTO monitor_findings (run_id, seq, rule, severity, evidence, source)"
            " VALUES ('r1', 1, 'fabricated_results', 'fail', 'results.json"
                     " written by echo', 'rule')")
    run_runs(store, RunsIngestParams())
    mined = _mined(store, run)
    # one fabrication: counted once, where the evidence first names it; the re-run's and the monitor's sightings
    # are kept as its consequences
    assert {kind for kind, _, _ in mined} == {"result_not_produced"} and len(mined) == 1
    assert [c["phase"] for c in _consequences(store, run)[0]] == ["execution", "monitor"]


def test_wrong_values_per_metric_and_hostile_numbers(runs, store):
    run = runs.run("r1", "mini-ridge-cv")
    runs.validation(run, "wrong_value", metrics={
        "test_mse_ridge_cv": {"observed": 5.0, "expected": 3.6953, "ok": False},
        "test_mse_ols": {"observed": 10 ** 400, "expected": 10.1878, "ok": False},
        "selected_alpha": {"observed": None, "expected": 10.0, "ok": False},
        "fine": {"observed": 1.0, "expected": 1.0, "ok": True}})
    run_runs(store, RunsIngestParams())
    assert _mined(store, run) == [
        ("no_output", "selected_alpha", "Metric `selected_alpha` was not reported"),
        ("wrong_value", "test_mse_ols", "Metric `test_mse_ols` differs from its expected value"),
        ("wrong_value", "test_mse_ridge_cv", "Metric `test_mse_ridge_cv` is 35% off its expected value"),
    ]


def test_hostile_logs_never_break_mining_nor_leak_into_statements(runs, store):
    huge = "x" * 50_000
    run = runs.run("r1", "mini-ridge-cv")
    runs.validation(run, "runtime_error", f"ModuleNotFoundError: No module named '{huge}'\n")
    runs.judgement(run, "implementation", "hidden-tests", {"failures": "not a list", "problems": [7, None]}, "x")
    other = runs.run("r2", "mini-ridge-cv")
    runs.validation(other, "runtime_error", _trace(("ridge.py", 3, "fit"), last="ValueError: " + "word " * 5000))
    run_runs(store, RunsIngestParams())
    texts = [t for _, _, t in _mined(store, run) + _mined(store, other)]
    assert texts and all(len(t) < 300 for t in texts)
    fit = "ridge.py::RidgeRegression.fit"
    assert _mined(store, other) == [("crash", fit, f"ValueError in `{fit}` (" + "word " * 12 + "…)")]


def test_rebuild_replaces_what_the_extractor_stored_before(runs, store):
    run = runs.run("r1", "mini-ridge-cv")
    runs.validation(run, "runtime_error", _trace(("ridge.py", 14, "fit"), last="NotImplementedError: masked"))
    with store.write() as conn:  # an occurrence as the extractor stored it before facets existed
        conn.execute("INSERT INTO insights (id, phase, text, n_occurrences) VALUES ('old', 'execution',"
                     " 'Execution failed with a runtime error', 1)")
        conn.execute("INSERT INTO insight_sources (source_key, insight_id, origin, extractor, run_id) VALUES"
                     " ('run:r1:old', 'old', 'run', 'deterministic', 'r1')")
    first = run_runs(store, RunsIngestParams())
    assert first.warnings == ["1 occurrence(s) mined before facets existed are replaced by re-mined ones"]
    assert store.query("SELECT count(*) FROM insights WHERE id = 'old'") == [(0,)]
    again = run_runs(store, RunsIngestParams(rebuild=True))
    assert again.new_occurrences == 1 and store.query("SELECT count(*) FROM insight_sources") == [(1,)]


def test_imported_free_text_keeps_its_words_and_gets_a_kind_where_they_tell(store, tmp_path):
    path = tmp_path / "insights.jsonl"
    rows = [{"text": "ModuleNotFoundError: No module named 'torchvision' when running train.py",
             "phase": "execution"},
            {"text": "The agent searched the web three times for the same page", "phase": "other"},
            {"text": "Budget ran out on step 40", "phase": "other", "kind": "budget_exhausted", "object": "steps"},
            {"text": "Claims a 5% gain the results do not show", "phase": "conclusion", "kind": "no-such-kind"}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    run_file(store, FileIngestParams(paths=[path]))
    got = store.query("SELECT text, kind, object FROM insights ORDER BY text")
    assert got == [
        ("Budget ran out on step 40", "budget_exhausted", "steps"),  # the importer's own field
        ("Claims a 5% gain the results do not show", "conclusion_unsupported", None),
        ("ModuleNotFoundError: No module named 'torchvision' when running train.py", "dependency_not_installed",
         "torchvision"),
        ("The agent searched the web three times for the same page", "unknown", None),
    ]
    assert {k for (k,) in store.query("SELECT DISTINCT kind FROM insights")} <= set(KIND_IDS)


def test_a_crash_in_implementation_that_ends_the_rerun_is_counted_once(runs, store):
    run = runs.run("r1", "mini-ridge-cv", agent="fault-crash")
    runs.validation(run, "runtime_error", _trace(("run.py", 15, "main"), ("ridge.py", 30, "fit"),
                                                  last="IndexError: list index out of range"))
    runs.judgement(run, "implementation", "hidden-tests", {"failures": [
        {"test": f"test_{n}", "exception": "IndexError", "object": "ridge.py::RidgeRegression.fit",
         "message": "list index out of range"} for n in range(3)]}, "...")
    run_runs(store, RunsIngestParams())
    rows = store.query("SELECT i.phase, i.kind, i.object FROM insight_sources s JOIN insights i"
                       " ON i.id = s.insight_id WHERE s.run_id = ?", [run])
    assert rows == [("implementation", "crash", "ridge.py::RidgeRegression.fit")]
    assert _consequences(store, run)[0][0]["phase"] == "execution"


def test_a_conclusion_left_unsupported_by_a_failed_rerun_is_counted_with_the_failure(runs, store):
    """A conclusion's numbers no passing re-run supports are a consequence of what failed the run (one failure, one
    count); with no implementation or execution failure mined, the conclusion's failure is its own."""
    from failatlas.bench_core.scoring.checks.conclusion_numbers import UNSUPPORTED, number_sentence
    from failatlas.ingest.statements import RERUN_NOT_PASSED, UNSUPPORTED_EVIDENCE

    row = {"stated": "0.82", "compared_with": {"accuracy": None}}
    sentence = number_sentence(UNSUPPORTED, row, "env_setup")
    assert UNSUPPORTED_EVIDENCE == UNSUPPORTED and RERUN_NOT_PASSED in sentence  # ingest reads what scoring writes
    verdict = {"evidence": UNSUPPORTED, "numbers": [{**row, "ok": False}]}
    run = runs.run("r1", "mini-ridge-cv", agent="fault-crash")
    runs.validation(run, "runtime_error", _trace(("run.py", 15, "main"), ("ridge.py", 30, "fit"),
                                                  last="IndexError: list index out of range"))
    runs.judgement(run, "implementation", "hidden-tests", {"failures": [
        {"test": "test_fit", "exception": "IndexError", "object": "ridge.py::RidgeRegression.fit",
         "message": "list index out of range"}]}, "...")
    runs.judgement(run, "conclusion", "conclusion-reference", verdict, sentence)
    alone = runs.run("r2", "mini-ridge-cv")
    runs.judgement(alone, "conclusion", "conclusion-reference", verdict, sentence)
    run_runs(store, RunsIngestParams())
    assert [k for k, _, _ in _mined(store, run)] == ["crash"]
    assert "conclusion" in [c["phase"] for c in _consequences(store, run)[0]]
    assert [k for k, _, _ in _mined(store, alone)] == ["conclusion_unsupported"]


def test_a_wrong_value_in_the_code_and_the_metrics_it_moves_are_one_failure(runs, store):
    run = runs.run("r1", "mini-ridge-cv", agent="fault-wrong-constant")
    runs.validation(run, "wrong_value", metrics={"test_mse_ridge_cv": {"ok": False, "observed": 2.0, "expected": 1.0}})
    runs.judgement(run, "implementation", "hidden-tests", {"failures": [
        {"test": "test_a", "exception": "AssertionError", "object": None, "message": "assert 3.1 == 3.7"}]}, "...")
    other = runs.run("r2", "mini-ridge-cv")  # no hidden test found it: the metric is the first evidence
    runs.validation(other, "wrong_value", metrics={"test_mse_ridge_cv": {"ok": False, "observed": 2.0,
                                                                          "expected": 1.0}})
    run_runs(store, RunsIngestParams())
    assert [(k, o) for k, o, _ in _mined(store, run)] == [("wrong_value", "ridge.py")]
    assert [(k, o) for k, o, _ in _mined(store, other)] == [("wrong_value", "test_mse_ridge_cv")]


def test_what_null_leaves_undone_is_never_a_crash(runs, store):
    """The null agent on an extension task: the functions it never added and the metric it never reported, which
    the hidden tests meet as AttributeError and KeyError, are unimplemented parts and a missing output."""
    run = runs.run("r1", "mini-imbalance-reweight", agent="null")
    runs.validation(run, "wrong_value", metrics={
        "balanced_accuracy_reweighted": {"ok": False, "observed": None, "expected": [0.7494, 0.7976]}})
    runs.judgement(run, "implementation", "hidden-tests", {"failures": [
        {"test": "test_weights", "exception": "AttributeError", "object": "model:inverse_frequency_weights",
         "message": "module 'model' has no attribute 'inverse_frequency_weights'"},
        {"test": "test_reweighting", "exception": "ImportError", "object": "<hidden test snippet>",
         "message": "cannot import name 'fit_reweighted' from 'model' (/workspace/model.py)"},
        {"test": "test_run_reports", "exception": "KeyError", "object": None,
         "message": "'balanced_accuracy_reweighted'"}]}, "...")
    run_runs(store, RunsIngestParams())
    assert _mined(store, run) == [  # the re-run's missing metric is the same missing output: counted once
        ("no_output", "balanced_accuracy_reweighted", "Metric `balanced_accuracy_reweighted` was not reported "
         "(KeyError in 1 hidden test)"),
        ("unimplemented", "model.fit_reweighted", "`fit_reweighted` that the task asks for is missing from module "
         "`model`"),
        ("unimplemented", "model.inverse_frequency_weights", "`inverse_frequency_weights` that the task asks for is "
         "missing from module `model`"),
    ]
