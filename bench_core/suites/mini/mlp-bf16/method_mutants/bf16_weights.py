"""bf16 everywhere: weights, inputs and optimizer state in bfloat16 (no float32 master weights), cast back to
float32 at the end."""


def train_model(X, y, *, precision: str, device: str, seed: int = 0, steps: int = 300) -> nn.Module:
    """Train make_model(...) full-batch with Adam for `steps` steps on `device`; return it in eval mode.

    precision "fp32" trains in float32; "bf16" runs forward and loss under
    torch.autocast(dtype=torch.bfloat16) while keeping float32 master weights. X and y are numpy arrays.
    """
    import torch
    from torch import nn
    if precision not in ("fp32", "bf16"):
        raise ValueError(f"precision must be 'fp32' or 'bf16', not {precision!r}")
    model = make_model(X.shape[1], int(y.max()) + 1, seed).to(device)
    if precision == "bf16":
        model = model.to(torch.bfloat16)
    inputs = torch.from_numpy(X).to(device)
    if precision == "bf16":
        inputs = inputs.to(torch.bfloat16)
    targets = torch.from_numpy(y).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    device_type = torch.device(device).type
    for _ in range(steps):
        optimizer.zero_grad()
        with torch.autocast(device_type=device_type, dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()
        optimizer.step()
    return model.float().eval()
