/* The relative-position terms of pe shaw, xl, t5, deberta and alibi (core/nn/attention.h) against a
 * float64 reference written here from the formulas of the header, with naive loops over every
 * (query, key) pair: query t at n = P + q_offset + t, key i at m = P + i (P = pos_offset),
 *   score = s [ (q + u) . k + (q + w) . Ek[r] + k . Eq[r'] ] + bias,  a = softmax over m <= n
 *   (causal) or all keys,  out = sum a (v + Ev[r])
 *   shaw     r = clip(m - n, -k, k) + k, Ek = a^K, Ev = a^V shared by the heads
 *   xl       r = (n - m) - lo (lo: the smallest distance of the call), u, w
 *   t5       bias = table[h][bucket(m - n)] (HF's _relative_position_bucket, here in double)
 *   deberta  r = delta(n, m), r' = delta(m, n), delta(a, b) = 0 | 2k - 1 | a - b + k
 *   alibi    bias = -slope_h |n - m| (the paper's get_slopes)
 * Checks: out, lse and the weights against the reference; the backward (every input: q, k, v and
 * each table) against central finite differences of the reference's loss sum(out * G),
 * elementwise on small problems and by directional derivatives on problems of several 32 x 128
 * tiles; the accumulation onto pre-filled gradients; bitwise equality for nthreads 1, 2, 3;
 * decoding against the forward; rp_attention with tables; rp_attention_check's messages; T5's
 * buckets and ALiBi's slopes against hand-computed values.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rp.h"

static uint64_t rng_state = 31415;

/* The inputs of a problem, in the order of rp_attn_rel after q, k, v. */
enum { IQ, IK, IV, IEK, IEQ, IEV, IU, IW, IBIAS, NIN };
static const char *const in_names[NIN] = {"q", "k", "v", "ek", "eq", "ev", "u", "w", "bias"};

typedef struct {
    int64_t B, T, S, H, D, Dv;
    rp_attn_cfg cfg;
    int64_t rows, lo; /* table rows (ek, eq, ev) and xl's first distance, derived here */
    float *x[NIN];    /* NULL where the mode has no such input */
    int64_t n[NIN];
    float *G;         /* dL/dout, [B, T, H, Dv] */
    int64_t no, nl, na;
    rp_attn_rel rel;
} prob;

static const char *pe_name(rp_pe pe) { return rp_pe_name(pe); }

/* xl's distances written out from the header: n - m over the visible pairs. */
static void xl_span(const rp_attn_cfg *c, int64_t T, int64_t S, int64_t *lo, int64_t *rows)
{
    int64_t mn = c->q_offset - (S - 1); /* query 0, last key */
    if (c->causal && mn < 0) mn = 0;    /* a query sees keys up to its own position */
    *lo = mn;
    *rows = c->q_offset + T - 1 - mn + 1;
}

static prob prob_new(rp_pe pe, int64_t B, int64_t T, int64_t S, int64_t H, int64_t D, int64_t Dv,
                     int causal, int64_t q_offset, int64_t clip, int64_t buckets, int64_t maxd)
{
    prob p;
    memset(&p, 0, sizeof p);
    p.B = B, p.T = T, p.S = S, p.H = H, p.D = D, p.Dv = Dv;
    rp_attn_cfg *c = &p.cfg;
    c->scheme = check_scheme(pe, 0, 0);
    c->causal = causal;
    c->scale = 0.8 / sqrt((double)D);
    c->scheme.base = RP_ROPE_BASE;
    c->q_offset = q_offset;
    c->pos_offset = (q_offset % 3) * 5; /* must change nothing */
    c->rel.clip = clip, c->rel.buckets = buckets, c->rel.max_distance = maxd;
    c->tables = &p.rel; /* fixed up by the caller after copying (prob_fix) */
    if (pe == RP_PE_SHAW) p.rows = 2 * clip + 1;
    if (pe == RP_PE_DEBERTA) p.rows = 2 * clip;
    if (pe == RP_PE_XL) xl_span(c, T, S, &p.lo, &p.rows);
    p.n[IQ] = B * T * H * D, p.n[IK] = B * S * H * D, p.n[IV] = B * S * H * Dv;
    if (pe == RP_PE_SHAW) p.n[IEK] = p.rows * D, p.n[IEV] = p.rows * Dv;
    if (pe == RP_PE_XL || pe == RP_PE_DEBERTA) p.n[IEK] = p.rows * H * D;
    if (pe == RP_PE_DEBERTA) p.n[IEQ] = p.rows * H * D;
    if (pe == RP_PE_XL) p.n[IU] = p.n[IW] = H * D;
    if (pe == RP_PE_T5) p.n[IBIAS] = H * buckets;
    for (int j = 0; j < NIN; j++) {
        double r = j == IQ || j == IK ? 1.5 : j == IV ? 1.0 : j == IBIAS ? 1.0 : 0.7;
        p.x[j] = p.n[j] ? check_rand_floats(&rng_state, p.n[j], -r, r) : NULL;
    }
    p.no = B * T * H * Dv, p.nl = B * H * T, p.na = B * H * T * S;
    p.G = check_rand_floats(&rng_state, p.no, -1.0, 1.0);
    return p;
}

/* Points cfg.rel at the struct's own tables (after any copy of the struct). */
static void prob_fix(prob *p)
{
    p->rel = (rp_attn_rel){p->x[IEK], p->x[IEQ], p->x[IEV], p->x[IU], p->x[IW], p->x[IBIAS]};
    p->cfg.tables = &p->rel;
}

static void prob_free(prob *p)
{
    for (int j = 0; j < NIN; j++) free(p->x[j]);
    free(p->G);
}

/* ---- the float64 reference ---- */

