/* Frequency schemes of the rotary encodings (core/nn/rope_freq.h) and the attention kernels under
 * them, against a double-precision reference written from the papers' formulas (it never calls
 * the code under test):
 *   standard  theta_i = base^(-2i/d), i = 0 .. d/2 - 1 (RoFormer)
 *   pi        theta_i / s (Chen et al. 2023)
 *   ntk       base' = base s^(d/(d-2)), theta'_i = base'^(-2i/d) (bloc97 2023; computed through
 *             the scaled base, the code goes through s^(-2i/(d-2)))
 *   yarn      lambda_i = 2 pi / |theta_i|, r_i = L / lambda_i, gamma(r) = 0 below alpha, 1 above
 *             beta, linear between; theta'_i = (1 - gamma) theta_i / s + gamma theta_i; scores
 *             times (0.1 ln s + 1)^2 when s > 1 (Peng et al. 2023, sections 3.2 and 3.4)
 *   yarn, the index ramp (yarn_ramp dims / dims_exact: the YaRN authors' code and Hugging
 *             Face's rope_type "yarn"): the pair index where r rotations fit in L,
 *             d ln(L / (2 pi r)) / (2 ln base), taken at beta (low end, rounded down) and at alpha
 *             (high end, rounded up; dims_exact: neither rounded), clamped to [0, d - 1]; the
 *             ramp (j - low) / (high - low) clamped to [0, 1] is the share of theta / s
 *   dynamic   Hugging Face's rope_type "dynamic" at the length n = p + 1 of each position:
 *             base' = base (s n / L - (s - 1))^(d/(d-2)) when n > L, else base
 *   llama3    Hugging Face's rope_type "llama3", by wavelengths w_i = 2 pi / theta_i: w below
 *             L / high_freq_factor keeps theta, above L / low_freq_factor takes theta / s, between
 *             smooth = (L / w - low) / (high - low), (1 - smooth) theta / s + smooth theta
 *   attention_factor m: scores times m^2
 *   xPos      pair i at position p scaled by zeta_i^(side p / scale_base), zeta_i =
 *             (2i/d + gamma) / (1 + gamma), side +1 for q and o, -1 for k and v (Sun et al. 2022)
 *   user theta replaces theta_i (the scalings apply to it); user angles are final.
 * The attention reference: causal softmax attention with q, k (and for roper v and the output)
 * rotated by the reference tables, as in test_attention.c.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rp.h"

static uint64_t rng_state = 1729;
static const double TWO_PI = 6.283185307179586476925286766559;

/* ---- the reference ------------------------------------------------------------------------- */

static double ref_ramp(double r, double alpha, double beta)
{
    return r < alpha ? 0.0 : r > beta ? 1.0 : (r - alpha) / (beta - alpha);
}

static double ref_theta(const rp_rope_freq *f, int64_t i, int64_t d, double base);

/* The pair index where r rotations fit in L (the YaRN code's correction dimension). */
static double ref_corr_dim(double r, double L, int64_t d, double base)
{
    return (double)d * log(L / (r * TWO_PI)) / (2.0 * log(base));
}

/* theta'_i of f (NULL: standard) for a placement d wide at position p. */
static double ref_theta_at(const rp_rope_freq *f, int64_t i, int64_t d, double base, int64_t p)
{
    double t0 = f && f->theta ? f->theta[i] : pow(base, -2.0 * (double)i / (double)d);
    if (f && f->scaling == RP_SCALING_DYNAMIC) {
        double n = (double)p + 1.0, s = f->factor;
        if (n <= f->orig_len || d == 2 || i == 0) return t0;
        double bs = base * pow(s * n / f->orig_len - (s - 1.0), (double)d / (double)(d - 2));
        return f->theta ? t0 * pow(bs / base, -2.0 * (double)i / (double)d)
                        : pow(bs, -2.0 * (double)i / (double)d);
    }
    if (f && f->scaling == RP_SCALING_LLAMA3) {
        double w = TWO_PI / fabs(t0), L = f->orig_len, s = f->factor;
        if (w < L / f->high_freq_factor) return t0;
        if (w > L / f->low_freq_factor) return t0 / s;
        double sm = (L / w - f->low_freq_factor) / (f->high_freq_factor - f->low_freq_factor);
        return (1.0 - sm) * t0 / s + sm * t0;
    }
    if (f && f->scaling == RP_SCALING_YARN && f->yarn_ramp != RP_YARN_RAMP_ROTATIONS) {
        double lo = ref_corr_dim(f->yarn_beta, f->orig_len, d, base);
        double hi = ref_corr_dim(f->yarn_alpha, f->orig_len, d, base);
        if (f->yarn_ramp == RP_YARN_RAMP_DIMS) lo = floor(lo), hi = ceil(hi);
        if (lo < 0.0) lo = 0.0;
        if (hi > (double)(d - 1)) hi = (double)(d - 1);
        if (hi == lo) hi += 0.001;
        double ramp = ((double)i - lo) / (hi - lo);
        ramp = ramp < 0.0 ? 0.0 : ramp > 1.0 ? 1.0 : ramp;
        return t0 / f->factor * ramp + t0 * (1.0 - ramp);
    }
    return ref_theta(f, i, d, base);
}

/* theta'_i of f (NULL: standard) for a placement d wide (the schemes that do not depend on the
 * position). */
static double ref_theta(const rp_rope_freq *f, int64_t i, int64_t d, double base)
{
    double t = f && f->theta ? f->theta[i] : pow(base, -2.0 * (double)i / (double)d);
    if (!f) return t;
    double s = f->factor;
    switch (f->scaling) {
    case RP_SCALING_PI: return t / s;
    case RP_SCALING_NTK: {
        if (i == 0) return t; /* base'^0: also d = 2 */
        double bs = base * pow(s, (double)d / (double)(d - 2));
        return f->theta ? t * pow(bs / base, -2.0 * (double)i / (double)d)
                        : pow(bs, -2.0 * (double)i / (double)d);
    }
    case RP_SCALING_YARN: {
        double lambda = TWO_PI / fabs(t), g = ref_ramp(f->orig_len / lambda, f->yarn_alpha,
                                                         f->yarn_beta);
        return (1.0 - g) * t / s + g * t;
    }
    default: return t;
    }
}

static double ref_temp(const rp_rope_freq *f)
{
    if (f && f->scaling != RP_SCALING_NONE && f->attention_factor > 0.0)
        return f->attention_factor * f->attention_factor;
    if (!f || f->scaling != RP_SCALING_YARN || f->factor <= 1.0) return 1.0;
    return (0.1 * log(f->factor) + 1.0) * (0.1 * log(f->factor) + 1.0);
}

static double ref_zeta(int64_t i, int64_t d, double g)
{
    return (2.0 * (double)i / (double)d + g) / (1.0 + g);
}

/* One table row at position p: cs[i] = m cos(c a_i), sn[i] = m sin(c a_i), m[i] the magnitude. */
static void ref_row(double *cs, double *sn, double *mag, const rp_rope_freq *f, int64_t d,
                    double base, double c, int side, int64_t p)
{
    for (int64_t i = 0; i < d / 2; i++) {
        double a = f && f->angles ? f->angles[p * f->n_angles + i]
                                  : (double)p * ref_theta_at(f, i, d, base, p);
        double m = 1.0;
        if (f && f->xpos > 0.0) /* zeta^(side p / scale_base) by exp and log */
            m = exp((double)side * (double)p / f->xpos_scale_base * log(ref_zeta(i, d, f->xpos)));
        cs[i] = m * cos(c * a);
        sn[i] = m * sin(c * a);
        if (mag) mag[i] = m;
    }
}

/* ---- helpers ------------------------------------------------------------------------------- */

/* status and the exact message (CHECK_MSG, check.h) of rp_rope_freq_check(&f) and of
 * rp_attention_check(&q, &k, &v, &cfg) */
#define FCHECK(msg) CHECK_MSG(rp_rope_freq_check(&f), RP_ERR_ARG, msg)
#define FCHECK_OK() CHECK_MSG(rp_rope_freq_check(&f), RP_OK, "")
#define ACHECK(msg) CHECK_MSG(rp_attention_check(&q, &k, &v, &cfg), RP_ERR_ARG, msg)
#define ACHECK_OK() CHECK_MSG(rp_attention_check(&q, &k, &v, &cfg), RP_OK, "")

/* max |got/want - 1| <= rtol (want != 0) */
static void check_rel(const double *got, const double *want, int64_t n, double rtol, const char *label)
{
    double worst = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs(got[i] / want[i] - 1.0);
        worst = e > worst || isnan(e) ? e : worst;
    }
    if (CHECK(worst <= rtol, "%s: max relative error %.3g > %.3g", label, worst, rtol))
        printf("  ok %s: max rel %.3g (n %lld)\n", label, worst, (long long)n);
}

/* float tables against the double reference: one rounding, |got - want| <= 2^-24 |want| plus
 * 1e-11 of the magnitude for the reference's own route (its angle via another theta formula) */
static void check_rounded(const float *got, const double *want, const double *mag, int64_t n,
                          const char *label)
{
    double worst = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]) / (0x1p-24 * fabs(want[i]) + 1e-11 * mag[i]);
        worst = e > worst || isnan(e) ? e : worst;
    }
    if (CHECK(worst <= 1.0, "%s: error %.3g of the rounding bound", label, worst))
        printf("  ok %s: max error %.3g of one float rounding (n %lld)\n", label, worst, (long long)n);
}

static rp_rope_freq freq_of(rp_rope_scaling sc, double s)
{
    rp_rope_freq f = rp_rope_freq_default();
    f.scaling = sc;
    f.factor = s;
    return f;
}

static int area_start_;
static void area(const char *name)
{
    printf("%s\n", name);
    area_start_ = check_passed_ + check_failed_;
}
static void area_end(const char *name)
{
    printf("  [%s: %d checks]\n", name, check_passed_ + check_failed_ - area_start_);
}

/* ---- 1. theta ------------------------------------------------------------------------------ */

