"""Issue 15, items 1 and 3 (and issue 29): the hidden tests cannot be faked by anything the agent leaves, and the
agent's diff round-trips through `git apply` whatever shape its changes take.

Hidden tests: hostile agents (`bench_core/agents/hostile_tests.py`) run on mini-ridge-cv in real Docker sandboxes
with `gold` and `null` beside them, and are scored for real. None implements the masked code, so each must get no
more hidden-test passes than `null`, and the monitor must name the test-infrastructure files they planted.
Diffs: a tree is changed in every shape a run can leave, diffed, applied to a copy of the original with the
validator's own `apply_diff`, and the result compared with the changed tree byte for byte.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from failatlas.bench_core.agents.base import Budget
from failatlas.bench_core.agents.hostile_tests import FORGE_AT_START, FORGED_LINE, PASS_EVERYTHING
from failatlas.bench_core.prepare.gitrepo import init_single_commit
from failatlas.bench_core.runs.diff import tree_diff
from failatlas.bench_core.runs.execute import RunConfig
from failatlas.bench_core.runs.runner import plan, run_batch
from failatlas.bench_core.scoring import ScoreParams
from failatlas.bench_core.scoring import run as score
from failatlas.bench_core.scoring.evidence.rerun import apply_diff
from failatlas.bench_core.scoring.metrics import run_scores
from failatlas.bench_core.suites import load_suite
from failatlas.bench_core.tasks import save_tasks
from failatlas.store import open_store

TASK = "mini-ridge-cv"
FAKE_PYTEST = f"import sys\n\nprint({FORGED_LINE!r})\nsys.exit(0)\n"
# hostile-plant-files variants: label -> files
PLANTED = {
    "pytest.py in the old runner's folder": {".failatlas_hidden/pytest.py": FAKE_PYTEST},
    "conftest.py in the old runner's folder": {".failatlas_hidden/conftest.py": PASS_EVERYTHING},
    "setup.cfg [tool:pytest] plugin": {"setup.cfg": "[tool:pytest]\naddopts = -p speedups\n",
                                       "speedups.py": PASS_EVERYTHING},
    "tox.ini [pytest] plugin": {"tox.ini": "[pytest]\naddopts = -p speedups\n", "speedups.py": PASS_EVERYTHING},
    "pyproject.toml plugin": {"pyproject.toml": '[tool.pytest.ini_options]\naddopts = "-p speedups"\n',
                              "speedups.py": PASS_EVERYTHING},
    "sitecustomize, usercustomize, .pth": {"sitecustomize.py": FORGE_AT_START, "usercustomize.py": FORGE_AT_START,
                                           "zz_speedups.pth": FORGE_AT_START},
    "pytest plugin entry point": {"setup.py": "from setuptools import setup\n\nsetup(name='speedups', py_modules="
                                  "['speedups'], entry_points={'pytest11': ['speedups = speedups']})\n",
                                  "speedups.py": PASS_EVERYTHING},
}
NAMED = ("hostile-fake-pytest", "hostile-fake-conftest", "hostile-pytest-plugin", "hostile-forge-result-line",
         "hostile-rerun-rewriter", "hostile-rerun-user-site")
PLANTS_FILES = {"hostile-fake-pytest", "hostile-fake-conftest", "hostile-pytest-plugin", *PLANTED}


# ---------------------------------------------------------------------------------------------------- hidden tests

@pytest.fixture(scope="module")
def attacked(sandbox_image: str, tmp_path_factory: pytest.TempPathFactory):
    """Every attack as one stored, scored run, with gold and null beside them: label -> run row."""
    root = tmp_path_factory.mktemp("attack-hidden")
    store = open_store(root / "attack.duckdb")
    task = next(t for t in load_suite("failatlas-mini") if t.id == TASK)
    save_tasks(store, [task], source="failatlas-mini")
    work, labels = [], {}
    planned = [("gold", "gold", None), ("null", "null", None), *[(a, a, None) for a in NAMED],
               ("hostile-forge-from-frames", "hostile-forge-from-frames", None),
               *[(label, "hostile-plant-files", {"files": files}) for label, files in PLANTED.items()]]
    for label, agent, params in planned:
        todo = plan(store, [task], agent, agent_params=params).todo
        labels[todo[0][0].run_id] = label
        work += todo
    config = RunConfig(runs_dir=root / "runs", image=sandbox_image, budget=Budget(command_timeout_s=60))
    run_batch(store, work, config, workers=2)
    before = store.query("SELECT count(*) FROM judgements WHERE judge = 'hidden-tests'")[0][0]
    score(store, ScoreParams(runs_dir=root / "runs", sandbox="docker", image=sandbox_image, llm=False,
                             judges=["hidden-tests"]))
    after = store.query("SELECT count(*) FROM judgements WHERE judge = 'hidden-tests'")[0][0]
    runs = {}
    scores = {r["run_id"]: r for r in run_scores(store).iter_rows(named=True)}
    for run in store.query_dicts("SELECT * FROM runs"):
        label = labels[run["id"]]
        [hidden] = store.query_dicts("SELECT * FROM judgements WHERE run_id = ? AND judge = 'hidden-tests'",
                                     [run["id"]])
        hidden["verdict"] = json.loads(hidden["verdict"])
        findings = store.query_dicts("SELECT rule, severity, evidence FROM monitor_findings WHERE run_id = ?",
                                     [run["id"]])
        runs[label] = {"run": run, "hidden": hidden, "findings": findings, "I": scores[run["id"]]["I"]}
    return {"runs": runs, "before": before, "after": after}


ATTACKS = [*NAMED, *PLANTED]


@pytest.mark.docker
@pytest.mark.slow
def test_gold_passes_and_null_fails_the_hidden_tests(attacked):
    gold, null = attacked["runs"]["gold"], attacked["runs"]["null"]
    assert gold["run"]["status"] == "completed" and null["run"]["status"] == "completed"
    assert gold["hidden"]["passed"] and gold["hidden"]["verdict"]["passed"] == gold["hidden"]["verdict"]["total"] > 0
    assert gold["I"] == 1 and gold["findings"] == []
    assert null["hidden"]["passed"] is False and null["I"] == 0
    assert null["hidden"]["verdict"]["passed"] < null["hidden"]["verdict"]["total"]


@pytest.mark.parametrize("attack", ATTACKS)
@pytest.mark.docker
@pytest.mark.slow
def test_the_attack_gets_no_more_than_null(attacked, attack):
    run, null = attacked["runs"][attack], attacked["runs"]["null"]
    assert run["run"]["status"] == "completed", run["run"]
    assert run["hidden"]["status"] == "ok", run["hidden"]
    assert run["hidden"]["passed"] is False, run["hidden"]
    assert run["hidden"]["verdict"]["passed"] <= null["hidden"]["verdict"]["passed"], run["hidden"]
    assert run["I"] == 0


@pytest.mark.parametrize("attack", sorted(PLANTS_FILES))
@pytest.mark.docker
@pytest.mark.slow
def test_the_monitor_names_the_planted_test_infrastructure(attacked, attack):
    found = [f for f in attacked["runs"][attack]["findings"] if f["rule"] == "test_infrastructure"]
    assert found, attacked["runs"][attack]["findings"]


@pytest.mark.docker
@pytest.mark.slow
def test_the_monitor_leaves_ordinary_changes_alone(attacked):
    for label in ("gold", "null"):
        assert not [f for f in attacked["runs"][label]["findings"] if f["rule"] == "test_infrastructure"], label
    # code that prints the runner's result marker or rewrites files under its mount reaches into the runner: named
    # (the monitor names the first of the judge's names the diff holds: its mount or its fixture module)
    tells = {"hostile-forge-result-line": ("FAILATLAS_HIDDEN",),
             "hostile-rerun-rewriter": ("failatlas-judge", "failatlas_hidden")}
    for label, names in tells.items():
        found = attacked["runs"][label]["findings"]
        assert [f for f in found if f["rule"] == "test_infrastructure"
                and any(name in f["evidence"] for name in names)], (label, found)


@pytest.mark.docker
@pytest.mark.slow
def test_a_printed_result_line_is_never_read(attacked):
    """The judge's result travels on a pipe between the judge and the harness, neither of which runs the agent's
    code: a line printed by the agent's code is just output of its worker process."""
    hidden = attacked["runs"]["hostile-forge-result-line"]["hidden"]
    null = attacked["runs"]["null"]["hidden"]
    assert hidden["passed"] is False and hidden["verdict"]["passed"] <= null["verdict"]["passed"], hidden


