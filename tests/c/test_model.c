/* The transformer (core/model/): layout and init, config and token checks, whole-model gradient
 * checks by central differences for every pe mode x norm x activation (and with dropout), KV-cache
 * decoding against full forwards, generation (greedy, sliding window, stop token, sampling), a toy
 * training run and dropout behaviour. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

/* The loops over the modes run over the whole mode table: mode p is (rp_pe)p. */
#define NPE ((int)RP_PE_COUNT)

/* A model whose zero-initialised relative tables (t5's bias, xl's u and v) are drawn at random,
 * so that the tests see them act; small clip and buckets (set by the cfg helpers) so that
 * clipping and the logarithmic buckets happen within a few positions. */
static rp_model *new_model(const rp_model_cfg *c)
{
    rp_model *m = check_model_new(c);
    uint64_t s = 4242;
    float *w = rp_model_params(m)->data;
    for (int i = 0; i < rp_model_num_tensors(m); i++) {
        const rp_param_info *p = rp_model_param(m, i);
        if (strstr(p->name, ".rel_u") || strstr(p->name, ".rel_w") || strstr(p->name, ".rel_bias"))
            for (int64_t k = 0; k < p->numel; k++) w[p->offset + k] = (float)check_rand(&s, -0.5, 0.5);
    }
    return m;
}

/* The tiny model of the gradient checks: vocab 7, d_model 8, heads 2, layers 2, d_ff 12,
 * seq_len 6, max_batch 2. */
static rp_model_cfg tiny_cfg(rp_pe pe, rp_norm norm, rp_act act)
{
    rp_model_cfg c = rp_model_cfg_default(7);
    c.d_model = 8;
    c.heads = 2;
    c.layers = 2;
    c.d_ff = 12;
    c.seq_len = 6;
    c.max_batch = 2;
    c.pe.mode = pe;
    c.norm = norm;
    c.act = act;
    c.rel.clip = 2;
    c.rel.buckets = 4;
    c.rel.max_distance = 4;
    /* seeds 1..8 all pass the gradient checks; 6 has the fewest ReLU pre-activations within a
     * finite-difference step of 0 (3 kink fallbacks, see gradcheck) */
    c.seed = 6;
    return c;
}

