/* The planners (plan.h): rp.attention's and rp.model's rules between the values a user wrote. */
#include "plan.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "checked.h"
#include "model_schema.h"

/* The largest magnitude of a position option (2^53: exact in a double). */
#define MAX_POS ((int64_t)1 << 53)

const char *const rp_attention_tables[RP_TAB_COUNT] = {RP_ATTENTION_TABLES};

/* A float as Lua 5.4 prints it (the messages quote numbers as the caller sees them): %.14g, and
 * ".0" when that reads as an integer (2.0, not 2; inf and nan as they are). */
static const char *lua_float(char buf[48], double v)
{
    int n = snprintf(buf, 44, "%.14g", v);
    if (n > 0 && n < 44 && buf[strspn(buf, "-0123456789")] == '\0') strcpy(buf + n, ".0");
    return buf;
}

rp_status rp_option_fraction_width(const char *key, double fraction, int64_t D,
                                   const char *Dname, int64_t *d_rot)
{
    char f[48];
    if (!(fraction > 0.0 && fraction <= 1.0))
        return rp_error(RP_ERR_ARG, "option '%s' must be in (0, 1], got %s", key,
                        lua_float(f, fraction));
    int64_t d = (int64_t)floor(fraction * (double)D);
    if (d < 2 || d % 2 != 0)
        return rp_error(RP_ERR_ARG, "d_rot must be %s, got %lld (from %s %s of %s = %lld)",
                        d < 2 ? "at least 2" : "even", (long long)d, key, lua_float(f, fraction),
                        Dname, (long long)D);
    *d_rot = d;
    return RP_OK;
}

rp_status rp_option_position(const char *key, int64_t v, int64_t min)
{
    if (v < min || v > MAX_POS)
        return rp_error(RP_ERR_ARG, "option '%s' must be between %s and 2^53, got %lld", key,
                        min == 0 ? "0" : "-2^53", (long long)v);
    return RP_OK;
}

rp_status rp_option_position_span(const char *from, int64_t first, int64_t n)
{
    /* first and n within 2^53 and 2^62 (the callers' checks): no overflow */
    if (n >= 1 && first + (n - 1) > MAX_POS)
        return rp_error(RP_ERR_ARG, "positions run from %s = %lld to %lld, past 2^53", from,
                        (long long)first, (long long)(first + (n - 1)));
    return RP_OK;
}

rp_status rp_option_rotate(rp_pe pe, int rotate)
{
    if (!rp_pe_mode_of(pe)) return rp_error(RP_ERR_ARG, "unknown pe %d", (int)pe);
    return rp_pe_rotate_check(pe, rotate, 1);
}

/* ---- rp.attention ---- */

rp_attn_request rp_attention_request_default(void)
{
    rp_attn_request r;
    memset(&r, 0, sizeof r);
    r.keys = rp_model_cfg_default(1); /* the relative and frequency keys' defaults too */
    r.keys.pe.mode = RP_PE_NONE;
    r.causal = 1;
    return r;
}

/* The positional scheme of the call (*s, the attention's cfg.scheme): the keys' pe (r->keys.pe),
 * the widths of the placements rotated (rotate, else the mode's own), each from its own fraction
 * when given, else the shared one (fraction_qk of D, fraction_v of Dv: the schema's placement
 * rows, rp_model_cfg_width_key). */
static rp_status plan_scheme(const rp_attn_request *r, rp_pe_scheme *s)
{
    const rp_model_cfg *c = &r->keys;
    RP_TRY(rp_option_rotate(c->pe.mode, c->pe.rotate));
    int rot = c->pe.rotate ? c->pe.rotate : rp_pe_mode_of(c->pe.mode)->rotate;
    int64_t d_rot[4] = {0, 0, 0, 0}; /* RP_PLACE_Q .. _O */
    for (int i = 0; i < 4; i++) {
        if (!(rot & 1 << i)) continue; /* RP_ROT_Q, _K, _V, _O */
        const rp_cfg_key *k = rp_model_cfg_width_key(c, &r->keys_given, 1 << i);
        int dv = (1 << i) & (RP_ROT_V | RP_ROT_O);
        RP_TRY(rp_option_fraction_width(k->name, rp_model_cfg_get_num(c, k), dv ? r->Dv : r->D,
                                        dv ? "Dv" : "D", &d_rot[i]));
    }
    return rp_pe_scheme_init(s, &c->pe, d_rot);
}

