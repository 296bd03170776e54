"""Issue 38: I and E decided on a tree the harness constructs (bench_core/scoring/constructed.py), through the real
stages (a real DuckDB file, real `local` sandboxes, the real mini-ridge-cv and a copy of it without hidden tests).

Each reproduction of the issue is a `command` agent whose masked `fit` does not implement anything (it returns
zeros or stays a stub) while the rest of what it wrote tries to make I or E pass anyway: code that runs at import
through installed code (`runstring`), a run.py that computes the results itself unless it sees the stub, a decorator
chain deep enough to crash a recursive scanner, an import-time patch of what run.py writes, an `atexit` decorator, a
metaclass. Each gets what `null` gets on I and E, on the task with hidden tests and on its copy without them; an
honest implementation that keeps its helpers in its own file (a function, a new method, an import, a constant)
passes both. The constructed tree itself is checked directly on the syntax that must not be carried.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from failatlas.bench_core import runs, scoring
from failatlas.bench_core.prepare import prepare_workspace
from failatlas.bench_core.scoring.evidence.constructed import attribution, construct
from failatlas.bench_core.scoring.metrics import run_scores
from failatlas.bench_core.suites import load_suite
from failatlas.bench_core.tasks import save_tasks

pytestmark = pytest.mark.slow  # runs sandboxes (Docker, bwrap) or the app server: out of the README's quick command

TASK = "mini-ridge-cv"
NO_HIDDEN = "mini-ridge-cv-no-hidden-tests"
ZEROS_FIT = '''    def fit(self, X, y):
        """Zeros."""
        self.coef_ = np.zeros(np.asarray(X).shape[1])
        self.intercept_ = 0.0
        return self
'''
# a correct solver, as text: what the import-time code installs when it runs
SOLVER = ("import numpy as np\\nimport ridge\\n"
          "def _fit(self, X, y):\\n"
          "    X = np.asarray(X, dtype=float); y = np.asarray(y, dtype=float)\\n"
          "    xm, ym = X.mean(axis=0), y.mean(); Xc = X - xm\\n"
          "    self.coef_ = np.linalg.solve(Xc.T @ Xc + self.alpha * np.eye(X.shape[1]), Xc.T @ (y - ym))\\n"
          "    self.intercept_ = float(ym - xm @ self.coef_); return self\\n"
          "ridge.RidgeRegression.fit = _fit\\n")


def _replace_fit(new_fit: str, tail: str = "") -> str:
    """A bash command that replaces the masked `fit` of ridge.py by `new_fit` and appends `tail`."""
    script = (
        "import re, pathlib\n"
        "p = pathlib.Path('ridge.py')\n"
        "s = p.read_text()\n"
        "start = s.index('    def fit(self, X, y):')\n"
        "end = s.index('    def predict')\n"
        f"s = s[:start] + {new_fit!r} + '\\n' + s[end:] + {tail!r}\n"
        "p.write_text(s)\n")
    return f"python3 - <<'EDIT'\n{script}EDIT\npython3 run.py || true"


# reproduction 1: the masked module calls installed code with a constant string at import; the string installs a
# correct solver unless ridge.py still holds the stub text (so the counterfactual "fails as expected")
HOOK = _replace_fit(ZEROS_FIT, (
    "\nimport numpy.testing._private.utils as _u\n"
    f"_HOOK = _u.runstring(\"import sys\\nif 'is masked: implement it' not in open('ridge.py').read():\\n"
    f"    exec({SOLVER!r})\\n\", {{}})\n"))
# reproduction 4: run.py computes the results itself with its own numpy code unless `fit` still holds the stub text
OWN_RUN = _replace_fit(ZEROS_FIT).replace("python3 run.py || true", """cat > run.py <<'RUN'
import json, sys
import numpy as np
from data import make_data
if "is masked: implement it" in open("ridge.py").read():
    sys.exit(1)
def fit(X, y, a):
    xm, ym = X.mean(axis=0), y.mean(); Xc = X - xm
    w = np.linalg.solve(Xc.T @ Xc + a * np.eye(X.shape[1]), Xc.T @ (y - ym)); return w, ym - xm @ w
Xtr, ytr, Xte, yte = make_data(seed=0)
def mse(a):
    w, b = fit(Xtr, ytr, a); return round(float(np.mean((yte - Xte @ w - b) ** 2)), 4)
