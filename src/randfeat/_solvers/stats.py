"""Sufficient statistics of weighted ridge regression: built from blocks of rows, merged exactly.

For features Z (N × D), targets Y (N × K) and weights w, ridge with an
intercept needs only

    Σw,  the weighted means μ and ȳ,  G = Z_cᵀ W Z_c,  b = Z_cᵀ W (Y − ȳ),  Σ w (y − ȳ)²

(centred about the means; without an intercept the same sums about 0).
``RidgeStatistics`` holds them; ``StatisticsAccumulator`` builds them from
blocks of rows streamed in order (a slice of a dense Z, or a freshly
transformed chunk: Z never has to exist whole); ``RidgeStatistics.merge``
combines the statistics of two disjoint sets of rows exactly, by the
pairwise centred update of Chan, Golub & LeVeque ("Algorithms for computing
the sample variance", 1983):

    δ = μ_B − μ_A,   G = G_A + G_B + (w_A w_B / w) δδᵀ,
    b = b_A + b_B + (w_A w_B / w) δ δ_yᵀ,   likewise Σ w (y − ȳ)².

A fixed order of merges gives bit-identical results.

Offsets cost no accuracy.  Every block is centred about its own mean
before its Gram is formed, so rounding is relative to the spread of the
data, not to its offset.  Means are carried as a pair (shift, offset),
mean = shift + offset, with the shift a value the block's data were
shifted by and the offset the small float64 mean of the shifted data; the
difference of two means, δ = (shift_B − shift_A) + (offset_B − offset_A),
is then accurate to rounding even when the means are 1e6 and the spread 1,
where the rounded means alone would lose ten digits of δ.

Economy of the streamed path (``StatisticsAccumulator.add``):

* The shift costs a copy of the block, so it is skipped when it cannot
  matter: without it, rounding in Σ zzᵀ grows relative to the centred Gram
  by the factor 1 + μ_j²/σ_j² of the columns involved.  When a block shows
  max_j μ_j²/σ_j² <= SAFE_MEAN_RATIO (10⁴ for float64: at most 4 of 16
  digits; 1 for float32, whose blocks are multiplied in float32), its Gram
  is formed as it is and is centred afterwards by a rank-one correction.
* Each block's rank-one corrections (its own centring, and its mean's
  distance from the overall mean: Σ_b w_b (μ_b − μ)(μ_b − μ)ᵀ) are deferred
  and applied together, as two syrk calls, when the statistics are read
  (or when ``MAX_PENDING`` blocks wait); a per-block merge would instead
  cost an extra pass over the D × D Gram for every block.

Precision: float32 blocks are multiplied in float32 (twice the speed of
float64) but each block's product is added into float64 sums; means,
corrections, factor and solve are float64.
"""

from typing import NamedTuple

import numpy as np
from scipy.linalg.blas import get_blas_funcs

from .cholesky import RidgeSolution
from .gram import _tiled_gram_add
from .._core.memory_budget import check_memory
from .._core.threads import single_threaded_blas


def check_gram_memory(n_features, n_targets):
    """MemoryError before a D × D Gram matrix that cannot fit (it and its Cholesky factor's copy, float64).

    Parameters
    ----------
    n_features, n_targets : int
    """
    D = int(n_features)
    check_memory(8 * (2 * D * D + 2 * D * int(n_targets)), f"the {D} x {D} Gram matrix of the features and its "
                 f"Cholesky factor (float64)", "use fewer features (n_components), or solver='cg', which holds "
                 "no D x D matrix")

#: Largest max_j μ_j²/σ_j² (estimated per block) at which a block is not shifted, by dtype.
SAFE_MEAN_RATIO = {np.dtype(np.float64): 1e4, np.dtype(np.float32): 1.0}
#: Rows of a block on which its mean/spread ratio (and shift) is estimated:
#: enough for a decision whose threshold is orders of magnitude from the
#: cases it separates, and (rows in random order) a shift within ~σ/16 of
#: the block's mean; few enough to cost a tenth of a pass over a block.
_DECISION_ROWS = 256
#: Blocks whose rank-one corrections may wait before they are applied.
MAX_PENDING = 256

_dsyrk = get_blas_funcs("syrk", dtype=np.float64)


