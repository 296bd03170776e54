"""How a derived test compares the agent's reply with the reference's recorded one (`hidden/compare.py`, run in the
judge process beside `replay.py`, and by scoring for the calls observed in E's re-run): tensors and arrays
elementwise within the replay's tolerance, shapes and dtypes equal, NaN only where both are NaN; numpy scalars by
value."""

from __future__ import annotations

import numpy as np
import pytest

from failatlas.bench_core.hidden import compare, wire


def _tensor(values, dtype="float32") -> wire.TensorData:
    return wire.TensorData(np.asarray(values, dtype="float32" if dtype == "bfloat16" else dtype), dtype)


def _case(ret) -> dict:
    return {"self": False, "kind": "function", "ret": wire.decode(wire.encode(ret))}


def _reply(ret) -> dict:  # as the fixture hands it over: decoded, numpy scalars as Python numbers
    return wire.python_scalars(wire.decode(wire.encode({"self": False, "ret": ret, "after": None})))


EXPECTED = [_tensor(0.3125), _tensor([[1.0, -2.0], [np.nan, 1e-3]], "float64"), np.float32(0.5), np.arange(3.0)]


@pytest.mark.parametrize(("label", "got"), [
    ("the same", EXPECTED),
    ("within rtol", [_tensor(0.3125 * (1 + 5e-7)), _tensor([[1.0, -2.0 * (1 + 5e-7)], [np.nan, 1e-3]], "float64"),
                     np.float32(0.5), np.arange(3.0) + 1e-9]),
    ("a Python float for a numpy scalar", [*EXPECTED[:2], 0.5, EXPECTED[3]]),
])
def test_within_the_tolerance_passes(label, got):
    assert compare.check(_case(EXPECTED), _reply(got)) is None, label


@pytest.mark.parametrize(("label", "got", "says"), [
    ("a metric off by 1e-4", [_tensor(0.3125 * (1 + 1e-4)), *EXPECTED[1:]], "the return value[0]: expected 0.3125"),
    ("NaN where a number is", [EXPECTED[0], _tensor([[1.0, -2.0], [np.nan, np.nan]], "float64"), *EXPECTED[2:]],
     "[1][1, 1]"),
    ("a number where NaN is", [EXPECTED[0], _tensor([[1.0, -2.0], [0.0, 1e-3]], "float64"), *EXPECTED[2:]],
     "[1][1, 0]"),
    ("another dtype", [_tensor(0.3125, "float64"), *EXPECTED[1:]], "expected a float32 tensor, got float64"),
    ("another shape", [_tensor([0.3125]), *EXPECTED[1:]], "expected shape [], got [1]"),
    ("an array for a tensor", [np.float32(0.3125), *EXPECTED[1:]], "expected tensor float32[], got 0.3125"),
    ("a float32 array for a float64 one", [*EXPECTED[:3], np.arange(3.0, dtype="float32")],
     "expected a float64 array, got float32"),
    ("a scalar off", [*EXPECTED[:2], np.float32(0.75), EXPECTED[3]], "[2]: expected 0.5, got 0.75"),
])
def test_past_the_tolerance_or_of_another_kind_fails(label, got, says):
    found = compare.check(_case(EXPECTED), _reply(got))
    assert found is not None and says in found, (label, found)
