/* Matrix multiply: cblas_sgemm, with a naive reference beside it, and OpenBLAS control. */
#ifndef RP_BLAS_H
#define RP_BLAS_H

#include <stddef.h>
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

/* ---- The OpenBLAS kernel choice and the OpenMP wait policy ----
 * OpenBLAS reads OPENBLAS_CORETYPE and libgomp reads OMP_WAIT_POLICY / GOMP_SPINCOUNT once, when
 * they load, so an executable sets them and re-executes itself (rp_blas_fix_env) and
 * tests/with_blas_env exports them for other programs (from `roper --blas-env`). A value the user
 * set is kept, with one exception: an OPENBLAS_CORETYPE that names slower kernels than this CPU
 * runs (Prescott on an AVX2 or AVX-512 CPU, Haswell or Zen on an AVX-512 one, as some machines set
 * in every shell) is dropped unless ROPER_KEEP_CORETYPE is set (non-empty).
 * The portable build (core/sys/build.h) runs OpenBLAS's Haswell kernels on every CPU: there any other
 * OPENBLAS_CORETYPE is dropped (ROPER_KEEP_CORETYPE does not keep it) and Haswell is wanted. */

/* The CPU features the kernel rule looks at (1 = present and usable). */
typedef struct rp_cpu_features {
    int avx2, fma, avx512f, avx512bw, avx512dq, avx512vl, avx512_bf16;
} rp_cpu_features;

/* This CPU's features (cpuid through __builtin_cpu_supports, which also checks that the operating
 * system saves the AVX-512 registers). All 0 on other architectures (aarch64), where OpenBLAS's own
 * kernel choice is kept. */
rp_cpu_features rp_cpu_detect(void);

/* The kernel rule, a pure function of the CPU's features and the core OpenBLAS chose by itself
 * (openblas_get_corename() with OPENBLAS_CORETYPE unset; compared ignoring case). Returns the
 * OPENBLAS_CORETYPE to set, or NULL when OpenBLAS's own choice is the fastest it has:
 *  - "Prescott" (OpenBLAS 0.3.21 does not know the CPU): "SkylakeX" with AVX-512 F, BW, DQ and
 *    VL, else "Haswell" with AVX2 and FMA, else NULL;
 *  - "Haswell" or "Zen" on a CPU with AVX-512 F, BW, DQ and VL (Zen 4 under 0.3.21): "SkylakeX";
 *  - anything else: NULL.
 * When why is not NULL, a short reason ("AVX-512 CPU that OpenBLAS maps to Haswell") is written
 * into why[0..len) (an empty string when the result is NULL). */
const char *rp_blas_coretype_rule(const rp_cpu_features *cpu, const char *reported, char *why,
                                  size_t len);

/* The OPENBLAS_CORETYPE found in the environment that roper drops, or NULL: the variable's value
 * when the rule, applied to it as if OpenBLAS had chosen it, names faster kernels for this CPU;
 * NULL when it is unset or empty, when ROPER_KEEP_CORETYPE is set, or when ROPER_BLAS_REPLACED is
 * set (roper dropped one already: never a second time, so re-executing cannot loop). In the
 * portable build: any value but Haswell (unless ROPER_BLAS_REPLACED is set). Points into the
 * environment. */
const char *rp_blas_dropped_coretype(void);

/* The OPENBLAS_CORETYPE this process should have been started with, or NULL: the rule for this
 * CPU and the loaded library's core; when OPENBLAS_CORETYPE is set, NULL unless roper drops it
 * (rp_blas_dropped_coretype), and then the rule for its value. In the portable build: "Haswell"
 * unless OPENBLAS_CORETYPE is Haswell already. */
const char *rp_blas_wanted_coretype(void);

/* Which kernels run and why, as one sentence ("set by roper: AVX-512 CPU that OpenBLAS maps to
 * Haswell", "chosen by OpenBLAS for this CPU", "set by the user: OPENBLAS_CORETYPE=Haswell", or
 * "chosen by OpenBLAS, slower than SkylakeX on this ...: start with OPENBLAS_CORETYPE=SkylakeX
 * ..." in a process started without the variable it needs, or "set in the environment
 * (OPENBLAS_CORETYPE=Haswell), slower than SkylakeX on this AVX-512 CPU: start without it ..." in
 * one started with a value roper drops). "Set by roper" means the variable equals what the rule
 * gives for the core in ROPER_BLAS_DETECTED. After roper dropped a value (ROPER_BLAS_REPLACED
 * holds it), the first two end in ", in place of OPENBLAS_CORETYPE=Haswell from the environment
 * (...)". Static storage, rewritten by every call. */
const char *rp_blas_core_reason(void);

/* The OpenMP wait policy this process should have been started with: "passive" (idle OpenMP
 * threads sleep instead of spinning, so they never steal a core from another process), or NULL
 * when the user set OMP_WAIT_POLICY or GOMP_SPINCOUNT (non-empty). */
const char *rp_omp_wanted_wait_policy(void);

/* The OpenMP wait policy in force and where it came from ("passive (set by roper)",
 * "active (set by the user: OMP_WAIT_POLICY=active)", "spin count 1000 (set by the user:
 * GOMP_SPINCOUNT=1000)", "libgomp's default (idle threads spin before they sleep)").
 * Static storage, rewritten by every call. */
const char *rp_omp_wait_policy(void);

/* The environment variables a process of roper should start with and does not have yet: at most
 * RP_BLAS_ENV_MAX (name, value) pairs written to names[] and values[] (static strings or the
 * environment's); returns their count. OPENBLAS_CORETYPE (with ROPER_BLAS_DETECTED, the core
 * OpenBLAS chose by itself, which rp_blas_core_reason() reads) when rp_blas_wanted_coretype()
 * names one, and also, in a process re-executed by rp_blas_drop_coretype (OPENBLAS_CORETYPE unset,
 * ROPER_BLAS_REPLACED set), OpenBLAS's own choice with ROPER_BLAS_REPLACED, so that a shell
 * replaces the value it still has; OMP_WAIT_POLICY=passive (with ROPER_OMP_WAIT_POLICY, which
 * rp_omp_wait_policy() reads) when rp_omp_wanted_wait_policy() says so. */
#define RP_BLAS_ENV_MAX 5
int rp_blas_wanted_env(const char *names[RP_BLAS_ENV_MAX], const char *values[RP_BLAS_ENV_MAX]);

/* For executables: when rp_blas_dropped_coretype() names a value, re-executes /proc/self/exe with
 * argv, OPENBLAS_CORETYPE (and ROPER_BLAS_DETECTED) unset and ROPER_BLAS_REPLACED set to the value,
 * so that OpenBLAS chooses by itself. Returns only when nothing was dropped or the re-exec failed
 * (the variables then are as they were). */
void rp_blas_drop_coretype(char **argv);

/* For executables: rp_blas_drop_coretype, then sets every variable of rp_blas_wanted_env() (but a
 * dropped value is not named again) and re-executes /proc/self/exe with argv (the variables are
 * read only when the libraries load). Returns only when nothing was needed or the re-exec
 * failed. */
void rp_blas_fix_env(char **argv);

/* The same for OPENBLAS_CORETYPE alone (with ROPER_BLAS_DETECTED). */
void rp_blas_fix_coretype(char **argv);

#endif
