"""The scoring stage: each run's evidence built (`evidence/`, the trust root), checks run on it (`checks/`, with the
per-benchmark E rules in `erules/`), their returns reduced (`settle.py`) and stored (`schema.py`, `writes.py`);
the metrics and reports over what is stored (`metrics.py`, `report.py`, `cheat_report.py`).
`run(store, ScoreParams) -> ScoreResult` is the stage.

Checks are found in `CHECKS` by name (`JUDGES` is the same registry under its first name); the built-in ones
register when `checks/__init__.py` imports their modules, so a new check is its module plus one import line there.
"""

from failatlas.bench_core.scoring.checks import (
    CHECKS,
    JUDGES,
    KIND_PRECEDENCE,
    Check,
    Checked,
    CheckInput,
    CheckOptions,
    Judge,
    JudgeInput,
    JudgeOptions,
    create_checks,
    create_judges,
)
from failatlas.bench_core.scoring.records import Finding, JudgeKind, Validation, Verdict
from failatlas.bench_core.scoring.stage import ScoredRun, ScoreParams, ScoreResult, run

__all__ = ["CHECKS", "JUDGES", "KIND_PRECEDENCE", "Check", "CheckInput", "CheckOptions", "Checked", "Finding",
           "Judge", "JudgeInput", "JudgeKind", "JudgeOptions", "ScoreParams", "ScoreResult", "ScoredRun", "Validation",
           "Verdict", "create_checks", "create_judges", "run"]
