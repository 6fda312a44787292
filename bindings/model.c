/* roper.Model: the transformer of core/model/model.h (rp.model, rp.model_memory), the userdata's
 * lifetime and tostring, its config (m:config) and parameters as tensor views (m:params, m:grads),
 * checkpoints (m:save, rp.load), and the registration of every method. Running the model
 * (forward, loss, train_step, generate, introspection) is in model_run.c, safetensors files
 * (m:save_safetensors, m:load_safetensors, and rp.load for them and for .npy files) in interop.c
 * (model_run.h, interop.h); core's tables (rp.model_keys, rp.pe_modes, ...) are exported by tables.c.
 *
 * The userdata holds the rp_model pointer (NULL before rp_model_new succeeds and after
 * m:free(), __gc or __close). Every argument is checked here before core runs: the config table
 * (read by the rows of core's config schema, core/config/model_schema.h: types and names here, the
 * ranges too; then core's plan, rp_model_cfg_plan of core/config/plan.h: the rules between fields,
 * the keys that do nothing, the widths of the user's tables, whose messages become the `bad
 * argument` text), options. File errors
 * of m:save and rp.load are returned as nil, "path: reason" (Lua io style); misuse raises.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "freq.h"
#include "interop.h"
#include "model_run.h"
#include "modules.h"
#include "userdata.h"

/* ---- the userdata ---- */

/* __gc, __close and m:free(): free the model; safe on a released model and when called twice.
 * Tensor views of its parameters keep their storage. */
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
 * frequency scheme after the pe ("pe roper yarn x4 xpos 0.4", "pe rope own angles", "pe roper
 * 2-D axial positions"). */
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
    if (c->freq.scaling != RP_SCALING_NONE)
        k += (size_t)snprintf(fs + k, sizeof fs - k, " %s x%g", rp_scaling_names[c->freq.scaling],
                              c->freq.factor);
    if (c->freq.xpos > 0.0 && k < sizeof fs)
        k += (size_t)snprintf(fs + k, sizeof fs - k, " xpos %g", c->freq.xpos);
    if ((f->theta || f->angles) && k < sizeof fs)
        k += (size_t)snprintf(fs + k, sizeof fs - k, " own %s",
                              f->theta ? "frequencies" : "angles");
    if (rp_model_positions(u->m, NULL) && k < sizeof fs) {
        if (f->axes.n > 0)
            snprintf(fs + k, sizeof fs - k, " %d-D %s positions", f->axes.n,
                     rp_axes_names[f->axes.map]);
        else snprintf(fs + k, sizeof fs - k, " own positions");
    }
    lua_pushfstring(L,
                    "roper.Model: %s parameters (d_model %I, %I head%s, %I layer%s, d_ff %I, "
                    "seq_len %I, pe %s%s%s%s, %s-norm%s%s)",
                    count, (LUAI_UACINT)c->d_model, (LUAI_UACINT)c->heads, c->heads == 1 ? "" : "s",
                    (LUAI_UACINT)c->layers, c->layers == 1 ? "" : "s", (LUAI_UACINT)c->d_ff,
                    (LUAI_UACINT)c->seq_len, rp_pe_name(c->pe.mode), c->pe.rotate ? " rotate " : "",
                    rp_rotate_name(c->pe.rotate, rot), fs, rp_norm_names[c->norm],
                    c->attention == RP_ATTN_LINEAR ? ", linear attention" : "",
                    c->attention == RP_ATTN_LINEAR && c->linear_rope == RP_LIN_BEFORE
                        ? " (rope before phi)"
                        : "");
    return 1;
}

/* ---- construction ---- */

/* Reads the config table at idx into cfg as written: every key a row of the config schema
 * (core/config/model_schema.h) or freq / angles (read later), each read by its row's type and names
 * and checked against its range (an absent key keeps its default). Raises naming argument idx. */
