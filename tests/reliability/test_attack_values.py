"""Issue 29, reproductions 4, 5 and 7: values no reader should choke on, from an agent or from an imported file.

- 4: a results file holding a 400- or a 5000-digit integer is that run's failure; scoring carries on.
- 5: a design nested 200,000 levels deep, or holding a 5000-digit integer or a lone surrogate, is recorded as
  unreadable (the design phase fails); the run is stored normally, never `infra_error`.
- 7: an insight or task file holding a 5000-digit integer, a lone surrogate or a non-finite expected value is a
  one-line error naming file, line and field from the CLI, and nothing is written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from failatlas.bench_core.agents.base import Budget
from failatlas.bench_core.runs.execute import RunConfig
from failatlas.bench_core.runs.runner import plan, run_batch
from failatlas.bench_core.scoring import ScoreParams
from failatlas.bench_core.scoring import run as score
from failatlas.bench_core.suites import load_suite
from failatlas.bench_core.tasks import save_tasks
from failatlas.store import open_store

TASK = "mini-ridge-cv"
ROOT = Path(__file__).resolve().parents[2]
DIGITS_400, DIGITS_5000 = "1" * 400, "7" * 5000


@pytest.fixture(scope="module")
def mini_task():
    return next(t for t in load_suite("failatlas-mini") if t.id == TASK)


def _config(root: Path, image: str) -> RunConfig:
    return RunConfig(runs_dir=root / "runs", image=image, budget=Budget(command_timeout_s=60), memory_mb=512,
                     pids_limit=64)


def _runs(store, task, commands: dict[str, str], config: RunConfig, *, gold: bool = False) -> dict[str, dict]:
    """One batch: the command agent once per command (and gold); stored runs by name."""
    work = [w for command in commands.values()
            for w in plan(store, [task], "command", agent_params={"command": command}).todo]
    if gold:
        work += plan(store, [task], "gold").todo
    run_batch(store, work, config, workers=2)
    rows = {}
    for name, command in commands.items():
        [row] = store.query_dicts("SELECT * FROM runs WHERE agent_params = ?",
                                  [json.dumps({"command": command}, sort_keys=True)])
        rows[name] = row | {"outputs": json.loads(row["outputs"])}
    if gold:
        rows["gold"] = store.query_dicts("SELECT * FROM runs WHERE agent = 'gold'")[0]
    return rows


def _write_run_py(body: str) -> str:
    """A shell command that makes the masked `fit` (the code the clean re-run runs: the constructed tree) write
    `body` as results.json, print it and end the process."""
    code = f"open('results.json', 'w').write({body!r}); print({body!r}); import os; os._exit(0)"
    edit = ("import pathlib, re\np = pathlib.Path('ridge.py')\n"
            "p.write_text(re.sub(r'raise NotImplementedError\\(.*is masked: implement it.*\\)', lambda m: "
            f"{code!r}, p.read_text(), count=1))\n")
    return f"mkdir -p .failatlas && python3 -c {_shell(edit)} && echo 'python3 run.py' > .failatlas/run.sh"


def _shell(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


# -- reproduction 4: one run's huge numbers never stop the scoring of the others -----------------------------------

HUGE_RESULTS = {
    "400-digits": '{"test_mse_ols": ' + DIGITS_400 + ', "test_mse_ridge_cv": 3.6953, "selected_alpha": 10.0}',
    "5000-digits": '{"test_mse_ols": 10.1878, "test_mse_ridge_cv": ' + DIGITS_5000 + ', "selected_alpha": 10.0}',
    "nan-and-surrogate": '{"test_mse_ols": NaN, "test_mse_ridge_cv": 1e999, "selected_alpha": 10.0, "n": "\\ud800"}',
}


@pytest.mark.docker
@pytest.mark.slow
def test_huge_numbers_in_results_are_the_runs_failure_and_scoring_carries_on(sandbox_image, mini_task, tmp_path,
                                                                              table):
    store = open_store(tmp_path / "numbers.duckdb")
    save_tasks(store, [mini_task], source="failatlas-mini")
    runs = _runs(store, mini_task, {name: _write_run_py(body) for name, body in HUGE_RESULTS.items()},
                 _config(tmp_path, sandbox_image), gold=True)
    before = store.query("SELECT count(*) FROM validations")[0][0]
    result = score(store, ScoreParams(runs_dir=tmp_path / "runs", sandbox="docker", image=sandbox_image, llm=False))
    outcomes = dict(store.query("SELECT run_id, outcome FROM validations"))
    details = dict(store.query("SELECT run_id, detail FROM validations"))
    assert len(outcomes) == len(runs) == 4, (outcomes, result)  # every run scored, none left behind
    assert outcomes[runs["gold"]["id"]] == "passed"
    for name in HUGE_RESULTS:
        run_id = runs[name]["id"]
        assert runs[name]["status"] == "completed", runs[name]["infra_error"]
        assert outcomes[run_id] in ("runtime_error", "wrong_value"), (name, outcomes[run_id], details[run_id])
    assert "digits" in details[runs["5000-digits"]["id"]]
    table.record("attack-results-numbers",
                 "results.json with a 400-digit integer, a 5000-digit integer, NaN/1e999 and a lone surrogate: "
                 + ", ".join(f"{n} {outcomes[runs[n]['id']]}" for n in HUGE_RESULTS)
                 + "; the gold run in the same batch scored passed; every run scored", before=before,
                 after=len(outcomes))


# -- reproduction 5: an agent's output files never make infra_error -------------------------------------------------

DEEP = 200_000
BAD_DESIGNS = {
    "deep": f"python3 -c \"print('{{\\\"a\\\": ' * {DEEP} + '1' + '}}' * {DEEP})\" > .failatlas/design.json",
    "5000-digits": "printf '{\"constant\": {\"n\": %s}}' $(printf '7%.0s' $(seq 5000)) > .failatlas/design.json",
    "surrogate": "printf '{\"constant\": {\"\\\\ud800\": \"x\"}}' > .failatlas/design.json",
    "900-deep": "python3 -c \"print('[' * 900 + ']' * 900)\" > .failatlas/design.json",
}


@pytest.mark.docker
@pytest.mark.slow
def test_unreadable_design_is_recorded_as_the_agents_failure_never_infra_error(sandbox_image, mini_task, tmp_path,
                                                                                table):
    store = open_store(tmp_path / "design.duckdb")
    save_tasks(store, [mini_task], source="failatlas-mini")
    commands = {name: f"mkdir -p .failatlas && {cmd} && echo 'Ridge wins.' > .failatlas/conclusion.md"
                for name, cmd in BAD_DESIGNS.items()}
    before = store.query("SELECT count(*) FROM runs")[0][0]
    runs = _runs(store, mini_task, commands, _config(tmp_path, sandbox_image))
    for name, row in runs.items():
        assert row["status"] == "completed", (name, row["status"], row["infra_error"])
        assert row["outputs"]["design"] is None, name
        assert row["outputs"]["design_error"].startswith("unreadable:"), (name, row["outputs"]["design_error"])
    assert "nested" in runs["deep"]["outputs"]["design_error"]
    assert "5,000 digits" in runs["5000-digits"]["outputs"]["design_error"]
    assert "surrogate" in runs["surrogate"]["outputs"]["design_error"]
    assert "more than 100 levels" in runs["900-deep"]["outputs"]["design_error"]
    ids = [row["id"] for row in runs.values()]
    again = plan(store, [mini_task], "command", agent_params={"command": commands["deep"]})
    assert not again.todo and again.skipped == 1  # stored for good: nothing for --retry-infra to redo
    score(store, ScoreParams(runs_dir=tmp_path / "runs", run_ids=ids, sandbox="docker", image=sandbox_image,
                             llm=False))
    design = dict(store.query("SELECT run_id, passed FROM judgements WHERE judge = 'design-match'"))
    assert [design.get(i) for i in ids] == [False] * len(ids), design  # D fails: the agent's failure, counted
    after = store.query("SELECT count(*) FROM runs")[0][0]
    table.record("attack-output-json",
                 f"design.json nested {DEEP:,} and 900 levels, holding a 5000-digit integer, a lone surrogate key: "
                 f"{len(runs)} of {len(runs)} runs completed (not infra_error), design recorded unreadable, "
                 "design-match failed; nothing for --retry-infra", before=before, after=after)


# -- reproduction 7: importers ---------------------------------------------------------------------------------------

TRAIL_ROW = {"trace_id": "t1", "error_idx": 0, "category": "Formatting Errors", "description": "bad format",
             "impact": "LOW"}


def _cli(store: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "400"}
    return subprocess.run([sys.executable, "-m", "failatlas", "--db", str(store), *args], capture_output=True,
                          text=True, env=env, timeout=300, check=False)


def _one_line_error(proc: subprocess.CompletedProcess, *parts: str) -> str:
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, proc.stderr
    for part in parts:
        assert part in lines[0], (part, lines[0])
    return lines[0]


def _insight_files(folder: Path) -> dict[str, tuple[Path, str]]:
    """name -> (file, what its error must name)."""
    huge = json.dumps({**TRAIL_ROW, "error_idx": 1}).replace('"LOW"', DIGITS_5000)
    lone = json.dumps({**TRAIL_ROW, "error_idx": 1, "description": "x\ud800y"})
    files = {"trail-5000-digits": ("a.jsonl", json.dumps(TRAIL_ROW) + "\n" + huge + "\n", ":2 field 'impact'"),
             "trail-surrogate": ("b.jsonl", json.dumps(TRAIL_ROW) + "\n" + lone + "\n", ":2 field 'description'"),
             "jsonl-surrogate": ("c.jsonl", json.dumps({"text": "ok", "phase": "design"}) + "\n"
                                 + json.dumps({"text": "\udc80", "phase": "design"}) + "\n", ":2 field 'text'")}
    out = {}
    for name, (file, text, where) in files.items():
        (folder / file).write_text(text)
        out[name] = (folder / file, where)
    return out


def test_insight_files_with_huge_integers_or_lone_surrogates_are_one_line_errors(tmp_path, table):
    store = tmp_path / "ingest.duckdb"
    seen = []
    for name, (path, where) in _insight_files(tmp_path).items():
        line = _one_line_error(_cli(store, "ingest", "file", str(path)), str(path) + where)
        seen.append(f"{name}: {line[:90]}...")
    assert open_store(store).query("SELECT count(*) FROM insights")[0][0] == 0
    table.record("attack-import-values",
                 "ingest file: JSONL/TRAIL rows with a 5000-digit integer or a lone surrogate; tasks import: "
                 "task.yaml with a 5000-digit, .inf or .nan expected value, a negative or infinite tolerance: "
                 "one-line error naming file, line (where the format has one) and field, exit 2, nothing written",
                 before=0, after=0)


TASK_EDITS = {
    "5000-digits": ("value: 10.1878", "value: " + DIGITS_5000, "field 'expected_results[0].value'"),
    "inf": ("value: 10.1878", "value: .inf", "field 'expected_results.0.value'"),
    "nan": ("value: 3.6953", "value: .nan", "field 'expected_results.1.value'"),
    "negative-rtol": ("rtol: 0.001}", "rtol: -0.5}", "field 'expected_results.0.rtol'"),
    "infinite-atol": ("value: 10.0}", "value: 10.0, atol: .inf}", "field 'expected_results.2.atol'"),
    "surrogate": ("title: Ridge", 'title: "\\ud800 Ridge', "field 'title'"),
}


@pytest.mark.parametrize("case", sorted(TASK_EDITS))
def test_task_files_with_huge_or_non_finite_values_are_refused_at_import(case, mini_task, tmp_path):
    import shutil

    source = ROOT / "bench_core" / "suites" / "mini" / "ridge-cv"
    folder = tmp_path / "ridge-cv"
    shutil.copytree(source, folder)
    old, new, field = TASK_EDITS[case]
    text = (folder / "task.yaml").read_text()
    assert old in text
    if case == "surrogate":
        line = next(ln for ln in text.splitlines() if ln.startswith(old))
        text = text.replace(line, line.replace("title: ", 'title: "\\ud800 ') + '"')
    else:
        text = text.replace(old, new, 1)
    (folder / "task.yaml").write_text(text)
    store = tmp_path / "tasks.duckdb"
    line = _one_line_error(_cli(store, "tasks", "import", str(folder)), str(folder / "task.yaml"), field)
    if case == "5000-digits":
        assert "task.yaml:" in line  # the line too, where the YAML parser knows it
    assert open_store(store).query("SELECT count(*) FROM tasks")[0][0] == 0


def test_comparisons_take_only_finite_numbers(mini_task):
    """The comparisons themselves, whatever produced the values: the stdout answer, the results file and the
    checks each meet a 400-digit integer, NaN and infinities without raising, and none of them passes."""
    from failatlas.bench_core.scoring.erules.base import compare_metrics
    from failatlas.bench_core.scoring.erules.output_checks import evaluate_checks
    from failatlas.bench_core.scoring.erules.stdout_json import from_stdout_json
    from failatlas.bench_core.tasks.model import OutputCheck

    huge = int(DIGITS_400)
    for value in (huge, -huge, float("nan"), float("inf"), True, "10.1878", [10.1878], {"v": 10.1878}):
        ok, detail = compare_metrics(mini_task, {"test_mse_ols": value, "test_mse_ridge_cv": 3.6953,
                                                 "selected_alpha": 10.0})
        assert not ok and not detail["test_mse_ols"]["ok"], value
        json.dumps(detail)  # storable
    task = mini_task.model_copy(update={"run": mini_task.run.model_copy(update={"answer": "stdout_json"})})
    for printed in ('{"test_mse_ols": ' + DIGITS_400 + "}", '{"test_mse_ols": ' + DIGITS_5000 + "}",
                    "{'test_mse_ols': " + DIGITS_400 + "}", '{"a": ' * 900 + "1" + "}" * 900):
        compared = from_stdout_json(task, printed, {})
        assert compared.outcome == "wrong_value", (printed[:40], compared)
    check = OutputCheck(name="mse", source="stdout_regex", pattern=r"mse=(\S+)", value=10.1878, rtol=0.01)
    for text in (f"mse={DIGITS_400}", f"mse={DIGITS_5000}", "mse=nan", "mse=1e999"):
        assert not evaluate_checks([check], None, "/workspace", text)["mse"]["ok"], text