static void test_theta(void)
{
    area("theta");
    const int64_t drots[3] = {2, 8, 64};
    const double bases[2] = {10000.0, 500.0}, factors[4] = {0.5, 2.0, 4.0, 8.5};
    double got[32], want[32], plain[32];
    char label[160];
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 2; b++) {
            int64_t d = drots[a], h = d / 2;
            double base = bases[b];
            rp_rope_theta(plain, d, base);
            for (int fi = 0; fi < 4; fi++) {
                double s = factors[fi];
                for (int sc = RP_SCALING_PI; sc <= RP_SCALING_NTK; sc++) {
                    rp_rope_freq f = freq_of((rp_rope_scaling)sc, s);
                    rp_rope_freq_theta(got, &f, d, base);
                    for (int64_t i = 0; i < h; i++) want[i] = ref_theta(&f, i, d, base);
                    snprintf(label, sizeof label, "%s theta d_rot=%lld base=%g s=%g",
                             rp_scaling_names[sc], (long long)d, base, s);
                    check_rel(got, want, h, 1e-13, label);
                    if (sc == RP_SCALING_NTK)
                        CHECK(got[0] == 1.0, "%s: theta'_0 = 1 (got %.17g)", label, got[0]);
                }
                /* yarn: L between 2 pi beta / theta_0 and 2 pi alpha / theta_last (geometric
                 * mean), so that pairs fall in each region when d_rot >= 8 */
                for (int ab = 0; ab < 2; ab++) {
                    rp_rope_freq f = freq_of(RP_SCALING_YARN, s);
                    if (ab) f.yarn_alpha = 0.5, f.yarn_beta = 8.0;
                    f.orig_len = llround(sqrt(TWO_PI * f.yarn_beta / plain[0] * TWO_PI *
                                              f.yarn_alpha / plain[h - 1]));
                    rp_rope_freq_theta(got, &f, d, base);
                    int nhi = 0, nlo = 0, nramp = 0, bad = 0;
                    for (int64_t i = 0; i < h; i++) {
                        want[i] = ref_theta(&f, i, d, base);
                        double r = (double)f.orig_len / (TWO_PI / plain[i]);
                        if (r > f.yarn_beta) { /* high frequency: unchanged */
                            nhi++;
                            bad += got[i] != plain[i];
                        } else if (r < f.yarn_alpha) { /* low: divided by s */
                            nlo++;
                            bad += got[i] != plain[i] / s;
                        } else { /* the ramp: strictly between theta / s and theta */
                            nramp++;
                            double lo = fmin(plain[i], plain[i] / s), hi = fmax(plain[i], plain[i] / s);
                            bad += s != 1.0 && !(got[i] > lo && got[i] < hi);
                        }
                    }
                    snprintf(label, sizeof label,
                             "yarn theta d_rot=%lld base=%g s=%g L=%lld alpha=%g beta=%g",
                             (long long)d,
                             base, s, (long long)f.orig_len, f.yarn_alpha, f.yarn_beta);
                    check_rel(got, want, h, 1e-13, label);
                    CHECK(bad == 0, "%s: %d pairs off their region's limit", label, bad);
                    if (d >= 8)
                        CHECK(nhi > 0 && nlo > 0 && nramp > 0, "%s: regions high %d ramp %d low %d",
                              label, nhi, nramp, nlo);
                    double t = rp_rope_freq_score_scale(&f);
                    double tw = s > 1.0 ? pow(0.1 * log(s) + 1.0, 2.0) : 1.0;
                    CHECK(fabs(t - tw) <= 1e-15 * tw, "%s: score scale %.17g, want %.17g", label, t, tw);
                }
            }
            /* user theta (random, log-uniform in [1e-4, 2)) with each scaling */
            double ut[33];
            for (int64_t i = 0; i <= h; i++) ut[i] = exp(check_rand(&rng_state, log(1e-4), log(2.0)));
            for (int sc = RP_SCALING_NONE; sc <= RP_SCALING_YARN; sc++) {
                rp_rope_freq f = freq_of((rp_rope_scaling)sc, sc ? 4.0 : 1.0);
                f.theta = ut;
                f.n_theta = h + 1; /* more than needed: pair i takes theta[i] */
                f.orig_len = 64.0;
                rp_rope_freq_theta(got, &f, d, base);
                for (int64_t i = 0; i < h; i++) want[i] = ref_theta(&f, i, d, base);
                snprintf(label, sizeof label, "user theta, %s, d_rot=%lld base=%g",
                         rp_scaling_names[sc], (long long)d, base);
                check_rel(got, want, h, 1e-13, label);
            }
        }
    /* the temperature is 1 for yarn s <= 1, for pi, ntk, xPos and NULL */
    rp_rope_freq one[5] = {freq_of(RP_SCALING_YARN, 1.0), freq_of(RP_SCALING_YARN, 0.5),
                           freq_of(RP_SCALING_PI, 4.0), freq_of(RP_SCALING_NTK, 4.0), rp_rope_freq_default()};
    one[0].orig_len = one[1].orig_len = 16.0, one[4].xpos = 0.4;
    for (int i = 0; i < 6; i++)
        CHECK(rp_rope_freq_score_scale(i < 5 ? &one[i] : NULL) == 1.0, "score scale 1: case %d", i);
    area_end("theta");
}

/* ---- 2. tables ----------------------------------------------------------------------------- */

/* rp_rope_angles as it was before rope_freq (commit bca817a), to pin the plain path bitwise. */
static void old_angles(float *cs, float *sn, const int64_t *pos, int64_t offset, int64_t n,
                       int64_t d_rot, double base, double scale)
{
    int64_t half = d_rot / 2;
    for (int64_t i = 0; i < half; i++) {
        double theta = pow(base, -2.0 * (double)i / (double)d_rot);
        for (int64_t r = 0; r < n; r++) {
            double p = (double)(pos ? pos[r] : offset + r);
            double ang = scale * p * theta;
            cs[r * half + i] = (float)cos(ang);
            sn[r * half + i] = (float)sin(ang);
        }
    }
}

enum { TN = 7, TD = 12, TH = TD / 2 };

static void test_tables(void)
{
    area("tables");
    const int64_t pos[TN] = {0, 5, 3, 100, 77, 1, 40};
    double th[TH], ang[120 * TH];
    for (int64_t i = 0; i < TH; i++) th[i] = check_rand(&rng_state, -1.5, 1.5);
    for (int64_t i = 0; i < 120 * TH; i++) ang[i] = check_rand(&rng_state, -50.0, 50.0);
    float cg[TN * TH], sg[TN * TH];
    double cw[TN * TH], sw[TN * TH], mw[TN * TH];
    char label[200];
    const char *names[12] = {"standard",       "pi s=4",     "ntk s=8.5", "yarn s=4 L=300",
                             "user theta + pi s=2", "user angles", "user theta + yarn s=4 L=30",
                             "dynamic s=4 L=20", "user theta + dynamic s=2.5 L=7",
                             "llama3 s=8 L=300 low 1 high 4", "yarn dims s=4 L=300 beta 16",
                             "yarn dims_exact s=4 L=300"};
    for (int sch = 0; sch < 12; sch++)
        for (int xp = 0; xp < 3; xp++)           /* no xPos, side +1, side -1 */
            for (int ci = 0; ci < 2; ci++)       /* c = 1, 2 */
                for (int pm = 0; pm < 3; pm++) { /* offset 0, offset 11, explicit positions */
                    rp_rope_freq f = rp_rope_freq_default();
                    if (sch == 1) f = freq_of(RP_SCALING_PI, 4.0);
                    if (sch == 2) f = freq_of(RP_SCALING_NTK, 8.5);
                    if (sch == 3) f = freq_of(RP_SCALING_YARN, 4.0), f.orig_len = 300.0;
                    if (sch == 4) f = freq_of(RP_SCALING_PI, 2.0), f.theta = th, f.n_theta = TH;
                    if (sch == 5) f.angles = ang, f.rows = 120, f.n_angles = TH;
                    if (sch == 6) /* theta of either sign: the ramp by |theta| (r up to 7.2) */
                        f = freq_of(RP_SCALING_YARN, 4.0), f.orig_len = 30.0, f.theta = th,
                        f.n_theta = TH;
                    if (sch == 7) f = freq_of(RP_SCALING_DYNAMIC, 4.0), f.orig_len = 20.0;
                    if (sch == 8)
                        f = freq_of(RP_SCALING_DYNAMIC, 2.5), f.orig_len = 7.0, f.theta = th,
                        f.n_theta = TH;
                    if (sch == 9) f = freq_of(RP_SCALING_LLAMA3, 8.0), f.orig_len = 300.0;
                    if (sch == 10)
                        f = freq_of(RP_SCALING_YARN, 4.0), f.orig_len = 300.0, f.yarn_beta = 16.0,
                        f.yarn_ramp = RP_YARN_RAMP_DIMS;
                    if (sch == 11)
                        f = freq_of(RP_SCALING_YARN, 4.0), f.orig_len = 300.0,
                        f.yarn_ramp = RP_YARN_RAMP_DIMS_EXACT;
                    if (xp) f.xpos = 0.4, f.xpos_scale_base = 16.0;
                    int side = xp == 2 ? -1 : 1;
                    double c = ci ? 2.0 : 1.0;
                    int64_t off = pm == 1 ? 11 : 0;
                    const int64_t *pp = pm == 2 ? pos : NULL;
                    rp_rope_freq_tables(cg, sg, &f, TD, 500.0, c, side, pp, off, TN);
                    for (int64_t r = 0; r < TN; r++)
                        ref_row(cw + r * TH, sw + r * TH, mw + r * TH, &f, TD, 500.0, c, side,
                                pp ? pp[r] : off + r);
                    snprintf(label, sizeof label, "tables %s%s c=%g %s", names[sch],
                             xp ? side > 0 ? " xpos side +1" : " xpos side -1" : "", c,
                             pm == 2 ? "positions up to 100" : pm ? "offset 11" : "offset 0");
                    char l2[240];
                    snprintf(l2, sizeof l2, "%s cos", label);
                    check_rounded(cg, cw, mw, TN * TH, l2);
                    snprintf(l2, sizeof l2, "%s sin", label);
                    check_rounded(sg, sw, mw, TN * TH, l2);
                }
    /* zeta at gamma 0.4 is torchscale's (arange(0, d, 2) + 0.4 d) / (1.4 d): with all frequencies
     * 0 the tables at p = scale_base hold m = zeta exactly (cos 0 = 1) */
    {
        double zero[TH] = {0}, tw[TH], tz[TH];
        rp_rope_freq f = rp_rope_freq_default();
        f.theta = zero, f.n_theta = TH, f.xpos = 0.4, f.xpos_scale_base = 16.0;
        float c1[TH], s1[TH];
        rp_rope_freq_tables(c1, s1, &f, TD, 10000.0, 1.0, 1, NULL, 16, 1);
        int bad = 0;
        for (int64_t i = 0; i < TH; i++) {
            tw[i] = (2.0 * (double)i + 0.4 * TD) / (1.4 * TD);
            tz[i] = ref_zeta(i, TD, 0.4);
            bad += c1[i] != (float)tw[i] || s1[i] != 0.0f;
        }
        check_rel(tz, tw, TH, 1e-15, "zeta(gamma 0.4) = torchscale's (2i + 0.4 d) / (1.4 d)");
        CHECK(bad == 0, "tables at p = scale_base with theta 0: cos = (float) torchscale zeta, sin 0 "
              "(%d off)", bad);
    }
    /* the plain path: f NULL and the default give rp_rope_angles bitwise, and that the tables of
     * before rope_freq, bitwise: for the modes' angle scales 1 and 2, and for any scale (rp.rope.
     * angles takes one; (c p) theta and c (p theta) round differently when c is no power of 2) */
    for (int ci = 0; ci < 3; ci++)
        for (int pm = 0; pm < 2; pm++) {
            enum { PN = 4096, PD = 64, PH = PD / 2 };
            const int64_t ppos[9] = {0, 1, 17, 10001, 123456, 999999, 3, 65535, 2048};
            double c = ci == 2 ? 3.0 : ci ? 2.0 : 1.0;
            int64_t n = pm ? 9 : PN, nd = 0;
            double far = 0.0;
            float *t = malloc(sizeof(float) * 8 * PN * PH), *a[4], *b[4];
            for (int j = 0; j < 4; j++) a[j] = t + 2 * j * PN * PH, b[j] = a[j] + PN * PH;
            rp_rope_freq def = rp_rope_freq_default();
            const int64_t *pp = pm ? ppos : NULL;
            rp_rope_angles(a[0], b[0], pp, 20000, n, PD, 10000.0, c);
            rp_rope_freq_tables(a[1], b[1], NULL, PD, 10000.0, c, 1, pp, 20000, n);
            rp_rope_freq_tables(a[2], b[2], &def, PD, 10000.0, c, -1, pp, 20000, n);
            old_angles(a[3], b[3], pp, 20000, n, PD, 10000.0, c);
            size_t sz = sizeof(float) * (size_t)(n * PH);
            const char *pl = pm ? "positions up to 999999" : "positions 20000..24095";
            CHECK(!memcmp(a[0], a[1], sz) && !memcmp(b[0], b[1], sz),
                  "freq NULL tables == rp_rope_angles bitwise (c=%g, %s)", c, pl);
            CHECK(!memcmp(a[0], a[2], sz) && !memcmp(b[0], b[2], sz),
                  "default freq tables == rp_rope_angles bitwise (c=%g, %s)", c, pl);
            for (int64_t i = 0; i < n * PH; i++) {
                nd += a[0][i] != a[3][i] || b[0][i] != b[3][i];
                far = fmax(far, fmax(fabs((double)a[0][i] - (double)a[3][i]),
                                     fabs((double)b[0][i] - (double)b[3][i])));
            }
            CHECK(nd == 0, "rp_rope_angles == the tables of before rope_freq bitwise (c=%g, %s, "
                  "d_rot 64): %lld of %lld entries differ, by up to %.3g", c, pl, (long long)nd,
                  (long long)(n * PH), far);
            free(t);
        }
    area_end("tables");
}

