"""RExBench's released tasks, read in place from the shared data (8 of its 12 instructions.md files), through the
`tasks.import` stage into a real store and into the prompt an agent is given."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from failatlas.bench_core.agents.base import task_prompt
from failatlas.bench_core.tasks import RepoRef, TaskImportParams, get_task, list_tasks, run
from failatlas.cli import app
from failatlas.core.errors import InputError

NAMES = ("cogs", "entity-tracking-multimodal", "explain-then-translate", "implicit-ins", "mission-impossible",
         "re-reading", "reasoning-or-reciting", "varierr-nli")
HEADINGS = {"background": "## Background", "extension": "## Extension to be implemented",
            "evaluation": "### Evaluation"}


@pytest.fixture(scope="module")
def rexbench(shared_data: Path) -> Path:
    return shared_data / "rexbench"


def _sections(text: str) -> dict[str, str]:
    """The three sections of a released file, cut at its own heading lines (independently of the importer)."""
    lines = text.splitlines()
    starts = {role: lines.index(heading) for role, heading in HEADINGS.items()}
    ends = sorted([*starts.values(), len(lines)])
    return {role: "\n".join(lines[start + 1:ends[ends.index(start) + 1]]).strip() for role, start in starts.items()}


@pytest.mark.parametrize("where", ["", "instructions"])
def test_all_eight_tasks_import_through_the_stage(store, rexbench: Path, where: str):
    result = run(store, TaskImportParams(paths=[rexbench / where]))
    assert (result.n_tasks, result.inserted, len(result.files)) == (8, 8, 8)
    assert {r["id"] for r in list_tasks(store, benchmark="rexbench")} == {f"rexbench-{n}" for n in NAMES}
    (row,) = store.query_dicts("SELECT status FROM stage_runs WHERE stage = 'tasks.import'")
    assert row["status"] == "ok"


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory, rexbench: Path):
    from failatlas.store import open_store

    store = open_store(tmp_path_factory.mktemp("rexbench") / "store.duckdb")
    run(store, TaskImportParams(paths=[rexbench]))
    return {name: get_task(store, f"rexbench-{name}") for name in NAMES}


@pytest.mark.parametrize("name", NAMES)
def test_the_agent_is_told_each_section_exactly_once(imported, rexbench: Path, name: str):
    task = imported[name]
    text = (rexbench / "instructions" / name / "instructions.md").read_text()
    prompt = task_prompt(task.agent_view())
    sections = _sections(text)
    assert task.question == sections["extension"]
    for role, body in sections.items():
        assert prompt.count(body) == 1, role
    for line in text.splitlines():  # every line of the file that is said once there is said once to the agent
        if len(line.strip()) > 15 and not line.startswith("#") and text.count(line.strip()) == 1:
            assert prompt.count(line.strip()) == 1, line
    assert task.hints == [] and task.paper.title and task.paper.year in (2020, 2023, 2024)


@pytest.mark.parametrize("name", NAMES)
def test_without_checks_execution_is_not_judgeable_and_the_repository_is_the_users(imported, name: str):
    task = imported[name]
    assert task.judgeable_phases == ["implementation"] and "execution" not in task.judgeable_phases
    assert task.repository == RepoRef() and task.run.command is None  # no file names an explicit command
    assert {w.split(":")[0] for w in task.warnings} == {"no-execution-check", "repository-from-user"}
    assert f"--task rexbench-{name}" in " ".join(task.warnings)


def test_a_checks_file_makes_execution_judgeable_for_its_tasks_only(store, rexbench: Path, tmp_path: Path):
    checks = tmp_path / "checks.yaml"
    checks.write_text("cogs:\n  command: bash run_final.sh\n  checks:\n    - name: gen_exact_match\n"
                      "      source: stdout_regex\n      pattern: 'gen[^0-9]*([0-9.]+)'\n      value: 0.8\n"
                      "      atol: 0.05\n")
    run(store, TaskImportParams(paths=[rexbench], options={"checks": checks}))
    cogs = get_task(store, "rexbench-cogs")
    assert cogs.judgeable_phases == ["implementation", "execution"] and cogs.run.command == "bash run_final.sh"
    assert "execution" not in get_task(store, "rexbench-re-reading").judgeable_phases
    checks.write_text("othello:\n  - {name: acc, source: stdout_regex, pattern: 'acc (.*)', value: 1}\n")
    with pytest.raises(InputError, match="names no RExBench task") as err:
        run(store, TaskImportParams(paths=[rexbench], options={"checks": checks}))
    assert (err.value.path, err.value.line, err.value.field) == (str(checks), 1, "othello")


def test_the_cli_imports_and_shows_a_task_that_reads_well(rexbench: Path, tmp_path: Path):
    runner = CliRunner(env={"FAILATLAS_NO_PROGRESS": "1"})
    db = str(tmp_path / "rx.duckdb")
    imported = runner.invoke(app, ["--db", db, "tasks", "import", str(rexbench)])
    assert imported.exit_code == 0, imported.output
    assert "8 task(s) (8 new" in imported.stdout and "repository-from-user 8" in imported.stdout
    shown = runner.invoke(app, ["--db", db, "tasks", "show", "rexbench-cogs"])
    assert shown.exit_code == 0, shown.output
    out = shown.stdout
    assert out.count("Your task is to modify the codebase provided") == 1
    assert out.count("## Background") == 1 and out.count("### Evaluation") == 1
    assert "Extension to be implemented" not in out and "phases: implementation\n" in out
    assert re.search(r"paper: 2020 COGS: A Compositional Generalization Challenge", out)
    assert "failatlas repos add PATH --task rexbench-cogs" in out
