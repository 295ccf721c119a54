"""What the Dask backend checks of its input, and the ``InputSummary`` of a Dask array.

Every block of rows is validated where it is computed (a worker), exactly
as the in-memory ``validate_X`` validates a whole X — CSR structure,
finite values, float dtype, a canonical CSR — and checked against the
shape its Dask chunks declare, before anything (Dask's reductions, a
feature map, a solver's compiled code) reads it: ``row_blocks`` returns X
with that check in its graph.  Dask is imported inside the functions
(importing randfeat never imports it; only the Dask backend calls these,
on Dask input).
"""

import numbers
import sys
import uuid

import numpy as np
import scipy.sparse as sp

from .._core.input_stats import entry_mean_abs_deviation, entry_min, entry_variance
from .._core.protocols import InputSummary
from .._core.validation import check_sample_weight, check_weight_total, validate_rows
from .tree import tree_reduce

#: Name prefix of the tasks that check blocks where they are computed.
_CHECKED = "randfeat-"
#: Where an array checked here keeps how it was made (the input, the check), in its ``__dict__``.
_ORIGIN = "_randfeat_origin"


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


def is_sparse(X):
    """True if the blocks of a Dask X are sparse matrices (its ``meta`` is not an ndarray)."""
    return not isinstance(X._meta, np.ndarray)


def check_block_shape(block, name, block_info):
    """ValueError unless a block has the shape its Dask chunks declare (a ``map_blocks`` may lie about it).

    A block with other rows than declared would silently pair rows of X
    with the wrong targets; one with other columns would let compiled code
    index past the columns the solver allocated.
    """
    info = block_info[None]
    declared = tuple(info["chunk-shape"])
    shape = tuple(np.shape(block))
    if shape != declared:
        (i, *_), rows = info["chunk-location"], info["array-location"][0]
        raise ValueError(
            f"block {i} of {name} (rows {rows[0]}:{rows[1]}) has shape {shape}, but {name}'s Dask chunks declare "
            f"{declared}: the function that made it (e.g. map_blocks with chunks=...) returned another shape "
            f"than it declared. Declare the right chunks, or call {name}.compute_chunk_sizes() first."
        )
    return block


def _validated_block(block, owner, block_info=None):
    """One row block validated as ``validate_X`` validates X (on the worker), with its declared shape."""
    return check_block_shape(validate_rows(block, owner), "X", block_info)


def _layer(A, fn, args, dtype, meta):
    """``A.map_blocks(fn, *args)`` under a fresh name, remembering how it was made (``fresh``)."""
    out = A.map_blocks(fn, *args, dtype=dtype, meta=meta, name=f"{_CHECKED}{fn.__name__[1:]}-{uuid.uuid4().hex}")
    vars(out)[_ORIGIN] = (A, fn, args, dtype, meta)
    return out


def fresh(A):
    """A (X, y or weights checked here) for one more graph: its check made again under a new name.

    Dask fuses a layer into different tasks in different graphs, and a key
    the scheduler meets again with another definition can stall it, so
    every graph this backend submits gets check tasks of its own.
    """
    origin = None if A is None else vars(A).get(_ORIGIN)
    return A if origin is None else _layer(*origin)


def without_empty_blocks(A):
    """A with its empty row blocks removed (a rechunk that moves no data), A itself if it has none.

    Boolean filtering followed by ``compute_chunk_sizes()`` leaves blocks of
    zero rows; Dask's own reductions (``var``, ``min``) and scikit-learn's
    validation of a block refuse them, so every pass here reads only the
    non-empty blocks.  X, y and sample weights are treated alike, so their
    blocks still pair up.
    """
    rows = A.chunks[0]
    if 0 not in rows or A.shape[0] == 0:
        return A
    return A.rechunk({0: tuple(n for n in rows if n)})


