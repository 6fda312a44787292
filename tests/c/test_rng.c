/* rp_rng (core/tensor/rng.h): known answers and statistical sanity checks.
 *
 * The known answers come from an independent Python implementation of the specification:
 *   seed: x = seed; for i in 0..3: x += 0x9E3779B97F4A7C15; z = x;
 *         z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9; z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
 *         s[i] = z ^ (z >> 31)                                        (splitmix64)
 *   next: result = rotl(s[1] * 5, 7) * 9; t = s[1] << 17; s[2] ^= s[0]; s[3] ^= s[1];
 *         s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t; s[3] = rotl(s[3], 45)   (xoshiro256**)
 *   uniform = (u64 >> 11) * 2^-53
 *   int(lo, hi): range = hi - lo + 1 (uint64; 0 means the full 64-bit range: the raw u64);
 *         threshold = (-range) % range; draw r until r >= threshold; lo + r % range
 *   normal: Marsaglia polar; the second deviate of a pair is kept as the spare.
 *   jump: t = 0; for each word j of {0x180ec6d33cfd0aba, 0xd5a61266f0c9392c, 0xa9582618e03fc9aa,
 *         0x39abdc4529b1661c}, for bit b = 0..63: if j >> b & 1: t ^= s; next(); then s = t
 *         (xoshiro256's jump, 2^128 draws)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "rp.h"

#define S(...) CHECK_SHAPE(__VA_ARGS__)

static const uint64_t seeds[3] = {0, 1, ((uint64_t)1 << 63) + 5};

static void test_known_answers(void)
{
    /* splitmix64 state after seeding (seed 0 gives the well-known 0xe220a8397b1dcdaf first) */
    const uint64_t state[3][4] = {
        {0xe220a8397b1dcdafULL, 0x6e789e6aa1b965f4ULL, 0x06c45d188009454fULL, 0xf88bb8a8724c81ecULL},
        {0x910a2dec89025cc1ULL, 0xbeeb8da1658eec67ULL, 0xf893a2eefb32555eULL, 0x71c18690ee42c90bULL},
        {0x54a64d19d7534f30ULL, 0x122f831fdb27d31fULL, 0x46a5e4f0bd582c07ULL, 0x39d296e2ad6189c5ULL},
    };
    const uint64_t u64[3][6] = {
        {0x99ec5f36cb75f2b4ULL, 0xbf6e1f784956452aULL, 0x1a5f849d4933e6e0ULL, 0x6aa594f1262d2d2cULL,
         0xbba5ad4a1f842e59ULL, 0xffef8375d9ebcacaULL},
        {0xb3f2af6d0fc710c5ULL, 0x853b559647364ceaULL, 0x92f89756082a4514ULL, 0x642e1c7bc266a3a7ULL,
         0xb27a48e29a233673ULL, 0x24c123126ffda722ULL},
        {0x2d064cc3000e3b15ULL, 0xe1c6ae926d7b8400ULL, 0x212465571f7c88ecULL, 0x5fba95c989727ed4ULL,
         0x7fb15b82d0250d17ULL, 0xea678a6df8ea2977ULL},
    };
    const double uni[3][4] = {
        {0x1.33d8be6d96ebep-1, 0x1.7edc3ef092ac8p-1, 0x1.a5f849d4933e0p-4, 0x1.aa9653c498b4ap-2},
        {0x1.67e55eda1f8e2p-1, 0x1.0a76ab2c8e6c9p-1, 0x1.25f12eac10548p-1, 0x1.90b871ef099a8p-2},
        {0x1.683266180071cp-3, 0x1.c38d5d24daf70p-1, 0x1.09232ab8fbe44p-3, 0x1.7eea572625c9ep-2},
    };
    const double nrm[3][5] = {
        {0x1.323a82a4bc9e5p-1, 0x1.76a54f2c0effap+0, -0x1.ca445408b789ap-1, -0x1.81270d2ddbad5p-3,
         -0x1.3532999190f0ap+1},
        {0x1.e267c87ac62ebp+0, 0x1.84abd879d0e18p-3, 0x1.4d55c9633557cp+0, -0x1.e8d0b0399ee9cp+0,
         0x1.c0d732ae4b3ddp-2},
        {-0x1.dfbd74b962647p-1, -0x1.466b9e4bb548cp-2, -0x1.455405643f3ccp-9, 0x1.b82c739fb8120p-1,
         -0x1.5b34d7e886ec7p-1},
    };
    for (int s = 0; s < 3; s++) {
        rp_rng r;
        rp_rng_seed(&r, seeds[s]);
        CHECK(memcmp(r.s, state[s], sizeof r.s) == 0 && r.has_spare == 0,
              "seed %#llx: state %016llx %016llx %016llx %016llx", (unsigned long long)seeds[s],
              (unsigned long long)r.s[0], (unsigned long long)r.s[1], (unsigned long long)r.s[2],
              (unsigned long long)r.s[3]);
        for (int i = 0; i < 6; i++) {
            uint64_t got = rp_rng_u64(&r);
            CHECK(got == u64[s][i], "seed %#llx: u64 #%d = %#018llx, want %#018llx",
                  (unsigned long long)seeds[s], i, (unsigned long long)got,
                  (unsigned long long)u64[s][i]);
        }
        rp_rng_seed(&r, seeds[s]);
        for (int i = 0; i < 4; i++) {
            double got = rp_rng_uniform(&r);
            CHECK(got == uni[s][i], "seed %#llx: uniform #%d = %a, want %a",
                  (unsigned long long)seeds[s], i, got, uni[s][i]);
        }
        rp_rng_seed(&r, seeds[s]);
        double got[5];
        for (int i = 0; i < 5; i++) got[i] = rp_rng_normal(&r);
        char label[64];
        snprintf(label, sizeof label, "seed %#llx: first 5 normals", (unsigned long long)seeds[s]);
        /* sqrt and log come from libm: allow a few ulps */
        CHECK_CLOSE(got, nrm[s], 5, 1e-14, label);
    }

    /* a mixed sequence of calls on seed 42 */
    rp_rng r;
    rp_rng_seed(&r, 42);
    int64_t i0 = rp_rng_int(&r, 0, 9), i1 = rp_rng_int(&r, -5, 5), i2 = rp_rng_int(&r, 7, 7);
    CHECK(i0 == 2 && i1 == 2 && i2 == 7, "seed 42: int(0,9) int(-5,5) int(7,7) = %lld %lld %lld, want 2 2 7",
          (long long)i0, (long long)i1, (long long)i2);
    double n0 = rp_rng_normal(&r), n1 = rp_rng_normal(&r);
    CHECK(fabs(n0 - 0x1.df16ccfa4d2a1p-1) < 1e-14 && fabs(n1 - 0x1.856dd7819a9ebp-1) < 1e-14,
          "seed 42: normal, spare = %.17g %.17g, want %.17g %.17g", n0, n1, 0x1.df16ccfa4d2a1p-1,
          0x1.856dd7819a9ebp-1);
    int64_t i3 = rp_rng_int(&r, 0, INT64_MAX), i4 = rp_rng_int(&r, INT64_MIN, INT64_MAX);
    CHECK(i3 == INT64_C(6456516188463038599) && i4 == INT64_C(-4401865723017206658),
          "seed 42: int(0,MAX) int(MIN,MAX) = %lld %lld", (long long)i3, (long long)i4);
    double u0 = rp_rng_uniform(&r), n2 = rp_rng_normal(&r);
    CHECK(u0 == 0x1.2aacc2beeebf7p-1 && fabs(n2 - 0x1.02007c2380aeap+0) < 1e-14,
          "seed 42: uniform, normal = %a %a", u0, n2);

    /* the rejection loop: range 2^63 + 1, threshold 2^63 - 1 rejects about half the draws */
    rp_rng_seed(&r, 42);
    const int64_t rej[6] = {INT64_C(3321214725393783199), INT64_C(7834202072327348383),
                            INT64_C(9072180941210541666), INT64_C(4975814793210974774),
                            INT64_C(4044606872079424944), INT64_C(6456516188463038597)};
    for (int i = 0; i < 6; i++) {
        int64_t got = rp_rng_int(&r, -1, INT64_MAX);
        CHECK(got == rej[i], "seed 42: int(-1, INT64_MAX) #%d = %lld, want %lld", i,
              (long long)got, (long long)rej[i]);
    }
    rp_rng_seed(&r, 7);
    const int64_t d10[12] = {4, 4, 8, 4, 4, 1, 6, 6, 8, 9, 3, 6};
    for (int i = 0; i < 12; i++) {
        int64_t got = rp_rng_int(&r, 0, 9);
        CHECK(got == d10[i], "seed 7: int(0,9) #%d = %lld, want %lld", i, (long long)got,
              (long long)d10[i]);
    }
    rp_rng_seed(&r, 7);
    const int64_t neg[6] = {-328428221, -227795196, -879680465, -429465238, -621506868, -863302641};
    for (int i = 0; i < 6; i++) {
        int64_t got = rp_rng_int(&r, -1000000007, 3);
        CHECK(got == neg[i], "seed 7: int(-1000000007, 3) #%d = %lld, want %lld", i,
              (long long)got, (long long)neg[i]);
    }
    /* ranges at the ends of int64 (lo + r % range must not overflow: UBSan checks it) */
    rp_rng_seed(&r, 3);
    const int64_t lo_off[4] = {8, 0, 5, 2}, hi_off[4] = {3, 2, 1, 1};
    for (int i = 0; i < 4; i++) {
        int64_t got = rp_rng_int(&r, INT64_MIN, INT64_MIN + 9);
        CHECK(got == INT64_MIN + lo_off[i], "seed 3: int(MIN, MIN+9) #%d = MIN + %llu, want MIN + %lld",
              i, (unsigned long long)((uint64_t)got - (uint64_t)INT64_MIN), (long long)lo_off[i]);
    }
    for (int i = 0; i < 4; i++) {
        int64_t got = rp_rng_int(&r, INT64_MAX - 9, INT64_MAX);
        CHECK(got == INT64_MAX - hi_off[i], "seed 3: int(MAX-9, MAX) #%d = MAX - %llu, want MAX - %lld",
              i, (unsigned long long)((uint64_t)INT64_MAX - (uint64_t)got), (long long)hi_off[i]);
    }
}

