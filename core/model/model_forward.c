/* The forward pass of the transformer (model.h), the token checks, and the introspection of the
 * last forward (logits, attention weights, residual stream, linear-attention statistics). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"
#include "model_impl.h"
#include "fpmode.h"
#include "parallel.h"

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


rp_attn_cfg rpm_attn_cfg(const rp_model *m, int64_t q_offset)
{
    const rp_pe_scheme *s = &m->pe;
    rp_attn_cfg a;
    memset(&a, 0, sizeof a);
    /* the config's parts the attention takes: the scheme it resolves to, rel, freq */
    a.scheme = *s;
    a.rel = m->cfg.rel;
    a.causal = 1;
    /* DeBERTa scales its three terms by 1/sqrt(3 d) (He et al. 2020, eq. 10) */
    a.scale = 1.0 / sqrt((double)(rp_rel_of(s->rel)->scale_terms * m->dk));
    a.q_offset = q_offset;
    a.freq = m->off_freq >= 0 ? &m->freq_eff : rp_rope_freq_is_plain(&m->freq) ? NULL : &m->freq;
    a.pos = m->pos_table, a.pos_rows = m->pos_rows;
    return a;
}

rp_linattn_cfg rpm_linattn_cfg(const rp_model *m, int64_t q_offset)
{
    rp_linattn_cfg a = rp_linattn_cfg_default(m->pe.pe, m->dk, m->dk);
    a.scheme = m->pe; /* the config's rules leave linear attention the mode's own placements */
    a.placement = m->cfg.linear_rope;
    a.q_offset = q_offset;
    return a;
}

static int64_t attn_scratch_need(const rp_model *m, int64_t T, int nt)
{
    rp_attn_cfg acfg = rpm_attn_cfg(m, 0);
    return m->linear ? rp_linattn_scratch_floats(T, m->dk, m->dk, nt)
                     : rp_attention_scratch_floats(&acfg, m->cfg.max_batch, T, T, m->cfg.heads,
                                                   m->dk, m->dk, nt);
}

/* OpenMP's current maximum, clamped to what the scratch was sized for at creation (and to what
 * fits for this T). */
int rpm_attn_threads(const rp_model *m, int64_t T)
{
    int nt = rp_max_threads();
    if (nt > m->nthreads) nt = m->nthreads;
    while (nt > 1 && attn_scratch_need(m, T, nt) > m->attn_scratch_floats) nt--;
    return nt;
}

/* The training forward's side of the block (rpm_block_ops): the products by OpenBLAS on the
 * parameters, attention over B sequences of T positions. */
typedef struct {
    rp_model *m;
    int64_t B, T;
    rp_attn_cfg acfg;
    int nt;
    double min_den; /* linear attention: the smallest denominator so far */
} train_path;

static void train_linear(void *ctx, int64_t l, rpm_proj p, float *out, const float *in, int64_t n)
{
    const train_path *t = ctx;
    const float *w = t->m->params->data;
    rpm_proj_info pi = rpm_proj_of(t->m, l, p);
    rp_linear_forward(out, in, w + pi.w, w + pi.b, n, pi.in, pi.out);
}

/* The attention of layer l over the fused qkv buffer (B, T, 3C) into y (B, T, C) and the rows'
 * log-sum-exp into lse (B, H, T) (softmax attention), keeping no weights; the relative modes'
 * tables computed first. Linear attention lowers min_den to its smallest denominator. */
static int64_t train_attend(void *ctx, int64_t l, const rpm_block_bufs *b, int64_t n)
{
    train_path *t = ctx;
    rp_model *m = t->m;
    int64_t C = m->cfg.d_model, H = m->cfg.heads, dk = m->dk;
    const float *qkv = b->qkv;
    rp_attn_rel rel;
    rpm_rel_forward(m, l, t->T, &rel);
    if (m->linear) {
        rp_linattn_cfg lc = rpm_linattn_cfg(m, 0);
        float md = INFINITY;
        rp_attn_io io = {.B = t->B, .T = t->T, .S = t->T, .H = H, .D = dk, .Dv = dk, .q = qkv,
                         .k = qkv + C, .v = qkv + 2 * C, .ldq = 3 * C, .ldk = 3 * C,
                         .ldv = 3 * C, .out = b->y, .ldo = C, .scratch = m->attn_scratch,
                         .nthreads = t->nt, .min_den = &md};
        rp_linattn_forward(&io, &lc);
        if ((double)md < t->min_den) t->min_den = (double)md;
    } else {
        rp_attn_cfg acfg = t->acfg;
        acfg.tables = &rel;
        rp_attn_io io = {.B = t->B, .T = t->T, .S = t->T, .H = H, .D = dk, .Dv = dk, .q = qkv,
                         .k = qkv + C, .v = qkv + 2 * C, .ldq = 3 * C, .ldk = 3 * C,
                         .ldv = 3 * C, .out = b->y, .ldo = C, .lse = b->lse,
                         .scratch = m->attn_scratch, .nthreads = t->nt};
        rp_attention_forward(&io, &acfg);
    }
    return n;
}

static const rpm_block_ops train_ops = {train_linear, train_attend};

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
    rp_linattn_cfg lc = rpm_linattn_cfg(m, 0);
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

