/* Softmax cross-entropy over rows of logits, with unscored rows (target < 0 or mask 0).
 *
 * One pass over a row's logits in the forward: the row is taken in blocks of CE_BLOCK floats;
 * each block's maximum, then its exponentials from the L1 cache, with the row's sum rescaled when
 * a block raises the running maximum (online softmax). Nothing of size V is written: each row
 * keeps its maximum and 1 / sum (stats), from which the backward recomputes the probabilities
 * while it writes the gradient, in one pass again. The exponentials are rp_vexp_nonpos (simd.h:
 * relative error at most 8.4e-8, e^-87 below -87), the sums in double. */
#include "layers.h"
#include "fpmode.h"
#include "parallel.h"
#include "simd.h"

#include <math.h>
#include <string.h>

/* A multiple of RP_VL: 1 KiB of logits, in L1 between the maximum and the exponentials. */
enum { CE_BLOCK = 256 };

typedef double ce_vd __attribute__((vector_size(RP_VL * sizeof(double))));

/* A row is scored when its target is >= 0 and its mask byte (if any) is nonzero. */
static int ce_scored(const int32_t *target, const uint8_t *mask, int64_t n)
{
    return target[n] >= 0 && (mask == NULL || mask[n] != 0);
}

/* d = x - m for x <= m, at -87 or above (rp_vexp_nonpos gives e^-87 there anyway, and -inf, a
 * logit of -inf, becomes -87 rather than NaN); NaN stays NaN (its comparison is false). */
static inline float ce_shift(float x, float m)
{
    float d = x - m;
    return d < -87.0f ? -87.0f : d;
}

static inline rp_vf ce_vshift(rp_vf x, rp_vf m)
{
    rp_vf d = x - m;
    rp_vi low = d < -87.0f; /* all ones where d < -87 */
    return (rp_vf)(((rp_vi)d & ~low) | ((rp_vi)rp_vsplat(-87.0f) & low));
}

/* The largest of x[0 .. n) (vector lanes, then the tail); NaN may or may not win. */
static float ce_max(const float *x, int64_t n)
{
    int64_t v = 0;
    float mx = -INFINITY;
    if (n >= RP_VL) {
        rp_vf acc = rp_vload(x);
        for (v = RP_VL; v + RP_VL <= n; v += RP_VL) acc = rp_vmax(acc, rp_vload(x + v));
        mx = rp_vhmax(acc);
    }
    for (; v < n; v++)
        if (x[v] > mx) mx = x[v];
    return mx;
}

/* The sum of e^(x[v] - m) over x[0 .. n), in double, in a fixed order. */
static double ce_expsum(const float *x, int64_t n, float m)
{
    int64_t v = 0;
    double s = 0.0;
    if (n >= RP_VL) {
        ce_vd acc = {0};
        rp_vf mv = rp_vsplat(m);
        for (; v + RP_VL <= n; v += RP_VL)
            acc += __builtin_convertvector(rp_vexp_nonpos(ce_vshift(rp_vload(x + v), mv)), ce_vd);
        for (int i = 0; i < RP_VL; i++) s += acc[i];
    }
    for (; v < n; v++) s += (double)rp_exp_nonpos(ce_shift(x[v], m));
    return s;
}

/* OpenMP over rows; unscored rows are skipped (loss 0, stats 0). The loss is
 * log(sum) - (logit[target] - max) in double, rounded to float once. A row with a NaN logit gets
 * a NaN loss, as does a row of -inf only. The scored rows are counted in a separate serial loop. */
