/* The frequency options of the rotary calls (rp.rope.angles, rp.rope.rotate, rp.attention,
 * rp.model): the context extensions and xPos as numbers, and user frequencies (freq: a 1-D tensor
 * or a list of numbers) or angles (angles: a 2-D tensor, a list of lists, or a function(p, i)
 * sampled for positions p = 0 .. rows-1 and pairs i = 0 .. half-1), core/nn/rope_freq.h.
 *
 * Two phases, as args.h asks: lrp_optfreq reads every option (the scalars into the struct, the
 * table values into two stack slots); lrp_freq_tables, called when the caller knows the sizes,
 * copies the tables into one double userdata (and calls the function), then checks the scheme
 * with core's messages. */
#include <math.h>
#include <string.h>

#include "args.h"
#include "freq.h"
#include "userdata.h"

/* The most entries a function is sampled for (2^24: a second or two of Lua calls). */
#define FREQ_MAX_SAMPLES ((int64_t)1 << 24)

void lrp_optfreq(lua_State *L, int idx, rp_rope_freq *f, double default_orig_len)
{
    *f = rp_rope_freq_default();
    int have = lua_type(L, idx) == LUA_TTABLE;
    f->scaling = have ? (rp_rope_scaling)lrp_optenum(L, idx, "scaling", rp_scaling_names, 0)
                      : RP_SCALING_NONE;
    f->factor = have ? lrp_optnumber(L, idx, "scaling_factor", 1.0) : 1.0;
    f->orig_len = default_orig_len;
    if (have && lrp_hasopt(L, idx, "orig_len")) {
        lua_Integer v = lrp_optinteger(L, idx, "orig_len", 0);
        if (v < 1 || v > LRP_MAX_POS)
            lrp_argerror(L, idx, "option 'orig_len' must be an integer >= 1, got %I",
                         (LUAI_UACINT)v);
        f->orig_len = (double)v;
    }
    if (have) {
        f->yarn_alpha = lrp_optnumber(L, idx, "yarn_alpha", RP_YARN_ALPHA);
        f->yarn_beta = lrp_optnumber(L, idx, "yarn_beta", RP_YARN_BETA);
        f->xpos = lrp_optnumber(L, idx, "xpos", 0.0);
        f->xpos_scale_base = lrp_optnumber(L, idx, "xpos_scale_base", RP_XPOS_SCALE_BASE);
        lua_getfield(L, idx, "freq");
        lua_getfield(L, idx, "angles");
    } else {
        lua_pushnil(L);
        lua_pushnil(L);
    }
    if (f->scaling == RP_SCALING_YARN && !(f->orig_len >= 1.0))
        lrp_argerror(L, idx, "option 'orig_len' (YaRN's original context length) is required "
                             "with scaling \"yarn\"");
}

void lrp_freq_into_cfg(rp_model_cfg *c, const rp_rope_freq *f)
{
    c->scaling = f->scaling;
    c->scaling_factor = f->factor;
    c->orig_len = f->orig_len >= 1.0 ? (int64_t)f->orig_len : 0;
    c->yarn_alpha = f->yarn_alpha;
    c->yarn_beta = f->yarn_beta;
    c->xpos = f->xpos;
    c->xpos_scale_base = f->xpos_scale_base;
}

/* A finite number at the top of the stack (popped), or an error naming what. */
static double take_number(lua_State *L, int idx, const char *what)
{
    int isnum = 0;
    double v = (double)lua_tonumberx(L, -1, &isnum);
    if (!isnum || lua_type(L, -1) != LUA_TNUMBER || !isfinite(v))
        lrp_argerror(L, idx, "%s must be a finite number, got %s", what, lrp_describe(L, -1));
    lua_pop(L, 1);
    return v;
}

/* The sizes of the value at slot: a tensor (1-D for freq, 2-D for angles) or a list (of lists).
 * Both are >= 1 on return (an empty tensor or list raises, [3 x 0] as {{}, {}, {}}). */
