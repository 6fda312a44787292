/* Bit-exact checks of the layer kernels (core/nn/layers.h), beside test_layers.c's tolerance checks:
 *
 *  - every _set variant (linear, LayerNorm, ReLU, GELU, dropout) against its accumulating entry
 *    run on a zeroed buffer, bit for bit, also in place where the contract allows it (linear:
 *    dinp = inp; activations and dropout: dinp = dout) and with garbage in dinp beforehand;
 *  - the sums whose order the kernels promise (the bias gradient's column sums, LayerNorm's
 *    statistics and both of its backward sums) against naive double loops written here in that
 *    order: the same operations in the same order give the same bits, so any change of the order
 *    (a vector reduction, a split of a column over threads) fails;
 *  - ReLU on special values (signed zeros, subnormals, infinities, NaNs of both signs) against
 *    its one-line definition;
 *  - all of it with 1 and 2 OpenMP threads, on sizes above the OpenMP thresholds and on odd
 *    ones (rows not a multiple of LayerNorm's 8-row blocks, columns above the bias loop's
 *    512-column block).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "check.h"
#include "rp.h"

static uint64_t rng_state = 20250301;

static float *rnd(int64_t n, double lo, double hi)
{
    return check_rand_floats(&rng_state, n > 0 ? n : 1, lo, hi);
}

static float *zeros(int64_t n)
{
    float *p = calloc((size_t)(n > 0 ? n : 1), sizeof(float));
    if (!p) exit(2);
    return p;
}

/* Garbage (NaN) in a buffer an overwriting kernel must not read. */
static void poison(float *p, int64_t n)
{
    for (int64_t i = 0; i < n; i++) p[i] = NAN;
}

/* Exact zeros, negative zeros and subnormals sprinkled in from position at on (the signs of zero
 * terms matter for the bitwise claims of the _set variants; inputs and gradients get them at
 * different positions, so a -0 gradient meets a positive input). */
static void sprinkle(float *x, int64_t n, int64_t at)
{
    for (int64_t i = at; i < n; i += 37) x[i] = 0.0f;
    for (int64_t i = at + 11; i < n; i += 41) x[i] = -0.0f;
    for (int64_t i = at + 5; i < n; i += 97) x[i] = 1e-41f;
}

/* (N, C) values in [-1, 1], and +-2^40 at every (n, c) with n + c a multiple of 8, signs
 * alternating along each row and each column, so that the large values cancel in row and column
 * sums. A double sum rounds the small values it adds to a large partial sum to multiples of
 * 2^-12, so the order of the sum shows in its result even after rounding to float; without them
 * sums of a few thousand floats in [-1, 1] are exact in double and would hide any reordering. */
static float *cancelling(int64_t N, int64_t C)
{
    float *p = rnd(N * C, -1, 1);
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            if ((n + c) % 8 == 0) p[n * C + c] = (n + c) / 8 % 2 ? -0x1p40f : 0x1p40f;
    return p;
}

static int same_bits(const float *a, const float *b, int64_t n)
{
    return memcmp(a, b, (size_t)n * sizeof(float)) == 0;
}

/* CHECK(same bits) with the first differing element in the message. */
static void check_same(const float *got, const float *want, int64_t n, const char *label)
{
    int64_t i = 0;
    while (i < n && memcmp(&got[i], &want[i], sizeof(float)) == 0) i++;
    CHECK(i == n, "%s: bit for bit (first difference at [%lld]: %a vs %a)", label, (long long)i,
          i < n ? (double)got[i] : 0.0, i < n ? (double)want[i] : 0.0);
}

/* ---------------------------------------------------------------- naive same-order references */

/* db[j] += (float)(sum over n = 0 .. N-1 of (double)g[n][j]), summed in increasing n. */
static void ref_bias_grad(float *db, const float *g, int64_t N, int64_t OC)
{
    for (int64_t j = 0; j < OC; j++) {
        double s = 0.0;
        for (int64_t n = 0; n < N; n++) s += (double)g[n * OC + j];
        db[j] += (float)s;
    }
}

/* The forward of core/nn/layernorm.c, one row at a time in the order its header promises. */
static void ref_ln_forward(float *out, float *mean, float *rstd, const float *inp, const float *w,
                           const float *b, int64_t N, int64_t C)
{
    for (int64_t n = 0; n < N; n++) {
        const float *x = inp + n * C;
        double s = 0.0;
        for (int64_t c = 0; c < C; c++) s += (double)x[c];
        double m = s / (double)C;
        double v = 0.0;
        for (int64_t c = 0; c < C; c++) {
            double d = (double)x[c] - m;
            v += d * d;
        }
        v /= (double)C;
        double r = 1.0 / sqrt(v + 1e-5);
        for (int64_t c = 0; c < C; c++)
            out[n * C + c] = (float)(((double)x[c] - m) * r * (double)w[c] + (double)b[c]);
        mean[n] = (float)m;
        rstd[n] = (float)r;
    }
}