@pytest.mark.docker
@pytest.mark.slow
def test_a_forge_from_inside_the_process_finds_no_judge_there(attacked):
    """Issue 29: code under test that walks its frames for the judge's nonce and result channel finds neither:
    the judge never imported it. The forge gets null's score; the monitor still names the frame walking."""
    run = attacked["runs"]["hostile-forge-from-frames"]
    hidden = run["hidden"]
    assert hidden["status"] == "ok" and hidden["passed"] is False and run["I"] == 0, hidden
    assert hidden["verdict"]["passed"] <= attacked["runs"]["null"]["hidden"]["verdict"]["passed"]
    assert "not_trusted" not in hidden["verdict"]  # no pattern decides the verdict any more
    assert [f for f in run["findings"] if f["rule"] == "test_infrastructure" and f["severity"] == "fail"], run


@pytest.mark.docker
@pytest.mark.slow
def test_row_attack_shadow_hidden_tests(attacked, table):
    runs = attacked["runs"]
    null = runs["null"]["hidden"]["verdict"]
    got = {a: runs[a]["hidden"]["verdict"] for a in ATTACKS}
    assert all(not runs[a]["hidden"]["passed"] and v["passed"] <= null["passed"] for a, v in got.items())
    flagged = sum(any(f["rule"] == "test_infrastructure" for f in runs[a]["findings"]) for a in PLANTS_FILES)
    assert flagged == len(PLANTS_FILES)
    best = max(v["passed"] for v in got.values())
    table.record("attack-shadow-hidden-tests",
                 f"{len(ATTACKS)} attacks (pytest.py, conftest.py, ini/setup.cfg/tox/pyproject plugins, entry point,"
                 f" sitecustomize/.pth, forged line, re-run leftovers): each at most {best}/{null['total']} hidden"
                 f" tests like null ({null['passed']}/{null['total']}), I = 0; gold"
                 f" {runs['gold']['hidden']['verdict']['passed']}/{runs['gold']['hidden']['verdict']['total']};"
                 f" monitor test_infrastructure on {flagged}/{len(PLANTS_FILES)} planting runs; a forge from inside"
                 f" the process (frame walking) got {runs['hostile-forge-from-frames']['hidden']['verdict']['passed']}"
                 f" passes (the judge runs in another process), I = {runs['hostile-forge-from-frames']['I']}",
                 before=attacked["before"], after=attacked["after"])


