"""Functions located by their lines (AutoExperiment names methods without their class), stubbed with a given
docstring."""

from __future__ import annotations

import ast
import inspect
import types

import pytest

from failatlas.bench_core.prepare.stubs import (
    Stubbed,
    StubError,
    StubTarget,
    find_functions,
    masked_entry,
    parse_masked_entry,
    stub_functions,
    stub_targets,
    stubbed_correctly,
    target_bodies,
)

SOURCE = '''import functools


class Encoder:
    def __init__(self, scale):
        self.scale = scale

    def forward(self, x):
        """Encode x."""
        # doubles, then scales
        return [2 * v * self.scale for v in x]


class Decoder:
    def __init__(self, shift):
        self.shift = shift

    @functools.lru_cache(maxsize=None)
    def forward(self, x):
        return x - self.shift

    @property
    def level(self):
        return self.shift

    @level.setter
    def level(self, value):
        self.shift = value + 1000


if True:
    def guarded(a):
        return a * 31337
'''
# 1-based lines in SOURCE
ENCODER_FORWARD = (8, 11)
DECODER_DECORATOR, DECODER_FORWARD = 18, (19, 20)
LEVEL_SETTER = (26, 28)


def _load(source: str) -> types.ModuleType:
    module = types.ModuleType("by_lines")
    exec(compile(source, "by_lines.py", "exec"), module.__dict__)
    return module


def _function(source: str, qualname: str) -> ast.FunctionDef:
    (node,) = find_functions(ast.parse(source), qualname)
    return node


def test_the_source_lines_are_where_the_test_says() -> None:
    lines = SOURCE.splitlines()
    assert lines[ENCODER_FORWARD[0] - 1].strip().startswith("def forward")
    assert lines[DECODER_DECORATOR - 1].strip().startswith("@functools")
    assert lines[DECODER_FORWARD[0] - 1].strip().startswith("def forward")
    assert lines[LEVEL_SETTER[0] - 1].strip() == "@level.setter"


def test_two_methods_of_one_name_are_each_found_by_their_own_lines() -> None:
    only_decoder = stub_targets(SOURCE, [StubTarget("forward", *DECODER_FORWARD)], filename="m.py")
    assert only_decoder.stubbed == [Stubbed("Decoder.forward")] and only_decoder.notes == []
    module = _load(only_decoder.source)
    assert module.Encoder(1).forward([1, 2]) == [2, 4]
    with pytest.raises(NotImplementedError, match="Decoder.forward is masked"):
        module.Decoder(1).forward(3)
    assert "x - self.shift" not in only_decoder.source and "2 * v * self.scale" in only_decoder.source

    only_encoder = stub_targets(SOURCE, [StubTarget("forward", *ENCODER_FORWARD)], filename="m.py")
    assert only_encoder.stubbed == [Stubbed("Encoder.forward")]
    module = _load(only_encoder.source)
    assert module.Decoder(1).forward(3) == 2
    with pytest.raises(NotImplementedError, match="Encoder.forward is masked"):
        module.Encoder(1).forward([1])


def test_a_decorator_line_locates_its_function() -> None:
    result = stub_targets(SOURCE, [StubTarget("forward", DECODER_DECORATOR, DECODER_FORWARD[1])])
    assert result.stubbed == [Stubbed("Decoder.forward")]
    assert "@functools.lru_cache(maxsize=None)\n    def forward(self, x):" in result.source


def test_lines_that_hold_another_function_are_refused_naming_file_line_and_names() -> None:
    with pytest.raises(StubError) as err:
        stub_targets(SOURCE, [StubTarget("__init__", *DECODER_FORWARD)], filename="pkg/m.py")
    assert str(err.value) == ("pkg/m.py line 19 defines 'Decoder.forward', not '__init__': the lines given point at "
                              "another function")
    with pytest.raises(StubError, match=r"pkg/m.py lines 31-33: no function named 'forward' \(there: guarded\)"):
        stub_targets(SOURCE, [StubTarget("forward", 31, 33)], filename="pkg/m.py")
    with pytest.raises(StubError, match="no function named 'forward'$"):
        stub_targets(SOURCE, [StubTarget("forward", 1, 2)], filename="pkg/m.py")


