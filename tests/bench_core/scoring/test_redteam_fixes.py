"""Red-team findings against issue 29's defences (/work/coord/REDTEAM.md), closed by calling the parts directly:
the literal scan never raises and is capped (5, 6), the wire codec refuses floods before parsing them (6), the
counterfactual tree cannot be told from the clean tree (1), rebinding a masked function is found (2)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from failatlas.bench_core.scoring import literals
from failatlas.bench_core.suites import load_suite

TASK = "mini-ridge-cv"


@pytest.fixture(scope="module")
def ridge():
    return next(t for t in load_suite("failatlas-mini") if t.id == TASK)


def test_an_integer_beyond_float_range_is_skipped_not_raised(ridge):
    """bigint.sh: `BIG = <400 nines>` in a changed .py file made the scan raise OverflowError."""
    notes: list[str] = []
    files = {"ridge.py": "BIG = " + "9" * 400 + "\nX = -" + "9" * 5000 + "\nY = 10.1878\n"}
    assert literals.literal_matches(ridge, files, set(), notes=notes) == [("ridge.py", "test_mse_ols", 10.1878)]
    assert notes == []


def test_any_error_in_the_scan_is_a_note_and_no_finding(ridge, monkeypatch):
    def boom(*_a, **_k):
        raise RuntimeError("scanner bug")

    monkeypatch.setattr(literals, "file_values", boom)
    notes: list[str] = []
    assert literals.literal_matches(ridge, {"run.py": "x = 10.1878"}, set(), notes=notes) == []
    assert notes and "literal scan failed" in notes[0] and "RuntimeError" in notes[0]


def test_character_code_lists_cost_a_few_shifts_not_257(ridge):
    """slowlit.sh: 2 MB of 40-int lists took 58 s; only shifts mapping the first code to a number character are
    tried now, and a work budget bounds the rest."""
    row = "[" + ",".join(["48"] * 40) + "],\n"
    lists = (256 * 1024) // len(row)
    text = "X = [\n" + row * lists + "]\n"
    budget = literals._Budget()
    literals.file_values("consts.py", text, budget)
    # each list tries at most 15 shifts of 40 codes (plus one unit per syntax node and per character read)
    assert literals.MAX_SCAN_WORK - budget.left < lists * (15 * 40 + 42) + 2 * len(text)
    # and an encoded value in such a list is still found
    codes = [ord(c) + 7 for c in "10.1878"]
    assert 10.1878 in literals.file_values("x.py", f"C = {codes}\n")


def test_the_scan_stops_at_its_caps_and_says_so(ridge):
    notes: list[str] = []
    files = {f"f{i:03}.py": "x = 1\n" for i in range(literals.MAX_SCAN_FILES + 5)}
    files["zz.py"] = "Y = 10.1878\n"
    assert literals.literal_matches(ridge, files, set(), notes=notes) == []
    assert notes and "capped" in notes[0] and f"{literals.MAX_SCAN_FILES} files" in notes[0]


def test_the_work_budget_ends_the_scan_with_a_note(ridge, monkeypatch):
    monkeypatch.setattr(literals, "MAX_SCAN_WORK", 5000)
    notes: list[str] = []
    files = {"a.py": "X = [" + ", ".join(["'1.5'"] * 3000) + "]\n", "b.py": "Y = 10.1878\n"}
    assert literals.literal_matches(ridge, files, set(), notes=notes) == []
    assert notes == ["literal scan capped: its work budget (5000 units) was spent in a.py"]


# ------------------------------------------------------------------------------------- 2: masked function rebound

SOLVE = "\n\ndef _solve(self, X, y):\n    return self\n\n\n"
REBINDS = {
    "module-level assignment (i_stub.sh)": SOLVE + "if 'x' in RidgeRegression.fit.__code__.co_consts:\n"
                                                   "    RidgeRegression.fit = _solve\n",
    "setattr with a computed name": SOLVE + "setattr(RidgeRegression, 'f' + 'it', _solve)\n",
    "through the module": SOLVE + "import ridge as _r\n_r.RidgeRegression.fit = _solve\n",
    "tuple assignment": SOLVE + "RidgeRegression.fit, _x = _solve, 1\n",
    "object.__setattr__": SOLVE + "type.__setattr__(RidgeRegression, 'fit', _solve)\n",
}


def _ridge_tree(tmp_path, ridge, append: str = "", replace: tuple[str, str] | None = None):
    from failatlas.bench_core.prepare import prepare_workspace
    from failatlas.bench_core.prepare.leaks import task_path

    masked = Path(prepare_workspace(ridge, tmp_path / "masked").path)
    reference = task_path(ridge, ridge.repository.local_path, field="repository.local_path")
    text = (reference / "ridge.py").read_text()
    if replace:
        assert replace[0] in text
        text = text.replace(*replace)
    tree = tmp_path / "agent"
    tree.mkdir()
    (tree / "ridge.py").write_text(text + append)
    return tree, masked


@pytest.mark.parametrize("how", sorted(REBINDS))
def test_a_rebinding_of_the_masked_method_is_found(tmp_path, ridge, how):
    from failatlas.bench_core.scoring.rebinding import rebindings

    tree, masked = _ridge_tree(tmp_path, ridge, REBINDS[how])
    found = rebindings(ridge, tree, masked, ["ridge.py"])
    assert found and all(f.startswith("ridge.py: line ") for f in found), found


def test_rebinding_from_another_changed_file_and_in_the_class_is_found(tmp_path, ridge):
    from failatlas.bench_core.scoring.rebinding import rebindings

    tree, masked = _ridge_tree(tmp_path, ridge)
    (tree / "helpers.py").write_text("import ridge\n\nridge.RidgeRegression.fit = lambda self, X, y: self\n")
    assert rebindings(ridge, tree, masked, ["helpers.py"]) == ["helpers.py: line 3: assigns or deletes "
                                                               "RidgeRegression.fit"]
    tree2, _ = _ridge_tree(tmp_path / "b", ridge, replace=("    def fit(", "    @staticmethod\n    def fit("))
    assert any("decorators" in f for f in rebindings(ridge, tree2, masked, []))
    tree3, _ = _ridge_tree(tmp_path / "c", ridge, replace=("    def fit(", "    fit = print\n\n    def fit("))
    assert any("bound again in its class" in f for f in rebindings(ridge, tree3, masked, []))


def test_gold_trees_of_every_bundled_task_have_no_rebinding(tmp_path):
    """No false positive: each task's reference repository (what gold restores) defines its functions in place."""
    from failatlas.bench_core.prepare import prepare_workspace
    from failatlas.bench_core.prepare.leaks import function_targets, task_path
    from failatlas.bench_core.scoring.rebinding import rebindings
    from failatlas.bench_core.suites import suite_names

    checked = 0
    for suite in suite_names():
        for task in load_suite(suite):
            if not function_targets(task):
                continue
            masked = Path(prepare_workspace(task, tmp_path / task.id).path)
            reference = task_path(task, task.repository.local_path, field="repository.local_path")
            changed = [p.relative_to(reference).as_posix() for p in reference.rglob("*.py")]
            assert rebindings(task, reference, masked, changed) == [], task.id
            checked += 1
    assert checked >= 4


