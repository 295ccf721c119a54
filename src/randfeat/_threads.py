"""Thread-count policy: how many OpenMP threads a kernel call may use.

Kernels take ``n_threads`` and contain no policy; estimators turn their
``n_jobs`` into it here.  BLAS is kept to one thread inside our parallel
regions so OpenMP and BLAS threads never oversubscribe the cores.
"""

import numbers
from contextlib import contextmanager

from joblib import cpu_count
from threadpoolctl import ThreadpoolController

from ._openmp import omp_max_threads, openmp_enabled

_controller = None


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

    Parameters
    ----------
    n_threads : int
        Thread count BLAS may use inside the ``with`` block.
    """
    return _get_controller().limit(limits=n_threads, user_api="blas")


@contextmanager
def single_threaded_blas():
    """Limit every loaded BLAS to one thread inside the ``with`` block.

    Used around parallel regions whose threads each call BLAS (the fused
    Fourier kernel, Gram accumulation), so BLAS does not start threads of its
    own under ours.
    """
    with limit_blas_threads(1):
        yield


def blas_info():
    """Return threadpoolctl's description of the loaded BLAS libraries."""
    return [info for info in ThreadpoolController().info() if info.get("user_api") == "blas"]
