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
 * Vector positions (`axes`, rp_rope_axes below): a position of A = 1 .. 3 integer axes
 * (p_0, .., p_{A-1}) and a map from the d_rot/2 rotation pairs to the axes:
 *   axial     the pairs split among the axes in contiguous blocks of the pair index: axis a takes
 *             floor(half / A) pairs, plus one for a < half mod A (the first axes take the
 *             remainder), half = d_rot / 2; within its block of n_a pairs, pair j (0-based in the
 *             block) has theta_j = base^(-2j/d_a) over the block's own width d_a = 2 n_a, and
 *             turns by p_a theta_j: each block is the 1-D RoPE of width d_a (Su's 2-D RoPE,
 *             EVA-02's VisionRotaryEmbedding, rotary-embedding-torch's axial frequencies, which
 *             concatenate one RoPE of the axis's width per axis). The pair index is the layout:
 *             with interleaved pairing a block is a contiguous run of features (EVA-02's), with
 *             half pairing the pairs i and i + half of the block (Qwen2-VL's layout)
 *   sections  Qwen2-VL's M-RoPE: sections[a] pairs per axis, in order (adding up to half); the
 *             STANDARD 1-D theta_i = base^(-2i/d_rot) over all pairs, pair i turning by p_a for
 *             the axis a whose section holds i
 *   mixed     RoPE-Mixed (Heo et al. 2024): a given frequency matrix W [A x half], the angle of
 *             pair i is sum_a p_a W[a][i]
 * What applies on top: with axial, freq (pair i takes freq[i] in place of its block's theta_j)
 * and the scalings pi, ntk, yarn, llama3 apply to each block as to a 1-D RoPE of width d_a (the
 * same factor and orig_len for every axis); with sections they apply to the 1-D theta as without
 * axes (Hugging Face's Qwen2-VL computes its inverse frequencies by rope_type, then splits them);
 * the mix matrix is final (no scaling, no freq). With A > 1, dynamic, xPos and angles are
 * refused: each is a function of one scalar position. One axis (A = 1) with axial or sections
 * {half} gives the tables of 1-D positions bit for bit; mixed with one axis those of freq = W[0].
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


/* The defaults of the parameters (the papers') are their config rows' (core/config/model_schema.c:
 * rp_rope_freq_default). */

/* The most axes of a vector position. */
#define RP_MAX_AXES 3

/* How rotation pairs map to the axes (codes may be stored: never renumber). */
typedef enum {
    RP_AXES_AXIAL = 0, /* contiguous blocks, each with its own frequencies (the default) */
    RP_AXES_SECTIONS,  /* M-RoPE: explicit pairs per axis, the 1-D frequencies */
    RP_AXES_MIXED,     /* RoPE-Mixed: a frequency matrix [A x half] */
    RP_AXES_COUNT
} rp_axes_map;

/* "axial", "sections", "mixed", NULL. */
extern const char *const rp_axes_names[RP_AXES_COUNT + 1];

/* The position descriptor. n = 0 (what rp_rope_freq_default gives): scalar positions, one integer
 * each (map axial, no sections, no mix); n = 1 .. RP_MAX_AXES: n integers per position. */
typedef struct rp_rope_axes {
    int n;                          /* A */
    rp_axes_map map;
    int64_t sections[RP_MAX_AXES];  /* sections: the pairs of axes 0 .. n-1 (>= 0; they add up
                                       to d_rot/2: rp_rope_freq_check_use); 0 beyond n and for
                                       the other maps */
    const double *mix;              /* mixed: W [n x n_mix] row-major, W[a][i] = mix[a * n_mix +
                                       i]; finite; NULL for the other maps. Borrowed. */
    int64_t n_mix;                  /* pairs per axis in mix: >= d_rot/2 of a placement, which
                                       takes the first d_rot/2 (as freq) */
} rp_rope_axes;

typedef struct rp_rope_freq {
    rp_rope_scaling scaling;
    double factor;          /* s: finite, > 0 (1: no change) */
    int64_t orig_len;       /* yarn, dynamic, llama3: L, the context trained at: >= 1 (a
                             * config's 0 is its seq_len: rp_model_cfg_freq) */
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
    rp_rope_axes axes;      /* vector positions; n = 0: scalar positions */
} rp_rope_freq;

/* The defaults (rp_rope_freq_default) and the equality (rp_rope_freq_equal) of a scheme are
 * those of the config's rows of the frequency scheme: core/config/model_cfg.h. */

/* 1 when f is NULL or changes nothing (no scaling, no xPos, no user tables, scalar positions or
 * one axial axis). */
int rp_rope_freq_is_plain(const rp_rope_freq *f);

/* The integers per position the tables read: f->axes.n, or 1 when it is 0 or f is NULL. */
int rp_rope_freq_axes(const rp_rope_freq *f);

/* Checks every field: the scaling code, then the scalar rules (rp_freq_rules below, in order:
 * factor, orig_len (yarn, dynamic, llama3), attention_factor, the ramp and alpha < beta (yarn),
 * low < high (llama3), xpos, the scale base), theta and
 * angles (non-empty, finite: the message gives the first bad entry), not both tables, and no
 * scaling with user angles; the axes: n in 0 .. RP_MAX_AXES, the map, sections (>= 0, only with
 * map sections, 0 beyond n), mix (only and always with map mixed, non-empty, finite, no scaling
 * and no freq beside it), and with n > 1 no dynamic, xpos or angles. RP_ERR_ARG naming the field
 * as the config keys do ("scaling_factor", "orig_len", "yarn_alpha", "yarn_beta",
 * "low_freq_factor", "xpos", "xpos_scale_base", "freq", "angles", "axes", "sections", "mix").
 * NULL is fine. */
rp_status rp_rope_freq_check(const rp_rope_freq *f);

/* Checks f against one use: a placement d_rot wide (the user tables and the mix matrix need
 * d_rot/2 entries per row, the sections must add up to d_rot/2, axial needs a pair per axis) at
 * positions 0 .. last_pos (the angle table needs last_pos + 1 rows). RP_ERR_ARG; a width message
 * names `what` ("d_rot_q", ...). NULL is fine. */
rp_status rp_rope_freq_check_use(const rp_rope_freq *f, int64_t d_rot, int64_t last_pos,
                                 const char *what);

/* theta'_i for i = 0 .. d_rot/2 - 1 (the scaling applied to the standard or the user theta;
 * axial: each block's own, sections: the 1-D ones), in double: pair i turns by p_a theta'_i for
 * its axis a (rp_rope_freq_pair_axes). Not for user angles or a mix matrix (they have no theta).
 * f may be NULL. dynamic: the frequencies of the positions below orig_len (unscaled);
 * rp_rope_freq_tables has every position's. f must pass rp_rope_freq_check_use for d_rot. */
void rp_rope_freq_theta(double *theta, const rp_rope_freq *f, int64_t d_rot, double base);

/* axis[i] for i = 0 .. d_rot/2 - 1: the axis whose position turns pair i (0 for scalar
 * positions; -1 for every pair of a mix matrix, which turns by all axes). f may be NULL; f must
 * pass rp_rope_freq_check_use for d_rot. Overwrites. */
void rp_rope_freq_pair_axes(int *axis, const rp_rope_freq *f, int64_t d_rot);

/* The factor the attention scores take: attention_factor^2 when it is set (with a scaling),
 * else YaRN's (0.1 ln s + 1)^2 for s > 1, else 1. */
double rp_rope_freq_score_scale(const rp_rope_freq *f);

/* cos/sin tables for n positions: position r is pos[r * A .. r * A + A) with A =
 * rp_rope_freq_axes(f) (row-major [n x A]; A = 1: pos[r]), or offset + r on every axis when pos
 * is NULL (Qwen2-VL's text positions (t, t, t), with which sections give the 1-D tables):
 * cos[r * half + i] = m cos(c a), sin[r * half + i] = m sin(c a), half = d_rot / 2, with a the
 * angle of the position on pair i (p theta'_i with p its axis's entry, sum_a p_a W[a][i] for a
 * mix matrix, or the user angle) and m = zeta_i^(side p / scale_base) under xPos (side +1 or
 * -1), else 1. Computed in double, stored as float. f must pass rp_rope_freq_check and
 * rp_rope_freq_check_use for d_rot and the positions. Overwrites. */
void rp_rope_freq_tables(float *cos_out, float *sin_out, const rp_rope_freq *f, int64_t d_rot,
                         double base, double c, int side, const int64_t *pos, int64_t offset,
                         int64_t n);

/* ---- the scaling table ----
 * One row per scaling (rope_freq.c's SCALINGS, in code order): the one place that says what a
 * scaling is. From it come rp_scaling_names, the keys each scaling reads (the config schema's
 * does-nothing rules and messages, rp_rope_freq_equal, Hugging Face's fields of each rope_type),
 * the checkpoint format version a scaling value needs (the schema's value_since), Hugging Face's
 * rope_type names (bindings/freq.c), the frequencies and the scores' factor (rp_rope_freq_theta,
 * rp_rope_freq_tables, rp_rope_freq_score_scale), and, through rp.scalings(), the PyTorch
 * companion's table (python/roper_torch/schema.json). A new scaling is an rp_rope_scaling value
 * before RP_SCALING_COUNT, its row and its formula (a theta function; rows of rp_freq_rules for
 * the ranges of its own parameters when it reads any). */

/* The parameters a scaling reads (rp_scaling_desc.reads), as the config keys name them: */
enum {
    RP_READS_FACTOR = 1, /* scaling_factor and attention_factor */
    RP_READS_LEN = 2,    /* orig_len (L, the context trained at: needed, >= 1) */
    RP_READS_YARN = 4,   /* yarn_alpha, yarn_beta, yarn_ramp */
    RP_READS_LLAMA3 = 8, /* low_freq_factor, high_freq_factor */
};

typedef struct rp_scaling_desc {
    const char *name;   /* the config's value (rp_scaling_names) */
    const char *hf;     /* Hugging Face's rope_type for it (config.json's rope_scaling), or NULL */
    int reads;          /* RP_READS_* bits */
    uint32_t since;     /* the checkpoint format version that stores the value */
    /* theta'_j of pair j of a RoPE d_rot wide whose unscaled frequency is t, at position p (the
     * formula; f has passed rp_rope_freq_check). */
    double (*theta)(const rp_rope_freq *f, double t, int64_t j, int64_t d_rot, double base,
                    int64_t p);
    int per_position;   /* theta depends on p: the tables apply it per position to position 0's */
    /* The scores' factor of its own (YaRN's temperature) when attention_factor is 0, or NULL
     * (1). Hugging Face's attention fields (attention_factor, mscale, mscale_all_dim) belong to
     * the scalings that have one. */
    double (*score)(const rp_rope_freq *f);
    /* (the rules of the parameters it reads are rows of rp_freq_rules, below) */
} rp_scaling_desc;

/* The row of scaling s (an unknown code: none's). */
const rp_scaling_desc *rp_scaling_of(rp_rope_scaling s);

/* 1 when scaling s reads orig_len (L): yarn, dynamic, llama3 (RP_READS_LEN). */
int rp_scaling_needs_len(rp_rope_scaling s);

/* ---- the scalar rules ----
 * rp_rope_freq_check's rules on the scalar parameters: one row each, run in order by one loop
 * (after the scaling code is known good, before the user tables and the axes). The one home of
 * these ranges: the config schema's rows of these fields take their lower bound from here
 * (rp_freq_rule_bound; model_schema.c), rp.scalings().rules exports the rows to Lua, and the
 * PyTorch companion has them checked by core (core/io/config_check.c). A new parameter with a
 * range, or a new scaling's parameters, is a row here. */
typedef enum {
    RP_FREQ_RULE_MIN,   /* a finite and >= lo (> lo when lo_open) */
    RP_FREQ_RULE_MIN2,  /* a finite and >= lo (> lo when lo_open), and b finite: one message for
                         * a pair of parameters */
    RP_FREQ_RULE_BELOW, /* a < b */
    RP_FREQ_RULE_NAME,  /* a (an enum, stored as an int) one of names' values */
    RP_FREQ_RULE_COUNT
} rp_freq_rule_kind;

/* "min", "min2", "below", "name", NULL (rp.scalings().rules' kind). */
extern const char *const rp_freq_rule_kinds[RP_FREQ_RULE_COUNT + 1];

typedef struct rp_freq_rule {
    rp_freq_rule_kind kind;
    const char *a, *b;        /* the fields of rp_rope_freq it reads, by name (the schema's freq
                               * column, the companion's rotary.Freq); b NULL for MIN, NAME */
    const char *ka, *kb;      /* the config keys (rp.rope's options) that set a and b: the names
                               * its message gives them unless the caller names them otherwise
                               * (test_model_schema: the schema's rows of a and b) */
    size_t a_at, b_at;        /* their offsets in rp_rope_freq */
    int reads;                /* applies to the scalings that read one of these RP_READS_* bits;
                               * 0: to every scheme */
    double lo;                /* MIN, MIN2: the bound */
    int lo_open;              /* MIN, MIN2: 1 when lo itself is out */
    const char *const *names; /* NAME: the value names, NULL-terminated */
    /* The message (RP_ERR_ARG): {a} and {b} the values (%g; NAME: a's code, %d), {A} and {B}
     * their names (ka and kb, or the caller's: rp_freq_rule_error) and {scaling} the scaling's
     * name */
    const char *why;
} rp_freq_rule;

extern const rp_freq_rule rp_freq_rules[];
extern const int rp_freq_nrules;

/* 1 when row r applies to scaling s (its reads: 0, or a group s reads). */
int rp_freq_rule_applies(const rp_freq_rule *r, rp_rope_scaling s);

/* 1 when row r holds for f (whether or not it applies to f's scaling). */
int rp_freq_rule_holds(const rp_freq_rule *r, const rp_rope_freq *f);

/* Sets the error of row r failing for f and returns RP_ERR_ARG: r's why with f's values, the
 * fields named A and B (NULL: r's ka and kb). */
rp_status rp_freq_rule_error(const rp_freq_rule *r, const rp_rope_freq *f, const char *A,
                             const char *B);

/* The MIN or MIN2 row that bounds the field at offset `at` of rp_rope_freq (its a), or NULL. */
const rp_freq_rule *rp_freq_rule_bound(size_t at);

/* ---- the own tables ----
 * rp_rope_freq_check's rules on the own tables and the axes, and rp_rope_freq_check_use's, are
 * code (rope_freq.c), their messages written where they are checked; the words that differ from
 * one own table to the next are these rows. */

/* The scheme's own tables, in the order rp_rope_freq_check_use checks them: theta (the config's
 * freq), angles, axes.mix. */
typedef enum { RP_OWN_FREQ, RP_OWN_ANGLES, RP_OWN_MIX, RP_OWN_COUNT } rp_freq_own_id;

typedef struct rp_freq_own {
    const char *key;       /* the config key and option that gives it: "freq" */
    const char *row;       /* what a row is ("position"); NULL: one row (freq) */
    const char *entry;     /* an entry ("angle") and the entries ("angles") */
    const char *entries;
    const char *final;     /* what the scaling message calls it when its entries are final (no
                            * scaling applies); NULL: the scalings apply (freq) */
    const char *with_freq; /* the message when it comes beside freq; NULL for freq itself */
    const char *holds;     /* "freq holds", "angles hold": how the messages of its sizes start */
    const char *per_row;   /* what its row's count counts ("frequencies", "per position") */
    int rows_are_positions; /* 1: a row per position (angles), which must reach the last one */
} rp_freq_own;

extern const rp_freq_own rp_freq_owns[RP_OWN_COUNT];

#endif
