/* Positional encodings: the one description of what each mode does.
 *
 * A mode is a row of the mode table (pe.c): its name, the absolute table it adds to the
 * embeddings (none, sinusoidal, learned) and where it rotates inside attention:
 *   q and k   q_n by +n theta, k_i by +i theta          (rope, roper, roper_legacy)
 *   v         v_i by +c i theta, c = v_angle            (roper: c = 1; roper_legacy: c = 2)
 *   output    o_n by o_sign n theta, o_sign = -1        (roper, roper_legacy)
 * The three placements are independent fields, so a placement ablation (any subset of q/k, v and
 * the output rotated) is a new row of the table, not a change to the kernels. Everything that
 * needs to know what a mode rotates (the attention and linear-attention kernels, the model, the
 * bindings, checkpoints, the benchmarks) asks this file: rp_pe_mode_of or an rp_pe_scheme.
 *
 * theta_j = base^(-2j/d_rot) with the default base RP_ROPE_BASE (rope.h), which also serves the
 * Vaswani sinusoidal table.
 */
#ifndef RP_PE_H
#define RP_PE_H

#include <stdint.h>

#include "rope.h"
#include "status.h"

/* The codes are stored in checkpoints (docs/checkpoint.md): append new modes before RP_PE_COUNT,
 * never renumber. */
typedef enum {
    RP_PE_NONE = 0,
    RP_PE_SINUSOIDAL,
    RP_PE_LEARNED,
    RP_PE_ROPE,
    RP_PE_ROPER,
    RP_PE_ROPER_LEGACY,
    RP_PE_COUNT /* the number of modes, not a mode */
} rp_pe;

/* The absolute encoding a mode adds to the token embeddings. */
typedef enum { RP_ABS_NONE = 0, RP_ABS_SINUSOIDAL = 1, RP_ABS_LEARNED = 2 } rp_pe_absolute;

/* One row of the mode table. */
typedef struct rp_pe_mode {
    const char *name;        /* "none", "sinusoidal", "learned", "rope", "roper", "roper_legacy" */
    rp_pe_absolute absolute; /* added to the embeddings (the model's embedding layer) */
    int rot_qk;              /* 1: q and k rotated by their positions */
    double v_angle;          /* 0: v not rotated; c > 0: v_i rotated by +c i theta */
    int o_sign;              /* 0: output not rotated; -1 (or +1): o_n rotated by o_sign n theta */
    int linear;              /* 1: causal linear attention supports the mode */
} rp_pe_mode;

/* The mode names in enum order, NULL-terminated (for option parsing: lrp_optenum). */
extern const char *const rp_pe_names[RP_PE_COUNT + 1];

/* The table row of pe, or NULL for a value outside the enum. */
const rp_pe_mode *rp_pe_mode_of(rp_pe pe);
/* Name <-> enum. rp_pe_name gives "?" for an invalid value; rp_pe_from_name returns -1 for an
 * unknown (or NULL) name. */
const char *rp_pe_name(rp_pe pe);
int rp_pe_from_name(const char *name);
/* 1 when pe rotates anything inside attention (q/k, v or the output). */
int rp_pe_rotates(rp_pe pe);

/* The positional scheme of one attention call or layer, resolved from a mode and its widths:
 * what is rotated, by how many features, with which angles. The widths of placements the mode
 * does not rotate are 0, so `if (s.d_rot_v)` is the test "v is rotated". The output rotation
 * uses the value width (d_rot_o = d_rot_v when the mode rotates the output). */
typedef struct rp_pe_scheme {
    rp_pe pe;
    rp_pe_absolute absolute;
    int64_t d_rot_qk;   /* rotated q/k features (even), 0 = not rotated */
    int64_t d_rot_v;    /* rotated v features (even), 0 = not rotated */
    int64_t d_rot_o;    /* rotated output features (even), 0 = not rotated */
    double v_angle;     /* v_i by +v_angle i theta (when d_rot_v > 0) */
    int o_sign;         /* o_n by o_sign n theta (when d_rot_o > 0) */
    double base;        /* theta base, > 0 */
    rp_pairing pairing;
} rp_pe_scheme;

/* Fills *s for mode pe from the requested widths: the mode's placements get d_rot_qk (q, k) and
 * d_rot_v (v and the output); the others 0. Checks nothing beyond pe being a mode (RP_ERR_ARG
 * otherwise); the callers check widths against their head sizes. */
rp_status rp_pe_scheme_init(rp_pe_scheme *s, rp_pe pe, int64_t d_rot_qk, int64_t d_rot_v,
                            double base, rp_pairing pairing);

/* d_rot = floor(fraction * d_k) (labml's int(d_k * fraction)): RP_ERR_ARG naming `what` unless
 * 0 < fraction <= 1 and the result is even and >= 2. */
rp_status rp_pe_fraction_width(const char *what, double fraction, int64_t d_k, int64_t *d_rot);

#endif