/* q_offset (given, else S - T), pos_offset and the relative keys within their option ranges. */
static rp_status plan_offsets(const rp_attn_request *r, rp_attn_cfg *cfg)
{
    if (r->given & RP_GIVEN_Q_OFFSET) {
        RP_TRY(rp_option_position("q_offset", r->q_offset, 0));
        cfg->q_offset = r->q_offset;
    } else if (r->S < r->T) {
        return rp_error(RP_ERR_ARG, "default q_offset = S - T = %lld is negative (T = %lld "
                                    "queries, S = %lld keys); pass option 'q_offset'",
                        (long long)(r->S - r->T), (long long)r->T, (long long)r->S);
    } else {
        cfg->q_offset = r->S - r->T;
    }
    RP_TRY(rp_option_position("pos_offset", r->pos_offset, 0));
    for (int i = 0; i < rp_model_cfg_nkeys; i++) /* the relative limits: rel's rows */
        if (rp_model_cfg_scope(&rp_model_cfg_keys[i]) == RP_CFG_SCOPE_REL)
            RP_TRY(rp_option_position(rp_model_cfg_keys[i].name,
                                      rp_model_cfg_get_int(&r->keys, &rp_model_cfg_keys[i]), 0));
    cfg->pos_offset = r->pos_offset;
    cfg->rel = r->keys.rel;
    return RP_OK;
}

/* Explicit positions: a rotary pe, not beside pos_offset, at least p->need rows. */
static rp_status plan_positions(const rp_attn_request *r, rp_attn_plan *p)
{
    const rp_attn_cfg *cfg = &p->cfg;
    p->need = cfg->q_offset + r->T > r->S ? cfg->q_offset + r->T : r->S;
    if (!r->pos) return RP_OK;
    if (!rp_pe_mode_of(cfg->scheme.pe)->rotary)
        return rp_pe_need_rotary(RP_MSG_POSITIONS_OPTION, cfg->scheme.pe, 0);
    if (r->given & RP_GIVEN_POS_OFFSET)
        return rp_error(RP_ERR_ARG, "give option 'pos_offset' or 'positions', not both (shift "
                                    "the positions instead)");
    if (r->pos_rows < p->need)
        return rp_error(RP_ERR_ARG, "option 'positions' holds %lld positions; this call reads "
                                    "%lld (keys 0..%lld, queries %lld..%lld)",
                        (long long)r->pos_rows, (long long)p->need, (long long)(r->S - 1),
                        (long long)cfg->q_offset, (long long)(cfg->q_offset + r->T - 1));
    return RP_OK;
}

/* The relative mode's limits where it reads them, and its tables: present where it reads them,
 * with their shapes (rp_attention_rel_shape), absent elsewhere. */
static rp_status plan_tables(const rp_attn_request *r, const rp_attn_cfg *cfg)
{
    const rp_rel_desc *x = rp_rel_of(cfg->scheme.rel);
    const char *pe = rp_pe_name(cfg->scheme.pe);
    RP_TRY(rp_rel_cfg_check(cfg->scheme.pe, &cfg->rel, cfg->causal)); /* the limits' one rule */
    char ws[RP_SHAPE_STR_LEN], gs[RP_SHAPE_STR_LEN];
    for (int i = 0; i < RP_TAB_COUNT; i++) {
        const rp_plan_table *t = &r->tables[i];
        int64_t want[3];
        int nd = rp_attention_rel_shape(cfg, i, r->T, r->S, r->H, r->D, r->Dv, want);
        if (!t->given && nd)
            return rp_error(RP_ERR_ARG, "option '%s' (%s's %s, %s) is required by pe '%s'",
                            rp_attention_tables[i], pe, x->sym[i],
                            rp_shape_str(ws, sizeof ws, nd, want), pe);
        if (!t->given) continue;
        if (!nd)
            return rp_error(RP_ERR_ARG, "option '%s' is not used by pe '%s'",
                            rp_attention_tables[i], pe);
        int ok = t->ndim == nd;
        for (int d = 0; ok && d < nd; d++) ok = t->shape[d] == want[d];
        if (!ok)
            return rp_error(RP_ERR_ARG, "option '%s' (%s's %s): expected %s, got %s",
                            rp_attention_tables[i], pe, x->sym[i],
                            rp_shape_str(ws, sizeof ws, nd, want),
                            rp_shape_str(gs, sizeof gs, t->ndim, t->shape));
    }
    return RP_OK;
}

/* The largest of the n entries at pos, 0 at least. */
static int64_t largest(const int64_t *pos, int64_t n)
{
    int64_t hi = 0;
    for (int64_t i = 0; i < n; i++) hi = pos[i] > hi ? pos[i] : hi;
    return hi;
}

