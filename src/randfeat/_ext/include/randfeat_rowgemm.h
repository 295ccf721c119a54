/* The product X @ W of the dense Fourier kernel, one output row independent of the others.
 *
 *   out[i, j] = sum_{k < d} X[i, k] * W[k, j]      for i < n, j < m
 *
 * BLAS gemm does not give that: OpenBLAS's micro-kernels treat the rows of
 * a tile in groups (12 wide for sgemm on Haswell, with the remainder rows
 * in other kernels), and a row's result depends, in the last bits, on its
 * position in the group and on how many rows the call has.  A row's
 * features then depended on how the rows were split into calls (Dask
 * blocks, chunks): ~4e-7 apart in float32, ~1e-15 in float64.
 *
 * Here every output element is one accumulator that starts at zero and
 * adds X[i, k] * W[k, j] for k = 0, 1, ..., d-1 in that order, and every
 * element is computed by the same code: a full block of RB rows by JB
 * columns (kept in registers, W's JB columns reused across the RB rows).
 * Edge blocks are not computed by other code, whose instruction selection
 * (fused multiply-add or not, vector or scalar) the compiler may make
 * differently: a partial row block repeats its last row, a partial column
 * panel reads a zero-padded copy of W's last columns, and only the valid
 * part is stored.  So a row's result does not depend on its neighbours,
 * its position or the thread count (the tests check bitwise equality
 * across splits, for every ISA variant).
 *
 * Columns outer, rows inner: a JB-column panel of W (d * JB values), packed
 * contiguously in the caller's scratch, stays in L1/L2 while every row of
 * the tile passes over it.
 *
 * Compiled for baseline x86-64, AVX2 and AVX-512 (randfeat_common.h).
 */
#ifndef RANDFEAT_ROWGEMM_H
#define RANDFEAT_ROWGEMM_H

#include <stdint.h>
#include <string.h>

#include "randfeat_common.h"

#define RF_XW_RB 6 /* rows per register block */
/* Columns per panel (one 64-byte vector); a call's scratch ``pad`` holds
 * d * RF_XW_JB_* values. */
#define RF_XW_JB_F64 8
#define RF_XW_JB_F32 16

/* 6 rows x two 32-byte vectors of accumulators: 12 ymm registers (AVX2 and
 * AVX-512; GCC spills 64-byte generic vectors through the stack on AVX2),
 * plus W's two vectors and a broadcast, within 16. */
#if defined(__GNUC__) || defined(__clang__)
/* GCC/Clang vector extensions: one ymm register (AVX2/AVX-512), two xmm
 * (baseline x86-64) or two NEON registers per vector. */
typedef double rf_vf64 __attribute__((vector_size(32), aligned(8)));
typedef float rf_vf32 __attribute__((vector_size(32), aligned(4)));
#define RF_XW_VECTORS 1
#else
#define RF_XW_VECTORS 0
#endif

#if RF_XW_VECTORS
#define RF_ROWGEMM_BLOCK(SUFFIX, VAL, JB)                                                             \
    RF_INLINE void rf_xw_block_##SUFFIX(const VAL *const *x, int64_t sxk, int64_t d,                   \
                                        const VAL *RF_RESTRICT W, int64_t ldw, VAL *RF_RESTRICT out,    \
                                        int64_t ld_out, int64_t nr, int64_t nc)                         \
    {                                                                                                 \
        rf_v##SUFFIX acc0[RF_XW_RB], acc1[RF_XW_RB];                                                  \
        for (int r = 0; r < RF_XW_RB; ++r) acc0[r] = acc1[r] = (rf_v##SUFFIX){0};                     \
        for (int64_t k = 0; k < d; ++k) {                                                             \
            rf_v##SUFFIX w0, w1;                                                                      \
            memcpy(&w0, W + k * ldw, sizeof w0);                                                      \
            memcpy(&w1, W + k * ldw + JB / 2, sizeof w1);                                             \
            for (int r = 0; r < RF_XW_RB; ++r) {                                                      \
                const VAL xv = x[r][k * sxk];                                                         \
                acc0[r] += xv * w0;                                                                   \
                acc1[r] += xv * w1;                                                                   \
            }                                                                                         \
        }                                                                                             \
        VAL tmp[JB];                                                                                  \
        for (int64_t r = 0; r < nr; ++r) {                                                            \
            memcpy(tmp, &acc0[r], sizeof acc0[r]);                                                    \
            memcpy(tmp + JB / 2, &acc1[r], sizeof acc1[r]);                                           \
            if (nc == JB) memcpy(out + r * ld_out, tmp, sizeof tmp);                                  \
            else for (int64_t j = 0; j < nc; ++j) out[r * ld_out + j] = tmp[j];                       \
        }                                                                                             \
    }
#else
#define RF_ROWGEMM_BLOCK(SUFFIX, VAL, JB)                                                             \
    RF_INLINE void rf_xw_block_##SUFFIX(const VAL *const *x, int64_t sxk, int64_t d,                   \
                                        const VAL *RF_RESTRICT W, int64_t ldw, VAL *RF_RESTRICT out,    \
                                        int64_t ld_out, int64_t nr, int64_t nc)                         \
    {                                                                                                 \
        VAL acc[RF_XW_RB][JB];                                                                        \
        for (int r = 0; r < RF_XW_RB; ++r)                                                            \
            for (int j = 0; j < JB; ++j) acc[r][j] = 0;                                               \
        for (int64_t k = 0; k < d; ++k) {                                                             \
            const VAL *RF_RESTRICT w = W + k * ldw;                                                   \
            for (int r = 0; r < RF_XW_RB; ++r) {                                                      \
                const VAL xv = x[r][k * sxk];                                                         \
                for (int j = 0; j < JB; ++j) acc[r][j] += xv * w[j];                                  \
            }                                                                                         \
        }                                                                                             \
        for (int64_t r = 0; r < nr; ++r)                                                              \
            for (int64_t j = 0; j < nc; ++j) out[r * ld_out + j] = acc[r][j];                         \
    }
