"""Inspect AI evaluation logs (`.json`, and `.eval` zip archives): failed samples become insights.

A sample fails a scorer when the score's value, read as Inspect's `value_to_float` does ("C" 1, "P" 0.5,
"I" and "N" 0, booleans, numbers, "yes"/"no"), is below `inspect_pass_threshold` (default 1.0); dict- or
list-valued scores fail when any element does. The scorer's `explanation` is split into sentences, one insight
each; the phase is a phase named in the scorer's name (e.g. `design_judge` -> design), else `default_phase`.
A failed sample without an explanation is counted as skipped. A sample that errored (`sample.error`) gives
execution insights: its traceback reduced to error signatures.

Provenance: benchmark = the eval's task, task_id = the sample id, model = the eval's model,
agent = the solver, run_id = the eval's run_id. Occurrences are keyed by eval id, sample id, epoch and
scorer, not by file, so the `.json` and `.eval` forms of one log count once.
"""

from __future__ import annotations

import json
import re
import struct
import sys
import zipfile
from pathlib import Path
from typing import Any, BinaryIO

from failatlas.core.errors import InputError
from failatlas.core.importers import Loaded
from failatlas.ingest.importers.base import (
    INSIGHT_IMPORTERS,
    PhaseOption,
    Problems,
    as_text,
    head,
    load_json_lenient,
    read_text,
)
from failatlas.ingest.model import PHASES, RawInsight
from failatlas.ingest.sentences import error_sentences
from failatlas.ingest.signatures import error_signatures, mask_message


class InspectOptions(PhaseOption):
    """`inspect_pass_threshold`: a score below it fails the sample."""

    inspect_pass_threshold: float = 1.0

_LETTER_VALUES = {"C": 1.0, "P": 0.5, "I": 0.0, "N": 0.0}


def value_to_float(value: Any) -> float | None:
    """A scalar score value as a number, as Inspect reads it; None when it cannot be read."""
    if isinstance(value, bool | int | float):
        return float(value)
    if isinstance(value, str):
        if value in _LETTER_VALUES:
            return _LETTER_VALUES[value]
        lowered = value.strip().lower()
        if lowered in {"yes", "true", "correct"}:
            return 1.0
        if lowered in {"no", "false", "incorrect"}:
            return 0.0
        try:
            return float(lowered)
        except ValueError:
            return None
    return None


def _fails(value: Any, threshold: float) -> bool:
    if isinstance(value, dict):
        return any(_fails(v, threshold) for v in value.values())
    if isinstance(value, list):
        return any(_fails(v, threshold) for v in value)
    number = value_to_float(value)
    return number is not None and number < threshold


def _phase_of(scorer: str, default: str) -> str:
    tokens = re.split(r"[^a-z]+", scorer.lower())
    return next((p for p in PHASES if p in tokens), default)


_ZIP_ZSTANDARD = 93  # the compression Inspect writes .eval members with; Python's zipfile reads it from 3.14


def _read_member(archive: zipfile.ZipFile, handle: BinaryIO, info: zipfile.ZipInfo) -> bytes:
    if info.compress_type != _ZIP_ZSTANDARD or sys.version_info >= (3, 14):
        return archive.read(info)
    try:
        import zstandard
    except ImportError as exc:
        raise InputError(
            "the .eval archive is zstandard-compressed and the zstandard package is not installed",
            hint="pip install zstandard, or convert the log with `inspect log convert --to json`",
        ) from exc
    handle.seek(info.header_offset)
    local_header = handle.read(30)
    name_length, extra_length = struct.unpack("<HH", local_header[26:30])
    handle.seek(info.header_offset + 30 + name_length + extra_length)
    raw = handle.read(info.compress_size)
    return zstandard.ZstdDecompressor().decompress(raw, max_output_size=max(info.file_size, 1))


def _read_eval_zip(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    try:
        with open(path, "rb") as handle, zipfile.ZipFile(handle) as archive:
            members = {info.filename: info for info in archive.infolist()}
            header_name = "header.json" if "header.json" in members else "_journal/start.json"
            if header_name not in members:
                raise InputError("no header.json in the .eval archive", path=str(path))
            header = json.loads(_read_member(archive, handle, members[header_name]))
            samples = [
                json.loads(_read_member(archive, handle, members[name]))
                for name in sorted(members)
                if name.startswith("samples/") and name.endswith(".json")
            ]
    except zipfile.BadZipFile as exc:
        raise InputError(f"not a valid .eval archive: {exc}", path=str(path)) from exc
    except InputError as exc:
        if exc.path is None:
            raise InputError(str(exc), path=str(path), hint=exc.hint) from exc
        raise
    except (NotImplementedError, zipfile.LargeZipFile, OSError) as exc:
        raise InputError(
            f"cannot decompress the .eval archive: {exc}",
            path=str(path),
            hint="convert the log with `inspect log convert --to json`",
        ) from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"invalid JSON inside the .eval archive: {exc}", path=str(path)) from exc
    return header, samples


