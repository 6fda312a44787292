/* Positional encodings: the one description of what each mode does.
 *
 * A mode is a row of the mode table (pe.c): its name, the absolute table it adds to the
 * embeddings (none, sinusoidal, learned), where it rotates inside attention and which
 * relative-position terms it adds to the scores.
 *
 * Rotary modes (rope, roper, roper_legacy) rotate any subset of four placements, each by its own
 * number of features (the placement ablation; `rotate` in the configs, default: the mode's own):
 *   q   q_n by +n theta                 (RP_ROT_Q)
 *   k   k_i by +i theta                 (RP_ROT_K)
 *   v   v_i by +c i theta, c = v_angle  (RP_ROT_V; roper_legacy: c = 2, the others c = 1)
 *   o   o_n by -n theta                 (RP_ROT_O, the RoPER inverse rotation)
 * rope is "qk" (RoFormer), roper "qkvo" (labml's RoPER), "vo" is Su's VO-RoPE (2025). The score
 * depends on n - i alone when q and k are rotated alike or not at all; the output when v and o
 * are (with c = 1), so of the 15 subsets exactly qk, vo and qkvo are relative in both.
 *
 * Relative modes (shaw, xl, t5, deberta, alibi: the baselines of the RoFormer paper's section
 * 2.3 and ALiBi) rotate nothing; they add terms that depend on the relative distance to the
 * scores (and, for shaw, to the values): their relative kind's row (rp_rel_of) says which, and
 * core/nn/attention.h gives the formulas.
 *
 * Everything that needs to know what a mode does (the attention and linear-attention kernels,
 * the model, the config checks, the bindings, checkpoints, the benchmarks, the tests' loops)
 * asks this file: rp_pe_mode_of, rp_rel_of or an rp_pe_scheme.
 *
 * theta_j = base^(-2j/d_rot) with the default base RP_ROPE_BASE (rope.h), which also serves the
 * Vaswani sinusoidal table.
 */
#ifndef RP_PE_H
#define RP_PE_H

#include <stddef.h>
#include <stdint.h>

#include "rope.h"
#include "rope_freq.h"
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
    RP_PE_SHAW,    /* Shaw et al. 2018 (RoFormer eq. 5) */
    RP_PE_XL,      /* Transformer-XL, Dai et al. 2019 (RoFormer eq. 7) */
    RP_PE_T5,      /* T5, Raffel et al. 2020 */
    RP_PE_DEBERTA, /* DeBERTa, He et al. 2020 (RoFormer eq. 10) */
    RP_PE_ALIBI,   /* ALiBi, Press et al. 2022 */
    RP_PE_COUNT /* the number of modes, not a mode */
} rp_pe;

/* The absolute encoding a mode adds to the token embeddings. */
typedef enum { RP_ABS_NONE = 0, RP_ABS_SINUSOIDAL = 1, RP_ABS_LEARNED = 2 } rp_pe_absolute;
/* Their names ("none", "sinusoidal", "learned"), NULL-terminated. */
extern const char *const rp_pe_absolute_names[4];

/* The placements a rotary mode rotates (bits of a `rotate` mask). */
enum { RP_ROT_Q = 1, RP_ROT_K = 2, RP_ROT_V = 4, RP_ROT_O = 8, RP_ROT_ALL = 15 };

/* The relative kinds: the rows of the kind table (rp_rel_of), the relative terms of a mode. */
typedef enum {
    RP_REL_NONE = 0,
    RP_REL_SHAW,
    RP_REL_XL,
    RP_REL_T5,
    RP_REL_DEBERTA,
    RP_REL_ALIBI,
    RP_REL_COUNT /* the number of kinds, not a kind */
} rp_rel_kind;

