/* Adam (labml's "optimized" update) and AdamW over flat float buffers, global-norm clipping and
 * learning-rate schedules (core/nn/optim.h).
 *
 * Numerics: the scalar factors (schedule, bias corrections, step size, decay factor, clip
 * coefficient) are computed in double and rounded to float once; the per-element update runs in
 * float. The build is ISO C (-std=c11), so GCC does not contract a*b+c into an FMA and every
 * element's result is the same whatever the vector width or thread count. The gradient norm is
 * accumulated in double over fixed-size chunks whose partial sums are added in chunk order, so it
 * does not depend on the thread count either.
 *
 * Clipping follows torch.nn.utils.clip_grad_norm_ (what labml calls with max_norm 1.0):
 * coef = clip / (norm + 1e-6), and g *= coef when coef < 1.
 */
#include "optim.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "field.h"
#include "fpmode.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

const char *const rp_schedule_names[] = {"constant", "cosine", "noam", NULL};
const char *const rp_adam_kind_names[] = {"adam", "adamw", NULL};

#define F(field) offsetof(rp_adam_cfg, field)

/* The optimiser's keys (optim.h), in the order of rp.optim's options and of the checks;
 * rp.experiment offers those with an experiment place, in that place's order (decoupled as its
 * key optimiser, adam or adamw). lr, eps, weight_decay and min_lr enter the update as float32
 * (adam_step), so each is at most FLT_MAX (past it the float is inf and the weights NaN), and eps
 * is at least FLT_MIN (the update flushes subnormals, fpmode.h: a smaller eps is 0 there, and 0 /
 * 0 gives NaN wherever a gradient has been 0). */
const rp_optim_key rp_adam_keys[] = {
    {.name = "lr", .type = RP_OPT_NUM, .offset = F(lr), .def = 1e-3, .lo = 0,
     .hi = (double)FLT_MAX,
     .flags = RP_OPT_LO_OPEN | RP_OPT_OPTION, .help = "peak learning rate", .experiment = 2},
    {.name = "beta1", .type = RP_OPT_NUM, .offset = F(beta1), .def = 0.9, .lo = 0, .hi = 1,
     .flags = RP_OPT_HI_OPEN | RP_OPT_OPTION | RP_OPT_PAIR, .pair = "betas",
     .help = "Adam's decay of the gradients' running mean"},
    {.name = "beta2", .type = RP_OPT_NUM, .offset = F(beta2), .def = 0.999, .lo = 0, .hi = 1,
     .flags = RP_OPT_HI_OPEN | RP_OPT_OPTION, .pair = "betas",
     .help = "Adam's decay of the squared gradients' running mean"},
    {.name = "eps", .type = RP_OPT_NUM, .offset = F(eps), .def = 1e-8,
     .lo = (double)FLT_MIN, .hi = (double)FLT_MAX, .flags = RP_OPT_OPTION,
     .help = "Adam's epsilon, added to sqrt(v)"},
    {.name = "weight_decay", .type = RP_OPT_NUM, .offset = F(weight_decay), .def = 0, .lo = 0,
     .hi = (double)FLT_MAX, .flags = RP_OPT_OPTION,
     .help = "L2 (adam) or decoupled (adamw) weight decay", .experiment = 3},
    {.name = "decoupled", .type = RP_OPT_ENUM, .offset = F(decoupled), .def = 0,
     .names = rp_adam_kind_names, .note = "0 (Adam) or 1 (AdamW)", .help = "optimiser",
     .experiment = 1},
    {.name = "clip", .type = RP_OPT_NUM, .offset = F(clip), .def = 1, .lo = 0, .hi = HUGE_VAL,
     .flags = RP_OPT_OPTION, .note = " (0 = off)", .help = "gradient-norm clip (0: off)",
     .experiment = 7},
    {.name = "schedule", .type = RP_OPT_ENUM, .offset = F(schedule), .def = RP_SCHED_COSINE,
     .names = rp_schedule_names, .flags = RP_OPT_OPTION, .help = "learning-rate schedule",
     .experiment = 4},
    {.name = "warmup", .type = RP_OPT_INT, .offset = F(warmup), .def = 100, .lo = 0,
     .flags = RP_OPT_OPTION, .help = "warmup steps (cosine, noam)", .experiment = 5},
    {.name = "total_steps", .type = RP_OPT_INT, .offset = F(total_steps), .def = 2000, .lo = 0,
     .flags = RP_OPT_OPTION, .help = "cosine: the step at which the rate reaches min_lr"},
    {.name = "min_lr", .type = RP_OPT_NUM, .offset = F(min_lr), .def = 1e-4, .lo = 0,
     .hi = (double)FLT_MAX, .flags = RP_OPT_OPTION, .help = "cosine: final learning rate",
     .experiment = 6},
    {.name = "d_model", .type = RP_OPT_NUM, .offset = F(d_model), .def = 512, .lo = 0,
     .hi = HUGE_VAL, .flags = RP_OPT_LO_OPEN, .help = "noam: the model width"},
};
const int rp_adam_nkeys = (int)(sizeof rp_adam_keys / sizeof rp_adam_keys[0]);

