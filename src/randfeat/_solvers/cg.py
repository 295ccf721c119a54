"""Block preconditioned conjugate gradient for ridge on features Z.

Solves (Z_cᵀ W Z_c + αI) w_k = Z_cᵀ W (y_k − ȳ_k) for all K targets at
once (the operator, its centring and weights: ``normal.py``; the products
with Z: ``randfeat._linalg``).  The K targets share one Krylov space (block CG,
``block_cg``): each iteration applies the normal operator to K directions
made from all the targets' residuals and minimises every target's error
over all of them, so many targets converge in fewer iterations than one
alone — 4–8× fewer than K separate CG runs on binning features at small α
(DESIGN.md, "Hard cases").  The solve stops when every target's relative
residual ‖r_k‖ / ‖b_k‖ is at most tol.

Preconditioner (``precond.py``): Jacobi, diag(Z_cᵀ W Z_c) + α, or a
scaled identity on binning features, except on the block of the heaviest
columns of a sparse Z, which is inverted exactly (for binning features
each grid's block of ZᵀZ is diagonal, but the blocks *between* grids
couple strongly where bins are crowded); or a randomized Nyström
preconditioner (``nystrom_preconditioner.py``) built once per Z.  How ridge calls it (one
alpha, a path of alphas, the dual): ``cg_path.py``.

Precision: the iterates and the small dense algebra are float64; the
directions are rounded to Z's dtype for the products (float32 Z keeps its
halved memory traffic), which accumulate in float64.

Block CG's dense algebra is thin products (D × K by K × K), run over fixed
row blocks in ``_ext._cg_fast`` so that results do not depend on the thread
count.
"""

import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from .._ext._cg_fast import add_products, cg_step, cross_products, cross_products_pair, n_blocks, scale_rows
from .._core.threads import single_threaded_blas


def _colwise_dot(A, B):
    """Return the float64 inner product of matching columns of A and B."""
    return np.einsum("ij,ij->j", A, B, dtype=np.float64)


def default_max_iter(n_features):
    """max_iter=None: 10 × D iterations, at least 100 and at most 10000."""
    return int(min(max(10 * n_features, 100), 10_000))



#: Most targets that share one Krylov space.  The s × s algebra of block CG
#: costs O(D·s²) per iteration, against O(nnz·s) for the sparse products;
#: wider Y is cut into groups of this many targets, solved one after another.
BLOCK_WIDTH = 32
#: A new search direction is dropped when, the candidates scaled to unit
#: A-norm, it adds less than this (relative eigenvalue of PᵀAP, ~1e-6
#: relative singular value of A^½P) to the others: it is then numerically
#: dependent, and keeping it would make PᵀAP singular.
RANK_TOL = 1e-12


