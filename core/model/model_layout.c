/* The parameter layout: the layout table (rp_model_layout, model.h), whose rows rpm_build_layout
 * walks into the named entries over the flat parameter buffer (the gradient buffer has the same
 * layout), each with its shape, offset and init kind; the initialisation; the accessors of the
 * parameters. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "checked.h"
#include "model_impl.h"
#include "model_schema.h"

/* a + b and a * b for sizes >= 0, saturating at INT64_MAX (core/sys/checked.h): the counting pass of
 * a huge config (which rp_model_memory then refuses) never overflows. */
int64_t rpm_sat_add(int64_t a, int64_t b) { return rp_sat_add_i64(a, b); }
int64_t rpm_sat_mul(int64_t a, int64_t b) { return rp_sat_mul_i64(a, b); }

/* Appends one entry (info may be NULL: counting pass). fan_in is the input features of a
 * RP_INIT_UNIFORM entry (a bias shares its weight's), 0 otherwise. */
static int64_t add_param(rp_param_info *info, int *np, int64_t *off, const char *name, int ndim,
                         int64_t s0, int64_t s1, rp_init_kind init, int64_t fan_in)
{
    int64_t start = *off, numel = ndim == 1 ? s0 : rpm_sat_mul(s0, s1);
    if (info) {
        rp_param_info *p = &info[*np];
        memset(p, 0, sizeof *p);
        size_t len = strlen(name);
        RP_ASSERT(len < sizeof p->name); /* the longest: "layers.99999.attn.rel_q_proj.weight" */
        memcpy(p->name, name, len + 1);
        p->ndim = ndim;
        p->shape[0] = s0;
        p->shape[1] = ndim == 2 ? s1 : 0;
        p->offset = start;
        p->numel = numel;
        p->init = init;
        p->fan_in = fan_in;
    }
    (*np)++;
    *off = rpm_sat_add(*off, numel);
    return start;
}

/* Appends a relative kind's parameter p of shape rs (rp_rel_init: uniform with cols' fan-in). */
static int64_t rel_param(rp_param_info *info, int *np, int64_t *off, const char *name,
                         const rp_rel_param *p, const int64_t rs[2])
{
    static const rp_init_kind init[] = {RP_INIT_UNIFORM, RP_INIT_ZEROS, RP_INIT_NORMAL};
    return add_param(info, np, off, name, 2, rs[0], rs[1], init[p->init],
                     p->init == RP_RI_UNIFORM ? rs[1] : 0);
}

const char *const rp_init_names[] = {"normal", "ones", "zeros", "uniform", NULL};
const char *const rp_layout_scope_names[] = {"model", "layer", "after", NULL};

static const rp_layout_dim_desc dims[] = {
    [RP_LD_NONE] = {"", NULL, 0, 0},          [RP_LD_VOCAB] = {"vocab", "vocab", 1, 0},
    [RP_LD_D_MODEL] = {"d_model", "d_model", 1, 0}, [RP_LD_3D_MODEL] = {"3*d_model", "d_model", 3, 0},
    [RP_LD_D_FF] = {"d_ff", "d_ff", 1, 0},    [RP_LD_SEQ_LEN] = {"seq_len", "seq_len", 1, 0},
    [RP_LD_AXES] = {"axes", NULL, 0, RP_MAX_AXES}, [RP_LD_PAIRS] = {"pairs", "d_rot/2", 1, 0},
};
_Static_assert(sizeof dims / sizeof dims[0] == RP_LD_COUNT, "one row per rp_layout_dim");

const rp_layout_dim_desc *rp_layout_dim_of(rp_layout_dim d)
{
    return (unsigned)d < RP_LD_COUNT ? &dims[d] : NULL;
}

/* The layout table (model.h). Columns: name, scope, dims, init, fan-in, condition, where the
 * offset is kept. The rows without a name (the relative kind's parameters) take their shapes and
 * inits from the kind table (their dims and init columns are unused). */
