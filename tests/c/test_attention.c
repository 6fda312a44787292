/* Multi-head attention (core/nn/attention.h) against a double-precision reference written from the
 * formulas of the header:
 *   q_n' = R(n theta) q_n, k_i' = R(i theta) k_i on the first d_rot_qk features (rope modes),
 *   theta_j = base^(-2j/d_rot_qk); query t sits at n = q_offset + t, key i at i;
 *   s_{n,i} = scale <q_n', k_i'>, masked to i <= n when causal; a = softmax_i(s);
 *   none/sinusoidal/learned/rope: o_n = sum_i a_{n,i} v_i
 *   roper:        o_n = sum_i a_{n,i} R((i - n) theta_v) v_i   (first d_rot_v features,
 *   roper_legacy: o_n = sum_i a_{n,i} R((2i - n) theta_v) v_i   theta_v over d_rot_v)
 * The backward (rp_attention_backward) against central finite differences of that reference in
 * double (loss sum(out * G)), elementwise for small problems and by directional derivatives plus
 * sampled entries for problems of several row blocks; the kernel-level calls on strided rows (a
 * fused qkv / dqkv buffer, padded output rows), accumulation onto pre-filled gradients, and
 * bitwise independence of the thread count.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rp.h"
#include "simd.h"

#define S(...) CHECK_SHAPE(__VA_ARGS__)

static uint64_t rng_state = 2718;

static int is_rope(rp_pe pe) { return pe == RP_PE_ROPE || pe == RP_PE_ROPER || pe == RP_PE_ROPER_LEGACY; }

/* The placements the reference rotates and their widths: cfg->scheme's (rp_pe_scheme_init, whose
 * mode's own placements test_pe_table checks against the documented rules: rope rotates q and k,
 * roper and roper_legacy q, k, v and o); v's angle factor written out here (attention.h). */
typedef struct {
    int q, k, v, o;
    int64_t wq, wk, wv, wo;
    double vmul; /* v_i is rotated by vmul * i */
} ref_place;

static ref_place ref_placement(const rp_attn_cfg *cfg)
{
    ref_place p;
    memset(&p, 0, sizeof p);
    const rp_pe_scheme *s = &cfg->scheme;
    if (!is_rope(s->pe)) return p;
    int mask = s->rotate;
    p.q = mask & 1, p.k = (mask >> 1) & 1, p.v = (mask >> 2) & 1, p.o = (mask >> 3) & 1;
    p.wq = s->d_rot_q;
    p.wk = s->d_rot_k;
    p.wv = s->d_rot_v;
    p.wo = s->d_rot_o;
    p.vmul = s->pe == RP_PE_ROPER_LEGACY ? 2.0 : 1.0;
    return p;
}

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

#define REF_MAX_D 16
#define REF_MAX_S 256

/* One head (b, h) of contiguous double inputs q [B,T,H,D], k [B,S,H,D], v [B,S,H,Dv]: writes
 * o [T][Dv], when a_out != NULL a_out [T][S], and when lse_out != NULL lse_out [T] (the log of
 * the sum of e^s over the keys each query sees). Each key and value is rotated once, before the
 * sums over the pairs (the same values as rotating it for every query, without O(T S) calls of
 * pow, sin and cos). */
static void ref_head_lse(double *o_out, double *a_out, double *lse_out, const double *q,
                         const double *k, const double *v, dims d, const rp_attn_cfg *cfg,
                         int64_t b, int64_t h)
{
    static double kr[REF_MAX_S][REF_MAX_D], vr[REF_MAX_S][REF_MAX_D];
    double qr[REF_MAX_D], s[REF_MAX_S], a[REF_MAX_S];
    ref_place pl = ref_placement(cfg);
    double p0 = (double)cfg->pos_offset;
    if (d.D > REF_MAX_D || d.Dv > REF_MAX_D || d.S > REF_MAX_S) {
        printf("FATAL: reference limits exceeded\n");
        exit(2);
    }
    for (int64_t i = 0; i < d.S; i++) {
        for (int64_t f = 0; f < d.D; f++) kr[i][f] = k[((b * d.S + i) * d.H + h) * d.D + f];
        if (pl.k) ref_rot(kr[i], pl.wk, cfg->scheme.base, cfg->scheme.pairing, p0 + (double)i);
        for (int64_t f = 0; f < d.Dv; f++) vr[i][f] = v[((b * d.S + i) * d.H + h) * d.Dv + f];
        if (pl.v) ref_rot(vr[i], pl.wv, cfg->scheme.base, cfg->scheme.pairing, pl.vmul * (p0 + (double)i));
    }
    for (int64_t t = 0; t < d.T; t++) {
        int64_t n = cfg->q_offset + t;
        for (int64_t f = 0; f < d.D; f++) qr[f] = q[((b * d.T + t) * d.H + h) * d.D + f];
        if (pl.q) ref_rot(qr, pl.wq, cfg->scheme.base, cfg->scheme.pairing, p0 + (double)n);
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
        if (lse_out) lse_out[t] = m + log(z);
        double *o = o_out + t * d.Dv;
        for (int64_t f = 0; f < d.Dv; f++) o[f] = 0;
        for (int64_t i = 0; i < d.S; i++) {
            a[i] /= z;
            if (a_out) a_out[t * d.S + i] = a[i];
            for (int64_t f = 0; f < d.Dv; f++) o[f] += a[i] * vr[i][f];
        }
        if (pl.o) ref_rot(o, pl.wo, cfg->scheme.base, cfg->scheme.pairing, -(p0 + (double)n));
    }
}

static void ref_head(double *o_out, double *a_out, const double *q, const double *k,
                     const double *v, dims d, const rp_attn_cfg *cfg, int64_t b, int64_t h)
{
    ref_head_lse(o_out, a_out, NULL, q, k, v, d, cfg, b, h);
}

static double *to_double(const float *x, int64_t n)
{
    double *y = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) y[i] = (double)x[i];
    return y;
}

