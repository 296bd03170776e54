"""Issue 41 on the demo's real runs (the session's `scored_mini_store`: every harness agent on every CPU task of the
mini-suite, in Docker, scored offline), mined, embedded, clustered and built as `failatlas demo` does:

- a new type that duplicates a seed category joins it, and no type is left "Unnamed type";
- the README's demo table is what `scripts/demo_table.py` prints for the demo;
- every export lists each type's objects;
- the null agent's missing design is named for what it is, not "Expected output not produced".
"""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from failatlas.store import Store

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def demo(scored_mini_store: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, str, list[str]]:
    """A copy of the scored store taken through the demo's mining steps; the store, the taxonomy id and the
    clusterings."""
    from failatlas.cluster import ClusterParams
    from failatlas.cluster import run as run_cluster
    from failatlas.embed import EmbedParams
    from failatlas.embed import run as run_embed
    from failatlas.ingest import RunsIngestParams, run_runs
    from failatlas.store import open_store
    from failatlas.taxonomy import BuildParams
    from failatlas.taxonomy import run as build

    path = tmp_path_factory.mktemp("demo41") / "demo.duckdb"
    shutil.copy(scored_mini_store, path)
    store = open_store(path)
    run_runs(store, RunsIngestParams(extractor="deterministic"))
    embedded = run_embed(store, EmbedParams())
    clusterings = [c.id for c in run_cluster(store, ClusterParams(
        reassign_outliers=True, embedding_set_id=embedded.embedding_set_id)).clusterings]
    return store, build(store, BuildParams(clustering_ids=clusterings)).id, clusterings


def test_the_readme_demo_table_is_the_scripts_output_on_the_demo(demo: tuple[Store, str, list[str]]) -> None:
    """The demo is deterministic (fixed agents, tasks and seeds; offline judges; types by kind), so the README's
    table must equal the script's output exactly, numbers included."""
    store, _, _ = demo
    pick = ["--taxonomy", demo[1]]  # the demo's build, whatever other tests of this module build after it
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "demo_table.py"), "--db", str(store.path), *pick,
                           "--check", str(ROOT / "README.md")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr + _occurrences(store, demo[1])
    printed = subprocess.run([sys.executable, str(ROOT / "scripts" / "demo_table.py"), "--db", str(store.path), *pick],
                             capture_output=True, text=True, timeout=300, check=True).stdout
    rows = [line for line in printed.splitlines() if line.startswith("| ") and not line.startswith("| Phase")]
    n_types = store.query("SELECT count(*) FROM failure_types WHERE taxonomy_id = ?", [demo[1]])[0][0]
    assert len(rows) >= n_types  # every type, and 'Unassigned' rows where a phase has them


def _occurrences(store: Store, taxonomy_id: str) -> str:
    """Every occurrence of the build's monitor and execution types, with its run and the finding or verdict it came
    from: what a mismatch needs to be explained (a table differing in CI said only that a count moved)."""
    rows = store.query(
        "SELECT i.phase, t.name, r.agent, r.task_id, i.kind, i.object, left(i.text, 160), s.source_field,"
        " left(s.detail::VARCHAR, 300) FROM insight_failure_types ift JOIN insights i ON i.id = ift.insight_id"
        " JOIN failure_types t ON t.taxonomy_id = ift.taxonomy_id AND t.id = ift.failure_type_id"
        " LEFT JOIN insight_sources s ON s.insight_id = i.id LEFT JOIN runs r ON r.id = s.run_id"
        " WHERE ift.taxonomy_id = ? AND i.phase IN ('monitor', 'execution') ORDER BY ALL", [taxonomy_id])
    return "\nthe occurrences of the monitor and execution types:\n" + "\n".join(" | ".join(map(str, r)) for r in rows)


def test_every_export_lists_each_types_objects(demo: tuple[Store, str, list[str]], tmp_path: Path) -> None:
    from failatlas.taxonomy import export_taxonomy
    from failatlas.taxonomy.facets import objects_of, readable_object

    store, taxonomy_id, _ = demo
    objects = objects_of(store, taxonomy_id)
    assert objects, "the demo's types name no object"
    export_taxonomy(store, taxonomy_id, tmp_path, formats=["csv", "md", "tex"])
    rows = {r["failure_type_id"]: r for r in csv.DictReader(io.StringIO((tmp_path / "prevalence.csv").read_text()))}
    markdown = (tmp_path / "prevalence.md").read_text()
    latex = (tmp_path / "prevalence.tex").read_text()
    assert "| Objects |" in markdown and "Objects:" in latex
    for type_id, listed in objects.items():
        for obj, _ in listed:
            assert readable_object(obj) in rows[type_id]["objects"], (type_id, obj, rows[type_id]["objects"])
    for type_id, row in rows.items():
        if type_id not in objects:
            assert row["objects"] == "", (type_id, row["objects"])


