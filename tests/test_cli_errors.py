"""What a new user met (the first-use report): bad flags and paths end in one line naming the option or the path,
never a traceback; `bench list --json` and `bench show` say how each run was judged; help texts say what the
app writes. Every command runs as a user runs it: `python -m failatlas` on a real store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from failatlas.bench_core import runs, scoring
from failatlas.bench_core.tasks import save_tasks


def _cli(*args: str, cwd: Path, width: int | None = 80) -> subprocess.CompletedProcess:
    """`failatlas ARGS` with its output to a pipe, on `width` columns (None: no $COLUMNS, as `> out.txt`)."""
    env = {**os.environ, "COLUMNS": str(width), "FAILATLAS_NO_PROGRESS": "1"}
    env.pop("FAILATLAS_DB", None)
    if width is None:
        env.pop("COLUMNS")
        env.pop("LINES", None)
    return subprocess.run([sys.executable, "-m", "failatlas", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=300)


def _one_line_error(result: subprocess.CompletedProcess, *words: str) -> str:
    """The error a user sees: a non-zero exit, one line on stderr starting with 'error:', naming `words`."""
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def mini_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("mini")
    result = _cli("--db", "mini.duckdb", "tasks", "import-mini", cwd=folder)
    assert result.returncode == 0, result.stderr
    return folder / "mini.duckdb"


def test_tasks_prepare_names_the_force_flag_and_says_when_out_is_a_file(mini_db, tmp_path):
    full = tmp_path / "full"
    (full / "x").mkdir(parents=True)
    line = _one_line_error(_cli("--db", str(mini_db), "tasks", "prepare", "mini-ridge-cv", "--out", str(full),
                                cwd=tmp_path), str(full), "not empty", "--force")
    assert "force=True to" not in line  # the flag a CLI user can pass, not the Python argument alone
    a_file = tmp_path / "a-file"
    a_file.write_text("mine\n")
    line = _one_line_error(_cli("--db", str(mini_db), "tasks", "prepare", "mini-ridge-cv", "--out", str(a_file),
                                cwd=tmp_path), str(a_file), "is a file, not a folder")
    assert "not empty" not in line and a_file.read_text() == "mine\n"
    # --force replaces the folder, as the message says
    result = _cli("--db", str(mini_db), "tasks", "prepare", "mini-ridge-cv", "--out", str(full), "--force",
                  cwd=tmp_path)
    assert result.returncode == 0 and not (full / "x").exists(), result.stderr


def test_app_help_says_what_the_app_writes(tmp_path):
    for args in (["--help"], ["app", "--help"]):
        text = " ".join(_cli(*args, cwd=tmp_path, width=200).stdout.replace("│", " ").split())
        about_app = text.split(" app ", 1)[-1].split(" demo ", 1)[0] if args == ["--help"] else text
        assert "read-only" not in about_app, text  # (`db query` is read-only; the app is not)
        assert "writes only what you do in it (labels, taxonomy edits)" in about_app, text


@pytest.fixture(scope="module")
def scored_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real store: gold and null on one mini-suite task (one attempt each) in the local sandbox, scored
    offline on all five phases, and one null run left unscored."""
    from failatlas.bench_core.suites import load_suite
    from failatlas.store import open_store

    folder = tmp_path_factory.mktemp("scored")
    store = open_store(folder / "mini.duckdb")
    save_tasks(store, load_suite("failatlas-mini"), source="failatlas-mini")
    base = dict(task_ids=["mini-ridge-cv"], sandbox="local", runs_dir=folder / "runs")
    for agent in ("gold", "null"):
        runs.run(store, runs.BenchParams(agent=agent, **base))
    scoring.run(store, scoring.ScoreParams(sandbox="local", runs_dir=folder / "runs", llm=False))
    runs.run(store, runs.BenchParams(agent="null", model="unscored-model", **base))
    return store.path


@pytest.mark.parametrize("flag, value, words", [
    ("--k", "-1", ["--k -1", "k >= 1"]), ("--k", "0", ["--k 0", "k >= 1"])])
def test_bench_report_refuses_a_bad_k_in_one_line(scored_db, tmp_path, flag, value, words):
    _one_line_error(_cli("--db", str(scored_db), "bench", "report", flag, value, cwd=tmp_path), *words)


def test_bench_report_out_below_a_file_is_one_line_naming_the_path(scored_db, tmp_path):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine\n")
    line = _one_line_error(_cli("--db", str(scored_db), "bench", "report", "--out", str(a_file / "report"),
                                cwd=tmp_path), str(a_file), "is a file, not a folder")
    assert str(a_file / "report") in line and a_file.read_text() == "mine\n"
    _one_line_error(_cli("--db", str(scored_db), "bench", "report", "--out", str(a_file), cwd=tmp_path),
                    str(a_file), "is a file, not a folder")


def test_write_report_turns_an_unwritable_folder_into_one_error(scored_db, tmp_path):
    from failatlas.bench_core.scoring.report import report_table, write_report
    from failatlas.core.errors import InputError
    from failatlas.core.store import Store

    table = report_table(Store(scored_db), by="agent")
    out = tmp_path / "out"
    out.mkdir()
    (out / "report_by_agent.tex").mkdir()  # the last file cannot take its name: no file of the three is written
    with pytest.raises(InputError, match="cannot write the report") as caught:
        write_report(table, "agent", out)
    assert str(out) in str(caught.value)
    assert sorted(p.name for p in out.iterdir()) == ["report_by_agent.tex"]
    a_file = tmp_path / "f"
    a_file.write_text("")
    with pytest.raises(InputError, match="is a file, not a folder"):
        write_report(table, "agent", a_file / "sub")


