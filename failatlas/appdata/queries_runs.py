"""Read-only queries behind the run list, the per-task view and the side-by-side diff of two runs.

Like `queries`, every function that reads takes a `Store` and copies its result out; scores are read through
`bench_core.scoring.metrics.run_scores` (the numbers the Overview and the exports summarise), outcomes and monitor
verdicts through `queries.runs_page`. Filtering and sorting the run list are pure functions over the frame
`run_table` returns, so the page reads the store once per change and filters in memory; `RunQuery` is the list's
state, written to and read from the URL.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from failatlas.bench_core.agent_order import ordered_agents
from failatlas.core.store import Store

REFERENCE = "gold"  # the agent that restores the reference implementation: a diff's default left side
# The phase scores in the funnel's order, then their product; the URL spells each by its letters.
SCORES = ("M", "C", "D", "I", "E", "M·C·D·I·E")
SCORE_KEYS = {s.replace("·", ""): s for s in SCORES}
SCORE_VALUES = {"1": "passed (1)", "0": "failed (0)", "none": "not scored"}
# Sort keys of the URL -> columns of the run table.
SORTS = {"finished": "finished_at", "agent": "agent", "task": "task_id", "outcome": "outcome", "monitor": "monitor",
         **SCORE_KEYS, "time": "duration_s", "cost": "cost_usd"}
MONITOR_VERDICTS = ("flagged", "warned", "clean")


# -- the run list ---------------------------------------------------------------------------------------------
def run_table(store: Store) -> pl.DataFrame:
    """Every run, newest first: task, agent, model, attempt, status, `outcome` (the validator's verdict, else the
    run's status: `infra_error`, `agent_error`, or `completed` when not validated yet; `validator`: the verdict
    alone), the monitor's verdict
    (`flagged`, `warned`, `clean`, null when not scored), the phase scores M, C, D, I, E and their product
    M·C·D·I·E (1, 0, or null where not scored; `run_scores`), time, cost, tokens and when it finished. Runs of
    impossible twins are not listed: they are in no score, and count only in the cheat rate (`twin_run_count`)."""
    from failatlas.appdata.queries import runs_page
    from failatlas.appdata.queries_store import read_frame, scores_of
    from failatlas.bench_core.tasks.twins import REAL_TASK_SQL

    _, total = runs_page(store, limit=0)
    runs, _ = runs_page(store, limit=max(total, 1))
    twins = read_frame(store, f"SELECT r.id FROM runs r JOIN tasks t ON t.id = r.task_id WHERE NOT ({REAL_TASK_SQL})")
    runs = runs.filter(~pl.col("run_id").is_in(twins["id"].implode()))
    scores = scores_of(store).select("run_id", *SCORES)
    return (runs.rename({"outcome": "validator"})
            .with_columns(pl.coalesce("validator", "status").alias("outcome"))
            .join(scores, on="run_id", how="left")
            .select("run_id", "task_id", "agent", "model", "attempt", "status", "outcome", "validator", "monitor",
                    *SCORES,
                    "duration_s", "cost_usd", "tokens", "finished_at"))


@dataclass(frozen=True)
class RunQuery:
    """The run list's filters and order. Empty filters keep every run; `scores` maps a score (`M`, ..., `MCDIE`)
    to the values kept (`1`, `0`, `none`)."""

    agents: tuple[str, ...] = ()
    tasks: tuple[str, ...] = ()
    outcomes: tuple[str, ...] = ()
    monitors: tuple[str, ...] = ()
    scores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    sort: str = "finished"
    descending: bool = True

    @classmethod
    def from_params(cls, get_all: Callable[[str], list[str]]) -> tuple[RunQuery, list[str]]:
        """The query a URL holds (`get_all(name)`: every value of a repeated parameter) and one line per value it
        cannot use (an unknown sort key or score value), which is left out."""
        problems: list[str] = []
        scores = []
        for key in SCORE_KEYS:
            values = [v for v in get_all(key) if v]
            bad = [v for v in values if v not in SCORE_VALUES]
            problems += [f"{key}={v} is not a score value (use {', '.join(SCORE_VALUES)})" for v in bad]
            kept = tuple(v for v in SCORE_VALUES if v in values)
            if kept:
                scores.append((key, kept))
        sort = (get_all("sort") or ["finished"])[-1]
        if sort not in SORTS:
            problems.append(f"sort={sort} is not a column to sort by (use {', '.join(SORTS)})")
            sort = "finished"
        order = (get_all("order") or ["desc"])[-1]
        if order not in ("asc", "desc"):
            problems.append(f"order={order} is neither asc nor desc")
            order = "desc"
        return cls(agents=_unique(get_all("agent")), tasks=_unique(get_all("task")),
                   outcomes=_unique(get_all("outcome")), monitors=_unique(get_all("monitor")),
                   scores=tuple(scores), sort=sort, descending=order == "desc"), problems

    def to_params(self) -> dict[str, list[str]]:
        """The URL parameters that hold this query (defaults left out)."""
        out: dict[str, list[str]] = {"agent": list(self.agents), "task": list(self.tasks),
                                     "outcome": list(self.outcomes), "monitor": list(self.monitors)}
        out.update({key: list(values) for key, values in self.scores})
        if self.sort != "finished":
            out["sort"] = [self.sort]
        if not self.descending:
            out["order"] = ["asc"]
        return {k: v for k, v in out.items() if v}


def _unique(values: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(v for v in values if v))


def _score_test(column: str, values: tuple[str, ...]) -> pl.Expr:
    wanted = [int(v) for v in values if v != "none"]
    test = pl.col(column).is_in(wanted) if wanted else pl.lit(False)
    return test | pl.col(column).is_null() if "none" in values else test.fill_null(False)


def select_runs(table: pl.DataFrame, query: RunQuery) -> pl.DataFrame:
    """The runs of `table` (`run_table`) that pass every filter of `query`, in its order. Runs without a value in
    the sort column come last either way; ties keep the newest first."""
    keep = [pl.lit(True)]
    for column, values in (("agent", query.agents), ("task_id", query.tasks), ("outcome", query.outcomes),
                           ("monitor", query.monitors)):
        if values:
            keep.append(pl.col(column).is_in(list(values)).fill_null(False))
    keep += [_score_test(SCORE_KEYS[key], values) for key, values in query.scores]
    column = SORTS[query.sort]
    chosen = table.filter(pl.all_horizontal(keep))
    return chosen.sort([column, "finished_at", "run_id"], descending=[query.descending, True, False],
                       nulls_last=True, maintain_order=True)


def run_options(table: pl.DataFrame) -> dict[str, list[str]]:
    """What the run list's filters offer: the agents, tasks, outcomes and monitor verdicts that `table` holds."""
    def distinct(column: str) -> list[str]:
        return sorted(v for v in table[column].unique().to_list() if v is not None)

    return {"agent": ordered_agents(distinct("agent")), "task": distinct("task_id"), "outcome": distinct("outcome"),
            "monitor": [v for v in MONITOR_VERDICTS if v in set(table["monitor"].to_list())]}


