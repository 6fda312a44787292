/* rp_adam_step, rp_grad_norm, rp_lr_at, rp_adam_cfg_check (core/nn/optim.h) against references
 * written here in double from the formulas:
 *
 *   labml's Adam ("optimized" update, eps added to sqrt(v) BEFORE the bias correction):
 *     g' = g + wd w (L2, decoupled = 0)        w' = w (1 - lr_t wd) (AdamW, decoupled = 1)
 *     m = b1 m + (1-b1) g';  v = b2 v + (1-b2) g'^2
 *     w -= lr_t sqrt(1-b2^t)/(1-b1^t) * m / (sqrt(v) + eps)
 *   clipping as torch.nn.utils.clip_grad_norm_: coef = clip / (norm + 1e-6), g *= coef if coef < 1
 *   cosine: lr t/warmup (t <= warmup), then min_lr + (lr-min_lr)/2 (1 + cos(pi (t-warmup) /
 *           (total-warmup))) up to total, min_lr after
 *   noam:   lr d_model^-0.5 min(t^-0.5, t warmup^-1.5)
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rp.h"

#define PI_ 3.14159265358979323846

/* ---- reference ------------------------------------------------------------------------------ */

typedef struct {
    double *w, *m, *v;
    int64_t n, step;
} ref_state;

static ref_state ref_new(const float *w0, int64_t n)
{
    ref_state r;
    r.w = calloc((size_t)n, sizeof(double));
    r.m = calloc((size_t)n, sizeof(double));
    r.v = calloc((size_t)n, sizeof(double));
    r.n = n;
    r.step = 0;
    for (int64_t i = 0; i < n; i++) r.w[i] = (double)w0[i];
    return r;
}

static void ref_free(ref_state *r)
{
    free(r->w);
    free(r->m);
    free(r->v);
}

/* One step with lr_t given; standard = 1 applies eps after the bias correction (textbook Adam,
 * used only to show that the two differ). Returns the pre-clip norm. */
static double ref_step(ref_state *r, const float *g_in, double lr_t, double b1, double b2,
                       double eps, double wd, int decoupled, double clip, int standard)
{
    int64_t n = r->n;
    double ss = 0.0;
    for (int64_t i = 0; i < n; i++) ss += (double)g_in[i] * (double)g_in[i];
    double norm = sqrt(ss), coef = 1.0;
    if (clip > 0.0 && clip / (norm + 1e-6) < 1.0) coef = clip / (norm + 1e-6);
    int64_t t = ++r->step;
    double bc1 = 1.0 - pow(b1, (double)t), bc2 = 1.0 - pow(b2, (double)t);
    for (int64_t i = 0; i < n; i++) {
        double g = (double)g_in[i] * coef;
        if (!decoupled) g += wd * r->w[i];
        if (decoupled) r->w[i] -= lr_t * wd * r->w[i];
        r->m[i] = b1 * r->m[i] + (1.0 - b1) * g;
        r->v[i] = b2 * r->v[i] + (1.0 - b2) * g * g;
        if (standard)
            r->w[i] -= lr_t * (r->m[i] / bc1) / (sqrt(r->v[i] / bc2) + eps);
        else
            r->w[i] -= lr_t * sqrt(bc2) / bc1 * r->m[i] / (sqrt(r->v[i]) + eps);
    }
    return norm;
}

/* The implementation's state. */
typedef struct {
    float *w, *m, *v;
    rp_adam_state st;
} impl_state;

static impl_state impl_new(const float *w0, int64_t n)
{
    impl_state s;
    s.w = malloc((size_t)(n ? n : 1) * sizeof(float));
    s.m = calloc((size_t)(n ? n : 1), sizeof(float));
    s.v = calloc((size_t)(n ? n : 1), sizeof(float));
    if (n) memcpy(s.w, w0, (size_t)n * sizeof(float));
    s.st.m = s.m;
    s.st.v = s.v;
    s.st.n = n;
    s.st.step = 0;
    return s;
}

static void impl_free(impl_state *s)
{
    free(s->w);
    free(s->m);
    free(s->v);
}

static double max_abs_diff(const float *a, const double *b, int64_t n)
{
    double d = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double x = fabs((double)a[i] - b[i]);
        if (x > d) d = x;
    }
    return d;
}

/* ---- tests ---------------------------------------------------------------------------------- */

enum { NV = 9, NSTEPS = 6 };

static void fill_vec(float *x, int64_t n, uint64_t *seed, double lo, double hi)
{
    for (int64_t i = 0; i < n; i++) x[i] = (float)check_rand(seed, lo, hi);
}

