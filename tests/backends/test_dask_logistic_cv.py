"""LogisticRegressionCV on Dask arrays: the in-memory selection, to 1e-8, from blocks whose features stay on the workers.

Both sides run to a tight tolerance (tol=1e-12): the folds are the same
(scikit-learn's ``check_cv`` on the same labels), a fold's training set on
Dask is the blocks with the held-out rows weighing 0, and the sums are
grouped by blocks, so the two agree to the solvers' tolerance, not bitwise.
The synchronous scheduler runs the code paths without processes; one
cluster test checks what only a cluster shows.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import log_loss
from sklearn.model_selection import KFold
from sklearn.utils._param_validation import InvalidParameterError

from randfeat import LogisticRegressionCV, RandomBinningFeatures, RandomFourierFeatures

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
pytest.importorskip("distributed")

from _dask_logistic_data import CHUNKS, as_dask as _dask, assert_close as _close, classification_data as _data  # noqa: E402


def rff():
    return RandomFourierFeatures(40, gamma=0.5, random_state=0)


def rbf():
    return RandomBinningFeatures(n_grids=6, gamma=0.1, random_state=0)


FEATURES = {"none": lambda: None, "fourier": rff, "binning": rbf}
TIGHT = dict(tol=1e-12, max_iter=1000)


def _same_selection(est, ref, X, Xd, rtol=1e-8, score_rtol=1e-9):
    """Every fitted attribute of the Dask fit equals the in-memory one's (scores to score_rtol, models to rtol)."""
    np.testing.assert_array_equal(est.classes_, ref.classes_)
    np.testing.assert_array_equal(est.Cs_, ref.Cs_)
    np.testing.assert_allclose(est.C_, ref.C_, rtol=1e-12)
    assert est.scores_.keys() == ref.scores_.keys() and est.coefs_paths_.keys() == ref.coefs_paths_.keys()
    for c in ref.scores_:
        np.testing.assert_allclose(est.scores_[c], ref.scores_[c], rtol=score_rtol, atol=1e-12)
        _close(est.coefs_paths_[c], ref.coefs_paths_[c], rtol)
    assert est.n_iter_.shape == ref.n_iter_.shape and est.n_iter_.dtype == ref.n_iter_.dtype
    _close(est.coef_, ref.coef_, rtol)
    _close(est.intercept_, ref.intercept_, rtol)
    for name in ("gamma_", "gammas_", "gamma_scores_"):
        assert hasattr(est, name) == hasattr(ref, name)
        if hasattr(ref, name):
            np.testing.assert_allclose(getattr(est, name), getattr(ref, name), rtol=1e-9)
    proba = est.predict_proba(Xd)
    assert isinstance(proba, da.Array)
    _close(proba.compute(), ref.predict_proba(X), rtol)