/* rp_rope_rotate with sign -1: rotated back by the angles and divided by xPos's magnitude on
 * cfg->xpos_side (the reference: ref_row on the other side, the angle negated), so that it undoes
 * sign +1 with the same cfg; under every scheme, on both sides, both pairings */
static void test_rotate_inverse(void)
{
    area("rotate sign -1");
    enum { RT = 9, RD = 8, RH = RD / 2, ROFF = 5 };
    double th[RH], ang[(RT + ROFF) * RH];
    for (int64_t i = 0; i < RH; i++) th[i] = check_rand(&rng_state, -1.5, 1.5);
    for (int64_t i = 0; i < (RT + ROFF) * RH; i++) ang[i] = check_rand(&rng_state, -50.0, 50.0);
    float *xf = check_rand_floats(&rng_state, RT * RD, -1.0, 1.0), got[RT * RD];
    rp_tensor x = check_new(2, CHECK_SHAPE(RT, RD)), y, back, z;
    check_scatter(&x, xf);
    const char *names[4] = {"standard", "yarn s=4 L=30", "user theta", "user angles"};
    char label[160];
    double max_back = 0.0, max_ref = 0.0;
    for (int sch = 0; sch < 4; sch++)
        for (int side = -1; side <= 1; side += 2)
            for (int pr = 0; pr < 2; pr++) {
                rp_rope_freq f = rp_rope_freq_default();
                if (sch == 1) f = freq_of(RP_SCALING_YARN, 4.0), f.orig_len = 30.0;
                if (sch == 2) f.theta = th, f.n_theta = RH;
                if (sch == 3) f.angles = ang, f.rows = RT + ROFF, f.n_angles = RH;
                f.xpos = 0.4, f.xpos_scale_base = 16.0;
                rp_rope_cfg cfg = rp_rope_cfg_default(RD);
                cfg.pairing = pr ? RP_PAIR_INTERLEAVED : RP_PAIR_HALF;
                cfg.pos_dim = 0, cfg.offset = ROFF, cfg.freq = &f, cfg.xpos_side = side;
                CHECK_MSG(rp_rope_rotate(&y, &x, &cfg), RP_OK, "");
                cfg.sign = -1;
                CHECK_MSG(rp_rope_rotate(&back, &y, &cfg), RP_OK, "");
                CHECK_MSG(rp_rope_rotate(&z, &x, &cfg), RP_OK, "");
                double worst_back = 0.0, worst_ref = 0.0;
                check_gather(got, &back);
                for (int64_t i = 0; i < RT * RD; i++)
                    worst_back = fmax(worst_back, fabs((double)got[i] - (double)xf[i]));
                check_gather(got, &z);
                for (int64_t t = 0; t < RT; t++) {
                    double cs[RH], sn[RH], mag[RH];
                    ref_row(cs, sn, mag, &f, RD, RP_ROPE_BASE, 1.0, -side, ROFF + t);
                    for (int64_t i = 0; i < RH; i++) {
                        int64_t a = pr ? 2 * i : i, b = pr ? 2 * i + 1 : i + RH;
                        double xa = xf[t * RD + a], xb = xf[t * RD + b];
                        /* R(-angle): [c s; -s c] */
                        double wa = xa * cs[i] + xb * sn[i], wb = xb * cs[i] - xa * sn[i];
                        worst_ref = fmax(worst_ref, fmax(fabs((double)got[t * RD + a] - wa),
                                                         fabs((double)got[t * RD + b] - wb)) /
                                                        mag[i]);
                    }
                }
                snprintf(label, sizeof label, "%s xpos side %+d %s", names[sch], side,
                         pr ? "interleaved" : "half");
                CHECK(worst_back <= 1e-6, "rotate(rotate(x), sign -1) - x, %s: %.3g", label,
                      worst_back);
                CHECK(worst_ref <= 1e-6, "rotate(x, sign -1) vs R(-a) x / zeta^(side p / B), %s: "
                      "%.3g of the magnitude", label, worst_ref);
                max_back = fmax(max_back, worst_back), max_ref = fmax(max_ref, worst_ref);
                rp_tensor_release(&y);
                rp_tensor_release(&back);
                rp_tensor_release(&z);
            }
    printf("  16 cases: |rotate(rotate(x), sign -1) - x| <= %.3g, sign -1 against the reference "
           "<= %.3g of the magnitude\n", max_back, max_ref);
    rp_tensor_release(&x);
    free(xf);
    area_end("rotate sign -1");
}

/* ---- 3. checks ----------------------------------------------------------------------------- */

