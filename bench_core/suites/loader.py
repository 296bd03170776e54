"""Bundled task suites: one folder per task holding task.yaml, repo/ and hidden_tests/."""

from __future__ import annotations

from pathlib import Path

import yaml
from failatlas.bench_core.tasks.model import TaskSpec
from pydantic import ValidationError

from failatlas.core.errors import InputError, NotFoundError

SUITES: dict[str, Path] = {"failatlas-mini": Path(__file__).resolve().parent / "mini"}
TASK_FILE = "task.yaml"


def suite_names() -> list[str]:
    """Names of the bundled suites."""
    return sorted(SUITES)


def suite_dir(name: str) -> Path:
    """The folder of suite `name`; raises NotFoundError for an unknown name."""
    if name not in SUITES:
        raise NotFoundError(f"no bundled suite named {name!r}",
                            hint=f"choose one of: {', '.join(suite_names())}")
    return SUITES[name]


def load_task(task_file: Path) -> TaskSpec:
    """Parse one task.yaml; paths in it (repository, overlay, hidden tests) become absolute.

    Raises InputError naming the file when it is not valid YAML or not a valid TaskSpec.
    """
    task_file = Path(task_file).resolve()
    folder = task_file.parent
    try:
        data = yaml.safe_load(task_file.read_text())
    except yaml.YAMLError as exc:
        raise InputError(f"not valid YAML: {exc}", path=str(task_file)) from exc
    if not isinstance(data, dict):
        raise InputError("a task file must hold a mapping", path=str(task_file))
    data["source"] = str(task_file)
    repository = data.setdefault("repository", {})
    if repository.get("local_path"):
        repository["local_path"] = str((folder / repository["local_path"]).resolve())
    masking = data.get("masking") or {}
    if masking.get("overlay"):
        masking["overlay"] = str((folder / masking["overlay"]).resolve())
    implementation = data.get("implementation") or {}
    hidden = implementation.get("hidden_tests", [])
    implementation["hidden_tests"] = [str((folder / path).resolve()) for path in hidden]
    try:
        return TaskSpec.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"not a valid task: {exc}", path=str(task_file)) from exc


def load_suite(name: str = "failatlas-mini") -> list[TaskSpec]:
    """Every task of the bundled suite `name`, in folder order. Raises NotFoundError for an unknown suite."""
    return [load_task(task_file) for task_file in sorted(suite_dir(name).glob(f"*/{TASK_FILE}"))]