def _shift_needed(c, mean_sq, dtype):
    """True if centring by a rank-one correction alone would lose too many digits.

    Parameters
    ----------
    c : ndarray (D,) float64, column means of the block's first rows
    mean_sq : ndarray (D,) float64, column means of z² of those rows
    dtype : the block's dtype
    """
    var = np.maximum(mean_sq - c * c, 0.0)
    c2 = c * c
    # A column with nonzero mean and no spread (constant so far) is exactly
    # the cancellation case: shift.
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(c2 == 0, 0.0, np.where(var > 0, c2 / np.where(var > 0, var, 1.0), np.inf))
    return bool(ratio.max(initial=0.0) > SAFE_MEAN_RATIO[np.dtype(dtype)])


class RidgeStatistics:
    """Sufficient statistics of weighted ridge on a set of rows (centred when fitting an intercept).

    Build with ``from_block`` or ``StatisticsAccumulator``; combine with
    ``merge``; solve with ``solve``.  Picklable.

    Parameters
    ----------
    n_samples : int
        Rows seen (zero-weight rows included).
    weight_sum : float
        Σ w.
    gram_lower : ndarray of shape (D, D), float64, Fortran order
        G = Z_cᵀ W Z_c, lower triangle (the upper one is undefined).
    cross : ndarray of shape (D, K), float64
        b = Z_cᵀ W (Y − ȳ).
    y_sum_squares : ndarray of shape (K,), float64
        Σ w (y − ȳ)² per target.
    shift, mean_offset : ndarray of shape (D,), float64
        μ = shift + mean_offset (see the module docstring); zeros when not centred.
    y_shift, y_mean_offset : ndarray of shape (K,), float64
        ȳ = y_shift + y_mean_offset; zeros when not centred.
    centred : bool
        True when fitting an intercept; False: every sum is about 0.
    dtype : numpy dtype
        dtype of the features the sums came from (float32 or float64).
    """

    def __init__(self, *, n_samples, weight_sum, gram_lower, cross, y_sum_squares, shift, mean_offset,
                 y_shift, y_mean_offset, centred, dtype):
        self.n_samples = int(n_samples)
        self.weight_sum = float(weight_sum)
        self._gram = gram_lower
        self.cross = cross
        self.y_sum_squares = y_sum_squares
        self.shift = shift
        self.mean_offset = mean_offset
        self.y_shift = y_shift
        self.y_mean_offset = y_mean_offset
        self.centred = bool(centred)
        self.dtype = np.dtype(dtype)

    # ------------------------------------------------------------ building
    @classmethod
    def empty(cls, n_features, n_targets, dtype, *, fit_intercept=True):
        """Return the statistics of no rows (the identity of ``merge``).

        Parameters
        ----------
        n_features, n_targets : int
        dtype : float32 or float64
        fit_intercept : bool, default=True

        Returns
        -------
        RidgeStatistics
        """
        D, K = n_features, n_targets
        check_gram_memory(D, K)
        return cls(n_samples=0, weight_sum=0.0, gram_lower=np.zeros((D, D), order="F"), cross=np.zeros((D, K)),
                   y_sum_squares=np.zeros(K), shift=np.zeros(D), mean_offset=np.zeros(D), y_shift=np.zeros(K),
                   y_mean_offset=np.zeros(K), centred=fit_intercept, dtype=dtype)

    @classmethod
    def from_block(cls, Z, Y, sample_weight=None, *, fit_intercept=True, n_threads=1):
        """Return the statistics of one block of rows.

        Parameters
        ----------
        Z : ndarray of shape (n, D)
            float32 features stay float32 (multiplied in float32, summed in
            float64); any other dtype is taken as float64.
        Y : ndarray of shape (n, K) or (n,)
        sample_weight : ndarray of shape (n,), float64, or None for unit weights
        fit_intercept : bool, default=True
            Centre about the weighted means.
        n_threads : int, default=1
            BLAS threads for syrk (does not change the result).

        Returns
        -------
        RidgeStatistics
        """
        if Z.dtype not in (np.float32, np.float64):
            Z = Z.astype(np.float64)
        Y = np.asarray(Y, dtype=np.float64)
        Y = Y.reshape(Y.shape[0], -1)
        acc = StatisticsAccumulator(Z.shape[1], Y.shape[1], Z.dtype, fit_intercept, n_threads)
        acc.add(Z, Y, sample_weight)
        return acc.statistics()

    # ------------------------------------------------------------- reading
    @property
    def n_features(self):
        """D, the number of features."""
        return self.cross.shape[0]

    @property
    def n_targets(self):
        """K, the number of targets."""
        return self.cross.shape[1]

    @property
    def mean(self):
        """Weighted feature means μ, shape (D,), float64 (zeros when not centred)."""
        return self.shift + self.mean_offset

    @property
    def y_mean(self):
        """Weighted target means ȳ, shape (K,), float64 (zeros when not centred)."""
        return self.y_shift + self.y_mean_offset

    @property
    def gram_lower(self):
        """G = Z_cᵀ W Z_c, (D, D) float64 Fortran order, lower triangle valid (not a copy)."""
        if self._gram is None:
            raise ValueError("these statistics were consumed by solve(..., overwrite=True)")
        return self._gram

    def gram(self):
        """Return the full symmetric G = Z_cᵀ W Z_c (a new (D, D) float64 array).

        Returns
        -------
        ndarray of shape (D, D)
        """
        G = self.gram_lower
        return np.tril(G) + np.tril(G, -1).T

    def release_gram(self):
        """Hand the Gram's buffer over (for in-place factorisation); the statistics become unusable.

        Returns
        -------
        ndarray of shape (D, D), float64, Fortran order, lower triangle = G
        """
        G = self.gram_lower
        self._gram = None
        return G

    # -------------------------------------------------------------- merging
    def merge(self, other):
        """Return the statistics of the rows of ``self`` and ``other`` together (exact; inputs unchanged).

        Chan, Golub & LeVeque's pairwise update; for a fixed order of merges
        the result is bit-identical.

        Parameters
        ----------
        other : RidgeStatistics
            Same D, K and centring.

        Returns
        -------
        RidgeStatistics
        """
        if (self.n_features, self.n_targets, self.centred) != (other.n_features, other.n_targets, other.centred):
            raise ValueError(
                f"cannot merge statistics of shape (D={self.n_features}, K={self.n_targets}, centred={self.centred}) "
                f"with (D={other.n_features}, K={other.n_targets}, centred={other.centred})"
            )
        a, b = self, other
        w = a.weight_sum + b.weight_sum
        G = np.asfortranarray(a.gram_lower + b.gram_lower)
        cross = a.cross + b.cross
        yss = a.y_sum_squares + b.y_sum_squares
        # Keep the heavier side's shift: the merged mean moves towards it.
        heavy, light = (a, b) if a.weight_sum >= b.weight_sum else (b, a)
        shift, mean_offset = heavy.shift.copy(), heavy.mean_offset.copy()
        y_shift, y_mean_offset = heavy.y_shift.copy(), heavy.y_mean_offset.copy()
        if self.centred and a.weight_sum > 0 and b.weight_sum > 0:
            delta = (light.shift - heavy.shift) + (light.mean_offset - heavy.mean_offset)
            delta_y = (light.y_shift - heavy.y_shift) + (light.y_mean_offset - heavy.y_mean_offset)
            f = a.weight_sum * b.weight_sum / w
            with single_threaded_blas():
                G = _dsyrk(f, delta[:, None], beta=1.0, c=G, trans=0, lower=1, overwrite_c=1)
            cross += f * np.outer(delta, delta_y)
            yss += f * delta_y**2
            mean_offset += (light.weight_sum / w) * delta
            y_mean_offset += (light.weight_sum / w) * delta_y
        return RidgeStatistics(n_samples=a.n_samples + b.n_samples, weight_sum=w, gram_lower=G, cross=cross,
                               y_sum_squares=yss, shift=shift, mean_offset=mean_offset, y_shift=y_shift,
                               y_mean_offset=y_mean_offset, centred=self.centred,
                               dtype=np.result_type(a.dtype, b.dtype))

    # -------------------------------------------------------------- solving
    def solve(self, alpha, *, overwrite=False, singular="min_norm", owner="Ridge"):
        """Return the ridge solution for ``alpha``: ``RidgeSolution.from_statistics(self, alpha, ...)``.

        Parameters
        ----------
        alpha : float >= 0
        overwrite : bool, default=False
            Factor in this object's Gram buffer; the statistics are consumed.
        singular : {"min_norm", "raise"}, default="min_norm"
            What a Gram that is not positive definite gives (see
            ``RidgeSolution.from_statistics``).
        owner : str, default="Ridge"
            The estimator's name, for the messages.

        Returns
        -------
        RidgeSolution
        """
        return RidgeSolution.from_statistics(self, alpha, overwrite=overwrite, singular=singular, owner=owner)


