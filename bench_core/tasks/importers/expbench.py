"""EXP-Bench importer: one task file per paper -> one `TaskSpec` per entry of its `questions` list.

Documented format (EXP-Bench, arXiv 2505.24785; files `outputs/logs/<venue>/<id>/<id>_complete_final*.json`):
`{"questions": [task, ...], "main_takeaways": [...], "follow_up_work_ideas": [...]}`. A task carries
`question`, `method`, `expected_outcome` (ground-truth conclusion), `design_complexity` (ground-truth design:
`constant_variables` / `independent_variables` / `dependent_variables`), `requirements` (implementation steps
citing `/workspace/file.py:10-22`), `agent_instructions`, `usage_instructions`, `source` (reference scripts)
and `masked_source` (files removed before hand-off), plus LLM-written notes (`design_ambiguity`, ...). The
kind: T1 has `masked_source`; T2 has `source` and `mode` ("How can you ..."; its `source` is masked); T3 has
`no_answer` (no implementation found: design and conclusion only, `method` is the implementation truth).

The paper id comes from the file name (`18277.json`, `18277_complete_final_sonnet37.json`); venue and year
from a parent folder named like `iclr2024`. A task's id is `expbench-<paper>-<hash of the question>`:
reordering `questions` changes no id. Nothing is dropped: every field the model has no place for goes to
`extra`, and so do the file's other top-level keys (under `extra["file"]`).

Defects of the real files are repaired where the intent is clear and always reported as a warning on the task,
`code: message`:
- `missing-design`: no `design_complexity` (18277); `alt-design`: design taken from
  `experiment_design_complexity`;
- `wrapped-field`: a dict field wrapped in itself (`{"design_complexity": {...}}`), with any sibling keys (a
  `design_ambiguity` object) moved out; `design-extra-keys`: keys other than the three roles in a design;
- `fenced-json`: a dict or list field sent as a (markdown-fenced) JSON string; `unparsed-field`: text that is
  not;
- `method-dict`: a structured `method`, rendered as text for the agent and kept whole in
  `extra["method_structured"]`;
- `relative-path`: `workspace/x` or `x` instead of `/workspace/x`; `unmaskable-path`: a path outside
  `/workspace` (`/tmp/repos/...`): not masked, listed in `extra["unmaskable_paths"]`;
- `unknown-keys`: stray keys (`reproduction_steps`, `related_tables`, ...), kept in `extra`;
- `kind-*`, `missing-*`, `bad-field-type`, `duplicate-question`: the rarer variants named by their code.
The NeurIPS half (`<id>_complete_final_with_difficulty_level.json`) adds per-task `paper_id` (it wins over the
file name, with a `paper-id-mismatch` warning if they differ) and `difficulty_level` (kept in `extra`).
A file that is not JSON, has no `questions` list, or has a task without a `question` raises `InputError`.

Repositories and GPU needs come from EXP-Bench's paper index (`<venue>_index.jsonl`, JSON lines of `id`,
`title`, `code_url`, `reproduce_difficulty`), the only place that maps a paper to its repository: option `index`
(`failatlas tasks import --index FILE`), else a file named `<venue folder>*_index.jsonl` beside the venue folder
(`iclr2024_index.jsonl` beside `iclr2024/`), in which case every task says so (`index: ...`). A task of a paper in
the index gets `repository.url` = `code_url`, `paper.title`/`paper.url` where the file has none,
`resources.gpus` (the rule: `_expbench_fields.gpu_need`; `gpus-guessed`, `gpus-unknown`) and the whole
`reproduce_difficulty` in `extra`; a paper the index lacks (or no index at all) gets `no-repository` and still
imports. A malformed index line (not JSON, not an object, no `id`, a repeated `id`, a `code_url` that is not a
network repository URL) raises `InputError` naming the index file and line. T1 and T2 tasks get
`run.agent_script` (EXP-Bench's execution check re-runs the agent's reproduce script); T3 tasks have nothing to run.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from failatlas.bench_core.tasks.importers._common import (
    TASK_IMPORTERS,
    Warnings,
    jsonable,
    load_json,
    unfence_json,
    validation_error,
)
from failatlas.bench_core.tasks.importers._expbench_fields import (
    NOTE_KEYS,
    VENUE_FOLDER,
    PaperIndex,
    coerce_dict,
    design_spec,
    gpu_need,
    method_text,
    paper_index,
    repo_paths,
    requirement_steps,
    text_field,
    unique,
)
from failatlas.bench_core.tasks.model import (
    Benchmark,
    ImplementationTruth,
    Masking,
    PaperMeta,
    RepoRef,
    Resources,
    RunSpec,
    TaskKind,
    TaskSpec,
    stable_id,
)
from failatlas.core.errors import InputError
from failatlas.core.importers import Loaded, open_input

FORMAT = "expbench"
FINAL_MARK = "_complete_final"
SNIFF_BYTES = 200_000

TEXT_KEYS = ("mode", "no_answer", "usage_instructions", "subsection_source")
ALT_DESIGN_KEYS = ("experiment_design_complexity",)

VENUES = {"iclr": "ICLR", "neurips": "NeurIPS", "icml": "ICML", "acl": "ACL", "cvpr": "CVPR"}
RUNNABLE_KINDS = (TaskKind.T1, TaskKind.T2)  # the agent writes a reproduce script, re-run by the execution check


def sniff(path: Path) -> bool:
    """True when `path` is a JSON file holding an object with a `questions` list (a cheap textual check)."""
    if path.suffix.lower() != ".json":
        return False
    try:
        with open_input(path) as handle:
            head = handle.read(SNIFF_BYTES).decode("utf-8", errors="replace")
    except (OSError, InputError):
        return False
    return '"questions"' in head and head.lstrip().startswith("{")


def paper_id_from_name(path: Path) -> str:
    """`18277.json` -> `18277`; `18277_complete_final_sonnet37.json` -> `18277`."""
    stem = path.name[: -len(path.suffix)] if path.suffix else path.name
    stem = stem.split(FINAL_MARK, 1)[0] or stem
    return re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-._") or "paper"


def venue_from_path(path: Path) -> tuple[str | None, int | None]:
    """(`ICLR`, 2024) from a parent folder named `iclr2024` (or `neurips_2024`); (None, None) otherwise."""
    for folder in path.resolve().parents:
        match = VENUE_FOLDER.fullmatch(folder.name)
        if match:
            name = match.group(1).lower()
            return VENUES.get(name, name.upper()), int(match.group(2))
    return None, None


# -- the paper index ---------------------------------------------------------------------------------------
def _apply_index(draft: dict[str, Any], w: Warnings, index: PaperIndex | None) -> dict[str, Any]:
    """Repository, GPU needs and difficulty of the draft's paper from `index`, into the draft; returns what the
    paper's metadata takes from it (title, page)."""
    if index is None:
        w.add("no-repository", "no paper index beside the task folder (a <venue>_index.jsonl): the repository "
                               "is unknown; pass --index FILE")
        return {}
    if index.found:
        w.add("index", f"repository and GPU needs from {index.path} (found beside the task folder)")
    paper_id = draft["_paper"]
    entry = index.papers.get(paper_id)
    if entry is None:
        w.add("no-repository", f"paper {paper_id} is not in the index {index.path}: the repository is unknown")
        return {}
    draft["extra"]["index"] = {"file": str(index.path.resolve()), "line": entry.line}
    draft["extra"]["reproduce_difficulty"] = jsonable(entry.reproduce_difficulty)
    draft["resources"] = Resources(gpus=gpu_need(entry.reproduce_difficulty, w))
    if entry.code_url is None:
        w.add("no-repository", f"the index names no code_url for paper {paper_id}: the repository is unknown")
    else:
        draft["repository"] = RepoRef(url=entry.code_url)
    return {"title": entry.title, "url": entry.page}


