/* The backward pass of the transformer (model.h): gradients of the last forward's mean loss,
 * accumulated into the gradient buffer. */
#include <string.h>

#include "layers.h"
#include "model_impl.h"

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
    /* act(fch) is not kept: recomputed into dF2 (bitwise the forward's), used, then overwritten */
    rpm_act_forward(m, m->dF2, a->fch, N * F);
    zero(m->dF1, N * F);
    rp_linear_backward(m->dF1, g + p->w2w, g + p->w2b, dproj, m->dF2, w + p->w2w, N, F, C);
    zero(m->dF2, N * F);
    rpm_act_backward(m, m->dF2, m->dF1, a->fch, N * F);
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
        rp_linattn_cfg lc = rpm_linattn_cfg(m, 0);
        rp_linattn_backward(m->dqkv, m->dqkv + C, m->dqkv + 2 * C, m->attn_scratch, m->datty, C,
                            a->qkv, 3 * C, a->qkv + C, 3 * C, a->qkv + 2 * C, 3 * C, B, T,
                            m->cfg.heads, dk, dk, &lc, nt);
    } else {
        rp_attention_backward(m->dqkv, m->dqkv + C, m->dqkv + 2 * C, m->attn_scratch, m->datty,
                              a->atty, C, a->lse, a->qkv, 3 * C, a->qkv + C, 3 * C,
                              a->qkv + 2 * C, 3 * C, B, T, T, m->cfg.heads, dk, dk, acfg, nt);
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
    rp_attn_cfg acfg = rpm_attn_cfg(m, 0);
    int nt = rpm_attn_threads(m, T);
    if (m->nscored == 0) return RP_OK; /* the loss is NaN and has no gradient: nothing to add */

    zero(m->dlogits, N * V);
    rp_crossentropy_backward(m->dlogits, m->probs, m->targets, m->has_mask ? m->mask : NULL,
                             (float)(1.0 / (double)m->nscored), N, V);
    const float *xL = rpm_layer_out(m, c->layers - 1);
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
        const float *x = rpm_layer_out(m, l - 1);
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
    rp_embedding_backward(g + m->off_embed, m->pe.absolute == RP_ABS_LEARNED ? g + m->off_pos : NULL, m->dx,
                          m->tokens, N, T, C);
    return RP_OK;
}
