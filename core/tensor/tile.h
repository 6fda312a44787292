/* Small matrix products for the attention kernels, in registers.
 *
 * The products of one attention block (64 x 64 x 32 and the like) between the steps of the
 * softmax, with A read in place either way round (no packing, no transposed copy) and each row
 * of C computed the same way whatever else is computed with it. A tile of C stays in vector
 * registers; each element of B's row k is a vector lane, each a_ik is broadcast.
 *
 * The vector width RP_VL (simd.h) is the widest the compiler targets; the multiply-adds are fused
 * where the target has FMA, else a multiply and an add. */
#ifndef RP_TILE_H
#define RP_TILE_H

#include <stdint.h>

#include "simd.h"

/* C = A B (accumulate 0) or C += A B (accumulate 1), with
 *   C  [M x N], element (i, j) at C[i * ldc + j];
 *   A  [M x K], element (i, k) at A[i * sa + k * sk]  (A row-major: sa = lda, sk = 1; A stored
 *      transposed, i.e. the product A^T B of a stored [K x M] matrix: sa = 1, sk = lda);
 *   B  [K x N], element (k, j) at B[k * ldb + j].
 * N must be a multiple of RP_VL (callers pad B and C with columns of zeros); M, K >= 0. No
 * alignment is needed. Every element of C is its start value (0 or C) plus the products for
 * k = 0, 1, ..., K-1 added in that order, one rounding each (fused) — whatever M, N and the tile
 * that computes it — so a row of C does not depend on the other rows or columns computed with it.
 * C must not overlap A or B. */
void rp_tile_mm(float *C, int64_t ldc, const float *A, int64_t sa, int64_t sk, const float *B,
                int64_t ldb, int64_t M, int64_t N, int64_t K, int accumulate);

#endif
