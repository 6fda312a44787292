/* A model's own frequency scheme and positions (core/model/model.h: rp_model_set_freq,
 * rp_model_set_positions): the user tables and positions, checked against the model's scheme and
 * copied; the learned frequencies restart from them (model_freq.c). */
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
    RP_TRY(rp_model_cfg_check_freq(&m->cfg, &f));
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
    if (pos) f.axes = *axes;
    RP_TRY(rp_model_cfg_check_positions(&m->cfg, &f, pos, rows));
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