/* labml's settings, the defaults of core before the optimiser's keys had one table (lr 2.5e-4,
 * the constant schedule, warmup 2000, min_lr 0, total_steps 0): the references below (the
 * PyTorch fixtures among them) were made with them, so they are given here explicitly. */
static rp_adam_cfg labml_cfg(void)
{
    rp_adam_cfg c = rp_adam_cfg_default();
    c.lr = 2.5e-4;
    c.schedule = RP_SCHED_CONSTANT;
    c.warmup = 2000;
    c.total_steps = 0;
    c.min_lr = 0.0;
    return c;
}

/* Adam (no decay) against the double reference, step by step; the first three steps exercise the
 * bias correction at t = 1, 2, 3. */
static void test_adam_vs_reference(double eps, double clip, const char *what)
{
    printf("-- adam vs reference (%s)\n", what);
    uint64_t seed = 11;
    float w0[NV];
    fill_vec(w0, NV, &seed, -1, 1);
    rp_adam_cfg cfg = labml_cfg();
    cfg.lr = 1e-2;
    cfg.eps = eps;
    cfg.clip = clip;
    CHECK_STATUS(rp_adam_cfg_check(&cfg), RP_OK, NULL);
    impl_state s = impl_new(w0, NV);
    ref_state r = ref_new(w0, NV);
    for (int k = 0; k < NSTEPS; k++) {
        float g[NV], gcopy[NV];
        fill_vec(g, NV, &seed, -0.6, 0.6);
        memcpy(gcopy, g, sizeof g);
        double norm = rp_adam_step(&cfg, &s.st, s.w, g, NV);
        double rnorm = ref_step(&r, gcopy, cfg.lr, cfg.beta1, cfg.beta2, cfg.eps, 0.0, 0,
                                cfg.clip, 0);
        char label[96];
        snprintf(label, sizeof label, "%s: w after step %d", what, k + 1);
        CHECK_CLOSE(s.w, r.w, NV, 5e-7, label);
        snprintf(label, sizeof label, "%s: m after step %d", what, k + 1);
        CHECK_CLOSE(s.m, r.m, NV, 1e-7, label);
        snprintf(label, sizeof label, "%s: v after step %d", what, k + 1);
        CHECK_CLOSE(s.v, r.v, NV, 1e-8, label);
        CHECK(fabs(norm - rnorm) <= 1e-12 * rnorm, "step %d: norm %.17g, reference %.17g", k + 1,
              norm, rnorm);
        CHECK(s.st.step == k + 1, "step counter %lld after %d steps", (long long)s.st.step, k + 1);
    }
    impl_free(&s);
    ref_free(&r);
}

/* At t = 1 labml's step is lr sqrt(1-b2)/(1-b1) * (1-b1) g / (sqrt(1-b2) |g| + eps), i.e. about
 * lr sign(g) when eps << sqrt(1-b2) |g|: check the exact t = 1 value from the closed form. */
static void test_first_step_closed_form(void)
{
    printf("-- t = 1 closed form\n");
    rp_adam_cfg cfg = labml_cfg();
    cfg.clip = 0.0;
    cfg.lr = 1e-3;
    const float w0[4] = {0.5f, -0.25f, 1.0f, 0.0f};
    float g[4] = {0.1f, -2.0f, 0.001f, -0.3f};
    double want[4];
    for (int i = 0; i < 4; i++) {
        double gi = (double)g[i];
        double step = cfg.lr * sqrt(1.0 - cfg.beta2) / (1.0 - cfg.beta1);
        want[i] = (double)w0[i] -
                  step * (1.0 - cfg.beta1) * gi / (sqrt((1.0 - cfg.beta2) * gi * gi) + cfg.eps);
    }
    impl_state s = impl_new(w0, 4);
    rp_adam_step(&cfg, &s.st, s.w, g, 4);
    CHECK_CLOSE(s.w, want, 4, 1e-7, "t = 1: w = w0 - lr g / (|g| + eps / sqrt(1 - b2))");
    for (int i = 0; i < 4; i++)
        CHECK(fabs(fabs((double)s.w[i] - (double)w0[i]) - cfg.lr) < 1e-3 * cfg.lr,
              "t = 1 moves w[%d] by about lr (to 0.1%%): moved %.9g", i,
              fabs((double)s.w[i] - (double)w0[i]));
    impl_free(&s);
}

/* With eps comparable to sqrt(v), eps-before-correction (labml) and eps-after (textbook) give
 * clearly different results; the implementation matches labml's. */
