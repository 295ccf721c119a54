# cython: language_level=3
"""The exact kernel matrix of one-hot block features: K = Z Zᵀ from the bins (``collision_kernel``).

For a one-hot block matrix Z (random binning: G grids, one nonzero of value
c per grid and row), ``(Z Zᵀ)_ij = c² · #{g : bin_g(i) = bin_g(j)}``, the
number of grids in which rows i and j share a bin.  The kernel reads the
block-major bins (G × N, uint16 or int32 local columns, as
``_linalg.onehot.block_major_bins`` makes them) and counts the collisions
tile by tile: a tile of ``ROW_TILE`` rows against ``COL_TILE`` columns keeps
its integer counts (the bins' integer type) in the thread's scratch while the G bin rows stream
through, the comparisons running along contiguous column bins (they
vectorise); the lower triangle is counted and written to both
triangles.  Counts are integers, so the result does not depend on the
thread count or the tiling.  Chunk = one tile of rows (all columns), on
``_openmp.ChunkLoop``.  The caller validated the shapes (``_solvers/dual.py``).
"""

cimport cython
from cython cimport floating
from libc.stdint cimport int32_t, int64_t, uint16_t
from libc.string cimport memset

from ._openmp cimport ChunkLoop

import numpy as np

#: Rows per chunk and columns per tile: 16 × 1024 counts = at most 64 KiB of scratch.
DEF ROW_TILE = 16
DEF COL_TILE = 1024

ctypedef fused bin_index:
    uint16_t
    int32_t


cdef class _Collisions(ChunkLoop):
    cdef const void *bins
    cdef bint narrow
    cdef Py_ssize_t G, N
    cdef void *out
    cdef bint single
    cdef double scale

    cdef void run_chunk(self, Py_ssize_t chunk, void *scratch) noexcept nogil:
        if self.narrow:
            if self.single:
                _tile(<const uint16_t *>self.bins, self.G, self.N, <float *>self.out, self.scale, chunk,
                      <uint16_t *>scratch)
            else:
                _tile(<const uint16_t *>self.bins, self.G, self.N, <double *>self.out, self.scale, chunk,
                      <uint16_t *>scratch)
        else:
            if self.single:
                _tile(<const int32_t *>self.bins, self.G, self.N, <float *>self.out, self.scale, chunk,
                      <int32_t *>scratch)
            else:
                _tile(<const int32_t *>self.bins, self.G, self.N, <double *>self.out, self.scale, chunk,
                      <int32_t *>scratch)


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
cdef inline void _tile(const bin_index *bins, Py_ssize_t G, Py_ssize_t N, floating *out, double scale,
                       Py_ssize_t chunk, bin_index *count) noexcept nogil:
    # The counts have the bins' type (uint16 counts for uint16 bins: the
    # caller checked G < 65536), so compare and add run in one lane width.
    # Only the columns j < i1 (the lower triangle and the diagonal tile) are
    # counted; each count is written at (i, j) and (j, i).
    cdef Py_ssize_t i0 = chunk * ROW_TILE, ni = min(<Py_ssize_t>ROW_TILE, N - i0), i1 = i0 + ni
    cdef Py_ssize_t j0, nj, g, ii, jj
    cdef const bin_index *row
    cdef bin_index b
    cdef bin_index *c
    cdef floating v
    j0 = 0
    while j0 < i1:
        nj = min(<Py_ssize_t>COL_TILE, i1 - j0)
        memset(count, 0, ROW_TILE * COL_TILE * sizeof(bin_index))
        for g in range(G):
            row = bins + g * N + j0
            for ii in range(ni):
                b = bins[g * N + i0 + ii]
                c = count + ii * COL_TILE
                for jj in range(nj):
                    c[jj] = <bin_index>(c[jj] + (row[jj] == b))
        for ii in range(ni):
            c = count + ii * COL_TILE
            for jj in range(nj):
                v = <floating>(scale * c[jj])
                out[(i0 + ii) * N + j0 + jj] = v
                out[(j0 + jj) * N + i0 + ii] = v
        j0 += nj


def collision_kernel(bin_index[:, ::1] bins, floating[:, ::1] out, double scale, int n_threads):
    """Write K_ij = scale · #{g : bins[g, i] == bins[g, j]} into ``out`` (N × N, C order).

    Parameters
    ----------
    bins : ndarray of shape (G, N), uint16 or int32, C-contiguous
        Each row's bin in every block (block-major).
    out : ndarray of shape (N, N), float32 or float64, C-contiguous
    scale : float
        The squared nonzero value (1/G for random binning).
    n_threads : int
        Threads (the result does not depend on it).
    """
    cdef Py_ssize_t G = bins.shape[0], N = bins.shape[1]
    if bin_index is uint16_t and G >= 65536:
        raise ValueError(f"uint16 bins count collisions in uint16: at most 65535 blocks, got {G}")
    if out.shape[0] != N or out.shape[1] != N:
        raise ValueError(f"out must be {N} × {N}, got {out.shape[0]} × {out.shape[1]}")
    if N == 0:
        return
    cdef _Collisions loop = _Collisions()
    loop.bins = <const void *>&bins[0, 0] if G > 0 else NULL
    loop.narrow = bin_index is uint16_t
    loop.G, loop.N = G, N
    loop.out = <void *>&out[0, 0]
    loop.single = floating is float
    loop.scale = scale
    loop.n_chunks = (N + ROW_TILE - 1) // ROW_TILE
    loop.n_threads = max(1, n_threads)
    loop.scratch_bytes = ROW_TILE * COL_TILE * sizeof(int32_t)
    loop.run()
