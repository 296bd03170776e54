"""The taxonomy by kind on real runs: every harness agent on every CPU task of the mini-suite, in Docker, scored
offline (the session's `scored_mini_store`), then mined, embedded, clustered and built as `failatlas demo` does.

Each fault agent injects one known fault; its insights must all be of the kind that fault is, and sit in types of
that kind only, counted once, in the phase where the fault happened. The two entry points hold nothing but their
kinds; a type is one cause (kind) with its objects as data; every type name is a readable phrase.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from failatlas.ingest.kinds import ENTRY_POINT_KINDS, ENVIRONMENT, KINDS, MISSING_COMPONENT
from failatlas.store import Store
from tests.conftest import HARNESS_AGENTS

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# fault agent -> the kinds its insights may have (one kind per agent, but for the wrong constant's two)
FAULT_KINDS = {
    "fault-missing-component": set(ENTRY_POINT_KINDS[MISSING_COMPONENT]),
    "fault-missing-package": {"dependency_not_installed"},
    # gold's conclusion states values the wrong constant moved: C from evidence fails it too (issue 38)
    "fault-wrong-constant": {"wrong_value", "conclusion_unsupported"},
    "fault-crash": {"crash"},
    "fault-no-conclusion": {"conclusion_missing"},
    # its conclusion states values no re-run produced: C from evidence fails it too (issue 38)
    "fault-fabricated-results": {"result_not_produced", "conclusion_unsupported"},
    "fault-peek": {"monitor_violation"},
}
TASKS = ("mini-imbalance-reweight", "mini-kmeans-init", "mini-logreg-scaling", "mini-ridge-cv", "mini-tree-depth")
_FILE_LINE = re.compile(r"\b[\w./-]+\.py:\d+")
_TRACEBACK = re.compile(r"Traceback|File \"|\bline \d+|in <module>|^E\s|\n|/failatlas-judge/|\^\^\^|~~~")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


@pytest.fixture(scope="module")
def mined(scored_mini_store: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, str]:
    """A copy of the scored store taken through the demo's mining steps; returns it and the taxonomy id."""
    from failatlas.cluster import ClusterParams
    from failatlas.cluster import run as run_cluster
    from failatlas.embed import EmbedParams
    from failatlas.embed import run as run_embed
    from failatlas.ingest import RunsIngestParams, run_runs
    from failatlas.store import open_store
    from failatlas.taxonomy import BuildParams
    from failatlas.taxonomy import run as build

    path = tmp_path_factory.mktemp("kinds") / "mini.duckdb"
    shutil.copy(scored_mini_store, path)
    store = open_store(path)
    run_runs(store, RunsIngestParams())
    embedded = run_embed(store, EmbedParams())
    clusterings = run_cluster(store, ClusterParams(reassign_outliers=True,
                                                   embedding_set_id=embedded.embedding_set_id)).clusterings
    return store, build(store, BuildParams(clustering_ids=[c.id for c in clusterings])).id


def _typed(store: Store, taxonomy_id: str, where: str = "TRUE", params: list | None = None) -> list[dict]:
    return store.query_dicts(
        "SELECT r.agent, r.task_id, i.id AS insight_id, i.phase, i.kind, i.object, i.text, ift.failure_type_id,"
        " t.name AS type_name FROM insight_sources s JOIN runs r ON r.id = s.run_id"
        " JOIN insights i ON i.id = s.insight_id"
        " LEFT JOIN insight_failure_types ift ON ift.insight_id = i.id AND ift.taxonomy_id = ?"
        " LEFT JOIN failure_types t ON t.taxonomy_id = ift.taxonomy_id AND t.id = ift.failure_type_id"
        f" WHERE {where}", [taxonomy_id, *(params or [])])


def _type_kinds(store: Store, taxonomy_id: str) -> dict[str, set[str]]:
    rows = store.query("SELECT ift.failure_type_id, list(DISTINCT i.kind) FROM insight_failure_types ift"
                       " JOIN insights i ON i.id = ift.insight_id WHERE ift.taxonomy_id = ? GROUP BY ALL",
                       [taxonomy_id])
    return {t: set(k) for t, k in rows}


@pytest.mark.parametrize("agent", sorted(FAULT_KINDS))
def test_each_fault_agents_insights_are_of_its_faults_kind_only(mined: tuple[Store, str], agent: str) -> None:
    store, taxonomy_id = mined
    rows = _typed(store, taxonomy_id, "r.agent = ?", [agent])
    assert rows, f"{agent}: no insight mined from its runs"
    kinds = {r["kind"] for r in rows}
    assert kinds and kinds <= FAULT_KINDS[agent], (agent, kinds, sorted({r["text"] for r in rows}))
    main = {"fault-wrong-constant": "wrong_value", "fault-fabricated-results": "result_not_produced"}
    assert main[agent] in kinds if agent in main else len(kinds) == 1, (agent, kinds)
    type_kinds = _type_kinds(store, taxonomy_id)
    for r in rows:
        assert r["failure_type_id"] not in (None, "unassigned"), r  # every insight of a known kind has a type
        assert type_kinds[r["failure_type_id"]] == {r["kind"]}, (r["type_name"], type_kinds[r["failure_type_id"]])


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("agent", sorted(FAULT_KINDS))
def test_each_fault_run_is_mined_as_its_fault(mined: tuple[Store, str], agent: str, task: str) -> None:
    """Per task: the run's insights are of the fault's kind; a run with none passed every check that ran (the
    fault had no effect the harness could see, e.g. no conclusion judged), never a failure left unmined."""
    store, taxonomy_id = mined
    rows = _typed(store, taxonomy_id, "r.agent = ? AND r.task_id = ?", [agent, task])
    assert {r["kind"] for r in rows} <= FAULT_KINDS[agent], sorted({(r["kind"], r["text"]) for r in rows})
    if not rows:
        failed = store.query(
            "SELECT count(*) FROM runs r LEFT JOIN validations v ON v.run_id = r.id"
            " LEFT JOIN judgements j ON j.run_id = r.id AND j.status = 'ok' AND NOT j.passed"
            " LEFT JOIN monitor_findings m ON m.run_id = r.id"
            " WHERE r.agent = ? AND r.task_id = ? AND (v.outcome NOT IN ('passed', 'not_scored')"
            " OR j.run_id IS NOT NULL OR m.run_id IS NOT NULL)", [agent, task])[0][0]
        assert failed == 0, f"{agent} on {task} failed a check but gave no insight"


