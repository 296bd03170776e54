"""FailAtlas's version and the one code-version recipe every stage records."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

__version__ = "0.1.0"


@functools.cache
def code_version() -> str:
    """`failatlas <version>`, plus `+g<commit>` (and `.dirty` with uncommitted changes) when the code runs from
    a git checkout: what every stage run, clustering and taxonomy records as the code that made it."""
    here = Path(__file__).resolve().parent
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True,
                             timeout=5, check=False)
        if rev.returncode != 0 or not rev.stdout.strip():
            return f"failatlas {__version__}"
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=here, capture_output=True, text=True,
                             timeout=5, check=False).stdout.strip()
        if not top or not (Path(top) / "failatlas" / "core" / "version.py").exists():
            return f"failatlas {__version__}"  # an installed copy inside somebody else's repository
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=top,
                               capture_output=True, text=True, timeout=5, check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return f"failatlas {__version__}"
    return f"failatlas {__version__}+g{rev.stdout.strip()}" + (".dirty" if dirty else "")
