/* Vector positions in the rotary tables (core/nn/rope_freq.h, rp_rope_axes), against float64
 * references written from the papers' formulas (they never call the code under test):
 *   axial     Su's 2-D RoPE and EVA-02's VisionRotaryEmbedding (as rotary-embedding-torch): one
 *             1-D RoPE per axis, concatenated; axis a of A gets n_a = floor(half / A) pairs (+1
 *             for a < half mod A), its frequencies base^(-2j/(2 n_a)), j = 0 .. n_a - 1, turned
 *             by p_a. The reference builds the concatenated frequency list, then indexes it.
 *   sections  Qwen2-VL's M-RoPE (Hugging Face's apply_multimodal_rotary_pos_emb): one full 1-D
 *             table per axis (theta_i = base^(-2i/d_rot) times p_a), then section s of the pair
 *             index taken from the table of axis s.
 *   mixed     RoPE-Mixed (Heo et al. 2024, compute_mixed_cis): angle_i = sum_a p_a W[a][i].
 * Then: one axis gives today's tables bit for bit, rp_rope_rotate of q at P and k at Q gives a
 * score that depends on P - Q only (and does depend on it), sign -1 undoes sign +1, the
 * scalings per axis (axial) and on the 1-D frequencies (sections), and every refusal's status and
 * message. Attention with vector positions (rp_attn_cfg.pos): the forward against a double
 * reference of its formulas for every scheme (rope, roper, roper_legacy), its backward against
 * finite differences, decoding bit for bit as the forward, one axis bit for bit as pos NULL and
 * as pos_offset, and the shift property of out and att.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rp.h"

static uint64_t rng_state = 35;

enum { MAXH = 64 }; /* the most pairs of a scheme below */

/* ---- the references ------------------------------------------------------------------------ */

typedef enum { REF_AXIAL, REF_SECTIONS, REF_MIXED } ref_map;

typedef struct {
    ref_map map;
    int A;
    int64_t sections[3];
    const double *W;     /* mixed: [A x nW], a placement taking its first half columns */
    int scaling;         /* 0 none, 1 pi, 2 ntk (factor s), on the frequencies of the map */
    double s;
    int64_t nW;
} ref_scheme;

/* The frequency of pair i and the axis it turns by (axial, sections), for half pairs. */
static void ref_freqs(double *freq, int *axis, const ref_scheme *r, int64_t half, double base)
{
    if (r->map == REF_AXIAL) { /* concatenate one RoPE per axis, its own width */
        int64_t k = 0;
        for (int a = 0; a < r->A; a++) {
            int64_t na = half / r->A + (a < half % r->A ? 1 : 0), da = 2 * na;
            double b = r->scaling == 2 ? base * pow(r->s, (double)da / (double)(da - 2)) : base;
            for (int64_t j = 0; j < na; j++, k++) {
                freq[k] = pow(b, -2.0 * (double)j / (double)da);
                if (r->scaling == 1) freq[k] /= r->s;
                axis[k] = a;
            }
        }
        return;
    }
    /* sections: the standard 1-D frequencies, the axis by the cumulative sections */
    int64_t d = 2 * half;
    double b = r->scaling == 2 ? base * pow(r->s, (double)d / (double)(d - 2)) : base;
    int64_t end = 0;
    int a = -1;
    for (int64_t i = 0; i < half; i++) {
        while (i >= end) end += r->sections[++a];
        freq[i] = pow(b, -2.0 * (double)i / (double)d);
        if (r->scaling == 1) freq[i] /= r->s;
        axis[i] = a;
    }
}

/* The angle of pair i at the vector position p (times c). */
static void ref_angles(double *ang, const ref_scheme *r, int64_t half, double base, double c,
                       const int64_t *p)
{
    if (r->map == REF_MIXED) {
        for (int64_t i = 0; i < half; i++) {
            double a = 0.0;
            for (int b = 0; b < r->A; b++) a += (double)p[b] * r->W[b * r->nW + i];
            ang[i] = c * a;
        }
        return;
    }
    double freq[MAXH];
    int axis[MAXH];
    if (r->map == REF_SECTIONS && r->A == 3) { /* Hugging Face's route: 3 tables, then slices */
        double tab[3][MAXH];
        ref_freqs(freq, axis, r, half, base);
        for (int a = 0; a < 3; a++)
            for (int64_t i = 0; i < half; i++) tab[a][i] = (double)p[a] * freq[i];
        int64_t i = 0;
        for (int s = 0; s < 3; s++)
            for (int64_t k = 0; k < r->sections[s]; k++, i++) ang[i] = c * tab[s][i];
        return;
    }
    ref_freqs(freq, axis, r, half, base);
    for (int64_t i = 0; i < half; i++) ang[i] = c * (double)p[axis[i]] * freq[i];
}

/* The rp_rope_freq of a reference scheme (W borrowed). */
static rp_rope_freq freq_of(const ref_scheme *r)
{
    rp_rope_freq f = rp_rope_freq_default();
    f.axes.n = r->A;
    f.axes.map = r->map == REF_AXIAL ? RP_AXES_AXIAL
                 : r->map == REF_SECTIONS ? RP_AXES_SECTIONS : RP_AXES_MIXED;
    if (r->map == REF_SECTIONS) memcpy(f.axes.sections, r->sections, sizeof r->sections);
    if (r->map == REF_MIXED) f.axes.mix = r->W, f.axes.n_mix = r->nW;
    if (r->scaling) f.scaling = r->scaling == 1 ? RP_SCALING_PI : RP_SCALING_NTK;
    if (r->scaling) f.factor = r->s;
    return f;
}

/* ---- helpers ------------------------------------------------------------------------------- */

#define FCHECK(msg) CHECK_MSG(rp_rope_freq_check(&f), RP_ERR_ARG, msg)
#define UCHECK(d, msg) CHECK_MSG(rp_rope_freq_check_use(&f, (d), 0, "d_rot"), RP_ERR_ARG, msg)

/* The schemes the tests run: name, scheme, d_rot. */
static const double W2[2 * 8] = {0.9, -0.3, 0.05, 0.7, 0.01, -0.2, 0.4, 0.002,
                                 0.1, 0.8, -0.6, 0.02, 0.3, 0.25, -0.004, 0.5};
static const double W3[3 * 6] = {0.5, 0.1, -0.2, 0.03, 0.7, 0.001, -0.4, 0.6, 0.2,
                                 0.05, -0.1, 0.3,  0.2, -0.3, 0.9,  0.01, 0.02, -0.6};
enum { NSCHEMES = 9 };
static const struct {
    const char *name;
    ref_scheme r;
    int64_t d_rot;
} schemes[NSCHEMES] = {
    {"axial A=2 d=16", {REF_AXIAL, 2, {0}, NULL, 0, 1.0, 0}, 16},
    {"axial A=3 d=14 (3+2+2 pairs)", {REF_AXIAL, 3, {0}, NULL, 0, 1.0, 0}, 14},
    {"axial A=2 d=12, pi s=3", {REF_AXIAL, 2, {0}, NULL, 1, 3.0, 0}, 12},
    {"axial A=3 d=24, ntk s=4", {REF_AXIAL, 3, {0}, NULL, 2, 4.0, 0}, 24},
    {"sections {2, 3, 3} d=16", {REF_SECTIONS, 3, {2, 3, 3}, NULL, 0, 1.0, 0}, 16},
    {"sections {16, 24, 24} d=128", {REF_SECTIONS, 3, {16, 24, 24}, NULL, 0, 1.0, 0}, 128},
    {"sections {5, 0, 3} d=16, ntk s=2", {REF_SECTIONS, 3, {5, 0, 3}, NULL, 2, 2.0, 0}, 16},
    {"mixed A=2 d=16", {REF_MIXED, 2, {0}, W2, 0, 1.0, 8}, 16},
    {"mixed A=3 d=12", {REF_MIXED, 3, {0}, W3, 0, 1.0, 6}, 12},
};

