/* rp.rope.*, rp.attention, rp.matmul, rp.blas.* and rp.set_num_threads.
 *
 * Everything is validated before core runs, so that core only sees inputs it accepts: d_rot even
 * and in range, positions integral and bounded, option types and enum names, attention shapes,
 * and the int32 limits of sgemm. rp.attention reads its options into a request and leaves the
 * rules between them to core's planner (core/config/plan.h). Scratch arrays (positions, theta)
 * are Lua userdata, so raising never leaks. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "freq.h"
#include "modules.h"
#include "tensor_math.h"
#include "userdata.h"

/* 1 when a tensor of these count sizes (>= 0) can exist: the rule of rp_tensor_new (the sizes
 * other than 0 multiply to at most RP_MAX_NUMEL; a 0 does not lift the limit). */
static int numel_ok(int count, const int64_t *sizes)
{
    int64_t n;
    return rp_shape_span(count, sizes, RP_MAX_NUMEL, &n);
}

/* A d_rot at arg: an even integer >= 2 (and <= max when max > 0). */
static int64_t check_d_rot(lua_State *L, int arg, lua_Integer d, int64_t max)
{
    if (d < 2 || (max > 0 && d > max)) {
        if (max > 0)
            lrp_argerror(L, arg, "d_rot must be between 2 and D, got %I (D = %I)", (LUAI_UACINT)d,
                         (LUAI_UACINT)max);
        lrp_argerror(L, arg, "d_rot must be >= 2, got %I", (LUAI_UACINT)d);
    }
    if (d % 2 != 0) lrp_argerror(L, arg, "d_rot must be even, got %I", (LUAI_UACINT)d);
    if (d > 2 * RP_MAX_NUMEL) lrp_argerror(L, arg, "d_rot is too large, got %I", (LUAI_UACINT)d);
    return (int64_t)d;
}

/* d_rot = floor(fraction * D) from option key (1 when absent), by core's rule
 * (rp_option_fraction_width); raises naming the option table at idx. */
static int64_t d_rot_from_fraction(lua_State *L, int idx, const char *key, int64_t D,
                                   const char *Dname)
{
    int64_t d = 0;
    if (rp_option_fraction_width(key, lrp_optnumber(L, idx, key, 1.0), D, Dname, &d) != RP_OK)
        lrp_argerror(L, idx, "%s", rp_last_error());
    return d;
}

/* A rope base at option key: finite and > 0. */
static double opt_base(lua_State *L, int idx, const char *key)
{
    double base = lrp_optfinite(L, idx, key, RP_ROPE_BASE);
    if (!(base > 0.0)) {
        lua_pushnumber(L, (lua_Number)base);
        lrp_argerror(L, idx, "option '%s' must be > 0, got %s", key, lrp_describe(L, -1));
    }
    return base;
}

/* A pe option of linear attention: the names of the modes it supports (rp_pe_mode_of(pe)->linear),
 * in enum order; RP_PE_NONE when absent. */
static rp_pe opt_linear_pe(lua_State *L, int idx, const char *key)
{
    const char *names[RP_PE_COUNT + 1];
    rp_pe modes[RP_PE_COUNT];
    int n = 0;
    for (int pe = 0; pe < (int)RP_PE_COUNT; pe++)
        if (rp_pe_mode_of((rp_pe)pe)->linear) {
            modes[n] = (rp_pe)pe;
            names[n++] = rp_pe_name((rp_pe)pe);
        }
    names[n] = NULL;
    int i = lrp_optenum(L, idx, key, names, -1);
    return i < 0 ? RP_PE_NONE : modes[i];
}

/* An integer option in [min, 2^53]; min is 0 or -2^53 (rp_option_position). */
static int64_t opt_pos(lua_State *L, int idx, const char *key, int64_t def, int64_t min)
{
    int64_t v = (int64_t)lrp_optinteger(L, idx, key, def);
    if (rp_option_position(key, v, min) != RP_OK) lrp_argerror(L, idx, "%s", rp_last_error());
    return v;
}

