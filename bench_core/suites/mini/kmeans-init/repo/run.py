"""Compare the final inertia of k-means seeded uniformly at random and with k-means++ over 30 seeds."""

import json

import numpy as np

from data import N_CLUSTERS, make_blobs
from kmeans import KMeans

N_SEEDS = 30


def main() -> None:
    X, _ = make_blobs(seed=0)
    inertias = {
        init: np.array([KMeans(N_CLUSTERS, init=init, seed=s).fit(X).inertia_ for s in range(N_SEEDS)])
        for init in ("random", "k-means++")
    }
    best = min(values.min() for values in inertias.values())
    results = {}
    for init, key in (("random", "random"), ("k-means++", "kmeanspp")):
        results[f"mean_inertia_{key}"] = round(float(inertias[init].mean()), 2)
        results[f"frac_optimal_{key}"] = round(float(np.mean(inertias[init] <= best * 1.01)), 4)
    with open("results.json", "w") as handle:
        json.dump(results, handle, indent=2, sort_keys=True)
    print(json.dumps(results, sort_keys=True))


if __name__ == "__main__":
    main()