/* The backward's sums: per row sg, sgx in increasing c; per column dw, db in increasing n. */
static void ref_ln_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                            const float *mean, const float *rstd, const float *w, int64_t N,
                            int64_t C)
{
    for (int64_t n = 0; n < N; n++) {
        const float *x = inp + n * C, *g = dout + n * C;
        double m = (double)mean[n], r = (double)rstd[n], sg = 0.0, sgx = 0.0;
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
            dinp[n * C + c] += (float)(r * (gc - sg - xh * sgx));
        }
    }
    for (int64_t c = 0; c < C; c++) {
        double aw = 0.0, ab = 0.0;
        for (int64_t n = 0; n < N; n++) {
            double g = (double)dout[n * C + c];
            aw += g * (((double)inp[n * C + c] - (double)mean[n]) * (double)rstd[n]);
            ab += g;
        }
        dw[c] += (float)aw;
        db[c] += (float)ab;
    }
}

/* ---------------------------------------------------------------- tests */

static void test_linear(int64_t N, int64_t C, int64_t OC, const char *tag)
{
    char label[128];
    float *x = rnd(N * C, -2, 2), *w = rnd(OC * C, -1, 1), *g = cancelling(N, OC);
    sprinkle(g, N * OC, 0);
    float *dw0 = rnd(OC * C, -1, 1), *db0 = rnd(OC, -1, 1);

    /* the bias gradient alone against the naive double sum */
    float *db = check_copy_floats(db0, OC), *want_db = check_copy_floats(db0, OC);
    rp_linear_backward(NULL, NULL, db, g, x, w, N, C, OC);
    ref_bias_grad(want_db, g, N, OC);
    snprintf(label, sizeof label, "%s linear db = naive double column sums", tag);
    check_same(db, want_db, OC, label);

    /* _set = accumulate onto zeros (dinp), dw and db accumulate in both */
    float *di_a = zeros(N * C), *dw_a = check_copy_floats(dw0, OC * C);
    float *db_a = check_copy_floats(db0, OC);
    rp_linear_backward(di_a, dw_a, db_a, g, x, w, N, C, OC);
    float *di_s = rnd(N * C, -1, 1), *dw_s = check_copy_floats(dw0, OC * C);
    float *db_s = check_copy_floats(db0, OC);
    poison(di_s, N * C);
    rp_linear_backward_set(di_s, dw_s, db_s, g, x, w, N, C, OC);
    snprintf(label, sizeof label, "%s linear_backward_set dinp = accumulate onto zeros", tag);
    check_same(di_s, di_a, N * C, label);
    snprintf(label, sizeof label, "%s linear_backward_set dw, db accumulate", tag);
    CHECK(same_bits(dw_s, dw_a, OC * C) && same_bits(db_s, db_a, OC), "%s", label);

    /* in place: dinp = inp (dw reads inp before dinp overwrites it) */
    float *xi = check_copy_floats(x, N * C), *dw_i = check_copy_floats(dw0, OC * C);
    float *db_i = check_copy_floats(db0, OC);
    rp_linear_backward_set(xi, dw_i, db_i, g, xi, w, N, C, OC);
    snprintf(label, sizeof label, "%s linear_backward_set in place (dinp = inp)", tag);
    CHECK(same_bits(xi, di_a, N * C) && same_bits(dw_i, dw_a, OC * C) &&
              same_bits(db_i, db_a, OC),
          "%s", label);
    free(x), free(w), free(g), free(dw0), free(db0), free(db), free(want_db), free(di_a);
    free(dw_a), free(db_a), free(di_s), free(dw_s), free(db_s), free(xi), free(dw_i), free(db_i);
}

