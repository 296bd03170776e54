"""Seeded word pairs: a random lower-case word and the same word with one letter replaced by another."""

import random
import string


def make_pairs(n: int, length: int, seed: int = 0) -> list[tuple[str, str]]:
    """`n` (word, typo) pairs of words of `length` letters; each typo differs from its word in one position."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        word = "".join(rng.choice(string.ascii_lowercase) for _ in range(length))
        pos = rng.randrange(length)
        letter = rng.choice([c for c in string.ascii_lowercase if c != word[pos]])
        pairs.append((word, word[:pos] + letter + word[pos + 1:]))
    return pairs
