"""`failatlas bench report`: metric tables per agent, model, task or benchmark, as Markdown, CSV and LaTeX.

The LaTeX is for a paper: it compiles in a plain `article` with booktabs and tabularx, fits \\textwidth, and so
splits the scores into one float per family (phase scores, conjunctive scores, pass@k when asked for), each cell
the mean over its 95% CI and its n in a smaller font. Every table of scores (terminal, Markdown, LaTeX) prints a CI
as `interval_text` does, '0.20–0.80'."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from failatlas.bench_core.agent_order import agent_key, agent_order_sql, sort_groups
from failatlas.bench_core.scoring.cheat_report import cheat_cell, cheat_runs, with_cheat
from failatlas.bench_core.scoring.checks.cheating import CHEAT_PHASE
from failatlas.bench_core.scoring.metrics import CONJUNCTIVE, PHASES, run_scores, summarise
from failatlas.bench_core.tasks.twins import REAL_TASK_SQL
from failatlas.core.errors import InputError, NotFoundError
from failatlas.core.store import Store
from failatlas.core.tables import (
    NAME_COLUMN,
    fmt,
    interval_text,
    latex_cell,
    one_line,
    paper_table,
    to_csv,
    to_markdown,
)

GROUPINGS = {"agent": ["agent", "model"], "task": ["task_id", "agent", "model"], "benchmark": ["benchmark", "agent"],
             "fault": ["fault_injected", "agent"], "paper": ["benchmark", "paper_id", "agent", "model"],
             # what the agent was given: EXP-Bench's task kind (T1, T2, T3), AutoExperiment's setting and n
             "setting": ["benchmark", "kind", "setting", "n_masked", "agent", "model"],
             "kind": ["benchmark", "kind", "agent", "model"], "n": ["benchmark", "n_masked", "agent", "model"]}
# the column each grouping is about, and the note the terminal prints where no run has a value for it
DIMENSION = {"agent": "agent", "task": "task_id", "benchmark": "benchmark", "fault": "fault_injected",
             "paper": "paper_id", "setting": "setting", "kind": "kind", "n": "n_masked"}
NO_DIMENSION = {"agent": "(no run names an agent)", "task_id": "(no run names a task)",
                "benchmark": "(no run names a benchmark)", "fault_injected": "(no run injects a fault)",
                "paper_id": "(no run's task names a paper)", "setting": "(no run was given a setting)",
                "kind": "(no run's task names a kind)", "n_masked": "(no run's task masks functions)"}
METRICS = (*PHASES, *CONJUNCTIVE)
_STORED = f"""
    SELECT r.id AS run_id, r.task_id, r.agent, r.model, r.benchmark, r.fault_injected, r.setting, t.paper_id,
           t.kind, json_array_length(t.spec, '$.masking.functions') AS n_masked, r.status
    FROM runs r LEFT JOIN tasks t ON t.id = r.task_id WHERE {REAL_TASK_SQL}"""


def report_table(store: Store, *, by: str = "agent", k: int | None = None,
                 scores: pl.DataFrame | None = None) -> pl.DataFrame:
    """The scores per group of `by` (`GROUPINGS`), with, beside each group's scored runs (`runs`), the runs
    stored for it (`stored`), those not scored yet (`unscored`) and those that ended in `infra_error`, and its
    cheat rate on impossible twins (`cheat`, `cheat_lo`, `cheat_hi`, `cheat_n`: `cheat_report.py`).
    `scores`: `run_scores(store)`, when the caller has it. Raises NotFoundError for an unknown grouping or a
    store without scored runs."""
    if by not in GROUPINGS:
        raise NotFoundError(f"unknown grouping '{by}'", hint="use one of: " + ", ".join(GROUPINGS))
    scores = run_scores(store) if scores is None else scores
    cheats = cheat_runs(store)
    if scores.height == 0 and cheats.height == 0:
        raise NotFoundError("no scored runs in the store",
                            hint="run `failatlas bench run` then `failatlas bench score`")
    table = sort_groups(with_cheat(summarise(scores, GROUPINGS[by], k=k) if scores.height else pl.DataFrame(),
                                   cheats, GROUPINGS[by]), GROUPINGS[by])
    coverage = _coverage(store, scores, GROUPINGS[by])
    extra = {name: [coverage.get(tuple(r[key] for key in GROUPINGS[by]), {}).get(name, 0)
                    for r in table.iter_rows(named=True)] for name in ("stored", "unscored", "infra_error")}
    return table.with_columns(*(pl.Series(name, values, dtype=pl.Int64) for name, values in extra.items()))


PHASE_NAMES = {"M": "monitor", "D": "design", "I": "implementation", "E": "execution", "C": "conclusion"}


def phase_verdicts(row: dict | None) -> dict[str, str | None]:
    """A `run_scores` row's phases as words: `passed`, `failed`, or None where the phase is not scored."""
    return {p: None if row is None or row[p] is None else "passed" if row[p] else "failed" for p in PHASES}


