/* Causal linear attention (core/nn/linear_attention.h) against a double-precision reference that
 * evaluates the header's formulas literally, pair by pair (O(T^2), no recurrence), with its own
 * rotation code:
 *   phi(x) = x + 1 (x > 0), exp(x) (x <= 0); positions n = q_offset + t for queries and keys;
 *   none:          w_nm = phi(q_n) . phi(k_m),             den_n = sum_{m<=n} w_nm + eps
 *   rope after:    w_nm = (R_n phi(q_n)) . (R_m phi(k_m)), den_n = sum_{m<=n} phi(q_n).phi(k_m) + eps
 *   rope before:   w_nm = phi(R_n q_n) . phi(R_m k_m),     den_n = sum_{m<=n} w_nm + eps
 *   out_n = sum_{m<=n} w_nm v_m / den_n  (rope, none)
 *   roper (either placement): out_n = R_{-n} sum_{m<=n} w_nm R_m v_m / den_n
 * R_p rotates the first d_rot features by p * base^(-2i/d_rot) (half or interleaved pairs).
 * Checked: the forward in every mode (both pairings, partial d_rot, D != Dv, B = 2, H = 3,
 * q_offset > 0, fused strided rows with padding), the relative-position property of the "after"
 * placement and eq. 19's explicit form, the backward against central finite differences of the
 * reference (accumulating onto pre-filled fused gradients), bitwise independence of the thread
 * count, the recurrent state (prefix + single tokens == one call), rp_linattn_weights and
 * min_den, and rp_linattn_check's errors.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "linear_attention.h"

static uint64_t rng_state = 1618;

typedef struct {
    rp_pe pe;
    rp_lin_placement pl;
    const char *name;
} mode;

static const mode modes[5] = {
    {RP_PE_NONE, RP_LIN_AFTER, "none"},
    {RP_PE_ROPE, RP_LIN_AFTER, "rope/after"},
    {RP_PE_ROPE, RP_LIN_BEFORE, "rope/before"},
    {RP_PE_ROPER, RP_LIN_AFTER, "roper/after"},
    {RP_PE_ROPER, RP_LIN_BEFORE, "roper/before"},
};

static int is_rot_qk(rp_pe pe) { return pe == RP_PE_ROPE || pe == RP_PE_ROPER; }

/* ---- the reference ---------------------------------------------------------------------------- */

#define REF_MAX_D 16

static double ref_phi(double x) { return x > 0.0 ? x + 1.0 : exp(x); }

/* Rotates the first d_rot features of x in place by pos * base^(-2j/d_rot), in double. */
static void ref_rot(double *x, int64_t d_rot, double base, rp_pairing pairing, double pos)
{
    int64_t h = d_rot / 2;
    for (int64_t j = 0; j < h; j++) {
        double ang = pos * pow(base, -2.0 * (double)j / (double)d_rot);
        double c = cos(ang), s = sin(ang);
        int64_t a = pairing == RP_PAIR_HALF ? j : 2 * j, b = pairing == RP_PAIR_HALF ? j + h : 2 * j + 1;
        double xa = x[a], xb = x[b];
        x[a] = xa * c - xb * s;
        x[b] = xb * c + xa * s;
    }
}

/* Numerator features num and denominator features den of the row x (D) at position pos. */
static void ref_feat(double *num, double *den, const double *x, int64_t D,
                     const rp_linattn_cfg *cfg, double pos)
{
    const rp_pe_scheme *s = &cfg->scheme;
    if (!is_rot_qk(s->pe)) {
        for (int64_t f = 0; f < D; f++) num[f] = den[f] = ref_phi(x[f]);
    } else if (cfg->placement == RP_LIN_AFTER) {
        for (int64_t f = 0; f < D; f++) num[f] = den[f] = ref_phi(x[f]);
        ref_rot(num, s->d_rot_q, s->base, s->pairing, pos);
    } else {
        for (int64_t f = 0; f < D; f++) num[f] = x[f];
        ref_rot(num, s->d_rot_q, s->base, s->pairing, pos);
        for (int64_t f = 0; f < D; f++) den[f] = num[f] = ref_phi(num[f]);
    }
}

typedef struct {
    int64_t B, T, H, D, Dv;
} dims;

/* Head (b, h) of contiguous double q [B,T,H,D], k [B,T,H,D], v [B,T,H,Dv]: o [T][Dv], and when
 * not NULL the weights w [T][T] (0 above the diagonal) and den [T]. The features of each key and
 * the (rotated) value of each position are computed once, before the sums over the pairs: the
 * same values as computing them afresh for every pair, without O(T^2) calls of pow, sin and cos
 * (which dominated the test, most of all under qemu-user). */
static void ref_head(double *o, double *w, double *den, const double *q, const double *k,
                     const double *v, dims d, const rp_linattn_cfg *cfg, int64_t b, int64_t h)
{
    double qn[REF_MAX_D], qd[REF_MAX_D], acc[REF_MAX_D];
    if (d.D > REF_MAX_D || d.Dv > REF_MAX_D) {
        printf("FATAL: reference limits exceeded\n");
        exit(2);
    }
    /* per position m: the key's numerator and denominator features and the value (rotated for
     * roper) */
    double *kn = malloc(sizeof(double) * (size_t)(d.T * REF_MAX_D));
    double *kd = malloc(sizeof(double) * (size_t)(d.T * REF_MAX_D));
    double *vr = malloc(sizeof(double) * (size_t)(d.T * REF_MAX_D));
    if (!kn || !kd || !vr) {
        printf("FATAL: out of memory\n");
        exit(2);
    }
    for (int64_t m = 0; m < d.T; m++) {
        double pm = (double)(cfg->q_offset + m);
        ref_feat(kn + m * REF_MAX_D, kd + m * REF_MAX_D, k + ((b * d.T + m) * d.H + h) * d.D, d.D,
                 cfg, pm);
        double *vm = vr + m * REF_MAX_D;
        for (int64_t j = 0; j < d.Dv; j++) vm[j] = v[((b * d.T + m) * d.H + h) * d.Dv + j];
        if (cfg->scheme.pe == RP_PE_ROPER)
            ref_rot(vm, cfg->scheme.d_rot_v, cfg->scheme.base, cfg->scheme.pairing, pm);
    }
    for (int64_t n = 0; n < d.T; n++) {
        double pn = (double)(cfg->q_offset + n);
        ref_feat(qn, qd, q + ((b * d.T + n) * d.H + h) * d.D, d.D, cfg, pn);
        double dn = 0.0;
        for (int64_t j = 0; j < d.Dv; j++) acc[j] = 0.0;
        for (int64_t m = 0; m < d.T; m++) {
            if (m > n) {
                if (w) w[n * d.T + m] = 0.0;
                continue;
            }
            const double *knm = kn + m * REF_MAX_D, *kdm = kd + m * REF_MAX_D;
            const double *vm = vr + m * REF_MAX_D;
            double wnm = 0.0, dd = 0.0;
            for (int64_t f = 0; f < d.D; f++) {
                wnm += qn[f] * knm[f];
                dd += qd[f] * kdm[f];
            }
            dn += dd;
            if (w) w[n * d.T + m] = wnm;
            for (int64_t j = 0; j < d.Dv; j++) acc[j] += wnm * vm[j];
        }
        dn += cfg->eps;
        if (den) den[n] = dn;
        double *on = o + n * d.Dv;
        for (int64_t j = 0; j < d.Dv; j++) on[j] = acc[j] / dn;
        if (cfg->scheme.pe == RP_PE_ROPER)
            ref_rot(on, cfg->scheme.d_rot_o, cfg->scheme.base, cfg->scheme.pairing, -pn);
    }
    free(kn);
    free(kd);
    free(vr);
}

