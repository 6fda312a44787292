#include "linear_attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fpmode.h"
#include "parallel.h"
#include "simd.h"

/* ---- names, defaults, checks ----------------------------------------------------------------- */

const char *const rp_lin_placement_names[3] = {"after", "before", NULL};

const char *rp_lin_placement_name(rp_lin_placement p)
{
    if ((int)p < 0 || (int)p > 1) return "?";
    return rp_lin_placement_names[p];
}

int rp_lin_placement_from_name(const char *name)
{
    for (int i = 0; i < 2; i++)
        if (strcmp(name, rp_lin_placement_names[i]) == 0) return i;
    return -1;
}

rp_linattn_cfg rp_linattn_cfg_default(rp_pe pe, int64_t D, int64_t Dv)
{
    rp_linattn_cfg c;
    memset(&c, 0, sizeof c);
    rp_pe_cfg pc = {.mode = pe, .base = RP_ROPE_BASE, .pairing = RP_PAIR_HALF};
    const int64_t d_rot[4] = {D, D, Dv, Dv};
    if (rp_pe_mode_of(pe)) (void)rp_pe_scheme_init(&c.scheme, &pc, d_rot); /* rotate 0: RP_OK */
    else c.scheme.pe = pe;
    c.placement = RP_LIN_AFTER;
    c.eps = RP_LINATTN_EPS;
    c.q_offset = 0;
    return c;
}

/* What the mode rotates (the mode table of pe.h). The kernels support the modes the table marks
 * `linear`: q/k rotated, and v with the output by +i / -n theta together (v_angle 1, o_sign -1,
 * the same width), which rp_linattn_check enforces. */
static int rotates_qk(rp_pe pe) { return (rp_pe_mode_of(pe)->rotate & RP_ROT_Q) != 0; }

static int rotates_v(rp_pe pe) { return (rp_pe_mode_of(pe)->rotate & RP_ROT_V) != 0; }

static rp_status check_d_rot(const char *name, int64_t d_rot, int64_t width, const char *wname)
{
    if (d_rot < 2 || d_rot % 2 != 0)
        return rp_error(RP_ERR_ARG, "%s must be even and >= 2, got %lld", name, (long long)d_rot);
    if (d_rot > width)
        return rp_error(RP_ERR_ARG, "%s %lld exceeds %s %lld", name, (long long)d_rot, wname,
                        (long long)width);
    return RP_OK;
}

rp_status rp_linattn_check_eps(double eps)
{
    if (eps > 0.0 && isfinite(eps)) return RP_OK;
    return rp_error(RP_ERR_ARG, "eps must be a finite number > 0, got %.14g", eps);
}

rp_status rp_linattn_check(int64_t D, int64_t Dv, const rp_linattn_cfg *cfg)
{
    if (D < 1 || Dv < 1)
        return rp_error(RP_ERR_ARG, "linear attention needs D >= 1 and Dv >= 1, got D %lld, Dv %lld",
                        (long long)D, (long long)Dv);
    const rp_pe_scheme *s = &cfg->scheme;
    const rp_pe_mode *mode = rp_pe_mode_of(s->pe);
    if (!mode) return rp_error(RP_ERR_ARG, "unknown pe %d", (int)s->pe);
    if (!mode->linear)
        return rp_error(RP_ERR_ARG, "%s is not supported by linear attention", mode->name);
    if (cfg->placement != RP_LIN_AFTER && cfg->placement != RP_LIN_BEFORE)
        return rp_error(RP_ERR_ARG, "unknown placement %d (after or before)", (int)cfg->placement);
    if (s->pairing != RP_PAIR_HALF && s->pairing != RP_PAIR_INTERLEAVED)
        return rp_error(RP_ERR_ARG, "unknown pairing %d", (int)s->pairing);
    RP_TRY(rp_pe_scheme_check(s));
    char own[5], got[5];
    if (s->rotate != mode->rotate)
        return rp_error(RP_ERR_ARG, "linear attention rotates pe %s's own placements (rotate "
                        "'%s'), got rotate '%s'", mode->name, rp_rotate_name(mode->rotate, own),
                        rp_rotate_name(s->rotate, got));
    if (rotates_qk(s->pe)) {
        if (!(s->base > 0.0) || !isfinite(s->base))
            return rp_error(RP_ERR_ARG, "base must be positive and finite");
        RP_TRY(check_d_rot("d_rot_qk", s->d_rot_q, D, "D"));
        if (s->d_rot_k != s->d_rot_q)
            return rp_error(RP_ERR_ARG, "linear attention rotates q and k alike: d_rot_k %lld, "
                            "d_rot_q %lld", (long long)s->d_rot_k, (long long)s->d_rot_q);
    }
    if (rotates_v(s->pe)) {
        RP_TRY(check_d_rot("d_rot_v", s->d_rot_v, Dv, "Dv"));
        if (s->d_rot_o != s->d_rot_v)
            return rp_error(RP_ERR_ARG, "linear attention rotates v and the output alike: "
                            "d_rot_o %lld, d_rot_v %lld", (long long)s->d_rot_o,
                            (long long)s->d_rot_v);
    }
    RP_TRY(rp_linattn_check_eps(cfg->eps));
    if (cfg->q_offset < 0)
        return rp_error(RP_ERR_ARG, "q_offset must be >= 0, got %lld", (long long)cfg->q_offset);
    return RP_OK;
}