#endif

/* The whole product: JB-column panels outer, RB-row blocks inner. */
#define RF_ROWGEMM_BODIES(SUFFIX, VAL, JB)                                                            \
    RF_ROWGEMM_BLOCK(SUFFIX, VAL, JB)                                                                 \
    /* pad: d * JB scratch for the packed column panel. */                                            \
    RF_INLINE void rf_rows_xw_##SUFFIX##_body(const VAL *X, int64_t sxi, int64_t sxk, int64_t d,        \
                                             const VAL *W, int64_t ldw, int64_t m, VAL *out,           \
                                             int64_t ld_out, int64_t n, VAL *pad)                      \
    {                                                                                                 \
        const VAL *x[RF_XW_RB];                                                                       \
        for (int64_t j0 = 0; j0 < m; j0 += JB) {                                                      \
            const int64_t nc = m - j0 < JB ? m - j0 : JB;                                             \
            /* Packed: the panel's rows are contiguous (a strided panel costs a       \
             * TLB miss per k), zero-padded past m. */                                \
            for (int64_t k = 0; k < d; ++k)                                                           \
                for (int64_t j = 0; j < JB; ++j) pad[k * JB + j] = j < nc ? W[k * ldw + j0 + j] : 0;  \
            const VAL *panel = pad;                                                                   \
            const int64_t ldp = JB;                                                                   \
            for (int64_t i = 0; i < n; i += RF_XW_RB) {                                               \
                const int64_t nr = n - i < RF_XW_RB ? n - i : RF_XW_RB;                               \
                for (int r = 0; r < RF_XW_RB; ++r) x[r] = X + (i + (r < nr ? r : nr - 1)) * sxi;      \
                rf_xw_block_##SUFFIX(x, sxk, d, panel, ldp, out + i * ld_out + j0, ld_out, nr, nc);   \
            }                                                                                         \
        }                                                                                             \
    }

/* One column (m = 1, a regression's predictions): a dot product per row,
 * memory-bound, so the panel kernel's JB-wide padding would waste JB - 1
 * of every JB multiply-adds.  Every row runs the same code: 4 vector
 * accumulators over k (lane l of vector a holds the k = l (mod L) terms of
 * its quarter of each 4L-step), the tail terms added in order, the lanes
 * summed in a fixed order.  A row with a column stride (Fortran-ordered X)
 * is first gathered into the contiguous scratch, so it takes the same path. */
