/* The relative modes in the model (pe shaw, xl, t5, deberta, alibi): which tables each layer
 * hands the attention kernels (core/attention.h gives the formulas), how the computed ones are
 * made from the parameters, and how their gradients go back.
 *
 *   shaw     a^K, a^V: the layer's parameters relk, relv, read directly (Shaw et al. 2018)
 *   xl       Ek = R W_kR^T (rows: the distances 0 .. T-1 of a causal self-attention, R the
 *            sinusoid of Transformer-XL: [sin(d f_j) | cos(d f_j)], f_j = 10000^(-2j/C)),
 *            u and v (relu, relw) read directly (Dai et al. 2019, eq. 7 of RoFormer)
 *   t5       the bias table relbias [H, buckets] (Raffel et al. 2020)
 *   deberta  K^r = P W_kr^T and Q^r = P W_qr^T from the shared relative embeddings P [2k, C]
 *            (He et al. 2020, eq. 10 of RoFormer); the scores are scaled by 1/sqrt(3 d_k)
 *   alibi    nothing (fixed slopes, Press et al. 2022)
 *
 * Computed tables are [rows, C] = [rows, H, d_k]: head h's row r at r * C + h * d_k, the layout
 * the kernels read. The backward of Ek = R W^T is dW += dEk^T R (and dP += dEk W for deberta).
 */
#include <math.h>
#include <string.h>

#include "layers.h"
#include "model_impl.h"

static rp_rel_kind kind(const rp_model *m) { return m->pe.rel; }

/* Rows of deberta's tables (2k) and of xl's (seq_len, the longest call). */
static int64_t deberta_rows(const rp_model *m) { return 2 * m->cfg.rel_clip; }

int64_t rpm_rel_act_floats(const rp_model *m)
{
    int64_t C = m->cfg.d_model;
    if (kind(m) == RP_REL_XL) return rpm_sat_mul(m->cfg.seq_len, C);
    if (kind(m) == RP_REL_DEBERTA) return rpm_sat_mul(2 * deberta_rows(m), C);
    return 0;
}

int64_t rpm_rel_table_floats(const rp_model *m)
{
    return kind(m) == RP_REL_XL ? rpm_sat_mul(m->cfg.seq_len, m->cfg.d_model) : 0;
}

int64_t rpm_rel_grad_floats(const rp_model *m) { return rpm_rel_act_floats(m); }

int64_t rpm_rel_dec_floats(const rp_model *m)
{
    int64_t C = m->cfg.d_model, K = m->cfg.rel_clip;
    switch (kind(m)) {
    case RP_REL_SHAW: return rpm_sat_mul(2 * (2 * K + 1), m->dk);
    case RP_REL_XL: return rpm_sat_add(rpm_sat_mul(m->cfg.seq_len, C), 2 * C);
    case RP_REL_T5: return rpm_sat_mul(m->cfg.heads, m->cfg.rel_buckets);
    case RP_REL_DEBERTA: return rpm_sat_mul(2 * deberta_rows(m), C);
    default: return 0;
    }
}

void rpm_rel_init(rp_model *m)
{
    if (kind(m) != RP_REL_XL) return;
    int64_t C = m->cfg.d_model, half = C / 2;
    for (int64_t d = 0; d < m->cfg.seq_len; d++)
        for (int64_t j = 0; j < half; j++) {
            double a = (double)d * pow(10000.0, -2.0 * (double)j / (double)C);
            m->xl_table[d * C + j] = (float)sin(a);
            m->xl_table[d * C + half + j] = (float)cos(a);
        }
}

/* The tables of layer l whose storage is given: ek, eq the computed tables (xl, deberta), w the
 * parameters. */
static void point(const rp_model *m, int64_t l, const float *w, const float *ek, const float *eq,
                  rp_attn_rel *rel)
{
    const layer_params *p = &m->lp[l];
    memset(rel, 0, sizeof *rel);
    switch (kind(m)) {
    case RP_REL_SHAW:
        rel->ek = w + p->relk;
        rel->ev = w + p->relv;
        break;
    case RP_REL_XL:
        rel->ek = ek;
        rel->u = w + p->relu;
        rel->w = w + p->relw;
        break;
    case RP_REL_T5: rel->bias = w + p->relbias; break;
    case RP_REL_DEBERTA:
        rel->ek = ek;
        rel->eq = eq;
        break;
    default: break;
    }
}

/* Computes the tables of layer l from the parameters w into ek (and eq): xl rows 0 .. rows-1. */
static void compute(const rp_model *m, int64_t l, const float *w, int64_t rows, float *ek,
                    float *eq)
{
    const layer_params *p = &m->lp[l];
    int64_t C = m->cfg.d_model;
    if (kind(m) == RP_REL_XL) {
        rp_linear_forward(ek, m->xl_table, w + p->relproj, NULL, rows, C, C);
    } else if (kind(m) == RP_REL_DEBERTA) {
        rp_linear_forward(ek, w + m->off_rel, w + p->relkp, NULL, deberta_rows(m), C, C);
        rp_linear_forward(eq, w + m->off_rel, w + p->relqp, NULL, deberta_rows(m), C, C);
    }
}

