"""The LLM labeller: contrastive prompt, schema-checked reply, prompts and raw replies stored, offline
fallback
when the reply is unusable. The endpoint is paid/remote, so a fake client stands in for it here."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from typer.testing import CliRunner

from failatlas.cli import app
from failatlas.core.errors import ConfigError
from failatlas.taxonomy import BuildParams
from failatlas.taxonomy import run as build
from failatlas.taxonomy.labelling import LLMLabeller, make_labeller
from tests.taxonomy.mini import INSIGHTS


@dataclass
class FakeResult:
    ok: bool
    value: Any = None
    error: str | None = None
    raw: str | None = None


@dataclass
class FakeStructuredLLM:
    """Stands in for failatlas.core.llm's client: answers from a script and records every call."""

    answer: Any
    calls: list[tuple[list[dict[str, str]], dict[str, Any]]] = field(default_factory=list)

    def structured(self, messages, schema, purpose=None):  # noqa: ANN001, ANN201
        self.calls.append((messages, schema))
        return self.answer(messages, schema) if callable(self.answer) else self.answer


def _good_reply(messages, schema):
    body = json.loads(messages[1]["content"])
    inside = body["INSIDE"]
    if schema["title"] == "LLMCategoryLabel":
        value = {
            "name": "Runtime crashes",
            "definition": "Code that stops with an exception: " + ", ".join(t["name"] for t in inside) + ".",
        }
        return FakeResult(ok=True, value=value, raw=json.dumps(value))
    value = {
        "name": f"Failures about {body['inside_keywords'][0]}",
        "definition": "The agent's code fails in this particular way.",
        "inclusion_criteria": ["Shows the specific failure."],
        "exclusion_criteria": ["Is not one of the OUTSIDE failures."],
        "representative_example_ids": [inside[-1]["id"]],
    }
    return FakeResult(ok=True, value=value, raw=json.dumps(value))


def test_llm_names_are_used_and_prompts_are_contrastive_and_stored(mini_store):
    client = FakeStructuredLLM(_good_reply)
    tax = build(mini_store, BuildParams(labeller="llm"), labeller=LLMLabeller(client))
    # 6 types, and one category of two types (the other types stand alone: a category groups two or more types
    # short of a whole phase)
    assert len(tax.types) == 6 and len(client.calls) == 7
    assert all(t.naming_method == "llm" and t.name.startswith("Failures about") for t in tax.types)
    named = [c for c in tax.categories if c.naming_method == "llm"]
    assert [c.name for c in named] == ["Runtime crashes"] and named[0].phase == "implementation"
    category_prompt = json.loads(named[0].prompt[1]["content"])
    inside_names = {t["name"] for t in category_prompt["INSIDE"]}
    assert (
        inside_names == {t.name for t in tax.types if t.category_id == named[0].id} and len(inside_names) == 2
    )
    assert category_prompt["OUTSIDE"] and not inside_names & set(category_prompt["OUTSIDE"][0]["types"])
    assert not [c for c in tax.categories if c.phase == "design"]  # two types: the phase itself groups them
    stored_cat = mini_store.query(
        "SELECT naming_method, raw_reply FROM failure_categories WHERE taxonomy_id = ? AND id = ?",
        [tax.id, named[0].id],
    )[0]
    assert stored_cat[0] == "llm" and json.loads(stored_cat[1])["name"] == "Runtime crashes"
    messages, schema = client.calls[0]
    assert set(schema["required"]) >= {
        "name",
        "definition",
        "inclusion_criteria",
        "representative_example_ids",
    }
    impl = next(t for t in tax.types if t.phase == "implementation" and t.n_insights == 4)
    prompt = json.loads(impl.prompt[1]["content"])
    inside_texts = {x["text"] for x in prompt["INSIDE"]}
    assert inside_texts == {t for t, _ in INSIGHTS["implementation"]["import"]}
    outside_texts = {t for cluster in prompt["OUTSIDE"] for t in cluster["examples"]}
    assert outside_texts and not outside_texts & inside_texts
    assert outside_texts <= {t for items in INSIGHTS["implementation"].values() for t, _ in items}
    # The cited example comes first; prompt and raw reply are in the store.
    assert impl.examples[0].insight_id == prompt["INSIDE"][-1]["id"]
    assert "Not: Is not one of the OUTSIDE failures." in impl.inclusion_criteria
    stored = mini_store.query(
        "SELECT prompt, raw_reply, naming_method FROM failure_types WHERE taxonomy_id = ? AND id = ?",
        [tax.id, impl.id],
    )[0]
    assert json.loads(stored[0])[0]["role"] == "system"
    assert json.loads(stored[1])["name"] == impl.name and stored[2] == "llm"


