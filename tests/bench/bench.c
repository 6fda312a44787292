/* make bench: sgemm GFLOPS at 1 and 2 threads, the OpenBLAS core, and the time of one attention
 * forward and of forward + backward for each pe mode at B=16, T=512, H=4, d_k=32 (BENCH_REPS
 * repetitions, default 5). Figures are measured, never asserted:
 * each is the best of several repetitions (the two vCPUs of a shared host are noisy). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "rp.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void cpu_model(char *buf, size_t len)
{
    snprintf(buf, len, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *p = strchr(line, ':');
            if (p) {
                p += 2;
                p[strcspn(p, "\n")] = '\0';
                snprintf(buf, len, "%s", p);
            }
            break;
        }
    }
    fclose(f);
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

/* Best GFLOPS of `reps` timed runs of C = A @ B (M x K)(K x N), after one warm-up. */
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

int main(int argc, char **argv)
{
    (void)argc;
    rp_blas_fix_coretype(argv);
    char cpu[256];
    cpu_model(cpu, sizeof cpu);
    const char *ct = getenv("OPENBLAS_CORETYPE");
    printf("machine: %s, %ld cores\n", cpu, sysconf(_SC_NPROCESSORS_ONLN));
    printf("openblas: %s (core %s, OPENBLAS_CORETYPE=%s)\n", rp_blas_config(), rp_blas_core(),
           ct ? ct : "unset");
    int max_threads = rp_blas_threads();
    rp_rng r;
    rp_rng_seed(&r, 1);

    printf("\nsgemm (best of 5)                 1 thread    %d threads\n", max_threads);
    static const int64_t shapes[][3] = {{1024, 1024, 1024}, {8192, 384, 128}, {8192, 128, 512}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int64_t M = shapes[i][0], N = shapes[i][1], K = shapes[i][2];
        rp_blas_set_threads(1);
        double g1 = sgemm_gflops(&r, M, N, K, 5);
        rp_blas_set_threads(max_threads);
        double g2 = sgemm_gflops(&r, M, N, K, 5);
        char label[64];
        snprintf(label, sizeof label, "M=%lld N=%lld K=%lld", (long long)M, (long long)N,
                 (long long)K);
        printf("  %-30s %7.1f GFLOPS %7.1f GFLOPS\n", label, g1, g2);
    }

    const int64_t B = 16, T = 512, H = 4, D = 32, HD = H * D;
    int nt = max_threads;
    int reps = getenv("BENCH_REPS") ? atoi(getenv("BENCH_REPS")) : 5;
    if (reps < 1) reps = 1;
    printf("\nattention, B=%lld T=%lld H=%lld d_k=%lld, causal, nthreads %d (best of %d)\n",
           (long long)B, (long long)T, (long long)H, (long long)D, nt, reps);
    printf("  %-14s %12s %12s %14s\n", "pe", "forward", "fwd+bwd", "fwd tokens/s");
    float *q = randbuf(&r, B * T * HD), *k = randbuf(&r, B * T * HD);
    float *v = randbuf(&r, B * T * HD), *out = randbuf(&r, B * T * HD);
    float *dout = randbuf(&r, B * T * HD), *dq = randbuf(&r, B * T * HD);
    float *dk = randbuf(&r, B * T * HD), *dv = randbuf(&r, B * T * HD);
    float *att = randbuf(&r, B * H * T * T);
    float *scratch = randbuf(&r, rp_attention_scratch_floats(T, T, D, D, nt));
    static const rp_pe modes[] = {RP_PE_NONE, RP_PE_ROPE, RP_PE_ROPER, RP_PE_ROPER_LEGACY};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        rp_attn_cfg cfg = {.pe = modes[i], .causal = 1, .scale = 1.0 / 5.656854249492381,
                           .base = 10000.0, .pairing = RP_PAIR_HALF, .d_rot_qk = D,
                           .d_rot_v = D, .q_offset = 0};
        double best_f = 1e30, best_fb = 1e30;
        for (int rep = -1; rep < reps; rep++) {
            double t0 = now();
            rp_attention_forward(out, HD, att, scratch, q, HD, k, HD, v, HD, B, T, T, H, D, D,
                                 &cfg, nt);
            double t1 = now();
            rp_attention_backward(dq, dk, dv, scratch, dout, HD, att, q, HD, k, HD, v, HD, B, T,
                                  T, H, D, D, &cfg, nt);
            double t2 = now();
            if (rep >= 0 && t1 - t0 < best_f) best_f = t1 - t0;
            if (rep >= 0 && t2 - t0 < best_fb) best_fb = t2 - t0;
        }
        printf("  %-14s %9.2f ms %9.2f ms %14.0f\n", rp_pe_name(modes[i]), best_f * 1e3,
               best_fb * 1e3, (double)(B * T) / best_f);
    }
    free(q);
    free(k);
    free(v);
    free(out);
    free(dout);
    free(dq);
    free(dk);
    free(dv);
    free(att);
    free(scratch);

    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("\npeak memory (max RSS): %.1f MiB\n", (double)ru.ru_maxrss / 1024.0);
    return 0;
}
