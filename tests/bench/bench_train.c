/* make bench, training part: ms per training step (forward + backward + Adam), tokens/s and peak
 * RSS for the issue-3 configurations, for pe = rope and roper:
 *   S: d_model 128, 4 heads, 3 layers, d_ff 512, seq 512, batch 16 (labml substring-by-prefix)
 *   M: the same with 6 layers (labml arithmetic)
 *   P: d_model 512, 8 heads, 6 layers, d_ff 2048, seq 640, batch 32 (the write-up's 20M), 1 step
 * Usage: bench_train [S|M|P ...] (default: all). Figures are measured, never asserted; the time of
 * a configuration is the best of its timed steps after one warm-up step (P: one timed step). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "rp.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double peak_rss_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

typedef struct {
    const char *name;
    int64_t d_model, heads, layers, d_ff, seq, batch;
    int steps; /* timed steps */
} bench_cfg;

static const bench_cfg configs[] = {
    {"S", 128, 4, 3, 512, 512, 16, 3},
    {"M", 128, 4, 6, 512, 512, 16, 3},
    {"P", 512, 8, 6, 2048, 640, 32, 1},
};

/* Times training steps of one configuration; returns 0 on success. */
static int run(const bench_cfg *bc, rp_pe pe)
{
    const int64_t V = 32;
    rp_model_cfg cfg = rp_model_cfg_default(V);
    cfg.d_model = bc->d_model;
    cfg.heads = bc->heads;
    cfg.layers = bc->layers;
    cfg.d_ff = bc->d_ff;
    cfg.seq_len = bc->seq;
    cfg.max_batch = bc->batch;
    cfg.pe = pe;
    cfg.seed = 1;
    rp_model *m = rp_model_new(&cfg);
    if (!m) {
        fprintf(stderr, "bench_train: %s\n", rp_last_error());
        return 1;
    }
    int64_t n = bc->batch * bc->seq, np = rp_model_param_count(m);
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)n), *tgt = malloc(sizeof(int32_t) * (size_t)n);
    float *mom = calloc((size_t)np * 2, sizeof(float));
    if (!tok || !tgt || !mom) {
        fprintf(stderr, "bench_train: out of memory\n");
        return 1;
    }
    rp_rng r;
    rp_rng_seed(&r, 7);
    for (int64_t i = 0; i < n; i++) {
        tok[i] = (int32_t)rp_rng_int(&r, 0, V - 1);
        tgt[i] = (int32_t)rp_rng_int(&r, 0, V - 1);
    }
    rp_adam_cfg ac = rp_adam_cfg_default();
    rp_adam_state st = {mom, mom + np, np, 0};
    double best = 1e30, fwd_best = 1e30;
    float loss = 0.0f;
    for (int s = -1; s < bc->steps; s++) { /* step -1: warm-up (first touch of the buffers) */
        double t0 = now();
        rp_status rs = rp_model_forward(m, tok, tgt, NULL, bc->batch, bc->seq, 1, &loss);
        double t1 = now();
        rp_model_zero_grad(m);
        if (rs == RP_OK) rs = rp_model_backward(m);
        if (rs != RP_OK) {
            fprintf(stderr, "bench_train: %s\n", rp_last_error());
            return 1;
        }
        rp_adam_step(&ac, &st, rp_model_params(m)->data, rp_model_grads(m)->data, np);
        double dt = now() - t0;
        if (s >= 0 && dt < best) best = dt;
        if (s >= 0 && t1 - t0 < fwd_best) fwd_best = t1 - t0;
    }
    printf("  %s %-6s %7.2fM params  %9.1f ms/step (forward %8.1f ms)  %8.0f tokens/s  loss %.3f"
           "  peak RSS %.0f MiB\n",
           bc->name, rp_pe_name(pe), (double)np / 1e6, best * 1e3, fwd_best * 1e3,
           (double)n / best, (double)loss, peak_rss_mib());
    fflush(stdout);
    free(tok);
    free(tgt);
    free(mom);
    rp_model_free(m);
    return 0;
}

int main(int argc, char **argv)
{
    rp_blas_fix_coretype(argv);
    printf("training steps (forward + backward + Adam), %d threads, OpenBLAS core %s\n",
           rp_blas_threads(), rp_blas_core());
    int rc = 0;
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) {
        int wanted = argc < 2;
        for (int a = 1; a < argc; a++)
            if (strcmp(argv[a], configs[i].name) == 0) wanted = 1;
        if (!wanted) continue;
        rc |= run(&configs[i], RP_PE_ROPE);
        rc |= run(&configs[i], RP_PE_ROPER);
    }
    return rc;
}