# -- one task ---------------------------------------------------------------------------------------------------
def task_list(store: Store) -> pl.DataFrame:
    """Every task that is in the catalog or has runs: its id, title, benchmark, whether the catalog holds it, and
    its runs and agents; tasks with runs first. Impossible twins are no tasks here (the cheat rate counts their
    runs)."""
    from failatlas.bench_core.tasks.twins import REAL_TASK_SQL

    with store.read() as conn:
        table = conn.sql(f"""
            WITH ran AS (SELECT task_id, count(*) AS runs, count(DISTINCT agent) AS agents,
                                max(benchmark) AS benchmark FROM runs GROUP BY task_id)
            SELECT coalesce(t.id, ran.task_id) AS task_id, t.title, coalesce(t.benchmark, ran.benchmark) AS benchmark,
                   t.id IS NOT NULL AS in_catalog, coalesce(ran.runs, 0) AS runs, coalesce(ran.agents, 0) AS agents
            FROM tasks t FULL OUTER JOIN ran ON ran.task_id = t.id
            WHERE {REAL_TASK_SQL}
            ORDER BY runs = 0, benchmark, task_id""").to_arrow_table()
    return pl.from_arrow(table)  # type: ignore[return-value]


def task_detail(store: Store, task_id: str) -> dict[str, Any] | None:
    """One task of the catalog: its metadata (benchmark, kind, title, paper, repository, settings, resources,
    what the agent is told: question, method, instructions, hints), the prompt an agent reads in the default
    setting (`bench_core.agents.task_prompt`) and, apart, the ground truth. None when the catalog lacks it;
    InputError when its stored spec is no longer valid (`tasks.get_task`)."""
    from failatlas.bench_core.agents.base import task_prompt
    from failatlas.bench_core.tasks.catalog import get_task, public_view
    from failatlas.core.errors import NotFoundError

    try:
        task = get_task(store, task_id)
    except NotFoundError:
        return None
    shown = public_view(task)
    whole = public_view(task, ground_truth=True)
    return {"task": shown, "prompt": task_prompt(task.agent_view()),
            "ground_truth": {k: v for k, v in whole.items() if k not in shown}}


