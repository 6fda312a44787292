/* roper.Model: the transformer of core/model.h (rp.model), its parameters as tensor views,
 * forward, loss, a training step, generation, introspection, and checkpoints (m:save, rp.load).
 *
 * The userdata holds the rp_model pointer (NULL before rp_model_new succeeds and after
 * __gc/__close). Every argument is checked here before core runs: the config table (types and
 * enum names here, ranges by rp_model_cfg_check, whose message becomes the `bad argument` text),
 * token grids (shape, B <= max_batch, T <= seq_len, every value, with its 1-based position in
 * the message), options. Token, target and mask buffers are Lua userdata, and results are pushed
 * as empty tensors before core fills them, so a Lua error never leaks. File errors of m:save and
 * rp.load are returned as nil, "path: reason" (Lua io style); misuse raises.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "roper.h"
#include "userdata.h"

static const char *const norm_names[] = {"pre", "post", NULL};
static const char *const act_names[] = {"relu", "gelu", NULL};
static const char *const attention_names[] = {"softmax", "linear", NULL};

/* ---- the userdata ---- */

/* __gc and __close: free the model; safe on a released model and when called twice. Tensor views
 * of its parameters keep their storage. */
static int m_release(lua_State *L)
{
    lrp_model *u = (lrp_model *)luaL_testudata(L, 1, LRP_MODEL_MT);
    if (u && u->m) {
        rp_model_free(u->m);
        u->m = NULL;
    }
    return 0;
}

/* A parameter count the way the write-up prints it: below 1000 exactly ("640"); below 100K in
 * thousands with one decimal ("12.3K"); below 10M in millions with one decimal ("0.6M", "2.4M");
 * from 10M in whole millions ("20M"). Thresholds apply to the rounded value. */
static const char *count_str(char *buf, size_t len, int64_t n)
{
    double x = (double)n;
    if (n < 1000) snprintf(buf, len, "%lld", (long long)n);
    else if (x < 99950.0) snprintf(buf, len, "%.1fK", x / 1e3);
    else if (x < 9.95e6) snprintf(buf, len, "%.1fM", x / 1e6);
    else snprintf(buf, len, "%.0fM", x / 1e6);
    return buf;
}

/* tostring(m): "roper.Model: 0.6M parameters (d_model 128, 4 heads, 3 layers, d_ff 512,
 * seq_len 512, pe roper, pre-norm)", with ", linear attention" for linear attention. */
static int m_tostring(lua_State *L)
{
    lrp_model *u = (lrp_model *)lrp_checkudata(L, 1, LRP_MODEL_MT);
    if (u->m == NULL) {
        lua_pushliteral(L, "roper.Model (released)");
        return 1;
    }
    const rp_model_cfg *c = rp_model_config(u->m);
    char count[32];
    count_str(count, sizeof count, rp_model_param_count(u->m));
    lua_pushfstring(L,
                    "roper.Model: %s parameters (d_model %I, %I head%s, %I layer%s, d_ff %I, "
                    "seq_len %I, pe %s, %s-norm%s%s)",
                    count, (LUAI_UACINT)c->d_model, (LUAI_UACINT)c->heads, c->heads == 1 ? "" : "s",
                    (LUAI_UACINT)c->layers, c->layers == 1 ? "" : "s", (LUAI_UACINT)c->d_ff,
                    (LUAI_UACINT)c->seq_len, rp_pe_name(c->pe), norm_names[c->norm],
                    c->attention == RP_ATTN_LINEAR ? ", linear attention" : "",
                    c->attention == RP_ATTN_LINEAR && c->linear_rope == RP_LIN_BEFORE
                        ? " (rope before phi)"
                        : "");
    return 1;
}

/* ---- construction ---- */

