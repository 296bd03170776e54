"""EXP-Bench field repairs: each reads one raw field, repairs the known defects and records a warning; and the
paper index (repository URL, GPU needs) a task file's tasks take their repository from.

See `bench_core.tasks.importers.expbench` for the format and the warning codes.
"""

from __future__ import annotations

import glob
import json
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from failatlas.bench_core.tasks.importers._common import Warnings, is_fenced, json_lines, jsonable, unfence_json
from failatlas.bench_core.tasks.model import DesignSpec
from failatlas.core.errors import InputError

NOTE_KEYS = (
    "design_ambiguity",
    "experiment_setup_complexity",
    "experiment_setup_ambiguity",
    "experiment_constraints",
    "random_uncertainty",
    "systematic_uncertainty",
    "difficulty_level",  # NeurIPS half
)
ROLE_ALIASES = {
    "constant_variables": "constant",
    "constant_variable": "constant",
    "constants": "constant",
    "constant": "constant",
    "controlled_variables": "constant",
    "independent_variables": "independent",
    "independent_variable": "independent",
    "independent": "independent",
    "dependent_variables": "dependent",
    "dependent_variable": "dependent",
    "dependent": "dependent",
}
_LINE_SUFFIX = re.compile(r":\d+(-\d+)?$")


def render(value: Any) -> str:
    """A structured value as readable YAML text (for fields an agent reads as prose)."""
    return yaml.safe_dump(value, sort_keys=False, allow_unicode=True, width=100).strip()


def method_text(value: Any, w: Warnings, extra: dict[str, Any]) -> str | None:
    """`method` as text; a dict (or fenced JSON) is rendered, kept whole in `extra["method_structured"]`."""
    if value is None:
        w.add("missing-method", "no method: the agent gets the question alone")
        return None
    if isinstance(value, str) and is_fenced(value):
        try:
            value = unfence_json(value)
            w.add_to("fenced-json", "method", "arrived as a markdown-fenced JSON string; parsed")
        except ValueError:
            return value.strip()
    if isinstance(value, str):
        return value.strip()
    w.add(
        "method-dict",
        f"method is a {type(value).__name__}, rendered as text; kept whole in extra['method_structured']",
    )
    extra["method_structured"] = jsonable(value)
    return render(value)


def text_field(name: str, value: Any, w: Warnings, extra: dict[str, Any]) -> str | None:
    """A text field stripped (None when empty); a non-text value is rendered and kept in `extra`."""
    if value is None or isinstance(value, str):
        return value.strip() if isinstance(value, str) and value.strip() else None
    w.add("bad-field-type", f"{name} is a {type(value).__name__}, rendered as text; kept in extra['{name}']")
    extra[name] = jsonable(value)
    return render(value)


def requirement_steps(value: Any, w: Warnings, extra: dict[str, Any]) -> list[str]:
    """`requirements` as a list of step texts, whatever shape it arrived in."""
    if value is None:
        return []
    if isinstance(value, str):
        try:
            parsed = unfence_json(value)
            w.add_to("fenced-json", "requirements", "arrived as a JSON string; parsed")
            value = parsed
        except ValueError:
            w.add("bad-field-type", "requirements is text, not a list; split into lines")
            return [line.strip() for line in value.splitlines() if line.strip()]
    if isinstance(value, dict):
        w.add("bad-field-type", "requirements is an object, not a list; its values taken in order")
        extra["requirements"] = jsonable(value)
        value = list(value.values())
    if not isinstance(value, list):
        w.add("bad-field-type", f"requirements is a {type(value).__name__}; kept in extra['requirements']")
        extra["requirements"] = jsonable(value)
        return []
    steps = []
    for item in value:
        if isinstance(item, str):
            steps.append(item)
        else:
            w.add("bad-field-type", "a requirement step is not text; rendered as text")
            steps.append(render(item))
    return steps


