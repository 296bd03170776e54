"""Fit one decision tree with scikit-learn's default settings and print its test accuracy."""

import numpy as np
from sklearn.tree import DecisionTreeClassifier

from data import make_data


def main() -> None:
    X_train, y_train, X_test, y_test = make_data(seed=0)
    tree = DecisionTreeClassifier(random_state=0).fit(X_train, y_train)
    print(f"depth {tree.get_depth()}: test accuracy {np.mean(tree.predict(X_test) == y_test):.3f}")


if __name__ == "__main__":
    main()
