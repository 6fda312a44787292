/* Vectors of floats for the hand-written kernels (tile.c, attention.c, linear_attention.c),
 * internal to core/.
 *
 * RP_VL floats per vector: 16 with AVX-512, 8 with AVX, else 4 (SSE, NEON, plain) — the widest the
 * compiler targets (-march=native). The vector type is the GNU C vector extension (gcc, clang);
 * loads, stores and splats, the fused multiply-add, the lane-wise maximum and the horizontal
 * reductions use the target's intrinsics where it has them (unaligned loads and stores: no
 * alignment needed), else plain code (memcpy for loads and stores). ISO C mode never contracts
 * a * b + c into an FMA, so rp_vfma is the only way to get one. */
#ifndef RP_SIMD_H
#define RP_SIMD_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__AVX512F__)
#define RP_VL 16
#elif defined(__AVX__)
#define RP_VL 8
#else
#define RP_VL 4
#endif

#if defined(__AVX__) || defined(__SSE__)
#include <immintrin.h>
#endif
/* aarch64 (and 32-bit ARM with NEON): 4 lanes, NEON's fused multiply-add and maximum. */
#if defined(__ARM_NEON)
#include <arm_neon.h>
#endif

typedef float rp_vf __attribute__((vector_size(RP_VL * sizeof(float))));

/* a * b + c for floats with the rounding of rp_vfma: one (fmaf) where the target has FMA, two
 * otherwise (a software fmaf would be slow). */
#ifdef FP_FAST_FMAF
#define rp_fmadd(a, b, c) fmaf((a), (b), (c))
#else
#define rp_fmadd(a, b, c) ((a) * (b) + (c))
#endif

/* n rounded up to a multiple of RP_VL. */
static inline int64_t rp_vl_round(int64_t n) { return (n + RP_VL - 1) / RP_VL * RP_VL; }

/* Loads, stores and splats go through the target's intrinsics (unaligned forms), not memcpy and
 * element loops: GCC's tunings for Intel's AVX-512 cores (skylake-avx512 to sapphirerapids, and
 * rocketlake, which -march=native names on some Xeons) prefer 256-bit vectors and then split a
 * 64-byte memcpy into two 32-byte moves through the stack, which made every kernel several times
 * slower than under -march=x86-64-v4; the intrinsics compile to one vmovups / vbroadcastss
 * whatever the tuning. */
static inline rp_vf rp_vload(const float *p)
{
#if RP_VL == 16
    return (rp_vf)_mm512_loadu_ps(p);
#elif RP_VL == 8
    return (rp_vf)_mm256_loadu_ps(p);
#elif defined(__SSE__)
    return (rp_vf)_mm_loadu_ps(p);
#else
    rp_vf v;
    memcpy(&v, p, sizeof v);
    return v;
#endif
}

static inline void rp_vstore(float *p, rp_vf v)
{
#if RP_VL == 16
    _mm512_storeu_ps(p, (__m512)v);
#elif RP_VL == 8
    _mm256_storeu_ps(p, (__m256)v);
#elif defined(__SSE__)
    _mm_storeu_ps(p, (__m128)v);
#else
    memcpy(p, &v, sizeof v);
#endif
}

static inline rp_vf rp_vsplat(float a)
{
#if RP_VL == 16
    return (rp_vf)_mm512_set1_ps(a);
#elif RP_VL == 8
    return (rp_vf)_mm256_set1_ps(a);
#else
    return (rp_vf){a, a, a, a};
#endif
}

/* a * b + c, one rounding where the target has FMA. */
static inline rp_vf rp_vfma(rp_vf a, rp_vf b, rp_vf c)
{
#if RP_VL == 16
    return (rp_vf)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
#elif RP_VL == 8 && defined(__FMA__)
    return (rp_vf)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
#elif RP_VL == 4 && defined(__FMA__)
    return (rp_vf)_mm_fmadd_ps((__m128)a, (__m128)b, (__m128)c);
#elif RP_VL == 4 && defined(__ARM_NEON) && defined(__ARM_FEATURE_FMA)
    /* fmla (aarch64 always has it; GCC defines FP_FAST_FMAF there, so rp_fmadd is fmaf too) */
    return (rp_vf)vfmaq_f32((float32x4_t)c, (float32x4_t)a, (float32x4_t)b);
#else
    return a * b + c;
#endif
}

/* Lane-wise maximum (for lanes holding NaN the result is unspecified, as with maxps). */
static inline rp_vf rp_vmax(rp_vf a, rp_vf b)
{
#if RP_VL == 16
    return (rp_vf)_mm512_max_ps((__m512)a, (__m512)b);
#elif RP_VL == 8
    return (rp_vf)_mm256_max_ps((__m256)a, (__m256)b);
#elif defined(__SSE__)
    return (rp_vf)_mm_max_ps((__m128)a, (__m128)b);
#elif RP_VL == 4 && defined(__ARM_NEON)
    return (rp_vf)vmaxq_f32((float32x4_t)a, (float32x4_t)b);
#else
    rp_vf r;
    for (int i = 0; i < RP_VL; i++) r[i] = a[i] > b[i] ? a[i] : b[i];
    return r;
#endif
}

