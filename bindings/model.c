/* roper.Model: the transformer of core/model.h (rp.model, rp.model_memory), the userdata's
 * lifetime and tostring, its config (m:config) and parameters as tensor views (m:params, m:grads),
 * checkpoints (m:save, rp.load), and the registration of every method. Running the model
 * (forward, loss, train_step, generate, introspection) is in model_run.c, safetensors files
 * (m:save_safetensors, m:load_safetensors, and rp.load for them and for .npy files) in interop.c
 * (model_methods.h).
 *
 * The userdata holds the rp_model pointer (NULL before rp_model_new succeeds and after
 * __gc/__close). Every argument is checked here before core runs: the config table (types and
 * enum names here, ranges by rp_model_cfg_check, whose message becomes the `bad argument` text),
 * options. File errors of m:save and rp.load are returned as nil, "path: reason" (Lua io style);
 * misuse raises.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "freq.h"
#include "model_methods.h"
#include "roper.h"
#include "userdata.h"

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
 * seq_len 512, pe roper, pre-norm)", with ", linear attention" for linear attention and the
 * frequency scheme after the pe ("pe roper yarn x4 xpos 0.4", "pe rope own angles"). */
static int m_tostring(lua_State *L)
{
    lrp_model *u = (lrp_model *)lrp_checkudata(L, 1, LRP_MODEL_MT);
    if (u->m == NULL) {
        lua_pushliteral(L, "roper.Model (released)");
        return 1;
    }
    const rp_model_cfg *c = rp_model_config(u->m);
    char count[32], rot[5], fs[96] = "";
    count_str(count, sizeof count, rp_model_param_count(u->m));
    const rp_rope_freq *f = rp_model_freq(u->m);
    size_t k = 0;
    if (c->scaling != RP_SCALING_NONE)
        k += (size_t)snprintf(fs + k, sizeof fs - k, " %s x%g", rp_scaling_names[c->scaling],
                              c->scaling_factor);
    if (c->xpos > 0.0 && k < sizeof fs)
        k += (size_t)snprintf(fs + k, sizeof fs - k, " xpos %g", c->xpos);
    if ((f->theta || f->angles) && k < sizeof fs)
        snprintf(fs + k, sizeof fs - k, " own %s", f->theta ? "frequencies" : "angles");
    lua_pushfstring(L,
                    "roper.Model: %s parameters (d_model %I, %I head%s, %I layer%s, d_ff %I, "
                    "seq_len %I, pe %s%s%s%s, %s-norm%s%s)",
                    count, (LUAI_UACINT)c->d_model, (LUAI_UACINT)c->heads, c->heads == 1 ? "" : "s",
                    (LUAI_UACINT)c->layers, c->layers == 1 ? "" : "s", (LUAI_UACINT)c->d_ff,
                    (LUAI_UACINT)c->seq_len, rp_pe_name(c->pe), c->rotate ? " rotate " : "",
                    rp_rotate_name(c->rotate, rot), fs, rp_norm_names[c->norm],
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
                                        "attention", "linear_rope", "rotate",     "fraction_q",
                                        "fraction_k", "fraction_o", "rel_clip",   "rel_buckets",
                                        "rel_max_distance", LRP_FREQ_KEYS, NULL};
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
    cfg->norm = (rp_norm)lrp_optenum(L, idx, "norm", rp_norm_names, (int)cfg->norm);
    cfg->act = (rp_act)lrp_optenum(L, idx, "activation", rp_act_names, (int)cfg->act);
    cfg->dropout = lrp_optnumber(L, idx, "dropout", cfg->dropout);
    cfg->pe = (rp_pe)lrp_optenum(L, idx, "pe", rp_pe_names, (int)cfg->pe);
    cfg->fraction_qk = lrp_optnumber(L, idx, "fraction_qk", cfg->fraction_qk);
    cfg->fraction_v = lrp_optnumber(L, idx, "fraction_v", cfg->fraction_v);
    cfg->rope_base = lrp_optnumber(L, idx, "base", cfg->rope_base);
    cfg->pairing =
        (rp_pairing)lrp_optenum(L, idx, "pairing", lrp_pairing_names, (int)cfg->pairing);
    cfg->seed = (uint64_t)lrp_optinteger(L, idx, "seed", 0);
    cfg->attention =
        (rp_attn_kind)lrp_optenum(L, idx, "attention", rp_attn_names, (int)cfg->attention);
    cfg->linear_rope = lrp_optplacement(L, idx, "linear_rope", cfg->linear_rope);
    cfg->rotate = lrp_optrotate(L, idx, "rotate");
    cfg->fraction_q = lrp_optnumber(L, idx, "fraction_q", 0.0);
    cfg->fraction_k = lrp_optnumber(L, idx, "fraction_k", 0.0);
    cfg->fraction_o = lrp_optnumber(L, idx, "fraction_o", 0.0);
    const struct {
        const char *key;
        int64_t *at;
    } rel[] = {{"rel_clip", &cfg->rel_clip}, {"rel_buckets", &cfg->rel_buckets},
               {"rel_max_distance", &cfg->rel_max_distance}};
    for (int i = 0; i < 3; i++) {
        lua_Integer v = lrp_optinteger(L, idx, rel[i].key, (lua_Integer)*rel[i].at);
        if (v < 1 || v > RP_I32_MAX)
            lrp_argerror(L, idx, "option '%s' must be between 1 and 2^31-1, got %I", rel[i].key,
                         (LUAI_UACINT)v);
        *rel[i].at = (int64_t)v;
    }
    /* the frequency scalars (the tables: read_freq_tables) */
    cfg->scaling = (rp_rope_scaling)lrp_optenum(L, idx, "scaling", rp_scaling_names, 0);
    cfg->scaling_factor = lrp_optnumber(L, idx, "scaling_factor", 1.0);
    lua_Integer ol = lrp_optinteger(L, idx, "orig_len", 0);
    if (ol < 0 || ol > RP_I32_MAX)
        lrp_argerror(L, idx, "option 'orig_len' must be between 0 (seq_len) and 2^31-1, got %I",
                     (LUAI_UACINT)ol);
    cfg->orig_len = (int64_t)ol;
    cfg->yarn_alpha = lrp_optnumber(L, idx, "yarn_alpha", RP_YARN_ALPHA);
    cfg->yarn_beta = lrp_optnumber(L, idx, "yarn_beta", RP_YARN_BETA);
    cfg->xpos = lrp_optnumber(L, idx, "xpos", 0.0);
    cfg->xpos_scale_base = lrp_optnumber(L, idx, "xpos_scale_base", RP_XPOS_SCALE_BASE);
    /* checked here for every pe (core checks fractions only for the modes that rotate), and with
     * the Lua names ("base" is core's rope_base); fraction_q, _k, _o only when given */
    const char *keys[] = {"fraction_qk", "fraction_v", "fraction_q", "fraction_k", "fraction_o"};
    double fr[] = {cfg->fraction_qk, cfg->fraction_v, cfg->fraction_q, cfg->fraction_k,
                   cfg->fraction_o};
    for (int i = 0; i < 5; i++)
        if (!(fr[i] > 0.0 && fr[i] <= 1.0) && (i < 2 || lrp_hasopt(L, idx, keys[i]))) {
            lua_pushnumber(L, (lua_Number)fr[i]);
            lrp_argerror(L, idx, "option '%s' must be in (0, 1], got %s", keys[i],
                         lrp_describe(L, -1));
        }
    if (!(cfg->rope_base > 0.0 && isfinite(cfg->rope_base))) {
        lua_pushnumber(L, (lua_Number)cfg->rope_base);
        lrp_argerror(L, idx, "option 'base' must be a finite number > 0, got %s",
                     lrp_describe(L, -1));
    }
    const rp_pe_mode *mode = rp_pe_mode_of(cfg->pe);
    if (cfg->rotate && !mode->rotary)
        lrp_argerror(L, idx, "option 'rotate' needs a rotary pe (rope, roper or roper_legacy), "
                             "got pe '%s'", mode->name);
    /* one model, one config: the mode's own placements and the shared fractions are stored as
     * "not set", so equal models have equal configs (and checkpoints) */
    if (cfg->rotate == mode->rotate) cfg->rotate = 0;
    if (cfg->fraction_q == cfg->fraction_qk) cfg->fraction_q = 0.0;
    if (cfg->fraction_k == cfg->fraction_qk) cfg->fraction_k = 0.0;
    if (cfg->fraction_o == cfg->fraction_v) cfg->fraction_o = 0.0;
}

