"""The feature-map contract: a map defined here, in one class, runs through every pipeline with no edit elsewhere.

``RandomProjection`` is a tiny map written only against
``randfeat._maps.contract`` (what a new module in ``randfeat/_maps/`` would
be): z(x) = √(γ/D) Wᵀx with W ~ N(0, 1), so E[z(x)ᵀz(y)] = γ xᵀy (the
linear kernel).  It declares a gamma path (W drawn once, rescaled per
gamma) and row independence, and nothing in randfeat knows its name:
``Ridge``, ``RidgeClassifier``, ``RidgeCV``'s gamma path, ``partial_fit``
and a Dask fit all take it through the contract.
"""

import dataclasses
import pickle
from numbers import Integral, Real

import numpy as np
import pytest
from sklearn.base import clone

from randfeat import Ridge, RidgeClassifier, RidgeClassifierCV, RidgeCV
from randfeat._core.protocols import MapCapability, OutputKind
from randfeat._core.validation import N_JOBS, Interval, as_generator
from randfeat._linalg.products import row_products
from randfeat._maps.contract import FeatureMap, MapState


@dataclasses.dataclass(frozen=True, eq=False)
class ProjectionState(MapState):
    W: np.ndarray
    gamma: float

    def check(self):
        super().check()
        if self.W.ndim != 2 or self.W.shape[1] != self.n_features_out:
            raise ValueError("W must have n_features_out columns")


class RandomProjection(FeatureMap):
    """z(x) = √(γ/D) Wᵀx: a random-feature map of the linear kernel γ xᵀy (for the contract's tests)."""

    output_kind = OutputKind.DENSE
    capabilities = frozenset({MapCapability.ROW_INDEPENDENT, MapCapability.KERNEL_WIDTH, MapCapability.GAMMA_PATH})
    _parameter_constraints = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "gamma": [Interval(Real, 0, None, closed="neither")],
        "random_state": ["random_state"],
        "n_jobs": N_JOBS,
    }

    def __init__(self, n_components=10, *, gamma=1.0, random_state=None, n_jobs=None):
        self.n_components = n_components
        self.gamma = gamma
        self.random_state = random_state
        self.n_jobs = n_jobs

    @property
    def weights_(self):
        return self._fitted_state().W

    def _draw_path(self, summary, gammas):
        unit = as_generator(self.random_state).standard_normal((summary.n_features, self.n_components))
        return [ProjectionState(n_features_out=int(self.n_components), gamma=float(g),
                                W=(unit * np.sqrt(g / self.n_components)).astype(summary.dtype)) for g in gammas]

    def _draw(self, summary):
        return self._draw_path(summary, [self.gamma])[0]

    def _auto_gamma(self, X):
        return 1.0 / float(np.mean(np.sum(np.asarray(X) ** 2, axis=1)))

    def _transform_rows(self, state, X, n_threads):
        return row_products(X, state.W, n_threads)


