"""The local backend: commands run as host subprocesses in a private folder, for hosts without Docker.

This is containment, not isolation. Enforced:
- the deadline: the command's whole session and every process that inherited its marker are killed;
- the process tree: each command runs under a reaper (`reaper.py`, a child subreaper) that, when the command
  ends, kills whatever it left (background jobs, setsid'ed daemons, those that cleared their environment), and
  the session and marker are killed too, so nothing a command started outlives it;
- the output cap;
- memory: RLIMIT_AS per process when no GPU is given (CUDA reserves huge address space, so not with GPUs),
  and a sampler that kills the session when its total RSS passes `memory_mb`;
- the process count: the sampler kills the session past `pids_limit` (RLIMIT_NPROC counts all processes of
  the user and is ignored for root, so it is not used);
- GPUs: `CUDA_VISIBLE_DEVICES` is always set, empty when none are leased;
- a scrubbed environment: host secrets such as API keys do not leak in.
Not enforced: network (the policy is recorded, and with network the CA bundle's variables point at the host's
bundle, but the host's own routes apply; use Docker where the policy must hold), CPU share, users,
capabilities, read-only inputs (symlinks to the host paths, protected only by host permissions; a data input's
`$FAILATLAS_DATA_NAME` is its host path, since /data/NAME is not there). The sampler
polls every 0.2 s, so a fast fork bomb or allocation can overshoot before it is stopped.
Files come out without following links the agent made (`read_file` opens the path part by part with O_NOFOLLOW;
`copy_out` walks by folder descriptors) and within `CopyLimits`; with no separate user, "as the agent's user"
means as the harness's here.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import resource
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from failatlas.bench_core.sandbox import procs
from failatlas.bench_core.sandbox.errors import SandboxError, SandboxFileNotFoundError, SandboxPathError
from failatlas.bench_core.sandbox.model import (
    DEFAULT_OUTPUT_LIMIT,
    DEFAULT_READ_LIMIT,
    CopyLimits,
    CopyReport,
    ExecResult,
    KilledReason,
    SandboxSpec,
)
from failatlas.bench_core.sandbox.output import CappedBuffer, command_argv, command_text
from failatlas.bench_core.sandbox.policy import CA_ENV_VARS
from failatlas.bench_core.sandbox.protocol import SANDBOXES, SandboxKind
from failatlas.bench_core.sandbox.treecopy import TreeWriter, copy_host_tree
from failatlas.bench_core.tasks.data import data_var
from failatlas.core.errors import InputError

MARKER_VAR = "FAILATLAS_EXEC_ID"
REAPER = Path(__file__).resolve().with_name("reaper.py")
LOCAL_PREFIX = "failatlas-sbx-"
OWNER_FILE = ".failatlas-owner.json"
_SAMPLE_S = 0.2
_OOM_MESSAGES = ("MemoryError", "Cannot allocate memory", "std::bad_alloc", "out of memory")
_PASS_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "TERM")


class LocalSandbox:
    """A private folder `<root>` on the host; the working copy is `<root>/<spec.workdir>`.

    Sandbox paths map into the root: `/workspace/x` is `<root>/workspace/x`, a read-only input mounted at
    `/data` is a symlink `<root>/data`. Commands see `$FAILATLAS_SANDBOX_ROOT` and run in the working copy, so
    they should use relative paths.
    """

    backend = "local"

    def __init__(self, spec: SandboxSpec, root: Path) -> None:
        self.spec = spec
        self.root = root
        self._workdir = root / spec.workdir.lstrip("/")
        self.workdir = str(self._workdir)
        self._closed = False
        self.commands_started = 0  # commands of `exec` that started: from the first, the agent's code may run
        self._running: set[str] = set()  # markers of the commands running now (another thread's), ended by close

    @classmethod
    def start(cls, spec: SandboxSpec, *, workspace: Path | None = None) -> LocalSandbox:
        """Make the private root, copy `workspace` in and link the read-only inputs."""
        if spec.env_dir and cls.backend == "local":
            raise SandboxError("a task environment built as a venv runs only under bwrap (it is seen at a fixed "
                               "path the local sandbox cannot mount)", hint="run with --sandbox bwrap")
        root = Path(tempfile.mkdtemp(prefix=LOCAL_PREFIX, dir=local_base()))
        box = cls(spec, root)
        try:
            pid = os.getpid()
            (root / OWNER_FILE).write_text(json.dumps(
                {"pid": pid, "start": procs.start_time(pid), "run_id": spec.run_id}))
            if workspace is not None:
                shutil.copytree(workspace, box._workdir, symlinks=True)
            else:
                box._workdir.mkdir(parents=True)
            for sub in ("home", "tmp"):
                (root / sub).mkdir(exist_ok=True)
            for host, target in spec.mounts():
                if not Path(host).exists():
                    raise SandboxError(f"read-only input {host} does not exist")
                link = root / target.lstrip("/")
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(Path(host).resolve())
        except (OSError, SandboxError) as exc:
            box.close()
            if isinstance(exc, SandboxError):
                raise
            raise SandboxError(f"cannot prepare the local sandbox in {root}: {exc}") from exc
        return box

    def _host(self, path: str) -> Path:
        """The host path of a sandbox path; InputError when it leaves the sandbox."""
        p = Path(path)
        if not p.is_absolute():
            p = self._workdir / p
        elif not p.is_relative_to(self.root):
            p = self.root / path.lstrip("/")
        resolved = Path(os.path.normpath(p))
        if not resolved.is_relative_to(self.root):
            raise InputError(f"path {path!r} is outside the sandbox")
        return resolved

    def _env(self, extra: Mapping[str, str] | None, marker: str) -> dict[str, str]:
        env = {k: os.environ[k] for k in _PASS_ENV if k in os.environ}
        env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
        env.update(HOME=str(self.root / "home"), TMPDIR=str(self.root / "tmp"),
                   FAILATLAS_SANDBOX_ROOT=str(self.root), CUDA_VISIBLE_DEVICES=",".join(self.spec.gpu_ids))
        if self.spec.has_network and self.spec.ca_bundle:
            env.update({name: self.spec.ca_bundle for name in CA_ENV_VARS})
        # nothing is mounted here: each data input's variable names the host path itself (no link to follow)
        env.update({data_var(name): str(Path(host).resolve()) for name, host in self.spec.data.items()})
        env.update(self.spec.env)
        env.update(extra or {})
        env[MARKER_VAR] = marker
        return env

    def _limits(self) -> None:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if not self.spec.gpu_ids:
            cap = self.spec.memory_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        if self.spec.disk_mb is not None:
            cap = self.spec.disk_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_FSIZE, (cap, cap))

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
        """Run `cmd` with a deadline of `timeout` seconds; see the module docstring for what is enforced. `trace`:
        never traced here (the local kind isolates nothing; its provenance says so)."""
        self._check_open()
        argv = [sys.executable, "-I", "-S", str(REAPER), *command_argv(cmd, self.spec.shell)]
        marker = uuid.uuid4().hex
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                argv, cwd=self._host(cwd) if cwd else self._workdir, env=self._env(env, marker),
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                start_new_session=True, preexec_fn=self._limits,  # noqa: PLW1509
            )
        except FileNotFoundError as exc:
            return ExecResult(command=command_text(cmd), returncode=127, stderr=str(exc),
                              duration_s=time.monotonic() - started)
        except OSError as exc:
            raise SandboxError(f"cannot start a local command: {exc}") from exc
        except BaseException:  # Ctrl-C while the command was being started: it may run already, unseen
            procs.kill_tree(None, f"{MARKER_VAR}={marker}".encode())
            raise
        self.commands_started += 1
        self._running.add(marker)
        try:
            out, err = CappedBuffer(output_limit), CappedBuffer(output_limit)
            reason = self._pump(proc, out, err, deadline=started + timeout, marker=marker)
            returncode = proc.wait()
        finally:
            self._running.discard(marker)
            # what the command left running (background, daemonised, setsid'ed children) ends with it
            procs.kill_tree(proc.pid, f"{MARKER_VAR}={marker}".encode())
        if returncode < 0:
            returncode = 128 - returncode
        duration = time.monotonic() - started
        stderr = err.text()
        if reason is None and returncode != 0 and not self.spec.gpu_ids and any(
            m in stderr[-4000:] for m in _OOM_MESSAGES
        ):
            reason = "oom"
        return ExecResult(
            command=command_text(cmd), returncode=returncode, stdout=out.text(), stderr=stderr,
            truncated=out.truncated or err.truncated, duration_s=duration,
            timed_out=reason == "timeout", killed_reason=reason,
        )

    def _pump(self, proc: subprocess.Popen, out: CappedBuffer, err: CappedBuffer, *,
              deadline: float, marker: str) -> KilledReason | None:
        """Read both pipes until the command ends or must be killed; returns why it was killed."""
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ, out)
        sel.register(proc.stderr, selectors.EVENT_READ, err)
        reason: KilledReason | None = None
        exited_at: float | None = None
        next_sample = time.monotonic()
        try:
            while sel.get_map():
                now = time.monotonic()
                if exited_at is None and proc.poll() is not None:
                    exited_at = now
                if exited_at is not None and now - exited_at > 0.2:
                    break  # background children keep the pipes open; do not wait for them
                if reason is None and exited_at is None:
                    if now >= deadline:
                        reason = "timeout"
                    elif now >= next_sample:
                        reason = self._over_limit(proc.pid)
                        next_sample = now + _SAMPLE_S
                    if reason is not None:
                        _stop(proc, marker)
                wait = max(0.0, min(deadline - now, next_sample - now, 0.05 if exited_at else _SAMPLE_S))
                for key, _ in sel.select(timeout=wait):
                    chunk = os.read(key.fd, 65536)
                    if chunk:
                        key.data.write(chunk)
                    else:
                        sel.unregister(key.fileobj)
        except BaseException:  # Ctrl-C: the command's session ends with us, never left running
            procs.kill_tree(proc.pid, f"{MARKER_VAR}={marker}".encode())
            raise
        finally:
            sel.close()
            proc.stdout.close()
            proc.stderr.close()
            if reason is not None:
                procs.kill_tree(proc.pid, f"{MARKER_VAR}={marker}".encode())
        return reason

    def _over_limit(self, sid: int) -> KilledReason | None:
        members = procs.session_processes(sid)
        if len(members) > self.spec.pids_limit:
            return "pids"
        if sum(p.rss_bytes for p in members) > self.spec.memory_mb * 1024 * 1024:
            return "oom"
        return None

    def read_file(self, path: str, *, max_bytes: int = DEFAULT_READ_LIMIT) -> bytes:
        """The first `max_bytes` bytes of a regular file, without following links (but those of read-only inputs).

        Raises SandboxFileNotFoundError when it is missing, SandboxPathError when it is a folder, a FIFO, a link
        or reached through one."""
        self._check_open()
        host = self._host(path)
        fd = self._open_no_links(host, path)
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise SandboxPathError(f"{path} in the sandbox is a folder, not a file")
            if stat.S_ISFIFO(st.st_mode):
                raise SandboxPathError(f"{path} in the sandbox is a FIFO, not a regular file")
            if not stat.S_ISREG(st.st_mode):
                raise SandboxPathError(f"{path} in the sandbox is not a regular file")
            chunks, left = [], max(0, max_bytes)
            while left > 0:
                chunk = os.read(fd, min(left, 1024 * 1024))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def _open_no_links(self, host: Path, path: str) -> int:
        """Open `host` (inside the root) part by part, refusing links other than the read-only input mounts."""
        mounts = {self.root / target.lstrip("/") for _host, target in self.spec.mounts()}
        parts = host.relative_to(self.root).parts
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        here = self.root
        try:
            for i, part in enumerate(parts):
                here = here / part
                last = i == len(parts) - 1
                flags = os.O_RDONLY | os.O_NONBLOCK | (0 if here in mounts else os.O_NOFOLLOW)
                if not last:
                    flags |= os.O_DIRECTORY
                try:
                    child = os.open(part, flags, dir_fd=fd)
                except FileNotFoundError:
                    raise SandboxFileNotFoundError(f"no file {path} in the sandbox") from None
                except NotADirectoryError:
                    if os.path.islink(here):
                        raise SandboxPathError(f"{path} in the sandbox is reached through the symlink "
                                               f"/{here.relative_to(self.root)}") from None
                    raise SandboxFileNotFoundError(f"no file {path} in the sandbox") from None
                except OSError as exc:
                    if exc.errno == errno.ELOOP or os.path.islink(here):
                        what = "is a symlink, not a file" if last else \
                            f"is reached through the symlink /{here.relative_to(self.root)}"
                        raise SandboxPathError(f"{path} in the sandbox {what}") from None
                    raise SandboxPathError(f"{path} in the sandbox cannot be read: {exc.strerror}") from None
                os.close(fd)
                fd = child
        except BaseException:
            os.close(fd)
            raise
        return fd

    def write_file(self, path: str, data: bytes | str) -> None:
        """Write a file in the sandbox, creating parent folders."""
        self._check_open()
        host = self._host(path)
        host.parent.mkdir(parents=True, exist_ok=True)
        host.write_bytes(data.encode() if isinstance(data, str) else data)

    def copy_in(self, host_src: str | Path, dest: str) -> None:
        """Copy a host file or folder to the sandbox path `dest` (the copy's own path, not its parent)."""
        self._check_open()
        src, target = Path(host_src), self._host(dest)
        if not src.exists():
            raise SandboxFileNotFoundError(f"no host path {src}")
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, target, symlinks=True, dirs_exist_ok=True)
        else:
            shutil.copy2(src, target)

    def copy_out(self, src: str, host_dest: str | Path, *, limits: CopyLimits | None = None) -> CopyReport:
        """Copy a sandbox file or folder to the host path `host_dest` (the copy's own path) within `limits`, without
        following links; returns what was left out. Links that resolve outside the copy are not kept."""
        self._check_open()
        source = self._host(src)
        if not os.path.lexists(source):
            raise SandboxFileNotFoundError(f"no file or folder {src} in the sandbox")
        mounts = {self.root / target.lstrip("/") for _host, target in self.spec.mounts()}
        with TreeWriter(host_dest, limits) as writer:
            copy_host_tree(source, writer, follow_top=source in mounts)
            return writer.finish()

    def close(self) -> None:
        """End the commands still running (another thread's) and remove the private folder. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        for marker in list(self._running):
            procs.kill_tree(None, f"{MARKER_VAR}={marker}".encode())
        shutil.rmtree(self.root, ignore_errors=True)

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError("the sandbox is closed")

    def __enter__(self) -> LocalSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()



def _stop(proc: subprocess.Popen, marker: str) -> None:
    """End a command at its deadline or a limit: its reaper kills it and everything it left (even what left its
    session and dropped its marker), then the session and the marker are killed in case the reaper did not end."""
    with contextlib.suppress(OSError):
        os.kill(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=2)
    procs.kill_tree(proc.pid, f"{MARKER_VAR}={marker}".encode())


def local_base() -> str:
    """Where local sandboxes live: $FAILATLAS_SANDBOX_TMP, else the system temp folder."""
    return os.environ.get("FAILATLAS_SANDBOX_TMP") or tempfile.gettempdir()


def cleanup_local_orphans(
    *, run_id: str | None = None, include_live: bool = False, base: str | Path | None = None
) -> list[str]:
    """Remove local sandbox folders whose owner process is dead (all with `include_live`), optionally only
    those of `run_id`; returns the folders removed."""
    removed = []
    for root in sorted(Path(base or local_base()).glob(LOCAL_PREFIX + "*")):
        try:
            owner = json.loads((root / OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue  # not ours, or still being created
        if run_id is not None and owner.get("run_id") != run_id:
            continue
        if include_live or not procs.is_alive(int(owner["pid"]), owner.get("start")):
            shutil.rmtree(root, ignore_errors=True)
            removed.append(str(root))
    return removed


@SANDBOXES.register("local")
class LocalKind(SandboxKind):
    """Processes on this host in private temp folders: no image; orphaned folders of dead runners are removed."""

    name = "local"

    def start(self, spec: SandboxSpec, *, workspace: Path | None) -> LocalSandbox:
        return LocalSandbox.start(spec, workspace=workspace)

    def root(self, spec: SandboxSpec) -> str:
        return "host"

    def clean_orphans(self, *, run_id: str | None = None, include_live: bool = False) -> list[str]:
        return cleanup_local_orphans(run_id=run_id, include_live=include_live)
