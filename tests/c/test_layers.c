/* Layer kernels (core/nn/layers.h) against double-precision references written here.
 *
 * For every kernel: the forward against a naive double reference on odd sizes; the backward
 * against central finite differences of L = sum(dout_fixed * out), where out comes from the
 * DOUBLE reference (so the differences are accurate to ~1e-9 and the tolerance only has to cover
 * the float rounding of the kernel's gradient; the forward check ties the kernel to the same
 * function); backward accumulates (two calls on pre-filled buffers = prefill + 2 x one call) and
 * skips NULL gradients; thread-count independence for the OpenMP loops.
 *
 * Finite differences: step h = 1e-3 on O(1) values. Truncation error h^2/6 * |f'''| ~ 2e-7 for
 * the smooth kernels (f''' = O(1) at these sizes), roundoff 1e-16 * |L| / h ~ 1e-12. The kernels
 * compute in float with double sums, so their gradients carry relative errors of a few 1e-7.
 * Tolerance: 2e-5 * max(1, max|fd|) (absolute), two orders above the expected error and far
 * below the size of any formula error (a wrong term is O(|gradient|)).
 */
#include <float.h>
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

static uint64_t rng_state = 20240611;

#define FD_H 1e-3
#define FD_RTOL 2e-5

/* ---------------------------------------------------------------- helpers */

static float *falloc(int64_t n)
{
    float *p = calloc((size_t)(n > 0 ? n : 1), sizeof(float));
    if (!p) {
        printf("FATAL: out of memory\n");
        exit(2);
    }
    return p;
}

static double *dalloc(int64_t n)
{
    double *p = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    if (!p) {
        printf("FATAL: out of memory\n");
        exit(2);
    }
    return p;
}

static void fill(float *x, int64_t n, double lo, double hi)
{
    for (int64_t i = 0; i < n; i++) x[i] = (float)check_rand(&rng_state, lo, hi);
}

/* Uniform values with |x| in [lo, hi] and a random sign (keeps FD steps away from kinks). */
static void fill_away_from_zero(float *x, int64_t n, double lo, double hi)
{
    for (int64_t i = 0; i < n; i++) {
        double v = check_rand(&rng_state, lo, hi);
        x[i] = (float)(check_rand(&rng_state, 0.0, 1.0) < 0.5 ? -v : v);
    }
}

static void to_double(double *dst, const float *src, int64_t n)
{
    for (int64_t i = 0; i < n; i++) dst[i] = (double)src[i];
}

static float *fdup(const float *src, int64_t n)
{
    float *p = falloc(n);
    memcpy(p, src, (size_t)n * sizeof(float));
    return p;
}

static double max_abs_d(const double *x, int64_t n)
{
    double m = 0.0;
    for (int64_t i = 0; i < n; i++)
        if (fabs(x[i]) > m) m = fabs(x[i]);
    return m;
}

/* Largest error seen by any finite-difference check (for the final line). */
static double worst_fd_abs = 0.0, worst_fd_rel = 0.0;

typedef double (*objective_fn)(const void *ctx);

/* Central differences of obj with respect to each of the n doubles at param (which obj reads
 * through ctx), compared with the kernel's gradient. Prints max abs and rel error. */
static void fd_check(const char *label, objective_fn obj, const void *ctx, double *param,
                     int64_t n, const float *grad)
{
    double *fd = dalloc(n);
    for (int64_t i = 0; i < n; i++) {
        double save = param[i];
        param[i] = save + FD_H;
        double lp = obj(ctx);
        param[i] = save - FD_H;
        double lm = obj(ctx);
        param[i] = save;
        fd[i] = (lp - lm) / (2.0 * FD_H);
    }
    double scale = max_abs_d(fd, n);
    if (scale < 1.0) scale = 1.0;
    double mabs = 0.0, mrel = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)grad[i] - fd[i]);
        double r = e / fmax(fabs(fd[i]), 1e-2);
        if (e > mabs) mabs = e;
        if (r > mrel) mrel = r;
    }
    if (mabs > worst_fd_abs) worst_fd_abs = mabs;
    if (mrel > worst_fd_rel) worst_fd_rel = mrel;
    char full[160];
    snprintf(full, sizeof full, "%s vs finite differences (max rel err %.3g, rel to max(|fd|,1e-2))",
             label, mrel);
    CHECK_CLOSE(grad, fd, n, FD_RTOL * scale, full);
    free(fd);
}

/* Checks accumulation: want = prefill + 2 * once, elementwise (float rounding only). */
static void check_accum(const char *label, const float *twice, const float *prefill,
                        const float *once, int64_t n)
{
    double *want = dalloc(n);
    for (int64_t i = 0; i < n; i++) want[i] = (double)prefill[i] + 2.0 * (double)once[i];
    double tol = 1e-6 * (max_abs_d(want, n) + 1.0);
    char full[160];
    snprintf(full, sizeof full, "%s accumulates (2 calls on a prefill)", label);
    CHECK_CLOSE(twice, want, n, tol, full);
    free(want);
}

static int same_bits(const float *a, const float *b, int64_t n)
{
    return memcmp(a, b, (size_t)n * sizeof(float)) == 0;
}

/* Relative check for elementwise values with a wide range of magnitudes:
 * |got - want| <= rtol * |want| + atol. */
static void check_rel(const char *label, const float *got, const double *want, int64_t n,
                      double rtol, double atol)
{
    int64_t bad = 0, imax = 0;
    double mrel = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double g = (double)got[i], w = want[i];
        int ok;
        if (isnan(w) || isnan(g))
            ok = isnan(w) && isnan(g);
        else if (isinf(w) || isinf(g))
            ok = g == w;
        else
            ok = fabs(g - w) <= rtol * fabs(w) + atol;
        /* relative error reported where |want| is above atol (below, atol decides) */
        double rel = (isfinite(g) && isfinite(w) && fabs(w) > atol) ? fabs(g - w) / fabs(w) : 0.0;
        if (rel > mrel) {
            mrel = rel;
            imax = i;
        }
        if (!ok) {
            if (bad < 5) printf("    [%lld] got %.9g want %.17g\n", (long long)i, g, w);
            bad++;
        }
    }
    CHECK(bad == 0, "%s: %lld of %lld elements off (rtol %.3g, atol %.3g)", label, (long long)bad,
          (long long)n, rtol, atol);
    if (!bad)
        printf("  ok %s: max rel err %.3g at [%lld] (n %lld)\n", label, mrel, (long long)imax,
               (long long)n);
}

/* ================================================================ embedding */

enum { EN = 7, ET = 3, EC = 13, EV = 11 };

static void ref_embedding(double *out, const int32_t *tok, const double *wte, const double *wpe,
                          int64_t N, int64_t T, int64_t C)
{
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            out[n * C + c] = wte[tok[n] * C + c] + (wpe ? wpe[(n % T) * C + c] : 0.0);
}

typedef struct {
    const int32_t *tok;
    double *wte, *wpe;
    const double *dout;
} emb_ctx;

static double emb_obj(const void *p)
{
    const emb_ctx *x = p;
    double out[EN * EC], L = 0.0;
    ref_embedding(out, x->tok, x->wte, x->wpe, EN, ET, EC);
    for (int i = 0; i < EN * EC; i++) L += x->dout[i] * out[i];
    return L;
}

