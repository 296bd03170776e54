"""Collect an agent's outputs from its sandbox: the output files and the diff against the masked repository.

The diff is computed on the host between the pristine masked tree and a copy of the sandbox's final tree, so an
agent that rewrites its git history or deletes `.git` cannot hide or fake changes.

Everything here reads the agent's files, so nothing here trusts them: output files are read as the agent's user
without following links and up to a cap, and the working copy is copied within `CopyLimits`. What the agent's files
make unusable (an output file that is a folder, FIFO or link; a working copy that cannot be copied out whole
within the limits) is recorded in `RunOutputs.errors`, which makes the run the agent's failure, never an
infrastructure error; what was cut is in `RunOutputs.cut`. The design is read by the one bounded reader for agent
JSON (`failatlas.core.importers.load_untrusted_json`): a design nested past 100 levels, holding an integer past
the range of a float, a lone surrogate or anything but UTF-8 JSON is recorded as unreadable (`design_error`, so
the design phase fails) and the run is stored like any other. Text outputs are decoded with replacement, so no
byte sequence can leave a string the store refuses. Each output file is read through two paths and checked against
what the agent wrote (`readback`): what the harness cannot read back consistently is `OutputsUnreadable`, an
infrastructure error, never an empty output.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from failatlas.bench_core.agents.base import CONCLUSION_FILE, DESIGN_FILE, RUN_SCRIPT
from failatlas.bench_core.runs.diff import tree_diff
from failatlas.bench_core.runs.model import RunOutputs
from failatlas.bench_core.runs.readback import Seen, Written, copied_seen, read_all_seen, settle
from failatlas.bench_core.sandbox.model import CopyLimits, CopyReport
from failatlas.bench_core.sandbox.tarballs import DAMAGED
from failatlas.core.errors import InputError
from failatlas.core.importers import load_untrusted_json

MAX_DIFF_BYTES = 8 * 1024 * 1024
MAX_OUTPUT_FILE = 1024 * 1024
OUTPUT_FILES = (DESIGN_FILE, CONCLUSION_FILE, RUN_SCRIPT)


def fit_diff(diff: str, limit: int) -> tuple[str, list[tuple[str, int]]]:
    """`diff` within `limit` UTF-8 bytes by leaving out whole files, the largest first, so that what is kept still
    applies with `git apply` (a diff cut mid-file would make the validator's patch fail for an honest agent who
    left, say, a large data file). Returns the diff and (header line, bytes) of each file left out."""
    if len(diff.encode()) <= limit:
        return diff, []
    sections = re.split(r"(?m)^(?=diff --git )", diff)
    sizes = [len(section.encode()) for section in sections]
    total, dropped = sum(sizes), set()
    for index in sorted(range(len(sections)), key=lambda i: -sizes[i]):
        if total <= limit:
            break
        if sections[index].startswith("diff --git "):
            dropped.add(index)
            total -= sizes[index]
    kept = "".join(section for i, section in enumerate(sections) if i not in dropped)
    if len(kept.encode()) > limit:  # only a preamble left over the cap: nothing of it applies
        kept = ""
    return kept, [(sections[i].split("\n", 1)[0][len("diff --git "):], sizes[i]) for i in sorted(dropped)]


def _text(rel: str, seen: Seen, limit: int, outputs: RunOutputs) -> str | None:
    """The output file `rel` as the sandbox holds it, as text of at most `limit` bytes; None when it is missing or
    unusable (then recorded in `outputs.errors`)."""
    if seen.state == "unusable":
        outputs.errors.append(seen.reason)
        return None
    if seen.state != "file":
        return None
    data = seen.data
    if len(data) > limit:
        outputs.cut.append(f"{rel}: larger than its {limit}-byte cap; the first {limit} bytes kept")
        data = data[:limit]
    return data.decode("utf-8", errors="replace")


def _copy_out(sandbox, workdir: str, final: Path, limits: CopyLimits) -> CopyReport:
    """The working copy into `final`, copied again once when its archive came out damaged (a stream that broke;
    a second damaged copy stays the agent's, as before: its files or processes may be the cause)."""
    for attempt in range(2):
        if final.exists():
            shutil.rmtree(final)
        report = sandbox.copy_out(workdir, final, limits=limits) or CopyReport()
        if not (report.stopped or "").startswith(DAMAGED) or attempt:
            return report
    return report


def _masked_instead(masked: Path, final: Path, report: CopyReport) -> list[str]:
    """Put the masked version of each repository file the copy left out into `final`, so that the diff does not
    show it deleted: those the report names (or whose folder it names), or every missing one when the copy stopped
    early. Returns them."""
    left_out = {c.path for c in report.cut}
    everything = bool(report.stopped) or "" in left_out
    restored = []
    for here, dirs, files in os.walk(masked):
        dirs[:] = [d for d in dirs if d != ".git"]
        rel_dir = Path(here).relative_to(masked)
        for name in files:
            rel = rel_dir / name
            source, target = masked / rel, final / rel
            if os.path.lexists(target) or source.is_symlink():
                continue
            if not (everything or any(str(part) in left_out for part in (rel, *rel.parents))):
                continue
            if not _real_folder_below(final, rel.parent):
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
            restored.append(str(rel))
    return restored


def _real_folder_below(root: Path, rel: Path) -> bool:
    """Whether every existing part of `root/rel` is a real folder (no link, no file), so writing there stays in."""
    here = root
    for part in rel.parts:
        here = here / part
        if here.is_symlink() or (os.path.lexists(here) and not here.is_dir()):
            return False
    return True


def collect_outputs(sandbox, workdir: str, masked: Path, scratch: Path, *, file_limit: int = MAX_OUTPUT_FILE,
                    copy_limits: CopyLimits | None = None, written: dict[str, Written] | None = None) -> RunOutputs:
    """Read the agent's output files (each up to `file_limit` bytes; checked as `readback` says, against
    `written`, the agent's recorded writes) and diff its final tree, copied within `copy_limits`, against `masked`.
    Raises only for the harness's own failures (SandboxError, OutputsUnreadable and the like)."""
    outputs = RunOutputs()
    # the masked repository's .git is the harness's (the diff never reads it): a large repository's objects must
    # not fill the cap and make an agent's run an agent_error (issue 52, R5)
    limits = (copy_limits or CopyLimits()).model_copy(update={"skip_top": (".git",)})
    first = read_all_seen(sandbox, workdir, list(OUTPUT_FILES), file_limit)  # one command on Docker
    final = scratch / "final"
    report = _copy_out(sandbox, workdir, final, limits)
    if not final.is_dir():  # the working copy itself was left out (unreadable, say)
        final.mkdir(parents=True)
        report.add_cut("", "the working copy itself was not copied")
        outputs.errors.append("the working copy could not be copied out")
    texts = {}
    for rel in OUTPUT_FILES:
        seen, note = settle(sandbox, workdir, rel, first=first[rel], copied=copied_seen(final, rel, report, file_limit),
                            written=(written or {}).get(rel), scratch=scratch, cap=file_limit, limits=limits)
        texts[rel] = _text(rel, seen, file_limit, outputs)
        if note:
            outputs.readback.append(note)
    if texts[DESIGN_FILE] is not None:
        outputs.design_raw = texts[DESIGN_FILE]
        try:
            outputs.design = load_untrusted_json(texts[DESIGN_FILE], DESIGN_FILE)
        except InputError as exc:
            outputs.design_error = f"unreadable: {exc}"
    outputs.conclusion = texts[CONCLUSION_FILE]
    outputs.run_script = texts[RUN_SCRIPT]
    outputs.cut += [f"working copy: {line}" for line in report.lines()]
    restored = _masked_instead(masked, final, report)
    if restored:
        outputs.cut.append(f"working copy: the masked version of {len(restored)} file(s) left out is diffed "
                           f"instead: {', '.join(restored[:20])}" + (" ..." if len(restored) > 20 else ""))
    if report.stopped:
        outputs.errors.append(f"the working copy was not copied out whole: {report.stopped}" + (
            " (a repository with large data or weights: give them with --data NAME=PATH, mounted read-only at "
            "/data/NAME and never copied; or raise the cap with --max-copy-mib)" if report.over_total else ""))
    diff, changed = tree_diff(masked, final)
    diff, dropped = fit_diff(diff, MAX_DIFF_BYTES)
    if dropped:
        outputs.diff_truncated = True
        outputs.cut += [f"{header}: left out of the stored diff ({size:,} bytes; the diff is capped at "
                        f"{MAX_DIFF_BYTES:,} bytes, largest files first)" for header, size in dropped]
    outputs.diff = diff
    outputs.changed_files = changed
    return outputs
