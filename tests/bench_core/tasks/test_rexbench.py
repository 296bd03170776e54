"""RExBench importer on task folders in the released format (instructions.md, written by us in RExBench's shape),
our optional task.json/yaml, and a user's checks file."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from failatlas.bench_core.agents.base import task_prompt
from failatlas.bench_core.tasks import TASK_IMPORTERS, RepoRef, TaskImportParams, TaskKind, get_task, run
from failatlas.bench_core.tasks.importers.rexbench import eval_commands, read_instructions
from failatlas.core.errors import InputError


def _load(path: Path, **options):
    (task,) = TASK_IMPORTERS.load(path, "rexbench", options).records
    return task


def _codes(task) -> set[str]:
    return {w.split(":")[0] for w in task.warnings}


def test_an_instructions_md_alone_is_a_task_told_each_section_once(fixtures: Path):
    task = _load(fixtures / "rexbench" / "othello")
    assert task.id == "rexbench-othello" and task.kind == TaskKind.EXTENSION
    assert task.source == str((fixtures / "rexbench" / "othello" / "instructions.md").resolve())
    assert task.question.startswith("Change the original codebase of Li et al. (2023)")
    assert task.question.endswith("see `environment.yml`).")
    assert task.instructions.startswith("# Problem Description\n\n## Background\nLi et al. (2023)")
    assert "### Evaluation\nWe will run `produce_probes.sh`." in task.instructions
    assert "Extension to be implemented" not in task.instructions and "held-out test set" not in task.instructions
    assert "Hints" not in task.instructions and len(task.hints) == 2
    assert task.hints[0].startswith("The labels are computed") and "train_probe_othello.py" in task.hints[1]
    prompt = task_prompt(task.agent_view())
    for text in (task.question, task.instructions, *task.hints):
        assert prompt.count(text) == 1
    assert prompt.count("held-out test set") == 1  # the extension's words, once


def test_without_metadata_the_repository_and_the_check_come_from_the_user(fixtures: Path):
    task = _load(fixtures / "rexbench" / "othello")
    assert task.repository == RepoRef() and task.run.command is None and task.checks == []
    assert task.judgeable_phases == ["implementation"]
    assert _codes(task) == {"repository-from-user", "no-execution-check"}
    (repo_warning,) = [w for w in task.warnings if w.startswith("repository-from-user")]
    assert "failatlas repos add PATH --task rexbench-othello" in repo_warning and "--repo" in repo_warning
    assert task.agent_view().expected_metrics == []


def test_task_yaml_still_adds_metadata(fixtures: Path):
    task = _load(fixtures / "rexbench" / "cogs" / "instructions.md")
    assert task.id == "rexbench-cogs" and task.paper.arxiv_id == "2010.05465"
    assert task.repository.url == "https://github.com/najoungkim/COGS" and task.repository.commit is None
    assert task.run.command == "bash run_final.sh" and task.run.timeout_s == 14400 and task.resources.gpus == 1
    assert task.source == str((fixtures / "rexbench" / "cogs" / "task.yaml").resolve())
    assert _codes(task) == {"unpinned-repo", "no-execution-check"}
    assert "execution" not in task.judgeable_phases  # a command, but nothing to compare its output with


def test_a_checks_file_attaches_checks_and_commands(fixtures: Path):
    checks = fixtures / "rexbench" / "checks.yaml"
    cogs = _load(fixtures / "rexbench" / "cogs", checks=checks)
    assert [(c.name, c.source, c.pattern, c.value, c.atol) for c in cogs.checks] == [
        ("gen_exact_match", "stdout_regex", "gen exact match: ([0-9.]+)", 0.8, 0.05)]
    assert cogs.judgeable_phases == ["implementation", "execution"] and "no-execution-check" not in _codes(cogs)
    assert cogs.extra["checks_file"] == str(checks.resolve())
    othello = _load(fixtures / "rexbench" / "othello", checks=checks)  # named by its id in the file
    assert othello.run.command == "bash produce_probes.sh" and othello.run.timeout_s == 21600
    assert [(c.source, c.file, c.column, c.row) for c in othello.checks][0] == (
        "csv_column", "ckpts/probe_accuracy.csv", "test_acc", 5)
    assert othello.checks[1].field == "best.layer" and othello.checks[1].value == 6
    assert "execution" in othello.judgeable_phases and _codes(othello) == {"repository-from-user"}
    assert othello.agent_view().expected_metrics == ["layer_6_test_acc", "best_layer"]


def test_checks_without_a_command_say_so(fixtures: Path, tmp_path: Path):
    checks = tmp_path / "checks.json"
    checks.write_text(json.dumps({"othello": [{"name": "acc", "source": "stdout_regex", "pattern": "acc (\\S+)",
                                                "value": 0.9}]}))
    task = _load(fixtures / "rexbench" / "othello", checks=checks)
    assert len(task.checks) == 1 and task.run.command is None
    assert "execution" not in task.judgeable_phases and "no-execution-command" in _codes(task)


CHECK = """\
  - name: acc
    source: stdout_regex
    pattern: 'acc: ([0-9.]+)'
    value: 0.5