static void test_streams(void)
{
    rp_rng a, b;
    rp_rng_seed(&a, 123);
    rp_rng_seed(&b, 123);
    int same = 1;
    for (int i = 0; i < 1000; i++) same &= rp_rng_u64(&a) == rp_rng_u64(&b);
    CHECK(same, "same seed, same stream");
    rp_rng_seed(&b, 124);
    int differ = 0;
    for (int i = 0; i < 100; i++) differ += rp_rng_u64(&a) != rp_rng_u64(&b);
    CHECK(differ > 95, "seeds 123 and 124 differ (%d of 100 draws)", differ);

    /* reseeding restarts */
    uint64_t first[10];
    rp_rng_seed(&a, 99);
    for (int i = 0; i < 10; i++) first[i] = rp_rng_u64(&a);
    for (int i = 0; i < 37; i++) (void)rp_rng_normal(&a);
    rp_rng_seed(&a, 99);
    same = 1;
    for (int i = 0; i < 10; i++) same &= rp_rng_u64(&a) == first[i];
    CHECK(same, "reseeding restarts the stream");

    /* reseeding clears the spare normal */
    rp_rng_seed(&a, 5);
    double n1 = rp_rng_normal(&a);
    CHECK(a.has_spare == 1, "a spare is kept after the first normal");
    rp_rng_seed(&a, 5);
    CHECK(a.has_spare == 0, "seed clears has_spare");
    double n2 = rp_rng_normal(&a);
    CHECK(n1 == n2, "first normal after reseeding: %.17g, want %.17g (not the old spare)", n2, n1);

    /* the spare: the second normal consumes no raw draws */
    rp_rng_seed(&a, 5);
    rp_rng_seed(&b, 5);
    (void)rp_rng_normal(&a);
    (void)rp_rng_normal(&a);
    (void)rp_rng_normal(&b);
    CHECK(rp_rng_u64(&a) == rp_rng_u64(&b), "the second normal of a pair is the spare");

    /* int(lo, lo) runs the rejection loop once, so it consumes one draw */
    rp_rng_seed(&a, 11);
    rp_rng_seed(&b, 11);
    int64_t k = rp_rng_int(&a, 7, 7);
    (void)rp_rng_u64(&b);
    CHECK(k == 7 && rp_rng_u64(&a) == rp_rng_u64(&b), "int(7, 7) = %lld and consumes one draw",
          (long long)k);
    /* the full range returns the raw draw */
    rp_rng_seed(&a, 11);
    rp_rng_seed(&b, 11);
    same = 1;
    for (int i = 0; i < 100; i++) same &= (uint64_t)rp_rng_int(&a, INT64_MIN, INT64_MAX) == rp_rng_u64(&b);
    CHECK(same, "int(INT64_MIN, INT64_MAX) is the raw u64");
}

