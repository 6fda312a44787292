/* The roper.Tensor methods and metamethods of views, slicing and element access (tensor_index.c),
 * for tensor.c's registration tables (lrp_open_tensor). Each is a lua_CFunction; the comments at
 * the definitions say what they do.
 */
#ifndef LRP_TENSOR_INDEX_H
#define LRP_TENSOR_INDEX_H

#include <lua.h>

int lrp_tensor_view(lua_State *L);
int lrp_tensor_reshape(lua_State *L);
int lrp_tensor_transpose(lua_State *L);
int lrp_tensor_t(lua_State *L);
int lrp_tensor_permute(lua_State *L);
int lrp_tensor_narrow(lua_State *L);
int lrp_tensor_select(lua_State *L);
int lrp_tensor_sub(lua_State *L);
int lrp_tensor_diag(lua_State *L);
int lrp_tensor_index(lua_State *L);    /* __index; upvalue 1: the method table */
int lrp_tensor_newindex(lua_State *L); /* __newindex */
int lrp_tensor_get(lua_State *L);
int lrp_tensor_set(lua_State *L);
int lrp_tensor_item(lua_State *L);
int lrp_tensor_totable(lua_State *L);

#endif
