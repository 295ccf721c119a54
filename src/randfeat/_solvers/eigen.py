"""One eigendecomposition per set of rows, and what every alpha needs from it (``RidgeCV``'s engine).

* **Gram path**: G = Z_cᵀWZ_c = VΛVᵀ from streamed sufficient statistics
  (``randfeat._solvers.stats``, no N × D matrix held), u = Vᵀb.  Per α:
  β = V diag(1/(λ+α)) u.
* **Kernel path** (a materialised dense Z with N < D, all weights > 0):
  K = Z̃_cZ̃_cᵀ = QΛQᵀ with Z̃_c = √W Z_c, whose direction √w (the intercept)
  has eigenvalue 0 exactly by construction.
* GCV from the eigenvalues and the statistics alone (``Decomposition.gcv_errors``).

Leave-one-out residuals from a decomposition: ``loo.py``.
"""

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from .._core.threads import single_threaded_blas
from .cholesky import _check_scale, check_statistics
from .pipeline import accumulate


class Decomposition:
    """One eigendecomposition and what every α needs from it (see the module docstring).

    Directions whose λ + α is below ``cutoff`` (the matrix's order times its
    dtype's eps times λ_max: the rank cut-off of LAPACK's gelsd, as the
    minimum-norm least-squares solution uses) are left out of every fit,
    so that as α → 0 the model is the minimum-norm least-squares one
    instead of rounding noise divided by a tiny λ + α.  For every α above
    the cut-off nothing is left out.
    """

    def __init__(self, *, kind, eigvals, basis, u, mean, y_mean, weight_sum, n_samples, yss, centred, dtype):
        self.kind = kind  # "gram" (basis V, D × D) or "kernel" (basis Q, N × N)
        self.eigvals = eigvals
        self.cutoff = eigvals.shape[0] * np.finfo(dtype).eps * max(float(eigvals.max(initial=0.0)), 0.0)
        self.basis = basis
        self.u = u  # gram: Vᵀb (D × K); kernel: Qᵀỹ (N × K)
        self.mean = mean
        self.y_mean = y_mean
        self.weight_sum = weight_sum
        self.n_samples = n_samples
        self.yss = yss
        self.centred = centred
        self.Zt_times = None  # kernel path: V -> (√W Z_c)ᵀ V, for the coefficients

    def kept(self, alphas):
        """Boolean (n_eig, A): the directions fitted at each alpha (see the class docstring)."""
        lam = self.eigvals[:, None]
        keep = lam + np.asarray(alphas, dtype=np.float64)[None, :] > self.cutoff
        if self.kind == "kernel":
            keep &= lam > 0  # the intercept direction (λ = 0 exactly) is not part of β
        return keep

    def coef(self, alpha_per_column):
        """Return β (K × D) with column k solved at ``alpha_per_column[k]``."""
        a = np.asarray(alpha_per_column)[None, :]
        lam = self.eigvals[:, None]
        keep = self.kept(a[0])
        if self.kind == "gram":
            return (self.basis @ np.divide(self.u, lam + a, out=np.zeros_like(self.u), where=keep)).T
        # Dual: β = Z̃ᵀ Q diag(1/(λ+α)) Qᵀỹ.
        scale = np.where(keep, 1.0 / (lam + a), 0.0)
        return self.Zt_times(self.basis @ (self.u * scale)).T

    def gcv_errors(self, alphas):
        """Return the GCV mean squared error, shape (K, A)."""
        lam = self.eigvals[:, None]
        keep = self.kept(alphas)
        a = alphas[None, :]
        dof = np.where(keep, lam / (lam + a), 0.0).sum(axis=0) + (1.0 if self.centred else 0.0)
        if self.kind == "gram":
            # RSS(α) = Σw(y−ȳ)² − Σ_j u_j² (λ_j + 2α)/(λ_j + α)²  (u = Vᵀb), the fitted part subtracted:
            # fine for N > D, where the residual is not small against Σw(y−ȳ)².
            f = np.where(keep, (lam + 2 * a) / (lam + a) ** 2, 0.0)  # (D, A)
            rss = np.maximum(self.yss[:, None] - (self.u**2).T @ f, 0.0)
        else:
            # Kernel path (N < D): each direction's residual directly, Σ_i (α/(λ_i+α))² ũ_i²,
            # no subtraction to cancel (the residual is tiny against Σw(y−ȳ)² when N < D).
            shrink = np.where(keep, a / (lam + a), 1.0)  # unfitted directions keep all of ũ
            rss = (self.u**2).T @ shrink**2
        n = self.n_samples
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(dof < n, (rss / n) / (1.0 - dof / n) ** 2, np.inf)


