/* make bench, training part: ms per training step (forward + backward + Adam), tokens/s, the
 * achieved GFLOPS as a share of the sgemm peak measured in the same run, and peak RSS for the
 * issue-3 configurations, for pe = rope and roper (S also for shaw, xl, t5, deberta, alibi):
 *   S: d_model 128, 4 heads, 3 layers, d_ff 512, seq 512, batch 16 (labml substring-by-prefix)
 *   M: the same with 6 layers (labml arithmetic)
 *   P: d_model 512, 8 heads, 6 layers, d_ff 2048, seq 640, batch 32 (the write-up's 20M), 1 step
 *   L8, L32: a language model (docs/language_model.md) of d_model 256, 8 heads, 4 layers, d_ff
 *   1024, seq 256, batch 16 with a vocabulary of 8,000 and 32,000, where the output layer and the
 *   softmax over the vocabulary dominate: their share of the step is the step's time less that of
 *   the same model with the 32-token vocabulary of the other lines, over the step's time
 *   LM2s, LM2m, LM2l: the language-model study's three sizes (docs/results.md, "Language modelling
 *   at 20 tokens per parameter"): d_model 32, 64, 128 with 2, 4, 8 heads, 6 layers, d_ff 4
 *   d_model, seq 256, batch 16, a vocabulary of 2,048 with tied embeddings, on 1 thread as the
 *   study runs them (`make bench PORTABLE=1` times the study's own build)
 * then S (rope) once more on 1 thread and with a competing busy process pinned on core 0.
 * Usage: bench_train [S|M|P ...] (default: all). Figures are measured, never asserted; the time of
 * a configuration is the best of its timed steps after one warm-up step (P: one timed step). */
#define _GNU_SOURCE /* sched_setaffinity, CPU_SET */
#include <malloc.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rp.h"

#include "bench_common.c"

/* The peak resident set since the last reset_peak_rss() (Linux's VmHWM, which writing "5" to
 * /proc/self/clear_refs resets, after malloc_trim), so that each configuration gets its own figure; the process's
 * whole peak (getrusage) where /proc does not allow that. */
static int hwm_resettable;

static void reset_peak_rss(void)
{
    /* first give back what earlier configurations freed but glibc kept (its mmap threshold grows
     * after large frees, so their buffers may sit in the heap), else it counts here */
    malloc_trim(0);
    FILE *f = fopen("/proc/self/clear_refs", "w");
    hwm_resettable = f && fputs("5", f) >= 0;
    if (f && fclose(f) != 0) hwm_resettable = 0;
}

