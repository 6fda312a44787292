/* Helpers shared by the bench programs (tests/bench/bench.c, bench_train.c), which #include this
 * file: it is not compiled on its own. Everything is static; a program uses what it needs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rp.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The value of the first /proc/cpuinfo line starting with key ("model name", "flags"), or def. */
static void cpuinfo_field(const char *key, char *buf, size_t len, const char *def)
{
    snprintf(buf, len, "%s", def);
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[8192];
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, kl) == 0) {
            char *p = strchr(line, ':');
            if (p) {
                p += p[1] == ' ' ? 2 : 1;
                p[strcspn(p, "\n")] = '\0';
                snprintf(buf, len, "%s", p);
            }
            break;
        }
    }
    fclose(f);
}

static void cpu_model(char *buf, size_t len)
{
    cpuinfo_field("model name", buf, len, "unknown CPU");
}

/* The vector extensions that decide OpenBLAS's kernels, as present in /proc/cpuinfo's flags:
 * "avx2 fma avx512f avx512bw avx512dq avx512vl avx512_bf16" or a subset ("none of ..." else). */
static void cpu_vector_flags(char *buf, size_t len)
{
    static const char *const wanted[] = {"avx2",     "fma",      "avx512f",    "avx512bw",
                                         "avx512dq", "avx512vl", "avx512_bf16"};
    char flags[8192];
    cpuinfo_field("flags", flags, sizeof flags, "");
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++) {
        size_t wl = strlen(wanted[i]);
        for (const char *p = flags; (p = strstr(p, wanted[i])) != NULL; p += wl) {
            int starts = p == flags || p[-1] == ' ', ends = p[wl] == ' ' || p[wl] == '\0';
            if (starts && ends) {
                size_t used = strlen(buf);
                snprintf(buf + used, len - used, "%s%s", used ? " " : "", wanted[i]);
                break;
            }
        }
    }
    if (!buf[0]) snprintf(buf, len, "no AVX2, no AVX-512");
    else if (!strstr(buf, "avx512f")) {
        size_t used = strlen(buf);
        snprintf(buf + used, len - used, " (no AVX-512)");
    }
}

/* The lines "machine: <CPU>, <n> cores, <vector flags>", "openblas: <config> (core ...)" and
 * "load: 1-minute average ..." (from /proc/loadavg, when readable). */
static void print_machine(void)
{
    char cpu[256], vec[256];
    cpu_model(cpu, sizeof cpu);
    cpu_vector_flags(vec, sizeof vec);
    const char *ct = getenv("OPENBLAS_CORETYPE");
    printf("machine: %s, %ld cores, %s\n", cpu, sysconf(_SC_NPROCESSORS_ONLN), vec);
    printf("openblas: %s (core %s, OPENBLAS_CORETYPE=%s)\n", rp_blas_config(), rp_blas_core(),
           ct ? ct : "unset");
    /* other processes are not controlled: the load tells whether the figures below are quiet */
    double load = -1.0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &load) != 1) load = -1.0;
        fclose(f);
    }
    if (load >= 0.0) printf("load: 1-minute average %.2f at the start\n", load);
}

static float *randbuf(rp_rng *r, int64_t n)
{
    float *p = malloc(sizeof(float) * (size_t)n);
    if (!p) {
        fprintf(stderr, "bench: out of memory\n");
        exit(1);
    }
    for (int64_t i = 0; i < n; i++) p[i] = (float)(rp_rng_uniform(r) - 0.5);
    return p;
}

/* Best GFLOPS of `reps` timed runs of C = A @ B (M x K)(K x N), after one warm-up, on the current
 * thread count (rp_sgemm splits the product over the OpenMP threads). */
static double sgemm_gflops(rp_rng *r, int64_t M, int64_t N, int64_t K, int reps)
{
    float *A = randbuf(r, M * K), *B = randbuf(r, K * N), *C = randbuf(r, M * N);
    double best = 1e30;
    for (int rep = -1; rep < reps; rep++) {
        double t0 = now();
        rp_sgemm(0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
        double dt = now() - t0;
        if (rep >= 0 && dt < best) best = dt;
    }
    free(A);
    free(B);
    free(C);
    return 2.0 * (double)M * (double)N * (double)K / best * 1e-9;
}
