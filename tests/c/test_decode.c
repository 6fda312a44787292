/* Decoding in batches (core/model/model_decode.c) and its row-invariant product (core/nn/linear.c):
 *  - rp_linear_rows_forward against rp_sgemm_naive (double) on odd shapes, and bitwise the same
 *    row whatever rows come with it, wherever it falls in the tiles, for any thread count;
 *  - rp_model_generate_batch against rp_model_generate one prompt at a time: the same tokens
 *    and bitwise the same logits for every pe mode, softmax and linear attention (with and
 *    without an absolute table), pre- and post-norm, greedy and sampled (temperature, top_k),
 *    ragged prompts (longer than seq_len too), lanes stopping at different steps, windows that
 *    fill and re-encode, more prompts than lanes;
 *  - the lane count, the argument checks, and that a batch leaves the model's own cache alone.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rp.h"

static void fill_rand(float *p, int64_t n, uint64_t *s)
{
    for (int64_t i = 0; i < n; i++)
        p[i] = (float)((double)(check_rand_u64(s) >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

/* ---- the row-invariant product ---------------------------------------------------------- */

/* rp_transpose against the definition, on a shape that is no multiple of its 32 x 32 blocks. */
static void test_transpose(void)
{
    printf("transpose\n");
    const int64_t R = 37, Cc = 70;
    float *a = malloc(sizeof(float) * R * Cc), *t = malloc(sizeof(float) * R * Cc);
    uint64_t s = 1;
    fill_rand(a, R * Cc, &s);
    rp_transpose(t, a, R, Cc);
    int ok = 1;
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < Cc; c++) ok &= t[c * R + r] == a[r * Cc + c];
    CHECK(ok, "transpose of [37 x 70]");
    free(a);
    free(t);
}

/* The product against rp_sgemm_naive (inp @ w^T + b in double) on odd shapes: every N from 1 to
 * 9 (the tiles are 4 rows), widths around the 32-column tiles, with and without a bias; and
 * every row computed alone (N = 1) and inside a shuffled batch is bitwise the same. */
