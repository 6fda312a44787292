/* The planners: from the values a user wrote to a checked configuration, in one call.
 *
 * A binding reads every value of a call (arguments, option fields, as plain numbers, flags and
 * shapes: no rule applied), hands them over as a request, and core applies every rule between
 * them at once: the refusals of values that do nothing, the rotated widths, the defaults that
 * depend on the shapes, the relative kinds' table shapes, the rows a frequency table must cover.
 * The binding then allocates what the plan sizes and calls the kernel. The rules and their
 * messages live here (and in the schema and the mode table they ask), so a binding neither
 * repeats nor orders them.
 *
 * Messages name the values as a caller writes them, options included ("option 'fraction_qk' must
 * be in (0, 1], got 1.5"), numbers as Lua 5.4 prints them (a float as %.14g, with ".0" when that
 * reads as an integer): the binding raises rp_last_error() as it stands.
 */
#ifndef RP_PLAN_H
#define RP_PLAN_H

#include <stdint.h>

#include "attention.h"
#include "linear_attention.h"
#include "model_cfg.h"
#include "pe.h"
#include "rope_freq.h"
#include "status.h"
#include "tensor.h"

/* ---- rp.attention ---- */

/* The options that hold the relative modes' tables, in the order of rp_attn_rel (RP_TAB_*):
 * rel_k, rel_q, rel_v, rel_u, rel_w, rel_bias. */
#define RP_ATTENTION_TABLES "rel_k", "rel_q", "rel_v", "rel_u", "rel_w", "rel_bias"
extern const char *const rp_attention_tables[RP_TAB_COUNT];

/* Bits of rp_attn_request.given: the options given (a value that is not nil) that are not
 * config keys. */
enum { RP_GIVEN_SCALE = 1, RP_GIVEN_Q_OFFSET = 2, RP_GIVEN_POS_OFFSET = 4 };

/* A table option as given: present or not, and its shape (the caller has checked that a present
 * one is a live tensor). */
typedef struct rp_plan_table {
    int given;
    int ndim;
    int64_t shape[RP_MAX_DIMS];
} rp_plan_table;

/* What one rp.attention call was given. */
typedef struct rp_attn_request {
    int64_t B, T, S, H, D, Dv; /* q [B, T, H, D], k [B, S, H, D], v [B, S, H, Dv]: the caller
                                * has checked them 4-D, sizes >= 1, agreeing */
    /* The options that are config keys (the rows of the config's attention part, scopes
     * RP_CFG_SCOPE_PE, _REL and _FREQ: rp_model_cfg_scope), each read by its row's type; an
     * absent one holds its value from rp_attention_request_default. */
    rp_model_cfg keys;
    uint64_t keys_given;       /* bit i: row i of rp_model_cfg_keys was given */
    int given;                 /* RP_GIVEN_* bits */
    int causal;                /* 0 or 1 */
    double scale;              /* with RP_GIVEN_SCALE (else 1 / sqrt(D)) */
    int64_t q_offset;          /* with RP_GIVEN_Q_OFFSET (else S - T) */
    int64_t pos_offset;        /* 0 when absent */
    const rp_rope_freq *freq;  /* the frequency scheme's scalars from keys (no tables, no axes) */
    /* option positions: pos_rows rows of A integers each (A = axes, 1 for scalar positions with
     * axes 0), borrowed; NULL when absent */
    const int64_t *pos;
    int64_t pos_rows;
    int axes;
    rp_plan_table tables[RP_TAB_COUNT]; /* rel_k .. rel_bias */
} rp_attn_request;

/* A request with nothing given: keys at the schema's defaults but pe none (rp.attention's
 * default), causal on, no tables. */
rp_attn_request rp_attention_request_default(void);