/* One row of the mode table. */
typedef struct rp_pe_mode {
    const char *name;        /* "none", "sinusoidal", "learned", "rope", "roper", ... */
    rp_pe_absolute absolute; /* added to the embeddings (the model's embedding layer) */
    int rotate;              /* the placements rotated by default (RP_ROT_* bits; 0: none) */
    int rotary;              /* 1: a rotary mode, which takes any `rotate` subset */
    double v_angle;          /* c: v_i is rotated by +c i theta when v is rotated */
    int o_sign;              /* o_n is rotated by o_sign n theta when o is rotated (-1) */
    rp_rel_kind rel;         /* relative-position terms (rp_rel_of), RP_REL_NONE for the others */
    int linear;              /* 1: causal linear attention supports the mode (its own rotate) */
    int since;               /* the oldest checkpoint format version that stores the mode
                              * (docs/checkpoint.md; the relative modes came with version 2) */
} rp_pe_mode;

/* ---- relative kinds --------------------------------------------------------------------------
 *
 * A relative kind is a row of the kind table (pe.c): the terms it adds (the attention kernels run
 * each term where a kind's row names it; core/nn/attention.h gives the formulas), how its tables'
 * rows follow the distance, the config keys it reads and the model's parameters that give its
 * tables. A kind made of these terms is a row (and a mode row that names it); a new kind of term
 * is kernel code (docs/architecture.md, "How to add a positional encoding"). */

/* The terms (bits of rp_rel_desc.terms), with delta = n - i (query minus key position) and s the
 * score scale: */
enum {
    RP_TERM_EK = 1,      /* score += s (q_n [+ w_h]) . Ek[row(delta)]  (the table rel->ek) */
    RP_TERM_EQ = 2,      /* score += s k_i . Eq[row'(delta)]           (rel->eq) */
    RP_TERM_EV = 4,      /* out_n += sum_i a_ni Ev[row(delta)], the rows of Ek (rel->ev; with EK) */
    RP_TERM_UW = 8,      /* q_n + u_h in the content term q . k, q_n + w_h in Ek's (rel->u,
                          * rel->w; with EK) */
    RP_TERM_BUCKET = 16, /* score += bias_h[T5's bucket of -delta]     (rel->bias) */
    RP_TERM_SLOPE = 32,  /* score += -m_h |delta|, ALiBi's head slopes  (no table) */
};

/* The tables of rp_attn_rel (core/nn/attention.h), in its member order. */
enum { RP_TAB_EK = 0, RP_TAB_EQ, RP_TAB_EV, RP_TAB_U, RP_TAB_W, RP_TAB_BIAS, RP_TAB_COUNT };

/* How a table's rows follow the distance, with k = rel_clip: row = clamp(k + sign delta, 0,
 * R - 1), R = 2k + 1 (RP_ROWS_CLIP) or 2k (RP_ROWS_CLIP2); or one row per distance of the call,
 * row = delta - lo (RP_ROWS_DISTANCE, sign +1; rp_attention_rel_rows gives lo). */
typedef enum { RP_ROWS_NONE = 0, RP_ROWS_CLIP, RP_ROWS_CLIP2, RP_ROWS_DISTANCE } rp_rel_rows;

/* The config keys a kind reads (bits of rp_rel_desc.uses; the schema's RP_CFG_RELATIVE rows name
 * theirs, core/config/model_schema.c). */
enum {
    RP_USES_CLIP = 1,    /* rel_clip k, 1 .. RP_REL_MAX_CLIP */
    RP_USES_BUCKETS = 2, /* rel_buckets and rel_max_distance (T5's buckets) */
};

/* The sizes a parameter's dims stand for (rp_rel_dim_of: pe.c's dims table says which). */
typedef enum {
    RP_DIM_CLIP1 = 0,
    RP_DIM_CLIP2,
    RP_DIM_DK,
    RP_DIM_C,
    RP_DIM_HEADS,
    RP_DIM_BUCKETS,
    RP_DIM_COUNT /* not a dim */
} rp_rel_dim;

