"""Which host interpreter a task's venv is made with (issue 52, R1).

A venv made for bwrap sandboxes links to its interpreter, so the interpreter (and the site-packages it lends the
venv) must lie under the folders every sandbox sees (`bwrap_setup.SYSTEM_DIRS`: /usr, /opt, ...). The default is
the Python that runs FailAtlas: the one the user installed their packages (a GPU node's PyTorch) into. When a
sandbox cannot see it (a pyenv or a venv under a home folder), nothing is picked behind the user's back: a
ConfigError says why and lists the interpreters a sandbox can see, for `--python PATH`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from failatlas.bench_core.sandbox.errors import SandboxError
from failatlas.core.errors import ConfigError


def _seen(path: str) -> bool:
    from failatlas.bench_core.sandbox.bwrap_setup import SYSTEM_DIRS

    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in SYSTEM_DIRS)


def visible_candidates() -> list[str]:
    """`python3` and `python3.X` executables a sandbox can see: on this PATH under the sandboxes' folders, then
    /usr/local/bin, /usr/bin and /opt/*/bin, /opt/*/.venv/bin (each resolved path once)."""
    folders = [*os.environ.get("PATH", "").split(os.pathsep), "/usr/local/bin", "/usr/bin",
               *(str(p) for p in sorted(Path("/opt").glob("*/bin"))),
               *(str(p) for p in sorted(Path("/opt").glob("*/.venv/bin")))]
    out: list[str] = []
    real: set[str] = set()
    for folder in folders:
        if not folder or not _seen(folder):
            continue
        try:
            names = sorted(n for n in os.listdir(folder) if n == "python3" or
                           (n.startswith("python3.") and n[8:].isdigit()))
        except OSError:
            continue
        for name in names:
            path = os.path.join(folder, name)
            resolved = os.path.realpath(path)
            if os.access(path, os.X_OK) and os.path.isfile(path) and _seen(resolved) and resolved not in real:
                real.add(resolved)
                out.append(path)
    return out


def describe(python: str) -> str:
    """`PATH (Python 3.11.2, torch 1.13.1)`: an interpreter with its version and whether it has torch."""
    probe = ("import sys, importlib.util as u; v = sys.version_info; t = None\n"
             "if u.find_spec('torch'):\n"
             "    from importlib.metadata import version\n"
             "    try: t = version('torch')\n"
             "    except Exception: t = '?'\n"
             "print('%d.%d.%d' % v[:3], t or '-')")
    try:
        out = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=60).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return f"{python} (cannot run)"
    if len(out) != 2:
        return f"{python} (cannot run)"
    return f"{python} (Python {out[0]}, " + ("no torch" if out[1] == "-" else f"torch {out[1]}") + ")"


def _site_folders(python: str) -> list[str]:
    ask = "import json, site, sys; print(json.dumps([sys.prefix, sys.base_prefix, *site.getsitepackages()]))"
    try:
        res = subprocess.run([python, "-c", ask], capture_output=True, text=True, timeout=60, check=True)
        import json

        return [str(p) for p in json.loads(res.stdout.strip().splitlines()[-1])]
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as exc:
        raise SandboxError(f"cannot run {python}: {exc}") from exc


def _hidden_part(python: str) -> str | None:
    """The first of `python`'s path, its resolved path, prefixes and site folders a sandbox cannot see."""
    for path in (python, os.path.realpath(python), *_site_folders(python)):
        if not _seen(os.path.abspath(path)):
            return path
    return None


def _choices() -> str:
    found = visible_candidates()
    if not found:
        return "this host has none under /usr or /opt: install one there (or build with Docker)"
    return "this host has: " + "; ".join(describe(p) for p in found[:6])


def choose(python: str | None) -> str:
    """The interpreter a venv is made with: `python` (`--python`), else the one running FailAtlas; ConfigError
    saying why and what to pass when a sandbox cannot see it (or `python` is no interpreter)."""
    from failatlas.bench_core.sandbox.bwrap_setup import SYSTEM_DIRS

    seen = ", ".join(SYSTEM_DIRS)
    if python is not None:
        path = os.path.abspath(os.path.expanduser(python))
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise ConfigError(f"--python {python}: no executable file there", hint=_choices())
        hidden = _hidden_part(path)
        if hidden is not None:
            raise ConfigError(f"--python {python}: sandboxes cannot see {hidden} (they see only {seen})",
                              hint=_choices())
        return path
    running = sys.executable
    hidden = _hidden_part(running)
    if hidden is None:
        return running
    raise ConfigError(
        f"the Python that runs FailAtlas ({describe(running)}) cannot make a venv for sandboxes: {hidden} is "
        f"outside the folders they see ({seen})",
        hint=f"pass --python PATH, an interpreter under those folders that has (or can install) the spec's "
             f"packages; {_choices()}")