/* HF transformers' T5Attention._relative_position_bucket, in double. */
static int64_t ref_bucket(int64_t rel, int bidirectional, int64_t nb, int64_t maxd)
{
    int64_t ret = 0, n;
    if (bidirectional) {
        nb /= 2;
        ret = rel > 0 ? nb : 0;
        n = rel < 0 ? -rel : rel;
    } else {
        n = rel < 0 ? -rel : 0; /* -min(rel, 0) */
    }
    int64_t max_exact = nb / 2;
    if (n < max_exact) return ret + n;
    int64_t large = max_exact + (int64_t)(log((double)n / (double)max_exact) /
                                          log((double)maxd / (double)max_exact) *
                                          (double)(nb - max_exact));
    return ret + (large < nb - 1 ? large : nb - 1);
}

/* ALiBi's get_slopes (Press et al.), as in their code: start * ratio^i with start = ratio =
 * 2^(-2^-(log2(n) - 3)); other n: the closest power of two below, then every other slope of the
 * next power of two. */
static void ref_slopes(double *m, int64_t n)
{
    double l2 = log2((double)n);
    if (l2 == floor(l2)) {
        double start = pow(2.0, -pow(2.0, -(l2 - 3.0)));
        for (int64_t i = 0; i < n; i++) m[i] = start * pow(start, (double)i);
        return;
    }
    int64_t c = (int64_t)pow(2.0, floor(l2));
    ref_slopes(m, c);
    double *more = malloc(sizeof(double) * (size_t)(2 * c));
    ref_slopes(more, 2 * c);
    for (int64_t j = 0; j < n - c; j++) m[c + j] = more[2 * j];
    free(more);
}

static int64_t ref_delta(int64_t a, int64_t b, int64_t k) /* DeBERTa's delta(a, b) */
{
    if (a - b <= -k) return 0;
    if (a - b >= k) return 2 * k - 1;
    return a - b + k;
}

/* out [B, T, H, Dv], lse [B, H, T], att [B, H, T, S] (each when not NULL) of the problem with
 * the inputs x (double copies, same layouts). */
static void ref_forward(const prob *p, double *const x[NIN], double *out, double *lse, double *att)
{
    const rp_attn_cfg *c = &p->cfg;
    int64_t B = p->B, T = p->T, S = p->S, H = p->H, D = p->D, Dv = p->Dv, k = c->rel.clip;
    int64_t P = c->pos_offset;
    rp_pe pe = c->scheme.pe;
    double *slope = malloc(sizeof(double) * (size_t)H), *sc = malloc(sizeof(double) * (size_t)S);
    ref_slopes(slope, H);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t t = 0; t < T; t++) {
                int64_t n = P + c->q_offset + t;
                const double *q = x[IQ] + ((b * T + t) * H + h) * D;
                double mx = -INFINITY;
                for (int64_t i = 0; i < S; i++) {
                    int64_t m = P + i;
                    sc[i] = NAN;
                    if (c->causal && m > n) continue;
                    const double *kk = x[IK] + ((b * S + i) * H + h) * D;
                    double s = 0.0;
                    for (int64_t d = 0; d < D; d++) {
                        double qu = q[d] + (pe == RP_PE_XL ? x[IU][h * D + d] : 0.0);
                        s += qu * kk[d];
                    }
                    if (pe == RP_PE_SHAW) {
                        int64_t rel = m - n, r = (rel < -k ? -k : rel > k ? k : rel) + k;
                        for (int64_t d = 0; d < D; d++) s += q[d] * x[IEK][r * D + d];
                    }
                    if (pe == RP_PE_XL) {
                        int64_t r = (n - m) - p->lo;
                        for (int64_t d = 0; d < D; d++)
                            s += (q[d] + x[IW][h * D + d]) * x[IEK][(r * H + h) * D + d];
                    }
                    if (pe == RP_PE_DEBERTA) {
                        int64_t r = ref_delta(n, m, k), r2 = ref_delta(m, n, k);
                        for (int64_t d = 0; d < D; d++)
                            s += q[d] * x[IEK][(r * H + h) * D + d] +
                                 kk[d] * x[IEQ][(r2 * H + h) * D + d];
                    }
                    s *= c->scale;
                    if (pe == RP_PE_T5)
                        s += x[IBIAS][h * c->rel.buckets +
                                      ref_bucket(m - n, !c->causal, c->rel.buckets,
                                                 c->rel.max_distance)];
                    if (pe == RP_PE_ALIBI) s -= slope[h] * fabs((double)(n - m));
                    sc[i] = s;
                    mx = s > mx ? s : mx;
                }
                double sum = 0.0;
                for (int64_t i = 0; i < S; i++) sum += isnan(sc[i]) ? 0.0 : exp(sc[i] - mx);
                double *o = out ? out + ((b * T + t) * H + h) * Dv : NULL;
                if (o) memset(o, 0, sizeof(double) * (size_t)Dv);
                for (int64_t i = 0; i < S; i++) {
                    double a = isnan(sc[i]) ? 0.0 : exp(sc[i] - mx) / sum;
                    if (att) att[((b * H + h) * T + t) * S + i] = a;
                    if (!o || a == 0.0) continue;
                    int64_t rel = P + i - n, r = (rel < -k ? -k : rel > k ? k : rel) + k;
                    for (int64_t e = 0; e < Dv; e++)
                        o[e] += a * (x[IV][((b * S + i) * H + h) * Dv + e] +
                                     (pe == RP_PE_SHAW ? x[IEV][r * Dv + e] : 0.0));
                }
                if (lse) lse[(b * H + h) * T + t] = mx + log(sum);
            }
    free(slope);
    free(sc);
}

