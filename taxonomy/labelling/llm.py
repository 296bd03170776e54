"""LLM naming with contrastive prompts: the model sees members of the type and members of the nearest other
types, and must answer in a JSON schema that is checked before use; names and definitions are asked to be specific
to the type's phase. Prompts and raw replies are kept. A reply that is rejected (the schema, no INSIDE id) falls
back to offline naming and is dropped from the LLM cache, so the next build asks again instead of replaying it."""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from failatlas.core.errors import ConfigError
from failatlas.core.llm import StructuredLLM, StructuredResult, client_for_role, not_configured_reason
from failatlas.core.store import Store
from failatlas.taxonomy.definitions import category_definition
from failatlas.taxonomy.labelling.base import register_labeller
from failatlas.taxonomy.labelling.offline import OfflineLabeller, examples_of
from failatlas.taxonomy.model import CategoryEvidence, CategoryLabel, TypeEvidence, TypeLabel


class LLMTypeLabel(BaseModel):
    """The reply the labeller asks for; anything else is rejected."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=3, max_length=80, description="3 to 8 words, no trailing period")
    definition: str = Field(min_length=10, max_length=400, description="one sentence")
    inclusion_criteria: list[str] = Field(min_length=1, max_length=5)
    exclusion_criteria: list[str] = Field(default_factory=list, max_length=5)
    representative_example_ids: list[str] = Field(min_length=1, max_length=5)


class LLMCategoryLabel(BaseModel):
    """The reply asked for when naming a category of failure types."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=3, max_length=80, description="2 to 6 words, no trailing period")
    definition: str = Field(min_length=10, max_length=400, description="one sentence")


CATEGORY_PROMPT = (
    "You build a taxonomy of why AI research agents fail. The failure types listed as INSIDE were grouped "
    "into one category; OUTSIDE lists the types of the other categories of the same phase. Name the category "
    "in 2 to 6 words (sentence case) so that it covers every INSIDE type and none of the OUTSIDE ones, and "
    "define it in one sentence. Name and definition must be specific to the phase given as `phase` (what goes "
    "wrong in that phase of the experiment), never generic. Answer with JSON matching the schema, nothing else."
)

SYSTEM_PROMPT = (
    "You build a taxonomy of why AI research agents fail. You are shown failure insights that were clustered "
    "together (INSIDE) and insights from the most similar other clusters (OUTSIDE). Name the failure type "
    "that the "
    "INSIDE insights share and the OUTSIDE ones do not. The name is 3 to 8 words, specific, in sentence case "
    "(e.g. 'Missing module / import error'). The definition is one sentence. Inclusion criteria say what an "
    "insight must show to belong; exclusion criteria say how it differs from the OUTSIDE clusters. Pick "
    "representative_example_ids only from the INSIDE ids. The name and the definition must be specific to the "
    "phase given as `phase` (design, implementation, execution, conclusion or monitor): say what went wrong in "
    "that phase of the experiment, in that phase's terms (e.g. for implementation, the code step that is wrong; "
    "for design, the variable or control that is wrong), never a generic name that would fit any phase. "
    "Answer with JSON matching the schema, nothing else."
)


def build_messages(evidence: TypeEvidence, *, n_inside: int, n_outside: int) -> list[dict[str, str]]:
    """The contrastive prompt for one type."""
    inside = [
        {"id": i, "text": t}
        for i, t in zip(evidence.insight_ids[:n_inside], evidence.texts[:n_inside], strict=True)
    ]
    outside = [
        {"cluster": k, "keywords": other.keywords[:5], "examples": other.texts[:n_outside]}
        for k, other in enumerate(evidence.neighbours, start=1)
    ]
    body = {
        "phase": evidence.phase,
        "inside_size": evidence.size,
        "inside_keywords": evidence.keywords[:8],
        "INSIDE": inside,
        "OUTSIDE": outside,
    }
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": json.dumps(body, ensure_ascii=False, indent=1)},
    ]


def build_category_messages(evidence: CategoryEvidence) -> list[dict[str, str]]:
    """The contrastive prompt for one category."""
    body = {
        "phase": evidence.phase,
        "INSIDE": [
            {"name": n, "definition": d}
            for n, d in zip(evidence.type_names, evidence.type_definitions, strict=True)
        ],
        "OUTSIDE": [{"category": k, "types": names} for k, names in enumerate(evidence.other_categories, 1)],
    }
    return [
        {"role": "system", "content": CATEGORY_PROMPT},
        {"role": "user", "content": json.dumps(body, ensure_ascii=False, indent=1)},
    ]


def _raw_reply(result: StructuredResult) -> str:
    raw = getattr(result, "raw", None)
    if raw is None and getattr(result, "raw_replies", None):
        raw = "\n".join(str(r) for r in result.raw_replies)
    if raw is None:
        raw = json.dumps(result.value, ensure_ascii=False) if result.ok else (result.error or "")
    return raw


def _forget(client: StructuredLLM, result: StructuredResult) -> None:
    """Drop a reply the labeller rejected from the client's cache (the client alone knows its cache)."""
    forget = getattr(client, "forget", None)
    if callable(forget) and result.ok:
        forget(result)


