/* Kernels of the scikit-learn-compatible kernel approximations (issue 28).
 *
 *   Nystroem:     Z = kmap(X, L) · Nᵀ, the kernel block between rows of X and
 *                 the landmarks L computed one sub-tile of rows at a time and
 *                 multiplied by the normalisation while it is in L2.
 *   AdditiveChi2: x -> [sqrt(xL), f_j cos(jL log x), f_j sin(jL log x)], elementwise.
 *   TensorSketch: the degree-p tensor sketch of one row, summed directly over
 *                 the tuples of its nonzeros when there are few of them.
 *
 * Row independence.  As in randfeat_rowgemm.h, every output element is
 * computed by code that does not depend on the other rows of the call or on
 * the thread: the kernel block's dot products by rf_rows_packed (full
 * register blocks, the last row repeated), the coordinatewise kernels by
 * the same full-block scheme below, the maps elementwise, the product by
 * rf_rows_packed again.  So a row's features are bit-identical for any
 * thread count and any split of the rows into calls.
 *
 * The Nystroem sub-tile and the elementwise maps are compiled for baseline
 * x86-64, AVX2 and AVX-512 (randfeat_common.h) and picked at import.
 */
#ifndef RANDFEAT_KERNEL_APPROX_H
#define RANDFEAT_KERNEL_APPROX_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "randfeat_common.h"
#include "randfeat_rowgemm.h"
#include "randfeat_trig.h"

/* ------------------------------------------------------------------ exp(x), x <= 0
 * Branch-free so that loops over it vectorise: k = round(x / ln 2) by the
 * magic-number trick, r = x - k ln2 (Cody-Waite, exact product k * LN2_HI),
 * exp(r) by its Taylor polynomial on |r| <= ln2/2 (truncation below 0.2 ulp),
 * times 2^k built in the exponent bits.  Arguments below the smallest
 * normal result give 0 (the true value is below 2.3e-308 / 1.2e-38). */
#define RF_LOG2E_F64 0x1.71547652b82fep+0
#define RF_LN2_HI_F64 0x1.62e42fee00000p-1 /* 32 significant bits: k * HI exact */
#define RF_LN2_LO_F64 0x1.a39ef35793c76p-33
#define RF_EXP_MIN_F64 -708.39

RF_INLINE double rf_expneg_f64(double x) {
    const double xc = x < RF_EXP_MIN_F64 ? RF_EXP_MIN_F64 : x;
    const double t = xc * RF_LOG2E_F64 + RF_ROUND_MAGIC_F64;
    const double k = t - RF_ROUND_MAGIC_F64;
    int64_t tb, mb;
    const double magic = RF_ROUND_MAGIC_F64;
    memcpy(&tb, &t, sizeof tb);
    memcpy(&mb, &magic, sizeof mb);
    const int64_t ki = tb - mb; /* k as an integer, in [-1022, 0] */
    const double r = (xc - k * RF_LN2_HI_F64) - k * RF_LN2_LO_F64;
    double p = 1.0 / 479001600.0; /* 1/12! */
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    const uint64_t sb = (uint64_t)(ki + 1023) << 52;
    double scale;
    memcpy(&scale, &sb, sizeof scale);
    const double res = p * scale;
    return x < RF_EXP_MIN_F64 ? 0.0 : res;
}

#define RF_LOG2E_F32 0x1.715476p+0f
#define RF_LN2_HI_F32 0x1.62e400p-1f /* 16 significant bits */
#define RF_LN2_LO_F32 0x1.7f7d1cp-20f
#define RF_EXP_MIN_F32 -87.33f

RF_INLINE float rf_expneg_f32(float x) {
    const float xc = x < RF_EXP_MIN_F32 ? RF_EXP_MIN_F32 : x;
    const float t = xc * RF_LOG2E_F32 + RF_ROUND_MAGIC_F32;
    const float k = t - RF_ROUND_MAGIC_F32;
    int32_t tb, mb;
    const float magic = RF_ROUND_MAGIC_F32;
    memcpy(&tb, &t, sizeof tb);
    memcpy(&mb, &magic, sizeof mb);
    const int32_t ki = tb - mb; /* in [-126, 0] */
    const float r = (xc - k * RF_LN2_HI_F32) - k * RF_LN2_LO_F32;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const uint32_t sb = (uint32_t)(ki + 127) << 23;
    float scale;
    memcpy(&scale, &sb, sizeof scale);
    const float res = p * scale;
    return x < RF_EXP_MIN_F32 ? 0.0f : res;
}

/* log(x) for x > 0 (finite; subnormals too), branch-free so that loops vectorise:
 * x = 2^e m with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(s), s = (m - 1)/(m + 1),
 * |s| <= 0.1716, the odd series to s^21 (truncation below 1e-17 relative);
 * m - 1 is exact (Sterbenz).  About 2 ulp.  x = 0 gives a finite value
 * (callers select it away). */
