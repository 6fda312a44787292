#include "pe.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The mode table: the one place that says what each mode does (pe.h). One row per mode, in enum
 * order: name, absolute table, default rotate mask, rotary, v_angle, o_sign, relative kind,
 * linear attention, the checkpoint format version that stores it. roper_legacy is the labml code
 * of 2022-05-31 .. 2024-06-20, which rotated v twice: o_n = sum a R((2i-n)theta) v_i. */
#define QK (RP_ROT_Q | RP_ROT_K)
#define MODES(X)                                                                 \
    X("none",         RP_ABS_NONE,       0,          0, 0.0, 0,  RP_REL_NONE,    1, 1) \
    X("sinusoidal",   RP_ABS_SINUSOIDAL, 0,          0, 0.0, 0,  RP_REL_NONE,    1, 1) \
    X("learned",      RP_ABS_LEARNED,    0,          0, 0.0, 0,  RP_REL_NONE,    1, 1) \
    X("rope",         RP_ABS_NONE,       QK,         1, 1.0, -1, RP_REL_NONE,    1, 1) \
    X("roper",        RP_ABS_NONE,       RP_ROT_ALL, 1, 1.0, -1, RP_REL_NONE,    1, 1) \
    X("roper_legacy", RP_ABS_NONE,       RP_ROT_ALL, 1, 2.0, -1, RP_REL_NONE,    0, 1) \
    X("shaw",         RP_ABS_NONE,       0,          0, 0.0, 0,  RP_REL_SHAW,    0, 2) \
    X("xl",           RP_ABS_NONE,       0,          0, 0.0, 0,  RP_REL_XL,      0, 2) \
    X("t5",           RP_ABS_NONE,       0,          0, 0.0, 0,  RP_REL_T5,      0, 2) \
    X("deberta",      RP_ABS_NONE,       0,          0, 0.0, 0,  RP_REL_DEBERTA, 0, 2) \
    X("alibi",        RP_ABS_NONE,       0,          0, 0.0, 0,  RP_REL_ALIBI,   0, 2)

const char *const rp_pe_absolute_names[4] = {"none", "sinusoidal", "learned", NULL};

#define ROW(name, ...) {name, __VA_ARGS__},
#define NAME(name, ...) name,
static const rp_pe_mode modes[] = {MODES(ROW)};
const char *const rp_pe_names[RP_PE_COUNT + 1] = {MODES(NAME) NULL};
_Static_assert(sizeof modes / sizeof modes[0] == RP_PE_COUNT, "one row per rp_pe value");
#undef ROW
#undef NAME
#undef MODES
#undef QK

/* The kind table: the relative terms of each kind, its tables' rows, the config keys it reads
 * and the model's parameters (pe.h; the formulas: core/nn/attention.h). */
