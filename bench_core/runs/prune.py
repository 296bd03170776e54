"""Freeing run folders: `prune(store, PruneParams) -> PruneResult`, the `failatlas bench prune` command.

A run's folder (`<runs dir>/<run id>/`) holds the agent's working copy as it was copied out (`final`) and
whatever the harness left there; nothing the store, `bench report` or the app shows is read from it once the run
is scored (its diff, outputs, commands, verdicts and evidence are rows; scoring builds its trees afresh from the
repository and the stored diff). So the folder of a scored run can go. A run not scored yet, one whose folder
holds a scoring's scratch (`validate-*`, a scoring under way) and anything that is not a run's folder are kept.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from failatlas.bench_core.runs.api import runs_dir_for
from failatlas.core.stages import stage_run
from failatlas.core.store import Store

_RUN_ID = re.compile(r"run-[0-9a-f]{16}")


class PruneParams(BaseModel):
    """What `failatlas bench prune` frees: the folders of scored runs under `runs_dir` (default: runs/ beside
    the store); `dry_run` only counts them."""

    model_config = ConfigDict(extra="forbid")

    runs_dir: Path | None = None
    dry_run: bool = False


class PruneResult(BaseModel):
    """The run folders removed (or, with `dry_run`, that would be), the bytes they held, the folders of runs not
    scored yet that were kept, and the `stage_runs` row's id."""

    pruned: list[str]
    freed_bytes: int
    kept_unscored: int
    stage_run_id: str


def _size(path: Path) -> int:
    total = 0
    for here, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(here, name)).st_size
    return total


def _scored(store: Store) -> set[str]:
    """Ids of the stored runs that have been scored (a validation or a judgement stored)."""
    return {row[0] for row in store.query("SELECT run_id FROM validations UNION SELECT run_id FROM judgements")}


def prune(store: Store, params: PruneParams) -> PruneResult:
    """Remove the folders of scored runs (see the module docstring), recording one `stage_runs` row
    (`bench.prune`). Raises nothing for a folder that is missing or cannot be removed: it is left."""
    with stage_run(store, "bench.prune", params) as record:
        root = runs_dir_for(store, params.runs_dir)
        scored = _scored(store)
        pruned, freed, kept = [], 0, 0
        folders = sorted(p for p in root.iterdir() if _RUN_ID.fullmatch(p.name)) if root.is_dir() else []
        for folder in folders:
            if folder.is_symlink() or not folder.is_dir():
                continue
            if folder.name not in scored or any(p.name.startswith("validate-") for p in folder.iterdir()):
                kept += 1
                continue
            size = _size(folder)
            if not params.dry_run:
                shutil.rmtree(folder, ignore_errors=True)
                if folder.exists():
                    continue
            pruned.append(folder.name)
            freed += size
        record.note(runs_dir=str(root), pruned=len(pruned), freed_bytes=freed, kept_unscored=kept,
                    dry_run=params.dry_run)
    return PruneResult(pruned=pruned, freed_bytes=freed, kept_unscored=kept, stage_run_id=record.id)