/* n random vector positions of A axes in [lo, hi]. */
static void rand_positions(int64_t *pos, int64_t n, int A, int64_t lo, int64_t hi)
{
    for (int64_t k = 0; k < n * A; k++)
        pos[k] = lo + (int64_t)floor(check_rand(&rng_state, 0.0, (double)(hi - lo + 1)));
}

/* ---- 1. tables against the references ------------------------------------------------------ */

enum { TN = 9 };

static void test_tables(void)
{
    printf("tables against the references\n");
    for (int sc = 0; sc < NSCHEMES; sc++)
        for (int ci = 0; ci < 2; ci++) {
            const ref_scheme *r = &schemes[sc].r;
            int64_t d = schemes[sc].d_rot, half = d / 2;
            double c = ci ? 2.0 : 1.0;
            int64_t pos[TN * 3];
            rand_positions(pos, TN, r->A, -60, 200);
            rp_rope_freq f = freq_of(r);
            CHECK_MSG(rp_rope_freq_check(&f), RP_OK, "");
            CHECK_MSG(rp_rope_freq_check_use(&f, d, 0, "d_rot"), RP_OK, "");
            float cs[TN * MAXH], sn[TN * MAXH];
            rp_rope_freq_tables(cs, sn, &f, d, RP_ROPE_BASE, c, 1, pos, 0, TN);
            double worst = 0.0;
            for (int64_t t = 0; t < TN; t++) {
                double ang[MAXH];
                ref_angles(ang, r, half, RP_ROPE_BASE, c, pos + t * r->A);
                for (int64_t i = 0; i < half; i++) {
                    double wc = cos(ang[i]), ws = sin(ang[i]);
                    /* one float rounding, plus the angle's own rounding in double */
                    double bound = 0x1p-24 + 1e-12 * (1.0 + fabs(ang[i]));
                    worst = fmax(worst, fabs((double)cs[t * half + i] - wc) / bound);
                    worst = fmax(worst, fabs((double)sn[t * half + i] - ws) / bound);
                }
            }
            if (CHECK(worst <= 1.0, "%s c=%g: error %.3g of the bound", schemes[sc].name, c,
                      worst))
                printf("  ok %s, c = %g: max error %.3g of one float rounding\n",
                       schemes[sc].name, c, worst);
            if (r->map == REF_MIXED) continue;
            /* theta and the pair axes */
            double th[MAXH], freq[MAXH];
            int ax[MAXH], axis[MAXH], bad = 0;
            rp_rope_freq_theta(th, &f, d, RP_ROPE_BASE);
            rp_rope_freq_pair_axes(ax, &f, d);
            ref_freqs(freq, axis, r, half, RP_ROPE_BASE);
            for (int64_t i = 0; i < half; i++)
                bad += fabs(th[i] - freq[i]) > 1e-14 * freq[i] || ax[i] != axis[i];
            CHECK(bad == 0, "%s: %d pairs with another theta or axis than the reference",
                  schemes[sc].name, bad);
        }
    /* mixed: every pair turns by all axes */
    rp_rope_freq f = freq_of(&schemes[7].r);
    int ax[8], all = 1;
    rp_rope_freq_pair_axes(ax, &f, 16);
    for (int i = 0; i < 8; i++) all &= ax[i] == -1;
    CHECK(all, "mixed: pair axes -1");
}

/* ---- 2. one axis: today's tables bit for bit ----------------------------------------------- */

static void test_one_axis(void)
{
    printf("one axis, bit for bit\n");
    enum { N = 11, D = 12, H = D / 2 };
    const int64_t pos[N] = {0, 5, -3, 100, 77, 1, 40, 9999, -250, 7, 3};
    double th[H];
    for (int i = 0; i < H; i++) th[i] = check_rand(&rng_state, -1.5, 1.5);
    const char *names[8] = {"standard", "pi s=4", "ntk s=8.5", "yarn s=4 L=300",
                            "dynamic s=4 L=20", "llama3 s=8 L=300", "xpos 0.4", "freq + yarn"};
    int cases = 0;
    for (int sch = 0; sch < 8; sch++)
        for (int form = 0; form < 4; form++) /* axial n=1, sections {H} n=1, (t,t,t) x2 */
            for (int ci = 0; ci < 2; ci++) {
                rp_rope_freq base = rp_rope_freq_default();
                rp_rope_scaling scs[6] = {RP_SCALING_NONE, RP_SCALING_PI, RP_SCALING_NTK,
                                          RP_SCALING_YARN, RP_SCALING_DYNAMIC, RP_SCALING_LLAMA3};
                double fac[6] = {1.0, 4.0, 8.5, 4.0, 4.0, 8.0};
                if (sch < 6) base.scaling = scs[sch], base.factor = fac[sch];
                base.orig_len = sch == 4 ? 20.0 : 300.0;
                if (sch == 6) base.xpos = 0.4, base.xpos_scale_base = 64.0;
                if (sch == 7) base.theta = th, base.n_theta = H, base.scaling = RP_SCALING_YARN,
                              base.factor = 4.0, base.orig_len = 30.0;
                if (form >= 2 && (sch == 4 || sch == 6)) continue; /* scalar positions only */
                rp_rope_freq f = base;
                f.axes.n = form < 2 ? 1 : 3;
                if (form == 1) f.axes.map = RP_AXES_SECTIONS, f.axes.sections[0] = H;
                if (form >= 2) f.axes.map = form == 2 ? RP_AXES_SECTIONS : RP_AXES_AXIAL;
                if (form == 2) f.axes.sections[0] = 1, f.axes.sections[1] = 2,
                               f.axes.sections[2] = 3;
                CHECK_MSG(rp_rope_freq_check(&f), RP_OK, "");
                double c = ci ? 2.0 : 1.0;
                float a[2][N * H], b[2][N * H];
                rp_rope_freq_tables(a[0], b[0], &base, D, RP_ROPE_BASE, c, -1,
                                    form < 2 ? pos : NULL, 13, N);
                rp_rope_freq_tables(a[1], b[1], &f, D, RP_ROPE_BASE, c, -1,
                                    form < 2 ? pos : NULL, 13, N);
                if (form == 3) { /* axial (t,t,t) is not the 1-D table: each block its own
                                  * theta; but freq (under YaRN's ramp by wavelength) is */
                    CHECK((memcmp(a[0], a[1], sizeof a[0]) == 0) == (sch == 7),
                          "axial A=3 at (t,t,t) %s the 1-D table (%s)",
                          sch == 7 ? "differs from" : "equals", names[sch]);
                    continue;
                }
                CHECK(!memcmp(a[0], a[1], sizeof a[0]) && !memcmp(b[0], b[1], sizeof b[0]),
                      "%s, form %d, c=%g: the tables of one axis are not today's bitwise",
                      names[sch], form, c);
                cases++;
            }
    printf("  ok %d schemes x forms (axial n=1, sections n=1, sections at (t,t,t)) bitwise\n",
           cases);
    /* mixed with one axis: the freq table of W[0] (signed zeros included) */
    double W[H];
    for (int i = 0; i < H; i++) W[i] = th[i];
    W[2] = -0.5;
    rp_rope_freq fr = rp_rope_freq_default(), mx = rp_rope_freq_default();
    fr.theta = W, fr.n_theta = H;
    mx.axes.n = 1, mx.axes.map = RP_AXES_MIXED, mx.axes.mix = W, mx.axes.n_mix = H;
    float a[2][N * H], b[2][N * H];
    rp_rope_freq_tables(a[0], b[0], &fr, D, RP_ROPE_BASE, 1.0, 1, pos, 0, N);
    rp_rope_freq_tables(a[1], b[1], &mx, D, RP_ROPE_BASE, 1.0, 1, pos, 0, N);
    CHECK(!memcmp(a[0], a[1], sizeof a[0]) && !memcmp(b[0], b[1], sizeof b[0]),
          "mixed with one axis == freq W[0] bitwise");
    /* rp_rope_rotate: [T x 1] positions through axes n = 1 == scalar positions */
    rp_tensor x = check_new(2, CHECK_SHAPE(N, D)), y0, y1;
    check_fill_rand(&x, &rng_state, -1.0, 1.0);
    rp_rope_freq sec = rp_rope_freq_default();
    sec.axes.n = 1, sec.axes.map = RP_AXES_SECTIONS, sec.axes.sections[0] = H;
    rp_rope_cfg cfg = rp_rope_cfg_default(D);
    cfg.pos_dim = 0, cfg.positions = pos;
    CHECK_MSG(rp_rope_rotate(&y0, &x, &cfg), RP_OK, "");
    cfg.freq = &sec;
    CHECK_MSG(rp_rope_rotate(&y1, &x, &cfg), RP_OK, "");
    CHECK(!memcmp(rp_tensor_data(&y0), rp_tensor_data(&y1), sizeof(float) * N * D),
          "rotate with one sections axis == scalar positions bitwise");
    rp_tensor_release(&x), rp_tensor_release(&y0), rp_tensor_release(&y1);
}