/* RoFormer eq. 19 in its explicit relative form (placement after): 
 * out_n = sum_m phi(q_n)^T R_{m-n} phi(k_m) v~_m / den_n, v~_m = R_{m-n} v_m for roper, v_m
 * for rope. */
static void ref_head_relative(double *o, const double *q, const double *k, const double *v,
                              dims d, const rp_linattn_cfg *cfg, int64_t b, int64_t h)
{
    double fq[REF_MAX_D], fk[REF_MAX_D], vr[REF_MAX_D];
    for (int64_t n = 0; n < d.T; n++) {
        for (int64_t f = 0; f < d.D; f++) fq[f] = ref_phi(q[((b * d.T + n) * d.H + h) * d.D + f]);
        double *on = o + n * d.Dv, dn = cfg->eps;
        for (int64_t j = 0; j < d.Dv; j++) on[j] = 0.0;
        for (int64_t m = 0; m <= n; m++) {
            for (int64_t f = 0; f < d.D; f++) fk[f] = ref_phi(k[((b * d.T + m) * d.H + h) * d.D + f]);
            double un = 0.0;
            for (int64_t f = 0; f < d.D; f++) un += fq[f] * fk[f];
            dn += un;
            ref_rot(fk, cfg->scheme.d_rot_k, cfg->scheme.base, cfg->scheme.pairing, (double)(m - n));
            double wnm = 0.0;
            for (int64_t f = 0; f < d.D; f++) wnm += fq[f] * fk[f];
            for (int64_t j = 0; j < d.Dv; j++) vr[j] = v[((b * d.T + m) * d.H + h) * d.Dv + j];
            if (cfg->scheme.pe == RP_PE_ROPER)
                ref_rot(vr, cfg->scheme.d_rot_v, cfg->scheme.base, cfg->scheme.pairing,
                        (double)(m - n));
            for (int64_t j = 0; j < d.Dv; j++) on[j] += wnm * vr[j];
        }
        for (int64_t j = 0; j < d.Dv; j++) on[j] /= dn;
    }
}

/* ---- problems on a fused, padded layout ------------------------------------------------------
 * qkv rows [B*T][ld] with q at column 0, k at H*D, v at 2*H*D and `pad` unused columns after
 * them; dL/dout G and out rows [B*T][ldo] with ldo = H*Dv + pado. */

typedef struct {
    dims d;
    int64_t ld, ldo, nrow, HD, HDv;
    float *qkv, *G;
    double *qd, *kd, *vd, *Gd; /* contiguous double copies [B,T,H,W] */
} problem;

static float *rand_floats(int64_t n, double lo, double hi)
{
    return check_rand_floats(&rng_state, n, lo, hi);
}

/* Columns off .. off+HW-1 of the nrow rows of src (row stride ld) into a contiguous double
 * array. */
static double *gather_d(const float *src, int64_t nrow, int64_t ld, int64_t off, int64_t HW)
{
    double *p = malloc(sizeof(double) * (size_t)(nrow * HW > 0 ? nrow * HW : 1));
    for (int64_t r = 0; r < nrow; r++)
        for (int64_t i = 0; i < HW; i++) p[r * HW + i] = (double)src[r * ld + off + i];
    return p;
}

static void problem_refresh(problem *p)
{
    free(p->qd);
    free(p->kd);
    free(p->vd);
    free(p->Gd);
    p->qd = gather_d(p->qkv, p->nrow, p->ld, 0, p->HD);
    p->kd = gather_d(p->qkv, p->nrow, p->ld, p->HD, p->HD);
    p->vd = gather_d(p->qkv, p->nrow, p->ld, 2 * p->HD, p->HDv);
    p->Gd = gather_d(p->G, p->nrow, p->ldo, 0, p->HDv);
}

static problem problem_new(dims d, int64_t pad, int64_t pado, double qk_range)
{
    problem p;
    memset(&p, 0, sizeof p);
    p.d = d;
    p.HD = d.H * d.D;
    p.HDv = d.H * d.Dv;
    p.ld = 2 * p.HD + p.HDv + pad;
    p.ldo = p.HDv + pado;
    p.nrow = d.B * d.T;
    p.qkv = rand_floats(p.nrow * p.ld, -qk_range, qk_range);
    for (int64_t r = 0; r < p.nrow; r++) /* v in [-1, 1) */
        for (int64_t i = 0; i < p.HDv; i++)
            p.qkv[r * p.ld + 2 * p.HD + i] = (float)check_rand(&rng_state, -1.0, 1.0);
    p.G = rand_floats(p.nrow * p.ldo, -1.0, 1.0);
    problem_refresh(&p);
    return p;
}

static void problem_free(problem *p)
{
    free(p->qkv);
    free(p->G);
    free(p->qd);
    free(p->kd);
    free(p->vd);
    free(p->Gd);
}

/* The reference forward of the whole problem: out [B,T,H,Dv] contiguous. */
static double *ref_forward(const problem *p, const rp_linattn_cfg *cfg)
{
    dims d = p->d;
    double *out = malloc(sizeof(double) * (size_t)(p->nrow * p->HDv));
    double *o = malloc(sizeof(double) * (size_t)(d.T * d.Dv));
    for (int64_t b = 0; b < d.B; b++)
        for (int64_t h = 0; h < d.H; h++) {
            ref_head(o, NULL, NULL, p->qd, p->kd, p->vd, d, cfg, b, h);
            for (int64_t t = 0; t < d.T; t++)
                memcpy(out + ((b * d.T + t) * d.H + h) * d.Dv, o + t * d.Dv,
                       sizeof(double) * (size_t)d.Dv);
        }
    free(o);
    return out;
}

