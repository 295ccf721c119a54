/* Inner loops of the one-hot block products (_onehot_fast.pyx).
 *
 *   gather:  acc[i, :] += src[col[i], :]   for i < n   (Z @ B, one column block)
 *   scatter: acc[col[i], :] += u[i, :]     for i < n   (Zᵀ @ U, one column block)
 *   rows:    acc[i, :] += sum_j src[offset[j] + idx[i*stride + j], :]   for i < n, j < m
 *            (Z @ B over m blocks at once, from Z's row-major CSR indices
 *             or the row-major uint16 local columns;
 *             K = 2..8: the row's K sums stay in registers across the m
 *             blocks, one load and store of acc per row instead of per block)
 *
 * acc is double; src / u are float or double, K columns, row-major.  The
 * randomly addressed operand (src in gather and rows, acc in scatter) has a
 * row stride of its own (ld >= K): the caller pads rows of 33–64 bytes to
 * one 64-byte line on a 64-byte boundary (``padded_width``), so that such a
 * row never straddles two cache lines (a 7-wide double row straddles two in
 * 6 of 8 rows).  K = 1..8
 * get fixed-width, fully unrolled loops; each entry point is compiled for
 * baseline x86-64, AVX2 and AVX-512 and chosen once at import
 * (randfeat_common.h).  The order of the additions into each acc entry is
 * the order of i whatever the path, so every path gives the same result.
 * In the scatter, col may repeat; the row loop is sequential so repeated
 * bins accumulate correctly.  The scatter takes m blocks at once (their
 * columns col + j·col_stride, their accumulators at acc + offset[j]·ld).
 * The block-major bins (gather, scatter) are int32 or uint16. */
#ifndef RANDFEAT_ONEHOT_H
#define RANDFEAT_ONEHOT_H

#include <stdint.h>
#include "randfeat_common.h"

/* a[k] += (double)s[k] for k < KB (KB a compile-time constant after
 * inlining).  GCC and Clang: explicit 4- and 2-wide vector operations
 * (left alone, GCC emitted one scalar load-add-store per k for K = 7, which
 * bounded the products by load/store throughput); each lane is the same
 * IEEE double addition, so the result is the scalar loop's. */
#if defined(__GNUC__)
typedef double rf_v4d __attribute__((vector_size(32)));
typedef double rf_v2d __attribute__((vector_size(16)));
typedef float rf_v4f __attribute__((vector_size(16)));
typedef float rf_v2f __attribute__((vector_size(8)));
#define RF_ADDROW(NAME, VAL, V4, V2)                                                       \
    RF_INLINE void NAME(double *RF_RESTRICT a, const VAL *RF_RESTRICT s, const int64_t KB)  \
    {                                                                                      \
        int64_t k = 0;                                                                     \
        for (; k + 4 <= KB; k += 4) {                                                      \
            rf_v4d x; V4 y;                                                                \
            __builtin_memcpy(&x, a + k, sizeof x);                                         \
            __builtin_memcpy(&y, s + k, sizeof y);                                         \
            x += __builtin_convertvector(y, rf_v4d);                                       \
            __builtin_memcpy(a + k, &x, sizeof x);                                         \
        }                                                                                  \
        for (; k + 2 <= KB; k += 2) {                                                      \
            rf_v2d x; V2 y;                                                                \
            __builtin_memcpy(&x, a + k, sizeof x);                                         \
            __builtin_memcpy(&y, s + k, sizeof y);                                         \
            x += __builtin_convertvector(y, rf_v2d);                                       \
            __builtin_memcpy(a + k, &x, sizeof x);                                         \
        }                                                                                  \
        for (; k < KB; ++k) a[k] += (double)s[k];                                          \
    }
RF_ADDROW(rf_addrow_f64, double, rf_v4d, rf_v2d)
RF_ADDROW(rf_addrow_f32, float, rf_v4f, rf_v2f)
#else
#define RF_ADDROW(NAME, VAL)                                                               \
    RF_INLINE void NAME(double *RF_RESTRICT a, const VAL *RF_RESTRICT s, const int64_t KB)  \
    {                                                                                      \
        for (int64_t k = 0; k < KB; ++k) a[k] += (double)s[k];                             \
    }
RF_ADDROW(rf_addrow_f64, double)
RF_ADDROW(rf_addrow_f32, float)
#endif