/* ---- rp.rope ---- */

/* rp.rope.theta(d_rot[, base]): 1-D tensor of base^(-2i/d_rot), i = 0 .. d_rot/2-1. */
static int l_rope_theta(lua_State *L)
{
    int64_t d_rot = check_d_rot(L, 1, lrp_checkint(L, 1, "d_rot"), 0);
    double base = lua_isnoneornil(L, 2) ? RP_ROPE_BASE : lrp_checkfinite(L, 2, "base");
    if (!(base > 0.0)) return lrp_argerror(L, 2, "base must be > 0, got %f", (LUAI_UACNUMBER)base);
    int64_t half = d_rot / 2;
    double *theta = (double *)lua_newuserdatauv(L, (size_t)half * sizeof(double), 0);
    rp_tensor *out = lrp_newtensor(L);
    rp_status st = rp_tensor_new(out, 1, &half);
    if (st != RP_OK) return lrp_raise(L, st);
    rp_rope_theta(theta, d_rot, base);
    float *d = rp_tensor_data(out);
    for (int64_t i = 0; i < half; i++) d[i] = (float)theta[i];
    return 1;
}

/* rp.rope.angles(positions, d_rot[, opts]): cos, sin as [n x d_rot/2] (options: base, scale,
 * xpos_side, the frequency options and those of vector positions, bindings/freq.h). positions:
 * a count n (positions 0..n-1), a table or a 1-D tensor of positions, or vector positions ([n x
 * A] tensor, a list of lists). */
static int l_rope_angles(lua_State *L)
{
    static const char *const known[] = {"base", "scale", "xpos_side", LRP_FREQ_KEYS,
                                        LRP_AXES_KEYS, NULL};
    int64_t n = 0;
    const int64_t *pos = NULL;
    if (lua_type(L, 1) == LUA_TNUMBER) {
        lua_Integer c = lrp_checkint(L, 1, "positions (a count)");
        if (c < 0 || c > RP_MAX_NUMEL)
            return lrp_argerror(L, 1, "position count must be between 0 and 2^40, got %I",
                                (LUAI_UACINT)c);
        n = (int64_t)c;
    }
    int64_t d_rot = check_d_rot(L, 2, lrp_checkint(L, 2, "d_rot"), 0);
    lrp_checkopts(L, 3, known);
    double base = lrp_optbase(L, 3);
    double scale = lrp_optfinite(L, 3, "scale", 1.0);
    int side = lrp_optxposside(L, 3);
    lua_settop(L, 3);
    rp_rope_freq f;
    rp_model_cfg view = rp_model_cfg_default(1); /* pe rope: the frequency keys' rule */
    view.pe.base = base;
    lrp_optfreq(L, 3, &view, &f); /* slots 4, 5 */
    lrp_axes_opts ax;
    lrp_optaxes(L, 3, &ax); /* slot 6 */
    int A = 0;
    if (lua_type(L, 1) != LUA_TNUMBER) pos = lrp_read_positions(L, 1, 1, "positions", 0, &A, &n);
    lrp_axes_tables(L, 3, &ax, A, 1, d_rot / 2, !lua_isnil(L, 5), &f); /* (n: 0 .. n-1) */
    lrp_freq_tables(L, 3, 4, &f, rp_freq_plan_rows(pos, 0, n), d_rot / 2);
    if (rp_freq_plan_positions(&f, d_rot, pos, 0, n) != RP_OK)
        return lrp_argerror(L, 3, "%s", rp_last_error());
    lrp_check_used(L, 3, &view);
    int64_t shape[2] = {n, d_rot / 2};
    if (!numel_ok(2, shape)) return lrp_argerror(L, 2, "angles table would be too large");
    rp_tensor *c = lrp_newtensor(L);
    rp_status st = rp_tensor_new(c, 2, shape);
    if (st != RP_OK) return lrp_raise(L, st);
    rp_tensor *s = lrp_newtensor(L);
    st = rp_tensor_new(s, 2, shape);
    if (st != RP_OK) return lrp_raise(L, st);
    if (n > 0)
        rp_rope_freq_tables(rp_tensor_data(c), rp_tensor_data(s), &f, d_rot, base, scale, side,
                            pos, 0, n);
    return 2;
}

