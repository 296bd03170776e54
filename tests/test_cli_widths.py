"""The CLI's tables at 80 and 120 columns (issue 34): no name is cut ("…"), no line is wider than the terminal,
the CIs are printed; `--db` is taken before and after every subcommand; a flag's help prints no type."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml
from rich.console import Console

from failatlas.bench_core.agents import agent_names
from failatlas.bench_core.cli.bench_report import report_tables
from failatlas.bench_core.cli.bench_views import runs_tables
from failatlas.bench_core.scoring.report import GROUPINGS, METRICS
from failatlas.taxonomy.cli import prevalence_tables

ROOT = Path(__file__).resolve().parents[1]
AGENTS = [a for a in agent_names() if a not in ("command", "react")]  # the demo's agents, real names
TASKS = sorted(yaml.safe_load(p.read_text())["id"] for p in (ROOT / "bench_core/suites/mini").glob("*/task.yaml"))


def _render(tables: list, width: int) -> str:
    console = Console(width=width, file=io.StringIO(), record=True, color_system=None, legacy_windows=False)
    for table in tables:
        console.print(table)
    return console.export_text()


def _assert_within(text: str, width: int) -> None:
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= width


def _run_rows() -> list[dict]:
    rows = []
    for t, task in enumerate(TASKS):
        for a, agent in enumerate(AGENTS):
            fault = agent.removeprefix("fault-").replace("-", "_") if agent.startswith("fault-") else None
            rows.append({"id": f"run-{t:02d}{a:02d}{'0' * 12}", "task_id": task, "agent": agent, "model": "",
                         "attempt": 1, "status": "completed", "fault_injected": fault, "seconds": 12.5})
    return rows


@pytest.mark.parametrize("width", [80, 120])
def test_bench_list_cuts_no_name_and_shows_outcome_and_phases(width):
    rows = _run_rows()
    rows[1]["status"] = "agent_error"
    marks = {r["id"]: ("fabricated_result", "✗✓✗✗✓") for r in rows[2:]}
    text = _render(runs_tables(rows, marks, width), width)
    _assert_within(text, width)
    lines = text.splitlines()
    for r in rows:  # a run's id and agent on one line, whole: missing-component and missing-package differ
        assert any(r["id"] in line and f" {r['agent']} " in line for line in lines), r
    assert "outcome" in text and "MDIEC" in text and "fabricated_result" in text and "✗✓✗✗✓" in text
    assert "unscored" in lines[[i for i, line in enumerate(lines) if rows[0]["id"] in line][0]]
    assert "agent_error" in text
    assert "fault " not in text  # the agents' names say their fault: no column repeats it
    flat = "task mini-" not in text
    assert flat == (width == 120), text  # at 80 columns one table per task, titled with its id
    for task in TASKS:
        assert (f" {task} " in text) if flat else (f"task {task}" in text)


@pytest.mark.parametrize("width", [80, 120])
def test_bench_list_with_long_model_names_drops_no_column(width):
    """A model column made the per-task table wider than 80 columns: its outcome, MDIEC and s were cut."""
    rows = _run_rows()
    for r in rows:
        r["model"] = "gpt-4o-mini-2024-07-18"
    marks = {r["id"]: ("fabricated_result", "✗✓✗✗✓") for r in rows[1:]}
    text = _render(runs_tables(rows, marks, width), width)
    _assert_within(text, width)
    words = text.split()
    for header in ("run", "agent", "model", "att.", "outcome", "MDIEC", "s"):
        assert header in words, header
    assert words.count("gpt-4o-mini-2024-07-18") == len(rows)
    assert words.count("✗✓✗✗✓") == words.count("fabricated_result") == len(rows) - 1
    assert words.count("unscored") == 1 and words.count("12.5") == len(rows)
    for r in rows:
        assert words.count(r["id"]) >= 1 and r["agent"] in words, r


def _report_frame() -> pl.DataFrame:
    rows = []
    for i, agent in enumerate(AGENTS):
        row = {"agent": agent, "model": "", "runs": 5, "stored": 5, "E_env_n": 1 if agent == "null" else 0}
        for m in METRICS:
            row |= {m: 0.2 * (i % 5), f"{m}_lo": 0.0, f"{m}_hi": 0.6, f"{m}_n": 0 if m == "E" and agent == "null"
                    else 4}
        rows.append(row)
    return pl.DataFrame(rows)


@pytest.mark.parametrize("width", [80, 120])
def test_bench_report_keeps_the_intervals(width):
    text = _render(report_tables(_report_frame(), "agent"), width)
    _assert_within(text, width)
    assert "phase scores, mean and 95% CI" in text and "conjunctive scores, mean and 95% CI" in text
    assert text.count("0.00–0.60") == len(AGENTS) * len(METRICS) - 1  # every cell but null's E
    assert "(left" in text.split() and "1)" in text.split()  # null's E: the runs left out, wrapped at spaces
    for agent in AGENTS:
        # whole, once per table ('mutant' also ends 'method-mutant': a name counts where no name character precedes)
        assert len(re.findall(rf"(?<![\w-]){re.escape(agent)} ", text)) == 2, agent
    assert "model" not in text  # no agent has a model: the empty column is left out


def _grouped_frame(by: str, k: int | None = None, paper: bool = True) -> pl.DataFrame:
    """`report_table`'s frame for `by` with long, real-looking names (several benchmarks, papers, settings) and a
    value of its own in every cell: mean (row * 10 + metric) / 100 over its CI from the mean to 1.00; pass@k
    0.80 + row / 100, pass^k 0.90 + row / 100."""
    rows = []
    for i in range(6):
        row = {"task_id": f"exp_bench_{'neurips' if i % 2 else 'iclr'}24_task_{i:03d}",
               "agent": ["openhands_codeact_agent_with_a_long_name", "fault-fabricated-results"][i % 2],
               "model": "gpt-4o-mini-2024-07-18", "benchmark": ["exp-bench", "autoexperiment"][i % 2],
               "fault_injected": "fabricated_results" if i % 2 else None,
               "paper_id": f"2303.{11932 + i}" if paper else None, "kind": ["T1", "masked_functions"][i % 2],
               "setting": "partial_code+refsol" if i % 2 else None, "n_masked": i % 3,
               "runs": 12, "stored": 15, "E_env_n": 0}
        for m, metric in enumerate(METRICS):
            mean = (i * 10 + m) / 100
            row |= {metric: mean, f"{metric}_lo": mean, f"{metric}_hi": 1.0, f"{metric}_n": 12}
        if k:
            row |= {f"pass@{k}": 0.8 + i / 100, f"pass^{k}": 0.9 + i / 100}
        rows.append(row)
    return pl.DataFrame(rows)


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("by", list(GROUPINGS))
@pytest.mark.parametrize("k", [None, 2])
def test_bench_report_drops_no_score_column_for_any_grouping(by, width, k):
    """Issue 34 (12): every score column and every number of every group shows at 80 and 120 columns, for every
    --by; a family too wide is split or its group columns joined, never cut."""
    frame = _grouped_frame(by, k)
    text = _render(report_tables(frame, by, width), width)
    _assert_within(text, width)
    words = text.split()
    headers = [*METRICS, *([f"pass@{k}", f"pass^{k}"] if k else [])]
    for header in headers:
        assert header in words, (header, text)
    for i in range(frame.height):
        for m in range(len(METRICS)):
            mean = f"{(i * 10 + m) / 100:.2f}"
            assert words.count(mean) == 1 and words.count(f"{mean}–1.00") == 1, (by, i, METRICS[m], text)
        if k:
            assert words.count(f"{0.8 + i / 100:.2f}") == 1 and words.count(f"{0.9 + i / 100:.2f}") == 1
    assert words.count("of") >= frame.height * 2  # "12 of 15" runs, in every part of every family
    for name in ("openhands_codeact_agent_with_a_long_name", "fault-fabricated-results"):
        assert name in words, name  # never broken inside
    if by == "task":
        for task in frame["task_id"]:
            assert task in words, task
    assert "no run's task names a paper" not in text


@pytest.mark.parametrize("width", [80, 120])
def test_bench_report_by_paper_says_when_no_task_names_a_paper(width):
    text = _render(report_tables(_grouped_frame("paper", paper=False), "paper", width), width)
    _assert_within(text, width)
    assert text.count("(no run's task names a paper)") == 1
    named = _render(report_tables(_grouped_frame("paper"), "paper", width), width)
    assert "2303.11932" in named.split() and "no run's task names" not in named


TYPES = [("implementation", "Hidden test failures", "ModuleNotFoundError: hidden test collection"),
         ("execution", "Execution failures", "Execution failed with an uncaught IndexError"),
         ("conclusion", "", "Research question is left unanswered by the conclusion")]


def _prevalence(groups: list[str]) -> pl.DataFrame:
    rows = [{"group": g, "phase": p, "category": c, "failure_type": t, "count": 2, "total": 9, "share": 2 / 9,
             "ci_low": 0.0, "ci_high": 0.444} for g in groups for p, c, t in TYPES]
    return pl.DataFrame(rows)


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("groups", [["gold", "null"], AGENTS])
def test_taxonomy_show_by_agent_cuts_no_name(width, groups):
    text = _render(prevalence_tables(_prevalence(groups), "agent", "taxonomy v1, unit: insights", width), width)
    _assert_within(text, width)
    words = text.split()
    for _phase, category, name in TYPES:
        for word in (*category.split(), *name.split()):
            assert word in words, word  # wrapped at spaces only, never inside a word
    assert "0.0–44.4" in text and "22.2" in text
    wide = len(groups) == 2 and width == 120
    assert ("share % of its total" in text) == wide
    for g in groups:
        assert (f" {g} " in text or text.count(f"agent {g}\n")) if not wide else g in words


def test_taxonomy_show_without_groups_fits_80_columns():
    text = _render(prevalence_tables(_prevalence(["-"]).drop("group"), None, "taxonomy v1", 80), 80)
    _assert_within(text, 80)
    assert "ModuleNotFoundError:" in text.split() and "95% CI %" in text


def _cli(*args: str, width: int = 80, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": str(width), "FAILATLAS_NO_PROGRESS": "1"}
    env.pop("FAILATLAS_DB", None)
    return subprocess.run([sys.executable, "-m", "failatlas", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=300)


def test_db_is_taken_before_and_after_every_subcommand(tmp_path):
    assert _cli("db", "migrate", "--db", "x.duckdb", cwd=tmp_path).returncode == 0
    assert (tmp_path / "x.duckdb").is_file() and not (tmp_path / "failatlas.duckdb").exists()
    for args in (["--db", "x.duckdb", "bench", "list"], ["bench", "list", "--db", "x.duckdb"],
                 ["--db", "missing.duckdb", "bench", "list", "--db", "x.duckdb"]):  # after the command wins
        result = _cli(*args, cwd=tmp_path)
        assert result.returncode == 0 and "0 run(s)" in result.stdout, (args, result.stderr)
    for args in (["taxonomy", "show", "--db", "missing.duckdb"], ["--db", "missing.duckdb", "taxonomy", "show"]):
        result = _cli(*args, cwd=tmp_path)
        assert result.returncode != 0 and "no store at missing.duckdb" in result.stderr, (args, result.stderr)
        assert "No such option" not in result.stderr
    assert not (tmp_path / "missing.duckdb").exists()


@pytest.mark.parametrize("width", [80, 120])
def test_help_prints_no_type_for_flags(width, tmp_path):
    for args in (["--help"], ["taxonomy", "show", "--help"], ["bench", "list", "--help"]):
        result = _cli(*args, width=width, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert "<bool>" not in result.stdout and "--help" in result.stdout
        assert max(len(line) for line in result.stdout.splitlines()) <= width
    shown = _cli("taxonomy", "show", "--help", width=width, cwd=tmp_path).stdout
    assert "--db" in shown and "also accepted before the command" in " ".join(shown.replace("│", " ").split())


def _command_paths(group: object, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command and group below `group`, by the names a user types (the stage groups loaded as they run)."""
    import typer

    ctx = typer.Context(group)  # type: ignore[arg-type]
    paths = []
    for name in group.list_commands(ctx):  # type: ignore[attr-defined]
        command = group.get_command(ctx, name)  # type: ignore[attr-defined]
        paths.append((*prefix, name))
        if hasattr(command, "list_commands"):
            paths += _command_paths(command, (*prefix, name))
    return paths