def block_cg(normal, B, alpha, preconditioner, *, tol, max_iter, log=None, X0=None, out_dtype=None):
    """Solve (A + αI) X = B by preconditioned block CG, the targets sharing one Krylov space.

    Block CG (O'Leary 1980): the K residuals span the search space
    together, so each iteration minimises every target's error over K new
    directions instead of one.  On binning features, whose ZᵀZ has a slowly
    decaying spectrum, this took 3–8× fewer iterations than K separate CG
    runs at small α (DESIGN.md, "Hard cases").  A target stops (its X and
    residual are frozen) once ‖r_k‖ / ‖b_k‖ <= tol; the directions come from
    the targets still running, made independent at every step (the
    breakdown-free variant of Ji & Li 2017: dependent directions are
    dropped, so repeated or linearly dependent targets are fine).  With one
    target this is preconditioned CG.  More than ``BLOCK_WIDTH`` targets are
    solved in groups of that many.

    The iterates are float64; the directions are rounded to Z's dtype
    before each product (float32 Z keeps its halved memory traffic), and
    the products accumulate in float64.  The small dense algebra runs on
    one BLAS thread, so results do not depend on the thread count.

    Parameters
    ----------
    normal : NormalOperator
        A = Z_cᵀ W Z_c.
    B : ndarray (D, K)
        Right-hand sides.
    alpha : float >= 0
    preconditioner : Preconditioner
    tol : float >= 0
        Relative residual ‖r_k‖ / ‖b_k‖ at which target k stops.
    max_iter : int or None
        None → ``default_max_iter(D)``.
    log : callable or None
    X0 : ndarray (D, K) or None
        Starting point (a warm start); None starts from zero.
    out_dtype : dtype or None
        dtype of the returned X; None: Z's.

    Returns
    -------
    X : ndarray (D, K)
    n_iter : ndarray (K,), int
        Iterations (the same for every target of a group).
    residual : ndarray (K,), float64, relative residual reached
    """
    D, K = B.shape
    max_iter = default_max_iter(D) if max_iter is None else max_iter
    X = np.zeros((D, K)) if X0 is None else np.array(X0, dtype=np.float64, order="C")
    n_iter = np.zeros(K, dtype=np.intp)
    residual = np.zeros(K)
    failed = np.zeros(K, dtype=bool)
    breakdown = False
    t0 = time.perf_counter()
    with single_threaded_blas():
        for k0 in range(0, K, BLOCK_WIDTH):
            group = slice(k0, min(K, k0 + BLOCK_WIDTH))
            out = _shared_krylov_cg(normal, np.asarray(B[:, group], dtype=np.float64), alpha, preconditioner,
                                    np.ascontiguousarray(X[:, group]), X0 is not None, tol, max_iter, log, t0)
            X[:, group], n_iter[group], residual[group], failed[group], broke = out
            breakdown |= broke

    if failed.any():
        bad = np.flatnonzero(failed)
        if breakdown:
            why = "CG broke down (matrix not positive definite; is alpha > 0?)"
        elif n_iter[bad].max() < max_iter:  # tol=0: stopped at rounding level before max_iter
            why = f"CG did not reach tol=0: it stopped at rounding level after {n_iter[bad].max()} iterations"
        else:
            why = f"CG did not converge within max_iter={max_iter} iterations"
        warnings.warn(
            f"{why}: relative residual reached {residual[bad].max():.3e} "
            f"(tol={tol:g}) for target(s) {bad.tolist()}. "
            + ("tol=0 asks for an exact solution, which rounding prevents: use a tol > 0 (e.g. 1e-12)."
               if tol == 0 else "Increase max_iter or tol, or alpha."),
            ConvergenceWarning,
            stacklevel=5,
        )
    return X.astype(out_dtype or normal.dtype, copy=False), n_iter, residual


