/* LayerNorm over the last dim (eps 1e-5, biased variance), statistics in double. */
#include "layers.h"
#include "parallel.h"
#include "simd.h"

#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define LN_EPS 1e-5
/* Most columns one task of the weight-gradient loop handles (two double accumulators each, on the
 * stack: 8 KB). */
#define LN_COLS_MAX 512
/* Rows whose per-row sums run side by side (see rows8). */
#define LN_ROWS 8

/* The rows n0 .. n0 + 7 of a (N, C) buffer; past the last row (a short last block) the last row
 * again, so the block is always 8 rows wide (the extra results are not stored). */
static void rows8(const float *x[LN_ROWS], const float *base, int64_t n0, int64_t N, int64_t C)
{
    for (int k = 0; k < LN_ROWS; k++) x[k] = base + (n0 + k < N ? n0 + k : N - 1) * C;
}

/* Each row's sums run over c in increasing order, one double add after the other, exactly as a
 * loop over one row would; the 8 rows of a block only interleave their chains, which hides the
 * latency of the adds (one row at a time waited for every add). Written out by hand: a loop over
 * the 8 rows made the compiler gather the strided elements, which was slower than one row. */

/* sums8's loops with AVX, 8 columns at a time: an 8 x 8 block transposed in registers
 * (rp_transpose8), so that lane k of two vectors of 4 doubles holds row k's sum (rows 0-3, 4-7),
 * the columns added in increasing order as there (no fused multiply-add: each product rounded,
 * then added). pass 0: v[k] = sum_c x[k][c]; pass 1: v[k] = sum_c (x[k][c] - s[k])^2, s holding
 * the means. Returns the columns done (the multiples of 8); sums8 goes on from there. */
#if defined(__AVX__)
static int64_t sums8_avx(double s[LN_ROWS], double v[LN_ROWS], const float *const x[LN_ROWS],
                         int64_t C, int pass)
{
    __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
    __m256d mlo = _mm256_loadu_pd(s), mhi = _mm256_loadu_pd(s + 4);
    int64_t c0 = 0;
    for (; c0 + 8 <= C; c0 += 8) {
        __m256 t[8];
        rp_transpose8(t, x, c0);
        for (int j = 0; j < 8; j++) {
            __m256d a = _mm256_cvtps_pd(_mm256_castps256_ps128(t[j]));
            __m256d b = _mm256_cvtps_pd(_mm256_extractf128_ps(t[j], 1));
            if (pass) {
                a = _mm256_sub_pd(a, mlo), b = _mm256_sub_pd(b, mhi);
                a = _mm256_mul_pd(a, a), b = _mm256_mul_pd(b, b);
            }
            lo = _mm256_add_pd(lo, a), hi = _mm256_add_pd(hi, b);
        }
    }
    _mm256_storeu_pd(v, lo), _mm256_storeu_pd(v + 4, hi);
    return c0;
}
#endif

