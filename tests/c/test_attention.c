/* Multi-head attention (core/attention.h) against a double-precision reference written from the
 * formulas of the header:
 *   q_n' = R(n theta) q_n, k_i' = R(i theta) k_i on the first d_rot_qk features (rope modes),
 *   theta_j = base^(-2j/d_rot_qk); query t sits at n = q_offset + t, key i at i;
 *   s_{n,i} = scale <q_n', k_i'>, masked to i <= n when causal; a = softmax_i(s);
 *   none/sinusoidal/learned/rope: o_n = sum_i a_{n,i} v_i
 *   roper:        o_n = sum_i a_{n,i} R((i - n) theta_v) v_i   (first d_rot_v features,
 *   roper_legacy: o_n = sum_i a_{n,i} R((2i - n) theta_v) v_i   theta_v over d_rot_v)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "rp.h"

#define S(...) CHECK_SHAPE(__VA_ARGS__)

static uint64_t rng_state = 2718;

static const char *pe_label(rp_pe pe)
{
    static const char *names[] = {"none", "sinusoidal", "learned", "rope", "roper", "roper_legacy"};
    return (int)pe >= 0 && (int)pe < 6 ? names[pe] : "?";
}

static int is_rope(rp_pe pe) { return pe == RP_PE_ROPE || pe == RP_PE_ROPER || pe == RP_PE_ROPER_LEGACY; }

/* Rotates the first d_rot features of x (length >= d_rot) by pos * theta_j in place, in double. */
static void ref_rot(double *x, int64_t d_rot, double base, rp_pairing pairing, double pos)
{
    int64_t h = d_rot / 2;
    for (int64_t j = 0; j < h; j++) {
        double ang = pos * pow(base, -2.0 * (double)j / (double)d_rot);
        double c = cos(ang), s = sin(ang);
        int64_t p = pairing == RP_PAIR_HALF ? j : 2 * j, q = pairing == RP_PAIR_HALF ? j + h : 2 * j + 1;
        double xp = x[p], xq = x[q];
        x[p] = xp * c - xq * s;
        x[q] = xq * c + xp * s;
    }
}

typedef struct {
    int64_t B, T, S, H, D, Dv;
} dims;

static void ref_attention(double *out, double *att, const float *q, const float *k, const float *v,
                          dims d, const rp_attn_cfg *cfg)
{
    double qr[16], kr[64][16], vr[16], s[64], a[64];
    for (int64_t b = 0; b < d.B; b++)
        for (int64_t h = 0; h < d.H; h++) {
            for (int64_t i = 0; i < d.S; i++) {
                for (int64_t f = 0; f < d.D; f++)
                    kr[i][f] = (double)k[((b * d.S + i) * d.H + h) * d.D + f];
                if (is_rope(cfg->pe)) ref_rot(kr[i], cfg->d_rot_qk, cfg->base, cfg->pairing, (double)i);
            }
            for (int64_t t = 0; t < d.T; t++) {
                int64_t n = cfg->q_offset + t;
                for (int64_t f = 0; f < d.D; f++) qr[f] = (double)q[((b * d.T + t) * d.H + h) * d.D + f];
                if (is_rope(cfg->pe)) ref_rot(qr, cfg->d_rot_qk, cfg->base, cfg->pairing, (double)n);
                double m = -HUGE_VAL;
                for (int64_t i = 0; i < d.S; i++) {
                    double dot = 0;
                    for (int64_t f = 0; f < d.D; f++) dot += qr[f] * kr[i][f];
                    s[i] = cfg->scale * dot;
                    if (!(cfg->causal && i > n) && s[i] > m) m = s[i];
                }
                double z = 0;
                for (int64_t i = 0; i < d.S; i++) {
                    a[i] = (cfg->causal && i > n) ? 0.0 : exp(s[i] - m);
                    z += a[i];
                }
                double *o = out + ((b * d.T + t) * d.H + h) * d.Dv;
                for (int64_t f = 0; f < d.Dv; f++) o[f] = 0;
                for (int64_t i = 0; i < d.S; i++) {
                    a[i] /= z;
                    att[((b * d.H + h) * d.T + t) * d.S + i] = a[i];
                    for (int64_t f = 0; f < d.Dv; f++) vr[f] = (double)v[((b * d.S + i) * d.H + h) * d.Dv + f];
                    if (cfg->pe == RP_PE_ROPER)
                        ref_rot(vr, cfg->d_rot_v, cfg->base, cfg->pairing, (double)(i - n));
                    else if (cfg->pe == RP_PE_ROPER_LEGACY)
                        ref_rot(vr, cfg->d_rot_v, cfg->base, cfg->pairing, (double)(2 * i - n));
                    for (int64_t f = 0; f < d.Dv; f++) o[f] += a[i] * vr[f];
                }
            }
        }
}

