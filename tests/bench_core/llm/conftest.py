from __future__ import annotations

import pytest

from failatlas.core.llm import LLMConfig
from failatlas.core.llm.testing import ScriptedOpenAIServer


@pytest.fixture
def server():
    """A scripted fake OpenAI-compatible server on real HTTP (it stands in for a paid remote endpoint)."""
    with ScriptedOpenAIServer() as fake:
        yield fake


@pytest.fixture
def make_config(server):
    def make(**overrides) -> LLMConfig:
        values = {
            "role": "judge",
            "base_url": server.base_url,
            "model": "scripted-judge",
            "timeout_s": 5.0,
            "max_retries": 2,
            "backoff_base_s": 0.01,
            "backoff_max_s": 0.05,
        }
        values.update(overrides)
        return LLMConfig(**values)

    return make


@pytest.fixture(autouse=True)
def _no_llm_env(monkeypatch):
    """Tests never see the developer's own FAILATLAS_LLM_* settings."""
    import os

    for name in list(os.environ):
        if name.startswith("FAILATLAS_LLM_"):
            monkeypatch.delenv(name)
