"""The constructed tree: the artefact I and E are decided on (docs/metrics.md, "The constructed tree").

The agent's own tree and run are its claim; this tree is the evidence. The harness builds it from the pristine masked
repository and, of the agent's work, only what the task asked for:
- each masked function keeps the pristine stub's decorators and signature, and takes the agent's body (the last
  definition of that qualname in the agent's file, as Python would bind it), re-emitted from its syntax tree;
- the support that body names, transitively, among the agent's *new* top-level statements of that file (and its
  new methods of a masked method's class, named as attributes): function and class definitions, imports and
  literal constants, each re-emitted from its syntax tree and carried only when defining it runs none of the
  agent's code and calls nothing: no decorator outside a short allowlist of builtins and well-known installed
  ones (`ALLOWED_DECORATORS`), defaults and class-level values that are literals, names or attribute chains,
  annotations dropped, bases that are names or attribute chains, no metaclass, none of the hooks that run while a
  class is created (`__init_subclass__`, `__set_name__`, ...). Anything else of the agent's file (a call at import,
  an `if`, a changed pristine definition) is left out, and the stub's neighbours stay pristine;
- each masked file (`masking.files`: the task asked for the whole file) is the agent's version, whole.

What the tree is decided on is recorded as its `attribution`:
- `constructed`: the task masks functions or files; I and E (the task's own command, never the agent's script)
  are decided on this tree;
- `diff`: nothing is masked but the task has a command (an extension task, full code): the whole diff is the
  implementation, so the tree is the agent's, its outputs removed;
- `script`: the task's answer is what the agent's own run script prints (EXP-Bench; AutoExperiment where no
  reader of its reference command's output can be derived, `reference_answer.py`): E re-runs that script on the
  agent's tree, and the report says E is script-attributed.
Nothing here runs the agent's code: parsing and re-emitting only, with every failure (a file too deep, too large,
not UTF-8) a note and the stub left in place.
"""

from __future__ import annotations

import ast
import copy
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from failatlas.bench_core.prepare.leaks import function_targets
from failatlas.bench_core.prepare.stubs import iter_functions, parse_python, stub_message
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.paths import inside

MAX_FILE_BYTES = 2 * 1024 * 1024
MAX_CARRIED = 200
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
# decorators a carried definition may keep: (module, attribute) for installed ones (the name must be bound by an
# import of exactly that module), (None, name) for builtins (the name must not be bound by the module itself)
ALLOWED_DECORATORS = frozenset({
    (None, "staticmethod"), (None, "classmethod"), (None, "property"),
    ("functools", "cache"), ("functools", "cached_property"), ("functools", "lru_cache"),
    ("abc", "abstractmethod"), ("typing", "overload"), ("dataclasses", "dataclass"),
    ("torch", "no_grad"), ("torch", "inference_mode"), ("torch", "enable_grad"),
})
# hooks Python runs while a class is created or subclassed: the agent's code at import
_BUILTINS = frozenset(dir(__import__("builtins")))
_DEFINITION_HOOKS = frozenset({"__init_subclass__", "__set_name__", "__mro_entries__", "__prepare__",
                               "__class_getitem__", "__getattr__", "__dir__"})
ATTRIBUTIONS = ("constructed", "diff", "script")


class _Refused(Exception):
    """A definition that cannot be carried, with the reason."""


@dataclass
class Constructed:
    """The tree I and E are decided on (`path`; None when it could not be built), how (`attribution`), what of the
    agent's was put in (`carried`: `file::qualname` bodies, `file: name` support, `file` whole) and what was left
    out and why (`notes`)."""

    path: Path | None
    attribution: str
    carried: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def evidence(self) -> dict:
        """What is stored with the verdicts decided on this tree."""
        return {"tree": self.attribution, "carried": self.carried[:50], "notes": self.notes[:20]}


def attribution(task: TaskSpec) -> str:
    """How `task`'s E is attributed (module docstring): a task whose answer is the agent's script but whose own
    command can be read through a reader derived from the reference (`reference_answer.needs_reader`) is
    `constructed` too, falling back to `script` where no reader can be derived."""
    from failatlas.bench_core.scoring.evidence.reference_answer import needs_reader

    if (task.run.agent_script and not needs_reader(task)) or not task.run.command:
        return "script"
    if task.masking.functions or task.masking.files:
        return "constructed"
    return "diff"


