# cython: language_level=3
"""Compiled kernels of RandomBinningFeatures: floor-and-hash, vocabularies, CSR.

No validation and no policy here (randfeat._binning does both): inputs are
finite, bins fit in int64 (|bin| <= 2^62), arrays have the documented shapes.
Work is split over rows in fixed chunks of ``ROW_CHUNK`` rows (or over tasks
of grids for the vocabulary); every row and every grid is computed
independently of the others, so the result is bit-identical for any thread
count and any schedule.  Every loop runs on ``_openmp.ChunkLoop``, which
checks for Ctrl-C between slabs of work (``KeyboardInterrupt``; the caller
drops its half-written arrays, and no memory is kept).  The arithmetic and
the hash are defined in _csrc/randfeat_binning.h.

Operands: the input rows X (a dense array of any strides, or a CSR matrix
with int32 or int64 indices: a ``RowSource``), the fitted grids (``Grids``)
and the fitted vocabulary (``Vocabulary``).  During fit the N × P hashes are
kept inside the output CSR's own buffers (``indices``, ``data``): in the
8-byte one if there is one (float64 data, or int64 indices), else split in
two 32-bit halves across int32 indices (low) and float32 data (high).  A fit
without features passes a uint64 ``data`` array instead.
"""

from cpython.exc cimport PyErr_CheckSignals
from cython cimport floating
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from cython.view cimport array as cvarray
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcpy

import numpy as np
import scipy.sparse as sp

from ._cycommon cimport index_t
from ._openmp cimport ChunkLoop

cdef extern from "randfeat_binning.h" nogil:
    ctypedef struct rf_hstore:
        uint64_t *h64
        uint32_t *lo
        uint32_t *hi
    ctypedef struct rf_spares:
        size_t limit
    ctypedef struct rf_vocab_shared:
        rf_spares spares
    void rf_spares_free(rf_spares *s)
    ctypedef struct rf_vocab_task:
        int G
        int ready
        uint64_t *keys[16]
        int64_t nkeys[16]
        uint32_t *dir[16]
        int bits[16]
    int rf_binning_init()
    const char *rf_isa_name(int isa)
    # a function pointer in C, called like a function
    void rf_hash_row(const double *x, int64_t d, int64_t Ppad, const double *U,
                     const double *INV, uint64_t *h)
    void rf_hstore_put(const rf_hstore *s, int64_t k, uint64_t h)
    void rf_lookup_row(const uint64_t *h, int64_t P, const uint64_t *keys, const int64_t *koff,
                       const uint32_t *dir, const int64_t *doff, const int *bits, int64_t *cols)
    void rf_vocab_task_init(rf_vocab_task *t, int64_t p0, int G, rf_vocab_shared *shared)
    int rf_vocab_task_step(rf_vocab_task *t, const rf_hstore *s, int64_t n, int64_t P,
                           int64_t budget, void *ind, int ind64, double deadline)
    void rf_vocab_task_free(rf_vocab_task *t)
    void rf_vocab_task_release(rf_vocab_task *t, int g)

cdef int _ISA = rf_binning_init()

# Rows per work unit; fixed so the work split never depends on the thread count.
cdef enum:
    ROW_CHUNK = 256
    # Grids whose vocabularies are built in one pass over the rows, and the
    # memory their hash sets may take together before falling back to one grid.
    GRID_GROUP = 8
    GROUP_BUDGET = 16 * 1024 * 1024
    RESERVE_BYTES = 32 * 1024 * 1024

LANES = 8  # grids are padded to a multiple of this (see the header)
GROUP_BUDGET_BYTES = GROUP_BUDGET  # default ``group_budget`` of build_vocabularies


def vector_isa():
    """Return the vector code path the hashing kernel uses ('baseline', 'avx2' or 'avx512')."""
    return rf_isa_name(_ISA).decode()


# ------------------------------------------------------------------ operands
cdef enum SourceKind:
    DENSE_F64 = 0
    DENSE_F32 = 1
    CSR_F64 = 2
    CSR_F32 = 3


cdef struct RowSource:
    # The input rows: a dense array (base pointer and byte strides) or a CSR
    # matrix (data, indices, indptr, int32 or int64 indices).
    int kind
    bint idx64
    Py_ssize_t d, stride0, stride1
    const char *X
    const void *data
    const void *indices
    const void *indptr


