/* A model's own frequency scheme and positions (core/model/model.h: rp_model_set_freq,
 * rp_model_set_positions): the user tables and positions, checked against the model's scheme and
 * copied; the learned frequencies restart from them (model_freq.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_impl.h"

rp_status rp_model_set_freq(rp_model *m, const double *theta, int64_t n_theta,
                            const double *angles, int64_t rows, int64_t n_angles)
{
    rp_rope_freq f = rp_model_cfg_freq(&m->cfg);
    f.axes = m->freq.axes; /* the positions' (rp_model_set_positions) */
    if (theta) f.theta = theta, f.n_theta = n_theta;
    if (angles) f.angles = angles, f.rows = rows, f.n_angles = n_angles;
    if (angles && m->cfg.learn_freq)
        return rp_error(RP_ERR_ARG, "%s", rp_pe_msgs[RP_MSG_ANGLES_LEARN].text);
    if ((theta || angles) && (!m->pe.rotate || m->linear))
        return rp_pe_need_rotary(RP_MSG_FREQ, m->pe.pe, m->linear);
    RP_TRY(rp_pe_scheme_check_freq(&m->pe, &f, m->cfg.seq_len - 1, m->cfg.seq_len - 1));
    double *copy = NULL;
    int64_t n = theta ? n_theta : angles ? rows * n_angles : 0;
    if (n) {
        copy = malloc((size_t)n * sizeof(double));
        if (!copy) return rp_error(RP_ERR_NOMEM, "cannot allocate the frequency table");
        memcpy(copy, theta ? theta : angles, (size_t)n * sizeof(double));
        if (theta) f.theta = copy;
        else f.angles = copy;
    }
    free(m->freq_table);
    m->freq_table = copy;
    m->freq = f;
    m->dec_rope_stale = 1;
    rpm_freq_reset(m); /* learn_freq: the parameter starts from the new scheme */
    return RP_OK;
}

const rp_rope_freq *rp_model_freq(const rp_model *m) { return &m->freq; }

rp_status rp_model_set_positions(rp_model *m, const rp_rope_axes *axes, const int64_t *pos,
                                 int64_t rows)
{
    rp_rope_freq f = m->freq;
    memset(&f.axes, 0, sizeof f.axes);
    if (pos) {
        if (!m->pe.rotate || m->linear)
            return rp_pe_need_rotary(RP_MSG_POSITIONS, m->pe.pe, m->linear);
        if (rows < m->cfg.seq_len) {
            static const char *const marks[] = {"{rows}", "{seq_len}"};
            char n[24], T[24];
            snprintf(n, sizeof n, "%lld", (long long)rows);
            snprintf(T, sizeof T, "%lld", (long long)m->cfg.seq_len);
            const char *values[] = {n, T};
            return rp_error_marks(RP_ERR_ARG, rp_pe_msgs[RP_MSG_POSITIONS_ROWS].text, marks,
                                  values, 2);
        }
        f.axes = *axes;
    }
    /* attention's checks of a call over the whole window */
    int64_t T = m->cfg.seq_len, qlast = T - 1, klast = T - 1;
    rp_attn_cfg a = rpm_attn_cfg(m, 0);
    a.freq = &f, a.pos = pos, a.pos_rows = rows;
    if (pos) RP_TRY(rp_attention_check_positions(&a, T, T, &qlast, &klast));
    RP_TRY(rp_pe_scheme_check_freq(&m->pe, &f, qlast, klast));
    int A = rp_rope_freq_axes(&f);
    int64_t *pcopy = NULL;
    double *mcopy = NULL;
    if (pos) {
        pcopy = malloc((size_t)(rows * A) * sizeof(int64_t));
        mcopy = f.axes.mix ? malloc((size_t)(A * f.axes.n_mix) * sizeof(double)) : NULL;
        if (!pcopy || (f.axes.mix && !mcopy)) {
            free(pcopy);
            free(mcopy);
            return rp_error(RP_ERR_NOMEM, "cannot allocate the positions");
        }
        memcpy(pcopy, pos, (size_t)(rows * A) * sizeof(int64_t));
        if (mcopy) memcpy(mcopy, f.axes.mix, (size_t)(A * f.axes.n_mix) * sizeof(double));
        f.axes.mix = mcopy;
    }
    free(m->pos_table);
    free(m->mix_table);
    m->pos_table = pcopy, m->pos_rows = pos ? rows : 0, m->mix_table = mcopy;
    m->freq = f;
    m->dec_rope_stale = 1;
    rpm_freq_reset(m); /* learn_freq: the parameter starts from the new scheme */
    return RP_OK;
}

const int64_t *rp_model_positions(const rp_model *m, int64_t *rows)
{
    if (rows) *rows = m->pos_rows;
    return m->pos_table;
}
