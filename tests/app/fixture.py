"""The explorer's fixture store: the taxonomy tests' hand-made mini-suite (two agents, runs with judges, a
validator and a monitor, insights in three phases, one clustering per phase) with a taxonomy built by the real
`taxonomy.run`, plus what a drill-down shows: a task in the catalog, the agent's steps and commands,
a diff, the validator's command and output, and papers on the insights' sources."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from failatlas.store import Store
from failatlas.taxonomy import BuildParams
from failatlas.taxonomy import run as build
from tests.taxonomy.mini import fill_mini_suite

DIFF = """diff --git a/train.py b/train.py
--- a/train.py
+++ b/train.py
@@ -1,3 +1,4 @@
 import numpy as np
-def train():
-    raise NotImplementedError
+def train(lr=1e-3):
+    return np.zeros(3)
"""
QUESTION = "Does dropout improve the validation accuracy of the small MLP?"
STDERR = "ModuleNotFoundError: No module named 'torchvision'"


def add_drilldown_rows(store: Store) -> None:
    now = dt.datetime(2026, 1, 1, 12, 0, 0)
    spec = {"id": "t1", "benchmark": "mini-suite", "kind": "masked_functions", "question": QUESTION,
            "method": "Train the MLP with and without dropout; compare accuracy.",
            "expected_conclusion": "Dropout improves accuracy by about 2 points.",
            "expected_results": [{"name": "accuracy", "value": 0.91, "rtol": 0.01, "atol": 0.0}]}
    with store.write() as conn:
        conn.execute(
            "INSERT INTO tasks (id, benchmark, kind, paper_id, title, question, gpus, n_warnings, spec, source,"
            " spec_hash, imported_at, updated_at) VALUES ('t1', 'mini-suite', 'masked_functions', 'paper-A',"
            " 'Dropout', ?, 0, 0, ?, 'test', 'h', ?, ?)", [QUESTION, json.dumps(spec), now, now])
        conn.execute("UPDATE runs SET outputs = ?, cost_usd = 0.0123, tokens = 4567 WHERE id = 'r1'",
                     [json.dumps({"diff": DIFF, "conclusion": "Dropout helps.", "changed_files": ["train.py"]})])
        conn.execute(
            "INSERT INTO run_steps (run_id, seq, kind, role, content, tool, arguments, ts) VALUES"
            " ('r1', 1, 'message', 'assistant', 'I will implement train().', NULL, NULL, ?),"
            " ('r1', 2, 'tool_call', 'assistant', NULL, 'bash', '{\"command\": \"python train.py\"}', ?),"
            " ('r1', 3, 'tool_result', 'tool', ?, 'bash', NULL, ?)", [now, now, STDERR, now])
        conn.execute(
            "INSERT INTO sandbox_commands (run_id, seq, purpose, command, started_at, duration_s, exit_code,"
            " timed_out, output_truncated, stdout_tail, stderr_tail) VALUES"
            " ('r1', 1, 'agent', 'python train.py', ?, 1.5, 1, false, false, '', ?)", [now, STDERR])
        conn.execute(
            "UPDATE validations SET command = 'cd /work && python train.py', exit_code = 0, duration_s = 2.5,"
            " stdout_tail = 'accuracy 0.912', stderr_tail = '', detail = 'every metric within tolerance'"
            " WHERE run_id = 'r1'")
        conn.execute("UPDATE judgements SET error_analysis = 'The conclusion overstates the gain.',"
                     " verdict = '{\"votes\": [0]}' WHERE run_id = 'r1' AND phase = 'conclusion'")
        conn.execute("INSERT INTO monitor_findings (run_id, seq, rule, severity, evidence, source)"
            " VALUES ('r1', 1, 'network', 'warn', 'pip download torch', 'rule')")
        conn.execute("UPDATE insight_sources SET paper_id = CASE WHEN task_id IN ('t1', 't2') THEN 'paper-A'"
                     " ELSE 'paper-B' END")


def add_kinds(store: Store) -> None:
    """Each insight's kind and object as ingest infers them for free text (ingest/infer.py)."""
    from failatlas.ingest.infer import infer_facets

    rows = store.query("SELECT id, phase, text FROM insights")
    with store.write() as conn:
        conn.executemany("UPDATE insights SET kind = ?, object = ? WHERE id = ?",
                         [[*infer_facets(phase, text), insight_id] for insight_id, phase, text in rows])


def fill_app_store(store: Store) -> str:
    """Fill an empty, migrated store; returns the taxonomy id."""
    fill_mini_suite(store)
    add_drilldown_rows(store)
    return build(store, BuildParams()).id


def with_kinds(path: Path) -> str:
    """Give the (copied) store's insights the kinds ingest infers from their text and build a taxonomy on them;
    returns its id. The fixture's planted types mix kinds (an import type holds a missing package and an API
    mismatch), so the facets split them: only the entry-point tests use it."""
    store = Store(path)
    add_kinds(store)
    return build(store, BuildParams()).id


TRAIL_CLUSTERING = "cl-app-trail"


def fill_trail_store(store: Store, trail_file: Path, n_clusters: int = 12) -> str:
    """TRAIL's GAIA annotations as a user would have them: imported by the real `ingest.run_file` (trail
    importer), then vectors (TF-IDF/SVD, quick and deterministic, in place of the embed stage), a k-means
    clustering written as the cluster stage writes one, and a taxonomy built by the real `taxonomy.run`. No run is
    stored: every insight's source is the annotation record. Returns the taxonomy id."""
    from sklearn.cluster import KMeans

    from failatlas.ingest import FileIngestParams, run_file
    from tests.taxonomy.fill import add_clustering, add_embeddings, lsa_vectors

    run_file(store, FileIngestParams(paths=[trail_file], format="trail"))
    rows = store.query("SELECT id, text FROM insights ORDER BY id")
    ids, texts = [r[0] for r in rows], [r[1] for r in rows]
    vectors = lsa_vectors(texts)
    add_embeddings(store, texts, vectors)
    phase = store.query("SELECT DISTINCT phase FROM insights")[0][0]
    labels = KMeans(n_clusters, random_state=0, n_init=3).fit_predict(vectors)
    add_clustering(store, TRAIL_CLUSTERING, phase, ids, labels)
    return build(store, BuildParams(clustering_ids=[TRAIL_CLUSTERING], merge_threshold=0.75,
                                    assign_threshold=0.5)).id


if __name__ == "__main__":
    import sys

    from failatlas.store import open_store

    target = Path(sys.argv[1] if len(sys.argv) > 1 else "app-demo.duckdb")
    if target.exists():
        raise SystemExit(f"{target} exists; pass a new path")
    if len(sys.argv) > 2:  # a TRAIL store: python -m tests.app.fixture trail.duckdb path/to/trail_errors_gaia.jsonl
        print(f"taxonomy {fill_trail_store(open_store(target), Path(sys.argv[2]))} in {target}")
    else:
        print(f"taxonomy {fill_app_store(open_store(target))} in {target}")
