/* Structured random features (SORF, Fastfood) on an in-register fast Walsh-Hadamard transform.
 *
 * One output row at a time, entirely in per-thread scratch that stays in
 * L1/L2, straight into the output:
 *
 *   SORF (Yu et al. 2016):        y = H D1 H D2 H D3 x   per block of n = d' frequencies
 *   Fastfood (Le et al. 2013):    y = H G P H B x        (P a permutation, G a diagonal)
 *   then  a_j = mult_j * y_j  and the sin/cos epilogue of randfeat_trig.h.
 *
 * x is the input row zero-padded to n = 2^log_n >= d.  The blocks of a row
 * are laid end to end in a buffer of `len` values (len a multiple of
 * max(n, RF_FWHT_LANES)), computed in chunks of whole blocks that stay in
 * L1 (RF_STRUCT_ROW); block b starts as diag0[b*n + k] * x[k].  The
 * buffers and the diagonals are RF_FWHT_ALIGN-aligned and read as whole
 * vectors (GCC's generic tuning splits unaligned 32-byte loads in two,
 * which made the AVX2 path several times slower).  The
 * Walsh-Hadamard transform of size n of every block at once is the levels
 * h = 1, 2, ..., n/2 of a butterfly network over the whole buffer (a level
 * never mixes two blocks), so small blocks vectorise as well as large ones.
 *
 * Exactness.  Every value goes through the levels in the fixed order
 * h = 1, 2, 4, ..., n/2, each a butterfly (a, b) -> (a + b, a - b), and
 * the diagonals are exact sign flips (SORF, B) or one multiplication
 * (Fastfood's G, the final mult).  No operation can be contracted into an
 * inexact fused multiply-add (the in-vector butterfly t + v*s multiplies by
 * s = +-1, exact).  So the arguments a_j are bit-identical on every vector
 * path, whatever the vector width, and equal to a NumPy evaluation of the
 * same levels in the same order (tests/test_structured.py checks that);
 * only the trig polynomial differs between paths, as in _fourier_fast.  A
 * row's features depend on that row alone and never on the thread count.
 *
 * Organisation of the transform (the scheme of FFHT, Andoni et al. 2015,
 * FALCONN-LIB/FFHT, rewritten here with compiler vector extensions): the
 * levels with h below the vector width L are done inside each register by
 * a lane shuffle (lane i <- lane i^h) and one multiply-add by a +-1 vector;
 * the first pass also does the next (up to) three levels across 8 registers
 * of consecutive vectors; the remaining levels go in radix-8 passes (8
 * vectors at a stride, three levels in registers, stored back).  A block of
 * up to 4096 values is 1-2 passes over L1.
 *
 * Each entry point is compiled three times (baseline x86-64 with 16-byte
 * vectors, AVX2 with 32, AVX-512 with 64) and picked at import
 * (randfeat_common.h); without GCC/Clang vector extensions a scalar body
 * with the same level order is used.
 */
#ifndef RANDFEAT_FWHT_H
#define RANDFEAT_FWHT_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "randfeat_common.h"
#include "randfeat_trig.h"

/* Buffer lengths are multiples of this many values (the widest vector:
 * 16 float32 lanes) and of the block size. */
#define RF_FWHT_LANES 16
/* Scratch pointers are aligned to this (one cache line). */
#define RF_FWHT_ALIGN 64

enum { RF_STRUCT_SORF = 0, RF_STRUCT_FASTFOOD = 1 };
enum { RF_EPI_ARGS = 0, RF_EPI_COSSIN = 1, RF_EPI_COS = 2 };

/* What one call needs, all validated by the Python layer.  diag: SORF
 * D3, D2, D1 (in the order applied), Fastfood B, G (diag[2] unused);
 * each `len` values (zero in the padding past the last block).  perm:
 * Fastfood's gather R'[i] = R[perm[i]] (len indices, each within its own
 * block).  mult: n_freq multipliers (radius * gamma scale * normalisation).
 * Epilogue: ARGS writes a_j into out[0:n_freq]; COS writes
 * scale*cos(a_j + b_j); COSSIN writes scale*[cos a, sin a] in columns
 * [0, n_freq) and [n_freq, 2 n_freq), or, when `odd`, the layout of an odd
 * width 2 n_freq - 1: cos a_1..a_{n-1}, scale*sqrt(2)*cos(a_n + phase),
 * sin a_1..a_{n-1}. */
