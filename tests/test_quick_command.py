"""The README's quick test command (issue 54): the tests that run no sandbox and no app server, with
`--every-module`, which fails the session when a module of the product was never imported by the tests that ran."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import product_modules

ROOT = Path(__file__).resolve().parents[1]
FULL = "python3 -m pytest -q -n 2 --dist loadgroup"
QUICK = f'{FULL} -m "not slow and not docker" --every-module'


def test_the_readme_gives_the_quick_command_beside_the_full_one():
    readme = (ROOT / "README.md").read_text()
    tests = readme.split("## Tests", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```bash\n(.*?)```", tests, re.S)
    lines = [line.split("#", 1)[0].strip() for block in commands for line in block.splitlines()]
    assert FULL in lines and QUICK in lines
    assert (ROOT / ".ci" / "run").read_text().splitlines()[-1] == FULL


def test_every_module_of_the_product_is_listed_from_the_files():
    modules = set(product_modules())
    assert {"failatlas", "failatlas.store", "failatlas.bench_core.scoring", "failatlas.taxonomy.name_fit",
            "failatlas.cluster"} <= modules
    # the mini-suite's task repositories are data shipped inside the package folder, not modules of it
    assert (ROOT / "bench_core" / "suites" / "mini").is_dir()
    assert not any(m.startswith("failatlas.bench_core.suites.mini") for m in modules)


def test_a_selection_that_leaves_modules_unimported_fails_and_names_them():
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--every-module",
                           "tests/core/test_intervals.py"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout[-2000:]
    said = [line for line in done.stdout.splitlines() if line.startswith("--every-module:")]
    assert said and "failatlas.taxonomy.name_fit" in said[0], done.stdout[-2000:]
    without = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                              "tests/core/test_intervals.py"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert without.returncode == 0 and "--every-module" not in without.stdout


def test_two_workers_keep_a_file_on_one_and_count_modules_their_workers_imported():
    """`-n 2 --dist loadgroup` (tests/conftest.py): each file's tests run on one worker (module fixtures built once),
    and `--every-module` counts what the workers imported, not what the controller did."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-n", "2", "--dist",
                           "loadgroup", "--every-module", "-m", "not slow", "tests/test_script_modules.py",
                           "tests/core/test_intervals.py"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout[-2000:]
    workers: dict[str, set[str]] = {}
    for line in done.stdout.splitlines():
        found = re.match(r"\[(gw\d)\] .*PASSED (tests/\S+?)::", line)
        if found:
            workers.setdefault(found.group(2), set()).add(found.group(1))
    assert set(workers) == {"tests/test_script_modules.py", "tests/core/test_intervals.py"}, done.stdout[-2000:]
    assert all(len(seen) == 1 for seen in workers.values()), workers
    said = [line for line in done.stdout.splitlines() if line.startswith("--every-module:")]
    assert said and "failatlas.taxonomy.name_fit" in said[0], done.stdout[-2000:]
    assert "failatlas.bench_core.hidden.fixture" not in said[0]  # imported by a worker only