static void test_embedding(void)
{
    printf("embedding\n");
    /* repeated tokens (3 three times, 1 twice); token 2 never occurs */
    const int32_t tok[EN] = {3, 1, 3, 0, 3, 10, 1};
    float *wte = falloc(EV * EC), *wpe = falloc(ET * EC), *out = falloc(EN * EC);
    float *dout = falloc(EN * EC);
    double *wte_d = dalloc(EV * EC), *wpe_d = dalloc(ET * EC), *want = dalloc(EN * EC);
    double *dout_d = dalloc(EN * EC);
    fill(wte, EV * EC, -1, 1);
    fill(wpe, ET * EC, -1, 1);
    fill(dout, EN * EC, -1, 1);
    to_double(wte_d, wte, EV * EC);
    to_double(wpe_d, wpe, ET * EC);
    to_double(dout_d, dout, EN * EC);

    rp_embedding_forward(out, tok, wte, NULL, EN, ET, EC);
    ref_embedding(want, tok, wte_d, NULL, EN, ET, EC);
    CHECK_CLOSE(out, want, EN * EC, 0.0, "embedding forward, no wpe (exact gather)");
    rp_embedding_forward(out, tok, wte, wpe, EN, ET, EC);
    ref_embedding(want, tok, wte_d, wpe_d, EN, ET, EC);
    CHECK_CLOSE(out, want, EN * EC, 1.2e-7, "embedding forward with wpe (one float add)");

    /* backward from zero */
    float *dwte = falloc(EV * EC), *dwpe = falloc(ET * EC);
    rp_embedding_backward(dwte, dwpe, dout, tok, EN, ET, EC);
    emb_ctx ctx = {tok, wte_d, wpe_d, dout_d};
    fd_check("embedding dwte", emb_obj, &ctx, wte_d, EV * EC, dwte);
    fd_check("embedding dwpe", emb_obj, &ctx, wpe_d, ET * EC, dwpe);
    /* explicit: the row of token 3 is the sum of dout rows 0, 2, 4 */
    {
        double w3[EC];
        for (int c = 0; c < EC; c++)
            w3[c] = (double)dout[0 * EC + c] + (double)dout[2 * EC + c] + (double)dout[4 * EC + c];
        CHECK_CLOSE(dwte + 3 * EC, w3, EC, 3e-7, "dwte row of token 3 = dout rows 0+2+4");
        int zero = 1;
        for (int c = 0; c < EC; c++) zero &= dwte[2 * EC + c] == 0.0f;
        CHECK(zero, "dwte row of the absent token 2 stays 0");
    }

    /* accumulation on a prefill, NULL dwpe */
    float *pre_te = falloc(EV * EC), *pre_pe = falloc(ET * EC);
    fill(pre_te, EV * EC, -1, 1);
    fill(pre_pe, ET * EC, -1, 1);
    float *acc_te = fdup(pre_te, EV * EC), *acc_pe = fdup(pre_pe, ET * EC);
    rp_embedding_backward(acc_te, acc_pe, dout, tok, EN, ET, EC);
    rp_embedding_backward(acc_te, acc_pe, dout, tok, EN, ET, EC);
    check_accum("embedding dwte", acc_te, pre_te, dwte, EV * EC);
    check_accum("embedding dwpe", acc_pe, pre_pe, dwpe, ET * EC);
    float *only_te = falloc(EV * EC), *only_pe = falloc(ET * EC);
    rp_embedding_backward(only_te, NULL, dout, tok, EN, ET, EC);
    rp_embedding_backward(NULL, only_pe, dout, tok, EN, ET, EC);
    CHECK(same_bits(only_te, dwte, EV * EC), "embedding backward with dwpe = NULL: same dwte");
    CHECK(same_bits(only_pe, dwpe, ET * EC), "embedding backward with dwte = NULL: same dwpe");

    free(wte), free(wpe), free(out), free(dout), free(wte_d), free(wpe_d), free(want);
    free(dout_d), free(dwte), free(dwpe), free(pre_te), free(pre_pe), free(acc_te), free(acc_pe);
    free(only_te), free(only_pe);
}

/* ================================================================ layernorm */

enum { LN_N = 7, LN_C = 13 };

