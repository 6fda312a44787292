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
 * message.
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
    const double *W;     /* mixed: [A x half] */
    int scaling;         /* 0 none, 1 pi, 2 ntk (factor s), on the frequencies of the map */
    double s;
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
            for (int b = 0; b < r->A; b++) a += (double)p[b] * r->W[b * half + i];
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
static rp_rope_freq freq_of(const ref_scheme *r, int64_t half)
{
    rp_rope_freq f = rp_rope_freq_default();
    f.axes.n = r->A;
    f.axes.map = r->map == REF_AXIAL ? RP_AXES_AXIAL
                 : r->map == REF_SECTIONS ? RP_AXES_SECTIONS : RP_AXES_MIXED;
    if (r->map == REF_SECTIONS) memcpy(f.axes.sections, r->sections, sizeof r->sections);
    if (r->map == REF_MIXED) f.axes.mix = r->W, f.axes.n_mix = half;
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
    {"axial A=2 d=16", {REF_AXIAL, 2, {0}, NULL, 0, 1.0}, 16},
    {"axial A=3 d=14 (3+2+2 pairs)", {REF_AXIAL, 3, {0}, NULL, 0, 1.0}, 14},
    {"axial A=2 d=12, pi s=3", {REF_AXIAL, 2, {0}, NULL, 1, 3.0}, 12},
    {"axial A=3 d=24, ntk s=4", {REF_AXIAL, 3, {0}, NULL, 2, 4.0}, 24},
    {"sections {2, 3, 3} d=16", {REF_SECTIONS, 3, {2, 3, 3}, NULL, 0, 1.0}, 16},
    {"sections {16, 24, 24} d=128", {REF_SECTIONS, 3, {16, 24, 24}, NULL, 0, 1.0}, 128},
    {"sections {5, 0, 3} d=16, ntk s=2", {REF_SECTIONS, 3, {5, 0, 3}, NULL, 2, 2.0}, 16},
    {"mixed A=2 d=16", {REF_MIXED, 2, {0}, W2, 0, 1.0}, 16},
    {"mixed A=3 d=12", {REF_MIXED, 3, {0}, W3, 0, 1.0}, 12},
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
            rp_rope_freq f = freq_of(r, half);
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
    rp_rope_freq f = freq_of(&schemes[7].r, 8);
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

/* x rotated by the reference angles (sign -1: backwards), pairs as the pairing, in double. */
static void ref_rotate(double *y, const float *x, const double *ang, int64_t d, int interleaved,
                       int sign)
{
    int64_t half = d / 2;
    for (int64_t i = 0; i < half; i++) {
        int64_t a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
        double c = cos(ang[i]), s = sign * sin(ang[i]);
        y[a] = (double)x[a] * c - (double)x[b] * s;
        y[b] = (double)x[b] * c + (double)x[a] * s;
    }
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
            rp_rope_freq f = freq_of(r, half);
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
    cfg.pe = RP_PE_ROPE, cfg.causal = 1, cfg.scale = 0.5, cfg.base = RP_ROPE_BASE, cfg.d_rot_qk = 4;
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

int main(void)
{
    test_tables();
    test_one_axis();
    test_rotations();
    test_axial_scalings();
    test_checks();
    test_attention_checks();
    return check_summary("test_rope_axes");
}