int64_t rp_linattn_state_doubles(int64_t H, int64_t D, int64_t Dv) { return H * (D * Dv + D); }

/* ---- scratch layout ---------------------------------------------------------------------------
 *
 * In floats, from the first 64-byte aligned address of scratch (hence the 16 spare floats):
 *   tables: cos/sin of q/k ([T][d_rot_qk/2] each) and of v/out ([T][d_rot_v/2] each; shared with
 *           q/k when d_rot_v == d_rot_qk), in float: at most T * (D + Dv) floats, rounded up to 16
 *   one slice per thread (slice_floats apart, a multiple of 16):
 *     zd [D doubles]             z (forward, forward sweep of the backward), then Hz (reverse sweep)
 *     M1, M2 [D*Dv each]         forward: S in M1; backward: S^T in M1, then G in M1, G^T in M2
 *     Kn, Kd, Qn, Qd [T*D each]  numerator / denominator features of every key and query
 *     Vt [T*Dv]                  v~ of every position
 *     GU [T*Dv], GD [T]          backward: dL/du_t and dL/dden_t of every query
 *     A1 [max(D, Dv)], A2, A3 [D] per-row vectors (u or g_y, then dv~; w, then dk~; dqd or dkd)
 */

static int64_t round16(int64_t n) { return (n + 15) / 16 * 16; }

static int64_t table_floats(int64_t T, int64_t D, int64_t Dv) { return round16(T * (D + Dv)); }

static int64_t slice_floats(int64_t T, int64_t D, int64_t Dv)
{
    int64_t W = D > Dv ? D : Dv;
    return round16(2 * D + 2 * D * Dv + 4 * T * D + 2 * T * Dv + T + W + 2 * D);
}

int64_t rp_linattn_scratch_floats(int64_t T, int64_t D, int64_t Dv, int nthreads)
{
    if (nthreads < 1) nthreads = 1;
    return table_floats(T, D, Dv) + (int64_t)nthreads * slice_floats(T, D, Dv) + 16;
}

static float *aligned_floats(float *scratch)
{
    uintptr_t p = (uintptr_t)(void *)scratch;
    p = (p + (uintptr_t)63) & ~(uintptr_t)63;
    return (float *)(void *)p;
}

/* ---- the per-row building blocks ------------------------------------------------------------ */

enum { MODE_PLAIN = 0, MODE_AFTER = 1, MODE_BEFORE = 2 };

typedef struct {
    int64_t T, H, D, Dv, ldq, ldk, ldv, ldo;
    int mode;
    rp_pairing pairing;
    int64_t hq, hv;           /* rotated pairs of q/k and of v/out (0 when not rotated) */
    double eps;
    const float *qc, *qs;     /* [T][hq] cos/sin of (q_offset + t) theta_i over d_rot_qk */
    const float *vc, *vs;     /* [T][hv] over d_rot_v */
    float *slices;
    int64_t slice;
    double *state;
    float *out, *dq, *dk, *dv;
    const float *q, *k, *v, *dout;
} lin_ctx;

static inline double phi(double x) { return x > 0.0 ? x + 1.0 : exp(x); }

