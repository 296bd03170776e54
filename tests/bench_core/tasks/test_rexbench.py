"""RExBench importer on task folders written from the benchmark's published instructions and evaluation."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from failatlas.bench_core.tasks import TASK_IMPORTERS, TaskKind
from failatlas.bench_core.tasks.importers.rexbench import split_hints
from failatlas.core.errors import InputError


def test_extension_task_with_hint_levels_and_an_oracle_band(fixtures: Path):
    (task,) = TASK_IMPORTERS.load(fixtures / "rexbench" / "othello", "rexbench").records
    assert task.id == "rexbench-othello" and task.kind == TaskKind.EXTENSION
    assert task.question.startswith("Change the original codebase of Li et al. (2023)")
    assert "### Hints" not in task.instructions and "### Evaluation" in task.instructions
    assert len(task.hints) == 2
    assert task.hints[0].startswith("The labels are computed") and "train_probe_othello.py" in task.hints[1]
    assert task.run.command == "bash produce_probes.sh" and task.run.timeout_s == 21600
    crit = task.success
    assert crit is not None and crit.kind == "oracle_band" and crit.metric == "layer_6_test_acc"
    assert crit.oracle_values == [0.97171, 0.97177, 0.97183] and crit.band == 0.002
    assert [(m.name, m.atol) for m in task.expected_results][0] == ("layer_1_test_acc", 0.002)
    assert task.repository.commit and task.repository.url.endswith("othello_world")
    assert task.resources.gpus == 1 and task.resources.image == "rexbench/othello:latest"
    assert task.extra["extension_paper"]["arxiv_id"] == "2309.00941"
    assert task.extra["oracle"]["runs"][0]["layer_1_test_acc"] == 0.88205
    assert task.warnings == []
    assert (
        task.agent_view().hints == task.hints and task.agent_view().expected_metrics[-1] == "layer_6_test_acc"
    )


def test_yaml_metadata_and_an_exact_criterion(fixtures: Path):
    (task,) = TASK_IMPORTERS.load(fixtures / "rexbench" / "cogs" / "instructions.md", "rexbench").records
    assert task.id == "rexbench-cogs"
    assert task.success.kind == "exact" and task.success.value == pytest.approx(0.4724761904761905)
    assert task.success.metric == "gen_exact_match"
    assert task.hints == []
    assert {w.split(":")[0] for w in task.warnings} == {"no-hints", "unpinned-repo"}


def test_hint_split_matches_rexbench_levels():
    text = "# P\nbody\n\n### Hints\nh1\n\n### More detailed hints\nh2\nh2b\n"
    base, hints = split_hints(text)
    assert base == "# P\nbody" and hints == ["h1", "h2\nh2b"]
    assert split_hints("no hints here") == ("no hints here", [])


def _copy(fixtures: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "othello"
    shutil.copytree(fixtures / "rexbench" / "othello", dest)
    return dest


def test_malformed_folders_name_the_file_and_field(fixtures: Path, tmp_path: Path):
    folder = _copy(fixtures, tmp_path)
    (folder / "oracle.json").unlink()
    with pytest.raises(InputError) as err:
        TASK_IMPORTERS.load(folder, "rexbench")
    assert err.value.field == "success.oracle_values" and err.value.path == str(folder / "task.json")

    meta = json.loads((folder / "task.json").read_text())
    del meta["eval"]["command"]
    (folder / "task.json").write_text(json.dumps(meta))
    with pytest.raises(InputError) as err:
        TASK_IMPORTERS.load(folder, "rexbench")
    assert (err.value.path, err.value.field) == (str(folder / "task.json"), "eval.command")

    (folder / "task.json").write_text("{broken")
    with pytest.raises(InputError, match="invalid JSON") as err:
        TASK_IMPORTERS.load(folder, "rexbench")
    assert err.value.line == 1

    (folder / "task.json").unlink()
    with pytest.raises(InputError, match="task.json or task.yaml"):
        TASK_IMPORTERS.load(folder, "rexbench")
    (folder / "instructions.md").unlink()
    with pytest.raises(InputError, match="instructions.md"):
        TASK_IMPORTERS.load(folder, "rexbench")
