"""Where the `llm` labeller gets its client: the `labeller` role of the shared LLM client layer."""

from __future__ import annotations

from failatlas.errors import ConfigError
from taxonomy.labelling.llm import StructuredLLM

_HINT = "configure an endpoint for the 'labeller' role (see bench_core.llm) or use --labeller offline"


def labeller_client() -> StructuredLLM:
    """A client for the `labeller` role. Raises ConfigError when no endpoint is configured."""
    try:
        from bench_core.llm import make_client, resolve_config
    except ImportError as exc:
        raise ConfigError(
            "no LLM endpoint is configured for the labeller: the LLM client layer (bench_core.llm) is not "
            "available in this build",
            hint=_HINT,
        ) from exc
    config = resolve_config("labeller")
    if config is None:
        raise ConfigError("no LLM endpoint is configured for the 'labeller' role", hint=_HINT)
    return make_client(config)