static const rp_rel_desc kinds[RP_REL_COUNT] = {
    [RP_REL_NONE] = {.name = "", .scale_terms = 1},
    /* Shaw et al. 2018 (RoFormer eq. 5): Ek = a^K and Ev = a^V, rows clip(i - n, -k, k) + k */
    [RP_REL_SHAW] = {
        .name = "shaw", .terms = RP_TERM_EK | RP_TERM_EV, .ek_rows = RP_ROWS_CLIP, .ek_sign = -1,
        .uses = RP_USES_CLIP, .scale_terms = 1,
        .sym = {[RP_TAB_EK] = "a^K", [RP_TAB_EV] = "a^V"},
        .nparams = 2,
        .params = {{"attn.rel_k", RP_PARAM_TABLE, RP_TAB_EK, RP_DIM_CLIP1, RP_DIM_DK,
                    RP_RI_UNIFORM},
                   {"attn.rel_v", RP_PARAM_TABLE, RP_TAB_EV, RP_DIM_CLIP1, RP_DIM_DK,
                    RP_RI_UNIFORM}}},
    /* Transformer-XL, Dai et al. 2019 (RoFormer eq. 7): Ek = W_kR R per distance, u and v (w) */
    [RP_REL_XL] = {
        .name = "xl", .terms = RP_TERM_EK | RP_TERM_UW, .ek_rows = RP_ROWS_DISTANCE, .ek_sign = 1,
        .ek_heads = 1, .scale_terms = 1,
        .sym = {[RP_TAB_EK] = "W_kR R", [RP_TAB_U] = "u", [RP_TAB_W] = "v"},
        .nparams = 3,
        .params = {{"attn.rel_proj.weight", RP_PARAM_PROJ_SIN, RP_TAB_EK, RP_DIM_C, RP_DIM_C,
                    RP_RI_UNIFORM},
                   {"attn.rel_u", RP_PARAM_TABLE, RP_TAB_U, RP_DIM_HEADS, RP_DIM_DK, RP_RI_ZEROS},
                   {"attn.rel_w", RP_PARAM_TABLE, RP_TAB_W, RP_DIM_HEADS, RP_DIM_DK, RP_RI_ZEROS}}},
    /* T5, Raffel et al. 2020: a learned bias per head and bucket */
    [RP_REL_T5] = {
        .name = "t5", .terms = RP_TERM_BUCKET, .uses = RP_USES_BUCKETS, .scale_terms = 1,
        .sym = {[RP_TAB_BIAS] = "bias"},
        .nparams = 1,
        .params = {{"attn.rel_bias", RP_PARAM_TABLE, RP_TAB_BIAS, RP_DIM_HEADS, RP_DIM_BUCKETS,
                    RP_RI_ZEROS}}},
    /* DeBERTa, He et al. 2020 (RoFormer eq. 10): c2p K^r rows k + delta, p2c Q^r rows k - delta,
     * both projections of the shared P, scores scaled by 1/sqrt(3 d_k) */
    [RP_REL_DEBERTA] = {
        .name = "deberta", .terms = RP_TERM_EK | RP_TERM_EQ, .ek_rows = RP_ROWS_CLIP2, .ek_sign = 1,
        .ek_heads = 1,
        .eq_rows = RP_ROWS_CLIP2, .eq_sign = -1, .uses = RP_USES_CLIP, .scale_terms = 3,
        .sym = {[RP_TAB_EK] = "K^r", [RP_TAB_EQ] = "Q^r"},
        .nparams = 3,
        .params = {{"rel.weight", RP_PARAM_SHARED, RP_TAB_EK, RP_DIM_CLIP2, RP_DIM_C, RP_RI_NORMAL},
                   {"attn.rel_q_proj.weight", RP_PARAM_PROJ_SHARED, RP_TAB_EQ, RP_DIM_C, RP_DIM_C,
                    RP_RI_UNIFORM},
                   {"attn.rel_k_proj.weight", RP_PARAM_PROJ_SHARED, RP_TAB_EK, RP_DIM_C, RP_DIM_C,
                    RP_RI_UNIFORM}}},
    /* ALiBi, Press et al. 2022: fixed slopes, no parameters */
    [RP_REL_ALIBI] = {.name = "alibi", .terms = RP_TERM_SLOPE, .scale_terms = 1},
};

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

const rp_rel_desc *rp_rel_of(rp_rel_kind kind)
{
    if ((int)kind < 0 || (int)kind >= (int)RP_REL_COUNT) return NULL;
    return &kinds[kind];
}

int rp_rel_tables(const rp_rel_desc *x)
{
    static const int tables[][2] = {
        {RP_TERM_EK, 1 << RP_TAB_EK}, {RP_TERM_EQ, 1 << RP_TAB_EQ}, {RP_TERM_EV, 1 << RP_TAB_EV},
        {RP_TERM_UW, 1 << RP_TAB_U | 1 << RP_TAB_W}, {RP_TERM_BUCKET, 1 << RP_TAB_BIAS}};
    int mask = 0;
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
        if (x->terms & tables[i][0]) mask |= tables[i][1];
    return mask;
}

rp_status rp_rel_cfg_check(rp_pe pe, const rp_rel_cfg *r, int causal)
{
    const rp_pe_mode *m = rp_pe_mode_of(pe);
    int uses = m ? rp_rel_of(m->rel)->uses : 0;
    if ((uses & RP_USES_CLIP) && (r->clip < 1 || r->clip > RP_REL_MAX_CLIP))
        return rp_error(RP_ERR_ARG, "rel_clip %lld must be in 1..%d", (long long)r->clip,
                        RP_REL_MAX_CLIP);
    if (!(uses & RP_USES_BUCKETS)) return RP_OK;
    int64_t nb = r->buckets, lo = causal ? nb / 2 + 1 : nb / 4 + 1;
    if (nb < 2 || nb > RP_REL_MAX_BUCKETS)
        return rp_error(RP_ERR_ARG, "rel_buckets %lld must be in 2..%d", (long long)nb,
                        RP_REL_MAX_BUCKETS);
    if (!causal && nb < 4)
        return rp_error(RP_ERR_ARG, "rel_buckets %lld must be in 4..%d for pe %s without the "
                                    "causal mask (it halves them)",
                        (long long)nb, RP_REL_MAX_BUCKETS, m->name);
    if (r->max_distance >= lo && r->max_distance <= RP_I32_MAX) return RP_OK;
    static const char *const marks[] = {"{rel_max_distance}", "{lo}", "{hi}"};
    char v[3][24];
    snprintf(v[0], sizeof v[0], "%lld", (long long)r->max_distance);
    snprintf(v[1], sizeof v[1], "%lld", (long long)lo);
    snprintf(v[2], sizeof v[2], "%lld", (long long)RP_I32_MAX);
    const char *values[] = {v[0], v[1], v[2]};
    return rp_error_marks(RP_ERR_ARG, RP_REL_DISTANCE_WHY, marks, values, 3);
}

