"""Thread policy: how many OpenMP threads a kernel call may use, and when BLAS is held to one.

Kernels take ``n_threads`` and contain no policy; everything that decides a
thread count lives here:

* ``effective_n_threads`` turns an estimator's ``n_jobs`` into a count,
  clipped to the usable cores, and to one in a process forked after
  randfeat started OpenMP threads (libgomp's thread pool does not survive
  ``fork``: a parallel region in the child would wait forever for threads
  that were not copied).
* ``threads_for`` trims that count for a small piece of work, by the
  minimum work per thread of its kind (``MIN_WORK_PER_THREAD``).  Results
  never depend on the thread count (fixed tiles and chunks, no reduction in
  thread-arrival order), so these thresholds only decide speed.
* ``single_threaded_blas`` is the one way the library holds BLAS to one
  thread, for either of two reasons: a parallel region of ours whose
  threads each call BLAS (threads must not oversubscribe the cores), or a
  BLAS call that threaded OpenBLAS would split along its summed dimension
  (thin gemm, potrf, trsm: the result would depend on the thread count).
  ``limit_blas_threads`` is the primitive under it.  (Threaded syrk and
  gemm are not used where n_jobs decides their thread count either: with
  OpenBLAS's SkylakeX kernels their float64 bits depend on it too; the
  Gram is made of fixed single-threaded tiles, ``_stats._tiled_gram_add``.)  BLAS's
  thread count is one process-wide setting, so the limits are
  reference-counted: while any Python thread holds a limit, BLAS runs at the
  smallest limit held, and the last one out restores the count it found
  (a plain save/restore per call, as threadpoolctl does, races between
  threads and could leave BLAS at one thread for good).
"""

import contextlib
import numbers
import os
import threading
import warnings

from joblib import cpu_count
from threadpoolctl import ThreadpoolController

try:
    from threadpoolctl import OpenBLASController
except ImportError:  # threadpoolctl < 3.5 does not export it
    OpenBLASController = None

from .._ext._openmp import omp_max_threads, openmp_enabled

_controller = None

# Fork safety.  ``_omp_threads_used`` is set once this process may have
# started an OpenMP team (a kernel count above one was handed out); a child
# forked after that inherits a dead libgomp pool, so ``_forked_after_omp``
# holds every kernel there to one thread.  Both are plain flags: the
# after-fork hook runs in the child before any other Python code.
_omp_threads_used = False
_forked_after_omp = False
_fork_warned = False


def _after_fork_in_child():
    global _forked_after_omp, _fork_warned, _blas_lock
    if _omp_threads_used:
        _forked_after_omp = True
    _fork_warned = False
    # Another thread of the parent may have held the lock at the fork.
    _blas_lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # every POSIX Python; absent on Windows (no fork)
    os.register_at_fork(after_in_child=_after_fork_in_child)


def in_forked_child():
    """Return True in a process forked after randfeat started OpenMP threads.

    There every kernel runs on one thread (see ``effective_n_threads``).

    Returns
    -------
    bool
    """
    return _forked_after_omp


def _warn_forked_once():
    global _fork_warned
    if not _fork_warned:
        _fork_warned = True
        warnings.warn(
            "randfeat is running in a process forked after it had started OpenMP threads; "
            "the OpenMP thread pool does not survive fork, so randfeat runs single-threaded "
            "in this process. Start workers with the 'spawn' or 'forkserver' method "
            "(or joblib's loky backend) to keep them parallel.",
            RuntimeWarning,
            stacklevel=3,
        )

#: Least work, by kind, worth waking one more thread for.  On a loaded
#: machine starting a parallel region was measured at milliseconds, while
#: these amounts take ~0.2-2 ms on one core.
MIN_WORK_PER_THREAD = {
    # Output elements of the fused Fourier kernel (~0.2 ms of trig each).
    "fourier_output": 1 << 18,
    # Stored entries of a CSR Z read by one sparse product.
    "csr_entries": 100_000,
    # Elements of a D × K block in CG's fused vector updates and in the sum
    # of the fused product's row-block buffers (a pass over 2M elements
    # takes ~2 ms on one core).
    "vector_elements": 1_000_000,
    # Multiply-adds of block CG's thin products (D × K by K × K, and
    # D × K by D × K into K × K; ~0.2 ms per 4M on one core).
    "thin_product_flops": 4_000_000,
}