static double maxabs_d(const double *x, int64_t n)
{
    double m = 0.0;
    for (int64_t i = 0; i < n; i++) m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

/* The kernel's results: out rows [nrow][ldo] (pre-filled with a sentinel), min_den, the fused
 * gradient rows [nrow][ld] (starting from dqkv0, or zeros). */
typedef struct {
    float *out, *dqkv;
    float min_den;
} kres;

#define SENTINEL 12345.0f

static kres run_kernel(const problem *p, const rp_linattn_cfg *cfg, int nt, const float *dqkv0,
                       int backward)
{
    dims d = p->d;
    kres r;
    int64_t ns = rp_linattn_scratch_floats(d.T, d.D, d.Dv, nt);
    float *scratch = rand_floats(ns, -1e3, 1e3); /* garbage: the kernels must not read it first */
    r.out = malloc(sizeof(float) * (size_t)(p->nrow * p->ldo > 0 ? p->nrow * p->ldo : 1));
    for (int64_t i = 0; i < p->nrow * p->ldo; i++) r.out[i] = SENTINEL;
    r.min_den = -1.0f;
    const float *q = p->qkv, *k = p->qkv + p->HD, *v = p->qkv + 2 * p->HD;
    rp_attn_io io = {.B = d.B, .T = d.T, .S = d.T, .H = d.H, .D = d.D, .Dv = d.Dv, .q = q, .k = k,
                     .v = v, .ldq = p->ld, .ldk = p->ld, .ldv = p->ld, .out = r.out, .ldo = p->ldo,
                     .scratch = scratch, .nthreads = nt, .min_den = &r.min_den};
    rp_linattn_forward(&io, cfg);
    r.dqkv = NULL;
    if (backward) {
        int64_t n = p->nrow * p->ld;
        r.dqkv = dqkv0 ? check_copy_floats(dqkv0, n) : calloc((size_t)(n > 0 ? n : 1), sizeof(float));
        free(scratch);
        scratch = rand_floats(ns, -1e3, 1e3);
        rp_attn_io bio = {.B = d.B, .T = d.T, .S = d.T, .H = d.H, .D = d.D, .Dv = d.Dv, .q = q,
                          .k = k, .v = v, .ldq = p->ld, .ldk = p->ld, .ldv = p->ld, .ldo = p->ldo,
                          .dout = p->G, .dq = r.dqkv, .dk = r.dqkv + p->HD,
                          .dv = r.dqkv + 2 * p->HD, .scratch = scratch, .nthreads = nt};
        rp_linattn_backward(&bio, cfg);
    }
    free(scratch);
    return r;
}

static void kres_free(kres *r)
{
    free(r->out);
    free(r->dqkv);
}

static rp_linattn_cfg make_cfg(mode m, int64_t D, int64_t Dv, rp_pairing pairing, int partial,
                               int64_t q_offset)
{
    rp_linattn_cfg c = rp_linattn_cfg_default(m.pe, D, Dv);
    c.placement = m.pl;
    c.scheme.pairing = pairing;
    c.q_offset = q_offset;
    if (partial) check_scheme_widths(&c.scheme, D >= 6 ? D - 4 : 2, Dv >= 4 ? Dv - 2 : 2);
    return c;
}

static void cfg_label(char *buf, size_t n, const char *what, mode m, const rp_linattn_cfg *c, dims d)
{
    snprintf(buf, n, "%s %s %s d_rot_qk=%lld d_rot_v=%lld B=%lld T=%lld H=%lld D=%lld Dv=%lld "
             "q_offset=%lld", what, m.name,
             c->scheme.pairing == RP_PAIR_HALF ? "half" : "interleaved",
             (long long)c->scheme.d_rot_q, (long long)c->scheme.d_rot_v, (long long)d.B, (long long)d.T,
             (long long)d.H, (long long)d.D, (long long)d.Dv, (long long)c->q_offset);
}

/* Output rows of the kernel (stride ldo) into a contiguous float array; counts padding entries
 * that are not the sentinel any more. */
static float *gather_out(const problem *p, const float *out, int64_t *pad_written)
{
    float *g = malloc(sizeof(float) * (size_t)(p->nrow * p->HDv > 0 ? p->nrow * p->HDv : 1));
    int64_t bad = 0;
    for (int64_t r = 0; r < p->nrow; r++) {
        memcpy(g + r * p->HDv, out + r * p->ldo, sizeof(float) * (size_t)p->HDv);
        for (int64_t i = p->HDv; i < p->ldo; i++) bad += out[r * p->ldo + i] != SENTINEL;
    }
    if (pad_written) *pad_written = bad;
    return g;
}

/* ---- forward against the reference ---------------------------------------------------------- */

#define FWD_RTOL 1e-5 /* relative to the largest |out| of the case */

static double worst_fwd_rel_ = 0.0;

static void forward_case(const problem *p, mode m, const rp_linattn_cfg *cfg, int nt)
{
    char label[256];
    cfg_label(label, sizeof label, "forward", m, cfg, p->d);
    CHECK_STATUS(rp_linattn_check(p->d.D, p->d.Dv, cfg), RP_OK, NULL);
    double *want = ref_forward(p, cfg);
    kres r = run_kernel(p, cfg, nt, NULL, 0);
    int64_t pad_bad = 0;
    float *got = gather_out(p, r.out, &pad_bad);
    int64_t n = p->nrow * p->HDv;
    double scale = maxabs_d(want, n);
    double maxd = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]);
        maxd = e > maxd ? e : maxd;
    }
    if (scale > 0 && maxd / scale > worst_fwd_rel_) worst_fwd_rel_ = maxd / scale;
    CHECK_CLOSE(got, want, n, FWD_RTOL * scale, label);
    CHECK(pad_bad == 0, "%s: %lld padding entries of out written", label, (long long)pad_bad);
    free(want);
    free(got);
    kres_free(&r);
}

static void test_forward(void)
{
    dims d = {2, 9, 3, 8, 6};
    const int64_t offsets[3] = {0, 7, 5000};
    for (int oi = 0; oi < 3; oi++) {
        problem p = problem_new(d, 3, 2, 2.0);
        for (int mi = 0; mi < 5; mi++)
            for (int pm = 0; pm <= 1; pm++)
                for (int partial = 0; partial <= 1; partial++) {
                    if (oi == 2 && partial) continue;
                    rp_linattn_cfg cfg = make_cfg(modes[mi], d.D, d.Dv, (rp_pairing)pm, partial,
                                                  offsets[oi]);
                    forward_case(&p, modes[mi], &cfg, 1 + (mi + pm) % 2);
                }
        problem_free(&p);
    }
    /* T = 64, another base, D < Dv; T = 1 with D = Dv = 2 */
    {
        dims d2 = {1, 64, 2, 4, 10};
        problem p = problem_new(d2, 0, 0, 1.5);
        for (int mi = 0; mi < 5; mi++) {
            rp_linattn_cfg cfg = make_cfg(modes[mi], d2.D, d2.Dv, RP_PAIR_INTERLEAVED, 1, 3);
            cfg.scheme.base = 500.0;
            forward_case(&p, modes[mi], &cfg, 2);
        }
        problem_free(&p);
        dims d3 = {2, 1, 1, 2, 2};
        problem p3 = problem_new(d3, 1, 1, 2.0);
        for (int mi = 0; mi < 5; mi++) {
            rp_linattn_cfg cfg = make_cfg(modes[mi], 2, 2, RP_PAIR_HALF, 0, 11);
            forward_case(&p3, modes[mi], &cfg, 1);
        }
        problem_free(&p3);
    }
    printf("  forward: worst |out - ref| / max|ref| %.3g (tol %.3g)\n", worst_fwd_rel_, FWD_RTOL);

    /* sinusoidal and learned are plain linear attention: bitwise the same as none */
    {
        problem p = problem_new(d, 3, 2, 2.0);
        rp_linattn_cfg c0 = rp_linattn_cfg_default(RP_PE_NONE, d.D, d.Dv);
        c0.q_offset = 4;
        kres r0 = run_kernel(&p, &c0, 2, NULL, 1);
        for (int pe = RP_PE_SINUSOIDAL; pe <= RP_PE_LEARNED; pe++) {
            rp_linattn_cfg c = c0;
            c.scheme = check_scheme((rp_pe)pe, 0, 0);
            c.placement = RP_LIN_BEFORE; /* ignored by plain modes */
            CHECK_STATUS(rp_linattn_check(d.D, d.Dv, &c), RP_OK, NULL);
            kres r = run_kernel(&p, &c, 2, NULL, 1);
            CHECK(memcmp(r.out, r0.out, sizeof(float) * (size_t)(p.nrow * p.ldo)) == 0 &&
                      memcmp(r.dqkv, r0.dqkv, sizeof(float) * (size_t)(p.nrow * p.ld)) == 0,
                  "pe %s gives bitwise the results of none", rp_pe_name((rp_pe)pe));
            kres_free(&r);
        }
        kres_free(&r0);
        problem_free(&p);
    }
}

