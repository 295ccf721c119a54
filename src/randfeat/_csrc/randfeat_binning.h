/* Random binning features: floor-and-hash of one row, per-grid vocabularies.
 *
 * Definition (the NumPy reference in bench/_binning_numpy.py computes exactly
 * the same thing, bit for bit):
 *
 *   for grid p and dimension m, with u[m,p] and inv[m,p] = 1/delta[m,p] in float64,
 *       b[m,p] = (int64) floor((x_m - u[m,p]) * inv[m,p])      (x_m converted to float64;
 *                                                               one IEEE subtraction, one
 *                                                               IEEE multiplication, no FMA)
 *   the bin tuple (b[0,p], ..., b[d-1,p]) is hashed by a running 64-bit state:
 *       h = SEED;  for m: h = step(h + (uint64) b[m,p]);  hash = fmix64(h)
 *   with step(v) = xorshift(v * MUL) and fmix64 the murmur3 finaliser.
 *
 * Why two tuples differing in exactly one coordinate never collide:
 *   say they differ at m = k only.  The states before step k are equal (same
 *   inputs, same deterministic steps), call it s.  The Python layer guarantees
 *   |b| <= 2^62, so b != b' implies b - b' != 0 (mod 2^64), hence
 *   s + b != s + b' (mod 2^64).  v -> v * MUL is a bijection of Z/2^64 (MUL is
 *   odd, so invertible mod 2^64) and v -> v ^ (v >> S) is a bijection (the top
 *   S bits are unchanged and determine the rest), so step(s + b) !=
 *   step(s + b').  Every later step h -> step(h + b_m) with the same b_m is a
 *   composition of bijections, and so is fmix64: the final hashes differ.
 *
 * Why collisions of other distinct tuples are negligible: each step is a
 * nonlinear (multiply + xorshift) bijection and fmix64 avalanches every input
 * bit into every output bit, so distinct tuples behave as independent uniform
 * 64-bit values: a given pair collides with probability ~2^-64, and a grid
 * with V occupied bins has a collision somewhere with probability
 * <= V^2 / 2^65 (V = 10^7 bins: < 3e-6).  A collision would merge two bins of
 * one grid, i.e. shift that grid's kernel estimate for those points by 1/P at
 * most; it can never give wrong indices or a crash.
 */
#ifndef RANDFEAT_BINNING_H
#define RANDFEAT_BINNING_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "randfeat_dispatch.h"

#if RF_X86_DISPATCH
#include <immintrin.h>
#endif

/* Constants: the 64-bit golden ratio (seed), splitmix64's first multiplier
 * (odd) and murmur3's fmix64 multipliers.  Mirrored in bench/_binning_numpy.py. */
#define RF_BIN_SEED 0x9E3779B97F4A7C15ULL
#define RF_BIN_MUL 0xBF58476D1CE4E5B9ULL
#define RF_BIN_SHIFT 29
#define RF_FMIX_M1 0xFF51AFD7ED558CCDULL
#define RF_FMIX_M2 0xC4CEB9FE1A85EC53ULL
#define RF_BIN_LANES 8 /* grids are padded to a multiple of 8 (one zmm of int64) */

static inline uint64_t rf_fmix64(uint64_t h) {
    h ^= h >> 33;
    h *= RF_FMIX_M1;
    h ^= h >> 33;
    h *= RF_FMIX_M2;
    h ^= h >> 33;
    return h;
}

/* ------------------------------------------------------------------ hashing
 * rf_hash_row_*(x, d, Ppad, U, INV, h): x is one row as float64 (length d);
 * U and INV are (d, Ppad) row-major, so the innermost loop runs over grids,
 * contiguous; h receives Ppad hashes (padding lanes have u = inv = 0 and are
 * ignored by the caller). */

