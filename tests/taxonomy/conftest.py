"""Stores filled as the earlier stages would fill them: TRAIL's GAIA errors clustered with k-means, and a
small
hand-made mini-suite with two agents, runs, judgements and a validator, whose prevalence is known by hand."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from failatlas.store import Store, open_store
from failatlas.taxonomy import BuildParams
from tests.taxonomy.fill import add_clustering, add_embeddings, add_insights, load_trail
from tests.taxonomy.mini import fill_mini_suite

# Thresholds for the test's TF-IDF/SVD vectors, whose cosines run lower than sentence-transformer ones: halves
# of one cluster have centroid cosine ~0.82, distinct clusters at most ~0.63.
TRAIL_CLUSTERING = "cl-trail-kmeans20"
TRAIL_PARAMS = BuildParams(clustering_ids=[TRAIL_CLUSTERING], merge_threshold=0.75, assign_threshold=0.5)


@dataclass
class TrailData:
    path: Path
    insight_ids: list[str]  # unique insight ids, in clustering order
    texts: list[str]
    labels: np.ndarray  # cluster per insight (-1 outlier)
    planted: tuple[int, int]  # the two clusters that are random halves of one k-means cluster
    embed: object  # callable: list[str] -> unit vectors in the same space


@pytest.fixture(scope="session")
def trail_template(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> TrailData:
    from sklearn.cluster import KMeans
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.pipeline import make_pipeline

    path = tmp_path_factory.mktemp("trail") / "trail.duckdb"
    store = open_store(path)
    rows = load_trail(shared_data / "trail" / "trail_errors_gaia.jsonl")
    ids = add_insights(store, rows)
    text_of = {i: r["text"] for i, r in zip(ids, rows, strict=True)}
    unique = list(dict.fromkeys(ids))
    texts = [text_of[i] for i in unique]
    pipeline = make_pipeline(
        TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, stop_words="english"),
        TruncatedSVD(n_components=64, random_state=0),
    ).fit(texts)

    def embed(new_texts: list[str]) -> np.ndarray:
        v = pipeline.transform(new_texts)
        return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)

    vectors = embed(texts)
    add_embeddings(store, texts, vectors)
    labels = KMeans(20, random_state=0, n_init=3).fit_predict(vectors)
    # Plant a near-duplicate: split the biggest cluster into two random halves (cluster 20 is the second).
    biggest = int(np.bincount(labels).argmax())
    members = np.flatnonzero(labels == biggest)
    labels[np.random.default_rng(0).permutation(members)[: len(members) // 2]] = 20
    # Outliers: the 3% of insights farthest from their cluster's centroid, as HDBSCAN would leave some out.
    centroids = np.stack([vectors[labels == c].mean(0) for c in range(21)])
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    closeness = (vectors * centroids[labels]).sum(1)
    labels = labels.copy()
    labels[closeness < np.quantile(closeness, 0.03)] = -1
    add_clustering(store, TRAIL_CLUSTERING, "execution", unique, labels)
    return TrailData(
        path=path, insight_ids=unique, texts=texts, labels=labels, planted=(biggest, 20), embed=embed
    )


@pytest.fixture
def trail_store(trail_template: TrailData, tmp_path: Path) -> Store:
    """A fresh copy of the TRAIL store for one test."""
    path = tmp_path / "trail.duckdb"
    shutil.copy(trail_template.path, path)
    return open_store(path)


@pytest.fixture
def mini_store(store: Store) -> Store:
    fill_mini_suite(store)
    return store


@pytest.fixture(scope="session")
def gaia_cli_store(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """TRAIL GAIA ingested, embedded and clustered by the real CLI (`test_user_labels_gaia.gaia_store`), built once
    per session; a test that writes works on its own copy (`shutil.copy` of the file)."""
    from tests.taxonomy.test_user_labels_gaia import gaia_store

    return gaia_store(tmp_path_factory.mktemp("gaia-cli") / "gaia.duckdb", shared_data)
