#include "rope_freq.h"

#include <math.h>
#include <string.h>

const char *const rp_scaling_names[RP_SCALING_COUNT + 1] = {"none", "pi", "ntk", "yarn", NULL};

rp_rope_freq rp_rope_freq_default(void)
{
    rp_rope_freq f;
    memset(&f, 0, sizeof f);
    f.scaling = RP_SCALING_NONE;
    f.factor = 1.0;
    f.yarn_alpha = RP_YARN_ALPHA;
    f.yarn_beta = RP_YARN_BETA;
    f.xpos_scale_base = RP_XPOS_SCALE_BASE;
    return f;
}

int rp_rope_freq_is_plain(const rp_rope_freq *f)
{
    return !f || (f->scaling == RP_SCALING_NONE && f->xpos == 0.0 && !f->theta && !f->angles);
}

/* The first non-finite entry of a[0 .. n), or -1. */
static int64_t first_bad(const double *a, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(a[i])) return i;
    return -1;
}

rp_status rp_rope_freq_check(const rp_rope_freq *f)
{
    if (!f) return RP_OK;
    if ((int)f->scaling < 0 || f->scaling >= RP_SCALING_COUNT)
        return rp_error(RP_ERR_ARG, "unknown scaling %d", (int)f->scaling);
    if (!(f->factor > 0.0) || !isfinite(f->factor))
        return rp_error(RP_ERR_ARG, "scaling_factor must be a finite number > 0, got %g",
                        f->factor);
    if (f->scaling == RP_SCALING_YARN) {
        if (!(f->orig_len >= 1.0) || !isfinite(f->orig_len))
            return rp_error(RP_ERR_ARG, "orig_len (YaRN's original context length) must be >= 1, "
                                        "got %g", f->orig_len);
        if (!(f->yarn_alpha >= 0.0) || !isfinite(f->yarn_alpha) || !isfinite(f->yarn_beta))
            return rp_error(RP_ERR_ARG, "yarn_alpha and yarn_beta must be finite and >= 0, got "
                                        "%g and %g", f->yarn_alpha, f->yarn_beta);
        if (!(f->yarn_alpha < f->yarn_beta))
            return rp_error(RP_ERR_ARG, "yarn_alpha %g must be below yarn_beta %g (the ramp runs "
                                        "from alpha to beta)", f->yarn_alpha, f->yarn_beta);
    }
    if (!(f->xpos >= 0.0) || !isfinite(f->xpos))
        return rp_error(RP_ERR_ARG, "xpos (xPos gamma) must be a finite number >= 0 (0: off), "
                                    "got %g", f->xpos);
    if (!(f->xpos_scale_base > 0.0) || !isfinite(f->xpos_scale_base))
        return rp_error(RP_ERR_ARG, "xpos_scale_base must be a finite number > 0, got %g",
                        f->xpos_scale_base);
    if (f->theta && f->angles)
        return rp_error(RP_ERR_ARG, "freq and angles exclude each other (give one)");
    if (f->theta) {
        if (f->n_theta < 1) return rp_error(RP_ERR_ARG, "freq must not be empty");
        int64_t i = first_bad(f->theta, f->n_theta);
        if (i >= 0)
            return rp_error(RP_ERR_ARG, "freq: pair %lld has frequency %g; frequencies must be "
                                        "finite", (long long)i, f->theta[i]);
    }
    if (f->angles) {
        if (f->rows < 1 || f->n_angles < 1) return rp_error(RP_ERR_ARG, "angles must not be empty");
        if (f->scaling != RP_SCALING_NONE)
            return rp_error(RP_ERR_ARG, "scaling %s does not apply to an angle table (the angles "
                                        "are final; scale them yourself)",
                            rp_scaling_names[f->scaling]);
        int64_t i = first_bad(f->angles, f->rows * f->n_angles);
        if (i >= 0)
            return rp_error(RP_ERR_ARG, "angles: position %lld, pair %lld has angle %g; angles "
                                        "must be finite",
                            (long long)(i / f->n_angles), (long long)(i % f->n_angles),
                            f->angles[i]);
    }
    return RP_OK;
}

rp_status rp_rope_freq_check_use(const rp_rope_freq *f, int64_t d_rot, int64_t last_pos,
                                 const char *what)
{
    if (!f) return RP_OK;
    int64_t half = d_rot / 2;
    if (f->theta && f->n_theta < half)
        return rp_error(RP_ERR_ARG, "freq holds %lld frequencies; %s %lld needs %lld",
                        (long long)f->n_theta, what, (long long)d_rot, (long long)half);
    if (f->angles && f->n_angles < half)
        return rp_error(RP_ERR_ARG, "angles hold %lld per position; %s %lld needs %lld",
                        (long long)f->n_angles, what, (long long)d_rot, (long long)half);
    if (f->angles && last_pos >= f->rows)
        return rp_error(RP_ERR_ARG, "angles hold positions 0..%lld; position %lld is asked",
                        (long long)(f->rows - 1), (long long)last_pos);
    return RP_OK;
}

