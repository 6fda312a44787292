/* The roper module: its entry point (roper.c), the registration function of each binding file
 * (each adds its functions to the module table), and the embedded Lua modules. The helpers the
 * binding files share are in args.h (the binding rules and argument checks) and userdata.h (the
 * userdata types). build/roper_lua.c (bindings/embed.lua) includes this header.
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

/* ---- per-file registration (each adds its functions to the module table at index mod) ---- */
void lrp_open_tensor(lua_State *L, int mod); /* roper.Tensor metatable, rp.Tensor, constructors */
void lrp_open_rng(lua_State *L, int mod);    /* roper.Rng metatable, rp.Rng, rp.rng, rp.seed,
                                                rp.rand, rp.randn, rp.randint, default generator */
void lrp_open_nn(lua_State *L, int mod);     /* rp.rope, rp.attention, rp.matmul, rp.blas,
                                                rp.set_num_threads */
void lrp_open_model(lua_State *L, int mod);  /* roper.Model metatable, rp.Model, rp.model,
                                                rp.load (model.c) */
void lrp_open_optim(lua_State *L, int mod);  /* roper.Optim metatable, rp.Optim, rp.optim.adam,
                                                rp.optim.adamw (optim.c) */
void lrp_open_tasks(lua_State *L, int mod);  /* roper.Task metatable, rp.Task, rp.tasks.addition,
                                                .substring_index, .substring_prefix, .text
                                                (tasks.c) */
void lrp_open_tokenizer(lua_State *L, int mod); /* roper.Tokenizer metatable, rp.Tokenizer,
                                                   rp.tokenizer.train, .load (tokenizer.c) */
void lrp_open_dist(lua_State *L, int mod);   /* roper.Comm metatable, rp.Comm, rp.mpi (dist.c) */

/* Sets the config schema and the mode table in the internals table at priv (model.c):
 * model_keys = { {name =, type = "int" | "number" | "enum" | "seed" | "rotate" | "bool",
 * default = (a boolean for bool), lo =, hi = (int, number), names = (enum), lo_open =, hi_open =,
 * unset0 =, required =, since =, help =}, ... } (core/model/model_schema.h's rows, in order),
 * pe_modes (core/nn/pe.h's table, as rp.pe_modes() gives it: by index and by name) and
 * model_unused(cfg) -> {key = why} (the keys of an rp.model config table that do nothing for
 * it). */
void lrp_model_internals(lua_State *L, int priv);
/* Sets the optimiser's keys in the internals table at priv (optim.c): optim_keys = { {name =,
 * type = "number" | "int" | "enum", default =, lo =, hi = (number), lo_open =, hi_open =
 * (number, int), names = (enum), option = (an option of rp.optim), pair = (the option that holds
 * it with the next row: "betas"), help =, experiment = (its place among rp.experiment's optimiser
 * keys; absent: not offered)}, ... } (core/nn/optim.h's rows, in order). */
void lrp_optim_internals(lua_State *L, int priv);

#endif
