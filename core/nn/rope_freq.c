#include "rope_freq.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "checked.h"

const char *const rp_yarn_ramp_names[RP_YARN_RAMP_COUNT + 1] = {"rotations", "dims", "dims_exact",
                                                                NULL};
const char *const rp_axes_names[RP_AXES_COUNT + 1] = {"axial", "sections", "mixed", NULL};

int rp_rope_freq_is_plain(const rp_rope_freq *f)
{
    return !f || (f->scaling == RP_SCALING_NONE && f->xpos == 0.0 && !f->theta && !f->angles &&
                  f->axes.n <= 1 && f->axes.map == RP_AXES_AXIAL);
}

int rp_rope_freq_axes(const rp_rope_freq *f)
{
    return f && f->axes.n > 1 ? f->axes.n : 1;
}

/* The first non-finite entry of a[0 .. n), or -1. */
static int64_t first_bad(const double *a, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(a[i])) return i;
    return -1;
}

/* ---- the own tables' words (rope_freq.h: rp_freq_owns) ---- */

const rp_freq_own rp_freq_owns[RP_OWN_COUNT] = {
    [RP_OWN_FREQ] = {"freq", NULL, "frequency", "frequencies", NULL, NULL, "freq holds",
                     "frequencies", 0},
    [RP_OWN_ANGLES] = {"angles", "position", "angle", "angles", "an angle table (the angles",
                       "freq and angles exclude each other (give one)", "angles hold",
                       "per position", 1},
    [RP_OWN_MIX] = {"mix", "axis", "frequency", "frequencies", "a mix matrix (its frequencies",
                    "freq and mix exclude each other (the mix matrix holds the frequencies)",
                    "mix holds", "pairs per axis", 0},
};

/* The own table t of f: its entries (NULL when f has none), rows and pairs per row. */
static const double *own_table(const rp_rope_freq *f, rp_freq_own_id t, int64_t *rows,
                               int64_t *cols)
{
    switch (t) {
    case RP_OWN_FREQ: *rows = 1, *cols = f->n_theta; return f->theta;
    case RP_OWN_ANGLES: *rows = f->rows, *cols = f->n_angles; return f->angles;
    case RP_OWN_MIX: *rows = f->axes.n, *cols = f->axes.n_mix; return f->axes.mix;
    case RP_OWN_COUNT: break;
    }
    *rows = *cols = 0;
    return NULL;
}

/* Own table t of f (given): not empty, no scaling beside it when it is final, every entry finite
 * (the message gives the first bad one). */
static rp_status check_table(const rp_rope_freq *f, rp_freq_own_id t)
{
    const rp_freq_own *o = &rp_freq_owns[t];
    int64_t rows, cols;
    const double *a = own_table(f, t, &rows, &cols);
    if (rows < 1 || cols < 1) return rp_error(RP_ERR_ARG, "%s must not be empty", o->key);
    if (o->final && f->scaling != RP_SCALING_NONE)
        return rp_error(RP_ERR_ARG, "scaling %s does not apply to %s are final; scale them "
                        "yourself)", rp_scaling_names[f->scaling], o->final);
    int64_t i = first_bad(a, rows * cols);
    if (i >= 0 && o->row)
        return rp_error(RP_ERR_ARG, "%s: %s %lld, pair %lld has %s %g; %s must be finite", o->key,
                        o->row, (long long)(i / cols), (long long)(i % cols), o->entry, a[i],
                        o->entries);
    if (i >= 0)
        return rp_error(RP_ERR_ARG, "%s: pair %lld has %s %g; %s must be finite", o->key,
                        (long long)(i % cols), o->entry, a[i], o->entries);
    return RP_OK;
}