#if RF_XW_VECTORS
#define RF_ROWDOT_BODY(SUFFIX, VAL)                                                                    \
    RF_INLINE VAL rf_dot_##SUFFIX(const VAL *RF_RESTRICT x, const VAL *RF_RESTRICT w, int64_t d)       \
    {                                                                                                 \
        enum { L = sizeof(rf_v##SUFFIX) / sizeof(VAL) };                                              \
        rf_v##SUFFIX a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, u, v;                                    \
        int64_t k = 0;                                                                                \
        for (; k + 4 * L <= d; k += 4 * L) {                                                          \
            memcpy(&u, x + k, sizeof u); memcpy(&v, w + k, sizeof v); a0 += u * v;                    \
            memcpy(&u, x + k + L, sizeof u); memcpy(&v, w + k + L, sizeof v); a1 += u * v;            \
            memcpy(&u, x + k + 2 * L, sizeof u); memcpy(&v, w + k + 2 * L, sizeof v); a2 += u * v;    \
            memcpy(&u, x + k + 3 * L, sizeof u); memcpy(&v, w + k + 3 * L, sizeof v); a3 += u * v;    \
        }                                                                                             \
        VAL tail = 0;                                                                                 \
        for (; k < d; ++k) tail += x[k] * w[k];                                                       \
        a0 = (a0 + a1) + (a2 + a3);                                                                   \
        VAL lanes[L];                                                                                 \
        memcpy(lanes, &a0, sizeof a0);                                                                \
        VAL sum = 0;                                                                                  \
        for (int l = 0; l < L; ++l) sum += lanes[l];                                                  \
        return sum + tail;                                                                            \
    }
#else
#define RF_ROWDOT_BODY(SUFFIX, VAL)                                                                    \
    RF_INLINE VAL rf_dot_##SUFFIX(const VAL *RF_RESTRICT x, const VAL *RF_RESTRICT w, int64_t d)       \
    {                                                                                                 \
        VAL sum = 0;                                                                                  \
        for (int64_t k = 0; k < d; ++k) sum += x[k] * w[k];                                           \
        return sum;                                                                                   \
    }
#endif

/* X @ W with W already packed as JB-column panels (panel p: d × JB values,
 * contiguous, zero past m), for long rows (row_products with large d): the
 * rows are taken RT at a time (RT·d values within L2), and every panel
 * passes over them, so X is read from memory once and each panel from L2/L3
 * once per RT rows — instead of the whole tile re-read per panel and every
 * panel re-packed per tile.  The same block code as rf_rows_xw, on the same
 * values in the same order: the same bits. */
#define RF_ROWS_PACKED_BODY(SUFFIX, VAL, JB)                                                          \
    RF_INLINE void rf_rows_packed_##SUFFIX##_body(const VAL *X, int64_t sxi, int64_t sxk, int64_t d,    \
                                                 const VAL *Wp, int64_t m, VAL *out, int64_t ld_out,   \
                                                 int64_t n, int64_t rt)                                \
    {                                                                                                 \
        const VAL *x[RF_XW_RB];                                                                       \
        const int64_t n_panels = (m + JB - 1) / JB;                                                   \
        for (int64_t t0 = 0; t0 < n; t0 += rt) {                                                      \
            const int64_t t1 = n - t0 < rt ? n : t0 + rt;                                             \
            for (int64_t p = 0; p < n_panels; ++p) {                                                  \
                const int64_t j0 = p * JB, nc = m - j0 < JB ? m - j0 : JB;                            \
                const VAL *panel = Wp + p * d * JB;                                                   \
                for (int64_t i = t0; i < t1; i += RF_XW_RB) {                                         \
                    const int64_t nr = t1 - i < RF_XW_RB ? t1 - i : RF_XW_RB;                         \
                    for (int r = 0; r < RF_XW_RB; ++r) x[r] = X + (i + (r < nr ? r : nr - 1)) * sxi;  \
                    rf_xw_block_##SUFFIX(x, sxk, d, panel, JB, out + i * ld_out + j0, ld_out, nr, nc);  \
                }                                                                                     \
            }                                                                                         \
        }                                                                                             \
    }

/* One column (m = 1: a regression's predictions): out[i] = x_i · w.  pad
 * holds d values (a strided row is gathered there first). */
#define RF_ROWS_DOT_BODY(SUFFIX, VAL)                                                                 \
    RF_ROWDOT_BODY(SUFFIX, VAL)                                                                       \
    RF_INLINE void rf_rows_dot_##SUFFIX##_body(const VAL *X, int64_t sxi, int64_t sxk, int64_t d,       \
                                              const VAL *w, VAL *out, int64_t ld_out, int64_t n,       \
                                              VAL *pad)                                                \
    {                                                                                                 \
        for (int64_t i = 0; i < n; ++i) {                                                             \
            const VAL *x = X + i * sxi;                                                               \
            if (sxk != 1) {                                                                           \
                for (int64_t k = 0; k < d; ++k) pad[k] = x[k * sxk];                                  \
                x = pad;                                                                              \
            }                                                                                         \
            out[i * ld_out] = rf_dot_##SUFFIX(x, w, d);                                               \
        }                                                                                             \
    }

