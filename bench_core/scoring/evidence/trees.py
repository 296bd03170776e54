"""The trees of one run's scoring, built in its scratch folder: the agent's (the masked repository with its diff),
the pristine masked repository, the constructed tree I and E are decided on (`constructed.py`), and, on first use,
the counterfactual (for a constructed tree the pristine repository itself, the masked code left as stubs; for the
agent's tree the masked parts restored: `counterfactual.restore`) and the transplant (`transplant.py`)."""

from __future__ import annotations

import shutil
from pathlib import Path

from failatlas.bench_core.scoring.evidence.constructed import Constructed, attribution, construct
from failatlas.bench_core.scoring.evidence.counterfactual import Restored, restore
from failatlas.bench_core.scoring.evidence.rerun import clean_trees
from failatlas.bench_core.scoring.evidence.transplant import transplant
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.core.errors import InputError


class Trees:
    """The clean trees of one run (module docstring). `starter(tree)` gives a sandbox starter on a tree."""

    def __init__(self, task: TaskSpec, outputs: dict, scratch: Path, repo: Path | None, starter,
                 memo: dict | None = None) -> None:
        self.task, self.scratch, self.starter, self.memo, self.repo = task, scratch, starter, memo, repo
        self.workspace, self.pristine, self.patch_error = clean_trees(
            task, outputs.get("diff") or "", scratch=scratch, repo=repo)
        self.constructed: Constructed | None = None
        if self.patch_error is None:
            try:
                self.constructed = construct(task, self.workspace, self.pristine, scratch / "constructed")
            except InputError as exc:  # a masked path reached through the agent's link: nothing of it is put in
                shutil.rmtree(scratch / "constructed", ignore_errors=True)
                shutil.copytree(self.pristine, scratch / "constructed", symlinks=True)
                self.constructed = Constructed(scratch / "constructed", attribution(task), notes=[
                    f"the agent's masked code cannot be read: {exc.one_line()}; the stubs stay"])
        self._counterfactual: tuple[Restored, Path | None] | None = None

    @property
    def judged(self) -> Path:
        """The tree I is decided on (and E, unless E is script-attributed)."""
        return self.constructed.path if self.constructed is not None else self.workspace

    @property
    def from_pristine(self) -> bool:
        """Whether the judged tree is built from the pristine repository (not the agent's tree)."""
        return self.constructed is not None and bool(self.task.masking.functions or self.task.masking.files)

    def counterfactual_tree(self, *, of_agent_tree: bool = False) -> tuple[Restored, Path | None]:
        """The counterfactual's description and tree (None: not applicable or not buildable). `of_agent_tree`:
        the agent's own tree with the masked parts restored (a script-attributed E re-runs the agent's tree)."""
        if not of_agent_tree and self.from_pristine:
            dest = self.scratch / "counterfactual-pristine"
            if not dest.exists():
                shutil.copytree(self.pristine, dest, symlinks=True)
            return Restored(dest, restored=list(self.constructed.carried),
                            notes=["the pristine masked repository: every masked part left as its stub"]), dest
        if self._counterfactual is None:
            try:
                restored = restore(self.task, self.workspace, self.pristine, self.scratch / "counterfactual")
            except InputError as exc:  # a masked path reached through the agent's link: judged conservatively
                restored = Restored(None, notes=[f"the counterfactual tree cannot be built from the agent's tree: "
                                                 f"{exc.one_line()}"])
                self._counterfactual = (restored, None)
                return self._counterfactual
            self._counterfactual = (restored, restored.path)
        return self._counterfactual

    def counterfactual(self):
        """The counterfactual's description and a sandbox starter on it (None: none)."""
        restored, tree = self.counterfactual_tree()
        return restored, (self.starter(tree) if tree is not None else None)

    def transplant(self):
        """For a judged tree that is the agent's own (nothing is masked): the transplant tree's description and a
        sandbox starter on it (None: not applicable or not buildable)."""
        try:
            restored = transplant(self.task, self.workspace, self.pristine, self.scratch / "transplant")
        except InputError as exc:  # a masked path reached through the agent's link: nothing of the agent's is put in
            restored = Restored(None, notes=[f"the transplant tree cannot be built: {exc.one_line()}"])
        return restored, (self.starter(restored.path) if restored.path is not None else None)
