/* Optimisers over flat buffers: Adam as labml runs it and decoupled AdamW, gradient-norm
 * clipping, learning-rate schedules. Config is separate from state (torch/optim style). */
#ifndef RP_OPTIM_H
#define RP_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef enum {
    RP_SCHED_CONSTANT = 0, /* lr */
    RP_SCHED_COSINE,       /* linear warmup over `warmup` steps to lr, then cosine to min_lr at
                              total_steps (min_lr after) */
    RP_SCHED_NOAM          /* lr * d_model^-0.5 * min(t^-0.5, t * warmup^-1.5) (labml/Vaswani) */
} rp_schedule;

typedef struct rp_adam_cfg {
    double lr;            /* the peak learning rate */
    double beta1, beta2;
    double eps;
    double weight_decay;  /* with decoupled = 0 it is added to the gradient (L2, as Adam
                             traditionally does); with decoupled = 1 it is AdamW's
                             p -= lr_t * wd * p */
    int decoupled;        /* 0 Adam, 1 AdamW */
    double clip;          /* clip the global gradient norm to this (0 = off) */
    rp_schedule schedule;
    int64_t warmup;       /* steps (cosine, noam) */
    int64_t total_steps;  /* cosine */
    double min_lr;        /* cosine floor */
    double d_model;       /* noam */
} rp_adam_cfg;

/* The optimiser's keys: one row per field of rp_adam_cfg (optim.c's rp_adam_keys), the one place
 * that gives each its name, default, range and help. From the rows come rp_adam_cfg_default,
 * the range checks of rp_adam_cfg_check, rp.optim's options and opt:config()
 * (bindings/optim.c), rp.experiment's optimiser keys (the rows with an `experiment` place) with
 * scripts/train.lua's --lr and friends (the rows reach the Lua parts as internals.optim_keys),
 * and the checkpoint's optimiser block (core/io/checkpoint.c: every row by its name). A new key
 * is a field of rp_adam_cfg and its row; its default must be the behaviour from before it
 * existed, which a checkpoint written before it reads as. */
typedef enum {
    RP_OPT_NUM,  /* double: a finite number in the range */
    RP_OPT_INT,  /* int64_t: >= lo */
    RP_OPT_ENUM, /* an int or an enum stored as one: a value of names */
} rp_optim_type;

enum {
    RP_OPT_LO_OPEN = 1, /* RP_OPT_NUM: lo itself is outside the range */
    RP_OPT_HI_OPEN = 2, /* RP_OPT_NUM: hi itself is outside the range */
    RP_OPT_OPTION = 4,  /* an option of rp.optim.adam / adamw (by its name) */
    RP_OPT_PAIR = 8,    /* with the next row, one option named by `pair` ({beta1, beta2}) */
};

typedef struct rp_optim_key {
    const char *name;         /* the field's name: messages, options, opt:config() */
    rp_optim_type type;
    size_t offset;            /* of the field in rp_adam_cfg */
    double def;               /* the default (an enum's value) */
    double lo, hi;            /* RP_OPT_NUM: the range (hi may be INFINITY); RP_OPT_INT: lo */
    int flags;                /* RP_OPT_* */
    const char *const *names; /* RP_OPT_ENUM: the names in value order, NULL-terminated */
    const char *pair;         /* RP_OPT_PAIR: the option's name */
    const char *note;         /* in the range message: after a number's range (" (0 = off)"), or
                               * an enum's values written out ("0 (Adam) or 1 (AdamW)") */
    const char *help;         /* one line: rp.experiment.keys(), the scripts' --help */
    int experiment;           /* offered by rp.experiment: its place among the experiment's
                               * optimiser keys (1 first: the order of rp.experiment.keys() and
                               * the scripts' --help), with the row's default, range and help,
                               * passed to rp.optim as the option of its name (so not on a row
                               * of a pair); 0: not offered */
} rp_optim_key;

extern const rp_optim_key rp_adam_keys[];
extern const int rp_adam_nkeys;

/* "constant", "cosine", "noam", NULL; "adam", "adamw", NULL (decoupled 0 and 1). */
extern const char *const rp_schedule_names[];
extern const char *const rp_adam_kind_names[];

/* The row named name, or NULL. */
const rp_optim_key *rp_adam_key(const char *name);
/* A field's value as a double (an int as its value), and set from one (converted to the row's
 * type: RP_OPT_INT and RP_OPT_ENUM take integral values of their range); the _int pair for
 * RP_OPT_INT and RP_OPT_ENUM rows, exact for every int64_t. */
double rp_adam_cfg_get(const rp_adam_cfg *c, const rp_optim_key *k);
void rp_adam_cfg_set(rp_adam_cfg *c, const rp_optim_key *k, double v);
int64_t rp_adam_cfg_get_int(const rp_adam_cfg *c, const rp_optim_key *k);
void rp_adam_cfg_set_int(rp_adam_cfg *c, const rp_optim_key *k, int64_t v);
/* Checks one field against its row's range: RP_ERR_ARG naming it ("lr must be a finite number
 * >= 0, got -1", "beta1 must be in [0, 1), got 1", "warmup must be >= 0, got -5", "schedule
 * must be constant, cosine or noam, got 7"). */
rp_status rp_adam_cfg_check_key(const rp_adam_cfg *c, const rp_optim_key *k);

/* The rows' defaults: lr 1e-3, betas 0.9/0.999, eps 1e-8, no weight decay, Adam, clip 1.0, the
 * cosine schedule with 100 warmup steps to min_lr 1e-4 at total_steps 2000, d_model 512 (noam's;
 * rp.optim takes the model's): the settings every run of rp.experiment used (with labml's betas,
 * eps and clip). */
rp_adam_cfg rp_adam_cfg_default(void);
/* Checks every field against its row (rp_adam_cfg_check_key, in row order), then the rules
 * between them (the cosine schedule's total_steps >= 1, warmup <= total_steps and min_lr <= lr;
 * noam's warmup >= 1); RP_ERR_ARG naming the field. */
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
