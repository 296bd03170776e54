"""The plain-data codec of the hidden-test boundary: what crosses back from the agent's process is data or a
WireError, never another exception, whatever the agent sends."""

from __future__ import annotations

import json

import numpy as np
import pytest

from failatlas.bench_core.hidden import wire


@pytest.mark.parametrize("value", [None, True, 3, -2**62, 1.5, float("nan"), "text é", [1, [2, [3]]],
                                   {"a": {"b": [1.0, "x"]}}, (1, 2)])
def test_plain_values_round_trip(value):
    got = wire.decode(wire.encode(value))
    expected = list(value) if isinstance(value, tuple) else value
    assert json.dumps(got) == json.dumps(expected)


@pytest.mark.parametrize("dtype", sorted(wire.DTYPES))
def test_numeric_arrays_round_trip_with_dtype_and_shape(dtype):
    array = (np.arange(24).reshape(2, 3, 4) % 2).astype(dtype)
    scalar = array.flat[1]
    got = wire.decode(wire.encode({"a": array, "s": scalar, "u": np.uint64(2**64 - 1)}))
    assert got["a"].dtype == np.dtype(dtype) and got["a"].shape == (2, 3, 4)
    np.testing.assert_array_equal(got["a"], array)
    assert type(got["s"]) is type(scalar) and got["s"] == scalar  # a numpy scalar keeps its dtype
    assert got["u"] == np.uint64(2**64 - 1)
    assert wire.python_scalars(got)["u"] == 2**64 - 1 and type(wire.python_scalars(got)["s"]) in (bool, int, float)


BAD = {
    "5000-digit integer": '{"x": ' + "7" * 5000 + "}",
    "400-digit integer": "[" + "1" * 400 + "]",
    "integer past 64 bits": str(2**64),
    "lone surrogate": '"\\ud800"',
    "lone surrogate key": '{"\\udc80": 1}',
    "nested 200,000 deep": "[" * 200_000 + "]" * 200_000,
    "nested 900 deep": "[" * 900 + "]" * 900,
    "object dtype": '{"__ndarray__": ["object", [1], "AA=="]}',
    "shape and data disagree": '{"__ndarray__": ["float64", [1000000], "AAAAAAAAAAA="]}',
    "negative shape": '{"__ndarray__": ["int8", [-1], ""]}',
    "huge shape": '{"__ndarray__": ["int8", [1000000, 1000000], ""]}',
    "not base64": '{"__ndarray__": ["int8", [1], "!!"]}',
    "array tag with a neighbour": '{"__ndarray__": ["int8", [0], ""], "x": 1}',
    "repeated key": '{"a": 1, "a": 2}',
    "not JSON": "{'a': 1}",
    "not UTF-8": b"\xff\xfe",
}


@pytest.mark.parametrize("label", list(BAD))
def test_bad_data_is_a_wire_error_and_nothing_else(label):
    data = BAD[label]
    with pytest.raises(wire.WireError):
        wire.decode(data.encode() if isinstance(data, str) else data)


def _nested(depth: int) -> list:
    value: list = [1]
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("value", [object(), {1: 2}, 2**70, "\ud800", np.array(["a"]), np.zeros(2, complex),
                                   _nested(40)])
def test_what_is_not_plain_data_cannot_be_encoded(value):
    with pytest.raises(wire.WireError):
        wire.encode(value)


# ------------------------------------------------------------------------------------------------ torch tensors
import torch  # noqa: E402 - scripts/setup.sh installs it (with sentence-transformers); a missing one fails


def _tensors() -> dict:
    base = torch.arange(24, dtype=torch.float64).reshape(2, 3, 4) - 7.5
    out = {dtype: base.to(getattr(torch, dtype)) for dtype in sorted(wire.TORCH_DTYPES)}
    out["scalar"] = torch.tensor(0.125, dtype=torch.float32)  # what a metric returns
    out["transposed"] = torch.arange(12.0).reshape(3, 4).T  # not contiguous
    out["grad"] = torch.linspace(-1, 1, 5).requires_grad_()
    out["empty"] = torch.zeros((0, 3), dtype=torch.int32)
    return out