/* The axes part of rp_rope_freq_check. */
static rp_status check_axes(const rp_rope_freq *f)
{
    const rp_rope_axes *a = &f->axes;
    if (a->n < 0 || a->n > RP_MAX_AXES)
        return rp_error(RP_ERR_ARG, "axes: 1 to %d axes expected, got %d", RP_MAX_AXES, a->n);
    if ((int)a->map < 0 || a->map >= RP_AXES_COUNT)
        return rp_error(RP_ERR_ARG, "unknown axes map %d", (int)a->map);
    const char *name = rp_axes_names[a->map];
    if (a->n == 0 && (a->map != RP_AXES_AXIAL || a->mix))
        return rp_error(RP_ERR_ARG, "axes %s needs vector positions (axes.n 0 is a scalar "
                        "position)", name);
    for (int i = 0; i < RP_MAX_AXES; i++) {
        if (a->sections[i] != 0 && (a->map != RP_AXES_SECTIONS || i >= a->n))
            return rp_error(RP_ERR_ARG, "sections: axis %d of %d has %lld pairs with axes %s "
                            "(sections apply to axes sections, one per axis)", i, a->n,
                            (long long)a->sections[i], name);
        if (a->sections[i] < 0)
            return rp_error(RP_ERR_ARG, "sections: axis %d has %lld pairs; a count must be >= 0",
                            i, (long long)a->sections[i]);
    }
    if (a->mix && a->map != RP_AXES_MIXED)
        return rp_error(RP_ERR_ARG, "mix is given with axes %s (it is the frequency matrix of "
                        "axes mixed)", name);
    if (!a->mix && a->map == RP_AXES_MIXED)
        return rp_error(RP_ERR_ARG, "axes %s needs its frequency matrix mix", name);
    if (a->mix) {
        if (f->theta && a->n_mix >= 1)
            return rp_error(RP_ERR_ARG, "%s", rp_freq_owns[RP_OWN_MIX].with_freq);
        RP_TRY(check_table(f, RP_OWN_MIX));
    }
    if (a->n > 1) {
        /* what is a function of one scalar position */
        if (rp_scaling_of(f->scaling)->per_position)
            return rp_error(RP_ERR_ARG, "scaling %s (its factor grows with the position) needs "
                            "scalar positions; these have %d axes", rp_scaling_names[f->scaling],
                            a->n);
        if (f->xpos > 0.0)
            return rp_error(RP_ERR_ARG, "xpos (its decay runs along one position) needs scalar "
                            "positions; these have %d axes", a->n);
        if (f->angles)
            return rp_error(RP_ERR_ARG, "angles (a table of one position per row) needs scalar "
                            "positions; these have %d axes", a->n);
    }
    return RP_OK;
}

/* ---- the scalar rules (rope_freq.h: rp_freq_rules) ---- */

const char *const rp_freq_rule_kinds[RP_FREQ_RULE_COUNT + 1] = {"min", "min2", "below", "name",
                                                                NULL};

#define AT(field, key) #field, NULL, #key, NULL, offsetof(rp_rope_freq, field), 0
#define AT2(a, b) #a, #b, #a, #b, offsetof(rp_rope_freq, a), offsetof(rp_rope_freq, b)
#define LEN RP_READS_LEN
#define YARN RP_READS_YARN
#define LLAMA3 RP_READS_LLAMA3
/* kind, fields, keys, reads, lo, lo_open, names, why */
const rp_freq_rule rp_freq_rules[] = {
    {RP_FREQ_RULE_MIN, AT(factor, scaling_factor), 0, 0.0, 1, NULL,
     "{A} must be a finite number > 0, got {a}"},
    {RP_FREQ_RULE_MIN, AT(orig_len, orig_len), LEN, 1.0, 0, NULL,
     "{A} (the original context length of scaling {scaling}) must be >= 1, got {a}"},
    {RP_FREQ_RULE_MIN, AT(attention_factor, attention_factor), 0, 0.0, 0, NULL,
     "{A} must be a finite number >= 0 (0: the scaling's own), got {a}"},
    {RP_FREQ_RULE_NAME, AT(yarn_ramp, yarn_ramp), YARN, 0.0, 0, rp_yarn_ramp_names,
     "unknown {A} {a}"},
    {RP_FREQ_RULE_MIN2, AT2(yarn_alpha, yarn_beta), YARN, 0.0, 0, NULL,
     "{A} and {B} must be finite and >= 0, got {a} and {b}"},
    {RP_FREQ_RULE_BELOW, AT2(yarn_alpha, yarn_beta), YARN, 0.0, 0, NULL,
     "{A} {a} must be below {B} {b} (YaRN's ramp runs from the first to the second)"},
    {RP_FREQ_RULE_MIN2, AT2(low_freq_factor, high_freq_factor), LLAMA3, 0.0, 0, NULL,
     "{A} and {B} must be finite and >= 0, got {a} and {b}"},
    {RP_FREQ_RULE_BELOW, AT2(low_freq_factor, high_freq_factor), LLAMA3, 0.0, 0, NULL,
     "{A} {a} must be below {B} {b}"},
    {RP_FREQ_RULE_MIN, AT(xpos, xpos), 0, 0.0, 0, NULL,
     "{A} (xPos gamma) must be a finite number >= 0 (0: off), got {a}"},
    {RP_FREQ_RULE_MIN, AT(xpos_scale_base, xpos_scale_base), 0, 0.0, 1, NULL,
     "{A} must be a finite number > 0, got {a}"},
};
const int rp_freq_nrules = (int)(sizeof rp_freq_rules / sizeof rp_freq_rules[0]);
#undef AT
#undef AT2
#undef LEN
#undef YARN
#undef LLAMA3

