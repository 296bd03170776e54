"""`mutant`: the reference implementation with one small change in one masked function (issue 38).

`tasks validate` measures how strong a task's checks are by how many such mutants they reject (its mutation score,
`task_validation/mutation.py`). The operators are our own, on the reference function's syntax tree: arithmetic
swapped (+ and -, * and /, ** and *, @ and *, augmented too), comparisons flipped (< and >, == and !=, in and not
in), `and` and `or` swapped, a numeric constant +1, *2 or 0, a unary minus or `not` dropped, a condition negated,
a statement dropped, `return x` made `return None`, a call's first two arguments swapped, a keyword argument
dropped. A mutant is named `<path>::<qualname>:<operator>:<n>` (the n-th site of that operator in the function, in
`ast.walk` order), so the agent, given the name, rebuilds the same file from the reference. Only mutants that
compile and differ from the reference are offered; `select` picks at most `limit` of them, seeded, round-robin over
the operators so that no one operator fills the sample.
"""

from __future__ import annotations

import ast
import copy
import random
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from failatlas.bench_core.agents.base import AgentContext, AgentOutcome, register_agent
from failatlas.bench_core.agents.builtin import GoldAgent
from failatlas.bench_core.prepare.leaks import function_targets
from failatlas.bench_core.prepare.stubs import StubTarget, function_bodies, iter_functions, locate
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.bench_core.tasks.paths import task_path
from failatlas.core import syntax
from failatlas.core.errors import ConfigError

_ARITHMETIC = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Mult,
               ast.Pow: ast.Mult, ast.MatMult: ast.Mult, ast.Mod: ast.FloorDiv}
_COMPARISON = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE, ast.Eq: ast.NotEq,
               ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}
_SYMBOL = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Pow: "**",
           ast.MatMult: "@", ast.Mod: "%", ast.Lt: "<", ast.Gt: ">", ast.LtE: "<=", ast.GtE: ">=", ast.Eq: "==",
           ast.NotEq: "!=", ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in"}


@dataclass(frozen=True)
class Mutant:
    """One mutant: its name (module docstring), where it is and what it changes (`line 17: + -> -`)."""

    name: str
    path: str
    qualname: str
    operator: str
    what: str


def _sites(fn: ast.AST) -> Iterator[tuple[int, str, str]]:
    """(index in `ast.walk(fn)`, operator, what) of every place an operator applies, the docstring left alone."""
    body = fn.body
    doc = body[0] if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) else None
    skip = {id(n) for n in ast.walk(doc)} if doc is not None else set()
    for index, node in enumerate(ast.walk(fn)):
        if id(node) in skip or index == 0:
            continue
        line = f"line {getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.BinOp | ast.AugAssign) and type(node.op) in _ARITHMETIC:
            yield index, "arithmetic", f"{line}: {_SYMBOL[type(node.op)]} -> {_SYMBOL[_ARITHMETIC[type(node.op)]]}"
        elif isinstance(node, ast.Compare) and type(node.ops[0]) in _COMPARISON:
            yield index, "comparison", f"{line}: {_SYMBOL[type(node.ops[0])]} -> " \
                                       f"{_SYMBOL[_COMPARISON[type(node.ops[0])]]}"
        elif isinstance(node, ast.BoolOp):
            yield index, "boolean", f"{line}: {'and -> or' if isinstance(node.op, ast.And) else 'or -> and'}"
        elif isinstance(node, ast.Constant) and type(node.value) in (int, float):
            for how in ("+1", "*2", "0"):
                if _constant(node.value, how) != node.value:
                    yield index, f"constant{how}", f"{line}: {node.value!r} -> {_constant(node.value, how)!r}"
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.Not):
            yield index, "unary", f"{line}: {'-' if isinstance(node.op, ast.USub) else 'not'} dropped"
        elif isinstance(node, ast.If | ast.While):
            yield index, "negate-condition", f"{line}: condition negated"
        elif isinstance(node, ast.Return) and node.value is not None and not \
                (isinstance(node.value, ast.Constant) and node.value.value is None):
            yield index, "return-none", f"{line}: returns None"
        elif isinstance(node, ast.Call):
            positional = [a for a in node.args if not isinstance(a, ast.Starred)]
            if len(positional) == len(node.args) >= 2:
                yield index, "swap-arguments", f"{line}: {syntax.text(node.func, 30)}'s first two arguments swapped"
            for k, keyword in enumerate(node.keywords):
                if keyword.arg is not None:
                    yield index, f"drop-keyword-{k}", f"{line}: {syntax.text(node.func, 30)} without {keyword.arg}="
        if isinstance(node, ast.stmt) and not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield index, "drop-statement", f"{line}: {type(node).__name__.lower()} statement dropped"