/* The rows kernel's K running sums (K <= 8) as named vector registers:
 * KB = 4·n4 + 2·n2 + n1, lanes [0, 4) and [4, 8) in x0 / x1, then y (2
 * lanes), then z.  (Kept in a local array, the sums went through the stack:
 * a store-to-load chain per block.) */
#if defined(__GNUC__)
#define RF_ROW_REGISTERS_LOAD(A, KB)                                                       \
    const int64_t n4_ = (KB) / 4, o2_ = 4 * n4_, n2_ = ((KB) - o2_) / 2, o1_ = o2_ + 2 * n2_; \
    rf_v4d x0_ = {0, 0, 0, 0}, x1_ = {0, 0, 0, 0};                                         \
    rf_v2d y_ = {0, 0};                                                                    \
    double z_ = 0.0;                                                                       \
    if (n4_ > 0) __builtin_memcpy(&x0_, (A), sizeof x0_);                                  \
    if (n4_ > 1) __builtin_memcpy(&x1_, (A) + 4, sizeof x1_);                              \
    if (n2_ > 0) __builtin_memcpy(&y_, (A) + o2_, sizeof y_);                              \
    if (o1_ < (KB)) z_ = (A)[o1_];
#define RF_ROW_REGISTERS_ADD(VAL, S, KB)                                                   \
    do {                                                                                   \
        const VAL *RF_RESTRICT s_ = (S);                                                   \
        if (n4_ > 0) { RF_VEC_OF(VAL, 4) t_; __builtin_memcpy(&t_, s_, sizeof t_);           \
                       x0_ += __builtin_convertvector(t_, rf_v4d); }                        \
        if (n4_ > 1) { RF_VEC_OF(VAL, 4) t_; __builtin_memcpy(&t_, s_ + 4, sizeof t_);       \
                       x1_ += __builtin_convertvector(t_, rf_v4d); }                        \
        if (n2_ > 0) { RF_VEC_OF(VAL, 2) t_; __builtin_memcpy(&t_, s_ + o2_, sizeof t_);     \
                       y_ += __builtin_convertvector(t_, rf_v2d); }                         \
        if (o1_ < (KB)) z_ += (double)s_[o1_];                                             \
    } while (0)
#define RF_ROW_REGISTERS_STORE(A, KB)                                                      \
    if (n4_ > 0) __builtin_memcpy((A), &x0_, sizeof x0_);                                  \
    if (n4_ > 1) __builtin_memcpy((A) + 4, &x1_, sizeof x1_);                              \
    if (n2_ > 0) __builtin_memcpy((A) + o2_, &y_, sizeof y_);                              \
    if (o1_ < (KB)) (A)[o1_] = z_;
#define RF_VEC_OF(VAL, W) RF_VEC_OF_##W(VAL)
#define RF_VEC_OF_4(VAL) __typeof__(RF_PICK_V4((VAL)0))
#define RF_VEC_OF_2(VAL) __typeof__(RF_PICK_V2((VAL)0))
#define RF_PICK_V4(x) _Generic((x), float: (rf_v4f){0}, default: (rf_v4d){0})
#define RF_PICK_V2(x) _Generic((x), float: (rf_v2f){0}, default: (rf_v2d){0})
#else
#define RF_ROW_REGISTERS_LOAD(A, KB)                                                       \
    double r_[8];                                                                          \
    for (int64_t k_ = 0; k_ < (KB); ++k_) r_[k_] = (A)[k_];
#define RF_ROW_REGISTERS_ADD(VAL, S, KB)                                                   \
    do { const VAL *s_ = (S); for (int64_t k_ = 0; k_ < (KB); ++k_) r_[k_] += (double)s_[k_]; } while (0)
#define RF_ROW_REGISTERS_STORE(A, KB)                                                      \
    for (int64_t k_ = 0; k_ < (KB); ++k_) (A)[k_] = r_[k_];
#endif


/* The gather and scatter bodies per (value type, bin index type): the
 * block-major bins are int32, or uint16 when every block is at most 65536
 * columns wide (half the bytes streamed per product; same sums). */