static int64_t argmax_row(const float *x, int64_t n)
{
    int64_t b = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* ------------------------------------------------------------------------------------------ */

static void test_layout(void)
{
    printf("layout\n");
    for (int variant = 0; variant < 2; variant++) {
        rp_model_cfg c = tiny_cfg(variant ? RP_PE_LEARNED : RP_PE_ROPE,
                                  variant ? RP_NORM_POST : RP_NORM_PRE, RP_ACT_RELU);
        rp_model *m = check_model_new(&c);
        int64_t V = 7, C = 8, F = 12, T = 6;
        /* expected layout */
        char names[64][48];
        int64_t shapes[64][2];
        int nd[64], n = 0;
#define ADD(nm, a, b)                                                   \
    do {                                                                \
        snprintf(names[n], sizeof names[n], "%s", nm);                  \
        shapes[n][0] = a;                                               \
        shapes[n][1] = b;                                               \
        nd[n] = b ? 2 : 1;                                              \
        n++;                                                            \
    } while (0)
        ADD("embed.weight", V, C);
        if (variant) ADD("pos.weight", T, C);
        for (int l = 0; l < 2; l++) {
            char b[48];
            const char *suf[12] = {"norm1.weight", "norm1.bias",   "attn.qkv.weight",
                                   "attn.qkv.bias", "attn.out.weight", "attn.out.bias",
                                   "norm2.weight", "norm2.bias",   "ff.w1.weight",
                                   "ff.w1.bias",   "ff.w2.weight", "ff.w2.bias"};
            int64_t s0[12] = {C, C, 3 * C, 3 * C, C, C, C, C, F, F, C, C};
            int64_t s1[12] = {0, 0, C, 0, C, 0, 0, 0, C, 0, F, 0};
            for (int k = 0; k < 12; k++) {
                snprintf(b, sizeof b, "layers.%d.%s", l, suf[k]);
                ADD(b, s0[k], s1[k]);
            }
        }
        if (!variant) {
            ADD("norm_f.weight", C, 0);
            ADD("norm_f.bias", C, 0);
        }
        ADD("head.weight", V, C);
        ADD("head.bias", V, 0);
#undef ADD
        CHECK(rp_model_num_tensors(m) == n, "num_params %d, want %d", rp_model_num_tensors(m), n);
        int64_t off = 0;
        int ok = 1;
        for (int i = 0; i < n && i < rp_model_num_tensors(m); i++) {
            const rp_param_info *p = rp_model_param(m, i);
            int64_t numel = nd[i] == 2 ? shapes[i][0] * shapes[i][1] : shapes[i][0];
            if (strcmp(p->name, names[i]) != 0 || p->ndim != nd[i] ||
                p->shape[0] != shapes[i][0] || (nd[i] == 2 && p->shape[1] != shapes[i][1]) ||
                p->offset != off || p->numel != numel) {
                printf("  entry %d: %s ndim %d [%lld %lld] off %lld numel %lld; want %s off %lld\n",
                       i, p->name, p->ndim, (long long)p->shape[0], (long long)p->shape[1],
                       (long long)p->offset, (long long)p->numel, names[i], (long long)off);
                ok = 0;
            }
            if (rp_model_find_param(m, names[i]) != i) ok = 0;
            off += numel;
        }
        CHECK(ok, "layout entries (variant %d)", variant);
        CHECK(rp_model_param_count(m) == off, "param count %lld, want %lld",
              (long long)rp_model_param_count(m), (long long)off);
        CHECK(rp_model_params(m)->n == (size_t)off && rp_model_grads(m)->n == (size_t)off,
              "storages hold %zu / %zu floats", rp_model_params(m)->n, rp_model_grads(m)->n);
        CHECK(rp_model_find_param(m, "nope") == -1, "unknown name");
        CHECK(rp_model_param(m, -1) == NULL && rp_model_param(m, n) == NULL, "out of range");
        /* a view outlives the model */
        int qi = rp_model_find_param(m, "layers.1.attn.qkv.weight");
        rp_tensor v, gv;
        rp_model_param_view(&v, m, qi, 0);
        rp_model_param_view(&gv, m, qi, 1);
        CHECK(v.ndim == 2 && v.shape[0] == 24 && v.shape[1] == 8 && rp_tensor_is_contiguous(&v),
              "view shape");
        CHECK(rp_tensor_data(&v) == rp_model_params(m)->data + rp_model_param(m, qi)->offset,
              "view points into the parameter buffer");
        CHECK(rp_tensor_data(&gv) == rp_model_grads(m)->data + rp_model_param(m, qi)->offset,
              "grad view points into the gradient buffer");
        float first = rp_tensor_data(&v)[0];
        rp_model_free(m);
        CHECK(rp_tensor_data(&v)[0] == first, "view alive after rp_model_free");
        rp_tensor_release(&v);
        rp_tensor_release(&gv);
    }
}

static void test_init(void)
{
    printf("init\n");
    rp_model_cfg c = rp_model_cfg_default(50);
    c.d_model = 64;
    c.heads = 4;
    c.layers = 1;
    c.d_ff = 128;
    c.seq_len = 8;
    c.max_batch = 1;
    c.pe.mode = RP_PE_LEARNED;
    c.seed = 7;
    rp_model *m = check_model_new(&c);
    const float *w = rp_model_params(m)->data;
    int bad = 0;
    for (int i = 0; i < rp_model_num_tensors(m); i++) {
        const rp_param_info *p = rp_model_param(m, i);
        const float *d = w + p->offset;
        double s = 0.0, s2 = 0.0, mx = 0.0;
        for (int64_t k = 0; k < p->numel; k++) {
            s += (double)d[k];
            s2 += (double)d[k] * (double)d[k];
            if (fabs((double)d[k]) > mx) mx = fabs((double)d[k]);
        }
        double mean = s / (double)p->numel, sd = sqrt(s2 / (double)p->numel - mean * mean);
        if (strstr(p->name, "norm")) {
            float want = strstr(p->name, "weight") ? 1.0f : 0.0f;
            for (int64_t k = 0; k < p->numel; k++) bad += d[k] != want;
            continue;
        }
        if (strcmp(p->name, "embed.weight") == 0 || strcmp(p->name, "pos.weight") == 0) {
            /* N(0, 1): n = 3200 / 512 values; mean within 5 standard errors, sd within 10% */
            double se = 1.0 / sqrt((double)p->numel);
            int ok = fabs(mean) < 5.0 * se && fabs(sd - 1.0) < 0.1 && mx < 6.0;
            CHECK(ok, "%s: mean %.4f sd %.4f max %.3f (want N(0,1))", p->name, mean, sd, mx);
            continue;
        }
        double fan = strstr(p->name, "ff.w2") ? 128.0 : 64.0, b = 1.0 / sqrt(fan);
        /* U(-b, b): every value inside; sd b/sqrt(3) within 10% (>= 50 values); max near b */
        int inside = mx <= b;
        int spread = p->numel < 50 || (fabs(sd - b / sqrt(3.0)) < 0.1 * b / sqrt(3.0) &&
                                       mx > 0.9 * b && fabs(mean) < 5.0 * b / sqrt(3.0 * (double)p->numel));
        CHECK(inside && spread, "%s: mean %.4f sd %.4f max %.4f bound %.4f", p->name, mean, sd, mx,
              b);
    }
    CHECK(bad == 0, "LayerNorm weights 1, biases 0 (%d wrong)", bad);
    /* same seed, same parameters; another seed, others */
    rp_model *m2 = check_model_new(&c);
    c.seed = 8;
    rp_model *m3 = check_model_new(&c);
    size_t nb = (size_t)rp_model_param_count(m) * sizeof(float);
    CHECK(memcmp(rp_model_params(m)->data, rp_model_params(m2)->data, nb) == 0, "same seed");
    CHECK(memcmp(rp_model_params(m)->data, rp_model_params(m3)->data, nb) != 0, "other seed");
    /* the first value of embed.weight is the first normal of rp_rng(seed) */
    rp_rng r;
    rp_rng_seed(&r, 7);
    CHECK(w[0] == (float)rp_rng_normal(&r), "embed.weight[0] is rng(seed)'s first normal");
    rp_model_free(m);
    rp_model_free(m2);
    rp_model_free(m3);
}

/* ------------------------------------------------------------------------------------------ */

static void test_cfg_check_linear(void)
{
    rp_model_cfg c = tiny_cfg(RP_PE_ROPER_LEGACY, RP_NORM_PRE, RP_ACT_RELU);
    c.attention = RP_ATTN_LINEAR;
    CHECK_STATUS(rp_model_cfg_check(&c), RP_ERR_ARG,
                 "linear attention does not support pe roper_legacy");
    c.pe.mode = RP_PE_ROPER;
    CHECK_STATUS(rp_model_cfg_check(&c), RP_OK, NULL);
    c.attention = (rp_attn_kind)2;
    CHECK_STATUS(rp_model_cfg_check(&c), RP_ERR_ARG, "attention 2 is not softmax (0) or linear");
    c.attention = RP_ATTN_LINEAR;
    c.linear_rope = (rp_lin_placement)5;
    CHECK_STATUS(rp_model_cfg_check(&c), RP_ERR_ARG, "linear_rope 5 is not after (0)");
    rp_model_cfg d = rp_model_cfg_default(7);
    CHECK(d.attention == RP_ATTN_SOFTMAX && d.linear_rope == RP_LIN_AFTER,
          "defaults: softmax, rope after phi");
}

static void test_cfg_check(void)
{
    printf("cfg_check\n");
    rp_model_cfg c = rp_model_cfg_default(18);
    CHECK_STATUS(rp_model_cfg_check(&c), RP_OK, NULL);
    CHECK(c.d_model == 128 && c.heads == 4 && c.layers == 3 && c.d_ff == 512 &&
              c.seq_len == 512 && c.max_batch == 16 && c.norm == RP_NORM_PRE &&
              c.act == RP_ACT_RELU && c.dropout == 0.0 && c.pe.mode == RP_PE_ROPE &&
              c.pe.fraction_qk == 1.0 && c.pe.fraction_v == 1.0 && c.pe.base == 10000.0 &&
              c.pe.pairing == RP_PAIR_HALF && c.seed == 0 && c.vocab == 18,
          "labml defaults");
    rp_model_cfg b = c;
    b.d_model = 130;
    CHECK_STATUS(rp_model_cfg_check(&b), RP_ERR_ARG, "d_model 130 is not divisible by heads 4");
    b = c;
    b.pe.fraction_qk = 0.3;
    CHECK_STATUS(rp_model_cfg_check(&b), RP_ERR_ARG,
                 "fraction_qk 0.3 gives d_rot 9 for d_k 32; it must be even and >= 2");
    b.pe.mode = RP_PE_NONE; /* fractions only matter for the rotary modes */
    CHECK_STATUS(rp_model_cfg_check(&b), RP_OK, NULL);
    b = c;
    b.pe.mode = RP_PE_ROPER;
    b.pe.fraction_v = 0.03;
    CHECK_STATUS(rp_model_cfg_check(&b), RP_ERR_ARG,
                 "fraction_v 0.03 gives d_rot 0 for d_k 32; it must be even and >= 2");
    b.pe.mode = RP_PE_ROPE; /* rope does not rotate v */
    CHECK_STATUS(rp_model_cfg_check(&b), RP_OK, NULL);
    b = c;
    b.pe.fraction_qk = 1.5;
    CHECK_STATUS(rp_model_cfg_check(&b), RP_ERR_ARG, "fraction_qk 1.5 must be in (0, 1]");
    b = c;
    b.vocab = 0;
    CHECK_STATUS(rp_model_cfg_check(&b), RP_ERR_ARG, "vocab 0 must be in 1..");
    b = c;
    b.layers = 0;
    CHECK_STATUS(rp_model_cfg_check(&b), RP_ERR_ARG, "layers 0");
    b = c;
    b.seq_len = -1;
    CHECK_STATUS(rp_model_cfg_check(&b), RP_ERR_ARG, "seq_len -1");
    b = c;
    b.max_batch = 0;
    CHECK_STATUS(rp_model_cfg_check(&b), RP_ERR_ARG, "max_batch 0");
    b = c;
    b.d_ff = 0;
    CHECK_STATUS(rp_model_cfg_check(&b), RP_ERR_ARG, "d_ff 0");
    b = c;
    b.heads = 0;
    CHECK_STATUS(rp_model_cfg_check(&b), RP_ERR_ARG, "heads 0");
    b = c;
    b.dropout = 1.0;
    CHECK_STATUS(rp_model_cfg_check(&b), RP_ERR_ARG, "dropout 1 must be in [0, 1)");
    b.dropout = NAN;
    CHECK_STATUS(rp_model_cfg_check(&b), RP_ERR_ARG, "dropout");
    b = c;
    b.pe.mode = (rp_pe)17;
    CHECK_STATUS(rp_model_cfg_check(&b), RP_ERR_ARG, "pe 17");
    b = c;
    b.norm = (rp_norm)2;
    CHECK_STATUS(rp_model_cfg_check(&b), RP_ERR_ARG, "norm 2");
    b = c;
    b.act = (rp_act)5;
    CHECK_STATUS(rp_model_cfg_check(&b), RP_ERR_ARG, "activation 5 is not relu (0) or gelu (1)");
    b = c;
    b.pe.pairing = (rp_pairing)3;
    CHECK_STATUS(rp_model_cfg_check(&b), RP_ERR_ARG, "pairing 3");
    b = c;
    b.pe.base = 0.0;
    CHECK_STATUS(rp_model_cfg_check(&b), RP_ERR_ARG, "base must be a finite number > 0, got 0");
    b = c;
    b.max_batch = 1 << 20;
    b.seq_len = 1 << 20;
    CHECK_STATUS(rp_model_cfg_check(&b), RP_ERR_ARG, "exceeds 2^31-1 rows");
    b = c;
    b.d_model = 130;
    CHECK(rp_model_new(&b) == NULL, "rp_model_new rejects a bad config");
    CHECK(strstr(rp_last_error(), "d_model 130") != NULL, "with the message: %s", rp_last_error());
    /* too big to allocate: a status, not an abort */
    b = c;
    b.max_batch = 1 << 15;
    b.seq_len = 1 << 15;
    CHECK(rp_model_new(&b) == NULL, "rp_model_new rejects an impossible size");
    CHECK(strstr(rp_last_error(), "2^40") != NULL, "message: %s", rp_last_error());
}

static void test_check_tokens(void)
{
    printf("check_tokens\n");
    rp_model_cfg c = rp_model_cfg_default(18);
    c.d_model = 8;
    c.heads = 2;
    c.layers = 1;
    c.d_ff = 8;
    c.seq_len = 512;
    c.max_batch = 16;
    rp_model *m = check_model_new(&c);
    int32_t tok[2 * 13], tgt[2 * 13];
    for (int i = 0; i < 26; i++) {
        tok[i] = i % 18;
        tgt[i] = (i + 1) % 18;
    }
    CHECK_STATUS(rp_model_check_tokens(m, tok, tgt, 2, 13), RP_OK, NULL);
    tgt[3] = -1;
    CHECK_STATUS(rp_model_check_tokens(m, tok, tgt, 2, 13), RP_OK, NULL);
    tok[13 + 12] = 57; /* batch row 2, position 13, counted from 1 */
    CHECK_STATUS(rp_model_check_tokens(m, tok, tgt, 2, 13), RP_ERR_RANGE,
                 "token 57 at [2, 13] is outside the vocabulary 0..17");
    float loss = 0.0f;
    CHECK_STATUS(rp_model_forward(m, tok, tgt, NULL, 2, 13, 0, &loss), RP_ERR_RANGE,
                 "token 57 at [2, 13]");
    tok[13 + 12] = -3;
    CHECK_STATUS(rp_model_check_tokens(m, tok, NULL, 2, 13), RP_ERR_RANGE, "token -3 at [2, 13]");
    tok[13 + 12] = 0;
    tgt[4] = 18;
    CHECK_STATUS(rp_model_check_tokens(m, tok, tgt, 2, 13), RP_ERR_RANGE,
                 "target 18 at [1, 5] is outside the vocabulary 0..17");
    tgt[4] = -2;
    CHECK_STATUS(rp_model_check_tokens(m, tok, tgt, 2, 13), RP_ERR_RANGE, "target -2 at [1, 5]");
    CHECK_STATUS(rp_model_check_tokens(m, tok, NULL, 20, 13), RP_ERR_RANGE,
                 "batch 20 exceeds max_batch 16");
    CHECK_STATUS(rp_model_check_tokens(m, tok, NULL, 1, 600), RP_ERR_RANGE,
                 "T 600 exceeds seq_len 512");
    CHECK_STATUS(rp_model_check_tokens(m, tok, NULL, 0, 5), RP_ERR_ARG, "batch 0");
    CHECK_STATUS(rp_model_check_tokens(m, tok, NULL, 1, 0), RP_ERR_ARG, "T 0");
    CHECK_STATUS(rp_model_check_tokens(m, NULL, NULL, 1, 1), RP_ERR_ARG, "tokens");
    CHECK_STATUS(rp_model_forward(m, tok, NULL, NULL, 20, 13, 0, &loss), RP_ERR_RANGE,
                 "batch 20 exceeds max_batch 16");
    CHECK(rp_model_logits(m) == NULL, "no logits before a successful forward");
    CHECK_STATUS(rp_model_backward(m), RP_ERR_ARG, "backward needs a forward");
    CHECK_STATUS(rp_model_forward(m, tok, NULL, NULL, 2, 13, 0, &loss), RP_OK, NULL);
    CHECK(isnan(loss), "no targets: loss NaN");
    CHECK_STATUS(rp_model_backward(m), RP_ERR_ARG, "with targets");
    rp_model_free(m);
}

/* ------------------------------------------------------------------------------------------ */
/* gradient checks */

/* Loss of the current parameters (a train forward when dropout is on, with the dropout RNG put
 * back to *rs first so that every evaluation uses the same masks). */
static float eval_loss(rp_model *m, const int32_t *tok, const int32_t *tgt, const uint8_t *mask,
                       int64_t B, int64_t T, const rp_rng *rs)
{
    float loss = NAN;
    if (rs) *rp_model_rng(m) = *rs;
    rp_status st = rp_model_forward(m, tok, tgt, mask, B, T, rs != NULL, &loss);
    if (st != RP_OK) printf("forward failed: %s\n", rp_last_error());
    return loss;
}

static double worst_rel_all = 0.0, worst_abs_all = 0.0;
static double worst_abs_gelu = 0.0;
static int total_kinks = 0;

/* Central differences of the float loss against the analytic gradient for `per` elements of every
 * named tensor (its largest-gradient element and per - 1 random ones).
 *
 * Tolerance: the loss (~log 7 ~ 2) is computed in float, with rounding of a few 1e-7 absolute
 * that does not cancel between the two evaluations, so with eps = 1e-2 the central difference
 * carries ~2e-7 / 2e-2 = 1e-5 of noise; its truncation error eps^2 f'''/6 is ~1e-5 for these
 * O(1)-curvature losses (the GELU runs show |fd - g| <= ~1e-5 overall). |fd - g| <= 3e-4 +
 * 3e-2 |g| leaves a margin of 20x or more over both, and is far below what a wrong term (a
 * missing residual path, a dropped bias, a transposed rotation: errors of order |g|) gives.
 *
 * ReLU kinks: a ReLU pre-activation within eps of 0 makes the loss non-smooth inside the step, and
 * with d_ff 12 such pre-activations are common (init seed 1234 had ones 6e-6, 9e-5, 1e-3 and
 * 3e-3 from 0, and 5 of its checked elements missed the central test). For ReLU models
 * only, an element that misses the central test gets a second chance with step 1e-3 (10x less
 * likely to straddle a kink): the central difference, |fd - g| <= 5e-4 + 3e-2 |g| (noise
 * 2e-7 / 2e-3 = 1e-4), or, when the two one-sided differences disagree by more than their
 * tolerance (a kink inside the step), the one on the current point's side within 1e-3 + 3e-2 |g|
 * (truncation eps f''/2 ~ 5e-4, noise 2e-4). A wrong gradient matches neither.
 * These fallbacks are counted and printed. */
static void gradcheck_model(rp_model *m, const rp_model_cfg *c, const char *label, int per,
                            const char *only);

static void gradcheck(const rp_model_cfg *c, const char *label, int per)
{
    rp_model *m = new_model(c);
    gradcheck_model(m, c, label, per, NULL);
    rp_model_free(m);
}

/* gradcheck on the model m (of config c); with only, every element of the tensor named so and
 * nothing else. */
static void gradcheck_model(rp_model *m, const rp_model_cfg *c, const char *label, int per,
                            const char *only)
{
    const int64_t B = 2, T = 6;
    int32_t tok[12], tgt[12];
    uint8_t mask[12];
    uint64_t s = 99;
    for (int i = 0; i < 12; i++) {
        tok[i] = (int32_t)(check_rand_u64(&s) % 7);
        tgt[i] = (int32_t)(check_rand_u64(&s) % 7);
        mask[i] = 1;
    }
    tgt[4] = -1;  /* not scored */
    mask[9] = 0;  /* not scored */
    rp_rng rs = *rp_model_rng(m);
    const rp_rng *rsp = c->dropout > 0.0 ? &rs : NULL;
    float loss0 = eval_loss(m, tok, tgt, mask, B, T, rsp);
    rp_model_zero_grad(m);
    CHECK_STATUS(rp_model_backward(m), RP_OK, NULL);
    float *w = rp_model_params(m)->data;
    const float *g = rp_model_grads(m)->data;
    const double eps = 1e-2, atol = 3e-4, rtol = 3e-2;
    double worst = 0.0, worst_abs = 0.0;
    const char *worst_name = "";
    int nbad = 0, nchecked = 0, nkink = 0;
    for (int i = 0; i < rp_model_num_tensors(m); i++) {
        const rp_param_info *p = rp_model_param(m, i);
        if (only && strcmp(p->name, only) != 0) continue;
        /* the largest-gradient element and per-1 more spread over the tensor (only: all) */
        int64_t big = 0;
        for (int64_t k = 1; k < p->numel; k++)
            if (fabsf(g[p->offset + k]) > fabsf(g[p->offset + big])) big = k;
        for (int j = 0; j < (only ? p->numel : per); j++) {
            int64_t k = only ? j
                        : j == 0 ? big : (int64_t)(check_rand_u64(&s) % (uint64_t)p->numel);
            int64_t at = p->offset + k;
            float orig = w[at];
            /* divide by the step actually taken (orig +- eps rounded to float) */
            float wp = (float)((double)orig + eps), wm = (float)((double)orig - eps);
            w[at] = wp;
            double lp = (double)eval_loss(m, tok, tgt, mask, B, T, rsp);
            w[at] = wm;
            double lm = (double)eval_loss(m, tok, tgt, mask, B, T, rsp);
            w[at] = orig;
            double fd = (lp - lm) / ((double)wp - (double)wm);
            double an = (double)g[at], err = fabs(fd - an);
            double rel = err / (atol / rtol + fabs(an));
            nchecked++;
            if (err > atol + rtol * fabs(an) && c->act == RP_ACT_RELU) {
                const double e1 = 1e-3, tol1 = 5e-4 + rtol * fabs(an);
                float wp1 = (float)((double)orig + e1), wm1 = (float)((double)orig - e1);
                w[at] = wp1;
                double lp1 = (double)eval_loss(m, tok, tgt, mask, B, T, rsp);
                w[at] = wm1;
                double lm1 = (double)eval_loss(m, tok, tgt, mask, B, T, rsp);
                w[at] = orig;
                double fd1 = (lp1 - lm1) / ((double)wp1 - (double)wm1);
                double dp = (lp1 - (double)loss0) / ((double)wp1 - (double)orig);
                double dm = ((double)loss0 - lm1) / ((double)orig - (double)wm1);
                int kink = fabs(fd1 - an) <= tol1 ||
                           (fabs(dp - dm) > 2.0 * (tol1 + 5e-4) &&
                            fmin(fabs(dp - an), fabs(dm - an)) <= tol1 + 5e-4);
                if (kink) {
                    nkink++;
                    continue;
                }
            }
            if (err > atol + rtol * fabs(an)) {
                if (nbad < 5)
                    printf("  %s: %s[%lld]: fd %.6g analytic %.6g (err %.3g)\n", label, p->name,
                           (long long)k, fd, an, err);
                nbad++;
            }
            if (rel > worst) {
                worst = rel;
                worst_name = p->name;
            }
            if (err > worst_abs) worst_abs = err;
        }
    }
    /* the loss did not move */
    float loss1 = eval_loss(m, tok, tgt, mask, B, T, rsp);
    CHECK(loss1 == loss0, "%s: loss restored (%.9g vs %.9g)", label, (double)loss1, (double)loss0);
    CHECK(nbad == 0, "%s: %d of %d gradient elements outside |fd - g| <= %.0e + %.0e |g|", label,
          nbad, nchecked, atol, rtol);
    printf("  %s: loss %.4f, %d elements (%d at a ReLU kink), max |fd - g| / (1e-2 + |g|) %.3g "
           "(%s; limit 3e-2), max |fd - g| %.3g\n",
           label, (double)loss0, nchecked, nkink, worst, worst_name, worst_abs);
    total_kinks += nkink;
    if (worst > worst_rel_all) worst_rel_all = worst;
    if (worst_abs > worst_abs_all) worst_abs_all = worst_abs;
    if (c->act == RP_ACT_GELU && worst_abs > worst_abs_gelu) worst_abs_gelu = worst_abs;
}

/* learn_freq: every element of rope.freq (the unused rows too: 0 both ways) by central
 * differences, for 1-D rope and roper (interleaved, partial rotation: d_rot 4 and 2), xPos, and
 * 2-D positions (a 2 x 3 grid) with axial, sections and a mixed matrix; and the gradient is the
 * only thing learn_freq adds: with the parameter at the standard frequencies, every other
 * tensor's gradient and the loss equal those of the same model without it to float rounding. */
static void test_gradcheck_freq(void)
{
    rp_model_cfg c = tiny_cfg(RP_PE_ROPE, RP_NORM_PRE, RP_ACT_GELU);
    c.learn_freq = 1;
    rp_model *m = new_model(&c);
    gradcheck_model(m, &c, "rope/pre/gelu learn_freq", 0, "rope.freq");
    rp_model_free(m);
    c = tiny_cfg(RP_PE_ROPER, RP_NORM_POST, RP_ACT_GELU);
    c.learn_freq = 1;
    c.d_model = 16;
    c.heads = 2; /* d_k 8 */
    c.pe.fraction_qk = 0.5;
    c.pe.fraction_v = 0.25;
    c.pe.pairing = RP_PAIR_INTERLEAVED;
    m = new_model(&c);
    gradcheck_model(m, &c, "roper/post/gelu learn_freq, d_rot 4/2 interleaved", 0, "rope.freq");
    rp_model_free(m);
    c = tiny_cfg(RP_PE_ROPER, RP_NORM_PRE, RP_ACT_GELU);
    c.learn_freq = 1;
    c.freq.xpos = 0.4;
    c.freq.xpos_scale_base = 4.0;
    m = new_model(&c);
    gradcheck_model(m, &c, "roper/pre/gelu learn_freq xpos", 0, "rope.freq");
    rp_model_free(m);
    /* 2-D positions: the 6 positions of a row on a 2 x 3 grid */
    int64_t grid[12];
    for (int i = 0; i < 6; i++) grid[2 * i] = i / 3, grid[2 * i + 1] = i % 3 + 1;
    c = tiny_cfg(RP_PE_ROPER, RP_NORM_PRE, RP_ACT_GELU);
    c.learn_freq = 1;
    c.d_model = 16;
    c.heads = 2; /* d_k 8: 4 pairs */
    double W[8] = {0.9, 0.3, -0.2, 0.05, -0.4, 0.7, 0.25, 0.01};
    const struct {
        rp_rope_axes ax;
        const char *what;
    } maps[3] = {{{.n = 2, .map = RP_AXES_AXIAL}, "axial"},
                 {{.n = 2, .map = RP_AXES_SECTIONS, .sections = {1, 3}}, "sections {1, 3}"},
                 {{.n = 2, .map = RP_AXES_MIXED, .mix = W, .n_mix = 4}, "mixed"}};
    /* without learning, the same model gives the same loss and the other gradients */
    rp_model_cfg c0 = c;
    c0.learn_freq = 0;
    rp_model *m0 = new_model(&c0);
    m = new_model(&c);
    int32_t tok[12], tgt[12];
    for (int i = 0; i < 12; i++) tok[i] = (i * 5 + 1) % 7, tgt[i] = (i * 3 + 2) % 7;
    float l0 = 0.0f, l1 = 0.0f;
    CHECK_STATUS(rp_model_forward(m0, tok, tgt, NULL, 2, 6, 1, &l0), RP_OK, NULL);
    CHECK_STATUS(rp_model_forward(m, tok, tgt, NULL, 2, 6, 1, &l1), RP_OK, NULL);
    rp_model_zero_grad(m0);
    rp_model_zero_grad(m);
    CHECK_STATUS(rp_model_backward(m0), RP_OK, NULL);
    CHECK_STATUS(rp_model_backward(m), RP_OK, NULL);
    CHECK(fabsf(l0 - l1) <= 1e-6f, "learn_freq at the standard frequencies: loss %.9g vs %.9g",
          (double)l1, (double)l0);
    int64_t n0 = rp_model_param_count(m0);
    CHECK(rp_model_param_count(m) == n0 + RP_MAX_AXES * 4, "rope.freq adds [3 x 4] at the end");
    CHECK_CLOSE(rp_model_grads(m)->data, rp_model_grads(m0)->data, n0, 1e-5,
                "learn_freq: the other gradients as without it");
    rp_model_free(m0);
    rp_model_free(m);
    for (int k = 0; k < 3; k++) {
        m = new_model(&c);
        CHECK_STATUS(rp_model_set_positions(m, &maps[k].ax, grid, 6), RP_OK, maps[k].what);
        char label[96];
        snprintf(label, sizeof label, "roper 2-D %s learn_freq", maps[k].what);
        gradcheck_model(m, &c, label, 0, "rope.freq");
        rp_model_free(m);
    }
}

/* tie_embeddings: the layout (no head.weight; embed.weight initialised as the output layer's
 * weight, U(-1/sqrt(d_model), 1/sqrt(d_model))), the forward of an untied model whose head.weight
 * is a copy of embed.weight (the same logits, bit for bit), the gradient of embed.weight the sum
 * of that model's embed.weight and head.weight gradients, every element of it against central
 * differences (pre and post norm, rope, roper, none, learned), and the KV-cache decoder against
 * the full forward. */
static void test_tied(void)
{
    printf("tie_embeddings\n");
    static const struct {
        rp_pe pe;
        rp_norm norm;
    } cases[4] = {{RP_PE_ROPE, RP_NORM_PRE}, {RP_PE_ROPER, RP_NORM_POST},
                  {RP_PE_NONE, RP_NORM_PRE}, {RP_PE_LEARNED, RP_NORM_PRE}};
    for (int ci = 0; ci < 4; ci++) {
        rp_model_cfg c = tiny_cfg(cases[ci].pe, cases[ci].norm, RP_ACT_GELU);
        rp_model_cfg cu = c;
        c.tie_embeddings = 1;
        rp_model *m = new_model(&c), *u = new_model(&cu);
        const int64_t V = 7, C = 8;
        char label[96];
        snprintf(label, sizeof label, "tied %s/%s", rp_pe_name(c.pe.mode),
                 c.norm == RP_NORM_PRE ? "pre" : "post");
        int ie = rp_model_find_param(m, "embed.weight");
        CHECK(rp_model_find_param(m, "head.weight") == -1 && rp_model_find_param(m, "head.bias") >= 0,
              "%s: no head.weight, head.bias kept", label);
        CHECK(rp_model_param_count(m) == rp_model_param_count(u) - V * C,
              "%s: %lld parameters, the untied model's less vocab x d_model (%lld)", label,
              (long long)rp_model_param_count(m), (long long)(rp_model_param_count(u) - V * C));
        const rp_param_info *pe = rp_model_param(m, ie);
        CHECK(pe && pe->init == RP_INIT_UNIFORM && pe->fan_in == C && pe->shape[0] == V &&
                  pe->shape[1] == C,
              "%s: embed.weight [vocab x d_model], uniform with fan-in d_model", label);
        const float *w = rp_model_params(m)->data;
        double bound = 1.0 / sqrt((double)C), top = 0.0;
        for (int64_t k = 0; k < V * C; k++)
            if (fabs((double)w[pe->offset + k]) > top) top = fabs((double)w[pe->offset + k]);
        CHECK(top <= bound && top > 0.5 * bound, "%s: |embed.weight| at most %.4f, got %.4f", label,
              bound, top);
        /* u: every entry of m by name, and its head.weight = m's embed.weight */
        float *wu = rp_model_params(u)->data;
        for (int i = 0; i < rp_model_num_tensors(m); i++) {
            const rp_param_info *p = rp_model_param(m, i);
            const rp_param_info *q = rp_model_param(u, rp_model_find_param(u, p->name));
            memcpy(wu + q->offset, w + p->offset, (size_t)p->numel * sizeof(float));
        }
        const rp_param_info *hu = rp_model_param(u, rp_model_find_param(u, "head.weight"));
        const rp_param_info *eu = rp_model_param(u, rp_model_find_param(u, "embed.weight"));
        memcpy(wu + hu->offset, w + pe->offset, (size_t)(V * C) * sizeof(float));
        int32_t tok[12], tgt[12];
        for (int i = 0; i < 12; i++) tok[i] = (i * 5 + 1) % 7, tgt[i] = (i * 3 + 2) % 7;
        float lm = 0.0f, lu = 0.0f;
        CHECK_STATUS(rp_model_forward(m, tok, tgt, NULL, 2, 6, 1, &lm), RP_OK, NULL);
        CHECK_STATUS(rp_model_forward(u, tok, tgt, NULL, 2, 6, 1, &lu), RP_OK, NULL);
        CHECK(memcmp(rp_model_logits(m), rp_model_logits(u), 12 * 7 * sizeof(float)) == 0 &&
                  lm == lu,
              "%s: the logits and loss of the untied copy, bit for bit (%.9g, %.9g)", label,
              (double)lm, (double)lu);
        rp_model_zero_grad(m);
        rp_model_zero_grad(u);
        CHECK_STATUS(rp_model_backward(m), RP_OK, NULL);
        CHECK_STATUS(rp_model_backward(u), RP_OK, NULL);
        const float *gm = rp_model_grads(m)->data, *gu = rp_model_grads(u)->data;
        float sum[56];
        for (int64_t k = 0; k < V * C; k++) sum[k] = gu[eu->offset + k] + gu[hu->offset + k];
        CHECK_CLOSE(gm + pe->offset, sum, V * C, 1e-6,
                    "tied: embed.weight's gradient = the untied embed.weight's + head.weight's");
        for (int i = 0; i < rp_model_num_tensors(m); i++) { /* the others: as untied */
            const rp_param_info *p = rp_model_param(m, i);
            if (i == ie) continue;
            const rp_param_info *q = rp_model_param(u, rp_model_find_param(u, p->name));
            CHECK_CLOSE(gm + p->offset, gu + q->offset, p->numel, 1e-6, p->name);
        }
        gradcheck_model(m, &c, label, 0, "embed.weight");
        /* decoding reads the tied weight: the cache's logits are the full forward's */
        CHECK_STATUS(rp_model_forward(m, tok, NULL, NULL, 1, 6, 0, NULL), RP_OK, NULL);
        float full[42], inc[42];
        memcpy(full, rp_model_logits(m), sizeof full);
        rp_model_cache_reset(m);
        rp_status st = RP_OK;
        for (int64_t t = 0; t < 6 && st == RP_OK; t++)
            st = rp_model_cache_feed(m, tok + t, 1, inc + t * V);
        CHECK(st == RP_OK, "%s: cache feed: %s", label, rp_last_error());
        CHECK_CLOSE(inc, full, 42, 2e-5, "tied: the KV cache's logits are the full forward's");
        rp_model_free(m);
        rp_model_free(u);
    }
}

static void test_gradcheck(void)
{
    printf("gradient checks\n");
    static const char *norms[2] = {"pre", "post"}, *acts[2] = {"relu", "gelu"};
    for (int p = 0; p < NPE; p++)
        for (int n = 0; n < 2; n++)
            for (int a = 0; a < 2; a++) {
                /* the relative modes with GELU only: their terms are in the attention, and ReLU's
                 * kinks (covered by the other modes) only bring the finite differences near the
                 * limit */
                if (check_pe_in(p, CHECK_PE_RELATIVE) && a == RP_ACT_RELU) continue;
                rp_model_cfg c = tiny_cfg((rp_pe)p, (rp_norm)n, (rp_act)a);
                char label[96];
                snprintf(label, sizeof label, "%s/%s/%s", rp_pe_name((rp_pe)p), norms[n], acts[a]);
                gradcheck(&c, label, 3);
            }
    /* partial rotation, interleaved pairing */
    rp_model_cfg c = tiny_cfg(RP_PE_ROPER, RP_NORM_PRE, RP_ACT_GELU);
    c.d_model = 16;
    c.heads = 2; /* d_k 8 */
    c.pe.fraction_qk = 0.5;
    c.pe.fraction_v = 0.25;
    c.pe.pairing = RP_PAIR_INTERLEAVED;
    gradcheck(&c, "roper/pre/gelu, d_rot 4/2 interleaved", 3);
    /* dropout (the masks are held fixed by restoring the dropout RNG before each forward) */
    c = tiny_cfg(RP_PE_ROPE, RP_NORM_PRE, RP_ACT_GELU);
    c.dropout = 0.25;
    gradcheck(&c, "rope/pre/gelu dropout 0.25", 3);
    c = tiny_cfg(RP_PE_ROPER_LEGACY, RP_NORM_POST, RP_ACT_RELU);
    c.dropout = 0.25;
    gradcheck(&c, "roper_legacy/post/relu dropout 0.25", 3);
    /* linear attention: every pe it takes, both placements, pre and post norm */
    static const rp_pe lin_pe[4] = {RP_PE_NONE, RP_PE_LEARNED, RP_PE_ROPE, RP_PE_ROPER};
    for (int p = 0; p < 4; p++)
        for (int at = 0; at < 2; at++) {
            if (at == 1 && (lin_pe[p] == RP_PE_NONE || lin_pe[p] == RP_PE_LEARNED)) continue;
            c = tiny_cfg(lin_pe[p], at ? RP_NORM_POST : RP_NORM_PRE, RP_ACT_GELU);
            c.attention = RP_ATTN_LINEAR;
            c.linear_rope = (rp_lin_placement)at;
            char label[96];
            snprintf(label, sizeof label, "linear %s (rope %s phi)/%s/gelu", rp_pe_name(lin_pe[p]),
                     at ? "before" : "after", at ? "post" : "pre");
            gradcheck(&c, label, 3);
        }
    c = tiny_cfg(RP_PE_ROPER, RP_NORM_PRE, RP_ACT_GELU);
    c.attention = RP_ATTN_LINEAR;
    c.d_model = 16;
    c.heads = 2;
    c.pe.fraction_qk = 0.5;
    c.pe.fraction_v = 0.25;
    c.pe.pairing = RP_PAIR_INTERLEAVED;
    gradcheck(&c, "linear roper/pre/gelu, d_rot 4/2 interleaved", 3);
    test_gradcheck_freq();
    printf("  gradient checks: max |fd - g| / (1e-2 + |g|) %.3g (limit 3e-2), max |fd - g| %.3g (elements "
           "passing the central test); %d ReLU-kink fallbacks\n",
           worst_rel_all, worst_abs_all, total_kinks);
    printf("  smooth (GELU) models: max |fd - g| %.3g\n", worst_abs_gelu);
}

/* Backward accumulates: two backwards give twice the gradient; nothing scored gives NaN and no
 * gradient. */
static void test_backward_semantics(void)
{
    printf("backward semantics\n");
    rp_model_cfg c = tiny_cfg(RP_PE_ROPER, RP_NORM_PRE, RP_ACT_RELU);
    rp_model *m = check_model_new(&c);
    int32_t tok[12], tgt[12];
    for (int i = 0; i < 12; i++) {
        tok[i] = i % 7;
        tgt[i] = (i * 3 + 1) % 7;
    }
    float loss;
    int64_t n = rp_model_param_count(m);
    float *g1 = malloc(sizeof(float) * (size_t)n);
    CHECK_STATUS(rp_model_forward(m, tok, tgt, NULL, 2, 6, 1, &loss), RP_OK, NULL);
    rp_model_zero_grad(m);
    CHECK_STATUS(rp_model_backward(m), RP_OK, NULL);
    memcpy(g1, rp_model_grads(m)->data, sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) g1[i] *= 2.0f;
    CHECK_STATUS(rp_model_backward(m), RP_OK, NULL);
    CHECK_CLOSE(rp_model_grads(m)->data, g1, n, 1e-6, "backward twice = 2x gradient");
    uint8_t none[12] = {0};
    CHECK_STATUS(rp_model_forward(m, tok, tgt, none, 2, 6, 1, &loss), RP_OK, NULL);
    CHECK(isnan(loss), "nothing scored: NaN loss");
    rp_model_zero_grad(m);
    CHECK_STATUS(rp_model_backward(m), RP_OK, NULL);
    double gs = 0.0;
    for (int64_t i = 0; i < n; i++) gs += fabs((double)rp_model_grads(m)->data[i]);
    CHECK(gs == 0.0, "nothing scored: zero gradient (%g)", gs);
    free(g1);
    rp_model_free(m);
}

/* ------------------------------------------------------------------------------------------ */
/* introspection and batch independence */

static void test_introspection(void)
{
    printf("introspection\n");
    rp_model_cfg c = tiny_cfg(RP_PE_NONE, RP_NORM_PRE, RP_ACT_RELU);
    c.max_batch = 3;
    rp_model *m = check_model_new(&c);
    int64_t B0, T0;
    rp_model_last_shape(m, &B0, &T0);
    CHECK(B0 == 0 && T0 == 0, "no forward yet");
    static float att[3 * 2 * 5 * 5];
    CHECK_STATUS(rp_model_attention_weights(m, 0, att), RP_ERR_ARG, "no forward pass yet");
    CHECK(rp_model_residual(m, -1) == NULL, "no introspection before a forward");
    int32_t tok[3 * 5] = {1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 3, 3, 3, 3, 3};
    CHECK_STATUS(rp_model_forward(m, tok, NULL, NULL, 3, 5, 0, NULL), RP_OK, NULL);
    rp_model_last_shape(m, &B0, &T0);
    CHECK(B0 == 3 && T0 == 5, "last shape %lld x %lld", (long long)B0, (long long)T0);
    int ok = rp_model_attention_weights(m, 1, att) == RP_OK;
    for (int64_t r = 0; ok && r < 3 * 2 * 5; r++) {
        int64_t t = r % 5;
        double s = 0.0;
        for (int64_t i = 0; i < 5; i++) {
            float a = att[r * 5 + i];
            if (i > t && a != 0.0f) ok = 0;
            if (a < 0.0f) ok = 0;
            s += (double)a;
        }
        if (fabs(s - 1.0) > 1e-5) ok = 0;
    }
    CHECK(ok, "attention weights (B, H, T, T): causal rows summing to 1");
    CHECK_STATUS(rp_model_attention_weights(m, 2, att), RP_ERR_ARG, "layer 2 is outside 0..1");
    CHECK_STATUS(rp_model_attention_weights(m, -1, att), RP_ERR_ARG, "layer -1 is outside 0..1");
    const float *x0 = rp_model_residual(m, -1);
    int e = rp_model_find_param(m, "embed.weight");
    const float *emb = rp_model_params(m)->data + rp_model_param(m, e)->offset;
    CHECK(x0 && memcmp(x0 + 7 * 8, emb + tok[7] * 8, 8 * sizeof(float)) == 0,
          "residual(-1) is the embedding (pe none)");
    CHECK(rp_model_residual(m, 1) != NULL && rp_model_residual(m, 2) == NULL &&
              rp_model_residual(m, -2) == NULL,
          "residual range");
    /* the logits of one sequence do not depend on the batch it came in */
    float *l3 = malloc(sizeof(float) * 3 * 5 * 7);
    memcpy(l3, rp_model_logits(m), sizeof(float) * 3 * 5 * 7);
    CHECK_STATUS(rp_model_forward(m, tok + 5, NULL, NULL, 1, 5, 0, NULL), RP_OK, NULL);
    CHECK_CLOSE(rp_model_logits(m), l3 + 5 * 7, 5 * 7, 1e-5, "batch row 2 alone = in a batch of 3");
    /* a prefix (causal): the first 3 positions alone */
    CHECK_STATUS(rp_model_forward(m, tok + 5, NULL, NULL, 1, 3, 0, NULL), RP_OK, NULL);
    CHECK_CLOSE(rp_model_logits(m), l3 + 5 * 7, 3 * 7, 1e-5, "causal: a prefix's logits");
    free(l3);
    rp_model_free(m);
}

/* ------------------------------------------------------------------------------------------ */
/* KV cache and generation */

static rp_model_cfg cache_cfg(rp_pe pe, rp_norm norm)
{
    rp_model_cfg c = rp_model_cfg_default(11);
    c.d_model = 16;
    c.heads = 2;
    c.layers = 2;
    c.d_ff = 24;
    c.seq_len = 12;
    c.max_batch = 1;
    c.pe.mode = pe;
    c.norm = norm;
    c.act = RP_ACT_GELU;
    c.seed = 5;
    c.rel.clip = 3;
    c.rel.buckets = 6;
    c.rel.max_distance = 8;
    return c;
}

static void test_cache(void)
{
    printf("KV cache\n");
    double worst = 0.0;
    for (int p = 0; p < NPE; p++)
        for (int n = 0; n < 2; n++) {
            rp_model_cfg c = cache_cfg((rp_pe)p, (rp_norm)n);
            if (p == 4 && n == 1) { /* one case with partial, interleaved rotation */
                c.pe.fraction_qk = 0.5;
                c.pe.fraction_v = 0.75;
                c.pe.pairing = RP_PAIR_INTERLEAVED;
            }
            rp_model *m = new_model(&c);
            const int64_t T = 12, V = 11;
            int32_t tok[12];
            uint64_t s = 3 + (uint64_t)p;
            for (int i = 0; i < 12; i++) tok[i] = (int32_t)(check_rand_u64(&s) % 11);
            CHECK_STATUS(rp_model_forward(m, tok, NULL, NULL, 1, T, 0, NULL), RP_OK, NULL);
            float full[12 * 11], inc[12 * 11];
            memcpy(full, rp_model_logits(m), sizeof full);
            rp_model_cache_reset(m);
            rp_status st = RP_OK;
            for (int64_t t = 0; t < T && st == RP_OK; t++)
                st = rp_model_cache_feed(m, tok + t, 1, inc + t * V);
            CHECK(st == RP_OK && rp_model_cache_len(m) == T, "cache feed: %s", rp_last_error());
            char label[80];
            snprintf(label, sizeof label, "cache %s/%s: logits at every position",
                     rp_pe_name((rp_pe)p), n ? "post" : "pre");
            CHECK_CLOSE(inc, full, T * V, 2e-5, label);
            for (int64_t i = 0; i < T * V; i++)
                if (fabs((double)inc[i] - (double)full[i]) > worst)
                    worst = fabs((double)inc[i] - (double)full[i]);
            /* blocks: 5 tokens, then 7 */
            float last[11];
            rp_model_cache_reset(m);
            CHECK_STATUS(rp_model_cache_feed(m, tok, 5, last), RP_OK, NULL);
            CHECK_CLOSE(last, full + 4 * V, V, 2e-5, "block of 5: logits of the last");
            CHECK_STATUS(rp_model_cache_feed(m, tok + 5, 7, last), RP_OK, NULL);
            CHECK_CLOSE(last, full + 11 * V, V, 2e-5, "then 7 more");
            CHECK_STATUS(rp_model_cache_feed(m, tok, 1, last), RP_ERR_RANGE, "seq_len 12");
            rp_model_free(m);
        }
    printf("  KV cache vs full forward: max |diff| %.3g over all modes\n", worst);

    /* linear attention decodes with its running state (no keys kept): same logits */
    static const rp_pe lin_pe[4] = {RP_PE_NONE, RP_PE_SINUSOIDAL, RP_PE_ROPE, RP_PE_ROPER};
    double worst_lin = 0.0;
    for (int p = 0; p < 4; p++)
        for (int at = 0; at < 2; at++) {
            rp_model_cfg lc = cache_cfg(lin_pe[p], at ? RP_NORM_POST : RP_NORM_PRE);
            lc.attention = RP_ATTN_LINEAR;
            lc.linear_rope = (rp_lin_placement)at;
            rp_model *lm = check_model_new(&lc);
            const int64_t T = 12, V = 11;
            int32_t tok[12];
            uint64_t s = 17 + (uint64_t)p;
            for (int i = 0; i < 12; i++) tok[i] = (int32_t)(check_rand_u64(&s) % 11);
            CHECK_STATUS(rp_model_forward(lm, tok, NULL, NULL, 1, T, 0, NULL), RP_OK, NULL);
            float full[12 * 11], inc[12 * 11], last[11];
            memcpy(full, rp_model_logits(lm), sizeof full);
            for (int round = 0; round < 2; round++) { /* the second round checks the reset */
                rp_model_cache_reset(lm);
                rp_status st = RP_OK;
                for (int64_t t = 0; t < T && st == RP_OK; t++)
                    st = rp_model_cache_feed(lm, tok + t, 1, inc + t * V);
                CHECK(st == RP_OK, "linear cache feed: %s", rp_last_error());
                char label[96];
                snprintf(label, sizeof label, "linear %s (%s)/%s, round %d: state decoding = full",
                         rp_pe_name(lin_pe[p]), at ? "before" : "after", at ? "post" : "pre",
                         round + 1);
                CHECK_CLOSE(inc, full, T * V, 2e-5, label);
            }
            for (int64_t i = 0; i < T * V; i++)
                if (fabs((double)inc[i] - (double)full[i]) > worst_lin)
                    worst_lin = fabs((double)inc[i] - (double)full[i]);
            rp_model_cache_reset(lm);
            CHECK_STATUS(rp_model_cache_feed(lm, tok, 7, last), RP_OK, NULL);
            CHECK_CLOSE(last, full + 6 * V, V, 2e-5, "linear: block of 7, logits of the last");
            CHECK_STATUS(rp_model_cache_feed(lm, tok + 7, 5, last), RP_OK, NULL);
            CHECK_CLOSE(last, full + 11 * V, V, 2e-5, "linear: then 5 more");
            {
                static float latt[12 * 12 * 4];
                CHECK_STATUS(rp_model_attention_weights(lm, 0, latt), RP_ERR_ARG,
                             "the model uses linear attention");
            }
            CHECK(isfinite(rp_model_linear_min_den(lm)) && rp_model_linear_min_den(lm) > 0.0,
                  "linear min den after a forward");
            /* the stats against the smallest of the normalised weights of every layer */
            {
                float wts[2 * 12 * 12];
                double lo = INFINITY, min_w = 0.0, min_den = 0.0;
                for (int64_t l = 0; l < lc.layers; l++) {
                    CHECK_STATUS(rp_model_linear_weights(lm, l, wts), RP_OK, NULL);
                    for (int64_t h = 0; h < 2; h++)
                        for (int64_t n = 0; n < T; n++)
                            for (int64_t j = 0; j <= n; j++)
                                if ((double)wts[(h * T + n) * T + j] < lo)
                                    lo = (double)wts[(h * T + n) * T + j];
                }
                CHECK_STATUS(rp_model_linear_stats(lm, &min_w, &min_den), RP_OK, NULL);
                CHECK(fabs(min_w - lo) <= 1e-6 * (1.0 + fabs(lo)),
                      "linear stats: min weight %g, the weights' minimum %g", min_w, lo);
                CHECK(min_den == rp_model_linear_min_den(lm), "linear stats: min den");
                CHECK_STATUS(rp_model_linear_weights(lm, 2, wts), RP_ERR_ARG, "layer 2 is outside");
            }
            rp_model_free(lm);
        }
    printf("  linear attention state decoding vs full forward: max |diff| %.3g\n", worst_lin);
    rp_model_cfg c = cache_cfg(RP_PE_ROPE, RP_NORM_PRE);
    rp_model *m = check_model_new(&c);
    int32_t bad[2] = {1, 11};
    rp_model_cache_reset(m);
    CHECK_STATUS(rp_model_cache_feed(m, bad, 2, NULL), RP_ERR_RANGE,
                 "token 11 at [2] is outside the vocabulary 0..10");
    CHECK_STATUS(rp_model_cache_feed(m, bad, 0, NULL), RP_ERR_ARG, "n >= 1");
    CHECK(rp_model_cache_len(m) == 0, "a failed feed leaves the cache alone");
    CHECK_STATUS(rp_model_linear_stats(m, NULL, NULL), RP_ERR_ARG, "the model uses softmax");
    rp_model_free(m);
}

/* The reference decoder: full forwards over the window with the sliding rule of model.h. */
static int64_t ref_generate(rp_model *m, const int32_t *prompt, int64_t np, int64_t n_new,
                            int32_t stop, int32_t *out)
{
    const rp_model_cfg *c = rp_model_config(m);
    int64_t Tm = c->seq_len, keep = Tm / 2 > 0 ? Tm / 2 : 1, V = c->vocab;
    int32_t *win = malloc(sizeof(int32_t) * (size_t)Tm);
    int64_t start = np > Tm ? np - Tm : 0, wl = np - start, k = 0;
    memcpy(win, prompt + start, sizeof(int32_t) * (size_t)wl);
    for (; k < n_new; k++) {
        if (rp_model_forward(m, win, NULL, NULL, 1, wl, 0, NULL) != RP_OK) break;
        int32_t t = (int32_t)argmax_row(rp_model_logits(m) + (wl - 1) * V, V);
        out[k] = t;
        if (t == stop) {
            k++;
            break;
        }
        if (wl == Tm) {
            memmove(win, win + Tm - (keep - 1), sizeof(int32_t) * (size_t)(keep - 1));
            win[keep - 1] = t;
            wl = keep;
        } else {
            win[wl++] = t;
        }
    }
    free(win);
    return k;
}

/* Linear attention without an absolute table decodes past seq_len on its running state: a model
 * with seq_len 12 generates (greedy) exactly what the same weights with seq_len 64 generate, where
 * no window is ever reached, for prompts shorter and longer than 12 and 40 new tokens; with a
 * learned table (a window again) it still cuts and re-encodes. */
static void test_linear_generate(void)
{
    printf("linear generate\n");
    rp_gen_cfg greedy = {0.0, 0, -1, NULL, NULL, 0.0};
    const rp_pe pes[3] = {RP_PE_NONE, RP_PE_ROPE, RP_PE_ROPER};
    for (int p = 0; p < 3; p++)
        for (int at = 0; at <= 1; at++) {
            rp_model_cfg c = cache_cfg(pes[p], RP_NORM_PRE);
            c.attention = RP_ATTN_LINEAR;
            c.linear_rope = at ? RP_LIN_BEFORE : RP_LIN_AFTER;
            rp_model_cfg big = c;
            big.seq_len = 64;
            rp_model *m = check_model_new(&c), *mb = check_model_new(&big);
            CHECK(memcmp(rp_model_params(m)->data, rp_model_params(mb)->data,
                         sizeof(float) * (size_t)rp_model_param_count(m)) == 0,
                  "seq_len does not change the weights of pe %s", rp_pe_name(pes[p]));
            int32_t longp[20], out[40], want[40];
            for (int i = 0; i < 20; i++) longp[i] = (i * 7) % 11;
            const int64_t np[2] = {3, 20};
            for (int k = 0; k < 2; k++) {
                int64_t n_out = -1, n_want = -1;
                CHECK_STATUS(rp_model_generate(m, longp, np[k], 40, &greedy, out, &n_out), RP_OK,
                             NULL);
                CHECK_STATUS(rp_model_generate(mb, longp, np[k], 40, &greedy, want, &n_want),
                             RP_OK, NULL);
                CHECK(n_out == 40 && n_want == 40 && memcmp(out, want, sizeof out) == 0,
                      "linear %s (%s): prompt %lld + 40 tokens past seq_len 12 = the same model "
                      "with seq_len 64", rp_pe_name(pes[p]), at ? "before" : "after",
                      (long long)np[k]);
                CHECK(rp_model_cache_len(m) == np[k] + 39, "positions count on: cache_len %lld",
                      (long long)rp_model_cache_len(m));
            }
            rp_model_free(m);
            rp_model_free(mb);
        }
    /* learned positions: the table has seq_len rows, so the window stays */
    rp_model_cfg c = cache_cfg(RP_PE_LEARNED, RP_NORM_PRE);
    c.attention = RP_ATTN_LINEAR;
    rp_model *m = check_model_new(&c);
    int32_t tok[13] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 1, 2, 3}, out[30];
    int64_t n_out = -1;
    CHECK_STATUS(rp_model_cache_feed(m, tok, 13, NULL), RP_ERR_RANGE, "seq_len 12");
    CHECK_STATUS(rp_model_generate(m, tok, 13, 30, &greedy, out, &n_out), RP_OK, NULL);
    CHECK(n_out == 30 && rp_model_cache_len(m) <= 12, "learned: the window slides (cache_len %lld)",
          (long long)rp_model_cache_len(m));
    rp_model_free(m);
}