static double ref_loss(const prob *p, double *const x[NIN])
{
    double *o = malloc(sizeof(double) * (size_t)p->no), L = 0.0;
    ref_forward(p, x, o, NULL, NULL);
    for (int64_t i = 0; i < p->no; i++) L += o[i] * (double)p->G[i];
    free(o);
    return L;
}

static double *to_double(const float *x, int64_t n)
{
    double *y = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) y[i] = x ? (double)x[i] : 0.0;
    return y;
}

/* ---- the kernel ---- */

/* The kernel's results: out, lse, att, the gradients of every input (accumulated onto the
 * pre-fill pre[j] when given, else from zero). */
typedef struct {
    float *out, *lse, *att, *g[NIN];
} kres;

static float *copy_or_zero(const float *src, int64_t n)
{
    float *p = calloc((size_t)(n > 0 ? n : 1), sizeof(float));
    if (src) memcpy(p, src, sizeof(float) * (size_t)n);
    return p;
}

static kres run_kernel(const prob *p, int nthreads, float *const pre[NIN])
{
    kres r;
    int64_t ns = rp_attention_scratch_floats(&p->cfg, p->B, p->T, p->S, p->H, p->D, p->Dv,
                                             nthreads);
    /* garbage: the kernel must not read scratch before writing it */
    float *scratch = check_rand_floats(&rng_state, ns, -1e3, 1e3);
    r.out = check_rand_floats(&rng_state, p->no, -9.0, 9.0);
    r.lse = check_rand_floats(&rng_state, p->nl, -9.0, 9.0);
    r.att = check_rand_floats(&rng_state, p->na, -9.0, 9.0);
    for (int j = 0; j < NIN; j++) r.g[j] = p->n[j] ? copy_or_zero(pre ? pre[j] : NULL, p->n[j]) : NULL;
    int64_t HD = p->H * p->D, HDv = p->H * p->Dv;
    rp_attn_rel_grad dr = {r.g[IEK], r.g[IEQ], r.g[IEV], r.g[IU], r.g[IW], r.g[IBIAS]};
    rp_attn_io io = {.B = p->B, .T = p->T, .S = p->S, .H = p->H, .D = p->D, .Dv = p->Dv,
                     .q = p->x[IQ], .k = p->x[IK], .v = p->x[IV], .ldq = HD, .ldk = HD,
                     .ldv = HDv, .out = r.out, .ldo = HDv, .lse = r.lse, .att = r.att,
                     .dout = p->G, .dq = r.g[IQ], .dk = r.g[IK], .dv = r.g[IV], .drel = &dr,
                     .scratch = scratch, .nthreads = nthreads};
    rp_attention_forward(&io, &p->cfg);
    rp_attention_backward(&io, &p->cfg);
    free(scratch);
    return r;
}

static void kres_free(kres *r)
{
    free(r->out);
    free(r->lse);
    free(r->att);
    for (int j = 0; j < NIN; j++) free(r->g[j]);
}

static void label_of(char *buf, size_t n, const char *what, const prob *p)
{
    snprintf(buf, n, "%s pe=%s %s B=%lld T=%lld S=%lld H=%lld q_offset=%lld clip=%lld "
             "buckets=%lld max_distance=%lld", what, pe_name(p->cfg.scheme.pe),
             p->cfg.causal ? "causal" : "full", (long long)p->B, (long long)p->T, (long long)p->S,
             (long long)p->H, (long long)p->cfg.q_offset, (long long)p->cfg.rel.clip,
             (long long)p->cfg.rel.buckets, (long long)p->cfg.rel.max_distance);
}

/* Tolerances. Forward: probabilities and sums of a few values of magnitude ~1; float scores of
 * a few products are within ~1e-6. Gradients: float rounding of O(1) sums (~1e-6); the central
 * difference in double with h = 1e-5 errs by ~h^2 |L'''| ~ 1e-9. A wrong row, sign or clip moves
 * a value by 1e-2 or more. */
#define OUT_TOL 5e-6
#define GRAD_TOL 5e-6
#define FD_H 1e-5

static double max_fwd_err = 0.0, max_grad_err = 0.0;

static double max_abs_diff(const float *a, const double *b, int64_t n)
{
    double m = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        m = e > m || isnan(e) ? e : m;
    }
    return m;
}

/* out, lse and att of the kernel against the reference. */
static void check_forward(const prob *p, const kres *r, const char *what)
{
    double *x[NIN];
    for (int j = 0; j < NIN; j++) x[j] = to_double(p->x[j], p->n[j]);
    double *o = malloc(sizeof(double) * (size_t)p->no), *l = malloc(sizeof(double) * (size_t)p->nl);
    double *a = malloc(sizeof(double) * (size_t)p->na);
    ref_forward(p, x, o, l, a);
    char label[400];
    label_of(label, sizeof label, what, p);
    double eo = max_abs_diff(r->out, o, p->no), el = max_abs_diff(r->lse, l, p->nl);
    double ea = max_abs_diff(r->att, a, p->na);
    CHECK(eo <= OUT_TOL && el <= OUT_TOL && ea <= OUT_TOL,
          "%s: out / lse / att vs float64: max |diff| %.3g / %.3g / %.3g", label, eo, el, ea);
    double e = fmax(eo, fmax(el, ea));
    max_fwd_err = e > max_fwd_err ? e : max_fwd_err;
    for (int j = 0; j < NIN; j++) free(x[j]);
    free(o);
    free(l);
    free(a);
}

/* Every gradient against central differences of the reference loss, elementwise; the kernel's
 * gradients accumulate onto a random pre-fill, which is subtracted first. */