#define RF_HASH_ROW_GENERIC(NAME, ATTR)                                              \
    ATTR static void NAME(const double *restrict x, int64_t d, int64_t Ppad,         \
                          const double *restrict U, const double *restrict INV,      \
                          uint64_t *restrict h) {                                    \
        for (int64_t p = 0; p < Ppad; p++) h[p] = RF_BIN_SEED;                       \
        for (int64_t m = 0; m < d; m++) {                                            \
            const double xm = x[m];                                                  \
            const double *restrict u = U + m * Ppad;                                 \
            const double *restrict iv = INV + m * Ppad;                              \
            for (int64_t p = 0; p < Ppad; p++) {                                     \
                uint64_t v = h[p] + (uint64_t)(int64_t)floor((xm - u[p]) * iv[p]);   \
                v *= RF_BIN_MUL;                                                     \
                h[p] = v ^ (v >> RF_BIN_SHIFT);                                      \
            }                                                                        \
        }                                                                            \
        for (int64_t p = 0; p < Ppad; p++) h[p] = rf_fmix64(h[p]);                   \
    }

RF_HASH_ROW_GENERIC(rf_hash_row_baseline, )
#if RF_X86_DISPATCH
RF_HASH_ROW_GENERIC(rf_hash_row_avx2, RF_TARGET_AVX2)

/* AVX-512: NV vectors of 8 grids stay in registers while m runs over all d
 * dimensions (x[m] broadcast); vcvtpd2qq with round-down does floor and the
 * int64 conversion in one instruction (same value as (int64)floor(t) for
 * |t| < 2^63), vpmullq is the native 64-bit multiply. */
RF_TARGET_AVX512 static inline __attribute__((always_inline)) __m512i
rf_fmix64_avx512(__m512i h) {
    h = _mm512_xor_si512(h, _mm512_srli_epi64(h, 33));
    h = _mm512_mullo_epi64(h, _mm512_set1_epi64((long long)RF_FMIX_M1));
    h = _mm512_xor_si512(h, _mm512_srli_epi64(h, 33));
    h = _mm512_mullo_epi64(h, _mm512_set1_epi64((long long)RF_FMIX_M2));
    return _mm512_xor_si512(h, _mm512_srli_epi64(h, 33));
}