static void table_sizes(lua_State *L, int idx, int slot, const char *key, int nd, int64_t *n0,
                        int64_t *n1)
{
    rp_tensor *t = lrp_totensor(L, slot);
    *n1 = 1;
    if (t) {
        if (!t->storage) lrp_argerror(L, idx, "option '%s': attempt to use a released tensor", key);
        if (t->ndim != nd) {
            char buf[RP_SHAPE_STR_LEN];
            lrp_argerror(L, idx, "option '%s' must be a %d-D tensor (%s), got %s", key, nd,
                         nd == 1 ? "[n]" : "[positions x n]", lrp_shape_str(buf, t));
        }
        *n0 = t->shape[0];
        if (nd == 2) *n1 = t->shape[1];
    } else if (lua_type(L, slot) != LUA_TTABLE) {
        lrp_argerror(L, idx, "option '%s' must be a tensor, a list%s, got %s", key,
                     nd == 1 ? " of numbers" : " of lists or a function(p, i)",
                     lrp_describe(L, slot));
    } else {
        *n0 = (int64_t)lua_rawlen(L, slot);
        if (nd == 2 && *n0 > 0) {
            lua_rawgeti(L, slot, 1);
            if (lua_type(L, -1) != LUA_TTABLE)
                lrp_argerror(L, idx, "option '%s'[1] must be a list of angles, got %s", key,
                             lrp_describe(L, -1));
            *n1 = (int64_t)lua_rawlen(L, -1);
            lua_pop(L, 1);
        }
    }
    /* a tensor with a 0 in its shape too (its [4 x 0] once divided by 0 below) */
    if (*n0 < 1 || *n1 < 1) lrp_argerror(L, idx, "option '%s' must not be empty", key);
}

/* Copies the value at slot (sizes n0 x n1, from table_sizes) into dst as doubles. */
static void copy_table(lua_State *L, int idx, int slot, const char *key, int nd, double *dst,
                       int64_t n0, int64_t n1)
{
    rp_tensor *t = lrp_totensor(L, slot);
    if (t) { /* fetched again after the allocation; no Lua call until the copy ends */
        if (!t->storage) lrp_argerror(L, idx, "option '%s': attempt to use a released tensor", key);
        const float *d = rp_tensor_data(t);
        for (int64_t a = 0; a < n0; a++)
            for (int64_t b = 0; b < n1; b++)
                dst[a * n1 + b] = (double)d[a * t->stride[0] + (nd == 2 ? b * t->stride[1] : 0)];
        return;
    }
    char what[96];
    for (int64_t a = 0; a < n0; a++) {
        if (nd == 1) {
            lua_rawgeti(L, slot, (lua_Integer)(a + 1));
            snprintf(what, sizeof what, "option '%s'[%lld]", key, (long long)(a + 1));
            dst[a] = take_number(L, idx, what);
            continue;
        }
        lua_rawgeti(L, slot, (lua_Integer)(a + 1));
        if (lua_type(L, -1) != LUA_TTABLE || (int64_t)lua_rawlen(L, -1) != n1)
            lrp_argerror(L, idx, "option '%s'[%I] must be a list of %I angles, got %s", key,
                         (LUAI_UACINT)(a + 1), (LUAI_UACINT)n1, lrp_describe(L, -1));
        for (int64_t b = 0; b < n1; b++) {
            lua_rawgeti(L, -1, (lua_Integer)(b + 1));
            snprintf(what, sizeof what, "option '%s'[%lld][%lld]", key, (long long)(a + 1),
                     (long long)(b + 1));
            dst[a * n1 + b] = take_number(L, idx, what);
        }
        lua_pop(L, 1);
    }
}

