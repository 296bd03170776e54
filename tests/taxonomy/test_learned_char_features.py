"""The label model reads a cue in another form of its word: TRAIL's labels often hinge on one word the sentence
embedding blurs ('formatted', 'formatting'), and word TF-IDF sees two forms as two unrelated words (issue 41)."""

from __future__ import annotations

import numpy as np

from failatlas.taxonomy.learned import LabelModel

TRAIN = {
    "Formatting Errors": ["output formatted wrongly", "answer formatted as prose", "formatted reply rejected"],
    "Poor Information Retrieval": ["searched one site only", "searched too briefly", "searched without refining"],
}


def _fit(**params: float) -> tuple[LabelModel, list[str]]:
    texts = [t for rows in TRAIN.values() for t in rows]
    labels = [label for label, rows in TRAIN.items() for _ in rows]
    vectors = np.zeros((len(texts), 8), dtype=np.float32)  # an embedding that tells nothing apart
    return LabelModel(**params).fit(vectors, texts, labels), ["reformatting needed", "searching stopped"]


def test_another_form_of_the_cue_word_decides_the_category():
    model, unseen = _fit()
    proba = model.predict_proba(np.zeros((2, 8), dtype=np.float32), unseen)
    assert list(model.classes_[proba.argmax(axis=1)]) == ["Formatting Errors", "Poor Information Retrieval"]


def test_words_alone_cannot_tell_them_apart():
    model, unseen = _fit(char_weight=0.0)
    proba = model.predict_proba(np.zeros((2, 8), dtype=np.float32), unseen)
    assert np.allclose(proba[0], proba[1])  # no word in common with the training rows: the same guess for both
