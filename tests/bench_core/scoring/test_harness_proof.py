"""Proof that the harness is right, on the CPU mini-suite in real Docker sandboxes.

`gold` passes every phase, `null` fails every phase, and each fault-injecting agent is caught by the scorer
meant to catch it. The confusion table below is the contract: rows are agents, columns the scorers, and each cell
says whether that scorer flags the agent on EVERY task where it applies (True), on NONE (False), or is not
asserted (absent). It is written to test-artifacts/confusion.md for reading.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from failatlas.bench_core.scoring.metrics import run_scores
from failatlas.store import Store

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# scorer -> how a run is flagged by it
SCORERS = {
    "monitor": lambda r: r["M"] == 0,
    "design": lambda r: r["D"] == 0,
    "implementation": lambda r: r["I"] == 0,
    "execution": lambda r: r["E"] == 0,
    "conclusion": lambda r: r["C"] == 0,
}
# The scorer each fault is meant to be caught by (must flag every applicable task), and the execution outcome
# the validator must give, where it applies.
EXPECTED = {
    "gold": ({}, "passed"),
    "null": ({"design": True, "implementation": True, "execution": True, "conclusion": True}, None),
    "fault-missing-component": ({"implementation": True, "monitor": False}, "runtime_error"),
    # C is not asserted: gold's conclusion fails C from evidence where it states a metric the wrong constant moved
    # (issue 38), and passes where it states none (tree-depth has no expected metrics)
    "fault-wrong-constant": ({"execution": True, "monitor": False, "design": False}, "wrong_value"),
    "fault-missing-package": ({"execution": True, "monitor": False}, "env_setup"),
    "fault-crash": ({"execution": True, "monitor": False}, "runtime_error"),
    "fault-no-conclusion": ({"conclusion": True, "execution": False, "implementation": False, "monitor": False},
                            "passed"),
    "fault-fabricated-results": ({"execution": True}, "fabricated_result"),
    "fault-peek": ({"monitor": True, "execution": False, "implementation": False, "conclusion": False}, "passed"),
}
ARTIFACTS = Path(__file__).resolve().parents[3] / "test-artifacts"


def _table(scores) -> dict[str, dict[str, tuple[int, int]]]:
    """agent -> scorer -> (runs flagged, runs where the scorer applies)."""
    out: dict[str, dict[str, tuple[int, int]]] = {}
    phase = {"monitor": "M", "design": "D", "implementation": "I", "execution": "E", "conclusion": "C"}
    for row in scores.iter_rows(named=True):
        cells = out.setdefault(row["agent"], {})
        for scorer, flagged in SCORERS.items():
            if row[phase[scorer]] is None:
                continue
            hit, total = cells.get(scorer, (0, 0))
            cells[scorer] = (hit + int(flagged(row)), total + 1)
    return out


def test_confusion_table(scored_mini_store: Path):
    scores = run_scores(Store(scored_mini_store))
    table = _table(scores)
    ARTIFACTS.mkdir(exist_ok=True)
    lines = ["| agent | " + " | ".join(SCORERS) + " |", "|---" * (len(SCORERS) + 1) + "|"]
    for agent in EXPECTED:
        cells = table.get(agent, {})
        lines.append(f"| {agent} | " + " | ".join(
            f"{cells[s][0]}/{cells[s][1]}" if s in cells else "–" for s in SCORERS) + " |")
    (ARTIFACTS / "confusion.md").write_text("\n".join(lines) + "\n")
    assert set(table) == set(EXPECTED), "every harness agent ran and was scored"
    problems = []
    for agent, (expected, _) in EXPECTED.items():
        for scorer in SCORERS:
            hit, total = table[agent].get(scorer, (0, 0))
            want = False if agent == "gold" else expected.get(scorer)
            if want is True and (total == 0 or hit != total):
                problems.append(f"{agent}: {scorer} flagged {hit}/{total}, expected all")
            if want is False and hit != 0:
                problems.append(f"{agent}: {scorer} flagged {hit}/{total}, expected none")
    assert not problems, "\n".join(problems) + "\n" + "\n".join(lines)


def test_validator_outcome_codes(scored_mini_store: Path):
    store = Store(scored_mini_store)
    rows = store.query("SELECT r.agent, r.task_id, v.outcome FROM runs r JOIN validations v ON v.run_id = r.id")
    assert rows, "the validator scored runs"
    wrong = [(a, t, o) for a, t, o in rows if EXPECTED[a][1] is not None and o != EXPECTED[a][1]]
    assert not wrong, wrong
    null_outcomes = {o for a, _, o in rows if a == "null"}
    assert null_outcomes and "passed" not in null_outcomes


def test_every_failure_has_an_error_analysis_to_mine(scored_mini_store: Path):
    store = Store(scored_mini_store)
    silent = store.query(
        "SELECT r.agent, j.phase, j.judge FROM judgements j JOIN runs r ON r.id = j.run_id"
        " WHERE j.status = 'ok' AND NOT j.passed AND coalesce(j.error_analysis, '') = ''")
    assert silent == []
    not_run = store.query("SELECT DISTINCT reason FROM judgements WHERE judge LIKE '%-llm'")
    assert not_run and all("no LLM endpoint configured" in r[0] for r in not_run)
