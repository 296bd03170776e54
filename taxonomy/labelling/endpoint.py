"""Where the `llm` labeller gets its client: the `labeller` role of the shared LLM client layer
(`bench_core.llm`), which caches replies and logs every prompt and raw reply in the store."""

from __future__ import annotations

from failatlas.errors import ConfigError
from failatlas.store import Store
from taxonomy.labelling.llm import StructuredLLM

_HINT = "configure an endpoint for the 'labeller' role (docs/llm.md) or use --labeller offline"


def labeller_client(store: Store | None = None) -> StructuredLLM:
    """A client for the `labeller` role (logging to `store` when given). Raises ConfigError when no
    endpoint is
    configured or the LLM client layer is missing from this build."""
    try:
        from bench_core.llm import client_for_role, not_configured_reason
    except ImportError as exc:
        raise ConfigError(
            "no LLM endpoint is configured for the labeller: the LLM client layer (bench_core.llm) is not "
            "available in this build",
            hint=_HINT,
        ) from exc
    client = client_for_role("labeller", store)
    if client is None:
        raise ConfigError(
            f"no LLM endpoint is configured for the 'labeller' role: {not_configured_reason('labeller')}",
            hint=_HINT,
        )
    return client
