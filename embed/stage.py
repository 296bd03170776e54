"""The embed stage: vectors for every insight, computed once per distinct (normalised) text and stored in the
embedding set of the model, its revision and the normaliser."""

from __future__ import annotations

import queue
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
from pydantic import BaseModel

from failatlas.core.errors import NotFoundError
from failatlas.core.hashing import text_hashes
from failatlas.core.stages import stage_run
from failatlas.core.store import Store
from failatlas.embed.models import DEFAULT_MODEL, default_device, get_embedder, resolve_model
from failatlas.embed.normalise import get_normaliser, normaliser_named
from failatlas.embed.sets import EmbeddingSet, cached_hashes, find_set, get_set, read_vectors
from failatlas.embed.writes import VectorWriter, ensure_set

Progress = Callable[[int], None]
# Texts per encode call and transaction (an interrupted run keeps what it embedded) and texts per forward pass,
# on the CPU and on a GPU. On an H200 the stage at batch 64 embedded 9k-15k texts/s, at 1,024 with chunks of
# 16,384 45k/s (benchmarks/RESULTS.md); on the CPU larger batches only pad more.
WRITE_CHUNK = 4096
WRITE_CHUNK_GPU = 16_384
BATCH_SIZE = 64
BATCH_SIZE_GPU = 1024


class EmbedParams(BaseModel):
    """What an embed run depends on."""

    model: str = DEFAULT_MODEL
    normalise: str = "none"  # a normaliser name: 'none' or 'mask'
    phases: list[str] | None = None  # only insights of these phases (all when None)
    batch_size: int | None = None  # default: BATCH_SIZE on the CPU, BATCH_SIZE_GPU on a GPU
    device: str | None = None  # default: cuda when present


class EmbedResult(BaseModel):
    """What one embed run did."""

    embedding_set_id: str | None  # None when there was nothing to embed and no set yet
    model: str
    revision: str
    normalisation: str
    n_insights: int
    n_texts: int  # distinct texts after normalisation
    n_new: int  # texts embedded now
    n_cached: int  # texts found in the set
    device: str | None  # None when nothing needed the model
    seconds: float
    stage_run_id: str


class InsightVectors(BaseModel, arbitrary_types_allowed=True):
    """Insights and their vectors, row-aligned, and the embedding set they come from."""

    ids: list[str]
    phases: list[str]
    texts: list[str]
    vectors: np.ndarray
    embedding_set: EmbeddingSet

    @property
    def model(self) -> str:
        return self.embedding_set.model

    @property
    def revision(self) -> str:
        return self.embedding_set.revision

    @property
    def normalisation(self) -> str:
        return self.embedding_set.normalisation


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


def _write_from(q: queue.Queue, writer: VectorWriter, advance: Progress) -> None:
    with writer:
        while True:
            try:
                item = q.get(timeout=0.2)
            except queue.Empty:
                writer.release_if_due()  # waiting for the encoder: let other processes in after max_hold_s
                continue
            if item is None:
                return
            hashes, vectors = item
            writer.write(hashes, vectors)
            advance(len(hashes))


def _put(q: queue.Queue, item: object, done: Future) -> None:
    """Hand `item` to the writer, or raise its error when it stopped."""
    while True:
        if done.done():
            done.result()
            raise RuntimeError("the vector writer stopped early")
        try:
            q.put(item, timeout=0.1)
            return
        except queue.Full:
            continue