static void test_layernorm(int64_t N, int64_t C, const char *tag)
{
    char label[128];
    float *x = cancelling(N, C), *w = rnd(C, 0.5, 1.5), *b = rnd(C, -0.5, 0.5);
    float *g = cancelling(N, C);
    if (N > 1)
        for (int64_t c = 0; c < C; c++) x[C + c] = 1000.0f + (float)c / (float)C; /* large mean */
    sprinkle(g, N * C, 0);
    float *out = rnd(N * C, 0, 1), *mean = rnd(N, 0, 1), *rstd = rnd(N, 0, 1);
    float *wo = zeros(N * C), *wm = zeros(N), *wr = zeros(N);
    rp_layernorm_forward(out, mean, rstd, x, w, b, N, C);
    ref_ln_forward(wo, wm, wr, x, w, b, N, C);
    snprintf(label, sizeof label, "%s layernorm forward = naive same-order double loops", tag);
    CHECK(same_bits(out, wo, N * C) && same_bits(mean, wm, N) && same_bits(rstd, wr, N), "%s",
          label);

    float *di = rnd(N * C, -1, 1), *dw = rnd(C, -1, 1), *db = rnd(C, -1, 1);
    float *wdi = check_copy_floats(di, N * C), *wdw = check_copy_floats(dw, C);
    float *wdb = check_copy_floats(db, C);
    rp_layernorm_backward(di, dw, db, g, x, mean, rstd, w, N, C);
    ref_ln_backward(wdi, wdw, wdb, g, x, mean, rstd, w, N, C);
    snprintf(label, sizeof label, "%s layernorm backward = naive same-order double loops", tag);
    CHECK(same_bits(di, wdi, N * C) && same_bits(dw, wdw, C) && same_bits(db, wdb, C), "%s",
          label);

    /* _set = accumulate onto zeros; dw, db still accumulate */
    float *za = zeros(N * C), *zs = rnd(N * C, -1, 1);
    float *dwa = check_copy_floats(dw, C), *dba = check_copy_floats(db, C);
    float *dws = check_copy_floats(dw, C), *dbs = check_copy_floats(db, C);
    poison(zs, N * C);
    rp_layernorm_backward(za, dwa, dba, g, x, mean, rstd, w, N, C);
    rp_layernorm_backward_set(zs, dws, dbs, g, x, mean, rstd, w, N, C);
    snprintf(label, sizeof label, "%s layernorm_backward_set = accumulate onto zeros", tag);
    CHECK(same_bits(zs, za, N * C) && same_bits(dws, dwa, C) && same_bits(dbs, dba, C), "%s",
          label);
    free(x), free(w), free(b), free(g), free(out), free(mean), free(rstd), free(wo), free(wm);
    free(wr), free(di), free(dw), free(db), free(wdi), free(wdw), free(wdb), free(za), free(zs);
    free(dwa), free(dba), free(dws), free(dbs);
}

typedef void (*bwd_fn)(float *, const float *, const float *, int64_t);

/* One elementwise backward and its _set: onto zeros, over garbage, in place (dinp = dout). */
static void check_set_pair(bwd_fn acc, bwd_fn set, const float *dout, const float *inp, int64_t n,
                           const char *label)
{
    float *a = zeros(n), *s = zeros(n), *ip = check_copy_floats(dout, n);
    poison(s, n);
    acc(a, dout, inp, n);
    set(s, dout, inp, n);
    set(ip, ip, inp, n);
    CHECK(same_bits(s, a, n), "%s: _set = accumulate onto zeros", label);
    CHECK(same_bits(ip, a, n), "%s: _set in place (dinp = dout)", label);
    free(a), free(s), free(ip);
}

static void test_elementwise(int64_t n, const char *tag)
{
    char label[128];
    float *x = rnd(n, -3, 3), *d = rnd(n, -1, 1);
    sprinkle(x, n, 0);
    sprinkle(d, n, 3);
    snprintf(label, sizeof label, "%s relu_backward", tag);
    check_set_pair(rp_relu_backward, rp_relu_backward_set, d, x, n, label);
    snprintf(label, sizeof label, "%s gelu_backward", tag);
    check_set_pair(rp_gelu_backward, rp_gelu_backward_set, d, x, n, label);

    float *mask = rnd(n, 0, 1);
    for (int64_t i = 0; i < n; i++) mask[i] = mask[i] < 0.25f ? 0.0f : (float)(1.0 / 0.75);
    for (int k = 0; k < 2; k++) {
        float p = k ? 0.25f : 0.0f;
        float *a = zeros(n), *s = zeros(n), *ip = check_copy_floats(d, n);
        poison(s, n);
        rp_dropout_backward(a, d, k ? mask : NULL, p, n);
        rp_dropout_backward_set(s, d, k ? mask : NULL, p, n);
        rp_dropout_backward_set(ip, ip, k ? mask : NULL, p, n);
        CHECK(same_bits(s, a, n) && same_bits(ip, a, n),
              "%s dropout_backward_set (p %g) = accumulate onto zeros, also in place", tag,
              (double)p);
        free(a), free(s), free(ip);
    }
    free(x), free(d), free(mask);
}