@INSIGHT_IMPORTERS.register("inspect")
class InspectImporter:
    """Inspect AI eval logs: `.json` (EvalLog with samples) and `.eval` (zip of header and samples)."""

    name = "inspect"
    description = "Inspect AI evaluation logs (.json, or .eval archives)"
    Options = InspectOptions
    suffixes = (".json", ".eval")
    sniff_order = 10

    def sniff(self, path: Path) -> bool:
        if not path.is_file():
            return False
        if path.suffix.lower() == ".eval":
            return True
        compact = "".join(head(path)[:4000].split())
        return path.suffix.lower() == ".json" and compact.startswith("{") and '"eval":{' in compact

    def load(self, path: Path, options: InspectOptions) -> Loaded[RawInsight]:
        path = path.resolve()
        parsed = Loaded(path=path, format=self.name)
        problems = Problems(path)
        if path.suffix.lower() == ".eval":
            header, samples = _read_eval_zip(path)
        else:
            header, warnings = load_json_lenient(path, read_text(path))
            parsed.warnings.extend(warnings)
            if not isinstance(header, dict):
                problems.add("expected an Inspect EvalLog object")
                problems.raise_if_any()
            samples = header.get("samples") or []
        spec = header.get("eval") if isinstance(header, dict) else None
        if not isinstance(spec, dict) or "task" not in spec:
            problems.add("no 'eval' object with a 'task': not an Inspect eval log", field="eval")
            problems.raise_if_any()
        if not samples:
            parsed.warnings.append(f"{path}: the log holds no samples (written with --no-log-samples?)")
        context = self._context(header, spec)
        for index, sample in enumerate(samples):
            if not isinstance(sample, dict) or "id" not in sample:
                problems.add("expected a sample object with an id", field=f"samples[{index}]")
                continue
            self._sample(path, index, sample, context, options, parsed, problems)
        problems.raise_if_any()
        return parsed

    @staticmethod
    def _context(header: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
        solver = as_text(spec.get("solver"))
        if solver is None:
            steps = (header.get("plan") or {}).get("steps") or []
            solver = "+".join(s.get("solver", "?") for s in steps if isinstance(s, dict)) or None
        return {
            "eval_id": as_text(spec.get("eval_id"))
            or as_text(spec.get("run_id"))
            or as_text(spec.get("task_id")),
            "provenance": {
                "run_id": as_text(spec.get("run_id")),
                "benchmark": as_text(spec.get("task")),
                "model": as_text(spec.get("model")),
                "agent": solver,
            },
        }

    def _sample(
        self,
        path: Path,
        index: int,
        sample: dict[str, Any],
        context: dict[str, Any],
        options: InspectOptions,
        parsed: Loaded[RawInsight],
        problems: Problems,
    ) -> None:
        sample_id, epoch = as_text(sample["id"]), sample.get("epoch", 1)
        base_key = f"{context['eval_id']}:{sample_id}:{epoch}"
        common = {
            "origin": "inspect",
            "source_file": str(path),
            "task_id": sample_id,
            **context["provenance"],
        }
        scores = sample.get("scores")
        if scores is None and isinstance(sample.get("score"), dict):
            scores = {"score": sample["score"]}
        if not isinstance(scores, dict):
            scores = {}
        for scorer, score in scores.items():
            if not isinstance(score, dict) or "value" not in score:
                problems.add(
                    "expected a score object with a value", field=f"samples[{index}].scores.{scorer}"
                )
                continue
            if not _fails(score["value"], options.inspect_pass_threshold):
                continue
            sentences = error_sentences(as_text(score.get("explanation")))
            if not sentences:
                parsed.skipped.append(
                    f"{path} samples[{index}] (id {sample_id}) failed {scorer} without explanation"
                )
            detail = {
                "epoch": epoch,
                "scorer": scorer,
                "value": score["value"],
                "answer": score.get("answer"),
                "target": _short(sample.get("target")),
            }
            for n, sentence in enumerate(sentences):
                parsed.records.append(
                    RawInsight(
                        phase=_phase_of(scorer, options.default_phase),
                        text=sentence,
                        key=f"{base_key}:{scorer}:{n}",
                        source_field=f"samples[{index}].scores.{scorer}.explanation",
                        detail={k: v for k, v in detail.items() if v is not None},
                        **common,
                    )
                )
        error = sample.get("error")
        if isinstance(error, dict) and (error.get("message") or error.get("traceback")):
            log = "\n".join(str(error.get(k) or "") for k in ("traceback", "message"))
            signatures = error_signatures(log)
            if not signatures:
                parsed.records.append(
                    RawInsight(
                        phase="execution",
                        text="The sample failed with an error before it could be scored",
                        key=f"{base_key}:error:0",
                        source_field=f"samples[{index}].error",
                        detail={"epoch": epoch, "message": mask_message(str(error.get("message") or ""))},
                        **common,
                    )
                )
            for n, signature in enumerate(signatures):
                parsed.records.append(
                    RawInsight(
                        phase="execution",
                        text=signature.text,
                        key=f"{base_key}:error:{n}",
                        source_field=f"samples[{index}].error",
                        detail={
                            "epoch": epoch,
                            "signature": signature.key,
                            **signature.detail,
                            "log_line": signature.line,
                        },
                        **common,
                    )
                )


def _short(value: Any, limit: int = 200) -> Any:
    if isinstance(value, str):
        return value[:limit]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [v[:limit] for v in value[:5]]
    return None