cdef inline void _scatter_csr_row(const floating *data, const index_t *indices,
                                  const index_t *indptr, Py_ssize_t i, double *buf) noexcept nogil:
    cdef index_t q
    for q in range(indptr[i], indptr[i + 1]):
        buf[indices[q]] = data[q]


cdef inline void _load_row(const RowSource *source, Py_ssize_t i, double *buf) noexcept nogil:
    """Row i of X as float64 into buf (a CSR row is scattered into zeros)."""
    # A local copy, so the compiler knows the stores to buf cannot change it.
    cdef RowSource src = source[0]
    cdef Py_ssize_t m
    cdef const char *row
    if src.kind == DENSE_F64 or src.kind == DENSE_F32:
        row = src.X + i * src.stride0
        if src.kind == DENSE_F64:
            for m in range(src.d):
                buf[m] = (<const double *>(row + m * src.stride1))[0]
        else:
            for m in range(src.d):
                buf[m] = (<const float *>(row + m * src.stride1))[0]
        return
    for m in range(src.d):
        buf[m] = 0.0
    if src.kind == CSR_F64 and src.idx64:
        _scatter_csr_row(<const double *>src.data, <const int64_t *>src.indices,
                         <const int64_t *>src.indptr, i, buf)
    elif src.kind == CSR_F64:
        _scatter_csr_row(<const double *>src.data, <const int32_t *>src.indices,
                         <const int32_t *>src.indptr, i, buf)
    elif src.idx64:
        _scatter_csr_row(<const float *>src.data, <const int64_t *>src.indices,
                         <const int64_t *>src.indptr, i, buf)
    else:
        _scatter_csr_row(<const float *>src.data, <const int32_t *>src.indices,
                         <const int32_t *>src.indptr, i, buf)


cdef const void *_address(a) except? NULL:
    """Address of a contiguous 1-D array's data (a valid dummy if it is empty)."""
    cdef const unsigned char[::1] view
    if a.shape[0] == 0:
        return <const void *>&_EMPTY
    view = a.view(np.uint8)
    return &view[0]

cdef double _EMPTY = 0.0


cdef RowSource _row_source(X, list keep) except *:
    """Pointers into X (validated by the caller, who keeps X alive).

    CSR index arrays of different or other integer types are converted to
    int64 first; ``keep`` receives the converted arrays.
    """
    cdef RowSource src
    cdef const double[:, :] x64
    cdef const float[:, :] x32
    src.d = X.shape[1]
    src.X = NULL
    src.data = src.indices = src.indptr = NULL
    src.stride0 = src.stride1 = 0
    src.idx64 = False
    if sp.issparse(X):
        indices, indptr = X.indices, X.indptr
        if indices.dtype != indptr.dtype or indices.dtype not in (np.int32, np.int64):
            indices, indptr = indices.astype(np.int64), indptr.astype(np.int64)
            keep += [indices, indptr]
        src.kind = CSR_F64 if X.dtype == np.float64 else CSR_F32
        src.idx64 = indices.dtype == np.int64
        src.data, src.indices, src.indptr = _address(X.data), _address(indices), _address(indptr)
    elif X.dtype == np.float64:
        src.kind = DENSE_F64
        x64 = X
        if X.shape[0] > 0 and X.shape[1] > 0:
            src.X = <const char *>&x64[0, 0]
        src.stride0, src.stride1 = x64.strides[0], x64.strides[1]
    else:
        src.kind = DENSE_F32
        x32 = X
        if X.shape[0] > 0 and X.shape[1] > 0:
            src.X = <const char *>&x32[0, 0]
        src.stride0, src.stride1 = x32.strides[0], x32.strides[1]
    return src


cdef class Grids:
    """The fitted grids: offsets ``U`` and inverse pitches ``INV``, (d, Ppad) float64.

    ``Ppad`` is ``P`` rounded up to whole ``LANES``; padding grids have
    u = 1/δ = 0 and are ignored.
    """
    cdef const double[:, ::1] U
    cdef const double[:, ::1] INV
    cdef Py_ssize_t P, Ppad, d

    def __init__(self, const double[:, ::1] U, const double[:, ::1] INV, Py_ssize_t P):
        if U.shape[0] != INV.shape[0] or U.shape[1] != INV.shape[1] or not 0 < P <= U.shape[1]:
            raise ValueError("U and INV must both be (d, Ppad) with 0 < P <= Ppad")
        self.U, self.INV, self.P = U, INV, P
        self.d, self.Ppad = U.shape[0], U.shape[1]

    cdef inline void hash_row(self, const double *x, uint64_t *h) noexcept nogil:
        rf_hash_row(x, self.d, self.Ppad, &self.U[0, 0], &self.INV[0, 0], h)


