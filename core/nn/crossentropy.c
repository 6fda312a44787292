/* Softmax cross-entropy over rows of logits, with unscored rows (target < 0 or mask 0). */
#include "layers.h"
#include "parallel.h"

#include <math.h>

/* A row is scored when its target is >= 0 and its mask byte (if any) is nonzero. */
static int ce_scored(const int32_t *target, const uint8_t *mask, int64_t n)
{
    return target[n] >= 0 && (mask == NULL || mask[n] != 0);
}

/* OpenMP over rows. Every row gets its softmax in probs (scored or not); the max is subtracted
 * first, exp and the sum are in double, and the loss is log(sum) - (logit[target] - max) in
 * double, rounded to float once. The scored rows are counted in a separate serial loop. */
int64_t rp_crossentropy_forward(float *losses, float *probs, const float *logits,
                                const int32_t *target, const uint8_t *mask, int64_t N, int64_t V)
{
    RP_PARALLEL_FOR(N * V >= 8192)
    for (int64_t n = 0; n < N; n++) {
        const float *x = logits + n * V;
        float *p = probs + n * V;
        float mx = x[0];
        for (int64_t v = 1; v < V; v++)
            if (x[v] > mx) mx = x[v];
        double m = (double)mx, s = 0.0;
        for (int64_t v = 0; v < V; v++) {
            double e = exp((double)x[v] - m);
            s += e;
            p[v] = (float)e;
        }
        double inv = 1.0 / s;
        for (int64_t v = 0; v < V; v++) p[v] = (float)((double)p[v] * inv);
        if (ce_scored(target, mask, n)) {
            losses[n] = (float)(log(s) - ((double)x[target[n]] - m));
        } else {
            losses[n] = 0.0f;
        }
    }
    int64_t count = 0;
    for (int64_t n = 0; n < N; n++) count += ce_scored(target, mask, n);
    return count;
}

/* OpenMP over rows; unscored rows are not touched. One rounding per element:
 * d += scale * (p - onehot). */
void rp_crossentropy_backward(float *dlogits, const float *probs, const int32_t *target,
                              const uint8_t *mask, float scale, int64_t N, int64_t V)
{
    RP_PARALLEL_FOR(N * V >= 8192)
    for (int64_t n = 0; n < N; n++) {
        if (!ce_scored(target, mask, n)) continue;
        const float *p = probs + n * V;
        float *d = dlogits + n * V;
        int64_t t = target[n];
        for (int64_t v = 0; v < V; v++) d[v] += scale * (v == t ? p[v] - 1.0f : p[v]);
    }
}
