# cython: language_level=3
"""Compiled kernels of RandomBinningFeatures: floor-and-hash, vocabularies, CSR.

No validation and no policy here (randfeat._binning does both): inputs are
finite, bins fit in int64 (|bin| <= 2^62), arrays have the documented shapes.
Work is split over rows in fixed chunks of ``ROW_CHUNK`` rows (or over tasks
of grids for the vocabulary); every row and every grid is computed
independently of the others, so the result is bit-identical for any thread
count and any schedule.  Every loop runs on ``_openmp.ChunkLoop``, which
checks for Ctrl-C between slabs of work (``KeyboardInterrupt``; the caller
drops its half-written arrays, and no memory is kept).  The arithmetic, the
hash and the vocabulary build are defined in _ext/include/randfeat_binning.h.

Operands: the input rows X (a dense array of any strides, or a CSR matrix
with int32 or int64 indices: a ``RowSource``), the fitted grids (``Grids``)
and the fitted vocabulary (``Vocabulary``).  During fit the N × P hashes are
kept inside the output CSR's own buffers (``indices``, ``data``): in the
8-byte one if there is one (float64 data, or int64 indices), else split in
two 32-bit halves across int32 indices (low) and float32 data (high).  A fit
without features passes a uint64 ``data`` array instead.  The fit lays them
out grid-major (each grid's N hashes contiguous); fit_transform's vocabulary
build then leaves each row's rank in ``data`` (inside its grid's hash slots),
and ``finish_training_csr`` turns the ranks into the row-major CSR.
"""

from cpython.exc cimport PyErr_CheckSignals
from cython cimport floating
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from cython.view cimport array as cvarray
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memset

import numpy as np
import scipy.sparse as sp

from ._cycommon cimport index_t
from ._openmp cimport ChunkLoop

cdef extern from "randfeat_binning.h" nogil:
    ctypedef struct rf_hstore:
        uint64_t *h64
        uint32_t *lo
        uint32_t *hi
        int64_t rs
        int64_t gs
    ctypedef struct rf_spares:
        size_t limit
    ctypedef struct rf_growbuf:
        char *data
        size_t size
        size_t capacity
    ctypedef struct rf_vocab_task:
        pass
    ctypedef struct rf_vocab_shared:
        rf_spares spares
        rf_hstore store
        int64_t n
        int64_t P
        int64_t budget
        uint32_t *rank
        int64_t rank_gs
        int strategy
        rf_vocab_task *tasks
        int64_t n_tasks
        int64_t head
        rf_growbuf keys
        rf_growbuf dir
        int64_t *nkeys
        int *bits
        int commit_failed
    void rf_spares_free(rf_spares *s)
    int rf_binning_init()
    const char *rf_isa_name(int isa)
    # a function pointer in C, called like a function
    void rf_hash_row(const double *x, int64_t d, int64_t Ppad, const double *U,
                     const double *INV, uint64_t *h)
    int64_t rf_hslot(const rf_hstore *s, int64_t i, int64_t p)
    void rf_hstore_put(const rf_hstore *s, int64_t k, uint64_t h)
    void rf_lookup_row(const uint64_t *h, int64_t P, const uint64_t *keys, const int64_t *koff,
                       const uint32_t *dir, const int64_t *doff, const int *bits, int64_t *cols)
    double rf_sample_vocab(const rf_hstore *s, int64_t p, int64_t n)
    int rf_plan_split(const rf_vocab_shared *sh, int G, double v_est)
    int rf_vocab_bits(int64_t V)
    int rf_growbuf_init(rf_growbuf *b, size_t bytes)
    void rf_vocab_task_init(rf_vocab_task *t, int64_t p0, int G, rf_vocab_shared *shared, double v_est)
    int rf_vocab_task_step(rf_vocab_task *t, rf_vocab_shared *shared, double deadline, uint64_t *buf)
    enum:
        RF_HBLOCK
    void rf_vocab_task_free(rf_vocab_task *t)
    void rf_lsd_sort_u64(uint64_t *keys, uint64_t *tmp, int64_t n)
    enum:
        RF_VOCAB_AUTO
        RF_VOCAB_SETS
        RF_VOCAB_SORT

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


