/* Runtime choice of the vector code path for hand-written kernels.
 *
 * Wheels are compiled for baseline x86-64 (SSE2) so they run on any x86-64.
 * Hot functions are compiled a second and third time with the attributes
 * below and chosen once, at import, by rf_detect_isa().  The environment
 * variable RANDFEAT_VECTOR_ISA=baseline|avx2|avx512 forces a path (never one
 * above what the CPU supports), so tests can exercise every path on one CPU.
 * Unknown values are rejected by the Python layer (randfeat._dispatch).
 */
#ifndef RANDFEAT_DISPATCH_H
#define RANDFEAT_DISPATCH_H

#include <stdlib.h>
#include <string.h>

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

#endif