/* ---- 3. rotations: the reference, the inverse, the shift property --------------------------- */

/* The first d features of x rotated in place by the reference angles (sign -1: backwards),
 * pairs as the pairing, in double. */
static void ref_rotate_d(double *x, const double *ang, int64_t d, int interleaved, int sign)
{
    int64_t half = d / 2;
    for (int64_t i = 0; i < half; i++) {
        int64_t a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
        double c = cos(ang[i]), s = sign * sin(ang[i]), xa = x[a], xb = x[b];
        x[a] = xa * c - xb * s;
        x[b] = xb * c + xa * s;
    }
}

/* x [d] rotated into y [d] as ref_rotate_d. */
static void ref_rotate(double *y, const float *x, const double *ang, int64_t d, int interleaved,
                       int sign)
{
    for (int64_t k = 0; k < d; k++) y[k] = (double)x[k];
    ref_rotate_d(y, ang, d, interleaved, sign);
}

/* rp_rope_rotate of the rows x [n x d] at the vector positions pos [n x A]. */
static void rotate_rows(float *out, const float *x, int64_t n, int64_t d, const rp_rope_freq *f,
                        const int64_t *pos, int interleaved, int sign)
{
    rp_tensor t = check_new(2, CHECK_SHAPE(n, d)), y;
    check_scatter(&t, x);
    rp_rope_cfg cfg = rp_rope_cfg_default(d);
    cfg.pos_dim = 0, cfg.positions = pos, cfg.freq = f, cfg.sign = sign;
    cfg.pairing = interleaved ? RP_PAIR_INTERLEAVED : RP_PAIR_HALF;
    CHECK_MSG(rp_rope_rotate(&y, &t, &cfg), RP_OK, "");
    check_gather(out, &y);
    rp_tensor_release(&t), rp_tensor_release(&y);
}

static double dot(const float *a, const float *b, int64_t d)
{
    double s = 0.0;
    for (int64_t i = 0; i < d; i++) s += (double)a[i] * (double)b[i];
    return s;
}

static void test_rotations(void)
{
    printf("rotations: reference, inverse, shift\n");
    enum { R = 6 };
    for (int sc = 0; sc < NSCHEMES; sc++)
        for (int il = 0; il < 2; il++) {
            const ref_scheme *r = &schemes[sc].r;
            int64_t d = schemes[sc].d_rot, half = d / 2;
            int A = r->A;
            rp_rope_freq f = freq_of(r);
            float *x = check_rand_floats(&rng_state, R * d, -1.0, 1.0);
            float *y = malloc(sizeof(float) * (size_t)(R * d));
            float *back = malloc(sizeof(float) * (size_t)(R * d));
            int64_t pos[R * 3];
            rand_positions(pos, R, A, -40, 90);
            rotate_rows(y, x, R, d, &f, pos, il, 1);
            rotate_rows(back, y, R, d, &f, pos, il, -1);
            double wr = 0.0, wb = 0.0;
            for (int64_t t = 0; t < R; t++) {
                double ang[MAXH], yr[2 * MAXH];
                ref_angles(ang, r, half, RP_ROPE_BASE, 1.0, pos + t * A);
                ref_rotate(yr, x + t * d, ang, d, il, 1);
                for (int64_t k = 0; k < d; k++) {
                    wr = fmax(wr, fabs((double)y[t * d + k] - yr[k]));
                    wb = fmax(wb, fabs((double)back[t * d + k] - (double)x[t * d + k]));
                }
            }
            CHECK(wr <= 1e-6, "%s %s: rotate vs reference %.3g", schemes[sc].name,
                  il ? "interleaved" : "half", wr);
            CHECK(wb <= 1e-6, "%s %s: rotate(rotate(x), sign -1) - x %.3g", schemes[sc].name,
                  il ? "interleaved" : "half", wb);
            /* the shift property: q at P, k at Q (rows 0, 1); both shifted by S (rows 2, 3,
             * S with negative entries too); and k at Q + e_0 (row 4, q at P in row 5) */
            float qk[R * 2 * MAXH], rot[R * 2 * MAXH];
            for (int64_t k = 0; k < d; k++)
                qk[k] = qk[2 * d + k] = qk[5 * d + k] = x[k],
                qk[d + k] = qk[3 * d + k] = qk[4 * d + k] = x[d + k];
            int64_t sp[R * 3];
            for (int a = 0; a < A; a++) {
                int64_t S = a == 0 ? 97 : a == 1 ? -130 : 41;
                sp[a] = pos[a], sp[A + a] = pos[A + a];
                sp[2 * A + a] = pos[a] + S, sp[3 * A + a] = pos[A + a] + S;
                sp[4 * A + a] = pos[A + a] + (a == 0), sp[5 * A + a] = pos[a];
            }
            rotate_rows(rot, qk, R, d, &f, sp, il, 1);
            double s0 = dot(rot, rot + d, d), s1 = dot(rot + 2 * d, rot + 3 * d, d);
            double s2 = dot(rot + 5 * d, rot + 4 * d, d);
            /* the score's reference: q . R(angle(Q) - angle(P)) k */
            double aP[MAXH], aQ[MAXH], dl[MAXH], kr[2 * MAXH];
            ref_angles(aP, r, half, RP_ROPE_BASE, 1.0, pos);
            ref_angles(aQ, r, half, RP_ROPE_BASE, 1.0, pos + A);
            for (int64_t i = 0; i < half; i++) dl[i] = aQ[i] - aP[i];
            ref_rotate(kr, x + d, dl, d, il, 1);
            double sw = 0.0;
            for (int64_t k = 0; k < d; k++) sw += (double)x[k] * kr[k];
            CHECK(fabs(s0 - sw) <= 1e-5, "%s: score %.9g, reference %.9g", schemes[sc].name, s0,
                  sw);
            CHECK(fabs(s1 - s0) <= 1e-5, "%s: the score moved by %.3g under the shift",
                  schemes[sc].name, fabs(s1 - s0));
            CHECK(fabs(s2 - s0) > 1e-3, "%s: the score ignores P - Q (moved %.3g)",
                  schemes[sc].name, fabs(s2 - s0));
            if (il == 0)
                printf("  ok %s: reference %.2g, inverse %.2g, shift %.2g, offset moves %.2g\n",
                       schemes[sc].name, wr, wb, fabs(s1 - s0), fabs(s2 - s0));
            free(x), free(y), free(back);
        }
}

/* Axial per axis: a scaling of an axis's block is that of a 1-D RoPE of the block's width (the
 * YaRN ramp by wavelength and llama3 included). */
