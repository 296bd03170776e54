"""The `registries` network of one bwrap sandbox: the egress proxy on the host, reached only through a unix socket.

A bwrap command's network namespace has only its own loopback. The harness starts the same allowlisting proxy the
Docker kind runs as a sidecar (`egress_proxy.py`), as a host process (as `nobody` when the harness is root) that
listens on a unix socket in `<sandbox root>/egress/`; that folder alone is bound read-only at `MOUNT` in every
command, with the in-sandbox forwarder (`bwrap_forward.py`) and a copy of the CA bundle. The command wrapper starts
the forwarder on 127.0.0.1:PROXY_PORT of the sandbox's own loopback, so HTTP(S)_PROXY works as in Docker. The proxy
runs in the host's network namespace, so it also refuses allowed names that resolve to loopback, private,
link-local or carrier-grade NAT addresses (`--refuse-private`). Its decision log (outside the bound folder) is read
back by `log()` for the run's trace. The proxy exits with the harness (`--parent`) or `close()`.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from failatlas.bench_core.sandbox.egress import MAX_LOG_BYTES, PROXY_PORT, parse_log, proxy_env
from failatlas.bench_core.sandbox.errors import SandboxError
from failatlas.bench_core.sandbox.model import SandboxSpec
from failatlas.bench_core.sandbox.policy import CA_ENV_VARS, pip_env

MOUNT = "/run/failatlas-egress"
SOCKET = "proxy.sock"
_NOBODY = 65534
_PROXY_FILES = 64 * 1024 * 1024
_PROXY_MEMORY = 1024 * 1024 * 1024  # address space: ~120 connections at once (8 MiB thread stacks), as the sidecar
_WRAPPER = (f'python3 {MOUNT}/forward.py {MOUNT}/{SOCKET} {PROXY_PORT} || echo "failatlas: the egress forwarder '
            'did not start (no python3?): package registries are unreachable" >&2; exec "$@"')


def _proxy_limits() -> None:
    """The host-side proxy's bounds, as the Docker sidecar's memory limit: a sandbox that opens connections by the
    thousand stalls its own proxy, not the host."""
    resource.setrlimit(resource.RLIMIT_AS, (_PROXY_MEMORY, _PROXY_MEMORY))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (_PROXY_FILES, _PROXY_FILES))  # its logs stop at 17 MiB themselves
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past it fails (the log's writes are guarded), no kill


class BwrapEgress:
    """One sandbox's host-side proxy; `start`, then `wrap` each command; `close` ends it (idempotent)."""

    def __init__(self, root: Path, proc: subprocess.Popen, ca: bool) -> None:
        self.dir = root / "egress"
        self._log = root / "egress-log" / "egress.log"
        self.proc = proc
        self._ca = ca

    @classmethod
    def start(cls, root: Path, spec: SandboxSpec) -> BwrapEgress:
        """Start the proxy allowing `spec.allow_hosts` (chained through `spec.upstream_proxy`) under `root`."""
        bound, logs = root / "egress", root / "egress-log"
        for folder in (bound, logs):
            folder.mkdir(mode=0o755)
        shutil.copyfile(Path(__file__).with_name("bwrap_forward.py"), bound / "forward.py")
        if spec.ca_bundle:
            shutil.copyfile(spec.ca_bundle, bound / "ca-bundle.pem")
        for path in (bound / "forward.py", bound / "ca-bundle.pem"):
            with contextlib.suppress(FileNotFoundError):
                path.chmod(0o444)
        python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
        user = {}
        if os.geteuid() == 0 and python == "/usr/bin/python3":  # the proxy needs no privilege: run it as nobody
            user = {"user": _NOBODY, "group": _NOBODY, "extra_groups": []}
            for folder in (bound, logs):
                os.chown(folder, _NOBODY, _NOBODY)
        source = Path(__file__).with_name("egress_proxy.py").read_text()
        argv = [python, "-I", "-c", source, "--unix", str(bound / SOCKET), "--log", str(logs / "egress.log"),
                "--allow", ",".join(spec.allow_hosts), "--refuse-private", "--parent", str(os.getpid())]
        if spec.upstream_proxy:
            argv += ["--upstream", spec.upstream_proxy]
        try:
            with open(logs / "proxy.err", "wb") as err:  # a file, not a pipe: a full pipe would stall the proxy
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                        start_new_session=True, preexec_fn=_proxy_limits, **user)  # noqa: PLW1509
        except OSError as exc:
            raise SandboxError(f"cannot start the egress proxy of a registries bwrap sandbox: {exc}") from exc
        box = cls(root, proc, bool(spec.ca_bundle))
        box._wait_ready()
        return box

    def _wait_ready(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = (self._log.parent / "proxy.err").read_text(errors="replace")[-500:]
                raise SandboxError(f"the egress proxy of a registries bwrap sandbox exited: {err.strip()}")
            if (self.dir / SOCKET).is_socket() and self._log.exists():
                return
            time.sleep(0.05)
        self.close()
        raise SandboxError(f"the egress proxy of a registries bwrap sandbox did not start within {timeout_s:.0f} s")

    def binds(self) -> list[tuple[str, str]]:
        """(host, sandbox) read-only binds: the socket's folder, with the forwarder and the CA bundle."""
        return [(str(self.dir), MOUNT)]

    def env(self) -> dict[str, str]:
        """The proxy variables (127.0.0.1, the forwarder), the CA bundle's and the host's pip indexes."""
        env = {**proxy_env("127.0.0.1"), **pip_env()}
        if self._ca:
            env.update({name: f"{MOUNT}/ca-bundle.pem" for name in CA_ENV_VARS})
        return env

    @staticmethod
    def wrap(argv: list[str]) -> list[str]:
        """`argv` run after the forwarder listens (if it cannot start, the command still runs, without network)."""
        return ["/bin/sh", "-c", _WRAPPER, "failatlas-egress", *argv]

    def log(self) -> list[dict[str, Any]]:
        """The proxy's decisions so far, oldest first (refusals first kept, then the tail of all); [] if unread."""
        texts = []
        for path, tail in ((self._log, True), (self._log.with_name("egress.log.denied"), False)):
            try:
                with open(path, "rb") as f:
                    if tail:
                        f.seek(max(0, os.fstat(f.fileno()).st_size - MAX_LOG_BYTES))
                    texts.append(f.read(MAX_LOG_BYTES).decode(errors="replace"))
            except OSError:
                texts.append("")
        return parse_log(*texts)

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(self.proc.pid, 9)
        self.proc.wait()