/* ---- relative positions ----------------------------------------------------------------------
 * After placement: w_nm depends on n - m only and den is unrotated, so the same inputs at
 * shifted positions give the same output (rope and roper); eq. 19's explicit form
 * sum_m phi(q_n)^T R_{m-n} phi(k_m) v_m / den equals the rotated form. Before placement is not
 * relative: a shift changes the output. */
static void test_relative(void)
{
    dims d = {2, 10, 2, 8, 6};
    problem p = problem_new(d, 1, 0, 2.0);
    const int64_t shifts[3] = {5, 1000, 100000};
    for (int mi = 1; mi < 5; mi++)
        for (int pm = 0; pm <= 1; pm++) {
            mode m = modes[mi];
            rp_linattn_cfg c0 = make_cfg(m, d.D, d.Dv, (rp_pairing)pm, 1, 0);
            kres r0 = run_kernel(&p, &c0, 1, NULL, 0);
            float *o0 = gather_out(&p, r0.out, NULL);
            int64_t n = p.nrow * p.HDv;
            double scale = 0.0;
            for (int64_t i = 0; i < n; i++) scale = fabs((double)o0[i]) > scale ? fabs((double)o0[i]) : scale;
            char label[256];
            if (m.pl == RP_LIN_AFTER) {
                /* eq. 19's explicit relative form */
                double *rel = malloc(sizeof(double) * (size_t)n), *o = malloc(sizeof(double) * (size_t)(d.T * d.Dv));
                for (int64_t b = 0; b < d.B; b++)
                    for (int64_t h = 0; h < d.H; h++) {
                        ref_head_relative(o, p.qd, p.kd, p.vd, d, &c0, b, h);
                        for (int64_t t = 0; t < d.T; t++)
                            memcpy(rel + ((b * d.T + t) * d.H + h) * d.Dv, o + t * d.Dv,
                                   sizeof(double) * (size_t)d.Dv);
                    }
                cfg_label(label, sizeof label, "explicit R_{m-n} form (eq. 19) == kernel", m, &c0, d);
                CHECK_CLOSE(o0, rel, n, FWD_RTOL * scale, label);
                free(rel);
                free(o);
            }
            for (int s = 0; s < 3; s++) {
                rp_linattn_cfg c = c0;
                c.q_offset = shifts[s];
                kres r = run_kernel(&p, &c, 2, NULL, 0);
                float *o = gather_out(&p, r.out, NULL);
                if (m.pl == RP_LIN_AFTER) {
                    cfg_label(label, sizeof label, "shifted positions leave out unchanged:", m, &c, d);
                    CHECK_CLOSE(o, o0, n, 1e-6 * scale, label);
                } else {
                    double maxd = 0.0;
                    for (int64_t i = 0; i < n; i++) {
                        double e = fabs((double)o[i] - (double)o0[i]);
                        maxd = e > maxd ? e : maxd;
                    }
                    CHECK(maxd > 1e-3 * scale, "%s %s: placement before is not relative: shift %lld "
                          "should change out (max change %.3g)", m.name,
                          pm ? "interleaved" : "half", (long long)shifts[s], maxd);
                }
                free(o);
                kres_free(&r);
            }
            free(o0);
            kres_free(&r0);
        }
    problem_free(&p);
}

/* ---- backward against finite differences ---------------------------------------------------- */

static double ref_head_loss(const double *q, const double *k, const double *v, const double *G,
                            dims d, const rp_linattn_cfg *cfg, int64_t b, int64_t h)
{
    static double o[64 * REF_MAX_D];
    if (d.T > 64) {
        printf("FATAL: reference loss limited to T <= 64\n");
        exit(2);
    }
    ref_head(o, NULL, NULL, q, k, v, d, cfg, b, h);
    double L = 0.0;
    for (int64_t t = 0; t < d.T; t++)
        for (int64_t j = 0; j < d.Dv; j++) L += o[t * d.Dv + j] * G[((b * d.T + t) * d.H + h) * d.Dv + j];
    return L;
}

#define FD_H 1e-5
/* Gradient tolerance, relative to max(1, largest |gradient| of the case). The kernel computes in
 * double and rounds once to float when adding onto the pre-fill (|pre-fill| <= 1), so its error
 * is a few float ulps of the O(1) values; the central difference in double has truncation error
 * ~ h^2 |L'''| ~ 1e-9 (phi'' jumps at 0, but no input lies within h of 0 here) and rounding
 * ~ 1e-16 / h. A wrong angle, sign or term moves gradients by far more. */
#define GRAD_RTOL 2e-6

static double worst_grad_ = 0.0;

static void grad_case(dims d, mode m, const rp_linattn_cfg *cfg, int nt, double qk_range)
{
    problem p = problem_new(d, 2, 3, qk_range);
    float *P = rand_floats(p.nrow * p.ld, -1.0, 1.0);
    kres r = run_kernel(&p, cfg, nt, P, 1);
    double *x[3] = {p.qd, p.kd, p.vd};
    int64_t W[3] = {d.D, d.D, d.Dv}, off[3] = {0, p.HD, 2 * p.HD};
    const char *names[3] = {"dq", "dk", "dv"};
    for (int j = 0; j < 3; j++) {
        int64_t HW = d.H * W[j], n = p.nrow * HW;
        double *fd = malloc(sizeof(double) * (size_t)n), *got = malloc(sizeof(double) * (size_t)n);
        for (int64_t i = 0; i < n; i++) {
            int64_t row = i / HW, h = (i % HW) / W[j], b = row / d.T;
            double x0 = x[j][i];
            x[j][i] = x0 + FD_H;
            double lp = ref_head_loss(p.qd, p.kd, p.vd, p.Gd, d, cfg, b, h);
            x[j][i] = x0 - FD_H;
            double lm = ref_head_loss(p.qd, p.kd, p.vd, p.Gd, d, cfg, b, h);
            x[j][i] = x0;
            fd[i] = (lp - lm) / (2.0 * FD_H);
            int64_t at = row * p.ld + off[j] + i % HW;
            got[i] = (double)r.dqkv[at] - (double)P[at]; /* accumulated onto the pre-fill */
        }
        double scale = maxabs_d(fd, n), tol = GRAD_RTOL * (scale > 1.0 ? scale : 1.0);
        double maxd = 0.0;
        for (int64_t i = 0; i < n; i++) {
            double e = fabs(got[i] - fd[i]);
            maxd = e > maxd ? e : maxd;
        }
        double rel = maxd / (scale > 1.0 ? scale : 1.0);
        if (rel > worst_grad_) worst_grad_ = rel;
        char label[256], l2[400];
        cfg_label(label, sizeof label, names[j], m, cfg, d);
        snprintf(l2, sizeof l2, "%s (result - pre-fill) vs finite differences, max|fd| %.3g",
                 label, scale);
        CHECK_CLOSE(got, fd, n, tol, l2);
        free(fd);
        free(got);
    }
    /* the padding columns of the fused gradient buffer keep their pre-fill */
    int64_t pad_bad = 0;
    for (int64_t row = 0; row < p.nrow; row++)
        for (int64_t i = 2 * p.HD + p.HDv; i < p.ld; i++)
            pad_bad += memcmp(&r.dqkv[row * p.ld + i], &P[row * p.ld + i], sizeof(float)) != 0;
    CHECK(pad_bad == 0, "%s: %lld padding entries of the fused gradient changed", m.name,
          (long long)pad_bad);
    /* accumulation: pre-filled result == pre-fill + result from zero (up to float rounding) */
    kres rz = run_kernel(&p, cfg, nt, NULL, 1);
    double *sum = malloc(sizeof(double) * (size_t)(p.nrow * p.ld));
    double gmax = 0.0;
    for (int64_t i = 0; i < p.nrow * p.ld; i++) {
        sum[i] = (double)P[i] + (double)rz.dqkv[i];
        gmax = fabs(sum[i]) > gmax ? fabs(sum[i]) : gmax;
    }
    char label[300];
    cfg_label(label, sizeof label, "accumulation: dqkv == pre-fill + dqkv from zero", m, cfg, d);
    CHECK_CLOSE(r.dqkv, sum, p.nrow * p.ld, 2.5e-7 * (gmax > 1.0 ? gmax : 1.0), label);
    free(sum);
    kres_free(&rz);
    kres_free(&r);
    free(P);
    problem_free(&p);
}