/* What a parameter of the model is to the kind's tables. */
typedef enum {
    RP_PARAM_TABLE = 0,   /* the layer's table itself */
    RP_PARAM_PROJ_SIN,    /* a layer's W [C, C]: table = R W^T, R the fixed sinusoid of
                           * Transformer-XL with one row per distance d, [sin(d f_j) | cos(d f_j)],
                           * f_j = 10000^(-2j/C) (so d_model must be even) */
    RP_PARAM_PROJ_SHARED, /* a layer's W [C, C]: table = P W^T, P the shared parameter */
    RP_PARAM_SHARED,      /* P: the model's one parameter for all layers (the table's rows) */
} rp_rel_use;

/* A parameter's initialisation: uniform in +-1/sqrt(cols) (a linear layer's), zeros (an additive
 * term: a start without positions), standard normal (embeddings). */
typedef enum { RP_RI_UNIFORM = 0, RP_RI_ZEROS, RP_RI_NORMAL } rp_rel_init;

typedef struct rp_rel_param {
    const char *name; /* RP_PARAM_SHARED: the model's ("rel.weight"); the others the layer's,
                       * after "layers.<l>." ("attn.rel_k") */
    rp_rel_use use;
    int table;        /* RP_TAB_*: the table it gives (RP_PARAM_SHARED: the table of the
                       * projections, which give it its rows) */
    rp_rel_dim rows, cols;
    rp_rel_init init;
} rp_rel_param;

#define RP_REL_MAX_PARAMS 4

/* One row of the kind table. Tables: Ek [rows, H, D] per head when ek_heads, else [rows, D]
 * shared by the heads; Ev [rows, Dv] (Ek's rows, shared: EV needs ek_heads 0); Eq [rows, H, D];
 * u, w [H, D]; bias [H, buckets]. A row names at most one of BUCKET and SLOPE, rows (and a sign
 * of +1 or -1) for each of Ek and Eq it reads, a symbol for each table it reads, and one
 * parameter for each table (test_kind_rows in tests/c/test_attention_rel.c checks these). */
typedef struct rp_rel_desc {
    const char *name;    /* the kind's name (its mode's: "shaw", "xl", ...; "" for RP_REL_NONE) */
    int terms;           /* RP_TERM_* bits; 0: RP_REL_NONE */
    rp_rel_rows ek_rows; /* the rows of Ek (and Ev) */
    int ek_sign;         /* +1 or -1 in the row rule above */
    int ek_heads;        /* 1: Ek per head */
    rp_rel_rows eq_rows;
    int eq_sign;
    int uses;            /* RP_USES_* bits: the config keys it reads */
    int scale_terms;     /* the model scales the scores by 1/sqrt(scale_terms d_k) (DeBERTa's
                          * three terms: 3; the others 1) */
    const char *sym[RP_TAB_COUNT]; /* each table it reads as messages name it ("a^K"; u, w,
                                    * bias: the paper's letter) */
    int nparams;
    rp_rel_param params[RP_REL_MAX_PARAMS]; /* the model's, in layout order (the shared one
                                             * first: it precedes the layers) */
} rp_rel_desc;

/* The row of kind (RP_REL_NONE's has no terms), or NULL for a value outside the enum. */
const rp_rel_desc *rp_rel_of(rp_rel_kind kind);
/* The tables x's terms read, as bits 1 << RP_TAB_*: EK ek, EQ eq, EV ev, UW u and w, BUCKET
 * bias. */
int rp_rel_tables(const rp_rel_desc *x);
/* The rows a table takes for rel_clip k: RP_ROWS_CLIP 2k + 1, RP_ROWS_CLIP2 2k, 0 for the others
 * (RP_ROWS_DISTANCE's depend on the call: rp_attention_rel_rows). */
int64_t rp_rel_clip_rows(rp_rel_rows rows, int64_t k);
/* The relative kinds' limits (the config keys rel_clip, rel_buckets, rel_max_distance): the
 * struct a model's config holds (rp_model_cfg.rel) and the attention takes (rp_attn_cfg.rel).
 * A kind reads those its row's uses name (RP_USES_CLIP: clip; RP_USES_BUCKETS: buckets and
 * max_distance); the others are ignored. */
