"""Generic insight files: JSONL (or a JSON array) and CSV with a text column and optional phase and label.

Columns: `text` (required), `phase` (one of the phases, default `other`), `label`, and the provenance columns
run_id, task_id, agent, model, benchmark, paper_id. Other columns are kept in `detail`. The text, phase and
label columns can be renamed through `GenericOptions`.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from failatlas.core.importers import Loaded
from failatlas.ingest.importers.base import (
    INSIGHT_IMPORTERS,
    PhaseOption,
    Problems,
    as_text,
    head,
    json_lines,
    read_text,
)
from failatlas.ingest.model import PHASES, PROVENANCE_FIELDS, RawInsight


class GenericOptions(PhaseOption):
    """The columns holding each row's text, phase and human label."""

    text_column: str = "text"
    phase_column: str = "phase"
    label_column: str = "label"


def _row_insight(
    row: dict[str, Any],
    *,
    path: Path,
    origin: str,
    key: str,
    line: int | None,
    options: GenericOptions,
    problems: Problems,
    field_prefix: str = "",
) -> RawInsight | None:
    text = row.get(options.text_column)
    if text is None or (isinstance(text, str) and not text.strip()):
        problems.add("missing text", line=line, field=field_prefix + options.text_column)
        return None
    if not isinstance(text, str):
        problems.add(
            f"text must be a string, not {type(text).__name__}",
            line=line,
            field=field_prefix + options.text_column,
        )
        return None
    raw_phase = row.get(options.phase_column)
    phase = (as_text(raw_phase) or options.default_phase).lower()
    if phase not in PHASES:
        problems.add(
            f"unknown phase {raw_phase!r}; expected one of {', '.join(PHASES)}",
            line=line,
            field=field_prefix + options.phase_column,
        )
        return None
    used = {options.text_column, options.phase_column, options.label_column, *PROVENANCE_FIELDS}
    detail = {k: v for k, v in row.items() if k not in used and v not in (None, "")}
    provenance = {name: as_text(row.get(name)) for name in PROVENANCE_FIELDS}
    return RawInsight(
        phase=phase,
        text=text,
        origin=origin,
        key=key,
        source_file=str(path),
        source_line=line,
        source_field=options.text_column,
        label=as_text(row.get(options.label_column)),
        detail=detail,
        **provenance,
    )


@INSIGHT_IMPORTERS.register("jsonl")
class JsonlImporter:
    """One JSON object per line (blank lines ignored), or a `.json` file holding an array of objects."""

    name = "jsonl"
    description = "generic insights: JSON lines (or a JSON array) with text, phase, label columns"
    Options = GenericOptions
    sniff_order = 90
    suffixes = (".jsonl", ".ndjson", ".json")

    def sniff(self, path: Path) -> bool:
        return path.suffix.lower() in {".jsonl", ".ndjson", ".json"}

    def load(self, path: Path, options: GenericOptions) -> Loaded[RawInsight]:
        path = path.resolve()
        problems = Problems(path)
        parsed = Loaded(path=path, format=self.name)
        if path.suffix.lower() == ".json" and head(path).lstrip().startswith("["):
            self._parse_array(path, read_text(path), options, problems, parsed)
        else:
            for line_no, row in json_lines(path, problems):
                if not isinstance(row, dict):
                    problems.add(f"expected a JSON object, got {type(row).__name__}", line=line_no)
                    continue
                insight = _row_insight(
                    row,
                    path=path,
                    origin="jsonl",
                    key=f"{path}:{line_no}",
                    line=line_no,
                    options=options,
                    problems=problems,
                )
                if insight is not None:
                    parsed.records.append(insight)
        problems.raise_if_any()
        return parsed

    def _parse_array(
        self, path: Path, text: str, options: GenericOptions, problems: Problems, parsed: Loaded[RawInsight]
    ) -> None:
        from failatlas.ingest.importers.base import load_json_lenient

        rows, parsed.warnings = load_json_lenient(path, text)
        for index, row in enumerate(rows):
            if not isinstance(row, dict):
                problems.add(f"expected a JSON object, got {type(row).__name__}", field=f"[{index}]")
                continue
            insight = _row_insight(
                row,
                path=path,
                origin="jsonl",
                key=f"{path}:[{index}]",
                line=None,
                options=options,
                problems=problems,
                field_prefix=f"[{index}].",
            )
            if insight is not None:
                parsed.records.append(insight)


@INSIGHT_IMPORTERS.register("csv")
class CsvImporter:
    """A CSV file with a header row; `source_line` is the line where each record starts."""

    name = "csv"
    description = "generic insights: CSV/TSV with a header row and text, phase, label columns"
    Options = GenericOptions
    sniff_order = 80
    suffixes = (".csv", ".tsv")

    def sniff(self, path: Path) -> bool:
        return path.suffix.lower() in {".csv", ".tsv"}

    def load(self, path: Path, options: GenericOptions) -> Loaded[RawInsight]:
        path = path.resolve()
        text = read_text(path)
        problems = Problems(path)
        parsed = Loaded(path=path, format=self.name)
        delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
        try:
            header = [name.strip() for name in next(reader, [])]
        except csv.Error as exc:
            problems.add(f"unreadable CSV header: {exc}", line=1)
            problems.raise_if_any()
        if options.text_column not in header:
            problems.add(
                f"no column named '{options.text_column}' (columns: {', '.join(header) or 'none'})",
                line=1,
                field=options.text_column,
            )
            problems.raise_if_any()
        while True:
            start = reader.line_num + 1
            try:
                values = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:
                problems.add(f"malformed CSV: {exc}", line=start)
                continue
            if not values:
                continue  # a blank line
            if len(values) > len(header):
                problems.add(f"{len(values) - len(header)} more value(s) than header columns", line=start)
                continue
            row = {
                name: (value if value != "" else None) for name, value in zip(header, values, strict=False)
            }
            insight = _row_insight(
                row,
                path=path,
                origin="csv",
                key=f"{path}:{start}",
                line=start,
                options=options,
                problems=problems,
            )
            if insight is not None:
                parsed.records.append(insight)
        problems.raise_if_any()
        return parsed
