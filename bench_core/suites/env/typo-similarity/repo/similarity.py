"""String similarity of a word and its typo, with the `textdistance` package (PyPI; not in the base image)."""

import textdistance


def typo_similarity(word: str, typo: str) -> float:
    """The normalised Levenshtein similarity of `word` and `typo`, between 0 (nothing in common) and 1 (equal):
    `textdistance.levenshtein.normalized_similarity`."""
    return float(textdistance.levenshtein.normalized_similarity(word, typo))


def mean_similarity(pairs: list[tuple[str, str]]) -> float:
    """The mean `typo_similarity` over `pairs`."""
    return sum(typo_similarity(w, t) for w, t in pairs) / len(pairs)