static void ref_attention(double *out, double *att, const float *q, const float *k, const float *v,
                          dims d, const rp_attn_cfg *cfg)
{
    double *qd = to_double(q, d.B * d.T * d.H * d.D), *kd = to_double(k, d.B * d.S * d.H * d.D);
    double *vd = to_double(v, d.B * d.S * d.H * d.Dv);
    double *o = malloc(sizeof(double) * (size_t)(d.T * d.Dv));
    for (int64_t b = 0; b < d.B; b++)
        for (int64_t h = 0; h < d.H; h++) {
            ref_head(o, att + (b * d.H + h) * d.T * d.S, qd, kd, vd, d, cfg, b, h);
            for (int64_t t = 0; t < d.T; t++)
                memcpy(out + ((b * d.T + t) * d.H + h) * d.Dv, o + t * d.Dv,
                       sizeof(double) * (size_t)d.Dv);
        }
    free(qd);
    free(kd);
    free(vd);
    free(o);
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
    c.scheme = check_scheme(pe, D, Dv);
    c.causal = 1;
    c.scale = 1.0 / sqrt((double)D);
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
             "%s pe=%s %s %s d_rot_q=%lld d_rot_v=%lld T=%lld S=%lld q_offset=%lld scale=%.3g", what,
             rp_pe_name(cfg->scheme.pe), cfg->causal ? "causal" : "full", cfg->scheme.pairing == RP_PAIR_HALF ? "half" : "interleaved",
             (long long)cfg->scheme.d_rot_q, (long long)cfg->scheme.d_rot_v, (long long)d.T, (long long)d.S,
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
        CHECK_EACH_PE(pe, CHECK_PE_NOT_RELATIVE)
            for (int causal = 0; causal <= 1; causal++)
                for (int pm = 0; pm <= 1; pm++)
                    for (int partial = 0; partial <= 1; partial++) {
                        rp_attn_cfg cfg = base_cfg((rp_pe)pe, D, Dv);
                        cfg.causal = causal;
                        cfg.scheme.pairing = (rp_pairing)pm;
                        cfg.q_offset = offs[g];
                        if (partial) {
                            check_scheme_widths(&cfg.scheme, 4, 2);
                            cfg.scale = 0.9;
                        }
                        attention_case("rp_attention", &q, &k, &v, &cfg, ATT_TOL);
                    }
        rp_tensor_release(&q);
    }
    /* a query far along a stream (angles of thousands of radians), other base */
    {
        rp_tensor q = randt(4, S(B, 2, H, D), -2.0, 2.0);
        CHECK_EACH_PE(pe, CHECK_PE_ROTARY) {
            rp_attn_cfg cfg = base_cfg((rp_pe)pe, D, Dv);
            cfg.q_offset = 5000;
            cfg.scheme.base = 500.0;
            check_scheme_widths(&cfg.scheme, D, 4);
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
    CHECK_EACH_PE(pe, CHECK_PE_NOT_RELATIVE) {
        rp_attn_cfg cfg = base_cfg((rp_pe)pe, D, Dv);
        cfg.q_offset = 1;
        check_scheme_widths(&cfg.scheme, 6, Dv);
        cfg.scheme.pairing = RP_PAIR_INTERLEAVED;
        attention_case("strided inputs", &q, &k, &v, &cfg, ATT_TOL);

        /* the kernel on contiguous buffers of exactly the documented sizes (ASan checks) */
        int nt = 1 + pe % 2; /* 1 and 2 threads */
        int64_t nscr = rp_attention_scratch_floats(&cfg, B, T, Sk, H, D, Dv, nt);
        CHECK(nscr >= 0, "scratch size %lld", (long long)nscr);
        float *scratch = malloc(sizeof(float) * (size_t)(nscr > 0 ? nscr : 1));
        float *out = malloc(sizeof(float) * (size_t)(B * T * H * Dv));
        float *att = malloc(sizeof(float) * (size_t)(B * H * T * Sk));
        for (int64_t i = 0; i < B * T * H * Dv; i++) out[i] = NAN;
        for (int64_t i = 0; i < B * H * T * Sk; i++) att[i] = NAN;
        rp_attn_io io = {.B = B, .T = T, .S = Sk, .H = H, .D = D, .Dv = Dv,
                         .q = rp_tensor_data(&qc), .k = rp_tensor_data(&kc),
                         .v = rp_tensor_data(&vc), .ldq = H * D, .ldk = H * D, .ldv = H * Dv,
                         .out = out, .ldo = H * Dv, .att = att, .scratch = scratch, .nthreads = nt};
        rp_attention_forward(&io, &cfg);
        rp_tensor to, ta;
        if (CHECK_STATUS(rp_attention(&to, &ta, &qc, &kc, &vc, &cfg), RP_OK, NULL)) {
            char label[96];
            snprintf(label, sizeof label, "rp_attention_forward out == rp_attention, pe=%s", rp_pe_name((rp_pe)pe));
            CHECK_CLOSE(out, rp_tensor_data(&to), B * T * H * Dv, 1e-6, label);
            snprintf(label, sizeof label, "rp_attention_forward att == rp_attention, pe=%s", rp_pe_name((rp_pe)pe));
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
    CHECK_EACH_PE(pe, CHECK_PE_ROTARY)
        for (int pm = 0; pm <= 1; pm++) {
            rp_attn_cfg cfg = base_cfg((rp_pe)pe, D, Dv);
            cfg.q_offset = off;
            check_scheme_widths(&cfg.scheme, 6, 4);
            cfg.scheme.pairing = (rp_pairing)pm;
            rp_tensor out_r, att_r;
            if (!CHECK_STATUS(rp_attention(&out_r, &att_r, &q, &k, &v, &cfg), RP_OK, NULL)) continue;
            for (int c = 0; c < 3; c++) {
                int64_t sh = shifts[c];
                rp_rope_cfg rq = rp_rope_cfg_default(6), rk, rv, ro;
                rq.pairing = cfg.scheme.pairing;
                rq.pos_dim = 1;
                rk = rq;
                rq.offset = off + sh;
                rk.offset = sh;
                rv = rp_rope_cfg_default(4);
                rv.pairing = cfg.scheme.pairing;
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
                plain.scheme = check_scheme(RP_PE_NONE, 0, 0);
                CHECK_STATUS(rp_attention(&o_n, &a_n, &qr, &kr, &vr, &plain), RP_OK, NULL);
                if (pe == RP_PE_ROPE) CHECK_STATUS(rp_tensor_clone(&o_back, &o_n), RP_OK, NULL);
                else CHECK_STATUS(rp_rope_rotate(&o_back, &o_n, &ro), RP_OK, NULL);
                char label[128];
                snprintf(label, sizeof label, "%s %s == pre-rotated plain attention, shift %lld: att",
                         rp_pe_name((rp_pe)pe), pm ? "interleaved" : "half", (long long)sh);
                CHECK_CLOSE(rp_tensor_data(&a_n), rp_tensor_data(&att_r), B * H * T * Sk, ATT_TOL, label);
                snprintf(label, sizeof label, "%s %s == pre-rotated plain attention, shift %lld: out",
                         rp_pe_name((rp_pe)pe), pm ? "interleaved" : "half", (long long)sh);
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

/* ---- backward, strides, threads ---------------------------------------------------------------
 * The kernel-level calls on buffers of exactly the documented sizes (ASan checks the bounds). */

static float *rand_floats(int64_t n, double lo, double hi)
{
    return check_rand_floats(&rng_state, n, lo, hi);
}

/* Contiguous operands of one problem: q [B,T,H,D], k [B,S,H,D], v [B,S,H,Dv], G = dL/dout
 * [B,T,H,Dv] for the loss L = sum(out * G). */
typedef struct {
    dims d;
    float *q, *k, *v, *G;
    int64_t nq, nk, nv, no, na;
} problem;

static problem problem_new(dims d, double qk_range)
{
    problem p;
    p.d = d;
    p.nq = d.B * d.T * d.H * d.D;
    p.nk = d.B * d.S * d.H * d.D;
    p.nv = d.B * d.S * d.H * d.Dv;
    p.no = d.B * d.T * d.H * d.Dv;
    p.na = d.B * d.H * d.T * d.S;
    p.q = rand_floats(p.nq, -qk_range, qk_range);
    p.k = rand_floats(p.nk, -qk_range, qk_range);
    p.v = rand_floats(p.nv, -1.0, 1.0);
    p.G = rand_floats(p.no, -1.0, 1.0);
    return p;
}

static void problem_free(problem *p)
{
    free(p->q);
    free(p->k);
    free(p->v);
    free(p->G);
}

/* The kernel's results on a contiguous problem: out, att and the gradients, which start from
 * dq0/dk0/dv0 (or zeros when NULL) because the backward accumulates. */
typedef struct {
    float *out, *lse, *att, *dq, *dk, *dv;
} kresult;

static kresult run_kernel(const problem *p, const rp_attn_cfg *cfg, int nthreads, const float *dq0,
                          const float *dk0, const float *dv0)
{
    dims d = p->d;
    kresult r;
    int64_t ns = rp_attention_scratch_floats(cfg, d.B, d.T, d.S, d.H, d.D, d.Dv, nthreads);
    float *scratch = rand_floats(ns, -1e3, 1e3); /* garbage: the kernel must not read it first */
    r.out = rand_floats(p->no, -9.0, 9.0);
    r.att = rand_floats(p->na, -9.0, 9.0);
    r.lse = rand_floats(d.B * d.H * d.T, -9.0, 9.0);
    r.dq = dq0 ? check_copy_floats(dq0, p->nq) : calloc((size_t)p->nq, sizeof(float));
    r.dk = dk0 ? check_copy_floats(dk0, p->nk) : calloc((size_t)p->nk, sizeof(float));
    r.dv = dv0 ? check_copy_floats(dv0, p->nv) : calloc((size_t)p->nv, sizeof(float));
    int64_t HD = d.H * d.D, HDv = d.H * d.Dv;
    rp_attn_io io = {.B = d.B, .T = d.T, .S = d.S, .H = d.H, .D = d.D, .Dv = d.Dv, .q = p->q,
                     .k = p->k, .v = p->v, .ldq = HD, .ldk = HD, .ldv = HDv, .out = r.out,
                     .ldo = HDv, .lse = r.lse, .att = r.att, .dout = p->G, .dq = r.dq,
                     .dk = r.dk, .dv = r.dv, .scratch = scratch, .nthreads = nthreads};
    rp_attention_forward(&io, cfg);
    rp_attention_backward(&io, cfg);
    free(scratch);
    return r;
}

static void kresult_free(kresult *r)
{
    free(r->out);
    free(r->lse);
    free(r->att);
    free(r->dq);
    free(r->dk);
    free(r->dv);
}

/* sum(out * G) over head (b, h) of the double reference. */
static double ref_head_loss(const double *q, const double *k, const double *v, const double *G,
                            dims d, const rp_attn_cfg *cfg, int64_t b, int64_t h)
{
    static double o[REF_MAX_S * REF_MAX_D];
    ref_head(o, NULL, q, k, v, d, cfg, b, h);
    double L = 0.0;
    for (int64_t t = 0; t < d.T; t++)
        for (int64_t f = 0; f < d.Dv; f++) L += o[t * d.Dv + f] * G[((b * d.T + t) * d.H + h) * d.Dv + f];
    return L;
}

#define FD_H 1e-5

/* Central differences of the reference loss in double for every element of q, k and v (x is
 * one of them, of row width W and L rows per batch): only the loss of the element's own head
 * changes, so only that head is evaluated. */
static void fd_grad(double *g, double *x, int64_t L, int64_t W, const double *q, const double *k,
                    const double *v, const double *G, dims d, const rp_attn_cfg *cfg)
{
    for (int64_t b = 0; b < d.B; b++)
        for (int64_t l = 0; l < L; l++)
            for (int64_t h = 0; h < d.H; h++)
                for (int64_t f = 0; f < W; f++) {
                    int64_t i = ((b * L + l) * d.H + h) * W + f;
                    double x0 = x[i];
                    x[i] = x0 + FD_H;
                    double lp = ref_head_loss(q, k, v, G, d, cfg, b, h);
                    x[i] = x0 - FD_H;
                    double lm = ref_head_loss(q, k, v, G, d, cfg, b, h);
                    x[i] = x0;
                    g[i] = (lp - lm) / (2.0 * FD_H);
                }
}

static double max_err_ = 0.0; /* largest gradient error seen in the finite-difference checks */

static void note_err(const float *got, const double *want, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]);
        if (e > max_err_) max_err_ = e;
    }
}

/* Gradient tolerance. The kernel computes in float: scores of D <= 8 products of |q|,|k| <= 2,
 * probabilities and their gradients through float sgemm, with row sums in double; for the O(1)
 * gradients here its rounding stays below 1e-6 (8.7e-7 seen). The central difference in double
 * with h = 1e-5 has truncation error ~ h^2 |L'''| ~ 1e-9 and rounding ~ 1e-16 / h ~ 1e-11. A
 * wrong angle, sign or mask moves gradients by 1e-2 or more. */
#define GRAD_TOL 5e-6

/* The backward against finite differences, with gradients accumulated onto pre-filled buffers:
 * grad = (result - prefill) must match, and the prefill must survive where nothing flows
 * (keys no query sees). */
static void grad_case(const char *what, dims d, const rp_attn_cfg *cfg, int nthreads)
{
    problem p = problem_new(d, 2.0);
    float *P[3] = {rand_floats(p.nq, -1.0, 1.0), rand_floats(p.nk, -1.0, 1.0),
                   rand_floats(p.nv, -1.0, 1.0)};
    kresult r = run_kernel(&p, cfg, nthreads, P[0], P[1], P[2]);
    double *qd = to_double(p.q, p.nq), *kd = to_double(p.k, p.nk), *vd = to_double(p.v, p.nv);
    double *Gd = to_double(p.G, p.no);
    double *fq = malloc(sizeof(double) * (size_t)p.nq), *fk = malloc(sizeof(double) * (size_t)p.nk);
    double *fv = malloc(sizeof(double) * (size_t)p.nv);
    fd_grad(fq, qd, d.T, d.D, qd, kd, vd, Gd, d, cfg);
    fd_grad(fk, kd, d.S, d.D, qd, kd, vd, Gd, d, cfg);
    fd_grad(fv, vd, d.S, d.Dv, qd, kd, vd, Gd, d, cfg);
    float *grads[3] = {r.dq, r.dk, r.dv};
    const double *want[3] = {fq, fk, fv};
    const int64_t n[3] = {p.nq, p.nk, p.nv};
    const char *names[3] = {"dq", "dk", "dv"};
    for (int j = 0; j < 3; j++) {
        /* result - prefill is exact up to one rounding of the sum (|values| <= a few) */
        for (int64_t i = 0; i < n[j]; i++) grads[j][i] -= P[j][i];
        char label[300];
        snprintf(label, sizeof label,
                 "%s vs finite differences: %s pe=%s %s %s d_rot_q=%lld d_rot_v=%lld T=%lld "
                 "S=%lld q_offset=%lld threads=%d", names[j], what, rp_pe_name(cfg->scheme.pe),
                 cfg->causal ? "causal" : "full",
                 cfg->scheme.pairing == RP_PAIR_HALF ? "half" : "interleaved",
                 (long long)cfg->scheme.d_rot_q, (long long)cfg->scheme.d_rot_v, (long long)d.T, (long long)d.S, (long long)cfg->q_offset,
                 nthreads);
        CHECK_CLOSE(grads[j], want[j], n[j], GRAD_TOL, label);
        note_err(grads[j], want[j], n[j]);
    }
    /* keys no query sees get exactly nothing */
    if (cfg->causal && cfg->q_offset + d.T < d.S) {
        int64_t bad = 0;
        for (int64_t b = 0; b < d.B; b++)
            for (int64_t i = cfg->q_offset + d.T; i < d.S; i++) {
                for (int64_t f = 0; f < d.H * d.D; f++)
                    bad += r.dk[(b * d.S + i) * d.H * d.D + f] != 0.0f;
                for (int64_t f = 0; f < d.H * d.Dv; f++)
                    bad += r.dv[(b * d.S + i) * d.H * d.Dv + f] != 0.0f;
            }
        CHECK(bad == 0, "%s pe=%s: %lld gradient entries of unseen keys changed", what,
              rp_pe_name(cfg->scheme.pe), (long long)bad);
    }
    for (int j = 0; j < 3; j++) free(P[j]);
    free(qd);
    free(kd);
    free(vd);
    free(Gd);
    free(fq);
    free(fk);
    free(fv);
    kresult_free(&r);
    problem_free(&p);
}

/* Every pe mode, causal and not, T == S, T < S with q_offset = S - T, a chunk whose queries sit
 * beyond the keys (q_offset > S - T: every key visible), a short window at offset 0 (the last
 * keys unseen under the mask), full and partial rotation, both pairings. */
static void test_backward_fd(void)
{
    const int64_t B = 2, H = 2, D = 8, Dv = 6;
    struct { int64_t T, S, off; } g[4] = {{6, 6, 0}, {4, 7, 3}, {3, 7, 40}, {4, 7, 0}};
    for (int gi = 0; gi < 4; gi++)
        CHECK_EACH_PE(pe, CHECK_PE_NOT_RELATIVE)
            for (int causal = 0; causal <= 1; causal++)
                for (int variant = 0; variant <= 1; variant++) {
                    dims d = {B, g[gi].T, g[gi].S, H, D, Dv};
                    rp_attn_cfg cfg = base_cfg((rp_pe)pe, D, Dv);
                    cfg.causal = causal;
                    cfg.q_offset = g[gi].off;
                    if (variant) { /* partial rotation, the other pairing, another scale */
                        check_scheme_widths(&cfg.scheme, 4, 2);
                        cfg.scheme.pairing = RP_PAIR_INTERLEAVED;
                        cfg.scale = 0.9;
                    }
                    grad_case("small", d, &cfg, 1 + (gi + pe + variant) % 2);
                }
    /* far along a stream (angles of thousands of radians), another base, d_rot_v != d_rot_qk */
    CHECK_EACH_PE(pe, CHECK_PE_ROTARY) {
        dims d = {1, 3, 5, 2, 8, 8};
        rp_attn_cfg cfg = base_cfg((rp_pe)pe, 8, 8);
        cfg.q_offset = 5000;
        cfg.scheme.base = 500.0;
        check_scheme_widths(&cfg.scheme, 8, 4);
        grad_case("far offset", d, &cfg, 2);
    }
}

/* Several row blocks (T > 64): the causal block skipping and the dK'/dV' accumulation over
 * blocks, checked by directional derivatives (a full finite-difference sweep is too slow here):
 * for a random direction U on one of q, k, v, sum(grad * U) against
 * (L(x + hU) - L(x - hU)) / 2h of the double reference. Plus out/att against the reference. */
static void test_backward_blocks(void)
{
    struct { int64_t T, S, off; int causal; } g[3] = {{150, 150, 0, 1}, {100, 130, 30, 1},
                                                      {70, 90, 0, 0}};
    for (int gi = 0; gi < 3; gi++)
        CHECK_EACH_PE(pe, CHECK_PE_NOT_RELATIVE) {
            if (pe == RP_PE_SINUSOIDAL || pe == RP_PE_LEARNED) continue; /* same path as none */
            dims d = {1, g[gi].T, g[gi].S, 2, 8, 8};
            rp_attn_cfg cfg = base_cfg((rp_pe)pe, 8, 8);
            cfg.causal = g[gi].causal;
            cfg.q_offset = g[gi].off;
            check_scheme_widths(&cfg.scheme, 8, 6);
            problem p = problem_new(d, 2.0);
            kresult r = run_kernel(&p, &cfg, 2, NULL, NULL, NULL);
            double *wo = malloc(sizeof(double) * (size_t)p.no);
            double *wa = malloc(sizeof(double) * (size_t)p.na);
            ref_attention(wo, wa, p.q, p.k, p.v, d, &cfg);
            char label[200];
            snprintf(label, sizeof label, "blocks out pe=%s T=%lld S=%lld q_offset=%lld %s",
                     rp_pe_name(cfg.scheme.pe), (long long)d.T, (long long)d.S, (long long)cfg.q_offset,
                     cfg.causal ? "causal" : "full");
            CHECK_CLOSE(r.out, wo, p.no, ATT_TOL, label);
            snprintf(label, sizeof label, "blocks att pe=%s T=%lld S=%lld q_offset=%lld %s",
                     rp_pe_name(cfg.scheme.pe), (long long)d.T, (long long)d.S, (long long)cfg.q_offset,
                     cfg.causal ? "causal" : "full");
            CHECK_CLOSE(r.att, wa, p.na, ATT_TOL, label);
            double *x[3] = {to_double(p.q, p.nq), to_double(p.k, p.nk), to_double(p.v, p.nv)};
            double *Gd = to_double(p.G, p.no);
            const float *grads[3] = {r.dq, r.dk, r.dv};
            const int64_t n[3] = {p.nq, p.nk, p.nv};
            const char *names[3] = {"q", "k", "v"};
            for (int j = 0; j < 3; j++) {
                double *U = malloc(sizeof(double) * (size_t)n[j]);
                double *x0 = to_double(j == 0 ? p.q : j == 1 ? p.k : p.v, n[j]);
                double dd = 0.0, mag = 0.0;
                for (int64_t i = 0; i < n[j]; i++) {
                    U[i] = check_rand(&rng_state, -1.0, 1.0);
                    dd += (double)grads[j][i] * U[i];
                    mag += fabs((double)grads[j][i] * U[i]);
                }
                double L[2];
                for (int s = 0; s < 2; s++) {
                    double hs = s ? -FD_H : FD_H;
                    for (int64_t i = 0; i < n[j]; i++) x[j][i] = x0[i] + hs * U[i];
                    L[s] = 0.0;
                    for (int64_t h = 0; h < d.H; h++)
                        L[s] += ref_head_loss(x[0], x[1], x[2], Gd, d, &cfg, 0, h);
                }
                memcpy(x[j], x0, sizeof(double) * (size_t)n[j]);
                double fd = (L[0] - L[1]) / (2.0 * FD_H), err = fabs(dd - fd);
                /* sum|terms| ~ 100 here; the float gradients' rounding (< 1e-6 each, mostly
                 * cancelling) gives errors up to ~2e-6; a block summed twice or skipped moves
                 * the product by O(1) */
                CHECK(err <= 1e-7 * mag + 5e-6, "blocks pe=%s T=%lld S=%lld %s: d%s . U = %.9g, "
                      "finite difference %.9g (err %.3g, sum|terms| %.3g)", rp_pe_name(cfg.scheme.pe),
                      (long long)d.T, (long long)d.S, cfg.causal ? "causal" : "full", names[j],
                      dd, fd, err, mag);
                printf("  blocks pe=%s T=%lld S=%lld q_offset=%lld %s: d%s . U vs directional "
                       "difference: err %.3g (sum|terms| %.3g)\n", rp_pe_name(cfg.scheme.pe),
                       (long long)d.T, (long long)d.S, (long long)cfg.q_offset,
                       cfg.causal ? "causal" : "full", names[j], err, mag);
                /* and elementwise at a few entries: the first and last rows, keys near the end
                 * of the visible range (the last row block), random ones */
                int64_t L_rows = j == 0 ? d.T : d.S, W = j == 2 ? d.Dv : d.D;
                int64_t last = j == 0 ? d.T - 1 : (cfg.causal && cfg.q_offset + d.T < d.S
                                                       ? cfg.q_offset + d.T - 1 : d.S - 1);
                int64_t rows[5] = {0, last, last - 1, (int64_t)check_rand(&rng_state, 0, (double)L_rows),
                                   (int64_t)check_rand(&rng_state, 0, (double)L_rows)};
                double worst = 0.0;
                for (int e = 0; e < 5; e++) {
                    int64_t hh = e % d.H, f = (e * 3) % W;
                    int64_t idx = (rows[e] * d.H + hh) * W + f;
                    double v0 = x[j][idx];
                    x[j][idx] = v0 + FD_H;
                    double lp = ref_head_loss(x[0], x[1], x[2], Gd, d, &cfg, 0, hh);
                    x[j][idx] = v0 - FD_H;
                    double lm = ref_head_loss(x[0], x[1], x[2], Gd, d, &cfg, 0, hh);
                    x[j][idx] = v0;
                    double ge = fabs((double)grads[j][idx] - (lp - lm) / (2.0 * FD_H));
                    worst = ge > worst ? ge : worst;
                }
                if (worst > max_err_) max_err_ = worst;
                CHECK(worst <= GRAD_TOL, "blocks pe=%s T=%lld S=%lld %s: d%s at sampled entries "
                      "vs finite differences: max err %.3g", rp_pe_name(cfg.scheme.pe), (long long)d.T,
                      (long long)d.S, cfg.causal ? "causal" : "full", names[j], worst);
                free(U);
                free(x0);
            }
            for (int j = 0; j < 3; j++) free(x[j]);
            free(Gd);
            free(wo);
            free(wa);
            kresult_free(&r);
            problem_free(&p);
        }
}

/* The model's layout: one fused qkv buffer [B, T, 3C] (ld 3C, k = qkv + C, v = qkv + 2C), the
 * output rows padded (ldo = C + 5: the padding must stay untouched), gradients into one fused
 * dqkv buffer pre-filled with values. Everything must equal the contiguous call bit for bit
 * (the same single-threaded sgemm on the same values), and the accumulated gradient must be the
 * pre-fill plus the gradient from zero up to float rounding of the sums. */
static void test_fused_strided(void)
{
    const int64_t B = 2, T = 70, H = 2, D = 8, C = H * D, ld = 3 * C, ldo = C + 5;
    dims d = {B, T, T, H, D, D};
    CHECK_EACH_PE(pe, CHECK_PE_NOT_RELATIVE)
        for (int causal = 0; causal <= 1; causal++) {
            rp_attn_cfg cfg = base_cfg((rp_pe)pe, D, D);
            cfg.causal = causal;
            check_scheme_widths(&cfg.scheme, D, 4);
            float *qkv = rand_floats(B * T * ld, -2.0, 2.0);
            float *dqkv0 = rand_floats(B * T * ld, -1.0, 1.0);
            float *dqkv = check_copy_floats(dqkv0, B * T * ld);
            float *dout = rand_floats(B * T * ldo, -1.0, 1.0);
            float *out = rand_floats(B * T * ldo, -1.0, 1.0), *out0 = check_copy_floats(out, B * T * ldo);
            float *att = malloc(sizeof(float) * (size_t)(B * H * T * T));
            float *lse = malloc(sizeof(float) * (size_t)(B * H * T));
            int64_t ns = rp_attention_scratch_floats(&cfg, B, T, T, H, D, D, 2);
            float *scratch = malloc(sizeof(float) * (size_t)ns);
            rp_attn_io io = {.B = B, .T = T, .S = T, .H = H, .D = D, .Dv = D, .q = qkv,
                             .k = qkv + C, .v = qkv + 2 * C, .ldq = ld, .ldk = ld, .ldv = ld,
                             .out = out, .ldo = ldo, .lse = lse, .att = att, .dout = dout,
                             .dq = dqkv, .dk = dqkv + C, .dv = dqkv + 2 * C, .scratch = scratch,
                             .nthreads = 2};
            rp_attention_forward(&io, &cfg);
            rp_attention_backward(&io, &cfg);
            /* the same problem, contiguous */
            problem p;
            p.d = d;
            p.nq = p.nk = p.nv = p.no = B * T * C;
            p.na = B * H * T * T;
            p.q = malloc(sizeof(float) * (size_t)p.nq);
            p.k = malloc(sizeof(float) * (size_t)p.nk);
            p.v = malloc(sizeof(float) * (size_t)p.nv);
            p.G = malloc(sizeof(float) * (size_t)p.no);
            float *P[3];
            for (int j = 0; j < 3; j++) P[j] = malloc(sizeof(float) * (size_t)(B * T * C));
            float *cols[3] = {p.q, p.k, p.v};
            for (int64_t r = 0; r < B * T; r++) {
                for (int j = 0; j < 3; j++) {
                    memcpy(cols[j] + r * C, qkv + r * ld + j * C, sizeof(float) * (size_t)C);
                    memcpy(P[j] + r * C, dqkv0 + r * ld + j * C, sizeof(float) * (size_t)C);
                }
                memcpy(p.G + r * C, dout + r * ldo, sizeof(float) * (size_t)C);
            }
            kresult rp = run_kernel(&p, &cfg, 1, P[0], P[1], P[2]);
            kresult rz = run_kernel(&p, &cfg, 1, NULL, NULL, NULL);
            float *got = malloc(sizeof(float) * (size_t)(B * T * C));
            char label[160];
            for (int64_t r = 0; r < B * T; r++) memcpy(got + r * C, out + r * ldo, sizeof(float) * (size_t)C);
            snprintf(label, sizeof label, "fused/padded out == contiguous, pe=%s %s",
                     rp_pe_name(cfg.scheme.pe), causal ? "causal" : "full");
            CHECK_CLOSE(got, rp.out, B * T * C, 0.0, label);
            int64_t pad_bad = 0;
            for (int64_t r = 0; r < B * T; r++)
                for (int64_t f = C; f < ldo; f++) pad_bad += out[r * ldo + f] != out0[r * ldo + f];
            CHECK(pad_bad == 0, "pe=%s: %lld padding entries of out written", rp_pe_name(cfg.scheme.pe),
                  (long long)pad_bad);
            snprintf(label, sizeof label, "fused att == contiguous, pe=%s %s", rp_pe_name(cfg.scheme.pe),
                     causal ? "causal" : "full");
            CHECK_CLOSE(att, rp.att, p.na, 0.0, label);
            const float *want[3] = {rp.dq, rp.dk, rp.dv}, *zero_based[3] = {rz.dq, rz.dk, rz.dv};
            const char *names[3] = {"dq", "dk", "dv"};
            for (int j = 0; j < 3; j++) {
                for (int64_t r = 0; r < B * T; r++)
                    memcpy(got + r * C, dqkv + r * ld + j * C, sizeof(float) * (size_t)C);
                snprintf(label, sizeof label, "fused %s == contiguous (both pre-filled), pe=%s %s",
                         names[j], rp_pe_name(cfg.scheme.pe), causal ? "causal" : "full");
                CHECK_CLOSE(got, want[j], B * T * C, 0.0, label);
                double *sum = malloc(sizeof(double) * (size_t)(B * T * C));
                for (int64_t i = 0; i < B * T * C; i++)
                    sum[i] = (double)P[j][i] + (double)zero_based[j][i];
                /* gradients and pre-fill are O(1): a few float roundings of O(1) sums */
                snprintf(label, sizeof label, "accumulation: %s == pre-fill + %s from zero, pe=%s %s",
                         names[j], names[j], rp_pe_name(cfg.scheme.pe), causal ? "causal" : "full");
                CHECK_CLOSE(got, sum, B * T * C, 2e-6, label);
                free(sum);
            }
            free(got);
            for (int j = 0; j < 3; j++) free(P[j]);
            kresult_free(&rp);
            kresult_free(&rz);
            problem_free(&p);
            free(qkv);
            free(dqkv0);
            free(dqkv);
            free(dout);
            free(out);
            free(out0);
            free(att);
            free(lse);
            free(scratch);
        }
}

static int64_t count_diff(const float *a, const float *b, int64_t n)
{
    int64_t c = 0;
    for (int64_t i = 0; i < n; i++) c += memcmp(a + i, b + i, sizeof(float)) != 0;
    return c;
}

/* nthreads 1, 2, 3 and more threads than (b, h) pairs, and OpenBLAS set to 1 or 2 threads
 * outside: out, att and every gradient are identical bit for bit (each pair is computed by the
 * same single-threaded code whichever thread runs it). */
static void test_threads(void)
{
    dims d = {3, 70, 70, 2, 8, 8};
    int blas0 = rp_blas_threads();
    CHECK_EACH_PE(pe, CHECK_PE_NOT_RELATIVE)
        for (int causal = 0; causal <= 1; causal++) {
            rp_attn_cfg cfg = base_cfg((rp_pe)pe, 8, 8);
            cfg.causal = causal;
            problem p = problem_new(d, 2.0);
            rp_blas_set_threads(1);
            kresult r1 = run_kernel(&p, &cfg, 1, NULL, NULL, NULL);
            const int nts[4] = {2, 3, 7, 2};
            for (int ti = 0; ti < 4; ti++) {
                rp_blas_set_threads(ti == 3 ? 1 : 2);
                kresult rn = run_kernel(&p, &cfg, nts[ti], NULL, NULL, NULL);
                int64_t diff = count_diff(r1.out, rn.out, p.no) + count_diff(r1.att, rn.att, p.na) +
                               count_diff(r1.lse, rn.lse, p.d.B * p.d.H * p.d.T) +
                               count_diff(r1.dq, rn.dq, p.nq) + count_diff(r1.dk, rn.dk, p.nk) +
                               count_diff(r1.dv, rn.dv, p.nv);
                CHECK(diff == 0, "pe=%s %s: nthreads %d (OpenBLAS %d) differs from 1 thread in "
                      "%lld values", rp_pe_name(cfg.scheme.pe), causal ? "causal" : "full", nts[ti],
                      rp_blas_threads(), (long long)diff);
                kresult_free(&rn);
            }
            kresult_free(&r1);
            problem_free(&p);
        }
    rp_blas_set_threads(blas0);
    printf("  threads: nthreads 1/2/3/7 and OpenBLAS 1/2 threads give bitwise identical results\n");
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
    c.scheme = check_scheme(RP_PE_ROPE, 5, Dv);
    CHECK_STATUS(rp_attention_check(&q, &k, &v, &c), RP_ERR_ARG, "d_rot");
    c.scheme = check_scheme(RP_PE_ROPE, 10, Dv); /* > D */
    CHECK_STATUS(rp_attention_check(&q, &k, &v, &c), RP_ERR_ARG, "d_rot");
    c.scheme = check_scheme(RP_PE_ROPE, -2, Dv);
    CHECK_STATUS(rp_attention_check(&q, &k, &v, &c), RP_ERR_ARG, "d_rot");
    c = cfg;
    check_scheme_widths(&c.scheme, D, 3);
    CHECK_STATUS(rp_attention_check(&q, &k, &v, &c), RP_ERR_ARG, "d_rot");
    check_scheme_widths(&c.scheme, D, 8); /* > Dv */
    CHECK_STATUS(rp_attention_check(&q, &k, &v, &c), RP_ERR_ARG, "d_rot");
    c.scheme = check_scheme(RP_PE_ROPER_LEGACY, D, 8);
    CHECK_STATUS(rp_attention_check(&q, &k, &v, &c), RP_ERR_ARG, "d_rot");
    check_scheme_widths(&c.scheme, D, 3);
    CHECK_STATUS(rp_attention_check(&q, &k, &v, &c), RP_ERR_ARG, "d_rot");
    c.scheme = check_scheme(RP_PE_ROPE, D, 3); /* d_rot_v is not used by rope */
    CHECK_STATUS(rp_attention_check(&q, &k, &v, &c), RP_OK, NULL);
    c.scheme = check_scheme(RP_PE_NONE, 5, 3); /* neither is used by none */
    CHECK_STATUS(rp_attention_check(&q, &k, &v, &c), RP_OK, NULL);
    /* a scheme not as rp_pe_scheme_init resolves it */
    c.scheme = check_scheme(RP_PE_ROPE, D, 3);
    c.scheme.d_rot_v = 4;
    CHECK_MSG(rp_attention_check(&q, &k, &v, &c), RP_ERR_ARG,
              "d_rot_v 4 is set but pe rope rotates qk (a placement not rotated has width 0)");
    c.scheme = check_scheme(RP_PE_ROPE, D, 3);
    c.scheme.rotate = 0;
    CHECK_MSG(rp_attention_check(&q, &k, &v, &c), RP_ERR_ARG,
              "the scheme of pe rope is not resolved (rotate ''; build it with rp_pe_scheme_init)");
    c = cfg;
    c.q_offset = -1;
    CHECK_STATUS(rp_attention_check(&q, &k, &v, &c), RP_ERR_ARG, "q_offset");
    c = cfg;
    c.scale = (double)NAN;
    CHECK_STATUS(rp_attention_check(&q, &k, &v, &c), RP_ERR_ARG, "scale");
    c.scale = HUGE_VAL;
    CHECK_STATUS(rp_attention_check(&q, &k, &v, &c), RP_ERR_ARG, "scale");
    c = cfg;
    c.scheme.pe = (rp_pe)17;
    st = rp_attention_check(&q, &k, &v, &c);
    CHECK(st == RP_ERR_ARG, "unknown pe mode 17: status %s: %s", rp_status_name(st), rp_last_error());

    /* the tensor-level call reports the same and leaves out/att empty */
    rp_tensor out, att;
    check_poison(&out);
    check_poison(&att);
    c = cfg;
    check_scheme_widths(&c.scheme, 7, Dv);
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

/* rp_attention_decode: tokens fed one at a time through a strided cache give, at each position,
 * the reference's attention of that query over keys 0 .. pos (every mode, both pairings, full and
 * partial widths, Dv != D); the cache rows hold k and v rotated as the mode says, and q comes
 * back rotated by +pos. */
static void test_decode(void)
{
    printf("decode\n");
    enum { H = 2, D = 8, Dv = 6, Tn = 9 };
    /* a cache of a few positions, and one whose rows are padded (rp_attention_cache_ld) */
    for (int64_t cap = Tn + 2; cap <= 256; cap = cap < 256 ? 256 : 257) {
        const int64_t capp = rp_attention_cache_ld(cap), Dvp = rp_vl_round(Dv), hs = D * capp + cap * Dvp;
        if (cap == 256)
            CHECK(capp == 272, "cache rows of 256 positions are 272 floats apart, got %lld",
                  (long long)capp);
        rp_tensor q = randt(4, S(1, Tn, H, D), -2.0, 2.0), k = randt(4, S(1, Tn, H, D), -2.0, 2.0);
        rp_tensor v = randt(4, S(1, Tn, H, Dv), -1.0, 1.0);
        float *qc = malloc(sizeof(float) * (size_t)(Tn * H * D));
        float *kc = malloc(sizeof(float) * (size_t)(Tn * H * D));
        float *vc = malloc(sizeof(float) * (size_t)(Tn * H * Dv));
        check_gather(qc, &q);
        check_gather(kc, &k);
        check_gather(vc, &v);
        int64_t ncache = rp_attention_cache_floats(cap, H, D, Dv);
        CHECK(ncache == H * hs, "rp_attention_cache_floats %lld, want %lld", (long long)ncache,
              (long long)(H * hs));
        /* garbage where nothing was stored yet: positions past pos must not matter */
        float *cache = rand_floats(ncache, -1e3, 1e3);
        float *scratch = malloc(sizeof(float) * (size_t)rp_attention_decode_scratch_floats(NULL, cap, H, D, Dv));
        float qt[H * D], out[H * Dv];
        double want[H * Dv], wa[H * Tn], qd[H * D];
        /* the relative modes: test_attention_rel.c */
        CHECK_EACH_PE(pe, CHECK_PE_NOT_RELATIVE)
            for (int pm = 0; pm <= 1; pm++)
                for (int partial = 0; partial <= 1; partial++) {
                    rp_attn_cfg cfg = base_cfg((rp_pe)pe, D, Dv);
                    cfg.scheme.pairing = (rp_pairing)pm;
                    if (partial) {
                        check_scheme_widths(&cfg.scheme, 4, 2);
                        cfg.scheme.base = 500.0;
                    }
                    const rp_pe_mode *mode = rp_pe_mode_of((rp_pe)pe);
                    double maxerr = 0, maxq = 0, maxk = 0, maxv = 0;
                    for (int64_t pos = 0; pos < Tn; pos++) {
                        memcpy(qt, qc + pos * H * D, sizeof qt);
                        rp_attention_decode(out, scratch, qt, kc + pos * H * D, vc + pos * H * Dv,
                                            cache, cap, pos, H, D, Dv, &cfg);
                        /* the reference: T = 1 at q_offset pos over keys 0 .. pos */
                        rp_attn_cfg rc = cfg;
                        rc.q_offset = pos;
                        dims d = {1, 1, pos + 1, H, D, Dv};
                        ref_attention(want, wa, qc + pos * H * D, kc, vc, d, &rc);
                        for (int64_t j = 0; j < H * Dv; j++)
                            maxerr = fmax(maxerr, fabs((double)out[j] - want[j]));
                        /* q rotated in place; the cache row of k and of v at pos */
                        for (int64_t j = 0; j < H * D; j++) qd[j] = qc[pos * H * D + j];
                        for (int64_t h = 0; h < H; h++)
                            if (mode->rotate & RP_ROT_Q)
                                ref_rot(qd + h * D, cfg.scheme.d_rot_q, cfg.scheme.base,
                                        cfg.scheme.pairing, (double)pos);
                        for (int64_t j = 0; j < H * D; j++) maxq = fmax(maxq, fabs((double)qt[j] - qd[j]));
                        for (int64_t j = 0; j < H * D; j++) qd[j] = kc[pos * H * D + j];
                        for (int64_t h = 0; h < H; h++)
                            if (mode->rotate & RP_ROT_Q)
                                ref_rot(qd + h * D, cfg.scheme.d_rot_k, cfg.scheme.base,
                                        cfg.scheme.pairing, (double)pos);
                        for (int64_t j = 0; j < H * D; j++)
                            maxk = fmax(maxk, fabs((double)cache[j / D * hs + j % D * capp + pos] - qd[j]));
                        for (int64_t j = 0; j < H * Dv; j++) qd[j] = vc[pos * H * Dv + j];
                        for (int64_t h = 0; h < H; h++)
                            if (mode->rotate & RP_ROT_V)
                                ref_rot(qd + h * Dv, cfg.scheme.d_rot_v, cfg.scheme.base, cfg.scheme.pairing,
                                        mode->v_angle * (double)pos);
                        for (int64_t j = 0; j < H * Dv; j++)
                            maxv = fmax(maxv, fabs((double)cache[j / Dv * hs + D * capp + pos * Dvp + j % Dv] -
                                                  qd[j]));
                        for (int64_t h = 0; h < H; h++)
                            for (int64_t e = Dv; e < Dvp; e++)
                                maxv = fmax(maxv, fabs((double)cache[h * hs + D * capp + pos * Dvp + e]));
                    }
                    char label[160];
                    snprintf(label, sizeof label, "decode pe=%s %s d_rot_q=%lld d_rot_v=%lld",
                             rp_pe_name((rp_pe)pe), pm ? "interleaved" : "half",
                             (long long)cfg.scheme.d_rot_q, (long long)cfg.scheme.d_rot_v);
                    CHECK(maxerr < ATT_TOL, "%s: out vs reference, max |diff| %.3g", label, maxerr);
                    CHECK(maxq < 1e-5, "%s: q rotated by +pos in place, max |diff| %.3g", label, maxq);
                    CHECK(maxk < 1e-5, "%s: k cache rows, max |diff| %.3g", label, maxk);
                    CHECK(maxv < 1e-5, "%s: v cache rows, max |diff| %.3g", label, maxv);
                }
        free(qc);
        free(kc);
        free(vc);
        free(cache);
        free(scratch);
        rp_tensor_release(&q);
        rp_tensor_release(&k);
        rp_tensor_release(&v);
    }
}

/* The mode table of pe.h: names in enum order and NULL-terminated, what each mode rotates, the
 * scheme's widths (0 where the mode does not rotate) and the fraction rule's messages. */
static void test_pe_table(void)
{
    printf("pe table\n");
    static const struct {
        int rotate, rotary;
        double v_angle;
        int o_sign, linear;
        rp_pe_absolute abs;
        rp_rel_kind rel;
    } want[RP_PE_COUNT] = {
        {0, 0, 0.0, 0, 1, RP_ABS_NONE, RP_REL_NONE},
        {0, 0, 0.0, 0, 1, RP_ABS_SINUSOIDAL, RP_REL_NONE},
        {0, 0, 0.0, 0, 1, RP_ABS_LEARNED, RP_REL_NONE},
        {3, 1, 1.0, -1, 1, RP_ABS_NONE, RP_REL_NONE},
        {15, 1, 1.0, -1, 1, RP_ABS_NONE, RP_REL_NONE},
        {15, 1, 2.0, -1, 0, RP_ABS_NONE, RP_REL_NONE},
        {0, 0, 0.0, 0, 0, RP_ABS_NONE, RP_REL_SHAW},
        {0, 0, 0.0, 0, 0, RP_ABS_NONE, RP_REL_XL},
        {0, 0, 0.0, 0, 0, RP_ABS_NONE, RP_REL_T5},
        {0, 0, 0.0, 0, 0, RP_ABS_NONE, RP_REL_DEBERTA},
        {0, 0, 0.0, 0, 0, RP_ABS_NONE, RP_REL_ALIBI}};
    for (int pe = 0; pe < RP_PE_COUNT; pe++) {
        const rp_pe_mode *m = rp_pe_mode_of((rp_pe)pe);
        CHECK(m && strcmp(m->name, rp_pe_names[pe]) == 0 && strcmp(rp_pe_name((rp_pe)pe), m->name) == 0,
              "mode %d: names agree", pe);
        CHECK(m && m->rotate == want[pe].rotate && m->rotary == want[pe].rotary &&
                  m->v_angle == want[pe].v_angle && m->o_sign == want[pe].o_sign &&
                  m->linear == want[pe].linear && m->absolute == want[pe].abs &&
                  m->rel == want[pe].rel,
              "mode %s: placements", rp_pe_names[pe]);
        rp_pe_scheme s;
        const int64_t w[4] = {6, 8, 4, 2};
        rp_pe_cfg pc = {.mode = (rp_pe)pe, .base = 100.0, .pairing = RP_PAIR_INTERLEAVED};
        CHECK_STATUS(rp_pe_scheme_init(&s, &pc, w), RP_OK, NULL);
        int r = want[pe].rotate;
        CHECK(s.d_rot_q == (r & 1 ? 6 : 0) && s.d_rot_k == (r & 2 ? 8 : 0) &&
                  s.d_rot_v == (r & 4 ? 4 : 0) && s.d_rot_o == (r & 8 ? 2 : 0) && s.rotate == r &&
                  s.base == 100.0 && s.pairing == RP_PAIR_INTERLEAVED && (int)s.pe == pe &&
                  s.rel == want[pe].rel,
              "scheme %s: widths %lld %lld %lld %lld", rp_pe_names[pe], (long long)s.d_rot_q,
              (long long)s.d_rot_k, (long long)s.d_rot_v, (long long)s.d_rot_o);
        CHECK(rp_pe_rotates((rp_pe)pe) == (r != 0), "rp_pe_rotates(%s)", rp_pe_names[pe]);
        /* every subset on a rotary mode; none on the others */
        for (int mask = 1; mask <= 15; mask++) {
            rp_pe_cfg pm = {.mode = (rp_pe)pe, .rotate = mask, .base = 100.0};
            rp_status st = rp_pe_scheme_init(&s, &pm, w);
            if (want[pe].rotary)
                CHECK(st == RP_OK && s.rotate == mask && s.d_rot_q == (mask & 1 ? 6 : 0) &&
                          s.d_rot_k == (mask & 2 ? 8 : 0) && s.d_rot_v == (mask & 4 ? 4 : 0) &&
                          s.d_rot_o == (mask & 8 ? 2 : 0),
                      "scheme %s rotate %d", rp_pe_names[pe], mask);
            else
                CHECK(st == RP_ERR_ARG && strstr(rp_last_error(), "rotate needs a rotary pe"),
                      "scheme %s rotate %d refused: %s", rp_pe_names[pe], mask, rp_last_error());
        }
    }
    /* rotate names: canonical order, any input order, no repeats, nothing else */
    static const struct {
        const char *name;
        int mask;
    } names[] = {{"q", 1}, {"k", 2}, {"v", 4}, {"o", 8}, {"qk", 3}, {"kq", 3}, {"vo", 12},
                 {"qkvo", 15}, {"ovkq", 15}, {"qkv", 7}, {"", -1}, {"qq", -1}, {"x", -1},
                 {"qkvox", -1}, {"Q", -1}, {"q k", -1}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        CHECK(rp_rotate_from_name(names[i].name) == names[i].mask, "rotate name '%s' -> %d, got %d",
              names[i].name, names[i].mask, rp_rotate_from_name(names[i].name));
    CHECK(rp_rotate_from_name(NULL) == -1, "rotate name NULL");
    char buf[5];
    CHECK(strcmp(rp_rotate_name(15, buf), "qkvo") == 0 && strcmp(rp_rotate_name(12, buf), "vo") == 0 &&
              strcmp(rp_rotate_name(0, buf), "") == 0 && strcmp(rp_rotate_name(9, buf), "qo") == 0,
          "rp_rotate_name");
    CHECK(rp_pe_names[RP_PE_COUNT] == NULL, "rp_pe_names is NULL-terminated");
    CHECK(rp_pe_mode_of((rp_pe)-1) == NULL && rp_pe_mode_of(RP_PE_COUNT) == NULL, "out of range");
    CHECK(rp_pe_from_name(NULL) == -1, "rp_pe_from_name(NULL)");
    rp_pe_scheme s;
    const int64_t w2[4] = {2, 2, 2, 2};
    char unknown[32];
    rp_pe_cfg pc = {.mode = RP_PE_COUNT, .base = 1.0};
    CHECK_STATUS(rp_pe_scheme_init(&s, &pc, w2), RP_ERR_ARG,
                 check_pe_msg(unknown, sizeof unknown, "unknown pe {count}"));
    pc.mode = RP_PE_ROPE, pc.rotate = 16;
    CHECK_STATUS(rp_pe_scheme_init(&s, &pc, w2), RP_ERR_ARG,
                 "rotate mask 16 is not a subset of qkvo");
    int64_t d = 0;
    CHECK_STATUS(rp_pe_fraction_width("fraction_v", 0.5, 12, &d), RP_OK, NULL);
    CHECK(d == 6, "floor(0.5 * 12) = 6, got %lld", (long long)d);
    CHECK_STATUS(rp_pe_fraction_width("fraction_v", 0.3, 12, &d), RP_ERR_ARG,
                 "fraction_v 0.3 gives d_rot 3 for d_k 12; it must be even and >= 2");
    CHECK_STATUS(rp_pe_fraction_width("fraction_qk", 1.5, 12, &d), RP_ERR_ARG,
                 "fraction_qk 1.5 must be in (0, 1]");
    CHECK_STATUS(rp_pe_fraction_width("fraction_qk", NAN, 12, &d), RP_ERR_ARG, "must be in (0, 1]");
}

/* The weights only on request: with att = NULL the forward's out and lse and the backward's
 * gradients are bitwise those of the call that writes the weights; lse is the log-sum-exp of the
 * float64 reference's scores; every mode, causal and not, several row blocks (T = 150: three
 * blocks, the last partial), queries along a stream (q_offset) and more keys than queries, on 1
 * and 2 threads. */
static void test_weights_on_request(void)
{
    printf("weights on request, log-sum-exp\n");
    const dims ds[2] = {{2, 150, 150, 2, 8, 6}, {1, 70, 130, 3, 8, 8}};
    const int64_t offs[2] = {0, 60};
    double lse_err = 0.0;
    for (int di = 0; di < 2; di++)
        CHECK_EACH_PE(pe, CHECK_PE_NOT_RELATIVE) /* relative modes: test_attention_rel.c */
            for (int causal = 0; causal <= 1; causal++)
                for (int nt = 1; nt <= 2; nt++) {
                    dims d = ds[di];
                    rp_attn_cfg cfg = base_cfg((rp_pe)pe, d.D, d.Dv);
                    cfg.causal = causal;
                    cfg.q_offset = offs[di];
                    if (di == 1) check_scheme_widths(&cfg.scheme, 4, 6);
                    problem p = problem_new(d, 2.0);
                    kresult r = run_kernel(&p, &cfg, nt, NULL, NULL, NULL);
                    int64_t HD = d.H * d.D, HDv = d.H * d.Dv, nl = d.B * d.H * d.T;
                    int64_t ns = rp_attention_scratch_floats(&cfg, d.B, d.T, d.S, d.H, d.D, d.Dv, nt);
                    float *scratch = rand_floats(ns, -1e3, 1e3);
                    float *out = rand_floats(p.no, -9.0, 9.0), *lse = rand_floats(nl, -9.0, 9.0);
                    float *dq = calloc((size_t)p.nq, sizeof(float));
                    float *dk = calloc((size_t)p.nk, sizeof(float));
                    float *dv = calloc((size_t)p.nv, sizeof(float));
                    rp_attn_io io = {.B = d.B, .T = d.T, .S = d.S, .H = d.H, .D = d.D, .Dv = d.Dv,
                                     .q = p.q, .k = p.k, .v = p.v, .ldq = HD, .ldk = HD,
                                     .ldv = HDv, .out = out, .ldo = HDv, .lse = lse, .dout = p.G,
                                     .dq = dq, .dk = dk, .dv = dv, .scratch = scratch,
                                     .nthreads = nt};
                    rp_attention_forward(&io, &cfg);
                    rp_attention_backward(&io, &cfg);
                    int64_t diff = count_diff(r.out, out, p.no) + count_diff(r.lse, lse, nl) +
                                   count_diff(r.dq, dq, p.nq) + count_diff(r.dk, dk, p.nk) +
                                   count_diff(r.dv, dv, p.nv);
                    CHECK(diff == 0, "pe=%s %s T=%lld S=%lld q_offset=%lld nthreads %d: %lld values "
                          "differ without the weights", rp_pe_name(cfg.scheme.pe), causal ? "causal" : "full",
                          (long long)d.T, (long long)d.S, (long long)cfg.q_offset, nt, (long long)diff);
                    /* lse against the reference (scores of size up to ~6: 1e-5 absolute) */
                    double *qd = to_double(p.q, p.nq), *kd = to_double(p.k, p.nk);
                    double *vd = to_double(p.v, p.nv);
                    double *o = malloc(sizeof(double) * (size_t)(d.T * d.Dv));
                    double *want = malloc(sizeof(double) * (size_t)nl);
                    for (int64_t b = 0; b < d.B; b++)
                        for (int64_t h = 0; h < d.H; h++)
                            ref_head_lse(o, NULL, want + (b * d.H + h) * d.T, qd, kd, vd, d, &cfg,
                                         b, h);
                    char label[160];
                    snprintf(label, sizeof label, "lse == reference, pe=%s %s T=%lld S=%lld",
                             rp_pe_name(cfg.scheme.pe), causal ? "causal" : "full", (long long)d.T,
                             (long long)d.S);
                    CHECK_CLOSE(lse, want, nl, 1e-5, label);
                    for (int64_t i = 0; i < nl; i++)
                        if (fabs((double)lse[i] - want[i]) > lse_err)
                            lse_err = fabs((double)lse[i] - want[i]);
                    free(qd);
                    free(kd);
                    free(vd);
                    free(o);
                    free(want);
                    free(scratch);
                    free(out);
                    free(lse);
                    free(dq);
                    free(dk);
                    free(dv);
                    kresult_free(&r);
                    problem_free(&p);
                }
    printf("  lse: max |error| %.2e against float64\n", lse_err);
}

/* The placement ablation: every subset of q, k, v, o on rope and roper_legacy with a different
 * width per placement, against the reference (forward, lse through the gradients, finite
 * differences, decode), with pos_offset; and the shift test: which subsets give weights and
 * outputs that do not change when every position moves. */
static void test_placements(void)
{
    printf("placements\n");
    const int64_t B = 1, T = 5, Sk = 7, H = 2, D = 8, Dv = 6;
    rp_tensor q = randt(4, S(B, T, H, D), -2.0, 2.0), k = randt(4, S(B, Sk, H, D), -2.0, 2.0);
    rp_tensor v = randt(4, S(B, Sk, H, Dv), -1.0, 1.0);
    const rp_pe pes[2] = {RP_PE_ROPE, RP_PE_ROPER_LEGACY};
    for (int pi = 0; pi < 2; pi++)
        for (int mask = 1; mask <= 15; mask++) {
            rp_attn_cfg cfg = base_cfg(pes[pi], D, Dv);
            cfg.scheme = check_scheme_rot(pes[pi], mask, 6, 4, 6, 2);
            cfg.pos_offset = 3;
            char what[64];
            char nm[5];
            snprintf(what, sizeof what, "rotate %s of %s", rp_rotate_name(mask, nm), rp_pe_name(pes[pi]));
            attention_case(what, &q, &k, &v, &cfg, ATT_TOL);
            cfg.causal = 0;
            cfg.scheme.pairing = RP_PAIR_INTERLEAVED;
            attention_case(what, &q, &k, &v, &cfg, ATT_TOL);
            dims d = {1, 4, 6, 2, 8, 6};
            cfg.q_offset = 2;
            grad_case(what, d, &cfg, 1 + mask % 2);
        }
    /* the shift test, on equal widths: the weights move with the positions unless q and k are
     * rotated together (or neither), the output unless v and o are (or neither) */
    float *o0 = NULL, *a0 = NULL;
    for (int mask = 0; mask <= 15; mask++) {
        rp_attn_cfg cfg = base_cfg(mask ? RP_PE_ROPE : RP_PE_NONE, D, Dv);
        cfg.scheme = check_scheme_rot(mask ? RP_PE_ROPE : RP_PE_NONE, mask, 4, 4, 4, 4);
        double dmax[2][2] = {{0, 0}, {0, 0}};
        for (int shift = 0; shift <= 1; shift++) {
            cfg.pos_offset = shift ? 1000 : 0;
            rp_tensor out, att;
            CHECK_STATUS(rp_attention(&out, &att, &q, &k, &v, &cfg), RP_OK, NULL);
            int64_t no = rp_tensor_numel(&out), na = rp_tensor_numel(&att);
            if (!shift) {
                o0 = malloc(sizeof(float) * (size_t)no), a0 = malloc(sizeof(float) * (size_t)na);
                memcpy(o0, rp_tensor_data(&out), sizeof(float) * (size_t)no);
                memcpy(a0, rp_tensor_data(&att), sizeof(float) * (size_t)na);
            } else {
                const float *o1 = rp_tensor_data(&out), *a1 = rp_tensor_data(&att);
                for (int64_t i = 0; i < no; i++) dmax[0][0] = fmax(dmax[0][0], fabs((double)o1[i] - (double)o0[i]));
                for (int64_t i = 0; i < na; i++) dmax[0][1] = fmax(dmax[0][1], fabs((double)a1[i] - (double)a0[i]));
                free(o0);
                free(a0);
            }
            rp_tensor_release(&out);
            rp_tensor_release(&att);
        }
        int qk_rel = ((mask & 1) != 0) == ((mask & 2) != 0);
        int vo_rel = ((mask & 4) != 0) == ((mask & 8) != 0);
        char nm[5];
        /* float angles of ~1000 rad: invariance to ~1e-4; a dependence shows at ~1e-1 */
        CHECK(qk_rel ? dmax[0][1] < 2e-4 : dmax[0][1] > 1e-2, "shift test rotate '%s': weights "
              "moved %.3g (relative: %d)", rp_rotate_name(mask, nm), dmax[0][1], qk_rel);
        CHECK(qk_rel && vo_rel ? dmax[0][0] < 2e-4 : dmax[0][0] > 1e-2, "shift test rotate '%s': "
              "output moved %.3g (relative: %d)", rp_rotate_name(mask, nm), dmax[0][0], qk_rel && vo_rel);
    }
    /* decode over a cache for subsets with different widths */
    {
        const int64_t cap = 6;
        int64_t hs = D * rp_attention_cache_ld(cap) + cap * rp_vl_round(Dv);
        float *cache = rand_floats(H * hs, -1e3, 1e3);
        float *scratch = malloc(sizeof(float) * (size_t)rp_attention_decode_scratch_floats(NULL, cap, H, D, Dv));
        float *qc = malloc(sizeof(float) * (size_t)(cap * H * D)), *kc = malloc(sizeof(float) * (size_t)(cap * H * D));
        float *vc = malloc(sizeof(float) * (size_t)(cap * H * Dv));
        rp_tensor qq = randt(2, S(cap, H * D), -2.0, 2.0), kk = randt(2, S(cap, H * D), -2.0, 2.0);
        rp_tensor vv = randt(2, S(cap, H * Dv), -1.0, 1.0);
        check_gather(qc, &qq);
        check_gather(kc, &kk);
        check_gather(vc, &vv);
        const int masks[5] = {1, 2, 5, 12, 11};
        for (int mi = 0; mi < 5; mi++) {
            rp_attn_cfg cfg = base_cfg(RP_PE_ROPER, D, Dv);
            cfg.scheme = check_scheme_rot(RP_PE_ROPER, masks[mi], 6, 4, 6, 2);
            double maxerr = 0;
            float qt[2 * 8], out[2 * 6]; /* H * D, H * Dv */
            double want[2 * 6], wa[2 * 8];
            for (int64_t pos = 0; pos < cap; pos++) {
                memcpy(qt, qc + pos * H * D, sizeof qt);
                rp_attention_decode(out, scratch, qt, kc + pos * H * D, vc + pos * H * Dv, cache,
                                    cap, pos, H, D, Dv, &cfg);
                rp_attn_cfg rc = cfg;
                rc.q_offset = pos;
                dims d = {1, 1, pos + 1, H, D, Dv};
                ref_attention(want, wa, qc + pos * H * D, kc, vc, d, &rc);
                for (int64_t j = 0; j < H * Dv; j++) maxerr = fmax(maxerr, fabs((double)out[j] - want[j]));
            }
            char nm[5];
            CHECK(maxerr < 1e-5, "decode rotate %s: max |diff| %.3g", rp_rotate_name(masks[mi], nm), maxerr);
        }
        free(cache);
        free(scratch);
        free(qc);
        free(kc);
        free(vc);
        rp_tensor_release(&qq);
        rp_tensor_release(&kk);
        rp_tensor_release(&vv);
    }
    /* errors: each placement's width by its name */
    rp_attn_cfg cfg = base_cfg(RP_PE_ROPE, D, Dv);
    cfg.scheme.rotate = 16;
    CHECK_STATUS(rp_attention_check(&q, &k, &v, &cfg), RP_ERR_ARG, "rotate mask 16 is not a subset of qkvo");
    cfg = base_cfg(RP_PE_NONE, D, Dv);
    cfg.scheme.rotate = 4;
    char msg[128];
    CHECK_STATUS(rp_attention_check(&q, &k, &v, &cfg), RP_ERR_ARG,
                 check_pe_msg(msg, sizeof msg, "rotate needs a rotary pe ({rotary}), not none"));
    cfg = base_cfg(RP_PE_ROPE, D, Dv);
    cfg.scheme = check_scheme_rot(RP_PE_ROPE, RP_ROT_Q | RP_ROT_O, 3, D, Dv, Dv);
    CHECK_STATUS(rp_attention_check(&q, &k, &v, &cfg), RP_ERR_ARG, "d_rot_q must be even and positive, got 3");
    cfg.scheme = check_scheme_rot(RP_PE_ROPE, RP_ROT_Q | RP_ROT_O, D, D, Dv, 8);
    CHECK_STATUS(rp_attention_check(&q, &k, &v, &cfg), RP_ERR_ARG, "d_rot_o 8 exceeds d_v 6");
    cfg.scheme = check_scheme_rot(RP_PE_ROPE, RP_ROT_Q | RP_ROT_O, D, D, 0, 0);
    CHECK_STATUS(rp_attention_check(&q, &k, &v, &cfg), RP_ERR_ARG, "d_rot_o must be even and positive, got 0");
    cfg = base_cfg(RP_PE_ROPE, D, Dv);
    cfg.scheme = check_scheme_rot(RP_PE_ROPE, RP_ROT_K, D, 10, Dv, Dv);
    CHECK_STATUS(rp_attention_check(&q, &k, &v, &cfg), RP_ERR_ARG, "d_rot_k 10 exceeds d_k 8");
    cfg = base_cfg(RP_PE_ROPE, D, Dv);
    cfg.pos_offset = -1;
    CHECK_STATUS(rp_attention_check(&q, &k, &v, &cfg), RP_ERR_ARG, "pos_offset must be >= 0, got -1");
    rp_tensor_release(&q);
    rp_tensor_release(&k);
    rp_tensor_release(&v);
}

/* io.set: the backward OVERWRITES dq, dk, dv with the bits accumulating onto zeros gives, on
 * buffers full of NaN, keys no query sees included (S > q_offset + T under the mask), and leaves
 * the padding between strided rows alone. */
static void test_backward_set(void)
{
    const dims d = {2, 5, 9, 2, 8, 6};
    const int64_t ld[3] = {d.H * d.D + 3, d.H * d.D + 1, d.H * d.Dv + 2}, ldo = d.H * d.Dv;
    const int64_t rows[3] = {d.B * d.T, d.B * d.S, d.B * d.S}, w[3] = {d.H * d.D, d.H * d.D,
                                                                        d.H * d.Dv};
    CHECK_EACH_PE(pe, CHECK_PE_NOT_RELATIVE)
        for (int causal = 0; causal <= 1; causal++) {
            rp_attn_cfg cfg = base_cfg((rp_pe)pe, d.D, d.Dv);
            cfg.causal = causal;
            cfg.q_offset = 1;
            float *x[3], *acc[3], *set[3];
            for (int j = 0; j < 3; j++) {
                x[j] = rand_floats(rows[j] * ld[j], -1.0, 1.0);
                acc[j] = calloc((size_t)(rows[j] * ld[j]), sizeof(float));
                set[j] = malloc(sizeof(float) * (size_t)(rows[j] * ld[j]));
                for (int64_t i = 0; i < rows[j] * ld[j]; i++) set[j][i] = NAN;
            }
            float *G = rand_floats(d.B * d.T * ldo, -1.0, 1.0);
            float *out = malloc(sizeof(float) * (size_t)(d.B * d.T * ldo));
            float *lse = malloc(sizeof(float) * (size_t)(d.B * d.H * d.T));
            int64_t ns = rp_attention_scratch_floats(&cfg, d.B, d.T, d.S, d.H, d.D, d.Dv, 2);
            float *scratch = malloc(sizeof(float) * (size_t)ns);
            rp_attn_io io = {.B = d.B, .T = d.T, .S = d.S, .H = d.H, .D = d.D, .Dv = d.Dv,
                             .q = x[0], .k = x[1], .v = x[2], .ldq = ld[0], .ldk = ld[1],
                             .ldv = ld[2], .out = out, .ldo = ldo, .lse = lse, .dout = G,
                             .dq = acc[0], .dk = acc[1], .dv = acc[2], .scratch = scratch,
                             .nthreads = 2};
            rp_attention_forward(&io, &cfg);
            rp_attention_backward(&io, &cfg);
            io.dq = set[0], io.dk = set[1], io.dv = set[2], io.set = 1;
            rp_attention_backward(&io, &cfg);
            int64_t diff = 0, pad = 0, seen0 = 0;
            for (int j = 0; j < 3; j++)
                for (int64_t r = 0; r < rows[j]; r++)
                    for (int64_t f = 0; f < ld[j]; f++) {
                        const float *a = acc[j] + r * ld[j] + f, *b = set[j] + r * ld[j] + f;
                        if (f >= w[j]) pad += !isnan(*b);
                        else diff += memcmp(a, b, sizeof *a) != 0;
                        /* a key past q_offset + T: no query sees it under the mask */
                        if (j > 0 && f < w[j] && causal && r % d.S >= cfg.q_offset + d.T)
                            seen0 += *b != 0.0f;
                    }
            CHECK(diff == 0 && pad == 0 && seen0 == 0,
                  "backward set, pe=%s %s: %lld elements differ from accumulating onto zeros, "
                  "%lld padding written, %lld unseen keys not 0", rp_pe_name((rp_pe)pe),
                  causal ? "causal" : "full", (long long)diff, (long long)pad,
                  (long long)seen0);
            for (int j = 0; j < 3; j++) {
                free(x[j]);
                free(acc[j]);
                free(set[j]);
            }
            free(G);
            free(out);
            free(lse);
            free(scratch);
        }
}

/* The vector exponential of the fused softmax pass against the scalar one, lane for lane bit for
 * bit, and both against exp() in double: every 61st float of [-87, 0] and the edges (signed
 * zeros, -87, below -87, -inf, NaN, subnormals, positive inputs taken as negative). */
static void test_vexp(void)
{
    int64_t checked = 0, bad = 0;
    double worst = 0.0;
    float in[RP_VL], out[RP_VL];
    int k = 0;
    const float edges[] = {0.0f, -0.0f, -87.0f, -87.5f, -88.0f, -100.0f, -1e30f, -INFINITY, NAN,
                           -1e-45f, -1e-40f, -1e-8f, 2.5f, -0.693359375f, -1.5f};
    const uint64_t last = 0xC2AE0000u; /* -87 */
    const int64_t ne = (int64_t)(sizeof edges / sizeof edges[0]);
    const int64_t nb = (int64_t)((last - 0x80000000u) / 61u) + 1, n = nb + ne;
    for (int64_t i = 0; i < n + RP_VL - 1; i++) {
        union {
            uint32_t u;
            float f;
        } x = {.u = (uint32_t)(0x80000000u + 61u * (uint64_t)i)};
        if (i >= nb) x.f = edges[(i - nb) % ne]; /* the edges, then repeated to fill a vector */
        in[k++] = x.f;
        if (k < RP_VL) continue;
        rp_vstore(out, rp_vexp_nonpos(rp_vload(in)));
        for (int j = 0; j < RP_VL; j++) {
            float want = rp_exp_nonpos(in[j]);
            if (memcmp(&want, &out[j], sizeof want) != 0) bad++;
            if (isfinite(in[j]) && in[j] <= 0.0f && in[j] >= -87.0f) {
                double ref = exp((double)in[j]), e = fabs((double)out[j] - ref) / ref;
                worst = e > worst ? e : worst;
            }
            checked++;
        }
        k = 0;
    }
    CHECK(bad == 0, "rp_vexp_nonpos: %lld of %lld lanes differ from rp_exp_nonpos", (long long)bad,
          (long long)checked);
    CHECK(worst <= 8.4e-8, "rp_vexp_nonpos: relative error %.3g > 8.4e-8", worst);
    CHECK(checked > 1000000, "rp_vexp_nonpos: only %lld values checked", (long long)checked);
    printf("  vector exp: %lld values, %lld differ from the scalar's; worst relative error %.3g\n",
           (long long)checked, (long long)bad, worst);
}

int main(void)
{
    test_names();
    test_vexp();
    test_against_reference();
    test_layouts_and_kernel();
    test_relative_property();
    test_errors();
    test_backward_fd();
    test_backward_blocks();
    test_backward_set();
    printf("  finite differences: max |grad - fd| %.3g over all elementwise checks (tol %.3g)\n",
           max_err_, GRAD_TOL);
    test_fused_strided();
    test_threads();
    test_decode();
    test_weights_on_request();
    test_pe_table();
    test_placements();
    return check_summary("test_attention");
}
