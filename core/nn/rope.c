#include "rope.h"

#include "parallel.h"
#include "rope_freq.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void rp_rope_theta(double *theta_out, int64_t d_rot, double base)
{
    rp_rope_freq_theta(theta_out, NULL, d_rot, base);
}

void rp_rope_angles(float *cos_out, float *sin_out, const int64_t *pos, int64_t offset, int64_t n,
                    int64_t d_rot, double base, double scale)
{
    rp_rope_freq_tables(cos_out, sin_out, NULL, d_rot, base, scale, 0, pos, offset, n);
}

/* Rotates the first d_rot features of one row by the angles (c, sgn * s):
 * y_a = x_a c - x_b s, y_b = x_b c + x_a s for each pair (a, b). With acc the result is added to
 * y instead (y must not alias x then); without, y may equal x: every pair is read before it is
 * written and pairs are disjoint, so the loops vectorise (RP_SIMD). */
static inline void rotate_pairs(float *y, const float *x, const float *c, const float *s,
                                float sgn, int64_t half, const int64_t sa, const int64_t ob,
                                int acc)
{
    /* pair i is (i*sa, i*sa + ob): half pairing sa = 1, ob = half; interleaved sa = 2, ob = 1 */
    if (acc) {
        RP_SIMD
        for (int64_t i = 0; i < half; i++) {
            float x1 = x[i * sa], x2 = x[i * sa + ob], si = sgn * s[i];
            y[i * sa] += x1 * c[i] - x2 * si;
            y[i * sa + ob] += x2 * c[i] + x1 * si;
        }
    } else {
        RP_SIMD
        for (int64_t i = 0; i < half; i++) {
            float x1 = x[i * sa], x2 = x[i * sa + ob], si = sgn * s[i];
            y[i * sa] = x1 * c[i] - x2 * si;
            y[i * sa + ob] = x2 * c[i] + x1 * si;
        }
    }
}

/* rotate_pairs with the pairing's strides as constants, so each loop is compiled for unit or
 * stride-2 access (a runtime stride made the vectorised loop gather, several times slower). */
static inline void rotate_row(float *y, const float *x, const float *c, const float *s, float sgn,
                              int64_t half, rp_pairing pairing, int acc)
{
    if (pairing == RP_PAIR_HALF)
        rotate_pairs(y, x, c, s, sgn, half, 1, half, acc);
    else
        rotate_pairs(y, x, c, s, sgn, half, 2, 1, acc);
}

void rp_rope_forward(float *out, const float *in, const float *cos_t, const float *sin_t,
                     int64_t N, int64_t T, int64_t M, int64_t D, int64_t d_rot, rp_pairing pairing,
                     int sign)
{
    int64_t half = d_rot / 2;
    float sgn = sign < 0 ? -1.0f : 1.0f;
    for (int64_t n = 0; n < N; n++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t m = 0; m < M; m++) {
                int64_t row = ((n * T + t) * M + m) * D;
                rotate_row(out + row, in + row, cos_t + t * half, sin_t + t * half, sgn, half,
                           pairing, 0);
                if (out != in)
                    for (int64_t j = d_rot; j < D; j++) out[row + j] = in[row + j];
            }
}

void rp_rope_backward(float *din, const float *dout, const float *cos_t, const float *sin_t,
                      int64_t N, int64_t T, int64_t M, int64_t D, int64_t d_rot,
                      rp_pairing pairing, int sign)
{
    /* The Jacobian of a rotation by +phi is R(phi); its transpose is R(-phi). */
    int64_t half = d_rot / 2;
    float sgn = sign < 0 ? 1.0f : -1.0f;
    for (int64_t n = 0; n < N; n++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t m = 0; m < M; m++) {
                int64_t row = ((n * T + t) * M + m) * D;
                rotate_row(din + row, dout + row, cos_t + t * half, sin_t + t * half, sgn, half,
                           pairing, 1);
                for (int64_t j = d_rot; j < D; j++) din[row + j] += dout[row + j];
            }
}

rp_rope_cfg rp_rope_cfg_default(int64_t d_rot)
{
    rp_rope_cfg c;
    memset(&c, 0, sizeof c);
    c.d_rot = d_rot;
    c.base = RP_ROPE_BASE;
    c.pairing = RP_PAIR_HALF;
    c.sign = 1;
    c.scale = 1.0;
    c.pos_dim = -1;
    c.xpos_side = 1;
    return c;
}