static void grad_case(prob *p, int nthreads)
{
    prob_fix(p);
    float *pre[NIN];
    for (int j = 0; j < NIN; j++)
        pre[j] = p->n[j] ? check_rand_floats(&rng_state, p->n[j], -1.0, 1.0) : NULL;
    kres r = run_kernel(p, nthreads, pre);
    check_forward(p, &r, "forward");
    double *x[NIN];
    for (int j = 0; j < NIN; j++) x[j] = to_double(p->x[j], p->n[j]);
    char label[400];
    for (int j = 0; j < NIN; j++) {
        if (!p->n[j]) continue;
        double worst = 0.0;
        int64_t at = -1;
        for (int64_t i = 0; i < p->n[j]; i++) {
            double x0 = x[j][i];
            x[j][i] = x0 + FD_H;
            double lp = ref_loss(p, x);
            x[j][i] = x0 - FD_H;
            double lm = ref_loss(p, x);
            x[j][i] = x0;
            double fd = (lp - lm) / (2.0 * FD_H);
            double got = (double)r.g[j][i] - (double)pre[j][i];
            double e = fabs(got - fd);
            if (e > worst || isnan(e)) worst = e, at = i;
        }
        label_of(label, sizeof label, in_names[j], p);
        CHECK(worst <= GRAD_TOL, "d%s vs finite differences: %s threads=%d: max |diff| %.3g at "
              "[%lld]", in_names[j], label, nthreads, worst, (long long)at);
        max_grad_err = worst > max_grad_err ? worst : max_grad_err;
    }
    for (int j = 0; j < NIN; j++) {
        free(x[j]);
        free(pre[j]);
    }
    kres_free(&r);
}

/* Small problems, every mode: T == S, T < S with q_offset = S - T, queries past the keys
 * (q_offset > S - T), a short window at offset 0 (the last keys unseen under the mask); causal
 * and not; H a power of two and not; clip below and above the distances; T5 buckets whose log
 * part the distances reach. */
static void test_grad_small(void)
{
    printf("gradients vs finite differences (small problems)\n");
    struct {
        int64_t T, S, off;
    } g[4] = {{5, 5, 0}, {4, 7, 3}, {3, 6, 10}, {4, 7, 0}};
    CHECK_EACH_PE(pe, CHECK_PE_RELATIVE)
        for (int gi = 0; gi < 4; gi++)
            for (int causal = 0; causal <= 1; causal++)
                for (int var = 0; var <= 1; var++) {
                    int64_t H = var ? 3 : 2, clip = var ? 2 : 9;
                    int64_t nb = var ? 8 : 6, md = var ? 5 : 7; /* causal: > nb/2; full: > nb/4 */
                    if (gi == 2) clip = 1;
                    prob p = prob_new((rp_pe)pe, 2, g[gi].T, g[gi].S, H, 4, 3, causal, g[gi].off,
                                      clip, nb, md);
                    grad_case(&p, 1 + (gi + var) % 2);
                    prob_free(&p);
                }
    /* T5's standard buckets and ALiBi with 8 heads over longer distances */
    prob p = prob_new(RP_PE_T5, 1, 6, 40, 2, 4, 3, 1, 150, 0, 32, 128);
    grad_case(&p, 2);
    prob_free(&p);
    p = prob_new(RP_PE_T5, 1, 6, 40, 2, 4, 3, 0, 30, 0, 32, 128);
    grad_case(&p, 1);
    prob_free(&p);
    p = prob_new(RP_PE_ALIBI, 1, 5, 9, 8, 4, 3, 0, 2, 0, 0, 0);
    grad_case(&p, 2);
    prob_free(&p);
    printf("  max |grad - fd| %.3g (tol %.3g), forward max |diff| %.3g (tol %.3g)\n", max_grad_err,
           GRAD_TOL, max_fwd_err, OUT_TOL);
}

/* Several tiles (T, S > 32 x 128): out/lse/att against the reference and every gradient by a
 * directional derivative: sum(grad * U) against (L(x + hU) - L(x - hU)) / 2h, U random. */
static void test_blocks(void)
{
    printf("several tiles (directional derivatives)\n");
    struct {
        int64_t T, S, off;
        int causal;
        int64_t clip;
    } g[4] = {{160, 160, 0, 1, 16}, {160, 160, 0, 0, 200}, {70, 150, 80, 1, 3},
              {40, 140, 0, 0, 40}};
    CHECK_EACH_PE(pe, CHECK_PE_RELATIVE)
        for (int gi = 0; gi < 4; gi++) {
            prob p = prob_new((rp_pe)pe, 1, g[gi].T, g[gi].S, gi % 2 ? 3 : 2, 8, 6, g[gi].causal,
                              g[gi].off, g[gi].clip, 32, 128);
            prob_fix(&p);
            kres r = run_kernel(&p, 2, NULL);
            check_forward(&p, &r, "tiles forward");
            double *x[NIN];
            for (int j = 0; j < NIN; j++) x[j] = to_double(p.x[j], p.n[j]);
            char label[400];
            for (int j = 0; j < NIN; j++) {
                if (!p.n[j]) continue;
                double *U = malloc(sizeof(double) * (size_t)p.n[j]);
                double *x0 = to_double(p.x[j], p.n[j]), dd = 0.0, mag = 0.0, L[2];
                for (int64_t i = 0; i < p.n[j]; i++) {
                    U[i] = check_rand(&rng_state, -1.0, 1.0);
                    dd += (double)r.g[j][i] * U[i];
                    mag += fabs((double)r.g[j][i] * U[i]);
                }
                for (int s = 0; s < 2; s++) {
                    for (int64_t i = 0; i < p.n[j]; i++) x[j][i] = x0[i] + (s ? -FD_H : FD_H) * U[i];
                    L[s] = ref_loss(&p, x);
                }
                memcpy(x[j], x0, sizeof(double) * (size_t)p.n[j]);
                double fd = (L[0] - L[1]) / (2.0 * FD_H), err = fabs(dd - fd);
                label_of(label, sizeof label, in_names[j], &p);
                /* float gradients summed over thousands of terms: relative to sum |terms| */
                CHECK(err <= 1e-6 * mag + 1e-5, "tiles d%s . U = %.9g, finite difference %.9g: %s "
                      "(err %.3g, sum|terms| %.3g)", in_names[j], dd, fd, label, err, mag);
                free(U);
                free(x0);
            }
            for (int j = 0; j < NIN; j++) free(x[j]);
            kres_free(&r);
            prob_free(&p);
        }
}

