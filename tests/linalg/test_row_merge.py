"""Identical feature rows merged into weighted rows: the same ridge problem (``_linalg/rowmerge.py``)."""

import numpy as np
import pytest
import scipy.sparse as sp

import randfeat._linalg.rowmerge as rowmerge
from randfeat import RandomBinningFeatures, Ridge, RidgeClassifier
from randfeat._linalg.rowmerge import merge_identical_rows, merged_problem


def repeated_binning(n=3000, seed=0, dtype=np.float64):
    """Binning features of integer data: many identical rows."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 4, size=(n, 3)).astype(dtype)
    y = X[:, 0] - 0.5 * X[:, 1] + 0.3 * rng.standard_normal(n)
    Z = RandomBinningFeatures(10, gamma=0.5, random_state=seed).fit_transform(X)
    return Z, y, X


def normal_solution(Z, Y, w, alpha, fit_intercept):
    """Direct solve of the weighted ridge normal equations (reference)."""
    Zd = Z.toarray().astype(np.float64)
    w = np.ones(Zd.shape[0]) if w is None else w
    if fit_intercept:
        mu = w @ Zd / w.sum()
        ybar = w @ Y / w.sum()
        Zd, Y = Zd - mu, Y - ybar
    A = Zd.T @ (w[:, None] * Zd) + alpha * np.eye(Zd.shape[1])
    return np.linalg.solve(A, Zd.T @ (w[:, None] * Y)).T


def test_groups_weights_and_targets():
    Z, y, X = repeated_binning(n=500)
    rng = np.random.default_rng(1)
    Y = np.column_stack([y, rng.standard_normal(len(y))])
    w = rng.uniform(0.5, 2.0, len(y))
    Zm, Ym, wm = merge_identical_rows(Z, Y, w)
    # Distinct rows, in order of first appearance.
    dense = Z.toarray()
    _, first = np.unique(dense, axis=0, return_index=True)
    np.testing.assert_array_equal(Zm.toarray(), dense[np.sort(first)])
    for r, row in enumerate(Zm.toarray()):
        members = np.flatnonzero(np.all(dense == row, axis=1))
        assert wm[r] == pytest.approx(w[members].sum(), rel=1e-12)
        np.testing.assert_allclose(Ym[r], (w[members] @ Y[members]) / w[members].sum(), rtol=1e-12)
    # The weighted sums a ridge fit uses are the same.
    np.testing.assert_allclose(Zm.T @ (wm[:, None] * Ym), Z.T @ (w[:, None] * Y), rtol=1e-10)
    np.testing.assert_allclose((Zm.T @ sp.diags(wm) @ Zm).toarray(), (Z.T @ sp.diags(w) @ Z).toarray(),
                               rtol=1e-10)


def test_zero_weight_group_contributes_nothing():
    Z, y, _ = repeated_binning(n=400)
    w = np.ones(len(y))
    row = Z[0].toarray()
    same = np.flatnonzero(np.all(Z.toarray() == row, axis=1))
    w[same] = 0.0
    Zm, Ym, wm = merge_identical_rows(Z, y[:, None], w)
    assert wm[0] == 0.0 and Ym[0, 0] == 0.0 and np.all(np.isfinite(Ym))


def test_no_merge_without_repeats_or_fixed_row_length():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3000, 5))  # continuous: no two rows share every bin at this gamma
    Z = RandomBinningFeatures(20, gamma=2.0, random_state=0).fit_transform(X)
    assert merge_identical_rows(Z, np.ones((3000, 1)), None) is None
    ragged = sp.csr_matrix(np.array([[1.0, 0, 1], [1.0, 0, 1], [0, 1.0, 0]]))
    assert merge_identical_rows(ragged, np.ones((3, 1)), None) is None
    dense = np.ones((4, 2))
    assert merged_problem(dense, np.ones((4, 1)), None)[3] is None
    # Equal indices but other values: rows are told apart by their values
    # only in the exact check, which then declines to merge at all.
    A = sp.csr_matrix(np.array([[1.0, 2.0], [1.0, 3.0], [1.0, 2.0]]))
    assert merge_identical_rows(A, np.ones((3, 1)), None) is None


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_ridge_cg_on_merged_rows_is_the_same_problem(fit_intercept, weighted, dtype, monkeypatch):
    Z, y, _ = repeated_binning(n=3000, dtype=dtype)
    w = np.random.default_rng(3).uniform(0.5, 2.0, len(y)) if weighted else None
    assert merge_identical_rows(Z, y[:, None], w) is not None  # the case under test merges
    kw = dict(alpha=0.3, solver="cg", tol=1e-10, fit_intercept=fit_intercept)
    merged = Ridge(**kw).fit(Z, y, sample_weight=w)
    ref = normal_solution(Z, y[:, None].astype(np.float64), w, 0.3, fit_intercept)[0]
    tol = 1e-4 if dtype == np.float32 else 1e-6  # CG's tol 1e-10 on the residual, through the conditioning
    np.testing.assert_allclose(merged.coef_, ref, rtol=0, atol=tol * np.abs(ref).max())
    monkeypatch.setattr(rowmerge, "MIN_REPEATED_SHARE", 2.0)  # never merge
    unmerged = Ridge(**kw).fit(Z, y, sample_weight=w)
    np.testing.assert_allclose(merged.coef_, unmerged.coef_, rtol=0, atol=tol * np.abs(ref).max())
    np.testing.assert_allclose(merged.intercept_, unmerged.intercept_, rtol=0, atol=tol * max(1.0, abs(y).max()))
    # The same preconditioner (its block is sized by the unmerged problem), so
    # the same iterates in exact arithmetic; rounding (sums grouped otherwise)
    # moves the count at tol 1e-10 by a few of ~55.
    assert merged.preconditioner_ == unmerged.preconditioner_
    assert abs(int(merged.n_iter_[0]) - int(unmerged.n_iter_[0])) <= 0.1 * unmerged.n_iter_[0]


def test_classifier_with_repeated_rows_and_n_jobs_bit_identity():
    Z, y, X = repeated_binning(n=4000)
    labels = np.digitize(y, [-1.0, 0.5, 2.0])
    fits = [RidgeClassifier(alpha=1.0, solver="cg", n_jobs=j).fit(Z, labels) for j in (1, 2)]
    np.testing.assert_array_equal(fits[0].coef_, fits[1].coef_)
    np.testing.assert_array_equal(fits[0].n_iter_, fits[1].n_iter_)
    assert np.mean(fits[0].predict(Z) == labels) > 0.5
