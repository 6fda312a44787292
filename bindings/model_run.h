/* The roper.Model methods that run the model (model_run.c: forward passes, training steps,
 * introspection of a forward, generation), for model.c's registration table. Each is a
 * lua_CFunction; the comments at the definitions say what they do.
 */
#ifndef LRP_MODEL_RUN_H
#define LRP_MODEL_RUN_H

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

#endif
