"""Errors of the LLM client layer. An endpoint that fails is infrastructure, never the agent's fault."""

from __future__ import annotations

from failatlas.core.errors import InfrastructureError


class LLMEndpointError(InfrastructureError):
    """The endpoint failed: retries spent on 429/5xx/timeouts, or a 4xx that retrying cannot fix.

    `kind` is rate_limit | server_error | timeout | connection | client_error, or for a refused request
    (400/422, told apart by its body) format_refused | context_length | unsupported_param (`param` names it) |
    tools_unsupported; `status_code` is the last HTTP status (None for timeouts and connection failures);
    `attempts` is the number of HTTP requests sent.
    The message never contains the API key.
    """

    def __init__(
        self,
        message: str,
        *,
        kind: str,
        status_code: int | None = None,
        attempts: int = 0,
        hint: str | None = None,
        param: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.kind = kind
        self.param = param
        self.status_code = status_code
        self.attempts = attempts
