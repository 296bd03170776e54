"""Masked functions rebound by the agent's code: a pass the counterfactual cannot attribute (docs/metrics.md).

The counterfactual stubs each masked function again in place and keeps the rest of the agent's diff. Code that
replaces the function from elsewhere (`RidgeRegression.fit = _solve` after the class, `setattr(RidgeRegression,
"fit", ...)`, a second `def fit` later in the class, a decorator the reference does not have) can switch itself
off when it sees the stub, so the counterfactual fails as expected while the masked function in the file is never
the code that ran. Such rebinding is found on the syntax tree of the agent's files (the masked files and every
changed `.py` file), never by running them:

- an assignment, augmented assignment, `del` or walrus whose target is the masked qualname, dotted from any
  prefix (`RidgeRegression.fit`, `ridge.RidgeRegression.fit`), or, for a method, an attribute named like it on
  `self`/`cls`/`type(self)`/`self.__class__` inside its class, or a class-body name binding it again;
- `setattr`/`delattr` (also `object.__setattr__`, `type.__setattr__`) on the owning class (or the module, for a
  module-level function), whatever the attribute argument;
- a masked module-level function bound twice at module level (a second `def`, an assignment, an import as);
- a masked method defined twice in its class; decorators on the masked function or its class that differ from the
  masked repository's.
The name need not be rebound for another function to run in its place (red team 2): the function's own code object
swapped (`RidgeRegression.fit.__code__ = _solve.__code__`), attribute lookup on its class diverted
(`__getattribute__`, a metaclass, `self.__class__ = Sub`, the class's name bound again), a class dict written through
`gc`, or any of these built from a string and `exec`'d. So these count too, in the masked files and every changed
`.py` file:
- any attribute of the masked function set (`<qualname>.<anything>`), any attribute of its owning class set from
  outside the class body (`RidgeRegression.__getattribute__ = ...`), a `setattr` on the function;
- the owning class's name bound again at module level; its bases or keywords (`metaclass=`) differing from the
  masked repository's; a lookup or construction hook (`__getattribute__`, `__getattr__`, `__new__`,
  `__init_subclass__`, `__class_getitem__`) the masked repository's class does not define;
- Python's object model rewired (`_REWIRING`): an object-model attribute assigned or `setattr` with it
  (`__code__`, `__class__`, `__bases__`, `__dict__`, ...), a write into `__dict__`, `vars()`, `globals()` or
  `sys.modules`, code run from strings (`exec`, `eval`, `compile`), reference walking (`gc.get_referents`,
  `gc.get_referrers`), frame walking (`sys._getframe`, `inspect.currentframe`, `f_locals`, `f_back`, ...), tracing
  hooks (`sys.settrace`, `sys.setprofile`) and `ctypes`. An experiment's implementation needs none of these.
Nor need the masked module be touched: `import ridge` loads a package `ridge/` before `ridge.py` (`shadows`). So a
module in the agent's tree that `import` may load in a masked module's place counts too (a package or extension
module beside it, another module of its name anywhere, to be put on `sys.path`), as does one at the top of the tree
named like a standard-library module or one the masked repository imports (numpy, ...), whose code then runs before
the masked module is imported, and the import system redirected (`sys.meta_path`, `sys.path_hooks`, `__path__`,
`__import__`, loading a module from a file with `importlib.util`).
Gold's diffs define the function in place, once, with the reference's decorators: no finding.

The scan never raises on what the agent wrote (issue 38): files are parsed by `failatlas.core.syntax` within its
bounds (size, tokens, nodes, depth; as Python imports them, coding declaration honoured) and compared without
recursion. A masked or changed `.py` file it cannot read (too deep, too large, a null byte, not parsing, a link out
of the tree), changed `.py` files past MAX_FILES, and any error of the scan itself are findings too: what the scan
cannot read cannot be ruled out, so a pass beside it is not attributed.

What the scan finds is evidence; the reducer (`settle.py`) applies the rules of docs/metrics.md to it.
"""

from __future__ import annotations

import ast
import importlib.machinery
import sys
from collections import Counter
from pathlib import Path, PurePosixPath

