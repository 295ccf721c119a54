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

#include "randfeat_common.h"

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

#define RF_HASH_ROW_PARAMS                                                           \
    (const double *RF_RESTRICT x, int64_t d, int64_t Ppad, const double *RF_RESTRICT U,    \
     const double *RF_RESTRICT INV, uint64_t *RF_RESTRICT h)

RF_INLINE void rf_hash_row_body RF_HASH_ROW_PARAMS {
    for (int64_t p = 0; p < Ppad; p++) h[p] = RF_BIN_SEED;
    for (int64_t m = 0; m < d; m++) {
        const double xm = x[m];
        const double *RF_RESTRICT u = U + m * Ppad;
        const double *RF_RESTRICT iv = INV + m * Ppad;
        for (int64_t p = 0; p < Ppad; p++) {
            uint64_t v = h[p] + (uint64_t)(int64_t)floor((xm - u[p]) * iv[p]);
            v *= RF_BIN_MUL;
            h[p] = v ^ (v >> RF_BIN_SHIFT);
        }
    }
    for (int64_t p = 0; p < Ppad; p++) h[p] = rf_fmix64(h[p]);
}

/* baseline from the generic body; AVX2 and AVX-512 written by hand below */
RF_ISA_CLONE(rf_hash_row, baseline, , RF_HASH_ROW_PARAMS, (x, d, Ppad, U, INV, h))
#if RF_X86_DISPATCH
/* AVX2 has neither a 64-bit multiply nor a double -> int64 conversion:
 *   a * c mod 2^64 = lo(a) lo(c) + ((hi(a) lo(c) + lo(a) hi(c)) << 32), three vpmuludq;
 *   an integral double f with |f| < 2^51 is f + (2^52 + 2^51) minus that constant's bits, read
 *   as int64 (the sum's exponent is fixed, its mantissa holds f + 2^51 exactly); a larger one
 *   (|f| <= 2^62: bins may be that large) is split exactly as f = fh 2^32 + fl with
 *   fh = floor(f / 2^32), 0 <= fl < 2^32 (a power-of-two scaling, a floor and an exact
 *   difference), each half converted so.  Same integers as (int64_t)floor(t), bit for bit. */
RF_TARGET_AVX2 RF_INLINE __m256i rf_mul64_avx2(__m256i a, __m256i c_lo, __m256i c_hi) {
    const __m256i p0 = _mm256_mul_epu32(a, c_lo);
    const __m256i p1 = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), c_lo);
    const __m256i p2 = _mm256_mul_epu32(a, c_hi);
    return _mm256_add_epi64(p0, _mm256_slli_epi64(_mm256_add_epi64(p1, p2), 32));
}

RF_TARGET_AVX2 RF_INLINE __m256i rf_small_to_i64_avx2(__m256d f) { /* integral, |f| < 2^51 */
    const __m256d magic = _mm256_set1_pd(6755399441055744.0); /* 2^52 + 2^51 */
    return _mm256_sub_epi64(_mm256_castpd_si256(_mm256_add_pd(f, magic)), _mm256_castpd_si256(magic));
}