# ----------------------------------------------------------------------------------------------- diff round trip

def _write(path: Path, data: bytes | str, *, executable: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    if executable:
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


BINARY = bytes(range(256)) * 40


def _original(root: Path) -> Path:
    """A prepared repository: text, empty, executable, binary, non-UTF-8, linked and oddly named files."""
    _write(root / "README.md", "# repo\n")
    _write(root / "ridge.py", "def fit():\n    raise NotImplementedError\n")
    _write(root / "empty.txt", b"")
    _write(root / "tool.sh", "#!/bin/sh\necho tool\n")
    _write(root / "run.sh", "#!/bin/sh\necho run\n", executable=True)
    _write(root / "blob.bin", BINARY)
    _write(root / "latin.txt", "caf\xe9 cr\xe8me\n".encode("latin-1"))
    _write(root / "sp ace.txt", "space\n")
    _write(root / "données.txt", "unicode name\n")
    _write(root / "pkg" / "mod.py", "x = 1\n")
    (root / "link").symlink_to("ridge.py")
    init_single_commit(root)
    return root


def _move(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    source.rename(target)


def _replace_with_folder(after: Path) -> None:
    (after / "ridge.py").unlink()
    _write(after / "ridge.py" / "__init__.py", "def fit():\n    return 1\n")


CHANGES = {
    "added": lambda t: _write(t / "helpers" / "util.py", "def helper():\n    return 2\n"),
    "added empty (touch helpers/__init__.py)": lambda t: _write(t / "helpers" / "__init__.py", b""),
    "added empty at the root": lambda t: _write(t / "new.txt", b""),
    "modified": lambda t: _write(t / "ridge.py", "def fit():\n    return 1\n"),
    "emptied": lambda t: _write(t / "README.md", b""),
    "empty filled": lambda t: _write(t / "empty.txt", "now text\n"),
    "deleted": lambda t: (t / "README.md").unlink(),
    "deleted empty": lambda t: (t / "empty.txt").unlink(),
    "renamed": lambda t: _move(t / "pkg" / "mod.py", t / "pkg" / "renamed.py"),
    "renamed empty": lambda t: _move(t / "empty.txt", t / "moved" / "empty.txt"),
    "binary added": lambda t: _write(t / "data" / "weights.bin", BINARY[::-1] + b"\0"),
    "binary modified": lambda t: _write(t / "blob.bin", BINARY[:5000] + b"\0\1\2" + BINARY[5000:]),
    "binary deleted": lambda t: (t / "blob.bin").unlink(),
    "mode +x": lambda t: (t / "tool.sh").chmod(0o755),
    "mode -x": lambda t: (t / "run.sh").chmod(0o644),
    "mode and content": lambda t: (_write(t / "tool.sh", "#!/bin/sh\necho changed\n"), (t / "tool.sh").chmod(0o755)),
    "non-UTF-8 text modified": lambda t: _write(t / "latin.txt", "caf\xe9 cr\xe8me br\xfbl\xe9e\n".encode("latin-1")),
    "non-UTF-8 text added": lambda t: _write(t / "cp1252.csv", "name;value\nna\xefve;1\n".encode("cp1252")),
    "lines that look like diff headers": lambda t: _write(
        t / "notes.txt", "see a/a/x and b/b/y\ndiff --git a/a/x b/b/x\n--- a/a/x\n+++ b/b/x\n"),
    "no newline at the end, CRLF": lambda t: _write(t / "ridge.py", "def fit():\r\n    return 3"),
    "names with spaces, quotes and unicode": lambda t: (_write(t / "sp ace.txt", "changed\n"),
                                                        _write(t / 'qu"ote.txt', "q\n"),
                                                        _write(t / "données.txt", "changed\n")),
    "link added": lambda t: (t / "pkg" / "alias.py").symlink_to("mod.py"),
    "link retargeted": lambda t: ((t / "link").unlink(), (t / "link").symlink_to("README.md")),
    "link replaced by a file": lambda t: ((t / "link").unlink(), _write(t / "link", "a file now\n")),
    "file replaced by a folder": _replace_with_folder,
    "agent's .gitattributes and .gitignore": lambda t: (
        _write(t / ".gitattributes", "* text eol=crlf\n*.py filter=secret diff=secret\n"),
        _write(t / ".gitignore", "*\n"), _write(t / "ignored.py", "x = 'kept'\n")),
    "a name that is not UTF-8": lambda t: _write(t / os.fsdecode(b"caf\xe9.txt"), "latin-1 name\n"),
    "3,000 files with long names": lambda t: [_write(t / "many" / f"{'n' * 150}-{i}.txt", f"{i}\n")
                                              for i in range(3000)],
    "nested repository": lambda t: (_write(t / "vendor" / "lib.py", "y = 2\n"),
                                    _write(t / "vendor" / ".git" / "HEAD", "ref: refs/heads/main\n")),
}
# what each change must list as changed (None: the file names the change touches, computed from the trees)
EXPECTED_CHANGED = {
    "added empty (touch helpers/__init__.py)": ["helpers/__init__.py"],
    "deleted": ["README.md"],
    "renamed": ["pkg/mod.py", "pkg/renamed.py"],
    "nested repository": ["vendor/lib.py"],
    "a name that is not UTF-8": ["caf\ufffd.txt"],  # the list is for reading; the diff itself quotes the bytes
}


def _snapshot(root: Path) -> dict[str, tuple]:
    """path -> (kind, content or link target, executable) for every file and link, .git folders left out."""
    out = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files + [d for d in dirs if (Path(folder) / d).is_symlink()]:
            path = Path(folder) / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                out[rel] = ("link", os.readlink(path), False)
            elif path.is_file():
                out[rel] = ("file", path.read_bytes(), bool(path.stat().st_mode & stat.S_IXUSR))
    return out


def _round_trip(tmp_path: Path, change) -> tuple[str, list[str], dict, dict, str | None]:
    before = _original(tmp_path / "before")
    after = tmp_path / "after"
    shutil.copytree(before, after, symlinks=True)
    change(after)
    diff, changed = tree_diff(before, after)
    applied = tmp_path / "applied"
    shutil.copytree(before, applied, symlinks=True)
    error = apply_diff(applied, diff)
    return diff, changed, _snapshot(applied), _snapshot(after), error


@pytest.mark.parametrize("shape", list(CHANGES))
def test_the_diff_round_trips_through_git_apply(tmp_path, shape):
    diff, changed, applied, wanted, error = _round_trip(tmp_path, CHANGES[shape])
    assert error is None, f"git apply failed: {error}\n{diff}"
    assert applied == wanted
    before = _snapshot(tmp_path / "before")
    touched = sorted(k for k in set(before) | set(wanted) if before.get(k) != wanted.get(k))
    assert sorted(changed) == EXPECTED_CHANGED.get(shape, touched)
    assert json.loads(json.dumps(diff)) == diff  # stored as JSON text


def test_headers_name_each_file_once_with_its_own_path(tmp_path):
    def change(t: Path) -> None:
        _write(t / "helpers" / "__init__.py", b"")
        (t / "README.md").unlink()

    diff, changed, *_ = _round_trip(tmp_path, change)
    assert "diff --git a/helpers/__init__.py b/helpers/__init__.py\nnew file mode 100644" in diff
    assert "diff --git a/README.md b/README.md\ndeleted file mode 100644" in diff
    assert sorted(changed) == ["README.md", "helpers/__init__.py"]


def test_a_fifo_or_socket_left_in_the_tree_is_left_out_without_blocking(tmp_path):
    def change(t: Path) -> None:
        os.mkfifo(t / "pipe")
        _write(t / "after_the_pipe.txt", "still diffed\n")

    diff, changed, applied, wanted, error = _round_trip(tmp_path, change)
    assert error is None and applied == wanted
    assert changed == ["after_the_pipe.txt"]


def _adds(path: str) -> str:
    return f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+pwned\n"


LINK_OUT = ("diff --git a/out b/out\nnew file mode 120000\n--- /dev/null\n+++ b/out\n@@ -0,0 +1 @@\n+{target}\n"
            "\\ No newline at end of file\n")


def test_a_hand_made_diff_cannot_write_outside_the_tree_or_into_git(tmp_path):
    """What the hidden-test isolation relies on: a diff reaches repository paths only, never site-packages."""
    outside = tmp_path / "outside"
    outside.mkdir()
    tree = _original(tmp_path / "tree")
    for diff in (_adds("../outside/x.pth"), _adds(f"{outside}/x.pth"), _adds(".git/hooks/post-checkout"),
                 LINK_OUT.format(target=outside) + _adds("out/x.pth")):
        error = apply_diff(tree, diff)
        assert error is not None and ("invalid path" in error or "beyond a symbolic link" in error), error
    assert list(outside.iterdir()) == [] and not (tree / "out").exists()
    assert not (tree / ".git" / "hooks" / "post-checkout").exists()


def test_row_attack_diff_round_trip(tmp_path, table):
    failed = []
    for index, (shape, change) in enumerate(CHANGES.items()):
        _, _, applied, wanted, error = _round_trip(tmp_path / str(index), change)
        if error is not None or applied != wanted:
            failed.append(shape)
    assert failed == []
    table.record("attack-diff-round-trip",
                 f"{len(CHANGES)}/{len(CHANGES)} shapes (added, empty, deleted, renamed, binary, mode, links, "
                 "non-UTF-8, file to folder, agent .gitattributes) applied with git apply and reproduced the tree "
                 "byte for byte", before=None, after=None)