static void test_axial_scalings(void)
{
    printf("axial: the scalings per axis\n");
    rp_rope_scaling scs[4] = {RP_SCALING_PI, RP_SCALING_NTK, RP_SCALING_YARN, RP_SCALING_LLAMA3};
    int bad = 0;
    for (int k = 0; k < 4; k++)
        for (int ramp = 0; ramp < (scs[k] == RP_SCALING_YARN ? 3 : 1); ramp++) {
            rp_rope_freq f = rp_rope_freq_default();
            f.scaling = scs[k], f.factor = 4.0, f.orig_len = 40.0;
            f.yarn_ramp = (rp_yarn_ramp)ramp;
            rp_rope_freq one = f; /* 1-D, each block's width */
            f.axes.n = 3;         /* d 22: 11 pairs, blocks 4 + 4 + 3 */
            double th[11], t8[4], t6[3];
            rp_rope_freq_theta(th, &f, 22, 500.0);
            rp_rope_freq_theta(t8, &one, 8, 500.0);
            rp_rope_freq_theta(t6, &one, 6, 500.0);
            for (int i = 0; i < 11; i++) {
                double w = i < 8 ? t8[i % 4] : t6[i - 8];
                bad += th[i] != w;
            }
        }
    CHECK(bad == 0, "axial blocks == 1-D RoPE of their width: %d pairs differ", bad);
    /* sections: the 1-D frequencies whatever the sections */
    rp_rope_freq f = rp_rope_freq_default(), one;
    f.scaling = RP_SCALING_YARN, f.factor = 8.0, f.orig_len = 64.0;
    one = f;
    f.axes.n = 3, f.axes.map = RP_AXES_SECTIONS;
    f.axes.sections[0] = 4, f.axes.sections[1] = 6, f.axes.sections[2] = 6;
    double a[16], b[16];
    rp_rope_freq_theta(a, &f, 32, RP_ROPE_BASE);
    rp_rope_freq_theta(b, &one, 32, RP_ROPE_BASE);
    CHECK(!memcmp(a, b, sizeof a), "sections: theta == the 1-D theta under yarn");
}

/* ---- 4. refusals --------------------------------------------------------------------------- */

static void test_checks(void)
{
    printf("checks\n");
    double W[6] = {1, 2, 3, 4, 5, 6}, th[4] = {1, 2, 3, 4};
    rp_rope_freq f = rp_rope_freq_default();
    f.axes.n = 4;
    FCHECK("axes: 1 to 3 axes expected, got 4");
    f.axes.n = -1;
    FCHECK("axes: 1 to 3 axes expected, got -1");
    f.axes.n = 2, f.axes.map = (rp_axes_map)3;
    FCHECK("unknown axes map 3");
    f = rp_rope_freq_default();
    f.axes.map = RP_AXES_SECTIONS;
    FCHECK("axes sections needs vector positions (axes.n 0 is a scalar position)");
    f.axes.n = 2, f.axes.sections[0] = 3, f.axes.sections[1] = -1;
    FCHECK("sections: axis 1 has -1 pairs; a count must be >= 0");
    f.axes.sections[1] = 1, f.axes.sections[2] = 2;
    FCHECK("sections: axis 2 of 2 has 2 pairs with axes sections (sections apply to axes "
           "sections, one per axis)");
    f.axes.sections[2] = 0, f.axes.map = RP_AXES_AXIAL;
    FCHECK("sections: axis 0 of 2 has 3 pairs with axes axial (sections apply to axes "
           "sections, one per axis)");
    f = rp_rope_freq_default();
    f.axes.n = 2, f.axes.map = RP_AXES_MIXED;
    FCHECK("axes mixed needs its frequency matrix mix");
    f.axes.map = RP_AXES_SECTIONS, f.axes.mix = W, f.axes.n_mix = 3;
    FCHECK("mix is given with axes sections (it is the frequency matrix of axes mixed)");
    f.axes.map = RP_AXES_MIXED;
    CHECK_MSG(rp_rope_freq_check(&f), RP_OK, "");
    f.axes.n_mix = 0;
    FCHECK("mix must not be empty");
    f.axes.n_mix = 3, W[4] = NAN;
    FCHECK("mix: axis 1, pair 1 has frequency nan; frequencies must be finite");
    W[4] = 5;
    f.theta = th, f.n_theta = 4;
    FCHECK("freq and mix exclude each other (the mix matrix holds the frequencies)");
    f.theta = NULL, f.scaling = RP_SCALING_PI, f.factor = 2.0;
    FCHECK("scaling pi does not apply to a mix matrix (its frequencies are final; scale them "
           "yourself)");
    f = rp_rope_freq_default();
    f.axes.n = 2;
    f.scaling = RP_SCALING_DYNAMIC, f.factor = 2.0, f.orig_len = 16.0;
    FCHECK("scaling dynamic (its factor grows with the position) needs scalar positions; these "
           "have 2 axes");
    f.scaling = RP_SCALING_NONE, f.xpos = 0.4;
    FCHECK("xpos (its decay runs along one position) needs scalar positions; these have 2 axes");
    f.xpos = 0.0, f.angles = W, f.rows = 2, f.n_angles = 3;
    FCHECK("angles (a table of one position per row) needs scalar positions; these have 2 axes");
    f.axes.n = 1; /* one axis: all of them apply */
    CHECK_MSG(rp_rope_freq_check(&f), RP_OK, "");
    /* against a width */
    f = rp_rope_freq_default();
    f.axes.n = 3, f.axes.map = RP_AXES_SECTIONS;
    f.axes.sections[0] = 16, f.axes.sections[1] = 24, f.axes.sections[2] = 20;
    CHECK_MSG(rp_rope_freq_check(&f), RP_OK, "");
    UCHECK(128, "sections {16, 24, 20} hold 60 pairs; d_rot 128 has 64");
    f.axes.sections[2] = 24;
    CHECK_MSG(rp_rope_freq_check_use(&f, 128, 0, "d_rot"), RP_OK, "");
    f.axes.map = RP_AXES_AXIAL;
    memset(f.axes.sections, 0, sizeof f.axes.sections);
    UCHECK(4, "axes axial: d_rot 4 has 2 pairs, fewer than its 3 axes");
    CHECK_MSG(rp_rope_freq_check_use(&f, 6, 0, "d_rot"), RP_OK, "");
    f.axes.n = 2, f.axes.map = RP_AXES_MIXED, f.axes.mix = W, f.axes.n_mix = 3;
    CHECK_MSG(rp_rope_freq_check_use(&f, 8, 0, "d_rot_q"), RP_ERR_ARG,
              "mix holds 3 pairs per axis; d_rot_q 8 needs 4");
    CHECK_MSG(rp_rope_freq_check_use(&f, 6, 0, "d_rot"), RP_OK, "");
    /* through rp_rope_rotate */
    rp_tensor x = check_new(2, CHECK_SHAPE(3, 8)), y;
    int64_t pos[6] = {0, 1, 2, 3, 4, 5};
    rp_rope_cfg cfg = rp_rope_cfg_default(8);
    cfg.pos_dim = 0, cfg.positions = pos, cfg.freq = &f;
    CHECK_MSG(rp_rope_rotate(&y, &x, &cfg), RP_ERR_ARG,
              "mix holds 3 pairs per axis; d_rot 8 needs 4");
    cfg.d_rot = 6;
    CHECK_MSG(rp_rope_rotate(&y, &x, &cfg), RP_OK, "");
    rp_tensor_release(&y);
    f.axes.n = 5;
    CHECK_MSG(rp_rope_rotate(&y, &x, &cfg), RP_ERR_ARG, "axes: 1 to 3 axes expected, got 5");
    rp_tensor_release(&x);
    /* rp_rope_freq_equal and is_plain see the axes */
    rp_rope_freq a = rp_rope_freq_default(), b = rp_rope_freq_default();
    b.axes.n = 1;
    CHECK(rp_rope_freq_equal(&a, &b) && rp_rope_freq_is_plain(&b), "one axial axis is plain");
    b.axes.n = 2;
    CHECK(!rp_rope_freq_equal(&a, &b) && !rp_rope_freq_is_plain(&b), "two axes are not plain");
    a.axes.n = 2, a.axes.map = b.axes.map = RP_AXES_SECTIONS;
    a.axes.sections[0] = b.axes.sections[0] = 2, a.axes.sections[1] = 3, b.axes.sections[1] = 4;
    CHECK(!rp_rope_freq_equal(&a, &b), "other sections differ");
    b.axes.sections[1] = 3;
    CHECK(rp_rope_freq_equal(&a, &b), "same sections equal");
    double W2c[6] = {1, 2, 3, 4, 5, 6};
    a = b = rp_rope_freq_default();
    a.axes.n = b.axes.n = 2, a.axes.map = b.axes.map = RP_AXES_MIXED;
    a.axes.mix = W, b.axes.mix = W2c, a.axes.n_mix = b.axes.n_mix = 3;
    CHECK(rp_rope_freq_equal(&a, &b), "same mix equal");
    W2c[5] = 6.5;
    CHECK(!rp_rope_freq_equal(&a, &b), "another mix differs");
}