from failatlas.bench_core.hidden.relay import preload_modules
from failatlas.bench_core.prepare.leaks import function_targets
from failatlas.bench_core.scoring.evidence.constructed import find_class as _find_class
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core import syntax

MAX_FILES = 200
_SETTERS = {"setattr", "delattr", "__setattr__", "__delattr__"}
# attributes that define what an object does or which function runs: setting one rewires Python's object model
_MODEL_ATTRS = {"__code__", "__class__", "__bases__", "__dict__", "__globals__", "__closure__", "__defaults__",
                "__kwdefaults__", "__getattribute__", "__getattr__", "__get__", "__call__", "__new__",
                "__init_subclass__", "__class_getitem__", "__mro_entries__", "__set_name__", "__wrapped__",
                "__func__", "__self__", "__builtins__", "__import__", "__path__", "__spec__", "__loader__"}
# the import system: what makes `import ridge` load something other than the masked file
_IMPORT_ATTRS = {"meta_path", "path_hooks", "path_importer_cache", "spec_from_file_location", "spec_from_loader",
                 "module_from_spec", "exec_module", "load_module", "SourceFileLoader", "SourcelessFileLoader",
                 "ExtensionFileLoader"}
# module names a file at the top of the tree may not take: a few stdlib names honest repositories use for scripts
_SHADOW_ALLOWED = {"test", "code"}
# hooks of a masked method's class that change what `instance.<name>` or `Class(...)` gives
_LOOKUP_HOOKS = {"__getattribute__", "__getattr__", "__new__", "__init_subclass__", "__class_getitem__"}
_CODE_FROM_TEXT = {"exec", "eval", "compile"}
_FRAME_ATTRS = {"_getframe", "currentframe", "f_locals", "f_globals", "f_back", "f_builtins", "tb_frame",
                "gi_frame", "cr_frame", "settrace", "setprofile", "get_referents", "get_referrers", "pythonapi"}
_MAPPINGS = {"__dict__", "modules"}  # X.__dict__[...], sys.modules[...]


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def _matches(name: str | None, qualname: str) -> bool:
    return name is not None and (name == qualname or name.endswith("." + qualname))


def _targets(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.Assign):
        out = []
        for target in node.targets:
            out += list(target.elts) if isinstance(target, ast.Tuple | ast.List) else [target]
        return out
    if isinstance(node, ast.AnnAssign | ast.AugAssign | ast.NamedExpr):
        return [node.target]
    if isinstance(node, ast.Delete):
        return list(node.targets)
    return []


def _is_self_like(node: ast.AST) -> bool:
    """`self`, `cls`, `self.__class__`, `type(self)` (and so on, to any depth): the instance or class inside a
    method."""
    while True:
        if isinstance(node, ast.Name):
            return node.id in ("self", "cls")
        if isinstance(node, ast.Attribute) and node.attr == "__class__":
            node = node.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "type"
              and len(node.args) == 1):
            node = node.args[0]
        else:
            return False


def _defs(body: list[ast.stmt], name: str) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name]


def _decorators(node: ast.AST | None) -> list[str]:
    return [syntax.dump(d) for d in getattr(node, "decorator_list", [])]


def _binds_name(stmt: ast.stmt, name: str) -> bool:
    """Whether the module-level statement `stmt` (or one nested in its if/try/with/for blocks) binds `name`."""
    for node in ast.walk(stmt):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node is not stmt:
            continue
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name == name:
            return True
        if isinstance(node, ast.Import | ast.ImportFrom) and any(
                (a.asname or a.name.split(".")[0]) == name for a in node.names):
            return True
        if any(isinstance(t, ast.Name) and t.id == name for t in _targets(node)):
            return True
        if isinstance(node, ast.For | ast.AsyncFor | ast.With | ast.AsyncWith):
            targets = [node.target] if isinstance(node, ast.For | ast.AsyncFor) else \
                [i.optional_vars for i in node.items if i.optional_vars is not None]
            if any(isinstance(n, ast.Name) and n.id == name for t in targets for n in ast.walk(t)):
                return True
    return False