static rp_tensor randt(int ndim, const int64_t *shape, double lo, double hi)
{
    rp_tensor t = check_new(ndim, shape);
    check_fill_rand(&t, &rng_state, lo, hi);
    return t;
}

static rp_attn_cfg base_cfg(rp_pe pe, int64_t D, int64_t Dv)
{
    rp_attn_cfg c;
    memset(&c, 0, sizeof c);
    c.pe = pe;
    c.causal = 1;
    c.scale = 1.0 / sqrt((double)D);
    c.base = 10000.0;
    c.pairing = RP_PAIR_HALF;
    c.d_rot_qk = D;
    c.d_rot_v = Dv;
    c.q_offset = 0;
    return c;
}

/* Runs rp_attention on (q, k, v) and compares with the reference. Returns 1 when it ran. */
static int attention_case(const char *what, const rp_tensor *q, const rp_tensor *k,
                          const rp_tensor *v, const rp_attn_cfg *cfg, double tol)
{
    dims d = {q->shape[0], q->shape[1], k->shape[1], q->shape[2], q->shape[3], v->shape[3]};
    int64_t no = d.B * d.T * d.H * d.Dv, na = d.B * d.H * d.T * d.S;
    float *qc = malloc(sizeof(float) * (size_t)(d.B * d.T * d.H * d.D));
    float *kc = malloc(sizeof(float) * (size_t)(d.B * d.S * d.H * d.D));
    float *vc = malloc(sizeof(float) * (size_t)(d.B * d.S * d.H * d.Dv));
    double *wo = malloc(sizeof(double) * (size_t)no), *wa = malloc(sizeof(double) * (size_t)na);
    float *go = malloc(sizeof(float) * (size_t)no), *ga = malloc(sizeof(float) * (size_t)na);
    check_gather(qc, q);
    check_gather(kc, k);
    check_gather(vc, v);
    ref_attention(wo, wa, qc, kc, vc, d, cfg);
    char label[256];
    snprintf(label, sizeof label,
             "%s pe=%s %s %s d_rot_qk=%lld d_rot_v=%lld T=%lld S=%lld q_offset=%lld scale=%.3g", what,
             pe_label(cfg->pe), cfg->causal ? "causal" : "full", cfg->pairing == RP_PAIR_HALF ? "half" : "interleaved",
             (long long)cfg->d_rot_qk, (long long)cfg->d_rot_v, (long long)d.T, (long long)d.S,
             (long long)cfg->q_offset, cfg->scale);
    rp_tensor out, att;
    rp_status st = rp_attention(&out, &att, q, k, v, cfg);
    int ran = CHECK(st == RP_OK, "%s: status %s: %s", label, rp_status_name(st), rp_last_error());
    if (ran) {
        int shapes = out.ndim == 4 && out.shape[0] == d.B && out.shape[1] == d.T &&
                     out.shape[2] == d.H && out.shape[3] == d.Dv && att.ndim == 4 &&
                     att.shape[0] == d.B && att.shape[1] == d.H && att.shape[2] == d.T &&
                     att.shape[3] == d.S;
        if (CHECK(shapes, "%s: out [B,T,H,Dv] and att [B,H,T,S]", label)) {
            check_gather(go, &out);
            check_gather(ga, &att);
            char l2[300];
            snprintf(l2, sizeof l2, "att %s", label);
            CHECK_CLOSE(ga, wa, na, tol, l2);
            snprintf(l2, sizeof l2, "out %s", label);
            CHECK_CLOSE(go, wo, no, tol, l2);
            /* rows sum to 1; masked entries are exactly 0 */
            double maxdev = 0;
            int64_t bad_mask = 0;
            for (int64_t r = 0; r < d.B * d.H * d.T; r++) {
                int64_t n = cfg->q_offset + r % d.T;
                double sum = 0;
                for (int64_t i = 0; i < d.S; i++) {
                    sum += (double)ga[r * d.S + i];
                    if (cfg->causal && i > n && ga[r * d.S + i] != 0.0f) bad_mask++;
                }
                maxdev = fabs(sum - 1.0) > maxdev ? fabs(sum - 1.0) : maxdev;
            }
            CHECK(maxdev < 1e-5, "%s: att rows sum to 1 (max deviation %.3g)", label, maxdev);
            CHECK(bad_mask == 0, "%s: %lld masked entries are not exactly 0", label, (long long)bad_mask);
        }
        rp_tensor_release(&out);
        rp_tensor_release(&att);
    }
    free(qc);
    free(kc);
    free(vc);
    free(wo);
    free(wa);
    free(go);
    free(ga);
    return ran;
}