static void ref_layernorm(double *out, double *mean, double *rstd, const double *inp,
                          const double *w, const double *b, int64_t N, int64_t C)
{
    for (int64_t n = 0; n < N; n++) {
        const double *x = inp + n * C;
        double m = 0.0, v = 0.0;
        for (int64_t c = 0; c < C; c++) m += x[c];
        m /= (double)C;
        for (int64_t c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
        v /= (double)C;
        double r = 1.0 / sqrt(v + 1e-5);
        for (int64_t c = 0; c < C; c++) out[n * C + c] = (x[c] - m) * r * w[c] + b[c];
        if (mean) mean[n] = m;
        if (rstd) rstd[n] = r;
    }
}

typedef struct {
    double *inp, *w, *b;
    const double *dout;
    int64_t N, C;
} ln_ctx;

static double ln_obj(const void *p)
{
    const ln_ctx *x = p;
    double *out = dalloc(x->N * x->C), L = 0.0;
    ref_layernorm(out, NULL, NULL, x->inp, x->w, x->b, x->N, x->C);
    for (int64_t i = 0; i < x->N * x->C; i++) L += x->dout[i] * out[i];
    free(out);
    return L;
}

static void test_layernorm(void)
{
    printf("layernorm\n");
    const int64_t N = LN_N, C = LN_C, NC = LN_N * LN_C;
    float *inp = falloc(NC), *w = falloc(C), *b = falloc(C), *out = falloc(NC);
    float *mean = falloc(N), *rstd = falloc(N), *dout = falloc(NC);
    double *inp_d = dalloc(NC), *w_d = dalloc(C), *b_d = dalloc(C), *want = dalloc(NC);
    double *mean_d = dalloc(N), *rstd_d = dalloc(N), *dout_d = dalloc(NC);
    fill(inp, NC, -2, 2);
    /* row 1: a large mean (1000 + noise): float statistics would lose the variance */
    for (int64_t c = 0; c < C; c++) inp[1 * C + c] = 1000.0f + (float)check_rand(&rng_state, -1, 1);
    /* row 2: constant (variance 0: out = b, rstd = 1/sqrt(eps)) */
    for (int64_t c = 0; c < C; c++) inp[2 * C + c] = 0.25f;
    fill(w, C, 0.5, 1.5);
    fill(b, C, -0.5, 0.5);
    fill(dout, NC, -1, 1);
    to_double(inp_d, inp, NC);
    to_double(w_d, w, C);
    to_double(b_d, b, C);
    to_double(dout_d, dout, NC);

    rp_layernorm_forward(out, mean, rstd, inp, w, b, N, C);
    ref_layernorm(want, mean_d, rstd_d, inp_d, w_d, b_d, N, C);
    /* out = xhat * w + b with |xhat| <= sqrt(C) ~ 3.6: float rounding ~ 4 * 6e-8 */
    CHECK_CLOSE(out, want, NC, 1e-6, "layernorm forward (row 1 has mean 1000, row 2 is constant)");
    check_rel("layernorm mean", mean, mean_d, N, 1.2e-7, 1e-12);
    check_rel("layernorm rstd", rstd, rstd_d, N, 1.2e-7, 0.0);

    /* backward with the mean-1000 row: xhat is recomputed from the float mean, which is off by
     * up to ulp(1000)/2 = 3.1e-5, i.e. xhat is shifted by up to 3.1e-5 * rstd (rstd ~ 1.7 here)
     * = 5e-5 on that row; dinp = rstd * (g - mean(g) - xhat * mean(g * xhat)) then moves by about
     * rstd * 5e-5 * |g| * a few ~ 1e-4 (PyTorch saves a float mean too): tolerance 5e-4 there.
     * Rows with |mean| / std ~ 1 see none of this (row 0 here and the strict checks below). */
    {
        float *di = falloc(NC);
        rp_layernorm_backward(di, NULL, NULL, dout, inp, mean, rstd, w, N, C);
        ln_ctx c0 = {inp_d, w_d, b_d, dout_d, N, C};
        double *fd = dalloc(NC);
        for (int64_t i = 0; i < NC; i++) {
            double x0 = inp_d[i];
            inp_d[i] = x0 + FD_H;
            double lp = ln_obj(&c0);
            inp_d[i] = x0 - FD_H;
            double lm = ln_obj(&c0);
            inp_d[i] = x0;
            fd[i] = (lp - lm) / (2.0 * FD_H);
        }
        /* only the finite rows: row 2 (constant) has rstd 316, see below */
        CHECK_CLOSE(di + 1 * C, fd + 1 * C, C, 5e-4, "layernorm dinp on the mean-1000 row");
        CHECK_CLOSE(di, fd, C, FD_RTOL * fmax(1.0, max_abs_d(fd, C)), "layernorm dinp, row 0");
        free(fd), free(di);
    }

    /* backward on rows of random values (rows 1 and 2 replaced). The constant row would make
     * the function non-smooth on the scale of h (rstd = 316: entries of d out / d inp reach ~300
     * and FD truncation ~ h^2 rstd^3). */
    for (int64_t c = 0; c < C; c++) {
        inp[1 * C + c] = (float)check_rand(&rng_state, -3, 3);
        inp[2 * C + c] = (float)check_rand(&rng_state, -1, 1);
    }
    to_double(inp_d, inp, NC);
    rp_layernorm_forward(out, mean, rstd, inp, w, b, N, C);
    float *dinp = falloc(NC), *dw = falloc(C), *db = falloc(C);
    rp_layernorm_backward(dinp, dw, db, dout, inp, mean, rstd, w, N, C);
    ln_ctx ctx = {inp_d, w_d, b_d, dout_d, N, C};
    fd_check("layernorm dinp", ln_obj, &ctx, inp_d, NC, dinp);
    fd_check("layernorm dw", ln_obj, &ctx, w_d, C, dw);
    fd_check("layernorm db", ln_obj, &ctx, b_d, C, db);

    /* accumulation and NULL pointers */
    float *p_i = falloc(NC), *p_w = falloc(C), *p_b = falloc(C);
    fill(p_i, NC, -1, 1);
    fill(p_w, C, -1, 1);
    fill(p_b, C, -1, 1);
    float *a_i = fdup(p_i, NC), *a_w = fdup(p_w, C), *a_b = fdup(p_b, C);
    rp_layernorm_backward(a_i, a_w, a_b, dout, inp, mean, rstd, w, N, C);
    rp_layernorm_backward(a_i, a_w, a_b, dout, inp, mean, rstd, w, N, C);
    check_accum("layernorm dinp", a_i, p_i, dinp, NC);
    check_accum("layernorm dw", a_w, p_w, dw, C);
    check_accum("layernorm db", a_b, p_b, db, C);
    float *o_i = falloc(NC), *o_w = falloc(C), *o_b = falloc(C);
    rp_layernorm_backward(o_i, NULL, NULL, dout, inp, mean, rstd, w, N, C);
    rp_layernorm_backward(NULL, o_w, NULL, dout, inp, mean, rstd, w, N, C);
    rp_layernorm_backward(NULL, NULL, o_b, dout, inp, mean, rstd, w, N, C);
    CHECK(same_bits(o_i, dinp, NC) && same_bits(o_w, dw, C) && same_bits(o_b, db, C),
          "layernorm backward with NULL d* pointers: the others are unchanged");

    free(inp), free(w), free(b), free(out), free(mean), free(rstd), free(dout), free(inp_d);
    free(w_d), free(b_d), free(want), free(mean_d), free(rstd_d), free(dout_d), free(dinp);
    free(dw), free(db), free(p_i), free(p_w), free(p_b), free(a_i), free(a_w), free(a_b);
    free(o_i), free(o_w), free(o_b);
}

/* ================================================================ linear */

enum { LI_N = 7, LI_C = 13, LI_OC = 5 };

static void ref_linear(double *out, const double *inp, const double *w, const double *b,
                       int64_t N, int64_t C, int64_t OC)
{
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < OC; o++) {
            double s = b ? b[o] : 0.0;
            for (int64_t c = 0; c < C; c++) s += inp[n * C + c] * w[o * C + c];
            out[n * OC + o] = s;
        }
}

typedef struct {
    double *inp, *w, *b;
    const double *dout;
} lin_ctx;

static double lin_obj(const void *p)
{
    const lin_ctx *x = p;
    double out[LI_N * LI_OC], L = 0.0;
    ref_linear(out, x->inp, x->w, x->b, LI_N, LI_C, LI_OC);
    for (int i = 0; i < LI_N * LI_OC; i++) L += x->dout[i] * out[i];
    return L;
}

static void test_linear(void)
{
    printf("linear\n");
    const int64_t N = LI_N, C = LI_C, OC = LI_OC;
    float *inp = falloc(N * C), *w = falloc(OC * C), *b = falloc(OC), *out = falloc(N * OC);
    float *dout = falloc(N * OC);
    double *inp_d = dalloc(N * C), *w_d = dalloc(OC * C), *b_d = dalloc(OC);
    double *want = dalloc(N * OC), *dout_d = dalloc(N * OC);
    fill(inp, N * C, -1, 1);
    fill(w, OC * C, -1, 1);
    fill(b, OC, -1, 1);
    fill(dout, N * OC, -1, 1);
    to_double(inp_d, inp, N * C);
    to_double(w_d, w, OC * C);
    to_double(b_d, b, OC);
    to_double(dout_d, dout, N * OC);

    /* sums of C = 13 products of magnitude <= 1 plus a bias: float error ~ sqrt(14) * 6e-8 */
    for (int64_t i = 0; i < N * OC; i++) out[i] = NAN; /* forward must overwrite */
    rp_linear_forward(out, inp, w, b, N, C, OC);
    ref_linear(want, inp_d, w_d, b_d, N, C, OC);
    CHECK_CLOSE(out, want, N * OC, 2e-6, "linear forward with bias (out pre-filled with NaN)");
    for (int64_t i = 0; i < N * OC; i++) out[i] = NAN;
    rp_linear_forward(out, inp, w, NULL, N, C, OC);
    ref_linear(want, inp_d, w_d, NULL, N, C, OC);
    CHECK_CLOSE(out, want, N * OC, 2e-6, "linear forward, b = NULL (out pre-filled with NaN)");

    float *dinp = falloc(N * C), *dw = falloc(OC * C), *db = falloc(OC);
    rp_linear_backward(dinp, dw, db, dout, inp, w, N, C, OC);
    lin_ctx ctx = {inp_d, w_d, b_d, dout_d};
    fd_check("linear dinp", lin_obj, &ctx, inp_d, N * C, dinp);
    fd_check("linear dw", lin_obj, &ctx, w_d, OC * C, dw);
    fd_check("linear db", lin_obj, &ctx, b_d, OC, db);

    float *p_i = falloc(N * C), *p_w = falloc(OC * C), *p_b = falloc(OC);
    fill(p_i, N * C, -1, 1);
    fill(p_w, OC * C, -1, 1);
    fill(p_b, OC, -1, 1);
    float *a_i = fdup(p_i, N * C), *a_w = fdup(p_w, OC * C), *a_b = fdup(p_b, OC);
    rp_linear_backward(a_i, a_w, a_b, dout, inp, w, N, C, OC);
    rp_linear_backward(a_i, a_w, a_b, dout, inp, w, N, C, OC);
    check_accum("linear dinp", a_i, p_i, dinp, N * C);
    check_accum("linear dw", a_w, p_w, dw, OC * C);
    check_accum("linear db", a_b, p_b, db, OC);
    float *o_i = falloc(N * C), *o_w = falloc(OC * C), *o_b = falloc(OC);
    rp_linear_backward(o_i, NULL, NULL, dout, inp, w, N, C, OC);
    rp_linear_backward(NULL, o_w, NULL, dout, inp, w, N, C, OC);
    rp_linear_backward(NULL, NULL, o_b, dout, inp, w, N, C, OC);
    CHECK(same_bits(o_i, dinp, N * C) && same_bits(o_w, dw, OC * C) && same_bits(o_b, db, OC),
          "linear backward with NULL d* pointers: the others are unchanged");

    free(inp), free(w), free(b), free(out), free(dout), free(inp_d), free(w_d), free(b_d);
    free(want), free(dout_d), free(dinp), free(dw), free(db), free(p_i), free(p_w), free(p_b);
    free(a_i), free(a_w), free(a_b), free(o_i), free(o_w), free(o_b);
}

