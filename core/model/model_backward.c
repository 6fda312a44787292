/* The backward pass of the transformer (model.h): gradients of the last forward's mean loss,
 * accumulated into the gradient buffer. The activation gradients live in the buffer drawn in
 * model_impl.h; pre-norm's LayerNorm outputs are recomputed into m->work where a weight gradient
 * needs them. */
#include <string.h>

#include "layers.h"
#include "model_impl.h"
#include "fpmode.h"
#include "parallel.h"

/* p[0 .. n) = 0, in blocks over the OpenMP threads (one thread clears 12 MB of S's dqkv at a
 * fraction of the bandwidth two reach). */
static void zero(float *p, int64_t n)
{
    const int64_t blk = 16384;
    RP_PARALLEL_FOR(n >= 4 * blk)
    for (int64_t i = 0; i < n; i += blk)
        memset(p + i, 0, (size_t)(n - i < blk ? n - i : blk) * sizeof(float));
}

/* The gradient of a dropped residual branch: spare = dres * mask (when dropout ran), else dres.
 * spare is free again once the branch's output projection has its gradients. */
static const float *branch_grad(rp_model *m, const float *dres, const float *mask, float *spare,
                                int64_t n)
{
    if (!m->dropped) return dres;
    rp_dropout_backward_set(spare, dres, mask, (float)m->cfg.dropout, n);
    return spare;
}

/* A LayerNorm output the forward did not keep (pre-norm), recomputed into m->work by the
 * forward's call on the same input and weights: the same bits. The statistics are written again
 * with the values they already hold. */
static float *ln_again(rp_model *m, const float *inp, float *mean, float *rstd, int64_t wo,
                       int64_t bo, int64_t N)
{
    const float *w = m->params->data;
    rp_layernorm_forward(m->work, mean, rstd, inp, w + wo, w + bo, N, m->cfg.d_model);
    return m->work;
}

/* Backward of the feed-forward branch drop(W2 act(W1 inp)) of layer p: dres is the gradient of
 * the residual sum the branch was added to, spare an (N, C) buffer free during the call; the
 * parameter gradients accumulate.
 *   pre-norm (dres = dx, spare = work): inp = LN2(res1) is recomputed into work, and work is
 *     then OVERWRITTEN in place by d inp;
 *   post-norm (dres = work = d res2, spare = dx): inp = h1 = ln1, and dres += d inp, so dres
 *     becomes d h1 (the residual path plus the branch).
 * With dropout the masked gradient goes to spare first. */
static void ff_branch_backward(rp_model *m, const layer_params *p, const layer_acts *a,
                               float *dres, float *spare, int64_t N)
{
    const float *w = m->params->data;
    float *g = m->grads->data;
    int64_t C = m->cfg.d_model, F = m->cfg.d_ff;
    const float *dproj = branch_grad(m, dres, a->mask2, spare, N * C);
    /* W2's input: ReLU's output, which the forward kept in place of fch (relu(x) > 0 exactly
     * where x > 0, and NaN where x is NaN, so it also gives ReLU's mask); GELU's, not kept,
     * recomputed into dF (bitwise the forward's). dF is then overwritten by d act and, in place,
     * by d fch. */
    const float *act = a->fch;
    if (m->cfg.act != RP_ACT_RELU) {
        rpm_act_forward(m, m->dF, a->fch, N * F);
        act = m->dF;
    }
    rp_linear_backward_set(m->dF, g + p->w2w, g + p->w2b, dproj, act, w + p->w2w, N, F, C);
    /* ReLU: W1's bias gradient in the same pass as d fch */
    float *db1 = g + p->w1b;
    if (m->cfg.act == RP_ACT_RELU) {
        rp_relu_backward_set_bias(m->dF, db1, m->dF, a->fch, N, F);
        db1 = NULL;
    } else {
        rpm_act_backward_set(m, m->dF, m->dF, a->fch, N * F);
    }
    if (m->cfg.norm == RP_NORM_PRE) {
        float *inp = ln_again(m, a->res1, a->ln2_mean, a->ln2_rstd, p->ln2w, p->ln2b, N);
        rp_linear_backward_set(inp, g + p->w1w, db1, m->dF, inp, w + p->w1w, N, C, F);
    } else {
        rp_linear_backward(dres, g + p->w1w, db1, m->dF, a->ln1, w + p->w1w, N, C, F);
    }
}

