"""Statistics of a validated input array that parameter draws read (``gamma="scale"``), computed without cancellation.

``MemorySummary``, the ``InputSummary`` of a validated in-memory array,
answers with these; a Dask array's answers come from Dask's reductions
(``randfeat._backends.dask_input``).
"""

import numpy as np
import scipy.sparse as sp

from .memory_budget import check_memory
from .protocols import InputSummary

# Rows (dense) or stored values (CSR) per pass of the variance: bounds the
# float64 temporaries to a few MB whatever the size of X.
_VARIANCE_CHUNK = 1 << 18


def _value_chunks(X):
    """Yield X's stored values (float64, 1-D) a few MB at a time; CSR: its data only."""
    if sp.issparse(X):
        for s in range(0, X.data.shape[0], _VARIANCE_CHUNK):
            yield X.data[s : s + _VARIANCE_CHUNK].astype(np.float64)
    else:
        X = np.asarray(X)
        step = max(1, _VARIANCE_CHUNK // X.shape[1])
        for s in range(0, X.shape[0], step):
            yield X[s : s + step].astype(np.float64).ravel()


def entry_variance(X):
    """Variance of all n·d entries of X (a CSR's implicit zeros included), without cancellation.

    Two passes over X (mean, then the centred sum of squares — never
    E[x²] − E[x]², which loses every digit when the mean is large against the
    spread), on X divided by a power of two s ≥ max|x| so that no partial sum
    overflows; returned as ``(s, v)`` with the variance equal to s²·v
    (v ≤ 1), so a variance beyond float64 is still described.

    Parameters
    ----------
    X : ndarray or CSR matrix, validated (finite)

    Returns
    -------
    s : float
        The power-of-two scale (0 for an all-zero X).
    v : float
        Variance of X / s.
    """
    n_total = X.shape[0] * X.shape[1]
    max_abs = max((float(np.abs(c).max()) for c in _value_chunks(X) if c.size), default=0.0)
    if max_abs == 0.0:
        return 0.0, 0.0
    s = float(2.0 ** np.frexp(max_abs)[1])  # dividing by a power of two is exact
    mean = sum(float(np.sum(c / s)) for c in _value_chunks(X)) / n_total
    ssd = sum(float(np.sum(np.square(c / s - mean))) for c in _value_chunks(X))
    n_implicit = n_total - (X.data.shape[0] if sp.issparse(X) else n_total)
    ssd += n_implicit * mean * mean  # the CSR's implicit zeros
    return s, ssd / n_total


def entry_mean_abs_deviation(X):
    """Mean absolute deviation of all n·d entries of X from their mean (a CSR's implicit zeros included).

    Two passes (the mean, then Σ|x − mean|), on X divided by a power of two
    s ≥ max|x| so no partial sum overflows; returned as ``(s, m)`` with the
    deviation equal to s·m.

    Parameters
    ----------
    X : ndarray or CSR matrix, validated (finite)

    Returns
    -------
    s : float
        The power-of-two scale (0 for an all-zero X).
    m : float
        Mean absolute deviation of X / s.
    """
    n_total = X.shape[0] * X.shape[1]
    max_abs = max((float(np.abs(c).max()) for c in _value_chunks(X) if c.size), default=0.0)
    if max_abs == 0.0:
        return 0.0, 0.0
    s = float(2.0 ** np.frexp(max_abs)[1])
    mean = sum(float(np.sum(c / s)) for c in _value_chunks(X)) / n_total
    sad = sum(float(np.sum(np.abs(c / s - mean))) for c in _value_chunks(X))
    n_implicit = n_total - (X.data.shape[0] if sp.issparse(X) else n_total)
    sad += n_implicit * abs(mean)  # the CSR's implicit zeros
    return s, sad / n_total


def entry_min(X):
    """The smallest of X's n·d entries as a float (a CSR's implicit zeros included); None when X has none.

    One pass over the stored values, no per-column array: what a map's fit
    reads to check a domain (the chi² maps' non-negative input).

    Parameters
    ----------
    X : validated ndarray or CSR matrix

    Returns
    -------
    float or None
    """
    if X.shape[0] == 0 or X.shape[1] == 0:
        return None
    if not sp.issparse(X):
        return float(X.min())
    low = float(X.data.min()) if X.data.size else 0.0
    return min(low, 0.0) if X.data.size < X.shape[0] * X.shape[1] else low


class MemorySummary(InputSummary):
    """The ``InputSummary`` of a validated in-memory array (statistics computed on demand).

    Parameters
    ----------
    X : validated ndarray or CSR matrix
    """

    def __init__(self, X):
        self._X = X
        self.n_samples, self.n_features = X.shape

    @property
    def dtype(self):
        """X's float dtype."""
        return self._X.dtype

    def entry_variance(self):
        """Return ``(s, v)`` with the variance of X's entries s²·v (``entry_variance``)."""
        return entry_variance(self._X)

    def entry_mean_abs_deviation(self):
        """Return ``(s, m)`` with the mean absolute deviation of X's entries s·m."""
        return entry_mean_abs_deviation(self._X)

    def rows(self, index):
        """Return the rows ``index`` of X."""
        return self._X[np.asarray(index)]

    def min_value(self):
        """Return X's smallest entry (a CSR's implicit zeros included), with no per-column array."""
        low = entry_min(self._X)
        return 0.0 if low is None else low

    def training_rows(self, max_rows, random_state):
        """Return X, every row: in memory a map is fitted on the whole training input."""
        return self._X

    def column_range(self):
        """Return each column's (minimum, maximum), a CSR's implicit zeros included."""
        X = self._X
        check_memory(2 * X.shape[1] * X.dtype.itemsize, f"the range of each of {X.shape[1]} columns",
                     "use fewer columns")
        if sp.issparse(X):
            return X.min(axis=0).toarray().ravel(), X.max(axis=0).toarray().ravel()
        return X.min(axis=0), X.max(axis=0)
