/* luaopen_roper: the module table (no globals), its submodules, and the embedded Lua sources.
 *
 * Load order: roper.Tensor (tensor.c), roper.Rng and the default generator (rng.c), rp.rope,
 * rp.blas, rp.attention, rp.matmul (nn.c), roper.Model, rp.model, rp.load (model.c), core's tables
 * (rp.pe_modes, rp.model_keys, ...: tables.c), roper.Optim,
 * rp.optim (optim.c), roper.Task, rp.tasks (tasks.c), roper.Tokenizer, rp.tokenizer
 * (tokenizer.c), rp._VERSION, rp.memory; then the Lua modules of bindings/lua/ (compiled into
 * build/roper_lua.c by bindings/embed.lua), from bindings/lua/init.lua, each requiring by name
 * what it uses (load_lua_modules below): "roper", the module table, and "roper.internals", a
 * private table that only C fills
 * { Tensor_mt = <roper.Tensor metatable>, Rng_mt = <roper.Rng metatable>, Model_mt = <roper.Model
 * metatable>, Optim_mt = <roper.Optim metatable>, Task_mt = <roper.Task metatable>, Tokenizer_mt =
 * <roper.Tokenizer metatable>, Params_mt,
 * Grads_mt, Memory_mt = <the metatables of m:params(), m:grads(), rp.model_memory()>, is_live = f,
 * model_keys, optim_keys, task_keys, pe_modes (core's config schema, the optimiser's keys, the
 * task table and the mode table: lrp_tables_internals in modules.h), model_unused, hf_rope
 * (lrp_model_internals),
 * i32_max = RP_I32_MAX, build_kind = rp_build_kind(), build_target = rp_build_target(),
 * tokenizer = rp_tok_available() == 1, path_kind = f, read_file = f, write_file = f,
 * remove_files = f, clock = f, mem_available = f }
 * (is_live(t) is true for a tensor that has not been released; path_kind(path) tells what is at
 * a path without opening it; read_file and write_file are core/io/fileio.h's reading and atomic
 * writing, for the Lua parts' own files; clock() is core's rp_clock_seconds, for durations;
 * mem_available() is core's rp_mem_available, nil when unknown). What a Lua module shares with the others is its return
 * value (the argument errors and checks: roper.args), never a field of this table.
 * Finally, when OpenBLAS runs slower kernels than it has for this CPU (its Prescott fallback, or
 * Haswell/Zen on an AVX-512 CPU: rp_blas_wanted_coretype), one warning line goes to stderr (once
 * per Lua state).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "args.h"
#include "fileio.h"
#include "modules.h"
#include "roper.h"
#include "sysmem.h"
#include "tokenizer.h"
#include "userdata.h"

/* The path at arg, a string; raises "path contains a NUL byte" (the file calls would read it cut
 * at the NUL, another path). An empty string is left to the call (stat: nothing there). */
static const char *path_arg(lua_State *L, int arg)
{
    size_t n;
    const char *path = luaL_checklstring(L, arg, &n);
    if (memchr(path, '\0', n)) luaL_argerror(L, arg, "path contains a NUL byte");
    return path;
}

/* internals.path_kind(path) -> kind | false | nil, message: what is at path, told by a stat that
 * opens nothing (so a FIFO never blocks; a symbolic link is followed): rp_file_kind's words ("a
 * regular file", "a folder", "a FIFO", ...); false when nothing is there (ENOENT); nil and
 * "path: reason" when it cannot be told (ENOTDIR, EACCES, ...). */
static int l_path_kind(lua_State *L)
{
    const char *path = path_arg(L, 1);
    struct stat sb;
    if (stat(path, &sb) == 0) {
        lua_pushstring(L, rp_file_kind(sb.st_mode));
        return 1;
    }
    int e = errno;
    if (e == ENOENT) {
        lua_pushboolean(L, 0);
        return 1;
    }
    lua_pushnil(L);
    lua_pushfstring(L, "%s: %s", path, strerror(e));
    return 2;
}

/* The box of a malloc'ed buffer that a Lua error (memory, while the buffer becomes a string) may
 * abandon: its __gc frees it. */
#define FILEBUF_MT "roper.filebuf"

static int filebuf_gc(lua_State *L)
{
    char **box = (char **)luaL_checkudata(L, 1, FILEBUF_MT);
    free(*box);
    *box = NULL;
    return 0;
}

/* internals.read_file(path, max_bytes) -> text | nil, message: the whole regular file at path
 * (rp_file_read_all: anything else is refused after a stat, before any open, so a FIFO never
 * blocks; more than max_bytes is refused before anything is read). */
