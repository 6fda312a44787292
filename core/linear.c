/* Linear layer out = inp @ w^T + b through rp_sgemm; bias gradient as column sums. */
#include "layers.h"
#include "parallel.h"

#include <string.h>

#include "blas.h"
#ifdef _OPENMP
#include <omp.h>
#endif

/* Most columns one task of the bias-gradient loop sums (its double accumulators live on the
 * stack: 4 KB). */
#define LIN_COLS_MAX 512

/* The bias is broadcast into out first (OpenMP over rows), then one sgemm adds inp @ w^T
 * (beta = 1); without a bias the sgemm overwrites out (beta = 0). */
void rp_linear_forward(float *out, const float *inp, const float *w, const float *b, int64_t N,
                       int64_t C, int64_t OC)
{
    if (b) {
        RP_PARALLEL_FOR(N * OC >= 65536)
        for (int64_t n = 0; n < N; n++) memcpy(out + n * OC, b, (size_t)OC * sizeof(float));
    }
    rp_sgemm(0, 1, N, OC, C, 1.0f, inp, C, w, C, b ? 1.0f : 0.0f, out, OC);
}

/* dw and db of both backward entries. dw: one sgemm with beta = 1 (accumulate). db: OpenMP over
 * blocks of columns, each task summing its columns over all rows in increasing n in double (then
 * one float add into db), so there is no race and the result does not depend on the thread count;
 * every row adds its columns to the accumulators as one vector loop (the columns are
 * independent, each column's sum keeps its order). */
static void weight_grads(float *dw, float *db, const float *dout, const float *inp, int64_t N,
                         int64_t C, int64_t OC)
{
    if (dw) rp_sgemm(1, 0, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dw, C);
    if (db) {
        int64_t cb = rp_col_block(OC, LIN_COLS_MAX);
        int64_t nblocks = (OC + cb - 1) / cb;
        RP_PARALLEL_FOR(N * OC >= 32768)
        for (int64_t blk = 0; blk < nblocks; blk++) {
            int64_t c0 = blk * cb;
            int64_t nc = OC - c0 < cb ? OC - c0 : cb;
            double acc[LIN_COLS_MAX];
            for (int64_t j = 0; j < nc; j++) acc[j] = 0.0;
            for (int64_t n = 0; n < N; n++) {
                const float *g = dout + n * OC + c0;
                RP_SIMD
                for (int64_t j = 0; j < nc; j++) acc[j] += (double)g[j];
            }
            for (int64_t j = 0; j < nc; j++) db[c0 + j] += (float)acc[j];
        }
    }
}

/* dinp: one sgemm with beta = 1 (accumulate); then dw and db. */
void rp_linear_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                        const float *w, int64_t N, int64_t C, int64_t OC)
{
    if (dinp) rp_sgemm(0, 0, N, C, OC, 1.0f, dout, OC, w, C, 1.0f, dinp, C);
    weight_grads(dw, db, dout, inp, N, C, OC);
}

/* dw and db first (they read inp), then dinp by one sgemm with beta = 0 (overwrite). */
void rp_linear_backward_set(float *dinp, float *dw, float *db, const float *dout,
                            const float *inp, const float *w, int64_t N, int64_t C, int64_t OC)
{
    weight_grads(dw, db, dout, inp, N, C, OC);
    rp_sgemm(0, 0, N, C, OC, 1.0f, dout, OC, w, C, 0.0f, dinp, C);
}
