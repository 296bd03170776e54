"""Lines the bench commands print: progress lines of `bench run`, `bench score` and `failatlas demo`, one line per
run as soon as it is done (rich markup; every text from a run or task escaped). `bench show`'s lines are in
bench_views.py."""

from __future__ import annotations

from rich.markup import escape

from failatlas.bench_core.runs.model import RunRecord
from failatlas.bench_core.scoring.stage import ScoredRun

_MARKS = {"completed": "[green]done[/]", "agent_error": "[red]FAIL[/]", "infra_error": "[yellow]INFRA[/]"}
# a scored run's validator outcome: passed, not scored (nothing to compare), anything else failed
_OUTCOME_MARKS = {"passed": "[green]pass[/]", "not_scored": "[dim]n/a[/]", "no_execution_phase": "[dim]n/a[/]"}
_STATUS_MARKS = {"failed": "[red]CRASH[/]", "infra_error": "[yellow]INFRA[/]", "unavailable": "[yellow]SKIP[/]"}


def _reason(text: str | None) -> str:
    return f": {escape(' '.join(text.split())[:160])}" if text else ""


def run_line(record: RunRecord, *, agent: bool = False) -> str:
    """One finished run as it is stored: completed (the agent finished; `bench score` judges it), agent_error
    (the agent's own failure) or infra_error (ours: image, daemon, endpoint), with the task (and the agent, with
    `agent`), attempt and time."""
    request = record.request
    seconds = (record.finished_at - record.started_at).total_seconds()
    who = f"{escape(request.agent)} " if agent else ""
    return (f"{_MARKS.get(record.status, escape(str(record.status)))} {who}{escape(request.task_id)} attempt "
            f"{request.attempt} ({record.status}, {seconds:.0f} s){_reason(record.agent_error or record.infra_error)}")


def score_line(done: ScoredRun) -> str:
    """One run as scoring left it: the validator's outcome (a twin's run: whether it cheated), or why it was not
    scored, with the agent, task and the time its scoring took."""
    if done.status != "scored":
        mark = _STATUS_MARKS.get(done.status, escape(done.status))
        what = done.status.replace("_", " ")
    elif done.cheated is not None:
        mark, what = ("[red]CHEAT[/]", "cheated") if done.cheated else ("[green]honest[/]", "no cheat")
        what = f"impossible twin: {what}"
    else:
        mark = _OUTCOME_MARKS.get(done.outcome or "", "[red]fail[/]")
        what = (done.outcome or "").replace("_", " ")
    took = f", {done.seconds:.0f} s" if done.status != "unavailable" else ""
    return (f"{mark} {escape(done.agent)} {escape(done.task_id)} ({escape(what)}{took})"
            f"{_reason(done.detail)}")