/* Reads the config table at idx into cfg (types and names; ranges are rp_model_cfg_check's). */
static void read_cfg(lua_State *L, int idx, rp_model_cfg *cfg)
{
    static const char *const known[] = {"vocab",   "d_model",     "heads",      "layers",
                                        "d_ff",    "seq_len",     "max_batch",  "norm",
                                        "activation", "dropout",  "pe",         "fraction_qk",
                                        "fraction_v", "base",     "pairing",    "seed",
                                        "attention", "linear_rope", NULL};
    if (lua_type(L, idx) != LUA_TTABLE)
        lrp_argerror(L, idx, "config table expected, got %s", lrp_describe(L, idx));
    lrp_checkopts(L, idx, known);
    if (!lrp_hasopt(L, idx, "vocab"))
        lrp_argerror(L, idx, "option 'vocab' (the vocabulary size) is required");
    *cfg = rp_model_cfg_default((int64_t)lrp_optinteger(L, idx, "vocab", 0));
    cfg->d_model = (int64_t)lrp_optinteger(L, idx, "d_model", (lua_Integer)cfg->d_model);
    cfg->heads = (int64_t)lrp_optinteger(L, idx, "heads", (lua_Integer)cfg->heads);
    cfg->layers = (int64_t)lrp_optinteger(L, idx, "layers", (lua_Integer)cfg->layers);
    cfg->d_ff = (int64_t)lrp_optinteger(L, idx, "d_ff", (lua_Integer)cfg->d_ff);
    cfg->seq_len = (int64_t)lrp_optinteger(L, idx, "seq_len", (lua_Integer)cfg->seq_len);
    cfg->max_batch = (int64_t)lrp_optinteger(L, idx, "max_batch", (lua_Integer)cfg->max_batch);
    cfg->norm = (rp_norm)lrp_optenum(L, idx, "norm", norm_names, (int)cfg->norm);
    cfg->act = (rp_act)lrp_optenum(L, idx, "activation", act_names, (int)cfg->act);
    cfg->dropout = lrp_optnumber(L, idx, "dropout", cfg->dropout);
    cfg->pe = (rp_pe)lrp_optenum(L, idx, "pe", rp_pe_names, (int)cfg->pe);
    cfg->fraction_qk = lrp_optnumber(L, idx, "fraction_qk", cfg->fraction_qk);
    cfg->fraction_v = lrp_optnumber(L, idx, "fraction_v", cfg->fraction_v);
    cfg->rope_base = lrp_optnumber(L, idx, "base", cfg->rope_base);
    cfg->pairing =
        (rp_pairing)lrp_optenum(L, idx, "pairing", lrp_pairing_names, (int)cfg->pairing);
    cfg->seed = (uint64_t)lrp_optinteger(L, idx, "seed", 0);
    cfg->attention =
        (rp_attn_kind)lrp_optenum(L, idx, "attention", attention_names, (int)cfg->attention);
    cfg->linear_rope = lrp_optplacement(L, idx, "linear_rope", cfg->linear_rope);
    /* checked here for every pe (core checks fractions only for the modes that rotate), and with
     * the Lua names ("base" is core's rope_base) */
    const char *keys[] = {"fraction_qk", "fraction_v"};
    double fr[] = {cfg->fraction_qk, cfg->fraction_v};
    for (int i = 0; i < 2; i++)
        if (!(fr[i] > 0.0 && fr[i] <= 1.0)) {
            lua_pushnumber(L, (lua_Number)fr[i]);
            lrp_argerror(L, idx, "option '%s' must be in (0, 1], got %s", keys[i],
                         lrp_describe(L, -1));
        }
    if (!(cfg->rope_base > 0.0 && isfinite(cfg->rope_base))) {
        lua_pushnumber(L, (lua_Number)cfg->rope_base);
        lrp_argerror(L, idx, "option 'base' must be a finite number > 0, got %s",
                     lrp_describe(L, -1));
    }
}

/* rp.model(cfg) -> roper.Model */
static int l_model(lua_State *L)
{
    rp_model_cfg cfg;
    read_cfg(L, 1, &cfg);
    if (rp_model_cfg_check(&cfg) != RP_OK) return lrp_argerror(L, 1, "%s", rp_last_error());
    lua_settop(L, 1);
    lrp_model *u = lrp_newmodel(L);
    u->m = rp_model_new(&cfg);
    if (u->m == NULL) return lrp_argerror(L, 1, "%s", rp_last_error()); /* too large */
    return 1;
}

/* rp.model_memory(cfg) -> {model =, optimiser =, params =, available =}: what rp.model(cfg)
 * would allocate, in bytes, without allocating it; optimiser: Adam's moments; params: the
 * parameter count; available: rp_mem_available() (nil when unknown). cfg is checked as rp.model
 * checks it. */
static int l_model_memory(lua_State *L)
{
    rp_model_cfg cfg;
    read_cfg(L, 1, &cfg);
    int64_t bytes = 0, params = 0;
    if (rp_model_memory(&cfg, &bytes, &params) != RP_OK)
        return lrp_argerror(L, 1, "%s", rp_last_error());
    int64_t avail = rp_mem_available();
    lua_createtable(L, 0, 4);
    lua_pushinteger(L, (lua_Integer)bytes);
    lua_setfield(L, -2, "model");
    lua_pushinteger(L, (lua_Integer)(2 * params * (int64_t)sizeof(float)));
    lua_setfield(L, -2, "optimiser");
    lua_pushinteger(L, (lua_Integer)params);
    lua_setfield(L, -2, "params");
    if (avail >= 0) {
        lua_pushinteger(L, (lua_Integer)avail);
        lua_setfield(L, -2, "available");
    }
    return 1;
}

/* ---- token grids ---- */

enum { IDS_TOKEN, IDS_TARGET, IDS_MASK };

/* The shape of a grid argument: B sequences of T entries; ndim 1 for [T] forms (a flat table, a
 * 1-D tensor; B = 1), 2 for [B x T] forms. */
typedef struct {
    int64_t B, T;
    int ndim;
} grid;

static const char *grid_str(char *buf, const grid *g)
{
    int64_t s[2] = {g->B, g->T};
    return g->ndim == 1 ? lrp_shape_str_n(buf, 1, s + 1) : lrp_shape_str_n(buf, 2, s);
}

/* "[b][t]" (or "[t]" for a [T] grid), 1-based, into buf (64 bytes). */
static const char *pos_str(char *buf, const grid *g, int64_t b, int64_t t)
{
    if (g->ndim == 1) snprintf(buf, 64, "[%lld]", (long long)(t + 1));
    else snprintf(buf, 64, "[%lld][%lld]", (long long)(b + 1), (long long)(t + 1));
    return buf;
}