static int l_read_file(lua_State *L)
{
    const char *path = path_arg(L, 1);
    lua_Integer max_bytes = luaL_checkinteger(L, 2);
    luaL_argcheck(L, max_bytes >= 0, 2, "max_bytes must be >= 0");
    char **box = (char **)lua_newuserdatauv(L, sizeof *box, 0);
    *box = NULL;
    luaL_setmetatable(L, FILEBUF_MT);
    int64_t len = 0;
    if (rp_file_read_all(path, (int64_t)max_bytes, NULL, box, &len) != RP_OK) {
        lua_pushnil(L);
        lua_pushstring(L, rp_last_error());
        return 2;
    }
    lua_pushlstring(L, *box, (size_t)len);
    free(*box);
    *box = NULL;
    return 1;
}

struct text_job {
    const char *text;
    size_t len;
};

static int write_text(FILE *f, void *ctx)
{
    const struct text_job *j = ctx;
    if (fwrite(j->text, 1, j->len, f) != j->len) return errno ? errno : EIO;
    return 0;
}

/* internals.write_file(path, text) -> true | nil, message: text written to path atomically
 * (rp_file_write_atomic: a reader sees the old file or the new one whole; a path that is not a
 * regular file, a FIFO say, is refused before anything is written). */
static int l_write_file(lua_State *L)
{
    const char *path = path_arg(L, 1);
    struct text_job j;
    j.text = luaL_checklstring(L, 2, &j.len);
    if (rp_file_write_atomic(path, write_text, &j) != RP_OK) {
        lua_pushnil(L);
        lua_pushstring(L, rp_last_error());
        return 2;
    }
    lua_pushboolean(L, 1);
    return 1;
}

/* internals.remove_files(list): removes the file at each string of list[1..#list] (raw reads; a
 * path that is missing or cannot be removed is passed over); returns nothing. A C function, so
 * that as the __close metamethod of a to-be-closed list (called with the list and an error
 * object, the latter ignored) it runs no Lua instruction a debug hook could interrupt: an error
 * raised by an interrupt or a time budget while a Lua part's temporary files exist removes them
 * all (plot.lua's render). */
static int l_remove_files(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_Unsigned n = lua_rawlen(L, 1);
    for (lua_Unsigned i = 1; i <= n; i++) {
        if (lua_rawgeti(L, 1, (lua_Integer)i) == LUA_TSTRING) (void)remove(lua_tostring(L, -1));
        lua_pop(L, 1);
    }
    return 0;
}

/* rp.memory() -> {held = bytes, peak = bytes}: core's count of the memory behind tensors, models
 * and optimisers (rp_mem_held, rp_mem_peak). */
/* internals.mem_available() -> bytes | nil: the memory available (rp_mem_available), nil when it
 * cannot be read. */
static int l_mem_available(lua_State *L)
{
    int64_t avail = rp_mem_available();
    if (avail < 0) return 0;
    lua_pushinteger(L, (lua_Integer)avail);
    return 1;
}

static int l_memory(lua_State *L)
{
    int64_t held = rp_mem_held(), peak = rp_mem_peak();
    lua_createtable(L, 0, 2);
    lua_pushinteger(L, (lua_Integer)held);
    lua_setfield(L, -2, "held");
    lua_pushinteger(L, (lua_Integer)peak);
    lua_setfield(L, -2, "peak");
    return 1;
}

/* rp.read_file(path[, max_bytes]) -> text | nil, "path: reason": the whole regular file (core's
 * rp_file_read_all; max_bytes defaults to 1 GiB). rp.write_file(path, text) -> true | nil,
 * "path: reason": text written atomically (core's rp_file_write_atomic). Both check their
 * arguments first, then call the internals' versions. */
#define READ_FILE_DEFAULT_MAX ((lua_Integer)1 << 30)

static int l_pub_read_file(lua_State *L)
{
    lrp_checkpath(L, 1);
    lua_Integer max_bytes = READ_FILE_DEFAULT_MAX;
    if (!lua_isnoneornil(L, 2)) {
        max_bytes = lrp_checkint(L, 2, "max_bytes");
        if (max_bytes < 0)
            return lrp_argerror(L, 2, "max_bytes must be >= 0, got %I", (LUAI_UACINT)max_bytes);
    }
    lua_settop(L, 1);
    lua_pushinteger(L, max_bytes);
    return l_read_file(L);
}

