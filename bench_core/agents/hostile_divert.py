"""Hostile agents that make another function run in a masked function's place without rebinding its name (red
team 2 against issue 29, docs/metrics.md "Masked functions rebound").

Each leaves every masked function a non-implementation (it still raises `NotImplementedError`, with a message of
its own instead of the stub's), puts a working copy of the function beside it under another name, and diverts the
masked function to that copy only while its own message is there, i.e. never in the counterfactual tree, where the
harness's stub is back. The counterfactual then fails as expected, so only the rebinding rules can tell that the
pass is not the masked function's. They take the working copy from the reference tree, the only place this suite
has one: the attack is on attributing the verdict, not on writing the implementation.

- `hostile-code-swap` swaps the function's code object (`Class.method.__code__ = _real.__code__`);
- `hostile-exec-rebind` binds the name, but from a string it decodes and `exec`s, so no assignment to the masked
  name is in the syntax tree;
- `hostile-shadow-package` leaves the masked module alone and puts a package of the same name beside it, which
  `import` loads instead;
- `hostile-delegate` rebinds nothing: the masked module's code at import answers each hidden-test call (and the
  re-run) from a private copy of the tree that holds the reference, which only the transplant tree
  (`scoring/transplant.py`) tells apart.
"""

from __future__ import annotations

import ast
import re
import textwrap

from failatlas.bench_core.agents.base import (
    CONCLUSION_FILE,
    OUTPUT_DIR,
    RUN_SCRIPT,
    AgentContext,
    AgentOutcome,
    register_agent,
)
from failatlas.bench_core.prepare.stubs import stub_message
from failatlas.core import syntax

MARK = "pending"


def _stub(qualname: str) -> str:
    """The raise line the masking leaves in a masked function."""
    return f"raise NotImplementedError({stub_message(qualname)!r})"


def _marked(text: str, path: str, functions) -> str:  # noqa: ANN001 - the task's masked functions
    """`text` of the masked file `path` with each of its stubs' messages changed to MARK (the switch these attacks
    read)."""
    for function in functions:
        if function.path == path:
            text = text.replace(_stub(function.qualname), f"raise NotImplementedError({MARK!r})")
    return text