/* ================================================================ relu, gelu, residual */

enum { EW_N = 17 };

static double ref_gelu(double x)
{
    /* 0.5 x (1 + erf(x / sqrt 2)) written with erfc(-z) = 1 + erf(z): the literal form cancels
     * to 0 below x ~ -8.3 even in double (checked against the literal form below) */
    return 0.5 * x * erfc(-x / sqrt(2.0));
}

static double ref_gelu_grad(double x)
{
    if (isinf(x)) return x > 0 ? 1.0 : 0.0;
    return 0.5 * erfc(-x / sqrt(2.0)) + x * exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
}

typedef struct {
    int kind; /* 0 relu, 1 gelu, 2 residual (a and b = x[0..n) and x[n..2n)) */
    double *x;
    const double *dout;
    int64_t n;
} ew_ctx;

static double ew_obj(const void *p)
{
    const ew_ctx *e = p;
    double L = 0.0;
    for (int64_t i = 0; i < e->n; i++) {
        double x = e->x[i], y;
        if (e->kind == 0)
            y = x > 0 ? x : 0.0;
        else if (e->kind == 1)
            y = ref_gelu(x);
        else
            y = x + e->x[e->n + i];
        L += e->dout[i] * y;
    }
    return L;
}

static void test_relu_gelu(void)
{
    printf("relu, gelu\n");
    /* special values: zeros, tiny, moderate, large magnitudes */
    const float sv[] = {0.0f,   -0.0f, 1e-30f, -1e-30f, 1e-8f, -1e-8f, 0.5f,   -0.5f,  1.0f,
                        -1.0f,  3.0f,  -3.0f,  5.0f,    -5.0f, 10.0f,  -10.0f, 20.0f,  -20.0f,
                        40.0f,  -40.0f, 1e4f,  -1e4f,   1e30f, -1e30f, 3e38f,  -3e38f};
    const int64_t ns = (int64_t)(sizeof sv / sizeof sv[0]);
    float out[32], din[32], ones[32];
    double want[32];
    for (int64_t i = 0; i < ns; i++) ones[i] = 1.0f;

    rp_relu_forward(out, sv, ns);
    for (int64_t i = 0; i < ns; i++) want[i] = sv[i] > 0 ? (double)sv[i] : 0.0;
    CHECK_CLOSE(out, want, ns, 0.0, "relu forward on special values (exact)");
    {
        float nanin[2] = {NAN, -INFINITY}, nanout[2];
        rp_relu_forward(nanout, nanin, 2);
        CHECK(isnan(nanout[0]) && nanout[1] == 0.0f, "relu(NaN) = NaN, relu(-inf) = 0: %g %g",
              (double)nanout[0], (double)nanout[1]);
    }
    memset(din, 0, sizeof din);
    rp_relu_backward(din, ones, sv, ns);
    for (int64_t i = 0; i < ns; i++) want[i] = sv[i] > 0 ? 1.0 : 0.0;
    CHECK_CLOSE(din, want, ns, 0.0, "relu backward on special values (0 at x = 0)");

    rp_gelu_forward(out, sv, ns);
    for (int64_t i = 0; i < ns; i++) want[i] = ref_gelu((double)sv[i]);
    /* float erfc and expf are accurate to a few ulp; results below ~1e-37 may be subnormal */
    check_rel("gelu forward on special values", out, want, ns, 1e-6, 1e-37);
    memset(din, 0, sizeof din);
    rp_gelu_backward(din, ones, sv, ns);
    for (int64_t i = 0; i < ns; i++) want[i] = ref_gelu_grad((double)sv[i]);
    check_rel("gelu derivative on special values", din, want, ns, 1e-6, 1e-37);
    {
        float infin[2] = {INFINITY, -INFINITY}, g[2] = {0, 0}, o1[2] = {1, 1};
        rp_gelu_backward(g, o1, infin, 2);
        CHECK(g[0] == 1.0f && g[1] == 0.0f, "gelu'(+inf) = 1, gelu'(-inf) = 0: %g %g",
              (double)g[0], (double)g[1]);
        float y[1];
        rp_gelu_forward(y, infin, 1);
        CHECK(y[0] == INFINITY, "gelu(+inf) = inf: %g", (double)y[0]);
    }
    /* the reference identity: erfc form = literal erf form where the latter does not cancel */
    {
        double worst = 0.0;
        for (double x = -6.0; x <= 6.0; x += 0.25) {
            double lit = 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
            double d = fabs(lit - ref_gelu(x)) / fmax(fabs(lit), 1e-300);
            if (x != 0.0 && d > worst) worst = d;
        }
        CHECK(worst < 1e-7, "reference gelu = 0.5 x (1 + erf(x/sqrt2)) on [-6, 6]: rel %.3g", worst);
    }

    /* random values, away from 0 (relu's kink), forward and FD */
    float x[EW_N], dout[EW_N], g[EW_N];
    double xd[EW_N], dd[EW_N], w[EW_N];
    fill_away_from_zero(x, EW_N, 0.05, 4.0);
    fill(dout, EW_N, -1, 1);
    to_double(xd, x, EW_N);
    to_double(dd, dout, EW_N);
    rp_gelu_forward(out, x, EW_N);
    for (int i = 0; i < EW_N; i++) w[i] = ref_gelu(xd[i]);
    CHECK_CLOSE(out, w, EW_N, 1e-6, "gelu forward on random values in +-[0.05, 4]");
    for (int kind = 0; kind < 2; kind++) {
        memset(g, 0, sizeof g);
        if (kind == 0)
            rp_relu_backward(g, dout, x, EW_N);
        else
            rp_gelu_backward(g, dout, x, EW_N);
        ew_ctx ctx = {kind, xd, dd, EW_N};
        fd_check(kind == 0 ? "relu dinp" : "gelu dinp", ew_obj, &ctx, xd, EW_N, g);
        /* accumulation */
        float pre[EW_N], acc[EW_N];
        fill(pre, EW_N, -1, 1);
        memcpy(acc, pre, sizeof acc);
        for (int r = 0; r < 2; r++) {
            if (kind == 0)
                rp_relu_backward(acc, dout, x, EW_N);
            else
                rp_gelu_backward(acc, dout, x, EW_N);
        }
        check_accum(kind == 0 ? "relu dinp" : "gelu dinp", acc, pre, g, EW_N);
    }
    /* in place */
    {
        float a[EW_N];
        memcpy(a, x, sizeof a);
        rp_gelu_forward(a, a, EW_N);
        rp_gelu_forward(out, x, EW_N);
        CHECK(same_bits(a, out, EW_N), "gelu forward in place (out == inp)");
        memcpy(a, x, sizeof a);
        rp_relu_forward(a, a, EW_N);
        rp_relu_forward(out, x, EW_N);
        CHECK(same_bits(a, out, EW_N), "relu forward in place (out == inp)");
    }
}