def row_blocks(X, name="X", owner=None):
    """X checked (2-D, known chunks, some rows), in one chunk of columns, each block validated where it is made.

    Parameters
    ----------
    X : dask.array.Array
    name : str
        For messages.
    owner : str or None
        The estimator or map's class name, as in-memory validation names it
        (an X this returned keeps the owner it was first checked for).

    Returns
    -------
    dask.array.Array
        X's blocks validated (``validate_rows``) and checked against their
        declared shape when computed; of X's float dtype.  A fresh graph
        each call (``fresh``).
    """
    if vars(X).get(_ORIGIN) is not None:
        return fresh(X)
    if X.ndim != 2:
        raise ValueError(f"Expected a 2-D Dask array for {name}, got {X.ndim} dimension(s) (shape {X.shape})")
    check_known_chunks(X, name)
    if X.shape[0] == 0:
        raise ValueError(f"Found array with 0 sample(s) (shape={X.shape}) while a minimum of 1 is required.")
    X = without_empty_blocks(X)
    if len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})
    dtype = float_dtype(X)
    meta = sp.csr_matrix((0, 0), dtype=dtype) if is_sparse(X) else np.empty((0, 0), dtype=dtype)
    return _layer(X, _validated_block, (owner,), dtype, meta)


def header(X):
    """A one-row zero array with X's width and validated dtype: what ``validate_X`` records as the input's shape."""
    return np.zeros((1, X.shape[1]), dtype=float_dtype(X))


def _declared_rows(block, name, block_info=None):
    return check_block_shape(block, name, block_info)


def scalar_weight(X, value):
    """A scalar ``sample_weight`` as scikit-learn reads one (the same weight for every row), checked as in memory.

    Returns a Dask array of X's row chunks holding that weight.
    """
    import dask.array as da

    w = check_sample_weight(value, np.empty((1, 1)))  # scikit-learn's conversion; sign, zero, NaN as in memory
    with np.errstate(over="ignore"):
        check_weight_total(float(w[0]) * X.shape[0])  # the sum of X.shape[0] such weights, as in memory
    return da.full(X.shape[0], w[0], chunks=(X.chunks[0],), dtype=np.float64)


def aligned(X, v, name):
    """v (a Dask or NumPy array of X's length) as a Dask array with X's row chunks, or None.

    The blocks of a Dask v are checked, where they are computed, against
    the rows their chunks declare.
    """
    import dask.array as da

    if v is None:
        return None
    if not is_dask_array(v):
        if name == "sample_weight" and isinstance(v, numbers.Number):
            return scalar_weight(X, v)
        v = np.asarray(v)
        if v.ndim == 0 or v.shape[0] != X.shape[0]:
            raise ValueError(f"{name} has {v.shape[0] if v.ndim else 0} rows but X has {X.shape[0]}")
        return da.from_array(v, chunks=(X.chunks[0],) + tuple((s,) for s in v.shape[1:]))
    check_known_chunks(v, name)
    if v.ndim == 0 or v.shape[0] != X.shape[0]:
        raise ValueError(f"{name} has {v.shape[0] if v.ndim else 0} rows but X has {X.shape[0]}")
    v = without_empty_blocks(v)
    if v.chunks[0] != X.chunks[0]:
        raise ValueError(
            f"{name}'s row chunks {v.chunks[0]} differ from X's {X.chunks[0]}: each block of rows of X "
            f"needs its own {name} on the same worker. Rechunk, e.g. {name}.rechunk({{0: X.chunks[0]}})."
        )
    if v.ndim == 2 and len(v.chunks[1]) > 1:
        v = v.rechunk({1: -1})
    return _layer(v, _declared_rows, (name,), v.dtype, v._meta)


# ----------------------------------------------------------- the summary
def _range(Xb):
    """Each column's (min, max) of a validated block, a CSR's zeros included; None for no rows."""
    if Xb.shape[0] == 0:
        return None
    if sp.issparse(Xb):
        return Xb.min(axis=0).toarray().ravel(), Xb.max(axis=0).toarray().ravel()
    return Xb.min(axis=0), Xb.max(axis=0)


def _merge_range(a, b):
    if a is None or b is None:
        return b if a is None else a
    return np.minimum(a[0], b[0]), np.maximum(a[1], b[1])


def _merge_min(a, b):
    return b if a is None else (a if b is None else min(a, b))


def _max_abs(Xb):
    return float(np.abs(Xb.data).max()) if Xb.nnz else 0.0


def _scaled_sum(Xb, s):
    return float(np.sum(Xb.data.astype(np.float64) / s))