RF_ROWGEMM_BODIES(f64, double, RF_XW_JB_F64)
RF_ROWGEMM_BODIES(f32, float, RF_XW_JB_F32)
RF_ROWS_DOT_BODY(f64, double)
RF_ROWS_DOT_BODY(f32, float)
RF_ROWS_PACKED_BODY(f64, double, RF_XW_JB_F64)
RF_ROWS_PACKED_BODY(f32, float, RF_XW_JB_F32)

#define RF_ROWS_XW_F64_PARAMS                                                                       \
    (const double *X, int64_t sxi, int64_t sxk, int64_t d, const double *W, int64_t ldw, int64_t m, \
     double *out, int64_t ld_out, int64_t n, double *pad)
#define RF_ROWS_XW_F32_PARAMS                                                                     \
    (const float *X, int64_t sxi, int64_t sxk, int64_t d, const float *W, int64_t ldw, int64_t m, \
     float *out, int64_t ld_out, int64_t n, float *pad)
#define RF_ROWS_XW_ARGS (X, sxi, sxk, d, W, ldw, m, out, ld_out, n, pad)

RF_ISA_CLONES(rf_rows_xw_f64, RF_ROWS_XW_F64_PARAMS, RF_ROWS_XW_ARGS)
RF_ISA_CLONES(rf_rows_xw_f32, RF_ROWS_XW_F32_PARAMS, RF_ROWS_XW_ARGS)
RF_ISA_POINTER(rf_rows_xw_f64, RF_ROWS_XW_F64_PARAMS)
RF_ISA_POINTER(rf_rows_xw_f32, RF_ROWS_XW_F32_PARAMS)
#define RF_ROWS_PACKED_F64_PARAMS                                                                \
    (const double *X, int64_t sxi, int64_t sxk, int64_t d, const double *Wp, int64_t m, double *out, \
     int64_t ld_out, int64_t n, int64_t rt)
#define RF_ROWS_PACKED_F32_PARAMS                                                                \
    (const float *X, int64_t sxi, int64_t sxk, int64_t d, const float *Wp, int64_t m, float *out,  \
     int64_t ld_out, int64_t n, int64_t rt)
#define RF_ROWS_PACKED_ARGS (X, sxi, sxk, d, Wp, m, out, ld_out, n, rt)
RF_ISA_CLONES(rf_rows_packed_f64, RF_ROWS_PACKED_F64_PARAMS, RF_ROWS_PACKED_ARGS)
RF_ISA_CLONES(rf_rows_packed_f32, RF_ROWS_PACKED_F32_PARAMS, RF_ROWS_PACKED_ARGS)
RF_ISA_POINTER(rf_rows_packed_f64, RF_ROWS_PACKED_F64_PARAMS)
RF_ISA_POINTER(rf_rows_packed_f32, RF_ROWS_PACKED_F32_PARAMS)
#define RF_ROWS_DOT_F64_PARAMS \
    (const double *X, int64_t sxi, int64_t sxk, int64_t d, const double *w, double *out, int64_t ld_out, int64_t n, \
     double *pad)
#define RF_ROWS_DOT_F32_PARAMS \
    (const float *X, int64_t sxi, int64_t sxk, int64_t d, const float *w, float *out, int64_t ld_out, int64_t n, \
     float *pad)
#define RF_ROWS_DOT_ARGS (X, sxi, sxk, d, w, out, ld_out, n, pad)
RF_ISA_CLONES(rf_rows_dot_f64, RF_ROWS_DOT_F64_PARAMS, RF_ROWS_DOT_ARGS)
RF_ISA_CLONES(rf_rows_dot_f32, RF_ROWS_DOT_F32_PARAMS, RF_ROWS_DOT_ARGS)
RF_ISA_POINTER(rf_rows_dot_f64, RF_ROWS_DOT_F64_PARAMS)
RF_ISA_POINTER(rf_rows_dot_f32, RF_ROWS_DOT_F32_PARAMS)

/* Pick the code path once (at module import); returns the RF_ISA_* used. */
static int rf_rowgemm_init(void) {
    int isa = rf_detect_isa();
    RF_ISA_PICK(rf_rows_xw_f64, isa);
    RF_ISA_PICK(rf_rows_xw_f32, isa);
    RF_ISA_PICK(rf_rows_dot_f64, isa);
    RF_ISA_PICK(rf_rows_dot_f32, isa);
    RF_ISA_PICK(rf_rows_packed_f64, isa);
    RF_ISA_PICK(rf_rows_packed_f32, isa);
    return isa;
}

#endif