def gram_decomposition(blocks, Y, w, n_features, fit_intercept, n_threads, owner="RidgeCV"):
    """The gram-path decomposition of the rows ``blocks`` gives (``pipeline.FeatureSource.dense_blocks``)."""
    return eigen_of(accumulate(blocks, Y, w, n_features, fit_intercept, n_threads)[0][0], owner)


def eigen_of(stats, owner="RidgeCV"):
    """The gram-path decomposition of accumulated statistics (ValueError if they overflowed float64)."""
    check_statistics(stats, owner)
    with single_threaded_blas():  # eigh's result must not depend on the thread count
        lam, V = scipy.linalg.eigh(stats.gram(), check_finite=False)
    lam = np.maximum(lam, 0.0)
    # C order: every leave-one-out block multiplies by V (row_products would copy it each time).
    V = np.ascontiguousarray(V)
    return Decomposition(kind="gram", eigvals=lam, basis=V, u=V.T @ stats.cross, mean=stats.mean,
                         y_mean=stats.y_mean, weight_sum=stats.weight_sum, n_samples=stats.n_samples,
                         yss=stats.y_sum_squares, centred=stats.centred, dtype=stats.dtype)


def kernel_decomposition(Z, Y, w, fit_intercept, owner="RidgeCV"):
    """The kernel-path decomposition of a materialised Z, dense or CSR (N < D, all weights > 0).

    A CSR Z (binning) stays sparse: the N × N kernel of the centred rows is
    ZZᵀ − Zμ1ᵀ − 1μᵀZᵀ + μᵀμ (its entries are of the order of the data's,
    binning's at most 1), and (√W Z_c)ᵀV = Zᵀ(√w ⊙ V) − μ(√wᵀV).
    """
    dtype = Z.dtype
    sparse = sp.issparse(Z)
    Z = sp.csr_matrix(Z, dtype=np.float64) if sparse else np.asarray(Z, dtype=np.float64)
    sw = w.sum()
    mean = np.asarray(w @ Z).ravel() / sw if fit_intercept else np.zeros(Z.shape[1])
    y_mean = (w @ Y) / sw if fit_intercept else np.zeros(Y.shape[1])
    sqw = np.sqrt(w)
    yt = sqw[:, None] * (Y - y_mean)
    with single_threaded_blas(), np.errstate(over="ignore", invalid="ignore"):
        if sparse:
            Zmean = Z @ mean
            Kmat = (Z @ Z.T).toarray() - Zmean[:, None] - Zmean[None, :] + mean @ mean
            Kmat *= sqw[:, None] * sqw[None, :]
            Zt_times = lambda V: Z.T @ (sqw[:, None] * V) - np.outer(mean, sqw @ V)  # noqa: E731
        else:
            Zt = sqw[:, None] * (Z - mean)
            Kmat = Zt @ Zt.T
            Zt_times = lambda V: Zt.T @ V  # noqa: E731
        _check_scale("the kernel matrix ZZᵀ", Kmat, owner)
        _check_scale("the sum of squares of y", (yt**2).sum(axis=0), owner)
        lam, Q = scipy.linalg.eigh(Kmat, check_finite=False)
    lam = np.maximum(lam, 0.0)
    if fit_intercept:
        # √w is in the null space of Z̃_cZ̃_cᵀ; zero its eigenvalue exactly (rounding left ~1e-15·‖K‖).
        lam[np.argmax(np.abs(Q.T @ (sqw / np.linalg.norm(sqw))))] = 0.0
    dec = Decomposition(kind="kernel", eigvals=lam, basis=Q, u=Q.T @ yt, mean=mean, y_mean=y_mean,
                        weight_sum=sw, n_samples=Z.shape[0], yss=(yt**2).sum(axis=0),
                        centred=fit_intercept, dtype=dtype)
    dec.Zt_times = Zt_times
    return dec
