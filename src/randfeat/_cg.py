"""Block preconditioned conjugate gradient for ridge on features Z.

Solves (Z_cᵀ W Z_c + αI) w_k = Z_cᵀ W (y_k − ȳ_k) for all K targets at
once, where Z_c = Z − 1μᵀ is Z centred by its weighted column means μ (only
when fitting an intercept) and W = diag(sample weights).  Z_c is never
formed: Z_c p = Zp − 1(μᵀp) and Z_cᵀu = Zᵀu − μ(1ᵀu), so a sparse Z stays
sparse.  Each iteration costs one product Z @ P and one Z.T @ U over the
K columns still iterating (``_linops``); each target stops at its own
relative residual ‖r_k‖ / ‖b_k‖ <= tol.

Preconditioner: Jacobi, diag(Z_cᵀ W Z_c) + α, except on the block of the
heaviest columns of a sparse Z, which is inverted exactly (``_precond.py``:
for binning features each grid's block of ZᵀZ is diagonal, but the blocks
*between* grids couple strongly where bins are crowded, and Jacobi alone
leaves CG 2-3× more iterations).

Precision: the iterates live in Z's dtype (float32 stays float32, halving
memory traffic); the kernels accumulate every product in float64, and the
CG scalars (inner products, norms) are float64.

The vector updates run in ``_cg_fast`` (fused passes over the D × K block);
profiling with K = 7 showed the NumPy version costing as much as the sparse
products.
"""

import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ._cg_fast import finish_apply, n_blocks, update_p, update_xr
from ._precond import heavy_block_preconditioner


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
    # Vector updates: threads only when the block is big enough to pay for
    # waking them (results do not depend on it).  A pass over 2M elements
    # takes ~2 ms on one core, while waking a second thread on a busy
    # machine was measured at tens of ms per parallel region.
    vec_threads = ops.n_threads if D * K >= 2_000_000 else 1

    w = sample_weight
    sw = float(N) if w is None else float(w.sum())
    w_or_ones = np.ones(N) if w is None else w
    # einsum, not BLAS: threaded BLAS reductions depend on the thread count.
    if fit_intercept:
        mu = ops.weighted_col_sums(w_or_ones) / sw
        ybar = np.einsum("i,ik->k", w_or_ones, Y) / sw
        Yc = Y - ybar
    else:
        mu = None
        ybar = np.zeros(K)
        Yc = Y
    mu_arg = np.zeros(0) if mu is None else mu
    w_col = None if w is None else w[:, None].astype(dtype)

    nb = n_blocks(D)
    part_pq = np.zeros((nb, K))
    part_rr = np.zeros((nb, K))
    part_rz = np.zeros((nb, K))

    fused = ops.n_blocks(K) > 0

    def apply_A(P):
        """Return (A P, pᵀAp per column) for A = Z_cᵀ W Z_c + αI."""
        mup = np.einsum("j,jk->k", mu, P) if mu is not None else np.zeros(K)
        if fused:
            Q, s = ops.normal(P, mup, w)
        else:
            U = ops.dot(P)
            if mu is not None:
                U -= mup.astype(dtype)
            if w_col is not None:
                U *= w_col
            s = U.sum(axis=0, dtype=np.float64)
            Q = ops.tdot(U)
        if mu is None:
            s = np.zeros(K)
        finish_apply(Q, P, mu_arg, s, float(alpha), part_pq, vec_threads)
        return Q, part_pq.sum(axis=0)

    U0 = Yc if w is None else Yc * w[:, None]
    U0 = np.ascontiguousarray(U0, dtype=dtype)
    B = ops.tdot_once(U0)
    if mu is not None:
        B -= np.outer(mu, U0.sum(axis=0, dtype=np.float64)).astype(dtype)

    diag = ops.weighted_col_sq_sums(w_or_ones)
    if mu is not None:
        diag -= sw * mu**2
    diag = np.maximum(diag, 0.0) + alpha
    # A zero diagonal entry (an all-zero column with alpha == 0) would make
    # the preconditioner singular; the column has no effect, leave it at 1.
    diag[diag <= 0] = 1.0
    inv_diag = 1.0 / diag
    block = heavy_block_preconditioner(ops, diag, alpha, mu, w, sw)
    if block is not None:
        # The block's rows get their Zr from block.apply; zero here so the
        # fused update's Σ R∘Zr leaves them out (block.apply returns theirs).
        inv_diag[block.columns] = 0.0
        if log is not None:
            log(f"CG preconditioner: Jacobi + exact block on the {len(block.columns)} heaviest columns")

    b_norm = np.sqrt(_colwise_dot(B, B))
    X = np.zeros((D, K), dtype=dtype)
    R = np.ascontiguousarray(B)
    Zr = (R * inv_diag[:, None]).astype(dtype)
    rz = _colwise_dot(R, Zr)
    if block is not None:
        rz += block.apply(R, Zr)
    active = b_norm > 0
    P = Zr * active.astype(dtype)  # finished targets get a zero direction
    residual = np.where(active, 1.0, 0.0)
    n_iter = np.zeros(K, dtype=np.intp)
    breakdown = np.zeros(K, dtype=bool)

    # Every iteration works on the whole D × K block: a finished target has
    # P = 0, so its products are zero and its X, R stay fixed (step 0).  The
    # products cost little more for a few extra columns, and the block stays
    # contiguous (no fancy indexing).
    for it in range(1, max_iter + 1):
        if not active.any():
            break
        Q, pq = apply_A(P)
        ok = pq > 0
        step = np.where(active & ok, rz / np.where(ok, pq, 1.0), 0.0)
        update_xr(X, R, Zr, P, Q, step, inv_diag, part_rr, part_rz, vec_threads)
        rr = part_rr.sum(axis=0)
        rz_new = part_rz.sum(axis=0)
        if block is not None:
            rz_new += block.apply(R, Zr)
        was_active = active.copy()
        residual[was_active] = np.sqrt(rr[was_active]) / b_norm[was_active]
        n_iter[was_active] = it
        breakdown |= was_active & ~ok
        active = was_active & ok & (residual > tol)
        if log is not None and (it % 10 == 0 or not active.any() or it == max_iter):
            log(
                f"CG iteration {it}: max relative residual {residual.max():.3e}, "
                f"{int(active.sum())}/{K} targets active, elapsed {time.perf_counter() - t0:.1f} s"
            )
        beta = np.where(active, rz_new / np.where(rz > 0, rz, 1.0), 0.0)
        rz = np.where(active, rz_new, rz)
        update_p(P, Zr, beta, active.astype(np.float64), vec_threads)

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
    intercept = ybar - (np.einsum("j,jk->k", mu, X.astype(np.float64)) if mu is not None else 0.0)
    return coef, np.asarray(intercept, dtype=np.float64).reshape(K), n_iter, residual
