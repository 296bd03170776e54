"""The task catalog in the store: save (upsert by stable id; the only writes of `bench_core.tasks`), get and list.

`save_tasks` writes one batch in one transaction (it joins an open `store.write()`). Re-saving a task updates it
in place and never duplicates it. Importing files is the `tasks.import` stage, `bench_core.tasks.stage.run`.
"""

from __future__ import annotations

import difflib
import hashlib
from collections import Counter
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from failatlas.bench_core.tasks.importers._common import validation_error, warning_code
from failatlas.bench_core.tasks.model import TaskKind, TaskSpec
from failatlas.bench_core.tasks.twins import TWIN_KEY
from failatlas.core.errors import ConfigError, InputError, NotFoundError
from failatlas.core.store import Store

GROUND_TRUTH_FIELDS = frozenset(
    {
        "design",
        "expected_conclusion",
        "implementation",
        "masking",
        "expected_results",
        "success",
        "checks",
        "extra",
    }
)
MASKED_FUNCTIONS = "$.masking.functions"  # JSON path of a spec's masked functions: their count is AutoExperiment's n
# where a variant valued on other data keeps what it was made from (`runs.data.VALUED_ON_KEY`; tasks sit below runs)
VARIANT_KEY = "expected_from_reference"
LIST_COLUMNS = ("id", "benchmark", "kind", "paper_id", "title", "question", "gpus", "n_warnings", "source")


class SaveReport(BaseModel):
    """What one `save_tasks` call did."""

    source: str | None = None
    inserted: list[str] = Field(default_factory=list)
    updated: list[str] = Field(default_factory=list)
    unchanged: list[str] = Field(default_factory=list)
    by_kind: dict[str, int] = Field(default_factory=dict)
    warnings: dict[str, int] = Field(default_factory=dict, description="warning code -> count")
    task_warnings: dict[str, list[str]] = Field(default_factory=dict, description="task id -> its warnings")

    @property
    def n_tasks(self) -> int:
        return len(self.inserted) + len(self.updated) + len(self.unchanged)

    @property
    def n_warnings(self) -> int:
        return sum(self.warnings.values())


class FileReport(SaveReport):
    format: str


def spec_hash(task: TaskSpec) -> str:
    """Content hash of a spec without `source`: re-importing a moved but unchanged file changes nothing."""
    return hashlib.sha256(task.model_dump_json(exclude={"source"}).encode()).hexdigest()[:16]


def _warning_counts(tasks: Iterable[TaskSpec]) -> dict[str, int]:
    return dict(Counter(warning_code(w) for t in tasks for w in t.warnings))


def save_tasks(store: Store, tasks: list[TaskSpec], *, source: str | None = None) -> SaveReport:
    """Upsert `tasks` by id in one transaction (all or nothing); returns which were new, changed or unchanged.

    Raises InputError if two tasks in the batch share an id.
    """
    ids = [t.id for t in tasks]
    dupes = sorted(i for i, n in Counter(ids).items() if n > 1)
    if dupes:
        raise InputError(f"the batch holds task id(s) twice: {', '.join(dupes[:5])}", path=source)
    report = SaveReport(
        source=source,
        by_kind=dict(Counter(t.kind.value for t in tasks)),
        warnings=_warning_counts(tasks),
        task_warnings={t.id: list(t.warnings) for t in tasks if t.warnings},
    )
    if not tasks:
        return report
    rows = {t.id: t for t in tasks}
    with store.write() as conn:
        existing = dict(
            conn.execute(
                "SELECT id, spec_hash FROM tasks WHERE id IN (SELECT unnest(?::VARCHAR[]))", [ids]
            ).fetchall()
        )
        new_rows, changed_rows = [], []
        for task_id, task in rows.items():
            digest = spec_hash(task)
            values = [
                task.benchmark,
                task.kind.value,
                task.paper.id,
                task.title,
                task.question,
                task.resources.gpus,
                len(task.warnings),
                task.model_dump_json(),
                task.source,
                digest,
            ]
            if task_id not in existing:
                new_rows.append([task_id, *values])
                report.inserted.append(task_id)
            elif existing[task_id] != digest:
                changed_rows.append([*values, task_id])
                report.updated.append(task_id)
            else:
                report.unchanged.append(task_id)
        if new_rows:
            conn.executemany(
                "INSERT INTO tasks (id, benchmark, kind, paper_id, title, question, gpus, n_warnings, spec,"
                " source, spec_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                new_rows,
            )
        if changed_rows:
            conn.executemany(
                "UPDATE tasks SET benchmark = ?, kind = ?, paper_id = ?, title = ?, question = ?, gpus = ?,"
                " n_warnings = ?, spec = ?, source = ?, spec_hash = ?, updated_at = current_timestamp"
                " WHERE id = ?",
                changed_rows,
            )
    return report


