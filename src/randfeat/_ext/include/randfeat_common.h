/* What every randfeat C header shares: the inline macro, the `restrict`
 * spelling, a monotonic clock, and the one scheme by which a kernel picks
 * its vector code path at run time.
 *
 * Runtime dispatch.  Wheels are compiled for baseline x86-64 (SSE2) so they
 * run on any x86-64.  A hot function is compiled a second and third time with
 * the RF_TARGET_* attributes and chosen once, at import:
 *
 *   - write its body once as an RF_INLINE function NAME_body, or write the
 *     variants NAME_baseline / NAME_avx2 / NAME_avx512 by hand;
 *   - RF_ISA_CLONES(NAME, PARAMS, ARGS) makes the three variants from the body;
 *   - RF_ISA_POINTER(NAME, PARAMS) declares the function pointer NAME that the
 *     kernels call (the baseline variant until it is set);
 *   - the module's init function runs RF_ISA_PICK(NAME, isa) with
 *     isa = rf_detect_isa(), once.
 *
 * The environment variable RANDFEAT_VECTOR_ISA=baseline|avx2|avx512 lowers the
 * path (never above what the CPU supports), so tests can exercise every path
 * on one CPU; unknown values are rejected by the Python layer
 * (randfeat._core.vector_isa) before any module is imported.
 */
#ifndef RANDFEAT_COMMON_H
#define RANDFEAT_COMMON_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(_WIN32)
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>
#elif defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#define RF_HAVE_MMAP 1
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

/* C99 `restrict`, spelled __restrict by MSVC's C mode and by C++ compilers.
 * A macro of our own rather than redefining the keyword, which would break
 * MSVC's system headers (they use __declspec(restrict)). */
#if defined(__cplusplus) || defined(_MSC_VER)
#define RF_RESTRICT __restrict
#else
#define RF_RESTRICT restrict
#endif

/* A small function that must be inlined (hot inner loops, bodies that are
 * compiled once per vector path and need compile-time widths). */
#if defined(__GNUC__) || defined(__clang__)
#define RF_INLINE static inline __attribute__((always_inline))
#elif defined(_MSC_VER)
#define RF_INLINE static __forceinline
#else
#define RF_INLINE static inline
#endif

#if defined(__GNUC__) || defined(__clang__)
#define RF_PREFETCH(addr) __builtin_prefetch((const void *)(addr))
#else
#define RF_PREFETCH(addr) ((void)0)
#endif

/* Seconds on a monotonic clock (wall time under OpenMP).  Used only to size
 * the slabs between signal checks, never to decide a result. */
#ifdef _OPENMP
static inline double rf_now(void) { return omp_get_wtime(); }
#else
static inline double rf_now(void) { return (double)clock() / CLOCKS_PER_SEC; }
#endif

/* --------------------------------------------------------- large buffers
 * rf_big_calloc / rf_big_free: zero-filled buffers; from 256 KiB up they come
 * straight from the OS (mmap / VirtualAlloc) and go back to it when freed.
 * Why: glibc's malloc raises its mmap threshold each time a large block is
 * freed and then serves later large blocks from its heaps, where freed
 * memory often stays resident (one heap per thread).  The binning vocabulary
 * allocates and frees many multi-MB hash tables and pieces; through malloc
 * its peak memory was a third higher (measured, N = 200000, P = 30).  Under
 * AddressSanitizer everything goes through calloc so that it is checked. */
#if defined(__SANITIZE_ADDRESS__)
#define RF_BIG_FROM_OS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RF_BIG_FROM_OS 0
#endif
#endif
#ifndef RF_BIG_FROM_OS
#if defined(_WIN32) || defined(RF_HAVE_MMAP)
#define RF_BIG_FROM_OS 1
#else
#define RF_BIG_FROM_OS 0
#endif
#endif

enum { RF_BIG_MIN = 256 * 1024, RF_BIG_HEADER = 64 }; /* header keeps 64-byte alignment */

