#include "linear_attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "parallel.h"

/* ---- names, defaults, checks ----------------------------------------------------------------- */

static const char *const placement_names[] = {"after", "before"};

const char *rp_lin_placement_name(rp_lin_placement p)
{
    if ((int)p < 0 || (int)p > 1) return "?";
    return placement_names[p];
}

int rp_lin_placement_from_name(const char *name)
{
    for (int i = 0; i < 2; i++)
        if (strcmp(name, placement_names[i]) == 0) return i;
    return -1;
}

rp_linattn_cfg rp_linattn_cfg_default(rp_pe pe, int64_t D, int64_t Dv)
{
    rp_linattn_cfg c;
    memset(&c, 0, sizeof c);
    c.pe = pe;
    c.placement = RP_LIN_AFTER;
    c.base = RP_ROPE_BASE;
    c.pairing = RP_PAIR_HALF;
    c.d_rot_qk = D;
    c.d_rot_v = Dv;
    c.eps = RP_LINATTN_EPS;
    c.q_offset = 0;
    return c;
}

/* What the mode rotates (the mode table of pe.h). The kernels support the modes the table marks
 * `linear`: q/k rotated, and v with the output by +i / -n theta together (v_angle 1, o_sign -1,
 * the same width), which rp_linattn_check enforces. */
static int rotates_qk(rp_pe pe) { return rp_pe_mode_of(pe)->rot_qk; }

static int rotates_v(rp_pe pe) { return rp_pe_mode_of(pe)->v_angle != 0.0; }

static rp_status check_d_rot(const char *name, int64_t d_rot, int64_t width, const char *wname)
{
    if (d_rot < 2 || d_rot % 2 != 0)
        return rp_error(RP_ERR_ARG, "%s must be even and >= 2, got %lld", name, (long long)d_rot);
    if (d_rot > width)
        return rp_error(RP_ERR_ARG, "%s %lld exceeds %s %lld", name, (long long)d_rot, wname,
                        (long long)width);
    return RP_OK;
}

rp_status rp_linattn_check(int64_t D, int64_t Dv, const rp_linattn_cfg *cfg)
{
    if (D < 1 || Dv < 1)
        return rp_error(RP_ERR_ARG, "linear attention needs D >= 1 and Dv >= 1, got D %lld, Dv %lld",
                        (long long)D, (long long)Dv);
    const rp_pe_mode *mode = rp_pe_mode_of(cfg->pe);
    if (!mode) return rp_error(RP_ERR_ARG, "unknown pe %d", (int)cfg->pe);
    if (!mode->linear)
        return rp_error(RP_ERR_ARG, "%s is not supported by linear attention", mode->name);
    if (cfg->placement != RP_LIN_AFTER && cfg->placement != RP_LIN_BEFORE)
        return rp_error(RP_ERR_ARG, "unknown placement %d (after or before)", (int)cfg->placement);
    if (cfg->pairing != RP_PAIR_HALF && cfg->pairing != RP_PAIR_INTERLEAVED)
        return rp_error(RP_ERR_ARG, "unknown pairing %d", (int)cfg->pairing);
    if (rotates_qk(cfg->pe)) {
        if (!(cfg->base > 0.0) || !isfinite(cfg->base))
            return rp_error(RP_ERR_ARG, "base must be positive and finite");
        RP_TRY(check_d_rot("d_rot_qk", cfg->d_rot_qk, D, "D"));
    }
    if (rotates_v(cfg->pe)) RP_TRY(check_d_rot("d_rot_v", cfg->d_rot_v, Dv, "Dv"));
    if (!(cfg->eps > 0.0) || !isfinite(cfg->eps))
        return rp_error(RP_ERR_ARG, "eps must be positive and finite, got %g", cfg->eps);
    if (cfg->q_offset < 0)
        return rp_error(RP_ERR_ARG, "q_offset must be >= 0, got %lld", (long long)cfg->q_offset);
    return RP_OK;
}

int64_t rp_linattn_state_doubles(int64_t H, int64_t D, int64_t Dv) { return H * (D * Dv + D); }

