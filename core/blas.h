/* Matrix multiply: cblas_sgemm, with a naive reference beside it, and OpenBLAS control. */
#ifndef RP_BLAS_H
#define RP_BLAS_H

#include <stdint.h>

/* Row-major C = alpha * op(A) @ op(B) + beta * C, op(X) = X or X^T when trans is nonzero.
 * Threads: OpenBLAS itself runs single-threaded; a large product outside a parallel region is
 * split into row (or column) blocks over the OpenMP threads, one cblas_sgemm each. Inside a
 * parallel region it runs on the calling thread.
 * op(A) is (M, K), op(B) is (K, N), C is (M, N); lda/ldb/ldc are row strides in elements of the
 * matrices as stored. beta == 0 overwrites C (NaNs in C are not propagated). All dims must be at
 * most RP_I32_MAX (the caller checks). */
void rp_sgemm(int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
              const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
              int64_t ldc);

/* The same contract, computed with plain loops and double accumulation (the reference). */
void rp_sgemm_naive(int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
                    const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                    float *C, int64_t ldc);

/* OpenBLAS's kernel name ("Haswell", "SkylakeX", "Prescott", ...). */
const char *rp_blas_core(void);
/* OpenBLAS's build configuration string. */
const char *rp_blas_config(void);
/* The number of threads roper computes with (OpenMP's; OpenBLAS itself is kept at one). */
int rp_blas_threads(void);
/* Sets that number; n >= 1 (values below are taken as 1). */
void rp_blas_set_threads(int n);

/* The OPENBLAS_CORETYPE this CPU needs, or NULL when none is needed: OpenBLAS 0.3.21 falls back to
 * the slow Prescott kernels on CPUs it does not know. Returns "SkylakeX" on an AVX-512 CPU and
 * "Haswell" on an AVX2+FMA CPU, only while the loaded library runs Prescott and the variable is
 * unset. */
const char *rp_blas_wanted_coretype(void);

/* For executables: when rp_blas_wanted_coretype() names a core, set OPENBLAS_CORETYPE and re-exec
 * /proc/self/exe with argv (the variable is read only when the library loads). Returns only when
 * nothing was needed or the re-exec failed. */
void rp_blas_fix_coretype(char **argv);

#endif
