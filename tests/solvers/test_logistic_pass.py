"""The fused binary logistic pass (``_ext._logistic_fast``) against a NumPy reference."""

import numpy as np
import pytest
from scipy.special import expit

from randfeat._ext._logistic_fast import binary_logistic_pass, n_chunks
from randfeat._linalg.products import row_products


def _pass(Z, coef, b, y, w, n_threads):
    N, d = Z.shape
    C = n_chunks(N)
    F, part_loss, part_resid, part_grad = np.empty(N), np.empty(C), np.empty(C), np.empty((C, d))
    binary_logistic_pass(Z, coef, b, y, w, F, part_loss, part_grad, part_resid, n_threads)
    return F, part_loss.sum(), part_grad.sum(axis=0), part_resid.sum()


def _data(N, d, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((N, d))
    coef = scale * rng.standard_normal(d)
    y = (rng.random(N) < 0.4).astype(np.float64)
    w = rng.uniform(0.2, 2.0, N)
    return Z, coef, y, w


@pytest.mark.kernel
@pytest.mark.parametrize("N, d", [(1, 1), (255, 7), (256, 30), (1000, 123), (3000, 500)])
def test_matches_numpy(N, d):
    Z, coef, y, w = _data(N, d)
    F, loss, grad, resid = _pass(Z, coef, 0.3, y, w, 2)
    f = Z @ coef + 0.3
    # The scores are row_products' (row-independent) ones, bit for bit, plus the intercept.
    np.testing.assert_array_equal(F, row_products(Z, coef[:, None], 2)[:, 0] + 0.3)
    r = w * (expit(f) - y)
    np.testing.assert_allclose(F, f, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(loss, np.dot(w, np.logaddexp(0.0, f) - y * f), rtol=1e-12)
    np.testing.assert_allclose(grad, Z.T @ r, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(resid, r.sum(), rtol=1e-10, atol=1e-12)


@pytest.mark.kernel
def test_large_scores_stay_finite():
    # Scores of ±800: e^f overflows, the stable forms do not.
    Z, coef, y, w = _data(600, 20, seed=1, scale=200.0)
    F, loss, grad, resid = _pass(Z, coef, 0.0, y, w, 2)
    assert np.all(np.isfinite(F)) and np.abs(F).max() > 700
    f = Z @ coef
    np.testing.assert_allclose(loss, np.dot(w, np.logaddexp(0.0, f) - y * f), rtol=1e-12)
    np.testing.assert_allclose(grad, Z.T @ (w * (expit(f) - y)), rtol=1e-10, atol=1e-8)
    assert np.isfinite(resid)


@pytest.mark.kernel
def test_same_bits_for_any_thread_count():
    Z, coef, y, w = _data(2000, 64, seed=2)
    first = _pass(Z, coef, -0.1, y, w, 1)
    for n_threads in (2, 3, 5):
        for a, b in zip(first, _pass(Z, coef, -0.1, y, w, n_threads)):
            assert np.asarray(a).tobytes() == np.asarray(b).tobytes()


def test_inconsistent_shapes_are_rejected():
    Z, coef, y, w = _data(300, 5)
    C = n_chunks(300)
    args = dict(F=np.empty(300), part_loss=np.empty(C), part_grad=np.empty((C, 5)), part_resid=np.empty(C))
    with pytest.raises(ValueError, match="inconsistent shapes"):
        binary_logistic_pass(Z, coef[:4], 0.0, y, w, *args.values(), 1)
    with pytest.raises(ValueError, match="partial-sum arrays"):
        binary_logistic_pass(Z, coef, 0.0, y, w, args["F"], np.empty(C + 1), args["part_grad"], args["part_resid"], 1)
    with pytest.raises(ValueError, match="partial-sum arrays"):
        binary_logistic_pass(Z, coef, 0.0, y, w, args["F"], args["part_loss"], np.empty((C, 4)), args["part_resid"], 1)


def test_no_rows_and_no_features():
    C = n_chunks(0)
    binary_logistic_pass(np.empty((0, 3)), np.zeros(3), 0.0, np.empty(0), np.empty(0), np.empty(0),
                         np.empty(C), np.empty((C, 3)), np.empty(C), 2)
    _, _, y, w = _data(300, 1)
    C = n_chunks(300)
    F, part_loss, part_resid = np.empty(300), np.empty(C), np.empty(C)
    binary_logistic_pass(np.empty((300, 0)), np.empty(0), 0.5, y, w, F, part_loss, np.empty((C, 0)), part_resid, 2)
    np.testing.assert_array_equal(F, 0.5)
    np.testing.assert_allclose(part_loss.sum(), np.dot(w, np.logaddexp(0.0, 0.5) - y * 0.5), rtol=1e-12)
