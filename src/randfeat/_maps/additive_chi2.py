"""AdditiveChi2Sampler: the deterministic feature map of the additive χ² kernel (Vedaldi & Zisserman 2012).

Each value x ≥ 0 becomes 2s − 1 values (s = ``sample_steps``, L =
``sample_interval``): √(xL), then for j = 1 … s−1 the pair
f_j cos(jL log x), f_j sin(jL log x) with f_j = √(2xL / cosh(πjL)); 0 maps
to 0.  The output is laid out as scikit-learn's: the block of the d square
roots, then for each j the d cosines and the d sines.  It approximates
Σⱼ 2xⱼyⱼ / (xⱼ + yⱼ) (``exact.vedaldi_chi2``).  One compiled pass writes
each output value once (dense), or the values and column indices of the
output CSR (sparse input stays sparse).
"""

import dataclasses
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.utils.validation import _check_feature_names_in, check_is_fitted

from .._core.memory_budget import check_memory
from .._core.protocols import MapCapability, OutputKind
from .._core.threads import threads_for
from .._core.validation import N_JOBS, Interval
from .._ext import _kernel_approx_fast as _fast
from .contract import FeatureMap, MapState

#: scikit-learn's default intervals (Vedaldi & Zisserman, figure 2 c).
DEFAULT_INTERVALS = {1: 0.8, 2: 0.5, 3: 0.4}


def resolve_sample_interval(sample_steps, sample_interval):
    """The sampling interval: the given one, or scikit-learn's default for 1–3 steps.

    Parameters
    ----------
    sample_steps : int
    sample_interval : float or None

    Returns
    -------
    float

    Raises
    ------
    ValueError
        scikit-learn's message when sample_interval is None and sample_steps is not 1, 2 or 3.
    """
    if sample_interval is not None:
        return float(sample_interval)
    if sample_steps not in DEFAULT_INTERVALS:
        raise ValueError("If sample_steps is not in [1, 2, 3], you need to provide sample_interval")
    return DEFAULT_INTERVALS[sample_steps]


def additive_chi2_features(X, sample_steps, sample_interval, n_threads):
    """The additive χ² map of X, dense for dense X and CSR for sparse X, in X's dtype.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features), validated, non-negative
    sample_steps : int
    sample_interval : float
    n_threads : int

    Returns
    -------
    Z : ndarray or csr_matrix of shape (n_samples, (2 * sample_steps - 1) * n_features)
        A CSR output has (2s − 1) entries per stored entry of X (an explicit
        zero of X gives explicit zeros), sorted indices.
    """
    n, d = X.shape
    nb = 2 * sample_steps - 1
    width = nb * d
    dtype = X.dtype
    # Each output value costs about what a Fourier feature does (a log, a sin/cos pair per step).
    n_threads = threads_for("fourier_output", n * width if not sp.issparse(X) else nb * X.nnz, n_threads)
    if not sp.issparse(X):
        check_memory(
            n * width * dtype.itemsize,
            f"the features of {n} rows ({n} x {width} {dtype.name})",
            "transform X in chunks of rows, or pass it as a sparse matrix",
        )
        out = np.empty((n, width), dtype=dtype)
        _fast.additive_chi2_dense(np.ascontiguousarray(X), out, sample_steps, sample_interval, n_threads)
        return out
    nnz = int(X.indptr[-1])
    counts = np.diff(X.indptr).astype(np.int64)
    index_dtype = np.int32 if max(nb * nnz, width) <= np.iinfo(np.int32).max else np.int64
    check_memory(
        nb * nnz * (dtype.itemsize + np.dtype(index_dtype).itemsize),
        f"the sparse features of {n} rows ({nb * nnz} stored values)",
        "transform X in chunks of rows",
    )
    data = np.empty(nb * nnz, dtype=dtype)
    indptr64 = X.indptr.astype(np.int64)
    max_nnz = int(counts.max()) if n else 0
    _fast.additive_chi2_csr(X.data, indptr64, data, sample_steps, sample_interval, max_nnz, n_threads)
    # Row i's output: block b of its q stored values at nb * indptr[i] + b * q, columns b * d + j.
    row = np.repeat(np.arange(n, dtype=np.int64), counts)
    within = np.arange(nnz, dtype=np.int64) - indptr64[row]
    start = nb * indptr64[row] + within
    indices = np.empty(nb * nnz, dtype=index_dtype)
    cols = X.indices.astype(index_dtype, copy=False)  # int64 when the output is wider than int32 holds
    for b in range(nb):
        indices[start + b * counts[row]] = cols + index_dtype(b * d)
    indptr = (nb * indptr64).astype(index_dtype)
    return sp.csr_matrix((data, indices, indptr), shape=(n, width))


