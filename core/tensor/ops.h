/* Tensor-level operations for exploration: elementwise (with numpy broadcasting), reductions,
 * softmax and (batched) matmul. Each fills a new `out` (caller releases) and never modifies inputs. */
#ifndef RP_OPS_H
#define RP_OPS_H

#include "tensor.h"

typedef enum { RP_ADD, RP_SUB, RP_MUL, RP_DIV, RP_POW, RP_MAXIMUM, RP_MINIMUM } rp_binop;
typedef enum {
    RP_NEG, RP_EXP, RP_LOG, RP_ABS, RP_SQRT, RP_TANH, RP_RELU, RP_SIN, RP_COS, RP_SIGMOID
} rp_unop;
typedef enum { RP_SUM, RP_MEAN, RP_MAX, RP_MIN } rp_reduce_op;

/* out = a op b, with a and b broadcast to a common shape (numpy rules). RP_ERR_SHAPE names both
 * shapes when they do not broadcast. */
rp_status rp_binary(rp_tensor *out, rp_binop op, const rp_tensor *a, const rp_tensor *b);
/* out = a op s (s_first: out = s op a). */
rp_status rp_binary_scalar(rp_tensor *out, rp_binop op, const rp_tensor *a, double s, int s_first);
/* out = f(a). */
rp_status rp_unary(rp_tensor *out, rp_unop op, const rp_tensor *a);

/* Reduce over dim (0-based); keepdim leaves a size-1 dim in its place. Sums accumulate in double.
 * RP_MAX/RP_MIN on an empty dim fail with RP_ERR_SHAPE; RP_MEAN of an empty dim gives NaN. */
rp_status rp_reduce(rp_tensor *out, rp_reduce_op op, const rp_tensor *a, int dim, int keepdim);
/* Reduce over all elements into *result (double). Same empty-tensor rules. */
rp_status rp_reduce_all(double *result, rp_reduce_op op, const rp_tensor *a);
/* The dot product of the 1-D a and b of one length (any strides), products and sum in double,
 * into *result (0 for length 0). RP_ERR_SHAPE unless both are 1-D of the same length. */
rp_status rp_dot(double *result, const rp_tensor *a, const rp_tensor *b);
/* Index (0-based) of the max along dim, stored as float, keepdim as above. */
rp_status rp_argmax(rp_tensor *out, const rp_tensor *a, int dim, int keepdim);

/* Softmax along dim (max-subtracted, double accumulation). */
rp_status rp_softmax(rp_tensor *out, const rp_tensor *a, int dim);

/* Matrix product. a (.., M, K) @ b (.., K, N) -> (.., M, N). Both need ndim >= 1: a 1-D a is a row
 * (1, K) and a 1-D b a column (K, 1), and that dim is dropped from the result (numpy). Batch dims
 * broadcast. Strided inputs are passed to sgemm without copying when one of the last two strides
 * is 1; otherwise a contiguous copy is made. use_naive selects rp_sgemm_naive. */
rp_status rp_matmul(rp_tensor *out, const rp_tensor *a, const rp_tensor *b, int use_naive);

/* Computes the broadcast shape of a and b into shape/ndim. RP_ERR_SHAPE when incompatible. */
rp_status rp_broadcast_shape(int *ndim, int64_t *shape, const rp_tensor *a, const rp_tensor *b);

#endif