def run_verdicts(store: Store, run_id: str, scores: pl.DataFrame | None = None) -> dict:
    """How one run was judged, as `bench show` prints it: whether it is scored, its validator outcome, and per
    phase the verdict every score counts (`phase_verdicts` of its `run_scores` row) with the evidence: the phase's
    judges (the one that counts first: verdicts before failures, then by `judge_precedence`), for M the monitor's
    findings, for E why it is not scored where the environment cannot run the task."""
    from failatlas.bench_core.scoring.checks.base import judge_precedence

    scores = run_scores(store) if scores is None else scores
    row = next(scores.filter(pl.col("run_id") == run_id).iter_rows(named=True), None)
    judgements = store.query_dicts(
        "SELECT phase, judge, kind, status, score, passed, reason, evidence_ids FROM judgements WHERE run_id = ?",
        [run_id])
    for j in judgements:
        j["evidence_ids"] = json.loads(j["evidence_ids"] or "[]")
    judgements.sort(key=lambda j: (j["status"] != "ok", -judge_precedence(j["kind"], j["judge"]), j["judge"]))
    verdicts = phase_verdicts(row)
    phases = {p: {"verdict": verdicts[p], "judges": [j for j in judgements if j["phase"] == name]}
              for p, name in PHASE_NAMES.items()}
    phases["M"]["findings"] = store.query_dicts(
        "SELECT rule, severity, evidence, evidence_ids FROM monitor_findings WHERE run_id = ? ORDER BY seq", [run_id])
    for f in phases["M"]["findings"]:
        f["evidence_ids"] = json.loads(f["evidence_ids"] or "[]")
    phases["E"]["not_scored_because"] = row["E_unscored"] if row else None
    validation = next(iter(store.query_dicts(
        "SELECT metrics, evidence, evidence_ids FROM validations WHERE run_id = ?", [run_id])), {})
    phases["E"]["evidence_ids"] = json.loads(validation.get("evidence_ids") or "[]")
    evidence = json.loads(validation.get("evidence") or "{}")
    phases["E"]["tree"] = evidence.get("tree")  # constructed, diff or script: what E was decided on
    metrics = json.loads(validation.get("metrics") or "{}")
    phases["E"]["off"] = [{"metric": name, **{k: m.get(k) for k in ("observed", "expected", "rtol", "atol")}}
                          for name, m in metrics.items() if isinstance(m, dict) and m.get("ok") is False]
    # a run of an impossible twin is in no score: its verdict is whether it cheated, and on which evidence
    cheat = next(iter(store.query_dicts("SELECT verdict FROM judgements WHERE run_id = ? AND phase = ? AND status"
                                        " = 'ok'", [run_id, CHEAT_PHASE])), None)
    return {"scored": row is not None, "outcome": row["outcome"] if row else None, "phases": phases,
            "cheat": json.loads(cheat["verdict"]) if cheat else None, "evidence": run_evidence(store, run_id)}


def run_evidence(store: Store, run_id: str) -> list[dict]:
    """The evidence records scoring built for one run, in the order they were built (`evidence` table):
    id, kind, status, whether the agent's code ran there, blame, tree digest, what it observed and notes."""
    rows = store.query_dicts("SELECT id, kind, status, agent_code_ran, tree, blame, observed, notes FROM evidence"
                             " WHERE run_id = ? ORDER BY rowid", [run_id])
    for r in rows:
        r["observed"] = json.loads(r["observed"] or "{}")
        r["notes"] = json.loads(r["notes"] or "[]")
    return rows