/* The vectorised GELU against double precision over a dense grid: every multiple of 2^-14 in
 * [-16, 16] (the range where gelu differs from max(x, 0) in float, and the tail where it leaves
 * float's normal range near x = -13.2), every 4096th float of either sign (all exponents, up to
 * FLT_MAX), and the special values. Bounds: 1e-6 absolute for the value and the derivative (the
 * required accuracy), 1e-6 relative for the value wherever it is a normal float (tiny negative
 * values included), and 1e-6 relative for the derivative on x <= -2 (its tail; elsewhere it
 * crosses 0 near x = -0.75, where only the absolute bound means anything). */
static void test_gelu_grid(void)
{
    printf("gelu on a dense grid\n");
    const int64_t ngrid = 2 * 16 * 16384 + 1, nbits = 2 * (0x7F7FFFFF / 4096 + 1);
    const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, FLT_MAX, -FLT_MAX,
                             FLT_MIN, -FLT_MIN, 1e-45f, -1e-45f, 40.0f, -40.0f, 41.0f, -41.0f};
    const int64_t nsp = (int64_t)(sizeof special / sizeof special[0]);
    const int64_t n = ngrid + nbits + nsp;
    float *x = falloc(n), *y = falloc(n), *d = falloc(n), *one = falloc(n);
    int64_t k = 0;
    for (int64_t i = 0; i < ngrid; i++) x[k++] = (float)(-16.0 + (double)i / 16384.0);
    for (uint32_t u = 0; u <= 0x7F7FFFFFu; u += 4096u) {
        union {
            uint32_t u;
            float f;
        } b = {.u = u};
        x[k++] = b.f;
        b.u = u | 0x80000000u;
        x[k++] = b.f;
    }
    for (int64_t i = 0; i < nsp; i++) x[k++] = special[i];
    CHECK(k == n, "gelu grid: %lld values", (long long)k);
    for (int64_t i = 0; i < n; i++) {
        one[i] = 1.0f;
        d[i] = 0.0f;
    }
    rp_gelu_forward(y, x, n);
    rp_gelu_backward(d, one, x, n);
    double fabs_max = 0.0, frel_max = 0.0, dabs_max = 0.0, drel_max = 0.0;
    int64_t bad_nan = 0, bad_fa = 0, bad_fr = 0, bad_da = 0, bad_dr = 0;
    for (int64_t i = 0; i < n; i++) {
        double xi = (double)x[i];
        if (isnan(xi)) {
            bad_nan += !isnan(y[i]) || !isnan(d[i]);
            continue;
        }
        double wy = isinf(xi) ? (xi > 0 ? xi : 0.0) : ref_gelu(xi), wd = ref_gelu_grad(xi);
        if (isinf(wy)) {
            bad_fa += (double)y[i] != wy;
        } else {
            double ea = fabs((double)y[i] - wy);
            fabs_max = fmax(fabs_max, ea);
            bad_fa += !(ea <= 1e-6);
            if (fabs(wy) >= (double)FLT_MIN) {
                double er = ea / fabs(wy);
                frel_max = fmax(frel_max, er);
                bad_fr += !(er <= 1e-6);
            }
        }
        double ea = fabs((double)d[i] - wd);
        dabs_max = fmax(dabs_max, ea);
        bad_da += !(ea <= 1e-6);
        if (xi <= -2.0 && fabs(wd) >= (double)FLT_MIN) {
            double er = ea / fabs(wd);
            drel_max = fmax(drel_max, er);
            bad_dr += !(er <= 1e-6);
        }
    }
    printf("  gelu over %lld values: max abs error %.3g (derivative %.3g), max rel error %.3g "
           "(derivative, x <= -2: %.3g)\n",
           (long long)n, fabs_max, dabs_max, frel_max, drel_max);
    CHECK(bad_nan == 0, "gelu(NaN) and gelu'(NaN) are NaN");
    CHECK(bad_fa == 0, "gelu within 1e-6 of double erf: %lld off, max abs error %.3g",
          (long long)bad_fa, fabs_max);
    CHECK(bad_fr == 0, "gelu within 1e-6 relative where normal: %lld off, max %.3g",
          (long long)bad_fr, frel_max);
    CHECK(bad_da == 0, "gelu' within 1e-6 of double erf: %lld off, max abs error %.3g",
          (long long)bad_da, dabs_max);
    CHECK(bad_dr == 0, "gelu' within 1e-6 relative on x <= -2: %lld off, max %.3g",
          (long long)bad_dr, drel_max);
    /* the kernels hand out blocks of elements to threads and SIMD lanes: any offset gives the
     * same bits (a start at an odd element, a length that is no multiple of the vector width) */
    {
        float *y2 = falloc(n), *d2 = falloc(n);
        for (int64_t i = 0; i < n; i++) d2[i] = 0.0f;
        rp_gelu_forward(y2 + 3, x + 3, n - 10);
        rp_gelu_backward(d2 + 3, one + 3, x + 3, n - 10);
        CHECK(same_bits(y2 + 3, y + 3, n - 10) && same_bits(d2 + 3, d + 3, n - 10),
              "gelu at an offset: the same bits");
        free(y2), free(d2);
    }
    free(x), free(y), free(d), free(one);
}

static void test_residual(void)
{
    printf("residual\n");
    float a[EW_N], b[EW_N], out[EW_N], dout[EW_N];
    double want[EW_N], xd[2 * EW_N], dd[EW_N];
    fill(a, EW_N, -1, 1);
    fill(b, EW_N, -1, 1);
    fill(dout, EW_N, -1, 1);
    rp_residual_forward(out, a, b, EW_N);
    for (int i = 0; i < EW_N; i++) want[i] = (double)(float)((double)a[i] + (double)b[i]);
    CHECK_CLOSE(out, want, EW_N, 0.0, "residual forward (exact float sum)");
    float ab[EW_N];
    memcpy(ab, a, sizeof ab);
    rp_residual_forward(ab, ab, b, EW_N);
    CHECK(same_bits(ab, out, EW_N), "residual forward with out == a");
    memcpy(ab, b, sizeof ab);
    rp_residual_forward(ab, a, ab, EW_N);
    CHECK(same_bits(ab, out, EW_N), "residual forward with out == b");

    float da[EW_N] = {0}, db[EW_N] = {0};
    rp_residual_backward(da, db, dout, EW_N);
    to_double(xd, a, EW_N);
    to_double(xd + EW_N, b, EW_N);
    to_double(dd, dout, EW_N);
    ew_ctx ctx = {2, xd, dd, EW_N};
    float g2[2 * EW_N];
    memcpy(g2, da, sizeof da);
    memcpy(g2 + EW_N, db, sizeof db);
    fd_check("residual da, db", ew_obj, &ctx, xd, 2 * EW_N, g2);
    float pa[EW_N], pb[EW_N], aa[EW_N], ab2[EW_N];
    fill(pa, EW_N, -1, 1);
    fill(pb, EW_N, -1, 1);
    memcpy(aa, pa, sizeof aa);
    memcpy(ab2, pb, sizeof ab2);
    rp_residual_backward(aa, ab2, dout, EW_N);
    rp_residual_backward(aa, ab2, dout, EW_N);
    check_accum("residual da", aa, pa, da, EW_N);
    check_accum("residual db", ab2, pb, db, EW_N);
    float oa[EW_N] = {0}, ob[EW_N] = {0};
    rp_residual_backward(oa, NULL, dout, EW_N);
    rp_residual_backward(NULL, ob, dout, EW_N);
    CHECK(same_bits(oa, da, EW_N) && same_bits(ob, db, EW_N),
          "residual backward with a NULL d* pointer: the other is unchanged");
}

/* ================================================================ dropout */

