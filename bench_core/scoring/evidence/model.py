"""The evidence record and what builders share while they build one run's evidence.

An `Evidence` is one thing the harness built or observed about a run, stored as a row of `evidence` (its summary,
`observed`) and kept in memory for the checks (`payload`: the re-run's capture, a hidden-test run, a recording).
`agent_code_ran` says whether the agent's code ran where it was made (the agent's own sandbox, a re-run of its
code): such evidence is what that code did, never what it says. `blame` says whose failure a failed build is
(`agent`: the agent's code broke it after it started; `harness`: ours).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from failatlas.bench_core.tasks.model import TaskSpec

STATUSES = ("ok", "failed", "not_applicable", "agent_fault", "crashed")
MAX_OBSERVED_CHARS = 64 * 1024


@dataclass
class Evidence:
    """One evidence record (module docstring). `id` is unique within the run (`rerun`, `rerun-counterfactual`,
    `hidden-tests`, ...); `kind` is the builder's; `tree`: the content digest of the tree it was built on, where
    it ran on one."""

    id: str
    kind: str
    status: str = "ok"
    agent_code_ran: bool = False
    tree: str | None = None
    blame: str | None = None
    observed: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    payload: Any = field(default=None, repr=False)

    def row(self) -> dict:
        """The stored form: `observed` bounded (a summary too large is cut, and says so)."""
        observed = json.dumps(self.observed, default=str, sort_keys=True)
        if len(observed) > MAX_OBSERVED_CHARS:
            observed = json.dumps({"cut": f"{len(observed)} characters; the first "
                                   f"{MAX_OBSERVED_CHARS // 2} kept", "start": observed[:MAX_OBSERVED_CHARS // 2]})
        return {"id": self.id, "kind": self.kind, "status": self.status, "agent_code_ran": self.agent_code_ran,
                "tree": self.tree, "blame": self.blame, "observed": observed,
                "notes": json.dumps(self.notes[:20], default=str)}


class EvidenceSet:
    """One run's evidence records, in the order they were built."""

    def __init__(self) -> None:
        self._items: dict[str, Evidence] = {}

    def add(self, evidence: Evidence) -> Evidence:
        if evidence.id in self._items:
            raise ValueError(f"evidence {evidence.id!r} is built twice")
        self._items[evidence.id] = evidence
        return evidence

    def get(self, evidence_id: str) -> Evidence | None:
        return self._items.get(evidence_id)

    def payload(self, evidence_id: str) -> Any:
        """The in-memory form of evidence `evidence_id` (None when it was not built)."""
        found = self._items.get(evidence_id)
        return found.payload if found is not None else None

    def ids(self, *wanted: str) -> list[str]:
        """Those of the ids `wanted` that were built, in build order (what a verdict lists as read)."""
        return [i for i in self._items if i in wanted]

    def __iter__(self) -> Iterator[Evidence]:
        return iter(self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, evidence_id: object) -> bool:
        return evidence_id in self._items


# the run's trace steps that evidence reads: the egress proxy's decisions, the harness's runs of a twin's check, and
# the files the agent wrote through the write_file tool
_STEPS_READ = "(kind IN ('network', 'check_run') OR (kind = 'tool_call' AND tool = 'write_file'))"


@dataclass(frozen=True)
class RunRows:
    """What scoring reads of one stored run, read through one connection (`read_run`): its inputs and outputs,
    its sandbox commands (every purpose, in order) and the trace steps evidence reads (`_STEPS_READ`, in order).
    A DuckDB connection costs about 17-44 ms of CPU to open (benchmarks/RESULTS.md), and a run's scoring read
    these through eight."""

    inputs: dict
    outputs: dict
    commands: list[dict]  # purpose, seq, command, exit_code, stdout_tail, stderr_tail, started_at, provenance
    steps: list[dict]  # kind, seq, ts, tool, arguments, content

    def agent_commands(self) -> list[dict]:
        return [c for c in self.commands if c["purpose"] == "agent"]

    def steps_of(self, kind: str, tool: str | None = None) -> list[dict]:
        return [s for s in self.steps if s["kind"] == kind and (tool is None or s["tool"] == tool)]


def read_run(store: Any, run_id: str) -> RunRows:
    """`RunRows` of run `run_id`, in one read-only connection; LookupError when the store holds no such run."""
    with store.read() as conn:
        row = conn.execute("SELECT inputs, outputs FROM runs WHERE id = ?", [run_id]).fetchone()
        if row is None:
            raise LookupError(f"no run {run_id!r} in {store.path}")
        cur = conn.execute("SELECT purpose, seq, command, exit_code, stdout_tail, stderr_tail, started_at, provenance"
                           " FROM sandbox_commands WHERE run_id = ? ORDER BY seq", [run_id])
        names = [d[0] for d in cur.description]
        commands = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
        cur = conn.execute(f"SELECT kind, seq, ts, tool, arguments, content FROM run_steps WHERE run_id = ?"
                           f" AND {_STEPS_READ} ORDER BY seq", [run_id])
        names = [d[0] for d in cur.description]
        steps = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    return RunRows(inputs=json.loads(row[0]) if row[0] else {}, outputs=json.loads(row[1]) if row[1] else {},
                   commands=commands, steps=steps)


def only_keys(rows: list[dict], *keys: str) -> list[dict]:
    """Each row with only `keys` (what a builder hands on, without the columns it does not read)."""
    return [{k: r[k] for k in keys} for r in rows]


@dataclass
class Context:
    """What the builders of one run share: the task (with the run's resources), its collected outputs, the store
    (read only), the scratch folder the trees are built in (removed when the evidence is built), the task's
    repository, the sandbox kind and spec every re-run and judge sandbox gets, a batch-wide memo of identical
    trees, which evidence the selected checks read (`wanted`: builder kinds), and the run's stored rows (`rows`,
    read once: `run_rows()`)."""

    task: TaskSpec
    outputs: dict
    run_id: str
    store: Any
    scratch: Path
    repo: Path | None
    sandbox: str
    spec: dict | None
    memo: dict | None
    wanted: frozenset[str]
    trees: Any = None
    rows: RunRows | None = None

    def run_rows(self) -> RunRows:
        """The run's stored rows, read from the store the first time they are asked for."""
        if self.rows is None:
            self.rows = read_run(self.store, self.run_id)
        return self.rows

    def starter(self, tree: Path) -> Callable[[dict[str, str]], Any]:
        """What a builder calls for a fresh sandbox of its own on `tree`: the re-run's kind and limits, with the
        given host folders mounted read-only. It carries its `tree`, the batch's `memo` and `where` (the sandbox's kind
        and settings, as text)."""
        from failatlas.bench_core.sandbox import SandboxSpec, create_sandbox

        spec, backend, run_id = self.spec, self.sandbox, self.run_id

        def start(read_only_inputs: dict[str, str]):
            fields = {**spec, "run_id": f"{run_id}-judge", "labels": {"failatlas.purpose": "judge"},
                      "read_only_inputs": dict(read_only_inputs)}
            return create_sandbox(backend, SandboxSpec(**fields), workspace=tree)

        # where a judge runs (kind, image or environment, network, data, limits): a batch reuses a judge's result
        # for an identical tree only where this is the same too
        where = json.dumps([backend, {k: v for k, v in (spec or {}).items() if k not in ("run_id", "labels")}],
                           sort_keys=True, default=str)
        start.tree, start.memo, start.where = tree, self.memo, where  # type: ignore[attr-defined]
        return start