#define RP_REL_MAX_CLIP 65536
#define RP_REL_MAX_BUCKETS 4096
typedef struct rp_rel_cfg {
    int64_t clip;         /* shaw, deberta: distances clipped to [-clip, clip], 1 ..
                           * RP_REL_MAX_CLIP */
    int64_t buckets;      /* t5: 2 .. RP_REL_MAX_BUCKETS (>= 4 without the causal mask) */
    int64_t max_distance; /* t5: where the last bucket starts, past the exact buckets (buckets / 2
                           * causal, buckets / 4 bidirectional) .. 2^31-1 */
} rp_rel_cfg;
/* The one rule of those limits, for mode pe (a mode of the table) with (causal 1) or without the
 * causal mask: RP_OK, or RP_ERR_ARG with one wording whoever asks (rp.model's config,
 * rp.attention's planner, the attention kernels' check): "rel_clip 0 must be in 1..65536",
 * "rel_buckets 1 must be in 2..4096", "rel_buckets 3 must be in 4..4096 for pe t5 without the
 * causal mask (it halves them)", "rel_max_distance 16 must be in 17..2147483647" (the distance
 * where the exact buckets end, + 1). A kernel's caller has run it (rp_attention_check). */
rp_status rp_rel_cfg_check(rp_pe pe, const rp_rel_cfg *r, int causal);
/* rel_max_distance's message, the one home of its words (the config's rule "buckets" exports it,
 * model_config.c): {rel_max_distance} the value, {lo} the bucket where the exact ones end + 1,
 * {hi} 2^31-1. */
#define RP_REL_DISTANCE_WHY "rel_max_distance {rel_max_distance} must be in {lo}..{hi}"

/* What a dim stands for (pe.c's dims table, one row per rp_rel_dim, the one home of it; through
 * rp.pe_modes() the PyTorch companion's): size = times x the size named of + plus, of one of
 * "rel_clip", "d_k" (d_model / heads), "d_model", "heads", "rel_buckets". */
typedef struct {
    const char *name; /* as rp.pe_modes()'s rel_params name it */
    const char *of;
    int times, plus;
} rp_rel_dim_desc;
/* The row of dim d (a value outside the enum: NULL). */
const rp_rel_dim_desc *rp_rel_dim_of(rp_rel_dim d);
/* The size dim d stands for (its row's formula; 0 for a value outside the enum). */
int64_t rp_rel_dim_size(rp_rel_dim d, int64_t clip, int64_t d_k, int64_t d_model, int64_t heads,
                        int64_t buckets);

/* The mode names in enum order, NULL-terminated (for option parsing: lrp_optenum). */
extern const char *const rp_pe_names[RP_PE_COUNT + 1];

/* The table row of pe, or NULL for a value outside the enum. */
const rp_pe_mode *rp_pe_mode_of(rp_pe pe);
/* Name <-> enum. rp_pe_name gives "?" for an invalid value; rp_pe_from_name returns -1 for an
 * unknown (or NULL) name. */
const char *rp_pe_name(rp_pe pe);
int rp_pe_from_name(const char *name);
/* 1 when pe rotates anything inside attention by default (q, k, v or the output). */
int rp_pe_rotates(rp_pe pe);
/* The names of the modes that are rotary (when rotary is set), supported by linear attention
 * (when linear is set) and whose relative kind reads one of the config keys in uses (RP_USES_*
 * bits; when not 0), as messages list them ("rope, roper or roper_legacy"), into buf (n bytes);
 * returns buf. */
const char *rp_pe_list(char *buf, size_t n, int rotary, int linear, int uses);
/* What needs a rotary pe, in the words of the config's rule table (model_config.c's "scaling and
 * xpos" rule is "scaling and xpos need" RP_PE_NEEDS_SOFTMAX), whose marks rp_model_cfg_fill
 * fills: {list} the rotary modes (rp_pe_list), {pe} the mode, {linear} RP_PE_WITH_LINEAR with
 * linear attention, else nothing. RP_PE_GRID_NEEDS is rp.experiment's refusal of its positions
 * grid (rp.model_rules().messages.grid, {list} filled in: experiment/check.lua). */
