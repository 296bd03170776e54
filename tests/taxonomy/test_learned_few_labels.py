"""A person's first few labels train the label model: with so few, a cross-validation fold may hold one category
only, which must be skipped, not fitted (it failed `taxonomy build` after four labels given in the app)."""

from __future__ import annotations

import numpy as np

from failatlas.taxonomy.learned import LabelModel


def test_four_labels_of_two_categories_train_and_predict():
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(4, 8)).astype(np.float32)
    texts = ["The answer was prose", "The answer had no JSON", "The reply ignored the format", "The tool call broke"]
    model = LabelModel().fit(vectors, texts, ["Format", "Format", "Format", "Tool"])
    proba = model.predict_proba(vectors, texts)
    assert list(model.classes_) == ["Format", "Tool"] and proba.shape == (4, 2)
    assert np.allclose(proba.sum(axis=1), 1.0)
    assert (model.cv_predictions_ == -1).any()  # the fold that held out "Tool" trained nothing: said, not guessed
