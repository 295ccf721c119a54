# cython: language_level=3
"""OpenMP helpers for the kernel modules, and the one parallel chunk loop.

cimport these instead of ``openmp`` so a build without OpenMP still compiles
(the header gives serial stubs).
"""

from libc.stdint cimport int64_t

cdef extern from "randfeat_omp.h" nogil:
    int rf_omp_max_threads()
    int rf_omp_enabled()
    int64_t rf_claim_chunk(int64_t *next, int64_t stop)

cdef extern from "randfeat_common.h" nogil:
    double rf_now()


cdef class ChunkLoop:
    """Runs ``run_chunk(c)`` for c in [0, n_chunks) on ``n_threads`` threads.

    A kernel subclasses it, stores its operands (pointers into arrays that
    its caller keeps alive), and overrides ``run_chunk``.  ``run`` hands the
    chunks out in slabs of about ``SLAB_SECONDS`` of work; between slabs it
    holds the GIL and checks for pending signals, so Ctrl-C stops a long call
    promptly (``KeyboardInterrupt``, and the subclass's caller drops its
    half-written output).  Each thread gets ``scratch_bytes`` of private
    scratch (allocated by that thread in its first slab, kept for the later
    slabs of the call, freed when ``run`` returns or the loop is dropped).
    Which thread computes a chunk never changes its result.
    """
    cdef Py_ssize_t n_chunks
    cdef Py_ssize_t scratch_bytes
    cdef int n_threads
    cdef int64_t next_chunk
    cdef int scratch_failed
    # Per-thread scratch by OpenMP thread number (n_threads entries, NULL
    # until that thread's first chunk).
    cdef void **scratches
    cdef double slab_seconds
    # When the current slab ends (rf_now); a chunk that is itself resumable
    # may stop there.
    cdef double deadline

    cdef void run_chunk(self, Py_ssize_t chunk, void *scratch) noexcept nogil
    cdef void _claim_and_run(self, int thread) noexcept nogil
    cdef void _free_scratch(self) noexcept
    cdef int run_slab(self) except -1
    cdef int run(self) except -1