static void test_eps_placement(void)
{
    printf("-- eps before the bias correction\n");
    uint64_t seed = 5;
    float w0[NV];
    fill_vec(w0, NV, &seed, -1, 1);
    rp_adam_cfg cfg = labml_cfg();
    cfg.lr = 1e-2;
    cfg.eps = 1e-3;
    cfg.clip = 0.0;
    impl_state s = impl_new(w0, NV);
    ref_state labml = ref_new(w0, NV), textbook = ref_new(w0, NV);
    for (int k = 0; k < 3; k++) {
        float g[NV];
        fill_vec(g, NV, &seed, -2e-3, 2e-3);
        ref_step(&labml, g, cfg.lr, cfg.beta1, cfg.beta2, cfg.eps, 0.0, 0, 0.0, 0);
        ref_step(&textbook, g, cfg.lr, cfg.beta1, cfg.beta2, cfg.eps, 0.0, 0, 0.0, 1);
        rp_adam_step(&cfg, &s.st, s.w, g, NV);
    }
    CHECK_CLOSE(s.w, labml.w, NV, 2e-7, "eps 1e-3, small g: w matches labml's formula");
    double d = max_abs_diff(s.w, textbook.w, NV);
    CHECK(d > 1e-4, "textbook Adam (eps after correction) differs: max|diff| %.3g", d);
    impl_free(&s);
    ref_free(&labml);
    ref_free(&textbook);
}

/* AdamW (decoupled) vs Adam with L2: each matches its formula, and they differ. */
static void test_weight_decay(void)
{
    printf("-- weight decay: AdamW vs L2 Adam\n");
    uint64_t seed = 99;
    float w0[NV];
    fill_vec(w0, NV, &seed, -2, 2);
    float gs[NSTEPS][NV];
    for (int k = 0; k < NSTEPS; k++) fill_vec(gs[k], NV, &seed, -0.5, 0.5);
    float wl2[NV], wdec[NV];
    for (int decoupled = 0; decoupled <= 1; decoupled++) {
        rp_adam_cfg cfg = labml_cfg();
        cfg.lr = 2e-2;
        cfg.weight_decay = 0.1;
        cfg.decoupled = decoupled;
        cfg.clip = 0.0;
        CHECK_STATUS(rp_adam_cfg_check(&cfg), RP_OK, NULL);
        impl_state s = impl_new(w0, NV);
        ref_state r = ref_new(w0, NV);
        for (int k = 0; k < NSTEPS; k++) {
            float g[NV];
            memcpy(g, gs[k], sizeof g);
            rp_adam_step(&cfg, &s.st, s.w, g, NV);
            ref_step(&r, gs[k], cfg.lr, cfg.beta1, cfg.beta2, cfg.eps, cfg.weight_decay,
                     decoupled, 0.0, 0);
            CHECK(memcmp(g, gs[k], sizeof g) == 0, "g is not modified without clipping");
        }
        CHECK_CLOSE(s.w, r.w, NV, 5e-7, decoupled ? "AdamW: w vs reference" : "L2 Adam: w");
        CHECK_CLOSE(s.m, r.m, NV, 1e-7, decoupled ? "AdamW: m vs reference" : "L2 Adam: m");
        memcpy(decoupled ? wdec : wl2, s.w, sizeof wl2);
        impl_free(&s);
        ref_free(&r);
    }
    double d = 0.0;
    for (int i = 0; i < NV; i++) d = fmax(d, fabs((double)wl2[i] - (double)wdec[i]));
    CHECK(d > 1e-3, "AdamW and L2 Adam differ: max|diff| %.3g", d);
    /* weight_decay = 0 makes the two identical (bitwise) */
    float wa[NV], wb[NV];
    for (int decoupled = 0; decoupled <= 1; decoupled++) {
        rp_adam_cfg cfg = labml_cfg();
        cfg.decoupled = decoupled;
        impl_state s = impl_new(w0, NV);
        for (int k = 0; k < NSTEPS; k++) {
            float g[NV];
            memcpy(g, gs[k], sizeof g);
            rp_adam_step(&cfg, &s.st, s.w, g, NV);
        }
        memcpy(decoupled ? wb : wa, s.w, sizeof wa);
        impl_free(&s);
    }
    CHECK(memcmp(wa, wb, sizeof wa) == 0, "weight_decay 0: Adam and AdamW are bitwise equal");
}

/* Clipping: above the threshold g is scaled to about clip (torch's coef = clip / (norm + 1e-6)),
 * below it g is untouched; the return value is the norm before clipping. */