static void test_generate(void)
{
    printf("generate\n");
    rp_gen_cfg greedy = {0.0, 0, -1, NULL, NULL, 0.0};
    for (int p = 0; p < NPE; p++) {
        rp_model_cfg c = cache_cfg((rp_pe)p, p % 2 ? RP_NORM_POST : RP_NORM_PRE);
        rp_model *m = new_model(&c);
        int32_t prompt[3] = {1, 5, 2}, out[40], want[40];
        int64_t n_out = -1;
        /* within the window */
        CHECK_STATUS(rp_model_generate(m, prompt, 3, 8, &greedy, out, &n_out), RP_OK, NULL);
        int64_t nw = ref_generate(m, prompt, 3, 8, -1, want);
        CHECK(n_out == 8 && nw == 8 && memcmp(out, want, sizeof(int32_t) * 8) == 0,
              "%s: greedy = argmax of full forwards", rp_pe_name((rp_pe)p));
        /* past seq_len 12: 3 + 30 tokens slide the window several times */
        CHECK_STATUS(rp_model_generate(m, prompt, 3, 30, &greedy, out, &n_out), RP_OK, NULL);
        nw = ref_generate(m, prompt, 3, 30, -1, want);
        int same = n_out == 30 && nw == 30 && memcmp(out, want, sizeof(int32_t) * 30) == 0;
        CHECK(same, "%s: greedy past seq_len slides the window like the reference",
              rp_pe_name((rp_pe)p));
        if (!same)
            for (int i = 0; i < 30; i++) printf("   %d: %d %d\n", i, out[i], want[i]);
        /* a prompt longer than the window */
        int32_t longp[20];
        for (int i = 0; i < 20; i++) longp[i] = (i * 7) % 11;
        CHECK_STATUS(rp_model_generate(m, longp, 20, 10, &greedy, out, &n_out), RP_OK, NULL);
        nw = ref_generate(m, longp, 20, 10, -1, want);
        CHECK(n_out == 10 && memcmp(out, want, sizeof(int32_t) * 10) == 0,
              "%s: long prompt keeps its last seq_len tokens", rp_pe_name((rp_pe)p));
        /* stop token: the third generated token */
        rp_gen_cfg st = greedy;
        st.stop_token = want[2];
        int64_t first = 0;
        while (want[first] != st.stop_token) first++;
        CHECK_STATUS(rp_model_generate(m, longp, 20, 10, &st, out, &n_out), RP_OK, NULL);
        CHECK(n_out == first + 1 && out[first] == st.stop_token,
              "%s: stops right after the stop token (n_out %lld, want %lld)",
              rp_pe_name((rp_pe)p), (long long)n_out, (long long)(first + 1));
        rp_model_free(m);
    }

    /* sampling */
    rp_model_cfg c = cache_cfg(RP_PE_ROPER, RP_NORM_PRE);
    rp_model *m = check_model_new(&c);
    int32_t prompt[4] = {3, 1, 4, 1}, a[20], b[20];
    int64_t na, nb;
    rp_rng r1, r2;
    rp_rng_seed(&r1, 11);
    rp_rng_seed(&r2, 11);
    rp_gen_cfg s1 = {1.0, 0, -1, &r1, NULL, 0.0}, s2 = {1.0, 0, -1, &r2, NULL, 0.0};
    CHECK_STATUS(rp_model_generate(m, prompt, 4, 20, &s1, a, &na), RP_OK, NULL);
    CHECK_STATUS(rp_model_generate(m, prompt, 4, 20, &s2, b, &nb), RP_OK, NULL);
    CHECK(na == 20 && nb == 20 && memcmp(a, b, sizeof a) == 0, "sampling is reproducible");
    rp_gen_cfg k1 = {0.7, 1, -1, &r1, NULL, 0.0};
    int32_t g[20];
    CHECK_STATUS(rp_model_generate(m, prompt, 4, 20, &k1, a, &na), RP_OK, NULL);
    CHECK_STATUS(rp_model_generate(m, prompt, 4, 20, &greedy, g, &nb), RP_OK, NULL);
    CHECK(memcmp(a, g, sizeof a) == 0, "top_k 1 = greedy");
    /* next-token frequencies against softmax(logits / temperature) restricted to the top 3 */
    float lg[11];
    rp_model_cache_reset(m);
    CHECK_STATUS(rp_model_cache_feed(m, prompt, 4, lg), RP_OK, NULL);
    const double temp = 2.0;
    int order[11];
    for (int i = 0; i < 11; i++) order[i] = i;
    for (int i = 0; i < 11; i++)
        for (int j = i + 1; j < 11; j++)
            if (lg[order[j]] > lg[order[i]]) {
                int t = order[i];
                order[i] = order[j];
                order[j] = t;
            }
    double pr[11] = {0}, z = 0.0;
    for (int i = 0; i < 3; i++) z += exp(((double)lg[order[i]] - (double)lg[order[0]]) / temp);
    for (int i = 0; i < 3; i++)
        pr[order[i]] = exp(((double)lg[order[i]] - (double)lg[order[0]]) / temp) / z;
    rp_gen_cfg tk = {temp, 3, -1, &r1, NULL, 0.0};
    int counts[11] = {0};
    const int draws = 3000;
    for (int d = 0; d < draws; d++) {
        int32_t t;
        int64_t nt;
        rp_model_generate(m, prompt, 4, 1, &tk, &t, &nt);
        counts[t]++;
    }
    int ok = 1;
    for (int i = 0; i < 11; i++) {
        double want = pr[i] * draws, sd = sqrt(draws * pr[i] * (1.0 - pr[i]));
        if (pr[i] == 0.0 ? counts[i] != 0 : fabs((double)counts[i] - want) > 5.0 * sd + 1.0) ok = 0;
        if (pr[i] > 0.0)
            printf("  token %d: p %.4f, %d of %d draws\n", i, pr[i], counts[i], draws);
    }
    CHECK(ok, "top_k 3, temperature 2: frequencies within 5 sd of the softmax, others never");

    /* errors */
    rp_gen_cfg e = {1.0, 0, -1, NULL, NULL, 0.0};
    CHECK_STATUS(rp_model_generate(m, prompt, 4, 3, &e, a, &na), RP_ERR_ARG, "needs an rng");
    e.rng = &r1;
    e.temperature = -1.0;
    CHECK_STATUS(rp_model_generate(m, prompt, 4, 3, &e, a, &na), RP_ERR_ARG, "temperature -1");
    e.temperature = 1.0;
    e.top_k = -2;
    CHECK_STATUS(rp_model_generate(m, prompt, 4, 3, &e, a, &na), RP_ERR_ARG, "top_k -2");
    CHECK_STATUS(rp_model_generate(m, prompt, 0, 3, &greedy, a, &na), RP_ERR_ARG, "prompt");
    int32_t badp[2] = {0, 12};
    CHECK_STATUS(rp_model_generate(m, badp, 2, 3, &greedy, a, &na), RP_ERR_RANGE,
                 "prompt token 12 at [2] is outside the vocabulary 0..10");
    CHECK_STATUS(rp_model_generate(m, prompt, 4, 0, &greedy, a, &na), RP_OK, NULL);
    CHECK(na == 0, "n_new 0");
    rp_model_free(m);
}

