"""Plain data across the hidden-test boundary: JSON holding None, bool, int, float, str, list, dict (str keys),
numpy arrays and scalars of numeric dtypes and torch tensors of numeric dtypes, nothing else, within size, depth
and number limits.

This file is copied beside the hidden-test judge, the sandbox worker and the recorder (as `failatlas_wire.py`), so
it imports the standard library and numpy only; torch only in `decode(..., torch=True)` of data holding a tensor.
The judge decodes what the agent's side sent with `decode`, which accepts the data above or raises `WireError`
(huge integers, bad arrays or tensors, lone surrogates, too deep or too large): the test that asked then fails as
the agent's failure. The element count is bounded before parsing (MAX_ELEMENTS, counted as the commas and opening
brackets of the text), so a flood of tiny values cannot hold the judge for minutes. Tuples travel as lists.

Arrays travel as dtype, shape and little-endian bytes; a numpy scalar as its dtype and bytes (it decodes as the
same numpy scalar); a torch tensor as its CPU array (bfloat16 as float32, exactly) with its torch dtype, shape,
`requires_grad` and device. Where the values are compared (the judge, the harness) a tensor decodes as
`TensorData`, never importing torch; where code is called on them (the worker, the recorder: `torch=True`) as a
`torch.Tensor` on the recorded device when this process has it, else on the CPU. Only dense (strided) tensors.
"""

from __future__ import annotations

import base64
import json
import math
import re
import sys

MAX_BYTES = 16 * 1024 * 1024
MAX_ELEMENTS = 1_000_000  # JSON values (counted as commas and opening brackets) in one decoded message
MAX_DEPTH = 32
MAX_ITEMS = 2_000_000
MAX_INT = 2**63
ARRAY_TAG = "__ndarray__"
SCALAR_TAG = "__npscalar__"
TENSOR_TAG = "__tensor__"
TAGS = frozenset({ARRAY_TAG, SCALAR_TAG, TENSOR_TAG})
DTYPES = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
                    "float32", "float64"})
TORCH_DTYPES = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "float16", "bfloat16", "float32",
                          "float64"})
_DEVICE = re.compile(r"(cpu|cuda|mps|xpu)(:[0-9]{1,3})?")


class WireError(ValueError):
    """A value that is not plain data within the limits."""


class TensorData:
    """A torch tensor as data, without torch: `array` (its values on the CPU; bfloat16 as float32), `dtype` (the
    torch dtype's name), `requires_grad` and `device` (where it was made)."""

    __slots__ = ("array", "dtype", "requires_grad", "device")

    def __init__(self, array, dtype: str, requires_grad: bool = False, device: str = "cpu") -> None:
        self.array, self.dtype, self.requires_grad, self.device = array, dtype, requires_grad, device

    @property
    def shape(self) -> tuple:
        return tuple(self.array.shape)

    def __repr__(self) -> str:
        return f"tensor({self.dtype}{list(self.shape)}, device={self.device!r})"

    def to_torch(self):
        """This tensor as a `torch.Tensor`: on `device` when this process has that device, else on the CPU."""
        import torch

        value = torch.from_numpy(self.array.copy()).to(getattr(torch, self.dtype))
        if _has_device(torch, self.device):
            value = value.to(self.device)
        if self.requires_grad and value.is_floating_point():
            value.requires_grad_(True)
        return value


def _has_device(torch, device: str) -> bool:
    kind, _, index = device.partition(":")
    if kind == "cuda":
        return bool(torch.cuda.is_available()) and int(index or 0) < torch.cuda.device_count()
    return False  # cpu: already there; mps, xpu: replayed on the CPU


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


def _encode_scalar(value, np) -> dict:
    dtype, _shape, data = _encode_array(np.asarray(value), np)[ARRAY_TAG]
    return {SCALAR_TAG: [dtype, data]}


def _tensor_spec(array, dtype: str, requires_grad: bool, device: str, np) -> dict:
    if dtype not in TORCH_DTYPES:
        raise WireError(f"a tensor of dtype {dtype[:40]} is not plain data (numeric dtypes only)")
    if array.dtype.name != ("float32" if dtype == "bfloat16" else dtype):
        raise WireError(f"a {dtype} tensor whose values are {array.dtype.name}")
    _stored, shape, data = _encode_array(array, np)[ARRAY_TAG]
    return {TENSOR_TAG: [dtype, shape, data, bool(requires_grad), device]}