static void test_int_ranges(void)
{
    const int64_t ranges[][2] = {
        {0, 0},          {5, 5},         {-3, 3},        {0, 1},
        {INT64_MIN, INT64_MIN},          {INT64_MAX, INT64_MAX},
        {INT64_MIN, INT64_MAX},          {0, INT64_MAX}, {INT64_MIN, -1},
        {INT64_MIN, 0},  {-1, INT64_MAX}, {INT64_MIN + 1, INT64_MAX},
        {-1000, 1000000000000LL},
    };
    rp_rng r;
    rp_rng_seed(&r, 2024);
    for (size_t c = 0; c < sizeof ranges / sizeof ranges[0]; c++) {
        int64_t lo = ranges[c][0], hi = ranges[c][1];
        int ok = 1;
        int64_t mn = INT64_MAX, mx = INT64_MIN;
        for (int i = 0; i < 20000; i++) {
            int64_t v = rp_rng_int(&r, lo, hi);
            ok &= v >= lo && v <= hi;
            mn = v < mn ? v : mn;
            mx = v > mx ? v : mx;
        }
        CHECK(ok, "int(%lld, %lld) stays in range (saw %lld .. %lld)", (long long)lo,
              (long long)hi, (long long)mn, (long long)mx);
        /* small ranges are covered completely; for huge ones the extremes of 20000 draws lie
         * within 0.1% of the ends */
        uint64_t width = (uint64_t)hi - (uint64_t)lo;
        if (width < 16)
            CHECK(mn == lo && mx == hi, "int(%lld, %lld) hits both ends (saw %lld .. %lld)",
                  (long long)lo, (long long)hi, (long long)mn, (long long)mx);
        else
            CHECK((uint64_t)mn - (uint64_t)lo < width / 1000 && (uint64_t)hi - (uint64_t)mx < width / 1000,
                  "int(%lld, %lld) spreads over the range (saw %lld .. %lld)", (long long)lo,
                  (long long)hi, (long long)mn, (long long)mx);
    }
}