@register_labeller("llm")
class LLMLabeller:
    """Names a type with an LLM; falls back to offline naming (and says so in `naming_method` and `raw_reply`)
    when the reply is unusable. An unreachable endpoint (the client's InfrastructureError) is not
    papered over:
    it propagates and the build stores nothing."""

    name = "llm"

    def __init__(
        self,
        client: StructuredLLM | None = None,
        n_inside: int = 10,
        n_outside: int = 3,
        n_examples: int = 5,
        *,
        store: Store | None = None,
    ) -> None:
        self.client = client
        self.store = store
        self.n_inside = n_inside
        self.n_outside = n_outside
        self.n_examples = n_examples

    @property
    def made_by(self) -> dict[str, str]:
        """The model and endpoint host that name types ({} before the first call or for a stand-in client)."""
        config = getattr(self.client, "config", None)
        return {"model": config.model, "endpoint": config.host} if config is not None else {}

    def label(self, evidence: TypeEvidence) -> TypeLabel:
        if self.client is None:
            self.client = labeller_client(self.store)
        messages = build_messages(evidence, n_inside=self.n_inside, n_outside=self.n_outside)
        result = self.client.structured(messages, LLMTypeLabel.model_json_schema())
        raw = _raw_reply(result)
        problem = result.error if not result.ok else None
        parsed: LLMTypeLabel | None = None
        if problem is None:
            try:
                value = json.loads(result.value) if isinstance(result.value, str) else result.value
                parsed = LLMTypeLabel.model_validate(value)
            except (ValidationError, ValueError, TypeError) as exc:
                problem = f"reply does not match the schema: {exc}"
        if parsed is not None:
            offered = set(evidence.insight_ids[: self.n_inside])
            chosen = [i for i in parsed.representative_example_ids if i in offered]
            if not chosen:
                parsed, problem = None, "reply cites no INSIDE insight id"
        if parsed is None:
            _forget(self.client, result)  # a rejected reply is not replayed by the next build
            fallback = OfflineLabeller(n_examples=self.n_examples).label(evidence)
            return fallback.model_copy(
                update={
                    "naming_method": "offline-after-llm-error",
                    "prompt": messages,
                    "raw_reply": f"{raw}\n-- rejected: {problem}",
                }
            )
        by_id = {e.insight_id: e for e in examples_of(evidence, len(evidence.insight_ids))}
        examples = [by_id[i] for i in chosen]
        examples += [e for e in examples_of(evidence, self.n_examples) if e.insight_id not in chosen]
        criteria = parsed.inclusion_criteria + [f"Not: {c}" for c in parsed.exclusion_criteria]
        return TypeLabel(
            name=parsed.name.strip().rstrip("."),
            definition=parsed.definition.strip(),
            inclusion_criteria=criteria,
            examples=examples[: max(self.n_examples, len(chosen))],
            naming_method="llm",
            prompt=messages,
            raw_reply=raw,
        )

    def label_category(self, evidence: CategoryEvidence) -> CategoryLabel | None:
        """An LLM name for categories of two or more types (a one-type category keeps its type's name, the
        only category of a phase is "All <phase> failures"); offline naming when the reply is unusable (None
        where the offline labeller finds no name more general than the types': the types then stand alone)."""
        offline = OfflineLabeller(n_examples=self.n_examples).label_category(evidence)
        if len(evidence.type_names) < 2 or not evidence.other_categories:
            return offline
        if self.client is None:
            self.client = labeller_client(self.store)
        messages = build_category_messages(evidence)
        result = self.client.structured(messages, LLMCategoryLabel.model_json_schema())
        raw = _raw_reply(result)
        problem = result.error if not result.ok else None
        if problem is None:
            try:
                value = json.loads(result.value) if isinstance(result.value, str) else result.value
                parsed = LLMCategoryLabel.model_validate(value)
            except (ValidationError, ValueError, TypeError) as exc:
                problem = f"reply does not match the schema: {exc}"
        if problem is not None:
            _forget(self.client, result)
            if offline is None:
                return None
            return offline.model_copy(
                update={
                    "naming_method": "offline-after-llm-error",
                    "prompt": messages,
                    "raw_reply": f"{raw}\n-- rejected: {problem}",
                }
            )
        return CategoryLabel(
            name=parsed.name.strip().rstrip("."),
            definition=f"{parsed.definition.strip()} ({category_definition(evidence)})",
            naming_method="llm",
            prompt=messages,
            raw_reply=raw,
        )


_HINT = "configure an endpoint for the 'labeller' role (docs/llm.md) or use --labeller offline"


def labeller_client(store: Store | None) -> StructuredLLM:
    """The client of the `labeller` role, caching replies and logging every call in `store`. Raises ConfigError
    when no endpoint is configured for the role."""
    client = client_for_role("labeller", store)
    if client is None:
        raise ConfigError(
            f"no LLM endpoint is configured for the 'labeller' role: {not_configured_reason('labeller')}",
            hint=_HINT,
        )
    return client
