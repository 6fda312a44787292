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
/* Sets the config schema and the mode table in the internals table at priv (tables.c):
 * model_keys = { {name =, type = "int" | "number" | "enum" | "seed" | "rotate" | "bool",
 * default = (a boolean for bool), lo =, hi = (int, number), names = (enum), lo_open =, hi_open =,
 * unset0 =, required =, since =, help =}, ... } (core/config/model_schema.h's rows, in order) and
 * pe_modes (core/nn/pe.h's table, as rp.pe_modes() gives it: by index and by name). */
void lrp_tables_internals(lua_State *L, int priv);
/* Sets the optimiser's keys in the internals table at priv (optim.c): optim_keys = { {name =,
 * type = "number" | "int" | "enum", default =, lo =, hi = (number), lo_open =, hi_open =
 * (number, int), names = (enum), option = (an option of rp.optim), pair = (the option that holds
 * it with the next row: "betas"), help =, experiment = (its place among rp.experiment's optimiser
 * keys; absent: not offered)}, ... } (core/nn/optim.h's rows, in order). */
void lrp_optim_internals(lua_State *L, int priv);
/* Sets the task table in the internals table at priv (tasks.c): task_keys = { {name =, type =
 * "int" | "number" | "enum" | "bool" | "path", default = ("" for a path), lo =, hi = (int,
 * number), lo_open =, hi_open = (number), names = (enum), kinds = {the kinds that read it, by
 * name}, run = (a key of rp.experiment), required =, help =}, ... } (tasks/task.h's rows, in
 * order). */
void lrp_task_internals(lua_State *L, int priv);

#endif
