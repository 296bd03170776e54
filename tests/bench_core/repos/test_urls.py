"""One normal form per repository, and texts that must never reach `git clone`."""

from __future__ import annotations

import pytest

from failatlas.bench_core.repos import normalise_url
from failatlas.bench_core.repos.urls import clone_url, slug
from failatlas.core.errors import InputError


@pytest.mark.parametrize("spelling", [
    "github.com/apple/ml-calibration",
    "https://github.com/apple/ml-calibration.git",
    "HTTPS://GitHub.com/apple/ml-calibration/",
    "http://github.com/apple/ml-calibration",
    "https://github.com:443/apple/ml-calibration",
    "https://user:token@github.com/apple/ml-calibration",
    "git@github.com:apple/ml-calibration.git",
    "ssh://git@github.com:22/apple/ml-calibration",
    "git://github.com/apple//ml-calibration.git/",
    "  https://github.com/apple/ml-calibration  ",
])
def test_every_spelling_of_a_repository_has_one_normal_form(spelling):
    assert normalise_url(spelling) == "https://github.com/apple/ml-calibration"


def test_different_repositories_stay_different():
    assert normalise_url("github.com/Hank0626/PDF") == "https://github.com/Hank0626/PDF"
    assert normalise_url("https://example.org:8443/a/b") == "https://example.org:8443/a/b"
    assert normalise_url("github.com/apple/ml-calibration-2") != normalise_url("github.com/apple/ml-calibration")


def test_local_repositories_are_file_urls_of_their_absolute_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert normalise_url(f"{tmp_path}/up.git/") == f"file://{tmp_path}/up"
    assert normalise_url(f"file://{tmp_path}/up.git") == f"file://{tmp_path}/up"
    assert normalise_url("./up") == f"file://{tmp_path}/up"
    assert clone_url(f"{tmp_path}/up.git", allow_local=True) == f"file://{tmp_path}/up.git"


@pytest.mark.parametrize("text", [
    "ext::sh -c touch% /tmp/pwned", "ext::evil", "fd::3", "-uevil", "--upload-pack=touch /tmp/x",
    "ftp://example.org/a/b", "https://github.com/a/b?x=1", "https://github.com/../etc", "github.com",
    "https://github.com/", "a b", "https://github.com/a/b\x00", "",
])
def test_texts_that_are_no_repository_url_are_refused(text):
    with pytest.raises(InputError) as err:
        normalise_url(text)
    assert err.value.field == "url"


def test_a_task_may_not_name_a_repository_of_this_machine_unless_allowed(tmp_path):
    with pytest.raises(InputError, match="on this machine"):
        clone_url(f"file://{tmp_path}/x.git")
    assert clone_url("github.com/a/b") == "https://github.com/a/b"
    assert clone_url("git@github.com:a/b.git") == "git@github.com:a/b.git"


def test_slugs_name_folders_safely():
    assert slug("https://github.com/apple/ml-calibration", "x") == "github.com_apple_ml-calibration"
    assert slug(None, "cogs base") == "local_cogs_base"
    long = slug("https://example.org/" + "a" * 300, "x")
    assert len(long) <= 80 and "/" not in long
