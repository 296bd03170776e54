"""Class-based TF-IDF (c-TF-IDF): the terms that set one group of insights apart from the other groups.

Pure over lists of texts and integer labels; scikit-learn does the tokenising.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# Words that describe every failure in this domain and so name none of them.
_DOMAIN_WORDS = """
    agent system model llm assistant failed fails failure error errors did does instead used using
    use step steps task tasks trace span correctly properly incorrectly despite leading resulting
    result actually attempted attempt tried required requires expected provided provide given like
    just make made way tool tools output didn doesn don wasn isn weren couldn wouldn shouldn hasn
    haven
"""
DOMAIN_STOP_WORDS = frozenset(_DOMAIN_WORDS.split())


def _stop_words() -> list[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return sorted(ENGLISH_STOP_WORDS | DOMAIN_STOP_WORDS)


def class_tfidf(
    texts: Sequence[str],
    labels: Sequence[int] | np.ndarray,
    *,
    top_n: int = 10,
    ngram_range: tuple[int, int] = (1, 2),
    min_df: int = 1,
) -> dict[int, list[tuple[str, float]]]:
    """For each label, its `top_n` terms by c-TF-IDF score (best first), computed against the other labels.

    Score of term t in class c: tf(t, c) / |c| * log(1 + A / tf(t)), where A is the mean word count per class
    and tf(t) the term's frequency over all classes (BERTopic's definition). Terms of one character, terms
    starting with a digit and id-like terms (a word with three or more digits) are dropped. Labels with no
    usable terms get an empty list.
    """
    from sklearn.feature_extraction.text import CountVectorizer

    labels = np.asarray(labels)
    classes = sorted({int(x) for x in labels})
    docs = [" ".join(t for t, lab in zip(texts, labels, strict=True) if lab == c) for c in classes]
    vectorizer = CountVectorizer(
        ngram_range=ngram_range,
        stop_words=_stop_words(),
        min_df=min_df,
        token_pattern=r"(?u)\b[a-zA-Z_][a-zA-Z0-9_\-]+\b",
        lowercase=True,
    )
    try:
        counts = vectorizer.fit_transform(docs).toarray().astype(float)
    except ValueError:  # every document empty after stop words
        return {c: [] for c in classes}
    vocab = vectorizer.get_feature_names_out()
    words_per_class = counts.sum(axis=1, keepdims=True)
    tf = counts / np.maximum(words_per_class, 1.0)
    mean_words = max(float(words_per_class.mean()), 1.0)
    idf = np.log1p(mean_words / np.maximum(counts.sum(axis=0), 1.0))
    scores = tf * idf
    out: dict[int, list[tuple[str, float]]] = {}
    for row, c in enumerate(classes):
        order = np.argsort(-scores[row], kind="stable")
        terms = [
            (str(vocab[j]), float(scores[row, j]))
            for j in order[: top_n * 4]
            if scores[row, j] > 0 and not _looks_like_an_id(str(vocab[j]))
        ]
        out[c] = _drop_redundant(terms)[:top_n]
    return out


def _looks_like_an_id(term: str) -> bool:
    """Hashes, file ids and version strings ('a649-393859e79bf3') name no failure."""
    return any(sum(ch.isdigit() for ch in word) >= 3 for word in term.split())


def _singular(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _drop_redundant(terms: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """Drop a unigram when a better-ranked term already contains it (plurals count as the same word), so
    keywords say more in fewer slots."""
    kept: list[tuple[str, float]] = []
    seen_words: set[str] = set()
    for term, score in terms:
        words = [_singular(w) for w in term.split()]
        if len(words) == 1 and words[0] in seen_words:
            continue
        if len(words) > 1 and all(w in seen_words for w in words):
            continue
        kept.append((term, score))
        seen_words.update(words)
    return kept