cdef class Vocabulary:
    """The fitted vocabulary, as ``build_vocabularies`` returns it.

    ``keys`` (uint64) and ``key_offsets`` (P + 1, int64): grid p's sorted bin
    hashes; ``directory`` (uint32), ``dir_offsets`` (P + 1, int64) and
    ``dir_bits`` (P, intc): their lookup directories.
    """
    cdef const uint64_t[::1] keys
    cdef const int64_t[::1] koff
    cdef const uint32_t[::1] directory
    cdef const int64_t[::1] doff
    cdef const int[::1] bits

    def __init__(self, const uint64_t[::1] keys, const int64_t[::1] key_offsets,
                 const uint32_t[::1] directory, const int64_t[::1] dir_offsets,
                 const int[::1] dir_bits):
        cdef Py_ssize_t P = dir_bits.shape[0]
        if key_offsets.shape[0] != P + 1 or dir_offsets.shape[0] != P + 1:
            raise ValueError("key_offsets and dir_offsets need P + 1 entries")
        if keys.shape[0] == 0 or directory.shape[0] == 0:
            raise ValueError("an empty vocabulary cannot be looked up")
        self.keys, self.koff, self.directory, self.doff, self.bits = (
            keys, key_offsets, directory, dir_offsets, dir_bits)

    cdef inline void lookup_row(self, const uint64_t *h, Py_ssize_t P, int64_t *cols) noexcept nogil:
        rf_lookup_row(h, P, &self.keys[0], &self.koff[0], &self.directory[0], &self.doff[0],
                      &self.bits[0], cols)


cdef rf_hstore _hash_store(indices, data) except *:
    """Where the hashes live during fit: see the module docstring."""
    cdef rf_hstore s
    s.h64 = s.lo = s.hi = NULL
    if data.dtype == np.float64 or data.dtype == np.uint64:
        s.h64 = <uint64_t *>_address(data)
    elif indices.dtype == np.int64:
        s.h64 = <uint64_t *>_address(indices)
    else:
        s.lo = <uint32_t *>_address(indices)
        s.hi = <uint32_t *>_address(data)
    return s


# ------------------------------------------------------------------- hashing
cdef class _RowLoop(ChunkLoop):
    """Rows in chunks of ROW_CHUNK; per-thread scratch: a row, its hashes, its columns."""
    cdef RowSource src
    cdef list keep  # arrays src points into that only this loop holds
    cdef Grids grids
    cdef Py_ssize_t n

    cdef void setup(self, X, Grids grids, int n_threads) except *:
        if X.shape[1] != grids.d:
            raise ValueError("X and the grids have different numbers of features")
        self.keep = []
        self.src = _row_source(X, self.keep)
        self.grids, self.n, self.n_threads = grids, X.shape[0], n_threads
        self.n_chunks = (self.n + ROW_CHUNK - 1) // ROW_CHUNK
        # row (d doubles), hashes (Ppad), columns (P): padded to whole 64-byte lines
        self.scratch_bytes = 8 * (_pad8(grids.d) + 2 * _pad8(grids.Ppad))

    cdef inline double *row_buf(self, void *scratch) noexcept nogil:
        return <double *>scratch

    cdef inline uint64_t *hash_buf(self, void *scratch) noexcept nogil:
        return <uint64_t *>scratch + _pad8(self.grids.d)

    cdef inline int64_t *col_buf(self, void *scratch) noexcept nogil:
        return <int64_t *>scratch + _pad8(self.grids.d) + _pad8(self.grids.Ppad)


cdef inline Py_ssize_t _pad8(Py_ssize_t k) noexcept nogil:
    return (k + 15) // 8 * 8


cdef class _HashRows(_RowLoop):
    cdef rf_hstore store

    cdef void run_chunk(self, Py_ssize_t c, void *scratch) noexcept nogil:
        cdef Py_ssize_t i, p, P = self.grids.P
        cdef rf_hstore store = self.store
        cdef double *buf = self.row_buf(scratch)
        cdef uint64_t *hb = self.hash_buf(scratch)
        for i in range(c * ROW_CHUNK, min((c + 1) * ROW_CHUNK, self.n)):
            _load_row(&self.src, i, buf)
            self.grids.hash_row(buf, hb)
            for p in range(P):
                rf_hstore_put(&store, i * P + p, hb[p])