static int l_pub_write_file(lua_State *L)
{
    lrp_checkpath(L, 1);
    if (lua_type(L, 2) != LUA_TSTRING)
        return lrp_argerror(L, 2, "text must be a string, got %s", lrp_describe(L, 2));
    lua_settop(L, 2);
    return l_write_file(L);
}

/* internals.clock() -> seconds on the monotonic clock (core/sys/clock.h: only differences mean
 * something), for the durations the Lua parts measure (rp.experiment.run's seconds_train). */
static int l_clock(lua_State *L)
{
    lua_pushnumber(L, (lua_Number)rp_clock_seconds());
    return 1;
}

/* internals.is_live(x): true when x is a tensor that was not released. */
static int l_is_live(lua_State *L)
{
    rp_tensor *t = lrp_totensor(L, 1);
    lua_pushboolean(L, t != NULL && t->storage != NULL);
    return 1;
}

/* Copies the OpenBLAS version ("0.3.21") out of rp_blas_config() into buf. */
static void blas_version(char *buf, size_t len)
{
    const char *cfg = rp_blas_config();
    const char *prefix = "OpenBLAS ";
    snprintf(buf, len, "?");
    if (cfg == NULL || strncmp(cfg, prefix, strlen(prefix)) != 0) return;
    cfg += strlen(prefix);
    size_t n = strcspn(cfg, " ");
    if (n == 0 || n >= len) return;
    memcpy(buf, cfg, n);
    buf[n] = '\0';
}

/* Prints the slow-kernel warning once per Lua state (the flag lives in the registry): the kernels
 * that run and rp_blas_core_reason(), which names the faster kernels and the variable to set. */
static void warn_slow_kernels(lua_State *L)
{
    const char *want = rp_blas_wanted_coretype();
    if (want == NULL) return;
    int warned = lua_getfield(L, LUA_REGISTRYINDEX, "roper.slow_kernels_warned") != LUA_TNIL;
    lua_pop(L, 1);
    if (warned) return;
    lua_pushboolean(L, 1);
    lua_setfield(L, LUA_REGISTRYINDEX, "roper.slow_kernels_warned");
    char ver[32];
    blas_version(ver, sizeof ver);
    fprintf(stderr, "roper: OpenBLAS %s runs its %s kernels, %s\n", ver, rp_blas_core(),
            rp_blas_core_reason());
    fflush(stderr);
}

/* The embedded Lua modules (the files of bindings/lua/ and the build's generated two, compiled
 * into build/roper_lua.c by bindings/embed.lua) load by name through a require of their own, which
 * each chunk receives as its first argument (`local require = ...`): require(name) -> the module's
 * value, loaded once per Lua state. It looks among the embedded modules and the two that
 * luaopen_roper puts in its table first ("roper": the module table being built; "roper.internals":
 * the private table), never on package.path nor in package.loaded: a user's module of the same
 * name neither replaces one of these nor receives one, and the private table stays out of user
 * code's reach. A module's chunk is named "@bindings/lua/<path>" (its tracebacks; args.lua tells
 * the module's own frames by that prefix) and called as chunk(require, name); its first result
 * (true when it returns none) is the module's value. A name that is not embedded, or a module
 * required again while it loads (a cycle), is an error. Upvalue 1: the table of loaded modules,
 * which also holds this function (at the light userdata key &require_key, so that it can pass
 * itself on). */
static const char require_key = 0;
static const char loading_mark = 0;

static int l_require(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    lua_settop(L, 1);
    if (lua_getfield(L, lua_upvalueindex(1), name) != LUA_TNIL) {
        if (lua_touserdata(L, -1) == (void *)&loading_mark)
            return luaL_error(L, "roper: module '%s' is required again while it loads (a cycle)",
                              name);
        return 1;
    }
    lua_pop(L, 1);
    const struct lrp_lua_source *s = NULL;
    for (int i = 0; i < lrp_lua_nsources && s == NULL; i++)
        if (strcmp(lrp_lua_sources[i].name, name) == 0) s = &lrp_lua_sources[i];
    if (s == NULL) return luaL_error(L, "roper: no embedded Lua module '%s'", name);
    lua_pushfstring(L, "@bindings/lua/%s", s->path);
    if (luaL_loadbufferx(L, s->src, s->len, lua_tostring(L, -1), "t") != LUA_OK)
        return lua_error(L);
    lua_remove(L, -2); /* the chunk name */
    lua_pushlightuserdata(L, (void *)&loading_mark);
    lua_setfield(L, lua_upvalueindex(1), name);
    lua_rawgetp(L, lua_upvalueindex(1), &require_key);
    lua_pushvalue(L, 1);
    lua_call(L, 2, 1);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lua_pushboolean(L, 1);
    }
    lua_pushvalue(L, -1);
    lua_setfield(L, lua_upvalueindex(1), name);
    return 1;
}

