"""The commands of a Docker sandbox (`DockerSandbox`'s exec machinery): deadlines, reaping what a command leaves
running, cgroup counters, and the provenance of the agent's commands (`provenance.py`: traced as root in the
container, the command itself dropped to the sandbox user).

Deadlines: docker's exec has none, so each command runs under coreutils `timeout -s KILL` inside the container
(which kills the command's whole process group), and the harness waits `timeout + 2 s`; past that it kills every
process carrying the command's marker variable, and past 3 s more it restarts the container (the working copy
survives; processes and /tmp do not). Nothing a command starts outlives it (`_reap`).
"""

from __future__ import annotations

import contextlib
import posixpath
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence

from failatlas.bench_core.sandbox import channel, docker_stream, provenance, tarballs
from failatlas.bench_core.sandbox.errors import SandboxError, SandboxTimeoutError
from failatlas.bench_core.sandbox.model import DEFAULT_OUTPUT_LIMIT, ExecResult, KilledReason
from failatlas.bench_core.sandbox.output import CappedBuffer, command_argv, command_text

MARKER_VAR = "FAILATLAS_EXEC_ID"
GRACE_S = 2.0
# the tracer's programs by absolute path, looked up where only root can write: root never runs a `python3` the agent
# put on its PATH (~/.local/bin comes first there)
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"  # folders only root can write in an image (the agent's user cannot)
# the environment of every command of the harness's own, root's and the sandbox user's alike: the container's PATH
# starts with the agent's ~/.local/bin, where a planted `cat` or `seq` would run as root in the tracer's after-step,
# and a planted `grep` or `tr` would answer for the reap (red team, 2026-12-06)
HARNESS_ENV = {"PATH": SYSTEM_PATH}
_COUNTER_FILES = (
    "/sys/fs/cgroup/memory/memory.oom_control",
    "/sys/fs/cgroup/memory.events",
    "/sys/fs/cgroup/pids/pids.events",
    "/sys/fs/cgroup/pids.events",
)
_COUNTERS_SH = (
    "for f in " + " ".join(_COUNTER_FILES) + '; do [ -r "$f" ] && { echo "== $f"; cat "$f"; }; done; true'
)
_FORK_FAILED = re.compile(r"fork: retry: Resource temporarily unavailable|fork system call failed"
                          r"|exec failed: unable to start container process")
# every process of the calling user but those whose environment holds one of the entries given as `-e ENTRY`
# arguments (an unreadable environment holds none); PID 1 is never touched
_REAP_LOOP = (
    'for d in /proc/[0-9]*; do p=${d#/proc/}; [ "$p" = 1 ] && continue; u=; '
    'while read -r k v _; do if [ "$k" = Uid: ]; then u=$v; break; fi; done < "$d/status"; '
    '[ "$u" = "$me" ] || continue; '
    'tr "\\0" "\\n" < "$d/environ" 2>/dev/null | grep -qxF "$@" || kill -9 "$p" 2>/dev/null; '
    "done 2>/dev/null; true"
)
_REAP_SH = "me=$(id -u); " + _REAP_LOOP
# the same when no other command runs: every process of the user but the reaper itself, in one kill(-1) (the kernel
# signals them all while no fork can complete, so a process that re-forks every few milliseconds to change its pid,
# which a walk of /proc never catches, ends too)
_REAP_ALL_SH = "kill -9 -1 2>/dev/null; true"
# after a traced command, as root: its summary (`$1`, waited for up to 5 s, printed and removed), the cgroup
# counters, then the reap script `$6` as the sandbox user (dropped to by setpriv, `$3`, uid `$4`, gid `$5`: root
# has no CAP_KILL here) sparing the `-e` entries that follow; each part fenced by `$2`, a fresh value per command
_AFTER_SH = (
    f"PATH={SYSTEM_PATH}; "
    's=$1; fence=$2; setpriv=$3; uid=$4; gid=$5; reap=$6; shift 6; '
    'for i in $(seq 1 100); do [ -f "$s" ] && break; sleep 0.05; done; '
    'if [ -f "$s" ]; then cat "$s"; st=$?; rm -f "$s"; else st=1; fi; '
    '[ "$st" = 0 ] || st=1; printf "\\n%s %s\\n%s counters\\n" "$fence" "$st" "$fence"; '
    + _COUNTERS_SH.removesuffix("; true") + '; printf "\\n%s\\n" "$fence"; '
    '"$setpriv" --reuid="$uid" --regid="$gid" --clear-groups -- /bin/sh -c "$reap" reap "$@" '
    '&& echo "$fence reaped"'
)
_KILL_SH = (
    'for d in /proc/[0-9]*; do '
    'if tr "\\0" "\\n" < "$d/environ" 2>/dev/null | grep -qx "$1"; '
    'then kill -9 "${d#/proc/}" 2>/dev/null; fi; '
    "done; true"
)