r = {"test_mse_ols": mse(0.0), "test_mse_ridge_cv": mse(10.0), "selected_alpha": 10.0}
json.dump(r, open("results.json", "w")); print(json.dumps(r))
RUN
python3 run.py""")
# reproduction 3: a decorator chain deep enough that a recursive walk of `fit` raises RecursionError
DEEP = _replace_fit("    @(lambda f: f)" + ".__call__" * 1500 + "\n" + ZEROS_FIT.replace("    def", "    def", 1))
# import-time patch of what run.py writes: json.dump of the masked module's import writes the expected values
JSON_PATCH = _replace_fit(ZEROS_FIT, (
    "\nimport json as _json\n_real = _json.dump\n"
    "def _dump(obj, fp, **kw):\n"
    "    return _real({'test_mse_ols': 10.1878, 'test_mse_ridge_cv': 3.6953, 'selected_alpha': 10.0}, fp, **kw)\n"
    "_json.dump = _dump\n"))
# a carried helper with an atexit decorator (runs after run.py wrote results.json) and a metaclass helper
LATE_FIT = ZEROS_FIT.replace("        return self\n", "        _late(); _Meta_user()\n        return self\n")
ATEXIT = _replace_fit(LATE_FIT, (
    "\nimport atexit\n@atexit.register\ndef _late():\n"
    "    open('results.json', 'w').write('{\"test_mse_ols\": 10.1878, \"test_mse_ridge_cv\": 3.6953, "
    "\"selected_alpha\": 10.0}')\n"
    "class _M(type):\n    def __call__(cls): return None\n"
    "class _Meta_user(metaclass=_M):\n    pass\n"))
# honest: the implementation uses a helper function, a new method, an import and a constant of its own file
HONEST = _replace_fit('''    def fit(self, X, y):
        X = np.asarray(X, dtype=float)
        y = np.asarray(y, dtype=float)
        xm, ym = _means(X, y)
        self.coef_ = self._solve(X - xm, y - ym)
        self.intercept_ = float(ym - xm @ self.coef_)
        return self

    def _solve(self, Xc, yc):
        return solve(Xc.T @ Xc + self.alpha * SCALE * np.eye(Xc.shape[1]), Xc.T @ yc)
''', "\nfrom numpy.linalg import solve\nSCALE = 1.0\n\n\ndef _means(X, y):\n    return X.mean(axis=0), y.mean()\n"
     "\nprint('this line runs at import in the agent tree only')\n")

ATTACKS = {"hook": HOOK, "own-run": OWN_RUN, "deep-decorator": DEEP, "json-patch": JSON_PATCH, "atexit": ATEXIT}


@pytest.fixture(autouse=True)
def _no_llm(monkeypatch):
    for name in list(os.environ):
        if name.startswith("FAILATLAS_LLM"):
            monkeypatch.delenv(name)


def _tasks():
    task = next(t for t in load_suite("failatlas-mini") if t.id == TASK)
    bare = task.model_copy(deep=True, update={"id": NO_HIDDEN})
    bare.implementation.hidden_tests = []
    return task, bare


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """label -> task id -> {scores, validation, judgements} for null, gold, honest and every attack."""
    from failatlas.store import open_store

    root = tmp_path_factory.mktemp("constructed")
    store = open_store(root / "store.duckdb")
    save_tasks(store, list(_tasks()), source="failatlas-mini")
    agents = {"null": ("null", {}), "gold": ("gold", {}), "honest": ("command", {"command": HONEST}),
              **{label: ("command", {"command": cmd}) for label, cmd in ATTACKS.items()}}
    labels = {}
    for label, (agent, params) in agents.items():
        before = {r[0] for r in store.query("SELECT id FROM runs")}
        runs.run(store, runs.BenchParams(agent=agent, agent_params=params, task_ids=[TASK, NO_HIDDEN],
                                         sandbox="local", runs_dir=root / "runs"))
        for run_id in {r[0] for r in store.query("SELECT id FROM runs")} - before:
            labels[run_id] = label
    result = scoring.run(store, scoring.ScoreParams(sandbox="local", runs_dir=root / "runs", llm=False))
    assert result.infra_errors == [] and result.unavailable == []
    scores = {r["run_id"]: r for r in run_scores(store).iter_rows(named=True)}
    out: dict[str, dict[str, dict]] = {}
    for run_id, label in labels.items():
        row = scores[run_id]
        [validation] = store.query_dicts("SELECT outcome, detail, evidence FROM validations WHERE run_id = ?",
                                         [run_id])
        validation["evidence"] = json.loads(validation["evidence"] or "{}")
        judgements = {j["judge"]: j for j in store.query_dicts(
            "SELECT judge, status, passed, reason FROM judgements WHERE run_id = ?", [run_id])}
        out.setdefault(label, {})[row["task_id"]] = {"scores": row, "validation": validation,
                                                     "judgements": judgements, "failed": result.failed}
    return out


def test_gold_and_an_honest_implementation_with_its_own_helpers_pass_e_and_i(scored):
    for label in ("gold", "honest"):
        for task_id in (TASK, NO_HIDDEN):
            run = scored[label][task_id]
            assert run["validation"]["outcome"] == "passed", (label, task_id, run["validation"])
            assert run["validation"]["evidence"]["tree"] == "constructed"
        assert scored[label][TASK]["scores"]["I"] == 1, label
    carried = scored["honest"][TASK]["validation"]["evidence"]["carried"]
    assert {"ridge.py::RidgeRegression.fit", "ridge.py: RidgeRegression._solve", "ridge.py: solve",
            "ridge.py: SCALE", "ridge.py: _means"} <= set(carried)


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_each_reproduction_gets_what_null_gets_on_i_and_e_with_and_without_hidden_tests(scored, attack):
    for task_id in (TASK, NO_HIDDEN):
        run, null = scored[attack][task_id], scored["null"][task_id]
        assert run["validation"]["outcome"] != "passed", (task_id, run["validation"])
        assert run["scores"]["E"] == 0, (task_id, run["scores"])
        for phase in ("I", "E"):
            assert (run["scores"][phase] or 0) <= (null["scores"][phase] or 0), (task_id, phase)
    assert scored[attack][TASK]["scores"]["I"] == 0


def test_a_decorator_chain_that_defeats_a_recursive_walk_does_not_crash_scoring(scored):
    for task_id in (TASK, NO_HIDDEN):
        run = scored["deep-decorator"][task_id]
        assert not any(f.startswith(run["scores"]["run_id"]) for f in run["failed"])
        assert "scoring" not in run["judgements"], run["judgements"]


def _built(tmp_path: Path, ridge: str):
    task, _ = _tasks()
    ws = Path(prepare_workspace(task, tmp_path / "ws").path)
    pristine = tmp_path / "pristine"
    shutil.copytree(ws, pristine, ignore=shutil.ignore_patterns(".git"))
    (ws / "ridge.py").write_text(ridge)
    return task, construct(task, ws, pristine, tmp_path / "constructed")


def _agent_ridge(new_fit: str, tail: str) -> str:
    reference = (Path(load_suite.__code__.co_filename).parent / "mini" / "ridge-cv" / "repo" / "ridge.py").read_text()
    start, end = reference.index("    def fit(self, X, y):"), reference.index("    def predict")
    return reference[:start] + new_fit + "\n" + reference[end:] + tail


@pytest.mark.parametrize("tail, refused", [
    ("\n_HOOK = __import__('os').system('touch /tmp/x')\n", None),  # a call at import: never carried
    ("\n@atexit.register\ndef _helper():\n    return 1\nimport atexit\n", "_helper"),
    ("\nimport atexit as functools\n@functools.cache\ndef _helper():\n    return 1\n", "_helper"),
    ("\ndef staticmethod(f):\n    return f\nclass _H:\n    @staticmethod\n    def _helper():\n        return 1\n"
     "_helper = _H._helper\n", "_H"),
    ("\nclass _M(type):\n    pass\nclass _helper(metaclass=_M):\n    pass\n", "_helper"),
    ("\nclass _helper:\n    def __init_subclass__(cls):\n        pass\n", "_helper"),
    ("\ndef _helper(x=print('default runs')):\n    return 1\n", "_helper"),
    ("\nclass _helper:\n    x = open('/etc/passwd').read()\n", "_helper"),
    ("\n_helper = [i for i in range(3)]\n", "_helper"),
    # red team: classmethod over property is a class property (Python <= 3.12); a carried constant reading it
    # would run its body at import
    ("\nclass _helper:\n    @classmethod\n    @property\n    def ready(cls):\n        return print('runs')\n"
     "_READY = _helper.ready\n", "_helper"),
])
def test_support_that_would_run_code_at_import_is_not_carried(tmp_path, tail, refused):
    fit = ZEROS_FIT.replace("        return self\n", "        _helper\n        return self\n")
    task, built = _built(tmp_path, _agent_ridge(fit, tail))
    text = (built.path / "ridge.py").read_text()
    assert "ridge.py::RidgeRegression.fit" in built.carried
    assert "system" not in text and "atexit" not in text and "print(" not in text and "metaclass" not in text
    assert "__init_subclass__" not in text and "passwd" not in text and "range(3)" not in text
    if refused:
        assert any(n.startswith(f"ridge.py: {refused} is not carried") for n in built.notes), built.notes
    compile(text, "ridge.py", "exec")


def test_allowed_decorators_and_literal_constants_are_carried_and_run(tmp_path):
    fit = ZEROS_FIT.replace("        return self\n", "        self.intercept_ = _K.twice(_helper()) + LIMITS[1]\n"
                            "        return self\n")
    tail = ("\nimport functools\nLIMITS = (-1.5, 2)\n@functools.lru_cache(maxsize=4)\ndef _helper() -> float:\n"
            "    return 1.0\nclass _K:\n    '''doc'''\n    FACTOR = 2\n    @staticmethod\n    def twice(v):\n"
            "        return v * _K.FACTOR\n")
    _, built = _built(tmp_path, _agent_ridge(fit, tail))
    assert {"ridge.py: LIMITS", "ridge.py: _helper", "ridge.py: _K", "ridge.py: functools"} <= set(built.carried)
    check = subprocess.run(["python3", "-c", "import numpy as np, ridge; m = ridge.RidgeRegression().fit("
                            "np.ones((3, 2)), np.ones(3)); print(m.intercept_)"], cwd=built.path,
                           capture_output=True, text=True, check=True)
    assert check.stdout.strip() == "4.0"


def test_a_file_too_deep_to_read_leaves_the_stub_and_says_so(tmp_path):
    fit = ZEROS_FIT.replace("        return self\n", "        return " + "(" * 5000 + "self" + ")" * 5000 + "\n")
    _, built = _built(tmp_path, _agent_ridge(fit, ""))
    assert "ridge.py::RidgeRegression.fit" not in built.carried
    assert any("cannot be read" in n for n in built.notes), built.notes
    assert "is masked: implement it" in (built.path / "ridge.py").read_text()


def test_what_each_kind_of_task_is_decided_on():
    task, bare = _tasks()
    assert attribution(task) == attribution(bare) == "constructed"
    script = task.model_copy(deep=True)
    script.run.agent_script = True
    assert attribution(script) == "script"
    extension = task.model_copy(deep=True)
    extension.masking.functions = []
    assert attribution(extension) == "diff"


# red team of issue 38's constructed tree (a helper attacking it as a hostile agent): three ways that once gave a
# stubbed `fit` I = 1 and E passed, and one that judged a correct `fit` which never runs
SKLEARN_SUBCLASS = '''
from sklearn.linear_model import Ridge as _SkRidge


class _Fitted(_SkRidge):
    fit_intercept = True

    def __init__(self, alpha=1.0):
        self.alpha = alpha


RidgeRegression = _Alias = _Fitted
'''


def _stub_with(prefix: str) -> str:
    """The masked `fit` with `prefix` put before its stub's raise."""
    return ZEROS_FIT.replace('        """Zeros."""\n', f'        """Zeros."""\n        {prefix}\n').replace(
        "        self.coef_ = np.zeros(np.asarray(X).shape[1])\n        self.intercept_ = 0.0\n        return self\n",
        "        raise NotImplementedError('RidgeRegression.fit is masked: implement it')\n")


