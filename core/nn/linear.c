/* Linear layer out = inp @ w^T + b through rp_sgemm; bias gradient as column sums. And the
 * row-invariant product of decoding (rp_linear_rows_forward) with its transposed weights. */
#include "layers.h"
#include "parallel.h"

#include <math.h>
#include <string.h>

#include "blas.h"
#include "tile.h"
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

/* ---- the row-invariant product of decoding ---- */

void rp_transpose(float *dst, const float *src, int64_t rows, int64_t cols)
{
    /* 32 x 32 blocks, so that both sides stream whole cache lines */
    for (int64_t r0 = 0; r0 < rows; r0 += 32)
        for (int64_t c0 = 0; c0 < cols; c0 += 32) {
            int64_t r1 = r0 + 32 < rows ? r0 + 32 : rows, c1 = c0 + 32 < cols ? c0 + 32 : cols;
            for (int64_t c = c0; c < c1; c++)
                for (int64_t r = r0; r < r1; r++) dst[c * rows + r] = src[r * cols + c];
        }
}

/* Columns per block of rp_linear_rows_forward: whole vectors, for rp_tile_mm. */
#define LR_COLS (4 * RP_VL)

/* The columns beyond the last whole vector (fewer than RP_VL) of one row: the same operations
 * per element as rp_tile_mm's (a multiply-add per k in order from 0, fused where the target has
 * FMA). */
static void rows_edge(float *restrict out, const float *restrict inp, const float *restrict wt,
                      int64_t ldw, int64_t C, int w)
{
    float a[RP_VL];
    for (int j = 0; j < w; j++) a[j] = 0.0f;
    for (int64_t k = 0; k < C; k++) {
        const float *wk = wt + k * ldw;
        float x = inp[k];
        for (int j = 0; j < w; j++) a[j] = rp_fmadd(x, wk[j], a[j]);
    }
    for (int j = 0; j < w; j++) out[j] = a[j];
}

/* Below this many multiply-adds a product runs on the calling thread: waking the idle threads
 * (asleep under OMP_WAIT_POLICY=passive) costs tens of microseconds, and batched decoding of the
 * default experiment model (products up to 64 x 64 x 256) was no faster on 2 threads. */
#define LR_PAR_MIN ((int64_t)1 << 22)

/* Column blocks of whole vectors through rp_tile_mm (each element a multiply-add chain over k
 * from 0, whatever the rows), the last OC % RP_VL columns by rows_edge, then + b. */
void rp_linear_rows_forward(float *out, const float *inp, const float *wt, const float *b,
                            int64_t N, int64_t C, int64_t OC)
{
    int64_t full = OC / RP_VL * RP_VL, nblk = (full + LR_COLS - 1) / LR_COLS;
    RP_PARALLEL_FOR(nblk > 1 && N * C * OC >= LR_PAR_MIN)
    for (int64_t cb = 0; cb < nblk; cb++) {
        int64_t c0 = cb * LR_COLS, w = full - c0 < LR_COLS ? full - c0 : LR_COLS;
        rp_tile_mm(out + c0, OC, inp, C, 1, wt + c0, OC, N, w, C, 0);
    }
    if (full < OC)
        for (int64_t n = 0; n < N; n++)
            rows_edge(out + n * OC + full, inp + n * C, wt + full, OC, C, (int)(OC - full));
    if (b)
        for (int64_t n = 0; n < N; n++) {
            float *o = out + n * OC;
            RP_SIMD
            for (int64_t j = 0; j < OC; j++) o[j] += b[j];
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
