"""The comparison of a masked function's results with the reference's: `check(case, got)` says where what a call
gave (`got`: its return value or that it returned the instance, the instance's attributes after, the arguments it
changed in place) first differs from what the reference's recorded call gave (`case`), in words, or None.

Numbers within RTOL/ATOL, integers, booleans and strings exactly; arrays and tensors (`wire.TensorData`: this
never imports torch) elementwise by the same rule, their shapes and dtypes equal, NaN matching only NaN; a numpy
scalar by its value, as the Python number it holds. `first_difference` compares any two plain values so.

One rule in two places: copied beside the hidden-test judge as `failatlas_compare.py` (the derived tests' replay,
`replay.py`), and imported by scoring, which compares the calls observed in E's own re-run (`observe.py`). So it
imports the standard library, numpy and the wire codec only, under whichever name it has where it runs.
"""

import math

import numpy as np

try:  # beside the judge, the worker's codec is `failatlas_wire`
    import failatlas_wire as wire
except ImportError:  # imported by scoring, from the package
    from failatlas.bench_core.hidden import wire

RTOL, ATOL = 1e-6, 1e-8


def _show(value) -> str:
    if isinstance(value, np.ndarray):
        return f"array {value.dtype.name}{list(value.shape)}"
    if isinstance(value, wire.TensorData):
        return f"tensor {value.dtype}{list(value.shape)}"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _numeric(value) -> bool:
    return isinstance(value, int | float | np.integer | np.floating | np.ndarray) and not isinstance(value, bool) \
        and (not isinstance(value, np.ndarray) or value.dtype.kind in "iuf")


def _close(want, have):
    """Elementwise `math.isclose(have, want, rel_tol=RTOL, abs_tol=ATOL)`, and NaN where both are NaN."""
    with np.errstate(all="ignore"):
        want, have = want.astype(np.float64), have.astype(np.float64)
        bound = np.maximum(RTOL * np.maximum(np.abs(want), np.abs(have)), ATOL)
        return (want == have) | (np.abs(have - want) <= bound) | (np.isnan(want) & np.isnan(have))


def _array_difference(want, have, where: str) -> str | None:
    if want.shape != have.shape:
        return f"{where}: expected shape {list(want.shape)}, got {list(have.shape)}"
    exact = "b" in (want.dtype.kind, have.dtype.kind) or (want.dtype.kind in "iu" and have.dtype.kind in "iu")
    bad = np.argwhere(want != have) if exact else np.argwhere(~_close(want, have))
    if len(bad):
        at = tuple(int(i) for i in bad[0])
        return (f"{where}{list(at) if at else ''}: expected {want[at].item()!r}, got {have[at].item()!r} "
                f"({len(bad)} of {want.size} values differ)")
    return None


def _as_array(value):
    try:
        out = np.asarray(value)
    except (ValueError, TypeError):
        return None
    return out if out.dtype.kind in "iufb" else None


def first_difference(expected, got, where: str) -> str | None:
    """Where `got` first differs from `expected` (the reference's), in words; None when it matches."""
    if isinstance(expected, wire.TensorData):
        if not isinstance(got, wire.TensorData):
            return f"{where}: expected {_show(expected)}, got {_show(got)}"
        if got.dtype != expected.dtype:
            return f"{where}: expected a {expected.dtype} tensor, got {got.dtype}"
        return _array_difference(expected.array, got.array, where)
    if isinstance(expected, np.ndarray):
        if not isinstance(got, np.ndarray):
            return f"{where}: expected {_show(expected)}, got {_show(got)}"
        if got.dtype != expected.dtype:
            return f"{where}: expected a {expected.dtype.name} array, got {got.dtype.name}"
        return _array_difference(expected, got, where)
    if isinstance(got, np.ndarray) and isinstance(expected, list):
        want, have = _as_array(expected), _as_array(got)
        if want is None or have is None:
            return f"{where}: expected {_show(expected)}, got {_show(got)}"
        return _array_difference(want, have, where)
    if isinstance(expected, np.generic):  # a numpy scalar, compared as the Python number it holds
        expected = expected.item()
    if isinstance(got, np.generic):
        got = got.item()
    if isinstance(expected, bool) or expected is None or isinstance(expected, str):
        same = type(got) is type(expected) and got == expected
        return None if same else f"{where}: expected {_show(expected)}, got {_show(got)}"
    if isinstance(expected, int):
        ok = _numeric(got) and not isinstance(got, np.ndarray) and got == expected
        return None if ok else f"{where}: expected {expected!r}, got {_show(got)}"
    if isinstance(expected, float):
        if not _numeric(got) or isinstance(got, np.ndarray):
            return f"{where}: expected {expected!r}, got {_show(got)}"
        if math.isnan(expected) and math.isnan(got):
            return None
        ok = math.isclose(got, expected, rel_tol=RTOL, abs_tol=ATOL)
        return None if ok else f"{where}: expected {expected!r}, got {got!r}"
    if isinstance(expected, list):
        if not isinstance(got, list):
            return f"{where}: expected a list of {len(expected)}, got {_show(got)}"
        if len(got) != len(expected):
            return f"{where}: expected {len(expected)} items, got {len(got)}"
        for i, (e, g) in enumerate(zip(expected, got, strict=True)):
            found = first_difference(e, g, f"{where}[{i}]")
            if found:
                return found
        return None
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            return f"{where}: expected a dict, got {_show(got)}"
        found = keys_difference(expected, got, f"{where}.")
        if found:
            return found
        extra = sorted(set(got) - set(expected))
        return f"{where}: unexpected keys {extra[:5]}" if extra else None
    return f"{where}: the reference's value {_show(expected)} cannot be compared"


def check(case: dict, got) -> str | None:
    """The first difference between the agent's reply to `case` and the reference's, or None."""
    if not isinstance(got, dict):
        return f"the reply {_show(got)} is not the replay's"
    if case["self"] and got.get("self") is not True:
        return "the return value: expected the instance itself"
    if not case["self"]:
        if got.get("self") is True:
            return "the return value: expected a value, got the instance itself"
        found = first_difference(case["ret"], got.get("ret"), "the return value")
        if found:
            return found
    found = _mutated_difference(case.get("mutated") or {}, got.get("mutated"))
    if found:
        return found
    if case["kind"] != "method":
        return None
    after, have = case.get("after") or {}, got.get("after")
    if not isinstance(have, dict):
        return "the instance's attributes did not come back"
    return keys_difference(after, have, "attribute ", missing="not set")


def keys_difference(expected: dict, got: dict, prefix: str, *, missing: str = "missing") -> str | None:
    """Where `got` first differs from `expected` on `expected`'s keys, each named `prefix` + key (`got` may hold
    more keys); None when it matches."""
    for key in expected:
        if key not in got:
            return f"{prefix}{key}: {missing}"
        found = first_difference(expected[key], got[key], f"{prefix}{key}")
        if found:
            return found
    return None


def _mutated_difference(want: dict, have) -> str | None:
    """The first argument the reference changed in place that the agent's call left different (None: none)."""
    if not want.get("args") and not want.get("kwargs"):
        return None
    if not isinstance(have, dict):
        return "the arguments after the call did not come back"
    for part, word in (("args", "argument"), ("kwargs", "keyword argument")):
        mine = have.get(part) if isinstance(have.get(part), dict) else {}
        for key, value in (want.get(part) or {}).items():
            if key not in mine:
                return f"{word} {key} after the call: missing"
            found = first_difference(value, mine[key], f"{word} {key} after the call")
            if found:
                return found
    return None