static int64_t count_diff(const float *a, const float *b, int64_t n)
{
    int64_t c = 0;
    for (int64_t i = 0; i < n; i++) c += memcmp(a + i, b + i, sizeof(float)) != 0;
    return c;
}

/* Every output, the table gradients included, is bitwise the same for nthreads 1, 2, 3 and more
 * threads than (b, h) pairs. */
static void test_threads(void)
{
    printf("threads\n");
    CHECK_EACH_PE(pe, CHECK_PE_RELATIVE)
        for (int causal = 0; causal <= 1; causal++) {
            prob p = prob_new((rp_pe)pe, 3, 70, 150, 2, 8, 8, causal, 80, 5, 16, 40);
            prob_fix(&p);
            kres r1 = run_kernel(&p, 1, NULL);
            const int nts[3] = {2, 3, 9};
            for (int ti = 0; ti < 3; ti++) {
                kres rn = run_kernel(&p, nts[ti], NULL);
                int64_t diff = count_diff(r1.out, rn.out, p.no) + count_diff(r1.lse, rn.lse, p.nl) +
                               count_diff(r1.att, rn.att, p.na);
                for (int j = 0; j < NIN; j++)
                    if (p.n[j]) diff += count_diff(r1.g[j], rn.g[j], p.n[j]);
                CHECK(diff == 0, "pe=%s %s: nthreads %d differs from 1 thread in %lld values",
                      pe_name(p.cfg.scheme.pe), causal ? "causal" : "full", nts[ti], (long long)diff);
                kres_free(&rn);
            }
            kres_free(&r1);
            prob_free(&p);
        }
}

/* rp_attention_decode, one token at a time, against the reference of that query over keys
 * 0 .. pos and against row pos of rp_attention_forward over the whole sequence, for every mode;
 * xl's table holds the distances 0 .. Tn-1 (row r: distance r), each decode reading rows
 * 0 .. pos. */
static void test_decode(void)
{
    printf("decode\n");
    enum { H = 3, D = 8, Dv = 6, Tn = 40, cap = Tn + 3 };
    CHECK_EACH_PE(pe, CHECK_PE_RELATIVE) {
        /* the whole sequence as one problem (T = S = Tn, causal); xl rows: distances 0 .. Tn-1 */
        prob p = prob_new((rp_pe)pe, 1, Tn, Tn, H, D, Dv, 1, 0, 4, 16, 20);
        p.cfg.pos_offset = 0;
        prob_fix(&p);
        float *cache = check_rand_floats(&rng_state, rp_attention_cache_floats(cap, H, D, Dv), -1e3,
                                         1e3);
        float *scratch = check_rand_floats(
            &rng_state, rp_attention_decode_scratch_floats(&p.cfg, cap, H, D, Dv), -1e3, 1e3);
        float q[H * D], out[H * Dv];
        float *fwd = malloc(sizeof(float) * (size_t)p.no), *lse = malloc(sizeof(float) * (size_t)p.nl);
        float *fs = malloc(sizeof(float) *
                           (size_t)rp_attention_scratch_floats(&p.cfg, 1, Tn, Tn, H, D, Dv, 1));
        rp_attn_io io = {.B = 1, .T = Tn, .S = Tn, .H = H, .D = D, .Dv = Dv, .q = p.x[IQ],
                         .k = p.x[IK], .v = p.x[IV], .ldq = H * D, .ldk = H * D, .ldv = H * Dv,
                         .out = fwd, .ldo = H * Dv, .lse = lse, .scratch = fs, .nthreads = 1};
        rp_attention_forward(&io, &p.cfg);
        double worst = 0.0, worst_fwd = 0.0;
        double *x[NIN];
        for (int j = 0; j < NIN; j++) x[j] = to_double(p.x[j], p.n[j]);
        for (int64_t pos = 0; pos < Tn; pos++) {
            memcpy(q, p.x[IQ] + pos * H * D, sizeof q);
            rp_attention_decode(out, scratch, q, p.x[IK] + pos * H * D, p.x[IV] + pos * H * Dv,
                                cache, cap, pos, H, D, Dv, &p.cfg);
            /* the reference: query pos over keys 0 .. pos, q_offset pos (xl: lo = 0) */
            prob one = p;
            one.T = 1, one.S = pos + 1;
            one.cfg.q_offset = pos;
            one.no = H * Dv;
            one.lo = 0;
            double *xo[NIN];
            memcpy(xo, x, sizeof xo);
            xo[IQ] = x[IQ] + pos * H * D;
            double want[H * Dv];
            ref_forward(&one, xo, want, NULL, NULL);
            double e = max_abs_diff(out, want, H * Dv);
            worst = e > worst ? e : worst;
            for (int64_t j = 0; j < H * Dv; j++)
                worst_fwd = fmax(worst_fwd, fabs((double)out[j] - (double)fwd[pos * H * Dv + j]));
        }
        CHECK(worst_fwd <= OUT_TOL, "decode pe=%s: out vs rp_attention_forward's row, max |diff| "
              "%.3g", pe_name(p.cfg.scheme.pe), worst_fwd);
        free(fwd);
        free(lse);
        free(fs);
        CHECK(worst <= OUT_TOL, "decode pe=%s: out vs the forward of each query, max |diff| %.3g",
              pe_name(p.cfg.scheme.pe), worst);
        printf("  decode pe=%s: max |diff| %.3g\n", pe_name(p.cfg.scheme.pe), worst);
        for (int j = 0; j < NIN; j++) free(x[j]);
        free(cache);
        free(scratch);
        prob_free(&p);
    }
}