"""


@pytest.mark.parametrize(("text", "field", "line", "message"), [
    ("cogz:\n" + CHECK, "cogz", 1, "names no RExBench task beside"),
    ("cogs:\n" + CHECK.replace("+)'", "+'"), "cogs[0].pattern", 4, "not a regular expression"),
    ("cogs:\n" + CHECK + "  - {name: b, source: csv_column, file: out.csv, value: 1}\n", "cogs[1].column", 6,
     "a 'csv_column' check needs file and column"),
    ("cogs:\n  command: bash run_final.sh\n  checks:\n    - {name: a, source: json_field, value: 1, field: x,\n"
     "       file: ../x.json}\n", "cogs.checks[0].file", 5, "'..' is not allowed"),
    ("cogs:\n" + CHECK + "    file: /etc/passwd\n", "cogs[0].file", 6, "absolute"),
    ("cogs:\n" + CHECK.replace("    value: 0.5\n", ""), "cogs[0].value", 2, "missing"),
    ("cogs:\n" + CHECK.replace("stdout_regex", "stdout"), "cogs[0].source", 3, "unknown source 'stdout'"),
    ("cogs:\n" + CHECK.replace("0.5", "true"), "cogs[0].value", 5, "must be a number"),
    ("cogs:\n" + CHECK + "    tolerance: 0.1\n", "cogs[0].tolerance", 6, "Extra inputs"),
    ("cogs:\n" + CHECK + "    rtol: -1\n", "cogs[0].rtol", 6, ">= 0"),
    ("cogs:\n" + CHECK + CHECK, "cogs[1].name", 6, "a second check named 'acc'"),
    ("cogs:\n  commands: bash run_final.sh\n", "cogs.commands", 2, "unknown key"),
    ("cogs:\n  command: ''\n", "cogs.command", 2, "must be the command line"),
    ("cogs:\n" + CHECK + "rexbench-cogs:\n" + CHECK, "rexbench-cogs", 6, "named twice"),
])
def test_a_bad_checks_file_names_file_line_and_field(fixtures: Path, tmp_path: Path, text, field, line, message):
    checks = tmp_path / "checks.yaml"
    checks.write_text(text)
    with pytest.raises(InputError, match=re.escape(message)) as err:
        _load(fixtures / "rexbench" / "cogs", checks=checks)
    assert (err.value.path, err.value.field, err.value.line) == (str(checks), field, line)
    assert str(err.value).startswith(f"{checks}:{line} field '{field}': ")


def test_a_json_checks_file_names_the_line_too(fixtures: Path, tmp_path: Path):
    checks = tmp_path / "checks.json"
    checks.write_text(json.dumps({"cogs": [{"name": "a", "source": "stdout_regex", "value": 1}]}, indent=1))
    with pytest.raises(InputError, match="needs pattern") as err:
        _load(fixtures / "rexbench" / "cogs", checks=checks)
    assert (err.value.field, err.value.line) == ("cogs[0].pattern", 3)  # the check's line: it has no pattern
    checks.write_text('{"cogs": [}')
    with pytest.raises(InputError, match="invalid JSON") as err:
        _load(fixtures / "rexbench" / "cogs", checks=checks)
    assert err.value.path == str(checks) and err.value.line == 1


def test_a_checks_file_that_is_not_a_mapping_or_missing_is_named(fixtures: Path, tmp_path: Path):
    checks = tmp_path / "checks.yaml"
    checks.write_text("- cogs\n")
    with pytest.raises(InputError, match="must map task names") as err:
        _load(fixtures / "rexbench" / "cogs", checks=checks)
    assert err.value.path == str(checks)
    with pytest.raises(InputError, match="cannot read") as err:
        _load(fixtures / "rexbench" / "cogs", checks=tmp_path / "nope.yaml")
    assert err.value.path == str(tmp_path / "nope.yaml")


def test_the_stage_takes_the_checks_option_into_a_real_store(store, fixtures: Path):
    checks = fixtures / "rexbench" / "checks.yaml"
    result = run(store, TaskImportParams(paths=[fixtures / "rexbench"], options={"checks": checks}))
    assert result.n_tasks == 2
    assert get_task(store, "rexbench-othello").checks[0].name == "layer_6_test_acc"
    assert get_task(store, "rexbench-cogs").run.command == "bash run_final.sh"
    with pytest.raises(InputError, match="names no RExBench task"):
        run(store, TaskImportParams(paths=[fixtures / "rexbench" / "othello"],
                                    options={"checks": fixtures / "rexbench" / "cogs" / "task.yaml"}))


VARIED = """\
Some words before any heading.