static void test_backward(void)
{
    dims d = {2, 6, 3, 6, 4};
    for (int mi = 0; mi < 5; mi++)
        for (int pm = 0; pm <= 1; pm++)
            for (int partial = 0; partial <= 1; partial++) {
                rp_linattn_cfg cfg = make_cfg(modes[mi], d.D, d.Dv, (rp_pairing)pm, partial,
                                              partial ? 9 : 0);
                grad_case(d, modes[mi], &cfg, 1 + partial, 2.0);
            }
    /* longer sequences, one head: T = 64 (sums of many weights), larger offset */
    dims d2 = {1, 64, 1, 4, 4};
    for (int mi = 0; mi < 5; mi++) {
        rp_linattn_cfg cfg = make_cfg(modes[mi], d2.D, d2.Dv, RP_PAIR_INTERLEAVED, 0, 300);
        grad_case(d2, modes[mi], &cfg, 2, 1.5);
    }
    /* head widths that are multiples of the vector width (8 or 16 floats), as the models' heads
     * are: the backward's vectorised recurrences, with an odd row count (D = 15) too */
    const int64_t wide[2][2] = {{16, 16}, {15, 16}};
    for (int wi = 0; wi < 2; wi++) {
        dims d3 = {1, 20, 2, wide[wi][0], wide[wi][1]};
        for (int mi = 0; mi < 5; mi++) {
            rp_linattn_cfg cfg = make_cfg(modes[mi], d3.D, d3.Dv, RP_PAIR_HALF, 0, 3);
            check_scheme_widths(&cfg.scheme, d3.D / 2 * 2, d3.Dv);
            grad_case(d3, modes[mi], &cfg, 2, 2.0);
        }
    }
    printf("  backward: worst |grad - fd| / max(1, max|fd|) %.3g (tol %.3g)\n", worst_grad_,
           GRAD_RTOL);
}

/* ---- threads ---------------------------------------------------------------------------------- */

static int64_t count_diff(const float *a, const float *b, int64_t n)
{
    int64_t c = 0;
    for (int64_t i = 0; i < n; i++) c += memcmp(a + i, b + i, sizeof(float)) != 0;
    return c;
}

/* Every mode of problem p with nthreads 2, 3, 7 gives bitwise the results of 1 thread. */
static void threads_bitwise(const problem *p, const float *P)
{
    dims d = p->d;
    for (int mi = 0; mi < 5; mi++) {
        rp_linattn_cfg cfg = make_cfg(modes[mi], d.D, d.Dv, RP_PAIR_HALF, 1, 2);
        kres r1 = run_kernel(p, &cfg, 1, P, 1);
        const int nts[3] = {2, 3, 7};
        for (int ti = 0; ti < 3; ti++) {
            kres rn = run_kernel(p, &cfg, nts[ti], P, 1);
            int64_t diff = count_diff(r1.out, rn.out, p->nrow * p->ldo) +
                           count_diff(r1.dqkv, rn.dqkv, p->nrow * p->ld) +
                           count_diff(&r1.min_den, &rn.min_den, 1);
            CHECK(diff == 0, "%s D=%lld: nthreads %d differs from 1 thread in %lld values (out, "
                  "dq, dk, dv, min_den)", modes[mi].name, (long long)d.D, nts[ti],
                  (long long)diff);
            kres_free(&rn);
        }
        kres_free(&r1);
    }
}

static void test_threads(void)
{
    dims d = {3, 40, 2, 8, 8};
    problem p = problem_new(d, 5, 1, 2.0);
    float *P = rand_floats(p.nrow * p.ld, -1.0, 1.0);
    threads_bitwise(&p, P);
    /* scratch that starts 4 bytes off an 8-byte boundary (the kernels align their doubles inside
     * the documented size; UBSan checks the alignment) gives the same results */
    {
        rp_linattn_cfg cfg = make_cfg(modes[3], d.D, d.Dv, RP_PAIR_INTERLEAVED, 1, 2);
        kres r1 = run_kernel(&p, &cfg, 2, P, 1);
        int64_t ns = rp_linattn_scratch_floats(d.T, d.D, d.Dv, 2);
        float *buf = rand_floats(ns + 2, -1.0, 1.0);
        float *scr = ((uintptr_t)(void *)buf % 8 == 0) ? buf + 1 : buf;
        float *out = malloc(sizeof(float) * (size_t)(p.nrow * p.ldo));
        for (int64_t i = 0; i < p.nrow * p.ldo; i++) out[i] = SENTINEL;
        float *dqkv = check_copy_floats(P, p.nrow * p.ld), md = 0.0f;
        const float *q = p.qkv, *k = p.qkv + p.HD, *v = p.qkv + 2 * p.HD;
        rp_attn_io io = {.B = d.B, .T = d.T, .S = d.T, .H = d.H, .D = d.D, .Dv = d.Dv, .q = q,
                         .k = k, .v = v, .ldq = p.ld, .ldk = p.ld, .ldv = p.ld, .out = out,
                         .ldo = p.ldo, .dout = p.G, .dq = dqkv, .dk = dqkv + p.HD,
                         .dv = dqkv + 2 * p.HD, .scratch = scr, .nthreads = 2, .min_den = &md};
        rp_linattn_forward(&io, &cfg);
        rp_linattn_backward(&io, &cfg);
        int64_t diff = count_diff(r1.out, out, p.nrow * p.ldo) +
                       count_diff(r1.dqkv, dqkv, p.nrow * p.ld) + count_diff(&r1.min_den, &md, 1);
        CHECK(diff == 0, "scratch at an odd float offset: %lld values differ", (long long)diff);
        free(buf);
        free(out);
        free(dqkv);
        kres_free(&r1);
    }
    free(P);
    problem_free(&p);
    /* D = 16: the backward's vectorised recurrences (widths a multiple of the vector width) */
    {
        dims dw = {3, 24, 2, 16, 16};
        problem pw = problem_new(dw, 5, 1, 2.0);
        float *Pw = rand_floats(pw.nrow * pw.ld, -1.0, 1.0);
        threads_bitwise(&pw, Pw);
        free(Pw);
        problem_free(&pw);
    }
    printf("  threads: nthreads 1/2/3/7 give bitwise identical forward and backward results\n");
}