#define RF_LN2_HI_LOG 0x1.62e42fee00000p-1
#define RF_LN2_LO_LOG 0x1.a39ef35793c76p-33
RF_INLINE double rf_log_f64(double x) {
    const int sub = x < 0x1p-1022;
    const double xs = sub ? x * 0x1p54 : x;
    uint64_t bits;
    memcpy(&bits, &xs, sizeof bits);
    int64_t e = (int64_t)((bits >> 52) & 0x7ff) - 1023 - (sub ? 54 : 0);
    const uint64_t mb = (bits & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL;
    double m;
    memcpy(&m, &mb, sizeof m);
    const int big = m > 0x1.6a09e667f3bcdp+0; /* sqrt(2) */
    m = big ? m * 0.5 : m;
    e += big;
    const double f = m - 1.0;
    const double sv = f / (2.0 + f);
    const double z = sv * sv;
    double p = 1.0 / 21.0;
    p = p * z + 1.0 / 19.0;
    p = p * z + 1.0 / 17.0;
    p = p * z + 1.0 / 15.0;
    p = p * z + 1.0 / 13.0;
    p = p * z + 1.0 / 11.0;
    p = p * z + 1.0 / 9.0;
    p = p * z + 1.0 / 7.0;
    p = p * z + 1.0 / 5.0;
    p = p * z + 1.0 / 3.0;
    const double ed = (double)e;
    return ed * RF_LN2_HI_LOG + ((2.0 * sv) * (z * p) + (2.0 * sv + ed * RF_LN2_LO_LOG));
}

RF_INLINE double rf_sqrt_f64(double x) { return sqrt(x); }
RF_INLINE float rf_sqrt_f32(float x) { return sqrtf(x); }
RF_INLINE double rf_tanh_f64(double x) { return tanh(x); }
RF_INLINE float rf_tanh_f32(float x) { return tanhf(x); }
RF_INLINE double rf_pow_f64(double x, double y) { return pow(x, y); }
RF_INLINE float rf_pow_f32(float x, float y) { return powf(x, y); }

/* ------------------------------------------------------------------ kinds */
enum {
    /* from the dot products X·Lᵀ */
    RF_KA_RBF = 0,
    RF_KA_POLY = 1,
    RF_KA_LINEAR = 2,
    RF_KA_SIGMOID = 3,
    RF_KA_COSINE = 4,
    /* coordinatewise sums or products over the features */
    RF_KA_LAPLACIAN = 5,
    RF_KA_CHI2 = 6,
    RF_KA_ADDITIVE_CHI2 = 7,
    RF_KA_CAUCHY = 8,
    RF_KA_MATERN = 9,
    RF_KA_SKEWED_CHI2 = 10,
    /* the caller gives the block: kernel values, or dot products to map */
    RF_KA_GIVEN = 11,
};

#define RF_KA_FROM_DOTS(kind) ((kind) <= RF_KA_COSINE)

/* One Nystroem call: everything a sub-tile needs (pointers into arrays the
 * caller keeps alive; compiled code trusts their shapes).  Values are of the
 * call's dtype; `single` says which. */
typedef struct {
    int kind;
    int int_degree;     /* poly: the degree when it is an integer >= 0, else -1 */
    int matern_nu2;     /* matern: 2*nu (1, 3 or 5) */
    int have_dots;      /* GIVEN block holds dot products to be mapped (kind from dots) */
    double gamma, coef0, degree;
    /* rows: dense X (n × d, strides sxi, sxk), or the given block (n × m, C order) */
    const void *X;
    int64_t sxi, sxk, d;
    const void *xvec;   /* per row (given block only): squared norm (rbf) or 1/norm (cosine) */
    /* landmarks: Lᵀ as packed panels (n_panels × d × JB), plane 2 for skewed_chi2 */
    const void *Lp, *Lp2;
    const void *lvec;   /* per landmark: squared norm (rbf) or 1/norm (cosine) */
    int64_t m;
    /* the normalisation Nᵀ (m × m_out) as packed panels, or NULL: out is the block */
    const void *Np;
    int64_t m_out;
    void *out;
    int64_t ld_out;
    int64_t rt;         /* rows per sub-tile */
    double c;           /* skewed_chi2: the skewedness */
    int64_t prod_rt;    /* rows per pass of the product over the panels of Nᵀ */
} rf_ka_nys;

/* Scratch values one thread needs for a sub-tile of rt rows (in the dtype):
 * the block (rt × m, when there is a product), row planes (rt × d, two for
 * skewed_chi2, one when X must be copied to unit stride), a per-row vector
 * and a row of the poly powers. */
static inline int64_t rf_ka_scratch_values(const rf_ka_nys *t) {
    int64_t s = t->rt * t->m + 2 * t->rt * t->d + t->rt + 2 * t->m + 64;
    return s;
}

/* ------------------------------------------------------------------ maps
 * dst[j] = kernel value from src[j] (a dot product or a coordinatewise
 * accumulator), xv the row's vector entry, lv the landmarks'.  In place
 * allowed (dst == src). */
#define RF_KA_MAP(SUFFIX, VAL)                                                                      \
    RF_INLINE void rf_ka_map_##SUFFIX(const rf_ka_nys *t, const VAL *src, VAL *dst, VAL xv,         \
                                      const VAL *RF_RESTRICT lv, int64_t m, VAL *RF_RESTRICT tmp)   \
    {                                                                                               \
        const VAL g = (VAL)t->gamma, c0 = (VAL)t->coef0;                                            \
        switch (t->kind) {                                                                          \
        case RF_KA_RBF:                                                                             \
            for (int64_t j = 0; j < m; ++j) {                                                       \
                VAL s = (xv - 2 * src[j]) + lv[j];                                                  \
                s = s > 0 ? s : 0;                                                                  \
                dst[j] = rf_expneg_##SUFFIX(-g * s);                                                \
            }                                                                                       \
            break;                                                                                  \
        case RF_KA_POLY:                                                                            \
            if (t->int_degree >= 0) {                                                               \
                /* b^p by squaring: log2(p) vector passes over the row */                         \
                for (int64_t j = 0; j < m; ++j) {                                                   \
                    tmp[j] = src[j] * g + c0;                                                       \
                    dst[j] = 1;                                                                     \
                }                                                                                   \
                for (int p = t->int_degree; p > 0; p >>= 1) {                                       \
                    if (p & 1)                                                                      \
                        for (int64_t j = 0; j < m; ++j) dst[j] *= tmp[j];                           \
                    if (p > 1)                                                                      \
                        for (int64_t j = 0; j < m; ++j) tmp[j] *= tmp[j];                           \
                }                                                                                   \
            } else {                                                                                \
                for (int64_t j = 0; j < m; ++j)                                                     \
                    dst[j] = rf_pow_##SUFFIX(src[j] * g + c0, (VAL)t->degree);                      \
            }                                                                                       \
            break;                                                                                  \
        case RF_KA_LINEAR:                                                                          \
            if (dst != src) memcpy(dst, src, (size_t)m * sizeof(VAL));                              \
            break;                                                                                  \
        case RF_KA_SIGMOID:                                                                         \
            for (int64_t j = 0; j < m; ++j) dst[j] = rf_tanh_##SUFFIX(src[j] * g + c0);             \
            break;                                                                                  \
        case RF_KA_COSINE:                                                                          \
            for (int64_t j = 0; j < m; ++j) dst[j] = src[j] * xv * lv[j];                           \
            break;                                                                                  \
        case RF_KA_LAPLACIAN:                                                                       \
        case RF_KA_CHI2:                                                                            \
            for (int64_t j = 0; j < m; ++j) dst[j] = rf_expneg_##SUFFIX(-(g * src[j]));             \
            break;                                                                                  \
        case RF_KA_ADDITIVE_CHI2:                                                                   \
            for (int64_t j = 0; j < m; ++j) dst[j] = -src[j];                                       \
            break;                                                                                  \
        case RF_KA_CAUCHY:                                                                          \
            for (int64_t j = 0; j < m; ++j) dst[j] = 1 / src[j];                                    \
            break;                                                                                  \
        case RF_KA_MATERN: {                                                                        \
            const VAL s = (VAL)sqrt(2.0 * t->gamma);                                                \
            if (t->matern_nu2 == 1) {                                                               \
                for (int64_t j = 0; j < m; ++j) dst[j] = rf_expneg_##SUFFIX(-(rf_sqrt_##SUFFIX(src[j]) * s));   \
            } else if (t->matern_nu2 == 3) {                                                        \
                const VAL r3 = (VAL)sqrt(3.0);                                                      \
                for (int64_t j = 0; j < m; ++j) {                                                   \
                    const VAL r = rf_sqrt_##SUFFIX(src[j]) * s * r3;                                       \
                    dst[j] = (1 + r) * rf_expneg_##SUFFIX(-r);                                      \
                }                                                                                   \
            } else {                                                                                \
                const VAL r5 = (VAL)sqrt(5.0);                                                      \
                for (int64_t j = 0; j < m; ++j) {                                                   \
                    const VAL r = rf_sqrt_##SUFFIX(src[j]) * s * r5;                                       \
                    dst[j] = (1 + r + r * r / 3) * rf_expneg_##SUFFIX(-r);                          \
                }                                                                                   \
            }                                                                                       \
            break;                                                                                  \
        }                                                                                           \
        default: /* skewed_chi2 (the product itself), given kernel values */                       \
            if (dst != src) memcpy(dst, src, (size_t)m * sizeof(VAL));                              \
            break;                                                                                  \
        }                                                                                           \
    }