/* ---- scratch layout ---------------------------------------------------------------------------
 *
 * In doubles, from the first 8-byte aligned address of scratch (hence the spare float):
 *   tables: cos/sin of q/k ([T][d_rot_qk/2] each) and of v/out ([T][d_rot_v/2] each; shared with
 *           q/k when d_rot_v == d_rot_qk): at most T * (D + Dv) doubles
 *   one slice per thread (slice_doubles apart):
 *     S [D*Dv], z [D]            forward: the running state (unless the caller's state is used);
 *                                backward: S, z in the forward sweep, then G, Hz in the reverse one
 *     Qn [T*D], Qd [T*D]         backward: numerator / denominator features of every query
 *     GU [T*Dv], GD [T]          backward: dL/du_t and dL/dden_t of every query
 *     V1 .. V5 [D each]          per-row vectors (features of q and k, their gradients)
 *     W1 .. W4 [Dv each]         per-row vectors (v~, u, g_y, dv~)
 */

static int64_t table_doubles(int64_t T, int64_t D, int64_t Dv) { return T * (D + Dv); }

static int64_t slice_doubles(int64_t T, int64_t D, int64_t Dv)
{
    return D * Dv + D + 2 * T * D + T * Dv + T + 5 * D + 4 * Dv;
}

int64_t rp_linattn_scratch_floats(int64_t T, int64_t D, int64_t Dv, int nthreads)
{
    if (nthreads < 1) nthreads = 1;
    return 2 * (table_doubles(T, D, Dv) + (int64_t)nthreads * slice_doubles(T, D, Dv)) + 2;
}

static double *aligned_doubles(float *scratch)
{
    uintptr_t p = (uintptr_t)(void *)scratch;
    p = (p + (uintptr_t)7) & ~(uintptr_t)7;
    return (double *)(void *)p;
}

/* ---- the per-row building blocks ------------------------------------------------------------ */

enum { MODE_PLAIN = 0, MODE_AFTER = 1, MODE_BEFORE = 2 };

typedef struct {
    int64_t T, H, D, Dv, ldq, ldk, ldv, ldo;
    int mode;
    rp_pairing pairing;
    int64_t hq, hv;           /* rotated pairs of q/k and of v/out (0 when not rotated) */
    double eps;
    const double *qc, *qs;    /* [T][hq] cos/sin of (q_offset + t) theta_i over d_rot_qk */
    const double *vc, *vs;    /* [T][hv] over d_rot_v */
    double *slices;
    int64_t slice;
    double *state;
    float *out, *dq, *dk, *dv;
    const float *q, *k, *v, *dout;
} lin_ctx;

static inline double phi(double x) { return x > 0.0 ? x + 1.0 : exp(x); }
static inline double dphi(double x) { return x > 0.0 ? 1.0 : exp(x); }

/* Rotates the first 2 * half features of x in place by the angles (c_i, sgn s_i): pair (a, b)
 * becomes (x_a c - x_b s, x_b c + x_a s) (rope.c's convention). */
static void rot(double *x, const double *c, const double *s, double sgn, int64_t half,
                rp_pairing pairing)
{
    int64_t sa = pairing == RP_PAIR_HALF ? 1 : 2, ob = pairing == RP_PAIR_HALF ? half : 1;
    for (int64_t i = 0; i < half; i++) {
        double x1 = x[i * sa], x2 = x[i * sa + ob], si = sgn * s[i];
        x[i * sa] = x1 * c[i] - x2 * si;
        x[i * sa + ob] = x2 * c[i] + x1 * si;
    }
}

/* Numerator features num (D) of the q or k row x at table row t, and the denominator features:
 * returned pointer, either den (AFTER: phi(x), unrotated) or num itself. */
static const double *features(const lin_ctx *c, const float *x, int64_t t, double *num,
                              double *den)
{
    int64_t D = c->D;
    switch (c->mode) {
    case MODE_AFTER:
        for (int64_t f = 0; f < D; f++) num[f] = den[f] = phi((double)x[f]);
        rot(num, c->qc + t * c->hq, c->qs + t * c->hq, 1.0, c->hq, c->pairing);
        return den;
    case MODE_BEFORE:
        for (int64_t f = 0; f < D; f++) num[f] = (double)x[f];
        rot(num, c->qc + t * c->hq, c->qs + t * c->hq, 1.0, c->hq, c->pairing);
        for (int64_t f = 0; f < D; f++) num[f] = phi(num[f]);
        return num;
    default:
        for (int64_t f = 0; f < D; f++) num[f] = phi((double)x[f]);
        return num;
    }
}