static rp_status model_forward(rp_model *m, const int32_t *tokens, const int32_t *targets,
                               const uint8_t *mask, int64_t B, int64_t T, int train, float *loss)
{
    RP_TRY(rp_model_check_tokens(m, tokens, targets, B, T));
    rpm_freq_refresh(m); /* learn_freq: the parameter's values of now */
    const rp_model_cfg *c = &m->cfg;
    int64_t N = B * T, V = c->vocab;
    int drop = train && c->dropout > 0.0;
    train_path t = {m, B, T, rpm_attn_cfg(m, 0), rpm_attn_threads(m, T), HUGE_VAL};

    m->have_fwd = 0;
    memcpy(m->tokens, tokens, (size_t)N * sizeof(int32_t));
    rp_embedding_forward(m->x0, m->tokens, m->params->data + m->off_embed, rpm_abs_table(m), N,
                         T, c->d_model);

    /* m->work (N, C) holds each pre-norm LayerNorm output until the product that reads it, then
     * each output projection until its residual add. GELU: act(fch) lives in m->dF until the W2
     * product (the gradient buffer is free during a forward); ReLU: relu(fch) replaces fch in
     * place (model_impl.h), so the backward reads it instead of recomputing it */
    for (int64_t l = 0; l < c->layers; l++) {
        layer_acts *a = &m->la[l];
        rpm_block_bufs b = {.x = rpm_layer_out(m, l - 1), .ln = m->work,
                            .ln1_mean = a->ln1_mean, .ln1_rstd = a->ln1_rstd,
                            .ln2_mean = a->ln2_mean, .ln2_rstd = a->ln2_rstd, .qkv = a->qkv,
                            .lse = a->lse, .y = a->atty, .proj = m->work, .mask1 = a->mask1,
                            .res1 = a->res1, .h1 = a->ln1, .fch = a->fch,
                            .act = c->act == RP_ACT_RELU ? a->fch : m->dF,
                            .mask2 = a->mask2, .res2 = a->res2, .out = a->ln2};
        rpm_block_forward(m, &train_ops, &t, l, &b, N, drop);
    }
    rpm_head_forward(m, &train_ops, &t, m->logits, rpm_layer_out(m, c->layers - 1), m->work,
                     m->lnf_mean, m->lnf_rstd, N);

    m->have_targets = targets != NULL;
    m->nscored = 0;
    if (targets) {
        memcpy(m->targets, targets, (size_t)N * sizeof(int32_t));
        m->has_mask = mask != NULL;
        if (mask) memcpy(m->mask, mask, (size_t)N);
        m->nscored = rp_crossentropy_forward(m->losses, m->ce_stats, m->logits, m->targets,
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
    m->lin_min_den = m->linear ? t.min_den : (double)NAN;
    m->have_fwd = 1;
    return RP_OK;
}

rp_status rp_model_forward(rp_model *m, const int32_t *tokens, const int32_t *targets,
                           const uint8_t *mask, int64_t B, int64_t T, int train, float *loss)
{
    rp_fpmode fm = rp_fp_flush_begin();
    rp_status st = model_forward(m, tokens, targets, mask, B, T, train, loss);
    rp_fp_flush_end(fm);
    return st;
}

const float *rp_model_logits(const rp_model *m) { return m->have_fwd ? m->logits : NULL; }

const float *rp_model_losses(const rp_model *m)
{
    return m->have_fwd && m->have_targets ? m->losses : NULL;
}

void rp_model_last_shape(const rp_model *m, int64_t *B, int64_t *T)
{
    if (B) *B = m->have_fwd ? m->lastB : 0;
    if (T) *T = m->have_fwd ? m->lastT : 0;
}

static rp_status model_attention_weights(rp_model *m, int64_t layer, float *out)
{
    if (m->linear) return rp_error(RP_ERR_ARG, "the model uses linear attention");
    if (!m->have_fwd) return rp_error(RP_ERR_ARG, "no forward pass yet");
    if (layer < 0 || layer >= m->cfg.layers)
        return rp_error(RP_ERR_ARG, "layer %lld is outside 0..%lld", (long long)layer,
                        (long long)(m->cfg.layers - 1));
    int64_t B = m->lastB, T = m->lastT, C = m->cfg.d_model;
    rp_attn_cfg acfg = rpm_attn_cfg(m, 0);
    rp_attn_rel rel;
    rpm_rel_tables(m, layer, &rel);
    acfg.tables = &rel;
    const float *qkv = m->la[layer].qkv;
    float *y = m->work; /* scratch: the output is not needed (work holds nothing between calls) */
    rp_attn_io io = {.B = B, .T = T, .S = T, .H = m->cfg.heads, .D = m->dk, .Dv = m->dk,
                     .q = qkv, .k = qkv + C, .v = qkv + 2 * C, .ldq = 3 * C, .ldk = 3 * C,
                     .ldv = 3 * C, .out = y, .ldo = C, .att = out, .scratch = m->attn_scratch,
                     .nthreads = rpm_attn_threads(m, T)};
    rp_attention_forward(&io, &acfg);
    return RP_OK;
}

rp_status rp_model_attention_weights(rp_model *m, int64_t layer, float *out)
{
    rp_fpmode fm = rp_fp_flush_begin();
    rp_status st = model_attention_weights(m, layer, out);
    rp_fp_flush_end(fm);
    return st;
}

double rp_model_linear_min_den(const rp_model *m)
{
    return m->linear && m->have_fwd ? m->lin_min_den : (double)NAN;
}

float *rpm_layer_out(const rp_model *m, int64_t l)
{
    if (l < 0) return m->x0;
    return m->cfg.norm == RP_NORM_PRE ? m->la[l].res2 : m->la[l].ln2;
}

const float *rp_model_residual(const rp_model *m, int64_t layer)
{
    if (!m->have_fwd || layer < -1 || layer >= m->cfg.layers) return NULL;
    return rpm_layer_out(m, layer);
}
