"""TRAIL (Patronus AI, arXiv 2505.08638) human error annotations: per-trace JSON files, flattened JSONL.

Each annotated error is one insight occurrence: its `description` (or, with `text_field="evidence"`, the
quoted trace text) is the text and its normalised `category` the label. Phase: TRAIL annotates general
agent traces (GAIA, SWE-bench), whose errors do not fall into an experiment's phases, so every TRAIL
insight gets phase `other`, with TRAIL's own mid- and top-level categories in `detail`. That keeps all
TRAIL errors in one population for clustering and for evaluation against the labels.

An occurrence is keyed by (trace_id, error index, text field), not by file, so importing the JSONL and the
annotation folder adds each error once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from failatlas.core.importers import Loaded
from failatlas.ingest.importers.base import (
    INSIGHT_IMPORTERS,
    Problems,
    as_text,
    head,
    json_lines,
    load_json_lenient,
    read_text,
)
from failatlas.ingest.model import RawInsight


class TrailOptions(BaseModel):
    """`text_field`: which field of an annotated error is the insight's text."""

    model_config = ConfigDict(extra="forbid")

    text_field: Literal["description", "evidence"] = "description"

# TRAIL's taxonomy: leaf category -> (mid-level, top-level), as in the dataset's flattened JSONL.
TAXONOMY: dict[str, tuple[str, str]] = {
    "Formatting Errors": ("Output Generation", "Reasoning Errors"),
    "Instruction Non-compliance": ("Output Generation", "Reasoning Errors"),
    "Tool-related": ("Hallucinations", "Reasoning Errors"),
    "Language-only": ("Hallucinations", "Reasoning Errors"),
    "Tool Selection Errors": ("Decision Making", "Reasoning Errors"),
    "Incorrect Problem Identification": ("Decision Making", "Reasoning Errors"),
    "Poor Information Retrieval": ("Information Processing", "Reasoning Errors"),
    "Tool Output Misinterpretation": ("Information Processing", "Reasoning Errors"),
    "Goal Deviation": ("Task Management", "Planning and Coordination Errors"),
    "Task Orchestration": ("Task Management", "Planning and Coordination Errors"),
    "Resource Abuse": ("Context Management", "Planning and Coordination Errors"),
    "Context Handling Failures": ("Context Management", "Planning and Coordination Errors"),
    "Environment Setup Errors": ("Configuration", "System Execution Errors"),
    "Tool Definition Issues": ("Configuration", "System Execution Errors"),
    "Resource Not Found": ("API Issues", "System Execution Errors"),
    "Authentication Errors": ("API Issues", "System Execution Errors"),
    "Service Errors": ("API Issues", "System Execution Errors"),
    "Rate Limiting": ("API Issues", "System Execution Errors"),
    "Timeout Issues": ("Resource Management", "System Execution Errors"),
    "Resource Exhaustion": ("Resource Management", "System Execution Errors"),
}
# Spelling variants annotators used (lower-cased) -> the taxonomy's leaf name.
ALIASES: dict[str, str] = {
    "context handling failure": "Context Handling Failures",
    "tool selection": "Tool Selection Errors",
    "tool selection error": "Tool Selection Errors",
    "task orchestration errors": "Task Orchestration",
    "task orchestration error": "Task Orchestration",
    "formatting error": "Formatting Errors",
    "environment setup error": "Environment Setup Errors",
    "authentication error": "Authentication Errors",
    "service error": "Service Errors",
    "timeout issue": "Timeout Issues",
}
_BY_LOWER = {name.lower(): name for name in TAXONOMY}
_KNOWN_KEYS = {"category", "location", "evidence", "description", "impact"}


def normalise_category(raw: str | None) -> str | None:
    """TRAIL's leaf category for an annotator's spelling ("Goal deviation" -> "Goal Deviation")."""
    if raw is None:
        return None
    cleaned = " ".join(raw.split())
    lower = cleaned.lower()
    return _BY_LOWER.get(lower) or ALIASES.get(lower) or cleaned or None


def _text(error: dict[str, Any], text_field: str) -> tuple[str | None, str]:
    """The insight text and the field it came from, falling back to the other field when one is empty."""
    other = "evidence" if text_field == "description" else "description"
    for name in (text_field, other):
        value = error.get(name)
        if isinstance(value, str) and value.strip():
            return value, name
    return None, text_field


