/* Decoding in batches (core/model_decode.c) and its row-invariant product (core/linear.c):
 *  - rp_linear_rows_forward against rp_sgemm_naive (double) on odd shapes, and bitwise the same
 *    row whatever rows come with it, wherever it falls in the tiles, for any thread count;
 *  - rp_model_generate_batch against rp_model_generate one prompt at a time: the same tokens
 *    and bitwise the same logits for every pe mode, softmax and linear attention (with and
 *    without an absolute table), pre- and post-norm, greedy and sampled (temperature, top_k),
 *    ragged prompts (longer than seq_len too), lanes stopping at different steps, windows that
 *    fill and re-encode, more prompts than lanes;
 *  - the lane count, the argument checks, and that a batch leaves the model's own cache alone.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rp.h"

static void fill_rand(float *p, int64_t n, uint64_t *s)
{
    for (int64_t i = 0; i < n; i++)
        p[i] = (float)((double)(check_rand_u64(s) >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

/* ---- the row-invariant product ---------------------------------------------------------- */

/* rp_transpose against the definition, on a shape that is no multiple of its 32 x 32 blocks. */
static void test_transpose(void)
{
    printf("transpose\n");
    const int64_t R = 37, Cc = 70;
    float *a = malloc(sizeof(float) * R * Cc), *t = malloc(sizeof(float) * R * Cc);
    uint64_t s = 1;
    fill_rand(a, R * Cc, &s);
    rp_transpose(t, a, R, Cc);
    int ok = 1;
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < Cc; c++) ok &= t[c * R + r] == a[r * Cc + c];
    CHECK(ok, "transpose of [37 x 70]");
    free(a);
    free(t);
}

/* The product against rp_sgemm_naive (inp @ w^T + b in double) on odd shapes: every N from 1 to
 * 9 (the tiles are 4 rows), widths around the 32-column tiles, with and without a bias; and
 * every row computed alone (N = 1) and inside a shuffled batch is bitwise the same. */
static void test_rows(void)
{
    printf("row-invariant linear\n");
    const int64_t Cs[] = {1, 3, 17, 64, 70, 257};
    const int64_t OCs[] = {1, 5, 31, 32, 33, 64, 100, 257};
    double worst = 0.0;
    int invariant = 1, close = 1;
    uint64_t s = 7;
    for (size_t ci = 0; ci < sizeof Cs / sizeof *Cs; ci++)
        for (size_t oi = 0; oi < sizeof OCs / sizeof *OCs; oi++)
            for (int64_t N = 1; N <= 9; N++)
                for (int bias = 0; bias < 2; bias++) {
                    int64_t C = Cs[ci], OC = OCs[oi];
                    float *w = malloc(sizeof(float) * OC * C), *wt = malloc(sizeof(float) * OC * C);
                    float *x = malloc(sizeof(float) * N * C), *b = malloc(sizeof(float) * OC);
                    float *out = malloc(sizeof(float) * N * OC), *ref = malloc(sizeof(float) * N * OC);
                    float *one = malloc(sizeof(float) * OC), *perm_x = malloc(sizeof(float) * N * C);
                    float *perm_o = malloc(sizeof(float) * N * OC);
                    fill_rand(w, OC * C, &s);
                    fill_rand(x, N * C, &s);
                    fill_rand(b, OC, &s);
                    rp_transpose(wt, w, OC, C);
                    rp_linear_rows_forward(out, x, wt, bias ? b : NULL, N, C, OC);
                    for (int64_t n = 0; n < N; n++)
                        for (int64_t o = 0; o < OC; o++) ref[n * OC + o] = bias ? b[o] : 0.0f;
                    rp_sgemm_naive(0, 1, N, OC, C, 1.0f, x, C, w, C, 1.0f, ref, OC);
                    for (int64_t i = 0; i < N * OC; i++) {
                        /* float sums of C terms of size <= 1: a few C ulp of the largest */
                        double d = fabs((double)out[i] - (double)ref[i]);
                        if (d > worst) worst = d;
                        if (d > 4e-7 * (double)(C + 1)) close = 0;
                    }
                    /* each row alone */
                    for (int64_t n = 0; n < N; n++) {
                        rp_linear_rows_forward(one, x + n * C, wt, bias ? b : NULL, 1, C, OC);
                        invariant &= memcmp(one, out + n * OC, sizeof(float) * OC) == 0;
                    }
                    /* the rows reversed: each lands in another tile position */
                    for (int64_t n = 0; n < N; n++)
                        memcpy(perm_x + n * C, x + (N - 1 - n) * C, sizeof(float) * C);
                    rp_linear_rows_forward(perm_o, perm_x, wt, bias ? b : NULL, N, C, OC);
                    for (int64_t n = 0; n < N; n++)
                        invariant &= memcmp(perm_o + n * OC, out + (N - 1 - n) * OC,
                                            sizeof(float) * OC) == 0;
                    free(w), free(wt), free(x), free(b), free(out), free(ref), free(one);
                    free(perm_x), free(perm_o);
                }
    CHECK(close, "rows = naive within 4e-7 (C + 1): max |diff| %.3g", worst);
    CHECK(invariant, "every row bitwise the same alone, in a batch and in another tile position");
    printf("  max |diff| against the double reference: %.3g\n", worst);

    /* large enough for OpenMP: 1 thread and 2 threads give the same bits */
    const int64_t N = 64, C = 200, OC = 300;
    float *w = malloc(sizeof(float) * OC * C), *wt = malloc(sizeof(float) * OC * C);
    float *x = malloc(sizeof(float) * N * C), *o1 = malloc(sizeof(float) * N * OC);
    float *o2 = malloc(sizeof(float) * N * OC);
    fill_rand(w, OC * C, &s);
    fill_rand(x, N * C, &s);
    rp_transpose(wt, w, OC, C);
    int threads = rp_blas_threads();
    rp_blas_set_threads(1);
    rp_linear_rows_forward(o1, x, wt, NULL, N, C, OC);
    rp_blas_set_threads(2);
    rp_linear_rows_forward(o2, x, wt, NULL, N, C, OC);
    rp_blas_set_threads(threads);
    CHECK(memcmp(o1, o2, sizeof(float) * N * OC) == 0, "1 and 2 threads: the same bits");
    free(w), free(wt), free(x), free(o1), free(o2);
}

int main(void)
{
    test_transpose();
    test_rows();
    return check_summary("test_decode");
}
