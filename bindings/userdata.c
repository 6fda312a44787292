/* The userdata helpers of userdata.h: the collector's pace and the release methods, check and
 * create tensors, models and optimisers. */
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "userdata.h"

/* ---- the C memory behind the userdata ---- */

/* The key of this state's pacing state in the registry (a full userdata holding a pace_state). */
static const char pace_key = 0;

/* base: the C memory held after the last full collection, or less when a young collection has
 * since left less (an upper bound of the memory live); limit: the count above which the next
 * constructor collects. */
typedef struct pace_state {
    int64_t base, limit;
} pace_state;

/* The room above base: base itself, at least LRP_GC_MIN_BYTES and Lua's heap over
 * LRP_GC_LUA_SHARE. */
static int64_t pace_room(lua_State *L, int64_t base)
{
    int kb = lua_gc(L, LUA_GCCOUNT);
    int64_t lua_share = kb > 0 ? (int64_t)kb * 1024 / LRP_GC_LUA_SHARE : 0;
    int64_t room = base > LRP_GC_MIN_BYTES ? base : LRP_GC_MIN_BYTES;
    return lua_share > room ? lua_share : room;
}

void lrp_gc_pace(lua_State *L, int tight)
{
    lua_rawgetp(L, LUA_REGISTRYINDEX, &pace_key);
    pace_state *ps = (pace_state *)lua_touserdata(L, -1);
    lua_pop(L, 1); /* the registry keeps it */
    if (ps == NULL) {
        ps = (pace_state *)lua_newuserdatauv(L, sizeof *ps, 0);
        ps->base = 0;
        ps->limit = LRP_GC_MIN_BYTES;
        lua_rawsetp(L, LUA_REGISTRYINDEX, &pace_key);
    }
    int64_t avail = tight ? rp_mem_available() : -1;
    if (rp_mem_held() <= ps->limit && (avail < 0 || rp_mem_held() <= avail)) return;
    /* 1 when running; 0 when stopped by the user (or, before Lua 5.4.4, inside a finalizer); -1
     * from 5.4.4 on inside a finalizer, where lua_gc does nothing. The limit stays: the next
     * constructor tries again. */
    if (lua_gc(L, LUA_GCISRUNNING) != 1) return;
    /* In generational mode (lua.c's and roper's) a basic step is a young collection: it frees
     * the dead among the objects that have not yet survived two collections, at a cost that does
     * not grow with the old heap; in incremental mode it is one bounded step of the cycle, and
     * the full collection below follows. */
    lua_gc(L, LUA_GCSTEP, 0);
    int64_t held = rp_mem_held();
    if (held < ps->base) ps->base = held;
    int64_t room = pace_room(L, ps->base);
    if (held > ps->base + room / 2 || (avail >= 0 && held > avail)) {
        lua_gc(L, LUA_GCCOLLECT);
        ps->base = rp_mem_held();
        room = pace_room(L, ps->base);
    }
    ps->limit = ps->base + room;
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

void lrp_set_queries(lua_State *L, int t, lua_CFunction fn, const void *rows, size_t stride,
                     int n)
{
    t = lua_absindex(L, t);
    for (int i = 0; i < n; i++) {
        const void *row = (const char *)rows + (size_t)i * stride;
        const char *name;
        memcpy(&name, row, sizeof name);
        lua_pushlightuserdata(L, (void *)(uintptr_t)row);
        lua_pushcclosure(L, fn, 1);
        lua_setfield(L, t, name);
    }
}

void lrp_open_type(lua_State *L, int mod, const char *mt_name, const char *public_name,
                   const luaL_Reg *methods, lua_CFunction release, lua_CFunction tostring)
{
    mod = lua_absindex(L, mod);
    luaL_newmetatable(L, mt_name); /* also sets __name */
    int mt = lua_gettop(L);
    int n = 0;
    while (methods[n].name) n++;
    lua_createtable(L, 0, n + (release != NULL));
    luaL_setfuncs(L, methods, 0);
    if (release) lrp_set_release(L, mt, -1, release);
    lua_pushvalue(L, -1);
    lua_setfield(L, mod, public_name);
    lua_setfield(L, mt, "__index");
    lua_pushcfunction(L, tostring);
    lua_setfield(L, mt, "__tostring");
    lua_settop(L, mt - 1);
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

/* ---- communicators ---- */

_Noreturn void lrp_dist_abort(lua_State *L, const char *what, const char *msg)
{
    (void)L;
    fprintf(stderr, "roper: rank %d of %d: %s: %s; ending every rank of the job\n",
            rp_dist_rank(), rp_dist_size(), what, msg);
    rp_dist_abort(1);
}

void lrp_checkcomm(lua_State *L, int idx, const char *what)
{
    lrp_checkudata(L, idx, LRP_COMM_MT);
    if (!rp_dist_ready())
        luaL_error(L, "%s: MPI was finalised in this process (comm:finalize)", what);
}
