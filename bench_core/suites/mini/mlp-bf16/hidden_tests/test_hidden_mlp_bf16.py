"""Hidden tests for train.py (mini-mlp-bf16); the agent's code runs on the CPU in the sandbox.

The judge process never imports the agent's code (nor PyTorch): data comes from the task's own data.py (the
pristine repository), the agent's train_model runs through the `agent` fixture and returns its predictions and
weights as arrays, and accuracies and comparisons are computed here.
"""

import numpy as np
import pytest
from failatlas_hidden import AgentError

from data import make_data

TRAIN = """
import numpy as np
import torch
from train import train_model
torch.set_num_threads(1)
model = train_model(X_train, y_train, precision=precision, device="cpu", steps=steps)
with torch.no_grad():
    predictions = [model(torch.from_numpy(X)).argmax(dim=1).numpy() for X in predict]
result = {"training": bool(model.training), "predictions": predictions,
          "weights": [p.detach().cpu().numpy() for p in model.parameters()]}
"""


def _small_data():
    X_train, y_train, X_test, y_test = make_data(seed=1)
    return X_train[:1000], y_train[:1000], X_test[:1000], y_test[:1000]


def _train(agent, X_train, y_train, precision, steps, predict=()):
    return agent.run(TRAIN, X_train=X_train, y_train=y_train, precision=precision, steps=steps,
                     predict=list(predict))


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_training_learns_the_task(agent, precision):
    X_train, y_train, X_test, y_test = _small_data()
    got = _train(agent, X_train, y_train, precision, 150, predict=[X_train, X_test])
    assert got["training"] is False
    on_train, on_test = got["predictions"]
    assert np.mean(on_train == y_train) > 0.9
    assert np.mean(on_test == y_test) > 0.75


def test_training_is_deterministic_and_returns_float32_weights(agent):
    X_train, y_train, _, _ = _small_data()
    first = _train(agent, X_train, y_train, "bf16", 20)["weights"]
    again = _train(agent, X_train, y_train, "bf16", 20)["weights"]
    assert len(first) == len(again) == 6
    for a, b in zip(first, again, strict=True):
        assert a.dtype == np.float32
        np.testing.assert_array_equal(a, b)


def test_bf16_and_fp32_training_differ_but_start_from_the_same_weights(agent):
    X_train, y_train, _, _ = _small_data()
    start_fp32 = _train(agent, X_train, y_train, "fp32", 0)["weights"]
    start_bf16 = _train(agent, X_train, y_train, "bf16", 0)["weights"]
    for a, b in zip(start_fp32, start_bf16, strict=True):
        np.testing.assert_array_equal(a, b)
    fp32 = _train(agent, X_train, y_train, "fp32", 10)["weights"]
    bf16 = _train(agent, X_train, y_train, "bf16", 10)["weights"]
    diffs = [float(np.abs(a - b).max()) for a, b in zip(fp32, bf16, strict=True)]
    assert max(diffs) > 0.0
    assert np.isfinite(diffs).all()
    assert max(float(np.abs(a - b).max()) for a, b in zip(start_fp32, fp32, strict=True)) > 0.0


def test_unknown_precision_is_rejected(agent):
    X_train, y_train, _, _ = _small_data()
    with pytest.raises(AgentError) as raised:
        _train(agent, X_train, y_train, "fp16x", 1)
    assert raised.value.exception == "ValueError"


DTYPES = """
import torch
import train
seen = []
made = train.make_model


def spying(*args, **kwargs):
    model = made(*args, **kwargs)
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            module.register_forward_hook(
                lambda layer, _inputs, output: seen.append((str(output.dtype), str(layer.weight.dtype))))
    return model


train.make_model = spying
torch.set_num_threads(1)
train.train_model(X_train, y_train, precision=precision, device="cpu", steps=2)
result = sorted(set(seen))
"""


@pytest.mark.parametrize(("precision", "activations"), [("bf16", "torch.bfloat16"), ("fp32", "torch.float32")])
def test_precision_is_what_the_layers_compute_in(agent, precision, activations):
    # what the method does, not only where its accuracy lands: every linear layer of make_model's MLP computes in
    # bfloat16 under bf16 (autocast) and in float32 under fp32, its weights staying float32 (master weights); no
    # autocast, float16 autocast or bfloat16 weights reach about the same accuracy but not these dtypes
    X_train, y_train, _, _ = _small_data()
    seen = agent.run(DTYPES, X_train=X_train, y_train=y_train, precision=precision)
    assert [tuple(pair) for pair in seen] == [(activations, "torch.float32")]