RF_KA_MAP(f64, double)
RF_KA_MAP(f32, float)

/* ------------------------------------------------- coordinatewise blocks
 * acc[r][j] over k of one term f(x_r[k], w[k][j]) for RB rows (unit-stride
 * rows x[r]; plane 2 x2[r] for skewed_chi2) and one packed JB-column panel
 * of Lᵀ; the same full-block scheme as rf_xw_block (rows repeated, panel
 * zero-padded) so every element takes the same code. */
#define RF_KA_PAIR(OP, SUFFIX, VAL, JB, INIT, STEP)                                                \
    RF_INLINE void rf_ka_pair_##OP##_##SUFFIX(const VAL *const *x, const VAL *const *x2, int64_t d,  \
                                              const VAL *RF_RESTRICT P, const VAL *RF_RESTRICT P2,   \
                                              VAL g, VAL *RF_RESTRICT out, int64_t ld_out,           \
                                              int64_t nr, int64_t nc)                                \
    {                                                                                               \
        VAL acc[RF_XW_RB][JB];                                                                      \
        (void)x2; (void)P2; (void)g;                                                                \
        for (int r = 0; r < RF_XW_RB; ++r)                                                          \
            for (int j = 0; j < JB; ++j) acc[r][j] = INIT;                                          \
        for (int64_t k = 0; k < d; ++k) {                                                           \
            const VAL *RF_RESTRICT w = P + k * JB;                                                  \
            const VAL *RF_RESTRICT w2 = P2 + k * JB;                                                \
            (void)w2;                                                                               \
            for (int r = 0; r < RF_XW_RB; ++r) {                                                    \
                const VAL xv = x[r][k];                                                             \
                const VAL xv2 = x2[r][k];                                                           \
                (void)xv2;                                                                          \
                for (int j = 0; j < JB; ++j) {                                                      \
                    const VAL wv = w[j], wv2 = w2[j];                                               \
                    (void)wv2;                                                                      \
                    STEP;                                                                           \
                }                                                                                   \
            }                                                                                       \
        }                                                                                           \
        for (int64_t r = 0; r < nr; ++r)                                                            \
            for (int64_t j = 0; j < nc; ++j) out[r * ld_out + j] = acc[r][j];                       \
    }

