"""Issue 31: with 30 labels a person adds by `failatlas label` on TRAIL GAIA, a `taxonomy build --seed trail`
rebuild agrees better with the held-back human labels. Real data, real MiniLM, the real CLI end to end: `ingest
file`, `embed run`, `cluster run --reassign-outliers`, `label add --labels FILE` (30 statements of one half of the
traces, spread over its categories), `taxonomy build --seed trail`; ARI over the other half's statements only
(trace-disjoint halves, as benchmarks/quality_trail.py makes them), both directions.

The margin was measured over several label choices (docs/quality.md, "30 labels from a person"), not tuned to
this one: it fails if the labels stop teaching the build. 30 labels drawn at random do not reliably help (measured
there too: mean -0.012); spread over the categories, as a person labelling what they see would, they do."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from failatlas.cluster.metrics import quality_metrics
from failatlas.store import open_store

pytestmark = pytest.mark.slow

N_LABELS = 30
# Least rise of the ARI, averaged over the two directions. Measured (docs/quality.md) over 4 other spread
# choices of 30 labels on the same pipeline: mean rise 0.024 to 0.055 (per direction -0.030 to +0.080, so one
# direction alone is not asserted: a single direction fell once).
MARGIN = 0.015


def half(trace_id: str) -> int:
    """Trace-disjoint halves: hex trace id parity (benchmarks/quality_trail.py's `trace_half`)."""
    try:
        return int(trace_id, 16) % 2
    except ValueError:
        return hashlib.sha256(trace_id.encode()).digest()[-1] % 2


def cli(db: Path, *args: str) -> str:
    result = subprocess.run([sys.executable, "-m", "failatlas", "--db", str(db), *args], capture_output=True,
                            text=True, env={**os.environ, "FAILATLAS_NO_PROGRESS": "1", "COLUMNS": "300"},
                            timeout=1200)
    assert result.returncode == 0, f"failatlas {' '.join(args)}: {result.stderr[-2000:]}"
    return result.stdout


def gaia_store(db: Path, shared_data: Path) -> Path:
    """TRAIL GAIA ingested, embedded and clustered (all phases, seed 0) by the real CLI into `db`."""
    cli(db, "ingest", "file", str(shared_data / "trail" / "trail_errors_gaia.jsonl"))
    cli(db, "embed", "run", "--device", "cpu")
    cli(db, "cluster", "run", "--all-phases", "--seed", "0", "--reassign-outliers", "--stability-runs", "0")
    return db


def spread_over_categories(statements: dict[str, str], n: int) -> list[tuple[str, str]]:
    """`n` (text, label) pairs, one label after the other (most frequent first) until `n` are taken: what a person
    labelling a few statements of each category they see would give. Deterministic: texts in hash order."""
    by_label: dict[str, list[str]] = {}
    for text in sorted(statements, key=lambda t: hashlib.sha256(t.encode()).hexdigest()):
        by_label.setdefault(statements[text], []).append(text)
    order = sorted(by_label, key=lambda lab: (-len(by_label[lab]), lab))
    out: list[tuple[str, str]] = []
    while len(out) < n:
        for lab in order:
            if by_label[lab] and len(out) < n:
                out.append((by_label[lab].pop(0), lab))
    return out


def test_thirty_user_labels_raise_the_rebuilds_ari_on_the_held_back_half(gaia_cli_store: Path, tmp_path: Path):
    db = Path(shutil.copy(gaia_cli_store, tmp_path / "gaia.duckdb"))
    store = open_store(db)
    rows = store.query("SELECT i.id, i.text, s.label, s.task_id FROM insights i JOIN insight_sources s"
                       " ON s.insight_id = i.id ORDER BY s.source_key")
    votes: dict[str, Counter] = {}
    text_of, half_of = {}, {}
    for iid, text, label, trace in rows:
        votes.setdefault(iid, Counter())[label] += 1
        text_of[iid] = text
        half_of.setdefault(iid, half(trace))
    truth = {i: min(v, key=lambda lab, v=v: (-v[lab], lab)) for i, v in votes.items()}

    def ari_on(taxonomy_id: str, side: int) -> float:
        types = dict(store.query("SELECT insight_id, failure_type_id FROM insight_failure_types"
                                 " WHERE taxonomy_id = ?", [taxonomy_id]))
        ids = sorted(i for i in truth if half_of[i] == side)
        codes = {t: k for k, t in enumerate(sorted(set(types.values())))}
        return quality_metrics([truth[i] for i in ids], [codes[types[i]] for i in ids])["ari"]

    def newest_taxonomy() -> str:
        return store.query("SELECT id FROM taxonomies ORDER BY created_at DESC LIMIT 1")[0][0]

    cli(db, "taxonomy", "build", "--seed", "trail")
    without = newest_taxonomy()
    gains = {}
    for train in (0, 1):
        test = 1 - train
        pool = {text_of[i]: truth[i] for i in truth if half_of[i] == train}
        chosen = spread_over_categories(pool, N_LABELS)
        labels = tmp_path / f"labels_half{train}.jsonl"
        labels.write_text("".join(json.dumps({"text": t, "label": lab}) + "\n" for t, lab in chosen))
        cli(db, "label", "add", "--labels", str(labels))
        assert f"{N_LABELS} labelled distinct statement(s)" in cli(db, "label", "list")
        built = cli(db, "taxonomy", "build", "--seed", "trail")
        assert "learned assignment other:" in built
        with_labels = newest_taxonomy()
        assert with_labels != without
        gains[train] = (ari_on(without, test), ari_on(with_labels, test))
        for lab in {lab for _, lab in chosen}:
            cli(db, "label", "remove", "--label", lab)
        assert store.query("SELECT count(*) FROM insight_labels")[0][0] == 0
    print(f"ARI (before, after) on the held-back half, by labelled half: {gains}")  # shown with pytest -s
    rise = sum(after - before for before, after in gains.values()) / len(gains)
    assert rise >= MARGIN, f"mean ARI rise {rise:.3f} < {MARGIN}; (before, after) by labelled half: {gains}"
