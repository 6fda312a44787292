/* Optimisers over flat buffers: Adam as labml runs it and decoupled AdamW, gradient-norm
 * clipping, learning-rate schedules. Config is separate from state (torch/optim style). */
#ifndef RP_OPTIM_H
#define RP_OPTIM_H

#include <stdint.h>

#include "status.h"

typedef enum {
    RP_SCHED_CONSTANT = 0, /* lr */
    RP_SCHED_COSINE,       /* linear warmup over `warmup` steps to lr, then cosine to min_lr at
                              total_steps (min_lr after) */
    RP_SCHED_NOAM          /* lr * d_model^-0.5 * min(t^-0.5, t * warmup^-1.5) (labml/Vaswani) */
} rp_schedule;

typedef struct rp_adam_cfg {
    double lr;            /* 2.5e-4 */
    double beta1, beta2;  /* 0.9, 0.999 */
    double eps;           /* 1e-8 */
    double weight_decay;  /* 0; with decoupled = 0 it is added to the gradient (L2, as Adam
                             traditionally does); with decoupled = 1 it is AdamW's
                             p -= lr_t * wd * p */
    int decoupled;        /* 0 Adam, 1 AdamW */
    double clip;          /* clip the global gradient norm to this (0 = off); 1.0 as labml */
    rp_schedule schedule;
    int64_t warmup;       /* steps */
    int64_t total_steps;  /* cosine */
    double min_lr;        /* cosine floor */
    double d_model;       /* noam */
} rp_adam_cfg;

/* labml's settings: lr 2.5e-4, betas 0.9/0.999, eps 1e-8, no weight decay, Adam, clip 1.0,
 * constant schedule (warmup 2000, d_model 512 only used by other schedules). */
rp_adam_cfg rp_adam_cfg_default(void);
/* Checks every field; RP_ERR_ARG naming it. */
rp_status rp_adam_cfg_check(const rp_adam_cfg *cfg);

typedef struct rp_adam_state {
    float *m, *v;   /* n floats each (caller-owned) */
    int64_t n;
    int64_t step;   /* steps taken so far: 0 .. RP_ADAM_MAX_STEP */
} rp_adam_state;

/* The most steps a state records (2^53): the schedules and bias corrections use the step as a
 * double, exact up to here, and step + 1 stays far from overflow. rp_adam_step stops counting
 * there; checkpoints refuse a step beyond it, saved or loaded. */
#define RP_ADAM_MAX_STEP ((int64_t)1 << 53)

/* The step number t (1-based) the next rp_adam_step on st uses: step + 1, at most
 * RP_ADAM_MAX_STEP. */
int64_t rp_adam_next_step(const rp_adam_state *st);

/* Learning rate at step t (1-based) under cfg's schedule. */
double rp_lr_at(const rp_adam_cfg *cfg, int64_t t);

/* Euclidean norm of g (n floats), accumulated in double. */
double rp_grad_norm(const float *g, int64_t n);

/* One step over n = st->n floats (RP_ASSERT otherwise): clips g in place as torch's
 * clip_grad_norm_ does (coef = clip / (norm + 1e-6), applied when coef < 1; clip > 0), then
 * updates w.
 * Adam as labml's "optimized" update (eps added to sqrt(v) BEFORE bias correction):
 *   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  t = step+1
 *   step_size = lr_t * sqrt(1 - b2^t) / (1 - b1^t);  w -= step_size * m / (sqrt(v) + eps)
 * AdamW additionally w -= lr_t * wd * w with the scheduled lr_t (before the Adam update, as
 * torch.optim.AdamW). L2 Adam uses g + wd * w for the moments and leaves g itself alone.
 * Returns the gradient norm before clipping. Increments st->step, which must be in 0 ..
 * RP_ADAM_MAX_STEP (RP_ASSERT) and stays at RP_ADAM_MAX_STEP once there (the update then uses
 * t = RP_ADAM_MAX_STEP: the bias corrections are 1 long before).
 * When that norm is not finite (a nan or inf in g), nothing is changed (w, g, m, v and st->step
 * stay as they were) and the non-finite norm is returned: a diverged step never reaches the
 * weights; the caller decides whether to stop or go on. */
double rp_adam_step(const rp_adam_cfg *cfg, rp_adam_state *st, float *w, float *g, int64_t n);

#endif
