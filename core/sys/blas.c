#include "blas.h"

#include "build.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
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

/* ---- The OpenBLAS kernel choice ---- */

/* The features are x86's (cpuid): elsewhere (aarch64) they are all 0, so the rule never names a
 * core there. OpenBLAS chooses its ARM kernels itself (Neoverse N1/V1, Cortex-A57 ...) and its
 * x86 core names mean nothing there: there is nothing to override. */
rp_cpu_features rp_cpu_detect(void)
{
    rp_cpu_features f = {0, 0, 0, 0, 0, 0, 0};
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    f.avx2 = __builtin_cpu_supports("avx2") != 0;
    f.fma = __builtin_cpu_supports("fma") != 0;
    f.avx512f = __builtin_cpu_supports("avx512f") != 0;
    f.avx512bw = __builtin_cpu_supports("avx512bw") != 0;
    f.avx512dq = __builtin_cpu_supports("avx512dq") != 0;
    f.avx512vl = __builtin_cpu_supports("avx512vl") != 0;
    f.avx512_bf16 = __builtin_cpu_supports("avx512bf16") != 0;
#endif
    return f;
}

static int has_avx512(const rp_cpu_features *c)
{
    return c->avx512f && c->avx512bw && c->avx512dq && c->avx512vl;
}

/* AVX-512 CPUs get SkylakeX, also those with AVX-512 BF16 that Cooperlake would accept: in 0.3.21
 * Cooperlake runs the same sgemm kernel as SkylakeX (it adds only the bf16 routines), and measured
 * here on an AVX-512 BF16 Xeon (sgemm 1024^3, 1 / 2 threads) it was not faster: SkylakeX 152.6 /
 * 294.7 GFLOPS, Cooperlake 153.2 / 274.6. (The machine this rule was extended on, a Zen 3 EPYC without AVX-512, cannot run either.)
 * Only known names are ever set: OpenBLAS takes an unknown name for Cooperlake. */
const char *rp_blas_coretype_rule(const rp_cpu_features *cpu, const char *reported, char *why,
                                  size_t len)
{
    const char *want = NULL, *what = "";
    if (why && len) why[0] = '\0';
    if (reported == NULL) return NULL;
    if (strcasecmp(reported, "Prescott") == 0) {
        if (has_avx512(cpu)) want = "SkylakeX", what = "AVX-512";
        else if (cpu->avx2 && cpu->fma) want = "Haswell", what = "AVX2";
        if (want && why && len)
            snprintf(why, len, "%s CPU that OpenBLAS does not know (it falls back to Prescott)",
                     what);
        return want;
    }
    if ((strcasecmp(reported, "Haswell") == 0 || strcasecmp(reported, "Zen") == 0) &&
        has_avx512(cpu)) {
        if (why && len) snprintf(why, len, "AVX-512 CPU that OpenBLAS maps to %s", reported);
        return "SkylakeX";
    }
    return NULL;
}