#undef F

/* Enum fields are read and written as ints. */
_Static_assert(sizeof(rp_schedule) == sizeof(int), "the schedule is an int");

const rp_optim_key *rp_adam_key(const char *name)
{
    for (int i = 0; name && i < rp_adam_nkeys; i++)
        if (strcmp(rp_adam_keys[i].name, name) == 0) return &rp_adam_keys[i];
    return NULL;
}

double rp_adam_cfg_get(const rp_adam_cfg *c, const rp_optim_key *k)
{
    if (k->type != RP_OPT_NUM) return (double)rp_adam_cfg_get_int(c, k);
    double v;
    memcpy(&v, (const char *)c + k->offset, sizeof v);
    return v;
}

void rp_adam_cfg_set(rp_adam_cfg *c, const rp_optim_key *k, double v)
{
    if (k->type != RP_OPT_NUM) {
        rp_adam_cfg_set_int(c, k, (int64_t)v);
        return;
    }
    memcpy((char *)c + k->offset, &v, sizeof v);
}

int64_t rp_adam_cfg_get_int(const rp_adam_cfg *c, const rp_optim_key *k)
{
    return rp_field_get_int(c, k->offset, k->type == RP_OPT_INT);
}

void rp_adam_cfg_set_int(rp_adam_cfg *c, const rp_optim_key *k, int64_t v)
{
    rp_field_set_int(c, k->offset, k->type == RP_OPT_INT, v);
}

rp_adam_cfg rp_adam_cfg_default(void)
{
    rp_adam_cfg c;
    memset(&c, 0, sizeof c);
    for (int i = 0; i < rp_adam_nkeys; i++) rp_adam_cfg_set(&c, &rp_adam_keys[i], rp_adam_keys[i].def);
    return c;
}

static const char *sched_name(rp_schedule s) { return rp_schedule_names[s]; }