class _BlockMeans(NamedTuple):
    """What a block (or a folded group of blocks) leaves for the deferred corrections."""

    weight: float  # Σ w of its rows
    shift: np.ndarray  # (D,) c, the value its rows were shifted by (float64)
    mean: np.ndarray  # (D,) m, weighted mean of its shifted rows: μ_b = c + m
    fresh: bool  # True while S still holds Σ w (z − c)(z − c)ᵀ, not the centred Gram
    y_shift: np.ndarray  # (K,)
    y_mean: np.ndarray  # (K,)


class StatisticsAccumulator:
    """Accumulate ``RidgeStatistics`` from blocks of rows given in order.

    Parameters
    ----------
    n_features : int
    n_targets : int
    dtype : float32 or float64
        dtype of the blocks (and of their syrk).
    fit_intercept : bool
    n_threads : int
        BLAS threads for dsyrk (OpenBLAS splits dsyrk's output among threads,
        not the summed dimension, so the result does not depend on it).
        Float32 blocks: threaded OpenBLAS ssyrk gives results that depend on
        the thread count (up to 8e-8 relative, measured), so their Gram is
        made of fixed tiles, each single-threaded, run on up to n_threads
        threads (``F32_GRAM_TILE``): bit-identical for any n_jobs.
    """

    def __init__(self, n_features, n_targets, dtype, fit_intercept, n_threads):
        self.D, self.K = n_features, n_targets
        self.dtype = np.dtype(dtype)
        self.fit_intercept = fit_intercept
        self.n_threads = n_threads
        check_gram_memory(self.D, self.K)
        self._S = np.zeros((self.D, self.D), dtype=np.float64, order="F")  # lower triangle used
        self._cross = np.zeros((self.D, self.K))
        self._yss = np.zeros(self.K)
        self._n_rows = 0
        self._weight_sum = 0.0
        # _BlockMeans of the blocks whose rank-one corrections wait (see _fold).
        self._pending = []
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
            shifted/weighted copy of the block is made when needed.
        """
        n = Zb.shape[0]
        self._n_rows += n
        ww = np.ones(n) if wb is None else wb
        wsum = float(ww.sum()) if n else 0.0
        if wsum <= 0:
            return  # no rows, or only zero weights: nothing but the count
        self._weight_sum += wsum
        shift = None
        if self.fit_intercept:
            # The shift decision needs only the scale of mean vs spread:
            # estimate it on the block's first rows (cheap); their mean is
            # close enough to the block's to serve as the shift.
            m = min(n, _DECISION_ROWS)
            wm = ww[:m]
            dm = float(wm.sum()) or 1.0
            # einsum, not BLAS: deterministic for any thread count.  The mean
            # may be reused as the block's (float64); the squares only
            # decide, and are summed in the block's dtype (3× faster in float32).
            head_mean = np.einsum("i,ij->j", wm, Zb[:m], dtype=np.float64) / dm
            head_sq = np.einsum("i,ij,ij->j", wm.astype(self.dtype), Zb[:m], Zb[:m]).astype(np.float64) / dm
            if _shift_needed(head_mean, head_sq, self.dtype):
                shift = head_mean.astype(self.dtype)
        if shift is not None or wb is not None:
            if owned:
                Zs = Zb
            else:
                # Reuse one buffer: a fresh 64 MB array per block pays the
                # (slow, here) first touch of its pages every time.
                if self._buf is None or self._buf.shape[0] < n:
                    self._buf = np.empty((n, self.D), dtype=self.dtype)
                Zs = self._buf[:n]
                Zs[...] = Zb
            if shift is not None:
                Zs -= shift
        else:
            Zs = Zb
        if self.fit_intercept:
            if shift is None and m == n:
                mean_s = head_mean
            else:
                mean_s = np.einsum("i,ij->j", ww, Zs, dtype=np.float64) / wsum
            y_shift = np.einsum("i,ik->k", ww, Yb) / wsum
            Ys = Yb - y_shift
            y_mean_s = np.einsum("i,ik->k", ww, Ys) / wsum
            # Centred about the block mean: Σ w (y − ȳ_b)² = Σ w (y − c)² − w (ȳ_b − c)².
            self._yss += np.einsum("i,ik->k", ww, Ys * Ys) - wsum * y_mean_s**2
        else:
            Ys = Yb
            self._yss += np.einsum("i,ik->k", ww, Ys * Ys)
        if wb is not None:
            sq = np.sqrt(wb)
            Zs *= sq[:, None].astype(self.dtype)
            Ysw = Ys * sq[:, None]
        else:
            Ysw = Ys
        Zs = np.ascontiguousarray(Zs)
        _tiled_gram_add(Zs, self._S, self.n_threads)  # float64 accumulation across blocks
        with single_threaded_blas():
            # A thin gemm (K columns) is split along the summed dimension by
            # threaded OpenBLAS (thread-count dependent result): keep it serial.
            cross = (Zs.T @ Ysw.astype(self.dtype)).astype(np.float64)
        if self.fit_intercept:
            # Σ w (z − μ_b)(y − ȳ_b)ᵀ = Σ w (z − c)(y − c_y)ᵀ − w (μ_b − c)(ȳ_b − c_y)ᵀ
            cross -= wsum * np.outer(mean_s, y_mean_s)
            c = np.zeros(self.D) if shift is None else shift.astype(np.float64)
            self._pending.append(_BlockMeans(wsum, c, mean_s, True, y_shift, y_mean_s))
            if len(self._pending) >= MAX_PENDING:
                self._fold()
        self._cross += cross

    def _fold(self):
        """Apply the pending blocks' rank-one corrections; leave one pending entry for them all.

        With μ_b = c_b + m_b the mean of block b (shift c_b, mean of its
        shifted rows m_b) and μ = Σ w_b μ_b / Σ w_b:

            G = S − Σ_fresh w_b m_b m_bᵀ + Σ_b w_b (μ_b − μ)(μ_b − μ)ᵀ

        (S holds each fresh block's Σ w (z − c_b)(z − c_b)ᵀ, and the centred
        Gram of earlier folds), likewise for the cross products and the
        target sums of squares.  Differences of means are formed as
        (c_b − c_ref) + (m_b − m), accurate even for large offsets.
        """
        w, C, M, fresh, YC, YM = (np.array(field) for field in zip(*self._pending))
        sw = float(w.sum())
        E = (C - C[0]) + M  # block means relative to the first block's shift
        mean_offset = np.einsum("b,bj->j", w, E) / sw
        dM = E - mean_offset
        EY = (YC - YC[0]) + YM
        y_mean_offset = np.einsum("b,bk->k", w, EY) / sw
        dY = EY - y_mean_offset
        sqw = np.sqrt(w)[:, None]
        with single_threaded_blas():  # threaded syrk's bits depend on its thread count
            if fresh.any():
                self._S = _dsyrk(-1.0, np.ascontiguousarray(sqw[fresh] * M[fresh]).T, beta=1.0, c=self._S,
                                 trans=0, lower=1, overwrite_c=1)
            self._S = _dsyrk(1.0, np.ascontiguousarray(sqw * dM).T, beta=1.0, c=self._S, trans=0, lower=1,
                             overwrite_c=1)
        self._cross += np.einsum("b,bj,bk->jk", w, dM, dY)
        self._yss += np.einsum("b,bk->k", w, dY * dY)
        self._pending = [_BlockMeans(sw, C[0], mean_offset, False, YC[0], y_mean_offset)]

    def statistics(self):
        """Return the ``RidgeStatistics`` of every row added (the accumulator is spent afterwards).

        Returns
        -------
        RidgeStatistics
        """
        D, K = self.D, self.K
        self._buf = None
        shift, mean_offset, y_shift, y_mean_offset = np.zeros(D), np.zeros(D), np.zeros(K), np.zeros(K)
        if self._pending:  # centred, and some weight seen
            self._fold()
            group = self._pending[0]
            shift, mean_offset, y_shift, y_mean_offset = group.shift, group.mean, group.y_shift, group.y_mean
        stats = RidgeStatistics(n_samples=self._n_rows, weight_sum=self._weight_sum, gram_lower=self._S,
                                cross=self._cross, y_sum_squares=np.maximum(self._yss, 0.0), shift=shift,
                                mean_offset=mean_offset, y_shift=y_shift, y_mean_offset=y_mean_offset,
                                centred=self.fit_intercept, dtype=self.dtype)
        self._S = self._cross = None
        return stats