def additive_chi2_feature_names(prefix, input_features, sample_steps):
    """scikit-learn's output names: ``{prefix}_{name}_sqrt``, then ``_cos{j}`` and ``_sin{j}`` per step.

    Parameters
    ----------
    prefix : str
        The lower-cased class name.
    input_features : array-like of str
    sample_steps : int

    Returns
    -------
    ndarray of object
    """
    names = [f"{prefix}_{name}_sqrt" for name in input_features]
    for j in range(1, sample_steps):
        names += [f"{prefix}_{name}_cos{j}" for name in input_features]
        names += [f"{prefix}_{name}_sin{j}" for name in input_features]
    return np.asarray(names, dtype=object)


_NEGATIVE = "Negative values in data passed to X in AdditiveChi2Sampler."  # scikit-learn's words


def check_non_negative(X):
    """Raise scikit-learn's ValueError if X (its stored values, for a CSR) has a negative value.

    Parameters
    ----------
    X : ndarray or CSR matrix, validated
    """
    values = X.data if sp.issparse(X) else X
    if values.size and values.min() < 0:
        raise ValueError(_NEGATIVE)


@dataclasses.dataclass(frozen=True, eq=False)
class AdditiveChi2State(MapState):
    """The (parameter-only) state of an ``AdditiveChi2Sampler``.

    Attributes
    ----------
    n_features_out : int
        (2 sample_steps − 1) · n_features_in.
    sample_steps : int
    sample_interval : float
        The resolved interval.
    """

    sample_steps: int
    sample_interval: float

    def check(self):
        """Raise ValueError unless the steps and interval are usable."""
        super().check()
        if not (isinstance(self.sample_steps, int) and self.sample_steps >= 1):
            raise ValueError("sample_steps must be an int >= 1")
        if not (np.isfinite(self.sample_interval) and self.sample_interval >= 0):
            raise ValueError("sample_interval must be finite and >= 0")
        if self.n_features_out % (2 * self.sample_steps - 1):
            raise ValueError("n_features_out must be a multiple of 2 * sample_steps - 1")

    @property
    def n_features_in(self):
        """int: the input width, n_features_out / (2 sample_steps − 1)."""
        return self.n_features_out // (2 * self.sample_steps - 1)


