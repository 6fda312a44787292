/* make bench: sgemm GFLOPS at 1 and 2 threads, the OpenBLAS core, the time of one attention
 * forward and of forward + backward for each pe mode at B=16, T=512, H=4, d_k=32 (BENCH_REPS
 * repetitions, default 5) with the forward + backward's share of the sgemm peak, linear
 * attention, and GELU forward/backward over S's feed-forward activations. Figures are measured,
 * never asserted: each is the best of several repetitions (the two vCPUs of a shared host are
 * noisy).
 *
 * `bench attention PE` prints only the attention line of one mode (make check-build prints it for
 * every -march of its matrix that this CPU runs, so a slow tuning shows beside the native one). */
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "rp.h"

#include "bench_common.c"

/* The positional scheme of mode pe with every placement it rotates d features wide, base
 * RP_ROPE_BASE, half pairing (rp_pe_scheme_init: the attention's cfg.scheme). */
static rp_pe_scheme scheme_of(rp_pe pe, int64_t d)
{
    rp_pe_cfg c = {.mode = pe, .base = RP_ROPE_BASE, .pairing = RP_PAIR_HALF};
    const int64_t d_rot[4] = {d, d, d, d};
    rp_pe_scheme s;
    (void)rp_pe_scheme_init(&s, &c, d_rot);
    return s;
}

