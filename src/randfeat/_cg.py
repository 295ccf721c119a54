"""Block preconditioned conjugate gradient for ridge on features Z.

Solves (Z_cᵀ W Z_c + αI) w_k = Z_cᵀ W (y_k − ȳ_k) for all K targets at
once (the operator, its centring and weights: ``_normal.py``; the products
with Z: ``_linops.py``).  The K targets share one Krylov space (block CG,
``block_cg``): each iteration applies the normal operator to K directions
made from all the targets' residuals and minimises every target's error
over all of them, so many targets converge in fewer iterations than one
alone — 4–8× fewer than K separate CG runs on binning features at small α
(DESIGN.md, "Hard cases").  The solve stops when every target's relative
residual ‖r_k‖ / ‖b_k‖ is at most tol.

Preconditioner (``_precond.py``): Jacobi, diag(Z_cᵀ W Z_c) + α, or a
scaled identity on binning features, except on the block of the heaviest
columns of a sparse Z, which is inverted exactly (for binning features
each grid's block of ZᵀZ is diagonal, but the blocks *between* grids
couple strongly where bins are crowded); or a randomized Nyström
preconditioner (``_nystrom.py``) built once per Z.

``cg_ridge_path`` solves a list of alphas on one Z, largest first, each
warm-started from the previous solution, with one Nyström build for all:
the entry point for model selection.

Precision: the iterates and the small dense algebra are float64; the
directions are rounded to Z's dtype for the products (float32 Z keeps its
halved memory traffic), which accumulate in float64.

Block CG's dense algebra is thin products (D × K by K × K), run over fixed
row blocks in ``_cg_fast`` so that results do not depend on the thread
count.
"""

import time
import warnings
from typing import NamedTuple

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ._ext._cg_fast import add_products, cross_products, n_blocks, scale_rows
from ._normal import DualNormalOperator, NormalOperator
from ._nystrom import DEFAULT_MEMORY_BUDGET
from ._precond import Preconditioner, make_preconditioner, wants_nystrom
from ._threads import single_threaded_blas


def _colwise_dot(A, B):
    """Return the float64 inner product of matching columns of A and B."""
    return np.einsum("ij,ij->j", A, B, dtype=np.float64)


def default_max_iter(n_features):
    """max_iter=None: 10 × D iterations, at least 100 and at most 10000."""
    return int(min(max(10 * n_features, 100), 10_000))


class _CGSolution(NamedTuple):
    coef: np.ndarray
    intercept: np.ndarray
    n_iter: np.ndarray
    residual: np.ndarray


class CGResult(_CGSolution):
    """What ``cg_ridge`` returns (``cg_ridge_path`` returns one per alpha).

    Unpacks as the 4-tuple ``coef, intercept, n_iter, residual``; the
    preconditioner used is in the attributes ``preconditioner`` and
    ``nystrom_rank``.

    Parameters
    ----------
    coef : ndarray (K, D), Z's dtype
    intercept : ndarray (K,), float64
    n_iter : ndarray (K,), int
    residual : ndarray (K,), float64
        Relative residual ‖r_k‖ / ‖b_k‖ reached.
    preconditioner : str
        What M was ("Jacobi", "randomized Nyström, rank r (sketch ℓ)", ...).
    nystrom_rank : int or None
        Rank of the Nyström preconditioner, None when another was used.
    """

    def __new__(cls, coef, intercept, n_iter, residual, preconditioner, nystrom_rank):
        self = super().__new__(cls, coef, intercept, n_iter, residual)
        self.preconditioner = preconditioner
        self.nystrom_rank = nystrom_rank
        return self