#define RF_STRUCT_PARAMS(SUFFIX, VAL)                                                        \
    typedef struct {                                                                         \
        int64_t n, log_n, len, d, n_freq;                                                    \
        int kind, epilogue, odd;                                                             \
        const VAL *diag0, *diag1, *diag2;                                                    \
        const int32_t *perm;                                                                 \
        const VAL *mult, *b;                                                                 \
        VAL phase, scale;                                                                    \
    } rf_struct_##SUFFIX;
RF_STRUCT_PARAMS(f32, float)
RF_STRUCT_PARAMS(f64, double)

/* Bytes of R computed at a time (whole blocks, at least one). */
#define RF_STRUCT_CHUNK_BYTES 8192

/* Values of R computed at a time: whole blocks of max(n, lanes) values,
 * RF_STRUCT_CHUNK_BYTES or one block if larger, at most len. */
static inline int64_t rf_struct_chunk(int64_t n, int64_t len, int64_t itemsize) {
    int64_t per = n > RF_FWHT_LANES ? n : RF_FWHT_LANES;
    int64_t chunk = RF_STRUCT_CHUNK_BYTES / itemsize;
    if (chunk < per) chunk = per; /* both powers of two: per divides chunk */
    return chunk < len ? chunk : len;
}

/* Values of per-thread scratch one row needs (the densified row, R and
 * Fastfood's second buffer), not counting alignment slack. */
static inline int64_t rf_struct_scratch_values(int64_t n, int64_t len, int64_t itemsize) {
    int64_t per = n > RF_FWHT_LANES ? n : RF_FWHT_LANES;
    return per + 2 * rf_struct_chunk(n, len, itemsize);
}

/* Lane shuffles: lane i <- lane i ^ h (h < L). */
#define RF_XI2(h) ((0 ^ (h)) & 1), ((1 ^ (h)) & 1)
#define RF_XI4(h) ((0 ^ (h)) & 3), ((1 ^ (h)) & 3), ((2 ^ (h)) & 3), ((3 ^ (h)) & 3)
#define RF_XI8(h)                                                                             \
    ((0 ^ (h)) & 7), ((1 ^ (h)) & 7), ((2 ^ (h)) & 7), ((3 ^ (h)) & 7), ((4 ^ (h)) & 7),      \
        ((5 ^ (h)) & 7), ((6 ^ (h)) & 7), ((7 ^ (h)) & 7)
#define RF_XI16(h)                                                                            \
    ((0 ^ (h)) & 15), ((1 ^ (h)) & 15), ((2 ^ (h)) & 15), ((3 ^ (h)) & 15), ((4 ^ (h)) & 15), \
        ((5 ^ (h)) & 15), ((6 ^ (h)) & 15), ((7 ^ (h)) & 15), ((8 ^ (h)) & 15),              \
        ((9 ^ (h)) & 15), ((10 ^ (h)) & 15), ((11 ^ (h)) & 15), ((12 ^ (h)) & 15),           \
        ((13 ^ (h)) & 15), ((14 ^ (h)) & 15), ((15 ^ (h)) & 15)

#if defined(__clang__)
#define RF_FWHT_VECTORS 1
#define RF_SHUFFLE(v, VI, IDX) __builtin_shufflevector(v, v, IDX)
#elif defined(__GNUC__)
#define RF_FWHT_VECTORS 1
#define RF_SHUFFLE(v, VI, IDX) __builtin_shuffle(v, (VI){IDX})
#else
#define RF_FWHT_VECTORS 0
#endif

/* ------------------------------------------------------------ row epilogue
 * The arguments a_j are in out[0:n_freq]; the trig of randfeat_trig.h in
 * place, through its dispatched pointers (set by rf_trig_init at import),
 * over the whole row (a segment that falls back to libm is one row). */
