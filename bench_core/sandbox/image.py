"""Build the base sandbox image offline: a Debian root made by debootstrap, imported with `docker import`.

For engines without a registry. Users with one can build `bench_core/images/Dockerfile` instead; both give
Debian bookworm with python3 (also as `python`), pip, venv, build tools (build-essential, python3-dev), numpy,
scipy, scikit-learn, git, curl and strace from Debian's packages, a user `agent` (uid 1000) and a `/workspace` it owns;
`pip install` works as the agent (into ~/.local, on PATH).
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from failatlas.bench_core.sandbox.cleanup import docker_client
from failatlas.bench_core.sandbox.errors import SandboxError
from failatlas.bench_core.sandbox.model import DEFAULT_IMAGE

DEFAULT_SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEFAULT_PACKAGES = ("python3", "python-is-python3", "python3-pip", "python3-venv", "python3-dev", "build-essential",
                    "python3-numpy", "python3-sklearn", "python3-scipy", "python3-pytest", "git", "curl",
                    "ca-certificates", "strace")  # strace: the provenance of the agent's commands (provenance.py)
# The agent installs what a paper needs (`pip install ...` as the user `agent` goes to ~/.local); Debian's
# PEP 668 marker would refuse it, and the sandbox is the agent's own machine.
PIP_MARKERS = ("usr/lib/python3*/EXTERNALLY-MANAGED",)
AGENT_PATH = "/home/agent/.local/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# the image's environment; SETUPTOOLS_USE_DISTUTILS=stdlib: `import distutils` (joblib, so every scikit-learn import)
# takes Python 3.11's own distutils instead of loading setuptools and pkg_resources through their shim, about a third
# of `import sklearn`'s time (benchmarks/RESULTS.md); the same module either way for what the image holds
IMAGE_ENV = ("LANG=C.UTF-8", f"PATH={AGENT_PATH}", "HOME=/home/agent", "PIP_BREAK_SYSTEM_PACKAGES=1",
             "SETUPTOOLS_USE_DISTUTILS=stdlib")
AGENT_UID = 1000
IMAGE_LABEL = "failatlas.image"

Progress = Callable[[str], None]


class ImageBuild(BaseModel):
    """What `build_base_image` did: `built` is False when the tag already existed and was kept."""

    tag: str
    image_id: str
    built: bool
    duration_s: float
    mirror: str | None = None
    recipe: str | None = None


def detect_debian_mirror(sources: Sequence[str] | None = None) -> str:
    """The Debian archive this host's apt uses (not the security one); $FAILATLAS_DEBIAN_MIRROR overrides."""
    if os.environ.get("FAILATLAS_DEBIAN_MIRROR"):
        return os.environ["FAILATLAS_DEBIAN_MIRROR"]
    files = sources if sources is not None else [
        "/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*.list")),
        *sorted(glob.glob("/etc/apt/sources.list.d/*.sources")),
    ]
    for name in files:
        try:
            text = Path(name).read_text(errors="replace")
        except OSError:
            continue
        for url in re.findall(r"(?:^deb\s+(?:\[[^\]]*\]\s+)?|^URIs:\s*)(\S+)", text, flags=re.MULTILINE):
            if re.search(r"/debian/?$", url) and "security" not in url:
                return url.rstrip("/")
    return DEFAULT_MIRROR


def image_exists(tag: str, *, client: Any = None) -> bool:
    import docker

    try:
        docker_client(client).images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def recipe_hash(suite: str, packages: Sequence[str]) -> str:
    """A short hash of what goes into the image, stored as a label so a stale image can be recognised."""
    parts = [suite, f"uid={AGENT_UID}", *IMAGE_ENV, *PIP_MARKERS, *sorted(packages)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


def _debootstrap() -> str:
    for found in (shutil.which("debootstrap"), "/usr/sbin/debootstrap"):
        if found and Path(found).exists():
            return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "install", "-y", "-q", "debootstrap"], check=False, capture_output=True)
        found = shutil.which("debootstrap") or "/usr/sbin/debootstrap"
        if Path(found).exists():
            return found
    raise SandboxError("debootstrap is not installed", hint="install it with: apt-get install debootstrap")


def _run_logged(argv: list[str], progress: Progress) -> None:
    """Run a build step, passing its output lines to `progress`; SandboxError with the tail on failure."""
    tail: list[str] = []
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          errors="replace") as p:
        for line in p.stdout:
            line = line.rstrip()
            tail = (tail + [line])[-20:]
            progress(line)
    if p.returncode != 0:
        raise SandboxError(f"{Path(argv[0]).name} failed with exit code {p.returncode}:\n" + "\n".join(tail))