def test_every_help_wraps_at_80_columns_and_cuts_nothing():
    """Issue 42: at 80 columns Typer's panels squeezed `taxonomy build --help` to about 19 characters a line
    and cut four texts with "…". Every command's and group's help now wraps within 80 columns and cuts nothing
    (`label list` quotes the "…" it cuts statements with)."""
    import typer
    from typer.testing import CliRunner

    from failatlas.cli import app

    runner = CliRunner()  # Click's help is laid out on 80 columns under its runner
    paths = _command_paths(typer.main.get_command(app))
    assert len(paths) > 40 and ("taxonomy", "build") in paths and ("cluster", "run") in paths
    for path in [(), *paths]:
        out = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"}).output
        assert out.startswith("Usage:"), (path, out)
        assert "…" not in out.replace('"…"', ""), (path, out)
        assert max(len(line) for line in out.splitlines()) <= 80, (path, out)
    build = runner.invoke(app, ["taxonomy", "build", "--help"], env={"COLUMNS": "80"}).output
    flat = " ".join(build.split())
    assert "(insight_sources.label) are ground truth for evaluation" in flat
    assert "--fit-definitions / --no-fit-definitions" in build and "[default: no-fit-definitions]" in flat
    assert "Labelled statements to learn the categories" in build  # a help line far wider than 19 characters
    assert sum(len(line) > 70 for line in build.splitlines()) > 10