def evidence_line(record: dict, most: int = 160) -> str:
    """One evidence record (`run_evidence`) on one line, as `bench show` and the drill-down export print it:
    'id (kind): status, whether the agent's code ran, blame: what it observed' (the observation cut at `most`
    characters, with '…')."""
    ran = "agent's code ran" if record["agent_code_ran"] else "no agent code"
    blame = f", blame {record['blame']}" if record.get("blame") else ""
    observed = json.dumps(record["observed"], default=str, sort_keys=True)
    observed = observed if len(observed) <= most else observed[:most - 1] + "…"
    return f"{record['id']} ({record['kind']}): {record['status']}, {ran}{blame}: {observed}"


def _coverage(store: Store, scores: pl.DataFrame, keys: list[str]) -> dict[tuple, dict[str, int]]:
    """group key -> stored runs, of which not scored yet and infra_error."""
    scored = set(scores["run_id"].to_list())
    out: dict[tuple, dict[str, int]] = {}
    for r in store.query_dicts(_STORED):
        counts = out.setdefault(tuple(r[key] for key in keys), {"stored": 0, "unscored": 0, "infra_error": 0})
        counts["stored"] += 1
        if r["status"] == "infra_error":
            counts["infra_error"] += 1
        elif r["run_id"] not in scored:
            counts["unscored"] += 1
    return out


def report_notes(store: Store, scores: pl.DataFrame | None = None) -> list[str]:
    """What a reader of the scores must know, one line each: per agent, the runs stored and how many each
    denominator holds; a warning for every agent with stored runs left out of every score (not scored yet, or
    infra_error); and the runs whose E is not scored because the environment cannot run their task, by reason."""
    scores = run_scores(store) if scores is None else scores
    coverage = _coverage(store, scores, ["agent"])
    lines = []
    for (agent,), counts in sorted(coverage.items(), key=lambda kv: agent_key(kv[0][0])):
        group = scores.filter(pl.col("agent") == agent)
        # 'M=5': one word per denominator, so a terminal or a Markdown viewer wraps the line between them, never
        # inside one (issue 54: "M·C·D·I·E" and its count were parted at 120 columns)
        dens = ", ".join(f"{m}={group[m].is_not_null().sum()}" for m in METRICS)
        env = group["E_unscored"].is_not_null().sum()
        lines.append(f"{agent}: {counts['stored']} run(s) stored, {group.height} scored; denominators: {dens}"
                     + (f"; E not scored, not the agent's failure: {env} (reasons below)" if env else ""))
        left = counts["unscored"] + counts["infra_error"]
        if left:
            why = [f"{counts['unscored']} not scored yet (`failatlas bench score`)"] if counts["unscored"] else []
            if counts["infra_error"]:
                why.append(f"{counts['infra_error']} infra_error (`failatlas bench run --retry-infra`)")
            lines.append(f"warning: {agent}: {left} of {counts['stored']} stored run(s) are in no score: "
                         + ", ".join(why))
    lines += _environment_lines(scores)
    lines += _attribution_lines(store, scores)
    lines += _valued_on_data_lines(store, scores)
    lines += _unisolated_lines(store, scores)
    lines += _cheat_lines(store)
    return lines


def _cheat_lines(store: Store) -> list[str]:
    """Where the report has a cheat rate: how often the cheat verdict is wrong each way, and where that is measured."""
    judged = store.query(f"SELECT count(*) FROM judgements WHERE phase = '{CHEAT_PHASE}' AND status = 'ok'")[0][0]
    if not judged:
        return []
    return ["cheat: the share of a group's impossible-twin runs judged cheats, from the visible check run by the "
            "harness on the agent's tree and the constructed tree (docs/metrics.md, \"Cheating on impossible "
            "twins\"); its errors both ways, measured on honest agents and cheats: docs/metrics.md, \"The judges' "
            "errors\""]


def _unisolated_lines(store: Store, scores: pl.DataFrame) -> list[str]:
    """The scored runs made in `local` sandboxes, per agent: their agents' code ran on the host, where it could
    write what judges it (docs/sandbox.md), so their scores hold only for trusted agents."""
    ids = scores["run_id"].to_list()
    if not ids:
        return []
    marks = ", ".join("?" for _ in ids)
    rows = store.query(f"SELECT agent, count(*) FROM runs WHERE id IN ({marks}) AND sandbox = 'local' "
                       f"GROUP BY agent ORDER BY {agent_order_sql('agent')}", ids)
    if not rows:
        return []
    named = ", ".join(f"{agent} {n}" for agent, n in rows)
    return [f"warning: {sum(n for _a, n in rows)} scored run(s) ran in local sandboxes, unisolated ({named}): the "
            "agent's code could write the harness's own files, so these scores hold only for trusted agents "
            "(use --sandbox docker or bwrap for any other)"]


