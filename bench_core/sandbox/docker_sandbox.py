"""The Docker backend: one hardened, labelled container per sandbox, driven through the docker SDK.

Hardening by default: no network unless `spec.network` allows it (`registries`: an internal network whose only
way out is an egress proxy that allows package indexes, `egress.py`; `full`: a bridge that never reaches the
Docker host, `network.py`), memory (swap included), CPU and process-count limits,
all capabilities dropped, no new privileges, the non-root `spec.user`, read-only input mounts, a reaping init
as PID 1.
The working copy is copied in, never bind-mounted, so the host's prepared repository stays pristine.

Commands (`docker_commands.py`): a deadline each, enforced inside the container and by the harness; nothing a
command starts outlives it (`_reap`); why a command died is read from the container's cgroup counters (memory
`oom_kill`, pids `max`). The agent's commands are traced where the spec asks for it (`trace_processes`: the
container then keeps SETUID, SETGID, SYS_PTRACE and DAC_READ_SEARCH for root's tracer, which drops to the sandbox
user for the command and reads its descriptors; the sandbox user, with no new privileges, has none of them;
`provenance.py`).

Files come out as the agent's user, never as root, within limits (`docker_files`).
"""

from __future__ import annotations

import json
import posixpath
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from failatlas.bench_core.sandbox import docker_files, docker_netns, docker_system, tarballs
from failatlas.bench_core.sandbox.cleanup import cleanup_orphans, docker_client, list_sandboxes, sandbox_labels
from failatlas.bench_core.sandbox.docker_commands import (  # noqa: F401 - re-exported: their first home
    _COUNTERS_SH,
    HARNESS_ENV,
    MARKER_VAR,
    DockerCommands,
    _parse_counters,
    transient_stream_error,
)
from failatlas.bench_core.sandbox.errors import (
    SandboxError,
    SandboxFileNotFoundError,
    SandboxPathError,
)
from failatlas.bench_core.sandbox.host_cgroup import HostCgroup
from failatlas.bench_core.sandbox.model import (
    DEFAULT_IMAGE,
    DEFAULT_READ_LIMIT,
    CopyLimits,
    CopyReport,
    SandboxSpec,
)
from failatlas.bench_core.sandbox.network import sandbox_network
from failatlas.bench_core.sandbox.policy import CA_PATH, ca_env, pip_env
from failatlas.bench_core.sandbox.protocol import SANDBOXES, SandboxKind

STREAM_RETRIES = 2  # a file read whose Docker API stream broke is tried this many more times
# what `DockerSandbox._probe` learnt, by (image id, user, environment)
_PROBED: dict[tuple[str, str, str], tuple[int, int, str, bool, str]] = {}
_PROBED_LOCK = threading.Lock()

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