/* The largest lane. */
static inline float rp_vhmax(rp_vf v)
{
#if RP_VL == 16
    return _mm512_reduce_max_ps((__m512)v);
#elif RP_VL == 8
    __m128 m = _mm_max_ps(_mm256_castps256_ps128((__m256)v), _mm256_extractf128_ps((__m256)v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
#else
    float r = v[0];
    for (int i = 1; i < RP_VL; i++) r = v[i] > r ? v[i] : r;
    return r;
#endif
}

/* The sum of the lanes, in a fixed order for a given build (a tree over the halves). */
static inline float rp_vhsum(rp_vf v)
{
#if RP_VL == 16
    return _mm512_reduce_add_ps((__m512)v);
#elif RP_VL == 8
    __m128 s = _mm_add_ps(_mm256_castps256_ps128((__m256)v), _mm256_extractf128_ps((__m256)v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
#else
    return (v[0] + v[2]) + (v[1] + v[3]);
#endif
}

#if defined(__AVX__)
/* An 8 x 8 block of floats transposed through registers: t[j] = (row[0][col + j], ...,
 * row[7][col + j]) for j = 0 .. 7 (8 loads, 24 shuffles; the values are only moved). */
static inline void rp_transpose8(__m256 t[8], const float *const row[8], int64_t col)
{
    __m256 a0 = _mm256_loadu_ps(row[0] + col), a1 = _mm256_loadu_ps(row[1] + col);
    __m256 a2 = _mm256_loadu_ps(row[2] + col), a3 = _mm256_loadu_ps(row[3] + col);
    __m256 a4 = _mm256_loadu_ps(row[4] + col), a5 = _mm256_loadu_ps(row[5] + col);
    __m256 a6 = _mm256_loadu_ps(row[6] + col), a7 = _mm256_loadu_ps(row[7] + col);
    __m256 b0 = _mm256_unpacklo_ps(a0, a1), b1 = _mm256_unpackhi_ps(a0, a1);
    __m256 b2 = _mm256_unpacklo_ps(a2, a3), b3 = _mm256_unpackhi_ps(a2, a3);
    __m256 b4 = _mm256_unpacklo_ps(a4, a5), b5 = _mm256_unpackhi_ps(a4, a5);
    __m256 b6 = _mm256_unpacklo_ps(a6, a7), b7 = _mm256_unpackhi_ps(a6, a7);
    __m256 c0 = _mm256_shuffle_ps(b0, b2, 0x44), c1 = _mm256_shuffle_ps(b0, b2, 0xEE);
    __m256 c2 = _mm256_shuffle_ps(b1, b3, 0x44), c3 = _mm256_shuffle_ps(b1, b3, 0xEE);
    __m256 c4 = _mm256_shuffle_ps(b4, b6, 0x44), c5 = _mm256_shuffle_ps(b4, b6, 0xEE);
    __m256 c6 = _mm256_shuffle_ps(b5, b7, 0x44), c7 = _mm256_shuffle_ps(b5, b7, 0xEE);
    t[0] = _mm256_permute2f128_ps(c0, c4, 0x20), t[1] = _mm256_permute2f128_ps(c1, c5, 0x20);
    t[2] = _mm256_permute2f128_ps(c2, c6, 0x20), t[3] = _mm256_permute2f128_ps(c3, c7, 0x20);
    t[4] = _mm256_permute2f128_ps(c0, c4, 0x31), t[5] = _mm256_permute2f128_ps(c1, c5, 0x31);
    t[6] = _mm256_permute2f128_ps(c2, c6, 0x31), t[7] = _mm256_permute2f128_ps(c3, c7, 0x31);
}
#endif

/* The constants of rp_exp_nonpos and rp_vexp_nonpos: the polynomial's coefficients (P0 the
 * coefficient of r^2), ln2 in two parts (-hi + lo), log2(e), and the bits of 87.0f. */
#define RP_EXP_P5 1.9875691500e-4f
#define RP_EXP_P4 1.3981999507e-3f
#define RP_EXP_P3 8.3334519073e-3f
#define RP_EXP_P2 4.1665795894e-2f
#define RP_EXP_P1 1.6666665459e-1f
#define RP_EXP_P0 5.0000001201e-1f
#define RP_EXP_LN2_LO 2.12194440e-4f
#define RP_EXP_MLN2_HI (-0.693359375f)
#define RP_EXP_LOG2E 1.44269504088896341f
#define RP_EXP_MAG87 0x42AE0000u

/* e^x for x <= 0, in float, without a libm call so that the loops around it vectorize (glibc's
 * expf is scalar); attention.c's softmax and linear_attention.c's phi use it. Cephes' expf: x = k ln2 + r with |r| <= ln2/2 (ln2 split in two so that k ln2
 * is exact), e^r by a degree-5 minimax polynomial in r (times r^2, plus 1 + r), times 2^k built
 * from its bits; the multiply-adds fused where the target has FMA (rp_fmadd). Checked against exp() in
 * double for every float in [-87, 0], with and without FMA: relative error at most 8.4e-8
 * (glibc's expf: 6.0e-8). |x| is clamped at 87 (e^-87 ~ 1.6e-38, the bottom of the
 * normal range; below that a probability is 0 for every purpose); the clamp works on the bits
 * because a float compare-and-select may trap and blocks vectorization without
 * -fno-trapping-math. NaN (and -inf, from infinite inputs) give NaN. A positive x is taken as
 * -x: callers pass x <= 0 only. */
static inline float rp_exp_nonpos(float x)
{
    union {
        float f;
        uint32_t u;
    } c;
    c.f = x;
    uint32_t mag = c.u & 0x7FFFFFFFu;                  /* |x|; NaN has the largest magnitudes */
    mag = mag < RP_EXP_MAG87 ? mag : RP_EXP_MAG87;     /* min(|x|, 87) */
    c.u = mag | 0x80000000u;
    float xc = c.f;                                    /* -min(|x|, 87) */
    /* round(xc / ln2) by the 1.5 * 2^23 trick (exact for |value| < 2^22) */
    float kf = (xc * RP_EXP_LOG2E + 12582912.0f) - 12582912.0f;
    float r = rp_fmadd(kf, RP_EXP_LN2_LO, rp_fmadd(kf, RP_EXP_MLN2_HI, xc));
    float p = RP_EXP_P5;
    p = rp_fmadd(p, r, RP_EXP_P4);
    p = rp_fmadd(p, r, RP_EXP_P3);
    p = rp_fmadd(p, r, RP_EXP_P2);
    p = rp_fmadd(p, r, RP_EXP_P1);
    p = rp_fmadd(p, r, RP_EXP_P0);
    float e = rp_fmadd(p, r * r, r) + 1.0f;
    union {
        int32_t i;
        float f;
    } two_k;
    two_k.i = ((int32_t)kf + 127) * (1 << 23); /* kf in [-126, 0]: a normal power of two */
    return e * two_k.f + (x - x);              /* + 0, or NaN for NaN and -inf (no branch) */
}

/* Lanes of 32-bit integers beside rp_vf (same size: a cast between the two keeps the bits). */
typedef int32_t rp_vi __attribute__((vector_size(RP_VL * sizeof(int32_t))));

/* rp_exp_nonpos lane by lane, by the same operations in the same order (each lane's bits are
 * the scalar function's; test_attention checks it over [-87, 0] and the edges), for loops that
 * fuse the exponential with other work on the same vector. */
static inline rp_vf rp_vexp_nonpos(rp_vf x)
{
    const rp_vi lim = (rp_vi){0} + 0x42AE0000;
    rp_vi mag = (rp_vi)x & 0x7FFFFFFF;
    rp_vi lt = mag < lim; /* all ones where |x| < 87 */
    mag = (mag & lt) | (lim & ~lt);
    rp_vf xc = (rp_vf)(mag | INT32_MIN);
    rp_vf kf = (xc * RP_EXP_LOG2E + 12582912.0f) - 12582912.0f;
    rp_vf r = rp_vfma(kf, rp_vsplat(RP_EXP_LN2_LO), rp_vfma(kf, rp_vsplat(RP_EXP_MLN2_HI), xc));
    rp_vf p = rp_vsplat(RP_EXP_P5);
    p = rp_vfma(p, r, rp_vsplat(RP_EXP_P4));
    p = rp_vfma(p, r, rp_vsplat(RP_EXP_P3));
    p = rp_vfma(p, r, rp_vsplat(RP_EXP_P2));
    p = rp_vfma(p, r, rp_vsplat(RP_EXP_P1));
    p = rp_vfma(p, r, rp_vsplat(RP_EXP_P0));
    rp_vf e = rp_vfma(p, r * r, r) + 1.0f;
    rp_vi two_k = (__builtin_convertvector(kf, rp_vi) + 127) * (1 << 23);
    return e * (rp_vf)two_k + (x - x);
}

/* Prefetches the n floats at p, one prefetch per 64-byte line (write: 1 for a row about to be
 * updated): for the kernels' strided rows (a head's slice of q, k, v, their gradients), each a
 * line or two 512 bytes or more from the last, which the hardware prefetchers fetch late. */
static inline void rp_prefetch_row(const float *p, int64_t n, int write)
{
#ifdef __GNUC__
    for (int64_t i = 0; i < n; i += 16) {
        if (write) __builtin_prefetch(p + i, 1);
        else __builtin_prefetch(p + i, 0);
    }
#else
    (void)p, (void)n, (void)write;
#endif
}

#endif