/* YaRN's ramp gamma(r). */
static double yarn_gamma(double r, double alpha, double beta)
{
    if (r < alpha) return 0.0;
    if (r > beta) return 1.0;
    return (r - alpha) / (beta - alpha);
}

/* theta'_i of pair i. */
static double theta_of(const rp_rope_freq *f, int64_t i, int64_t d_rot, double base)
{
    const double two_pi = 6.283185307179586476925286766559;
    double t = f && f->theta ? f->theta[i] : pow(base, -2.0 * (double)i / (double)d_rot);
    if (!f) return t;
    double s = f->factor;
    switch (f->scaling) {
    case RP_SCALING_PI: return t / s;
    case RP_SCALING_NTK:
        return d_rot > 2 ? t * pow(s, -2.0 * (double)i / (double)(d_rot - 2)) : t;
    case RP_SCALING_YARN: {
        /* r = L / lambda = L |theta| / (2 pi) */
        double g = yarn_gamma(f->orig_len * fabs(t) / two_pi, f->yarn_alpha, f->yarn_beta);
        return (1.0 - g) * t / s + g * t;
    }
    default: return t;
    }
}

void rp_rope_freq_theta(double *theta, const rp_rope_freq *f, int64_t d_rot, double base)
{
    for (int64_t i = 0; i < d_rot / 2; i++) theta[i] = theta_of(f, i, d_rot, base);
}

double rp_rope_freq_score_scale(const rp_rope_freq *f)
{
    if (!f || f->scaling != RP_SCALING_YARN || !(f->factor > 1.0)) return 1.0;
    double m = 0.1 * log(f->factor) + 1.0;
    return m * m;
}

void rp_rope_freq_tables(float *cos_out, float *sin_out, const rp_rope_freq *f, int64_t d_rot,
                         double base, double c, int side, const int64_t *pos, int64_t offset,
                         int64_t n)
{
    int64_t half = d_rot / 2;
    const double *ang = f ? f->angles : NULL;
    double xg = f ? f->xpos : 0.0, sb = f ? f->xpos_scale_base : 1.0;
    for (int64_t i = 0; i < half; i++) {
        double theta = ang ? 0.0 : theta_of(f, i, d_rot, base);
        double zeta = xg > 0.0 ? (2.0 * (double)i / (double)d_rot + xg) / (1.0 + xg) : 1.0;
        for (int64_t r = 0; r < n; r++) {
            int64_t p = pos ? pos[r] : offset + r;
            /* (c p) theta, as rp_rope_angles always computed it */
            double a = ang ? c * ang[p * f->n_angles + i] : c * (double)p * theta;
            double m = xg > 0.0 ? pow(zeta, (double)side * (double)p / sb) : 1.0;
            cos_out[r * half + i] = (float)(m * cos(a));
            sin_out[r * half + i] = (float)(m * sin(a));
        }
    }
}

int rp_rope_freq_equal(const rp_rope_freq *a, const rp_rope_freq *b)
{
    rp_rope_freq pa = a ? *a : rp_rope_freq_default(), pb = b ? *b : rp_rope_freq_default();
    if (pa.scaling != pb.scaling || pa.xpos != pb.xpos || !pa.theta != !pb.theta ||
        !pa.angles != !pb.angles)
        return 0;
    if (pa.scaling != RP_SCALING_NONE && pa.factor != pb.factor) return 0;
    if (pa.scaling == RP_SCALING_YARN &&
        (pa.orig_len != pb.orig_len || pa.yarn_alpha != pb.yarn_alpha ||
         pa.yarn_beta != pb.yarn_beta))
        return 0;
    if (pa.xpos != 0.0 && pa.xpos_scale_base != pb.xpos_scale_base) return 0;
    if (pa.theta && (pa.n_theta != pb.n_theta ||
                     memcmp(pa.theta, pb.theta, (size_t)pa.n_theta * sizeof(double))))
        return 0;
    if (pa.angles && (pa.rows != pb.rows || pa.n_angles != pb.n_angles ||
                      memcmp(pa.angles, pb.angles,
                             (size_t)(pa.rows * pa.n_angles) * sizeof(double))))
        return 0;
    return 1;
}
