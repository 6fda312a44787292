/* Elementwise layers: ReLU, GELU (exact erf form), residual add, inverted dropout. */
#include "layers.h"
#include "parallel.h"

#include <math.h>
#include <string.h>

/* Elementwise loops go parallel only when n is large enough to pay for the thread start-up. */
#define ACT_PAR_MIN 65536

/* x <= 0 ? 0 : x, written so that a NaN input stays NaN (NaN checks keep working). */
void rp_relu_forward(float *out, const float *inp, int64_t n)
{
    RP_PARALLEL_FOR(n >= ACT_PAR_MIN)
    for (int64_t i = 0; i < n; i++) out[i] = inp[i] <= 0.0f ? 0.0f : inp[i];
}

/* Gradient dout where inp > 0 (and where inp is NaN), 0 where inp <= 0 (0 at inp = 0, as torch). */
void rp_relu_backward(float *dinp, const float *dout, const float *inp, int64_t n)
{
    RP_PARALLEL_FOR(n >= ACT_PAR_MIN)
    for (int64_t i = 0; i < n; i++) dinp[i] += inp[i] <= 0.0f ? 0.0f : dout[i];
}

#define GELU_RSQRT2 0.70710678118654752f   /* 1/sqrt(2) */
#define GELU_RSQRT2PI 0.39894228040143268f /* 1/sqrt(2*pi) */

/* 0.5 * x * (1 + erf(x/sqrt2)), evaluated as 0.5 * x * erfc(-x/sqrt2) (the same function): for
 * very negative x, 1 + erf cancels to 0 while erfc keeps full relative precision. Float libm. */
void rp_gelu_forward(float *out, const float *inp, int64_t n)
{
    RP_PARALLEL_FOR(n >= ACT_PAR_MIN / 8)
    for (int64_t i = 0; i < n; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * erfcf(-x * GELU_RSQRT2);
    }
}

/* d/dx gelu = Phi(x) + x * phi(x), Phi(x) = 0.5 * erfc(-x/sqrt2), phi(x) = exp(-x^2/2)/sqrt(2pi).
 * For |x| >= 40, x * phi(x) is far below float's smallest value and is taken as 0, so that
 * x = +-inf gives 1 or 0 instead of inf * 0 = NaN. */
void rp_gelu_backward(float *dinp, const float *dout, const float *inp, int64_t n)
{
    RP_PARALLEL_FOR(n >= ACT_PAR_MIN / 8)
    for (int64_t i = 0; i < n; i++) {
        float x = inp[i];
        float cdf = 0.5f * erfcf(-x * GELU_RSQRT2);
        float xpdf = fabsf(x) < 40.0f ? x * GELU_RSQRT2PI * expf(-0.5f * x * x) : 0.0f;
        dinp[i] += dout[i] * (cdf + xpdf);
    }
}

/* Elementwise; out may alias a or b (each element is read before it is written). */
void rp_residual_forward(float *out, const float *a, const float *b, int64_t n)
{
    RP_PARALLEL_FOR(n >= ACT_PAR_MIN)
    for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

/* da += dout and db += dout, each skipped when NULL. */
void rp_residual_backward(float *da, float *db, const float *dout, int64_t n)
{
    if (da) {
        RP_PARALLEL_FOR(n >= ACT_PAR_MIN)
        for (int64_t i = 0; i < n; i++) da[i] += dout[i];
    }
    if (db) {
        RP_PARALLEL_FOR(n >= ACT_PAR_MIN)
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
        RP_PARALLEL_FOR(n >= ACT_PAR_MIN)
        for (int64_t i = 0; i < n; i++) dinp[i] += dout[i];
        return;
    }
    RP_PARALLEL_FOR(n >= ACT_PAR_MIN)
    for (int64_t i = 0; i < n; i++) dinp[i] += dout[i] * mask[i];
}
