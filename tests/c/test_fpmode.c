/* rp_fp_flush_begin / rp_fp_flush_end (core/sys/fpmode.h): inside the scope a float result below
 * 2^-126 is zero and a subnormal input reads as zero, in the calling thread and in every OpenMP
 * thread; outside it (before, after, and in the pool's threads after the end) IEEE's gradual
 * underflow holds again. The reference is the arithmetic itself: 1e-30f * 1e-10f is 1e-40, a
 * subnormal, under IEEE 754 and 0 when results are flushed. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "fpmode.h"
#include "parallel.h"

#if defined(__x86_64__) || defined(__aarch64__)
#define FLUSHES 1
#else
#define FLUSHES 0
#endif

/* a * b computed at run time (volatile: not folded by the compiler, which rounds as IEEE does) */
static float mul(float a, float b)
{
    volatile float x = a, y = b;
    return x * y;
}

/* 2^-133, a subnormal, built from its bits */
static float subnormal(void)
{
    uint32_t bits = 1u << 13;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* threads of a parallel region of n whose a * b is zero */
static int zeros_in_pool(int n, float a, float b)
{
    int zeros = mul(a, b) == 0.0f;
#ifdef _OPENMP
    zeros = 0;
#pragma omp parallel num_threads(n) reduction(+ : zeros)
    zeros += mul(a, b) == 0.0f;
#else
    (void)n;
#endif
    return zeros;
}

int main(void)
{
    int n = 1;
#ifdef _OPENMP
    omp_set_num_threads(4);
    n = 4;
#endif
    const float a = 1e-30f, b = 1e-10f, s = subnormal();
    CHECK(mul(a, b) > 0.0f && mul(a, b) < 1.2e-38f, "before: 1e-30 * 1e-10 is a subnormal, got %g",
          (double)mul(a, b));
    CHECK(mul(s, 1e10f) > 0.0f, "before: a subnormal input is read as itself");
    CHECK(zeros_in_pool(n, a, b) == 0, "before: no thread flushes");

    rp_fpmode outer = rp_fp_flush_begin();
    if (FLUSHES) {
        CHECK(mul(a, b) == 0.0f, "inside: a subnormal result is zero, got %g", (double)mul(a, b));
        CHECK(mul(s, 1e10f) == 0.0f, "inside: a subnormal input reads as zero, got %g",
              (double)mul(s, 1e10f));
        CHECK(mul(2e-19f, 1e-19f) > 1.9e-38f, "inside: a normal result (2e-38) is kept");
        CHECK(zeros_in_pool(n, a, b) == n, "inside: every thread of the pool flushes (%d of %d)",
              zeros_in_pool(n, a, b), n);
        rp_fpmode inner = rp_fp_flush_begin();
        rp_fp_flush_end(inner);
        CHECK(mul(a, b) == 0.0f, "a nested scope's end leaves the outer scope's mode");
        CHECK(zeros_in_pool(n, a, b) == n, "... in every thread");
    } else {
        printf("test_fpmode: this processor has no flush mode in fpmode.c: nothing flushes\n");
        CHECK(mul(a, b) > 0.0f, "without a flush mode the scope changes nothing");
    }
    rp_fp_flush_end(outer);
    CHECK(mul(a, b) > 0.0f, "after: gradual underflow again, got %g", (double)mul(a, b));
    CHECK(mul(s, 1e10f) > 0.0f, "after: a subnormal input is read as itself");
    CHECK(zeros_in_pool(n, a, b) == 0, "after: the pool's threads are set back (%d flush)",
          zeros_in_pool(n, a, b));
    return check_summary("test_fpmode");
}