#define RF_KA_PAIRS(SUFFIX, VAL, JB)                                                                \
    RF_KA_PAIR(l1, SUFFIX, VAL, JB, 0, {                                                            \
        const VAL df = xv - wv;                                                                     \
        acc[r][j] += df < 0 ? -df : df;                                                             \
    })                                                                                              \
    RF_KA_PAIR(chi2, SUFFIX, VAL, JB, 0, {                                                          \
        /* (x - y)^2 / (x + y), 0 where x + y = 0 (both zero: inputs are >= 0) */               \
        const VAL df = xv - wv;                                                                     \
        const VAL den = xv + wv;                                                                    \
        acc[r][j] += df * df / (den != 0 ? den : 1);                                                \
    })                                                                                              \
    RF_KA_PAIR(sq, SUFFIX, VAL, JB, 0, {                                                            \
        const VAL df = xv - wv;                                                                     \
        acc[r][j] += df * df;                                                                       \
    })                                                                                              \
    RF_KA_PAIR(cauchy, SUFFIX, VAL, JB, 1, {                                                        \
        const VAL df = xv - wv;                                                                     \
        acc[r][j] *= 1 + g * (df * df);                                                             \
    })                                                                                              \
    RF_KA_PAIR(skew, SUFFIX, VAL, JB, 1, {                                                          \
        /* 2 sqrt(a) sqrt(b) / (a + b), a = x + c, b = y + c (both > 0) */                       \
        acc[r][j] *= 2 * xv2 * wv2 / (xv + wv);                                                     \
    })

RF_KA_PAIRS(f64, double, RF_XW_JB_F64)
RF_KA_PAIRS(f32, float, RF_XW_JB_F32)

/* ------------------------------------------------------- one Nystroem chunk
 * Rows [r0, r1) of the call, sub-tile by sub-tile: the block (dots mapped, or
 * coordinatewise accumulators mapped, or the given block mapped) into the
 * scratch (or straight into out when there is no product), then
 * out_rows = block · Nᵀ by rf_rows_packed. */
#define RF_KA_NYS_BODY(NAME, SUFFIX, VAL, JB, PRODUCT)                                              \
    RF_INLINE void NAME(const rf_ka_nys *t, int64_t r0, int64_t r1, VAL *scratch)                   \
    {                                                                                               \
        const int64_t m = t->m, d = t->d, rt = t->rt;                                               \
        const int64_t n_panels = (m + JB - 1) / JB;                                                 \
        const VAL *lv = (const VAL *)t->lvec;                                                       \
        VAL *blk = scratch;                      /* rt × m */                                       \
        VAL *plane1 = blk + rt * m;              /* rt × d */                                       \
        VAL *plane2 = plane1 + rt * d;           /* rt × d */                                       \
        VAL *xvec = plane2 + rt * d;             /* rt */                                           \
        VAL *tmp = xvec + rt;                    /* m */                                            \
        VAL *out = (VAL *)t->out;                                                                   \
        for (int64_t i0 = r0; i0 < r1; i0 += rt) {                                                  \
            const int64_t nr = r1 - i0 < rt ? r1 - i0 : rt;                                         \
            VAL *K = t->Np ? blk : out + i0 * t->ld_out;                                            \
            const int64_t ldk = t->Np ? m : t->ld_out;                                              \
            const VAL *X = (const VAL *)t->X + i0 * t->sxi;                                         \
            if (t->kind == RF_KA_GIVEN || t->have_dots) {                                           \
                const VAL *xg = (const VAL *)t->xvec;                                               \
                for (int64_t r = 0; r < nr; ++r)                                                    \
                    rf_ka_map_##SUFFIX(t, X + r * t->sxi, K + r * ldk, xg ? xg[i0 + r] : 0, lv, m,  \
                                       tmp);                                                        \
            } else if (RF_KA_FROM_DOTS(t->kind)) {                                                  \
                rf_rows_packed_##SUFFIX(X, t->sxi, t->sxk, d, (const VAL *)t->Lp, m, K, ldk, nr, nr); \
                for (int64_t r = 0; r < nr; ++r) {                                                  \
                    VAL xv = 0;                                                                     \
                    if (t->kind == RF_KA_RBF || t->kind == RF_KA_COSINE) {                          \
                        const VAL *xr = X + r * t->sxi;                                             \
                        for (int64_t k = 0; k < d; ++k) xv += xr[k * t->sxk] * xr[k * t->sxk];      \
                        if (t->kind == RF_KA_COSINE) xv = xv > 0 ? (VAL)1 / rf_sqrt_##SUFFIX(xv) : 0;     \
                    }                                                                               \
                    rf_ka_map_##SUFFIX(t, K + r * ldk, K + r * ldk, xv, lv, m, tmp);                \
                }                                                                                   \
            } else {                                                                                \
                /* coordinatewise: rows as unit-stride planes */                                  \
                const VAL *rows1[RF_XW_RB], *rows2[RF_XW_RB];                                       \
                const VAL *base1 = X, *base2 = X;                                                   \
                int64_t ld1 = t->sxi;                                                               \
                if (t->kind == RF_KA_SKEWED_CHI2) {                                                 \
                    const VAL c = (VAL)t->c;                                                        \
                    for (int64_t r = 0; r < nr; ++r)                                                \
                        for (int64_t k = 0; k < d; ++k) {                                           \
                            const VAL a = X[r * t->sxi + k * t->sxk] + c;                           \
                            plane1[r * d + k] = a;                                                  \
                            plane2[r * d + k] = rf_sqrt_##SUFFIX(a);                                       \
                        }                                                                           \
                    base1 = plane1, base2 = plane2, ld1 = d;                                        \
                } else if (t->sxk != 1) {                                                           \
                    for (int64_t r = 0; r < nr; ++r)                                                \
                        for (int64_t k = 0; k < d; ++k) plane1[r * d + k] = X[r * t->sxi + k * t->sxk]; \
                    base1 = base2 = plane1, ld1 = d;                                                \
                }                                                                                   \
                const VAL g = (VAL)t->gamma;                                                        \
                for (int64_t p = 0; p < n_panels; ++p) {                                            \
                    const int64_t j0 = p * JB, nc = m - j0 < JB ? m - j0 : JB;                      \
                    const VAL *P1 = (const VAL *)t->Lp + p * d * JB;                                \
                    const VAL *P2 = t->Lp2 ? (const VAL *)t->Lp2 + p * d * JB : P1;                 \
                    for (int64_t i = 0; i < nr; i += RF_XW_RB) {                                    \
                        const int64_t nb = nr - i < RF_XW_RB ? nr - i : RF_XW_RB;                   \
                        for (int r = 0; r < RF_XW_RB; ++r) {                                        \
                            const int64_t ri = i + (r < nb ? r : nb - 1);                           \
                            rows1[r] = base1 + ri * ld1;                                            \
                            rows2[r] = base2 + ri * ld1;                                            \
                        }                                                                           \
                        VAL *o = K + i * ldk + j0;                                                  \
                        switch (t->kind) {                                                          \
                        case RF_KA_LAPLACIAN:                                                       \
                            rf_ka_pair_l1_##SUFFIX(rows1, rows2, d, P1, P2, g, o, ldk, nb, nc);    \
                            break;                                                                  \
                        case RF_KA_CHI2:                                                            \
                        case RF_KA_ADDITIVE_CHI2:                                                   \
                            rf_ka_pair_chi2_##SUFFIX(rows1, rows2, d, P1, P2, g, o, ldk, nb, nc);  \
                            break;                                                                  \
                        case RF_KA_CAUCHY:                                                          \
                            rf_ka_pair_cauchy_##SUFFIX(rows1, rows2, d, P1, P2, g, o, ldk, nb, nc); \
                            break;                                                                  \
                        case RF_KA_MATERN:                                                          \
                            rf_ka_pair_sq_##SUFFIX(rows1, rows2, d, P1, P2, g, o, ldk, nb, nc);    \
                            break;                                                                  \
                        default:                                                                    \
                            rf_ka_pair_skew_##SUFFIX(rows1, rows2, d, P1, P2, g, o, ldk, nb, nc);  \
                            break;                                                                  \
                        }                                                                           \
                    }                                                                               \
                }                                                                                   \
                for (int64_t r = 0; r < nr; ++r)                                                    \
                    rf_ka_map_##SUFFIX(t, K + r * ldk, K + r * ldk, 0, lv, m, tmp);                 \
            }                                                                                       \
            if (t->Np)                                                                              \
                PRODUCT(K, ldk, 1, m, (const VAL *)t->Np, t->m_out, out + i0 * t->ld_out, t->ld_out, \
                        nr, t->prod_rt);                                                            \
        }                                                                                           \
    }

