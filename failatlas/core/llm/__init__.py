"""The one LLM client layer: any OpenAI-compatible endpoint, per role, with retries, a cache and a call log.

Used by agents, judges, the monitor, insight extraction and taxonomy labelling. The whole API:

    from failatlas.core.llm import client_for_role, not_configured_reason, LLMEndpointError

    client = client_for_role("judge", store)          # None when no endpoint is configured for the role
    if client is None:
        record_not_run(reason=not_configured_reason("judge"))       # never a verdict
    else:
        try:
            result = client.structured(messages, Verdict, run_id=run.id, purpose="judge:design")
        except LLMEndpointError as exc:                # infrastructure, not the agent's fault
            record_infra_failure(str(exc))
        else:
            if result.ok:
                use(result.value)                      # a Verdict instance (or a dict for a dict schema)
            else:
                record_judge_failure(result.error)     # never a score of zero, never a pass

- `resolve_config(role) -> LLMConfig | None`: from FAILATLAS_LLM_<ROLE>_* env vars, the [role] section of the
  config file ($FAILATLAS_LLM_CONFIG, TOML or YAML), FAILATLAS_LLM_* env vars, then its [default] section.
  Roles: agent, judge, monitor, extractor, labeller. The config names the env var holding the key
  (`api_key_env`); the key is read when the client is built and never stored or logged.
- `LLMClient(config, store=None, *, records=None, use_cache=True)`:
  - `chat(messages, *, tools=None, sample_index=0, run_id=None, purpose=None, **params) -> ChatResult`
    (content, tool_calls, finish_reason, prompt/completion tokens, cost_usd, cached, latency_s, raw, key,
    call_id). `result.as_message()` is the reply as an assistant message to append to the conversation.
  - `structured(messages, schema, *, sample_index=0, max_repairs=2, run_id=None, purpose=None, strict=False,
    **params) -> StructuredResult` (ok, value, error, attempts, raw_replies, calls; token/cost totals).
    `schema` is a pydantic model class or a JSON-schema dict. Sends `response_format=json_schema`, falling
    back to json_object+schema, then to the schema in the prompt, when the server refuses (structured.py).
  - Retries 429 (honouring Retry-After), 5xx, 408, timeouts and connection errors with exponential back-off
    and jitter, `max_retries` times; other 4xx are not retried. Then raises `LLMEndpointError`
    (a `failatlas.core.errors.InfrastructureError`) with `.kind`, `.status_code`, `.attempts`.
  - With a store: replies are cached in `llm_cache` by sha256(endpoint, model, messages, params, schema,
    sample_index) -- a hit sends no HTTP request and costs 0 -- and every call, hit or miss, ok or failed, is
    a row of `llm_calls` (docs/store/llm.md). Another `sample_index` draws a fresh sample.
  - A parallel worker that must not open the store passes `records=MemoryRecords(seed=...)` instead; the
    parent writes the rows with `records.flush(store)` (seed: `store.query_dicts("SELECT key, response
    FROM llm_cache")` for cache hits in the worker). Without store or records: no cache, no log.
  - Prompts and raw responses are stored; the API key, credentials in base_url and anything shaped like a
    key (sk-..., Bearer ...) are replaced by [REDACTED] in every stored string, every error message and the
    replies handed to callers (so a fresh reply and its cached replay are identical).
  - Only replies that were used are cached (a structured conversation that ended in a valid value); a failed
    one leaves nothing to replay. `client.forget(result)` drops replies a caller rejected for its own reasons.
  - `client.check()`: one cheap request (GET /models); a client from `client_for_role` runs it once before its
    first request that is not a cache hit and, when it fails, fails every call at once (no retries per call).
  - A refused request (400/422) is told apart by its body: `LLMEndpointError.kind` format_refused (structured
    falls back), context_length, unsupported_param (with `.param`), tools_unsupported, each with a hint.
- `client_for_role(...)` skips the cache when $FAILATLAS_LLM_NO_CACHE is set (`bench score --no-cache`).
- `llm_usage(store, *, run_id=None, role=None) -> LLMUsage`: calls, cached/failed calls, tokens and cost spent
  (cache hits excluded), and how many fresh calls had no price (for `runs.tokens` / `runs.cost_usd`).
- `llm_spend(store)`: the same per role, model and endpoint (`failatlas llm spend`); `failatlas llm config` prints
  each role's resolved settings (`LLMConfig.describe()`, never the key).
- `failatlas.core.llm.testing.ScriptedOpenAIServer`: a scripted fake OpenAI-compatible server for tests;
  `ideal_judge.ideal_judge` is its deterministic ideal-judge responder.

Endpoint set-up (OpenAI, vLLM, Ollama, llama.cpp server, LiteLLM): docs/llm.md.
"""

from .client import LLMClient
from .config import ROLES, LLMConfig, load_config_file, not_configured_reason, resolve_config
from .errors import LLMEndpointError
from .records import LLMRecords, MemoryRecords, StoreRecords
from .results import ChatResult, StructuredLLM, StructuredResult, ToolCall
from .structured import parse_json_reply
from .usage import LLMUsage, llm_spend, llm_usage

NO_CACHE_ENV = "FAILATLAS_LLM_NO_CACHE"


def cache_bypassed() -> bool:
    """Whether $FAILATLAS_LLM_NO_CACHE asks every role to skip the cache (`--no-cache` sets it)."""
    import os

    return os.environ.get(NO_CACHE_ENV, "").strip().lower() not in ("", "0", "false", "no")


def client_for_role(role: str, store=None, *, config_file=None, use_cache: bool = True,  # noqa: ANN001
                    check_endpoint: bool = True) -> LLMClient | None:
    """A client for `role`, or None when no endpoint is configured (record `not_configured_reason(role)`).

    The client checks its endpoint once, before its first request that is not a cache hit (`LLMClient.check`):
    a wrong URL or port fails every call at once with a clear error instead of minutes of retries. The cache
    is skipped when `use_cache` is False or $FAILATLAS_LLM_NO_CACHE is set. Raises ConfigError when the role is
    half configured or its api_key_env variable is unset.
    """
    config = resolve_config(role, config_file=config_file)
    if config is None:
        return None
    return LLMClient(config, store, use_cache=use_cache and not cache_bypassed(), check_endpoint=check_endpoint)


__all__ = [
    "ROLES",
    "ChatResult",
    "LLMClient",
    "LLMConfig",
    "LLMEndpointError",
    "LLMRecords",
    "LLMUsage",
    "MemoryRecords",
    "StoreRecords",
    "StructuredLLM",
    "StructuredResult",
    "ToolCall",
    "NO_CACHE_ENV",
    "cache_bypassed",
    "client_for_role",
    "llm_spend",
    "llm_usage",
    "load_config_file",
    "not_configured_reason",
    "parse_json_reply",
    "resolve_config",
]