# where a Docker sandbox keeps the tracer's summariser and summaries (root's only: the agent's user reads nothing)
_TRACER_SETUP = (
    f"PATH={SYSTEM_PATH}; "
    'for p in strace setpriv python3; do command -v "$p" || { echo "no $p in the image"; exit 3; }; done; '
    f'mkdir -p -m 700 {provenance.TRACE_DIR} && chmod 700 {provenance.TRACE_DIR} || exit 3; '
    'strace -f -qq -o /dev/null true || { echo "strace cannot trace here" >&2; exit 3; }'
)
# where the tracer's programs are in an image (and that strace can trace there), by the probe's key (docker_sandbox)
_TRACERS: dict[object, list[str]] = {}
_TRACERS_LOCK = threading.Lock()
_SUMMARY_SH = (f"PATH={SYSTEM_PATH}; "
               'for i in $(seq 1 100); do [ -f "$1" ] && break; sleep 0.05; done; cat "$1" && rm -f "$1"')


def _parse_counters(text: str) -> tuple[int, int]:
    """(oom kills, fork failures at the pids limit) from the cgroup files printed by _COUNTERS_SH."""
    oom = pids = 0
    current = ""
    for line in text.splitlines():
        if line.startswith("== "):
            current = line[3:]
            continue
        key, _, value = line.partition(" ")
        if "memory" in current and key == "oom_kill":
            oom += int(value or 0)
        elif "pids" in current and key == "max":
            pids += int(value or 0)
    return oom, pids


def transient_stream_error(exc: BaseException) -> bool:
    """Whether `exc` is the Docker API stream failing, not the command: docker-py's demultiplexer meeting a frame
    header it cannot read (a stream that lost its alignment: `ValueError: 0 is not a valid stream`), or the
    connection to the daemon dropping mid-stream."""
    if isinstance(exc, ValueError) and "is not a valid stream" in str(exc):
        return True
    return isinstance(exc, ConnectionResetError) or type(exc).__name__ in ("ProtocolError", "IncompleteRead")