RF_KA_NYS_BODY(rf_ka_nys_rows_f64_body, f64, double, RF_XW_JB_F64, rf_rows_packed_f64)
RF_KA_NYS_BODY(rf_ka_nys_rows_f32_body, f32, float, RF_XW_JB_F32, rf_rows_packed_f32)

#define RF_KA_NYS_F64_PARAMS (const rf_ka_nys *t, int64_t r0, int64_t r1, double *scratch)
#define RF_KA_NYS_F32_PARAMS (const rf_ka_nys *t, int64_t r0, int64_t r1, float *scratch)
#define RF_KA_NYS_ARGS (t, r0, r1, scratch)

/* The AVX-512 path multiplies by Nᵀ with 64-byte vectors: blocks of
 * RF_KA_WRB = 8 rows by 3 vectors (24 float64 / 48 float32 columns, 24 of
 * the 32 registers), the same scheme as rf_rows_packed (each element one
 * chain of fused multiply-adds over k in order, full blocks, the last row
 * repeated, panels zero-padded: row-independent; float64 features came out
 * bit-identical to the AVX2 path's, float32 within rounding); measured
 * 12-15% faster than the 6 × 8 (two 32-byte vectors) block on this AVX-512
 * CPU (a standalone loop, 4608 × 960 by 960 × 960, alternating).  Its
 * panels are RF_KA_WJB_* wide (``product_panel_width``). */
