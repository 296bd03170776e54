"""The harness agents write their outputs (design, conclusion, run script) into `.failatlas/` in one copy: no `mkdir`
command first and no copy per file (issue 54: each was a Docker call, two of them a traced command), with a trace
step per file as `AgentContext.write` records it, so that collection still checks each file it reads back against
the bytes the agent wrote."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from failatlas.cli import app


def _invoke(db: Path, *args: str):  # noqa: ANN202
    return CliRunner().invoke(app, ["--db", str(db), *args], env={"FAILATLAS_NO_PROGRESS": "1", "COLUMNS": "200"})


def _run(db: Path, runs_dir: Path, agent: str, sandbox: str) -> tuple[str, list[tuple], list[str]]:
    assert _invoke(db, "tasks", "import-mini").exit_code == 0
    result = _invoke(db, "bench", "run", "--agent", agent, "--task", "mini-ridge-cv", "--sandbox", sandbox,
                     "--runs-dir", str(runs_dir))
    assert result.exit_code == 0, result.output
    with duckdb.connect(str(db), read_only=True) as conn:
        run_id, status, outputs = conn.execute("SELECT id, status, outputs FROM runs").fetchone()
        assert status == "completed", outputs
        steps = conn.execute("SELECT tool, arguments FROM run_steps WHERE run_id = ? AND kind = 'tool_call' "
                             "ORDER BY seq", [run_id]).fetchall()
        commands = [c for (c,) in conn.execute("SELECT command FROM sandbox_commands WHERE run_id = ? "
                                               "AND purpose = 'agent' ORDER BY seq", [run_id]).fetchall()]
    return run_id, steps, commands


def _check(run_id: str, runs_dir: Path, steps: list[tuple], commands: list[str], *, conclusion: bool) -> None:
    assert not any("mkdir" in c for c in commands), commands
    written = {json.loads(a)["path"]: json.loads(a)["sha256"] for tool, a in steps if tool == "write_file"}
    outputs = {".failatlas/design.json", ".failatlas/run.sh", *([".failatlas/conclusion.md"] if conclusion else [])}
    assert outputs <= set(written) and not ({".failatlas/conclusion.md"} - outputs) & set(written)
    kept = next(p for p in runs_dir.rglob(".failatlas") if run_id in str(p) and p.is_dir())
    for path in outputs:  # the collected copy holds exactly the bytes each step recorded
        assert hashlib.sha256((kept.parent / path).read_bytes()).hexdigest() == written[path]


@pytest.mark.parametrize(("agent", "conclusion"), [("gold", True), ("fault-no-conclusion", False)])
def test_outputs_written_in_one_step_each_recorded(tmp_path: Path, agent: str, conclusion: bool) -> None:
    run_id, steps, commands = _run(tmp_path / "s.duckdb", tmp_path / "runs", agent, "local")
    _check(run_id, tmp_path / "runs", steps, commands, conclusion=conclusion)


@pytest.mark.docker
def test_in_docker_the_outputs_are_one_copy_into_the_working_copy(tmp_path: Path, sandbox_image: str,
                                                                  monkeypatch) -> None:
    from failatlas.bench_core.sandbox import docker_sandbox

    puts: list[str] = []
    put = docker_sandbox.DockerSandbox._put
    monkeypatch.setattr(docker_sandbox.DockerSandbox, "_put",
                        lambda self, archive, dest: (puts.append(dest), put(self, archive, dest))[1])
    run_id, steps, commands = _run(tmp_path / "s.duckdb", tmp_path / "runs", "fault-fabricated-results", "docker")
    # this agent makes `.failatlas` itself first: the copy goes into the folder that exists
    assert commands[0] == "mkdir -p .failatlas"
    _check(run_id, tmp_path / "runs", steps, commands[1:], conclusion=True)
    puts.clear()
    run_id, steps, commands = _run(tmp_path / "g.duckdb", tmp_path / "gruns", "gold", "docker")
    _check(run_id, tmp_path / "gruns", steps, commands, conclusion=True)
    # the working copy, the restored module, the three outputs in one copy, then the tracer's folder (set up before
    # the first traced command, the run script)
    assert puts == ["/workspace", "/workspace", "/workspace", "/var/lib"], puts