/* ---- the recurrent state ---------------------------------------------------------------------
 * One call over T positions (state zeroed) == a prefix call of P positions followed by single
 * tokens (T = 1, q_offset = position) and a chunk, each continuing the state. */

/* The operands of a forward over T rows of d.B sequences of fused q, k, v rows x (k at x + H D, v
 * at x + 2 H D, rows ld apart) into out (rows ldo apart), continuing state (NULL: none). */
static rp_attn_io state_io(dims d, int64_t T, const float *x, int64_t ld, float *out, int64_t ldo,
                           double *state, float *scratch, int nt)
{
    int64_t HD = d.H * d.D;
    rp_attn_io io = {.B = d.B, .T = T, .S = T, .H = d.H, .D = d.D, .Dv = d.Dv, .q = x,
                     .k = x + HD, .v = x + 2 * HD, .ldq = ld, .ldk = ld, .ldv = ld, .out = out,
                     .ldo = ldo, .scratch = scratch, .nthreads = nt, .state = state};
    return io;
}

static void test_state(void)
{
    dims d = {2, 12, 3, 6, 4};
    const int64_t P = 5, off = 3;
    problem p = problem_new(d, 2, 1, 2.0);
    int64_t HDv = p.HDv, ld = p.ld, T = d.T;
    int64_t nst = d.B * rp_linattn_state_doubles(d.H, d.D, d.Dv);
    CHECK(rp_linattn_state_doubles(d.H, d.D, d.Dv) == d.H * (d.D * d.Dv + d.D),
          "state doubles per sequence: H * (D * Dv + D)");
    int nt = 2;
    int64_t ns = rp_linattn_scratch_floats(T, d.D, d.Dv, nt);
    float *scratch = rand_floats(ns, -1.0, 1.0);
    for (int mi = 0; mi < 5; mi++)
        for (int pm = 0; pm <= 1; pm++) {
            mode m = modes[mi];
            rp_linattn_cfg cfg = make_cfg(m, d.D, d.Dv, (rp_pairing)pm, pm, off);
            char label[256];
            /* one call, with a zeroed state and with NULL */
            double *st1 = calloc((size_t)nst, sizeof(double));
            float *out1 = malloc(sizeof(float) * (size_t)(p.nrow * HDv));
            float *out0 = malloc(sizeof(float) * (size_t)(p.nrow * HDv));
            float md1 = 0.0f, md0 = 0.0f;
            rp_attn_io io = state_io(d, T, p.qkv, ld, out1, HDv, st1, scratch, nt);
            io.min_den = &md1;
            rp_linattn_forward(&io, &cfg);
            io = state_io(d, T, p.qkv, ld, out0, HDv, NULL, scratch, nt);
            io.min_den = &md0;
            rp_linattn_forward(&io, &cfg);
            CHECK(count_diff(out0, out1, p.nrow * HDv) == 0 && md0 == md1,
                  "%s: a zeroed state gives bitwise the result of state NULL", m.name);

            /* prefix of P positions (copied to a contiguous [B, P] block), a chunk of 3, then
             * single tokens read in place with row stride T * ld (so row b of a one-token call
             * is token t of sequence b) */
            double *st2 = calloc((size_t)nst, sizeof(double));
            float *out2 = malloc(sizeof(float) * (size_t)(p.nrow * HDv));
            float *pre = malloc(sizeof(float) * (size_t)(d.B * P * ld));
            float *pout = malloc(sizeof(float) * (size_t)(d.B * P * HDv));
            for (int64_t b = 0; b < d.B; b++)
                memcpy(pre + b * P * ld, p.qkv + b * T * ld, sizeof(float) * (size_t)(P * ld));
            rp_linattn_cfg c = cfg;
            io = state_io(d, P, pre, ld, pout, HDv, st2, scratch, nt);
            rp_linattn_forward(&io, &c);
            for (int64_t b = 0; b < d.B; b++)
                memcpy(out2 + b * T * HDv, pout + b * P * HDv, sizeof(float) * (size_t)(P * HDv));
            int64_t t = P;
            while (t < T) {
                /* tokens P+2 .. P+4 as one chunk of 3 (copied: a chunk is not one row per b) */
                int64_t len = t == P + 2 ? 3 : 1;
                if (t + len > T) len = T - t;
                c.q_offset = off + t;
                if (len == 1) {
                    const float *x = p.qkv + t * ld;
                    io = state_io(d, 1, x, T * ld, out2 + t * HDv, T * HDv, st2, scratch, nt);
                    rp_linattn_forward(&io, &c);
                } else {
                    float *ch = malloc(sizeof(float) * (size_t)(d.B * len * ld));
                    float *co = malloc(sizeof(float) * (size_t)(d.B * len * HDv));
                    for (int64_t b = 0; b < d.B; b++)
                        memcpy(ch + b * len * ld, p.qkv + (b * T + t) * ld,
                               sizeof(float) * (size_t)(len * ld));
                    io = state_io(d, len, ch, ld, co, HDv, st2, scratch, nt);
                    rp_linattn_forward(&io, &c);
                    for (int64_t b = 0; b < d.B; b++)
                        memcpy(out2 + (b * T + t) * HDv, co + b * len * HDv,
                               sizeof(float) * (size_t)(len * HDv));
                    free(ch);
                    free(co);
                }
                t += len;
            }
            double scale = 0.0;
            for (int64_t i = 0; i < p.nrow * HDv; i++)
                scale = fabs((double)out1[i]) > scale ? fabs((double)out1[i]) : scale;
            cfg_label(label, sizeof label, "state: prefix + chunk + single tokens == one call", m,
                      &cfg, d);
            CHECK_CLOSE(out2, out1, p.nrow * HDv, 1e-6 * scale, label);
            int64_t nbit = count_diff(out1, out2, p.nrow * HDv);
            double sdiff = 0.0, smax = 0.0;
            for (int64_t i = 0; i < nst; i++) {
                sdiff = fabs(st1[i] - st2[i]) > sdiff ? fabs(st1[i] - st2[i]) : sdiff;
                smax = fabs(st1[i]) > smax ? fabs(st1[i]) : smax;
            }
            CHECK(sdiff <= 1e-12 * smax, "%s: final states differ by %.3g (max |S|, |z| %.3g)",
                  m.name, sdiff, smax);
            CHECK(nbit == 0, "%s %s: stepwise outputs bitwise equal to one call (%lld differ)",
                  m.name, pm ? "interleaved" : "half", (long long)nbit);
            free(st1);
            free(st2);
            free(out0);
            free(out1);
            free(out2);
            free(pre);
            free(pout);
        }
    free(scratch);
    problem_free(&p);
}