/* rp.model(cfg) -> roper.Model */
static int l_model(lua_State *L)
{
    rp_model_cfg cfg;
    read_cfg(L, 1, &cfg);
    if (rp_model_cfg_check(&cfg) != RP_OK) return lrp_argerror(L, 1, "%s", rp_last_error());
    lua_settop(L, 1);
    /* the user's frequencies or angles (slots 2, 3, the copy at 4), for every position and pair
     * the model rotates */
    rp_rope_freq f = rp_model_cfg_freq(&cfg); /* the scalars are read_cfg's */
    lua_getfield(L, 1, "freq");
    lua_getfield(L, 1, "angles");
    rp_pe_scheme s = rp_model_cfg_scheme(&cfg);
    int64_t d_rot[4] = {s.d_rot_q, s.d_rot_k, s.d_rot_v, s.d_rot_o}, half = 0;
    for (int i = 0; i < 4; i++) half = d_rot[i] / 2 > half ? d_rot[i] / 2 : half;
    lrp_freq_tables(L, 1, 2, &f, cfg.seq_len, half);
    lrp_model *u = lrp_newmodel(L);
    u->m = rp_model_new(&cfg);
    if (u->m == NULL) return lrp_argerror(L, 1, "%s", rp_last_error()); /* too large */
    if ((f.theta || f.angles) &&
        rp_model_set_freq(u->m, f.theta, f.n_theta, f.angles, f.rows, f.n_angles) != RP_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", rp_last_error());
        rp_model_free(u->m);
        u->m = NULL;
        return lrp_argerror(L, 1, "%s", msg);
    }
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
    luaL_setmetatable(L, LRP_MEMORY_MT); /* prints the bytes with their units */
    return 1;
}

