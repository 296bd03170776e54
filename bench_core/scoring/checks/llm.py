"""LLM judges for design, implementation and conclusion, over any OpenAI-compatible endpoint (role `judge`).

- Replies are schema-checked (the client's parse-repair-retry loop); a reply that never parses is a judge failure,
  recorded with its error, never a score.
- Long diffs are split into chunks at file boundaries and EVERY chunk is judged (EXP-Bench's judge silently dropped
  chunks past the 15th); a step counts as implemented when any chunk implements it.
- The implementation judge is grounded: it gets the masked parts (the removed reference code, and the requirement
  steps that map to them, which alone it judges), the reference files' contents, and the diff. Its verdict is
  recorded beside the hidden tests', never instead of them: a deterministic check outranks an LLM opinion
  (`judges.judge_precedence`), and a disagreement is shown (`judges.disagreements`).
- Optional majority vote over `samples` independent samples (`sample_index` is part of the cache key); more than
  one sample needs a temperature above 0 (or omitted): identical requests would vote over identical answers.
- Every verdict records the model and the endpoint host (`verdict["llm"]`), never the key. An endpoint failure is
  recorded with `judges.infra_failure_reason` and, like a reply that never parsed, is retried by a plain re-score.
- With no endpoint configured, each judge is recorded as not run, with the reason.
Registered in `JUDGES` as `llm`, a judge of kind `llm` that judges every phase the task allows, and as
`execution-llm`, the judge of a clean re-run whose expected outcome is prose (EXP-Bench): it compares the end of the
re-run's output with the expected outcome, and the validator's `not_scored` becomes `passed` or `wrong_value` by
its verdict (`settle.settle_execution`); without an endpoint it is not run and E stays not scored, never passed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from failatlas.bench_core.scoring.checks.base import (
    JUDGES,
    Judge,
    JudgeInput,
    JudgeOptions,
    Verdict,
    infra_failure_reason,
)
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import ConfigError, FailAtlasError
from failatlas.core.llm.untrusted import SYSTEM_NOTE, untrusted

CHUNK_CHARS = 12_000
REFERENCE_CHARS = 20_000  # per reference file shown to the implementation judge; a cut is said in the prompt


class VariableVerdict(BaseModel):
    name: str
    role: Literal["constant", "independent", "dependent"]
    status: Literal["matched", "missing", "misclassified", "extraneous"]


class DesignReply(BaseModel):
    variables: list[VariableVerdict]
    score: int = Field(ge=0, le=100)
    error_analysis: str


class ConclusionReply(BaseModel):
    correct: bool
    error_analysis: str


class ExecutionReply(BaseModel):
    consistent: bool
    error_analysis: str


class StepVerdict(BaseModel):
    step: int = Field(ge=1)
    status: Literal["implemented", "partial", "missing"]


class ImplementationReply(BaseModel):
    steps: list[StepVerdict]
    error_analysis: str


SYSTEM = ("You are a strict reviewer of AI-research experiments. Judge only against the ground truth given. "
          "In error_analysis, state each error concretely in one sentence (what is wrong, not what is right); "
          "write an empty string when there is no error. " + SYSTEM_NOTE)


def split_diff(diff: str, limit: int = CHUNK_CHARS) -> list[str]:
    """Split a git diff into chunks of at most about `limit` characters at file boundaries (never drops text)."""
    files, current = [], []
    for line in diff.splitlines(keepends=True):
        if line.startswith("diff --git ") and current:
            files.append("".join(current))
            current = []
        current.append(line)
    if current:
        files.append("".join(current))
    chunks, buf = [], ""
    for f in files:
        pieces = [f[i:i + limit] for i in range(0, len(f), limit)] or [""]
        for piece in pieces:
            if buf and len(buf) + len(piece) > limit:
                chunks.append(buf)
                buf = ""
            buf += piece
    if buf:
        chunks.append(buf)
    return chunks


STEPS_HEADER = "Steps to judge:"
REMOVED_HEADER = "Removed code (the reference implementation of each masked part):"
REFERENCE_HEADER = "Reference files (their full contents, for context):"
DIFF_HEADER = "The agent's diff"


def check_samples(config, samples: int) -> None:  # noqa: ANN001
    """Refuse a vote over samples that cannot differ: more than one sample at temperature 0 sends identical
    requests and votes over identical answers at `samples` times the cost. Raises ConfigError."""
    if samples > 1 and config is not None and config.temperature == 0:
        raise ConfigError(
            f"--samples {samples} at temperature 0 would send {samples} identical requests and vote over identical "
            "answers",
            hint=f"set a temperature above 0 for role {config.role} (FAILATLAS_LLM_{config.role.upper()}_TEMPERATURE"
            "=0.7, or temperature in its config section; \"omit\" uses the server's default), or use --samples 1")


class Ground(BaseModel):
    """What grounds the implementation judge: the steps it judges (0-based indices into the requirements), the
    masked parts' names, and the prompt text that shows them with the reference code."""

    judged_steps: list[int]
    masked: list[str]
    preamble: str
    context: str


