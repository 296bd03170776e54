"""Issue 38, reproduction 2: a sandbox failure before any of the agent's code ran is the harness's (hidden tests:
`judge_failed`; the re-run: infrastructure); after it ran, the agent's, retried once in a fresh sandbox
(`relay.run_judge_retried`, `validator.validate`). Real sandboxes and the real judge process throughout."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from failatlas.bench_core.hidden.relay import run_judge_retried
from failatlas.bench_core.sandbox import SandboxSpec, create_sandbox
from failatlas.bench_core.scoring.checks.base import CheckInput
from failatlas.bench_core.scoring.checks.execution import validate
from failatlas.bench_core.scoring.checks.hidden_tests import HiddenTestsJudge
from failatlas.bench_core.scoring.evidence.build import hidden_tests_evidence
from failatlas.bench_core.scoring.evidence.model import EvidenceSet
from failatlas.bench_core.scoring.evidence.rerun import patched_workspace
from failatlas.bench_core.suites import load_suite
from failatlas.core.errors import AgentFaultError, InfrastructureError

MISSING_IMAGE = "failatlas/no-such-image:never-built"
# a hidden test whose one call reaches the agent's code, then needs the sandbox again for a second call
TWO_CALLS = """def test_two_calls(agent):
    assert agent.call("ridge:probe") == 1
    assert agent.call("ridge:probe") == 1
"""


def _task():
    return next(t for t in load_suite("failatlas-mini") if t.id == "mini-ridge-cv")


@pytest.mark.docker
def test_missing_image_before_agent_code_is_judge_failed(tmp_path: Path) -> None:
    task = _task()
    tree, error = patched_workspace(task, "", scratch=tmp_path / "scratch")
    assert error is None
    starts = []

    def start(read_only_inputs: dict[str, str]):
        starts.append(read_only_inputs)
        return create_sandbox("docker", SandboxSpec(run_id="missing-image-judge", image=MISSING_IMAGE),
                              workspace=tree)

    evidence = EvidenceSet()
    evidence.add(hidden_tests_evidence(task, start, pristine=tree))
    [verdict] = HiddenTestsJudge()(CheckInput(task=task, outputs={}, evidence=evidence))
    assert verdict.status == "judge_failed", verdict
    assert MISSING_IMAGE in verdict.reason, verdict.reason
    assert len(starts) == 1  # a harness fault is not retried as an agent's would be
    with pytest.raises(InfrastructureError, match="does not exist") as caught:
        validate(task, {}, workspace=tree, patch_error=None, sandbox_backend="docker",
                 spec_fields={"run_id": "missing-image-rerun", "image": MISSING_IMAGE})
    assert not isinstance(caught.value, AgentFaultError)


def _judge_tree(tmp_path: Path) -> tuple[Path, Path]:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "ridge.py").write_text("def probe():\n    return 1\n")
    test = tmp_path / "tests" / "test_two_calls.py"
    test.parent.mkdir()
    test.write_text(TWO_CALLS)
    return tree, test


def _starter(tree: Path, boxes: list, *, close_before: str):
    """Fresh local sandboxes of `tree`, each closed (the real sandbox, at a chosen moment) when the relay is about
    to write `close_before` into it: the worker's own file is written before any command runs there,
    "request-2.json" after the first call's worker ran the agent's code."""

    @contextlib.contextmanager
    def start():
        box = create_sandbox("local", SandboxSpec(run_id="closed-sandbox"), workspace=tree)
        boxes.append(box)
        real_write = box.write_file

        def write(path: str, data: bytes | str) -> None:
            if path.endswith(close_before):
                box.close()
            real_write(path, data)

        box.write_file = write
        with box:
            yield box

    return start


def test_a_sandbox_closed_after_the_agent_code_ran_is_the_agents_fault_retried_once(tmp_path: Path) -> None:
    """The agent's code runs in the first call; the sandbox then fails (closed under the relay, as a sandbox the
    agent's processes broke would fail) before the second: AgentFaultError inside, one more try in a fresh
    sandbox, then the agent's I failure naming the reason, never an infrastructure error."""
    tree, test = _judge_tree(tmp_path)
    boxes: list = []
    run = run_judge_retried([test], _starter(tree, boxes, close_before="request-2.json"), pristine=tree,
                            timeout_s=60)
    assert len(boxes) == 2, "a fault after the agent's code ran is tried once more in a fresh sandbox"
    assert run.agent_fault and not run.passed and run.total == 0
    assert "after the agent's code had run" in run.problems[0] and "closed" in run.problems[0], run.problems


def test_a_sandbox_that_fails_before_agent_code_is_infrastructure(tmp_path: Path) -> None:
    tree, test = _judge_tree(tmp_path)
    boxes: list = []
    with pytest.raises(InfrastructureError, match="closed") as caught:
        run_judge_retried([test], _starter(tree, boxes, close_before="failatlas_worker.py"), pristine=tree,
                          timeout_s=60)
    assert not isinstance(caught.value, AgentFaultError)
    assert len(boxes) == 1  # a harness fault is not retried as an agent's is
