#include "pe.h"

#include <math.h>
#include <string.h>

/* The mode table: the one place that says what each mode does (pe.h). */
#define QK (RP_ROT_Q | RP_ROT_K)
static const rp_pe_mode modes[RP_PE_COUNT] = {
    /* name          absolute           rotate      rotary v_angle o_sign rel             linear */
    {"none",         RP_ABS_NONE,       0,          0,     0.0,    0,     RP_REL_NONE,    1},
    {"sinusoidal",   RP_ABS_SINUSOIDAL, 0,          0,     0.0,    0,     RP_REL_NONE,    1},
    {"learned",      RP_ABS_LEARNED,    0,          0,     0.0,    0,     RP_REL_NONE,    1},
    {"rope",         RP_ABS_NONE,       QK,         1,     1.0,    -1,    RP_REL_NONE,    1},
    {"roper",        RP_ABS_NONE,       RP_ROT_ALL, 1,     1.0,    -1,    RP_REL_NONE,    1},
    /* the labml code of 2022-05-31 .. 2024-06-20 rotated v twice: o_n = sum a R((2i-n)theta) v_i */
    {"roper_legacy", RP_ABS_NONE,       RP_ROT_ALL, 1,     2.0,    -1,    RP_REL_NONE,    0},
    {"shaw",         RP_ABS_NONE,       0,          0,     0.0,    0,     RP_REL_SHAW,    0},
    {"xl",           RP_ABS_NONE,       0,          0,     0.0,    0,     RP_REL_XL,      0},
    {"t5",           RP_ABS_NONE,       0,          0,     0.0,    0,     RP_REL_T5,      0},
    {"deberta",      RP_ABS_NONE,       0,          0,     0.0,    0,     RP_REL_DEBERTA, 0},
    {"alibi",        RP_ABS_NONE,       0,          0,     0.0,    0,     RP_REL_ALIBI,   0},
};
#undef QK

const char *const rp_pe_names[RP_PE_COUNT + 1] = {
    "none", "sinusoidal", "learned", "rope", "roper", "roper_legacy",
    "shaw", "xl",         "t5",      "deberta", "alibi", NULL};

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
    return m && m->rotate != 0;
}

static const char rot_letters[4] = {'q', 'k', 'v', 'o'};

int rp_rotate_from_name(const char *name)
{
    if (!name || !*name) return -1;
    int mask = 0;
    for (const char *c = name; *c; c++) {
        int bit = 0;
        for (int i = 0; i < 4; i++)
            if (*c == rot_letters[i]) bit = 1 << i;
        if (!bit || (mask & bit)) return -1;
        mask |= bit;
    }
    return mask;
}

const char *rp_rotate_name(int rotate, char buf[5])
{
    int n = 0;
    for (int i = 0; i < 4; i++)
        if (rotate & (1 << i)) buf[n++] = rot_letters[i];
    buf[n] = '\0';
    return buf;
}

rp_status rp_pe_scheme_init(rp_pe_scheme *s, rp_pe pe, int rotate, const int64_t d_rot[4],
                            double base, rp_pairing pairing)
{
    memset(s, 0, sizeof *s);
    const rp_pe_mode *m = rp_pe_mode_of(pe);
    if (!m) return rp_error(RP_ERR_ARG, "unknown pe %d", (int)pe);
    if (rotate & ~RP_ROT_ALL) return rp_error(RP_ERR_ARG, "rotate mask %d is not a subset of qkvo", rotate);
    if (rotate && !m->rotary)
        return rp_error(RP_ERR_ARG, "rotate needs a rotary pe (rope, roper or roper_legacy), not %s",
                        m->name);
    s->pe = pe;
    s->absolute = m->absolute;
    s->rotate = rotate ? rotate : m->rotate;
    s->d_rot_q = s->rotate & RP_ROT_Q ? d_rot[RP_PLACE_Q] : 0;
    s->d_rot_k = s->rotate & RP_ROT_K ? d_rot[RP_PLACE_K] : 0;
    s->d_rot_v = s->rotate & RP_ROT_V ? d_rot[RP_PLACE_V] : 0;
    s->d_rot_o = s->rotate & RP_ROT_O ? d_rot[RP_PLACE_O] : 0;
    s->v_angle = m->v_angle;
    s->o_sign = m->o_sign;
    s->base = base;
    s->pairing = pairing;
    s->rel = m->rel;
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

rp_status rp_pe_scheme_check_freq(const rp_pe_scheme *s, const rp_rope_freq *f, int64_t qlast,
                                  int64_t klast)
{
    if (rp_rope_freq_is_plain(f)) return RP_OK;
    if (!s->rotate)
        return rp_error(RP_ERR_ARG, "scaling, xpos, freq and angles need a rotary pe (rope, "
                                    "roper or roper_legacy), not %s", rp_pe_name(s->pe));
    RP_TRY(rp_rope_freq_check(f));
    const struct {
        int64_t d, last;
        const char *name;
    } use[4] = {{s->d_rot_q, qlast, "d_rot_q"}, {s->d_rot_k, klast, "d_rot_k"},
                {s->d_rot_v, klast, "d_rot_v"}, {s->d_rot_o, qlast, "d_rot_o"}};
    for (int i = 0; i < 4; i++)
        if (use[i].d) RP_TRY(rp_rope_freq_check_use(f, use[i].d, use[i].last, use[i].name));
    return RP_OK;
}
