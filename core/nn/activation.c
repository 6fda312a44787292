/* Elementwise layers: ReLU, GELU (exact erf form, vectorised), residual add, inverted dropout. */
#include "layers.h"
#include "parallel.h"

#include <stdint.h>
#include <string.h>

/* Elementwise loops go parallel only when n is large enough to pay for the thread start-up. */
#define ACT_PAR_MIN 65536

typedef union {
    float f;
    uint32_t u;
} act_bits;

/* All ones where x <= 0 (-0, +0 and the negative numbers down to -inf), else 0 (x > 0 and every
 * NaN): the test on the bits, which vectorises (a float compare-and-select does not without
 * -fno-trapping-math, and as a branch it mispredicts on random signs). */
static inline uint32_t relu_off(float x)
{
    act_bits b = {.f = x};
    return 0u - ((uint32_t)(b.u == 0u) | (uint32_t)(b.u - 0x80000000u <= 0x7F800000u));
}

/* v where x > 0 or x is NaN, else +0 (v = x: the forward; v = dout: the backward's term). */
static inline float relu_pass(float v, float x)
{
    act_bits b = {.f = v};
    b.u &= ~relu_off(x);
    return b.f;
}

/* x <= 0 ? 0 : x, written so that a NaN input stays NaN (NaN checks keep working). */
void rp_relu_forward(float *out, const float *inp, int64_t n)
{
    RP_PARALLEL_FOR_SIMD(n >= ACT_PAR_MIN)
    for (int64_t i = 0; i < n; i++) out[i] = relu_pass(inp[i], inp[i]);
}

/* Gradient dout where inp > 0 (and where inp is NaN), 0 where inp <= 0 (0 at inp = 0, as torch). */
void rp_relu_backward(float *dinp, const float *dout, const float *inp, int64_t n)
{
    RP_PARALLEL_FOR_SIMD(n >= ACT_PAR_MIN)
    for (int64_t i = 0; i < n; i++) dinp[i] += relu_pass(dout[i], inp[i]);
}

/* 0 + the term, as the accumulating entry computes it on a zeroed dinp (so a -0 term gives +0
 * there too); element i is read before it is written, so dinp may be dout. */
void rp_relu_backward_set(float *dinp, const float *dout, const float *inp, int64_t n)
{
    RP_PARALLEL_FOR_SIMD(n >= ACT_PAR_MIN)
    for (int64_t i = 0; i < n; i++) dinp[i] = 0.0f + relu_pass(dout[i], inp[i]);
}

/* Most columns one task of rp_relu_backward_set_bias sums (double accumulators on the stack:
 * 4 KB). */
#define ACT_COLS_MAX 512

/* Column blocks over the OpenMP threads (rp_col_block), each task going down all rows of its
 * columns, so every column's sum keeps its order whatever the thread count. */
void rp_relu_backward_set_bias(float *dinp, float *db, const float *dout, const float *inp,
                               int64_t N, int64_t F)
{
    int64_t cb = rp_col_block(F, ACT_COLS_MAX);
    int64_t nblocks = (F + cb - 1) / cb;
    RP_PARALLEL_FOR(N * F >= ACT_PAR_MIN)
    for (int64_t blk = 0; blk < nblocks; blk++) {
        int64_t c0 = blk * cb;
        int64_t nc = F - c0 < cb ? F - c0 : cb;
        double acc[ACT_COLS_MAX];
        for (int64_t j = 0; j < nc; j++) acc[j] = 0.0;
        for (int64_t n = 0; n < N; n++) {
            float *d = dinp + n * F + c0;
            const float *g = dout + n * F + c0, *x = inp + n * F + c0;
            RP_SIMD
            for (int64_t j = 0; j < nc; j++) {
                float v = 0.0f + relu_pass(g[j], x[j]);
                d[j] = v;
                acc[j] += (double)v;
            }
        }
        for (int64_t j = 0; j < nc; j++) db[c0 + j] += (float)acc[j];
    }
}

/* ---- GELU without libm: every step is plain float arithmetic, so the loops vectorise ----
 *
 * With z = |x| / sqrt2 and Q = Phi(-|x|) = erfc(z) / 2 (the smaller tail of the normal CDF):
 *   gelu(x)  = x * Phi(x) = max(x, 0) - |x| * Q
 *   gelu'(x) = Phi(x) + x phi(x),  Phi(x) = x < 0 ? Q : 1 - Q,  phi(x) = exp(-x^2/2) / sqrt(2 pi)
 * erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z/2), P the degree-9 Chebyshev fit of Numerical
 * Recipes (erfcc; relative error below 1.2e-7 for every z >= 0). Q is thus relatively accurate in
 * the far tail, where gelu(x < 0) and the derivative are tiny: -x^2/2 is carried as an exact
 * float pair (hi + lo, Dekker's product) and the rounding of -hi/2 + P(t) is kept (TwoSum), both
 * applied as a first-order factor after exp (a plain float x*x would cost up to 6e-6 relative near
 * x = -13, where the exponent is near -87); the tails are carried times 2^24 until the last
 * product, so none of them is subnormal on the way.
 * |x| is capped at 40 (infinities and huge values: Q and phi are exactly 0 beyond |x| ~ 14.4), and
 * NaN flows through every step. Sign tests and selects work on the bits (a float compare-and-select
 * blocks vectorisation without -fno-trapping-math). Against double-precision erfc
 * (tests/c/test_layers.c): below 2.4e-7 absolute for the value and the derivative, 5e-7 relative
 * wherever the value is a normal float. */