def threads_for(kind, work, n_threads):
    """Return how many of ``n_threads`` threads a piece of work should use.

    Parameters
    ----------
    kind : str
        A key of ``MIN_WORK_PER_THREAD``: what ``work`` counts.
    work : int
        Amount of work, in the units of ``kind``.
    n_threads : int
        Threads available (from ``effective_n_threads``).

    Returns
    -------
    int
        ``min(n_threads, work // MIN_WORK_PER_THREAD[kind])``, at least 1.
    """
    return int(max(1, min(n_threads, work // MIN_WORK_PER_THREAD[kind])))


def usable_cores():
    """Return the cores this process may run on.

    joblib's ``cpu_count`` honours CPU affinity (``os.sched_getaffinity``)
    and cgroup CPU quotas, which ``os.cpu_count`` does not.

    Returns
    -------
    int
        At least 1.
    """
    return max(1, int(cpu_count()))


def _available_threads():
    # omp_get_max_threads honours OMP_NUM_THREADS; usable_cores honours
    # cgroup quotas and CPU affinity.  The smaller of the two is what we can use.
    return max(1, min(omp_max_threads(), usable_cores()))


def check_n_jobs(n_jobs):
    """Validate an ``n_jobs`` parameter and raise a clear error if it is bad.

    Parameters
    ----------
    n_jobs : int or None
        None or -1 for all available cores, a positive count, or a negative
        count as in joblib (-2 = all but one).  0 is an error.
    """
    if n_jobs is None:
        return
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, numbers.Integral):
        raise TypeError(f"n_jobs must be an int or None, got {n_jobs!r}")
    if n_jobs == 0:
        raise ValueError("n_jobs == 0 has no meaning; use None or -1 for all cores, or a positive count")


def effective_n_threads(n_jobs=None):
    """Return the number of OpenMP threads a kernel should use for ``n_jobs``.

    Parameters
    ----------
    n_jobs : int or None
        As in scikit-learn: None and -1 mean every available core (respecting
        ``OMP_NUM_THREADS``, cgroup limits and CPU affinity), -2 means all but
        one core, and so on.  A positive value is clipped to the usable cores
        (``usable_cores``): more threads than cores only slow the kernels
        down, and a count far above them (``n_jobs=1000``) would make the
        OpenMP runtime fail to create threads, which ends the process.

    Returns
    -------
    n_threads : int
        At least 1; always 1 when randfeat was built without OpenMP, and in a
        process forked after randfeat had started OpenMP threads (with a
        ``RuntimeWarning``, once per process).
    """
    global _omp_threads_used
    check_n_jobs(n_jobs)
    if not openmp_enabled():
        return 1
    if _forked_after_omp:
        _warn_forked_once()
        return 1
    available = _available_threads()
    if n_jobs is None or n_jobs == -1:
        n_threads = available
    elif n_jobs < 0:
        n_threads = max(1, available + 1 + n_jobs)
    else:
        n_threads = int(min(n_jobs, usable_cores()))
    if n_threads > 1:
        _omp_threads_used = True
    return n_threads


def _get_controller():
    global _controller
    if _controller is None:
        # Created once, lazily (by then our extensions have loaded SciPy's
        # BLAS): threadpoolctl's library scan costs milliseconds, too much to
        # repeat around every product.
        _controller = ThreadpoolController()
    return _controller


# Reference-counted BLAS limit: the limits held now (one entry per ``with``
# block, any thread), and each BLAS library's own count before the first.
_blas_lock = threading.Lock()
_blas_held = []
_blas_saved = []


def _apply_blas_limit(limit):
    # threadpoolctl (>= 3.6) lets only the thread that first limited a
    # pthreads OpenBLAS change its process-wide limit and silently ignores the
    # others: a limit set in a worker thread (a pool's eigendecomposition, a
    # Dask task) would not be applied after the main thread once set one.  Our
    # own reference count (under _blas_lock) is what coordinates threads here,
    # so the thread applying the count takes control first.
    _take_blas_control()
    for lib, _ in _blas_saved:
        lib.set_num_threads(limit)


def _take_blas_control():
    try:
        OpenBLASController.clear_controlling_thread(force=True)
    except AttributeError:  # threadpoolctl < 3.6: no controlling thread to clear
        pass


@contextlib.contextmanager
def limit_blas_threads(n_threads):
    """Return a context manager limiting every loaded BLAS to ``n_threads``.

    The one place that sets BLAS thread limits; use ``single_threaded_blas``
    to hold BLAS to one thread.  Limits held at once by several Python
    threads combine to the smallest of them (a call held to one thread for
    reproducibility stays so); when the last is released, every BLAS gets
    back the thread count it had before the first.

    Parameters
    ----------
    n_threads : int
        Thread count BLAS may use inside the ``with`` block.

    Returns
    -------
    context manager
    """
    n_threads = max(1, int(n_threads))
    with _blas_lock:
        if not _blas_held:
            libs = _get_controller().select(user_api="blas").lib_controllers
            _blas_saved[:] = [(lib, lib.num_threads) for lib in libs]
        _blas_held.append(n_threads)
        _apply_blas_limit(min(_blas_held))
    try:
        yield
    finally:
        with _blas_lock:
            _blas_held.remove(n_threads)
            if _blas_held:
                _apply_blas_limit(min(_blas_held))
            else:
                _take_blas_control()
                for lib, count in _blas_saved:
                    lib.set_num_threads(count)
                _blas_saved.clear()


def single_threaded_blas():
    """Return a context manager holding every loaded BLAS to one thread.

    Used (i) around parallel regions of ours whose threads each call BLAS
    (the fused Fourier kernel, the row-block pool of dense products), so BLAS
    starts no threads under ours, and (ii) around BLAS calls that threaded
    OpenBLAS would split along the summed dimension (thin gemm, Cholesky
    factorisation and triangular solves), whose result would otherwise
    depend on the thread count.

    Returns
    -------
    context manager
    """
    return limit_blas_threads(1)


def blas_info():
    """Return threadpoolctl's description of the loaded BLAS libraries.

    Returns
    -------
    list of dict
    """
    return [info for info in ThreadpoolController().info() if info.get("user_api") == "blas"]