void lrp_freq_tables(lua_State *L, int idx, int slot, rp_rope_freq *f, int64_t rows, int64_t half)
{
    int has_freq = !lua_isnil(L, slot), has_ang = !lua_isnil(L, slot + 1);
    if (has_freq && has_ang)
        lrp_argerror(L, idx, "give option 'freq' or 'angles', not both");
    if (has_freq) {
        int64_t n0, n1;
        table_sizes(L, idx, slot, "freq", 1, &n0, &n1);
        double *d = (double *)lua_newuserdatauv(L, (size_t)n0 * sizeof(double), 0);
        copy_table(L, idx, slot, "freq", 1, d, n0, 1);
        f->theta = d, f->n_theta = n0;
    } else if (has_ang && lua_type(L, slot + 1) == LUA_TFUNCTION) {
        if (half < 1)
            lrp_argerror(L, idx, "option 'angles': nothing is rotated here (a rotary pe is "
                                 "needed)");
        if (rows < 1 || rows > FREQ_MAX_SAMPLES / half)
            lrp_argerror(L, idx, "option 'angles': a function is sampled for %I positions x %I "
                                 "pairs, more than 2^24 calls", (LUAI_UACINT)rows,
                         (LUAI_UACINT)half);
        double *d = (double *)lua_newuserdatauv(L, (size_t)(rows * half) * sizeof(double), 0);
        int ud = lua_gettop(L);
        char what[128];
        for (int64_t p = 0; p < rows; p++)
            for (int64_t i = 0; i < half; i++) {
                lua_pushvalue(L, slot + 1);
                lua_pushinteger(L, (lua_Integer)p);
                lua_pushinteger(L, (lua_Integer)i);
                lua_call(L, 2, 1);
                snprintf(what, sizeof what, "option 'angles': the function's value at p = %lld, "
                         "i = %lld", (long long)p, (long long)i);
                d[p * half + i] = take_number(L, idx, what);
            }
        lua_settop(L, ud);
        f->angles = d, f->rows = rows, f->n_angles = half;
    } else if (has_ang) {
        int64_t n0, n1;
        table_sizes(L, idx, slot + 1, "angles", 2, &n0, &n1);
        int64_t cells;
        if (!rp_mul_i64(n0, n1, &cells) || cells > RP_MAX_NUMEL)
            lrp_argerror(L, idx, "option 'angles' is too large");
        double *d = (double *)lua_newuserdatauv(L, (size_t)cells * sizeof(double), 0);
        copy_table(L, idx, slot + 1, "angles", 2, d, n0, n1);
        f->angles = d, f->rows = n0, f->n_angles = n1;
    } else {
        lua_pushnil(L); /* the slot the caller keeps either way */
    }
    if (rp_rope_freq_check(f) != RP_OK) lrp_argerror(L, idx, "%s", rp_last_error());
}

int lrp_optxposside(lua_State *L, int idx)
{
    lua_Integer side = lrp_optinteger(L, idx, "xpos_side", 1);
    if (side != 1 && side != -1)
        lrp_argerror(L, idx, "option 'xpos_side' must be 1 (query side) or -1 (key side), got %I",
                     (LUAI_UACINT)side);
    return (int)side;
}

int64_t lrp_freq_rows(const int64_t *pos, int64_t offset, int64_t n)
{
    int64_t hi = !pos && n > 0 ? offset + n - 1 : 0;
    for (int64_t r = 0; pos && r < n; r++) hi = pos[r] > hi ? pos[r] : hi;
    return (hi > 0 ? hi : 0) + 1;
}

void lrp_freq_check_positions(lua_State *L, int idx, const rp_rope_freq *f, int64_t d_rot,
                              const int64_t *pos, int64_t offset, int64_t n)
{
    if (n < 1) return;
    /* the first position below 0 (of offset + r: offset itself, when it is) */
    for (int64_t r = 0; r < (pos ? n : 1) && f->angles; r++) {
        int64_t p = pos ? pos[r] : offset;
        if (p < 0)
            lrp_argerror(L, idx, "position %I is below 0, where the angle table starts",
                         (LUAI_UACINT)p);
    }
    if (rp_rope_freq_check_use(f, d_rot, lrp_freq_rows(pos, offset, n) - 1, "d_rot") != RP_OK)
        lrp_argerror(L, idx, "%s", rp_last_error());
}