static void test_checks(void)
{
    area("checks");
    double th[4] = {1.0, 0.5, 0.25, 0.125}, ang[3 * 4];
    for (int i = 0; i < 12; i++) ang[i] = 0.1 * i;
    rp_rope_freq f = rp_rope_freq_default();
    CHECK_MSG(rp_rope_freq_check(NULL), RP_OK, "");
    FCHECK_OK();
    f.scaling = (rp_rope_scaling)7;
    FCHECK("unknown scaling 7");
    const double bad_factors[4] = {0.0, -2.0, NAN, INFINITY};
    const char *fmsg[4] = {"scaling_factor must be a finite number > 0, got 0",
                           "scaling_factor must be a finite number > 0, got -2",
                           "scaling_factor must be a finite number > 0, got nan",
                           "scaling_factor must be a finite number > 0, got inf"};
    for (int i = 0; i < 4; i++) {
        f = freq_of(i % 2 ? RP_SCALING_PI : RP_SCALING_YARN, bad_factors[i]);
        f.orig_len = 16.0;
        FCHECK(fmsg[i]);
    }
    f = freq_of(RP_SCALING_YARN, 4.0);
    f.orig_len = -3; /* (an integer: no fraction, no nan) */
    FCHECK("orig_len (the original context length of scaling yarn) must be >= 1, got -3");
    f.orig_len = 0;
    FCHECK("orig_len (the original context length of scaling yarn) must be >= 1, got 0");
    f.orig_len = 16;
    f.yarn_alpha = 32.0;
    FCHECK("yarn_alpha 32 must be below yarn_beta 32 (YaRN's ramp runs from the first to the "
           "second)");
    f.yarn_alpha = 40.0;
    FCHECK("yarn_alpha 40 must be below yarn_beta 32 (YaRN's ramp runs from the first to the "
           "second)");
    f.yarn_alpha = -1.0;
    FCHECK("yarn_alpha and yarn_beta must be finite and >= 0, got -1 and 32");
    f.yarn_alpha = 1.0, f.yarn_beta = INFINITY;
    FCHECK("yarn_alpha and yarn_beta must be finite and >= 0, got 1 and inf");
    f = freq_of(RP_SCALING_PI, 4.0); /* orig_len, alpha, beta are yarn's only */
    f.yarn_alpha = 50.0;
    FCHECK_OK();
    f.yarn_alpha = 1.0, f.yarn_ramp = RP_YARN_RAMP_DIMS; /* the ramp too */
    FCHECK_OK();
    f = freq_of(RP_SCALING_YARN, 4.0), f.orig_len = 8.0, f.yarn_ramp = (rp_yarn_ramp)3;
    FCHECK("unknown yarn_ramp 3");
    f = freq_of(RP_SCALING_DYNAMIC, 2.0);
    FCHECK("orig_len (the original context length of scaling dynamic) must be >= 1, got 0");
    f = freq_of(RP_SCALING_LLAMA3, 8.0);
    FCHECK("orig_len (the original context length of scaling llama3) must be >= 1, got 0");
    f.orig_len = 64.0, f.low_freq_factor = 4.0;
    FCHECK("low_freq_factor 4 must be below high_freq_factor 4");
    f.low_freq_factor = -1.0;
    FCHECK("low_freq_factor and high_freq_factor must be finite and >= 0, got -1 and 4");
    f.low_freq_factor = 1.0, f.high_freq_factor = NAN;
    FCHECK("low_freq_factor and high_freq_factor must be finite and >= 0, got 1 and nan");
    f.high_freq_factor = 4.0, f.attention_factor = -0.5;
    FCHECK("attention_factor must be a finite number >= 0 (0: the scaling's own), got -0.5");
    f.attention_factor = INFINITY;
    FCHECK("attention_factor must be a finite number >= 0 (0: the scaling's own), got inf");
    f.attention_factor = 1.5;
    FCHECK_OK();
    f = freq_of(RP_SCALING_PI, 4.0), f.low_freq_factor = 9.0; /* llama3's only */
    FCHECK_OK();
    f = rp_rope_freq_default();
    f.xpos = -0.1;
    FCHECK("xpos (xPos gamma) must be a finite number >= 0 (0: off), got -0.1");
    f.xpos = NAN;
    FCHECK("xpos (xPos gamma) must be a finite number >= 0 (0: off), got nan");
    f.xpos = 0.4, f.xpos_scale_base = 0.0;
    FCHECK("xpos_scale_base must be a finite number > 0, got 0");
    f.xpos_scale_base = -512.0;
    FCHECK("xpos_scale_base must be a finite number > 0, got -512");
    f = rp_rope_freq_default();
    f.theta = th, f.n_theta = 4;
    FCHECK_OK();
    th[2] = NAN;
    FCHECK("freq: pair 2 has frequency nan; frequencies must be finite");
    th[2] = 0.25;
    f.n_theta = 0;
    FCHECK("freq must not be empty");
    f = rp_rope_freq_default();
    f.angles = ang, f.rows = 3, f.n_angles = 4;
    FCHECK_OK();
    ang[1 * 4 + 2] = INFINITY;
    FCHECK("angles: position 1, pair 2 has angle inf; angles must be finite");
    ang[1 * 4 + 2] = -INFINITY;
    FCHECK("angles: position 1, pair 2 has angle -inf; angles must be finite");
    ang[1 * 4 + 2] = 0.6;
    f.rows = 0;
    FCHECK("angles must not be empty");
    f.rows = 3, f.n_angles = 0;
    FCHECK("angles must not be empty");
    f.n_angles = 4;
    f.theta = th, f.n_theta = 4;
    FCHECK("freq and angles exclude each other (give one)");
    f.theta = NULL;
    f.scaling = RP_SCALING_PI, f.factor = 2.0;
    FCHECK("scaling pi does not apply to an angle table (the angles are final; scale them yourself)");
    f.scaling = RP_SCALING_YARN, f.orig_len = 8.0;
    FCHECK("scaling yarn does not apply to an angle table (the angles are final; scale them yourself)");
    /* one use */
    f = rp_rope_freq_default();
    f.theta = th, f.n_theta = 3;
    CHECK_MSG(rp_rope_freq_check_use(NULL, 64, 1000000, "d_rot_q"), RP_OK, "");
    CHECK_MSG(rp_rope_freq_check_use(&f, 6, 1000000, "d_rot_q"), RP_OK, "");
    CHECK_MSG(rp_rope_freq_check_use(&f, 8, 0, "d_rot_q"), RP_ERR_ARG,
              "freq holds 3 frequencies; d_rot_q 8 needs 4");
    f = rp_rope_freq_default();
    f.angles = ang, f.rows = 3, f.n_angles = 3;
    CHECK_MSG(rp_rope_freq_check_use(&f, 6, 2, "d_rot_k"), RP_OK, "");
    CHECK_MSG(rp_rope_freq_check_use(&f, 8, 2, "d_rot_k"), RP_ERR_ARG,
              "angles hold 3 per position; d_rot_k 8 needs 4");
    CHECK_MSG(rp_rope_freq_check_use(&f, 6, 3, "d_rot_k"), RP_ERR_ARG,
              "angles hold positions 0..2; position 3 is asked");
    area_end("checks");
}

/* ---- 4. equal ------------------------------------------------------------------------------ */

static void test_equal(void)
{
    area("equal");
    double t1[3] = {1.0, 0.1, 0.01}, t2[3] = {1.0, 0.1, 0.01}, t3[3] = {1.0, 0.1, 0.02};
    rp_rope_freq a = rp_rope_freq_default(), b = rp_rope_freq_default();
    CHECK(rp_rope_freq_equal(NULL, NULL), "NULL == NULL");
    CHECK(rp_rope_freq_equal(NULL, &a) && rp_rope_freq_equal(&a, NULL), "NULL == default");
    CHECK(rp_rope_freq_is_plain(NULL) && rp_rope_freq_is_plain(&a), "NULL and default are plain");
    b.factor = 3.0;
    CHECK(rp_rope_freq_equal(&a, &b), "no scaling: the factor does not matter");
    b = freq_of(RP_SCALING_PI, 2.0);
    CHECK(!rp_rope_freq_equal(&a, &b) && !rp_rope_freq_equal(NULL, &b), "pi != plain");
    CHECK(!rp_rope_freq_is_plain(&b), "pi is not plain");
    a = freq_of(RP_SCALING_PI, 4.0);
    CHECK(!rp_rope_freq_equal(&a, &b), "pi s=4 != pi s=2");
    a = freq_of(RP_SCALING_NTK, 2.0);
    CHECK(!rp_rope_freq_equal(&a, &b), "ntk != pi (same factor)");
    a = freq_of(RP_SCALING_YARN, 2.0), a.orig_len = 16.0;
    b = a;
    CHECK(rp_rope_freq_equal(&a, &b), "yarn == its copy");
    b.orig_len = 32.0;
    CHECK(!rp_rope_freq_equal(&a, &b), "yarn orig_len differs");
    b = a, b.yarn_beta = 16.0;
    CHECK(!rp_rope_freq_equal(&a, &b), "yarn beta differs");
    b = a, b.yarn_ramp = RP_YARN_RAMP_DIMS;
    CHECK(!rp_rope_freq_equal(&a, &b), "yarn ramp differs");
    b = a, b.attention_factor = 1.2;
    CHECK(!rp_rope_freq_equal(&a, &b), "attention_factor differs");
    b = a, b.scaling = RP_SCALING_LLAMA3;
    CHECK(!rp_rope_freq_equal(&a, &b), "llama3 != yarn");
    a = b, b.low_freq_factor = 2.0;
    CHECK(!rp_rope_freq_equal(&a, &b), "llama3 low_freq_factor differs");
    b = a, b.yarn_beta = 7.0; /* yarn's, not read by llama3 */
    CHECK(rp_rope_freq_equal(&a, &b), "llama3: yarn_beta does not matter");
    a.scaling = b.scaling = RP_SCALING_DYNAMIC, b.orig_len = a.orig_len + 1.0;
    CHECK(!rp_rope_freq_equal(&a, &b), "dynamic orig_len differs");
    a = rp_rope_freq_default(), b = a;
    b.xpos_scale_base = 16.0;
    CHECK(rp_rope_freq_equal(&a, &b), "xpos off: the scale base does not matter");
    a.xpos = b.xpos = 0.4;
    CHECK(!rp_rope_freq_equal(&a, &b), "xpos scale base differs");
    b.xpos_scale_base = a.xpos_scale_base;
    CHECK(rp_rope_freq_equal(&a, &b), "xpos equal");
    a = rp_rope_freq_default(), b = a;
    a.theta = t1, a.n_theta = 3, b.theta = t2, b.n_theta = 3;
    CHECK(rp_rope_freq_equal(&a, &b), "user theta: equal contents at other addresses");
    b.theta = t3;
    CHECK(!rp_rope_freq_equal(&a, &b), "user theta: contents differ");
    b.theta = t2, b.n_theta = 2;
    CHECK(!rp_rope_freq_equal(&a, &b), "user theta: lengths differ");
    CHECK(!rp_rope_freq_equal(&a, NULL), "user theta != plain");
    b = rp_rope_freq_default();
    b.angles = t2, b.rows = 1, b.n_angles = 3;
    CHECK(!rp_rope_freq_equal(&a, &b), "theta != angles with the same numbers");
    a = b, a.angles = t1;
    CHECK(rp_rope_freq_equal(&a, &b), "angles: equal contents");
    a.rows = 3, a.n_angles = 1;
    CHECK(!rp_rope_freq_equal(&a, &b), "angles: same numbers, other shape");
    area_end("equal");
}

/* ---- 5. attention -------------------------------------------------------------------------- */

typedef struct {
    int64_t B, T, S, H, D, Dv;
} dims;