static double peak_rss_mib(void)
{
    if (hwm_resettable) {
        FILE *f = fopen("/proc/self/status", "r");
        char line[256];
        long kib = -1;
        while (f && fgets(line, sizeof line, f))
            if (sscanf(line, "VmHWM: %ld kB", &kib) == 1) break;
        if (f) fclose(f);
        if (kib >= 0) return (double)kib / 1024.0;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

typedef struct {
    const char *name;
    int64_t d_model, heads, layers, d_ff, seq, batch;
    int steps;     /* timed steps */
    int64_t vocab; /* 0: VOCAB */
    int tie;       /* tie_embeddings */
    int threads;   /* 0: every thread (rp_blas_threads) */
} bench_cfg;

static const bench_cfg configs[] = {
    {"S", 128, 4, 3, 512, 512, 16, 3, 0, 0, 0},
    {"M", 128, 4, 6, 512, 512, 16, 3, 0, 0, 0},
    {"P", 512, 8, 6, 2048, 640, 32, 1, 0, 0, 0},
    {"L8", 256, 8, 4, 1024, 256, 16, 3, 8000, 0, 0},
    {"L32", 256, 8, 4, 1024, 256, 16, 3, 32000, 0, 0},
    {"LM2s", 32, 2, 6, 128, 256, 16, 12, 2048, 1, 1},
    {"LM2m", 64, 4, 6, 256, 256, 16, 10, 2048, 1, 1},
    {"LM2l", 128, 8, 6, 512, 256, 16, 6, 2048, 1, 1},
};

enum { VOCAB = 32 };

static int64_t vocab_of(const bench_cfg *bc) { return bc->vocab > 0 ? bc->vocab : VOCAB; }

/* The useful floating-point operations of one training step: the matrix products only, 2 M N K
 * for an (M x K)(K x N) product in the forward pass and twice that in the backward pass (the
 * gradients of both operands), so 3x the forward count. Per layer, with N = batch * seq tokens,
 * C = d_model, F = d_ff, T = seq: the qkv projection 2 N C (3C), the output projection 2 N C C,
 * the feed-forward 2 N C F twice; attention's Q K^T and A V counted causal, i.e. T (T + 1) / 2
 * (query, key) pairs per sequence and head, each 2 d_k for either product: 2 * batch * C * T (T+1)
 * in all. Plus the head, 2 N C V. Not counted: what the kernels compute of the masked half of
 * the scores (whole row blocks), softmax, LayerNorm, activations, rotations, embedding,
 * cross-entropy, Adam. */
static double step_flops(const bench_cfg *bc)
{
    double N = (double)(bc->batch * bc->seq), C = (double)bc->d_model, F = (double)bc->d_ff;
    double T = (double)bc->seq, B = (double)bc->batch;
    double layer = 2.0 * N * C * (3.0 * C) + 2.0 * N * C * C + 2.0 * (2.0 * N * C * F) +
                   2.0 * B * C * T * (T + 1.0);
    double forward = (double)bc->layers * layer + 2.0 * N * C * (double)vocab_of(bc);
    return 3.0 * forward;
}

/* Times training steps of one configuration: the best step in *best (seconds); 0 on success. */
static int time_steps(const bench_cfg *bc, rp_pe pe, double *best_out, double *fwd_out,
                      float *loss_out, int64_t *params_out)
{
    rp_model_cfg cfg = rp_model_cfg_default(vocab_of(bc));
    cfg.d_model = bc->d_model;
    cfg.heads = bc->heads;
    cfg.layers = bc->layers;
    cfg.d_ff = bc->d_ff;
    cfg.seq_len = bc->seq;
    cfg.max_batch = bc->batch;
    cfg.pe.mode = pe;
    cfg.tie_embeddings = bc->tie;
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
        tok[i] = (int32_t)rp_rng_int(&r, 0, vocab_of(bc) - 1);
        tgt[i] = (int32_t)rp_rng_int(&r, 0, vocab_of(bc) - 1);
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
    *best_out = best;
    *fwd_out = fwd_best;
    *loss_out = loss;
    *params_out = np;
    free(tok);
    free(tgt);
    free(mom);
    rp_model_free(m);
    return 0;
}

/* One line of the table: the step, tokens/s, loss and peak RSS as before, then the FLOPs and their
 * share of the sgemm peak, measured again right before this configuration (the load of other
 * processes on a shared machine changes within a run). */
static int run_line(const bench_cfg *bc, rp_pe pe, rp_rng *r, double *best_out);

/* run_line on the configuration's threads (its own count, else every thread). */
static int run(const bench_cfg *bc, rp_pe pe, rp_rng *r, double *best_out)
{
    int nt = rp_blas_threads();
    if (bc->threads > 0) rp_blas_set_threads(bc->threads);
    int rc = run_line(bc, pe, r, best_out);
    rp_blas_set_threads(nt);
    return rc;
}

static int run_line(const bench_cfg *bc, rp_pe pe, rp_rng *r, double *best_out)
{
    double best, fwd_best;
    float loss;
    int64_t np;
    double peak_gflops = sgemm_gflops(r, 1024, 1024, 1024, 5);
    reset_peak_rss();
    if (time_steps(bc, pe, &best, &fwd_best, &loss, &np) != 0) return 1;
    double gflop = step_flops(bc) * 1e-9, gflops = gflop / best;
    printf("  %s %-6s %7.3fM params  %9.1f ms/step (forward %8.1f ms)  %8.0f tokens/s  loss %.3f"
           "  peak RSS %.0f MiB  %7.1f GFLOP/step %6.1f GFLOPS %4.0f%% of a %.0f GFLOPS peak\n",
           bc->name, rp_pe_name(pe), (double)np / 1e6, best * 1e3, fwd_best * 1e3,
           (double)(bc->batch * bc->seq) / best, (double)loss, peak_rss_mib(), gflop, gflops,
           100.0 * gflops / peak_gflops, peak_gflops);
    if (bc->threads > 0)
        printf("    %s on %d thread%s (the peak too): %.0f CPU-seconds a million tokens\n", bc->name,
               bc->threads, bc->threads == 1 ? "" : "s",
               best * (double)bc->threads * 1e6 / (double)(bc->batch * bc->seq));
    fflush(stdout);
    if (best_out) *best_out = best;
    if (bc->vocab > 0) { /* the output layer and softmax: this step less the same at VOCAB */
        bench_cfg small = *bc;
        small.vocab = 0;
        double sbest, sfwd;
        if (time_steps(&small, pe, &sbest, &sfwd, &loss, &np) != 0) return 1;
        printf("    %s %-6s output layer + softmax over %lld: %.1f ms of the step (%.0f%%; the "
               "step at a vocabulary of %d: %.1f ms), forward %.0f%%\n",
               bc->name, rp_pe_name(pe), (long long)bc->vocab, (best - sbest) * 1e3,
               100.0 * (best - sbest) / best, VOCAB, sbest * 1e3,
               100.0 * (fwd_best - sfwd) / fwd_best);
        fflush(stdout);
    }
    return 0;
}

/* A child process that spins on core 0 until killed (and dies with its parent); -1 on failure. */
static pid_t start_spinner(void)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid != 0) return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    sched_setaffinity(0, sizeof one, &one);
    volatile unsigned long spin = 0;
    for (;;) spin++;
}

