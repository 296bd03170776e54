"""`failatlas bench list` and `bench show`: the stored runs, and one run's verdicts, evidence and commands (thin:
read, print)."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from failatlas.bench_core.runs import get_run, list_runs
from failatlas.bench_core.scoring.metrics import PHASES
from failatlas.core.cli import console, store
from failatlas.core.errors import ConfigError


def list_(
    agent: Annotated[str | None, typer.Option(help="Only this agent.")] = None,
    task: Annotated[str | None, typer.Option(help="Only this task id.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for machines instead of a table: each run "
                                          "with its outcome and phases (passed, failed or null).")] = False,
) -> None:
    """List stored runs (full run ids: `bench show RUN` takes them, or a unique prefix) with their outcome and
    phase verdicts (MDIEC: ✓ passed, ✗ failed, – not scored); on a narrow terminal, one table per task."""
    s = store(create=False)
    rows = list_runs(s, agent=agent, task_id=task)
    verdicts = _run_verdicts(s)
    if as_json:
        for r in rows:
            outcome, phases = verdicts.get(r["id"], (None, None))
            r["scored"], r["outcome"] = phases is not None, outcome
            r["phases"] = phases or dict.fromkeys(PHASES)
        console.print_json(json.dumps(rows, default=str))
        return
    marks = {run_id: (outcome or "-", "".join(_MARK[v] for v in phases.values()))
             for run_id, (outcome, phases) in verdicts.items()}
    for table in runs_tables(rows, marks, console.width):
        console.print(table)
    console.print(f"{len(rows)} run(s)")


_MARK = {"passed": "✓", "failed": "✗", None: "–"}


def _run_verdicts(s) -> dict[str, tuple[str | None, dict[str, str | None]]]:  # noqa: ANN001
    """Per scored run: its outcome and its phase verdicts M D I E C (`passed`, `failed`, None: not scored)."""
    from failatlas.bench_core.scoring.metrics import run_scores
    from failatlas.bench_core.scoring.report import phase_verdicts

    return {r["run_id"]: (r["outcome"], phase_verdicts(r)) for r in run_scores(s).iter_rows(named=True)}


def runs_tables(rows: list[dict], marks: dict[str, tuple[str, str]], width: int) -> list[Table]:
    """`bench list`'s table: one row per run with its outcome (its status where it is not scored) and phase
    marks; nothing is ever cut. The model column shows only where a run has one, the fault only where the agent's
    name does not say it. When that table is wider than `width`, one table per task, titled with the task id,
    takes the task column's place; where even that is too wide (long model names), `split_columns` splits it
    into parts that each repeat the run id, so no column is lost."""
    from failatlas.core.cli import compact_table, fit_columns, fits, split_columns

    with_model = any(r["model"] for r in rows)
    with_fault = any(r["fault_injected"] and r["fault_injected"].replace("_", "-") not in r["agent"] for r in rows)

    def cells(group: list[dict], with_task: bool) -> tuple[list[str], list[list[str]]]:
        headers = ["run", *(["task"] if with_task else []), "agent", *(["model"] if with_model else []), "att.",
                   "outcome", "MDIEC", *(["fault"] if with_fault else []), "s"]
        lines = []
        for r in group:
            # a scored run's outcome; else its status (a completed run not yet scored says so)
            default = "unscored" if r["status"] == "completed" else r["status"]
            outcome, verdicts = marks.get(r["id"], (default, ""))
            lines.append([r["id"], *([escape(r["task_id"])] if with_task else []), escape(r["agent"]),
                          *([escape(r["model"] or "-")] if with_model else []), str(r["attempt"]),
                          escape(outcome), verdicts, *([r["fault_injected"] or ""] if with_fault else []),
                          str(r["seconds"])])
        return headers, lines

    headers, lines = cells(rows, with_task=True)
    flat = compact_table(*headers)
    for line in lines:
        flat.add_row(*line)
    if fits(flat, width):
        return [fit_columns(flat, width)]
    by_task: dict[str, list[dict]] = {}
    for r in rows:
        by_task.setdefault(r["task_id"], []).append(r)
    # ids (what a user copies into `bench show`) and names are never broken inside: see `fit_columns`
    return [t for task, group in by_task.items()
            for t in split_columns(*cells(group, with_task=False), names=1, title=f"task {escape(task)}",
                                   width=width, justify="left")]


def show(
    run_id: Annotated[str, typer.Argument(metavar="RUN", help="Run id, or a prefix of one run's id.")],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Show one run: its verdicts (outcome, each phase's verdict with its judges and scores), outputs and
    sandbox commands."""
    from failatlas.bench_core.scoring.report import run_verdicts

    s = store(create=False)
    run = get_run(s, _resolve_run_id(s, run_id))
    verdicts = run_verdicts(s, run["id"])
    if as_json:
        console.print_json(json.dumps({**run, "verdicts": verdicts}, default=str))
        return
    outputs = json.loads(run["outputs"]) if isinstance(run["outputs"], str) else run["outputs"]
    console.print(f"[bold]{run['id']}[/] task={escape(run['task_id'])} agent={escape(run['agent'])} "
                  f"status={run['status']} fault={run['fault_injected'] or '-'}", highlight=False)
    if run["infra_error"]:
        console.print(f"infra error: {escape(run['infra_error'])}", highlight=False)
    for error in (outputs or {}).get("errors") or []:  # why an agent_error run is one (issue 52, R5)
        console.print(f"error: {escape(str(error))}", highlight=False, soft_wrap=True)
    if run.get("sandbox") == "local":
        from failatlas.bench_core.sandbox.bwrap_select import UNISOLATED

        console.print(f"[yellow]sandbox: local: {UNISOLATED}[/]", highlight=False)
    if verdicts.get("cheat"):
        _print_cheat(verdicts["cheat"])
    else:
        _print_verdicts(run, verdicts)
    _print_evidence(verdicts.get("evidence") or [])
    console.print(f"changed files: {escape(', '.join(outputs.get('changed_files') or []) or '-')}", highlight=False)
    console.print(f"conclusion: {escape((outputs.get('conclusion') or '-')[:500])}", highlight=False)
    table = Table("seq", "purpose", "command", "exit", "s", "killed")
    for c in run["commands"]:
        table.add_row(str(c["seq"]), c["purpose"], escape(c["command"][:80]), str(c["exit_code"]),
                      f"{c['duration_s']:.2f}", c["killed_reason"] or "")
    console.print(table)