#define REF_MAX_D 16
#define REF_MAX_S 64

/* x's first d_rot features: pair j times m_j and rotated by sgn c a_j (the tables at position p) */
static void ref_rot(double *x, int64_t d_rot, const rp_attn_cfg *cfg, int64_t p, double c, int side,
                    double sgn)
{
    double cs[REF_MAX_D], sn[REF_MAX_D];
    ref_row(cs, sn, NULL, cfg->freq, d_rot, cfg->scheme.base, c, side, p);
    int64_t h = d_rot / 2;
    for (int64_t j = 0; j < h; j++) {
        int half = cfg->scheme.pairing == RP_PAIR_HALF;
        int64_t a = half ? j : 2 * j, b = half ? j + h : 2 * j + 1;
        double xa = x[a], xb = x[b], s = sgn * sn[j];
        x[a] = xa * cs[j] - xb * s;
        x[b] = xb * cs[j] + xa * s;
    }
}

/* One head of causal attention over contiguous double q [B,T,H,D], k [B,S,H,D], v [B,S,H,Dv]:
 * o [T][Dv] and (a_out != NULL) the weights [T][S]. q at p0 + q_offset + t (side +1), k at
 * p0 + i (side -1); roper: v by + c i (side -1), o by -n (side +1); scores times the temperature. */
static void ref_head(double *o_out, double *a_out, const double *q, const double *k, const double *v,
                     dims d, const rp_attn_cfg *cfg, int64_t b, int64_t h)
{
    static double kr[REF_MAX_S][REF_MAX_D];
    double qr[REF_MAX_D], vr[REF_MAX_D], s[REF_MAX_S], a[REF_MAX_S];
    int rv = cfg->scheme.pe != RP_PE_ROPE;
    double vmul = cfg->scheme.pe == RP_PE_ROPER_LEGACY ? 2.0 : 1.0, sc = cfg->scale * ref_temp(cfg->freq);
    int64_t p0 = cfg->pos_offset;
    for (int64_t i = 0; i < d.S; i++) {
        for (int64_t f = 0; f < d.D; f++) kr[i][f] = k[((b * d.S + i) * d.H + h) * d.D + f];
        ref_rot(kr[i], cfg->scheme.d_rot_k, cfg, p0 + i, 1.0, -1, 1.0);
    }
    for (int64_t t = 0; t < d.T; t++) {
        int64_t n = cfg->q_offset + t;
        for (int64_t f = 0; f < d.D; f++) qr[f] = q[((b * d.T + t) * d.H + h) * d.D + f];
        ref_rot(qr, cfg->scheme.d_rot_q, cfg, p0 + n, 1.0, 1, 1.0);
        double m = -HUGE_VAL, z = 0.0;
        for (int64_t i = 0; i <= n && i < d.S; i++) {
            double dot = 0;
            for (int64_t f = 0; f < d.D; f++) dot += qr[f] * kr[i][f];
            s[i] = sc * dot;
            m = s[i] > m ? s[i] : m;
        }
        for (int64_t i = 0; i < d.S; i++) z += a[i] = i <= n ? exp(s[i] - m) : 0.0;
        double *o = o_out + t * d.Dv;
        for (int64_t f = 0; f < d.Dv; f++) o[f] = 0;
        for (int64_t i = 0; i < d.S; i++) {
            a[i] /= z;
            if (a_out) a_out[t * d.S + i] = a[i];
            for (int64_t f = 0; f < d.Dv; f++) vr[f] = v[((b * d.S + i) * d.H + h) * d.Dv + f];
            if (rv) ref_rot(vr, cfg->scheme.d_rot_v, cfg, p0 + i, vmul, -1, 1.0);
            for (int64_t f = 0; f < d.Dv; f++) o[f] += a[i] * vr[f];
        }
        if (rv) ref_rot(o, cfg->scheme.d_rot_o, cfg, p0 + n, 1.0, 1, -1.0);
    }
}

static double *to_double(const float *x, int64_t n)
{
    double *y = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) y[i] = (double)x[i];
    return y;
}

/* out [B,T,H,Dv] and att [B,H,T,S] (or NULL) of the reference from float inputs */
static void ref_attention(double *out, double *att, const float *q, const float *k, const float *v,
                          dims d, const rp_attn_cfg *cfg)
{
    double *qd = to_double(q, d.B * d.T * d.H * d.D), *kd = to_double(k, d.B * d.S * d.H * d.D);
    double *vd = to_double(v, d.B * d.S * d.H * d.Dv), o[REF_MAX_S * REF_MAX_D];
    for (int64_t b = 0; b < d.B; b++)
        for (int64_t h = 0; h < d.H; h++) {
            ref_head(o, att ? att + (b * d.H + h) * d.T * d.S : NULL, qd, kd, vd, d, cfg, b, h);
            for (int64_t t = 0; t < d.T; t++)
                memcpy(out + ((b * d.T + t) * d.H + h) * d.Dv, o + t * d.Dv, sizeof(double) * (size_t)d.Dv);
        }
    free(qd);
    free(kd);
    free(vd);
}

static rp_attn_cfg base_cfg(rp_pe pe, int64_t D, int64_t Dv, const rp_rope_freq *f)
{
    rp_attn_cfg c;
    memset(&c, 0, sizeof c);
    c.scheme = check_scheme(pe, D, Dv);
    c.causal = 1;
    c.scale = 1.0 / sqrt((double)D);
    c.freq = f;
    return c;
}

/* rp_attention (the tensor-level call) on contiguous float inputs: out and att, status */
static rp_status run_tensor(float *out, float *att, const float *q, const float *k, const float *v,
                            dims d, const rp_attn_cfg *cfg)
{
    rp_tensor tq = check_new(4, CHECK_SHAPE(d.B, d.T, d.H, d.D));
    rp_tensor tk = check_new(4, CHECK_SHAPE(d.B, d.S, d.H, d.D));
    rp_tensor tv = check_new(4, CHECK_SHAPE(d.B, d.S, d.H, d.Dv)), to, ta;
    check_scatter(&tq, q);
    check_scatter(&tk, k);
    check_scatter(&tv, v);
    rp_status st = rp_attention(&to, &ta, &tq, &tk, &tv, cfg);
    if (st == RP_OK) {
        check_gather(out, &to);
        if (att) check_gather(att, &ta);
        rp_tensor_release(&to);
        rp_tensor_release(&ta);
    }
    rp_tensor_release(&tq);
    rp_tensor_release(&tk);
    rp_tensor_release(&tv);
    return st;
}

/* max |out - reference| of rp_attention (NaN when a value is not finite), att checked too */
static double attn_err(const float *q, const float *k, const float *v, dims d, const rp_attn_cfg *cfg,
                       double *att_err)
{
    int64_t no = d.B * d.T * d.H * d.Dv, na = d.B * d.H * d.T * d.S;
    float *go = malloc(sizeof(float) * (size_t)no), *ga = malloc(sizeof(float) * (size_t)na);
    double *wo = malloc(sizeof(double) * (size_t)no), *wa = malloc(sizeof(double) * (size_t)na);
    double e = NAN, ea = NAN;
    rp_status st = run_tensor(go, ga, q, k, v, d, cfg);
    if (st == RP_OK) {
        ref_attention(wo, wa, q, k, v, d, cfg);
        int64_t nf = 0, nfa = 0;
        e = ea = 0.0;
        for (int64_t i = 0; i < no; i++) {
            nf += !isfinite(go[i]);
            e = fmax(e, fabs((double)go[i] - wo[i]));
        }
        for (int64_t i = 0; i < na; i++) {
            nfa += !isfinite(ga[i]);
            ea = fmax(ea, fabs((double)ga[i] - wa[i]));
        }
        if (nf) e = (double)NAN;
        if (nfa) ea = (double)NAN;
    } else {
        printf("  rp_attention failed: %s\n", rp_last_error()); /* the caller's check fails on NaN */
    }
    if (att_err) *att_err = ea;
    free(go);
    free(ga);
    free(wo);
    free(wa);
    return e;
}

enum { AD = 8, ADV = 6, AH = 2, AROWS = 60 };

/* the schemes of the attention tests over theta / angle buffers */
enum { NSCHEMES = 10 };
static rp_rope_freq scheme(int i, const double *th, const double *ang, const char **name)
{
    static const char *names[NSCHEMES] = {
        "pi s=4", "ntk s=4", "yarn s=4 L=8", "xpos 0.4/16", "user theta", "user angles",
        "yarn s=4 L=8 + xpos 0.4/16 + interleaved", "dynamic s=4 L=8",
        "llama3 s=4 L=8 low 1 high 4", "yarn dims s=4 L=8 + attention_factor 1.3"};
    rp_rope_freq f = rp_rope_freq_default();
    if (i == 7) f = freq_of(RP_SCALING_DYNAMIC, 4.0), f.orig_len = 8.0;
    if (i == 8) f = freq_of(RP_SCALING_LLAMA3, 4.0), f.orig_len = 8.0;
    if (i == 9)
        f = freq_of(RP_SCALING_YARN, 4.0), f.orig_len = 8.0, f.yarn_ramp = RP_YARN_RAMP_DIMS,
        f.attention_factor = 1.3;
    if (i == 0) f = freq_of(RP_SCALING_PI, 4.0);
    if (i == 1) f = freq_of(RP_SCALING_NTK, 4.0);
    if (i == 2 || i == 6) f = freq_of(RP_SCALING_YARN, 4.0), f.orig_len = 8.0;
    if (i == 3 || i == 6) f.xpos = 0.4, f.xpos_scale_base = 16.0;
    if (i == 4) f.theta = th, f.n_theta = AD / 2;
    if (i == 5) f.angles = ang, f.rows = AROWS, f.n_angles = AD / 2;
    *name = names[i];
    return f;
}

#define ATT_TOL 1e-5

