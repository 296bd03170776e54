"""The kind of a free-text statement (imported traces, the LLM extractor, LLM judges' sentences): inferred from
what the words give away (the phase, exception names, well-known error messages), `unknown` when they give away
nothing. Statements mined from our own runs do not come here: they are classified by the run's evidence
(ingest/statements.py)."""

from __future__ import annotations

import re

from failatlas.ingest.kinds import UNKNOWN
from failatlas.ingest.modules import package_of
from failatlas.ingest.signatures import Signature, error_signatures

# what each error signature (ingest/signatures.py) says about the kind; `missing_module` is decided by the module
SIGNATURE_KINDS: dict[str, str] = {
    "import_name": "environment_incompatible",
    "no_gpu": "environment_incompatible",
    "cuda_oom": "budget_exhausted",
    "cuda_error": "environment_incompatible",
    "host_oom": "budget_exhausted",
    "file_not_found": "crash",
    "not_implemented": "unimplemented",
    "shape_mismatch": "crash",
    "device_mismatch": "crash",
    "timeout": "budget_exhausted",
    "command_not_found": "environment_incompatible",
    "package_install": "dependency_not_installed",
    "network": "network_refused",
    "permission": "crash",
    "syntax_error": "crash",
    "undefined_name": "crash",
    "missing_attribute": "crash",
    "bad_arguments": "crash",
    "nan": "wrong_value",
    "key_error": "crash",
    "assertion": "crash",
    "exception": "crash",
}
_PHRASES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("result_not_produced", re.compile(r"fabricat|not produced by|did not produce|without (?:running|executing)",
                                       re.IGNORECASE)),
    ("unimplemented", re.compile(r"not implemented|unimplemented|left out|\bstubs?\b|placeholder", re.IGNORECASE)),
    ("dependency_not_installed", re.compile(r"not installed|missing (?:package|dependency|library)", re.IGNORECASE)),
    ("network_refused", re.compile(r"network (?:access )?(?:was )?(?:refused|blocked|unavailable)", re.IGNORECASE)),
    ("budget_exhausted", re.compile(r"time ?limit|timed out|out of memory|\bOOM\b", re.IGNORECASE)),
    ("wrong_value", re.compile(r"do(?:es)? not match the expected|wrong (?:value|result)|differs? from the expected",
                               re.IGNORECASE)),
)
_MISSING_MODULE = re.compile(r"\bmissing (?:module|package|library) [`'\"]?(?P<module>[A-Za-z_][\w.]*)", re.IGNORECASE)
_NO_CONCLUSION = re.compile(r"no conclusion|conclusion is missing|left unanswered|did not (?:write|give) a conclusion",
                            re.IGNORECASE)
_NO_DESIGN = re.compile(r"\bno (?:experiment(?:al)? )?design\b|\bdesign (?:is|was) missing"
                        r"|did not (?:write|give) (?:an? )?(?:experiment(?:al)? )?design", re.IGNORECASE)
_DESIGN_VARIABLE = re.compile(r"\bvariables?\b|\b(?:held|kept) (?:fixed|constant)|\bnever varied\b|\bsweep",
                              re.IGNORECASE)


def infer_facets(phase: str, text: str, given_object: str | None = None) -> tuple[str, str | None]:
    """(kind, object) of a free-text statement in `phase`; `unknown` where the text gives nothing away."""
    if phase == "monitor":
        found = _phrase_kind(text)
        return ("result_not_produced" if found == "result_not_produced" else "monitor_violation"), given_object
    if phase == "conclusion":
        return ("conclusion_missing" if _NO_CONCLUSION.search(text) else "conclusion_unsupported"), given_object
    if phase == "design":
        if _NO_DESIGN.search(text):
            return "design_missing", given_object
        return ("design_variable" if _DESIGN_VARIABLE.search(text) else UNKNOWN), given_object
    said = _MISSING_MODULE.search(text)
    for signature in error_signatures(text) or ([_said(said.group("module"))] if said else []):
        if signature.key == "missing_module":
            package = package_of(signature.detail["module"])
            if package:
                return "dependency_not_installed", given_object or package
            return UNKNOWN, given_object or signature.detail["module"]
        kind = SIGNATURE_KINDS.get(signature.key)
        if kind:
            return kind, given_object
    if phase == "other":  # traces outside an experiment's phases (TRAIL): only exceptions and modules tell a kind
        return UNKNOWN, given_object
    return (_phrase_kind(text) or UNKNOWN), given_object


def _phrase_kind(text: str) -> str | None:
    for kind, pattern in _PHRASES:
        if pattern.search(text):
            return kind
    return None


def _said(module: str) -> Signature:
    return Signature("missing_module", "", {"module": module})
