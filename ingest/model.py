"""The shapes ingest works with: phases, one raw insight occurrence, and the report of an import."""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from failatlas.ingest.kinds import UNKNOWN, check_kind

PHASES = ("design", "implementation", "execution", "conclusion", "monitor", "cheating", "other")
ORIGINS = ("run", "trail", "jsonl", "csv", "expbench", "inspect")
PROVENANCE_FIELDS = ("run_id", "task_id", "agent", "model", "benchmark", "paper_id")

_WS = re.compile(r"\s+")


def normalise_text(text: str) -> str:
    """Unicode NFC, whitespace runs collapsed to one space, ends stripped: the form insights are keyed on."""
    return _WS.sub(" ", unicodedata.normalize("NFC", text)).strip()


def text_hash(text: str, length: int = 16) -> str:
    return hashlib.sha256(normalise_text(text).encode()).hexdigest()[:length]


def insight_id(phase: str, text: str) -> str:
    """The id of an insight: the same phase and text (up to whitespace) always give the same id."""
    return hashlib.sha256(f"{phase}\n{normalise_text(text)}".encode()).hexdigest()[:16]


@dataclass
class RawInsight:
    """One occurrence of an insight: what was said, in which phase, and exactly where it came from.

    `key` identifies the occurrence within its origin (file + line + field, or run + field + index); the
    stored `source_key` adds the origin and the text's hash, so the same occurrence imported twice is one row.
    """

    phase: str
    text: str
    origin: str
    key: str
    extractor: str = "import"
    source_file: str | None = None
    source_line: int | None = None
    source_field: str | None = None
    label: str | None = None
    run_id: str | None = None
    task_id: str | None = None
    agent: str | None = None
    model: str | None = None
    benchmark: str | None = None
    paper_id: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    kind: str | None = None  # ingest.kinds; None: inferred from the text when stored (files, LLM extractor)
    object: str | None = None  # what failed: function, module, package, metric, variable

    def __post_init__(self) -> None:
        if self.phase not in PHASES:
            raise ValueError(f"unknown phase {self.phase!r}; expected one of {', '.join(PHASES)}")
        if self.origin not in ORIGINS:
            raise ValueError(f"unknown origin {self.origin!r}; expected one of {', '.join(ORIGINS)}")
        self.text = normalise_text(self.text)
        if not self.text:
            raise ValueError("an insight needs non-empty text")
        if self.kind is not None:
            check_kind(self.kind)

    @property
    def insight_id(self) -> str:
        return insight_id(self.phase, self.text)

    @property
    def source_key(self) -> str:
        return f"{self.origin}:{self.key}:{self.phase}:{text_hash(self.text)}"

    def row(self) -> tuple[Any, ...]:
        """Values in the column order of `insight_sources` (without imported_at)."""
        return (
            self.source_key,
            self.insight_id,
            self.origin,
            self.extractor,
            self.source_file,
            self.source_line,
            self.source_field,
            self.label,
            self.run_id,
            self.task_id,
            self.agent,
            self.model,
            self.benchmark,
            self.paper_id,
            json.dumps(self.detail, sort_keys=True, default=str) if self.detail else None,
            self.kind or UNKNOWN,
            self.object,
        )


SOURCE_COLUMNS = (
    "source_key",
    "insight_id",
    "origin",
    "extractor",
    "source_file",
    "source_line",
    "source_field",
    "label",
    "run_id",
    "task_id",
    "agent",
    "model",
    "benchmark",
    "paper_id",
    "detail",
    "kind",
    "object",
)


class FileReport(BaseModel):
    """What one file (or one extraction) contributed."""

    path: str
    format: str
    occurrences: int = 0
    new_occurrences: int = 0
    warnings: list[str] = Field(default_factory=list)


class FileIngestParams(BaseModel):
    """What `run_file` imports: files or folders, their format (`auto`: detected per file) and importer options
    (each importer takes the entries its `Options` declares, e.g. `text_field` for TRAIL, `text_column` for
    JSONL/CSV, `default_phase`, `inspect_pass_threshold`)."""

    model_config = ConfigDict(extra="forbid")

    paths: list[Path] = Field(min_length=1)
    format: str = "auto"
    options: dict[str, Any] = Field(default_factory=dict)


class RunsIngestParams(BaseModel):
    """What `run_runs` extracts: which runs (all when None), with which extractor, and whether runs the LLM
    extractor already covered are extracted again."""

    model_config = ConfigDict(extra="forbid")

    extractor: Literal["deterministic", "llm"] = "deterministic"
    run_ids: list[str] | None = None
    redo: bool = False
    rebuild: bool = Field(
        False, description="deterministic: replace every insight occurrence this extractor stored before (re-mine "
        "with the current extractor); occurrences stored before facets existed are replaced without it")


class IngestResult(BaseModel):
    """The outcome of one import or extraction: counts, new rows, warnings and skipped or failed units."""

    files: list[FileReport] = Field(default_factory=list)
    occurrences: int = 0
    new_occurrences: int = 0
    new_insights: int = 0
    warnings: list[str] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list)
    failed: list[str] = Field(default_factory=list)
    stage_run_id: str | None = None

    def summary(self) -> str:
        parts = [
            f"{self.occurrences} occurrence(s) read",
            f"{self.new_occurrences} new",
            f"{self.new_insights} new insight(s)",
        ]
        if self.warnings:
            parts.append(f"{len(self.warnings)} warning(s)")
        if self.skipped:
            parts.append(f"{len(self.skipped)} skipped")
        if self.failed:
            parts.append(f"{len(self.failed)} failed")
        return ", ".join(parts)


@dataclass
class RunRecord:
    """Everything scored about one run, read from the store."""

    run: dict[str, Any]
    judgements: list[dict[str, Any]] = field(default_factory=list)
    findings: list[dict[str, Any]] = field(default_factory=list)
    validation: dict[str, Any] | None = None

    @property
    def run_id(self) -> str:
        return self.run["id"]

    def provenance(self) -> dict[str, Any]:
        return {
            name: self.run.get(name) or None
            for name in ("task_id", "agent", "model", "benchmark", "paper_id")
        }
