"""One failure counted once: a run's failure that shows in several phases is counted in the earliest phase whose
evidence names it; the later phases' statements of it are its consequences, kept as evidence on that one
occurrence (`detail.consequences`), never counted again (docs/taxonomy.md, "One failure, one count").

Phases in the order a run goes through them: design, implementation, execution, conclusion, then the monitor, which
watches the whole run. A later statement is a consequence of an earlier one of the same run when it is of the same
kind and names the same object, or none (the re-run "failed with no error message" after the hidden tests named
the crash), or, for wrong values, a metric of the clean re-run after the hidden tests found wrong values in the
code that computes it. A conclusion's number that no passing re-run supports (the re-run did not pass) is a
consequence of the run's earliest implementation or execution failure: that failure left it unsupported.
"""

from __future__ import annotations

from collections.abc import Sequence

from failatlas.ingest.model import RawInsight

ORDER = ("design", "implementation", "execution", "conclusion", "monitor")
_METRIC_FIELD = "validations.outcome"
_RUN_PHASES = ("implementation", "execution")


def _rank(phase: str) -> int:
    return ORDER.index(phase) if phase in ORDER else len(ORDER)


def _is_consequence(later: RawInsight, earlier: RawInsight) -> bool:
    if later.detail.get("rerun_not_passed") and earlier.phase in _RUN_PHASES:
        return True  # the conclusion's numbers are unsupported because the run failed: that failure is the cause
    if later.kind != earlier.kind or later.kind in (None, "unknown") or _rank(later.phase) <= _rank(earlier.phase):
        return False
    if later.object is None or later.object == earlier.object:
        return True
    return (later.kind == "wrong_value" and earlier.phase == "implementation"
            and later.source_field == _METRIC_FIELD and "expected" in later.detail)


def fold_consequences(insights: Sequence[RawInsight]) -> list[RawInsight]:
    """One run's insights with each later-phase statement of a failure already named by an earlier phase folded
    into that earlier occurrence's `detail.consequences` (phase, statement, where it was read); order kept."""
    kept: list[RawInsight] = []
    for insight in sorted(insights, key=lambda i: _rank(i.phase)):
        cause = next((k for k in kept if _is_consequence(insight, k)), None)
        if cause is None:
            kept.append(insight)
            continue
        cause.detail = {**cause.detail, "consequences": [*cause.detail.get("consequences", []), {
            "phase": insight.phase, "text": insight.text, "source_field": insight.source_field}]}
    order = {id(i): n for n, i in enumerate(insights)}
    return sorted(kept, key=lambda i: order[id(i)])
