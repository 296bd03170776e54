"""`tune_classifier` (`taxonomy build --fine-tune`): the real all-MiniLM-L6-v2 fine-tuned in memory as a
classifier of labelled statements, on the CPU; and the averaged label model that uses it."""

from __future__ import annotations

import numpy as np
import pytest

from failatlas.core.errors import InputError
from failatlas.embed import DEFAULT_MODEL, get_embedder
from failatlas.embed.tune import ClassifierTuneParams, tune_classifier
from failatlas.taxonomy.learned import FineTunedLabelModel, LabelModel
from tests.embed.test_tune import STATEMENTS

pytestmark = pytest.mark.slow
TEXTS = [t for texts in STATEMENTS.values() for t in texts]
LABELS = [label for label, texts in STATEMENTS.items() for _ in texts]


def _margin(vectors: np.ndarray) -> float:
    """Mean cosine of same-label pairs minus that of different-label pairs (unit vectors)."""
    sims = vectors @ vectors.T
    same = np.equal.outer(LABELS, LABELS) & ~np.eye(len(LABELS), dtype=bool)
    other = ~np.equal.outer(LABELS, LABELS)
    return float(sims[same].mean() - sims[other].mean())


def test_the_tuned_encoder_separates_the_labels_it_learned_and_is_deterministic():
    params = ClassifierTuneParams(epochs=6, batch_size=4, device="cpu")
    encode, done = tune_classifier(DEFAULT_MODEL, TEXTS, LABELS, params)
    tuned = encode(TEXTS)
    base = np.asarray(get_embedder(DEFAULT_MODEL, device="cpu").encode(TEXTS), dtype=np.float32)
    assert tuned.shape == base.shape and np.allclose(np.linalg.norm(tuned, axis=1), 1.0, atol=1e-4)
    assert _margin(tuned) > _margin(base) + 0.05, (_margin(base), _margin(tuned))
    assert done["steps"] == 6 * 3 and done["device"] == "cpu"
    assert done["loss_last_epoch"] < done["loss_first_epoch"]
    again, _ = tune_classifier(DEFAULT_MODEL, TEXTS, LABELS, params)
    assert np.allclose(again(TEXTS), tuned, atol=1e-5)  # the seed fixes the head, the order and the weights
    assert encode([]).shape == (0, base.shape[1])


def test_one_label_is_a_clear_error():
    with pytest.raises(InputError, match="two labels at least"):
        tune_classifier(DEFAULT_MODEL, TEXTS[:4], LABELS[:4], ClassifierTuneParams(epochs=1, device="cpu"))


def test_the_averaged_model_gives_probabilities_of_the_same_classes():
    rng = np.random.default_rng(0)
    frozen = rng.normal(size=(len(TEXTS), 8)).astype(np.float32)
    tuned_vectors = {t: rng.normal(size=8).astype(np.float32) for t in TEXTS}
    encode = lambda texts: np.stack([tuned_vectors[t] for t in texts])  # noqa: E731
    base = LabelModel().fit(frozen, TEXTS, LABELS)
    tuned = LabelModel().fit(encode(TEXTS), TEXTS, LABELS)
    model = FineTunedLabelModel(base, tuned, encode)
    proba = model.predict_proba(frozen, TEXTS)
    assert np.allclose(proba.sum(axis=1), 1.0)
    expected = 0.5 * base.predict_proba(frozen, TEXTS) + 0.5 * tuned.predict_proba(encode(TEXTS), TEXTS)
    assert np.allclose(proba, expected)
    other = LabelModel().fit(frozen[:8], TEXTS[:8], LABELS[:8])  # two of the three labels
    with pytest.raises(ValueError, match="same classes"):
        FineTunedLabelModel(base, other, encode)
