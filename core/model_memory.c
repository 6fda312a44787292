/* The memory plan and the model's life: one bump planner lays out the activation, gradient and
 * decode buffers (model_impl.h shows the layouts); it runs once to count (rp_model_memory, the
 * size checks) and once more to assign the pointers into what rp_model_new allocated. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model_impl.h"
#include "parallel.h"
#include "sysmem.h"

/* A bump allocator in floats: counts (base NULL) or assigns. Every piece is rounded up to 16
 * floats (64 bytes). Sizes saturate at INT64_MAX, so counting a huge config never overflows. */
typedef struct {
    float *base; /* NULL in the counting pass */
    int64_t off;
} planner;

static float *take(planner *pl, int64_t n)
{
    float *p = pl->base ? pl->base + pl->off : NULL;
    pl->off = rpm_sat_add(pl->off, n > INT64_MAX - 15 ? INT64_MAX : (n + 15) / 16 * 16);
    return p;
}


static void plan_acts(rp_model *m, planner *pl)
{
    const rp_model_cfg *c = &m->cfg;
    int64_t N = c->max_batch * c->seq_len, C = c->d_model, F = c->d_ff, V = c->vocab;
    int64_t NC = rpm_sat_mul(N, C), NF = rpm_sat_mul(N, F);
    int drop = c->dropout > 0.0;
    /* pre-norm keeps no LayerNorm output (the backward recomputes them); post-norm keeps ln1 and
     * ln2, which are its residual stream */
    int post = c->norm == RP_NORM_POST;
    m->x0 = take(pl, NC);
    for (int64_t l = 0; l < c->layers; l++) {
        layer_acts a;
        a.ln1 = post ? take(pl, NC) : NULL;
        a.ln1_mean = take(pl, N);
        a.ln1_rstd = take(pl, N);
        a.qkv = take(pl, rpm_sat_mul(NC, 3));
        a.lse = m->linear ? NULL : take(pl, rpm_sat_mul(N, c->heads));
        a.atty = take(pl, NC);
        a.mask1 = drop ? take(pl, NC) : NULL;
        a.res1 = take(pl, NC);
        a.ln2 = post ? take(pl, NC) : NULL;
        a.ln2_mean = take(pl, N);
        a.ln2_rstd = take(pl, N);
        a.fch = take(pl, NF);
        a.mask2 = drop ? take(pl, NC) : NULL;
        a.res2 = take(pl, NC);
        /* the relative modes' computed tables (model_rel.c) */
        int64_t nrel = rpm_rel_act_floats(m);
        a.rel_tab = nrel ? take(pl, nrel) : NULL;
        if (m->la) m->la[l] = a;
    }
    m->lnf_mean = m->lnf_rstd = NULL;
    if (!post) {
        m->lnf_mean = take(pl, N);
        m->lnf_rstd = take(pl, N);
    }
    m->logits = take(pl, rpm_sat_mul(N, V));
    m->probs = take(pl, rpm_sat_mul(N, V));
    m->losses = take(pl, N);
    m->sin_table = m->pe.absolute == RP_ABS_SINUSOIDAL ? take(pl, rpm_sat_mul(c->seq_len, C))
                                                       : NULL;
    m->xl_table = rpm_rel_table_floats(m) ? take(pl, rpm_rel_table_floats(m)) : NULL;
    m->attn_scratch = take(pl, m->attn_scratch_floats);
}

static void plan_grads(rp_model *m, planner *pl)
{
    const rp_model_cfg *c = &m->cfg;
    int64_t N = c->max_batch * c->seq_len, C = c->d_model, F = c->d_ff, V = c->vocab;
    int64_t NC = rpm_sat_mul(N, C), NF = rpm_sat_mul(N, F), NV = rpm_sat_mul(N, V);
    m->dx = take(pl, NC);
    m->work = take(pl, NC);
    /* one region for the gradients that are never live at once: dF (the feed-forward branch),
     * datty + dqkv (the attention branch), dlogits (the head) */
    int64_t nc16 = NC > INT64_MAX - 15 ? INT64_MAX : (NC + 15) / 16 * 16; /* dqkv on a 64-byte line */
    int64_t attn = rpm_sat_add(nc16, rpm_sat_mul(NC, 3));
    int64_t region = NF > attn ? NF : attn;
    if (NV > region) region = NV;
    float *r = take(pl, region);
    m->dF = m->datty = m->dlogits = r;
    m->dqkv = r ? r + nc16 : NULL;
    m->drel = rpm_rel_grad_floats(m) ? take(pl, rpm_rel_grad_floats(m)) : NULL;
}