/* Tolerance for att and out: probabilities, and sums of <= 7 values of magnitude <= 1. A float
 * score of 8 products of magnitude <= 4 is within ~2e-6 (an error ds in the scores moves a
 * probability by at most 2 ds), so 5e-6 leaves room without hiding a wrong angle or mask. */
#define ATT_TOL 5e-6

static void test_against_reference(void)
{
    const int64_t B = 2, H = 3, D = 8, Dv = 6, Sk = 7;
    const int64_t Ts[3] = {7, 3, 3}, offs[3] = {0, 4, 50};
    rp_tensor k = randt(4, S(B, Sk, H, D), -2.0, 2.0);
    rp_tensor v = randt(4, S(B, Sk, H, Dv), -1.0, 1.0);
    for (int g = 0; g < 3; g++) {
        rp_tensor q = randt(4, S(B, Ts[g], H, D), -2.0, 2.0);
        for (int pe = RP_PE_NONE; pe <= RP_PE_ROPER_LEGACY; pe++)
            for (int causal = 0; causal <= 1; causal++)
                for (int pm = 0; pm <= 1; pm++)
                    for (int partial = 0; partial <= 1; partial++) {
                        rp_attn_cfg cfg = base_cfg((rp_pe)pe, D, Dv);
                        cfg.causal = causal;
                        cfg.pairing = (rp_pairing)pm;
                        cfg.q_offset = offs[g];
                        if (partial) {
                            cfg.d_rot_qk = 4;
                            cfg.d_rot_v = 2;
                            cfg.scale = 0.9;
                        }
                        attention_case("rp_attention", &q, &k, &v, &cfg, ATT_TOL);
                    }
        rp_tensor_release(&q);
    }
    /* a query far along a stream (angles of thousands of radians), other base */
    {
        rp_tensor q = randt(4, S(B, 2, H, D), -2.0, 2.0);
        for (int pe = RP_PE_ROPE; pe <= RP_PE_ROPER_LEGACY; pe++) {
            rp_attn_cfg cfg = base_cfg((rp_pe)pe, D, Dv);
            cfg.q_offset = 5000;
            cfg.base = 500.0;
            cfg.d_rot_v = 4;
            attention_case("far offset", &q, &k, &v, &cfg, ATT_TOL);
        }
        rp_tensor_release(&q);
    }
    /* T = S = 1 and sharper scores */
    {
        rp_tensor q1 = randt(4, S(1, 1, 1, 4), -2.0, 2.0), k1 = randt(4, S(1, 1, 1, 4), -2.0, 2.0);
        rp_tensor v1 = randt(4, S(1, 1, 1, 2), -1.0, 1.0);
        rp_attn_cfg cfg = base_cfg(RP_PE_ROPER, 4, 2);
        attention_case("T=S=1", &q1, &k1, &v1, &cfg, ATT_TOL);
        rp_tensor_release(&q1);
        rp_tensor_release(&k1);
        rp_tensor_release(&v1);
        rp_tensor qs = randt(4, S(1, 5, 2, 4), -8.0, 8.0), ks = randt(4, S(1, 5, 2, 4), -8.0, 8.0);
        rp_tensor vs = randt(4, S(1, 5, 2, 4), -1.0, 1.0);
        rp_attn_cfg c2 = base_cfg(RP_PE_ROPE, 4, 4);
        /* scores up to ~250 (exp overflows float above 88: needs the max subtraction); a float
         * score of 4 products of magnitude <= 64 is within ~6e-5, hence the looser tolerance */
        c2.scale = 1.0;
        attention_case("sharp scores", &qs, &ks, &vs, &c2, 2e-4);
        c2.causal = 0;
        attention_case("sharp scores", &qs, &ks, &vs, &c2, 2e-4);
        rp_tensor_release(&qs);
        rp_tensor_release(&ks);
        rp_tensor_release(&vs);
    }
    rp_tensor_release(&k);
    rp_tensor_release(&v);
}