static void test_clipping(void)
{
    printf("-- clipping\n");
    float w0[4] = {0, 0, 0, 0};
    rp_adam_cfg cfg = labml_cfg(); /* clip 1.0 */
    {
        float g[4] = {3.0f, 4.0f, 0.0f, 0.0f}; /* norm 5 */
        impl_state s = impl_new(w0, 4);
        double norm = rp_adam_step(&cfg, &s.st, s.w, g, 4);
        CHECK(norm == 5.0, "pre-clip norm returned: %.17g", norm);
        double coef = 1.0 / (5.0 + 1e-6);
        double want[4] = {3.0 * coef, 4.0 * coef, 0, 0};
        CHECK_CLOSE(g, want, 4, 1e-7, "norm 5 clipped to 1: g scaled in place");
        double after = rp_grad_norm(g, 4);
        CHECK(fabs(after - 1.0) < 2e-6, "norm after clipping %.9g", after);
        double mwant[4] = {0.1 * 3.0 * coef, 0.1 * 4.0 * coef, 0, 0};
        CHECK_CLOSE(s.m, mwant, 4, 1e-7, "m built from the clipped gradient");
        impl_free(&s);
    }
    {
        float g[4] = {0.3f, -0.4f, 0.0f, 0.0f}, g0[4];
        memcpy(g0, g, sizeof g);
        impl_state s = impl_new(w0, 4);
        double norm = rp_adam_step(&cfg, &s.st, s.w, g, 4);
        CHECK(fabs(norm - 0.5) < 1e-7, "norm below the threshold returned: %.17g", norm);
        CHECK(memcmp(g, g0, sizeof g) == 0, "norm 0.5 < clip 1: g unchanged (bitwise)");
        impl_free(&s);
    }
    {
        float g[4] = {30.0f, -40.0f, 0.0f, 0.0f}, g0[4];
        memcpy(g0, g, sizeof g);
        rp_adam_cfg off = cfg;
        off.clip = 0.0;
        impl_state s = impl_new(w0, 4);
        double norm = rp_adam_step(&off, &s.st, s.w, g, 4);
        CHECK(norm == 50.0, "clip 0 (off): norm %.17g returned", norm);
        CHECK(memcmp(g, g0, sizeof g) == 0, "clip 0 (off): g unchanged");
        impl_free(&s);
    }
    {
        /* clip 2.5 on a random vector: matches the reference including the update */
        uint64_t seed = 3;
        float w1[NV], g[NV], gc[NV];
        fill_vec(w1, NV, &seed, -1, 1);
        fill_vec(g, NV, &seed, -3, 3);
        memcpy(gc, g, sizeof g);
        rp_adam_cfg c2 = cfg;
        c2.clip = 2.5;
        impl_state s = impl_new(w1, NV);
        ref_state r = ref_new(w1, NV);
        double n1 = rp_adam_step(&c2, &s.st, s.w, g, NV);
        double n2 = ref_step(&r, gc, c2.lr, c2.beta1, c2.beta2, c2.eps, 0.0, 0, c2.clip, 0);
        CHECK(n1 > 2.5 && fabs(n1 - n2) <= 1e-12 * n2, "norm %.17g vs %.17g", n1, n2);
        CHECK_CLOSE(s.w, r.w, NV, 1e-7, "clip 2.5: w vs reference");
        CHECK_CLOSE(s.m, r.m, NV, 1e-7, "clip 2.5: m vs reference");
        impl_free(&s);
        ref_free(&r);
    }
}

static double ref_cosine(double lr, double min_lr, int64_t warmup, int64_t total, int64_t t)
{
    if (t <= warmup) return lr * (double)t / (double)warmup;
    if (t > total) return min_lr;
    return min_lr +
           (lr - min_lr) * 0.5 *
               (1.0 + cos(PI_ * (double)(t - warmup) / (double)(total - warmup)));
}

static double ref_noam(double lr, double d_model, int64_t warmup, int64_t t)
{
    double a = 1.0 / sqrt((double)t), b = (double)t / ((double)warmup * sqrt((double)warmup));
    return lr / sqrt(d_model) * (a < b ? a : b);
}

static void check_rel(double got, double want, const char *what, int64_t t)
{
    double tol = 1e-13 * fabs(want) + 1e-300;
    CHECK(fabs(got - want) <= tol, "%s at t = %lld: got %.17g, want %.17g", what, (long long)t,
          got, want);
}