/* Raises the message for a bad value (at stack index vidx) at position pos. */
static int bad_value(lua_State *L, int arg, int kind, const char *pos, int64_t V, int vidx)
{
    const char *got = lrp_describe(L, vidx);
    if (kind == IDS_TOKEN)
        return lrp_argerror(L, arg, "token at %s must be an integer in 0..%I (vocab %I), got %s",
                            pos, (LUAI_UACINT)(V - 1), (LUAI_UACINT)V, got);
    if (kind == IDS_TARGET)
        return lrp_argerror(L, arg,
                            "target at %s must be -1 (not scored) or an integer in 0..%I "
                            "(vocab %I), got %s",
                            pos, (LUAI_UACINT)(V - 1), (LUAI_UACINT)V, got);
    return lrp_argerror(L, arg, "mask at %s must be 0, 1, true or false, got %s", pos, got);
}

static void kind_range(int kind, int64_t V, int64_t *lo, int64_t *hi)
{
    *lo = kind == IDS_TARGET ? -1 : 0;
    *hi = kind == IDS_MASK ? 1 : V - 1;
}

/* The Lua value at idx as an entry of kind; 0 when it is not acceptable. */
static int convert_lua(lua_State *L, int idx, int kind, int64_t V, int32_t *out)
{
    if (kind == IDS_MASK && lua_type(L, idx) == LUA_TBOOLEAN) {
        *out = lua_toboolean(L, idx);
        return 1;
    }
    int64_t lo, hi;
    kind_range(kind, V, &lo, &hi);
    lua_Integer v = 0;
    if (!lrp_tointeger(L, idx, &v) || v < lo || v > hi) return 0;
    *out = (int32_t)v;
    return 1;
}

/* A tensor element as an entry of kind; 0 when it is not acceptable. */
static int convert_float(double x, int kind, int64_t V, int32_t *out)
{
    int64_t lo, hi;
    kind_range(kind, V, &lo, &hi);
    if (!(x == floor(x) && x >= (double)lo && x <= (double)hi)) return 0;
    *out = (int32_t)x;
    return 1;
}

/* The shape of the grid at arg (a [T] or [B x T] tensor, a flat table = one sequence, a table of
 * tables = a batch; with allow_2d = 0 only the [T] forms). Checks types and that it is not
 * empty; the rows of a nested table are checked by fill_grid. */
static void probe_grid(lua_State *L, int arg, const char *what, int allow_2d, grid *g)
{
    char buf[RP_SHAPE_STR_LEN];
    if (lrp_totensor(L, arg)) {
        rp_tensor *t = lrp_checktensor(L, arg);
        if (t->ndim == 1) {
            g->ndim = 1;
            g->B = 1;
            g->T = t->shape[0];
        } else if (t->ndim == 2 && allow_2d) {
            g->ndim = 2;
            g->B = t->shape[0];
            g->T = t->shape[1];
        } else {
            lrp_argerror(L, arg, allow_2d ? "%s must be a [T] or [B x T] tensor, got %s"
                                          : "%s must be a 1-D tensor, got %s",
                         what, lrp_shape_str(buf, t));
        }
        if (g->B * g->T == 0)
            lrp_argerror(L, arg, "%s must hold at least one token, got %s", what,
                         lrp_shape_str(buf, t));
        return;
    }
    if (lua_type(L, arg) != LUA_TTABLE)
        lrp_argerror(L, arg, "%s must be a table or a tensor, got %s", what, lrp_describe(L, arg));
    lua_Unsigned n = lua_rawlen(L, arg);
    if (n == 0) lrp_argerror(L, arg, "%s must hold at least one token, got an empty table", what);
    if (n > (lua_Unsigned)RP_I32_MAX) lrp_argerror(L, arg, "%s has too many entries", what);
    g->ndim = 1;
    g->B = 1;
    g->T = (int64_t)n;
    if (allow_2d && lua_rawgeti(L, arg, 1) == LUA_TTABLE) {
        lua_Unsigned m = lua_rawlen(L, -1);
        if (m == 0) lrp_argerror(L, arg, "%s[1] must hold at least one token, got an empty table",
                                 what);
        if (m > (lua_Unsigned)RP_I32_MAX) lrp_argerror(L, arg, "%s[1] has too many entries", what);
        g->ndim = 2;
        g->B = (int64_t)n;
        g->T = (int64_t)m;
    }
    if (allow_2d) lua_pop(L, 1);
}

/* Reads the values of the grid at arg (shape g from probe_grid) into out (B*T entries, row
 * b * T + t), checking each for its kind. */