cdef rf_hstore _hash_store(indices, data, Py_ssize_t P, bint grid_major) except *:
    """Where the hashes live during fit: see the module docstring."""
    cdef rf_hstore s
    cdef Py_ssize_t n = max(indices.shape[0], data.shape[0]) // P if P > 0 else 0
    s.h64 = s.lo = s.hi = NULL
    if data.dtype == np.float64 or data.dtype == np.uint64:
        s.h64 = <uint64_t *>_address(data)
    elif indices.dtype == np.int64:
        s.h64 = <uint64_t *>_address(indices)
    else:
        s.lo = <uint32_t *>_address(indices)
        s.hi = <uint32_t *>_address(data)
    if grid_major:
        s.rs, s.gs = 1, n
    else:
        s.rs, s.gs = P, 1
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
        cdef uint64_t *h64 = store.h64
        for i in range(c * ROW_CHUNK, min((c + 1) * ROW_CHUNK, self.n)):
            _load_row(&self.src, i, buf)
            self.grids.hash_row(buf, hb)
            if h64 != NULL:  # the usual store: whole hashes (a loop the compiler sees plainly)
                for p in range(P):
                    h64[i * store.rs + p * store.gs] = hb[p]
            else:
                for p in range(P):
                    rf_hstore_put(&store, i * store.rs + p * store.gs, hb[p])


def hash_rows(X, Grids grids, indices, data, int n_threads, bint grid_major=False):
    """Hash every row of X for every grid.

    X is dense (any strides) or CSR, float32 or float64; the hashes are
    stored in ``indices`` and ``data`` (length n*P), as the module docstring
    says: the hash of (row i, grid p) in slot i*P + p (an (n, P) array), or
    with ``grid_major`` in slot p*n + i (what ``build_vocabularies`` reads
    fastest, and what its ``write_ranks`` needs).
    """
    cdef _HashRows loop = _HashRows()
    loop.setup(X, grids, n_threads)
    if max(indices.shape[0], data.shape[0]) != loop.n * grids.P:
        raise ValueError("the hash store does not hold n * P hashes")
    loop.store = _hash_store(indices, data, grids.P, grid_major)
    loop.run()


# --------------------------------------------------------------- vocabulary
cdef object _adopt(rf_growbuf *buf, Py_ssize_t itemsize, str fmt):
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
    """Vocabulary tasks (see the header), stepped slab by slab.

    A slab's chunks are the unfinished tasks in grid order; each step works
    until the slab's deadline.  Finished grids are committed (appended in
    grid order to the final arrays, grown in place) by the thread that
    finished them, so pieces never pile up (the final arrays plus the
    pieces of tasks in flight, not twice the vocabulary).
    """
    cdef rf_vocab_task *tasks
    cdef rf_vocab_shared shared  # the job, spare blocks, hints, the commit state
    cdef Py_ssize_t n_tasks
    cdef Py_ssize_t *order       # this slab's tasks
    cdef int *result             # per task: 1 done, 0 more, < 0 error

    def __cinit__(self):
        memset(&self.shared, 0, sizeof(rf_vocab_shared))
        self.tasks, self.order, self.result, self.n_tasks = NULL, NULL, NULL, 0

    def __dealloc__(self):
        cdef Py_ssize_t k
        if self.tasks != NULL:
            for k in range(self.n_tasks):
                rf_vocab_task_free(&self.tasks[k])
        rf_spares_free(&self.shared.spares)
        free(self.tasks)
        free(self.order)
        free(self.result)
        free(self.shared.keys.data)
        free(self.shared.dir.data)

    cdef void run_chunk(self, Py_ssize_t c, void *scratch) noexcept nogil:
        cdef Py_ssize_t k = self.order[c]
        self.result[k] = rf_vocab_task_step(&self.tasks[k], &self.shared, self.deadline, <uint64_t *>scratch)


_STRATEGIES = {"auto": RF_VOCAB_AUTO, "sets": RF_VOCAB_SETS, "sort": RF_VOCAB_SORT}


