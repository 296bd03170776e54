"""Finding what to import under files and folders, and telling formats apart by content."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from failatlas.bench_core.tasks import TASK_IMPORTERS, discover
from failatlas.core.errors import ConfigError, InputError


def test_formats_are_told_apart_by_content(iclr2024: Path, fixtures: Path, tmp_path: Path):
    renamed = tmp_path / "tasks.json"  # an EXP-Bench file under a name that says nothing
    shutil.copy(iclr2024 / "18439.json", renamed)
    assert TASK_IMPORTERS.detect(renamed) == "expbench"
    assert TASK_IMPORTERS.detect(fixtures / "autoexperiment" / "mlrc_n_k.jsonl") == "autoexperiment"
    as_list = tmp_path / "rows.json"
    as_list.write_text(
        json.dumps([json.loads((fixtures / "autoexperiment" / "mlrc_n_k.jsonl").read_text().splitlines()[0])])
    )
    assert TASK_IMPORTERS.detect(as_list) == "autoexperiment"
    assert TASK_IMPORTERS.detect(fixtures / "rexbench" / "othello") == "rexbench"
    assert TASK_IMPORTERS.detect(fixtures / "rexbench" / "othello" / "instructions.md") == "rexbench"
    assert (
        TASK_IMPORTERS.detect(fixtures / "autoexperiment" / "2205.00048" / "code" / "src" / "run_metric.py") is None
    )


def test_walking_a_log_folder_prefers_final_files_and_lists_what_it_skips(iclr2024: Path, tmp_path: Path):
    logs = tmp_path / "logs" / "iclr2024" / "17595"
    logs.mkdir(parents=True)
    shutil.copy(iclr2024 / "17595.json", logs / "17595_complete_final.json")
    shutil.copy(iclr2024 / "17595.json", logs / "17595_complete.json")
    (logs / "config.json").write_text('{"model": "o3-mini"}')
    (logs / "notes.md").write_text("# notes")
    found = discover([tmp_path / "logs"])
    assert [(f.path.name, f.format) for f in found.found] == [("17595_complete_final.json", "expbench")]
    assert sorted(p.name for p in found.skipped) == ["17595_complete.json", "config.json"]


def test_a_neurips_log_folder_yields_only_its_final_file(iclr2024: Path, tmp_path: Path):
    logs = tmp_path / "neurips2024" / "93431"
    logs.mkdir(parents=True)
    for name in (
        "93431_complete_final_with_difficulty_level.json",
        "93431_complete_type_1.json",
        "93431_complete_type_1_task_3.json",
    ):
        shutil.copy(iclr2024 / "18439.json", logs / name)
    (logs / "93431_generated_programs_type_1_task_0.json").write_text('{"programs": ["print(1)"]}')
    found = discover([tmp_path])
    assert [f.path.name for f in found.found] == ["93431_complete_final_with_difficulty_level.json"]
    assert len(found.skipped) == 3


def test_broken_or_unknown_inputs_are_errors(tmp_path: Path):
    (tmp_path / "good.json").write_text('{"other": 1}')
    (tmp_path / "broken.json").write_text('{"rows": [')  # recognised by nobody, yet not skipped silently
    with pytest.raises(InputError, match="invalid JSON") as err:
        discover([tmp_path])
    assert err.value.path == str(tmp_path / "broken.json")
    with pytest.raises(InputError, match="cannot tell the task format") as err:
        discover([tmp_path / "good.json"])
    assert "--format" in err.value.hint
    with pytest.raises(InputError, match="no such file"):
        discover([tmp_path / "absent.jsonl"])
    with pytest.raises(ConfigError, match="unknown task format 'csv'"):
        TASK_IMPORTERS.get("csv")


def test_an_explicit_format_reads_only_that_format(iclr2024: Path, fixtures: Path):
    found = discover([iclr2024.parent, fixtures / "autoexperiment", fixtures / "rexbench"], fmt="autoexperiment")
    assert [f.path.name for f in found.found] == ["mlrc_n_k.jsonl"]
    assert len([p for p in found.skipped if p.suffix == ".json"]) == 25  # the EXP-Bench files