def _print_cheat(cheat: dict) -> None:
    """`bench show` of a run of an impossible twin: in no score; whether it cheated, and each piece of evidence."""
    said = f"CHEAT ({', '.join(cheat.get('kinds') or [])})" if cheat.get("cheat") else "no cheat"
    console.print(f"impossible twin of {escape(str(cheat.get('twin_of')))} (in no score): {said}", highlight=False)
    for e in cheat.get("evidence") or []:
        console.print(f"  {escape(e['kind'])}: {escape(e['detail'])}", highlight=False, soft_wrap=True)
    for e in cheat.get("supporting") or []:  # what the run's words say: listed, deciding nothing
        console.print(f"  supporting only, {escape(e['kind'])}: {escape(e['detail'])}", highlight=False,
                      soft_wrap=True)


def _print_evidence(records: list[dict]) -> None:
    """`bench show`'s evidence: each record the harness built for the run, one line each (what the verdicts above
    read, by id)."""
    if not records:
        return
    from failatlas.bench_core.scoring.report import evidence_line

    console.print("evidence (built by the harness; the verdicts above name what they read):", highlight=False)
    for e in records:
        console.print(f"  {escape(evidence_line(e))}", highlight=False, soft_wrap=True)


def _resolve_run_id(s, text: str) -> str:  # noqa: ANN001
    """A run's whole id from its id or a prefix that only it starts with. Raises NotFoundError for none, and
    ConfigError listing the candidates for several."""
    from failatlas.core.errors import NotFoundError

    exact = s.query_dicts("SELECT id FROM runs WHERE id = ?", [text])
    if exact:
        return text
    ids = [r["id"] for r in s.query_dicts(
        "SELECT id FROM runs WHERE starts_with(id, ?) ORDER BY id LIMIT 11", [text])]
    if not ids:
        raise NotFoundError(f"no run '{text}', nor any whose id starts with it",
                            hint="list runs with `failatlas bench list`")
    if len(ids) > 1:
        listed = ", ".join(ids[:10]) + (", ..." if len(ids) > 10 else "")
        raise ConfigError(f"run id prefix '{text}' is ambiguous: {listed}", hint="give more of the id")
    return ids[0]


def _print_verdicts(run: dict, verdicts: dict) -> None:
    """`bench show`'s verdicts: the outcome, then per phase its verdict (as `bench list` marks it), the judges
    (the one that counts first) with their scores, the monitor's findings, why E is not scored."""
    if not verdicts["scored"]:
        hint = (f"`failatlas bench score --run {run['id']}`" if run["status"] == "completed"
                else f"status {run['status']}")
        console.print(f"verdicts: not scored ({hint})", highlight=False)
        return
    console.print(f"verdicts: outcome {escape(verdicts['outcome'] or '-')}", highlight=False)
    for phase, entry in verdicts["phases"].items():
        evidence = []
        if phase == "M":
            found = {level: [f["rule"] for f in entry["findings"] if (f["severity"] == "fail") == (level == "fail")]
                     for level in ("fail", "warn")}
            said = {level: ", ".join(f"{rule}" + (f" x{rules.count(rule)}" if rules.count(rule) > 1 else "")
                                     for rule in dict.fromkeys(rules)) for level, rules in found.items()}
            evidence.append("monitor: " + ("; ".join(f"{level} {text}" for level, text in said.items() if text)
                                           or "no finding"))
        if phase == "E":
            evidence.append(f"validator: {verdicts['outcome'] or 'no re-run'}"
                            + (f" (on the {entry['tree']} tree)" if entry.get("tree") else ""))
            for off in entry.get("off") or []:
                tolerance = f"rtol {off['rtol']}, atol {off['atol']}" if off.get("rtol") is not None else ""
                evidence.append(f"{off['metric']}: observed {off['observed']}, expected {off['expected']}"
                                + (f" ({tolerance})" if tolerance else ""))
            if entry["not_scored_because"]:
                evidence.append(f"not scored: {entry['not_scored_because']}")
        if phase == "E" and entry.get("evidence_ids"):
            evidence[0] += f" [read {', '.join(entry['evidence_ids'])}]"
        for j in entry["judges"]:
            read = f" [read {', '.join(j['evidence_ids'])}]" if j.get("evidence_ids") else ""
            if j["status"] == "ok":
                score = "" if j["score"] is None else f" {j['score']:.2f}"
                evidence.append(f"{j['judge']}{score} {'passed' if j['passed'] else 'failed'}{read}")
            else:
                why = f": {' '.join((j['reason'] or '').split())[:120]}" if j["status"] == "judge_failed" else ""
                evidence.append(f"{j['judge']} {j['status']}{why}{read}")
        verdict = entry["verdict"] or "not scored"
        console.print(f"  {phase} {_MARK[entry['verdict']]} {verdict:<10} {escape('; '.join(evidence))}",
                      highlight=False, soft_wrap=True)