/* dx += d(features)/dx^T (gnum, gden): the gradients of the numerator and denominator features
 * of row x at table row t, accumulated into the float row dx. gnum and tmp are clobbered. */
static void features_backward(const lin_ctx *c, float *dx, const float *x, int64_t t,
                              double *gnum, const double *gden, double *tmp)
{
    int64_t D = c->D;
    switch (c->mode) {
    case MODE_AFTER:
        /* num = R_t phi(x): d phi(x) = R_{-t} gnum + gden */
        rot(gnum, c->qc + t * c->hq, c->qs + t * c->hq, -1.0, c->hq, c->pairing);
        for (int64_t f = 0; f < D; f++)
            dx[f] = (float)((double)dx[f] + (gnum[f] + gden[f]) * dphi((double)x[f]));
        break;
    case MODE_BEFORE:
        /* num = den = phi(y), y = R_t x: dy = (gnum + gden) phi'(y), dx = R_{-t} dy */
        for (int64_t f = 0; f < D; f++) tmp[f] = (double)x[f];
        rot(tmp, c->qc + t * c->hq, c->qs + t * c->hq, 1.0, c->hq, c->pairing);
        for (int64_t f = 0; f < D; f++) gnum[f] = (gnum[f] + gden[f]) * dphi(tmp[f]);
        rot(gnum, c->qc + t * c->hq, c->qs + t * c->hq, -1.0, c->hq, c->pairing);
        for (int64_t f = 0; f < D; f++) dx[f] = (float)((double)dx[f] + gnum[f]);
        break;
    default:
        for (int64_t f = 0; f < D; f++)
            dx[f] = (float)((double)dx[f] + (gnum[f] + gden[f]) * dphi((double)x[f]));
        break;
    }
}

/* v~ of the v row at table row t: R_t v for roper, else v. */
static void value_row(const lin_ctx *c, double *vt, const float *vr, int64_t t)
{
    for (int64_t j = 0; j < c->Dv; j++) vt[j] = (double)vr[j];
    if (c->hv) rot(vt, c->vc + t * c->hv, c->vs + t * c->hv, 1.0, c->hv, c->pairing);
}

/* S += a b^T (S is D x Dv row-major), z += zd. */
static void rank1_update(double *S, double *z, const double *a, const double *b, const double *zd,
                         int64_t D, int64_t Dv)
{
    for (int64_t f = 0; f < D; f++) {
        double af = a[f];
        double *Sf = S + f * Dv;
        RP_SIMD
        for (int64_t j = 0; j < Dv; j++) Sf[j] += af * b[j];
        z[f] += zd[f];
    }
}

/* u = S^T a (Dv), summed over f in order. */
static void mat_t_vec(double *u, const double *S, const double *a, int64_t D, int64_t Dv)
{
    for (int64_t j = 0; j < Dv; j++) u[j] = 0.0;
    for (int64_t f = 0; f < D; f++) {
        double af = a[f];
        const double *Sf = S + f * Dv;
        RP_SIMD
        for (int64_t j = 0; j < Dv; j++) u[j] += af * Sf[j];
    }
}

/* g = S b (D), each a sum over j in order. */
static void mat_vec(double *g, const double *S, const double *b, int64_t D, int64_t Dv)
{
    for (int64_t f = 0; f < D; f++) {
        const double *Sf = S + f * Dv;
        double acc = 0.0;
        RP_SIMD_REDUCE(+, acc)
        for (int64_t j = 0; j < Dv; j++) acc += Sf[j] * b[j];
        g[f] = acc;
    }
}

static double dot(const double *a, const double *b, int64_t n)
{
    double acc = 0.0;
    for (int64_t i = 0; i < n; i++) acc += a[i] * b[i];
    return acc;
}

/* ---- the kernels ------------------------------------------------------------------------------ */