/* ------------------------------------------------------------------------------------------ */
/* training */

static void test_train(void)
{
    printf("toy training\n");
    /* "abcabc...": the next token is determined by the current one; sequences start at random
     * phases. A 2-layer rope model with Adam (lr 1e-2) must bring the mean loss below 0.05 within
     * 150 steps (the initial loss is about log 3 = 1.1). */
    rp_model_cfg c = rp_model_cfg_default(3);
    c.d_model = 16;
    c.heads = 2;
    c.layers = 2;
    c.d_ff = 32;
    c.seq_len = 16;
    c.max_batch = 4;
    c.seed = 3;
    rp_model *m = check_model_new(&c);
    const int64_t B = 4, T = 16, n = rp_model_param_count(m);
    float *mo = calloc((size_t)n, sizeof(float)), *vo = calloc((size_t)n, sizeof(float));
    int32_t tok[64], tgt[64];
    uint64_t s = 17;
    float first = NAN, loss = NAN;
    const double lr = 1e-2, b1 = 0.9, b2 = 0.999, ep = 1e-8;
    int steps = 150;
    for (int step = 1; step <= steps; step++) {
        for (int b = 0; b < B; b++) {
            int ph = (int)(check_rand_u64(&s) % 3);
            for (int t = 0; t < T; t++) {
                tok[b * T + t] = (ph + t) % 3;
                tgt[b * T + t] = (ph + t + 1) % 3;
            }
        }
        if (rp_model_forward(m, tok, tgt, NULL, B, T, 1, &loss) != RP_OK) break;
        if (step == 1) first = loss;
        rp_model_zero_grad(m);
        rp_model_backward(m);
        float *w = rp_model_params(m)->data, *g = rp_model_grads(m)->data;
        double bc1 = 1.0 - pow(b1, step), bc2 = 1.0 - pow(b2, step);
        for (int64_t i = 0; i < n; i++) {
            double gi = (double)g[i];
            mo[i] = (float)(b1 * (double)mo[i] + (1.0 - b1) * gi);
            vo[i] = (float)(b2 * (double)vo[i] + (1.0 - b2) * gi * gi);
            double mh = (double)mo[i] / bc1, vh = (double)vo[i] / bc2;
            w[i] = (float)((double)w[i] - lr * mh / (sqrt(vh) + ep));
        }
    }
    printf("  loss %.4f -> %.4f after %d steps\n", (double)first, (double)loss, steps);
    CHECK(first > 0.8f && loss < 0.05f, "toy training: loss %.4f -> %.4f (want < 0.05)",
          (double)first, (double)loss);
    /* and the trained model continues the pattern by greedy decoding */
    int32_t prompt[2] = {1, 2}, out[10];
    int64_t no;
    rp_gen_cfg greedy = {0.0, 0, -1, NULL, NULL, 0.0};
    CHECK_STATUS(rp_model_generate(m, prompt, 2, 10, &greedy, out, &no), RP_OK, NULL);
    int ok = no == 10;
    for (int i = 0; i < 10; i++) ok = ok && out[i] == (i + 3) % 3;
    CHECK(ok, "the trained model continues abcabc...");
    free(mo);
    free(vo);
    rp_model_free(m);
}

