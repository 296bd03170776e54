"""The bwrap backend: each command runs in fresh Linux namespaces made by bubblewrap, for hosts without Docker
(GPU nodes, cloud VMs), with no daemon, no image registry and no root needed.

What it enforces (docs/sandbox.md has the measured table):
- namespaces: a new user, PID, IPC, UTS and network namespace per command, nested user namespaces refused; the
  network namespace has only its own loopback, so under `none` nothing (not the host's 127.0.0.1, not its
  addresses) is reachable. Under `registries` the only way out is the host-side egress proxy's unix socket, relayed
  from 127.0.0.1:3128 inside (`bwrap_egress.py`); `full` is refused (SandboxError): use Docker for it;
- files: the host's system folders (`bwrap_setup.SYSTEM_DIRS`: /usr, /etc, /opt, ...) read-only (or, when the spec
  names an image, that image's cached root filesystem: `bwrap_rootfs.py`) and nothing
  else of the host (no /home, /root, /run, /var, /srv, /mnt, host /tmp): the working copy (`spec.workdir`) and
  the agent's home (/home/agent) are the only writable trees kept between commands; /tmp (`tmp_mb`) and
  /dev/shm (`shm_mb`) are tmpfs of the command; read-only inputs are bound read-only;
- users: when the harness runs as root each sandbox gets a host uid of its own (so it reads nothing of root's
  and no other sandbox's files) and no supplementary groups; otherwise the harness's own user. Inside, uid 1000;
- GPUs: only the leased GPUs' /dev/nvidiaN with the control, UVM and caps nodes; the other GPUs' driver entries
  hidden; `CUDA_VISIBLE_DEVICES` names the leased GPUs by UUID. No GPU leased: no NVIDIA node at all;
- limits, with rlimits and a watchdog (no cgroups: they are not delegated on the hosts this was built for):
  the deadline (SIGKILL to bwrap; the PID namespace dies with its init); process count (RLIMIT_NPROC for a
  sandbox's own uid, and the watchdog, which counts the processes of the sandbox's PID namespace). The harness's
  own commands in the sandbox (writing a file in) run with HARNESS_PIDS_RESERVE more: RLIMIT_NPROC counts every
  process of the uid, so processes the agent's code parks in a long command (the hidden tests' zygote) cannot
  stop the harness from writing the next call's request. Without a uid of its own (a harness not run as root),
  an agent's command gets RLIMIT_NPROC = the user's processes when it starts + pids_limit + 1, at most the
  user's own limit minus HARNESS_PIDS_RESERVE, so a fork bomb the watchdog has not sampled yet cannot take the
  processes the harness (the same user) needs; memory
  (RLIMIT_AS without GPUs, and the watchdog on the namespace's total RSS); CPUs (affinity to ceil(cpus) cores);
  file size (RLIMIT_FSIZE with `disk_mb`). The watchdog samples every 0.2 s: a fast allocation can overshoot
  before it is stopped;
- the process tree: bwrap runs with --die-with-parent and a PID namespace, so nothing a command starts outlives
  it (background processes end with their command) or the harness; `close` also kills whatever still runs as the
  sandbox's own uid (a command of another thread still running).
Files come out by the harness walking the working copy without following links (as `local` does, `treecopy`);
files go in through a command inside the sandbox, so a link the agent planted cannot redirect a write.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import posixpath
import re
import resource
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath

from failatlas.bench_core.sandbox import bwrap_setup as setup
from failatlas.bench_core.sandbox import procs, provenance
from failatlas.bench_core.sandbox.bwrap_egress import BwrapEgress
from failatlas.bench_core.sandbox.bwrap_files import BwrapFilesIn, place_inputs
from failatlas.bench_core.sandbox.bwrap_namespace import (
    _await_namespace_end,
    _kill,
    _kill_uid,
    _namespace_members,
    _pick_cpus,
    _pid_namespace,
    _remove_tree,
    _uid_processes,
)
from failatlas.bench_core.sandbox.bwrap_rootfs import build_rootfs, root_for
from failatlas.bench_core.sandbox.errors import (
    SandboxError,
    SandboxSetupError,
)
from failatlas.bench_core.sandbox.local import LOCAL_PREFIX, OWNER_FILE, LocalSandbox, cleanup_local_orphans, local_base
from failatlas.bench_core.sandbox.model import (
    DEFAULT_OUTPUT_LIMIT,
    ExecResult,
    KilledReason,
    SandboxSpec,
)
from failatlas.bench_core.sandbox.output import CappedBuffer, command_argv, command_text
from failatlas.bench_core.sandbox.protocol import SANDBOXES, SandboxKind
from failatlas.core.errors import InputError

_SAMPLE_S = 0.2
_OOM_MESSAGES = ("MemoryError", "Cannot allocate memory", "std::bad_alloc", "out of memory")
_FORK_FAILED = re.compile(r"fork: retry: Resource temporarily unavailable|fork: Resource temporarily unavailable"
                          r"|Cannot fork|can't fork")
_BWRAP_CANT = re.compile(r"(?m)^bwrap: Can't .*$")
_PASS_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "TERM")
# processes the harness's own commands may start beyond the agent's limit (a file written in needs bwrap, its init,
# sh, cp and mv)
HARNESS_PIDS_RESERVE = 16


class BwrapSandbox(BwrapFilesIn, LocalSandbox):
    """A private host folder `<root>` holding the working copy (`<root>/workspace`, seen at `spec.workdir`) and the
    agent's home (`<root>/home`, seen at /home/agent); every command is a bwrap of its own over them.

    `workdir` is the sandbox's path (`/workspace`); file methods take sandbox paths, as with Docker."""

    backend = "bwrap"

    def __init__(self, spec: SandboxSpec, root: Path, *, binary: str, uid: int | None) -> None:
        super().__init__(spec, root)
        self._workdir = root / "workspace"
        self.workdir = spec.workdir
        self._home = root / "home"
        self._binary = binary
        self._uid = uid
        self._inputs: list[tuple[str, str]] = []
        self._gpus = setup.gpu_nodes(spec.gpu_ids)
        self._cpus = _pick_cpus(spec.cpus)
        self._tracer: Path | str | None = None  # the summaries' folder once set up, or why commands run untraced
        self._strace = ""
        self.egress: BwrapEgress | None = None
        self._rootfs: str | None = None  # None: the host's system folders; else an image's root (bwrap_rootfs)

    @classmethod
    def start(cls, spec: SandboxSpec, *, workspace: Path | None = None) -> BwrapSandbox:
        """Make the private root, copy `workspace` in and check the read-only inputs; SandboxError when it cannot."""
        if spec.network not in ("none", "registries"):  # the outside world minus the host needs Docker's guarded bridge
            raise SandboxError(f"the bwrap sandbox has no network but none and registries (asked for "
                               f"{spec.network!r})", hint="run it with --network registries or --sandbox docker")
        binary = setup.bwrap_binary()
        problem = setup.bwrap_problem(binary)
        if problem is not None:
            raise SandboxError(f"bwrap sandboxes cannot start: {problem}")
        rootfs = root_for(spec)
        base = Path(local_base())
        uid = setup.host_uid()
        if uid is not None and not setup.is_world_traversable(base):
            raise SandboxError(f"the sandbox folder {base} is not reachable by a sandbox's own user",
                               hint="point $FAILATLAS_SANDBOX_TMP at a folder everyone may pass through")
        root = Path(tempfile.mkdtemp(prefix=LOCAL_PREFIX + "bwrap-", dir=base))
        box = cls(spec, root, binary=binary, uid=uid)
        box._rootfs = rootfs
        try:
            pid = os.getpid()
            (root / OWNER_FILE).write_text(json.dumps(
                {"pid": pid, "start": procs.start_time(pid), "run_id": spec.run_id, "kind": "bwrap"}))
            if workspace is not None:
                shutil.copytree(workspace, box._workdir, symlinks=True)
            else:
                box._workdir.mkdir()
            box._home.mkdir()
            box._place_inputs()
            box._own(box._workdir)
            box._own(box._home)
            os.chmod(root, 0o711)
            if spec.network == "registries":
                box.egress = BwrapEgress.start(root, spec)
            box._check_gpu_hiding()
        except (OSError, SandboxError) as exc:
            box.close()
            if isinstance(exc, SandboxError):
                raise
            raise SandboxError(f"cannot prepare the bwrap sandbox in {root}: {exc}") from exc
        return box

    @property
    def working_copy(self) -> Path:
        """The host folder that is the working copy (what a build moves out before closing)."""
        return self._workdir

    def _check_gpu_hiding(self) -> None:
        """Where the kernel refuses a tmpfs over the other GPUs' /proc/driver/nvidia entries, start without hiding
        them (their device nodes stay absent, so they cannot be opened) and say so in `gpu_note`."""
        self.gpu_note = ""
        if not self._gpus.hidden_proc:
            return
        try:
            self._run(["/bin/true"], "true", timeout=60)
        except SandboxError as exc:
            self._gpus.hidden_proc = []
            self.gpu_note = f"other GPUs' /proc/driver/nvidia entries left visible: {exc}"[:500]

    def _place_inputs(self) -> None:
        place_inputs(self)

    def _own(self, path: Path) -> None:
        """Give `path` (a tree the harness made) to the sandbox's uid."""
        if self._uid is None:
            return
        os.chown(path, self._uid, self._uid, follow_symlinks=False)
        for here, dirs, files in os.walk(path):
            for name in [*dirs, *files]:
                os.chown(os.path.join(here, name), self._uid, self._uid, follow_symlinks=False)

    def _host(self, path: str) -> Path:
        """The host path of a sandbox path: below the working copy or the agent's home; InputError elsewhere."""
        p = PurePosixPath(os.path.normpath(posixpath.join(self.workdir, path)))
        for inside, host in ((PurePosixPath(self.workdir), self._workdir), (PurePosixPath(setup.HOME), self._home)):
            if p.is_relative_to(inside):
                return host.joinpath(*p.relative_to(inside).parts)
        raise InputError(f"path {path!r} is outside the sandbox's working copy and home")

    # -- commands -----------------------------------------------------------------------------------------------

    def _argv(self, argv: list[str], cwd: str, env: Mapping[str, str], binds: Sequence[tuple[str, str]] = (), *,
              info_fd: int) -> list[str]:
        spec = self.spec
        opts = [self._binary, "--info-fd", str(info_fd), *setup.namespace_options(),
                *setup.root_options(self._rootfs),
                "--proc", "/proc", "--dev", "/dev", "--ro-bind", "/sys", "/sys",
                "--size", str(spec.tmp_mb * 1024 * 1024), "--tmpfs", "/tmp",
                "--size", str(spec.shm_mb * 1024 * 1024), "--tmpfs", "/dev/shm",
                "--tmpfs", "/home", "--bind", str(self._home), setup.HOME,
                "--bind", str(self._workdir), spec.workdir]
        for host, target in self._inputs:
            opts += ["--ro-bind", host, target]
        for host, target in binds:
            opts += ["--ro-bind", host, target]
        opts += setup.gpu_options(self._gpus)
        opts += ["--remount-ro", "/", "--chdir", cwd, "--clearenv"]  # the root's own tmpfs too: no new top folders
        for key, value in env.items():
            opts += ["--setenv", key, value]
        return [*opts, "--", *argv]

    def _env(self, extra: Mapping[str, str] | None, marker: str = "") -> dict[str, str]:
        env = {k: os.environ[k] for k in _PASS_ENV if k in os.environ}
        env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
        visible = ",".join(self._gpus.uuids) if self._gpus.uuids else ",".join(str(i) for i in
                                                                               range(len(self.spec.gpu_ids)))
        env.update(HOME=setup.HOME, USER="agent", TMPDIR="/tmp", CUDA_VISIBLE_DEVICES=visible)
        if self.egress is not None:
            env.update(self.egress.env())
        env.update(self.spec.data_env())
        env.update(self.spec.venv_env(env["PATH"]))
        env.update(self.spec.env)
        env.update(extra or {})
        return env

    def _nproc(self, harness: bool) -> int | None:
        """RLIMIT_NPROC of a command (module docstring); None: left as it is (the harness's own, as itself)."""
        if self._uid is not None:  # counted per uid, this sandbox's own: its namespace's processes and bwrap itself
            return self.spec.pids_limit + 1 + (HARNESS_PIDS_RESERVE if harness else 0)
        if harness:
            return None
        soft, _hard = resource.getrlimit(resource.RLIMIT_NPROC)
        nproc = len(_uid_processes(os.getuid())) + self.spec.pids_limit + 1
        if soft != resource.RLIM_INFINITY:
            nproc = min(nproc, soft - HARNESS_PIDS_RESERVE)
        return max(nproc, 1)

    def _limits(self, nproc: int | None = None) -> None:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if nproc is not None:  # the hard limit too, so the command cannot raise it again
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        if not self.spec.gpu_ids:
            cap = self.spec.memory_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        if self.spec.disk_mb is not None:
            cap = self.spec.disk_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_FSIZE, (cap, cap))
        if self._cpus:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, self._cpus)

    def _popen_user(self) -> dict:
        if self._uid is None:
            return {}
        return {"user": self._uid, "group": self._uid, "extra_groups": list(self._gpus.groups)}

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
        """Run `cmd` in a fresh bwrap with a deadline of `timeout` seconds; see the module docstring. `trace`:
        record its process and file events (`ExecResult.provenance`), traced from the host around bwrap."""
        self._check_open()
        argv, binds = command_argv(cmd, self.spec.shell), []
        if self.egress is not None:  # registries: the forwarder to the host's proxy first, in this command's netns
            argv, binds = self.egress.wrap(argv), self.egress.binds()
        if not trace:
            return self._run(argv, command_text(cmd), timeout=timeout, cwd=cwd, env=env, output_limit=output_limit,
                             binds=binds, harness=False)
        tracer = self._tracer_ready()
        if isinstance(tracer, str):
            res = self._run(argv, command_text(cmd), timeout=timeout, cwd=cwd, env=env, output_limit=output_limit,
                            binds=binds, harness=False)
            return res.model_copy(update={"provenance": provenance.unavailable(tracer)})
        summary = tracer / f"{uuid.uuid4().hex}.json"
        res = self._run(argv, command_text(cmd), timeout=timeout, cwd=cwd, env=env, output_limit=output_limit,
                        binds=binds, harness=False, summary=summary)
        found = provenance.read_summary(summary)
        summary.unlink(missing_ok=True)
        return res.model_copy(update={"provenance": found})

    def _tracer_ready(self) -> Path | str:
        """The host folder the tracer writes summaries to (set up once), or why the agent's commands run untraced:
        no strace on this host, or it cannot trace here. The folder is the sandbox uid's, outside every mount."""
        if self._tracer is not None:
            return self._tracer
        strace = provenance.strace_binary()
        if strace is None:
            self._tracer = "no strace on this host (install Debian's strace package)"
            return self._tracer
        folder = self.root / "trace"
        folder.mkdir(mode=0o700, exist_ok=True)
        shutil.copy(provenance.FILTER, folder / "filter.py")
        self._own(folder)
        probe = subprocess.run([strace, "-f", "-qq", "-o", "/dev/null", "/bin/true"], capture_output=True, text=True,
                               timeout=60, **self._popen_user())
        if probe.returncode != 0:
            self._tracer = f"strace cannot trace here: {probe.stderr.strip()[-200:] or probe.returncode}"
            return self._tracer
        self._strace, self._tracer = strace, folder
        return folder

    def egress_log(self) -> list[dict]:
        """The egress proxy's allow/deny decisions so far (`registries` only; [] otherwise)."""
        return self.egress.log() if self.egress is not None else []

    def _run(self, argv: list[str], text: str, *, timeout: float, cwd: str | None = None,
             env: Mapping[str, str] | None = None, output_limit: int = DEFAULT_OUTPUT_LIMIT,
             binds: Sequence[tuple[str, str]] = (), harness: bool = True, summary: Path | None = None
             ) -> ExecResult:
        """One bwrap; `harness`: a command of the harness's own, with HARNESS_PIDS_RESERVE more processes allowed
        to the uid than the agent's commands get; `summary`: traced (`provenance.py`), its summary written there.
        SandboxError when bwrap cannot start the command."""
        where = os.path.normpath(os.path.join(self.workdir, cwd)) if cwd else self.workdir
        started = time.monotonic()
        info_r, info_w = os.pipe()
        full = self._argv(argv, where, self._env(env), binds, info_fd=info_w)
        if summary is not None:  # strace outside bwrap: nothing in the sandbox's namespaces can see or reach it
            python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
            full = provenance.traced_argv(full, strace=self._strace, summary=str(summary), workdir=self.workdir,
                                          watched=[setup.HOME, "/tmp"], python=python,
                                          filter_path=str(summary.parent / "filter.py"))
        try:
            proc = subprocess.Popen(
                full, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, pass_fds=(info_w,),
                preexec_fn=functools.partial(self._limits, self._nproc(harness)),  # noqa: PLW1509
                **self._popen_user())
        except OSError as exc:
            os.close(info_r)
            raise SandboxError(f"cannot start bwrap: {exc}") from exc
        finally:
            os.close(info_w)
        if not harness:  # counted while it runs (a long command, such as the hidden tests' zygote, runs on)
            self.commands_started += 1
        out, err, info = CappedBuffer(output_limit), CappedBuffer(output_limit), CappedBuffer(4096)
        with os.fdopen(info_r, "rb", buffering=0) as info_pipe:
            reason = self._pump(proc, out, err, deadline=started + timeout, info=(info_pipe, info))
        returncode = proc.wait()
        _await_namespace_end(info.text())
        if returncode < 0:
            returncode = 128 - returncode
        stderr = err.text()
        if reason is None and "child-pid" not in info.text():  # bwrap never started the command: ours, not the agent's
            self.commands_started -= not harness
            message = f"bwrap could not start the command: {stderr.strip()[:500] or f'exit {returncode}'}"
            if self._harness_mount(stderr):
                raise SandboxSetupError(message + " (a mount of the harness's own, outside the working copy and "
                                        "home: not the agent's doing)")
            raise SandboxError(message)
        if harness and returncode != 0 and self._harness_mount(stderr):  # bwrap's own words: our command never ran
            raise SandboxSetupError(f"bwrap could not set up the harness's command {text!r}: {stderr.strip()[:500]} "
                                    "(a mount of the harness's own, outside the working copy and home: not the "
                                    "agent's doing)")
        if reason is None and returncode != 0 and not self.spec.gpu_ids and any(
            m in stderr[-4000:] for m in _OOM_MESSAGES
        ):
            reason = "oom"
        if reason is None and _FORK_FAILED.search(stderr[-8000:]):
            reason = "pids"  # RLIMIT_NPROC refused a fork (the command's own shell may still have exited 0)
        return ExecResult(command=text, returncode=returncode, stdout=out.text(), stderr=stderr,
                          truncated=out.truncated or err.truncated, duration_s=time.monotonic() - started,
                          timed_out=reason == "timeout", killed_reason=reason)

    def _harness_mount(self, stderr: str) -> bool:
        """Whether bwrap's complaint names only paths outside the working copy and the agent's home (so nothing the
        agent wrote can have caused it: the harness's own mount failed)."""
        paths = [re.sub(r"^/(?:newroot|oldroot)(?=/)", "", p) for line in _BWRAP_CANT.findall(stderr)
                 for p in re.findall(r"/[^:\s]+", line)]
        if not paths:
            return False
        mine = (PurePosixPath(self.workdir), PurePosixPath(setup.HOME))
        return not any(PurePosixPath(p).is_relative_to(inside) for p in paths for inside in mine)

    def _pump(self, proc: subprocess.Popen, out: CappedBuffer, err: CappedBuffer, *,  # type: ignore[override]
              deadline: float, info: tuple, marker: str = "") -> KilledReason | None:
        """Read the output pipes and bwrap's info pipe until bwrap ends, sampling the namespace's processes; kill it
        at the deadline or a limit. Returns why it was killed."""
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ, out)
        sel.register(proc.stderr, selectors.EVENT_READ, err)
        sel.register(info[0], selectors.EVENT_READ, info[1])
        reason: KilledReason | None = None
        next_sample = time.monotonic()
        namespace: str | None = None
        try:
            while sel.get_map():
                now = time.monotonic()
                if reason is None and proc.poll() is None:
                    if now >= deadline:
                        reason = "timeout"
                    elif now >= next_sample:
                        namespace = namespace or _pid_namespace(info[1].text())
                        reason = self._over_limit(namespace)
                        next_sample = now + _SAMPLE_S
                    if reason is not None:
                        _kill(proc.pid, namespace)
                wait = max(0.0, min(deadline - now, next_sample - now, _SAMPLE_S))
                for key, _ in sel.select(timeout=wait):
                    chunk = os.read(key.fd, 65536)
                    if chunk:
                        key.data.write(chunk)
                    else:
                        sel.unregister(key.fileobj)
        finally:
            sel.close()
            proc.stdout.close()
            proc.stderr.close()
            if reason is not None:
                _kill(proc.pid, namespace)
        return reason

    def _over_limit(self, namespace: str | None) -> KilledReason | None:  # type: ignore[override]
        if namespace is None:
            return None
        members = _namespace_members(namespace)
        if len(members) >= self.spec.pids_limit:  # RLIMIT_NPROC holds the count here: forks are failing
            return "pids"
        if sum(rss for _pid, rss in members) > self.spec.memory_mb * 1024 * 1024:
            return "oom"
        return None

    def close(self) -> None:
        """Remove the private folder (nothing of a command outlives it). Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        if self._uid is not None:
            _kill_uid(self._uid)
        if self.egress is not None:
            self.egress.close()
        _remove_tree(self.root)


@SANDBOXES.register("bwrap")
class BwrapKind(SandboxKind):
    """bubblewrap namespaces on this host (no daemon): the host's system folders read-only, or the cached root of the
    image a spec names (`bwrap_rootfs`); orphaned folders of dead runners are removed like the local kind's."""

    name = "bwrap"

    def root(self, spec: SandboxSpec) -> str:
        chosen = os.environ.get(setup.ROOTFS_ENV)
        if chosen:
            return f"root filesystem {chosen}"
        return f"image {spec.image}" if "image" in spec.model_fields_set else "host"

    def start(self, spec: SandboxSpec, *, workspace: Path | None) -> BwrapSandbox:
        return BwrapSandbox.start(spec, workspace=workspace)

    def prepare(self, image: str | None = None, *, say: Callable[[str], None] = lambda _text: None) -> None:
        """Check that bwrap can make a sandbox here (SandboxError saying why not); with `image`, unpack its root
        filesystem into the cache from Docker unless cached ($FAILATLAS_BWRAP_ROOTFS wins)."""
        problem = setup.bwrap_problem()
        if problem is not None:
            raise SandboxError(f"bwrap sandboxes cannot start: {problem}")
        rootfs = os.environ.get(setup.ROOTFS_ENV)
        if not rootfs and image:
            rootfs = str(build_rootfs(image)[0])
        say(f"bwrap sandboxes ({setup.bwrap_binary()}): root " + (f"{rootfs} (an image's root filesystem), read-only"
            if rootfs else "the host's system folders, read-only"))

    def clean_orphans(self, *, run_id: str | None = None, include_live: bool = False) -> list[str]:
        return cleanup_local_orphans(run_id=run_id, include_live=include_live)
