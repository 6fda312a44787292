/* The model's configuration: the struct rp.model's keys fill (each field a row of the schema,
 * model_schema.h), its defaults and its one check, and what it resolves to for the attention
 * (the positional scheme, the frequency scheme). The floor of the facts (core/config/): above the
 * layers (nn/), below the model (model/) and the files (io/). */
#ifndef RP_MODEL_CFG_H
#define RP_MODEL_CFG_H

#include <stdint.h>

#include "linear_attention.h"
#include "pe.h"
#include "rope_freq.h"
#include "status.h"

/* Largest layer count (keeps names and the layout table small). */
#define RP_MAX_LAYERS 100000

typedef enum { RP_NORM_PRE = 0, RP_NORM_POST = 1 } rp_norm;
typedef enum { RP_ACT_RELU = 0, RP_ACT_GELU = 1 } rp_act;
/* softmax: scaled dot-product attention (core/nn/attention.h); linear: causal linear attention with
 * phi = elu + 1 and RoPE after (RoFormer eq. 19) or before the feature map
 * (core/nn/linear_attention.h), O(T d_k^2) per head, a constant-size decoding state. */
typedef enum { RP_ATTN_SOFTMAX = 0, RP_ATTN_LINEAR = 1 } rp_attn_kind;

/* The names of rp_norm ("pre", "post"), rp_act ("relu", "gelu"), rp_attn_kind ("softmax",
 * "linear") and rp_pairing ("half", "interleaved") in enum order, NULL-terminated: the values of
 * rp.model's config keys norm, activation, attention and pairing, and of the roper.config a
 * safetensors file carries (core/io/safetensors.h). */
extern const char *const rp_norm_names[3];
extern const char *const rp_act_names[3];
extern const char *const rp_attn_names[3];
extern const char *const rp_pairing_names[3];

typedef struct rp_model_cfg {
    int64_t vocab;        /* V >= 1 */
    int64_t d_model;      /* C >= 1, divisible by heads */
    int64_t heads;        /* H >= 1 */
    int64_t layers;       /* >= 1 */
    int64_t d_ff;         /* >= 1 */
    int64_t seq_len;      /* max T >= 1 */
    int64_t max_batch;    /* activations are sized for this many sequences */
    rp_norm norm;
    rp_act act;
    double dropout;       /* 0 <= p < 1, on both residual branches; 0 by default */
    uint64_t seed;        /* initialisation and dropout */
    rp_attn_kind attention;          /* softmax (default) or linear */
    rp_lin_placement linear_rope;    /* linear attention: RoPE after (default) or before phi */
    /* ---- the attention's part, pe, rel and freq: the rows of rp.attention's options
     * (rp_model_cfg_scope: RP_CFG_SCOPE_PE, _REL, _FREQ) ---- */
    /* The positional scheme (pe.h's rp_pe_cfg): the keys pe (pe.mode), fraction_qk, fraction_v,
     * base (pe.base, RP_ROPE_BASE), pairing, rotate, fraction_q, fraction_k, fraction_o. */
    rp_pe_cfg pe;
    /* Relative modes (pe.h): rel.clip k for shaw (distances clipped to [-k, k]) and deberta
     * (2k buckets), 1 .. RP_REL_MAX_CLIP, default 16; t5: rel.buckets (2 .. RP_REL_MAX_BUCKETS,
     * default 32) and rel.max_distance (> rel_buckets / 2, default 128). The keys rel_clip,
     * rel_buckets, rel_max_distance; the struct the attention takes (rp_attn_cfg.rel). */
    rp_rel_cfg rel;
    /* The rotary frequency scheme (core/nn/rope_freq.h; rotary pe with softmax attention), the
     * struct the attention takes (rp_attn_cfg.freq): the keys scaling (freq.scaling,
     * RP_SCALING_NONE by default), scaling_factor (freq.factor, 1), orig_len (the original
     * context length of yarn, dynamic and llama3; 0: seq_len), yarn_alpha (1), yarn_beta (32),
     * yarn_ramp (rotations), low_freq_factor (1) and high_freq_factor (4) of llama3,
     * attention_factor (0: the scaling's own), xpos (xPos gamma, 0 = off) with xpos_scale_base
     * (512). Its tables (theta, angles) and axes are never set in a config: user frequencies,
     * angles and positions are rp_model_set_freq's and rp_model_set_positions'. */
    rp_rope_freq freq;
    /* ---- (end of the attention's part) ---- */
    /* learn_freq (0 or 1; a rotary pe with softmax attention, where it does nothing otherwise;
     * no scaling, no angle table): the
     * frequencies are the parameter "rope.freq" [RP_MAX_AXES x d_rot/2] (the widest rotated
     * placement's d_rot), trained with the rest: row 0 holds theta_i of pair i (1-D, axial,
     * sections: pair i turns by p theta_i, p its axis's position), rows 0 .. A-1 RoPE-Mixed's
     * matrix W (axes mixed: pair i turns by sum_a p_a W[a][i]); the rows past them are unused
     * (zero gradient). Initialised to the scheme's (the standard or the model's own frequencies,
     * or the given mix), rounded to float. Shared by every layer and head. */
    int learn_freq;
    /* tie_embeddings (0 or 1, any mode): the output layer's weight is the token embedding
     * "embed.weight" itself (tied input and output embeddings, as GPT-2 and Press & Wolf 2017):
     * the model has no "head.weight", the logits are LN_f(x) @ embed.weight^T + head.bias (the
     * bias stays the output layer's own), and embed.weight's gradient sums both uses. The tied
     * table is initialised as the output layer's weight is, U(-1/sqrt(d_model), 1/sqrt(d_model)),
     * not N(0, 1): logits of N(0, 1) rows would start with a spread of sqrt(d_model). */
    int tie_embeddings;
} rp_model_cfg;

