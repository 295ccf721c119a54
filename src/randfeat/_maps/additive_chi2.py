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

import numpy as np
import scipy.sparse as sp

from .._ext import _kernel_approx_fast as _fast
from .._core.memory import check_memory

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
    for b in range(nb):
        indices[start + b * counts[row]] = X.indices + b * d
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