static void test_rows(void)
{
    printf("row-invariant linear\n");
    const int64_t Cs[] = {1, 3, 17, 64, 70, 257};
    const int64_t OCs[] = {1, 5, 31, 32, 33, 64, 100, 257};
    double worst = 0.0;
    int invariant = 1, close = 1;
    uint64_t s = 7;
    for (size_t ci = 0; ci < sizeof Cs / sizeof *Cs; ci++)
        for (size_t oi = 0; oi < sizeof OCs / sizeof *OCs; oi++)
            for (int64_t N = 1; N <= 9; N++)
                for (int bias = 0; bias < 2; bias++) {
                    int64_t C = Cs[ci], OC = OCs[oi];
                    float *w = malloc(sizeof(float) * OC * C), *wt = malloc(sizeof(float) * OC * C);
                    float *x = malloc(sizeof(float) * N * C), *b = malloc(sizeof(float) * OC);
                    float *out = malloc(sizeof(float) * N * OC), *ref = malloc(sizeof(float) * N * OC);
                    float *one = malloc(sizeof(float) * OC), *perm_x = malloc(sizeof(float) * N * C);
                    float *perm_o = malloc(sizeof(float) * N * OC);
                    fill_rand(w, OC * C, &s);
                    fill_rand(x, N * C, &s);
                    fill_rand(b, OC, &s);
                    rp_transpose(wt, w, OC, C);
                    rp_linear_rows_forward(out, x, wt, bias ? b : NULL, N, C, OC);
                    for (int64_t n = 0; n < N; n++)
                        for (int64_t o = 0; o < OC; o++) ref[n * OC + o] = bias ? b[o] : 0.0f;
                    rp_sgemm_naive(0, 1, N, OC, C, 1.0f, x, C, w, C, 1.0f, ref, OC);
                    for (int64_t i = 0; i < N * OC; i++) {
                        /* float sums of C terms of size <= 1: a few C ulp of the largest */
                        double d = fabs((double)out[i] - (double)ref[i]);
                        if (d > worst) worst = d;
                        if (d > 4e-7 * (double)(C + 1)) close = 0;
                    }
                    /* each row alone */
                    for (int64_t n = 0; n < N; n++) {
                        rp_linear_rows_forward(one, x + n * C, wt, bias ? b : NULL, 1, C, OC);
                        invariant &= memcmp(one, out + n * OC, sizeof(float) * OC) == 0;
                    }
                    /* the rows reversed: each lands in another tile position */
                    for (int64_t n = 0; n < N; n++)
                        memcpy(perm_x + n * C, x + (N - 1 - n) * C, sizeof(float) * C);
                    rp_linear_rows_forward(perm_o, perm_x, wt, bias ? b : NULL, N, C, OC);
                    for (int64_t n = 0; n < N; n++)
                        invariant &= memcmp(perm_o + n * OC, out + (N - 1 - n) * OC,
                                            sizeof(float) * OC) == 0;
                    free(w), free(wt), free(x), free(b), free(out), free(ref), free(one);
                    free(perm_x), free(perm_o);
                }
    CHECK(close, "rows = naive within 4e-7 (C + 1): max |diff| %.3g", worst);
    CHECK(invariant, "every row bitwise the same alone, in a batch and in another tile position");
    printf("  max |diff| against the double reference: %.3g\n", worst);

    /* large enough for OpenMP: 1 thread and 2 threads give the same bits */
    const int64_t N = 64, C = 256, OC = 300; /* 4.9M multiply-adds: over the parallel threshold */
    float *w = malloc(sizeof(float) * OC * C), *wt = malloc(sizeof(float) * OC * C);
    float *x = malloc(sizeof(float) * N * C), *o1 = malloc(sizeof(float) * N * OC);
    float *o2 = malloc(sizeof(float) * N * OC);
    fill_rand(w, OC * C, &s);
    fill_rand(x, N * C, &s);
    rp_transpose(wt, w, OC, C);
    int threads = rp_blas_threads();
    rp_blas_set_threads(1);
    rp_linear_rows_forward(o1, x, wt, NULL, N, C, OC);
    rp_blas_set_threads(2);
    rp_linear_rows_forward(o2, x, wt, NULL, N, C, OC);
    rp_blas_set_threads(threads);
    CHECK(memcmp(o1, o2, sizeof(float) * N * OC) == 0, "1 and 2 threads: the same bits");
    free(w), free(wt), free(x), free(o1), free(o2);
}

/* ---- batches against one prompt at a time --------------------------------------------- */

#define NP 11
#define NEW 30
static const int64_t plen[NP] = {1, 3, 5, 12, 20, 2, 7, 16, 4, 9, 1};

/* The model of these tests: odd sizes around the tiles (d_model 48, d_k 12, d_ff 80, vocab 23),
 * seq_len 12, so that prompts of up to 20 tokens and 30 new ones cut and re-encode windows. */
static rp_model_cfg dec_cfg(rp_pe pe, rp_norm norm)
{
    rp_model_cfg c = rp_model_cfg_default(23);
    c.d_model = 48;
    c.heads = 4;
    c.layers = 2;
    c.d_ff = 80;
    c.seq_len = 12;
    c.max_batch = 1;
    c.pe.mode = pe;
    c.norm = norm;
    c.act = norm == RP_NORM_POST ? RP_ACT_GELU : RP_ACT_RELU;
    c.seed = 11 + (uint64_t)pe;
    c.rel.clip = 3; /* clipping and t5's log buckets within the 12 positions */
    c.rel.buckets = 6;
    c.rel.max_distance = 8;
    return c;
}

/* The generator of prompt p: seed 1000 jumped p times (the convention of m:generate_batch). */
static void stream(rp_rng *r, int64_t p)
{
    rp_rng_seed(r, 1000);
    for (int64_t i = 0; i < p; i++) rp_rng_jump(r);
}

typedef struct {
    int runs, same, lengths_seen[NEW + 1];
} tally;

/* One model, one decoding setting: every prompt alone through rp_model_generate, then all of them
 * through rp_model_generate_batch with 1, 4 and 64 lanes; tokens, counts and logits must be
 * bitwise the same (on one thread and on two). stop < -1 picks the stop token from the outputs
 * without one (the sixth token of prompt 0), so that lanes stop at different steps. */