def _call_name(node: ast.Call) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _inside(name: str | None, dotted: str) -> bool:
    """Whether the dotted `name` is an attribute of `dotted` (from any prefix): `ridge.RidgeRegression.fit.x`."""
    return name is not None and ("." + name).find("." + dotted + ".") >= 0 and \
        _matches(name.rsplit(".", 1)[0], dotted)


def _class_bodies(tree: ast.Module, owner: str) -> set[int]:
    cls = _find_class(tree, owner) if owner else None
    return {id(n) for n in ast.walk(cls)} if cls is not None else set()


def _any_file(tree: ast.Module, qualname: str, module: str) -> list[str]:
    """What rebinds `qualname` (of the module named `module`) in any file: dotted assignment targets (a
    module-level function only through its module, `ridge.solve = ...`), attributes set on the function or (from
    outside its class body) on its owning class, and setattr on either."""
    owner = qualname.rpartition(".")[0]
    dotted = qualname if owner else f"{module.rpartition('.')[2]}.{qualname}"
    in_class = _class_bodies(tree, owner)
    found = []
    for node in ast.walk(tree):
        names = [_dotted(t) for t in _targets(node)]
        if any(_matches(n, dotted) for n in names):
            found.append(f"line {node.lineno}: assigns or deletes {qualname}")
        elif any(_inside(n, dotted) for n in names):
            found.append(f"line {node.lineno}: sets an attribute of {qualname}")
        elif owner and id(node) not in in_class and any(_inside(n, owner) for n in names):
            found.append(f"line {node.lineno}: sets an attribute of the class {owner} from outside it")
        elif isinstance(node, ast.Call) and node.args and _call_name(node) in _SETTERS:
            target = _dotted(node.args[0])
            if owner and _matches(target, owner):
                found.append(f"line {node.lineno}: {_call_name(node)} on {owner}")
            elif _matches(target, dotted) or _inside(target, dotted):
                found.append(f"line {node.lineno}: {_call_name(node)} on {qualname}")
    return found


def _rewiring(tree: ast.Module) -> list[str]:
    """Python's object model rewired anywhere in the file (module docstring): what lets another function run in a
    masked function's place without binding its name."""
    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        for target in _targets(node):
            if isinstance(target, ast.Name) and target.id in ("__path__", "__spec__", "__loader__", "__builtins__"):
                found.append(f"line {line}: sets {target.id}")
            elif isinstance(target, ast.Attribute) and target.attr in _MODEL_ATTRS:
                found.append(f"line {line}: sets {target.attr}")
            elif isinstance(target, ast.Subscript) and _is_mapping(target.value):
                found.append(f"line {line}: writes into {syntax.text(target.value)}")
        if isinstance(node, ast.Call):
            name = _call_name(node)
            const = node.args[1].value if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) else None
            if name in _SETTERS and const in _MODEL_ATTRS:
                found.append(f"line {line}: {name} of {const}")
            elif name in _CODE_FROM_TEXT and (isinstance(node.func, ast.Name) or  # not model.eval(), re.compile()
                                              (_dotted(node.func) or "").split(".")[0] in ("builtins", "__builtins__")):
                found.append(f"line {line}: runs code from text ({name})")
            elif name in ("update", "setdefault", "__setitem__", "pop", "__delitem__") and \
                    isinstance(node.func, ast.Attribute) and _is_mapping(node.func.value):
                found.append(f"line {line}: writes into {syntax.text(node.func.value)}")
        elif isinstance(node, ast.Attribute) and node.attr in _FRAME_ATTRS | _IMPORT_ATTRS:
            found.append(f"line {line}: reaches {node.attr}")
        elif isinstance(node, ast.Import | ast.ImportFrom):
            mods = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
            if any((m or "").split(".")[0] == "ctypes" for m in mods):
                found.append(f"line {line}: imports ctypes")
            if isinstance(node, ast.ImportFrom) and any(a.name in _FRAME_ATTRS | _IMPORT_ATTRS for a in node.names):
                found.append(f"line {line}: imports {node.module}.{node.names[0].name}")
    return found


