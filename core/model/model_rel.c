/* The relative modes in the model (pe shaw, xl, t5, deberta, alibi): the tables each layer hands
 * the attention kernels (core/nn/attention.h gives the formulas), made from the parameters its kind's
 * row lists (core/nn/pe.c), and the way back of their gradients. A parameter is
 *
 *   RP_PARAM_TABLE        a table itself, read where it lies (shaw's a^K, a^V; xl's u, v; t5's
 *                         bias)
 *   RP_PARAM_PROJ_SIN     a projection W: the table R W^T, R the fixed sinusoid of Transformer-XL
 *                         (xl_table: [sin(d f_j) | cos(d f_j)], f_j = 10000^(-2j/C), the
 *                         distances d = 0 .. T-1 of a causal self-attention of T positions;
 *                         xl's W_kR R, Dai et al. 2019)
 *   RP_PARAM_PROJ_SHARED  a projection W: the table P W^T, P the model's shared parameter
 *                         (deberta's K^r = P W_kr^T and Q^r = P W_qr^T, He et al. 2020)
 *   RP_PARAM_SHARED       P (the model's off_rel)
 *
 * Computed tables are [rows, C] = [rows, H, d_k]: head h's row r at r * C + h * d_k, the layout
 * the kernels read; a layer's (layer_acts rel_tab) and their gradients (drel) lie in table order
 * (RP_TAB_*), each at its most rows (seq_len for R, P's rows). The backward of E = R W^T is
 * dW += dE^T R (and dP += dE W for P W^T). Decoding reads per layer every table of the kind from
 * dec_rel, in table order: a copy of a table parameter, a computed table of seq_len rows (R) or
 * P's rows, as of the sequence start. */
#include <math.h>
#include <string.h>

#include "layers.h"
#include "model_impl.h"

static const rp_rel_desc *kind(const rp_model *m) { return rp_rel_of(m->pe.rel); }

static int computed(const rp_rel_param *p)
{
    return p->use == RP_PARAM_PROJ_SIN || p->use == RP_PARAM_PROJ_SHARED;
}

static int64_t dim(const rp_model *m, rp_rel_dim d)
{
    return rp_rel_dim_size(d, m->cfg.rel.clip, m->dk, m->cfg.d_model, m->cfg.heads,
                           m->cfg.rel.buckets);
}

/* The parameter index of the layer parameter that gives table t: -1 when none does. */
static int giver(const rp_rel_desc *x, int t)
{
    for (int i = 0; i < x->nparams; i++)
        if (x->params[i].use != RP_PARAM_SHARED && x->params[i].table == t) return i;
    return -1;
}

/* The rows of the computed table of p for a call of T positions: T (R) or P's rows. */
static int64_t computed_rows(const rp_model *m, const rp_rel_param *p, int64_t T)
{
    const rp_rel_desc *x = kind(m);
    if (p->use == RP_PARAM_PROJ_SIN) return T;
    for (int i = 0; i < x->nparams; i++)
        if (x->params[i].use == RP_PARAM_SHARED) return dim(m, x->params[i].rows);
    return 0;
}

/* The floats of table t in a layer's computed tables (0 unless computed) or, when dec, in its
 * decode tables (0 unless the kind reads it). */
static int64_t table_floats(const rp_model *m, int t, int dec)
{
    const rp_rel_desc *x = kind(m);
    int i = giver(x, t);
    if (i < 0) return 0;
    const rp_rel_param *p = &x->params[i];
    if (computed(p)) return rpm_sat_mul(computed_rows(m, p, m->cfg.seq_len), m->cfg.d_model);
    return dec ? rpm_sat_mul(dim(m, p->rows), dim(m, p->cols)) : 0;
}

/* The offset of table t in a layer's computed tables (dec 0) or decode tables (dec 1). */
static int64_t table_offset(const rp_model *m, int t, int dec)
{
    int64_t off = 0;
    for (int i = 0; i < t; i++) off = rpm_sat_add(off, table_floats(m, i, dec));
    return off;
}

static int64_t tables_floats(const rp_model *m, int dec)
{
    return table_offset(m, RP_TAB_COUNT, dec);
}

int64_t rpm_rel_act_floats(const rp_model *m) { return tables_floats(m, 0); }
int64_t rpm_rel_grad_floats(const rp_model *m) { return tables_floats(m, 0); }
int64_t rpm_rel_dec_floats(const rp_model *m) { return tables_floats(m, 1); }

int64_t rpm_rel_table_floats(const rp_model *m)
{
    const rp_rel_desc *x = kind(m);
    for (int i = 0; i < x->nparams; i++)
        if (x->params[i].use == RP_PARAM_PROJ_SIN)
            return rpm_sat_mul(m->cfg.seq_len, m->cfg.d_model);
    return 0;
}

void rpm_rel_init(rp_model *m)
{
    if (!rpm_rel_table_floats(m)) return;
    int64_t C = m->cfg.d_model, half = C / 2;
    for (int64_t d = 0; d < m->cfg.seq_len; d++)
        for (int64_t j = 0; j < half; j++) {
            double a = (double)d * pow(10000.0, -2.0 * (double)j / (double)C);
            m->xl_table[d * C + j] = (float)sin(a);
            m->xl_table[d * C + half + j] = (float)cos(a);
        }
}

