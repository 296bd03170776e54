"""RExBench importer: one task folder -> one `TaskSpec` of kind `extension`.

Released format. RExBench (arXiv 2506.22598, github.com/tinlaboratory/RExBench) publishes one Markdown file per
task, `instructions/<task>/instructions.md`, and nothing else: its base repositories and oracle outcomes are not
public. A folder holding `instructions.md` is a task, `rexbench-<folder name>`; the folder of task folders
(`instructions/`) or the repository's root imports every task. The file is read as it is:

- sections start at Markdown headings (any level, outside code fences) and take their role from the heading's
  wording: background, extension ("Extension to be implemented", "Task", ...), evaluation, hints; a heading that
  names no role and is deeper than the section it sits in stays part of that section;
- the extension's text is the task's `question`; every other section, unknown ones included, is kept, in the
  file's order and with its headings, in `instructions`; so the agent is told each section once;
- hint sections, as RExBench's `process_instructions.py` cuts them ("### Hints", "### More detailed hints"),
  become the hint levels: each runs to the next hint heading or the end of the file.

The task has no repository (`repository-from-user`: the user supplies a checkout) and no execution check
(`no-execution-check`: E is not scored) unless one is given. The evaluation command is taken from the Evaluation
section only where it holds an explicit shell command in a code span or block (`bash run_final.sh`, a line of a
```` ```bash ```` block); a script named in prose (`run_final.sh`) is not one, since how and with what it is run
is not said: the command then comes from the checks file or `task.json`.

Execution checks: the `checks` option (`failatlas tasks import --checks FILE`), a YAML or JSON file mapping a task
(its folder name, e.g. `cogs`, or its id, `rexbench-cogs`) to its checks, or to an object that also names the
command and its time limit:

    cogs:                                   # a list of checks
      - {name: gen_exact_match, source: stdout_regex, pattern: 'gen acc: ([0-9.]+)', value: 0.81, atol: 0.01}
    othello:                                # or an object
      command: bash produce_probes.sh       # run from the repository root (overrides task.json and the text)
      timeout_s: 21600                      # optional
      checks:
        - {name: layer_6, source: csv_column, file: ckpts/probes.csv, column: test_acc, row: 5, value: 0.97,
           rtol: 0.002}
        - {name: mean_acc, source: json_field, file: out/summary.json, field: layers[5].acc, value: 0.97}

Each check becomes a `model.OutputCheck`: `stdout_regex` needs `pattern` (the last match's first group, else the
whole match), `csv_column` needs `file` and `column` (`row`: an index or last/first/max/min, default last),
`json_field` needs `file` and `field` (dotted, with `[i]`); `value` is a number (compared with rtol/atol) or a
string (compared exactly); `file` is relative to the repository root. A key naming no RExBench task folder beside
the one imported, a check without `name`, `source`, `value` or its source's fields, a bad regular expression, a
`file` that is absolute or holds `..`, or an unknown key is an InputError naming the checks file, line and field
(`cogs[0].pattern`, `othello.checks[1].file`).

Our own metadata, optional: `task.json` | `task.yaml` beside `instructions.md` may add
    name, title, paper {id, title, year, url, arxiv_id}, repository {url, commit, local_path} (local_path: a folder
    inside the task folder), eval {command, metric, results_file, timeout_s}, success {kind: exact | tolerance |
    oracle_band, metric, value, rtol, atol, band, oracle_values}, expected [{name, value, rtol, atol}],
    resources {gpus, time_limit_s, memory_gb, cpus, image, network}; other keys are kept in `extra`;
and `oracle.json` ({"metric": m, "values": [...]} or {"runs": [{m: value}, ...]}) fills an oracle_band's values.
A malformed metadata file, or a path in it that is absolute, holds '..' or leaves its folder through a link
(`repository.local_path` the task folder, `eval.results_file` the repository), is an InputError naming file and
field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from failatlas.bench_core.tasks.importers._common import (
    TASK_IMPORTERS,
    Warnings,
    jsonable,
    load_json,
    load_yaml,
    read_text,
    repo_path,
    task_folder_path,
    validation_error,
)
from failatlas.bench_core.tasks.importers._rexbench_checks import INSTRUCTIONS, TaskChecks, checks_for, rexbench_id
from failatlas.bench_core.tasks.model import (
    Benchmark,
    ExpectedMetric,
    PaperMeta,
    RepoRef,
    Resources,
    RunSpec,
    SuccessCriterion,
    TaskKind,
    TaskSpec,
)
from failatlas.core.errors import InputError
from failatlas.core.importers import Loaded

FORMAT = "rexbench"
META_FILES = ("task.json", "task.yaml", "task.yml")
ORACLE = "oracle.json"
MAPPED_KEYS = frozenset({"name", "title", "paper", "repository", "eval", "success", "expected", "resources"})

_HEADING = re.compile(r"^ {0,3}(?P<hashes>#{1,6})[ \t]+(?P<title>.*?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})")
_PAPER = re.compile(r"[*_](?P<title>[^*_\n]{8,}?)[*_]\s*\((?P<who>[^()\n]*?)(?P<year>(?:19|20)\d\d)\)")
_CODE_SPAN = re.compile(r"(?<!`)`(?P<code>[^`\n]+)`(?!`)")
_LAUNCHERS = frozenset({"bash", "sh", "python", "python3", "torchrun", "accelerate", "deepspeed", "make", "srun",
                        "uv", "env"})
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=\S*")


# -- the Markdown ----------------------------------------------------------------------------------------------
@dataclass
class Section:
    """A part of instructions.md: its heading (`title` None for text before the first one), its `role`
    (title, background, extension, evaluation, hint, other) and its lines, heading included."""

    title: str | None
    level: int
    role: str
    lines: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n".join(self.lines).strip()

    @property
    def body(self) -> str:
        return "\n".join(self.lines[1:] if self.title is not None else self.lines).strip()


@dataclass
class Instructions:
    """instructions.md read as RExBench means it: the extension (the `question`), the rest (`instructions`), the
    hint levels, the Evaluation section's text and every section in the file's order."""

    question: str
    instructions: str | None
    hints: list[str]
    evaluation: str
    sections: list[Section]


def role_of(title: str) -> str:
    """The role a heading's wording gives its section; `other` when it names none."""
    words = re.sub(r"[^a-z0-9 ]+", " ", title.lower()).split()
    text = " ".join(words)
    if re.fullmatch(r"(?:(?:more|additional|further) )?(?:detailed )?hints?", text):
        return "hint"
    if "extension" in words or "to be implemented" in text or text in ("task", "your task", "the task"):
        return "extension"
    if {"evaluation", "evaluations", "evaluate", "evaluating"} & set(words):
        return "evaluation"
    if "background" in words:
        return "background"
    return "other"


