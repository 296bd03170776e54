"""Quick correctness checks of the benchmark helpers (no timings asserted)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import corpus  # noqa: E402
import gpu_embed  # noqa: E402
import store_ingest  # noqa: E402


def test_corpus_is_seeded_labelled_and_duplicated():
    texts, labels = corpus.generate(3000, seed=1, with_trail=False)
    again, _ = corpus.generate(3000, seed=1, with_trail=False)
    other, _ = corpus.generate(3000, seed=2, with_trail=False)
    assert texts == again and texts != other
    assert len(texts) == len(labels) == 3000
    assert set(labels) == set(corpus.TEMPLATES)
    dup = 1 - len(set(texts)) / len(texts)
    assert 0.3 < dup < 0.7
    by_text: dict[str, set[str]] = {}
    for t, lab in zip(texts, labels, strict=True):
        by_text.setdefault(t, set()).add(lab)
    assert all(len(v) == 1 for v in by_text.values())  # a repeated text keeps its kind


def test_corpus_includes_trail_when_present(shared_data):
    texts, labels = corpus.generate(4000, seed=0)
    trail = [lab for lab in labels if lab.startswith("trail:")]
    assert trail and len(trail) < 4000


def test_gpu_statements_are_short_and_seeded():
    xs = gpu_embed.statements(50, seed=3)
    assert xs == gpu_embed.statements(50, seed=3)
    assert all(6 <= len(s.split()) <= 30 for s in xs)


def test_gpu_benchmark_loads_the_fast_path_without_failatlas():
    """The GPU host has torch and sentence-transformers but not duckdb or pydantic: the fast path must load alone."""
    import subprocess

    code = (
        "import sys, gpu_embed; m = gpu_embed.load_fast_encode(); "
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in ('embed', 'failatlas', 'duckdb', 'pydantic')); "
        "print(m.FastEncoder.__name__, bad)"
    )
    bench = Path(gpu_embed.__file__).parent
    out = subprocess.run([sys.executable, "-c", code], cwd=bench, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "FastEncoder []"


def test_store_ingest_paths_store_the_same_rows(tmp_path):
    from failatlas.store import open_store

    records = store_ingest.make_records(40, per_run=20)
    table = store_ingest.arrow_table(records)
    store_ingest.bench_runner(tmp_path / "a.duckdb", records)
    store_ingest.bench_arrow(tmp_path / "b.duckdb", table)
    sql = "SELECT * FROM sandbox_commands ORDER BY run_id, seq"
    a = open_store(tmp_path / "a.duckdb").query(sql)
    b = open_store(tmp_path / "b.duckdb").query(sql)
    assert len(a) == 40 and a == b


@pytest.mark.parametrize("kind", ["missing_module", "shape_mismatch"])
def test_templates_fill_every_slot(kind):
    import random

    for template in corpus.TEMPLATES[kind]:
        assert "{" not in corpus.fill(template, random.Random(0))
