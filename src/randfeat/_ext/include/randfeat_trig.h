/* Vectorisable sin/cos for the fused Fourier-feature kernel.
 *
 * NumPy's float64 cos is scalar (~9 ns per element here); a branch-free
 * polynomial that the compiler turns into SIMD code costs well under 1 ns.
 *
 * Method, per element, with no branches so loops vectorise:
 *   1. k = nearest integer to x * 2/pi, by the "magic number" trick
 *      (adding 1.5 * 2^52 rounds to an integer in the default rounding mode);
 *      the low bits of that sum are k mod 4, the quadrant.
 *   2. Cody-Waite reduction r = ((x - k P1) - k P2) - k P3, where
 *      P1 + P2 + P3 = pi/2 to ~107 bits (float64) / ~48 bits (float32), and
 *      P1, P2 have few enough significant bits that k*P1, k*P2 are exact for
 *      |k| < 2^26 (float64) / 2^12 (float32), with or without FMA.
 *   3. Taylor polynomials for sin r and cos r on |r| <= pi/4 (truncation
 *      error far below an ulp there), evaluated by Horner's rule.
 *   4. The quadrant swaps sin/cos and flips signs, by bit masks.
 * Beyond RF_TRIG_LIMIT_* the reduction loses accuracy, so a segment holding
 * any such argument (or inf/NaN) is computed with libm instead; the choice
 * is made per segment, a fixed piece of one output row, so results do not
 * depend on the thread count.
 *
 * Each entry point is compiled three times (baseline x86-64, AVX2+FMA,
 * AVX-512) from one always-inline body, and rf_trig_init() picks one set of
 * function pointers at import (see randfeat_common.h).
 */
#ifndef RANDFEAT_TRIG_H
#define RANDFEAT_TRIG_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "randfeat_common.h"

/* Largest |argument| the polynomial path accepts (accuracy measured in
 * tests/test_fourier.py: a few ulp up to here). */
#define RF_TRIG_LIMIT_F64 1.0e8
#define RF_TRIG_LIMIT_F32 6000.0f

/* ---------------------------------------------------------------- float64 */
#define RF_TWO_OVER_PI_F64 0x1.45f306dc9c883p-1
#define RF_PIO2_1_F64 0x1.921fb54000000p+0 /* 27 significant bits */
#define RF_PIO2_2_F64 0x1.10b4610000000p-30 /* 27 significant bits */
#define RF_PIO2_3_F64 0x1.a62633145c06ep-58
#define RF_ROUND_MAGIC_F64 0x1.8p52

/* sin(x), cos(x) for one element; branch-free. */
RF_INLINE void rf_sincos1_f64(double x, double *s_out, double *c_out) {
    double t = x * RF_TWO_OVER_PI_F64 + RF_ROUND_MAGIC_F64;
    double k = t - RF_ROUND_MAGIC_F64;
    uint64_t q;
    memcpy(&q, &t, sizeof q); /* low bits of t's mantissa = k mod 2^51 */
    double r = x - k * RF_PIO2_1_F64;
    r = r - k * RF_PIO2_2_F64;
    r = r - k * RF_PIO2_3_F64;
    double z = r * r;
    /* Taylor coefficients (-1)^j/(2j+1)! and (-1)^j/(2j)!, j = 1..8. */
    double ps = 0x1.952c77030ad4ap-49; /* 1/17! */
    ps = ps * z - 0x1.ae7f3e733b81fp-41;
    ps = ps * z + 0x1.6124613a86d09p-33;
    ps = ps * z - 0x1.ae64567f544e4p-26;
    ps = ps * z + 0x1.71de3a556c734p-19;
    ps = ps * z - 0x1.a01a01a01a01ap-13;
    ps = ps * z + 0x1.1111111111111p-7;
    ps = ps * z - 0x1.5555555555555p-3;
    double sr = r + r * z * ps;
    double pc = 0x1.ae7f3e733b81fp-45; /* 1/16! */
    pc = pc * z - 0x1.93974a8c07c9dp-37;
    pc = pc * z + 0x1.1eed8eff8d898p-29;
    pc = pc * z - 0x1.27e4fb7789f5cp-22;
    pc = pc * z + 0x1.a01a01a01a01ap-16;
    pc = pc * z - 0x1.6c16c16c16c17p-10;
    pc = pc * z + 0x1.5555555555555p-5;
    pc = pc * z - 0.5;
    double cr = 1.0 + z * pc;
    /* Quadrant q: sin x = (sr, cr, -sr, -cr)[q], cos x = (cr, -sr, -cr, sr)[q]. */
    uint64_t swap = (uint64_t)0 - (q & 1); /* all ones when q is odd */
    uint64_t sb, cb;
    memcpy(&sb, &sr, sizeof sb);
    memcpy(&cb, &cr, sizeof cb);
    uint64_t sin_bits = (sb & ~swap) | (cb & swap);
    uint64_t cos_bits = (cb & ~swap) | (sb & swap);
    sin_bits ^= (q & 2) << 62;
    cos_bits ^= ((q + 1) & 2) << 62;
    memcpy(s_out, &sin_bits, sizeof sin_bits);
    memcpy(c_out, &cos_bits, sizeof cos_bits);
}