const rp_freq_rule *rp_freq_rule_bound(size_t at)
{
    for (int i = 0; i < rp_freq_nrules; i++) {
        const rp_freq_rule *r = &rp_freq_rules[i];
        if (r->a_at == at && (r->kind == RP_FREQ_RULE_MIN || r->kind == RP_FREQ_RULE_MIN2))
            return r;
    }
    return NULL;
}

/* The double (MIN, MIN2, BELOW) or the int (NAME) at offset at of f. */
static double num_at(const rp_rope_freq *f, size_t at)
{
    if (at == offsetof(rp_rope_freq, orig_len)) return (double)f->orig_len; /* the one int64 */
    double v;
    memcpy(&v, (const char *)f + at, sizeof v);
    return v;
}

static int int_at(const rp_rope_freq *f, size_t at)
{
    int v;
    memcpy(&v, (const char *)f + at, sizeof v);
    return v;
}

int rp_freq_rule_holds(const rp_freq_rule *r, const rp_rope_freq *f)
{
    switch (r->kind) {
    case RP_FREQ_RULE_MIN:
    case RP_FREQ_RULE_MIN2: {
        double a = num_at(f, r->a_at);
        return isfinite(a) && (r->lo_open ? a > r->lo : a >= r->lo) &&
               (r->kind == RP_FREQ_RULE_MIN || isfinite(num_at(f, r->b_at)));
    }
    case RP_FREQ_RULE_BELOW: return num_at(f, r->a_at) < num_at(f, r->b_at);
    case RP_FREQ_RULE_NAME: {
        int v = int_at(f, r->a_at), n = 0;
        while (r->names[n]) n++;
        return v >= 0 && v < n;
    }
    case RP_FREQ_RULE_COUNT: break;
    }
    return 0;
}

rp_status rp_freq_rule_error(const rp_freq_rule *r, const rp_rope_freq *f, const char *A,
                             const char *B)
{
    static const char *const marks[] = {"{a}", "{b}", "{scaling}", "{A}", "{B}"};
    char a[32], b[32];
    if (r->kind == RP_FREQ_RULE_NAME) snprintf(a, sizeof a, "%d", int_at(f, r->a_at));
    else snprintf(a, sizeof a, "%g", num_at(f, r->a_at));
    snprintf(b, sizeof b, "%g", r->b ? num_at(f, r->b_at) : 0.0);
    const char *values[] = {a, b, rp_scaling_names[f->scaling], A ? A : r->ka,
                            B ? B : (r->kb ? r->kb : "")};
    return rp_error_marks(RP_ERR_ARG, r->why, marks, values, 5);
}

int rp_freq_rule_applies(const rp_freq_rule *r, rp_rope_scaling s)
{
    return !r->reads || (rp_scaling_of(s)->reads & r->reads) != 0;
}

/* The scalar part of rp_rope_freq_check: the rows that apply to f's scaling, in order. */
static rp_status check_rules(const rp_rope_freq *f)
{
    for (int i = 0; i < rp_freq_nrules; i++) {
        const rp_freq_rule *r = &rp_freq_rules[i];
        if (rp_freq_rule_applies(r, f->scaling) && !rp_freq_rule_holds(r, f))
            return rp_freq_rule_error(r, f, NULL, NULL);
    }
    return RP_OK;
}

rp_status rp_rope_freq_check(const rp_rope_freq *f)
{
    if (!f) return RP_OK;
    if ((int)f->scaling < 0 || f->scaling >= RP_SCALING_COUNT)
        return rp_error(RP_ERR_ARG, "unknown scaling %d", (int)f->scaling);
    RP_TRY(check_rules(f));
    if (f->theta && f->angles)
        return rp_error(RP_ERR_ARG, "%s", rp_freq_owns[RP_OWN_ANGLES].with_freq);
    if (f->theta) RP_TRY(check_table(f, RP_OWN_FREQ));
    if (f->angles) RP_TRY(check_table(f, RP_OWN_ANGLES));
    return check_axes(f);
}