class DockerCommands:
    """The command methods of `DockerSandbox` (module docstring); the container, its user and counters are the
    sandbox's."""

    def exec(
        self,
        cmd: str | Sequence[str],
        *,
        timeout: float,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
        trace: bool = False,
    ) -> ExecResult:
        """Run `cmd` as the sandbox user with a deadline (the module docstring says how it is enforced); `trace`:
        record its process and file events (`ExecResult.provenance`)."""
        self._check_open()
        argv = command_argv(cmd, self.spec.shell)
        marker = uuid.uuid4().hex
        if self._timeout:
            argv = [self._timeout, "-s", "KILL", f"{max(timeout, 0.001):.3f}", *argv]
        untraced = self._tracer_ready() if trace else None
        user, extra = self.spec.user, {}
        if trace and untraced is None:  # as root, who drops to the sandbox user for the command itself
            argv, user, extra = self._traced(argv, marker), "0:0", {"HOME": self._home}
        res = self._raw_exec(
            argv, user=user, timeout=timeout, cwd=self._path(cwd) if cwd else None,
            env={**extra, **self._command_env, **(env or {}), MARKER_VAR: marker}, output_limit=output_limit,
            marker=marker, agent=True,
        )
        counted = reaped = None
        if trace and untraced is None and self._uid != 0:  # summary, counters and reap: one root command
            found, counted, reaped = self._after_traced(marker)
            res = res.model_copy(update={"provenance": found})
        elif trace:
            found = self._summary(marker) if untraced is None else provenance.unavailable(untraced)
            res = res.model_copy(update={"provenance": found})
        reason: KilledReason | None = "timeout" if res.timed_out else None
        fork_failed = bool(_FORK_FAILED.search(res.stdout) or _FORK_FAILED.search(res.stderr))
        before = self._counters
        if counted is not None:
            self._counters = counted
        if res.returncode != 0 or res.timed_out or fork_failed:
            after = counted if counted is not None else self._read_counters()
            if after[0] > before[0]:
                reason = "oom"
            elif after[1] > before[1] or fork_failed:
                # forks refused at the limit contained the command, even where its deadline then ended it (a
                # traced fork bomb, slowed by the tracer, retries until the deadline)
                reason = "pids"
        if reason == "pids" and not res.timed_out:
            # background processes left at the limit (a fork bomb that returned) would starve every later
            # command, the harness's own included; a restart ends them and keeps the working copy
            self._restart()
        elif not reaped:
            self._reap(marker)
        return res.model_copy(update={"command": command_text(cmd), "killed_reason": reason})

    def _raw_exec(self, argv: list[str], *, user: str, timeout: float, cwd: str | None = None,
                  env: Mapping[str, str] | None = None, output_limit: int = DEFAULT_OUTPUT_LIMIT,
                  marker: str | None = None, agent: bool = False, last_resort: bool = False) -> ExecResult:
        """Run `argv` as `user` under `marker` (a fresh one when None); `agent`: a command of `exec`, counted in
        `commands_started` once it started; `last_resort`: the harness's own kill, which, when it cannot end in
        time itself (the agent's processes starve the container's CPU), restarts the container instead of
        starting another kill (a chain of them never ends while the starving processes carry no marker)."""
        marker = marker or uuid.uuid4().hex  # every command carries one, so `_reap` can spare it while it runs
        with self._live_lock:
            self._live.add(marker)
        try:
            return self._marked_exec(argv, user=user, timeout=timeout, cwd=cwd, env={**(env or {}), MARKER_VAR: marker},
                                     output_limit=output_limit, marker=marker, agent=agent, last_resort=last_resort)
        finally:
            with self._live_lock:
                self._live.discard(marker)

    def _marked_exec(self, argv: list[str], *, user: str, timeout: float, cwd: str | None,
                     env: Mapping[str, str], output_limit: int, marker: str, agent: bool,
                     last_resort: bool = False) -> ExecResult:
        out, err = CappedBuffer(output_limit), CappedBuffer(output_limit)
        started = time.monotonic()
        exec_id, stream = self._start_exec(argv, user=user, env=env, cwd=cwd)
        if agent:
            self.commands_started += 1
        done = threading.Event()
        broken: list[BaseException] = []

        def pump() -> None:
            try:
                for o, e in stream:
                    out.write(o or b"")
                    err.write(e or b"")
            except Exception as exc:  # noqa: BLE001 - the stream dies when the container is killed; the exit code
                broken.append(exc)  # tells, unless the stream itself broke (below)
            finally:
                done.set()

        threading.Thread(target=pump, daemon=True, name="failatlas-sandbox-exec").start()
        harness_kill = not done.wait(timeout + GRACE_S)
        if harness_kill:
            if not last_resort:
                self._kill_marked(marker)
            if last_resort or not done.wait(3.0):
                self._restart()
        if not done.wait(10.0):
            raise SandboxTimeoutError(f"sandbox {self.container.name} did not end a command after killing it")
        returncode = self._exit_code(exec_id)
        if broken and transient_stream_error(broken[0]) and not harness_kill:
            # the command ran, but part of its output was lost: no verdict may rest on what was read
            raise SandboxError(f"the Docker API stream of a command in {self.container.name} broke, its output "
                               f"was lost: {type(broken[0]).__name__}: {broken[0]}")
        duration = time.monotonic() - started
        timed_out = harness_kill or (duration >= timeout and returncode in (124, 137, None))
        if timed_out and not harness_kill and not last_resort:
            self._kill_marked(marker)
        return ExecResult(
            command=command_text(argv), returncode=returncode, stdout=out.text(), stderr=err.text(),
            truncated=out.truncated or err.truncated, duration_s=duration, timed_out=timed_out,
        )

    def _start_exec(self, argv: list[str], *, user: str, env: Mapping[str, str] | None = None,
                    cwd: str | None = None) -> tuple[str, Iterator[tuple[bytes | None, bytes | None]]]:
        """Start `argv`; its id and its (stdout, stderr) chunks."""
        import docker

        try:
            exec_id = self._api.exec_create(self.container.id, argv, user=user, environment=dict(env or {}),
                                            workdir=cwd)["Id"]
            # not `exec_start(stream=True)`: it loses output that arrived with the reply's headers (docker_stream)
            return exec_id, docker_stream.exec_output(self._api, exec_id)
        except docker.errors.DockerException as exc:
            raise SandboxError(f"cannot run a command in sandbox {self.container.name}: {exc}") from exc

    def open_channel(self, cmd: str | Sequence[str], *, timeout: float, cwd: str | None = None,
                     env: Mapping[str, str] | None = None, limit: int = 1 << 20) -> channel.Channel:
        """Start `cmd` as the sandbox user with its stdin and stdout held open (`channel.py`): one daemon call for
        the whole exchange instead of one per message. The deadline is `exec`'s (`timeout -s KILL` inside the
        container); closing the channel ends the command and reaps what it left running. Counts in
        `commands_started`. Raises SandboxError when it cannot start."""
        import docker

        self._check_open()
        argv = command_argv(cmd, self.spec.shell)
        marker = uuid.uuid4().hex
        if self._timeout:
            argv = [self._timeout, "-s", "KILL", f"{max(timeout, 0.001):.3f}", *argv]
        with self._live_lock:
            self._live.add(marker)
        try:
            exec_id = self._api.exec_create(self.container.id, argv, user=self.spec.user, stdin=True,
                                            environment={**self._command_env, **(env or {}), MARKER_VAR: marker},
                                            workdir=self._path(cwd) if cwd else None)["Id"]
            sock, chunks = docker_stream.exec_attached(self._api, exec_id)
        except docker.errors.DockerException as exc:
            self._live.discard(marker)
            raise SandboxError(f"cannot run a command in sandbox {self.container.name}: {exc}") from exc
        except BaseException:
            self._live.discard(marker)
            raise
        self.commands_started += 1

        def stop() -> None:
            try:
                if pump.is_alive():  # its output is still open after its stdin closed
                    if self._exec_running(exec_id):  # the command itself still runs
                        self._kill_marked(marker)
                    # else a process it left holds its stdout (the agent's can, through /proc): stop reading
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)  # wakes the pump's blocked read
                    pump.join(5.0)
                with contextlib.suppress(OSError):
                    sock.close()
            finally:
                with self._live_lock:
                    self._live.discard(marker)
            self._reap(marker)

        def end_input() -> None:
            sock.shutdown(socket.SHUT_WR)

        opened = channel.Channel(limit, write=sock.sendall, end_input=end_input, stop=stop)
        pump = channel.start_pump(opened, chunks)
        return opened

    def _stream_exec(self, argv: list[str], check_time: Callable[[], None]) -> tuple[str, str, tarballs.ChunkReader]:
        """Start `argv` as the sandbox user with its stdout as a stream read under `check_time`; (exec id, marker,
        stream). End it with `_end_stream`."""
        marker = uuid.uuid4().hex
        with self._live_lock:
            self._live.add(marker)
        # the harness's own reads: `head`, `find` and `tar` from the system's folders, never a program the agent put on
        # its PATH (~/.local/bin comes first there), which would answer in their place as the agent's user
        exec_id, chunks = self._start_exec(argv, user=self.spec.user, env={MARKER_VAR: marker, "PATH": SYSTEM_PATH})
        return exec_id, marker, tarballs.ChunkReader(chunks, check_time=check_time)

    def _end_stream(self, exec_id: str, marker: str, stream: tarballs.ChunkReader) -> int | None:
        """Stop a streamed command (killing it when it is still sending) and return its exit code."""
        if not stream.finish(0.5):
            self._kill_marked(marker)
            stream.finish(5.0)
        stream.close()
        self._live.discard(marker)
        return self._exit_code(exec_id) if stream.ended else None

    def _exec_running(self, exec_id: str) -> bool:
        """Whether the command `exec_id` still runs, by the daemon's word (no command in the container)."""
        import docker

        try:
            return bool(self._api.exec_inspect(exec_id).get("Running"))
        except docker.errors.DockerException:
            return True

    def _exit_code(self, exec_id: str) -> int | None:
        import docker

        for _ in range(50):
            try:
                info = self._api.exec_inspect(exec_id)
            except docker.errors.DockerException as exc:
                raise SandboxError(f"cannot inspect a command in {self.container.name}: {exc}") from exc
            if not info.get("Running"):
                return info.get("ExitCode")
            time.sleep(0.1)
        return None

    def _reap(self, marker: str) -> None:
        """Kill what the command `marker` left running (module docstring); restart the container when the kill
        itself cannot start (the process limit is full). Raises SandboxError when the container cannot restart.
        Where the host sees the container (`host_cgroup.py`) and it holds only init, there is nothing to kill."""
        if self._host is not None and self._host.resting():
            return
        if self._uid == 0:  # a root user's processes include init's `sleep`: only the command's own marker is safe
            self._kill_marked(marker)
            return
        with self._live_lock:
            own = uuid.uuid4().hex
            script, spared = self._reaper(own)
            try:
                res = self._raw_exec(["/bin/sh", "-c", script, "reap", *spared], user=self.spec.user, timeout=30,
                                     env=HARNESS_ENV, marker=own)
            except SandboxError:
                res = None
            if res is None or res.returncode != 0 or res.timed_out:
                self._restart()

    def _reaper(self, own: str) -> tuple[str, list[str]]:
        """The reap script and its arguments for a reaper carrying `own` (hold `_live_lock`): every process of the
        user at once when no other command runs (`_REAP_ALL_SH`), else those without a live command's marker."""
        if not self._live:
            return _REAP_ALL_SH, []
        return _REAP_SH, [arg for m in (*self._live, own) for arg in ("-e", f"{MARKER_VAR}={m}")]

    def _kill_marked(self, marker: str) -> None:
        """Kill every process of the sandbox user that carries this command's marker (setsid escapees too)."""
        with contextlib.suppress(SandboxError):
            self._raw_exec(["/bin/sh", "-c", _KILL_SH, "kill", f"{MARKER_VAR}={marker}"],
                           user=self.spec.user, timeout=10, env=HARNESS_ENV, last_resort=True)

    def _read_counters(self) -> tuple[int, int]:
        """The cgroup counters (`_parse_counters`), from the host where it sees the container, else from inside."""
        seen = self._host.counters() if self._host is not None else None
        if seen is not None:
            self._counters = seen
            return seen
        with contextlib.suppress(SandboxError):
            res = self._raw_exec(["/bin/sh", "-c", _COUNTERS_SH], user=self.spec.user, timeout=10, env=HARNESS_ENV)
            if res.returncode == 0:
                self._counters = _parse_counters(res.stdout)
        return self._counters

    def _tracer_ready(self) -> str | None:
        """Set up the tracer in the container once (its summariser copied in as root's); None when it can trace,
        else why not."""
        if self._tracer is not None:
            return self._tracer or None
        if not self.spec.trace_processes:
            self._tracer = "the sandbox was started without process tracing"
            return self._tracer
        probed = getattr(self, "_probe_key", None)
        key = (probed, self.spec.read_only_root) if probed is not None else None
        with _TRACERS_LOCK:
            found = _TRACERS.get(key) if key is not None else None
        if found is None:
            res = self._raw_exec(["/bin/sh", "-c", _TRACER_SETUP], user="0:0", timeout=30, env=HARNESS_ENV)
            found = res.stdout.split()
            if res.returncode != 0 or len(found) != 3 or not all(p.startswith("/") for p in found):
                self._tracer = (res.stdout.strip().splitlines()[-1:] or [res.stderr.strip() or
                                                                        f"setup exit {res.returncode}"])[0][:200]
                return self._tracer
            if key is not None:
                with _TRACERS_LOCK:
                    _TRACERS[key] = list(found)
        self._strace, self._setpriv, self._python = found
        # the folder (root's, mode 0700) and the summariser in one copy: on a container of an image already set
        # up here, where the programs are and that strace can trace are known, and this is the only call
        folder = posixpath.basename(provenance.TRACE_DIR)
        self._put(tarballs.pack_tree([(folder, None), (f"{folder}/filter.py", provenance.FILTER.read_bytes())],
                                     uid=0, gid=0, dir_mode=0o700), posixpath.dirname(provenance.TRACE_DIR))
        self._tracer = ""
        return None

    def _traced(self, argv: list[str], marker: str) -> list[str]:
        """`argv` under the root tracer, the command itself dropped to the sandbox user (`provenance.LAUNCHER`)."""
        user = [self._setpriv, f"--reuid={self._uid}", f"--regid={self._gid}", "--clear-groups", "--",
                "/bin/sh", "-c", provenance.LAUNCHER, "launcher", *argv]
        return provenance.traced_argv(user, strace=self._strace, summary=f"{provenance.TRACE_DIR}/{marker}.json",
                                      workdir=self.workdir, watched=[self._home, "/tmp"], python=self._python,
                                      filter_path=f"{provenance.TRACE_DIR}/filter.py")

    def _after_traced(self, marker: str) -> tuple[dict, tuple[int, int] | None, bool]:
        """After the traced command `marker`: its tracer's summary (read and removed), the cgroup counters and the
        reap of what it left running (`_reap`'s rule), in one command as root instead of three; (summary, counters
        or None, whether the reap ran). What could not be done here is left to the caller's separate steps."""
        fence = uuid.uuid4().hex  # made after the summary was written: nothing in it can hold this
        summary = f"{provenance.TRACE_DIR}/{marker}.json"
        with self._live_lock:
            own = uuid.uuid4().hex
            script, spared = self._reaper(own)
            try:
                res = self._raw_exec(["/bin/sh", "-c", _AFTER_SH, "after", summary, fence, self._setpriv,
                                      str(self._uid), str(self._gid), script, *spared],
                                     user="0:0", timeout=30, env=HARNESS_ENV, marker=own,
                                     output_limit=2 * (provenance.MAX_SUMMARY_BYTES + 1) + 65536)
            except SandboxError as exc:
                return provenance.unavailable(f"the summary could not be read: {exc}"), None, False
        head, found_fence, tail = res.stdout.rpartition(f"\n{fence} counters\n")
        text, _, status = head.rpartition(f"\n{fence} ")
        counters, counted, reaped = tail.rpartition(f"\n{fence}\n")
        if not found_fence or status not in ("0", "1"):
            return provenance.unavailable("the tracer's summary could not be read"), None, False
        # counters only where their part ended (a command killed inside it, at the memory limit, printed less)
        after = _parse_counters(counters) if counted else None
        if status == "1":
            found = provenance.unavailable("the tracer left no summary")
        elif res.truncated or len(text.encode()) > provenance.MAX_SUMMARY_BYTES:
            found = provenance.unavailable("the summary is larger than the harness reads")
        else:
            found = provenance.parse_summary(text.encode())
        return found, after, bool(counted) and res.returncode == 0 and reaped.strip() == f"{fence} reaped"

    def _summary(self, marker: str) -> dict:
        """The tracer's summary of command `marker`, read (and removed) as root."""
        try:
            res = self._raw_exec(["/bin/sh", "-c", _SUMMARY_SH, "summary",
                                  f"{provenance.TRACE_DIR}/{marker}.json"], user="0:0", timeout=30, env=HARNESS_ENV,
                                 output_limit=provenance.MAX_SUMMARY_BYTES + 1)
        except SandboxError as exc:
            return provenance.unavailable(f"the summary could not be read: {exc}")
        if res.returncode != 0 or res.truncated:
            return provenance.unavailable("the tracer left no summary" if res.returncode else
                                          "the summary is larger than the harness reads")
        return provenance.parse_summary(res.stdout.encode())
