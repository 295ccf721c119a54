"""A typed consumer of randfeat's public API, checked by mypy (tests/package/test_typing.py); never imported by pytest."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from sklearn.pipeline import make_pipeline  # type: ignore[import-untyped]  # scikit-learn ships no types
from sklearn.preprocessing import StandardScaler  # type: ignore[import-untyped]

import randfeat
from randfeat import (FeatureMap, InputSummary, LogisticRegression, LogisticRegressionCV, MapCapability, MapState,
                      OutputKind,
                      RandomBinningFeatures,
                      RandomFourierFeatures, Ridge, RidgeClassifier, RidgeClassifierCV, RidgeCV, TransformerMap,
                      as_feature_map, kernel_matrix, row_products)
from randfeat.datasets import load_adult


class ScaledState(MapState):
    """A user's fitted state (a frozen dataclass in a real map)."""

    scale: float = 1.0


class ScaledIdentity(FeatureMap):
    """A user's feature map on the public protocol."""

    output_kind = OutputKind.DENSE
    capabilities = frozenset({MapCapability.ROW_INDEPENDENT})

    def __init__(self, scale: float = 1.0) -> None:
        self.scale = scale

    def _draw(self, summary: InputSummary) -> MapState:
        return MapState(n_features_out=summary.n_features)

    def _transform_rows(self, state: MapState, X: NDArray[np.floating], n_threads: int) -> NDArray[np.floating]:
        return np.ascontiguousarray(X * self.scale)


def regression(X: NDArray[np.float64], y: NDArray[np.float64]) -> NDArray[np.float64]:
    features = RandomFourierFeatures(200, gamma=0.5, random_state=0, n_jobs=1)
    model: Ridge = Ridge(alpha=1e-2, features=features).fit(X, y)
    std_model = Ridge(1.0, features=RandomBinningFeatures(10, random_state=np.random.default_rng(0)), solver="cg")
    std_model.partial_fit(X, y)
    pred: NDArray[np.float64] = model.predict(X)
    both: NDArray[np.float64] = pred + std_model.predict(X)
    return both


def classification(X: NDArray[np.float64], labels: NDArray[np.int64]) -> float:
    pipe = make_pipeline(StandardScaler(), RandomFourierFeatures(100, random_state=0))
    clf = RidgeClassifier(alpha=1e-2, features=pipe, class_weight="balanced").fit(X, labels)
    wrapped = RidgeClassifier(features=TransformerMap(pipe, row_independent=True, max_fit_rows=1000))
    wrapped.partial_fit(X, labels, classes=np.unique(labels))
    scores = clf.decision_function(X)
    accuracy: float = clf.score(X, labels)
    return accuracy + float(np.mean(scores))


def probabilities(X: NDArray[np.float64], labels: NDArray[np.int64]) -> float:
    clf = LogisticRegression(C=10.0, features=RandomFourierFeatures(100, random_state=0), class_weight="balanced")
    clf.fit(X, labels, sample_weight=np.ones(len(labels)))
    proba = clf.predict_proba(X)
    log_proba = clf.predict_log_proba(X)
    accuracy: float = clf.score(X, labels)
    return accuracy + float(np.mean(proba)) + float(np.mean(log_proba)) + float(np.mean(clf.decision_function(X)))


def selection(X: NDArray[np.float64], y: NDArray[np.float64]) -> float:
    cv = RidgeCV(alphas=np.logspace(-3, 1, 5), features=RandomFourierFeatures(100), gammas=[0.1, 1.0], cv=5)
    cv.fit(X, y, sample_weight=np.ones(len(y)))
    alpha: float = cv.alpha_
    RidgeClassifierCV(alphas=(0.1, 1.0), features=ScaledIdentity(2.0), scoring="accuracy").fit(X, y > 0)
    return alpha + float(cv.best_score_)


def maps(X: NDArray[np.float64]) -> int:
    rff = RandomFourierFeatures(64, kernel="matern", nu=2.5, sampling="orthogonal").fit(X)
    W: np.ndarray = rff.random_weights_
    width: int = rff.n_features_out_
    fmap = as_feature_map(ScaledIdentity())
    assert fmap is not None and fmap.has(MapCapability.ROW_INDEPENDENT)
    kind: OutputKind | None = fmap.output_kind_for(sparse_input=False)
    rows = [randfeat.RBFSampler(gamma=0.1), randfeat.Nystroem("rbf", n_components=10), randfeat.SkewedChi2Sampler(),
            randfeat.PolynomialCountSketch(degree=3), randfeat.AdditiveChi2Sampler(sample_steps=3)]
    for m in rows:
        m.fit_transform(np.abs(X))
    K: np.ndarray = kernel_matrix(X, kernel="laplacian", gamma=0.5)
    P: np.ndarray = row_products(X, np.ones((X.shape[1], 2)), n_threads=1)
    return width + int(W.shape[0]) + int(K.shape[0]) + int(P.shape[1]) + (kind is None)


def configuration() -> str:
    config = randfeat.get_config()
    randfeat.show_config()
    adult = load_adult(subset="test")
    return str(config) + str(adult) + randfeat.__version__


def probabilities_cv(X: NDArray[np.float64], labels: NDArray[np.int64]) -> float:
    clf = LogisticRegressionCV(Cs=5, features=RandomFourierFeatures(100, random_state=0), gammas="auto",
                               scoring="neg_log_loss", refit=False, n_jobs=2)
    clf.fit(X, labels, sample_weight=np.ones(len(labels)))
    proba: NDArray[np.float64] = clf.predict_proba(X)
    score: float = clf.score(X, labels)
    return score + float(np.mean(proba)) + float(clf.C_[0]) + float(clf.gamma_)