def _mentions(step: str, name: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", step) is not None


def _steps_for(steps: list[str], qualnames: list[str]) -> list[int]:
    """The steps that name a masked function (by qualified name, else by its last part); all when none does."""
    for names in (qualnames, [q.rsplit(".", 1)[-1] for q in qualnames]):
        hits = [i for i, step in enumerate(steps) if any(_mentions(step, n) for n in names)]
        if hits:
            return hits
    return list(range(len(steps)))


def _read(tree: Path, rel: str, limit: int) -> str:
    from failatlas.core.paths import inside

    try:
        text = inside(tree, rel, field="implementation.reference_files").read_text(errors="replace")
    except (FailAtlasError, OSError) as exc:
        return f"(could not be read: {exc})"
    if len(text) > limit:
        return f"(its first {limit} of {len(text)} characters)\n{text[:limit]}"
    return text


def implementation_ground(task: TaskSpec, tree: Path | None) -> Ground:
    """The masked parts of `task` with their reference code from `tree`, the steps that map to them, and the
    reference files' contents. Without a tree the judge gets the steps and says it has no reference code."""
    from failatlas.bench_core.prepare.leaks import function_targets
    from failatlas.bench_core.prepare.stubs import target_bodies

    steps = task.implementation.requirements
    masking = task.masking
    qualnames = [f.qualname for f in masking.functions]
    judged = _steps_for(steps, qualnames) if qualnames else list(range(len(steps)))
    removed: list[tuple[str, str]] = []
    if tree is not None:
        for rel, targets in function_targets(task).items():
            source = _read(tree, rel, 10 * REFERENCE_CHARS)
            try:
                bodies = target_bodies(source, targets, filename=rel)
            except (SyntaxError, ValueError) as exc:
                removed += [(f"{rel}::{t.qualname}", f"(not found in the reference: {exc})") for t in targets]
                continue
            removed += [(f"{rel}::{label}", body) for label, body in bodies.items()]
        removed += [(rel, _read(tree, rel, REFERENCE_CHARS)) for rel in masking.files]
    masked = [f"{f.path}::{f.qualname}" for f in masking.functions] + list(masking.files)
    if masked:
        preamble = ("The agent was given the repository with these parts removed (masked), and had to implement "
                    f"them again: {', '.join(masked)}. Everything else in the repository was left intact and is not "
                    "judged. Judge only the steps below, which are what the masked parts do.")
    else:
        preamble = "The agent had to implement the steps below in the repository."
    blocks = []
    if removed:
        blocks.append(REMOVED_HEADER + "".join(f"\n### {label}\n```\n{code}\n```" for label, code in removed))
    elif masked:
        blocks.append(REMOVED_HEADER + "\n(the reference tree is not available here: judge from the steps)")
    refs = task.implementation.reference_files
    if refs and tree is not None:
        blocks.append(REFERENCE_HEADER + "".join(
            f"\n### {rel}\n```\n{_read(tree, rel, REFERENCE_CHARS)}\n```" for rel in refs))
    elif refs:
        blocks.append(f"Reference files: {', '.join(refs)} (their contents are not available here)")
    return Ground(judged_steps=judged, masked=masked, preamble=preamble, context="\n\n".join(blocks))


class LLMJudges:
    """The three LLM judges bound to one client; call with a `JudgeInput` to get a verdict per phase."""

    name = "llm"
    kind = "llm"
    reads: tuple[str, ...] = ()

    def __init__(self, client, *, samples: int = 1, store=None) -> None:  # noqa: ANN001
        from failatlas.core.llm.redact import Redactor

        self.client = client
        self.samples = samples
        self.store = store
        config = getattr(client, "config", None)
        check_samples(config, samples)
        # a reply may echo the key (a proxy, a confused model): verdicts are stored, so they are redacted too
        self._redactor = Redactor([config.api_key(), *config.url_secrets()] if config is not None else [])
        self.llm = {"model": config.model, "endpoint": config.host} if config is not None else {}

    def _stamp(self, verdict: Verdict) -> Verdict:
        """The verdict with the model and endpoint host that gave it (never the key)."""
        if self.llm and verdict.status != "not_run":
            verdict.verdict = {**verdict.verdict, "llm": dict(self.llm)}
        return verdict

    def _ask(self, prompt: str, schema: type[BaseModel], purpose: str, run_id: str | None):
        from failatlas.core.llm import LLMEndpointError

        results = []
        for i in range(self.samples):
            try:
                r = self.client.structured([{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}],
                                           schema, sample_index=i, run_id=run_id, purpose=purpose)
            except LLMEndpointError as exc:
                return None, infra_failure_reason(exc)
            if not r.ok:
                return None, self._redactor.text(f"judge reply did not parse: {r.error}")
            results.append(type(r.value).model_validate(self._redactor.obj(r.value.model_dump())))
        return results, None

    def design(self, task: TaskSpec, outputs: dict, run_id: str | None = None) -> Verdict:
        if task.design is None:
            return Verdict("design", "design-llm", status="not_run", reason="the task has no ground-truth design")
        prompt = ("Ground-truth design (JSON):\n" + task.design.model_dump_json(indent=1)
                  + "\n\nAgent's design:\n" + untrusted(outputs.get("design_raw"))
                  + "\n\nFor every ground-truth variable say matched / missing / misclassified (wrong role); list the "
                  "agent's variables absent from the ground truth as extraneous. score: 0-100 overall.")
        replies, error = self._ask(prompt, DesignReply, "judge:design", run_id)
        if error:
            return Verdict("design", "design-llm", status="judge_failed", reason=error)
        score = sum(r.score for r in replies) / len(replies) / 100
        return Verdict("design", "design-llm", score=score, passed=score >= 0.8,
                       verdict={"samples": [r.model_dump() for r in replies]},
                       error_analysis=replies[0].error_analysis)

    def conclusion(self, task: TaskSpec, outputs: dict, run_id: str | None = None) -> Verdict:
        if not task.expected_conclusion:
            return Verdict("conclusion", "conclusion-llm", status="not_run", reason="no ground-truth conclusion")
        prompt = (f"Research question: {task.question}\n\nGround-truth conclusion:\n{task.expected_conclusion}\n\n"
                  f"Agent's conclusion:\n{untrusted(outputs.get('conclusion'))}\n\nIs the agent's conclusion correct "
                  "(same finding; numbers consistent with the ground truth)?")
        replies, error = self._ask(prompt, ConclusionReply, "judge:conclusion", run_id)
        if error:
            return Verdict("conclusion", "conclusion-llm", status="judge_failed", reason=error)
        votes = sum(r.correct for r in replies)
        passed = votes * 2 > len(replies)
        analysis = next((r.error_analysis for r in replies if r.correct == passed), replies[0].error_analysis)
        return Verdict("conclusion", "conclusion-llm", score=votes / len(replies), passed=passed,
                       verdict={"votes_correct": votes, "samples": len(replies)}, error_analysis=analysis)

    def implementation(self, task: TaskSpec, outputs: dict, run_id: str | None = None) -> Verdict:
        steps = task.implementation.requirements
        if not steps:
            return Verdict("implementation", "implementation-llm", status="not_run",
                           reason="the task has no requirement steps")
        ground = implementation_ground(task, self._reference_tree(task))
        judged = ground.judged_steps
        chunks = split_diff(outputs.get("diff") or "") or ["(the agent changed nothing)"]
        numbered = "\n".join(f"{n}. {steps[i]}" for n, i in enumerate(judged, 1))
        best: dict[int, str] = {}
        analyses = []
        rank = {"missing": 0, "partial": 1, "implemented": 2}
        for n, chunk in enumerate(chunks, 1):
            prompt = (f"{ground.preamble}\n\n{STEPS_HEADER}\n{numbered}\n\n{ground.context}"
                      f"\n\n{DIFF_HEADER} (part {n} of {len(chunks)}):\n{untrusted(chunk, limit=CHUNK_CHARS * 2)}"
                      "\n\nFor each step to judge, by its "
                      "number above, say whether THIS part of the diff implements it (implemented / partial / "
                      "missing), comparing with the removed reference code.")
            replies, error = self._ask(prompt, ImplementationReply, f"judge:implementation:{n}", run_id)
            if error:
                return Verdict("implementation", "implementation-llm", status="judge_failed",
                               reason=f"chunk {n}/{len(chunks)}: {error}")
            for r in replies:
                for s in r.steps:
                    if s.step > len(judged):
                        continue  # a step number the prompt did not give
                    if s.step not in best or rank[s.status] > rank[best[s.step]]:
                        best[s.step] = s.status
                analyses.append(r.error_analysis)
        done = sum(best.get(n) == "implemented" for n in range(1, len(judged) + 1))
        missing = [steps[i] for n, i in enumerate(judged, 1) if best.get(n) != "implemented"]
        analysis = "; ".join(f"step not implemented: {s}" for s in missing) or ""
        return Verdict("implementation", "implementation-llm", score=done / len(judged), passed=not missing,
                       verdict={"steps": {str(judged[n - 1] + 1): st for n, st in best.items()},
                                "judged_steps": [i + 1 for i in judged], "masked": ground.masked,
                                "chunks": len(chunks)},
                       error_analysis=analysis or " ".join(a for a in analyses if a))

    def _reference_tree(self, task: TaskSpec) -> Path | None:
        """The task's reference tree as scoring resolves it (the repository cache's checkout, else the bundled
        folder); None when it is not here."""
        from failatlas.bench_core.prepare.workspace import source_tree
        from failatlas.bench_core.runs.inputs import repository_of

        cached = None
        if self.store is not None:
            from failatlas.bench_core.repos import repository_for

            cached = repository_for(self.store, task)
        used = repository_of(task, cached=cached)
        if used is None:
            return None
        try:
            return source_tree(task, used.path)
        except FailAtlasError:
            return None

    def __call__(self, inp: JudgeInput) -> list[Verdict]:
        phases = inp.task.judgeable_phases
        verdicts = []
        if "design" in phases:
            verdicts.append(self.design(inp.task, inp.outputs, inp.run_id))
        if "implementation" in phases:
            verdicts.append(self.implementation(inp.task, inp.outputs, inp.run_id))
        if "conclusion" in phases:
            verdicts.append(self.conclusion(inp.task, inp.outputs, inp.run_id))
        return [self._stamp(v) for v in verdicts]


_PHASE_JUDGES = {"design": "design-llm", "implementation": "implementation-llm", "conclusion": "conclusion-llm"}


def awaits_judge(inp: JudgeInput) -> bool:
    """Whether the run's clean re-run waits for the execution judge (its expected outcome is prose)."""
    return inp.validation is not None and inp.validation.awaiting_judge


class ExecutionLLMJudge(LLMJudges):
    """Judges a clean re-run against an expected outcome written as prose: does the output show it?"""

    name = "execution-llm"
    reads = ("rerun",)

    def execution(self, task: TaskSpec, validation, run_id: str | None = None) -> Verdict:
        prompt = (f"Research question: {task.question}\n\nExpected outcome:\n{task.expected_conclusion}\n\n"
                  f"The experiment was re-run from the agent's code with `{validation.command}` (exit code "
                  f"{validation.exit_code}). The end of its output:\n{untrusted(validation.judge_output)}\n\n"
                  "Does this output show results consistent with the expected outcome (the same finding, numbers "
                  "where it gives numbers)? Output that shows no results at all is not consistent.")
        replies, error = self._ask(prompt, ExecutionReply, "judge:execution", run_id)
        if error:
            return Verdict("execution", self.name, status="judge_failed", reason=error)
        votes = sum(r.consistent for r in replies)
        passed = votes * 2 > len(replies)
        analysis = next((r.error_analysis for r in replies if r.consistent == passed), replies[0].error_analysis)
        return Verdict("execution", self.name, score=votes / len(replies), passed=passed,
                       verdict={"votes_consistent": votes, "samples": len(replies)}, error_analysis=analysis)

    def __call__(self, inp: JudgeInput) -> list[Verdict]:
        if not awaits_judge(inp):
            return []
        return [self._stamp(self.execution(inp.task, inp.validation, inp.run_id))]


class NotRunExecutionJudge:
    """Records that the execution judge did not run and why: the re-run stays not scored."""

    name = "execution-llm"
    kind = "llm"
    reads = ("rerun",)

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __call__(self, inp: JudgeInput) -> list[Verdict]:
        if not awaits_judge(inp):
            return []
        return [Verdict("execution", self.name, status="not_run", reason=self.reason)]


class NotRunLLMJudges:
    """Records, for each LLM-judged phase, that the judge did not run and why (no endpoint configured)."""

    name = "llm"
    kind = "llm"
    reads: tuple[str, ...] = ()

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __call__(self, inp: JudgeInput) -> list[Verdict]:
        return [Verdict(p, _PHASE_JUDGES[p], status="not_run", reason=self.reason)
                for p in inp.task.judgeable_phases if p in _PHASE_JUDGES]


@JUDGES.register("llm")
def llm_judges(options: JudgeOptions) -> Judge:
    """The LLM judges for role `judge`, or judges that record 'not run' with the reason when none is configured."""
    from failatlas.core.llm import client_for_role, not_configured_reason

    client = client_for_role("judge", options.store)
    if client is None:
        return NotRunLLMJudges(not_configured_reason("judge"))
    return LLMJudges(client, samples=options.samples, store=options.store)


@JUDGES.register("execution-llm")
def execution_llm_judge(options: JudgeOptions) -> Judge:
    """The execution judge for role `judge`, or one that records 'not run' with the reason."""
    from failatlas.core.llm import client_for_role, not_configured_reason

    client = client_for_role("judge", options.store)
    if client is None:
        return NotRunExecutionJudge(not_configured_reason("judge"))
    return ExecutionLLMJudge(client, samples=options.samples, store=options.store)


def llm_monitor_for(store):
    """The monitor's LLM check for role `monitor`, or a check that records 'not run' with the reason."""
    from failatlas.bench_core.scoring.checks.llm_monitor import llm_monitor_check
    from failatlas.core.llm import client_for_role, not_configured_reason

    client = client_for_role("monitor", store)
    if client is None:
        reason = not_configured_reason("monitor")
        return lambda task, commands, outputs, run_id=None: (
            [], Verdict("monitor", "monitor-llm", status="not_run", reason=reason, kind="llm"))
    return llm_monitor_check(client)