def _shared_krylov_cg(normal, B, alpha, preconditioner, X, warm, tol, max_iter, log, t0):
    """Block CG on one group of targets; returns (X, n_iter, residual, failed, broke_down).

    ``X`` (D × k, float64, C-contiguous) is the start and is updated in
    place; the caller holds BLAS at one thread.

    Each iteration: Zr = M R; the new directions P = Zr − P_old (T Tᵀ Q_oldᵀ Zr)
    (A-conjugate to the old ones); Q = A P (the sparse products); from
    S = PᵀQ a basis T of the numerically independent directions (P T is
    A-orthonormal); the step X += P T Tᵀ PᵀR, R −= Q T Tᵀ PᵀR.  Six thin
    D × k by k × k products, no explicit orthonormalisation of P.  Passes
    over the D × k blocks are fused where the arithmetic allows (same bits
    as one pass each): PᵀQ with PᵀR (``cross_products_pair``), and the step
    with the next iteration's diagonal scaling (``cg_step``) — fewer, longer
    parallel regions, and each block read once.
    """
    D, K = B.shape
    dtype = normal.dtype
    threads = normal.thin_product_threads(K)
    b_norm = np.sqrt(_colwise_dot(B, B))
    safe_norm = np.where(b_norm > 0, b_norm, 1.0)
    if warm:
        AX, _ = normal.apply(np.ascontiguousarray(X, dtype=dtype), alpha)
        R = B - AX
    else:
        R = B.copy()
    # Targets with b = 0 have the solution 0 and take no part.
    live = b_norm > 0
    n_iter = np.zeros(K, dtype=np.intp)
    inv_diag = np.ascontiguousarray(preconditioner.inv_diag, dtype=np.float64)
    Zr = np.empty_like(R)
    part_rr = np.zeros((n_blocks(D), K))
    # Every D × K array lives in a buffer made once: fresh ones each
    # iteration cost their page faults every time.
    P, Q = np.empty_like(R), np.empty_like(R)
    low = None if dtype == np.float64 else (np.empty(R.shape, dtype), np.empty(R.shape, dtype))
    TT = None
    live_scale = live.astype(np.float64)
    # Zr = M R on the diagonal's rows, and the residual norms, in one pass;
    # later iterations get both from cg_step.
    scale_rows(R, inv_diag, live_scale, Zr, part_rr, threads)
    broke = exhausted = False
    eps = np.finfo(dtype).eps
    # tol below rounding (0 included) stops at rounding level: the recursive
    # residual gets there (it keeps falling after the true one has stalled;
    # iterating on would only square denormals).  tol = 0 is then not reached
    # (short of a zero residual) and, as scikit-learn's sparse_cg, the caller warns.
    exact = tol == 0
    tol = max(tol, np.finfo(np.float64).eps)
    it = 0
    while True:
        residual = np.sqrt(part_rr.sum(axis=0)) / safe_norm
        if not np.all(np.isfinite(residual)):
            X[...] = np.nan  # overflow: see below
            break
        if log is not None and it > 0 and (it % 10 == 0 or not np.any(residual > tol) or it == max_iter):
            log(f"CG iteration {it}: max relative residual {residual.max():.3e}, "
                f"elapsed {time.perf_counter() - t0:.1f} s")
        # A warm start may already be there; a cold start always takes a step.
        if not live.any() or it == max_iter or (not np.any(residual[live] > tol) and (warm or it > 0)):
            break
        it += 1
        # Every target keeps adding its residual to the search space until
        # all have converged (freezing finished targets cost up to 1.6× the
        # iterations: the others lose those directions).
        preconditioner.correct(R, Zr)
        Zr[:, ~live] = 0.0
        if TT is not None:
            # β = −(PᵀAP)⁺ QᵀZr: the new directions are A-conjugate to the last ones.
            add_products(Zr, P, TT @ cross_products(Q, Zr, threads), -1.0, threads)
        if low is None:
            # The directions take Zr's buffer, Zr the old directions'.
            P, Zr = Zr, P
            normal.apply(P, alpha, out=Q)
        else:
            # Directions rounded to Z's dtype for the products (float32 keeps
            # its halved memory traffic); the algebra on their exact float64 values.
            np.copyto(low[0], Zr, casting="same_kind")
            normal.apply(low[0], alpha, out=low[1])
            np.copyto(P, low[0])
            np.copyto(Q, low[1])
        S, PR = cross_products_pair(P, Q, R, threads)
        if not np.all(np.isfinite(S)):
            # Overflow (features or targets near 1e154 square to infinity):
            # return a non-finite solution, which the estimators report as
            # such (a finite X here would be a silently wrong answer).
            X[...] = np.nan
            break
        TT = _conjugate_basis(S)
        if TT is None:
            # No direction left (PᵀAP has no positive part): the residuals are
            # exhausted (tol = 0 gets there), or A is not positive definite
            # (alpha = 0 on singular Z).
            broke = bool(np.any(residual[live] > np.sqrt(eps)))
            exhausted = not broke
            break
        # X += P step, R −= Q step, and the next Zr = M R with its norms.
        cg_step(X, R, P, Q, np.ascontiguousarray(TT @ PR), inv_diag, live_scale, Zr, part_rr, threads)
        n_iter[live] = it
    # Exhausted below √eps is as converged as rounding allows (tol = 0 is
    # never reached short of a zero residual: scikit-learn's sparse_cg warns too).
    failed = live & (((residual > tol) & (not exhausted)) | (exact & (residual > 0)))
    return X, n_iter, residual, failed, broke


def _conjugate_basis(S):
    """Return T Tᵀ, the pseudo-inverse of S = PᵀAP on its numerically positive part, or None.

    The columns of P are scaled to unit A-norm first (a finished target's
    tiny residual counts as much as the others), so directions are judged by
    their angle to the others, not their size; those adding less than
    ``RANK_TOL`` (relative eigenvalue) are dropped — the breakdown-free
    rule of Ji & Li (2017).  P T is then A-orthonormal.
    """
    S = 0.5 * (S + S.T)
    d = np.diag(S).copy()
    positive = d > 0
    if not positive.any():
        return None
    scale = np.zeros_like(d)
    scale[positive] = 1.0 / np.sqrt(d[positive])
    lam, V = np.linalg.eigh(S * np.outer(scale, scale))
    keep = lam > RANK_TOL * lam[-1]
    if lam[-1] <= 0 or not keep.any():
        return None
    T = scale[:, None] * (V[:, keep] / np.sqrt(lam[keep]))
    return T @ T.T