static void compare(rp_model *m, const char *label, double temp, int64_t top_k, int32_t stop,
                    tally *t)
{
    const int64_t V = rp_model_config(m)->vocab;
    int32_t tokens[128];
    int64_t off[NP + 1] = {0};
    uint64_t s = 99;
    for (int p = 0; p < NP; p++) {
        off[p + 1] = off[p] + plen[p];
        for (int64_t i = off[p]; i < off[p + 1]; i++) tokens[i] = (int32_t)(check_rand_u64(&s) % 23);
    }
    static int32_t want[NP * NEW], got[NP * NEW];
    static float lwant[NP * NEW * 23], lgot[NP * NEW * 23];
    int64_t nwant[NP], ngot[NP];
    rp_rng r;
    rp_gen_cfg g = {temp, top_k, stop < -1 ? -1 : stop, &r, NULL, 0.0};
    if (stop < -1) {
        int64_t n0;
        stream(&r, 0);
        CHECK_STATUS(rp_model_generate(m, tokens, plen[0], NEW, &g, want, &n0), RP_OK, NULL);
        g.stop_token = want[5];
    }
    g.logits = NULL;
    for (int p = 0; p < NP; p++) {
        stream(&r, p);
        g.logits = lwant + p * NEW * V;
        CHECK_STATUS(rp_model_generate(m, tokens + off[p], plen[p], NEW, &g, want + p * NEW,
                                       &nwant[p]),
                     RP_OK, NULL);
        t->lengths_seen[nwant[p]] = 1;
    }
    const int64_t lanes[3] = {1, 4, 64};
    rp_rng rngs[NP];
    for (int li = 0; li < 3; li++) {
        for (int p = 0; p < NP; p++) stream(&rngs[p], p);
        memset(got, 0xff, sizeof got);
        memset(lgot, 0xff, sizeof lgot);
        g.rng = NULL;
        g.logits = lgot;
        /* 4 lanes on one thread, 64 on two (the lanes' attention spread over them) */
        int threads = rp_blas_threads();
        rp_blas_set_threads(li == 1 ? 1 : 2);
        rp_status st = rp_model_generate_batch(m, tokens, off, NP, NEW, &g, rngs, lanes[li], got,
                                               ngot);
        rp_blas_set_threads(threads);
        int same = st == RP_OK;
        for (int p = 0; p < NP && same; p++) {
            same &= ngot[p] == nwant[p];
            same &= memcmp(got + p * NEW, want + p * NEW, sizeof(int32_t) * (size_t)nwant[p]) == 0;
            same &= memcmp(lgot + p * NEW * V, lwant + p * NEW * V,
                           sizeof(float) * (size_t)(nwant[p] * V)) == 0;
        }
        t->runs++;
        t->same += same;
        CHECK(same, "%s, T %g, top_k %lld, stop %d, %lld lanes: batch = one at a time (%s)", label,
              temp, (long long)top_k, (int)g.stop_token, (long long)lanes[li],
              st == RP_OK ? "tokens or logits differ" : rp_last_error());
        if (!same)
            for (int p = 0; p < NP; p++)
                printf("   prompt %d: %lld / %lld tokens, first %d / %d\n", p, (long long)ngot[p],
                       (long long)nwant[p], got[p * NEW], want[p * NEW]);
        g.rng = &r;
    }
}

/* Every setting of one model: greedy and sampled, without and with a stop token. */
static void compare_all(rp_model *m, const char *label, tally *t)
{
    const double temps[3] = {0.0, 1.0, 0.7};
    const int64_t topk[3] = {0, 0, 3};
    for (int d = 0; d < 3; d++) {
        compare(m, label, temps[d], topk[d], -1, t);
        compare(m, label, temps[d], topk[d], -2, t);
    }
}