rp_status rp_adam_cfg_check_key(const rp_adam_cfg *c, const rp_optim_key *k)
{
    const char *at = (const char *)c + k->offset;
    if (k->type == RP_OPT_INT) {
        int64_t v;
        memcpy(&v, at, sizeof v);
        if (v < (int64_t)k->lo)
            return rp_error(RP_ERR_ARG, "%s must be >= %lld, got %lld", k->name, (long long)k->lo,
                            (long long)v);
        return RP_OK;
    }
    if (k->type == RP_OPT_ENUM) {
        int v, n = 0;
        memcpy(&v, at, sizeof v);
        while (k->names[n]) n++;
        if (v >= 0 && v < n) return RP_OK;
        char list[128];
        size_t len = 0;
        list[0] = '\0';
        for (int i = 0; i < n && !k->note; i++) /* "constant, cosine or noam" */
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%s",
                                    i == 0 ? "" : i == n - 1 ? " or " : ", ", k->names[i]);
        return rp_error(RP_ERR_ARG, "%s must be %s, got %d", k->name, k->note ? k->note : list,
                        v);
    }
    double x;
    memcpy(&x, at, sizeof x);
    /* comparisons written so that NaN fails them */
    int lo_ok = k->flags & RP_OPT_LO_OPEN ? x > k->lo : x >= k->lo;
    int hi_ok = k->flags & RP_OPT_HI_OPEN ? x < k->hi : x <= k->hi;
    if (lo_ok && hi_ok && isfinite(x)) return RP_OK;
    /* a bound of float32's (FLT_MAX, FLT_MIN) named as such */
    /* (float32's bounds and a value beside them at 9 digits: at %g 3.402824e38 and FLT_MAX
     * would both read 3.40282e+38) */
    if (lo_ok && isfinite(x) && k->hi == (double)FLT_MAX)
        return rp_error(RP_ERR_ARG, "%s must be at most %.9g (float32's largest), got %.9g",
                        k->name, k->hi, x);
    if (k->lo == (double)FLT_MIN)
        return rp_error(RP_ERR_ARG, "%s must be a finite number %s %.9g (float32's smallest "
                                    "normal number), got %.9g", k->name,
                        k->flags & RP_OPT_LO_OPEN ? ">" : ">=", k->lo, x);
    if (isinf(k->hi) || k->hi == (double)FLT_MAX)
        return rp_error(RP_ERR_ARG, "%s must be a finite number %s %g%s, got %g", k->name,
                        k->flags & RP_OPT_LO_OPEN ? ">" : ">=", k->lo, k->note ? k->note : "",
                        x);
    return rp_error(RP_ERR_ARG, "%s must be in %c%g, %g%c, got %g", k->name,
                    k->flags & RP_OPT_LO_OPEN ? '(' : '[', k->lo, k->hi,
                    k->flags & RP_OPT_HI_OPEN ? ')' : ']', x);
}

rp_status rp_adam_cfg_check(const rp_adam_cfg *cfg)
{
    if (!cfg) return rp_error(RP_ERR_ARG, "optimiser config is NULL");
    for (int i = 0; i < rp_adam_nkeys; i++) RP_TRY(rp_adam_cfg_check_key(cfg, &rp_adam_keys[i]));
    if (cfg->schedule == RP_SCHED_COSINE) {
        if (cfg->total_steps < 1)
            return rp_error(RP_ERR_ARG, "total_steps must be >= 1 for the %s schedule, got %lld",
                            sched_name(cfg->schedule), (long long)cfg->total_steps);
        if (cfg->warmup > cfg->total_steps)
            return rp_error(RP_ERR_ARG,
                            "warmup must be <= total_steps (%lld) for the %s schedule, got %lld",
                            (long long)cfg->total_steps, sched_name(cfg->schedule),
                            (long long)cfg->warmup);
        if (!(cfg->min_lr <= cfg->lr))
            return rp_error(RP_ERR_ARG, "min_lr must be <= lr (%g) for the %s schedule, got %g",
                            cfg->lr, sched_name(cfg->schedule), cfg->min_lr);
    }
    if (cfg->schedule == RP_SCHED_NOAM && cfg->warmup < 1)
        return rp_error(RP_ERR_ARG, "warmup must be >= 1 for the %s schedule, got %lld",
                        sched_name(cfg->schedule), (long long)cfg->warmup);
    return RP_OK;
}

int64_t rp_adam_next_step(const rp_adam_state *st)
{
    return st->step < RP_ADAM_MAX_STEP ? st->step + 1 : RP_ADAM_MAX_STEP;
}

double rp_lr_at(const rp_adam_cfg *cfg, int64_t t)
{
    if (t < 0) t = 0; /* before the first step: the warm-up schedules give 0 */
    double td = (double)t;
    switch (cfg->schedule) {
    case RP_SCHED_CONSTANT: return cfg->lr;
    case RP_SCHED_COSINE: {
        if (cfg->warmup > 0 && t <= cfg->warmup) return cfg->lr * td / (double)cfg->warmup;
        if (t >= cfg->total_steps) return cfg->min_lr;
        double frac = (td - (double)cfg->warmup) / (double)(cfg->total_steps - cfg->warmup);
        return cfg->min_lr + (cfg->lr - cfg->min_lr) * 0.5 * (1.0 + cos(M_PI * frac));
    }
    case RP_SCHED_NOAM: {
        if (t == 0) return 0.0;
        double a = pow(td, -0.5), b = td * pow((double)cfg->warmup, -1.5);
        return cfg->lr * pow(cfg->d_model, -0.5) * (a < b ? a : b);
    }
    }
    return cfg->lr;
}

