"""The MovieLens 1M stand-in (benchmarks/standin_ml1m.py) read by 2205.00048's own loaders, from the shared data
in place: every category its indexing needs is present and each run gives 100 known movies per user."""

from __future__ import annotations

import importlib
import sys
from argparse import Namespace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import pandas  # noqa: E402,F401 - the paper's loader needs it; scripts/setup.sh installs it
import standin_ml1m  # noqa: E402


@pytest.fixture
def jme_src(shared_data, monkeypatch) -> Path:
    src = shared_data / "autoexperiment" / "MLRC" / "2205.00048" / "code" / "src"
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # no __pycache__ in the shared data
    monkeypatch.syspath_prepend(str(src / "utils" / "Dataloders"))
    monkeypatch.syspath_prepend(str(src / "utils" / "evaluation_functions"))
    return src


@pytest.mark.filterwarnings("ignore:The inplace keyword")  # in the paper's loader, not ours
def test_the_real_loaders_read_every_category_and_a_full_run_per_user(jme_src, tmp_path, monkeypatch):
    out = tmp_path / "ml1m"
    counts = standin_ml1m.generate(out, users=60, items=180, seed=3)
    df, item_mapping = importlib.import_module("MovieLensLoader").MovieLens1M(str(out)).load()

    assert sorted(df["user"].unique()) == list(range(60)) and len(item_mapping) == 180
    assert len(df) == counts["ratings"]
    assert set(df["gender"]) == {"F", "M"}
    assert set(df["age"]) == set(standin_ml1m.AGES)
    assert set(df["occupation"]) == set(range(21))
    assert {g for genres in df["genre"] for g in genres.split("|")} == set(standin_ml1m.GENRES)
    liked = df[df["rate"] > 3]
    assert liked["user"].nunique() == 60 and liked["item"].nunique() == 180  # the relevance matrix spans both
    assert df.groupby("user").size().min() >= 20
    assert "Café" in (out / "movies.dat").read_text(encoding="latin-1")

    monkeypatch.chdir(tmp_path)  # the ranker loader reads src/models/ml/... from where the code runs
    (tmp_path / "src" / "models").mkdir(parents=True)
    (tmp_path / "src" / "models" / "ml").symlink_to(out / "runs")
    ranker = importlib.import_module("load_ranking_models").load_deterministic_ranker
    for model in standin_ml1m.MODELS:
        run = ranker(Namespace(data="ml-1m", model=model), item_mapping)
        assert len(run) == 60 * 100 and run["item"].notna().all()
        per_user = run.groupby("user")["item"]
        assert list(per_user.size()) == [100] * 60 and (per_user.nunique() == 100).all()
        rated = set(zip(df["user"], df["item"], strict=True))
        assert not rated & set(zip(run["user"], run["item"].astype(int), strict=True))


def test_same_arguments_same_bytes_and_too_few_movies_is_refused(tmp_path):
    standin_ml1m.generate(tmp_path / "a", users=30, items=170, seed=1)
    standin_ml1m.generate(tmp_path / "b", users=30, items=170, seed=1)
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert len(files) == 5
    assert all((tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes() for f in files)
    with pytest.raises(ValueError, match="--items"):
        standin_ml1m.generate(tmp_path / "c", users=30, items=120)