#define RF_STRUCT_EPILOGUE(SUFFIX, ISA, VAL, TARGET)                                              \
    TARGET RF_INLINE void rf_struct_epi_##SUFFIX##_##ISA(const rf_struct_##SUFFIX *p, VAL *out)   \
    {                                                                                             \
        const int64_t nf = p->n_freq;                                                             \
        if (p->epilogue == RF_EPI_COSSIN && p->odd) {                                             \
            /* cos a_1..a_m | sqrt(2) cos(a_nf + phase) | sin a_1..a_m, m = nf - 1 */              \
            const int64_t m = nf - 1;                                                             \
            rf_sincos_##SUFFIX(out, out + nf, m, p->scale);                                       \
            rf_cos_##SUFFIX(out + m, &p->phase, 1, (VAL)(p->scale * (VAL)1.4142135623730951));     \
        } else if (p->epilogue == RF_EPI_COSSIN) {                                                \
            rf_sincos_##SUFFIX(out, out + nf, nf, p->scale);                                      \
        } else if (p->epilogue == RF_EPI_COS) {                                                   \
            rf_cos_##SUFFIX(out, p->b, nf, p->scale);                                             \
        }                                                                                         \
    }

/* --------------------------------------------------- the vectorised bodies
 * One instantiation per (dtype, vector path): V is the vector type of L
 * lanes (L = 2^LOG_L), VI the integer vector of the same shape, XI the
 * lane-shuffle list for L lanes. */