/* Non-contiguous inputs and the kernel-level call with exactly sized buffers. */
static void test_layouts_and_kernel(void)
{
    const int64_t B = 2, T = 5, Sk = 6, H = 3, D = 8, Dv = 6;
    rp_tensor q0 = randt(4, S(B, H, T, D), -2.0, 2.0), k0 = randt(4, S(B, H, Sk, D), -2.0, 2.0);
    rp_tensor v0 = randt(4, S(B, Sk, H, Dv + 2), -1.0, 1.0);
    rp_tensor q, k, v;
    CHECK_STATUS(rp_tensor_transpose(&q, &q0, 1, 2), RP_OK, NULL);
    CHECK_STATUS(rp_tensor_transpose(&k, &k0, 1, 2), RP_OK, NULL);
    CHECK_STATUS(rp_tensor_narrow(&v, &v0, 3, 1, Dv), RP_OK, NULL);
    rp_tensor qc, kc, vc;
    CHECK_STATUS(rp_tensor_contiguous(&qc, &q), RP_OK, NULL);
    CHECK_STATUS(rp_tensor_contiguous(&kc, &k), RP_OK, NULL);
    CHECK_STATUS(rp_tensor_contiguous(&vc, &v), RP_OK, NULL);
    for (int pe = RP_PE_NONE; pe <= RP_PE_ROPER_LEGACY; pe++) {
        rp_attn_cfg cfg = base_cfg((rp_pe)pe, D, Dv);
        cfg.q_offset = 1;
        cfg.d_rot_qk = 6;
        cfg.pairing = RP_PAIR_INTERLEAVED;
        attention_case("strided inputs", &q, &k, &v, &cfg, ATT_TOL);

        /* the kernel on contiguous buffers of exactly the documented sizes (ASan checks) */
        int64_t nscr = rp_attention_scratch_floats(T, Sk, D, Dv);
        CHECK(nscr >= 0, "scratch size %lld", (long long)nscr);
        float *scratch = malloc(sizeof(float) * (size_t)(nscr > 0 ? nscr : 1));
        float *out = malloc(sizeof(float) * (size_t)(B * T * H * Dv));
        float *att = malloc(sizeof(float) * (size_t)(B * H * T * Sk));
        for (int64_t i = 0; i < B * T * H * Dv; i++) out[i] = NAN;
        for (int64_t i = 0; i < B * H * T * Sk; i++) att[i] = NAN;
        rp_attention_forward(out, att, scratch, rp_tensor_data(&qc), rp_tensor_data(&kc),
                             rp_tensor_data(&vc), B, T, Sk, H, D, Dv, &cfg);
        rp_tensor to, ta;
        if (CHECK_STATUS(rp_attention(&to, &ta, &qc, &kc, &vc, &cfg), RP_OK, NULL)) {
            char label[96];
            snprintf(label, sizeof label, "rp_attention_forward out == rp_attention, pe=%s", pe_label((rp_pe)pe));
            CHECK_CLOSE(out, rp_tensor_data(&to), B * T * H * Dv, 1e-6, label);
            snprintf(label, sizeof label, "rp_attention_forward att == rp_attention, pe=%s", pe_label((rp_pe)pe));
            CHECK_CLOSE(att, rp_tensor_data(&ta), B * H * T * Sk, 1e-6, label);
            rp_tensor_release(&to);
            rp_tensor_release(&ta);
        }
        free(scratch);
        free(out);
        free(att);
    }
    rp_tensor_release(&qc);
    rp_tensor_release(&kc);
    rp_tensor_release(&vc);
    rp_tensor_release(&q);
    rp_tensor_release(&k);
    rp_tensor_release(&v);
    rp_tensor_release(&q0);
    rp_tensor_release(&k0);
    rp_tensor_release(&v0);
}