static void fill_grid(lua_State *L, int arg, const char *what, int kind, int64_t V, const grid *g,
                      int32_t *out)
{
    char pos[64];
    rp_tensor *t = lrp_totensor(L, arg);
    if (t) {
        t = lrp_checktensor(L, arg); /* again: the buffer's allocation may have released it */
        const float *d = rp_tensor_data(t);
        for (int64_t b = 0; b < g->B; b++)
            for (int64_t j = 0; j < g->T; j++) {
                int64_t off = g->ndim == 1 ? j * t->stride[0]
                                           : b * t->stride[0] + j * t->stride[1];
                double x = (double)d[off];
                if (convert_float(x, kind, V, &out[b * g->T + j])) continue;
                if (x == floor(x) && fabs(x) <= (double)LRP_MAX_POS)
                    lua_pushinteger(L, (lua_Integer)x);
                else
                    lua_pushnumber(L, (lua_Number)x);
                bad_value(L, arg, kind, pos_str(pos, g, b, j), V, -1);
            }
        return;
    }
    luaL_checkstack(L, 4, "token table");
    if (g->ndim == 1) {
        for (int64_t j = 0; j < g->T; j++) {
            lua_rawgeti(L, arg, (lua_Integer)(j + 1));
            if (!convert_lua(L, -1, kind, V, &out[j]))
                bad_value(L, arg, kind, pos_str(pos, g, 0, j), V, -1);
            lua_pop(L, 1);
        }
        return;
    }
    for (int64_t b = 0; b < g->B; b++) {
        if (lua_rawgeti(L, arg, (lua_Integer)(b + 1)) != LUA_TTABLE)
            lrp_argerror(L, arg, "%s[%I] must be a table (one sequence), got %s", what,
                         (LUAI_UACINT)(b + 1), lrp_describe(L, -1));
        lua_Unsigned n = lua_rawlen(L, -1);
        if (n != (lua_Unsigned)g->T)
            lrp_argerror(L, arg, "%s[%I] has %I entries, expected %I (as %s[1])", what,
                         (LUAI_UACINT)(b + 1), (LUAI_UACINT)n, (LUAI_UACINT)g->T, what);
        for (int64_t j = 0; j < g->T; j++) {
            lua_rawgeti(L, -1, (lua_Integer)(j + 1));
            if (!convert_lua(L, -1, kind, V, &out[b * g->T + j]))
                bad_value(L, arg, kind, pos_str(pos, g, b, j), V, -1);
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
}

/* A scratch buffer of n int32 values (a userdata pushed on the stack). */
static int32_t *push_ids(lua_State *L, int64_t n)
{
    return (int32_t *)lua_newuserdatauv(L, (size_t)n * sizeof(int32_t), 0);
}

/* The tokens at arg for a model of config c: shape within (max_batch, seq_len), values in
 * 0..V-1. Pushes the buffer. */
static int32_t *check_tokens(lua_State *L, int arg, const rp_model_cfg *c, grid *g)
{
    probe_grid(L, arg, "tokens", 1, g);
    if (g->B > c->max_batch)
        lrp_argerror(L, arg, "a batch of %I sequences exceeds max_batch %I", (LUAI_UACINT)g->B,
                     (LUAI_UACINT)c->max_batch);
    if (g->T > c->seq_len)
        lrp_argerror(L, arg, "sequence length %I exceeds seq_len %I", (LUAI_UACINT)g->T,
                     (LUAI_UACINT)c->seq_len);
    int32_t *buf = push_ids(L, g->B * g->T);
    fill_grid(L, arg, "tokens", IDS_TOKEN, c->vocab, g, buf);
    return buf;
}

/* Targets or a mask at arg: the same B and T as the tokens (grid tok). Pushes the buffer. */
static int32_t *check_like(lua_State *L, int arg, const char *what, int kind, int64_t V,
                           const grid *tok)
{
    grid g;
    probe_grid(L, arg, what, 1, &g);
    if (g.B != tok->B || g.T != tok->T) {
        char a[RP_SHAPE_STR_LEN], b[RP_SHAPE_STR_LEN];
        lrp_argerror(L, arg, "%s has shape %s, expected %s (the shape of tokens)", what,
                     grid_str(a, &g), grid_str(b, tok));
    }
    int32_t *buf = push_ids(L, g.B * g.T);
    fill_grid(L, arg, what, kind, V, &g, buf);
    return buf;
}

static int32_t *check_targets(lua_State *L, int arg, const rp_model_cfg *c, const grid *tok)
{
    return check_like(L, arg, "targets", IDS_TARGET, c->vocab, tok);
}

/* The optional mask at arg (nil/none: NULL), as B*T bytes 0/1 (a pushed userdata). */
static uint8_t *check_mask(lua_State *L, int arg, const grid *tok)
{
    if (lua_isnoneornil(L, arg)) return NULL;
    int32_t *v = check_like(L, arg, "mask", IDS_MASK, 2, tok);
    int64_t n = tok->B * tok->T;
    uint8_t *mask = (uint8_t *)lua_newuserdatauv(L, (size_t)n, 0);
    for (int64_t i = 0; i < n; i++) mask[i] = (uint8_t)v[i];
    return mask;
}

/* Pushes a new contiguous (zeroed) tensor of the given shape and returns its data. */
static float *push_out(lua_State *L, int ndim, const int64_t *shape)
{
    rp_tensor *out = lrp_newtensor(L);
    rp_status st = rp_tensor_new(out, ndim, shape);
    if (st != RP_OK) lrp_raise(L, st);
    return rp_tensor_data(out);
}

/* Runs an eval forward over tokens (no targets) on the model at stack index 1, fetched afresh
 * (see the rule in args.h: nothing may run Lua code between this and the use of the results).
 * Raises on a core error. Returns the model. */
static rp_model *eval_forward(lua_State *L, const int32_t *tok, const grid *g)
{
    rp_model *m = lrp_checkmodel(L, 1);
    rp_status st = rp_model_forward(m, tok, NULL, NULL, g->B, g->T, 0, NULL);
    if (st != RP_OK) lrp_raise(L, st);
    return m;
}

/* ---- methods ---- */

/* m:config() -> table (the keys of rp.model's config) */
static int m_config(lua_State *L)
{
    const rp_model_cfg cfg = *rp_model_config(lrp_checkmodel(L, 1)), *c = &cfg;
    lua_createtable(L, 0, 16);
    const struct {
        const char *key;
        int64_t v;
    } ints[] = {{"vocab", c->vocab},     {"d_model", c->d_model}, {"heads", c->heads},
                {"layers", c->layers},   {"d_ff", c->d_ff},       {"seq_len", c->seq_len},
                {"max_batch", c->max_batch}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        lua_pushinteger(L, (lua_Integer)ints[i].v);
        lua_setfield(L, -2, ints[i].key);
    }
    lua_pushstring(L, norm_names[c->norm]);
    lua_setfield(L, -2, "norm");
    lua_pushstring(L, act_names[c->act]);
    lua_setfield(L, -2, "activation");
    lua_pushnumber(L, (lua_Number)c->dropout);
    lua_setfield(L, -2, "dropout");
    lua_pushstring(L, rp_pe_name(c->pe));
    lua_setfield(L, -2, "pe");
    lua_pushnumber(L, (lua_Number)c->fraction_qk);
    lua_setfield(L, -2, "fraction_qk");
    lua_pushnumber(L, (lua_Number)c->fraction_v);
    lua_setfield(L, -2, "fraction_v");
    lua_pushnumber(L, (lua_Number)c->rope_base);
    lua_setfield(L, -2, "base");
    lua_pushstring(L, lrp_pairing_names[c->pairing]);
    lua_setfield(L, -2, "pairing");
    lua_pushinteger(L, (lua_Integer)c->seed);
    lua_setfield(L, -2, "seed");
    lua_pushstring(L, attention_names[c->attention]);
    lua_setfield(L, -2, "attention");
    lua_pushstring(L, rp_lin_placement_name(c->linear_rope));
    lua_setfield(L, -2, "linear_rope");
    return 1;
}

/* m:num_params() -> number of floats in the parameters */
static int m_num_params(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)rp_model_param_count(lrp_checkmodel(L, 1)));
    return 1;
}

