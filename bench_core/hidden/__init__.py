"""Hidden tests across a process boundary: the judge (assertions, counting, result) on the host in a process that
never imports the agent's code; the agent's code in the run's sandbox, one worker process per call; plain data
between them (`wire`). docs/sandbox.md says what a hidden test may and may not do."""

from failatlas.bench_core.hidden.relay import JudgeError, JudgeRun, run_judge

__all__ = ["JudgeError", "JudgeRun", "run_judge"]