def test_every_agent_has_a_description_printed_whole():
    """Issue 42: `failatlas agents --all` left five descriptions empty and cut others mid-sentence."""
    from failatlas.bench_core.agents import agent_description

    names = agent_names(include_hidden=True)
    empty = [n for n in names if not agent_description(n)]
    assert not empty, empty
    assert all(agent_description(n).endswith((".", ")")) for n in names), {n: agent_description(n) for n in names}
    result = _cli("agents", "--all", cwd=ROOT)
    assert result.returncode == 0, result.stderr
    _assert_within(result.stdout, 80)
    words = result.stdout.split()
    for name in names:
        assert name in words, name
    assert "hostile-json-forge" in words and "`json.dumps`" in words


def _cli80(tmp_path: Path, *args: str, **env: str) -> str:
    """`failatlas --db STORE ARGS` on 80 columns, its output to a pipe."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FAILATLAS_LLM")}
    environ |= {"COLUMNS": "80", "FAILATLAS_NO_PROGRESS": "1", **env}
    result = subprocess.run([sys.executable, "-m", "failatlas", "--db", str(tmp_path / "s.duckdb"), *args],
                            capture_output=True, text=True, env=environ, cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_tasks_list_at_80_columns_prints_every_field_and_the_whole_question(tmp_path):
    _cli80(tmp_path, "tasks", "import-mini")
    text = _cli80(tmp_path, "tasks", "list")
    _assert_within(text, 80)
    joined = " ".join(text.split())
    for path in (ROOT / "bench_core/suites/mini").glob("*/task.yaml"):
        task = yaml.safe_load(path.read_text())
        assert task["id"] in text and task["kind"] in text
        assert " ".join(task["question"].split()) in joined, task["id"]  # wrapped at spaces, never cut


def test_llm_config_at_80_columns_prints_endpoint_and_model_whole(tmp_path):
    endpoint, model = "http://127.0.0.1:8080/v1", "qwen2.5-coder-32b-instruct-q4_k_m-gguf"
    text = _cli80(tmp_path, "llm", "config", FAILATLAS_LLM_JUDGE_BASE_URL=endpoint, FAILATLAS_LLM_JUDGE_MODEL=model)
    _assert_within(text, 80)
    assert endpoint in text and model in text and "json_schema" in text
    for role in ("agent", "judge", "monitor", "extractor", "labeller"):
        assert role in text
    assert text.count("not configured") == 4