def load_expbench(path: str | Path, index: Path | None = None) -> list[TaskSpec]:
    """Every task of one EXP-Bench file, validated, with its paper's repository and GPU needs from the paper
    index (`index`, else the one beside the venue folder; see the module's docstring). InputError naming the file
    (or index file), line and field if malformed."""
    path = Path(path)
    data = load_json(path)
    if not isinstance(data, dict):
        raise InputError("the top level must be an object with a 'questions' list", path=str(path))
    if "questions" not in data:
        raise InputError(
            "missing: an EXP-Bench file lists its tasks under 'questions'", path=str(path), field="questions"
        )
    questions = data["questions"]
    if isinstance(questions, str):
        try:
            questions = unfence_json(questions)
        except ValueError as exc:
            raise InputError("must be a list of tasks", path=str(path), field="questions") from exc
    if not isinstance(questions, list):
        raise InputError(
            f"must be a list of tasks, not {type(questions).__name__}", path=str(path), field="questions"
        )

    index_used = paper_index(path, index)
    paper_id = paper_id_from_name(path)
    venue, year = venue_from_path(path)
    paper = PaperMeta(id=paper_id, venue=venue, year=year)
    file_extra = jsonable({k: v for k, v in data.items() if k != "questions"})

    drafts = [_draft(raw, i, path) for i, raw in enumerate(questions)]
    for draft in drafts:
        own = draft["_paper"]
        if own is not None and own != paper_id:
            draft["_warnings"].add(
                "paper-id-mismatch",
                f"the task names paper {own!r}, the file name {paper_id!r}; {own!r} is used",
            )
        draft["_paper"] = own or paper_id
    _assign_ids(drafts)
    tasks = []
    for i, draft in enumerate(drafts):
        warnings: Warnings = draft.pop("_warnings")
        from_index = _apply_index(draft, warnings, index_used)
        task_paper = paper.model_copy(update={"id": draft.pop("_paper"),
                                              **{k: v for k, v in from_index.items() if v is not None}})
        if file_extra:
            draft["extra"]["file"] = file_extra
        try:
            tasks.append(
                TaskSpec(
                    benchmark=Benchmark.EXPBENCH.value,
                    paper=task_paper,
                    source=str(path.resolve()),
                    warnings=warnings.items,
                    **draft,
                )
            )
        except ValidationError as exc:
            raise validation_error(exc, path=path, prefix=f"questions[{i}]") from exc
    return tasks