# ----------------------------------------------------------------- 1 and 2: what a verdict may be attributed to

def _verdicts(passed: bool, done: int = 7):
    from failatlas.bench_core.scoring.judges import Verdict

    return [Verdict("implementation", "hidden-tests", score=done / 7, passed=passed,
                    verdict={"passed": done, "total": 7, "failures": []}),
            Verdict("design", "design-match", score=1.0, passed=True)]


def test_a_passing_e_beside_failing_hidden_tests_is_not_trusted(tmp_path, ridge):
    """e_stub.sh / e_git.sh: E passed with `fit` returning zeros or still raising; I failed on the masked code."""
    from failatlas.bench_core.scoring.rebinding import CONSISTENCY, attribute
    from failatlas.bench_core.scoring.validator import Validation

    tree, masked = _ridge_tree(tmp_path, ridge)
    validation = Validation(outcome="passed", detail="every expected value matched")
    verdicts, findings = attribute(ridge, tree, masked, [], validation, _verdicts(False, 2))
    assert validation.outcome == "fabricated_result" and CONSISTENCY in validation.detail
    assert [(f.rule, f.severity) for f in findings] == [("consistency", "warn")]
    assert "(2/7 passed)" in findings[0].evidence
    # gold: the hidden tests pass, E stands, nothing found
    validation = Validation(outcome="passed")
    verdicts, findings = attribute(ridge, tree, masked, ["ridge.py"], validation, _verdicts(True))
    assert validation.outcome == "passed" and findings == [] and verdicts[0].passed is True
    # a hidden-test run that could not be judged says nothing about E
    validation = Validation(outcome="passed")
    unjudged = [dataclasses.replace(_verdicts(False)[0], status="judge_failed", passed=None)]
    assert attribute(ridge, tree, masked, [], validation, unjudged)[1] == [] and validation.outcome == "passed"