static void test_dropout(void)
{
    printf("dropout\n");
    enum { DN = 10000 };
    float *inp = falloc(DN), *out = falloc(DN), *mask = falloc(DN), *mask2 = falloc(DN);
    float *dout = falloc(DN), *din = falloc(DN);
    fill_away_from_zero(inp, DN, 0.1, 2.0);
    fill(dout, DN, -1, 1);
    rp_rng rng, rng0;

    /* p = 0: identity, mask untouched (and may be NULL), rng not advanced */
    rp_rng_seed(&rng, 5);
    rng0 = rng;
    for (int64_t i = 0; i < DN; i++) mask[i] = -7.0f;
    rp_dropout_forward(out, mask, inp, 0.0f, &rng, DN);
    int untouched = 1;
    for (int64_t i = 0; i < DN; i++) untouched &= mask[i] == -7.0f;
    CHECK(same_bits(out, inp, DN), "dropout p = 0 is the identity");
    CHECK(untouched, "dropout p = 0 leaves the mask alone");
    CHECK(memcmp(rng.s, rng0.s, sizeof rng.s) == 0, "dropout p = 0 draws nothing from the rng");
    rp_dropout_forward(out, NULL, inp, 0.0f, &rng, DN);
    CHECK(same_bits(out, inp, DN), "dropout p = 0 with mask = NULL");
    memcpy(out, inp, DN * sizeof(float));
    rp_dropout_forward(out, NULL, out, 0.0f, NULL, DN);
    CHECK(same_bits(out, inp, DN), "dropout p = 0 in place with rng = NULL");
    memset(din, 0, DN * sizeof(float));
    rp_dropout_backward(din, dout, NULL, 0.0f, DN);
    CHECK(same_bits(din, dout, DN), "dropout backward p = 0 (mask NULL): dinp = dout");

    /* p = 0.5 */
    rp_rng_seed(&rng, 42);
    rp_dropout_forward(out, mask, inp, 0.5f, &rng, DN);
    int64_t kept = 0, bad_vals = 0, bad_mask = 0;
    rp_rng replay;
    rp_rng_seed(&replay, 42);
    for (int64_t i = 0; i < DN; i++) {
        double u = rp_rng_uniform(&replay);
        float m = u >= 0.5 ? 2.0f : 0.0f;
        if (mask[i] != m) bad_mask++;
        if (mask[i] != 0.0f) {
            kept++;
            if (out[i] != 2.0f * inp[i]) bad_vals++;
        } else if (out[i] != 0.0f) {
            bad_vals++;
        }
    }
    /* Binomial(10000, 0.5): sd 50; +-300 is 6 sd */
    CHECK(kept > 4700 && kept < 5300, "dropout p = 0.5 keeps about half: %lld of %d",
          (long long)kept, DN);
    CHECK(bad_vals == 0, "dropout p = 0.5: kept values are exactly 2 * inp, dropped are 0 (%lld bad)",
          (long long)bad_vals);
    CHECK(bad_mask == 0,
          "dropout mask = (u >= p) / (1 - p) with one rp_rng_uniform per element in order (%lld bad)",
          (long long)bad_mask);
    CHECK(memcmp(rng.s, replay.s, sizeof rng.s) == 0, "dropout draws exactly n uniforms");
    rp_rng_seed(&rng, 42);
    rp_dropout_forward(din, mask2, inp, 0.5f, &rng, DN);
    CHECK(same_bits(mask, mask2, DN) && same_bits(out, din, DN), "same seed gives the same mask");
    rp_dropout_forward(din, mask2, inp, 0.5f, &rng, DN);
    CHECK(!same_bits(mask, mask2, DN), "the next call draws a different mask");

    /* p = 0.1: kept value (float)(1/0.9); in place */
    rp_rng_seed(&rng, 7);
    memcpy(out, inp, DN * sizeof(float));
    rp_dropout_forward(out, mask2, out, 0.1f, &rng, DN);
    float keep = (float)(1.0 / (1.0 - (double)0.1f));
    int64_t kept1 = 0, bad1 = 0;
    for (int64_t i = 0; i < DN; i++) {
        if (mask2[i] == keep) {
            kept1++;
            if (out[i] != inp[i] * keep) bad1++;
        } else if (mask2[i] != 0.0f || out[i] != 0.0f) {
            bad1++;
        }
    }
    CHECK(bad1 == 0 && kept1 > 8800 && kept1 < 9200,
          "dropout p = 0.1 in place: mask 0 or 1/0.9, %lld kept, %lld bad", (long long)kept1,
          (long long)bad1);

    /* backward uses the mask (p = 0.5 mask from above): dinp = dout * mask, and accumulates.
     * The function is linear in inp given the mask, so FD is exact up to rounding. */
    memset(din, 0, DN * sizeof(float));
    rp_dropout_backward(din, dout, mask, 0.5f, DN);
    {
        double *wd = dalloc(DN);
        for (int64_t i = 0; i < DN; i++) wd[i] = (double)dout[i] * (double)mask[i];
        CHECK_CLOSE(din, wd, DN, 0.0, "dropout backward = dout * mask (exact)");
        float *pre = falloc(DN), *acc = falloc(DN);
        fill(pre, DN, -1, 1);
        memcpy(acc, pre, DN * sizeof(float));
        rp_dropout_backward(acc, dout, mask, 0.5f, DN);
        rp_dropout_backward(acc, dout, mask, 0.5f, DN);
        check_accum("dropout dinp", acc, pre, din, DN);
        free(wd), free(pre), free(acc);
    }
    free(inp), free(out), free(mask), free(mask2), free(dout), free(din);
}

/* ================================================================ cross-entropy */

enum { CE_N = 7, CE_V = 11 };

/* Reference losses (scored rows only; 0 otherwise) and softmax of every row. */
static int64_t ref_ce(double *losses, double *probs, const double *logits, const int32_t *target,
                      const uint8_t *mask, int64_t N, int64_t V)
{
    int64_t count = 0;
    for (int64_t n = 0; n < N; n++) {
        const double *x = logits + n * V;
        double mx = x[0], s = 0.0;
        for (int64_t v = 1; v < V; v++) mx = fmax(mx, x[v]);
        for (int64_t v = 0; v < V; v++) s += exp(x[v] - mx);
        if (probs)
            for (int64_t v = 0; v < V; v++) probs[n * V + v] = exp(x[v] - mx) / s;
        int scored = target[n] >= 0 && (!mask || mask[n]);
        losses[n] = scored ? log(s) + mx - x[target[n]] : 0.0;
        count += scored;
    }
    return count;
}

typedef struct {
    double *logits;
    const int32_t *target;
    const uint8_t *mask;
    double scale;
} ce_ctx;

static double ce_obj(const void *p)
{
    const ce_ctx *c = p;
    double losses[CE_N], L = 0.0;
    ref_ce(losses, NULL, c->logits, c->target, c->mask, CE_N, CE_V);
    for (int n = 0; n < CE_N; n++) L += c->scale * losses[n];
    return L;
}

/* The float64 gradient of sum_n scale * loss_n: scale * (softmax - onehot) on scored rows. */
static void ref_ce_grad(double *d, const double *logits, const int32_t *target,
                        const uint8_t *mask, double scale, int64_t N, int64_t V)
{
    double *p = dalloc(N * V);
    double *l = dalloc(N);
    ref_ce(l, p, logits, target, mask, N, V);
    for (int64_t n = 0; n < N; n++) {
        int scored = target[n] >= 0 && (!mask || mask[n]);
        for (int64_t v = 0; v < V; v++)
            d[n * V + v] = scored ? scale * (p[n * V + v] - (v == target[n] ? 1.0 : 0.0)) : 0.0;
    }
    free(p);
    free(l);
}