/* ---- methods ---- */

/* The frequency keys of m:config() (at the table on top): the scalars that differ from the
 * defaults, and the model's own frequencies as a list (freq) or a list of lists (angles), exact
 * doubles, so that rp.model(m:config()) rebuilds the same scheme. */
static void push_freq_config(lua_State *L, const rp_model_cfg *c)
{
    if (c->scaling != RP_SCALING_NONE) {
        lua_pushstring(L, rp_scaling_names[c->scaling]);
        lua_setfield(L, -2, "scaling");
        lua_pushnumber(L, (lua_Number)c->scaling_factor);
        lua_setfield(L, -2, "scaling_factor");
    }
    if (c->scaling == RP_SCALING_YARN) {
        const struct {
            const char *key;
            double v;
        } y[2] = {{"yarn_alpha", c->yarn_alpha}, {"yarn_beta", c->yarn_beta}};
        for (int i = 0; i < 2; i++) {
            lua_pushnumber(L, (lua_Number)y[i].v);
            lua_setfield(L, -2, y[i].key);
        }
    }
    if (c->orig_len > 0) {
        lua_pushinteger(L, (lua_Integer)c->orig_len);
        lua_setfield(L, -2, "orig_len");
    }
    if (c->xpos > 0.0) {
        lua_pushnumber(L, (lua_Number)c->xpos);
        lua_setfield(L, -2, "xpos");
        lua_pushnumber(L, (lua_Number)c->xpos_scale_base);
        lua_setfield(L, -2, "xpos_scale_base");
    }
}