/* rp.rope.rotate(x, opts): x with the first d_rot features of its last dim rotated by position.
 * See docs/lua_api.md for the options. */
static int l_rope_rotate(lua_State *L)
{
    static const char *const known[] = {"base",   "pairing",   "sign",          "fraction",
                                        "d_rot",  "dim",       "offset",        "positions",
                                        "scale",  "xpos_side", LRP_FREQ_KEYS,   LRP_AXES_KEYS,
                                        NULL};
    /* a copy of x's shape for the checks: reading the options may run Lua code */
    const rp_tensor xs = *lrp_checktensor(L, 1), *x = &xs;
    char buf[RP_SHAPE_STR_LEN];
    if (x->ndim < 1)
        return lrp_argerror(L, 1, "expected x with at least 1 dim, got %s", lrp_shape_str(buf, x));
    lrp_checkopts(L, 2, known);
    lua_settop(L, 2);
    int64_t D = x->shape[x->ndim - 1];

    rp_rope_cfg cfg = rp_rope_cfg_default(D);
    cfg.base = lrp_optbase(L, 2);
    cfg.pairing = (rp_pairing)lrp_optenum(L, 2, "pairing", rp_pairing_names, cfg.pairing);
    lua_Integer sign = lrp_optinteger(L, 2, "sign", 1);
    if (sign != 1 && sign != -1)
        return lrp_argerror(L, 2, "option 'sign' must be 1 or -1, got %I", (LUAI_UACINT)sign);
    cfg.sign = (int)sign;
    if (lrp_hasopt(L, 2, "d_rot")) {
        lua_Integer d = lrp_optinteger(L, 2, "d_rot", 0);
        if (D < 2)
            return lrp_argerror(L, 1, "x has D = %I features, too few to rotate", (LUAI_UACINT)D);
        cfg.d_rot = check_d_rot(L, 2, d, D);
        (void)lrp_optnumber(L, 2, "fraction", 1.0); /* type-checked, overridden */
    } else {
        cfg.d_rot = d_rot_from_fraction(L, 2, "fraction", D, "D");
    }
    cfg.scale = lrp_optfinite(L, 2, "scale", 1.0);
    cfg.xpos_side = lrp_optxposside(L, 2);
    rp_rope_freq f;
    rp_model_cfg view = rp_model_cfg_default(1); /* pe rope: the frequency keys' rule */
    view.pe.base = cfg.base, view.pe.pairing = cfg.pairing;
    lrp_optfreq(L, 2, &view, &f); /* slots 3, 4 */
    lrp_axes_opts ax;
    lrp_optaxes(L, 2, &ax); /* slot 5 */

    /* the dim that holds positions */
    if (lrp_hasopt(L, 2, "dim")) {
        lua_Integer d = lrp_optinteger(L, 2, "dim", 0);
        int d0 = lrp_todim(d, x->ndim);
        if (d0 < 0)
            return lrp_argerror(L, 2, "option 'dim': dim %I out of range for %s%s", (LUAI_UACINT)d,
                                lrp_shape_str(buf, x), lrp_base_hint(d == 0));
        if (d0 == x->ndim - 1)
            return lrp_argerror(L, 2, "option 'dim': dim %I of %s is the feature dim, not a "
                                      "position dim",
                                (LUAI_UACINT)d, lrp_shape_str(buf, x));
        cfg.pos_dim = d0;
    } else if (x->ndim == 4) {
        cfg.pos_dim = 1;
    } else if (x->ndim == 3 || x->ndim == 2) {
        cfg.pos_dim = 0;
    } else if (x->ndim == 1) {
        cfg.pos_dim = -1;
    } else {
        return lrp_argerror(L, 2, "option 'dim' is needed for a %d-D x %s", x->ndim,
                            lrp_shape_str(buf, x));
    }
    int64_t npos = cfg.pos_dim >= 0 ? x->shape[cfg.pos_dim] : 1;

    /* positions: offset + t, or an explicit list */
    int has_pos = lrp_hasopt(L, 2, "positions");
    if (has_pos && lrp_hasopt(L, 2, "offset"))
        return lrp_argerror(L, 2, "give option 'offset' or 'positions', not both");
    cfg.offset = opt_pos(L, 2, "offset", 0, -LRP_MAX_POS);
    if (rp_option_position_span("offset", cfg.offset, npos) != RP_OK)
        return lrp_argerror(L, 2, "%s", rp_last_error());
    int A = 0;
    if (has_pos) {
        int64_t n = 0;
        lua_getfield(L, 2, "positions"); /* index 6 */
        const int64_t *p =
            lrp_read_positions(L, 2, 6, "option 'positions'", cfg.pos_dim < 0, &A, &n);
        if (n != npos && cfg.pos_dim < 0)
            return lrp_argerror(L, 2, "option 'positions' has %I entries, expected 1 (x is one "
                                      "vector %s)",
                                (LUAI_UACINT)n, lrp_shape_str(buf, x));
        if (n != npos)
            return lrp_argerror(L, 2, "option 'positions' has %I entries, expected %I (the size of "
                                      "dim %d of %s)",
                                (LUAI_UACINT)n, (LUAI_UACINT)npos, cfg.pos_dim + 1,
                                lrp_shape_str(buf, x));
        cfg.positions = p; /* the userdata stays on the stack during the call */
    }
    lrp_axes_tables(L, 2, &ax, A, cfg.positions != NULL, cfg.d_rot / 2, !lua_isnil(L, 4), &f);
    lrp_freq_tables(L, 2, 3, &f, rp_freq_plan_rows(cfg.positions, cfg.offset, npos),
                    cfg.d_rot / 2);
    if (rp_freq_plan_positions(&f, cfg.d_rot, cfg.positions, cfg.offset, npos) != RP_OK)
        return lrp_argerror(L, 2, "%s", rp_last_error());
    lrp_check_used(L, 2, &view);
    if (!rp_rope_freq_is_plain(&f)) cfg.freq = &f;
    rp_tensor *out = lrp_newtensor(L);
    rp_status st = rp_rope_rotate(out, lrp_checktensor(L, 1), &cfg);
    if (st != RP_OK) return lrp_raise(L, st);
    return 1;
}