/* The plan of one call. */
typedef struct rp_attn_plan {
    rp_attn_cfg cfg;       /* every field but rel and freq, which point at the caller's tables
                            * (rp_attention_plan_freq sets freq); pos and pos_rows the request's;
                            * cfg.scheme what the call rotates */
    int64_t half;          /* the most pairs a placement rotates (rp_pe_scheme_half): the width
                            * of user angles and of mix */
    int64_t qlast, klast;  /* the largest position a query, a key reads (0 at least) */
    int64_t rows;          /* max(qlast, klast) + 1: the positions a function of angles is
                            * sampled for */
    int64_t need;          /* the rows of positions the call reads: max(S, q_offset + T) */
    int64_t pos_n;         /* with option positions: the entries of them the call reads (need
                            * rows of the request's axes, 1 at least); 0 without */
    int arg;               /* after a refusal: the argument its message is about (1 q, 2 k,
                            * 4 the options) */
} rp_attn_plan;

/* Checks every rule of a call against req and fills *p (OVERWRITTEN): rotate on a rotary pe, the
 * rotated widths from the fractions (own, else shared) of D and Dv, q_offset (default S - T),
 * the position options' ranges, the int32 and element limits of the sizes, positions (a rotary
 * pe, not beside pos_offset, enough rows), the relative mode's limits and tables (present where
 * it reads them with their shapes, absent elsewhere), without option positions the last position
 * the offsets make (rp_option_position_span), then the frequency scalars against what is
 * rotated (rp_pe_scheme_check_freq) and the refusal of config keys that do nothing
 * (rp_model_cfg_check_used). RP_ERR_ARG at the first refusal, in that order, with p->arg. */
rp_status rp_attention_plan(const rp_attn_request *req, rp_attn_plan *p);

/* Once the caller has its frequency tables and axes in f (borrowed for the call): checks f
 * against the plan (rp_pe_scheme_check_freq with its qlast, klast), then, with option positions,
 * the p->pos_n entries the call reads against f (rp_freq_plan_positions, d_rot 2 p->half), and
 * points p->cfg.freq at f unless f is the plain scheme. RP_ERR_ARG. */
rp_status rp_attention_plan_freq(rp_attn_plan *p, const rp_rope_freq *f);

/* ---- rp.linear_attention ---- */

/* What one rp.linear_attention call was given. */
typedef struct rp_linattn_request {
    int64_t B, T, H, D, Dv; /* q, k [B, T, H, D], v [B, T, H, Dv]: the caller has checked them
                             * 4-D, sizes >= 1, agreeing */
    /* The options that are config keys (the rows with a place among rp.linear_attention's
     * options, rp_cfg_key.linear: pe.mode, linear_rope, pe.base, pe.pairing, pe.fraction_qk
     * and pe.fraction_v), each read by its row's type (pe among the modes that run with linear
     * attention, pe.h's linear column); an absent one holds its value from
     * rp_linear_attention_request_default */
    rp_model_cfg keys;
    double eps;             /* as given (the plan checks it: rp_linattn_check_eps);
                             * RP_LINATTN_EPS when absent */
    int64_t q_offset;       /* 0 when absent */
} rp_linattn_request;

/* A request with nothing given: keys at the schema's defaults but pe none, eps RP_LINATTN_EPS,
 * q_offset 0. */
rp_linattn_request rp_linear_attention_request_default(void);

/* The plan of one call. */
typedef struct rp_linattn_plan {
    rp_linattn_cfg cfg;
    int arg; /* after a refusal: the argument its message is about (1 q, 2 k, 4 the options) */
} rp_linattn_plan;

/* Checks every rule of a call against req and fills *p (OVERWRITTEN): eps (after pe), the rotated
 * widths from the fractions (fraction_qk of D where the mode rotates q and k, fraction_v of Dv
 * where it rotates v: rp_option_fraction_width), q_offset's range and q_offset + T - 1's
 * (rp_option_position_span), the refusal of config keys
 * that do nothing (rp_model_cfg_check_used, attention linear), then the int32 and element
 * limits of the sizes. RP_ERR_ARG at the first refusal, in that order, with p->arg. */
rp_status rp_linear_attention_plan(const rp_linattn_request *req, rp_linattn_plan *p);

/* ---- the rotary calls' frequency options (rp.rope.angles, rp.rope.rotate, rp.attention) ---- */

