"""A BERT sentence encoder in numpy: a sentence-transformers model of the plain BERT kind on the CPU, without torch.

Importing torch, transformers and sentence-transformers costs a process about 6 CPU seconds before the first text
is encoded (benchmarks/embed_numpy.py), more than encoding a few thousand statements takes. A model folder
that is exactly a BERT encoder (`config.json`: `model_type` bert, absolute positions, exact GELU), mean pooling and
normalising (`modules.json`), with safetensors weights and a Rust tokenizer (`tokenizer.json`) is encoded here:
the packaged all-MiniLM-L6-v2 is one. The same token ids as the model's own tokenising (its Rust tokenizer,
truncated at `max_seq_length`), the same forward pass in float32 (embeddings, then per layer self-attention and
the feed-forward block, each followed by a residual LayerNorm), the same masked mean and unit length: vectors equal
sentence-transformers' up to float rounding (tests/embed/test_numpy_bert.py checks both on odd and long texts).
Anything else about a folder (another architecture, pooling or activation, a prompt, a dense layer) makes
`NumpyBert.for_folder` say why and the caller uses sentence-transformers.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

_MODULES = ("sentence_transformers.models.Transformer", "sentence_transformers.models.Pooling",
            "sentence_transformers.models.Normalize")
# erf(x) ~ x * P(x^2) / Q(x^2) on |x| <= ERF_CLIP (where float32 erf is already +-1): the float32 rational
# approximation XLA and Eigen use, within 4e-7 of the exact erf (tests/embed/test_numpy_bert.py); in numpy about
# twice as fast as scipy's, which computes in double precision
ERF_CLIP = 3.832506856900711
ERF_P = tuple(np.float32(c) for c in (0.00022905065861350646, 0.0034082910107109506, 0.050955695062380861,
                                      0.18520832239976145, 1.128379143519084))
ERF_Q = tuple(np.float32(c) for c in (-1.1791602954361697e-7, 0.000023547966471313185, 0.0010179625278914885,
                                      0.014070470171167667, 0.11098505178285362, 0.49746925110067538, 1.0))
_POOLING_OFF = ("pooling_mode_cls_token", "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens",
                "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken")


def erf32(x: np.ndarray) -> np.ndarray:
    """erf of a float32 array, as a new array (ERF_P, ERF_Q)."""
    out = np.clip(x, -ERF_CLIP, ERF_CLIP)
    square = out * out
    p = np.full_like(square, ERF_P[0])
    for c in ERF_P[1:]:
        p *= square
        p += c
    q = np.full_like(square, ERF_Q[0])
    for c in ERF_Q[1:]:
        q *= square
        q += c
    out *= p
    out /= q
    return out


def _json(path: Path) -> dict | list:
    return json.loads(path.read_text(encoding="utf-8"))


def obstacle(folder: Path) -> str | None:
    """Why the model in `folder` cannot be encoded here (None: it can)."""
    try:
        modules = _json(folder / "modules.json")
        config = _json(folder / "config.json")
        pooling_path = next((m.get("path") for m in modules if isinstance(m, dict) and m.get("type") == _MODULES[1]),
                            None) if isinstance(modules, list) else None
        pooling = _json(folder / pooling_path / "config.json") if pooling_path else {}
        st_config = _json(folder / "config_sentence_transformers.json") \
            if (folder / "config_sentence_transformers.json").is_file() else {}
        bert_config = _json(folder / "sentence_bert_config.json")
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        return f"its configuration cannot be read: {type(exc).__name__}: {exc}"
    if not all(isinstance(c, dict) for c in (config, pooling, st_config, bert_config)):
        return "its configuration files are not JSON objects"
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules) or tuple(
            m.get("type") for m in modules) != _MODULES:
        return "its modules are not exactly a transformer, pooling and normalising"
    if modules[0].get("path") not in ("", None):
        return "its transformer is not at the folder's top"
    wanted = {"model_type": "bert", "hidden_act": "gelu", "position_embedding_type": "absolute"}
    for key, value in wanted.items():
        if config.get(key, "absolute" if key == "position_embedding_type" else None) != value:
            return f"config.json's {key} is {config.get(key)!r}, not {value!r}"
    if not pooling.get("pooling_mode_mean_tokens") or any(pooling.get(k) for k in _POOLING_OFF):
        return "its pooling is not the mean of the tokens alone"
    if pooling.get("include_prompt") is False or st_config.get("prompts") or st_config.get("default_prompt_name"):
        return "it uses prompts"
    if st_config.get("truncate_dim") is not None:
        return "it truncates its vectors"
    if bert_config.get("do_lower_case"):
        return "sentence_bert_config.json lowercases before the tokenizer"
    for name in ("model.safetensors", "tokenizer.json"):
        if not (folder / name).is_file():
            return f"it has no {name}"
    return None


def _check_shapes(w: dict[str, np.ndarray], dim: int, heads: int, layers: int, inner: int) -> None:
    """ValueError unless `w` holds every weight of the configured BERT encoder in its shape (torch's layout)."""
    if dim < 1 or heads < 1 or dim % heads or layers < 1 or inner < 1:
        raise ValueError(f"hidden size {dim}, {heads} heads, {layers} layers, inner size {inner}: not a BERT")
    want = {"embeddings.LayerNorm.weight": (dim,), "embeddings.LayerNorm.bias": (dim,)}
    for i in range(layers):
        p = f"encoder.layer.{i}."
        for name in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            want.update({p + name + ".weight": (dim, dim), p + name + ".bias": (dim,)})
        want.update({p + "intermediate.dense.weight": (inner, dim), p + "intermediate.dense.bias": (inner,),
                     p + "output.dense.weight": (dim, inner), p + "output.dense.bias": (dim,)})
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            want.update({p + norm + ".weight": (dim,), p + norm + ".bias": (dim,)})
    for key, shape in want.items():
        if key not in w or w[key].shape != shape:
            raise ValueError(f"the weight {key} is {w[key].shape if key in w else 'missing'}, not {shape}")
    for key in ("embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
                "embeddings.token_type_embeddings.weight"):
        if key not in w or w[key].ndim != 2 or w[key].shape[1] != dim or w[key].shape[0] < 1:
            raise ValueError(f"the weight {key} is {w[key].shape if key in w else 'missing'}, not (n, {dim})")


class NumpyBert:
    """The encoder of one model folder (module docstring). Build it with `for_folder`."""

    def __init__(self, folder: Path) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        config = _json(folder / "config.json")
        bert_config = _json(folder / "sentence_bert_config.json")
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.layers = int(config["num_hidden_layers"])
        self.dim = int(config["hidden_size"])
        weights = load_file(str(folder / "model.safetensors"))
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""
        self.w = {k[len(prefix):]: np.ascontiguousarray(v, dtype=np.float32) for k, v in weights.items()
                  if k.startswith(prefix) and v.dtype.kind == "f"}
        _check_shapes(self.w, self.dim, self.heads, self.layers, int(config["intermediate_size"]))
        # linear layers as (in, out), so that x @ w is torch's x @ w.T
        for key in [k for k in self.w if k.endswith(".weight") and self.w[k].ndim == 2 and k.startswith("encoder.")]:
            self.w[key] = np.ascontiguousarray(self.w[key].T)
        scale = np.float32(1.0 / math.sqrt(self.dim // self.heads))
        for i in range(self.layers):  # query, key and value as one (in, 3 * out) product, the query scaled
            p = f"encoder.layer.{i}.attention.self."
            parts = [(self.w.pop(f"{p}{name}.weight"), self.w.pop(f"{p}{name}.bias")) for name in ("query", "key",
                                                                                                      "value")]
            self.w[p + "qkv.weight"] = np.ascontiguousarray(np.concatenate(
                [parts[0][0] * scale, parts[1][0], parts[2][0]], axis=1))
            self.w[p + "qkv.bias"] = np.concatenate([parts[0][1] * scale, parts[1][1], parts[2][1]])
        max_length = int(bert_config.get("max_seq_length") or config.get("max_position_embeddings", 512))
        self.max_length = min(max_length, int(config.get("max_position_embeddings", 512)))
        if self.w["embeddings.position_embeddings.weight"].shape[0] < self.max_length:
            raise ValueError(f"the model has fewer positions than its {self.max_length} tokens a text")
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        if tokenizer.get_vocab_size() > self.w["embeddings.word_embeddings.weight"].shape[0]:
            raise ValueError("the tokenizer has more tokens than the model's word embeddings")
        tokenizer.enable_truncation(self.max_length, strategy="longest_first", direction="right")
        tokenizer.no_padding()
        self.tokenizer = tokenizer

    @classmethod
    def for_folder(cls, folder: Path) -> tuple[NumpyBert | None, str | None]:
        """The encoder of `folder`, or None and why not."""
        why = obstacle(folder)
        if why is not None:
            return None, why
        try:
            return cls(folder), None
        except Exception as exc:  # noqa: BLE001 - any surprise in a folder's weights or tokenizer: torch's path
            return None, f"{type(exc).__name__}: {str(exc)[:300]}"

    def tokenise(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(input ids, attention mask), each (n, longest) int64, padded on the right with 0 (BERT's [PAD])."""
        # sentence-transformers strips each text before its tokenizer sees it
        encodings = self.tokenizer.encode_batch([str(t).strip() for t in texts])
        width = max((len(e.ids) for e in encodings), default=0)
        ids = np.zeros((len(texts), width), dtype=np.int64)
        mask = np.zeros((len(texts), width), dtype=np.int64)
        for row, enc in enumerate(encodings):
            ids[row, :len(enc.ids)] = enc.ids
            mask[row, :len(enc.ids)] = 1
        return ids, mask

    def _layer_norm(self, x: np.ndarray, name: str) -> np.ndarray:
        """LayerNorm of the rows of `x`, in place (x is a fresh array of this pass)."""
        x -= x.mean(-1, keepdims=True)
        scale = np.square(x).mean(-1, keepdims=True)
        scale += np.float32(self.eps)
        np.sqrt(scale, out=scale)
        x /= scale
        x *= self.w[f"{name}.weight"]
        x += self.w[f"{name}.bias"]
        return x

    def forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Unit-length mean-pooled vectors of one padded batch."""
        w = self.w
        n, length = ids.shape
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:length]
        x += w["embeddings.token_type_embeddings.weight"][0]
        x = self._layer_norm(x.reshape(n * length, self.dim), "embeddings.LayerNorm")  # rows: one per token
        head = self.dim // self.heads
        blocked = ((1.0 - mask[:, None, None, :].astype(np.float32)) * np.finfo(np.float32).min).astype(np.float32)

        def linear(t: np.ndarray, name: str) -> np.ndarray:
            out = t @ w[name + ".weight"]
            out += w[name + ".bias"]
            return out

        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            # the query, key and value projections as one product; the query's columns carry 1/sqrt(head)
            qkv = linear(x, p + "attention.self.qkv").reshape(n, length, 3, self.heads, head)
            # contiguous (n, heads, length, head), the keys (n, heads, head, length): numpy hands stacked matrices
            # to BLAS one by one only when they are contiguous, else it multiplies them in a slow loop of its own
            q = np.ascontiguousarray(qkv[:, :, 0].transpose(0, 2, 1, 3))
            k = np.ascontiguousarray(qkv[:, :, 1].transpose(0, 2, 3, 1))
            v = np.ascontiguousarray(qkv[:, :, 2].transpose(0, 2, 1, 3))
            scores = q @ k
            scores += blocked
            scores -= scores.max(-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(n * length, self.dim)
            attended = linear(context, p + "attention.output.dense")
            attended += x
            x = self._layer_norm(attended, p + "attention.output.LayerNorm")
            inner = linear(x, p + "intermediate.dense")  # exact GELU: x * (1 + erf(x / sqrt 2)) / 2
            half = erf32(inner * np.float32(1.0 / math.sqrt(2.0)))
            half += np.float32(1.0)
            half *= np.float32(0.5)
            inner *= half
            out = linear(inner, p + "output.dense")
            out += x
            x = self._layer_norm(out, p + "output.LayerNorm")
        x = x.reshape(n, length, self.dim)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (x * weights).sum(1) / np.maximum(weights.sum(1), np.float32(1e-9))
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), np.float32(1e-12))
        return (pooled / norms).astype(np.float32)

    def encode(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        """Unit-length float32 vectors of `texts`, in their order."""
        texts = list(texts)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for positions, vectors in self.encode_chunks(texts, batch_size, [len(texts)] if texts else []):
            out[positions] = vectors
        return out

    def encode_chunks(self, texts: Sequence[str], batch_size: int, sizes: Sequence[int]
                      ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(positions into `texts`, vectors) for consecutive chunks of `sizes` texts, longest texts first (as
        `FastEncoder.encode_chunks`)."""
        texts = list(texts)
        if sum(sizes) != len(texts) or any(s < 1 for s in sizes):
            raise ValueError(f"chunk sizes {list(sizes)[:5]}... do not cover {len(texts)} texts")
        order = np.argsort([-len(t) for t in texts], kind="stable")
        bounds = np.cumsum([0, *sizes])
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            blocks = []
            for start in range(int(lo), int(hi), batch_size):
                chosen = order[start:min(start + batch_size, int(hi))]
                blocks.append(self.forward(*self.tokenise([texts[i] for i in chosen])))
            yield order[int(lo):int(hi)], np.concatenate(blocks)