rp_status rp_attention_plan(const rp_attn_request *r, rp_attn_plan *p)
{
    memset(p, 0, sizeof *p);
    p->arg = 4;
    rp_attn_cfg *cfg = &p->cfg;
    cfg->causal = r->causal;
    cfg->scale = r->given & RP_GIVEN_SCALE ? r->scale : 1.0 / sqrt((double)r->D);
    RP_TRY(plan_scheme(r, &cfg->scheme));
    RP_TRY(plan_offsets(r, cfg));
    if (r->T > RP_I32_MAX || r->S > RP_I32_MAX || r->D > RP_I32_MAX || r->Dv > RP_I32_MAX) {
        p->arg = 1;
        return rp_error(RP_ERR_ARG, "attention sizes T, S, D, Dv must be at most 2^31-1");
    }
    int64_t out_sizes[4] = {r->B, r->T, r->H, r->Dv}, att_sizes[4] = {r->B, r->H, r->T, r->S}, n;
    if (!rp_shape_span(4, out_sizes, RP_MAX_NUMEL, &n) ||
        !rp_shape_span(4, att_sizes, RP_MAX_NUMEL, &n)) {
        p->arg = 2;
        return rp_error(RP_ERR_ARG, "attention weights [B x H x T x S] would be too large");
    }
    RP_TRY(plan_positions(r, p));
    RP_TRY(plan_tables(r, cfg));
    cfg->pos = r->pos, cfg->pos_rows = r->pos ? r->pos_rows : 0;
    /* the largest position each side reads: of the rows the queries and the keys read */
    int64_t A = r->axes > 0 ? r->axes : 1;
    p->pos_n = r->pos ? p->need * A : 0;
    p->qlast = cfg->pos_offset + cfg->q_offset + r->T - 1, p->klast = cfg->pos_offset + r->S - 1;
    if (r->pos) {
        p->qlast = largest(r->pos + cfg->q_offset * A, r->T * A);
        p->klast = largest(r->pos, r->S * A);
    }
    if (!r->pos && p->qlast > p->klast) /* the option positions' entries are within 2^53 */
        RP_TRY(rp_option_position_span("pos_offset + q_offset", cfg->pos_offset + cfg->q_offset,
                                       r->T));
    else if (!r->pos)
        RP_TRY(rp_option_position_span("pos_offset", cfg->pos_offset, r->S));
    p->rows = (p->qlast > p->klast ? p->qlast : p->klast) + 1;
    p->half = rp_pe_scheme_half(&cfg->scheme);
    /* the frequency scalars need something rotated; then the keys that do nothing */
    if (r->freq) RP_TRY(rp_pe_scheme_check_freq(&cfg->scheme, r->freq, p->qlast, p->klast));
    rp_model_cfg view = r->keys;
    rp_model_cfg_normalise(&view);
    return rp_model_cfg_check_used(&view);
}

rp_status rp_attention_plan_freq(rp_attn_plan *p, const rp_rope_freq *f)
{
    RP_TRY(rp_pe_scheme_check_freq(&p->cfg.scheme, f, p->qlast, p->klast));
    /* each placement's width passed: what is left is an entry below an angle table's start */
    if (p->cfg.pos) RP_TRY(rp_freq_plan_positions(f, 2 * p->half, p->cfg.pos, 0, p->pos_n));
    p->cfg.freq = rp_rope_freq_is_plain(f) ? NULL : f;
    return RP_OK;
}

/* ---- the rotary calls' frequency options ---- */

rp_status rp_freq_plan_scalars(const rp_model_cfg *view, int orig_len_given, int hf,
                               double default_orig_len, rp_rope_freq *f)
{
    const rp_rope_freq *v = &view->freq;
    if (orig_len_given && v->orig_len < 1)
        return rp_error(RP_ERR_ARG, "option 'orig_len' must be an integer >= 1, got %lld",
                        (long long)v->orig_len);
    if (rp_scaling_needs_len(v->scaling) && v->orig_len < 1 && !(default_orig_len >= 1.0))
        return rp_error(RP_ERR_ARG, "option 'orig_len' (the original context length) is "
                                    "required with scaling \"%s\"%s",
                        rp_scaling_names[v->scaling],
                        hf ? " (rope_scaling's original_max_position_embeddings)" : "");
    *f = rp_model_cfg_freq(view);
    if (v->orig_len < 1) f->orig_len = (int64_t)default_orig_len;
    return RP_OK;
}

int64_t rp_freq_plan_rows(const int64_t *pos, int64_t offset, int64_t n)
{
    int64_t hi = !pos && n > 0 ? offset + n - 1 : 0;
    for (int64_t r = 0; pos && r < n; r++) hi = pos[r] > hi ? pos[r] : hi;
    return (hi > 0 ? hi : 0) + 1;
}