def chunk_sizes(n: int, size: int, batch_size: int) -> list[int]:
    """How many texts each transaction stores: `size` at a time, then the last `2 * size` texts in halving chunks
    of whole batches (down to two batches) so that the write left when the encoder finishes is a small one."""
    unit = max(1, min(batch_size, size))
    floor = 2 * unit
    sizes: list[int] = []
    left = n
    while left > 0:
        if left >= 2 * size:
            take = size
        elif left <= floor:
            take = left
        else:
            take = min(left, max(floor, -(-(left // 2) // unit) * unit))
        sizes.append(take)
        left -= take
    return sizes


def _more_insights_than_vectors(conn, embedding_set: EmbeddingSet | None, phases: Sequence[str] | None) -> bool:  # noqa: ANN001
    sql = "SELECT count(*) FROM insights"
    params: list = []
    if phases:
        sql += " WHERE phase IN (SELECT unnest(?))"
        params.append(list(phases))
    n_insights = conn.execute(sql, params).fetchone()[0]
    if embedding_set is None:
        return n_insights > 0
    n_vectors = conn.execute(
        f'SELECT count(*) FROM "{embedding_set.vectors_table}" WHERE set_id = ?', [embedding_set.id]
    ).fetchone()[0]
    return n_insights > n_vectors


def run(store: Store, params: EmbedParams, *, progress: Callable[[int], Progress] | None = None) -> EmbedResult:
    """Embed every insight (of `params.phases`) whose normalised text has no vector yet in the embedding set of
    this model, revision and normaliser; record the run in `stage_runs`.

    `progress(total)` is called once with the number of texts to embed and returns `advance(n)`. The model loads
    while the texts are read and hashed; vectors are written by a second thread while the next chunk is encoded,
    one transaction per chunk (`chunk_sizes`).
    Raises NotFoundError when the model is not on this machine, MissingDependencyError without
    sentence-transformers."""
    with stage_run(store, "embed", params) as record, \
            ThreadPoolExecutor(max_workers=2, thread_name_prefix="embed") as pool:
        normaliser = get_normaliser(params.normalise)
        _, revision = resolve_model(params.model)
        with store.read() as conn:
            embedding_set = find_set(conn, params.model, revision, normaliser.name)
            likely = _more_insights_than_vectors(conn, embedding_set, params.phases)
        # Load the model while the texts are read and hashed, when there are more insights than stored vectors
        # (a guess: a wrong one costs a load in the background, not on the way).
        loading = pool.submit(lambda: get_embedder(params.model, device=params.device).load()) if likely else None
        ids, _, texts = read_insights(store, params.phases)
        prepared = normaliser(texts)
        hashes = text_hashes(prepared)
        unique: dict[str, str] = dict(zip(hashes, prepared, strict=True))
        with store.read() as conn:
            known = cached_hashes(conn, embedding_set, list(unique))
        todo = [h for h in unique if h not in known]
        used_device = None
        if todo:
            embedder = loading.result() if loading else get_embedder(params.model, device=params.device)
            on_gpu = str(params.device or default_device()) != "cpu"
            batch_size = params.batch_size or (BATCH_SIZE_GPU if on_gpu else BATCH_SIZE)
            sizes = chunk_sizes(len(todo), WRITE_CHUNK_GPU if on_gpu else WRITE_CHUNK, batch_size)
            advance = progress(len(todo)) if progress else (lambda n=1: None)
            chunks = embedder.encode_chunks([unique[h] for h in todo], batch_size, sizes)
            positions, first = next(chunks)
            with store.write() as conn:
                embedding_set = ensure_set(conn, params.model, revision, normaliser.name, first.shape[1])
            # the previous chunk is stored (or its error raised) before the next is handed over
            handoff: queue.Queue = queue.Queue(maxsize=1)
            writer = VectorWriter(store, embedding_set, hold=on_gpu)
            done = pool.submit(_write_from, handoff, writer, advance)
            try:
                _put(handoff, ([todo[i] for i in positions], first), done)
                for positions, vectors in chunks:
                    _put(handoff, ([todo[i] for i in positions], vectors), done)
                _put(handoff, None, done)
            except BaseException:
                if not done.done():
                    handoff.put(None)
                raise
            finally:
                chunks.close()
            done.result()
            used_device = getattr(embedder, "device", None)
        record.count(embedding_set.vectors_table if embedding_set else "embedding_vectors", len(todo))
        record.note(embedding_set_id=embedding_set.id if embedding_set else None, n_texts=len(unique),
                    n_cached=len(unique) - len(todo), device=used_device)
    return EmbedResult(
        embedding_set_id=embedding_set.id if embedding_set else None,
        model=params.model,
        revision=revision,
        normalisation=normaliser.name,
        n_insights=len(ids),
        n_texts=len(unique),
        n_new=len(todo),
        n_cached=len(unique) - len(todo),
        device=used_device,
        seconds=record.seconds or 0.0,
        stage_run_id=record.id,
    )


def find_embedding_set(store: Store, *, model: str = DEFAULT_MODEL, normalise: str | bool = "none") -> EmbeddingSet:
    """The set of `model` at the revision on this machine, with the normaliser `normalise`. Raises NotFoundError
    when nothing was embedded with it."""
    normaliser = get_normaliser(normalise)
    _, revision = resolve_model(model)
    with store.read() as conn:
        found = find_set(conn, model, revision, normaliser.name)
    if found is None:
        raise NotFoundError(
            f"nothing embedded with model {model} ({revision}), normalisation {normaliser.name}",
            hint="run `failatlas embed run` with the same --model and --normalise first",
        )
    return found


def vectors_of_texts(store: Store, embedding_set: EmbeddingSet, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(matrix, found) for `texts` in `embedding_set`, the texts normalised as the set's normaliser did them: rows
    without a vector are zero and `found` is False there. Raises ConfigError for a normaliser this build does not
    know."""
    hashes = text_hashes(normaliser_named(embedding_set.normalisation)(texts))
    with store.read() as conn:
        return read_vectors(conn, embedding_set, hashes)


def load_insight_vectors(
    store: Store,
    embedding_set: EmbeddingSet | str,
    *,
    phases: Sequence[str] | None = None,
) -> InsightVectors:
    """The vectors of the insights in `phases` from `embedding_set` (a set or its id). Raises NotFoundError when
    some were never embedded into it."""
    if isinstance(embedding_set, str):
        embedding_set = get_set(store, embedding_set)
    ids, insight_phases, texts = read_insights(store, phases)
    vectors, found = vectors_of_texts(store, embedding_set, texts)
    if not found.all():
        raise NotFoundError(
            f"{int((~found).sum())} of {len(texts)} texts have no vector in embedding set {embedding_set.id}"
            f" (model {embedding_set.model}, normalisation {embedding_set.normalisation})",
            hint="run `failatlas embed run` with the same --model and --normalise first",
        )
    return InsightVectors(ids=ids, phases=insight_phases, texts=texts, vectors=vectors, embedding_set=embedding_set)