#define GELU_RSQRT2PI 0.39894228040143268f /* 1/sqrt(2*pi) */
#define GELU_HALF_RSQRT2 0.35355339059327376f /* 1/(2 sqrt2): z/2 = |x| / (2 sqrt2) */

/* 2^24 exp(y) for y <= 1: Cephes' expf polynomial after y = k ln2 + r, times 2^(k+24), a normal
 * float for every k >= -150. The callers scale by 2^-24 only after their last product, so that
 * nothing on the way is subnormal (a subnormal Q near x = -13.1 cost 1.6e-6 relative);
 * y < -104 gives exactly 0 (exp(-104) is below half float's smallest subnormal), NaN gives NaN.
 * 2^(k+24) is built from the bits of the rounding constant, so no float is converted to an
 * integer (which would be undefined for NaN). */
static inline float gelu_exp24(float y)
{
    act_bits in = {.f = y};
    /* all ones when y < -104: negative (sign set) and magnitude above 104's; NaN is left alone */
    uint32_t under = 0u - ((uint32_t)(in.u > 0xC2D00000u) & (uint32_t)(in.u <= 0xFF800000u));
    act_bits yc = {.u = (in.u & ~under) | (0xC2D00000u & under)};
    act_bits kb = {.f = yc.f * 1.44269504088896341f + 12582912.0f}; /* 1.5 * 2^23 + round(y/ln2) */
    float kf = kb.f - 12582912.0f;
    float r = (yc.f - kf * 0.693359375f) - kf * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    act_bits two_k = {.u = (kb.u - 0x4B400000u + 127u + 24u) << 23}; /* k + 24 in [-126, 26] */
    act_bits out = {.f = ((p * (r * r) + r) + 1.0f) * two_k.f};
    out.u &= ~under;
    return out.f;
}

/* 2^24 Q, Q = Phi(-|x|), and when e2 is not NULL *e2 = 2^24 exp(-x^2/2); *a = min(|x|, 40)
 * (NaN stays NaN). */
static inline float gelu_tail(float x, float *a, float *e2)
{
    act_bits b = {.f = x};
    b.u &= 0x7FFFFFFFu;
    uint32_t big = 0u - ((uint32_t)(b.u > 0x42200000u) & (uint32_t)(b.u <= 0x7F800000u));
    b.u = (b.u & ~big) | (0x42200000u & big); /* |x| capped at 40 */
    float ax = b.f;
    *a = ax;
    /* ax^2 = hi + lo exactly (Dekker: ax split into two 12-bit halves) */
    float c = 4097.0f * ax, ah = c - (c - ax), al = ax - ah;
    float hi = ax * ax, lo = ((ah * ah - hi) + 2.0f * ah * al) + al * al;
    float t = 1.0f / (1.0f + ax * GELU_HALF_RSQRT2);
    float P = 0.17087277f;
    P = P * t - 0.82215223f;
    P = P * t + 1.48851587f;
    P = P * t - 1.13520398f;
    P = P * t + 0.27886807f;
    P = P * t - 0.18628806f;
    P = P * t + 0.09678418f;
    P = P * t + 0.37409196f;
    P = P * t + 1.00002368f;
    P = P * t - 1.26551223f;
    /* -hi/2 + P with its rounding error (TwoSum), then the tail -lo/2 */
    float u = -0.5f * hi, s = u + P, sv = s - u;
    float err = (u - (s - sv)) + (P - sv) - 0.5f * lo;
    if (e2) *e2 = gelu_exp24(u) * (1.0f - 0.5f * lo);
    return 0.5f * t * gelu_exp24(s) * (1.0f + err);
}

/* 0.5 * x * (1 + erf(x/sqrt2)), torch.nn.functional.gelu's exact form. */
void rp_gelu_forward(float *out, const float *inp, int64_t n)
{
    RP_PARALLEL_FOR(n >= ACT_PAR_MIN / 8)
    for (int64_t i0 = 0; i0 < n; i0 += 1024) {
        int64_t i1 = i0 + 1024 < n ? i0 + 1024 : n;
        RP_SIMD
        for (int64_t i = i0; i < i1; i++) {
            float x = inp[i], a;
            float q24 = gelu_tail(x, &a, NULL);
            act_bits pos = {.f = x};
            pos.u &= (pos.u >> 31) - 1u; /* max(x, 0) for x < 0 and -0; x (also NaN) otherwise */
            out[i] = pos.f - (a * q24) * 0x1p-24f;
        }
    }
}