@pytest.mark.parametrize(
    "reply",
    [
        FakeResult(ok=False, error="HTTP 503 from endpoint"),
        FakeResult(ok=True, value={"name": "x"}),  # schema violation
        FakeResult(ok=True, value="not json at all"),
        FakeResult(
            ok=True,
            value={
                "name": "Invented type",
                "definition": "A definition sentence here.",
                "inclusion_criteria": ["a"],
                "representative_example_ids": ["made-up-id"],
            },
        ),
    ],
)
def test_unusable_replies_fall_back_to_offline_names_and_say_so(mini_store, reply):
    tax = build(mini_store, BuildParams(), labeller=LLMLabeller(FakeStructuredLLM(reply)))
    offline = build(mini_store, BuildParams())
    assert [t.name for t in tax.types] == [t.name for t in offline.types]
    assert all(t.naming_method == "offline-after-llm-error" for t in tax.types)
    assert all("rejected" in t.raw_reply and t.prompt for t in tax.types)
    assert [c.name for c in tax.categories] == [c.name for c in offline.categories]
    assert all(c.naming_method == "offline-after-llm-error" for c in tax.categories)


@pytest.mark.parametrize("reply", [FakeResult(ok=False, error="HTTP 503"), FakeResult(ok=True, value={"x": 1})])
def test_an_unusable_category_reply_falls_back_to_the_offline_name_or_to_no_category(reply):
    from failatlas.taxonomy.model import CategoryEvidence

    groups = [["The system ignored the plan and answered from memory."] * 3,
              ["The system ignored the plan, skipping the search."] * 3]
    evidence = CategoryEvidence(
        key="other/C1", phase="other", type_names=["Answered from memory", "Skipped the search"],
        type_definitions=["-", "-"], keywords=["plan"], texts=[t for g in groups for t in g],
        other_categories=[["Formatting"]], type_texts=groups, contrast_texts=["The end_plan tag is missing."] * 3,
    )
    named = LLMLabeller(FakeStructuredLLM(reply)).label_category(evidence)
    assert named is not None and named.name == "Ignored the plan"
    assert named.naming_method == "offline-after-llm-error" and "rejected" in named.raw_reply
    apart = [["Accessed the ground-truth files."], ["Reported numbers it never produced."]]
    evidence.type_texts, evidence.texts = apart, [t for g in apart for t in g]
    assert LLMLabeller(FakeStructuredLLM(reply)).label_category(evidence) is None


def test_no_endpoint_is_reported_by_the_cli_and_the_labeller(mini_store, monkeypatch):
    with pytest.raises(ConfigError, match="no LLM endpoint"):
        make_labeller("llm").label(None)  # type: ignore[arg-type]
    result = CliRunner().invoke(app, ["--db", str(mini_store.path), "taxonomy", "build", "--labeller", "llm"])
    assert result.exit_code != 0
    assert isinstance(result.exception, ConfigError) and "labeller" in str(result.exception)
    assert mini_store.query("SELECT count(*) FROM taxonomies")[0][0] == 0
    with pytest.raises(ConfigError, match="unknown labeller"):
        make_labeller("crystal-ball")
