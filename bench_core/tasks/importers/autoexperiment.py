"""AutoExperiment importer: one JSONL row (a repository with n functions masked) -> one `TaskSpec`.

Documented format (AutoExperiment, github.com/j1mk1m/AutoExperiment, `dataset/MLRC/mlrc_n_<n>.jsonl` as its
`process_dataset.py` writes them; a `.json` file holding a list of such rows is read too). One row:
- `paper_id`: the arXiv id (`2205.00048`); `func_ids`: the masked functions' ids, `"0,1"` (a list is
  accepted). Either may be replaced by `combined_id` = `<paper_id>_<func_ids>` (`2205.00048_0,1`), the
  benchmark's task id;
- `func_details`: one object per masked function: `func_id`, `name` (bare, `__init__`, `forward`: the lines
  locate it; `Class.name` or `class_name` are read too), `file` (relative to the paper's `code/`), `header_line`
  (1-based, the `def` line, after any decorator), `line_start` (the line after it), `line_end` (the last line of
  the body), `description` (the generated docstring the agent is given instead of the body), `relevant_paper`,
  `exp_dependencies`. Line numbers may be integers or digit strings;
- `experiments`: the task text, "Experiment 1: ... Return final answer as a json: {...}";
- `solution`: the exact bash run command(s) (`echo Experiment 1\\npython ...`), AutoExperiment's "refsol";
- `results`: gold results per experiment, a JSON object or a JSON string of one: `{"Experiment 1": 0.87,
  "Experiment 2": {"acc": 0.8, "f1": [0.7, 0.6]}}`.
Extensions read when present (FailAtlas's own, not in the original rows): `tolerances` (`{"default": {"rtol":
0.05}, "Experiment 2.acc": {"atol": 0.01}, "Experiment 1": {...}}`, most specific wins), `repository`
(`{"url", "commit", "local_path"}`), `resources` (our `Resources` fields), `title`.

As AutoExperiment gives a task: each masked function is a `FunctionRef` located by its lines (`line_start` =
`header_line`, checked against the name when the workspace is prepared) whose stub has the row's `description`
as its docstring; the paper (`<paper_id>/paper.txt`, when beside the code) is a material copied into the
workspace; the settings are AutoExperiment's Partial Code and Partial Code + refsol (Full Code and Full Code +
refsol for n = 0 rows, kind `full_code`, id `autoexperiment-<paper_id>`), the "+ refsol" one showing the run
command; the answer is the JSON the run prints last (`RunSpec.answer = "stdout_json"`). Each gold number becomes
an `ExpectedMetric` named by its path (`Experiment 2.acc`, `Experiment 2.f1[0]`) with its own tolerance; the
default is rtol 0.05, AutoExperiment's 5 % threshold applied per metric rather than to a mean. The repository
is the paper's bundled `code/` folder beside the rows (`<paper_id>/code`) unless `repository` names one; a
local repository must lie inside the rows file's folder and a masked file inside the repository (relative, no
'..', no link leading out). A row whose bundled code is absent imports with a `repository-unavailable` warning.
A malformed row raises `InputError` naming the file, line and field.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from failatlas.bench_core.tasks.importers._common import (
    TASK_IMPORTERS,
    Warnings,
    json_lines,
    jsonable,
    load_json,
    read_text,
    repo_path,
    task_folder_path,
    validation_error,
)
from failatlas.bench_core.tasks.model import (
    Benchmark,
    ExpectedMetric,
    FunctionRef,
    ImplementationTruth,
    Masking,
    PaperMeta,
    RepoRef,
    Resources,
    RunSpec,
    Setting,
    TaskKind,
    TaskSpec,
)
from failatlas.core.errors import InputError
from failatlas.core.importers import Loaded, NoOptions, iter_lines

FORMAT = "autoexperiment"
DEFAULT_RTOL = 0.05
MAPPED_KEYS = frozenset(
    {
        "paper_id",
        "func_ids",
        "combined_id",
        "func_details",
        "experiments",
        "solution",
        "results",
        "tolerances",
        "repository",
        "resources",
        "title",
    }
)
_ARXIV = re.compile(r"\d{4}\.\d{4,5}(v\d+)?")
PAPER_MATERIAL = "paper.txt"
PARTIAL_CODE_SETTINGS = [
    Setting(name="partial_code", show_run_command=False,
            description="Partial Code: the masked functions are stubs whose docstrings say what they do; no run "
            "command"),
    Setting(name="partial_code+refsol", show_run_command=True,
            description="Partial Code + refsol: the stubs, and the reference run command"),
]
FULL_CODE_SETTINGS = [
    Setting(name="full_code", show_run_command=False,
            description="Full Code: the complete repository; no run command"),
    Setting(name="full_code+refsol", show_run_command=True,
            description="Full Code + refsol: the complete repository and the reference run command"),
]


def _is_row(obj: Any) -> bool:
    return isinstance(obj, dict) and ("combined_id" in obj or ("paper_id" in obj and "func_ids" in obj))


def sniff(path: Path) -> bool:
    """True for a JSONL file whose first row (or a JSON list whose first item) is an AutoExperiment row."""
    suffix = path.suffix.lower()
    if suffix not in (".jsonl", ".json"):
        return False
    try:
        if suffix == ".jsonl":
            first = next((line for _, line in iter_lines(path) if line.strip()), "")
            return _is_row(json.loads(first))
        text = read_text(path)
        if not text.lstrip().startswith("["):
            return False
        data = json.loads(text)
    except (InputError, ValueError, RecursionError):  # not ours, or broken: the loader or discover says why
        return False
    return isinstance(data, list) and bool(data) and _is_row(data[0])


def _rows(path: Path) -> list[tuple[int | None, Any]]:
    if path.suffix.lower() == ".json":
        data = load_json(path)
        if not isinstance(data, list):
            raise InputError("an AutoExperiment .json file must hold a list of rows", path=str(path))
        return [(None, row) for row in data]
    return list(json_lines(path))


def load_autoexperiment(path: str | Path) -> list[TaskSpec]:
    """Every row of one AutoExperiment JSONL (or JSON list) file; InputError naming file, line and field."""
    path = Path(path)
    tasks: list[TaskSpec] = []
    seen: dict[str, int | None] = {}
    for index, (line, row) in enumerate(_rows(path)):
        where = {"path": str(path), "line": line}
        prefix = "" if line is not None else f"[{index}]."
        if not isinstance(row, dict):
            raise InputError(f"a row must be an object, not {type(row).__name__}", **where)
        task = _task(row, path, where, prefix)
        if task.id in seen:
            other = seen[task.id]
            raise InputError(
                f"duplicate task {task.extra['combined_id']}"
                + (f" (first on line {other})" if other else ""),
                field=f"{prefix}combined_id",
                **where,
            )
        seen[task.id] = line
        tasks.append(task)
    return tasks


def _task(row: dict[str, Any], path: Path, where: dict[str, Any], prefix: str) -> TaskSpec:
    w = Warnings()
    paper_id, func_ids = _ids(row, where, prefix)
    combined_id = f"{paper_id}_{','.join(func_ids)}"
    repository = _repository(row, paper_id, path, where, prefix)
    local_repo = path.resolve().parent / repository.local_path if repository.local_path else None
    if local_repo is not None and not local_repo.is_dir():
        w.add("repository-unavailable", f"the paper's code {repository.local_path} is not beside the rows file: "
              "preparing the task needs --repo PATH (or `failatlas repos add`)")
    funcs = _functions(row, func_ids, w, where, prefix, repo=local_repo)
    results = _results(row, where, prefix)
    expected, non_numeric = _expected(results, row.get("tolerances") or {}, where, prefix)
    if non_numeric:
        w.add(
            "non-numeric-result",
            "gold values that are not numbers cannot be checked by tolerance: "
            + ", ".join(sorted(non_numeric))
            + "; kept in extra['non_numeric_results']",
        )
    experiments = row.get("experiments")
    if not isinstance(experiments, str) or not experiments.strip():
        raise InputError(
            "missing: the experiment description the agent is given", field=f"{prefix}experiments", **where
        )
    command = row.get("solution")
    if not isinstance(command, str) or not command.strip():
        w.add("missing-command", "no solution: the exact run command is unknown")
        command = None
    materials = _materials(paper_id, path, where, prefix)

    extra: dict[str, Any] = {
        "combined_id": combined_id,
        "func_ids": func_ids,
        "func_details": jsonable(row.get("func_details") or []),
    }
    if non_numeric:
        extra["non_numeric_results"] = non_numeric
    extra.update({k: jsonable(v) for k, v in row.items() if k not in MAPPED_KEYS})
    try:
        return TaskSpec(
            id=f"autoexperiment-{combined_id if func_ids else paper_id}",
            benchmark=Benchmark.AUTOEXPERIMENT.value,
            kind=TaskKind.MASKED_FUNCTIONS if func_ids else TaskKind.FULL_CODE,
            title=row.get("title") if isinstance(row.get("title"), str) else None,
            paper=PaperMeta(
                id=paper_id,
                arxiv_id=paper_id if _ARXIV.fullmatch(paper_id) else None,
                url=f"https://arxiv.org/abs/{paper_id}" if _ARXIV.fullmatch(paper_id) else None,
            ),
            repository=repository,
            question=experiments.strip(),
            instructions=_instructions(funcs, paper=bool(materials)),
            implementation=ImplementationTruth(
                requirements=[f"{f.qualname} in {f.path}: {f.docstring or ''}".rstrip(": ") for f in funcs],
                reference_files=list(dict.fromkeys(f.path for f in funcs)),
            ),
            masking=Masking(functions=funcs),
            # the reference commands print no JSON answer: the agent's run script (which must) is what is re-run
            run=RunSpec(command=command, answer="stdout_json", agent_script=True),
            expected_results=expected,
            materials=materials,
            settings=_settings(masked=bool(func_ids)),
            resources=Resources(**row["resources"])
            if isinstance(row.get("resources"), dict)
            else Resources(),
            source=str(path.resolve()),
            warnings=w.items,
            extra=extra,
        )
    except ValidationError as exc:
        raise validation_error(exc, path=path, line=where["line"], prefix=prefix.rstrip(".")) from exc


def _instructions(funcs: list[FunctionRef], *, paper: bool) -> str:
    """What the agent is told besides the experiments: the stubs to implement (if any), the paper, and how to
    answer. Never the run command: the setting decides whether `AgentView.run_command` shows it."""
    paper_note = f" The paper is in {PAPER_MATERIAL}." if paper else ""
    answer = ("Your run script must run the experiments and finish by printing the final answer as one JSON object "
              "in the format the experiments ask for: it is re-run in a clean copy of the repository, and the last "
              "JSON object it prints is read as the answer.")
    if not funcs:
        return f"The repository is complete.{paper_note} Run the experiments and report their results. {answer}"
    missing = "\n".join(f"- {f.qualname} in file {f.path}{_summary(f.docstring)}" for f in funcs)
    return (f"Missing function(s):\n{missing}\nEach is a stub: its docstring says what it does and its body "
            f"raises NotImplementedError. Implement them, then run the experiments.{paper_note} {answer}")


def _summary(docstring: str | None, limit: int = 100) -> str:
    """`: <the docstring's first line>` (shortened), which tells apart two stubs of one name in one file."""
    first = (docstring or "").strip().split("\n", 1)[0].strip()
    if not first:
        return ""
    return f": {first if len(first) <= limit else first[: limit - 3].rstrip() + '...'}"


def _settings(*, masked: bool) -> list[Setting]:
    """AutoExperiment's settings for a row: Partial Code (+ refsol), or Full Code (+ refsol) when nothing is
    masked; the first is the default."""
    return [s.model_copy() for s in (PARTIAL_CODE_SETTINGS if masked else FULL_CODE_SETTINGS)]


def _materials(paper_id: str, path: Path, where: dict[str, Any], prefix: str) -> dict[str, str]:
    """{"paper.txt": "<paper_id>/paper.txt"} when the paper lies beside the code (inside the rows file's folder,
    links followed: InputError naming the field otherwise), else nothing."""
    folder = Path(path).resolve().parent
    paper = f"{paper_id}/{PAPER_MATERIAL}"
    if not (folder / paper).is_file():
        return {}
    task_folder_path(folder, paper, path=Path(where["path"]), line=where["line"], field=f"{prefix}paper_id")
    return {PAPER_MATERIAL: paper}


def _ids(row: dict[str, Any], where: dict[str, Any], prefix: str) -> tuple[str, list[str]]:
    paper_id = row.get("paper_id")
    func_ids = row.get("func_ids")
    combined = row.get("combined_id")
    if combined is not None:
        if not isinstance(combined, str) or "_" not in combined:
            raise InputError(
                "must look like <paper_id>_<func_ids>, e.g. 2205.00048_0,1",
                field=f"{prefix}combined_id",
                **where,
            )
        c_paper, c_funcs = combined.rsplit("_", 1)
        if paper_id is not None and str(paper_id) != c_paper:
            raise InputError(
                f"names paper {c_paper} but paper_id is {paper_id}", field=f"{prefix}combined_id", **where
            )
        paper_id = c_paper if paper_id is None else paper_id
        if func_ids is None:
            func_ids = c_funcs
        elif _split_ids(func_ids) != _split_ids(c_funcs):
            raise InputError(
                f"names functions {c_funcs} but func_ids is {func_ids}", field=f"{prefix}combined_id", **where
            )
    if paper_id is None or (isinstance(paper_id, str) and not paper_id.strip()):
        raise InputError("missing", field=f"{prefix}paper_id", **where)
    if func_ids is None:
        raise InputError("missing (or give combined_id)", field=f"{prefix}func_ids", **where)
    ids = _split_ids(func_ids)
    if ids is None:
        raise InputError(
            "must be a comma-separated string or a list of ids", field=f"{prefix}func_ids", **where
        )
    return str(paper_id).strip(), ids


def _split_ids(value: Any) -> list[str] | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return [str(value)]
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, list) and all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in value):
        return [str(v).strip() for v in value]
    return None


def _functions(
    row: dict[str, Any], func_ids: list[str], w: Warnings, where: dict[str, Any], prefix: str, *,
    repo: Path | None,
) -> list[FunctionRef]:
    details = row.get("func_details")
    if details is None:
        if func_ids:
            raise InputError("missing: which functions to mask", field=f"{prefix}func_details", **where)
        return []
    if isinstance(details, dict):
        details = [details]
    if not isinstance(details, list):
        raise InputError("must be a list of function objects", field=f"{prefix}func_details", **where)
    if len(details) != len(func_ids):
        w.add(
            "func-count",
            f"func_ids names {len(func_ids)} function(s) but func_details describes {len(details)}",
        )
    return [_function(d, w, where, f"{prefix}func_details[{i}]", repo=repo) for i, d in enumerate(details)]


def _function(d: Any, w: Warnings, where: dict[str, Any], field: str, *, repo: Path | None) -> FunctionRef:
    """One `func_details` entry: located by its lines (`header_line`, the `def` line, else `line_start`, through
    `line_end`) when it has them, with its `description` as the stub's docstring."""
    if not isinstance(d, dict):
        raise InputError("must be an object", field=field, **where)
    file, name = d.get("file"), d.get("name")
    if not isinstance(file, str) or not file.strip():
        raise InputError("missing: the file that holds the function", field=f"{field}.file", **where)
    if not isinstance(name, str) or not name.strip():
        raise InputError("missing: the function's name", field=f"{field}.name", **where)
    cls = d.get("class_name") or d.get("class")
    qualname = (f"{cls}.{name}" if isinstance(cls, str) and cls and "." not in name else name).strip()
    rel = repo_path(file.strip(), repo=repo, path=Path(where["path"]), line=where["line"], field=f"{field}.file")
    keys = ("header_line", "line_start", "line_end")
    lines = {key: _line_number(d.get(key), where, f"{field}.{key}") for key in keys}
    start = lines["header_line"] or lines["line_start"]
    if start is None:
        w.add_to("missing-lines", qualname, "no header_line/line_start: located by name only")
    elif lines["line_end"] is not None and lines["line_end"] < start:
        raise InputError(f"{lines['line_end']} is before the function's first line {start}",
                         field=f"{field}.line_end", **where)
    description = d.get("description") or None
    if description is not None and not isinstance(description, str):
        raise InputError("must be text: the docstring the agent is given", field=f"{field}.description", **where)
    if description is not None:
        try:
            description.encode("utf-8")
        except UnicodeEncodeError as exc:  # a lone surrogate (`"\ud800"` is valid JSON): no file can hold it
            raise InputError(f"holds a character that is not valid Unicode text at position {exc.start}",
                             field=f"{field}.description", **where) from exc
    return FunctionRef(path=rel, qualname=qualname, line_start=start,
                       line_end=lines["line_end"] if start is not None else None,
                       docstring=description.strip() if description and description.strip() else None)


