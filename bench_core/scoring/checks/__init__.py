"""Checks: what reads a run's evidence and returns verdicts (docs/ARCHITECTURE.md, "Scoring").

Registered checks (`CHECKS`, chosen by `bench score --judge`): `design-match` (`design.py`), `conclusion-reference`
(`conclusion.py`), `hidden-tests` (`hidden_tests.py`), `derived-tests` (`derived_tests.py`), `impossible-twin`
(`cheating.py`), `llm` and `execution-llm` (`llm.py`). Two checks run on every run, whichever are chosen: the
monitor (`monitor.py`, with its LLM check `llm_monitor.py` when LLMs are on) and the execution check
(`execution.py`: E). A new check is its module plus one import line below.
"""

from failatlas.bench_core.scoring.checks import (  # noqa: F401 - each registers its check
    cheating,
    conclusion,
    derived_tests,
    design,
    hidden_tests,
    llm,
)
from failatlas.bench_core.scoring.checks.base import (
    CHECKS,
    DETERMINISTIC_JUDGES,
    JUDGES,
    KIND_PRECEDENCE,
    VETO,
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

__all__ = ["CHECKS", "DETERMINISTIC_JUDGES", "JUDGES", "KIND_PRECEDENCE", "VETO", "Check", "CheckInput",
           "CheckOptions", "Checked", "Judge", "JudgeInput", "JudgeOptions", "create_checks", "create_judges"]