# ------------------------------------------------------------ equal to the in-memory selection
@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("features", sorted(FEATURES))
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_equals_in_memory(sync, n_classes, features, fit_intercept):
    X, y, _ = _data(n_classes)
    kw = dict(Cs=4, features=FEATURES[features](), fit_intercept=fit_intercept, **TIGHT)
    ref = LogisticRegressionCV(**kw).fit(X, y)
    Xd, yd = _dask(X, y)
    est = LogisticRegressionCV(**kw).fit(Xd, yd)
    _same_selection(est, ref, X, Xd)
    np.testing.assert_array_equal(est.n_iter_, ref.n_iter_)  # the same Newton path, fold by fold
    if not fit_intercept:
        np.testing.assert_array_equal(est.intercept_, 0.0)


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("class_weight", [None, "balanced", "dict"])
def test_sample_and_class_weights_equal_in_memory(sync, n_classes, class_weight):
    X, y, w = _data(n_classes)
    cw = {0: 2.0, 1: 0.5} if class_weight == "dict" else class_weight
    kw = dict(Cs=[0.1, 10.0, 1.0], features=rff(), class_weight=cw, **TIGHT)
    ref = LogisticRegressionCV(**kw).fit(X, y, sample_weight=w)
    Xd, yd, wd = _dask(X, y, w)
    _same_selection(LogisticRegressionCV(**kw).fit(Xd, yd, sample_weight=wd), ref, X, Xd)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_refit_false_lbfgs_and_scorers_equal_in_memory(sync, n_classes):
    X, y, w = _data(n_classes)
    Xd, yd, wd = _dask(X, y, w)

    def neg_loss(model, F, y_true, sample_weight=None):  # a callable scorer: it sees the fold's model
        return -log_loss(y_true, model.predict_proba(F), sample_weight=sample_weight, labels=model.classes_)

    # L-BFGS stops on scikit-learn's ftol (a relative decrease of 64 eps) before tol=1e-12 when the problem
    # is ill conditioned: for 3 classes at C = 10 each side stops ~1e-6 from the optimum, so the two agree to
    # that only (measured 6e-7).  At C <= 0.5 both reach it: compared to 1e-8 there, models and scores alike
    # (where it stops still moves with the gradient's rounding: the scores differed by 2e-9 relative once the
    # in-memory gradient was summed by chunks of 256 rows, not by the Dask blocks' BLAS products).
    lbfgs = dict(solver="lbfgs", scoring="neg_log_loss", Cs=[0.05, 0.5, 0.2], max_iter=5000)
    for kw in (dict(refit=False), lbfgs, dict(scoring=neg_loss), dict(scoring="balanced_accuracy", refit=False)):
        score_rtol = 1e-8 if kw is lbfgs else 1e-9
        kw = {**dict(Cs=3, features=rff(), **TIGHT), **kw}
        ref = LogisticRegressionCV(**kw).fit(X, y, sample_weight=w)
        _same_selection(LogisticRegressionCV(**kw).fit(Xd, yd, sample_weight=wd), ref, X, Xd, score_rtol=score_rtol)


@pytest.mark.parametrize("cv", ["kfold", "pairs", 3])
def test_cv_splitters_equal_in_memory(sync, cv):
    X, y, _ = _data(2)
    if cv == "kfold":
        cv = KFold(4, shuffle=True, random_state=0)
    elif cv == "pairs":  # test rows out of order: the scores must pair each value with its row
        rng = np.random.default_rng(0)
        order = rng.permutation(len(y))
        cv = [(np.setdiff1d(np.arange(len(y)), order[:200]), order[:200]),
              (np.setdiff1d(np.arange(len(y)), order[200:450]), order[200:450])]
    kw = dict(Cs=3, cv=cv, scoring="neg_log_loss", features=rff(), **TIGHT)
    ref = LogisticRegressionCV(**kw).fit(X, y)
    Xd, yd = _dask(X, y)
    est = LogisticRegressionCV(**kw).fit(Xd, yd)
    _same_selection(est, ref, X, Xd)


@pytest.mark.parametrize("gammas", [[0.05, 0.5, 5.0], "auto"])
@pytest.mark.parametrize("refit", [True, False])
def test_gammas_equal_in_memory(sync, gammas, refit):
    X, y, _ = _data(3)
    kw = dict(Cs=3, gammas=gammas, refit=refit, features=rff(), **TIGHT)
    ref = LogisticRegressionCV(**kw).fit(X, y)
    Xd, yd = _dask(X, y)
    est = LogisticRegressionCV(**kw).fit(Xd, yd)
    _same_selection(est, ref, X, Xd)
    np.testing.assert_array_equal(est.features_.transform(X), ref.features_.transform(X))


def test_binning_gammas_fitted_per_gamma_from_the_blocks(sync):
    X, y, _ = _data(2)
    kw = dict(Cs=2, gammas=[0.05, 0.2], features=rbf(), **TIGHT)
    ref = LogisticRegressionCV(**kw).fit(X, y)
    Xd, yd = _dask(X, y)
    _same_selection(LogisticRegressionCV(**kw).fit(Xd, yd), ref, X, Xd)