static const char *env_set(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* Set by the user: keep any OPENBLAS_CORETYPE as it is. */
#define KEEP_VAR "ROPER_KEEP_CORETYPE"
/* Set by roper when it drops an OPENBLAS_CORETYPE it found in the environment: the value dropped. */
#define REPLACED_VAR "ROPER_BLAS_REPLACED"
/* Set beside OPENBLAS_CORETYPE by roper: the core OpenBLAS chose by itself. */
#define DETECTED_VAR "ROPER_BLAS_DETECTED"

static const char *isa_name(const rp_cpu_features *cpu)
{
    return has_avx512(cpu) ? "AVX-512" : cpu->avx2 && cpu->fma ? "AVX2" : "x86-64";
}

/* The portable build (core/sys/build.h) runs these kernels on every CPU, whatever the environment
 * says (ROPER_KEEP_CORETYPE included): its results are the same everywhere only with them. */
#define PORTABLE_CORE "Haswell"

static int portable(void) { return strcmp(rp_build_kind(), "portable") == 0; }

const char *rp_blas_dropped_coretype(void)
{
    const char *env = env_set("OPENBLAS_CORETYPE");
    if (env == NULL || env_set(REPLACED_VAR)) return NULL;
    if (portable()) return strcasecmp(env, PORTABLE_CORE) != 0 ? env : NULL;
    if (env_set(KEEP_VAR)) return NULL;
    rp_cpu_features cpu = rp_cpu_detect();
    return rp_blas_coretype_rule(&cpu, env, NULL, 0) ? env : NULL;
}

const char *rp_blas_wanted_coretype(void)
{
    rp_cpu_features cpu = rp_cpu_detect();
    const char *env = env_set("OPENBLAS_CORETYPE");
    if (portable()) return env && strcasecmp(env, PORTABLE_CORE) == 0 ? NULL : PORTABLE_CORE;
    if (env) return rp_blas_dropped_coretype() ? rp_blas_coretype_rule(&cpu, env, NULL, 0) : NULL;
    return rp_blas_coretype_rule(&cpu, openblas_get_corename(), NULL, 0);
}

const char *rp_blas_core_reason(void)
{
    static char buf[512];
    char why[160], note[192] = "";
    rp_cpu_features cpu = rp_cpu_detect();
    const char *env = env_set("OPENBLAS_CORETYPE"), *dropped = env_set(REPLACED_VAR);
    if (dropped)
        snprintf(note, sizeof note,
                 ", in place of OPENBLAS_CORETYPE=%s from the environment (slower kernels on "
                 "this CPU; " KEEP_VAR "=1 keeps such a value)",
                 dropped);
    if (portable()) {
        if (env && strcasecmp(env, PORTABLE_CORE) == 0)
            snprintf(buf, sizeof buf,
                     "set by roper: the portable build runs OpenBLAS's " PORTABLE_CORE
                     " kernels on every CPU (its results are the same on every x86-64-v3 "
                     "machine)%s%s%s",
                     dropped ? ", in place of OPENBLAS_CORETYPE=" : "", dropped ? dropped : "",
                     dropped ? " from the environment" : "");
        else
            snprintf(buf, sizeof buf,
                     "%s%s%s, not the portable build's " PORTABLE_CORE " kernels: its results "
                     "are not the same on every machine then; start with "
                     "OPENBLAS_CORETYPE=" PORTABLE_CORE " (the roper REPL does this itself)",
                     env ? "set in the environment (OPENBLAS_CORETYPE=" : "chosen by OpenBLAS",
                     env ? env : "", env ? ")" : "");
        return buf;
    }
    if (env) {
        const char *det = env_set(DETECTED_VAR);
        const char *want = rp_blas_dropped_coretype() ? rp_blas_coretype_rule(&cpu, env, NULL, 0)
                                                      : NULL;
        if (want) /* a plain lua5.4 started with it: too late to change */
            snprintf(buf, sizeof buf,
                     "set in the environment (OPENBLAS_CORETYPE=%s), slower than %s on this %s "
                     "CPU: start without it (the roper REPL and tests/with_blas_env drop it "
                     "themselves; " KEEP_VAR "=1 keeps it)",
                     env, want, isa_name(&cpu));
        else if (dropped && det && strcasecmp(env, det) == 0)
            snprintf(buf, sizeof buf, "chosen by OpenBLAS for this CPU%s", note);
        else if ((want = rp_blas_coretype_rule(&cpu, det, why, sizeof why)) &&
                 strcasecmp(want, env) == 0)
            snprintf(buf, sizeof buf, "set by roper: %s%s", why, note);
        else
            snprintf(buf, sizeof buf, "set by the user: OPENBLAS_CORETYPE=%s", env);
        return buf;
    }
    const char *want = rp_blas_coretype_rule(&cpu, openblas_get_corename(), why, sizeof why);
    if (want)
        snprintf(buf, sizeof buf,
                 "chosen by OpenBLAS, slower than %s on this %s: start with "
                 "OPENBLAS_CORETYPE=%s (the roper REPL does this itself)",
                 want, why, want);
    else
        snprintf(buf, sizeof buf, "chosen by OpenBLAS for this CPU%s", note);
    return buf;
}

/* ---- The OpenMP wait policy ----
 * libgomp's default lets an idle worker spin for a while before it sleeps. On a machine shared
 * with another busy process the spinning workers take turns with it on the cores, and 2 threads
 * ran about 6x slower than 1; passive workers sleep at once. */

/* Set beside OMP_WAIT_POLICY by roper: the policy it set. */
#define POLICY_VAR "ROPER_OMP_WAIT_POLICY"

const char *rp_omp_wanted_wait_policy(void)
{
    if (env_set("OMP_WAIT_POLICY") || env_set("GOMP_SPINCOUNT")) return NULL;
    return "passive";
}

const char *rp_omp_wait_policy(void)
{
    static char buf[192];
    const char *policy = env_set("OMP_WAIT_POLICY"), *spin = env_set("GOMP_SPINCOUNT");
    const char *mine = env_set(POLICY_VAR);
    if (policy && !spin && mine && strcmp(policy, mine) == 0)
        snprintf(buf, sizeof buf, "%s (set by roper)", policy);
    else if (policy && spin)
        snprintf(buf, sizeof buf, "%s (set by the user: OMP_WAIT_POLICY=%s, GOMP_SPINCOUNT=%s)",
                 policy, policy, spin);
    else if (policy)
        snprintf(buf, sizeof buf, "%s (set by the user: OMP_WAIT_POLICY=%s)", policy, policy);
    else if (spin)
        snprintf(buf, sizeof buf, "spin count %s (set by the user: GOMP_SPINCOUNT=%s)", spin,
                 spin);
    else
        snprintf(buf, sizeof buf, "libgomp's default (idle threads spin before they sleep)");
    return buf;
}

/* ---- Setting the variables ---- */

static int wanted_env(int coretype_only, int pin, const char *names[RP_BLAS_ENV_MAX],
                      const char *values[RP_BLAS_ENV_MAX])
{
    int n = 0;
    const char *core = rp_blas_wanted_coretype();
    const char *dropped = env_set("OPENBLAS_CORETYPE") ? NULL : env_set(REPLACED_VAR);
    /* a shell must override the variable it still has: name OpenBLAS's own choice */
    if (core == NULL && pin && dropped) core = openblas_get_corename();
    if (core) {
        names[n] = "OPENBLAS_CORETYPE", values[n++] = core;
        names[n] = DETECTED_VAR, values[n++] = openblas_get_corename();
        if (pin && dropped) names[n] = REPLACED_VAR, values[n++] = dropped;
    }
    const char *policy = coretype_only ? NULL : rp_omp_wanted_wait_policy();
    if (policy) {
        names[n] = "OMP_WAIT_POLICY", values[n++] = policy;
        names[n] = POLICY_VAR, values[n++] = policy;
    }
    return n;
}

int rp_blas_wanted_env(const char *names[RP_BLAS_ENV_MAX], const char *values[RP_BLAS_ENV_MAX])
{
    return wanted_env(0, 1, names, values);
}

void rp_blas_drop_coretype(char **argv)
{
    const char *drop = rp_blas_dropped_coretype();
    if (drop == NULL) return;
    char saved[128];
    snprintf(saved, sizeof saved, "%s", drop);
    setenv(REPLACED_VAR, saved, 1);
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv(DETECTED_VAR);
    execv("/proc/self/exe", argv);
    /* exec failed: the library keeps the kernels it loaded with, and the variables say so */
    setenv("OPENBLAS_CORETYPE", saved, 1);
    unsetenv(REPLACED_VAR);
}

static void fix(int coretype_only, char **argv)
{
    rp_blas_drop_coretype(argv);
    const char *names[RP_BLAS_ENV_MAX], *values[RP_BLAS_ENV_MAX];
    int n = wanted_env(coretype_only, 0, names, values);
    if (n == 0) return;
    /* the re-executed process sees the variables, so it wants nothing more */
    for (int i = 0; i < n; i++) setenv(names[i], values[i], 1);
    execv("/proc/self/exe", argv);
    /* exec failed: carry on with the slow kernels and the default policy */
}

void rp_blas_fix_env(char **argv) { fix(0, argv); }
void rp_blas_fix_coretype(char **argv) { fix(1, argv); }
