"""Collect an agent's outputs from its sandbox: the output files and the diff against the masked repository.

The diff is computed on the host between the pristine masked tree and a copy of the sandbox's final tree, so an
agent that rewrites its git history or deletes `.git` cannot hide or fake changes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

from failatlas.bench_core.agents.base import CONCLUSION_FILE, DESIGN_FILE, OUTPUT_DIR, RUN_SCRIPT
from failatlas.bench_core.runs.model import RunOutputs

MAX_DIFF_BYTES = 8 * 1024 * 1024
MAX_OUTPUT_FILE = 1024 * 1024
_IGNORED = shutil.ignore_patterns(".git", OUTPUT_DIR, "__pycache__", "*.pyc")


def _read(sandbox, path: str) -> str | None:
    try:
        data = sandbox.read_file(path)
    except (FileNotFoundError, LookupError):
        return None
    return data[:MAX_OUTPUT_FILE].decode("utf-8", errors="replace")


def tree_diff(before: Path, after: Path) -> tuple[str, list[str]]:
    """A git-style unified diff (binary-safe) from `before` to `after`, paths relative to the repo root."""
    with tempfile.TemporaryDirectory(prefix="failatlas-diff-") as tmp:
        a, b = Path(tmp) / "a", Path(tmp) / "b"
        shutil.copytree(before, a, ignore=_IGNORED, symlinks=True)
        shutil.copytree(after, b, ignore=_IGNORED, symlinks=True)
        proc = subprocess.run(
            ["git", "-c", "core.quotepath=off", "diff", "--no-index", "--binary", "--no-color",
             "--src-prefix=a/", "--dst-prefix=b/", "a", "b"],
            cwd=tmp, capture_output=True,
        )
        if proc.returncode not in (0, 1):
            raise RuntimeError(f"git diff failed: {proc.stderr.decode(errors='replace')}")
        text = proc.stdout.decode("utf-8", errors="replace")
        text = text.replace(" a/a/", " a/").replace(" b/b/", " b/").replace("--- a/a/", "--- a/")
        text = text.replace("+++ b/b/", "+++ b/").replace("diff --git a/a/", "diff --git a/")
        changed = []
        for line in text.splitlines():
            if line.startswith("diff --git a/"):
                changed.append(line.split(" b/", 1)[-1])
        return text, changed


def collect_outputs(sandbox, workdir: str, masked: Path, scratch: Path) -> RunOutputs:
    """Read the agent's output files and diff its final tree against `masked`."""
    outputs = RunOutputs()
    raw_design = _read(sandbox, f"{workdir}/{DESIGN_FILE}")
    if raw_design is not None:
        outputs.design_raw = raw_design
        try:
            outputs.design = json.loads(raw_design)
        except json.JSONDecodeError as exc:
            outputs.design_error = f"{DESIGN_FILE} is not valid JSON: {exc}"
    outputs.conclusion = _read(sandbox, f"{workdir}/{CONCLUSION_FILE}")
    outputs.run_script = _read(sandbox, f"{workdir}/{RUN_SCRIPT}")
    final = scratch / "final"
    if final.exists():
        shutil.rmtree(final)
    sandbox.copy_out(workdir, final)
    diff, changed = tree_diff(masked, final)
    if len(diff.encode()) > MAX_DIFF_BYTES:
        outputs.diff_truncated = True
        diff = diff.encode()[:MAX_DIFF_BYTES].decode("utf-8", errors="ignore")
    outputs.diff = diff
    outputs.changed_files = changed
    return outputs