def coerce_dict(
    name: str, value: Any, w: Warnings, extra: dict[str, Any], reserved: Iterable[str] = ()
) -> dict[str, Any] | None:
    """A dict field repaired: parsed from (fenced) JSON text, unwrapped from `{name: {...}}`.

    Keys found beside the wrapped value go to `extra` under their own name, or `<name>.<key>` if that is
    taken or `reserved` (a field of the task still to be read). Returns None (keeping the raw value in
    `extra[name]`) when no dict can be recovered.
    """
    reserved = set(reserved)
    value = _parse_if_text(name, value, w)
    depth = 0
    while isinstance(value, dict) and name in value and isinstance(_peek(value[name]), dict):
        inner = value[name]
        siblings = {k: v for k, v in value.items() if k != name}
        for key, sib in siblings.items():
            slot = key if key not in extra and key not in reserved else f"{name}.{key}"
            extra[slot] = jsonable(sib)
            w.add(
                "wrapped-field",
                f"{name} held a '{key}' object beside its own value; moved to extra['{slot}']",
            )
        value = _parse_if_text(name, inner, w)
        depth += 1
    if depth:
        w.add_to("wrapped-field", name, "wrapped in itself as {'<field>': {...}}; unwrapped")
    if isinstance(value, dict):
        return jsonable(value)
    if value is not None:
        if not isinstance(value, str):  # text was reported as unparsed-field already
            w.add(
                "bad-field-type",
                f"{name} is a {type(value).__name__}, not an object; kept as is in extra['{name}']",
            )
        extra[name] = jsonable(value)
    return None


