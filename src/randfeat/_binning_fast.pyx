# cython: language_level=3
"""Compiled kernels of RandomBinningFeatures: floor-and-hash, vocabularies, CSR.

No validation and no policy here (randfeat._binning does both): inputs are
finite, bins fit in int64 (|bin| <= 2^62), arrays have the documented shapes.
Work is split over rows in fixed chunks of ``ROW_CHUNK`` rows (or over grids
for the vocabulary); every row and every grid is computed independently of the
others, so the result is bit-identical for any thread count and any schedule.
The arithmetic and the hash are defined in _csrc/randfeat_binning.h.
"""

from cython cimport floating
from cython.parallel cimport parallel, prange, threadid
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free
from libc.string cimport memcpy

import numpy as np

from ._cycommon cimport index_t

cdef extern from "randfeat_binning.h" nogil:
    ctypedef struct rf_hstore:
        uint64_t *h64
        uint32_t *lo
        uint32_t *hi
    int rf_binning_init()
    const char *rf_isa_name(int isa)
    # a function pointer in C, called like a function
    void rf_hash_row(const double *x, int64_t d, int64_t Ppad, const double *U,
                     const double *INV, uint64_t *h)
    void rf_hstore_put(const rf_hstore *s, int64_t k, uint64_t h)
    void rf_lookup_row(const uint64_t *h, int64_t P, const uint64_t *keys, const int64_t *koff,
                       const uint32_t *dir, const int64_t *doff, const int *bits, int64_t *cols)
    int rf_grid_vocab_group(const rf_hstore *s, int64_t n, int64_t P, int64_t p0, int G,
                            int64_t budget, uint64_t **keys_out, int64_t *nkeys_out,
                            uint32_t **dir_out, int *bits_out, void *ind, int ind64)

cdef int _ISA = rf_binning_init()

# Rows per work unit; fixed so the work split never depends on the thread count.
cdef enum:
    ROW_CHUNK = 256
    # Grids whose vocabularies are built in one pass over the rows, and the
    # memory their hash sets may take together before falling back to one grid.
    GRID_GROUP = 8
    GROUP_BUDGET = 16 * 1024 * 1024

LANES = 8  # grids are padded to a multiple of this (see the header)


def vector_isa():
    """Return the vector code path the hashing kernel uses ('baseline', 'avx2' or 'avx512')."""
    return rf_isa_name(_ISA).decode()


cdef inline void _load_row(bint is_csr, const floating[:, :] X, const floating[::1] Xd,
                           const int64_t[::1] Xi, const int64_t[::1] Xp, Py_ssize_t i,
                           Py_ssize_t d, double *buf) noexcept nogil:
    """Row i of X as float64 into buf (a CSR row is scattered into zeros)."""
    cdef Py_ssize_t m, q
    if is_csr:
        for m in range(d):
            buf[m] = 0.0
        for q in range(Xp[i], Xp[i + 1]):
            buf[Xi[q]] = Xd[q]
    else:
        for m in range(d):
            buf[m] = X[i, m]


cdef rf_hstore _store(uint64_t[::1] h64, uint32_t[::1] lo, uint32_t[::1] hi):
    cdef rf_hstore s
    s.h64 = &h64[0] if h64.shape[0] > 0 else NULL
    s.lo = &lo[0] if lo.shape[0] > 0 else NULL
    s.hi = &hi[0] if hi.shape[0] > 0 else NULL
    return s


def hash_rows(bint is_csr, const floating[:, :] X, const floating[::1] Xd,
              const int64_t[::1] Xi, const int64_t[::1] Xp, Py_ssize_t n, Py_ssize_t d,
              const double[:, ::1] U, const double[:, ::1] INV, Py_ssize_t P,
              uint64_t[::1] h64, uint32_t[::1] lo, uint32_t[::1] hi,
              double[:, ::1] rowbuf, uint64_t[:, ::1] hashbuf, int n_threads):
    """Hash every row of X for every grid; hash of (row i, grid p) goes to slot i*P + p.

    X is dense (``X``, any strides) or CSR (``Xd``, ``Xi``, ``Xp`` with int64
    indices); ``U``, ``INV`` are (d, Ppad); the store is ``h64`` or the
    ``lo``/``hi`` halves (see rf_hstore); ``rowbuf`` (n_threads, >= d) and
    ``hashbuf`` (n_threads, >= Ppad) are per-thread scratch.
    """
    cdef rf_hstore s = _store(h64, lo, hi)
    cdef Py_ssize_t Ppad = U.shape[1]
    cdef Py_ssize_t nchunks = (n + ROW_CHUNK - 1) // ROW_CHUNK
    cdef Py_ssize_t c, i, p, t
    cdef double *buf
    cdef uint64_t *hb
    with nogil, parallel(num_threads=n_threads):
        t = threadid()
        buf = &rowbuf[t, 0]
        hb = &hashbuf[t, 0]
        for c in prange(nchunks, schedule='dynamic'):
            for i in range(c * ROW_CHUNK, min((c + 1) * ROW_CHUNK, n)):
                _load_row(is_csr, X, Xd, Xi, Xp, i, d, buf)
                rf_hash_row(buf, d, Ppad, &U[0, 0], &INV[0, 0], hb)
                for p in range(P):
                    rf_hstore_put(&s, i * P + p, hb[p])