def hash_rows(X, Grids grids, indices, data, int n_threads):
    """Hash every row of X for every grid; hash of (row i, grid p) goes to slot i*P + p.

    X is dense (any strides) or CSR, float32 or float64; the hashes are
    stored in ``indices`` and ``data`` (length n*P), as the module docstring
    says.
    """
    cdef _HashRows loop = _HashRows()
    loop.setup(X, grids, n_threads)
    loop.store = _hash_store(indices, data)
    loop.run()


# --------------------------------------------------------------- vocabulary
cdef struct GrowingBuffer:
    # An array that grows in place as grids are committed, then is handed to
    # NumPy without a copy (``_adopt``).  It starts at RESERVE_BYTES of
    # untouched memory: glibc serves blocks that large with mmap, and grows
    # them with mremap, which moves pages instead of copying them (NumPy's
    # own resize copies, and growing from small sizes left freed copies
    # resident in the heap: up to the whole vocabulary again).
    char *data
    size_t size      # bytes in use
    size_t capacity  # bytes allocated


cdef int _reserve(GrowingBuffer *buf, size_t size) except -1:
    cdef size_t want = max(size, <size_t>RESERVE_BYTES)
    cdef char *p
    if want > buf.capacity:
        p = <char *>realloc(buf.data, want)
        if p == NULL:
            raise MemoryError(f"not enough memory for the binning vocabulary ({want} bytes)")
        buf.data, buf.capacity = p, want
    return 0


cdef object _adopt(GrowingBuffer *buf, Py_ssize_t itemsize, str fmt):
    """The buffer as a 1-D NumPy array that owns it (it is freed with the array)."""
    cdef cvarray arr
    cdef char *p = <char *>realloc(buf.data, max(buf.size, 1))  # give the reserve back
    if p != NULL:
        buf.data = p
    cdef Py_ssize_t n = buf.size // itemsize
    arr = cvarray(shape=(max(n, 1),), itemsize=itemsize, format=fmt, mode="c", allocate_buffer=False)
    arr.data = buf.data
    arr.callback_free_data = free
    buf.data = NULL
    buf.capacity = buf.size = 0
    return np.asarray(arr)[:n]


cdef class _VocabTasks(ChunkLoop):
    """Vocabulary tasks (groups of GRID_GROUP grids), stepped slab by slab.

    A slab's chunks are the unfinished tasks in grid order; each step works
    until the slab's deadline.  Between slabs the finished grids at the head
    are committed: their keys and directories are appended, in grid order,
    to the final arrays (grown in place) and their pieces freed, so pieces
    never pile up (the final arrays plus the pieces of tasks in flight, not
    twice the vocabulary).
    """
    cdef rf_vocab_task *tasks
    cdef rf_vocab_shared shared  # spare blocks and the fallback hint of all tasks
    cdef Py_ssize_t n_tasks
    cdef Py_ssize_t *order       # this slab's tasks
    cdef int *result             # per task: 1 done, 0 more, < 0 error
    cdef rf_hstore store
    cdef Py_ssize_t n, P
    cdef int64_t budget
    cdef void *ind
    cdef int ind64
    cdef GrowingBuffer keys       # the final arrays, until handed to NumPy
    cdef GrowingBuffer directory

    def __dealloc__(self):
        cdef Py_ssize_t k
        if self.tasks != NULL:
            for k in range(self.n_tasks):
                rf_vocab_task_free(&self.tasks[k])
        rf_spares_free(&self.shared.spares)
        free(self.tasks)
        free(self.order)
        free(self.result)
        free(self.keys.data)
        free(self.directory.data)

    cdef void run_chunk(self, Py_ssize_t c, void *scratch) noexcept nogil:
        cdef Py_ssize_t k = self.order[c]
        self.result[k] = rf_vocab_task_step(&self.tasks[k], &self.store, self.n, self.P,
                                            self.budget, self.ind, self.ind64, self.deadline)


