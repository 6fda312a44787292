/* The userdata helpers of userdata.h: the collector's pace and the release methods, check and
 * create tensors, models and optimisers. */
#include <string.h>

#include "args.h"
#include "userdata.h"

/* ---- the C memory behind the userdata ---- */

/* The key of this state's pacing limit in the registry (a full userdata holding an int64_t). */
static const char pace_key = 0;

void lrp_gc_pace(lua_State *L, int tight)
{
    lua_rawgetp(L, LUA_REGISTRYINDEX, &pace_key);
    int64_t *limit = (int64_t *)lua_touserdata(L, -1);
    lua_pop(L, 1); /* the registry keeps it */
    if (limit == NULL) {
        limit = (int64_t *)lua_newuserdatauv(L, sizeof *limit, 0);
        *limit = LRP_GC_MIN_BYTES;
        lua_rawsetp(L, LUA_REGISTRYINDEX, &pace_key);
    }
    if (rp_mem_held() <= *limit) {
        int64_t avail = tight ? rp_mem_available() : -1;
        if (avail < 0 || rp_mem_held() <= avail) return;
    }
    /* 1 when running; 0 when stopped by the user (or, before Lua 5.4.4, inside a finalizer); -1
     * from 5.4.4 on inside a finalizer, where lua_gc does nothing */
    if (lua_gc(L, LUA_GCISRUNNING) == 1) lua_gc(L, LUA_GCCOLLECT);
    int kb = lua_gc(L, LUA_GCCOUNT);
    int64_t held = rp_mem_held();
    int64_t live = held + (kb > 0 ? (int64_t)kb * 1024 : 0);
    *limit = held + (live > LRP_GC_MIN_BYTES ? live : LRP_GC_MIN_BYTES);
}

/* x:free() (upvalue 1: the type's metatable name, 2: its release function): checks x, then
 * releases it. */
static int free_method(lua_State *L)
{
    lrp_checkudata(L, 1, lua_tostring(L, lua_upvalueindex(1)));
    lua_settop(L, 1);
    return lua_tocfunction(L, lua_upvalueindex(2))(L);
}

void lrp_set_release(lua_State *L, int mt, int meth, lua_CFunction release)
{
    mt = lua_absindex(L, mt);
    meth = lua_absindex(L, meth);
    lua_pushcfunction(L, release);
    lua_setfield(L, mt, "__gc");
    lua_pushcfunction(L, release);
    lua_setfield(L, mt, "__close");
    lua_getfield(L, mt, "__name");
    lua_pushcfunction(L, release);
    lua_pushcclosure(L, free_method, 2);
    lua_setfield(L, meth, "free");
}

/* ---- tensors ---- */

rp_tensor *lrp_totensor(lua_State *L, int idx)
{
    return (rp_tensor *)luaL_testudata(L, idx, LRP_TENSOR_MT);
}

rp_tensor *lrp_checktensor(lua_State *L, int idx)
{
    rp_tensor *t = (rp_tensor *)lrp_checkudata(L, idx, LRP_TENSOR_MT);
    if (t->storage == NULL) lrp_argerror(L, idx, "attempt to use a released tensor");
    return t;
}

rp_tensor *lrp_newtensor(lua_State *L)
{
    lrp_gc_pace(L, 0);
    rp_tensor *t = (rp_tensor *)lua_newuserdatauv(L, sizeof *t, 0);
    memset(t, 0, sizeof *t); /* storage NULL: empty, safe for __gc */
    luaL_setmetatable(L, LRP_TENSOR_MT);
    return t;
}

/* ---- models ---- */

rp_model *lrp_checkmodel(lua_State *L, int idx)
{
    lrp_model *u = (lrp_model *)lrp_checkudata(L, idx, LRP_MODEL_MT);
    if (u->m == NULL) lrp_argerror(L, idx, "attempt to use a released model");
    return u->m;
}

lrp_model *lrp_newmodel(lua_State *L)
{
    lrp_gc_pace(L, 1);
    lrp_model *u = (lrp_model *)lua_newuserdatauv(L, sizeof *u, 0);
    u->m = NULL; /* empty: safe for __gc */
    luaL_setmetatable(L, LRP_MODEL_MT);
    return u;
}

/* ---- optimisers ---- */

lrp_optim *lrp_checkoptim(lua_State *L, int idx)
{
    lrp_optim *o = (lrp_optim *)lrp_checkudata(L, idx, LRP_OPTIM_MT);
    if (o->buf == NULL) lrp_argerror(L, idx, "attempt to use a released optimiser");
    return o;
}

lrp_optim *lrp_newoptim(lua_State *L, int model_idx, const rp_adam_cfg *cfg)
{
    model_idx = lua_absindex(L, model_idx);
    lrp_gc_pace(L, 0);
    lrp_optim *o = (lrp_optim *)lua_newuserdatauv(L, sizeof *o, 1);
    memset(o, 0, sizeof *o); /* buf NULL: empty, safe for __gc */
    o->cfg = *cfg;
    luaL_setmetatable(L, LRP_OPTIM_MT);
    lua_pushvalue(L, model_idx);
    lua_setiuservalue(L, -2, 1);
    return o;
}

rp_status lrp_optim_alloc(lrp_optim *o, int64_t n)
{
    rp_storage *s = rp_storage_new((size_t)(2 * n));
    if (s == NULL) return RP_ERR_NOMEM;
    o->buf = s;
    o->st.m = s->data;
    o->st.v = s->data + n;
    o->st.n = n;
    o->st.step = 0;
    return RP_OK;
}

/* Pushes the user value of the optimiser at idx (its model). */
static void push_model_of(lua_State *L, int idx)
{
    lua_getiuservalue(L, idx, 1);
}

rp_model *lrp_optim_model(lua_State *L, int idx)
{
    push_model_of(L, idx);
    lrp_model *mu = (lrp_model *)luaL_testudata(L, -1, LRP_MODEL_MT);
    lua_pop(L, 1);
    if (mu == NULL || mu->m == NULL) lrp_argerror(L, idx, "the optimiser's model was released");
    return mu->m;
}

lrp_optim *lrp_checkoptim_for(lua_State *L, int opt_idx, int model_idx)
{
    opt_idx = lua_absindex(L, opt_idx);
    model_idx = lua_absindex(L, model_idx);
    if (luaL_testudata(L, opt_idx, LRP_OPTIM_MT) == NULL)
        lrp_argerror(L, opt_idx, "roper.Optim expected, got %s", lrp_describe(L, opt_idx));
    lrp_optim *o = lrp_checkoptim(L, opt_idx);
    push_model_of(L, opt_idx);
    int same = lua_rawequal(L, -1, model_idx);
    lua_pop(L, 1);
    if (!same) lrp_argerror(L, opt_idx, "the optimiser belongs to another model");
    return o;
}
