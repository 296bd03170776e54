"""Embed stage: sentence-transformers vectors for insights, cached in DuckDB by (text hash, model, revision,
normalisation)."""

from failatlas.embed.cache import CacheKey, text_hash
from failatlas.embed.models import (
    DEFAULT_MODEL,
    EMBEDDERS,
    Embedder,
    SentenceTransformerEmbedder,
    get_embedder,
    resolve_model,
)
from failatlas.embed.normalise import NORMALISERS, MaskNormaliser, Normaliser, get_normaliser
from failatlas.embed.stage import EmbedReport, InsightVectors, embed_insights, load_insight_vectors, read_insights

__all__ = [
    "DEFAULT_MODEL",
    "EMBEDDERS",
    "NORMALISERS",
    "CacheKey",
    "EmbedReport",
    "Embedder",
    "InsightVectors",
    "MaskNormaliser",
    "Normaliser",
    "SentenceTransformerEmbedder",
    "embed_insights",
    "get_embedder",
    "get_normaliser",
    "load_insight_vectors",
    "read_insights",
    "resolve_model",
    "text_hash",
]