void rpm_rel_forward(rp_model *m, int64_t l, int64_t T, rp_attn_rel *rel)
{
    const float *w = m->params->data;
    layer_acts *a = &m->la[l];
    compute(m, l, w, T, a->rel_ek, a->rel_eq);
    point(m, l, w, a->rel_ek, a->rel_eq, rel);
}

void rpm_rel_tables(const rp_model *m, int64_t l, rp_attn_rel *rel)
{
    point(m, l, m->params->data, m->la[l].rel_ek, m->la[l].rel_eq, rel);
}

void rpm_rel_grad_begin(rp_model *m, int64_t l, int64_t T, rp_attn_rel_grad *g)
{
    const layer_params *p = &m->lp[l];
    float *gr = m->grads->data;
    int64_t C = m->cfg.d_model;
    memset(g, 0, sizeof *g);
    switch (kind(m)) {
    case RP_REL_SHAW:
        g->ek = gr + p->relk;
        g->ev = gr + p->relv;
        break;
    case RP_REL_XL:
        memset(m->drel, 0, (size_t)(T * C) * sizeof(float));
        g->ek = m->drel;
        g->u = gr + p->relu;
        g->w = gr + p->relw;
        break;
    case RP_REL_T5: g->bias = gr + p->relbias; break;
    case RP_REL_DEBERTA:
        memset(m->drel, 0, (size_t)(2 * deberta_rows(m) * C) * sizeof(float));
        g->ek = m->drel;
        g->eq = m->drel + deberta_rows(m) * C;
        break;
    default: break;
    }
}

void rpm_rel_grad_end(rp_model *m, int64_t l, int64_t T)
{
    const layer_params *p = &m->lp[l];
    const float *w = m->params->data;
    float *gr = m->grads->data;
    int64_t C = m->cfg.d_model;
    if (kind(m) == RP_REL_XL) {
        /* Ek = R W^T: dW += dEk^T R (R is fixed) */
        rp_linear_backward(NULL, gr + p->relproj, NULL, m->drel, m->xl_table, w + p->relproj, T,
                           C, C);
    } else if (kind(m) == RP_REL_DEBERTA) {
        int64_t K2 = deberta_rows(m);
        rp_linear_backward(gr + m->off_rel, gr + p->relkp, NULL, m->drel, w + m->off_rel,
                           w + p->relkp, K2, C, C);
        rp_linear_backward(gr + m->off_rel, gr + p->relqp, NULL, m->drel + K2 * C, w + m->off_rel,
                           w + p->relqp, K2, C, C);
    }
}

/* Layer l's part of dec_rel. */
static float *dec_part(const rp_model *m, int64_t l) { return m->dec_rel + l * rpm_rel_dec_floats(m); }

void rpm_rel_decode_refresh(rp_model *m)
{
    if (kind(m) == RP_REL_NONE || kind(m) == RP_REL_ALIBI) return;
    const float *w = m->params->data;
    int64_t C = m->cfg.d_model, K = m->cfg.rel_clip, dk = m->dk;
    for (int64_t l = 0; l < m->cfg.layers; l++) {
        const layer_params *p = &m->lp[l];
        float *d = dec_part(m, l);
        switch (kind(m)) {
        case RP_REL_SHAW:
            memcpy(d, w + p->relk, (size_t)((2 * K + 1) * dk) * sizeof(float));
            memcpy(d + (2 * K + 1) * dk, w + p->relv, (size_t)((2 * K + 1) * dk) * sizeof(float));
            break;
        case RP_REL_XL:
            compute(m, l, w, m->cfg.seq_len, d, NULL);
            memcpy(d + m->cfg.seq_len * C, w + p->relu, (size_t)C * sizeof(float));
            memcpy(d + m->cfg.seq_len * C + C, w + p->relw, (size_t)C * sizeof(float));
            break;
        case RP_REL_T5:
            memcpy(d, w + p->relbias, (size_t)(m->cfg.heads * m->cfg.rel_buckets) * sizeof(float));
            break;
        case RP_REL_DEBERTA: compute(m, l, w, 0, d, d + deberta_rows(m) * C); break;
        default: break;
        }
    }
}

void rpm_rel_decode_tables(const rp_model *m, int64_t l, rp_attn_rel *rel)
{
    memset(rel, 0, sizeof *rel);
    const float *d = kind(m) == RP_REL_NONE || kind(m) == RP_REL_ALIBI ? NULL : dec_part(m, l);
    int64_t C = m->cfg.d_model, K = m->cfg.rel_clip;
    switch (kind(m)) {
    case RP_REL_SHAW:
        rel->ek = d;
        rel->ev = d + (2 * K + 1) * m->dk;
        break;
    case RP_REL_XL:
        rel->ek = d;
        rel->u = d + m->cfg.seq_len * C;
        rel->w = d + m->cfg.seq_len * C + C;
        break;
    case RP_REL_T5: rel->bias = d; break;
    case RP_REL_DEBERTA:
        rel->ek = d;
        rel->eq = d + deberta_rows(m) * C;
        break;
    default: break;
    }
}
