"""benchmarks/taxonomy_names.py --abstain (issue 53, measured and not shipped): the switch must make the label model
abstain exactly where its rule says, and leave the sure statements as the shipped model has them, or the rows
measured with it say nothing about the rule."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import taxonomy_names  # noqa: E402

from failatlas.taxonomy.learned import LabelModel  # noqa: E402

WORDS = {"Format": ["json", "braces", "schema", "quoted"], "Tool": ["search", "browser", "lookup", "crawler"],
         "Plan": ["plan", "steps", "order", "outline"]}


def _rows(rng: np.random.Generator) -> tuple[np.ndarray, list[str], list[str]]:
    """60 labelled statements of three categories, each with its words and a vector near its own direction, and
    one in nine given another category's words (the disagreements a cross-validation finds wrong)."""
    names = sorted(WORDS)
    texts, labels, vectors = [], [], []
    for k in range(60):
        label = names[k % 3]
        said = names[(k + 1) % 3] if k % 9 == 0 else label
        texts.append(f"the {rng.choice(WORDS[said])} went wrong with {rng.choice(WORDS[said])}")
        labels.append(label)
        vectors.append(np.eye(8)[names.index(said)] + rng.normal(scale=0.3, size=8))
    return np.asarray(vectors, dtype=np.float32), texts, labels


@pytest.fixture
def restore(monkeypatch: pytest.MonkeyPatch) -> None:
    """The switch patches LabelModel for the whole process, as the benchmark wants: put it back afterwards."""
    monkeypatch.setattr(LabelModel, "fit", LabelModel.fit)
    monkeypatch.setattr(LabelModel, "predict_proba", LabelModel.predict_proba)


def test_a_fixed_margin_evens_out_only_the_torn_statements(restore: None) -> None:
    rng = np.random.default_rng(0)
    vectors, texts, labels = _rows(rng)
    shipped = LabelModel().fit(vectors, texts, labels)
    torn_text = "the json went wrong with search"
    torn = (np.eye(8)[0] + np.eye(8)[2]).astype(np.float32)[None] / np.sqrt(2)
    clear = np.eye(8, dtype=np.float32)[[1]]
    before = shipped.predict_proba(np.vstack([torn, clear]), [torn_text, "the plan went wrong with steps"])
    ranked = np.sort(before, axis=1)
    gap = ranked[:, -1] - ranked[:, -2]
    assert gap[0] < 0.5 <= gap[1]  # the data makes one torn and one sure statement

    taxonomy_names.abstaining("0.5")
    model = LabelModel().fit(vectors, texts, labels)
    after = model.predict_proba(np.vstack([torn, clear]), [torn_text, "the plan went wrong with steps"])
    assert np.allclose(after[0], 1 / 3)  # even: below the build's 0.2 threshold for k >= 6, here 1/3
    assert np.allclose(after[1], before[1])  # a sure statement keeps the shipped model's probabilities


def test_a_calibrated_margin_needs_enough_mistakes_to_tell_where_they_sit(restore: None) -> None:
    vectors, texts, labels = _rows(np.random.default_rng(1))
    taxonomy_names.abstaining("calibrated")
    model = LabelModel().fit(vectors, texts, labels)
    wrong = int((model.cv_predictions_ != model.cv_truth_)[model.cv_predictions_ >= 0].sum())
    assert wrong >= 10 and 0.0 < model.abstain_margin_ < 1.0  # 60 rows, 10 or more wrong: calibrated
    few = LabelModel().fit(vectors[:45], texts[:45], labels[:45])
    assert few.abstain_margin_ == 0.0  # under 50 rows: too few to tell where the mistakes sit, no abstention


def test_agree_abstains_where_the_nearest_labelled_statements_name_another_category(restore: None) -> None:
    vectors, texts, labels = _rows(np.random.default_rng(1))
    # words of "Tool" on a vector among the "Plan" statements, and a statement both read as "Plan"
    probe_texts = ["the search went wrong with lookup", "the plan went wrong with steps"]
    probe = np.eye(8, dtype=np.float32)[[1, 1]]
    shipped = LabelModel().fit(vectors, texts, labels).predict_proba(probe, probe_texts)
    taxonomy_names.abstaining("agree")
    model = LabelModel().fit(vectors, texts, labels)
    after = model.predict_proba(probe, probe_texts)
    nearest = model.classes_[(probe[:1] / np.linalg.norm(probe[:1]) @ model.abstain_protos_.T).argmax(axis=1)]
    assert list(nearest) == ["Plan"]
    assert model.classes_[shipped[1].argmax()] == "Plan" and np.allclose(after[1], shipped[1])  # both agree: kept
    if model.classes_[shipped[0].argmax()] == "Plan":
        assert np.allclose(after[0], shipped[0])
    else:  # the model reads the words, the nearest labelled statements the vector: it abstains
        assert np.allclose(after[0], 1 / 3)