/* rp_attention_check's explicit positions: enough rows, no pos_offset beside them, entries
 * within 2^53, none below 0 with an angle table; axes without positions read (t, t) */
static void test_attention_checks(void)
{
    printf("attention checks\n");
    int64_t sh[4] = {1, 3, 1, 4};
    rp_tensor q = {0};
    CHECK(rp_tensor_new(&q, 4, sh) == RP_OK, "a tensor");
    rp_rope_freq f = rp_rope_freq_default();
    f.axes.n = 2, f.axes.map = RP_AXES_AXIAL;
    rp_attn_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.scheme = check_scheme(RP_PE_ROPE, 4, 0), cfg.causal = 1, cfg.scale = 0.5;
    cfg.freq = &f;
    CHECK_MSG(rp_attention_check(&q, &q, &q, &cfg), RP_OK, "");
    int64_t pos[8] = {0, 0, 0, 1, 1, 0, 1, 1};
    cfg.pos = pos, cfg.pos_rows = 2;
    CHECK_MSG(rp_attention_check(&q, &q, &q, &cfg), RP_ERR_ARG,
              "positions hold 2 rows; this call reads 3 (keys 0..2, queries 0..2)");
    cfg.pos_rows = 4;
    CHECK_MSG(rp_attention_check(&q, &q, &q, &cfg), RP_OK, "");
    cfg.pos_offset = 2;
    CHECK_MSG(rp_attention_check(&q, &q, &q, &cfg), RP_ERR_ARG,
              "pos_offset 2 and explicit positions exclude each other (shift the positions "
              "instead)");
    cfg.pos_offset = 0;
    pos[5] = ((int64_t)1 << 53) + 1;
    CHECK_MSG(rp_attention_check(&q, &q, &q, &cfg), RP_ERR_ARG,
              "positions: row 2, axis 1 holds 9007199254740993; positions must be within 2^53");
    /* one axis with an angle table: no position below 0 or past the table */
    double ang[6] = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6};
    f = rp_rope_freq_default();
    f.angles = ang, f.rows = 3, f.n_angles = 2;
    int64_t p1[3] = {0, -1, 2};
    cfg.pos = p1, cfg.pos_rows = 3;
    CHECK_MSG(rp_attention_check(&q, &q, &q, &cfg), RP_ERR_ARG,
              "positions: row 1 holds -1, below 0, where the angle table starts");
    p1[1] = 3;
    CHECK_MSG(rp_attention_check(&q, &q, &q, &cfg), RP_ERR_ARG,
              "angles hold positions 0..2; position 3 is asked");
    p1[1] = 1;
    CHECK_MSG(rp_attention_check(&q, &q, &q, &cfg), RP_OK, "");
    rp_tensor_release(&q);
}

/* ---- 5. attention with vector positions ---------------------------------------------------- */

/* Attention (core/nn/attention.h, rp_attn_cfg.pos) against a double reference of its formulas:
 * key i at position row i, query t at row n = q_offset + t; q_n and k_i rotated by the angles
 * of their rows (ref_angles, the first d_rot_qk features); s = scale q.k masked to i <= n under
 * the causal mask; a = softmax(s); rope: o_n = sum_i a_i v_i; roper (roper_legacy): v_i rotated
 * by c = 1 (2) times the angles of row i, the sum rotated back by the angles of the QUERY's row
 * n (the first d_rot_v features). */

enum { AMAXS = 8, AMAXD = 2 * MAXH + 4 };

typedef struct {
    int64_t B, T, S, H, D, Dv;
} adims;

/* One head (b, h) of contiguous double q [B,T,H,D], k [B,S,H,D], v [B,S,H,Dv]: o [T x Dv] and,
 * when att is not NULL, att [T x S]. cfg gives the scheme (pe, base, pairing, the widths of the
 * mode's own placements), causal, scale and q_offset; r and pos [rows x A] the positions'
 * angles. */
static void ref_attn_head(double *o, double *att, const double *q, const double *k,
                          const double *v, adims d, const rp_attn_cfg *cfg, const ref_scheme *r,
                          const int64_t *pos, int64_t b, int64_t h)
{
    static double kr[AMAXS][AMAXD], vr[AMAXS][AMAXD];
    double qr[AMAXD], ang[MAXH], s[AMAXS];
    const rp_pe_scheme *sc = &cfg->scheme;
    int A = r->A, il = sc->pairing == RP_PAIR_INTERLEAVED, rv = sc->pe != RP_PE_ROPE;
    double c = sc->pe == RP_PE_ROPER_LEGACY ? 2.0 : 1.0;
    int64_t hq = sc->d_rot_q / 2, hv = sc->d_rot_v / 2;
    for (int64_t i = 0; i < d.S; i++) {
        for (int64_t f = 0; f < d.D; f++) kr[i][f] = k[((b * d.S + i) * d.H + h) * d.D + f];
        for (int64_t f = 0; f < d.Dv; f++) vr[i][f] = v[((b * d.S + i) * d.H + h) * d.Dv + f];
        ref_angles(ang, r, hq, sc->base, 1.0, pos + i * A);
        ref_rotate_d(kr[i], ang, sc->d_rot_k, il, 1);
        if (!rv) continue;
        ref_angles(ang, r, hv, sc->base, c, pos + i * A);
        ref_rotate_d(vr[i], ang, sc->d_rot_v, il, 1);
    }
    for (int64_t t = 0; t < d.T; t++) {
        int64_t n = cfg->q_offset + t;
        for (int64_t f = 0; f < d.D; f++) qr[f] = q[((b * d.T + t) * d.H + h) * d.D + f];
        ref_angles(ang, r, hq, sc->base, 1.0, pos + n * A);
        ref_rotate_d(qr, ang, sc->d_rot_q, il, 1);
        double m = -HUGE_VAL, z = 0.0;
        for (int64_t i = 0; i < d.S; i++) {
            s[i] = 0.0;
            for (int64_t f = 0; f < d.D; f++) s[i] += qr[f] * kr[i][f];
            s[i] *= cfg->scale;
            if (!(cfg->causal && i > n)) m = fmax(m, s[i]);
        }
        for (int64_t i = 0; i < d.S; i++) z += s[i] = cfg->causal && i > n ? 0.0 : exp(s[i] - m);
        double *ot = o + t * d.Dv;
        for (int64_t f = 0; f < d.Dv; f++) ot[f] = 0.0;
        for (int64_t i = 0; i < d.S; i++) {
            if (att) att[t * d.S + i] = s[i] / z;
            for (int64_t f = 0; f < d.Dv; f++) ot[f] += s[i] / z * vr[i][f];
        }
        if (!rv) continue;
        ref_angles(ang, r, hv, sc->base, 1.0, pos + n * A);
        ref_rotate_d(ot, ang, sc->d_rot_o, il, -1);
    }
}

/* The kernels' results: out [B,T,H,Dv], att [B,H,T,S], lse, and the gradients of the loss
 * sum(out * G). */
typedef struct {
    float *out, *att, *lse, *dq, *dk, *dv;
} aresult;