#define RF_ONEHOT_INDEXED_BODIES(SUFFIX, VAL, ISUFFIX, IDX)                                \
    RF_INLINE void rf_gather_w_##SUFFIX##_##ISUFFIX(const IDX *RF_RESTRICT col, int64_t n,    \
                                        const VAL *RF_RESTRICT src, int64_t ld, int64_t K,    \
                                        double *RF_RESTRICT acc, const int64_t KB)            \
    {                                                                                      \
        if (KB == 1) { /* left to the compiler, which unrolls it well */                  \
            for (int64_t i = 0; i < n; ++i) acc[i] += (double)src[(int64_t)col[i] * ld];   \
            return;                                                                        \
        }                                                                                  \
        for (int64_t i = 0; i < n; ++i) {                                                  \
            rf_addrow_##SUFFIX(acc + i * K, src + (int64_t)col[i] * ld, KB);               \
        }                                                                                  \
    }                                                                                      \
    RF_INLINE void rf_gather_add_##SUFFIX##_##ISUFFIX##_body(const IDX *RF_RESTRICT col, int64_t n, \
                                                 const VAL *RF_RESTRICT src, int64_t ld,      \
                                                 int64_t K, double *RF_RESTRICT acc)          \
    {                                                                                      \
        switch (K) {                                                                       \
        case 1: /* ld = 1 as a constant: the common case, left to the compiler */           \
            if (ld == 1) rf_gather_w_##SUFFIX##_##ISUFFIX(col, n, src, 1, K, acc, 1);      \
            else rf_gather_w_##SUFFIX##_##ISUFFIX(col, n, src, ld, K, acc, 1);             \
            break;                                                                         \
        case 2: rf_gather_w_##SUFFIX##_##ISUFFIX(col, n, src, ld, K, acc, 2); break;       \
        case 3: rf_gather_w_##SUFFIX##_##ISUFFIX(col, n, src, ld, K, acc, 3); break;       \
        case 4: rf_gather_w_##SUFFIX##_##ISUFFIX(col, n, src, ld, K, acc, 4); break;       \
        case 5: rf_gather_w_##SUFFIX##_##ISUFFIX(col, n, src, ld, K, acc, 5); break;       \
        case 6: rf_gather_w_##SUFFIX##_##ISUFFIX(col, n, src, ld, K, acc, 6); break;       \
        case 7: rf_gather_w_##SUFFIX##_##ISUFFIX(col, n, src, ld, K, acc, 7); break;       \
        case 8: rf_gather_w_##SUFFIX##_##ISUFFIX(col, n, src, ld, K, acc, 8); break;       \
        default: rf_gather_w_##SUFFIX##_##ISUFFIX(col, n, src, ld, K, acc, K); break;      \
        }                                                                                  \
    }                                                                                      \
    /* Up to four blocks at once: each row of u is loaded once and added into    \
     * the four blocks' accumulators (disjoint, so every accumulator entry still   \
     * sums its rows in row order: the same result as one block at a time). */    \
    RF_INLINE void rf_scatter_w_##SUFFIX##_##ISUFFIX(const IDX *RF_RESTRICT col, int64_t col_stride, \
                                         int64_t m, const int64_t *RF_RESTRICT offset,      \
                                         int64_t n, const VAL *RF_RESTRICT u, int64_t K,      \
                                         double *RF_RESTRICT acc, int64_t ld, const int64_t KB) \
    {                                                                                      \
        int64_t j = 0;                                                                     \
        for (; j + 4 <= m; j += 4) {                                                       \
            const IDX *c0 = col + j * col_stride, *c1 = c0 + col_stride;                   \
            const IDX *c2 = c1 + col_stride, *c3 = c2 + col_stride;                        \
            double *a0 = acc + offset[j] * ld, *a1 = acc + offset[j + 1] * ld;             \
            double *a2 = acc + offset[j + 2] * ld, *a3 = acc + offset[j + 3] * ld;         \
            for (int64_t i = 0; i < n; ++i) {                                              \
                const VAL *ui = u + i * K;                                                 \
                rf_addrow_##SUFFIX(a0 + (int64_t)c0[i] * ld, ui, KB);                      \
                rf_addrow_##SUFFIX(a1 + (int64_t)c1[i] * ld, ui, KB);                      \
                rf_addrow_##SUFFIX(a2 + (int64_t)c2[i] * ld, ui, KB);                      \
                rf_addrow_##SUFFIX(a3 + (int64_t)c3[i] * ld, ui, KB);                      \
            }                                                                              \
        }                                                                                  \
        for (; j < m; ++j) {                                                               \
            const IDX *c = col + j * col_stride;                                           \
            double *a = acc + offset[j] * ld;                                              \
            for (int64_t i = 0; i < n; ++i)                                                \
                rf_addrow_##SUFFIX(a + (int64_t)c[i] * ld, u + i * K, KB);                 \
        }                                                                                  \
    }                                                                                      \
    RF_INLINE void rf_scatter_add_##SUFFIX##_##ISUFFIX##_body(const IDX *RF_RESTRICT col,     \
                                                  int64_t col_stride, int64_t m,              \
                                                  const int64_t *RF_RESTRICT offset, int64_t n, \
                                                  const VAL *RF_RESTRICT u, int64_t K,        \
                                                  double *RF_RESTRICT acc, int64_t ld)        \
    {                                                                                      \
        switch (K) {                                                                       \
        case 1:                                                                            \
            if (ld == 1) rf_scatter_w_##SUFFIX##_##ISUFFIX(col, col_stride, m, offset, n, u, K, acc, 1, 1); \
            else rf_scatter_w_##SUFFIX##_##ISUFFIX(col, col_stride, m, offset, n, u, K, acc, ld, 1);      \
            break;                                                                         \
        case 2: rf_scatter_w_##SUFFIX##_##ISUFFIX(col, col_stride, m, offset, n, u, K, acc, ld, 2); break; \
        case 3: rf_scatter_w_##SUFFIX##_##ISUFFIX(col, col_stride, m, offset, n, u, K, acc, ld, 3); break; \
        case 4: rf_scatter_w_##SUFFIX##_##ISUFFIX(col, col_stride, m, offset, n, u, K, acc, ld, 4); break; \
        case 5: rf_scatter_w_##SUFFIX##_##ISUFFIX(col, col_stride, m, offset, n, u, K, acc, ld, 5); break; \
        case 6: rf_scatter_w_##SUFFIX##_##ISUFFIX(col, col_stride, m, offset, n, u, K, acc, ld, 6); break; \
        case 7: rf_scatter_w_##SUFFIX##_##ISUFFIX(col, col_stride, m, offset, n, u, K, acc, ld, 7); break; \
        case 8: rf_scatter_w_##SUFFIX##_##ISUFFIX(col, col_stride, m, offset, n, u, K, acc, ld, 8); break; \
        default: rf_scatter_w_##SUFFIX##_##ISUFFIX(col, col_stride, m, offset, n, u, K, acc, ld, K); break; \
        }                                                                                  \
    }