static void test_schedules(void)
{
    printf("-- schedules\n");
    rp_adam_cfg c = labml_cfg();
    const int64_t ts[] = {1, 2, 7, 100, 1999, 2000, 2001, 5000, 123456};
    for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++)
        CHECK(rp_lr_at(&c, ts[k]) == 2.5e-4, "constant: lr at t = %lld is %.17g",
              (long long)ts[k], rp_lr_at(&c, ts[k]));

    c.schedule = RP_SCHED_COSINE;
    c.lr = 1e-3;
    c.min_lr = 1e-5;
    c.warmup = 100;
    c.total_steps = 1000;
    CHECK_STATUS(rp_adam_cfg_check(&c), RP_OK, NULL);
    const int64_t tc[] = {1, 2, 50, 99, 100, 101, 200, 550, 999, 1000, 1001, 5000};
    for (size_t k = 0; k < sizeof tc / sizeof tc[0]; k++)
        check_rel(rp_lr_at(&c, tc[k]), ref_cosine(c.lr, c.min_lr, c.warmup, c.total_steps, tc[k]),
                  "cosine", tc[k]);
    check_rel(rp_lr_at(&c, 100), 1e-3, "cosine peak", 100);
    check_rel(rp_lr_at(&c, 550), 0.5 * (1e-3 + 1e-5), "cosine midpoint", 550);
    check_rel(rp_lr_at(&c, 1000), 1e-5, "cosine end", 1000);
    check_rel(rp_lr_at(&c, 1001), 1e-5, "cosine after the end", 1001);
    /* no warmup: the cosine starts at t = 0 */
    c.warmup = 0;
    CHECK_STATUS(rp_adam_cfg_check(&c), RP_OK, NULL);
    const int64_t t0[] = {1, 500, 1000, 1200};
    for (size_t k = 0; k < sizeof t0 / sizeof t0[0]; k++) {
        double want = t0[k] > c.total_steps
                          ? c.min_lr
                          : c.min_lr + (c.lr - c.min_lr) * 0.5 *
                                           (1.0 + cos(PI_ * (double)t0[k] / (double)c.total_steps));
        check_rel(rp_lr_at(&c, t0[k]), want, "cosine, warmup 0", t0[k]);
    }

    c = labml_cfg();
    c.schedule = RP_SCHED_NOAM;
    c.lr = 1.0;
    c.d_model = 128;
    c.warmup = 2000;
    CHECK_STATUS(rp_adam_cfg_check(&c), RP_OK, NULL);
    const int64_t tn[] = {1, 2, 10, 1000, 1999, 2000, 2001, 4000, 100000};
    for (size_t k = 0; k < sizeof tn / sizeof tn[0]; k++)
        check_rel(rp_lr_at(&c, tn[k]), ref_noam(c.lr, c.d_model, c.warmup, tn[k]), "noam", tn[k]);
    check_rel(rp_lr_at(&c, 2000), 1.0 / sqrt(128.0) / sqrt(2000.0), "noam peak", 2000);

    /* the step uses the schedule's lr at t = step + 1 */
    printf("-- adam step with the noam schedule\n");
    uint64_t seed = 77;
    float w0[NV];
    fill_vec(w0, NV, &seed, -1, 1);
    c.clip = 0.0;
    impl_state s = impl_new(w0, NV);
    ref_state r = ref_new(w0, NV);
    for (int k = 0; k < 4; k++) {
        float g[NV];
        fill_vec(g, NV, &seed, -1, 1);
        ref_step(&r, g, ref_noam(c.lr, c.d_model, c.warmup, k + 1), c.beta1, c.beta2, c.eps, 0.0,
                 0, 0.0, 0);
        rp_adam_step(&c, &s.st, s.w, g, NV);
    }
    CHECK_CLOSE(s.w, r.w, NV, 5e-7, "noam: w after 4 steps vs reference");
    impl_free(&s);
    ref_free(&r);
}