static void plan_cache(rp_model *m, planner *pl)
{
    const rp_model_cfg *c = &m->cfg;
    int64_t Tm = c->seq_len, C = c->d_model, F = c->d_ff, V = c->vocab, L = c->layers;
    /* linear attention decodes with its running state instead of keys and values */
    m->kvcache = m->linear ? NULL : take(pl, rpm_sat_mul(L, rpm_cache_layer_floats(m)));
    m->c_x = take(pl, C);
    m->c_ln = take(pl, C);
    m->c_mean = take(pl, 1);
    m->c_rstd = take(pl, 1);
    m->c_qkv = take(pl, 3 * C);
    m->c_y = take(pl, C);
    m->c_proj = take(pl, C);
    m->c_res = take(pl, C);
    m->c_h = take(pl, F);
    m->c_ha = take(pl, F);
    m->c_logits = take(pl, V);
    rp_attn_cfg acfg = rpm_attn_cfg(m, 0);
    m->c_scratch = m->linear ? NULL
                             : take(pl, rp_attention_decode_scratch_floats(&acfg, Tm, c->heads,
                                                                           m->dk, m->dk));
    m->dec_w = take(pl, rpm_sat_add(rpm_sat_mul(L, rpm_dec_layer_floats(c)), rpm_sat_mul(C, V)));
    m->dec_rel = rpm_rel_dec_floats(m) ? take(pl, rpm_sat_mul(L, rpm_rel_dec_floats(m))) : NULL;
}

int64_t rpm_cache_layer_floats(const rp_model *m)
{
    return rp_attention_cache_floats(m->cfg.seq_len, m->cfg.heads, m->dk, m->dk);
}

int64_t rpm_dec_layer_floats(const rp_model_cfg *c)
{
    int64_t C = c->d_model, F = c->d_ff;
    return rpm_sat_add(rpm_sat_mul(rpm_sat_mul(C, C), 4), rpm_sat_mul(rpm_sat_mul(C, F), 2));
}

/* Runs plan (a counting pass), allocates what it counted (rp_buffer_new: counted in rp_mem_held,
 * not cleared) and runs it again to assign the pointers; returns the block (NULL when out of
 * memory) and its size in floats in *floats. */
static float *plan_alloc(rp_model *m, void (*plan)(rp_model *, planner *), int64_t *floats)
{
    planner pl = {NULL, 0};
    plan(m, &pl);
    *floats = pl.off;
    float *mem = rp_buffer_new(pl.off);
    if (!mem) return NULL;
    pl.base = mem;
    pl.off = 0;
    plan(m, &pl);
    return mem;
}

void rp_model_free(rp_model *m)
{
    if (!m) return;
    int64_t floats = rpm_sat_add(rpm_sat_add(m->act_floats, m->grad_floats),
                                 rpm_sat_add(m->cache_floats, rpm_sat_mul(m->nfloats, 2)));
    free(m->info);
    free(m->freq_table);
    free(m->lp);
    free(m->la);
    rp_storage_release(m->params);
    rp_storage_release(m->grads);
    rp_buffer_free(m->act_mem, m->act_floats);
    rp_buffer_free(m->grad_mem, m->grad_floats);
    rp_buffer_free(m->cache_mem, m->cache_floats);
    free(m->lin_state);
    free(m->tokens);
    free(m->targets);
    free(m->mask);
    free(m->gen_p);
    free(m->gen_sort);
    free(m->gen_win);
    free(m);
    if (floats >= RP_MODEL_TRIM_BYTES / (int64_t)sizeof(float)) rp_mem_trim();
}

/* Fills the fields of m that follow from a checked cfg alone (no allocation): sizes, the
 * positional scheme, the layout size (the layout's counting pass) and the attention scratch. */