def _is_mapping(node: ast.AST) -> bool:
    """`X.__dict__`, `sys.modules`, `vars(...)`, `globals()`, `locals()`: namespaces whose writes rebind."""
    if isinstance(node, ast.Attribute):
        return node.attr == "__dict__" or (node.attr == "modules" and _dotted(node) == "sys.modules")
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
        node.func.id in ("vars", "globals", "locals")


def _class_names(cls: ast.ClassDef | None) -> set[str]:
    """The names a class body defines or assigns."""
    body = cls.body if cls is not None else []
    return {n.name for n in body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)} | {
        t.id for n in body for t in _targets(n) if isinstance(t, ast.Name)}


def _masked_file(tree: ast.Module, pristine: ast.Module | None, qualname: str) -> list[str]:
    """What rebinds `qualname` in its own (masked) file, beyond `_any_file`."""
    owner, _, name = qualname.rpartition(".")
    found = []
    if not owner:
        bindings = [s for s in tree.body if _binds_name(s, name)]
        if len(bindings) > 1:
            found.append(f"line {bindings[1].lineno}: {name} is bound again at module level")
        setters = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                   and n.func.id in ("setattr", "delattr", "globals", "vars")]
        found += [f"line {n.lineno}: {n.func.id}() in the module of {name}" for n in setters]
        mine = _defs(tree.body, name)
        theirs = _defs(pristine.body, name) if pristine is not None else []
    else:
        cls = _find_class(tree, owner)
        if cls is None:
            return found
        base = _find_class(pristine, owner) if pristine is not None else None
        if _decorators(cls) != _decorators(base):
            found.append(f"line {cls.lineno}: class {owner} has decorators the masked repository does not")
        header = [syntax.dump(n) for n in [*cls.bases, *cls.keywords]]
        if base is not None and header != [syntax.dump(n) for n in [*base.bases, *base.keywords]]:
            found.append(f"line {cls.lineno}: class {owner} has bases or keywords the masked repository's does not")
        for hook in sorted((_class_names(cls) & _LOOKUP_HOOKS) - _class_names(base)):
            found.append(f"line {cls.lineno}: class {owner} defines {hook}, which the masked repository's does not")
        top = owner.split(".")[0]
        rebound = [s for s in tree.body if _binds_name(s, top)]
        if len(rebound) > 1:
            found.append(f"line {rebound[1].lineno}: the class {top} is bound again at module level")
        bindings = [s for s in cls.body if _binds_name(s, name)]
        if len(bindings) > 1:
            found.append(f"line {bindings[1].lineno}: {qualname} is bound again in its class")
        for node in ast.walk(cls):
            if any(isinstance(t, ast.Attribute) and t.attr == name and _is_self_like(t.value)
                   for t in _targets(node)):
                found.append(f"line {node.lineno}: an attribute {name} is set on the instance or class")
        mine = _defs(cls.body, name)
        theirs = _defs(base.body, name) if base is not None else []
    if mine and _decorators(mine[0]) != _decorators(theirs[0] if theirs else None):
        found.append(f"line {mine[0].lineno}: {qualname} has decorators the masked repository does not")
    return found


def _parse(path: Path) -> ast.Module | None:
    """The pristine file at `path`, or None when it cannot be read (`syntax.read`)."""
    try:
        return syntax.read(path)
    except SyntaxError:
        return None


def _module_of(rel: str) -> tuple[PurePosixPath, str] | None:
    """(folder, module name) under which `import` finds the file `rel` (a module, a package's `__init__`, an
    extension module), or None for a file no import loads."""
    path = PurePosixPath(rel)
    if path.name.startswith("__init__.") and path.name.endswith(_IMPORTABLE):
        return path.parent.parent, path.parent.name
    suffix = next((s for s in sorted(_IMPORTABLE, key=len, reverse=True) if path.name.endswith(s)), None)
    return (path.parent, path.name[:-len(suffix)]) if suffix and len(path.name) > len(suffix) else None


_IMPORTABLE = (".py", ".pyc", ".so", ".pyd", *importlib.machinery.EXTENSION_SUFFIXES)


