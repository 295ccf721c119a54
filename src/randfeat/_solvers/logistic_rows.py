"""The rows a logistic fit reads: the features of a ``FeatureSource``, held or made again, a chunk at a time.

The rows are bare (the loss adds the intercept itself, so binning's CSR is
read as it is, never copied nor densified), in float64, a chunk of rows at
a time.  Features given as a C-ordered float64 matrix (X itself, or a
fold's rows) are read where they are.  Features made from X are made once
and held when they fit ``MATERIALISE_BYTES`` in float64; beyond, the first
rows that fit ``HELD_FLOAT32_BYTES`` are held rounded to float32 (widened
back a small block at a time) and the others are made again from X at
every pass.
"""

import numpy as np
import scipy.sparse as sp

from .pipeline import row_chunks

#: Largest float64 design (N × P bytes) held between passes; beyond it dense features are held in float32 ...
MATERIALISE_BYTES = 256 * 2**20

#: ... for as many rows as fit this many bytes, the other rows' features made again at every pass.
HELD_FLOAT32_BYTES = 448 * 2**20

#: Bytes of the temporary copies a pass makes (weighted rows for the Hessian, features being held): 16 MiB.
WORK_BYTES = 16 * 2**20


class DesignRows:
    """The rows [z_i, 1] (the 1 only with an intercept), a chunk at a time, as float64 blocks.

    Features are given bare (``bare``: without the column of ones, the loss
    adds the intercept itself: no copy of the rows; binning's CSR is used as
    it is).  Dense features are held in float64 when they fit
    ``MATERIALISE_BYTES``; else the first rows that fit ``HELD_FLOAT32_BYTES``
    are held rounded to float32 (widened to float64 a small block at a time
    when read) and the rest are made again from X at every pass.

    Parameters
    ----------
    source : FeatureSource
    fit_intercept : bool
    chunk_size : int or None
    """

    def __init__(self, source, fit_intercept, chunk_size):
        self.source, self.fit_intercept = source, fit_intercept
        self.n_features = source.n_features
        self.width = self.n_features + int(fit_intercept)
        self.n_rows = source.n_rows
        self.held, self.held32, self.n_held32 = None, None, 0
        self.bare = fit_intercept
        self.chunk_size = chunk_size
        if source.sparse:  # binning: CSR stays CSR (no copy when it is float64 already), one block
            self.held, self.bounds = source.Z.astype(np.float64, copy=False).tocsr(copy=False), [(0, self.n_rows)]
            return
        D = max(1, self.n_features)
        self.bounds = list(row_chunks(self.n_rows, self.n_features, 8, chunk_size))
        step = chunk_size or max(64, WORK_BYTES // (8 * D))  # made in small chunks, then held
        given = source.Z is not None and source.Z.dtype == np.float64 and source.Z.flags.c_contiguous
        if given or self.n_rows * D * 8 <= MATERIALISE_BYTES:  # given float64 rows: held as they are, no copy
            self.held = _all_rows_float64(source)
            return
        self.n_held32 = min(self.n_rows, HELD_FLOAT32_BYTES // (4 * D))
        if self.n_held32:
            self.held32 = np.empty((self.n_held32, self.n_features), dtype=np.float32)
            for s, e, Zb, _ in self.source.rows(slice(0, self.n_held32)).dense_blocks(step):
                self.held32[s:e] = Zb

    @property
    def materialised(self):
        """True when all the rows are held between passes (not made again from X)."""
        return self.held is not None or self.n_held32 == self.n_rows

    def describe(self):
        """How the rows are kept, for the verbose log."""
        if self.held is not None:
            return "held (sparse)" if sp.issparse(self.held) else "held (float64)"
        if self.n_held32:
            return f"{self.n_held32} of {self.n_rows} rows held in float32, the rest made again at every pass"
        return "made again at every pass"

    def augmented(self, Zb):
        """[Zb, 1] for bare rows (a copy), else Zb itself."""
        if not self.bare:
            return Zb
        if sp.issparse(Zb):
            return sp.hstack([Zb, np.ones((Zb.shape[0], 1))], format="csr")
        out = np.empty((Zb.shape[0], self.width), dtype=Zb.dtype)
        out[:, :self.n_features] = Zb
        out[:, -1] = 1.0
        return out

    def blocks(self):
        """Yield (start, stop, rows): bare float64 rows, dense n × D (valid until the next block) or CSR (one block)."""
        if self.held is not None:
            if sp.issparse(self.held):
                yield 0, self.n_rows, self.held
            else:
                for s, e in self.bounds:
                    yield s, e, self.held[s:e]
            return
        if self.n_held32:
            step = self.chunk_size or max(64, WORK_BYTES // (8 * max(1, self.n_features)))
            buffer = np.empty((min(step, self.n_held32), self.n_features))
            for s in range(0, self.n_held32, step):
                e = min(s + step, self.n_held32)
                out = buffer[:e - s]
                out[...] = self.held32[s:e]
                yield s, e, out
        if self.n_held32 < self.n_rows:
            rest = self.source.rows(slice(self.n_held32, None)) if self.n_held32 else self.source
            # Chunks of WORK_BYTES beside the held rows (the default 64 MiB when nothing is held).
            step = self.chunk_size or (max(64, WORK_BYTES // (8 * max(1, self.n_features))) if self.n_held32 else None)
            for s, e, Zb, _ in rest.dense_blocks(step):
                yield s + self.n_held32, e + self.n_held32, np.asarray(Zb, dtype=np.float64)

    def sample(self, index, dtype):
        """The bare rows ``index`` (sorted row numbers) as one matrix: dense of ``dtype``, or CSR float64."""
        if self.held is not None:
            if sp.issparse(self.held):
                return self.held[index]
            step = _step(index)
            if step and self.held.dtype == dtype:  # every step-th held row: a view (fresh memory is slow to touch)
                return self.held[index[0]::step][:len(index)]
            return self.held[index].astype(dtype, copy=False)
        out = np.empty((len(index), self.n_features), dtype=dtype)
        cut = int(np.searchsorted(index, self.n_held32))
        if cut:
            out[:cut] = self.held32[index[:cut]]
        step = max(64, WORK_BYTES // (8 * max(1, self.n_features)))
        for s in range(cut, len(index), step):  # made WORK_BYTES at a time: no float64 copy of the whole sample
            out[s:s + step] = self.source.rows(index[s:s + step]).materialised()
        return out


def _all_rows_float64(source):
    """Every row's features as one C-ordered float64 matrix, made by one call: no chunk made and copied.

    Features given as they are (``source.Z``) are used without a copy when
    they are C-ordered float64 already (the loss never writes to its rows).
    """
    Z = source.Z if source.Z is not None else source.features._transform_validated(source.X)
    if sp.issparse(Z):
        Z = Z.toarray()
    return np.ascontiguousarray(Z, dtype=np.float64)


def _step(index):
    """d when ``index`` is index[0], index[0] + d, index[0] + 2d, ... (d > 0), else 0."""
    if len(index) < 2:
        return 1 if len(index) == 1 else 0
    d = int(index[1] - index[0])
    return d if d > 0 and np.array_equal(index, index[0] + d * np.arange(len(index))) else 0