/* rp_attention (the tensor-level call) with the tables in cfg.rel. */
static void test_tensor_call(void)
{
    printf("rp_attention\n");
    CHECK_EACH_PE(pe, CHECK_PE_RELATIVE) {
        prob p = prob_new((rp_pe)pe, 2, 5, 9, 3, 4, 3, 1, 4, 2, 8, 6);
        prob_fix(&p);
        rp_tensor q = check_new(4, CHECK_SHAPE(2, 5, 3, 4)), k = check_new(4, CHECK_SHAPE(2, 9, 3, 4));
        rp_tensor v = check_new(4, CHECK_SHAPE(2, 9, 3, 3)), out, att;
        check_scatter(&q, p.x[IQ]);
        check_scatter(&k, p.x[IK]);
        check_scatter(&v, p.x[IV]);
        if (CHECK_STATUS(rp_attention(&out, &att, &q, &k, &v, &p.cfg), RP_OK, NULL)) {
            double *x[NIN], *o = malloc(sizeof(double) * (size_t)p.no);
            double *a = malloc(sizeof(double) * (size_t)p.na);
            for (int j = 0; j < NIN; j++) x[j] = to_double(p.x[j], p.n[j]);
            ref_forward(&p, x, o, NULL, a);
            float *go = malloc(sizeof(float) * (size_t)p.no), *ga = malloc(sizeof(float) * (size_t)p.na);
            check_gather(go, &out);
            check_gather(ga, &att);
            char label[400];
            label_of(label, sizeof label, "rp_attention out", &p);
            CHECK_CLOSE(go, o, p.no, OUT_TOL, label);
            label_of(label, sizeof label, "rp_attention att", &p);
            CHECK_CLOSE(ga, a, p.na, OUT_TOL, label);
            for (int j = 0; j < NIN; j++) free(x[j]);
            free(o);
            free(a);
            free(go);
            free(ga);
            rp_tensor_release(&out);
            rp_tensor_release(&att);
        }
        rp_tensor_release(&q);
        rp_tensor_release(&k);
        rp_tensor_release(&v);
        prob_free(&p);
    }
}

/* rp_attention_check's messages, exactly. */
static void expect_error(const rp_attn_cfg *cfg, const char *want)
{
    rp_tensor q = check_new(4, CHECK_SHAPE(1, 2, 2, 4)), k = check_new(4, CHECK_SHAPE(1, 3, 2, 4));
    rp_tensor v = check_new(4, CHECK_SHAPE(1, 3, 2, 3));
    rp_status st = rp_attention_check(&q, &k, &v, cfg);
    if (!want)
        CHECK(st == RP_OK, "pe %s: accepted, got %s: %s", pe_name(cfg->scheme.pe),
              rp_status_name(st), rp_last_error());
    else
        CHECK(st == RP_ERR_ARG && strcmp(rp_last_error(), want) == 0,
              "pe %s: want RP_ERR_ARG \"%s\", got %s \"%s\"", pe_name(cfg->scheme.pe), want,
              rp_status_name(st), st == RP_OK ? "" : rp_last_error());
    rp_tensor_release(&q);
    rp_tensor_release(&k);
    rp_tensor_release(&v);
}

static void test_errors(void)
{
    printf("errors\n");
    float t[64] = {0};
    rp_attn_rel all = {t, t, t, t, t, t}, none = {0};
    rp_attn_cfg c = {.scheme = check_scheme(RP_PE_SHAW, 0, 0), .causal = 1, .scale = 0.5,
                     .rel.clip = 0, .tables = &all};
    expect_error(&c, "rel_clip 0 must be in 1..65536");
    c.rel.clip = 1;
    expect_error(&c, NULL);
    c.scheme = check_scheme(RP_PE_DEBERTA, 0, 0), c.rel.clip = 65537;
    expect_error(&c, "rel_clip 65537 must be in 1..65536");
    c.rel.clip = 65536;
    expect_error(&c, NULL);
    c = (rp_attn_cfg){.scheme = check_scheme(RP_PE_T5, 0, 0), .causal = 1, .scale = 0.5,
                      .rel.buckets = 1,
                      .rel.max_distance = 128, .tables = &all};
    expect_error(&c, "rel_buckets 1 must be in 2..4096");
    c.rel.buckets = 4097;
    expect_error(&c, "rel_buckets 4097 must be in 2..4096");
    c.rel.buckets = 2, c.rel.max_distance = 2;
    expect_error(&c, NULL);
    c.rel.buckets = 32, c.rel.max_distance = 16;
    expect_error(&c, "rel_max_distance 16 must be in 17..2147483647");
    c.rel.max_distance = 17;
    expect_error(&c, NULL);
    c.causal = 0, c.rel.max_distance = 8;
    expect_error(&c, "rel_max_distance 8 must be in 9..2147483647");
    c.rel.max_distance = 9;
    expect_error(&c, NULL);
    c.rel.buckets = 3;
    expect_error(&c, "rel_buckets 3 must be in 4..4096 for pe t5 without the causal mask (it "
                     "halves them)");
    c.rel.buckets = 32, c.rel.max_distance = (int64_t)1 << 31;
    expect_error(&c, "rel_max_distance 2147483648 must be in 9..2147483647");
    /* tables */
    c = (rp_attn_cfg){.scheme = check_scheme(RP_PE_SHAW, 0, 0), .causal = 1, .scale = 0.5,
                      .rel.clip = 4, .rel.buckets = 32,
                      .rel.max_distance = 128, .tables = NULL};
    expect_error(&c, "pe shaw needs the table rel->ek (a^K [2 clip + 1, D])");
    rp_attn_rel part = all;
    part.ev = NULL;
    c.tables = &part;
    expect_error(&c, "pe shaw needs the table rel->ev (a^V [2 clip + 1, Dv])");
    c.scheme = check_scheme(RP_PE_XL, 0, 0), c.tables = &none;
    expect_error(&c, "pe xl needs the table rel->ek (W_kR R [rows, H, D])");
    part = all, part.u = NULL, c.tables = &part;
    expect_error(&c, "pe xl needs the table rel->u ([H, D])");
    part = all, part.w = NULL;
    expect_error(&c, "pe xl needs the table rel->w ([H, D])");
    c.scheme = check_scheme(RP_PE_T5, 0, 0), part = all, part.bias = NULL;
    expect_error(&c, "pe t5 needs the table rel->bias ([H, buckets])");
    c.scheme = check_scheme(RP_PE_DEBERTA, 0, 0), part = all, part.ek = NULL;
    expect_error(&c, "pe deberta needs the table rel->ek (K^r [2 clip, H, D])");
    part = all, part.eq = NULL;
    expect_error(&c, "pe deberta needs the table rel->eq (Q^r [2 clip, H, D])");
    c.scheme = check_scheme(RP_PE_ALIBI, 0, 0), c.tables = NULL, c.rel.clip = 0, c.rel.buckets = 0;
    expect_error(&c, NULL);
    c.scheme = check_scheme(RP_PE_ROPE, 4, 0); /* the others ignore rel_* */
    expect_error(&c, NULL);
}