#if RF_FWHT_VECTORS
#define RF_FWHT_VECTOR_BODIES(SUFFIX, ISA, VAL, IVAL, VBYTES, LOG_L, XI, TARGET)                   \
    typedef VAL rf_v_##SUFFIX##_##ISA __attribute__((vector_size(VBYTES), may_alias));           \
    typedef IVAL rf_vi_##SUFFIX##_##ISA __attribute__((vector_size(VBYTES)));                    \
    enum { RF_L_##SUFFIX##_##ISA = 1 << (LOG_L) };                                                \
                                                                                                   \
    /* Level h inside a vector: lane i gets x_i + x_{i^h} (bit h of i clear) or                  \
     * x_{i^h} - x_i (set), as t + v * s with s = -1 where the bit is set: exact. */             \
    TARGET RF_INLINE rf_v_##SUFFIX##_##ISA rf_lane_level_##SUFFIX##_##ISA(rf_v_##SUFFIX##_##ISA v, \
                                                                          int h)                  \
    {                                                                                              \
        enum { L = RF_L_##SUFFIX##_##ISA };                                                        \
        VAL s[L];                                                                                  \
        for (int i = 0; i < L; ++i) s[i] = (i & h) ? (VAL)-1 : (VAL)1;                             \
        rf_v_##SUFFIX##_##ISA sv, t;                                                               \
        memcpy(&sv, s, sizeof sv);                                                                 \
        switch (h) {                                                                               \
            case 1: t = RF_SHUFFLE(v, rf_vi_##SUFFIX##_##ISA, XI(1)); break;                        \
            case 2: t = RF_SHUFFLE(v, rf_vi_##SUFFIX##_##ISA, XI(2)); break;                        \
            case 4: t = RF_SHUFFLE(v, rf_vi_##SUFFIX##_##ISA, XI(4)); break;                        \
            default: t = RF_SHUFFLE(v, rf_vi_##SUFFIX##_##ISA, XI(8)); break;                       \
        }                                                                                          \
        return t + v * sv;                                                                         \
    }                                                                                              \
                                                                                                   \
    /* The first nl levels (h = 1 .. 2^(nl-1), all below L) inside v. */                         \
    TARGET RF_INLINE rf_v_##SUFFIX##_##ISA rf_lanes_##SUFFIX##_##ISA(rf_v_##SUFFIX##_##ISA v, int nl) \
    {                                                                                              \
        if (nl > 0) v = rf_lane_level_##SUFFIX##_##ISA(v, 1);                                      \
        if (nl > 1) v = rf_lane_level_##SUFFIX##_##ISA(v, 2);                                      \
        if (nl > 2) v = rf_lane_level_##SUFFIX##_##ISA(v, 4);                                      \
        if (nl > 3) v = rf_lane_level_##SUFFIX##_##ISA(v, 8);                                      \
        return v;                                                                                  \
    }                                                                                              \
                                                                                                   \
    /* Pass 1 over the buffer: G consecutive vectors at a time (times diag, if any),              \
     * nl levels inside each, then log2(G) levels across them. */                                 \
    TARGET RF_INLINE void rf_pass1_##SUFFIX##_##ISA(VAL *RF_RESTRICT buf, int64_t len,             \
                                                     const VAL *RF_RESTRICT diag, int G, int nl)   \
    {                                                                                              \
        enum { L = RF_L_##SUFFIX##_##ISA };                                                        \
        for (int64_t i = 0; i < len; i += (int64_t)G * L) {                                        \
            rf_v_##SUFFIX##_##ISA v[8];                                                            \
            for (int k = 0; k < G; ++k) {                                                          \
                v[k] = *(const rf_v_##SUFFIX##_##ISA *)(buf + i + k * L);                          \
                if (diag) v[k] *= *(const rf_v_##SUFFIX##_##ISA *)(diag + i + k * L);              \
                v[k] = rf_lanes_##SUFFIX##_##ISA(v[k], nl);                                        \
            }                                                                                      \
            for (int st = 1; st < G; st *= 2)                                                      \
                for (int k = 0; k < G; ++k)                                                        \
                    if (!(k & st)) {                                                               \
                        rf_v_##SUFFIX##_##ISA a = v[k], c = v[k + st];                             \
                        v[k] = a + c;                                                              \
                        v[k + st] = a - c;                                                         \
                    }                                                                              \
            for (int k = 0; k < G; ++k) *(rf_v_##SUFFIX##_##ISA *)(buf + i + k * L) = v[k];        \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    /* r levels (strides s, 2s, 4s vectors) in one pass: R = 2^r vectors at stride s. */         \
    TARGET RF_INLINE void rf_radix_##SUFFIX##_##ISA(VAL *RF_RESTRICT buf, int64_t len, int64_t s,  \
                                                     int r)                                        \
    {                                                                                              \
        enum { L = RF_L_##SUFFIX##_##ISA };                                                        \
        const int R = 1 << r;                                                                      \
        const int64_t nv = len / L;                                                                \
        for (int64_t bb = 0; bb < nv; bb += R * s)                                                 \
            for (int64_t j = 0; j < s; ++j) {                                                      \
                rf_v_##SUFFIX##_##ISA v[8];                                                        \
                VAL *base = buf + (bb + j) * L;                                                    \
                for (int k = 0; k < R; ++k) v[k] = *(const rf_v_##SUFFIX##_##ISA *)(base + k * s * L); \
                for (int st = 1; st < R; st *= 2)                                                  \
                    for (int k = 0; k < R; ++k)                                                    \
                        if (!(k & st)) {                                                           \
                            rf_v_##SUFFIX##_##ISA a = v[k], c = v[k + st];                         \
                            v[k] = a + c;                                                          \
                            v[k + st] = a - c;                                                     \
                        }                                                                          \
                for (int k = 0; k < R; ++k) *(rf_v_##SUFFIX##_##ISA *)(base + k * s * L) = v[k];   \
            }                                                                                      \
    }                                                                                              \
                                                                                                   \
    /* Every block of n = 2^log_n values of buf (len values) <- H_n (diag .* block). */          \
    TARGET static void rf_fwht_##SUFFIX##_##ISA(VAL *RF_RESTRICT buf, int64_t len, int log_n,      \
                                                const VAL *RF_RESTRICT diag)                       \
    {                                                                                              \
        if (log_n < (LOG_L)) { /* blocks smaller than a vector: lane levels only */               \
            rf_pass1_##SUFFIX##_##ISA(buf, len, diag, 1, log_n);                                   \
            return;                                                                                \
        }                                                                                          \
        const int across = log_n - (LOG_L); /* levels across vectors */                           \
        const int g = across < 3 ? across : 3;                                                     \
        /* Constant arguments per case so each pass is specialised. */                            \
        switch (g) {                                                                               \
            case 0: rf_pass1_##SUFFIX##_##ISA(buf, len, diag, 1, LOG_L); break;                    \
            case 1: rf_pass1_##SUFFIX##_##ISA(buf, len, diag, 2, LOG_L); break;                    \
            case 2: rf_pass1_##SUFFIX##_##ISA(buf, len, diag, 4, LOG_L); break;                    \
            default: rf_pass1_##SUFFIX##_##ISA(buf, len, diag, 8, LOG_L); break;                   \
        }                                                                                          \
        int done = g;                                                                              \
        while (done < across) {                                                                    \
            const int r = across - done < 3 ? across - done : 3;                                   \
            const int64_t s = (int64_t)1 << done;                                                  \
            switch (r) {                                                                           \
                case 1: rf_radix_##SUFFIX##_##ISA(buf, len, s, 1); break;                          \
                case 2: rf_radix_##SUFFIX##_##ISA(buf, len, s, 2); break;                          \
                default: rf_radix_##SUFFIX##_##ISA(buf, len, s, 3); break;                         \
            }                                                                                      \
            done += r;                                                                             \
        }                                                                                          \
    }
#define RF_FWHT_CALL(SUFFIX, ISA) rf_fwht_##SUFFIX##_##ISA
#else
/* No vector extensions (MSVC): the same levels in the same order, scalar. */
#define RF_FWHT_VECTOR_BODIES(SUFFIX, ISA, VAL, IVAL, VBYTES, LOG_L, XI, TARGET)                   \
    TARGET RF_INLINE void rf_fwht_##SUFFIX##_##ISA(VAL *RF_RESTRICT buf, int64_t len, int log_n,   \
                                                    const VAL *RF_RESTRICT diag)                   \
    {                                                                                              \
        if (diag)                                                                                  \
            for (int64_t i = 0; i < len; ++i) buf[i] *= diag[i];                                   \
        for (int64_t h = 1; h < ((int64_t)1 << log_n); h *= 2)                                     \
            for (int64_t i = 0; i < len; i += 2 * h)                                               \
                for (int64_t k = i; k < i + h; ++k) {                                              \
                    VAL a = buf[k], c = buf[k + h];                                                \
                    buf[k] = a + c;                                                                \
                    buf[k + h] = a - c;                                                            \
                }                                                                                  \
    }
#define RF_FWHT_CALL(SUFFIX, ISA) rf_fwht_##SUFFIX##_##ISA
#endif

/* ------------------------------------------------------------ one row
 * xrow: the row densified (d values, zero up to max(n, RF_FWHT_LANES));
 * R, P: rf_struct_chunk(n, len) values each (64-byte aligned); out: the
 * output row.  The buffer of all blocks is computed a chunk of whole
 * blocks at a time (8 KiB: R and P stay in L1 through the three
 * transforms), its arguments written to out[0:n_freq]; chunks past the
 * last frequency are not computed.  Each block is computed by the same
 * operations whatever the chunking: the same bits. */
#define RF_STRUCT_ROW(SUFFIX, ISA, VAL, TARGET)                                                    \
    TARGET static void rf_struct_row_##SUFFIX##_##ISA(const rf_struct_##SUFFIX *p, VAL *xrow,      \
                                                      VAL *R, VAL *P, VAL *out)                    \
    {                                                                                              \
        const int64_t n = p->n, len = p->len, nf = p->n_freq;                                      \
        const int64_t per = n > RF_FWHT_LANES ? n : RF_FWHT_LANES;                                 \
        const int64_t chunk = rf_struct_chunk(n, len, sizeof(VAL));                                \
        const int log_n = (int)p->log_n;                                                           \
        /* A block shorter than the widest vector: repeat it so every run of                      \
         * `per` values of R starts from the same x. */                                           \
        for (int64_t k = n; k < per; ++k) xrow[k] = xrow[k & (n - 1)];                             \
        for (int64_t c0 = 0; c0 < nf; c0 += chunk) {                                               \
            const int64_t clen = len - c0 < chunk ? len - c0 : chunk;                              \
            const VAL *RF_RESTRICT d0 = p->diag0 + c0;                                             \
            for (int64_t c = 0; c < clen; c += per) {                                              \
                VAL *RF_RESTRICT rc = R + c;                                                       \
                const VAL *RF_RESTRICT xr = xrow;                                                  \
                for (int64_t k = 0; k < per; ++k) rc[k] = d0[c + k] * xr[k];                       \
            }                                                                                      \
            const VAL *y = R;                                                                      \
            RF_FWHT_CALL(SUFFIX, ISA)(R, clen, log_n, NULL);                                       \
            if (p->kind == RF_STRUCT_SORF) {                                                       \
                RF_FWHT_CALL(SUFFIX, ISA)(R, clen, log_n, p->diag1 + c0);                          \
                RF_FWHT_CALL(SUFFIX, ISA)(R, clen, log_n, p->diag2 + c0);                          \
            } else {                                                                               \
                /* perm stays within a block, and chunks hold whole blocks */                      \
                const int32_t *RF_RESTRICT perm = p->perm + c0;                                    \
                const VAL *RF_RESTRICT g = p->diag1 + c0;                                          \
                VAL *RF_RESTRICT Pr = P;                                                           \
                const VAL *RF_RESTRICT Rr = R - c0;                                                \
                for (int64_t i = 0; i < clen; ++i) Pr[i] = g[i] * Rr[perm[i]];                     \
                RF_FWHT_CALL(SUFFIX, ISA)(P, clen, log_n, NULL);                                   \
                y = P;                                                                             \
            }                                                                                      \
            const int64_t stop = nf - c0 < clen ? nf - c0 : clen;                                  \
            const VAL *RF_RESTRICT mult = p->mult + c0;                                            \
            VAL *RF_RESTRICT o = out + c0;                                                         \
            for (int64_t j = 0; j < stop; ++j) o[j] = mult[j] * y[j];                              \
        }                                                                                          \
        rf_struct_epi_##SUFFIX##_##ISA(p, out);                                                    \
    }

#define RF_STRUCT_INSTANCE(SUFFIX, ISA, VAL, IVAL, VBYTES, LOG_L, XI, TARGET)                      \
    RF_FWHT_VECTOR_BODIES(SUFFIX, ISA, VAL, IVAL, VBYTES, LOG_L, XI, TARGET)                       \
    RF_STRUCT_EPILOGUE(SUFFIX, ISA, VAL, TARGET)                                                \
    RF_STRUCT_ROW(SUFFIX, ISA, VAL, TARGET)                                                        \
    /* Test hook: every block of buf <- H_n block (no diagonal). */                               \
    TARGET static void rf_fwht_blocks_##SUFFIX##_##ISA(VAL *buf, int64_t len, int log_n)           \
    {                                                                                              \
        RF_FWHT_CALL(SUFFIX, ISA)(buf, len, log_n, NULL);                                          \
    }

RF_STRUCT_INSTANCE(f32, baseline, float, int32_t, 16, 2, RF_XI4, )
RF_STRUCT_INSTANCE(f64, baseline, double, int64_t, 16, 1, RF_XI2, )
#if RF_X86_DISPATCH
RF_STRUCT_INSTANCE(f32, avx2, float, int32_t, 32, 3, RF_XI8, RF_TARGET_AVX2)
RF_STRUCT_INSTANCE(f64, avx2, double, int64_t, 32, 2, RF_XI4, RF_TARGET_AVX2)
RF_STRUCT_INSTANCE(f32, avx512, float, int32_t, 64, 4, RF_XI16, RF_TARGET_AVX512)
RF_STRUCT_INSTANCE(f64, avx512, double, int64_t, 64, 3, RF_XI8, RF_TARGET_AVX512)
#endif

#define RF_STRUCT_ROW_F32_PARAMS (const rf_struct_f32 *p, float *xrow, float *R, float *P, float *out)
#define RF_STRUCT_ROW_F64_PARAMS (const rf_struct_f64 *p, double *xrow, double *R, double *P, double *out)
RF_ISA_POINTER(rf_struct_row_f32, RF_STRUCT_ROW_F32_PARAMS)
RF_ISA_POINTER(rf_struct_row_f64, RF_STRUCT_ROW_F64_PARAMS)
RF_ISA_POINTER(rf_fwht_blocks_f32, (float *buf, int64_t len, int log_n))
RF_ISA_POINTER(rf_fwht_blocks_f64, (double *buf, int64_t len, int log_n))

/* Pick the code path once (at module import), trig included; returns the RF_ISA_* used. */
static int rf_struct_init(void) {
    int isa = rf_trig_init();
    RF_ISA_PICK(rf_struct_row_f32, isa);
    RF_ISA_PICK(rf_struct_row_f64, isa);
    RF_ISA_PICK(rf_fwht_blocks_f32, isa);
    RF_ISA_PICK(rf_fwht_blocks_f64, isa);
    return isa;
}

#endif
