"""LLM judges for design, implementation and conclusion, over any OpenAI-compatible endpoint (role `judge`).

- Replies are schema-checked (the client's parse-repair-retry loop); a reply that never parses is a judge failure,
  recorded with its error, never a score.
- Long diffs are split into chunks at file boundaries and EVERY chunk is judged (EXP-Bench's judge silently dropped
  chunks past the 15th); a step counts as implemented when any chunk implements it.
- Optional majority vote over `samples` independent samples (`sample_index` is part of the cache key).
- With no endpoint configured, each judge is recorded as not run, with the reason.
Registered in `JUDGES` as `llm`, a judge of kind `llm` that judges every phase the task allows, and as
`execution-llm`, the judge of a clean re-run whose expected outcome is prose (EXP-Bench): it compares the end of the
re-run's output with the expected outcome, and the validator's `not_scored` becomes `passed` or `wrong_value` by
its verdict (`validator.settle`); without an endpoint it is not run and E stays not scored, never passed.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from failatlas.bench_core.scoring.judges import JUDGES, Judge, JudgeInput, JudgeOptions, Verdict
from failatlas.bench_core.tasks.model import TaskSpec

CHUNK_CHARS = 12_000


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
          "write an empty string when there is no error.")


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


class LLMJudges:
    """The three LLM judges bound to one client; call with a `JudgeInput` to get a verdict per phase."""

    name = "llm"
    kind = "llm"
    needs_sandbox = False

    def __init__(self, client, *, samples: int = 1) -> None:
        from failatlas.core.llm.redact import Redactor

        self.client = client
        self.samples = samples
        config = getattr(client, "config", None)
        # a reply may echo the key (a proxy, a confused model): verdicts are stored, so they are redacted too
        self._redactor = Redactor([config.api_key(), *config.url_secrets()] if config is not None else [])

    def _ask(self, prompt: str, schema: type[BaseModel], purpose: str, run_id: str | None):
        from failatlas.core.llm import LLMEndpointError

        results = []
        for i in range(self.samples):
            try:
                r = self.client.structured([{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}],
                                           schema, sample_index=i, run_id=run_id, purpose=purpose)
            except LLMEndpointError as exc:
                return None, f"endpoint failed (infrastructure): {exc}"
            if not r.ok:
                return None, self._redactor.text(f"judge reply did not parse: {r.error}")
            results.append(type(r.value).model_validate(self._redactor.obj(r.value.model_dump())))
        return results, None

    def design(self, task: TaskSpec, outputs: dict, run_id: str | None = None) -> Verdict:
        if task.design is None:
            return Verdict("design", "design-llm", status="not_run", reason="the task has no ground-truth design")
        prompt = ("Ground-truth design (JSON):\n" + task.design.model_dump_json(indent=1)
                  + "\n\nAgent's design:\n" + (outputs.get("design_raw") or "(none)")
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
                  f"Agent's conclusion:\n{outputs.get('conclusion') or '(none)'}\n\nIs the agent's conclusion correct "
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
        chunks = split_diff(outputs.get("diff") or "") or ["(the agent changed nothing)"]
        numbered = "\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1))
        best: dict[int, str] = {}
        analyses = []
        rank = {"missing": 0, "partial": 1, "implemented": 2}
        for n, chunk in enumerate(chunks, 1):
            refs = ", ".join(task.implementation.reference_files) or "(none)"
            prompt = (f"Requirement steps:\n{numbered}\n\nReference files: {refs}"
                      f"\n\nPart {n} of {len(chunks)} of the agent's diff:\n{chunk}\n\nFor each step say whether THIS "
                      "part implements it (implemented / partial / missing).")
            replies, error = self._ask(prompt, ImplementationReply, f"judge:implementation:{n}", run_id)
            if error:
                return Verdict("implementation", "implementation-llm", status="judge_failed",
                               reason=f"chunk {n}/{len(chunks)}: {error}")
            for r in replies:
                for s in r.steps:
                    if s.step not in best or rank[s.status] > rank[best[s.step]]:
                        best[s.step] = s.status
                analyses.append(r.error_analysis)
        done = sum(best.get(i) == "implemented" for i in range(1, len(steps) + 1))
        missing = [steps[i - 1] for i in range(1, len(steps) + 1) if best.get(i) != "implemented"]
        analysis = "; ".join(f"step not implemented: {s}" for s in missing) or ""
        return Verdict("implementation", "implementation-llm", score=done / len(steps), passed=not missing,
                       verdict={"steps": best, "chunks": len(chunks)},
                       error_analysis=analysis or " ".join(a for a in analyses if a))

    def __call__(self, inp: JudgeInput) -> list[Verdict]:
        phases = inp.task.judgeable_phases
        verdicts = []
        if "design" in phases:
            verdicts.append(self.design(inp.task, inp.outputs, inp.run_id))
        if "implementation" in phases:
            verdicts.append(self.implementation(inp.task, inp.outputs, inp.run_id))
        if "conclusion" in phases:
            verdicts.append(self.conclusion(inp.task, inp.outputs, inp.run_id))
        return verdicts


_PHASE_JUDGES = {"design": "design-llm", "implementation": "implementation-llm", "conclusion": "conclusion-llm"}


def awaits_judge(inp: JudgeInput) -> bool:
    """Whether the run's clean re-run waits for the execution judge (its expected outcome is prose)."""
    return inp.validation is not None and inp.validation.awaiting_judge


class ExecutionLLMJudge(LLMJudges):
    """Judges a clean re-run against an expected outcome written as prose: does the output show it?"""

    name = "execution-llm"

    def execution(self, task: TaskSpec, validation, run_id: str | None = None) -> Verdict:
        prompt = (f"Research question: {task.question}\n\nExpected outcome:\n{task.expected_conclusion}\n\n"
                  f"The experiment was re-run from the agent's code with `{validation.command}` (exit code "
                  f"{validation.exit_code}). The end of its output:\n{validation.judge_output}\n\n"
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
        return [self.execution(inp.task, inp.validation, inp.run_id)]


class NotRunExecutionJudge:
    """Records that the execution judge did not run and why: the re-run stays not scored."""

    name = "execution-llm"
    kind = "llm"
    needs_sandbox = False

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
    needs_sandbox = False

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
    return LLMJudges(client, samples=options.samples)


@JUDGES.register("execution-llm")
def execution_llm_judge(options: JudgeOptions) -> Judge:
    """The execution judge for role `judge`, or one that records 'not run' with the reason."""
    from failatlas.core.llm import client_for_role, not_configured_reason

    client = client_for_role("judge", options.store)
    if client is None:
        return NotRunExecutionJudge(not_configured_reason("judge"))
    return ExecutionLLMJudge(client, samples=options.samples)


def llm_monitor_for(store):
    """The monitor's LLM check for role `monitor`, or a check that records 'not run' with the reason."""
    from failatlas.bench_core.scoring.llm_monitor import llm_monitor_check
    from failatlas.core.llm import client_for_role, not_configured_reason

    client = client_for_role("monitor", store)
    if client is None:
        reason = not_configured_reason("monitor")
        return lambda task, commands, outputs, run_id=None: (
            [], Verdict("monitor", "monitor-llm", status="not_run", reason=reason, kind="llm"))
    return llm_monitor_check(client)