def build_vocabularies(indices, data, Py_ssize_t P, int n_threads, bint write_ranks=False,
                       int64_t group_budget=GROUP_BUDGET):
    """Sorted distinct hashes of each grid and their lookup directories.

    ``indices`` and ``data`` hold the n*P hashes left by ``hash_rows``.
    Returns ``(keys, key_offsets, directory, dir_offsets, dir_bits)``: grid p's
    keys are ``keys[key_offsets[p]:key_offsets[p+1]]`` (uint64, ascending),
    its directory ``directory[dir_offsets[p]:dir_offsets[p+1]]`` (uint32,
    2**dir_bits[p] + 1 entries).  Tasks are groups of ``GRID_GROUP``
    neighbouring grids (one pass over the rows per group; a group falls back
    to one grid at a time if its sets outgrow ``group_budget`` bytes); each
    grid's result is independent of grouping and of which thread built it
    (``group_budget=0`` forces one grid at a time; the tests compare both).

    With ``write_ranks`` (fit_transform), slot i*P + p of ``indices`` then
    receives the rank of row i's hash within grid p, found while the group's
    vocabularies are still in cache; ``finish_training_csr`` turns ranks into
    columns.
    """
    cdef Py_ssize_t size = max(indices.shape[0], data.shape[0])
    cdef Py_ssize_t n = size // P if P > 0 else 0
    cdef _VocabTasks loop = _VocabTasks()
    cdef Py_ssize_t k, head = 0, q, p, n_open, grow_k, grow_d
    cdef rf_vocab_task *t
    cdef int64_t[::1] nk = np.zeros(P, dtype=np.int64)
    cdef int[::1] bits = np.zeros(P, dtype=np.intc)
    cdef Py_ssize_t committed = 0
    loop.store = _hash_store(indices, data)
    loop.n, loop.P, loop.budget, loop.n_threads = n, P, group_budget, n_threads
    loop.ind, loop.ind64 = NULL, 0
    if write_ranks:
        loop.ind = <void *>_address(indices)
        loop.ind64 = indices.dtype == np.int64
    loop.n_tasks = (P + GRID_GROUP - 1) // GRID_GROUP
    loop.tasks = <rf_vocab_task *>calloc(max(1, loop.n_tasks), sizeof(rf_vocab_task))
    loop.order = <Py_ssize_t *>malloc(max(1, loop.n_tasks) * sizeof(Py_ssize_t))
    loop.result = <int *>calloc(max(1, loop.n_tasks), sizeof(int))
    if loop.tasks == NULL or loop.order == NULL or loop.result == NULL:
        raise MemoryError("not enough memory for the binning vocabulary")
    # Freed tables and pieces are kept for reuse, up to what one group's sets
    # may take (so the memory bar of fit_transform holds: see _group_budget).
    loop.shared.spares.limit = <size_t>max(group_budget, 0)
    for k in range(loop.n_tasks):
        rf_vocab_task_init(&loop.tasks[k], k * GRID_GROUP, <int>min(<Py_ssize_t>GRID_GROUP, P - k * GRID_GROUP),
                           &loop.shared)
    while head < loop.n_tasks:
        n_open = 0
        for k in range(head, loop.n_tasks):
            if loop.result[k] == 0:
                loop.order[n_open] = k
                n_open += 1
        loop.n_chunks, loop.next_chunk = n_open, 0
        if n_open > 0:
            loop.run_slab()
        for k in range(head, loop.n_tasks):
            if loop.result[k] == -3:  # pragma: no cover - a bug, not a user error
                raise RuntimeError("internal error: training bins missing from the vocabulary")
            if loop.result[k] < 0:
                raise MemoryError("not enough memory for the binning vocabulary")
        # Commit the finished grids at the head, in grid order.
        while head < loop.n_tasks:
            t = &loop.tasks[head]
            if t.ready > committed:
                grow_k = grow_d = 0
                for q in range(committed, t.ready):
                    grow_k += t.nkeys[q]
                    grow_d += (<int64_t>1 << t.bits[q]) + 1
                _reserve(&loop.keys, loop.keys.size + grow_k * sizeof(uint64_t))
                _reserve(&loop.directory, loop.directory.size + grow_d * sizeof(uint32_t))
                for q in range(committed, t.ready):
                    p = head * GRID_GROUP + q
                    nk[p], bits[p] = t.nkeys[q], t.bits[q]
                    memcpy(loop.keys.data + loop.keys.size, t.keys[q], t.nkeys[q] * sizeof(uint64_t))
                    loop.keys.size += t.nkeys[q] * sizeof(uint64_t)
                    grow_d = (<int64_t>1 << t.bits[q]) + 1
                    memcpy(loop.directory.data + loop.directory.size, t.dir[q], grow_d * sizeof(uint32_t))
                    loop.directory.size += grow_d * sizeof(uint32_t)
                    rf_vocab_task_release(t, <int>q)
                committed = t.ready
            if loop.result[head] == 1 and committed == t.G:
                rf_vocab_task_free(t)
                head += 1
                committed = 0
            else:
                break
    rf_spares_free(&loop.shared.spares)
    keys = _adopt(&loop.keys, sizeof(uint64_t), "Q")
    directory = _adopt(&loop.directory, sizeof(uint32_t), "I")
    key_offsets = np.zeros(P + 1, dtype=np.int64)
    np.cumsum(nk, out=key_offsets[1:])
    dir_sizes = (np.int64(1) << np.asarray(bits, dtype=np.int64)) + 1
    dir_offsets = np.zeros(P + 1, dtype=np.int64)
    np.cumsum(dir_sizes, out=dir_offsets[1:])
    return keys, key_offsets, directory, dir_offsets, np.asarray(bits)