#define MODEL(f) offsetof(rp_model, f)
#define LAYER(f) offsetof(layer_params, f)
#define ALWAYS RP_LAYOUT_ALWAYS, NULL, NULL
#define L_ RP_LAYOUT_LAYER
#define D_ RP_LD_D_MODEL
#define F_ RP_LD_D_FF
#define NO RP_LD_NONE
const rp_layout_row rp_model_layout[] = {
    /* the token embedding: N(0, 1), or with tie_embeddings the output layer's weight too, then
     * initialised as that weight is (two rows, one entry: each holds where the other does not) */
    {"embed.weight", RP_LAYOUT_MODEL, {RP_LD_VOCAB, D_}, RP_INIT_NORMAL, NO, RP_LAYOUT_IF_KEY,
     "tie_embeddings", "false", MODEL(off_embed)},
    {"embed.weight", RP_LAYOUT_MODEL, {RP_LD_VOCAB, D_}, RP_INIT_UNIFORM, D_, RP_LAYOUT_IF_KEY,
     "tie_embeddings", "true", MODEL(off_embed)},
    {"pos.weight", RP_LAYOUT_MODEL, {RP_LD_SEQ_LEN, D_}, RP_INIT_NORMAL, NO, RP_LAYOUT_IF_ABSOLUTE,
     NULL, "learned", MODEL(off_pos)},
    {NULL, RP_LAYOUT_MODEL, {NO, NO}, RP_INIT_UNIFORM, NO, ALWAYS, MODEL(off_rel)},
    {"norm1.weight", L_, {D_, NO}, RP_INIT_ONES, NO, ALWAYS, LAYER(ln1w)},
    {"norm1.bias", L_, {D_, NO}, RP_INIT_ZEROS, NO, ALWAYS, LAYER(ln1b)},
    {"attn.qkv.weight", L_, {RP_LD_3D_MODEL, D_}, RP_INIT_UNIFORM, D_, ALWAYS, LAYER(qkvw)},
    {"attn.qkv.bias", L_, {RP_LD_3D_MODEL, NO}, RP_INIT_UNIFORM, D_, ALWAYS, LAYER(qkvb)},
    {"attn.out.weight", L_, {D_, D_}, RP_INIT_UNIFORM, D_, ALWAYS, LAYER(outw)},
    {"attn.out.bias", L_, {D_, NO}, RP_INIT_UNIFORM, D_, ALWAYS, LAYER(outb)},
    {NULL, L_, {NO, NO}, RP_INIT_UNIFORM, NO, ALWAYS, LAYER(rel)},
    {"norm2.weight", L_, {D_, NO}, RP_INIT_ONES, NO, ALWAYS, LAYER(ln2w)},
    {"norm2.bias", L_, {D_, NO}, RP_INIT_ZEROS, NO, ALWAYS, LAYER(ln2b)},
    {"ff.w1.weight", L_, {F_, D_}, RP_INIT_UNIFORM, D_, ALWAYS, LAYER(w1w)},
    {"ff.w1.bias", L_, {F_, NO}, RP_INIT_UNIFORM, D_, ALWAYS, LAYER(w1b)},
    {"ff.w2.weight", L_, {D_, F_}, RP_INIT_UNIFORM, F_, ALWAYS, LAYER(w2w)},
    {"ff.w2.bias", L_, {D_, NO}, RP_INIT_UNIFORM, F_, ALWAYS, LAYER(w2b)},
    {"norm_f.weight", RP_LAYOUT_AFTER, {D_, NO}, RP_INIT_ONES, NO, RP_LAYOUT_IF_KEY, "norm", "pre",
     MODEL(off_normf_w)},
    {"norm_f.bias", RP_LAYOUT_AFTER, {D_, NO}, RP_INIT_ZEROS, NO, RP_LAYOUT_IF_KEY, "norm", "pre",
     MODEL(off_normf_b)},
    /* tie_embeddings: no weight of its own (rpm_build_layout points off_head_w at embed.weight) */
    {"head.weight", RP_LAYOUT_AFTER, {RP_LD_VOCAB, D_}, RP_INIT_UNIFORM, D_, RP_LAYOUT_IF_KEY,
     "tie_embeddings", "false", MODEL(off_head_w)},
    {"head.bias", RP_LAYOUT_AFTER, {RP_LD_VOCAB, NO}, RP_INIT_UNIFORM, D_, ALWAYS, MODEL(off_head_b)},
    /* learn_freq's frequencies (model_freq.c), last so that no other offset moves; set by
     * rpm_freq_reset once the model exists */
    {"rope.freq", RP_LAYOUT_AFTER, {RP_LD_AXES, RP_LD_PAIRS}, RP_INIT_ZEROS, NO, RP_LAYOUT_IF_KEY,
     "learn_freq", "true", MODEL(off_freq)},
};
#undef MODEL
#undef LAYER
#undef ALWAYS
#undef L_
#undef D_
#undef F_
#undef NO
const int rp_model_layout_n = (int)(sizeof rp_model_layout / sizeof rp_model_layout[0]);