def construct(task: TaskSpec, agent_tree: Path, pristine: Path, dest: Path) -> Constructed:
    """Build the constructed tree of `agent_tree` (the masked repository `pristine` with the agent's diff) at `dest`.
    For a task that masks nothing the tree is the agent's (`diff`); otherwise it is built from `pristine`. Raises
    InputError when a masked path is reached through one of the agent's links leading out."""
    if dest.exists():
        shutil.rmtree(dest)
    how = attribution(task)
    if not (task.masking.functions or task.masking.files):
        shutil.copytree(agent_tree, dest, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        return Constructed(dest, how, notes=["nothing is masked: the whole diff is the implementation"])
    shutil.copytree(pristine, dest, symlinks=True)
    out = Constructed(dest, "constructed" if how != "script" else how)
    for rel in task.masking.files:
        source = inside(agent_tree, rel, follow_last=False, field="masking.files")
        target = inside(dest, rel, follow_last=False, field="masking.files")
        if source.is_symlink() or not source.is_file():
            out.notes.append(f"{rel}: the agent's tree has no such file; it stays absent")
        elif source.stat().st_size > MAX_FILE_BYTES:
            out.notes.append(f"{rel}: larger than {MAX_FILE_BYTES} bytes; it stays absent")
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
            out.carried.append(rel)
    for rel, targets in function_targets(task).items():
        _construct_file(rel, len(targets), agent_tree, dest, out)
    return out


def _construct_file(rel: str, n_targets: int, agent_tree: Path, dest: Path, out: Constructed) -> None:
    source = inside(agent_tree, rel, follow_last=False, field="masking.functions")
    target = dest / rel
    if source.is_symlink() or not source.is_file() or not target.is_file():
        out.notes.append(f"{rel}: the agent's tree has no such file; the stubs stay")
        return
    if source.stat().st_size > MAX_FILE_BYTES:
        out.notes.append(f"{rel}: larger than {MAX_FILE_BYTES} bytes; the stubs stay")
        return
    try:
        text, carried, notes = _constructed_source(source.read_text(encoding="utf-8"),
                                                   target.read_text(encoding="utf-8"), rel)
        compile(text, rel, "exec", dont_inherit=True)
    except Exception as exc:  # noqa: BLE001 - whatever the agent's file does to the parser, unparser or compiler
        out.notes.append(f"{rel}: the agent's file cannot be read into the constructed tree "
                         f"({type(exc).__name__}); the stubs stay")
        return
    target.write_text(text, encoding="utf-8")
    out.carried += [f"{rel}{c}" for c in carried]
    out.notes += [f"{rel}: {n}" for n in notes]
    if not any(c.startswith("::") for c in carried) and n_targets:
        out.notes.append(f"{rel}: no masked function of the agent's could be put in")


def _stubs(tree: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """The masked stubs of a pristine module, (qualname, node), recognised by the stub's own raise."""
    found = []
    for qualname, node in iter_functions(tree):
        body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        if len(body) == 1 and isinstance(body[0], ast.Raise) and isinstance(body[0].exc, ast.Call) and \
                [ast.literal_eval(a) for a in body[0].exc.args if isinstance(a, ast.Constant)] == \
                [stub_message(qualname)]:
            found.append((qualname, node))
    return found


def _constructed_source(agent: str, pristine: str, rel: str) -> tuple[str, list[str], list[str]]:
    """The pristine masked file with each stub's body replaced by the agent's and the support carried; what was
    carried (`::qualname`, `: name`) and notes."""
    mine, theirs = parse_python(agent, rel), parse_python(pristine, rel)
    lines = pristine.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    # the agent's definitions that Python binds where the stub is: straight in the module or class bodies, never
    # one inside an `if`/`try` (an `if False:` block may hold a correct body that never runs); a stub that itself
    # sits in a block is matched among the block definitions
    direct_stubs = {q for q, _ in _direct_functions(theirs)}
    agent_defs: dict[str, list] = {}
    for qualname, node in _direct_functions(mine):
        agent_defs.setdefault(qualname, []).append(node)
    block_defs: dict[str, list] = {}
    for qualname, node in iter_functions(mine):
        block_defs.setdefault(qualname, []).append(node)
    scope = _Scope(mine, theirs)
    edits, carried, notes, bodies = [], [], [], []
    seen: dict[str, int] = {}
    for qualname, stub in _stubs(theirs):
        if "<locals>" in qualname:
            notes.append(f"{qualname}: a nested function cannot be put in; the stub stays")
            continue
        k = seen[qualname] = seen.get(qualname, -1) + 1
        candidates = (agent_defs if qualname in direct_stubs else block_defs).get(qualname) or []
        n_stubs = sum(1 for q, _ in _stubs(theirs) if q == qualname)
        node = candidates[-1] if n_stubs == 1 and candidates else (
            candidates[k] if len(candidates) == n_stubs else None)
        if node is None:
            notes.append(f"{qualname}: the agent's file has no single definition of it; the stub stays")
            continue
        body_text = _indent(ast.unparse(ast.Module(body=node.body, type_ignores=[])), _body_indent(lines, stub))
        first_body = stub.body[0]
        edits.append((first_body.lineno - 1, stub.end_lineno, body_text))
        bodies.append((qualname, node))
        carried.append(f"::{qualname}")
    for start, end, text in sorted(edits, reverse=True):
        lines[start:end] = [text]
    methods, support = scope.support(bodies, notes)
    # methods go at the end of their class (after its last line in the edited text); support at the end of the file
    text = "".join(lines)
    if methods:
        text = _add_methods(text, rel, methods)
        carried += [f": {owner}.{m.name}" for owner, m in methods]
    if support:
        text += "\n\n" + "\n\n".join(ast.unparse(s) for s in support) + "\n"
        carried += [f": {', '.join(bound_names(s))}" for s in support]
    return text, carried, notes


def _direct_functions(tree: ast.Module):
    """(qualname, def) for the functions defined straight in the module's body and in its classes' bodies."""
    def walk(body: list[ast.stmt], prefix: str):
        for node in body:
            if isinstance(node, ast.ClassDef):
                yield from walk(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, _DEFS):
                yield f"{prefix}{node.name}", node

    yield from walk(tree.body, "")


def _body_indent(lines: list[str], stub: ast.AST) -> str:
    line = lines[stub.body[0].lineno - 1]
    return line[: len(line) - len(line.lstrip())] or " " * (stub.col_offset + 4)


def _indent(text: str, indent: str) -> str:
    return "".join(f"{indent}{ln}" if ln.strip() else ln for ln in text.splitlines(keepends=True)) + "\n"


def _add_methods(text: str, rel: str, methods: list[tuple[str, ast.AST]]) -> str:
    tree = parse_python(text, rel)
    lines = text.splitlines(keepends=True)
    by_class: dict[str, list[ast.AST]] = {}
    for owner, method in methods:
        by_class.setdefault(owner, []).append(method)
    inserts = []
    for owner, defs in by_class.items():
        cls = find_class(tree, owner)
        if cls is None:
            continue
        indent = " " * (cls.body[0].col_offset if cls.body else cls.col_offset + 4)
        inserts.append((cls.end_lineno, "".join("\n" + _indent(ast.unparse(d), indent) for d in defs)))
    for end, block in sorted(inserts, reverse=True):
        lines[end:end] = [block]
    return "".join(lines)


def find_class(tree: ast.Module, dotted: str) -> ast.ClassDef | None:
    """The class `dotted` (`Outer.Inner`) straight in the module's body, the first of that name; None without one."""
    body, node = tree.body, None
    for part in dotted.split("."):
        node = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == part), None)
        if node is None:
            return None
        body = node.body
    return node


