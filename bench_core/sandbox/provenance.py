"""Process and file events of the agent's commands: which processes ran, which files they read as code, which
process wrote which file (docs/sandbox.md, "Provenance").

The mechanism is `strace -f` (ptrace), run by the harness where the agent's code cannot reach it, and its log
summarised as it is written by `provenance_filter.py` (one JSON per command, `ExecResult.provenance`):
- Docker: the tracer runs as root in the container (the image carries `strace`; the container gets the SETUID and
  SETGID capabilities, so that root drops to the sandbox user with `setpriv` for the traced command, and SYS_PTRACE
  and DAC_READ_SEARCH, so that it reads the descriptors of the user's processes; the user, with no new privileges,
  holds none). The agent's user cannot signal, trace or read a root process, the log and summary sit in a folder
  only root can read (`TRACE_DIR`), and root runs the tracer's programs by absolute paths only root can write;
- bwrap: the tracer runs on the host around bwrap, outside the sandbox's PID and mount namespaces: nothing inside
  can see it, and the summary is written to a host folder the sandbox does not mount.
Both: every process the command starts is traced from its first instruction (`-f`; `--seccomp-bpf` stops it only
at the traced calls), and a command whose main process has ended has what it left running killed (Docker: by
`LAUNCHER`, which ends every process of the same tracer; bwrap: its PID namespace ends with it), so the trace ends
with the command. A command run where the tracer is missing (an image without `strace`, a host without it) is run
untraced and says so: its provenance is `{"unavailable": reason}`, never a guess.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from pathlib import Path

FILTER = Path(__file__).with_name("provenance_filter.py")
TRACED = ("execve,execveat,clone,clone3,fork,vfork,open,openat,openat2,creat,write,pwrite64,writev,pwritev,"
          "pwritev2,sendfile,sendfile64,copy_file_range,splice,truncate,ftruncate,fallocate,rename,renameat,"
          "renameat2,link,linkat,symlink,symlinkat,unlink,unlinkat,rmdir,mknod,mknodat,chdir,fchdir")
# `--seccomp-bpf`: the traced processes stop only at the traced calls (a seccomp filter the kernel keeps for them and
# their children, which they cannot remove), not at every call; where the filter cannot be set up, strace stops at
# every call as without it (the same log, slower)
STRACE_OPTIONS = ("-f", "--seccomp-bpf", "-qq", "-y", "--pidns-translation", "-s", "48", "-e", "signal=none",
                  "-e", "status=successful",
                  "-e", f"trace={TRACED}")
TRACE_DIR = "/var/lib/failatlas-trace"  # in a Docker sandbox: root's, mode 0700
MAX_SUMMARY_BYTES = 32 << 20
# run as the sandbox user under the tracer: the command in the background, and when it ends, every other process
# of the same tracer (what it left running) killed, so the tracer ends with the command
# the command runs with the highest OOM score a process may give itself, so that the memory cgroup's OOM killer
# takes the agent's processes before the tracer and its summariser (root's, score 0) and the launcher: an agent that
# fills the sandbox's memory otherwise could end its own tracing (seen: strace killed, every later summary lost)
LAUNCHER = (
    '( { echo 1000 > /proc/self/oom_score_adj; } 2>/dev/null; exec "$@" ) & c=$!; wait "$c"; s=$?; '
    't=; while read -r k v _; do [ "$k" = TracerPid: ] && t=$v; done < /proc/$$/status; '
    'for d in /proc/[0-9]*; do p=${d#/proc/}; [ "$p" = "$$" ] && continue; o=; '
    'while read -r k v _; do [ "$k" = TracerPid: ] && o=$v; done < "$d/status" 2>/dev/null; '
    '[ -n "$t" ] && [ "$o" = "$t" ] && kill -9 "$p" 2>/dev/null; done; exit $s'
)


def strace_binary() -> str | None:
    """The host's strace (None: not installed)."""
    return shutil.which("strace")


def traced_argv(argv: list[str], *, strace: str, summary: str, workdir: str, watched: list[str], python: str,
                filter_path: str) -> list[str]:
    """`argv` under the tracer, its log piped into the summariser (`python filter_path summary workdir watched...`)
    which writes `summary` when the log ends."""
    pipe = "|" + shlex.join([python, "-I", "-S", filter_path, summary, workdir, *watched])
    return [strace, *STRACE_OPTIONS, "-o", pipe, "--", *argv]


def read_summary(path: Path) -> dict:
    """The summary at `path` on this host, or `{"unavailable": reason}` (missing, too large, unreadable)."""
    try:
        size = path.stat().st_size
        if size > MAX_SUMMARY_BYTES:
            return {"unavailable": f"the summary has {size} bytes, more than {MAX_SUMMARY_BYTES}"}
        return parse_summary(path.read_bytes())
    except OSError as exc:
        return {"unavailable": f"no summary was written ({type(exc).__name__})"}


def parse_summary(data: bytes) -> dict:
    """A summary's bytes as a dict, or `{"unavailable": reason}`. What it holds came from the agent's processes
    (paths, arguments), bounded by the summariser; it is parsed as the agent's JSON is."""
    from failatlas.core.errors import InputError
    from failatlas.core.importers import load_untrusted_json

    try:
        value = load_untrusted_json(data, "provenance summary")
    except InputError as exc:
        return {"unavailable": f"the summary is unreadable: {exc.one_line()}"}
    if not isinstance(value, dict) or value.get("version") != 1:
        return {"unavailable": "the summary is not a version-1 summary"}
    return value


def unavailable(reason: str) -> dict:
    """The provenance of a command run untraced, and why."""
    return {"unavailable": reason}


def host_summary_path(folder: Path, marker: str) -> Path:
    """Where a host-side tracer's summary of command `marker` is written (a folder of the harness's own)."""
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    return folder / f"{marker}.json"


def compact(summary: dict) -> str:
    """The summary as stored with the command (`sandbox_commands.provenance`)."""
    return json.dumps(summary, separators=(",", ":"), sort_keys=True)
