/* Strided float32 tensors: a value struct that holds one reference to a storage.
 *
 * Dims and indices are 0-based in these calls; error messages number them from 1, as the Lua user
 * who caused them counts.
 *
 * A rp_tensor is a plain struct (copying it does NOT retain). Every function that fills an
 * `out` tensor gives it its own reference (fresh storage or a retained shared one); the caller
 * owns that reference and drops it with rp_tensor_release. On failure `out` is left empty
 * (storage NULL) and nothing needs releasing. `out` must not alias an input argument.
 */
#ifndef RP_TENSOR_H
#define RP_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"
#include "storage.h"

#define RP_MAX_DIMS 8
/* Largest number of elements one tensor may hold (2^40). The limit holds for the product of the
 * sizes other than 0 (rp_shape_span of core/sys/checked.h), so that an empty shape such as
 * [0 x 2^32 x 2^32] is refused as the full one would be: its strides are that product. */
#define RP_MAX_NUMEL ((int64_t)1 << 40)
/* The 32-bit limit: the largest BLAS dimension, token id, vocabulary, sequence length or row
 * count (int32 buffers and OpenBLAS's int take no more). The one definition core, tasks and
 * bindings use. */
#define RP_I32_MAX ((int64_t)2147483647)
/* Room for any shape string "[a x b x ...]" of RP_MAX_DIMS dims. */
#define RP_SHAPE_STR_LEN 200

typedef struct rp_tensor {
    rp_storage *storage;           /* NULL for an empty (released) tensor */
    int64_t offset;                /* in elements, into storage->data */
    int ndim;                      /* 0 .. RP_MAX_DIMS (0 = scalar, one element) */
    int64_t shape[RP_MAX_DIMS];
    int64_t stride[RP_MAX_DIMS];   /* in elements; may be 0 (broadcast) but never negative */
} rp_tensor;

/* ---- creation and lifetime ---- */

/* A new contiguous, zero-filled tensor of the given shape (each size >= 0, the sizes other than 0
 * multiplying to at most RP_MAX_NUMEL; RP_ERR_SHAPE otherwise). */
rp_status rp_tensor_new(rp_tensor *out, int ndim, const int64_t *shape);
/* A new tensor with the shape of t (contiguous, zero-filled). */
rp_status rp_tensor_new_like(rp_tensor *out, const rp_tensor *t);
/* Drops t's reference and empties it. Safe on an empty tensor and safe to call twice. */
void rp_tensor_release(rp_tensor *t);

/* ---- queries (never fail) ---- */
int64_t rp_tensor_numel(const rp_tensor *t);
int rp_tensor_is_contiguous(const rp_tensor *t);
/* Pointer to element 0 of t (storage data + offset). */
float *rp_tensor_data(const rp_tensor *t);
/* Writes "[2 x 3 x 4]" (scalar: "[]") into buf (RP_SHAPE_STR_LEN bytes suffice); returns buf. */
char *rp_shape_str(char *buf, size_t len, int ndim, const int64_t *shape);
char *rp_tensor_shape_str(char *buf, size_t len, const rp_tensor *t);
/* The end of the message for a shape over the limit ("shape [..] <this>"): "has more than 2^40
 * elements", or for a shape with a 0 "is too large (its sizes other than 0 multiply to more than
 * 2^40)". */
const char *rp_shape_too_large(int ndim, const int64_t *shape);
/* 1 if both have the same ndim and sizes. */
int rp_tensor_same_shape(const rp_tensor *a, const rp_tensor *b);
/* Offset (in elements, relative to rp_tensor_data) of the element at idx[0..ndim-1]. No checks. */
int64_t rp_tensor_index_offset(const rp_tensor *t, const int64_t *idx);
/* The index of element k (row-major) of an array of this shape, which holds it (no size is 0),
 * into idx[0..ndim-1] (OVERWRITTEN). */
void rp_unravel(int ndim, const int64_t *shape, int64_t k, int64_t *idx);
/* idx[0..ndim-1] as the messages name an element, 1-based as Lua indexes: "[2][3]" ("" for 0
 * dims), into buf (size len, cut to fit; RP_MAX_DIMS * 22 + 1 bytes hold any). Returns buf. */
char *rp_index_str(char *buf, size_t len, int ndim, const int64_t *idx);

/* ---- views (share storage; `out` gets a retained reference) ---- */

/* Another reference to the same view. */
void rp_tensor_view(rp_tensor *out, const rp_tensor *src);
/* Same data, new shape; one size may be -1 (inferred). A view when src is contiguous,
 * otherwise a contiguous copy. RP_ERR_SHAPE when the element counts differ or the shape is over
 * the limit (as rp_tensor_new). */
rp_status rp_tensor_reshape(rp_tensor *out, const rp_tensor *src, int ndim, const int64_t *shape);
/* Swaps dims d0 and d1 (0-based). */
rp_status rp_tensor_transpose(rp_tensor *out, const rp_tensor *src, int d0, int d1);
/* Reorders dims: out dim i is src dim perm[i]; perm must be a permutation of 0..ndim-1. */
rp_status rp_tensor_permute(rp_tensor *out, const rp_tensor *src, const int *perm);
/* Elements start .. start+len-1 of dim (0 <= start, len >= 0, start+len <= size). */
rp_status rp_tensor_narrow(rp_tensor *out, const rp_tensor *src, int dim, int64_t start, int64_t len);
/* Index `index` of dim, which is removed (ndim decreases by one). */
rp_status rp_tensor_select(rp_tensor *out, const rp_tensor *src, int dim, int64_t index);
/* The k-th diagonal of the 2-D src as a 1-D view: elements (i, i + k) for k >= 0, (i - k, i) for
 * k < 0 (0-based), as many as fit (0 when |k| reaches past the matrix). RP_ERR_SHAPE unless src
 * is 2-D. */
rp_status rp_tensor_diagonal(rp_tensor *out, const rp_tensor *src, int64_t k);
/* Views src with the given shape by stride-0 broadcasting (numpy rules, aligned at the right). */
rp_status rp_tensor_expand(rp_tensor *out, const rp_tensor *src, int ndim, const int64_t *shape);

/* ---- data movement ---- */

/* src itself (retained) when contiguous, otherwise a contiguous copy. */
rp_status rp_tensor_contiguous(rp_tensor *out, const rp_tensor *src);
/* A contiguous copy that shares nothing with src. */
rp_status rp_tensor_clone(rp_tensor *out, const rp_tensor *src);
/* Copies src into dst elementwise; src is broadcast to dst's shape. Overwrites dst.
 * Safe when both view the same storage (goes through a temporary then). */
rp_status rp_tensor_copy(rp_tensor *dst, const rp_tensor *src);
/* Sets every element of t to value. */
void rp_tensor_fill(rp_tensor *t, float value);

/* Calls fn(data_pointer, n, stride, ctx) for each innermost run of t (dims outer..inner). Used by
 * elementwise code that wants to treat a strided tensor as a sequence of 1-D runs. */
typedef void (*rp_run_fn)(float *p, int64_t n, int64_t stride, void *ctx);
void rp_tensor_foreach_run(const rp_tensor *t, rp_run_fn fn, void *ctx);

#endif
