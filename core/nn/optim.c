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

#include <math.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

rp_adam_cfg rp_adam_cfg_default(void)
{
    rp_adam_cfg c;
    c.lr = 2.5e-4;
    c.beta1 = 0.9;
    c.beta2 = 0.999;
    c.eps = 1e-8;
    c.weight_decay = 0.0;
    c.decoupled = 0;
    c.clip = 1.0;
    c.schedule = RP_SCHED_CONSTANT;
    c.warmup = 2000;
    c.total_steps = 0;
    c.min_lr = 0.0;
    c.d_model = 512.0;
    return c;
}

static const char *sched_name(rp_schedule s)
{
    switch (s) {
    case RP_SCHED_CONSTANT: return "constant";
    case RP_SCHED_COSINE: return "cosine";
    case RP_SCHED_NOAM: return "noam";
    }
    return "?";
}

rp_status rp_adam_cfg_check(const rp_adam_cfg *cfg)
{
    if (!cfg) return rp_error(RP_ERR_ARG, "optimiser config is NULL");
    /* comparisons written so that NaN fails them */
    if (!(cfg->lr >= 0.0 && isfinite(cfg->lr)))
        return rp_error(RP_ERR_ARG, "lr must be a finite number >= 0, got %g", cfg->lr);
    if (!(cfg->beta1 >= 0.0 && cfg->beta1 < 1.0))
        return rp_error(RP_ERR_ARG, "beta1 must be in [0, 1), got %g", cfg->beta1);
    if (!(cfg->beta2 >= 0.0 && cfg->beta2 < 1.0))
        return rp_error(RP_ERR_ARG, "beta2 must be in [0, 1), got %g", cfg->beta2);
    if (!(cfg->eps > 0.0 && isfinite(cfg->eps)))
        return rp_error(RP_ERR_ARG, "eps must be a finite number > 0, got %g", cfg->eps);
    if (!(cfg->weight_decay >= 0.0 && isfinite(cfg->weight_decay)))
        return rp_error(RP_ERR_ARG, "weight_decay must be a finite number >= 0, got %g",
                        cfg->weight_decay);
    if (cfg->decoupled != 0 && cfg->decoupled != 1)
        return rp_error(RP_ERR_ARG, "decoupled must be 0 (Adam) or 1 (AdamW), got %d",
                        cfg->decoupled);
    if (!(cfg->clip >= 0.0 && isfinite(cfg->clip)))
        return rp_error(RP_ERR_ARG, "clip must be a finite number >= 0 (0 = off), got %g",
                        cfg->clip);
    if (cfg->schedule != RP_SCHED_CONSTANT && cfg->schedule != RP_SCHED_COSINE &&
        cfg->schedule != RP_SCHED_NOAM)
        return rp_error(RP_ERR_ARG, "schedule must be constant, cosine or noam, got %d",
                        (int)cfg->schedule);
    if (cfg->warmup < 0)
        return rp_error(RP_ERR_ARG, "warmup must be >= 0, got %lld", (long long)cfg->warmup);
    if (cfg->total_steps < 0)
        return rp_error(RP_ERR_ARG, "total_steps must be >= 0, got %lld",
                        (long long)cfg->total_steps);
    if (!(cfg->min_lr >= 0.0 && isfinite(cfg->min_lr)))
        return rp_error(RP_ERR_ARG, "min_lr must be a finite number >= 0, got %g", cfg->min_lr);
    if (!(cfg->d_model > 0.0 && isfinite(cfg->d_model)))
        return rp_error(RP_ERR_ARG, "d_model must be a finite number > 0, got %g", cfg->d_model);
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

double rp_adam_step(const rp_adam_cfg *cfg, rp_adam_state *st, float *w, float *g, int64_t n)
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
