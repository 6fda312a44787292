/* The roper module: its entry point (roper.c) and the embedded Lua modules that roper.c loads.
 * The registration function of each binding file is in modules.h; the helpers the binding files
 * share are in args.h (the binding rules and argument checks), names.h (the names of the
 * userdata types and the registry keys) and userdata.h (the userdata types). build/roper_lua.c
 * (bindings/embed.lua) includes this header.
 */
#ifndef LRP_ROPER_H
#define LRP_ROPER_H

#include <stddef.h>

#include <lauxlib.h>
#include <lua.h>

/* The module entry point: require "roper" (roper.c). */
LUAMOD_API int luaopen_roper(lua_State *L);

/* ---- the embedded Lua modules (generated into build/roper_lua.c by bindings/embed.lua) ---- */
struct lrp_lua_source {
    const char *name; /* the module name, "roper.experiment.keys" */
    const char *path; /* its file below bindings/lua/ (or gen/lua/ of the build folder):
                         "experiment/keys.lua" */
    const char *src;  /* the bytes of the file (not necessarily NUL-terminated) */
    size_t len;
};
extern const struct lrp_lua_source lrp_lua_sources[];
extern const int lrp_lua_nsources;

#endif
