"""Thread policy: how many OpenMP threads a kernel call may use, and when BLAS is held to one.

Kernels take ``n_threads`` and contain no policy; everything that decides a
thread count lives here:

* ``effective_n_threads`` turns an estimator's ``n_jobs`` into a count.
* ``threads_for`` trims that count for a small piece of work, by the
  minimum work per thread of its kind (``MIN_WORK_PER_THREAD``).  Results
  never depend on the thread count (fixed tiles and chunks, no reduction in
  thread-arrival order), so these thresholds only decide speed.
* ``single_threaded_blas`` is the one way the library holds BLAS to one
  thread, for either of two reasons: a parallel region of ours whose
  threads each call BLAS (threads must not oversubscribe the cores), or a
  BLAS call that threaded OpenBLAS would split along its summed dimension
  (thin gemm, potrf, trsm: the result would depend on the thread count).
  ``limit_blas_threads`` is the primitive under it, for the one call that
  may use several BLAS threads (syrk, which splits its output).
"""

import numbers

from joblib import cpu_count
from threadpoolctl import ThreadpoolController

from ._openmp import omp_max_threads, openmp_enabled

_controller = None

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


def _available_threads():
    # omp_get_max_threads honours OMP_NUM_THREADS; joblib's cpu_count honours
    # cgroup quotas and CPU affinity.  The smaller of the two is what we can use.
    return max(1, min(omp_max_threads(), cpu_count()))


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
        ``OMP_NUM_THREADS``, cgroup limits and CPU affinity), a positive value
        is taken as is, -2 means all but one core, and so on.

    Returns
    -------
    n_threads : int
        At least 1; always 1 when randfeat was built without OpenMP.
    """
    check_n_jobs(n_jobs)
    if not openmp_enabled():
        return 1
    available = _available_threads()
    if n_jobs is None or n_jobs == -1:
        return available
    if n_jobs < 0:
        return max(1, available + 1 + n_jobs)
    return int(n_jobs)


def _get_controller():
    global _controller
    if _controller is None:
        # Created once, lazily (by then our extensions have loaded SciPy's
        # BLAS): threadpoolctl's library scan costs milliseconds, too much to
        # repeat around every product.
        _controller = ThreadpoolController()
    return _controller


def limit_blas_threads(n_threads):
    """Return a context manager limiting every loaded BLAS to ``n_threads``.

    The one place that sets BLAS thread limits; use ``single_threaded_blas``
    to hold BLAS to one thread.

    Parameters
    ----------
    n_threads : int
        Thread count BLAS may use inside the ``with`` block.

    Returns
    -------
    context manager
    """
    return _get_controller().limit(limits=n_threads, user_api="blas")


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