static void test_distributions(void)
{
    rp_rng r;
    rp_rng_seed(&r, 31337);
    /* chi-square of int(0, 9): 9 degrees of freedom, mean 9, sd 4.2; 40 is p < 1e-5 */
    int64_t counts[10] = {0};
    const int n = 100000;
    for (int i = 0; i < n; i++) counts[rp_rng_int(&r, 0, 9)]++;
    double chi2 = 0;
    for (int k = 0; k < 10; k++) {
        double d = (double)counts[k] - n / 10.0;
        chi2 += d * d / (n / 10.0);
    }
    printf("  int(0,9) x %d: chi-square %.2f (9 dof)\n", n, chi2);
    CHECK(chi2 < 40.0, "chi-square of int(0,9) = %.2f", chi2);

    /* uniform: in [0, 1), mean 1/2 (sd of the mean 0.0009), variance 1/12 */
    double s = 0, s2 = 0, umin = 1, umax = 0;
    for (int i = 0; i < n; i++) {
        double u = rp_rng_uniform(&r);
        s += u;
        s2 += u * u;
        umin = u < umin ? u : umin;
        umax = u > umax ? u : umax;
    }
    double mean = s / n, var = s2 / n - mean * mean;
    printf("  uniform x %d: mean %.5f var %.5f min %.3g max %.9f\n", n, mean, var, umin, umax);
    CHECK(umin >= 0.0 && umax < 1.0, "uniform in [0, 1): %g .. %.17g", umin, umax);
    CHECK(fabs(mean - 0.5) < 0.005 && fabs(var - 1.0 / 12.0) < 0.003,
          "uniform mean %.5f var %.5f", mean, var);

    /* normal: 200000 draws; sd of the mean 0.0022, of the variance 0.0032, of the 4th moment
     * 0.022; the bounds are about 5 sd */
    const int nn = 200000;
    double m1 = 0, m2 = 0, m4 = 0;
    int within1 = 0;
    for (int i = 0; i < nn; i++) {
        double x = rp_rng_normal(&r);
        m1 += x;
        m2 += x * x;
        m4 += x * x * x * x;
        within1 += fabs(x) < 1.0;
    }
    m1 /= nn;
    m2 /= nn;
    m4 /= nn;
    double frac1 = (double)within1 / nn;
    printf("  normal x %d: mean %.5f E[x^2] %.5f E[x^4] %.4f P(|x|<1) %.5f\n", nn, m1, m2, m4,
           frac1);
    CHECK(fabs(m1) < 0.011, "normal mean %.5f", m1);
    CHECK(fabs(m2 - 1.0) < 0.016, "normal variance %.5f", m2);
    CHECK(fabs(m4 - 3.0) < 0.11, "normal 4th moment %.4f", m4);
    CHECK(fabs(frac1 - 0.682689) < 0.006, "normal P(|x| < 1) = %.5f", frac1);
}