/* The frequency scalars of a call's options, read into view's frequency rows as given
 * (orig_len_given: option orig_len was; hf: the scaling came from Hugging Face's rope_scaling):
 * orig_len, when given, an integer >= 1 ("option 'orig_len' must be an integer >= 1, got 0");
 * required by a scaling that reads it unless default_orig_len >= 1, the call's own ("option
 * 'orig_len' (the original context length) is required with scaling "yarn"", and when hf
 * " (rope_scaling's original_max_position_embeddings)" after it). Fills *f (OVERWRITTEN): the
 * scalars (rp_model_cfg_freq), orig_len the given one, else default_orig_len. RP_ERR_ARG. */
rp_status rp_freq_plan_scalars(const rp_model_cfg *view, int orig_len_given, int hf,
                               double default_orig_len, rp_rope_freq *f);

/* The rows a function of angles is sampled for at the positions pos[0 .. n) (offset + r when
 * pos is NULL): the largest position + 1, 1 at least. Without pos no loop: a count of 2^40
 * positions costs nothing. */
int64_t rp_freq_plan_rows(const int64_t *pos, int64_t offset, int64_t n);

/* Checks f (its tables set) against a placement d_rot wide at the positions pos[0 .. n) (offset
 * + r when pos is NULL; nothing when n < 1): an angle table starts at position 0, so with angles
 * every position is >= 0 ("position -1 is below 0, where the angle table starts": the first one
 * below), then rp_rope_freq_check_use up to the largest (the tables wide and long enough).
 * Without pos no loop. RP_ERR_ARG. */
rp_status rp_freq_plan_positions(const rp_rope_freq *f, int64_t d_rot, const int64_t *pos,
                                 int64_t offset, int64_t n);

/* ---- rules shared with the other calls' options ---- */

/* d_rot = floor(fraction * D) from option key: RP_ERR_ARG unless 0 < fraction <= 1 ("option
 * 'fraction' must be in (0, 1], got 1.5") and the result is even and >= 2 ("d_rot must be even,
 * got 7 (from fraction 0.5 of D = 14)"); Dname names D. */
rp_status rp_option_fraction_width(const char *key, double fraction, int64_t D,
                                   const char *Dname, int64_t *d_rot);
/* An integer option in [min, 2^53], min 0 or -2^53: RP_ERR_ARG ("option 'q_offset' must be
 * between 0 and 2^53, got -1"). */
rp_status rp_option_position(const char *key, int64_t v, int64_t min);
/* The positions first .. first + n - 1 that options make (an offset and a count of rows), named
 * by from, the options' sum ("offset", "pos_offset + q_offset"): RP_ERR_ARG when the last is past
 * 2^53, where doubles no longer hold every integer ("positions run from offset = 9007199254740991
 * to 9007199254740993, past 2^53"); nothing when n < 1. */
rp_status rp_option_position_span(const char *from, int64_t first, int64_t n);
/* Option rotate (a mask, 0: absent) for pe: RP_ERR_ARG unless pe is rotary ("option 'rotate'
 * needs a rotary pe (rope, roper or roper_legacy), got pe 'shaw'"), or for a pe outside the
 * enum. */
rp_status rp_option_rotate(rp_pe pe, int rotate);

/* ---- rp.model ---- */

/* The plan of a model config. */
typedef struct rp_model_plan {
    rp_pe_scheme scheme;   /* what the config rotates (rp_model_cfg_scheme) */
    int64_t half;          /* the most pairs a placement rotates: the width of user tables */
    int64_t rows;          /* seq_len: the positions a function of angles is sampled for */
    rp_rope_freq freq;     /* the frequency scheme's scalars (rp_model_cfg_freq) */
} rp_model_plan;

/* A config as a user wrote it (rp.model's table read by the schema rows) into the one stored
 * form: option rotate on a rotary pe (rp_option_rotate), then rp_model_cfg_normalise
 * (cfg OVERWRITTEN). RP_ERR_ARG. */
rp_status rp_model_cfg_written(rp_model_cfg *cfg);

/* rp_model_cfg_written, then every rule of a config (rp_model_cfg_check) and the refusal of keys
 * that do nothing (rp_model_cfg_check_used); fills *p (OVERWRITTEN; p may be NULL). RP_ERR_ARG
 * at the first refusal. */
rp_status rp_model_cfg_plan(rp_model_cfg *cfg, rp_model_plan *p);

#endif