/* Head (b, h) of the forward; returns its smallest denominator. */
static double head_forward(const lin_ctx *c, double *ws, int64_t b, int64_t h)
{
    int64_t T = c->T, D = c->D, Dv = c->Dv;
    double *S = ws, *z = S + D * Dv;
    double *V = ws + slice_doubles(T, D, Dv) - 5 * D - 4 * Dv;
    double *qn = V, *qd = qn + D, *kn = qd + D, *kd = kn + D;
    double *W = V + 5 * D, *vt = W, *u = vt + Dv;
    if (c->state) {
        S = c->state + (b * c->H + h) * (D * Dv + D);
        z = S + D * Dv;
    } else {
        memset(S, 0, sizeof(double) * (size_t)(D * Dv + D));
    }
    const float *qh = c->q + b * T * c->ldq + h * D, *kh = c->k + b * T * c->ldk + h * D;
    const float *vh = c->v + b * T * c->ldv + h * Dv;
    float *oh = c->out + b * T * c->ldo + h * Dv;
    double mind = HUGE_VAL;
    for (int64_t t = 0; t < T; t++) {
        /* key t joins the state first: query t sees keys 0 .. t */
        const double *kdp = features(c, kh + t * c->ldk, t, kn, kd);
        value_row(c, vt, vh + t * c->ldv, t);
        rank1_update(S, z, kn, vt, kdp, D, Dv);
        const double *qdp = features(c, qh + t * c->ldq, t, qn, qd);
        mat_t_vec(u, S, qn, D, Dv);
        double den = dot(qdp, z, D) + c->eps;
        mind = den < mind ? den : mind;
        for (int64_t j = 0; j < Dv; j++) u[j] /= den;
        if (c->hv) rot(u, c->vc + t * c->hv, c->vs + t * c->hv, -1.0, c->hv, c->pairing);
        float *orow = oh + t * c->ldo;
        for (int64_t j = 0; j < Dv; j++) orow[j] = (float)u[j];
    }
    return mind;
}