def _line_number(value: Any, where: dict[str, Any], field: str) -> int | None:
    """A 1-based line number given as an integer or a digit string (AutoExperiment's functions.jsonl); None when
    absent; InputError naming the field otherwise."""
    if value is None or value == "":
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InputError(f"must be a line number (1 or more), not {value!r}", field=field, **where)
    return value


def _results(row: dict[str, Any], where: dict[str, Any], prefix: str) -> dict[str, Any]:
    results = row.get("results")
    if results is None:
        raise InputError("missing: the gold results per experiment", field=f"{prefix}results", **where)
    if isinstance(results, str):
        try:
            results = json.loads(results)
        except json.JSONDecodeError:
            try:
                results = json.loads(results.replace("'", '"'))
            except json.JSONDecodeError as exc:
                raise InputError(f"not valid JSON: {exc.msg}", field=f"{prefix}results", **where) from exc
    if not isinstance(results, dict) or not results:
        raise InputError(
            "must be a non-empty object of experiment -> result", field=f"{prefix}results", **where
        )
    return results


def _expected(
    results: dict[str, Any], tolerances: Any, where: dict[str, Any], prefix: str
) -> tuple[list[ExpectedMetric], dict[str, Any]]:
    if not isinstance(tolerances, dict):
        raise InputError("must be an object of metric -> {rtol, atol}", field=f"{prefix}tolerances", **where)
    expected: list[ExpectedMetric] = []
    non_numeric: dict[str, Any] = {}

    def tolerance(name: str, experiment: str) -> dict[str, float]:
        for key in (name, experiment, "default"):
            if key in tolerances:
                tol = tolerances[key]
                if not isinstance(tol, dict) or set(tol) - {"rtol", "atol"}:
                    raise InputError(
                        "must be an object with rtol and/or atol", field=f"{prefix}tolerances.{key}", **where
                    )
                return {"rtol": float(tol.get("rtol", 0.0)), "atol": float(tol.get("atol", 0.0))}
        return {"rtol": DEFAULT_RTOL, "atol": 0.0}

    def walk(value: Any, name: str, experiment: str) -> None:
        if isinstance(value, dict):
            for key, sub in value.items():
                walk(sub, f"{name}.{key}", experiment)
        elif isinstance(value, list):
            for i, sub in enumerate(value):
                walk(sub, f"{name}[{i}]", experiment)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            try:
                expected.append(
                    ExpectedMetric(
                        name=name, value=float(value), experiment=experiment, **tolerance(name, experiment)
                    )
                )
            except ValidationError as exc:
                raise InputError(exc.errors()[0]["msg"], field=f"{prefix}tolerances", **where) from exc
        else:
            non_numeric[name] = value

    for experiment, value in results.items():
        walk(value, str(experiment), str(experiment))
    return expected, non_numeric


