"""The Docker backend: one hardened, labelled container per sandbox, driven through the docker SDK.

Hardening by default: no network unless `spec.network` allows it (`registries`: an internal network whose only
way out is an egress proxy that allows package indexes, `egress.py`; `full`: a bridge that never reaches the
Docker host, `network.py`), memory (swap included), CPU and process-count limits,
all capabilities dropped, no new privileges, the non-root `spec.user`, read-only input mounts, a reaping init
as PID 1.
The working copy is copied in, never bind-mounted, so the host's prepared repository stays pristine.

Deadlines: docker's exec has none, so each command runs under coreutils `timeout -s KILL` inside the container
(which kills the command's whole process group), and the harness waits `timeout + 2 s`; past that it kills
every process carrying the command's marker variable, and past 3 s more it restarts the container (the working
copy survives; processes and /tmp do not). After a timeout the marker kill also removes escaped (setsid)
children.
Nothing a command starts outlives it: when it ends, every process of the sandbox user that carries the marker of no
command still running (background, daemonised, setsid'ed children, and any that cleared or hid its environment)
is killed (`_reap`); the container restarts when even that cannot start.
Why a command died is read from the container's cgroup counters (memory `oom_kill`, pids `max`).

Files come out as the agent's user, never as root, within limits (`docker_files`).
"""

from __future__ import annotations

import contextlib
import posixpath
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from failatlas.bench_core.sandbox import docker_files, docker_stream, tarballs
from failatlas.bench_core.sandbox.cleanup import cleanup_orphans, docker_client, list_sandboxes, sandbox_labels
from failatlas.bench_core.sandbox.errors import (
    SandboxError,
    SandboxFileNotFoundError,
    SandboxPathError,
    SandboxTimeoutError,
)
from failatlas.bench_core.sandbox.model import (
    DEFAULT_IMAGE,
    DEFAULT_OUTPUT_LIMIT,
    DEFAULT_READ_LIMIT,
    CopyLimits,
    CopyReport,
    ExecResult,
    KilledReason,
    SandboxSpec,
)
from failatlas.bench_core.sandbox.network import sandbox_network
from failatlas.bench_core.sandbox.output import CappedBuffer, command_argv, command_text
from failatlas.bench_core.sandbox.policy import CA_PATH, ca_env, pip_env
from failatlas.bench_core.sandbox.protocol import SANDBOXES, SandboxKind

MARKER_VAR = "FAILATLAS_EXEC_ID"
GRACE_S = 2.0
STREAM_RETRIES = 2  # a file read whose Docker API stream broke is tried this many more times
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
_REAP_SH = (
    'me=$(id -u); for d in /proc/[0-9]*; do p=${d#/proc/}; [ "$p" = 1 ] && continue; u=; '
    'while read -r k v _; do if [ "$k" = Uid: ]; then u=$v; break; fi; done < "$d/status"; '
    '[ "$u" = "$me" ] || continue; '
    'tr "\\0" "\\n" < "$d/environ" 2>/dev/null | grep -qxF "$@" || kill -9 "$p" 2>/dev/null; '
    "done 2>/dev/null; true"
)
_KILL_SH = (
    'for d in /proc/[0-9]*; do '
    'if tr "\\0" "\\n" < "$d/environ" 2>/dev/null | grep -qx "$1"; '
    'then kill -9 "${d#/proc/}" 2>/dev/null; fi; '
    "done; true"
)


def network_env(spec: SandboxSpec, egress: Any) -> dict[str, str]:
    """The variables of the sandbox's network: its egress proxy (registries) and the CA bundle (with network)."""
    env: dict[str, str] = {}
    if egress is not None:
        from failatlas.bench_core.sandbox.egress import proxy_env

        env.update(proxy_env())
    if spec.has_network and spec.ca_bundle:
        env.update(ca_env(spec.ca_bundle))
    if spec.has_network:  # the host's (private) pip indexes, without credentials (policy.pip_env)
        env.update(pip_env())
    return env


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