def cg_ridge(ops, Y, sample_weight, alpha, *, fit_intercept, tol, max_iter, log=None, preconditioner="auto",
             nystrom_rank=None, memory_budget=DEFAULT_MEMORY_BUDGET):
    """Solve ridge for all columns of Y by preconditioned block CG.

    Parameters
    ----------
    ops : FeatureOperator
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
    preconditioner : {"auto", "jacobi", "block", "nystrom"}
        "jacobi": the exact heavy-column block plus Jacobi; "block": the
        block plus a scaled identity; "nystrom": randomized Nyström (needs
        alpha > 0, else as "auto"); "auto": "block" on one-hot block
        matrices, "jacobi" elsewhere (``_precond.diagonal_kind``; Nyström
        only if ``_precond.wants_nystrom`` says so).
    nystrom_rank : int or None
        Nyström sketch size; None chooses it automatically.
    memory_budget : int
        Bytes the Nyström build may use (``_nystrom`` module docstring).

    Returns
    -------
    CGResult
    """
    return cg_ridge_path(ops, Y, sample_weight, [alpha], fit_intercept=fit_intercept, tol=tol, max_iter=max_iter,
                         log=log, preconditioner=preconditioner, nystrom_rank=nystrom_rank,
                         memory_budget=memory_budget)[0]


def cg_ridge_path(ops, Y, sample_weight, alphas, *, fit_intercept, tol, max_iter, log=None, preconditioner="auto",
                  nystrom_rank=None, memory_budget=DEFAULT_MEMORY_BUDGET):
    """Solve ridge on one Z for every alpha of a list: the entry point for model selection.

    The normal operator (centring, weights) is set up once; the alphas are
    solved from the largest to the smallest, each warm-started from the
    previous solution; a Nyström preconditioner, when chosen, is built once
    (for the smallest alpha, whose rank serves all larger ones) and reused.
    Results come back in the order of ``alphas``.  Each result is what a
    separate ``cg_ridge`` call with that alpha would reach to ``tol`` (the
    iterates differ: warm start, shared preconditioner).

    Parameters
    ----------
    ops : FeatureOperator
        Products with the feature matrix Z (N × D).
    Y : ndarray (N, K), float64
    sample_weight : ndarray (N,) float64, or None for unit weights
    alphas : sequence of float >= 0
    fit_intercept : bool
    tol : float > 0
        Relative residual at which a target stops, for every alpha.
    max_iter : int or None
        Per alpha; None → ``default_max_iter(D)``.
    log : callable or None
        Called with progress messages (verbose mode).
    preconditioner : {"auto", "jacobi", "block", "nystrom"}
        As in ``cg_ridge``; "auto" decides on the smallest positive alpha
        and then uses Nyström for every positive alpha of the path.
    nystrom_rank : int or None
        Nyström sketch size; None chooses it automatically.
    memory_budget : int
        Bytes the Nyström build may use.

    Returns
    -------
    list of CGResult
        One per alpha, in the order given.
    """
    normal = NormalOperator(ops, sample_weight, fit_intercept)
    B, ybar = normal.rhs(Y)
    return solve_normal_path(normal, B, ybar, alphas, tol=tol, max_iter=max_iter, log=log,
                             preconditioner=preconditioner, nystrom_rank=nystrom_rank, memory_budget=memory_budget,
                             Y=Y)