/* The labml defaults: d_model 128, heads 4, layers 3, d_ff 512, seq_len 512, max_batch 16,
 * pre-norm, ReLU, dropout 0, pe rope, fractions 1, base RP_ROPE_BASE, half pairing, seed 0, softmax
 * attention (linear_rope after); the later keys' defaults above; vocab as given. Each row of the
 * config schema gives its own (core/config/model_schema.c). */
rp_model_cfg rp_model_cfg_default(int64_t vocab);

/* Checks every field against its range (the schema's, core/config/model_schema.h, whatever the mode:
 * a field the mode does not use cannot hold a nan either), then the rules between fields
 * (divisibility, even d_rot; linear attention takes pe none, sinusoidal, learned, rope or roper,
 * with their own rotate and fraction_qk / fraction_v only; scaling and xpos need a rotary pe with
 * softmax attention). RP_ERR_ARG naming the field as rp.model's key ("base", "activation"). The
 * one check of a config: rp.model's, the checkpoint and safetensors readers' (and writers'). */
rp_status rp_model_cfg_check(const rp_model_cfg *cfg);
/* What a file's reader or writer says before rp_model_cfg_check's message when it refuses the
 * file's config ("path: bad model config: heads 0 must be in ..."; the readers' rp_error_why
 * template RP_BAD_MODEL_CONFIG ": {why}"). */
#define RP_BAD_MODEL_CONFIG "bad model config"
/* The readers' template (rp_error_why) when a stored config's model cannot be built. */
#define RP_CANNOT_BUILD_MODEL "cannot build the model: {why}"

/* The positional scheme of a checked cfg (what is rotated, d_rot from the fractions and d_k). */
rp_pe_scheme rp_model_cfg_scheme(const rp_model_cfg *cfg);
/* rp_model_set_freq's checks (core/model/model.h), without a model: f the scheme a model of the
 * checked cfg would take (rp_model_cfg_freq(cfg), axes as the model's, own theta or angles).
 * RP_ERR_ARG as rp_model_set_freq. Reads only. */
rp_status rp_model_cfg_check_freq(const rp_model_cfg *cfg, const rp_rope_freq *f);
/* rp_model_set_positions' checks, without a model: f the scheme a model of the checked cfg would
 * take (own tables and, with pos, the positions' axes), pos [rows x A] or NULL. RP_ERR_ARG as
 * rp_model_set_positions. Reads only. */
rp_status rp_model_cfg_check_positions(const rp_model_cfg *cfg, const rp_rope_freq *f,
                                       const int64_t *pos, int64_t rows);
/* cfg's frequency scheme, without user tables: cfg->freq with orig_len 0 resolved to seq_len. */
rp_rope_freq rp_model_cfg_freq(const rp_model_cfg *cfg);

/* The checks of values a user gave under other names (a rope_scaling table's fields: Hugging
 * Face's names for the keys they set), in those names: shown [rp_model_cfg_nkeys] the name each
 * key goes by (NULL: its own; borrowed), given [rp_model_cfg_nkeys] 1 for a key the user set.
 * Checks each key both given and shown (rp_model_cfg_check_key_as, given = 1), then the
 * frequency rules (rp_freq_rules, those that apply to c's scaling) that read such a key, their
 * messages naming each key by shown or its own name. Returns RP_OK or the first refusal
 * (RP_ERR_ARG); the checks of rp_model_cfg_check and rp_model_cfg_plan still follow. */
rp_status rp_model_cfg_check_shown(const rp_model_cfg *c, const char *const *shown,
                                   const int *given);

/* A frequency scheme with nothing set: every parameter at its config row's default (no scaling,
 * factor 1, no xPos, alpha, beta, the ramp, llama3's factors and the xPos scale base at theirs,
 * orig_len 0, attention_factor 0), no user tables, scalar positions (axes.n 0). */
rp_rope_freq rp_rope_freq_default(void);
/* 1 when a and b are equal as schemes: every config row of the frequency scheme that does
 * something for a's scaling and xpos (rp_model_cfg_unused) holds the same value in both, and
 * the tables and axes are equal (contents compared). NULL equals a plain scheme. */
int rp_rope_freq_equal(const rp_rope_freq *a, const rp_rope_freq *b);

#endif
