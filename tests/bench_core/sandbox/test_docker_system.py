"""The image's system folders bound read-only from the host (docker_system.py), against the real engine: a
container reads the same bytes through the binds and cannot write them; anything that is not the image's own,
root's alone all the way up, is never bound; an image built again gets a folder of its own, the old one untouched;
an image whose /usr others could write is not unpacked."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import tempfile
import uuid
from pathlib import Path

import pytest

from failatlas.bench_core.sandbox import SandboxSpec, create_sandbox, docker_system
from failatlas.bench_core.sandbox.cleanup import docker_client
from failatlas.bench_core.sandbox.model import DEFAULT_IMAGE

pytestmark = [pytest.mark.docker, pytest.mark.slow]

PROBE = ("grep -E ' /usr/(lib|bin) ' /proc/self/mountinfo | cut -d' ' -f6 | cut -c1-3; "
         "sha256sum /usr/bin/python3 /usr/lib/python3/dist-packages/numpy/__init__.py /etc/debian_version; "
         "python3 -c 'import numpy, sklearn; print(sklearn.__version__)'; "
         "stat -c %Y /usr/lib/python3/dist-packages/numpy/__init__.py /usr/lib/python3.11/json; "
         "python3 -v -c 'import numpy, json' 2>&1 | grep -c 'bytecode is stale'; "
         "touch /usr/lib/planted 2>&1; touch /usr/bin/planted 2>&1; id -u")


def _image_id(tag: str) -> str:
    return subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", tag], capture_output=True,
                          text=True, check=True).stdout.strip()


@pytest.fixture(scope="module")
def cache():
    """A fresh XDG cache holding the sandbox image's /usr, unpacked once (about 15 s); the image's folder."""
    where = Path(tempfile.mkdtemp(prefix="failatlas-system-test-", dir="/tmp"))
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("XDG_CACHE_HOME", str(where))
            yield docker_system.unpack(DEFAULT_IMAGE, _image_id(DEFAULT_IMAGE))
    finally:
        shutil.rmtree(where, ignore_errors=True)


@pytest.fixture
def fuse(monkeypatch):
    """This host's storage driver counts as FUSE, so that the binds are tried whatever the engine uses."""
    monkeypatch.delenv(docker_system.SWITCH, raising=False)
    monkeypatch.setattr(docker_system, "FUSE_DRIVERS", frozenset({docker_system.storage_driver(docker_client())}))


def _probe(repo: Path) -> str:
    with create_sandbox("docker", SandboxSpec(memory_mb=1024, run_id=f"test-system-{uuid.uuid4().hex[:6]}"),
                        workspace=repo) as box:
        res = box.exec(PROBE, timeout=120)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_a_sandbox_reads_the_image_s_bytes_through_read_only_binds(cache: Path, fuse, repo: Path,
                                                                    monkeypatch) -> None:
    assert cache == docker_system.system_dir(_image_id(DEFAULT_IMAGE)) and sorted(os.listdir(cache)) == ["usr"]
    assert docker_system.system_binds(docker_client(), SandboxSpec(), _image_id(DEFAULT_IMAGE)) == (
        [(str(cache / "usr/lib"), "/usr/lib"), (str(cache / "usr/bin"), "/usr/bin")] if os.geteuid() == 0 else [])
    if os.geteuid() != 0:  # the unpack keeps no owners: a user's cache is that user's, and is never bound
        return
    bound = _probe(repo).splitlines()
    monkeypatch.setenv(docker_system.SWITCH, "0")
    plain = _probe(repo).splitlines()
    assert bound[:2] == ["ro,", "ro,"]  # /usr/lib and /usr/bin, each its own read-only mount
    assert not any(line.startswith(("ro,", "rw,")) for line in plain)  # switched off: the image's own folders
    # the interpreter, numpy's source, /etc, the import, a file's and a folder's times: the same bytes and results
    assert bound[2:8] == plain[:6]
    assert bound[8] == plain[6] == "0"  # every compiled module is current: its source kept its time
    assert "Read-only file system" in bound[9] and "Read-only file system" in bound[10]
    assert "Permission denied" in plain[7]  # the image's folders refuse the agent too, by their owner
    assert bound[-1] == plain[-1] == "1000"


