#include "pe.h"

#include <math.h>
#include <string.h>

/* The mode table: the one place that says what each mode rotates (pe.h). */
static const rp_pe_mode modes[RP_PE_COUNT] = {
    /* name            absolute           rot_qk v_angle o_sign linear */
    {"none",           RP_ABS_NONE,       0,     0.0,    0,     1},
    {"sinusoidal",     RP_ABS_SINUSOIDAL, 0,     0.0,    0,     1},
    {"learned",        RP_ABS_LEARNED,    0,     0.0,    0,     1},
    {"rope",           RP_ABS_NONE,       1,     0.0,    0,     1},
    {"roper",          RP_ABS_NONE,       1,     1.0,    -1,    1},
    /* the labml code of 2022-05-31 .. 2024-06-20 rotated v twice: o_n = sum a R((2i-n)theta) v_i */
    {"roper_legacy",   RP_ABS_NONE,       1,     2.0,    -1,    0},
};

const char *const rp_pe_names[RP_PE_COUNT + 1] = {"none", "sinusoidal", "learned", "rope",
                                                  "roper", "roper_legacy", NULL};

const rp_pe_mode *rp_pe_mode_of(rp_pe pe)
{
    if ((int)pe < 0 || (int)pe >= (int)RP_PE_COUNT) return NULL;
    return &modes[pe];
}

const char *rp_pe_name(rp_pe pe)
{
    const rp_pe_mode *m = rp_pe_mode_of(pe);
    return m ? m->name : "?";
}

int rp_pe_from_name(const char *name)
{
    if (!name) return -1;
    for (int i = 0; i < (int)RP_PE_COUNT; i++)
        if (strcmp(name, modes[i].name) == 0) return i;
    return -1;
}

int rp_pe_rotates(rp_pe pe)
{
    const rp_pe_mode *m = rp_pe_mode_of(pe);
    return m && (m->rot_qk || m->v_angle != 0.0 || m->o_sign != 0);
}

rp_status rp_pe_scheme_init(rp_pe_scheme *s, rp_pe pe, int64_t d_rot_qk, int64_t d_rot_v,
                            double base, rp_pairing pairing)
{
    memset(s, 0, sizeof *s);
    const rp_pe_mode *m = rp_pe_mode_of(pe);
    if (!m) return rp_error(RP_ERR_ARG, "unknown pe %d", (int)pe);
    s->pe = pe;
    s->absolute = m->absolute;
    s->d_rot_qk = m->rot_qk ? d_rot_qk : 0;
    s->d_rot_v = m->v_angle != 0.0 ? d_rot_v : 0;
    s->d_rot_o = m->o_sign != 0 ? d_rot_v : 0;
    s->v_angle = m->v_angle;
    s->o_sign = m->o_sign;
    s->base = base;
    s->pairing = pairing;
    return RP_OK;
}

rp_status rp_pe_fraction_width(const char *what, double fraction, int64_t d_k, int64_t *d_rot)
{
    if (!(fraction > 0.0 && fraction <= 1.0))
        return rp_error(RP_ERR_ARG, "%s %g must be in (0, 1]", what, fraction);
    int64_t d = (int64_t)floor(fraction * (double)d_k);
    if (d < 2 || d % 2 != 0)
        return rp_error(RP_ERR_ARG, "%s %g gives d_rot %lld for d_k %lld; it must be even and >= 2",
                        what, fraction, (long long)d, (long long)d_k);
    *d_rot = d;
    return RP_OK;
}