def test_lines_that_drifted_find_the_one_function_of_that_name_with_a_note() -> None:
    # AutoExperiment's rows for 2303.11932's losses.py start some functions at their class line.
    result = stub_targets(SOURCE, [StubTarget("forward", 14, 20)], filename="m.py")
    assert result.stubbed == [Stubbed("Decoder.forward")]
    assert result.notes == ["Decoder.forward in m.py is at lines 18-20, not 14-20 as given: located by its name "
                            "within those lines"]
    with pytest.raises(StubError, match="lines 4-20: 2 functions named 'forward'"):
        stub_targets(SOURCE, [StubTarget("forward", 4, 20)], filename="m.py")


def test_without_lines_the_qualname_is_used() -> None:
    assert stub_targets(SOURCE, [StubTarget("Decoder.forward")]).stubbed == [Stubbed("Decoder.forward")]
    with pytest.raises(StubError, match="'forward' not found"):
        stub_targets(SOURCE, [StubTarget("forward")])
    assert stubbed_correctly(stub_functions(SOURCE, ["guarded"]), "guarded")  # found inside an `if` block


def test_one_of_two_same_named_definitions_is_reported_by_its_occurrence() -> None:
    result = stub_targets(SOURCE, [StubTarget("level", *LEVEL_SETTER)], filename="m.py")
    assert result.stubbed == [Stubbed("Decoder.level", 2)]
    entry = masked_entry("m.py", result.stubbed[0])
    assert entry == "m.py::Decoder.level#2" and parse_masked_entry(entry) == ("m.py", "Decoder.level", 2)
    assert parse_masked_entry("m.py::Decoder.forward") == ("m.py", "Decoder.forward", None)
    assert stubbed_correctly(result.source, "Decoder.level", 2)
    assert not stubbed_correctly(result.source, "Decoder.level", 1)
    assert not stubbed_correctly(result.source, "Decoder.level")
    decoder = _load(result.source).Decoder(5)
    assert decoder.level == 5
    with pytest.raises(NotImplementedError):
        decoder.level = 1


def test_target_bodies_hold_only_the_located_definition() -> None:
    bodies = target_bodies(SOURCE, [StubTarget("forward", *DECODER_FORWARD), StubTarget("level", *LEVEL_SETTER)])
    assert bodies == {"Decoder.forward": "return x - self.shift", "Decoder.level#2": "self.shift = value + 1000"}


DESCRIPTIONS = [
    'Encode x with """triple quotes""", a back\\slash, \\n and \\""" and naïve “unicode” ✓.',
    'Ends with a quote: "x"',
    "Several lines.\n\n:param x: the input\n    indented detail\n:return: a list \\\\ of \"\"\"",
    "Controls\x00\x07\x1b and separators\u2028 \x85 and\ta tab\r\nand a CRLF",
    '"""',
    "\\",
]


@pytest.mark.parametrize("description", DESCRIPTIONS)
def test_the_description_becomes_the_docstring_whatever_it_holds(description: str) -> None:
    result = stub_targets(SOURCE, [StubTarget("forward", *ENCODER_FORWARD, docstring=description),
                                   StubTarget("guarded", 32, 33, docstring=description)], filename="m.py")
    compile(result.source, "m.py", "exec", dont_inherit=True)
    expected = inspect.cleandoc(description.replace("\r\n", "\n"))
    for qualname in ("Encoder.forward", "guarded"):
        node = _function(result.source, qualname)
        assert ast.get_docstring(node) == expected
        assert stubbed_correctly(result.source, qualname)
    assert "Encode x." not in result.source  # the original docstring is replaced
    assert "doubles, then scales" not in result.source  # and the comments of the body go with it
    module = _load(result.source)
    assert inspect.cleandoc(module.Encoder.forward.__doc__) == expected
    with pytest.raises(NotImplementedError):
        module.guarded(1)


def test_a_one_line_function_gets_the_description_too() -> None:
    source = "class K:\n    def f(self): return 42 + 1234567\n"
    result = stub_targets(source, [StubTarget("f", 2, 2, docstring='Return "the answer"')])
    assert ast.get_docstring(_function(result.source, "K.f")) == 'Return "the answer"'
    assert "1234567" not in result.source
    with pytest.raises(NotImplementedError):
        _load(result.source).K().f()


def test_the_stubbed_file_keeps_everything_else_byte_for_byte() -> None:
    result = stub_targets(SOURCE, [StubTarget("forward", *ENCODER_FORWARD, docstring="New doc.")])
    before = SOURCE.split("    def forward(self, x):\n", 1)[0]
    after = SOURCE.split("return [2 * v * self.scale for v in x]\n", 1)[1]
    assert result.source == (before + '    def forward(self, x):\n        """New doc."""\n'
                             "        raise NotImplementedError('Encoder.forward is masked: implement it')\n" + after)