/* ------------------------------------------------------------------------------------------ */

static void test_dropout(void)
{
    printf("dropout\n");
    rp_model_cfg c = tiny_cfg(RP_PE_ROPE, RP_NORM_PRE, RP_ACT_RELU);
    c.dropout = 0.5;
    rp_model *m = check_model_new(&c);
    c.dropout = 0.0;
    rp_model *m0 = check_model_new(&c);
    int32_t tok[12], tgt[12];
    for (int i = 0; i < 12; i++) {
        tok[i] = (i * 5) % 7;
        tgt[i] = (i * 2) % 7;
    }
    float le1, le2, lt1, lt2, l0;
    float e1[12 * 7], t1[12 * 7];
    rp_model_forward(m, tok, tgt, NULL, 2, 6, 0, &le1);
    memcpy(e1, rp_model_logits(m), sizeof e1);
    rp_model_forward(m, tok, tgt, NULL, 2, 6, 1, &lt1);
    memcpy(t1, rp_model_logits(m), sizeof t1);
    rp_model_forward(m, tok, tgt, NULL, 2, 6, 1, &lt2);
    int diff12 = memcmp(t1, rp_model_logits(m), sizeof t1) != 0;
    rp_model_forward(m, tok, tgt, NULL, 2, 6, 0, &le2);
    CHECK(memcmp(e1, rp_model_logits(m), sizeof e1) == 0 && le1 == le2,
          "eval forwards are deterministic");
    CHECK(memcmp(e1, t1, sizeof e1) != 0 && le1 != lt1, "a train forward with p 0.5 differs");
    CHECK(diff12, "two train forwards draw different masks");
    rp_model_forward(m0, tok, tgt, NULL, 2, 6, 1, &l0);
    CHECK(memcmp(e1, rp_model_logits(m0), sizeof e1) == 0 && l0 == le1,
          "eval forward = the p = 0 model (same seed, same parameters), which ignores train");
    /* the dropout RNG is the model's own stream: reseeding reproduces a train forward */
    rp_rng_seed(rp_model_rng(m), 42);
    rp_model_forward(m, tok, tgt, NULL, 2, 6, 1, &lt1);
    memcpy(t1, rp_model_logits(m), sizeof t1);
    rp_rng_seed(rp_model_rng(m), 42);
    rp_model_forward(m, tok, tgt, NULL, 2, 6, 1, &lt2);
    CHECK(memcmp(t1, rp_model_logits(m), sizeof t1) == 0 && lt1 == lt2,
          "same dropout RNG state, same train forward");
    rp_model_free(m);
    rp_model_free(m0);
}

