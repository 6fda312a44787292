/* The roper.Model methods defined in model_run.c (running the model: forward passes, training
 * steps, introspection of a forward, generation) and interop.c (safetensors files), for model.c's
 * registration table, and the readers rp.load (model.c) hands other formats to. Each method is a
 * lua_CFunction; the comments at the definitions say what they do.
 */
#ifndef LRP_MODEL_METHODS_H
#define LRP_MODEL_METHODS_H

#include <lua.h>

int lrp_model_forward(lua_State *L);
int lrp_model_loss(lua_State *L);
int lrp_model_losses(lua_State *L);
int lrp_model_train_step(lua_State *L);
int lrp_model_attention(lua_State *L);
int lrp_model_linear_stats(lua_State *L);
int lrp_model_activations(lua_State *L);
int lrp_model_generate(lua_State *L);
int lrp_model_generate_batch(lua_State *L);
int lrp_model_lanes(lua_State *L);

/* ---- interop.c ---- */
int lrp_model_save_safetensors(lua_State *L);
int lrp_model_load_safetensors(lua_State *L);
/* rp.load's readers for a .npy file (a tensor) and a safetensors file (a model) at the path at
 * index path_idx (a checked string); they push the result or nil, "path: reason". */
int lrp_load_npy(lua_State *L, int path_idx);
int lrp_load_safetensors(lua_State *L, int path_idx);

#endif