@INSIGHT_IMPORTERS.register("trail")
class TrailImporter:
    """TRAIL annotation files (`{"trace_id", "errors": [...]}`) and `trail_errors_*.jsonl`."""

    name = "trail"
    description = "TRAIL human error annotations (per-trace JSON files or the flattened JSONL)"
    Options = TrailOptions
    suffixes = (".json", ".jsonl")
    sniff_order = 20

    def sniff(self, path: Path) -> bool:
        suffix = path.suffix.lower()
        if suffix not in {".json", ".jsonl"} or not path.is_file():
            return False
        text = head(path)
        if suffix == ".jsonl":
            first = next((ln for ln in text.splitlines() if ln.strip()), "")
            try:
                row = json.loads(first)
            except (ValueError, RecursionError):  # a JSONDecodeError, or an integer past 4,300 digits
                return False
            return isinstance(row, dict) and {"trace_id", "category"} <= row.keys()
        if suffix == ".json":
            compact = "".join(text.split())
            return compact.startswith('{"errors":[') or (
                compact.startswith('{"trace_id"') and '"errors":[' in compact
            )
        return False

    def load(self, path: Path, options: TrailOptions) -> Loaded[RawInsight]:
        path = path.resolve()
        parsed = Loaded(path=path, format=self.name)
        problems = Problems(path)
        if path.suffix.lower() == ".jsonl":
            self._parse_jsonl(path, options, parsed, problems)
        else:
            self._parse_annotation(path, options, parsed, problems)
        problems.raise_if_any()
        return parsed

    def _insight(
        self,
        error: dict[str, Any],
        *,
        trace_id: str,
        index: int,
        split: str | None,
        path: Path,
        line: int | None,
        field_prefix: str,
        options: TrailOptions,
        parsed: Loaded[RawInsight],
        problems: Problems,
        mid: str | None = None,
        top: str | None = None,
    ) -> None:
        text, used_field = _text(error, options.text_field)
        where = f"{path}:{line}" if line is not None else f"{path} {field_prefix.rstrip('.')}"
        if text is None:
            problems.add("error has neither description nor evidence", line=line, field=field_prefix or None)
            return
        if used_field != options.text_field:
            parsed.warnings.append(f"{where}: empty {options.text_field}; used {used_field} instead")
        raw_category = error.get("category_raw", error.get("category"))
        label = normalise_category(as_text(error.get("category")))
        if label is None:
            problems.add("missing category", line=line, field=f"{field_prefix}category")
            return
        if label not in TAXONOMY:
            parsed.warnings.append(f"{where}: category {label!r} is not in TRAIL's taxonomy; kept as given")
        known_mid, known_top = TAXONOMY.get(label, (None, None))
        detail: dict[str, Any] = {
            "trace_id": trace_id,
            "error_idx": index,
            "category_raw": raw_category,
            "category_mid": mid or known_mid,
            "category_top": top or known_top,
            "impact": error.get("impact"),
            "location": error.get("location"),
            "text_field": used_field,
        }
        extra = {
            k: v
            for k, v in error.items()
            if k not in _KNOWN_KEYS
            and k not in {"split", "trace_id", "error_idx", "category_raw", "category_mid", "category_top"}
        }
        if extra:
            detail["extra_fields"] = extra
        parsed.records.append(
            RawInsight(
                phase="other",
                text=text,
                origin="trail",
                key=f"{trace_id}:{index}:{used_field}",
                source_file=str(path),
                source_line=line,
                source_field=f"{field_prefix}{used_field}",
                label=label,
                task_id=trace_id,
                benchmark=f"trail-{split.lower()}" if split else "trail",
                detail={k: v for k, v in detail.items() if v is not None},
            )
        )

    def _parse_jsonl(
        self, path: Path, options: TrailOptions, parsed: Loaded[RawInsight], problems: Problems
    ) -> None:
        for line_no, row in json_lines(path, problems):
            if not isinstance(row, dict):
                problems.add("expected a JSON object", line=line_no)
                continue
            trace_id, index = as_text(row.get("trace_id")), row.get("error_idx")
            if trace_id is None or not isinstance(index, int):
                problems.add("a TRAIL row needs trace_id and an integer error_idx", line=line_no)
                continue
            self._insight(
                row,
                trace_id=trace_id,
                index=index,
                split=as_text(row.get("split")),
                path=path,
                line=line_no,
                field_prefix="",
                options=options,
                parsed=parsed,
                problems=problems,
                mid=as_text(row.get("category_mid")),
                top=as_text(row.get("category_top")),
            )

    def _parse_annotation(
        self, path: Path, options: TrailOptions, parsed: Loaded[RawInsight], problems: Problems
    ) -> None:
        document, warnings = load_json_lenient(path, read_text(path))
        parsed.warnings.extend(warnings)
        if not isinstance(document, dict) or not isinstance(document.get("errors"), list):
            problems.add("expected an object with an 'errors' list (a TRAIL annotation file)")
            return
        trace_id = as_text(document.get("trace_id")) or path.stem
        folder = path.parent.name
        split = folder.removeprefix("annotations_").upper() if folder.startswith("annotations_") else None
        for index, error in enumerate(document["errors"]):
            if not isinstance(error, dict):
                problems.add("expected an object", field=f"errors[{index}]")
                continue
            self._insight(
                error,
                trace_id=trace_id,
                index=index,
                split=split,
                path=path,
                line=None,
                field_prefix=f"errors[{index}].",
                options=options,
                parsed=parsed,
                problems=problems,
            )
