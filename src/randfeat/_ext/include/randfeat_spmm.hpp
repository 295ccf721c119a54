/* Rows of CSR × dense products (C++: _sparse_fast is compiled as C++ so that
 * these templates are instantiated once per index × value type from Cython).
 *
 * rf_row_times:  out_row[:] = Σ_jj data[jj] · B[ind[jj], :]            (K columns)
 * rf_row_normal: one row i of the fused normal product (csr_normal_matmat):
 *                u = z_iᵀP − mup, v = w_i·u, part[col, :] += z_ij·v for each
 *                nonzero, usum += v.
 *
 * Columns are taken 8 at a time; each block has a compile-time width KB
 * (1..8) so its accumulators stay in registers.  Accumulation is in double
 * for float and double data, in the order of the row's nonzeros.  No
 * threading here: the caller gives each row (or row block) to one thread, so
 * results do not depend on the thread count. */
#ifndef RANDFEAT_SPMM_HPP
#define RANDFEAT_SPMM_HPP

#include <stdint.h>
#include <type_traits>

#include "randfeat_common.h"

/* f(std::integral_constant<int, w>) for the block width w = min(8, K - k0). */
template <class F>
RF_INLINE void rf_each_block(int64_t K, F &&f) {
    for (int64_t k0 = 0; k0 < K; k0 += 8) {
        switch (K - k0 >= 8 ? 8 : (int)(K - k0)) {
        case 1: f(k0, std::integral_constant<int, 1>()); break;
        case 2: f(k0, std::integral_constant<int, 2>()); break;
        case 3: f(k0, std::integral_constant<int, 3>()); break;
        case 4: f(k0, std::integral_constant<int, 4>()); break;
        case 5: f(k0, std::integral_constant<int, 5>()); break;
        case 6: f(k0, std::integral_constant<int, 6>()); break;
        case 7: f(k0, std::integral_constant<int, 7>()); break;
        default: f(k0, std::integral_constant<int, 8>()); break;
        }
    }
}

/* acc[k] = Σ_jj data[jj] · B[ind[jj], k0 + k], k < KB, in the order of the nonzeros. */
template <int KB, typename I, typename V>
RF_INLINE void rf_row_dot_block(const I *ind, const V *dat, int64_t start, int64_t end,
                                const V *B, int64_t K, int64_t k0, double *acc) {
    for (int k = 0; k < KB; ++k) acc[k] = 0;
    for (int64_t jj = start; jj < end; ++jj) {
        const double v = (double)dat[jj];
        const V *b = B + (int64_t)ind[jj] * K + k0;
        for (int k = 0; k < KB; ++k) acc[k] += v * (double)b[k];
    }
}

template <int KB, typename I, typename V>
RF_INLINE void rf_row_times_block(const I *ind, const V *dat, int64_t start,
                                  int64_t end, const V *B, int64_t K, int64_t k0,
                                  V *out_row) {
    double acc[KB];
    rf_row_dot_block<KB>(ind, dat, start, end, B, K, k0, acc);
    for (int k = 0; k < KB; ++k) out_row[k0 + k] = (V)acc[k];
}

template <typename I, typename V>
static inline void rf_row_times(const I *ind, const V *dat, int64_t start, int64_t end,
                                const V *B, int64_t K, V *out_row) {
    rf_each_block(K, [&](int64_t k0, auto kb) {
        rf_row_times_block<decltype(kb)::value>(ind, dat, start, end, B, K, k0, out_row);
    });
}

template <int KB, typename I, typename V>
RF_INLINE void rf_row_normal_block(const I *ind, const V *dat, int64_t start,
                                   int64_t end, const V *P, int64_t K, int64_t k0,
                                   const double *mup, double wi, double *part,
                                   double *usum) {
    double acc[KB];
    rf_row_dot_block<KB>(ind, dat, start, end, P, K, k0, acc);
    for (int k = 0; k < KB; ++k) {
        acc[k] = wi * (acc[k] - mup[k0 + k]);
        usum[k0 + k] += acc[k];
    }
    for (int64_t jj = start; jj < end; ++jj) {
        const double v = (double)dat[jj];
        double *q = part + (int64_t)ind[jj] * K + k0;
        for (int k = 0; k < KB; ++k) q[k] += v * acc[k];
    }
}

template <typename I, typename V>
static inline void rf_row_normal(const I *ind, const V *dat, int64_t start, int64_t end,
                                 const V *P, int64_t K, const double *mup, double wi,
                                 double *part, double *usum) {
    rf_each_block(K, [&](int64_t k0, auto kb) {
        rf_row_normal_block<decltype(kb)::value>(ind, dat, start, end, P, K, k0, mup, wi, part,
                                                 usum);
    });
}

#endif
