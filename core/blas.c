#include "blas.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* OpenBLAS runs single-threaded: roper owns all threading through OpenMP, so two thread pools
 * never compete for the cores (with both active, idle OpenBLAS threads yielding and idle OpenMP
 * threads spinning took about a third of a training step). Large products are split into row or
 * column blocks, one single-threaded cblas_sgemm per OpenMP thread. */
static void blas_single_threaded(void)
{
    static int done;
    if (!done) { /* first call happens on the main thread, before any parallel region */
        openblas_set_num_threads(1);
        done = 1;
    }
}

static void sgemm_block(int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
                        const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                        float *C, int64_t ldc)
{
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
                transB ? CblasTrans : CblasNoTrans, (blasint)M, (blasint)N, (blasint)K, alpha, A,
                (blasint)lda, B, (blasint)ldb, beta, C, (blasint)ldc);
}

/* Below this many multiply-adds a product runs on one thread (splitting would cost more). */
#define RP_SGEMM_PAR_MIN ((int64_t)1 << 21)

void rp_sgemm(int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
              const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
              int64_t ldc)
{
    if (M == 0 || N == 0) return;
    if (K == 0) { /* BLAS leaves C untouched when K = 0 only if beta = 1; be explicit */
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++)
                C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
        return;
    }
    blas_single_threaded();
    int nt = 1;
#ifdef _OPENMP
    if (!omp_in_parallel() && M * N * K >= RP_SGEMM_PAR_MIN) nt = omp_get_max_threads();
#endif
    /* split the longer of M and N into nt blocks whose sizes are multiples of 16 */
    int split_rows = M >= N;
    int64_t len = split_rows ? M : N;
    int64_t block = ((len + nt - 1) / nt + 15) / 16 * 16;
    if (nt <= 1 || block >= len) {
        sgemm_block(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    int64_t nblocks = (len + block - 1) / block;
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(static)
#endif
    for (int64_t bi = 0; bi < nblocks; bi++) {
        int64_t lo = bi * block, n = len - lo < block ? len - lo : block;
        if (split_rows) /* rows lo.. of op(A) and C */
            sgemm_block(transA, transB, n, N, K, alpha, transA ? A + lo : A + lo * lda, lda, B,
                        ldb, beta, C + lo * ldc, ldc);
        else /* columns lo.. of op(B) and C */
            sgemm_block(transA, transB, M, n, K, alpha, A, lda, transB ? B + lo * ldb : B + lo,
                        ldb, beta, C + lo, ldc);
    }
}

void rp_sgemm_naive(int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
                    const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                    float *C, int64_t ldc)
{
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double acc = 0.0;
            for (int64_t p = 0; p < K; p++) {
                double a = (double)(transA ? A[p * lda + i] : A[i * lda + p]);
                double b = (double)(transB ? B[j * ldb + p] : B[p * ldb + j]);
                acc += a * b;
            }
            double c = beta == 0.0f ? 0.0 : (double)beta * (double)C[i * ldc + j];
            C[i * ldc + j] = (float)((double)alpha * acc + c);
        }
}

const char *rp_blas_core(void) { return openblas_get_corename(); }
const char *rp_blas_config(void) { return openblas_get_config(); }
int rp_blas_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

void rp_blas_set_threads(int n)
{
    if (n < 1) n = 1;
    blas_single_threaded();
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
}

const char *rp_blas_wanted_coretype(void)
{
    const char *env = getenv("OPENBLAS_CORETYPE");
    if (env && *env) return NULL;
    if (strcmp(openblas_get_corename(), "Prescott") != 0) return NULL;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
    return NULL;
}

void rp_blas_fix_coretype(char **argv)
{
    const char *want = rp_blas_wanted_coretype();
    if (!want) return;
    /* the re-executed process sees the variable, so rp_blas_wanted_coretype() is NULL there */
    setenv("OPENBLAS_CORETYPE", want, 1);
    execv("/proc/self/exe", argv);
    /* exec failed: carry on with the slow kernels */
}