/* m:params() / m:grads(): { {name =, tensor =}, ... } in layout order, and t[name] = tensor. */
static int push_views(lua_State *L, int grad)
{
    int n = rp_model_num_tensors(lrp_checkmodel(L, 1));
    lua_settop(L, 1);
    lua_createtable(L, n, n); /* 2 */
    for (int i = 0; i < n; i++) {
        lua_createtable(L, 0, 2);  /* 3: the entry */
        rp_tensor *t = lrp_newtensor(L); /* 4 */
        /* every push above may run a finalizer that releases the model: fetch it again, and take
         * the name and the view with no Lua call in between */
        rp_model *m = lrp_checkmodel(L, 1);
        char name[sizeof ((rp_param_info *)NULL)->name];
        memcpy(name, rp_model_param(m, i)->name, sizeof name);
        rp_model_param_view(t, m, i, grad);
        lua_pushvalue(L, 4);
        lua_setfield(L, 2, name);
        lua_setfield(L, 3, "tensor");
        lua_pushstring(L, name);
        lua_setfield(L, 3, "name");
        lua_rawseti(L, 2, i + 1);
    }
    return 1;
}

static int m_params(lua_State *L) { return push_views(L, 0); }
static int m_grads(lua_State *L) { return push_views(L, 1); }

/* m:forward(tokens) -> logits [B x T x V] (eval mode) */
static int m_forward(lua_State *L)
{
    const rp_model_cfg cfg = *rp_model_config(lrp_checkmodel(L, 1));
    lua_settop(L, 2);
    grid g;
    int32_t *tok = check_tokens(L, 2, &cfg, &g);
    int64_t shape[3] = {g.B, g.T, cfg.vocab};
    float *out = push_out(L, 3, shape);
    rp_model *m = eval_forward(L, tok, &g);
    memcpy(out, rp_model_logits(m), (size_t)lrp_numel(3, shape) * sizeof(float));
    return 1;
}

/* m:loss(tokens, targets[, mask]) -> mean cross-entropy over scored positions (eval mode; nan
 * when nothing is scored) */
static int m_loss(lua_State *L)
{
    const rp_model_cfg cfg = *rp_model_config(lrp_checkmodel(L, 1));
    lua_settop(L, 4);
    grid g;
    int32_t *tok = check_tokens(L, 2, &cfg, &g);
    int32_t *tgt = check_targets(L, 3, &cfg, &g);
    uint8_t *mask = check_mask(L, 4, &g);
    float loss = 0.0f;
    rp_status st = rp_model_forward(lrp_checkmodel(L, 1), tok, tgt, mask, g.B, g.T, 0, &loss);
    if (st != RP_OK) return lrp_raise(L, st);
    lua_pushnumber(L, (lua_Number)loss);
    return 1;
}

