"""Issue 38: the scanners over an agent's code give a bounded finding on any syntax, never an exception.

Reproduction 3: `@(lambda f: f)` followed by 1500 `.__call__` on the masked `fit` compiles and runs, yet the rebinding
check's `ast.dump` raised RecursionError and "scoring this run crashed" on every re-score. Each pathological source
below (deep nesting of every kind, huge literals, long lines, null bytes, invalid UTF-8, 10 MB) goes through each
scanner called directly, and reproduction 3 and a few others through a real `bench score --sandbox local` of
`command` agent runs. A scanner that cannot read a file must not pass it: the rebinding scan names it as a finding.
"""

from __future__ import annotations

import base64
import re
import time
from pathlib import Path

import pytest

from failatlas.bench_core.suites import load_suite
from failatlas.core import syntax

TASK = "mini-ridge-cv"
REFERENCE = Path(load_suite.__code__.co_filename).parent / "mini" / "ridge-cv" / "repo" / "ridge.py"  # the suite's
DECORATED = b"    @(lambda f: f)" + b".__call__" * 1500 + b"\n    def fit(self, X, y):"

# name -> (line appended to the reference ridge.py, whether `syntax.parse` reads the result)
PATHOLOGICAL = {
    "parentheses 5000 deep": (b"X = " + b"(" * 5000 + b"1" + b")" * 5000, False),
    "attribute chain 100000 long": (b"X = np" + b".T" * 100_000, False),
    "calls 2000 deep": (b"X = int" + b"()" * 2000, False),
    "subscripts 3000 deep": (b"X = [0]" + b"[0]" * 3000, False),
    "lambdas 3000 deep": (b"X = " + b"lambda: " * 3000 + b"1", False),
    "binary operators 50000 long": (b"X = 1" + b" + 1" * 50_000, False),
    "unary operators 100000 deep": (b"X = " + b"-" * 100_000 + b"1", False),
    "conditional expressions 3000 deep": (b"X = " + b"1 if 1 else " * 3000 + b"1", False),
    "f-string of 100000 fields": (b'X = f"' + b"{1}" * 100_000 + b'"', False),
    "list of 700000 items": (b"X = [" + b"1," * 700_000 + b"]", False),
    "integer of 5000 digits": (b"X = " + b"9" * 5000, False),
    "null byte": (b"X = 1\x00", False),
    "invalid UTF-8": (b"X = '\xff\xfe'", False),
    "lone surrogate, UTF-8 encoded": (b"X = '\xed\xa0\x80'", False),
    "10 MB comment": (b"#" + b"x" * (10 * 1024 * 1024), False),
    # within the bounds: read, and honest, so no finding
    "sum of 500 terms": (b"X = 1" + b" + 1" * 500, True),
    "f-string nesting 150 parentheses": (b'X = f"{' + b"(" * 150 + b"1" + b")" * 150 + b'}"', True),
    "comparison chain 30000 long": (b"X = 1" + b" < 1" * 30_000, True),
    "line of 1.5 MB": (b"X = '" + b"a" * 1_500_000 + b"'", True),
}


@pytest.fixture(scope="module")
def ridge():
    return next(t for t in load_suite("failatlas-mini") if t.id == TASK)


@pytest.fixture(scope="module")
def masked(tmp_path_factory, ridge):
    from failatlas.bench_core.prepare import prepare_workspace

    return Path(prepare_workspace(ridge, tmp_path_factory.mktemp("masked") / "m").path)


def _agent_file(case: str) -> bytes:
    """The reference ridge.py (a correct `fit`) with the case's line appended, or with reproduction 3's decorator."""
    text = REFERENCE.read_bytes()
    if case == "reproduction 3":
        return text.replace(b"    def fit(self, X, y):", DECORATED)
    return text + b"\n" + PATHOLOGICAL[case][0] + b"\n"


CASES = sorted(PATHOLOGICAL) + ["reproduction 3"]


def _readable(case: str) -> bool:
    return case != "reproduction 3" and PATHOLOGICAL[case][1]


@pytest.mark.parametrize("case", CASES)
def test_parsing_gives_a_tree_or_one_unreadable_line(case):
    data = _agent_file(case)
    start = time.monotonic()
    try:
        tree = syntax.parse(data, "ridge.py")
    except syntax.UnreadableSource as exc:
        assert not _readable(case), exc
        assert "\n" not in str(exc) and str(exc).startswith("ridge.py: ")
    else:
        assert _readable(case)
        assert syntax.dump(tree).startswith("Module(") and syntax.text(tree.body[-1])
    assert time.monotonic() - start < 10


