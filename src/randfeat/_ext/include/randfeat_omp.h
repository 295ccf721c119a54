/* OpenMP runtime calls with serial stubs, so kernels compile either way.
 * RANDFEAT_BUILT_WITH_OPENMP is set by setup.py after it has compiled, linked
 * and run a test program with the compiler's OpenMP flag. */
#ifndef RANDFEAT_OMP_H
#define RANDFEAT_OMP_H

#if defined(_MSC_VER)
#include <intrin.h>
#endif

#ifdef _OPENMP
#include <omp.h>
static inline int rf_omp_max_threads(void) { return omp_get_max_threads(); }
static inline int rf_omp_enabled(void) { return 1; }
#else
static inline int rf_omp_max_threads(void) { return 1; }
static inline int rf_omp_enabled(void) { return 0; }
#endif

#include <stdint.h>

/* The next chunk of a loop shared by a team of threads (see ChunkLoop in
 * _openmp.pyx), or -1 when none is left.  Which thread gets which chunk does
 * not matter for the result: every chunk is computed the same way by any
 * thread.  `next` may run past `stop`; only values below it are handed out. */
static inline int64_t rf_claim_chunk(int64_t *next, int64_t stop) {
    int64_t c;
#if defined(__GNUC__) || defined(__clang__)
    c = __atomic_fetch_add(next, 1, __ATOMIC_RELAXED);
#elif defined(_MSC_VER)
    c = (int64_t)_InterlockedExchangeAdd64((volatile __int64 *)next, 1);
#else
#ifdef _OPENMP
#pragma omp critical(rf_claim_chunk)
#endif
    c = (*next)++;
#endif
    return c < stop ? c : -1;
}

#endif