static void test_batch_equals_single(void)
{
    printf("batch = one at a time\n");
    tally t;
    memset(&t, 0, sizeof t);
    char label[96];
    CHECK_EACH_PE(p, CHECK_PE_ALL) {
        rp_model_cfg c = dec_cfg((rp_pe)p, p % 2 ? RP_NORM_POST : RP_NORM_PRE);
        if (p == RP_PE_ROPER) { /* partial, interleaved rotation */
            c.pe.fraction_qk = 0.5;
            c.pe.fraction_v = 2.0 / 3.0;
            c.pe.pairing = RP_PAIR_INTERLEAVED;
        }
        rp_model *m = check_model_new(&c);
        snprintf(label, sizeof label, "softmax %s", rp_pe_name((rp_pe)p));
        compare_all(m, label, &t);
        rp_model_free(m);
    }
    static const rp_pe lin_pe[5] = {RP_PE_NONE, RP_PE_ROPE, RP_PE_ROPER, RP_PE_SINUSOIDAL,
                                    RP_PE_LEARNED};
    for (int p = 0; p < 5; p++) {
        rp_model_cfg c = dec_cfg(lin_pe[p], p % 2 ? RP_NORM_POST : RP_NORM_PRE);
        c.attention = RP_ATTN_LINEAR;
        c.linear_rope = p == 2 ? RP_LIN_BEFORE : RP_LIN_AFTER;
        rp_model *m = check_model_new(&c);
        snprintf(label, sizeof label, "linear %s (%s)", rp_pe_name(lin_pe[p]),
                 rp_lin_placement_name(c.linear_rope));
        compare_all(m, label, &t);
        rp_model_free(m);
    }
    int kinds = 0;
    for (int i = 0; i <= NEW; i++) kinds += t.lengths_seen[i];
    printf("  %d of %d runs the same; %d different output lengths seen\n", t.same, t.runs, kinds);
    CHECK(kinds >= 5 && t.lengths_seen[NEW] && t.lengths_seen[1],
          "lanes stop at different steps (%d output lengths, 1 and %d among them)", kinds, NEW);
}

/* A batch does not touch the model's own cache: a sequence fed in two parts around a batch has
 * the logits of one fed without interruption. */
static void test_cache_untouched(void)
{
    printf("the model's cache\n");
    rp_model_cfg c = dec_cfg(RP_PE_ROPER, RP_NORM_PRE);
    rp_model *m = check_model_new(&c);
    int32_t tok[10] = {1, 5, 2, 7, 3, 9, 4, 0, 22, 6}, out[8];
    float a[23], b[23];
    int64_t off[3] = {0, 4, 10}, n_out[2];
    rp_model_cache_reset(m);
    CHECK_STATUS(rp_model_cache_feed(m, tok, 10, a), RP_OK, NULL);
    rp_model_cache_reset(m);
    CHECK_STATUS(rp_model_cache_feed(m, tok, 5, NULL), RP_OK, NULL);
    rp_gen_cfg g = {0.0, 0, -1, NULL, NULL, 0.0};
    CHECK_STATUS(rp_model_generate_batch(m, tok, off, 2, 4, &g, NULL, 8, out, n_out), RP_OK, NULL);
    CHECK(rp_model_cache_len(m) == 5, "cache_len 5 after the batch");
    CHECK_STATUS(rp_model_cache_feed(m, tok + 5, 5, b), RP_OK, NULL);
    CHECK(memcmp(a, b, sizeof a) == 0, "the feed goes on as if no batch had run");
    rp_model_free(m);
}