/* Head (b, h) of the backward, from a zero initial state. */
static void head_backward(const lin_ctx *c, double *ws, int64_t b, int64_t h)
{
    int64_t T = c->T, D = c->D, Dv = c->Dv;
    double *S = ws, *z = S + D * Dv;
    double *Qn = z + D, *Qd = Qn + T * D, *GU = Qd + T * D, *GD = GU + T * Dv;
    double *V = GD + T;
    double *kn = V, *kd = kn + D, *gn = kd + D, *gd = gn + D, *tmp = gd + D;
    double *W = V + 5 * D, *vt = W, *u = vt + Dv, *gy = u + Dv, *dvt = gy + Dv;
    const float *qh = c->q + b * T * c->ldq + h * D, *kh = c->k + b * T * c->ldk + h * D;
    const float *vh = c->v + b * T * c->ldv + h * Dv;
    const float *doh = c->dout + b * T * c->ldo + h * Dv;
    float *dqh = c->dq + b * T * c->ldq + h * D, *dkh = c->dk + b * T * c->ldk + h * D;
    float *dvh = c->dv + b * T * c->ldv + h * Dv;

    /* forward sweep: S_t, z_t, y_t = u_t / den_t, then g_y = R_n dout (out = R_{-n} y for roper),
     * g_u = g_y / den, g_den = -(g_y . y) / den; dq~ = S_t g_u, dqd = g_den z_t */
    memset(S, 0, sizeof(double) * (size_t)(D * Dv + D));
    for (int64_t t = 0; t < T; t++) {
        const double *kdp = features(c, kh + t * c->ldk, t, kn, kd);
        value_row(c, vt, vh + t * c->ldv, t);
        rank1_update(S, z, kn, vt, kdp, D, Dv);
        const float *qrow = qh + t * c->ldq;
        double *qn = Qn + t * D;
        const double *qdp = features(c, qrow, t, qn, Qd + t * D);
        mat_t_vec(u, S, qn, D, Dv);
        double den = dot(qdp, z, D) + c->eps;
        for (int64_t j = 0; j < Dv; j++) u[j] /= den;
        const float *drow = doh + t * c->ldo;
        for (int64_t j = 0; j < Dv; j++) gy[j] = (double)drow[j];
        if (c->hv) rot(gy, c->vc + t * c->hv, c->vs + t * c->hv, 1.0, c->hv, c->pairing);
        double gden = -dot(gy, u, Dv) / den;
        double *gu = GU + t * Dv;
        for (int64_t j = 0; j < Dv; j++) gu[j] = gy[j] / den;
        GD[t] = gden;
        mat_vec(gn, S, gu, D, Dv);
        for (int64_t f = 0; f < D; f++) gd[f] = gden * z[f];
        features_backward(c, dqh + t * c->ldq, qrow, t, gn, gd, tmp);
    }

    /* reverse sweep: G = sum_{t>=m} q~_t g_u_t^T, Hz = sum_{t>=m} g_den_t qd_t;
     * dk~_m = G v~_m, dkd_m = Hz, dv~_m = G^T k~_m, dv += R_{-m} dv~ (roper) */
    double *G = S, *Hz = z;
    memset(G, 0, sizeof(double) * (size_t)(D * Dv + D));
    const double *Qdp = c->mode == MODE_AFTER ? Qd : Qn;
    for (int64_t m = T - 1; m >= 0; m--) {
        const double *qn = Qn + m * D, *qdm = Qdp + m * D, *gu = GU + m * Dv;
        double gden = GD[m];
        for (int64_t f = 0; f < D; f++) {
            double af = qn[f];
            double *Gf = G + f * Dv;
            RP_SIMD
            for (int64_t j = 0; j < Dv; j++) Gf[j] += af * gu[j];
            Hz[f] += gden * qdm[f];
        }
        const float *krow = kh + m * c->ldk;
        features(c, krow, m, kn, kd);
        value_row(c, vt, vh + m * c->ldv, m);
        mat_vec(gn, G, vt, D, Dv);
        mat_t_vec(dvt, G, kn, D, Dv);
        features_backward(c, dkh + m * c->ldk, krow, m, gn, Hz, tmp);
        if (c->hv) rot(dvt, c->vc + m * c->hv, c->vs + m * c->hv, -1.0, c->hv, c->pairing);
        float *dvrow = dvh + m * c->ldv;
        for (int64_t j = 0; j < Dv; j++) dvrow[j] = (float)((double)dvrow[j] + dvt[j]);
    }
}

/* cos/sin tables of positions q_offset .. q_offset + T - 1, in double (angles pos * theta_i with
 * theta from rp_rope_theta, as rp_rope_angles computes them). theta_tmp holds d_rot / 2 doubles. */
static void fill_table(double *cs, double *sn, double *theta_tmp, int64_t T, int64_t d_rot,
                       double base, int64_t q_offset)
{
    int64_t half = d_rot / 2;
    rp_rope_theta(theta_tmp, d_rot, base);
    for (int64_t r = 0; r < T; r++) {
        double p = (double)(q_offset + r);
        for (int64_t i = 0; i < half; i++) {
            double ang = p * theta_tmp[i];
            cs[r * half + i] = cos(ang);
            sn[r * half + i] = sin(ang);
        }
    }
}

static void ctx_init(lin_ctx *c, float *scratch, int64_t T, int64_t H, int64_t D, int64_t Dv,
                     int64_t ldq, int64_t ldk, int64_t ldv, int64_t ldo,
                     const rp_linattn_cfg *cfg)
{
    memset(c, 0, sizeof *c);
    c->T = T, c->H = H, c->D = D, c->Dv = Dv;
    c->ldq = ldq, c->ldk = ldk, c->ldv = ldv, c->ldo = ldo;
    c->pairing = cfg->pairing;
    c->eps = cfg->eps;
    c->mode = !rotates_qk(cfg->pe) ? MODE_PLAIN
              : cfg->placement == RP_LIN_BEFORE ? MODE_BEFORE : MODE_AFTER;
    double *base = aligned_doubles(scratch);
    c->slices = base + table_doubles(T, D, Dv);
    c->slice = slice_doubles(T, D, Dv);
    /* the first slice (>= D + Dv doubles) holds theta while the tables are built */
    double *p = base;
    if (rotates_qk(cfg->pe)) {
        int64_t hq = c->hq = cfg->d_rot_qk / 2;
        double *qc = p, *qs = p + T * hq;
        p += 2 * T * hq;
        fill_table(qc, qs, c->slices, T, cfg->d_rot_qk, cfg->base, cfg->q_offset);
        c->qc = qc, c->qs = qs;
    }
    if (rotates_v(cfg->pe)) {
        int64_t hv = c->hv = cfg->d_rot_v / 2;
        if (hv == c->hq) {
            c->vc = c->qc, c->vs = c->qs;
        } else {
            double *vc = p, *vs = p + T * hv;
            p += 2 * T * hv;
            fill_table(vc, vs, c->slices, T, cfg->d_rot_v, cfg->base, cfg->q_offset);
            c->vc = vc, c->vs = vs;
        }
    }
}

