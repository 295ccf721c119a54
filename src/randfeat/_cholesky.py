"""Ridge by Cholesky: Gram matrix accumulated chunk by chunk with BLAS syrk.

``GramAccumulator`` receives the feature matrix a block of rows at a time
(a slice of a dense Z, or a freshly transformed chunk when streaming) and
keeps only D×D and D×K sums, so Z never has to exist whole.

Centring (fit_intercept) without cancellation: each chunk is shifted by a
fixed vector c (the weighted mean of the first chunk) before syrk, and the
exact centred Gram is recovered at the end with one rank-one correction,
G_c = G_c' − Σw·(μ − c)(μ − c)ᵀ, which is small because c is close to μ
(the "shifted data" algorithm for variances).  Sample weights scale the
shifted rows by √w.

The shift costs a copy of every chunk (for a dense Z held in memory, the
only copy the solver would make), so it is skipped when it cannot matter:
without the shift, rounding in Σ zzᵀ grows relative to the centred Gram by
the factor 1 + μ_j²/σ_j² of the columns involved.  When the first chunk
shows max_j c_j²/σ_j² <= SAFE_MEAN_RATIO (10⁴ for float64: at most 4 of
16 digits; 1 for float32, whose chunks are summed in float32 by ssyrk),
c is taken as 0 and chunks go to syrk as they are.  Measured on a
100000 × 2000 float64 Z: 0.3–0.5 s of a 4.6 s fit.

Precision: float32 chunks are multiplied in float32 (ssyrk, twice the speed
of dsyrk) but each chunk's product is added into float64 sums, and the
Cholesky factorisation and solve are done in float64: the Gram of float32
features with a small alpha is too ill-conditioned for a float32 Cholesky.
"""

import numpy as np
import scipy.linalg
from scipy.linalg.blas import get_blas_funcs

from ._threads import limit_blas_threads

#: Largest max_j μ_j²/σ_j² (first chunk) at which chunks are not shifted, by dtype.
SAFE_MEAN_RATIO = {np.dtype(np.float64): 1e4, np.dtype(np.float32): 1.0}
#: Rows of the first chunk on which the mean/spread ratio is estimated.
_DECISION_ROWS = 2048


def _shift_needed(c, mean_sq, dtype):
    """True if centring by the rank-one correction alone would lose too many digits.

    Parameters
    ----------
    c : ndarray (D,) float64, column means of the first chunk
    mean_sq : ndarray (D,) float64, column means of z² of the first chunk
    """
    var = np.maximum(mean_sq - c * c, 0.0)
    c2 = c * c
    # A column with nonzero mean and no spread in the first chunk (constant so
    # far) is exactly the cancellation case: shift.
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(c2 == 0, 0.0, np.where(var > 0, c2 / np.where(var > 0, var, 1.0), np.inf))
    return bool(ratio.max(initial=0.0) > SAFE_MEAN_RATIO[np.dtype(dtype)])