rp_status rp_rope_freq_check_use(const rp_rope_freq *f, int64_t d_rot, int64_t last_pos,
                                 const char *what)
{
    if (!f) return RP_OK;
    int64_t half = d_rot / 2;
    /* each own table: pairs enough for the width, rows enough for the positions (angles) */
    for (int t = 0; t < RP_OWN_COUNT; t++) {
        const rp_freq_own *o = &rp_freq_owns[t];
        int64_t rows, cols;
        if (!own_table(f, (rp_freq_own_id)t, &rows, &cols)) continue;
        if (cols < half)
            return rp_error(RP_ERR_ARG, "%s %lld %s; %s %lld needs %lld", o->holds,
                            (long long)cols, o->per_row, what, (long long)d_rot, (long long)half);
        if (o->rows_are_positions && last_pos >= rows)
            return rp_error(RP_ERR_ARG, "%s positions 0..%lld; position %lld is asked", o->holds,
                            (long long)(rows - 1), (long long)last_pos);
    }
    const rp_rope_axes *a = &f->axes;
    if (a->map == RP_AXES_AXIAL && half < a->n)
        return rp_error(RP_ERR_ARG, "axes axial: %s %lld has %lld pairs, fewer than its %d axes",
                        what, (long long)d_rot, (long long)half, a->n);
    if (a->map == RP_AXES_SECTIONS) {
        char list[96];
        int len = 0;
        int64_t sum = 0;
        for (int i = 0; i < a->n; i++) {
            sum = rp_sat_add_i64(sum, a->sections[i]); /* >= 0 (rp_rope_freq_check) */
            len += snprintf(list + len, sizeof list - (size_t)len, "%s%lld", i ? ", " : "",
                            (long long)a->sections[i]);
        }
        if (sum != half)
            return rp_error(RP_ERR_ARG, "sections {%s} hold %lld pairs; %s %lld has %lld", list,
                            (long long)sum, what, (long long)d_rot, (long long)half);
    }
    return RP_OK;
}

#define TWO_PI 6.283185307179586476925286766559

/* The ramp gamma(r) of YaRN (and llama3): 0 below alpha, 1 above beta, linear between. */
static double ramp_gamma(double r, double alpha, double beta)
{
    if (r < alpha) return 0.0;
    if (r > beta) return 1.0;
    return (r - alpha) / (beta - alpha);
}

/* The pair index whose standard frequency turns r times in L: d_rot ln(L / (2 pi r)) /
 * (2 ln base). */
static double ramp_index(double r, double L, int64_t d_rot, double base)
{
    return (double)d_rot * log(L / (TWO_PI * r)) / (2.0 * log(base));
}

/* gamma of pair i under yarn_ramp "dims" or "dims_exact": 1 - clamp((i - lo) / (hi - lo), 0, 1)
 * with lo = i(beta) rounded down, hi = i(alpha) rounded up ("dims"), clamped to 0 and
 * d_rot - 1. */
static double dims_gamma(const rp_rope_freq *f, int64_t i, int64_t d_rot, double base)
{
    double lo = ramp_index(f->yarn_beta, (double)f->orig_len, d_rot, base);
    double hi = ramp_index(f->yarn_alpha, (double)f->orig_len, d_rot, base);
    if (f->yarn_ramp == RP_YARN_RAMP_DIMS) lo = floor(lo), hi = ceil(hi);
    lo = fmax(lo, 0.0);
    hi = fmin(hi, (double)(d_rot - 1));
    if (lo == hi) hi += 0.001;
    double x = ((double)i - lo) / (hi - lo);
    return 1.0 - fmin(fmax(x, 0.0), 1.0);
}

/* theta scaled by NTK's factor s on pair i. */
static double ntk(double t, double s, int64_t i, int64_t d_rot)
{
    return d_rot > 2 && s != 1.0 ? t * pow(s, -2.0 * (double)i / (double)(d_rot - 2)) : t;
}

/* Where pair i of a placement d_rot wide sits: its axis (-1: all, a mix matrix), and its index j
 * in the 1-D RoPE it belongs to and that RoPE's width (axial: its block's; otherwise i and
 * d_rot, the placement's). */
typedef struct {
    int axis;
    int64_t j, width;
} pair_site;