def test_a_missing_package_is_a_dependency_and_a_missing_component_is_not(mined: tuple[Store, str]) -> None:
    store, _ = mined
    package = store.query("SELECT DISTINCT i.object, i.text FROM insights i JOIN insight_sources s"
                          " ON s.insight_id = i.id JOIN runs r ON r.id = s.run_id"
                          " WHERE r.agent = 'fault-missing-package'")
    assert package and {o for o, _ in package} == {"scikit-learn-extra"}
    assert all("sklearn_extra" in text for _, text in package)
    # `null` leaves masked parts as stubs: never an environment kind, whatever its logs say
    null_kinds = {k for (k,) in store.query("SELECT DISTINCT i.kind FROM insights i JOIN insight_sources s"
                                             " ON s.insight_id = i.id JOIN runs r ON r.id = s.run_id"
                                             " WHERE r.agent = 'null'")}
    assert null_kinds and not null_kinds & set(ENTRY_POINT_KINDS[ENVIRONMENT])


def test_entry_points_are_pure_and_complete(mined: tuple[Store, str]) -> None:
    from failatlas.appdata import queries

    store, taxonomy_id = mined
    type_kinds = _type_kinds(store, taxonomy_id)
    for name, spec in queries.ENTRY_POINTS.items():
        types = queries.entry_point_types(store, taxonomy_id, name)
        assert types.height > 0, name
        for type_id in types["failure_type_id"].to_list():
            assert type_kinds[type_id] <= set(spec["kinds"]), (name, type_id, type_kinds[type_id])
        listed = set(types["failure_type_id"].to_list())
        of_kinds = {t for t, k in type_kinds.items() if k & set(spec["kinds"]) and t != "unassigned"}
        assert of_kinds == listed, name  # every type of the entry's kinds is under it
        n_insights, n_runs = queries.entry_point_totals(store, taxonomy_id)[name]
        assert n_insights == int(types["n_insights"].sum()) and n_runs > 0
    assert not set(ENTRY_POINT_KINDS[MISSING_COMPONENT]) & set(ENTRY_POINT_KINDS[ENVIRONMENT])


def test_a_type_is_one_cause_and_one_fault_is_counted_once(mined: tuple[Store, str]) -> None:
    """Types by cause (issue 41): each type holds one kind and each kind one type per phase, its objects listed as
    data; fault-crash's crash is one implementation type on every task where a crash can show, never an execution
    type too; `null` leaves work undone and never crashes."""
    store, taxonomy_id = mined
    rows = store.query(
        "SELECT t.phase, t.id, list(DISTINCT i.kind) FROM failure_types t JOIN insight_failure_types ift"
        " ON ift.taxonomy_id = t.taxonomy_id AND ift.failure_type_id = t.id JOIN insights i ON i.id = ift.insight_id"
        " WHERE t.taxonomy_id = ? GROUP BY ALL", [taxonomy_id])
    assert all(len(kinds) == 1 for _, _, kinds in rows), rows
    per_phase = [(phase, kinds[0]) for phase, _, kinds in rows]
    assert len(per_phase) == len(set(per_phase)), sorted(per_phase)
    crash = _typed(store, taxonomy_id, "r.agent = 'fault-crash'")
    assert {(r["phase"], r["type_name"]) for r in crash} == {("implementation", "Crash in agent code")}
    assert len({r["task_id"] for r in crash}) == len(crash) >= 4  # one occurrence per task, in one phase
    null = _typed(store, taxonomy_id, "r.agent = 'null'")
    assert null and "crash" not in {r["kind"] for r in null}, sorted({(r["kind"], r["text"]) for r in null})


def test_every_type_name_is_a_readable_phrase(mined: tuple[Store, str]) -> None:
    store, taxonomy_id = mined
    vocabulary = {w.lower() for k in KINDS for w in _WORD.findall(k.name)}
    for type_id, name in store.query("SELECT id, name FROM failure_types WHERE taxonomy_id = ?", [taxonomy_id]):
        assert not _FILE_LINE.search(name) and not _TRACEBACK.search(name), name
        members = " ".join(t for (t,) in store.query(
            "SELECT i.text || ' ' || coalesce(i.object, '') FROM insight_failure_types ift JOIN insights i"
            " ON i.id = ift.insight_id WHERE ift.taxonomy_id = ? AND ift.failure_type_id = ?",
            [taxonomy_id, type_id]))
        words = {w.lower() for w in _WORD.findall(members)}
        for word in _WORD.findall(name):  # no word cut: each is a kind's word or a whole word of the insights
            assert word.lower() in vocabulary | words | {"in"}, (name, word)


def test_harness_agents_all_ran(mined: tuple[Store, str]) -> None:
    store, _ = mined
    assert {a for (a,) in store.query("SELECT DISTINCT agent FROM runs")} == set(HARNESS_AGENTS)
