/* Flush-to-zero for the kernels (fpmode.h). */
#include "fpmode.h"

#include "parallel.h"

#if defined(__x86_64__) || defined(__SSE__)
#include <xmmintrin.h>
#define RP_FLUSH_BITS 0x8040ull /* MXCSR: FTZ (bit 15), DAZ (bit 6) */
static unsigned long long fp_get(void) { return _mm_getcsr(); }
static void fp_set(unsigned long long v) { _mm_setcsr((unsigned)v); }
#elif defined(__aarch64__)
#define RP_FLUSH_BITS (1ull << 24) /* FPCR.FZ: inputs and results */
static unsigned long long fp_get(void)
{
    unsigned long long v;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(v));
    return v;
}
static void fp_set(unsigned long long v) { __asm__ __volatile__("msr fpcr, %0" : : "r"(v)); }
#else
#define RP_FLUSH_BITS 0ull
static unsigned long long fp_get(void) { return 0; }
static void fp_set(unsigned long long v) { (void)v; }
#endif

/* The flush bits of every thread of the pool (the caller's included) set to `bits`. */
static void fp_pool(unsigned long long bits)
{
    fp_set((fp_get() & ~RP_FLUSH_BITS) | bits);
#ifdef _OPENMP
    int n = rp_max_threads();
    if (n > 1 && !omp_in_parallel()) {
#pragma omp parallel num_threads(n)
        fp_set((fp_get() & ~RP_FLUSH_BITS) | bits);
    }
#endif
}

rp_fpmode rp_fp_flush_begin(void)
{
    rp_fpmode m = {fp_get()};
    if ((m.saved & RP_FLUSH_BITS) != RP_FLUSH_BITS) fp_pool(RP_FLUSH_BITS);
    return m;
}

void rp_fp_flush_end(rp_fpmode m)
{
    if ((m.saved & RP_FLUSH_BITS) != RP_FLUSH_BITS) fp_pool(m.saved & RP_FLUSH_BITS);
}
