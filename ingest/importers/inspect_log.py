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

import io
import json
import re
import struct
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from failatlas.core.errors import InputError
from failatlas.core.importers import Loaded, check_json_elements, check_json_value, loads
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
MAX_MEMBER_BYTES = 128 * 2**20  # one member of an .eval archive (a sample), decompressed: 128 MiB
MAX_ARCHIVE_BYTES = 2 * 2**30  # all members read from one .eval archive, decompressed: 2 GiB
_CHUNK = 2**20


class _EvalArchive:
    """An .eval zip, its members read one at a time and decompressed in chunks within MAX_MEMBER_BYTES each and
    MAX_ARCHIVE_BYTES in all: a member over a cap is an InputError as soon as the cap is passed, whatever size
    it declares, and is never held whole."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.left = MAX_ARCHIVE_BYTES
        self.broken: tuple[type[Exception], ...] = (NotImplementedError, zipfile.BadZipFile, zipfile.LargeZipFile,
                                                    OSError, EOFError, ValueError)  # and zstandard's, once used

    def __enter__(self) -> _EvalArchive:
        try:
            self.handle = open(self.path, "rb")  # noqa: SIM115 (closed in __exit__)
        except OSError as exc:
            raise InputError(f"cannot read: {exc.strerror or exc}", path=str(self.path)) from exc
        try:
            self.archive = zipfile.ZipFile(self.handle)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError) as exc:
            self.handle.close()
            raise InputError(f"not a valid .eval archive: {exc}", path=str(self.path)) from exc
        self.members = {info.filename: info for info in self.archive.infolist()}
        return self

    def __exit__(self, *exc: object) -> None:
        self.archive.close()
        self.handle.close()

    def header(self) -> Any:
        name = "header.json" if "header.json" in self.members else "_journal/start.json"
        if name not in self.members:
            raise InputError("no header.json in the .eval archive", path=str(self.path))
        return self.json(name)

    def samples(self) -> Iterator[Any]:
        for name in sorted(self.members):
            if name.startswith("samples/") and name.endswith(".json"):
                yield self.json(name)

    def json(self, name: str) -> Any:
        """Member `name` parsed as JSON; InputError naming the archive and member for anything wrong with it."""
        try:
            data = self._read(self.members[name])
            check_json_elements(data, self.path, what=f"member {name}")
            value = loads(data.decode("utf-8"))
            check_json_value(value, self.path, field_prefix=name)
            return value
        except InputError:
            raise
        except RecursionError as exc:
            raise InputError(f"JSON nested too deeply to read in member {name}", path=str(self.path)) from exc
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InputError(f"invalid JSON in member {name}: {exc}", path=str(self.path)) from exc
        except self.broken as exc:
            raise InputError(f"cannot decompress member {name} of the .eval archive: {exc}", path=str(self.path),
                             hint="convert the log with `inspect log convert --to json`") from exc

    def _read(self, info: zipfile.ZipInfo) -> bytes:
        limit = min(MAX_MEMBER_BYTES, self.left)
        self._check(info, max(info.file_size, 0), limit)
        chunks: list[bytes] = []
        size = 0
        with self._open(info) as stream:
            while chunk := stream.read(_CHUNK):
                size += len(chunk)
                self._check(info, size, limit)
                chunks.append(chunk)
        self.left -= size
        return b"".join(chunks)

    def _check(self, info: zipfile.ZipInfo, size: int, limit: int) -> None:
        if size <= limit:
            return
        if limit < MAX_MEMBER_BYTES:
            raise InputError(f"the .eval archive decompresses to more than {MAX_ARCHIVE_BYTES:,} bytes "
                             f"(member {info.filename}); the limit for one archive", path=str(self.path))
        raise InputError(f"member {info.filename} decompresses to more than {MAX_MEMBER_BYTES:,} bytes, the limit "
                         "for one member (a zip bomb?)", path=str(self.path))

    def _open(self, info: zipfile.ZipInfo) -> BinaryIO:
        if info.compress_type != _ZIP_ZSTANDARD or sys.version_info >= (3, 14):
            return self.archive.open(info)
        try:
            import zstandard
        except ImportError as exc:
            raise InputError(
                "the .eval archive is zstandard-compressed and the zstandard package is not installed",
                path=str(self.path),
                hint="pip install zstandard, or convert the log with `inspect log convert --to json`",
            ) from exc
        self.broken = (*self.broken, zstandard.ZstdError)
        if info.compress_size > MAX_MEMBER_BYTES:
            self._check(info, info.compress_size, MAX_MEMBER_BYTES)
        self.handle.seek(info.header_offset)
        local_header = self.handle.read(30)
        name_length, extra_length = struct.unpack("<HH", local_header[26:30])
        self.handle.seek(info.header_offset + 30 + name_length + extra_length)
        raw = io.BytesIO(self.handle.read(info.compress_size))
        return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)


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
            with _EvalArchive(path) as archive:
                self._log(path, archive.header(), archive.samples(), options, parsed, problems)
        else:
            header, warnings = load_json_lenient(path, read_text(path))
            parsed.warnings.extend(warnings)
            if not isinstance(header, dict):
                problems.add("expected an Inspect EvalLog object")
                problems.raise_if_any()
            self._log(path, header, iter(header.get("samples") or []), options, parsed, problems)
        problems.raise_if_any()
        return parsed

    def _log(self, path: Path, header: Any, samples: Iterator[Any], options: InspectOptions,
             parsed: Loaded[RawInsight], problems: Problems) -> None:
        """Insights of every sample, read one at a time (an archive's are decompressed as they come)."""
        spec = header.get("eval") if isinstance(header, dict) else None
        if not isinstance(spec, dict) or "task" not in spec:
            problems.add("no 'eval' object with a 'task': not an Inspect eval log", field="eval")
            problems.raise_if_any()
        context = self._context(header, spec)
        index = -1
        for index, sample in enumerate(samples):
            if not isinstance(sample, dict) or "id" not in sample:
                problems.add("expected a sample object with an id", field=f"samples[{index}]")
                continue
            self._sample(path, index, sample, context, options, parsed, problems)
        if index < 0:
            parsed.warnings.append(f"{path}: the log holds no samples (written with --no-log-samples?)")

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