static void test_attention_ref(void)
{
    area("attention vs reference");
    double th[AD / 2], ang[AROWS * AD / 2];
    for (int i = 0; i < AD / 2; i++) th[i] = exp(check_rand(&rng_state, log(0.01), log(2.5)));
    for (int i = 0; i < AROWS * AD / 2; i++) ang[i] = check_rand(&rng_state, -20.0, 20.0);
    struct { int64_t T, S, qo, po; } g[3] = {{37, 37, 0, 0}, {5, 37, 32, 7}, {37, 40, 3, 11}};
    for (int gi = 0; gi < 3; gi++) {
        dims d = {1, g[gi].T, g[gi].S, AH, AD, ADV};
        float *q = check_rand_floats(&rng_state, d.T * AH * AD, -2.0, 2.0);
        float *k = check_rand_floats(&rng_state, d.S * AH * AD, -2.0, 2.0);
        float *v = check_rand_floats(&rng_state, d.S * AH * ADV, -1.0, 1.0);
        for (int si = 0; si < NSCHEMES; si++)
            CHECK_EACH_PE(pe, CHECK_PE_ROTARY) {
                const char *name;
                rp_rope_freq f = scheme(si, th, ang, &name);
                rp_attn_cfg cfg = base_cfg((rp_pe)pe, AD, ADV, &f);
                cfg.q_offset = g[gi].qo, cfg.pos_offset = g[gi].po;
                if (si == 6) cfg.scheme.pairing = RP_PAIR_INTERLEAVED;
                if (gi == 2) check_scheme_widths(&cfg.scheme, 6, 4); /* partial widths */
                double ea, e = attn_err(q, k, v, d, &cfg, &ea);
                CHECK(e <= ATT_TOL && ea <= ATT_TOL, "%s pe=%s T=%lld S=%lld q_offset=%lld "
                      "pos_offset=%lld d_rot_q=%lld d_rot_v=%lld: max |out - ref| %.3g, |att - "
                      "ref| %.3g", name, rp_pe_name((rp_pe)pe), (long long)d.T, (long long)d.S,
                      (long long)cfg.q_offset, (long long)cfg.pos_offset,
                      (long long)cfg.scheme.d_rot_q, (long long)cfg.scheme.d_rot_v, e, ea);
                if (gi == 0 && pe == RP_PE_ROPER)
                    printf("  %s pe=roper T=37: max |out - ref| %.3g, |att - ref| %.3g\n", name, e, ea);
            }
        free(q);
        free(k);
        free(v);
    }
    area_end("attention vs reference");
}

/* forward + backward through the kernel calls; the loss is sum(out * G) */
static void kernel_fwd_bwd(float *out, float *dq, float *dk, float *dv, const float *q, const float *k,
                           const float *v, const float *G, dims d, const rp_attn_cfg *cfg)
{
    int64_t ns = rp_attention_scratch_floats(cfg, d.B, d.T, d.S, d.H, d.D, d.Dv, 2);
    float *scratch = check_rand_floats(&rng_state, ns, -1e3, 1e3);
    float *lse = malloc(sizeof(float) * (size_t)(d.B * d.H * d.T));
    int64_t HD = d.H * d.D, HDv = d.H * d.Dv;
    rp_attn_io io = {.B = d.B, .T = d.T, .S = d.S, .H = d.H, .D = d.D, .Dv = d.Dv, .q = q,
                     .k = k, .v = v, .ldq = HD, .ldk = HD, .ldv = HDv, .out = out, .ldo = HDv,
                     .lse = lse, .dout = G, .dq = dq, .dk = dk, .dv = dv, .scratch = scratch,
                     .nthreads = 2};
    rp_attention_forward(&io, cfg);
    if (dq) rp_attention_backward(&io, cfg);
    free(scratch);
    free(lse);
}

static double ref_loss(const double *q, const double *k, const double *v, const double *G, dims d,
                       const rp_attn_cfg *cfg)
{
    double o[REF_MAX_S * REF_MAX_D], L = 0.0;
    for (int64_t h = 0; h < d.H; h++) {
        ref_head(o, NULL, q, k, v, d, cfg, 0, h);
        for (int64_t t = 0; t < d.T; t++)
            for (int64_t f = 0; f < d.Dv; f++) L += o[t * d.Dv + f] * G[(t * d.H + h) * d.Dv + f];
    }
    return L;
}

static void test_backward_fd(void)
{
    area("backward vs finite differences");
    struct { int64_t T, S, qo, po; int pe, si; } g[5] = {
        {6, 6, 0, 0, RP_PE_ROPER, 3},  {4, 7, 3, 5, RP_PE_ROPER, 3}, {6, 6, 0, 0, RP_PE_ROPER_LEGACY, 3},
        {6, 6, 0, 0, RP_PE_ROPE, 3},   {5, 7, 2, 3, RP_PE_ROPER, 6}};
    for (int gi = 0; gi < 5; gi++) {
        dims d = {1, g[gi].T, g[gi].S, AH, AD, ADV};
        const char *name;
        rp_rope_freq f = scheme(g[gi].si, NULL, NULL, &name);
        f.xpos_scale_base = 4.0; /* magnitudes far from 1 within a few positions */
        rp_attn_cfg cfg = base_cfg((rp_pe)g[gi].pe, AD, ADV, &f);
        cfg.q_offset = g[gi].qo, cfg.pos_offset = g[gi].po;
        if (g[gi].si == 6) cfg.scheme.pairing = RP_PAIR_INTERLEAVED;
        int64_t n[3] = {d.T * AH * AD, d.S * AH * AD, d.S * AH * ADV}, no = d.T * AH * ADV;
        float *x[3] = {check_rand_floats(&rng_state, n[0], -2.0, 2.0),
                       check_rand_floats(&rng_state, n[1], -2.0, 2.0),
                       check_rand_floats(&rng_state, n[2], -1.0, 1.0)};
        float *G = check_rand_floats(&rng_state, no, -1.0, 1.0), *out = malloc(sizeof(float) * (size_t)no);
        float *gr[3] = {calloc((size_t)n[0], sizeof(float)), calloc((size_t)n[1], sizeof(float)),
                        calloc((size_t)n[2], sizeof(float))};
        kernel_fwd_bwd(out, gr[0], gr[1], gr[2], x[0], x[1], x[2], G, d, &cfg);
        double *xd[3] = {to_double(x[0], n[0]), to_double(x[1], n[1]), to_double(x[2], n[2])};
        double *Gd = to_double(G, no);
        const char *gn[3] = {"dq", "dk", "dv"};
        for (int j = 0; j < 3; j++) {
            double *fd = malloc(sizeof(double) * (size_t)n[j]), gmax = 0.0;
            for (int64_t i = 0; i < n[j]; i++) {
                double x0 = xd[j][i], hh = 1e-5;
                xd[j][i] = x0 + hh;
                double lp = ref_loss(xd[0], xd[1], xd[2], Gd, d, &cfg);
                xd[j][i] = x0 - hh;
                double lm = ref_loss(xd[0], xd[1], xd[2], Gd, d, &cfg);
                xd[j][i] = x0;
                fd[i] = (lp - lm) / (2.0 * hh);
                gmax = fmax(gmax, fabs(fd[i]));
            }
            char label[200];
            snprintf(label, sizeof label, "%s vs finite differences: %s (scale base 4) pe=%s T=%lld S=%lld "
                     "q_offset=%lld pos_offset=%lld (max |grad| %.3g)", gn[j], name,
                     rp_pe_name(cfg.scheme.pe), (long long)d.T, (long long)d.S, (long long)cfg.q_offset,
                     (long long)cfg.pos_offset, gmax);
            CHECK_CLOSE(gr[j], fd, n[j], 1e-5 * fmax(1.0, gmax), label);
            free(fd);
        }
        for (int j = 0; j < 3; j++) free(x[j]), free(gr[j]), free(xd[j]);
        free(G);
        free(Gd);
        free(out);
    }
    area_end("backward vs finite differences");
}

static void test_decode(void)
{
    area("decode");
    enum { Tn = 37, cap = Tn };
    for (int si = 2; si < NSCHEMES; si++)
        CHECK_EACH_PE(pe, CHECK_PE_ROTARY) {
            if (si >= 4 && si <= 6) continue; /* the user tables: test_attention_ref */
            const char *name;
            rp_rope_freq f = scheme(si, NULL, NULL, &name);
            rp_attn_cfg cfg = base_cfg((rp_pe)pe, AD, ADV, &f);
            dims d = {1, Tn, Tn, AH, AD, ADV};
            float *q = check_rand_floats(&rng_state, Tn * AH * AD, -2.0, 2.0);
            float *k = check_rand_floats(&rng_state, Tn * AH * AD, -2.0, 2.0);
            float *v = check_rand_floats(&rng_state, Tn * AH * ADV, -1.0, 1.0);
            float *full = malloc(sizeof(float) * (size_t)(Tn * AH * ADV));
            kernel_fwd_bwd(full, NULL, NULL, NULL, q, k, v, NULL, d, &cfg);
            int64_t nc = rp_attention_cache_floats(cap, AH, AD, ADV);
            int64_t ns = rp_attention_decode_scratch_floats(&cfg, cap, AH, AD, ADV);
            float *cache = check_rand_floats(&rng_state, nc, -1e3, 1e3); /* garbage past pos */
            float *scratch = malloc(sizeof(float) * (size_t)ns);
            float qt[AH * AD], out[AH * ADV];
            double want[AH * ADV], qw[AH * AD], eref = 0.0, eq = 0.0, efull = 0.0;
            for (int64_t pos = 0; pos < Tn; pos++) {
                memcpy(qt, q + pos * AH * AD, sizeof qt);
                rp_attention_decode(out, scratch, qt, k + pos * AH * AD, v + pos * AH * ADV, cache,
                                    cap, pos, AH, AD, ADV, &cfg);
                rp_attn_cfg rc = cfg;
                rc.q_offset = pos;
                dims d1 = {1, 1, pos + 1, AH, AD, ADV};
                ref_attention(want, NULL, q + pos * AH * AD, k, v, d1, &rc);
                for (int64_t j = 0; j < AH * ADV; j++) eref = fmax(eref, fabs((double)out[j] - want[j]));
                for (int64_t j = 0; j < AH * AD; j++) qw[j] = (double)q[pos * AH * AD + j];
                for (int64_t h = 0; h < AH; h++) ref_rot(qw + h * AD, AD, &cfg, pos, 1.0, 1, 1.0);
                for (int64_t j = 0; j < AH * AD; j++) eq = fmax(eq, fabs((double)qt[j] - qw[j]));
            }
            for (int64_t j = 0; j < AH * ADV; j++)
                efull = fmax(efull, fabs((double)out[j] - (double)full[(Tn - 1) * AH * ADV + j]));
            CHECK(efull <= 2e-6, "decode %s pe=%s: last step vs the forward's last row, max |diff| %.3g",
                  name, rp_pe_name(cfg.scheme.pe), efull);
            CHECK(eref <= ATT_TOL, "decode %s pe=%s: every step vs the reference, max |diff| %.3g",
                  name, rp_pe_name(cfg.scheme.pe), eref);
            CHECK(eq <= 1e-5, "decode %s pe=%s: q rotated (and scaled) in place, max |diff| %.3g", name,
                  rp_pe_name(cfg.scheme.pe), eq);
            printf("  decode %s pe=%s: vs forward %.3g, vs reference %.3g\n", name,
                   rp_pe_name(cfg.scheme.pe), efull, eref);
            free(q), free(k), free(v), free(full), free(cache), free(scratch);
        }
    area_end("decode");
}