# -- one task ----------------------------------------------------------------------------------------------
def _draft(raw: Any, index: int, path: Path) -> dict[str, Any]:
    where = f"questions[{index}]"
    w = Warnings()
    if isinstance(raw, str):
        try:
            raw = unfence_json(raw)
        except ValueError as exc:
            raise InputError("must be an object", path=str(path), field=where) from exc
        w.add("fenced-json", "the task itself arrived as a JSON string; parsed")
    if not isinstance(raw, dict):
        raise InputError(f"must be an object, not {type(raw).__name__}", path=str(path), field=where)
    q = dict(raw)
    extra: dict[str, Any] = {"question_index": index}

    question = q.pop("question", None)
    if question is None:
        raise InputError(
            "missing: every task needs its research question", path=str(path), field=f"{where}.question"
        )
    if not isinstance(question, str) or not question.strip():
        raise InputError("must be non-empty text", path=str(path), field=f"{where}.question")

    own_paper = q.pop("paper_id", None)
    if own_paper is not None and not (isinstance(own_paper, (str, int)) and str(own_paper).strip()):
        w.add("bad-field-type", f"paper_id {own_paper!r} is not an id; the file name's id is used")
        extra["paper_id"] = jsonable(own_paper)
        own_paper = None
    method = method_text(q.pop("method", None), w, extra)
    conclusion = text_field("expected_outcome", q.pop("expected_outcome", None), w, extra)
    if conclusion is None:
        w.add("missing-conclusion", "no expected_outcome: the conclusion cannot be judged")
    instructions = text_field("agent_instructions", q.pop("agent_instructions", None), w, extra)
    requirements = requirement_steps(q.pop("requirements", None), w, extra)

    for key in NOTE_KEYS:
        if key in q:
            value = coerce_dict(key, q.pop(key), w, extra, reserved=q)
            extra[key] = value if value is not None else extra.get(key)

    design_raw = q.pop("design_complexity", None)
    design_key = "design_complexity"
    if design_raw is None:
        alt = next((k for k in ALT_DESIGN_KEYS if k in q), None)
        if alt is not None:
            design_raw, design_key = q.pop(alt), alt
            w.add("alt-design", f"no design_complexity; the design was taken from {alt}")
        else:
            w.add("missing-design", "no design_complexity: the design cannot be judged")
    design = design_spec(design_key, design_raw, w, extra, q) if design_raw is not None else None

    has_masked_key = "masked_source" in q
    given = {key: bool(q.get(key)) for key in ("source", "masked_source")}
    unmaskable: dict[str, list[str]] = {}
    as_given: dict[str, Any] = {}
    source = repo_paths("source", q.pop("source", None), w, unmaskable, as_given) if "source" in q else None
    masked = (
        repo_paths("masked_source", q.pop("masked_source", None), w, unmaskable, as_given)
        if has_masked_key
        else None
    )
    if unmaskable:
        extra["unmaskable_paths"] = unmaskable
    if as_given:
        extra["paths_as_given"] = as_given

    kind = _kind(q, given["source"], given["masked_source"], has_masked_key, w)
    for key in TEXT_KEYS:
        if key in q:
            extra[key] = jsonable(q.pop(key))
    if q:
        w.add("unknown-keys", "kept in extra: " + ", ".join(sorted(q)))
        extra.update(jsonable(q))

    masked_files = {TaskKind.T1: masked or [], TaskKind.T2: source or []}.get(kind, [])
    reference = [] if kind == TaskKind.T3 else unique((source or []) + (masked or []))
    return {
        "_warnings": w,
        "_paper": re.sub(r"[^A-Za-z0-9._-]+", "-", str(own_paper).strip()) if own_paper is not None else None,
        "kind": kind,
        "question": question.strip(),
        "method": method,
        "instructions": instructions,
        "design": design,
        "expected_conclusion": conclusion,
        "implementation": ImplementationTruth(
            requirements=requirements,
            reference_files=reference,
            method_notes=method if kind == TaskKind.T3 else None,
        ),
        "masking": Masking(files=unique(masked_files), remove_also=["README.md"],
                           outside=unique(unmaskable.get(MASKED_FIELD.get(kind, ""), []))),
        "run": RunSpec(agent_script=kind in RUNNABLE_KINDS),
        "extra": extra,
    }