RF_TARGET_AVX2 RF_INLINE __m256i rf_floor_i64_avx2(__m256d t) {
    const __m256d f = _mm256_round_pd(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    const __m256d absf = _mm256_andnot_pd(_mm256_set1_pd(-0.0), f);
    if (_mm256_movemask_pd(_mm256_cmp_pd(absf, _mm256_set1_pd(2251799813685248.0), _CMP_LT_OQ)) == 0xF)
        return rf_small_to_i64_avx2(f); /* all four below 2^51: the usual case */
    const __m256d fh = _mm256_round_pd(_mm256_mul_pd(f, _mm256_set1_pd(1.0 / 4294967296.0)),
                                       _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    const __m256d fl = _mm256_sub_pd(f, _mm256_mul_pd(fh, _mm256_set1_pd(4294967296.0)));
    return _mm256_add_epi64(_mm256_slli_epi64(rf_small_to_i64_avx2(fh), 32), rf_small_to_i64_avx2(fl));
}

RF_TARGET_AVX2 RF_INLINE __m256i rf_fmix64_avx2(__m256i h) {
    const __m256i m1l = _mm256_set1_epi64x((long long)RF_FMIX_M1), m1h = _mm256_set1_epi64x((long long)(RF_FMIX_M1 >> 32));
    const __m256i m2l = _mm256_set1_epi64x((long long)RF_FMIX_M2), m2h = _mm256_set1_epi64x((long long)(RF_FMIX_M2 >> 32));
    h = _mm256_xor_si256(h, _mm256_srli_epi64(h, 33));
    h = rf_mul64_avx2(h, m1l, m1h);
    h = _mm256_xor_si256(h, _mm256_srli_epi64(h, 33));
    h = rf_mul64_avx2(h, m2l, m2h);
    return _mm256_xor_si256(h, _mm256_srli_epi64(h, 33));
}

/* NV <= 4 vectors of 4 grids in registers while m runs over all d dimensions. */
RF_TARGET_AVX2 RF_INLINE void rf_hash_block_avx2(const double *RF_RESTRICT x, int64_t d, int64_t Ppad,
                                                 const double *RF_RESTRICT U, const double *RF_RESTRICT INV,
                                                 uint64_t *RF_RESTRICT h, int64_t p0, const int NV) {
    __m256i acc[4];
    const __m256i ml = _mm256_set1_epi64x((long long)RF_BIN_MUL), mh = _mm256_set1_epi64x((long long)(RF_BIN_MUL >> 32));
    for (int k = 0; k < NV; k++) acc[k] = _mm256_set1_epi64x((long long)RF_BIN_SEED);
    for (int64_t m = 0; m < d; m++) {
        const __m256d xm = _mm256_set1_pd(x[m]);
        const double *u = U + m * Ppad + p0;
        const double *iv = INV + m * Ppad + p0;
        for (int k = 0; k < NV; k++) {
            const __m256d t = _mm256_mul_pd(_mm256_sub_pd(xm, _mm256_loadu_pd(u + 4 * k)), _mm256_loadu_pd(iv + 4 * k));
            const __m256i v = rf_mul64_avx2(_mm256_add_epi64(acc[k], rf_floor_i64_avx2(t)), ml, mh);
            acc[k] = _mm256_xor_si256(v, _mm256_srli_epi64(v, RF_BIN_SHIFT));
        }
    }
    for (int k = 0; k < NV; k++) _mm256_storeu_si256((__m256i *)(h + p0 + 4 * k), rf_fmix64_avx2(acc[k]));
}

RF_TARGET_AVX2 static void rf_hash_row_avx2(const double *RF_RESTRICT x, int64_t d, int64_t Ppad,
                                            const double *RF_RESTRICT U, const double *RF_RESTRICT INV,
                                            uint64_t *RF_RESTRICT h) {
    int64_t p0 = 0;
    for (; p0 + 16 <= Ppad; p0 += 16) rf_hash_block_avx2(x, d, Ppad, U, INV, h, p0, 4);
    switch ((Ppad - p0) / 4) { /* Ppad is a multiple of 8: 0 or 8 grids left */
        case 3: rf_hash_block_avx2(x, d, Ppad, U, INV, h, p0, 3); break;
        case 2: rf_hash_block_avx2(x, d, Ppad, U, INV, h, p0, 2); break;
        case 1: rf_hash_block_avx2(x, d, Ppad, U, INV, h, p0, 1); break;
        default: break;
    }
}

/* AVX-512: NV <= 8 vectors of 8 grids stay in registers while m runs over all d
 * dimensions (x[m] broadcast); vcvtpd2qq with round-down does floor and the
 * int64 conversion in one instruction (same value as (int64)floor(t) for
 * |t| < 2^63), vpmullq is the native 64-bit multiply. */
RF_TARGET_AVX512 RF_INLINE __m512i rf_fmix64_avx512(__m512i h) {
    h = _mm512_xor_si512(h, _mm512_srli_epi64(h, 33));
    h = _mm512_mullo_epi64(h, _mm512_set1_epi64((long long)RF_FMIX_M1));
    h = _mm512_xor_si512(h, _mm512_srli_epi64(h, 33));
    h = _mm512_mullo_epi64(h, _mm512_set1_epi64((long long)RF_FMIX_M2));
    return _mm512_xor_si512(h, _mm512_srli_epi64(h, 33));
}

RF_TARGET_AVX512 RF_INLINE void rf_hash_block_avx512(
    const double *RF_RESTRICT x, int64_t d, int64_t Ppad, const double *RF_RESTRICT U,
    const double *RF_RESTRICT INV, uint64_t *RF_RESTRICT h, int64_t p0, const int NV) {
    __m512i acc[8];
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

RF_TARGET_AVX512 static void rf_hash_row_avx512(const double *RF_RESTRICT x, int64_t d,
                                                int64_t Ppad, const double *RF_RESTRICT U,
                                                const double *RF_RESTRICT INV,
                                                uint64_t *RF_RESTRICT h) {
    int64_t p0 = 0;
    for (; p0 + 64 <= Ppad; p0 += 64) rf_hash_block_avx512(x, d, Ppad, U, INV, h, p0, 8);
    switch ((Ppad - p0) / 8) { /* constant NV: the block is unrolled with acc[] in registers */
        case 7: rf_hash_block_avx512(x, d, Ppad, U, INV, h, p0, 7); break;
        case 6: rf_hash_block_avx512(x, d, Ppad, U, INV, h, p0, 6); break;
        case 5: rf_hash_block_avx512(x, d, Ppad, U, INV, h, p0, 5); break;
        case 4: rf_hash_block_avx512(x, d, Ppad, U, INV, h, p0, 4); break;
        case 3: rf_hash_block_avx512(x, d, Ppad, U, INV, h, p0, 3); break;
        case 2: rf_hash_block_avx512(x, d, Ppad, U, INV, h, p0, 2); break;
        case 1: rf_hash_block_avx512(x, d, Ppad, U, INV, h, p0, 1); break;
        default: break;
    }
}
#endif

RF_ISA_POINTER(rf_hash_row, RF_HASH_ROW_PARAMS)

/* Choose the hashing path once (at module import); returns the RF_ISA_* used. */
static int rf_binning_init(void) {
    int isa = rf_detect_isa();
    RF_ISA_PICK(rf_hash_row, isa);
    return isa;
}

/* ------------------------------------------------------ hash storage at fit
 * During fit the N x P hashes live inside the output CSR's own buffers (so
 * fit_transform needs no N x P temporary): in the 8-byte one if there is one
 * (float64 data, or int64 indices), else split in two 32-bit halves across
 * int32 indices (low) and float32 data (high).  The hash of (row i, grid p)
 * is in slot i*rs + p*gs: grid-major (rs = 1, gs = N) at fit, so that a
 * grid's hashes are one contiguous run its vocabulary reads sequentially
 * (row-major, one cache line per row and grid, cost 0.15 s over the 50 grids
 * of 522000 rows, grid-major 0.01 s); row-major (rs = P, gs = 1) for callers
 * that want an (N, P) array. */
typedef struct {
    uint64_t *h64; /* non-NULL: whole hash here */
    uint32_t *lo;  /* else: low half here ... */
    uint32_t *hi;  /* ... and high half here */
    int64_t rs, gs;
} rf_hstore;

static inline int64_t rf_hslot(const rf_hstore *s, int64_t i, int64_t p) { return i * s->rs + p * s->gs; }

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

/* The hashes of grid p for rows i0..i1 (at most RF_HBLOCK): a pointer into
 * the store when they lie there contiguously and `copy` is 0, else gathered
 * into buf.  Phases that write ranks over the store ask for a copy: the
 * copy (memcpy, which may alias anything) is read before any rank of the
 * block is written, so the uint32 rank stores never race the uint64 hash
 * loads of the same bytes, whatever the compiler reorders. */
enum { RF_HBLOCK = 4096 };
static const uint64_t *rf_hstore_block(const rf_hstore *s, int64_t p, int64_t i0, int64_t i1,
                                       uint64_t *RF_RESTRICT buf, int copy) {
    const int64_t m = i1 - i0, rs = s->rs, base = i0 * rs + p * s->gs;
    if (s->h64 && rs == 1) {
        if (!copy) return s->h64 + base;
        memcpy(buf, s->h64 + base, (size_t)m * sizeof(uint64_t));
    } else if (s->h64) {
        for (int64_t a = 0; a < m; a++) memcpy(buf + a, s->h64 + base + a * rs, sizeof(uint64_t));
    } else {
        for (int64_t a = 0; a < m; a++) {
            uint32_t lo, hi;
            memcpy(&lo, s->lo + base + a * rs, sizeof lo);
            memcpy(&hi, s->hi + base + a * rs, sizeof hi);
            buf[a] = ((uint64_t)hi << 32) | lo;
        }
    }
    return buf;
}

/* Ranks at fit_transform.  Row i's rank in grid p's vocabulary goes to
 * rank[p*rank_gs + i] (uint32: N < 2^32 - 1), where rank is the output's
 * data buffer and rank_gs its 4-byte words per grid (2N for float64, N for
 * float32): grid p's ranks lie inside grid p's own hash slots (or, with
 * int64 indices and float32 data, in the data buffer beside them).  A rank
 * is written only after its grid's hashes that share those bytes are read
 * (rows go in order, and rank i covers part of hash i/2 or hash i), and no
 * other grid's work touches them, so any thread may build any grid.  The
 * CSR is finished afterwards (columns = rank + the grid's first column, in
 * row-major order; then the values). */

/* ---------------------------------------------------------------- vocabulary
 * A grid's vocabulary is its sorted distinct hashes keys[0..V) (column = rank,
 * so numbering does not depend on thread count or insertion order) plus a
 * directory on the top `bits` bits, V < 2^bits <= 2V: dir[j]..dir[j+1] is the
 * range of keys whose top bits equal j.  Hashes are uniform, so a bucket holds
 * 0.5-1 keys on average and a lookup costs two cache misses at most.
 * (Measured on N=200000 lookups x 50 grids, 10^4 keys per grid: buckets of
 * ~1 key are 2x faster than ~2 keys and 3x faster than ~8; ~0.5 gains nothing
 * more and doubles the directory.) */

#ifndef RF_DIR_EXTRA_BITS
#define RF_DIR_EXTRA_BITS 1
#endif
static inline int rf_vocab_bits(int64_t V) {
    int b = 0;
    while (b < 62 && ((int64_t)1 << (b + 1)) <= V) b++; /* largest b with 2^b <= max(V, 1) */
    b += RF_DIR_EXTRA_BITS;
    return b < 0 ? 0 : b;
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

/* Look up the P hashes of one row, one per grid: cols[p] = global column or -1.
 *
 * The P lookups touch P different vocabularies (megabytes in total), so each
 * would wait for a cache miss in turn; instead they run in three sweeps
 * (prefetch directory entries, read them and prefetch keys, compare), so the
 * misses of all grids overlap.  koff/doff: per-grid offsets into keys/dir. */
static void rf_lookup_row(const uint64_t *RF_RESTRICT h, int64_t P, const uint64_t *RF_RESTRICT keys,
                          const int64_t *RF_RESTRICT koff, const uint32_t *RF_RESTRICT dir,
                          const int64_t *RF_RESTRICT doff, const int *RF_RESTRICT bits,
                          int64_t *RF_RESTRICT cols) {
    enum { BLK = 64 };
    uint32_t lo[BLK], hi[BLK];
    for (int64_t p0 = 0; p0 < P; p0 += BLK) {
        int64_t nb = P - p0 < BLK ? P - p0 : BLK;
        for (int64_t q = 0; q < nb; q++) {
            int64_t p = p0 + q;
            RF_PREFETCH(dir + doff[p] + rf_vocab_bucket(h[p], bits[p]));
        }
        for (int64_t q = 0; q < nb; q++) {
            int64_t p = p0 + q;
            const uint32_t *dp = dir + doff[p] + rf_vocab_bucket(h[p], bits[p]);
            lo[q] = dp[0];
            hi[q] = dp[1];
            RF_PREFETCH(keys + koff[p] + lo[q]);
        }
        for (int64_t q = 0; q < nb; q++) {
            int64_t p = p0 + q;
            const uint64_t *kp = keys + koff[p];
            int64_t col = -1;
            for (uint32_t a = lo[q]; a < hi[q]; a++) {
                if (kp[a] >= h[p]) {
                    if (kp[a] == h[p]) col = koff[p] + (int64_t)a;
                    break;
                }
            }
            cols[p] = col;
        }
    }
}

/* Distinct values of one grid: a thread-private open-addressing set (linear
 * probing on the low bits; 0 marks an empty slot and the hash 0 is tracked by
 * a flag; it doubles at 50% load).
 *
 * Sets or sorting: a set's memory is O(V) (distinct bins), and for V << N it
 * stays in cache, so a group of grids can share one pass over the rows; but
 * once it outgrows the cache every insertion and every rank is a cache miss.
 * Measured (N=522000, P=50, one thread, shared machine), against NumPy's
 * AVX-512 np.sort + dedup of the same hashes: V=5.3e5 in total (1e4 per
 * grid): set 0.66 s, sort 0.71 s; V=2.6e7 (almost every row its own bin):
 * set 6.5 s, sort 1.0 s.  Grids with large vocabularies are therefore built
 * by sorting their (hash, row) pairs (rf_sort_pairs below). */
typedef struct {
    uint64_t *tab;
    int64_t cap, count;
    int has_zero;
} rf_hset;

/* An empty set of `cap` slots (a power of two); its memory from `sp`. */
static int rf_hset_init(rf_hset *t, int64_t cap, rf_spares *sp) {
    t->cap = cap;
    t->count = 0;
    t->has_zero = 0;
    t->tab = (uint64_t *)rf_spare_take(sp, (size_t)cap * sizeof(uint64_t), 1);
    return t->tab ? 0 : -1;
}

/* Insert h; returns 0, or -1 if growing ran out of memory. */
static inline int rf_hset_add(rf_hset *t, uint64_t h, rf_spares *sp) {
    if (h == 0) {
        t->has_zero = 1;
        return 0;
    }
    uint64_t mask = (uint64_t)t->cap - 1, j = h & mask;
    while (t->tab[j] != 0) {
        if (t->tab[j] == h) return 0;
        j = (j + 1) & mask;
    }
    t->tab[j] = h;
    if (2 * ++t->count <= t->cap) return 0;
    int64_t ncap = 2 * t->cap; /* grow: reinsert into a table twice as large */
    uint64_t *nt = (uint64_t *)rf_spare_take(sp, (size_t)ncap * sizeof(uint64_t), 1);
    if (!nt) return -1;
    uint64_t nmask = (uint64_t)ncap - 1;
    for (int64_t q = 0; q < t->cap; q++) {
        uint64_t k = t->tab[q];
        if (k == 0) continue;
        uint64_t jj = k & nmask;
        while (nt[jj] != 0) jj = (jj + 1) & nmask;
        nt[jj] = k;
    }
    rf_spare_give(sp, t->tab);
    t->tab = nt;
    t->cap = ncap;
    return 0;
}

/* The set's values sorted, with their directory; frees the set.  A counting
 * sort on the top bits (the counts are the directory) then an insertion sort
 * inside each bucket (1-2 keys on average): O(V + cap).  Returns 0 or -1. */
static int rf_hset_finish(rf_hset *t, rf_spares *sp, uint64_t **keys_out, int64_t *nkeys_out,
                          uint32_t **dir_out, int *bits_out, uint32_t **slot_rank_out) {
    int64_t V = t->count + t->has_zero;
    int bits = rf_vocab_bits(V);
    int64_t nb = (int64_t)1 << bits;
    uint64_t *keys = (uint64_t *)rf_spare_take(sp, (size_t)(V > 0 ? V : 1) * sizeof(uint64_t), 0);
    uint32_t *dir = (uint32_t *)rf_spare_take(sp, (size_t)(nb + 1) * sizeof(uint32_t), 1);
    if (!keys || !dir) {
        rf_spare_give(sp, t->tab);
        t->tab = NULL;
        rf_spare_give(sp, keys);
        rf_spare_give(sp, dir);
        return -1;
    }
    uint64_t *tab = t->tab;
    if (t->has_zero) dir[1]++;
    for (int64_t q = 0; q < t->cap; q++)
        if (tab[q]) dir[rf_vocab_bucket(tab[q], bits) + 1]++;
    for (int64_t j = 0; j < nb; j++) dir[j + 1] += dir[j];
    /* Place the keys bucket by bucket, dir[j] serving as bucket j's cursor
     * (it ends at bucket j+1's start); then shift the starts back. */
    if (t->has_zero) keys[dir[0]++] = 0;
    for (int64_t q = 0; q < t->cap; q++)
        if (tab[q]) keys[dir[rf_vocab_bucket(tab[q], bits)]++] = tab[q];
    memmove(dir + 1, dir, (size_t)nb * sizeof(uint32_t));
    dir[0] = 0;
    if (!slot_rank_out) {
        rf_spare_give(sp, tab);
        t->tab = NULL;
    }
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
    if (slot_rank_out) {
        /* Keep the set, with each occupied slot's rank, for rf_hset_rank. */
        uint32_t *rk = (uint32_t *)rf_spare_take(sp, (size_t)t->cap * sizeof(uint32_t), 0);
        if (!rk) {
            rf_spare_give(sp, tab);
            t->tab = NULL;
            rf_spare_give(sp, keys);
            rf_spare_give(sp, dir);
            return -1;
        }
        for (int64_t q = 0; q < t->cap; q++)
            rk[q] = tab[q] ? (uint32_t)rf_vocab_find(tab[q], keys, dir, bits) : 0;
        *slot_rank_out = rk;
    }
    *keys_out = keys;
    *nkeys_out = V;
    *dir_out = dir;
    *bits_out = bits;
    return 0;
}

/* Rank of h in a finished set (slot ranks rk), or -1 if absent.  One probe
 * of the set finds it, usually on the first slot: cheaper than a directory
 * lookup (two dependent loads and an unpredictable scan). The hash 0, when
 * present, is the smallest key, so its rank is 0. */
static inline int64_t rf_hset_rank(const rf_hset *t, const uint32_t *rk, uint64_t h) {
    if (h == 0) return t->has_zero ? 0 : -1;
    uint64_t mask = (uint64_t)t->cap - 1, j = h & mask;
    for (;;) {
        uint64_t k = t->tab[j];
        if (k == h) return (int64_t)rk[j];
        if (k == 0) return -1;
        j = (j + 1) & mask;
    }
}

/* ------------------------------------------------------ sorting one grid
 * A grid with a large vocabulary (V comparable to N) is built by sorting its
 * N (hash, row) pairs: a counting pass and a scatter on the top 8 bits (256
 * runs of N/256 pairs that fit in the L2 cache), then each run sorted in
 * cache (rf_sort_pairs), then one pass over the sorted pairs writes the
 * distinct keys (in place, over the sorted keys) and each row's rank (the
 * number of distinct keys before it).  Hashes are uniform, so every digit
 * splits evenly; repeated bins only make runs of equal keys, which the
 * radix passes skip.  Memory: 12 bytes a row, and 12 more per pair of the
 * longest run. */
enum { RF_SORT_SMALL = 16, RF_SORT_MAX_DIGIT = 12, RF_SORT_TOP_BITS = 8 };

/* Insertion sort of the pairs by key; cheap when they are nearly sorted. */
static inline void rf_pairs_insertion(uint64_t *RF_RESTRICT S, uint32_t *RF_RESTRICT R, int64_t m) {
    for (int64_t a = 1; a < m; a++) {
        const uint64_t k = S[a];
        if (k >= S[a - 1]) continue;
        const uint32_t r = R[a];
        int64_t b = a;
        do {
            S[b] = S[b - 1];
            R[b] = R[b - 1];
            b--;
        } while (b > 0 && S[b - 1] > k);
        S[b] = k;
        R[b] = r;
    }
}

/* Sort the m pairs (S, R) by key, given that their keys agree on all bits
 * from `shift` up.  T, Q: scratch for m pairs.  Returns where the sorted
 * pairs are: 0 in S/R, 1 in T/Q.  Most-significant digit first: a digit
 * of up to 12 bits (about one value per pair) scatters the pairs into T/Q;
 * runs longer than RF_SORT_SMALL are sorted recursively (with S/R as their
 * scratch); one insertion pass then sorts all the short runs at once (runs
 * are in order and the long ones sorted, so it moves pairs only inside
 * short runs).  Digits on which all m keys agree are skipped.  Stack:
 * 16 KiB a level, and each level takes at least 5 bits. */
static int rf_sort_pairs(uint64_t *RF_RESTRICT S, uint32_t *RF_RESTRICT R, uint64_t *RF_RESTRICT T,
                         uint32_t *RF_RESTRICT Q, int64_t m, int shift) {
    uint32_t cnt[(1 << RF_SORT_MAX_DIGIT) + 1];
    while (m > RF_SORT_SMALL && shift > 0) {
        int k = 1;
        while (k < RF_SORT_MAX_DIGIT && ((int64_t)1 << k) < m) k++;
        if (k > shift) k = shift;
        const int low = shift - k;
        const uint64_t mask = ((uint64_t)1 << k) - 1;
        const int64_t nb = (int64_t)1 << k;
        memset(cnt, 0, (size_t)(nb + 1) * sizeof(uint32_t));
        for (int64_t a = 0; a < m; a++) cnt[((S[a] >> low) & mask) + 1]++;
        if (cnt[((S[0] >> low) & mask) + 1] == (uint32_t)m) {
            /* One value of this digit (repeated bins): skip to the highest bit
             * on which the keys differ, or stop if they are all equal. */
            uint64_t diff = 0;
            for (int64_t a = 1; a < m; a++) diff |= S[a] ^ S[0];
            if (diff == 0) return 0;
            shift = 0;
            while (shift < 64 && (diff >> shift) != 0) shift++;
            continue;
        }
        uint32_t longest = 0;
        for (int64_t j = 0; j < nb; j++) {
            longest = cnt[j + 1] > longest ? cnt[j + 1] : longest;
            cnt[j + 1] += cnt[j];
        }
        for (int64_t a = 0; a < m; a++) {
            const uint32_t q = cnt[(S[a] >> low) & mask]++;
            T[q] = S[a];
            Q[q] = R[a];
        }
        if (longest > RF_SORT_SMALL) { /* cnt[j] is now the end of run j */
            int64_t start = 0;
            for (int64_t j = 0; j < nb; j++) {
                const int64_t end = cnt[j], len = end - start;
                if (len > RF_SORT_SMALL && rf_sort_pairs(T + start, Q + start, S + start, R + start, len, low)) {
                    /* sorted into the scratch (here S/R): back to this level's output */
                    memcpy(T + start, S + start, (size_t)len * sizeof(uint64_t));
                    memcpy(Q + start, R + start, (size_t)len * sizeof(uint32_t));
                }
                start = end;
            }
        }
        rf_pairs_insertion(T, Q, m);
        return 1;
    }
    rf_pairs_insertion(S, R, m); /* (shift 0: all keys equal, nothing moves) */
    return 0;
}

/* Walk m sorted pairs (S, R) of a grid: their distinct keys are appended to
 * out[0..V) (V counts those before; out may be the grid's pair array, whose
 * run this is or follows: V never overtakes the reading) and, if rank is
 * given, each row's rank is written.  Returns the new V. */
static int64_t rf_sorted_emit(uint64_t *out, const uint64_t *S, const uint32_t *RF_RESTRICT R, int64_t m,
                              int64_t V, uint32_t *RF_RESTRICT rank) {
    uint64_t last = V ? out[V - 1] : 0;
    if (rank) {
        for (int64_t a = 0; a < m; a++) {
            const uint64_t k = S[a];
            V += (V == 0) | (k != last);
            out[V - 1] = k;
            last = k;
            rank[R[a]] = (uint32_t)(V - 1);
        }
    } else {
        for (int64_t a = 0; a < m; a++) {
            const uint64_t k = S[a];
            V += (V == 0) | (k != last);
            out[V - 1] = k;
            last = k;
        }
    }
    return V;
}

/* The directory of V sorted keys (as rf_hset_finish makes it). */
static uint32_t *rf_sorted_directory(const uint64_t *keys, int64_t V, rf_spares *sp, int *bits_out) {
    const int bits = rf_vocab_bits(V);
    const int64_t nb = (int64_t)1 << bits;
    uint32_t *dir = (uint32_t *)rf_spare_take(sp, (size_t)(nb + 1) * sizeof(uint32_t), 1);
    if (!dir) return NULL;
    for (int64_t q = 0; q < V; q++) dir[rf_vocab_bucket(keys[q], bits) + 1]++;
    for (int64_t j = 0; j < nb; j++) dir[j + 1] += dir[j];
    *bits_out = bits;
    return dir;
}

/* Estimated distinct hashes of grid p: the distinct values among up to
 * RF_SAMPLE rows spread evenly over the N, D, scaled up by inverting
 * D = V (1 - exp(-s/V)) (s draws from V equally likely bins).  Exact when
 * N <= RF_SAMPLE; with skewed bins it underestimates.  Only speed depends
 * on it.  Returns -1 if out of memory. */
enum { RF_SAMPLE = 16384 };
static double rf_sample_vocab(const rf_hstore *s, int64_t p, int64_t n) {
    const int64_t m = n < RF_SAMPLE ? n : RF_SAMPLE;
    if (m == 0) return 0.0;
    int64_t cap = 1;
    while (cap < 2 * m) cap *= 2;
    uint64_t *tab = (uint64_t *)calloc((size_t)cap, sizeof(uint64_t));
    if (!tab) return -1.0;
    int64_t D = 0;
    int zero = 0;
    for (int64_t j = 0; j < m; j++) {
        const uint64_t h = rf_hstore_get(s, rf_hslot(s, j * n / m, p)); /* j*n < 2^46 */
        if (h == 0) {
            zero = 1;
            continue;
        }
        uint64_t q = h & (uint64_t)(cap - 1);
        while (tab[q] != 0 && tab[q] != h) q = (q + 1) & (uint64_t)(cap - 1);
        D += tab[q] == 0;
        tab[q] = h;
    }
    free(tab);
    D += zero;
    if (m == n) return (double)D;
    if (D >= m) return (double)n;
    double lo = (double)D, hi = (double)n * 1e6; /* V(1 - exp(-m/V)) grows with V */
    for (int it = 0; it < 100 && hi - lo > 0.5; it++) {
        const double v = 0.5 * (lo + hi);
        if (v * (1.0 - exp(-(double)m / v)) < (double)D) lo = v;
        else hi = v;
    }
    return lo < (double)n ? lo : (double)n;
}

/* ------------------------------------------------------- vocabulary tasks
 * A task builds the vocabularies of grids p0 .. p0+G-1, in units: all G
 * grids together with hash sets (one pass over the rows for the group: a
 * grouped task), or one grid at a time, with a hash set or by sorting.
 * The Cython layer plans the tasks from a sample of each group's first grid
 * (rf_sample_vocab, rf_plan_split): a group with enough bins to sort, or
 * whose sets would outgrow `budget`, becomes G one-grid tasks, which the
 * threads then share grid by grid.
 *
 * A task is resumable: rf_vocab_task_step works until a deadline and returns,
 * keeping its state, so the caller can check for Ctrl-C between slabs of
 * work.  The phases of a unit:
 *
 *   set units (grouped or one grid):
 *     ADD   every row's hashes go into the unit's hash sets; then each set
 *           is turned into its grid's sorted keys and directory;
 *     RANK  (fit_transform only) each row's rank within the grid is written
 *           to the rank store, while the unit's vocabularies are in cache;
 *   sort units (one grid):
 *     HIST     the top-8-bit counts of the grid's hashes;
 *     SCATTER  (hash, row) pairs into their top-8-bit runs;
 *     RUNS     each run sorted, its distinct keys and ranks written; then
 *              the grid's directory;
 *   DONE
 *
 * When a unit's grids are final (`ready`), the thread that finished them
 * commits every ready grid at the head, in grid order, to the growing key
 * and directory arrays (rf_vocab_commit), so finished pieces never pile up.
 * A grouped task whose sets exceed `budget` bytes drops them and builds its
 * grids one at a time; the result is the same either way (a grid's
 * vocabulary is its set of distinct hashes, sorted): only speed and memory
 * differ.  Status: 0, -1 out of memory, -3 a training hash missing from its
 * own vocabulary (a bug). */
enum { RF_GROUP_MAX = 16, RF_HSET_MIN_CAP = 1024 };
enum {
    RF_TASK_ADD = 0,
    RF_TASK_RANK = 1,
    RF_TASK_HIST = 2,
    RF_TASK_SCATTER = 3,
    RF_TASK_RUNS = 4,
    RF_TASK_DONE = 5
};
/* How one-grid units are built: chosen per grid (auto), or forced (tests). */
enum { RF_VOCAB_AUTO = 0, RF_VOCAB_SETS = 1, RF_VOCAB_SORT = 2 };

/* Sorting pays once a grid has a few thousand bins (measured, N = 522000,
 * one thread, ns per row and grid, grouped sets / sorting: 4 uniform bins
 * 3.4 / 4.5, 64: 3.7 / 5.8, 1024: 10.5 / 9.8, 8192: 13.4 / 9.6, 65536: 27.6
 * / 9.7, all distinct 54.6 (one-grid sets) / 15.6; Zipf-distributed bins,
 * whose hot keys stay in cache: exponent 2 (~1000 bins) 3.6 / 8.3, 1.5
 * (~9000) 5.5 / 8.9, 1.2 (~77000) 30.2 / 11.1).  The sample's estimate
 * assumes equally likely bins, so skewed ones look fewer: they stay with
 * the sets, which suits them. */
#ifndef RF_SORT_MIN_V
#define RF_SORT_MIN_V 4096
#endif

/* A growing array, grown in place (realloc of at least RF_RESERVE_BYTES:
 * glibc serves such blocks with mmap and grows them with mremap, which moves
 * pages instead of copying them), then handed to NumPy without a copy.  The
 * caller first reserves what the planning sample predicts (rf_growbuf_init),
 * and the buffer asks for transparent huge pages, as NumPy does for its
 * large arrays: on all-distinct bins the vocabulary is as large as the CSR,
 * and grown a grid at a time in 4 KiB pages its first touch cost 78000 page
 * faults (N = 522000, P = 50).  (Hinting a buffer that mremap later moves
 * doubled them: the move breaks the 2 MiB alignment.)  If the estimate is
 * short, it grows by half at least. */
enum { RF_RESERVE_BYTES = 32 * 1024 * 1024 };
typedef struct {
    char *data;
    size_t size, capacity;
} rf_growbuf;

static void rf_advise_huge(char *p, size_t bytes) {
#if defined(MADV_HUGEPAGE)
    const uintptr_t huge = (uintptr_t)2 << 20;
    const uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1), e = ((uintptr_t)p + bytes) & ~(huge - 1);
    if (e > a) (void)madvise((void *)a, e - a, MADV_HUGEPAGE); /* only a hint: failure changes nothing */
#else
    (void)p;
    (void)bytes;
#endif
}

static int rf_growbuf_reserve(rf_growbuf *b, size_t size) {
    if (size <= b->capacity) return 0;
    size_t want = b->capacity + b->capacity / 2;
    if (want < size) want = size;
    if (want < (size_t)RF_RESERVE_BYTES) want = (size_t)RF_RESERVE_BYTES;
    char *p = (char *)realloc(b->data, want);
    if (!p) return -1;
    b->data = p;
    b->capacity = want;
    return 0;
}

/* An empty buffer for an expected `bytes` (untouched until written).  A large
 * one asks for huge pages over what it expects to fill (2 MiB pages round
 * the resident size up: not worth it below RF_RESERVE_BYTES). */
static int rf_growbuf_init(rf_growbuf *b, size_t bytes) {
    const size_t cap = bytes < (size_t)RF_RESERVE_BYTES ? (size_t)RF_RESERVE_BYTES : bytes;
    b->data = (char *)malloc(cap);
    b->size = 0;
    b->capacity = b->data ? cap : 0;
    if (!b->data) return -1;
    if (bytes >= (size_t)RF_RESERVE_BYTES) rf_advise_huge(b->data, bytes);
    return 0;
}

struct rf_vocab_task;

/* What the tasks of one build share. */
typedef struct rf_vocab_shared {
    rf_spares spares; /* freed big blocks, for reuse by any task */
    /* the job */
    rf_hstore store;
    int64_t n, P;
    int64_t budget;   /* bytes a grouped task's sets may take */
    uint32_t *rank;   /* rank store, or NULL (no ranks wanted) */
    int64_t rank_gs;
    int strategy;     /* RF_VOCAB_* */
    /* The set capacity at which the first grouped task to fall back gave
     * up, and its estimate of V: later grouped tasks go one grid at a time
     * at once (the grids of one fit are alike).  Only speed depends on it. */
    int64_t fallback_cap;
    double fallback_vest;
    /* commit (under the critical section rf_vocab_commit) */
    struct rf_vocab_task *tasks;
    int64_t n_tasks, head; /* first task not wholly committed */
    int head_q;            /* its grids committed so far */
    int copying;           /* grids being copied outside the lock */
    rf_growbuf keys, dir;  /* the final arrays */
    int64_t *nkeys;        /* per grid */
    int *bits;             /* per grid */
    int commit_failed;
} rf_vocab_shared;

typedef struct rf_vocab_task {
    int64_t p0;        /* first grid */
    int G;             /* number of grids */
    int single;        /* 1: one grid at a time */
    int g;             /* single mode: the grid being built (0..G-1) */
    int sort;          /* single mode: the unit sorts (else: a hash set) */
    int phase;         /* RF_TASK_* of the current unit */
    int live;          /* the current unit's sets / sort buffers exist */
    int ready;         /* grids 0..ready-1 have final keys and directory (under rf_vocab_commit) */
    int status;
    int started;
    int64_t row;       /* next row of the current phase (next run, for RUNS) */
    int64_t total_cap; /* grouped: the sets' capacities together */
    int64_t start_cap; /* capacity the next set unit starts at (a power of two) */
    double v_est;      /* estimated distinct bins per grid (0: unknown) */
    rf_hset sets[RF_GROUP_MAX];
    uint32_t *rk[RF_GROUP_MAX]; /* slot ranks, kept for the RANK phase */
    uint64_t *keys[RF_GROUP_MAX];
    int64_t nkeys[RF_GROUP_MAX];
    uint32_t *dir[RF_GROUP_MAX];
    int bits[RF_GROUP_MAX];
    /* sort unit: pairs S/R (N), scratch T/Q (the longest run), runs */
    uint64_t *S, *T;
    uint32_t *R, *Q;
    int64_t V;
    int64_t run_start[(1 << RF_SORT_TOP_BITS) + 1];
    int64_t run_cur[1 << RF_SORT_TOP_BITS];
} rf_vocab_task;

#ifdef _OPENMP
#define RF_COMMIT_LOCKED _Pragma("omp critical(rf_vocab_commit)")
#else
#define RF_COMMIT_LOCKED
#endif

static void rf_vocab_task_init(rf_vocab_task *t, int64_t p0, int G, rf_vocab_shared *shared, double v_est) {
    (void)shared;
    memset(t, 0, sizeof *t);
    t->p0 = p0;
    t->G = G < RF_GROUP_MAX ? G : RF_GROUP_MAX;
    t->single = t->G == 1;
    t->start_cap = RF_HSET_MIN_CAP;
    t->v_est = v_est;
}

static inline int rf_task_lo(const rf_vocab_task *t) { return t->single ? t->g : 0; }
static inline int rf_task_hi(const rf_vocab_task *t) { return t->single ? t->g + 1 : t->G; }

/* Whether a one-grid unit sorts: when its vocabulary is large enough (see
 * RF_SORT_MIN_V), and sorting (12 bytes a row) takes no more memory than its
 * set would (~32 bytes a bin: table, keys, directory) or than `budget`. */
static int rf_unit_sorts(const rf_vocab_shared *sh, double v_est) {
    if (sh->strategy != RF_VOCAB_AUTO) return sh->strategy == RF_VOCAB_SORT;
    if (v_est < RF_SORT_MIN_V) return 0;
    const double sort_bytes = 12.0 * (double)sh->n, set_bytes = 32.0 * v_est;
    return sort_bytes <= (set_bytes > (double)sh->budget ? set_bytes : (double)sh->budget);
}

/* How to build a group of G grids whose first has about v_est bins: 1 as G
 * one-grid tasks (they sort, or their sets together would outgrow the
 * budget: ~24 bytes a bin), 0 as one grouped task. */
static int rf_plan_split(const rf_vocab_shared *sh, int G, double v_est) {
    if (sh->strategy != RF_VOCAB_AUTO) return 1;
    return rf_unit_sorts(sh, v_est) || (double)G * 24.0 * v_est > (double)sh->budget;
}

static void rf_task_drop_unit(rf_vocab_task *t, rf_spares *sp) {
    for (int g = 0; g < RF_GROUP_MAX; g++) {
        rf_spare_give(sp, t->sets[g].tab);
        t->sets[g].tab = NULL;
        rf_spare_give(sp, t->rk[g]);
        t->rk[g] = NULL;
    }
    rf_spare_give(sp, t->S);
    rf_spare_give(sp, t->R);
    rf_spare_give(sp, t->T);
    rf_spare_give(sp, t->Q);
    t->S = t->T = NULL;
    t->R = t->Q = NULL;
    t->live = 0;
}

/* Everything the task still owns: sets, sort buffers, uncommitted pieces. */
static void rf_vocab_task_free(rf_vocab_task *t) {
    rf_task_drop_unit(t, NULL);
    for (int g = 0; g < RF_GROUP_MAX; g++) {
        rf_big_free(t->keys[g]);
        t->keys[g] = NULL;
        rf_big_free(t->dir[g]);
        t->dir[g] = NULL;
    }
}

/* A unit of task t is final (t may be NULL): append the ready grids at the
 * head, in grid order, to the final arrays; their pieces become spares.
 * Their places are taken under the lock rf_vocab_commit, but the copies
 * (megabytes into fresh pages) run outside it, beside other threads' copies
 * and work.  The arrays grow (and may move) only while no copy is in flight:
 * a thread that needs them larger waits for the copies to end (rare: they
 * are reserved from the planning estimate). */
enum { RF_COMMIT_BATCH = 16 };
static void rf_vocab_commit(rf_vocab_task *done, rf_vocab_shared *sh) {
    for (;;) {
        rf_vocab_task *from[RF_COMMIT_BATCH];
        int qs[RF_COMMIT_BATCH], n_items = 0, again = 0;
        char *kto[RF_COMMIT_BATCH], *dto[RF_COMMIT_BATCH];
        RF_COMMIT_LOCKED
        {
            if (done) done->ready = rf_task_hi(done);
            while (sh->head < sh->n_tasks && !sh->commit_failed) {
                rf_vocab_task *t = &sh->tasks[sh->head];
                if (sh->head_q == t->G) {
                    sh->head++;
                    sh->head_q = 0;
                    continue;
                }
                if (sh->head_q >= t->ready) break;
                if (n_items == RF_COMMIT_BATCH) {
                    again = 1;
                    break;
                }
                const int q = sh->head_q;
                const size_t kb = (size_t)t->nkeys[q] * sizeof(uint64_t);
                const size_t db = (((size_t)1 << t->bits[q]) + 1) * sizeof(uint32_t);
                if (sh->keys.size + kb > sh->keys.capacity || sh->dir.size + db > sh->dir.capacity) {
                    if (sh->copying > 0 || n_items > 0) { /* copies in flight: grow after them */
                        again = 1;
                        break;
                    }
                    if (rf_growbuf_reserve(&sh->keys, sh->keys.size + kb) != 0 ||
                        rf_growbuf_reserve(&sh->dir, sh->dir.size + db) != 0) {
                        sh->commit_failed = 1;
                        break;
                    }
                }
                from[n_items] = t;
                qs[n_items] = q;
                kto[n_items] = sh->keys.data + sh->keys.size;
                dto[n_items] = sh->dir.data + sh->dir.size;
                n_items++;
                sh->keys.size += kb;
                sh->dir.size += db;
                sh->nkeys[t->p0 + q] = t->nkeys[q];
                sh->bits[t->p0 + q] = t->bits[q];
                sh->head_q++;
            }
            sh->copying += n_items;
        }
        done = NULL;
        for (int k = 0; k < n_items; k++) {
            rf_vocab_task *t = from[k];
            const int q = qs[k];
            memcpy(kto[k], t->keys[q], (size_t)t->nkeys[q] * sizeof(uint64_t));
            memcpy(dto[k], t->dir[q], (((size_t)1 << t->bits[q]) + 1) * sizeof(uint32_t));
        }
        if (n_items > 0) {
            RF_COMMIT_LOCKED
            {
                for (int k = 0; k < n_items; k++) {
                    rf_spare_give(&sh->spares, from[k]->keys[qs[k]]);
                    from[k]->keys[qs[k]] = NULL;
                    rf_spare_give(&sh->spares, from[k]->dir[qs[k]]);
                    from[k]->dir[qs[k]] = NULL;
                }
                sh->copying -= n_items;
            }
        }
        if (!again) return;
    }
}

/* The unit's rows are all in its sets: make the grids' keys and directories.
 * A grouped unit keeps its sets, with slot ranks, for the RANK phase (small,
 * in cache: one probe per row); a single grid frees its set at once and
 * ranks by looking up its keys (it is large, so this halves its memory). */
static int rf_task_finish_sets(rf_vocab_task *t, rf_vocab_shared *sh) {
    /* The grids of one task tend to have alike vocabularies: the next grid's
     * set starts at this one's size instead of doubling its way up again. */
    if (t->single) t->start_cap = t->sets[t->g].cap;
    for (int g = rf_task_lo(t); g < rf_task_hi(t); g++) {
        if (rf_hset_finish(&t->sets[g], &sh->spares, &t->keys[g], &t->nkeys[g], &t->dir[g], &t->bits[g],
                           sh->rank && !t->single ? &t->rk[g] : NULL) != 0)
            return -1;
    }
    return 0;
}

/* The unit's grids are final: free its working memory, let them be
 * committed, go on to the next unit. */
static void rf_task_next_unit(rf_vocab_task *t, rf_vocab_shared *sh) {
    rf_task_drop_unit(t, &sh->spares);
    rf_vocab_commit(t, sh);
    t->row = 0;
    if (t->single && t->g + 1 < t->G) {
        t->g++;
        t->phase = RF_TASK_ADD;
    } else {
        t->phase = RF_TASK_DONE;
    }
}

/* Start the current unit: its sets, or (sorting) its run counts. */
static int rf_task_start_unit(rf_vocab_task *t, rf_vocab_shared *sh) {
    const int lo = rf_task_lo(t), hi = rf_task_hi(t);
    t->live = 1;
    t->row = 0;
    t->sort = t->single && rf_unit_sorts(sh, t->v_est);
    if (t->sort) {
        t->phase = RF_TASK_HIST;
        memset(t->run_cur, 0, sizeof t->run_cur);
        return 0;
    }
    t->phase = RF_TASK_ADD;
    for (int g = lo; g < hi; g++)
        if (rf_hset_init(&t->sets[g], t->start_cap, &sh->spares) != 0) return -1;
    t->total_cap = (int64_t)(hi - lo) * t->sets[lo].cap;
    return 0;
}

/* Work on the task until it is done, fails or `deadline` (rf_now) passes.
 * buf: RF_HBLOCK hashes of per-thread scratch.  Returns 1 when done, 0 when
 * there is more, or the (negative) status. */
static int rf_vocab_task_step(rf_vocab_task *t, rf_vocab_shared *sh, double deadline, uint64_t *buf) {
    enum { ROWS = RF_HBLOCK, RUNS = 16 }; /* work between two looks at the clock */
    const rf_hstore *s = &sh->store;
    const int64_t n = sh->n;
    if (!t->started) {
        t->started = 1;
        if (!t->single) {
            int64_t cap;
            double vest;
            RF_SPARES_LOCKED
            {
                cap = sh->fallback_cap;
                vest = sh->fallback_vest;
            }
            if (cap > 0) {
                t->single = 1;
                t->start_cap = cap;
                t->v_est = vest;
            }
        }
    }
    while (t->status == 0 && t->phase != RF_TASK_DONE) {
        const int lo = rf_task_lo(t), hi = rf_task_hi(t);
        if (!t->live && rf_task_start_unit(t, sh) != 0) {
            t->status = -1;
            break;
        }
        const int64_t stop = t->row + ROWS < n ? t->row + ROWS : n, m = stop - t->row;
        if (t->phase == RF_TASK_ADD) {
            int over = 0;
            for (int g = lo; g < hi && !over && t->status == 0; g++) {
                const uint64_t *h = rf_hstore_block(s, t->p0 + g, t->row, stop, buf, 0);
                rf_hset *set = &t->sets[g];
                for (int64_t a = 0; a < m; a++) {
                    const int64_t before = set->cap;
                    if (rf_hset_add(set, h[a], &sh->spares) != 0) {
                        t->status = -1;
                        break;
                    }
                    if (set->cap != before) {
                        t->total_cap += set->cap - before;
                        if (!t->single && t->total_cap * (int64_t)sizeof(uint64_t) > sh->budget) {
                            /* this grid has seen row + a + 1 rows: its estimate of V */
                            t->v_est = (double)(set->count + set->has_zero) * (double)n / (double)(t->row + a + 1);
                            over = 1;
                            break;
                        }
                    }
                }
            }
            if (t->status) break;
            if (over) { /* too large together: start again, one grid at a time */
                for (int g = lo; g < hi; g++)
                    if (t->sets[g].cap > t->start_cap) t->start_cap = t->sets[g].cap;
                RF_SPARES_LOCKED
                {
                    if (sh->fallback_cap == 0) {
                        sh->fallback_cap = t->start_cap;
                        sh->fallback_vest = t->v_est;
                    }
                }
                rf_task_drop_unit(t, &sh->spares);
                t->single = 1;
                t->g = 0;
                continue;
            }
            t->row = stop;
            if (t->row == n) {
                if (rf_task_finish_sets(t, sh) != 0) {
                    t->status = -1;
                    break;
                }
                if (sh->rank != NULL) {
                    t->phase = RF_TASK_RANK;
                    t->row = 0;
                } else {
                    rf_task_next_unit(t, sh);
                }
            }
        } else if (t->phase == RF_TASK_RANK) {
            for (int g = lo; g < hi; g++) {
                const int64_t p = t->p0 + g;
                const uint64_t *h = rf_hstore_block(s, p, t->row, stop, buf, 1);
                uint32_t *rank = sh->rank + p * sh->rank_gs + t->row;
                for (int64_t a = 0; a < m; a++) {
                    const int64_t r = t->single ? rf_vocab_find(h[a], t->keys[g], t->dir[g], t->bits[g])
                                                : rf_hset_rank(&t->sets[g], t->rk[g], h[a]);
                    if (r < 0) t->status = -3;
                    rank[a] = (uint32_t)r;
                }
            }
            t->row = stop;
            if (t->row == n) rf_task_next_unit(t, sh);
        } else if (t->phase == RF_TASK_HIST) {
            const uint64_t *h = rf_hstore_block(s, t->p0 + t->g, t->row, stop, buf, 0);
            int64_t cur[1 << RF_SORT_TOP_BITS];
            memcpy(cur, t->run_cur, sizeof cur);
            for (int64_t a = 0; a < m; a++) cur[h[a] >> (64 - RF_SORT_TOP_BITS)]++;
            memcpy(t->run_cur, cur, sizeof cur);
            t->row = stop;
            if (t->row == n) { /* runs known: the pairs, and scratch for the longest run */
                int64_t longest = 0;
                t->run_start[0] = 0;
                for (int b = 0; b < (1 << RF_SORT_TOP_BITS); b++) {
                    if (t->run_cur[b] > longest) longest = t->run_cur[b];
                    t->run_start[b + 1] = t->run_start[b] + t->run_cur[b];
                    t->run_cur[b] = t->run_start[b];
                }
                const size_t mm = (size_t)(n > 0 ? n : 1), l = (size_t)(longest > 0 ? longest : 1);
                t->S = (uint64_t *)rf_spare_take(&sh->spares, mm * sizeof(uint64_t), 0);
                t->R = (uint32_t *)rf_spare_take(&sh->spares, mm * sizeof(uint32_t), 0);
                t->T = (uint64_t *)rf_spare_take(&sh->spares, l * sizeof(uint64_t), 0);
                t->Q = (uint32_t *)rf_spare_take(&sh->spares, l * sizeof(uint32_t), 0);
                if (!t->S || !t->R || !t->T || !t->Q) {
                    t->status = -1;
                    break;
                }
                t->phase = RF_TASK_SCATTER;
                t->row = 0;
            }
        } else if (t->phase == RF_TASK_SCATTER) {
            const uint64_t *h = rf_hstore_block(s, t->p0 + t->g, t->row, stop, buf, 0);
            uint64_t *RF_RESTRICT S = t->S;
            uint32_t *RF_RESTRICT R = t->R;
            int64_t cur[1 << RF_SORT_TOP_BITS]; /* a local copy: no reloads through t */
            memcpy(cur, t->run_cur, sizeof cur);
            const uint32_t row0 = (uint32_t)t->row;
            for (int64_t a = 0; a < m; a++) {
                const uint64_t k = h[a];
                const int64_t q = cur[k >> (64 - RF_SORT_TOP_BITS)]++;
                S[q] = k;
                R[q] = row0 + (uint32_t)a;
            }
            memcpy(t->run_cur, cur, sizeof cur);
            t->row = stop;
            if (t->row == n) {
                t->phase = RF_TASK_RUNS;
                t->row = 0; /* the next run */
                t->V = 0;
            }
        } else { /* RF_TASK_RUNS */
            const int64_t p = t->p0 + t->g;
            uint32_t *rank = sh->rank ? sh->rank + p * sh->rank_gs : NULL;
            const int64_t b1 = t->row + RUNS < (1 << RF_SORT_TOP_BITS) ? t->row + RUNS : (1 << RF_SORT_TOP_BITS);
            for (int64_t b = t->row; b < b1; b++) {
                const int64_t a0 = t->run_start[b], m = t->run_start[b + 1] - a0;
                if (rf_sort_pairs(t->S + a0, t->R + a0, t->T, t->Q, m, 64 - RF_SORT_TOP_BITS))
                    t->V = rf_sorted_emit(t->S, t->T, t->Q, m, t->V, rank);
                else
                    t->V = rf_sorted_emit(t->S, t->S + a0, t->R + a0, m, t->V, rank);
            }
            t->row = b1;
            if (t->row == (1 << RF_SORT_TOP_BITS)) {
                const int g = t->g;
                rf_spare_give(&sh->spares, t->R); /* before the directory, which may reuse them */
                rf_spare_give(&sh->spares, t->T);
                rf_spare_give(&sh->spares, t->Q);
                t->R = t->Q = NULL;
                t->T = NULL;
                t->dir[g] = rf_sorted_directory(t->S, t->V, &sh->spares, &t->bits[g]);
                if (!t->dir[g]) {
                    t->status = -1;
                    break;
                }
                t->keys[g] = t->S; /* the distinct keys are S[0..V) */
                t->nkeys[g] = t->V;
                t->S = NULL;
                rf_task_next_unit(t, sh);
            }
        }
        if (rf_now() >= deadline) break;
    }
    if (t->status) return t->status;
    return t->phase == RF_TASK_DONE;
}

/* ------------------------------------------------- the floor's sort (bench)
 * LSD radix sort of n 64-bit keys (six passes of 11 bits; the counts of all
 * digits from one read), using tmp (n keys).  Not used by the estimator:
 * bench/binning.py times it as the floor of the vocabulary build. */
static void rf_lsd_sort_u64(uint64_t *keys, uint64_t *tmp, int64_t n) {
    enum { DIGIT = 11, NB = 1 << DIGIT, PASSES = 6 };
    int64_t *cnt = (int64_t *)calloc((size_t)PASSES * NB, sizeof(int64_t));
    if (!cnt) return;
    for (int64_t a = 0; a < n; a++)
        for (int d = 0; d < PASSES; d++) cnt[d * NB + ((keys[a] >> (d * DIGIT)) & (NB - 1))]++;
    uint64_t *src = keys, *dst = tmp;
    for (int d = 0; d < PASSES; d++) {
        int64_t *c = cnt + d * NB, sum = 0;
        for (int j = 0; j < NB; j++) {
            int64_t x = c[j];
            c[j] = sum;
            sum += x;
        }
        for (int64_t a = 0; a < n; a++) dst[c[(src[a] >> (d * DIGIT)) & (NB - 1)]++] = src[a];
        uint64_t *x = src;
        src = dst;
        dst = x;
    }
    free(cnt); /* six passes: the result is back in keys */
}

#endif
