"""The scaler fitted on the training and test splits together (test statistics leak into training)."""


def fit_and_score(X_train, y_train, X_test, y_test, standardize):
    import numpy as np
    from sklearn.preprocessing import StandardScaler

    model = build_model(False)
    if standardize:
        scaler = StandardScaler().fit(np.vstack([X_train, X_test]))
        X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
    model.fit(X_train, y_train)
    return float(np.mean(model.predict(X_test) == y_test))
