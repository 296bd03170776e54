"""Task environments as virtual environments, for the bwrap sandbox: hosts without Docker (GPU nodes) build a
task's environment from its repository's own spec as a venv and every run, re-run and judge of the task sees it
read-only at `VENV_TARGET`, its `bin` first on PATH.

The venv is made and filled inside a bwrap sandbox (so a package's build scripts run contained, as the sandbox's
user), with the host's Python of the version the spec asks for when this host has one (`python3.X` on PATH), else
the first `python3` on PATH under the folders sandboxes see (the mismatch is listed). It sees that interpreter's
site-packages after its own (`--system-site-packages` and a `.pth` file, for an interpreter that is itself a venv),
so what the host carries (a GPU node's PyTorch) serves a requirement the index cannot, and the spec's pins
installed in the venv come first. Pip
reaches the package indexes through the `registries` route (egress proxy, CA bundle), or only a folder of wheels
(`wheels`, mounted read-only; `offline` for no index at all: a host with no network). Strict mode installs the spec
in one resolve and fails with the classified reason; `best_effort` installs each requirement on its own, held to
the spec's pins, and lists each failure with its class (envfail), as the Docker build does.

The result lives in `<envs>/<hash>` (`env_root`), where the hash covers the interpreter, the spec's kind and
requirements and the mode; the folder appears whole (built under a temporary name, then renamed) or not at all,
owned by the harness's user and readable by every sandbox user. Its record (`RECORD`) says what was installed,
what failed and why, and what the spec asked for that a venv cannot give (conda packages, another Python).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from failatlas.bench_core.sandbox.envbuild import EnvBuild, EnvSpec, check_heavy, find_spec, install_spec
from failatlas.bench_core.sandbox.errors import SandboxError
from failatlas.bench_core.sandbox.model import VENV_TARGET, SandboxSpec
from failatlas.core.errors import ConfigError, InputError

RECORD = ".failatlas-env.json"
ENV_DIR_VAR = "FAILATLAS_ENV_DIR"
_REQUIREMENTS = f"{VENV_TARGET}/.failatlas-requirements.txt"
_PIP = (f"{VENV_TARGET}/bin/python -m pip install --no-cache-dir --progress-bar off --no-input "
        "--disable-pip-version-check")
_PYTHON_PIN = re.compile(r"^python\s*[=<>~!]=?\s*(\d+)\.(\d+)")
Progress = Callable[[str], None]


def env_root(store_path: Path | str | None = None) -> Path:
    """Where venv environments live: `$FAILATLAS_ENV_DIR`, else `envs/` beside the store."""
    if os.environ.get(ENV_DIR_VAR):
        return Path(os.environ[ENV_DIR_VAR]).resolve()
    if store_path is None:
        raise ConfigError("no folder for task environments", hint=f"set ${ENV_DIR_VAR} or give a store")
    return Path(store_path).resolve().parent / "envs"


def wanted_python(spec: EnvSpec) -> tuple[int, int] | None:
    """The Python version (major, minor) the spec asks for: a conda `python=3.10...` pin, or None."""
    for line in spec.left_out:
        what = line.rpartition(": ")[2].strip()
        m = _PYTHON_PIN.match(what)
        if m:
            return int(m.group(1)), int(m.group(2))
    return None


def pick_python(spec: EnvSpec, python: str | None = None) -> tuple[str, str | None]:
    """The host interpreter the venv is made with (`venv_python.choose`: `python`, else the one running FailAtlas,
    where a sandbox can see it; ConfigError otherwise) and why it is not the one the spec asks for (None: it is,
    or the spec asks for none)."""
    from failatlas.bench_core.sandbox.venv_python import choose

    found = choose(python)
    wanted = wanted_python(spec)
    if wanted is None:
        return found, None
    version = _version(found)
    if tuple(int(x) for x in version.split(".")[:2]) == wanted:
        return found, None
    return found, f"another Python: the spec asks for {wanted[0]}.{wanted[1]}; built with {found} ({version})"


def _version(python: str) -> str:
    import subprocess

    try:
        out = subprocess.run([python, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                             capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        raise SandboxError(f"cannot run {python}: {exc}") from exc
    return out


def source_of(wheels: Path | None, offline: bool) -> str:
    """Where pip takes packages from, as a venv's key holds it (R4: an offline build is never an online one's
    cache hit): `index`, `offline`, and `+wheels:<digest of the folder's file names and sizes>`."""
    out = "offline" if offline else "index"
    if wheels is not None:
        listing = sorted((p.name, p.stat().st_size) for p in Path(wheels).iterdir() if p.is_file())
        out += "+wheels:" + hashlib.sha256(json.dumps(listing).encode()).hexdigest()[:16]
    return out


def spec_digest(spec: EnvSpec) -> str:
    """The spec alone (kind and requirements): what a run's environment must have been built from."""
    return hashlib.sha256(json.dumps({"kind": spec.kind, "requirements": spec.requirements},
                                     sort_keys=True).encode()).hexdigest()