def _constant(value: int | float, how: str) -> int | float:
    return value + 1 if how == "+1" else value * 2 if how == "*2" else type(value)(0)


def _parent(root: ast.AST, target: ast.AST) -> tuple[ast.AST, str, int | None]:
    for node in ast.walk(root):
        for field, value in ast.iter_fields(node):
            if value is target:
                return node, field, None
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if item is target:
                        return node, field, i
    raise ValueError("node not found in its function")


def _replace(root: ast.AST, target: ast.AST, new: ast.AST | None) -> None:
    """Put `new` in `target`'s place in `root` (None: remove the statement, `pass` when it was the only one)."""
    parent, field, index = _parent(root, target)
    if index is None:
        setattr(parent, field, new)
        return
    items = getattr(parent, field)
    if new is not None:
        items[index] = new
    elif len(items) > 1:
        del items[index]
    else:
        items[index] = ast.Pass()


def _mutate(fn: ast.AST, index: int, operator: str) -> ast.AST:
    """A copy of `fn` with `operator` applied at `ast.walk` position `index`."""
    mutated = copy.deepcopy(fn)
    node = list(ast.walk(mutated))[index]
    if operator == "arithmetic":
        node.op = _ARITHMETIC[type(node.op)]()
    elif operator == "comparison":
        node.ops = [_COMPARISON[type(node.ops[0])](), *node.ops[1:]]
    elif operator == "boolean":
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif operator.startswith("constant"):
        node.value = _constant(node.value, operator[len("constant"):])
    elif operator == "unary":
        _replace(mutated, node, node.operand)
    elif operator == "negate-condition":
        node.test = ast.UnaryOp(ast.Not(), node.test)
    elif operator == "return-none":
        node.value = ast.Constant(None)
    elif operator == "swap-arguments":
        node.args[0], node.args[1] = node.args[1], node.args[0]
    elif operator.startswith("drop-keyword-"):
        del node.keywords[int(operator.rsplit("-", 1)[1])]
    elif operator == "drop-statement":
        _replace(mutated, node, None)
    return ast.fix_missing_locations(mutated)


def splice_function(source: str, fn: ast.AST, mutated: ast.AST) -> str:
    """`source` with the lines of `fn` (decorators included) replaced by `mutated`, unparsed at its indent."""
    lines = source.splitlines(keepends=True)
    first = fn.decorator_list[0].lineno if fn.decorator_list else fn.lineno
    text = textwrap.indent(ast.unparse(mutated), " " * fn.col_offset) + "\n"
    return "".join(lines[:first - 1]) + text + "".join(lines[fn.end_lineno:])


def masked_functions(task: TaskSpec, reference: Path) -> dict[str, list[StubTarget]]:
    """The functions the agent has to write, by file: the masked functions; every function of a masked `.py`
    file; the functions an overlay's base version lacks or writes differently."""
    found = {rel: list(targets) for rel, targets in function_targets(task).items()}
    files = [reference / rel for rel in task.masking.files]
    files = [p for f in files for p in (sorted(f.rglob("*.py")) if f.is_dir() else [f]) if p.suffix == ".py"]
    for path in files:
        if path.is_file():
            names = {q for q, _ in iter_functions(syntax.parse(path.read_bytes(), path.name)) if "<locals>" not in q}
            found.setdefault(path.relative_to(reference).as_posix(), []).extend(StubTarget(q) for q in sorted(names))
    if task.masking.overlay:
        overlay = task_path(task, task.masking.overlay, field="masking.overlay")
        for base in sorted(overlay.rglob("*.py")):
            rel = base.relative_to(overlay).as_posix()
            if (reference / rel).is_file():
                theirs = function_bodies(base.read_text(encoding="utf-8"))
                ours = function_bodies((reference / rel).read_text(encoding="utf-8"))
                found.setdefault(rel, []).extend(StubTarget(q) for q in sorted(ours) if "<locals>" not in q
                                                 and theirs.get(q) != ours[q])
    return found