# Background:
A base paper *A Study of Things in Many Settings* (Doe and Roe 2021) found X.

### Extra context
Kept with the background.

# The task
Change the training loop.

```bash
# a comment, not a heading
python3 train.py --steps 10
```

#### Details
Keep the seed at 1.

# Notes for the evaluator
An unknown section.

##### EVALUATION
Run it with `bash run_final.sh --seed 1` and read `results.json`.

## Hints
Look at `train.py`.

## Notes inside the hints
Still a hint.

## More detailed hints
Line 40.
"""


def _folder(tmp_path: Path, text: str, name: str = "varied") -> Path:
    folder = tmp_path / "instructions" / name
    folder.mkdir(parents=True)
    (folder / "instructions.md").write_text(text)
    return folder


def test_sections_are_read_whatever_their_heading_levels_and_wording(tmp_path: Path):
    task = _load(_folder(tmp_path, VARIED))
    assert task.question.startswith("Change the training loop.") and task.question.endswith("Keep the seed at 1.")
    assert "# a comment, not a heading" in task.question and "#### Details" in task.question
    assert task.instructions.startswith("Some words before any heading.\n\n# Background:")
    assert "### Extra context\nKept with the background." in task.instructions
    assert "# Notes for the evaluator\nAn unknown section." in task.instructions
    assert "##### EVALUATION" in task.instructions and "The task" not in task.instructions
    assert task.hints == ["Look at `train.py`.\n\n## Notes inside the hints\nStill a hint.", "Line 40."]
    assert (task.paper.title, task.paper.year) == ("A Study of Things in Many Settings", 2021)
    roles = [(s["title"], s["role"]) for s in task.extra["sections"]]
    assert roles == [("Background:", "background"), ("The task", "extension"),
                     ("Notes for the evaluator", "other"), ("EVALUATION", "evaluation"), ("Hints", "hint"),
                     ("More detailed hints", "hint")]
    prompt = task_prompt(task.agent_view())
    replaced = {"# The task", "## Hints", "## More detailed hints"}  # the prompt's own headings stand for these
    for line in {line for line in VARIED.splitlines() if len(line) > 8 and line not in replaced}:
        assert prompt.count(line) == 1, line


def test_an_explicit_command_in_the_evaluation_text_is_taken_and_said(tmp_path: Path):
    task = _load(_folder(tmp_path, VARIED))
    assert task.run.command == "bash run_final.sh --seed 1"
    assert "command-from-text" in _codes(task)
    assert eval_commands("We will run the `run_final.sh` script you wrote with `--threshold`.") == []
    assert eval_commands("Run:\n```\n$ python3 a.py --x 1\n./b.sh\n# note\n```\nthen `make`.") == [
        "python3 a.py --x 1", "./b.sh", "make"]
    assert eval_commands("With `MODEL_PATH=models/x bash eval.sh` and `$MODEL_PATH`.") == [
        "MODEL_PATH=models/x bash eval.sh"]


def test_a_path_named_in_the_evaluation_text_is_no_command(tmp_path: Path):
    """The output folder `./results` (and other paths) named in prose is not a command: no command, no
    `command-from-text` warning; an executable or interpreter call still is."""
    prose = ("Write your outputs to `./results` (or `./results/`); we read `./results/summary.json` and "
             "`results/acc.csv`, and run `bash out/` never.")
    assert eval_commands(prose) == []
    assert eval_commands("Then `./train --epochs 3`, `./eval.py` and `python3 -m evaluate`.") == [
        "./train --epochs 3", "./eval.py", "python3 -m evaluate"]
    task = _load(_folder(tmp_path, VARIED.replace("Run it with `bash run_final.sh --seed 1`",
                                                  "Put everything in `./results`")))
    assert task.run.command is None and "command-from-text" not in _codes(task)


def test_a_file_without_an_extension_section_is_the_task_whole(tmp_path: Path):
    task = _load(_folder(tmp_path, "# Problem\n\n## Background\nB.\n\n## Goal\nDo G.\n"))
    assert task.question == "# Problem\n\n## Background\nB.\n\n## Goal\nDo G." and task.instructions is None
    assert "no-extension-section" in _codes(task)
    parsed = read_instructions("## Extension to be implemented\nOnly this.\n")
    assert (parsed.question, parsed.instructions, parsed.hints) == ("Only this.", None, [])


def test_task_json_eval_and_success_make_execution_judgeable(fixtures: Path, tmp_path: Path):
    folder = tmp_path / "othello"
    shutil.copytree(fixtures / "rexbench" / "othello", folder)
    meta = {"eval": {"command": "bash produce_probes.sh", "metric": "layer_6_test_acc"},
            "success": {"kind": "oracle_band", "band": 0.002}, "hint_levels": 3}
    (folder / "task.json").write_text(json.dumps(meta))
    (folder / "oracle.json").write_text(json.dumps({"metric": "layer_6_test_acc", "values": [0.9, 0.91]}))
    task = _load(folder)
    assert task.success.oracle_values == [0.9, 0.91] and task.extra["hint_levels"] == 3
    assert "execution" in task.judgeable_phases and "no-execution-check" not in _codes(task)


def test_malformed_metadata_names_the_file_and_field(fixtures: Path, tmp_path: Path):
    folder = tmp_path / "othello"
    shutil.copytree(fixtures / "rexbench" / "othello", folder)
    meta_file = folder / "task.json"
    meta_file.write_text(json.dumps({"eval": {"metric": "acc"}, "success": {"kind": "oracle_band"}}))
    with pytest.raises(InputError) as err:
        _load(folder)
    assert (err.value.path, err.value.field) == (str(meta_file), "success.oracle_values")
    meta_file.write_text(json.dumps({"eval": {"command": ["bash", "x.sh"]}}))
    with pytest.raises(InputError) as err:
        _load(folder)
    assert (err.value.path, err.value.field) == (str(meta_file), "eval.command")
    meta_file.write_text(json.dumps({"expected": [{"name": "acc", "value": 1, "atol": -1}]}))
    with pytest.raises(InputError) as err:
        _load(folder)
    assert (err.value.path, err.value.field) == (str(meta_file), "expected[0].atol")
    meta_file.write_text("{broken")
    with pytest.raises(InputError, match="invalid JSON") as err:
        _load(folder)
    assert err.value.line == 1
    meta_file.unlink()
    (folder / "instructions.md").write_text("  \n")
    with pytest.raises(InputError, match="is empty"):
        _load(folder)
    (folder / "instructions.md").unlink()
    with pytest.raises(InputError, match="instructions.md"):
        _load(folder)