/* The loop over the (b, h) pairs; returns the smallest denominator (forward). min is exact, so
 * the reduction does not depend on the thread count. */
static double run_pairs(const lin_ctx *c, int64_t B, int nthreads, int backward)
{
    int64_t npairs = B * c->H;
    int nt = nthreads < 1 ? 1 : nthreads;
    if ((int64_t)nt > npairs) nt = npairs > 0 ? (int)npairs : 1;
    double mind = HUGE_VAL;
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) reduction(min : mind)
#else
    (void)nt;
#endif
    for (int64_t p = 0; p < npairs; p++) {
        int id = 0;
#ifdef _OPENMP
        id = omp_get_thread_num();
#endif
        double *ws = c->slices + (int64_t)id * c->slice;
        if (backward) {
            head_backward(c, ws, p / c->H, p % c->H);
        } else {
            double m = head_forward(c, ws, p / c->H, p % c->H);
            mind = m < mind ? m : mind;
        }
    }
    return mind;
}

void rp_linattn_forward(float *out, int64_t ldo, float *scratch, double *state, float *min_den,
                        const float *q, int64_t ldq, const float *k, int64_t ldk, const float *v,
                        int64_t ldv, int64_t B, int64_t T, int64_t H, int64_t D, int64_t Dv,
                        const rp_linattn_cfg *cfg, int nthreads)
{
    lin_ctx c;
    ctx_init(&c, scratch, T, H, D, Dv, ldq, ldk, ldv, ldo, cfg);
    c.out = out, c.q = q, c.k = k, c.v = v, c.state = state;
    double mind = run_pairs(&c, B, nthreads, 0);
    if (min_den) *min_den = (float)mind;
}

void rp_linattn_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                         int64_t ldo, const float *q, int64_t ldq, const float *k, int64_t ldk,
                         const float *v, int64_t ldv, int64_t B, int64_t T, int64_t H, int64_t D,
                         int64_t Dv, const rp_linattn_cfg *cfg, int nthreads)
{
    lin_ctx c;
    ctx_init(&c, scratch, T, H, D, Dv, ldq, ldk, ldv, ldo, cfg);
    c.dq = dq, c.dk = dk, c.dv = dv, c.dout = dout, c.q = q, c.k = k, c.v = v;
    run_pairs(&c, B, nthreads, 1);
}

/* ---- introspection: the explicit pairwise weights ---------------------------------------------
 *
 * w_nm = sum over feature units of num_q(n) . num_k(m), den_n = sum_units sum_{m<=n}
 * den_q(n) . den_k(m) + eps. A unit is a rotation pair (two features, one angle) or one
 * unrotated feature, so the dot products split over units; the units' features of a block of
 * keys live in a stack buffer, those of a query are recomputed per key block. */

#define LW_KEYS 1024 /* keys per block: 4 doubles each, 32 KB of stack */

/* Features of unit u of row x at position pos: num[0..1], den[0..1] (a single feature has
 * [1] = 0). Units 0 .. hq-1 are the pairs of d_rot = 2 hq, the rest the features d_rot .. D-1. */