/* s[k] = sum_c x[k][c] and then v[k] = sum_c (x[k][c] - s[k] / C)^2, in double. */
static void sums8(double s[LN_ROWS], double v[LN_ROWS], const float *const x[LN_ROWS], int64_t C)
{
    const float *x0 = x[0], *x1 = x[1], *x2 = x[2], *x3 = x[3];
    const float *x4 = x[4], *x5 = x[5], *x6 = x[6], *x7 = x[7];
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0, s4 = 0.0, s5 = 0.0, s6 = 0.0, s7 = 0.0;
    int64_t c = 0;
#if defined(__AVX__)
    for (int k = 0; k < LN_ROWS; k++) s[k] = 0.0;
    c = sums8_avx(s, v, x, C, 0);
    s0 = v[0], s1 = v[1], s2 = v[2], s3 = v[3], s4 = v[4], s5 = v[5], s6 = v[6], s7 = v[7];
#endif
    for (; c < C; c++) {
        s0 += (double)x0[c], s1 += (double)x1[c], s2 += (double)x2[c], s3 += (double)x3[c];
        s4 += (double)x4[c], s5 += (double)x5[c], s6 += (double)x6[c], s7 += (double)x7[c];
    }
    double m0 = s0 / (double)C, m1 = s1 / (double)C, m2 = s2 / (double)C, m3 = s3 / (double)C;
    double m4 = s4 / (double)C, m5 = s5 / (double)C, m6 = s6 / (double)C, m7 = s7 / (double)C;
    double v0 = 0.0, v1 = 0.0, v2 = 0.0, v3 = 0.0, v4 = 0.0, v5 = 0.0, v6 = 0.0, v7 = 0.0;
    c = 0;
#if defined(__AVX__)
    s[0] = m0, s[1] = m1, s[2] = m2, s[3] = m3, s[4] = m4, s[5] = m5, s[6] = m6, s[7] = m7;
    c = sums8_avx(s, v, x, C, 1);
    v0 = v[0], v1 = v[1], v2 = v[2], v3 = v[3], v4 = v[4], v5 = v[5], v6 = v[6], v7 = v[7];
#endif
    for (; c < C; c++) {
        double d0 = (double)x0[c] - m0, d1 = (double)x1[c] - m1, d2 = (double)x2[c] - m2;
        double d3 = (double)x3[c] - m3, d4 = (double)x4[c] - m4, d5 = (double)x5[c] - m5;
        double d6 = (double)x6[c] - m6, d7 = (double)x7[c] - m7;
        v0 += d0 * d0, v1 += d1 * d1, v2 += d2 * d2, v3 += d3 * d3;
        v4 += d4 * d4, v5 += d5 * d5, v6 += d6 * d6, v7 += d7 * d7;
    }
    s[0] = s0, s[1] = s1, s[2] = s2, s[3] = s3, s[4] = s4, s[5] = s5, s[6] = s6, s[7] = s7;
    v[0] = v0, v[1] = v1, v[2] = v2, v[3] = v3, v[4] = v4, v[5] = v5, v[6] = v6, v[7] = v7;
}

/* With gc = g[k][c] w[c] and xh = (x[k][c] - m[k]) r[k]: sg[k] = sum_c gc, sgx[k] = sum_c gc xh. */
static void gsums8(double sg[LN_ROWS], double sgx[LN_ROWS], const float *const g[LN_ROWS],
                   const float *const x[LN_ROWS], const double m[LN_ROWS],
                   const double r[LN_ROWS], const float *w, int64_t C)
{
    double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0, a4 = 0.0, a5 = 0.0, a6 = 0.0, a7 = 0.0;
    double b0 = 0.0, b1 = 0.0, b2 = 0.0, b3 = 0.0, b4 = 0.0, b5 = 0.0, b6 = 0.0, b7 = 0.0;
    for (int64_t c = 0; c < C; c++) {
        double wc = (double)w[c];
        double g0 = (double)g[0][c] * wc, g1 = (double)g[1][c] * wc, g2 = (double)g[2][c] * wc;
        double g3 = (double)g[3][c] * wc, g4 = (double)g[4][c] * wc, g5 = (double)g[5][c] * wc;
        double g6 = (double)g[6][c] * wc, g7 = (double)g[7][c] * wc;
        a0 += g0, a1 += g1, a2 += g2, a3 += g3, a4 += g4, a5 += g5, a6 += g6, a7 += g7;
        b0 += g0 * (((double)x[0][c] - m[0]) * r[0]), b1 += g1 * (((double)x[1][c] - m[1]) * r[1]);
        b2 += g2 * (((double)x[2][c] - m[2]) * r[2]), b3 += g3 * (((double)x[3][c] - m[3]) * r[3]);
        b4 += g4 * (((double)x[4][c] - m[4]) * r[4]), b5 += g5 * (((double)x[5][c] - m[5]) * r[5]);
        b6 += g6 * (((double)x[6][c] - m[6]) * r[6]), b7 += g7 * (((double)x[7][c] - m[7]) * r[7]);
    }
    sg[0] = a0, sg[1] = a1, sg[2] = a2, sg[3] = a3, sg[4] = a4, sg[5] = a5, sg[6] = a6, sg[7] = a7;
    sgx[0] = b0, sgx[1] = b1, sgx[2] = b2, sgx[3] = b3;
    sgx[4] = b4, sgx[5] = b5, sgx[6] = b6, sgx[7] = b7;
}

