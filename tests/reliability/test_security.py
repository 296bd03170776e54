"""Security: a planted API key never reaches the store, traces, exports or logs; ground truth never enters an
agent's sandbox; the app opens the store read-only and runs no user-supplied SQL."""

from __future__ import annotations

import ast
import json
import shlex
import sys
from pathlib import Path

import duckdb
import pytest

from failatlas.bench_core import runs, scoring
from failatlas.bench_core.suites import load_suite
from failatlas.bench_core.tasks import save_tasks
from failatlas.bench_core.tasks.catalog import get_task
from failatlas.core.llm.testing import ScriptedOpenAIServer, ScriptedReply
from failatlas.store import Store

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-planted-" + "7f3a9c1e5b2d4f6a8c0e1b3d5f7a9c2e"
REFERENCE_LINE = "np.linalg.solve(gram"  # the body masking removed from ridge.py


def _everything_in(store: Store) -> dict[str, str]:
    """Every value of every table, as text, by table."""
    return {f"table {t}": json.dumps(store.query(f'SELECT * FROM "{t}"'), default=str) for t in store.tables()}


@pytest.mark.docker
@pytest.mark.slow
def test_planted_key_and_ground_truth_stay_out(sandbox_image, store, tmp_path, monkeypatch, capfd, table):
    monkeypatch.setenv("FAILATLAS_PLANTED_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    save_tasks(store, load_suite("failatlas-mini"), source="failatlas-mini")
    task = get_task(store, "mini-ridge-cv")
    conclusion_words = task.expected_conclusion[:40]
    probe = ("env; echo \"key:$OPENAI_API_KEY:$FAILATLAS_PLANTED_KEY\"; echo GT-START; "
             "find / -xdev \\( -name 'test_hidden*' -o -name hidden_tests -o -name task.yaml \\) 2>/dev/null;"
             " grep -rIlF -e " + shlex.quote(REFERENCE_LINE) + " -e " + shlex.quote(conclusion_words)
             + " / --exclude-dir=proc --exclude-dir=sys --exclude-dir=usr --exclude-dir=dev 2>/dev/null;"
             " echo GT-END; mkdir -p .failatlas; echo \"$OPENAI_API_KEY\" > .failatlas/conclusion.md")
    before = store.query("SELECT count(*) FROM runs")[0][0]
    runs.run(store, runs.BenchParams(agent="command", agent_params={"command": probe}, task_ids=[task.id],
                                     runs_dir=tmp_path / "runs", image=sandbox_image))
    [(status, run_id)] = store.query("SELECT status, id FROM runs WHERE agent = 'command'")
    assert status == "completed"
    [out] = [r[0] for r in store.query("SELECT stdout_tail FROM sandbox_commands WHERE run_id = ? AND command = ?",
                                       [run_id, probe])]
    assert "key::\n" in out and "OPENAI" not in out.split("key:")[0]
    assert out.split("GT-START\n", 1)[1].split("GT-END")[0] == ""  # no ground truth anywhere in the sandbox

    leak = KEY  # the endpoints echo the key back, as a misconfigured proxy or a confused model might
    with ScriptedOpenAIServer([
        ScriptedReply.tool_call("bash", {"command": f"echo {leak} > leaked.txt"}),
        ScriptedReply.text(f"Authorization: Bearer {leak}"),
        ScriptedReply.tool_call("write_file", {"path": ".failatlas/conclusion.md", "content": f"key {leak}"}),
        ScriptedReply.tool_call("finish", {}),
    ]) as agent_server:
        for name, value in {"BASE_URL": agent_server.base_url, "MODEL": "scripted", "MAX_RETRIES": "0",
                            "API_KEY_ENV": "FAILATLAS_PLANTED_KEY"}.items():
            monkeypatch.setenv(f"FAILATLAS_LLM_AGENT_{name}", value)
        runs.run(store, runs.BenchParams(agent="react", task_ids=[task.id], runs_dir=tmp_path / "runs",
                                         image=sandbox_image))
        assert agent_server.remaining == 0
    assert store.query("SELECT status FROM runs WHERE agent = 'react'") == [("completed",)]

    with ScriptedOpenAIServer([
        ScriptedReply.error(401, f"Incorrect API key provided: {leak}"),
        ScriptedReply.json({"steps": [], "error_analysis": f"the request carried {leak}"}),
        ScriptedReply.json({"correct": False, "error_analysis": f"Bearer {leak}"}),
    ]) as server:
        for name, value in {"BASE_URL": server.base_url, "MODEL": "scripted", "MAX_RETRIES": "0",
                            "API_KEY_ENV": "FAILATLAS_PLANTED_KEY"}.items():
            monkeypatch.setenv(f"FAILATLAS_LLM_JUDGE_{name}", value)
        scoring.run(store, scoring.ScoreParams(runs_dir=tmp_path / "runs", image=sandbox_image))
        assert server.requests[0].headers.get("authorization") == f"Bearer {KEY}"  # it was really used
    from failatlas.bench_core.scoring.report import report_table, write_report
    exports = write_report(report_table(store, by="agent"), "agent", tmp_path / "report")
    texts = {**_everything_in(store), **{p.name: p.read_text() for p in exports}}
    captured = capfd.readouterr()
    texts["stdout/stderr"] = captured.out + captured.err
    for where in ("judgements", "llm_calls", "run_steps", "sandbox_commands", "runs"):
        assert "[REDACTED]" in texts[f"table {where}"], where
    leaks = [where for where, text in texts.items() if KEY in text or KEY[3:] in text]
    assert not leaks, leaks
    table.record("secret-api-key", f"key echoed by the agent's and the judge's endpoints; searched in "
                 f"{len(texts)} places (every table, {len(exports)} export files, logs): absent, stored as [REDACTED]",
                 before=before, after=store.query("SELECT count(*) FROM llm_calls")[0][0])
    table.record("secret-ground-truth", "no hidden test, task file, removed code or expected conclusion in the "
                 "sandbox; host environment (API keys) not passed in", before=before,
                 after=store.query("SELECT count(*) FROM runs")[0][0])


SQL_METHODS = {"execute", "sql", "query", "query_dicts", "query_polars", "executemany"}
INPUT_WIDGETS = {"text_input", "text_area", "chat_input", "number_input", "selectbox", "multiselect", "radio",
                 "slider", "select_slider", "data_editor", "file_uploader", "query_params"}


def _user_sql_flows(source: str) -> list[str]:
    """SQL calls whose statement is built from something a user supplies (a widget's value or query params)."""
    tree = ast.parse(source)
    tainted: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.NamedExpr):
            value = node.value
            if value is not None and any(isinstance(n, ast.Attribute) and n.attr in INPUT_WIDGETS
                                         for n in ast.walk(value)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                tainted |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SQL_METHODS \
                and node.args:
            statement = node.args[0]
            names = {n.id for n in ast.walk(statement) if isinstance(n, ast.Name)}
            widgets = [n for n in ast.walk(statement) if isinstance(n, ast.Attribute) and n.attr in INPUT_WIDGETS]
            if names & tainted or widgets:
                bad.append(f"line {node.lineno}: {ast.unparse(statement)[:80]}")
    return bad


def test_app_opens_the_store_read_only_and_runs_no_user_sql(mini_store_for_app, monkeypatch, table):
    from streamlit.testing.v1 import AppTest

    # AppTest leaves sys.modules["__main__"] pointing at app.py; spawned worker pools of later tests would run it
    monkeypatch.setitem(sys.modules, "__main__", sys.modules["__main__"])
    db = mini_store_for_app
    opened: list[bool] = []
    real_connect = duckdb.connect

    def spy(database=":memory:", read_only=False, *args, **kwargs):  # records how the app opens the file
        opened.append(bool(read_only))
        return real_connect(database, read_only, *args, **kwargs)

    monkeypatch.setattr(duckdb, "connect", spy)
    monkeypatch.setenv("FAILATLAS_DB", str(db))
    before = Store(db).query("SELECT count(*) FROM tasks")[0][0]
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert not app.exception, app.exception
    assert opened and all(opened), opened
    assert _user_sql_flows((ROOT / "app.py").read_text()) == []
    assert _user_sql_flows("q = st.text_input('sql')\nconn.execute(q)\n") == ["line 2: q"]  # the check bites
    table.record("app-read-only", f"{len(opened)} connection(s), all read_only=True; no SQL built from a widget "
                 "or query parameter", before=before, after=Store(db).query("SELECT count(*) FROM tasks")[0][0])


@pytest.fixture
def mini_store_for_app(store):
    save_tasks(store, load_suite("failatlas-mini"), source="failatlas-mini")
    return store.path