static aresult run_attn(adims d, const float *q, const float *k, const float *v, const float *G,
                        const rp_attn_cfg *cfg, int nthreads)
{
    int64_t nq = d.B * d.T * d.H * d.D, nk = d.B * d.S * d.H * d.D, nv = d.B * d.S * d.H * d.Dv;
    int64_t no = d.B * d.T * d.H * d.Dv;
    aresult r;
    r.out = calloc((size_t)no, sizeof(float));
    r.att = calloc((size_t)(d.B * d.H * d.T * d.S), sizeof(float));
    r.lse = calloc((size_t)(d.B * d.H * d.T), sizeof(float));
    r.dq = calloc((size_t)nq, sizeof(float));
    r.dk = calloc((size_t)nk, sizeof(float));
    r.dv = calloc((size_t)nv, sizeof(float));
    float *scratch = malloc(sizeof(float) * (size_t)rp_attention_scratch_floats(
                                                cfg, d.B, d.T, d.S, d.H, d.D, d.Dv, nthreads));
    rp_attn_io io = {.B = d.B, .T = d.T, .S = d.S, .H = d.H, .D = d.D, .Dv = d.Dv, .q = q,
                     .k = k, .v = v, .ldq = d.H * d.D, .ldk = d.H * d.D, .ldv = d.H * d.Dv,
                     .out = r.out, .ldo = d.H * d.Dv, .lse = r.lse, .att = r.att, .dout = G,
                     .dq = r.dq, .dk = r.dk, .dv = r.dv, .scratch = scratch,
                     .nthreads = nthreads};
    rp_attention_forward(&io, cfg);
    if (G) rp_attention_backward(&io, cfg);
    free(scratch);
    return r;
}

static void aresult_free(aresult *r)
{
    free(r->out), free(r->att), free(r->lse), free(r->dq), free(r->dk), free(r->dv);
}

/* The float arrays of two results are the same bits (the gradients when both have them). */
static int same_bits(const aresult *a, const aresult *b, adims d, int grads)
{
    int64_t no = d.B * d.T * d.H * d.Dv, na = d.B * d.H * d.T * d.S;
    int64_t nq = d.B * d.T * d.H * d.D, nk = d.B * d.S * d.H * d.D, nv = d.B * d.S * d.H * d.Dv;
    int same = !memcmp(a->out, b->out, sizeof(float) * (size_t)no) &&
               !memcmp(a->att, b->att, sizeof(float) * (size_t)na) &&
               !memcmp(a->lse, b->lse, sizeof(float) * (size_t)(d.B * d.H * d.T));
    if (grads)
        same = same && !memcmp(a->dq, b->dq, sizeof(float) * (size_t)nq) &&
               !memcmp(a->dk, b->dk, sizeof(float) * (size_t)nk) &&
               !memcmp(a->dv, b->dv, sizeof(float) * (size_t)nv);
    return same;
}

/* sum(o * G) over head (b, h) of the reference. */
static double ref_attn_loss(const double *q, const double *k, const double *v, const double *G,
                            adims d, const rp_attn_cfg *cfg, const ref_scheme *r,
                            const int64_t *pos, int64_t b, int64_t h)
{
    static double o[AMAXS * AMAXD];
    ref_attn_head(o, NULL, q, k, v, d, cfg, r, pos, b, h);
    double L = 0.0;
    for (int64_t t = 0; t < d.T; t++)
        for (int64_t f = 0; f < d.Dv; f++)
            L += o[t * d.Dv + f] * G[((b * d.T + t) * d.H + h) * d.Dv + f];
    return L;
}

static double *doubles_of(const float *x, int64_t n)
{
    double *y = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) y[i] = (double)x[i];
    return y;
}

/* The largest |got - want| of the gradient of x (one of q, k, v: L rows per batch row, W
 * features per head) against central differences of the reference loss in double (h = 1e-5:
 * truncation ~1e-10, rounding ~1e-11; only the element's own head is evaluated). */
static double fd_err(const float *got, double *x, int64_t L, int64_t W, const double *q,
                     const double *k, const double *v, const double *G, adims d,
                     const rp_attn_cfg *cfg, const ref_scheme *r, const int64_t *pos)
{
    const double eps = 1e-5;
    double worst = 0.0;
    for (int64_t b = 0; b < d.B; b++)
        for (int64_t l = 0; l < L; l++)
            for (int64_t h = 0; h < d.H; h++)
                for (int64_t f = 0; f < W; f++) {
                    int64_t i = ((b * L + l) * d.H + h) * W + f;
                    double x0 = x[i];
                    x[i] = x0 + eps;
                    double lp = ref_attn_loss(q, k, v, G, d, cfg, r, pos, b, h);
                    x[i] = x0 - eps;
                    double lm = ref_attn_loss(q, k, v, G, d, cfg, r, pos, b, h);
                    x[i] = x0;
                    worst = fmax(worst, fabs((double)got[i] - (lp - lm) / (2.0 * eps)));
                }
    return worst;
}

/* The attention config of a test: pe, pairing, d_rot_qk, d_rot_v, the positions. */
static rp_attn_cfg axes_cfg(rp_pe pe, int il, int64_t d_rot, int64_t d_rot_v, int64_t D,
                            int64_t q_offset, const rp_rope_freq *f, const int64_t *pos,
                            int64_t rows)
{
    rp_attn_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.scheme = check_scheme(pe, d_rot, d_rot_v);
    cfg.scheme.pairing = il ? RP_PAIR_INTERLEAVED : RP_PAIR_HALF;
    cfg.causal = 1, cfg.scale = 1.0 / sqrt((double)D), cfg.q_offset = q_offset;
    cfg.freq = f, cfg.pos = pos, cfg.pos_rows = rows;
    return cfg;
}

static const rp_pe attn_pes[3] = {RP_PE_ROPE, RP_PE_ROPER, RP_PE_ROPER_LEGACY};

/* d_rot_v of a test: d_rot, or with narrow (not for sections, which fit one width) d_rot - 4,
 * so that v and o get tables of their own (attention.c shares equal ones). */
static int64_t v_width(const ref_scheme *r, int64_t d_rot, int narrow)
{
    return narrow && r->map != REF_SECTIONS ? d_rot - 4 : d_rot;
}

/* Tolerances. out and att: probabilities and sums of a few values of magnitude <= 1 from float
 * scores of up to 132 products of magnitude <= 1 scaled by 1/sqrt(D) (float error ~1e-6) and
 * float cos/sin tables (one rounding each); a wrong angle, row or sign moves them by 1e-2. The
 * gradients: the float kernel's rounding stays below ~1e-6 for these O(1) gradients (see
 * GRAD_TOL of test_attention.c). */
#define AX_TOL 5e-6
#define AX_GRAD_TOL 5e-6

/* The forward against the reference for every scheme (axial, sections, mixed; the scalings),
 * rope, roper and roper_legacy, both pairings, partial rotation (d_rot < D and < Dv), T < S
 * with q_offset > 0 (the last keys unseen) and queries past the keys (rows > S); the backward
 * against finite differences where d_rot <= 24. */
