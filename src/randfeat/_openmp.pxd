# Thread helpers for the kernels: cimport these instead of openmp so a build
# without OpenMP still compiles (the header gives serial stubs).
cdef extern from "randfeat_omp.h" nogil:
    int rf_omp_max_threads()
    int rf_omp_thread_num()
    int rf_omp_enabled()