class DockerSandbox:
    """A running container; start one with `create_sandbox('docker', spec, workspace=...)`."""

    backend = "docker"

    def __init__(self, spec: SandboxSpec, client: Any, container: Any) -> None:
        self.spec = spec
        self.workdir = spec.workdir
        self.container = container
        self._client = client
        self._api = client.api
        self._uid = self._gid = 0
        self._has_timeout = True
        self._gnu_tools = False
        self._counters = (0, 0)
        self._closed = False
        self.restarts = 0
        self.egress: Any = None
        self._command_env: dict[str, str] = {}
        self.commands_started = 0  # commands of `exec` that started: from the first, the agent's code may run
        self._live: set[str] = set()  # markers of the commands running now (`_reap` spares their processes)
        self._live_lock = threading.RLock()  # held by `_reap` throughout, so no command starts unseen meanwhile

    @classmethod
    def start(cls, spec: SandboxSpec, *, workspace: Path | None = None, client: Any = None) -> DockerSandbox:
        """Start the container and copy `workspace` into `spec.workdir`; SandboxError when it cannot."""
        import docker

        if spec.env_dir:
            raise SandboxError("a task environment built as a venv runs only under bwrap; Docker runs use the "
                               "environment's image", hint="build it without --venv for Docker runs")
        client = docker_client(client)
        try:
            client.images.get(spec.image)
        except docker.errors.ImageNotFound:
            raise SandboxError(f"the sandbox image {spec.image} does not exist",
                               hint="build it with `failatlas sandbox build-image`") from None
        for host, _target in spec.mounts():
            if not Path(host).exists():
                raise SandboxError(f"read-only input {host} does not exist")
        egress = None
        if spec.network == "registries":
            from failatlas.bench_core.sandbox.egress import Egress

            egress = Egress.start(client, spec)
        try:
            container = client.containers.run(spec.image, **cls._run_options(spec, client, egress))
        except docker.errors.DockerException as exc:
            if egress is not None:
                egress.close()
            raise SandboxError(f"cannot start a sandbox from {spec.image}: {exc}") from exc
        except BaseException:
            if egress is not None:
                egress.close()
            raise
        box = cls(spec, client, container)
        box.egress = egress
        if spec.network_env_per_command:
            box._command_env = network_env(spec, egress)
        try:
            box._probe()
            if workspace is not None:
                box._put(tarballs.pack(workspace, ".", uid=box._uid, gid=box._gid), spec.workdir)
        except BaseException:
            box.close()
            raise
        return box

    @staticmethod
    def _run_options(spec: SandboxSpec, client: Any = None, egress: Any = None) -> dict[str, Any]:
        import docker

        env = {**spec.data_env(), **spec.env}
        if egress is not None:  # registries: the internal network whose only way out is the proxy (egress.py)
            network = egress.network_name
        elif spec.network == "full":  # a dedicated bridge whose traffic to the host itself is refused (network.py)
            network = sandbox_network(docker_client(client))
        else:
            network = "none"
        mounts = [docker.types.Mount(target=target, source=str(Path(host).resolve()), type="bind", read_only=True)
                  for host, target in spec.mounts()]
        if spec.has_network and spec.ca_bundle:  # a mount, not a volume: an image committed from it keeps none
            mounts.append(docker.types.Mount(target=CA_PATH, source=spec.ca_bundle, type="bind", read_only=True))
        if not spec.network_env_per_command:
            env.update(network_env(spec, egress))

        options: dict[str, Any] = dict(
            # init and its `sleep` run as root (with no capabilities), so the agent's user cannot signal them and
            # stop the container under the harness; every command is exec'd as `spec.user`.
            command=["sleep", "infinity"], detach=True, init=True, user="0:0", working_dir=spec.workdir,
            name=f"failatlas-sbx-{uuid.uuid4().hex[:12]}", hostname="sandbox", labels=sandbox_labels(spec),
            environment=env, network_mode=network,
            mem_limit=f"{spec.memory_mb}m", memswap_limit=f"{spec.memory_mb}m",
            nano_cpus=int(spec.cpus * 1e9), pids_limit=spec.pids_limit, cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            tmpfs={"/tmp": f"rw,nosuid,nodev,size={spec.tmp_mb}m,mode=1777"}, shm_size=f"{spec.shm_mb}m",
            read_only=spec.read_only_root,
        )
        if spec.read_only_root:
            mounts.append(docker.types.Mount(target=spec.workdir, source=None, type="volume"))
        if mounts:
            options["mounts"] = mounts
        if spec.gpu_ids:
            options["device_requests"] = [
                docker.types.DeviceRequest(device_ids=list(spec.gpu_ids), capabilities=[["gpu"]])
            ]
        if spec.disk_mb is not None:
            options["storage_opt"] = {"size": f"{spec.disk_mb}M"}
        return options

    def _probe(self) -> None:
        """Learn the user's uid/gid, whether `timeout` and GNU find and tar exist, and the starting cgroup counters."""
        script = ("id -u; id -g; command -v timeout >/dev/null && echo yes || echo no; " + docker_files.GNU_SH
                  + "; " + _COUNTERS_SH)
        res = self._raw_exec(["/bin/sh", "-c", script], user=self.spec.user, timeout=30)
        lines = res.stdout.splitlines()
        if res.returncode != 0 or len(lines) < 4:
            raise SandboxError(
                f"the sandbox image {self.spec.image} cannot run /bin/sh as {self.spec.user!r}: "
                f"{res.stderr.strip() or res.stdout.strip()}"
            )
        self._uid, self._gid = int(lines[0]), int(lines[1])
        self._has_timeout = lines[2] == "yes"
        self._gnu_tools = lines[3] == "gnu"
        self._counters = _parse_counters("\n".join(lines[4:]))

    def exec(
        self,
        cmd: str | Sequence[str],
        *,
        timeout: float,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
    ) -> ExecResult:
        """Run `cmd` as the sandbox user with a deadline (the module docstring says how it is enforced)."""
        self._check_open()
        argv = command_argv(cmd, self.spec.shell)
        marker = uuid.uuid4().hex
        if self._has_timeout:
            argv = ["timeout", "-s", "KILL", f"{max(timeout, 0.001):.3f}", *argv]
        res = self._raw_exec(
            argv, user=self.spec.user, timeout=timeout, cwd=self._path(cwd) if cwd else None,
            env={**self._command_env, **(env or {}), MARKER_VAR: marker}, output_limit=output_limit, marker=marker,
            agent=True,
        )
        reason: KilledReason | None = "timeout" if res.timed_out else None
        fork_failed = bool(_FORK_FAILED.search(res.stdout) or _FORK_FAILED.search(res.stderr))
        if res.returncode != 0 or res.timed_out or fork_failed:
            before, after = self._counters, self._read_counters()
            if after[0] > before[0]:
                reason = "oom"
            elif after[1] > before[1] or (fork_failed and reason is None):
                reason = "pids"
        if reason == "pids" and not res.timed_out:
            # background processes left at the limit (a fork bomb that returned) would starve every later
            # command, the harness's own included; a restart ends them and keeps the working copy
            self._restart()
        else:
            self._reap(marker)
        return res.model_copy(update={"command": command_text(cmd), "killed_reason": reason})

    def _raw_exec(self, argv: list[str], *, user: str, timeout: float, cwd: str | None = None,
                  env: Mapping[str, str] | None = None, output_limit: int = DEFAULT_OUTPUT_LIMIT,
                  marker: str | None = None, agent: bool = False) -> ExecResult:
        """Run `argv` as `user` under `marker` (a fresh one when None); `agent`: a command of `exec`, counted in
        `commands_started` once it started."""
        marker = marker or uuid.uuid4().hex  # every command carries one, so `_reap` can spare it while it runs
        with self._live_lock:
            self._live.add(marker)
        try:
            return self._marked_exec(argv, user=user, timeout=timeout, cwd=cwd, env={**(env or {}), MARKER_VAR: marker},
                                     output_limit=output_limit, marker=marker, agent=agent)
        finally:
            with self._live_lock:
                self._live.discard(marker)

    def _marked_exec(self, argv: list[str], *, user: str, timeout: float, cwd: str | None,
                     env: Mapping[str, str], output_limit: int, marker: str, agent: bool) -> ExecResult:
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
            self._kill_marked(marker)
            if not done.wait(3.0):
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
        if timed_out and not harness_kill:
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

    def _stream_exec(self, argv: list[str], check_time: Callable[[], None]) -> tuple[str, str, tarballs.ChunkReader]:
        """Start `argv` as the sandbox user with its stdout as a stream read under `check_time`; (exec id, marker,
        stream). End it with `_end_stream`."""
        marker = uuid.uuid4().hex
        with self._live_lock:
            self._live.add(marker)
        exec_id, chunks = self._start_exec(argv, user=self.spec.user, env={MARKER_VAR: marker})
        return exec_id, marker, tarballs.ChunkReader(chunks, check_time=check_time)

    def _end_stream(self, exec_id: str, marker: str, stream: tarballs.ChunkReader) -> int | None:
        """Stop a streamed command (killing it when it is still sending) and return its exit code."""
        if not stream.finish(0.5):
            self._kill_marked(marker)
            stream.finish(5.0)
        stream.close()
        self._live.discard(marker)
        return self._exit_code(exec_id) if stream.ended else None

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
        itself cannot start (the process limit is full). Raises SandboxError when the container cannot restart."""
        if self._uid == 0:  # a root user's processes include init's `sleep`: only the command's own marker is safe
            self._kill_marked(marker)
            return
        with self._live_lock:
            own = uuid.uuid4().hex
            spared = [arg for m in (*self._live, own) for arg in ("-e", f"{MARKER_VAR}={m}")]
            try:
                res = self._raw_exec(["/bin/sh", "-c", _REAP_SH, "reap", *spared], user=self.spec.user, timeout=30,
                                     marker=own)
            except SandboxError:
                res = None
            if res is None or res.returncode != 0 or res.timed_out:
                self._restart()

    def _kill_marked(self, marker: str) -> None:
        """Kill every process of the sandbox user that carries this command's marker (setsid escapees too)."""
        with contextlib.suppress(SandboxError):
            self._raw_exec(["/bin/sh", "-c", _KILL_SH, "kill", f"{MARKER_VAR}={marker}"],
                           user=self.spec.user, timeout=10)

    def _restart(self) -> None:
        """Last resort when a command cannot be killed from inside: restart the container, files kept."""
        import docker

        try:
            self.container.kill()
            self.container.start()
        except docker.errors.DockerException as exc:
            raise SandboxError(f"cannot restart sandbox {self.container.name}: {exc}") from exc
        self.restarts += 1

    def _read_counters(self) -> tuple[int, int]:
        with contextlib.suppress(SandboxError):
            res = self._raw_exec(["/bin/sh", "-c", _COUNTERS_SH], user=self.spec.user, timeout=10)
            if res.returncode == 0:
                self._counters = _parse_counters(res.stdout)
        return self._counters

    def _path(self, path: str) -> str:
        return posixpath.normpath(posixpath.join(self.workdir, path))

    def _put(self, archive: Any, dest_dir: str) -> None:
        import docker

        try:
            ok = self._api.put_archive(self.container.id, dest_dir, archive)
        except docker.errors.NotFound:
            raise SandboxFileNotFoundError(f"no folder {dest_dir} in the sandbox") from None
        except docker.errors.APIError as exc:
            if exc.is_client_error() or "read-only" in str(exc.explanation):
                raise SandboxPathError(f"cannot write into {dest_dir}: {exc.explanation}") from exc
            raise SandboxError(f"cannot copy into sandbox {self.container.name}: {exc}") from exc
        if not ok:
            raise SandboxError(f"the daemon refused to copy into {dest_dir}")

    def _mkdir(self, path: str) -> None:
        res = self._raw_exec(["mkdir", "-p", path], user=self.spec.user, timeout=30)
        if res.returncode != 0:
            raise SandboxPathError(f"cannot create folder {path} in the sandbox: {res.stderr.strip()}")

    def read_file(self, path: str, *, max_bytes: int = DEFAULT_READ_LIMIT) -> bytes:
        """The first `max_bytes` bytes of a regular file, read as the sandbox user without following links.

        Raises SandboxFileNotFoundError when it is missing, SandboxPathError when it is a folder, a FIFO, a link
        (or reached through one below the working copy) or unreadable by the sandbox user."""
        self._check_open()
        return self._retrying_stream(f"reading {path}",
                                     lambda: docker_files.read_file(self, path, max_bytes=max_bytes))

    def write_file(self, path: str, data: bytes | str) -> None:
        """Write a file owned by the sandbox user, creating parent folders."""
        self._check_open()
        target = self._path(path)
        raw = data.encode() if isinstance(data, str) else data
        payload = tarballs.pack_bytes(posixpath.basename(target), raw, uid=self._uid, gid=self._gid)
        try:
            self._put(payload, posixpath.dirname(target))
        except SandboxFileNotFoundError:
            self._mkdir(posixpath.dirname(target))
            self._put(payload, posixpath.dirname(target))

    def copy_in(self, host_src: str | Path, dest: str) -> None:
        """Copy a host file or folder to the sandbox path `dest` (the copy's own path), owned by the user."""
        self._check_open()
        src, target = Path(host_src), self._path(dest)
        if not src.exists():
            raise SandboxFileNotFoundError(f"no host path {src}")
        self._mkdir(posixpath.dirname(target))
        self._put(tarballs.pack(src, posixpath.basename(target), uid=self._uid, gid=self._gid),
                  posixpath.dirname(target))

    def copy_out(self, src: str, host_dest: str | Path, *, limits: CopyLimits | None = None) -> CopyReport:
        """Copy a sandbox file or folder to the host path `host_dest` (the copy's own path), read as the sandbox
        user within `limits`; returns what was left out. Links that resolve outside the copy are not kept.
        Raises SandboxFileNotFoundError when `src` is missing, SandboxError when the daemon fails."""
        self._check_open()
        return self._retrying_stream(f"copying {src} out",
                                     lambda: docker_files.copy_out(self, src, host_dest, limits=limits))

    def _retrying_stream(self, what: str, call: Callable[[], Any]) -> Any:
        """`call()`, a read that may run again (its partial output is discarded), tried again when the Docker
        API stream broke (`transient_stream_error`); SandboxError once it broke `STREAM_RETRIES + 1` times."""
        for attempt in range(STREAM_RETRIES + 1):
            try:
                return call()
            except Exception as exc:
                if not transient_stream_error(exc):
                    raise
                if attempt == STREAM_RETRIES:
                    raise SandboxError(f"{what} in sandbox {self.container.name}: the Docker API stream broke "
                                       f"{attempt + 1} times: {type(exc).__name__}: {exc}") from exc
                time.sleep(0.1 * 2 ** attempt)
        raise AssertionError("unreachable")

    def egress_log(self) -> list[dict[str, Any]]:
        """The egress proxy's allow/deny decisions so far (`registries` only; [] otherwise)."""
        return self.egress.log() if self.egress is not None else []

    def close(self) -> None:
        """Remove the container and its anonymous volumes (and its egress proxy and network). Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        import docker

        try:
            self.container.remove(force=True, v=True)
        except docker.errors.NotFound:
            pass  # already removed, e.g. by `failatlas sandbox cleanup --all`
        except docker.errors.APIError as exc:
            raise SandboxError(f"cannot remove sandbox {self.container.name}: {exc}") from exc
        finally:
            if self.egress is not None:
                self.egress.close()

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError("the sandbox is closed")

    def __enter__(self) -> DockerSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@SANDBOXES.register("docker")
class DockerKind(SandboxKind):
    """Docker containers: the image is built offline once (`build_base_image`) and orphaned containers of dead
    runners are reaped by label."""

    name = "docker"

    def start(self, spec: SandboxSpec, *, workspace: Path | None) -> DockerSandbox:
        return DockerSandbox.start(spec, workspace=workspace)

    def prepare(self, image: str | None = None, *, say: Callable[[str], None] = lambda _text: None) -> None:
        """Build the base image when `image` is it (or None) and it is missing; any other image must exist.
        Raises SandboxError when it cannot be built or is missing."""
        from failatlas.bench_core.sandbox.image import build_base_image, image_exists

        tag = image or DEFAULT_IMAGE
        if tag == DEFAULT_IMAGE:
            say(f"sandbox image {tag} (built offline once, minutes; reused afterwards)")
            build_base_image(tag)
        elif not image_exists(tag):
            raise SandboxError(f"the sandbox image {tag} does not exist",
                               hint=f"build it, or use the default image {DEFAULT_IMAGE}")
        else:
            say(f"sandbox image {tag}")

    def clean_orphans(self, *, run_id: str | None = None, include_live: bool = False) -> list[str]:
        from failatlas.bench_core.sandbox.egress import remove_orphan_networks

        removed = cleanup_orphans(run_id=run_id, include_live=include_live)
        return removed + remove_orphan_networks(docker_client())

    def list_sandboxes(self) -> list[dict[str, str]]:
        return list_sandboxes()
