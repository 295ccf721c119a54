/* OpenMP runtime calls with serial stubs, so kernels compile either way.
 * RANDFEAT_BUILT_WITH_OPENMP is set by setup.py after it has compiled, linked
 * and run a test program with the compiler's OpenMP flag. */
#ifndef RANDFEAT_OMP_H
#define RANDFEAT_OMP_H

#ifdef _OPENMP
#include <omp.h>
static inline int rf_omp_max_threads(void) { return omp_get_max_threads(); }
static inline int rf_omp_thread_num(void) { return omp_get_thread_num(); }
static inline int rf_omp_enabled(void) { return 1; }
#else
static inline int rf_omp_max_threads(void) { return 1; }
static inline int rf_omp_thread_num(void) { return 0; }
static inline int rf_omp_enabled(void) { return 0; }
#endif

#endif
