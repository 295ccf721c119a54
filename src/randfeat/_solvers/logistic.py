"""L2-penalised logistic regression on features: the loss, its Newton and L-BFGS solvers, one dispatcher (``fit``).

The objective is scikit-learn's ``LogisticRegression``'s,

    C · Σ_i w_i · loss_i + ½ ‖coef‖²      (the intercept is not penalised),

binary (one column of coefficients, the sigmoid) or multinomial (K columns,
the softmax; over-parameterised as scikit-learn's: the penalty makes the
coefficients unique, the intercepts are kept summing to zero).  As in
scikit-learn it is minimised divided by C·S (S = Σ w): the mean loss plus
‖coef‖²/(2·C·S), so ``tol`` means what it means there (a bound on the
gradient of that scaled objective).

Where the rows come from: ``logistic_rows.DesignRows`` (the features of a
``pipeline.FeatureSource``, bare, held in float64 or float32 or made again
at every pass; a pass is one evaluation of the loss and its gradient over
every row).

Solvers:

* ``"newton-cholesky"``: the Hessian Zᵀ diag(s) Z (+ the penalty) as fixed
  tiles (``gram._tiled_gram_add``: the same bits for any thread count),
  factored by Cholesky; Armijo step halving; it stops on scikit-learn's
  criterion (max |gradient| <= tol and half the Newton decrement squared
  <= tol).  The Hessian only steers the step (the gradient, the loss and the
  stopping test are exact float64 sums over every row), so it is made
  cheaply: summed over every stride-th row when N > ``HESSIAN_ROWS`` (and 4
  rows per parameter; sub-sampled Newton), those rows held once
  (``LogisticLoss.sampled_hessian``: a new Hessian costs no pass over every
  row), binary in float32 tiles, and kept with its factor while the steps
  it gives shrink the gradient fast (``KEEP_HESSIAN``); near the optimum,
  when the sample limits the rate and it pays, every row's Hessian.  Multinomial: the
  full (K·P)² Hessian, blockdiag(Zᵀ diag(w p_k) Z) − QᵀQ with Q's rows
  √w_i (p_i ⊗ z_i) (both Gram matrices of tiles), with the intercepts'
  common shift (a null direction) removed.
* ``"newton-cg"`` (``logistic_cg``): the Newton step by preconditioned CG,
  Hessian-vector products on a held row sample, one P × P Gram
  preconditioner shared by the classes: for several classes, whose full
  Hessian is too large or too dear.
* ``"lbfgs"``: ``scipy.optimize.minimize(method="L-BFGS-B")`` with
  scikit-learn's options; the loss and its gradient in one pass per evaluation.
* ``"auto"`` (``choose_logistic_solver``): newton-cholesky for two classes
  when its Hessian (8·P² bytes) fits ``NEWTON_MEMORY_BYTES``, newton-cg for
  more classes when its P × P Gram does, else L-BFGS.

All the arithmetic is float64 (the features of float32 data are widened
chunk by chunk); the loss uses log(1 + eˣ) and log-sum-exp in their stable
forms.  Results do not depend on the thread count: chunks have sizes that
do not depend on it, ``Z @ θ`` is ``row_products`` (row-independent), every
sum over rows is single-threaded BLAS or fixed tiles.  The binary loss on
dense rows takes its scores, loss and gradient in one pass over the rows
(``_ext._logistic_fast``: a row is read once, not once for Zθ and again
for Zᵀr), summed by chunks of a fixed number of rows.
"""

import copy
import dataclasses
import time
import warnings
from typing import Callable, NamedTuple

import numpy as np
import scipy.linalg
import scipy.optimize
import scipy.sparse as sp
from scipy.special import expit, softmax
from sklearn.exceptions import ConvergenceWarning

from .._core.memory_budget import check_memory
from .._core.threads import effective_n_threads, single_threaded_blas
from .._ext._logistic_fast import binary_logistic_pass
from .._ext._logistic_fast import n_chunks as logistic_chunks
from .._linalg.products import row_products
from .gram import gram_add, scaled_rows, weighted_gram_add
from .logistic_cg import SampledCurvature, newton_cg
from .logistic_rows import WORK_BYTES, DesignRows
from .pipeline import FeatureSource

LOGISTIC_SOLVERS = ("auto", "lbfgs", "newton-cholesky", "newton-cg")

#: Largest Hessian (float64 bytes) for which ``solver="auto"`` picks Newton: (K·P)² <= 2^25, K·P <= 5792.
NEWTON_MEMORY_BYTES = 256 * 2**20