/* The rows kernel per (value type, column index type): row i's columns are
 * idx[i*stride + j] + offset[j] for its m blocks (Z's global int32 indices
 * with zero offsets, or the narrow row-major local uint16 copy with the
 * blocks' first columns); K = 2..8 sums stay in registers across the blocks.
 * KB is a compile-time width after inlining, so the k loop is unrolled. */
#define RF_ONEHOT_ROWS_BODIES(SUFFIX, VAL, ISUFFIX, IDX)                                   \
    RF_INLINE void rf_rows_w_##SUFFIX##_##ISUFFIX(const IDX *RF_RESTRICT idx, int64_t stride, \
                                      int64_t m, const int64_t *RF_RESTRICT offset,           \
                                      int64_t n, const VAL *RF_RESTRICT src,                  \
                                      int64_t ld, int64_t K, double *RF_RESTRICT acc,         \
                                      const int64_t KB)                                       \
    {                                                                                      \
        for (int64_t i = 0; i < n; ++i) {                                                  \
            const IDX *RF_RESTRICT c = idx + i * stride;                                   \
            RF_ROW_REGISTERS_LOAD(acc + i * K, KB);                                        \
            for (int64_t j = 0; j < m; ++j)                                                \
                RF_ROW_REGISTERS_ADD(VAL, src + (offset[j] + (int64_t)c[j]) * ld, KB);     \
            RF_ROW_REGISTERS_STORE(acc + i * K, KB);                                       \
        }                                                                                  \
    }                                                                                      \
    RF_INLINE void rf_rows_add_##SUFFIX##_##ISUFFIX##_body(const IDX *RF_RESTRICT idx,        \
                                               int64_t stride, int64_t m,                     \
                                               const int64_t *RF_RESTRICT offset, int64_t n,  \
                                               const VAL *RF_RESTRICT src, int64_t ld,        \
                                               int64_t K, double *RF_RESTRICT acc)            \
    {                                                                                      \
        switch (K) {                                                                       \
        case 2: rf_rows_w_##SUFFIX##_##ISUFFIX(idx, stride, m, offset, n, src, ld, K, acc, 2); break; \
        case 3: rf_rows_w_##SUFFIX##_##ISUFFIX(idx, stride, m, offset, n, src, ld, K, acc, 3); break; \
        case 4: rf_rows_w_##SUFFIX##_##ISUFFIX(idx, stride, m, offset, n, src, ld, K, acc, 4); break; \
        case 5: rf_rows_w_##SUFFIX##_##ISUFFIX(idx, stride, m, offset, n, src, ld, K, acc, 5); break; \
        case 6: rf_rows_w_##SUFFIX##_##ISUFFIX(idx, stride, m, offset, n, src, ld, K, acc, 6); break; \
        case 7: rf_rows_w_##SUFFIX##_##ISUFFIX(idx, stride, m, offset, n, src, ld, K, acc, 7); break; \
        default: rf_rows_w_##SUFFIX##_##ISUFFIX(idx, stride, m, offset, n, src, ld, K, acc, 8); break; \
        }                                                                                  \
    }