/* T5 buckets against values computed by hand from HF's formula (num_buckets 32, max_distance
 * 128): unidirectional max_exact 16, e.g. -50: 16 + trunc(log(50/16) / log(8) * 16) = 16 + 8;
 * bidirectional (16 per side, max_exact 8): -50: 8 + trunc(log(50/8) / log(16) * 8) = 8 + 5,
 * +50: 16 + 13. Then against the double reference over a range of distances and configs. */
static void test_buckets(void)
{
    printf("t5 buckets, alibi slopes, table rows\n");
    const int64_t rel[9] = {0, -1, -15, -16, -17, -50, -127, -128, -1000};
    const int64_t uni[9] = {0, 1, 15, 16, 16, 24, 31, 31, 31};
    const int64_t bi[9] = {0, 1, 9, 10, 10, 13, 15, 15, 15};
    for (int i = 0; i < 9; i++) {
        int64_t u = rp_attention_t5_bucket(rel[i], 0, 32, 128);
        int64_t b = rp_attention_t5_bucket(rel[i], 1, 32, 128);
        int64_t bp = rp_attention_t5_bucket(-rel[i], 1, 32, 128);
        int64_t up = rp_attention_t5_bucket(-rel[i], 0, 32, 128);
        CHECK(u == uni[i], "t5 bucket(%lld, unidirectional) = %lld, want %lld", (long long)rel[i],
              (long long)u, (long long)uni[i]);
        CHECK(b == bi[i], "t5 bucket(%lld, bidirectional) = %lld, want %lld", (long long)rel[i],
              (long long)b, (long long)bi[i]);
        int64_t want_bp = rel[i] == 0 ? 0 : 16 + bi[i];
        CHECK(bp == want_bp, "t5 bucket(%lld, bidirectional) = %lld, want %lld",
              (long long)-rel[i], (long long)bp, (long long)want_bp);
        CHECK(up == 0, "t5 bucket(%lld, unidirectional) = %lld, want 0 (keys after the query)",
              (long long)-rel[i], (long long)up);
    }
    static const int64_t cfgs[][2] = {{32, 128}, {8, 5}, {6, 7}, {2, 2}, {64, 1000}, {33, 100}};
    int64_t bad = 0;
    for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++)
        for (int bid = 0; bid <= 1; bid++) {
            if (bid && cfgs[c][0] < 4) continue;
            for (int64_t r = -3000; r <= 3000; r++)
                bad += rp_attention_t5_bucket(r, bid, cfgs[c][0], cfgs[c][1]) !=
                       ref_bucket(r, bid, cfgs[c][0], cfgs[c][1]);
        }
    CHECK(bad == 0, "t5 buckets: %lld of the distances -3000 .. 3000 differ from the reference",
          (long long)bad);
    /* ALiBi: H 8 gives 1/2 .. 1/256; H 6 the 4-head slopes 1/4 .. 1/256, then 1/2, 1/8 */
    double m[16], want8[8], want6[6] = {0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125};
    for (int h = 0; h < 8; h++) want8[h] = 1.0 / (double)(2 << h);
    rp_attention_alibi_slopes(m, 8);
    CHECK_CLOSE(m, want8, 8, 0.0, "alibi slopes H=8");
    rp_attention_alibi_slopes(m, 6);
    CHECK_CLOSE(m, want6, 6, 0.0, "alibi slopes H=6");
    double r[16];
    for (int64_t H = 1; H <= 16; H++) {
        rp_attention_alibi_slopes(m, H);
        ref_slopes(r, H);
        char label[64];
        snprintf(label, sizeof label, "alibi slopes H=%lld vs get_slopes", (long long)H);
        CHECK_CLOSE(m, r, H, 1e-15, label);
    }
    /* the table rows of each mode */
    rp_attn_cfg c = {.scheme = check_scheme(RP_PE_SHAW, 0, 0), .rel.clip = 5, .causal = 1};
    int64_t lo = -7;
    CHECK(rp_attention_rel_rows(&c, 4, 9, &lo) == 11 && lo == 0, "shaw rows 2k+1");
    c.scheme = check_scheme(RP_PE_DEBERTA, 0, 0);
    CHECK(rp_attention_rel_rows(&c, 4, 9, &lo) == 10 && lo == 0, "deberta rows 2k");
    c.scheme = check_scheme(RP_PE_T5, 0, 0);
    CHECK(rp_attention_rel_rows(&c, 4, 9, NULL) == 0, "t5 rows 0");
    c.scheme = check_scheme(RP_PE_XL, 0, 0);
    struct {
        int64_t T, S, off;
        int causal;
        int64_t rows, lo;
    } xs[5] = {{5, 5, 0, 1, 5, 0},   {5, 5, 0, 0, 9, -4}, {3, 7, 4, 1, 7, 0},
               {2, 4, 10, 1, 5, 7}, {2, 4, 10, 0, 5, 7}};
    for (int i = 0; i < 5; i++) {
        c.causal = xs[i].causal, c.q_offset = xs[i].off;
        int64_t rows = rp_attention_rel_rows(&c, xs[i].T, xs[i].S, &lo), wl, wr;
        xl_span(&c, xs[i].T, xs[i].S, &wl, &wr);
        CHECK(rows == xs[i].rows && lo == xs[i].lo && wr == rows && wl == lo,
              "xl rows T=%lld S=%lld q_offset=%lld %s: %lld from %lld, want %lld from %lld",
              (long long)xs[i].T, (long long)xs[i].S, (long long)xs[i].off,
              xs[i].causal ? "causal" : "full", (long long)rows, (long long)lo,
              (long long)xs[i].rows, (long long)xs[i].lo);
    }
}