class DockerSandbox(DockerCommands):
    """A running container; start one with `create_sandbox('docker', spec, workspace=...)`."""

    backend = "docker"

    def __init__(self, spec: SandboxSpec, client: Any, container: Any) -> None:
        self.spec = spec
        self.workdir = spec.workdir
        self.container = container
        self._client = client
        self._api = client.api
        self._uid = self._gid = 0
        self._timeout = "timeout"  # coreutils' timeout; `_probe` sets its absolute path ("": none)
        self._gnu_tools = False
        self._counters = (0, 0)
        self._closed = False
        self.restarts = 0
        self.egress: Any = None
        self._command_env: dict[str, str] = {}
        self.commands_started = 0  # commands of `exec` that started: from the first, the agent's code may run
        self._live: set[str] = set()  # markers of the commands running now (`_reap` spares their processes)
        self._live_lock = threading.RLock()  # held by `_reap` throughout, so no command starts unseen meanwhile
        self._tracer: str | None = None  # None: not set up yet; "": ready; else why the agent's commands run untraced
        self._strace = self._setpriv = self._python = ""
        self._home = "/tmp"
        self._host: HostCgroup | None = None  # the host's view of its cgroups, where there is one (host_cgroup.py)
        self._netns: docker_netns.Holder | None = None  # the holder whose network namespace it joined, if any

    @classmethod
    def start(cls, spec: SandboxSpec, *, workspace: Path | None = None, client: Any = None) -> DockerSandbox:
        """Start the container and copy `workspace` into `spec.workdir`; SandboxError when it cannot."""
        import docker

        if spec.env_dir:
            raise SandboxError("a task environment built as a venv runs only under bwrap; Docker runs use the "
                               "environment's image", hint="build it without --venv for Docker runs")
        client = docker_client(client)
        try:
            image_id = client.images.get(spec.image).id
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
        system = docker_system.system_binds(client, spec, image_id)
        holder = docker_netns.pool().lease(client, spec) if spec.network == "none" else None
        options = cls._run_options(spec, client, egress, system=system,
                                   netns=holder.mode if holder is not None else None)
        try:
            try:
                container = client.containers.run(spec.image, **options)
            except docker.errors.DockerException:
                if holder is None:
                    raise
                # the holder went away meanwhile (e.g. `failatlas sandbox cleanup --all`): a namespace of its own
                docker_netns.remove_named(client, options["name"])  # created, never started
                docker_netns.pool().give_back(holder, reuse=False)
                holder = None
                options = cls._run_options(spec, client, egress, system=system)
                container = client.containers.run(spec.image, **options)
        except BaseException as exc:
            if egress is not None:
                egress.close()
            if holder is not None:  # the container may have started before the error (a timeout, an interrupt)
                docker_netns.remove_named(client, options["name"])
                docker_netns.pool().give_back(holder, reuse=False)
            if isinstance(exc, docker.errors.DockerException):
                raise SandboxError(f"cannot start a sandbox from {spec.image}: {exc}") from exc
            raise
        box = cls(spec, client, container)
        box.egress = egress
        box._netns = holder
        if spec.network_env_per_command:
            box._command_env = network_env(spec, egress)
        try:
            box._probe((image_id, spec.user, json.dumps(options.get("environment"), sort_keys=True)))
            box._find_host()
            if workspace is not None:
                box._put(tarballs.pack(workspace, ".", uid=box._uid, gid=box._gid), spec.workdir)
        except BaseException:
            box.close()
            raise
        return box

    @staticmethod
    def _run_options(spec: SandboxSpec, client: Any = None, egress: Any = None,
                     system: Sequence[tuple[str, str]] = (), netns: str | None = None) -> dict[str, Any]:
        """The container's options; `system`: (host folder, target) of the image's system folders bound read-only
        (`docker_system.py`); `netns`: the network mode of a holder whose namespace it joins (`docker_netns.py`,
        only without network; its hostname is the holder's, the same)."""
        import docker

        env = {**spec.data_env(), **spec.env}
        if egress is not None:  # registries: the internal network whose only way out is the proxy (egress.py)
            network = egress.network_name
        elif spec.network == "full":  # a dedicated bridge whose traffic to the host itself is refused (network.py)
            network = sandbox_network(docker_client(client))
        else:
            network = netns or "none"
        mounts = [docker.types.Mount(target=target, source=str(Path(host).resolve()), type="bind", read_only=True)
                  for host, target in spec.mounts()]
        mounts += [docker.types.Mount(target=target, source=host, type="bind", read_only=True)
                   for host, target in system]
        if spec.has_network and spec.ca_bundle:  # a mount, not a volume: an image committed from it keeps none
            mounts.append(docker.types.Mount(target=CA_PATH, source=spec.ca_bundle, type="bind", read_only=True))
        if not spec.network_env_per_command:
            env.update(network_env(spec, egress))

        options: dict[str, Any] = dict(
            # init and its `sleep` run as root (with no capabilities), so the agent's user cannot signal them and
            # stop the container under the harness; every command is exec'd as `spec.user`.
            command=["sleep", "infinity"], detach=True, init=True, user="0:0", working_dir=spec.workdir,
            name=f"failatlas-sbx-{uuid.uuid4().hex[:12]}", labels=sandbox_labels(spec),
            environment=env, network_mode=network,
            mem_limit=f"{spec.memory_mb}m", memswap_limit=f"{spec.memory_mb}m",
            nano_cpus=int(spec.cpus * 1e9), pids_limit=spec.pids_limit, cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            tmpfs={"/tmp": f"rw,nosuid,nodev,size={spec.tmp_mb}m,mode=1777"}, shm_size=f"{spec.shm_mb}m",
            read_only=spec.read_only_root,
        )
        if not (netns and network == netns):  # Docker refuses a hostname beside another container's namespace
            options["hostname"] = "sandbox"
        if spec.trace_processes:  # root's tracer (docker_commands, provenance.py): it drops to the sandbox user for
            # the command, traces it and reads its descriptors; the sandbox user has none of these
            options["cap_add"] = ["SETUID", "SETGID", "SYS_PTRACE", "DAC_READ_SEARCH"]
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

    def _probe(self, key: tuple[str, str, str]) -> None:
        """Learn the user's uid/gid, where coreutils' `timeout` is in the system's folders (never a program the agent
        put on its PATH: it would answer for the deadline), whether GNU find and tar exist, and the starting cgroup
        counters.
        What the image gives is the same for every container of one image id, user and environment (`key`), and a
        new container's counters start at zero: a later sandbox of the same key takes them from the first (one
        command less per sandbox; nothing the agent can write into a container changes its image)."""
        self._probe_key = key  # the tracer's setup is known by it too (docker_commands)
        with _PROBED_LOCK:
            known = _PROBED.get(key)
        if known is not None:
            self._uid, self._gid, self._timeout, self._gnu_tools, self._home = known
            self._counters = (0, 0)
            return
        script = ('id -u; id -g; p=$(command -v timeout); case "$p" in /*) echo "$p";; *) echo no;; esac; '
                  + docker_files.GNU_SH + '; echo "${HOME:-/tmp}"; ' + _COUNTERS_SH)
        res = self._raw_exec(["/bin/sh", "-c", script], user=self.spec.user, timeout=30, env=HARNESS_ENV)
        lines = res.stdout.splitlines()
        if res.returncode != 0 or len(lines) < 5:
            raise SandboxError(
                f"the sandbox image {self.spec.image} cannot run /bin/sh as {self.spec.user!r}: "
                f"{res.stderr.strip() or res.stdout.strip()}"
            )
        self._uid, self._gid = int(lines[0]), int(lines[1])
        self._timeout = lines[2] if lines[2] != "no" else ""
        self._gnu_tools = lines[3] == "gnu"
        self._home = lines[4]
        self._counters = _parse_counters("\n".join(lines[5:]))
        if self._counters == (0, 0):  # else this engine's counters are not the container's own: probe each time
            with _PROBED_LOCK:
                _PROBED[key] = (self._uid, self._gid, self._timeout, self._gnu_tools, self._home)

    def _restart(self) -> None:
        """Last resort when a command cannot be killed from inside: restart the container, files kept."""
        import docker

        self._host = None
        try:
            self.container.kill()
            self.container.start()
        except docker.errors.DockerException as exc:
            raise SandboxError(f"cannot restart sandbox {self.container.name}: {exc}") from exc
        self.restarts += 1
        self._find_host()

    def _find_host(self) -> None:
        """The host's view of this container's cgroups (host_cgroup.py), kept only for a sandbox user other than
        root (its rule tells the user's processes from init's by their uid)."""
        import docker

        self._host = None
        if self._uid == 0:
            return
        try:
            self.container.reload()  # the attributes `run` returned were read before the container started
        except docker.errors.DockerException:
            return
        self._host = HostCgroup.find(self.container.id, ((self.container.attrs or {}).get("State") or {}).get("Pid"))

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
        res = self._raw_exec(["mkdir", "-p", path], user=self.spec.user, timeout=30, env=HARNESS_ENV)
        if res.returncode != 0:
            raise SandboxPathError(f"cannot create folder {path} in the sandbox: {res.stderr.strip()}")

    def read_file(self, path: str, *, max_bytes: int = DEFAULT_READ_LIMIT) -> bytes:
        """The first `max_bytes` bytes of a regular file, read as the sandbox user without following links.

        Raises SandboxFileNotFoundError when it is missing, SandboxPathError when it is a folder, a FIFO, a link
        (or reached through one below the working copy) or unreadable by the sandbox user."""
        self._check_open()
        return self._retrying_stream(f"reading {path}",
                                     lambda: docker_files.read_file(self, path, max_bytes=max_bytes))

    def read_files(self, paths: list[str], *, max_bytes: int = DEFAULT_READ_LIMIT) -> list[bytes | OSError]:
        """Each of `paths` as `read_file` reads it, in one command: its bytes, or the error `read_file` raises."""
        self._check_open()
        return self._retrying_stream(f"reading {len(paths)} files",
                                     lambda: docker_files.read_files(self, paths, max_bytes=max_bytes))

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

    def write_files(self, folder: str, files: list[tuple[str, bytes]]) -> None:
        """Write files (names, not paths) into the existing `folder` in one copy, in their order: each appears
        only once the one before it is complete (one daemon call instead of one per file)."""
        self._check_open()
        self._put(tarballs.pack_files(files, uid=self._uid, gid=self._gid), self._path(folder))

    def write_folder(self, folder: str, files: list[tuple[str, bytes]]) -> None:
        """Create `folder` (its parent exists) holding `files` (names, in this order), owned by the user, in one
        copy into its parent (`protocol.write_folder`)."""
        self._check_open()
        target = self._path(folder)
        name = posixpath.basename(target)
        if target == self.workdir or not name or name in (".", ".."):
            raise SandboxPathError(f"{folder} is not a folder below the working copy")
        entries: list[tuple[str, bytes | None]] = [(name, None), *((f"{name}/{n}", data) for n, data in files)]
        self._put(tarballs.pack_tree(entries, uid=self._uid, gid=self._gid), posixpath.dirname(target))

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

        holder, self._netns = self._netns, None
        gone = False
        try:
            self.container.remove(force=True, v=True)
            gone = True
        except docker.errors.NotFound:
            gone = True  # already removed, e.g. by `failatlas sandbox cleanup --all`
        except docker.errors.APIError as exc:
            raise SandboxError(f"cannot remove sandbox {self.container.name}: {exc}") from exc
        finally:
            if self.egress is not None:
                self.egress.close()
            if holder is not None:  # reused only once the container and every process of it are gone, and
                # never after a root user, who owns the holder's name files (docker_netns.py)
                docker_netns.pool().give_back(holder, reuse=gone and self._uid != 0)

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
            built = build_base_image(tag)
            # on a FUSE storage driver, its system folders are read from the host (docker_system.py)
            docker_system.prepare(docker_client(), tag, built.image_id, say)
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