def test_the_null_agents_missing_design_says_the_design_is_missing(demo: tuple[Store, str, list[str]]) -> None:
    store, taxonomy_id, _ = demo
    rows = store.query(
        "SELECT DISTINCT i.kind, i.text, t.name FROM insight_sources s JOIN runs r ON r.id = s.run_id"
        " JOIN insights i ON i.id = s.insight_id JOIN insight_failure_types a ON a.insight_id = i.id"
        " AND a.taxonomy_id = ? JOIN failure_types t ON t.taxonomy_id = a.taxonomy_id AND t.id = a.failure_type_id"
        " WHERE r.agent = 'null' AND i.phase = 'design'", [taxonomy_id])
    assert rows, "null wrote a design?"
    for kind, text, name in rows:
        assert kind == "design_missing", (kind, text)
        assert "design" in name.lower() and "expected output" not in name.lower(), name
    names = {n for (n,) in store.query("SELECT name FROM failure_types WHERE taxonomy_id = ? AND phase = 'design'",
                                       [taxonomy_id])}
    assert "Expected output not produced" not in names, names


def test_no_failure_is_listed_twice_and_no_type_is_unnamed(demo: tuple[Store, str, list[str]]) -> None:
    """Built with EXP-Bench's seed, a kind the seed's types hold is never also a new type of its own (it joins the
    seed type); with or without the seed, no phase names two types alike and no type is 'Unnamed type'."""
    from failatlas.taxonomy import BuildParams
    from failatlas.taxonomy import run as build
    from failatlas.taxonomy.seeding import load_seed

    store, unseeded, clusterings = demo
    seeded = build(store, BuildParams(clustering_ids=clusterings, seed_taxonomy=load_seed("expbench")))
    assert any(t.origin == "seed" for t in seeded.types), "the seed explains nothing of the demo"
    for taxonomy_id in (unseeded, seeded.id):
        rows = store.query(
            "SELECT t.phase, t.id, t.name, t.origin, list(DISTINCT i.kind), sum(greatest(i.n_occurrences, 1))"
            " FROM failure_types t JOIN insight_failure_types a ON a.taxonomy_id = t.taxonomy_id"
            " AND a.failure_type_id = t.id JOIN insights i ON i.id = a.insight_id WHERE t.taxonomy_id = ?"
            " GROUP BY ALL", [taxonomy_id])
        for phase in {r[0] for r in rows}:
            mine = [r for r in rows if r[0] == phase]
            names = [r[2].lower() for r in mine]
            assert len(names) == len(set(names)), (taxonomy_id, phase, names)
            seed_kinds = {k for r in mine if r[3] == "seed" for k in r[4]} - {"unknown"}
            for _, _, name, origin, kinds, _ in mine:
                if origin != "seed":
                    assert not set(kinds) & seed_kinds, (phase, name, kinds, "also in a seed type")
        unnamed = sum(r[5] for r in rows if r[2].startswith("Unnamed type"))
        assert unnamed <= 0.10 * sum(r[5] for r in rows), (taxonomy_id, unnamed)


def test_no_definition_of_the_demo_has_leftovers_and_every_name_fits(demo: tuple[Store, str, list[str]]) -> None:
    """Issue 53: no placeholder or fragment in any definition of the demo, no unnamed type, and the names fit their
    members by taxonomy/name_fit.py's rule as they did before the change."""
    from failatlas.taxonomy.leftovers import leftovers
    from failatlas.taxonomy.name_fit import name_fit
    from failatlas.taxonomy.read import load_taxonomy

    store, taxonomy_id, _ = demo
    tax = load_taxonomy(store, taxonomy_id)
    found = [(t.id, x) for t in tax.types for x in leftovers(t.definition)]
    found += [(c.id, x) for c in tax.categories for x in leftovers(c.definition)]
    assert found == []
    fit = name_fit(store, tax)
    assert fit["unnamed_share"] == 0.0 and all(v["readable"] for v in fit["per_type"].values())
    # by the proxy 10 of the 12 fit, before this change and after it (docs/quality.md: 'Crash in agent code' and
    # the implementation phase's 'Expected output not produced' lose their central members to nearer names)
    assert fit["n_fit"] >= len(tax.types) - 2, {k: v for k, v in fit["per_type"].items() if not v["fits"]}
