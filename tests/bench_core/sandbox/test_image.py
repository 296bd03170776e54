"""Image recipe helpers (the build itself runs once, in the session fixture)."""

from __future__ import annotations

from pathlib import Path

import docker
import pytest

from failatlas.bench_core.sandbox import DEFAULT_PACKAGES, detect_debian_mirror
from failatlas.bench_core.sandbox.image import IMAGE_ENV, IMAGE_LABEL, recipe_hash


def test_mirror_is_read_from_apt_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FAILATLAS_DEBIAN_MIRROR", raising=False)
    deb822 = tmp_path / "debian.sources"
    deb822.write_text("Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\n\n"
                      "Types: deb\nURIs: http://mirror.example/debian/\nSuites: bookworm\n")
    assert detect_debian_mirror([str(deb822)]) == "http://mirror.example/debian"
    legacy = tmp_path / "sources.list"
    legacy.write_text("deb [arch=amd64] https://ftp.example.org/debian bookworm main\n")
    assert detect_debian_mirror([str(legacy)]) == "https://ftp.example.org/debian"
    assert detect_debian_mirror([str(tmp_path / "missing")]) == "http://deb.debian.org/debian"
    monkeypatch.setenv("FAILATLAS_DEBIAN_MIRROR", "http://own/debian")
    assert detect_debian_mirror([str(legacy)]) == "http://own/debian"


@pytest.mark.docker
def test_image_runs_as_agent_in_workspace(sandbox_image: str) -> None:
    image = docker.from_env().images.get(sandbox_image)
    config = image.attrs["Config"]
    assert config["User"] == "1000:1000" and config["WorkingDir"] == "/workspace"
    assert image.labels[IMAGE_LABEL] in (recipe_hash("bookworm", DEFAULT_PACKAGES), "dockerfile")
    assert set(IMAGE_ENV) <= set(config["Env"])


@pytest.mark.docker
def test_scikit_learn_imports_without_setuptools(sandbox_image: str) -> None:
    """joblib imports distutils; with the image's SETUPTOOLS_USE_DISTUTILS=stdlib that is Python's own, not
    setuptools' shim, which loaded setuptools and pkg_resources into every scikit-learn import."""
    script = ("import sys, distutils, sklearn.linear_model, sklearn.model_selection; "
              "print(distutils.__file__); "
              "print(sorted(m for m in ('setuptools', 'pkg_resources') if m in sys.modules))")
    out = docker.from_env().containers.run(sandbox_image, ["python3", "-c", script], remove=True).decode()
    where, loaded = out.split()[:2]
    assert where.startswith("/usr/lib/python3.11/distutils/") and loaded == "[]", out


def test_recipe_changes_with_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    before = recipe_hash("bookworm", DEFAULT_PACKAGES)
    monkeypatch.setattr("failatlas.bench_core.sandbox.image.IMAGE_ENV", (*IMAGE_ENV, "X=1"))
    assert recipe_hash("bookworm", DEFAULT_PACKAGES) != before


def test_dockerfile_installs_the_same_packages() -> None:
    dockerfile = (Path(__file__).resolve().parents[3] / "bench_core" / "images" / "Dockerfile").read_text()
    for package in DEFAULT_PACKAGES:
        assert package in dockerfile
    assert "useradd" in dockerfile and "1000" in dockerfile and "/workspace" in dockerfile
    for pair in IMAGE_ENV:
        if not pair.startswith("PATH="):
            assert pair in dockerfile