/* The model's own frequencies into the config table on top (m:config()): freq as a list, angles
 * as a list of lists; each allocation may run a finalizer, so the model is fetched at each row. */
static void push_freq_tables(lua_State *L, int model_idx)
{
    const rp_rope_freq *f = rp_model_freq(lrp_checkmodel(L, model_idx));
    int64_t rows = f->theta ? 1 : f->angles ? f->rows : 0;
    int64_t n = f->theta ? f->n_theta : f->n_angles;
    if (!rows) return;
    int is_theta = f->theta != NULL;
    lua_createtable(L, (int)(is_theta ? n : rows), 0);
    for (int64_t r = 0; r < rows; r++) {
        if (!is_theta) lua_createtable(L, (int)n, 0);
        f = rp_model_freq(lrp_checkmodel(L, model_idx));
        const double *src = is_theta ? f->theta : f->angles + r * n;
        for (int64_t i = 0; i < n; i++) {
            lua_pushnumber(L, (lua_Number)src[i]);
            lua_rawseti(L, -2, (lua_Integer)(i + 1));
        }
        if (!is_theta) lua_rawseti(L, -2, (lua_Integer)(r + 1));
    }
    lua_setfield(L, -2, is_theta ? "freq" : "angles");
}

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
    lua_pushstring(L, rp_norm_names[c->norm]);
    lua_setfield(L, -2, "norm");
    lua_pushstring(L, rp_act_names[c->act]);
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
    lua_pushstring(L, rp_attn_names[c->attention]);
    lua_setfield(L, -2, "attention");
    lua_pushstring(L, rp_lin_placement_name(c->linear_rope));
    lua_setfield(L, -2, "linear_rope");
    const rp_pe_mode *mode = rp_pe_mode_of(c->pe);
    if (mode->rotary) { /* the placements rotated, set or the mode's own */
        char name[5];
        lua_pushstring(L, rp_rotate_name(c->rotate ? c->rotate : mode->rotate, name));
        lua_setfield(L, -2, "rotate");
    }
    const struct {
        const char *key;
        double v;
    } fr[] = {{"fraction_q", c->fraction_q}, {"fraction_k", c->fraction_k},
              {"fraction_o", c->fraction_o}};
    for (int i = 0; i < 3; i++)
        if (fr[i].v != 0.0) {
            lua_pushnumber(L, (lua_Number)fr[i].v);
            lua_setfield(L, -2, fr[i].key);
        }
    if (mode->rel == RP_REL_SHAW || mode->rel == RP_REL_DEBERTA) {
        lua_pushinteger(L, (lua_Integer)c->rel_clip);
        lua_setfield(L, -2, "rel_clip");
    }
    if (mode->rel == RP_REL_T5) {
        lua_pushinteger(L, (lua_Integer)c->rel_buckets);
        lua_setfield(L, -2, "rel_buckets");
        lua_pushinteger(L, (lua_Integer)c->rel_max_distance);
        lua_setfield(L, -2, "rel_max_distance");
    }
    push_freq_config(L, c);
    push_freq_tables(L, 1);
    return 1;
}

/* m:num_params() -> number of floats in the parameters */
static int m_num_params(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)rp_model_param_count(lrp_checkmodel(L, 1)));
    return 1;
}

/* m:params() / m:grads(): { {name =, tensor =}, ... } in layout order, and t[name] = tensor; the
 * table's metatable (LRP_PARAMS_MT, LRP_GRADS_MT) only prints it, one line per tensor. */
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
    luaL_setmetatable(L, grad ? LRP_GRADS_MT : LRP_PARAMS_MT);
    return 1;
}

static int m_params(lua_State *L) { return push_views(L, 0); }
static int m_grads(lua_State *L) { return push_views(L, 1); }