/* Decoding's cos/sin rows built once (rp_attention_decode_rows, over positions 0 .. cap-1 in one
 * rp_rope_freq_tables call) hold for every position the bits of that position's row alone, for
 * every scheme (dynamic NTK, xPos, the user tables, partial widths, interleaved) and rotary
 * mode; and rp_attention_decode reading them (cfg.rope_rows) gives bitwise the outputs, the
 * rotated query and the cache of computing each row per call. */
static void test_decode_rows(void)
{
    area("decode rows built once");
    enum { cap = 41 };
    double th[AD / 2], ang[AROWS * AD / 2];
    for (int i = 0; i < AD / 2; i++) th[i] = exp(check_rand(&rng_state, log(0.01), log(2.5)));
    for (int i = 0; i < AROWS * AD / 2; i++) ang[i] = check_rand(&rng_state, -20.0, 20.0);
    for (int si = 0; si < NSCHEMES; si++)
        for (int partial = 0; partial < 2; partial++)
            CHECK_EACH_PE(pe, CHECK_PE_ROTARY) {
                const char *name;
                rp_rope_freq f = scheme(si, th, ang, &name);
                rp_attn_cfg cfg = base_cfg((rp_pe)pe, AD, ADV, &f);
                if (si == 6) cfg.scheme.pairing = RP_PAIR_INTERLEAVED;
                if (partial) check_scheme_widths(&cfg.scheme, 6, 4);
                const rp_pe_scheme sc = cfg.scheme;
                /* the placements in the rows' order: width, angle factor, xPos side */
                const struct { int64_t w; double c; int side; } pl[4] = {
                    {sc.d_rot_q, 1.0, 1}, {sc.d_rot_k, 1.0, -1}, {sc.d_rot_v, sc.v_angle, -1},
                    {sc.d_rot_o, 1.0, 1}};
                int64_t want_n = 0;
                for (int i = 0; i < 4; i++) want_n += cap * pl[i].w;
                int64_t nr = rp_attention_decode_rows_floats(&cfg, cap);
                CHECK(nr == want_n && nr > 0, "%s pe=%s: %lld row floats, want %lld", name,
                      rp_pe_name((rp_pe)pe), (long long)nr, (long long)want_n);
                float *rows = malloc(sizeof(float) * (size_t)nr);
                rp_attention_decode_rows(rows, &cfg, cap);
                float one_c[AD / 2], one_s[AD / 2];
                int64_t bad = 0, off = 0;
                for (int i = 0; i < 4; i++) {
                    int64_t h = pl[i].w / 2;
                    for (int64_t p = 0; p < cap && h; p++) {
                        rp_rope_freq_tables(one_c, one_s, &f, pl[i].w, sc.base, pl[i].c,
                                            pl[i].side, NULL, p, 1);
                        bad += memcmp(one_c, rows + off + p * h, sizeof(float) * (size_t)h) != 0;
                        bad += memcmp(one_s, rows + off + (cap + p) * h,
                                      sizeof(float) * (size_t)h) != 0;
                    }
                    off += cap * pl[i].w;
                }
                CHECK(bad == 0, "%s pe=%s d_rot_q=%lld: %lld rows differ from one position's",
                      name, rp_pe_name((rp_pe)pe), (long long)sc.d_rot_q, (long long)bad);

                int64_t nc = rp_attention_cache_floats(cap, AH, AD, ADV);
                int64_t ns = rp_attention_decode_scratch_floats(&cfg, cap, AH, AD, ADV);
                float *c0 = check_rand_floats(&rng_state, nc, -1e3, 1e3);
                float *c1 = malloc(sizeof(float) * (size_t)nc);
                memcpy(c1, c0, sizeof(float) * (size_t)nc);
                float *scratch = malloc(sizeof(float) * (size_t)ns);
                float *q = check_rand_floats(&rng_state, cap * AH * AD, -2.0, 2.0);
                float *k = check_rand_floats(&rng_state, cap * AH * AD, -2.0, 2.0);
                float *v = check_rand_floats(&rng_state, cap * AH * ADV, -1.0, 1.0);
                rp_attn_cfg tc = cfg;
                tc.rope_rows = rows;
                int64_t diff = 0;
                for (int64_t pos = 0; pos < cap; pos++) {
                    float q0[AH * AD], q1[AH * AD], o0[AH * ADV], o1[AH * ADV];
                    memcpy(q0, q + pos * AH * AD, sizeof q0);
                    memcpy(q1, q0, sizeof q1);
                    rp_attention_decode(o0, scratch, q0, k + pos * AH * AD, v + pos * AH * ADV,
                                        c0, cap, pos, AH, AD, ADV, &cfg);
                    rp_attention_decode(o1, scratch, q1, k + pos * AH * AD, v + pos * AH * ADV,
                                        c1, cap, pos, AH, AD, ADV, &tc);
                    diff += memcmp(o0, o1, sizeof o0) != 0;
                    diff += memcmp(q0, q1, sizeof q0) != 0;
                }
                diff += memcmp(c0, c1, sizeof(float) * (size_t)nc) != 0;
                CHECK(diff == 0, "%s pe=%s d_rot_q=%lld: decoding with the built rows differs in "
                      "%lld outputs, queries or the cache", name, rp_pe_name((rp_pe)pe),
                      (long long)sc.d_rot_q, (long long)diff);
                free(rows), free(c0), free(c1), free(scratch), free(q), free(k), free(v);
            }
    area_end("decode rows built once");
}

/* Scores depend on n - m only: shifting every position by 1000 leaves the outputs (random user
 * frequencies); under xPos too in exact arithmetic, but in float the per-position magnitudes
 * zeta^(+-p/scale_base) leave the float range. */
static void test_relative(void)
{
    area("relative distance");
    dims d = {1, 12, 12, AH, AD, ADV};
    float *q = check_rand_floats(&rng_state, d.T * AH * AD, -2.0, 2.0);
    float *k = check_rand_floats(&rng_state, d.S * AH * AD, -2.0, 2.0);
    float *v = check_rand_floats(&rng_state, d.S * AH * ADV, -1.0, 1.0);
    int64_t no = d.T * AH * ADV, na = AH * d.T * d.S;
    float *o0 = malloc(sizeof(float) * (size_t)no), *o1 = malloc(sizeof(float) * (size_t)no);
    float *a0 = malloc(sizeof(float) * (size_t)na), *a1 = malloc(sizeof(float) * (size_t)na);
    double th[AD / 2];
    for (int i = 0; i < AD / 2; i++) th[i] = check_rand(&rng_state, 0.0, 3.0);
    for (int pe = RP_PE_ROPE; pe <= RP_PE_ROPER; pe++) {
        rp_rope_freq f = rp_rope_freq_default();
        f.theta = th, f.n_theta = AD / 2;
        rp_attn_cfg cfg = base_cfg((rp_pe)pe, AD, ADV, &f);
        rp_status s0 = run_tensor(o0, a0, q, k, v, d, &cfg);
        cfg.pos_offset = 1000;
        rp_status s1 = run_tensor(o1, a1, q, k, v, d, &cfg);
        if (CHECK(s0 == RP_OK && s1 == RP_OK, "rp_attention: %s", rp_last_error())) {
            char label[120];
            snprintf(label, sizeof label, "user theta pe=%s: out at pos_offset 1000 == at 0",
                     rp_pe_name(cfg.scheme.pe));
            CHECK_CLOSE(o1, o0, no, 1e-5, label);
            snprintf(label, sizeof label, "user theta pe=%s: att at pos_offset 1000 == at 0",
                     rp_pe_name(cfg.scheme.pe));
            CHECK_CLOSE(a1, a0, na, 1e-5, label);
        }
    }
    /* xPos (gamma 0.4, scale base 16): the error against the (offset-free) reference as the
     * offset grows */
    for (int pe = RP_PE_ROPE; pe <= RP_PE_ROPER; pe++) {
        rp_rope_freq f = rp_rope_freq_default();
        f.xpos = 0.4, f.xpos_scale_base = 16.0;
        rp_attn_cfg cfg = base_cfg((rp_pe)pe, AD, ADV, &f);
        dims d8 = {1, 8, 8, AH, AD, ADV};
        double e0 = attn_err(q, k, v, d8, &cfg, NULL);
        int64_t first_big = -1, first_nan = -1;
        double e_end = 0.0;
        for (int64_t off = 0; off <= 2000; off += 8) {
            cfg.pos_offset = off;
            double e = attn_err(q, k, v, d8, &cfg, NULL);
            if (first_big < 0 && !(e <= 1e-3)) first_big = off;
            if (first_nan < 0 && isnan(e)) first_nan = off;
            if (off == 2000) e_end = e;
        }
        for (int64_t off = first_big - 7; first_big > 0 && off < first_big; off++) { /* step 1 */
            cfg.pos_offset = off;
            double e = attn_err(q, k, v, d8, &cfg, NULL);
            if (!(e <= 1e-3)) first_big = off;
            if (isnan(e) && off < first_nan) first_nan = off;
        }
        cfg.pos_offset = first_big > 0 ? first_big - 1 : 0;
        double e_before = attn_err(q, k, v, d8, &cfg, NULL);
        printf("  xpos 0.4/16 pe=%s (T = S = 8): error %.3g at pos_offset 0, %.3g at %lld; above "
               "1e-3 from pos_offset %lld, non-finite outputs from %lld; at 2000: %.3g\n",
               rp_pe_name(cfg.scheme.pe), e0, e_before, (long long)first_big - 1, (long long)first_big,
               (long long)first_nan, e_end);
        CHECK(e0 <= ATT_TOL, "xpos pe=%s at pos_offset 0: max |out - ref| %.3g", rp_pe_name(cfg.scheme.pe), e0);
        CHECK(!(e_end <= 1e-3), "xpos pe=%s at pos_offset 2000: the float magnitudes leave the range "
              "(error %.3g)", rp_pe_name(cfg.scheme.pe), e_end);
        CHECK(first_big > 1000, "xpos pe=%s: exact enough up to pos_offset 1000 (first error > 1e-3 "
              "at %lld)", rp_pe_name(cfg.scheme.pe), (long long)first_big);
    }
    free(q), free(k), free(v), free(o0), free(o1), free(a0), free(a1);
    area_end("relative distance");
}

