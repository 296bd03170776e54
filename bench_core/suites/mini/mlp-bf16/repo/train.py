"""A small MLP trained full-batch with Adam, in fp32 or under bf16 autocast, on a chosen device."""

import torch
from torch import nn

HIDDEN = 64
STEPS = 300
LEARNING_RATE = 1e-2


def make_model(n_features: int, n_classes: int, seed: int) -> nn.Module:
    """The MLP, initialised on the CPU from `seed` so every device starts from the same weights."""
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(n_features, HIDDEN),
        nn.ReLU(),
        nn.Linear(HIDDEN, HIDDEN),
        nn.ReLU(),
        nn.Linear(HIDDEN, n_classes),
    )


def train_model(X, y, *, precision: str, device: str, seed: int = 0, steps: int = STEPS) -> nn.Module:
    """Train make_model(...) full-batch with Adam for `steps` steps on `device`; return it in eval mode.

    precision "fp32" trains in float32; "bf16" runs forward and loss under
    torch.autocast(dtype=torch.bfloat16) while keeping float32 master weights. X and y are numpy arrays.
    """
    if precision not in ("fp32", "bf16"):
        raise ValueError(f"precision must be 'fp32' or 'bf16', not {precision!r}")
    model = make_model(X.shape[1], int(y.max()) + 1, seed).to(device)
    inputs = torch.from_numpy(X).to(device)
    targets = torch.from_numpy(y).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    device_type = torch.device(device).type
    for _ in range(steps):
        optimizer.zero_grad()
        with torch.autocast(device_type=device_type, dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()
        optimizer.step()
    return model.eval()


@torch.no_grad()
def accuracy(model: nn.Module, X, y, device: str) -> float:
    """Fraction of correct argmax predictions, computed in float32."""
    logits = model(torch.from_numpy(X).to(device))
    return float((logits.argmax(dim=1).cpu() == torch.from_numpy(y)).float().mean())