/* m:train_step(tokens, targets, mask_or_nil, opt[, {nonfinite = "error" | "skip"}])
 *   -> loss, grad_norm, updated */
static int m_train_step(lua_State *L)
{
    static const char *const known[] = {"nonfinite", NULL};
    const rp_model_cfg cfg = *rp_model_config(lrp_checkmodel(L, 1));
    lua_settop(L, 6);
    grid g;
    int32_t *tok = check_tokens(L, 2, &cfg, &g);
    int32_t *tgt = check_targets(L, 3, &cfg, &g);
    if (luaL_testudata(L, 4, LRP_OPTIM_MT) && lua_isnil(L, 5))
        return lrp_argerror(L, 4, "mask or nil expected before the optimiser "
                                  "(m:train_step(tokens, targets, nil, opt))");
    uint8_t *mask = check_mask(L, 4, &g);
    lrp_checkoptim_for(L, 5, 1);
    lrp_checkopts(L, 6, known);
    int skip = lrp_optenum(L, 6, "nonfinite", lrp_nonfinite_names, 0);
    int64_t scored = 0;
    for (int64_t n = 0; n < g.B * g.T; n++)
        if (tgt[n] >= 0 && (mask == NULL || mask[n])) scored++;
    if (scored == 0)
        return lrp_argerror(L, 3, "no position is scored (every target is -1 or masked out)");

    /* every Lua value is read: fetch the objects, then no Lua call until core is done */
    rp_model *m = lrp_checkmodel(L, 1);
    lrp_optim *o = lrp_checkoptim_for(L, 5, 1);
    float loss = 0.0f;
    rp_status st = rp_model_forward(m, tok, tgt, mask, g.B, g.T, 1, &loss);
    if (st != RP_OK) return lrp_raise(L, st);
    double norm = (double)NAN;
    if (isfinite(loss)) {
        rp_model_zero_grad(m);
        st = rp_model_backward(m);
        if (st != RP_OK) return lrp_raise(L, st);
        norm = rp_adam_step(&o->cfg, &o->st, rp_model_params(m)->data, rp_model_grads(m)->data,
                            o->st.n); /* updates nothing when the norm is not finite */
    }
    int updated = isfinite(loss) && isfinite(norm);
    if (!updated && !skip) {
        double bad = isfinite(loss) ? norm : (double)loss;
        return luaL_error(L, "train_step: the %s is %s; the weights were not updated (pass "
                             "{nonfinite = \"skip\"} to skip such steps)",
                          isfinite(loss) ? "gradient norm" : "loss",
                          isnan(bad) ? "nan" : bad > 0 ? "inf" : "-inf");
    }
    lua_pushnumber(L, (lua_Number)loss);
    lua_pushnumber(L, (lua_Number)norm);
    lua_pushboolean(L, updated);
    return 3;
}

/* m:attention(layer, tokens) -> att [B x H x T x T] of layer (1-based) after an eval forward */
static int m_attention(lua_State *L)
{
    const rp_model_cfg cfg = *rp_model_config(lrp_checkmodel(L, 1));
    lua_Integer layer = lrp_checkint(L, 2, "layer");
    if (layer < 1 || layer > cfg.layers)
        return lrp_argerror(L, 2, "layer %I out of range (the model has %I layers)",
                            (LUAI_UACINT)layer, (LUAI_UACINT)cfg.layers);
    lua_settop(L, 3);
    grid g;
    int32_t *tok = check_tokens(L, 3, &cfg, &g);
    int64_t shape[4] = {g.B, cfg.heads, g.T, g.T};
    float *out = push_out(L, 4, shape);
    rp_model *m = eval_forward(L, tok, &g);
    if (cfg.attention == RP_ATTN_LINEAR) {
        /* the normalised linear weights w_nm / den_n, recomputed from the saved q and k */
        rp_status st = rp_model_linear_weights(m, (int64_t)layer - 1, out);
        if (st != RP_OK) return lrp_raise(L, st);
        return 1;
    }
    memcpy(out, rp_model_attention_weights(m, (int64_t)layer - 1),
           (size_t)lrp_numel(4, shape) * sizeof(float));
    return 1;
}

/* m:linear_stats(tokens) -> min_weight, min_den: after an eval forward of a linear-attention
 * model, the smallest normalised weight w_nm / den_n (negative when the rotated numerator is) and
 * the smallest denominator, over every layer, sequence, head and position. */
static int m_linear_stats(lua_State *L)
{
    const rp_model_cfg cfg = *rp_model_config(lrp_checkmodel(L, 1));
    if (cfg.attention != RP_ATTN_LINEAR)
        return luaL_error(L, "linear_stats needs a model with linear attention (this one uses "
                             "softmax)");
    lua_settop(L, 2);
    grid g;
    int32_t *tok = check_tokens(L, 2, &cfg, &g);
    rp_model *m = eval_forward(L, tok, &g);
    double min_w, min_den;
    rp_status st = rp_model_linear_stats(m, &min_w, &min_den);
    if (st != RP_OK) return lrp_raise(L, st);
    lua_pushnumber(L, (lua_Number)min_w);
    lua_pushnumber(L, (lua_Number)min_den);
    return 2;
}

/* m:activations(tokens) -> { [0] = embedding output, [l] = residual stream after layer l },
 * each [B x T x C] */