/* The entry points of one (value type, index type): each compiled for every
 * code path, called through a pointer set once at import. */
#define RF_ONEHOT_ENTRY_POINTS(SUFFIX, VAL, ISUFFIX, IDX)                                  \
    RF_ISA_CLONES(rf_rows_add_##SUFFIX##_##ISUFFIX,                                        \
                  (const IDX *idx, int64_t stride, int64_t m, const int64_t *offset, int64_t n, \
                   const VAL *src, int64_t ld, int64_t K, double *acc),                       \
                  (idx, stride, m, offset, n, src, ld, K, acc))                               \
    RF_ISA_POINTER(rf_rows_add_##SUFFIX##_##ISUFFIX,                                       \
                   (const IDX *idx, int64_t stride, int64_t m, const int64_t *offset, int64_t n, \
                    const VAL *src, int64_t ld, int64_t K, double *acc))                      \
    RF_ISA_CLONES(rf_gather_add_##SUFFIX##_##ISUFFIX,                                      \
                  (const IDX *col, int64_t n, const VAL *src, int64_t ld, int64_t K, double *acc), \
                  (col, n, src, ld, K, acc))                                                  \
    RF_ISA_POINTER(rf_gather_add_##SUFFIX##_##ISUFFIX,                                     \
                   (const IDX *col, int64_t n, const VAL *src, int64_t ld, int64_t K, double *acc)) \
    RF_ISA_CLONES(rf_scatter_add_##SUFFIX##_##ISUFFIX,                                     \
                  (const IDX *col, int64_t col_stride, int64_t m, const int64_t *offset, int64_t n, \
                   const VAL *u, int64_t K, double *acc, int64_t ld),                         \
                  (col, col_stride, m, offset, n, u, K, acc, ld))                             \
    RF_ISA_POINTER(rf_scatter_add_##SUFFIX##_##ISUFFIX,                                    \
                   (const IDX *col, int64_t col_stride, int64_t m, const int64_t *offset, int64_t n, \
                    const VAL *u, int64_t K, double *acc, int64_t ld))
#define RF_ONEHOT_PICK(SUFFIX, ISUFFIX, isa)                                                \
    RF_ISA_PICK(rf_rows_add_##SUFFIX##_##ISUFFIX, isa);                                    \
    RF_ISA_PICK(rf_gather_add_##SUFFIX##_##ISUFFIX, isa);                                  \
    RF_ISA_PICK(rf_scatter_add_##SUFFIX##_##ISUFFIX, isa)

/* Everything for one (value type, index type): the bodies, then their entry points. */
#define RF_ONEHOT_TYPES(SUFFIX, VAL, ISUFFIX, IDX)                                         \
    RF_ONEHOT_INDEXED_BODIES(SUFFIX, VAL, ISUFFIX, IDX)                                    \
    RF_ONEHOT_ROWS_BODIES(SUFFIX, VAL, ISUFFIX, IDX)                                       \
    RF_ONEHOT_ENTRY_POINTS(SUFFIX, VAL, ISUFFIX, IDX)

RF_ONEHOT_TYPES(f64, double, i32, int32_t)
RF_ONEHOT_TYPES(f32, float, i32, int32_t)
RF_ONEHOT_TYPES(f64, double, u16, uint16_t)
RF_ONEHOT_TYPES(f32, float, u16, uint16_t)

/* Pick the code path once (at module import); returns the RF_ISA_* used. */
static int rf_onehot_init(void) {
    int isa = rf_detect_isa();
    RF_ONEHOT_PICK(f64, i32, isa);
    RF_ONEHOT_PICK(f32, i32, isa);
    RF_ONEHOT_PICK(f64, u16, isa);
    RF_ONEHOT_PICK(f32, u16, isa);
    return isa;
}

#endif
