/* Rotary position embeddings: one rotation kernel with a sign serves RoPE (+1), its backward and
 * RoPER's reverse rotation (-1). theta_i = base^(-2i/d_rot), i = 0 .. d_rot/2-1; angles pos*theta_i
 * are computed in double and stored as float cos/sin tables. */
#ifndef RP_ROPE_H
#define RP_ROPE_H

#include <stdint.h>

#include "tensor.h"

/* The default base of theta (RoFormer), also the base of the sinusoidal table (Vaswani et al.):
 * the one definition of 10000 in the project. */
#define RP_ROPE_BASE 10000.0

typedef enum {
    RP_PAIR_HALF = 0,        /* feature i with i + d_rot/2 (labml, GPT-NeoX): the default */
    RP_PAIR_INTERLEAVED = 1  /* feature 2i with 2i+1 (the RoFormer paper, GPT-J) */
} rp_pairing;

/* cos/sin for n positions: cos[r * half + i] = cos(pos_r * theta_i) with half = d_rot / 2.
 * `scale` multiplies every angle (2 for roper_legacy's double rotation). pos == NULL means
 * pos_r = offset + r. Both arrays hold n * d_rot/2 floats (caller-allocated). d_rot must be even
 * and > 0 (caller checks). */
void rp_rope_angles(float *cos_out, float *sin_out, const int64_t *pos, int64_t offset, int64_t n,
                    int64_t d_rot, double base, double scale);

/* theta_i for i = 0 .. d_rot/2-1, in double. */
void rp_rope_theta(double *theta_out, int64_t d_rot, double base);

/* The rotation kernel over a [N, T, M, D] block, contiguous (row stride D):
 * for every n, t, m it rotates the first d_rot features of row (n, t, m) by the angles of row t of
 * cos/sin ([T, d_rot/2]), with sin negated when sign < 0; features d_rot..D-1 pass through.
 * out may equal in (in place). Overwrites out. */
void rp_rope_forward(float *out, const float *in, const float *cos_t, const float *sin_t,
                     int64_t N, int64_t T, int64_t M, int64_t D, int64_t d_rot, rp_pairing pairing,
                     int sign);

/* Backward of rp_rope_forward: din += R(-sign) dout. Accumulates. din must not alias dout. */
void rp_rope_backward(float *din, const float *dout, const float *cos_t, const float *sin_t,
                      int64_t N, int64_t T, int64_t M, int64_t D, int64_t d_rot,
                      rp_pairing pairing, int sign);

/* Options of the tensor-level rotation. */
typedef struct rp_rope_cfg {
    int64_t d_rot;          /* rotated features, even, 0 < d_rot <= D */
    double base;            /* RP_ROPE_BASE */
    rp_pairing pairing;
    int sign;               /* +1 rotate by +pos*theta, -1 by -pos*theta: the inverse of +1
                               with the same cfg (xPos's magnitude divided out) */
    double scale;           /* multiplies every angle; 1 normally */
    int pos_dim;            /* 0-based dim of x that holds positions, or -1: x is one vector
                               ([D]) at position offset / positions[0] */
    int64_t offset;         /* positions are offset + t when positions == NULL */
    const int64_t *positions; /* optional, one per element of pos_dim (or 1 when pos_dim = -1)
                                 of A = rp_rope_freq_axes(freq) integers each (row-major;
                                 NULL: offset + t on every axis) */
    const struct rp_rope_freq *freq; /* the frequency scheme (rope_freq.h), NULL: standard */
    int xpos_side;          /* xPos: +1 the query side (q, o), -1 the key side (k, v): the
                               magnitude zeta^(xpos_side p / scale_base) that sign +1
                               multiplies by and sign -1 divides by */
} rp_rope_cfg;

/* A rp_rope_cfg with the defaults: base RP_ROPE_BASE, half pairing, sign +1, scale 1, pos_dim -1,
 * offset 0, no positions, no freq, xpos_side +1, d_rot = D (set it). */
rp_rope_cfg rp_rope_cfg_default(int64_t d_rot);

/* out = x with the first d_rot features of its last dim rotated by position (with cfg->freq:
 * by its angles, times its xPos magnitude on cfg->xpos_side). sign -1 is the inverse of sign +1
 * with the same cfg: rotated back and divided by the magnitude. (The attention kernels build
 * their own tables: RoPER's output rotation is R(-n theta) times the query side's magnitude.)
 * With vector positions (freq->axes.n > 0) each position is a row of cfg->positions.
 * x: any shape with ndim >= 1; last dim D >= d_rot. RP_ERR_ARG for odd or out-of-range d_rot,
 * bad pos_dim, a freq that rp_rope_freq_check refuses or whose tables do not cover d_rot or the
 * positions (rp_rope_freq_check_use). */
rp_status rp_rope_rotate(rp_tensor *out, const rp_tensor *x, const rp_rope_cfg *cfg);

/* Sinusoidal absolute encodings (Vaswani et al.): out[t][2i] = sin(p / base^(2i/d)),
 * out[t][2i+1] = cos(p / base^(2i/d)), p = offset + t. out is [T, d] (caller-allocated).
 * Computed in double. Overwrites. */
void rp_sinusoidal_forward(float *out, int64_t T, int64_t d, int64_t offset, double base);

#endif
