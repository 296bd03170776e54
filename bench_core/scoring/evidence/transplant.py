"""The transplant tree: the pristine masked repository with only the agent's masked functions put in (and what
they name), nothing else of the agent's. A hidden-test pass must survive there (docs/metrics.md, "Transplant").

The counterfactual (stubs back, the rest of the agent's diff kept) cannot attribute a pass when the rest of the
diff tells the two trees apart and does the work itself where the masked function holds the agent's text: code at
import that answers the hidden test's call through a private copy of the tree (red team 2, /tmp/rt/delegate.py),
a same-named package, a code-object swap. Syntax rules (`rebinding.py`) name such routes one by one; this tree
removes them all: the only code of the agent's that runs in it is the masked functions' own code when they are
called, and what they name. It holds the pristine masked repository, every masked function replaced by the agent's
definition (same place, same nesting), and, appended to the masked file, the agent's new top-level definitions the
masked functions name (transitively: functions, classes, imports of installed modules, constant assignments) and
the agent's new methods of a masked method's class whose names it reads as attributes. A definition is carried
only when defining it runs none of the agent's code: decorators, defaults, annotations, bases and class-level
values must be inert (constants, names, attribute chains, calls of installed code with constant arguments). What
cannot be carried stays out; the masked function then fails there as it would without it.
"""

from __future__ import annotations

import ast
import shutil
import sys
import textwrap
from pathlib import Path

from failatlas.bench_core.prepare.leaks import function_targets
from failatlas.bench_core.prepare.stubs import parse_python
from failatlas.bench_core.scoring.evidence.constructed import bound_names as _bound
from failatlas.bench_core.scoring.evidence.constructed import find_class as _find_class
from failatlas.bench_core.scoring.evidence.constructed import read_names as _named
from failatlas.bench_core.scoring.evidence.counterfactual import Restored
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.paths import inside

MAX_CARRIED = 200
MAX_FILE_BYTES = 2 * 1024 * 1024
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _find(body: list[ast.stmt], qualname: str) -> ast.AST | None:
    node = None
    for part in qualname.split("."):
        node = next((n for n in body if isinstance(n, (*_DEFS, ast.ClassDef)) and n.name == part), None)
        if node is None:
            return None
        body = node.body
    return node if isinstance(node, _DEFS) else None


def _inert(node: ast.AST | None, agent_names: set[str], call_ok: bool = True) -> bool:
    """Whether evaluating `node` at definition time runs none of the agent's code."""
    if node is None or isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Name):
        return True  # a lookup; what it names is carried (or not) on its own
    if isinstance(node, ast.Attribute):
        root = node
        while isinstance(root, ast.Attribute):
            root = root.value
        return isinstance(root, ast.Name) and root.id not in agent_names
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return all(_inert(e, agent_names, call_ok) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(_inert(e, agent_names, call_ok) for e in [*node.keys, *node.values])
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.operand, ast.Constant)
    if isinstance(node, ast.BinOp):
        return isinstance(node.left, ast.Constant) and isinstance(node.right, ast.Constant)
    if isinstance(node, ast.Call) and call_ok:  # installed code called with constants: np.logspace(-3, 3, 13)
        func_root = node.func
        while isinstance(func_root, ast.Attribute):
            func_root = func_root.value
        return (isinstance(func_root, ast.Name) and func_root.id not in agent_names
                and all(_inert(a, agent_names, call_ok=False) and not isinstance(a, ast.Name) for a in node.args)
                and all(_inert(k.value, agent_names, call_ok=False) and not isinstance(k.value, ast.Name)
                        for k in node.keywords))
    return False


def _signature_inert(node: ast.AST, agent_names: set[str]) -> bool:
    """A def whose decorators, defaults and annotations run none of the agent's code."""
    args = node.args
    parts = [*node.decorator_list, *args.defaults, *(d for d in args.kw_defaults if d is not None), node.returns,
             *(a.annotation for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
               if a is not None)]
    return all(_inert(p, agent_names) and not (isinstance(p, ast.Name) and p.id in agent_names
                                               and p in node.decorator_list) for p in parts)


def _carriable(stmt: ast.stmt, agent_names: set[str]) -> bool:
    if isinstance(stmt, _DEFS):
        return _signature_inert(stmt, agent_names)
    if isinstance(stmt, ast.ClassDef):
        return (not stmt.keywords and all(_inert(b, agent_names) for b in stmt.bases)
                and all(_inert(d, agent_names) and not (isinstance(d, ast.Name) and d.id in agent_names)
                        for d in stmt.decorator_list)
                and all(_carriable(s, agent_names) or isinstance(s, ast.Pass) or
                        (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)) for s in stmt.body))
    if isinstance(stmt, ast.Assign | ast.AnnAssign):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return all(isinstance(t, ast.Name) for t in targets) and _inert(stmt.value, agent_names)
    return False


def _segment(lines: list[str], node: ast.AST, indent: int) -> list[str]:
    start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    text = textwrap.dedent("".join(lines[start - 1:node.end_lineno]))
    return [(" " * indent + ln) if ln.strip() else ln for ln in text.splitlines(keepends=True)]