def test_a_rebound_pass_fails_i_and_m_and_then_e(tmp_path, ridge):
    """i_stub.sh / full_stub.sh: fit raises in the file, a solver bound over it at import; every phase passed."""
    from failatlas.bench_core.scoring.rebinding import attribute
    from failatlas.bench_core.scoring.validator import Validation

    tree, masked = _ridge_tree(tmp_path, ridge, REBINDS["module-level assignment (i_stub.sh)"])
    validation = Validation(outcome="passed")
    verdicts, findings = attribute(ridge, tree, masked, ["ridge.py"], validation, _verdicts(True))
    hidden = verdicts[0]
    assert hidden.passed is False and hidden.score == 0.0 and hidden.verdict["reported_score"] == 1.0
    assert hidden.verdict["rebound"] and "rebinds a masked function" in hidden.error_analysis
    assert [(f.rule, f.severity) for f in findings] == [("masked_rebound", "fail"), ("consistency", "warn")]
    assert validation.outcome == "fabricated_result" and verdicts[1].passed is True
    # where the hidden tests fail anyway, the rebinding is a warning only
    verdicts, findings = attribute(ridge, tree, masked, ["ridge.py"], None, _verdicts(False, 2))
    assert [(f.rule, f.severity) for f in findings] == [("masked_rebound", "warn")]


def test_the_counterfactual_tree_differs_from_the_clean_tree_only_in_the_restubbed_code(tmp_path, ridge):
    """e_git.sh: run.py wrote the expected constants only where `.git` exists, which the counterfactual copy left
    out; timestamps told the copies apart too."""
    import shutil

    from failatlas.bench_core.prepare import prepare_workspace
    from failatlas.bench_core.scoring.counterfactual import restore

    agent = Path(prepare_workspace(ridge, tmp_path / "agent").path)
    pristine = tmp_path / "pristine"
    shutil.copytree(agent, pristine, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    source = agent / "ridge.py"
    text = source.read_text()
    assert "NotImplementedError" in text
    source.write_text(text + "\n\nHELPER = 1\n")
    os.utime(source, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))
    os.utime(agent, ns=(1_100_000_000_000_000_000, 1_100_000_000_000_000_000))
    restored = restore(ridge, agent, pristine, tmp_path / "cf")
    dest = restored.path
    assert (dest / ".git").is_dir()
    assert (dest / ".git" / "HEAD").read_bytes() == (agent / ".git" / "HEAD").read_bytes()

    def listing(root: Path) -> dict[str, int]:
        return {p.relative_to(root).as_posix(): p.lstat().st_mtime_ns for p in [root, *root.rglob("*")]}

    assert listing(dest) == listing(agent)
    assert "HELPER = 1" in (dest / "ridge.py").read_text()
