/* The files of other formats (interop.c): the roper.Model methods of safetensors files, for model.c's
 * registration table, t:save (a .npy file) for tensor.c's, and the readers rp.load (model.c) hands
 * those files to. Each method is a lua_CFunction; the comments at the definitions say what they
 * do.
 */
#ifndef LRP_INTEROP_H
#define LRP_INTEROP_H

#include <lua.h>

int lrp_model_save_safetensors(lua_State *L);
int lrp_model_load_safetensors(lua_State *L);
/* rp.load's readers for a .npy file (a tensor) and a safetensors file (a model) at the path at
 * index path_idx (a checked string); they push the result or nil, "path: reason". */
int lrp_load_npy(lua_State *L, int path_idx);
int lrp_load_safetensors(lua_State *L, int path_idx);
int lrp_tensor_save(lua_State *L); /* t:save(path), a .npy file */

#endif
