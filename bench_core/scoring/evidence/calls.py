"""Every call counts (issue 50): the masked functions' calls in E's own re-run, checked against the reference on the
run's own inputs, which calls being decided only after the run (docs/metrics.md, "Every call of E's re-run").

While E's re-run of the task's command runs on the constructed tree, the recorder keeps, per masked function and
process, a reservoir of its calls drawn from the operating system's randomness (`hidden/recorder.py`: every call has
the same chance, SAMPLE_SLOTS of them kept whole), so the run cannot know which of its calls will be looked at.
After the run, scoring draws DRAW of the kept calls of each function with a fresh secret (stored with the evidence)
and replays the *reference's* definition on each drawn call's inputs, in a sandbox holding the reference tree
(trusted code: the agent's code ran only inside its natural run); a call whose recorded result differs from the
reference's on its own inputs fails I (`checks/derived_tests.py`). Only functions the reference itself reproduces
from their inputs are checked so (`Recording.unreproducible_targets`: a function reading state the replay cannot
carry, a random stream, is left to the derived replay and the in-run agreement, and the evidence says so).
"""

from __future__ import annotations

import hashlib
import json
import random
import secrets
import tempfile
from pathlib import Path

from failatlas.bench_core.hidden.observe import Watch
from failatlas.bench_core.hidden.record import replay, replay_timeout, test_id
from failatlas.bench_core.hidden.wire import WireError, to_plain
from failatlas.bench_core.scoring.evidence.model import Context, Evidence, EvidenceSet
from failatlas.core.errors import AgentFaultError, InfrastructureError

DRAW = 64  # calls drawn per function: a function wrong on a share p of its calls escapes with probability <= (1-p)^64
MEMO_CALLS = 200_000  # outcomes a scoring batch keeps (each a key and at most 300 characters)
# how a call ends when the replay's circumstances end it (hidden/relay.py's error replies, a skipped test): such an
# outcome is not kept for other runs, whose replay may not meet them
CIRCUMSTANCES = frozenset({"Timeout", "OutOfMemory", "NoReply", "ReplyTooLarge", "MalformedReply", "WorkerUnavailable",
                           "Skipped"})


def draw(sample: list[dict], targets: list[int], secret: str, k: int = DRAW) -> dict[int, list[dict]]:
    """Per target, `k` of its kept calls (all when fewer), chosen by `secret`: the same secret draws the same calls."""
    rng = random.Random(secret)
    out = {}
    for t in targets:
        pool = sorted((c for c in sample if c["t"] == t), key=lambda c: (c["pid"], c["n"]))
        out[t] = rng.sample(pool, min(k, len(pool)))
    return out


def as_cases(drawn: dict[int, list[dict]], names: list[str]) -> list[dict]:
    """The drawn calls as replay cases: the run's inputs, and the run's results as what the reference must give."""
    cases = []
    for t, calls in drawn.items():
        for c in calls:
            case = {k: c[k] for k in ("t", "module", "root", "qualname", "kind", "args", "kwargs", "state", "self",
                                      "ret", "perturbed")}
            mutated = c.get("mutated")
            if not (isinstance(mutated, dict) and all(isinstance(mutated.get(k), dict) for k in ("args", "kwargs"))):
                mutated = None
            label = f"{t}.{names[t]}" if names.count(names[t]) > 1 else names[t]
            case.update(after=c.get("after") if c["kind"] == "method" else None, mutated=mutated, number=c["n"],
                        id=f"{label}-run-{c['pid']}-{c['n']}".replace("<", "_").replace(">", "_"),
                        duration=float(c["duration"]) if isinstance(c.get("duration"), int | float) else 0.0)
            cases.append(case)
    return cases