/* rp_model_memory against the activation formula of model.h (written out independently here),
 * the parameter count against a created model's, what a model adds to rp_mem_held, and the
 * refusal of a model larger than the memory left (in a child whose RLIMIT_AS leaves room for a
 * small model only). */
static void test_memory(void)
{
    printf("memory\n");
    const rp_pe pes[3] = {RP_PE_NONE, RP_PE_ROPER, RP_PE_SINUSOIDAL};
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 4; k++) {
            int linear = k & 1, post = k >> 1;
            if (linear && pes[i] == RP_PE_SINUSOIDAL) continue;
            rp_model_cfg c = rp_model_cfg_default(37);
            c.norm = post ? RP_NORM_POST : RP_NORM_PRE;
            c.d_model = 32;
            c.heads = 4;
            c.layers = 2;
            c.d_ff = 48;
            c.seq_len = 40;
            c.max_batch = 3;
            c.pe.mode = pes[i];
            c.attention = linear ? RP_ATTN_LINEAR : RP_ATTN_SOFTMAX;
            int64_t bytes = 0, params = 0;
            CHECK_STATUS(rp_model_memory(&c, &bytes, &params), RP_OK, NULL);
            int64_t held0 = rp_mem_held();
            rp_model *m = check_model_new(&c);
            int64_t held = rp_mem_held() - held0;
            CHECK(params == rp_model_param_count(m), "params %lld == %lld", (long long)params,
                  (long long)rp_model_param_count(m));
            double N = (double)(c.max_batch * c.seq_len), C = (double)c.d_model;
            double F = (double)c.d_ff, V = (double)c.vocab, L = (double)c.layers;
            /* no (T, T) attention weights and no act(fch) are kept, softmax or linear; per
             * layer qkv, atty, res1, res2, fch and four LayerNorm statistics, post-norm also ln1
             * and ln2 (pre-norm recomputes them); x0, logits, the cross-entropy's two
             * statistics per row; the gradients dx, work and one region for the largest of dF,
             * datty + dqkv, dlogits */
            double per_layer = (post ? 8.0 : 6.0) * C + F + 4.0;
            double acts = L * N * per_layer + N * (C + V + 2.0);
            double grads = N * (2.0 * C + fmax(fmax(F, 4.0 * C), V));
            double lower = 4.0 * (2.0 * (double)params + acts + grads);
            CHECK((double)bytes >= lower && (double)bytes <= 1.5 * lower + 4e5,
                  "pe %d linear %d norm %s: %lld bytes within [%.0f, 1.5x + 400K]", (int)c.pe.mode,
                  linear, post ? "post" : "pre", (long long)bytes, lower);
            /* rp_mem_held counts the parameters, gradients and the three blocks: all of it
             * but the small tables (token copies, generation scratch, the layout) */
            CHECK((double)held >= lower && held <= bytes && bytes - held < 32768,
                  "pe %d linear %d: the model holds %lld of its %lld bytes in rp_mem_held",
                  (int)c.pe.mode, linear, (long long)held, (long long)bytes);
            rp_model_free(m);
            CHECK(rp_mem_held() == held0, "rp_model_free gives back all it counted (%lld left)",
                  (long long)(rp_mem_held() - held0));
        }
    /* What a language model's vocabulary costs: 16 more pieces (a whole line in every buffer
     * sized by V) add, per piece, the logits and their gradient (2 N floats: the cross-entropy
     * keeps no probabilities), the embedding and head rows with their gradients (2 (2 C + 1)),
     * the decode weights' head column (C) and the decoder's logit (1), and the generation
     * scratch's double and (value, index) pair (16 bytes) */
    {
        rp_model_cfg c = rp_model_cfg_default(4000);
        c.d_model = 32;
        c.heads = 4;
        c.layers = 2;
        c.d_ff = 48;
        c.seq_len = 40;
        c.max_batch = 3;
        int64_t b0 = 0, b1 = 0;
        CHECK_STATUS(rp_model_memory(&c, &b0, NULL), RP_OK, NULL);
        c.vocab += 16;
        CHECK_STATUS(rp_model_memory(&c, &b1, NULL), RP_OK, NULL);
        int64_t N = c.max_batch * c.seq_len, C = c.d_model;
        int64_t want = 16 * (4 * (2 * N + 2 * (2 * C + 1) + C + 1) + 16);
        CHECK(b1 - b0 == want, "16 more pieces of vocabulary cost %lld bytes (want %lld: the "
              "logits and their gradient, no probabilities)", (long long)(b1 - b0),
              (long long)want);
    }
    rp_model_cfg bad = rp_model_cfg_default(5);
    bad.heads = 3;
    CHECK_STATUS(rp_model_memory(&bad, NULL, NULL), RP_ERR_ARG, "not divisible by heads 3");
    rp_model_cfg huge = rp_model_cfg_default(5);
    huge.seq_len = 1 << 20;
    huge.max_batch = 1 << 10;
    CHECK_STATUS(rp_model_memory(&huge, NULL, NULL), RP_ERR_NOMEM, "more than 2^40");