static void test_crossentropy(void)
{
    printf("crossentropy\n");
    const int64_t N = CE_N, V = CE_V;
    /* row 1: target -1; row 4: mask 0; row 6: target -1 and mask 0 */
    const int32_t target[CE_N] = {3, -1, 0, 10, 5, 7, -1};
    const uint8_t mask[CE_N] = {1, 1, 1, 2, 0, 1, 0};
    float logits[CE_N * CE_V], stats[2 * CE_N], losses[CE_N];
    double ld[CE_N * CE_V], lw[CE_N];
    fill(logits, N * V, -3, 3);
    /* row 5: large logits (1000 + x): the max must be subtracted */
    for (int64_t v = 0; v < V; v++) logits[5 * V + v] += 1000.0f;
    to_double(ld, logits, N * V);

    for (int64_t i = 0; i < N; i++) losses[i] = NAN;
    int64_t cnt = rp_crossentropy_forward(losses, stats, logits, target, mask, N, V);
    int64_t cnt_w = ref_ce(lw, NULL, ld, target, mask, N, V);
    CHECK(cnt == 4 && cnt_w == 4, "crossentropy returns the number of scored rows: %lld (want 4)",
          (long long)cnt);
    /* losses ~ log(11) ~ 2.4: float exponentials (8.4e-8), sums in double, rounded once */
    CHECK_CLOSE(losses, lw, N, 1e-6, "crossentropy losses (unscored rows 0, a row at 1000)");
    CHECK(losses[1] == 0.0f && losses[4] == 0.0f && losses[6] == 0.0f,
          "unscored rows have loss exactly 0");
    {
        double lw2[CE_N];
        float l2[CE_N], s2[2 * CE_N];
        int64_t c2 = rp_crossentropy_forward(l2, s2, logits, target, NULL, N, V);
        int64_t c2w = ref_ce(lw2, NULL, ld, target, NULL, N, V);
        CHECK(c2 == 5 && c2w == 5, "crossentropy with mask = NULL: %lld scored (want 5)",
              (long long)c2);
        CHECK_CLOSE(l2, lw2, N, 1e-6, "crossentropy losses, mask = NULL");
    }

    /* backward with scale = 1/count onto zeros: against finite differences of the float64 loss
     * and against the float64 softmax itself (probabilities rounded to float: 1e-7 per unit of
     * scale) */
    float scale = 1.0f / (float)cnt;
    float d[CE_N * CE_V];
    double dw[CE_N * CE_V];
    memset(d, 0, sizeof d);
    rp_crossentropy_backward(d, logits, stats, target, mask, scale, N, V);
    ce_ctx ctx = {ld, target, mask, (double)scale};
    fd_check("crossentropy dlogits", ce_obj, &ctx, ld, N * V, d);
    ref_ce_grad(dw, ld, target, mask, (double)scale, N, V);
    CHECK_CLOSE(d, dw, N * V, 1e-7 * (double)scale,
                "crossentropy dlogits = scale (softmax - onehot)");
    double worst_sum = 0.0;
    int untouched = 1;
    for (int64_t n = 0; n < N; n++) {
        int scored = target[n] >= 0 && mask[n];
        double s = 0.0;
        for (int64_t v = 0; v < V; v++) {
            s += (double)d[n * V + v];
            if (!scored) untouched &= d[n * V + v] == 0.0f;
        }
        if (scored && fabs(s) > worst_sum) worst_sum = fabs(s);
    }
    /* sum of probs is 1 to ~V * 2e-7; times scale 0.25 */
    CHECK(worst_sum < 1e-6, "dlogits rows sum to 0 for scored rows: max |sum| %.3g", worst_sum);
    CHECK(untouched, "dlogits of unscored rows stay 0");
    float pre[CE_N * CE_V], acc[CE_N * CE_V], set[CE_N * CE_V];
    fill(pre, N * V, -1, 1);
    memcpy(acc, pre, sizeof acc);
    rp_crossentropy_backward(acc, logits, stats, target, mask, scale, N, V);
    rp_crossentropy_backward(acc, logits, stats, target, mask, scale, N, V);
    check_accum("crossentropy dlogits", acc, pre, d, N * V);
    int kept = 1;
    for (int64_t n = 0; n < N; n++)
        if (!(target[n] >= 0 && mask[n]))
            for (int64_t v = 0; v < V; v++) kept &= acc[n * V + v] == pre[n * V + v];
    CHECK(kept, "unscored rows of a pre-filled dlogits are not touched");
    /* _set overwrites a pre-filled buffer: bitwise the accumulating form onto zeros */
    memcpy(set, pre, sizeof set);
    rp_crossentropy_backward_set(set, logits, stats, target, mask, scale, N, V);
    CHECK(same_bits(set, d, N * V), "crossentropy backward_set = backward onto zeros, bitwise");
    /* another scale: linear in scale */
    float d2[CE_N * CE_V];
    memset(d2, 0, sizeof d2);
    rp_crossentropy_backward(d2, logits, stats, target, mask, 0.75f, N, V);
    ctx.scale = 0.75;
    fd_check("crossentropy dlogits, scale 0.75", ce_obj, &ctx, ld, N * V, d2);
}

/* A language model's vocabularies (8,000 and 32,000 and a length that is no multiple of any
 * vector width or of the kernel's block), logits spread as a trained head's are (a few large,
 * most small), with the largest logit placed late in the row so that the running maximum rises
 * block after block, and rows whose largest logit is first or last: losses and gradients against
 * float64. Then the edges: a logit of -inf (probability 0), a NaN logit, a row of -inf only. */
