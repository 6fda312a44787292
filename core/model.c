/* The transformer of model.h: a layout table over one flat parameter buffer (and a gradient
 * buffer with the same layout), one activation buffer and one activation-gradient buffer sized
 * once for (max_batch, seq_len), a KV cache for incremental decoding, and generation.
 *
 * ---- Activation buffer (floats; N = max_batch * seq_len rows, A = max_batch * H * seq_len^2;
 * every piece is rounded up to a multiple of 16 floats so that each starts on a 64-byte line) ----
 *
 *   x0        (N, C)    embedding output (+ sinusoidal table / learned rows): the residual
 *                       stream entering layer 0 (rp_model_residual(-1))
 *   per layer l = 0 .. layers-1, in this order:
 *     ln1       (N, C)  pre-norm: LN1(x);  post-norm: LN1(res1) (= h1, the FF input)
 *     ln1_mean  (N)     \ saved LayerNorm statistics of ln1
 *     ln1_rstd  (N)     /
 *     qkv       (N, 3C) the fused projection, columns [q | k | v] (unrotated)
 *     att       (A)     softmax weights (B, H, T, T) of the last forward, packed for its B, T
 *     atty      (N, C)  attention output before the output projection (heads side by side)
 *     mask1     (N, C)  dropout mask of the attention branch (only when cfg.dropout > 0)
 *     res1      (N, C)  x + drop(attn proj)
 *     ln2       (N, C)  pre-norm: LN2(res1) (the FF input);  post-norm: LN2(res2) = layer output
 *     ln2_mean  (N), ln2_rstd (N)
 *     fch       (N, F)  FF pre-activation (ln2 or h1) @ W1^T + b1
 *     fch_act   (N, F)  relu/gelu(fch)
 *     mask2     (N, C)  dropout mask of the FF branch (only when cfg.dropout > 0)
 *     res2      (N, C)  pre-norm: res1 + drop(ff) = layer output;  post-norm: h1 + drop(ff)
 *   proj      (N, C)    scratch: the output of the attention / FF output projections before
 *                       dropout and the residual add (backward never needs it)
 *   lnf       (N, C), lnf_mean (N), lnf_rstd (N)   final LayerNorm (pre-norm only)
 *   logits    (N, V)
 *   probs     (N, V)    softmax of the logits (saved by the cross-entropy for backward)
 *   losses    (N)       per-row cross-entropy
 *
 * The layer output (the residual stream after layer l) is res2 for pre-norm and ln2 for post-norm.
 * Rows are packed for the B, T of the last forward: row n = b * T + t.
 *
 * ---- Activation-gradient buffer (sized once; backward reuses it layer after layer) ----
 *   dx (N, C)     gradient of the residual stream at the current point
 *   dA (N, C)     gradient of a LayerNorm output / input (pre: d ln; post: d res2, then d h1)
 *   dB (N, C)     dropout-masked branch gradient (only touched when dropout was applied)
 *   datty (N, C)  gradient of the attention output
 *   dqkv (N, 3C)  gradient of the fused q, k, v
 *   dF1 (N, F), dF2 (N, F)   gradients of fch_act and fch
 *   dlogits (N, V)
 * Every kernel's backward accumulates, so each target is zeroed (memset, B*T rows) right before
 * the kernel that fills it, except dx / dA where the accumulation IS the residual sum.
 *
 * ---- Other memory, all allocated by rp_model_new ----
 *   the attention scratch (rp_attention_scratch_floats(seq_len, seq_len, d_k, d_k, nthreads) with
 *   nthreads = omp_get_max_threads() at creation); the sinusoidal table (seq_len, C) for
 *   pe = sinusoidal; copies of the last tokens / targets / mask (N each); the KV cache, per layer
 *   k and v (seq_len, C) each, and per-token scratch of the cached path; cos/sin tables for
 *   positions 0 .. seq_len-1 (q/k: fraction_qk; v: fraction_v, angles x2 for roper_legacy; the
 *   output's reverse rotation: fraction_v, x1); generation scratch (V doubles, V index pairs,
 *   seq_len window tokens). Nothing is allocated per step.
 *
 * ---- RNG streams ----
 *   Initialisation: one rp_rng seeded with cfg.seed, drawn in layout order (uniform values as
 *   lo + (hi - lo) * rp_rng_uniform, the formula of rp_rng_fill_uniform; normals rp_rng_normal).
 *   Dropout: rp_model_rng, seeded with cfg.seed ^ RP_DROPOUT_SEED_XOR, so dropout masks do not
 *   repeat the initialisation stream. Each training forward draws, per layer, the attention-branch
 *   mask (B*T*C values) then the FF-branch mask, through rp_dropout_forward.
 */
#include "model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "layers.h"
#include "parallel.h"
#include "sysmem.h"

/* Distinguishes the dropout stream from the initialisation stream of the same seed. */
#define RP_DROPOUT_SEED_XOR 0xD1B54A32D192ED03ULL
/* The Vaswani base of the sinusoidal table (independent of rope_base). */
#define RP_SINUSOIDAL_BASE 10000.0
/* Largest layer count (keeps names and the layout table small). */
#define RP_MAX_LAYERS 100000
#define RP_I32MAX ((int64_t)2147483647)

/* Parameter offsets of one layer (floats into the parameter / gradient buffers). */
typedef struct {
    int64_t ln1w, ln1b, qkvw, qkvb, outw, outb, ln2w, ln2b, w1w, w1b, w2w, w2b;
} layer_params;

/* Activation pointers of one layer (see the layout at the top). */
typedef struct {
    float *ln1, *ln1_mean, *ln1_rstd, *qkv, *att, *atty, *mask1, *res1;
    float *ln2, *ln2_mean, *ln2_rstd, *fch, *fch_act, *mask2, *res2;
} layer_acts;

/* (value, index) for the top-k sort of generation. */
typedef struct {
    float v;
    int32_t i;
} gen_pair;

struct rp_model {
    rp_model_cfg cfg;
    int64_t dk, d_rot_qk, d_rot_v; /* d_rot_* are 0 when the mode does not rotate */
    int rot_qk, rot_v;
    int linear;                    /* cfg.attention == RP_ATTN_LINEAR */
    double lin_min_den;            /* the last forward's smallest denominator (linear) */

    /* layout */
    int nparams;
    rp_param_info *info;
    int64_t nfloats;
    int64_t off_embed, off_pos, off_normf_w, off_normf_b, off_head_w, off_head_b;
    layer_params *lp;
    rp_storage *params, *grads;

    /* activations */
    float *act_mem;
    int64_t act_floats;
    float *x0, *proj, *lnf, *lnf_mean, *lnf_rstd, *logits, *probs, *losses;
    layer_acts *la;
    float *sin_table;
    float *attn_scratch;
    int64_t attn_scratch_floats;
    int nthreads;

    /* activation gradients */
    float *grad_mem;
    int64_t grad_floats;
    float *dx, *dA, *dB, *datty, *dqkv, *dF1, *dF2, *dlogits;

    /* the last forward */
    int32_t *tokens, *targets;
    uint8_t *mask;
    int has_mask;
    int64_t lastB, lastT;
    int have_fwd, have_targets, dropped;
    int64_t nscored;

    rp_rng rng;

    /* KV cache and the cached path (cache_mem holds all of it) */
    float *cache_mem;
    float *kcache, *vcache; /* (layers, seq_len, C) each */
    int64_t cache_len;
    float *c_x, *c_ln, *c_mean, *c_rstd, *c_qkv, *c_score, *c_y, *c_proj, *c_res, *c_h, *c_ha;
    float *c_logits;
    float *qk_cos, *qk_sin, *v_cos, *v_sin, *o_cos, *o_sin;
    double *lin_state;             /* linear attention: (layers, state doubles of one sequence) */

    /* generation */
    double *gen_p;
    gen_pair *gen_sort;
    int32_t *gen_win;
};

/* ------------------------------------------------------------------------------------------ */
/* config */