static void unit_features(double num[2], double den[2], const float *x, int64_t u, int mode,
                          int64_t hq, rp_pairing pairing, double cs, double sn)
{
    if (u >= hq) {
        num[0] = den[0] = phi((double)x[2 * hq + (u - hq)]);
        num[1] = den[1] = 0.0;
        return;
    }
    int64_t a = pairing == RP_PAIR_HALF ? u : 2 * u, b = pairing == RP_PAIR_HALF ? u + hq : 2 * u + 1;
    double xa = (double)x[a], xb = (double)x[b];
    if (mode == MODE_AFTER) {
        double fa = phi(xa), fb = phi(xb);
        den[0] = fa, den[1] = fb;
        num[0] = fa * cs - fb * sn;
        num[1] = fb * cs + fa * sn;
    } else { /* MODE_BEFORE */
        num[0] = den[0] = phi(xa * cs - xb * sn);
        num[1] = den[1] = phi(xb * cs + xa * sn);
    }
}

void rp_linattn_weights(double *w, double *den, const float *q, int64_t ldq, const float *k,
                        int64_t ldk, int64_t T, int64_t H, int64_t D, const rp_linattn_cfg *cfg)
{
    int mode = !rotates_qk(cfg->pe) ? MODE_PLAIN
               : cfg->placement == RP_LIN_BEFORE ? MODE_BEFORE : MODE_AFTER;
    int64_t hq = mode == MODE_PLAIN ? 0 : cfg->d_rot_qk / 2, nunits = D - hq;
    double kb[4 * LW_KEYS];
    for (int64_t h = 0; h < H; h++) {
        double *wh = w + h * T * T, *dh = den + h * T;
        memset(wh, 0, sizeof(double) * (size_t)(T * T));
        memset(dh, 0, sizeof(double) * (size_t)T);
        const float *qh = q + h * D, *kh = k + h * D;
        for (int64_t u = 0; u < nunits; u++) {
            /* theta_u as rp_rope_theta computes it */
            double theta = u < hq ? pow(cfg->base, -2.0 * (double)u / (double)cfg->d_rot_qk) : 0.0;
            for (int64_t m0 = 0; m0 < T; m0 += LW_KEYS) {
                int64_t m1 = m0 + LW_KEYS < T ? m0 + LW_KEYS : T;
                for (int64_t m = m0; m < m1; m++) {
                    double ang = (double)(cfg->q_offset + m) * theta;
                    double *e = kb + 4 * (m - m0);
                    unit_features(e, e + 2, kh + m * ldk, u, mode, hq, cfg->pairing, cos(ang),
                                  sin(ang));
                }
                for (int64_t n = m0; n < T; n++) {
                    double ang = (double)(cfg->q_offset + n) * theta, qn[2], qd[2];
                    unit_features(qn, qd, qh + n * ldq, u, mode, hq, cfg->pairing, cos(ang),
                                  sin(ang));
                    int64_t mend = m1 < n + 1 ? m1 : n + 1;
                    double *wr = wh + n * T, acc = 0.0;
                    for (int64_t m = m0; m < mend; m++) {
                        const double *e = kb + 4 * (m - m0);
                        wr[m] += qn[0] * e[0] + qn[1] * e[1];
                        acc += qd[0] * e[2] + qd[1] * e[3];
                    }
                    dh[n] += acc;
                }
            }
        }
        for (int64_t n = 0; n < T; n++) dh[n] += cfg->eps;
    }
}

double rp_linattn_min_weight(const double *w, const double *den, int64_t T, int64_t H)
{
    double lo = HUGE_VAL;
    for (int64_t h = 0; h < H; h++)
        for (int64_t n = 0; n < T; n++)
            for (int64_t m = 0; m <= n; m++) {
                double x = w[(h * T + n) * T + m] / den[h * T + n];
                if (x < lo) lo = x;
            }
    return lo;
}

/* ------------------------------------------------------------------------------------------ */
/* tensor level */