static int64_t ce_forward(float *losses, float *stats, const float *logits,
                          const int32_t *target, const uint8_t *mask, int64_t N, int64_t V)
{
    RP_PARALLEL_FOR(N * V >= 8192)
    for (int64_t n = 0; n < N; n++) {
        if (!ce_scored(target, mask, n)) {
            losses[n] = 0.0f;
            stats[2 * n] = stats[2 * n + 1] = 0.0f;
            continue;
        }
        const float *x = logits + n * V;
        float m = -INFINITY;
        double s = 0.0;
        for (int64_t b = 0; b < V; b += CE_BLOCK) {
            int64_t len = V - b < CE_BLOCK ? V - b : CE_BLOCK;
            float bm = ce_max(x + b, len);
            if (bm > m) {
                if (s != 0.0) s *= exp((double)m - (double)bm);
                m = bm;
            }
            if (m == -INFINITY) { /* every logit so far -inf (or NaN): nothing to add but NaN */
                for (int64_t v = 0; v < len; v++)
                    if (isnan(x[b + v])) s = (double)NAN;
                continue;
            }
            s += ce_expsum(x + b, len, m);
        }
        if (m == -INFINITY) s = (double)NAN;
        stats[2 * n] = m;
        stats[2 * n + 1] = (float)(1.0 / s);
        losses[n] = (float)(log(s) - ((double)x[target[n]] - (double)m));
    }
    int64_t count = 0;
    for (int64_t n = 0; n < N; n++) count += ce_scored(target, mask, n);
    return count;
}

int64_t rp_crossentropy_forward(float *losses, float *stats, const float *logits,
                                const int32_t *target, const uint8_t *mask, int64_t N, int64_t V)
{
    rp_fpmode fm = rp_fp_flush_begin();
    int64_t r = ce_forward(losses, stats, logits, target, mask, N, V);
    rp_fp_flush_end(fm);
    return r;
}

/* OpenMP over rows. p = e^(x - max) * (1 / sum) in float, the same value in the vector lanes
 * and at the target (rp_exp_nonpos is rp_vexp_nonpos lane by lane); d = d + scale * (p - onehot)
 * with one rounding for the product and one for the sum; set: d = 0 + that (bit for bit the
 * accumulating form on a zeroed row, -0 included). */
static void ce_backward(float *dlogits, const float *logits, const float *stats,
                        const int32_t *target, const uint8_t *mask, float scale, int64_t N,
                        int64_t V, int set)
{
    RP_PARALLEL_FOR(N * V >= 8192)
    for (int64_t n = 0; n < N; n++) {
        float *d = dlogits + n * V;
        if (!ce_scored(target, mask, n)) {
            if (set) memset(d, 0, (size_t)V * sizeof *d);
            continue;
        }
        const float *x = logits + n * V;
        const float m = stats[2 * n], inv = stats[2 * n + 1];
        const int64_t t = target[n];
        const float dt = set ? 0.0f : d[t];
        rp_vf mv = rp_vsplat(m), iv = rp_vsplat(inv), sv = rp_vsplat(scale);
        int64_t v = 0;
        for (; v + RP_VL <= V; v += RP_VL) {
            rp_vf p = rp_vexp_nonpos(ce_vshift(rp_vload(x + v), mv)) * iv;
            rp_vf old = set ? rp_vsplat(0.0f) : rp_vload(d + v);
            rp_vstore(d + v, old + sv * p);
        }
        for (; v < V; v++) {
            float p = rp_exp_nonpos(ce_shift(x[v], m)) * inv;
            d[v] = (set ? 0.0f : d[v]) + scale * p;
        }
        float pt = rp_exp_nonpos(ce_shift(x[t], m)) * inv;
        d[t] = dt + scale * (pt - 1.0f);
    }
}

void rp_crossentropy_backward(float *dlogits, const float *logits, const float *stats,
                              const int32_t *target, const uint8_t *mask, float scale, int64_t N,
                              int64_t V)
{
    rp_fpmode fm = rp_fp_flush_begin();
    ce_backward(dlogits, logits, stats, target, mask, scale, N, V, 0);
    rp_fp_flush_end(fm);
}

void rp_crossentropy_backward_set(float *dlogits, const float *logits, const float *stats,
                                  const int32_t *target, const uint8_t *mask, float scale,
                                  int64_t N, int64_t V)
{
    rp_fpmode fm = rp_fp_flush_begin();
    ce_backward(dlogits, logits, stats, target, mask, scale, N, V, 1);
    rp_fp_flush_end(fm);
}