def venv_hash(spec: EnvSpec, python_version: str, *, best_effort: bool, interpreter: str,
              source: str = "index") -> str:
    body = {"python": python_version, "interpreter": interpreter, "platform": sys.platform, "kind": spec.kind,
            "requirements": spec.requirements, "mode": "each-constrained" if best_effort else "strict",
            "site": "system-site-packages", "layout": 1}
    if source != "index":  # an online build keeps the key it had before R4
        body["source"] = source
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _record(path: Path) -> dict | None:
    try:
        return json.loads((path / RECORD).read_text())
    except (OSError, ValueError):
        return None


def find_venv(spec: EnvSpec, root: Path) -> Path | None:
    """The built environment of `spec` under `root`, whatever interpreter or source built it: the one that failed
    the fewest requirements, then the newest; None when none is built."""
    wanted = spec_digest(spec)
    best: tuple[tuple, Path] | None = None
    try:
        folders = [p for p in Path(root).iterdir() if p.is_dir() and len(p.name) == 16]
    except OSError:
        return None
    for path in folders:
        record = _record(path)
        if record is None or record.get("spec_digest") != wanted:
            continue
        rank = (-len(record.get("failed") or []), record.get("built_at") or "")
        if best is None or rank > best[0]:
            best = (rank, path)
    return best[1] if best else None


