"""Image recipe helpers (the build itself runs once, in the session fixture)."""

from __future__ import annotations

from pathlib import Path

import docker
import pytest

from failatlas.bench_core.sandbox import DEFAULT_PACKAGES, detect_debian_mirror
from failatlas.bench_core.sandbox.image import IMAGE_LABEL, recipe_hash


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


def test_dockerfile_installs_the_same_packages() -> None:
    dockerfile = (Path(__file__).resolve().parents[3] / "bench_core" / "images" / "Dockerfile").read_text()
    for package in DEFAULT_PACKAGES:
        assert package in dockerfile
    assert "useradd" in dockerfile and "1000" in dockerfile and "/workspace" in dockerfile