/* Backward of the attention branch drop(Wo attn(Wqkv inp)) of layer p with input x, as
 * ff_branch_backward: pre-norm (dres = dx, spare = work): inp = LN1(x) recomputed into work, then
 * work OVERWRITTEN by d inp; post-norm (dres = dx, spare = work): inp = x and dres += d x. */
static void attn_branch_backward(rp_model *m, int64_t l, float *dres, float *spare,
                                 const float *x, int64_t B, int64_t T, const rp_attn_cfg *acfg,
                                 int nt)
{
    const layer_params *p = &m->lp[l];
    const layer_acts *a = &m->la[l];
    const float *w = m->params->data;
    float *g = m->grads->data;
    int64_t C = m->cfg.d_model, N = B * T, NC = N * C, dk = m->dk;
    const float *dproj = branch_grad(m, dres, a->mask1, spare, NC);
    rp_linear_backward_set(m->datty, g + p->outw, g + p->outb, dproj, a->atty, w + p->outw, N, C,
                           C);
    if (m->linear) {
        zero(m->dqkv, 3 * NC); /* the linear kernels accumulate */
        rp_linattn_cfg lc = rpm_linattn_cfg(m, 0);
        rp_attn_io io = {.B = B, .T = T, .S = T, .H = m->cfg.heads, .D = dk, .Dv = dk,
                         .q = a->qkv, .k = a->qkv + C, .v = a->qkv + 2 * C, .ldq = 3 * C,
                         .ldk = 3 * C, .ldv = 3 * C, .ldo = C, .dout = m->datty, .dq = m->dqkv,
                         .dk = m->dqkv + C, .dv = m->dqkv + 2 * C, .scratch = m->attn_scratch,
                         .nthreads = nt};
        rp_linattn_backward(&io, &lc);
    } else {
        /* the relative modes' tables of the forward, and where their gradients go */
        rp_attn_cfg lc = *acfg;
        rp_attn_rel rel;
        rp_attn_rel_grad drel;
        rpm_rel_tables(m, l, &rel);
        rpm_rel_grad_begin(m, l, T, &drel);
        lc.tables = &rel;
        rp_attn_io io = {.B = B, .T = T, .S = T, .H = m->cfg.heads, .D = dk, .Dv = dk,
                         .q = a->qkv, .k = a->qkv + C, .v = a->qkv + 2 * C, .ldq = 3 * C,
                         .ldk = 3 * C, .ldv = 3 * C, .out = a->atty, .ldo = C, .lse = a->lse,
                         .dout = m->datty, .dq = m->dqkv, .dk = m->dqkv + C,
                         .dv = m->dqkv + 2 * C, .set = 1, .drel = &drel,
                         .scratch = m->attn_scratch, .nthreads = nt};
        rp_attention_backward(&io, &lc);
        rpm_rel_grad_end(m, l, T);
        rpm_freq_grad(m, a->qkv, m->dqkv, a->atty, m->datty, B, T);
    }
    if (m->cfg.norm == RP_NORM_PRE) {
        float *inp = ln_again(m, x, a->ln1_mean, a->ln1_rstd, p->ln1w, p->ln1b, N);
        rp_linear_backward_set(inp, g + p->qkvw, g + p->qkvb, m->dqkv, inp, w + p->qkvw, N, C,
                               3 * C);
    } else {
        rp_linear_backward(dres, g + p->qkvw, g + p->qkvb, m->dqkv, x, w + p->qkvw, N, C, 3 * C);
    }
}