def parse_sections(text: str) -> list[Section]:
    """The sections of a Markdown document (see the module docstring); headings inside code fences are text."""
    sections = [Section(title=None, level=0, role="preamble")]
    fence: str | None = None
    for line in text.splitlines():
        opened = _FENCE.match(line)
        if fence is not None:
            if opened and opened.group("fence")[0] == fence[0] and len(opened.group("fence")) >= len(fence):
                fence = None
        elif opened:
            fence = opened.group("fence")
        elif heading := _HEADING.match(line):
            level, title = len(heading.group("hashes")), heading.group("title").strip()
            role = role_of(title)
            current = sections[-1]
            starts = role != "other" or level <= current.level or current.role == "preamble"
            if role == "hint" or (current.role != "hint" and starts):
                if role == "other" and current.role == "preamble" and level == 1 and not current.text:
                    role = "title"
                sections.append(Section(title=title, level=level, role=role))
        sections[-1].lines.append(line)
    return [s for s in sections if s.lines]


def read_instructions(text: str) -> Instructions:
    """Split instructions.md into what the agent is told once each: the extension as the question, every other
    section (unknown ones included) as the instructions, the hints as levels."""
    sections = parse_sections(text)
    extension = [s.body for s in sections if s.role == "extension" and s.body]
    rest = [s.text for s in sections if s.role not in ("extension", "hint") and s.text]
    hints = [s.body for s in sections if s.role == "hint" and s.body]
    evaluation = "\n\n".join(s.body for s in sections if s.role == "evaluation" and s.body)
    if extension:
        return Instructions("\n\n".join(extension), "\n\n".join(rest) or None, hints, evaluation, sections)
    return Instructions("\n\n".join(rest), None, hints, evaluation, sections)


