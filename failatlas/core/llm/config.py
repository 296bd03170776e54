"""Which OpenAI-compatible endpoint each role talks to: `LLMConfig`, resolved from env vars and a file.

Resolution, field by field, first found wins:
  1. `FAILATLAS_LLM_<ROLE>_<FIELD>`   (e.g. FAILATLAS_LLM_JUDGE_MODEL)
  2. the `[<role>]` section of the config file
  3. `FAILATLAS_LLM_<FIELD>`          (e.g. FAILATLAS_LLM_BASE_URL)
  4. the `[default]` section of the config file
The config file is `$FAILATLAS_LLM_CONFIG` (TOML, or YAML by suffix .yaml/.yml) or the path passed in.
The API key itself is never part of the config: `api_key_env` names the environment variable that holds it.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from failatlas.core.errors import ConfigError

ROLES = ("agent", "judge", "monitor", "extractor", "labeller")
ENV_PREFIX = "FAILATLAS_LLM_"
CONFIG_FILE_ENV = "FAILATLAS_LLM_CONFIG"
STRUCTURED_MODES = ("json_schema", "json_object", "prompt")  # in the order the client falls back
NO_KEY_PLACEHOLDER = "not-needed"  # local servers accept any key; the openai package insists on one
OMIT_WORDS = ("omit", "none", "default")  # a temperature given as one of these is not sent


class LLMConfig(BaseModel):
    """One role's endpoint and call parameters. Holds the NAME of the key's env var, never the key."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: str = "default"
    base_url: str
    model: str
    api_key_env: str | None = None
    temperature: float | None = 0.0  # None ("omit" in a file or env var): not sent, the server's default
    max_tokens: int | None = None
    # the name the cap is sent under: OpenAI's reasoning models refuse max_tokens and want max_completion_tokens
    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    timeout_s: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=4, ge=0)
    backoff_base_s: float = Field(default=1.0, ge=0)
    backoff_max_s: float = Field(default=60.0, ge=0)
    price_input_per_mtok: float | None = Field(default=None, ge=0)
    price_output_per_mtok: float | None = Field(default=None, ge=0)
    structured_mode: str = "json_schema"  # json_schema | json_object | prompt (see structured.py)
    extra_params: dict[str, Any] = Field(default_factory=dict)

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(
                f"base_url must be an http(s) URL such as http://127.0.0.1:8000/v1, got {value!r}"
            )
        return value.rstrip("/")

    @field_validator("temperature", mode="before")
    @classmethod
    def _omittable(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().lower() in OMIT_WORDS:
            return None
        return value

    @field_validator("structured_mode")
    @classmethod
    def _mode(cls, value: str) -> str:
        if value not in STRUCTURED_MODES:
            raise ValueError(f"structured_mode must be one of {', '.join(STRUCTURED_MODES)}")
        return value

    @property
    def endpoint(self) -> str:
        """The base URL with any user:password and query string removed: safe to store and show."""
        parts = urlsplit(self.base_url)
        host = parts.netloc.rsplit("@", 1)[-1]
        return urlunsplit((parts.scheme, host, parts.path, "", ""))

    @property
    def host(self) -> str:
        """The endpoint's host[:port] (no credentials): what judgements, taxonomies and insights record."""
        return urlsplit(self.base_url).netloc.rsplit("@", 1)[-1]

    def describe(self) -> dict[str, Any]:
        """The resolved settings, safe to print and store: the endpoint without credentials, the NAME of the
        key's variable (never the key), and every call parameter."""
        values = self.model_dump(exclude={"base_url"})
        return {"role": self.role, "endpoint": self.endpoint, **{k: v for k, v in values.items() if k != "role"}}

    def url_secrets(self) -> list[str]:
        """Credentials embedded in base_url (a password, query values): redacted wherever text is stored."""
        parts = urlsplit(self.base_url)
        values = [v for _, v in parse_qsl(parts.query)]
        return [s for s in (parts.password, *values) if s]

    def api_key(self) -> str:
        """The key read from `api_key_env` now (a placeholder when none is named). Never store the result."""
        if not self.api_key_env:
            return NO_KEY_PLACEHOLDER
        key = os.environ.get(self.api_key_env)
        if not key:
            raise ConfigError(
                f"the environment variable {self.api_key_env} (api_key_env of LLM role {self.role}) "
                "is not set",
                hint=f"export {self.api_key_env}=... or unset api_key_env for a server that needs no key",
            )
        return key

    def cost_usd(self, prompt_tokens: int | None, completion_tokens: int | None) -> float | None:
        """Cost of a call from its token counts; None when no price is configured."""
        if self.price_input_per_mtok is None and self.price_output_per_mtok is None:
            return None
        return (
            (prompt_tokens or 0) * (self.price_input_per_mtok or 0.0)
            + (completion_tokens or 0) * (self.price_output_per_mtok or 0.0)
        ) / 1e6


_FIELDS = {name: name.upper() for name in LLMConfig.model_fields if name != "role"}


def _check_role(role: str) -> str:
    if role not in ROLES:
        raise ConfigError(f"unknown LLM role {role!r}", hint=f"roles are: {', '.join(ROLES)}")
    return role


def load_config_file(path: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """Sections of a TOML or YAML config file: `default` and one per role."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read LLM config file {path}: {exc}") from exc
    try:
        if path.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text) or {}
        else:
            data = tomllib.loads(text)
    except Exception as exc:  # tomllib and yaml raise unrelated error types
        raise ConfigError(f"LLM config file {path} does not parse: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"LLM config file {path} must map section names to tables")
    unknown = set(data) - {"default", *ROLES}
    if unknown:
        raise ConfigError(
            f"LLM config file {path} has unknown sections {sorted(unknown)}",
            hint=f"sections are: default, {', '.join(ROLES)}",
        )
    for name, section in data.items():
        if not isinstance(section, dict):
            raise ConfigError(f"section [{name}] of LLM config file {path} must be a table")
        if "api_key" in section:
            raise ConfigError(
                f"section [{name}] of {path} holds an api_key",
                hint="put the key in an environment variable and name it with api_key_env",
            )
    return data


def _env_value(field: str, raw: str) -> Any:
    if field == "extra_params":
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{ENV_PREFIX}..._EXTRA_PARAMS must be a JSON object: {exc}") from exc
    return raw


def resolve_config(
    role: str, *, config_file: str | os.PathLike[str] | None = None, env: dict[str, str] | None = None
) -> LLMConfig | None:
    """The config for `role`, or None when no endpoint is configured for it (see `not_configured_reason`).

    Raises ConfigError when a role is half configured (a base URL without a model or the reverse) or a value
    is invalid.
    """
    _check_role(role)
    env = os.environ if env is None else env
    file_path = config_file or env.get(CONFIG_FILE_ENV)
    sections = load_config_file(file_path) if file_path else {}
    role_section, default_section = sections.get(role, {}), sections.get("default", {})
    values: dict[str, Any] = {}
    for field, env_name in _FIELDS.items():
        for source, name in (
            (env, f"{ENV_PREFIX}{role.upper()}_{env_name}"),
            (role_section, field),
            (env, f"{ENV_PREFIX}{env_name}"),
            (default_section, field),
        ):
            if name in source and source[name] not in (None, ""):
                values[field] = _env_value(field, source[name]) if source is env else source[name]
                break
    if "base_url" not in values and "model" not in values:
        return None
    missing = [f for f in ("base_url", "model") if f not in values]
    if missing:
        raise ConfigError(
            f"LLM role {role} is half configured: {missing[0]} is missing",
            hint=f"set {ENV_PREFIX}{role.upper()}_{missing[0].upper()} or {ENV_PREFIX}{missing[0].upper()}",
        )
    try:
        return LLMConfig(role=role, **values)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"LLM config for role {role}: {where}: {first['msg']}") from exc


def not_configured_reason(role: str) -> str:
    """What callers record when a role has no endpoint: the judge is 'not run', with this reason."""
    _check_role(role)
    r = role.upper()
    return (
        f"not run: no LLM endpoint configured for role {role} (set {ENV_PREFIX}{r}_BASE_URL and "
        f"{ENV_PREFIX}{r}_MODEL, or {ENV_PREFIX}BASE_URL and {ENV_PREFIX}MODEL, or a section named {role} in "
        f"the file ${CONFIG_FILE_ENV}; see docs/llm.md)"
    )