class AdditiveChi2Sampler(FeatureMap):
    """Approximate feature map for the additive chi2 kernel (scikit-learn's AdditiveChi2Sampler).

    A drop-in for ``sklearn.kernel_approximation.AdditiveChi2Sampler``:
    the same parameters, defaults, output layout and feature names, and
    outputs equal to scikit-learn's to rounding, dense for dense input and
    CSR for sparse input.  Deterministic: each value x ≥ 0 becomes
    2·``sample_steps`` − 1 values, √(xL), then f_j cos(jL log x) and
    f_j sin(jL log x), f_j = √(2xL / cosh(πjL)) (Vedaldi & Zisserman, 2012),
    approximating the additive kernel Σⱼ 2xⱼyⱼ / (xⱼ + yⱼ), which is
    ½ Σⱼ (xⱼ + yⱼ) + ½ ``kernel_matrix(x, y, kernel='additive_chi2')``.
    One compiled, threaded pass writes each output value once; float32 stays
    float32; bit-identical for any ``n_jobs``.  An explicitly stored zero of
    a sparse X maps to zeros (scikit-learn's sparse path gives NaN there).

    As in scikit-learn the map is stateless: ``transform`` works without
    ``fit`` (it then checks nothing against a fitted width).

    Parameters
    ----------
    sample_steps : int, default=2
        Gives the number of (complex) sampling points.
    sample_interval : float, default=None
        Sampling interval L. Must be specified when sample_steps is not 1, 2 or 3
        (the defaults are then 0.8, 0.5 and 0.4).
    n_jobs : int or None, default=None
        Threads for ``transform`` (randfeat's addition).  None or -1: all
        available cores.  The output is bit-identical whatever ``n_jobs`` is.

    Attributes
    ----------
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of str
        Names of features seen during fit, when X had string column names.

    See Also
    --------
    sklearn.kernel_approximation.AdditiveChi2Sampler : the scikit-learn class this replaces.

    Examples
    --------
    >>> import numpy as np
    >>> from randfeat import AdditiveChi2Sampler
    >>> X = np.array([[0.0, 1.0], [2.0, 0.5]])
    >>> AdditiveChi2Sampler().fit_transform(X).shape
    (2, 6)
    """

    # CSR for CSR input, dense for dense (as scikit-learn's).
    output_kind = OutputKind.SAME_AS_INPUT
    capabilities = frozenset({MapCapability.ROW_INDEPENDENT})
    _parameter_constraints: dict = {
        "sample_steps": [Interval(Integral, 1, None, closed="left")],
        "sample_interval": [Interval(Real, 0, None, closed="left"), None],
        "n_jobs": N_JOBS,
    }

    def __init__(self, *, sample_steps: int = 2, sample_interval: float | np.floating | None = None,
                 n_jobs: int | None = None) -> None:
        self.sample_steps = sample_steps
        self.sample_interval = sample_interval
        self.n_jobs = n_jobs

    def _check_param_combinations(self):
        resolve_sample_interval(self.sample_steps, self.sample_interval)

    def _draw(self, summary):
        """Nothing random: the resolved interval, and a check that the training data are non-negative."""
        if summary.min_value() < 0:  # one pass, no per-column array (2^29 columns would need GiBs)
            raise ValueError(_NEGATIVE)
        steps = int(self.sample_steps)
        return AdditiveChi2State(n_features_out=(2 * steps - 1) * summary.n_features, sample_steps=steps,
                                 sample_interval=resolve_sample_interval(steps, self.sample_interval))

    def _transform_rows(self, state, X, n_threads):
        """The map of non-negative X (dense → dense, CSR → CSR)."""
        check_non_negative(X)
        return additive_chi2_features(X, state.sample_steps, state.sample_interval, n_threads)

    def transform(self, X: "np.typing.ArrayLike | sp.spmatrix | sp.sparray") -> "np.ndarray | sp.spmatrix":
        """Apply the approximate feature map to X (fitted or not, as scikit-learn).

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array} of shape (n_samples, n_features)
            Non-negative.

        Returns
        -------
        X_new : ndarray or csr_matrix of shape (n_samples, n_features * (2 * sample_steps - 1))
            CSR for sparse X, X's float dtype.
        """
        if not self.__sklearn_is_fitted__():
            return clone(self).fit_transform(X)
        return super().transform(X)

    def get_feature_names_out(self, input_features: "np.typing.ArrayLike | None" = None) -> np.ndarray:
        """Get output feature names: scikit-learn's ``{name}_sqrt``, ``{name}_cos{j}``, ``{name}_sin{j}``.

        Parameters
        ----------
        input_features : array-like of str or None, default=None
            Only used to validate feature names with the names seen in fit.

        Returns
        -------
        feature_names_out : ndarray of str objects
        """
        check_is_fitted(self, attributes="n_features_in_")
        input_features = _check_feature_names_in(self, input_features, generate_names=True)
        return additive_chi2_feature_names(type(self).__name__.lower(), input_features,
                                           self._fitted_state().sample_steps)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.requires_fit = False
        tags.input_tags.positive_only = True
        return tags