rp_model_cfg rp_model_cfg_default(int64_t vocab)
{
    rp_model_cfg c;
    memset(&c, 0, sizeof c);
    c.vocab = vocab;
    c.d_model = 128;
    c.heads = 4;
    c.layers = 3;
    c.d_ff = 512;
    c.seq_len = 512;
    c.max_batch = 16;
    c.norm = RP_NORM_PRE;
    c.act = RP_ACT_RELU;
    c.dropout = 0.0;
    c.pe = RP_PE_ROPE;
    c.fraction_qk = 1.0;
    c.fraction_v = 1.0;
    c.rope_base = 10000.0;
    c.pairing = RP_PAIR_HALF;
    c.seed = 0;
    c.attention = RP_ATTN_SOFTMAX;
    c.linear_rope = RP_LIN_AFTER;
    return c;
}

static int pe_rotates_qk(rp_pe pe)
{
    return pe == RP_PE_ROPE || pe == RP_PE_ROPER || pe == RP_PE_ROPER_LEGACY;
}

static int pe_rotates_v(rp_pe pe) { return pe == RP_PE_ROPER || pe == RP_PE_ROPER_LEGACY; }

static rp_status check_dim(const char *name, int64_t v, int64_t lo, int64_t hi)
{
    if (v < lo || v > hi)
        return rp_error(RP_ERR_ARG, "%s %lld must be in %lld..%lld", name, (long long)v,
                        (long long)lo, (long long)hi);
    return RP_OK;
}

/* d_rot = floor(fraction * d_k) (labml's int(d_k * fraction)); checks fraction and parity. */
static rp_status check_fraction(const char *name, double f, int64_t dk, int64_t *d_rot)
{
    if (!(f > 0.0 && f <= 1.0))
        return rp_error(RP_ERR_ARG, "%s %g must be in (0, 1]", name, f);
    int64_t d = (int64_t)floor(f * (double)dk);
    if (d < 2 || d % 2 != 0)
        return rp_error(RP_ERR_ARG, "%s %g gives d_rot %lld for d_k %lld; it must be even and >= 2",
                        name, f, (long long)d, (long long)dk);
    *d_rot = d;
    return RP_OK;
}

