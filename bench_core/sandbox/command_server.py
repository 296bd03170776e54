"""The command server that runs inside a Docker sandbox (`docker_server.py` starts it and talks to it).

Its source is passed whole to the image's `python3 -I -S -c` by one root `docker exec` with stdin attached; it uses
the standard library only (Python 3.9 or later) and imports nothing of FailAtlas. It answers requests on its stdin
with frames on its stdout, one process per request, so that a command costs a fork in the container instead of a
`docker exec` (dockerd, containerd and runc: about 55 ms of the host's CPU each, benchmarks/RESULTS.md).

Each process is started as `docker exec` starts one: the user's uid, gid and (for a user with a passwd entry and no
explicit group) groups, the primary one among them; the container's environment, then the request's, then `HOME`
from the passwd entry where neither set it; the working folder; its stdout and stderr pipes owned by the user
(runc's chown); a session of its own; stdin `/dev/null`; umask 022; default signal dispositions. A process that
cannot start prints runc's message (`OCI runtime exec failed: ...`) and exits 126. Its output is forwarded until
both pipes close or 2 s after it exits, whichever is first (so a background process holding them does not hold the
command, as with `docker exec`). A process killed by a signal exits 128 + that signal. Every process it starts gets
`oom_score_adj` 1000, so that at the container's memory limit the kernel ends them before this server or init (the
order among them is unchanged). The server is root: the sandbox user can neither signal it nor open its descriptors,
and the harness is the only writer of its stdin.

Frames, both ways: a 1-byte kind, a 4-byte command number and a 4-byte length (big-endian), then that many bytes.
Harness to server: `S` (start: JSON `argv`, `user`, `env`, `cwd`). Server to harness: `R` (ready, once, JSON of its
version), `O` and `E` (stdout and stderr bytes), `X` (ended: JSON `code`, after the last output).
"""

SOURCE_VERSION = 1

SERVER = r"""
import json, os, pwd, grp, selectors, signal, struct, subprocess, sys, time
HEADER = struct.Struct(">cII")
LINGER_S = 2.0
READ = 65536
BASE_ENV = json.loads(sys.argv[1])
BASE_CWD = os.getcwd()
os.chdir("/")  # not in a folder the sandbox user writes
NULL = os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC)
sel = selectors.DefaultSelector()
commands = {}  # number -> [process, {fd: kind}, ended at]
pending = bytearray()


def send(kind, number, data=b""):
    view = memoryview(HEADER.pack(kind, number, len(data)) + data)
    while view:
        view = view[os.write(1, view):]


def ident(user):
    name, _, group = user.partition(":")
    entry = None
    try:
        entry = pwd.getpwuid(int(name)) if name.isdigit() else pwd.getpwnam(name)
    except KeyError:
        if not name.isdigit():
            raise OSError(0, "unable to find user " + name + ": no matching entries in passwd file")
    uid = int(name) if name.isdigit() else entry.pw_uid
    if group:
        gid = int(group) if group.isdigit() else grp.getgrnam(group).gr_gid
        groups = [gid]
    else:
        gid = entry.pw_gid if entry else 0
        groups = [gid] + [g for g in os.getgrouplist(entry.pw_name, gid) if g != gid] if entry else [gid]
    return uid, gid, groups, (entry.pw_dir if entry else "/")


def set_oom(value):
    with open("/proc/self/oom_score_adj", "w") as f:
        f.write(value)


def start(number, request):
    argv = request["argv"]
    try:
        uid, gid, groups, home = ident(request["user"])
        env = dict(BASE_ENV)
        env.update(request["env"])
        env.setdefault("HOME", home)
        cwd = request.get("cwd") or BASE_CWD
        if not os.path.isdir(cwd):
            raise OSError(0, 'chdir to cwd ("' + cwd + '") set in config.json failed: no such file or directory')
        # the pipes are the user's, as runc makes them: a process may reopen them (`/dev/fd/N`)
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        try:
            os.fchown(out_r, uid, gid)
            os.fchown(err_r, uid, gid)
            set_oom("1000")  # inherited by the fork; this server's own is restored at once
            try:
                proc = subprocess.Popen(argv, stdin=NULL, stdout=out_w, stderr=err_w, env=env, cwd=cwd, user=uid,
                                        group=gid, extra_groups=groups, start_new_session=True, umask=0o022)
            finally:
                set_oom("0")
        except BaseException:
            for fd in (out_r, err_r):
                os.close(fd)
            raise
        finally:
            os.close(out_w)
            os.close(err_w)
    except Exception as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        if isinstance(exc, FileNotFoundError) and exc.filename is not None:
            reason = 'exec: "' + argv[0] + '": executable file not found in $PATH'
        elif isinstance(exc, PermissionError) and exc.filename is not None:
            reason = 'exec: "' + argv[0] + '": permission denied'
        send(b"O", number, ("OCI runtime exec failed: exec failed: unable to start container process: " + reason
                            + ": unknown\r\n").encode())
        send(b"X", number, b'{"code": 126}')
        return
    pipes = {out_r: b"O", err_r: b"E"}
    for fd in pipes:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ, (number, fd))
    commands[number] = [proc, pipes, None]


def forward(number, fd):
    entry = commands[number]
    try:
        data = os.read(fd, READ)
    except BlockingIOError:
        return
    if data:
        send(entry[1][fd], number, data)
        return
    sel.unregister(fd)
    del entry[1][fd]
    os.close(fd)


def finish(number):
    proc, pipes, _ = commands.pop(number)
    for fd in pipes:
        sel.unregister(fd)
        os.close(fd)
    code = proc.returncode
    send(b"X", number, json.dumps({"code": 128 - code if code < 0 else code}).encode())


def requests():
    chunk = os.read(0, READ)
    if not chunk:  # the harness closed its end: nothing more will be asked
        sys.exit(0)
    pending.extend(chunk)
    while len(pending) >= HEADER.size:
        kind, number, size = HEADER.unpack_from(pending)
        if len(pending) < HEADER.size + size:
            return
        body = bytes(pending[HEADER.size:HEADER.size + size])
        del pending[:HEADER.size + size]
        if kind == b"S":
            start(number, json.loads(body))


wake_r, wake_w = os.pipe()
os.set_blocking(wake_r, False)
os.set_blocking(wake_w, False)
signal.set_wakeup_fd(wake_w)
signal.signal(signal.SIGCHLD, lambda *_: None)
sel.register(0, selectors.EVENT_READ, "requests")
sel.register(wake_r, selectors.EVENT_READ, "child")
send(b"R", 0, json.dumps({"version": VERSION}).encode())
while True:
    now = time.monotonic()
    lingering = [entry[2] + LINGER_S - now for entry in commands.values() if entry[2] is not None]
    for key, _ in sel.select(max(0.0, min(lingering)) if lingering else None):
        if key.data == "requests":
            requests()
        elif key.data == "child":
            while True:
                try:
                    if not os.read(wake_r, 512):
                        break
                except BlockingIOError:
                    break
        elif key.data[0] in commands and key.data[1] in commands[key.data[0]][1]:
            forward(*key.data)
    now = time.monotonic()
    for number, entry in list(commands.items()):
        if entry[2] is None and entry[0].poll() is not None:
            entry[2] = now
        if entry[2] is not None and (not entry[1] or now - entry[2] >= LINGER_S):
            finish(number)
""".replace("VERSION}", str(SOURCE_VERSION) + "}")
