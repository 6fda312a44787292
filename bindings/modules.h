/* The registration function of each binding file of the roper module: each adds its functions to
 * the module table at index mod (or, for the *_internals ones, sets fields of the private table
 * "roper.internals" at index priv). Defined by the files named, called only by luaopen_roper
 * (roper.c), so a file that defines one includes this header and no header of roper.c.
 */
#ifndef LRP_MODULES_H
#define LRP_MODULES_H

#include <lua.h>

void lrp_open_tensor(lua_State *L, int mod); /* roper.Tensor metatable, rp.Tensor, constructors
                                                (tensor.c) */
void lrp_open_rng(lua_State *L, int mod);    /* roper.Rng metatable, rp.Rng, rp.rng, rp.seed,
                                                rp.rand, rp.randn, rp.randint, default generator
                                                (rng.c) */
void lrp_open_nn(lua_State *L, int mod);     /* rp.rope, rp.attention, rp.matmul, rp.blas,
                                                rp.set_num_threads (nn.c) */
void lrp_open_model(lua_State *L, int mod);  /* roper.Model metatable, rp.Model, rp.model,
                                                rp.model_memory, rp.load, rp.option_messages
                                                (model.c) */
void lrp_open_tables(lua_State *L, int mod); /* rp.pe_modes, rp.model_keys, rp.scalings,
                                                rp.model_rules, rp.model_layout,
                                                rp.safetensors_extras, rp.axes_rules
                                                (tables.c) */
void lrp_open_optim(lua_State *L, int mod);  /* roper.Optim metatable, rp.Optim, rp.optim.adam,
                                                rp.optim.adamw (optim.c) */
void lrp_open_tasks(lua_State *L, int mod);  /* roper.Task metatable, rp.Task, rp.tasks.addition,
                                                .substring_index, .substring_prefix, .text
                                                (tasks.c) */
void lrp_open_tokenizer(lua_State *L, int mod); /* roper.Tokenizer metatable, rp.Tokenizer,
                                                   rp.tokenizer.train, .load (tokenizer.c) */
void lrp_open_dist(lua_State *L, int mod);   /* roper.Comm metatable, rp.Comm, rp.mpi (dist.c) */

/* Sets model_unused(cfg) -> {key = why} (the keys of an rp.model config table that do nothing
 * for it) and hf_rope (lrp_hf_rope_keys, freq.h) in the internals table at priv (model.c). */
void lrp_model_internals(lua_State *L, int priv);
/* Sets core's key tables and the mode table in the internals table at priv (tables.c): the
 * key tables as lists of rows in their order, each row {name =, type =, default =, lo =, hi =,
 * lo_open =, hi_open = (the fields its type has), names = (enum), ...its table's own fields}:
 * model_keys (core/config/model_schema.h's rows; type "int" | "number" | "enum" | "seed" |
 * "rotate" | "bool", default a boolean for bool; unset0 =, required =, since =, help =, ...),
 * optim_keys (core/nn/optim.h's; type "number" | "int" | "enum"; option = (an option of
 * rp.optim), pair = (the option that holds it with the next row: "betas"), help =, experiment =
 * (its place among rp.experiment's optimiser keys; absent: not offered)), task_keys
 * (tasks/task.h's; type "int" | "number" | "enum" | "bool" | "path", default "" for a path;
 * kinds = {the kinds that read it, by name}, run = (a key of rp.experiment), required =, help
 * =); and pe_modes (core/nn/pe.h's table, as rp.pe_modes() gives it: by index and by name). */
void lrp_tables_internals(lua_State *L, int priv);

#endif
