from __future__ import annotations

import inspect
import types

import pytest

from failatlas.bench_core.prepare import function_bodies, stub_functions, stubbed_correctly
from failatlas.bench_core.prepare.stubs import StubError

SOURCE = '''"""A module with the shapes of function a masker meets."""

import functools

LIMIT = 3  # kept


def tagged(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    wrapper.tagged = True
    return wrapper


@tagged
def scale(values: list[float], factor: float = 2.0, *, clip: bool = False) -> list[float]:
    """Multiply every value by factor; clip to LIMIT if asked."""
    # a comment inside the body goes with it
    out = [v * factor for v in values]
    return [min(v, LIMIT) for v in out] if clip else out


def untouched(x):
    return x + 1


class Model:
    """Holds a weight."""

    def __init__(self, weight=1.0):
        self.weight = weight

    def predict(self, x):
        """weight * x"""
        return self.weight * x

    @property
    def doubled(self): return self.weight * 2

    @doubled.setter
    def doubled(self, value):
        self.weight = value / 2

    async def fetch(self, key: str) -> str:
        return key.upper()


def one_liner(a, b): "Add."; return a + b
'''

MASKED = ["scale", "Model.predict", "Model.doubled", "Model.fetch", "one_liner"]


def _load(source: str) -> types.ModuleType:
    module = types.ModuleType("masked_module")
    exec(compile(source, "masked_module.py", "exec"), module.__dict__)
    return module


def test_stubs_keep_signature_decorators_and_docstring() -> None:
    original, stubbed = _load(SOURCE), _load(stub_functions(SOURCE, MASKED))
    assert inspect.signature(stubbed.scale) == inspect.signature(original.scale)
    assert stubbed.scale.__doc__ == original.scale.__doc__
    assert stubbed.scale.tagged is True
    assert inspect.signature(stubbed.Model.predict) == inspect.signature(original.Model.predict)
    assert stubbed.Model.predict.__doc__ == "weight * x"
    assert inspect.iscoroutinefunction(stubbed.Model.fetch)
    assert stubbed.one_liner.__doc__ == "Add."
    assert isinstance(stubbed.Model.doubled, property)


def test_stubbed_functions_raise_not_implemented_and_the_rest_still_works() -> None:
    stubbed = _load(stub_functions(SOURCE, MASKED))
    with pytest.raises(NotImplementedError, match="scale is masked"):
        stubbed.scale([1.0])
    model = stubbed.Model(3.0)
    with pytest.raises(NotImplementedError, match="Model.predict"):
        model.predict(2)
    with pytest.raises(NotImplementedError):
        _ = model.doubled
    with pytest.raises(NotImplementedError):
        model.doubled = 4
    with pytest.raises(NotImplementedError):
        stubbed.one_liner(1, 2)
    coroutine = model.fetch("k")
    with pytest.raises(NotImplementedError):
        coroutine.send(None)
    assert stubbed.untouched(1) == 2
    assert model.weight == 3.0


def test_only_the_masked_bodies_change() -> None:
    stubbed = stub_functions(SOURCE, ["scale"])
    before, _, after = SOURCE.partition("    # a comment inside the body goes with it\n")
    assert stubbed.startswith(before.rstrip())
    assert stubbed.endswith(after.split("return [min(v, LIMIT) for v in out] if clip else out\n", 1)[1])
    assert "a comment inside the body" not in stubbed
    assert "v * factor" not in stubbed
    assert "LIMIT = 3  # kept" in stubbed
    assert stubbed_correctly(stubbed, "scale")
    assert not stubbed_correctly(stubbed, "untouched")


def test_function_bodies_exclude_docstrings() -> None:
    bodies = function_bodies(SOURCE)
    assert bodies["scale"].startswith("# a comment inside the body")
    assert "Multiply every value" not in bodies["scale"]
    assert bodies["Model.predict"] == "return self.weight * x"
    assert bodies["one_liner"] == "return a + b"
    assert "self.weight = value / 2" in bodies["Model.doubled"]
    assert bodies["tagged.<locals>.wrapper"] == "return fn(*args, **kwargs)"


def test_missing_function_is_an_error_naming_it() -> None:
    with pytest.raises(StubError, match="'Model.missing' not found in mod.py"):
        stub_functions(SOURCE, ["Model.missing"], filename="mod.py")
    with pytest.raises(StubError, match="not found"):
        stub_functions(SOURCE, ["predict"])


def test_nested_masks_are_refused() -> None:
    with pytest.raises(StubError, match="nested"):
        stub_functions(SOURCE, ["tagged", "tagged.<locals>.wrapper"])


REFERENCE_WITH_COMMENTS = '''class Encoder:
    def forward(self, x):  # the header's comment is the signature's
        """Encode x."""
        h = x.view(108, 77, 768)
        return h.mean(0)  # (108, 77, 768)
        # note: accuracy 0.913 with this pooling

    # the class's own comment, kept
    def step(self):
        # first line of the body: lr 3e-4
        return 1 ;  # after a semicolon
def one_line(): return 42  # the answer


LIMIT = 3  # module comment, kept
'''


def test_a_stub_keeps_nothing_of_the_body_not_even_its_comments() -> None:
    """A trailing comment on the body's last line (a tensor shape of the reference), comment lines after it and
    before the first statement: none survive; the header's comment, the docstring and code outside do."""
    out = stub_functions(REFERENCE_WITH_COMMENTS, ["Encoder.forward", "Encoder.step", "one_line"])
    for fragment in ("108, 77, 768", "0.913", "3e-4", "semicolon", "42", "the answer", "x.view", "mean"):
        assert fragment not in out, (fragment, out)
    for line in out.splitlines():
        if "raise NotImplementedError" in line:
            assert line.rstrip().endswith("implement it')"), line
    for kept in ("# the header's comment is the signature's", '"""Encode x."""', "# the class's own comment, kept",
                 "LIMIT = 3  # module comment, kept"):
        assert kept in out
    for name in ("Encoder.forward", "Encoder.step", "one_line"):
        assert stubbed_correctly(out, name)
    compile(out, "<stub>", "exec")
