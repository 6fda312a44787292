/* Frequency schemes of the rotary encodings: which angle, and for xPos which scale, a position p
 * gets on rotation pair i of a placement d_rot features wide.
 *
 * The standard scheme (RoFormer): theta_i = base^(-2i/d_rot), i = 0 .. d_rot/2 - 1, angle
 * p theta_i (times the mode's v_angle c for the value rotation). On top of it:
 *
 *   context extension (`scaling`, factor s > 0; docs/positional.md has the derivations):
 *     pi    position interpolation (Chen et al. 2023): theta'_i = theta_i / s
 *     ntk   NTK-aware scaling (bloc97 2023): base' = base s^(d_rot/(d_rot-2)), i.e.
 *           theta'_i = theta_i s^(-2i/(d_rot-2)) (d_rot = 2: theta'_0 = theta_0)
 *     yarn  YaRN (Peng et al. 2023, eqs. 17-20): r_i = L / lambda_i with lambda_i = 2 pi /
 *           |theta_i| (a negative user frequency has its magnitude's wavelength) and
 *           L = orig_len; gamma(r) = 0 for r < alpha, 1 for r > beta, else (r - alpha) /
 *           (beta - alpha); theta'_i = (1 - gamma(r_i)) theta_i / s + gamma(r_i) theta_i; and
 *           the attention temperature: the scores are multiplied by (0.1 ln s + 1)^2 when
 *           s > 1 (rp_rope_freq_score_scale). yarn_ramp "dims" is the ramp of the YaRN
 *           authors' code and of Hugging Face (rope_type "yarn"): linear in the pair index i
 *           between i(beta) and i(alpha), i(r) = d_rot ln(L / (2 pi r)) / (2 ln base), those
 *           bounds rounded down and up ("dims_exact": not rounded), clamped to [0, d_rot - 1];
 *           gamma_i = 1 - clamp((i - lo) / (hi - lo), 0, 1) (hi = lo + 0.001 when equal)
 *     dynamic  dynamic NTK (emozilla 2023; Hugging Face's rope_type "dynamic"), position by
 *           position: position p takes NTK with the factor of the length p + 1,
 *           s_p = max(1, s (p + 1) / L - (s - 1)), L = orig_len: theta'_i = theta_i
 *           s_p^(-2i/(d_rot-2)). So a position keeps its angles when the sequence grows (a KV
 *           cache stays exact); positions below L are not scaled
 *     llama3  Llama 3.1's scaling (Hugging Face's rope_type "llama3"): YaRN's ramp in r with
 *           alpha = low_freq_factor, beta = high_freq_factor, L = orig_len, and no temperature
 *   attention_factor m > 0 replaces the scores' factor by m^2 (Hugging Face multiplies cos and
 *           sin by m); 0: the scaling's own (YaRN's above, 1 for the others)
 *   xPos (Sun et al. 2022): pair i of a row at position p is also multiplied by
 *           zeta_i^(side p / scale_base), zeta_i = (2i/d_rot + gamma) / (1 + gamma), with side +1
 *           for the query-side placements (q, and RoPER's output o) and -1 for the key side (k,
 *           and RoPER's values v), so a score (or an output term) carries
 *           zeta^((n - m) / scale_base)
 *   user frequencies: theta[0 .. n_theta) replaces theta_i (pair i takes theta[i]; the scalings
 *           apply to it as to the standard theta)
 *   user angles: angles[p * n_angles + i] is the angle of position p on pair i, for positions
 *           0 .. rows - 1 (times c for v); no scaling applies (they are the final angles)
 *
 * The magnitudes (xPos) are folded into the cos/sin tables: the rotation kernels compute
 * y = x c - x' s, so tables m cos, m sin give m R x, and their transposes (the backward) stay
 * right. The scores' temperature is applied by the attention kernels (their scale).
 */
#ifndef RP_ROPE_FREQ_H
#define RP_ROPE_FREQ_H

#include <stdint.h>

#include "status.h"

/* The codes are stored in checkpoints: never renumber. */
typedef enum {
    RP_SCALING_NONE = 0,
    RP_SCALING_PI,
    RP_SCALING_NTK,
    RP_SCALING_YARN,
    RP_SCALING_DYNAMIC, /* format version 4 */
    RP_SCALING_LLAMA3,  /* format version 4 */
    RP_SCALING_COUNT    /* not a scaling */
} rp_rope_scaling;

/* "none", "pi", "ntk", "yarn", "dynamic", "llama3", NULL. */
extern const char *const rp_scaling_names[RP_SCALING_COUNT + 1];

/* YaRN's ramp (stored in checkpoints: never renumber). */
typedef enum {
    RP_YARN_RAMP_ROTATIONS = 0, /* linear in r = L / lambda (the paper's eq. 18) */
    RP_YARN_RAMP_DIMS,          /* linear in the pair index, bounds rounded (Hugging Face) */
    RP_YARN_RAMP_DIMS_EXACT,    /* the same, bounds not rounded (Hugging Face's truncate false) */
    RP_YARN_RAMP_COUNT
} rp_yarn_ramp;