rp_status rp_rope_rotate(rp_tensor *out, const rp_tensor *x, const rp_rope_cfg *cfg)
{
    memset(out, 0, sizeof *out);
    char buf[RP_SHAPE_STR_LEN];
    if (x->ndim < 1)
        return rp_error(RP_ERR_SHAPE, "rotate needs a tensor of at least 1 dim");
    int64_t D = x->shape[x->ndim - 1];
    if (cfg->d_rot <= 0 || cfg->d_rot % 2 != 0)
        return rp_error(RP_ERR_ARG, "d_rot must be even and positive, got %lld",
                        (long long)cfg->d_rot);
    if (cfg->d_rot > D)
        return rp_error(RP_ERR_ARG, "d_rot %lld exceeds the last dim of %s", (long long)cfg->d_rot,
                        rp_tensor_shape_str(buf, sizeof buf, x));
    if (cfg->pos_dim < -1 || cfg->pos_dim >= x->ndim - 1)
        return rp_error(RP_ERR_ARG, "position dim %d out of range for %s (it cannot be the last)",
                        cfg->pos_dim + 1, rp_tensor_shape_str(buf, sizeof buf, x));
    if (!(cfg->base > 0.0) || !isfinite(cfg->base) || !isfinite(cfg->scale))
        return rp_error(RP_ERR_ARG, "base must be positive and finite");
    if (cfg->pairing != RP_PAIR_HALF && cfg->pairing != RP_PAIR_INTERLEAVED)
        return rp_error(RP_ERR_ARG, "unknown pairing %d", (int)cfg->pairing);
    if (cfg->xpos_side != 1 && cfg->xpos_side != -1)
        return rp_error(RP_ERR_ARG, "xpos_side must be 1 or -1, got %d", cfg->xpos_side);
    /* view x as [N, T, M, D] */
    int64_t N = 1, T = 1, M = 1;
    for (int i = 0; i < x->ndim - 1; i++) {
        if (cfg->pos_dim < 0 || i > cfg->pos_dim)
            M *= x->shape[i];
        else if (i == cfg->pos_dim)
            T = x->shape[i];
        else
            N *= x->shape[i];
    }
    if (cfg->pos_dim < 0) { /* every vector at the same position */
        M = 1;
        N = rp_tensor_numel(x) / (D > 0 ? D : 1);
    }
    if (cfg->freq) {
        RP_TRY(rp_rope_freq_check(cfg->freq));
        int64_t lo = INT64_MAX, hi = INT64_MIN, A = rp_rope_freq_axes(cfg->freq);
        for (int64_t t = 0; t < T; t++) { /* axis 0: an angle table needs one axis */
            int64_t p = cfg->positions ? cfg->positions[t * A] : cfg->offset + t;
            lo = p < lo ? p : lo, hi = p > hi ? p : hi;
        }
        if (T > 0 && cfg->freq->angles && lo < 0)
            return rp_error(RP_ERR_ARG, "angles hold positions 0..%lld; position %lld is asked",
                            (long long)(cfg->freq->rows - 1), (long long)lo);
        RP_TRY(rp_rope_freq_check_use(cfg->freq, cfg->d_rot, T > 0 ? hi : 0, "d_rot"));
    }
    RP_TRY(rp_tensor_clone(out, x));
    int64_t half = cfg->d_rot / 2;
    if (rp_tensor_numel(out) == 0) return RP_OK;
    float *cs = malloc(sizeof(float) * (size_t)(T * half * 2));
    if (!cs) {
        rp_tensor_release(out);
        return rp_error(RP_ERR_NOMEM, "rotate: out of memory");
    }
    /* sign -1 undoes sign +1: the angles negated (by the kernel) and xPos's magnitude divided
     * out (zeta^(-side p / scale_base) is the inverse of zeta^(side p / scale_base)) */
    rp_rope_freq_tables(cs, cs + T * half, cfg->freq, cfg->d_rot, cfg->base, cfg->scale,
                        cfg->sign < 0 ? -cfg->xpos_side : cfg->xpos_side, cfg->positions,
                        cfg->offset, T);
    float *p = rp_tensor_data(out);
    rp_rope_forward(p, p, cs, cs + T * half, N, T, M, D, cfg->d_rot, cfg->pairing, cfg->sign);
    free(cs);
    return RP_OK;
}

void rp_sinusoidal_forward(float *out, int64_t T, int64_t d, int64_t offset, double base)
{
    for (int64_t t = 0; t < T; t++) {
        double p = (double)(offset + t);
        for (int64_t j = 0; j < d; j++) {
            double freq = pow(base, -(double)(j - j % 2) / (double)d);
            out[t * d + j] = (float)(j % 2 == 0 ? sin(p * freq) : cos(p * freq));
        }
    }
}
