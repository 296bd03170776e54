"""What kind of environment failure a command's output shows: the largest failure class of research agents, named
precisely so that mining gets sharp insights rather than "exit 1".

Kinds, checked in this order (the first that matches wins; a refused network also makes pip say it found no
version, so the network comes first):

- `registry_unreachable`: an allowed package index could not be reached (the egress proxy's 502 "cannot reach",
  "Tunnel connection failed: 502"): an outage of the registry or the host's proxy, infrastructure rather than the
  agent, never "refused by policy";
- `network_refused`: the sandbox's network policy refused the connection (the egress proxy's 403, no route, no
  name resolution);
- `cuda_mismatch`: the CUDA build, driver or device does not fit (too old a driver, no kernel image for the GPU,
  a CPU-only build asked for CUDA, a missing libcudart);
- `wheel_build_failed`: a package had to be compiled and its build failed;
- `version_conflict`: the resolver found no set of versions that fits, or an installed version clashes;
- `package_not_found`: the index has no such package (or no version of it for this Python);
- `missing_module`: an import failed because a third-party module is not installed.
"""

from __future__ import annotations

import re

from pydantic import BaseModel

ENV_FAILURE_KINDS = ("registry_unreachable", "network_refused", "cuda_mismatch", "wheel_build_failed",
                     "version_conflict", "package_not_found", "missing_module")

_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("registry_unreachable", re.compile(
        r"Tunnel connection failed: 502|failatlas: cannot reach|502 Bad Gateway")),
    ("network_refused", re.compile(
        r"refused by the sandbox's network policy|Tunnel connection failed: 403|ProxyError|403 Forbidden"
        r"|Network is unreachable|Temporary failure in name resolution|Could not resolve host"
        r"|Name or service not known|Failed to establish a new connection|Connection refused")),
    ("cuda_mismatch", re.compile(
        r"CUDA driver version is insufficient|no kernel image is available for execution|NVIDIA driver on your "
        r"system is too old|Torch not compiled with CUDA enabled|libcudart\.so[^\s]* cannot open|libcu\w+\.so"
        r"[^\s]*: cannot open shared object file|no CUDA-capable device is detected|CUDA error: "
        r"|Found no NVIDIA driver")),
    ("wheel_build_failed", re.compile(
        r"Failed building wheel for (\S+)|Could not build wheels for (\S+)|Failed to build (\S+)"
        r"|error: command '[^']*(?:gcc|g\+\+|cc|nvcc)[^']*' failed|legacy-install-failure"
        r"|metadata-generation-failed")),
    ("version_conflict", re.compile(
        r"ResolutionImpossible|conflicting dependencies|Cannot install .* because these package versions have "
        r"conflicting|requires (\S+)[^,\n]*, but you have|VersionConflict|pkg_resources\.ContextualVersionConflict")),
    ("package_not_found", re.compile(
        r"No matching distribution found for (\S+)|Could not find a version that satisfies the requirement (\S+)"
        r"|PackagesNotFoundError|Unable to locate package (\S+)")),
    ("missing_module", re.compile(r"ModuleNotFoundError: No module named '([A-Za-z0-9_.]+)'")),
)


class EnvFailure(BaseModel):
    """One classified environment failure: its kind, the package it names (when it does) and the line showing it."""

    kind: str
    package: str | None = None
    evidence: str


def classify_env_failure(output: str, *, own_modules: frozenset[str] | set[str] = frozenset()) -> EnvFailure | None:
    """The environment failure `output` (a failed command's stdout and stderr) shows, or None when it shows none.
    A missing module that the repository itself provides (`own_modules`) is a missing component, not an
    environment failure."""
    for kind, pattern in _RULES:
        for match in pattern.finditer(output):
            package = next((g for g in match.groups() if g), None)
            if kind == "missing_module" and package and package.split(".")[0] in own_modules:
                continue
            start = output.rfind("\n", 0, match.start()) + 1
            end = output.find("\n", match.end())
            line = output[start:end if end >= 0 else len(output)].strip()
            return EnvFailure(kind=kind, package=package.strip("'\"") if package else None, evidence=line[:500])
    return None


def env_failure_steps(commands: list, *, own_modules: frozenset[str] | set[str] = frozenset()) -> list[dict]:
    """One trace step (`kind` 'env_failure', `tool` the failure's kind) per failed command whose output shows an
    environment failure. `commands` are rows with `seq`, `command`, `exit_code`, `timed_out`, `stdout_tail` and
    `stderr_tail` (attributes or keys)."""
    steps = []
    for c in commands:
        get = c.get if isinstance(c, dict) else lambda name, _c=c: getattr(_c, name)
        if get("exit_code") in (0, None) or get("timed_out"):
            continue
        found = classify_env_failure((get("stderr_tail") or "") + "\n" + (get("stdout_tail") or ""),
                                     own_modules=own_modules)
        if found is not None:
            steps.append({"kind": "env_failure", "tool": found.kind, "content": found.evidence,
                          "arguments": {"kind": found.kind, "package": found.package, "command_seq": get("seq"),
                                        "command": (get("command") or "")[:300]}})
    return steps


def egress_steps(log: list[dict]) -> list[dict]:
    """One trace step (`kind` 'network', `tool` 'egress') per decision of a sandbox's egress proxy."""
    steps = []
    for entry in log:
        verdict = "allowed" if entry.get("allowed") else "refused"
        nc = " (not connected)" if entry.get("connected") is False else ""
        target = f"{entry.get('host')}:{entry.get('port')}"
        steps.append({"kind": "network", "tool": "egress",
                      "content": f"{verdict}{nc} {entry.get('method')} {target} ({entry.get('reason')})"[:500],
                      "arguments": {k: entry.get(k) for k in ("ts", "method", "host", "port", "allowed", "connected",
                                                                    "reason")}})
    return steps


# the frameworks a research repository's code is written for; a requirement's distribution name -> its module
HEAVY_PACKAGES = {"torch": "torch", "tensorflow": "tensorflow", "tensorflow-gpu": "tensorflow",
                  "tensorflow-cpu": "tensorflow", "jax": "jax", "jaxlib": "jax"}
_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def heavy_modules(requirements: list[str]) -> dict[str, str]:
    """module -> the requirement asking for it, for each heavy framework (HEAVY_PACKAGES) a spec names."""
    out: dict[str, str] = {}
    for requirement in requirements:
        m = _REQUIREMENT_NAME.match(requirement)
        name = m.group(1).lower().replace("_", "-") if m else ""
        module = HEAVY_PACKAGES.get(name)
        if module is not None and module not in out:
            out[module] = requirement
    return out