def _peek(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return unfence_json(value)
        except ValueError:
            return value
    return value


def _parse_if_text(name: str, value: Any, w: Warnings) -> Any:
    if not isinstance(value, str):
        return value
    try:
        parsed = unfence_json(value)
    except ValueError:
        w.add("unparsed-field", f"{name} is text that is not JSON; kept as text in extra['{name}']")
        return value
    fenced = "markdown-fenced " if is_fenced(value) else ""
    w.add_to("fenced-json", name, f"arrived as a {fenced}JSON string; parsed")
    return parsed


def design_spec(
    name: str, raw: Any, w: Warnings, extra: dict[str, Any], q: dict[str, Any]
) -> DesignSpec | None:
    value = coerce_dict(name, raw, w, extra, reserved=q)
    if value is None:
        w.add("missing-design", f"{name} holds no usable design: the design cannot be judged")
        return None
    roles: dict[str, dict[str, Any]] = {}
    others: dict[str, Any] = {}
    for key, val in value.items():
        role = ROLE_ALIASES.get(key.strip().lower())
        if role is None:
            others[key] = val
            continue
        if key != f"{role}_variables":
            w.add("design-extra-keys", f"design key '{key}' read as {role}_variables")
        roles.setdefault(role, {}).update(_role_dict(key, val, w))
    for key, val in others.items():
        slot = key if key in NOTE_KEYS and key not in q and key not in extra else f"{name}.{key}"
        extra[slot] = jsonable(val)
        w.add(
            "design-extra-keys", f"{name} holds '{key}', which is not a design role; moved to extra['{slot}']"
        )
    if not roles:
        w.add("missing-design", f"{name} has none of the constant/independent/dependent roles")
        return None
    return DesignSpec(**roles)


def _role_dict(key: str, value: Any, w: Warnings) -> dict[str, Any]:
    value = _parse_if_text(key, value, w) if isinstance(value, str) and is_fenced(value) else value
    if isinstance(value, dict):
        return jsonable(value)
    if value is None:
        return {}
    w.add("bad-field-type", f"design role '{key}' is a {type(value).__name__}, not an object of variables")
    if isinstance(value, str):
        return {value.strip(): None}
    if isinstance(value, list):
        out: dict[str, Any] = {}
        for i, item in enumerate(value):
            if isinstance(item, str):
                out[item.strip()] = None
            elif isinstance(item, dict) and isinstance(item.get("name"), str):
                out[item["name"]] = jsonable({k: v for k, v in item.items() if k != "name"})
            else:
                out[str(i)] = jsonable(item)
        return out
    return {"value": jsonable(value)}


def repo_paths(
    name: str, value: Any, w: Warnings, unmaskable: dict[str, list[str]], as_given: dict[str, Any]
) -> list[str]:
    """Paths relative to the repository root; those that cannot be masked as given are set aside."""
    if value is None:
        return []
    original = value
    if isinstance(value, str):
        try:
            value = unfence_json(value)
            w.add_to("fenced-json", name, "arrived as a JSON string; parsed")
        except ValueError:
            w.add("bad-field-type", f"{name} is a single path, not a list")
            value = [value]
    if not isinstance(value, list):
        w.add("bad-field-type", f"{name} is a {type(value).__name__}, not a list of paths")
        as_given[name] = jsonable(original)
        return []
    out: list[str] = []
    odd = False
    for item in value:
        rel = _repo_path(name, item, w)
        if rel is None:
            unmaskable.setdefault(name, []).append(item if isinstance(item, str) else repr(item))
            odd = True
            continue
        if not (isinstance(item, str) and item.strip() == f"/workspace/{rel}"):
            odd = True
        out.append(rel)
    if odd or original is not value:
        as_given[name] = jsonable(original)
    return out


def _repo_path(name: str, item: Any, w: Warnings) -> str | None:
    if not isinstance(item, str) or not item.strip():
        w.add("bad-field-type", f"{name} holds {item!r}, which is not a path")
        return None
    text = item.strip()
    if _LINE_SUFFIX.search(text):
        w.add("relative-path", f"{name} path {item!r} carries a line range; the range was dropped")
        text = _LINE_SUFFIX.sub("", text)
    if text.startswith("/workspace/"):
        rel = text[len("/workspace/") :]
    elif text.startswith("workspace/"):
        rel = text[len("workspace/") :]
        w.add("relative-path", f"{name} path {item!r} lacks its leading '/'; read as '/{text}'")
    elif text.startswith("/"):
        w.add(
            "unmaskable-path",
            f"{name} path {item!r} is outside /workspace: it cannot be masked as given; "
            "kept in extra['unmaskable_paths']",
        )
        return None
    else:
        rel = text
        w.add("relative-path", f"{name} path {item!r} is relative; taken from the repository root")
    while rel.startswith("./"):
        rel = rel[2:]
    rel = posixpath.normpath(rel) if rel else rel
    if rel in ("", ".") or rel.startswith("..") or rel.startswith("/"):
        w.add(
            "unmaskable-path",
            f"{name} path {item!r} does not name a file inside the repository: "
            "it cannot be masked as given; kept in extra['unmaskable_paths']",
        )
        return None
    return rel


def unique(items: list[str]) -> list[str]:
    """Items in first-seen order without repeats."""
    return list(dict.fromkeys(items))


# -- the paper index: repository URL and GPU needs ----------------------------------------------------------
MAX_GPUS = 64  # a count above this is not a plausible need of one paper: read as unknown
_NUMBER_WORDS = {"one": 1, "single": 1, "a single": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
                 "seven": 7, "eight": 8}
_GPU_COUNT = re.compile(
    r"^(?:gpus?\s*[:=]\s*)?(?:(?:at\s+least|a\s+minimum\s+of|minimum(?:\s+of)?|min\.?)\s+)?"
    r"(?P<low>\d{1,6}(?!\d)|a\s+single|single|one|two|three|four|five|six|seven|eight)"
    r"(?:\s*(?:-|–|to|or)\s*(?:\d+|more))?(?:\s*[x×])?\b",
    re.IGNORECASE,
)
_NO_GPU = re.compile(r"^(?:none|no|0|cpu(?:\s+only)?|not\s+(?:needed|required)|no\s+gpus?\b.*)\.?$",
                     re.IGNORECASE)
_NAMES_A_GPU = re.compile(r"gpu|cuda|nvidia|tesla|geforce|\brtx|\b[ahv]\d{2,3}\b|\ba[68]000\b|\ba800\b",
                          re.IGNORECASE)
_REPO_URL = (
    re.compile(r"(?:https?|git|ssh|git\+ssh)://(?:[^\s/@]+@)?[A-Za-z0-9.-]+(?::\d+)?/\S+"),
    re.compile(r"[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:\S+"),  # scp-like: git@github.com:owner/name.git
    re.compile(r"[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+(?::\d+)?/\S+"),  # github.com/owner/name
)
_NO_URL = {"", "n/a", "na", "none", "null", "-"}
VENUE_FOLDER = re.compile(r"([A-Za-z]+)[_-]?(\d{4})")
INDEX_SUFFIX = "_index.jsonl"


def repo_url(value: str) -> str | None:
    """`value` (the index's `code_url`) stripped, when it is a network repository URL (http(s), git, ssh,
    scp-like or `host/path`); None when it says there is none (`""`, `N/A`). ValueError for anything else: a
    local path, `file://` or a transport such as `ext::` must never reach `git clone` from a downloaded file."""
    text = value.strip()
    if text.lower() in _NO_URL:
        return None
    if text.isprintable() and any(p.fullmatch(text) for p in _REPO_URL):
        return text
    raise ValueError(f"{value[:200]!r} is not a repository URL (https://host/owner/name, git@host:owner/name)")


def gpu_need(reproduce_difficulty: Any, w: Warnings) -> int:
    """GPUs a paper needs, from the index's `reproduce_difficulty.resource_requirements.GPUs`.

    The rule (the index is LLM-written: an int, text, `{type, amount}` (or `count`), a list of those): an integer
    amount is taken as it is; a text is read for its leading count, the lower bound of a range (`1`, `1-2` -> 1,
    `2-8` -> 2, `1 or more` -> 1, `8 x A100` -> 8, `at least one`, `single` -> 1): the least the paper can run
    on; `None`, `no GPU`, `CPU only` -> 0. Without a count, a text that names a GPU (`A100-SXM-80GB`, `requires
    GPU`) -> 1 with a `gpus-guessed` warning; anything else (`N/A`, not given, over MAX_GPUS) -> 0 with a
    `gpus-unknown` warning. A list sums its entries; `resource_requirements` given as one text is read as such."""
    requirements = reproduce_difficulty.get("resource_requirements") if isinstance(reproduce_difficulty,
                                                                                   dict) else None
    value = requirements.get("GPUs", requirements.get("gpus")) if isinstance(requirements, dict) else requirements
    if value is None:
        w.add("gpus-unknown", "the index gives no GPU needs (reproduce_difficulty.resource_requirements.GPUs); "
                              "0 GPUs assumed")
        return 0
    count, named = _gpu_count(value)
    shown = json.dumps(value, ensure_ascii=False)[:160]
    if count is not None and count <= MAX_GPUS:
        return count
    if count is None and named:
        w.add("gpus-guessed", f"the index says {shown} without a count: 1 GPU assumed")
        return 1
    w.add("gpus-unknown", f"the index says {shown}, not a GPU count: 0 GPUs assumed")
    return 0


def _gpu_count(value: Any) -> tuple[int | None, bool]:
    """(the count, or None when there is none; whether the value names a GPU)."""
    if isinstance(value, bool):
        return None, False
    if isinstance(value, int | float):
        return (int(value), True) if value >= 0 and float(value).is_integer() else (None, True)
    if isinstance(value, str):
        text = value.strip()
        if _NO_GPU.match(text):
            return 0, False
        match = _GPU_COUNT.match(text)
        if match:
            low = re.sub(r"\s+", " ", match.group("low").lower())
            return (int(low) if low.isdigit() else _NUMBER_WORDS[low]), True
        return None, bool(_NAMES_A_GPU.search(text))
    if isinstance(value, dict):
        amount = next((value[k] for k in ("amount", "count", "number") if value.get(k) is not None), None)
        count, named = _gpu_count(amount)
        kind = value.get("type")
        return count, named or (isinstance(kind, str) and bool(_NAMES_A_GPU.search(kind)))
    if isinstance(value, list) and value:
        parts = [_gpu_count(item) for item in value]
        if all(count is not None for count, _ in parts):
            return sum(count for count, _ in parts), True
        return None, any(named for _, named in parts)
    return None, False


@dataclass(frozen=True)
class IndexEntry:
    """One paper of the index: its line, and what its tasks take from it."""

    line: int
    code_url: str | None
    title: str | None
    page: str | None
    reproduce_difficulty: Any


@dataclass(frozen=True)
class PaperIndex:
    """An index file's papers by id; `found`: it was found beside the venue folder, not named by the user."""

    path: Path
    papers: dict[str, IndexEntry]
    found: bool = False


_INDEX_CACHE: dict[tuple[str, int, int], dict[str, IndexEntry]] = {}  # one read per index and import


def find_index(path: Path) -> Path | None:
    """The index of the venue folder the task file sits in (`iclr2024_index.jsonl` beside `iclr2024/`): a file
    `<venue folder>*_index.jsonl` in the venue folder's parent, the exact name preferred. None when there is
    none; InputError (with the hint to pass --index) when several could be meant."""
    for folder in path.resolve().parents:
        if not VENUE_FOLDER.fullmatch(folder.name):
            continue
        exact = folder.parent / f"{folder.name}{INDEX_SUFFIX}"
        if exact.is_file():
            return exact
        found = sorted(p for p in folder.parent.glob(f"{glob.escape(folder.name)}*{INDEX_SUFFIX}") if p.is_file())
        if len(found) > 1:
            raise InputError(f"{len(found)} paper indexes fit this task file: {', '.join(p.name for p in found)}",
                             path=str(path), hint="name one with --index FILE")
        return found[0] if found else None
    return None


def read_index(path: Path) -> dict[str, IndexEntry]:
    """The papers of an index file by id; InputError naming the file and line of a malformed line (not JSON,
    not an object, no `id`, an `id` listed twice, a `code_url` that is not a network repository URL)."""
    try:
        stat = path.stat()
    except OSError as exc:
        raise InputError(f"cannot read the paper index: {exc.strerror or exc}", path=str(path)) from exc
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    if key not in _INDEX_CACHE:
        if len(_INDEX_CACHE) >= 8:
            _INDEX_CACHE.clear()
        _INDEX_CACHE[key] = _parse_index(path)
    return _INDEX_CACHE[key]


def _parse_index(path: Path) -> dict[str, IndexEntry]:
    papers: dict[str, IndexEntry] = {}
    for line, row in json_lines(path):
        if not isinstance(row, dict):
            raise InputError(f"an index line must be an object, not {type(row).__name__}", path=str(path), line=line)
        raw_id = row.get("id")
        if isinstance(raw_id, bool) or not isinstance(raw_id, str | int) or not str(raw_id).strip():
            raise InputError(f"must be the paper's id, not {raw_id!r}", path=str(path), line=line, field="id")
        paper_id = str(raw_id).strip()
        if paper_id in papers:
            raise InputError(f"paper {paper_id!r} is listed twice (first at line {papers[paper_id].line})",
                             path=str(path), line=line, field="id")
        url = _index_text(row, "code_url", path, line)
        try:
            url = repo_url(url) if url is not None else None
        except ValueError as exc:
            raise InputError(str(exc), path=str(path), line=line, field="code_url") from exc
        papers[paper_id] = IndexEntry(
            line=line, code_url=url, title=_index_text(row, "title", path, line),
            page=_index_text(row, "url", path, line), reproduce_difficulty=row.get("reproduce_difficulty"))
    return papers


def _index_text(row: dict[str, Any], key: str, path: Path, line: int) -> str | None:
    value = row.get(key)
    if value is not None and not isinstance(value, str):
        raise InputError(f"must be text, not {type(value).__name__}", path=str(path), line=line, field=key)
    return value.strip() or None if isinstance(value, str) else None


def paper_index(path: Path, index: Path | None) -> PaperIndex | None:
    """The index for the task file `path`: `index` when given, else the one found beside it (None if none)."""
    if index is not None:
        return PaperIndex(Path(index), read_index(Path(index)))
    found = find_index(path)
    return PaperIndex(found, read_index(found), found=True) if found is not None else None
