"""Block preconditioned conjugate gradient for ridge on features Z.

Solves (Z_cᵀ W Z_c + αI) w_k = Z_cᵀ W (y_k − ȳ_k) for all K targets at
once, where Z_c = Z − 1μᵀ is Z centred by its weighted column means μ (only
when fitting an intercept) and W = diag(sample weights).  Z_c is never
formed: Z_c p = Zp − 1(μᵀp) and Z_cᵀu = Zᵀu − μ(1ᵀu), so a sparse Z stays
sparse.  Each iteration costs one product Z @ P and one Z.T @ U over the
K columns still iterating (``_linops``); each target stops at its own
relative residual ‖r_k‖ / ‖b_k‖ <= tol.

Preconditioner: Jacobi, diag(Z_cᵀ W Z_c) + α.  For binning features each
grid's block of ZᵀZ is diagonal (a row has one nonzero per grid), so this
is close to the block-diagonal part of the matrix.

Precision: the iterates live in Z's dtype (float32 stays float32, halving
memory traffic); the kernels accumulate every product in float64, and the
CG scalars (inner products, norms) are float64.
"""

import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning


def _colwise_dot(A, B):
    """Return the float64 inner product of matching columns of A and B."""
    return np.einsum("ij,ij->j", A, B, dtype=np.float64)


def default_max_iter(n_features):
    """max_iter=None: 10 × D iterations, at least 100 and at most 10000."""
    return int(min(max(10 * n_features, 100), 10_000))


def cg_ridge(ops, Y, sample_weight, alpha, *, fit_intercept, tol, max_iter, log=None):
    """Solve ridge for all columns of Y by Jacobi-preconditioned block CG.

    Parameters
    ----------
    ops : SparseProducts or DenseProducts
        Products with the feature matrix Z (N × D).
    Y : ndarray (N, K), float64
    sample_weight : ndarray (N,) float64, or None for unit weights
    alpha : float >= 0
    fit_intercept : bool
    tol : float > 0
        Relative residual at which a target stops.
    max_iter : int or None
        None → ``default_max_iter(D)``.
    log : callable or None
        Called with a progress message (verbose mode).

    Returns
    -------
    coef : ndarray (K, D), Z's dtype
    intercept : ndarray (K,), float64
    n_iter : ndarray (K,), int
    residual : ndarray (K,), float64, relative residual reached
    """
    N, D = ops.shape
    K = Y.shape[1]
    dtype = ops.dtype
    max_iter = default_max_iter(D) if max_iter is None else max_iter
    t0 = time.perf_counter()

    w = sample_weight
    sw = float(N) if w is None else float(w.sum())
    w_or_ones = np.ones(N) if w is None else w
    if fit_intercept:
        mu = ops.weighted_col_sums(w_or_ones) / sw
        ybar = (w_or_ones @ Y) / sw
        Yc = Y - ybar
    else:
        mu = None
        ybar = np.zeros(K)
        Yc = Y

    def apply_A(P):
        U = ops.dot(P)
        if mu is not None:
            U -= (mu @ P).astype(dtype)
        if w is not None:
            U *= w[:, None].astype(dtype, copy=False)
        Q = ops.tdot(U)
        if mu is not None:
            Q -= np.outer(mu, U.sum(axis=0, dtype=np.float64)).astype(dtype)
        Q += dtype.type(alpha) * P
        return Q

    U0 = Yc if w is None else Yc * w[:, None]
    U0 = np.ascontiguousarray(U0, dtype=dtype)
    B = ops.tdot(U0)
    if mu is not None:
        B -= np.outer(mu, U0.sum(axis=0, dtype=np.float64)).astype(dtype)

    diag = ops.weighted_col_sq_sums(w_or_ones)
    if mu is not None:
        diag -= sw * mu**2
    diag = np.maximum(diag, 0.0) + alpha
    # A zero diagonal entry (an all-zero column with alpha == 0) would make
    # the preconditioner singular; the column has no effect, leave it at 1.
    diag[diag <= 0] = 1.0
    inv_diag = (1.0 / diag).astype(dtype)[:, None]

    b_norm = np.sqrt(_colwise_dot(B, B))
    X = np.zeros((D, K), dtype=dtype)
    R = B
    Zr = R * inv_diag
    P = Zr.copy()
    rz = _colwise_dot(R, Zr)
    residual = np.where(b_norm > 0, 1.0, 0.0)
    n_iter = np.zeros(K, dtype=np.intp)
    active = b_norm > 0
    breakdown = np.zeros(K, dtype=bool)

    for it in range(1, max_iter + 1):
        cols = np.flatnonzero(active)
        if cols.size == 0:
            break
        # Slices (views) when every target is still active: no copies.
        sel = slice(None) if cols.size == K else cols
        Pa = P[:, sel] if cols.size == K else np.ascontiguousarray(P[:, sel])
        Q = apply_A(Pa)
        pq = _colwise_dot(Pa, Q)
        ok = pq > 0
        step = np.where(ok, rz[cols] / np.where(ok, pq, 1.0), 0.0)
        X[:, sel] += step.astype(dtype) * Pa
        R[:, sel] -= step.astype(dtype) * Q
        r_norm = np.sqrt(_colwise_dot(R[:, sel], R[:, sel]))
        residual[cols] = r_norm / b_norm[cols]
        n_iter[cols] = it
        done = (residual[cols] <= tol) | ~ok
        breakdown[cols[~ok]] = True
        active[cols[done]] = False
        if log is not None and (it % 10 == 0 or not active.any() or it == max_iter):
            log(
                f"CG iteration {it}: max relative residual {residual.max():.3e}, "
                f"{int(active.sum())}/{K} targets active, elapsed {time.perf_counter() - t0:.1f} s"
            )
        go = cols[~done]
        if go.size == 0:
            continue
        Rg = R[:, go]
        Zr = Rg * inv_diag
        rz_new = _colwise_dot(Rg, Zr)
        beta = (rz_new / rz[go]).astype(dtype)
        P[:, go] = Zr + beta * P[:, go]
        rz[go] = rz_new

    not_converged = active | breakdown
    if not_converged.any():
        bad = np.flatnonzero(not_converged)
        why = "CG broke down (matrix not positive definite; is alpha > 0?)" if breakdown.any() else (
            f"CG did not converge within max_iter={max_iter} iterations"
        )
        warnings.warn(
            f"{why}: relative residual reached {residual[bad].max():.3e} "
            f"(tol={tol:g}) for target(s) {bad.tolist()}. Increase max_iter or tol, or alpha.",
            ConvergenceWarning,
            stacklevel=3,
        )

    coef = np.ascontiguousarray(X.T)
    intercept = ybar - (mu @ X.astype(np.float64) if mu is not None else 0.0)
    return coef, np.asarray(intercept, dtype=np.float64).reshape(K), n_iter, residual