class GramAccumulator:
    """Accumulate Σ w (z−c)(z−c)ᵀ, Σ w (z−c)(y−c_y)ᵀ and the sums needed to centre.

    Parameters
    ----------
    n_features : int
    n_targets : int
    dtype : float32 or float64
        Dtype of the chunks (and of the syrk).
    fit_intercept : bool
    n_threads : int
        BLAS threads for syrk / gemm.
    """

    def __init__(self, n_features, n_targets, dtype, fit_intercept, n_threads):
        self.D, self.K = n_features, n_targets
        self.dtype = np.dtype(dtype)
        self.fit_intercept = fit_intercept
        self.n_threads = n_threads
        self.G = np.zeros((self.D, self.D), dtype=np.float64, order="F")  # lower triangle used
        self._G_chunk = None if self.dtype == np.float64 else np.zeros((self.D, self.D), dtype=self.dtype, order="F")
        self.ZTy = np.zeros((self.D, self.K), dtype=np.float64)
        self.sw = 0.0
        self.sz = np.zeros(self.D)  # Σ w (z − c)
        self.sy = np.zeros(self.K)  # Σ w (y − c_y)
        self.syy = np.zeros(self.K)  # Σ w (y − c_y)²
        self.n_rows = 0
        self.c = None
        self._shifted = False
        self.cy = None
        self._syrk = get_blas_funcs("syrk", dtype=self.dtype)
        self._buf = None

    def add(self, Zb, Yb, wb=None, *, owned=False):
        """Add a block of rows.

        Parameters
        ----------
        Zb : ndarray (n, D), dense, the accumulator's dtype
        Yb : ndarray (n, K), float64
        wb : ndarray (n,) float64 or None
        owned : bool
            True if Zb may be overwritten (a streamed chunk); otherwise a
            shifted/weighted copy of the chunk is made when needed.
        """
        n = Zb.shape[0]
        if n == 0:
            return
        ww = np.ones(n) if wb is None else wb
        wsum = float(ww.sum())
        if self.c is None:
            if self.fit_intercept:
                denom = wsum if wsum > 0 else 1.0
                # einsum, not BLAS: deterministic for any thread count.
                c = np.einsum("i,ij->j", ww, Zb, dtype=np.float64) / denom
                # The shift decision needs only the scale of mean vs spread:
                # estimate the spread on the chunk's first rows (cheap).
                m = min(n, _DECISION_ROWS)
                wm = ww[:m]
                dm = float(wm.sum()) or 1.0
                cm = c if m == n else np.einsum("i,ij->j", wm, Zb[:m], dtype=np.float64) / dm
                mean_sq = np.einsum("i,ij,ij->j", wm, Zb[:m], Zb[:m], dtype=np.float64) / dm
                if not _shift_needed(cm, mean_sq, self.dtype):
                    c[:] = 0.0
                self.c = c.astype(self.dtype)
                self._shifted = bool(np.any(self.c != 0))
                self.cy = np.einsum("i,ik->k", ww, Yb) / denom
            else:
                self.cy = np.zeros(self.K)
        if self._shifted or wb is not None:
            if owned:
                Zs = Zb
            else:
                # Reuse one buffer: a fresh 64 MB array per chunk pays the
                # (slow, here) first touch of its pages every time.
                if self._buf is None or self._buf.shape[0] < n:
                    self._buf = np.empty((n, self.D), dtype=self.dtype)
                Zs = self._buf[:n]
                Zs[...] = Zb
            if self._shifted:
                Zs -= self.c
        else:
            Zs = Zb
        Ys = Yb - self.cy
        self.sw += wsum
        if self.fit_intercept:
            self.sz += np.einsum("i,ij->j", ww, Zs, dtype=np.float64)
        self.sy += np.einsum("i,ik->k", ww, Ys)
        self.syy += np.einsum("i,ik->k", ww, Ys * Ys)
        if wb is not None:
            sq = np.sqrt(wb)
            Zs *= sq[:, None].astype(self.dtype)
            Ysw = Ys * sq[:, None]
        else:
            Ysw = Ys
        Zs = np.ascontiguousarray(Zs)
        with limit_blas_threads(self.n_threads):
            # OpenBLAS syrk splits its output among threads (not the summed
            # dimension), so it is deterministic for any thread count.
            # A C-ordered (n × D) chunk is an F-ordered (D × n) matrix Zsᵀ:
            # syrk with trans=0 gives Zsᵀ Zs (lower triangle) without a copy.
            if self._G_chunk is None:
                self._syrk(1.0, Zs.T, beta=1.0, c=self.G, trans=0, lower=1, overwrite_c=1)
            else:
                self._syrk(1.0, Zs.T, beta=0.0, c=self._G_chunk, trans=0, lower=1, overwrite_c=1)
                self.G += self._G_chunk  # float64 accumulation across chunks
        with limit_blas_threads(1):
            # A thin gemm (K columns) is split along the summed dimension by
            # threaded OpenBLAS (thread-count dependent result): keep it serial.
            self.ZTy += (Zs.T @ Ysw.astype(self.dtype)).astype(np.float64)
        self.n_rows += n

    def finalize(self):
        """Return (G_c lower, b_c, mu, ybar, yy_c, sw): centred sums, float64."""
        G, b = self.G, self.ZTy
        if self.fit_intercept:
            ms = self.sz / self.sw  # mean of the shifted features
            ys = self.sy / self.sw
            G -= self.sw * np.outer(ms, ms)
            b -= self.sw * np.outer(ms, ys)
            mu = self.c.astype(np.float64) + ms
            ybar = self.cy + ys
            yy = self.syy - self.sw * ys**2
        else:
            mu = None
            ybar = np.zeros(self.K)
            yy = self.syy.copy()
        self._G_chunk = None
        self._buf = None
        return G, b, mu, ybar, np.maximum(yy, 0.0), self.sw