def test_float32_and_string_labels(sync):
    X, y, w = _data(3)
    labels = np.array(["ant", "bee", "cat"])[y]
    X32 = X.astype(np.float32)
    kw = dict(Cs=3, features=rff(), **TIGHT)
    ref = LogisticRegressionCV(**kw).fit(X32, labels, sample_weight=w)
    Xd = da.from_array(X32, chunks=(CHUNKS, (5,)))
    est = LogisticRegressionCV(**kw).fit(Xd, labels, sample_weight=w)  # NumPy y and weights, aligned to X
    assert est.coef_.dtype == np.float32
    np.testing.assert_array_equal(est.classes_, ref.classes_)
    for c in ref.scores_:
        np.testing.assert_allclose(est.scores_[c], ref.scores_[c], rtol=1e-9)
    _close(est.coef_, ref.coef_, 1e-6)  # float32 attributes


@pytest.mark.parametrize("features", ["none", "fourier"])
def test_csr_blocks_and_a_column_y_equal_in_memory(sync, features):
    from sklearn.exceptions import DataConversionWarning

    X, y, _ = _data(3)
    Xs = sp.csr_matrix(np.where(np.abs(X) < 0.7, 0.0, X))
    kw = dict(Cs=3, features=FEATURES[features](), **TIGHT)
    ref = LogisticRegressionCV(**kw).fit(Xs, y)
    Xd = da.from_array(Xs, chunks=(CHUNKS, (5,)), asarray=False)
    with pytest.warns(DataConversionWarning, match="column-vector y"):
        est = LogisticRegressionCV(**kw).fit(Xd, da.from_array(y[:, None], chunks=(CHUNKS, (1,))))
    _same_selection(est, ref, Xs, Xd)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_sampled_hessian_steers_as_in_memory_at_the_default_tol(sync, monkeypatch, n_classes):
    # With a sampled Hessian (stride > 1) each fold's Newton steps read the same rows as the in-memory
    # fold's (every stride-th training row), so even at the default tol=1e-4 the two take the same steps:
    # the same iterations and choice, the models as close as the float32 Hessian's sums (grouped by blocks
    # here, by chunks in memory) let unconverged iterates be (measured: 1e-5 relative at C = 1e4).
    from randfeat._solvers import logistic

    monkeypatch.setattr(logistic, "HESSIAN_ROWS", 150)
    monkeypatch.setattr(logistic, "HESSIAN_ROWS_PER_PARAMETER", 0)
    X, y, w = _data(n_classes)
    kw = dict(Cs=4, features=rff(), solver="newton-cholesky", cv=KFold(3, shuffle=True, random_state=0))
    ref = LogisticRegressionCV(**kw).fit(X, y, sample_weight=w)
    Xd, yd, wd = _dask(X, y, w)
    est = LogisticRegressionCV(**kw).fit(Xd, yd, sample_weight=wd)
    np.testing.assert_array_equal(est.n_iter_, ref.n_iter_)
    _same_selection(est, ref, X, Xd, rtol=1e-4)


# ------------------------------------------------------------ where the work runs
def test_features_made_once_per_block(sync, monkeypatch):
    # Each block's features are made once (in the task that makes the block, on its worker) and
    # shared by every fold, every C and the refit: never per fold, never for all of X on the client.
    calls = []
    original = RandomFourierFeatures._transform_validated

    def counting(self, Xb):
        calls.append(Xb.shape[0])
        return original(self, Xb)

    monkeypatch.setattr(RandomFourierFeatures, "_transform_validated", counting)
    X, y, _ = _data(2)
    est = LogisticRegressionCV(Cs=3, features=rff(), **TIGHT).fit(*_dask(X, y))
    assert est.n_iter_.sum() > 15
    assert sorted(calls) == sorted(CHUNKS)


def test_progress_messages(sync, capsys):
    X, y, _ = _data(2)
    LogisticRegressionCV(Cs=2, features=rff(), verbose=1).fit(*_dask(X, y))
    err = capsys.readouterr().err
    assert "fold 5: 2 Cs fitted (newton-cholesky" in err and "Dask row blocks" in err and "selected" in err