int rp_layout_row_holds(const rp_layout_row *r, const rp_model_cfg *c)
{
    char buf[64], why[256];
    switch (r->cond) {
    case RP_LAYOUT_ALWAYS: return 1;
    case RP_LAYOUT_IF_ABSOLUTE:
        return strcmp(rp_pe_absolute_names[rp_pe_mode_of(c->pe.mode)->absolute], r->value) == 0;
    case RP_LAYOUT_IF_KEY: {
        const rp_cfg_key *k = rp_model_cfg_key(r->key, (size_t)-1);
        return !rp_model_cfg_unused(c, k, why, sizeof why) &&
               strcmp(rp_model_cfg_value_str(c, k, buf, sizeof buf), r->value) == 0;
    }
    }
    return 0;
}

/* The entries of the rows of one scope (of layer l in scope RP_LAYOUT_LAYER) into base (the
 * model, or the layer's record): each row's offset at base + its at (-1 where the model has
 * none; the relative kind's parameter k at index k of the layer's, the shared one there). size:
 * what each dim stands for. */
static void add_scope(rp_model *m, const int64_t *size, rp_layout_scope scope, int64_t l,
                      void *base, int *np, int64_t *off)
{
    const rp_model_cfg *c = &m->cfg;
    const rp_rel_desc *rel = rp_rel_of(m->pe.rel);
    int layer = scope == RP_LAYOUT_LAYER;
    char name[48];
    for (int i = 0; i < rp_model_layout_n; i++) /* -1: none (first, as two rows may share one) */
        if (rp_model_layout[i].scope == scope && rp_model_layout[i].name)
            *(int64_t *)(void *)((char *)base + rp_model_layout[i].at) = -1;
    for (int i = 0; i < rp_model_layout_n; i++) {
        const rp_layout_row *r = &rp_model_layout[i];
        if (r->scope != scope) continue;
        int64_t *at = (int64_t *)(void *)((char *)base + r->at);
        if (r->name) {
            if (!rp_layout_row_holds(r, c)) continue;
            snprintf(name, sizeof name, "%s", r->name);
            if (layer) snprintf(name, sizeof name, "layers.%d.%s", (int)l, r->name);
            *at = add_param(m->info, np, off, name, r->dims[1] == RP_LD_NONE ? 1 : 2,
                            size[r->dims[0]], size[r->dims[1]], r->init, size[r->fan_in]);
            continue;
        }
        for (int k = 0; k < (layer ? RP_REL_MAX_PARAMS : 1); k++) at[k] = -1;
        for (int k = 0; k < rel->nparams; k++) { /* the relative kind's of this scope */
            const rp_rel_param *q = &rel->params[k];
            if ((q->use == RP_PARAM_SHARED) == layer) continue;
            int64_t rs[2];
            for (int j = 0; j < 2; j++)
                rs[j] = rp_rel_dim_size(j ? q->cols : q->rows, c->rel.clip,
                                        c->d_model / c->heads, c->d_model, c->heads,
                                        c->rel.buckets);
            snprintf(name, sizeof name, "%s", q->name);
            if (layer) snprintf(name, sizeof name, "layers.%d.%s", (int)l, q->name);
            at[layer ? k : 0] = rel_param(m->info, np, off, name, q, rs);
        }
    }
}