static int m_activations(lua_State *L)
{
    const rp_model_cfg cfg = *rp_model_config(lrp_checkmodel(L, 1));
    lua_settop(L, 2);
    grid g;
    int32_t *tok = check_tokens(L, 2, &cfg, &g); /* 3 */
    int64_t shape[3] = {g.B, g.T, cfg.d_model};
    /* every result exists before the forward runs */
    lua_createtable(L, (int)cfg.layers, 1); /* 4 */
    for (int64_t l = -1; l < cfg.layers; l++) {
        push_out(L, 3, shape);
        lua_rawseti(L, 4, (lua_Integer)(l + 1));
    }
    rp_model *m = eval_forward(L, tok, &g);
    size_t bytes = (size_t)lrp_numel(3, shape) * sizeof(float);
    for (int64_t l = -1; l < cfg.layers; l++) {
        lua_rawgeti(L, 4, (lua_Integer)(l + 1));
        memcpy(rp_tensor_data(lrp_totensor(L, -1)), rp_model_residual(m, l), bytes);
        lua_pop(L, 1);
    }
    return 1;
}

/* m:generate(prompt, n[, opts]) -> table of new token ids */
static int m_generate(lua_State *L)
{
    static const char *const known[] = {"temperature", "top_k", "seed", "rng", "stop", NULL};
    const rp_model_cfg cfg = *rp_model_config(lrp_checkmodel(L, 1));
    lua_settop(L, 4);
    grid g;
    probe_grid(L, 2, "prompt", 0, &g);
    int32_t *prompt = push_ids(L, g.T); /* 5 */
    fill_grid(L, 2, "prompt", IDS_TOKEN, cfg.vocab, &g, prompt);
    lua_Integer n = lrp_checkint(L, 3, "n");
    if (n < 0 || n > RP_I32_MAX)
        return lrp_argerror(L, 3, "n must be between 0 and 2^31-1, got %I", (LUAI_UACINT)n);

    lrp_checkopts(L, 4, known);
    rp_gen_cfg gc;
    memset(&gc, 0, sizeof gc);
    gc.temperature = lrp_optfinite(L, 4, "temperature", 0.0);
    if (gc.temperature < 0.0) {
        lua_pushnumber(L, (lua_Number)gc.temperature);
        return lrp_argerror(L, 4, "option 'temperature' must be >= 0, got %s",
                            lrp_describe(L, -1));
    }
    lua_Integer top_k = lrp_optinteger(L, 4, "top_k", 0);
    if (top_k < 0)
        return lrp_argerror(L, 4, "option 'top_k' must be >= 0, got %I", (LUAI_UACINT)top_k);
    gc.top_k = (int64_t)top_k;
    gc.stop_token = -1;
    if (lrp_hasopt(L, 4, "stop")) {
        lua_Integer stop = lrp_optinteger(L, 4, "stop", -1);
        if (stop < 0 || stop >= cfg.vocab)
            return lrp_argerror(L, 4,
                                "option 'stop' must be a token id in 0..%I (vocab %I), got %I",
                                (LUAI_UACINT)(cfg.vocab - 1), (LUAI_UACINT)cfg.vocab,
                                (LUAI_UACINT)stop);
        gc.stop_token = (int32_t)stop;
    }
    int has_seed = lrp_hasopt(L, 4, "seed"), has_rng = lrp_hasopt(L, 4, "rng");
    if (has_seed && has_rng) return lrp_argerror(L, 4, "give option 'seed' or 'rng', not both");
    /* index 6: the generator, kept on the stack so that nothing can collect it */
    rp_rng local;
    if (has_rng) {
        lua_getfield(L, 4, "rng");
        if (luaL_testudata(L, -1, LRP_RNG_MT) == NULL)
            return lrp_argerror(L, 4, "option 'rng' must be a roper.Rng, got %s",
                                lrp_describe(L, -1));
    } else if (has_seed) {
        rp_rng_seed(&local, (uint64_t)lrp_optinteger(L, 4, "seed", 0));
        lua_pushnil(L);
    } else {
        /* the module's default generator (rp.seed reseeds it) */
        lua_getfield(L, LUA_REGISTRYINDEX, LRP_DEFAULT_RNG_KEY);
        if (luaL_testudata(L, -1, LRP_RNG_MT) == NULL) rp_rng_seed(&local, 0);
    }
    int32_t *out = push_ids(L, n > 0 ? (int64_t)n : 1); /* 7 */

    /* every Lua value is read and every buffer exists: fetch the objects, then call core */
    rp_rng *gen = (rp_rng *)luaL_testudata(L, 6, LRP_RNG_MT);
    gc.rng = gen ? gen : &local;
    int64_t n_out = 0;
    rp_status st = rp_model_generate(lrp_checkmodel(L, 1), prompt, g.T, (int64_t)n, &gc, out, &n_out);
    if (st != RP_OK) return lrp_raise(L, st);
    lua_createtable(L, (int)n_out, 0);
    for (int64_t i = 0; i < n_out; i++) {
        lua_pushinteger(L, (lua_Integer)out[i]);
        lua_rawseti(L, -2, (lua_Integer)(i + 1));
    }
    return 1;
}

/* ---- checkpoints ---- */

