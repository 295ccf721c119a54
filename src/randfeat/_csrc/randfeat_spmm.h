/* One row of a CSR x dense product, out_row[:] = sum_jj data[jj] * B[ind[jj], :],
 * for K columns of B.  Columns are taken 8 at a time; each block is a
 * compile-time width (1..8, selected by a switch on always-inlined code) so
 * the accumulators stay in registers.  Accumulation is in double for both
 * float and double data.  No threading here: the caller parallelises over
 * rows, one row per thread, which keeps results independent of the thread
 * count. */
#ifndef RANDFEAT_SPMM_H
#define RANDFEAT_SPMM_H

#include <stdint.h>

#if defined(__GNUC__) || defined(__clang__)
#define RF_ALWAYS_INLINE static inline __attribute__((always_inline))
#else
#define RF_ALWAYS_INLINE static __forceinline
#endif

#define RF_DEFINE_ROW_TIMES_BLOCK(SUFFIX, IDX, VAL)                                  \
    RF_ALWAYS_INLINE void rf_row_block_##SUFFIX(                                     \
        const IDX *ind, const VAL *dat, int64_t start, int64_t end,                  \
        const VAL *B, int64_t K, int64_t k0, VAL *out_row, const int KB)             \
    {                                                                                \
        double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                    \
        for (int64_t jj = start; jj < end; ++jj) {                                   \
            const double v = (double)dat[jj];                                        \
            const VAL *b = B + (int64_t)ind[jj] * K + k0;                            \
            for (int k = 0; k < KB; ++k) acc[k] += v * (double)b[k];                 \
        }                                                                            \
        for (int k = 0; k < KB; ++k) out_row[k0 + k] = (VAL)acc[k];                  \
    }                                                                                \
    static inline void rf_row_times_##SUFFIX(                                        \
        const IDX *ind, const VAL *dat, int64_t start, int64_t end,                  \
        const VAL *B, int64_t K, VAL *out_row)                                       \
    {                                                                                \
        for (int64_t k0 = 0; k0 < K; k0 += 8) {                                      \
            switch (K - k0 >= 8 ? 8 : (int)(K - k0)) {                               \
            case 1: rf_row_block_##SUFFIX(ind, dat, start, end, B, K, k0, out_row, 1); break; \
            case 2: rf_row_block_##SUFFIX(ind, dat, start, end, B, K, k0, out_row, 2); break; \
            case 3: rf_row_block_##SUFFIX(ind, dat, start, end, B, K, k0, out_row, 3); break; \
            case 4: rf_row_block_##SUFFIX(ind, dat, start, end, B, K, k0, out_row, 4); break; \
            case 5: rf_row_block_##SUFFIX(ind, dat, start, end, B, K, k0, out_row, 5); break; \
            case 6: rf_row_block_##SUFFIX(ind, dat, start, end, B, K, k0, out_row, 6); break; \
            case 7: rf_row_block_##SUFFIX(ind, dat, start, end, B, K, k0, out_row, 7); break; \
            default: rf_row_block_##SUFFIX(ind, dat, start, end, B, K, k0, out_row, 8); break; \
            }                                                                        \
        }                                                                            \
    }

RF_DEFINE_ROW_TIMES_BLOCK(i32_f32, int32_t, float)
RF_DEFINE_ROW_TIMES_BLOCK(i32_f64, int32_t, double)
RF_DEFINE_ROW_TIMES_BLOCK(i64_f32, int64_t, float)
RF_DEFINE_ROW_TIMES_BLOCK(i64_f64, int64_t, double)

/* One row i of the fused normal-equations product (see csr_normal_matmat):
 * u = z_iᵀP − mup, v = w_i·u, part[col, :] += z_ij·v for each nonzero,
 * usum += v.  `part` is this row block's private D×K double buffer. */
#define RF_DEFINE_ROW_NORMAL(SUFFIX, IDX, VAL)                                       \
    RF_ALWAYS_INLINE void rf_row_normal_block_##SUFFIX(                              \
        const IDX *ind, const VAL *dat, int64_t start, int64_t end,                  \
        const VAL *P, int64_t K, int64_t k0, const double *mup, double wi,           \
        double *part, double *usum, const int KB)                                    \
    {                                                                                \
        double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                    \
        for (int64_t jj = start; jj < end; ++jj) {                                   \
            const double v = (double)dat[jj];                                        \
            const VAL *p = P + (int64_t)ind[jj] * K + k0;                            \
            for (int k = 0; k < KB; ++k) acc[k] += v * (double)p[k];                 \
        }                                                                            \
        for (int k = 0; k < KB; ++k) {                                               \
            acc[k] = wi * (acc[k] - mup[k0 + k]);                                    \
            usum[k0 + k] += acc[k];                                                  \
        }                                                                            \
        for (int64_t jj = start; jj < end; ++jj) {                                   \
            const double v = (double)dat[jj];                                        \
            double *q = part + (int64_t)ind[jj] * K + k0;                            \
            for (int k = 0; k < KB; ++k) q[k] += v * acc[k];                         \
        }                                                                            \
    }                                                                                \
    static inline void rf_row_normal_##SUFFIX(                                       \
        const IDX *ind, const VAL *dat, int64_t start, int64_t end,                  \
        const VAL *P, int64_t K, const double *mup, double wi,                       \
        double *part, double *usum)                                                  \
    {                                                                                \
        for (int64_t k0 = 0; k0 < K; k0 += 8) {                                      \
            switch (K - k0 >= 8 ? 8 : (int)(K - k0)) {                               \
            case 1: rf_row_normal_block_##SUFFIX(ind, dat, start, end, P, K, k0, mup, wi, part, usum, 1); break; \
            case 2: rf_row_normal_block_##SUFFIX(ind, dat, start, end, P, K, k0, mup, wi, part, usum, 2); break; \
            case 3: rf_row_normal_block_##SUFFIX(ind, dat, start, end, P, K, k0, mup, wi, part, usum, 3); break; \
            case 4: rf_row_normal_block_##SUFFIX(ind, dat, start, end, P, K, k0, mup, wi, part, usum, 4); break; \
            case 5: rf_row_normal_block_##SUFFIX(ind, dat, start, end, P, K, k0, mup, wi, part, usum, 5); break; \
            case 6: rf_row_normal_block_##SUFFIX(ind, dat, start, end, P, K, k0, mup, wi, part, usum, 6); break; \
            case 7: rf_row_normal_block_##SUFFIX(ind, dat, start, end, P, K, k0, mup, wi, part, usum, 7); break; \
            default: rf_row_normal_block_##SUFFIX(ind, dat, start, end, P, K, k0, mup, wi, part, usum, 8); break; \
            }                                                                        \
        }                                                                            \
    }

RF_DEFINE_ROW_NORMAL(i32_f32, int32_t, float)
RF_DEFINE_ROW_NORMAL(i32_f64, int32_t, double)
RF_DEFINE_ROW_NORMAL(i64_f32, int64_t, float)
RF_DEFINE_ROW_NORMAL(i64_f64, int64_t, double)

#endif
