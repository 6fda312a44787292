/* The memory plan and the model's life: one bump planner lays out the activation, gradient and
 * decode buffers and the decoders of any number of lanes (model_impl.h shows the layouts); it
 * runs once to count (rp_model_memory, the size checks, rp_model_batch_lanes) and once more to
 * assign the pointers into what rp_model_new (or rp_model_generate_batch) allocated. */
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

/* n rounded up to a whole number of 16 floats (saturating) */
static int64_t line_floats(int64_t n)
{
    return n > INT64_MAX - 15 ? INT64_MAX : (n + 15) / 16 * 16;
}

static float *take(planner *pl, int64_t n)
{
    float *p = pl->base ? pl->base + pl->off : NULL;
    pl->off = rpm_sat_add(pl->off, line_floats(n));
    return p;
}

/* The floats that hold `bytes` (pieces of other types). */
static int64_t floats_of(int64_t bytes) { return bytes / 4 + (bytes % 4 != 0); }

/* A piece of `bytes`. */
static void *take_bytes(planner *pl, int64_t bytes) { return take(pl, floats_of(bytes)); }

/* nl pieces of `bytes` each in a row, each on its own 64-byte line: the first (NULL when
 * counting); *stride is the distance from one to the next, in bytes. */
static char *take_each(planner *pl, int64_t nl, int64_t bytes, int64_t *stride)
{
    int64_t f = line_floats(floats_of(bytes));
    *stride = rpm_sat_mul(f, sizeof(float));
    return (char *)take(pl, rpm_sat_mul(nl, f));
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
    m->ce_stats = take(pl, rpm_sat_mul(N, 2));
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
    int64_t nc16 = line_floats(NC); /* dqkv on a 64-byte line */
    int64_t attn = rpm_sat_add(nc16, rpm_sat_mul(NC, 3));
    int64_t region = NF > attn ? NF : attn;
    if (NV > region) region = NV;
    float *r = take(pl, region);
    m->dF = m->datty = m->dlogits = r;
    m->dqkv = r ? r + nc16 : NULL;
    m->drel = rpm_rel_grad_floats(m) ? take(pl, rpm_rel_grad_floats(m)) : NULL;
}

/* A decoder of nl lanes (model_impl.h: the one layout of the model's own decoder and of a
 * batch's): the lane table, the rows, and each lane's cache or state and window. Assigning, it
 * also points every lane at its own and leaves it idle and empty (prob -1, len 0, a linear
 * state zeroed). O(1) when counting. */
static void plan_lanes(const rp_model *m, planner *pl, rpm_decoder *d, int64_t nl)
{
    const rp_model_cfg *c = &m->cfg;
    int64_t C = c->d_model, F = c->d_ff, V = c->vocab, L = c->layers;
    d->nl = nl;
    d->lanes = take_bytes(pl, rpm_sat_mul(nl, sizeof(rpm_lane)));
    d->act = take_bytes(pl, rpm_sat_mul(nl, sizeof(int64_t)));
    d->wrow = take_bytes(pl, rpm_sat_mul(nl, sizeof(int64_t)));
    d->x = take(pl, rpm_sat_mul(nl, C));
    d->ln = take(pl, rpm_sat_mul(nl, C));
    d->y = take(pl, rpm_sat_mul(nl, C));
    d->proj = take(pl, rpm_sat_mul(nl, C));
    d->res = take(pl, rpm_sat_mul(nl, C));
    d->qkv = take(pl, rpm_sat_mul(nl, 3 * C));
    d->h = take(pl, rpm_sat_mul(nl, F));
    d->ha = take(pl, rpm_sat_mul(nl, F));
    d->logits = take(pl, rpm_sat_mul(nl, V));
    d->mean = take(pl, nl);
    d->rstd = take(pl, nl);
    /* softmax attention keeps keys and values, linear attention its running state */
    int64_t layer_bytes = m->linear ? rpm_sat_mul(rpm_state_layer_doubles(m), sizeof(double))
                                    : rpm_sat_mul(rpm_cache_layer_floats(m), sizeof(float));
    int64_t skv, swin = 0;
    char *kv = take_each(pl, nl, rpm_sat_mul(L, layer_bytes), &skv);
    char *win = NULL;
    if (!rpm_unbounded(m)) win = take_each(pl, nl, rpm_sat_mul(c->seq_len, sizeof(int32_t)), &swin);
    if (!pl->base) return;
    for (int64_t i = 0; i < nl; i++) {
        rpm_lane *ln = &d->lanes[i];
        memset(ln, 0, sizeof *ln);
        ln->prob = -1;
        if (m->linear) {
            ln->lin = (double *)(kv + i * skv);
            memset(ln->lin, 0, (size_t)(L * layer_bytes));
        } else {
            ln->kv = (float *)(kv + i * skv);
        }
        ln->win = win ? (int32_t *)(win + i * swin) : NULL;
    }
}

/* The decode buffer: the model's own decoder (1 lane), then what every decoder of the model
 * shares (model_impl.h). */
static void plan_cache(rp_model *m, planner *pl)
{
    const rp_model_cfg *c = &m->cfg;
    int64_t C = c->d_model, V = c->vocab, L = c->layers;
    m->dec.m = m;
    plan_lanes(m, pl, &m->dec, 1);
    rp_attn_cfg acfg = rpm_attn_cfg(m, 0);
    m->c_scratch = m->linear ? NULL
                             : take(pl, rp_attention_decode_scratch_floats(&acfg, c->seq_len,
                                                                           c->heads, m->dk, m->dk));
    m->gen_p = take_bytes(pl, rpm_sat_mul(V, sizeof(double)));
    m->gen_sort = take_bytes(pl, rpm_sat_mul(V, sizeof(gen_pair)));
    m->dec_w = take(pl, rpm_sat_add(rpm_sat_mul(L, rpm_dec_layer_floats(c)), rpm_sat_mul(C, V)));
    m->dec_rel = rpm_rel_dec_floats(m) ? take(pl, rpm_sat_mul(L, rpm_rel_dec_floats(m))) : NULL;
    int64_t nrope = m->linear ? 0 : rp_attention_decode_rows_floats(&acfg, c->seq_len);
    m->dec_rope = nrope ? take(pl, nrope) : NULL;
}

