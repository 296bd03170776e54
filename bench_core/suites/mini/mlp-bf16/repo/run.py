"""Train the MLP in fp32 and in bf16 autocast on the GPU, report both test accuracies and the device used.

Needs a CUDA GPU. `--device cpu` (or FAILATLAS_DEVICE=cpu) runs the same experiment on the CPU instead.
"""

import argparse
import json
import os
import platform

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402

from data import make_data  # noqa: E402
from train import accuracy, train_model  # noqa: E402


def describe_device(device: str) -> dict:
    """What the experiment ran on: device kind and, for CUDA, the GPU's name, count and CUDA version."""
    info = {"device": device, "torch_version": torch.__version__}
    if device.startswith("cuda"):
        index = torch.device(device).index or 0
        info["gpu_name"] = torch.cuda.get_device_name(index)
        info["gpu_count"] = torch.cuda.device_count()
        info["cuda_version"] = torch.version.cuda
    else:
        info["gpu_name"] = None
        info["cpu"] = platform.processor() or platform.machine()
    return info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default=os.environ.get("FAILATLAS_DEVICE") or "cuda")
    device = parser.parse_args().device
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("this experiment needs a CUDA GPU and none is visible; "
                         "pass --device cpu to run on the CPU")
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_num_threads(1)
    X_train, y_train, X_test, y_test = make_data(seed=0)
    results = describe_device(device)
    for precision in ("fp32", "bf16"):
        model = train_model(X_train, y_train, precision=precision, device=device, seed=0)
        results[f"test_accuracy_{precision}"] = round(accuracy(model, X_test, y_test, device), 4)
    results["accuracy_gap"] = round(abs(results["test_accuracy_fp32"] - results["test_accuracy_bf16"]), 4)
    with open("results.json", "w") as handle:
        json.dump(results, handle, indent=2, sort_keys=True)
    print(json.dumps(results, sort_keys=True))


if __name__ == "__main__":
    main()