def build_venv(
    task_id: str,
    spec: EnvSpec,
    *,
    root: Path,
    allow_hosts: Sequence[str] = (),
    ca_bundle: str | None = None,
    upstream_proxy: str | None = None,
    wheels: Path | None = None,
    offline: bool = False,
    best_effort: bool = False,
    force: bool = False,
    timeout_s: float = 3600.0,
    progress: Progress | None = None,
    python: str | None = None,
) -> EnvBuild:
    """Build (or find) the venv environment of `spec` under `root` with the interpreter `python` (default: the one
    running FailAtlas, `venv_python.choose`). EnvBuildError (classified) when a strict install fails or none of
    the spec's heavy packages (torch, jax, tensorflow) can be imported from the venv; SandboxError when the
    sandbox cannot start; ConfigError for a spec a venv cannot build or an interpreter sandboxes cannot see."""
    from failatlas.bench_core.sandbox.bwrap_sandbox import BwrapSandbox

    say = progress or (lambda _line: None)
    started = time.monotonic()
    if spec.kind == "dockerfile":
        raise ConfigError("a Dockerfile builds an image, not a venv", hint="build it without --venv (Docker)")
    if not spec.requirements:
        raise ConfigError(f"{spec.file} lists no pip requirement to install", hint="; ".join(spec.left_out[:5]))
    if wheels is not None and not Path(wheels).is_dir():
        raise InputError("the wheels folder does not exist", path=str(wheels), field="--wheels")
    python, note = pick_python(spec, python)
    version = _version(python)
    source_key = source_of(wheels, offline)
    digest = venv_hash(spec, version, best_effort=best_effort, interpreter=python, source=source_key)
    dest = root / digest[:16]
    left_out = [*spec.left_out, *([note] if note else [])]
    common = dict(tag=str(dest), task_id=task_id, spec_kind=spec.kind, spec_file=spec.file, spec_hash=digest,
                  left_out=left_out)
    found = _record(dest)
    if found is not None and not force:
        say(f"environment {dest} exists (cache hit: built {found.get('built_at')} with {python}, source "
            f"{source_key}; --force rebuilds it)")
        return EnvBuild(**common, cached=True, duration_s=time.monotonic() - started,
                        installed=found.get("installed") or [], failed=found.get("failed") or [])
    root.mkdir(parents=True, exist_ok=True)
    from failatlas.bench_core.sandbox import bwrap_setup

    if bwrap_setup.host_uid() is not None and not bwrap_setup.is_world_traversable(root):
        raise ConfigError(f"task environments under {root} could not be used: sandbox users cannot reach it (a "
                          "folder above it is not world-traversable)",
                          hint=f"chmod o+x its folders, or set ${ENV_DIR_VAR} to a folder everyone may pass through")
    box_spec = SandboxSpec(
        workdir=VENV_TARGET, network="none" if offline else "registries", allow_hosts=list(allow_hosts),
        ca_bundle=None if offline else ca_bundle, upstream_proxy=None if offline else upstream_proxy,
        memory_mb=16384, cpus=2, pids_limit=2048, tmp_mb=1024,
        data={"wheels": str(Path(wheels).resolve())} if wheels is not None else {},
        env={"TMPDIR": f"{VENV_TARGET}/.tmp", "PIP_NO_INPUT": "1"},
        labels={"failatlas.purpose": "build-env", "failatlas.task_id": task_id[:200]})
    source = ""
    if wheels is not None:
        source = " --find-links /data/wheels"
    if offline:
        source += " --no-index"
    box = BwrapSandbox.start(box_spec)
    try:
        res = box.exec(f"mkdir -p {VENV_TARGET}/.tmp && {shlex.quote(python)} -m venv --system-site-packages "
                       f"{VENV_TARGET}", timeout=600)
        if not res.success:
            raise SandboxError(f"cannot make a venv with {python}: {(res.stderr or res.stdout).strip()[-500:]}")
        _see_host_packages(box, python)
        box.write_file(_REQUIREMENTS, "\n".join(spec.requirements) + "\n")
        installed, failed = install_spec(box, _PIP + source, _REQUIREMENTS, spec, best_effort=best_effort,
                                         timeout_s=timeout_s, say=say)
        check_heavy(box, f"{VENV_TARGET}/bin/python", spec, failed,
                    hint=f"pass --python an interpreter under /usr or /opt that has them, or build with the package "
                         f"index reachable (without --offline), or give --wheels a folder holding them; {python} "
                         "lacked them")
        box.exec(f"rm -rf {VENV_TARGET}/.tmp", timeout=600)
        record = {"task_id": task_id, "spec_kind": spec.kind, "spec_file": spec.file, "spec_hash": digest,
                  "spec_digest": spec_digest(spec), "source": source_key,
                  "python": version, "python_path": python, "installed": installed, "failed": failed,
                  "left_out": left_out, "wheels": str(wheels) if wheels else None, "offline": offline,
                  "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        box.write_file(f"{VENV_TARGET}/{RECORD}", json.dumps(record, indent=1))
        _take(box.working_copy, dest)
    finally:
        box.close()
    return EnvBuild(**common, cached=False, duration_s=time.monotonic() - started, installed=installed,
                    failed=failed)


def _see_host_packages(box: Any, python: str) -> None:
    """Put the interpreter's own site-packages on the venv's path, after the venv's own (a `.pth` file): a venv made
    from another venv's interpreter (a GPU node's /opt/torch/.venv) would otherwise see only the base Python's."""
    ask = "import json, site; print(json.dumps(site.getsitepackages()))"  # not the sandbox user's own site
    res = box.exec([python, "-c", ask], timeout=120)
    where = box.exec([f"{VENV_TARGET}/bin/python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     timeout=120)
    if not (res.success and where.success):
        raise SandboxError(f"cannot read {python}'s site-packages: {(res.stderr or where.stderr).strip()[-300:]}")
    paths = [p for p in json.loads(res.stdout.strip().splitlines()[-1]) if not p.startswith(VENV_TARGET)]
    box.write_file(f"{where.stdout.strip()}/_failatlas_host_packages.pth", "\n".join(paths) + "\n")


def _take(working_copy: Path, dest: Path) -> None:
    """Move the built venv to `dest` whole: under a temporary name beside it, owned by this user, readable by
    every sandbox user, then renamed over any older build."""
    tmp = dest.with_name(dest.name + f".part-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.move(str(working_copy), tmp)
    uid, gid = os.getuid(), os.getgid()
    for here, dirs, files in os.walk(tmp):
        for name in [*dirs, *files]:
            path = os.path.join(here, name)
            os.chown(path, uid, gid, follow_symlinks=False)
            if not os.path.islink(path):
                mode = os.stat(path).st_mode
                os.chmod(path, (mode | 0o444 | (0o111 if mode & 0o111 or os.path.isdir(path) else 0)) & ~0o022)
    os.chown(tmp, uid, gid)
    os.chmod(tmp, 0o755)
    old = dest.with_name(dest.name + f".old-{os.getpid()}")
    if dest.exists():
        dest.rename(old)
    tmp.rename(dest)
    shutil.rmtree(old, ignore_errors=True)


def task_venv(task: Any, repo: Path | None, root: Path) -> Path:
    """The built venv of `task` (its repository at `repo`); SandboxError (the run records it) when none is."""
    if repo is None:
        raise SandboxError(f"task {task.id}: no repository to read its environment spec from")
    spec = find_spec(repo, spec_file=task.resources.env_spec)
    found = find_venv(spec, root)
    if found is None:
        raise SandboxError(f"the environment of task {task.id} ({spec.file}) is not built as a venv under {root}",
                           hint=f"build it with `failatlas sandbox build-env --venv --task {task.id}`")
    return found


def build_task_venv(store: Any, task_id: str, *, repo: Path | None = None, allow_hosts: Sequence[str] = (),
                    ca_bundle: str | None = None, wheels: Path | None = None, offline: bool = False,
                    best_effort: bool = False, force: bool = False, progress: Progress | None = None,
                    python: str | None = None) -> EnvBuild:
    """`build_venv` for the catalog's task `task_id` (`envbuild.task_env_inputs`), under `env_root`."""
    from failatlas.bench_core.sandbox.envbuild import task_env_inputs

    got = task_env_inputs(store, task_id, repo=repo, allow_hosts=allow_hosts, ca_bundle=ca_bundle)
    return build_venv(got.task_id, got.spec, root=env_root(store.path), allow_hosts=got.hosts,
                      ca_bundle=got.ca_bundle, upstream_proxy=got.upstream_proxy, wheels=wheels, offline=offline,
                      best_effort=best_effort, force=force, progress=progress, python=python)


def describe_env(store: Any, task: Any) -> list[str]:
    """Lines saying which environment `task`'s runs get and what is built of it here: who sets it up, its spec
    (with what a venv or image cannot give), and the image (Docker) and venv (bwrap) built from it, each with its
    installed and failed counts; a spec that cannot be read says why, never a traceback."""
    from failatlas.bench_core.sandbox.envbuild import task_env_inputs
    from failatlas.core.errors import FailAtlasError

    mode = task.resources.environment
    lines = [f"{mode}: " + ("the agent installs what it needs (bench run --environment prebuilt to use a built "
                            "one)" if mode == "agent" else "runs start from the environment built from the spec")]
    if task.resources.image:
        return [*lines, f"image {task.resources.image} (the task's own)"]
    try:
        got = task_env_inputs(store, task.id)
    except (FailAtlasError, OSError) as exc:
        return [*lines, f"spec: none usable ({str(exc).splitlines()[0][:200]})"]
    spec = got.spec
    lines.append(f"spec: {spec.file} ({spec.kind}, {len(spec.requirements)} pip requirement(s)"
                 + (f", {len(spec.left_out)} left out" if spec.left_out else "") + ")")
    lines.append(_image_line(spec))
    try:
        found = find_venv(spec, env_root(store.path))
    except (FailAtlasError, OSError) as exc:
        found, why = None, str(exc).splitlines()[0][:200]
    else:
        why = ""
    record = _record(found) if found is not None else None
    if record is not None:
        lines.append(f"venv (bwrap): {found} ({len(record.get('installed') or [])} installed, "
                     f"{len(record.get('failed') or [])} failed)")
    else:
        lines.append(f"venv (bwrap): not built{f' ({why})' if why else ''}; `failatlas sandbox build-env --venv "
                     f"--task {task.id}`")
    return lines


def _image_line(spec: EnvSpec) -> str:
    from failatlas.bench_core.sandbox.envbuild import LABEL_FAILED, env_tag

    try:
        import docker

        client = docker.from_env(timeout=10)
    except Exception as exc:  # noqa: BLE001 - no Docker here is an answer, not an error
        return f"image (Docker): unknown, Docker is not reachable ({type(exc).__name__})"
    try:
        for best_effort in (False, True):
            tag = env_tag(spec, best_effort=best_effort)
            try:
                image = client.images.get(tag)
            except docker.errors.ImageNotFound:
                continue
            failed = json.loads((image.labels or {}).get(LABEL_FAILED) or "[]")
            mode = "best effort" if best_effort else "strict"
            return f"image (Docker): {tag} ({mode}, {len(failed)} failed)"
        return "image (Docker): not built; `failatlas sandbox build-env --task ID`"
    except docker.errors.DockerException as exc:
        return f"image (Docker): unknown ({str(exc)[:120]})"
    finally:
        client.close()
