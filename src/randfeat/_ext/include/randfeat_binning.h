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

/* ------------------------------------------------------- vocabulary tasks
 * The vocabularies of the G grids p0 .. p0+G-1 are one task, built in one
 * pass over the rows: the hashes are stored row by row (slot i*P + p), so
 * reading one grid means one cache line per row, and a group of G
 * neighbouring grids shares those lines, cutting memory traffic G-fold.
 *
 * A task is resumable: rf_vocab_task_step works until a deadline and returns,
 * keeping its state, so the caller can check for Ctrl-C between slabs of
 * work and commit finished grids.  Its phases, per unit of work (all G
 * grids together, or one grid at a time, see below):
 *
 *   ADD   every row's hashes go into the unit's hash sets;
 *         then each set is turned into its grid's sorted keys and directory
 *         (rf_hset_finish);
 *   RANK  (fit_transform only) each row's rank within the grid is written
 *         into the index slot (int32 or int64; it may alias the hash's low
 *         half: read, then written), while the unit's vocabularies are still
 *         in cache - much cheaper than looking every row up in all P
 *         vocabularies at once;
 *   (the unit's keys and directories are then final and no longer read:
 *   `ready` counts the grids the caller may take)
 *   DONE
 *
 * The G sets of a grouped task live together; if their tables exceed
 * `budget` bytes the task drops them and builds its grids one at a time
 * (single mode).  The result is the same either way (a grid's vocabulary is
 * its set of distinct hashes, sorted): only speed and memory differ.
 * Status: 0, -1 out of memory, -3 a training hash missing from its own
 * vocabulary (a bug). */
enum { RF_GROUP_MAX = 16, RF_HSET_MIN_CAP = 1024 };
enum { RF_TASK_ADD = 0, RF_TASK_RANK = 1, RF_TASK_DONE = 2 };

/* What the tasks of one build share: spare blocks (see rf_spares), and the
 * set capacity at which the first grouped task to fall back gave up, so
 * that tasks starting later go one grid at a time at once (the grids of one
 * fit are alike) instead of repeating the lost pass.  Only speed depends on
 * it: a grid's vocabulary is the same in either mode. */
typedef struct rf_vocab_shared {
    rf_spares spares;
    int64_t fallback_cap; /* 0: no task has fallen back (yet) */
} rf_vocab_shared;

typedef struct {
    int64_t p0;        /* first grid */
    int G;             /* number of grids */
    int single;        /* 1: one grid at a time */
    int g;             /* single mode: the grid being built (0..G-1) */
    int phase;         /* RF_TASK_* of the current unit */
    int live;          /* the current unit's sets exist */
    int ready;         /* grids 0..ready-1 have final keys and directory */
    int status;
    int64_t row;       /* next row of the current phase */
    int64_t total_cap; /* grouped: the sets' capacities together */
    int64_t start_cap; /* capacity the next unit's sets start at (a power of two) */
    int started;
    struct rf_vocab_shared *shared;
    rf_hset sets[RF_GROUP_MAX];
    uint32_t *rk[RF_GROUP_MAX];  /* slot ranks, kept for the RANK phase */
    uint64_t *keys[RF_GROUP_MAX];
    int64_t nkeys[RF_GROUP_MAX];
    uint32_t *dir[RF_GROUP_MAX];
    int bits[RF_GROUP_MAX];
} rf_vocab_task;

static void rf_vocab_task_init(rf_vocab_task *t, int64_t p0, int G, rf_vocab_shared *shared) {
    memset(t, 0, sizeof *t);
    t->shared = shared;
    t->p0 = p0;
    t->G = G < RF_GROUP_MAX ? G : RF_GROUP_MAX;
    t->single = t->G == 1;
    t->start_cap = RF_HSET_MIN_CAP;
}

static inline int rf_task_lo(const rf_vocab_task *t) { return t->single ? t->g : 0; }
static inline int rf_task_hi(const rf_vocab_task *t) { return t->single ? t->g + 1 : t->G; }

static void rf_task_drop_sets(rf_vocab_task *t) {
    for (int g = 0; g < RF_GROUP_MAX; g++) {
        rf_spare_give(&t->shared->spares, t->sets[g].tab);
        t->sets[g].tab = NULL;
        rf_spare_give(&t->shared->spares, t->rk[g]);
        t->rk[g] = NULL;
    }
    t->live = 0;
}

/* Everything the task still owns: sets and the pieces not taken by the caller. */
static void rf_vocab_task_free(rf_vocab_task *t) {
    rf_task_drop_sets(t);
    for (int g = 0; g < RF_GROUP_MAX; g++) {
        rf_big_free(t->keys[g]);
        t->keys[g] = NULL;
        rf_big_free(t->dir[g]);
        t->dir[g] = NULL;
    }
}

