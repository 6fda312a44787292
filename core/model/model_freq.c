/* Learned frequencies (learn_freq, core/model/model.h): the rotary frequencies as the parameter
 * "rope.freq" [RP_MAX_AXES x half] (half = d_rot/2 of the widest rotated placement), trained with
 * the rest, the way rotary-embedding-torch's learned_freq and RoPE-Mixed (Heo et al. 2024) train
 * theirs.
 *
 * Row 0 holds theta_i, the frequency of pair i for 1-D positions, axial and sections (pair i
 * turns by p theta_i, p the position on its axis); with axes mixed rows 0 .. A-1 hold the matrix
 * W (pair i turns by sum_a p_a W[a][i]). The attention reads them through freq_eff: the model's
 * scheme (m->freq) with theta (n_theta = half) or the mix matrix (n_mix = half) pointing at
 * freq_buf, the parameter in double, refreshed before every forward pass and every decoded
 * sequence.
 *
 * The gradient needs no attention kernel of its own. Every rotation the attention applies is
 * y = m R(phi) x on the pairs (a, b) of a placement (y_a = m (x_a c - x_b s), y_b = m (x_b c +
 * x_a s)), so dL/dphi = g_b y_a - g_a y_b with g = dL/dy, and because a rotation keeps the
 * cross product u_a w_b - u_b w_a of two pairs, with dx = m R(phi)^T g this is
 *
 *     dL/dphi = x_a dx_b - x_b dx_a,
 *
 * the input of the rotation and its gradient, which the attention backward gives for q, k and v
 * (their unrotated inputs and gradients), and likewise out_a dout_b - out_b dout_a for RoPER's
 * output rotation (out rotated, dout its gradient). The angle of pair i at position p is
 * sgn p theta_i (sgn: 1 for q and k, v_angle for v, o_sign for o) or sgn sum_a p_a W[a][i], so
 * the sums of dL/dphi over the batch and the heads at each position give dtheta_i and dW by one
 * more sum over the positions. */
#include <string.h>

#include "model_impl.h"

int64_t rpm_freq_half(const rp_model *m)
{
    const rp_pe_scheme *s = &m->pe;
    int64_t d = s->d_rot_q;
    if (s->d_rot_k > d) d = s->d_rot_k;
    if (s->d_rot_v > d) d = s->d_rot_v;
    if (s->d_rot_o > d) d = s->d_rot_o;
    return d / 2;
}

/* The parameter's rows in use: A with a mix matrix, else 1. */
static int rows_used(const rp_model *m)
{
    return m->freq.axes.mix ? rp_rope_freq_axes(&m->freq) : 1;
}

void rpm_freq_refresh(rp_model *m)
{
    if (m->off_freq < 0) return;
    int64_t half = m->freq_half, n = (int64_t)rows_used(m) * half;
    const float *w = m->params->data + m->off_freq;
    int changed = 0; /* bit for bit (a -0 for a 0 changes a table's sign of zero) */
    for (int64_t i = 0; i < n; i++) {
        double v = (double)w[i];
        changed |= memcmp(&v, &m->freq_buf[i], sizeof v) != 0;
        m->freq_buf[i] = v;
    }
    m->freq_eff = m->freq;
    if (m->freq.axes.mix) {
        m->freq_eff.axes.mix = m->freq_buf, m->freq_eff.axes.n_mix = half;
    } else {
        m->freq_eff.theta = m->freq_buf, m->freq_eff.n_theta = half;
    }
    if (changed) m->dec_rope_stale = 1; /* (a new scheme marks them itself) */
}

void rpm_freq_reset(rp_model *m)
{
    if (m->off_freq < 0) return;
    int64_t half = m->freq_half;
    float *w = m->params->data + m->off_freq;
    memset(w, 0, (size_t)(RP_MAX_AXES * half) * sizeof(float));
    const rp_rope_axes *ax = &m->freq.axes;
    if (ax->mix) {
        for (int a = 0; a < rp_rope_freq_axes(&m->freq); a++)
            for (int64_t i = 0; i < half; i++) w[a * half + i] = (float)ax->mix[a * ax->n_mix + i];
    } else {
        /* the scheme's theta_i (the model's own frequencies, or the standard ones of the widest
         * placement; axial: each block's own) in freq_buf's first row, then rounded */
        rp_rope_freq_theta(m->freq_buf, &m->freq, 2 * half, m->pe.base);
        for (int64_t i = 0; i < half; i++) w[i] = (float)m->freq_buf[i];
    }
    rpm_freq_refresh(m);
}

/* Position of row t on axis a of A: the model's positions, or t on every axis. */
static double pos_of(const rp_model *m, int A, int64_t t, int a)
{
    return m->pos_table ? (double)m->pos_table[t * A + a] : (double)t;
}

void rpm_freq_grad(rp_model *m, const float *qkv, const float *dqkv, const float *out,
                   const float *dout, int64_t B, int64_t T)
{
    if (m->off_freq < 0) return;
    const rp_pe_scheme *s = &m->pe;
    int64_t C = m->cfg.d_model, H = m->cfg.heads, dk = m->dk, half = m->freq_half;
    float *g = m->grads->data + m->off_freq;
    int A = rp_rope_freq_axes(&m->freq), mixed = m->freq.axes.mix != NULL;
    /* the placements: width, the factor of the angle, the rows and their gradients */
    const struct {
        int64_t d;
        double sgn;
        const float *x, *dx;
        int64_t ld;
    } pl[4] = {{s->d_rot_q, 1.0, qkv, dqkv, 3 * C},
               {s->d_rot_k, 1.0, qkv + C, dqkv + C, 3 * C},
               {s->d_rot_v, s->v_angle, qkv + 2 * C, dqkv + 2 * C, 3 * C},
               {s->d_rot_o, (double)s->o_sign, out, dout, C}};
    for (int k = 0; k < 4; k++) {
        int64_t h2 = pl[k].d / 2;
        if (!h2) continue;
        double *acc = m->freq_acc;
        memset(acc, 0, (size_t)(T * h2) * sizeof(double));
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < T; t++)
                for (int64_t hd = 0; hd < H; hd++) {
                    const float *x = pl[k].x + (b * T + t) * pl[k].ld + hd * dk;
                    const float *dx = pl[k].dx + (b * T + t) * pl[k].ld + hd * dk;
                    double *row = acc + t * h2;
                    for (int64_t i = 0; i < h2; i++) {
                        int64_t ia = s->pairing == RP_PAIR_INTERLEAVED ? 2 * i : i;
                        int64_t ib = s->pairing == RP_PAIR_INTERLEAVED ? 2 * i + 1 : i + h2;
                        row[i] += (double)x[ia] * (double)dx[ib] - (double)x[ib] * (double)dx[ia];
                    }
                }
        int *ax = m->freq_axis;
        rp_rope_freq_pair_axes(ax, &m->freq, pl[k].d);
        for (int a = 0; a < (mixed ? A : 1); a++)
            for (int64_t i = 0; i < h2; i++) {
                double sum = 0.0;
                for (int64_t t = 0; t < T; t++)
                    sum += pos_of(m, A, t, mixed ? a : ax[i]) * acc[t * h2 + i];
                g[a * half + i] += (float)(pl[k].sgn * sum);
            }
    }
}
