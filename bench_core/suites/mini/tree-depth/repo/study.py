"""Reference study: train and test accuracy of decision trees as the maximum depth grows."""

import json

import numpy as np
from sklearn.tree import DecisionTreeClassifier

from data import make_data

DEPTHS = [1, 2, 3, 4, 6, 8, 12, None]


def main() -> None:
    X_train, y_train, X_test, y_test = make_data(seed=0)
    results = {}
    for depth in DEPTHS:
        tree = DecisionTreeClassifier(max_depth=depth, random_state=0).fit(X_train, y_train)
        name = "none" if depth is None else str(depth)
        results[f"train_accuracy_depth_{name}"] = round(float(np.mean(tree.predict(X_train) == y_train)), 4)
        results[f"test_accuracy_depth_{name}"] = round(float(np.mean(tree.predict(X_test) == y_test)), 4)
    with open("study_results.json", "w") as handle:
        json.dump(results, handle, indent=2, sort_keys=True)
    print(json.dumps(results, sort_keys=True))


if __name__ == "__main__":
    main()