def build_vocabularies(uint64_t[::1] h64, uint32_t[::1] lo, uint32_t[::1] hi,
                       Py_ssize_t n, Py_ssize_t P, int n_threads,
                       int32_t[::1] ranks32=None, int64_t[::1] ranks64=None,
                       int64_t group_budget=GROUP_BUDGET):
    """Sorted distinct hashes of each grid and their lookup directories.

    Returns ``(keys, key_offsets, directory, dir_offsets, dir_bits)``: grid p's
    keys are ``keys[key_offsets[p]:key_offsets[p+1]]`` (uint64, ascending),
    its directory ``directory[dir_offsets[p]:dir_offsets[p+1]]`` (uint32,
    2**dir_bits[p] + 1 entries).  Tasks are groups of ``GRID_GROUP``
    neighbouring grids (one pass over the rows per group, a group falls back
    to one grid at a time if its sets outgrow ``GROUP_BUDGET`` bytes); each
    grid's result is independent of grouping and of which thread built it
    (``group_budget=0`` forces one grid at a time; the tests compare both).

    If ``ranks32`` or ``ranks64`` (the output CSR's indices, length n*P) is
    given, slot i*P + p then receives the rank of row i's hash within grid p,
    found while the group's vocabularies are still in cache (fit_transform);
    ``finish_training_csr`` turns ranks into columns.
    """
    cdef rf_hstore s = _store(h64, lo, hi)
    cdef uint64_t **kp = <uint64_t **>calloc(P, sizeof(uint64_t *))
    cdef uint32_t **dp = <uint32_t **>calloc(P, sizeof(uint32_t *))
    cdef int64_t[::1] nk = np.zeros(P, dtype=np.int64)
    cdef int[::1] bits = np.zeros(P, dtype=np.intc)
    cdef Py_ssize_t ngroups = (P + GRID_GROUP - 1) // GRID_GROUP
    cdef int32_t[::1] status = np.zeros(ngroups, dtype=np.int32)
    cdef Py_ssize_t p, grp, p0, g
    cdef int G, st
    cdef void *ind = NULL
    cdef int ind64 = 0
    if ranks64 is not None and ranks64.shape[0] > 0:
        ind = &ranks64[0]
        ind64 = 1
    elif ranks32 is not None and ranks32.shape[0] > 0:
        ind = &ranks32[0]
    if kp == NULL or dp == NULL:
        free(kp)
        free(dp)
        raise MemoryError("binning vocabulary")
    try:
        with nogil:
            for grp in prange(ngroups, schedule='dynamic', chunksize=1, num_threads=n_threads):
                p0 = grp * GRID_GROUP
                G = <int>min(<Py_ssize_t>GRID_GROUP, P - p0)
                st = rf_grid_vocab_group(&s, n, P, p0, G, group_budget,
                                         &kp[p0], &nk[p0], &dp[p0], &bits[p0], ind, ind64)
                if st == -2:  # over budget together: one grid at a time
                    st = 0
                    for g in range(G):
                        if st == 0:
                            st = rf_grid_vocab_group(&s, n, P, p0 + g, 1, group_budget,
                                                     &kp[p0 + g], &nk[p0 + g], &dp[p0 + g],
                                                     &bits[p0 + g], ind, ind64)
                status[grp] = st
        if np.any(np.asarray(status) == -3):  # pragma: no cover - a bug, not a user error
            raise RuntimeError("internal error: training bins missing from the vocabulary")
        if np.any(np.asarray(status) != 0):
            raise MemoryError("not enough memory for the binning vocabulary")
        key_offsets = np.zeros(P + 1, dtype=np.int64)
        np.cumsum(nk, out=key_offsets[1:])
        dir_sizes = (np.int64(1) << np.asarray(bits, dtype=np.int64)) + 1
        dir_offsets = np.zeros(P + 1, dtype=np.int64)
        np.cumsum(dir_sizes, out=dir_offsets[1:])
        keys = np.empty(key_offsets[P], dtype=np.uint64)
        directory = np.empty(dir_offsets[P], dtype=np.uint32)
        _gather_pieces(kp, dp, keys, directory, key_offsets, dir_offsets, P)
    finally:
        for p in range(P):
            free(kp[p])
            free(dp[p])
        free(kp)
        free(dp)
    return keys, key_offsets, directory, dir_offsets, np.asarray(bits)


cdef void _gather_pieces(uint64_t **kp, uint32_t **dp, uint64_t[::1] keys,
                         uint32_t[::1] directory, const int64_t[::1] koff,
                         const int64_t[::1] doff, Py_ssize_t P) noexcept:
    # Copy grid by grid and free each piece at once, so the peak is the final
    # arrays plus one grid's piece (not twice the vocabulary).
    cdef Py_ssize_t p
    for p in range(P):
        if koff[p + 1] > koff[p]:
            memcpy(&keys[koff[p]], kp[p], (koff[p + 1] - koff[p]) * sizeof(uint64_t))
        memcpy(&directory[doff[p]], dp[p], (doff[p + 1] - doff[p]) * sizeof(uint32_t))
        free(kp[p])
        free(dp[p])
        kp[p] = NULL
        dp[p] = NULL