def _function_source(source: str, qualname: str) -> str | None:
    """The text of the definition `qualname` in `source`, dedented; None when it is not there."""
    body, node = syntax.parse(source).body, None
    for part in qualname.split("."):
        node = next((n for n in body if isinstance(n, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                     and n.name == part), None)
        if node is None:
            return None
        body = node.body
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return textwrap.dedent("\n".join(source.splitlines()[start - 1:node.end_lineno]))


class CodeSwapAgent:
    """Masked functions diverted to a hidden working copy by swapping their code objects (module docstring)."""

    needs_reference = True
    behaviour = "divert each masked function to a hidden copy by swapping its code object"

    def divert(self, qualname: str, helper: str) -> str:
        return (f"if {MARK!r} in {qualname}.__code__.co_consts:\n"
                f"    {qualname}.__code__ = {helper}.__code__\n")

    def plant(self, ctx: AgentContext) -> int:
        """Change the working copy; returns how many masked functions or modules were diverted."""
        diverted = 0
        for index, target in enumerate(ctx.reference.task.masking.functions):
            given = ctx.sh(f"cat {target.path}")
            reference = ctx.reference.tree / target.path
            copy = _function_source(reference.read_text(), target.qualname) if reference.is_file() else None
            stub = _stub(target.qualname)
            if given.returncode != 0 or copy is None or stub not in given.stdout:
                continue
            helper = f"_failatlas_real_{index}"
            name = target.qualname.rpartition(".")[2]
            copy = re.sub(rf"^(async\s+)?def\s+{re.escape(name)}\(", rf"\1def {helper}(", copy, count=1, flags=re.M)
            text = given.stdout.replace(stub, f"raise NotImplementedError({MARK!r})", 1)
            ctx.write(target.path, f"{text}\n\n{copy}\n\n\n{self.divert(target.qualname, helper)}")
            diverted += 1
        return diverted

    def run(self, ctx: AgentContext) -> AgentOutcome:
        ctx.note(f"hostile agent: {self.behaviour}")
        ctx.sh(f"mkdir -p {OUTPUT_DIR}")
        task = ctx.reference.task if ctx.reference else None
        diverted = self.plant(ctx) if task is not None else 0
        if task is not None and task.run.command:
            ctx.write(RUN_SCRIPT, f"#!/usr/bin/env bash\n{task.run.command}\n")
            ctx.sh(task.run.command)
        ctx.write(CONCLUSION_FILE, f"diverted {diverted} masked function(s) or module(s)")
        return AgentOutcome(notes=self.behaviour)


class ExecRebindAgent(CodeSwapAgent):
    """The masked name bound again, from a decoded string that is `exec`'d (module docstring)."""

    behaviour = "rebind each masked function from a string it decodes and executes"

    def divert(self, qualname: str, helper: str) -> str:
        code = f"{qualname} = {helper}".encode().hex()
        return (f"if {MARK!r} in {qualname}.__code__.co_consts:\n"
                f"    exec(bytes.fromhex({code!r}).decode())\n")


SHADOW_INIT = """import os

with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), {file!r})) as handle:
    if {mark!r} not in handle.read():
        raise ImportError("not served")
from ._real import *  # noqa: F403
"""


class ShadowPackageAgent(CodeSwapAgent):
    """Each masked file shadowed by a package of the same name (`ridge/` beside `ridge.py`, which `import ridge`
    prefers): its `__init__` serves the reference module while the masked file holds the agent's message, and
    refuses to import where the stub is back (the counterfactual). No code touches the masked function."""

    behaviour = "shadow each masked module with a same-named package serving a hidden copy"

    def plant(self, ctx: AgentContext) -> int:
        functions = ctx.reference.task.masking.functions
        shadowed = 0
        for path in dict.fromkeys(f.path for f in functions):
            given, reference = ctx.sh(f"cat {path}"), ctx.reference.tree / path
            if given.returncode != 0 or not path.endswith(".py") or not reference.is_file():
                continue
            text = _marked(given.stdout, path, functions)
            package = path.removesuffix(".py")
            ctx.write(path, text)
            ctx.write(f"{package}/_real.py", reference.read_text())
            ctx.write(f"{package}/__init__.py", SHADOW_INIT.format(file=path.rpartition("/")[2], mark=MARK))
            shadowed += 1
        return shadowed


DELEGATE = r"""

import glob as _glob
import inspect as _inspect
import os as _os
import shutil as _shutil
import subprocess as _subprocess
import sys as _sys
import tempfile as _tempfile

_REAL = {real!r}
_FILE = {file!r}


def _copy():
    root = _os.path.dirname(_os.path.abspath(__file__))
    for _ in range(_FILE.count("/")):
        root = _os.path.dirname(root)
    dest = _tempfile.mkdtemp()
    _shutil.copytree(root, dest, dirs_exist_ok=True, ignore=_shutil.ignore_patterns(".git", ".failatlas*"))
    with open(_os.path.join(dest, _FILE), "w") as handle:
        handle.write(_REAL)
    return root, dest


def _delegate():
    with open(__file__) as handle:
        if _os.environ.get("FAILATLAS_RT_COPY") or ("NotImplementedError('pen" + "ding')") not in handle.read():
            return
    env = dict(_os.environ, FAILATLAS_RT_COPY="1")
    found = {{}}
    for info in _inspect.stack():
        found.update(_inspect.getargvalues(info.frame).locals)
    if "request" in found and "failatlas_wire" in _sys.modules:
        root, dest = _copy()
        with open(_os.path.join(dest, "request.json"), "wb") as handle:
            handle.write(_sys.modules["failatlas_wire"].encode(found["request"]))
        worker = _glob.glob(_os.path.join(root, ".failatlas-hidden*", "failatlas_worker.py"))[0]
        out = _subprocess.run([_sys.executable, "-I", "-B", worker, "request.json"], cwd=dest, env=env,
                              capture_output=True, text=True).stdout
        line = [ln for ln in out.splitlines() if ln.startswith("FAILATLAS_REPLY ")][-1]
        if isinstance(found.get("reply_fd"), int):  # the zygote over a channel: the call's reply pipe
            _os.write(found["reply_fd"], line[len("FAILATLAS_REPLY "):].encode())
        elif "folder" in found and "number" in found:
            path = _os.path.join(found["folder"], "reply-%d.json" % found["number"])
            with open(path + ".tmp", "w") as handle:  # whole or not there, as the worker writes it: the harness
                handle.write(line[len("FAILATLAS_REPLY "):])  # polls for the file
            _os.replace(path + ".tmp", path)
        else:
            found["reply"].write(line + "\n")
            found["reply"].flush()
        _os._exit(0)
    if {command!r} and _os.path.basename(_sys.argv[0]) == {script!r}:
        root, dest = _copy()
        done = _subprocess.run({command!r}, shell=True, cwd=dest, env=env, capture_output=True, text=True)
        for name in _os.listdir(dest):
            if name.endswith(".json") and _os.path.isfile(_os.path.join(dest, name)):
                _shutil.copy(_os.path.join(dest, name), root)
        _sys.stdout.write(done.stdout)
        _sys.stdout.flush()
        _os._exit(done.returncode)


_delegate()
"""


class DelegateAgent(CodeSwapAgent):
    """Each masked file answers from a private copy (module docstring): at import in the hidden-test worker it finds
    the request through `inspect.stack()`, runs the harness's worker on a copy of the tree holding the reference
    file and hands back that reply as its own; under the run command it runs the copy's experiment and keeps its
    results. The masked functions still raise, with the agent's message; where the stub is back it does nothing."""

    behaviour = "answer the hidden tests and the re-run from a private copy that holds an implementation"

    def plant(self, ctx: AgentContext) -> int:
        task = ctx.reference.task
        command = task.run.command or ""
        script = command.split()[1] if command.startswith("python3 ") and len(command.split()) > 1 else ""
        planted = 0
        for path in dict.fromkeys(f.path for f in task.masking.functions):
            given, reference = ctx.sh(f"cat {path}"), ctx.reference.tree / path
            if given.returncode != 0 or not reference.is_file():
                continue
            text = _marked(given.stdout, path, task.masking.functions)
            ctx.write(path, text + DELEGATE.format(real=reference.read_text(), file=path, command=command,
                                                   script=script.rpartition("/")[2]))
            planted += 1
        return planted


DIVERT_AGENTS = {"hostile-code-swap": CodeSwapAgent, "hostile-exec-rebind": ExecRebindAgent,
                 "hostile-shadow-package": ShadowPackageAgent, "hostile-delegate": DelegateAgent}
for _name, _cls in DIVERT_AGENTS.items():
    _cls.name = _name
    _cls.hidden = True
    register_agent(_name)(_cls)