RF_TARGET_AVX512 static inline __attribute__((always_inline)) void rf_hash_block_avx512(
    const double *restrict x, int64_t d, int64_t Ppad, const double *restrict U,
    const double *restrict INV, uint64_t *restrict h, int64_t p0, const int NV) {
    __m512i acc[4];
    const __m512i mul = _mm512_set1_epi64((long long)RF_BIN_MUL);
    for (int k = 0; k < NV; k++) acc[k] = _mm512_set1_epi64((long long)RF_BIN_SEED);
    for (int64_t m = 0; m < d; m++) {
        const __m512d xm = _mm512_set1_pd(x[m]);
        const double *u = U + m * Ppad + p0;
        const double *iv = INV + m * Ppad + p0;
        for (int k = 0; k < NV; k++) {
            __m512d t = _mm512_mul_pd(_mm512_sub_pd(xm, _mm512_loadu_pd(u + 8 * k)),
                                      _mm512_loadu_pd(iv + 8 * k));
            __m512i b = _mm512_cvt_roundpd_epi64(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
            __m512i v = _mm512_mullo_epi64(_mm512_add_epi64(acc[k], b), mul);
            acc[k] = _mm512_xor_si512(v, _mm512_srli_epi64(v, RF_BIN_SHIFT));
        }
    }
    for (int k = 0; k < NV; k++)
        _mm512_storeu_si512((void *)(h + p0 + 8 * k), rf_fmix64_avx512(acc[k]));
}

RF_TARGET_AVX512 static void rf_hash_row_avx512(const double *restrict x, int64_t d,
                                                int64_t Ppad, const double *restrict U,
                                                const double *restrict INV,
                                                uint64_t *restrict h) {
    int64_t p0 = 0;
    for (; p0 + 32 <= Ppad; p0 += 32) rf_hash_block_avx512(x, d, Ppad, U, INV, h, p0, 4);
    switch ((Ppad - p0) / 8) {
        case 3: rf_hash_block_avx512(x, d, Ppad, U, INV, h, p0, 3); break;
        case 2: rf_hash_block_avx512(x, d, Ppad, U, INV, h, p0, 2); break;
        case 1: rf_hash_block_avx512(x, d, Ppad, U, INV, h, p0, 1); break;
        default: break;
    }
}
#endif

typedef void (*rf_hash_row_fn)(const double *, int64_t, int64_t, const double *,
                               const double *, uint64_t *);

static rf_hash_row_fn rf_binning_hash_row = rf_hash_row_baseline;
static int rf_binning_isa = RF_ISA_BASELINE;

/* Choose the hashing path once (at module import). */
static void rf_binning_init_dispatch(void) {
    rf_binning_isa = rf_detect_isa();
#if RF_X86_DISPATCH
    if (rf_binning_isa == RF_ISA_AVX512) rf_binning_hash_row = rf_hash_row_avx512;
    else if (rf_binning_isa == RF_ISA_AVX2) rf_binning_hash_row = rf_hash_row_avx2;
    else rf_binning_hash_row = rf_hash_row_baseline;
#endif
}

/* ------------------------------------------------------ hash storage at fit
 * During fit the N x P hashes live inside the output CSR's own buffers (so
 * fit_transform needs no N x P temporary): in the 8-byte one if there is one
 * (float64 data, or int64 indices), else split in two 32-bit halves across
 * int32 indices (low) and float32 data (high). */
typedef struct {
    uint64_t *h64; /* non-NULL: whole hash here */
    uint32_t *lo;  /* else: low half here ... */
    uint32_t *hi;  /* ... and high half here */
} rf_hstore;

static inline void rf_hstore_put(const rf_hstore *s, int64_t k, uint64_t h) {
    if (s->h64) {
        s->h64[k] = h;
    } else {
        s->lo[k] = (uint32_t)h;
        s->hi[k] = (uint32_t)(h >> 32);
    }
}

static inline uint64_t rf_hstore_get(const rf_hstore *s, int64_t k) {
    if (s->h64) return s->h64[k];
    return ((uint64_t)s->hi[k] << 32) | (uint64_t)s->lo[k];
}

/* ---------------------------------------------------------------- vocabulary
 * A grid's vocabulary is its sorted distinct hashes keys[0..V) (column = rank,
 * so numbering does not depend on thread count or insertion order) plus a
 * directory on the top `bits` bits (2^bits <= V): dir[j]..dir[j+1] is the
 * range of keys whose top bits equal j.  Hashes are uniform, so a bucket holds
 * 1-2 keys on average and a lookup costs two cache misses at most. */

static inline int rf_vocab_bits(int64_t V) {
    int b = 0;
    while (b < 62 && ((int64_t)1 << (b + 1)) <= V) b++;
    return b; /* largest b with 2^b <= max(V, 1) */
}

static inline uint64_t rf_vocab_bucket(uint64_t h, int bits) {
    return bits ? h >> (64 - bits) : 0;
}

/* Column of hash h within its grid, or -1 if h was not seen at fit. */
static inline int64_t rf_vocab_find(uint64_t h, const uint64_t *keys, const uint32_t *dir,
                                    int bits) {
    uint64_t j = rf_vocab_bucket(h, bits);
    for (uint32_t q = dir[j], e = dir[j + 1]; q < e; q++) {
        uint64_t k = keys[q];
        if (k >= h) return k == h ? (int64_t)q : -1;
    }
    return -1;
}

/* Distinct hashes of one grid, sorted, with their directory.
 *
 * Distinct values are collected in a thread-private open-addressing set
 * (linear probing on the low bits, 0 marks an empty slot and the hash 0 is
 * tracked by a flag; it doubles at 50% load), then placed by a counting sort on
 * the top bits and an insertion sort inside each (tiny) bucket.  This costs
 * O(N + V) with a table of O(V), where sort-unique of N hashes would cost
 * O(N log N) and an N-sized buffer (see the PR notes for measurements).
 *
 * get(k) for k = 0..n-1 reads the hash of row k (strided in the CSR buffers).
 * On success returns 0 and mallocs *keys_out (V) and *dir_out (2^bits + 1);
 * returns -1 if memory runs out (nothing allocated then). */
static int rf_grid_vocab(const rf_hstore *s, int64_t n, int64_t stride, int64_t offset,
                         uint64_t **keys_out, int64_t *nkeys_out, uint32_t **dir_out,
                         int *bits_out) {
    int64_t cap = 1024, count = 0;
    int has_zero = 0;
    uint64_t *tab = (uint64_t *)calloc((size_t)cap, sizeof(uint64_t));
    if (!tab) return -1;
    for (int64_t i = 0; i < n; i++) {
        uint64_t h = rf_hstore_get(s, i * stride + offset);
        if (h == 0) {
            has_zero = 1;
            continue;
        }
        uint64_t mask = (uint64_t)cap - 1, j = h & mask;
        while (tab[j] != 0 && tab[j] != h) j = (j + 1) & mask;
        if (tab[j] == h) continue;
        tab[j] = h;
        if (2 * ++count > cap) { /* grow: reinsert into a table twice as large */
            int64_t ncap = 2 * cap;
            uint64_t *nt = (uint64_t *)calloc((size_t)ncap, sizeof(uint64_t));
            if (!nt) {
                free(tab);
                return -1;
            }
            uint64_t nmask = (uint64_t)ncap - 1;
            for (int64_t q = 0; q < cap; q++) {
                uint64_t k = tab[q];
                if (k == 0) continue;
                uint64_t jj = k & nmask;
                while (nt[jj] != 0) jj = (jj + 1) & nmask;
                nt[jj] = k;
            }
            free(tab);
            tab = nt;
            cap = ncap;
        }
    }
    int64_t V = count + has_zero;
    int bits = rf_vocab_bits(V);
    int64_t nb = (int64_t)1 << bits;
    uint64_t *keys = (uint64_t *)malloc((size_t)(V > 0 ? V : 1) * sizeof(uint64_t));
    uint32_t *dir = (uint32_t *)calloc((size_t)(nb + 1), sizeof(uint32_t));
    uint32_t *cur = (uint32_t *)malloc((size_t)nb * sizeof(uint32_t));
    if (!keys || !dir || !cur) {
        free(tab);
        free(keys);
        free(dir);
        free(cur);
        return -1;
    }
    /* counting sort on the top bits: dir[j + 1] counts bucket j, then prefix sums */
    if (has_zero) dir[1]++;
    for (int64_t q = 0; q < cap; q++)
        if (tab[q]) dir[rf_vocab_bucket(tab[q], bits) + 1]++;
    for (int64_t j = 0; j < nb; j++) dir[j + 1] += dir[j];
    memcpy(cur, dir, (size_t)nb * sizeof(uint32_t));
    if (has_zero) keys[cur[0]++] = 0;
    for (int64_t q = 0; q < cap; q++)
        if (tab[q]) {
            uint64_t j = rf_vocab_bucket(tab[q], bits);
            keys[cur[j]++] = tab[q];
        }
    free(tab);
    free(cur);
    /* insertion sort inside each bucket (1-2 keys on average) */
    for (int64_t j = 0; j < nb; j++) {
        for (uint32_t a = dir[j] + 1; a < dir[j + 1]; a++) {
            uint64_t k = keys[a];
            uint32_t b = a;
            while (b > dir[j] && keys[b - 1] > k) {
                keys[b] = keys[b - 1];
                b--;
            }
            keys[b] = k;
        }
    }
    *keys_out = keys;
    *nkeys_out = V;
    *dir_out = dir;
    *bits_out = bits;
    return 0;
}

#endif