#define RP_PE_NEEDS_ROTARY " a rotary pe ({list})"
#define RP_PE_NEEDS_SOFTMAX RP_PE_NEEDS_ROTARY " with softmax attention, not {pe}{linear}"
#define RP_PE_WITH_LINEAR " with linear attention"
#define RP_PE_GRID_NEEDS "option 'positions' grid needs" RP_PE_NEEDS_SOFTMAX
/* What needs a rotary pe, for rp_pe_need_rotary's message. */
typedef enum {
    RP_MSG_ROTATE_OPTION,    /* a caller's option rotate (rp_pe_rotate_check with option set) */
    RP_MSG_ROTATE,           /* a config's rotate (rp_pe_rotate_check, the config's rule) */
    RP_MSG_POSITIONS_OPTION, /* rp.attention's option positions (rp_attention_plan) */
    RP_MSG_SCHEME_FREQ,      /* a frequency scheme that is not plain (rp_pe_scheme_check_freq) */
    RP_MSG_FREQ,             /* a model's own frequencies or angles (rp_model_set_freq) */
    RP_MSG_POSITIONS,        /* a model's positions (rp_model_set_positions) */
} rp_pe_msg;
/* RP_ERR_ARG with the message of what needs a rotary pe (need), not mode pe (with linear
 * attention when linear is set): "option 'rotate' needs a rotary pe (rope, roper or
 * roper_legacy), got pe 'shaw'", "positions need a rotary pe (...) with softmax attention, not
 * rope with linear attention", ... */
rp_status rp_pe_need_rotary(rp_pe_msg need, rp_pe pe, int linear);
/* RP_OK when the rotate mask (0: the mode's own) may go with mode pe: 0 or a rotary mode. Else
 * RP_ERR_ARG: option set (a caller's option, rp.model's) RP_MSG_ROTATE_OPTION ("option 'rotate'
 * needs a rotary pe (rope, roper or roper_legacy), got pe 'shaw'"), else (a config's rule)
 * RP_MSG_ROTATE ("rotate needs a rotary pe (rope, roper or roper_legacy), not shaw"). */
rp_status rp_pe_rotate_check(rp_pe pe, int rotate, int option);
/* names[0 .. count) as messages list them, "a, b or c", into buf (n bytes), each followed by its
 * index when values is set ("a (0), b (1) or c (2)"); returns buf. */
const char *rp_join_names(char *buf, size_t n, const char *const *names, int count, int values);

/* rotate masks <-> names: a name is a non-empty string of distinct letters from "qkvo" in any
 * order ("vo", "qkvo", "kq"); rp_rotate_from_name returns its mask, or -1 (bad letter, repeated
 * letter, empty, NULL). rp_rotate_name writes the canonical name (letters in the order q, k, v,
 * o; "" for 0) to buf (5 bytes) and returns buf. */
int rp_rotate_from_name(const char *name);
const char *rp_rotate_name(int rotate, char buf[5]);

/* The positional scheme as a config writes it (the keys pe, fraction_qk, fraction_v, base,
 * pairing, rotate, fraction_q, fraction_k, fraction_o: the rows of scope RP_CFG_SCOPE_PE,
 * core/config/model_schema.h): the struct a model's config holds (rp_model_cfg.pe) and
 * rp.attention's request carries. The widths come from the fractions and the head size (d_k, or
 * D and Dv): rp_model_cfg_scheme for a model, rp_attention_plan for a call, resolved into an
 * rp_pe_scheme (below, rp_pe_scheme_init), which the attention takes (rp_attn_cfg.scheme). */
