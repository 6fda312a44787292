/* The roper.Tensor arithmetic, reductions and matmul (tensor_math.c), for the registration tables
 * of tensor.c (lrp_open_tensor) and nn.c (rp.matmul, rp.maxdiff). Each is a lua_CFunction; the
 * comments at the definitions say what they do.
 */
#ifndef LRP_TENSOR_MATH_H
#define LRP_TENSOR_MATH_H

#include <lua.h>

int lrp_tensor_binop(lua_State *L);  /* upvalue 1: the rp_binop */
int lrp_tensor_unop(lua_State *L);   /* upvalue 1: the rp_unop */
int lrp_tensor_reduce(lua_State *L); /* upvalue 1: the rp_reduce_op */
int lrp_tensor_argmax(lua_State *L);
int lrp_tensor_softmax(lua_State *L);
int lrp_tensor_norm(lua_State *L);
int lrp_tensor_dot(lua_State *L);
int lrp_maxdiff(lua_State *L); /* rp.maxdiff(a, b) and t:maxdiff(u) */
int lrp_matmul(lua_State *L); /* rp.matmul(a, b) and t:matmul(u) */

#endif
