"""bwrap on an image's root filesystem: the cache filled from the real sandbox image through `docker export`, a
sandbox whose spec names the image runs on it (read-only, the working copy writable), a missing cache is a one-line
error, and the extractor refuses hostile archives."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

import pytest

from failatlas.bench_core.sandbox import SandboxError, SandboxSpec, create_sandbox
from failatlas.bench_core.sandbox.bwrap_rootfs import build_rootfs, rootfs_dir, safe_extract
from failatlas.bench_core.sandbox.bwrap_setup import ROOTFS_ENV
from failatlas.bench_core.sandbox.model import DEFAULT_IMAGE
from failatlas.bench_core.sandbox.protocol import sandbox_kind

pytestmark = pytest.mark.slow  # runs sandboxes (Docker, bwrap) or the app server: out of the README's quick command


def _docker_has(image: str) -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "image", "inspect", image], capture_output=True, check=False).returncode == 0


needs_bwrap = pytest.mark.usefixtures("bwrap_works")


@pytest.fixture(scope="module")
def image_cache():
    """A fresh XDG cache (reachable by a sandbox's own uid) holding the sandbox image's root, unpacked once."""
    if not _docker_has(DEFAULT_IMAGE):
        pytest.fail(f"{DEFAULT_IMAGE} is missing: build it with scripts/setup.sh")
    cache = Path(tempfile.mkdtemp(prefix="failatlas-rootfs-test-", dir="/tmp"))
    cache.chmod(0o711)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("XDG_CACHE_HOME", str(cache))
            path, unpacked = build_rootfs(DEFAULT_IMAGE)
            yield cache, path, unpacked
    finally:
        shutil.rmtree(cache, ignore_errors=True)


@needs_bwrap
def test_a_spec_naming_the_image_runs_on_its_root(image_cache, repo: Path, monkeypatch) -> None:
    cache, path, unpacked = image_cache
    monkeypatch.delenv(ROOTFS_ENV, raising=False)
    assert unpacked and path == rootfs_dir(DEFAULT_IMAGE) and path.parent.parent.parent == cache
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary folder left beside it
    image_version = subprocess.run(["docker", "run", "--rm", "--network", "none", DEFAULT_IMAGE, "cat",
                                    "/etc/debian_version"], capture_output=True, text=True, check=True).stdout
    assert (path / "etc/debian_version").read_text() == image_version
    assert os.path.islink(path / "bin") or (path / "bin/sh").exists()
    assert build_rootfs(DEFAULT_IMAGE) == (path, False)  # kept once cached

    spec = SandboxSpec(image=DEFAULT_IMAGE, memory_mb=1024, run_id="test-bwrap-rootfs")
    with create_sandbox("bwrap", spec, workspace=repo) as box:
        res = box.exec("cat /etc/debian_version; command -v python3; readlink -f $(command -v python3); "
                       "stat -L -c '%d %i' $(command -v python3) /etc/debian_version; grep -c '^agent:' /etc/passwd; "
                       "python3 -c 'import sys, sklearn; print(sys.prefix, sklearn.__version__)'; "
                       "touch /etc/x /usr/x /x 2>&1; echo ok > /workspace/w && echo wrote", timeout=60)
        out = res.stdout + res.stderr
        lines = res.stdout.splitlines()
        assert lines[0] == image_version.strip(), out  # the image's Debian point release, not the host's
        assert lines[1] == "/usr/bin/python3", out  # not the host's /root/.pyenv (hidden, and not on this root)
        python = path / lines[2].lstrip("/")
        assert python.is_file(), out
        for line, host_file in zip(lines[3:5], (python, path / "etc/debian_version"), strict=True):
            st = host_file.stat()  # the very files of the unpacked cache (a bind keeps device and inode)
            assert line == f"{st.st_dev} {st.st_ino}", out
        assert lines[5] == "1", out  # the image's user `agent`
        assert lines[6].startswith("/usr 1.2.1"), out  # the image's python3 and its scikit-learn
        assert out.count("Read-only file system") + out.count("Permission denied") >= 3, out
        assert not (path / "etc/x").exists() and not (path / "x").exists()
        assert "wrote" in res.stdout and box.read_file("w") == b"ok\n"
    with create_sandbox("bwrap", SandboxSpec(memory_mb=512, run_id="test-bwrap-host"), workspace=repo) as box:
        host = box.exec("stat -c '%d %i' /etc/debian_version", timeout=30).stdout.strip()
        st = os.stat("/etc/debian_version")  # no image named: the host's root, as before
        assert host == f"{st.st_dev} {st.st_ino}", host


@needs_bwrap
def test_registries_on_the_image_root_goes_through_the_proxy(image_cache, repo: Path, monkeypatch) -> None:
    monkeypatch.delenv(ROOTFS_ENV, raising=False)  # the socket's folder is made on a /run tmpfs over the root
    spec = SandboxSpec(image=DEFAULT_IMAGE, network="registries", allow_hosts=["pypi.org"], run_id="test-bwrap-reg")
    with create_sandbox("bwrap", spec, workspace=repo) as box:
        res = box.exec("cat /etc/debian_version; curl -sS -o /dev/null https://example.org 2>&1; touch /etc/x 2>&1",
                       timeout=60)
        assert res.stdout.splitlines()[0] == (image_cache[1] / "etc/debian_version").read_text().strip(), res
        assert "CONNECT tunnel failed, response 403" in res.stdout, res
        assert "Read-only file system" in res.stdout, res


@needs_bwrap
def test_rootfs_env_wins_over_the_cache(image_cache, repo: Path, monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv(ROOTFS_ENV, str(image_cache[1]))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty"))  # the image's cache is empty here
    with create_sandbox("bwrap", SandboxSpec(image="example/never-unpacked:1", run_id="test-bwrap-env"),
                        workspace=repo) as box:
        assert box.exec("command -v python3", timeout=30).stdout.strip() == "/usr/bin/python3"


@needs_bwrap
def test_missing_cache_is_a_one_line_error_never_the_host_root(repo: Path, monkeypatch, tmp_path: Path) -> None:
    monkeypatch.delenv(ROOTFS_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(SandboxError) as err:
        create_sandbox("bwrap", SandboxSpec(image="example/task-env:v1", run_id="test-bwrap-miss"), workspace=repo)
    text = str(err.value)
    assert "\n" not in text
    assert "example/task-env:v1" in text
    assert "failatlas sandbox build-image --tag example/task-env:v1 --rootfs" in text
    with pytest.raises(SandboxError, match="docker create failed"):  # prepare(image) cannot make what is not there
        sandbox_kind("bwrap").prepare("example/no-such-image-anywhere:0")
    assert not rootfs_dir("example/no-such-image-anywhere:0").exists()
    cached = tmp_path / "cache/failatlas/rootfs"
    assert not cached.exists() or list(cached.iterdir()) == []  # nothing half-made left


def _tar(*members: tuple[str, str, str]) -> io.BytesIO:
    """A tar of (name, kind, data or link target) members, kind one of file, dir, sym, hard, chr."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, kind, data in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = len(data)
                info.mode = 0o4755
                tar.addfile(info, io.BytesIO(data.encode()))
                continue
            info.type = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE,
                         "chr": tarfile.CHRTYPE}[kind]
            info.linkname = data
            tar.addfile(info)
    buf.seek(0)
    return buf


