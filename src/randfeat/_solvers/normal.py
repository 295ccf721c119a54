"""The ridge normal operator A = Z_cᵀ W Z_c (+ αI), applied through a ``FeatureOperator`` without forming Z_c.

Z_c = Z − 1μᵀ is Z centred by its weighted column means μ (only when
fitting an intercept) and W = diag(sample weights).  Z_c is never formed:
Z_c p = Zp − 1(μᵀp) and Z_cᵀu = Zᵀu − μ(1ᵀu), so a sparse Z stays sparse.

A ``NormalOperator`` depends on Z, the weights and the intercept choice
only, so one instance serves every target and every alpha (the shift αI is
applied at ``apply`` time): anything built from it once (a preconditioner's
sketch, say) is reused across alphas and targets.
"""

import numpy as np

from .._ext._cg_fast import finish_apply, n_blocks
from .._linalg.operator import Capability
from .._core.threads import threads_for


class NormalOperator:
    """A = Z_cᵀ W Z_c for a feature operator, with the centring and weights it needs.

    Parameters
    ----------
    ops : FeatureOperator
        Products with Z (N × D).
    sample_weight : ndarray of shape (N,) float64, or None for unit weights
    fit_intercept : bool
        Centre Z (and the targets) by their weighted means.

    Attributes
    ----------
    ops : FeatureOperator
    weights : ndarray of shape (N,) or None
    weight_sum : float
        Σ w (N for unit weights).
    mean : ndarray of shape (D,) float64, or None
        Weighted column means μ of Z; None without intercept.
    """

    #: Whether CG may iterate in the dual (``DualNormalOperator``): it needs
    #: N-long vectors where the operator runs, which an operator over
    #: distributed rows does not give.
    supports_dual = True

    def __init__(self, ops, sample_weight, fit_intercept):
        self.ops = ops
        self.shape = ops.shape
        self.dtype = ops.dtype
        N = ops.shape[0]
        self.weights = sample_weight
        self.weight_sum = float(N) if sample_weight is None else float(sample_weight.sum())
        self._w_or_ones = np.ones(N) if sample_weight is None else sample_weight
        # einsum / dedicated column sums, not BLAS: threaded BLAS reductions
        # depend on the thread count.
        self.mean = ops.column_sums(self._w_or_ones) / self.weight_sum if fit_intercept else None
        self._partial_pq = {}
        self._diagonal = None  # computed on first use: CG's checks and preconditioners all read it

    def target_means(self, Y):
        """Return the weighted means ȳ of the columns of Y (zeros without intercept).

        Parameters
        ----------
        Y : ndarray of shape (N, K), float64

        Returns
        -------
        ndarray of shape (K,), float64
        """
        if self.mean is None:
            return np.zeros(Y.shape[1])
        return np.einsum("i,ik->k", self._w_or_ones, Y) / self.weight_sum

    def rhs(self, Y):
        """Return (B, ȳ): B = Z_cᵀ W (Y − ȳ) in Z's dtype (float64 sums), ȳ the target means.

        Parameters
        ----------
        Y : ndarray of shape (N, K), float64

        Returns
        -------
        B : ndarray of shape (D, K), Z's dtype
        ybar : ndarray of shape (K,), float64
        """
        ybar = self.target_means(Y)
        Yc = Y - ybar if self.mean is not None else Y
        U = Yc if self.weights is None else Yc * self.weights[:, None]
        U = np.ascontiguousarray(U, dtype=self.dtype)
        B = self.ops.rmatmat_once(U)
        if self.mean is not None:
            B -= np.outer(self.mean, U.sum(axis=0, dtype=np.float64)).astype(self.dtype)
        return B, ybar

    def diagonal(self):
        """Return diag(Z_cᵀ W Z_c) as float64, or None when the operator has no column statistics.

        Computed once (an O(nnz) pass) and kept: it does not depend on
        alpha or the targets.

        Returns
        -------
        ndarray of shape (D,), read-only, or None
        """
        if not self.ops.has(Capability.COLUMN_STATISTICS):
            return None
        if self._diagonal is None:
            diag = self.ops.column_sq_sums(self._w_or_ones)
            if self.mean is not None:
                diag -= self.weight_sum * self.mean**2
            diag.setflags(write=False)
            self._diagonal = diag
        return self._diagonal

    def vector_threads(self, n_targets):
        """Threads for a pass over a D × ``n_targets`` block (``finish_apply``)."""
        return threads_for("vector_elements", self.shape[1] * n_targets, self.ops.n_threads)

    def thin_product_threads(self, n_targets):
        """Threads for block CG's D × ``n_targets`` by ``n_targets`` × ``n_targets`` products."""
        return threads_for("thin_product_flops", self.shape[1] * n_targets**2, self.ops.n_threads)

    def apply(self, P, alpha, out=None):
        """Return ((A + αI) P, pᵀ(A + αI)p per column).

        Parameters
        ----------
        P : ndarray of shape (D, K), Z's dtype, C-contiguous
        alpha : float
        out : ndarray of shape (D, K), Z's dtype, C-contiguous, or None
            Where to write (A + αI) P (a buffer reused across iterations).

        Returns
        -------
        Q : ndarray of shape (D, K), Z's dtype
        pq : ndarray of shape (K,), float64
            Summed over fixed row blocks in block order (thread-count independent).
        """
        D, K = P.shape
        if K not in self._partial_pq:
            self._partial_pq[K] = np.zeros((n_blocks(D), K))
        part_pq = self._partial_pq[K]
        if self.mean is not None:
            mup = np.einsum("j,jk->k", self.mean, P)
            Q, s = self.ops.normal(P, mup, self.weights, out)
            mu_arg = self.mean
        else:
            Q, _ = self.ops.normal(P, np.zeros(K), self.weights, out)
            s, mu_arg = np.zeros(K), np.zeros(0)
        # Q ← Q − μ sᵀ + αP and the partial pᵀq, in one pass.
        finish_apply(Q, P, mu_arg, s, float(alpha), part_pq, self.vector_threads(K))
        return Q, part_pq.sum(axis=0)

    def intercept(self, coef, ybar):
        """Return the intercepts ȳ − μᵀw for coefficients ``coef`` (D × K), float64.

        Parameters
        ----------
        coef : ndarray of shape (D, K)
        ybar : ndarray of shape (K,)

        Returns
        -------
        ndarray of shape (K,), float64
        """
        K = coef.shape[1]
        intercept = ybar - (np.einsum("j,jk->k", self.mean, coef.astype(np.float64)) if self.mean is not None else 0.0)
        return np.asarray(intercept, dtype=np.float64).reshape(K)


