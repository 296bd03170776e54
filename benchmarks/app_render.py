"""How fast the explorer's Taxonomy page renders on a synthetic store of 100k insights.

Builds the store with SQL (runs, insights, sources, one clustering per phase with 2-D coordinates, a taxonomy of
20 failure types per phase), renders the page once through Streamlit's AppTest (cold: every query runs) and
then again (warm: the cache answers), and prints both times. The target is under 2 s warm.

    python benchmarks/app_render.py [--insights 100000] [--keep PATH]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

PHASES = ("design", "implementation", "execution", "conclusion", "monitor")
TYPES_PER_PHASE = 20
CATEGORIES_PER_PHASE = 4
AGENTS = ("react-agent", "openhands", "aider", "codeact")


def build(path: Path, n_insights: int, n_runs: int, seed: int = 0) -> str:
    """Fill a fresh store; returns the taxonomy id."""
    from failatlas.store import open_store
    from failatlas.taxonomy import BuildParams

    store = open_store(path)
    phases = "['" + "', '".join(PHASES) + "']"
    agents = "['" + "', '".join(AGENTS) + "']"
    with store.write() as conn:
        conn.execute(f"SELECT setseed({seed / 10})")
        conn.execute(f"""
            INSERT INTO runs (id, task_id, agent, agent_params, model, attempt, benchmark, status, sandbox,
                              started_at, finished_at, duration_s, outputs, cost_usd, tokens)
            SELECT 'run-' || r, 'task-' || (r % 500), {agents}[1 + r % 4], '{{}}', 'model-' || (r % 2), 1,
                   'synthetic', 'completed', 'docker', now(), now(), 30 + random() * 600, '{{}}',
                   random() * 0.5, (random() * 50000)::INT
            FROM range({n_runs}) t(r)""")
        conn.execute("""
            INSERT INTO judgements (run_id, phase, judge, status, score, passed)
            SELECT id, p, p || '-llm', 'ok', random(), random() < 0.6
            FROM runs, unnest(['design', 'implementation', 'conclusion']) t(p)""")
        conn.execute("""
            INSERT INTO validations (run_id, outcome)
            SELECT id, ['passed', 'wrong_value', 'runtime_error', 'env_setup'][1 + (hash(id) % 4)::INT] FROM runs""")
        conn.execute("""
            INSERT INTO monitor_findings SELECT id, 1, 'git_history', 'fail', 'git log', 'rule'
            FROM runs WHERE hash(id) % 10 = 0""")
        conn.execute(f"""
            INSERT INTO insights (id, phase, text, n_occurrences)
            SELECT substr(md5(i::VARCHAR), 1, 16), {phases}[1 + i % 5],
                   'synthetic failure ' || i || ': the agent ' ||
                   ['forgot the baseline', 'imported a missing module', 'used the wrong learning rate',
                    'overstated the gain', 'read the ground truth', 'mis-shaped a tensor'][1 + (i * 7) % 6] ||
                   ' in step ' || (i % 13), 1 + (i % 3 = 0)::INT
            FROM range({n_insights}) t(i)""")
        conn.execute(f"""
            INSERT INTO insight_sources (source_key, insight_id, origin, extractor, source_field, run_id, task_id,
                                         agent, model, benchmark, paper_id)
            SELECT 'run:' || i.id || ':' || k, i.id, 'run', 'deterministic', 'judgements.error_analysis',
                   'run-' || r, 'task-' || (r % 500), {agents}[1 + r % 4], 'model-' || (r % 2), 'synthetic',
                   'paper-' || (r % 500 % 40)
            FROM insights i, range(2) s(k),
                 LATERAL (SELECT (hash(i.id || k) % {n_runs})::INT AS r)
            WHERE k < i.n_occurrences""")
        conn.execute("INSERT INTO taxonomies (id, version, clustering_ids, embed_model, normalisation, params,"
                     " code_version) VALUES ('tx-bench', 1, ?, 'bench', 'none', ?, 'bench')",
                     [str([f"cl-{p}" for p in PHASES]).replace("'", '"'), BuildParams().model_dump_json()])
        conn.execute(f"""
            INSERT INTO failure_categories (taxonomy_id, id, phase, name, definition, keywords, naming_method)
            SELECT 'tx-bench', p || '/C' || c, p, p || ' category ' || c, 'synthetic', '["a"]', 'offline'
            FROM unnest({phases}) t(p), range(1, {CATEGORIES_PER_PHASE + 1}) u(c)""")
        conn.execute(f"""
            INSERT INTO failure_types (taxonomy_id, id, phase, category_id, name, definition, inclusion_criteria,
                                       examples, keywords, centroid, n_insights, merged_from, naming_method)
            SELECT 'tx-bench', p || '/T' || lpad(k::VARCHAR, 2, '0'), p, p || '/C' || (1 + k % {CATEGORIES_PER_PHASE}),
                   p || ' type ' || k, 'synthetic type', '["cosine >= 0.5"]', '[]', '["module", "import"]',
                   [1.0, 0.0]::FLOAT[], 0, '[]', 'offline'
            FROM unnest({phases}) t(p), range(1, {TYPES_PER_PHASE + 1}) u(k)""")
        # Skewed type sizes, as real taxonomies have: type k gets about 1/k of a phase's insights; 3% unassigned.
        conn.execute(f"""
            INSERT INTO insight_failure_types (taxonomy_id, insight_id, failure_type_id, similarity, method)
            SELECT 'tx-bench', id,
                   CASE WHEN u < 0.03 THEN 'unassigned'
                        ELSE phase || '/T' || lpad(least({TYPES_PER_PHASE}, 1 + floor(exp(u * ln({TYPES_PER_PHASE}
                             + 1)) - 1)::INT)::VARCHAR, 2, '0') END,
                   0.5 + u / 2, CASE WHEN u < 0.03 THEN 'unassigned' ELSE 'cluster' END
            FROM (SELECT id, phase, (hash(id) % 100000) / 100000.0 AS u FROM insights)""")
        conn.execute(f"""
            INSERT INTO clusterings (id, phase, embed_model, params, n_insights, n_clusters, outlier_rate, code_version)
            SELECT 'cl-' || p, p, 'bench', '{{}}', 0, {TYPES_PER_PHASE}, 0.03, 'bench' FROM unnest({phases}) t(p)""")
        conn.execute("""
            INSERT INTO cluster_assignments (clustering_id, insight_id, cluster, x, y)
            SELECT 'cl-' || i.phase, i.id, coalesce(try_cast(split_part(a.failure_type_id, '/T', 2) AS INT), -1),
                   random() * 10, random() * 10
            FROM insights i JOIN insight_failure_types a ON a.insight_id = i.id""")
    return "tx-bench"


def render_times(path: Path, page: str = "taxonomy", repeats: int = 3) -> tuple[float, list[float]]:
    from streamlit.testing.v1 import AppTest

    os.environ["FAILATLAS_DB"] = str(path)
    app = str(Path(__file__).resolve().parents[1] / "app.py")

    def once() -> float:
        at = AppTest.from_file(app, default_timeout=600)
        at.query_params["page"] = page
        started = time.perf_counter()
        at.run()
        elapsed = time.perf_counter() - started
        if at.exception:
            raise RuntimeError(at.exception[0].value)
        shown = len(at.main.dataframe) + len(at.get("vega_lite_chart")) + len(at.get("arrow_vega_lite_chart"))
        if at.main.info or not shown:
            raise RuntimeError(f"the {page} page showed no data: {[i.value for i in at.main.info]}")
        return elapsed

    cold = once()
    return cold, [once() for _ in range(repeats)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--insights", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=2_000)
    parser.add_argument("--keep", type=Path, help="build the store here and keep it (default: a temporary file)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or Path(tmp) / "app-bench.duckdb"
        started = time.perf_counter()
        build(path, args.insights, args.runs)
        print(f"built {args.insights:,} insights, {args.runs:,} runs in {time.perf_counter() - started:.1f} s")
        for page in ("taxonomy", "drill", "map", "compare", "overview"):
            cold, warm = render_times(path, page)
            print(f"{page:>9} page: cold {cold:.2f} s, warm {min(warm):.3f} s (best of {len(warm)}; "
                  f"all {', '.join(f'{w:.3f}' for w in warm)})")


if __name__ == "__main__":
    main()
