"""Regression: `taxonomy build` with the `llm` labeller gives the LLM client the store, so every labelling call
is logged in `llm_calls` and cached; a re-run makes no second snapshot and sends no HTTP request. The endpoint is
a scripted fake OpenAI-compatible server on real HTTP (it stands in for a paid remote service); the client, the
cache and the store are the real ones."""

from __future__ import annotations

import json

from failatlas.core.llm.testing import ScriptedOpenAIServer, ScriptedReply
from failatlas.taxonomy import BuildParams
from failatlas.taxonomy import run as build
from failatlas.taxonomy.labelling import make_labeller
from failatlas.taxonomy.model import phase_rank

# The mini-suite's one group of two or more types (two of implementation's three types): the offline labeller
# finds no name more general than theirs (so its offline build has no category), the LLM is asked for one.
GROUPED_PHASES = ("implementation",)


def _script(offline) -> list[ScriptedReply]:
    """Valid replies in the order the build asks: per phase, its types (citing a member of each), then its
    group of two or more types (GROUPED_PHASES)."""
    replies = []
    phases = sorted({t.phase for t in offline.types}, key=lambda p: (phase_rank(p), p))
    for phase in phases:
        types = [t for t in offline.types if t.phase == phase]
        for k, t in enumerate(types, start=1):
            replies.append(ScriptedReply.json({
                "name": f"Scripted {phase} failure {k}",
                "definition": f"The scripted definition of {phase} type {k}.",
                "inclusion_criteria": ["Matches the scripted failure."],
                "representative_example_ids": [t.examples[0].insight_id],
            }))
        if phase in GROUPED_PHASES:
            replies.append(ScriptedReply.json({"name": f"Scripted {phase} failures",
                                               "definition": "A scripted category of failures."}))
    return replies


def test_llm_labelling_is_logged_and_cached_in_the_store_so_a_rebuild_sends_nothing(mini_store, monkeypatch):
    offline = build(mini_store, BuildParams())
    script = _script(offline)
    with ScriptedOpenAIServer(script) as server:
        monkeypatch.delenv("FAILATLAS_LLM_CONFIG", raising=False)
        monkeypatch.setenv("FAILATLAS_LLM_LABELLER_BASE_URL", server.base_url)
        monkeypatch.setenv("FAILATLAS_LLM_LABELLER_MODEL", "scripted-fake")
        first = build(mini_store, BuildParams(labeller="llm"))
        sent = len(server.requests)
        assert sent == len(script) == 7  # 6 types and the one category (two of implementation's three types)
        assert all(t.naming_method == "llm" and t.name.startswith("Scripted") for t in first.types)
        assert offline.categories == [] and [c.name for c in first.categories] == ["Scripted implementation failures"]
        host = server.base_url.split("//", 1)[1].split("/", 1)[0]
        assert first.labelled_by == {"model": "scripted-fake", "endpoint": host}  # which model named the types
        assert offline.labelled_by == {}
        from failatlas.taxonomy.read import load_taxonomy

        assert load_taxonomy(mini_store, first.id).labelled_by == first.labelled_by
        calls = mini_store.query_dicts("SELECT role, status, cached, http_attempts FROM llm_calls ORDER BY created_at")
        assert len(calls) == sent
        assert all(c["role"] == "labeller" and c["status"] == "ok" and not c["cached"] for c in calls)

        again = build(mini_store, BuildParams(labeller="llm"))  # `failatlas demo` run a second time
        assert len(server.requests) == sent and again.id == first.id  # the same snapshot: nothing labelled again
        n_calls = len(calls)
        assert mini_store.query("SELECT count(*) FROM llm_calls")[0][0] == n_calls

        # a new snapshot with the same prompts (a labeller object always makes one) is answered from the cache
        fresh = build(mini_store, BuildParams(labeller="llm"), labeller=make_labeller("llm", store=mini_store))
        assert len(server.requests) == sent
    cached = mini_store.query("SELECT count(*) FROM llm_calls WHERE cached AND http_attempts = 0")[0][0]
    assert cached == sent
    assert fresh.id != first.id and fresh.version == first.version + 1
    assert [(t.id, t.name, t.definition, t.raw_reply) for t in fresh.types] == [
        (t.id, t.name, t.definition, t.raw_reply) for t in first.types
    ]
    assert [(c.id, c.name) for c in fresh.categories] == [(c.id, c.name) for c in first.categories]
    assert mini_store.query("SELECT count(*) FROM taxonomies")[0][0] == 3  # offline, llm, the fresh llm one
    runs = mini_store.query("SELECT params, summary FROM stage_runs WHERE stage = 'taxonomy.build'"
                            " ORDER BY started_at")
    assert [json.loads(p)["labeller"] for (p, _) in runs] == ["offline", "llm", "llm", "llm"]
    assert [json.loads(s).get("reused", False) for (_, s) in runs] == [False, False, True, False]