/* RoPE scores depend only on relative position: pre-rotating q and k with rp_rope_rotate at
 * positions shifted by any c and running plain attention gives rope's result. The same holds for
 * roper (v rotated at i + c, output rotated back at n + c) and roper_legacy (v at 2(i + c), output
 * back at n + 2c). */
static void test_relative_property(void)
{
    const int64_t B = 1, T = 3, Sk = 7, H = 2, D = 8, Dv = 6, off = 4;
    rp_tensor q = randt(4, S(B, T, H, D), -2.0, 2.0), k = randt(4, S(B, Sk, H, D), -2.0, 2.0);
    rp_tensor v = randt(4, S(B, Sk, H, Dv), -1.0, 1.0);
    const int64_t shifts[3] = {0, 5, 1000};
    for (int pe = RP_PE_ROPE; pe <= RP_PE_ROPER_LEGACY; pe++)
        for (int pm = 0; pm <= 1; pm++) {
            rp_attn_cfg cfg = base_cfg((rp_pe)pe, D, Dv);
            cfg.q_offset = off;
            cfg.d_rot_qk = 6;
            cfg.d_rot_v = 4;
            cfg.pairing = (rp_pairing)pm;
            rp_tensor out_r, att_r;
            if (!CHECK_STATUS(rp_attention(&out_r, &att_r, &q, &k, &v, &cfg), RP_OK, NULL)) continue;
            for (int c = 0; c < 3; c++) {
                int64_t sh = shifts[c];
                rp_rope_cfg rq = rp_rope_cfg_default(cfg.d_rot_qk), rk, rv, ro;
                rq.pairing = cfg.pairing;
                rq.pos_dim = 1;
                rk = rq;
                rq.offset = off + sh;
                rk.offset = sh;
                rv = rp_rope_cfg_default(cfg.d_rot_v);
                rv.pairing = cfg.pairing;
                rv.pos_dim = 1;
                ro = rv;
                ro.sign = -1;
                if (pe == RP_PE_ROPER_LEGACY) {
                    rv.scale = 2.0;
                    rv.offset = sh; /* angles 2(i + sh) theta */
                    ro.offset = off + 2 * sh;
                } else {
                    rv.offset = sh;
                    ro.offset = off + sh;
                }
                rp_tensor qr, kr, vr, o_n, a_n, o_back;
                CHECK_STATUS(rp_rope_rotate(&qr, &q, &rq), RP_OK, NULL);
                CHECK_STATUS(rp_rope_rotate(&kr, &k, &rk), RP_OK, NULL);
                if (pe == RP_PE_ROPE) CHECK_STATUS(rp_tensor_clone(&vr, &v), RP_OK, NULL);
                else CHECK_STATUS(rp_rope_rotate(&vr, &v, &rv), RP_OK, NULL);
                rp_attn_cfg plain = cfg;
                plain.pe = RP_PE_NONE;
                CHECK_STATUS(rp_attention(&o_n, &a_n, &qr, &kr, &vr, &plain), RP_OK, NULL);
                if (pe == RP_PE_ROPE) CHECK_STATUS(rp_tensor_clone(&o_back, &o_n), RP_OK, NULL);
                else CHECK_STATUS(rp_rope_rotate(&o_back, &o_n, &ro), RP_OK, NULL);
                char label[128];
                snprintf(label, sizeof label, "%s %s == pre-rotated plain attention, shift %lld: att",
                         pe_label((rp_pe)pe), pm ? "interleaved" : "half", (long long)sh);
                CHECK_CLOSE(rp_tensor_data(&a_n), rp_tensor_data(&att_r), B * H * T * Sk, ATT_TOL, label);
                snprintf(label, sizeof label, "%s %s == pre-rotated plain attention, shift %lld: out",
                         pe_label((rp_pe)pe), pm ? "interleaved" : "half", (long long)sh);
                CHECK_CLOSE(rp_tensor_data(&o_back), rp_tensor_data(&out_r), B * T * H * Dv, ATT_TOL, label);
                rp_tensor_release(&qr);
                rp_tensor_release(&kr);
                rp_tensor_release(&vr);
                rp_tensor_release(&o_n);
                rp_tensor_release(&a_n);
                rp_tensor_release(&o_back);
            }
            rp_tensor_release(&out_r);
            rp_tensor_release(&att_r);
        }
    rp_tensor_release(&q);
    rp_tensor_release(&k);
    rp_tensor_release(&v);
}