static void test_attention_errors(void)
{
    area("attention errors");
    rp_tensor q = check_new(4, CHECK_SHAPE(1, 2, 1, 8)), k = check_new(4, CHECK_SHAPE(1, 12, 1, 8));
    rp_tensor v = check_new(4, CHECK_SHAPE(1, 12, 1, 8));
    double ang[13 * 4] = {0}, th[4] = {1.0, NAN, 0.1, 0.01};
    rp_rope_freq f = freq_of(RP_SCALING_PI, 2.0);
    rp_attn_cfg cfg = base_cfg(RP_PE_NONE, 8, 8, &f);
    char msg[128];
    CHECK_MSG(rp_attention_check(&q, &k, &v, &cfg), RP_ERR_ARG,
              check_pe_msg(msg, sizeof msg,
                           "scaling, xpos, freq and angles need a rotary pe ({rotary}), not none"));
    cfg.scheme = check_scheme(RP_PE_ALIBI, 0, 0);
    CHECK_MSG(rp_attention_check(&q, &k, &v, &cfg), RP_ERR_ARG,
              check_pe_msg(msg, sizeof msg,
                           "scaling, xpos, freq and angles need a rotary pe ({rotary}), not alibi"));
    rp_rope_freq plain = rp_rope_freq_default();
    cfg.freq = &plain;
    ACHECK_OK();
    cfg = base_cfg(RP_PE_ROPE, 8, 8, &f);
    f.factor = -1.0;
    ACHECK("scaling_factor must be a finite number > 0, got -1");
    f = rp_rope_freq_default();
    f.theta = th, f.n_theta = 4;
    ACHECK("freq: pair 1 has frequency nan; frequencies must be finite");
    th[1] = 0.5;
    ACHECK_OK();
    f.n_theta = 3;
    ACHECK("freq holds 3 frequencies; d_rot_q 8 needs 4");
    f = rp_rope_freq_default();
    f.angles = ang, f.rows = 12, f.n_angles = 4;
    ACHECK_OK();
    f.rows = 10; /* 2 queries at 0, 1: fine; 12 keys: too short */
    ACHECK("angles hold positions 0..9; position 11 is asked");
    f.rows = 12;
    cfg.pos_offset = 1;
    ACHECK("angles hold positions 0..11; position 12 is asked");
    cfg.pos_offset = 0, cfg.q_offset = 11; /* the queries at 11, 12 */
    ACHECK("angles hold positions 0..11; position 12 is asked");
    cfg.q_offset = 0;
    f.n_angles = 3, f.rows = 13;
    ACHECK("angles hold 3 per position; d_rot_q 8 needs 4");
    cfg.scheme = check_scheme(RP_PE_ROPER, 6, 8);
    ACHECK("angles hold 3 per position; d_rot_v 8 needs 4");
    cfg.scheme = check_scheme(RP_PE_ROPER, 6, 6);
    ACHECK_OK();
    rp_tensor_release(&q);
    rp_tensor_release(&k);
    rp_tensor_release(&v);
    area_end("attention errors");
}

/* 1 when rows of rp_freq_rules apply to scaling d's parameters only (not to every scheme, nor to
 * orig_len, which three scalings share): the ranges of its own parameters. */
static int own_rules(const rp_scaling_desc *d)
{
    for (int i = 0; i < rp_freq_nrules; i++) {
        int r = rp_freq_rules[i].reads & ~RP_READS_LEN & ~RP_READS_FACTOR;
        if (r & d->reads) return 1;
    }
    return 0;
}

/* The scalar rules' rows (rope_freq.h: rp_freq_rules) against the rules written out here: which
 * fields each bounds or orders, for which scalings, in order; the messages are test_checks'. */
static void test_rule_table(void)
{
    printf("-- the scalar rules\n");
    static const struct {
        const char *kind, *a, *b;
        int reads;
        double lo;
        int lo_open;
    } want[] = {
        {"min", "factor", NULL, 0, 0.0, 1},
        {"min", "orig_len", NULL, RP_READS_LEN, 1.0, 0},
        {"min", "attention_factor", NULL, 0, 0.0, 0},
        {"name", "yarn_ramp", NULL, RP_READS_YARN, 0.0, 0},
        {"min2", "yarn_alpha", "yarn_beta", RP_READS_YARN, 0.0, 0},
        {"below", "yarn_alpha", "yarn_beta", RP_READS_YARN, 0.0, 0},
        {"min2", "low_freq_factor", "high_freq_factor", RP_READS_LLAMA3, 0.0, 0},
        {"below", "low_freq_factor", "high_freq_factor", RP_READS_LLAMA3, 0.0, 0},
        {"min", "xpos", NULL, 0, 0.0, 0},
        {"min", "xpos_scale_base", NULL, 0, 0.0, 1},
    };
    int n = (int)(sizeof want / sizeof want[0]);
    CHECK(rp_freq_nrules == n, "%d rows, want %d", rp_freq_nrules, n);
    for (int i = 0; i < n && i < rp_freq_nrules; i++) {
        const rp_freq_rule *r = &rp_freq_rules[i];
        int bound = r->kind == RP_FREQ_RULE_MIN || r->kind == RP_FREQ_RULE_MIN2;
        CHECK(!strcmp(rp_freq_rule_kinds[r->kind], want[i].kind) && !strcmp(r->a, want[i].a) &&
                  (r->b && want[i].b ? !strcmp(r->b, want[i].b) : r->b == want[i].b) &&
                  r->reads == want[i].reads && (!bound || (r->lo == want[i].lo &&
                                                           r->lo_open == want[i].lo_open)) &&
                  (r->kind == RP_FREQ_RULE_NAME) == (r->names != NULL),
              "row %d (%s %s)", i, want[i].kind, want[i].a);
        CHECK(!bound || rp_freq_rule_bound(r->a_at) == r, "row %d: the bound of %s", i, r->a);
    }
    CHECK(rp_freq_rules[3].names == rp_yarn_ramp_names, "yarn_ramp's names");
    CHECK(rp_freq_rule_bound(offsetof(rp_rope_freq, yarn_beta)) == NULL &&
              rp_freq_rule_bound(offsetof(rp_rope_freq, scaling)) == NULL,
          "no bound of its own for yarn_beta, scaling");
}

/* The scaling table's rows against what the papers and Hugging Face's config.json say, written
 * out here: the names in code order, the rope_type, the parameters read, the format version. */
static void test_scaling_table(void)
{
    printf("-- the scaling table\n");
    static const struct {
        const char *name, *hf;
        int reads;
        uint32_t since;
        int per_position, own_score, own_rules;
    } want[RP_SCALING_COUNT] = {
        {"none", "default", 0, 1, 0, 0, 0},
        {"pi", "linear", RP_READS_FACTOR, 3, 0, 0, 0},
        {"ntk", NULL, RP_READS_FACTOR, 3, 0, 0, 0},
        {"yarn", "yarn", RP_READS_FACTOR | RP_READS_LEN | RP_READS_YARN, 3, 0, 1, 1},
        {"dynamic", "dynamic", RP_READS_FACTOR | RP_READS_LEN, 4, 1, 0, 0},
        {"llama3", "llama3", RP_READS_FACTOR | RP_READS_LEN | RP_READS_LLAMA3, 4, 0, 0, 1},
    };
    for (int s = 0; s < RP_SCALING_COUNT; s++) {
        const rp_scaling_desc *d = rp_scaling_of((rp_rope_scaling)s);
        CHECK(!strcmp(d->name, want[s].name) && d->name == rp_scaling_names[s] &&
                  (d->hf && want[s].hf ? !strcmp(d->hf, want[s].hf) : d->hf == want[s].hf) &&
                  d->reads == want[s].reads && d->since == want[s].since &&
                  d->per_position == want[s].per_position &&
                  !d->score == !want[s].own_score && own_rules(d) == want[s].own_rules &&
                  d->theta != NULL,
              "row %d (%s)", s, d->name);
        CHECK(rp_scaling_needs_len((rp_rope_scaling)s) == !!(want[s].reads & RP_READS_LEN),
              "%s: needs orig_len", d->name);
    }
    CHECK(rp_scaling_names[RP_SCALING_COUNT] == NULL, "the names end with NULL");
    CHECK(rp_scaling_of((rp_rope_scaling)99) == rp_scaling_of(RP_SCALING_NONE) &&
              rp_scaling_of((rp_rope_scaling)-1) == rp_scaling_of(RP_SCALING_NONE),
          "an unknown code reads as none");
}

int main(void)
{
    test_scaling_table();
    test_rule_table();
    test_theta();
    test_tables();
    test_rotate_inverse();
    test_checks();
    test_equal();
    test_attention_ref();
    test_backward_fd();
    test_decode();
    test_decode_rows();
    test_relative();
    test_attention_errors();
    return check_summary("test_rope_freq");
}