rp_status rp_model_cfg_check(const rp_model_cfg *cfg)
{
    if (!cfg) return rp_error(RP_ERR_ARG, "model config is NULL");
    RP_TRY(check_dim("vocab", cfg->vocab, 1, RP_I32MAX));
    RP_TRY(check_dim("d_model", cfg->d_model, 1, RP_I32MAX / 3));
    RP_TRY(check_dim("heads", cfg->heads, 1, RP_I32MAX));
    RP_TRY(check_dim("layers", cfg->layers, 1, RP_MAX_LAYERS));
    RP_TRY(check_dim("d_ff", cfg->d_ff, 1, RP_I32MAX));
    RP_TRY(check_dim("seq_len", cfg->seq_len, 1, RP_I32MAX));
    RP_TRY(check_dim("max_batch", cfg->max_batch, 1, RP_I32MAX));
    if (cfg->max_batch > RP_I32MAX / cfg->seq_len)
        return rp_error(RP_ERR_ARG, "max_batch %lld x seq_len %lld exceeds 2^31-1 rows",
                        (long long)cfg->max_batch, (long long)cfg->seq_len);
    if (cfg->d_model % cfg->heads != 0)
        return rp_error(RP_ERR_ARG, "d_model %lld is not divisible by heads %lld",
                        (long long)cfg->d_model, (long long)cfg->heads);
    if (cfg->norm != RP_NORM_PRE && cfg->norm != RP_NORM_POST)
        return rp_error(RP_ERR_ARG, "norm %d is not pre (0) or post (1)", (int)cfg->norm);
    if (cfg->act != RP_ACT_RELU && cfg->act != RP_ACT_GELU)
        return rp_error(RP_ERR_ARG, "act %d is not relu (0) or gelu (1)", (int)cfg->act);
    if (!(cfg->dropout >= 0.0 && cfg->dropout < 1.0))
        return rp_error(RP_ERR_ARG, "dropout %g must be in [0, 1)", cfg->dropout);
    if ((int)cfg->pe < (int)RP_PE_NONE || (int)cfg->pe > (int)RP_PE_ROPER_LEGACY)
        return rp_error(RP_ERR_ARG, "pe %d is not a known mode", (int)cfg->pe);
    if (cfg->pairing != RP_PAIR_HALF && cfg->pairing != RP_PAIR_INTERLEAVED)
        return rp_error(RP_ERR_ARG, "pairing %d is not half (0) or interleaved (1)",
                        (int)cfg->pairing);
    if (!(cfg->rope_base > 0.0) || !isfinite(cfg->rope_base))
        return rp_error(RP_ERR_ARG, "rope_base %g must be positive and finite", cfg->rope_base);
    int64_t dk = cfg->d_model / cfg->heads, d;
    if (pe_rotates_qk(cfg->pe)) RP_TRY(check_fraction("fraction_qk", cfg->fraction_qk, dk, &d));
    if (pe_rotates_v(cfg->pe)) RP_TRY(check_fraction("fraction_v", cfg->fraction_v, dk, &d));
    if (cfg->attention != RP_ATTN_SOFTMAX && cfg->attention != RP_ATTN_LINEAR)
        return rp_error(RP_ERR_ARG, "attention %d is not softmax (0) or linear (1)",
                        (int)cfg->attention);
    if (cfg->linear_rope != RP_LIN_AFTER && cfg->linear_rope != RP_LIN_BEFORE)
        return rp_error(RP_ERR_ARG, "linear_rope %d is not after (0) or before (1)",
                        (int)cfg->linear_rope);
    if (cfg->attention == RP_ATTN_LINEAR && cfg->pe == RP_PE_ROPER_LEGACY)
        return rp_error(RP_ERR_ARG, "linear attention does not support pe roper_legacy");
    return RP_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* layout */

/* Appends one entry (info may be NULL: counting pass). */
static int64_t add_param(rp_param_info *info, int *np, int64_t *off, const char *name, int ndim,
                         int64_t s0, int64_t s1)
{
    int64_t start = *off, numel = ndim == 1 ? s0 : s0 * s1;
    if (info) {
        rp_param_info *p = &info[*np];
        memset(p, 0, sizeof *p);
        size_t len = strlen(name);
        RP_ASSERT(len < sizeof p->name); /* the longest name is "layers.99999.attn.qkv.weight" */
        memcpy(p->name, name, len + 1);
        p->ndim = ndim;
        p->shape[0] = s0;
        p->shape[1] = ndim == 2 ? s1 : 0;
        p->offset = start;
        p->numel = numel;
    }
    (*np)++;
    *off += numel;
    return start;
}

/* Builds the layout (or counts it when m->info is NULL): returns the number of entries. */
static int build_layout(rp_model *m)
{
    const rp_model_cfg *c = &m->cfg;
    int64_t V = c->vocab, C = c->d_model, F = c->d_ff, off = 0;
    int np = 0;
    char name[48];
    rp_param_info *info = m->info;
    m->off_embed = add_param(info, &np, &off, "embed.weight", 2, V, C);
    m->off_pos = -1;
    if (c->pe == RP_PE_LEARNED) m->off_pos = add_param(info, &np, &off, "pos.weight", 2, c->seq_len, C);
    for (int64_t l = 0; l < c->layers; l++) {
        layer_params lp;
#define RP_LAYER_PARAM(field, suffix, nd, a, b)                                 \
    snprintf(name, sizeof name, "layers.%d.%s", (int)l, suffix);        \
    lp.field = add_param(info, &np, &off, name, nd, a, b)
        RP_LAYER_PARAM(ln1w, "norm1.weight", 1, C, 0);
        RP_LAYER_PARAM(ln1b, "norm1.bias", 1, C, 0);
        RP_LAYER_PARAM(qkvw, "attn.qkv.weight", 2, 3 * C, C);
        RP_LAYER_PARAM(qkvb, "attn.qkv.bias", 1, 3 * C, 0);
        RP_LAYER_PARAM(outw, "attn.out.weight", 2, C, C);
        RP_LAYER_PARAM(outb, "attn.out.bias", 1, C, 0);
        RP_LAYER_PARAM(ln2w, "norm2.weight", 1, C, 0);
        RP_LAYER_PARAM(ln2b, "norm2.bias", 1, C, 0);
        RP_LAYER_PARAM(w1w, "ff.w1.weight", 2, F, C);
        RP_LAYER_PARAM(w1b, "ff.w1.bias", 1, F, 0);
        RP_LAYER_PARAM(w2w, "ff.w2.weight", 2, C, F);
        RP_LAYER_PARAM(w2b, "ff.w2.bias", 1, C, 0);
#undef RP_LAYER_PARAM
        if (m->lp) m->lp[l] = lp;
    }
    m->off_normf_w = m->off_normf_b = -1;
    if (c->norm == RP_NORM_PRE) {
        m->off_normf_w = add_param(info, &np, &off, "norm_f.weight", 1, C, 0);
        m->off_normf_b = add_param(info, &np, &off, "norm_f.bias", 1, C, 0);
    }
    m->off_head_w = add_param(info, &np, &off, "head.weight", 2, V, C);
    m->off_head_b = add_param(info, &np, &off, "head.bias", 1, V, 0);
    m->nfloats = off;
    return np;
}

/* Fan-in of a parameter for the PyTorch-default init: the weight's input features (a bias
 * shares its weight's fan-in). Returns 0 for LayerNorm parameters and -1 for embeddings. */
static int64_t param_fan_in(const rp_model *m, const rp_param_info *p)
{
    const char *n = p->name;
    if (strcmp(n, "embed.weight") == 0 || strcmp(n, "pos.weight") == 0) return -1;
    if (strstr(n, "norm")) return 0;
    if (strstr(n, "ff.w2.")) return m->cfg.d_ff;
    return m->cfg.d_model; /* qkv, out, w1, head */
}

static void init_params(rp_model *m)
{
    rp_rng r;
    rp_rng_seed(&r, m->cfg.seed);
    float *w = m->params->data;
    for (int i = 0; i < m->nparams; i++) {
        const rp_param_info *p = &m->info[i];
        float *d = w + p->offset;
        int64_t fan = param_fan_in(m, p);
        if (fan < 0) {
            for (int64_t k = 0; k < p->numel; k++) d[k] = (float)rp_rng_normal(&r);
        } else if (fan == 0) {
            float v = strstr(p->name, ".weight") ? 1.0f : 0.0f;
            for (int64_t k = 0; k < p->numel; k++) d[k] = v;
        } else {
            double b = 1.0 / sqrt((double)fan), lo = -b, hi = b;
            for (int64_t k = 0; k < p->numel; k++)
                d[k] = (float)(lo + (hi - lo) * rp_rng_uniform(&r));
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* memory planning: a bump allocator run twice (count, then assign) */

typedef struct {
    float *base; /* NULL in the counting pass */
    int64_t off;
} planner;

static float *take(planner *pl, int64_t n)
{
    float *p = pl->base ? pl->base + pl->off : NULL;
    pl->off += (n + 15) / 16 * 16;
    return p;
}

static void plan_acts(rp_model *m, planner *pl)
{
    const rp_model_cfg *c = &m->cfg;
    int64_t N = c->max_batch * c->seq_len, C = c->d_model, F = c->d_ff, V = c->vocab;
    /* linear attention keeps no (T, T) weights */
    int64_t A = m->linear ? 0 : c->max_batch * c->heads * c->seq_len * c->seq_len;
    int drop = c->dropout > 0.0;
    m->x0 = take(pl, N * C);
    for (int64_t l = 0; l < c->layers; l++) {
        layer_acts a;
        a.ln1 = take(pl, N * C);
        a.ln1_mean = take(pl, N);
        a.ln1_rstd = take(pl, N);
        a.qkv = take(pl, N * 3 * C);
        a.att = A > 0 ? take(pl, A) : NULL;
        a.atty = take(pl, N * C);
        a.mask1 = drop ? take(pl, N * C) : NULL;
        a.res1 = take(pl, N * C);
        a.ln2 = take(pl, N * C);
        a.ln2_mean = take(pl, N);
        a.ln2_rstd = take(pl, N);
        a.fch = take(pl, N * F);
        a.fch_act = take(pl, N * F);
        a.mask2 = drop ? take(pl, N * C) : NULL;
        a.res2 = take(pl, N * C);
        if (m->la) m->la[l] = a;
    }
    m->proj = take(pl, N * C);
    m->lnf = m->lnf_mean = m->lnf_rstd = NULL;
    if (c->norm == RP_NORM_PRE) {
        m->lnf = take(pl, N * C);
        m->lnf_mean = take(pl, N);
        m->lnf_rstd = take(pl, N);
    }
    m->logits = take(pl, N * V);
    m->probs = take(pl, N * V);
    m->losses = take(pl, N);
    m->sin_table = c->pe == RP_PE_SINUSOIDAL ? take(pl, c->seq_len * C) : NULL;
    m->attn_scratch = take(pl, m->attn_scratch_floats);
}

static void plan_grads(rp_model *m, planner *pl)
{
    const rp_model_cfg *c = &m->cfg;
    int64_t N = c->max_batch * c->seq_len, C = c->d_model, F = c->d_ff, V = c->vocab;
    m->dx = take(pl, N * C);
    m->dA = take(pl, N * C);
    m->dB = c->dropout > 0.0 ? take(pl, N * C) : NULL;
    m->datty = take(pl, N * C);
    m->dqkv = take(pl, N * 3 * C);
    m->dF1 = take(pl, N * F);
    m->dF2 = take(pl, N * F);
    m->dlogits = take(pl, N * V);
}

static void plan_cache(rp_model *m, planner *pl)
{
    const rp_model_cfg *c = &m->cfg;
    int64_t Tm = c->seq_len, C = c->d_model, F = c->d_ff, V = c->vocab, L = c->layers;
    int64_t hq = m->d_rot_qk / 2, hv = m->d_rot_v / 2;
    /* linear attention decodes with its running state instead of keys and values */
    m->kcache = m->linear ? NULL : take(pl, L * Tm * C);
    m->vcache = m->linear ? NULL : take(pl, L * Tm * C);
    m->c_x = take(pl, C);
    m->c_ln = take(pl, C);
    m->c_mean = take(pl, 1);
    m->c_rstd = take(pl, 1);
    m->c_qkv = take(pl, 3 * C);
    m->c_score = take(pl, Tm);
    m->c_y = take(pl, C);
    m->c_proj = take(pl, C);
    m->c_res = take(pl, C);
    m->c_h = take(pl, F);
    m->c_ha = take(pl, F);
    m->c_logits = take(pl, V);
    m->qk_cos = take(pl, Tm * hq);
    m->qk_sin = take(pl, Tm * hq);
    m->v_cos = take(pl, Tm * hv);
    m->v_sin = take(pl, Tm * hv);
    m->o_cos = take(pl, Tm * hv);
    m->o_sin = take(pl, Tm * hv);
}

static float *alloc_floats(int64_t n)
{
    size_t bytes = ((size_t)(n > 0 ? n : 1) * sizeof(float) + 63) / 64 * 64;
    return aligned_alloc(64, bytes);
}

/* Runs plan (a counting pass), allocates what it counted and runs it again to assign the
 * pointers; returns the block (NULL when out of memory) and its size in floats in *floats. */
static float *plan_alloc(rp_model *m, void (*plan)(rp_model *, planner *), int64_t *floats)
{
    planner pl = {NULL, 0};
    plan(m, &pl);
    *floats = pl.off;
    float *mem = alloc_floats(pl.off);
    if (!mem) return NULL;
    pl.base = mem;
    pl.off = 0;
    plan(m, &pl);
    return mem;
}

/* ------------------------------------------------------------------------------------------ */
/* creation */

void rp_model_free(rp_model *m)
{
    if (!m) return;
    free(m->info);
    free(m->lp);
    free(m->la);
    rp_storage_release(m->params);
    rp_storage_release(m->grads);
    free(m->act_mem);
    free(m->grad_mem);
    free(m->cache_mem);
    free(m->lin_state);
    free(m->tokens);
    free(m->targets);
    free(m->mask);
    free(m->gen_p);
    free(m->gen_sort);
    free(m->gen_win);
    free(m);
}

/* The est check of rp_model_new: sizes in double first, so that nothing later can overflow. */
static rp_status check_size_estimate(const rp_model_cfg *c)
{
    double N = (double)c->max_batch * (double)c->seq_len, C = (double)c->d_model;
    double F = (double)c->d_ff, V = (double)c->vocab, L = (double)c->layers;
    double Hd = (double)c->heads, Tm = (double)c->seq_len;
    double per_layer = N * (13.0 * C + 2.0 * F + 4.0) +
                       (c->attention == RP_ATTN_LINEAR ? 0.0 : N * Hd * Tm);
    double est = N * C * 4.0 + L * per_layer + 2.0 * N * V + N * (10.0 * C + 2.0 * F + V) +
                 2.0 * (V + 3.0 * C) * C + L * (4.0 * C * C + 2.0 * C * F);
    if (est > (double)RP_MAX_NUMEL)
        return rp_error(RP_ERR_NOMEM,
                        "model of d_model %lld, %lld layers, max_batch %lld x seq_len %lld needs "
                        "about %.3g floats (more than 2^40)",
                        (long long)c->d_model, (long long)c->layers, (long long)c->max_batch,
                        (long long)c->seq_len, est);
    return RP_OK;
}

/* Fills the fields of m that follow from cfg alone (no allocation): sizes, rotation widths, the
 * layout size (build_layout's counting pass) and the attention scratch size. */
static void init_derived(rp_model *m, const rp_model_cfg *cfg)
{
    const rp_model_cfg *c = cfg;
    m->cfg = *cfg;
    m->dk = c->d_model / c->heads;
    m->rot_qk = pe_rotates_qk(c->pe);
    m->rot_v = pe_rotates_v(c->pe);
    m->linear = c->attention == RP_ATTN_LINEAR;
    m->lin_min_den = (double)NAN;
    if (m->rot_qk) m->d_rot_qk = (int64_t)floor(c->fraction_qk * (double)m->dk);
    if (m->rot_v) m->d_rot_v = (int64_t)floor(c->fraction_v * (double)m->dk);
    m->nparams = build_layout(m); /* info and lp are NULL: counts, sets nfloats */
    m->nthreads = rp_max_threads();
    m->attn_scratch_floats =
        m->linear ? rp_linattn_scratch_floats(c->seq_len, m->dk, m->dk, m->nthreads)
                  : rp_attention_scratch_floats(c->seq_len, c->seq_len, m->dk, m->dk, m->nthreads);
}

/* Bytes of a float block of n (as alloc_floats rounds it). */
static double block_bytes(int64_t n)
{
    return (double)(((n > 0 ? n : 1) * (int64_t)sizeof(float) + 63) / 64 * 64);
}

/* Every byte rp_model_new allocates for m (init_derived done): parameters, gradients,
 * activations, activation gradients, the decode cache and state, token copies, generation
 * scratch. Runs the planners in counting mode. */
static double model_bytes(rp_model *m)
{
    const rp_model_cfg *c = &m->cfg;
    planner pl = {NULL, 0};
    double total = 2.0 * (double)m->nfloats * sizeof(float);
    plan_acts(m, &pl);
    total += block_bytes(pl.off);
    pl.off = 0;
    plan_grads(m, &pl);
    total += block_bytes(pl.off);
    pl.off = 0;
    plan_cache(m, &pl);
    total += block_bytes(pl.off);
    if (m->linear)
        total += (double)(c->layers * rp_linattn_state_doubles(c->heads, m->dk, m->dk)) *
                 sizeof(double);
    double rows = (double)c->max_batch * (double)c->seq_len;
    total += rows * (2.0 * sizeof(int32_t) + 1.0);
    total += (double)c->vocab * (sizeof(double) + sizeof(gen_pair));
    total += (double)c->seq_len * sizeof(int32_t);
    total += (double)c->layers * (sizeof(layer_params) + sizeof(layer_acts));
    total += (double)m->nparams * sizeof(rp_param_info) + sizeof(rp_model);
    return total;
}

rp_status rp_model_memory(const rp_model_cfg *cfg, int64_t *bytes, int64_t *params)
{
    RP_TRY(rp_model_cfg_check(cfg));
    RP_TRY(check_size_estimate(cfg));
    rp_model m;
    memset(&m, 0, sizeof m);
    init_derived(&m, cfg);
    if (bytes) *bytes = (int64_t)model_bytes(&m);
    if (params) *params = m.nfloats;
    return RP_OK;
}

rp_model *rp_model_new(const rp_model_cfg *cfg)
{
    if (rp_model_cfg_check(cfg) != RP_OK) return NULL;
    const rp_model_cfg *c = cfg;
    if (check_size_estimate(c) != RP_OK) return NULL;

    /* refuse what the machine cannot hold, rather than letting overcommit succeed and the OOM
     * killer end the process at the first forward pass */
    {
        rp_model probe;
        memset(&probe, 0, sizeof probe);
        init_derived(&probe, cfg);
        double need = model_bytes(&probe);
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
    build_layout(m);
    m->params = rp_storage_new((size_t)m->nfloats);
    m->grads = rp_storage_new((size_t)m->nfloats);
    if (!m->params || !m->grads) goto nomem;
    init_params(m);

    /* activations */
    m->la = calloc((size_t)c->layers, sizeof *m->la);
    if (!m->la) goto nomem;
    m->act_mem = plan_alloc(m, plan_acts, &m->act_floats);
    if (!m->act_mem) goto nomem;
    if (m->sin_table)
        rp_sinusoidal_forward(m->sin_table, c->seq_len, c->d_model, 0, RP_SINUSOIDAL_BASE);
    m->grad_mem = plan_alloc(m, plan_grads, &m->grad_floats);
    if (!m->grad_mem) goto nomem;
    int64_t cache_floats;
    m->cache_mem = plan_alloc(m, plan_cache, &cache_floats);
    if (!m->cache_mem) goto nomem;
    memset(m->cache_mem, 0, (size_t)cache_floats * sizeof(float));
    if (m->linear) {
        size_t n = (size_t)(c->layers * rp_linattn_state_doubles(c->heads, m->dk, m->dk));
        m->lin_state = calloc(n, sizeof(double));
        if (!m->lin_state) goto nomem;
    }
    if (m->rot_qk)
        rp_rope_angles(m->qk_cos, m->qk_sin, NULL, 0, c->seq_len, m->d_rot_qk, c->rope_base, 1.0);
    if (m->rot_v) {
        double vscale = c->pe == RP_PE_ROPER_LEGACY ? 2.0 : 1.0;
        rp_rope_angles(m->v_cos, m->v_sin, NULL, 0, c->seq_len, m->d_rot_v, c->rope_base, vscale);
        rp_rope_angles(m->o_cos, m->o_sin, NULL, 0, c->seq_len, m->d_rot_v, c->rope_base, 1.0);
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

/* ------------------------------------------------------------------------------------------ */
/* accessors */

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

const float *rp_model_logits(const rp_model *m) { return m->have_fwd ? m->logits : NULL; }

void rp_model_last_shape(const rp_model *m, int64_t *B, int64_t *T)
{
    if (B) *B = m->have_fwd ? m->lastB : 0;
    if (T) *T = m->have_fwd ? m->lastT : 0;
}

const float *rp_model_attention_weights(const rp_model *m, int64_t layer)
{
    if (!m->have_fwd || layer < 0 || layer >= m->cfg.layers) return NULL;
    return m->la[layer].att;
}

double rp_model_linear_min_den(const rp_model *m)
{
    return m->linear && m->have_fwd ? m->lin_min_den : (double)NAN;
}

/* The residual stream after layer l (-1: the embedding output). */
static float *layer_out(const rp_model *m, int64_t l)
{
    if (l < 0) return m->x0;
    return m->cfg.norm == RP_NORM_PRE ? m->la[l].res2 : m->la[l].ln2;
}

const float *rp_model_residual(const rp_model *m, int64_t layer)
{
    if (!m->have_fwd || layer < -1 || layer >= m->cfg.layers) return NULL;
    return layer_out(m, layer);
}

void rp_model_zero_grad(rp_model *m)
{
    memset(m->grads->data, 0, (size_t)m->nfloats * sizeof(float));
}

/* ------------------------------------------------------------------------------------------ */
/* checks */

rp_status rp_model_check_tokens(const rp_model *m, const int32_t *tokens, const int32_t *targets,
                                int64_t B, int64_t T)
{
    const rp_model_cfg *c = &m->cfg;
    if (B < 1) return rp_error(RP_ERR_ARG, "batch %lld must be >= 1", (long long)B);
    if (T < 1) return rp_error(RP_ERR_ARG, "T %lld must be >= 1", (long long)T);
    if (B > c->max_batch)
        return rp_error(RP_ERR_RANGE, "batch %lld exceeds max_batch %lld", (long long)B,
                        (long long)c->max_batch);
    if (T > c->seq_len)
        return rp_error(RP_ERR_RANGE, "T %lld exceeds seq_len %lld", (long long)T,
                        (long long)c->seq_len);
    if (!tokens) return rp_error(RP_ERR_ARG, "tokens is NULL");
    /* positions in messages count from 1, as the Lua user does (tensor.h); values from 0 */
    for (int64_t n = 0; n < B * T; n++)
        if (tokens[n] < 0 || tokens[n] >= c->vocab)
            return rp_error(RP_ERR_RANGE, "token %ld at [%lld, %lld] is outside the vocabulary 0..%lld",
                            (long)tokens[n], (long long)(n / T + 1), (long long)(n % T + 1),
                            (long long)(c->vocab - 1));
    if (targets)
        for (int64_t n = 0; n < B * T; n++)
            if (targets[n] < -1 || targets[n] >= c->vocab)
                return rp_error(RP_ERR_RANGE,
                                "target %ld at [%lld, %lld] is outside the vocabulary 0..%lld "
                                "(or -1: not scored)",
                                (long)targets[n], (long long)(n / T + 1), (long long)(n % T + 1),
                                (long long)(c->vocab - 1));
    return RP_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* forward / backward */

static rp_attn_cfg attn_cfg(const rp_model *m)
{
    rp_attn_cfg a;
    memset(&a, 0, sizeof a);
    a.pe = m->cfg.pe;
    a.causal = 1;
    a.scale = 1.0 / sqrt((double)m->dk);
    a.base = m->cfg.rope_base;
    a.pairing = m->cfg.pairing;
    a.d_rot_qk = m->d_rot_qk;
    a.d_rot_v = m->d_rot_v;
    a.q_offset = 0;
    return a;
}

static rp_linattn_cfg linattn_cfg(const rp_model *m, int64_t q_offset)
{
    rp_linattn_cfg a = rp_linattn_cfg_default(m->cfg.pe, m->dk, m->dk);
    a.placement = m->cfg.linear_rope;
    a.base = m->cfg.rope_base;
    a.pairing = m->cfg.pairing;
    if (m->rot_qk) a.d_rot_qk = m->d_rot_qk;
    if (m->rot_v) a.d_rot_v = m->d_rot_v;
    a.q_offset = q_offset;
    return a;
}

static int64_t attn_scratch_need(const rp_model *m, int64_t T, int nt)
{
    return m->linear ? rp_linattn_scratch_floats(T, m->dk, m->dk, nt)
                     : rp_attention_scratch_floats(T, T, m->dk, m->dk, nt);
}

/* Threads for the attention kernel: OpenMP's current maximum, clamped to what the scratch was
 * sized for at creation (and to what fits for this T). */
static int attn_threads(const rp_model *m, int64_t T)
{
    int nt = rp_max_threads();
    if (nt > m->nthreads) nt = m->nthreads;
    while (nt > 1 && attn_scratch_need(m, T, nt) > m->attn_scratch_floats) nt--;
    return nt;
}

/* The attention of one layer over the fused qkv buffer (B, T, 3C) into y (B, T, C); softmax
 * weights go to att (softmax only). Linear attention lowers *min_den to its smallest
 * denominator. */
static void attention_forward(rp_model *m, float *y, float *att, const float *qkv, int64_t B,
                              int64_t T, const rp_attn_cfg *acfg, int nt, double *min_den)
{
    int64_t C = m->cfg.d_model, H = m->cfg.heads, dk = m->dk;
    if (m->linear) {
        rp_linattn_cfg lc = linattn_cfg(m, 0);
        float md = INFINITY;
        rp_linattn_forward(y, C, m->attn_scratch, NULL, &md, qkv, 3 * C, qkv + C, 3 * C,
                           qkv + 2 * C, 3 * C, B, T, H, dk, dk, &lc, nt);
        if ((double)md < *min_den) *min_den = (double)md;
    } else {
        rp_attention_forward(y, C, att, m->attn_scratch, qkv, 3 * C, qkv + C, 3 * C, qkv + 2 * C,
                             3 * C, B, T, T, H, dk, dk, acfg, nt);
    }
}

/* For the linear-attention introspection: checks that a linear forward ran (and layer, unless
 * it is -1), and allocates w (H, T, T) and den (H, T) doubles for one sequence. */
static rp_status linear_buffers(const rp_model *m, int64_t layer, double **w, double **den)
{
    *w = *den = NULL;
    if (!m->linear) return rp_error(RP_ERR_ARG, "the model uses softmax attention");
    if (!m->have_fwd) return rp_error(RP_ERR_ARG, "no forward pass yet");
    if (layer != -1 && (layer < 0 || layer >= m->cfg.layers))
        return rp_error(RP_ERR_ARG, "layer %lld is outside 0..%lld", (long long)layer,
                        (long long)(m->cfg.layers - 1));
    int64_t T = m->lastT, H = m->cfg.heads;
    *w = malloc((size_t)(H * T * T) * sizeof(double));
    *den = malloc((size_t)(H * T) * sizeof(double));
    if (!*w || !*den) {
        free(*w);
        free(*den);
        *w = *den = NULL;
        return rp_error(RP_ERR_NOMEM, "cannot allocate %lld x %lld linear attention weights",
                        (long long)T, (long long)T);
    }
    return RP_OK;
}

/* rp_linattn_weights of sequence b of layer l of the last forward. */
static void linear_seq_weights(const rp_model *m, int64_t l, int64_t b, double *w, double *den)
{
    int64_t T = m->lastT, C = m->cfg.d_model;
    rp_linattn_cfg lc = linattn_cfg(m, 0);
    const float *q = m->la[l].qkv + b * T * 3 * C;
    rp_linattn_weights(w, den, q, 3 * C, q + C, 3 * C, T, m->cfg.heads, m->dk, &lc);
}

rp_status rp_model_linear_stats(const rp_model *m, double *min_weight, double *min_den)
{
    double *w, *den;
    RP_TRY(linear_buffers(m, -1, &w, &den));
    double lo = HUGE_VAL;
    for (int64_t l = 0; l < m->cfg.layers; l++)
        for (int64_t b = 0; b < m->lastB; b++) {
            linear_seq_weights(m, l, b, w, den);
            double x = rp_linattn_min_weight(w, den, m->lastT, m->cfg.heads);
            if (x < lo) lo = x;
        }
    free(w);
    free(den);
    if (min_weight) *min_weight = lo;
    if (min_den) *min_den = m->lin_min_den;
    return RP_OK;
}

rp_status rp_model_linear_weights(const rp_model *m, int64_t layer, float *out)
{
    double *w, *den;
    RP_TRY(linear_buffers(m, layer, &w, &den));
    int64_t B = m->lastB, T = m->lastT, H = m->cfg.heads;
    for (int64_t b = 0; b < B; b++) {
        linear_seq_weights(m, layer, b, w, den);
        float *o = out + b * H * T * T;
        for (int64_t h = 0; h < H; h++)
            for (int64_t n = 0; n < T; n++)
                for (int64_t j = 0; j < T; j++)
                    o[(h * T + n) * T + j] =
                        j <= n ? (float)(w[(h * T + n) * T + j] / den[h * T + n]) : 0.0f;
    }
    free(w);
    free(den);
    return RP_OK;
}

static void act_forward(const rp_model *m, float *out, const float *inp, int64_t n)
{
    if (m->cfg.act == RP_ACT_GELU)
        rp_gelu_forward(out, inp, n);
    else
        rp_relu_forward(out, inp, n);
}

static void act_backward(const rp_model *m, float *dinp, const float *dout, const float *inp,
                         int64_t n)
{
    if (m->cfg.act == RP_ACT_GELU)
        rp_gelu_backward(dinp, dout, inp, n);
    else
        rp_relu_backward(dinp, dout, inp, n);
}

/* res = x + drop(branch) over n floats; dropout only when drop != 0 (masks drawn from rng). */
static void residual_branch(rp_model *m, float *res, float *mask, const float *x,
                            const float *branch, int drop, int64_t n)
{
    if (drop) {
        rp_dropout_forward(res, mask, branch, (float)m->cfg.dropout, &m->rng, n);
        rp_residual_forward(res, x, res, n);
    } else {
        rp_residual_forward(res, x, branch, n);
    }
}

rp_status rp_model_forward(rp_model *m, const int32_t *tokens, const int32_t *targets,
                           const uint8_t *mask, int64_t B, int64_t T, int train, float *loss)
{
    RP_TRY(rp_model_check_tokens(m, tokens, targets, B, T));
    const rp_model_cfg *c = &m->cfg;
    const float *w = m->params->data;
    int64_t N = B * T, C = c->d_model, F = c->d_ff, V = c->vocab;
    int64_t NC = N * C;
    int drop = train && c->dropout > 0.0;
    int pre = c->norm == RP_NORM_PRE;
    rp_attn_cfg acfg = attn_cfg(m);
    int nt = attn_threads(m, T);

    m->have_fwd = 0;
    memcpy(m->tokens, tokens, (size_t)N * sizeof(int32_t));
    double min_den = INFINITY;

    const float *wpe = c->pe == RP_PE_LEARNED ? w + m->off_pos
                       : c->pe == RP_PE_SINUSOIDAL ? m->sin_table
                                                   : NULL;
    rp_embedding_forward(m->x0, m->tokens, w + m->off_embed, wpe, N, T, C);

    const float *x = m->x0;
    for (int64_t l = 0; l < c->layers; l++) {
        const layer_params *p = &m->lp[l];
        layer_acts *a = &m->la[l];
        const float *attn_in = x;
        if (pre) {
            rp_layernorm_forward(a->ln1, a->ln1_mean, a->ln1_rstd, x, w + p->ln1w, w + p->ln1b, N,
                                 C);
            attn_in = a->ln1;
        }
        rp_linear_forward(a->qkv, attn_in, w + p->qkvw, w + p->qkvb, N, C, 3 * C);
        attention_forward(m, a->atty, a->att, a->qkv, B, T, &acfg, nt, &min_den);
        rp_linear_forward(m->proj, a->atty, w + p->outw, w + p->outb, N, C, C);
        residual_branch(m, a->res1, a->mask1, x, m->proj, drop, NC);
        const float *ff_in, *ff_res;
        if (pre) {
            rp_layernorm_forward(a->ln2, a->ln2_mean, a->ln2_rstd, a->res1, w + p->ln2w,
                                 w + p->ln2b, N, C);
            ff_in = a->ln2;
            ff_res = a->res1;
        } else {
            rp_layernorm_forward(a->ln1, a->ln1_mean, a->ln1_rstd, a->res1, w + p->ln1w,
                                 w + p->ln1b, N, C);
            ff_in = a->ln1;
            ff_res = a->ln1;
        }
        rp_linear_forward(a->fch, ff_in, w + p->w1w, w + p->w1b, N, C, F);
        act_forward(m, a->fch_act, a->fch, N * F);
        rp_linear_forward(m->proj, a->fch_act, w + p->w2w, w + p->w2b, N, F, C);
        residual_branch(m, a->res2, a->mask2, ff_res, m->proj, drop, NC);
        if (!pre)
            rp_layernorm_forward(a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, w + p->ln2w,
                                 w + p->ln2b, N, C);
        x = layer_out(m, l);
    }
    const float *head_in = x;
    if (pre) {
        rp_layernorm_forward(m->lnf, m->lnf_mean, m->lnf_rstd, x, w + m->off_normf_w,
                             w + m->off_normf_b, N, C);
        head_in = m->lnf;
    }
    rp_linear_forward(m->logits, head_in, w + m->off_head_w, w + m->off_head_b, N, C, V);

    m->have_targets = targets != NULL;
    m->nscored = 0;
    if (targets) {
        memcpy(m->targets, targets, (size_t)N * sizeof(int32_t));
        m->has_mask = mask != NULL;
        if (mask) memcpy(m->mask, mask, (size_t)N);
        m->nscored = rp_crossentropy_forward(m->losses, m->probs, m->logits, m->targets,
                                             m->has_mask ? m->mask : NULL, N, V);
        double sum = 0.0;
        for (int64_t n = 0; n < N; n++) sum += (double)m->losses[n];
        if (loss) *loss = m->nscored > 0 ? (float)(sum / (double)m->nscored) : NAN;
    } else if (loss) {
        *loss = NAN;
    }
    m->lastB = B;
    m->lastT = T;
    m->dropped = drop;
    m->lin_min_den = m->linear ? min_den : (double)NAN;
    m->have_fwd = 1;
    return RP_OK;
}

static void zero(float *p, int64_t n) { memset(p, 0, (size_t)n * sizeof(float)); }

/* The gradient of a dropped residual branch: dB = dres * mask (when dropout ran), else dres. */
static const float *branch_grad(rp_model *m, const float *dres, const float *mask, int64_t n)
{
    if (!m->dropped) return dres;
    zero(m->dB, n);
    rp_dropout_backward(m->dB, dres, mask, (float)m->cfg.dropout, n);
    return m->dB;
}

/* Backward of a feed-forward branch drop(W2 act(W1 inp)) given dres, the gradient of the residual
 * sum it was added to: parameter gradients accumulate, and dinp += d inp. dinp may be dres (each
 * is read before dinp is written). */
static void ff_branch_backward(rp_model *m, const layer_params *p, const layer_acts *a,
                               const float *dres, const float *inp, float *dinp, int64_t N)
{
    const float *w = m->params->data;
    float *g = m->grads->data;
    int64_t C = m->cfg.d_model, F = m->cfg.d_ff;
    const float *dproj = branch_grad(m, dres, a->mask2, N * C);
    zero(m->dF1, N * F);
    rp_linear_backward(m->dF1, g + p->w2w, g + p->w2b, dproj, a->fch_act, w + p->w2w, N, F, C);
    zero(m->dF2, N * F);
    act_backward(m, m->dF2, m->dF1, a->fch, N * F);
    rp_linear_backward(dinp, g + p->w1w, g + p->w1b, m->dF2, inp, w + p->w1w, N, C, F);
}

/* Backward of an attention branch drop(Wo attn(Wqkv inp)) given dres, as ff_branch_backward. */
static void attn_branch_backward(rp_model *m, const layer_params *p, const layer_acts *a,
                                 const float *dres, const float *inp, float *dinp, int64_t B,
                                 int64_t T, const rp_attn_cfg *acfg, int nt)
{
    const float *w = m->params->data;
    float *g = m->grads->data;
    int64_t C = m->cfg.d_model, N = B * T, NC = N * C, dk = m->dk;
    const float *dproj = branch_grad(m, dres, a->mask1, NC);
    zero(m->datty, NC);
    rp_linear_backward(m->datty, g + p->outw, g + p->outb, dproj, a->atty, w + p->outw, N, C, C);
    zero(m->dqkv, 3 * NC);
    if (m->linear) {
        rp_linattn_cfg lc = linattn_cfg(m, 0);
        rp_linattn_backward(m->dqkv, m->dqkv + C, m->dqkv + 2 * C, m->attn_scratch, m->datty, C,
                            a->qkv, 3 * C, a->qkv + C, 3 * C, a->qkv + 2 * C, 3 * C, B, T,
                            m->cfg.heads, dk, dk, &lc, nt);
    } else {
        rp_attention_backward(m->dqkv, m->dqkv + C, m->dqkv + 2 * C, m->attn_scratch, m->datty,
                              C, a->att, a->qkv, 3 * C, a->qkv + C, 3 * C, a->qkv + 2 * C, 3 * C,
                              B, T, T, m->cfg.heads, dk, dk, acfg, nt);
    }
    rp_linear_backward(dinp, g + p->qkvw, g + p->qkvb, m->dqkv, inp, w + p->qkvw, N, C, 3 * C);
}

rp_status rp_model_backward(rp_model *m)
{
    if (!m->have_fwd || !m->have_targets)
        return rp_error(RP_ERR_ARG, "backward needs a forward pass with targets first");
    const rp_model_cfg *c = &m->cfg;
    const float *w = m->params->data;
    float *g = m->grads->data;
    int64_t B = m->lastB, T = m->lastT, N = B * T, C = c->d_model, V = c->vocab, NC = N * C;
    int pre = c->norm == RP_NORM_PRE;
    rp_attn_cfg acfg = attn_cfg(m);
    int nt = attn_threads(m, T);
    if (m->nscored == 0) return RP_OK; /* the loss is NaN and has no gradient: nothing to add */

    zero(m->dlogits, N * V);
    rp_crossentropy_backward(m->dlogits, m->probs, m->targets, m->has_mask ? m->mask : NULL,
                             (float)(1.0 / (double)m->nscored), N, V);
    const float *xL = layer_out(m, c->layers - 1);
    if (pre) {
        zero(m->dA, NC);
        rp_linear_backward(m->dA, g + m->off_head_w, g + m->off_head_b, m->dlogits, m->lnf,
                           w + m->off_head_w, N, C, V);
        zero(m->dx, NC);
        rp_layernorm_backward(m->dx, g + m->off_normf_w, g + m->off_normf_b, m->dA, xL,
                              m->lnf_mean, m->lnf_rstd, w + m->off_normf_w, N, C);
    } else {
        zero(m->dx, NC);
        rp_linear_backward(m->dx, g + m->off_head_w, g + m->off_head_b, m->dlogits, xL,
                           w + m->off_head_w, N, C, V);
    }

    for (int64_t l = c->layers - 1; l >= 0; l--) {
        const layer_params *p = &m->lp[l];
        const layer_acts *a = &m->la[l];
        const float *x = layer_out(m, l - 1);
        if (pre) {
            /* dx = d res2; res2 = res1 + drop(W2 act(W1 ln2)), ln2 = LN2(res1) */
            zero(m->dA, NC);
            ff_branch_backward(m, p, a, m->dx, a->ln2, m->dA, N);
            rp_layernorm_backward(m->dx, g + p->ln2w, g + p->ln2b, m->dA, a->res1, a->ln2_mean,
                                  a->ln2_rstd, w + p->ln2w, N, C);
            /* dx = d res1; res1 = x + drop(Wo attn(Wqkv ln1)), ln1 = LN1(x) */
            zero(m->dA, NC);
            attn_branch_backward(m, p, a, m->dx, a->ln1, m->dA, B, T, &acfg, nt);
            rp_layernorm_backward(m->dx, g + p->ln1w, g + p->ln1b, m->dA, x, a->ln1_mean,
                                  a->ln1_rstd, w + p->ln1w, N, C);
            /* dx = d x */
        } else {
            /* dx = d ln2; ln2 = LN2(res2) */
            zero(m->dA, NC);
            rp_layernorm_backward(m->dA, g + p->ln2w, g + p->ln2b, m->dx, a->res2, a->ln2_mean,
                                  a->ln2_rstd, w + p->ln2w, N, C);
            /* dA = d res2; res2 = h1 + drop(W2 act(W1 h1)), h1 = ln1 */
            ff_branch_backward(m, p, a, m->dA, a->ln1, m->dA, N);
            /* dA = d h1; h1 = LN1(res1) */
            zero(m->dx, NC);
            rp_layernorm_backward(m->dx, g + p->ln1w, g + p->ln1b, m->dA, a->res1, a->ln1_mean,
                                  a->ln1_rstd, w + p->ln1w, N, C);
            /* dx = d res1; res1 = x + drop(Wo attn(Wqkv x)) */
            attn_branch_backward(m, p, a, m->dx, x, m->dx, B, T, &acfg, nt);
            /* dx = d x (the residual path plus the qkv path) */
        }
    }
    rp_embedding_backward(g + m->off_embed, c->pe == RP_PE_LEARNED ? g + m->off_pos : NULL, m->dx,
                          m->tokens, N, T, C);
    return RP_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* KV cache */

void rp_model_cache_reset(rp_model *m)
{
    m->cache_len = 0;
    if (m->linear)
        memset(m->lin_state, 0,
               (size_t)(m->cfg.layers * rp_linattn_state_doubles(m->cfg.heads, m->dk, m->dk)) *
                   sizeof(double));
}
int64_t rp_model_cache_len(const rp_model *m) { return m->cache_len; }

/* Softmax attention of the token at position pos in layer l over the KV cache: q, k, v in c_qkv
 * (unrotated); k and v are rotated and stored at pos, the output goes to c_y. */
static void cache_attend(rp_model *m, int64_t l, int64_t pos, float scale)
{
    const rp_model_cfg *c = &m->cfg;
    int64_t C = c->d_model, H = c->heads, dk = m->dk, Tm = c->seq_len;
    int64_t hq = m->d_rot_qk / 2, hv = m->d_rot_v / 2;
    float *q = m->c_qkv, *k = q + C, *v = q + 2 * C;
    if (m->rot_qk) {
        rp_rope_forward(q, q, m->qk_cos + pos * hq, m->qk_sin + pos * hq, 1, 1, H, dk,
                        m->d_rot_qk, c->pairing, 1);
        rp_rope_forward(k, k, m->qk_cos + pos * hq, m->qk_sin + pos * hq, 1, 1, H, dk,
                        m->d_rot_qk, c->pairing, 1);
    }
    if (m->rot_v)
        rp_rope_forward(v, v, m->v_cos + pos * hv, m->v_sin + pos * hv, 1, 1, H, dk,
                        m->d_rot_v, c->pairing, 1);
    float *kc = m->kcache + l * Tm * C, *vc = m->vcache + l * Tm * C;
    memcpy(kc + pos * C, k, (size_t)C * sizeof(float));
    memcpy(vc + pos * C, v, (size_t)C * sizeof(float));
    for (int64_t h = 0; h < H; h++) {
        const float *qh = q + h * dk;
        float *s = m->c_score, mx = -INFINITY;
        for (int64_t i = 0; i <= pos; i++) {
            const float *ki = kc + i * C + h * dk;
            float d = 0.0f;
            for (int64_t j = 0; j < dk; j++) d += qh[j] * ki[j];
            s[i] = d * scale;
            if (s[i] > mx) mx = s[i];
        }
        double sum = 0.0;
        for (int64_t i = 0; i <= pos; i++) {
            s[i] = expf(s[i] - mx);
            sum += (double)s[i];
        }
        float inv = (float)(1.0 / sum);
        float *yh = m->c_y + h * dk;
        for (int64_t j = 0; j < dk; j++) yh[j] = 0.0f;
        for (int64_t i = 0; i <= pos; i++) {
            const float *vi = vc + i * C + h * dk;
            float a = s[i] * inv;
            for (int64_t j = 0; j < dk; j++) yh[j] += a * vi[j];
        }
    }
    if (m->rot_v)
        rp_rope_forward(m->c_y, m->c_y, m->o_cos + pos * hv, m->o_sin + pos * hv, 1, 1, H, dk,
                        m->d_rot_v, c->pairing, -1);
}

/* One token at position pos through the model with the cache; the head runs only when
 * want_logits (the logits land in c_logits). Follows rp_model_forward exactly, with attention
 * over the cached keys 0 .. pos: k_i and v_i are stored already rotated by their position (v by
 * 2i*theta for roper_legacy), the query is rotated by pos, and the roper output by -pos. */
static void cache_step(rp_model *m, int32_t tok, int64_t pos, int want_logits)
{
    const rp_model_cfg *c = &m->cfg;
    const float *w = m->params->data;
    int64_t C = c->d_model, F = c->d_ff, V = c->vocab, H = c->heads, dk = m->dk;
    int pre = c->norm == RP_NORM_PRE;
    float scale = (float)(1.0 / sqrt((double)dk));
    float *x = m->c_x;

    const float *e = w + m->off_embed + (int64_t)tok * C;
    const float *pe = c->pe == RP_PE_LEARNED ? w + m->off_pos + pos * C
                      : c->pe == RP_PE_SINUSOIDAL ? m->sin_table + pos * C
                                                  : NULL;
    for (int64_t j = 0; j < C; j++) x[j] = pe ? e[j] + pe[j] : e[j];

    for (int64_t l = 0; l < c->layers; l++) {
        const layer_params *p = &m->lp[l];
        const float *attn_in = x;
        if (pre) {
            rp_layernorm_forward(m->c_ln, m->c_mean, m->c_rstd, x, w + p->ln1w, w + p->ln1b, 1, C);
            attn_in = m->c_ln;
        }
        float *q = m->c_qkv, *k = q + C, *v = q + 2 * C;
        rp_linear_forward(q, attn_in, w + p->qkvw, w + p->qkvb, 1, C, 3 * C);
        if (m->linear) {
            /* the kernel rotates q, k, v and the output itself; the state carries the prefix */
            rp_linattn_cfg lc = linattn_cfg(m, pos);
            double *st = m->lin_state + l * rp_linattn_state_doubles(H, dk, dk);
            rp_linattn_forward(m->c_y, C, m->attn_scratch, st, NULL, q, 3 * C, k, 3 * C, v, 3 * C,
                               1, 1, H, dk, dk, &lc, 1);
        } else {
            cache_attend(m, l, pos, scale);
        }
        rp_linear_forward(m->c_proj, m->c_y, w + p->outw, w + p->outb, 1, C, C);
        rp_residual_forward(m->c_res, x, m->c_proj, C);
        float *ff_in;
        if (pre) {
            rp_layernorm_forward(m->c_ln, m->c_mean, m->c_rstd, m->c_res, w + p->ln2w,
                                 w + p->ln2b, 1, C);
            ff_in = m->c_ln;
        } else {
            rp_layernorm_forward(x, m->c_mean, m->c_rstd, m->c_res, w + p->ln1w, w + p->ln1b, 1,
                                 C);
            ff_in = x; /* h1 */
        }
        rp_linear_forward(m->c_h, ff_in, w + p->w1w, w + p->w1b, 1, C, F);
        act_forward(m, m->c_ha, m->c_h, F);
        rp_linear_forward(m->c_proj, m->c_ha, w + p->w2w, w + p->w2b, 1, F, C);
        if (pre) {
            rp_residual_forward(x, m->c_res, m->c_proj, C);
        } else {
            rp_residual_forward(m->c_res, x, m->c_proj, C);
            rp_layernorm_forward(x, m->c_mean, m->c_rstd, m->c_res, w + p->ln2w, w + p->ln2b, 1,
                                 C);
        }
    }
    if (!want_logits) return;
    const float *head_in = x;
    if (pre) {
        rp_layernorm_forward(m->c_ln, m->c_mean, m->c_rstd, x, w + m->off_normf_w,
                             w + m->off_normf_b, 1, C);
        head_in = m->c_ln;
    }
    rp_linear_forward(m->c_logits, head_in, w + m->off_head_w, w + m->off_head_b, 1, C, V);
}

rp_status rp_model_cache_feed(rp_model *m, const int32_t *tokens, int64_t n, float *logits_out)
{
    const rp_model_cfg *c = &m->cfg;
    if (n < 1) return rp_error(RP_ERR_ARG, "cache feed needs n >= 1 tokens, got %lld", (long long)n);
    if (!tokens) return rp_error(RP_ERR_ARG, "tokens is NULL");
    if (n > c->seq_len - m->cache_len)
        return rp_error(RP_ERR_RANGE,
                        "cache holds %lld of seq_len %lld positions; %lld more do not fit",
                        (long long)m->cache_len, (long long)c->seq_len, (long long)n);
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= c->vocab)
            return rp_error(RP_ERR_RANGE, "token %ld at [%lld] is outside the vocabulary 0..%lld",
                            (long)tokens[i], (long long)(i + 1), (long long)(c->vocab - 1));
    for (int64_t i = 0; i < n; i++) {
        cache_step(m, tokens[i], m->cache_len, i == n - 1);
        m->cache_len++;
    }
    if (logits_out) memcpy(logits_out, m->c_logits, (size_t)c->vocab * sizeof(float));
    return RP_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* generation */

/* Descending by value, ties by ascending index (a total order: deterministic). */
static int gen_pair_cmp(const void *pa, const void *pb)
{
    const gen_pair *a = pa, *b = pb;
    if (a->v > b->v) return -1;
    if (a->v < b->v) return 1;
    return (a->i > b->i) - (a->i < b->i);
}

/* Picks the next token from logits (V floats) under g (already checked). */
static int32_t gen_pick(rp_model *m, const float *logits, const rp_gen_cfg *g)
{
    int64_t V = m->cfg.vocab;
    if (g->temperature == 0.0) {
        int64_t best = 0;
        for (int64_t i = 1; i < V; i++)
            if (logits[i] > logits[best]) best = i;
        return (int32_t)best;
    }
    /* candidates: all tokens in index order, or the top_k largest logits */
    int64_t k = V;
    gen_pair *cand = m->gen_sort;
    for (int64_t i = 0; i < V; i++) {
        cand[i].v = logits[i];
        cand[i].i = (int32_t)i;
    }
    if (g->top_k > 0 && g->top_k < V) {
        qsort(cand, (size_t)V, sizeof *cand, gen_pair_cmp);
        k = g->top_k;
    }
    double mx = (double)cand[0].v;
    for (int64_t i = 1; i < k; i++)
        if ((double)cand[i].v > mx) mx = (double)cand[i].v;
    double sum = 0.0;
    for (int64_t i = 0; i < k; i++) {
        m->gen_p[i] = exp(((double)cand[i].v - mx) / g->temperature);
        sum += m->gen_p[i];
    }
    double u = rp_rng_uniform(g->rng) * sum, acc = 0.0;
    int64_t last = 0;
    for (int64_t i = 0; i < k; i++) {
        if (m->gen_p[i] <= 0.0) continue;
        last = i;
        acc += m->gen_p[i];
        if (u < acc) return cand[i].i;
    }
    return cand[last].i; /* rounding left u just above the total */
}

rp_status rp_model_generate(rp_model *m, const int32_t *prompt, int64_t n_prompt, int64_t n_new,
                            const rp_gen_cfg *g, int32_t *out, int64_t *n_out)
{
    const rp_model_cfg *c = &m->cfg;
    if (n_out) *n_out = 0;
    if (!g) return rp_error(RP_ERR_ARG, "generation config is NULL");
    if (!prompt || n_prompt < 1)
        return rp_error(RP_ERR_ARG, "generation needs a prompt of >= 1 tokens, got %lld",
                        (long long)n_prompt);
    if (n_new < 0) return rp_error(RP_ERR_ARG, "n_new %lld must be >= 0", (long long)n_new);
    if (n_new > 0 && !out) return rp_error(RP_ERR_ARG, "output buffer is NULL");
    if (!(g->temperature >= 0.0) || !isfinite(g->temperature))
        return rp_error(RP_ERR_ARG, "temperature %g must be finite and >= 0", g->temperature);
    if (g->top_k < 0) return rp_error(RP_ERR_ARG, "top_k %lld must be >= 0", (long long)g->top_k);
    if (g->temperature > 0.0 && !g->rng)
        return rp_error(RP_ERR_ARG, "sampling with temperature %g needs an rng", g->temperature);
    if (g->stop_token < -1)
        return rp_error(RP_ERR_ARG, "stop_token %ld must be >= 0, or -1 for none",
                        (long)g->stop_token);
    for (int64_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= c->vocab)
            return rp_error(RP_ERR_RANGE,
                            "prompt token %ld at [%lld] is outside the vocabulary 0..%lld",
                            (long)prompt[i], (long long)(i + 1), (long long)(c->vocab - 1));

    int64_t Tm = c->seq_len, keep = Tm / 2 > 0 ? Tm / 2 : 1;
    int32_t *win = m->gen_win; /* the tokens in the cache, positions 0 .. cache_len-1 */
    /* a prompt longer than the window: its last seq_len tokens */
    int64_t start = n_prompt > Tm ? n_prompt - Tm : 0, wlen = n_prompt - start;
    memcpy(win, prompt + start, (size_t)wlen * sizeof(int32_t));
    rp_model_cache_reset(m);
    RP_TRY(rp_model_cache_feed(m, win, wlen, NULL));
    for (int64_t k = 0; k < n_new; k++) {
        int32_t t = gen_pick(m, m->c_logits, g);
        out[k] = t;
        if (n_out) *n_out = k + 1;
        if (t == g->stop_token || k + 1 == n_new) break;
        if (m->cache_len == Tm) {
            /* the window is full: re-encode its last keep - 1 tokens and t, from position 0 */
            memmove(win, win + Tm - (keep - 1), (size_t)(keep - 1) * sizeof(int32_t));
            win[keep - 1] = t;
            rp_model_cache_reset(m);
            RP_TRY(rp_model_cache_feed(m, win, keep, NULL));
        } else {
            win[m->cache_len] = t;
            RP_TRY(rp_model_cache_feed(m, &t, 1, NULL));
        }
    }
    return RP_OK;
}