static void test_cfg_check(void)
{
    printf("-- cfg_check\n");
    rp_adam_cfg d = rp_adam_cfg_default();
    CHECK(d.lr == 1e-3 && d.beta1 == 0.9 && d.beta2 == 0.999 && d.eps == 1e-8 &&
              d.weight_decay == 0.0 && d.decoupled == 0 && d.clip == 1.0 &&
              d.schedule == RP_SCHED_COSINE && d.warmup == 100 && d.total_steps == 2000 &&
              d.min_lr == 1e-4 && d.d_model == 512.0,
          "the defaults (rp.experiment's; labml's betas, eps and clip)");
    for (int i = 0; i < rp_adam_nkeys; i++) { /* every row: its field, its name */
        const rp_optim_key *k = &rp_adam_keys[i];
        rp_adam_cfg z;
        memset(&z, 0, sizeof z);
        rp_adam_cfg_set(&z, k, 1.0);
        CHECK(rp_adam_key(k->name) == k && rp_adam_cfg_get(&z, k) == 1.0 &&
                  rp_adam_cfg_get(&d, k) == k->def && k->help && *k->help,
              "row %s", k->name);
    }
    CHECK(rp_adam_key("learning_rate") == NULL && rp_adam_nkeys == 12, "12 rows");
    /* rp.experiment's places: 1 to n, each once, on rows it can pass by name (not a pair's) */
    int places = 0, place_ok = 1;
    for (int i = 0; i < rp_adam_nkeys; i++) {
        const rp_optim_key *k = &rp_adam_keys[i];
        if (!k->experiment) continue;
        places++;
        int same = 0;
        for (int j = 0; j < rp_adam_nkeys; j++) same += rp_adam_keys[j].experiment == k->experiment;
        if (same != 1 || k->experiment > rp_adam_nkeys || k->pair) place_ok = 0;
    }
    for (int p = 1; p <= places; p++) {
        int found = 0;
        for (int i = 0; i < rp_adam_nkeys; i++) found |= rp_adam_keys[i].experiment == p;
        place_ok &= found;
    }
    CHECK(place_ok && places == 7, "rp.experiment's 7 optimiser keys: places 1 to 7, no pair");
    CHECK_STATUS(rp_adam_cfg_check(&d), RP_OK, NULL);
    CHECK_STATUS(rp_adam_cfg_check(NULL), RP_ERR_ARG, "NULL");
    rp_adam_cfg c;
#define BAD(field, value, msg)                                   \
    do {                                                         \
        c = labml_cfg();                               \
        c.field = value;                                         \
        CHECK_STATUS(rp_adam_cfg_check(&c), RP_ERR_ARG, msg);    \
    } while (0)
    BAD(lr, -1.0, "lr must be a finite number > 0, got -1");
    BAD(lr, 0.0, "lr must be a finite number > 0, got 0");
    BAD(lr, 1e39, "lr must be at most 3.40282347e+38 (float32's largest), got 1e+39");
    BAD(lr, NAN, "lr must be");
    BAD(lr, INFINITY, "lr must be");
    BAD(beta1, 1.0, "beta1 must be in [0, 1), got 1");
    BAD(beta1, -0.1, "beta1 must be in [0, 1), got -0.1");
    BAD(beta2, 1.5, "beta2 must be in [0, 1), got 1.5");
    BAD(beta2, NAN, "beta2 must be in [0, 1)");
    BAD(eps, 0.0,
        "eps must be a finite number >= 1.17549435e-38 (float32's smallest normal number), got 0");
    BAD(eps, 1e-40,
        "eps must be a finite number >= 1.17549435e-38 (float32's smallest normal number), "
        "got 1e-40");
    BAD(eps, 1e-39,
        "eps must be a finite number >= 1.17549435e-38 (float32's smallest normal number), "
        "got 1e-39");
    BAD(eps, 1e39, "eps must be at most 3.40282347e+38 (float32's largest), got 1e+39");
    BAD(weight_decay, -0.01, "weight_decay must be a finite number >= 0, got -0.01");
    BAD(weight_decay, 1e39,
        "weight_decay must be at most 3.40282347e+38 (float32's largest), got 1e+39");
    BAD(decoupled, 2, "decoupled must be 0 (Adam) or 1 (AdamW), got 2");
    BAD(clip, -1.0, "clip must be a finite number >= 0 (0 = off), got -1");
    BAD(schedule, (rp_schedule)7, "schedule must be constant, cosine or noam, got 7");
    BAD(warmup, -5, "warmup must be >= 0, got -5");
    BAD(total_steps, -1, "total_steps must be >= 0, got -1");
    BAD(min_lr, -1e-3, "min_lr must be a finite number >= 0, got -0.001");
    BAD(min_lr, 1e39, "min_lr must be at most 3.40282347e+38 (float32's largest), got 1e+39");
    BAD(d_model, 0.0, "d_model must be a finite number > 0, got 0");
#undef BAD
    c = labml_cfg();
    c.schedule = RP_SCHED_COSINE;
    c.total_steps = 0;
    CHECK_STATUS(rp_adam_cfg_check(&c), RP_ERR_ARG,
                 "total_steps must be >= 1 for the cosine schedule, got 0");
    c.total_steps = 1000;
    c.warmup = 2000;
    CHECK_STATUS(rp_adam_cfg_check(&c), RP_ERR_ARG,
                 "warmup must be <= total_steps (1000) for the cosine schedule, got 2000");
    c.warmup = 10;
    c.min_lr = 1.0;
    CHECK_STATUS(rp_adam_cfg_check(&c), RP_ERR_ARG,
                 "min_lr must be <= lr (0.00025) for the cosine schedule, got 1");
    c.min_lr = 0.0;
    CHECK_STATUS(rp_adam_cfg_check(&c), RP_OK, NULL);
    c = labml_cfg();
    c.schedule = RP_SCHED_NOAM;
    c.warmup = 0;
    CHECK_STATUS(rp_adam_cfg_check(&c), RP_ERR_ARG,
                 "warmup must be >= 1 for the noam schedule, got 0");
    /* the float32 bounds themselves are taken */
    c = labml_cfg();
    c.eps = (double)FLT_MIN;
    c.weight_decay = (double)FLT_MAX;
    CHECK_STATUS(rp_adam_cfg_check(&c), RP_OK, NULL);
    c.schedule = RP_SCHED_CONSTANT;
    c.lr = (double)FLT_MAX;
    c.min_lr = (double)FLT_MAX;
    c.eps = (double)FLT_MAX;
    CHECK_STATUS(rp_adam_cfg_check(&c), RP_OK, NULL);
}