typedef struct rp_pe_cfg {
    rp_pe mode;
    double fraction_qk; /* d_rot_qk = floor(fraction_qk * d_k), even >= 2 for rope modes */
    double fraction_v;  /* d_rot_v = floor(fraction_v * d_k), even >= 2 for roper modes */
    double base;        /* the angles' base, RP_ROPE_BASE */
    rp_pairing pairing;
    /* The placement ablation (rotary pe, softmax attention): rotate = RP_ROT_* bits, 0 = the
     * mode's own. A rotated q, k or o takes fraction_q, fraction_k, fraction_o when > 0, else
     * fraction_qk (q, k) or fraction_v (o). */
    int rotate;
    double fraction_q, fraction_k, fraction_o;
} rp_pe_cfg;

/* The positional scheme of one attention call or layer, resolved from a mode, a `rotate` mask and
 * the widths: what is rotated, by how many features, with which angles. The widths of placements
 * that are not rotated are 0, so `if (s.d_rot_v)` is the test "v is rotated". */
typedef struct rp_pe_scheme {
    rp_pe pe;
    rp_pe_absolute absolute;
    int rotate;         /* the placements rotated (RP_ROT_* bits) */
    int64_t d_rot_q;    /* rotated q features (even), 0 = not rotated */
    int64_t d_rot_k;    /* rotated k features */
    int64_t d_rot_v;    /* rotated v features */
    int64_t d_rot_o;    /* rotated output features */
    double v_angle;     /* v_i by +v_angle i theta (when d_rot_v > 0) */
    int o_sign;         /* o_n by o_sign n theta (when d_rot_o > 0) */
    double base;        /* theta base, > 0 */
    rp_pairing pairing;
    rp_rel_kind rel;
} rp_pe_scheme;

/* Index of each placement in a width array: d_rot[RP_PLACE_Q] etc. */
enum { RP_PLACE_Q = 0, RP_PLACE_K, RP_PLACE_V, RP_PLACE_O };

/* Fills *s (OVERWRITTEN) from the mode, rotate mask (0: the mode's default), base and pairing of
 * pe (its fractions are not read): a rotated placement p gets the width d_rot[p] (indexed by
 * RP_PLACE_*), the others 0. The one builder of a scheme: the model's (rp_model_cfg_scheme, the
 * widths from the fractions of d_k) and rp.attention's (rp_attention_plan, of D and Dv). RP_ERR_ARG
 * when pe->mode is not a mode, when rotate has bits outside RP_ROT_ALL, or when rotate != 0 for a
 * mode that is not rotary (the message names `rotate`). Checks no widths (the callers check them
 * against their head sizes: rp_attention_check, rp_model_cfg_check). */
rp_status rp_pe_scheme_init(rp_pe_scheme *s, const rp_pe_cfg *pe, const int64_t d_rot[4]);

/* RP_OK when s is a scheme as rp_pe_scheme_init resolves it: a mode, a rotate mask that is not 0
 * for a rotary mode (its resolved placements), absolute, v_angle, o_sign and rel the mode's, and
 * the width 0 of every placement not rotated; RP_ERR_ARG (rp_pe_scheme_init's messages, else
 * "d_rot_v 4 is set but pe rope rotates qk (a placement not rotated has width 0)"). Checks
 * neither the rotated widths nor base (rp_attention_check does). */
rp_status rp_pe_scheme_check(const rp_pe_scheme *s);

/* The most pairs a placement of s rotates: the largest of its widths / 2 (0 when nothing is
 * rotated), the width of a user's angle table or mix matrix. */
int64_t rp_pe_scheme_half(const rp_pe_scheme *s);

/* Checks f (rp_rope_freq_check) against what s rotates: a plain f always passes; otherwise s must
 * rotate something, and f's tables must cover every rotated placement's width and the positions
 * up to qlast (q, o) and klast (k, v). RP_ERR_ARG. */
rp_status rp_pe_scheme_check_freq(const rp_pe_scheme *s, const rp_rope_freq *f, int64_t qlast,
                                  int64_t klast);

/* d_rot = floor(fraction * d_k) (labml's int(d_k * fraction)): RP_ERR_ARG naming `what` unless
 * 0 < fraction <= 1 and the result is even and >= 2. */
rp_status rp_pe_fraction_width(const char *what, double fraction, int64_t d_k, int64_t *d_rot);

#endif
