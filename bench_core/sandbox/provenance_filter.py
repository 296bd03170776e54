"""Summarise the strace log of one command into its process and file events (the provenance of what it wrote).

Runs where the tracer runs, never where the agent's code can reach it: as root inside a Docker sandbox (the agent's
user cannot read, write or signal it), on the host outside a bwrap sandbox's namespaces. It reads strace's output
(`strace -f -y -qq -e signal=none -e status=successful`, see `provenance.STRACE_OPTIONS`) on stdin as it is written
and, when the log ends, writes one JSON summary to the path given (atomically: a temporary file, then a rename), so
a reader sees the whole summary or none. Standard library only: it is copied as a single file into images.

What is kept, bounded whatever the command does (MAX_* below):
- per process (thread group): its parent, what it executed (path and the first arguments) and, in order, the files
  under the watched folders it read as code (`.py`, `.sh`, ...; a `__pycache__/*.pyc` counts as its source; a
  `.pyc` elsewhere and a `.so` count as themselves), where
  a fork inherits its parent's and an exec starts afresh;
- per file under the watched folders: the processes that wrote it (open for writing, write, truncate), created it by
  a rename, a link or a symlink, or removed it, as a capped list of events in log order.
Every path is as the command saw it, made absolute and normalised (the tracee's working folder tracked through
`chdir`/`fchdir`; `-y` gives the folder of each `*at` call and the file behind each descriptor). What strace prints
is parsed with its quoting: strings in `"..."` with C escapes, decoded paths in `<...>` (strace escapes `<` and `>`
inside them), so no file name can pass for syntax.
"""

import json
import os
import re
import sys

MAX_PROCESSES = 20000
MAX_CODE_PER_PROCESS = 64
MAX_FILES = 2000
MAX_EVENTS_PER_FILE = 24
MAX_ARGV = 6
MAX_IMAGES = 4  # per process, the latest programs it executed (a shim's chain of execs ends in the real one)
MAX_TEXT = 160
MAX_LINE = 1 << 20
CODE_SUFFIXES = (".py", ".sh", ".bash", ".pyx", ".ipynb", ".R", ".r", ".jl", ".lua", ".pl", ".rb", ".js")
# code a program loads that is no source: bytecode outside `__pycache__` (Python imports a `json.pyc` where no
# `json.py` stands beside it) and extension modules
LOADED_SUFFIXES = (".pyc", ".so")
WRITE_FLAGS = ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC")
_LINE = re.compile(r"^(\d+)\s+(.*)$", re.S)
_RESUMED = re.compile(r"^<\.\.\. ([A-Za-z0-9_]+) resumed>(.*)$", re.S)
_FD = re.compile(r"^(?:-?\d+|AT_FDCWD)<([^>]*)>")
_TRANSLATED = re.compile(r"/\* (\d+) in strace's PID NS \*/")
_ESC = re.compile(r"\\(x[0-9a-fA-F]{2}|[0-7]{1,3}|.)", re.S)
_SIMPLE = {"n": "\n", "t": "\t", "r": "\r", "v": "\v", "f": "\f", "a": "\a", "b": "\b", "\\": "\\", '"': '"',
           "'": "'", "?": "?"}


def unescape(text):
    """A C-escaped string as strace prints it, decoded (bytes as latin-1, then UTF-8 where they form it)."""
    out = bytearray()
    pos = 0
    for m in _ESC.finditer(text):
        out += text[pos:m.start()].encode("utf-8", "surrogateescape")
        code = m.group(1)
        if code[0] == "x":
            out.append(int(code[1:], 16))
        elif code[0] in "01234567":
            out.append(int(code, 8) & 0xFF)
        else:
            out += _SIMPLE.get(code, code).encode("utf-8", "surrogateescape")
        pos = m.end()
    out += text[pos:].encode("utf-8", "surrogateescape")
    return out.decode("utf-8", "replace")


