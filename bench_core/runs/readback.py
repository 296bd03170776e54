"""Reading an agent's output files back so that nothing it wrote is lost, and nothing the harness lost is blamed on it.

Each output file (design, conclusion, run script) is read twice, through two different paths out of the sandbox:
`read_file` and the copy of the working copy (`copy_out`, a tar stream on Docker). The two agree, or the file is
read again (a fresh `read_file` and a fresh `copy_out` of that file alone), up to `ATTEMPTS` rounds. What the
agent wrote through `AgentContext.write` (size and SHA-256, recorded in its trace step) is checked too: a file
that differs from its last recorded write is read again once more, and if both paths still agree on something
else, that is what the sandbox holds (the agent's own commands changed it after the write: its outputs, noted);
the recorded write never replaces what the sandbox holds. Where the copy cannot tell (it left the file out by its
limits, or its archive came out damaged), the read stands alone only when nothing contradicts it. Paths that
never agree mean the harness cannot say what the agent left: `OutputsUnreadable`, an infrastructure error the
run's status carries, never an empty output scored against the agent.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from failatlas.bench_core.sandbox.model import CopyLimits, CopyReport
from failatlas.bench_core.sandbox.tarballs import DAMAGED
from failatlas.core.errors import InfrastructureError

ATTEMPTS = 3
_PAUSE_S = 0.2


class OutputsUnreadable(InfrastructureError):
    """The agent's output files could not be read back consistently: the harness cannot say what it left."""


@dataclass(frozen=True)
class Written:
    """The last write of one file through `AgentContext.write`, as its trace step recorded it."""

    seq: int
    size: int
    sha256: str


@dataclass(frozen=True)
class Seen:
    """One file as one path out of the sandbox saw it: `state` is 'file' (with `data`, at most cap + 1 bytes),
    'missing', 'unusable' (a folder, FIFO or link where the file belongs; `reason`), 'unknown' (the copy left it
    out by its limits: the agent's files decided that) or 'broken' (the copy's archive came out damaged)."""

    state: str
    data: bytes = b""
    reason: str = ""

    def same(self, other: Seen) -> bool:
        if {"unknown", "broken"} & {self.state, other.state}:
            return False
        return self.state == other.state and self.data == other.data

    def matches(self, written: Written, cap: int) -> bool:
        """Whether this is what `written` put there (as far as the cap lets a read see)."""
        if self.state != "file":
            return False
        if written.size > cap:
            return len(self.data) > cap
        return len(self.data) == written.size and hashlib.sha256(self.data).hexdigest() == written.sha256

    def describe(self) -> str:
        if self.state == "file":
            return f"{len(self.data)} bytes (sha256 {hashlib.sha256(self.data).hexdigest()[:12]})"
        return {"missing": "missing", "unusable": f"unusable ({self.reason})", "broken": "damaged archive"}.get(
            self.state, "left out by the copy's limits")


def recorded_writes(steps: list[Any]) -> dict[str, Written]:
    """Relative path -> its last write through `AgentContext.write`, from the run's trace steps (`StepRow`s)."""
    out: dict[str, Written] = {}
    for step in steps:
        args = step.arguments or {}
        if step.kind != "tool_call" or step.tool != "write_file" or not isinstance(args.get("sha256"), str):
            continue
        path, size = args.get("path"), args.get("size_bytes")
        if isinstance(path, str) and isinstance(size, int):
            out[_norm(path)] = Written(seq=step.seq, size=size, sha256=args["sha256"])
    return out


def _norm(path: str) -> str:
    parts = [p for p in PurePosixPath(path).parts if p not in ("", ".", "/")]
    return "/".join(parts)


def read_seen(sandbox: Any, workdir: str, rel: str, cap: int) -> Seen:
    """`rel` through `sandbox.read_file` (at most cap + 1 bytes). SandboxError and the like propagate."""
    try:
        return Seen("file", sandbox.read_file(f"{workdir}/{rel}", max_bytes=cap + 1))
    except PermissionError as exc:  # SandboxPathError: a folder, FIFO or link where the file belongs
        return Seen("unusable", reason=str(exc))
    except (FileNotFoundError, LookupError):
        return Seen("missing")


