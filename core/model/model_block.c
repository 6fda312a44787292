/* The transformer block (model.h), defined once: the training forward (model_forward.c) runs it
 * over the (B, T) rows of a batch, decoding (model_decode.c) over one row per busy lane. The two
 * differ only in how a product is computed and how attention is, which each path hands in
 * (rpm_block_ops); the LayerNorms, activations, residual adds and dropout are the same calls
 * here, in the same order. (llm.c's gpt2_forward, github.com/karpathy/llm.c, keeps one
 * definition of the layer in the same way, and ggml's graph builders one per model whatever
 * backend computes it.) */
#include "layers.h"
#include "model_impl.h"

rpm_proj_info rpm_proj_of(const rp_model *m, int64_t l, rpm_proj p)
{
    int64_t C = m->cfg.d_model, F = m->cfg.d_ff;
    /* dec_w: per layer qkv^T, out^T, w1^T, w2^T (rpm_dec_layer_floats), then the head's */
    if (p == RPM_PROJ_HEAD)
        return (rpm_proj_info){m->off_head_w, m->off_head_b, C, m->cfg.vocab,
                               m->cfg.layers * rpm_dec_layer_floats(&m->cfg)};
    const layer_params *lp = &m->lp[l];
    int64_t dec = l * rpm_dec_layer_floats(&m->cfg);
    switch (p) {
    case RPM_PROJ_QKV: return (rpm_proj_info){lp->qkvw, lp->qkvb, C, 3 * C, dec};
    case RPM_PROJ_OUT: return (rpm_proj_info){lp->outw, lp->outb, C, C, dec + 3 * C * C};
    case RPM_PROJ_W1: return (rpm_proj_info){lp->w1w, lp->w1b, C, F, dec + 4 * C * C};
    default: return (rpm_proj_info){lp->w2w, lp->w2b, F, C, dec + 4 * C * C + C * F};
    }
}

int64_t rpm_dec_layer_floats(const rp_model_cfg *c)
{
    int64_t C = c->d_model, F = c->d_ff;
    return rpm_sat_add(rpm_sat_mul(rpm_sat_mul(C, C), 4), rpm_sat_mul(rpm_sat_mul(C, F), 2));
}

const float *rpm_abs_table(const rp_model *m)
{
    if (m->pe.absolute == RP_ABS_LEARNED) return m->params->data + m->off_pos;
    return m->pe.absolute == RP_ABS_SINUSOIDAL ? m->sin_table : NULL;
}

void rpm_act_forward(const rp_model *m, float *out, const float *inp, int64_t n)
{
    if (m->cfg.act == RP_ACT_GELU)
        rp_gelu_forward(out, inp, n);
    else
        rp_relu_forward(out, inp, n);
}

void rpm_act_backward_set(const rp_model *m, float *dinp, const float *dout, const float *inp,
                          int64_t n)
{
    if (m->cfg.act == RP_ACT_GELU)
        rp_gelu_backward_set(dinp, dout, inp, n);
    else
        rp_relu_backward_set(dinp, dout, inp, n);
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

int64_t rpm_block_forward(rp_model *m, const rpm_block_ops *ops, void *ctx, int64_t l,
                          const rpm_block_bufs *b, int64_t n, int drop)
{
    const float *w = m->params->data;
    const layer_params *p = &m->lp[l];
    int64_t C = m->cfg.d_model, F = m->cfg.d_ff;
    int pre = m->cfg.norm == RP_NORM_PRE;
    const float *attn_in = b->x;
    if (pre) {
        rp_layernorm_forward(b->ln, b->ln1_mean, b->ln1_rstd, b->x, w + p->ln1w, w + p->ln1b, n,
                             C);
        attn_in = b->ln;
    }
    ops->linear(ctx, l, RPM_PROJ_QKV, b->qkv, attn_in, n);
    n = ops->attend(ctx, l, b, n);
    if (n == 0) return 0;
    ops->linear(ctx, l, RPM_PROJ_OUT, b->proj, b->y, n);
    residual_branch(m, b->res1, b->mask1, b->x, b->proj, drop, n * C);
    const float *ff_in, *ff_res;
    if (pre) {
        rp_layernorm_forward(b->ln, b->ln2_mean, b->ln2_rstd, b->res1, w + p->ln2w, w + p->ln2b,
                             n, C);
        ff_in = b->ln;
        ff_res = b->res1;
    } else {
        rp_layernorm_forward(b->h1, b->ln1_mean, b->ln1_rstd, b->res1, w + p->ln1w, w + p->ln1b,
                             n, C);
        ff_in = b->h1;
        ff_res = b->h1;
    }
    ops->linear(ctx, l, RPM_PROJ_W1, b->fch, ff_in, n);
    rpm_act_forward(m, b->act, b->fch, n * F);
    ops->linear(ctx, l, RPM_PROJ_W2, b->proj, b->act, n);
    residual_branch(m, b->res2, b->mask2, ff_res, b->proj, drop, n * C);
    if (!pre)
        rp_layernorm_forward(b->out, b->ln2_mean, b->ln2_rstd, b->res2, w + p->ln2w, w + p->ln2b,
                             n, C);
    return n;
}

void rpm_head_forward(rp_model *m, const rpm_block_ops *ops, void *ctx, float *logits,
                      const float *x, float *ln, float *mean, float *rstd, int64_t n)
{
    const float *w = m->params->data;
    const float *head_in = x;
    if (m->cfg.norm == RP_NORM_PRE) {
        rp_layernorm_forward(ln, mean, rstd, x, w + m->off_normf_w, w + m->off_normf_b, n,
                             m->cfg.d_model);
        head_in = ln;
    }
    ops->linear(ctx, m->cfg.layers, RPM_PROJ_HEAD, logits, head_in, n);
}
