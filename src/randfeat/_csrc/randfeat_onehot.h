/* Inner loops of the one-hot block products (_onehot_fast.pyx).
 *
 *   gather:  acc[i, :] += src[col[i], :]   for i < n   (Z @ B, one column block)
 *   scatter: acc[col[i], :] += u[i, :]     for i < n   (Zᵀ @ U, one column block)
 *
 * acc is double; src / u are float or double, K columns, row-major.  K = 1..8
 * get fixed-width, fully unrolled loops; each is compiled for baseline
 * x86-64, AVX2 and AVX-512 and chosen once at import (randfeat_dispatch.h).  The order of the additions into each acc entry is
 * the order of i whatever the path, so every path gives the same result.
 * In the scatter, col may repeat; the row loop is sequential so repeated
 * bins accumulate correctly. */
#ifndef RANDFEAT_ONEHOT_H
#define RANDFEAT_ONEHOT_H

#include <stdint.h>
#include "randfeat_dispatch.h"

static int rf_onehot_isa = -1;

#if defined(__GNUC__) || defined(__clang__)
#define RF_OH_INLINE static inline __attribute__((always_inline))
#else
#define RF_OH_INLINE static inline
#endif

/* One body per (value type, ISA); KB is a compile-time width after inlining
 * (1..8 through the switch below), so the k loop is fully unrolled. */
#define RF_ONEHOT_KERNELS(SUFFIX, VAL, ATTR)                                              \
    ATTR RF_OH_INLINE void rf_gather_w_##SUFFIX(const int32_t *restrict col, int64_t n,    \
                                                const VAL *restrict src, int64_t K,        \
                                                double *restrict acc, const int64_t KB)    \
    {                                                                                      \
        for (int64_t i = 0; i < n; ++i) {                                                  \
            const VAL *restrict s = src + (int64_t)col[i] * K;                             \
            double *restrict a = acc + i * K;                                              \
            for (int64_t k = 0; k < KB; ++k) a[k] += (double)s[k];                         \
        }                                                                                  \
    }                                                                                      \
    ATTR RF_OH_INLINE void rf_scatter_w_##SUFFIX(const int32_t *restrict col, int64_t n,   \
                                                 const VAL *restrict u, int64_t K,         \
                                                 double *restrict acc, const int64_t KB)   \
    {                                                                                      \
        for (int64_t i = 0; i < n; ++i) {                                                  \
            double *restrict a = acc + (int64_t)col[i] * K;                                \
            const VAL *restrict s = u + i * K;                                             \
            for (int64_t k = 0; k < KB; ++k) a[k] += (double)s[k];                         \
        }                                                                                  \
    }                                                                                      \
    ATTR static void rf_gather_add_##SUFFIX(const int32_t *restrict col, int64_t n,        \
                                            const VAL *restrict src, int64_t K,            \
                                            double *restrict acc)                          \
    {                                                                                      \
        switch (K) {                                                                       \
        case 1: rf_gather_w_##SUFFIX(col, n, src, K, acc, 1); break;                       \
        case 2: rf_gather_w_##SUFFIX(col, n, src, K, acc, 2); break;                       \
        case 3: rf_gather_w_##SUFFIX(col, n, src, K, acc, 3); break;                       \
        case 4: rf_gather_w_##SUFFIX(col, n, src, K, acc, 4); break;                       \
        case 5: rf_gather_w_##SUFFIX(col, n, src, K, acc, 5); break;                       \
        case 6: rf_gather_w_##SUFFIX(col, n, src, K, acc, 6); break;                       \
        case 7: rf_gather_w_##SUFFIX(col, n, src, K, acc, 7); break;                       \
        case 8: rf_gather_w_##SUFFIX(col, n, src, K, acc, 8); break;                       \
        default: rf_gather_w_##SUFFIX(col, n, src, K, acc, K); break;                      \
        }                                                                                  \
    }                                                                                      \
    ATTR static void rf_scatter_add_##SUFFIX(const int32_t *restrict col, int64_t n,       \
                                             const VAL *restrict u, int64_t K,             \
                                             double *restrict acc)                         \
    {                                                                                      \
        switch (K) {                                                                       \
        case 1: rf_scatter_w_##SUFFIX(col, n, u, K, acc, 1); break;                        \
        case 2: rf_scatter_w_##SUFFIX(col, n, u, K, acc, 2); break;                        \
        case 3: rf_scatter_w_##SUFFIX(col, n, u, K, acc, 3); break;                        \
        case 4: rf_scatter_w_##SUFFIX(col, n, u, K, acc, 4); break;                        \
        case 5: rf_scatter_w_##SUFFIX(col, n, u, K, acc, 5); break;                        \
        case 6: rf_scatter_w_##SUFFIX(col, n, u, K, acc, 6); break;                        \
        case 7: rf_scatter_w_##SUFFIX(col, n, u, K, acc, 7); break;                        \
        case 8: rf_scatter_w_##SUFFIX(col, n, u, K, acc, 8); break;                        \
        default: rf_scatter_w_##SUFFIX(col, n, u, K, acc, K); break;                       \
        }                                                                                  \
    }

RF_ONEHOT_KERNELS(f64_base, double, )
RF_ONEHOT_KERNELS(f32_base, float, )
RF_ONEHOT_KERNELS(f64_avx2, double, RF_TARGET_AVX2)
RF_ONEHOT_KERNELS(f32_avx2, float, RF_TARGET_AVX2)
RF_ONEHOT_KERNELS(f64_avx512, double, RF_TARGET_AVX512)
RF_ONEHOT_KERNELS(f32_avx512, float, RF_TARGET_AVX512)

static void rf_onehot_init(void) { rf_onehot_isa = rf_detect_isa(); }
static const char *rf_onehot_isa_name(void) { return rf_isa_name(rf_onehot_isa); }

#define RF_ONEHOT_DISPATCH(NAME, VAL, SUFFIX)                                               \
    static inline void rf_##NAME##_##SUFFIX(const int32_t *col, int64_t n, const VAL *src,  \
                                            int64_t K, double *acc)                         \
    {                                                                                       \
        if (rf_onehot_isa == RF_ISA_AVX512) rf_##NAME##_##SUFFIX##_avx512(col, n, src, K, acc); \
        else if (rf_onehot_isa == RF_ISA_AVX2) rf_##NAME##_##SUFFIX##_avx2(col, n, src, K, acc); \
        else rf_##NAME##_##SUFFIX##_base(col, n, src, K, acc);                              \
    }

RF_ONEHOT_DISPATCH(gather_add, double, f64)
RF_ONEHOT_DISPATCH(gather_add, float, f32)
RF_ONEHOT_DISPATCH(scatter_add, double, f64)
RF_ONEHOT_DISPATCH(scatter_add, float, f32)

#endif