/* x[i] <- scale*cos(x[i]), s[i] <- scale*sin(x[i]) for i < n. */
RF_INLINE void rf_sincos_f64_body(double *RF_RESTRICT x, double *RF_RESTRICT s, ptrdiff_t n,
                                         double scale) {
    int bad = 0;
    for (ptrdiff_t i = 0; i < n; i++) bad |= !(fabs(x[i]) <= RF_TRIG_LIMIT_F64);
    if (bad) {
        for (ptrdiff_t i = 0; i < n; i++) {
            double a = x[i];
            s[i] = scale * sin(a);
            x[i] = scale * cos(a);
        }
        return;
    }
    for (ptrdiff_t i = 0; i < n; i++) {
        double sv, cv;
        rf_sincos1_f64(x[i], &sv, &cv);
        s[i] = scale * sv;
        x[i] = scale * cv;
    }
}

/* x[i] <- scale*cos(x[i] + b[i]) for i < n. */
RF_INLINE void rf_cos_f64_body(double *RF_RESTRICT x, const double *RF_RESTRICT b, ptrdiff_t n,
                                      double scale) {
    int bad = 0;
    for (ptrdiff_t i = 0; i < n; i++) bad |= !(fabs(x[i] + b[i]) <= RF_TRIG_LIMIT_F64);
    if (bad) {
        for (ptrdiff_t i = 0; i < n; i++) x[i] = scale * cos(x[i] + b[i]);
        return;
    }
    for (ptrdiff_t i = 0; i < n; i++) {
        double sv, cv;
        rf_sincos1_f64(x[i] + b[i], &sv, &cv);
        x[i] = scale * cv;
    }
}

/* ---------------------------------------------------------------- float32 */
#define RF_TWO_OVER_PI_F32 0x1.45f306p-1f
#define RF_PIO2_1_F32 0x1.922p+0f /* 12 significant bits */
#define RF_PIO2_2_F32 -0x1.2aep-18f /* 12 significant bits */
#define RF_PIO2_3_F32 -0x1.de973ep-31f
#define RF_ROUND_MAGIC_F32 0x1.8p23f

RF_INLINE void rf_sincos1_f32(float x, float *s_out, float *c_out) {
    float t = x * RF_TWO_OVER_PI_F32 + RF_ROUND_MAGIC_F32;
    float k = t - RF_ROUND_MAGIC_F32;
    uint32_t q;
    memcpy(&q, &t, sizeof q);
    float r = x - k * RF_PIO2_1_F32;
    r = r - k * RF_PIO2_2_F32;
    r = r - k * RF_PIO2_3_F32;
    float z = r * r;
    float ps = 0x1.71de3ap-19f; /* 1/9! */
    ps = ps * z - 0x1.a01a02p-13f;
    ps = ps * z + 0x1.111112p-7f;
    ps = ps * z - 0x1.555556p-3f;
    float sr = r + r * z * ps;
    float pc = 0x1.27e4fcp-22f; /* 1/10! */
    pc = pc * z + 0x1.a01a02p-16f;
    pc = pc * z - 0x1.6c16c2p-10f;
    pc = pc * z + 0x1.555556p-5f;
    pc = pc * z - 0.5f;
    float cr = 1.0f + z * pc;
    uint32_t swap = (uint32_t)0 - (q & 1);
    uint32_t sb, cb;
    memcpy(&sb, &sr, sizeof sb);
    memcpy(&cb, &cr, sizeof cb);
    uint32_t sin_bits = (sb & ~swap) | (cb & swap);
    uint32_t cos_bits = (cb & ~swap) | (sb & swap);
    sin_bits ^= (q & 2) << 30;
    cos_bits ^= ((q + 1) & 2) << 30;
    memcpy(s_out, &sin_bits, sizeof sin_bits);
    memcpy(c_out, &cos_bits, sizeof cos_bits);
}