static void test_lanes_and_errors(void)
{
    printf("lanes, errors\n");
    rp_model_cfg c = dec_cfg(RP_PE_ROPE, RP_NORM_PRE);
    rp_model *m = check_model_new(&c);
    CHECK(rp_model_batch_lanes(m, 128, 64) == 64, "128 prompts, 64 lanes");
    CHECK(rp_model_batch_lanes(m, 5, 64) == 5, "5 prompts, 5 lanes");
    CHECK(rp_model_batch_lanes(m, 0, 64) == 1, "no prompts: 1");
    rp_model_free(m);
    /* a lane of about 4 MiB of cache: at most 64 fit in RP_GEN_BATCH_BYTES */
    c.d_model = 64;
    c.heads = 4;
    c.d_ff = 64;
    c.seq_len = 4096;
    m = check_model_new(&c);
    int64_t nl = rp_model_batch_lanes(m, 1000, 1000);
    CHECK(nl >= 56 && nl < 64, "4 MiB lanes: %lld within the budget", (long long)nl);
    rp_model_free(m);

    /* the default lanes from the cache: (cache - weights) / lane, clamped to 8 .. 64 */
    c = dec_cfg(RP_PE_ROPE, RP_NORM_PRE);
    m = check_model_new(&c);
    int64_t C = c.d_model, F = c.d_ff;
    int64_t weights = 4 * (c.layers * (C * 3 * C + C * C + C * F + F * C) + C * c.vocab);
    int64_t kv = 2 * c.layers * c.seq_len * C * 4; /* keys and values of every position */
    /* the smallest caches that give 9 and 10 lanes: one lane apart */
    int64_t at[2];
    for (int j = 0; j < 2; j++) {
        int64_t lo = 0, hi = (int64_t)1 << 40;
        while (lo + 1 < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            if (rp_model_lanes_for_cache(m, mid) >= 9 + j) hi = mid;
            else lo = mid;
        }
        at[j] = hi;
    }
    int64_t lane = at[1] - at[0];
    CHECK(lane >= kv && lane < kv + 65536, "a lane: %lld bytes, its cache %lld", (long long)lane,
          (long long)kv);
    CHECK(at[0] == weights + 9 * lane, "9 lanes from %lld bytes = weights %lld + 9 lanes",
          (long long)at[0], (long long)weights);
    CHECK(rp_model_lanes_for_cache(m, -1) == RP_LANES_MIN, "unknown caches: %d lanes",
          RP_LANES_MIN);
    CHECK(rp_model_lanes_for_cache(m, 0) == RP_LANES_MIN, "no cache: the least");
    CHECK(rp_model_lanes_for_cache(m, weights + 40 * lane + lane / 2) == 40, "40.5 lanes: 40");
    CHECK(rp_model_lanes_for_cache(m, (int64_t)1 << 40) == RP_LANES_MAX, "a huge cache: the most");
    CHECK(rp_model_default_lanes(m) == rp_model_lanes_for_cache(m, rp_cache_bytes()),
          "the default: this machine's caches (%lld bytes): %lld lanes",
          (long long)rp_cache_bytes(), (long long)rp_model_default_lanes(m));
    printf("  this machine: %lld bytes of cache per core, %lld lanes by default\n",
           (long long)rp_cache_bytes(), (long long)rp_model_default_lanes(m));
    rp_model_free(m);

    c = dec_cfg(RP_PE_ROPE, RP_NORM_PRE);
    m = check_model_new(&c);
    int32_t tok[6] = {1, 2, 3, 4, 5, 6}, out[12];
    int64_t off[3] = {0, 3, 6}, n_out[2] = {-5, -5};
    rp_rng r[2];
    rp_gen_cfg g = {0.0, 0, -1, NULL, NULL, 0.0}, s = {1.0, 0, -1, NULL, NULL, 0.0};
    CHECK_STATUS(rp_model_generate_batch(m, tok, off, 2, 6, &s, NULL, 4, out, n_out), RP_ERR_ARG,
                 "needs rngs");
    CHECK_STATUS(rp_model_generate_batch(m, tok, off, 2, 6, &g, r, 0, out, n_out), RP_ERR_ARG,
                 "max_lanes 0");
    CHECK_STATUS(rp_model_generate_batch(m, tok, off, -1, 6, &g, r, 4, out, n_out), RP_ERR_ARG,
                 "n -1");
    CHECK_STATUS(rp_model_generate_batch(m, tok, off, 2, -1, &g, r, 4, out, n_out), RP_ERR_ARG,
                 "n_new -1");
    int64_t bad_off[3] = {0, 3, 3};
    CHECK_STATUS(rp_model_generate_batch(m, tok, bad_off, 2, 6, &g, r, 4, out, n_out), RP_ERR_ARG,
                 "prompt 2 has 0 tokens");
    int64_t bad0[3] = {1, 3, 6};
    CHECK_STATUS(rp_model_generate_batch(m, tok, bad0, 2, 6, &g, r, 4, out, n_out), RP_ERR_ARG,
                 "offsets[0]");
    tok[4] = 23;
    CHECK_STATUS(rp_model_generate_batch(m, tok, off, 2, 6, &g, r, 4, out, n_out), RP_ERR_RANGE,
                 "token 23 at [2][2] is outside the vocabulary 0..22");
    CHECK(n_out[0] == -5 && n_out[1] == -5, "n_out untouched on an argument error");
    tok[4] = 5;
    g.top_k = -1;
    CHECK_STATUS(rp_model_generate_batch(m, tok, off, 2, 6, &g, r, 4, out, n_out), RP_ERR_ARG,
                 "top_k -1");
    g.top_k = 0;
    CHECK_STATUS(rp_model_generate_batch(m, tok, off, 2, 0, &g, NULL, 4, NULL, n_out), RP_OK, NULL);
    CHECK(n_out[0] == 0 && n_out[1] == 0, "n_new 0: nothing generated");
    CHECK_STATUS(rp_model_generate_batch(m, NULL, NULL, 0, 6, &g, NULL, 4, NULL, NULL), RP_OK,
                 NULL);
    rp_model_free(m);
}