static void read_fields(lua_State *L, int idx, rp_model_cfg *cfg)
{
    /* the keys read beside the schema's rows, in the order the unknown-key message lists them */
    static const char *const more[] = {"freq", "angles", "positions", LRP_AXES_KEYS,
                                       "rope_scaling", "rope_theta"};
    const char *known[RP_CFG_MAX_KEYS + sizeof more / sizeof *more + 1];
    int n = 0;
    for (int i = 0; i < rp_model_cfg_nkeys; i++) known[n++] = rp_model_cfg_keys[i].name;
    for (size_t i = 0; i < sizeof more / sizeof *more; i++) known[n++] = more[i];
    known[n] = NULL;
    if (lua_type(L, idx) != LUA_TTABLE)
        lrp_argerror(L, idx, "config table expected, got %s", lrp_describe(L, idx));
    lrp_checkopts(L, idx, known);
    *cfg = rp_model_cfg_default(0);
    for (int i = 0; i < rp_model_cfg_nkeys; i++) {
        const rp_cfg_key *k = &rp_model_cfg_keys[i];
        if (!lrp_hasopt(L, idx, k->name) && k->flags & RP_CFG_REQUIRED)
            lrp_opterror(L, idx, LRP_M_REQUIRED,
                         LRP_MARKS([LRP_MK_KEY] = k->name, [LRP_MK_HELP] = k->help));
        lrp_optcfgkey(L, idx, cfg, k);
    }
    /* Hugging Face's names: rope_theta for base, the rope_scaling table */
    cfg->pe.base = lrp_hasopt(L, idx, "rope_theta") ? lrp_optbase(L, idx) : cfg->pe.base;
    lrp_opt_rope_scaling(L, idx, cfg);
}

/* read_fields, then core's plan of the config (rp_model_cfg_plan: the stored form, the checks
 * every config passes, the refusal of a key whose value does nothing for the mode) into *p
 * (NULL: not kept). */
static void read_cfg(lua_State *L, int idx, rp_model_cfg *cfg, rp_model_plan *p)
{
    read_fields(L, idx, cfg);
    if (rp_model_cfg_plan(cfg, p) != RP_OK) lrp_argerror(L, idx, "%s", rp_last_error());
}

