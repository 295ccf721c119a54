"""Newton-CG for the logistic loss: Hessian-vector products on a held sample of rows, a Gram preconditioner.

The multinomial Hessian of K classes and P parameters per class is
(K·P)² numbers (3.2 GB for 10 classes of 2001): ``"newton-cholesky"``
cannot hold it.  ``newton_cg`` solves the Newton system by preconditioned
conjugate gradients instead, with two cheapening choices (the gradient,
the loss, the line search and the stopping test still read every row in
float64, so the optimum is the exact one; these only steer the step):

* the Hessian-vector products are summed over a systematic sample of the
  rows (every stride-th; all of them for small N), held once in float32
  (float64 when the features are held in float64 anyway): each product is
  two products with the sample's features, ~1/stride of a pass, and no
  feature is made again (sub-sampled Newton-CG: Byrd, Chin, Neveitt and
  Nocedal, SIAM J. Optim. 21(3), 2011);
* the preconditioner is I_K ⊗ G⁻¹ with G = Z̃ᵀ diag(w·σ) Z̃ + the penalty,
  one P × P weighted Gram of the sample (σ_i: the mean over classes of
  p_ik (1 − p_ik), the diagonal blocks' weights averaged), factored once
  per Newton step; when P × P does not fit the memory rule, its diagonal.

The inner solve stops as scikit-learn's ``newton-cg``: ‖r‖₁ <= η‖g‖₁, η =
min(0.5, √‖g‖₁) (Nocedal and Wright, Numerical Optimization, 7.1), at most
``MAX_INNER`` products.  The outer loop stops when max |gradient| <= tol
(scikit-learn's criterion for ``newton-cg``).

A loss object gives ``newton_cg`` what ``newton_cholesky`` and ``lbfgs``
read (``evaluate``, ``null_direction``) plus ``sampled_curvature(θ,
previous)``: an object with ``hessp(v)`` and ``precondition(r)``
(``SampledCurvature``; ``previous``, the last one or None, lends its
preconditioner).
"""

import warnings

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from scipy.special import expit, softmax
from sklearn.exceptions import ConvergenceWarning

from .._core.threads import single_threaded_blas
from .._linalg.products import row_products
from .gram import _tiled_gram_add
from .logistic_rows import WORK_BYTES

#: The most Hessian-vector products per Newton step (scikit-learn's ``maxinner``).
MAX_INNER = 200

#: The preconditioner (a P × P Gram summed and factored: the dearest part of a step) is kept for the next
#: Newton step while the last inner solve took at most this many products.
KEEP_PRECONDITIONER = 10

#: Largest P × P float64 Gram (bytes) the preconditioner factors; beyond it, its diagonal.
PRECONDITIONER_BYTES = 256 * 2**20


