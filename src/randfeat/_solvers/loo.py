"""Leave-one-out residuals from one eigendecomposition, and the scores they give.

For ridge with an unpenalised intercept, weights w and hat matrix H_α (of
the √w-scaled problem), the leave-one-out residual of row i is

    e_i(α) = r_i(α) / (1 − h_ii(α)),

r_i the ordinary residual of the fit on all rows (Golub, Heath & Wahba
1979; the closed form scikit-learn's ``RidgeCV`` uses).  One
eigendecomposition (``eigen.py``) gives r and h for every α: on the gram
path a second streaming pass forms P = Z_cV chunk by chunk and gives the
fitted values P diag(1/(λ+α)) u and the leverages
h_ii = w_i(Σ_j P_ij²/(λ_j+α) + 1/Σw); on the kernel path the fitted values
Q diag(λ/(λ+α)) Qᵀỹ and the leverages Σ_j Q_ij² λ_j/(λ_j+α) + w_i/Σw.
"""

import numpy as np

from .._linalg.products import row_products

#: Rows of a chunk taken at a time for its leave-one-out residuals
#: (``loo_block``): temporaries of LOO_SUB_ROWS × D doubles.
LOO_SUB_ROWS = 1024


class LooScores:
    """Scores per alpha from leave-one-out residuals given block by block (rows in any order).

    ``scoring=None``: minus the mean of w_i·e_i² (scikit-learn's RidgeCV);
    a scorer: applied to the leave-one-out predictions once all rows are in;
    ``gcv``: the (K, A) GCV errors, no residuals needed.  ``finish`` returns
    (scores — (A,), or (K, A) per target —, what ``cv_results_`` stores).
    """

    def __init__(self, settings, alphas, Y, w, sample_weight, y_true, per_target, gcv=None):
        self.settings, self.Y, self.w = settings, Y, w
        self.sample_weight, self.y_true, self.per_target = sample_weight, y_true, per_target
        self.gcv = gcv
        N, K = Y.shape
        A = alphas.size
        self.total = np.zeros((K, A))
        self.stored = None
        if gcv is None and settings.scoring is not None:
            self.stored = np.empty((N, K, A))  # predictions, for the scorer
        elif gcv is None and settings.store_cv_results:
            self.stored = np.empty((N, K, A))  # weighted squared errors

    def add(self, s, e, loo):
        """Take the residuals ``loo`` (e − s, K, A) of rows s..e."""
        if self.settings.scoring is not None:
            self.stored[s:e] = self.Y[s:e, :, None] - loo
            return
        se = self.w[s:e, None, None] * loo**2
        self.total += se.sum(axis=0)
        if self.stored is not None:
            self.stored[s:e] = se

    def finish(self):
        """Return (scores, results)."""
        if self.gcv is not None:
            return (-self.gcv if self.per_target else -self.gcv.mean(axis=0)), self.gcv
        N, K = self.Y.shape
        if self.settings.scoring is None:
            scores = -self.total / N if self.per_target else -self.total.sum(axis=0) / (N * K)
            return scores, self.stored
        # Weighted fits score with the weights, as scikit-learn's RidgeCV does.
        params = {} if self.sample_weight is None else {"sample_weight": self.w}
        return self.settings.score(self.stored, self.y_true, self.per_target, params), self.stored


def loo_residuals(dec, alphas, blocks, Y, w, n_threads):
    """Yield (start, stop, e) with e the leave-one-out residuals, shape (n, K, A), original scale."""
    lam = dec.eigvals[:, None]
    A = alphas.size
    base = 1.0 / dec.weight_sum if dec.centred else 0.0
    if dec.kind == "kernel":
        # Q is the whole N × N basis, so 1 − h_ii and r come from each direction's unfitted part
        # α/(λ+α) (1 for a direction left out), not as 1 − (fitted part): at a small α, h_ii → 1 and
        # 1 − h_ii would cancel (wide X: leave-one-out predictions off by ~1e-6 relative).  With an
        # intercept, the null space (√w/‖√w‖ in it, λ = 0) holds the w_i/Σw term: subtracted from
        # the unfitted part, it cancels only at the scale w_i/Σw ≈ 1/N.
        rest = np.where(dec.kept(alphas), alphas[None, :] / (lam + alphas[None, :]), 1.0)  # (N, A)
        Q = dec.basis
        one_minus_lev = (Q * Q) @ rest - base * w[:, None]
        unfitted = (Q @ (dec.u[:, :, None] * rest[:, None, :]).reshape(Q.shape[1], -1)).reshape(len(w), -1, A)
        r = unfitted / np.sqrt(w)[:, None, None]
        yield 0, len(w), r / one_minus_lev[:, None, :]
        return
    for s, e, Zb, _ in blocks:
        yield s, e, loo_block(dec, alphas, Zb, Y[s:e], w[s:e], n_threads)


def loo_block(dec, alphas, Zb, Yb, wb, n_threads):
    """Gram path: the leave-one-out residuals (n, K, A) of one block of rows.

    The rows are taken ``LOO_SUB_ROWS`` at a time, so the N × D
    temporaries (Z_c, Z_c V, its squares) are a few MB, reused from
    malloc's heap, instead of fresh arrays of the chunk's size (whose
    first-touch page faults cost as much as the arithmetic here).  Every
    product is the row-independent one: a row's residuals do not depend
    on the rows around it or on the thread count.
    """
    lam = dec.eigvals[:, None]
    base = 1.0 / dec.weight_sum if dec.centred else 0.0
    inv = np.ascontiguousarray(1.0 / (lam + alphas[None, :]))  # (D, A)
    inv[~dec.kept(alphas)] = 0.0  # directions below the rank cut-off are not fitted (eigen.Decomposition)
    coef_by_alpha = np.ascontiguousarray((dec.u[:, :, None] * inv[:, None, :]).reshape(dec.u.shape[0], -1))
    n, K, A = Zb.shape[0], Yb.shape[1], alphas.size
    out = np.empty((n, K, A))
    for s in range(0, n, LOO_SUB_ROWS):
        e = min(n, s + LOO_SUB_ROWS)
        Zc = np.asarray(Zb[s:e], dtype=np.float64)
        Zc = Zc - dec.mean if dec.centred else Zc
        # Z_c V (the rows in the eigenbasis): the row-independent product,
        # threaded, the same bits for any thread count.
        P = row_products(Zc, dec.basis, n_threads)
        lev = wb[s:e, None] * (row_products(np.square(P), inv, n_threads) + base)
        fitted = row_products(P, coef_by_alpha, n_threads).reshape(e - s, K, A)
        np.subtract((Yb[s:e] - dec.y_mean)[:, :, None], fitted, out=out[s:e])
        out[s:e] /= (1.0 - lev)[:, None, :]
    return out
