from __future__ import annotations

import importlib.metadata
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

SHARED_DATA = Path(os.environ.get("FAILATLAS_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def require_extra(extra: str, *distributions: str) -> None:
    """Skip the calling test, naming the optional extra to install, when a distribution of that extra is absent.
    `scripts/setup.sh` installs the base package only; `.ci/run` installs every extra, so in CI these tests run."""
    missing = []
    for name in distributions:
        try:
            importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(name)
    if missing:
        pytest.skip(f"needs the optional '{extra}' extra ({', '.join(missing)} not installed): "
                    f"pip install -e '.[{extra}]' (.ci/run installs it)")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A fresh, real DuckDB file per test."""
    return tmp_path / "store.duckdb"


@pytest.fixture
def store(db_path: Path):
    from failatlas.store import open_store

    return open_store(db_path)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        raise RuntimeError(f"the shared data folder {SHARED_DATA} is missing; set FAILATLAS_SHARED_DATA")
    return SHARED_DATA


@pytest.fixture(scope="session")
def sandbox_image() -> str:
    """The real sandbox image; built once (minutes) when the tag is missing, reused afterwards."""
    from failatlas.bench_core.sandbox import DEFAULT_IMAGE, build_base_image

    build_base_image(DEFAULT_IMAGE)
    return DEFAULT_IMAGE


HARNESS_AGENTS = ("gold", "null", "fault-missing-component", "fault-wrong-constant", "fault-missing-package",
                  "fault-crash", "fault-no-conclusion", "fault-fabricated-results", "fault-peek")


@pytest.fixture(scope="session")
def scored_mini_store(sandbox_image: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real store in which every harness agent ran on every CPU task of the mini-suite, in Docker, and was
    scored offline. Built once per test session (a few minutes); tests that write must use `mini_store_copy`.
    $FAILATLAS_TEST_SCORED_STORE may name such a store built before (its runs folder beside it), used as it is, to
    skip the Docker runs when re-running tests."""
    if os.environ.get("FAILATLAS_TEST_SCORED_STORE"):
        return Path(os.environ["FAILATLAS_TEST_SCORED_STORE"])
    from failatlas.bench_core import runs, scoring
    from failatlas.bench_core.suites import load_suite
    from failatlas.bench_core.tasks import save_tasks
    from failatlas.store import open_store

    root = tmp_path_factory.mktemp("mini-runs")
    store = open_store(root / "mini.duckdb")
    save_tasks(store, load_suite("failatlas-mini"), source="failatlas-mini")
    runs.run(store, runs.BenchParams(agent=HARNESS_AGENTS[0], benchmark="failatlas-mini", runs_dir=root / "runs",
                                     workers=2, sandbox="docker", image=sandbox_image), agents=HARNESS_AGENTS)
    scoring.run(store, scoring.ScoreParams(runs_dir=root / "runs", sandbox="docker", image=sandbox_image, workers=2))
    return store.path


@pytest.fixture
def mini_store_copy(scored_mini_store: Path, tmp_path: Path) -> Path:
    """A private copy of the scored mini-suite store."""
    target = tmp_path / "mini.duckdb"
    shutil.copy(scored_mini_store, target)
    return target


@dataclass
class DemoBuild:
    """`failatlas demo` as it ran once for the session: its store, what it said, its result."""
    path: Path
    lines: list[str]
    result: object  # failatlas.demo.DemoResult


@pytest.fixture(scope="session")
def demo_build(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> DemoBuild:
    """The demo's store: every harness agent's real Docker runs of the mini-suite, scored (the session's
    `scored_mini_store`), then `failatlas demo` on a copy, which does only what is missing: the impossible twins'
    runs and their scoring, insights, embeddings, clustering, taxonomy, exports. Built once per session (the app's
    end-to-end tests serve copies; tests/failatlas/test_demo.py checks what it said and wrote). Tests must not write
    to `path`: they copy it."""
    from failatlas.demo import run_demo
    from failatlas.store import Store

    source = request.getfixturevalue("scored_mini_store")
    folder = tmp_path_factory.mktemp("demo")
    shutil.copy(source, folder / "demo.duckdb")
    lines: list[str] = []
    result = run_demo(Store(folder / "demo.duckdb"), out_dir=folder / "out", sandbox="docker", say=lines.append)
    return DemoBuild(path=folder / "demo.duckdb", lines=lines, result=result)


# --- two workers (`-n 2 --dist loadgroup`, the README's test commands) -------------------------------------------
# A session fixture is built once per worker. The expensive ones are built once in all: every test that needs one
# joins that fixture's group, which one worker runs; every other test is grouped by its file (its module fixtures
# built once). The shared groups go first, so that the longest units do not start last.
SHARED_BUILDS = (
    ("mini-store", {"scored_mini_store", "mini_store_copy", "demo_build", "demo_store"}),
    ("gaia-cli", {"gaia_cli_store"}),
    ("trail", {"trail_template"}),
    ("app-template", {"app_template"}),
)


def xdist_group_of(fixturenames: list[str] | tuple[str, ...], nodeid: str) -> str:
    """The group a test runs in under `--dist loadgroup`: the first shared build it needs, else its file."""
    needs = set(fixturenames)
    for group, fixtures in SHARED_BUILDS:
        if needs & fixtures:
            return group
    return nodeid.split("::", 1)[0]


def _join_group(item: pytest.Item, group: str) -> None:
    """What xdist does for an `xdist_group` mark (the group after '@' in the node id, which its scheduler reads),
    done here: xdist 3.8 sets `item._nodeid`, which pytest 9.2 no longer reads, so its own marks group nothing."""
    new = f"{item.nodeid}@{group}"
    if hasattr(item, "_id"):
        from _pytest.nodes import coerce_node_id

        item._id = coerce_node_id(new)
    else:
        item._nodeid = new


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not getattr(config.option, "loadgroup", False):  # an xdist worker under `--dist loadgroup` only
        return
    groups = {id(item): xdist_group_of(getattr(item, "fixturenames", ()), item.nodeid) for item in items}
    rank = {group: k for k, (group, _fixtures) in enumerate(SHARED_BUILDS)}  # the long units first, not last
    items.sort(key=lambda item: rank.get(groups[id(item)], len(rank)))  # stable: each group's order kept
    for item in items:
        _join_group(item, groups[id(item)])
        if item.nodeid.rsplit("@", 1)[-1] != groups[id(item)]:
            raise pytest.UsageError(f"cannot put {item.nodeid} in its xdist group {groups[id(item)]}")


# --- `--every-module`: the quick command's promise that it still touches every module of the product ------------

def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--every-module", action="store_true",
                     help="fail the session when a module of the product was never imported by the tests that ran "
                          "(the README's quick command passes it)")


def product_modules() -> list[str]:
    """Every module of the installed package as a clone holds it (`failatlas.X` for `failatlas/X.py` and for
    `X/...` of each stage folder), from the files, not from what happens to be imported."""
    root = Path(__file__).resolve().parents[1]
    stages = ("bench_core", "ingest", "embed", "cluster", "taxonomy")
    names = []
    for top in ("failatlas", *stages):
        for path in sorted((root / top).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if "__pycache__" in parts or any(p.startswith(".") for p in parts):
                continue
            if any(not (root / Path(*parts[:k]) / "__init__.py").is_file() for k in range(1, len(parts))):
                continue  # a file in a folder that is no package: data (the suites' task repositories), no module
            if parts[-1] == "__init__":
                parts.pop()
            if parts[-1] == "__main__":
                continue
            names.append(".".join(parts if parts[0] == "failatlas" else ["failatlas", *parts]))
    return names


WORKER_MODULES: set[str] = set()  # on the controller of `-n N`: the product modules its workers imported


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:  # pytest-xdist's hook: a worker finished and sent its output
    WORKER_MODULES.update(getattr(node, "workeroutput", {}).get("failatlas_modules", ()))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    import sys

    if not session.config.getoption("--every-module"):
        return
    if hasattr(session.config, "workeroutput"):  # an xdist worker: the controller decides
        session.config.workeroutput["failatlas_modules"] = sorted(m for m in sys.modules if m.startswith("failatlas"))
        return
    if session.testscollected == 0:
        return
    missing = [m for m in product_modules() if m not in sys.modules and m not in WORKER_MODULES]
    if missing:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        line = reporter.write_line if reporter else print
        line(f"\n--every-module: {len(missing)} module(s) of the product were never imported by the tests that ran: "
             + ", ".join(missing))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED

