"""Preparing repositories for agents: masking files and functions, fresh history, no ground truth."""

from failatlas.bench_core.prepare.combinations import function_combinations
from failatlas.bench_core.prepare.hidden_tests import HiddenTestReport, run_hidden_tests
from failatlas.bench_core.prepare.leaks import GroundTruthLeakError
from failatlas.bench_core.prepare.stubs import function_bodies, stub_functions, stubbed_correctly
from failatlas.bench_core.prepare.workspace import (
    PreparedWorkspace,
    prepare_workspace,
    reference_workspace,
    source_tree,
)

__all__ = [
    "GroundTruthLeakError",
    "HiddenTestReport",
    "PreparedWorkspace",
    "function_bodies",
    "function_combinations",
    "prepare_workspace",
    "reference_workspace",
    "run_hidden_tests",
    "source_tree",
    "stub_functions",
    "stubbed_correctly",
]
