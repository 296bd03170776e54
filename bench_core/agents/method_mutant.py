"""`method-mutant`: the reference with a masked function filled by another method (issue 50).

Syntax mutants (`mutant.py`) change one token of the reference; a task whose checks test only an outcome that a
different method also reaches lets that method through (a reweighting task passed by threshold moving). A method
mutant is such a different method, in two kinds:

- **declared** by the task file (`method_mutants`, `tasks/method_mutants.py`): the task author's plausible other
  methods (resampling, no autocast, first-k seeding, a penalised intercept), named `method:<name>`;
- **generic**, made for any task from each masked function (`masked_functions`): `stub` (the body the agent was
  given: `raise NotImplementedError`), `constant` (`return 0`), `identity` (returns its first argument) and
  `defaults` (every call in it without its keyword arguments: the libraries' defaults), named
  `generic:<path>::<qualname>:<kind>`. A kind that does not apply to a function (no argument to return, no keyword
  to drop) is not made.

`method_candidates` lists them, declared first, each with the repository files it rewrites; the agent, given a
name, rebuilds the same files from the reference, as `mutant` does.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass
from pathlib import Path

from failatlas.bench_core.agents.base import register_agent
from failatlas.bench_core.agents.mutant import MutantAgent, masked_functions, splice_function
from failatlas.bench_core.prepare.stubs import StubError, StubTarget, locate, stub_targets
from failatlas.bench_core.tasks.method_mutants import definition
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.bench_core.tasks.paths import task_path
from failatlas.core import syntax
from failatlas.core.errors import InputError

GENERIC_KINDS = ("stub", "constant", "identity", "defaults")


@dataclass(frozen=True)
class MethodMutant:
    """One method mutant: its name (module docstring), what it does, and whether the task declared it."""

    name: str
    what: str
    declared: bool


def _docstring(fn: ast.AST) -> list[ast.stmt]:
    first = fn.body[0] if fn.body else None
    is_doc = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value,
                                                                                                   str)
    return [first] if is_doc else []


def _with_body(fn: ast.AST, statement: ast.stmt) -> ast.AST:
    new = copy.deepcopy(fn)
    new.body = [*_docstring(fn), statement]
    return ast.fix_missing_locations(new)


def _first_argument(fn: ast.AST, qualname: str) -> str | None:
    args = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
    in_class = "." in qualname and "<locals>" not in qualname
    static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list)
    if in_class and not static and args:
        args = args[1:]
    return args[0] if args else None


def _without_keywords(fn: ast.AST) -> ast.AST | None:
    new = copy.deepcopy(fn)
    dropped = 0
    for statement in new.body[len(_docstring(fn)):]:
        for node in ast.walk(statement):
            if isinstance(node, ast.Call):
                kept = [k for k in node.keywords if k.arg is None]
                dropped += len(node.keywords) - len(kept)
                node.keywords = kept
    return ast.fix_missing_locations(new) if dropped else None


def _generic(rel: str, source: str, qualname: str, fn: ast.AST, kind: str) -> tuple[str, str] | None:
    """(what, new source) of one generic kind on one function; None where it does not apply."""
    if kind == "stub":
        try:
            stubbed = stub_targets(source, [StubTarget(qualname)], filename=rel).source
        except StubError:
            return None
        return "the stub's body (raise NotImplementedError)", stubbed
    if kind == "constant":
        if fn.name == "__init__":
            return None
        return "returns the constant 0", splice_function(source, fn, _with_body(fn, ast.Return(ast.Constant(0))))
    if kind == "identity":
        first = _first_argument(fn, qualname)
        if first is None or fn.name == "__init__":
            return None
        return f"returns its argument {first!r} unchanged", splice_function(
            source, fn, _with_body(fn, ast.Return(ast.Name(first, ast.Load()))))
    mutated = _without_keywords(fn)
    if mutated is None:
        return None
    return "every call without its keyword arguments (the libraries' defaults)", splice_function(source, fn, mutated)


def _located(task: TaskSpec, reference) -> dict[str, dict[str, ast.AST]]:  # noqa: ANN001
    """path -> qualname -> definition, of every masked function in the reference."""
    out: dict[str, dict[str, ast.AST]] = {}
    for rel, targets in masked_functions(task, reference).items():
        tree = syntax.parse((reference / rel).read_bytes(), rel)
        for target in targets:
            for qualname, fn in locate(tree, target, rel)[0]:
                out.setdefault(rel, {}).setdefault(qualname, fn)
    return out


def _declared(task: TaskSpec, reference, masked: dict[str, dict[str, ast.AST]]  # noqa: ANN001
              ) -> list[tuple[MethodMutant, dict[str, str]]]:
    out = []
    for i, spec in enumerate(task.method_mutants):
        files: dict[str, str] = {}
        for j, item in enumerate(spec.replace):
            field = f"method_mutants[{i}].replace[{j}]"
            if item.qualname not in masked.get(item.path, {}):
                known = ", ".join(f"{p}::{q}" for p, qs in masked.items() for q in qs) or "none"
                raise InputError(f"method mutant {spec.name!r}: {item.path}::{item.qualname} is not a masked "
                                 f"function of task {task.id} (masked: {known})", path=task.source, field=field)
            new = definition(task_path(task, item.source, field=f"{field}.source"), item.qualname,
                             task_file=task.source, field=f"{field}.source")
            source = files.get(item.path) or (reference / item.path).read_text(encoding="utf-8")
            tree = syntax.parse(source, item.path)
            [(_, fn), *_] = locate(tree, StubTarget(item.qualname), item.path)[0]
            files[item.path] = splice_function(source, fn, new)
        out.append((MethodMutant(f"method:{spec.name}", spec.what, declared=True), files))
    return out


def method_candidates(task: TaskSpec, reference) -> list[tuple[MethodMutant, dict[str, str]]]:  # noqa: ANN001
    """Every method mutant of `task` on its `reference` tree (module docstring), declared first, each with the
    repository files it rewrites (path -> source); generic ones that change nothing, or repeat an earlier one, are
    left out. Raises InputError naming the field when a declared mutant names a function that is not masked."""
    masked = _located(task, reference)
    out = _declared(task, reference, masked)
    seen = {tuple(sorted(files.items())) for _, files in out}
    for rel, functions in masked.items():
        source = (reference / rel).read_text(encoding="utf-8")
        for qualname, fn in functions.items():
            for kind in GENERIC_KINDS:
                made = _generic(rel, source, qualname, fn, kind)
                if made is None or made[1] == source or ((rel, made[1]),) in seen:
                    continue
                try:
                    compile(made[1], rel, "exec", dont_inherit=True)
                except (SyntaxError, ValueError):
                    continue
                seen.add(((rel, made[1]),))
                out.append((MethodMutant(f"generic:{rel}::{qualname}:{kind}", made[0], declared=False),
                            {rel: made[1]}))
    return out


class MethodMutantAgent(MutantAgent):
    """Restores the reference with one masked function filled by another method (a declared or generic method
    mutant); writes no design or conclusion and runs nothing: what is measured is whether the task's checks
    reject that method."""

    name = "method-mutant"

    def mutated(self, task: TaskSpec, reference: Path) -> tuple[str, dict[str, str]] | None:
        for m, files in method_candidates(task, reference):
            if m.name == self.mutant:
                return f"{m.name}: {m.what}", files
        return None


register_agent("method-mutant")(MethodMutantAgent)
