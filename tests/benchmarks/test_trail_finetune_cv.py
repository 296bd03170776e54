"""benchmarks/trail_finetune_cv.py (issue 41, fourth pass): `prepare` deals the same folds as trail_label_cv.py
and the two held-out directions, from the real TRAIL GAIA file, and writes a half-precision model copy that encodes
as the packaged model does; `score`'s regression is the label model's."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import quality_trail as qt  # noqa: E402
import trail_finetune_cv as ft  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    assert (shared_data / "trail" / "trail_errors_gaia.jsonl").is_file()
    folder = tmp_path_factory.mktemp("finetune")
    ft.prepare(folder)
    return folder


def test_folds_cover_each_half_once_per_shuffle_and_each_example_trains_in_four_of_five(prepared):
    from failatlas.taxonomy.learned import read_examples, training_set
    from failatlas.taxonomy.seeding import load_seed

    folds = json.loads((prepared / "cv.json").read_text())
    assert len(folds) == 2 * 2 * 5
    data = qt.read_trail(qt.DEFAULT_DATA)
    seed_texts = Counter(training_set(load_seed("trail"), [], [], "other")[0].texts)
    for h in (0, 1):
        n_examples = len(read_examples([prepared / f"half{h}.jsonl"]))
        every = {r["description"] for r in data.rows if qt.trace_half(r["trace_id"]) == h
                 and r["description"] is not None}
        for rep in (0, 1):
            mine = [f for f in folds if f["half"] == h and f["rep"] == rep]
            assert {t for f in mine for t in f["test_texts"]} == every
            trained = 0
            for f in mine:
                assert len(f["train_texts"]) == len(f["train_labels"]) and len(f["test_texts"]) == len(f["truth"])
                assert not seed_texts - Counter(f["train_texts"])  # the seed's rows train in every fold
                trained += len(f["train_texts"]) - seed_texts.total()
            assert trained == 4 * n_examples  # each example held out in exactly one fold
    held = json.loads((prepared / "heldout.json").read_text())
    assert [h["half"] for h in held] == ["0 -> 1", "1 -> 0"]
    for item, (train_half, test_half) in zip(held, ((0, 1), (1, 0)), strict=True):
        test = {r["description"] for r in data.rows if qt.trace_half(r["trace_id"]) == test_half
                and r["description"] is not None}
        assert set(item["test_texts"]) == test
        n_train = len(read_examples([prepared / f"half{train_half}.jsonl"]))
        assert len(item["train_texts"]) == n_train + seed_texts.total()


def test_the_half_precision_copy_encodes_as_the_packaged_model(prepared):
    from sentence_transformers import SentenceTransformer

    from failatlas.embed.models import packaged_model_dir

    size = sum(p.stat().st_size for p in (prepared / "model").rglob("*") if p.is_file())
    assert size < 60 * 2**20  # travels to a GPU machine (64 MiB a call)
    texts = ["The agent called the search tool with an empty query", "The final answer lacked the <end_plan> tag"]
    copy = SentenceTransformer(str(prepared / "model"), device="cpu").float().encode(texts)
    original = SentenceTransformer(str(packaged_model_dir()), device="cpu").encode(texts)
    cosines = (copy * original).sum(axis=1) / np.linalg.norm(copy, axis=1) / np.linalg.norm(original, axis=1)
    assert cosines.min() > 0.999


def test_the_scoring_regression_is_the_label_models():
    from failatlas.taxonomy.learned import LabelModel

    rng = np.random.default_rng(0)
    texts = [f"statement {k} about {w}" for k, w in enumerate(["tools", "format", "plans"] * 8)]
    labels = [w.split()[-1] for w in texts]
    vectors = rng.normal(size=(len(texts), 6))
    classes, proba = ft._lr_proba(vectors, texts, labels, vectors, texts)
    model = LabelModel().fit(vectors, texts, labels)
    assert list(classes) == list(model.classes_)
    assert (proba.argmax(axis=1) == model.predict_proba(vectors, texts).argmax(axis=1)).all()
