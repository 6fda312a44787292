/* NumPy's .npy files: one tensor per file, readable with np.load and written by np.save
 * (format: docs/interop.md; NumPy's own description: numpy.lib.format).
 *
 * Writing: format version 1.0, C order, the tensor's logical contents (a strided view is written
 * as the array it shows), dtype '<f4' (little-endian float32, bit for bit) or, for token ids,
 * '<i4' or '<i8' (little-endian int32 or int64: every element must be an integer in the type's
 * range), header laid out byte for byte as NumPy 1.24 writes it (keys sorted, the spare spaces
 * for growing the first axis, padded with spaces and a newline to a multiple of 64 bytes). A 0-dim
 * tensor is shape (), an empty tensor keeps its shape ((0, 3): no data bytes). Atomic
 * (core/io/fileio.h).
 *
 * Reading: versions 1.0, 2.0 and 3.0, the header read as NumPy reads it (the Python literal
 * grammar of ast.literal_eval, never more loosely: docs/interop.md); C order; either byte order
 * ('<' or '>'; '|' too for the 1-byte types); dtype 'f4' (bit for bit), 'f8' (each value rounded
 * to the nearest float32, ties to even, as NumPy's astype(np.float32) does: values beyond
 * float32's range become +-inf, NaN stays NaN, float64 subnormals become 0 or float32
 * subnormals), or the integers 'i1', 'i2', 'i4', 'i8', 'u1', 'u2', 'u4', 'u8' (token ids: each
 * value held exactly, which float32 can for |x| <= 2^24 = RP_NPY_EXACT_INT; a value beyond is
 * refused naming its index and value); up to RP_MAX_DIMS dims and RP_MAX_NUMEL elements (an
 * empty array too, for its sizes other than 0: core/tensor/tensor.h). Everything else is refused
 * with RP_ERR_IO "path: reason" (the reasons are listed in docs/interop.md): other dtypes (float16,
 * bool, complex, ...), object and structured arrays, Fortran order, a malformed header, truncated
 * files and trailing bytes.
 */
#ifndef RP_NPY_H
#define RP_NPY_H

#include <stddef.h>

#include "status.h"
#include "tensor.h"

/* The dtypes of a file, without the byte order. rp_npy_save_as writes F32, I32 and I64. */
typedef enum {
    RP_NPY_F32 = 0,
    RP_NPY_F64 = 1,
    RP_NPY_I8,
    RP_NPY_I16,
    RP_NPY_I32,
    RP_NPY_I64,
    RP_NPY_U8,
    RP_NPY_U16,
    RP_NPY_U32,
    RP_NPY_U64
} rp_npy_dtype;

/* 2^24: the integers of magnitude up to this are exactly float32's; an integer file's values must
 * lie within +-RP_NPY_EXACT_INT. */
#define RP_NPY_EXACT_INT 16777216

/* Headers longer than this are refused (NumPy's own writer never comes near it). */
#define RP_NPY_MAX_HEADER 65536

/* Writes t (any strides; not modified) to path as float32 '<f4'. RP_ERR_ARG for an empty path or
 * a released tensor; RP_ERR_IO "path: reason" when the file cannot be written (nothing is left
 * behind). */
rp_status rp_npy_save(const char *path, const rp_tensor *t);

/* As rp_npy_save, in dtype RP_NPY_F32 ('<f4'), RP_NPY_I32 ('<i4') or RP_NPY_I64 ('<i8'; another
 * dtype is RP_ERR_ARG). For the integer dtypes every element must fit (rp_npy_first_unfit); the
 * first that does not gives RP_ERR_ARG "path: element at index (0, 2) <rp_npy_unfit_reason>"
 * (0-based, as NumPy indexes) before the file is touched. */
rp_status rp_npy_save_as(const char *path, const rp_tensor *t, rp_npy_dtype dtype);

/* The first element of t (any strides; its logical contents in row-major order) that dtype cannot
 * hold exactly: for RP_NPY_I32 and RP_NPY_I64 a value that is not an integer (NaN and the
 * infinities included) or lies outside the type's range; none for RP_NPY_F32. Returns its flat
 * row-major index and fills idx[0 .. t->ndim - 1] with its 0-based index, or returns -1 when
 * every element fits (idx untouched). t must hold storage. */
int64_t rp_npy_first_unfit(const rp_tensor *t, rp_npy_dtype dtype, int64_t idx[RP_MAX_DIMS]);

/* Why RP_NPY_I32 or RP_NPY_I64 cannot hold value, into buf (n bytes; returned): "is 1.5, not an
 * integer (dtype int64)", "is nan, not an integer (dtype int32)", "is 3000000000, outside int32
 * (-2147483648..2147483647)". */
const char *rp_npy_unfit_reason(char *buf, size_t n, float value, rp_npy_dtype dtype);

/* Reads path into out (a new contiguous float32 tensor the caller releases) and, when dtype is
 * not NULL, the file's dtype (whatever its byte order). On failure out is left empty. */
rp_status rp_npy_load(const char *path, rp_tensor *out, rp_npy_dtype *dtype);

/* 1 when the n bytes at b begin with the .npy magic "\x93NUMPY" (or, when n < 6, are a prefix
 * of it and n > 0): the test rp.load uses to pick this reader. */
int rp_npy_magic(const void *b, size_t n);

#endif
