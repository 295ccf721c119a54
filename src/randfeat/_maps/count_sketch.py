"""PolynomialCountSketch: TensorSketch features of the polynomial kernel (Pham & Pagh 2013).

For k(x, y) = (γ⟨x, y⟩ + c₀)^p, x' = [√γ x, √c₀] (the last entry only when
c₀ ≠ 0) and p independent count sketches C_l(x')[h_l(j)] += s_l(j) x'_j
(hashes h_l(j) in [0, D), signs s_l(j) = ±1), the tensor sketch is their
circular convolution z = C_0 ⊛ ... ⊛ C_{p-1}, with E[⟨z(x), z(y)⟩] = k(x, y).
Hashes and signs are drawn exactly as scikit-learn draws them
(``sklearn_compat``), so the features equal scikit-learn's to rounding.

scikit-learn computes the convolution by FFT for every row (p complex
transforms of length D and one inverse).  A row with q nonzeros has only
q^p terms in the convolution, so rows with q^p ≤ ``direct_limit(p, D)``
are summed directly (compiled, float64 accumulators), the others through
rfft / irfft of their count sketches (scipy.fft, one batch per chunk of
rows).  The choice depends on the row alone, and pocketfft's result for a
row does not depend on the batch it is in, so a row's features do not
depend on the other rows or on the thread count.
"""

import dataclasses
import math
from numbers import Integral, Real

import numpy as np
import scipy.fft
import scipy.sparse as sp

from .._core.memory_budget import check_memory
from .._core.protocols import MapCapability, OutputKind
from .._core.threads import threads_for
from .._core.validation import N_JOBS, Interval
from .._ext import _kernel_approx_fast as _fast
from .contract import FeatureMap, MapState
from .gamma import median_heuristic_gamma
from .sklearn_compat import draw_integers, draw_rng

# A row is summed directly when its q^p terms cost less than its p + 1
# transforms: q^p <= _TERM_VS_FFT (p + 1) D log2 D.  Measured on 20000 × 54
# rows, D = 2000, one thread: a direct term ~1.6 ns (zeroing and writing the
# row included), a transform (count sketch, rfft/irfft, product) ~0.44 ns
# per D log2 D; so 0.44 / 1.6.
_TERM_VS_FFT = 0.27
# Bytes of the count sketches held for one FFT batch.
_FFT_BATCH_BYTES = 16 << 20


def draw_count_sketch(random_state, n_features, n_components, degree, coef0):
    """Draw scikit-learn's hashes and signs (one column more when coef0 ≠ 0).

    Parameters
    ----------
    random_state : None, int, RandomState or Generator
    n_features, n_components, degree : int
    coef0 : float

    Returns
    -------
    index_hash : ndarray of shape (degree, n_features (+1)), int64 in [0, n_components)
    bit_hash : ndarray of shape (degree, n_features (+1)), int64 in {-1, +1}
    """
    rng = draw_rng(random_state)
    width = n_features + (1 if coef0 != 0 else 0)
    index_hash = draw_integers(rng, n_components, (degree, width))
    bit_hash = np.asarray(rng.choice(a=[-1, 1], size=(degree, width)), dtype=np.int64)
    return index_hash, bit_hash


def direct_limit(degree, n_components):
    """Most terms q^p of a row that are summed directly rather than by FFT.

    Parameters
    ----------
    degree, n_components : int

    Returns
    -------
    int
    """
    D = max(2, int(n_components))
    return int(_TERM_VS_FFT * (degree + 1) * D * math.log2(D))


def _row_nonzeros(X, has_coef0):
    """Nonzeros per row, as the kernel counts them (explicit zeros of a CSR skipped), + the coef0 entry."""
    if sp.issparse(X):
        rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
        q = np.bincount(rows[X.data != 0], minlength=X.shape[0]).astype(np.int64)
    else:
        q = np.count_nonzero(X, axis=1).astype(np.int64)
    return q + (1 if has_coef0 else 0)


def _direct_rows(q, degree, limit):
    """Rows summed directly: q^degree <= limit (exact integer test per distinct q)."""
    if degree > _fast.MAX_DIRECT_DEGREE:
        return np.zeros(q.shape[0], dtype=bool)
    values = np.unique(q)
    direct = {int(v): int(v) ** degree <= limit for v in values}
    return np.array([direct[int(v)] for v in values], dtype=bool)[np.searchsorted(values, q)]


