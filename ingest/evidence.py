"""What the harness knows about a run beyond its error strings: what the task masked, which modules the repository
and its hidden tests name, the network policy, the environment failures and refused connections its trace shows.
Mining classifies each failure by this evidence (ingest/statements.py); every piece is optional, since imported or
old runs may lack the task, its repository or its trace, and a classification never guesses past what is here."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from failatlas.core import syntax
from failatlas.core.errors import FailAtlasError
from failatlas.core.store import Store
from failatlas.ingest.modules import package_of

_INSTALL = re.compile(r"\b(?:pip3?|python3?\s+-m\s+pip|uv\s+pip|conda|mamba)\s+install\s+(?P<args>[^;&|\n]+)")
_MAX_TEST_BYTES = 1_000_000


@dataclass
class TaskEvidence:
    """What one task says about its parts: masked files (and their module names), masked functions per file, the
    modules its repository has, and the modules its hidden tests import."""

    masked_files: set[str] = field(default_factory=set)
    masked_functions: dict[str, list[str]] = field(default_factory=dict)  # file -> qualnames the task masked
    maskable: dict[str, list[str]] = field(default_factory=dict)  # file -> qualnames a setting may mask
    repo_modules: set[str] = field(default_factory=set)
    test_imports: set[str] = field(default_factory=set)  # top-level modules and `module.name` pairs
    results_file: str | None = None
    metrics: set[str] = field(default_factory=set)  # the results the task expects by name
    qualnames: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # file -> function name -> qualnames

    @property
    def masked_modules(self) -> set[str]:
        return {_module_of(p) for p in self.masked_files if p.endswith(".py")}


@dataclass
class RunEvidence:
    """A run's task evidence plus its own: network policy, environment failures, refused connections, installs."""

    task: TaskEvidence = field(default_factory=TaskEvidence)
    network: str | None = None
    env_failures: list[dict[str, Any]] = field(default_factory=list)  # {kind, package, evidence}
    refused: list[str] = field(default_factory=list)
    installs: set[str] = field(default_factory=set)  # requirement names the agent tried to install
    frames: dict[tuple[str, int], str] = field(default_factory=dict)  # (file, line) -> function, from run logs


@dataclass(frozen=True)
class ModuleClass:
    """Where a missing module should have come from: its kind, the object to name, and why (for the statement)."""

    kind: str
    object: str
    why: str
    package: str | None = None


def _module_of(path: str) -> str:
    parts = PurePosixPath(path).with_suffix("").parts
    return ".".join(p for p in parts if p not in ("", "."))


def _test_imports(paths: list[Path]) -> set[str]:
    found: set[str] = set()
    for path in paths:
        try:
            if path.stat().st_size > _MAX_TEST_BYTES:
                continue
            tree = syntax.parse(path.read_text(errors="replace"), str(path))
        except (OSError, SyntaxError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module.split(".")[0])
                found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def _qualnames(source: str) -> dict[str, list[str]]:
    """Function name -> the qualnames defining it in `source` (`fit` -> [`RidgeRegression.fit`])."""
    found: dict[str, list[str]] = {}

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                qualname = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    found.setdefault(child.name, []).append(qualname)
                walk(child, qualname + ".")

    try:
        walk(syntax.parse(source), "")
    except SyntaxError:
        return {}
    return found


def _tree_qualnames(tree: Path, max_files: int = 200) -> dict[str, dict[str, list[str]]]:
    out: dict[str, dict[str, list[str]]] = {}
    for path in sorted(tree.rglob("*.py"))[:max_files]:
        try:
            if path.is_symlink() or path.stat().st_size > _MAX_TEST_BYTES:
                continue
            out[path.relative_to(tree).as_posix()] = _qualnames(path.read_text(errors="replace"))
        except OSError:
            continue
    return out


def task_evidence(store: Store, task_id: str | None) -> TaskEvidence:
    """The task's masking, repository modules and hidden-test imports; empty where the task or its files are not
    here (an imported run, a repository no longer cached)."""
    from failatlas.bench_core.tasks.catalog import get_task

    evidence = TaskEvidence()
    if not task_id:
        return evidence
    try:
        task = get_task(store, task_id)
    except FailAtlasError:
        return evidence
    masking = task.masking
    evidence.masked_files = set(masking.files)
    for ref in masking.functions:
        evidence.masked_functions.setdefault(ref.path, []).append(ref.qualname)
    for ref in [*masking.functions, *masking.maskable_functions]:
        evidence.maskable.setdefault(ref.path, [])
        if ref.qualname not in evidence.maskable[ref.path]:
            evidence.maskable[ref.path].append(ref.qualname)
    evidence.results_file = task.run.results_file
    evidence.metrics = {m.name for m in task.expected_results} | {c.name for c in task.checks} | (
        {task.success.metric} if task.success else set())
    tree = _reference_tree(store, task)
    if tree is not None:
        evidence.repo_modules = {p.stem for p in tree.glob("*.py")} | {
            p.name for p in tree.iterdir() if p.is_dir() and not p.name.startswith(".")}
        evidence.qualnames = _tree_qualnames(tree)
        if masking.overlay:  # an extension task: the overlay's files are the parts the agent changes
            overlay = _overlay_dir(task)
            if overlay is not None:
                evidence.masked_files |= {str(p.relative_to(overlay)) for p in overlay.rglob("*.py")}
    try:
        from failatlas.bench_core.prepare.hidden_tests import hidden_test_paths

        evidence.test_imports = _test_imports(hidden_test_paths(task))
    except (FailAtlasError, OSError):
        pass
    return evidence