static void test_fill(void)
{
    /* fill_* on a transposed tensor go in row-major index order of the view */
    rp_tensor base = check_new(2, S(4, 6)), t;
    CHECK_STATUS(rp_tensor_transpose(&t, &base, 0, 1), RP_OK, NULL); /* [6 x 4], strides (1, 6) */
    float got[24];
    double want[24];
    rp_rng a, b;

    rp_rng_seed(&a, 77);
    rp_rng_seed(&b, 77);
    rp_rng_fill_uniform(&a, &t, -2.0, 3.0);
    check_gather(got, &t);
    int in_range = 1;
    for (int i = 0; i < 24; i++) {
        want[i] = -2.0 + 5.0 * rp_rng_uniform(&b);
        in_range &= got[i] >= -2.0f && got[i] <= 3.0f;
    }
    /* float rounding of a value up to 3: 2.4e-7 */
    CHECK_CLOSE(got, want, 24, 5e-7, "fill_uniform(-2, 3) on a transposed tensor = draws in order");
    CHECK(in_range, "fill_uniform values in [-2, 3]");
    CHECK(rp_rng_u64(&a) == rp_rng_u64(&b), "fill_uniform consumed one draw per element");

    rp_rng_seed(&a, 78);
    rp_rng_seed(&b, 78);
    rp_rng_fill_normal(&a, &t, 1.0, 0.5);
    check_gather(got, &t);
    for (int i = 0; i < 24; i++) want[i] = 1.0 + 0.5 * rp_rng_normal(&b);
    CHECK_CLOSE(got, want, 24, 1e-6, "fill_normal(1, 0.5) on a transposed tensor = draws in order");
    /* 24 normals are 12 pairs: no spare is left over on either side */
    CHECK(rp_rng_u64(&a) == rp_rng_u64(&b), "fill_normal consumed the same draws");

    rp_rng_seed(&a, 79);
    rp_rng_seed(&b, 79);
    rp_rng_fill_int(&a, &t, -3, 7);
    check_gather(got, &t);
    for (int i = 0; i < 24; i++) want[i] = (double)rp_rng_int(&b, -3, 7);
    CHECK_CLOSE(got, want, 24, 0.0, "fill_int(-3, 7) on a transposed tensor = draws in order");
    CHECK(rp_rng_u64(&a) == rp_rng_u64(&b), "fill_int consumed the same draws");

    /* a narrowed view: only its elements change */
    rp_tensor_fill(&base, -100.0f);
    rp_tensor nv;
    CHECK_STATUS(rp_tensor_narrow(&nv, &base, 1, 2, 3), RP_OK, NULL);
    rp_rng_seed(&a, 80);
    rp_rng_seed(&b, 80);
    rp_rng_fill_uniform(&a, &nv, 0.0, 1.0);
    float all[24];
    memcpy(all, rp_tensor_data(&base), sizeof all);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 6; j++)
            want[i * 6 + j] = (j >= 2 && j < 5) ? (double)(float)rp_rng_uniform(&b) : -100.0;
    CHECK_CLOSE(all, want, 24, 1.2e-7, "fill_uniform of a narrowed view");
    rp_tensor_release(&nv);
    rp_tensor_release(&t);
    rp_tensor_release(&base);
}

/* The inverse of an odd x modulo 2^64 (Newton's iteration: each step doubles the bits). */
static uint64_t inverse_odd(uint64_t x)
{
    uint64_t y = x; /* right to 3 bits for odd x */
    for (int i = 0; i < 5; i++) y *= 2 - x * y;
    return y;
}

