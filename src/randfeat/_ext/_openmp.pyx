# cython: language_level=3
"""What the compiled extensions know about OpenMP, and the chunk loop they share."""

from cpython.exc cimport PyErr_CheckSignals
from cython.parallel cimport parallel, threadid
from libc.stdlib cimport calloc, free, malloc

# Wall time between two signal checks of a long kernel call.  Ctrl-C is
# answered within about this plus one chunk; the cost is one team start and
# one wait for the slowest thread's last chunk per slab (chunks are
# milliseconds at most, so ~1%).
cdef double SLAB_SECONDS = 0.1


def openmp_enabled():
    """Return True if randfeat's extensions were compiled with OpenMP."""
    return bool(rf_omp_enabled())


def omp_max_threads():
    """Return ``omp_get_max_threads()`` (1 without OpenMP).

    It honours ``OMP_NUM_THREADS`` and threadpoolctl limits on the OpenMP
    runtime, but not cgroup CPU quotas; ``randfeat._threads`` combines both.
    """
    return rf_omp_max_threads()


cdef class ChunkLoop:
    """Base of every parallel kernel loop (see ``_openmp.pxd``); not used from Python."""

    def __cinit__(self):
        self.n_chunks = 0
        self.scratch_bytes = 0
        self.n_threads = 1
        self.next_chunk = 0
        self.scratch_failed = 0
        self.slab_seconds = SLAB_SECONDS
        self.deadline = 0
        self.scratches = NULL

    def __dealloc__(self):
        self._free_scratch()

    cdef void run_chunk(self, Py_ssize_t chunk, void *scratch) noexcept nogil:
        pass

    cdef void _claim_and_run(self, int thread) noexcept nogil:
        # One thread's share of a slab: claim chunks until none is left or
        # the slab's time is up (checked before claiming, so every thread
        # runs at least one chunk per slab and the loop always progresses).
        # Its scratch is allocated once per call, not per slab: a slab is
        # ~0.1 s, and a fresh block per slab cost page faults every time.
        cdef void *scratch = NULL
        cdef int64_t c
        if self.scratch_bytes > 0:
            scratch = self.scratches[thread]
            if scratch == NULL:
                scratch = malloc(self.scratch_bytes)
                if scratch == NULL:
                    self.scratch_failed = 1
                    return
                self.scratches[thread] = scratch
        while True:
            c = rf_claim_chunk(&self.next_chunk, self.n_chunks)
            if c < 0:
                break
            self.run_chunk(c, scratch)
            if rf_now() >= self.deadline:
                break

    cdef void _free_scratch(self) noexcept:
        cdef int k
        if self.scratches != NULL:
            for k in range(max(1, self.n_threads)):
                free(self.scratches[k])
            free(self.scratches)
            self.scratches = NULL

    cdef int run_slab(self) except -1:
        """Run chunks for about ``slab_seconds``, then check signals (GIL held)."""
        cdef Py_ssize_t left = self.n_chunks - self.next_chunk
        cdef int T = <int>min(<Py_ssize_t>max(1, self.n_threads), max(left, 1))
        self.scratch_failed = 0
        if self.scratch_bytes > 0 and self.scratches == NULL:
            self.scratches = <void **>calloc(max(1, self.n_threads), sizeof(void *))
            if self.scratches == NULL:
                raise MemoryError("cannot allocate the per-thread scratch table")
        self.deadline = rf_now() + self.slab_seconds
        if T == 1:
            with nogil:
                self._claim_and_run(0)
        else:
            with nogil, parallel(num_threads=T):
                self._claim_and_run(threadid())
        if self.scratch_failed:
            raise MemoryError(f"cannot allocate {self.scratch_bytes} bytes of per-thread scratch")
        if PyErr_CheckSignals() != 0:
            return -1
        return 0

    cdef int run(self) except -1:
        """Run every chunk, slab by slab."""
        self.next_chunk = 0
        try:
            while self.next_chunk < self.n_chunks:
                self.run_slab()
        finally:
            self._free_scratch()
        return 0
