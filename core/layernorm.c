/* LayerNorm over the last dim (eps 1e-5, biased variance), statistics in double. */
#include "layers.h"
#include "parallel.h"

#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define LN_EPS 1e-5
/* Most columns one task of the weight-gradient loop handles (two double accumulators each, on the
 * stack: 8 KB). */
#define LN_COLS_MAX 512

/* Two passes per row in double (mean, then the centred sum of squares), so a large mean does not
 * cancel the variance. out uses the double statistics; mean and rstd are saved rounded to float.
 * Rows are independent: OpenMP over rows. */
void rp_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *w,
                          const float *b, int64_t N, int64_t C)
{
    RP_PARALLEL_FOR(N * C >= 16384)
    for (int64_t n = 0; n < N; n++) {
        const float *x = inp + n * C;
        float *o = out + n * C;
        double s = 0.0;
        for (int64_t c = 0; c < C; c++) s += (double)x[c];
        double m = s / (double)C;
        double v = 0.0;
        for (int64_t c = 0; c < C; c++) {
            double d = (double)x[c] - m;
            v += d * d;
        }
        v /= (double)C;
        double r = 1.0 / sqrt(v + LN_EPS);
        for (int64_t c = 0; c < C; c++)
            o[c] = (float)(((double)x[c] - m) * r * (double)w[c] + (double)b[c]);
        mean[n] = (float)m;
        rstd[n] = (float)r;
    }
}

/* With xhat = (x - mean) * rstd and g = dout * w:
 *   dinp += rstd * (g - mean_c(g) - xhat * mean_c(g * xhat)),
 *   dw += sum_n dout * xhat,  db += sum_n dout.
 * dinp: OpenMP over rows (each row is written by one thread). dw/db: OpenMP over blocks of
 * columns (rp_col_block); each task sums its columns over all rows in increasing n with double
 * accumulators, then adds once into dw/db, so there is no race and the result does not depend on
 * the thread count. xhat is recomputed from
 * the saved (float) mean and rstd. */
void rp_layernorm_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                           const float *mean, const float *rstd, const float *w, int64_t N,
                           int64_t C)
{
    if (dinp) {
        RP_PARALLEL_FOR(N * C >= 16384)
        for (int64_t n = 0; n < N; n++) {
            const float *x = inp + n * C, *g = dout + n * C;
            float *d = dinp + n * C;
            double m = (double)mean[n], r = (double)rstd[n];
            double sg = 0.0, sgx = 0.0;
            for (int64_t c = 0; c < C; c++) {
                double gc = (double)g[c] * (double)w[c];
                sg += gc;
                sgx += gc * (((double)x[c] - m) * r);
            }
            sg /= (double)C;
            sgx /= (double)C;
            for (int64_t c = 0; c < C; c++) {
                double gc = (double)g[c] * (double)w[c];
                double xh = ((double)x[c] - m) * r;
                d[c] += (float)(r * (gc - sg - xh * sgx));
            }
        }
    }
    if (dw || db) {
        int64_t cb = rp_col_block(C, LN_COLS_MAX);
        int64_t nblocks = (C + cb - 1) / cb;
        RP_PARALLEL_FOR(N * C >= 16384)
        for (int64_t blk = 0; blk < nblocks; blk++) {
            int64_t c0 = blk * cb;
            int64_t nc = C - c0 < cb ? C - c0 : cb;
            double aw[LN_COLS_MAX], ab[LN_COLS_MAX];
            for (int64_t j = 0; j < nc; j++) aw[j] = ab[j] = 0.0;
            for (int64_t n = 0; n < N; n++) {
                const float *x = inp + n * C + c0, *g = dout + n * C + c0;
                double m = (double)mean[n], r = (double)rstd[n];
                for (int64_t j = 0; j < nc; j++) {
                    aw[j] += (double)g[j] * (((double)x[j] - m) * r);
                    ab[j] += (double)g[j];
                }
            }
            for (int64_t j = 0; j < nc; j++) {
                if (dw) dw[c0 + j] += (float)aw[j];
                if (db) db[c0 + j] += (float)ab[j];
            }
        }
    }
}