/* The caller has copied grid g's keys and directory: their blocks become spares. */
static void rf_vocab_task_release(rf_vocab_task *t, int g) {
    rf_spare_give(&t->shared->spares, t->keys[g]);
    t->keys[g] = NULL;
    rf_spare_give(&t->shared->spares, t->dir[g]);
    t->dir[g] = NULL;
}

/* The unit's rows are all in its sets: make the grids' keys and directories.
 * A grouped unit keeps its sets, with slot ranks, for the RANK phase (small,
 * in cache: one probe per row); a single grid frees its set at once and
 * ranks by looking up its keys (it is large, so this halves its memory). */
static int rf_task_finish_unit(rf_vocab_task *t, int ranks) {
    /* The grids of one task tend to have alike vocabularies: the next grid's
     * set starts at this one's size instead of doubling its way up again. */
    if (t->single) t->start_cap = t->sets[t->g].cap;
    for (int g = rf_task_lo(t); g < rf_task_hi(t); g++) {
        if (rf_hset_finish(&t->sets[g], &t->shared->spares, &t->keys[g], &t->nkeys[g], &t->dir[g], &t->bits[g],
                           ranks && !t->single ? &t->rk[g] : NULL) != 0)
            return -1;
    }
    return 0;
}

static void rf_task_next_unit(rf_vocab_task *t) {
    rf_task_drop_sets(t);
    t->ready = rf_task_hi(t); /* the unit's keys are no longer read: the caller may take them */
    t->row = 0;
    if (t->single && t->g + 1 < t->G) {
        t->g++;
        t->phase = RF_TASK_ADD;
    } else {
        t->phase = RF_TASK_DONE;
    }
}

/* Work on the task until it is done, fails or `deadline` (rf_now) passes.
 * Returns 1 when done, 0 when there is more, or the (negative) status. */
static int rf_vocab_task_step(rf_vocab_task *t, const rf_hstore *s, int64_t n, int64_t P,
                              int64_t budget, void *ind, int ind64, double deadline) {
    enum { ROWS = 4096 }; /* rows between two looks at the clock */
    if (!t->started) {
        t->started = 1;
        int64_t cap = 0;
        if (!t->single) {
            RF_SPARES_LOCKED
            cap = t->shared->fallback_cap;
        }
        if (cap > 0) {
            t->single = 1;
            t->start_cap = cap;
        }
    }
    while (t->status == 0 && t->phase != RF_TASK_DONE) {
        const int lo = rf_task_lo(t), hi = rf_task_hi(t);
        if (!t->live) {
            for (int g = lo; g < hi; g++)
                if (rf_hset_init(&t->sets[g], t->start_cap, &t->shared->spares) != 0) t->status = -1;
            t->live = 1;
            t->total_cap = (int64_t)(hi - lo) * t->sets[lo].cap;
            if (t->status) break;
        }
        const int64_t stop = t->row + ROWS < n ? t->row + ROWS : n;
        if (t->phase == RF_TASK_ADD) {
            int over = 0;
            for (int64_t i = t->row; i < stop && !over && t->status == 0; i++) {
                const int64_t base = i * P + t->p0;
                for (int g = lo; g < hi; g++) {
                    int64_t before = t->sets[g].cap;
                    if (rf_hset_add(&t->sets[g], rf_hstore_get(s, base + g), &t->shared->spares) != 0) {
                        t->status = -1;
                        break;
                    }
                    if (t->sets[g].cap != before) {
                        t->total_cap += t->sets[g].cap - before;
                        if (!t->single && t->total_cap * (int64_t)sizeof(uint64_t) > budget) {
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
                    if (t->shared->fallback_cap == 0) t->shared->fallback_cap = t->start_cap;
                }
                rf_task_drop_sets(t);
                t->single = 1;
                t->g = 0;
                t->row = 0;
                continue;
            }
            t->row = stop;
            if (t->row == n) {
                if (rf_task_finish_unit(t, ind != NULL) != 0) {
                    t->status = -1;
                    break;
                }
                if (ind != NULL) {
                    t->phase = RF_TASK_RANK;
                    t->row = 0;
                } else {
                    rf_task_next_unit(t);
                }
            }
        } else { /* RF_TASK_RANK */
            for (int64_t i = t->row; i < stop; i++) {
                const int64_t base = i * P + t->p0;
                for (int g = lo; g < hi; g++) {
                    const uint64_t h = rf_hstore_get(s, base + g);
                    int64_t r = t->single ? rf_vocab_find(h, t->keys[g], t->dir[g], t->bits[g])
                                          : rf_hset_rank(&t->sets[g], t->rk[g], h);
                    if (r < 0) t->status = -3;
                    if (ind64) ((int64_t *)ind)[base + g] = r;
                    else ((int32_t *)ind)[base + g] = (int32_t)r;
                }
            }
            t->row = stop;
            if (t->row == n) rf_task_next_unit(t);
        }
        if (rf_now() >= deadline) break;
    }
    if (t->status) return t->status;
    return t->phase == RF_TASK_DONE;
}

#endif