def count_sketch_features(X, index_hash, bit_hash, n_components, gamma, coef0, n_threads):
    """Tensor sketch of every row of X, in X's dtype.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features), float32/float64, validated
    index_hash, bit_hash : ndarray of shape (degree, n_features (+1))
        From ``draw_count_sketch``; the last column is the coef0 column when coef0 ≠ 0.
    n_components : int
    gamma, coef0 : float
        Both ≥ 0.
    n_threads : int

    Returns
    -------
    Z : ndarray of shape (n_samples, n_components), X's dtype, C order
    """
    dtype = X.dtype
    n, d = X.shape
    degree, D = index_hash.shape[0], int(n_components)
    has_coef0 = coef0 != 0
    hashes = np.ascontiguousarray(index_hash, dtype=np.int64)
    signs = np.ascontiguousarray(bit_hash, dtype=np.float64)
    check_memory(
        n * D * dtype.itemsize,
        f"the features of {n} rows ({n} x {D} {dtype.name})",
        "transform X in chunks of rows, or fit a model on them with Ridge(features=PolynomialCountSketch(...))",
    )
    out = np.empty((n, D), dtype=dtype)
    q = _row_nonzeros(X, has_coef0)
    direct = _direct_rows(q, degree, direct_limit(degree, D))
    args = (hashes, signs, float(np.sqrt(gamma)), float(np.sqrt(coef0)))
    n_threads = threads_for("fourier_output", n * D, n_threads)  # the rows' zeroing and writing dominate
    if direct.all():  # the common case: one call, no FFT buffer
        _sketch(X, args, out, np.empty((0, degree, D), dtype=dtype), np.full(n, -1, np.int64), n_threads)
        return out
    # Chunks of rows whose count sketches fit the FFT batch, whatever their mix.
    chunk = max(1, _FFT_BATCH_BYTES // (degree * D * dtype.itemsize))
    # One row's count sketches, their spectra (complex, D/2 + 1 each) and the product: ~3 degree·D values.
    check_memory(3 * degree * D * dtype.itemsize * min(chunk, n),
                 f"the FFT buffers of the tensor sketch ({min(chunk, n)} rows x {degree} x {D} {dtype.name})",
                 "use a smaller n_components or degree")
    for s in range(0, n, chunk):
        e = min(n, s + chunk)
        fft_rows = np.flatnonzero(~direct[s:e])
        slots = np.full(e - s, -1, np.int64)
        slots[fft_rows] = np.arange(fft_rows.shape[0])
        buf = np.empty((fft_rows.shape[0], degree, D), dtype=dtype)
        _sketch(X[s:e], args, out[s:e], buf, slots, n_threads)
        if fft_rows.shape[0]:
            out[s + fft_rows] = _fft_product(buf, D, n_threads)
    return out


def _sketch(X, args, out, buf, slots, n_threads):
    hashes, signs, sqrt_gamma, sqrt_coef0 = args
    if sp.issparse(X):
        max_nnz = int(np.diff(X.indptr).max()) if X.shape[0] else 0
        _fast.tensor_sketch_csr(
            X.data, X.indices, X.indptr, X.shape[1], hashes, signs, sqrt_gamma, sqrt_coef0, out, buf, slots,
            max_nnz, n_threads,
        )
    else:
        _fast.tensor_sketch_dense(
            np.ascontiguousarray(X), hashes, signs, sqrt_gamma, sqrt_coef0, out, buf, slots, n_threads
        )


def _fft_product(buf, D, n_threads):
    """irfft(Π_l rfft(C_l)) of each row's count sketches buf[i] (degree × D)."""
    spectra = scipy.fft.rfft(buf, axis=2, workers=n_threads)
    prod = spectra[:, 0]
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported by _check_no_overflow
        for level in range(1, buf.shape[1]):
            prod *= spectra[:, level]
        return scipy.fft.irfft(prod, n=D, axis=1, workers=n_threads)


@dataclasses.dataclass(frozen=True, eq=False)
class CountSketchState(MapState):
    """The fitted parameters of a ``PolynomialCountSketch``.

    Attributes
    ----------
    n_features_out : int
        D.
    index_hash : ndarray of shape (degree, n_features_in (+1)), int64 in [0, D)
    bit_hash : ndarray of shape (degree, n_features_in (+1)), int64 in {-1, +1}
    gamma, coef0 : float
        The kernel's parameters (the extra hashed column is coef0's when coef0 ≠ 0).
    """

    index_hash: np.ndarray
    bit_hash: np.ndarray
    gamma: float
    coef0: float

    def check(self):
        """Raise ValueError unless the hashes are int64 of one shape, in range (the kernel indexes with them)."""
        super().check()
        h, s = self.index_hash, self.bit_hash
        if not (isinstance(h, np.ndarray) and isinstance(s, np.ndarray) and h.ndim == 2 and h.shape == s.shape
                and h.dtype == np.int64 and s.dtype == np.int64 and h.shape[0] >= 1):
            raise ValueError("indexHash_ and bitHash_ must be int64 arrays of one shape (degree, n_features)")
        if h.size and (h.min() < 0 or h.max() >= self.n_features_out):
            raise ValueError(f"indexHash_ must hold indices in [0, {self.n_features_out})")
        if not np.isin(s, (-1, 1)).all():
            raise ValueError("bitHash_ must hold -1 and +1 only")
        if not (np.isfinite(self.gamma) and self.gamma >= 0 and np.isfinite(self.coef0) and self.coef0 >= 0):
            raise ValueError("gamma and coef0 must be finite and non-negative")

    def index_bounds(self):
        """indexHash_ in [0, D) (output columns), bitHash_ in [-1, 1] (signs; ``check`` refuses 0)."""
        return (("indexHash_", self.index_hash, 0, self.n_features_out), ("bitHash_", self.bit_hash, -1, 2))

    @property
    def n_features_in(self):
        """int: the hashed input columns (without coef0's extra column)."""
        return int(self.index_hash.shape[1]) - (1 if self.coef0 != 0 else 0)


class PolynomialCountSketch(FeatureMap):
    """Polynomial kernel approximation via Tensor Sketch (scikit-learn's PolynomialCountSketch).

    A drop-in for ``sklearn.kernel_approximation.PolynomialCountSketch``:
    the same parameters, defaults and fitted attributes, and for the same
    ``random_state`` the same hashes, so the features equal scikit-learn's
    to rounding.  The TensorSketch (Pham & Pagh, 2013) z(x) of
    x' = [√γ x, √c₀] satisfies E[⟨z(x), z(y)⟩] = (γ⟨x, y⟩ + c₀)^degree
    (``randfeat.kernel_matrix(..., kernel='polynomial')``).  It is the
    circular convolution of ``degree`` count sketches of x': a row with q
    nonzeros is summed directly over its q^degree terms when that is cheaper
    than the FFT product scikit-learn computes for every row, otherwise by
    rfft/irfft (compiled, threaded, sparse input never densified).  Unlike
    scikit-learn, which returns float64, float32 input gives float32
    features; the output is bit-identical for any ``n_jobs``.

    Parameters
    ----------
    gamma : float, default=1.0
        Parameter of the polynomial kernel (γ⟨x, y⟩ + c₀)^degree.
    degree : int, default=2
        Degree of the polynomial kernel.
    coef0 : float, default=0
        Constant term c₀ of the polynomial kernel; must be ≥ 0 (its square
        root is a feature: scikit-learn returns NaN features for c₀ < 0).
    n_components : int, default=100
        Output width D.
    random_state : int, RandomState instance, Generator or None, default=None
        Seeds the hashes (as in scikit-learn).
    n_jobs : int or None, default=None
        Threads for ``transform`` (randfeat's addition).  None or -1: all
        available cores.  The output is bit-identical whatever ``n_jobs`` is.

    Attributes
    ----------
    indexHash_ : ndarray of shape (degree, n_features (+1)), dtype=int64
        The count sketches' hash functions, values in [0, n_components); one
        column more when coef0 ≠ 0.
    bitHash_ : ndarray of shape (degree, n_features (+1)), dtype=int64
        Their signs, in {+1, −1}.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of str
        Names of features seen during fit, when X had string column names.

    See Also
    --------
    sklearn.kernel_approximation.PolynomialCountSketch : the scikit-learn class this replaces.

    Examples
    --------
    >>> import numpy as np
    >>> from randfeat import PolynomialCountSketch
    >>> X = np.random.default_rng(0).normal(size=(4, 3))
    >>> PolynomialCountSketch(degree=3, n_components=50, random_state=1).fit_transform(X).shape
    (4, 50)
    """

    output_kind = OutputKind.DENSE
    capabilities = frozenset({MapCapability.ROW_INDEPENDENT, MapCapability.KERNEL_WIDTH, MapCapability.GAMMA_PATH})
    _parameter_constraints: dict = {
        "gamma": [Interval(Real, 0, None, closed="left")],
        "degree": [Interval(Integral, 1, None, closed="left")],
        "coef0": [Interval(Real, 0, None, closed="left")],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state", np.random.Generator],
        "n_jobs": N_JOBS,
    }

    def __init__(self, *, gamma: float | np.floating = 1.0, degree: int = 2, coef0: float | np.floating = 0,
                 n_components: int = 100,
                 random_state: int | np.integer | np.random.RandomState | np.random.Generator | None = None,
                 n_jobs: int | None = None) -> None:
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.n_components = n_components
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _explain_invalid(self, name, value):
        if name == "coef0" and isinstance(value, Real) and value < 0:
            return ("The tensor sketch hashes sqrt(coef0) as a feature, so coef0 must be >= 0 "
                    "(scikit-learn's features are NaN for a negative coef0).")
        return super()._explain_invalid(name, value)

    @property
    def indexHash_(self) -> np.ndarray:  # noqa: N802 - scikit-learn's name
        """ndarray of shape (degree, n_features (+1)): the hash functions."""
        return self._fitted_state().index_hash

    @property
    def bitHash_(self) -> np.ndarray:  # noqa: N802 - scikit-learn's name
        """ndarray of shape (degree, n_features (+1)): the signs."""
        return self._fitted_state().bit_hash

    def _draw(self, summary):
        """scikit-learn's hashes and signs."""
        return self._draw_path(summary, [self.gamma])[0]

    def _auto_gamma(self, X):
        """The median heuristic's gamma for validated X in the distance this map's kernel scales."""
        return median_heuristic_gamma(X, "sqeuclidean")

    def _draw_path(self, summary, gammas):
        """One draw of the hashes, one state per gamma (gamma scales x, not the hashes)."""
        h, s = draw_count_sketch(self.random_state, summary.n_features, self.n_components, self.degree, self.coef0)
        return [CountSketchState(n_features_out=int(self.n_components), index_hash=h, bit_hash=s, gamma=float(g),
                                 coef0=float(self.coef0)) for g in gammas]

    def _transform_rows(self, state, X, n_threads):
        """The tensor sketch of each row."""
        if state.index_hash.shape[1] != X.shape[1] + (1 if state.coef0 != 0 else 0):
            raise ValueError("Number of features of test samples does not match that of training samples.")
        Z = count_sketch_features(X, state.index_hash, state.bit_hash, state.n_features_out, state.gamma,
                                  state.coef0, n_threads)
        _check_no_overflow(X, Z, state)
        return Z


def _check_no_overflow(X, Z, state):
    """Raise if a feature overflowed; |z| <= (Σ|x'|)^degree, so only near the float range is Z read."""
    values = X.data if sp.issparse(X) else X
    top = 0.0 if values.size == 0 else max(float(values.max()), -float(values.min()))
    x_sum = X.shape[1] * top * math.sqrt(state.gamma) + math.sqrt(state.coef0)
    degree = state.index_hash.shape[0]
    limit = float(np.finfo(Z.dtype).max) / 4
    if x_sum == 0 or degree * math.log(x_sum) < math.log(limit) or np.isfinite(Z).all():
        return
    raise ValueError(
        f"The degree-{degree} tensor sketch overflows {Z.dtype} (X has values up to {top:.3g}), so the "
        f"features would be infinite. Rescale X (e.g. sklearn.preprocessing.StandardScaler) or use a smaller gamma."
    )
