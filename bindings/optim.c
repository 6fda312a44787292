/* roper.Optim: Adam and AdamW over a model's flat parameter buffer (rp.optim.adam,
 * rp.optim.adamw), with gradient clipping and learning-rate schedules (core/nn/optim.h).
 *
 * The userdata holds the rp_adam_cfg, the rp_adam_state and the storage of its moments m and v
 * (2n floats, n = the model's parameter count); its user value is the roper.Model it updates, so
 * the model lives as long as the optimiser. Options are type-checked here; their ranges by
 * rp_adam_cfg_check, whose message becomes the `bad argument` text. Userdata are created empty
 * first, so a Lua error never leaks the moments.
 */
#include <math.h>
#include <stdio.h>

#include "args.h"
#include "modules.h"
#include "userdata.h"

/* ---- the userdata ---- */

/* __gc, __close and opt:free(): free the moments; safe on a released optimiser and when called
 * twice. */
static int o_release(lua_State *L)
{
    lrp_optim *o = (lrp_optim *)luaL_testudata(L, 1, LRP_OPTIM_MT);
    if (o && o->buf) {
        rp_storage_release(o->buf);
        o->buf = NULL;
        o->st.m = o->st.v = NULL;
    }
    return 0;
}

static const char *kind_name(const rp_adam_cfg *cfg)
{
    return cfg->decoupled ? "adamw" : "adam";
}

/* tostring(opt): "roper.Optim: adam, lr 0.01 (constant schedule), 12 steps". */
static int o_tostring(lua_State *L)
{
    lrp_optim *o = (lrp_optim *)lrp_checkudata(L, 1, LRP_OPTIM_MT);
    if (o->buf == NULL) {
        lua_pushliteral(L, "roper.Optim (released)");
        return 1;
    }
    char lr[32];
    snprintf(lr, sizeof lr, "%g", o->cfg.lr);
    lua_pushfstring(L, "roper.Optim: %s, lr %s (%s schedule), %I step%s", kind_name(&o->cfg), lr,
                    rp_schedule_names[o->cfg.schedule], (LUAI_UACINT)o->st.step,
                    o->st.step == 1 ? "" : "s");
    return 1;
}

/* ---- construction ---- */

/* Reads the options table at idx into cfg (over its defaults and cfg->decoupled): the rows of
 * the optimiser's keys that are options (core/nn/optim.h; a pair, beta1 and beta2, as one option
 * {beta1, beta2}), in row order, and kind; raises naming the option. */
static void read_opts(lua_State *L, int idx, rp_adam_cfg *cfg)
{
    const char *known[64];
    int n = 0;
    for (int i = 0; i < rp_adam_nkeys && n < 62; i++) {
        const rp_optim_key *k = &rp_adam_keys[i];
        if (!(k->flags & RP_OPT_OPTION)) continue;
        if (k->pair && !(k->flags & RP_OPT_PAIR)) continue; /* the second of a pair */
        known[n++] = k->pair ? k->pair : k->name;
    }
    known[n++] = "kind";
    known[n] = NULL;
    const char *const *kinds = rp_adam_kind_names;
    lrp_checkopts(L, idx, known);
    /* kind (as opt:config() reports it) may be given, but must name this constructor */
    if (lrp_hasopt(L, idx, "kind") &&
        lrp_optenum(L, idx, "kind", kinds, cfg->decoupled) != cfg->decoupled)
        lrp_argerror(L, idx, "option 'kind' is \"%s\", but this is rp.optim.%s",
                     kinds[!cfg->decoupled], kinds[cfg->decoupled]);
    for (int i = 0; i < rp_adam_nkeys; i++) {
        const rp_optim_key *k = &rp_adam_keys[i];
        if (!(k->flags & RP_OPT_OPTION) || (k->pair && !(k->flags & RP_OPT_PAIR))) continue;
        if (k->flags & RP_OPT_PAIR) { /* {first, second}: this row and the next */
            if (!lrp_hasopt(L, idx, k->pair)) continue;
            lua_getfield(L, idx, k->pair);
            int ok = lua_type(L, -1) == LUA_TTABLE && lua_rawlen(L, -1) == 2;
            double b[2] = {0, 0};
            for (int j = 0; ok && j < 2; j++) {
                if (lua_rawgeti(L, -1, j + 1) != LUA_TNUMBER) ok = 0;
                else b[j] = (double)lua_tonumber(L, -1);
                lua_pop(L, 1);
            }
            if (!ok)
                lrp_argerror(L, idx, "option '%s' must be a table of two numbers {%s, %s}, got %s",
                             k->pair, k->name, k[1].name, lrp_describe(L, -1));
            rp_adam_cfg_set(cfg, k, b[0]);
            rp_adam_cfg_set(cfg, &k[1], b[1]);
            lua_pop(L, 1);
        } else if (k->type == RP_OPT_NUM) {
            rp_adam_cfg_set(cfg, k, lrp_optnumber(L, idx, k->name, rp_adam_cfg_get(cfg, k)));
        } else if (k->type == RP_OPT_INT) {
            lua_Integer def = (lua_Integer)rp_adam_cfg_get_int(cfg, k);
            rp_adam_cfg_set_int(cfg, k, (int64_t)lrp_optinteger(L, idx, k->name, def));
        } else {
            int def = (int)rp_adam_cfg_get_int(cfg, k);
            rp_adam_cfg_set_int(cfg, k, lrp_optenum(L, idx, k->name, k->names, def));
        }
    }
}