def solve_normal_path(normal, B, ybar, alphas, *, tol, max_iter, log=None, preconditioner="auto", nystrom_rank=None,
                      memory_budget=DEFAULT_MEMORY_BUDGET, Y=None):
    """Solve (A + αI) X = B for every alpha of a list, on a normal operator already set up.

    ``cg_ridge_path`` once the operator and right-hand sides exist: the
    entry point for an operator whose data lives elsewhere (the Dask
    operator, whose right-hand sides are reduced on the workers).

    Parameters
    ----------
    normal : NormalOperator
        A = Z_cᵀ W Z_c (or an object with its interface).
    B : ndarray (D, K), Z's dtype
        Right-hand sides Z_cᵀ W (Y − ȳ).
    ybar : ndarray (K,), float64
        Target means (for the intercepts).
    alphas : sequence of float >= 0
    tol, max_iter, log, preconditioner, nystrom_rank, memory_budget
        As in ``cg_ridge_path``.
    Y : ndarray (N, K), float64, or None
        The targets, when the rows are in memory: then, with the "auto"
        preconditioner, where it is a scaled identity and N <= D /
        ``DUAL_RATIO``, CG iterates in the dual (``_dual_solve``).

    Returns
    -------
    list of CGResult
        One per alpha, in the order given.
    """
    alphas = [float(a) for a in alphas]
    if alphas:
        _warn_if_alpha_below_tolerance(normal, min(alphas), tol)
    order = sorted(range(len(alphas)), key=lambda i: -alphas[i])
    positive = [a for a in alphas if a > 0]
    factors = None
    if positive and wants_nystrom(normal, min(positive), preconditioner):
        # Decided and built once, on the smallest positive alpha; the Jacobi
        # preconditioners (alpha-dependent, cheap to decide) are made per alpha below.
        _, factors = make_preconditioner(normal, min(positive), "nystrom", rank=nystrom_rank,
                                         memory_budget=memory_budget, log=log)
    results = [None] * len(alphas)
    X = A = None  # the last primal solution, the last dual one (warm starts)
    # The dual only for "auto": an explicit preconditioner is a primal one.
    dual = DualNormalOperator(normal) if Y is not None and preconditioner == "auto" and _dual_pays(normal) else None
    for i in order:
        alpha = alphas[i]
        if factors is not None and alpha > 0:
            M, _ = make_preconditioner(normal, alpha, factors=factors)
        else:
            M, _ = make_preconditioner(normal, alpha, "auto" if preconditioner == "nystrom" else preconditioner)
        if log is not None and M.correction is not None:
            log(f"CG preconditioner (alpha={alpha:g}): {M.description}")
        if dual is not None and alpha > 0 and _is_scaled_identity(M):
            X, A, n_iter, residual = _dual_solve(normal, dual, B, dual.rhs(Y, ybar), alpha, tol=tol,
                                                 max_iter=max_iter, log=log, A0=A)
            description = DUAL_DESCRIPTION
        else:
            X, n_iter, residual = block_cg(normal, B, alpha, M, tol=tol, max_iter=max_iter, log=log, X0=X)
            description = M.description
        rank = factors.rank if (factors is not None and alpha > 0) else None
        results[i] = CGResult(np.ascontiguousarray(X.T), normal.intercept(X, ybar), n_iter, residual,
                              description, rank)
    return results


#: The dual is used when N <= D / DUAL_RATIO (and the preconditioner is a
#: scaled identity, which the dual's plain CG matches).  Letter-like at 16×
#: gamma (20000 rows, 314338 columns, 26 classes): 20 / 44 / 45 iterations
#: at alpha 1 / 1e-2 / 1e-4 against 19 / 40 / 41 in the primal, each ~10×
#: cheaper (the D × K algebra dominated).  At 4× gamma (N = 0.63 D) the
#: dual took 1.6× the primal's iterations.  DESIGN.md, "Hard cases".
DUAL_RATIO = 2
DUAL_DESCRIPTION = "none: CG on the dual (ZZᵀ + αI, N <= D/2)"


def _dual_pays(normal):
    """True if CG on ``normal`` may iterate in the dual: rows in memory, N <= D / ``DUAL_RATIO``."""
    N, D = normal.shape
    return bool(getattr(normal, "supports_dual", False)) and N * DUAL_RATIO <= D


def _is_scaled_identity(M):
    """True if the preconditioner M is a multiple of the identity (no block, one scale)."""
    return M.correction is None and M.inv_diag.size > 0 and bool(np.all(M.inv_diag == M.inv_diag[0]))


