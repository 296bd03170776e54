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
    got = wire.decode(wire.encode({"a": array, "s": np.float32(2.5), "i": np.int64(7), "b": np.bool_(True)}))
    assert got["a"].dtype == np.dtype(dtype) and got["a"].shape == (2, 3, 4)
    np.testing.assert_array_equal(got["a"], array)
    assert got["s"] == 2.5 and got["i"] == 7 and got["b"] is True


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
