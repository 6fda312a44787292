/* rp.mpi: data-parallel communication from Lua (core/sys/dist.h) and the roper.Comm userdata.
 *
 *   local comm = rp.mpi.init()       -- under mpirun: MPI starts; otherwise one rank of one
 *   m:train_step(x, y, nil, opt, {comm = comm})   -- each rank trains on its rows of the batch
 *
 * A roper.Comm holds no state of its own: MPI is per process, so every Comm is the one world of
 * this process (rp.mpi.init returns the same userdata each time). Nothing of MPI is loaded until
 * rp.mpi.init runs in a process that mpirun (or srun) started.
 */
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "modules.h"
#include "userdata.h"

#define COMM_KEY "roper.comm" /* registry: the one roper.Comm of this state */

/* Raises the message of a failed collective: in a job of several ranks the others are waiting
 * in the same collective, so nothing can go on: the job is ended (MPI_Abort). */
static int dist_raise(lua_State *L, const char *what, rp_status st)
{
    if (rp_dist_active() && rp_dist_size() > 1) lrp_dist_abort(L, what, rp_last_error());
    return luaL_error(L, "%s: %s", what, rp_last_error());
}

/* rp.mpi.launched() -> true when mpirun (or srun with PMIx) started this process. */
static int l_launched(lua_State *L)
{
    lua_pushboolean(L, rp_dist_launched());
    return 1;
}

/* rp.mpi.init() -> comm: starts MPI when launched by it (once per process), else one rank of one.
 * Raises when the plugin or MPI fails (the message says why). */
static int l_init(lua_State *L)
{
    if (lua_getfield(L, LUA_REGISTRYINDEX, COMM_KEY) == LUA_TUSERDATA && rp_dist_ready())
        return 1;
    lua_pop(L, 1);
    rp_status st = rp_dist_init();
    if (st != RP_OK) return luaL_error(L, "rp.mpi.init: %s", rp_last_error());
    lua_newuserdatauv(L, 1, 0);
    luaL_setmetatable(L, LRP_COMM_MT);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, COMM_KEY);
    return 1;
}

/* rp.mpi.world() -> the comm of rp.mpi.init, or nil before it (and after finalize). */
static int l_world(lua_State *L)
{
    if (lua_getfield(L, LUA_REGISTRYINDEX, COMM_KEY) != LUA_TUSERDATA || !rp_dist_ready())
        lua_pushnil(L);
    return 1;
}

/* rp.mpi.plugin() -> the path of the MPI plugin rp.mpi.init would load | nil, message */
static int l_plugin(lua_State *L)
{
    char path[4096];
    if (rp_dist_plugin_path(path, sizeof path) != RP_OK) {
        lua_pushnil(L);
        lua_pushstring(L, rp_last_error());
        return 2;
    }
    lua_pushstring(L, path);
    return 1;
}

/* comm:rank(), comm:size(), comm:local_size() -> integer and comm:mpi() -> boolean (true when
 * MPI is running, several processes may take part; false for a process mpirun did not start):
 * queries of the data-parallel layer, one row each (the wrapper comes from the declaration:
 * lrp_set_queries): the name its checks give, the core function that answers it. */
typedef struct comm_query_row {
    const char *name;
    const char *what;
    int (*count)(void);
    int (*flag)(void);
} comm_query_row;

static const comm_query_row comm_queries[] = {
    {"rank", "comm:rank", rp_dist_rank, NULL},
    {"size", "comm:size", rp_dist_size, NULL},
    {"local_size", "comm:local_size", rp_dist_local_size, NULL},
    {"mpi", "comm:mpi", NULL, rp_dist_active},
};

/* One query: its row is the closure's upvalue. */
static int c_query(lua_State *L)
{
    const comm_query_row *q = (const comm_query_row *)lua_touserdata(L, lua_upvalueindex(1));
    lrp_checkcomm(L, 1, q->what);
    if (q->flag) lua_pushboolean(L, q->flag());
    else lua_pushinteger(L, q->count());
    return 1;
}

/* comm:allreduce(t) -> t, every element replaced by its sum over the ranks (in place, float32;
 * t must be contiguous); comm:allreduce(x) for a number x -> the sum of x over the ranks (a
 * double). */
static int c_allreduce(lua_State *L)
{
    lrp_checkcomm(L, 1, "comm:allreduce");
    if (lua_type(L, 2) == LUA_TNUMBER) {
        double v = lua_tonumber(L, 2);
        rp_status st = rp_dist_allreduce_f64(&v, 1);
        if (st != RP_OK) return dist_raise(L, "comm:allreduce", st);
        lua_pushnumber(L, (lua_Number)v);
        return 1;
    }
    if (lrp_totensor(L, 2) == NULL)
        return lrp_argerror(L, 2, "roper.Tensor or number expected, got %s",
                            lrp_describe(L, 2));
    rp_tensor *t = lrp_checktensor(L, 2);
    if (!rp_tensor_is_contiguous(t))
        return lrp_argerror(L, 2, "the tensor must be contiguous (use t:contiguous())");
    rp_status st = rp_dist_allreduce_f32(rp_tensor_data(t), rp_tensor_numel(t));
    if (st != RP_OK) return dist_raise(L, "comm:allreduce", st);
    lua_settop(L, 2);
    return 1;
}

/* comm:bcast(t[, root]) -> t, overwritten on every rank with root's values (root 0 by default;
 * t contiguous, the same shape on every rank). */
