"""Derived tests (the body of a generated hidden-test file): each recorded call of a masked function of the
reference is made again on the agent's definition, through the `agent` fixture (a fresh worker process per call in
the run's sandbox), and compared here, in the judge process, with what the reference returned.

`record.replay_source` writes this file's text after one line `CASES_DATA = "<base64 of zlib of wire data>"`. A
function's case: its module (imported with `root`, relative to the working copy, first on sys.path), the
arguments, and for a method the instance's recorded `__dict__`: the instance is made with `Cls.__new__(Cls)` and
that `__dict__`, the method is called, and the return value (or that it returned the instance itself), the
attributes the reference set and each argument the reference changed in place (`mutated`) are compared by
`failatlas_compare.check` (`compare.py`: the rule scoring also applies to the calls observed in E's re-run).
Imports only the standard library, pytest and the judge's own modules.
"""

import base64
import zlib

import failatlas_wire as wire
import pytest
from failatlas_compare import check


def _cases(data: str | None) -> list[dict]:
    return wire.decode(zlib.decompress(base64.b64decode(data))) if data else []


CASES = _cases(globals().get("CASES_DATA"))  # the generated file's first line

SNIPPET = """
import importlib, os, sys
if root:
    sys.path.insert(0, os.path.join(os.getcwd(), root))
owner, target = None, importlib.import_module(module)
for part in qualname.split("."):
    owner, target = target, getattr(target, part)
if kind == "method":
    instance = owner.__new__(owner)
    instance.__dict__.update(state)
    value = target(instance, *args, **kwargs)
    now = instance.__dict__
    result = {"self": value is instance, "ret": None if value is instance else value,
              "after": {k: now[k] for k in keys if k in now}}
else:
    result = {"self": False, "ret": target(*args, **kwargs), "after": None}
result["mutated"] = {"args": {str(i): args[i] for i in arg_keys if i < len(args)},
                     "kwargs": {k: kwargs[k] for k in kwarg_keys if k in kwargs}}
"""


def _label(case: dict) -> str:
    kind = "perturbed" if case["perturbed"] else "recorded"
    return f"{case['qualname']} ({kind} call {case['number']})"


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c["id"] for c in CASES])
def test_derived(agent, index):
    case = CASES[index]
    got = agent.run(SNIPPET, module=case["module"], root=case["root"], qualname=case["qualname"],
                    kind=case["kind"], args=case["args"], kwargs=case["kwargs"], state=case.get("state") or {},
                    keys=sorted(case.get("after") or {}),
                    arg_keys=sorted(int(i) for i in ((case.get("mutated") or {}).get("args") or {})),
                    kwarg_keys=sorted((case.get("mutated") or {}).get("kwargs") or {}))
    found = check(case, got)
    assert found is None, f"{_label(case)}: {found}"
