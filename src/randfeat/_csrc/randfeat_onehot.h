/* Inner loops of the one-hot block products (_onehot_fast.pyx).
 *
 *   gather:  acc[i, :] += src[col[i], :]   for i < n   (Z @ B, one column block)
 *   scatter: acc[col[i], :] += u[i, :]     for i < n   (Zᵀ @ U, one column block)
 *
 * acc is double; src / u are float or double, K columns, row-major.  K = 1..8
 * get fixed-width, fully unrolled loops; each entry point is compiled for
 * baseline x86-64, AVX2 and AVX-512 and chosen once at import
 * (randfeat_common.h).  The order of the additions into each acc entry is
 * the order of i whatever the path, so every path gives the same result.
 * In the scatter, col may repeat; the row loop is sequential so repeated
 * bins accumulate correctly. */
#ifndef RANDFEAT_ONEHOT_H
#define RANDFEAT_ONEHOT_H

#include <stdint.h>
#include "randfeat_common.h"

/* One body per value type; KB is a compile-time width after inlining
 * (1..8 through the switch below), so the k loop is fully unrolled. */
#define RF_ONEHOT_BODIES(SUFFIX, VAL)                                                      \
    RF_INLINE void rf_gather_w_##SUFFIX(const int32_t *RF_RESTRICT col, int64_t n,            \
                                        const VAL *RF_RESTRICT src, int64_t K,                \
                                        double *RF_RESTRICT acc, const int64_t KB)            \
    {                                                                                      \
        for (int64_t i = 0; i < n; ++i) {                                                  \
            const VAL *RF_RESTRICT s = src + (int64_t)col[i] * K;                             \
            double *RF_RESTRICT a = acc + i * K;                                              \
            for (int64_t k = 0; k < KB; ++k) a[k] += (double)s[k];                         \
        }                                                                                  \
    }                                                                                      \
    RF_INLINE void rf_scatter_w_##SUFFIX(const int32_t *RF_RESTRICT col, int64_t n,           \
                                         const VAL *RF_RESTRICT u, int64_t K,                 \
                                         double *RF_RESTRICT acc, const int64_t KB)           \
    {                                                                                      \
        for (int64_t i = 0; i < n; ++i) {                                                  \
            double *RF_RESTRICT a = acc + (int64_t)col[i] * K;                                \
            const VAL *RF_RESTRICT s = u + i * K;                                             \
            for (int64_t k = 0; k < KB; ++k) a[k] += (double)s[k];                         \
        }                                                                                  \
    }                                                                                      \
    RF_INLINE void rf_gather_add_##SUFFIX##_body(const int32_t *RF_RESTRICT col, int64_t n,   \
                                                 const VAL *RF_RESTRICT src, int64_t K,       \
                                                 double *RF_RESTRICT acc)                     \
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
    RF_INLINE void rf_scatter_add_##SUFFIX##_body(const int32_t *RF_RESTRICT col, int64_t n,  \
                                                  const VAL *RF_RESTRICT u, int64_t K,        \
                                                  double *RF_RESTRICT acc)                    \
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

RF_ONEHOT_BODIES(f64, double)
RF_ONEHOT_BODIES(f32, float)

#define RF_GATHER_F64_PARAMS (const int32_t *col, int64_t n, const double *src, int64_t K, double *acc)
#define RF_GATHER_F32_PARAMS (const int32_t *col, int64_t n, const float *src, int64_t K, double *acc)
RF_ISA_CLONES(rf_gather_add_f64, RF_GATHER_F64_PARAMS, (col, n, src, K, acc))
RF_ISA_CLONES(rf_gather_add_f32, RF_GATHER_F32_PARAMS, (col, n, src, K, acc))
RF_ISA_CLONES(rf_scatter_add_f64, RF_GATHER_F64_PARAMS, (col, n, src, K, acc))
RF_ISA_CLONES(rf_scatter_add_f32, RF_GATHER_F32_PARAMS, (col, n, src, K, acc))
RF_ISA_POINTER(rf_gather_add_f64, RF_GATHER_F64_PARAMS)
RF_ISA_POINTER(rf_gather_add_f32, RF_GATHER_F32_PARAMS)
RF_ISA_POINTER(rf_scatter_add_f64, RF_GATHER_F64_PARAMS)
RF_ISA_POINTER(rf_scatter_add_f32, RF_GATHER_F32_PARAMS)

/* Pick the code path once (at module import); returns the RF_ISA_* used. */
static int rf_onehot_init(void) {
    int isa = rf_detect_isa();
    RF_ISA_PICK(rf_gather_add_f64, isa);
    RF_ISA_PICK(rf_gather_add_f32, isa);
    RF_ISA_PICK(rf_scatter_add_f64, isa);
    RF_ISA_PICK(rf_scatter_add_f32, isa);
    return isa;
}

#endif
