"""A failure type's drill-down as files (issue 54, item 5): `failatlas taxonomy export --type T` writes each insight
of the type, the runs it was stated in with their phase verdicts, judges and evidence lines, as Markdown, CSV and
JSON; the app's download gives the same bytes; an unknown type is one line naming it."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys

import pytest

from failatlas.bench_core.scoring.metrics import run_scores
from failatlas.bench_core.scoring.report import phase_verdicts
from failatlas.core.errors import NotFoundError
from failatlas.taxonomy import BuildParams
from failatlas.taxonomy import run as build
from failatlas.taxonomy.drilldown import TypeDrilldown, drilldown_files, to_csv, to_markdown, type_drilldown


@pytest.fixture
def built(mini_store):  # noqa: ANN001, ANN201
    """The mini-suite's taxonomy, with one evidence record on run r1 that its implementation judge read."""
    taxonomy = build(mini_store, BuildParams())
    with mini_store.write() as conn:
        conn.execute("INSERT INTO evidence (run_id, id, kind, status, agent_code_ran, tree, blame, observed, notes)"
                     " VALUES ('r1', 'rerun', 'rerun', 'failed', true, 'abc', 'agent', ?, '[]'),"
                     " ('r1', 'trace', 'trace', 'ok', true, NULL, NULL, '{}', '[]')",
                     [json.dumps({"exit_code": 1, "command": "python train.py"})])
        conn.execute("UPDATE judgements SET evidence_ids = '[\"rerun\"]' WHERE run_id = 'r1' AND phase = "
                     "'implementation'")
    type_id = mini_store.query(
        "SELECT ift.failure_type_id FROM insight_failure_types ift JOIN insight_sources s USING (insight_id) "
        "WHERE ift.taxonomy_id = ? AND s.run_id = 'r1' AND ift.failure_type_id LIKE 'implementation/%' "
        "ORDER BY 1 LIMIT 1", [taxonomy.id])[0][0]
    return mini_store, taxonomy.id, type_id


def test_every_insight_of_the_type_with_its_runs_verdicts_and_evidence(built):
    store, taxonomy_id, type_id = built
    d = type_drilldown(store, type_id, taxonomy_id)
    expected = store.query(
        "SELECT i.id FROM insight_failure_types ift JOIN insights i ON i.id = ift.insight_id WHERE ift.taxonomy_id = ?"
        " AND ift.failure_type_id = ? ORDER BY i.n_occurrences DESC, ift.similarity DESC NULLS LAST, i.id",
        [taxonomy_id, type_id])
    assert [i.insight_id for i in d.insights] == [r[0] for r in expected] and len(d.insights) >= 2
    scores = {r["run_id"]: phase_verdicts(r) for r in run_scores(store).iter_rows(named=True)}
    for insight in d.insights:
        runs = {r[0] for r in store.query("SELECT s.run_id FROM insight_sources s JOIN runs r ON r.id = s.run_id "
                                          "WHERE s.insight_id = ?", [insight.insight_id])}
        assert {r.run_id for r in insight.runs} == runs and runs
        for r in insight.runs:
            assert r.verdicts == scores[r.run_id]
            judged = store.query("SELECT judge, status, score, passed FROM judgements WHERE run_id = ? AND phase = "
                                 "'implementation'", [r.run_id])
            assert r.judges == [f"{j} {score:.2f} {'passed' if ok else 'failed'}" if status == "ok" else f"{j} {status}"
                                for j, status, score, ok in judged]
            assert r.stated and all(s.source_field is not None or s.origin for s in r.stated)
    r1 = next(r for i in d.insights for r in i.runs if r.run_id == "r1")
    assert r1.evidence == [  # in the order built; '*': read by the implementation phase's verdict
        '* rerun (rerun): failed, agent\'s code ran, blame agent: {"command": "python train.py", "exit_code": 1}',
        "  trace (trace): ok, agent's code ran: {}"]
    text = to_markdown(d)
    assert all(i.text in text for i in d.insights) and "(read) rerun (rerun): failed" in text
    assert f"### Run `r1`: agent {r1.agent} · task {r1.task_id}" in text
    assert "- verdicts: M " in text
    rows = list(csv.DictReader(io.StringIO(to_csv(d))))
    assert len(rows) == sum(len(i.runs) + len(i.imported) for i in d.insights)
    row = next(r for r in rows if r["run_id"] == "r1")
    assert [row[p] for p in "MDIEC"] == [r1.verdicts[p] or "" for p in "MDIEC"]
    assert row["evidence"].splitlines()[0].startswith("* rerun (rerun)")


def test_runs_of_an_insight_in_report_order(built):
    store, taxonomy_id, type_id = built
    with store.write() as conn:  # the reference agents' names on two of the runs
        conn.execute("UPDATE runs SET agent = 'null' WHERE id = 'o1'")
        conn.execute("UPDATE insight_sources SET agent = 'null' WHERE run_id = 'o1'")
    for insight in type_drilldown(store, type_id, taxonomy_id).insights:
        agents = [r.agent for r in insight.runs]
        assert agents == sorted(agents, key=lambda a: (a != "null", a)), agents


def test_the_cli_writes_the_files_the_app_offers(built, tmp_path):
    store, taxonomy_id, type_id = built
    env = {**os.environ, "COLUMNS": "120"}
    out = tmp_path / "dd"
    proc = subprocess.run([sys.executable, "-m", "failatlas", "--db", str(store.path), "taxonomy", "export",
                           taxonomy_id, "--type", type_id, "--out", str(out)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    files = drilldown_files(store, type_id, taxonomy_id)
    stem = "drilldown-" + type_id.replace("/", "-")
    assert sorted(files) == sorted(f"{stem}.{x}" for x in ("md", "csv", "json"))
    for name, data in files.items():
        assert (out / name).read_bytes() == data
        assert f"wrote {out / name}" in proc.stdout
    assert TypeDrilldown.model_validate_json(files[f"{stem}.json"]) == type_drilldown(store, type_id, taxonomy_id)
    from failatlas.appdata.queries_taxonomy import drilldown_files as app_files

    assert app_files(store, taxonomy_id, type_id) == files


def test_an_unknown_type_or_format_is_one_line_naming_it(built, tmp_path):
    store, taxonomy_id, _ = built
    with pytest.raises(NotFoundError, match="no failure type 'implementation/T99'"):
        type_drilldown(store, "implementation/T99", taxonomy_id)
    for args, code, words in [(["--type", "implementation/T99"], 3, ["implementation/T99", "its types:"]),
                              (["--type", "implementation/T01", "--formats", "tex"], 2, ["tex", "md, csv, json"])]:
        proc = subprocess.run([sys.executable, "-m", "failatlas", "--db", str(store.path), "taxonomy", "export",
                               *args, "--out", str(tmp_path / "x")], capture_output=True, text=True, timeout=300)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == code and len(lines) == 1 and lines[0].startswith("error:"), proc.stderr
        assert all(w in lines[0] for w in words), lines[0]
    assert not (tmp_path / "x").exists()
