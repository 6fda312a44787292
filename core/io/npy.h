/* NumPy's .npy files: one tensor per file, readable with np.load and written by np.save
 * (format: docs/interop.md; NumPy's own description: numpy.lib.format).
 *
 * Writing: format version 1.0, dtype '<f4' (little-endian float32), C order, the tensor's logical
 * contents (a strided view is written as the array it shows), header laid out byte for byte as
 * NumPy 1.24 writes it (keys sorted, the spare spaces for growing the first axis, padded with
 * spaces and a newline to a multiple of 64 bytes). A 0-dim tensor is shape (), an empty tensor
 * keeps its shape ((0, 3): no data bytes). Atomic (core/io/fileio.h).
 *
 * Reading: versions 1.0, 2.0 and 3.0, the header read as NumPy reads it (the Python literal
 * grammar of ast.literal_eval, never more loosely: docs/interop.md); dtype '<f4' (bit for bit) or
 * '<f8' (each value rounded to the nearest float32, ties to even, as NumPy's astype(np.float32)
 * does: values beyond float32's range become +-inf, NaN stays NaN, float64 subnormals become 0 or
 * float32 subnormals); C order; up to RP_MAX_DIMS dims and RP_MAX_NUMEL elements (an empty array
 * too, for its sizes other than 0: core/tensor/tensor.h). Everything else is refused with
 * RP_ERR_IO "path: reason" (the reasons are listed in docs/interop.md): big-endian data, other
 * dtypes, object and structured arrays, Fortran order, a malformed header, truncated files and
 * trailing bytes.
 */
#ifndef RP_NPY_H
#define RP_NPY_H

#include <stddef.h>

#include "status.h"
#include "tensor.h"

typedef enum { RP_NPY_F32 = 0, RP_NPY_F64 = 1 } rp_npy_dtype;

/* Headers longer than this are refused (NumPy's own writer never comes near it). */
#define RP_NPY_MAX_HEADER 65536

/* Writes t (any strides; not modified) to path. RP_ERR_ARG for an empty path or a released
 * tensor; RP_ERR_IO "path: reason" when the file cannot be written (nothing is left behind). */
rp_status rp_npy_save(const char *path, const rp_tensor *t);

/* Reads path into out (a new contiguous tensor the caller releases) and, when dtype is not NULL,
 * the file's dtype. On failure out is left empty. */
rp_status rp_npy_load(const char *path, rp_tensor *out, rp_npy_dtype *dtype);

/* 1 when the n bytes at b begin with the .npy magic "\x93NUMPY" (or, when n < 6, are a prefix
 * of it and n > 0): the test rp.load uses to pick this reader. */
int rp_npy_magic(const void *b, size_t n);

#endif
