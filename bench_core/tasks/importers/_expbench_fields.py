"""EXP-Bench field repairs: each reads one raw field, repairs the known defects and records a warning.

See `bench_core.tasks.importers.expbench` for the format and the warning codes.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from typing import Any

import yaml

from failatlas.bench_core.tasks.importers._common import Warnings, is_fenced, jsonable, unfence_json
from failatlas.bench_core.tasks.model import DesignSpec

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
