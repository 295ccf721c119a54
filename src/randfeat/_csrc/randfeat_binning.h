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
    (const double *restrict x, int64_t d, int64_t Ppad, const double *restrict U,    \
     const double *restrict INV, uint64_t *restrict h)

RF_INLINE void rf_hash_row_body RF_HASH_ROW_PARAMS {
    for (int64_t p = 0; p < Ppad; p++) h[p] = RF_BIN_SEED;
    for (int64_t m = 0; m < d; m++) {
        const double xm = x[m];
        const double *restrict u = U + m * Ppad;
        const double *restrict iv = INV + m * Ppad;
        for (int64_t p = 0; p < Ppad; p++) {
            uint64_t v = h[p] + (uint64_t)(int64_t)floor((xm - u[p]) * iv[p]);
            v *= RF_BIN_MUL;
            h[p] = v ^ (v >> RF_BIN_SHIFT);
        }
    }
    for (int64_t p = 0; p < Ppad; p++) h[p] = rf_fmix64(h[p]);
}

/* baseline and AVX2 from the generic body; AVX-512 written by hand below */
RF_ISA_CLONE(rf_hash_row, baseline, , RF_HASH_ROW_PARAMS, (x, d, Ppad, U, INV, h))
#if RF_X86_DISPATCH
RF_ISA_CLONE(rf_hash_row, avx2, RF_TARGET_AVX2, RF_HASH_ROW_PARAMS, (x, d, Ppad, U, INV, h))

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
    const double *restrict x, int64_t d, int64_t Ppad, const double *restrict U,
    const double *restrict INV, uint64_t *restrict h, int64_t p0, const int NV) {
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

RF_TARGET_AVX512 static void rf_hash_row_avx512(const double *restrict x, int64_t d,
                                                int64_t Ppad, const double *restrict U,
                                                const double *restrict INV,
                                                uint64_t *restrict h) {
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
static void rf_lookup_row(const uint64_t *restrict h, int64_t P, const uint64_t *restrict keys,
                          const int64_t *restrict koff, const uint32_t *restrict dir,
                          const int64_t *restrict doff, const int *restrict bits,
                          int64_t *restrict cols) {
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
 * Why a set and not sort-unique: its memory is O(V) (distinct bins), not
 * O(N) (rows) per grid in flight, and for the usual V << N it stays in cache.
 * Measured (N=522000, P=50, one thread, shared machine), against NumPy's
 * AVX-512 np.sort + dedup of the same hashes: V=5.3e5 in total (1e4 per
 * grid): set 0.66 s, sort 0.71 s; V=2.6e7 (almost every row its own bin):
 * set 6.5 s, sort 1.0 s.  A radix sort-unique for grids whose set outgrows
 * ~N/8 would fix the second case; not done yet. */
typedef struct {
    uint64_t *tab;
    int64_t cap, count;
    int has_zero;
} rf_hset;

static int rf_hset_init(rf_hset *t) {
    t->cap = 1024;
    t->count = 0;
    t->has_zero = 0;
    t->tab = (uint64_t *)calloc((size_t)t->cap, sizeof(uint64_t));
    return t->tab ? 0 : -1;
}

/* Insert h; returns 0, or -1 if growing ran out of memory. */
static inline int rf_hset_add(rf_hset *t, uint64_t h) {
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
    uint64_t *nt = (uint64_t *)calloc((size_t)ncap, sizeof(uint64_t));
    if (!nt) return -1;
    uint64_t nmask = (uint64_t)ncap - 1;
    for (int64_t q = 0; q < t->cap; q++) {
        uint64_t k = t->tab[q];
        if (k == 0) continue;
        uint64_t jj = k & nmask;
        while (nt[jj] != 0) jj = (jj + 1) & nmask;
        nt[jj] = k;
    }
    free(t->tab);
    t->tab = nt;
    t->cap = ncap;
    return 0;
}

/* The set's values sorted, with their directory; frees the set.  A counting
 * sort on the top bits (the counts are the directory) then an insertion sort
 * inside each bucket (1-2 keys on average): O(V + cap).  Returns 0 or -1. */
static int rf_hset_finish(rf_hset *t, uint64_t **keys_out, int64_t *nkeys_out,
                          uint32_t **dir_out, int *bits_out, uint32_t **slot_rank_out) {
    int64_t V = t->count + t->has_zero;
    int bits = rf_vocab_bits(V);
    int64_t nb = (int64_t)1 << bits;
    uint64_t *keys = (uint64_t *)malloc((size_t)(V > 0 ? V : 1) * sizeof(uint64_t));
    uint32_t *dir = (uint32_t *)calloc((size_t)(nb + 1), sizeof(uint32_t));
    uint32_t *cur = (uint32_t *)malloc((size_t)nb * sizeof(uint32_t));
    if (!keys || !dir || !cur) {
        free(t->tab);
        t->tab = NULL;
        free(keys);
        free(dir);
        free(cur);
        return -1;
    }
    uint64_t *tab = t->tab;
    if (t->has_zero) dir[1]++;
    for (int64_t q = 0; q < t->cap; q++)
        if (tab[q]) dir[rf_vocab_bucket(tab[q], bits) + 1]++;
    for (int64_t j = 0; j < nb; j++) dir[j + 1] += dir[j];
    memcpy(cur, dir, (size_t)nb * sizeof(uint32_t));
    if (t->has_zero) keys[cur[0]++] = 0;
    for (int64_t q = 0; q < t->cap; q++)
        if (tab[q]) keys[cur[rf_vocab_bucket(tab[q], bits)]++] = tab[q];
    free(cur);
    if (!slot_rank_out) {
        free(tab);
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
        uint32_t *rk = (uint32_t *)malloc((size_t)t->cap * sizeof(uint32_t));
        if (!rk) {
            free(tab);
            t->tab = NULL;
            free(keys);
            free(dir);
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

/* Vocabularies of the G grids p0 .. p0+G-1 in one pass over the rows.
 *
 * The hashes are stored row by row (slot i*P + p), so reading one grid means
 * one cache line per row; a group of G neighbouring grids shares those lines,
 * cutting memory traffic G-fold.  Its G sets live together, so if their
 * tables exceed `budget` bytes the group gives up (returns -2, nothing
 * allocated) and the caller builds the grids one at a time: the result is the
 * same either way, only speed and memory differ.  Returns 0, -1 (out of
 * memory) or -2 (over budget); on 0, keys_out[g], nkeys_out[g], dir_out[g],
 * bits_out[g] hold grid p0+g's sorted keys and directory (malloc'd).  If ind
 * is not NULL, each row's rank is then written to ind (see
 * rf_group_write_ranks; -3 if that fails). */
/* Second pass of a group (fit_transform): replace each row's hash of grids
 * p0..p0+G-1 by its rank in that grid's vocabulary, written into the index
 * slot (int32 or int64; it may alias the hash's low half: read, then written).
 * The group's G vocabularies are small enough to stay in cache, which makes
 * this much cheaper than looking every row up in all P vocabularies at once.
 * Returns 0, or -3 if a hash is missing (cannot happen for the rows the
 * vocabularies were built from). */
static int rf_group_write_ranks(const rf_hstore *s, int64_t n, int64_t P, int64_t p0, int G,
                                const rf_hset *sets, uint32_t *const *rk, void *ind,
                                int ind64) {
    int status = 0;
    for (int64_t i = 0; i < n; i++) {
        const int64_t base = i * P + p0;
        for (int g = 0; g < G; g++) {
            int64_t r = rf_hset_rank(&sets[g], rk[g], rf_hstore_get(s, base + g));
            if (r < 0) status = -3;
            if (ind64) ((int64_t *)ind)[base + g] = r;
            else ((int32_t *)ind)[base + g] = (int32_t)r;
        }
    }
    return status;
}

static int rf_grid_vocab_group(const rf_hstore *s, int64_t n, int64_t P, int64_t p0, int G,
                               int64_t budget, uint64_t **keys_out, int64_t *nkeys_out,
                               uint32_t **dir_out, int *bits_out, void *ind, int ind64) {
    enum { GMAX = 16 };
    rf_hset sets[GMAX];
    int status = 0, g, ninit = 0;
    if (G > GMAX) G = GMAX;
    for (g = 0; g < G; g++) {
        if (rf_hset_init(&sets[g]) != 0) {
            status = -1;
            break;
        }
        ninit++;
    }
    int64_t total_cap = (int64_t)G * 1024;
    for (int64_t i = 0; i < n && status == 0; i++) {
        const int64_t base = i * P + p0;
        for (g = 0; g < G; g++) {
            int64_t before = sets[g].cap;
            if (rf_hset_add(&sets[g], rf_hstore_get(s, base + g)) != 0) {
                status = -1;
                break;
            }
            if (sets[g].cap != before) {
                total_cap += sets[g].cap - before;
                if (G > 1 && total_cap * (int64_t)sizeof(uint64_t) > budget) {
                    status = -2;
                    break;
                }
            }
        }
    }
    uint32_t *rk[GMAX] = {NULL};
    for (g = 0; g < ninit; g++) {
        if (status == 0) {
            status = rf_hset_finish(&sets[g], &keys_out[g], &nkeys_out[g], &dir_out[g],
                                    &bits_out[g], ind != NULL ? &rk[g] : NULL);
            if (status == 0) continue;
        }
        free(sets[g].tab);
        sets[g].tab = NULL;
    }
    /* on failure, grids already finished keep their pieces: the caller frees them */
    if (status == 0 && ind != NULL)
        status = rf_group_write_ranks(s, n, P, p0, G, sets, rk, ind, ind64);
    for (g = 0; g < ninit; g++) { /* sets kept for the ranks (tab is NULL if already freed) */
        free(sets[g].tab);
        sets[g].tab = NULL;
        free(rk[g]);
    }
    return status;
}

#endif
