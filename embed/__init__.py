"""Embed stage: sentence-transformers vectors for insights, stored in embedding sets (one per model, revision and
normalisation) and cached by text hash.

    result = failatlas.embed.run(store, EmbedParams(model="all-MiniLM-L6-v2"))
"""

from failatlas.embed.models import (
    DEFAULT_MODEL,
    EMBEDDERS,
    Embedder,
    SentenceTransformerEmbedder,
    get_embedder,
    resolve_model,
)
from failatlas.embed.normalise import NORMALISERS, MaskNormaliser, Normaliser, get_normaliser, normaliser_named
from failatlas.embed.sets import EmbeddingSet, get_set, list_sets, read_vectors, set_id
from failatlas.embed.stage import (
    EmbedParams,
    EmbedResult,
    InsightVectors,
    find_embedding_set,
    load_insight_vectors,
    read_insights,
    run,
    vectors_of_texts,
)

__all__ = [
    "DEFAULT_MODEL",
    "EMBEDDERS",
    "NORMALISERS",
    "EmbedParams",
    "EmbedResult",
    "Embedder",
    "EmbeddingSet",
    "InsightVectors",
    "MaskNormaliser",
    "Normaliser",
    "SentenceTransformerEmbedder",
    "find_embedding_set",
    "get_embedder",
    "get_normaliser",
    "get_set",
    "list_sets",
    "load_insight_vectors",
    "normaliser_named",
    "read_insights",
    "read_vectors",
    "resolve_model",
    "run",
    "set_id",
    "vectors_of_texts",
]