static pair_site site_of(const rp_rope_freq *f, int64_t i, int64_t d_rot)
{
    pair_site ps = {0, i, d_rot};
    int n = f ? f->axes.n : 0;
    if (n < 1 || (f->axes.map == RP_AXES_AXIAL && n == 1)) return ps;
    if (f->axes.map == RP_AXES_MIXED) {
        ps.axis = -1;
        return ps;
    }
    int64_t half = d_rot / 2, start = 0;
    for (int a = 0; a < n; a++) {
        int64_t w = f->axes.map == RP_AXES_SECTIONS ? f->axes.sections[a]
                                                    : half / n + (a < half % n ? 1 : 0);
        if (i < start + w || a == n - 1) {
            ps.axis = a;
            if (f->axes.map == RP_AXES_AXIAL) ps.j = i - start, ps.width = 2 * w;
            return ps;
        }
        start += w;
    }
    return ps;
}

/* ---- the scalings: their formulas and the table ---- */

/* dynamic NTK's factor at position p: s_p = max(1, s (p + 1) / L - (s - 1)). */
static double dynamic_factor(const rp_rope_freq *f, int64_t p)
{
    double s = f->factor;
    return fmax(1.0, s * ((double)p + 1.0) / (double)f->orig_len - (s - 1.0));
}

static double theta_none(const rp_rope_freq *f, double t, int64_t j, int64_t d_rot, double base,
                         int64_t p)
{
    return t;
}

static double theta_pi(const rp_rope_freq *f, double t, int64_t j, int64_t d_rot, double base,
                       int64_t p)
{
    return t / f->factor;
}

static double theta_ntk(const rp_rope_freq *f, double t, int64_t j, int64_t d_rot, double base,
                        int64_t p)
{
    return ntk(t, f->factor, j, d_rot);
}

/* YaRN: r = L / lambda = L |theta| / (2 pi), or the ramp in the pair index */
static double theta_yarn(const rp_rope_freq *f, double t, int64_t j, int64_t d_rot, double base,
                         int64_t p)
{
    double g = f->yarn_ramp == RP_YARN_RAMP_ROTATIONS
                   ? ramp_gamma((double)f->orig_len * fabs(t) / TWO_PI, f->yarn_alpha, f->yarn_beta)
                   : dims_gamma(f, j, d_rot, base);
    return (1.0 - g) * t / f->factor + g * t;
}

/* dynamic NTK: NTK with the factor of position p */
static double theta_dynamic(const rp_rope_freq *f, double t, int64_t j, int64_t d_rot,
                            double base, int64_t p)
{
    return ntk(t, dynamic_factor(f, p), j, d_rot);
}

static double theta_llama3(const rp_rope_freq *f, double t, int64_t j, int64_t d_rot,
                           double base, int64_t p)
{
    double g = ramp_gamma((double)f->orig_len * fabs(t) / TWO_PI, f->low_freq_factor,
                          f->high_freq_factor);
    return (1.0 - g) * t / f->factor + g * t;
}

/* YaRN's temperature: (0.1 ln s + 1)^2 for s > 1 */
static double score_yarn(const rp_rope_freq *f)
{
    if (!(f->factor > 1.0)) return 1.0;
    double m = 0.1 * log(f->factor) + 1.0;
    return m * m;
}

/* The scaling table (rope_freq.h), one row per scaling in code order: name, Hugging Face's
 * rope_type, the parameters it reads, the checkpoint format version that stores it, its theta,
 * per position, its own score factor. */
#define FL (RP_READS_FACTOR | RP_READS_LEN)
#define SCALINGS(X)                                                                \
    X("none",    "default", 0,                    1, theta_none,    0, NULL)       \
    X("pi",      "linear",  RP_READS_FACTOR,      3, theta_pi,      0, NULL)       \
    X("ntk",     NULL,      RP_READS_FACTOR,      3, theta_ntk,     0, NULL)       \
    X("yarn",    "yarn",    FL | RP_READS_YARN,   3, theta_yarn,    0, score_yarn) \
    X("dynamic", "dynamic", FL,                   4, theta_dynamic, 1, NULL)       \
    X("llama3",  "llama3",  FL | RP_READS_LLAMA3, 4, theta_llama3,  0, NULL)

#define ROW(name, ...) {name, __VA_ARGS__},
#define NAME(name, ...) name,
static const rp_scaling_desc scalings[] = {SCALINGS(ROW)};
const char *const rp_scaling_names[RP_SCALING_COUNT + 1] = {SCALINGS(NAME) NULL};
_Static_assert(sizeof scalings / sizeof scalings[0] == RP_SCALING_COUNT,
               "one row per rp_rope_scaling value");