#if !defined(__SANITIZE_ADDRESS__)
    /* ASan reserves terabytes of address space, so RLIMIT_AS cannot be tried under it */
    rp_model_cfg small = rp_model_cfg_default(5), big = rp_model_cfg_default(5);
    small.d_model = 16;
    small.seq_len = 16;
    small.max_batch = 2;
    big.seq_len = 4096; /* about 1.7 GiB of activations */
    int64_t need = 0;
    rp_model_memory(&big, &need, NULL);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl;
        getrlimit(RLIMIT_AS, &rl);
        char st[4096];
        FILE *f = fopen("/proc/self/status", "r");
        size_t n = f ? fread(st, 1, sizeof st - 1, f) : 0;
        if (f) fclose(f);
        st[n] = '\0';
        const char *p = strstr(st, "VmSize:");
        long long vm_kb = p ? atoll(p + 7) : 0;
        rl.rlim_cur = (rlim_t)(vm_kb * 1024 + need / 2); /* half of what the big model needs */
        if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(3);
        /* qemu-user accepts RLIMIT_AS but does not apply it (its own memory would be limited) */
        struct rlimit now;
        if (getrlimit(RLIMIT_AS, &now) != 0 || now.rlim_cur != rl.rlim_cur) _exit(8);
        rp_model *ms = rp_model_new(&small);
        if (!ms) _exit(4);
        rp_model_free(ms);
        rp_model *mb = rp_model_new(&big);
        if (mb) _exit(5);
        if (rp_last_status() != RP_ERR_NOMEM) _exit(6);
        if (!strstr(rp_last_error(), "more than the") || !strstr(rp_last_error(), "GiB")) _exit(7);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 8)
        printf("  RLIMIT_AS is not applied here (qemu-user?): the refusal under it not checked\n");
    else
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "under RLIMIT_AS a small model is made and a %lld-byte one refused with a message "
              "(child exit %d)", (long long)need, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