def split_call(text):
    """`name(args) = result` as (name, [arg texts], result text), the closing parenthesis found outside strings,
    decoded paths and brackets; None for anything else (an unfinished call, a signal line)."""
    paren = text.find("(")
    if paren <= 0:
        return None
    name = text[:paren]
    args, depth, start, i, n = [], 0, paren + 1, paren + 1, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c == "<":
            close = text.find(">", i)
            if close < 0:
                return None
            i = close
        elif c in "[{(":
            depth += 1
        elif c in "]})":
            if depth == 0 and c == ")":
                args.append(text[start:i].strip())
                rest = text[i + 1:].strip()
                if not rest.startswith("="):
                    return None
                return name, [a for a in args if a], rest[1:].strip()
            depth -= 1
        elif c == "," and depth == 0:
            args.append(text[start:i].strip())
            start = i + 1
        i += 1
    return None


def _image(exe, argv, seq, code=None):
    """One program a process ran: what, from which point of the log (`seq`; -1: inherited by a fork), and the
    code files it read, each with the point it was read at (`code_seq`; -1 where a fork inherited it)."""
    code = code or []
    return {"seq": seq, "exe": exe, "argv": argv, "code": code, "code_seq": [-1] * len(code)}


def string_arg(arg):
    """The value of a quoted string argument (`"..."`, possibly cut with `...`), else None."""
    if len(arg) >= 2 and arg[0] == '"':
        end = arg.rfind('"')
        return unescape(arg[1:end]) if end > 0 else None
    return None


def fd_path(arg):
    """The path behind a descriptor argument or result decoded by `-y` (`3</a/b>`, `AT_FDCWD</a>`), else None."""
    m = _FD.match(arg)
    return unescape(m.group(1)) if m else None


def list_arg(arg):
    """The strings of an argv list argument (`["a", "b"...]`), at most MAX_ARGV."""
    out = []
    for m in re.finditer(r'"((?:[^"\\]|\\.)*)"', arg):
        out.append(unescape(m.group(1))[:MAX_TEXT])
        if len(out) >= MAX_ARGV:
            break
    return out