def _repository(row: dict[str, Any], paper_id: str, path: Path, where: dict[str, Any], prefix: str) -> RepoRef:
    """The row's repository: its `repository` object, else the paper's bundled `<paper_id>/code`; either way a
    local folder must lie inside the rows file's folder (InputError naming the field otherwise)."""
    repo = row.get("repository")
    folder = Path(path).resolve().parent
    if isinstance(repo, dict):
        local = repo.get("local_path")
        if local is not None:
            local = task_folder_path(folder, local, path=Path(where["path"]), line=where["line"],
                                     field=f"{prefix}repository.local_path")
        return RepoRef(url=repo.get("url"), commit=repo.get("commit"), local_path=local)
    local = task_folder_path(folder, f"{paper_id}/code", path=Path(where["path"]), line=where["line"],
                             field=f"{prefix}paper_id")
    return RepoRef(local_path=local)


@TASK_IMPORTERS.register(FORMAT)
class AutoExperimentImporter:
    """AutoExperiment rows (JSONL, or a JSON list)"""

    name = FORMAT
    description = "AutoExperiment rows (JSONL, or a JSON list)"
    Options = NoOptions
    suffixes = (".jsonl", ".json")
    sniff_order = 30

    def sniff(self, path: Path) -> bool:
        return sniff(path)

    def load(self, path: Path, options: NoOptions) -> Loaded[TaskSpec]:
        return Loaded(path=path, format=self.name, records=load_autoexperiment(path))