/* Loads the Lua side: require("roper.init") (bindings/lua/init.lua, which requires the others in
 * one documented place), with "roper" = the module table at mod and "roper.internals" = the
 * private table at priv. Errors propagate (require "roper" fails). */
static void load_lua_modules(lua_State *L, int mod, int priv)
{
    lua_newtable(L); /* the loaded modules */
    int loaded = lua_gettop(L);
    lua_pushvalue(L, mod);
    lua_setfield(L, loaded, "roper");
    lua_pushvalue(L, priv);
    lua_setfield(L, loaded, "roper.internals");
    lua_pushvalue(L, loaded);
    lua_pushcclosure(L, l_require, 1);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, loaded, &require_key);
    lua_pushliteral(L, "roper.init");
    lua_call(L, 1, 0);
    lua_pop(L, 1); /* loaded */
}

LUAMOD_API int luaopen_roper(lua_State *L)
{
    luaL_checkversion(L);
    char why[192];
    if (!rp_build_cpu_ok(why, sizeof why)) return luaL_error(L, "roper: %s", why);
    lua_newtable(L);
    int mod = lua_gettop(L);
    lrp_open_tensor(L, mod);
    lrp_open_rng(L, mod);
    lrp_open_nn(L, mod);
    lrp_open_model(L, mod);
    lrp_open_tables(L, mod);
    lrp_open_optim(L, mod);
    lrp_open_tasks(L, mod);
    lrp_open_tokenizer(L, mod);
    lrp_open_dist(L, mod);
    /* this file's functions: the module's (rp.read_file, ...) and the private table's */
    static const luaL_Reg pub_funcs[] = {
        {"read_file", l_pub_read_file}, {"write_file", l_pub_write_file},
        {"memory", l_memory},           {NULL, NULL},
    };
    static const luaL_Reg priv_funcs[] = {
        {"is_live", l_is_live},     {"path_kind", l_path_kind},
        {"read_file", l_read_file}, {"write_file", l_write_file},
        {"remove_files", l_remove_files},
        {"clock", l_clock},         {"mem_available", l_mem_available},
        {NULL, NULL},
    };
    /* the metatables the Lua parts see, by their names in the private table */
    static const char *const metatables[][2] = {
        {LRP_TENSOR_MT, "Tensor_mt"}, {LRP_RNG_MT, "Rng_mt"},
        {LRP_MODEL_MT, "Model_mt"},   {LRP_OPTIM_MT, "Optim_mt"},
        {LRP_TASK_MT, "Task_mt"},     {LRP_TOKENIZER_MT, "Tokenizer_mt"},
        {LRP_PARAMS_MT, "Params_mt"}, {LRP_GRADS_MT, "Grads_mt"},
        {LRP_MEMORY_MT, "Memory_mt"},
    };
    lua_pushliteral(L, RP_VERSION);
    lua_setfield(L, mod, "_VERSION");
    luaL_setfuncs(L, pub_funcs, 0);

    lua_newtable(L);
    int priv = lua_gettop(L);
    for (size_t i = 0; i < sizeof metatables / sizeof *metatables; i++) {
        luaL_getmetatable(L, metatables[i][0]);
        lua_setfield(L, priv, metatables[i][1]);
    }
    if (luaL_newmetatable(L, FILEBUF_MT)) {
        lua_pushcfunction(L, filebuf_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_pop(L, 1);
    luaL_setfuncs(L, priv_funcs, 0);
    /* core's key tables and mode table, for the Lua parts (rp.experiment's keys) */
    lrp_tables_internals(L, priv);
    lrp_model_internals(L, priv);
    lua_pushinteger(L, (lua_Integer)RP_I32_MAX);
    lua_setfield(L, priv, "i32_max");
    lua_pushstring(L, rp_build_kind());
    lua_setfield(L, priv, "build_kind");
    lua_pushstring(L, rp_build_target());
    lua_setfield(L, priv, "build_target");
    lua_pushboolean(L, rp_tok_available());
    lua_setfield(L, priv, "tokenizer");
    load_lua_modules(L, mod, priv);

    lua_pushvalue(L, mod); /* for the public names in argument errors (lrp_argerror) */
    lua_setfield(L, LUA_REGISTRYINDEX, LRP_MODULE_KEY);
    warn_slow_kernels(L);
    lua_settop(L, mod);
    return 1;
}