rp_status rp_freq_plan_positions(const rp_rope_freq *f, int64_t d_rot, const int64_t *pos,
                                 int64_t offset, int64_t n)
{
    if (n < 1) return RP_OK;
    /* the first position below 0 (of offset + r: offset itself, when it is) */
    for (int64_t r = 0; r < (pos ? n : 1) && f->angles; r++) {
        int64_t at = pos ? pos[r] : offset;
        if (at < 0)
            return rp_error(RP_ERR_ARG, "position %lld is below 0, where the angle table starts",
                            (long long)at);
    }
    return rp_rope_freq_check_use(f, d_rot, rp_freq_plan_rows(pos, offset, n) - 1, "d_rot");
}

/* ---- rp.linear_attention ---- */

rp_linattn_request rp_linear_attention_request_default(void)
{
    rp_linattn_request r;
    memset(&r, 0, sizeof r);
    r.keys = rp_model_cfg_default(1);
    r.keys.pe.mode = RP_PE_NONE;
    r.eps = RP_LINATTN_EPS;
    return r;
}

rp_status rp_linear_attention_plan(const rp_linattn_request *r, rp_linattn_plan *p)
{
    memset(p, 0, sizeof *p);
    p->arg = 4;
    const rp_model_cfg *c = &r->keys;
    rp_linattn_cfg *cfg = &p->cfg;
    *cfg = rp_linattn_cfg_default(c->pe.mode, r->D, r->Dv);
    cfg->placement = c->linear_rope;
    const rp_pe_mode *mode = rp_pe_mode_of(c->pe.mode);
    if (!mode || !mode->linear)
        return rp_error(RP_ERR_ARG, "pe %d does not run with linear attention", (int)c->pe.mode);
    RP_TRY(rp_linattn_check_eps(r->eps)); /* eps's one rule */
    cfg->eps = r->eps;
    /* the mode's own placements: q and k fraction_qk of D, v and the output fraction_v of Dv */
    int rot = mode->rotate;
    int64_t d_qk = 0, d_v = 0;
    if (rot & RP_ROT_Q)
        RP_TRY(rp_option_fraction_width("fraction_qk", c->pe.fraction_qk, r->D, "D", &d_qk));
    if (rot & RP_ROT_V)
        RP_TRY(rp_option_fraction_width("fraction_v", c->pe.fraction_v, r->Dv, "Dv", &d_v));
    rp_pe_cfg own = c->pe;
    own.rotate = 0;
    const int64_t d_rot[4] = {d_qk, d_qk, d_v, d_v};
    RP_TRY(rp_pe_scheme_init(&cfg->scheme, &own, d_rot));
    RP_TRY(rp_option_position("q_offset", r->q_offset, 0));
    RP_TRY(rp_option_position_span("q_offset", r->q_offset, r->T));
    cfg->q_offset = r->q_offset;
    rp_model_cfg view = *c;
    view.attention = RP_ATTN_LINEAR;
    rp_model_cfg_normalise(&view);
    RP_TRY(rp_model_cfg_check_used(&view));
    if (r->T > RP_I32_MAX || r->D > RP_I32_MAX || r->Dv > RP_I32_MAX) {
        p->arg = 1;
        return rp_error(RP_ERR_ARG, "attention sizes T, D, Dv must be at most 2^31-1");
    }
    int64_t w_sizes[4] = {r->B, r->H, r->T, r->T}, n;
    if (!rp_shape_span(4, w_sizes, RP_MAX_NUMEL, &n)) {
        p->arg = 2;
        return rp_error(RP_ERR_ARG, "weights [B x H x T x T] would be too large");
    }
    return RP_OK;
}

/* ---- rp.model ---- */

rp_status rp_model_cfg_written(rp_model_cfg *cfg)
{
    RP_TRY(rp_option_rotate(cfg->pe.mode, cfg->pe.rotate));
    /* one model, one config: the mode's own placements and the shared fractions are stored as
     * "not set", so equal models have equal configs (and checkpoints) */
    rp_model_cfg_normalise(cfg);
    return RP_OK;
}

rp_status rp_model_cfg_plan(rp_model_cfg *cfg, rp_model_plan *p)
{
    RP_TRY(rp_model_cfg_written(cfg));
    RP_TRY(rp_model_cfg_check(cfg));
    RP_TRY(rp_model_cfg_check_used(cfg));
    if (p) {
        p->scheme = rp_model_cfg_scheme(cfg);
        p->half = rp_pe_scheme_half(&p->scheme);
        p->rows = cfg->seq_len;
        p->freq = rp_model_cfg_freq(cfg);
    }
    return RP_OK;
}