class CholeskyRidgeSolution:
    """Ridge solution from the centred Gram: coefficients, factor and noise estimate.

    Attributes
    ----------
    coef : ndarray (K, D) float64
    intercept : ndarray (K,)
    factor : (ndarray, bool)
        ``scipy.linalg.cho_factor`` of Z_cᵀWZ_c + αI (lower).
    mu : ndarray (D,) or None
    sw : float
    noise_variance : ndarray (K,)
        σ² per target, Σ w r² / (N − dof), dof = tr(Z_c A⁻¹ Z_cᵀ W) (+1
        for the intercept).
    """


def cholesky_ridge(acc, alpha, n_samples):
    """Solve ridge from a filled ``GramAccumulator``; return a CholeskyRidgeSolution."""
    G, b, mu, ybar, yy, sw = acc.finalize()
    D = G.shape[0]
    G[np.diag_indices(D)] += alpha
    # Factor and solves on one BLAS thread: threaded potrf/potrs give results
    # that depend on the thread count.  They cost O(D³) against the Gram's
    # O(N·D²), small when N >> D.
    with limit_blas_threads(1):
        try:
            c, low = scipy.linalg.cho_factor(G, lower=True, overwrite_a=True, check_finite=False)
        except np.linalg.LinAlgError as exc:
            raise np.linalg.LinAlgError(
                "The regularised Gram matrix ZᵀZ + alpha·I is not positive definite "
                f"({exc}); use alpha > 0."
            ) from exc
        W = scipy.linalg.cho_solve((c, low), b, check_finite=False)  # (D, K)
        # tr(A⁻¹) = ‖L⁻¹‖_F² (lower triangle of trtri's output; the upper
        # part holds a copy of the input's, ignored).  D³/3 flops, like potrf.
        L_inv, info = scipy.linalg.lapack.get_lapack_funcs("trtri", (c,))(c, lower=1)
        if info != 0:
            raise np.linalg.LinAlgError(f"trtri failed with info={info}")
        tr_inv = 0.0
        for s in range(0, D, 256):
            e = min(s + 256, D)
            tr_inv += float(np.sum(np.tril(L_inv[s:e, :e], k=s) ** 2))
        del L_inv
    sol = CholeskyRidgeSolution()
    sol.coef = np.ascontiguousarray(W.T)
    sol.intercept = ybar - (mu @ W if mu is not None else 0.0)
    sol.factor = (c, low)
    sol.mu = mu
    sol.sw = sw
    # Residual sum of squares from the sums (no second pass over the data):
    # Σw r² = yᵀWy − 2wᵀb + wᵀGw and G w = b − αw  ⇒  yᵀWy − wᵀb − α‖w‖².
    rss = yy - np.einsum("ij,ij->j", W, b) - alpha * np.einsum("ij,ij->j", W, W)
    rss = np.maximum(rss, 0.0)
    dof = D - alpha * tr_inv + (1.0 if mu is not None else 0.0)
    sol.dof = dof
    denom = n_samples - dof
    sol.noise_variance = rss / denom if denom > 0 else np.full_like(rss, np.nan)
    return sol
