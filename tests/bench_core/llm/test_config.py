from __future__ import annotations

import pytest

from failatlas.core.errors import ConfigError
from failatlas.core.llm import ROLES, LLMClient, LLMConfig, client_for_role, not_configured_reason, resolve_config


def test_no_endpoint_means_none_and_a_not_run_reason(monkeypatch, store):
    for role in ROLES:
        assert resolve_config(role, env={}) is None
        assert client_for_role(role, store) is None
    reason = not_configured_reason("judge")
    assert reason.startswith("not run: no LLM endpoint configured for role judge")
    assert "FAILATLAS_LLM_JUDGE_BASE_URL" in reason and "FAILATLAS_LLM_BASE_URL" in reason


def test_role_env_overrides_generic_env():
    env = {
        "FAILATLAS_LLM_BASE_URL": "http://127.0.0.1:8000/v1/",
        "FAILATLAS_LLM_MODEL": "generic",
        "FAILATLAS_LLM_JUDGE_MODEL": "judge-model",
        "FAILATLAS_LLM_TEMPERATURE": "0.7",
        "FAILATLAS_LLM_JUDGE_MAX_TOKENS": "512",
        "FAILATLAS_LLM_EXTRA_PARAMS": '{"top_p": 0.9}',
    }
    judge = resolve_config("judge", env=env)
    agent = resolve_config("agent", env=env)
    assert (judge.model, judge.max_tokens, judge.temperature) == ("judge-model", 512, 0.7)
    assert judge.base_url == "http://127.0.0.1:8000/v1"  # trailing slash normalised
    assert judge.extra_params == {"top_p": 0.9}
    assert (agent.model, agent.max_tokens, agent.role) == ("generic", None, "agent")


def test_config_file_sections_and_precedence(tmp_path):
    path = tmp_path / "llm.toml"
    path.write_text(
        '[default]\nbase_url = "http://127.0.0.1:11434/v1"\nmodel = "llama3"\nmax_retries = 7\n'
        '[labeller]\nmodel = "labeller-model"\nprice_input_per_mtok = 0.15\n'
        "[labeller.extra_params]\nseed = 3\n"
    )
    labeller = resolve_config("labeller", config_file=path, env={})
    assert (labeller.model, labeller.max_retries, labeller.price_input_per_mtok) == (
        "labeller-model",
        7,
        0.15,
    )
    assert labeller.extra_params == {"seed": 3}
    # generic env beats the [default] section, the [role] section beats generic env
    env = {"FAILATLAS_LLM_MODEL": "env-model", "FAILATLAS_LLM_CONFIG": str(path)}
    assert resolve_config("monitor", env=env).model == "env-model"
    assert resolve_config("labeller", env=env).model == "labeller-model"


def test_yaml_config_file(tmp_path):
    path = tmp_path / "llm.yaml"
    path.write_text(
        "judge:\n  base_url: https://api.openai.com/v1\n  model: gpt-4o-mini\n  api_key_env: OPENAI_API_KEY\n"
    )
    config = resolve_config("judge", config_file=path, env={})
    assert (config.endpoint, config.api_key_env) == ("https://api.openai.com/v1", "OPENAI_API_KEY")
    assert resolve_config("agent", config_file=path, env={}) is None


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"FAILATLAS_LLM_MODEL": "m"}, "half configured: base_url is missing"),
        ({"FAILATLAS_LLM_JUDGE_BASE_URL": "http://x/v1"}, "half configured: model is missing"),
        ({"FAILATLAS_LLM_BASE_URL": "127.0.0.1:8000", "FAILATLAS_LLM_MODEL": "m"}, "base_url"),
        (
            {
                "FAILATLAS_LLM_BASE_URL": "http://x/v1",
                "FAILATLAS_LLM_MODEL": "m",
                "FAILATLAS_LLM_TIMEOUT_S": "-1",
            },
            "timeout_s",
        ),
    ],
)
def test_bad_settings_are_config_errors(env, message):
    with pytest.raises(ConfigError, match=message):
        resolve_config("judge", env=env)


def test_unknown_role_and_key_in_file_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="unknown LLM role"):
        resolve_config("critic", env={})
    path = tmp_path / "llm.toml"
    path.write_text('[judge]\nbase_url = "http://x/v1"\nmodel = "m"\napi_key = "sk-oops"\n')
    with pytest.raises(ConfigError, match="holds an api_key"):
        resolve_config("judge", config_file=path, env={})


def test_unset_key_variable_is_a_config_error(monkeypatch):
    monkeypatch.delenv("FAILATLAS_TEST_MISSING_KEY", raising=False)
    config = LLMConfig(base_url="http://127.0.0.1:1/v1", model="m", api_key_env="FAILATLAS_TEST_MISSING_KEY")
    with pytest.raises(ConfigError, match="FAILATLAS_TEST_MISSING_KEY"):
        LLMClient(config)


def test_endpoint_strips_credentials_and_cost_needs_a_price():
    config = LLMConfig(base_url="https://user:secret@proxy.example/v1?key=abc", model="m")
    assert config.endpoint == "https://proxy.example/v1"
    assert config.cost_usd(1000, 1000) is None
    priced = LLMConfig(base_url="http://x/v1", model="m", price_input_per_mtok=2.5, price_output_per_mtok=10)
    assert priced.cost_usd(1_000_000, 100_000) == pytest.approx(3.5)