/* rp.model(cfg) -> roper.Model */
static int l_model(lua_State *L)
{
    rp_model_cfg cfg;
    rp_model_plan p;
    read_cfg(L, 1, &cfg, &p);
    lua_settop(L, 1);
    /* the user's frequencies or angles (slots 2, 3, the copy at 4), for every position and pair
     * the model rotates */
    rp_rope_freq f = p.freq;
    lua_getfield(L, 1, "freq");
    lua_getfield(L, 1, "angles");
    lrp_freq_tables(L, 1, 2, &f, p.rows, p.half);
    /* the positions and the options of their axes (slots 5 .. 8): explicit 1-D or vector
     * positions, rows for the tokens 0 .. seq_len-1 at least */
    lrp_axes_opts ax;
    lrp_optaxes(L, 1, &ax);
    int A = 0;
    int64_t rows = 0;
    const int64_t *pos = NULL;
    if (lua_getfield(L, 1, "positions") != LUA_TNIL)
        pos = lrp_read_positions(L, 1, lua_gettop(L), "option 'positions'", 0, &A, &rows);
    else lua_pushnil(L);
    lrp_axes_tables(L, 1, &ax, A, pos != NULL, p.half, f.angles != NULL, &f);
    lrp_model *u = lrp_newmodel(L);
    u->m = rp_model_new(&cfg);
    if (u->m == NULL) return lrp_argerror(L, 1, "%s", rp_last_error()); /* too large */
    if (((f.theta || f.angles) &&
         rp_model_set_freq(u->m, f.theta, f.n_theta, f.angles, f.rows, f.n_angles) != RP_OK) ||
        (pos && rp_model_set_positions(u->m, &f.axes, pos, rows) != RP_OK)) {
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
    read_cfg(L, 1, &cfg, NULL);
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

/* ---- for the Lua parts ---- */

/* internals.model_unused(cfg) -> {key = why, ...}: the keys of rp.model's config that do nothing
 * for the config table cfg (read as rp.model reads it, before its checks), with the reason
 * (rp_model_cfg_unused). Raises as rp.model for a bad table. */
static int l_model_unused(lua_State *L)
{
    rp_model_cfg cfg;
    read_fields(L, 1, &cfg);
    if (rp_model_cfg_written(&cfg) != RP_OK) return lrp_argerror(L, 1, "%s", rp_last_error());
    lua_newtable(L);
    char why[256];
    for (int i = 0; i < rp_model_cfg_nkeys; i++)
        if (rp_model_cfg_unused(&cfg, &rp_model_cfg_keys[i], why, sizeof why)) {
            lua_pushstring(L, why);
            lua_setfield(L, -2, rp_model_cfg_keys[i].name);
        }
    return 1;
}

void lrp_model_internals(lua_State *L, int priv)
{
    priv = lua_absindex(L, priv);
    lua_pushcfunction(L, l_model_unused);
    lua_setfield(L, priv, "model_unused");
    lua_pushcfunction(L, lrp_hf_rope_keys);
    lua_setfield(L, priv, "hf_rope");
}

/* ---- methods ---- */

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

/* The model's positions into the config table on top (m:config()): positions as a list (1-D)
 * or a list of lists, with axes, and sections or mix where the map has them; the model is fetched
 * at each row (an allocation may run a finalizer). */
static void push_positions(lua_State *L, int model_idx)
{
    int64_t rows = 0;
    if (!rp_model_positions(lrp_checkmodel(L, model_idx), &rows)) return;
    const rp_rope_axes ax = rp_model_freq(lrp_checkmodel(L, model_idx))->axes;
    int A = ax.n > 0 ? ax.n : 1;
    lua_createtable(L, rows > INT_MAX ? 0 : (int)rows, 0); /* (a size hint) */
    for (int64_t r = 0; r < rows; r++) {
        if (ax.n > 0) lua_createtable(L, A, 0);
        const int64_t *p = rp_model_positions(lrp_checkmodel(L, model_idx), NULL) + r * A;
        for (int a = 0; a < A; a++) {
            lua_pushinteger(L, (lua_Integer)p[a]);
            lua_rawseti(L, -2, ax.n > 0 ? a + 1 : (lua_Integer)(r + 1));
        }
        if (ax.n > 0) lua_rawseti(L, -2, (lua_Integer)(r + 1));
    }
    lua_setfield(L, -2, "positions");
    if (ax.n < 1) return;
    lua_pushstring(L, rp_axes_names[ax.map]);
    lua_setfield(L, -2, "axes");
    if (ax.map == RP_AXES_SECTIONS) {
        lua_createtable(L, A, 0);
        for (int a = 0; a < A; a++) {
            lua_pushinteger(L, (lua_Integer)ax.sections[a]);
            lua_rawseti(L, -2, a + 1);
        }
        lua_setfield(L, -2, "sections");
    }
    if (ax.map == RP_AXES_MIXED) {
        lua_createtable(L, A, 0);
        for (int a = 0; a < A; a++) {
            lua_createtable(L, (int)ax.n_mix, 0);
            const double *w = rp_model_freq(lrp_checkmodel(L, model_idx))->axes.mix;
            for (int64_t i = 0; i < ax.n_mix; i++) {
                lua_pushnumber(L, (lua_Number)w[a * ax.n_mix + i]);
                lua_rawseti(L, -2, (lua_Integer)(i + 1));
            }
            lua_rawseti(L, -2, a + 1);
        }
        lua_setfield(L, -2, "mix");
    }
}

/* m:config() -> table: the keys of rp.model's config that do something for this model (a key
 * whose value does nothing is left out: rp.model refuses it unless it is at its default, and a
 * file of an older roper may hold one), without the unset ones (an RP_CFG_SHOW_SET key at its
 * default); rotate as the placements rotated (the mode's own when not set); and the model's own
 * frequencies or angles, so that rp.model(m:config()) rebuilds the same model. */
static int m_config(lua_State *L)
{
    const rp_model_cfg cfg = *rp_model_config(lrp_checkmodel(L, 1)), *c = &cfg;
    const rp_pe_mode *mode = rp_pe_mode_of(c->pe.mode);
    lua_createtable(L, 0, rp_model_cfg_nkeys);
    char why[256], rot[5];
    for (int i = 0; i < rp_model_cfg_nkeys; i++) {
        const rp_cfg_key *k = &rp_model_cfg_keys[i];
        if (rp_model_cfg_unused(c, k, why, sizeof why) ||
            ((k->flags & RP_CFG_SHOW_SET) && rp_model_cfg_is_default(c, k)))
            continue;
        int64_t v = rp_model_cfg_get_int(c, k);
        switch (k->type) {
        case RP_CFG_NUM: lua_pushnumber(L, (lua_Number)rp_model_cfg_get_num(c, k)); break;
        case RP_CFG_ENUM: lua_pushstring(L, k->names[v]); break;
        case RP_CFG_ROTATE:
            lua_pushstring(L, rp_rotate_name(v ? (int)v : mode->rotate, rot));
            break;
        case RP_CFG_BOOL: lua_pushboolean(L, v != 0); break;
        default: lua_pushinteger(L, (lua_Integer)v); break;
        }
        lua_setfield(L, -2, k->name);
    }
    push_freq_tables(L, 1);
    push_positions(L, 1);
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
    const rp_cfg_key *kb = rp_model_cfg_key("max_batch", 9); /* its range: the schema's row */
    if (lrp_hasopt(L, 2, "max_batch") &&
        (max_batch < (lua_Integer)kb->lo || max_batch > (lua_Integer)kb->hi))
        return lrp_argerror(L, 2, "option 'max_batch' must be in %I..%I, got %I",
                            (LUAI_UACINT)kb->lo, (LUAI_UACINT)kb->hi, (LUAI_UACINT)max_batch);
    lua_settop(L, 1);
    path = lua_tostring(L, 1);
    unsigned char head[16];
    size_t got = 0;
    if (rp_file_peek(path, head, sizeof head, &got) != RP_OK) return lrp_pushfail(L);
    /* RPCK first: a checkpoint's bytes 0..8 may also pass the safetensors test (its byte 8, the
     * low byte of its size, is '{' for one size in 256) */
    int other = rp_checkpoint_magic(head, got) ? 0 : rp_npy_magic(head, got) ? 1
              : rp_safetensors_magic(head, got) ? 2 : 0;
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
    {"losses", lrp_model_losses},
    {"train_step", lrp_model_train_step},   {"generate", lrp_model_generate},
    {"attention", lrp_model_attention},     {"activations", lrp_model_activations},
    {"generate_batch", lrp_model_generate_batch}, {"lanes", lrp_model_lanes},
    {"save", m_save},               {"save_safetensors", lrp_model_save_safetensors},
    {"load_safetensors", lrp_model_load_safetensors},  {NULL, NULL},
};

static const luaL_Reg model_funcs[] = {
    {"model", l_model},
    {"model_memory", l_model_memory},
    {"load", l_load},
    {"option_messages", lrp_option_messages},
    {NULL, NULL},
};

void lrp_open_model(lua_State *L, int mod)
{
    mod = lua_absindex(L, mod);
    lrp_open_type(L, mod, LRP_MODEL_MT, "Model", model_methods, m_release, m_tostring);
    /* the result tables' metatables: their __tostring comes from bindings/lua/print.lua */
    const char *const result_mts[] = {LRP_PARAMS_MT, LRP_GRADS_MT, LRP_MEMORY_MT};
    for (int i = 0; i < 3; i++) {
        luaL_newmetatable(L, result_mts[i]);
        lua_pop(L, 1);
    }

    lua_pushvalue(L, mod);
    luaL_setfuncs(L, model_funcs, 0);
    lua_pop(L, 1);
}