#define RF_KA_WRB 8
#define RF_KA_WJB_F64 24
#define RF_KA_WJB_F32 48
#if RF_X86_DISPATCH && RF_XW_VECTORS
#define RF_KA_WIDE 1
typedef double rf_wf64 __attribute__((vector_size(64), aligned(8)));
typedef float rf_wf32 __attribute__((vector_size(64), aligned(4)));
#define RF_KA_WIDE_PRODUCT(SUFFIX, VAL, JB)                                                         \
    RF_INLINE void rf_ka_wide_block_##SUFFIX(const VAL *const *x, int64_t d, const VAL *RF_RESTRICT W, \
                                             VAL *RF_RESTRICT out, int64_t ld_out, int64_t nr,      \
                                             int64_t nc)                                            \
    {                                                                                               \
        enum { L = 64 / sizeof(VAL) };                                                              \
        rf_w##SUFFIX a0[RF_KA_WRB], a1[RF_KA_WRB], a2[RF_KA_WRB];                                   \
        for (int r = 0; r < RF_KA_WRB; ++r) a0[r] = a1[r] = a2[r] = (rf_w##SUFFIX){0};              \
        for (int64_t k = 0; k < d; ++k) {                                                           \
            rf_w##SUFFIX w0, w1, w2;                                                                \
            memcpy(&w0, W + k * JB, sizeof w0);                                                     \
            memcpy(&w1, W + k * JB + L, sizeof w1);                                                 \
            memcpy(&w2, W + k * JB + 2 * L, sizeof w2);                                             \
            for (int r = 0; r < RF_KA_WRB; ++r) {                                                   \
                const VAL xv = x[r][k];                                                             \
                a0[r] += xv * w0;                                                                   \
                a1[r] += xv * w1;                                                                   \
                a2[r] += xv * w2;                                                                   \
            }                                                                                       \
        }                                                                                           \
        VAL tmp[JB];                                                                                \
        for (int64_t r = 0; r < nr; ++r) {                                                          \
            memcpy(tmp, &a0[r], sizeof a0[r]);                                                      \
            memcpy(tmp + L, &a1[r], sizeof a1[r]);                                                  \
            memcpy(tmp + 2 * L, &a2[r], sizeof a2[r]);                                              \
            if (nc == JB) memcpy(out + r * ld_out, tmp, sizeof tmp);                                \
            else for (int64_t j = 0; j < nc; ++j) out[r * ld_out + j] = tmp[j];                     \
        }                                                                                           \
    }                                                                                               \
    /* The rf_rows_packed signature (sxk must be 1; rt: rows per pass over the panels). */        \
    RF_INLINE void rf_ka_wide_##SUFFIX(const VAL *X, int64_t sxi, int64_t sxk, int64_t d,          \
                                       const VAL *Wp, int64_t m, VAL *out, int64_t ld_out,          \
                                       int64_t n, int64_t rt)                                       \
    {                                                                                               \
        const VAL *x[RF_KA_WRB];                                                                    \
        const int64_t n_panels = (m + JB - 1) / JB;                                                 \
        (void)sxk;                                                                                  \
        for (int64_t t0 = 0; t0 < n; t0 += rt) {                                                    \
            const int64_t t1 = n - t0 < rt ? n : t0 + rt;                                           \
            for (int64_t p = 0; p < n_panels; ++p) {                                                \
                const int64_t j0 = p * JB, nc = m - j0 < JB ? m - j0 : JB;                          \
                for (int64_t i = t0; i < t1; i += RF_KA_WRB) {                                      \
                    const int64_t nr = t1 - i < RF_KA_WRB ? t1 - i : RF_KA_WRB;                     \
                    for (int r = 0; r < RF_KA_WRB; ++r) x[r] = X + (i + (r < nr ? r : nr - 1)) * sxi; \
                    rf_ka_wide_block_##SUFFIX(x, d, Wp + p * d * JB, out + i * ld_out + j0, ld_out,  \
                                              nr, nc);                                              \
                }                                                                                   \
            }                                                                                       \
        }                                                                                           \
    }
RF_KA_WIDE_PRODUCT(f64, double, RF_KA_WJB_F64)
RF_KA_WIDE_PRODUCT(f32, float, RF_KA_WJB_F32)
RF_KA_NYS_BODY(rf_ka_nys_rows_f64_wide_body, f64, double, RF_XW_JB_F64, rf_ka_wide_f64)
RF_KA_NYS_BODY(rf_ka_nys_rows_f32_wide_body, f32, float, RF_XW_JB_F32, rf_ka_wide_f32)
static void rf_ka_nys_rows_f64_baseline RF_KA_NYS_F64_PARAMS { rf_ka_nys_rows_f64_body RF_KA_NYS_ARGS; }
static void rf_ka_nys_rows_f32_baseline RF_KA_NYS_F32_PARAMS { rf_ka_nys_rows_f32_body RF_KA_NYS_ARGS; }
RF_TARGET_AVX2 static void rf_ka_nys_rows_f64_avx2 RF_KA_NYS_F64_PARAMS { rf_ka_nys_rows_f64_body RF_KA_NYS_ARGS; }
RF_TARGET_AVX2 static void rf_ka_nys_rows_f32_avx2 RF_KA_NYS_F32_PARAMS { rf_ka_nys_rows_f32_body RF_KA_NYS_ARGS; }
RF_TARGET_AVX512 static void rf_ka_nys_rows_f64_avx512 RF_KA_NYS_F64_PARAMS {
    rf_ka_nys_rows_f64_wide_body RF_KA_NYS_ARGS;
}
RF_TARGET_AVX512 static void rf_ka_nys_rows_f32_avx512 RF_KA_NYS_F32_PARAMS {
    rf_ka_nys_rows_f32_wide_body RF_KA_NYS_ARGS;
}
#else
#define RF_KA_WIDE 0
RF_ISA_CLONES(rf_ka_nys_rows_f64, RF_KA_NYS_F64_PARAMS, RF_KA_NYS_ARGS)
RF_ISA_CLONES(rf_ka_nys_rows_f32, RF_KA_NYS_F32_PARAMS, RF_KA_NYS_ARGS)
#endif
RF_ISA_POINTER(rf_ka_nys_rows_f64, RF_KA_NYS_F64_PARAMS)
RF_ISA_POINTER(rf_ka_nys_rows_f32, RF_KA_NYS_F32_PARAMS)

/* Columns per packed panel of Nᵀ the picked Nystroem path reads. */
static int rf_ka_product_jb_f64 = RF_XW_JB_F64, rf_ka_product_jb_f32 = RF_XW_JB_F32;