def _scaled_deviation(Xb, s, mean, kind):
    """Σ (x/s − mean)² or Σ |x/s − mean| over a CSR block's entries, its implicit zeros included."""
    d = Xb.data.astype(np.float64) / s - mean
    implicit = Xb.shape[0] * Xb.shape[1] - Xb.data.shape[0]
    if kind == "square":
        return float(np.sum(np.square(d))) + implicit * mean * mean
    return float(np.sum(np.abs(d))) + implicit * abs(mean)


def _add(a, b):
    return a + b


class DaskSummary(InputSummary):
    """The ``InputSummary`` of a Dask array: each statistic by a pass over the validated blocks, when asked for.

    Dense blocks: Dask's reductions, through the in-memory functions on a
    two-row stand-in with the same statistic, so the gamma rules give the
    value they have always given on Dask input (Dask's reductions agree
    with the in-memory two-pass sums to rounding, not bit for bit).  CSR
    blocks: the in-memory two-pass formulas, their sums reduced in block
    order.  NaN or infinity in a block raises the in-memory message.

    Parameters
    ----------
    X : dask.array.Array, from ``row_blocks``
    """

    def __init__(self, X):
        self._X = X
        self.n_samples, self.n_features = X.shape

    @property
    def dtype(self):
        """The float dtype the blocks are validated to."""
        return float_dtype(self._X)

    def _reduce(self, fn, *args, combine=_add):
        import dask

        task = dask.delayed(fn, pure=True)
        (out,) = dask.compute(tree_reduce([task(b, *args) for b in fresh(self._X).to_delayed().ravel()], combine))
        return out

    def _sparse_stand_in(self, kind):
        """(s, two-row stand-in) whose statistic ``kind`` is that of a CSR X (three passes over the blocks)."""
        n_total = self.n_samples * self.n_features
        max_abs = self._reduce(_max_abs, combine=max)
        if max_abs == 0.0:
            return None
        s = float(2.0 ** np.frexp(max_abs)[1])
        mean = self._reduce(_scaled_sum, s) / n_total
        return s, mean, self._reduce(_scaled_deviation, s, mean, kind) / n_total

    def entry_variance(self):
        """Return ``(s, v)`` for the variance of X's entries."""
        if is_sparse(self._X):
            stats = self._sparse_stand_in("square")
            return (0.0, 0.0) if stats is None else (stats[0], stats[2])
        stand_in = np.zeros((2, self.n_features), dtype=self.dtype)
        stand_in[1] = 2.0 * float(np.sqrt(fresh(self._X).astype(np.float64).var().compute()))
        return entry_variance(stand_in)

    def entry_mean_abs_deviation(self):
        """Return ``(s, m)`` for the mean absolute deviation of X's entries."""
        if is_sparse(self._X):
            stats = self._sparse_stand_in("abs")
            return (0.0, 0.0) if stats is None else (stats[0], stats[2])
        mean = float(fresh(self._X).astype(np.float64).mean().compute())
        mad = float(abs(fresh(self._X).astype(np.float64) - mean).mean().compute())
        return entry_mean_abs_deviation(np.array([[mean - mad] * self.n_features, [mean + mad] * self.n_features]))

    def rows(self, index):
        """Return the rows ``index``, brought to the client (validated on the workers)."""
        index = np.asarray(index)
        order = np.argsort(index, kind="stable")
        taken = validate_rows(fresh(self._X)[index[order]].compute())  # Dask takes increasing indices cheaply
        back = np.empty_like(order)
        back[order] = np.arange(order.size)
        return taken[back]

    def training_rows(self, max_rows, random_state):
        """Return every row if there are at most ``max_rows``, else a uniform sample of that many, in row order."""
        n = self.n_samples
        if n <= max_rows:
            return self.rows(np.arange(n))
        return self.rows(np.sort(random_state.choice(n, size=max_rows, replace=False)))

    def min_value(self):
        """Return the smallest entry (a CSR's implicit zeros included): one pass, no per-column array."""
        low = self._reduce(entry_min, combine=_merge_min)
        return 0.0 if low is None else low

    def column_range(self):
        """Return each column's (minimum, maximum), a CSR's implicit zeros included.

        One task per block and the reduction tree (minima and maxima are
        exact in any grouping): fewer tasks than Dask's ``min``/``max``.
        """
        lo, hi = self._reduce(_range, combine=_merge_range)
        return np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