#: What a pass costs per feature value read, in the float32 Hessian's multiply-adds (measured on an AVX-512
#: EPYC: 45 ms for a pass over 40,000 x 1000 float64 rows, 0.15 s for the Hessian of 10,000 of them).
PASS_COST = 75

#: Below this half Newton decrement a step is in Newton's quadratic phase: a slow one there is the sample's fault.
QUADRATIC_DECREMENT = 1e-3

#: Rows the Newton Hessian is summed over at least (all of them below; a systematic sample of every
#: stride-th row above): it only steers the step (sub-sampled Newton; the gradient is always exact).
HESSIAN_ROWS = 8192
HESSIAN_ROWS_PER_PARAMETER = 4

#: newton-cg's sample: a sparser one costs it more Newton steps (each a pass) than it saves (measured: 10
#: classes, P = 2001: 8 steps with 16384 rows, 33 with 8192).
CG_HESSIAN_ROWS = 16384

#: The Hessians' row sample is held in float64 up to this size, in float32 beyond.
SAMPLE_FLOAT64_BYTES = 64 * 2**20

#: Armijo's sufficient-decrease constant and the most step halvings of Newton's line search.
ARMIJO = 2.0**-11
MAX_HALVINGS = 20

#: Newton keeps its Hessian for the next step while a full step shrinks max |gradient| at least this much
#: (0.5 since the Hessian is a row sample's: measured, AMD EPYC AVX-512 under load, against 0.25: binary
#: 100k x 2000 5 Hessians instead of 6 in 6 steps, Adult 4 instead of 5, LogisticRegressionCV 50k x 1000
#: 9% less CPU).
KEEP_HESSIAN = 0.5


@dataclasses.dataclass(frozen=True)
class LogisticSettings:
    """The parameters of a logistic fit, as the solvers read them (an estimator's, validated).

    Attributes
    ----------
    owner : str
        The estimator's class name, for messages.
    C : float
    solver : {"auto", "newton-cholesky", "lbfgs"}
    fit_intercept : bool
    tol : float
    max_iter : int
    chunk_size : int or None
    n_jobs : int or None
    log : callable or None
        Called with progress messages (verbose mode), else None.
    init : tuple of (coef, intercept) or None
        A warm start: coefficients (K, D) and intercepts (K,) of the same shape as this fit's.
    """

    owner: str
    C: float = 1.0
    solver: str = "auto"
    fit_intercept: bool = True
    tol: float = 1e-4
    max_iter: int = 100
    chunk_size: int | None = None
    n_jobs: int | None = None
    log: Callable | None = None
    init: tuple | None = None


class LogisticResult(NamedTuple):
    """What a logistic solver produced, before it becomes an estimator's fitted attributes."""

    solver: str  # the solver that ran ("newton-cholesky" or "lbfgs")
    coef: np.ndarray  # (K, D) float64, K = 1 for two classes
    intercept: np.ndarray  # (K,) float64
    n_iter: np.ndarray  # (1,) int32, as scikit-learn
    converged: bool
    objective: float  # C·Σ w·loss + ½‖coef‖² at the solution
    features: object  # the fitted feature map, or None


# ------------------------------------------------------------------ the loss
def _times(Zt, M, n_threads):
    """Z̃ @ M, each row's value independent of the chunking and of the thread count."""
    return np.asarray(Zt @ M) if sp.issparse(Zt) else row_products(Zt, M, n_threads)


def _transposed_times(Zt, R):
    """Z̃ᵀ @ R (single-threaded BLAS, or SciPy's CSR product: the same bits for any thread count)."""
    return np.asarray(Zt.T @ R)


def _mirror_lower(H):
    """Copy H's strict lower triangle onto its upper one, in place (the Hessians fill the lower triangle only).

    The upper triangle is zero, so adding the transposed strict lower
    triangle gives every entry exactly its mirror's value, with one D × D
    temporary instead of three.
    """
    H += np.tril(H, -1).T