/* ---- rp_linattn_weights and min_den ----------------------------------------------------------- */
static void test_weights(void)
{
    dims d = {2, 11, 3, 8, 6};
    problem p = problem_new(d, 1, 0, 2.0);
    for (int mi = 0; mi < 5; mi++)
        for (int pm = 0; pm <= 1; pm++) {
            mode m = modes[mi];
            rp_linattn_cfg cfg = make_cfg(m, d.D, d.Dv, (rp_pairing)pm, pm, 4);
            int64_t T = d.T, H = d.H;
            double *w = malloc(sizeof(double) * (size_t)(H * T * T));
            double *den = malloc(sizeof(double) * (size_t)(H * T));
            double *ww = malloc(sizeof(double) * (size_t)(H * T * T));
            double *wd = malloc(sizeof(double) * (size_t)(H * T));
            double *o = malloc(sizeof(double) * (size_t)(T * d.Dv));
            double dmin = HUGE_VAL;
            for (int64_t b = 0; b < d.B; b++) {
                for (int64_t i = 0; i < H * T * T; i++) w[i] = NAN;
                for (int64_t i = 0; i < H * T; i++) den[i] = NAN;
                const float *q = p.qkv + b * T * p.ld, *k = q + p.HD;
                rp_linattn_weights(w, den, q, p.ld, k, p.ld, T, H, d.D, &cfg);
                for (int64_t h = 0; h < H; h++)
                    ref_head(o, ww + h * T * T, wd + h * T, p.qd, p.kd, p.vd, d, &cfg, b, h);
                double ws = maxabs_d(ww, H * T * T), ds = maxabs_d(wd, H * T);
                char label[256], l2[400];
                cfg_label(label, sizeof label, "rp_linattn_weights", m, &cfg, d);
                snprintf(l2, sizeof l2, "%s b=%lld: w", label, (long long)b);
                CHECK_CLOSE(w, ww, H * T * T, 1e-12 * ws, l2);
                snprintf(l2, sizeof l2, "%s b=%lld: den", label, (long long)b);
                CHECK_CLOSE(den, wd, H * T, 1e-12 * ds, l2);
                int64_t upper = 0, neg = 0;
                for (int64_t h = 0; h < H; h++)
                    for (int64_t n = 0; n < T; n++) {
                        for (int64_t mm = n + 1; mm < T; mm++) upper += w[(h * T + n) * T + mm] != 0.0;
                        for (int64_t mm = 0; mm <= n; mm++) neg += w[(h * T + n) * T + mm] < 0.0;
                        dmin = den[h * T + n] < dmin ? den[h * T + n] : dmin;
                    }
                CHECK(upper == 0, "%s: %lld weights above the diagonal are not 0", label,
                      (long long)upper);
                if (m.pe == RP_PE_ROPE && m.pl == RP_LIN_AFTER && b == 0)
                    printf("  %s %s: %lld of %lld weights negative (rotated numerator)\n", m.name,
                           pm ? "interleaved" : "half", (long long)neg, (long long)(H * T * (T + 1) / 2));
                if (m.pl == RP_LIN_BEFORE || m.pe == RP_PE_NONE)
                    CHECK(neg == 0, "%s: phi > 0 makes every weight positive (%lld negative)",
                          m.name, (long long)neg);
            }
            kres r = run_kernel(&p, &cfg, 2, NULL, 0);
            CHECK(fabs((double)r.min_den - dmin) <= 1e-6 * dmin,
                  "%s %s: min_den %.9g == min den of rp_linattn_weights %.9g", m.name,
                  pm ? "interleaved" : "half", (double)r.min_den, dmin);
            kres_free(&r);
            free(w);
            free(den);
            free(ww);
            free(wd);
            free(o);
        }
    problem_free(&p);

    /* T = 1030: rp_linattn_weights works through keys in blocks of 1024 */
    {
        dims d2 = {1, 1030, 1, 4, 2};
        problem p2 = problem_new(d2, 0, 0, 2.0);
        int64_t T = d2.T;
        double *w = malloc(sizeof(double) * (size_t)(T * T)), *den = malloc(sizeof(double) * (size_t)T);
        double *ww = malloc(sizeof(double) * (size_t)(T * T)), *wd = malloc(sizeof(double) * (size_t)T);
        double *o = malloc(sizeof(double) * (size_t)(T * d2.Dv));
        for (int mi = 1; mi <= 2; mi++) {
            rp_linattn_cfg cfg = make_cfg(modes[mi], d2.D, d2.Dv, RP_PAIR_INTERLEAVED, 1, 1);
            rp_linattn_weights(w, den, p2.qkv, p2.ld, p2.qkv + p2.HD, p2.ld, T, 1, d2.D, &cfg);
            ref_head(o, ww, wd, p2.qd, p2.kd, p2.vd, d2, &cfg, 0, 0);
            char label[256], l2[400];
            cfg_label(label, sizeof label, "rp_linattn_weights (key blocks)", modes[mi], &cfg, d2);
            snprintf(l2, sizeof l2, "%s: w", label);
            CHECK_CLOSE(w, ww, T * T, 1e-12 * maxabs_d(ww, T * T), l2);
            snprintf(l2, sizeof l2, "%s: den", label);
            CHECK_CLOSE(den, wd, T, 1e-12 * maxabs_d(wd, T), l2);
        }
        free(w);
        free(den);
        free(ww);
        free(wd);
        free(o);
        problem_free(&p2);
    }

    /* denominators at eps: phi(q) = e^-60 ~ 1e-26 leaves den = eps; out stays finite */
    {
        dims d2 = {1, 5, 2, 4, 4};
        problem q2 = problem_new(d2, 0, 0, 1.0);
        for (int64_t r = 0; r < q2.nrow; r++)
            for (int64_t i = 0; i < q2.HD; i++) q2.qkv[r * q2.ld + i] = -60.0f;
        problem_refresh(&q2);
        const double epss[2] = {RP_LINATTN_EPS, 1e-3};
        for (int e = 0; e < 2; e++)
            for (int mi = 0; mi < 5; mi++) {
                rp_linattn_cfg cfg = make_cfg(modes[mi], d2.D, d2.Dv, RP_PAIR_HALF, 0, 0);
                if (modes[mi].pl == RP_LIN_BEFORE) continue; /* rotation mixes -60 with -60 */
                cfg.eps = epss[e];
                kres r = run_kernel(&q2, &cfg, 1, NULL, 0);
                CHECK(r.min_den == (float)cfg.eps, "%s eps %g: min_den %.9g == eps", modes[mi].name,
                      cfg.eps, (double)r.min_den);
                int64_t nonfinite = 0;
                for (int64_t i = 0; i < q2.nrow * q2.ldo; i++) nonfinite += !isfinite(r.out[i]);
                CHECK(nonfinite == 0, "%s: %lld non-finite outputs at den = eps", modes[mi].name,
                      (long long)nonfinite);
                forward_case(&q2, modes[mi], &cfg, 1);
                kres_free(&r);
            }
        problem_free(&q2);
    }
}

