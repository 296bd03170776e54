"""Plain data across the hidden-test boundary: JSON holding None, bool, int, float, str, list, dict (str keys) and
numpy arrays of numeric dtypes, nothing else, within size, depth and number limits.

This file is copied beside the hidden-test judge and the sandbox worker (as `failatlas_wire.py`), so it imports
the standard library and numpy only. The judge decodes what the agent's side sent with `decode`, which accepts
the data above or raises `WireError` (huge integers, bad arrays, lone surrogates, too deep or too large): the test
that asked then fails as the agent's failure. The element count is bounded before parsing (MAX_ELEMENTS, counted as
the commas and opening brackets of the text), so a flood of tiny values cannot hold the judge for minutes.
Tuples travel as lists; numpy scalars as Python numbers.
"""

from __future__ import annotations

import base64
import json
import math

MAX_BYTES = 16 * 1024 * 1024
MAX_ELEMENTS = 1_000_000  # JSON values (counted as commas and opening brackets) in one decoded message
MAX_DEPTH = 32
MAX_ITEMS = 2_000_000
MAX_INT = 2**63
ARRAY_TAG = "__ndarray__"
DTYPES = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
                    "float32", "float64"})


class WireError(ValueError):
    """A value that is not plain data within the limits."""


def _check_str(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise WireError("a string holds a lone surrogate") from None
    return text


def _encode_array(value, np) -> dict:
    dtype = value.dtype.name
    if dtype not in DTYPES:
        raise WireError(f"an array of dtype {dtype} is not plain data (numeric dtypes only)")
    if value.size > MAX_ITEMS:
        raise WireError(f"an array of {value.size} items is larger than {MAX_ITEMS}")
    data = value.astype(value.dtype.newbyteorder("<"), copy=False).tobytes(order="C")
    return {ARRAY_TAG: [dtype, list(value.shape), base64.b64encode(data).decode("ascii")]}


def to_plain(value, depth: int = 0):
    """`value` as JSON-ready plain data; raises WireError for anything else."""
    if depth > MAX_DEPTH:
        raise WireError(f"nested deeper than {MAX_DEPTH} levels")
    if value is None or isinstance(value, bool | str | float):
        return _check_str(value) if isinstance(value, str) else value
    if isinstance(value, int):
        if abs(value) >= MAX_INT:
            raise WireError("an integer outside the 64-bit range")
        return int(value)
    if isinstance(value, list | tuple):
        return [to_plain(v, depth + 1) for v in value]
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str) or key == ARRAY_TAG:
                raise WireError(f"a dict key {str(key)[:40]!r} is not a plain string")
            out[_check_str(key)] = to_plain(item, depth + 1)
        return out
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy is in every image that runs hidden tests
        np = None
    if np is not None:
        if isinstance(value, np.ndarray):
            return _encode_array(value, np)
        if isinstance(value, np.bool_):
            return bool(value)
        if isinstance(value, np.integer):
            return to_plain(int(value), depth)
        if isinstance(value, np.floating):
            return float(value)
    raise WireError(f"a value of type {type(value).__name__} is not plain data")


def encode(value) -> bytes:
    """`value` as wire bytes; raises WireError when it is not plain data or too large."""
    text = json.dumps(to_plain(value), allow_nan=True, separators=(",", ":"))
    if len(text) > MAX_BYTES:
        raise WireError(f"{len(text)} bytes is more than the {MAX_BYTES} allowed")
    return text.encode("utf-8")


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > 19 or abs(int(text)) >= MAX_INT:
        raise WireError(f"an integer of {len(text)} characters is outside the 64-bit range")
    return int(text)


def _parse_constant(name: str) -> float:
    return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}[name]


def _no_duplicates(pairs: list) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise WireError("an object repeats a key")
    return out


def _decode_array(spec):
    import numpy as np

    if not (isinstance(spec, list) and len(spec) == 3 and isinstance(spec[0], str) and isinstance(spec[1], list)
            and isinstance(spec[2], str)):
        raise WireError("a malformed array")
    dtype, shape, data = spec
    if dtype not in DTYPES:
        raise WireError(f"an array of dtype {dtype[:40]!r} is not allowed")
    if len(shape) > 32 or not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= MAX_ITEMS
                                  for n in shape):
        raise WireError("an array with a malformed shape")
    count = math.prod(shape)
    if count > MAX_ITEMS:
        raise WireError(f"an array of {count} items is larger than {MAX_ITEMS}")
    try:
        raw = base64.b64decode(data.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        raise WireError("an array whose data is not base64") from None
    dt = np.dtype(dtype).newbyteorder("<")
    if len(raw) != count * dt.itemsize:
        raise WireError(f"an array of shape {shape} with {len(raw)} bytes of data")
    return np.frombuffer(raw, dtype=dt).astype(np.dtype(dtype), copy=True).reshape(shape)


def _walk(value, depth: int):
    if depth > MAX_DEPTH:
        raise WireError(f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, str):
        return _check_str(value)
    if isinstance(value, list):
        return [_walk(v, depth + 1) for v in value]
    if isinstance(value, dict):
        if ARRAY_TAG in value:
            if len(value) != 1:
                raise WireError("an array tag beside other keys")
            return _decode_array(value[ARRAY_TAG])
        return {_check_str(k): _walk(v, depth + 1) for k, v in value.items()}
    return value


def decode(data: bytes | str):
    """The plain data in wire bytes; raises WireError for anything else (never another exception)."""
    if len(data) > MAX_BYTES:
        raise WireError(f"{len(data)} bytes is more than the {MAX_BYTES} allowed")
    marks = (b",", b"[", b"{") if isinstance(data, bytes) else (",", "[", "{")
    elements = sum(data.count(mark) for mark in marks)
    if elements > MAX_ELEMENTS:
        raise WireError(f"about {elements} values is more than the {MAX_ELEMENTS} allowed")
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        value = json.loads(text, parse_int=_parse_int, parse_constant=_parse_constant,
                           object_pairs_hook=_no_duplicates)
        return _walk(value, 0)
    except WireError:
        raise
    except RecursionError:
        raise WireError("nested too deeply") from None
    except (ValueError, TypeError, MemoryError) as exc:
        raise WireError(f"not plain data: {type(exc).__name__}: {str(exc)[:200]}") from None