/* eps at its smallest, FLT_MIN: a weight whose gradient has always been 0 (m = v = 0) stays put
 * and the rest move by about lr, no NaN (the update flushes subnormals, so a smaller eps would
 * be 0 there: the lower bound of rp_adam_keys). */
static void test_eps_smallest(void)
{
    printf("-- eps = FLT_MIN\n");
    rp_adam_cfg cfg = labml_cfg();
    cfg.clip = 0.0;
    cfg.lr = 1e-3;
    cfg.eps = (double)FLT_MIN;
    CHECK_STATUS(rp_adam_cfg_check(&cfg), RP_OK, NULL);
    const float w0[4] = {0.5f, -0.25f, 1.0f, 2.0f};
    impl_state s = impl_new(w0, 4);
    for (int k = 0; k < 3; k++) {
        float g[4] = {0.1f, 0.0f, -0.3f, 0.0f};
        rp_adam_step(&cfg, &s.st, s.w, g, 4);
    }
    CHECK(s.w[1] == w0[1] && s.w[3] == w0[3], "weights with zero gradients unchanged: %g %g",
          (double)s.w[1], (double)s.w[3]);
    CHECK(fabs((double)s.w[0] - (double)w0[0] + 3 * cfg.lr) < 1e-6 &&
              fabs((double)s.w[2] - (double)w0[2] - 3 * cfg.lr) < 1e-6,
          "the others move by 3 lr against their gradients: %.9g %.9g", (double)s.w[0],
          (double)s.w[2]);
    impl_free(&s);
}

/* Grad norm against a double reference, and the same bits for 1..4 threads; the update too. */
static void test_threads(void)
{
    printf("-- thread-count independence\n");
    const int64_t n = 1000003; /* several norm batches, a ragged last chunk */
    float *g = malloc((size_t)n * sizeof(float));
    float *w0 = malloc((size_t)n * sizeof(float));
    uint64_t seed = 2024;
    fill_vec(g, n, &seed, -1, 1);
    fill_vec(w0, n, &seed, -1, 1);
    double ss = 0.0;
    for (int64_t i = 0; i < n; i++) ss += (double)g[i] * (double)g[i];
    double ref = sqrt(ss);
    int saved = rp_blas_threads();
    double norms[4];
    for (int th = 1; th <= 4; th++) {
        rp_blas_set_threads(th);
        norms[th - 1] = rp_grad_norm(g, n);
    }
    CHECK(fabs(norms[0] - ref) <= 1e-12 * ref, "grad norm %.17g vs serial double %.17g", norms[0],
          ref);
    for (int th = 2; th <= 4; th++)
        CHECK(memcmp(&norms[0], &norms[th - 1], sizeof(double)) == 0,
              "grad norm with %d threads %.17g == 1 thread %.17g (bitwise)", th, norms[th - 1],
              norms[0]);
    CHECK(rp_grad_norm(g, 0) == 0.0, "norm of nothing is 0");
    CHECK(rp_grad_norm(g, 1) == fabs((double)g[0]), "norm of one element");

    rp_adam_cfg cfg = labml_cfg();
    cfg.lr = 1e-2;
    cfg.weight_decay = 0.01;
    cfg.decoupled = 1;
    cfg.clip = 100.0; /* the norm is ~577: clipping happens */
    impl_state s[2];
    float *gg = malloc((size_t)n * sizeof(float));
    double rn[2][3];
    for (int k = 0; k < 2; k++) {
        rp_blas_set_threads(k == 0 ? 1 : 4);
        s[k] = impl_new(w0, n);
        for (int step = 0; step < 3; step++) {
            for (int64_t i = 0; i < n; i++) gg[i] = g[i] * (float)(step + 1);
            rn[k][step] = rp_adam_step(&cfg, &s[k].st, s[k].w, gg, n);
        }
    }
    rp_blas_set_threads(saved);
    CHECK(memcmp(rn[0], rn[1], sizeof rn[0]) == 0, "returned norms equal for 1 and 4 threads");
    CHECK(memcmp(s[0].w, s[1].w, (size_t)n * sizeof(float)) == 0,
          "w after 3 steps: 1 thread == 4 threads (bitwise)");
    CHECK(memcmp(s[0].m, s[1].m, (size_t)n * sizeof(float)) == 0, "m: 1 thread == 4 threads");
    CHECK(memcmp(s[0].v, s[1].v, (size_t)n * sizeof(float)) == 0, "v: 1 thread == 4 threads");
    impl_free(&s[0]);
    impl_free(&s[1]);
    free(gg);
    free(g);
    free(w0);
}