/* A generator whose next rp_rng_u64 is out: xoshiro256** outputs rotl(s[1] * 5, 7) * 9, so
 * s[1] = rotr(out / 9, 7) / 5 (mod 2^64); the other words matter only after that draw. */
static rp_rng next_draw(uint64_t out)
{
    rp_rng r = {{1, 0, 2, 3}, 0.0, 0};
    uint64_t y = out * inverse_odd(9);
    r.s[1] = ((y >> 7) | (y << 57)) * inverse_odd(5);
    return r;
}

/* fill_uniform keeps [lo, hi) in float32: the largest double draw, 1 - 2^-53, rounds to 1.0f as
 * a float and is stored as the float below 1 (and below 3 for [-2, 3)); a draw far from hi is
 * stored as it rounds. */
static void test_fill_uniform_top(void)
{
    rp_rng r = next_draw(UINT64_MAX);
    CHECK(rp_rng_uniform(&r) == 1.0 - 0x1.0p-53, "the crafted state draws 1 - 2^-53");
    rp_tensor t = check_new(1, S(1));
    float *v = rp_tensor_data(&t);
    r = next_draw(UINT64_MAX);
    rp_rng_fill_uniform(&r, &t, 0.0, 1.0);
    CHECK(v[0] < 1.0f && v[0] == nextafterf(1.0f, 0.0f), "fill_uniform(0, 1) of the top draw: %.9g",
          (double)v[0]);
    r = next_draw(UINT64_MAX);
    rp_rng_fill_uniform(&r, &t, -2.0, 3.0);
    CHECK(v[0] < 3.0f && v[0] == nextafterf(3.0f, 0.0f), "fill_uniform(-2, 3) of the top draw: %.9g",
          (double)v[0]);
    r = next_draw((uint64_t)1 << 63); /* 0.5 exactly */
    rp_rng_fill_uniform(&r, &t, 0.0, 1.0);
    CHECK(v[0] == 0.5f, "fill_uniform(0, 1) of the draw 0.5: %.9g", (double)v[0]);
    rp_tensor_release(&t);
}

/* rp_rng_jump: known answers of the reference (seed 42, jumped once and twice), the spare is
 * dropped, and consecutive jumps give streams that do not repeat one another's start. */
static void test_jump(void)
{
    rp_rng r;
    rp_rng_seed(&r, 42);
    CHECK(rp_rng_u64(&r) == 0x15780b2e0c2ec716ULL, "seed 42: first draw");
    const uint64_t want[2][3] = {
        {0x50086ef83cbf4f4aULL, 0xba285ec21347d703ULL, 0x5ea1247b4dc6452aULL},
        {0x8677623ee7544e81ULL, 0x1f591f213a3cb979ULL, 0xbee76be78f4bfe6dULL},
    };
    for (int j = 1; j <= 2; j++) {
        rp_rng_seed(&r, 42);
        for (int i = 0; i < j; i++) rp_rng_jump(&r);
        int ok = 1;
        for (int i = 0; i < 3; i++) ok &= rp_rng_u64(&r) == want[j - 1][i];
        CHECK(ok, "seed 42 jumped %d times: the reference draws", j);
    }
    rp_rng_seed(&r, 7);
    (void)rp_rng_normal(&r);
    CHECK(r.has_spare == 1, "a spare before the jump");
    rp_rng_jump(&r);
    CHECK(r.has_spare == 0, "the jump drops the spare");
    /* the jump does not depend on draws made before it only through the state: jumping after
     * k draws = k draws after jumping (the jump commutes with the step) */
    rp_rng a, b;
    rp_rng_seed(&a, 9);
    rp_rng_seed(&b, 9);
    for (int i = 0; i < 5; i++) (void)rp_rng_u64(&a);
    rp_rng_jump(&a);
    rp_rng_jump(&b);
    for (int i = 0; i < 5; i++) (void)rp_rng_u64(&b);
    CHECK(memcmp(a.s, b.s, sizeof a.s) == 0, "jump then 5 draws = 5 draws then jump");
}

int main(void)
{
    test_known_answers();
    test_streams();
    test_jump();
    test_int_ranges();
    test_distributions();
    test_fill();
    test_fill_uniform_top();
    return check_summary("test_rng");
}
