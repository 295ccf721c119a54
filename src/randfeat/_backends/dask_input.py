"""What the Dask backend checks of its input, and the ``InputSummary`` of a Dask array.

Dask is imported inside the functions (importing randfeat never imports
it; only the Dask backend calls these, on Dask input).
"""

import sys

import numpy as np

from .._core.input_stats import entry_mean_abs_deviation, entry_variance
from .._core.protocols import InputSummary


def is_dask_array(X):
    """True if X is a ``dask.array.Array`` (never imports dask)."""
    module = sys.modules.get("dask.array")
    return module is not None and isinstance(X, module.Array)


def check_known_chunks(X, name):
    """ValueError unless every block of X has a known number of rows and columns."""
    if any(np.isnan(c) for dim in X.chunks for c in dim):
        raise ValueError(
            f"{name} is a Dask array with unknown chunk sizes ({X.chunks!r}), e.g. from boolean "
            f"indexing or a Dask DataFrame's .values; randfeat needs the rows of every block. Call "
            f"{name}.compute_chunk_sizes() (or DataFrame.to_dask_array(lengths=True)) first."
        )


def float_dtype(X):
    """The float dtype X's blocks are validated to: float32 stays float32, every other dtype becomes float64."""
    return np.dtype(np.float32) if X.dtype == np.float32 else np.dtype(np.float64)


def row_blocks(X, name="X"):
    """X checked (2-D, known chunks, some rows) and rechunked to one chunk of columns."""
    if X.ndim != 2:
        raise ValueError(f"Expected a 2-D Dask array for {name}, got {X.ndim} dimension(s) (shape {X.shape})")
    check_known_chunks(X, name)
    if X.shape[0] == 0:
        raise ValueError(f"Found array with 0 sample(s) (shape={X.shape}) while a minimum of 1 is required.")
    if len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})
    return X


def header(X):
    """A one-row zero array with X's width and validated dtype: what ``validate_X`` records as the input's shape."""
    return np.zeros((1, X.shape[1]), dtype=float_dtype(X))


def aligned(X, v, name):
    """v (a Dask or NumPy array of X's length) as a Dask array with X's row chunks, or None."""
    import dask.array as da

    if v is None:
        return None
    if not is_dask_array(v):
        v = np.asarray(v)
        if v.ndim == 0 or v.shape[0] != X.shape[0]:
            raise ValueError(f"{name} has {v.shape[0] if v.ndim else 0} rows but X has {X.shape[0]}")
        return da.from_array(v, chunks=(X.chunks[0],) + tuple((s,) for s in v.shape[1:]))
    check_known_chunks(v, name)
    if v.shape[0] != X.shape[0]:
        raise ValueError(f"{name} has {v.shape[0]} rows but X has {X.shape[0]}")
    if v.chunks[0] != X.chunks[0]:
        raise ValueError(
            f"{name}'s row chunks {v.chunks[0]} differ from X's {X.chunks[0]}: each block of rows of X "
            f"needs its own {name} on the same worker. Rechunk, e.g. {name}.rechunk({{0: X.chunks[0]}})."
        )
    if v.ndim == 2 and len(v.chunks[1]) > 1:
        v = v.rechunk({1: -1})
    return v


class DaskSummary(InputSummary):
    """The ``InputSummary`` of a Dask array: each statistic by Dask's reductions, computed when asked for.

    The statistics go through the in-memory functions on a two-row
    stand-in with the same statistic, so the gamma rules give the value
    they have always given on Dask input (Dask's reductions agree with the
    in-memory two-pass sums to rounding, not bit for bit).

    Parameters
    ----------
    X : dask.array.Array, checked by ``row_blocks``
    """

    def __init__(self, X):
        self._X = X
        self.n_samples, self.n_features = X.shape

    @property
    def dtype(self):
        """The float dtype the blocks are validated to."""
        return float_dtype(self._X)

    def entry_variance(self):
        """Return ``(s, v)`` for the variance of X's entries (one Dask pass)."""
        stand_in = np.zeros((2, self.n_features), dtype=self.dtype)
        stand_in[1] = 2.0 * float(np.sqrt(self._X.astype(np.float64).var().compute()))
        return entry_variance(stand_in)

    def entry_mean_abs_deviation(self):
        """Return ``(s, m)`` for the mean absolute deviation of X's entries (two Dask passes)."""
        X64 = self._X.astype(np.float64)
        mean = float(X64.mean().compute())
        mad = float(abs(X64 - mean).mean().compute())
        return entry_mean_abs_deviation(np.array([[mean - mad] * self.n_features, [mean + mad] * self.n_features]))

    def rows(self, index):
        """Return the rows ``index``, brought to the client and validated as the in-memory fit validates rows."""
        from sklearn.utils.validation import check_array

        index = np.asarray(index)
        order = np.argsort(index, kind="stable")
        taken = self._X[index[order]].compute()  # Dask takes increasing indices cheaply
        taken = check_array(taken, accept_sparse="csr", dtype=[np.float64, np.float32])
        back = np.empty_like(order)
        back[order] = np.arange(order.size)
        return taken[back]

    def column_range(self):
        """Return each column's (minimum, maximum), by Dask's reductions."""
        import dask

        lo, hi = dask.compute(self._X.min(axis=0), self._X.max(axis=0))
        return np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