# the field whose files the agent must not see, by kind (T3 hides nothing)
MASKED_FIELD = {TaskKind.T1: "masked_source", TaskKind.T2: "source"}


def _kind(q: dict[str, Any], source: bool, masked: bool, has_masked_key: bool, w: Warnings) -> TaskKind:
    """T1/T2/T3 from which fields the task has (given, even if none of their paths can be masked)."""
    has_no_answer = "no_answer" in q
    if has_masked_key and not masked:
        w.add("kind-empty-masked", "masked_source is empty: nothing to mask as T1")
    if masked:
        if has_no_answer:
            w.add("kind-conflict", "has both masked_source and no_answer: treated as T1")
        return TaskKind.T1
    if has_no_answer:
        if source:
            w.add("kind-conflict", "has both source and no_answer: treated as T3")
        return TaskKind.T3
    if source:
        if "mode" not in q:
            w.add("kind-guess", "has source but no mode and no masked_source: treated as T2")
        return TaskKind.T2
    w.add("kind-guess", "no masked_source, source or no_answer: treated as T3 (design and conclusion only)")
    return TaskKind.T3


# -- ids ---------------------------------------------------------------------------------------------------
def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _assign_ids(drafts: list[dict[str, Any]]) -> None:
    """Ids from content: the question, and where two questions of a file coincide, outcome and method."""

    def make_id(d: dict[str, Any], *more: str) -> str:
        return stable_id(d["_paper"], _norm(d["question"]), *more, prefix=f"expbench-{d['_paper']}")

    ids = [make_id(d) for d in drafts]
    seen: dict[str, list[int]] = {}
    for i, task_id in enumerate(ids):
        seen.setdefault(task_id, []).append(i)
    for members in seen.values():
        if len(members) == 1:
            continue
        for i in members:
            d = drafts[i]
            ids[i] = make_id(d, _norm(d["expected_conclusion"] or ""), _norm(d["method"] or ""))
            d["_warnings"].add(
                "duplicate-question",
                f"{len(members)} tasks of this file ask the same question; "
                "the id also hashes the outcome and method",
            )
    counts: dict[str, int] = {}
    for i, task_id in enumerate(ids):
        counts[task_id] = counts.get(task_id, 0) + 1
        if counts[task_id] > 1:
            ids[i] = f"{task_id}-{counts[task_id]}"
            drafts[i]["_warnings"].add(
                "duplicate-question",
                "an identical task appears earlier in this file; its id carries its occurrence number",
            )
    for d, task_id in zip(drafts, ids, strict=True):
        d["id"] = task_id


class ExpBenchOptions(BaseModel):
    """`index`: the venue's paper index (`failatlas tasks import --index FILE`); None: the one beside the venue
    folder, if any."""

    model_config = ConfigDict(extra="forbid")

    index: Path | None = None


@TASK_IMPORTERS.register(FORMAT)
class ExpBenchImporter:
    """EXP-Bench *_complete_final*.json files (one per paper)"""

    name = FORMAT
    description = "EXP-Bench *_complete_final*.json files (one per paper)"
    Options = ExpBenchOptions
    suffixes = (".json",)
    sniff_order = 20

    def sniff(self, path: Path) -> bool:
        return sniff(path)

    def load(self, path: Path, options: ExpBenchOptions) -> Loaded[TaskSpec]:
        index = paper_index(path, options.index)
        notes = [f"index: {index.path}"] if index is not None else []
        return Loaded(path=path, format=self.name, records=load_expbench(path, options.index), warnings=notes)

    def keep(self, files: list[Path]) -> list[Path]:
        """EXP-Bench log folders also hold intermediate task files; where final ones (`*_complete_final*`) are
        present, only those."""
        finals = [f for f in files if FINAL_MARK in f.name]
        return finals or files
