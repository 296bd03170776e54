"""Hidden tests for train.py (mini-mlp-bf16); they run on the CPU, from the repository root."""

import numpy as np
import pytest
import torch

from data import make_data
from train import accuracy, train_model


def _small_data():
    X_train, y_train, X_test, y_test = make_data(seed=1)
    return X_train[:1000], y_train[:1000], X_test[:1000], y_test[:1000]


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_training_learns_the_task(precision):
    X_train, y_train, X_test, y_test = _small_data()
    torch.set_num_threads(1)
    model = train_model(X_train, y_train, precision=precision, device="cpu", steps=150)
    assert not model.training
    assert accuracy(model, X_train, y_train, "cpu") > 0.9
    assert accuracy(model, X_test, y_test, "cpu") > 0.75


def test_training_is_deterministic_and_returns_float32_weights():
    X_train, y_train, _, _ = _small_data()
    first = train_model(X_train, y_train, precision="bf16", device="cpu", steps=20)
    again = train_model(X_train, y_train, precision="bf16", device="cpu", steps=20)
    for a, b in zip(first.parameters(), again.parameters(), strict=True):
        assert a.dtype == torch.float32
        assert torch.equal(a, b)


def test_bf16_and_fp32_training_differ_but_start_from_the_same_weights():
    X_train, y_train, _, _ = _small_data()
    start_fp32 = train_model(X_train, y_train, precision="fp32", device="cpu", steps=0)
    start_bf16 = train_model(X_train, y_train, precision="bf16", device="cpu", steps=0)
    for a, b in zip(start_fp32.parameters(), start_bf16.parameters(), strict=True):
        assert torch.equal(a, b)
    fp32 = train_model(X_train, y_train, precision="fp32", device="cpu", steps=10)
    bf16 = train_model(X_train, y_train, precision="bf16", device="cpu", steps=10)
    diffs = [float((a - b).abs().max()) for a, b in zip(fp32.parameters(), bf16.parameters(), strict=True)]
    assert max(diffs) > 0.0
    assert np.isfinite(diffs).all()


def test_unknown_precision_is_rejected():
    X_train, y_train, _, _ = _small_data()
    with pytest.raises(ValueError):
        train_model(X_train, y_train, precision="fp16x", device="cpu", steps=1)