RF_INLINE void rf_sincos_f32_body(float *RF_RESTRICT x, float *RF_RESTRICT s, ptrdiff_t n,
                                         float scale) {
    int bad = 0;
    for (ptrdiff_t i = 0; i < n; i++) bad |= !(fabsf(x[i]) <= RF_TRIG_LIMIT_F32);
    if (bad) {
        for (ptrdiff_t i = 0; i < n; i++) {
            float a = x[i];
            s[i] = scale * sinf(a);
            x[i] = scale * cosf(a);
        }
        return;
    }
    for (ptrdiff_t i = 0; i < n; i++) {
        float sv, cv;
        rf_sincos1_f32(x[i], &sv, &cv);
        s[i] = scale * sv;
        x[i] = scale * cv;
    }
}

RF_INLINE void rf_cos_f32_body(float *RF_RESTRICT x, const float *RF_RESTRICT b, ptrdiff_t n,
                                      float scale) {
    int bad = 0;
    for (ptrdiff_t i = 0; i < n; i++) bad |= !(fabsf(x[i] + b[i]) <= RF_TRIG_LIMIT_F32);
    if (bad) {
        for (ptrdiff_t i = 0; i < n; i++) x[i] = scale * cosf(x[i] + b[i]);
        return;
    }
    for (ptrdiff_t i = 0; i < n; i++) {
        float sv, cv;
        rf_sincos1_f32(x[i] + b[i], &sv, &cv);
        x[i] = scale * cv;
    }
}

/* ------------------------------------------------- instantiation, dispatch */
#define RF_SINCOS_F64_PARAMS (double *x, double *s, ptrdiff_t n, double scale)
#define RF_COS_F64_PARAMS (double *x, const double *b, ptrdiff_t n, double scale)
#define RF_SINCOS_F32_PARAMS (float *x, float *s, ptrdiff_t n, float scale)
#define RF_COS_F32_PARAMS (float *x, const float *b, ptrdiff_t n, float scale)
RF_ISA_CLONES(rf_sincos_f64, RF_SINCOS_F64_PARAMS, (x, s, n, scale))
RF_ISA_CLONES(rf_cos_f64, RF_COS_F64_PARAMS, (x, b, n, scale))
RF_ISA_CLONES(rf_sincos_f32, RF_SINCOS_F32_PARAMS, (x, s, n, scale))
RF_ISA_CLONES(rf_cos_f32, RF_COS_F32_PARAMS, (x, b, n, scale))
RF_ISA_POINTER(rf_sincos_f64, RF_SINCOS_F64_PARAMS)
RF_ISA_POINTER(rf_cos_f64, RF_COS_F64_PARAMS)
RF_ISA_POINTER(rf_sincos_f32, RF_SINCOS_F32_PARAMS)
RF_ISA_POINTER(rf_cos_f32, RF_COS_F32_PARAMS)

/* Pick the code path once (at module import); returns the RF_ISA_* used. */
static int rf_trig_init(void) {
    int isa = rf_detect_isa();
    RF_ISA_PICK(rf_sincos_f64, isa);
    RF_ISA_PICK(rf_cos_f64, isa);
    RF_ISA_PICK(rf_sincos_f32, isa);
    RF_ISA_PICK(rf_cos_f32, isa);
    return isa;
}

#endif