def get_task(store: Store, task_id: str) -> TaskSpec:
    """The task with this id; NotFoundError (with the nearest ids as a hint) if there is none, InputError naming
    the field when its stored spec is no longer valid (a path that leaves the repository, say)."""
    with store.read() as conn:
        row = conn.execute("SELECT spec FROM tasks WHERE id = ?", [task_id]).fetchone()
        if row is None:
            known = [r[0] for r in conn.execute("SELECT id FROM tasks").fetchall()]
    if row is not None:
        try:
            return TaskSpec.model_validate_json(row[0])
        except ValidationError as exc:  # stored before a check existed (e.g. a results file outside the repo)
            error = validation_error(exc, path=None, prefix="")
            raise InputError(f"task {task_id} in the catalog is refused: {error}",
                             hint="fix its task file and import it again") from exc
    close = difflib.get_close_matches(task_id, known, n=3, cutoff=0.6)
    if close:
        hint = "did you mean " + ", ".join(close) + "?"
    elif known:
        hint = "list the catalog with `failatlas tasks list`"
    else:
        hint = (
            "the catalog is empty: import tasks with `failatlas tasks import PATH` "
            "or `failatlas tasks import-mini`"
        )
    raise NotFoundError(f"no task '{task_id}' in the catalog", hint=hint)


def _kind_value(kind: str | TaskKind) -> str:
    if isinstance(kind, TaskKind):
        return kind.value
    for k in TaskKind:
        if kind.lower() in (k.value.lower(), k.name.lower()):
            return k.value
    raise ConfigError(
        f"unknown task kind '{kind}'", hint="use one of: " + ", ".join(k.value for k in TaskKind)
    )


def list_tasks(
    store: Store,
    *,
    benchmark: str | None = None,
    kind: str | TaskKind | None = None,
    paper: str | list[str] | None = None,
    masked: int | None = None,
    twins: bool = False,
    variants: bool = False,
) -> list[dict[str, Any]]:
    """Catalog rows (id, benchmark, kind, paper_id, title, question, gpus, n_warnings, source), filtered: by
    benchmark, task kind (EXP-Bench's T1/T2/T3, ...), paper id (one, or any of several) and `masked`, the number
    of masked functions (AutoExperiment's n). Impossible twins (`twins.py`) only when `twins`, and the variants
    `tasks validate --expected-from-reference` made (`task_validation/standin.py`) only when `variants`."""
    clauses, params = [], []
    if not twins:
        clauses.append(f"json_extract_string(spec, '$.extra.{TWIN_KEY}.of') IS NULL")
    if not variants:  # a validation's artefact, named by its id (`--task`): a paper's tasks are the benchmark's
        clauses.append(f"json_extract_string(spec, '$.extra.{VARIANT_KEY}.of') IS NULL")
    if benchmark is not None:
        clauses.append("lower(benchmark) = lower(?)")
        params.append(benchmark)
    if kind is not None:
        clauses.append("kind = ?")
        params.append(_kind_value(kind))
    if paper is not None:
        clauses.append("paper_id IN (SELECT unnest(?::VARCHAR[]))")
        params.append([paper] if isinstance(paper, str) else list(paper))
    if masked is not None:
        if masked < 0:
            raise ConfigError(f"the number of masked functions must be 0 or more, not {masked}")
        clauses.append(f"coalesce(json_array_length(spec, '{MASKED_FUNCTIONS}'), 0) = ?")
        params.append(masked)
    where = (" WHERE " + " AND ".join(clauses)) if clauses else ""
    return store.query_dicts(
        f"SELECT {', '.join(LIST_COLUMNS)}, coalesce(json_extract_string(spec, '{MASKED_FUNCTIONS}[*].qualname'),"
        f" []::VARCHAR[]) AS masked_functions FROM tasks{where} ORDER BY benchmark, paper_id, kind, id", params
    )


def no_match_hint(store: Store, *, paper: str | list[str] | None = None) -> str:
    """What to try when a selection matched no task: the nearest paper ids when a paper was named."""
    wanted = [paper] if isinstance(paper, str) else list(paper or [])
    known = [r[0] for r in store.query("SELECT DISTINCT paper_id FROM tasks WHERE paper_id IS NOT NULL")]
    unknown = [p for p in wanted if p not in known]
    if unknown:
        close = sorted({c for p in unknown for c in [*difflib.get_close_matches(p, known, n=3, cutoff=0.6),
                                                      *sorted(k for k in known if k.startswith(p))[:3]]})
        if close:
            return f"no task of paper {', '.join(unknown)}; did you mean {', '.join(close[:6])}?"
        like = f"; papers look like {', '.join(sorted(known)[:2])}" if known else ""
        return f"no task of paper {', '.join(unknown)}{like} (`failatlas tasks list` lists them)"
    return "import tasks first (`failatlas tasks import-mini`) or check the filters"


def public_view(task: TaskSpec, *, ground_truth: bool = False) -> dict[str, Any]:
    """The spec as a JSON-ready dict; ground truth (design, conclusion, implementation, masking, expected
    results, success criterion, source extras) only when `ground_truth`."""
    exclude = None if ground_truth else set(GROUND_TRUTH_FIELDS)
    return task.model_dump(mode="json", exclude=exclude)