/* ------------------------------------------------------------ additive chi2
 * One row's n values x >= 0 (dense: the d features; CSR: the stored values)
 * to 2s - 1 blocks of n outputs, block b at o[b * n]:
 *   block 0:       sqrt(x L)
 *   block 2j - 1:  f_j cos(j L log x)     j = 1 .. s - 1
 *   block 2j:      f_j sin(j L log x)     f_j = sqrt(2 x L / cosh(pi j L))
 * and 0 for x = 0: Vedaldi & Zisserman's map as scikit-learn's
 * AdditiveChi2Sampler computes it, in the same order of operations, always
 * in float64 (float32 rows are widened, the results rounded once).
 * cf[j] = cosh(pi j L); `logs` is scratch for n values.  log is rf_log_f64
 * (vectorised, ~2 ulp); sin/cos the polynomial of randfeat_trig.h unless
 * some j L log x of the row is beyond its range (then libm for the row). */
#define RF_KA_CHI2_ROW(SUFFIX, VAL)                                                                 \
    RF_INLINE void rf_ka_chi2_row_##SUFFIX##_body(const VAL *RF_RESTRICT x, int64_t n, int64_t steps, \
                                                 double L, const double *RF_RESTRICT cf,            \
                                                 double *RF_RESTRICT logs, VAL *RF_RESTRICT o)      \
    {                                                                                               \
        for (int64_t i = 0; i < n; ++i) {                                                           \
            const double xv = (double)x[i];                                                         \
            const double lg = L * rf_log_f64(xv);                                                   \
            logs[i] = xv > 0 ? lg : 0.0;                                                            \
            o[i] = (VAL)sqrt((xv > 0 ? xv : 0.0) * L);                                              \
        }                                                                                           \
        /* the polynomial sin/cos unless some j L log x is beyond its range (NaN-safe) */          \
        const double lim = RF_TRIG_LIMIT_F64 / (double)(steps > 1 ? steps - 1 : 1);                 \
        int big = 0;                                                                                \
        for (int64_t i = 0; i < n; ++i) big |= !(fabs(logs[i]) <= lim);                             \
        for (int64_t j = 1; j < steps; ++j) {                                                       \
            VAL *RF_RESTRICT oc = o + (2 * j - 1) * n;                                              \
            VAL *RF_RESTRICT os = o + 2 * j * n;                                                    \
            const double cj = cf[j], dj = (double)j;                                                \
            if (big) {                                                                              \
                for (int64_t i = 0; i < n; ++i) {                                                   \
                    const double xv = (double)x[i];                                                 \
                    const double f = sqrt((2 * (xv > 0 ? xv : 0.0)) * L / cj);                      \
                    oc[i] = (VAL)(f * cos(dj * logs[i]));                                           \
                    os[i] = (VAL)(f * sin(dj * logs[i]));                                           \
                }                                                                                   \
            } else {                                                                                \
                for (int64_t i = 0; i < n; ++i) {                                                   \
                    const double xv = (double)x[i];                                                 \
                    const double f = sqrt((2 * (xv > 0 ? xv : 0.0)) * L / cj);                      \
                    double sv, cv;                                                                  \
                    rf_sincos1_f64(dj * logs[i], &sv, &cv);                                         \
                    oc[i] = (VAL)(f * cv);                                                          \
                    os[i] = (VAL)(f * sv);                                                          \
                }                                                                                   \
            }                                                                                       \
        }                                                                                           \
    }

RF_KA_CHI2_ROW(f64, double)
RF_KA_CHI2_ROW(f32, float)

/* A range of rows: dense X (n × d, row stride ldx, unit column stride) into
 * out (n × (2s-1)d, row stride ld_out); or CSR values data[indptr[i]..] into
 * out_data at (2s-1)·indptr[i]. */
#define RF_KA_CHI2_ROWS(SUFFIX, VAL)                                                                \
    RF_INLINE void rf_ka_chi2_dense_##SUFFIX##_body(const VAL *X, int64_t ldx, int64_t d, int64_t r0, \
                                                   int64_t r1, int64_t steps, double L,             \
                                                   const double *cf, double *logs, VAL *out,        \
                                                   int64_t ld_out)                                  \
    {                                                                                               \
        for (int64_t i = r0; i < r1; ++i)                                                           \
            rf_ka_chi2_row_##SUFFIX##_body(X + i * ldx, d, steps, L, cf, logs, out + i * ld_out);   \
    }                                                                                               \
    RF_INLINE void rf_ka_chi2_csr_##SUFFIX##_body(const VAL *data, const int64_t *indptr, int64_t r0, \
                                                 int64_t r1, int64_t steps, double L,               \
                                                 const double *cf, double *logs, VAL *out_data)     \
    {                                                                                               \
        const int64_t nb = 2 * steps - 1;                                                           \
        for (int64_t i = r0; i < r1; ++i) {                                                         \
            const int64_t a = indptr[i], n = indptr[i + 1] - a;                                     \
            rf_ka_chi2_row_##SUFFIX##_body(data + a, n, steps, L, cf, logs, out_data + nb * a);     \
        }                                                                                           \
    }

RF_KA_CHI2_ROWS(f64, double)
RF_KA_CHI2_ROWS(f32, float)

#define RF_KA_CHI2_DENSE_F64_PARAMS                                                                 \
    (const double *X, int64_t ldx, int64_t d, int64_t r0, int64_t r1, int64_t steps, double L,      \
     const double *cf, double *logs, double *out, int64_t ld_out)
#define RF_KA_CHI2_DENSE_F32_PARAMS                                                                 \
    (const float *X, int64_t ldx, int64_t d, int64_t r0, int64_t r1, int64_t steps, double L,       \
     const double *cf, double *logs, float *out, int64_t ld_out)