/* The header holds the usable size, then the mapped size (0: from calloc). */
static void *rf_big_calloc(size_t count, size_t size) {
    if (size != 0 && count > ((size_t)-1 - RF_BIG_HEADER) / size) return NULL;
    size_t usable = count * size, total = usable + RF_BIG_HEADER;
    char *base = NULL;
    size_t mapped = 0;
#if RF_BIG_FROM_OS
    if (total >= RF_BIG_MIN) {
#if defined(_WIN32)
        base = (char *)VirtualAlloc(NULL, total, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
#else
        void *m = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        base = m == MAP_FAILED ? NULL : (char *)m;
#endif
        if (base == NULL) return NULL;
        mapped = total;
    }
#endif
    if (base == NULL) {
        base = (char *)calloc(1, total);
        if (base == NULL) return NULL;
    }
    memcpy(base, &usable, sizeof usable);
    memcpy(base + sizeof usable, &mapped, sizeof mapped);
    return base + RF_BIG_HEADER;
}

/* Usable bytes of a block from rf_big_calloc. */
static inline size_t rf_big_size(const void *p) {
    size_t usable;
    memcpy(&usable, (const char *)p - RF_BIG_HEADER, sizeof usable);
    return usable;
}

static void rf_big_free(void *p) {
    if (p == NULL) return;
    char *base = (char *)p - RF_BIG_HEADER;
    size_t mapped;
    memcpy(&mapped, base + sizeof(size_t), sizeof mapped);
    if (mapped == 0) {
        free(base);
        return;
    }
#if RF_BIG_FROM_OS
#if defined(_WIN32)
    VirtualFree(base, 0, MEM_RELEASE);
#else
    munmap(base, mapped);
#endif
#endif
}

/* ------------------------------------------------------------ spare blocks
 * rf_spares: freed big blocks kept, up to `limit` bytes, for the next
 * allocations of the threads of one kernel call (shared; a lock guards it).
 * Why: a block fresh from the OS costs a page fault per 4 KiB on first touch
 * and an munmap when freed, and both take the process's memory-map lock, so
 * threads that allocate and free multi-MB tables serialise on it (measured:
 * the binning vocabulary was no faster on 2 threads than on 1).  Spare
 * blocks are already resident; `limit` bounds what they add to the peak.
 * Blocks under RF_BIG_MIN go straight back to calloc/free. */
enum { RF_SPARES = 16 };
typedef struct {
    void *blk[RF_SPARES];
    size_t held;  /* bytes in blk */
    size_t limit; /* most bytes kept */
} rf_spares;

#ifdef _OPENMP
#define RF_SPARES_LOCKED _Pragma("omp critical(rf_spares)")
#else
#define RF_SPARES_LOCKED
#endif

/* A block of at least `bytes` (zero-filled if `zero`): the smallest spare
 * that fits, else a new one.  NULL if out of memory.  s may be NULL. */
static void *rf_spare_take(rf_spares *s, size_t bytes, int zero) {
    void *p = NULL;
    if (s != NULL && bytes >= RF_BIG_MIN) {
        RF_SPARES_LOCKED
        {
            int best = -1;
            for (int i = 0; i < RF_SPARES; i++)
                if (s->blk[i] && rf_big_size(s->blk[i]) >= bytes &&
                    (best < 0 || rf_big_size(s->blk[i]) < rf_big_size(s->blk[best])))
                    best = i;
            if (best >= 0) {
                p = s->blk[best];
                s->blk[best] = NULL;
                s->held -= rf_big_size(p);
            }
        }
    }
    if (p == NULL) return rf_big_calloc(bytes, 1);
    if (zero) memset(p, 0, bytes);
    return p;
}

/* Give p (from rf_spare_take or rf_big_calloc, or NULL) back: kept as a
 * spare if there is room (a larger block may push out smaller ones), else
 * freed.  s may be NULL. */
static void rf_spare_give(rf_spares *s, void *p) {
    if (p == NULL) return;
    size_t size = rf_big_size(p);
    if (s == NULL || size < RF_BIG_MIN || size > s->limit) {
        rf_big_free(p);
        return;
    }
    void *evicted[RF_SPARES];
    int n_evicted = 0;
    RF_SPARES_LOCKED
    {
        for (;;) { /* make room: drop the smallest spares smaller than p */
            int slot = -1, empty = -1;
            for (int i = 0; i < RF_SPARES; i++) {
                if (s->blk[i] == NULL) empty = i;
                else if (slot < 0 || rf_big_size(s->blk[i]) < rf_big_size(s->blk[slot])) slot = i;
            }
            if (empty >= 0 && s->held + size <= s->limit) {
                s->blk[empty] = p;
                s->held += size;
                p = NULL;
                break;
            }
            if (slot < 0 || rf_big_size(s->blk[slot]) >= size) break;
            s->held -= rf_big_size(s->blk[slot]);
            evicted[n_evicted++] = s->blk[slot];
            s->blk[slot] = NULL;
        }
    }
    for (int i = 0; i < n_evicted; i++) rf_big_free(evicted[i]);
    rf_big_free(p); /* NULL if kept */
}

/* Free every spare (no thread may be using s). */
static void rf_spares_free(rf_spares *s) {
    for (int i = 0; i < RF_SPARES; i++) {
        rf_big_free(s->blk[i]);
        s->blk[i] = NULL;
    }
    s->held = 0;
}

/* ------------------------------------------------------------- dispatch */
enum { RF_ISA_BASELINE = 0, RF_ISA_AVX2 = 1, RF_ISA_AVX512 = 2 };

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__) && !defined(_MSC_VER)
#define RF_X86_DISPATCH 1
#define RF_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define RF_TARGET_AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")))
#else
#define RF_X86_DISPATCH 0
#define RF_TARGET_AVX2
#define RF_TARGET_AVX512
#endif