/* rp.rope.sinusoidal(T, d[, {base=10000, offset=0}]): [T x d] Vaswani encodings. */
static int l_rope_sinusoidal(lua_State *L)
{
    static const char *const known[] = {"base", "offset", NULL};
    lua_Integer T = lrp_checkint(L, 1, "T");
    if (T < 0 || T > RP_MAX_NUMEL)
        return lrp_argerror(L, 1, "T must be between 0 and 2^40, got %I", (LUAI_UACINT)T);
    lua_Integer d = lrp_checkint(L, 2, "d");
    if (d < 2 || d % 2 != 0 || d > RP_MAX_NUMEL)
        return lrp_argerror(L, 2, "d must be even and >= 2, got %I", (LUAI_UACINT)d);
    lrp_checkopts(L, 3, known);
    double base = opt_base(L, 3, "base");
    int64_t offset = opt_pos(L, 3, "offset", 0, -LRP_MAX_POS);
    if (rp_option_position_span("offset", offset, (int64_t)T) != RP_OK)
        return lrp_argerror(L, 3, "%s", rp_last_error());
    int64_t shape[2] = {(int64_t)T, (int64_t)d};
    if (!numel_ok(2, shape)) return lrp_argerror(L, 2, "[T x d] would be too large");
    rp_tensor *out = lrp_newtensor(L);
    rp_status st = rp_tensor_new(out, 2, shape);
    if (st != RP_OK) return lrp_raise(L, st);
    if (T > 0) rp_sinusoidal_forward(rp_tensor_data(out), shape[0], shape[1], offset, base);
    return 1;
}

