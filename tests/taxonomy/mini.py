"""A hand-made mini-suite: two agents, four tasks, runs with judges and a validator, and failure insights in
three phases whose prevalence is worked out by hand below (the tests assert these numbers)."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np

from failatlas.store import Store
from tests.taxonomy.fill import add_clustering, add_embeddings, add_insights, insight_id

MINI_MODEL = "mini-embedder (test)"
REACT = ("react-agent", "gpt-4o-mini")
OPENHANDS = ("openhands", "qwen2.5-coder-32b")

# phase -> planted type -> [(text, run_id)]; runs r* are react-agent's, o* openhands';
# run rN / oN works on task tN.
INSIGHTS: dict[str, dict[str, list[tuple[str, str]]]] = {
    "implementation": {
        "import": [
            ("ModuleNotFoundError: No module named 'torchvision' when running train.py", "r1"),
            ("The script failed to import transformers because the package was not installed", "r2"),
            ("ImportError: cannot import name 'load_metric' from datasets; the module API changed", "r3"),
            ("Missing module scipy: the evaluation script crashed at import time", "o1"),
        ],
        "shape": [
            ("RuntimeError: shape mismatch, tensor of size 128 cannot be broadcast to 64 in the loss", "r1"),
            ("The model's output tensor had the wrong shape for the classifier head (768 vs 512)", "o2"),
            (
                "Matrix multiplication failed: mat1 and mat2 shapes cannot be multiplied (32x100 and 50x10)",
                "o3",
            ),
        ],
        "lr": [("The learning rate was set to 10 instead of 1e-3, so training diverged to NaN", "o4")],
    },
    "design": {
        "baseline": [
            ("The design omits the baseline model the paper compares against", "r1"),
            ("No baseline comparison was planned, so the improvement cannot be measured", "r2"),
            ("The experiment plan leaves out the random-guess baseline required by the task", "o1"),
        ],
        "ablation": [
            ("The ablation changes two variables at once, so the effect of dropout is confounded", "o2"),
            ("Control variables were not held fixed across the ablation runs", "o3"),
        ],
    },
    "conclusion": {
        "claims": [
            ("The conclusion claims a 5% gain that the reported results do not show", "r1"),
            ("The agent concluded the hypothesis holds although the metric got worse", "r3"),
            ("The stated conclusion is not supported by the logged accuracy numbers", "o1"),
        ],
    },
}
OUTLIER = ("implementation", "The agent printed its favourite colour instead of running anything", "r4")

# Funnel checks per run: monitor finding 'fail'?, then C, D, I judge passed?, then validator outcome.
FUNNEL = {
    "r1": (False, False, True, True, "passed"),
    "r2": (False, True, False, True, "passed"),
    "r3": (True, True, True, True, "passed"),
    "r4": (False, True, True, True, "passed"),
    "o1": (False, True, True, True, "wrong_value"),
    "o2": (False, True, True, False, "runtime_error"),
    "o3": (False, None, True, True, "passed"),  # None: the conclusion judge failed to run
    "o4": (False, True, True, True, "passed"),
}


def agent_of(run_id: str) -> tuple[str, str]:
    return REACT if run_id.startswith("r") else OPENHANDS


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def fill_mini_suite(
    store: Store, *, clustering_ids: tuple[str, ...] = ("cl-mini-design", "cl-mini-impl", "cl-mini-concl")
) -> dict[str, np.ndarray]:
    """Runs, scores, insights, embeddings and one clustering per phase. Returns each type's direction."""
    rng = np.random.default_rng(0)
    now = dt.datetime(2026, 1, 1, 12, 0, 0)
    run_rows = [(run_id, f"t{run_id[1]}", *agent_of(run_id), "completed") for run_id in FUNNEL]
    run_rows.append(("r5", "t1", *REACT, "infra_error"))
    with store.write() as conn:
        for run_id, task, agent, model, status in run_rows:
            conn.execute(
                "INSERT INTO runs (id, task_id, agent, agent_params, model, attempt, benchmark, status,"
                " sandbox,"
                " started_at, finished_at, duration_s, outputs) VALUES (?, ?, ?, '{}', ?, 1, 'mini-suite', ?,"
                " 'docker', ?, ?, 60, '{}')",
                [run_id, task, agent, model, status, now, now],
            )
        for run_id, (monitor_fail, c, d, i, outcome) in FUNNEL.items():
            if monitor_fail:
                conn.execute(
                    "INSERT INTO monitor_findings (run_id, seq, rule, severity, evidence, source)"
                    " VALUES (?, 1, 'git_history', 'fail', 'git log', 'rule')",
                    [run_id],
                )
            for phase, passed in (("conclusion", c), ("design", d), ("implementation", i)):
                status = "judge_failed" if passed is None else "ok"
                conn.execute(
                    "INSERT INTO judgements (run_id, phase, judge, status, score, passed)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    [
                        run_id,
                        phase,
                        f"{phase}-llm",
                        status,
                        None if passed is None else float(passed),
                        passed,
                    ],
                )
            conn.execute("INSERT INTO validations (run_id, outcome) VALUES (?, ?)", [run_id, outcome])

    rows, vectors, directions = [], [], {}
    for phase, types in INSIGHTS.items():
        for name, items in types.items():
            directions[name] = _unit(rng.normal(size=32))
            for text, run_id in items:
                agent, model = agent_of(run_id)
                rows.append(
                    {
                        "phase": phase,
                        "text": text,
                        "run_id": run_id,
                        "task_id": f"t{run_id[1]}",
                        "agent": agent,
                        "model": model,
                        "benchmark": "mini-suite",
                        "origin": "run",
                    }
                )
                vectors.append(_unit(directions[name] + 0.15 * rng.normal(size=32)))
    phase, text, run_id = OUTLIER
    agent, model = agent_of(run_id)
    rows.append(
        {
            "phase": phase,
            "text": text,
            "run_id": run_id,
            "task_id": "t4",
            "agent": agent,
            "model": model,
            "benchmark": "mini-suite",
            "origin": "run",
        }
    )
    vectors.append(_unit(rng.normal(size=32)))
    add_insights(store, rows)
    add_embeddings(store, [r["text"] for r in rows], np.stack(vectors), model=MINI_MODEL)
    for cid, phase in zip(clustering_ids, ("design", "implementation", "conclusion"), strict=True):
        names = list(INSIGHTS[phase])
        ids = [insight_id(phase, t) for n in names for t, _ in INSIGHTS[phase][n]]
        labels = [k for k, n in enumerate(names) for _ in INSIGHTS[phase][n]]
        if phase == OUTLIER[0]:
            ids.append(insight_id(phase, OUTLIER[1]))
            labels.append(-1)
        add_clustering(
            store, cid, phase, ids, labels, model=MINI_MODEL, params=json.loads('{"method": "hand"}')
        )
    return directions