/* A file name at arg: a nonempty string without NUL bytes. */
static const char *check_path(lua_State *L, int arg)
{
    if (lua_type(L, arg) != LUA_TSTRING)
        lrp_argerror(L, arg, "path must be a string, got %s", lrp_describe(L, arg));
    size_t len;
    const char *path = lua_tolstring(L, arg, &len);
    if (len == 0) lrp_argerror(L, arg, "path must not be empty");
    if (strlen(path) != len) lrp_argerror(L, arg, "path contains a NUL byte");
    return path;
}

/* Pushes nil and the last core error ("path: reason"); returns 2. */
static int fail_result(lua_State *L)
{
    lua_pushnil(L);
    lua_pushstring(L, rp_last_error());
    return 2;
}

/* m:save(path[, opt[, {allow_nonfinite = false}]]) -> true | nil, "path: reason" */
static int m_save(lua_State *L)
{
    static const char *const known[] = {"allow_nonfinite", NULL};
    lrp_checkmodel(L, 1);
    const char *path = check_path(L, 2);
    if (!lua_isnoneornil(L, 3)) lrp_checkoptim_for(L, 3, 1);
    lrp_checkopts(L, 4, known);
    int allow = lrp_optboolean(L, 4, "allow_nonfinite", 0);

    /* every Lua value is read: fetch the objects */
    rp_model *m = lrp_checkmodel(L, 1);
    lrp_optim *o = lua_isnoneornil(L, 3) ? NULL : lrp_checkoptim_for(L, 3, 1);
    int bad = allow ? -1 : rp_model_first_nonfinite(m, 0);
    if (bad >= 0)
        return luaL_error(L, "m:save: parameter '%s' holds nan or inf (the model diverged); pass "
                             "{allow_nonfinite = true} to save it anyway",
                          rp_model_param(m, bad)->name);
    rp_status st = rp_checkpoint_save(path, m, o ? &o->cfg : NULL, o ? &o->st : NULL);
    if (st != RP_OK) return fail_result(L);
    lua_pushboolean(L, 1);
    return 1;
}

/* rp.load(path) -> model[, optimiser] | nil, "path: reason" */
static int l_load(lua_State *L)
{
    const char *path = check_path(L, 1);
    lua_settop(L, 1);
    /* both userdata exist before core allocates anything */
    lrp_model *mu = lrp_newmodel(L);          /* 2 */
    rp_adam_cfg def = rp_adam_cfg_default();
    lrp_optim *o = lrp_newoptim(L, 2, &def);  /* 3 */
    rp_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    if (rp_checkpoint_load(path, &ck) != RP_OK) return fail_result(L);
    mu->m = ck.model;
    if (!ck.has_optim) {
        lua_settop(L, 2);
        return 1;
    }
    int64_t n = rp_model_param_count(mu->m);
    if (ck.opt_state.n != n || rp_adam_cfg_check(&ck.opt_cfg) != RP_OK) {
        const char *why = ck.opt_state.n != n ? "optimiser state does not fit the model"
                                              : rp_last_error();
        rp_checkpoint_free_optim(&ck);
        lua_pushnil(L);
        lua_pushfstring(L, "%s: %s", path, why);
        return 2;
    }
    o->cfg = ck.opt_cfg;
    rp_status st = lrp_optim_alloc(o, n);
    if (st == RP_OK) {
        memcpy(o->st.m, ck.opt_state.m, (size_t)n * sizeof(float));
        memcpy(o->st.v, ck.opt_state.v, (size_t)n * sizeof(float));
        o->st.step = ck.opt_state.step;
    }
    rp_checkpoint_free_optim(&ck);
    if (st != RP_OK) return lrp_raise(L, st); /* rp_storage_new's message */
    return 2;
}

/* ---- registration ---- */

static const luaL_Reg model_methods[] = {
    {"linear_stats", m_linear_stats}, {"config", m_config},           {"num_params", m_num_params},
    {"params", m_params},           {"grads", m_grads},
    {"forward", m_forward},         {"loss", m_loss},
    {"train_step", m_train_step},   {"generate", m_generate},
    {"attention", m_attention},     {"activations", m_activations},
    {"save", m_save},               {NULL, NULL},
};

static const luaL_Reg model_funcs[] = {
    {"model", l_model},
    {"model_memory", l_model_memory},
    {"load", l_load},
    {NULL, NULL},
};

void lrp_open_model(lua_State *L, int mod)
{
    mod = lua_absindex(L, mod);
    luaL_newmetatable(L, LRP_MODEL_MT); /* also sets __name */
    int mt = lua_gettop(L);
    luaL_newlib(L, model_methods);
    lua_pushvalue(L, -1);
    lua_setfield(L, mod, "Model");
    lua_setfield(L, mt, "__index");
    lua_pushcfunction(L, m_release);
    lua_setfield(L, mt, "__gc");
    lua_pushcfunction(L, m_release);
    lua_setfield(L, mt, "__close");
    lua_pushcfunction(L, m_tostring);
    lua_setfield(L, mt, "__tostring");
    lua_settop(L, mt - 1);

    lua_pushvalue(L, mod);
    luaL_setfuncs(L, model_funcs, 0);
    lua_pop(L, 1);
}