/* ---- attention ---- */

/* "[2 x S x 4 x 16]"-style text: the size when known (> 0), else the letter. */
static const char *expect_str(char *buf, const int64_t *sizes, const char *const *letters)
{
    size_t pos = 0, len = RP_SHAPE_STR_LEN;
    buf[pos++] = '[';
    for (int i = 0; i < 4; i++) {
        int n = sizes[i] > 0 ? snprintf(buf + pos, len - pos, "%s%lld", i ? " x " : "",
                                        (long long)sizes[i])
                             : snprintf(buf + pos, len - pos, "%s%s", i ? " x " : "", letters[i]);
        if (n > 0) pos += (size_t)n;
    }
    buf[pos++] = ']';
    buf[pos] = '\0';
    return buf;
}

/* Checks that t (argument arg, called name) is 4-D with sizes >= 1 matching want: want[i] > 0
 * is required; 0 is free (shown as its letter); -1 is free (shown as t's own size). */
static void check_4d(lua_State *L, int arg, const char *name, const rp_tensor *t,
                     const int64_t *want, const char *const *letters)
{
    char a[RP_SHAPE_STR_LEN], b[RP_SHAPE_STR_LEN];
    int ok = t->ndim == 4;
    int64_t shown[4];
    for (int i = 0; i < 4; i++) {
        shown[i] = want[i] > 0 ? want[i] : 0;
        if (want[i] < 0 && t->ndim == 4 && t->shape[i] >= 1) shown[i] = t->shape[i];
        if (ok && ((want[i] > 0 && t->shape[i] != want[i]) || t->shape[i] < 1)) ok = 0;
    }
    if (!ok)
        lrp_argerror(L, arg, "expected %s as %s%s, got %s", name, expect_str(a, shown, letters),
                     t->ndim == 4 && rp_tensor_numel(t) == 0 ? " with sizes >= 1" : "",
                     lrp_shape_str(b, t));
}

/* The table options rel_k .. rel_bias (rp_attention_tables) held at stack slots first ..
 * first + RP_TAB_COUNT - 1: each nil, or a live tensor whose shape goes into req. Run after the
 * last option read (a read can release a table read before it). */
static void read_rel_tables(lua_State *L, int first, rp_attn_request *req)
{
    for (int i = 0; i < RP_TAB_COUNT; i++) {
        int slot = first + i;
        if (lua_isnil(L, slot)) continue;
        rp_tensor *t = lrp_totensor(L, slot);
        if (!t)
            lrp_argerror(L, 4, "option '%s' must be a roper.Tensor, got %s",
                         rp_attention_tables[i], lrp_describe(L, slot));
        if (t->storage == NULL)
            lrp_argerror(L, 4, "option '%s' is a released tensor", rp_attention_tables[i]);
        rp_plan_table *pt = &req->tables[i];
        pt->given = 1, pt->ndim = t->ndim;
        memcpy(pt->shape, t->shape, sizeof pt->shape);
    }
}

/* Replaces each table in its slot by a contiguous copy (the kernels read plain rows) and points
 * rel at them. */
static void copy_rel_tables(lua_State *L, int first, rp_attn_rel *rel)
{
    memset(rel, 0, sizeof *rel);
    for (int i = 0; i < RP_TAB_COUNT; i++) {
        int slot = first + i;
        if (lua_isnil(L, slot)) continue;
        rp_tensor *c = lrp_newtensor(L);
        /* fetched again: the allocation may have run a finalizer that released it */
        rp_tensor *t = lrp_totensor(L, slot);
        if (t->storage == NULL)
            lrp_argerror(L, 4, "option '%s' is a released tensor", rp_attention_tables[i]);
        rp_status st = rp_tensor_contiguous(c, t);
        if (st != RP_OK) lrp_raise(L, st);
        lua_replace(L, slot);
        *rp_attn_rel_member(rel, i) = rp_tensor_data(lrp_checktensor(L, slot));
    }
}