static int rf_hardware_isa(void) {
#if RF_X86_DISPATCH
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("fma"))
        return RF_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return RF_ISA_AVX2;
#endif
    return RF_ISA_BASELINE;
}

/* The path to use: the hardware's best, lowered by RANDFEAT_VECTOR_ISA. */
static int rf_detect_isa(void) {
    int hw = rf_hardware_isa();
    const char *env = getenv("RANDFEAT_VECTOR_ISA");
    int want = hw;
    if (env != NULL) {
        if (strcmp(env, "baseline") == 0) want = RF_ISA_BASELINE;
        else if (strcmp(env, "avx2") == 0) want = RF_ISA_AVX2;
        else if (strcmp(env, "avx512") == 0) want = RF_ISA_AVX512;
    }
    return want < hw ? want : hw;
}

static const char *rf_isa_name(int isa) {
    switch (isa) {
        case RF_ISA_AVX512: return "avx512";
        case RF_ISA_AVX2: return "avx2";
        default: return "baseline";
    }
}

/* One variant of NAME: a function with the given target attribute whose
 * body is the always-inline NAME_body (void functions only). */
#define RF_ISA_CLONE(NAME, SUFFIX, TARGET, PARAMS, ARGS) \
    TARGET static void NAME##_##SUFFIX PARAMS { NAME##_body ARGS; }

#if RF_X86_DISPATCH
#define RF_ISA_CLONES(NAME, PARAMS, ARGS)                      \
    RF_ISA_CLONE(NAME, baseline, , PARAMS, ARGS)               \
    RF_ISA_CLONE(NAME, avx2, RF_TARGET_AVX2, PARAMS, ARGS)     \
    RF_ISA_CLONE(NAME, avx512, RF_TARGET_AVX512, PARAMS, ARGS)
#define RF_ISA_PICK(NAME, isa)                                                  \
    (NAME = (isa) == RF_ISA_AVX512 ? NAME##_avx512                              \
          : (isa) == RF_ISA_AVX2   ? NAME##_avx2                                \
                                   : NAME##_baseline)
#else
#define RF_ISA_CLONES(NAME, PARAMS, ARGS) RF_ISA_CLONE(NAME, baseline, , PARAMS, ARGS)
#define RF_ISA_PICK(NAME, isa) ((void)(isa), NAME = NAME##_baseline)
#endif

/* The pointer the kernels call; set by RF_ISA_PICK in the module's init. */
#define RF_ISA_POINTER(NAME, PARAMS) static void(*NAME) PARAMS = NAME##_baseline;

#endif
