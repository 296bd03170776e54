"""Run the standardisation experiment and write results.json."""

import json

from data import make_data
from experiment import run_experiment


def main() -> None:
    results = run_experiment(*make_data(seed=0))
    with open("results.json", "w") as handle:
        json.dump(results, handle, indent=2, sort_keys=True)
    print(json.dumps(results, sort_keys=True))


if __name__ == "__main__":
    main()