/* rp.optim.adam(m[, opts]) and rp.optim.adamw(m[, opts]) (upvalue 1: decoupled). */
static int l_new(lua_State *L)
{
    int decoupled = (int)lua_tointeger(L, lua_upvalueindex(1));
    rp_model *m = lrp_checkmodel(L, 1);
    int64_t nparams = rp_model_param_count(m);
    rp_adam_cfg cfg = rp_adam_cfg_default();
    cfg.decoupled = decoupled;
    cfg.d_model = (double)rp_model_config(m)->d_model;
    read_opts(L, 2, &cfg); /* may run Lua code: m is not used after this */
    if (rp_adam_cfg_check(&cfg) != RP_OK) return lrp_argerror(L, 2, "%s", rp_last_error());
    lua_settop(L, 2);
    lrp_optim *o = lrp_newoptim(L, 1, &cfg);
    lrp_checkmodel(L, 1); /* still alive after the reads and the allocation */
    rp_status st = lrp_optim_alloc(o, nparams);
    if (st != RP_OK) return lrp_raise(L, st);
    return 1;
}

/* ---- methods ---- */

/* opt:step([{nonfinite = "error" | "skip"}]) -> grad_norm, updated: one update of the model from
 * its current gradients (clipped in place when clip > 0); grad_norm is the norm before clipping.
 * A gradient holding nan or inf updates nothing and raises (or, with nonfinite = "skip", returns
 * the norm and false). */
static int o_step(lua_State *L)
{
    static const char *const known[] = {"nonfinite", NULL};
    lrp_checkoptim(L, 1);
    lrp_checkopts(L, 2, known);
    int skip = lrp_optenum(L, 2, "nonfinite", lrp_nonfinite_names, 0);
    lrp_optim *o = lrp_checkoptim(L, 1);
    rp_model *m = lrp_optim_model(L, 1);
    float *w = rp_model_params(m)->data, *g = rp_model_grads(m)->data;
    double norm = rp_adam_step(&o->cfg, &o->st, w, g, o->st.n);
    int updated = isfinite(norm);
    if (!updated && !skip)
        return luaL_error(L, "step: the gradient norm is %s; the weights were not updated (pass "
                             "{nonfinite = \"skip\"} to skip such steps)",
                          isnan(norm) ? "nan" : "inf");
    lua_pushnumber(L, (lua_Number)norm);
    lua_pushboolean(L, updated);
    return 2;
}

/* opt:lr(): the learning rate the next step uses. */
static int o_lr(lua_State *L)
{
    lrp_optim *o = lrp_checkoptim(L, 1);
    lua_pushnumber(L, (lua_Number)rp_lr_at(&o->cfg, rp_adam_next_step(&o->st)));
    return 1;
}

/* opt:steps(): steps taken so far. */
static int o_steps(lua_State *L)
{
    lrp_optim *o = lrp_checkoptim(L, 1);
    lua_pushinteger(L, (lua_Integer)o->st.step);
    return 1;
}

/* opt:config(): the options (as accepted by rp.optim.adam/adamw: the option rows of the
 * optimiser's keys) and kind = "adam" | "adamw". */
static int o_config(lua_State *L)
{
    lrp_optim *o = lrp_checkoptim(L, 1);
    const rp_adam_cfg *c = &o->cfg;
    lua_createtable(L, 0, rp_adam_nkeys);
    lua_pushstring(L, kind_name(c));
    lua_setfield(L, -2, "kind");
    for (int i = 0; i < rp_adam_nkeys; i++) {
        const rp_optim_key *k = &rp_adam_keys[i];
        if (!(k->flags & RP_OPT_OPTION) || (k->pair && !(k->flags & RP_OPT_PAIR))) continue;
        double v = rp_adam_cfg_get(c, k);
        int64_t iv = k->type == RP_OPT_NUM ? 0 : rp_adam_cfg_get_int(c, k);
        if (k->flags & RP_OPT_PAIR) {
            lua_createtable(L, 2, 0);
            lua_pushnumber(L, (lua_Number)v);
            lua_rawseti(L, -2, 1);
            lua_pushnumber(L, (lua_Number)rp_adam_cfg_get(c, &k[1]));
            lua_rawseti(L, -2, 2);
            lua_setfield(L, -2, k->pair);
            continue;
        }
        if (k->type == RP_OPT_NUM) lua_pushnumber(L, (lua_Number)v);
        else if (k->type == RP_OPT_INT) lua_pushinteger(L, (lua_Integer)iv);
        else lua_pushstring(L, k->names[iv]);
        lua_setfield(L, -2, k->name);
    }
    return 1;
}

static const luaL_Reg optim_methods[] = {
    {"step", o_step}, {"lr", o_lr}, {"steps", o_steps}, {"config", o_config}, {NULL, NULL},
};

void lrp_open_optim(lua_State *L, int mod)
{
    mod = lua_absindex(L, mod);
    lrp_open_type(L, mod, LRP_OPTIM_MT, "Optim", optim_methods, o_release, o_tostring);

    lua_createtable(L, 0, 2);
    lua_pushinteger(L, 0);
    lua_pushcclosure(L, l_new, 1);
    lua_setfield(L, -2, "adam");
    lua_pushinteger(L, 1);
    lua_pushcclosure(L, l_new, 1);
    lua_setfield(L, -2, "adamw");
    lua_setfield(L, mod, "optim");
}