def finish_training_csr(Py_ssize_t n, Py_ssize_t P, const int64_t[::1] koff,
                        index_t[::1] indices, floating[::1] data, double value, int n_threads):
    """Turn the ranks left by ``build_vocabularies`` into columns and set the values.

    indices[i*P + p] += koff[p]; data[:] = value (overwriting the hash halves
    it may still hold).
    """
    cdef Py_ssize_t nchunks = (n + ROW_CHUNK - 1) // ROW_CHUNK
    cdef Py_ssize_t c, i, p, k
    cdef floating v = <floating>value
    with nogil:
        for c in prange(nchunks, schedule='static', num_threads=n_threads):
            for i in range(c * ROW_CHUNK, min((c + 1) * ROW_CHUNK, n)):
                for p in range(P):
                    k = i * P + p
                    indices[k] = <index_t>(indices[k] + koff[p])
                    data[k] = v


def transform_rows(bint is_csr, const floating[:, :] X, const floating[::1] Xd,
                   const int64_t[::1] Xi, const int64_t[::1] Xp, Py_ssize_t n,
                   Py_ssize_t d, const double[:, ::1] U, const double[:, ::1] INV,
                   Py_ssize_t P, const uint64_t[::1] keys, const int64_t[::1] koff,
                   const uint32_t[::1] directory, const int64_t[::1] doff,
                   const int[::1] bits, index_t[::1] indices, int64_t[::1] counts,
                   double[:, ::1] rowbuf, uint64_t[:, ::1] hashbuf, int64_t[:, ::1] colbuf,
                   int n_threads):
    """Hash and look up each row; row i's found columns go to indices[i*P : i*P + counts[i]].

    Columns come out sorted because grids are visited in order and grid p's
    columns lie in [koff[p], koff[p+1]).  Returns the total count.
    """
    cdef Py_ssize_t Ppad = U.shape[1]
    cdef Py_ssize_t nchunks = (n + ROW_CHUNK - 1) // ROW_CHUNK
    cdef Py_ssize_t c, i, p, t, cnt
    cdef double *buf
    cdef uint64_t *hb
    cdef int64_t *cb
    with nogil, parallel(num_threads=n_threads):
        t = threadid()
        buf = &rowbuf[t, 0]
        hb = &hashbuf[t, 0]
        cb = &colbuf[t, 0]
        for c in prange(nchunks, schedule='dynamic'):
            for i in range(c * ROW_CHUNK, min((c + 1) * ROW_CHUNK, n)):
                _load_row(is_csr, X, Xd, Xi, Xp, i, d, buf)
                rf_hash_row(buf, d, Ppad, &U[0, 0], &INV[0, 0], hb)
                rf_lookup_row(hb, P, &keys[0], &koff[0], &directory[0], &doff[0], &bits[0], cb)
                cnt = 0
                for p in range(P):
                    if cb[p] >= 0:
                        indices[i * P + cnt] = <index_t>cb[p]
                        cnt = cnt + 1
                counts[i] = cnt
    return int(np.sum(counts))


def compact_rows(index_t[::1] indices, const int64_t[::1] counts, Py_ssize_t P):
    """Move row i's counts[i] entries from i*P to the end of row i-1's (serial, in place).

    Destinations never pass sources, so the forward copy is safe.  Returns nnz.
    """
    cdef Py_ssize_t n = counts.shape[0], i, j, pos = 0, src
    with nogil:
        for i in range(n):
            src = i * P
            if pos != src:
                for j in range(counts[i]):
                    indices[pos + j] = indices[src + j]
            pos += counts[i]
    return pos


def fill_value(floating[::1] data, double value, int n_threads):
    """data[:] = value, written by the threads that will use it (first touch)."""
    cdef Py_ssize_t n = data.shape[0], c, k
    cdef Py_ssize_t nchunks = (n + 65535) // 65536
    cdef floating v = <floating>value
    with nogil:
        for c in prange(nchunks, schedule='static', num_threads=n_threads):
            for k in range(c * 65536, min((c + 1) * 65536, n)):
                data[k] = v


def hash_rows_for_test(const double[:, ::1] X, const double[:, ::1] U,
                       const double[:, ::1] INV, Py_ssize_t P):
    """(n, P) hashes of dense float64 rows, serially (for tests and debugging)."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], Ppad = U.shape[1], i, p
    out = np.empty((n, P), dtype=np.uint64)
    cdef uint64_t[:, ::1] o = out
    cdef uint64_t[::1] hb = np.empty(max(Ppad, 1), dtype=np.uint64)
    for i in range(n):
        rf_hash_row(&X[i, 0], d, Ppad, &U[0, 0], &INV[0, 0], &hb[0])
        for p in range(P):
            o[i, p] = hb[p]
    return out