/* ReLU's definition on every kind of float, elementwise: out = x <= 0 ? 0 : x (NaN passes),
 * backward term = x <= 0 ? 0 : dout. */
static void test_relu_specials(void)
{
    const float sv[] = {0.0f,      -0.0f,      1e-45f,    -1e-45f,  1e-41f, -1e-41f,
                        1.0f,      -1.0f,      3e38f,     -3e38f,   INFINITY, -INFINITY,
                        NAN,       -NAN,       0.5f,      -0.5f};
    enum { K = (int)(sizeof sv / sizeof sv[0]) };
    /* n above the OpenMP threshold so the parallel vector loop runs; each value at many
     * positions (vector lanes and the scalar tail) */
    int64_t n = 70001;
    float *x = zeros(n), *d = rnd(n, -1, 1), *out = zeros(n), *acc = rnd(n, -1, 1);
    float *acc0 = check_copy_floats(acc, n);
    for (int64_t i = 0; i < n; i++) x[i] = sv[(i * 7) % K];
    rp_relu_forward(out, x, n);
    rp_relu_backward(acc, d, x, n);
    int64_t bad_f = 0, bad_b = 0;
    for (int64_t i = 0; i < n; i++) {
        float wf = x[i] <= 0.0f ? 0.0f : x[i];
        float wb = acc0[i] + (x[i] <= 0.0f ? 0.0f : d[i]);
        if (memcmp(&out[i], &wf, sizeof(float)) != 0) bad_f++;
        if (memcmp(&acc[i], &wb, sizeof(float)) != 0) bad_b++;
    }
    CHECK(bad_f == 0, "relu forward on special values = x <= 0 ? 0 : x (%lld differ)",
          (long long)bad_f);
    CHECK(bad_b == 0, "relu backward on special values = dinp + (x <= 0 ? 0 : dout) (%lld differ)",
          (long long)bad_b);
    free(x), free(d), free(out), free(acc), free(acc0);
}

/* rp_relu_backward_set_bias: dinp as rp_relu_backward_set, db as rp_linear_backward's bias
 * gradient on that dinp (naive double column sums), both bit for bit; in place too. */
static void test_relu_bias(int64_t N, int64_t F, const char *tag)
{
    char label[128];
    float *g = cancelling(N, F), *x = rnd(N * F, -1, 1), *db0 = rnd(F, -1, 1);
    sprinkle(g, N * F, 3);
    float *want = zeros(N * F), *want_db = check_copy_floats(db0, F);
    rp_relu_backward_set(want, g, x, N * F);
    ref_bias_grad(want_db, want, N, F);
    float *d = rnd(N * F, -1, 1), *db = check_copy_floats(db0, F);
    poison(d, N * F);
    rp_relu_backward_set_bias(d, db, g, x, N, F);
    snprintf(label, sizeof label, "%s relu_backward_set_bias = relu_backward_set + naive db", tag);
    CHECK(same_bits(d, want, N * F) && same_bits(db, want_db, F), "%s", label);
    float *gi = check_copy_floats(g, N * F), *dbi = check_copy_floats(db0, F);
    rp_relu_backward_set_bias(gi, dbi, gi, x, N, F);
    snprintf(label, sizeof label, "%s relu_backward_set_bias in place (dinp = dout)", tag);
    CHECK(same_bits(gi, want, N * F) && same_bits(dbi, want_db, F), "%s", label);
    free(g), free(x), free(db0), free(want), free(want_db), free(d), free(db), free(gi), free(dbi);
}

static void run_all(void)
{
    test_linear(7, 13, 5, "tiny");
    test_linear(301, 77, 128, "odd");
    test_linear(2048, 64, 128, "OC 128");
    test_linear(600, 40, 1100, "OC 1100");
    test_layernorm(1, 7, "1 row");
    test_layernorm(13, 37, "13 rows");
    test_layernorm(1027, 128, "1027 rows");
    test_layernorm(40, 600, "C 600");
    test_elementwise(29, "n 29");
    test_elementwise(200003, "n 200003");
    test_relu_specials();
    test_relu_bias(9, 5, "tiny");
    test_relu_bias(1000, 512, "F 512");
    test_relu_bias(300, 1100, "F 1100");
}

int main(int argc, char **argv)
{
    (void)argc;
    rp_blas_fix_coretype(argv);
    int t0 = rp_blas_threads();
    for (int t = 1; t <= 2; t++) {
        rp_blas_set_threads(t);
        printf("%d OpenMP thread%s\n", t, t > 1 ? "s" : "");
        run_all();
    }
    rp_blas_set_threads(t0);
    return check_summary("test_layers_exact");
}