# --------------------------------------------------------- CSR from ranks
cdef class _FinishTraining(ChunkLoop):
    cdef Py_ssize_t n, P
    cdef const int64_t *koff
    cdef void *indices
    cdef void *data
    cdef bint idx64, f32
    cdef double value

    cdef void run_chunk(self, Py_ssize_t c, void *scratch) noexcept nogil:
        cdef Py_ssize_t i0 = c * ROW_CHUNK, i1 = min((c + 1) * ROW_CHUNK, self.n)
        if self.idx64 and self.f32:
            _finish_rows(<int64_t *>self.indices, <float *>self.data, self.koff, self.P, i0, i1, self.value)
        elif self.idx64:
            _finish_rows(<int64_t *>self.indices, <double *>self.data, self.koff, self.P, i0, i1, self.value)
        elif self.f32:
            _finish_rows(<int32_t *>self.indices, <float *>self.data, self.koff, self.P, i0, i1, self.value)
        else:
            _finish_rows(<int32_t *>self.indices, <double *>self.data, self.koff, self.P, i0, i1, self.value)


cdef inline void _finish_rows(index_t *indices, floating *data, const int64_t *koff, Py_ssize_t P,
                              Py_ssize_t i0, Py_ssize_t i1, double value) noexcept nogil:
    cdef Py_ssize_t i, p, k
    cdef floating v = <floating>value
    for i in range(i0, i1):
        for p in range(P):
            k = i * P + p
            indices[k] = <index_t>(indices[k] + koff[p])
            data[k] = v


def finish_training_csr(Py_ssize_t P, const int64_t[::1] koff, index_t[::1] indices,
                        floating[::1] data, double value, int n_threads):
    """Turn the ranks left by ``build_vocabularies`` into columns and set the values.

    indices[i*P + p] += koff[p]; data[:] = value (overwriting the hash halves
    it may still hold).
    """
    cdef _FinishTraining loop = _FinishTraining()
    if indices.shape[0] != data.shape[0] or koff.shape[0] != P + 1:
        raise ValueError("indices, data and koff do not match")
    if indices.shape[0] == 0:
        return
    loop.n, loop.P, loop.koff, loop.value, loop.n_threads = indices.shape[0] // P, P, &koff[0], value, n_threads
    loop.indices, loop.data = &indices[0], &data[0]
    loop.idx64, loop.f32 = index_t is int64_t, floating is float
    loop.n_chunks = (loop.n + ROW_CHUNK - 1) // ROW_CHUNK
    loop.run()


# ---------------------------------------------------------------- transform
cdef class _TransformRows(_RowLoop):
    cdef Vocabulary vocab
    cdef void *indices
    cdef bint idx64
    cdef int64_t *counts

    cdef void run_chunk(self, Py_ssize_t c, void *scratch) noexcept nogil:
        if self.idx64:
            _transform_chunk(self, <int64_t *>self.indices, c, scratch)
        else:
            _transform_chunk(self, <int32_t *>self.indices, c, scratch)