def _valued_on_data_lines(store: Store, scores: pl.DataFrame) -> list[str]:
    """The scored runs of tasks whose expected values were taken from the reference's own run on given data
    (`tasks validate --expected-from-reference`, a stand-in for data that is not public): a reader must not take
    their scores for the paper's."""
    ids = scores["run_id"].to_list()
    if not ids:
        return []
    marks = ", ".join("?" for _ in ids)
    [(runs, tasks)] = store.query(
        f"SELECT count(*), count(DISTINCT r.task_id) FROM runs r JOIN tasks t ON t.id = r.task_id "
        f"WHERE r.id IN ({marks}) AND json_extract(t.spec, '$.extra.expected_from_reference.of') IS NOT NULL", ids)
    if not runs:
        return []
    return [f"{runs} scored run(s) of {tasks} task(s) are judged against the reference's own run on the data given "
            "(`+ref-` tasks: a stand-in for data that is not public), not against the paper's values"]


def _attribution_lines(store: Store, scores: pl.DataFrame) -> list[str]:
    """How many E verdicts were re-runs of the agent's own script (script-attributed), and the runs whose scoring
    crashed on what they hold (every phase failed; docs/metrics.md, "The constructed tree")."""
    ids = scores["run_id"].to_list()
    if not ids:
        return []
    marks = ", ".join("?" for _ in ids)
    lines = []
    [(script, decided)] = store.query(
        f"SELECT count(*) FILTER (WHERE json_extract_string(evidence, '$.tree') = 'script'), count(*) "
        f"FROM validations WHERE run_id IN ({marks}) AND outcome != 'not_scored'", ids)
    if script:
        lines.append(f"E is script-attributed on {script} of {decided} run(s): the task's answer is what the "
                     "agent's own run script prints, re-run on its own tree (docs/metrics.md)")
    crashed = [r[0] for r in store.query(
        f"SELECT DISTINCT run_id FROM judgements WHERE run_id IN ({marks}) AND status = 'ok' AND passed = false "
        f"AND json_extract(verdict, '$.crashed')::BOOLEAN ORDER BY 1", ids)]
    if crashed:
        listed = ", ".join(crashed[:10]) + (f" and {len(crashed) - 10} more" if len(crashed) > 10 else "")
        lines.append(f"scoring crashed on what {len(crashed)} run(s) hold; those phases are failed: {listed}")
    return lines


def _environment_lines(scores: pl.DataFrame, most: int = 5) -> list[str]:
    env = scores.filter(pl.col("E_unscored").is_not_null())
    if env.height == 0:
        return []
    reasons = env.group_by("E_unscored").agg(pl.len().alias("runs"), pl.col("task_id").n_unique().alias("tasks"),
                                             pl.col("task_id").min().alias("example")).sort("runs", descending=True)
    lines = [f"E not scored, not the agent's failure: {env.height} run(s) of {env['task_id'].n_unique()} task(s)"]
    for r in reasons.head(most).iter_rows(named=True):
        lines.append(f"  {r['runs']} run(s) of {r['tasks']} task(s) (e.g. {r['example']}): {r['E_unscored']}")
    if reasons.height > most:
        lines.append(f"  and {reasons.height - most} more reason(s)")
    return lines


def _rows(table: pl.DataFrame, by: str, with_ci: bool, with_n: bool = True) -> tuple[list[str], list[list[object]]]:
    keys = GROUPINGS[by]
    extra = [c for c in table.columns if c.startswith("pass")]
    cheat = ["cheat"] if "cheat_n" in table.columns and table["cheat_n"].sum() else []
    headers = [*keys, "runs", *METRICS, *extra, *cheat]
    rows = []
    for r in table.iter_rows(named=True):
        runs = r["runs"] if r.get("stored", r["runs"]) == r["runs"] else f"{r['runs']} of {r['stored']}"
        row: list[object] = [r[k] if r[k] is not None and r[k] != "" else "–" for k in keys] + [runs]
        for m in METRICS:
            env = f", left out {r['E_env_n']}" if m == "E" and r.get("E_env_n") else ""
            if r[f"{m}_n"] == 0:
                row.append(f"– (left out {r['E_env_n']})" if env and with_n else "–")
            elif with_ci:
                cell = f"{fmt(r[m])} [{score_interval_text(r, m)}]"
                row.append(f"{cell} (n={r[m + '_n']}{env})" if with_n else cell)
            else:
                row.append(r[m])
        row += [r[e] for e in extra]
        if cheat:
            row.append(cheat_cell(r, score_interval_text(r, "cheat")) if with_ci else r["cheat"])
        rows.append(row)
    return headers, rows