def build_vocabularies(indices, data, Py_ssize_t P, int n_threads, bint write_ranks=False,
                       int64_t group_budget=GROUP_BUDGET, bint grid_major=False, str strategy="auto"):
    """Sorted distinct hashes of each grid and their lookup directories.

    ``indices`` and ``data`` hold the n*P hashes left by ``hash_rows`` (with
    the same ``grid_major``).  Returns ``(keys, key_offsets, directory,
    dir_offsets, dir_bits)``: grid p's keys are
    ``keys[key_offsets[p]:key_offsets[p+1]]`` (uint64, ascending), its
    directory ``directory[dir_offsets[p]:dir_offsets[p+1]]`` (uint32,
    2**dir_bits[p] + 1 entries).

    Grids go in groups of ``GRID_GROUP`` neighbours sharing one pass over
    the rows with hash sets, unless a sample of the group's first grid says
    their sets would outgrow ``group_budget`` bytes: then each grid is its
    own task, built with a hash set or, when its vocabulary is large, by
    sorting its (hash, row) pairs.  ``strategy`` 'sets' or 'sort' forces
    one-grid tasks of that kind (``group_budget=0``: one-grid tasks, kind
    chosen per grid).  A grid's result is independent of all this and of
    which thread built it (the tests compare them).

    With ``write_ranks`` (fit_transform; needs ``grid_major`` and float
    ``data``) the rank of row i's hash within grid p's vocabulary is written
    into ``data``, viewed as uint32, at p*(n*data.itemsize/4) + i (inside
    grid p's own hash slots, after they are read); ``finish_training_csr``
    turns ranks into the CSR.
    """
    cdef Py_ssize_t size = max(indices.shape[0], data.shape[0])
    cdef Py_ssize_t n = size // P if P > 0 else 0
    cdef _VocabTasks loop = _VocabTasks()
    cdef Py_ssize_t k, q, p0, G, n_open
    cdef double v
    cdef int mode
    cdef rf_vocab_shared *sh
    cdef int64_t v_keys, est_keys = 0, est_dir = 0
    if strategy not in _STRATEGIES:
        raise ValueError(f"strategy must be one of {sorted(_STRATEGIES)}, got {strategy!r}")
    mode = _STRATEGIES[strategy]
    if write_ranks and not (grid_major and data.dtype in (np.float32, np.float64)):
        raise ValueError("write_ranks needs grid-major hashes and a float data buffer")
    cdef int64_t[::1] nk = np.zeros(P, dtype=np.int64)
    cdef int[::1] bits = np.zeros(P, dtype=np.intc)
    sh = &loop.shared
    sh.store = _hash_store(indices, data, P, grid_major)
    sh.n, sh.P, sh.budget, sh.strategy = n, P, group_budget, mode
    sh.rank, sh.rank_gs = NULL, 0
    if write_ranks:
        sh.rank = <uint32_t *>_address(data)
        sh.rank_gs = n * data.dtype.itemsize // 4
    if P > 0:
        sh.nkeys, sh.bits = &nk[0], &bits[0]
    loop.n_threads = n_threads
    loop.scratch_bytes = 8 * max(1, min(n, <Py_ssize_t>RF_HBLOCK))  # a block of one grid's hashes
    loop.tasks = <rf_vocab_task *>calloc(max(1, P), sizeof(rf_vocab_task))
    loop.order = <Py_ssize_t *>malloc(max(1, P) * sizeof(Py_ssize_t))
    loop.result = <int *>calloc(max(1, P), sizeof(int))
    if loop.tasks == NULL or loop.order == NULL or loop.result == NULL:
        raise MemoryError("not enough memory for the binning vocabulary")
    # Freed tables and pieces are kept for reuse, up to what one group's sets
    # may take (so the memory bar of fit_transform holds: see _group_budget).
    sh.spares.limit = <size_t>max(group_budget, 0)
    # Plan from a sample of each group's first grid: few bins, a grouped task
    # (hash sets sharing one pass over the rows); many, one-grid tasks.
    for p0 in range(0, P, GRID_GROUP):
        G = min(<Py_ssize_t>GRID_GROUP, P - p0)
        v = 0.0
        if mode == RF_VOCAB_AUTO:
            with nogil:
                v = rf_sample_vocab(&sh.store, p0, n)
            if v < 0:
                raise MemoryError("not enough memory for the binning vocabulary")
        # the vocabulary's expected size (its arrays are reserved once, below)
        v_keys = <int64_t>min(<double>n, 1.1 * v + 16)
        est_keys += G * v_keys
        est_dir += G * ((<int64_t>1 << rf_vocab_bits(v_keys)) + 1)
        if rf_plan_split(sh, <int>G, v):
            for q in range(G):
                rf_vocab_task_init(&loop.tasks[loop.n_tasks], p0 + q, 1, sh, v)
                loop.n_tasks += 1
        else:
            rf_vocab_task_init(&loop.tasks[loop.n_tasks], p0, <int>G, sh, v)
            loop.n_tasks += 1
    sh.tasks, sh.n_tasks = loop.tasks, loop.n_tasks
    if rf_growbuf_init(&sh.keys, est_keys * sizeof(uint64_t)) != 0 or \
            rf_growbuf_init(&sh.dir, est_dir * sizeof(uint32_t)) != 0:
        raise MemoryError("not enough memory for the binning vocabulary")
    while True:
        n_open = 0
        for k in range(loop.n_tasks):
            if loop.result[k] == 0:
                loop.order[n_open] = k
                n_open += 1
        if n_open == 0:
            break
        loop.n_chunks, loop.next_chunk = n_open, 0
        loop.run_slab()
        for k in range(loop.n_tasks):
            if loop.result[k] == -3:  # pragma: no cover - a bug, not a user error
                raise RuntimeError("internal error: training bins missing from the vocabulary")
            if loop.result[k] < 0:
                raise MemoryError("not enough memory for the binning vocabulary")
    if sh.commit_failed:
        raise MemoryError("not enough memory for the binning vocabulary")
    if sh.head != loop.n_tasks:  # pragma: no cover - a bug
        raise RuntimeError("internal error: binning vocabulary not wholly committed")
    rf_spares_free(&sh.spares)
    keys = _adopt(&sh.keys, sizeof(uint64_t), "Q")
    directory = _adopt(&sh.dir, sizeof(uint32_t), "I")
    key_offsets = np.zeros(P + 1, dtype=np.int64)
    np.cumsum(nk, out=key_offsets[1:])
    dir_sizes = (np.int64(1) << np.asarray(bits, dtype=np.int64)) + 1
    dir_offsets = np.zeros(P + 1, dtype=np.int64)
    np.cumsum(dir_sizes, out=dir_offsets[1:])
    return keys, key_offsets, directory, dir_offsets, np.asarray(bits)


