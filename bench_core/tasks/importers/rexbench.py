"""RExBench importer: one task folder -> one `TaskSpec` of kind `extension`.

Documented format. RExBench (arXiv 2506.22598, github.com/tinlaboratory/RExBench) publishes
`instructions/<task>/instructions.md`: "## Background", "## Extension to be implemented", "### Evaluation"
(which command is run and which output decides), then optional "### Hints" and "### More detailed hints"
sections, the cumulative hint levels its `process_instructions.py` cuts into `-default`, `-hints`,
`-more_detailed_hints`. Its oracle outcomes and success checks are not in that repository (its evaluation
scripts compare the output with the oracle value exactly, e.g. COGS, or within a band around it, e.g.
Othello's +-0.002 per layer), so a task folder carries them in files of its own:

    <task>/                        the folder name is the task name (`othello`)
      instructions.md              RExBench's file, as published
      task.json | task.yaml        metadata, every key optional except `eval.command`:
        name, title, paper {id, title, year, url, arxiv_id}, extension_paper {...},
        repository {url, commit, local_path}  the base repository at its pinned commit (local_path: a
                                            folder inside the task folder)
        eval {command, metric, results_file}  the command whose output decides success (results_file:
                                            relative to the repository root)
        success {kind: exact | tolerance | oracle_band, metric, value, rtol, atol, band, oracle_values}
        expected [{name, value, rtol, atol}]  further per-metric checks (e.g. one per layer)
        resources {gpus, time_limit_s, memory_gb, cpus, image, network}
      oracle.json                  the oracle outcome: {"metric": m, "values": [runs...]} or
                                   {"runs": [{m: value, ...}, ...]}; fills an oracle_band's oracle_values

The task id is `rexbench-<name>`. Unknown metadata keys are kept in `extra`. A missing `instructions.md`, a
malformed metadata file, a criterion that cannot be checked, or a path that is absolute, holds '..' or leaves its
folder through a link (`repository.local_path` the task folder, `eval.results_file` the repository) raises
`InputError` naming the file and field.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

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
from failatlas.core.importers import Loaded, NoOptions

FORMAT = "rexbench"
INSTRUCTIONS = "instructions.md"
META_FILES = ("task.json", "task.yaml", "task.yml")
ORACLE = "oracle.json"
HINT_HEADINGS = ("### Hints", "### More detailed hints")
MAPPED_KEYS = frozenset({"name", "title", "paper", "repository", "eval", "success", "expected", "resources"})


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


def load_rexbench(path: str | Path) -> list[TaskSpec]:
    """The one task of a RExBench task folder; raises InputError naming the file and field if malformed."""
    path = Path(path)
    folder = task_folder(path)
    if folder is None:
        raise InputError(
            f"a RExBench task is a folder holding {INSTRUCTIONS}; none found",
            path=str(path / INSTRUCTIONS if path.is_dir() else path),
        )
    folder = folder.resolve()
    w = Warnings()
    text = read_text(folder / INSTRUCTIONS)
    instructions, hints = split_hints(text)
    if not instructions.strip():
        raise InputError("is empty", path=str(folder / INSTRUCTIONS))
    meta_path, meta = _metadata(folder)
    oracle = _oracle(folder)
    name = str(meta.get("name") or folder.name)
    task_id = "rexbench-" + (re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-._") or "task")

    ev = _section(meta, "eval", meta_path)
    command = ev.get("command")
    if not isinstance(command, str) or not command.strip():
        raise InputError(
            "missing: the command whose output decides success", path=str(meta_path), field="eval.command"
        )
    success = _success(meta, ev, oracle, meta_path, w)
    if success is None and not meta.get("expected"):
        w.add("missing-criterion", "no success criterion and no expected values: success cannot be decided")
    if not hints:
        w.add("no-hints", "instructions.md has no '### Hints' section: only the default level exists")
    repo = _section(meta, "repository", meta_path)
    if not repo.get("commit"):
        w.add("unpinned-repo", "the base repository has no pinned commit")
    local_path, results_file = _paths(folder, repo, ev, meta_path)

    extra: dict[str, Any] = {k: jsonable(v) for k, v in meta.items() if k not in MAPPED_KEYS}
    try:
        resources = Resources(**_section(meta, "resources", meta_path))
    except ValidationError as exc:
        raise validation_error(exc, path=meta_path, prefix="resources") from exc
    if oracle is not None:
        extra["oracle"] = jsonable(oracle)
    extra["instructions_md"] = text
    try:
        return [
            TaskSpec(
                id=task_id,
                benchmark=Benchmark.REXBENCH.value,
                kind=TaskKind.EXTENSION,
                title=meta.get("title") or name,
                paper=PaperMeta(**_section(meta, "paper", meta_path)),
                repository=RepoRef(url=repo.get("url"), commit=repo.get("commit"), local_path=local_path),
                question=_extension(instructions),
                instructions=instructions.strip(),
                hints=hints,
                run=RunSpec(
                    command=command.strip(),
                    results_file=results_file,
                    timeout_s=ev.get("timeout_s", resources.time_limit_s),
                ),
                expected_results=[ExpectedMetric(**e) for e in _list(meta, "expected", meta_path)],
                success=success,
                resources=resources,
                source=str((meta_path or folder).resolve()),
                warnings=w.items,
                extra=extra,
            )
        ]
    except ValidationError as exc:
        raise validation_error(exc, path=meta_path or folder, prefix="") from exc
    except TypeError as exc:
        raise InputError(str(exc), path=str(meta_path or folder)) from exc


def split_hints(text: str) -> tuple[str, list[str]]:
    """(instructions without hints, [hints, more detailed hints]) as RExBench's own splitter cuts them."""
    lines = text.splitlines()
    marks = [next((i for i, line in enumerate(lines) if line.strip() == h), None) for h in HINT_HEADINGS]
    present = sorted(i for i in marks if i is not None)
    if not present:
        return text, []
    base = "\n".join(lines[: present[0]]).rstrip()
    hints = []
    for start, end in zip(present, [*present[1:], len(lines)], strict=True):
        body = "\n".join(lines[start + 1 : end]).strip()
        if body:
            hints.append(body)
    return base, hints