def candidates(task: TaskSpec, reference: Path) -> list[tuple[Mutant, str, str]]:
    """(mutant, path, mutated source) of every mutant of the task's masked functions (`masked_functions`) in the
    `reference` tree, in a fixed order; those that do not compile or change nothing are left out."""
    out: list[tuple[Mutant, str, str]] = []
    seen: set[str] = set()
    for rel, targets in masked_functions(task, reference).items():
        source = (reference / rel).read_text(encoding="utf-8")
        tree = syntax.parse(source, rel)
        for target in targets:
            for qualname, fn in locate(tree, target, rel)[0]:
                counts: dict[str, int] = {}
                for index, operator, what in _sites(fn):
                    n = counts[operator] = counts.get(operator, 0) + 1
                    try:
                        mutated = splice_function(source, fn, _mutate(fn, index, operator))
                        compile(mutated, rel, "exec", dont_inherit=True)
                    except (SyntaxError, ValueError, TypeError, RecursionError):
                        continue
                    if mutated == source or mutated in seen:
                        continue
                    seen.add(mutated)
                    out.append((Mutant(f"{rel}::{qualname}:{operator}:{n}", rel, qualname, operator, what), rel,
                                mutated))
    return out


def select(found: list[Mutant], limit: int, seed: int) -> list[Mutant]:
    """At most `limit` of `found`: shuffled with `seed`, then taken round-robin over the operators (the
    `constant` variants and `drop-keyword` sites count as one operator each), in `found`'s order."""
    order = list(found)
    random.Random(seed).shuffle(order)
    groups: dict[str, list[Mutant]] = {}
    for mutant in order:
        family = next((f for f in ("constant", "drop-keyword") if mutant.operator.startswith(f)), mutant.operator)
        groups.setdefault(family, []).append(mutant)
    picked: list[Mutant] = []
    while len(picked) < limit and any(groups.values()):
        for family in sorted(groups):
            if groups[family] and len(picked) < limit:
                picked.append(groups[family].pop(0))
    rank = {m.name: i for i, m in enumerate(found)}
    return sorted(picked, key=lambda m: rank[m.name])


class MutantAgent(GoldAgent):
    """Restores the reference with the one mutant named `mutant` in place; writes no design or conclusion and
    runs nothing: what is measured is whether the task's checks reject the mutated code."""

    name = "mutant"
    needs_reference = True

    def __init__(self, mutant: str) -> None:
        super().__init__(execute=False)
        self.mutant = mutant

    def mutated(self, task: TaskSpec, reference: Path) -> tuple[str, dict[str, str]] | None:
        """(`name: what`, path -> source) of the mutant this agent writes; None when the reference has none of
        that name."""
        for m, rel, src in candidates(task, reference):
            if m.name == self.mutant:
                return f"{m.name}: {m.what}", {rel: src}
        return None

    def run(self, ctx: AgentContext) -> AgentOutcome:
        ref = self._require_reference(ctx)
        self.restore(ctx)
        found = self.mutated(ref.task, ref.tree)
        if found is None:
            raise ConfigError(f"no {self.name} named {self.mutant!r} for the reference of {ref.task.id}")
        said, files = found
        for rel, source in files.items():
            ctx.write(rel, source)
        ctx.note(f"{self.name} {said}")
        return AgentOutcome(fault_injected=self.name, notes=said)


register_agent("mutant")(MutantAgent)