/* The kind table's rows (core/nn/pe.c) keep the rules the kernels and the model assume (pe.h): EV
 * and UW come with EK, EV with a shared Ek, at most one bias term; rows and a sign for each table
 * whose rows follow the distance, a symbol for every table read; one parameter of the right
 * shape per table (a projection: [C, C], with a shared P for RP_PARAM_PROJ_SHARED). */
static void test_kind_rows(void)
{
    printf("kind table\n");
    for (int kind = 0; kind < RP_REL_COUNT; kind++) {
        const rp_rel_desc *x = rp_rel_of((rp_rel_kind)kind);
        int t = x->terms, tabs = rp_rel_tables(x);
        CHECK(x->scale_terms >= 1, "kind %d: scale_terms %d", kind, x->scale_terms);
        CHECK(!(t & (RP_TERM_EV | RP_TERM_UW)) || (t & RP_TERM_EK), "kind %d: EV, UW need EK", kind);
        CHECK(!(t & RP_TERM_EV) || !x->ek_heads, "kind %d: EV needs a shared Ek", kind);
        CHECK(!((t & RP_TERM_BUCKET) && (t & RP_TERM_SLOPE)), "kind %d: one bias term", kind);
        CHECK(!(t & RP_TERM_BUCKET) == !(x->uses & RP_USES_BUCKETS), "kind %d: buckets", kind);
        CHECK((x->ek_rows != RP_ROWS_NONE) == !!(t & RP_TERM_EK) &&
                  (x->eq_rows != RP_ROWS_NONE) == !!(t & RP_TERM_EQ),
              "kind %d: rows for EK and EQ", kind);
        CHECK(!(t & RP_TERM_EK) || x->ek_sign == 1 || x->ek_sign == -1, "kind %d: ek_sign", kind);
        CHECK(!(t & RP_TERM_EQ) || x->eq_sign == 1 || x->eq_sign == -1, "kind %d: eq_sign", kind);
        CHECK(x->ek_rows != RP_ROWS_DISTANCE || x->ek_sign == 1, "kind %d: distance rows", kind);
        int clip = x->ek_rows == RP_ROWS_CLIP || x->ek_rows == RP_ROWS_CLIP2 ||
                   x->eq_rows == RP_ROWS_CLIP || x->eq_rows == RP_ROWS_CLIP2;
        CHECK(clip == !!(x->uses & RP_USES_CLIP), "kind %d: rel_clip read where rows clip", kind);
        int shared = 0, given[RP_TAB_COUNT] = {0};
        for (int i = 0; i < x->nparams; i++) {
            const rp_rel_param *p = &x->params[i];
            if (p->use == RP_PARAM_SHARED) {
                shared++;
                continue;
            }
            given[p->table]++;
            if (p->use != RP_PARAM_TABLE)
                CHECK(p->rows == RP_DIM_C && p->cols == RP_DIM_C, "kind %d: %s is [C, C]", kind,
                      p->name);
            if (p->use == RP_PARAM_PROJ_SHARED) CHECK(shared == 1, "kind %d: P first", kind);
        }
        CHECK(shared <= 1 && x->nparams <= RP_REL_MAX_PARAMS, "kind %d: params", kind);
        for (int i = 0; i < RP_TAB_COUNT; i++)
            CHECK((tabs >> i & 1) ? given[i] == 1 && x->sym[i] != NULL : given[i] == 0,
                  "kind %d: table %d has one parameter and a symbol", kind, i);
    }
    CHECK(rp_rel_of(RP_REL_COUNT) == NULL && rp_rel_of((rp_rel_kind)-1) == NULL, "out of range");
    CHECK(rp_rel_of(RP_REL_NONE)->terms == 0, "none adds nothing");
}

int main(void)
{
    test_kind_rows();
    test_buckets();
    test_errors();
    test_grad_small();
    test_blocks();
    test_threads();
    test_decode();
    test_tensor_call();
    return check_summary("test_attention_rel");
}