def _extension(instructions: str) -> str:
    """The text under '## Extension to be implemented' (to the next heading), else the whole instructions."""
    match = re.search(
        r"^##\s+Extension to be implemented\s*$(?P<body>.*?)(?=^#{1,3}\s|\Z)",
        instructions,
        flags=re.MULTILINE | re.DOTALL | re.IGNORECASE,
    )
    body = match.group("body").strip() if match else ""
    return body or instructions.strip()


def _metadata(folder: Path) -> tuple[Path | None, dict[str, Any]]:
    for name in META_FILES:
        path = folder / name
        if not path.is_file():
            continue
        data = load_json(path) if path.suffix == ".json" else load_yaml(path)
        if not isinstance(data, dict):
            raise InputError("must hold an object of task metadata", path=str(path))
        return path, data
    raise InputError(
        f"missing: a RExBench task folder needs {' or '.join(META_FILES)} naming at least eval.command",
        path=str(folder / META_FILES[0]),
    )


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
            raise InputError(
                "must be a list of objects of metric -> value", path=str(folder_file), field="runs"
            )
        values = [r[metric] for r in runs if metric in r]
    if not isinstance(values, list) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in values
    ):
        raise InputError("oracle values must be numbers", path=str(folder_file), field="values")
    return [float(v) for v in values]


def _success(
    meta: dict[str, Any],
    ev: dict[str, Any],
    oracle: dict[str, Any] | None,
    meta_path: Path | None,
    w: Warnings,
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
    """RExBench task folders (instructions.md + task.json/yaml + oracle.json)"""

    name = FORMAT
    description = "RExBench task folders (instructions.md + task.json/yaml + oracle.json)"
    Options = NoOptions
    suffixes = ()
    sniff_order = 10

    def sniff(self, path: Path) -> bool:
        return sniff(path)

    def load(self, path: Path, options: NoOptions) -> Loaded[TaskSpec]:
        return Loaded(path=path, format=self.name, records=load_rexbench(path))

    def root(self, path: Path) -> Path:
        return task_folder(path) or path