class Summary:
    """The state of one command's log (module docstring)."""

    def __init__(self, workdir, watched):
        self.workdir = os.path.normpath(workdir)
        self.watched = [os.path.normpath(w) for w in [workdir, *watched]]
        self.group = {}       # tid -> pid of its thread group
        self.cwd = {}         # pid -> working folder
        self.processes = {}   # pid -> record
        self.files = {}       # path -> {"events": [...], "count": n}
        self.pending = {}     # tid -> the text of an unfinished call
        self.started = {}     # tid -> the log position its unfinished call started after
        self.born = {}        # pid -> the log position its record was made at
        self.seq = 0
        self.lines = 0
        self.dropped = {"processes": 0, "files": 0, "events": 0, "lines": 0}

    def _pid(self, tid):
        return self.group.get(tid, tid)

    def _process(self, pid):
        found = self.processes.get(pid)
        if found is None:
            if len(self.processes) >= MAX_PROCESSES:
                self.dropped["processes"] += 1
                return None
            found = self.processes[pid] = {"ppid": None, "images": [_image(None, [], -1)]}
            self.born[pid] = self.seq
        return found

    def _watched(self, path):
        return path is not None and any(path == w or path.startswith(w + "/") for w in self.watched)

    def _abs(self, pid, path, base=None):
        if path is None:
            return None
        if not path.startswith("/"):
            path = os.path.join(base or self.cwd.get(pid) or self.workdir, path)
        return os.path.normpath(path)

    def _event(self, path, op, pid, **detail):
        if not self._watched(path):
            return
        entry = self.files.get(path)
        if entry is None:
            if len(self.files) >= MAX_FILES:
                self.dropped["files"] += 1
                return
            entry = self.files[path] = {"events": [], "count": 0}
        entry["count"] += 1
        event = {"seq": self.seq, "op": op, "pid": pid, **detail}
        events = entry["events"]
        if events and events[-1]["op"] == op and events[-1]["pid"] == pid and op == "write":
            events[-1]["seq"] = self.seq  # consecutive writes of one process: one event, its last position
            return
        events.append(event)
        if len(events) > MAX_EVENTS_PER_FILE:  # keep the first (the file's creation) and the latest ones
            del events[1]
            self.dropped["events"] += 1

    def _code(self, pid, path):
        if not self._watched(path):
            return
        folder, name = os.path.split(path)
        if os.path.basename(folder) == "__pycache__" and name.endswith(".pyc"):
            path = os.path.join(os.path.dirname(folder), name.split(".", 1)[0] + ".py")
        elif not name.endswith(CODE_SUFFIXES + LOADED_SUFFIXES):
            return
        record = self._process(pid)
        image = record["images"][-1] if record is not None else None
        if image is not None and path not in image["code"] and len(image["code"]) < MAX_CODE_PER_PROCESS:
            image["code"].append(path)
            image["code_seq"].append(self.seq)

    def _clone(self, pid, args, result, ret, started):
        """A fork or thread `pid` made, logged when the call returned. `-f` attaches the child at once, so its own
        first calls can come in the log before this line (under load, or where the tracer stops only at the traced
        calls): a record made after the call `started` is the child's own, and what it ran is kept; an older one
        is a reused pid's, and is replaced."""
        # a child in another PID namespace (bwrap's) is named as the tracer sees it (--pidns-translation)
        translated = _TRANSLATED.search(result)
        child = int(translated.group(1) if translated else ret.split("<")[0])
        early = child in self.processes and self.born.get(child, -1) > started
        parent = self.processes.get(pid)
        if "CLONE_THREAD" in " ".join(args):
            self.group[child] = pid
            # calls logged while the clone was unfinished may be the thread's, named by its own id: it runs the
            # group's programs, so it gets a record of them, as of now
            record = self._process(child) if parent is not None and (early or started + 1 < self.seq) else None
            if record is not None:
                record["ppid"] = pid
                record["images"] = [dict(i, code=list(i["code"]), code_seq=list(i["code_seq"]))
                                    for i in parent["images"]]
            return
        if not (early and child in self.cwd):
            self.cwd[child] = self.cwd.get(pid, self.workdir)
        record = self._process(child)
        if record is None:
            return
        record["ppid"] = pid
        if parent is None:
            return
        current = parent["images"][-1]  # a fork runs the image its parent runs: what it loaded comes along
        inherited = _image(current["exe"], current["argv"], -1, list(current["code"]))
        first = record["images"][0]
        if not early:
            record["images"] = [inherited]
        elif first["seq"] == -1 and first["exe"] is None:  # the child's own programs after it, kept
            for n, path in enumerate(first["code"]):
                if path not in inherited["code"] and len(inherited["code"]) < MAX_CODE_PER_PROCESS:
                    inherited["code"].append(path)
                    inherited["code_seq"].append(first["code_seq"][n])
            record["images"][0] = inherited

    def feed(self, line):
        self.lines += 1
        if len(line) > MAX_LINE:
            self.dropped["lines"] += 1
            return
        m = _LINE.match(line.rstrip("\n"))
        if not m:
            return
        tid, text = int(m.group(1)), m.group(2)
        resumed = _RESUMED.match(text)
        started = self.seq
        if resumed:
            text = self.pending.pop(tid, resumed.group(1) + "(") + resumed.group(2)
            started = self.started.pop(tid, started)
        elif text.endswith("<unfinished ...>"):
            self.pending[tid] = text[: -len("<unfinished ...>")]
            self.started[tid] = self.seq
            return
        call = split_call(text)
        if call is None:
            return
        self.seq += 1
        try:
            self._call(tid, *call, started=started)
        except (ValueError, IndexError, KeyError):  # a line of a shape not foreseen: skipped, never fatal
            self.dropped["lines"] += 1

    def _call(self, tid, name, args, result, started=None):
        pid = self._pid(tid)
        ret = result.split(" ", 1)[0]
        if name in ("clone", "clone3", "fork", "vfork"):
            self._clone(pid, args, result, ret, self.seq if started is None else started)
            return
        if name in ("execve", "execveat"):
            at = 1 if name == "execveat" else 0
            base = fd_path(args[0]) if at else None
            record = self._process(pid)
            if record is not None:
                exe = self._abs(pid, string_arg(args[at]), base)
                record["images"].append(_image(exe, list_arg(args[at + 1]) if len(args) > at + 1 else [], self.seq))
                del record["images"][:-MAX_IMAGES]
                self._code(pid, exe)  # a script of the repository run as a program
            return
        if name in ("chdir", "fchdir"):
            target = fd_path(args[0]) if name == "fchdir" else self._abs(pid, string_arg(args[0]))
            if target:
                self.cwd[pid] = target
            return
        if name in ("open", "openat", "openat2", "creat"):
            path = fd_path(result) or self._abs(pid, string_arg(args[1 if name.startswith("openat") else 0]),
                                                fd_path(args[0]) if name.startswith("openat") else None)
            flags = "O_WRONLY|O_CREAT|O_TRUNC" if name == "creat" else (args[2] if name.startswith("openat")
                                                                          else args[1] if len(args) > 1 else "")
            if any(f in flags for f in WRITE_FLAGS):
                self._event(path, "open_write", pid, trunc="O_TRUNC" in flags)
            else:
                self._code(pid, path)
            return
        if name in ("write", "pwrite64", "writev", "pwritev", "pwritev2", "ftruncate", "fallocate"):
            self._event(fd_path(args[0]), "truncate" if name == "ftruncate" else "write", pid)
            return
        if name == "truncate":
            self._event(self._abs(pid, string_arg(args[0])), "truncate", pid)
            return
        if name in ("sendfile", "sendfile64", "copy_file_range", "splice"):
            out = fd_path(args[0] if name.startswith("sendfile") else args[2])
            self._event(out, "write", pid)
            return
        if name in ("rename", "renameat", "renameat2", "link", "linkat"):
            if name in ("rename", "link"):
                old, new = self._abs(pid, string_arg(args[0])), self._abs(pid, string_arg(args[1]))
            else:
                old = self._abs(pid, string_arg(args[1]), fd_path(args[0]))
                new = self._abs(pid, string_arg(args[3]), fd_path(args[2]))
            op = "rename" if name.startswith("rename") else "link"
            self._event(new, op + "_to", pid, source=old)
            self._event(old, op + "_from", pid, target=new)
            return
        if name in ("symlink", "symlinkat"):
            target = string_arg(args[0])
            link = self._abs(pid, string_arg(args[-1]), fd_path(args[1]) if name == "symlinkat" else None)
            self._event(link, "symlink", pid, target=(target or "")[:MAX_TEXT])
            return
        if name in ("unlink", "unlinkat", "rmdir"):
            path = self._abs(pid, string_arg(args[1 if name == "unlinkat" else 0]),
                             fd_path(args[0]) if name == "unlinkat" else None)
            self._event(path, "delete", pid)
            return
        if name in ("mknod", "mknodat"):
            path = self._abs(pid, string_arg(args[1 if name == "mknodat" else 0]),
                             fd_path(args[0]) if name == "mknodat" else None)
            self._event(path, "mknod", pid)

    def result(self, complete):
        return {"version": 1, "complete": complete, "workdir": self.workdir, "lines": self.lines,
                "dropped": self.dropped, "processes": {str(k): v for k, v in self.processes.items()},
                "files": self.files}


def main(argv):
    out, workdir, watched = argv[1], argv[2], argv[3:]
    summary = Summary(workdir, watched)
    complete = True
    try:
        for line in sys.stdin.buffer:
            summary.feed(line.decode("utf-8", "surrogateescape"))
    except (OSError, MemoryError):
        complete = False
    tmp = f"{out}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(summary.result(complete), handle, separators=(",", ":"))
    os.replace(tmp, out)


if __name__ == "__main__":
    main(sys.argv)
