from failatlas.ingest import error_signatures
from failatlas.ingest.signatures import mask_path


def test_module_not_found_variants_collapse_to_one_signature_with_module_details():
    logs = [
        'Traceback (most recent call last):\n  File "run.py", line 1, in <module>\n'
        "ModuleNotFoundError: No module named 'torchvision'",
        'ModuleNotFoundError: No module named "timm.models"',
        "ImportError: No module named sklearn",
        "E   ModuleNotFoundError: No module named 'torchvision'",
    ]
    signatures = [error_signatures(log) for log in logs]
    assert all(len(s) == 1 for s in signatures)
    assert {s[0].key for s in signatures} == {"missing_module"}
    assert {s[0].text for s in signatures} == {"Execution failed: required Python module is not installed"}
    assert [s[0].detail["module"] for s in signatures] == [
        "torchvision",
        "timm.models",
        "sklearn",
        "torchvision",
    ]


def test_one_log_gives_each_distinct_signature_once_in_order():
    log = """Epoch 1/10
ModuleNotFoundError: No module named 'wandb'
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total capacity)
ModuleNotFoundError: No module named 'wandb'
FileNotFoundError: [Errno 2] No such file or directory: '/tmp/tmpab12cd34/data/cifar-10/data_batch_1'
NotImplementedError: TODO: implement the contrastive loss
RuntimeError: mat1 and mat2 shapes cannot be multiplied (64x512 and 256x10)
subprocess.TimeoutExpired: Command '['python', 'train.py']' timed out after 3600 seconds
ValueError: invalid literal for int() with base 10: 'abc'
"""
    signatures = error_signatures(log)
    assert [s.key for s in signatures] == [
        "missing_module",
        "cuda_oom",
        "file_not_found",
        "not_implemented",
        "shape_mismatch",
        "timeout",
        "exception",
    ]
    by_key = {s.key: s for s in signatures}
    assert by_key["file_not_found"].detail == {"path": "/tmp/<tmp>/data/cifar-10/data_batch_1"}
    assert by_key["not_implemented"].detail == {"message": "TODO: implement the contrastive loss"}
    assert by_key["exception"].text == "Execution failed with an uncaught ValueError"
    assert "abc" in by_key["exception"].detail["message"]
    assert by_key["cuda_oom"].line.startswith("torch.OutOfMemoryError")


def test_paths_are_masked_so_sandboxes_compare_equal():
    assert mask_path("/tmp/tmpx9y8/run/3f2a9c0d1e2b/out.json") == "/tmp/<tmp>/run/<hex>/out.json"
    a = error_signatures("cat: /tmp/tmp_1/results.json: No such file or directory")[0]
    b = error_signatures("cat: /tmp/tmp_2/results.json: No such file or directory")[0]
    assert a.identity == b.identity


def test_logs_without_errors_give_nothing():
    assert error_signatures("Epoch 1: loss 0.31\nDone.") == []
    assert error_signatures("") == []
    assert error_signatures(None) == []