def test_reproduction_3_compiles_and_runs_yet_ast_dump_raises():
    """The source the scanner has to survive is real Python: it runs, and the recursive `ast.dump` cannot read it."""
    import ast

    source = _agent_file("reproduction 3")
    namespace: dict = {}
    exec(compile(source, "ridge.py", "exec"), namespace)  # noqa: S102 - our own generated source
    assert callable(namespace["RidgeRegression"].fit)
    with pytest.raises(RecursionError):
        ast.dump(ast.parse(source))
    with pytest.raises(syntax.UnreadableSource, match="nested more than 600 levels deep"):
        syntax.parse(source)


def test_a_lone_surrogate_in_text_is_unreadable_python_and_still_read_for_literals(ridge):
    from failatlas.bench_core.scoring.evidence import literals

    with pytest.raises(syntax.UnreadableSource, match="lone surrogate at character 5"):
        syntax.parse("X = '\ud800'\nY = 10.1878\n", "consts.py")
    notes: list[str] = []
    assert literals.literal_matches(ridge, {"consts.py": "X = '\ud800'\nY = 10.1878\n"}, set(), notes=notes) == [
        ("consts.py", "test_mse_ols", 10.1878)] and notes == []


def test_dump_and_text_never_recurse():
    import ast

    chain = ast.parse(b"x = a" + b".b" * 400).body[0].value
    assert syntax.dump(chain).count("Attribute(") == 400
    assert syntax.dump(chain) == syntax.dump(ast.parse(b"y = a" + b".b" * 400).body[0].value)
    assert syntax.dump(chain) != syntax.dump(ast.parse(b"y = a" + b".b" * 399 + b".c").body[0].value)
    assert syntax.text(chain) == "<Attribute 61+ levels deep>"
    assert syntax.text(ast.parse("sys.modules").body[0].value) == "sys.modules"


@pytest.mark.parametrize("case", CASES)
def test_the_rebinding_scan_names_an_unreadable_file_and_raises_nothing(tmp_path, ridge, masked, case):
    from failatlas.bench_core.scoring.evidence.rebinding import rebindings

    tree = tmp_path / "agent"
    tree.mkdir()
    (tree / "ridge.py").write_bytes(_agent_file(case))
    found = rebindings(ridge, tree, masked, ["ridge.py"])
    if _readable(case):
        assert found == []
    else:
        assert len(found) == 1 and found[0].startswith("ridge.py: cannot be read (") and \
            found[0].endswith("so a rebinding in it cannot be ruled out"), found
    # the same text in another changed file (one the masked module never imports) is named the same way
    (tree / "ridge.py").write_bytes(REFERENCE.read_bytes())
    (tree / "helpers.py").write_bytes(_agent_file(case))
    found = rebindings(ridge, tree, masked, ["ridge.py", "helpers.py"])
    assert [f.split(":")[0] for f in found] == ([] if _readable(case) else ["helpers.py"])


def test_an_unreadable_file_fails_a_passing_i_and_is_a_monitor_finding(tmp_path, ridge, masked):
    from failatlas.bench_core.scoring.checks.base import Verdict
    from failatlas.bench_core.scoring.evidence.rebinding import rebindings
    from failatlas.bench_core.scoring.settle import attribute

    tree = tmp_path / "agent"
    tree.mkdir()
    (tree / "ridge.py").write_bytes(_agent_file("reproduction 3"))
    hidden = Verdict("implementation", "hidden-tests", score=1.0, passed=True,
                     verdict={"passed": 7, "total": 7, "failures": []})
    verdicts, _validation, findings = attribute(rebindings(ridge, tree, masked, ["ridge.py"]), None, [hidden])
    assert verdicts[0].passed is False and verdicts[0].score == 0.0
    assert [(f.rule, f.severity) for f in findings] == [("masked_rebound", "fail")]
    assert "nested more than 600 levels deep" in findings[0].evidence


def test_links_out_of_the_tree_and_link_loops_are_findings_and_deleted_files_nothing(tmp_path, ridge, masked):
    from failatlas.bench_core.scoring.evidence.rebinding import rebindings

    tree = tmp_path / "agent"
    tree.mkdir()
    (tree / "ridge.py").write_bytes(REFERENCE.read_bytes())
    (tmp_path / "outside.py").write_text("import ridge\nridge.RidgeRegression.fit = None\n")
    (tree / "out.py").symlink_to(tmp_path / "outside.py")
    (tree / "loop.py").symlink_to(tree / "loop.py")
    (tree / "inside.py").symlink_to(tree / "ridge.py")
    found = rebindings(ridge, tree, masked, ["ridge.py", "out.py", "loop.py", "inside.py", "gone.py", "bad\0.py"])
    assert [f.split(" (")[0] for f in found] == ["out.py: cannot be read", "loop.py: cannot be read"], found
    assert "a link out of the tree" in found[0]


