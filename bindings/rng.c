/* roper.Rng: seeded generators (rp.rng), the module's default generator (kept in the registry
 * under LRP_DEFAULT_RNG_KEY, not in a C global) and the random tensor constructors. */
#include <string.h>

#include "args.h"
#include "modules.h"
#include "userdata.h"

/* The roper.Rng userdata: the generator first (the other binding files take the userdata as an
 * rp_rng *), then what __tostring tells: the seed it was last seeded with and the jumps since. */
typedef struct lrp_rng {
    rp_rng g;
    lua_Integer seed;
    lua_Integer jumps;
} lrp_rng;

/* The userdata at idx (raises "roper.Rng expected, got X"), and its generator. */
static lrp_rng *check_urng(lua_State *L, int idx)
{
    return (lrp_rng *)lrp_checkudata(L, idx, LRP_RNG_MT);
}

static rp_rng *check_rng(lua_State *L, int idx)
{
    return &check_urng(L, idx)->g;
}

/* Restarts the stream of the userdata u for seed. */
static void reseed(lrp_rng *u, lua_Integer seed)
{
    rp_rng_seed(&u->g, (uint64_t)seed);
    u->seed = seed;
    u->jumps = 0;
}

/* Pushes a new generator seeded with seed and returns it. */
static rp_rng *push_rng(lua_State *L, lua_Integer seed)
{
    lrp_rng *u = (lrp_rng *)lua_newuserdatauv(L, sizeof *u, 0);
    memset(u, 0, sizeof *u);
    luaL_setmetatable(L, LRP_RNG_MT);
    reseed(u, seed);
    return &u->g;
}

/* The default generator (created on first use if missing). Leaves the stack unchanged; the
 * registry keeps the userdata alive. */
static rp_rng *default_rng(lua_State *L)
{
    rp_rng *g;
    if (lua_getfield(L, LUA_REGISTRYINDEX, LRP_DEFAULT_RNG_KEY) == LUA_TUSERDATA &&
        (g = (rp_rng *)luaL_testudata(L, -1, LRP_RNG_MT)) != NULL) {
        lua_pop(L, 1);
        return g;
    }
    lua_pop(L, 1);
    g = push_rng(L, 0);
    lua_setfield(L, LUA_REGISTRYINDEX, LRP_DEFAULT_RNG_KEY);
    return g;
}

/* An integer bound for random integers: |v| <= 2^bits (53 for g:int's Lua integers; 24 for the
 * float32 tensors of rp.randint and g:randint, which hold every integer up to 2^24 exactly). */
static lua_Integer check_bound(lua_State *L, int arg, const char *what, int bits)
{
    lua_Integer v = lrp_checkint(L, arg, what);
    lua_Integer max = (lua_Integer)1 << bits;
    if (v < -max || v > max)
        lrp_argerror(L, arg, "%s must be between -2^%d and 2^%d%s, got %I", what, bits, bits,
                     bits == 24 ? " (a float32 holds every integer up to 2^24)" : "",
                     (LUAI_UACINT)v);
    return v;
}

/* Checks lo <= hi (both within 2^bits) at args lo_arg, lo_arg + 1. */
static void check_lohi(lua_State *L, int lo_arg, lua_Integer *lo, lua_Integer *hi, int bits)
{
    *lo = check_bound(L, lo_arg, "lo", bits);
    *hi = check_bound(L, lo_arg + 1, "hi", bits);
    if (*lo > *hi)
        lrp_argerror(L, lo_arg + 1, "hi must be >= lo, got lo = %I, hi = %I", (LUAI_UACINT)*lo,
                     (LUAI_UACINT)*hi);
}

enum { R_UNIFORM, R_NORMAL, R_INT };

/* Pushes a new tensor with the shape at first..last (a table, or numbers) filled from g. A shape
 * table must be the last argument (rp.rand & co. have already removed a trailing generator). */