def test_tensors_round_trip_with_dtype_shape_and_requires_grad():
    sent = _tensors()
    data = wire.encode(sent)
    as_data, live = wire.decode(data), wire.decode(data, torch=True)
    for name, tensor in sent.items():
        got = live[name]
        assert isinstance(got, torch.Tensor) and got.dtype == tensor.dtype and got.shape == tensor.shape, name
        assert got.requires_grad == tensor.requires_grad and got.device.type == "cpu"
        assert torch.equal(got.detach(), tensor.detach()), name
        seen = as_data[name]
        assert isinstance(seen, wire.TensorData) and seen.dtype == str(tensor.dtype).removeprefix("torch.")
        assert seen.shape == tuple(tensor.shape) and seen.requires_grad == tensor.requires_grad
        assert seen.device == "cpu"
    assert wire.encode(as_data) == data  # what the judge holds re-encodes to the same bytes


def test_a_tensor_from_a_device_this_process_lacks_is_replayed_on_the_cpu():
    data = wire.encode(torch.ones(3)).replace(b'"cpu"', b'"cuda:7"')
    assert wire.decode(data).device == "cuda:7"  # recorded as it was
    got = wire.decode(data, torch=True)
    assert got.device.type == ("cuda" if torch.cuda.device_count() > 7 else "cpu") and torch.equal(got.cpu(),
                                                                                                  torch.ones(3))


def test_decoding_tensors_as_data_never_imports_torch(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    message = wire.encode({"t": torch.ones(2, 2), "a": np.ones(3), "s": np.float32(1)})
    (tmp_path / "msg").write_bytes(message)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import wire; v = wire.decode(open(sys.argv[2], 'rb')"
            ".read()); assert type(v['t']).__name__ == 'TensorData' and v['t'].shape == (2, 2); "
            "wire.encode(v); print('torch' in sys.modules)")
    here = Path(wire.__file__).parent
    out = subprocess.run([sys.executable, "-I", "-c", code, str(here), str(tmp_path / "msg")], capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "False"


BAD_TENSORS = {
    "unknown dtype": '{"__tensor__": ["complex64", [1], "AAAAAAAAAAA=", false, "cpu"]}',
    "object dtype": '{"__tensor__": ["object", [1], "AA==", false, "cpu"]}',
    "odd device": '{"__tensor__": ["float32", [1], "AAAAAA==", false, "cuda:0;import os"]}',
    "meta device": '{"__tensor__": ["float32", [1], "AAAAAA==", false, "meta"]}',
    "requires_grad not a bool": '{"__tensor__": ["float32", [1], "AAAAAA==", 1, "cpu"]}',
    "four fields": '{"__tensor__": ["float32", [1], "AAAAAA==", false]}',
    "shape and data disagree": '{"__tensor__": ["float32", [2], "AAAAAA==", false, "cpu"]}',
    "huge shape": '{"__tensor__": ["int8", [1000000, 1000000], "", false, "cpu"]}',
    "tensor tag with a neighbour": '{"__tensor__": ["int8", [0], "", false, "cpu"], "x": 1}',
    "scalar without data": '{"__npscalar__": ["float64", ""]}',
    "scalar of object dtype": '{"__npscalar__": ["object", "AA=="]}',
    "scalar with a shape": '{"__npscalar__": ["int8", [1], "AA=="]}',
}


@pytest.mark.parametrize("live", [False, True])
@pytest.mark.parametrize("label", list(BAD_TENSORS))
def test_a_malformed_tensor_or_scalar_is_a_wire_error(label, live):
    with pytest.raises(wire.WireError):
        wire.decode(BAD_TENSORS[label].encode(), torch=live)


def test_tensors_past_the_caps_or_not_dense_numeric_are_not_plain_data(monkeypatch):
    for value in (torch.zeros(2, dtype=torch.complex64), torch.eye(3).to_sparse(), {"__tensor__": torch.ones(1)}):
        with pytest.raises(wire.WireError):
            wire.encode(value)
    monkeypatch.setattr(wire, "MAX_ITEMS", 100)
    wire.encode(torch.zeros(100))
    with pytest.raises(wire.WireError, match="larger than 100"):
        wire.encode(torch.zeros(101))
    with pytest.raises(wire.WireError, match="malformed shape"):
        wire.decode(wire.encode(torch.zeros(10)).replace(b"[10]", b"[101]"))
    monkeypatch.setattr(wire, "MAX_ITEMS", 2_000_000)
    monkeypatch.setattr(wire, "MAX_BYTES", 4096)
    with pytest.raises(wire.WireError, match="bytes is more than"):
        wire.encode([torch.zeros(1000, dtype=torch.float64)])