int64_t rp_rel_clip_rows(rp_rel_rows rows, int64_t k)
{
    return rows == RP_ROWS_CLIP ? 2 * k + 1 : rows == RP_ROWS_CLIP2 ? 2 * k : 0;
}

/* The dims table (pe.h): name, the size it is a multiple of, times, plus. */
static const rp_rel_dim_desc rel_dims[] = {
    [RP_DIM_CLIP1] = {"clip1", "rel_clip", 2, 1}, [RP_DIM_CLIP2] = {"clip2", "rel_clip", 2, 0},
    [RP_DIM_DK] = {"d_k", "d_k", 1, 0},           [RP_DIM_C] = {"d_model", "d_model", 1, 0},
    [RP_DIM_HEADS] = {"heads", "heads", 1, 0},    [RP_DIM_BUCKETS] = {"buckets", "rel_buckets", 1, 0},
};
_Static_assert(sizeof rel_dims / sizeof rel_dims[0] == RP_DIM_COUNT, "one row per rp_rel_dim");

const rp_rel_dim_desc *rp_rel_dim_of(rp_rel_dim d)
{
    return (unsigned)d < RP_DIM_COUNT ? &rel_dims[d] : NULL;
}

int64_t rp_rel_dim_size(rp_rel_dim d, int64_t clip, int64_t d_k, int64_t d_model, int64_t heads,
                        int64_t buckets)
{
    const rp_rel_dim_desc *r = rp_rel_dim_of(d);
    if (!r) return 0;
    static const char *const of[] = {"rel_clip", "d_k", "d_model", "heads", "rel_buckets"};
    const int64_t size[] = {clip, d_k, d_model, heads, buckets};
    for (int i = 0; i < 5; i++)
        if (strcmp(r->of, of[i]) == 0) return r->times * size[i] + r->plus;
    return 0;
}

const char *rp_join_names(char *buf, size_t n, const char *const *names, int count, int values)
{
    size_t at = 0;
    if (n) buf[0] = '\0';
    for (int i = 0; i < count && at < n; i++) {
        const char *sep = i == 0 ? "" : i == count - 1 ? " or " : ", ";
        int w = values ? snprintf(buf + at, n - at, "%s%s (%d)", sep, names[i], i)
                       : snprintf(buf + at, n - at, "%s%s", sep, names[i]);
        if (w < 0) break;
        at += (size_t)w;
    }
    return buf;
}