rp_status rp_linear_attention(rp_tensor *out, rp_tensor *w, rp_tensor *den, const rp_tensor *q,
                              const rp_tensor *k, const rp_tensor *v, const rp_linattn_cfg *cfg)
{
    char got[RP_SHAPE_STR_LEN], want[RP_SHAPE_STR_LEN];
    memset(out, 0, sizeof *out);
    if (w) memset(w, 0, sizeof *w);
    if (den) memset(den, 0, sizeof *den);
    if (q->ndim != 4 || q->shape[0] < 1 || q->shape[1] < 1 || q->shape[2] < 1 || q->shape[3] < 1)
        return rp_error(RP_ERR_SHAPE, "expected q as [B x T x H x D] (sizes >= 1), got %s",
                        rp_tensor_shape_str(got, sizeof got, q));
    int64_t B = q->shape[0], T = q->shape[1], H = q->shape[2], D = q->shape[3];
    if (k->ndim != 4 || k->shape[0] != B || k->shape[1] != T || k->shape[2] != H ||
        k->shape[3] != D)
        return rp_error(RP_ERR_SHAPE, "expected k as %s, got %s",
                        rp_shape_str(want, sizeof want, 4, q->shape),
                        rp_tensor_shape_str(got, sizeof got, k));
    if (v->ndim != 4 || v->shape[0] != B || v->shape[1] != T || v->shape[2] != H ||
        v->shape[3] < 1)
        return rp_error(RP_ERR_SHAPE, "expected v as [%lld x %lld x %lld x Dv], got %s",
                        (long long)B, (long long)T, (long long)H,
                        rp_tensor_shape_str(got, sizeof got, v));
    int64_t Dv = v->shape[3];
    if (T > RP_I32_MAX || D > RP_I32_MAX || Dv > RP_I32_MAX)
        return rp_error(RP_ERR_SHAPE, "linear attention: a dim exceeds 2^31-1");
    RP_TRY(rp_linattn_check(D, Dv, cfg));
    rp_tensor qc = {0}, kc = {0}, vc = {0}, scratch = {0};
    rp_status st = rp_tensor_contiguous(&qc, q);
    if (st == RP_OK) st = rp_tensor_contiguous(&kc, k);
    if (st == RP_OK) st = rp_tensor_contiguous(&vc, v);
    int nthreads = rp_max_threads();
    int64_t ns = rp_linattn_scratch_floats(T, D, Dv, nthreads);
    int64_t so[4] = {B, T, H, Dv}, sw[4] = {B, H, T, T}, sd[3] = {B, H, T};
    if (st == RP_OK) st = rp_tensor_new(out, 4, so);
    if (st == RP_OK) st = rp_tensor_new(&scratch, 1, &ns);
    if (st == RP_OK && w) st = rp_tensor_new(w, 4, sw);
    if (st == RP_OK && den) st = rp_tensor_new(den, 3, sd);
    double *wb = NULL, *db = NULL;
    if (st == RP_OK && (w || den)) {
        wb = malloc((size_t)(H * T * T) * sizeof(double));
        db = malloc((size_t)(H * T) * sizeof(double));
        if (!wb || !db) st = rp_error(RP_ERR_NOMEM, "cannot allocate the weights");
    }
    if (st == RP_OK) {
        rp_linattn_forward(rp_tensor_data(out), H * Dv, rp_tensor_data(&scratch), NULL, NULL,
                           rp_tensor_data(&qc), H * D, rp_tensor_data(&kc), H * D,
                           rp_tensor_data(&vc), H * Dv, B, T, H, D, Dv, cfg, nthreads);
        for (int64_t b = 0; (w || den) && b < B; b++) {
            rp_linattn_weights(wb, db, rp_tensor_data(&qc) + b * T * H * D, H * D,
                               rp_tensor_data(&kc) + b * T * H * D, H * D, T, H, D, cfg);
            if (w) {
                float *o = rp_tensor_data(w) + b * H * T * T;
                for (int64_t i = 0; i < H * T * T; i++) o[i] = (float)wb[i];
            }
            if (den) {
                float *o = rp_tensor_data(den) + b * H * T;
                for (int64_t i = 0; i < H * T; i++) o[i] = (float)db[i];
            }
        }
    }
    free(wb);
    free(db);
    rp_tensor_release(&qc);
    rp_tensor_release(&kc);
    rp_tensor_release(&vc);
    rp_tensor_release(&scratch);
    if (st != RP_OK) {
        rp_tensor_release(out);
        if (w) rp_tensor_release(w);
        if (den) rp_tensor_release(den);
    }
    return st;
}