static void test_attention_reference(void)
{
    printf("attention with vector positions: the reference, the backward\n");
    struct {
        int64_t T, S, qo;
    } geo[2] = {{3, 6, 2}, {4, 5, 3}};
    double wout = 0.0, watt = 0.0, wgrad = 0.0;
    int cases = 0, fd_cases = 0;
    for (int sc = 0; sc < NSCHEMES; sc++)
        for (int pi = 0; pi < 3; pi++)
            for (int il = 0; il < 2; il++)
                for (int g = 0; g < 2; g++) {
                    const ref_scheme *r = &schemes[sc].r;
                    int64_t dr = schemes[sc].d_rot;
                    adims d = {2, geo[g].T, geo[g].S, 2, dr + 4, dr + 2};
                    int64_t rows = geo[g].qo + d.T > d.S ? geo[g].qo + d.T : d.S;
                    int64_t pos[AMAXS * 3];
                    rand_positions(pos, rows, r->A, -20, 60);
                    rp_rope_freq f = freq_of(r);
                    rp_attn_cfg cfg = axes_cfg(attn_pes[pi], il, dr, v_width(r, dr, il), d.D,
                                               geo[g].qo, &f, pos, rows);
                    int64_t nq = d.B * d.T * d.H * d.D, nk = d.B * d.S * d.H * d.D;
                    int64_t nv = d.B * d.S * d.H * d.Dv, no = d.B * d.T * d.H * d.Dv;
                    float *q = check_rand_floats(&rng_state, nq, -1.0, 1.0);
                    float *k = check_rand_floats(&rng_state, nk, -1.0, 1.0);
                    float *v = check_rand_floats(&rng_state, nv, -1.0, 1.0);
                    float *G = check_rand_floats(&rng_state, no, -1.0, 1.0);
                    int fd = dr <= 24;
                    aresult res = run_attn(d, q, k, v, fd ? G : NULL, &cfg, 1 + il);
                    double *qd = doubles_of(q, nq), *kd = doubles_of(k, nk);
                    double *vd = doubles_of(v, nv), *Gd = doubles_of(G, no);
                    double o[AMAXS * AMAXD], a[AMAXS * AMAXS], eo = 0.0, ea = 0.0;
                    for (int64_t b = 0; b < d.B; b++)
                        for (int64_t h = 0; h < d.H; h++) {
                            ref_attn_head(o, a, qd, kd, vd, d, &cfg, r, pos, b, h);
                            for (int64_t t = 0; t < d.T; t++) {
                                const float *go = res.out + ((b * d.T + t) * d.H + h) * d.Dv;
                                const float *ga = res.att + ((b * d.H + h) * d.T + t) * d.S;
                                for (int64_t e = 0; e < d.Dv; e++)
                                    eo = fmax(eo, fabs(o[t * d.Dv + e] - (double)go[e]));
                                for (int64_t i = 0; i < d.S; i++)
                                    ea = fmax(ea, fabs(a[t * d.S + i] - (double)ga[i]));
                            }
                        }
                    char label[200];
                    snprintf(label, sizeof label, "%s pe=%s %s T=%lld S=%lld q_offset=%lld",
                             schemes[sc].name, rp_pe_name(cfg.scheme.pe), il ? "interleaved" : "half",
                             (long long)d.T, (long long)d.S, (long long)cfg.q_offset);
                    CHECK(eo <= AX_TOL, "%s: out vs reference %.3g", label, eo);
                    CHECK(ea <= AX_TOL, "%s: att vs reference %.3g", label, ea);
                    wout = fmax(wout, eo), watt = fmax(watt, ea);
                    cases++;
                    if (fd) {
                        double e[3] = {fd_err(res.dq, qd, d.T, d.D, qd, kd, vd, Gd, d, &cfg, r,
                                              pos),
                                       fd_err(res.dk, kd, d.S, d.D, qd, kd, vd, Gd, d, &cfg, r,
                                              pos),
                                       fd_err(res.dv, vd, d.S, d.Dv, qd, kd, vd, Gd, d, &cfg, r,
                                              pos)};
                        const char *nm[3] = {"dq", "dk", "dv"};
                        for (int j = 0; j < 3; j++) {
                            CHECK(e[j] <= AX_GRAD_TOL, "%s: %s vs finite differences %.3g",
                                  label, nm[j], e[j]);
                            wgrad = fmax(wgrad, e[j]);
                        }
                        fd_cases++;
                    }
                    free(q), free(k), free(v), free(G), free(qd), free(kd), free(vd), free(Gd);
                    aresult_free(&res);
                }
    printf("  ok %d cases: out %.2g, att %.2g; %d backward cases vs finite differences: %.2g\n",
           cases, wout, watt, fd_cases, wgrad);
}

/* Decoding over a cache with vector positions: each token's output is the forward's of that one
 * query over the keys so far bit for bit (the decode runs the forward's query-block code,
 * forward_blocks, over the cache, on the same float cos/sin rows: rp_rope_freq_tables of the
 * same position row), with the rows built per token (rope_rows NULL) or once by
 * rp_attention_decode_rows (row p holds what a call for p alone gives). */
static void test_attention_decode(void)
{
    printf("attention with vector positions: decode\n");
    enum { H = 2, N = 7 };
    const int sel[3] = {0, 4, 8}; /* axial A=2, sections {2, 3, 3}, mixed A=3 */
    double worst = 0.0;
    int cases = 0, bitwise = 0;
    for (int si = 0; si < 3; si++)
        for (int pi = 0; pi < 3; pi++)
            for (int il = 0; il < 2; il++) {
                const ref_scheme *r = &schemes[sel[si]].r;
                int64_t dr = schemes[sel[si]].d_rot, D = dr + 4, Dv = dr + 2, cap = N + 1;
                int64_t pos[(N + 1) * 3];
                rand_positions(pos, cap, r->A, -20, 60);
                rp_rope_freq f = freq_of(r);
                rp_attn_cfg cfg = axes_cfg(attn_pes[pi], il, dr, v_width(r, dr, il), D, 0, &f,
                                           pos, cap);
                float *q = check_rand_floats(&rng_state, N * H * D, -1.0, 1.0);
                float *k = check_rand_floats(&rng_state, N * H * D, -1.0, 1.0);
                float *v = check_rand_floats(&rng_state, N * H * Dv, -1.0, 1.0);
                int64_t nc = rp_attention_cache_floats(cap, H, D, Dv);
                float *cache[2] = {check_rand_floats(&rng_state, nc, -1e3, 1e3),
                                   check_rand_floats(&rng_state, nc, -1e3, 1e3)};
                float *scratch =
                    malloc(sizeof(float) *
                           (size_t)rp_attention_decode_scratch_floats(&cfg, cap, H, D, Dv));
                float *rows = malloc(sizeof(float) *
                                     (size_t)rp_attention_decode_rows_floats(&cfg, cap));
                rp_attention_decode_rows(rows, &cfg, cap);
                rp_attn_cfg with_rows = cfg;
                with_rows.rope_rows = rows;
                int same = 1, nbits = 0;
                double err = 0.0;
                for (int64_t p = 0; p < N; p++) {
                    float qt[2][H * AMAXD], out[2][H * AMAXD];
                    memcpy(qt[0], q + p * H * D, sizeof(float) * (size_t)(H * D));
                    memcpy(qt[1], qt[0], sizeof(float) * (size_t)(H * D));
                    rp_attention_decode(out[0], scratch, qt[0], k + p * H * D, v + p * H * Dv,
                                        cache[0], cap, p, H, D, Dv, &cfg);
                    rp_attention_decode(out[1], scratch, qt[1], k + p * H * D, v + p * H * Dv,
                                        cache[1], cap, p, H, D, Dv, &with_rows);
                    same &= !memcmp(out[0], out[1], sizeof(float) * (size_t)(H * Dv));
                    /* the forward of query p over keys 0 .. p */
                    rp_attn_cfg fc = cfg;
                    fc.q_offset = p;
                    adims d = {1, 1, p + 1, H, D, Dv};
                    aresult res = run_attn(d, q + p * H * D, k, v, NULL, &fc, 1);
                    for (int64_t j = 0; j < H * Dv; j++)
                        err = fmax(err, fabs((double)out[0][j] - (double)res.out[j]));
                    nbits += !memcmp(out[0], res.out, sizeof(float) * (size_t)(H * Dv));
                    aresult_free(&res);
                }
                CHECK(same, "%s pe=%s %s: decode with rope_rows == without, bit for bit",
                      schemes[sel[si]].name, rp_pe_name(cfg.scheme.pe), il ? "interleaved" : "half");
                CHECK(nbits == N, "%s pe=%s %s: decode is the forward's row bit for bit in "
                      "%d of %d tokens (max |diff| %.3g)", schemes[sel[si]].name,
                      rp_pe_name(cfg.scheme.pe), il ? "interleaved" : "half", nbits, N, err);
                worst = fmax(worst, err);
                bitwise += nbits, cases++;
                free(q), free(k), free(v), free(cache[0]), free(cache[1]), free(scratch);
                free(rows);
            }
    printf("  ok %d cases x %d tokens: decode vs forward %.2g (%d of %d rows bitwise), "
           "rope_rows bitwise\n", cases, N, worst, bitwise, cases * N);
}

