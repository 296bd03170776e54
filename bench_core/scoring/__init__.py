"""The scoring stage: monitor, execution validator and registered judges over stored runs (tables in `schema.py`,
writes in `writes.py`), and the metrics over them. `run(store, ScoreParams) -> ScoreResult` is the stage.

Judges are found in `JUDGES` by name; the built-in ones register when their modules are imported here, so a new
judge is its module plus one import line below."""

from failatlas.bench_core.scoring import cheating, derived, llm_judges, offline_judges  # noqa: F401 - they register their judges
from failatlas.bench_core.scoring.api import ScoreParams, ScoreResult, run
from failatlas.bench_core.scoring.judges import (
    JUDGES,
    KIND_PRECEDENCE,
    Judge,
    JudgeInput,
    JudgeKind,
    JudgeOptions,
    Verdict,
    create_judges,
)

__all__ = ["JUDGES", "KIND_PRECEDENCE", "Judge", "JudgeInput", "JudgeKind", "JudgeOptions", "ScoreParams",
           "ScoreResult", "Verdict", "create_judges", "run"]