int main(int argc, char **argv)
{
    /* only_pe: the one mode of `bench attention PE`, else NULL (the whole bench) */
    const char *only_pe = argc == 3 && strcmp(argv[1], "attention") == 0 ? argv[2] : NULL;
    if ((argc > 1 && !only_pe) || (only_pe && rp_pe_from_name(only_pe) < 0)) {
        fprintf(stderr, "usage: bench [attention PE] (PE: a mode of rp_pe_names)\n");
        return 2;
    }
    rp_blas_fix_coretype(argv);
    int max_threads = rp_blas_threads();
    rp_rng r;
    rp_rng_seed(&r, 1);
    if (only_pe) goto attention;
    print_machine();

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

attention:;
    const int64_t B = 16, T = 512, H = 4, D = 32, HD = H * D;
    int nt = max_threads;
    int reps = getenv("BENCH_REPS") ? atoi(getenv("BENCH_REPS")) : 5;
    if (reps < 1) reps = 1;
    /* The forward + backward's FLOPs, those of its matrix products: causal, so the scores cover
     * T^2 / 2 entries; the forward's two products (Q'K'^T, PV') 2 x 2 (T^2 / 2) d_k, the
     * backward's five (the scores again, dP, dV', dQ', dK') 5 x 2 (T^2 / 2) d_k: 7 B H T^2 d_k
     * in all (the relative modes' own products are not counted, so their share compares time).
     * The peak is sgemm 1024^3 on the same threads, measured again right before each line. */
    const double attn_flops = 7.0 * (double)(B * H) * (double)(T * T) * (double)D;
    if (!only_pe) {
        printf("\nattention, B=%lld T=%lld H=%lld d_k=%lld, causal, nthreads %d (best of %d)\n",
               (long long)B, (long long)T, (long long)H, (long long)D, nt, reps);
        printf("share of the peak: fwd+bwd's 7 B H T^2 d_k FLOPs (its products, the backward's "
               "recomputation counted) against sgemm 1024^3 on the same threads, measured right "
               "before each line\n");
        printf("  %-14s %12s %12s %14s  %s\n", "pe", "forward", "fwd+bwd", "fwd tokens/s",
               "fwd+bwd: share of the peak");
    }
    float *q = randbuf(&r, B * T * HD), *k = randbuf(&r, B * T * HD);
    float *v = randbuf(&r, B * T * HD), *out = randbuf(&r, B * T * HD);
    float *dout = randbuf(&r, B * T * HD), *dq = randbuf(&r, B * T * HD);
    float *dk = randbuf(&r, B * T * HD), *dv = randbuf(&r, B * T * HD);
    float *lse = randbuf(&r, B * H * T);
    /* the relative modes' tables, random, of the sizes of rel_clip 16, rel_buckets 32,
     * rel_max_distance 128 (xl: T rows), and their gradients (computed in the fwd+bwd figure) */
    const int64_t clip = 16, buckets = 32, R = 2 * T; /* R: enough rows for every mode here */
    float *tabs[6], *grads[6];
    for (int i = 0; i < 6; i++) {
        tabs[i] = randbuf(&r, R * HD);
        grads[i] = randbuf(&r, R * HD);
    }
    rp_attn_rel rel = {tabs[0], tabs[1], tabs[2], tabs[3], tabs[4], tabs[5]};
    rp_attn_rel_grad drel = {grads[0], grads[1], grads[2], grads[3], grads[4], grads[5]};
    /* every mode of the table that differs inside attention: none (sinusoidal and learned only
     * add to the embeddings), each rotating mode and each relative one */
    int64_t nscratch = 0;
    for (int pe = 0; pe < RP_PE_COUNT; pe++) {
        rp_attn_cfg cfg = {.scheme = scheme_of((rp_pe)pe, D), .causal = 1,
                           .rel = {.clip = clip, .buckets = buckets}};
        int64_t n = rp_attention_scratch_floats(&cfg, B, T, T, H, D, D, nt);
        nscratch = n > nscratch ? n : nscratch;
    }
    float *scratch = randbuf(&r, nscratch);
    for (int pe = 0; pe < RP_PE_COUNT; pe++) {
        if (rp_pe_mode_of((rp_pe)pe)->absolute != RP_ABS_NONE) continue;
        if (only_pe && strcmp(only_pe, rp_pe_name((rp_pe)pe)) != 0) continue;
        rp_attn_cfg cfg = {.scheme = scheme_of((rp_pe)pe, D), .causal = 1,
                           .scale = 1.0 / 5.656854249492381, .q_offset = 0,
                           .rel = {.clip = clip, .buckets = buckets, .max_distance = 128},
                           .tables = &rel};
        int relative = rp_rel_of(rp_pe_mode_of((rp_pe)pe)->rel)->terms != 0;
        rp_attn_io io = {.B = B, .T = T, .S = T, .H = H, .D = D, .Dv = D, .q = q, .k = k, .v = v,
                         .ldq = HD, .ldk = HD, .ldv = HD, .out = out, .ldo = HD, .lse = lse,
                         .dout = dout, .dq = dq, .dk = dk, .dv = dv,
                         .drel = relative ? &drel : NULL, .scratch = scratch, .nthreads = nt};
        double best_f = 1e30, best_fb = 1e30;
        double peak = sgemm_gflops(&r, 1024, 1024, 1024, 5);
        for (int rep = -1; rep < reps; rep++) {
            double t0 = now();
            rp_attention_forward(&io, &cfg);
            double t1 = now();
            rp_attention_backward(&io, &cfg);
            double t2 = now();
            if (rep >= 0 && t1 - t0 < best_f) best_f = t1 - t0;
            if (rep >= 0 && t2 - t0 < best_fb) best_fb = t2 - t0;
        }
        printf("  %-14s %9.2f ms %9.2f ms %14.0f %5.0f%% of %.0f GFLOPS\n",
               rp_pe_name((rp_pe)pe), best_f * 1e3, best_fb * 1e3, (double)(B * T) / best_f,
               100.0 * attn_flops / best_fb * 1e-9 / peak, peak);
    }
    free(lse);
    free(scratch);
    for (int i = 0; i < 6; i++) {
        free(tabs[i]);
        free(grads[i]);
    }
    if (only_pe) goto release;

    /* linear attention at the same size, then both kinds as T grows at 8192 tokens per batch */
    printf("\nlinear attention (phi = elu + 1), B=%lld T=%lld H=%lld d_k=%lld, causal, nthreads "
           "%d (best of %d)\n",
           (long long)B, (long long)T, (long long)H, (long long)D, nt, reps);
    printf("  %-14s %12s %12s %8s %14s %12s %12s\n", "pe", "forward", "fwd+bwd", "bwd/fwd",
           "fwd tokens/s", "min weight", "min den");
    float *lscratch = randbuf(&r, rp_linattn_scratch_floats(T, D, D, nt));
    double *w = malloc((size_t)(H * T * T) * sizeof(double));
    double *den = malloc((size_t)(H * T) * sizeof(double));
    if (!w || !den) return 1;
    static const struct {
        rp_pe pe;
        rp_lin_placement at;
        const char *label;
    } lmodes[] = {{RP_PE_NONE, RP_LIN_AFTER, "none"},
                  {RP_PE_ROPE, RP_LIN_AFTER, "rope"},
                  {RP_PE_ROPE, RP_LIN_BEFORE, "rope (before)"},
                  {RP_PE_ROPER, RP_LIN_AFTER, "roper"}};
    for (size_t i = 0; i < sizeof lmodes / sizeof lmodes[0]; i++) {
        rp_linattn_cfg cfg = rp_linattn_cfg_default(lmodes[i].pe, D, D);
        cfg.placement = lmodes[i].at;
        double best_f = 1e30, best_fb = 1e30;
        float min_den = 0.0f;
        rp_attn_io lio = {.B = B, .T = T, .S = T, .H = H, .D = D, .Dv = D, .q = q, .k = k, .v = v,
                          .ldq = HD, .ldk = HD, .ldv = HD, .out = out, .ldo = HD, .dout = dout,
                          .dq = dq, .dk = dk, .dv = dv, .scratch = lscratch, .nthreads = nt,
                          .min_den = &min_den};
        for (int rep = -1; rep < reps; rep++) {
            double t0 = now();
            rp_linattn_forward(&lio, &cfg);
            double t1 = now();
            rp_linattn_backward(&lio, &cfg);
            double t2 = now();
            if (rep >= 0 && t1 - t0 < best_f) best_f = t1 - t0;
            if (rep >= 0 && t2 - t0 < best_fb) best_fb = t2 - t0;
        }
        /* the smallest normalised weight w_nm / den_n, over the first sequence */
        rp_linattn_weights(w, den, q, HD, k, HD, T, H, D, &cfg);
        double min_w = rp_linattn_min_weight(w, den, T, H);
        /* the backward's time over the forward's: (fwd+bwd - fwd) / fwd */
        printf("  %-14s %9.2f ms %9.2f ms %7.2fx %14.0f %12.3g %12.4g\n", lmodes[i].label,
               best_f * 1e3, best_fb * 1e3, (best_fb - best_f) / best_f,
               (double)(B * T) / best_f, min_w, (double)min_den);
    }
    free(w);
    free(den);
    free(lscratch);
release:
    free(q);
    free(k);
    free(v);
    free(out);
    free(dout);
    free(dq);
    free(dk);
    free(dv);
    if (only_pe) return 0;

    printf("\nscaling with T at 8192 tokens per batch (B = 8192 / T), H=%lld d_k=%lld, pe rope, "
           "forward+backward ms (best of %d)\n",
           (long long)H, (long long)D, reps);
    printf("  %6s %4s %14s %14s %10s\n", "T", "B", "softmax", "linear", "ratio");
    for (int64_t Ts = 128; Ts <= 4096; Ts *= 2) {
        int64_t Bs = 8192 / Ts, n = Bs * Ts * HD;
        float *sq = randbuf(&r, n), *sk = randbuf(&r, n), *sv = randbuf(&r, n);
        float *so = randbuf(&r, n), *sdo = randbuf(&r, n), *sdq = randbuf(&r, n);
        float *sdk = randbuf(&r, n), *sdv = randbuf(&r, n);
        float *slse = randbuf(&r, Bs * H * Ts);
        int64_t sf = rp_attention_scratch_floats(NULL, Bs, Ts, Ts, H, D, D, nt);
        int64_t lf = rp_linattn_scratch_floats(Ts, D, D, nt);
        float *ss = randbuf(&r, sf > lf ? sf : lf);
        rp_attn_cfg scfg = {.scheme = scheme_of(RP_PE_ROPE, D), .causal = 1,
                            .scale = 1.0 / 5.656854249492381, .q_offset = 0};
        rp_linattn_cfg lcfg = rp_linattn_cfg_default(RP_PE_ROPE, D, D);
        rp_attn_io sio = {.B = Bs, .T = Ts, .S = Ts, .H = H, .D = D, .Dv = D, .q = sq, .k = sk,
                          .v = sv, .ldq = HD, .ldk = HD, .ldv = HD, .out = so, .ldo = HD,
                          .lse = slse, .dout = sdo, .dq = sdq, .dk = sdk, .dv = sdv,
                          .scratch = ss, .nthreads = nt};
        double best_s = 1e30, best_l = 1e30;
        for (int rep = -1; rep < reps; rep++) {
            double t0 = now();
            rp_attention_forward(&sio, &scfg);
            rp_attention_backward(&sio, &scfg);
            double t1 = now();
            rp_linattn_forward(&sio, &lcfg);
            rp_linattn_backward(&sio, &lcfg);
            double t2 = now();
            if (rep >= 0 && t1 - t0 < best_s) best_s = t1 - t0;
            if (rep >= 0 && t2 - t1 < best_l) best_l = t2 - t1;
        }
        printf("  %6lld %4lld %11.2f ms %11.2f ms %9.2fx\n", (long long)Ts, (long long)Bs,
               best_s * 1e3, best_l * 1e3, best_s / best_l);
        free(sq);
        free(sk);
        free(sv);
        free(so);
        free(sdo);
        free(sdq);
        free(sdk);
        free(sdv);
        free(slse);
        free(ss);
    }

    /* GELU over the feed-forward activations of config S (B=16, T=512, d_ff=512) */
    {
        const int64_t n = B * T * 512;
        float *gx = randbuf(&r, n), *gy = randbuf(&r, n), *gd = randbuf(&r, n);
        for (int64_t i = 0; i < n; i++) gx[i] *= 8.0f; /* inputs in [-4, 4) */
        printf("\ngelu over %lld values (S's feed-forward), best of %d\n", (long long)n, reps);
        printf("  %-10s %12s %12s %16s\n", "threads", "forward", "backward", "fwd ns/value");
        for (int pass = 0; pass < 2; pass++) {
            int th = pass == 0 ? 1 : max_threads;
            if (pass == 1 && th == 1) break;
            rp_blas_set_threads(th);
            double best_f = 1e30, best_b = 1e30;
            for (int rep = -1; rep < reps; rep++) {
                double t0 = now();
                rp_gelu_forward(gy, gx, n);
                double t1 = now();
                rp_gelu_backward(gd, gy, gx, n);
                double t2 = now();
                if (rep >= 0 && t1 - t0 < best_f) best_f = t1 - t0;
                if (rep >= 0 && t2 - t1 < best_b) best_b = t2 - t1;
            }
            printf("  %-10d %9.2f ms %9.2f ms %16.2f\n", th, best_f * 1e3, best_b * 1e3,
                   best_f * 1e9 / (double)n);
        }
        rp_blas_set_threads(max_threads);
        free(gx);
        free(gy);
        free(gd);
    }

    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("\npeak memory (max RSS): %.1f MiB\n", (double)ru.ru_maxrss / 1024.0);
    return 0;
}