static inline uint32_t fbits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline float bitsf(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Bit selects (mask m all ones or zero) instead of ?: on floats: with -ftrapping-math GCC does
 * not if-convert float selects, and such a loop would not vectorise. */
static inline uint32_t sel(uint32_t m, uint32_t a, uint32_t b) { return (m & a) | (~m & b); }

#define F87_BITS 0x42AE0000u /* 87.0f */
#define F1_BITS 0x3F800000u  /* 1.0f */

/* phi(x) = elu(x) + 1 in float, written so that loops over it vectorise (no libm call, no
 * branch): x + 1 for x > 0; else e^x by rp_exp_nonpos (simd.h: Cephes' expf polynomial, within
 * 8.4e-8 relative); 0 below -87 (e^-87 ~ 1.6e-38 is the last normal float it gives); NaN stays
 * NaN. phi'(x) = min(phi(x), 1) (x + 1 > 1 for x > 0, e^x <= 1 otherwise), so the backward needs
 * no exp. */
static inline float phi_f(float x)
{
    uint32_t u = fbits(x), mag = u & 0x7fffffffu;
    float e = rp_exp_nonpos(x); /* used only for x <= 0 */
    uint32_t pos = 0u - (uint32_t)(u - 1u < 0x7fffffffu), nan = 0u - (uint32_t)(mag > 0x7f800000u);
    uint32_t tiny = 0u - (uint32_t)(mag > F87_BITS);
    return bitsf(sel(pos, fbits(x + 1.0f), sel(nan, u, ~tiny & fbits(e))));
}

/* min(d, 1) for d >= 0 (phi'); NaN gives 1. */
static inline float min1(float d)
{
    uint32_t b = fbits(d);
    return bitsf(sel(0u - (uint32_t)(b < F1_BITS), b, F1_BITS));
}

/* y = phi(x) over n floats. */
static void phi_row(float *y, const float *x, int64_t n)
{
    RP_SIMD
    for (int64_t i = 0; i < n; i++) y[i] = phi_f(x[i]);
}

/* Rotates the first 2 * half features of x in place by the angles (c_i, sgn s_i): pair (a, b)
 * becomes (x_a c - x_b s, x_b c + x_a s) (rope.c's convention). */
static void rot(float *x, const float *c, const float *s, float sgn, int64_t half,
                rp_pairing pairing)
{
    if (pairing == RP_PAIR_HALF) {
        float *x2 = x + half;
        RP_SIMD
        for (int64_t i = 0; i < half; i++) {
            float a = x[i], b = x2[i], si = sgn * s[i];
            x[i] = a * c[i] - b * si;
            x2[i] = b * c[i] + a * si;
        }
    } else {
        for (int64_t i = 0; i < half; i++) {
            float a = x[2 * i], b = x[2 * i + 1], si = sgn * s[i];
            x[2 * i] = a * c[i] - b * si;
            x[2 * i + 1] = b * c[i] + a * si;
        }
    }
}

/* The features of the row x at table row t: numerator features num and denominator features
 * den (D each): phi(x) for AFTER (unrotated), and den == num (the same array, see slice_of)
 * otherwise. Elementwise, so a row's features do not depend on the rows computed with it. */
static void feature_row(const lin_ctx *c, const float *x, int64_t t, float *num, float *den)
{
    int64_t D = c->D, hq = c->hq;
    float *raw = c->mode == MODE_AFTER ? den : num;
    memcpy(raw, x, sizeof(float) * (size_t)D);
    if (c->mode == MODE_BEFORE) rot(raw, c->qc + t * hq, c->qs + t * hq, 1.0f, hq, c->pairing);
    phi_row(raw, raw, D);
    if (c->mode != MODE_AFTER) return;
    memcpy(num, den, sizeof(float) * (size_t)D);
    rot(num, c->qc + t * hq, c->qs + t * hq, 1.0f, hq, c->pairing);
}

/* v~ of the row v at table row t into vt (Dv): R_t v for roper, else v. */
static void value_row(const lin_ctx *c, const float *v, int64_t t, float *vt)
{
    memcpy(vt, v, sizeof(float) * (size_t)c->Dv);
    if (c->hv) rot(vt, c->vc + t * c->hv, c->vs + t * c->hv, 1.0f, c->hv, c->pairing);
}

/* The features of T rows x (row stride ld) at table rows 0 .. T-1 ([T][D] each): those of
 * feature_row, with phi over all the rows in one loop. */
static void features(const lin_ctx *c, const float *x, int64_t ld, float *num, float *den)
{
    int64_t T = c->T, D = c->D, hq = c->hq;
    float *raw = c->mode == MODE_AFTER ? den : num;
    for (int64_t t = 0; t < T; t++) {
        memcpy(raw + t * D, x + t * ld, sizeof(float) * (size_t)D);
        if (c->mode == MODE_BEFORE)
            rot(raw + t * D, c->qc + t * hq, c->qs + t * hq, 1.0f, hq, c->pairing);
    }
    phi_row(raw, raw, T * D);
    if (c->mode != MODE_AFTER) return;
    memcpy(num, den, sizeof(float) * (size_t)(T * D));
    for (int64_t t = 0; t < T; t++)
        rot(num + t * D, c->qc + t * hq, c->qs + t * hq, 1.0f, hq, c->pairing);
}

/* The gradient of the features of the row at table row t, d(features)/dx^T (gnum, gden), left in
 * gnum; den are the row's denominator features as features() made them. AFTER: num = R_t phi(x),
 * den = phi(x): d phi(x) = R_{-t} gnum + gden. BEFORE: num = den = phi(y), y = R_t x:
 * dy = (gnum + gden) phi'(y), dx = R_{-t} dy. plain: num = den = phi(x). phi' = min(den, 1). */
static void features_backward(const lin_ctx *c, int64_t t, float *gnum, const float *gden,
                              const float *den)
{
    int64_t D = c->D;
    if (c->mode == MODE_AFTER)
        rot(gnum, c->qc + t * c->hq, c->qs + t * c->hq, -1.0f, c->hq, c->pairing);
    RP_SIMD
    for (int64_t f = 0; f < D; f++) gnum[f] = (gnum[f] + gden[f]) * min1(den[f]);
    if (c->mode == MODE_BEFORE)
        rot(gnum, c->qc + t * c->hq, c->qs + t * c->hq, -1.0f, c->hq, c->pairing);
}

/* dx += g over n floats. */
static void add_row(float *restrict dx, const float *restrict g, int64_t n)
{
    RP_SIMD
    for (int64_t i = 0; i < n; i++) dx[i] += g[i];
}

/* How many rows ahead the backward prefetches (rp_prefetch_row) the strided rows of q, k, v,
 * dout, dq (forward sweep) and of dk, dv (reverse sweep): 8 measured faster than 4 and 16 at
 * T = 512, D = 32. */
#define PF_ROWS 8

/* The features of the T rows of head (b, h): Kn, Kd, Qn, Qd [T][D] and Vt [T][Dv] (v~ = R_t v
 * for roper, else v). */
static void all_features(const lin_ctx *c, float *Kn, float *Kd, float *Qn, float *Qd, float *Vt,
                         int64_t b, int64_t h)
{
    int64_t T = c->T, D = c->D, Dv = c->Dv;
    features(c, c->k + b * T * c->ldk + h * D, c->ldk, Kn, Kd);
    features(c, c->q + b * T * c->ldq + h * D, c->ldq, Qn, Qd);
    const float *vh = c->v + b * T * c->ldv + h * Dv;
    for (int64_t t = 0; t < T; t++) value_row(c, vh + t * c->ldv, t, Vt + t * Dv);
}

#ifdef __GNUC__
#define ALWAYS_INLINE static inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE static inline
#endif

/* Columns w <= 8 (one AVX register) of the step below: rows are taken four at a time into four
 * partial sums (independent chains that stay in registers), added as (p0 + p1) + (p2 + p3);
 * rows beyond a multiple of four go into p0. Inlined, so that w == 8 is a constant below. */
ALWAYS_INLINE void rank1_cols(float *restrict Mc, int64_t R, int64_t C, const float *restrict a,
                             const float *restrict xc, const float *restrict b, float *restrict ac,
                             int w)
{
    float xr[8], p0[8], p1[8], p2[8], p3[8];
    for (int j = 0; j < w; j++) xr[j] = xc[j], p0[j] = p1[j] = p2[j] = p3[j] = 0.0f;
    int64_t r = 0;
    for (; r + 4 <= R; r += 4) {
        float *M0 = Mc + r * C, *M1 = M0 + C, *M2 = M1 + C, *M3 = M2 + C;
        RP_SIMD
        for (int j = 0; j < w; j++) {
            float m0 = fmaf(a[r], xr[j], M0[j]), m1 = fmaf(a[r + 1], xr[j], M1[j]);
            float m2 = fmaf(a[r + 2], xr[j], M2[j]), m3 = fmaf(a[r + 3], xr[j], M3[j]);
            M0[j] = m0, M1[j] = m1, M2[j] = m2, M3[j] = m3;
            p0[j] = fmaf(b[r], m0, p0[j]);
            p1[j] = fmaf(b[r + 1], m1, p1[j]);
            p2[j] = fmaf(b[r + 2], m2, p2[j]);
            p3[j] = fmaf(b[r + 3], m3, p3[j]);
        }
    }
    for (; r < R; r++) {
        float *Mr = Mc + r * C;
        RP_SIMD
        for (int j = 0; j < w; j++) {
            float m = fmaf(a[r], xr[j], Mr[j]);
            Mr[j] = m;
            p0[j] = fmaf(b[r], m, p0[j]);
        }
    }
    RP_SIMD
    for (int j = 0; j < w; j++) ac[j] = (p0[j] + p1[j]) + (p2[j] + p3[j]);
}

/* 32 columns of the step below, rows in order: the four 8-column accumulators are independent
 * chains, and a[r], b[r] are read once per row for all of them. */
static void rank1_cols32(float *restrict Mc, int64_t R, int64_t C, const float *restrict a,
                         const float *restrict xc, const float *restrict b, float *restrict ac)
{
    float x0[8], x1[8], x2[8], x3[8], p0[8], p1[8], p2[8], p3[8];
    for (int j = 0; j < 8; j++) {
        x0[j] = xc[j], x1[j] = xc[8 + j], x2[j] = xc[16 + j], x3[j] = xc[24 + j];
        p0[j] = p1[j] = p2[j] = p3[j] = 0.0f;
    }
    for (int64_t r = 0; r < R; r++) {
        float ar = a[r], br = b[r], *Mr = Mc + r * C;
        RP_SIMD
        for (int j = 0; j < 8; j++) {
            float m0 = fmaf(ar, x0[j], Mr[j]), m1 = fmaf(ar, x1[j], Mr[8 + j]);
            float m2 = fmaf(ar, x2[j], Mr[16 + j]), m3 = fmaf(ar, x3[j], Mr[24 + j]);
            Mr[j] = m0, Mr[8 + j] = m1, Mr[16 + j] = m2, Mr[24 + j] = m3;
            p0[j] = fmaf(br, m0, p0[j]);
            p1[j] = fmaf(br, m1, p1[j]);
            p2[j] = fmaf(br, m2, p2[j]);
            p3[j] = fmaf(br, m3, p3[j]);
        }
    }
    for (int j = 0; j < 8; j++)
        ac[j] = p0[j], ac[8 + j] = p1[j], ac[16 + j] = p2[j], ac[24 + j] = p3[j];
}

/* The step of every recurrence here, one pass over M (R x C, row-major): M[r][:] += a[r] x (in
 * float, fmaf), and acc = sum_r b[r] M[r][:] with the updated rows (fmaf, in the fixed order of
 * rank1_cols32 or rank1_cols). OVERWRITES acc (C). Every element sees the same operations in every call with the
 * same R and C, so the results do not depend on how a sequence is split into calls. */
static void rank1_acc(float *restrict M, int64_t R, int64_t C, const float *restrict a,
                      const float *restrict x, const float *restrict b, float *restrict acc)
{
    int64_t c0 = 0;
    for (; c0 + 32 <= C; c0 += 32) rank1_cols32(M + c0, R, C, a, x + c0, b, acc + c0);
    for (; c0 + 8 <= C; c0 += 8) rank1_cols(M + c0, R, C, a, x + c0, b, acc + c0, 8);
    if (c0 < C) rank1_cols(M + c0, R, C, a, x + c0, b, acc + c0, (int)(C - c0));
}

/* The backward's step (C a multiple of RP_VL, up to 4 vectors here): M[r][:] += a[r] x as in
 * rank1_acc, and acc = sum_r b[r] M[r][:] in two chains, the even and the odd rows (fmaf, rows in
 * order), added at the end, so consecutive rows do not wait on each other's multiply-add. A
 * fixed order for given R and C. */
ALWAYS_INLINE void rank1_split_cols(float *restrict Mc, int64_t R, int64_t C,
                                    const float *restrict a, const float *restrict xc,
                                    const float *restrict b, float *restrict ac, int nv)
{
    rp_vf x[4], p0[4], p1[4];
    for (int v = 0; v < nv; v++) {
        x[v] = rp_vload(xc + v * RP_VL);
        p0[v] = p1[v] = rp_vsplat(0.0f);
    }
    int64_t r = 0;
    for (; r + 2 <= R; r += 2) {
        rp_vf a0 = rp_vsplat(a[r]), a1 = rp_vsplat(a[r + 1]);
        rp_vf b0 = rp_vsplat(b[r]), b1 = rp_vsplat(b[r + 1]);
        float *M0 = Mc + r * C, *M1 = M0 + C;
        for (int v = 0; v < nv; v++) {
            rp_vf m0 = rp_vfma(a0, x[v], rp_vload(M0 + v * RP_VL));
            rp_vf m1 = rp_vfma(a1, x[v], rp_vload(M1 + v * RP_VL));
            rp_vstore(M0 + v * RP_VL, m0);
            rp_vstore(M1 + v * RP_VL, m1);
            p0[v] = rp_vfma(b0, m0, p0[v]);
            p1[v] = rp_vfma(b1, m1, p1[v]);
        }
    }
    if (r < R) {
        rp_vf a0 = rp_vsplat(a[r]), b0 = rp_vsplat(b[r]);
        float *M0 = Mc + r * C;
        for (int v = 0; v < nv; v++) {
            rp_vf m0 = rp_vfma(a0, x[v], rp_vload(M0 + v * RP_VL));
            rp_vstore(M0 + v * RP_VL, m0);
            p0[v] = rp_vfma(b0, m0, p0[v]);
        }
    }
    for (int v = 0; v < nv; v++) rp_vstore(ac + v * RP_VL, p0[v] + p1[v]);
}

/* rank1_acc for the backward: rank1_split_cols over blocks of up to 4 vectors when C is a
 * multiple of RP_VL, else rank1_acc itself. OVERWRITES acc (C). */
static void rank1_acc_bwd(float *restrict M, int64_t R, int64_t C, const float *restrict a,
                          const float *restrict x, const float *restrict b, float *restrict acc)
{
    if (C % RP_VL != 0) {
        rank1_acc(M, R, C, a, x, b, acc);
        return;
    }
    int64_t c0 = 0;
    for (; c0 + 4 * RP_VL <= C; c0 += 4 * RP_VL)
        rank1_split_cols(M + c0, R, C, a, x + c0, b, acc + c0, 4);
    switch ((C - c0) / RP_VL) {
    case 3: rank1_split_cols(M + c0, R, C, a, x + c0, b, acc + c0, 3); break;
    case 2: rank1_split_cols(M + c0, R, C, a, x + c0, b, acc + c0, 2); break;
    case 1: rank1_split_cols(M + c0, R, C, a, x + c0, b, acc + c0, 1); break;
    default: break;
    }
}

/* z += zd (double); returns qd . z + eps (a vectorised sum: its order is fixed for the build). */
static double den_step(double *z, const float *zd, const float *qd, int64_t D, double eps)
{
    double acc = 0.0;
    RP_SIMD
    for (int64_t f = 0; f < D; f++) z[f] += (double)zd[f];
    RP_SIMD_REDUCE(+, acc)
    for (int64_t f = 0; f < D; f++) acc += (double)qd[f] * z[f];
    return acc + eps;
}

/* The backward's double sums over D: 8 partial sums (feature f goes to f mod 8, in order; the
 * features past a multiple of 8 to the first) added as a tree, so that they stay in registers
 * (an omp simd reduction goes through memory lane by lane). */
static inline double sum8(const double a[8])
{
    return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

/* den_step of the backward: z += zd (double); returns qd . z + eps summed as sum8 says. */
static double den_step8(double *restrict z, const float *restrict zd, const float *restrict qd,
                        int64_t D, double eps)
{
    double a[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    int64_t f = 0;
    for (; f + 8 <= D; f += 8)
        for (int i = 0; i < 8; i++) {
            double zi = z[f + i] + (double)zd[f + i];
            z[f + i] = zi;
            a[i] += (double)qd[f + i] * zi;
        }
    for (; f < D; f++) {
        z[f] += (double)zd[f];
        a[0] += (double)qd[f] * z[f];
    }
    return sum8(a) + eps;
}

/* x . y over D floats, in double, summed as sum8 says. */
static double dot8(const float *restrict x, const float *restrict y, int64_t D)
{
    double a[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    int64_t f = 0;
    for (; f + 8 <= D; f += 8)
        for (int i = 0; i < 8; i++) a[i] += (double)x[f + i] * (double)y[f + i];
    for (; f < D; f++) a[0] += (double)x[f] * (double)y[f];
    return sum8(a);
}

/* ---- the kernels ------------------------------------------------------------------------------ */

typedef struct {
    double *z;
    float *M1, *M2, *Kn, *Kd, *Qn, *Qd, *Vt, *GU, *GD, *A1, *A2, *A3;
} slice_ptrs;

static slice_ptrs slice_of(const lin_ctx *c, float *ws)
{
    int64_t T = c->T, D = c->D, Dv = c->Dv, W = D > Dv ? D : Dv;
    slice_ptrs s;
    s.z = (double *)(void *)ws;
    s.M1 = ws + 2 * D, s.M2 = s.M1 + D * Dv;
    s.Kn = s.M2 + D * Dv, s.Kd = s.Kn + T * D, s.Qn = s.Kd + T * D, s.Qd = s.Qn + T * D;
    if (c->mode != MODE_AFTER) s.Kd = s.Kn, s.Qd = s.Qn; /* the same features */
    s.Vt = s.Qd + T * D, s.GU = s.Vt + T * Dv, s.GD = s.GU + T * Dv;
    s.A1 = s.GD + T, s.A2 = s.A1 + W, s.A3 = s.A2 + D;
    return s;
}

/* Head (b, h) of the forward; returns its smallest denominator. */
static double head_forward(const lin_ctx *c, float *ws, int64_t b, int64_t h)
{
    int64_t T = c->T, D = c->D, Dv = c->Dv;
    slice_ptrs s = slice_of(c, ws);
    float *S = s.M1, *u = s.A1;
    double *z = s.z, *st = NULL;
    if (c->state) {
        st = c->state + (b * c->H + h) * (D * Dv + D);
        for (int64_t i = 0; i < D * Dv; i++) S[i] = (float)st[i];
        z = st + D * Dv;
    } else {
        memset(S, 0, sizeof(float) * (size_t)(D * Dv));
        memset(z, 0, sizeof(double) * (size_t)D);
    }
    all_features(c, s.Kn, s.Kd, s.Qn, s.Qd, s.Vt, b, h);
    float *oh = c->out + b * T * c->ldo + h * Dv;
    double mind = HUGE_VAL;
    for (int64_t t = 0; t < T; t++) {
        /* key t joins the state first: query t sees keys 0 .. t */
        rank1_acc(S, D, Dv, s.Kn + t * D, s.Vt + t * Dv, s.Qn + t * D, u);
        double den = den_step(z, s.Kd + t * D, s.Qd + t * D, D, c->eps);
        mind = den < mind ? den : mind;
        float rden = (float)(1.0 / den);
        RP_SIMD
        for (int64_t j = 0; j < Dv; j++) u[j] *= rden;
        if (c->hv) rot(u, c->vc + t * c->hv, c->vs + t * c->hv, -1.0f, c->hv, c->pairing);
        memcpy(oh + t * c->ldo, u, sizeof(float) * (size_t)Dv);
    }
    if (st)
        for (int64_t i = 0; i < D * Dv; i++) st[i] = (double)S[i];
    return mind;
}

/* Head (b, h) of the backward, from a zero initial state. */
static void head_backward(const lin_ctx *c, float *ws, int64_t b, int64_t h)
{
    int64_t T = c->T, D = c->D, Dv = c->Dv;
    slice_ptrs s = slice_of(c, ws);
    double *z = s.z;
    float *gy = s.A1, *w = s.A2, *g2 = s.A3;
    const float *doh = c->dout + b * T * c->ldo + h * Dv;
    float *dqh = c->dq + b * T * c->ldq + h * D, *dkh = c->dk + b * T * c->ldk + h * D;
    float *dvh = c->dv + b * T * c->ldv + h * Dv;
    const float *kh = c->k + b * T * c->ldk + h * D, *qh = c->q + b * T * c->ldq + h * D;
    const float *vh = c->v + b * T * c->ldv + h * Dv;

    /* forward sweep over S^T (Dv x D), the features of each row computed as it joins: w = S_t g_y
     * with g_y = R_t dout (out = R_{-t} y for roper), den_t = qd_t . z_t + eps, g_u = g_y / den,
     * g_den = -(g_y . u_t) / den^2 with g_y . u_t = q~_t . w; dq~ = w / den, dqd = g_den z_t */
    float *ST = s.M1;
    memset(ST, 0, sizeof(float) * (size_t)(D * Dv));
    memset(z, 0, sizeof(double) * (size_t)D);
    for (int64_t t = 0; t < T; t++) {
        float *qn = s.Qn + t * D, *qd = s.Qd + t * D, *kn = s.Kn + t * D, *vt = s.Vt + t * Dv;
        if (t + PF_ROWS < T) {
            rp_prefetch_row(kh + (t + PF_ROWS) * c->ldk, D, 0);
            rp_prefetch_row(qh + (t + PF_ROWS) * c->ldq, D, 0);
            rp_prefetch_row(vh + (t + PF_ROWS) * c->ldv, Dv, 0);
            rp_prefetch_row(doh + (t + PF_ROWS) * c->ldo, Dv, 0);
            rp_prefetch_row(dqh + (t + PF_ROWS) * c->ldq, D, 1);
        }
        feature_row(c, kh + t * c->ldk, t, kn, s.Kd + t * D);
        feature_row(c, qh + t * c->ldq, t, qn, qd);
        value_row(c, vh + t * c->ldv, t, vt);
        value_row(c, doh + t * c->ldo, t, gy);
        rank1_acc_bwd(ST, Dv, D, vt, kn, gy, w);
        double den = den_step8(z, s.Kd + t * D, qd, D, c->eps), qw = dot8(qn, w, D);
        double gden = -qw / (den * den);
        float rden = (float)(1.0 / den), *gu = s.GU + t * Dv;
        RP_SIMD
        for (int64_t j = 0; j < Dv; j++) gu[j] = gy[j] * rden;
        s.GD[t] = (float)gden;
        RP_SIMD
        for (int64_t f = 0; f < D; f++) {
            w[f] *= rden;
            g2[f] = (float)(gden * z[f]);
        }
        features_backward(c, t, w, g2, qd);
        add_row(dqh + t * c->ldq, w, D);
    }

    /* reverse sweep: G = sum_{t>=m} q~_t g_u_t^T (D x Dv) and its transpose, Hz = sum_{t>=m}
     * g_den_t qd_t; dv~_m = G^T k~_m, dk~_m = G v~_m, dkd_m = Hz, dv += R_{-m} dv~ (roper) */
    float *G = s.M1, *GT = s.M2, *dkt = w, *dvt = gy;
    double *Hz = z;
    memset(G, 0, sizeof(float) * (size_t)(D * Dv));
    memset(GT, 0, sizeof(float) * (size_t)(D * Dv));
    memset(Hz, 0, sizeof(double) * (size_t)D);
    for (int64_t m = T - 1; m >= 0; m--) {
        const float *qn = s.Qn + m * D, *qd = s.Qd + m * D, *gu = s.GU + m * Dv;
        if (m >= PF_ROWS) {
            rp_prefetch_row(dkh + (m - PF_ROWS) * c->ldk, D, 1);
            rp_prefetch_row(dvh + (m - PF_ROWS) * c->ldv, Dv, 1);
        }
        rank1_acc_bwd(G, D, Dv, qn, gu, s.Kn + m * D, dvt);
        rank1_acc_bwd(GT, Dv, D, gu, qn, s.Vt + m * Dv, dkt);
        double gden = (double)s.GD[m];
        RP_SIMD
        for (int64_t f = 0; f < D; f++) {
            Hz[f] += gden * (double)qd[f];
            g2[f] = (float)Hz[f];
        }
        features_backward(c, m, dkt, g2, s.Kd + m * D);
        if (c->hv) rot(dvt, c->vc + m * c->hv, c->vs + m * c->hv, -1.0f, c->hv, c->pairing);
        add_row(dkh + m * c->ldk, dkt, D);
        add_row(dvh + m * c->ldv, dvt, Dv);
    }
}

/* cos/sin tables of positions q_offset .. q_offset + T - 1: angles pos * theta_i with theta from
 * rp_rope_theta (as rp_rope_angles computes them) and cos, sin in double, rounded to float.
 * theta_tmp holds d_rot / 2 doubles. */
static void fill_table(float *cs, float *sn, double *theta_tmp, int64_t T, int64_t d_rot,
                       double base, int64_t q_offset)
{
    int64_t half = d_rot / 2;
    rp_rope_theta(theta_tmp, d_rot, base);
    for (int64_t r = 0; r < T; r++) {
        double p = (double)(q_offset + r);
        for (int64_t i = 0; i < half; i++) {
            double ang = p * theta_tmp[i];
            cs[r * half + i] = (float)cos(ang);
            sn[r * half + i] = (float)sin(ang);
        }
    }
}

/* The dims, strides, mode and tables of a call (the pointers are the caller's to set). */
static void ctx_init(lin_ctx *c, const rp_attn_io *io, const rp_linattn_cfg *cfg)
{
    int64_t T = io->T, D = io->D, Dv = io->Dv;
    memset(c, 0, sizeof *c);
    c->T = T, c->H = io->H, c->D = D, c->Dv = Dv;
    c->ldq = io->ldq, c->ldk = io->ldk, c->ldv = io->ldv, c->ldo = io->ldo;
    c->pairing = cfg->scheme.pairing;
    c->eps = cfg->eps;
    c->mode = !rotates_qk(cfg->scheme.pe) ? MODE_PLAIN
              : cfg->placement == RP_LIN_BEFORE ? MODE_BEFORE : MODE_AFTER;
    float *base = aligned_floats(io->scratch);
    c->slices = base + table_floats(T, D, Dv);
    c->slice = slice_floats(T, D, Dv);
    /* the first slice (>= 2 (D + Dv) floats, 8-byte aligned) holds theta while the tables are
     * built */
    double *theta = (double *)(void *)c->slices;
    float *p = base;
    if (rotates_qk(cfg->scheme.pe)) {
        int64_t hq = c->hq = cfg->scheme.d_rot_q / 2;
        float *qc = p, *qs = p + T * hq;
        p += 2 * T * hq;
        fill_table(qc, qs, theta, T, cfg->scheme.d_rot_q, cfg->scheme.base, cfg->q_offset);
        c->qc = qc, c->qs = qs;
    }
    if (rotates_v(cfg->scheme.pe)) {
        int64_t hv = c->hv = cfg->scheme.d_rot_v / 2;
        if (hv == c->hq) {
            c->vc = c->qc, c->vs = c->qs;
        } else {
            float *vc = p, *vs = p + T * hv;
            p += 2 * T * hv;
            fill_table(vc, vs, theta, T, cfg->scheme.d_rot_v, cfg->scheme.base, cfg->q_offset);
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
        float *ws = c->slices + (int64_t)id * c->slice;
        if (backward) {
            head_backward(c, ws, p / c->H, p % c->H);
        } else {
            double m = head_forward(c, ws, p / c->H, p % c->H);
            mind = m < mind ? m : mind;
        }
    }
    return mind;
}

void rp_linattn_forward(const rp_attn_io *io, const rp_linattn_cfg *cfg)
{
    lin_ctx c;
    ctx_init(&c, io, cfg);
    c.out = io->out, c.q = io->q, c.k = io->k, c.v = io->v, c.state = io->state;
    rp_fpmode fm = rp_fp_flush_begin();
    double mind = run_pairs(&c, io->B, io->nthreads, 0);
    rp_fp_flush_end(fm);
    if (io->min_den) *io->min_den = (float)mind;
}

void rp_linattn_backward(const rp_attn_io *io, const rp_linattn_cfg *cfg)
{
    lin_ctx c;
    ctx_init(&c, io, cfg);
    c.dq = io->dq, c.dk = io->dk, c.dv = io->dv, c.dout = io->dout;
    c.q = io->q, c.k = io->k, c.v = io->v;
    rp_fpmode fm = rp_fp_flush_begin();
    run_pairs(&c, io->B, io->nthreads, 1);
    rp_fp_flush_end(fm);
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
    int mode = !rotates_qk(cfg->scheme.pe) ? MODE_PLAIN
               : cfg->placement == RP_LIN_BEFORE ? MODE_BEFORE : MODE_AFTER;
    int64_t hq = mode == MODE_PLAIN ? 0 : cfg->scheme.d_rot_q / 2, nunits = D - hq;
    double kb[4 * LW_KEYS];
    for (int64_t h = 0; h < H; h++) {
        double *wh = w + h * T * T, *dh = den + h * T;
        memset(wh, 0, sizeof(double) * (size_t)(T * T));
        memset(dh, 0, sizeof(double) * (size_t)T);
        const float *qh = q + h * D, *kh = k + h * D;
        for (int64_t u = 0; u < nunits; u++) {
            /* theta_u as rp_rope_theta computes it */
            double theta = u < hq ? pow(cfg->scheme.base, -2.0 * (double)u /
                                        (double)cfg->scheme.d_rot_q) : 0.0;
            for (int64_t m0 = 0; m0 < T; m0 += LW_KEYS) {
                int64_t m1 = m0 + LW_KEYS < T ? m0 + LW_KEYS : T;
                for (int64_t m = m0; m < m1; m++) {
                    double ang = (double)(cfg->q_offset + m) * theta;
                    double *e = kb + 4 * (m - m0);
                    unit_features(e, e + 2, kh + m * ldk, u, mode, hq, cfg->scheme.pairing,
                                  cos(ang), sin(ang));
                }
                for (int64_t n = m0; n < T; n++) {
                    double ang = (double)(cfg->q_offset + n) * theta, qn[2], qd[2];
                    unit_features(qn, qd, qh + n * ldq, u, mode, hq, cfg->scheme.pairing,
                                  cos(ang), sin(ang));
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
        rp_attn_io io = {.B = B, .T = T, .S = T, .H = H, .D = D, .Dv = Dv,
                         .q = rp_tensor_data(&qc), .k = rp_tensor_data(&kc),
                         .v = rp_tensor_data(&vc), .ldq = H * D, .ldk = H * D, .ldv = H * Dv,
                         .out = rp_tensor_data(out), .ldo = H * Dv,
                         .scratch = rp_tensor_data(&scratch), .nthreads = nthreads};
        rp_linattn_forward(&io, cfg);
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
