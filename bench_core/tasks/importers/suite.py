"""FailAtlas's own task format: a folder per task holding `task.yaml` (plus its repo/ and hidden_tests/), as in
the bundled suites. A suite is a folder of such task folders."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from failatlas.bench_core.tasks.importers._common import TASK_IMPORTERS, load_yaml, repo_path, validation_error
from failatlas.bench_core.tasks.method_mutants import check_declared
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import InputError
from failatlas.core.importers import Loaded, NoOptions
from failatlas.core.paths import inside

FORMAT = "failatlas"
TASK_FILE = "task.yaml"


# RExBench task folders may hold a task.yaml too, as metadata beside their instructions.md: they are not ours.
_FOREIGN_MARK = "instructions.md"


def _is_task_folder(folder: Path) -> bool:
    return (folder / TASK_FILE).is_file() and not (folder / _FOREIGN_MARK).is_file()


def task_files(path: Path) -> list[Path]:
    """The task.yaml files `path` names: itself, the one in a task folder, or those of a suite's task folders."""
    if path.is_file():
        return [path] if path.name == TASK_FILE and _is_task_folder(path.parent) else []
    if not path.is_dir():
        return []
    if _is_task_folder(path):
        return [path / TASK_FILE]
    return sorted(f / TASK_FILE for f in path.iterdir() if f.is_dir() and _is_task_folder(f))


def _inside(folder: Path, value: object, task_file: Path, field: str) -> str:
    """`value`, a path relative to the task folder, made absolute; InputError when it is not a relative path or,
    links followed, leaves the folder: a task file may not hand the sandbox (or the agent) files from elsewhere
    on the host."""
    return str(inside(folder, value, within="the task folder", path=str(task_file), field=field))


def load_task(task_file: Path) -> TaskSpec:
    """Parse one task.yaml; paths in it (repository, overlay, hidden tests) become absolute.

    Raises InputError naming the file (and field) when it is not valid YAML, not a valid TaskSpec, or one of its
    paths is absolute or leads outside its folder (`..`, a link): the repository, overlay and hidden tests must
    lie inside the task folder, the results file and masked paths inside the repository. Declared method mutants'
    sources must lie inside the task folder and hold one definition each (`tasks/method_mutants.py`).
    """
    task_file = Path(task_file)
    folder = task_file.absolute().parent.resolve()  # a task.yaml that is a link does not move its task folder
    task_file = folder / task_file.name
    data = load_yaml(task_file)
    if not isinstance(data, dict):
        raise InputError("a task file must hold a mapping", path=str(task_file))
    data["source"] = str(task_file)
    repository = data.setdefault("repository", {})
    if not isinstance(repository, dict):
        raise InputError("must be a mapping", path=str(task_file), field="repository")
    if repository.get("local_path"):
        repository["local_path"] = _inside(folder, repository["local_path"], task_file, "repository.local_path")
    masking = data.get("masking") or {}
    if isinstance(masking, dict) and masking.get("overlay"):
        masking["overlay"] = _inside(folder, masking["overlay"], task_file, "masking.overlay")
    implementation = data.get("implementation") or {}
    if isinstance(implementation, dict):
        hidden = implementation.get("hidden_tests") or []
        if not isinstance(hidden, list):
            raise InputError("must be a list of paths", path=str(task_file), field="implementation.hidden_tests")
        implementation["hidden_tests"] = [
            _inside(folder, item, task_file, "implementation.hidden_tests") for item in hidden
        ]
    mutants = data.get("method_mutants") or []
    for i, spec in enumerate(mutants if isinstance(mutants, list) else []):
        if not isinstance(spec, dict) or not isinstance(spec.get("replace"), list):
            continue
        mutants[i] = spec = {**spec, "replace": list(spec["replace"])}  # a YAML alias repeats one object: copies
        replace = spec["replace"]
        for j, item in enumerate(replace):
            if isinstance(item, dict) and "source" in item:  # inside the folder, and no link (read refuses one)
                replace[j] = item = dict(item)
                field = f"method_mutants[{i}].replace[{j}].source"
                _inside(folder, item["source"], task_file, field)
                item["source"] = str(inside(folder, item["source"], within="the task folder", follow_last=False,
                                            path=str(task_file), field=field))
    try:
        task = TaskSpec.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc, path=task_file, prefix="") from exc
    _check_repository_paths(task, task_file)
    check_declared(task, str(task_file))
    return task


def _check_repository_paths(task: TaskSpec, task_file: Path) -> None:
    """Paths inside the bundled repository must stay there once its links are followed."""
    repo = Path(task.repository.local_path) if task.repository.local_path else None
    if task.run.results_file:
        repo_path(task.run.results_file, repo=repo, path=task_file, field="run.results_file")
    for rel in [*task.masking.files, *task.masking.remove_also]:
        repo_path(rel, repo=repo, path=task_file, field="masking")
    for ref in task.masking.functions:
        repo_path(ref.path, repo=repo, path=task_file, field="masking.functions")


@TASK_IMPORTERS.register(FORMAT)
class SuiteImporter:
    """FailAtlas task folders (task.yaml), or a suite: a folder of them."""

    name = FORMAT
    description = "FailAtlas task folders (task.yaml), or a suite: a folder of them"
    Options = NoOptions
    suffixes = ()
    sniff_order = 5

    def sniff(self, path: Path) -> bool:
        return bool(task_files(path))

    def root(self, path: Path) -> Path:
        return path.parent if path.is_file() else path

    def load(self, path: Path, options: NoOptions) -> Loaded[TaskSpec]:
        files = task_files(path)
        if not files:
            raise InputError(f"no {TASK_FILE} here", path=str(path))
        return Loaded(path=path, format=self.name, records=[load_task(f) for f in files])