/* ---- checkpoints ---- */

/* m:save(path[, opt[, {allow_nonfinite = false}]]) -> true | nil, "path: reason" */
static int m_save(lua_State *L)
{
    static const char *const known[] = {"allow_nonfinite", NULL};
    lrp_checkmodel(L, 1);
    const char *path = lrp_checkpath(L, 2);
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
    if (st != RP_OK) return lrp_pushfail(L);
    lua_pushboolean(L, 1);
    return 1;
}

/* rp.load(path[, {max_batch = n}]) -> model[, optimiser] | tensor | model | nil, "path: reason":
 * by the file's first bytes a checkpoint (here), a .npy file (a tensor) or a safetensors file (a
 * model; both in interop.c). max_batch (checkpoints only) builds the model for n sequences
 * instead of the saved max_batch. */
static int l_load(lua_State *L)
{
    static const char *const known[] = {"max_batch", NULL};
    const char *path = lrp_checkpath(L, 1);
    lrp_checkopts(L, 2, known);
    lua_Integer max_batch = lrp_optinteger(L, 2, "max_batch", 0);
    if (lrp_hasopt(L, 2, "max_batch") && max_batch < 1)
        return lrp_argerror(L, 2, "option 'max_batch' must be >= 1, got %I",
                            (LUAI_UACINT)max_batch);
    lua_settop(L, 1);
    path = lua_tostring(L, 1);
    unsigned char head[16];
    size_t got = 0;
    if (rp_file_peek(path, head, sizeof head, &got) != RP_OK) return lrp_pushfail(L);
    int other = rp_npy_magic(head, got) ? 1 : rp_safetensors_magic(head, got) ? 2 : 0;
    if (other && max_batch > 0)
        return lrp_argerror(L, 2, "option 'max_batch' applies to roper checkpoints; %s is a %s "
                                  "file",
                            path, other == 1 ? ".npy" : "safetensors");
    if (other == 1) return lrp_load_npy(L, 1);
    if (other == 2) return lrp_load_safetensors(L, 1);
    if (!rp_checkpoint_magic(head, got)) {
        lua_pushnil(L);
        lua_pushfstring(L, "%s: %snot a roper checkpoint, .npy or safetensors file%s", path,
                        got ? "" : "empty file (", got ? "" : ")");
        return 2;
    }
    /* both userdata exist before core allocates anything */
    lrp_model *mu = lrp_newmodel(L);          /* 2 */
    rp_adam_cfg def = rp_adam_cfg_default();
    lrp_optim *o = lrp_newoptim(L, 2, &def);  /* 3 */
    rp_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    if (rp_checkpoint_load_batch(path, (int64_t)max_batch, &ck) != RP_OK) return lrp_pushfail(L);
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
    {"linear_stats", lrp_model_linear_stats}, {"config", m_config},           {"num_params", m_num_params},
    {"params", m_params},           {"grads", m_grads},
    {"forward", lrp_model_forward},         {"loss", lrp_model_loss},
    {"train_step", lrp_model_train_step},   {"generate", lrp_model_generate},
    {"attention", lrp_model_attention},     {"activations", lrp_model_activations},
    {"generate_batch", lrp_model_generate_batch},
    {"save", m_save},               {"save_safetensors", lrp_model_save_safetensors},
    {"load_safetensors", lrp_model_load_safetensors},  {NULL, NULL},
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
    /* the result tables' metatables: their __tostring comes from bindings/lua/10_print.lua */
    const char *const result_mts[] = {LRP_PARAMS_MT, LRP_GRADS_MT, LRP_MEMORY_MT};
    for (int i = 0; i < 3; i++) {
        luaL_newmetatable(L, result_mts[i]);
        lua_pop(L, 1);
    }

    lua_pushvalue(L, mod);
    luaL_setfuncs(L, model_funcs, 0);
    lua_pop(L, 1);
}