static void init_derived(rp_model *m, const rp_model_cfg *cfg)
{
    const rp_model_cfg *c = cfg;
    m->cfg = *cfg;
    m->dk = c->d_model / c->heads;
    m->pe = rp_model_cfg_scheme(c);
    m->freq = rp_model_cfg_freq(c);
    m->linear = c->attention == RP_ATTN_LINEAR;
    m->lin_min_den = (double)NAN;
    m->nparams = rpm_build_layout(m); /* info and lp are NULL: counts, sets nfloats */
    m->nthreads = rp_max_threads();
    rp_attn_cfg acfg = rpm_attn_cfg(m, 0);
    m->attn_scratch_floats =
        m->linear ? rp_linattn_scratch_floats(c->seq_len, m->dk, m->dk, m->nthreads)
                  : rp_attention_scratch_floats(&acfg, c->max_batch, c->seq_len, c->seq_len,
                                                c->heads, m->dk, m->dk, m->nthreads);
}

/* Every float block of the model (parameters and gradients, activations, activation gradients,
 * the decode buffer), counted by the planner: *floats, saturating. *bytes adds everything else
 * rp_model_new allocates (the linear decode state, token copies, generation scratch, the layout
 * tables), as allocated. init_derived must have run. */
static void model_size(rp_model *m, int64_t *floats, double *bytes)
{
    const rp_model_cfg *c = &m->cfg;
    int64_t blocks[3];
    void (*plans[3])(rp_model *, planner *) = {plan_acts, plan_grads, plan_cache};
    int64_t total = rpm_sat_mul(m->nfloats, 2);
    double b = 2.0 * (double)m->nfloats * sizeof(float);
    for (int i = 0; i < 3; i++) {
        planner pl = {NULL, 0};
        plans[i](m, &pl);
        blocks[i] = pl.off;
        total = rpm_sat_add(total, pl.off);
        /* as rp_buffer_new rounds it */
        b += (double)(((blocks[i] > 0 ? blocks[i] : 1) * (int64_t)sizeof(float) + 63) / 64 * 64);
    }
    if (m->linear)
        b += (double)(c->layers * rp_linattn_state_doubles(c->heads, m->dk, m->dk)) *
             sizeof(double);
    double rows = (double)c->max_batch * (double)c->seq_len;
    b += rows * (2.0 * sizeof(int32_t) + 1.0);
    b += (double)c->vocab * (sizeof(double) + sizeof(gen_pair));
    b += (double)c->seq_len * sizeof(int32_t);
    b += (double)c->layers * (sizeof(layer_params) + sizeof(layer_acts));
    b += (double)m->nparams * sizeof(rp_param_info) + sizeof(rp_model);
    *floats = total;
    *bytes = b;
}

/* Checks cfg and sizes it (init_derived into *m, then model_size); RP_ERR_NOMEM beyond 2^40
 * floats. The model's width times its length is bounded first, so that the attention scratch
 * (about 8 seq_len d_k per thread) is computed without overflow. */
static rp_status plan_model(rp_model *m, const rp_model_cfg *cfg, double *bytes)
{
    RP_TRY(rp_model_cfg_check(cfg));
    const rp_model_cfg *c = cfg;
    int64_t floats = INT64_MAX;
    memset(m, 0, sizeof *m);
    if (rpm_sat_mul(c->seq_len, c->d_model) <= RP_MAX_NUMEL) {
        init_derived(m, cfg);
        model_size(m, &floats, bytes);
    }
    if (floats > RP_MAX_NUMEL) {
        char n[32] = "over 9.22e+18";
        if (floats < INT64_MAX) snprintf(n, sizeof n, "%.3g", (double)floats);
        return rp_error(RP_ERR_NOMEM,
                        "model of d_model %lld, %lld layers, max_batch %lld x seq_len %lld needs "
                        "%s floats (more than 2^40)",
                        (long long)c->d_model, (long long)c->layers, (long long)c->max_batch,
                        (long long)c->seq_len, n);
    }
    return RP_OK;
}

