"""Text normalisers: mask what names a task (numbers, paths, identifiers, quoted values) so that clusters
follow the kind of error rather than the task it came from.

A normaliser is any object with `name` (recorded with every cached vector, so changing one re-embeds) and
`__call__(texts) -> list[str]`. `NORMALISERS` maps names to factories.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from failatlas.core.errors import ConfigError


@runtime_checkable
class Normaliser(Protocol):
    """Rewrites texts before embedding; `name` identifies the rules (and their version) in the cache key."""

    name: str

    def __call__(self, texts: Sequence[str]) -> list[str]: ...


class IdentityNormaliser:
    """Leaves texts unchanged."""

    name = "none"

    def __call__(self, texts: Sequence[str]) -> list[str]:
        return list(texts)


# Order matters: wider spans first, so a path inside quotes becomes one quoted value.
_RULES: list[tuple[str, re.Pattern[str]]] = [
    ("<url>", re.compile(r"\b(?:https?|ftp|file)://\S+|\bwww\.\S+", re.IGNORECASE)),
    ("<code>", re.compile(r"```.*?```", re.DOTALL)),
    ("<value>", re.compile(r"`[^`\n]{1,200}`")),
    ("<value>", re.compile(r"\"[^\"\n]{1,400}\"|“[^”\n]{1,400}”")),
    ("<value>", re.compile(r"(?<![\w])'[^'\n]{1,400}'(?![\w])|‘[^’\n]{1,400}’")),
    ("<object>", re.compile(r"\{[^{}\n]{0,400}\}|\[[^\[\]\n]{0,400}\]")),
    ("<path>", re.compile(r"(?:(?<=\s)|^)(?:~|\.{1,2})?(?:/[\w.\-]+){2,}/?|\b[A-Za-z]:\\[\w\\.\-]+")),
    (
        "<path>",
        re.compile(
            r"\b[\w\-]+(?:/[\w\-]+)*\.(?:py|ipynb|json|jsonl|csv|tsv|txt|md|yaml|yml|toml|sh|log|pdf|"
            r"xlsx?|docx?|pptx?|png|jpe?g|zip|tar|gz|pt|pth|ckpt|h5|pkl|npy|html?|xml|mp3|mp4)\b"
        ),
    ),
    (
        "<id>",
        re.compile(r"\b[0-9a-f]{8,}\b|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"),
    ),
    # snake_case, dotted.names, camelCase, inner-capital CamelCase: names code defines, not English words
    ("<id>", re.compile(r"\b[A-Za-z_][A-Za-z0-9]*(?:_[A-Za-z0-9]+|\.[A-Za-z0-9]{2,})+(?:\(\))?\b")),
    # error class names (KeyError, TimeoutException) say what went wrong: they stay
    (
        "<id>",
        re.compile(
            r"\b(?![A-Za-z]*(?:Error|Exception|Warning|Exit|Interrupt)\b)"
            r"(?:[a-z]+[A-Z][A-Za-z0-9]*|[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*)\b"
        ),
    ),
    ("<num>", re.compile(r"(?<![\w<])[-+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?%?(?![\w>])", re.IGNORECASE)),
    ("<num>", re.compile(r"\b\d+[A-Za-z]+\b|\b[A-Za-z]+\d+[A-Za-z0-9]*\b")),
]
_REPEATS = re.compile(r"(<(?:url|code|value|object|path|id|num)>)(?:[\s,;]*\1)+")
_SPACES = re.compile(r"[ \t]+")


class MaskNormaliser:
    """Masks URLs, code, quoted values, bracketed literals, paths, hex ids, code identifiers and numbers
    with placeholders such as `<value>` and `<num>`; runs of the same placeholder collapse into one."""

    version = 1

    def __init__(self) -> None:
        self.name = f"mask-v{self.version}"

    def normalise_one(self, text: str) -> str:
        for placeholder, pattern in _RULES:
            if placeholder == "<object>":  # innermost brackets first, outwards, for nested literals
                previous = None
                while previous != text:
                    previous, text = text, pattern.sub(placeholder, text)
            else:
                text = pattern.sub(placeholder, text)
        text = _REPEATS.sub(r"\1", text)
        return _SPACES.sub(" ", text).strip()

    def __call__(self, texts: Sequence[str]) -> list[str]:
        return [self.normalise_one(t) for t in texts]


NORMALISERS: dict[str, Callable[[], Normaliser]] = {
    "none": IdentityNormaliser,
    "mask": MaskNormaliser,
}


def get_normaliser(name: str | bool | None) -> Normaliser:
    """The normaliser registered as `name` (`True` means "mask", `False`/`None` means "none").

    Raises ConfigError for an unknown name."""
    if name is True:
        name = "mask"
    if name is False or name is None:
        name = "none"
    try:
        return NORMALISERS[name]()
    except KeyError:
        raise ConfigError(
            f"unknown normaliser {name!r}", hint=f"choose one of {sorted(NORMALISERS)}"
        ) from None


def normaliser_named(recorded: str | None) -> Normaliser:
    """The normaliser whose `name` is `recorded` (as stored in `embedding_sets.normalisation`, e.g. 'mask-v1');
    'none' or None leaves texts unchanged. Raises ConfigError for a name this build does not know."""
    if recorded in (None, "none"):
        return IdentityNormaliser()
    for factory in NORMALISERS.values():
        normaliser = factory()
        if normaliser.name == recorded:
            return normaliser
    raise ConfigError(f"unknown text normaliser '{recorded}'", hint="re-embed with a normaliser this build knows")
