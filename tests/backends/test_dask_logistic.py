"""LogisticRegression on Dask arrays: the in-memory fit, to 1e-8, from blocks whose features stay on the workers.

Both fits run to a tight tolerance (tol=1e-12): the Dask sums are grouped
by blocks, so the two agree to the solvers' tolerance, not bitwise.  The
synchronous scheduler runs the code paths without processes; the few
cluster tests check what only a cluster shows (the client holds no
features; the same bits as one process).
"""

import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression as SkLogisticRegression
from sklearn.utils._param_validation import InvalidParameterError

from randfeat import LogisticRegression, RandomBinningFeatures, RandomFourierFeatures

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")

from _dask_logistic_data import CHUNKS, as_dask as _dask, assert_close as _close, classification_data as _data  # noqa: E402


def _same_model(est, ref, X, Xd, rtol=1e-8):
    np.testing.assert_array_equal(est.classes_, ref.classes_)
    # "auto" for several classes: newton-cg in memory, newton-cholesky on Dask (no held sample there).
    assert est.solver_ == ref.solver_ or (ref.solver_, est.solver_) == ("newton-cg", "newton-cholesky")
    _close(est.coef_, ref.coef_, rtol)
    _close(est.intercept_, ref.intercept_, rtol)
    assert est.objective_ == pytest.approx(ref.objective_, rel=1e-10)
    proba = est.predict_proba(Xd)
    assert isinstance(proba, da.Array)
    _close(proba.compute(), ref.predict_proba(X), rtol)


def rbf():
    return RandomBinningFeatures(n_grids=8, gamma=0.1, random_state=0)  # ~100 bins: a small multinomial Hessian


def rff():
    return RandomFourierFeatures(60, gamma=0.5, random_state=0)


FEATURES = {"none": lambda: None, "fourier": rff, "binning": rbf}


# ------------------------------------------------------------ equal to the in-memory fit
@pytest.mark.parametrize("n_classes", [2, 4])
@pytest.mark.parametrize("features", sorted(FEATURES))
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
def test_equals_in_memory(sync, n_classes, features, fit_intercept, weighted):
    X, y, w = _data(n_classes)
    w = w if weighted else None
    # The same solver on both sides (in memory, "auto" is newton-cg for several classes; on Dask
    # newton-cholesky): the Dask loss against the in-memory one, step for step.
    kw = dict(C=2.0, features=FEATURES[features](), fit_intercept=fit_intercept, tol=1e-12, max_iter=1000,
              class_weight="balanced" if weighted else None, solver="newton-cholesky")
    ref = LogisticRegression(**kw).fit(X, y, sample_weight=w)
    Xd, yd, wd = _dask(X, y, w)
    est = LogisticRegression(**kw).fit(Xd, yd, sample_weight=wd)
    _same_model(est, ref, X, Xd)
    assert est.coef_.shape == ref.coef_.shape == ((1 if n_classes == 2 else n_classes), est.coef_.shape[1])
    np.testing.assert_array_equal(est.predict(Xd).compute(), ref.predict(X))
    _close(est.decision_function(Xd).compute(), ref.decision_function(X))
    if not fit_intercept:
        np.testing.assert_array_equal(est.intercept_, 0.0)


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("features", ["none", "fourier"])
def test_lbfgs_equals_in_memory(sync, n_classes, features):
    X, y, w = _data(n_classes)
    kw = dict(C=0.5, features=FEATURES[features](), solver="lbfgs", tol=1e-12, max_iter=5000)
    ref = LogisticRegression(**kw).fit(X, y, sample_weight=w)
    Xd, yd, wd = _dask(X, y, w)
    _same_model(LogisticRegression(**kw).fit(Xd, yd, sample_weight=wd), ref, X, Xd)