/* One axis: explicit positions pos[i] = i are pos = NULL bit for bit, and pos[i] = p + i are
 * pos_offset p (the forward's out, att, lse and the backward's gradients), plain and under
 * schemes of one position (yarn, xPos, an axes entry of one axis). */
static void test_attention_one_axis(void)
{
    printf("attention with one axis: bit for bit\n");
    adims d = {2, 4, 6, 2, 12, 10};
    int64_t nq = d.B * d.T * d.H * d.D, nk = d.B * d.S * d.H * d.D, nv = d.B * d.S * d.H * d.Dv;
    float *q = check_rand_floats(&rng_state, nq, -1.0, 1.0);
    float *k = check_rand_floats(&rng_state, nk, -1.0, 1.0);
    float *v = check_rand_floats(&rng_state, nv, -1.0, 1.0);
    float *G = check_rand_floats(&rng_state, d.B * d.T * d.H * d.Dv, -1.0, 1.0);
    int64_t idx[6], off[6];
    for (int i = 0; i < 6; i++) idx[i] = i, off[i] = 37 + i;
    int cases = 0;
    for (int sch = 0; sch < 4; sch++)
        for (int pi = 0; pi < 3; pi++)
            for (int il = 0; il < 2; il++) {
                rp_rope_freq f = rp_rope_freq_default();
                if (sch == 1) f.scaling = RP_SCALING_YARN, f.factor = 4.0, f.orig_len = 8.0;
                if (sch == 2) f.xpos = 0.4, f.xpos_scale_base = 16.0;
                if (sch == 3) f.axes.n = 1, f.axes.map = RP_AXES_SECTIONS, f.axes.sections[0] = 4;
                const rp_rope_freq *fp = sch ? &f : NULL;
                rp_attn_cfg a = axes_cfg(attn_pes[pi], il, 8, sch == 3 ? 8 : 6, d.D, 1, fp,
                                         NULL, 0);
                rp_attn_cfg b = a, c = a, e = a;
                b.pos = idx, b.pos_rows = 6;
                c.pos_offset = 37;
                e.pos = off, e.pos_rows = 6;
                aresult ra = run_attn(d, q, k, v, G, &a, 2), rb = run_attn(d, q, k, v, G, &b, 1);
                aresult rc = run_attn(d, q, k, v, G, &c, 2), re = run_attn(d, q, k, v, G, &e, 1);
                CHECK(same_bits(&ra, &rb, d, 1), "scheme %d pe=%s %s: pos[i] = i != pos NULL",
                      sch, rp_pe_name(a.scheme.pe), il ? "interleaved" : "half");
                CHECK(same_bits(&rc, &re, d, 1),
                      "scheme %d pe=%s %s: pos[i] = 37 + i != pos_offset 37", sch,
                      rp_pe_name(a.scheme.pe), il ? "interleaved" : "half");
                if (a.scheme.pe == RP_PE_ROPER_LEGACY) { /* R((2i - n) theta): not relative */
                    double m = 0.0;
                    for (int64_t j = 0; j < d.B * d.T * d.H * d.Dv; j++)
                        m = fmax(m, fabs((double)ra.out[j] - (double)rc.out[j]));
                    CHECK(m > 1e-3, "scheme %d pe=%s: pos_offset 37 changes nothing", sch,
                          rp_pe_name(a.scheme.pe));
                }
                aresult_free(&ra), aresult_free(&rb), aresult_free(&rc), aresult_free(&re);
                cases++;
            }
    printf("  ok %d cases (plain, yarn, xpos, sections {4} of one axis) bitwise\n", cases);
    free(q), free(k), free(v), free(G);
}

/* The shift property at attention level: every position moved by one vector leaves att (the
 * scores depend on P - Q only) and, for rope and roper (R(angle(i) - angle(n)) v_i), out; not
 * roper_legacy's out (R((2i - n) theta) v_i); one key moved one step along axis 0 moves att. */
static void test_attention_shift(void)
{
    printf("attention with vector positions: the shift property\n");
    adims d = {1, 3, 5, 2, 0, 0}; /* queries at rows 4 .. 6: tables of their own */
    const int64_t qo = 4, rows = 7;
    double worst = 0.0, moved = HUGE_VAL;
    for (int sc = 0; sc < NSCHEMES; sc++)
        for (int pi = 0; pi < 3; pi++) {
            const ref_scheme *r = &schemes[sc].r;
            int64_t dr = schemes[sc].d_rot, A = r->A;
            d.D = dr + 4, d.Dv = dr + 2;
            int64_t pos[3][AMAXS * 3];
            rand_positions(pos[0], rows, r->A, -20, 60);
            const int64_t shift[3] = {97, -130, 41};
            for (int64_t i = 0; i < rows * A; i++)
                pos[1][i] = pos[0][i] + shift[i % A], pos[2][i] = pos[0][i];
            pos[2][2 * A] += 1; /* key 2, axis 0 */
            rp_rope_freq f = freq_of(r);
            float *q = check_rand_floats(&rng_state, d.T * d.H * d.D, -1.0, 1.0);
            float *k = check_rand_floats(&rng_state, d.S * d.H * d.D, -1.0, 1.0);
            float *v = check_rand_floats(&rng_state, d.S * d.H * d.Dv, -1.0, 1.0);
            aresult res[3];
            for (int j = 0; j < 3; j++) {
                rp_attn_cfg cfg = axes_cfg(attn_pes[pi], 0, dr, v_width(r, dr, 1), d.D, qo, &f,
                                           pos[j], rows);
                res[j] = run_attn(d, q, k, v, NULL, &cfg, 1);
            }
            double e = 0.0, eo = 0.0, m = 0.0;
            int64_t no = d.T * d.H * d.Dv, na = d.H * d.T * d.S;
            for (int64_t j = 0; j < no; j++)
                eo = fmax(eo, fabs((double)res[0].out[j] - (double)res[1].out[j]));
            for (int64_t j = 0; j < na; j++) {
                e = fmax(e, fabs((double)res[0].att[j] - (double)res[1].att[j]));
                m = fmax(m, fabs((double)res[0].att[j] - (double)res[2].att[j]));
            }
            const char *name = schemes[sc].name, *pe = rp_pe_name(attn_pes[pi]);
            CHECK(e <= 2e-6, "%s pe=%s: att moved by %.3g under the shift", name, pe, e);
            if (attn_pes[pi] == RP_PE_ROPER_LEGACY) /* R((2i - n) theta): not relative */
                CHECK(eo > 1e-3, "%s pe=%s: out kept under the shift (%.3g)", name, pe, eo);
            else
                CHECK(eo <= 2e-6, "%s pe=%s: out moved by %.3g under the shift", name, pe, eo);
            CHECK(m > 1e-3, "%s pe=%s: att ignores a key's position (moved %.3g)", name, pe, m);
            worst = fmax(worst, attn_pes[pi] == RP_PE_ROPER_LEGACY ? e : fmax(e, eo));
            moved = fmin(moved, m);
            for (int j = 0; j < 3; j++) aresult_free(&res[j]);
            free(q), free(k), free(v);
        }
    printf("  ok every scheme, rope/roper (att of roper_legacy): the shift moves %.2g; a key's "
           "step at least %.2g\n", worst, moved);
}

int main(void)
{
    test_tables();
    test_one_axis();
    test_rotations();
    test_axial_scalings();
    test_checks();
    test_attention_checks();
    test_attention_reference();
    test_attention_decode();
    test_attention_one_axis();
    test_attention_shift();
    return check_summary("test_rope_axes");
}