def _importable(stmt: ast.stmt, tree: Path) -> bool:
    """An import of installed code only (a module of the agent's tree would bring its code along)."""
    if isinstance(stmt, ast.ImportFrom):
        if stmt.level:
            return False
        names = [stmt.module or ""]
    else:
        names = [a.name for a in stmt.names]
    tops = [n.split(".")[0] for n in names]
    return all(t and (t in sys.stdlib_module_names or not ((tree / t).exists() or (tree / f"{t}.py").exists()))
               for t in tops)


def _transplant_file(agent: str, pristine: str, qualnames: list[str], agent_tree: Path) -> tuple[str, list[str]]:
    """The pristine masked file with the agent's definitions of `qualnames` put in, and what it carried."""
    mine, theirs = parse_python(agent), parse_python(pristine)
    lines, plines = agent.splitlines(keepends=True), pristine.splitlines(keepends=True)
    pristine_top = {n for s in theirs.body for n in _bound(s)}
    new_top = {}
    for stmt in mine.body:
        for name in _bound(stmt):
            if name not in pristine_top:
                new_top.setdefault(name, stmt)
    agent_names = set(new_top)
    replacements, masked_nodes, extra_methods, notes = [], [], {}, []
    for qualname in qualnames:
        node, stub = _find(mine.body, qualname), _find(theirs.body, qualname)
        if node is None or stub is None or not _signature_inert(node, agent_names):
            notes.append(f"{qualname}: the agent's definition cannot be carried; the stub stays")
            continue
        masked_nodes.append(node)
        start = min([stub.lineno, *(d.lineno for d in stub.decorator_list)])
        replacements.append((start, stub.end_lineno, _segment(lines, node, stub.col_offset), qualname))
    carried: dict[int, ast.stmt] = {}
    names, attrs = _named(masked_nodes)
    todo = list(names)
    while todo and len(carried) < MAX_CARRIED:
        stmt = new_top.get(todo.pop())
        if stmt is None or id(stmt) in carried:
            continue
        ok = _importable(stmt, agent_tree) if isinstance(stmt, ast.Import | ast.ImportFrom) else \
            _carriable(stmt, agent_names)
        if ok:
            carried[id(stmt)] = stmt
            more, more_attrs = _named([stmt])
            todo += list(more)
            attrs |= more_attrs
    for *_, qualname in replacements:
        owner = qualname.rpartition(".")[0]
        cls_mine = _find_class(mine, owner) if owner else None
        cls_theirs = _find_class(theirs, owner) if owner else None
        if cls_mine is None or cls_theirs is None:
            continue
        have = {n.name for n in cls_theirs.body if isinstance(n, _DEFS)}
        for method in cls_mine.body:
            if isinstance(method, _DEFS) and method.name in attrs and method.name not in have and \
                    _signature_inert(method, agent_names):
                extra_methods.setdefault(qualname, []).append(method)
    out = list(plines)
    for start, end, segment, qualname in sorted(replacements, reverse=True):
        methods = [ln for m in extra_methods.get(qualname, [])
                   for ln in ["\n", *_segment(lines, m, _find(theirs.body, qualname).col_offset)]]
        out[start - 1:end] = [*segment, *methods]
    tail = [ln for stmt in sorted(carried.values(), key=lambda s: s.lineno) for ln in ["\n", *_segment(lines, stmt, 0)]]
    if out and not out[-1].endswith("\n"):
        out[-1] += "\n"
    text = "".join([*out, *tail])
    done = [q for _, _, _, q in replacements]
    return text, [*notes, *(f"carried {', '.join(_bound(s))}" for s in carried.values())][:20] if done else notes


def transplant(task: TaskSpec, agent_tree: Path, pristine: Path, dest: Path) -> Restored:
    """Build the transplant tree of `agent_tree` at `dest` (module docstring); not applicable (path None) for a
    task without masked functions."""
    functions = function_targets(task)
    if not functions:
        return Restored(None, notes=["no masked functions: no transplant"])
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(pristine, dest, symlinks=True)
    out = Restored(dest)
    for rel, targets in functions.items():
        source = inside(agent_tree, rel, follow_last=False, field="masking.functions")
        target = dest / rel
        qualnames = [t.qualname for t in targets]
        out.restored += [f"{rel}::{q}" for q in qualnames]
        if source.is_symlink() or not source.is_file() or not target.is_file():
            out.notes.append(f"{rel}: the agent's tree has no such file; the stubs stay")
            continue
        if source.stat().st_size > MAX_FILE_BYTES:
            out.notes.append(f"{rel}: larger than {MAX_FILE_BYTES} bytes; the stubs stay")
            continue
        try:
            text, notes = _transplant_file(source.read_text(encoding="utf-8"), target.read_text(encoding="utf-8"),
                                           qualnames, agent_tree)
            compile(text, rel, "exec", dont_inherit=True)
        except Exception as exc:  # noqa: BLE001 - whatever the agent's file does to the parser or the compiler
            out.notes.append(f"{rel}: cannot be transplanted ({type(exc).__name__}); the stubs stay")
            continue
        target.write_text(text, encoding="utf-8")
        out.notes += [f"{rel}: {n}" for n in notes]
    return out