static void test_names(void)
{
    const char *names[6] = {"none", "sinusoidal", "learned", "rope", "roper", "roper_legacy"};
    for (int pe = 0; pe < 6; pe++) {
        const char *n = rp_pe_name((rp_pe)pe);
        CHECK(n && strcmp(n, names[pe]) == 0, "rp_pe_name(%d) = %s", pe, n ? n : "(null)");
        CHECK(rp_pe_from_name(names[pe]) == pe, "rp_pe_from_name(%s) = %d", names[pe],
              rp_pe_from_name(names[pe]));
    }
    CHECK(rp_pe_from_name("ropex") == -1 && rp_pe_from_name("") == -1 && rp_pe_from_name("ROPE") == -1,
          "unknown names give -1");
}

static void test_errors(void)
{
    const int64_t B = 2, T = 7, Sk = 7, H = 3, D = 8, Dv = 6;
    rp_tensor q = check_new(4, S(B, T, H, D)), k = check_new(4, S(B, Sk, H, D));
    rp_tensor v = check_new(4, S(B, Sk, H, Dv));
    rp_attn_cfg cfg = base_cfg(RP_PE_ROPER, D, Dv);
    CHECK_STATUS(rp_attention_check(&q, &k, &v, &cfg), RP_OK, NULL);

    rp_tensor q3 = check_new(3, S(B, T, H * D)), q5 = check_new(5, S(B, T, H, D, 1));
    CHECK_STATUS(rp_attention_check(&q3, &k, &v, &cfg), RP_ERR_SHAPE, "[2 x 7 x 24]");
    CHECK_STATUS(rp_attention_check(&q5, &k, &v, &cfg), RP_ERR_SHAPE, "[2 x 7 x 3 x 8 x 1]");
    CHECK_STATUS(rp_attention_check(&q, &q3, &v, &cfg), RP_ERR_SHAPE, "[2 x 7 x 24]");
    rp_tensor v3 = check_new(3, S(B, Sk, H * Dv));
    CHECK_STATUS(rp_attention_check(&q, &k, &v3, &cfg), RP_ERR_SHAPE, "[2 x 7 x 18]");

    struct { const char *what; int which; int64_t shape[4]; const char *sub; } bad[] = {
        {"k batch", 1, {3, Sk, H, D}, "[3 x 7 x 3 x 8]"},
        {"k heads", 1, {B, Sk, 4, D}, "[2 x 7 x 4 x 8]"},
        {"k head size", 1, {B, Sk, H, 6}, "[2 x 7 x 3 x 6]"},
        {"v batch", 2, {1, Sk, H, Dv}, "[1 x 7 x 3 x 6]"},
        {"v heads", 2, {B, Sk, 2, Dv}, "[2 x 7 x 2 x 6]"},
        {"v length (S)", 2, {B, 6, H, Dv}, "[2 x 6 x 3 x 6]"},
        {"q heads", 0, {B, T, 2, D}, "[2 x 7 x 2 x 8]"},
        {"q head size", 0, {B, T, H, 4}, "[2 x 7 x 3 x 4]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rp_tensor x = check_new(4, bad[i].shape);
        const rp_tensor *qq = bad[i].which == 0 ? &x : &q, *kk = bad[i].which == 1 ? &x : &k;
        const rp_tensor *vv = bad[i].which == 2 ? &x : &v;
        rp_status st = rp_attention_check(qq, kk, vv, &cfg);
        CHECK(st == RP_ERR_SHAPE && strstr(rp_last_error(), bad[i].sub),
              "mismatched %s: status %s, message \"%s\" (want shape error naming %s)", bad[i].what,
              rp_status_name(st), rp_last_error(), bad[i].sub);
        rp_tensor_release(&x);
    }
    rp_tensor q0 = check_new(4, S(B, 0, H, D));
    rp_status st = rp_attention_check(&q0, &k, &v, &cfg);
    CHECK(st != RP_OK, "T = 0 rejected (status %s: %s)", rp_status_name(st), rp_last_error());

    rp_attn_cfg c = cfg;
    c.pe = RP_PE_ROPE;
    c.d_rot_qk = 5;
    CHECK_STATUS(rp_attention_check(&q, &k, &v, &c), RP_ERR_ARG, "d_rot");
    c.d_rot_qk = 10; /* > D */
    CHECK_STATUS(rp_attention_check(&q, &k, &v, &c), RP_ERR_ARG, "d_rot");
    c.d_rot_qk = -2;
    CHECK_STATUS(rp_attention_check(&q, &k, &v, &c), RP_ERR_ARG, "d_rot");
    c = cfg;
    c.d_rot_v = 3;
    CHECK_STATUS(rp_attention_check(&q, &k, &v, &c), RP_ERR_ARG, "d_rot");
    c.d_rot_v = 8; /* > Dv */
    CHECK_STATUS(rp_attention_check(&q, &k, &v, &c), RP_ERR_ARG, "d_rot");
    c.pe = RP_PE_ROPER_LEGACY;
    CHECK_STATUS(rp_attention_check(&q, &k, &v, &c), RP_ERR_ARG, "d_rot");
    c.d_rot_v = 3;
    CHECK_STATUS(rp_attention_check(&q, &k, &v, &c), RP_ERR_ARG, "d_rot");
    c.pe = RP_PE_ROPE; /* d_rot_v is not used by rope */
    CHECK_STATUS(rp_attention_check(&q, &k, &v, &c), RP_OK, NULL);
    c.pe = RP_PE_NONE; /* neither is used by none */
    c.d_rot_qk = 5;
    CHECK_STATUS(rp_attention_check(&q, &k, &v, &c), RP_OK, NULL);
    c = cfg;
    c.q_offset = -1;
    CHECK_STATUS(rp_attention_check(&q, &k, &v, &c), RP_ERR_ARG, "q_offset");
    c = cfg;
    c.scale = (double)NAN;
    CHECK_STATUS(rp_attention_check(&q, &k, &v, &c), RP_ERR_ARG, "scale");
    c.scale = HUGE_VAL;
    CHECK_STATUS(rp_attention_check(&q, &k, &v, &c), RP_ERR_ARG, "scale");
    c = cfg;
    c.pe = (rp_pe)17;
    st = rp_attention_check(&q, &k, &v, &c);
    CHECK(st == RP_ERR_ARG, "unknown pe mode 17: status %s: %s", rp_status_name(st), rp_last_error());

    /* the tensor-level call reports the same and leaves out/att empty */
    rp_tensor out, att;
    check_poison(&out);
    check_poison(&att);
    c = cfg;
    c.d_rot_qk = 7;
    CHECK_STATUS(rp_attention(&out, &att, &q, &k, &v, &c), RP_ERR_ARG, "d_rot");
    CHECK(out.storage == NULL && att.storage == NULL && check_poison_intact(),
          "out and att empty on failure");
    check_poison(&out);
    check_poison(&att);
    CHECK_STATUS(rp_attention(&out, &att, &q3, &k, &v, &cfg), RP_ERR_SHAPE, "[2 x 7 x 24]");
    CHECK(out.storage == NULL && att.storage == NULL && check_poison_intact(),
          "out and att empty on failure");

    rp_tensor_release(&q0);
    rp_tensor_release(&q3);
    rp_tensor_release(&q5);
    rp_tensor_release(&v3);
    rp_tensor_release(&q);
    rp_tensor_release(&k);
    rp_tensor_release(&v);
}

int main(void)
{
    test_names();
    test_against_reference();
    test_layouts_and_kernel();
    test_relative_property();
    test_errors();
    return check_summary("test_attention");
}