/* rp.attention(q, k, v[, opts]) -> out [B,T,H,Dv], att [B,H,T,S]. The options: docs/lua_api.md
 * (positions: 1-D or vector positions of the keys' and queries' rows, with the options of
 * vector positions as rp.rope.angles reads them). Every option is read into a request, core
 * plans the call from it (rp_attention_plan: every rule between them), then the tables the plan
 * sizes are read. */
static int l_attention(lua_State *L)
{
    static const char *const known[] = {lrp_attention_keys_mark, "causal", "scale", "q_offset",
                                        "pos_offset", RP_ATTENTION_TABLES, "positions",
                                        LRP_FREQ_KEYS, LRP_AXES_KEYS, NULL};
    static const char *const q_letters[] = {"B", "T", "H", "D"};
    static const char *const k_letters[] = {"B", "S", "H", "D"};
    static const char *const v_letters[] = {"B", "S", "H", "Dv"};
    const rp_tensor *q = lrp_checktensor(L, 1);
    const rp_tensor *k = lrp_checktensor(L, 2);
    const rp_tensor *v = lrp_checktensor(L, 3);
    rp_attn_request req = rp_attention_request_default();
    int64_t want[4] = {0, 0, 0, 0};
    check_4d(L, 1, "q", q, want, q_letters);
    req.B = q->shape[0], req.T = q->shape[1], req.H = q->shape[2], req.D = q->shape[3];
    int64_t wk[4] = {req.B, -1, req.H, req.D};
    check_4d(L, 2, "k", k, wk, k_letters);
    req.S = k->shape[1];
    int64_t wv[4] = {req.B, req.S, req.H, -1};
    check_4d(L, 3, "v", v, wv, v_letters);
    req.Dv = v->shape[3];

    /* every option as given */
    lrp_checkopts(L, 4, known);
    lua_settop(L, 4);
    for (int i = 0; i < rp_model_cfg_nkeys; i++) { /* the config keys, by their schema rows */
        const rp_cfg_key *row = &rp_model_cfg_keys[i];
        rp_cfg_scope scope = rp_model_cfg_scope(row); /* the positional scheme, rel's limits */
        if (scope != RP_CFG_SCOPE_PE && scope != RP_CFG_SCOPE_REL) continue;
        if (row->offset == offsetof(rp_model_cfg, pe.base))
            req.keys.pe.base = lrp_optbase(L, 4); /* or Hugging Face's rope_theta */
        else if (lrp_optcfgvalue(L, 4, &req.keys, row))
            req.keys_given |= (uint64_t)1 << i;
    }
    req.causal = lrp_optboolean(L, 4, "causal", 1);
    if (lrp_hasopt(L, 4, "scale"))
        req.given |= RP_GIVEN_SCALE, req.scale = lrp_optfinite(L, 4, "scale", 0.0);
    if (lrp_hasopt(L, 4, "q_offset"))
        req.given |= RP_GIVEN_Q_OFFSET, req.q_offset = lrp_optinteger(L, 4, "q_offset", 0);
    if (lrp_hasopt(L, 4, "pos_offset"))
        req.given |= RP_GIVEN_POS_OFFSET, req.pos_offset = lrp_optinteger(L, 4, "pos_offset", 0);
    for (int i = 0; i < RP_TAB_COUNT; i++) /* slots 5 .. 4 + RP_TAB_COUNT */
        if (lua_type(L, 4) == LUA_TTABLE) lua_getfield(L, 4, rp_attention_tables[i]);
        else lua_pushnil(L);
    rp_rope_freq f;
    lrp_optfreq(L, 4, &req.keys, &f); /* the next two slots: freq, angles */
    lrp_axes_opts ax;
    lrp_optaxes(L, 4, &ax); /* the next slot */
    int A = 0;
    if (lrp_hasopt(L, 4, "positions")) { /* a userdata slot */
        lua_getfield(L, 4, "positions");
        req.pos = lrp_read_positions(L, 4, -1, "option 'positions'", 0, &A, &req.pos_rows);
        lua_remove(L, -2);
    } else {
        lua_pushnil(L);
    }
    read_rel_tables(L, 5, &req);
    req.freq = &f, req.axes = A;

    /* core's plan; then the tables it sizes, the frequencies sampled for every position and pair
     * the call rotates */
    rp_attn_plan p;
    if (rp_attention_plan(&req, &p) != RP_OK) return lrp_argerror(L, p.arg, "%s", rp_last_error());
    rp_attn_rel rel;
    copy_rel_tables(L, 5, &rel);
    p.cfg.tables = &rel;
    lrp_axes_tables(L, 4, &ax, A, req.pos != NULL, p.half, !lua_isnil(L, 6 + RP_TAB_COUNT), &f);
    lrp_freq_tables(L, 4, 5 + RP_TAB_COUNT, &f, p.rows, p.half);
    if (rp_attention_plan_freq(&p, &f) != RP_OK) return lrp_argerror(L, 4, "%s", rp_last_error());
    rp_tensor *out = lrp_newtensor(L);
    rp_tensor *att = lrp_newtensor(L);
    /* fetched again: the option reads and allocations above may have run Lua code */
    rp_status st = rp_attention(out, att, lrp_checktensor(L, 1), lrp_checktensor(L, 2),
                                lrp_checktensor(L, 3), &p.cfg);
    if (st != RP_OK) return lrp_raise(L, st);
    return 2;
}