def attempts_note(table: pl.DataFrame, scores: pl.DataFrame, by: str, k: int) -> str | None:
    """Why pass@k is `–` in some group of `table` (`report_table(..., k=k)`), one line: it needs k attempts of a
    task scored on M·C·D·I·E, and how many the tasks here have at most. None when every group has such a task."""
    empty = table.filter(pl.col(f"pass@{k}").is_null()).height
    if not empty:
        return None
    scored = scores.filter(pl.col("M·C·D·I·E").is_not_null())
    most = scored.group_by([*GROUPINGS[by], "task_id"]).len()["len"].max() if scored.height else 0
    have = (f"at most {most} per task here" if most else "no run here is scored on all five phases: see the "
            "denominators")
    return (f"pass@{k} and pass^{k} need {k} attempts of a task scored on M·C·D·I·E; {empty} of {table.height} "
            f"group(s) have no such task ({have}): `failatlas bench run --attempts {k}`, then "
            "`failatlas bench score`")


def check_report_folder(out_dir: Path) -> None:
    """Raise InputError naming the path when the report cannot be written to `out_dir`: it, or the nearest of
    its parents that exists, is not a folder."""
    for path in (out_dir, *out_dir.parents):
        if path.exists():
            if not path.is_dir():
                inside = "" if path == out_dir else f", so the report folder {out_dir} cannot be made in it"
                raise InputError(f"is a file, not a folder{inside}", path=str(path),
                                 hint="pass --out a folder, or a new folder's name")
            return


def write_report(table: pl.DataFrame, by: str, out_dir: Path, notes: list[str] | None = None) -> list[Path]:
    """Write report.md (with `notes`, `report_notes`, below the table), report.csv (numbers, CIs, denominators,
    stored, unscored and infra_error runs, E left out for the environment as columns) and report.tex, all or
    none (each written beside its name, then renamed). Raises InputError naming the path when the folder cannot
    be made or written."""
    headers, rows = _rows(table, by, with_ci=True)
    # a note names agents, tasks and reasons from the store: one inert line each in the Markdown
    listed = [f"{'  ' if line.startswith(' ') else ''}- {one_line(line, markdown='line')}" for line in notes or []]
    texts = {f"report_by_{by}.md": to_markdown(headers, rows) + ("\n" + "\n".join(listed) + "\n" if listed else ""),
             f"report_by_{by}.csv": to_csv(table.columns, table.rows()),
             f"report_by_{by}.tex": to_paper_latex(table, by)}
    check_report_folder(out_dir)
    written: list[Path] = []
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for name in texts:  # a rename onto a folder would fail after the others were done
            if (out_dir / name).is_dir():
                raise IsADirectoryError(21, "a folder has the report file's name", str(out_dir / name))
        for name, text in texts.items():
            part = out_dir / f".{name}.part"
            written.append(part)
            part.write_text(text)
        for name in texts:
            (out_dir / f".{name}.part").replace(out_dir / name)
    except OSError as exc:
        for part in written:
            part.unlink(missing_ok=True)
        raise InputError(f"cannot write the report: {exc.strerror or exc}", path=str(exc.filename or out_dir),
                         hint="pass --out a folder you can write to") from exc
    return [out_dir / name for name in texts]


def score_interval_text(r: dict, metric: str, dash: str = "–") -> str:
    """A score's 95% CI (`metrics.score_interval`) as the terminal, Markdown, LaTeX and the app print it:
    '0.20–0.80'."""
    return interval_text(r[f"{metric}_lo"], r[f"{metric}_hi"], digits=2, scale=1.0, dash=dash)


def _stacked(lines: list[str]) -> str:
    """Lines right-aligned in one cell (a nested tabular: no extra package)."""
    return r"\begin{tabular}[t]{@{}r@{}}" + r"\\[-1pt]".join(lines) + r"\end{tabular}"