def eval_commands(evaluation: str) -> list[str]:
    """Explicit shell commands in the Evaluation text: code spans, and lines of fenced blocks, whose first word
    runs something (`bash x.sh`, `python3 a.py --flag`, `./run.sh`). A bare file name is not a command."""
    candidates: list[str] = []
    fence: str | None = None
    for line in evaluation.splitlines():
        opened = _FENCE.match(line)
        if opened and (fence is None or opened.group("fence")[0] == fence[0]):
            fence = None if fence is not None else opened.group("fence")
        elif fence is not None:
            candidates.append(line.strip().removeprefix("$ "))
        else:
            candidates += [m.group("code").strip() for m in _CODE_SPAN.finditer(line)]
    commands = []
    for candidate in candidates:
        words = candidate.split()
        while words and _ASSIGNMENT.fullmatch(words[0]):  # `CUDA_VISIBLE_DEVICES=0 python3 ...`
            words.pop(0)
        if not words or candidate.startswith("#"):
            continue
        if _is_command(words) and candidate not in commands:
            commands.append(candidate)
    return commands


_SCRIPT_SUFFIXES = (".sh", ".bash", ".py", ".pl", ".rb", ".r", ".jl", ".lua", ".js")
_INTERPRETERS = frozenset({"bash", "sh", "python", "python3"})


def _is_command(words: list[str]) -> bool:
    """Whether `words` call an executable or an interpreter: a launcher with something to launch (`bash x.sh`,
    `python3 -m pkg`, `make`), or `./file` that is a script (`./run.sh`) or is given arguments (`./train --x 1`).
    A path alone (`./results`, the folder the Evaluation names as its output) or a folder is not."""
    first, args = words[0], words[1:]
    if first in _LAUNCHERS:
        if first == "make":
            return True
        return bool(args) and not (first in _INTERPRETERS and args[0].endswith("/"))
    if not first.startswith("./") or len(first) <= 2 or first.endswith("/"):
        return False
    return first.lower().endswith(_SCRIPT_SUFFIXES) or bool(args)


def paper_from(sections: list[Section]) -> PaperMeta:
    """The base paper as the Background names it (`The paper *Title* (Authors 2020)`), else nothing."""
    background = next((s.body for s in sections if s.role == "background"), "")
    match = _PAPER.search(background)
    if match is None:
        return PaperMeta()
    return PaperMeta(title=match.group("title").strip(), year=int(match.group("year")))