/* "rotations", "dims", "dims_exact", NULL. */
extern const char *const rp_yarn_ramp_names[RP_YARN_RAMP_COUNT + 1];

/* 1 when scaling s reads orig_len (L): yarn, dynamic, llama3. */
int rp_scaling_needs_len(rp_rope_scaling s);

/* The defaults of the parameters (the papers'). */
#define RP_YARN_ALPHA 1.0
#define RP_YARN_BETA 32.0
#define RP_XPOS_SCALE_BASE 512.0
#define RP_LLAMA3_LOW 1.0  /* low_freq_factor (Meta's Llama 3.1 config) */
#define RP_LLAMA3_HIGH 4.0 /* high_freq_factor */

typedef struct rp_rope_freq {
    rp_rope_scaling scaling;
    double factor;          /* s: finite, > 0 (1: no change) */
    double orig_len;        /* yarn, dynamic, llama3: L, the context trained at: finite, >= 1 */
    double yarn_alpha;      /* yarn: the ramp in rotations per L: 0 <= alpha < beta, finite */
    double yarn_beta;
    rp_yarn_ramp yarn_ramp; /* yarn: which ramp */
    double low_freq_factor; /* llama3: the ramp in rotations per L: 0 <= low < high, finite */
    double high_freq_factor;
    double attention_factor; /* a scaling: the scores times its square; 0: the scaling's own */
    double xpos;            /* xPos gamma: 0 = off, else finite > 0 (the paper: 0.4) */
    double xpos_scale_base; /* xPos: finite > 0 */
    const double *theta;    /* user frequencies [n_theta], or NULL; finite. Borrowed. */
    int64_t n_theta;
    const double *angles;   /* user angles [rows x n_angles], or NULL; finite. Borrowed. */
    int64_t rows, n_angles;
} rp_rope_freq;

/* Nothing set: no scaling (factor 1), no xPos, no user tables; alpha, beta, the ramp, llama3's
 * factors and the xPos scale base at their defaults, orig_len 0, attention_factor 0. */
rp_rope_freq rp_rope_freq_default(void);

/* 1 when f is NULL or changes nothing (no scaling, no xPos, no user tables). */
int rp_rope_freq_is_plain(const rp_rope_freq *f);

/* Checks every field: the scaling code, factor, orig_len (yarn, dynamic, llama3), alpha < beta
 * and the ramp (yarn), low < high (llama3), attention_factor, xpos, the scale base, theta and
 * angles (non-empty, finite: the message gives the first bad entry), not both tables, and no
 * scaling with user angles. RP_ERR_ARG naming the field as the config keys do
 * ("scaling_factor", "orig_len", "yarn_alpha", "yarn_beta", "low_freq_factor", "xpos",
 * "xpos_scale_base", "freq", "angles"). NULL is fine. */
rp_status rp_rope_freq_check(const rp_rope_freq *f);

/* Checks f against one use: a placement d_rot wide (the user tables need d_rot/2 entries per
 * row) at positions 0 .. last_pos (the angle table needs last_pos + 1 rows). RP_ERR_ARG; a width
 * message names `what` ("d_rot_q", ...). NULL is fine. */
rp_status rp_rope_freq_check_use(const rp_rope_freq *f, int64_t d_rot, int64_t last_pos,
                                 const char *what);

/* theta'_i for i = 0 .. d_rot/2 - 1 (the scaling applied to the standard or the user theta),
 * in double. Not for user angles (they have no theta). f may be NULL. dynamic: the frequencies
 * of the positions below orig_len (unscaled); rp_rope_freq_tables has every position's. */
void rp_rope_freq_theta(double *theta, const rp_rope_freq *f, int64_t d_rot, double base);

/* The factor the attention scores take: attention_factor^2 when it is set (with a scaling),
 * else YaRN's (0.1 ln s + 1)^2 for s > 1, else 1. */
double rp_rope_freq_score_scale(const rp_rope_freq *f);

/* cos/sin tables for n positions (pos[r], or offset + r when pos is NULL):
 * cos[r * half + i] = m cos(c a), sin[r * half + i] = m sin(c a), half = d_rot / 2, with a the
 * angle of position p on pair i (p theta'_i, or the user angle) and m = zeta_i^(side p /
 * scale_base) under xPos (side +1 or -1), else 1. Computed in double, stored as float. Positions
 * must be within the user angle table (rp_rope_freq_check_use). Overwrites. */
void rp_rope_freq_tables(float *cos_out, float *sin_out, const rp_rope_freq *f, int64_t d_rot,
                         double base, double c, int side, const int64_t *pos, int64_t offset,
                         int64_t n);

/* Equal as schemes (fields and table contents; NULL equals a plain one). */
int rp_rope_freq_equal(const rp_rope_freq *a, const rp_rope_freq *b);

#endif