def test_nothing_is_bound_that_is_not_the_image_s_own_and_root_s_alone(cache: Path, fuse, monkeypatch) -> None:
    client, image_id = docker_client(), _image_id(DEFAULT_IMAGE)
    if os.geteuid() != 0:
        assert docker_system.system_binds(client, SandboxSpec(), image_id) == []
        return
    assert docker_system.system_binds(client, SandboxSpec(), image_id)
    assert docker_system.system_binds(client, SandboxSpec(gpu_ids=["0"]), image_id) == []  # NVIDIA mounts into lib
    for root in ("root", "0", "0:0", "root:agent"):  # a root user could install into the image's folders
        assert docker_system.system_binds(client, SandboxSpec(user=root), image_id) == []
    assert docker_system.system_binds(client, SandboxSpec(), "sha256:" + "0" * 64) == []  # no folder of that image
    assert docker_system.system_binds(client, SandboxSpec(), "sha256:../../etc") == []  # not an id
    monkeypatch.setenv(docker_system.SWITCH, "0")
    assert docker_system.system_binds(client, SandboxSpec(), image_id) == []
    monkeypatch.delenv(docker_system.SWITCH)
    monkeypatch.setattr(docker_system, "FUSE_DRIVERS", frozenset())  # a driver that reads natively: no binds
    assert docker_system.system_binds(client, SandboxSpec(), image_id) == []
    monkeypatch.setattr(docker_system, "FUSE_DRIVERS", frozenset({docker_system.storage_driver(client)}))
    above = cache.parent  # .../docker-system, and the cache folder above it
    for change, undo in (
        (lambda: os.chmod(cache / "usr/bin", 0o775), lambda: os.chmod(cache / "usr/bin", 0o755)),
        (lambda: os.chown(cache / "usr/lib", 1000, 1000), lambda: os.chown(cache / "usr/lib", 0, 0)),
        (lambda: os.chmod(cache / "usr", 0o757), lambda: os.chmod(cache / "usr", 0o755)),
        (lambda: os.chmod(above, 0o777), lambda: os.chmod(above, 0o755)),  # anyone could swap the image's folder
        (lambda: os.chown(above.parent, 1000, 1000), lambda: os.chown(above.parent, 0, 0)),  # or its owner could
        (lambda: os.rename(cache / "usr/bin", cache / "usr/bin.x") or os.symlink("bin.x", cache / "usr/bin"),
         lambda: os.unlink(cache / "usr/bin") or os.rename(cache / "usr/bin.x", cache / "usr/bin")),
        (lambda: os.rename(above, f"{above}.x") or os.symlink(f"{above}.x", above),
         lambda: os.unlink(above) or os.rename(f"{above}.x", above)),
    ):
        change()
        try:
            assert docker_system.system_binds(client, SandboxSpec(), image_id) == []
        finally:
            undo()
        assert docker_system.system_binds(client, SandboxSpec(), image_id)  # undone: bound again
    os.chmod(above, 0o1777)  # world-writable with the sticky bit, as /tmp: nobody else can move root's folder
    try:
        assert docker_system.system_binds(client, SandboxSpec(), image_id)
    finally:
        os.chmod(above, 0o755)


@pytest.fixture
def tiny_image():
    """Tiny images of their own under one tag (a root with /etc and /usr), imported offline, removed afterwards."""
    tag = f"failatlas-test/tiny-root:{uuid.uuid4().hex[:8]}"
    made: list[str] = []

    def make(content: bytes, lib_mode: int = 0o755) -> str:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for name, mode in (("etc", 0o755), ("usr", 0o755), ("usr/lib", lib_mode), ("usr/bin", 0o755)):
                info = tarfile.TarInfo(name)
                info.type, info.mode = tarfile.DIRTYPE, mode
                tar.addfile(info)
            for name in ("etc/version", "usr/lib/version"):
                info = tarfile.TarInfo(name)
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
        subprocess.run(["docker", "import", "-", tag], input=buf.getvalue(), capture_output=True, check=True)
        made.append(_image_id(tag))
        return made[-1]

    yield tag, make
    subprocess.run(["docker", "rmi", "-f", tag, *made], capture_output=True, check=False)