/* rp.linear_attention(q, k, v[, opts]) -> out, w, den (core/nn/linear_attention.h) */
static int l_linear_attention(lua_State *L)
{
    /* the config keys at their rows' places (pe, linear_rope, base, pairing, fraction_qk,
     * fraction_v: rp_cfg_key.linear), eps and q_offset in the places between */
    static const char *const known[] = {lrp_linear_keys_mark, "eps", "q_offset", NULL};
    static const char *const q_letters[] = {"B", "T", "H", "D"};
    static const char *const v_letters[] = {"B", "T", "H", "Dv"};
    const rp_tensor *q = lrp_checktensor(L, 1);
    const rp_tensor *k = lrp_checktensor(L, 2);
    const rp_tensor *v = lrp_checktensor(L, 3);
    int64_t want[4] = {0, 0, 0, 0};
    check_4d(L, 1, "q", q, want, q_letters);
    int64_t B = q->shape[0], T = q->shape[1], H = q->shape[2], D = q->shape[3];
    int64_t wk[4] = {B, T, H, D};
    check_4d(L, 2, "k", k, wk, q_letters);
    int64_t wv[4] = {B, T, H, -1};
    check_4d(L, 3, "v", v, wv, v_letters);
    int64_t Dv = v->shape[3];

    rp_linattn_request req = rp_linear_attention_request_default();
    req.B = B, req.T = T, req.H = H, req.D = D, req.Dv = Dv;

    /* every option as given, in the order of known (the first bad one is the one named); the
     * config keys by their schema rows, pe among the modes that run with linear attention */
    lrp_checkopts(L, 4, known);
    const char *names[LRP_MAX_KNOWN];
    lrp_known_names(known, names, LRP_MAX_KNOWN);
    for (const char *const *name = names; *name; name++) {
        const rp_cfg_key *row = rp_model_cfg_key(*name, (size_t)-1);
        if (!row) {
            if (strcmp(*name, "eps") == 0) /* (the plan checks it) */
                req.eps = lrp_optfinite(L, 4, "eps", RP_LINATTN_EPS);
            else /* q_offset */
                req.q_offset = (int64_t)lrp_optinteger(L, 4, "q_offset", 0);
        } else if (row->offset == offsetof(rp_model_cfg, pe.mode)) {
            req.keys.pe.mode = opt_linear_pe(L, 4, "pe");
        } else if (row->offset == offsetof(rp_model_cfg, pe.base)) {
            req.keys.pe.base = lrp_optbase(L, 4);
        } else {
            lrp_optcfgvalue(L, 4, &req.keys, row);
        }
    }

    rp_linattn_plan p;
    if (rp_linear_attention_plan(&req, &p) != RP_OK)
        return lrp_argerror(L, p.arg, "%s", rp_last_error());
    lua_settop(L, 4);
    rp_tensor *out = lrp_newtensor(L);
    rp_tensor *w = lrp_newtensor(L);
    rp_tensor *den = lrp_newtensor(L);
    rp_status st = rp_linear_attention(out, w, den, lrp_checktensor(L, 1), lrp_checktensor(L, 2),
                                       lrp_checktensor(L, 3), &p.cfg);
    if (st != RP_OK) return lrp_raise(L, st);
    return 3;
}