def _reference_tree(store: Store, task: Any) -> Path | None:
    try:
        from failatlas.bench_core.prepare.workspace import source_tree
        from failatlas.bench_core.repos import repository_for
        from failatlas.bench_core.runs.inputs import repository_of

        used = repository_of(task, cached=repository_for(store, task))
        if used is None:
            return None
        tree = source_tree(task, used.path)
        return tree if tree.is_dir() else None
    except (FailAtlasError, OSError):
        return None


def _overlay_dir(task: Any) -> Path | None:
    try:
        from failatlas.bench_core.prepare.leaks import task_path

        path = task_path(task, task.masking.overlay, field="masking.overlay")
        return path if path.is_dir() else None
    except (FailAtlasError, OSError):
        return None


def run_evidence(store: Store, run_ids: Sequence[str]) -> dict[str, RunEvidence]:
    """Each run's own evidence (its task's left empty) read from `runs.inputs`, `run_steps` and the agent's
    `sandbox_commands`, in one query per table for all the runs."""
    out = {run_id: RunEvidence() for run_id in run_ids}
    if not out:
        return out
    ids = list(out)
    with store.read() as conn:
        inputs = conn.execute("SELECT id, inputs FROM runs WHERE id IN (SELECT unnest(?::VARCHAR[]))",
                              [ids]).fetchall()
        steps = conn.execute("SELECT run_id, kind, tool, content, arguments FROM run_steps WHERE run_id IN"
                             " (SELECT unnest(?::VARCHAR[])) AND kind IN ('env_failure', 'network')"
                             " ORDER BY run_id, seq", [ids]).fetchall()
        commands = conn.execute("SELECT run_id, command FROM sandbox_commands WHERE run_id IN"
                                " (SELECT unnest(?::VARCHAR[])) AND purpose = 'agent'"
                                " AND regexp_matches(command, '(pip|conda|mamba)[^\\n]*install')"
                                " ORDER BY run_id, seq", [ids]).fetchall()
    for run_id, raw in inputs:
        loaded = _json(raw)
        out[run_id].network = loaded.get("network") if isinstance(loaded.get("network"), str) else None
    for run_id, kind, tool, content, arguments in steps:
        args = _json(arguments)
        if kind == "env_failure":
            out[run_id].env_failures.append({"kind": tool, "package": args.get("package"), "evidence": content})
        elif content and content.startswith("refused"):
            out[run_id].refused.append(content)
    for run_id, command in commands:
        for match in _INSTALL.finditer(command or ""):
            out[run_id].installs.update(a for a in match.group("args").split() if not a.startswith("-"))
    return out


def _json(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    try:
        loaded = json.loads(value) if value else {}
    except (TypeError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def classify_module(module: str, evidence: RunEvidence) -> ModuleClass:
    """Where the missing `module` should have come from, by evidence, in this order: a module the task masked, the
    repository has, or its hidden tests import and no package provides, is a component never created; one a
    package index provides (ingest/modules.py) or the agent tried to install is a dependency not installed;
    anything else says that nothing tells."""
    task = evidence.task
    top = module.split(".")[0]
    if module in task.masked_modules or top in task.masked_modules:
        return ModuleClass("module_not_created", module, "that the task masked")
    if top in task.repo_modules:
        return ModuleClass("module_not_created", module, "of the repository")
    package = package_of(module)
    if top in task.test_imports and package is None:
        return ModuleClass("module_not_created", module, "that the task's tests import")
    named = {_requirement_name(r) for r in evidence.installs}
    if package is not None or top in named or top.replace("_", "-") in named:
        return ModuleClass("dependency_not_installed", package or top, "", package=package or top)
    return ModuleClass("unknown", module, "neither the task, the repository nor a known package provides it")


def _requirement_name(requirement: str) -> str:
    return re.split(r"[<>=!~\[;@ ]", requirement.strip().strip("'\""), maxsplit=1)[0].lower()


def install_refused(evidence: RunEvidence, package: str | None) -> bool:
    """Whether the trace shows an install of `package` (or any install, when its name is not known) refused by the
    network policy: a classified `network_refused` environment failure or a connection the egress proxy refused."""
    for failure in evidence.env_failures:
        if failure["kind"] == "network_refused" and (failure.get("package") in (None, package)):
            return True
    return bool(evidence.refused) and bool(evidence.installs)


def locate(file: str | None, function: str | None, task: TaskEvidence, *, assume_masked: bool = False
           ) -> tuple[str | None, bool]:
    """The object `file::qualname` for a frame in `function` of `file` (the masked qualname whose last part is
    `function`, when there is one), and whether that part is masked (a masked function, or any function of a
    masked file). Without a function, `assume_masked` names the file's one masked function, if it has one."""
    if not file:
        return None, False
    file = file.lstrip("./")
    masked = task.maskable.get(file, [])
    if function and function != "<module>":
        qualname = next((q for q in masked if q == function or q.endswith("." + function)), None)
        if qualname is not None:
            return f"{file}::{qualname}", True
        defined = task.qualnames.get(file, {}).get(function, [])
        return f"{file}::{defined[0] if len(defined) == 1 else function}", file in task.masked_files
    if assume_masked and len(task.masked_functions.get(file, [])) == 1:
        return f"{file}::{task.masked_functions[file][0]}", True
    return file, file in task.masked_files or bool(task.masked_functions.get(file))