/* E = src W^T of the projection p of layer l (rows of T positions for R) into dst, from the
 * parameters w. */
static void project(const rp_model *m, int64_t l, const rp_rel_param *p, int i, const float *w,
                    int64_t T, float *dst)
{
    int64_t C = m->cfg.d_model;
    const float *src = p->use == RP_PARAM_PROJ_SIN ? m->xl_table : w + m->off_rel;
    rp_linear_forward(dst, src, w + m->lp[l].rel[i], NULL, computed_rows(m, p, T), C, C);
}

/* Layer l's tables into *rel: the table parameters from w, the computed ones from tabs (laid out
 * as the computed tables, dec 0, or as the decode tables, dec 1). */
static void point(const rp_model *m, int64_t l, const float *w, const float *tabs, int dec,
                  rp_attn_rel *rel)
{
    const rp_rel_desc *x = kind(m);
    memset(rel, 0, sizeof *rel);
    for (int t = 0; t < RP_TAB_COUNT; t++) {
        int i = giver(x, t);
        if (i < 0) continue;
        *rp_attn_rel_member(rel, t) = dec || computed(&x->params[i])
                                          ? tabs + table_offset(m, t, dec)
                                          : w + m->lp[l].rel[i];
    }
}

void rpm_rel_forward(rp_model *m, int64_t l, int64_t T, rp_attn_rel *rel)
{
    const rp_rel_desc *x = kind(m);
    const float *w = m->params->data;
    for (int t = 0; t < RP_TAB_COUNT; t++) {
        int i = giver(x, t);
        if (i >= 0 && computed(&x->params[i]))
            project(m, l, &x->params[i], i, w, T, m->la[l].rel_tab + table_offset(m, t, 0));
    }
    point(m, l, w, m->la[l].rel_tab, 0, rel);
}

void rpm_rel_tables(const rp_model *m, int64_t l, rp_attn_rel *rel)
{
    point(m, l, m->params->data, m->la[l].rel_tab, 0, rel);
}

void rpm_rel_grad_begin(rp_model *m, int64_t l, int64_t T, rp_attn_rel_grad *g)
{
    const rp_rel_desc *x = kind(m);
    float *gr = m->grads->data;
    memset(g, 0, sizeof *g);
    for (int t = 0; t < RP_TAB_COUNT; t++) {
        int i = giver(x, t);
        if (i < 0) continue;
        const rp_rel_param *p = &x->params[i];
        float **slot = rp_attn_rel_grad_member(g, t);
        if (!computed(p)) {
            *slot = gr + m->lp[l].rel[i];
            continue;
        }
        *slot = m->drel + table_offset(m, t, 0);
        memset(*slot, 0, (size_t)(computed_rows(m, p, T) * m->cfg.d_model) * sizeof(float));
    }
}

void rpm_rel_grad_end(rp_model *m, int64_t l, int64_t T)
{
    const rp_rel_desc *x = kind(m);
    const float *w = m->params->data;
    float *gr = m->grads->data;
    int64_t C = m->cfg.d_model;
    for (int t = 0; t < RP_TAB_COUNT; t++) {
        int i = giver(x, t);
        if (i < 0 || !computed(&x->params[i])) continue;
        const rp_rel_param *p = &x->params[i];
        int64_t o = m->lp[l].rel[i];
        const float *dtab = m->drel + table_offset(m, t, 0);
        if (p->use == RP_PARAM_PROJ_SIN) /* E = R W^T: dW += dE^T R (R is fixed) */
            rp_linear_backward(NULL, gr + o, NULL, dtab, m->xl_table, w + o, T, C, C);
        else /* E = P W^T: dW += dE^T P, dP += dE W */
            rp_linear_backward(gr + m->off_rel, gr + o, NULL, dtab, w + m->off_rel, w + o,
                               computed_rows(m, p, T), C, C);
    }
}

/* Layer l's part of dec_rel (the kind reads tables). */
static float *dec_part(const rp_model *m, int64_t l)
{
    return m->dec_rel + l * rpm_rel_dec_floats(m);
}

void rpm_rel_decode_refresh(rp_model *m)
{
    const rp_rel_desc *x = kind(m);
    if (!rpm_rel_dec_floats(m)) return;
    const float *w = m->params->data;
    for (int64_t l = 0; l < m->cfg.layers; l++) {
        float *d = dec_part(m, l);
        for (int t = 0; t < RP_TAB_COUNT; t++) {
            int i = giver(x, t);
            if (i < 0) continue;
            const rp_rel_param *p = &x->params[i];
            float *dst = d + table_offset(m, t, 1);
            if (computed(p))
                project(m, l, p, i, w, m->cfg.seq_len, dst);
            else
                memcpy(dst, w + m->lp[l].rel[i], (size_t)table_floats(m, t, 1) * sizeof(float));
        }
    }
}

void rpm_rel_decode_tables(const rp_model *m, int64_t l, rp_attn_rel *rel)
{
    if (!rpm_rel_dec_floats(m)) {
        memset(rel, 0, sizeof *rel);
        return;
    }
    point(m, l, m->params->data, dec_part(m, l), 1, rel);
}
