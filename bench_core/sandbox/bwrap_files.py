"""Files into a bwrap sandbox, and its read-only inputs, for `BwrapSandbox` (bwrap_sandbox.py).

Files go in through a command inside the sandbox, so a link the agent planted cannot redirect a write. A read-only
input is bound from where it is when the sandbox's user can reach it, else from a read-only copy in the private
root (never a dataset or a venv: those are refused with the reason).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

from failatlas.bench_core.sandbox import bwrap_setup as setup
from failatlas.bench_core.sandbox.errors import SandboxError, SandboxFileNotFoundError, SandboxPathError

_STAGE = "/.failatlas-stage"


def place_inputs(box) -> None:  # noqa: ANN001 - a BwrapSandbox
    """Each read-only input bound from where it is when the sandbox's user can reach it, else from a read-only
    copy in the private root; a mount point made for targets inside the working copy."""
    data = {*box.spec.data.values(), *([box.spec.env_dir] if box.spec.env_dir else [])}
    for n, (host, target) in enumerate(box.spec.mounts()):
        src = Path(host)
        if not src.exists():
            raise SandboxError(f"read-only input {host} does not exist")
        src = src.resolve()
        if box._uid is not None and not setup.is_world_traversable(src.parent):
            if host == box.spec.env_dir:  # a venv is gigabytes: never copied either
                raise SandboxError(f"the task environment {host} cannot be reached by the sandbox's user (a "
                                   "folder above it is not world-traversable)",
                                   hint="make its folders traversable (chmod o+x), or build environments "
                                   "where they are: $FAILATLAS_ENV_DIR")
            if host in data:  # datasets and weights are large: never copied
                raise SandboxError(f"data input {host} cannot be reached by the sandbox's user "
                                   "(a folder above it is not world-traversable)",
                                   hint="make its folders traversable (chmod o+x) and it readable (o+r)")
            copy = box.root / "inputs" / str(n)
            copy.parent.mkdir(exist_ok=True)
            if src.is_dir():
                shutil.copytree(src, copy, symlinks=True)
            else:
                shutil.copy2(src, copy)
            for here, dirs, files in os.walk(copy):
                for name in [*dirs, *files]:
                    path = Path(here) / name
                    if not path.is_symlink():
                        path.chmod(path.stat().st_mode | 0o444 | (0o111 if path.is_dir() else 0))
            copy.chmod(copy.stat().st_mode | 0o555)
            (box.root / "inputs").chmod(0o711)
            src = copy
        box._inputs.append((str(src), target))
        inside = Path(target).relative_to(box.spec.workdir) if Path(target).is_relative_to(
            box.spec.workdir) else None
        if inside is not None and str(inside) != ".":
            point = box._workdir / inside
            if src.is_dir():
                point.mkdir(parents=True, exist_ok=True)
            else:
                point.parent.mkdir(parents=True, exist_ok=True)
                point.touch()


class BwrapFilesIn:
    """`write_file` and `copy_in` of a bwrap sandbox."""

    # -- files in (through the sandbox, so no planted link redirects them) ------------------------------------------

    def write_file(self, path: str, data: bytes | str) -> None:
        """Write a file in the sandbox as its user, creating parent folders."""
        self._check_open()
        with self._staged() as stage:
            (stage / "data").write_bytes(data.encode() if isinstance(data, str) else data)
            self._put(stage, "data", path)

    def copy_in(self, host_src: str | Path, dest: str) -> None:
        """Copy a host file or folder to the sandbox path `dest` (the copy's own path, not its parent)."""
        self._check_open()
        src = Path(host_src)
        if not src.exists():
            raise SandboxFileNotFoundError(f"no host path {src}")
        with self._staged() as stage:
            if src.is_dir():
                shutil.copytree(src, stage / "data", symlinks=True)
            else:
                shutil.copy2(src, stage / "data")
            self._put(stage, "data", dest)

    @contextlib.contextmanager
    def _staged(self):
        stage = Path(tempfile.mkdtemp(prefix=".stage-", dir=self.root))
        try:
            yield stage
        finally:
            shutil.rmtree(stage, ignore_errors=True)

    def _put(self, stage: Path, name: str, dest: str) -> None:
        self._own(stage)
        target = os.path.normpath(os.path.join(self.workdir, dest))
        # a file appears whole (a temporary name, then a rename): a process of the agent's polling for it, such as
        # the hidden tests' worker, never reads it half written
        script = ('if [ -d "$2" ]; then mkdir -p -- "$1" && cp -R -P -p -- "$2/." "$1/"; '
                  'else mkdir -p -- "$(dirname -- "$1")" && cp -P -p -- "$2" "$1.failatlas-put" '
                  '&& mv -f -T -- "$1.failatlas-put" "$1"; fi')
        res = self._run(["/bin/sh", "-c", script, "put", target, f"{_STAGE}/{name}"],
                        f"copy in {target}", timeout=600, binds=[(str(stage), _STAGE)])
        if res.returncode != 0:
            raise SandboxPathError(f"cannot write {dest} in the sandbox: {res.stderr.strip()[:300]}")
