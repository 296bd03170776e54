"""The one text hash: how `insights`, `embeddings` and every reader of vectors key a text."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def text_hash(text: str) -> str:
    """sha256 hex digest of the text's UTF-8 bytes (the text as embedded, after normalisation)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def text_hashes(texts: Iterable[str]) -> list[str]:
    return [text_hash(t) for t in texts]