# --------------------------------------------------------- CSR from ranks
cdef class _RanksToColumns(ChunkLoop):
    # Rows in chunks of `rows`: each chunk reads its slice of every grid's
    # ranks (grid-major) and writes its rows of the CSR indices (row-major),
    # whose block stays in cache meanwhile.
    cdef Py_ssize_t n, P, rows, gs
    cdef const int64_t *koff
    cdef const uint32_t *rank
    cdef void *indices
    cdef bint idx64

    cdef void run_chunk(self, Py_ssize_t c, void *scratch) noexcept nogil:
        cdef Py_ssize_t i0 = c * self.rows, i1 = min((c + 1) * self.rows, self.n)
        if self.idx64:
            _ranks_to_columns(<int64_t *>self.indices, self.rank, self.gs, self.koff, self.P, i0, i1)
        else:
            _ranks_to_columns(<int32_t *>self.indices, self.rank, self.gs, self.koff, self.P, i0, i1)


cdef inline void _ranks_to_columns(index_t *indices, const uint32_t *rank, Py_ssize_t gs,
                                   const int64_t *koff, Py_ssize_t P, Py_ssize_t i0,
                                   Py_ssize_t i1) noexcept nogil:
    cdef Py_ssize_t i, p
    cdef const uint32_t *r
    cdef int64_t off
    for p in range(P):
        r = rank + p * gs
        off = koff[p]
        for i in range(i0, i1):
            indices[i * P + p] = <index_t>(r[i] + off)


def finish_training_csr(Py_ssize_t P, const int64_t[::1] koff, index_t[::1] indices,
                        floating[::1] data, double value, int n_threads):
    """Turn the ranks left by ``build_vocabularies(write_ranks=True)`` into the CSR.

    indices[i*P + p] = rank of (row i, grid p) + koff[p], the ranks read from
    ``data`` (where they were written, grid-major); then data[:] = value.
    """
    cdef _RanksToColumns loop = _RanksToColumns()
    if indices.shape[0] != data.shape[0] or koff.shape[0] != P + 1:
        raise ValueError("indices, data and koff do not match")
    if indices.shape[0] == 0:
        return
    loop.n, loop.P, loop.koff, loop.n_threads = indices.shape[0] // P, P, &koff[0], n_threads
    loop.rank, loop.gs = <const uint32_t *>&data[0], loop.n * sizeof(floating) // 4
    loop.indices, loop.idx64 = &indices[0], index_t is int64_t
    # a chunk's indices (rows x P) about 256 KiB: in L2 while it is written
    loop.rows = max(16, (256 * 1024) // (P * sizeof(index_t)))
    loop.n_chunks = (loop.n + loop.rows - 1) // loop.rows
    loop.run()
    # only now: the values overwrite the ranks
    fill_value(data, value, n_threads)


# ------------------------------------------------------ the floor (bench)
cdef class _LsdSort(ChunkLoop):
    cdef uint64_t *keys
    cdef Py_ssize_t n

    cdef void run_chunk(self, Py_ssize_t c, void *scratch) noexcept nogil:
        rf_lsd_sort_u64(self.keys + c * self.n, <uint64_t *>scratch, self.n)


def lsd_sort_grids(uint64_t[::1] keys, Py_ssize_t P, int n_threads):
    """Sort each of the P runs of ``keys`` (grid-major, n each) in place: an LSD radix sort.

    Not used by the estimator: ``bench/binning.py`` times it (with the
    hashing) as the floor of ``fit_transform``.  One grid per chunk; each
    thread sorts with its own n-key scratch.
    """
    cdef _LsdSort loop = _LsdSort()
    if P <= 0 or keys.shape[0] % P != 0:
        raise ValueError("keys must hold P runs of equal length")
    if keys.shape[0] == 0:
        return
    loop.keys, loop.n, loop.n_threads = &keys[0], keys.shape[0] // P, n_threads
    loop.n_chunks = P
    loop.scratch_bytes = 8 * loop.n
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