/* The decode rows built once follow the model's own frequencies and angles, set after it was made
 * (rp_model_set_freq, as rp.model's freq/angles and a checkpoint do): the cached path's logits
 * agree with the forward pass's at every position, and differ from those of the standard theta.
 * A model that decoded before its frequencies were set rebuilds them. */
static void test_freq_rows(void)
{
    printf("decode rows of the model's own frequencies\n");
    enum { T = 12 };
    for (int kind = 0; kind < 2; kind++)
        for (int warm = 0; warm < 2; warm++) {
            rp_model_cfg c = dec_cfg(RP_PE_ROPER, RP_NORM_PRE);
            rp_model *m = check_model_new(&c);
            int64_t half = c.d_model / c.heads / 2;
            int32_t tok[T];
            uint64_t s = 5 + (uint64_t)kind;
            for (int i = 0; i < T; i++) tok[i] = (int32_t)((i * 7 + kind) % c.vocab);
            float *std_logits = malloc(sizeof(float) * (size_t)c.vocab);
            float *logits = malloc(sizeof(float) * (size_t)c.vocab);
            if (warm) {
                /* decode first with the standard theta (the rows get built), then set */
                rp_model_cache_reset(m);
                CHECK_STATUS(rp_model_cache_feed(m, tok, T, std_logits), RP_OK, NULL);
            }
            double *tab = malloc(sizeof(double) * (size_t)(T * half));
            float *noise = malloc(sizeof(float) * (size_t)(T * half));
            fill_rand(noise, T * half, &s);
            for (int64_t i = 0; i < T * half; i++) tab[i] = 3.0 * (double)noise[i];
            for (int64_t i = 0; i < half; i++) tab[i] = fabs(tab[i]) + 0.01; /* theta */
            rp_status st = kind ? rp_model_set_freq(m, NULL, 0, tab, T, half)
                                : rp_model_set_freq(m, tab, half, NULL, 0, 0);
            CHECK_STATUS(st, RP_OK, "set_freq");
            CHECK_STATUS(rp_model_forward(m, tok, NULL, NULL, 1, T, 0, NULL), RP_OK, NULL);
            const float *fwd = rp_model_logits(m);
            double worst = 0.0, moved = 0.0;
            rp_model_cache_reset(m);
            for (int t = 0; t < T; t++) {
                CHECK_STATUS(rp_model_cache_feed(m, tok + t, 1, logits), RP_OK, NULL);
                for (int64_t v = 0; v < c.vocab; v++)
                    worst = fmax(worst, fabs((double)logits[v] - (double)fwd[t * c.vocab + v]));
            }
            if (warm)
                for (int64_t v = 0; v < c.vocab; v++)
                    moved = fmax(moved, fabs((double)logits[v] - (double)std_logits[v]));
            CHECK(worst < 1e-4, "%s%s: cached logits vs the forward's, max |diff| %.3g",
                  kind ? "user angles" : "user theta", warm ? " set after decoding" : "", worst);
            if (warm)
                CHECK(moved > 1e-3, "%s: the logits moved from the standard theta's (%.3g)",
                      kind ? "user angles" : "user theta", moved);
            free(std_logits), free(logits), free(tab), free(noise);
            rp_model_free(m);
        }
}

int main(void)
{
    test_transpose();
    test_rows();
    test_batch_equals_single();
    test_cache_untouched();
    test_lanes_and_errors();
    test_freq_rows();
    return check_summary("test_decode");
}
