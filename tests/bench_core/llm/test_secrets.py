"""A planted API key reaches the server, and nowhere else: not the DuckDB file, its rows, errors or logs."""

from __future__ import annotations

import logging

import pytest

from failatlas.core.llm import LLMClient, LLMEndpointError
from failatlas.core.llm.redact import Redactor
from failatlas.core.llm.testing import ScriptedReply

KEY = "sk-failatlas-PLANTED-7f3a9c2e41d86b05"
MARKER = "MARKER-prompt-stored-4d1c"


def test_planted_key_never_reaches_the_store_or_the_logs(
    server, make_config, store, db_path, monkeypatch, caplog
):
    monkeypatch.setenv("FAILATLAS_TEST_PLANTED_KEY", KEY)
    for name in ("", "openai", "httpx", "httpcore", "bench_core"):
        caplog.set_level(logging.DEBUG, logger=name or None)
    server.enqueue(
        ScriptedReply.error(500, f"upstream rejected Bearer {KEY}"),
        ScriptedReply.text(f"Your key {KEY} works. {MARKER}-reply"),
        ScriptedReply.error(401, "Incorrect API key provided: sk-faila*****************6b05."),
    )
    client = LLMClient(make_config(api_key_env="FAILATLAS_TEST_PLANTED_KEY", max_retries=1), store)
    prompt = [{"role": "user", "content": f"{MARKER}: the agent printed its env: OPENAI_API_KEY={KEY}"}]
    result = client.chat(prompt, run_id="run-secret", purpose=f"purpose with {KEY}")
    assert result.content == f"Your key [REDACTED] works. {MARKER}-reply"  # what callers see is redacted too
    with pytest.raises(LLMEndpointError) as info:
        client.chat([{"role": "user", "content": "again"}])
    assert KEY not in info.value.one_line() and "sk-faila*" not in info.value.one_line()
    assert "[REDACTED]" in info.value.one_line()

    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"  # the key was really used
    assert client.chat(prompt, run_id="run-secret").raw == result.raw  # the cached replay is the same reply
    assert KEY not in repr(client) and KEY not in client.config.model_dump_json()

    rows = []
    for table in store.tables():
        rows += [str(v) for row in store.query(f'SELECT * FROM "{table}"') for v in row]
    stored = "\n".join(rows)
    assert MARKER in stored  # the control: prompts and replies are stored
    assert KEY not in stored and "sk-faila*" not in stored
    assert "OPENAI_API_KEY=[REDACTED]" in stored

    data = db_path.read_bytes()
    assert MARKER.encode() in data  # the control: stored text is findable in the file's bytes
    assert KEY.encode() not in data and KEY[-16:].encode() not in data

    assert caplog.records  # the retry warning at least
    assert KEY not in caplog.text


def test_redactor_leaves_ordinary_text_alone():
    redactor = Redactor(["not-needed", "s3cr3t-value-long"])
    text = "sk-learn is not a key; Bearer tokens are; x=s3cr3t-value-long"
    assert redactor.text(text) == "sk-learn is not a key; Bearer tokens are; x=[REDACTED]"
    assert redactor.text("Authorization: Bearer abcdef0123456789xyz") == "Authorization: [REDACTED]"
    assert redactor.obj({"k": ["sk-abcdefghijklmnop1234"]}) == {"k": ["[REDACTED]"]}