def test_an_image_built_again_gets_a_folder_of_its_own(tiny_image, fuse, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    tag, make = tiny_image
    first = make(b"one\n")
    said: list[str] = []
    docker_system.prepare(docker_client(), tag, first, said.append)
    folder = docker_system.system_dir(first)
    if os.geteuid() != 0:  # only root's unpack can be bound, so no one else's is made
        assert not folder.exists() and said == []
        return
    assert said and (folder / "usr/lib/version").read_text() == "one\n" and not (folder / "etc").exists()
    assert sorted(p.name for p in folder.parent.iterdir()) == [folder.name]  # no temporary folder left beside it
    said.clear()
    docker_system.prepare(docker_client(), tag, first, said.append)
    assert said == []  # there: kept
    second = make(b"two\n")  # built again under the same tag: a running container of the first keeps its files
    docker_system.prepare(docker_client(), tag, second, said.append)
    assert (docker_system.system_dir(second) / "usr/lib/version").read_text() == "two\n"
    assert (folder / "usr/lib/version").read_text() == "one\n"
    said.clear()
    docker_system.prepare(docker_client(), tag, "sha256:" + "1" * 64, said.append)  # the tag names another image
    assert len(said) == 2 and "the tag names" in said[1] and not docker_system.system_dir("sha256:" + "1" * 64).exists()
    third = make(b"three\n", lib_mode=0o777)  # anyone could write into such an image's /usr/lib on the host
    said.clear()
    docker_system.prepare(docker_client(), tag, third, said.append)
    assert "writable by users other than root" in said[-1] and not docker_system.system_dir(third).exists()
    assert sorted(p.name for p in folder.parent.iterdir()) == sorted([folder.name,
                                                                      docker_system.system_dir(second).name])


def test_cleanup_removes_the_folders_of_images_docker_no_longer_has_unless_a_container_binds_them(
        tiny_image, tmp_path: Path, monkeypatch) -> None:
    import sys

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    tag, make = tiny_image
    gone, kept = make(b"gone\n"), make(b"kept\n")  # built again under the tag: the first is dangling, then removed
    subprocess.run(["docker", "rmi", gone], capture_output=True, check=True)
    held = "sha256:" + "2" * 64  # no such image, but a stopped container binds its folder
    folders = {name: docker_system.system_dir(image) for name, image in (("gone", gone), ("kept", kept),
                                                                          ("held", held))}
    for folder in folders.values():
        (folder / "usr/lib").mkdir(parents=True)
        (folder / "usr/lib/version").write_text("x\n")
    top = folders["gone"].parent
    (top / ".tmp-unpacking").mkdir()  # an unpack in progress
    (top / ("3" * 64)).symlink_to(tmp_path)  # a link named like a folder: never followed
    container = subprocess.run(["docker", "create", "--mount", f"type=bind,src={folders['held']}/usr/lib,dst=/x,"
                                "readonly", tag, "true"], capture_output=True, text=True, check=True).stdout.strip()
    try:
        assert docker_system.remove_stale(docker_client()) == [str(folders["gone"])]
        assert not folders["gone"].exists() and folders["kept"].is_dir() and folders["held"].is_dir()
        assert (top / ".tmp-unpacking").is_dir() and (top / ("3" * 64)).is_symlink() and tmp_path.is_dir()
    finally:
        subprocess.run(["docker", "rm", "-f", container], capture_output=True, check=False)
    done = subprocess.run([sys.executable, "-m", "failatlas", "sandbox", "cleanup"], capture_output=True, text=True,
                          env=dict(os.environ, COLUMNS="200"), timeout=300)
    assert done.returncode == 0, done.stderr
    assert "removed 1 unpacked image folder(s) of images Docker no longer has" in done.stdout, done.stdout
    assert str(folders["held"]) in done.stdout and not folders["held"].exists() and folders["kept"].is_dir()
    assert sorted(p.name for p in top.iterdir()) == sorted([".tmp-unpacking", "3" * 64, folders["kept"].name])