static int c_bcast(lua_State *L)
{
    lrp_checkcomm(L, 1, "comm:bcast");
    rp_tensor *t = lrp_checktensor(L, 2);
    lua_Integer root = lua_isnoneornil(L, 3) ? 0 : lrp_checkint(L, 3, "root");
    if (root < 0 || root >= rp_dist_size())
        return lrp_argerror(L, 3, "root %I out of range (%d rank%s)", (LUAI_UACINT)root,
                            rp_dist_size(), rp_dist_size() == 1 ? "" : "s");
    t = lrp_checktensor(L, 2);
    if (!rp_tensor_is_contiguous(t))
        return lrp_argerror(L, 2, "the tensor must be contiguous (use t:contiguous())");
    rp_status st = rp_dist_bcast(rp_tensor_data(t), rp_tensor_numel(t) * (int64_t)sizeof(float),
                                 (int)root);
    if (st != RP_OK) return dist_raise(L, "comm:bcast", st);
    lua_settop(L, 2);
    return 1;
}

/* comm:agree(x) -> true when every rank passed the same string, or a tensor with the same shape
 * and the same bits (compared by a 64-bit hash). */
static int c_agree(lua_State *L)
{
    lrp_checkcomm(L, 1, "comm:agree");
    uint64_t h = RP_FNV64_INIT;
    if (lua_type(L, 2) == LUA_TSTRING) {
        size_t n = 0;
        const char *s = lua_tolstring(L, 2, &n);
        h = rp_fnv64(h, s, n);
    } else if (lrp_totensor(L, 2) != NULL) {
        rp_tensor *t = lrp_checktensor(L, 2);
        if (!rp_tensor_is_contiguous(t))
            return lrp_argerror(L, 2, "the tensor must be contiguous (use t:contiguous())");
        h = rp_fnv64(h, t->shape, (size_t)t->ndim * sizeof t->shape[0]);
        h = rp_fnv64(h, rp_tensor_data(t), (size_t)rp_tensor_numel(t) * sizeof(float));
    } else {
        return lrp_argerror(L, 2, "string or roper.Tensor expected, got %s", lrp_describe(L, 2));
    }
    int same = 1;
    rp_status st = rp_dist_agree(h, &same);
    if (st != RP_OK) return dist_raise(L, "comm:agree", st);
    lua_pushboolean(L, same);
    return 1;
}

static int c_barrier(lua_State *L)
{
    lrp_checkcomm(L, 1, "comm:barrier");
    rp_status st = rp_dist_barrier();
    if (st != RP_OK) return dist_raise(L, "comm:barrier", st);
    return 0;
}

/* comm:stats() -> {seconds =, calls =}: the wall time spent in allreduce and their number. */
static int c_stats(lua_State *L)
{
    lrp_checkudata(L, 1, LRP_COMM_MT);
    lua_createtable(L, 0, 2);
    lua_pushnumber(L, rp_dist_comm_seconds());
    lua_setfield(L, -2, "seconds");
    lua_pushinteger(L, (lua_Integer)rp_dist_comm_calls());
    lua_setfield(L, -2, "calls");
    return 1;
}

/* comm:finalize(): shuts MPI down (every rank must call it; idempotent). Later collectives raise. */
static int c_finalize(lua_State *L)
{
    lrp_checkudata(L, 1, LRP_COMM_MT);
    rp_status st = rp_dist_finalize();
    if (st != RP_OK) return luaL_error(L, "comm:finalize: %s", rp_last_error());
    return 0;
}

/* comm:abort([code]): ends every rank of the job with exit status code (1 by default). */
static int c_abort(lua_State *L)
{
    lrp_checkudata(L, 1, LRP_COMM_MT);
    lua_Integer code = lua_isnoneornil(L, 2) ? 1 : lrp_checkint(L, 2, "code");
    if (code < 0 || code > 255)
        return lrp_argerror(L, 2, "code must be in 0..255, got %I", (LUAI_UACINT)code);
    fflush(stdout);
    rp_dist_abort((int)code);
}

/* tostring(comm): "roper.Comm: rank 0 of 2 (Open MPI v4.1.4)" or "roper.Comm: 1 process (no
 * MPI)". */
static int c_tostring(lua_State *L)
{
    lrp_checkudata(L, 1, LRP_COMM_MT);
    if (!rp_dist_ready()) lua_pushliteral(L, "roper.Comm (finalised)");
    else if (!rp_dist_active()) lua_pushliteral(L, "roper.Comm: 1 process (no MPI)");
    else
        lua_pushfstring(L, "roper.Comm: rank %d of %d (%s)", rp_dist_rank(), rp_dist_size(),
                        rp_dist_version());
    return 1;
}

static const luaL_Reg comm_methods[] = {
    {"allreduce", c_allreduce}, {"bcast", c_bcast},
    {"agree", c_agree},     {"barrier", c_barrier},     {"stats", c_stats},
    {"finalize", c_finalize}, {"abort", c_abort},       {NULL, NULL},
};

static const luaL_Reg mpi_funcs[] = {
    {"launched", l_launched}, {"init", l_init}, {"world", l_world}, {"plugin", l_plugin},
    {NULL, NULL},
};

void lrp_open_dist(lua_State *L, int mod)
{
    mod = lua_absindex(L, mod);
    lrp_open_type(L, mod, LRP_COMM_MT, "Comm", comm_methods, NULL, c_tostring); /* rp.Comm */
    lua_getfield(L, mod, "Comm"); /* the method table */
    LRP_SET_QUERIES(L, -1, c_query, comm_queries);
    lua_pop(L, 1);
    luaL_newlib(L, mpi_funcs);
    lua_setfield(L, mod, "mpi");
}