class DualNormalOperator:
    """Ẑ Ẑᵀ (N × N) for Ẑ = W^½ Z_c: the dual of a ``NormalOperator``, for N much smaller than D.

    Ridge's solution is w = Ẑᵀa with (ẐẐᵀ + αI) a = ŷ, ŷ = W^½ (y − ȳ), so CG
    can iterate on N × K blocks instead of D × K: the products are the same
    two passes over Z, and the dense algebra shrinks by D / N.  Its primal
    residual is Ẑᵀ r_dual.

    Parameters
    ----------
    normal : NormalOperator
    """

    def __init__(self, normal):
        self.normal = normal
        self.ops = normal.ops
        N = normal.shape[0]
        self.shape = (N, N)
        self.dtype = normal.dtype
        self._sqrt_w = None if normal.weights is None else np.sqrt(normal.weights)
        self._work = None  # the D × K intermediate, kept: fresh, its page faults cost as much as the products

    def _scaled(self, U):
        return U if self._sqrt_w is None else U * self._sqrt_w[:, None]

    def rhs(self, Y, ybar):
        """Return ŷ = W^½ (Y − ȳ), float64 (N × K)."""
        Yc = Y - ybar if self.normal.mean is not None else Y
        return np.ascontiguousarray(self._scaled(np.asarray(Yc, dtype=np.float64)))

    def _transpose_times(self, U, dtype):
        """Ẑᵀ U (D × K) in ``dtype`` (Z's dtype: in the kept work buffer)."""
        T = np.ascontiguousarray(self._scaled(U), dtype=dtype)
        if dtype == self.dtype:
            if self._work is None or self._work.shape[1] != T.shape[1]:
                self._work = np.empty((self.normal.shape[1], T.shape[1]), dtype=dtype)
            V = self.ops.rmatmat_into(T, self._work)
        else:
            V = np.ascontiguousarray(self.ops.rmatmat_once(T), dtype=dtype)
        if self.normal.mean is not None:
            V -= np.outer(self.normal.mean, T.sum(axis=0, dtype=np.float64)).astype(dtype)
        return V

    def to_primal(self, A):
        """Return the primal coefficients w = Ẑᵀ A (D × K), float64 sums, in Z's dtype (a new array)."""
        V = self._transpose_times(np.asarray(A, dtype=np.float64), np.float64)
        return V.astype(self.dtype) if V is self._work else V.astype(self.dtype, copy=False)

    def apply(self, P, alpha, out=None):
        """Return ((ẐẐᵀ + αI) P, None), P of shape (N, K) in Z's dtype.

        Parameters
        ----------
        P : ndarray of shape (N, K)
        alpha : float
        out : ndarray of shape (N, K) or None
            Where to write the product.
        """
        V = self._transpose_times(P, self.dtype)
        S = self.ops.matmat(V).astype(np.float64)
        if self.normal.mean is not None:
            S -= np.einsum("j,jk->k", self.normal.mean, V.astype(np.float64))
        Q = self._scaled(S) + alpha * np.asarray(P, dtype=np.float64)
        if out is None:
            return Q.astype(self.dtype, copy=False), None
        np.copyto(out, Q, casting="same_kind")
        return out, None

    def thin_product_threads(self, n_targets):
        """Threads for block CG's N × ``n_targets`` thin products."""
        return threads_for("thin_product_flops", self.shape[0] * n_targets**2, self.ops.n_threads)