def test_cluster_same_bits_as_one_process(cluster_client):
    X, y, w = _data(3, n=1500)
    Xd, yd, wd = _dask(X, y, w, chunks=(500, 600, 400))
    kw = dict(Cs=3, features=rff(), class_weight="balanced", **TIGHT)
    with dask.config.set(scheduler="synchronous"):
        ref = LogisticRegressionCV(**kw).fit(Xd, yd, sample_weight=wd)
    est = LogisticRegressionCV(**kw).fit(Xd, yd, sample_weight=wd)
    np.testing.assert_array_equal(est.coef_, ref.coef_)  # the same block-order sums, on two workers
    np.testing.assert_array_equal(est.scores_[0], ref.scores_[0])
    np.testing.assert_array_equal(est.n_iter_, ref.n_iter_)
    _close(est.coef_, LogisticRegressionCV(**kw).fit(X, y, sample_weight=w).coef_)
    # bad input found on a worker: the same clear error, the fitted model unchanged
    coef = est.coef_.copy()
    Xbad = X.copy()
    Xbad[1200, 2] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):
        est.fit(da.from_array(Xbad, chunks=Xd.chunks), yd, sample_weight=wd)
    np.testing.assert_array_equal(est.coef_, coef)


# ------------------------------------------------------------ bad input
def _bad(kind, X, y, w):
    """(estimator parameters, X, y, sample_weight, match) of one kind of bad input (Dask arrays)."""
    Xd, yd, wd = _dask(X, y, w)
    if kind == "y chunks unlike X's":
        return {}, Xd, da.from_array(y, chunks=350), None, "row chunks .* differ from X's"
    if kind == "NaN in a block":
        Xb = X.copy()
        Xb[600, 1] = np.nan
        return {}, _dask(Xb)[0], yd, None, "Input X contains NaN"
    if kind == "NaN weight":
        wb = w.copy()
        wb[600] = np.nan
        return {}, Xd, yd, _dask(X, wb)[1], "sample_weight must be finite and non-negative"
    if kind == "single class":
        return {}, Xd, _dask(X, np.zeros_like(y))[1], None, "at least 2 classes"
    if kind == "newton-cg":
        return {"solver": "newton-cg"}, Xd, yd, None, "newton-cg' is not available on Dask"
    if kind == "balanced, a class of zero weights":
        return {"class_weight": "balanced"}, Xd, yd, _dask(X, np.where(y == 1, 0.0, w))[1], \
            r"class_weight='balanced' .* class\(es\) \[1\]"
    if kind == "a fold without weight":
        return {"cv": KFold(2)}, Xd, yd, _dask(X, np.r_[np.zeros(350), np.ones(350)])[1], \
            "training rows of fold 2 sum to 0"
    if kind == "Cs out of range":
        return {"Cs": [1.0, -1.0]}, Xd, yd, None, "Cs"
    if kind == "C times the weights overflows":
        return {"Cs": [1.0, 1e300]}, Xd, yd, _dask(X, np.full(700, 1e10))[1], "C times the total sample weight"
    if kind == "gammas without a kernel width":
        return {"gammas": [0.1], "features": None}, Xd, yd, None, "needs a feature map with a kernel width"
    raise AssertionError(kind)


BAD = ["y chunks unlike X's", "NaN in a block", "NaN weight", "single class", "newton-cg",
       "balanced, a class of zero weights", "a fold without weight", "Cs out of range",
       "C times the weights overflows", "gammas without a kernel width"]


@pytest.mark.parametrize("kind", BAD)
def test_bad_input_clear_error_fitted_model_unchanged(sync, kind):
    X, y, w = _data(2)
    est = LogisticRegressionCV(Cs=2, features=rff()).fit(*_dask(X, y))
    before = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in vars(est).items()}
    scores = est.scores_[1].copy()
    params, Xb, yb, wb, match = _bad(kind, X, y, w)
    good = {k: getattr(est, k) for k in params}
    est.set_params(**params)
    with pytest.raises((ValueError, InvalidParameterError), match=match):
        est.fit(Xb, yb, sample_weight=wb)
    est.set_params(**good)
    assert set(vars(est)) == set(before)
    for k, v in before.items():
        if isinstance(v, np.ndarray):
            np.testing.assert_array_equal(vars(est)[k], v)
    np.testing.assert_array_equal(est.scores_[1], scores)