@pytest.mark.parametrize("features", ["none", "fourier", "binning"])
def test_csr_blocks_equal_in_memory_csr(sync, features):
    X, y, _ = _data(3)
    X = np.where(np.abs(X) < 0.7, 0.0, X)
    Xs = sp.csr_matrix(X)
    kw = dict(features=FEATURES[features](), tol=1e-12, max_iter=1000)
    ref = LogisticRegression(**kw).fit(Xs, y)
    Xd = da.from_array(Xs, chunks=(CHUNKS, (5,)), asarray=False)
    assert isinstance(Xd._meta, sp.spmatrix)
    est = LogisticRegression(**kw).fit(Xd, da.from_array(y, chunks=(CHUNKS,)))
    _same_model(est, ref, Xs, Xd)


def test_string_labels_numpy_targets_float32_and_class_weight_dict(sync):
    X, y, w = _data(3)
    labels = np.array(["ant", "bee", "cat"])[y]
    X32 = X.astype(np.float32)
    kw = dict(features=rff(), tol=1e-12, max_iter=1000, class_weight={"bee": 3.0, "cat": 0.5})
    ref = LogisticRegression(**kw).fit(X32, labels, sample_weight=w)
    Xd = da.from_array(X32, chunks=(CHUNKS, (5,)))
    est = LogisticRegression(**kw).fit(Xd, labels, sample_weight=w)  # NumPy y and weights: aligned to X's blocks
    assert est.coef_.dtype == np.float32
    np.testing.assert_array_equal(est.classes_, ["ant", "bee", "cat"])
    _close(est.coef_, ref.coef_, 1e-6)  # float32 attributes
    np.testing.assert_array_equal(est.predict(Xd).compute(), ref.predict(X32))
    assert est.score(Xd, da.from_array(labels, chunks=(CHUNKS,))) == ref.score(X32, labels)


def test_column_y_warns_and_fits_its_labels(sync):
    from sklearn.exceptions import DataConversionWarning

    X, y, _ = _data(3)
    ref = LogisticRegression(features=rff(), tol=1e-12).fit(X, y)
    Xd = _dask(X)[0]
    with pytest.warns(DataConversionWarning, match="column-vector y"):
        est = LogisticRegression(features=rff(), tol=1e-12).fit(Xd, da.from_array(y[:, None], chunks=(CHUNKS, (1,))))
    _same_model(est, ref, X, Xd)


def test_warm_start_and_progress_messages(sync, capsys):
    X, y, _ = _data(2)
    Xd, yd = _dask(X, y)
    est = LogisticRegression(features=rff(), tol=1e-12, warm_start=True, verbose=1).fit(Xd, yd)
    err = capsys.readouterr().err
    assert "newton-cholesky on 4 Dask row blocks" in err and "fit done" in err
    n_first = int(est.n_iter_[0])
    est.fit(Xd, yd)  # from the solution: at most one step
    assert est.n_iter_[0] <= 1 < n_first


# ------------------------------------------------------------ the loss itself
def test_loss_and_sampled_hessian_equal_in_memory(sync, monkeypatch):
    # The Dask loss at any θ is the in-memory LogisticLoss's (f, gradient,
    # Hessian) to rounding, Newton's Hessian summed over the same rows of X
    # (every stride-th, counted from X's first row whatever the blocking).
    from randfeat._backends import dask_logistic
    from randfeat._solvers import logistic
    from randfeat._solvers.pipeline import FeatureSource

    monkeypatch.setattr(logistic, "HESSIAN_ROWS", 64)
    monkeypatch.setattr(logistic, "HESSIAN_ROWS_PER_PARAMETER", 0)
    X, y, w = _data(3)
    for K, labels in ((2, (y > 0).astype(int)), (3, y)):
        fmap = rff().fit(X)
        rows = logistic.DesignRows(FeatureSource(X, fmap, None), True, 100)
        ref = logistic.LogisticLoss(rows, labels, w / w.sum(), K, 1.0 / (2.0 * w.sum()), 1)
        Xd, yd, wd = _dask(X, labels, w)
        blocks = [dask.delayed(dask_logistic._make_block, pure=False)(
            fmap, xb, yb, wb, np.arange(K), K, True, 100, 1, s, ref.stride)
            for xb, yb, wb, s in zip(Xd.to_delayed().ravel(), yd.to_delayed().ravel(), wd.to_delayed().ravel(),
                                     np.cumsum((0,) + CHUNKS[:-1]))]
        loss = dask_logistic.DaskLogisticLoss(list(dask.persist(*blocks)), 700, K, 60, True, 2.0)
        assert loss.stride == ref.stride > 1
        assert loss.n_params == ref.n_params and loss.penalty_mask().shape == ref.penalty_mask().shape
        theta = np.random.default_rng(K).standard_normal(ref.n_params) * 0.3
        for dtype in (np.float32, np.float64):
            loss.hessian_dtype = ref.hessian_dtype = dtype
            f, g, H = loss.evaluate(theta, hessian=True)
            f0, g0, H0 = ref.evaluate(theta, hessian=True)
            assert f == pytest.approx(f0, rel=1e-13)
            _close(g, g0, 1e-12)
            _close(H, H0, 1e-6 if dtype == np.float32 and K == 2 else 1e-12)
        assert loss.evaluate(theta)[2] is None


