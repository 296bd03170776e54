"""Fast inference for a SentenceTransformer whose first module tokenises text with a Rust (`tokenizers`) tokenizer.

`SentenceTransformer.encode` spends most of its host time in transformers' tokenizer call, which turns every text
into Python dicts and lists under the GIL; on a GPU that caps the rate far below the forward pass. `FastEncoder`
tokenises with a configured copy of the same Rust tokenizer (its batch call releases the GIL and uses every core),
pads with numpy, and runs the model's own modules on length-sorted batches; on a GPU a background thread tokenises
the next batches while the model runs. Token ids equal the model's own tokenising (checked on probe texts when
built); vectors equal `encode(..., normalize_embeddings=True)` up to float rounding.

Imports only the standard library and numpy at import time (torch inside functions), so a benchmark can load this
file by path on a host without FailAtlas's other dependencies.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

TOKEN_KEYS = ("input_ids", "attention_mask", "token_type_ids")
PREFETCH = 8  # batches tokenised ahead of the model
_PROBES = (
    "ModuleNotFoundError: No module named 'torch'",
    "  the agent   reported a metric it never computed  ",
    "CUDA out of memory at batch size 64 (GPU 0; 79.2 GiB total)",
    "",
    "Überprüfung fehlgeschlagen: 数据集缺失 — naïve café résumé 🚀",
    "x",
    "tab\tand\nnewline",
    " ".join(f"word{i} failure" for i in range(700)),  # longer than any model's limit: truncated
)


class FastEncoder:
    """Encodes texts with a SentenceTransformer's modules, tokenising with its Rust tokenizer ahead of the model.

    Build it with `FastEncoder.for_model(st)`, which returns None when the model cannot take this path."""

    def __init__(
        self,
        st: Any,
        tokenizer: Any,
        keys: tuple[str, ...],
        extra: dict[str, Any],
        pad_id: int,
        pad_type_id: int,
        left_padding: bool,
    ) -> None:
        self.st = st
        self.tokenizer = tokenizer
        self.keys = keys
        self.extra = extra
        self.pad_id = pad_id
        self.pad_type_id = pad_type_id
        self.left_padding = left_padding
        self._encode_batch = getattr(tokenizer, "encode_batch_fast", None) or tokenizer.encode_batch

    @classmethod
    def for_model(cls, st: Any) -> FastEncoder | None:
        """The fast encoder for `st`, or None (with the reason logged at debug level) when the model has no fast
        tokenizer, uses prompts, a truncated dimension or chat templates, or when the Rust tokenizer's ids differ
        from the model's own tokenising on the probe texts."""
        encoder = None
        reason = _obstacle(st)
        if reason is None:
            try:
                encoder = cls._configured(st)
                reason = encoder._probe_mismatch()
            except Exception as exc:  # any surprise in a model's tokenizer setup means: use the plain path
                reason = f"{type(exc).__name__}: {exc}"
        if reason is not None:
            log.debug("plain sentence-transformers encode: %s", reason)
            return None
        return encoder

    @classmethod
    def _configured(cls, st: Any) -> FastEncoder:
        from tokenizers import Tokenizer

        hf = st[0].tokenizer
        tokenizer = Tokenizer.from_str(hf.backend_tokenizer.to_str())  # a copy: the model's own keeps its state
        max_length = getattr(st, "max_seq_length", None) or hf.model_max_length
        if max_length is not None and max_length < 10**9:
            tokenizer.enable_truncation(max_length, strategy="longest_first", direction=hf.truncation_side)
        else:
            tokenizer.no_truncation()
        tokenizer.no_padding()
        probe = _model_features(st, ["probe"])
        keys = tuple(k for k in TOKEN_KEYS if k in probe)
        extra = {k: v for k, v in probe.items() if k not in TOKEN_KEYS}
        if any(hasattr(v, "shape") for v in extra.values()):
            raise ValueError(f"the model's features carry arrays besides token ids: {sorted(extra)}")
        return cls(
            st, tokenizer, keys, extra, hf.pad_token_id or 0, hf.pad_token_type_id or 0, hf.padding_side == "left"
        )

    def _probe_mismatch(self) -> str | None:
        expected = _model_features(self.st, list(_PROBES))
        got = self.tokenise(list(_PROBES))
        for key in self.keys:
            if not np.array_equal(expected[key].numpy(), got[key].numpy()):
                return f"the Rust tokenizer's {key} differ from the model's own on the probe texts"
        return None

    def tokenise(self, texts: list[str]) -> dict[str, Any]:
        """The model's input tensors (CPU, padded to the longest text) for `texts`, as its own tokenising gives."""
        import torch

        encodings = self._encode_batch(texts)
        ids = [e.ids for e in encodings]
        lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        width = int(lengths.max()) if len(ids) else 0
        positions = np.arange(width)[None, :]
        mask = positions >= width - lengths[:, None] if self.left_padding else positions < lengths[:, None]
        total = int(lengths.sum())
        features: dict[str, Any] = {}
        for key in self.keys:
            if key == "attention_mask":
                features[key] = torch.from_numpy(mask.astype(np.int64))
                continue
            rows = ids if key == "input_ids" else [e.type_ids for e in encodings]
            array = np.full((len(ids), width), self.pad_id if key == "input_ids" else self.pad_type_id, np.int64)
            array[mask] = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64, count=total)
            features[key] = torch.from_numpy(array)
        return features

    def encode(self, texts: Sequence[str], batch_size: int, *, prefetch: bool | None = None) -> np.ndarray:
        """Unit-length float32 vectors of `texts`, in their order.

        `prefetch`: tokenise in a background thread ahead of the model; by default only off the CPU, where the
        model's own threads already use every core."""
        texts = list(texts)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for positions, vectors in self.encode_chunks(texts, batch_size, [len(texts)], prefetch=prefetch):
            out[positions] = vectors
        return out

    @property
    def dim(self) -> int:
        return int((getattr(self.st, "get_embedding_dimension", None) or self.st.get_sentence_embedding_dimension)())

    def encode_chunks(
        self, texts: Sequence[str], batch_size: int, sizes: Sequence[int], *, prefetch: bool | None = None
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Vectors of `texts` in chunks of `sizes` texts (summing to len(texts)): yields (positions, vectors), the
        positions (into `texts`) of each chunk's rows. The texts are sorted by length once, longest first, and
        one tokeniser thread runs ahead across chunk boundaries, so the model never waits between chunks (a
        separate `encode` per chunk restarts the pipeline each time).

        A chunk holds whole batches except at its end: a size that is not a multiple of `batch_size` ends that
        chunk with a smaller batch."""
        import torch

        texts = list(texts)
        if sum(sizes) != len(texts) or any(s < 1 for s in sizes):
            raise ValueError(f"chunk sizes {list(sizes)[:5]}... do not cover {len(texts)} texts")
        if not texts:
            return
        device = self.st.device
        order = np.argsort([-len(t) for t in texts], kind="stable")  # longest first, as st.encode does
        bounds = np.cumsum([0, *sizes])
        spans = [(lo, min(lo + batch_size, hi)) for a, hi in zip(bounds[:-1], bounds[1:], strict=True)
                 for lo in range(int(a), int(hi), batch_size)]
        # Not pinned: on an H100, pinning each batch's tensors cost more CPU time (2-3 ms a tensor) than the plain
        # copies of about 1 MB save; without it the encoder ran 41k/s instead of 37k/s (benchmarks/RESULTS.md).
        tokenised = self._tokenised_spans(texts, order, spans)
        if prefetch is None:
            prefetch = device.type != "cpu"
        batches = _Prefetcher(tokenised) if prefetch else _Inline(tokenised)
        pending: list[Any] = []
        chunk = 0
        done = 0
        self.st.eval()
        try:
            with torch.inference_mode():
                for (_, hi), features in zip(spans, batches, strict=True):
                    features = {
                        k: v.to(device, non_blocking=True) if hasattr(v, "to") else v for k, v in features.items()
                    }
                    vectors = self.st(features)["sentence_embedding"]
                    pending.append(torch.nn.functional.normalize(vectors.float(), p=2, dim=1))
                    if hi == bounds[chunk + 1]:
                        block = torch.cat(pending).cpu().numpy()
                        pending.clear()
                        yield order[done : done + len(block)], block
                        done += len(block)
                        chunk += 1
        finally:
            batches.close()

    def _tokenised_spans(
        self, texts: list[str], order: np.ndarray, spans: list[tuple[int, int]]
    ) -> Iterator[dict[str, Any]]:
        for lo, hi in spans:
            yield {**self.tokenise([texts[i] for i in order[lo:hi]]), **self.extra}


def _obstacle(st: Any) -> str | None:
    """Why `st` must use the plain encode, or None."""
    try:
        first = st[0]
    except (IndexError, TypeError, KeyError):
        return "the model has no modules"
    hf = getattr(first, "tokenizer", None)
    if not getattr(hf, "is_fast", False) or getattr(hf, "backend_tokenizer", None) is None:
        return "the first module has no fast (Rust) tokenizer"
    if getattr(st, "default_prompt_name", None):
        return f"the model prepends the prompt {st.default_prompt_name!r}"
    if getattr(st, "truncate_dim", None) is not None:
        return "the model truncates its vectors"
    modalities = getattr(first, "modality_config", None) or {"text": None}
    if "text" not in modalities or "message" in modalities:
        return f"the first module reads {sorted(map(str, modalities))}, not plain text"
    return None


def _model_features(st: Any, texts: list[str]) -> dict[str, Any]:
    preprocess = getattr(st, "preprocess", None) or st.tokenize  # tokenize before sentence-transformers 6
    return dict(preprocess(texts))


class _Inline:
    """The items of a generator, produced when asked for (the `_Prefetcher` interface without a thread)."""

    def __init__(self, items: Iterator[Any]) -> None:
        self._items = items

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items)

    def close(self) -> None:
        pass


class _Prefetcher:
    """Runs a generator in a background thread, `PREFETCH` items ahead of the consumer; re-raises its errors."""

    _END = object()

    def __init__(self, items: Iterator[Any]) -> None:
        self._queue: queue.Queue = queue.Queue(maxsize=PREFETCH)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(items,), name="fast-encode-tokeniser", daemon=True)
        self._thread.start()

    def _put(self, item: Any) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self, items: Iterator[Any]) -> None:
        try:
            for item in items:
                if not self._put(item):
                    return
        except BaseException as exc:  # handed to the consumer, which re-raises it
            self._put(exc)
            return
        self._put(self._END)

    def __iter__(self) -> Iterator[Any]:
        while True:
            item = self._queue.get()
            if item is self._END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
