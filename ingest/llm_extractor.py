"""The LLM extractor: one call per run returning short, error-only, domain-specific insights per phase.

Follows the EXP-Bench paper's insight extraction. Written against a small protocol, `StructuredLLM`, so any
client with `structured(messages, schema, *, run_id, purpose) -> result` (with `.ok`, `.value`, `.error`)
fits, FailAtlas's `failatlas.core.llm` client included (it caches and logs each call in `llm_calls`). Each
insight records the model and endpoint host that extracted it (`detail.model`, `detail.endpoint`). Inputs
longer than a field's budget are cut with an explicit marker saying how much was left out, never silently.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from failatlas.core.errors import ConfigError, InfrastructureError
from failatlas.core.llm import StructuredLLM, client_for_role, not_configured_reason
from failatlas.core.store import Store
from failatlas.ingest.model import RawInsight, RunRecord

PURPOSE = "ingest:extract"
FIELD_BUDGET = 4000
LOG_BUDGET = 2000

SYSTEM_PROMPT = """You analyse why an AI agent failed a research-experiment task.
You get the judges' error analyses per phase, the monitor's findings and the execution validator's outcome.
Extract failure insights: each one short (one sentence, at most 30 words), about an error only (never praise
or what went right), specific to the research domain and the task (name the method, metric, dataset or code
step involved), and stated once. Assign each to the phase where the error was made: design (experimental
design, variables, hypotheses), implementation (code changes, setup), execution (running the experiment,
errors, resources), conclusion (interpretation of results) or monitor (forbidden actions: reading answers,
git history, network, fabricated results). Use only what the material states; return an empty list when it
states no error."""


class ExtractedInsight(BaseModel):
    phase: Literal["design", "implementation", "execution", "conclusion", "monitor"]
    insight: str = Field(min_length=3, max_length=400)


class ExtractedInsights(BaseModel):
    """The structured answer the LLM must give."""

    insights: list[ExtractedInsight]


def _cut(text: str | None, budget: int, *, keep: Literal["head", "tail"] = "head") -> str:
    if not text:
        return ""
    if len(text) <= budget:
        return text
    left_out = len(text) - budget
    if keep == "tail":
        return f"[{left_out} earlier characters left out]\n" + text[-budget:]
    return text[:budget] + f"\n[{left_out} further characters left out]"


def build_messages(record: RunRecord) -> list[dict[str, str]]:
    """The chat messages for one run: the system prompt and the run's scored material."""
    parts = [f"Task: {record.run.get('task_id')} (benchmark {record.run.get('benchmark')})"]
    for judgement in record.judgements:
        if judgement["status"] == "ok" and judgement.get("error_analysis"):
            parts.append(
                f"## Judge {judgement['judge']} ({judgement['phase']}), score {judgement.get('score')}\n"
                + _cut(judgement["error_analysis"], FIELD_BUDGET)
            )
    for finding in record.findings:
        parts.append(
            f"## Monitor finding ({finding['rule']}, {finding['severity']})\n"
            + _cut(finding["evidence"], FIELD_BUDGET)
        )
    validation = record.validation
    if validation is not None:
        parts.append(
            f"## Execution validator: outcome {validation['outcome']}, exit code "
            f"{validation.get('exit_code')}\n{validation.get('detail') or ''}\n"
            "stderr (end):\n" + _cut(validation.get("stderr_tail"), LOG_BUDGET, keep="tail")
        )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "\n\n".join(parts)}]


@dataclass
class ExtractionOutcome:
    insights: list[RawInsight] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    extracted_runs: list[str] = field(default_factory=list)


class LLMExtractor:
    """Extracts insights from runs with one structured LLM call per run."""

    def __init__(self, llm: StructuredLLM) -> None:
        self.llm = llm

    def extract(self, records: Sequence[RunRecord]) -> ExtractionOutcome:
        """Insights of every run whose call succeeded; a failed call is listed in `failed`, never guessed.

        When the endpoint itself fails (an InfrastructureError), the remaining runs are not attempted.
        """
        outcome = ExtractionOutcome()
        config = getattr(self.llm, "config", None)
        # which model said it, and where it ran (never the key): kept with every insight it extracted
        made_by = {"model": config.model, "endpoint": config.host} if config is not None else {}
        for position, record in enumerate(records):
            messages = build_messages(record)
            prompt_sha = hashlib.sha256(json.dumps(messages).encode()).hexdigest()[:16]
            try:
                result = self.llm.structured(
                    messages, ExtractedInsights, run_id=record.run_id, purpose=PURPOSE
                )
            except InfrastructureError as exc:
                outcome.failed.append(f"run {record.run_id}: LLM endpoint failed: {exc}")
                outcome.failed.extend(
                    f"run {r.run_id}: not attempted after the endpoint failed"
                    for r in records[position + 1 :]
                )
                break
            if not result.ok:
                outcome.failed.append(f"run {record.run_id}: LLM extraction failed: {result.error}")
                continue
            try:
                value = (
                    result.value
                    if isinstance(result.value, ExtractedInsights)
                    else ExtractedInsights.model_validate(result.value)
                )
            except ValidationError as exc:
                outcome.failed.append(
                    f"run {record.run_id}: LLM answer does not fit the schema: {exc.errors()[0]['msg']}"
                )
                continue
            outcome.extracted_runs.append(record.run_id)
            for item in value.insights:
                outcome.insights.append(
                    RawInsight(
                        phase=item.phase,
                        text=item.insight,
                        origin="run",
                        key=f"{record.run_id}:llm",
                        extractor="llm",
                        source_field="llm_extraction",
                        run_id=record.run_id,
                        detail={"prompt_sha": prompt_sha, **made_by},
                        **record.provenance(),
                    )
                )
        return outcome


def default_extractor_llm(store: Store) -> StructuredLLM:
    """The client configured for the role "extractor" in `failatlas.core.llm`; ConfigError when there is none."""
    hint = "configure an OpenAI-compatible endpoint for the role 'extractor' or use --extractor deterministic"
    client = client_for_role("extractor", store)
    if client is None:
        raise ConfigError(not_configured_reason("extractor"), hint=hint)
    return client