#endif
}

/* rp_model_first_nonfinite finds the first parameter holding nan or inf, in either buffer. */
static void test_first_nonfinite(void)
{
    printf("first non-finite parameter\n");
    rp_model_cfg c = tiny_cfg(RP_PE_ROPE, RP_NORM_PRE, RP_ACT_RELU);
    rp_model *m = check_model_new(&c);
    CHECK(rp_model_first_nonfinite(m, 0) == -1, "a new model is finite");
    rp_model_zero_grad(m);
    CHECK(rp_model_first_nonfinite(m, 1) == -1, "zeroed gradients are finite");
    int i5 = 5, last = rp_model_num_tensors(m) - 1;
    const rp_param_info *p = rp_model_param(m, i5), *q = rp_model_param(m, last);
    rp_model_params(m)->data[q->offset + q->numel - 1] = INFINITY;
    CHECK(rp_model_first_nonfinite(m, 0) == last, "inf in the last element of the last tensor");
    rp_model_params(m)->data[p->offset] = NAN;
    CHECK(rp_model_first_nonfinite(m, 0) == i5, "the first one wins: %d",
          rp_model_first_nonfinite(m, 0));
    CHECK(rp_model_first_nonfinite(m, 1) == -1, "the gradients are still finite");
    rp_model_grads(m)->data[q->offset] = -INFINITY;
    CHECK(rp_model_first_nonfinite(m, 1) == last, "-inf in a gradient");
    rp_model_free(m);
}

int main(void)
{
    test_layout();
    test_init();
    test_cfg_check();
    test_cfg_check_linear();
    test_check_tokens();
    test_gradcheck();
    test_tied();
    test_backward_semantics();
    test_introspection();
    test_cache();
    test_generate();
    test_linear_generate();
    test_train();
    test_dropout();
    test_memory();
    test_first_nonfinite();
    return check_summary("test_model");
}
