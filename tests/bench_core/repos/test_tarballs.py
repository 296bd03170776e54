"""Repository tarballs: the real `git archive` tarballs keep their commit; hostile ones write nothing anywhere."""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

import pytest

from failatlas.bench_core.repos import AddParams, add, list_repositories
from failatlas.bench_core.repos import tarballs as tarballs_module
from failatlas.bench_core.repos.git import tar_commit
from failatlas.core.errors import InputError

README_COMMITS = {  # ../shared/data/repos/README.md
    "apple__ml-calibration.tar.gz": "18ff21a7e4e409fc4885690129f50211b32ea144",
    "Hank0626__PDF.tar.gz": "6c654a1f53f036ba4efa7706986370a812a85917",
}


def test_the_readme_names_the_commits_the_tarballs_hold(repos_data: Path):
    readme = (repos_data / "README.md").read_text()
    for name, commit in README_COMMITS.items():
        assert f"`{name}`" in readme and commit in readme
        assert tar_commit(repos_data / name) == commit
        piped = subprocess.run(f"gzip -dc '{repos_data / name}' | git get-tar-commit-id", shell=True, check=True,
                               capture_output=True, text=True).stdout.strip()
        assert piped == commit


def _tarball(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _file(name: str, data: bytes = b"x = 1\n") -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), data


def _special(name: str, kind: bytes, link: str = "") -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info, None


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the cache that a hostile tarball aims at; it must stay empty."""
    folder = tmp_path / "outside"
    folder.mkdir()
    return folder


def _hostile(outside: Path) -> dict[str, tuple[list, str]]:
    """name -> (members, the member the error must name)."""
    return {
        "dotdot": ([_file("proj/a.py"), _file("proj/../../outside/escape.py")], "proj/../../outside/escape.py"),
        "absolute": ([_file("proj/a.py"), _file(f"{outside}/abs.py")], f"{outside}/abs.py"),
        "symlink-out": ([_file("proj/a.py"), _special("proj/data", tarfile.SYMTYPE, "../../outside"),
                         _file("proj/data/planted.py")], "proj/data"),
        "symlink-absolute": ([_special("proj/etc", tarfile.SYMTYPE, "/etc")], "proj/etc"),
        "hardlink-absolute": ([_file("proj/a.py"), _special("proj/p", tarfile.LNKTYPE, "/etc/passwd")], "proj/p"),
        "hardlink-out": ([_file("proj/a.py"), _special("proj/q", tarfile.LNKTYPE, "outside/secret")], "proj/q"),
        "device": ([_file("proj/a.py"), _special("proj/null", tarfile.CHRTYPE)], "proj/null"),
        "fifo": ([_file("proj/a.py"), _special("proj/pipe", tarfile.FIFOTYPE)], "proj/pipe"),
    }


@pytest.mark.parametrize("case", ["dotdot", "absolute", "symlink-out", "symlink-absolute", "hardlink-absolute",
                                  "hardlink-out", "device", "fifo"])
def test_a_hostile_tarball_is_refused_naming_the_member_and_leaves_nothing(store, tmp_path, outside, case):
    members, culprit = _hostile(outside)[case]
    tarball = _tarball(tmp_path / "evil__repo.tar.gz", members)
    cache = tmp_path / "cache"
    with pytest.raises(InputError) as err:
        add(store, AddParams(source=str(tarball), url="github.com/evil/repo", cache_dir=cache))
    assert err.value.path == str(tarball) and repr(culprit) in str(err.value)
    assert list(outside.iterdir()) == []
    assert not cache.exists() or list(cache.iterdir()) == []  # the staging folder is gone too
    assert list_repositories(store) == []
    assert store.query("SELECT status FROM stage_runs WHERE stage = 'repos.add'") == [("failed",)]


@pytest.mark.parametrize(("cap", "limit"), [("MAX_MEMBER_BYTES", 1000), ("MAX_TREE_BYTES", 1500),
                                            ("MAX_MEMBERS", 2)])
def test_a_tarball_past_a_limit_is_refused_before_anything_is_written(store, tmp_path, monkeypatch, cap, limit):
    monkeypatch.setattr(tarballs_module, cap, limit)
    tarball = _tarball(tmp_path / "big.tar.gz", [_file("proj/a.py", b"a" * 800), _file("proj/b.py", b"b" * 800),
                                                 _file("proj/huge.bin", b"\0" * 1200)])
    cache = tmp_path / "cache"
    with pytest.raises(InputError) as err:
        add(store, AddParams(source=str(tarball), url="github.com/x/big", cache_dir=cache))
    assert str(tarball) in str(err.value) and "limit" in str(err.value)
    assert not cache.exists() or list(cache.iterdir()) == []


def test_a_tarball_that_is_no_tarball_is_an_input_error(store, tmp_path):
    fake = tmp_path / "x__y.tar.gz"
    fake.write_bytes(b"not gzip at all")
    with pytest.raises(InputError) as err:
        add(store, AddParams(source=str(fake), url="github.com/x/y", cache_dir=tmp_path / "cache"))
    assert err.value.path == str(fake)
    assert not (tmp_path / "cache").exists() or list((tmp_path / "cache").iterdir()) == []


def test_git_data_is_dropped_the_top_folder_stripped_and_inside_links_kept(store, tmp_path):
    tarball = _tarball(tmp_path / "o__n.tar.gz", [
        _file("n-main/src/model.py"), _file("n-main/.git/config", b"[core]\n"), _file("n-main/lib/.git", b"x"),
        _special("n-main/model.py", tarfile.SYMTYPE, "src/model.py"),
        _special("n-main/copy.py", tarfile.LNKTYPE, "n-main/src/model.py")])
    result = add(store, AddParams(source=str(tarball), url="github.com/o/n", cache_dir=tmp_path / "cache"))
    tree = result.entry.path
    assert sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*")) == [
        "copy.py", "model.py", "src", "src/model.py"]
    assert (tree / "model.py").is_symlink() and (tree / "model.py").read_text() == "x = 1\n"
    assert result.entry.commit.startswith("tree-sha256:") and result.entry.commit_from == "tree-sha256"
    assert any("content hash" in note for note in result.notes)
    assert any(".git" in note for note in result.notes)


def test_a_commit_given_for_a_git_archive_tarball_must_be_its_own(store, repos_data, tmp_path):
    source = str(repos_data / "Hank0626__PDF.tar.gz")
    with pytest.raises(InputError, match="made from commit 6c654a1f") as err:
        add(store, AddParams(source=source, url="github.com/Hank0626/PDF", commit="18ff21a7e4e4",
                             cache_dir=tmp_path / "c"))
    assert err.value.field == "commit" and not (tmp_path / "c").exists()
    pinned = add(store, AddParams(source=source, url="github.com/Hank0626/PDF", commit="6C654A1F53",
                                  cache_dir=tmp_path / "c"))
    assert (pinned.entry.commit, pinned.entry.commit_from) == (README_COMMITS["Hank0626__PDF.tar.gz"], "tar-header")


def test_a_tarball_nested_thousands_of_folders_deep_is_refused_naming_the_member(store, tmp_path):
    deep = "proj/" + "d/" * 2000 + "x.py"
    tarball = _tarball(tmp_path / "deep.tar.gz", [_file("proj/a.py", b"a"), _file(deep, b"x")])
    with pytest.raises(InputError) as err:
        add(store, AddParams(source=str(tarball), url="github.com/x/deep", cache_dir=tmp_path / "cache"))
    assert "levels deep" in str(err.value) and str(tarball) in str(err.value)
    assert not (tmp_path / "cache").exists() or list((tmp_path / "cache").iterdir()) == []