const char *rp_pe_list(char *buf, size_t n, int rotary, int linear, int uses)
{
    const char *names[RP_PE_COUNT];
    int count = 0;
    for (int p = 0; p < (int)RP_PE_COUNT; p++) {
        const rp_pe_mode *m = &modes[p];
        if ((rotary && !m->rotary) || (linear && !m->linear) ||
            (uses && !(kinds[m->rel].uses & uses)))
            continue;
        names[count++] = m->name;
    }
    return rp_join_names(buf, n, names, count, 0);
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

rp_status rp_pe_need_rotary(rp_pe_msg need, rp_pe pe, int linear)
{
    static const char *const what[] = {
        [RP_MSG_ROTATE_OPTION] = "option 'rotate' needs" RP_PE_NEEDS_ROTARY ", got pe '{pe}'",
        [RP_MSG_ROTATE] = "rotate needs" RP_PE_NEEDS_ROTARY ", not {pe}",
        [RP_MSG_POSITIONS_OPTION] = "option 'positions' needs" RP_PE_NEEDS_ROTARY ", got pe '{pe}'",
        [RP_MSG_SCHEME_FREQ] = "scaling, xpos, freq and angles need" RP_PE_NEEDS_ROTARY
                               ", not {pe}",
        [RP_MSG_FREQ] = "freq and angles need" RP_PE_NEEDS_SOFTMAX,
        [RP_MSG_POSITIONS] = "positions need" RP_PE_NEEDS_SOFTMAX,
    };
    static const char *const marks[] = {"{list}", "{pe}", "{linear}"};
    char list[128];
    const char *values[] = {rp_pe_list(list, sizeof list, 1, 0, 0), rp_pe_name(pe),
                            linear ? RP_PE_WITH_LINEAR : ""};
    return rp_error_marks(RP_ERR_ARG, what[need], marks, values, 3);
}

rp_status rp_pe_rotate_check(rp_pe pe, int rotate, int option)
{
    const rp_pe_mode *m = rp_pe_mode_of(pe);
    if (!rotate || (m && m->rotary)) return RP_OK;
    return rp_pe_need_rotary(option ? RP_MSG_ROTATE_OPTION : RP_MSG_ROTATE, pe, 0);
}

rp_status rp_pe_scheme_init(rp_pe_scheme *s, const rp_pe_cfg *pe_cfg, const int64_t d_rot[4])
{
    memset(s, 0, sizeof *s);
    rp_pe pe = pe_cfg->mode;
    int rotate = pe_cfg->rotate;
    const rp_pe_mode *m = rp_pe_mode_of(pe);
    if (!m) return rp_error(RP_ERR_ARG, "unknown pe %d", (int)pe);
    if (rotate & ~RP_ROT_ALL) return rp_error(RP_ERR_ARG, "rotate mask %d is not a subset of qkvo", rotate);
    RP_TRY(rp_pe_rotate_check(pe, rotate, 0));
    s->pe = pe;
    s->absolute = m->absolute;
    s->rotate = rotate ? rotate : m->rotate;
    s->d_rot_q = s->rotate & RP_ROT_Q ? d_rot[RP_PLACE_Q] : 0;
    s->d_rot_k = s->rotate & RP_ROT_K ? d_rot[RP_PLACE_K] : 0;
    s->d_rot_v = s->rotate & RP_ROT_V ? d_rot[RP_PLACE_V] : 0;
    s->d_rot_o = s->rotate & RP_ROT_O ? d_rot[RP_PLACE_O] : 0;
    s->v_angle = m->v_angle;
    s->o_sign = m->o_sign;
    s->base = pe_cfg->base;
    s->pairing = pe_cfg->pairing;
    s->rel = m->rel;
    return RP_OK;
}

/* The placements' widths as messages name them, in RP_PLACE_* order. */
static const char *const width_names[4] = {"d_rot_q", "d_rot_k", "d_rot_v", "d_rot_o"};

rp_status rp_pe_scheme_check(const rp_pe_scheme *s)
{
    const int64_t d_rot[4] = {s->d_rot_q, s->d_rot_k, s->d_rot_v, s->d_rot_o};
    rp_pe_cfg c = {.mode = s->pe, .rotate = s->rotate}; /* what the derived fields depend on */
    rp_pe_scheme want;
    RP_TRY(rp_pe_scheme_init(&want, &c, d_rot));
    char rot[5];
    if (want.rotate != s->rotate || want.absolute != s->absolute ||
        want.v_angle != s->v_angle || want.o_sign != s->o_sign || want.rel != s->rel)
        return rp_error(RP_ERR_ARG, "the scheme of pe %s is not resolved (rotate '%s'; build it "
                        "with rp_pe_scheme_init)", rp_pe_name(s->pe),
                        rp_rotate_name(s->rotate, rot));
    const char *rotated = s->rotate ? rp_rotate_name(s->rotate, rot) : "nothing";
    for (int i = 0; i < 4; i++)
        if (d_rot[i] && !(s->rotate & 1 << i)) /* RP_ROT_Q, _K, _V, _O */
            return rp_error(RP_ERR_ARG, "%s %lld is set but pe %s rotates %s (a placement not "
                            "rotated has width 0)", width_names[i], (long long)d_rot[i],
                            rp_pe_name(s->pe), rotated);
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

int64_t rp_pe_scheme_half(const rp_pe_scheme *s)
{
    int64_t d[4] = {s->d_rot_q, s->d_rot_k, s->d_rot_v, s->d_rot_o}, half = 0;
    for (int i = 0; i < 4; i++) half = d[i] / 2 > half ? d[i] / 2 : half;
    return half;
}

rp_status rp_pe_scheme_check_freq(const rp_pe_scheme *s, const rp_rope_freq *f, int64_t qlast,
                                  int64_t klast)
{
    if (rp_rope_freq_is_plain(f)) return RP_OK;
    if (!s->rotate) return rp_pe_need_rotary(RP_MSG_SCHEME_FREQ, s->pe, 0);
    RP_TRY(rp_rope_freq_check(f));
    const int64_t d[4] = {s->d_rot_q, s->d_rot_k, s->d_rot_v, s->d_rot_o};
    const int64_t last[4] = {qlast, klast, klast, qlast};
    for (int i = 0; i < 4; i++)
        if (d[i]) RP_TRY(rp_rope_freq_check_use(f, d[i], last[i], width_names[i]));
    return RP_OK;
}