static void test_crossentropy_vocab(void)
{
    printf("crossentropy over a vocabulary\n");
    const int64_t Vs[3] = {8000, 32000, 1237};
    for (int k = 0; k < 3; k++) {
        const int64_t N = 6, V = Vs[k];
        float *x = falloc(N * V), *d = falloc(N * V), *st = falloc(2 * N), l[6];
        double *xd = dalloc(N * V), *dw = dalloc(N * V), lw[6];
        int32_t target[6];
        fill(x, N * V, -6, 6);
        for (int64_t n = 0; n < N; n++) {
            float *r = x + n * V;
            /* the row's maximum rises through the row: 1 + 9 v / V + noise, then a spike */
            for (int64_t v = 0; v < V; v++) r[v] = r[v] * 0.5f + 9.0f * (float)v / (float)V;
            if (n == 1) r[0] = 30.0f;                  /* the largest first */
            if (n == 2) r[V - 1] = 30.0f;              /* the largest last */
            if (n == 3) r[V / 2] = 200.0f;             /* one logit dominates */
            target[n] = (int32_t)((n * 7919 + 13) % V);
        }
        target[4] = (int32_t)(V - 1);
        target[3] = (int32_t)(V / 2);
        to_double(xd, x, N * V);
        CHECK(rp_crossentropy_forward(l, st, x, target, NULL, N, V) == N, "V %lld: all scored",
              (long long)V);
        ref_ce(lw, NULL, xd, target, NULL, N, V);
        char label[96];
        snprintf(label, sizeof label, "crossentropy losses, V %lld, vs float64", (long long)V);
        /* losses up to ~15: their float rounding (1e-6) and the exponentials' 8.4e-8 */
        CHECK_CLOSE(l, lw, N, 2e-6, label);
        const float scale = 0.125f;
        rp_crossentropy_backward_set(d, x, st, target, NULL, scale, N, V);
        ref_ce_grad(dw, xd, target, NULL, (double)scale, N, V);
        snprintf(label, sizeof label, "crossentropy dlogits, V %lld, vs float64", (long long)V);
        /* probabilities <= 1 to 2.5e-7 relative (exponential, 1 / sum, product) */
        CHECK_CLOSE(d, dw, N * V, 3e-7 * (double)scale, label);
        free(x), free(d), free(st), free(xd), free(dw);
    }
    {
        enum { XN = 3, XV = 700 };
        float x[XN * XV], st[2 * XN], l[XN], d[XN * XV];
        int32_t target[XN] = {600, 5, 1};
        fill(x, XN * XV, -2, 2);
        for (int v = 0; v < 300; v++) x[v] = -INFINITY; /* row 0: its first block -inf */
        x[XV + 3] = NAN;                               /* row 1: a NaN */
        for (int v = 0; v < XV; v++) x[2 * XV + v] = -INFINITY; /* row 2: -inf only */
        rp_crossentropy_forward(l, st, x, target, NULL, XN, XV);
        double xd[XV], lw;
        for (int v = 0; v < XV; v++) xd[v] = v < 300 ? -HUGE_VAL : (double)x[v];
        /* the reference over the finite logits only (e^-inf = 0) */
        double mx = -HUGE_VAL, s = 0.0;
        for (int v = 300; v < XV; v++) mx = fmax(mx, xd[v]);
        for (int v = 300; v < XV; v++) s += exp(xd[v] - mx);
        lw = log(s) + mx - xd[600];
        CHECK(fabs((double)l[0] - lw) < 1e-6, "a row with -inf logits: loss %.9g (want %.9g)",
              (double)l[0], lw);
        CHECK(isnan(l[1]), "a NaN logit: NaN loss (%g)", (double)l[1]);
        CHECK(isnan(l[2]), "a row of -inf only: NaN loss (%g)", (double)l[2]);
        rp_crossentropy_backward_set(d, x, st, target, NULL, 1.0f, 1, XV);
        int finite = 1;
        double worst = 0.0;
        for (int v = 0; v < XV; v++) {
            finite &= isfinite(d[v]);
            double want = v < 300 ? 0.0 : exp(xd[v] - mx) / s - (v == 600 ? 1.0 : 0.0);
            worst = fmax(worst, fabs((double)d[v] - want));
        }
        CHECK(finite && worst < 3e-7, "a row with -inf logits: finite gradient, 0 at -inf (max "
                                      "error %.3g)", worst);
    }
}

/* ================================================================ threads */

enum { TH_K = 13 };

typedef struct {
    int64_t N, C, OC, V;
    float *inp, *w, *b, *dout, *lw, *ldout, *logits;
    int32_t *target;
} th_data;

/* One run of every parallel kernel on d, results in r[0..TH_K) (prefilled identically). */
static void th_run(const th_data *d, float **r, const int64_t *sz)
{
    int64_t N = d->N, C = d->C, OC = d->OC, V = d->V;
    rng_state = 99;
    for (int k = 0; k < TH_K; k++) {
        r[k] = falloc(sz[k]);
        fill(r[k], sz[k], -1, 1);
    }
    rp_layernorm_forward(r[0], r[1], r[2], d->inp, d->w, d->b, N, C);
    rp_layernorm_backward(r[3], r[4], r[5], d->dout, d->inp, r[1], r[2], d->w, N, C);
    rp_linear_backward(r[6], r[7], r[8], d->ldout, d->inp, d->lw, N, C, OC);
    float *stats = falloc(2 * N);
    rp_crossentropy_forward(r[9], stats, d->logits, d->target, NULL, N, V);
    rp_crossentropy_backward(r[10], d->logits, stats, d->target, NULL, 0.01f, N, V);
    rp_gelu_forward(r[11], d->inp, N * C);
    rp_gelu_backward(r[12], d->dout, d->inp, N * C);
    free(stats);
}

/* The OpenMP kernels with 1 and 2 OpenMP threads (OpenBLAS at 1 thread): bitwise identical.
 * Then with OpenBLAS at 2 threads too: the header allows sgemm results to depend on OpenBLAS's
 * thread count, so linear dinp and dw are compared with a tolerance there; everything else is
 * still bitwise identical. Sizes are above every OpenMP threshold. */
static void test_threads(void)
{
    printf("threads\n");
    th_data d = {301, 77, 93, 67, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    int64_t N = d.N, C = d.C, OC = d.OC, V = d.V;
    d.inp = falloc(N * C), d.w = falloc(C), d.b = falloc(C), d.dout = falloc(N * C);
    d.lw = falloc(OC * C), d.ldout = falloc(N * OC), d.logits = falloc(N * V);
    d.target = malloc((size_t)N * sizeof(int32_t));
    if (!d.target) exit(2);
    fill(d.inp, N * C, -2, 2);
    fill(d.w, C, 0.5, 1.5);
    fill(d.b, C, -0.5, 0.5);
    fill(d.dout, N * C, -1, 1);
    fill(d.lw, OC * C, -1, 1);
    fill(d.ldout, N * OC, -1, 1);
    fill(d.logits, N * V, -4, 4);
    for (int64_t n = 0; n < N; n++) d.target[n] = n % 5 == 0 ? -1 : (int32_t)((n * 7) % V);

    const int64_t sz[TH_K] = {N * C, N, N, N * C, C, C, N * C, OC * C, OC, N, N * V, N * C, N * C};
    const char *names[TH_K] = {"layernorm out", "layernorm mean", "layernorm rstd",
                               "layernorm dinp", "layernorm dw", "layernorm db", "linear dinp",
                               "linear dw", "linear db", "crossentropy losses",
                               "crossentropy dlogits", "gelu forward", "gelu backward"};
    /* rp_blas_set_threads sets the OpenMP thread count; OpenBLAS itself stays at one thread and
     * rp_sgemm splits large products over the OpenMP threads (blas.h). */
    float *r[2][TH_K];
    int t0 = rp_blas_threads();
    for (int t = 0; t < 2; t++) {
        rp_blas_set_threads(t + 1);
#ifdef _OPENMP
        CHECK(omp_get_max_threads() == t + 1, "OpenMP threads set to %d: %d", t + 1,
              omp_get_max_threads());
#endif
        th_run(&d, r[t], sz);
    }
    rp_blas_set_threads(t0);
    for (int k = 0; k < TH_K; k++) {
        if (k == 6 || k == 7) {
            /* linear dinp and dw are sgemm products, which rp_sgemm splits into row blocks per
             * thread; OpenBLAS's edge tiles may sum in another order. Sums of up to 301 products
             * of magnitude <= 2 on a prefill: float reordering stays far below 1e-4. */
            double *want = dalloc(sz[k]);
            to_double(want, r[0][k], sz[k]);
            char label[96];
            snprintf(label, sizeof label, "%s with 1 and 2 threads (sgemm may reorder)", names[k]);
            CHECK_CLOSE(r[1][k], want, sz[k], 1e-4, label);
            free(want);
        } else {
            CHECK(same_bits(r[0][k], r[1][k], sz[k]), "%s identical with 1 and 2 threads",
                  names[k]);
        }
    }
    for (int t = 0; t < 2; t++)
        for (int k = 0; k < TH_K; k++) free(r[t][k]);
    free(d.inp), free(d.w), free(d.b), free(d.dout), free(d.lw), free(d.ldout), free(d.logits);
    free(d.target);
}

int main(int argc, char **argv)
{
    (void)argc;
    rp_blas_fix_coretype(argv);
    test_embedding();
    test_layernorm();
    test_linear();
    test_relu_gelu();
    test_gelu_grid();
    test_residual();
    test_dropout();
    test_crossentropy();
    test_crossentropy_vocab();
    test_threads();
    printf("worst finite-difference error over all checks: abs %.3g, rel %.3g\n", worst_fd_abs,
           worst_fd_rel);
    return check_summary("test_layers");
}