static void stop_spinner(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* S (rope) on 1 thread and, on all threads, with one busy process on core 0: with spinning
 * OpenMP workers the busy core slows every barrier of the step (the issue saw 6x). */
static int run_busy(const bench_cfg *bc, double quiet)
{
    double one, busy, fwd;
    float loss;
    int64_t np;
    int nt = rp_blas_threads();
    rp_blas_set_threads(1);
    int rc = time_steps(bc, RP_PE_ROPE, &one, &fwd, &loss, &np);
    rp_blas_set_threads(nt);
    if (rc) return rc;
    pid_t pid = start_spinner();
    if (pid < 0) {
        perror("bench_train: fork");
        return 1;
    }
    rc = time_steps(bc, RP_PE_ROPE, &busy, &fwd, &loss, &np);
    stop_spinner(pid);
    if (rc) return rc;
    const char *wp = getenv("OMP_WAIT_POLICY");
    printf("\nbusy machine: %s rope, one process spinning on core 0 (OMP_WAIT_POLICY=%s); "
           "quiet = without it\n",
           bc->name, wp ? wp : "unset");
    printf("  quiet, %d threads %9.1f ms/step\n", nt, quiet * 1e3);
    printf("  quiet, 1 thread  %9.1f ms/step\n", one * 1e3);
    printf("  busy,  %d threads %9.1f ms/step  = %.2fx the quiet %d-thread step, %.2fx the quiet "
           "1-thread step\n",
           nt, busy * 1e3, busy / quiet, nt, busy / one);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    rp_blas_fix_coretype(argv);
    printf("training steps (forward + backward + Adam), %d threads, OpenBLAS core %s\n",
           rp_blas_threads(), rp_blas_core());
    print_machine();
    rp_rng r;
    rp_rng_seed(&r, 1);
    double peak = sgemm_gflops(&r, 1024, 1024, 1024, 5);
    printf("peak: sgemm 1024^3 on %d threads, best of 5: %.1f GFLOPS now, measured again before "
           "each line (its 100%%); FLOPs counted: the matrix products, attention causal, backward "
           "= 2x forward\n",
           rp_blas_threads(), peak);
    int rc = 0;
    double s_quiet = 0.0;
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) {
        int wanted = argc < 2;
        for (int a = 1; a < argc; a++)
            if (strcmp(argv[a], configs[i].name) == 0) wanted = 1;
        if (!wanted) continue;
        rc |= run(&configs[i], RP_PE_ROPE, &r, i == 0 ? &s_quiet : NULL);
        rc |= run(&configs[i], RP_PE_ROPER, &r, NULL);
        /* S: every other mode of the zoo too (issue 13); the FLOPs counted are those of rope
         * (the relative terms' products are not counted), so their share of the peak compares
         * time, not work */
        if (i == 0)
            for (int pe = RP_PE_SHAW; pe < RP_PE_COUNT; pe++) rc |= run(&configs[i], (rp_pe)pe, &r, NULL);
    }
    if (s_quiet > 0.0) rc |= run_busy(&configs[0], s_quiet);
    return rc;
}