def read_all_seen(sandbox: Any, workdir: str, rels: list[str], cap: int) -> dict[str, Seen]:
    """Each of `rels` as `read_seen` sees it, read in one step where the sandbox's kind can
    (`sandbox.protocol.read_files`), else (or when that step fails) one by one. SandboxError and the like of the
    reads one by one propagate."""
    from failatlas.bench_core.sandbox.errors import SandboxError
    from failatlas.bench_core.sandbox.protocol import read_files

    try:
        answers = read_files(sandbox, [f"{workdir}/{rel}" for rel in rels], max_bytes=cap + 1)
    except (PermissionError, SandboxError):
        # together they took longer than one read may, or the output came back without every file's answer (a
        # stream lost on the way: issue 38): each read alone, as `settle` then checks it against the copy
        return {rel: read_seen(sandbox, workdir, rel, cap) for rel in rels}
    out = {}
    for rel, got in zip(rels, answers, strict=True):
        if isinstance(got, PermissionError):  # a folder, FIFO or link where the file belongs
            out[rel] = Seen("unusable", reason=str(got))
        elif isinstance(got, (FileNotFoundError, LookupError)):
            out[rel] = Seen("missing")
        elif isinstance(got, BaseException):
            raise got
        else:
            out[rel] = Seen("file", got)
    return out


def copied_seen(root: Path, rel: str, report: CopyReport, cap: int) -> Seen:
    """`rel` in the copied tree `root`, never following a link; 'broken' when the copy's archive was damaged,
    'unknown' when the copy left it (or a folder above it) out, or stopped early."""
    cut = {c.path for c in report.cut}
    parts = rel.split("/")
    if (report.stopped or "").startswith(DAMAGED):
        return Seen("broken")
    if report.stopped or any("/".join(parts[:i]) in cut for i in range(len(parts) + 1)):
        return Seen("unknown")
    here = root
    for i, part in enumerate(parts):
        here = here / part
        try:
            mode = os.lstat(here).st_mode
        except FileNotFoundError:
            return Seen("missing")
        except NotADirectoryError:
            return Seen("unusable", reason="reached through a file")
        if stat.S_ISLNK(mode):
            return Seen("unusable", reason="a link")
        if i < len(parts) - 1 and not stat.S_ISDIR(mode):
            return Seen("missing")
    if not stat.S_ISREG(mode):
        return Seen("unusable", reason="not a regular file")
    with os.fdopen(os.open(here, os.O_RDONLY | os.O_NOFOLLOW), "rb") as f:
        return Seen("file", f.read(cap + 1))


def _copied_again(sandbox: Any, workdir: str, rel: str, scratch: Path, cap: int, limits: CopyLimits) -> Seen:
    """`rel` through a fresh `copy_out` of that file alone."""
    dest = scratch / "readback"
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    name = rel.rsplit("/", 1)[-1]
    try:
        report = sandbox.copy_out(f"{workdir}/{rel}", dest / name, limits=limits) or CopyReport()
    except (FileNotFoundError, LookupError):
        return Seen("missing")
    except PermissionError as exc:
        return Seen("unusable", reason=str(exc))
    return copied_seen(dest, name, report, cap)


def settle(sandbox: Any, workdir: str, rel: str, *, first: Seen, copied: Seen, written: Written | None,
           scratch: Path, cap: int, limits: CopyLimits) -> tuple[Seen, str | None]:
    """What the sandbox holds at `rel`, from the first read and the copy, read again where they disagree (with
    each other, or with the agent's last recorded write); and a note when it differs from that write. Raises
    OutputsUnreadable when the two paths never agree in `ATTEMPTS` rounds."""
    seen = []
    for attempt in range(ATTEMPTS):
        if attempt:
            time.sleep(_PAUSE_S * attempt)
            first = read_seen(sandbox, workdir, rel, cap)
            copied = _copied_again(sandbox, workdir, rel, scratch, cap, limits)
        seen.append((first, copied))
        agreed = first.same(copied)
        if copied.state in ("unknown", "broken") and (written is None or first.matches(written, cap)):
            agreed = True  # the copy cannot tell: the read alone, which nothing contradicts
        elif copied.state == "unknown" and attempt and first.same(seen[-2][0]):
            agreed = True  # left out by the limits the agent's files reached: two reads agree
        if not agreed:
            continue
        if written is None or first.matches(written, cap):
            return first, None
        if attempt:  # confirmed by a fresh round: what the sandbox holds, changed after the recorded write
            return first, (f"{rel}: the sandbox holds {first.describe()}, not the {written.size} bytes the agent "
                           f"wrote at step {written.seq} (sha256 {written.sha256[:12]}): its own commands changed "
                           "it afterwards; what the sandbox holds is used")
    rounds = "; ".join(f"read {a.describe()}, copied {b.describe()}" for a, b in seen)
    recorded = f"; written {written.size} bytes at step {written.seq}" if written else ""
    raise OutputsUnreadable(f"the agent's {rel} could not be read back consistently in {ATTEMPTS} tries "
                            f"({rounds}{recorded})")