def test_subsampled_hessian_does_not_change_the_answer(sync, monkeypatch):
    # With a sampled Hessian (stride > 1) in memory and on Dask, both fits
    # converge to the same model as a full Hessian: it only steers the steps.
    from randfeat._solvers import logistic

    X, y, w = _data(3)
    kw = dict(features=rff(), tol=1e-12, max_iter=1000)
    full = LogisticRegression(**kw).fit(X, y, sample_weight=w)
    monkeypatch.setattr(logistic, "HESSIAN_ROWS", 300)  # every other row
    monkeypatch.setattr(logistic, "HESSIAN_ROWS_PER_PARAMETER", 0)
    ref = LogisticRegression(**kw).fit(X, y, sample_weight=w)
    Xd, yd, wd = _dask(X, y, w)
    est = LogisticRegression(**kw).fit(Xd, yd, sample_weight=wd)
    assert est.n_iter_[0] > full.n_iter_[0]  # the sampled Hessian did steer (less well)
    for model in (ref, est):
        _close(model.coef_, full.coef_)
        _close(model.intercept_, full.intercept_)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_escalation_to_every_row_takes_the_same_steps(sync, monkeypatch, capsys, n_classes):
    # Newton's last steps sum every row's Hessian (newton_cholesky's escalation) on Dask as in memory.
    from randfeat._solvers import logistic

    X, y, w = _data(n_classes)
    monkeypatch.setattr(logistic, "HESSIAN_ROWS", 150)
    monkeypatch.setattr(logistic, "HESSIAN_ROWS_PER_PARAMETER", 0)
    monkeypatch.setattr(logistic, "QUADRATIC_DECREMENT", np.inf)
    monkeypatch.setattr(logistic, "_every_row_pays", lambda *args: True)
    kw = dict(features=rff(), solver="newton-cholesky", tol=1e-10, max_iter=1000, verbose=1)
    ref = LogisticRegression(**kw).fit(X, y, sample_weight=w)
    Xd, yd, wd = _dask(X, y, w)
    est = LogisticRegression(**kw).fit(Xd, yd, sample_weight=wd)
    assert capsys.readouterr().err.count("summed over every row") == 2  # once in each fit
    assert est.n_iter_[0] == ref.n_iter_[0]
    _close(est.coef_, ref.coef_)
    _close(est.intercept_, ref.intercept_)