static rp_status model_backward(rp_model *m)
{
    if (!m->have_fwd || !m->have_targets)
        return rp_error(RP_ERR_ARG, "backward needs a forward pass with targets first");
    const rp_model_cfg *c = &m->cfg;
    const float *w = m->params->data;
    float *g = m->grads->data;
    int64_t B = m->lastB, T = m->lastT, N = B * T, C = c->d_model, V = c->vocab;
    int pre = c->norm == RP_NORM_PRE;
    rp_attn_cfg acfg = rpm_attn_cfg(m, 0);
    int nt = rpm_attn_threads(m, T);
    if (m->nscored == 0) return RP_OK; /* the loss is NaN and has no gradient: nothing to add */

    rp_crossentropy_backward_set(m->dlogits, m->logits, m->ce_stats, m->targets,
                                 m->has_mask ? m->mask : NULL, (float)(1.0 / (double)m->nscored),
                                 N, V);
    float *xL = rpm_layer_out(m, c->layers - 1);
    if (pre) {
        /* the final LN's output recomputed into work, then overwritten there by its gradient */
        float *lnf = ln_again(m, xL, m->lnf_mean, m->lnf_rstd, m->off_normf_w, m->off_normf_b, N);
        rp_linear_backward_set(lnf, g + m->off_head_w, g + m->off_head_b, m->dlogits, lnf,
                               w + m->off_head_w, N, C, V);
        rp_layernorm_backward_set(m->dx, g + m->off_normf_w, g + m->off_normf_b, lnf, xL,
                                  m->lnf_mean, m->lnf_rstd, w + m->off_normf_w, N, C);
    } else {
        rp_linear_backward_set(m->dx, g + m->off_head_w, g + m->off_head_b, m->dlogits, xL,
                               w + m->off_head_w, N, C, V);
    }

    for (int64_t l = c->layers - 1; l >= 0; l--) {
        const layer_params *p = &m->lp[l];
        const layer_acts *a = &m->la[l];
        const float *x = rpm_layer_out(m, l - 1);
        if (pre) {
            /* dx = d res2; res2 = res1 + drop(W2 act(W1 ln2)), ln2 = LN2(res1) */
            ff_branch_backward(m, p, a, m->dx, m->work, N);
            /* work = d ln2 */
            rp_layernorm_backward(m->dx, g + p->ln2w, g + p->ln2b, m->work, a->res1, a->ln2_mean,
                                  a->ln2_rstd, w + p->ln2w, N, C);
            /* dx = d res1; res1 = x + drop(Wo attn(Wqkv ln1)), ln1 = LN1(x) */
            attn_branch_backward(m, l, m->dx, m->work, x, B, T, &acfg, nt);
            /* work = d ln1 */
            rp_layernorm_backward(m->dx, g + p->ln1w, g + p->ln1b, m->work, x, a->ln1_mean,
                                  a->ln1_rstd, w + p->ln1w, N, C);
            /* dx = d x */
        } else {
            /* dx = d ln2; ln2 = LN2(res2). work holds d res2, then d h1 */
            rp_layernorm_backward_set(m->work, g + p->ln2w, g + p->ln2b, m->dx, a->res2,
                                      a->ln2_mean, a->ln2_rstd, w + p->ln2w, N, C);
            /* work = d res2; res2 = h1 + drop(W2 act(W1 h1)), h1 = ln1 (dx is free) */
            ff_branch_backward(m, p, a, m->work, m->dx, N);
            /* work = d h1; h1 = LN1(res1) */
            rp_layernorm_backward_set(m->dx, g + p->ln1w, g + p->ln1b, m->work, a->res1,
                                      a->ln1_mean, a->ln1_rstd, w + p->ln1w, N, C);
            /* dx = d res1; res1 = x + drop(Wo attn(Wqkv x)) (work is free) */
            attn_branch_backward(m, l, m->dx, m->work, x, B, T, &acfg, nt);
            /* dx = d x (the residual path plus the qkv path) */
        }
    }
    rp_embedding_backward(g + m->off_embed, m->pe.absolute == RP_ABS_LEARNED ? g + m->off_pos : NULL, m->dx,
                          m->tokens, N, T, C);
    return RP_OK;
}

rp_status rp_model_backward(rp_model *m)
{
    rp_fpmode fm = rp_fp_flush_begin();
    rp_status st = model_backward(m);
    rp_fp_flush_end(fm);
    return st;
}