cdef inline void _transform_chunk(_TransformRows loop, index_t *indices, Py_ssize_t c,
                                  void *scratch) noexcept nogil:
    cdef Py_ssize_t i, p, cnt, P = loop.grids.P
    cdef int64_t *counts = loop.counts
    cdef double *buf = loop.row_buf(scratch)
    cdef uint64_t *hb = loop.hash_buf(scratch)
    cdef int64_t *cb = loop.col_buf(scratch)
    for i in range(c * ROW_CHUNK, min((c + 1) * ROW_CHUNK, loop.n)):
        _load_row(&loop.src, i, buf)
        loop.grids.hash_row(buf, hb)
        loop.vocab.lookup_row(hb, P, cb)
        cnt = 0
        for p in range(P):
            if cb[p] >= 0:
                indices[i * P + cnt] = <index_t>cb[p]
                cnt = cnt + 1
        counts[i] = cnt


def transform_rows(X, Grids grids, Vocabulary vocab, index_t[::1] indices, int64_t[::1] counts,
                   int n_threads):
    """Hash and look up each row; row i's found columns go to indices[i*P : i*P + counts[i]].

    Columns come out sorted because grids are visited in order and grid p's
    columns lie in [koff[p], koff[p+1]).  Returns the total count.
    """
    cdef _TransformRows loop = _TransformRows()
    loop.setup(X, grids, n_threads)
    if counts.shape[0] != loop.n or indices.shape[0] != loop.n * grids.P:
        raise ValueError("indices / counts do not match X and the grids")
    if loop.n == 0:
        return 0
    loop.vocab = vocab
    loop.indices, loop.idx64, loop.counts = &indices[0], index_t is int64_t, &counts[0]
    loop.run()
    return int(np.sum(counts))


cdef class _CompactRows(ChunkLoop):
    # Serial (one thread takes the chunks in order): rows move towards the front.
    cdef void *indices
    cdef bint idx64
    cdef const int64_t *counts
    cdef Py_ssize_t n, P, pos

    cdef void run_chunk(self, Py_ssize_t c, void *scratch) noexcept nogil:
        if self.idx64:
            self.pos = _compact(<int64_t *>self.indices, self.counts, self.P, c * 65536,
                                min((c + 1) * 65536, self.n), self.pos)
        else:
            self.pos = _compact(<int32_t *>self.indices, self.counts, self.P, c * 65536,
                                min((c + 1) * 65536, self.n), self.pos)


cdef inline Py_ssize_t _compact(index_t *indices, const int64_t *counts, Py_ssize_t P,
                                Py_ssize_t i0, Py_ssize_t i1, Py_ssize_t pos) noexcept nogil:
    cdef Py_ssize_t i, j, src
    for i in range(i0, i1):
        src = i * P
        if pos != src:
            for j in range(counts[i]):
                indices[pos + j] = indices[src + j]
        pos += counts[i]
    return pos


def compact_rows(index_t[::1] indices, const int64_t[::1] counts, Py_ssize_t P):
    """Move row i's counts[i] entries from i*P to the end of row i-1's (serial, in place).

    Destinations never pass sources, so the forward copy is safe.  Returns nnz.
    """
    cdef _CompactRows loop = _CompactRows()
    loop.n, loop.P, loop.pos, loop.n_threads = counts.shape[0], P, 0, 1
    if loop.n == 0:
        return 0
    loop.indices, loop.idx64, loop.counts = &indices[0], index_t is int64_t, &counts[0]
    loop.n_chunks = (loop.n + 65535) // 65536
    loop.run()
    return loop.pos


cdef class _Fill(ChunkLoop):
    cdef void *data
    cdef bint f32
    cdef Py_ssize_t n
    cdef double value

    cdef void run_chunk(self, Py_ssize_t c, void *scratch) noexcept nogil:
        cdef Py_ssize_t k, k1 = min((c + 1) * 65536, self.n)
        if self.f32:
            for k in range(c * 65536, k1):
                (<float *>self.data)[k] = <float>self.value
        else:
            for k in range(c * 65536, k1):
                (<double *>self.data)[k] = self.value


def fill_value(floating[::1] data, double value, int n_threads):
    """data[:] = value, written by the threads that will use it (first touch)."""
    cdef _Fill loop = _Fill()
    loop.n, loop.value, loop.n_threads, loop.f32 = data.shape[0], value, n_threads, floating is float
    if loop.n == 0:
        return
    loop.data = &data[0]
    loop.n_chunks = (loop.n + 65535) // 65536
    loop.run()


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