def _data(n=300, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = X @ rng.standard_normal(d) + 0.1 * rng.standard_normal(n)
    return X, y, (X[:, 0] > 0).astype(int) + (X[:, 1] > 1)


def _close(a, b, rtol=1e-10):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape
    assert np.abs(a - b).max() <= rtol * max(np.abs(b).max(), 1e-300)


def test_the_map_itself():
    X, _, _ = _data()
    m = RandomProjection(6, gamma=2.0, random_state=0)
    Z = m.fit_transform(X)
    assert Z.shape == (300, 6) and m.n_features_out_ == 6 and m.output_kind is OutputKind.DENSE
    np.testing.assert_allclose(Z, X @ m.weights_, rtol=1e-12)
    assert list(m.get_feature_names_out()) == [f"randomprojection{i}" for i in range(6)]
    assert m.has(MapCapability.GAMMA_PATH) and not m.has(MapCapability.MERGEABLE_VOCABULARY)
    # The kernel it approximates: E[ZZᵀ] = γ XXᵀ.
    big = RandomProjection(20000, gamma=2.0, random_state=1).fit(X[:5])
    K = big.transform(X[:5]) @ big.transform(X[:5]).T
    assert np.abs(K - 2.0 * X[:5] @ X[:5].T).max() < 0.1 * np.abs(2.0 * X[:5] @ X[:5].T).max()
    again = pickle.loads(pickle.dumps(m))
    np.testing.assert_array_equal(again.transform(X), Z)


@pytest.mark.parametrize("float32", [False, True])
def test_ridge_streams_it(float32):
    X, y, _ = _data()
    X = X.astype(np.float32) if float32 else X
    fm = RandomProjection(8, gamma=0.5, random_state=3)
    est = Ridge(alpha=0.1, features=fm, chunk_size=37).fit(X, y)
    ref = Ridge(alpha=0.1).fit(clone(fm).fit_transform(X), y)
    # float32: the Gram is summed in float32 per chunk (rounding ~6e-8 of ‖Z‖², amplified by the
    # conditioning: 8 features of a 4-dimensional X are rank 4, regularised by alpha alone).
    _close(est.coef_, ref.coef_, 1e-3 if float32 else 1e-10)
    _close(est.predict(X), ref.predict(clone(fm).fit_transform(X)), 1e-4 if float32 else 1e-10)
    assert est.coef_.dtype == (np.float32 if float32 else np.float64)


def test_classifier_and_cg():
    X, _, labels = _data()
    fm = RandomProjection(8, gamma=0.5, random_state=4)
    Z = clone(fm).fit_transform(X)
    for solver in ("cholesky", "cg"):
        est = RidgeClassifier(alpha=0.3, solver=solver, tol=1e-12, features=fm).fit(X, labels)
        ref = RidgeClassifier(alpha=0.3, solver=solver, tol=1e-12).fit(Z, labels)
        _close(est.decision_function(X), ref.decision_function(Z), 1e-8)


def test_ridge_cv_gamma_path_is_one_draw_rescaled():
    X, y, labels = _data()
    fm = RandomProjection(12, random_state=5)
    gammas = [0.1, 1.0, 10.0]
    cv = RidgeCV(alphas=[0.01, 1.0, 100.0], features=fm, gammas=gammas).fit(X, y)
    assert cv.gamma_ in gammas
    alone = clone(fm).set_params(gamma=cv.gamma_).fit(X)
    np.testing.assert_array_equal(cv.features_.weights_, alone.weights_)
    scores = [RidgeCV(alphas=[0.01, 1.0, 100.0], features=clone(fm).set_params(gamma=g)).fit(X, y).best_score_
              for g in gammas]
    np.testing.assert_allclose(cv.gamma_scores_, scores, rtol=1e-12)
    clf = RidgeClassifierCV(alphas=[0.1, 10.0], features=fm, gammas=gammas, cv=3).fit(X, labels)
    assert clf.gamma_ in gammas


def test_partial_fit_equals_fit():
    X, y, _ = _data()
    fm = RandomProjection(8, gamma=0.5, random_state=6)
    est = Ridge(alpha=0.2, features=fm)
    for s in range(0, 300, 70):
        est.partial_fit(X[s:s + 70], y[s:s + 70])
    ref = Ridge(alpha=0.2, features=fm).fit(X, y)
    _close(est.coef_, ref.coef_, 1e-10)


def test_dask_fit_and_transform():
    da = pytest.importorskip("dask.array")
    dask = pytest.importorskip("dask")
    X, y, labels = _data()
    Xd = da.from_array(X, chunks=(100, 4))
    fm = RandomProjection(8, gamma=0.5, random_state=7)
    with dask.config.set(scheduler="synchronous"):
        lazy = clone(fm).fit(Xd).transform(Xd)
        np.testing.assert_array_equal(lazy.compute(), clone(fm).fit_transform(X))  # row-independent
        est = Ridge(alpha=0.1, features=fm).fit(Xd, da.from_array(y, chunks=100))
        ref = Ridge(alpha=0.1, features=fm).fit(X, y)
        _close(est.coef_, ref.coef_, 1e-10)
        np.testing.assert_array_equal(est.predict(Xd).compute(), est.predict(X))
        clf = RidgeClassifier(features=fm).fit(Xd, da.from_array(labels, chunks=100))
        _close(clf.decision_function(X), RidgeClassifier(features=fm).fit(X, labels).decision_function(X), 1e-10)


def test_a_map_declaring_what_it_lacks_is_refused_at_class_creation():
    dense = {"output_kind": OutputKind.DENSE}
    with pytest.raises(TypeError, match="GAMMA_PATH"):
        type("Broken", (FeatureMap,), {**dense, "capabilities": frozenset({MapCapability.GAMMA_PATH})})
    with pytest.raises(TypeError, match="GAMMA_PATH"):
        type("Pathless", (FeatureMap,), {**dense, "capabilities": frozenset({MapCapability.KERNEL_WIDTH,
                                                                              MapCapability.GAMMA_PATH})})
    with pytest.raises(TypeError, match="_auto_gamma"):
        type("NoHeuristic", (FeatureMap,), {**dense, "capabilities": frozenset({MapCapability.KERNEL_WIDTH})})
    with pytest.raises(TypeError, match="MERGEABLE_VOCABULARY"):
        type("Reads", (FeatureMap,), {**dense, "capabilities": frozenset(),
                                      "_fit_rows": lambda self, state, X, n, r: (state, None)})


@pytest.mark.parametrize("missing", ["output_kind", "capabilities"])
def test_a_map_must_declare_its_output_and_capabilities(missing):
    declared = {"output_kind": OutputKind.DENSE, "capabilities": frozenset()}
    del declared[missing]
    with pytest.raises(TypeError, match=f"must declare {missing}"):
        type("Undeclared", (FeatureMap,), declared)