def _encode_tensor(value, torch, np) -> dict:
    try:
        if value.layout != torch.strided or getattr(value, "is_nested", False) or value.is_quantized:
            raise WireError(f"a tensor of layout {value.layout} is not plain data (dense tensors only)")
        dtype = str(value.dtype).removeprefix("torch.")
        if dtype not in TORCH_DTYPES:
            raise WireError(f"a tensor of dtype {dtype} is not plain data (numeric dtypes only)")
        if value.numel() > MAX_ITEMS:
            raise WireError(f"a tensor of {value.numel()} items is larger than {MAX_ITEMS}")
        device = str(value.device)
        if not _DEVICE.fullmatch(device):
            raise WireError(f"a tensor on device {device[:40]} is not plain data")
        data = value.detach()
        if dtype == "bfloat16":
            data = data.to(torch.float32)
        array = data.cpu().resolve_conj().resolve_neg().numpy()
        return _tensor_spec(array, dtype, value.requires_grad, device, np)
    except WireError:
        raise
    except Exception as exc:  # noqa: BLE001 - a tensor subclass or device that misbehaves is not plain data
        raise WireError(f"a tensor that cannot be read: {type(exc).__name__}: {str(exc)[:200]}") from None


def to_plain(value, depth: int = 0):
    """`value` as JSON-ready plain data; raises WireError for anything else."""
    if depth > MAX_DEPTH:
        raise WireError(f"nested deeper than {MAX_DEPTH} levels")
    numpy = sys.modules.get("numpy")
    if value is None or isinstance(value, bool | str) or (  # numpy.float64 is a float: it keeps its dtype
            isinstance(value, float) and not (numpy is not None and isinstance(value, numpy.floating))):
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
            if not isinstance(key, str) or key in TAGS:
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
        if isinstance(value, np.bool_ | np.integer | np.floating):
            return _encode_scalar(value, np)
        if isinstance(value, TensorData):
            return _tensor_spec(value.array, value.dtype, value.requires_grad, value.device, np)
        torch = sys.modules.get("torch")  # a tensor exists only where torch is imported
        if torch is not None and isinstance(value, torch.Tensor):
            return _encode_tensor(value, torch, np)
    raise WireError(f"a value of type {type(value).__name__} is not plain data")


def python_scalars(value):
    """`value` (decoded) with every numpy scalar as the Python number it holds (what hand-written hidden tests
    read)."""
    import numpy as np

    if isinstance(value, list):
        return [python_scalars(v) for v in value]
    if isinstance(value, dict):
        return {k: python_scalars(v) for k, v in value.items()}
    return value.item() if isinstance(value, np.generic) else value


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


def _decode_scalar(spec):
    if not (isinstance(spec, list) and len(spec) == 2 and isinstance(spec[0], str) and isinstance(spec[1], str)):
        raise WireError("a malformed numpy scalar")
    return _decode_array([spec[0], [], spec[1]])[()]


def _decode_tensor(spec, live: bool):
    if not (isinstance(spec, list) and len(spec) == 5 and isinstance(spec[0], str) and isinstance(spec[3], bool)
            and isinstance(spec[4], str)):
        raise WireError("a malformed tensor")
    dtype, shape, data, requires_grad, device = spec
    if dtype not in TORCH_DTYPES:
        raise WireError(f"a tensor of dtype {dtype[:40]!r} is not allowed")
    if not _DEVICE.fullmatch(device):
        raise WireError(f"a tensor on device {device[:40]!r} is not allowed")
    array = _decode_array(["float32" if dtype == "bfloat16" else dtype, shape, data])
    value = TensorData(array, dtype, requires_grad, device)
    if not live:
        return value
    try:
        return value.to_torch()
    except ImportError:
        raise WireError("a tensor, and torch is not installed here") from None
    except Exception as exc:  # noqa: BLE001 - torch refusing the values is a malformed tensor, never a crash
        raise WireError(f"a tensor torch cannot make: {type(exc).__name__}: {str(exc)[:200]}") from None


def _walk(value, depth: int, live: bool):
    if depth > MAX_DEPTH:
        raise WireError(f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, str):
        return _check_str(value)
    if isinstance(value, list):
        return [_walk(v, depth + 1, live) for v in value]
    if isinstance(value, dict):
        tags = TAGS.intersection(value)
        if tags:
            if len(value) != 1:
                raise WireError("an array, scalar or tensor tag beside other keys")
            tag = next(iter(tags))
            if tag == ARRAY_TAG:
                return _decode_array(value[tag])
            return _decode_scalar(value[tag]) if tag == SCALAR_TAG else _decode_tensor(value[tag], live)
        return {_check_str(k): _walk(v, depth + 1, live) for k, v in value.items()}
    return value


def decode(data: bytes | str, *, torch: bool = False):
    """The plain data in wire bytes; raises WireError for anything else (never another exception). Tensors
    decode as `TensorData`, or with `torch` as `torch.Tensor`s (torch is imported only when one is there)."""
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
        return _walk(value, 0, torch)
    except WireError:
        raise
    except RecursionError:
        raise WireError("nested too deeply") from None
    except (ValueError, TypeError, MemoryError) as exc:
        raise WireError(f"not plain data: {type(exc).__name__}: {str(exc)[:200]}") from None