def case_key(case: dict, reference_key: str) -> str | None:
    """What decides a drawn call's outcome: the reference and where it is replayed (`reference_key`: the recording's
    key, the task, the sandbox's kind and settings) and the call as recorded (inputs, state, results, what it
    changed); not its id, its number in the run or how long it took. Every value is written exactly as the wire
    carries it (an array or tensor as its dtype, shape and bytes: never a printed summary, which would give two
    calls that differ inside a long array, or two tensors of one shape, the same key); None for a call holding
    anything else, whose outcome is then not shared."""
    body = {k: v for k, v in case.items() if k not in ("id", "number", "duration")}
    try:
        text = json.dumps([reference_key, to_plain(body)], sort_keys=True, allow_nan=True)
    except (WireError, TypeError, ValueError):
        return None
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def outcomes_of(run) -> tuple[dict[str, str | None], set[str]]:
    """A replay's outcome per case id (None: agreed; else the difference's text), and the ids whose outcome a
    comparison settled: not those the replay's circumstances ended (`CIRCUMSTANCES`), which another run's replay
    may not meet."""
    outcomes: dict[str, str | None] = {}
    settled = set()
    for name in run.passed:
        if test_id(name) is not None:
            outcomes[test_id(name)] = None
            settled.add(test_id(name))
    for failure in run.failures:
        case_id = test_id(failure["test"])
        if case_id is not None:
            outcomes[case_id] = failure.get("message") or failure.get("exception") or ""
            if failure.get("exception") not in CIRCUMSTANCES:
                settled.add(case_id)
    return outcomes, settled


def remember(memo: dict, outcomes: list[tuple[tuple, str | None]], limit: int = MEMO_CALLS) -> bool:
    """Keep one replay's settled outcomes (key, None or the difference's first 300 characters) in the batch `memo`,
    unless that would hold more than `limit` of them; whether they were kept."""
    count = memo.get(("calls-case", "count"), 0)
    if count + len(outcomes) > limit:
        return False
    memo.update((key, text if text is None else text[:300]) for key, text in outcomes)
    memo[("calls-case", "count")] = count + len(outcomes)
    return True


def check_calls(drawn: dict[int, list[dict]], names: list[str], start, timeout_s: float, *,
                memo: dict | None = None, reference_key: str | None = None) -> dict[int, dict]:
    """Replay the reference on each drawn call's inputs (in a sandbox `start()` opens on the reference tree, only
    when some call is not known yet): per target, how many were checked and agreed, and the first difference in
    words. `memo` (the scoring batch's) keeps each call's outcome under `case_key`: the replay runs trusted code
    only (the reference, which this check requires to reproduce its calls from their inputs alone), so a call
    recorded the same way by another run of the batch has the same outcome and is not replayed again."""
    cases = as_cases(drawn, names)
    out = {t: {"checked": len(calls), "agreed": 0, "differed": 0, "first_difference": None}
           for t, calls in drawn.items()}
    if not cases:
        return out
    keys = {c["id"]: ("calls-case", key) for c in cases if (key := case_key(c, reference_key)) is not None} \
        if memo is not None and reference_key else {}
    outcomes: dict[str, str | None] = {}  # case id -> None (agreed) or the difference's text
    for case in cases:
        key = keys.get(case["id"])
        if key is not None and key in memo:
            outcomes[case["id"]] = memo[key]
    todo = [c for c in cases if c["id"] not in outcomes]
    problems: list[str] = []
    if todo:
        with start() as sandbox:
            run = replay(todo, sandbox, timeout_s=replay_timeout(todo, timeout_s))
        problems = run.problems
        found, settled = outcomes_of(run)
        outcomes.update(found)
        if memo is not None and not problems:  # a replay cut short says nothing for later runs
            remember(memo, [(keys[i], found[i]) for i in settled if i in keys])
    for case in cases:
        if case["id"] not in outcomes:
            continue
        row = out[case["t"]]
        text = outcomes[case["id"]]
        if text is None:
            row["agreed"] += 1
            continue
        row["differed"] += 1
        if row["first_difference"] is None:
            row["first_difference"] = f"call {case['number']}: {text}"[:300]
    if problems:
        for row in out.values():
            row.setdefault("problems", problems[:3])
    return out