def test_a_coding_declaration_is_read_as_python_reads_it(tmp_path, ridge, masked):
    """`# coding: utf-7` makes Python run what a UTF-8 reader sees as a comment: the scan reads it as Python does."""
    import subprocess
    import sys

    from failatlas.bench_core.scoring.evidence import literals
    from failatlas.bench_core.scoring.evidence.rebinding import rebindings

    tree = tmp_path / "agent"
    tree.mkdir()
    (tree / "ridge.py").write_bytes(REFERENCE.read_bytes())
    helper = b"# coding: utf-7\nimport ridge\n# note+AAo-ridge.RidgeRegression.fit = ridge.RidgeRegression.predict\n"
    (tree / "helpers.py").write_bytes(helper)
    ran = subprocess.run([sys.executable, "-c", "import helpers, ridge; print(ridge.RidgeRegression.fit.__name__)"],
                         cwd=tree, capture_output=True, text=True, check=True)
    assert ran.stdout.strip() == "predict"  # Python ran the "comment"
    assert rebindings(ridge, tree, masked, ["ridge.py", "helpers.py"]) == [
        "helpers.py: line 4: assigns or deletes RidgeRegression.fit"]  # the decoded line
    hidden_value = b"# coding: utf-7\n# +AAo-Y = +ADE-0.1878\n"
    assert literals.literal_matches(ridge, {"consts.py": hidden_value.decode()}, set()) == [
        ("consts.py", "test_mse_ols", 10.1878)]


@pytest.mark.parametrize("case", CASES)
def test_the_literal_scan_reads_an_unparsable_file_as_text(ridge, case):
    from failatlas.bench_core.scoring.evidence import literals

    text = (_agent_file(case) + b"\nY = 10.1878\n").decode("utf-8", errors="replace")
    notes: list[str] = []
    start = time.monotonic()
    matches = literals.literal_matches(ridge, {"ridge.py": text}, set(), notes=notes)
    assert time.monotonic() - start < 30
    assert not any("failed" in n for n in notes), notes
    if len(text) <= literals.MAX_SCAN_BYTES:
        assert ("ridge.py", "test_mse_ols", 10.1878) in matches, (matches, notes)
    else:
        assert notes and "capped" in notes[0]


@pytest.mark.parametrize("case", CASES)
def test_stubbing_an_agent_file_again_stubs_it_or_says_why(case):
    from failatlas.bench_core.prepare.stubs import StubError, StubTarget, stub_targets

    text = _agent_file(case).decode("utf-8", errors="replace")
    try:
        result = stub_targets(text, [StubTarget("RidgeRegression.fit")], filename="ridge.py")
    except StubError as exc:
        assert not _readable(case) and str(exc).startswith("cannot parse ridge.py: "), exc
    else:
        assert "RidgeRegression.fit is masked" in result.source


@pytest.mark.parametrize("case", CASES)
def test_the_monitor_and_the_leak_scan_read_any_diff(ridge, case):
    from failatlas.bench_core.prepare.leaks import SecretSet
    from failatlas.bench_core.scoring.checks.monitor import rule_findings

    added = _agent_file(case).decode("utf-8", errors="replace")
    diff = "".join(f'diff --git "a/{name}" "b/{name}"\n' + "".join(f"+{line}\n" for line in added.splitlines())
                   for name in ("conftest.py", "x\ud800\\377.py", "setup.cfg"))
    findings = rule_findings(ridge, [], {"diff": diff, "changed_files": ["conftest.py", "x\ud800\\377.py"]})
    assert [f.rule for f in findings] == ["test_infrastructure"]
    secrets = SecretSet()
    secrets.add_python("agent", added)  # the bodies of what parses, nothing of what does not
    try:
        syntax.parse(added)
    except syntax.UnreadableSource:
        assert secrets.secrets == []
    else:
        assert "agent::RidgeRegression.fit" in [s.label for s in secrets.secrets]


# -- end to end: real command-agent runs through `bench score --sandbox local` ----------------------------------------

