"""A failure type's drill-down as files (`failatlas taxonomy export --type T`, and the Drill-down page's download):
each insight of the type, every run it was stated in with the run's phase verdicts, the judges of the insight's
phase and the evidence records the harness built for the run (those the phase's verdicts read marked `*`), and
where it was stated (the source field and the evidence stored beside the statement); for imported data the source
record instead of a run. One model (`TypeDrilldown`) rendered as Markdown, CSV (one row per run or source of an
insight) and JSON, so the CLI and the app give the same bytes (`drilldown_files`)."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import BaseModel, Field

from failatlas.bench_core.agent_order import agent_key
from failatlas.bench_core.scoring.metrics import PHASES, run_scores
from failatlas.bench_core.scoring.report import evidence_line, phase_verdicts, run_evidence
from failatlas.core.errors import ConfigError, NotFoundError
from failatlas.core.store import Store
from failatlas.core.tables import code_span, csv_cell, one_line
from failatlas.taxonomy.assign import resolve_taxonomy
from failatlas.taxonomy.model import UNASSIGNED

DRILLDOWN_FORMATS = ("md", "csv", "json")


class Statement(BaseModel):
    """One place the insight was stated: the field of the run or file, how it was mined, the evidence beside it."""

    source_field: str | None = None
    extractor: str | None = None
    origin: str | None = None
    source_file: str | None = None
    source_line: int | None = None
    label: str | None = None
    detail: Any = None


class DrillRun(BaseModel):
    """A run an insight was stated in, with how it was judged and on what evidence."""

    run_id: str
    task_id: str | None = None
    agent: str | None = None
    model: str | None = None
    benchmark: str | None = None
    status: str | None = None
    outcome: str | None = None
    verdicts: dict[str, str | None] = Field(default_factory=dict)  # M D I E C: passed, failed or None
    judges: list[str] = Field(default_factory=list)  # of the insight's phase
    evidence: list[str] = Field(default_factory=list)  # '* id (kind): ...' where the phase's verdicts read it
    stated: list[Statement] = Field(default_factory=list)


class DrillInsight(BaseModel):
    insight_id: str
    phase: str
    text: str
    kind: str | None = None
    object: str | None = None
    n_occurrences: int
    similarity: float | None = None
    runs: list[DrillRun] = Field(default_factory=list)
    imported: list[Statement] = Field(default_factory=list)  # sources with no stored run (imported files)


class TypeDrilldown(BaseModel):
    taxonomy_id: str
    version: int
    failure_type_id: str
    name: str
    phase: str | None = None
    category: str | None = None
    definition: str = ""
    insights: list[DrillInsight] = Field(default_factory=list)


def _type_row(store: Store, taxonomy_id: str, failure_type_id: str) -> dict[str, Any]:
    if failure_type_id == UNASSIGNED:
        return {"name": "Unassigned insights", "phase": None, "category": None, "definition": ""}
    rows = store.query_dicts(
        "SELECT t.name, t.phase, c.name AS category, t.definition FROM failure_types t LEFT JOIN failure_categories c"
        " ON c.taxonomy_id = t.taxonomy_id AND c.id = t.category_id WHERE t.taxonomy_id = ? AND t.id = ?",
        [taxonomy_id, failure_type_id])
    if not rows:
        known = [r[0] for r in store.query("SELECT id FROM failure_types WHERE taxonomy_id = ? ORDER BY phase, id",
                                           [taxonomy_id])]
        listed = ", ".join(known[:8]) + (", ..." if len(known) > 8 else "")
        raise NotFoundError(f"no failure type '{failure_type_id}' in taxonomy {taxonomy_id}",
                            hint=f"its types: {listed or 'none'}; `failatlas taxonomy show` lists them with names")
    return rows[0]


def _in(ids: list[str]) -> str:
    return ", ".join("?" for _ in ids) or "NULL"


def _read_ids(store: Store, run_ids: list[str]) -> dict[tuple[str, str], set[str]]:
    """(run, phase) -> the evidence ids its verdicts of that phase read (judges, the validator, the monitor)."""
    out: dict[tuple[str, str], set[str]] = {}
    sql = (f"SELECT run_id, phase, evidence_ids FROM judgements WHERE run_id IN ({_in(run_ids)}) UNION ALL "
           f"SELECT run_id, 'execution', evidence_ids FROM validations WHERE run_id IN ({_in(run_ids)}) UNION ALL "
           f"SELECT run_id, 'monitor', evidence_ids FROM monitor_findings WHERE run_id IN ({_in(run_ids)})")
    for run_id, phase, ids in store.query(sql, [*run_ids, *run_ids, *run_ids]):
        out.setdefault((run_id, phase), set()).update(json.loads(ids or "[]"))
    return out


def _judge_lines(store: Store, run_ids: list[str]) -> dict[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], list[str]] = {}
    for j in store.query_dicts(f"SELECT run_id, phase, judge, status, score, passed, reason FROM judgements "
                               f"WHERE run_id IN ({_in(run_ids)}) ORDER BY run_id, phase, judge", run_ids):
        if j["status"] == "ok":
            score = "" if j["score"] is None else f" {j['score']:.2f}"
            line = f"{j['judge']}{score} {'passed' if j['passed'] else 'failed'}"
        else:
            line = f"{j['judge']} {j['status']}" + (f": {' '.join((j['reason'] or '').split())[:200]}"
                                                    if j["reason"] else "")
        out.setdefault((j["run_id"], j["phase"]), []).append(line)
    return out


def type_drilldown(store: Store, failure_type_id: str, taxonomy_id: str | None = None) -> TypeDrilldown:
    """The drill-down of one failure type of a taxonomy (default: the newest); `unassigned` gives the insights no
    type took. Insights most stated first; under each, its runs with the reference agents first, then by agent
    name, task and run. Raises NotFoundError naming the type (and listing the taxonomy's) when it has no such type."""
    taxonomy_id = resolve_taxonomy(store, taxonomy_id)
    version = store.query("SELECT version FROM taxonomies WHERE id = ?", [taxonomy_id])[0][0]
    head = _type_row(store, taxonomy_id, failure_type_id)
    insights = store.query_dicts("""
        SELECT i.id, i.phase, i.text, i.kind, i.object, i.n_occurrences, ift.similarity
        FROM insight_failure_types ift JOIN insights i ON i.id = ift.insight_id
        WHERE ift.taxonomy_id = ? AND ift.failure_type_id = ?
        ORDER BY i.n_occurrences DESC, ift.similarity DESC NULLS LAST, i.id""", [taxonomy_id, failure_type_id])
    ids = [i["id"] for i in insights]
    sources = store.query_dicts(f"""
        SELECT s.insight_id, s.run_id, coalesce(s.task_id, r.task_id) AS task_id, coalesce(s.agent, r.agent) AS agent,
               coalesce(s.model, r.model) AS model, coalesce(s.benchmark, r.benchmark) AS benchmark, s.origin,
               s.extractor, s.source_file, s.source_line, s.source_field, s.label, s.detail, r.id AS stored,
               r.status, v.outcome
        FROM insight_sources s LEFT JOIN runs r ON r.id = s.run_id LEFT JOIN validations v ON v.run_id = s.run_id
        WHERE s.insight_id IN ({_in(ids)}) ORDER BY s.source_key""", ids)
    run_ids = sorted({s["run_id"] for s in sources if s["stored"]})
    scores = run_scores(store).filter(pl.col("run_id").is_in(run_ids)) if run_ids else None
    verdicts = {r["run_id"]: phase_verdicts(r) for r in scores.iter_rows(named=True)} if scores is not None else {}
    judges = _judge_lines(store, run_ids)
    read = _read_ids(store, run_ids)
    evidence = {rid: run_evidence(store, rid) for rid in run_ids}
    out = []
    for i in insights:
        runs: dict[str, DrillRun] = {}
        imported: list[Statement] = []
        phase = i["phase"]  # the phase its verdicts are stored under (judgements.phase)
        for s in (s for s in sources if s["insight_id"] == i["id"]):
            detail = json.loads(s["detail"]) if isinstance(s["detail"], str) else s["detail"]
            statement = Statement(source_field=s["source_field"], extractor=s["extractor"], origin=s["origin"],
                                  source_file=s["source_file"], source_line=s["source_line"], label=s["label"],
                                  detail=detail)
            if not s["stored"]:
                imported.append(statement)
                continue
            rid = s["run_id"]
            if rid not in runs:
                marked = read.get((rid, phase), set())
                runs[rid] = DrillRun(
                    run_id=rid, task_id=s["task_id"], agent=s["agent"], model=s["model"] or None,
                    benchmark=s["benchmark"], status=s["status"], outcome=s["outcome"],
                    verdicts=verdicts.get(rid, dict.fromkeys(PHASES)), judges=judges.get((rid, phase), []),
                    evidence=[("* " if e["id"] in marked else "  ") + evidence_line(e, most=300)
                              for e in evidence[rid]])
            runs[rid].stated.append(statement)
        ordered = sorted(runs.values(), key=lambda r: (agent_key(r.agent), r.task_id or "", r.run_id))
        out.append(DrillInsight(insight_id=i["id"], phase=i["phase"], text=i["text"], kind=i["kind"],
                                object=i["object"], n_occurrences=i["n_occurrences"], similarity=i["similarity"],
                                runs=ordered, imported=imported))
    return TypeDrilldown(taxonomy_id=taxonomy_id, version=version, failure_type_id=failure_type_id,
                         name=head["name"], phase=head["phase"], category=head["category"],
                         definition=head["definition"] or "", insights=out)


def _where(s: Statement) -> str:
    place = s.source_field or "?"
    if s.source_file:
        place += f" in {s.source_file}" + (f":{s.source_line}" if s.source_line else "")
    return place + (f" ({s.extractor})" if s.extractor else "") + (f", label {s.label}" if s.label else "")


def _verdict_text(verdicts: dict[str, str | None]) -> str:
    return ", ".join(f"{p} {verdicts.get(p) or 'not scored'}" for p in PHASES)


def _md(text: object) -> str:
    """Text inside a line of the Markdown: on one line, no control character, HTML, link or cell break."""
    return one_line(text, markdown="cell")


def _md_line(text: object) -> str:
    """Text that starts a line, a heading or a list item: as `_md`, and unable to open a block there."""
    return one_line(text, markdown="line")


def to_markdown(d: TypeDrilldown) -> str:
    """The drill-down as a Markdown document a reader can follow from the type down to each run's evidence. Every
    text from the store (names, insights, agents, evidence: imported or an agent's) is on one line and inert
    (`one_line(..., markdown=...)`); ids and JSON stand in code spans (`code_span`)."""
    runs = {r.run_id for i in d.insights for r in i.runs}
    lines = [f"# {_md_line(d.name)} ({code_span(d.failure_type_id)})", "",
             f"FailAtlas taxonomy v{d.version} ({code_span(d.taxonomy_id)})"
             + (f", phase {_md(d.phase)}" if d.phase else "")
             + (f", category {_md(d.category)}" if d.category else "") + f": {len(d.insights)} distinct insight(s), "
             f"{sum(i.n_occurrences for i in d.insights)} occurrence(s), in {len(runs)} run(s).", ""]
    if d.definition:
        lines += [f"Definition: {_md(d.definition)}", ""]
    lines += ["Under each run: its phase verdicts (M D I E C), the judges of the insight's phase, where the insight "
              "was stated, and the evidence records the harness built for the run (`*`: read by the verdicts of "
              "the insight's phase).", ""]
    for k, i in enumerate(d.insights, 1):
        facets = ", ".join(x for x in (f"kind {_md(i.kind)}" if i.kind else "",
                                       f"object {code_span(i.object)}" if i.object else "") if x)
        lines += [f"## {k}. {_md_line(i.text)}", "",
                  f"{code_span(i.insight_id)} · phase {_md(i.phase)}" + (f" · {facets}" if facets else "")
                  + f" · stated {i.n_occurrences}×", ""]
        for r in i.runs:
            model = f" · model {_md(r.model)}" if r.model else ""
            lines += [f"### Run {code_span(r.run_id)}: agent {_md(r.agent)} · task {_md(r.task_id)}{model} · status "
                      f"{_md(r.status)}" + (f" · validator {_md(r.outcome)}" if r.outcome else ""), "",
                      f"- verdicts: {_md(_verdict_text(r.verdicts))}",
                      f"- judges ({_md(i.phase)}): " + ("; ".join(_md(j) for j in r.judges) or "none")]
            for s in r.stated:
                lines.append(f"- stated in {_md(_where(s))}")
                if s.detail:
                    lines.append("  - evidence beside it: "
                                 + code_span(json.dumps(s.detail, sort_keys=True, default=str)))
            lines.append("- evidence records:" + ("" if r.evidence else " none stored"))
            lines += [f"  - {'(read) ' if e.startswith('*') else ''}{_md_line(e[2:])}" for e in r.evidence]
            lines.append("")
        for s in i.imported:
            lines += [f"- imported: {_md(_where(s))}"]
            if s.detail:
                lines.append(f"  - detail: {code_span(json.dumps(s.detail, sort_keys=True, default=str))}")
        if i.imported:
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


CSV_COLUMNS = ["failure_type_id", "failure_type", "insight_id", "phase", "kind", "object", "insight", "n_occurrences",
               "run_id", "task_id", "agent", "model", "benchmark", "run_status", "validator_outcome", *PHASES,
               "judges", "stated_in", "detail", "evidence"]


def to_csv(d: TypeDrilldown) -> str:
    """One row per run of each insight (and per imported source): verdicts as columns, judges and evidence lines
    joined by newlines. Text cells are safe to open in a spreadsheet (`csv_cell`: no formula, no control
    character but newline and tab)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)

    def write(row: list[Any]) -> None:
        writer.writerow([csv_cell(v) for v in row])

    for i in d.insights:
        head = [d.failure_type_id, d.name, i.insight_id, i.phase, i.kind or "", i.object or "", i.text,
                i.n_occurrences]
        for r in i.runs:
            details = [json.dumps(s.detail, sort_keys=True, default=str) for s in r.stated if s.detail]
            write([*head, r.run_id, r.task_id or "", r.agent or "", r.model or "", r.benchmark or "",
                   r.status or "", r.outcome or "", *(r.verdicts.get(p) or "" for p in PHASES),
                   "\n".join(r.judges), "\n".join(_where(s) for s in r.stated), "\n".join(details),
                   "\n".join(r.evidence)])
        for s in i.imported:
            write([*head, "", "", "", "", "", "", "", *([""] * len(PHASES)), "", _where(s),
                   json.dumps(s.detail, sort_keys=True, default=str) if s.detail else "", ""])
    return buf.getvalue()


def drilldown_files(store: Store, failure_type_id: str, taxonomy_id: str | None = None,
                    formats: tuple[str, ...] = DRILLDOWN_FORMATS) -> dict[str, bytes]:
    """The drill-down's files by name (`drilldown-<type>.md`, `.csv`, `.json`), as the CLI writes them and the app
    offers them. Raises ConfigError for an unknown format, NotFoundError for an unknown type or taxonomy."""
    unknown = [f for f in formats if f not in DRILLDOWN_FORMATS]
    if unknown:
        raise ConfigError(f"unknown drill-down format(s): {', '.join(unknown)}",
                          hint=f"a type's drill-down is written as {', '.join(DRILLDOWN_FORMATS)}")
    d = type_drilldown(store, failure_type_id, taxonomy_id)
    stem = "drilldown-" + re.sub(r"[^A-Za-z0-9]+", "-", failure_type_id).strip("-")
    render = {"md": to_markdown, "csv": to_csv, "json": lambda x: x.model_dump_json(indent=1) + "\n"}
    return {f"{stem}.{fmt}": render[fmt](d).encode() for fmt in formats}


def export_drilldown(store: Store, failure_type_id: str, taxonomy_id: str | None, out_dir: str | Path,
                     formats: tuple[str, ...] = DRILLDOWN_FORMATS) -> list[Path]:
    """Write `drilldown_files` into `out_dir` (made when missing); returns the paths written. Raises as
    `drilldown_files`, before anything is written."""
    files = drilldown_files(store, failure_type_id, taxonomy_id, formats)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (out / name).write_bytes(data)
    return [out / name for name in files]