/* gelu'(x) = Phi(x) + x phi(x); at +-inf exactly 1 and 0. */
static inline float gelu_grad(float x)
{
    float a, e2;
    float q24 = gelu_tail(x, &a, &e2);
    act_bits sgn = {.f = x}, one = {.f = 1.0f}, qs = {.f = q24}, xs = {.f = a};
    uint32_t pos = (sgn.u >> 31) - 1u; /* all ones for x >= 0 (and +NaN) */
    one.u &= pos;                      /* x >= 0: Phi = 1 - Q; x < 0: Phi = Q */
    qs.u ^= pos & 0x80000000u;
    xs.u |= sgn.u & 0x80000000u;       /* x, capped at +-40 */
    float tail24 = qs.f + xs.f * (GELU_RSQRT2PI * e2);
    return one.f + tail24 * 0x1p-24f;
}

/* dinp += dout * gelu'(x). */
void rp_gelu_backward(float *dinp, const float *dout, const float *inp, int64_t n)
{
    RP_PARALLEL_FOR(n >= ACT_PAR_MIN / 8)
    for (int64_t i0 = 0; i0 < n; i0 += 1024) {
        int64_t i1 = i0 + 1024 < n ? i0 + 1024 : n;
        RP_SIMD
        for (int64_t i = i0; i < i1; i++) dinp[i] += dout[i] * gelu_grad(inp[i]);
    }
}

/* dinp = 0 + dout * gelu'(x), as on a zeroed dinp; dinp may be dout. */
void rp_gelu_backward_set(float *dinp, const float *dout, const float *inp, int64_t n)
{
    RP_PARALLEL_FOR(n >= ACT_PAR_MIN / 8)
    for (int64_t i0 = 0; i0 < n; i0 += 1024) {
        int64_t i1 = i0 + 1024 < n ? i0 + 1024 : n;
        RP_SIMD
        for (int64_t i = i0; i < i1; i++) dinp[i] = 0.0f + dout[i] * gelu_grad(inp[i]);
    }
}

/* Elementwise; out may alias a or b (each element is read before it is written). */
void rp_residual_forward(float *out, const float *a, const float *b, int64_t n)
{
    RP_PARALLEL_FOR_SIMD(n >= ACT_PAR_MIN)
    for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

/* da += dout and db += dout, each skipped when NULL. */
void rp_residual_backward(float *da, float *db, const float *dout, int64_t n)
{
    if (da) {
        RP_PARALLEL_FOR_SIMD(n >= ACT_PAR_MIN)
        for (int64_t i = 0; i < n; i++) da[i] += dout[i];
    }
    if (db) {
        RP_PARALLEL_FOR_SIMD(n >= ACT_PAR_MIN)
        for (int64_t i = 0; i < n; i++) db[i] += dout[i];
    }
}

/* Serial: one rp_rng_uniform draw per element in index order, element kept when u >= p, so the
 * mask depends only on the rng state and n. The kept value is 1/(1-p) computed in double and
 * rounded to float once. p = 0 draws nothing (rng may then be NULL) and leaves mask alone. */
void rp_dropout_forward(float *out, float *mask, const float *inp, float p, rp_rng *rng,
                        int64_t n)
{
    if (p == 0.0f) {
        if (out != inp) memmove(out, inp, (size_t)n * sizeof(float));
        return;
    }
    double pd = (double)p;
    float keep = (float)(1.0 / (1.0 - pd));
    for (int64_t i = 0; i < n; i++) {
        float m = rp_rng_uniform(rng) >= pd ? keep : 0.0f;
        mask[i] = m;
        out[i] = inp[i] * m;
    }
}

/* dinp += dout * mask; p = 0: dinp += dout (mask unused). */
void rp_dropout_backward(float *dinp, const float *dout, const float *mask, float p, int64_t n)
{
    if (p == 0.0f) {
        RP_PARALLEL_FOR_SIMD(n >= ACT_PAR_MIN)
        for (int64_t i = 0; i < n; i++) dinp[i] += dout[i];
        return;
    }
    RP_PARALLEL_FOR_SIMD(n >= ACT_PAR_MIN)
    for (int64_t i = 0; i < n; i++) dinp[i] += dout[i] * mask[i];
}

/* 0 + dout * mask (p = 0: 0 + dout), as on a zeroed dinp; dinp may be dout. */
void rp_dropout_backward_set(float *dinp, const float *dout, const float *mask, float p,
                             int64_t n)
{
    if (p == 0.0f) {
        RP_PARALLEL_FOR_SIMD(n >= ACT_PAR_MIN)
        for (int64_t i = 0; i < n; i++) dinp[i] = 0.0f + dout[i];
        return;
    }
    RP_PARALLEL_FOR_SIMD(n >= ACT_PAR_MIN)
    for (int64_t i = 0; i < n; i++) dinp[i] = 0.0f + dout[i] * mask[i];
}
