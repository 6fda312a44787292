/* The parameter layout: one table of named entries over the flat parameter buffer (the gradient
 * buffer has the same layout), each with its shape, offset and init kind; the initialisation;
 * the accessors of the parameters. */
#include <math.h>
#include <string.h>

#include "checked.h"
#include "model_impl.h"

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

int rpm_build_layout(rp_model *m)
{
    const rp_model_cfg *c = &m->cfg;
    int64_t V = c->vocab, C = c->d_model, F = c->d_ff, off = 0;
    int np = 0;
    char name[48];
    rp_param_info *info = m->info;
    m->off_embed = add_param(info, &np, &off, "embed.weight", 2, V, C, RP_INIT_NORMAL, 0);
    m->off_pos = -1;
    if (m->pe.absolute == RP_ABS_LEARNED)
        m->off_pos =
            add_param(info, &np, &off, "pos.weight", 2, c->seq_len, C, RP_INIT_NORMAL, 0);
    /* the relative kind's parameters (core/nn/pe.c's kind table): the shared one before the
     * layers, the others in each layer after the attention's projections */
    const rp_rel_desc *rel = rp_rel_of(m->pe.rel);
    int64_t rs[RP_REL_MAX_PARAMS][2];
    for (int i = 0; i < rel->nparams; i++)
        for (int j = 0; j < 2; j++)
            rs[i][j] = rp_rel_dim_size(j ? rel->params[i].cols : rel->params[i].rows,
                                       c->rel_clip, C / c->heads, C, c->heads, c->rel_buckets);
    m->off_rel = -1;
    for (int i = 0; i < rel->nparams; i++)
        if (rel->params[i].use == RP_PARAM_SHARED)
            m->off_rel = rel_param(info, &np, &off, rel->params[i].name, &rel->params[i], rs[i]);
    for (int64_t l = 0; l < c->layers; l++) {
        layer_params lp;
#define RP_LAYER_PARAM(field, suffix, nd, a, b, init, fan)                      \
    snprintf(name, sizeof name, "layers.%d.%s", (int)l, suffix);                \
    lp.field = add_param(info, &np, &off, name, nd, a, b, init, fan)
        RP_LAYER_PARAM(ln1w, "norm1.weight", 1, C, 0, RP_INIT_ONES, 0);
        RP_LAYER_PARAM(ln1b, "norm1.bias", 1, C, 0, RP_INIT_ZEROS, 0);
        RP_LAYER_PARAM(qkvw, "attn.qkv.weight", 2, 3 * C, C, RP_INIT_UNIFORM, C);
        RP_LAYER_PARAM(qkvb, "attn.qkv.bias", 1, 3 * C, 0, RP_INIT_UNIFORM, C);
        RP_LAYER_PARAM(outw, "attn.out.weight", 2, C, C, RP_INIT_UNIFORM, C);
        RP_LAYER_PARAM(outb, "attn.out.bias", 1, C, 0, RP_INIT_UNIFORM, C);
        for (int i = 0; i < RP_REL_MAX_PARAMS; i++) lp.rel[i] = -1;
        for (int i = 0; i < rel->nparams; i++) {
            if (rel->params[i].use == RP_PARAM_SHARED) continue;
            snprintf(name, sizeof name, "layers.%d.%s", (int)l, rel->params[i].name);
            lp.rel[i] = rel_param(info, &np, &off, name, &rel->params[i], rs[i]);
        }
        RP_LAYER_PARAM(ln2w, "norm2.weight", 1, C, 0, RP_INIT_ONES, 0);
        RP_LAYER_PARAM(ln2b, "norm2.bias", 1, C, 0, RP_INIT_ZEROS, 0);
        RP_LAYER_PARAM(w1w, "ff.w1.weight", 2, F, C, RP_INIT_UNIFORM, C);
        RP_LAYER_PARAM(w1b, "ff.w1.bias", 1, F, 0, RP_INIT_UNIFORM, C);
        RP_LAYER_PARAM(w2w, "ff.w2.weight", 2, C, F, RP_INIT_UNIFORM, F);
        RP_LAYER_PARAM(w2b, "ff.w2.bias", 1, C, 0, RP_INIT_UNIFORM, F);
#undef RP_LAYER_PARAM
        if (m->lp) m->lp[l] = lp;
    }
    m->off_normf_w = m->off_normf_b = -1;
    if (c->norm == RP_NORM_PRE) {
        m->off_normf_w = add_param(info, &np, &off, "norm_f.weight", 1, C, 0, RP_INIT_ONES, 0);
        m->off_normf_b = add_param(info, &np, &off, "norm_f.bias", 1, C, 0, RP_INIT_ZEROS, 0);
    }
    m->off_head_w = add_param(info, &np, &off, "head.weight", 2, V, C, RP_INIT_UNIFORM, C);
    m->off_head_b = add_param(info, &np, &off, "head.bias", 1, V, 0, RP_INIT_UNIFORM, C);
    /* learn_freq: the frequencies (model_freq.c), last so that no other offset moves; set by
     * rpm_freq_reset once the model exists */
    m->off_freq = -1;
    if (c->learn_freq && m->pe.rotate && c->attention != RP_ATTN_LINEAR) /* where it applies */
        m->off_freq = add_param(info, &np, &off, "rope.freq", 2, RP_MAX_AXES, m->freq_half,
                                RP_INIT_ZEROS, 0);
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