class SampledCurvature:
    """The Hessian of the scaled logistic objective at θ, summed over a sample of rows: products and a preconditioner.

    Parameters
    ----------
    Zs : ndarray (n, D) float32/float64 or CSR float64
        The sample's bare features (without the intercept's column).
    ws : ndarray (n,) float64
        The sample's weights, summing to 1 (the full weights' scale).
    theta : ndarray (K·P,)
    K, D : int
        Coefficient rows (1 for two classes) and features; P = D + 1 with an intercept.
    fit_intercept : bool
    penalty : ndarray (K, P)
        l2 where θ is penalised, 0 at the intercepts.
    n_threads : int
    previous : SampledCurvature or None
        Reuse its preconditioner (factored at an earlier θ) instead of summing a new one.
    """

    def __init__(self, Zs, ws, theta, K, D, fit_intercept, penalty, n_threads, previous=None):
        self.Zs, self.ws, self.K, self.D = Zs, ws, K, D
        self.P = D + int(fit_intercept)
        self.intercept, self.penalty, self.n_threads = fit_intercept, penalty, n_threads
        Theta = theta.reshape(K, self.P)
        F = self._times(Theta[:, :D])
        if fit_intercept:
            F += Theta[:, D]
        if K == 1:
            p = expit(F[:, 0])
            self.s = ws * p * (1.0 - p)  # the binary Hessian's row weights
            sigma = p * (1.0 - p)
        else:
            self.Pr = softmax(F, axis=1)
            sigma = np.mean(self.Pr * (1.0 - self.Pr), axis=1)
        if previous is not None:
            self.factor, self.diagonal = previous.factor, previous.diagonal
        else:
            self.factor = self.diagonal = None
            self._precondition_setup(ws * sigma)

    def _times(self, V):
        """Zs @ Vᵀ (n × K, float64), row by row (the same bits for any thread count)."""
        if sp.issparse(self.Zs):
            return np.asarray(self.Zs @ V.T)
        return row_products(self.Zs, np.ascontiguousarray(V.T), self.n_threads).astype(np.float64)

    def _transposed_times(self, B):
        """Zsᵀ B (D × K, float64)."""
        if sp.issparse(self.Zs):
            return np.asarray(self.Zs.T @ B)
        with single_threaded_blas():
            return (self.Zs.T @ B.astype(self.Zs.dtype)).astype(np.float64)

    def hessp(self, v):
        """H v for v of length K·P (the sampled Hessian, the penalty included)."""
        K, D = self.K, self.D
        V = v.reshape(K, self.P)
        A = self._times(V[:, :D])
        if self.intercept:
            A += V[:, D]
        if K == 1:
            B = self.s[:, None] * A
        else:
            PA = self.Pr * A
            B = self.ws[:, None] * (PA - self.Pr * PA.sum(axis=1, keepdims=True))
        out = np.empty((K, self.P))
        out[:, :D] = self._transposed_times(B).T
        if self.intercept:
            out[:, D] = B.sum(axis=0)
        out += self.penalty * V
        return out.ravel()

    def _precondition_setup(self, weights):
        """G = Z̃ᵀ diag(weights) Z̃ + the penalty, factored (or its diagonal when P × P is too large)."""
        D, P = self.D, self.P
        pen = self.penalty[0]
        if 8 * P * P > PRECONDITIONER_BYTES:
            diag = np.empty(P)
            if sp.issparse(self.Zs):
                diag[:D] = np.asarray(self.Zs.multiply(self.Zs).T @ weights).ravel()
            else:
                diag[:D] = np.einsum("ij,ij,i->j", self.Zs, self.Zs, weights, dtype=np.float64)
            if self.intercept:
                diag[D] = weights.sum()
            self.diagonal = diag + pen + np.finfo(np.float64).tiny
            return
        G = np.zeros((P, P))
        root = np.sqrt(weights)
        with single_threaded_blas():
            if sp.issparse(self.Zs):
                Zw = sp.diags(root) @ self.Zs
                G[:D, :D] = np.tril((Zw.T @ Zw).toarray())
            else:
                step = max(64, WORK_BYTES // (8 * max(1, D)))
                for s in range(0, self.Zs.shape[0], step):
                    Zw = self.Zs[s:s + step] * root[s:s + step, None].astype(self.Zs.dtype)
                    _tiled_gram_add(Zw, G[:D, :D], self.n_threads)
            if self.intercept:
                G[D, :D] = np.asarray(self.Zs.T @ weights.astype(self.Zs.dtype)).ravel()  # one dtype: BLAS
                G[D, D] = weights.sum()
            G = np.tril(G) + np.tril(G, -1).T
            G[np.diag_indices_from(G)] += pen
            # The intercept's entry is the sample's total weight (> 0) and the penalty makes the rest definite;
            # a tiny ridge guards float32 Gram rounding.
            G[np.diag_indices_from(G)] += 1e-12 * max(1.0, float(np.max(np.diag(G))))
            try:
                self.factor = scipy.linalg.cho_factor(G, lower=True, overwrite_a=True, check_finite=False)
            except np.linalg.LinAlgError:
                self.diagonal = np.diag(G).copy()

    def precondition(self, r):
        """M⁻¹ r with M = I_K ⊗ G."""
        R = r.reshape(self.K, self.P)
        if self.factor is None:
            return (R / self.diagonal).ravel()
        with single_threaded_blas():
            return scipy.linalg.cho_solve(self.factor, R.T, check_finite=False).T.ravel()


def _project(v, null):
    if null is not None:
        v -= null * float(null @ v)
    return v


def preconditioned_cg(curvature, b, null, tolerance):
    """Solve H x = b (approximately) by preconditioned CG from x = 0; return (x, products).

    Stops when ‖r‖₁ <= ``tolerance``, after ``MAX_INNER`` products, or at a
    direction of non-positive curvature; every vector is kept orthogonal to
    ``null`` (the multinomial intercepts' common shift, H's null direction).
    """
    x = np.zeros_like(b)
    r = _project(b.copy(), null)
    z = _project(curvature.precondition(r), null)
    p = z.copy()
    rz = float(r @ z)
    for i in range(MAX_INNER):
        if np.abs(r).sum() <= tolerance:
            return x, i
        Hp = curvature.hessp(p)
        curv = float(p @ Hp)
        if curv <= 0.0:  # only from rounding: H is definite off ``null``
            return (x if i else p), i + 1
        alpha = rz / curv
        x += alpha * p
        r -= alpha * Hp
        _project(r, null)
        z = _project(curvature.precondition(r), null)
        rz, rz_old = float(r @ z), rz
        p = z + (rz / rz_old) * p
    return x, MAX_INNER


#: Armijo's sufficient-decrease constant and the most step halvings of the line search.
ARMIJO = 2.0**-11
MAX_HALVINGS = 20


def newton_cg(loss, theta, max_iter, tol, log=None, fallback=None):
    """Sub-sampled, preconditioned Newton-CG with step halving; return (θ, iterations, converged, fell back).

    Parameters
    ----------
    loss : LogisticLoss or an object of its interface with ``sampled_curvature``
    theta : ndarray (K·P,)
        The start.
    max_iter : int
        Newton steps at most.
    tol : float
        Stop when max |gradient| <= tol.
    log : callable or None
    fallback : callable or None
        ``lbfgs``'s signature: finishes from θ with the iterations left when
        the line search finds no decrease (rounding); None: stop there.
    """
    null = loss.null_direction()
    eps = np.finfo(np.float64).eps
    f, g, _ = loss.evaluate(theta)
    curvature, products = None, None
    for it in range(1, max_iter + 1):
        if float(np.max(np.abs(g))) <= tol:
            return theta, it - 1, True, False
        keep = curvature is not None and products <= KEEP_PRECONDITIONER
        curvature = loss.sampled_curvature(theta, curvature if keep else None)
        g1 = float(np.abs(g).sum())
        d, products = preconditioned_cg(curvature, -g, null, min(0.5, np.sqrt(g1)) * g1)
        slope = float(g @ d)
        if not slope < 0:  # cannot happen with a definite H; the steepest descent direction then
            d, slope = -_project(g.copy(), null), -float(g @ g)
        t, accepted = 1.0, False
        for _ in range(MAX_HALVINGS + 1):
            ft, gt, _ = loss.evaluate(theta + t * d)
            if ft <= f + ARMIJO * t * slope:
                accepted = True
                break
            # At rounding level: accept a step that does not raise the loss and shrinks the gradient.
            if ft - f <= 64 * eps * abs(f) and np.abs(gt).sum() < g1:
                accepted = True
                break
            t /= 2
        if not accepted:
            if fallback is None:
                return theta, it, False, False
            if log is not None:
                log(f"newton-cg: no decrease along the Newton step at iteration {it}; lbfgs continues")
            warnings.warn(f"newton-cg: the line search found no decrease at iteration {it} (rounding or an "
                          f"ill-conditioned Hessian); lbfgs continues from there.", ConvergenceWarning, stacklevel=4)
            theta, n_more, converged = fallback(loss, theta, max(1, max_iter - it), tol, log, warn=True)
            return theta, it + n_more, converged, True
        theta, f, g = theta + t * d, ft, gt
        if log is not None:
            log(f"newton-cg iteration {it}: objective {f:.10g}, max|gradient| {np.max(np.abs(g)):.3g}, step {t:g}, "
                f"{products} Hessian products, preconditioner {'kept' if keep else 'new'}")
    return theta, max_iter, float(np.max(np.abs(g))) <= tol, False