def _configure_root(root: Path) -> None:
    """Add the user `agent` and /workspace, drop apt caches. Files are edited directly: no chroot needed."""
    with open(root / "etc/passwd", "a") as f:
        f.write(f"agent:x:{AGENT_UID}:{AGENT_UID}:FailAtlas agent:/home/agent:/bin/bash\n")
    with open(root / "etc/group", "a") as f:
        f.write(f"agent:x:{AGENT_UID}:\n")
    if (root / "etc/shadow").exists():
        with open(root / "etc/shadow", "a") as f:
            f.write("agent:*:19000:0:99999:7:::\n")
    for folder in ("home/agent", "workspace"):
        (root / folder).mkdir(parents=True, exist_ok=True)
        os.chown(root / folder, AGENT_UID, AGENT_UID)
    for pattern in ("var/cache/apt/archives/*.deb", "var/lib/apt/lists/*_Packages", "var/log/*.log", *PIP_MARKERS):
        for path in glob.glob(str(root / pattern)):
            Path(path).unlink(missing_ok=True)


def _tar_stream(root: Path) -> Iterator[bytes]:
    argv = ["tar", "-C", str(root), "--numeric-owner", "-c", "."]
    with subprocess.Popen(argv, stdout=subprocess.PIPE) as p:
        while chunk := p.stdout.read(1 << 20):
            yield chunk
    if p.returncode != 0:
        raise SandboxError(f"tar of the image root failed with exit code {p.returncode}")


def build_base_image(
    tag: str = DEFAULT_IMAGE,
    *,
    force: bool = False,
    mirror: str | None = None,
    suite: str = DEFAULT_SUITE,
    packages: Sequence[str] = DEFAULT_PACKAGES,
    build_dir: str | Path | None = None,
    progress: Progress | None = None,
    client: Any = None,
) -> ImageBuild:
    """Build the sandbox image `tag` without a registry; keep an existing tag unless `force`.

    Needs root (debootstrap) and the Debian mirror (default: the one this host's apt uses). Takes minutes.
    Raises SandboxError when a step fails, with the step's last output lines.
    """
    import docker

    say = progress or (lambda _line: None)
    started = time.monotonic()
    client = docker_client(client)
    if not force and image_exists(tag, client=client):
        image = client.images.get(tag)
        have = (image.labels or {}).get(IMAGE_LABEL)
        if have == recipe_hash(suite, packages):
            say(f"image {tag} exists; keeping it (use --force to rebuild)")
            return ImageBuild(tag=tag, image_id=image.id, built=False, duration_s=time.monotonic() - started,
                              recipe=have)
        say(f"image {tag} was built from another recipe ({have}); rebuilding it")
    if os.geteuid() != 0:
        raise SandboxError("building the sandbox image needs root (debootstrap)",
                           hint="run as root, or build bench_core/images/Dockerfile with a registry")
    tool = _debootstrap()
    mirror = mirror or detect_debian_mirror()
    recipe = recipe_hash(suite, packages)
    with tempfile.TemporaryDirectory(prefix="failatlas-image-", dir=build_dir) as tmp:
        root = Path(tmp) / "root"
        say(f"[1/3] debootstrap {suite} from {mirror} (minutes)")
        include = f"--include={','.join(packages)}"
        _run_logged([tool, "--variant=minbase", include, suite, str(root), mirror], say)
        say("[2/3] adding user agent and /workspace")
        _configure_root(root)
        say(f"[3/3] importing into Docker as {tag}")
        repository, _, version = tag.rpartition(":") if ":" in tag.rsplit("/", 1)[-1] else (tag, "", "latest")
        changes = [
            f"USER {AGENT_UID}:{AGENT_UID}", "WORKDIR /workspace", *(f"ENV {pair}" for pair in IMAGE_ENV),
            f"LABEL {IMAGE_LABEL}={recipe}", 'CMD ["/bin/bash"]',
        ]
        slow = docker.from_env(timeout=3600)
        try:
            slow.api.import_image(src=_tar_stream(root), repository=repository, tag=version, changes=changes,
                             stream_src=True)
        except docker.errors.DockerException as exc:
            raise SandboxError(f"docker import of {tag} failed: {exc}") from exc
        finally:
            slow.close()
    image = client.images.get(tag)
    return ImageBuild(tag=tag, image_id=image.id, built=True, duration_s=time.monotonic() - started,
                      mirror=mirror, recipe=recipe)