static void test_empty(void)
{
    printf("-- n = 0\n");
    rp_adam_cfg cfg = labml_cfg();
    impl_state s = impl_new(NULL, 0);
    float g[1] = {0};
    double norm = rp_adam_step(&cfg, &s.st, s.w, g, 0);
    CHECK(norm == 0.0 && s.st.step == 1, "an empty step returns 0 and counts: %g, %lld", norm,
          (long long)s.st.step);
    impl_free(&s);
}

/* A gradient holding nan or inf: the step returns the non-finite norm and changes nothing (w, g,
 * m, v, step), for Adam, AdamW and with clipping; then a finite step goes on as if the bad one
 * never happened (equal to a fresh state's step). */
static void test_nonfinite(void)
{
    printf("-- non-finite gradients\n");
    enum { N = 40000 }; /* above the parallel threshold of the norm and of the update */
    uint64_t seed = 77;
    float *w0 = malloc(N * sizeof(float)), *g = malloc(N * sizeof(float));
    float *gbad = malloc(N * sizeof(float)), *gcopy = malloc(N * sizeof(float));
    fill_vec(w0, N, &seed, -1.0, 1.0);
    fill_vec(g, N, &seed, -0.5, 0.5);
    const float bad[3] = {NAN, INFINITY, -INFINITY};
    for (int decoupled = 0; decoupled <= 1; decoupled++)
        for (int b = 0; b < 3; b++) {
            rp_adam_cfg cfg = labml_cfg();
            cfg.decoupled = decoupled;
            cfg.weight_decay = 0.1;
            cfg.clip = 0.5;
            impl_state s = impl_new(w0, N), fresh = impl_new(w0, N);
            /* one good step first, so that m and v are not zero */
            memcpy(gcopy, g, N * sizeof(float));
            rp_adam_step(&cfg, &s.st, s.w, gcopy, N);
            memcpy(gcopy, g, N * sizeof(float));
            rp_adam_step(&cfg, &fresh.st, fresh.w, gcopy, N);
            float *wb = malloc(N * sizeof(float)), *mb = malloc(N * sizeof(float));
            float *vb = malloc(N * sizeof(float));
            memcpy(wb, s.w, N * sizeof(float));
            memcpy(mb, s.m, N * sizeof(float));
            memcpy(vb, s.v, N * sizeof(float));
            memcpy(gbad, g, N * sizeof(float));
            gbad[N / 3] = bad[b];
            memcpy(gcopy, gbad, N * sizeof(float));
            double norm = rp_adam_step(&cfg, &s.st, s.w, gcopy, N);
            CHECK(!isfinite(norm), "%s, g holding %g: norm %g is not finite",
                  decoupled ? "adamw" : "adam", (double)bad[b], norm);
            CHECK(s.st.step == 1, "step stays 1, got %lld", (long long)s.st.step);
            CHECK(memcmp(wb, s.w, N * sizeof(float)) == 0, "w unchanged");
            CHECK(memcmp(mb, s.m, N * sizeof(float)) == 0, "m unchanged");
            CHECK(memcmp(vb, s.v, N * sizeof(float)) == 0, "v unchanged");
            CHECK(memcmp(gbad, gcopy, N * sizeof(float)) == 0, "g not clipped");
            /* the next good step equals the second step of a run that never saw the bad one */
            memcpy(gcopy, g, N * sizeof(float));
            rp_adam_step(&cfg, &s.st, s.w, gcopy, N);
            memcpy(gcopy, g, N * sizeof(float));
            rp_adam_step(&cfg, &fresh.st, fresh.w, gcopy, N);
            CHECK(memcmp(fresh.w, s.w, N * sizeof(float)) == 0 && s.st.step == 2,
                  "after the skipped step the run goes on unchanged");
            free(wb);
            free(mb);
            free(vb);
            impl_free(&s);
            impl_free(&fresh);
        }
    free(w0);
    free(g);
    free(gbad);
    free(gcopy);
}

int main(void)
{
    test_adam_vs_reference(1e-8, 0.0, "no clipping");
    test_adam_vs_reference(1e-8, 0.5, "clip 0.5");
    test_first_step_closed_form();
    test_eps_placement();
    test_weight_decay();
    test_clipping();
    test_schedules();
    test_cfg_check();
    test_eps_smallest();
    test_threads();
    test_empty();
    test_nonfinite();
    return check_summary("test_optim");
}