static int push_random(lua_State *L, rp_rng *g, int first, int last, int kind, lua_Integer lo,
                       lua_Integer hi)
{
    int is_method = first >= 2 && luaL_testudata(L, 1, LRP_RNG_MT) != NULL;
    int64_t shape[RP_MAX_DIMS];
    if (last < first)
        return lrp_argerror(L, first, "shape expected (a table of sizes, or sizes as numbers), got "
                                      "no value");
    if (lua_type(L, first) == LUA_TTABLE && last > first) {
        if (is_method) lrp_checkend(L, first + 1, "the shape table");
        return lrp_argerror(L, first + 1, "roper.Rng expected after the shape table, got %s",
                            lrp_describe(L, first + 1));
    }
    int ndim = lrp_checkshape(L, first, last, shape, 0);
    rp_tensor *out = lrp_newtensor(L);
    rp_status st = rp_tensor_new(out, ndim, shape);
    if (st != RP_OK) return lrp_raise(L, st);
    if (kind == R_UNIFORM) rp_rng_fill_uniform(g, out, 0.0, 1.0);
    else if (kind == R_NORMAL) rp_rng_fill_normal(g, out, 0.0, 1.0);
    else rp_rng_fill_int(g, out, (int64_t)lo, (int64_t)hi);
    return 1;
}

/* For rp.rand & co.: the generator given as the last argument (then *last is moved before it) or
 * the default one, which is then also pushed on the stack (above the arguments) so that it stays
 * alive during the call whatever Lua code runs. */
static rp_rng *trailing_rng(lua_State *L, int *last)
{
    *last = lua_gettop(L);
    rp_rng *g = *last >= 1 ? (rp_rng *)luaL_testudata(L, *last, LRP_RNG_MT) : NULL;
    if (g) {
        (*last)--;
        return g;
    }
    g = default_rng(L);
    lua_getfield(L, LUA_REGISTRYINDEX, LRP_DEFAULT_RNG_KEY);
    return g;
}

/* rp.randint(lo, hi, shape[, rng]): integers lo..hi inclusive as floats. */
static int l_randint(lua_State *L)
{
    int last;
    lua_Integer lo, hi;
    rp_rng *g = trailing_rng(L, &last);
    check_lohi(L, 1, &lo, &hi, 24);
    return push_random(L, g, 3, last, R_INT, lo, hi);
}

/* rp.rng([seed]): a new generator (seed: any integer, default 0). */
static int l_rng(lua_State *L)
{
    lua_Integer seed = lua_isnoneornil(L, 1) ? 0 : lrp_checkint(L, 1, "seed");
    push_rng(L, seed);
    return 1;
}

/* rp.seed(n): reseeds the default generator. */
static int l_seed(lua_State *L)
{
    lua_Integer seed = lrp_checkint(L, 1, "seed");
    reseed((lrp_rng *)default_rng(L), seed);
    return 0;
}

/* g:seed(n): restarts g's stream; returns g. */
static int g_seed(lua_State *L)
{
    lrp_rng *u = check_urng(L, 1);
    lua_Integer seed = lrp_checkint(L, 2, "seed");
    reseed(u, seed);
    lua_settop(L, 1);
    return 1;
}

/* Most jumps one g:jump call makes (about a second of work). */
#define LRP_MAX_JUMPS ((lua_Integer)1 << 20)

/* g:jump([n]): advances g by n (default 1) times 2^128 draws; returns g. */
static int g_jump(lua_State *L)
{
    lrp_rng *u = check_urng(L, 1);
    lua_Integer n = lua_isnoneornil(L, 2) ? 1 : lrp_checkint(L, 2, "n");
    if (n < 0 || n > LRP_MAX_JUMPS)
        return lrp_argerror(L, 2, "n must be between 0 and 2^20, got %I", (LUAI_UACINT)n);
    for (lua_Integer i = 0; i < n; i++) rp_rng_jump(&u->g);
    /* at most 2^20 per call: the count saturates instead of overflowing */
    u->jumps = u->jumps > LUA_MAXINTEGER - n ? LUA_MAXINTEGER : u->jumps + n;
    lua_settop(L, 1);
    return 1;
}

/* g:int(lo, hi): an integer in [lo, hi]. */
static int g_int(lua_State *L)
{
    rp_rng *g = check_rng(L, 1);
    lua_Integer lo, hi;
    check_lohi(L, 2, &lo, &hi, 53);
    lua_pushinteger(L, (lua_Integer)rp_rng_int(g, (int64_t)lo, (int64_t)hi));
    return 1;
}