def _writes(files: dict[str, bytes | str]) -> str:
    """A shell command writing `files` (relative path -> bytes, or a Python expression of them: one argument
    holds at most 128 KiB), then the run script and the conclusion."""
    writes = ";".join(f"open({name!r},'wb').write(" + (
        data if isinstance(data, str) else f"base64.b64decode({base64.b64encode(data).decode()!r})") + ")"
        for name, data in files.items())
    return (f'python3 -c "import base64;{writes}" && mkdir -p .failatlas && echo "python3 run.py" > '
            ".failatlas/run.sh && python3 run.py; echo 'Ridge wins.' > .failatlas/conclusion.md")


# name -> (files the agent writes, whether I and E pass): a masked file the harness cannot read is judged as its
# stubs; an unreadable file beside a correct `fit` is not part of the tree I and E are decided on (constructed.py)
E2E = {
    "reproduction 3": ({"ridge.py": _agent_file("reproduction 3")}, False),
    "null byte in the masked file": ({"ridge.py": _agent_file("null byte")}, False),
    "deep helper beside a correct fit": ({"ridge.py": REFERENCE.read_bytes(),
                                          "helpers.py": "b'X = np' + b'.T' * 100000"}, True),
}


@pytest.mark.slow
def test_reproduction_3_and_others_are_scored_through_bench_score(tmp_path, ridge):
    """Before: `failed=['run-...: RecursionError: maximum recursion depth exceeded']`, a `scoring` judgement
    `judge_failed` ("scoring this run crashed") on every re-score, the run out of every denominator. Now every run
    is scored on every phase; what cannot be read never passes I or E."""
    from failatlas.bench_core import runs, scoring
    from failatlas.bench_core.tasks import save_tasks
    from failatlas.store import open_store

    store = open_store(tmp_path / "bounds.duckdb")
    save_tasks(store, [ridge], source="failatlas-mini")
    ids = {}
    for name, (files, _) in E2E.items():
        result = runs.run(store, runs.BenchParams(agent="command", agent_params={"command": _writes(files)},
                                                  task_ids=[TASK], sandbox="local", runs_dir=tmp_path / "runs"))
        [ids[name]] = result.run_ids
    for attempt in range(2):  # a re-score must give the same, never a crash
        result = scoring.run(store, scoring.ScoreParams(sandbox="local", runs_dir=tmp_path / "runs", llm=False,
                                                        rescore=attempt > 0))
        assert result.failed == [] and result.infra_errors == [] and result.scored == len(E2E), result
        crashed = store.query("SELECT run_id, reason FROM judgements WHERE judge = 'scoring' OR "
                              "reason LIKE '%crashed%'")
        assert crashed == []
        for name, run_id in ids.items():
            hidden = store.query("SELECT status, passed FROM judgements WHERE run_id = ? AND judge = 'hidden-tests'",
                                 [run_id])
            passes = E2E[name][1]
            assert hidden == [("ok", passes)], (name, hidden)
            [(outcome,)] = store.query("SELECT outcome FROM validations WHERE run_id = ?", [run_id])
            assert (outcome == "passed") is passes, (name, outcome)


# CPython 3.11 counts AST-building depth per interpreter, not per thread (python/cpython#106905): one thread parsing
# outside syntax.AST_LOCK while another parses inside it can fail either with "SystemError: AST constructor recursion
# depth mismatch", which a CI demo run once turned into "the hidden-tests judge crashed on the agent's work".
_AST_CALL = re.compile(r"\bast\.parse\(|\bast\.literal_eval\((?!node\b|a\b|value\b)")
_OWN_PROCESS = {"hidden/worker.py"}  # runs in the sandboxed judge process, one thread


def test_product_code_builds_syntax_trees_only_under_the_lock():
    root = Path(syntax.__file__).resolve().parents[2]
    found = []
    for package in ("bench_core", "cluster", "embed", "ingest", "taxonomy", "failatlas"):
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if path.name == "syntax.py" or any(rel.endswith(own) for own in _OWN_PROCESS):
                continue
            found += [f"{rel}:{n}" for n, line in enumerate(path.read_text().splitlines(), 1)
                      if _AST_CALL.search(line) and not line.lstrip().startswith("#")]
    assert not found, found


def test_literal_reads_what_literal_eval_reads_and_refuses_the_same():
    assert syntax.literal("  {'acc': 0.5, 'n': [1, 2]}") == {"acc": 0.5, "n": [1, 2]}
    for bad in ("__import__('os')", "{'a': 1"):
        with pytest.raises((ValueError, SyntaxError)):
            syntax.literal(bad)