int rpm_build_layout(rp_model *m)
{
    int64_t size[RP_LD_COUNT], off = 0;
    for (int d = 0; d < RP_LD_COUNT; d++) {
        const rp_layout_dim_desc *x = &dims[d];
        int64_t of = d == RP_LD_PAIRS ? m->freq_half /* its of, "d_rot/2", is no config key */
                     : !x->of         ? 0
                     : rp_model_cfg_get_int(&m->cfg, rp_model_cfg_key(x->of, (size_t)-1));
        size[d] = rpm_sat_add(rpm_sat_mul(x->times, of), x->plus);
    }
    int np = 0;
    layer_params lp;
    add_scope(m, size, RP_LAYOUT_MODEL, 0, m, &np, &off);
    for (int64_t l = 0; l < m->cfg.layers; l++) {
        add_scope(m, size, RP_LAYOUT_LAYER, l, &lp, &np, &off);
        if (m->lp) m->lp[l] = lp;
    }
    add_scope(m, size, RP_LAYOUT_AFTER, 0, m, &np, &off);
    /* tie_embeddings: the output layer's weight is the embedding's table (the same (vocab,
     * d_model) rows); its gradient then sums the embedding's and the output layer's (both
     * accumulate into one entry) */
    if (m->off_head_w < 0) m->off_head_w = m->off_embed;
    m->nfloats = off;
    return np;
}

void rpm_init_params(rp_model *m)
{
    rp_rng r;
    rp_rng_seed(&r, m->cfg.seed);
    float *w = m->params->data;
    for (int i = 0; i < m->nparams; i++) {
        const rp_param_info *p = &m->info[i];
        float *d = w + p->offset;
        switch (p->init) {
        case RP_INIT_NORMAL:
            for (int64_t k = 0; k < p->numel; k++) d[k] = (float)rp_rng_normal(&r);
            break;
        case RP_INIT_ONES:
        case RP_INIT_ZEROS: {
            float v = p->init == RP_INIT_ONES ? 1.0f : 0.0f;
            for (int64_t k = 0; k < p->numel; k++) d[k] = v;
            break;
        }
        case RP_INIT_UNIFORM: {
            double b = 1.0 / sqrt((double)p->fan_in), lo = -b, hi = b;
            for (int64_t k = 0; k < p->numel; k++)
                d[k] = (float)(lo + (hi - lo) * rp_rng_uniform(&r));
            break;
        }
        }
    }
}

int rp_model_first_nonfinite(const rp_model *m, int grad)
{
    const float *d = (grad ? m->grads : m->params)->data;
    for (int i = 0; i < m->nparams; i++) {
        const rp_param_info *p = &m->info[i];
        for (int64_t k = 0; k < p->numel; k++)
            if (!isfinite(d[p->offset + k])) return i;
    }
    return -1;
}

const rp_model_cfg *rp_model_config(const rp_model *m) { return &m->cfg; }
int rp_model_num_tensors(const rp_model *m) { return m->nparams; }

const rp_param_info *rp_model_param(const rp_model *m, int i)
{
    if (i < 0 || i >= m->nparams) return NULL;
    return &m->info[i];
}

int rp_model_find_param(const rp_model *m, const char *name)
{
    if (!name) return -1;
    for (int i = 0; i < m->nparams; i++)
        if (strcmp(m->info[i].name, name) == 0) return i;
    return -1;
}

int64_t rp_model_param_count(const rp_model *m) { return m->nfloats; }
rp_storage *rp_model_params(rp_model *m) { return m->params; }
rp_storage *rp_model_grads(rp_model *m) { return m->grads; }
rp_rng *rp_model_rng(rp_model *m) { return &m->rng; }

void rp_model_param_view(rp_tensor *out, rp_model *m, int i, int grad)
{
    memset(out, 0, sizeof *out);
    if (i < 0 || i >= m->nparams) return;
    const rp_param_info *p = &m->info[i];
    rp_storage *s = grad ? m->grads : m->params;
    rp_storage_retain(s);
    out->storage = s;
    out->offset = p->offset;
    out->ndim = p->ndim;
    out->shape[0] = p->shape[0];
    if (p->ndim == 2) {
        out->shape[1] = p->shape[1];
        out->stride[0] = p->shape[1];
        out->stride[1] = 1;
    } else {
        out->stride[0] = 1;
    }
}

void rp_model_zero_grad(rp_model *m)
{
    memset(m->grads->data, 0, (size_t)m->nfloats * sizeof(float));
}
