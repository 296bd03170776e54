"""The embed stage: vectors for every insight, computed once per distinct (normalised) text and cached in
DuckDB."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np
from pydantic import BaseModel

from embed.cache import CacheKey, cached_hashes, read_vectors, text_hashes, write_vectors
from embed.models import DEFAULT_MODEL, get_embedder, resolve_model
from embed.normalise import get_normaliser
from failatlas.errors import NotFoundError
from failatlas.store import Store

Progress = Callable[[int], None]
WRITE_CHUNK = 4096  # texts per transaction: an interrupted run keeps what it embedded


class EmbedReport(BaseModel):
    """What one embed run did."""

    model: str
    revision: str
    normalisation: str
    n_insights: int
    n_texts: int  # distinct texts after normalisation
    n_new: int  # texts embedded now
    n_cached: int  # texts found in the cache
    device: str | None  # None when nothing needed the model
    seconds: float


class InsightVectors(BaseModel, arbitrary_types_allowed=True):
    """Insights and their vectors, row-aligned."""

    ids: list[str]
    phases: list[str]
    texts: list[str]
    vectors: np.ndarray
    model: str
    revision: str
    normalisation: str


def read_insights(
    store: Store, phases: Sequence[str] | None = None
) -> tuple[list[str], list[str], list[str]]:
    """(ids, phases, texts) of the insights in `phases` (all when None), ordered by id."""
    sql = "SELECT id, phase, text FROM insights"
    params: list = []
    if phases:
        sql += " WHERE phase IN (SELECT unnest(?))"
        params.append(list(phases))
    with store.read() as conn:
        table = conn.sql(sql + " ORDER BY id", params=params).to_arrow_table()
    return (
        table.column("id").to_pylist(),
        table.column("phase").to_pylist(),
        table.column("text").to_pylist(),
    )


def embed_insights(
    store: Store,
    *,
    model: str = DEFAULT_MODEL,
    normalise: str | bool = "none",
    batch_size: int = 64,
    phases: Sequence[str] | None = None,
    device: str | None = None,
    progress: Callable[[int], Progress] | None = None,
) -> EmbedReport:
    """Embed every insight (of `phases`) whose normalised text has no vector yet for this model and revision.

    `progress(total)` is called once with the number of texts to embed and returns `advance(n)`.
    Raises NotFoundError when the model is not on this machine, MissingDependencyError without
    sentence-transformers."""
    start = time.perf_counter()
    normaliser = get_normaliser(normalise)
    _, revision = resolve_model(model)
    key = CacheKey(model=model, revision=revision, normalisation=normaliser.name)
    ids, _, texts = read_insights(store, phases)
    prepared = normaliser(texts)
    hashes = text_hashes(prepared)
    unique: dict[str, str] = dict(zip(hashes, prepared, strict=True))
    with store.read() as conn:
        known = cached_hashes(conn, list(unique), key)
    todo = [h for h in unique if h not in known]
    used_device = None
    if todo:
        embedder = get_embedder(model, device=device)
        advance = progress(len(todo)) if progress else (lambda n=1: None)
        for lo in range(0, len(todo), WRITE_CHUNK):
            chunk = todo[lo : lo + WRITE_CHUNK]
            vectors = embedder.encode([unique[h] for h in chunk], batch_size=batch_size)
            with store.write() as conn:
                write_vectors(conn, chunk, vectors, key)
            advance(len(chunk))
        used_device = getattr(embedder, "device", None)
    return EmbedReport(
        model=model,
        revision=revision,
        normalisation=normaliser.name,
        n_insights=len(ids),
        n_texts=len(unique),
        n_new=len(todo),
        n_cached=len(unique) - len(todo),
        device=used_device,
        seconds=round(time.perf_counter() - start, 3),
    )


def load_insight_vectors(
    store: Store,
    *,
    model: str = DEFAULT_MODEL,
    normalise: str | bool = "none",
    phases: Sequence[str] | None = None,
) -> InsightVectors:
    """The cached vectors of the insights in `phases`. Raises NotFoundError when some were never embedded."""
    normaliser = get_normaliser(normalise)
    _, revision = resolve_model(model)
    key = CacheKey(model=model, revision=revision, normalisation=normaliser.name)
    ids, insight_phases, texts = read_insights(store, phases)
    hashes = text_hashes(normaliser(texts))
    with store.read() as conn:
        try:
            vectors = read_vectors(conn, hashes, key)
        except KeyError as exc:
            raise NotFoundError(
                f"{exc.args[0]} (model {model}, normalisation {normaliser.name})",
                hint="run `failatlas embed run` with the same --model and --normalise first",
            ) from None
    return InsightVectors(
        ids=ids,
        phases=insight_phases,
        texts=texts,
        vectors=vectors,
        model=model,
        revision=revision,
        normalisation=normaliser.name,
    )
