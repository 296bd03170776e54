"""EXP-Bench judge outputs: each error analysis split into sentences, one insight per error sentence.

Supported shapes: the judge's per-task file as EXP-Bench writes it
(`{paper_id}_task_index_{i}_iter_{k}_duration_{h}_eval_judge.json` under `.../{paper_id}/{agent}/{model}/`),
a JSON array of such objects, or JSONL with one per line. Fields read (phase in brackets):
`design_error_analysis` (design), `conclusion_error_analysis` (conclusion), `setup_error_analysis` or
`implementation_error_analysis` (implementation), `execution_error_analysis` (execution),
`setup_monitor_comprehensive_reason` or `monitor_error_analysis` (monitor). When `execution_success` is false,
`execution_message` is reduced to error signatures (execution).

Left out on purpose, and counted as skipped: the judge's own failures ("Error parsing response"), the
placeholder written into design/conclusion/setup when the monitor stopped judging (its reason is kept as a
monitor insight), and executions EXP-Bench itself skipped or could not start (infrastructure, not the agent).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from failatlas.core.importers import Loaded, NoOptions
from failatlas.ingest.importers.base import (
    INSIGHT_IMPORTERS,
    Problems,
    as_text,
    head,
    json_lines,
    load_json_lenient,
    read_text,
)
from failatlas.ingest.model import PROVENANCE_FIELDS, RawInsight
from failatlas.ingest.sentences import error_sentences
from failatlas.ingest.signatures import error_signatures, mask_message

FIELD_PHASES: dict[str, str] = {
    "design_error_analysis": "design",
    "conclusion_error_analysis": "conclusion",
    "implementation_error_analysis": "implementation",
    "setup_error_analysis": "implementation",
    "execution_error_analysis": "execution",
    "monitor_error_analysis": "monitor",
    "setup_monitor_comprehensive_reason": "monitor",
}
SCORE_FIELDS = (
    "design_score",
    "conclusion_score",
    "setup_score",
    "implementation_score",
    "execution_success",
)
JUDGE_FAILED = "Error parsing response"
MONITOR_PLACEHOLDER = "Agent performed forbidden operations. See setup_monitor_comprehensive_reason"
_INFRA_EXECUTION = re.compile(r"^(?:Skipped\.|Workspace dir does not exist|Docker command failed)")
_FILE_NAME = re.compile(
    r"^(?P<paper>[^_]+)_task_index_(?P<task>\d+)_iter_(?P<iter>\d+)_duration_(?P<duration>[\d.]+)_eval_judge\.json$"
)
_ALIASES = {"agent_name": "agent", "llm": "model", "llm_name": "model", "task_index": "task_id"}


def _provenance(path: Path, record: dict[str, Any]) -> tuple[dict[str, str | None], dict[str, Any]]:
    provenance: dict[str, str | None] = {name: None for name in PROVENANCE_FIELDS}
    detail: dict[str, Any] = {}
    match = _FILE_NAME.match(path.name)
    if match:
        provenance["paper_id"] = match.group("paper")
        provenance["task_id"] = f"{match.group('paper')}-{match.group('task')}"
        detail.update(task_index=int(match.group("task")), iteration=int(match.group("iter")))
        parents = path.parent.parts
        if len(parents) >= 3 and parents[-3] == match.group("paper"):
            provenance["agent"], provenance["model"] = parents[-2], parents[-1]
    for key, value in record.items():
        name = _ALIASES.get(key, key)
        if name in provenance and as_text(value) is not None:
            provenance[name] = as_text(value)
    provenance["benchmark"] = provenance["benchmark"] or "expbench"
    detail.update({k: record[k] for k in SCORE_FIELDS if k in record})
    return provenance, detail


def is_expbench_record(record: Any) -> bool:
    return isinstance(record, dict) and any(k in record for k in FIELD_PHASES)


@INSIGHT_IMPORTERS.register("expbench")
class ExpBenchImporter:
    """EXP-Bench judge output files (`*_eval_judge.json`, arrays of them, or JSONL)."""

    name = "expbench"
    description = "EXP-Bench judge outputs (*_eval_judge.json, arrays of them, or JSONL)"
    Options = NoOptions
    suffixes = (".json", ".jsonl")
    sniff_order = 30

    def sniff(self, path: Path) -> bool:
        if path.suffix.lower() not in {".json", ".jsonl"} or not path.is_file():
            return False
        text = head(path)
        return any(f'"{k}"' in text for k in FIELD_PHASES)

    def load(self, path: Path, options: NoOptions) -> Loaded[RawInsight]:
        path = path.resolve()
        parsed = Loaded(path=path, format=self.name)
        problems = Problems(path)
        records: list[tuple[int | None, str, Any]] = []
        if path.suffix.lower() == ".jsonl":
            records = [(line_no, str(line_no), row) for line_no, row in json_lines(path, problems)]
        else:
            document, warnings = load_json_lenient(path, read_text(path))
            parsed.warnings.extend(warnings)
            items = document if isinstance(document, list) else [document]
            records = [
                (None, f"[{i}]" if isinstance(document, list) else "", item) for i, item in enumerate(items)
            ]
        for line, where, record in records:
            if not is_expbench_record(record):
                problems.add(
                    "no *_error_analysis field: not an EXP-Bench judge output", line=line, field=where or None
                )
                continue
            self._record(path, line, where, record, parsed)
        problems.raise_if_any()
        return parsed

    def _record(
        self, path: Path, line: int | None, where: str, record: dict[str, Any], parsed: Loaded[RawInsight]
    ) -> None:
        provenance, base_detail = _provenance(path, record)
        label = f"{path}:{line}" if line is not None else f"{path}{' ' + where if where else ''}"
        pos = where or (str(line) if line is not None else "0")
        for field_name, phase in FIELD_PHASES.items():
            value = record.get(field_name)
            if value is None:
                continue
            text = as_text(value) or ""
            if text.startswith(JUDGE_FAILED):
                parsed.skipped.append(f"{label} {field_name}: the judge's response could not be parsed")
                continue
            if text.startswith(MONITOR_PLACEHOLDER) and phase != "monitor":
                parsed.skipped.append(f"{label} {field_name}: not judged, the monitor stopped the task")
                continue
            for index, sentence in enumerate(error_sentences(text)):
                parsed.records.append(
                    RawInsight(
                        phase=phase,
                        text=sentence,
                        origin="expbench",
                        key=f"{path}:{pos}:{field_name}:{index}",
                        source_file=str(path),
                        source_line=line,
                        source_field=field_name,
                        detail=dict(base_detail),
                        **provenance,
                    )
                )
        if record.get("execution_success") is False:
            message = as_text(record.get("execution_message")) or ""
            if _INFRA_EXECUTION.match(message):
                parsed.skipped.append(f"{label} execution_message: not run by EXP-Bench ({message[:80]})")
                return
            signatures = error_signatures(message)
            if not signatures:
                last = next((ln for ln in reversed(message.splitlines()) if ln.strip()), "")
                parsed.records.append(
                    RawInsight(
                        phase="execution",
                        text="Execution of the experiment script failed",
                        origin="expbench",
                        key=f"{path}:{pos}:execution_message:0",
                        source_file=str(path),
                        source_line=line,
                        source_field="execution_message",
                        detail={**base_detail, "message": mask_message(last)} if last else dict(base_detail),
                        **provenance,
                    )
                )
            for index, signature in enumerate(signatures):
                parsed.records.append(
                    RawInsight(
                        phase="execution",
                        text=signature.text,
                        origin="expbench",
                        key=f"{path}:{pos}:execution_message:{index}",
                        source_file=str(path),
                        source_line=line,
                        source_field="execution_message",
                        detail={
                            **base_detail,
                            "signature": signature.key,
                            **signature.detail,
                            "log_line": signature.line,
                        },
                        **provenance,
                    )
                )