# -- two runs' diffs --------------------------------------------------------------------------------------------
def run_diffs(store: Store, run_ids: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """For each stored run of `run_ids`: task, agent, model, attempt, status, the validator's outcome
    (`validator`) and its diff (`outputs.diff`, '' when it changed nothing) with `diff_truncated`. Runs not stored
    are left out."""
    with store.read() as conn:
        cur = conn.execute(
            "SELECT r.id AS run_id, r.task_id, r.agent, r.model, r.attempt, r.status, v.outcome AS validator,"
            " coalesce(json_extract_string(r.outputs, '$.diff'), '') AS diff,"
            " coalesce(json_extract(r.outputs, '$.diff_truncated')::BOOLEAN, false) AS diff_truncated"
            " FROM runs r LEFT JOIN validations v ON v.run_id = r.id"
            " WHERE r.id IN (SELECT unnest(?::VARCHAR[]))", [list(run_ids)])
        names = [d[0] for d in cur.description]
        rows = cur.fetchall()
    return {row[0]: dict(zip(names, row, strict=True)) for row in rows}


def default_pair(table: pl.DataFrame, task_id: str) -> tuple[str | None, str | None]:
    """The diff's default sides for a task: the reference agent's newest run on the left (else the task's newest
    run) and, on the right, the newest run of another agent (else another run)."""
    runs = table.filter(pl.col("task_id") == task_id).sort(["finished_at", "run_id"], descending=[True, False])
    gold = runs.filter(pl.col("agent") == REFERENCE)
    left = (gold if gold.height else runs)["run_id"].head(1).to_list()
    if not left:
        return None, None
    others = runs.filter(pl.col("run_id") != left[0])
    other_agents = others.filter(pl.col("agent") != runs.filter(pl.col("run_id") == left[0])["agent"][0])
    right = (other_agents if other_agents.height else others)["run_id"].head(1).to_list()
    return left[0], right[0] if right else None


def resolve_pair(table: pl.DataFrame, task_id: str, left: str | None, right: str | None
                 ) -> tuple[str | None, str | None]:
    """The two runs a diff shows: those asked for, a missing side filled from the task's `default_pair` (so a
    lone right run is put beside the reference run, and the reference run beside another agent's)."""
    first, second = default_pair(table, task_id)
    if left and right:
        return left, right
    given = left or right
    if given is None:
        return first, second
    other = first if first != given else second
    return (given, other) if left else (other, given)


_FILE_HEADER = re.compile(r"^diff --git a/(.*?) b/(.*)$")


@dataclass
class FileDiff:
    """One file's part of a unified diff: its path (the new one when renamed), its text and its line counts."""

    path: str
    text: str
    added: int = 0
    removed: int = 0
    lines: list[str] = field(default_factory=list, repr=False)


def split_diff(diff: str) -> list[FileDiff]:
    """A `git diff` split by file, in its order. Text before the first `diff --git` header (a plain unified diff)
    is one part, named by its `+++` line."""
    parts: list[FileDiff] = []
    for line in diff.splitlines():
        header = _FILE_HEADER.match(line)
        if header or not parts:
            parts.append(FileDiff(path=header.group(2) if header else "", text=""))
        part = parts[-1]
        part.lines.append(line)
        if line.startswith("+++ ") and not part.path:
            part.path = line[4:].removeprefix("b/").strip()
        elif line.startswith("+") and not line.startswith("+++ "):
            part.added += 1
        elif line.startswith("-") and not line.startswith("--- "):
            part.removed += 1
    for part in parts:
        part.text = "\n".join(part.lines)
        part.path = part.path or "(unnamed)"
    return [p for p in parts if p.text.strip()]


def file_pairs(left: str, right: str) -> list[tuple[str, FileDiff | None, FileDiff | None]]:
    """The files either diff changes, each with its part of the left and of the right diff (None: that side does
    not change it); files of the left diff first, in its order."""
    lefts, rights = ({p.path: p for p in split_diff(d)} for d in (left, right))
    paths = list(dict.fromkeys([*lefts, *rights]))
    return [(path, lefts.get(path), rights.get(path)) for path in paths]


def diff_of_diffs(left: str, right: str, *, left_name: str = "left", right_name: str = "right") -> str:
    """A unified diff from the left run's diff to the right run's: what the right run did differently."""
    return "\n".join(difflib.unified_diff(left.splitlines(), right.splitlines(), fromfile=left_name,
                                          tofile=right_name, lineterm=""))