int64_t rpm_cache_layer_floats(const rp_model *m)
{
    return rp_attention_cache_floats(m->cfg.seq_len, m->cfg.heads, m->dk, m->dk);
}

int64_t rpm_state_layer_doubles(const rp_model *m)
{
    return rp_linattn_state_doubles(m->cfg.heads, m->dk, m->dk);
}

int rpm_unbounded(const rp_model *m) { return m->linear && m->pe.absolute == RP_ABS_NONE; }

/* The bytes alloc_floats takes for n floats. */
static int64_t alloc_bytes(int64_t n)
{
    return rpm_sat_mul(line_floats(n > 0 ? n : 1), sizeof(float));
}

static float *alloc_floats(int64_t n) { return aligned_alloc(64, (size_t)alloc_bytes(n)); }

int64_t rpm_decoder_bytes(const rp_model *m, int64_t nl)
{
    planner pl = {NULL, 0};
    rpm_decoder d;
    plan_lanes(m, &pl, &d, nl);
    return alloc_bytes(pl.off);
}

rp_status rpm_decoder_new(rp_model *m, rpm_decoder *d, int64_t nl, void **block)
{
    planner pl = {NULL, 0};
    plan_lanes(m, &pl, d, nl);
    float *mem = alloc_floats(pl.off);
    if (!mem)
        return rp_error(RP_ERR_NOMEM, "cannot allocate %lld lanes of batched decoding (%lld bytes)",
                        (long long)nl, (long long)alloc_bytes(pl.off));
    pl.base = mem;
    pl.off = 0;
    plan_lanes(m, &pl, d, nl);
    d->m = m;
    *block = mem;
    return RP_OK;
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
    free(m->pos_table);
    free(m->mix_table);
    free(m->freq_buf);
    free(m->freq_acc);
    free(m->freq_axis);
    free(m->lp);
    free(m->la);
    rp_storage_release(m->params);
    rp_storage_release(m->grads);
    rp_buffer_free(m->act_mem, m->act_floats);
    rp_buffer_free(m->grad_mem, m->grad_floats);
    rp_buffer_free(m->cache_mem, m->cache_floats);
    free(m->tokens);
    free(m->targets);
    free(m->mask);
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
    m->freq_half = rpm_freq_half(m);
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

/* learn_freq's buffers (m->off_freq >= 0), allocated by rp_model_new and counted by model_size:
 * freq_buf, the parameter in double (every row); freq_acc, a placement's dL/dphi summed over the
 * batch and heads (seq_len x half); freq_axis, each pair's axis. */
static size_t freq_buf_count(const rp_model *m) { return (size_t)(RP_MAX_AXES * m->freq_half); }
static size_t freq_acc_count(const rp_model *m)
{
    return (size_t)(m->cfg.seq_len * m->freq_half);
}

/* Every float block of the model (parameters and gradients, activations, activation gradients,
 * the decode buffer), counted by the planner: *floats, saturating. *bytes adds everything else
 * rp_model_new allocates (token copies, the layout tables, learn_freq's buffers), as allocated.
 * init_derived must have run. */
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
        b += (double)alloc_bytes(blocks[i]);
    }
    double rows = (double)c->max_batch * (double)c->seq_len;
    b += rows * (2.0 * sizeof(int32_t) + 1.0);
    b += (double)c->layers * (sizeof(layer_params) + sizeof(layer_acts));
    b += (double)m->nparams * sizeof(rp_param_info) + sizeof(rp_model);
    if (m->off_freq >= 0)
        b += (double)(freq_buf_count(m) + freq_acc_count(m)) * sizeof(double) +
             (double)m->freq_half * sizeof(int);
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
    if (m->off_freq >= 0) {
        m->freq_buf = calloc(freq_buf_count(m), sizeof(double));
        m->freq_acc = malloc(freq_acc_count(m) * sizeof(double));
        m->freq_axis = malloc((size_t)m->freq_half * sizeof(int));
        if (!m->freq_buf || !m->freq_acc || !m->freq_axis) goto nomem;
        rpm_freq_reset(m);
    }

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
    m->dec_rope_stale = 1;
    /* not cleared: every piece is written before it is read (the KV cache's positions past the
     * current one never affect a result, rp_attention_decode), so its pages stay untouched, and
     * out of the resident set, until decoding runs (about 100 MiB for P); only a linear
     * state is zeroed (plan_lanes) */

    size_t nrows = (size_t)(c->max_batch * c->seq_len);
    m->tokens = malloc(nrows * sizeof(int32_t));
    m->targets = malloc(nrows * sizeof(int32_t));
    m->mask = malloc(nrows);
    if (!m->tokens || !m->targets || !m->mask) goto nomem;
    return m;

nomem:
    rp_model_free(m);
    rp_error(RP_ERR_NOMEM, "cannot allocate a model of d_model %lld, %lld layers for max_batch "
                           "%lld x seq_len %lld",
             (long long)c->d_model, (long long)c->layers, (long long)c->max_batch,
             (long long)c->seq_len);
    return NULL;
}
