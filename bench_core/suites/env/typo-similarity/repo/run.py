"""Does one typo cost short words more similarity than long ones? Writes results.json."""

import json

from data import make_pairs
from similarity import mean_similarity


def main() -> None:
    results = {
        "mean_similarity_len4": round(mean_similarity(make_pairs(200, 4, seed=0)), 4),
        "mean_similarity_len12": round(mean_similarity(make_pairs(200, 12, seed=1)), 4),
    }
    with open("results.json", "w") as handle:
        json.dump(results, handle, indent=2, sort_keys=True)
    print(json.dumps(results, sort_keys=True))


if __name__ == "__main__":
    main()
