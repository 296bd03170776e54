"""The DuckDB cache and call log: hits send no request, survive a new process, and cost nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from pydantic import BaseModel

from failatlas.core.llm import LLMClient, LLMEndpointError, MemoryRecords, llm_usage
from failatlas.core.llm.testing import ScriptedReply
from failatlas.store import Store

REPO = Path(__file__).resolve().parents[3]
ASK = [{"role": "user", "content": "Grade this."}]


class Grade(BaseModel):
    grade: int


def test_cache_hit_sends_no_request_and_costs_nothing(server, make_config, store):
    server.enqueue(ScriptedReply.text("fresh", prompt_tokens=100, completion_tokens=20))
    client = LLMClient(make_config(price_input_per_mtok=3.0, price_output_per_mtok=15.0), store)
    first = client.chat(ASK)
    second = client.chat(ASK)
    assert server.request_count == 1
    assert (first.cached, second.cached, second.content, second.http_attempts) == (False, True, "fresh", 0)
    assert first.cost_usd == pytest.approx((100 * 3.0 + 20 * 15.0) / 1e6)
    assert second.cost_usd == 0.0 and second.key == first.key and second.raw == first.raw
    rows = store.query_dicts(
        "SELECT cached, cost_usd, prompt_tokens, completion_tokens FROM llm_calls ORDER BY cached"
    )
    assert [(r["cached"], r["prompt_tokens"], r["completion_tokens"]) for r in rows] == [
        (False, 100, 20),
        (True, 100, 20),
    ]
    assert rows[0]["cost_usd"] == pytest.approx(first.cost_usd) and rows[1]["cost_usd"] == 0.0
    cache = store.query_dicts("SELECT * FROM llm_cache")
    assert (
        len(cache) == 1
        and cache[0]["role"] == "judge"
        and cache[0]["cost_usd"] == pytest.approx(first.cost_usd)
    )
    assert json.loads(cache[0]["request"])["messages"] == ASK


def test_sample_index_model_params_and_schema_change_the_key(server, make_config, store):
    server.enqueue(*[ScriptedReply.text(f"sample {i}") for i in range(5)])
    client = LLMClient(make_config(), store)
    assert client.chat(ASK, sample_index=0).content == "sample 0"
    assert client.chat(ASK, sample_index=1).content == "sample 1"
    assert client.chat(ASK, sample_index=0, temperature=1.0).content == "sample 2"
    assert LLMClient(make_config(model="other"), store).chat(ASK).content == "sample 3"
    assert client.chat(ASK, sample_index=1).content == "sample 1"  # a hit
    assert server.request_count == 4


def test_use_cache_false_always_asks(server, make_config, store):
    server.enqueue(ScriptedReply.text("a"), ScriptedReply.text("b"))
    client = LLMClient(make_config(), store, use_cache=False)
    assert [client.chat(ASK).content for _ in range(2)] == ["a", "b"]
    assert store.query("SELECT count(*) FROM llm_cache") == [(0,)]
    assert store.query("SELECT count(*) FROM llm_calls") == [(2,)]


def test_rescoring_a_structured_reply_replays_the_repair_from_the_cache(server, make_config, store):
    server.enqueue(ScriptedReply.text("grade: A"), ScriptedReply.json({"grade": 3}))
    client = LLMClient(make_config(), store)
    assert client.structured(ASK, Grade).value.grade == 3
    again = client.structured(ASK, Grade)
    assert again.ok and again.value.grade == 3 and again.attempts == 2 and again.cached
    assert server.request_count == 2


_CHILD = """
import json, sys
from failatlas.core.llm import LLMClient, LLMConfig
from failatlas.store import Store
config = LLMConfig.model_validate_json(sys.argv[2])
result = LLMClient(config, Store(sys.argv[1])).chat([{"role": "user", "content": "Grade this."}])
print(json.dumps({"content": result.content, "cached": result.cached}))
"""


def test_cache_survives_a_new_process(server, make_config, db_path, store):
    server.enqueue(ScriptedReply.text("remembered"))
    config = make_config()
    LLMClient(config, store).chat(ASK)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(db_path), config.model_dump_json()],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"content": "remembered", "cached": True}
    assert server.request_count == 1
    assert Store(db_path).query("SELECT count(*) FROM llm_calls WHERE cached") == [(1,)]


def test_worker_rows_stay_in_memory_until_the_parent_flushes_them(server, make_config, store, db_path):
    server.enqueue(ScriptedReply.text("from the worker"))
    records = MemoryRecords()
    worker = LLMClient(make_config(), records=records)
    assert [worker.chat(ASK).cached for _ in range(2)] == [False, True]
    assert server.request_count == 1
    assert store.query("SELECT count(*) FROM llm_calls") == [(0,)]  # the worker never opened the store
    assert records.flush(store) == 2 and records.calls == [] and records.cache == []
    assert store.query("SELECT count(*), count(*) FILTER (WHERE cached) FROM llm_calls") == [(2, 1)]
    # a later worker seeded by its parent from the store gets the hit without a request
    seeded = MemoryRecords(seed=store.query_dicts("SELECT key, response FROM llm_cache"))
    again = LLMClient(make_config(), records=seeded).chat(ASK)
    assert again.cached and again.content == "from the worker" and server.request_count == 1


def test_a_reply_appends_to_the_conversation_as_an_assistant_message(server, make_config, store):
    server.enqueue(ScriptedReply.tool_call("read_file", {"path": "a.py"}), ScriptedReply.text("done"))
    client = LLMClient(make_config(), store)
    first = client.chat(ASK)
    follow_up = [
        *ASK,
        first.as_message(),
        {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "print(1)"},
    ]
    assert client.chat(follow_up).content == "done"
    sent = server.requests[1].body["messages"][1]
    assert sent["tool_calls"][0]["function"] == {"name": "read_file", "arguments": '{"path": "a.py"}'}


def test_threads_share_one_client_and_store(server, make_config, store):
    server.enqueue(*[ScriptedReply.text(f"reply {i}") for i in range(12)])
    client = LLMClient(make_config(), store)
    errors: list[BaseException] = []

    def ask(worker: int) -> None:
        try:
            for i in range(3):
                client.chat([{"role": "user", "content": f"worker {worker} question {i}"}])
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=ask, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert store.query("SELECT count(*), count(DISTINCT key) FROM llm_calls") == [(12, 12)]
    assert server.request_count == 12


def test_usage_totals_count_what_was_spent(server, make_config, store):
    server.enqueue(ScriptedReply.text("a", prompt_tokens=100, completion_tokens=10),
                   ScriptedReply.text("b", prompt_tokens=200, completion_tokens=20),
                   ScriptedReply.error(400, "bad"),
                   ScriptedReply.text("c", prompt_tokens=7, completion_tokens=1))  # fmt: skip
    priced = LLMClient(make_config(price_input_per_mtok=1.0, price_output_per_mtok=10.0), store)
    priced.chat(ASK, run_id="r1")
    priced.chat(ASK, run_id="r1")  # a hit: free
    priced.chat([{"role": "user", "content": "other"}], run_id="r1")
    with pytest.raises(LLMEndpointError):
        priced.chat([{"role": "user", "content": "refused"}], run_id="r1")
    LLMClient(make_config(role="labeller"), store).chat([{"role": "user", "content": "x"}], run_id="r2")
    r1 = llm_usage(store, run_id="r1")
    assert (r1.calls, r1.cached_calls, r1.failed_calls, r1.unpriced_calls) == (4, 1, 1, 0)
    assert (r1.prompt_tokens, r1.completion_tokens, r1.tokens) == (300, 30, 330)
    assert r1.cost_usd == pytest.approx((300 * 1.0 + 30 * 10.0) / 1e6)
    r2 = llm_usage(store, run_id="r2")
    assert (r2.calls, r2.tokens, r2.cost_usd, r2.unpriced_calls) == (1, 8, 0.0, 1)
    assert llm_usage(store, role="labeller") == r2
    assert llm_usage(store).calls == 5