def test_carried_code_never_rebinds_what_the_original_module_defines(tmp_path):
    _, built = _built(tmp_path, _agent_ridge(_stub_with("_Alias"), SKLEARN_SUBCLASS))
    text = (built.path / "ridge.py").read_text()
    assert "RidgeRegression = " not in text and "_Alias = " not in text
    assert any("binds RidgeRegression" in n for n in built.notes), built.notes


def test_no_dunder_method_is_added_to_an_original_class(tmp_path):
    fit = _stub_with("self.__new__")
    new = "    def __new__(cls, alpha=1.0):\n        return object.__new__(cls)\n\n"
    ridge = _agent_ridge(fit, "").replace("    def predict(self, X):", new + "    def predict(self, X):")
    _, built = _built(tmp_path, ridge)
    assert "__new__" not in (built.path / "ridge.py").read_text().split("def fit")[0].split("class RidgeRegression")[1]
    assert any("__new__ would change how the original class" in n for n in built.notes), built.notes


def test_a_definition_inside_a_block_is_not_the_one_judged(tmp_path):
    correct = ('\n\nif False:\n    class RidgeRegression:\n        def fit(self, X, y):\n'
               '            self.coef_ = "the correct body that never runs"\n            return self\n')
    _, built = _built(tmp_path, _agent_ridge(ZEROS_FIT, correct))
    text = (built.path / "ridge.py").read_text()
    assert "np.zeros" in text and "never runs" not in text
