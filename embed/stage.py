"""The embed stage: vectors for every insight, computed once per distinct (normalised) text and cached in
DuckDB."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from failatlas.embed.cache import CacheKey, cached_hashes, read_vectors, text_hashes, write_vectors
from failatlas.embed.models import DEFAULT_MODEL, default_device, get_embedder, resolve_model
from failatlas.embed.normalise import get_normaliser
from pydantic import BaseModel

from failatlas.core.errors import NotFoundError
from failatlas.core.store import Store

Progress = Callable[[int], None]
# Texts per encode call and transaction (an interrupted run keeps what it embedded) and texts per forward pass,
# on the CPU and on a GPU. On an H200 the stage at batch 64 embedded 9k-15k texts/s, at 1,024 with chunks of
# 16,384 45k/s (benchmarks/RESULTS.md); on the CPU larger batches only pad more.
WRITE_CHUNK = 4096
WRITE_CHUNK_GPU = 16_384
BATCH_SIZE = 64
BATCH_SIZE_GPU = 1024


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
    batch_size: int | None = None,
    phases: Sequence[str] | None = None,
    device: str | None = None,
    progress: Callable[[int], Progress] | None = None,
) -> EmbedReport:
    """Embed every insight (of `phases`) whose normalised text has no vector yet for this model and revision.

    `progress(total)` is called once with the number of texts to embed and returns `advance(n)`. `batch_size`
    defaults to BATCH_SIZE on the CPU and BATCH_SIZE_GPU on a GPU. Vectors are written by a second thread while
    the next chunk is encoded, one transaction per chunk.
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
        on_gpu = str(device or default_device()) != "cpu"
        batch_size = batch_size or (BATCH_SIZE_GPU if on_gpu else BATCH_SIZE)
        size = WRITE_CHUNK_GPU if on_gpu else WRITE_CHUNK
        advance = progress(len(todo)) if progress else (lambda n=1: None)

        def write(chunk: list[str], vectors: np.ndarray) -> None:
            with store.write() as conn:
                write_vectors(conn, chunk, vectors, key)
            advance(len(chunk))

        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed-writer") as writer:
            pending = None
            for lo in range(0, len(todo), size):
                chunk = todo[lo : lo + size]
                vectors = embedder.encode([unique[h] for h in chunk], batch_size=batch_size)
                if pending is not None:
                    pending.result()  # the previous chunk is stored (or its error raised) before the next is sent
                pending = writer.submit(write, chunk, vectors)
            if pending is not None:
                pending.result()
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