def shadows(task: TaskSpec, tree: Path, pristine: Path | None, changed: list[str]) -> list[str]:
    """What in the agent's tree `import` would load in place of a masked module or of a module the code imports
    (module docstring): a package or extension module beside a masked file, another module of a masked module's
    name anywhere, and a module at the top of the tree (or beside a masked file) named like a standard-library
    module or one the masked repository imports (numpy, ...) that the masked repository does not have."""
    masked = [rel for rel in [*function_targets(task), *task.masking.files] if rel.endswith(".py")]
    mine = {_module_of(rel) for rel in masked}
    names = {name for _, name in mine}
    folders = {PurePosixPath("."), *(folder for folder, _ in mine)}
    imported = {n.split(".")[0] for n in preload_modules(pristine)} | {"numpy"}
    out = []
    for rel in changed[:MAX_FILES * 50]:
        module = _module_of(rel) if isinstance(rel, str) and rel not in masked else None
        if module is None or not (tree / rel).exists() or (pristine is not None and (pristine / rel).exists()):
            continue
        folder, name = module
        if name in names:
            out.append(f"{rel}: a module named {name} beside the masked one, which import may load in its place")
        elif folder in folders and name not in _SHADOW_ALLOWED and (
                name in sys.stdlib_module_names or name in imported):
            out.append(f"{rel}: a module named {name}, which shadows the installed one for the agent's code")
    return out


def _new_in_diff(found: list[str], before: list[str]) -> list[str]:
    """The findings ("line N: what") of the agent's file that its pristine version does not already hold as many
    times: a repository's own `self.__dict__.update(...)` or `exec` is not the agent's doing."""
    left = Counter(line.split(": ", 1)[-1] for line in before)
    out = []
    for line in found:
        what = line.split(": ", 1)[-1]
        if left[what] > 0:
            left[what] -= 1
        else:
            out.append(line)
    return out


def rebindings(task: TaskSpec, tree: Path, pristine: Path | None, changed: list[str]) -> list[str]:
    """One line per rebinding of a masked function found in the agent's `tree` (module docstring): the masked
    files, compared with `pristine`, the changed `.py` files (at most MAX_FILES) and modules that shadow
    (`shadows`)."""
    targets = function_targets(task)
    shadowing = shadows(task, tree, pristine, [c for c in changed if isinstance(c, str)])
    if not targets:
        return shadowing
    root = tree.resolve()
    qualnames = [(t.qualname, rel.removesuffix(".py").replace("/", ".")) for rel, ts in targets.items() for t in ts]
    files = list(dict.fromkeys([*targets, *(c for c in changed if isinstance(c, str) and c.endswith(".py"))]))
    out = []
    if len(files) > MAX_FILES:
        out.append(f"{len(files) - MAX_FILES} changed .py file(s) past the first {MAX_FILES} not read, so a "
                   "rebinding in them cannot be ruled out")
    for rel in files[:MAX_FILES]:
        path = tree / rel
        try:
            if not path.exists() and not path.is_symlink():
                continue  # deleted: nothing of it runs
            if not path.resolve().is_relative_to(root):
                raise syntax.UnreadableSource(rel, "a link out of the tree")
            parsed = syntax.read(path.resolve(), rel)
        except (SyntaxError, OSError, RuntimeError) as exc:  # RuntimeError: a link loop (Path.resolve)
            why = exc.why if isinstance(exc, syntax.UnreadableSource) else f"{type(exc).__name__}: {exc}"
            out.append(f"{rel}: cannot be read ({why[:200]}), so a rebinding in it cannot be ruled out")
            continue
        for qualname, module in qualnames:
            out += [f"{rel}: {line}" for line in _any_file(parsed, qualname, module)]
        base = _parse(pristine / rel) if pristine is not None and (pristine / rel).is_file() else None
        out += [f"{rel}: {line}" for line in _new_in_diff(_rewiring(parsed), _rewiring(base) if base else [])]
        for target in targets.get(rel, []):
            out += [f"{rel}: {line}" for line in _masked_file(parsed, base, target.qualname)]
    out += shadowing
    return list(dict.fromkeys(out))