class LogisticLoss:
    """The scaled objective (mean loss + ‖coef‖²/(2·C·S)) of θ, its gradient and its Hessian, one pass each.

    Parameters
    ----------
    rows : DesignRows
    labels : ndarray (N,) of int
        Each row's class index (0/1 for two classes).
    weights : ndarray (N,) float64
        w_i / S (summing to 1).
    n_classes : int
    l2 : float
        1 / (C·S).
    n_threads : int
    log : callable or None
    """

    def __init__(self, rows, labels, weights, n_classes, l2, n_threads, log=None):
        self.rows, self.labels, self.weights = rows, labels, weights
        self.K = 1 if n_classes == 2 else n_classes
        self.P, self.D = rows.width, rows.n_features
        self.l2, self.n_threads, self.log = l2, n_threads, log
        #: The binary Hessian's products run in float32 (twice as fast; summed in float64) until its
        #: factorisation fails; the multinomial one, a difference of two Gram matrices, always in float64.
        self.hessian_dtype = np.float32 if self.K == 1 else np.float64
        #: The Hessian is summed over every stride-th row (scaled by stride): all rows up to
        #: ``HESSIAN_ROWS`` (or 4 per parameter), a systematic sample beyond.  The gradient always reads every row.
        self.stride = max(1, rows.n_rows // max(HESSIAN_ROWS, HESSIAN_ROWS_PER_PARAMETER * self.K * self.P))
        #: Newton-CG's Hessian products read every cg_stride-th row (held once): its P × P preconditioner
        #: wants a few rows per feature, not per parameter.
        self.cg_stride = max(1, rows.n_rows // max(CG_HESSIAN_ROWS, HESSIAN_ROWS_PER_PARAMETER * self.P))
        self._samples = {}  # stride -> (row numbers, their features): the samples the Hessians are summed over
        self._last = None  # (θ's bytes, f) of the last evaluation: ``objective`` reads it without a pass
        self._y64 = None  # the 0/1 labels as float64, for the binary pass (made at its first use)
        self.passes = 0

    def with_l2(self, l2):
        """This loss at another penalty ``l2`` (a new C): the rows and the held Hessian samples shared."""
        other = copy.copy(self)
        other.l2, other._last, other.passes = l2, None, 0
        return other

    def _sampled(self, start):
        """The rows of a block starting at row ``start`` that the Hessian sums: every ``stride``-th row of X."""
        return slice((-start) % self.stride, None, self.stride)

    @property
    def n_params(self):
        """K·P: the length of θ."""
        return self.K * self.P

    def penalty_mask(self):
        """1.0 where θ is penalised (coefficients), 0.0 at the intercepts; shape (K, P)."""
        mask = np.ones((self.K, self.P))
        mask[:, self.D:] = 0.0
        return mask

    def evaluate(self, theta, hessian=False):
        """Return (f, gradient, Hessian or None) of the scaled objective at θ (K·P,), one pass over the rows."""
        Theta = theta.reshape(self.K, self.P)
        K, P = self.K, self.P
        f, G = 0.0, np.zeros((K, P))
        H = np.zeros((K * P, K * P)) if hessian else None
        Q = np.zeros((K * P, K * P)) if hessian and K > 1 else None
        bare, D = self.rows.bare, self.D
        W = Theta[:, :D].T if bare else Theta.T
        with single_threaded_blas():
            for s, e, Zt in self.rows.blocks():
                y, w = self.labels[s:e], self.weights[s:e]
                if K == 1 and not sp.issparse(Zt) and Zt.flags.c_contiguous:
                    # Dense rows: loss, gradient and scores in one pass over Zt.
                    F, f_block = self._binary_pass(Zt, W[:, 0], Theta[0, D] if bare else 0.0, s, e, G)
                    f += f_block
                    if hessian:
                        h = self._sampled(s)
                        self._binary_hessian_add(Zt[h], self.stride * w[h], expit(F[h]), H)
                    continue
                F = _times(Zt, W, self.n_threads)
                if bare:
                    F += Theta[:, D]
                if K == 1:
                    f1 = F[:, 0]
                    f += float(np.dot(w, np.logaddexp(0.0, f1) - np.where(y == 1, f1, 0.0)))
                    p = expit(f1)
                    R = (w * (p - y))[:, None]
                    if hessian:
                        h = self._sampled(s)
                        self._binary_hessian_add(Zt[h], self.stride * w[h], p[h], H)
                else:
                    top = F.max(axis=1, keepdims=True)
                    E = np.exp(F - top)
                    total = E.sum(axis=1)
                    picked = F[np.arange(len(y)), y]
                    f += float(np.dot(w, top[:, 0] + np.log(total) - picked))
                    Pr = E / total[:, None]
                    R = Pr.copy()
                    R[np.arange(len(y)), y] -= 1.0
                    R *= w[:, None]
                    if hessian:
                        h = self._sampled(s)
                        self._multinomial_hessian(self.rows.augmented(Zt[h]), self.stride * w[h], Pr[h], H, Q)
                if bare:
                    G[:, :D] += _transposed_times(Zt, R).T
                    G[:, D] += R.sum(axis=0)
                else:
                    G += _transposed_times(Zt, R).T
        self.passes += 1
        mask = self.penalty_mask()
        f += 0.5 * self.l2 * float(np.sum((Theta * mask) ** 2))
        self._last = (np.asarray(theta, dtype=np.float64).tobytes(), f)
        G += self.l2 * Theta * mask
        if hessian:
            if Q is not None:
                H -= Q
            _mirror_lower(H)
            H[np.diag_indices_from(H)] += self.l2 * mask.ravel()
        return f, G.ravel(), H

    def _binary_pass(self, Zt, coef, intercept, s, e, G):
        """Scores of the dense rows s:e and their loss (returned), their gradient added into G: one pass."""
        if self._y64 is None:
            self._y64 = np.asarray(self.labels, dtype=np.float64)
        n, chunks = e - s, logistic_chunks(e - s)
        F = np.empty(n)
        part_loss, part_resid = np.empty(chunks), np.empty(chunks)
        part_grad = np.empty((chunks, self.D))
        binary_logistic_pass(Zt, np.ascontiguousarray(coef, dtype=np.float64), float(intercept), self._y64[s:e],
                             np.ascontiguousarray(self.weights[s:e]), F, part_loss, part_grad, part_resid,
                             self.n_threads)
        G[0, :self.D] += part_grad.sum(axis=0)
        if self.rows.bare:
            G[0, self.D] += float(part_resid.sum())
        return F, float(part_loss.sum())

    def _binary_hessian_add(self, Zh, sw, p, H):
        """Add the lower triangle of the binary Hessian of rows Zh (weights ``sw``, probabilities ``p``) into H.

        That is [Zh 1]ᵀ diag(v²) [Zh 1] for bare rows, Zhᵀ diag(v²) Zh
        otherwise, with v² = sw·p·(1 − p); the intercept's row is summed in
        Zh's dtype (a float32 sample's), widened.
        """
        D = self.D
        v = np.sqrt(sw * p * (1.0 - p))
        weighted_gram_add(Zh, v, H[:D, :D], self.n_threads, self.hessian_dtype, chunk_bytes=WORK_BYTES)
        if self.rows.bare:
            H[D, :D] += np.asarray(Zh.T @ (v * v).astype(Zh.dtype), dtype=np.float64).ravel()
            H[D, D] += float(np.sum(v * v))

    def _multinomial_hessian(self, Zt, w, Pr, H, Q):
        """Add blockdiag(Z̃ᵀ diag(w p_k) Z̃) into H and the Gram of rows √w_i (p_i ⊗ z̃_i) into Q (lower triangles)."""
        K, P = self.K, self.P
        for k in range(K):
            block = H[k * P:(k + 1) * P, k * P:(k + 1) * P]
            weighted_gram_add(Zt, np.sqrt(w * Pr[:, k]), block, self.n_threads, np.float64, chunk_bytes=WORK_BYTES)
        step = max(1, WORK_BYTES // (8 * K * P))  # rows of the (n, K·P) matrix held at once
        root = np.sqrt(w)
        for s in range(0, Zt.shape[0], step):
            Zs = Zt[s:s + step]
            parts = [scaled_rows(Zs, root[s:s + step] * Pr[s:s + step, k]) for k in range(K)]
            gram_add(sp.hstack(parts, format="csr") if sp.issparse(Zs) else np.hstack(parts), Q, self.n_threads)

    def objective(self, theta):
        """The scaled objective at θ: the last evaluation's when it was at this θ (bit for bit), else a pass."""
        if self._last is not None and self._last[0] == np.asarray(theta, dtype=np.float64).tobytes():
            return self._last[1]
        return self.evaluate(theta)[0]

    def _sample_rows(self, stride):
        """(index, bare features) of every ``stride``-th row, gathered at the first call and held.

        In float64 when it takes at most ``SAMPLE_FLOAT64_BYTES`` or all the
        rows are held in float64 (or CSR), else in float32: it only steers the step.
        """
        if stride not in self._samples:
            index = np.arange(0, self.rows.n_rows, stride)
            small = len(index) * self.D * 8 <= SAMPLE_FLOAT64_BYTES
            dtype = np.float64 if small or self.rows.held is not None else np.float32
            self._samples[stride] = (index, self.rows.sample(index, dtype))
        return self._samples[stride]

    def sampled_hessian(self, theta):
        """The Hessian ``evaluate(θ, hessian=True)`` sums (every ``stride``-th row), from the held sample: no pass.

        ``newton_cholesky`` uses it, when the loss has it, to refresh its
        Hessian at a point whose loss and gradient it already has.
        """
        index, Zs = self._sample_rows(self.stride)
        K, P, D = self.K, self.P, self.D
        Theta = theta.reshape(K, P)
        bare = self.rows.bare
        H = np.zeros((K * P, K * P))
        w = self.stride * self.weights[index]
        with single_threaded_blas():
            F = np.asarray(_times(Zs, Theta[:, :D].T if bare else Theta.T, self.n_threads), dtype=np.float64)
            if bare:
                F += Theta[:, D]
            if K == 1:
                self._binary_hessian_add(Zs, w, expit(F[:, 0]), H)
            else:
                Q = np.zeros((K * P, K * P))
                Pr = softmax(F, axis=1)
                self._multinomial_hessian(self.rows.augmented(Zs), w, Pr, H, Q)
                H -= Q
        _mirror_lower(H)
        H[np.diag_indices_from(H)] += self.l2 * self.penalty_mask().ravel()
        return H

    def sampled_curvature(self, theta, previous=None):
        """The Hessian at θ over every ``cg_stride``-th row (held), as ``newton_cg`` reads it (``SampledCurvature``).

        ``previous`` (a ``SampledCurvature`` or None) lends its preconditioner.
        """
        index, Zs = self._sample_rows(self.cg_stride)
        ws = self.weights[index]
        return SampledCurvature(Zs, ws / ws.sum(), theta, self.K, self.D, self.rows.bare,
                                self.l2 * self.penalty_mask(), self.n_threads, previous)

    def null_direction(self):
        """The unit direction θ's objective does not change along (multinomial intercepts shifted together), or None."""
        if self.K == 1 or self.P == self.D:
            return None
        v = np.zeros((self.K, self.P))
        v[:, self.D] = 1.0 / np.sqrt(self.K)
        return v.ravel()


# ------------------------------------------------------------------ solvers
class _Factor:
    """H (the Hessian a Newton step solves with), factored once and reused while it is kept.

    Cholesky, H made definite along the multinomial intercepts' null
    direction (``null``: the gradient has no component there, so the step
    gets none either); a least-squares solve if H is still singular, unless
    ``strict`` (then ``LinAlgError``).
    """

    def __init__(self, H, null, strict=False):
        self.H, self.null, self.factor = H, null, None
        A = H if null is None else H + np.outer(null, null) * max(1.0, float(np.mean(np.diag(H))))
        with single_threaded_blas():  # threaded potrf's bits depend on its thread count
            try:
                self.factor = scipy.linalg.cho_factor(A, lower=True, check_finite=False)
            except np.linalg.LinAlgError:
                if strict:
                    raise
                self.A = A

    def direction(self, g):
        """The step d solving H d = −g."""
        with single_threaded_blas():
            if self.factor is not None:
                d = scipy.linalg.cho_solve(self.factor, -g, check_finite=False)
            else:
                d = scipy.linalg.lstsq(self.A, -g, check_finite=False, cond=1e-12)[0]
        if self.null is not None:
            d -= self.null * float(self.null @ d)
        return d

    def half_decrement(self, d):
        """½·dᵀHd."""
        with single_threaded_blas():
            return 0.5 * float(d @ (self.H @ d))


class HessianCarry:
    """The data part of ``newton_cholesky``'s last Hessian (without the penalty), carried along a C path.

    Only the penalty of the Hessian changes with C, so the next C of a path
    (``logistic_path``) starts from this one plus its own penalty: a
    factorisation instead of a new Hessian.  ``data`` is None until the
    first Hessian.
    """

    def __init__(self):
        self.data = None


def newton_cholesky(loss, theta, max_iter, tol, log=None, sampled_hessian=None, carry=None):
    """Newton's method with step halving and a lazily refreshed Hessian; return (θ, iterations, converged, fell back).

    Stops when max |gradient| <= tol and ½·dᵀHd <= tol (scikit-learn's
    ``NewtonSolver``'s criterion).  The Hessian (a pass costing N·(K·P)²
    flops, against 2·N·K·P for the gradient) is kept, with its factor, for
    the next step while the last full step shrank max |gradient| at least
    ``KEEP_HESSIAN`` times; otherwise it is summed again at the new point.
    If the step cannot decrease the objective even at rounding level,
    L-BFGS finishes from there with the iterations left.

    ``sampled_hessian``: a callable θ -> the Hessian at θ without a pass over
    every row (``LogisticLoss.sampled_hessian``, from its held row sample);
    None: each Hessian is summed by ``loss.evaluate(θ, hessian=True)`` in a
    pass (then the trial point after a fresh Hessian sums one too).  A
    sampled Hessian makes Newton converge linearly; when, near the optimum
    (half decrement <= ``QUADRATIC_DECREMENT``), a fresh one's full step is
    slow and the steps it would still take cost more than a Hessian over
    every row (``_every_row_pays``), the rest of the solve sums every row.

    ``carry``: a ``HessianCarry`` holding the data part of the previous fit's
    last Hessian (a C path): the first step uses it with this loss's
    penalty (as a kept Hessian: summed again if its step fails), and every
    new Hessian is left in it.  None: no carry.
    """
    null = loss.null_direction()
    sampled = sampled_hessian
    penalty = loss.l2 * loss.penalty_mask().ravel()

    def factored(H):
        if carry is not None:
            carry.data = H.copy()
            carry.data[np.diag_indices_from(H)] -= penalty
        return _Factor(H, null, strict=loss.hessian_dtype == np.float32)

    def hessian_at(theta, f=None, g=None):
        while True:
            if sampled is None:
                f, g, H = loss.evaluate(theta, hessian=True)
            else:
                if f is None:
                    f, g, _ = loss.evaluate(theta)
                H = sampled(theta)
            try:
                return f, g, factored(H)
            except np.linalg.LinAlgError:  # float32 products lost definiteness: sum it again in float64
                if log is not None:
                    log("newton-cholesky: the float32 Hessian is not positive definite; summing it in float64")
                loss.hessian_dtype = np.float64

    factor = None
    if carry is not None and carry.data is not None:
        H = carry.data.copy()
        H[np.diag_indices_from(H)] += penalty
        try:
            factor = _Factor(H, null, strict=True)
        except np.linalg.LinAlgError:
            factor = None
    if factor is None:
        f, g, factor = hessian_at(theta)
        fresh = True
    else:  # the carried Hessian is a kept one: summed again here if its step fails
        f, g, _ = loss.evaluate(theta)
        fresh = False
    # After a step that called for a new Hessian, the next trial point's pass sums one too: when that
    # step is taken with too little progress, its Hessian is then at hand without a pass of its own.
    summed = sampled is None
    expect_new = summed
    eps = np.finfo(np.float64).eps
    it = 0
    while it < max_iter:
        it += 1
        d = factor.direction(g)
        slope = float(g @ d)
        t, accepted, Ht = 1.0, False, None
        if slope < 0:
            for _ in range(MAX_HALVINGS + 1):
                ft, gt, Ht = loss.evaluate(theta + t * d, hessian=expect_new and t == 1.0)
                if ft <= f + ARMIJO * t * slope:
                    accepted = True
                    break
                # At rounding level: accept a step that does not raise the loss and shrinks the gradient.
                if ft - f <= 64 * eps * abs(f) and np.abs(gt).sum() < np.abs(g).sum():
                    accepted = True
                    break
                t, Ht = t / 2, None
        if not accepted and not fresh:  # a stale Hessian: sum it again here and retry this step
            f, g, factor = hessian_at(theta, f, g)
            fresh, expect_new = True, summed
            it -= 1
            continue
        if not accepted:
            if log is not None:
                log(f"newton-cholesky: no decrease along the Newton step at iteration {it}; lbfgs continues")
            warnings.warn(f"newton-cholesky: the line search found no decrease at iteration {it} (rounding "
                          f"or an ill-conditioned Hessian); lbfgs continues from there.", ConvergenceWarning,
                          stacklevel=4)
            theta, n_lbfgs, converged = lbfgs(loss, theta, max(1, max_iter - it), tol, log, warn=True)
            return theta, it + n_lbfgs, converged, True
        shrink = float(np.max(np.abs(gt))) / max(float(np.max(np.abs(g))), np.finfo(float).tiny)
        theta, f, g = theta + t * d, ft, gt
        decrement = factor.half_decrement(d)
        converged = float(np.max(np.abs(g))) <= tol and decrement <= tol
        if log is not None:
            log(f"newton-cholesky iteration {it}: objective {f:.10g}, max|gradient| {np.max(np.abs(g)):.3g}, "
                f"step {t:g}, half Newton decrement {decrement:.3g}, Hessian {'new' if fresh else 'kept'}")
        if converged:
            return theta, it, True, False
        if t == 1.0 and shrink <= KEEP_HESSIAN:
            fresh = expect_new = False
            continue
        if (loss.stride > 1 and fresh and t == 1.0 and decrement <= QUADRATIC_DECREMENT
                and _every_row_pays(loss, shrink, np.max(np.abs(g)), tol)):
            # Near the optimum a fresh sample's Hessian gave a slow full step: the sample's error limits the
            # rate, so the rest of this solve sums its Hessians over every row (Newton's quadratic convergence).
            if log is not None:
                log(f"newton-cholesky: the sampled Hessian's step shrank the gradient only {shrink:.2g} times; "
                    f"its Hessians summed over every row from iteration {it + 1}")
            sampled, loss.stride, Ht = None, 1, None  # (a Hessian from the trial pass was the sample's)
        fresh, expect_new = True, summed
        factor = None
        if Ht is not None:
            try:
                factor = factored(Ht)
            except np.linalg.LinAlgError:
                loss.hessian_dtype = np.float64
        if factor is None:
            f, g, factor = hessian_at(theta, f, g)
    return theta, max_iter, False, False


def _every_row_pays(loss, rate, gmax, tol):
    """True when a Hessian over every row costs less than the sampled Newton steps it saves.

    Sampled steps converge linearly (``rate``: the gradient's last shrink
    factor); with every row's Hessian about two more steps suffice.  Costs
    per row in the Hessian's multiply-adds: a full Hessian (K·P)², a sampled
    one (K·P)²/stride, a pass ``PASS_COST``·K·P.
    """
    n = loss.K * loss.P
    steps = 1.0 if gmax <= tol else np.ceil(np.log(tol / gmax) / np.log(min(max(rate, 1e-3), 0.999)))
    return n * n + 2 * PASS_COST * n < steps * (PASS_COST * n + n * n / loss.stride)


def lbfgs(loss, theta, max_iter, tol, log=None, warn=False):
    """L-BFGS-B with scikit-learn's options (gtol=tol, ftol=64·eps, maxls=50); return (θ, iterations, converged).

    ``warn``: warn here when it stops short (``fit`` warns otherwise).
    """
    def fun(th):
        f, g, _ = loss.evaluate(th)
        return f, g

    with single_threaded_blas():
        res = scipy.optimize.minimize(fun, theta, method="L-BFGS-B", jac=True,
                                      options={"maxiter": max_iter, "maxls": 50, "gtol": tol,
                                               "ftol": 64 * np.finfo(float).eps})
    n_iter = min(int(res.nit), max_iter)
    converged = res.status == 0
    if log is not None:
        log(f"lbfgs: {n_iter} iterations, {res.nfev} evaluations, objective {res.fun:.10g}, status {res.status}: "
            f"{res.message}")
    if warn and not converged:
        warnings.warn(_lbfgs_message(n_iter, res, max_iter), ConvergenceWarning, stacklevel=4)
    return res.x, n_iter, converged


def _lbfgs_message(n_iter, res, max_iter):
    return (f"lbfgs failed to converge after {n_iter} iteration(s) (status={res.status}): {res.message}. "
            f"Increase the number of iterations to improve the convergence (max_iter={max_iter}), or scale "
            f"the data.")


def choose_logistic_solver(solver, n_params, n_classes=1, n_columns=None):
    """Resolve ``solver="auto"`` by the cost of a Newton step and its memory.

    ``"newton-cholesky"`` for one coefficient row (binary) when its
    (n_params)² float64 Hessian fits ``NEWTON_MEMORY_BYTES``: its Hessian
    costs as much as newton-cg's preconditioner and solves exactly.  For
    several classes the full Hessian costs K³ times that Gram (K² entries,
    each summed over K times more rows), so ``"newton-cg"``, whose P × P
    Gram preconditioner is shared by the classes, whenever that Gram fits
    the same budget.  ``"lbfgs"`` otherwise (no matrix held).
    """
    if solver != "auto":
        return solver
    n_columns = n_params if n_columns is None else n_columns
    if n_classes == 1 and 8 * n_params**2 <= NEWTON_MEMORY_BYTES:
        return "newton-cholesky"
    if n_classes > 1 and 8 * n_columns**2 <= NEWTON_MEMORY_BYTES:
        return "newton-cg"
    return "lbfgs"


def _initial(settings, K, D, fit_intercept):
    theta = np.zeros((K, D + int(fit_intercept)))
    if settings.init is not None and np.shape(settings.init[0]) == (K, D):  # else: another shape, start at 0
        coef, intercept = settings.init
        theta[:, :D] = coef
        if fit_intercept:
            theta[:, D] = intercept
    return theta.ravel()


# ------------------------------------------------------------------ the fit
def fit(settings, template, X, labels, n_classes, w):
    """Fit logistic regression on validated X and class indices: the in-memory pipeline, start to end.

    Parameters
    ----------
    settings : LogisticSettings
    template : feature map or None
        Cloned and fitted on X.
    X : validated ndarray or CSR matrix
    labels : ndarray (N,) of int
        Class indices in [0, n_classes).
    n_classes : int
        At least 2.
    w : ndarray (N,) float64, or None
        Sample weights (class weights included), validated.

    Returns
    -------
    LogisticResult
    """
    t0 = time.perf_counter()
    log = settings.log
    n_threads = effective_n_threads(settings.n_jobs)
    source = FeatureSource.fit(template, X, log, t0)
    N = source.n_rows
    weights = np.ones(N) if w is None else np.asarray(w, dtype=np.float64)
    total = float(weights.sum())
    rows = DesignRows(source, settings.fit_intercept, settings.chunk_size)
    loss = LogisticLoss(rows, np.asarray(labels, dtype=np.intp), weights / total, n_classes,
                        1.0 / (settings.C * total), n_threads, log)
    solver = choose_logistic_solver(settings.solver, loss.n_params, loss.K, loss.P)
    if log is not None:
        log(f"{solver} on {N} rows x {rows.width} columns ({loss.K} coefficient row(s)), features "
            f"{rows.describe()}, Hessian ({solver}) over every "
            f"{loss.cg_stride if solver == 'newton-cg' else loss.stride}-th row, "
            f"elapsed {time.perf_counter() - t0:.1f} s")
    return solve(settings, loss, solver, total, source.features, t0, "rows")


def solve(settings, loss, solver, total, features, t0, where="rows"):
    """Run ``solver`` on ``loss`` and build the ``LogisticResult``: the step ``fit`` and the Dask fit share.

    Parameters
    ----------
    settings : LogisticSettings
        ``init`` (a warm start), ``max_iter``, ``tol``, ``log``.
    loss : LogisticLoss or an object with its interface (``dask_logistic.DaskLogisticLoss``)
        ``sampled_hessian`` is None when the loss holds no row sample (Newton then sums
        each Hessian in a pass); ``"newton-cg"`` needs ``sampled_curvature``.
    solver : {"newton-cholesky", "newton-cg", "lbfgs"}
        Resolved (not "auto").
    total : float
        Σ w, the loss's scale: the objective reported is C·Σw times the scaled one.
    features : feature map or None
        The fitted map, stored in the result.
    t0 : float
        ``time.perf_counter()`` at the start of the fit, for the log.
    where : str
        What one pass reads, for the log ("rows", "Dask row blocks").

    Returns
    -------
    LogisticResult
    """
    log = settings.log
    theta = _initial(settings, loss.K, loss.D, settings.fit_intercept)
    if solver == "newton-cholesky":
        check_memory(8 * 3 * loss.n_params**2, f"the {loss.n_params} x {loss.n_params} Hessian of newton-cholesky",
                     "use solver='lbfgs', which holds no Hessian")
        theta, n_iter, converged, fell_back = newton_cholesky(loss, theta, settings.max_iter, settings.tol, log,
                                                              loss.sampled_hessian)
    elif solver == "newton-cg":
        theta, n_iter, converged, fell_back = newton_cg(loss, theta, settings.max_iter, settings.tol, log, lbfgs)
    else:
        theta, n_iter, converged = lbfgs(loss, theta, settings.max_iter, settings.tol, log, warn=True)
        fell_back = True  # not a Newton fit: lbfgs has warned itself when it stopped short
    if not converged and not fell_back:
        warnings.warn(f"{solver} did not converge within max_iter={settings.max_iter} iterations "
                      f"(tol={settings.tol:g}). Increase the number of iterations (max_iter) or use "
                      f"solver='lbfgs'.", ConvergenceWarning, stacklevel=4)
    f = loss.objective(theta)
    Theta = theta.reshape(loss.K, loss.P)
    if not np.all(np.isfinite(Theta)):
        raise ValueError(f"{settings.owner}: the solution is not finite; rescale X (e.g. with StandardScaler).")
    coef = Theta[:, :loss.D].copy()
    intercept = Theta[:, loss.D].copy() if settings.fit_intercept else np.zeros(loss.K)
    if log is not None:
        log(f"fit done ({solver}, {n_iter} iterations, {loss.passes} passes over the {where}), "
            f"elapsed {time.perf_counter() - t0:.1f} s")
    return LogisticResult(solver, coef, intercept, np.array([n_iter], dtype=np.int32), bool(converged),
                          f * settings.C * total, features)