# -- the task ------------------------------------------------------------------------------------------------
class RExBenchOptions(BaseModel):
    """`checks`: the YAML/JSON file of execution checks per task (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    checks: Path | None = None


def task_folder(path: Path) -> Path | None:
    """The task folder `path` names: the folder itself or the folder of its instructions/metadata file."""
    if path.is_dir():
        return path if (path / INSTRUCTIONS).is_file() else None
    if path.name in (INSTRUCTIONS, ORACLE, *META_FILES) and (path.parent / INSTRUCTIONS).is_file():
        return path.parent
    return None


def sniff(path: Path) -> bool:
    """True for a folder holding `instructions.md` (or a file inside one)."""
    return task_folder(path) is not None


def load_rexbench(path: str | Path, checks: Path | None = None) -> list[TaskSpec]:
    """The one task of a RExBench task folder, with its checks from the `checks` file; raises InputError naming
    the file, line and field if the folder, its metadata or the checks file is malformed."""
    path = Path(path)
    folder = task_folder(path)
    if folder is None:
        raise InputError(f"a RExBench task is a folder holding {INSTRUCTIONS}; none found",
                         path=str(path / INSTRUCTIONS if path.is_dir() else path))
    folder = folder.resolve()
    text = read_text(folder / INSTRUCTIONS)
    if not text.strip():
        raise InputError("is empty", path=str(folder / INSTRUCTIONS))
    md = read_instructions(text)
    meta_path, meta = _metadata(folder)
    where = meta_path or folder / INSTRUCTIONS
    name = str(meta.get("name") or folder.name)
    task_id = rexbench_id(name)
    given = checks_for(checks, folder, name, task_id) if checks is not None else None
    w = Warnings()
    if not any(s.role == "extension" for s in md.sections):
        w.add("no-extension-section", "no 'Extension to be implemented' section: the whole file is the task")
    ev = _section(meta, "eval", meta_path)
    command, timeout = _command(md, ev, given, meta_path, w)
    oracle = _oracle(folder)
    success = _success(meta, ev, oracle, meta_path)
    expected = _expected(meta, meta_path)
    _execution_warnings(w, task_id, bool(success or expected or (given and given.checks)), command)
    repo = _section(meta, "repository", meta_path)
    _repository_warnings(w, task_id, repo)
    local_path, results_file = _paths(folder, repo, ev, meta_path)
    try:
        resources = Resources(**_section(meta, "resources", meta_path))
    except ValidationError as exc:
        raise validation_error(exc, path=meta_path, prefix="resources") from exc
    extra = _extra(meta, oracle, text, md, checks if given else None)
    try:
        return [TaskSpec(
            id=task_id, benchmark=Benchmark.REXBENCH.value, kind=TaskKind.EXTENSION, title=meta.get("title") or name,
            paper=PaperMeta(**_section(meta, "paper", meta_path)) if meta.get("paper") else paper_from(md.sections),
            repository=RepoRef(url=repo.get("url"), commit=repo.get("commit"), local_path=local_path),
            question=md.question, instructions=md.instructions, hints=md.hints,
            run=RunSpec(command=command, results_file=results_file, timeout_s=timeout or resources.time_limit_s),
            expected_results=expected, success=success, checks=given.checks if given else [], resources=resources,
            source=str(where.resolve()), warnings=w.items, extra=extra,
        )]
    except ValidationError as exc:
        raise validation_error(exc, path=where, prefix="") from exc
    except TypeError as exc:
        raise InputError(str(exc), path=str(where)) from exc


def _command(md: Instructions, ev: dict[str, Any], given: TaskChecks | None, meta_path: Path | None,
             w: Warnings) -> tuple[str | None, int | None]:
    """The evaluation command and its time limit: the checks file's, else the metadata's, else an explicit one in
    the Evaluation text (said in a warning, to be checked)."""
    timeout = (given.timeout_s if given else None) or ev.get("timeout_s")
    if given and given.command:
        return given.command, timeout
    command = ev.get("command")
    if command is not None:
        if not isinstance(command, str) or not command.strip():
            raise InputError("must be the command line that runs the evaluation", path=str(meta_path),
                             field="eval.command")
        return command.strip(), timeout
    found = eval_commands(md.evaluation)
    if not found:
        return None, timeout
    command = " && ".join(found)
    w.add("command-from-text", f"the evaluation command `{command}` was read from the Evaluation section; "
          "check it, or give the task a `command` in the checks file")
    return command, timeout


def _execution_warnings(w: Warnings, task_id: str, checkable: bool, command: str | None) -> None:
    if not checkable:
        w.add("no-execution-check", "RExBench publishes no expected values: execution (E) is not scored unless "
              f"a check is given (`failatlas tasks import --checks FILE` with an entry for {task_id})")
    elif command is None:
        w.add("no-execution-command", "the checks have no command to run: execution (E) is not scored until the "
              f"checks file gives {task_id} a `command` (the Evaluation section names no explicit one)")


def _repository_warnings(w: Warnings, task_id: str, repo: dict[str, Any]) -> None:
    if not (repo.get("url") or repo.get("local_path")):
        w.add("repository-from-user", "RExBench's base repositories are not public: supply a checkout with "
              f"`failatlas repos add PATH --task {task_id}` (or `--repo PATH`)")
    elif repo.get("url") and not repo.get("commit") and not repo.get("local_path"):
        w.add("unpinned-repo", "the base repository has no pinned commit")


def _extra(meta: dict[str, Any], oracle: dict[str, Any] | None, text: str, md: Instructions,
           checks: Path | None) -> dict[str, Any]:
    """What the task keeps as it came: unknown metadata keys, the oracle, the Markdown and its sections."""
    extra: dict[str, Any] = {k: jsonable(v) for k, v in meta.items() if k not in MAPPED_KEYS}
    if oracle is not None:
        extra["oracle"] = jsonable(oracle)
    extra["instructions_md"] = text
    extra["sections"] = [{"title": s.title, "role": s.role} for s in md.sections if s.title is not None]
    if checks is not None:
        extra["checks_file"] = str(Path(checks).resolve())
    return extra


def _metadata(folder: Path) -> tuple[Path | None, dict[str, Any]]:
    """Our optional task.json/task.yaml beside instructions.md: (its path, its object), else (None, {})."""
    for name in META_FILES:
        path = folder / name
        if not path.is_file():
            continue
        data = load_json(path) if path.suffix == ".json" else load_yaml(path)
        if not isinstance(data, dict):
            raise InputError("must hold an object of task metadata", path=str(path))
        return path, data
    return None, {}


def _paths(folder: Path, repo: dict[str, Any], ev: dict[str, Any], meta_path: Path | None
           ) -> tuple[str | None, str | None]:
    """The bundled repository (inside the task folder) and the results file (inside the repository), checked:
    InputError naming the metadata file and field for a path that is absolute, holds '..' or leaves through a
    link."""
    where = meta_path or folder / META_FILES[0]
    local_path = repo.get("local_path")
    if local_path is not None:
        local_path = task_folder_path(folder, local_path, path=where, field="repository.local_path")
    results_file = ev.get("results_file")
    if results_file is not None:
        local_repo = folder / local_path if local_path is not None else None
        results_file = repo_path(results_file, repo=local_repo, path=where, field="eval.results_file")
    return local_path, results_file


def _section(meta: dict[str, Any], key: str, path: Path | None) -> dict[str, Any]:
    value = meta.get(key) or {}
    if not isinstance(value, dict):
        raise InputError("must be an object", path=str(path), field=key)
    return value


def _list(meta: dict[str, Any], key: str, path: Path | None) -> list[dict[str, Any]]:
    value = meta.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise InputError("must be a list of objects", path=str(path), field=key)
    return value


def _expected(meta: dict[str, Any], path: Path | None) -> list[ExpectedMetric]:
    expected = []
    for i, entry in enumerate(_list(meta, "expected", path)):
        try:
            expected.append(ExpectedMetric.model_validate(entry))
        except ValidationError as exc:
            raise validation_error(exc, path=path, prefix=f"expected[{i}]") from exc
    return expected


def _oracle(folder: Path) -> dict[str, Any] | None:
    path = folder / ORACLE
    if not path.is_file():
        return None
    data = load_json(path)
    if not isinstance(data, dict) or not ("values" in data or "runs" in data):
        raise InputError("must be an object with 'values' (and 'metric') or 'runs'", path=str(path))
    return data


def _oracle_values(oracle: dict[str, Any] | None, metric: str, folder_file: Path) -> list[float]:
    if oracle is None:
        return []
    if "values" in oracle:
        if oracle.get("metric", metric) != metric:
            return []
        values = oracle["values"]
    else:
        runs = oracle["runs"]
        if not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
            raise InputError("must be a list of objects of metric -> value", path=str(folder_file), field="runs")
        values = [r[metric] for r in runs if metric in r]
    if not isinstance(values, list) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in values
    ):
        raise InputError("oracle values must be numbers", path=str(folder_file), field="values")
    return [float(v) for v in values]


def _success(meta: dict[str, Any], ev: dict[str, Any], oracle: dict[str, Any] | None, meta_path: Path | None
             ) -> SuccessCriterion | None:
    spec = meta.get("success")
    if spec is None:
        return None
    if not isinstance(spec, dict):
        raise InputError("must be an object", path=str(meta_path), field="success")
    spec = dict(spec)
    spec.setdefault("metric", ev.get("metric"))
    if spec.get("kind") == "oracle_band" and not spec.get("oracle_values"):
        oracle_file = (meta_path.parent if meta_path else Path(".")) / ORACLE
        spec["oracle_values"] = _oracle_values(oracle, spec["metric"], oracle_file)
        if not spec["oracle_values"]:
            raise InputError(
                f"an oracle_band criterion needs oracle values for '{spec['metric']}' "
                f"(in success.oracle_values or {ORACLE})",
                path=str(meta_path),
                field="success.oracle_values",
            )
    try:
        return SuccessCriterion(**spec)
    except ValidationError as exc:
        raise validation_error(exc, path=meta_path, prefix="success") from exc
    except TypeError as exc:
        raise InputError(str(exc), path=str(meta_path), field="success") from exc


@TASK_IMPORTERS.register(FORMAT)
class RExBenchImporter:
    """RExBench task folders (instructions.md, as released; our task.json/yaml optional)"""

    name = FORMAT
    description = "RExBench task folders (instructions.md, as released; our task.json/yaml optional)"
    Options = RExBenchOptions
    suffixes = ()
    sniff_order = 10

    def sniff(self, path: Path) -> bool:
        return sniff(path)

    def load(self, path: Path, options: RExBenchOptions) -> Loaded[TaskSpec]:
        return Loaded(path=path, format=self.name, records=load_rexbench(path, options.checks))

    def root(self, path: Path) -> Path:
        return task_folder(path) or path
