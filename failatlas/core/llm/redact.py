"""Keep API keys out of everything stored or logged: the store, traces, exports, error messages."""

from __future__ import annotations

import json
import re
from typing import Any

REDACTED = "[REDACTED]"
# Shapes of bearer credentials that may be echoed back by a server (OpenAI echoes part of a bad key).
_KEY_SHAPES = re.compile(r"(?:\bsk-[A-Za-z0-9_\-*]{12,}|(?i:\bbearer\s+)[A-Za-z0-9._\-~+/]{12,}=*)")


class Redactor:
    """Replaces the given secrets, and anything shaped like an API key or bearer token, with [REDACTED]."""

    def __init__(self, secrets: list[str] | tuple[str, ...] = ()) -> None:
        # Short placeholders such as "not-needed" are not secrets; redacting them would mangle text.
        self.secrets = sorted({s for s in secrets if s and len(s) >= 8}, key=len, reverse=True)

    def text(self, value: str) -> str:
        for secret in self.secrets:
            value = value.replace(secret, REDACTED)
        return _KEY_SHAPES.sub(REDACTED, value)

    def obj(self, value: Any) -> Any:
        """A deep copy of a JSON-like value with every string redacted (keys of dicts included)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)): self.obj(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.obj(v) for v in value]
        return value

    def json(self, value: Any) -> str:
        """Redacted JSON text of a JSON-like value."""
        return json.dumps(self.obj(value), ensure_ascii=False, sort_keys=True)