def _dual_solve(normal, dual, B, Yhat, alpha, *, tol, max_iter, log, A0):
    """Ridge through the dual: block CG on (ẐẐᵀ + αI) A = Ŷ, then X = ẐᵀA.

    The dual residual is stopped at ``tol``, then the primal one
    ‖Bₖ − (A + αI)Xₖ‖ / ‖Bₖ‖ (what every CG fit reports) is measured; if a
    target misses ``tol`` there, the dual iterations resume (warm) at a
    tighter dual tolerance.  Returns (X (D × K) in Z's dtype, A (N × K)
    float64, n_iter, primal residual).
    """
    max_iter = default_max_iter(normal.shape[1]) if max_iter is None else max_iter
    identity = Preconditioner(np.ones(dual.shape[0]), description="none")
    b_norm = np.sqrt(_colwise_dot(B, B))
    dual_tol, used = tol, np.zeros(B.shape[1], dtype=np.intp)
    A = A0
    while True:
        A, n_iter, _ = block_cg(dual, Yhat, alpha, identity, tol=dual_tol, max_iter=max_iter - int(used.max()),
                                log=log, X0=A, out_dtype=np.float64)
        used += n_iter
        X = dual.to_primal(A)
        R = np.asarray(B, dtype=np.float64) - normal.apply(np.ascontiguousarray(X), alpha)[0]
        residual = np.sqrt(_colwise_dot(R, R)) / np.where(b_norm > 0, b_norm, 1.0)
        if np.all(residual <= tol) or used.max() >= max_iter or dual_tol <= np.finfo(np.float64).eps:
            return X, A, used, residual
        # The primal residual is Ẑᵀ r_dual: tighten the dual target by the measured gap.
        dual_tol = max(dual_tol * min(0.5, 0.5 * tol / float(residual.max())), np.finfo(np.float64).eps)
        if log is not None:
            log(f"dual CG: primal residual {residual.max():.3e} > tol; dual tolerance now {dual_tol:.3e}")


def _warn_if_alpha_below_tolerance(normal, alpha, tol):
    """Warn when alpha < tol · max diag(ZᵀWZ): CG's answer is then set by the tolerance, not alpha.

    Stopped at ‖r‖ <= tol·‖b‖, CG leaves the directions of eigenvalues
    below ~tol·‖A‖ unresolved, so with a smaller alpha the solution depends
    on the iteration (and, for rank-deficient Z at alpha ≈ 0, it is not the
    minimum-norm least-squares one scikit-learn returns).
    """
    # One O(nnz) pass over Z, like one CG product (the preconditioner's
    # inverse diagonal hides the heavy block's columns).
    diag = normal.diagonal()
    if diag is None or diag.size == 0:
        return
    scale = float(diag.max())
    if scale > 0 and alpha < tol * scale:
        warnings.warn(
            f"alpha={alpha:g} is below tol·max(diag ZᵀZ) = {tol * scale:.3g}: CG's solution is then "
            "determined by the tolerance, not by alpha (with alpha≈0 on rank-deficient features it is "
            "not the minimum-norm least-squares solution). Use a larger alpha, or solver='cholesky', "
            "which returns the minimum-norm solution.",
            UserWarning,
            stacklevel=5,
        )


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
        why = "CG broke down (matrix not positive definite; is alpha > 0?)" if breakdown else (
            f"CG did not converge within max_iter={max_iter} iterations"
        )
        warnings.warn(
            f"{why}: relative residual reached {residual[bad].max():.3e} "
            f"(tol={tol:g}) for target(s) {bad.tolist()}. Increase max_iter or tol, or alpha."
            + (" (tol=0 asks for an exact solution, which rounding prevents.)" if tol == 0 else ""),
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
    D × k by k × k products, no explicit orthonormalisation of P.
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
    broke = exhausted = False
    eps = np.finfo(dtype).eps
    # tol = 0 asks for rounding level: the recursive residual gets there
    # (it keeps falling after the true one has stalled).
    tol = max(tol, np.finfo(np.float64).eps)
    it = 0
    while True:
        # Zr = M R on the diagonal's rows, and the residual norms, in one pass.
        scale_rows(R, inv_diag, live.astype(np.float64), Zr, part_rr, threads)
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
        S = cross_products(P, Q, threads)
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
        step = TT @ cross_products(P, R, threads)
        add_products(X, P, step, 1.0, threads)
        add_products(R, Q, step, -1.0, threads)
        n_iter[live] = it
    # Exhausted below √eps is as converged as rounding allows.
    failed = live & (residual > tol) & (not exhausted)
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
