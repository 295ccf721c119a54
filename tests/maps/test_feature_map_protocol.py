"""The open engine: a user's map from public names only, any scikit-learn transformer as ``features=``,
declared capabilities that hold, and one validation and one backend choice per public call.

scikit-learn is the oracle: every fit here is compared with scikit-learn's
Ridge / RidgeClassifier / RidgeCV on the materialised features.
"""

import importlib.util
import pickle
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn import linear_model as sk
from sklearn.base import BaseEstimator, TransformerMixin, clone
from sklearn.kernel_approximation import RBFSampler as SkRBFSampler
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

import randfeat
from randfeat import (AdditiveChi2Sampler, MapCapability, Nystroem, OutputKind, PolynomialCountSketch,
                      RandomBinningFeatures, RandomFourierFeatures, RBFSampler, Ridge, RidgeClassifier, RidgeCV,
                      SkewedChi2Sampler, TransformerMap, as_feature_map)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "plot_writing_a_feature_map.py"


def _close(a, b, rtol=1e-10):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape
    err = np.abs(a - b).max() / max(np.abs(b).max(), 1e-300)
    assert err <= rtol, err


def _data(n=400, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=n)
    labels = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5)
    return X, y, labels


@pytest.fixture(scope="module")
def ArcCosine():
    if not EXAMPLE.exists():
        pytest.skip("no examples/ next to tests/")
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    # Imported as a module of its own name, so that its map pickles as a user's would.
    spec = importlib.util.spec_from_file_location(EXAMPLE.stem, EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[EXAMPLE.stem] = module
    spec.loader.exec_module(module)
    return module.ArcCosineFeatures


# ----------------------------------------------------------- a user's own map
def test_the_example_map_imports_only_public_names():
    import ast

    if not EXAMPLE.exists():
        pytest.skip("no examples/ next to tests/")
    tree = ast.parse(EXAMPLE.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("randfeat"):
            assert node.module == "randfeat", node.module
            assert all(a.name in randfeat.__all__ for a in node.names)


def test_user_map_through_ridge_classifier_and_partial_fit(ArcCosine):
    X, y, labels = _data()
    fm = ArcCosine(300, gamma=0.5, random_state=0)
    Z = clone(fm).fit_transform(X)
    est = Ridge(alpha=0.1, features=fm, chunk_size=40).fit(X, y)
    ref = sk.Ridge(alpha=0.1).fit(Z, y)
    _close(est.coef_, ref.coef_)
    _close(est.predict(X), ref.predict(Z))
    clf = RidgeClassifier(alpha=0.1, features=fm).fit(X, labels)
    _close(clf.decision_function(X), sk.RidgeClassifier(alpha=0.1).fit(Z, labels).decision_function(Z))
    for solver in ("cg",):
        cg = Ridge(alpha=0.1, features=fm, solver=solver, tol=1e-14, max_iter=5000).fit(X, y)
        _close(cg.predict(X), ref.predict(Z), 1e-8)
    blocks = Ridge(alpha=0.1, features=fm)
    for s in range(0, 400, 90):
        blocks.partial_fit(X[s:s + 90], y[s:s + 90])
    _close(blocks.coef_, ref.coef_)
    again = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(again.predict(X), est.predict(X))


def test_user_map_through_ridge_cv_gammas(ArcCosine):
    X, y, _ = _data()
    fm = ArcCosine(200, random_state=1)
    gammas, alphas = [0.05, 0.5, 5.0], [1e-3, 1e-1, 10.0]
    cv = RidgeCV(alphas=alphas, gammas=gammas, features=fm).fit(X, y)
    scores = []
    for g in gammas:
        Zg = clone(fm).set_params(gamma=g).fit_transform(X)
        scores.append(sk.RidgeCV(alphas=alphas).fit(Zg, y).best_score_)
    _close(cv.gamma_scores_, scores, 1e-8)
    assert cv.gamma_ == gammas[int(np.argmax(scores))]
    Z = clone(fm).set_params(gamma=cv.gamma_).fit_transform(X)
    _close(cv.predict(X), sk.Ridge(alpha=cv.alpha_).fit(Z, y).predict(Z))
    auto = RidgeCV(alphas=alphas, gammas="auto", features=fm).fit(X, y)
    assert auto.gammas_[2] == pytest.approx(fm._auto_gamma(X))  # the map's own heuristic, times 1


def test_user_map_on_dask(ArcCosine):
    da = pytest.importorskip("dask.array")
    dask = pytest.importorskip("dask")
    X, y, labels = _data()
    fm = ArcCosine(150, gamma=0.5, random_state=2)
    Z = clone(fm).fit_transform(X)
    Xd, yd = da.from_array(X, chunks=(100, 5)), da.from_array(y, chunks=100)
    with dask.config.set(scheduler="synchronous"):
        np.testing.assert_array_equal(clone(fm).fit(Xd).transform(Xd).compute(), Z)
        est = Ridge(alpha=0.1, features=fm).fit(Xd, yd)
        _close(est.coef_, sk.Ridge(alpha=0.1).fit(Z, y).coef_)
        clf = RidgeClassifier(alpha=0.1, features=fm).fit(Xd, da.from_array(labels, chunks=100))
        _close(clf.decision_function(X), sk.RidgeClassifier(alpha=0.1).fit(Z, labels).decision_function(Z))


# ------------------------------------------------- scikit-learn transformers
def test_pipeline_as_features_equals_scikit_learn_without_holding_n_by_d():
    rng = np.random.default_rng(3)
    N, d, D = 20000, 6, 1000
    X = rng.normal(size=(N, d)) * np.arange(1, d + 1)
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=N)
    pipe = make_pipeline(StandardScaler(), SkRBFSampler(n_components=D, gamma=0.2, random_state=0))
    est = Ridge(alpha=1.0, features=pipe, chunk_size=1000)
    tracemalloc.start()
    try:
        est.fit(X, y)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 0.5 * N * D * 8, peak / (N * D * 8)  # well below the N × D float64 matrix
    assert isinstance(est.features_, TransformerMap)
    Z = clone(pipe).fit(X).transform(X)
    ref = sk.Ridge(alpha=1.0).fit(Z, y)
    _close(est.coef_, ref.coef_)
    _close(est.predict(X[:500]), ref.predict(Z[:500]))


def test_transformer_keeps_float32_and_sparse_output():
    X, y, labels = _data(300, 3)
    X32 = X.astype(np.float32)
    est = Ridge(alpha=0.1, features=SkRBFSampler(n_components=50, random_state=0)).fit(X32, y)
    assert est.coef_.dtype == np.float32 and est.predict(X32).dtype == np.float32
    # A sparse output (one-hot codes of rounded columns) is held as CSR and solved by CG.
    Xr = np.round(X)
    enc = OneHotEncoder(handle_unknown="ignore")
    Z = clone(enc).fit(Xr).transform(Xr)
    fm = as_feature_map(enc).fit(Xr)
    assert fm.output_kind is OutputKind.CSR and sp.issparse(fm.transform(Xr))
    got = Ridge(alpha=0.5, features=enc, tol=1e-13).fit(Xr, y)
    _close(got.predict(Xr), sk.Ridge(alpha=0.5, solver="cholesky").fit(Z.toarray(), y).predict(Z.toarray()), 1e-8)


class _BatchCentring(TransformerMixin, BaseEstimator):
    """Subtracts the mean of the rows it is given: its transform of a chunk is not a slice of the whole."""

    def fit(self, X, y=None):
        return self

    def transform(self, X):
        return np.asarray(X) - np.asarray(X).mean(axis=0)


def test_a_transformer_declared_row_dependent_sees_all_rows_at_once():
    X, y, _ = _data(500, 4)
    Z = _BatchCentring().fit_transform(X)
    ref = sk.Ridge(alpha=0.3).fit(Z, y)
    got = Ridge(alpha=0.3, chunk_size=50, features=TransformerMap(_BatchCentring(), row_independent=False)).fit(X, y)
    _close(got.coef_, ref.coef_)
    _close(got.predict(X), ref.predict(Z))
    streamed = Ridge(alpha=0.3, chunk_size=50, features=_BatchCentring()).fit(X, y)  # declared (wrongly) independent
    assert np.abs(streamed.coef_ - ref.coef_).max() > 1e-3  # the documented difference
    da = pytest.importorskip("dask.array")
    with pytest.raises(TypeError, match="not row-independent"):
        TransformerMap(_BatchCentring(), row_independent=False).fit(X).transform(da.from_array(X, chunks=100))


def test_transformer_with_the_cv_estimators_partial_fit_and_dask():
    X, y, _ = _data()
    sampler = SkRBFSampler(n_components=80, gamma=0.3, random_state=1)
    Z = clone(sampler).fit(X).transform(X)
    cv = RidgeCV(alphas=[1e-2, 1.0, 10.0], features=sampler).fit(X, y)
    ref = sk.RidgeCV(alphas=[1e-2, 1.0, 10.0]).fit(Z, y)
    assert cv.alpha_ == ref.alpha_
    _close(cv.best_score_, ref.best_score_, 1e-8)
    with pytest.raises(ValueError, match="kernel width"):
        RidgeCV(gammas=[0.1, 1.0], features=sampler).fit(X, y)
    blocks = Ridge(alpha=0.1, features=sampler)
    for s in range(0, 400, 100):
        blocks.partial_fit(X[s:s + 100], y[s:s + 100])
    # Fitted on the first batch (documented); RBFSampler reads only the width of X, so the same map.
    _close(blocks.coef_, sk.Ridge(alpha=0.1).fit(Z, y).coef_)
    da = pytest.importorskip("dask.array")
    dask = pytest.importorskip("dask")
    with dask.config.set(scheduler="synchronous"):
        Xd = da.from_array(X, chunks=(100, 5))
        est = Ridge(alpha=0.1, features=make_pipeline(StandardScaler(), clone(sampler))).fit(
            Xd, da.from_array(y, chunks=100))
        pipe = make_pipeline(StandardScaler(), clone(sampler)).fit(X)
        _close(est.coef_, sk.Ridge(alpha=0.1).fit(pipe.transform(X), y).coef_)
        # More rows than max_fit_rows: fitted on a uniform sample of them.
        small = TransformerMap(StandardScaler(), max_fit_rows=50, random_state=0).fit(Xd)
        assert not np.allclose(small.transformer_.mean_, X.mean(axis=0))
        assert small.transformer_.n_samples_seen_ == 50


def test_bad_features_are_a_clear_error():
    X, y, _ = _data(50, 3)
    with pytest.raises(ValueError, match="randfeat feature map.*scikit-learn transformer"):
        Ridge(features="rbf").fit(X, y)


# ----------------------------------------------------- declared capabilities
SHIPPED_MAPS = [
    RandomFourierFeatures(40, random_state=0),
    RandomFourierFeatures(40, sampling="sorf", random_state=0),
    RandomFourierFeatures(40, sampling="fastfood", random_state=0),
    RandomBinningFeatures(5, random_state=0),
    RBFSampler(n_components=40, random_state=0),
    Nystroem(n_components=30, random_state=0),
    Nystroem("laplacian", n_components=30, random_state=0),
    SkewedChi2Sampler(n_components=40, random_state=0),
    PolynomialCountSketch(n_components=40, random_state=0),
    AdditiveChi2Sampler(),
]


@pytest.mark.parametrize("fmap", SHIPPED_MAPS, ids=lambda m: f"{type(m).__name__}-{getattr(m, 'sampling', '')}")
@pytest.mark.parametrize("sparse", [False, True])
def test_every_shipped_map_does_what_it_declares(fmap, sparse):
    rng = np.random.default_rng(4)
    X = np.abs(rng.normal(size=(60, 7)))  # non-negative: the chi² maps' domain
    X[X < 0.5] = 0.0
    X = sp.csr_matrix(X) if sparse else X
    fm = clone(fmap).fit(X)
    Z = fm.transform(X)
    kind = fm.output_kind_for(sparse)
    assert kind in (OutputKind.DENSE, OutputKind.CSR)
    assert sp.issparse(Z) == (kind is OutputKind.CSR), (kind, type(Z))
    dense = (lambda A: A.toarray()) if sp.issparse(Z) else np.asarray
    if fm.has(MapCapability.ROW_INDEPENDENT):
        # One row at a time, and an odd slice, give the block's rows bit for bit.
        for i in (0, 7, 59):
            np.testing.assert_array_equal(dense(fm.transform(X[i:i + 1])), dense(Z)[i:i + 1])
        np.testing.assert_array_equal(dense(fm.transform(X[3:50])), dense(Z)[3:50])
    if fm.has(MapCapability.KERNEL_WIDTH):
        assert "gamma" in fm.get_params()
        assert fm._auto_gamma(sp.csr_matrix(X) if sparse else X) > 0
    else:
        assert not fm.has(MapCapability.GAMMA_PATH)


def test_a_kernel_without_a_width_declares_none():
    assert not Nystroem("linear").has(MapCapability.KERNEL_WIDTH)
    assert Nystroem("rbf").has(MapCapability.KERNEL_WIDTH)
    X, y, _ = _data(60, 3)
    with pytest.raises(ValueError, match="kernel width"):
        RidgeCV(gammas=[0.1, 1.0], features=Nystroem("linear", n_components=20)).fit(X, y)


# ------------------------------------------------- one validation, one choice
def test_a_chunked_fit_validates_once_and_chooses_the_backend_once(monkeypatch):
    import randfeat._backends as backends
    import randfeat._core.validation as validation

    counts = {"validations": 0, "backend choices": 0}
    checked, is_dask = validation._checked_structure, backends.is_dask_array

    def counting_check(*args, **kwargs):
        counts["validations"] += 1
        return checked(*args, **kwargs)

    def counting_choice(X):
        counts["backend choices"] += 1
        return is_dask(X)

    monkeypatch.setattr(validation, "_checked_structure", counting_check)
    monkeypatch.setattr(backends, "is_dask_array", counting_choice)
    X, y, _ = _data(1000, 4)
    est = Ridge(alpha=0.1, features=RandomFourierFeatures(64, random_state=0), chunk_size=100)
    est.fit(X, y)
    assert counts == {"validations": 1, "backend choices": 1}
    counts.update({"validations": 0, "backend choices": 0})
    est.predict(X)
    assert counts == {"validations": 1, "backend choices": 1}
    counts.update({"validations": 0, "backend choices": 0})
    RidgeCV(alphas=[0.1, 1.0], gammas=[0.5, 1.0], features=RandomFourierFeatures(64, random_state=0),
            chunk_size=100).fit(X, y)
    assert counts == {"validations": 1, "backend choices": 1}


def test_a_row_dependent_map_with_a_width_is_never_streamed(ArcCosine):
    # RidgeCV's one-pass gamma path streams chunks; a map that does not declare
    # ROW_INDEPENDENT must see all its rows at once there too (pipeline.held_whole).
    class Centred(ArcCosine):
        capabilities = frozenset({MapCapability.KERNEL_WIDTH, MapCapability.GAMMA_PATH})

        def _transform_rows(self, state, X, n_threads):
            Z = super()._transform_rows(state, X, n_threads)
            return Z - Z.mean(axis=0)  # depends on the rows given together

    X, y, _ = _data()
    fm = Centred(100, random_state=3)
    gammas, alphas = [0.1, 1.0], [1e-2, 1.0]
    cv = RidgeCV(alphas=alphas, gammas=gammas, features=fm, chunk_size=50).fit(X, y)
    scores = [sk.RidgeCV(alphas=alphas).fit(clone(fm).set_params(gamma=g).fit_transform(X), y).best_score_
              for g in gammas]
    _close(cv.gamma_scores_, scores, 1e-8)


class _Misbehaving(TransformerMixin, BaseEstimator):
    """A transformer whose output randfeat must refuse: NaN (dense or sparse) or a width that varies."""

    def __init__(self, fault="nan"):
        self.fault = fault

    def fit(self, X, y=None):
        return self

    def transform(self, X):
        Z = np.asarray(X, dtype=np.float64).copy()
        if self.fault == "nan" and len(Z) > 1:
            Z[1, 0] = np.nan
        if self.fault == "sparse-nan":
            Z = sp.csr_matrix(Z + 1.0)
            if Z.shape[0] > 1:
                Z.data[Z.indptr[1]] = np.inf
        if self.fault == "width" and len(Z) > 1:
            Z = Z[:, :-1]
        return Z


@pytest.mark.parametrize("fault, match", [("nan", "NaN"), ("sparse-nan", "infinity"), ("width", "width must not")])
def test_a_transformer_output_randfeat_cannot_use_is_a_clear_error(fault, match):
    X, y, _ = _data(200, 4)
    est = Ridge(alpha=0.1).fit(X, y)
    before = est.coef_.copy()
    with pytest.raises(ValueError, match=match) as info:
        est.set_params(features=_Misbehaving(fault)).fit(X, y)
    assert "the transformer wrapped by TransformerMap" in str(info.value)
    np.testing.assert_array_equal(est.coef_, before)  # the failed fit left the model as it was