#define RF_KA_CHI2_DENSE_ARGS (X, ldx, d, r0, r1, steps, L, cf, logs, out, ld_out)
#define RF_KA_CHI2_CSR_F64_PARAMS                                                                   \
    (const double *data, const int64_t *indptr, int64_t r0, int64_t r1, int64_t steps, double L,    \
     const double *cf, double *logs, double *out_data)
#define RF_KA_CHI2_CSR_F32_PARAMS                                                                   \
    (const float *data, const int64_t *indptr, int64_t r0, int64_t r1, int64_t steps, double L,     \
     const double *cf, double *logs, float *out_data)
#define RF_KA_CHI2_CSR_ARGS (data, indptr, r0, r1, steps, L, cf, logs, out_data)
RF_ISA_CLONES(rf_ka_chi2_dense_f64, RF_KA_CHI2_DENSE_F64_PARAMS, RF_KA_CHI2_DENSE_ARGS)
RF_ISA_CLONES(rf_ka_chi2_dense_f32, RF_KA_CHI2_DENSE_F32_PARAMS, RF_KA_CHI2_DENSE_ARGS)
RF_ISA_CLONES(rf_ka_chi2_csr_f64, RF_KA_CHI2_CSR_F64_PARAMS, RF_KA_CHI2_CSR_ARGS)
RF_ISA_CLONES(rf_ka_chi2_csr_f32, RF_KA_CHI2_CSR_F32_PARAMS, RF_KA_CHI2_CSR_ARGS)
RF_ISA_POINTER(rf_ka_chi2_dense_f64, RF_KA_CHI2_DENSE_F64_PARAMS)
RF_ISA_POINTER(rf_ka_chi2_dense_f32, RF_KA_CHI2_DENSE_F32_PARAMS)
RF_ISA_POINTER(rf_ka_chi2_csr_f64, RF_KA_CHI2_CSR_F64_PARAMS)
RF_ISA_POINTER(rf_ka_chi2_csr_f32, RF_KA_CHI2_CSR_F32_PARAMS)

/* ------------------------------------------------------------ tensor sketch
 * Degree-p TensorSketch (Pham & Pagh 2013) of one row whose q nonzeros are
 * already hashed: for level l < p, h[l*q + t] in [0, D) and a[l*q + t] =
 * sign_l(col_t) * value_t.  The sketch is the circular convolution of the p
 * count sketches C_l[h] = sum_{t: h_l(t) = h} a_l(t), i.e.
 *   z[(h_0(t_0) + ... + h_{p-1}(t_{p-1})) mod D] += a_0(t_0) ... a_{p-1}(t_{p-1})
 * over all q^p tuples, summed here directly in a fixed order (z zeroed by the
 * caller, float64).  Cheaper than the FFT product when q^p is small against
 * (p + 1) D log D (the caller decides); p <= RF_TS_MAX_DIRECT_DEGREE. */
#define RF_TS_MAX_DIRECT_DEGREE 64
static void rf_ts_direct(const int64_t *h, const double *a, int64_t q, int p, int64_t D, double *z)
{
    if (q == 0) return;
    if (p == 1) {
        for (int64_t t = 0; t < q; ++t) z[h[t]] += a[t];
        return;
    }
    const int64_t *hl = h + (int64_t)(p - 1) * q;
    const double *al = a + (int64_t)(p - 1) * q;
    /* odometer over the first p - 1 levels; the last level is the inner loop */
    int64_t pos[RF_TS_MAX_DIRECT_DEGREE];
    int depth = p - 1;
    for (int l = 0; l < depth; ++l) pos[l] = 0;
    for (;;) {
        int64_t s = 0;
        double v = 1.0;
        for (int l = 0; l < depth; ++l) {
            s += h[l * q + pos[l]];
            s -= s >= D ? D : 0;
            v *= a[l * q + pos[l]];
        }
        for (int64_t t = 0; t < q; ++t) {
            int64_t i = s + hl[t];
            i -= i >= D ? D : 0;
            z[i] += v * al[t];
        }
        int l = depth - 1;
        while (l >= 0 && ++pos[l] == q) pos[l--] = 0;
        if (l < 0) break;
    }
}

/* The p count sketches of one row, C_l at c + l * D (zeroed by the caller). */
#define RF_TS_COUNT(SUFFIX, VAL)                                                                    \
    static void rf_ts_count_##SUFFIX(const int64_t *h, const double *a, int64_t q, int p, int64_t D, \
                                     VAL *c)                                                        \
    {                                                                                               \
        for (int l = 0; l < p; ++l)                                                                 \
            for (int64_t t = 0; t < q; ++t) c[l * D + h[l * q + t]] += (VAL)a[l * q + t];           \
    }
RF_TS_COUNT(f64, double)
RF_TS_COUNT(f32, float)

/* Pick the code paths once (at module import); returns the RF_ISA_* used. */
static int rf_kernel_approx_init(void) {
    int isa = rf_detect_isa();
    rf_rowgemm_init(); /* this module's own copy of the row-independent product */
    RF_ISA_PICK(rf_ka_nys_rows_f64, isa);
    RF_ISA_PICK(rf_ka_nys_rows_f32, isa);
    if (RF_KA_WIDE && isa == RF_ISA_AVX512) {
        rf_ka_product_jb_f64 = RF_KA_WJB_F64;
        rf_ka_product_jb_f32 = RF_KA_WJB_F32;
    }
    RF_ISA_PICK(rf_ka_chi2_dense_f64, isa);
    RF_ISA_PICK(rf_ka_chi2_dense_f32, isa);
    RF_ISA_PICK(rf_ka_chi2_csr_f64, isa);
    RF_ISA_PICK(rf_ka_chi2_csr_f32, isa);
    return isa;
}

#endif
