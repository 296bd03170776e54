"""Issue 52, R6: an EXP-Bench task whose files to hide are named outside /workspace is refused with what its user
can edit (their EXP-Bench JSON's field, by question), not "the task file (masking.files)" they do not have."""

from __future__ import annotations

import json

import pytest

from failatlas.bench_core.prepare import prepare_workspace
from failatlas.bench_core.tasks.importers import TASK_IMPORTERS
from failatlas.core.errors import InputError


def test_the_refusal_names_the_expbench_json_and_its_field(tmp_path):
    source = tmp_path / "9999.json"
    source.write_text(json.dumps({"questions": [
        {"question": "Q0", "method": "m", "source": ["/workspace/a.py"], "mode": "A"},
        {"question": "R", "method": "m", "masked_source": ["/tmp/repos/X/a.py"], "source": ["/tmp/repos/X/a.py"]},
    ]}))
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.py").write_text("x = 1\n")
    task = TASK_IMPORTERS.load(source, "expbench").records[1]
    with pytest.raises(InputError) as refused:
        prepare_workspace(task, tmp_path / "ws", repo=repo)
    text = refused.value.one_line()
    assert f"in {source.resolve()}, questions[1].masked_source names them" in text
    assert "/workspace/<path from the repository root>" in text and f"failatlas tasks import {source.resolve()}" in text
    assert "masking.files" not in text