def bound_names(stmt: ast.stmt) -> list[str]:
    """The names a top-level statement binds."""
    if isinstance(stmt, (*_DEFS, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, ast.Assign):
        return [t.id for t in stmt.targets if isinstance(t, ast.Name)]
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return [stmt.target.id]
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        return [(a.asname or a.name).split(".")[0] for a in stmt.names]
    return []


def read_names(nodes: list[ast.AST]) -> tuple[set[str], set[str]]:
    """Names and attribute names the nodes read (an iterative walk: any depth)."""
    names, attrs = set(), set()
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name):
                names.add(sub.id)
            elif isinstance(sub, ast.Attribute):
                attrs.add(sub.attr)
    return names, attrs


def _definition_names(stmt: ast.stmt) -> set[str]:
    """The names a statement reads while it is defined (not when it is called): values, bases, decorators,
    defaults, and those of the methods of a class."""
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        return set()
    if isinstance(stmt, ast.Assign):
        return read_names([stmt.value])[0]
    parts: list[ast.AST] = list(getattr(stmt, "decorator_list", []))
    if isinstance(stmt, _DEFS):
        parts += [*stmt.args.defaults, *(d for d in stmt.args.kw_defaults if d is not None)]
    if isinstance(stmt, ast.ClassDef):
        parts += stmt.bases
        names = read_names(parts)[0]
        for sub in stmt.body:
            names |= _definition_names(sub)
        own = {n for sub in stmt.body for n in bound_names(sub)}  # `x.setter` reads the class's own `x`
        return names - own
    return read_names(parts)[0]