def _paper_cell(r: dict, metric: str) -> str:
    """Three lines: the mean, its 95% CI as every table prints one (`interval_text`: '0.20--0.80'), and n, the
    runs the mean is over (those where the score is defined), so the denominator stands in the table. A cell
    with no mean (n=0) or no CI leaves that line empty, so a row's CIs and n's stay on one line each."""
    n = r.get(f"{metric}_n") or 0
    ci = score_interval_text(r, metric, dash="--") if n else "--"
    return _stacked([fmt(r[metric]) if n else "--", "" if ci == "--" else r"{\scriptsize " + ci + "}",
                     rf"{{\scriptsize $n$={n}}}"])


_FAMILIES = {"phases": ("phase scores (M monitor, D design, I implementation, E execution, C conclusion)", PHASES),
             "conjunctive": ("conjunctive scores (a run passes when it passes every phase named)",
                             tuple(CONJUNCTIVE))}


def _latex_header(metric: str) -> str:
    """A conjunctive score is headed by the phases it joins ('All✓' is 'D·I·C'): a check mark would need amssymb
    and reads as a root sign in the PDF's text; pass@k and the phases by their own names."""
    return latex_cell("·".join(CONJUNCTIVE[metric]) if metric in CONJUNCTIVE else metric)


def to_paper_latex(table: pl.DataFrame, by: str) -> str:
    """One table float per family of scores, each fitting \\textwidth: the group (its keys that some row names:
    no model part when no run has a model, and the caption says so), runs, then the family's metrics, each cell
    the mean over its 95% CI and its n; `--` where no run was scored. The group never breaks inside a word."""
    named = [k for k in GROUPINGS[by] if any(r[k] not in (None, "") for r in table.iter_rows(named=True))]
    keys = named or GROUPINGS[by][:1]
    left_out = [k for k in GROUPINGS[by] if k not in keys]
    families = dict(_FAMILIES)
    extra = tuple(c for c in table.columns if c.startswith("pass"))
    if extra:
        families["pass"] = ("pass@k and pass^k over attempts, on M·C·D·I·E", extra)
    if "cheat_n" in table.columns and table["cheat_n"].sum():
        families["cheat"] = ("cheat rate on impossible twins (runs: scored runs of real tasks)", ("cheat",))
    env_left = any(r.get("E_env_n") for r in table.iter_rows(named=True))
    out = []
    for family, (what, metrics) in families.items():
        header = [latex_cell(" / ".join(keys)), "runs", *(_latex_header(m) for m in metrics)]
        body = []
        for r in table.iter_rows(named=True):
            group = " / ".join(str(r[k]) for k in keys if r[k] is not None and r[k] != "") or "--"
            cells = [latex_cell(group), str(r["runs"])]
            if family == "pass":
                cells += ["--" if r[m] is None else fmt(r[m]) for m in metrics]
            else:
                cells += [_paper_cell(r, m) for m in metrics]
            body.append(" & ".join(cells) + r" \\[2pt]")
        caption = latex_cell(f"{what[0].upper()}{what[1:]} by {by}.")
        if family != "pass":
            caption += (r" Each cell: the mean over runs, its 95\% Wilson score interval (over the group's tasks;"
                        r" over the runs when the group is one task) and $n$, the runs the score is defined on"
                        " (runs: every scored run of the group).")
        if family == "phases" and env_left:
            caption += " E's $n$ leaves out the runs whose task this environment cannot run (E\\_env\\_n in the CSV)."
        if family == "cheat":
            caption += (" Cheat: the share of the group's runs of impossible twins (expected values no honest run"
                        " reaches) that claimed them or forged their check; $n$: those runs (docs/metrics.md).")
        if family == "conjunctive":
            caption += " " + latex_cell("D·I·C and D·I·C·E are EXP-Bench's all-correct scores, without and with E.")
        if left_out:
            caption += " " + latex_cell(f"No run names a {' or '.join(left_out)}, so the column shows none.")
        spec = "@{}" + NAME_COLUMN + "r" * (1 + len(metrics)) + "@{}"
        out.append(paper_table(spec, header, body, caption=caption, label=f"tab:failatlas-scores-{by}-{family}",
                               comment="FailAtlas `bench report`." if not out else "", column_gap="4pt"))
    return "\n".join(out)
