"""What the compiled extensions know about OpenMP."""


def openmp_enabled():
    """Return True if randfeat's extensions were compiled with OpenMP."""
    return bool(rf_omp_enabled())


def omp_max_threads():
    """Return ``omp_get_max_threads()`` (1 without OpenMP).

    It honours ``OMP_NUM_THREADS`` and threadpoolctl limits on the OpenMP
    runtime, but not cgroup CPU quotas; ``randfeat._threads`` combines both.
    """
    return rf_omp_max_threads()