# ------------------------------------------------------------ scikit-learn's objective
@pytest.mark.parametrize("n_classes", [2, 10])
@pytest.mark.parametrize("C", [0.01, 100.0])
def test_objective_equals_sklearn_on_materialised_features(sync, n_classes, C):
    X, y, _ = _data(n_classes, n=1000)
    Xd, yd = _dask(X, y, chunks=(400, 350, 250))
    est = LogisticRegression(C=C, features=rff(), tol=1e-10, max_iter=10000).fit(Xd, yd)
    Z = est.features_.transform(X)
    ref = SkLogisticRegression(C=C, tol=1e-10, max_iter=10000).fit(Z, y)

    def objective(coef, intercept):
        F = Z @ coef.T + intercept
        if F.shape[1] == 1:
            loss = np.logaddexp(0, F[:, 0]) - y * F[:, 0]
        else:
            top = F.max(axis=1)
            loss = top + np.log(np.exp(F - top[:, None]).sum(axis=1)) - F[np.arange(len(y)), y]
        return C * loss.sum() + 0.5 * np.sum(coef**2)

    ours, theirs = objective(est.coef_, est.intercept_), objective(ref.coef_, ref.intercept_)
    assert abs(ours - theirs) <= 1e-6 * theirs
    assert est.objective_ == pytest.approx(ours, rel=1e-10)
    np.testing.assert_allclose(est.predict_proba(Xd).compute(), ref.predict_proba(Z), atol=1e-4)


# ------------------------------------------------------------ bad input
def _bad(kind, X, y, w):
    """(estimator parameters, y, sample_weight, match) of one kind of bad input (Dask arrays)."""
    if kind == "single class":
        return {}, np.zeros_like(y), None, "at least 2 classes"
    if kind in ("nan weight", "inf weight", "negative weight"):
        w = w.copy()
        w[600] = {"nan weight": np.nan, "inf weight": np.inf, "negative weight": -1.0}[kind]
        return {}, y, w, "sample_weight must be finite and non-negative"
    if kind == "zero weights":
        return {}, y, np.zeros_like(w), "zero for every sample"
    if kind == "C zero":
        return {"C": 0.0}, y, None, "'C' parameter"
    if kind == "absent class_weight":
        return {"class_weight": {7: 2.0}}, y, None, "class_weight names"
    if kind == "mixed labels":
        mixed = y.astype(object)
        mixed[y == 1] = "one"
        return {}, mixed, None, "mixes labels of different types"
    if kind == "multilabel":
        return {}, np.stack([y, y], axis=1), None, "1-D array of class labels"
    if kind == "newton-cg":
        return {"solver": "newton-cg"}, y, None, "newton-cg' is not available on Dask"
    raise AssertionError(kind)


BAD = ["single class", "nan weight", "inf weight", "negative weight", "zero weights", "C zero",
       "absent class_weight", "mixed labels", "multilabel", "newton-cg"]


@pytest.mark.parametrize("kind", BAD)
def test_bad_input_clear_error_fitted_model_unchanged(sync, kind):
    X, y, w = _data(3)
    est = LogisticRegression(features=rff()).fit(*_dask(X, y))
    before = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in vars(est).items()}
    params, yb, wb, match = _bad(kind, X, y, w)
    est.set_params(**params)
    Xd = _dask(X)[0]
    yd = da.from_array(yb, chunks=(CHUNKS,) + tuple((s,) for s in yb.shape[1:]))
    with pytest.raises((ValueError, InvalidParameterError), match=match):
        est.fit(Xd, yd, sample_weight=None if wb is None else da.from_array(wb, chunks=(CHUNKS,)))
    assert set(vars(est)) == set(before)
    for k, v in before.items():
        if isinstance(v, np.ndarray):
            np.testing.assert_array_equal(vars(est)[k], v)


# ------------------------------------------------------------ where the work runs
def test_features_made_once_per_block_in_the_block_task(sync, monkeypatch):
    # Each block's features are made once, by the task that makes the block
    # (on its worker), and held there: never again per pass, never for all
    # of X at once on the client.
    calls = []
    original = RandomFourierFeatures._transform_validated

    def counting(self, Xb):
        calls.append(Xb.shape[0])
        return original(self, Xb)

    monkeypatch.setattr(RandomFourierFeatures, "_transform_validated", counting)
    X, y, _ = _data(2)
    est = LogisticRegression(features=rff(), tol=1e-12).fit(*_dask(X, y))
    assert est.n_iter_[0] > 3
    assert sorted(calls) == sorted(CHUNKS)


