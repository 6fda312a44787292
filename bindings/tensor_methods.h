/* The roper.Tensor methods and metamethods defined outside tensor.c, for its registration tables
 * (lrp_open_tensor). Each is a lua_CFunction; the comments at the definitions say what they do.
 */
#ifndef LRP_TENSOR_METHODS_H
#define LRP_TENSOR_METHODS_H

#include <lua.h>

/* ---- views, slicing and element access (tensor_index.c) ---- */
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

/* ---- arithmetic and reductions (tensor_math.c) ---- */
int lrp_tensor_binop(lua_State *L);  /* upvalue 1: the rp_binop */
int lrp_tensor_unop(lua_State *L);   /* upvalue 1: the rp_unop */
int lrp_tensor_reduce(lua_State *L); /* upvalue 1: the rp_reduce_op */
int lrp_tensor_argmax(lua_State *L);
int lrp_tensor_softmax(lua_State *L);
int lrp_tensor_norm(lua_State *L);
int lrp_tensor_dot(lua_State *L);
int lrp_maxdiff(lua_State *L); /* rp.maxdiff(a, b) and t:maxdiff(u) */

/* ---- rp.matmul(a, b) and t:matmul(u) (nn.c) ---- */
int lrp_matmul(lua_State *L);

/* ---- t:save(path), a .npy file (interop.c) ---- */
int lrp_tensor_save(lua_State *L);

#endif
