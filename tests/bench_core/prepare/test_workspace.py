from __future__ import annotations

import importlib.util
import inspect
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from failatlas.bench_core.prepare import (
    GroundTruthLeakError,
    function_bodies,
    prepare_workspace,
    reference_workspace,
    run_hidden_tests,
)
from failatlas.bench_core.prepare.leaks import normalise
from failatlas.bench_core.suites import load_suite, load_task, suite_dir
from failatlas.bench_core.tasks import TaskSpec
from failatlas.core.errors import InputError


def _task(name: str) -> TaskSpec:
    return load_task(suite_dir("failatlas-mini") / name / "task.yaml")


def _git(path: Path, *args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=path, check=True, capture_output=True).stdout


def _all_git_objects(path: Path) -> bytes:
    return _git(path, "cat-file", "--batch-all-objects", "--batch")


def _import(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _agent_text(root: Path) -> str:
    """Every file of the prepared tree and every git object, normalised as the leak scan does."""
    files = [p.read_bytes() for p in root.rglob("*")
             if p.is_file() and ".git" not in p.relative_to(root).parts]
    return normalise(b"\n".join([*files, _all_git_objects(root)]).decode(errors="replace"))


def test_masked_functions_are_stubbed_and_history_holds_nothing_else(tmp_path: Path) -> None:
    task = _task("ridge-cv")
    reference = Path(task.repository.local_path)
    prepared = prepare_workspace(task, tmp_path / "agent")
    root = Path(prepared.path)
    assert prepared.masked_functions == ["ridge.py::RidgeRegression.fit"]
    assert _git(root, "rev-list", "--all", "--count").strip() == b"1"
    assert _git(root, "rev-parse", "HEAD").decode().strip() == prepared.commit
    objects = _all_git_objects(root)
    masked_body = function_bodies((reference / "ridge.py").read_text())["RidgeRegression.fit"]
    assert normalise(masked_body) not in normalise(objects.decode(errors="replace"))
    assert b"self.coef_ = np.linalg.solve" not in objects
    assert b"self.coef_ = np.linalg.solve" in (reference / "ridge.py").read_bytes()
    text = _agent_text(root)
    assert normalise(task.expected_conclusion) not in text
    assert "test_hidden_ridge_cv" not in text and "def test_fit_without_penalty" not in text
    assert not list(root.rglob("test_hidden_*")) and not list(root.rglob("task.yaml"))

    stubbed = _import(root / "ridge.py", "agent_ridge")
    original = _import(reference / "ridge.py", "reference_ridge")
    for name in ("fit", "predict"):
        assert inspect.signature(getattr(stubbed.RidgeRegression, name)) == inspect.signature(
            getattr(original.RidgeRegression, name))
        assert (getattr(stubbed.RidgeRegression, name).__doc__
                == getattr(original.RidgeRegression, name).__doc__)
    with pytest.raises(NotImplementedError):
        stubbed.RidgeRegression(1.0).fit([[1.0], [2.0]], [1.0, 2.0])
    assert len(stubbed.kfold_indices(10, 2, 0)) == 2


def test_masked_file_is_absent_from_tree_and_objects(tmp_path: Path) -> None:
    task = _task("logreg-scaling")
    prepared = prepare_workspace(task, tmp_path / "agent")
    root = Path(prepared.path)
    assert prepared.removed == ["experiment.py"] and not (root / "experiment.py").exists()
    assert sorted(_git(root, "ls-files").decode().split()) == ["README.md", "data.py", "run.py"]
    objects = _all_git_objects(root)
    assert b"def fit_and_score" not in objects and b"StandardScaler" not in objects
    assert normalise(task.expected_conclusion) not in _agent_text(root)


def test_extension_overlay_gives_the_base_version(tmp_path: Path) -> None:
    task = _task("imbalance-reweight")
    root = Path(prepare_workspace(task, tmp_path / "agent").path)
    reference = reference_workspace(task, tmp_path / "reference")
    assert "def fit_unweighted" in (root / "model.py").read_text()
    assert b"inverse_frequency_weights" not in _all_git_objects(root)
    assert "def inverse_frequency_weights" in (reference / "model.py").read_text()
    assert not (reference / ".git").exists()
    done = subprocess.run([sys.executable, "run.py"], cwd=root, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "balanced_accuracy_unweighted" in (root / "results.json").read_text()


def test_same_task_gives_the_same_commit(tmp_path: Path) -> None:
    task = _task("kmeans-init")
    first = prepare_workspace(task, tmp_path / "a")
    second = prepare_workspace(task, tmp_path / "b")
    assert first.commit == second.commit
    assert _git(Path(first.path), "log", "--format=%an %at %ct").decode().split() == [
        "FailAtlas", "946684800", "946684800"]


def _toy_task(tmp_path: Path, **masking) -> tuple[TaskSpec, Path]:
    repo = tmp_path / "toy"
    repo.mkdir(parents=True)
    (repo / "core.py").write_text(
        'def secret_formula(x):\n    """Return the answer."""\n'
        '    return (x * 40 + 2) // (x if x else 1) + 1234567\n')
    (repo / "README.md").write_text("A toy repository.\n")
    task = TaskSpec.model_validate({
        "id": "toy-task", "benchmark": "test", "kind": "masked_functions", "question": "Does it work?",
        "expected_conclusion": "The toy formula always returns forty-two plus a large constant offset.",
        "masking": masking, "run": {"command": "python3 core.py", "results_file": "results.json"},
    })
    return task, repo


def test_history_of_the_source_repository_is_not_copied(tmp_path: Path) -> None:
    task, repo = _toy_task(tmp_path, functions=[{"path": "core.py", "qualname": "secret_formula"}])
    _git(repo, "init", "-q")
    (repo / "old.py").write_text("OLD_SECRET_IN_HISTORY = 'an old answer from an earlier commit'\n")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first")
    (repo / "old.py").unlink()
    (repo / "results.json").write_text('{"answer": 42}')
    prepared = prepare_workspace(task, tmp_path / "agent", repo=repo)
    root = Path(prepared.path)
    assert b"OLD_SECRET_IN_HISTORY" not in _all_git_objects(root)
    assert _git(root, "rev-list", "--all", "--count").strip() == b"1"
    assert "results.json" in prepared.removed and not (root / "results.json").exists()
    assert (repo / ".git").is_dir() and (repo / "results.json").exists()


def test_leaked_conclusion_is_refused_and_the_tree_removed(tmp_path: Path) -> None:
    task, repo = _toy_task(tmp_path, functions=[{"path": "core.py", "qualname": "secret_formula"}])
    (repo / "NOTES.md").write_text(
        "Spoiler:\nthe toy formula ALWAYS returns forty-two plus a large\nconstant offset.\n")
    with pytest.raises(GroundTruthLeakError, match="expected conclusion found in git blob"):
        prepare_workspace(task, tmp_path / "agent", repo=repo)
    assert not (tmp_path / "agent").exists()


def test_masked_body_copied_elsewhere_is_refused(tmp_path: Path) -> None:
    task, repo = _toy_task(tmp_path, functions=[{"path": "core.py", "qualname": "secret_formula"}])
    (repo / "backup.py").write_text("def spare(x):\n    return (x * 40 + 2) // (x if x else 1) + 1234567\n")
    with pytest.raises(GroundTruthLeakError, match="core.py::secret_formula"):
        prepare_workspace(task, tmp_path / "agent", repo=repo)


def test_helper_of_a_masked_file_copied_elsewhere_only_warns(tmp_path: Path) -> None:
    task, repo = _toy_task(tmp_path, files=["core.py"])
    (repo / "other.py").write_text("def spare(x):\n    return (x * 40 + 2) // (x if x else 1) + 1234567\n")
    prepared = prepare_workspace(task, tmp_path / "agent", repo=repo)
    assert any(w.startswith("possible leak: masked file core.py::secret_formula") for w in prepared.warnings)
    (repo / "copy.py").write_text((repo / "core.py").read_text())
    with pytest.raises(GroundTruthLeakError, match="masked file core.py found"):
        prepare_workspace(task, tmp_path / "again", repo=repo)


def test_symlink_out_of_the_repository_is_dropped(tmp_path: Path) -> None:
    task, repo = _toy_task(tmp_path, functions=[{"path": "core.py", "qualname": "secret_formula"}])
    outside = tmp_path / "answers.txt"
    outside.write_text("x")
    (repo / "answers").symlink_to(outside)
    prepared = prepare_workspace(task, tmp_path / "agent", repo=repo)
    assert not (Path(prepared.path) / "answers").exists()
    assert any("symlink answers" in w for w in prepared.warnings)


def test_missing_masked_file_or_function_names_task_and_path(tmp_path: Path) -> None:
    task, repo = _toy_task(tmp_path, files=["nowhere.py"])
    with pytest.raises(InputError, match=r"nowhere\.py.*toy-task|toy-task.*nowhere\.py"):
        prepare_workspace(task, tmp_path / "a", repo=repo)
    task, _ = _toy_task(tmp_path / "b", functions=[{"path": "core.py", "qualname": "missing_fn"}])
    with pytest.raises(InputError, match="toy-task.*missing_fn") as info:
        prepare_workspace(task, tmp_path / "out_b", repo=repo)
    assert info.value.path == "core.py"
    assert not (tmp_path / "out_b").exists()
    task, _ = _toy_task(tmp_path / "c", functions=[{"path": "gone.py", "qualname": "f"}])
    with pytest.raises(InputError, match="gone.py"):
        prepare_workspace(task, tmp_path / "out_c", repo=repo)


def test_existing_destination_needs_force(tmp_path: Path) -> None:
    task = _task("tree-depth")
    dest = tmp_path / "agent"
    dest.mkdir()
    (dest / "stale.txt").write_text("old")
    with pytest.raises(InputError, match="not empty"):
        prepare_workspace(task, dest)
    prepared = prepare_workspace(task, dest, force=True)
    assert not (dest / "stale.txt").exists() and not (dest / "study.py").exists()
    assert prepared.masked_files == ["study.py"]
    with pytest.raises(InputError, match="outside the reference tree"):
        prepare_workspace(task, Path(task.repository.local_path) / "inside", force=True)


def _hidden_test_tasks() -> list[str]:
    return [t.id for t in load_suite() if t.implementation.hidden_tests]


@pytest.mark.slow
@pytest.mark.parametrize("task_id", _hidden_test_tasks())
def test_hidden_tests_fail_on_masked_tree_and_pass_on_reference(task_id: str, tmp_path: Path) -> None:
    task = next(t for t in load_suite() if t.id == task_id)
    masked = run_hidden_tests(task, Path(prepare_workspace(task, tmp_path / "agent").path))
    assert not masked.passed and (masked.failures + masked.errors) > 0
    reference = run_hidden_tests(task, reference_workspace(task, tmp_path / "reference"))
    assert reference.passed, reference.output
    assert reference.tests >= 3


def test_hidden_tests_need_a_task_that_has_them(tmp_path: Path) -> None:
    task = _task("tree-depth")
    with pytest.raises(InputError, match="no hidden tests"):
        run_hidden_tests(task, reference_workspace(task, tmp_path / "reference"))


TWO_FORWARDS = (
    "class Encoder:\n"
    "    def forward(self, x):\n"
    "        return [v * 2 + 7777777 for v in x]  # encoder body\n"
    "\n"
    "\n"
    "class Decoder:\n"
    "    def forward(self, x):\n"
    "        \"\"\"Old docstring.\"\"\"\n"
    "        return [v - 5555555 for v in reversed(x)]  # decoder body\n"
)


def _line_task(tmp_path: Path, **extra) -> tuple[TaskSpec, Path]:
    """A task file's folder holding a repository whose masked method is named without its class, by lines."""
    folder = tmp_path / "bench"
    repo = folder / "code"
    repo.mkdir(parents=True)
    (repo / "nets.py").write_text(TWO_FORWARDS)
    (repo / "README.md").write_text("Two networks.\n")
    (folder / "paper.txt").write_text("The paper: decoders reverse their input.\n")
    task = TaskSpec.model_validate({
        "id": "lines-task", "benchmark": "test", "kind": "masked_functions", "question": "Run it.",
        "repository": {"local_path": "code"}, "source": str(folder / "rows.jsonl"),
        "masking": {"functions": [{"path": "nets.py", "qualname": "forward", "line_start": 7, "line_end": 9,
                                   "docstring": "Reverse x and shift every value down."}]},
        **extra,
    })
    return task, repo


def test_a_method_located_by_its_lines_is_stubbed_with_its_description(tmp_path: Path) -> None:
    task, repo = _line_task(tmp_path)
    prepared = prepare_workspace(task, tmp_path / "agent")
    root = Path(prepared.path)
    assert prepared.masked_functions == ["nets.py::Decoder.forward"]
    text = (root / "nets.py").read_text()
    assert "v * 2 + 7777777" in text and "5555555" not in text and "Old docstring" not in text
    assert '"""Reverse x and shift every value down."""' in text
    assert b"5555555" not in _all_git_objects(root)


def test_the_body_of_a_line_located_method_copied_elsewhere_is_refused(tmp_path: Path) -> None:
    task, repo = _line_task(tmp_path)
    (repo / "spare.py").write_text("def spare(x):\n    return [v - 5555555 for v in reversed(x)]  # decoder body\n")
    with pytest.raises(GroundTruthLeakError, match=r"masked function in nets.py::Decoder.forward found in git blob"):
        prepare_workspace(task, tmp_path / "agent")


def test_lines_pointing_at_another_function_are_refused(tmp_path: Path) -> None:
    task, _ = _line_task(tmp_path)
    task.masking.functions[0].qualname = "backward"
    with pytest.raises(InputError, match="line 7 defines 'Decoder.forward', not 'backward'") as info:
        prepare_workspace(task, tmp_path / "agent")
    assert info.value.path == "nets.py" and not (tmp_path / "agent").exists()


def test_materials_are_committed_with_the_tree_and_given_on_purpose(tmp_path: Path) -> None:
    task, _ = _line_task(tmp_path, materials={"paper.txt": "paper.txt", "docs/paper-copy.txt": "paper.txt"})
    # A paper may quote the code: the material is what the benchmark gives, so that is only a warning.
    (tmp_path / "bench" / "paper.txt").write_text("Listing 1: return [v - 5555555 for v in reversed(x)]  "
                                                  "# decoder body\n")
    prepared = prepare_workspace(task, tmp_path / "agent")
    root = Path(prepared.path)
    assert prepared.materials == ["docs/paper-copy.txt", "paper.txt"]
    assert (root / "paper.txt").read_text().startswith("Listing 1")
    assert sorted(_git(root, "ls-files").decode().split()) == ["README.md", "docs/paper-copy.txt", "nets.py",
                                                               "paper.txt"]
    assert any(w.startswith("possible leak: masked function in nets.py::Decoder.forward found in material "
                            "paper.txt") for w in prepared.warnings)


def test_a_material_never_replaces_a_repository_file_and_must_exist(tmp_path: Path) -> None:
    task, _ = _line_task(tmp_path, materials={"README.md": "paper.txt"})
    with pytest.raises(InputError, match="the material README.md would replace the repository's own README.md"):
        prepare_workspace(task, tmp_path / "agent")
    task, _ = _line_task(tmp_path / "b", materials={"paper.txt": "missing.txt"})
    with pytest.raises(InputError, match="the material missing.txt does not exist"):
        prepare_workspace(task, tmp_path / "agent")
    outside = tmp_path / "secret.txt"
    outside.write_text("host file")
    task, _ = _line_task(tmp_path / "c", materials={"paper.txt": "link.txt"})
    (tmp_path / "c" / "bench" / "link.txt").symlink_to(outside)
    with pytest.raises(InputError, match="leads outside the task folder"):
        prepare_workspace(task, tmp_path / "agent")


def test_a_task_without_its_repository_says_repository_not_available(tmp_path: Path) -> None:
    task, repo = _line_task(tmp_path)
    shutil.rmtree(repo)
    with pytest.raises(InputError) as info:
        prepare_workspace(task, tmp_path / "agent")
    assert f"task lines-task: repository not available: its bundled copy {repo} does not exist" in str(info.value)
    assert "--repo PATH" in info.value.one_line() and "failatlas repos add" in info.value.one_line()
    remote = task.model_copy(update={"repository": task.repository.model_copy(
        update={"local_path": None, "url": "https://github.com/acme/nets", "commit": "abc123"})})
    with pytest.raises(InputError, match="repository not available: its repository https://github.com/acme/nets "
                                         "at commit abc123 has no local copy"):
        prepare_workspace(remote, tmp_path / "agent")
    with pytest.raises(InputError, match="the repository given is not a folder"):
        prepare_workspace(remote, tmp_path / "agent", repo=tmp_path / "nowhere")
