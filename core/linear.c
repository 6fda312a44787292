/* Linear layer out = inp @ w^T + b through rp_sgemm; bias gradient as column sums. And the
 * row-invariant product of decoding (rp_linear_rows_forward) with its transposed weights. */
#include "layers.h"
#include "parallel.h"

#include <math.h>
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

/* The full tile of rp_linear_rows_forward: LR_ROWS rows x LR_GROUPS groups of LR_VEC columns
 * (16 vector registers of 8 floats: the accumulators stay in registers over the whole sum). */
#define LR_ROWS 4
#define LR_GROUPS 4
#define LR_VEC 8
#define LR_COLS (LR_GROUPS * LR_VEC)
/* Complete unrolling of the loops over the tile's rows and groups, so that every accumulator is
 * a register (GCC and clang know the pragma; another compiler ignores it, and the numbers stay
 * the same). */
#ifdef __GNUC__
#define LR_UNROLL _Pragma("GCC unroll 16")
#else
#define LR_UNROLL
#endif

/* The tiles of rp_linear_rows_forward. For every element of out: the sum over k = 0..C-1 in
 * order, one fmaf per k from 0, then + b. The three variants (LR_ROWS rows x LR_COLS columns,
 * one row of LR_COLS columns, one row of fewer) perform exactly these operations on each element
 * (vectorising across columns changes no element's sequence), so the result of a row does not
 * depend on the tile it falls in. */
static void rows_full(float *restrict out, int64_t ldo, const float *restrict inp, int64_t ldi,
                      const float *restrict wt, int64_t ldw, const float *restrict b, int64_t C)
{
    float a[LR_ROWS][LR_GROUPS][LR_VEC];
    LR_UNROLL
    for (int r = 0; r < LR_ROWS; r++)
        LR_UNROLL
        for (int g = 0; g < LR_GROUPS; g++)
            for (int j = 0; j < LR_VEC; j++) a[r][g][j] = 0.0f;
    for (int64_t k = 0; k < C; k++) {
        const float *wk = wt + k * ldw;
        LR_UNROLL
        for (int r = 0; r < LR_ROWS; r++) {
            float x = inp[r * ldi + k];
            LR_UNROLL
            for (int g = 0; g < LR_GROUPS; g++) {
                RP_SIMD
                for (int j = 0; j < LR_VEC; j++)
                    a[r][g][j] = fmaf(x, wk[g * LR_VEC + j], a[r][g][j]);
            }
        }
    }
    LR_UNROLL
    for (int r = 0; r < LR_ROWS; r++)
        LR_UNROLL
        for (int g = 0; g < LR_GROUPS; g++) {
            float *o = out + r * ldo + g * LR_VEC;
            for (int j = 0; j < LR_VEC; j++)
                o[j] = b ? a[r][g][j] + b[g * LR_VEC + j] : a[r][g][j];
        }
}

/* One row of LR_COLS columns (a row of the rows beyond a multiple of LR_ROWS), accumulators in
 * registers. */
static void rows_one(float *restrict out, const float *restrict inp, const float *restrict wt,
                     int64_t ldw, const float *restrict b, int64_t C)
{
    float a[LR_GROUPS][LR_VEC];
    LR_UNROLL
    for (int g = 0; g < LR_GROUPS; g++)
        for (int j = 0; j < LR_VEC; j++) a[g][j] = 0.0f;
    for (int64_t k = 0; k < C; k++) {
        const float *wk = wt + k * ldw;
        float x = inp[k];
        LR_UNROLL
        for (int g = 0; g < LR_GROUPS; g++) {
            RP_SIMD
            for (int j = 0; j < LR_VEC; j++) a[g][j] = fmaf(x, wk[g * LR_VEC + j], a[g][j]);
        }
    }
    LR_UNROLL
    for (int g = 0; g < LR_GROUPS; g++)
        for (int j = 0; j < LR_VEC; j++)
            out[g * LR_VEC + j] = b ? a[g][j] + b[g * LR_VEC + j] : a[g][j];
}

/* One row of w < LR_COLS columns (the last column block). */
static void rows_edge(float *restrict out, const float *restrict inp, const float *restrict wt,
                      int64_t ldw, const float *restrict b, int64_t C, int w)
{
    float a[LR_COLS];
    for (int j = 0; j < w; j++) a[j] = 0.0f;
    for (int64_t k = 0; k < C; k++) {
        const float *wk = wt + k * ldw;
        float x = inp[k];
        RP_SIMD
        for (int j = 0; j < w; j++) a[j] = fmaf(x, wk[j], a[j]);
    }
    for (int j = 0; j < w; j++) out[j] = b ? a[j] + b[j] : a[j];
}

/* Below this many multiply-adds a product runs on the calling thread: waking the idle threads
 * (asleep under OMP_WAIT_POLICY=passive) costs tens of microseconds, and batched decoding of the
 * default experiment model (products up to 64 x 64 x 256) was no faster on 2 threads. */
#define LR_PAR_MIN ((int64_t)1 << 22)

void rp_linear_rows_forward(float *out, const float *inp, const float *wt, const float *b,
                            int64_t N, int64_t C, int64_t OC)
{
    int64_t nblk = (OC + LR_COLS - 1) / LR_COLS;
    RP_PARALLEL_FOR(nblk > 1 && N * C * OC >= LR_PAR_MIN)
    for (int64_t cb = 0; cb < nblk; cb++) {
        int64_t c0 = cb * LR_COLS;
        int w = OC - c0 < LR_COLS ? (int)(OC - c0) : LR_COLS;
        const float *wc = wt + c0, *bc = b ? b + c0 : NULL;
        if (w < LR_COLS) {
            for (int64_t n = 0; n < N; n++)
                rows_edge(out + n * OC + c0, inp + n * C, wc, OC, bc, C, w);
            continue;
        }
        int64_t n = 0;
        for (; n + LR_ROWS <= N; n += LR_ROWS)
            rows_full(out + n * OC + c0, OC, inp + n * C, C, wc, OC, bc, C);
        for (; n < N; n++) rows_one(out + n * OC + c0, inp + n * C, wc, OC, bc, C);
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