def test_cluster_same_bits_as_one_process(cluster_client):
    X, y, w = _data(3, n=2000)
    Xd, yd, wd = _dask(X, y, w, chunks=(500, 600, 400, 500))
    kw = dict(features=rff(), tol=1e-12, class_weight="balanced")
    with dask.config.set(scheduler="synchronous"):
        ref = LogisticRegression(**kw).fit(Xd, yd, sample_weight=wd)
    est = LogisticRegression(**kw).fit(Xd, yd, sample_weight=wd)
    np.testing.assert_array_equal(est.coef_, ref.coef_)  # the same block-order sums, on two workers
    np.testing.assert_array_equal(est.n_iter_, ref.n_iter_)
    _close(est.coef_, LogisticRegression(**kw).fit(X, y, sample_weight=w).coef_)
    # bad input found on a worker: the same clear error, the fitted model unchanged
    coef = est.coef_.copy()
    w[1700] = np.nan
    with pytest.raises(ValueError, match="sample_weight must be finite and non-negative"):
        est.fit(Xd, yd, sample_weight=da.from_array(w, chunks=wd.chunks))
    np.testing.assert_array_equal(est.coef_, coef)


def test_cluster_client_holds_no_features(cluster_client):
    # 480 MB of features held on the workers; the fit must not bring them (or X) to the client.
    n, d, D = 300_000, 10, 200
    Xd = da.random.default_rng(0).standard_normal((n, d), chunks=(50_000, d)).persist()
    yd = (Xd[:, 0] + np.sin(2 * Xd[:, 1]) > 0).astype(int).persist()
    distributed.wait([Xd, yd])
    tracemalloc.start()
    try:
        clf = LogisticRegression(features=RandomFourierFeatures(D, gamma=0.05, random_state=0)).fit(Xd, yd)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert n * D * 8 == 480_000_000
    assert peak < 30 * 2**20, f"client allocated {peak / 2**20:.0f} MB while fitting on 480 MB of held features"
    assert clf.score(Xd[:20_000], yd[:20_000]) > 0.75  # learned something (chance: about 0.5)
    # the first block alone, on the client and on the cluster: the same model
    X0, y0 = Xd[:50_000].compute(), yd[:50_000].compute()
    kw = dict(features=RandomFourierFeatures(D, gamma=0.05, random_state=0), tol=1e-10)
    ref = LogisticRegression(**kw).fit(X0, y0)
    _close(LogisticRegression(**kw).fit(Xd[:50_000], yd[:50_000]).coef_, ref.coef_)


def test_threaded_scheduler_same_bits_as_synchronous():
    # Blocks evaluated at once by the threads of the local scheduler: the
    # tree sums them in block order, so the fit is the same bits.
    X, y, w = _data(3)
    Xd, yd, wd = _dask(X, y, w)
    kw = dict(features=rff(), tol=1e-12)
    with dask.config.set(scheduler="synchronous"):
        ref = LogisticRegression(**kw).fit(Xd, yd, sample_weight=wd)
    with dask.config.set(scheduler="threads", num_workers=4):
        est = LogisticRegression(**kw).fit(Xd, yd, sample_weight=wd)
    np.testing.assert_array_equal(est.coef_, ref.coef_)
    np.testing.assert_array_equal(est.intercept_, ref.intercept_)


def test_auto_on_dask_reaches_the_in_memory_auto_model(sync):
    # Different solvers under "auto" (newton-cg in memory for 4 classes, newton-cholesky on Dask), one optimum.
    X, y, _ = _data(4)
    ref = LogisticRegression(C=2.0, tol=1e-12, max_iter=1000).fit(X, y)
    est = LogisticRegression(C=2.0, tol=1e-12, max_iter=1000).fit(*_dask(X, y))
    assert (ref.solver_, est.solver_) == ("newton-cg", "newton-cholesky")
    _close(est.coef_, ref.coef_, rtol=1e-8)
    _close(est.predict_proba(X), ref.predict_proba(X), rtol=1e-8)