/* ---- names, defaults, errors ------------------------------------------------------------------ */
static void test_names_and_errors(void)
{
    CHECK(strcmp(rp_lin_placement_name(RP_LIN_AFTER), "after") == 0 &&
              strcmp(rp_lin_placement_name(RP_LIN_BEFORE), "before") == 0,
          "placement names");
    CHECK(strcmp(rp_lin_placement_name((rp_lin_placement)5), "?") == 0, "invalid placement: ?");
    CHECK(rp_lin_placement_from_name("after") == RP_LIN_AFTER &&
              rp_lin_placement_from_name("before") == RP_LIN_BEFORE &&
              rp_lin_placement_from_name("After") == -1 && rp_lin_placement_from_name("") == -1,
          "placement from name");
    rp_linattn_cfg c0 = rp_linattn_cfg_default(RP_PE_ROPER, 8, 6);
    const rp_pe_scheme *s0 = &c0.scheme;
    CHECK(s0->pe == RP_PE_ROPER && c0.placement == RP_LIN_AFTER && s0->base == 10000.0 &&
              s0->pairing == RP_PAIR_HALF && s0->d_rot_q == 8 && s0->d_rot_k == 8 &&
              s0->d_rot_v == 6 && s0->d_rot_o == 6 && s0->rotate == RP_ROT_ALL &&
              c0.eps == RP_LINATTN_EPS && RP_LINATTN_EPS == 1e-6 && c0.q_offset == 0,
          "rp_linattn_cfg_default");
    CHECK_STATUS(rp_linattn_check(8, 6, &c0), RP_OK, NULL);
    int64_t s1 = rp_linattn_scratch_floats(10, 8, 6, 1), s2 = rp_linattn_scratch_floats(20, 8, 6, 1);
    int64_t s3 = rp_linattn_scratch_floats(10, 8, 6, 2);
    CHECK(s1 > 0 && s2 >= s1 && s3 >= s1, "scratch sizes grow with T and nthreads (%lld %lld %lld)",
          (long long)s1, (long long)s2, (long long)s3);

    rp_linattn_cfg c;
    CHECK_EACH_PE(pe, CHECK_PE_LINEAR_ROTARY) {
        c = c0;
        c.scheme = check_scheme((rp_pe)pe, 5, 6);
        CHECK_STATUS(rp_linattn_check(8, 6, &c), RP_ERR_ARG, "d_rot_qk must be even");
        check_scheme_widths(&c.scheme, 10, 6);
        CHECK_STATUS(rp_linattn_check(8, 6, &c), RP_ERR_ARG, "d_rot_qk 10 exceeds D 8");
        check_scheme_widths(&c.scheme, 0, 6);
        CHECK_STATUS(rp_linattn_check(8, 6, &c), RP_ERR_ARG, ">= 2");
        check_scheme_widths(&c.scheme, -2, 6);
        CHECK_STATUS(rp_linattn_check(8, 6, &c), RP_ERR_ARG, "d_rot_qk");
        check_scheme_widths(&c.scheme, 2, 6);
        CHECK_STATUS(rp_linattn_check(8, 6, &c), RP_OK, NULL);
        c.scheme.d_rot_k = 4;
        CHECK_MSG(rp_linattn_check(8, 6, &c), RP_ERR_ARG,
                  "linear attention rotates q and k alike: d_rot_k 4, d_rot_q 2");
        c.scheme.d_rot_k = 2;
        c.scheme.base = 0.0;
        CHECK_STATUS(rp_linattn_check(8, 6, &c), RP_ERR_ARG, "base");
        c.scheme.base = (double)NAN;
        CHECK_STATUS(rp_linattn_check(8, 6, &c), RP_ERR_ARG, "base");
    }
    c = c0;
    check_scheme_widths(&c.scheme, 8, 3);
    CHECK_STATUS(rp_linattn_check(8, 6, &c), RP_ERR_ARG, "d_rot_v must be even");
    check_scheme_widths(&c.scheme, 8, 8);
    CHECK_STATUS(rp_linattn_check(8, 6, &c), RP_ERR_ARG, "d_rot_v 8 exceeds Dv 6");
    check_scheme_widths(&c.scheme, 8, 0);
    CHECK_STATUS(rp_linattn_check(8, 6, &c), RP_ERR_ARG, "d_rot_v");
    check_scheme_widths(&c.scheme, 8, 6);
    c.scheme.d_rot_o = 4;
    CHECK_MSG(rp_linattn_check(8, 6, &c), RP_ERR_ARG,
              "linear attention rotates v and the output alike: d_rot_o 4, d_rot_v 6");
    c.scheme = check_scheme_rot(RP_PE_ROPER, RP_ROT_Q | RP_ROT_K | RP_ROT_V, 8, 8, 6, 6);
    CHECK_MSG(rp_linattn_check(8, 6, &c), RP_ERR_ARG,
              "linear attention rotates pe roper's own placements (rotate 'qkvo'), got rotate "
              "'qkv'");
    c.scheme = check_scheme(RP_PE_ROPE, 8, 8); /* rope does not use d_rot_v */
    CHECK_STATUS(rp_linattn_check(8, 6, &c), RP_OK, NULL);
    c.scheme = check_scheme(RP_PE_NONE, 7, 8); /* none uses neither */
    CHECK_STATUS(rp_linattn_check(8, 6, &c), RP_OK, NULL);
    c = c0;
    c.scheme = check_scheme(RP_PE_ROPER_LEGACY, 8, 6);
    CHECK_STATUS(rp_linattn_check(8, 6, &c), RP_ERR_ARG,
                 "roper_legacy is not supported by linear attention");
    const double bad_eps[4] = {0.0, -1e-6, (double)NAN, HUGE_VAL};
    for (int i = 0; i < 4; i++) {
        c = c0;
        c.eps = bad_eps[i];
        CHECK_STATUS(rp_linattn_check(8, 6, &c), RP_ERR_ARG, "eps must be a finite number > 0");
    }
    c = c0;
    c.q_offset = -1;
    CHECK_STATUS(rp_linattn_check(8, 6, &c), RP_ERR_ARG, "q_offset must be >= 0");
    c = c0;
    c.placement = (rp_lin_placement)2;
    CHECK_STATUS(rp_linattn_check(8, 6, &c), RP_ERR_ARG, "placement");
    c = c0;
    c.scheme.pairing = (rp_pairing)3;
    CHECK_STATUS(rp_linattn_check(8, 6, &c), RP_ERR_ARG, "pairing");
    c = c0;
    c.scheme.pe = (rp_pe)17;
    CHECK_STATUS(rp_linattn_check(8, 6, &c), RP_ERR_ARG, "pe");
    CHECK_STATUS(rp_linattn_check(0, 6, &c0), RP_ERR_ARG, "D >= 1");
    CHECK_STATUS(rp_linattn_check(8, 0, &c0), RP_ERR_ARG, "Dv >= 1");
}

int main(void)
{
    test_names_and_errors();
    test_forward();
    test_relative();
    test_backward();
    test_threads();
    test_state();
    test_weights();
    return check_summary("test_linear_attention");
}