/* ---- BLAS and threads ---- */

/* rp.blas.*: queries without arguments, one row each (torch7 cwrap's idea: the wrapper comes from
 * a declaration): the core functions whose results the query returns, in order, an integer first
 * where there is one (a NULL string as nil). */
typedef struct blas_query {
    const char *name;
    int (*count)(void);
    const char *(*text[2])(void);
} blas_query;

static const blas_query blas_queries[] = {
    {"core", NULL, {rp_blas_core, rp_blas_core_reason}}, /* the kernels, who chose them and why */
    {"config", NULL, {rp_blas_config, NULL}},
    {"threads", rp_blas_threads, {rp_omp_wait_policy, NULL}}, /* n, the wait policy's origin */
    {"wanted_coretype", NULL, {rp_blas_wanted_coretype, NULL}},
};

/* One query: its row is the closure's upvalue. */
static int l_blas_query(lua_State *L)
{
    const blas_query *q = (const blas_query *)lua_touserdata(L, lua_upvalueindex(1));
    int n = 0;
    if (q->count) lua_pushinteger(L, q->count()), n++;
    for (int i = 0; i < 2 && q->text[i]; i++, n++) lua_pushstring(L, q->text[i]());
    return n;
}

/* rp.set_num_threads(n): OpenBLAS and OpenMP thread count, 1 <= n <= 1024. */
static int l_set_num_threads(lua_State *L)
{
    lua_Integer n = lrp_checkint(L, 1, "n");
    if (n < 1 || n > 1024)
        return lrp_argerror(L, 1, "n must be between 1 and 1024, got %I", (LUAI_UACINT)n);
    rp_blas_set_threads((int)n);
    return 0;
}

static const luaL_Reg rope_funcs[] = {
    {"theta", l_rope_theta},   {"angles", l_rope_angles},           {"rotate", l_rope_rotate},
    {"sinusoidal", l_rope_sinusoidal}, {NULL, NULL},
};

static const luaL_Reg nn_funcs[] = {
    {"attention", l_attention},
    {"linear_attention", l_linear_attention},
    {"matmul", lrp_matmul},
    {"set_num_threads", l_set_num_threads},
    {NULL, NULL},
};

void lrp_open_nn(lua_State *L, int mod)
{
    mod = lua_absindex(L, mod);
    luaL_newlib(L, rope_funcs);
    lua_setfield(L, mod, "rope");
    lua_createtable(L, 0, (int)(sizeof blas_queries / sizeof blas_queries[0]));
    LRP_SET_QUERIES(L, -1, l_blas_query, blas_queries);
    lua_setfield(L, mod, "blas");
    lua_pushvalue(L, mod);
    luaL_setfuncs(L, nn_funcs, 0);
    lua_pop(L, 1);
}