/* Two passes per row in double (mean, then the centred sum of squares), so a large mean does not
 * cancel the variance. out uses the double statistics; mean and rstd are saved rounded to float.
 * Rows are independent: OpenMP over blocks of 8 rows. */
void rp_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *w,
                          const float *b, int64_t N, int64_t C)
{
    int64_t nblocks = (N + LN_ROWS - 1) / LN_ROWS;
    RP_PARALLEL_FOR(N * C >= 16384)
    for (int64_t blk = 0; blk < nblocks; blk++) {
        int64_t n0 = blk * LN_ROWS;
        const float *x[LN_ROWS];
        double s[LN_ROWS], v[LN_ROWS];
        rows8(x, inp, n0, N, C);
        sums8(s, v, x, C);
        for (int k = 0; k < LN_ROWS && n0 + k < N; k++) {
            const float *xk = x[k];
            float *o = out + (n0 + k) * C;
            double m = s[k] / (double)C;
            double r = 1.0 / sqrt(v[k] / (double)C + LN_EPS);
            RP_SIMD
            for (int64_t c = 0; c < C; c++)
                o[c] = (float)(((double)xk[c] - m) * r * (double)w[c] + (double)b[c]);
            mean[n0 + k] = (float)m;
            rstd[n0 + k] = (float)r;
        }
    }
}

/* With xhat = (x - mean) * rstd and g = dout * w:
 *   dinp += rstd * (g - mean_c(g) - xhat * mean_c(g * xhat)),
 *   dw += sum_n dout * xhat,  db += sum_n dout.
 * dinp: OpenMP over blocks of 8 rows (each row is written by one thread). dw/db: OpenMP over
 * blocks of columns (rp_col_block); each task sums its columns over all rows in increasing n with
 * double accumulators, then adds once into dw/db, so there is no race and the result does not
 * depend on the thread count. xhat is recomputed from the saved (float) mean and rstd. */
static void ln_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                        const float *mean, const float *rstd, const float *w, int64_t N,
                        int64_t C, int set)
{
    if (dinp) {
        int64_t nblocks = (N + LN_ROWS - 1) / LN_ROWS;
        RP_PARALLEL_FOR(N * C >= 16384)
        for (int64_t blk = 0; blk < nblocks; blk++) {
            int64_t n0 = blk * LN_ROWS;
            const float *x[LN_ROWS], *g[LN_ROWS];
            double m[LN_ROWS], r[LN_ROWS], sg[LN_ROWS], sgx[LN_ROWS];
            rows8(x, inp, n0, N, C);
            rows8(g, dout, n0, N, C);
            for (int k = 0; k < LN_ROWS; k++) {
                int64_t n = n0 + k < N ? n0 + k : N - 1;
                m[k] = (double)mean[n];
                r[k] = (double)rstd[n];
            }
            gsums8(sg, sgx, g, x, m, r, w, C);
            for (int k = 0; k < LN_ROWS && n0 + k < N; k++) {
                const float *xk = x[k], *gk = g[k];
                float *d = dinp + (n0 + k) * C;
                double mk = m[k], rk = r[k], sgk = sg[k] / (double)C, sgxk = sgx[k] / (double)C;
                /* set: 0 + the term, what the accumulation gives on a zeroed dinp */
                float base = 0.0f;
                RP_SIMD
                for (int64_t c = 0; c < C; c++) {
                    double gc = (double)gk[c] * (double)w[c];
                    double xh = ((double)xk[c] - mk) * rk;
                    d[c] = (set ? base : d[c]) + (float)(rk * (gc - sgk - xh * sgxk));
                }
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
                RP_SIMD
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

void rp_layernorm_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                           const float *mean, const float *rstd, const float *w, int64_t N,
                           int64_t C)
{
    ln_backward(dinp, dw, db, dout, inp, mean, rstd, w, N, C, 0);
}

void rp_layernorm_backward_set(float *dinp, float *dw, float *db, const float *dout,
                               const float *inp, const float *mean, const float *rstd,
                               const float *w, int64_t N, int64_t C)
{
    ln_backward(dinp, dw, db, dout, inp, mean, rstd, w, N, C, 1);
}
