"""Method mutants a task file declares (`TaskSpec.method_mutants`, issue 50): each replaces one or more masked
functions by the definition a Python file beside the task holds.

```yaml
method_mutants:
  - name: threshold-moving          # lower-case letters, digits and '-'; unique in the task
    what: fits the unweighted model and moves its decision threshold to the training prior
    replace:                        # one entry per function the mutant rewrites
      - {path: model.py, qualname: fit_reweighted, source: method_mutants/threshold_moving.py}
```

`path` is the repository file, `qualname` the function (`name` or `Class.name`), `source` a file relative to the
task file's folder holding exactly one function definition with that function's name (and nothing else but a
docstring: imports go inside the function). A source that is absolute, holds `..`, is a link or leads out of the
task folder, that does not parse or that holds anything else is an InputError naming the task file and the field
(`method_mutants[0].replace[0].source`), when the task is read.
"""

from __future__ import annotations

import ast
from pathlib import Path

from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.bench_core.tasks.paths import task_path
from failatlas.core import syntax
from failatlas.core.errors import InputError

__all__ = ["check_declared", "definition"]


def definition(path: Path, qualname: str, *, task_file: str | None, field: str) -> ast.FunctionDef:
    """The one function definition the file at `path` holds, named as `qualname`'s last part. InputError naming
    `task_file` and `field` when the file is missing, a link, unreadable, or holds anything else."""
    try:
        tree = syntax.read(path)
    except syntax.UnreadableSource as exc:
        raise InputError(f"method mutant source {path}: {exc.why}", path=task_file, field=field) from None
    body = list(tree.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and \
            isinstance(body[0].value.value, str):
        body = body[1:]  # a module docstring
    name = qualname.rsplit(".", 1)[-1]
    functions = [n for n in body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    if len(functions) != 1 or len(body) != 1:
        found = ", ".join(type(n).__name__ for n in body) or "nothing"
        raise InputError(f"method mutant source {path} must hold exactly one function definition, `def {name}(...)`"
                         f" (imports inside it), not: {found}", path=task_file, field=field)
    if functions[0].name != name:
        raise InputError(f"method mutant source {path} defines {functions[0].name!r}, not {name!r} (the function "
                         f"{qualname!r} it replaces)", path=task_file, field=field)
    return functions[0]


def check_declared(task: TaskSpec, task_file: str | None) -> None:
    """Check every declared method mutant's sources (`definition`) and that no mutant replaces one function twice;
    InputError naming the field otherwise."""
    for i, spec in enumerate(task.method_mutants):
        seen: set[tuple[str, str]] = set()
        for j, item in enumerate(spec.replace):
            field = f"method_mutants[{i}].replace[{j}]"
            if (item.path, item.qualname) in seen:
                raise InputError(f"method mutant {spec.name!r} replaces {item.path}::{item.qualname} twice",
                                 path=task_file, field=field)
            seen.add((item.path, item.qualname))
            definition(task_path(task, item.source, field=f"{field}.source"), item.qualname, task_file=task_file,
                       field=f"{field}.source")