#undef ROW
#undef NAME
#undef SCALINGS
#undef FL

/* (an unknown code, which rp_rope_freq_check refuses, reads as none) */
const rp_scaling_desc *rp_scaling_of(rp_rope_scaling s)
{
    return &scalings[(unsigned)s < RP_SCALING_COUNT ? s : RP_SCALING_NONE];
}

int rp_scaling_needs_len(rp_rope_scaling s) { return (rp_scaling_of(s)->reads & RP_READS_LEN) != 0; }

/* theta'_i of pair i at position p (only a per-position scaling reads p): the user theta[i],
 * else the standard one of pair ps.j of a RoPE ps.width wide; the scaling as for that RoPE. */
static double theta_of(const rp_rope_freq *f, int64_t i, pair_site ps, double base, int64_t p)
{
    int64_t j = ps.j, d_rot = ps.width;
    double t = f && f->theta ? f->theta[i] : pow(base, -2.0 * (double)j / (double)d_rot);
    return f ? rp_scaling_of(f->scaling)->theta(f, t, j, d_rot, base, p) : t;
}

void rp_rope_freq_theta(double *theta, const rp_rope_freq *f, int64_t d_rot, double base)
{
    for (int64_t i = 0; i < d_rot / 2; i++)
        theta[i] = theta_of(f, i, site_of(f, i, d_rot), base, 0);
}

void rp_rope_freq_pair_axes(int *axis, const rp_rope_freq *f, int64_t d_rot)
{
    for (int64_t i = 0; i < d_rot / 2; i++) axis[i] = site_of(f, i, d_rot).axis;
}

double rp_rope_freq_score_scale(const rp_rope_freq *f)
{
    if (!f) return 1.0;
    const rp_scaling_desc *sd = rp_scaling_of(f->scaling);
    if ((sd->reads & RP_READS_FACTOR) && f->attention_factor > 0.0)
        return f->attention_factor * f->attention_factor;
    return sd->score ? sd->score(f) : 1.0;
}

void rp_rope_freq_tables(float *cos_out, float *sin_out, const rp_rope_freq *f, int64_t d_rot,
                         double base, double c, int side, const int64_t *pos, int64_t offset,
                         int64_t n)
{
    int64_t half = d_rot / 2;
    int A = rp_rope_freq_axes(f);
    const double *ang = f ? f->angles : NULL, *mix = f ? f->axes.mix : NULL;
    int64_t n_mix = mix ? f->axes.n_mix : 0;
    double xg = f ? f->xpos : 0.0, sb = f ? f->xpos_scale_base : 1.0;
    /* a per-position scaling (dynamic): each position its own theta (beyond orig_len) */
    const rp_scaling_desc *sd = f ? rp_scaling_of(f->scaling) : NULL;
    int dyn = sd && sd->per_position;
    for (int64_t i = 0; i < half; i++) {
        pair_site ps = site_of(f, i, d_rot);
        int ax = ps.axis < 0 ? 0 : ps.axis; /* mixed: dyn and xPos need A = 1 */
        /* (per position: from position 0's; dynamic's is the unscaled theta, s_0 = 1 for
         * orig_len >= 1) */
        double theta0 = ang || mix ? 0.0 : theta_of(f, i, ps, base, 0), theta = theta0;
        double zeta = xg > 0.0 ? (2.0 * (double)i / (double)d_rot + xg) / (1.0 + xg) : 1.0;
        for (int64_t r = 0; r < n; r++) {
            int64_t p = pos ? pos[r * A + ax] : offset + r;
            if (dyn) theta = sd->theta(f, theta0, ps.j, ps.width, base, p);
            /* (c p) theta, as rp_rope_angles always computed it; a mix matrix: sum_a (c p_a)
             * W[a][i], its first term alone for one axis (the freq table's number, -0 kept) */
            double a;
            if (ang) {
                a = c * ang[p * f->n_angles + i];
            } else if (mix) {
                a = c * (double)p * mix[i];
                for (int b = 1; b < A; b++)
                    a += c * (double)(pos ? pos[r * A + b] : offset + r) * mix[b * n_mix + i];
            } else {
                a = c * (double)p * theta;
            }
            double m = xg > 0.0 ? pow(zeta, (double)side * (double)p / sb) : 1.0;
            cos_out[r * half + i] = (float)(m * cos(a));
            sin_out[r * half + i] = (float)(m * sin(a));
        }
    }
}