@pytest.mark.parametrize("members", [
    [("../x", "file", "escape")],
    [("a/../../x", "file", "escape")],
    [("/x", "file", "absolute")],
    [("link", "sym", "/"), ("link/x", "file", "through a link")],
    [("d", "dir", ""), ("d/up", "sym", ".."), ("d/up/up/x", "file", "through links")],
    [("h", "hard", "../outside")],
    [("h", "hard", "/etc/passwd")],
], ids=["dotdot", "nested-dotdot", "absolute", "through-symlink", "through-relative-links", "hardlink-up",
        "hardlink-absolute"])
def test_hostile_members_are_refused(members, tmp_path: Path) -> None:
    outside = tmp_path / "x"
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(SandboxError, match="refused tar member"):
        safe_extract(_tar(*members), dest)
    assert not outside.exists() and not (tmp_path / "outside").exists()
    assert not Path("/x").exists()


def test_links_kept_as_links_devices_skipped_setuid_dropped(tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    dest.mkdir()
    n = safe_extract(_tar(("usr/bin", "dir", ""), ("usr/bin/tool", "file", "#!/bin/sh\n"),
                          ("bin", "sym", "usr/bin"), ("abs", "sym", "/etc/passwd"),
                          ("usr/bin/tool2", "hard", "usr/bin/tool"), ("dev/null", "chr", "")), dest)
    assert n == 5
    assert os.readlink(dest / "bin") == "usr/bin" and os.readlink(dest / "abs") == "/etc/passwd"
    assert (dest / "usr/bin/tool").read_text() == "#!/bin/sh\n"
    assert (dest / "usr/bin/tool").stat().st_mode & 0o7777 == 0o755
    assert os.path.samefile(dest / "usr/bin/tool", dest / "usr/bin/tool2")
    assert not (dest / "dev/null").exists()


def test_a_concurrent_unpack_that_finished_first_is_kept_not_swapped(monkeypatch, tmp_path: Path) -> None:
    """Two commands unpacking the same image at once: the one that finishes second keeps the first one's root
    (sandboxes may already run on it) and drops its own."""
    from failatlas.bench_core.sandbox import bwrap_rootfs

    if not _docker_has(DEFAULT_IMAGE):
        pytest.fail(f"{DEFAULT_IMAGE} is missing: build it with scripts/setup.sh")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    final = rootfs_dir(DEFAULT_IMAGE)

    def other_command_finishes_first(stream, dest: Path, **_options) -> None:
        (final / "etc").mkdir(parents=True)
        (final / "etc" / "in-use").write_text("a sandbox runs here\n")
        for _chunk in iter(lambda: stream.read(1 << 20), b""):  # let docker export end
            pass
        (dest / "etc").mkdir()

    monkeypatch.setattr(bwrap_rootfs, "safe_extract", other_command_finishes_first)
    path, unpacked = build_rootfs(DEFAULT_IMAGE)
    assert (path, unpacked) == (final, False)
    assert (final / "etc" / "in-use").read_text() == "a sandbox runs here\n"
    assert [p.name for p in final.parent.iterdir()] == [final.name]  # our temporary folder is gone