def drawn_calls(task, reference: Path | None, recording, observed, names: list[str], starter,
                secret: str | None = None, *, memo: dict | None = None, reference_key: str | None = None) -> dict:
    """One scoring's check of a run's calls (module docstring): with a fresh `secret` (or the one given), draw from
    `observed`'s sample and replay the reference tree `reference` (through `starter`, a sandbox starter on a tree) on
    each drawn call's inputs. `recording` is the reference's (None: nothing checked). The evidence's payload."""
    from failatlas.bench_core.prepare import reference_workspace

    unchecked: dict[str, str] = {}
    targets = []
    for t, name in enumerate(names):
        if recording is None or reference is None:
            unchecked[name] = "no recording of the reference"
        elif t in recording.unreproducible_targets:
            unchecked[name] = "the reference does not reproduce its calls from their inputs alone"
        elif not any(c["t"] == t and not c["perturbed"] for c in recording.cases):
            unchecked[name] = "no call of the reference's could be recorded and reproduced"
        else:
            targets.append(t)
    secret = secret or secrets.token_hex(16)
    drawn = draw(observed.sample, targets, secret)
    result: dict[int, dict] = {}
    if any(drawn.values()):
        with tempfile.TemporaryDirectory(prefix="failatlas-calls-") as tmp:

            def start():
                tree = Path(reference_workspace(task, Path(tmp) / "reference", repo=reference))
                return starter(tree)({})

            try:
                result = check_calls(drawn, names, start, max(60.0, float(task.run.timeout_s)), memo=memo,
                                     reference_key=reference_key)
            except AgentFaultError as exc:  # only the reference ran here: a harness failure
                raise InfrastructureError(f"replaying the reference on the run's calls failed: {exc}") from exc
    population = {names[t]: n for t, n in observed.population.items() if 0 <= t < len(names)}
    rows = {names[t]: {**row, "kept": sum(1 for c in observed.sample if c["t"] == t),
                       "kept_too_large": observed.sample_skipped.get(t, 0),
                       "calls": population.get(names[t], 0)} for t, row in result.items()}
    missing = {names[t]: n for t, n in observed.sample_missing.items() if 0 <= t < len(names)}
    return {"secret": secret, "draw": DRAW, "functions": rows, "unchecked": unchecked,
            "sampled_calls": len(observed.sample), "missing": missing, "foreign": observed.sample_foreign}


def build_calls(ctx: Context, found: EvidenceSet) -> Evidence | None:
    """The `calls` evidence (module docstring): on a constructed tree whose re-run was observed with a sample."""
    from failatlas.bench_core.scoring.evidence.recording import cache_folder, key_of, load_recording, reference_tree

    given = found.payload("rerun")
    watch: Watch | None = found.payload("recording")
    if given is None or given.script or watch is None or not watch.sample:
        return None
    observed = given.done.observed
    if observed is None:
        return None
    names = [t["qualname"] for t in watch.targets]
    reference = reference_tree(ctx.task, ctx.repo)
    key = key_of(ctx.task, reference, ctx.memo) if reference else None
    recording = load_recording(cache_folder(ctx.store), key) if key else None
    # what else a replay's outcome may depend on: the task (its timeout) and where the replay runs (sandbox kind,
    # image or environment, limits), as the re-run's own memo keys them
    settings = {k: v for k, v in (ctx.spec or {}).items() if k not in ("run_id", "labels")}
    where = json.dumps([key, ctx.task.id, ctx.sandbox, settings], sort_keys=True, default=str) if key else None
    payload = drawn_calls(ctx.task, reference, recording, observed, names, ctx.starter, memo=ctx.memo,
                          reference_key=where)
    return Evidence("calls", "calls", agent_code_ran=True, payload=payload, observed=payload,
                    tree=found.get("rerun").tree,
                    status="ok" if payload["functions"] or payload["missing"] or payload["foreign"]
                    else "not_applicable",
                    notes=[f"{name}: {why}" for name, why in payload["unchecked"].items()][:10])


def summary(evidence: dict) -> list[str]:
    """One sentence per function the drawn calls show wrong, or whose sample the run removed (what the derived-tests
    check adds to its verdict)."""
    out = [f"In E's re-run, {n} kept call(s) of {name} were gone from the run's sample when it finished: the run "
           "removed what would have been checked" for name, n in (evidence.get("missing") or {}).items() if n]
    if evidence.get("foreign"):
        out.append(f"In E's re-run, {evidence['foreign']} file(s) in the sample of its calls were not written by the "
                   "recorder: the run wrote into what is checked")
    for name, row in (evidence.get("functions") or {}).items():
        if row.get("differed"):
            out.append(f"In E's re-run, {name} gave other results than the reference on its own inputs in "
                       f"{row['differed']} of {row['checked']} calls drawn at random after the run (of "
                       f"{row.get('calls') or row.get('kept')} made): {row.get('first_difference')}")
    return out