def test_pass_at_k_with_too_few_attempts_says_why(scored_db, tmp_path):
    result = _cli("--db", str(scored_db), "bench", "report", "--k", "3", "--out", "rep",
                  cwd=tmp_path, width=200)
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "pass@3 and pass^3 need 3 attempts of a task scored on M·C·D·I·E; 2 of 2 group(s) have no such task " \
           "(at most 1 per task here): `failatlas bench run --attempts 3`" in text, result.stdout
    assert "need 3 attempts" in (tmp_path / "rep" / "report_by_agent.md").read_text()
    again = _cli("--db", str(scored_db), "bench", "report", "--k", "1", cwd=tmp_path, width=200)
    assert again.returncode == 0 and "attempts of a task" not in again.stdout, again.stdout


def test_bench_list_json_has_outcome_and_phases(scored_db, tmp_path):
    result = _cli("--db", str(scored_db), "bench", "list", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert len(rows) == 3
    table = _cli("--db", str(scored_db), "bench", "list", cwd=tmp_path, width=200).stdout
    for r in rows:
        assert set(r["phases"]) == set("MDIEC") and set(r["phases"].values()) <= {"passed", "failed", None}
        marks = "".join({"passed": "✓", "failed": "✗", None: "–"}[r["phases"][p]] for p in "MDIEC")
        line = next(line for line in table.splitlines() if r["id"] in line)
        if r["model"] == "unscored-model":
            assert not r["scored"] and r["outcome"] is None and set(r["phases"].values()) == {None}
            assert "unscored" in line
        else:
            assert r["scored"] and r["outcome"] in line.split() and marks in line.split(), (r, line)
    gold = [r for r in rows if r["agent"] == "gold"]
    assert all(r["outcome"] == "passed" and r["phases"]["E"] == "passed" for r in gold), gold
    null = [r for r in rows if r["agent"] == "null" and r["scored"]]
    assert all(r["phases"]["E"] == "failed" for r in null), null
    assert {tuple(r["phases"].values()) for r in gold} == {("passed",) * 5}


def test_bench_show_has_verdicts_and_takes_a_unique_prefix(scored_db, tmp_path):
    rows = json.loads(_cli("--db", str(scored_db), "bench", "list", "--json", cwd=tmp_path).stdout)
    run = next(r for r in rows if r["agent"] == "null" and r["scored"])
    prefix = next(run["id"][:n] for n in range(5, len(run["id"]))
                  if sum(r["id"].startswith(run["id"][:n]) for r in rows) == 1)
    result = _cli("--db", str(scored_db), "bench", "show", prefix, cwd=tmp_path, width=200)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(run["id"])
    assert f"verdicts: outcome {run['outcome']}" in lines
    for phase in "MDIEC":
        line = next(line for line in lines if line.startswith(f"  {phase} "))
        verdict = run["phases"][phase] or "not scored"
        assert line.split()[2] == verdict.split()[0], line
    assert "monitor: no finding" in result.stdout and f"validator: {run['outcome']}" in result.stdout
    shown = json.loads(_cli("--db", str(scored_db), "bench", "show", prefix, "--json", cwd=tmp_path).stdout)
    assert {p: v["verdict"] for p, v in shown["verdicts"]["phases"].items()} == run["phases"]
    judged = [j for v in shown["verdicts"]["phases"].values() for j in v["judges"] if j["status"] == "ok"]
    assert judged and all(f"{j['judge']} {j['score']:.2f}" in result.stdout for j in judged if j["score"] is not None)
    # an unscored run says so; an ambiguous prefix lists the candidates; an unknown one is one line too
    unscored = next(r for r in rows if not r["scored"])
    assert "verdicts: not scored (`failatlas bench score --run" in _cli(
        "--db", str(scored_db), "bench", "show", unscored["id"], cwd=tmp_path, width=200).stdout
    line = _one_line_error(_cli("--db", str(scored_db), "bench", "show", "run-", cwd=tmp_path, width=400),
                           "ambiguous")
    assert all(r["id"] in line for r in rows)
    _one_line_error(_cli("--db", str(scored_db), "bench", "show", "no-such-run", cwd=tmp_path), "no-such-run")


def test_bench_report_to_a_file_keeps_every_score_column(scored_db, tmp_path):
    """`failatlas bench report --by X > out.txt`: no terminal, 80 columns; every score column, and every group's
    mean, is printed (it kept only M for --by setting), with the note when no task names a paper."""
    from failatlas.bench_core.scoring.report import METRICS, report_notes, report_table
    from failatlas.core.store import Store
    from failatlas.core.tables import fmt

    result = _cli("--db", str(scored_db), "bench", "report", "--by", "setting,paper,agent", "--k", "1",
                  cwd=tmp_path, width=None)
    assert result.returncode == 0, result.stderr
    notes = set(report_notes(Store(scored_db)))  # one line each, as the terminal wraps them
    lines = [line for line in result.stdout.splitlines() if line not in notes]
    assert max(len(line) for line in lines) <= 80 and "…" not in result.stdout
    sections = result.stdout.split("by ")
    for by in ("setting", "paper", "agent"):
        section = next(part for part in sections if part.startswith(f"{by}\n"))
        words = section.split()
        for header in (*METRICS, "pass@1", "pass^1"):
            assert header in words, (by, header, section)
        table = report_table(Store(scored_db), by=by, k=1)
        for r in table.iter_rows(named=True):
            for metric in METRICS:
                if r[f"{metric}_n"]:
                    assert fmt(r[metric]) in words, (by, metric)
    assert "(no run's task names a paper)" in result.stdout