class _Scope:
    """The agent's new top-level statements of one file and how each may be carried."""

    def __init__(self, mine: ast.Module, theirs: ast.Module) -> None:
        self.pristine_top = {n for s in theirs.body for n in bound_names(s)}
        self.theirs = theirs
        self.mine = mine
        self.new_top: dict[str, ast.stmt] = {}
        for stmt in mine.body:
            for name in bound_names(stmt):
                if name not in self.pristine_top:
                    self.new_top[name] = stmt  # the last binding, as Python leaves it
        # the statement that binds each name in the constructed module: the pristine file's, else the agent's new one
        self.binding: dict[str, ast.stmt] = dict(self.new_top)
        for stmt in theirs.body:
            for name in bound_names(stmt):
                self.binding[name] = stmt

    def support(self, bodies: list[tuple[str, ast.AST]], notes: list[str]
                ) -> tuple[list[tuple[str, ast.AST]], list[ast.stmt]]:
        """The carried methods ((class, def)) and top-level statements the masked bodies name, transitively (what
        a carried method names is followed too)."""
        names, attrs = read_names([n for _, n in bodies])
        carried: dict[int, ast.stmt] = {}
        methods: list[tuple[str, ast.AST]] = []
        seen: set[int] = set()
        owners = [(owner, find_class(self.mine, owner), find_class(self.theirs, owner))
                  for owner in dict.fromkeys(q.rpartition(".")[0] for q, _ in bodies) if owner]
        todo, done_names = sorted(names), set()
        while len(carried) + len(methods) < MAX_CARRIED:
            if todo:
                name = todo.pop()
                stmt = self.new_top.get(name)
                if name in done_names or stmt is None or id(stmt) in seen:
                    continue
                done_names.add(name)
                seen.add(id(stmt))
                try:
                    carried[id(stmt)] = self._carry(stmt)
                except _Refused as why:
                    notes.append(f"{name} is not carried: {why}")
                    continue
                more, more_attrs = read_names([stmt])
                todo += sorted(more - done_names)
                attrs |= more_attrs
                continue
            found = [(owner, m) for owner, cls_mine, cls_theirs in owners if cls_mine and cls_theirs
                     for m in cls_mine.body if isinstance(m, _DEFS) and m.name in attrs and id(m) not in seen
                     and m.name not in {n for s in cls_theirs.body for n in bound_names(s)}]
            if not found:
                break
            for owner, method in found:
                seen.add(id(method))
                try:
                    methods.append((owner, self._function(method, in_class=True, into_pristine=True)))
                except _Refused as why:
                    notes.append(f"{owner}.{method.name} is not carried: {why}")
                    continue
                more, more_attrs = read_names([method])
                todo += sorted(more - done_names)
                attrs |= more_attrs
        self._prune(carried, notes)
        order = {id(s): i for i, s in enumerate(self.mine.body)}
        return methods, [carried[k] for k in sorted(carried, key=order.__getitem__)]

    def _prune(self, carried: dict[int, ast.stmt], notes: list[str]) -> None:
        """Leave out each carried statement that reads, while it is defined, a name the constructed module will
        not have (one left out): it would fail the whole module's import instead of only what needs it."""
        while True:
            bound = self.pristine_top | {n for stmt in carried.values() for n in bound_names(stmt)} | _BUILTINS
            missing = {k: sorted(_definition_names(stmt) - bound) for k, stmt in carried.items()}
            missing = {k: names for k, names in missing.items() if names}
            if not missing:
                return
            for k, names in missing.items():
                notes.append(f"{', '.join(bound_names(carried[k]))} is not carried: it needs {names[0]}, which is not")
                del carried[k]

    def _carry(self, stmt: ast.stmt) -> ast.stmt:
        taken = [n for n in bound_names(stmt) if n in self.pristine_top or n in _BUILTINS]
        if taken:  # `RidgeRegression = _Alias = _Fitted`: it would replace what the pristine module defines
            raise _Refused(f"it binds {taken[0]}, which the original module (or Python) already defines")
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            return stmt
        if isinstance(stmt, _DEFS):
            return self._function(stmt, in_class=False)
        if isinstance(stmt, ast.ClassDef):
            return self._klass(stmt)
        if isinstance(stmt, ast.Assign | ast.AnnAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if not all(isinstance(t, ast.Name) for t in targets) or stmt.value is None:
                raise _Refused("only `NAME = <literal>` is carried")
            self._value(stmt.value)
            return ast.Assign(targets=targets, value=stmt.value, lineno=0)
        raise _Refused(f"a top-level {type(stmt).__name__} runs at import")

    def _value(self, node: ast.AST) -> None:
        """A literal, a name, or an attribute chain on a name: evaluating it calls nothing of the agent's."""
        try:
            ast.literal_eval(node)
            return
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            pass
        root = node
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name):
            return
        raise _Refused("its value is not a literal, a name or an attribute chain (it would run code at import)")

    def _decorator_ok(self, node: ast.AST) -> bool:
        call = isinstance(node, ast.Call)
        if call:
            if not all(isinstance(a, ast.Constant) for a in node.args) or \
                    not all(isinstance(k.value, ast.Constant) for k in node.keywords):
                return False
            node = node.func
        if isinstance(node, ast.Name):
            stmt = self.binding.get(node.id)
            if stmt is None:
                return (None, node.id) in ALLOWED_DECORATORS and not call
            return isinstance(stmt, ast.ImportFrom) and not stmt.level and any(
                (a.asname or a.name) == node.id and (stmt.module, a.name) in ALLOWED_DECORATORS for a in stmt.names)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.attr in ("setter", "getter", "deleter") and not call:
                return True  # a property of the same class: that property's own methods
            stmt = self.binding.get(node.value.id)
            return isinstance(stmt, ast.Import) and any(
                (a.asname or a.name) == node.value.id and (a.name, node.attr) in ALLOWED_DECORATORS
                for a in stmt.names)
        return False

    def _function(self, node: ast.AST, *, in_class: bool, into_pristine: bool = False) -> ast.AST:
        if into_pristine and node.name.startswith("__") and node.name.endswith("__"):
            raise _Refused(f"{node.name} would change how the original class itself behaves")
        if in_class and node.name in _DEFINITION_HOOKS:
            raise _Refused(f"{node.name} runs while the class is created")
        if not in_class and node.name.startswith("__") and node.name.endswith("__"):
            raise _Refused("a module-level dunder changes how the module itself behaves")
        bad = [ast.unparse(d) for d in node.decorator_list if not self._decorator_ok(d)]
        if bad:
            raise _Refused(f"its decorator {bad[0][:80]} is not one of the inert ones")
        if len(node.decorator_list) > 1 and any(isinstance(d, ast.Name) and d.id == "classmethod"
                                                for d in node.decorator_list):
            # classmethod over property (Python <= 3.12) makes a class property: reading it, as an attribute chain
            # of a carried constant does at import, runs the function
            raise _Refused("classmethod stacked with another decorator runs code when the class attribute is read")
        built = copy.copy(node)
        args = copy.deepcopy(node.args)
        for default in [*args.defaults, *(d for d in args.kw_defaults if d is not None)]:
            self._value(default)
        for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if a is not None:
                a.annotation = None
        built.args, built.returns = args, None
        return built

    def _klass(self, node: ast.ClassDef) -> ast.ClassDef:
        if node.keywords:
            raise _Refused("a metaclass or class keywords run code while the class is created")
        for base in node.bases:
            self._value(base)
            if isinstance(base, ast.Constant):
                raise _Refused("a constant base")
        bad = [ast.unparse(d) for d in node.decorator_list if not self._decorator_ok(d)]
        if bad:
            raise _Refused(f"its decorator {bad[0][:80]} is not one of the inert ones")
        body: list[ast.stmt] = []
        for stmt in node.body:
            if isinstance(stmt, _DEFS):
                body.append(self._function(stmt, in_class=True))
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) or isinstance(stmt, ast.Pass):
                body.append(stmt)
            elif isinstance(stmt, ast.Assign | ast.AnnAssign) and stmt.value is not None:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                if not all(isinstance(t, ast.Name) and t.id not in _DEFINITION_HOOKS for t in targets):
                    raise _Refused("a class attribute that is not a plain name")
                self._value(stmt.value)
                body.append(ast.Assign(targets=targets, value=stmt.value, lineno=0))
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                body.append(ast.AnnAssign(target=stmt.target, annotation=ast.Name("object"), simple=1))
            else:
                raise _Refused(f"its body holds a {type(stmt).__name__}, which runs while the class is created")
        built = copy.copy(node)
        built.body = body or [ast.Pass()]
        return built