/* g:randint(lo, hi, shape). */
static int g_randint(lua_State *L)
{
    rp_rng *g = check_rng(L, 1);
    lua_Integer lo, hi;
    check_lohi(L, 2, &lo, &hi, 24);
    return push_random(L, g, 4, lua_gettop(L), R_INT, lo, hi);
}

/* tostring(g): "roper.Rng (seed 1)", "roper.Rng (seed 1, jumped 3 times)": the seed it was last
 * (re)seeded with (rp.rng, g:seed, rp.seed for the default generator) and the jumps since. */
static int g_tostring(lua_State *L)
{
    const lrp_rng *u = check_urng(L, 1);
    if (u->jumps == 0)
        lua_pushfstring(L, "roper.Rng (seed %I)", (LUAI_UACINT)u->seed);
    else
        lua_pushfstring(L, "roper.Rng (seed %I, jumped %I time%s)", (LUAI_UACINT)u->seed,
                        (LUAI_UACINT)u->jumps, u->jumps == 1 ? "" : "s");
    return 1;
}

/* The draws, one row each (the wrappers come from the declarations: lrp_set_queries): g:uniform()
 * -> a number in [0, 1), g:normal() -> a standard normal deviate; rp.rand(shape[, rng]) and
 * g:rand(shape) -> a tensor of uniform [0, 1) draws, rp.randn(shape[, rng]) and g:randn(shape)
 * -> one of standard normal draws (rp.randint and g:randint, with their bounds, are below). */
typedef struct draw_row {
    const char *name;
    double (*draw)(rp_rng *r);
} draw_row;
static const draw_row draws[] = {{"uniform", rp_rng_uniform}, {"normal", rp_rng_normal}};

typedef struct fill_row {
    const char *name;
    int kind; /* R_UNIFORM, R_NORMAL */
} fill_row;
static const fill_row fills[] = {{"rand", R_UNIFORM}, {"randn", R_NORMAL}};

/* g:uniform(), g:normal(): its row is the closure's upvalue. */
static int g_draw(lua_State *L)
{
    const draw_row *d = (const draw_row *)lua_touserdata(L, lua_upvalueindex(1));
    lua_pushnumber(L, (lua_Number)d->draw(check_rng(L, 1)));
    return 1;
}

/* rp.rand, rp.randn: its row is the closure's upvalue. */
static int l_fill(lua_State *L)
{
    const fill_row *f = (const fill_row *)lua_touserdata(L, lua_upvalueindex(1));
    int last;
    rp_rng *g = trailing_rng(L, &last);
    return push_random(L, g, 1, last, f->kind, 0, 0);
}

/* g:rand, g:randn: its row is the closure's upvalue. */
static int g_fill(lua_State *L)
{
    const fill_row *f = (const fill_row *)lua_touserdata(L, lua_upvalueindex(1));
    rp_rng *g = check_rng(L, 1);
    return push_random(L, g, 2, lua_gettop(L), f->kind, 0, 0);
}

static const luaL_Reg rng_methods[] = {
    {"seed", g_seed}, {"int", g_int}, {"randint", g_randint}, {"jump", g_jump}, {NULL, NULL},
};

static const luaL_Reg rng_funcs[] = {
    {"rng", l_rng}, {"seed", l_seed}, {"randint", l_randint}, {NULL, NULL},
};

void lrp_open_rng(lua_State *L, int mod)
{
    mod = lua_absindex(L, mod);
    lrp_open_type(L, mod, LRP_RNG_MT, "Rng", rng_methods, NULL, g_tostring);
    lua_getfield(L, mod, "Rng"); /* the method table */
    LRP_SET_QUERIES(L, -1, g_draw, draws);
    LRP_SET_QUERIES(L, -1, g_fill, fills);
    lua_pop(L, 1);

    lua_pushvalue(L, mod);
    luaL_setfuncs(L, rng_funcs, 0);
    LRP_SET_QUERIES(L, -1, l_fill, fills);
    lua_pop(L, 1);

    /* a fresh default generator (seed 0) for this load of the module */
    push_rng(L, 0);
    lua_setfield(L, LUA_REGISTRYINDEX, LRP_DEFAULT_RNG_KEY);
}