/* Grad norm: chunks of NORM_CHUNK elements, each summed serially (8 interleaved accumulators in a
 * fixed order), chunk sums added in chunk order. Up to NORM_BATCH chunks per parallel loop keep
 * the partial sums on the stack. */
enum { NORM_CHUNK = 4096, NORM_BATCH = 256 };

static double chunk_sumsq(const float *g, int64_t n)
{
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) {
            double x = (double)g[i + k];
            acc[k] += x * x;
        }
    for (int k = 0; i < n; i++, k++) {
        double x = (double)g[i];
        acc[k] += x * x;
    }
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

double rp_grad_norm(const float *g, int64_t n)
{
    double total = 0.0;
    double part[NORM_BATCH];
    int64_t nchunks = (n + NORM_CHUNK - 1) / NORM_CHUNK;
    for (int64_t c0 = 0; c0 < nchunks; c0 += NORM_BATCH) {
        int64_t nc = nchunks - c0 < NORM_BATCH ? nchunks - c0 : NORM_BATCH;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (nc > 4)
#endif
        for (int64_t c = 0; c < nc; c++) {
            int64_t lo = (c0 + c) * NORM_CHUNK;
            int64_t len = n - lo < NORM_CHUNK ? n - lo : NORM_CHUNK;
            part[c] = chunk_sumsq(g + lo, len);
        }
        for (int64_t c = 0; c < nc; c++) total += part[c];
    }
    return sqrt(total);
}

/* Below this many elements the update runs on one thread (thread start-up costs more). */
enum { PAR_MIN = 1 << 15 };

static double adam_step(const rp_adam_cfg *cfg, rp_adam_state *st, float *w, float *g, int64_t n)
{
    RP_ASSERT(cfg && st && n >= 0 && n == st->n);
    RP_ASSERT(st->step >= 0 && st->step <= RP_ADAM_MAX_STEP); /* checkpoints check it */
    RP_ASSERT(n == 0 || (w && g && st->m && st->v));

    double norm = rp_grad_norm(g, n);
    if (!isfinite(norm)) return norm; /* nan/inf somewhere in g: leave everything untouched */
    if (cfg->clip > 0.0) {
        double coef = cfg->clip / (norm + 1e-6);
        if (coef < 1.0) {
            float cf = (float)coef;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
#endif
            for (int64_t i = 0; i < n; i++) g[i] *= cf;
        }
    }

    int64_t t = rp_adam_next_step(st);
    double lr_t = rp_lr_at(cfg, t);
    double bc1 = 1.0 - pow(cfg->beta1, (double)t);
    double bc2 = 1.0 - pow(cfg->beta2, (double)t);
    const float step_size = (float)(lr_t * sqrt(bc2) / bc1);
    const float b1 = (float)cfg->beta1, omb1 = (float)(1.0 - cfg->beta1);
    const float b2 = (float)cfg->beta2, omb2 = (float)(1.0 - cfg->beta2);
    const float eps = (float)cfg->eps;
    const int l2 = !cfg->decoupled && cfg->weight_decay > 0.0;
    const int decay = cfg->decoupled && cfg->weight_decay > 0.0;
    const float wd = (float)cfg->weight_decay;
    const float keep = (float)(1.0 - lr_t * cfg->weight_decay); /* AdamW: w *= 1 - lr_t wd */
    float *m = st->m, *v = st->v;

#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
#endif
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i], wi = w[i];
        if (l2) gi = gi + wd * wi;
        if (decay) wi = wi * keep;
        float mi = b1 * m[i] + omb1 * gi;
        float vi = b2 * v[i] + (omb2 * gi) * gi; /* torch addcmul order */
        m[i] = mi;
        v[i] = vi;
        w[i] = wi - (step_size * mi) / (sqrtf(vi) + eps); /* torch addcdiv order */
    }
    st->step = t;
    return norm;
}

double rp_adam_step(const rp_adam_cfg *cfg, rp_adam_state *st, float *w, float *g, int64_t n)
{
    rp_fpmode fm = rp_fp_flush_begin();
    double r = adam_step(cfg, st, w, g, n);
    rp_fp_flush_end(fm);
    return r;
}