rp_status rp_model_memory(const rp_model_cfg *cfg, int64_t *bytes, int64_t *params)
{
    rp_model m;
    double b = 0.0;
    RP_TRY(plan_model(&m, cfg, &b));
    if (bytes) *bytes = (int64_t)b;
    if (params) *params = m.nfloats;
    return RP_OK;
}

rp_model *rp_model_new(const rp_model_cfg *cfg)
{
    rp_model probe;
    double need = 0.0;
    if (plan_model(&probe, cfg, &need) != RP_OK) return NULL;
    const rp_model_cfg *c = cfg;

    /* refuse what the machine cannot hold, rather than letting overcommit succeed and the OOM
     * killer end the process at the first forward pass */
    int64_t avail = rp_mem_available();
    if (avail >= 0 && need > (double)avail) {
        char a[32], b[32];
        rp_error(RP_ERR_NOMEM,
                 "a model of d_model %lld, %lld layers for max_batch %lld x seq_len %lld "
                 "needs %s, more than the %s of memory available",
                 (long long)c->d_model, (long long)c->layers, (long long)c->max_batch,
                 (long long)c->seq_len, rp_bytes_str(a, sizeof a, need),
                 rp_bytes_str(b, sizeof b, (double)avail));
        return NULL;
    }

    rp_model *m = calloc(1, sizeof *m);
    if (!m) {
        rp_error(RP_ERR_NOMEM, "cannot allocate the model");
        return NULL;
    }
    init_derived(m, cfg);
    rp_rng_seed(&m->rng, c->seed ^ RP_DROPOUT_SEED_XOR);

    /* layout: counted by init_derived, now filled */
    m->info = calloc((size_t)m->nparams, sizeof *m->info);
    m->lp = calloc((size_t)c->layers, sizeof *m->lp);
    if (!m->info || !m->lp) goto nomem;
    rpm_build_layout(m);
    m->params = rp_storage_new((size_t)m->nfloats);
    m->grads = rp_storage_new((size_t)m->nfloats);
    if (!m->params || !m->grads) goto nomem;
    rpm_init_params(m);

    /* activations */
    m->la = calloc((size_t)c->layers, sizeof *m->la);
    if (!m->la) goto nomem;
    m->act_mem = plan_alloc(m, plan_acts, &m->act_floats);
    if (!m->act_mem) goto nomem;
    if (m->sin_table) rp_sinusoidal_forward(m->sin_table, c->seq_len, c->d_model, 0, RP_ROPE_BASE);
    rpm_rel_init(m);
    m->grad_mem = plan_alloc(m, plan_grads, &m->grad_floats);
    if (!m->grad_mem) goto nomem;
    m->cache_mem = plan_alloc(m, plan_cache, &m->cache_floats);
    if (!m->cache_mem) goto nomem;
    /* not cleared: every piece is written before it is read (the KV cache's positions past the
     * current one never affect a result, rp_attention_decode), so its pages stay untouched, and
     * out of the resident set, until decoding runs (about 100 MiB for P) */
    if (m->linear) {
        size_t n = (size_t)(c->layers * rp_linattn_state_doubles(c->heads, m->dk, m->dk));
        m->lin_state = calloc(n, sizeof(double));
        if (!m->lin_state) goto nomem;
    }

    size_t nrows = (size_t)(c->max_batch * c->seq_len);
    m->tokens = malloc(nrows * sizeof(int32_t));
    m->targets = malloc(nrows * sizeof(int32_t));
    m->mask = malloc(nrows);
    m->gen_p = malloc((size_t)c->vocab * sizeof(double));
    m->gen_sort = malloc((size_t)c->vocab * sizeof(gen_pair));
    m->gen_win = malloc((size_t)c->seq_len * sizeof(int32_t));
    if (!m->tokens || !m->targets || !m->mask || !m->gen_p || !m->gen_sort || !m->gen_win)
        goto nomem;
    return m;

nomem:
    rp_model_free(m);
    rp_error(RP_ERR_NOMEM, "cannot allocate a model of d_model %lld, %lld layers for max_batch "
                           "%lld x seq_len %lld",
             (long long)c->d_model, (long long)c->layers, (long long)c->max_batch,
             (long long)c->seq_len);
    return NULL;
}
