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
#include "roper.h"
#include "userdata.h"

static const char *const schedule_names[] = {"constant", "cosine", "noam", NULL};

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
                    schedule_names[o->cfg.schedule], (LUAI_UACINT)o->st.step,
                    o->st.step == 1 ? "" : "s");
    return 1;
}

/* ---- construction ---- */

/* Reads the options table at idx into cfg (over its defaults and cfg->decoupled); raises naming
 * the option. */
static void read_opts(lua_State *L, int idx, rp_adam_cfg *cfg)
{
    static const char *const known[] = {"lr",       "betas",  "eps",         "weight_decay",
                                        "clip",     "schedule", "warmup",    "total_steps",
                                        "min_lr",   "kind",     NULL};
    static const char *const kinds[] = {"adam", "adamw", NULL};
    lrp_checkopts(L, idx, known);
    /* kind (as opt:config() reports it) may be given, but must name this constructor */
    if (lrp_hasopt(L, idx, "kind") &&
        lrp_optenum(L, idx, "kind", kinds, cfg->decoupled) != cfg->decoupled)
        lrp_argerror(L, idx, "option 'kind' is \"%s\", but this is rp.optim.%s",
                     kinds[!cfg->decoupled], kinds[cfg->decoupled]);
    cfg->lr = lrp_optnumber(L, idx, "lr", cfg->lr);
    if (lrp_hasopt(L, idx, "betas")) {
        lua_getfield(L, idx, "betas");
        int ok = lua_type(L, -1) == LUA_TTABLE && lua_rawlen(L, -1) == 2;
        double b[2] = {0, 0};
        for (int i = 0; ok && i < 2; i++) {
            if (lua_rawgeti(L, -1, i + 1) != LUA_TNUMBER) ok = 0;
            else b[i] = (double)lua_tonumber(L, -1);
            lua_pop(L, 1);
        }
        if (!ok)
            lrp_argerror(L, idx, "option 'betas' must be a table of two numbers {beta1, beta2}, "
                                 "got %s",
                         lrp_describe(L, -1));
        cfg->beta1 = b[0];
        cfg->beta2 = b[1];
        lua_pop(L, 1);
    }
    cfg->eps = lrp_optnumber(L, idx, "eps", cfg->eps);
    cfg->weight_decay = lrp_optnumber(L, idx, "weight_decay", cfg->weight_decay);
    cfg->clip = lrp_optnumber(L, idx, "clip", cfg->clip);
    cfg->schedule =
        (rp_schedule)lrp_optenum(L, idx, "schedule", schedule_names, (int)cfg->schedule);
    cfg->warmup = (int64_t)lrp_optinteger(L, idx, "warmup", (lua_Integer)cfg->warmup);
    cfg->total_steps =
        (int64_t)lrp_optinteger(L, idx, "total_steps", (lua_Integer)cfg->total_steps);
    cfg->min_lr = lrp_optnumber(L, idx, "min_lr", cfg->min_lr);
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

/* opt:config(): the options (as accepted by rp.optim.adam/adamw) and kind = "adam" | "adamw". */
static int o_config(lua_State *L)
{
    lrp_optim *o = lrp_checkoptim(L, 1);
    const rp_adam_cfg *c = &o->cfg;
    lua_createtable(L, 0, 10);
    lua_pushstring(L, kind_name(c));
    lua_setfield(L, -2, "kind");
    lua_pushnumber(L, (lua_Number)c->lr);
    lua_setfield(L, -2, "lr");
    lua_createtable(L, 2, 0);
    lua_pushnumber(L, (lua_Number)c->beta1);
    lua_rawseti(L, -2, 1);
    lua_pushnumber(L, (lua_Number)c->beta2);
    lua_rawseti(L, -2, 2);
    lua_setfield(L, -2, "betas");
    lua_pushnumber(L, (lua_Number)c->eps);
    lua_setfield(L, -2, "eps");
    lua_pushnumber(L, (lua_Number)c->weight_decay);
    lua_setfield(L, -2, "weight_decay");
    lua_pushnumber(L, (lua_Number)c->clip);
    lua_setfield(L, -2, "clip");
    lua_pushstring(L, schedule_names[c->schedule]);
    lua_setfield(L, -2, "schedule");
    lua_pushinteger(L, (lua_Integer)c->warmup);
    lua_setfield(L, -2, "warmup");
    lua_pushinteger(L, (lua_Integer)c->total_steps);
    lua_setfield(L, -2, "total_steps");
    lua_pushnumber(L, (lua_Number)c->min_lr);
    lua_setfield(L, -2, "min_lr");
    return 1;
}

static const luaL_Reg optim_methods[] = {
    {"step", o_step}, {"lr", o_lr}, {"steps", o_steps}, {"config", o_config}, {NULL, NULL},
};

void lrp_open_optim(lua_State *L, int mod)
{
    mod = lua_absindex(L, mod);
    luaL_newmetatable(L, LRP_OPTIM_MT); /* also sets __name */
    int mt = lua_gettop(L);
    luaL_newlib(L, optim_methods);
    lrp_set_release(L, mt, -1, o_release);
    lua_pushvalue(L, -1);
    lua_setfield(L, mod, "Optim");
    lua_setfield(L, mt, "__index");
    lua_pushcfunction(L, o_tostring);
    lua_setfield(L, mt, "__tostring");
    lua_settop(L, mt - 1);

    lua_createtable(L, 0, 2);
    lua_pushinteger(L, 0);
    lua_pushcclosure(L, l_new, 1);
    lua_setfield(L, -2, "adam");
    lua_pushinteger(L, 1);
    lua_pushcclosure(L, l_new, 1);
    lua_setfield(L, -2, "adamw");
    lua_setfield(L, mod, "optim");
}
