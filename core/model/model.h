/* The transformer: token embedding -> N layers -> (final LayerNorm) -> output layer, as labml
 * trains it (labml_nn/transformers/mha.py and models.py in labml's repository,
 * github.com/labmlai/annotated_deep_learning_paper_implementations): biases everywhere, untied
 * output layer, scale 1/sqrt(d_k), causal mask, ReLU (or GELU) feed-forward.
 *
 *   pre-norm (labml, the default):  x += drop(attn(LN1(x)));  x += drop(ff(LN2(x)));  LN_f at the end
 *   post-norm (the write-up's 20M): x = LN1(x + drop(attn(x)));  x = LN2(x + drop(ff(x)));  no LN_f
 *
 * pe: what a mode adds to the embeddings and rotates inside attention is the mode table of pe.h
 * (none | rope | roper | roper_legacy: token embedding only; sinusoidal: + the Vaswani table,
 * base RP_ROPE_BASE, not the config's pe.base; learned: + a trained (seq_len, C) table).
 *
 * Memory: one flat buffer each for parameters, gradients (same layout) and activations, sized
 * once for (max_batch, seq_len) at creation; forward accepts any B <= max_batch, T <= seq_len.
 * No (T, T) attention weights are kept (the kernels work block by block), pre-norm keeps no
 * LayerNorm outputs (the backward recomputes them, bitwise), and the cross-entropy keeps no
 * probabilities (two floats per row: the backward recomputes them from the logits).
 * rp_model_memory gives the exact size of a config (the planner's own count); model_impl.h shows
 * every buffer's layout.
 * The parameter buffer is a rp_storage so that tensor views of weights outlive the model.
 */
#ifndef RP_MODEL_H
#define RP_MODEL_H

#include <stdint.h>

#include "attention.h"
#include "linear_attention.h"
#include "model_cfg.h"
#include "pe.h"
#include "rope_freq.h"
#include "rng.h"
#include "storage.h"
#include "tensor.h"

/* How rp_model_new initialises an entry (PyTorch's defaults): N(0, 1) (embeddings), all 1
 * (LayerNorm weights), all 0 (LayerNorm biases), U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (linear
 * weights and biases; a bias shares its weight's fan_in). */
typedef enum { RP_INIT_NORMAL = 0, RP_INIT_ONES, RP_INIT_ZEROS, RP_INIT_UNIFORM } rp_init_kind;
/* Their names in enum order ("normal", "ones", "zeros", "uniform"), NULL-terminated. */
extern const char *const rp_init_names[];

/* ---- the parameter layout: one table (core/model/model_layout.c) ----
 *
 * A model's parameters are entries of one flat buffer (the gradients' has the same layout), in
 * the order of the layout table's rows: the rows of scope RP_LAYOUT_MODEL, then those of scope
 * RP_LAYOUT_LAYER for each layer l = 0 .. layers-1 (named "layers.<l>.<name>"), then those of
 * RP_LAYOUT_AFTER. A row gives an entry's name, its dims (symbols of the config: rp_layout_dim),
 * its init kind and fan-in (RP_INIT_UNIFORM's; a bias shares its weight's) and when the model
 * has it; a row without a name stands for the relative kind's parameters of its scope (core/nn/
 * pe.c's kind table: the shared one before the layers, the others in each layer). rp.model_layout()
 * gives the table (the PyTorch companion reads it from its schema.json; docs/interop.md lists
 * the names). */
typedef enum { RP_LAYOUT_MODEL = 0, RP_LAYOUT_LAYER, RP_LAYOUT_AFTER } rp_layout_scope;
/* Its names in enum order ("model", "layer", "after"), NULL-terminated. */
extern const char *const rp_layout_scope_names[];

/* The sizes a row's dims stand for (rp_layout_dim_of: the dims table in model_layout.c). */
typedef enum {
    RP_LD_NONE = 0, /* no dim (a 1-D entry's second; no fan-in): 0 */
    RP_LD_VOCAB,
    RP_LD_D_MODEL,
    RP_LD_3D_MODEL, /* the q, k and v rows of attn.qkv */
    RP_LD_D_FF,
    RP_LD_SEQ_LEN,
    RP_LD_AXES,     /* RP_MAX_AXES: the rows of rope.freq */
    RP_LD_PAIRS,    /* d_rot / 2 of the widest rotated placement */
    RP_LD_COUNT     /* not a dim */
} rp_layout_dim;
/* What a dim stands for: size = times x the size named of + plus; of a config key ("vocab",
 * "d_model", "d_ff", "seq_len"), "d_rot/2" (RP_LD_PAIRS's, which the layout resolves by the dim)
 * or NULL (the constant plus). */
typedef struct {
    const char *name; /* as rp.model_layout() names it */
    const char *of;
    int times, plus;
} rp_layout_dim_desc;
/* The row of dim d (a value outside the enum: NULL). */
const rp_layout_dim_desc *rp_layout_dim_of(rp_layout_dim d);

/* When the model has a row's entries. */
typedef enum {
    RP_LAYOUT_ALWAYS = 0,
    RP_LAYOUT_IF_KEY,      /* the config key `key` does something (rp_model_cfg_unused) and its
                            * value, as rp_model_cfg_value_str writes it, is `value` */
    RP_LAYOUT_IF_ABSOLUTE, /* the mode's absolute table (pe.h) is the one named `value` */
} rp_layout_if;

typedef struct rp_layout_row {
    const char *name;      /* the entry's name (after "layers.<l>." in scope RP_LAYOUT_LAYER);
                            * NULL: the relative kind's parameters of the scope */
    rp_layout_scope scope;
    rp_layout_dim dims[2]; /* dims[1] RP_LD_NONE: a 1-D entry */
    rp_init_kind init;
    rp_layout_dim fan_in;  /* RP_INIT_UNIFORM's fan-in; RP_LD_NONE for the others */
    rp_layout_if cond;
    const char *key, *value; /* the condition's (RP_LAYOUT_ALWAYS: NULL) */
    size_t at;             /* core's own: where the model keeps the entry's offset (an offsetof
                            * into the model, or into a layer's record in scope RP_LAYOUT_LAYER) */
} rp_layout_row;

/* The rows, in buffer order within each scope (the scopes in enum order). */
extern const rp_layout_row rp_model_layout[];
extern const int rp_model_layout_n;

/* 1 when a model of config c (checked: rp_model_cfg_check) has row r's entries. */
int rp_layout_row_holds(const rp_layout_row *r, const rp_model_cfg *c);

typedef struct rp_param_info {
    char name[48];
    int ndim;
    int64_t shape[2];
    int64_t offset;  /* in floats, into the parameter buffer */
    int64_t numel;
    rp_init_kind init;
    int64_t fan_in;  /* RP_INIT_UNIFORM: the input features; 0 otherwise */
} rp_param_info;

typedef struct rp_model rp_model;

/* A new model with parameters initialised from cfg->seed like PyTorch's defaults: linear
 * weights and biases U(-1/sqrt(fan_in), 1/sqrt(fan_in)), embeddings N(0, 1), LayerNorm weight 1
 * and bias 0 (drawn in layout order from one rp_rng). Returns NULL with the error recorded (bad
 * cfg: RP_ERR_ARG; no memory: RP_ERR_NOMEM). Free with rp_model_free. */
rp_model *rp_model_new(const rp_model_cfg *cfg);
/* Frees m (NULL: nothing); its parameter and gradient storages live on while tensors view them.
 * A model whose buffers held RP_MODEL_TRIM_BYTES or more then gives the heap's free memory back
 * to the system (rp_mem_trim): without it glibc keeps most of a freed model resident, and a
 * process that builds models one after another stays at many times its live memory. */
#define RP_MODEL_TRIM_BYTES ((int64_t)1 << 20)
void rp_model_free(rp_model *m);

/* What rp_model_new(cfg) would allocate, without allocating: *bytes (every buffer: parameters,
 * gradients, activations, activation gradients, the decode cache, scratch) and *params (the
 * parameter count in floats; an optimiser adds 2 floats per parameter). Either pointer may be
 * NULL. RP_ERR_ARG for a bad cfg (rp_model_cfg_check's message), RP_ERR_NOMEM when the sizes
 * exceed 2^40 floats. rp_model_new itself refuses (RP_ERR_NOMEM, naming both sizes) a model
 * whose *bytes exceed rp_mem_available(), so that the operating system's overcommit never lets
 * a model be created that the OOM killer ends at its first forward pass. */
rp_status rp_model_memory(const rp_model_cfg *cfg, int64_t *bytes, int64_t *params);

const rp_model_cfg *rp_model_config(const rp_model *m);
int rp_model_num_tensors(const rp_model *m);         /* entries in the layout */
const rp_param_info *rp_model_param(const rp_model *m, int i);
int rp_model_find_param(const rp_model *m, const char *name); /* index or -1 */
int64_t rp_model_param_count(const rp_model *m);     /* total floats */
/* The storages (the model keeps its own reference; retain to keep one). */
rp_storage *rp_model_params(rp_model *m);
rp_storage *rp_model_grads(rp_model *m);
/* A (retained) tensor view of parameter i in the parameter (grad = 0) or gradient (grad = 1)
 * buffer. */
void rp_model_param_view(rp_tensor *out, rp_model *m, int i, int grad);

/* The index of the first parameter (layout order) holding a nan or inf in the parameter
 * (grad = 0) or gradient (grad = 1) buffer, or -1 when every value is finite. */
int rp_model_first_nonfinite(const rp_model *m, int grad);

/* The model's own frequencies (a rotary pe with softmax attention): theta [n_theta] replaces
 * theta_i, or angles [rows x n_angles] give the angle of position p on pair i (rows >= seq_len);
 * both NULL restores the standard theta. The arrays are copied. RP_ERR_ARG (naming freq or angles)
 * for a model that does not rotate, a table that rp_rope_freq_check refuses or that is too small
 * for the model's widths (n >= d_rot / 2 of every rotated placement) or seq_len; nothing changes
 * then. */
rp_status rp_model_set_freq(rp_model *m, const double *theta, int64_t n_theta,
                            const double *angles, int64_t rows, int64_t n_angles);
/* The model's frequency scheme (config, own tables and axes; valid until the next set_freq or
 * set_positions). */
const rp_rope_freq *rp_model_freq(const rp_model *m);
/* The model's positions (a rotary pe with softmax attention): token i of every sequence
 * (training, loss, evaluation and decoding alike; every batch row the same) sits at
 * pos[i * A .. i * A + A) for i < rows, A = axes->n (1 .. RP_MAX_AXES), rows >= seq_len, entries
 * within 2^53 (>= 0 with an angle table); axes->map with its sections or its mix matrix
 * [A x n_mix] turns them into angles (core/nn/rope_freq.h). The arrays are copied. pos NULL
 * restores scalar positions 0, 1, .. (axes ignored). RP_ERR_ARG, nothing changed, for a model
 * that does not rotate, axes that rp_rope_freq_check refuses (beside the model's own tables and
 * scaling) or that do not fit its widths, or too few rows ("positions hold 3 rows; the model's
 * seq_len is 8"). */
rp_status rp_model_set_positions(rp_model *m, const rp_rope_axes *axes, const int64_t *pos,
                                 int64_t rows);
/* The model's positions ([rows x A], A = rp_rope_freq_axes(rp_model_freq(m))), or NULL (rows 0)
 * for scalar positions; *rows when rows is not NULL. Valid until the next set_positions. */
const int64_t *rp_model_positions(const rp_model *m, int64_t *rows);

/* The model's dropout RNG (its state is part of a checkpoint). */
rp_rng *rp_model_rng(rp_model *m);

/* Forward pass over tokens (B, T) (row-major, values in 0..V-1; caller checks ranges with
 * rp_model_check_tokens). When targets != NULL it also computes the mean cross-entropy over scored
 * positions (targets (B, T), -1 or mask[n] == 0 = not scored; mask may be NULL) into *loss (NaN
 * when nothing is scored) and keeps what backward needs. train != 0 enables dropout.
 * Logits (B, T, V) stay in the activation buffer: rp_model_logits. */
rp_status rp_model_forward(rp_model *m, const int32_t *tokens, const int32_t *targets,
                           const uint8_t *mask, int64_t B, int64_t T, int train, float *loss);
/* Checks B, T against the model's sizes and every token / target value; RP_ERR_ARG/RANGE.
 * Messages count positions from 1 (`token 57 at [2, 13] is outside the vocabulary 0..17`);
 * token values stay 0-based. rp_model_forward runs this check itself. */
rp_status rp_model_check_tokens(const rp_model *m, const int32_t *tokens, const int32_t *targets,
                                int64_t B, int64_t T);
/* Logits (B, T, V) of the last forward (valid until the next call); NULL before any forward. */
const float *rp_model_logits(const rp_model *m);
/* The cross-entropy of each position (B, T) of the last forward with targets, in nats (0 where
 * not scored; the mean loss is their sum over the scored count), valid until the next call; NULL
 * before any forward and after one without targets. */
const float *rp_model_losses(const rp_model *m);

/* Sets every gradient to 0. */
void rp_model_zero_grad(rp_model *m);
/* Backward pass of the last forward (which must have had targets): grads += dloss/dparams. It
 * leaves the forward's state as it was (a second call adds the same gradient again). */
rp_status rp_model_backward(rp_model *m);

/* Softmax attention only: the attention weights of layer l (0-based) of the last forward, written
 * to out ((B, H, T, T) floats with the last forward's B and T; overwrites), recomputed from the
 * layer's saved q, k by the forward's own kernel (bitwise the weights the forward used; the model
 * keeps none). Uses the model's scratch. RP_ERR_ARG for a linear-attention model (see
 * rp_model_linear_weights), a bad layer or no forward. */
rp_status rp_model_attention_weights(rp_model *m, int64_t layer, float *out);
/* Introspection of the last forward (valid until the next call): the residual stream after
 * layer l ((B, T, C); l = -1 gives the embedding output); NULL when l is out of range or no
 * forward ran. */
/* Linear attention only: the normalised weights w_nm / den_n of layer l (0-based) of the last
 * forward, written to out ((B, H, T, T) floats, zeros above the diagonal; overwrites), computed
 * naively in O(T^2) from the saved q, k (rp_linattn_weights). RP_ERR_ARG for a softmax model, a
 * bad layer or no forward; RP_ERR_NOMEM. */
rp_status rp_model_linear_weights(const rp_model *m, int64_t layer, float *out);
/* Linear attention only: the smallest denominator (eps included) over every layer, sequence,
 * head and position of the last forward; NAN for a softmax model or before any forward. */
double rp_model_linear_min_den(const rp_model *m);
/* Linear attention only: the smallest normalised weight w_nm / den_n (rp_linattn_min_weight)
 * and the smallest denominator over every layer, sequence, head and position of the last
 * forward, into *min_weight / *min_den (either may be NULL). O(layers B H T^2 d_k) time,
 * O(H T^2) temporary memory. RP_ERR_ARG for a softmax model or no forward; RP_ERR_NOMEM. */
rp_status rp_model_linear_stats(const rp_model *m, double *min_weight, double *min_den);
const float *rp_model_residual(const rp_model *m, int64_t layer);
/* B and T of the last forward (0 before any). */
void rp_model_last_shape(const rp_model *m, int64_t *B, int64_t *T);

/* ---- incremental decoding with a KV cache (one sequence) ----
 * The cache stores k already rotated by +i*theta and (roper modes) v already rotated by +i*theta
 * (+2i*theta for roper_legacy), as GeoV does; each new output is rotated by -n*theta for its
 * position n. Positions count from the first token fed after rp_model_cache_reset. Linear
 * attention keeps no keys: its cache is the running state (S, z) of rp_linattn_forward per layer
 * and head, a constant size whatever the position.
 * The cached path computes every projection with rp_linear_rows_forward (layers.h) on a
 * transposed copy of the weights, taken when a sequence starts (a feed into an empty cache, and
 * every generate call): a row's numbers do not depend on what else is decoded with it, so
 * rp_model_generate and rp_model_generate_batch give the same tokens bit for bit. (The logits
 * agree with rp_model_forward's to rounding, not bitwise: the forward uses OpenBLAS.) */
void rp_model_cache_reset(rp_model *m);
/* Feeds n tokens at positions cache_len .. cache_len+n-1 (cache_len + n <= seq_len, else
 * RP_ERR_RANGE; linear attention without an absolute table (pe none, rope, roper) has no such
 * window: positions up to 2^31-1) and writes the logits of the LAST of them (V floats) into
 * logits_out (may be NULL). A feed into an empty cache (cache_len 0) first copies the parameters
 * into the transposed decode weights (O(parameters)); later feeds of the same sequence decode
 * with that copy, so parameters changed in the middle of a sequence take effect at the next
 * sequence. */
rp_status rp_model_cache_feed(rp_model *m, const int32_t *tokens, int64_t n, float *logits_out);
int64_t rp_model_cache_len(const rp_model *m);

/* Decoding options. temperature 0 = greedy (argmax, first on ties); otherwise sample from
 * softmax(logits / temperature), restricted to the top_k largest logits when top_k > 0, then,
 * when 0 < top_p < 1, to the nucleus (Holtzman et al. 2020): the fewest most likely of those
 * (logits descending, ties by index) whose probabilities under that softmax sum to at least top_p
 * of their total, renormalised; one uniform draw per sampled token from the generator. Generation
 * stops after n_new tokens or right after emitting stop_token (>= 0; -1 = none). */
typedef struct rp_gen_cfg {
    double temperature;
    int64_t top_k;
    int32_t stop_token;
    rp_rng *rng;        /* rp_model_generate: required when temperature > 0 (it advances) */
    float *logits;      /* NULL, or receives the logits each token was picked from: V floats per
                         * new token (n_new x V per prompt; rp_model_generate_batch: prompt p at
                         * p x n_new x V), written for the tokens emitted */
    double top_p;       /* in [0, 1]; 0 (what a config that leaves it out holds) and 1 keep every
                         * candidate */
} rp_gen_cfg;

/* Generates up to n_new tokens after prompt (n_prompt >= 1 tokens) with the KV cache (it resets
 * the cache first and takes the weights of now). Softmax attention (and linear attention with an
 * absolute table): a prompt longer than seq_len is cut to its last seq_len tokens, and when the
 * window is full (seq_len tokens) it re-encodes the last seq_len / 2 tokens, positions
 * restarting at 0, and goes on. Linear attention without an absolute table carries its running
 * state instead: the whole prompt, positions counting on, nothing re-encoded. Writes the new
 * tokens to out (n_new capacity) and their count to *n_out (the stop token included when
 * emitted). n_new = 0 leaves the cache empty. Allocates nothing. */
rp_status rp_model_generate(rp_model *m, const int32_t *prompt, int64_t n_prompt, int64_t n_new,
                            const rp_gen_cfg *cfg, int32_t *out, int64_t *n_out);

/* The most memory one rp_model_generate_batch call allocates for its lanes. */
#define RP_GEN_BATCH_BYTES ((int64_t)256 << 20)

/* Generation for n prompts at once (the continuous batching of a server): up to
 * rp_model_batch_lanes(m, n, max_lanes) lanes decode at a time, each a sequence with its own KV
 * cache (softmax: 2 x layers x seq_len x C floats) or running state (linear) and window. Every
 * step feeds one token to each busy lane (the next prompt token, or the token it just picked),
 * runs the rows of all busy lanes through the layers together, and picks the next token of each
 * lane whose prompt is through; a lane that emits its stop token or its n_new-th token takes the
 * next prompt at the next step (so finished prompts cost nothing), and the call returns when
 * every prompt is done. Each prompt is generated exactly as rp_model_generate does it: the same
 * window rules, and bitwise the same tokens for the same generator state, whatever the lane
 * count and whichever prompts share the steps.
 *  - prompt p (0-based) is tokens[offsets[p] .. offsets[p+1]-1]: offsets has n + 1 entries,
 *    offsets[0] = 0, each prompt >= 1 token, every token in 0 .. V-1;
 *  - cfg: temperature, top_k, stop_token as for rp_model_generate; cfg->rng is ignored: prompt p
 *    samples from rngs[p] (n generators, advanced; may be NULL for greedy decoding), so its
 *    tokens do not depend on the other prompts;
 *  - out (n, n_new) row-major: prompt p's new tokens at out[p * n_new ..]; n_out[p] their count
 *    (both OVERWRITTEN; out beyond n_out[p] is left alone);
 *  - max_lanes >= 1: at most that many lanes (1: one prompt at a time).
 * n = 0 or n_new = 0 does nothing (n_out all 0). Allocates the lanes (at most RP_GEN_BATCH_BYTES)
 * once per call and transposes the current parameters into the model's decode weights (a
 * sequence of rp_model_cache_feed goes on with those); uses the model's decode scratch (one call
 * per model at a time; the model's own KV cache is not touched).
 * RP_ERR_ARG / RP_ERR_RANGE for bad arguments (before anything runs), RP_ERR_NOMEM. */
rp_status rp_model_generate_batch(rp_model *m, const int32_t *tokens, const int64_t *offsets,
                                  int64_t n, int64_t n_new, const rp_gen_cfg *cfg, rp_rng *rngs,
                                  int64_t max_lanes, int32_t *out, int64_t *n_out);

/* The lanes rp_model_generate_batch runs for n prompts (n >= 0) and max_lanes (>= 1):
 * min(n, max_lanes), fewer when their memory would pass RP_GEN_BATCH_BYTES, at least 1. */
int64_t rp_model_batch_lanes(const rp_model *m, int64_t n, int64_t max_lanes);

/* The bounds of the default lane count, and its value when the cache sizes are unknown. */
#define RP_LANES_MIN 8
#define RP_LANES_MAX 64

/* The default max_lanes of rp_model_generate_batch for this machine (the Lua API's `lanes` and
 * rp.eval's `batch` when not given): rp_model_lanes_for_cache(m, rp_cache_bytes()). */
int64_t rp_model_default_lanes(const rp_model *m);

/* The most lanes whose decoding working set fits in cache_bytes of cache: a step reads the
 * decode weights once (every layer's transposed matrices and the head's) and each busy lane's
 * cache, state and window, so (cache_bytes - weight bytes) / (bytes per lane, its cache for all
 * seq_len positions: what a lane can reach), clamped to RP_LANES_MIN .. RP_LANES_MAX (at 8 lanes
 * the weights' reads are spread over enough rows that fewer lanes were slower however small the
 * caches; beyond 64 the rows gain little more). cache_bytes < 0 (unknown): RP_LANES_MIN. With
 * more lanes than fit, every step evicts what the next one reads (on a Zen 4 with 32 MiB of L3,
 * 64 lanes of a d_model 128, seq_len 512 model decoded at 0.5x the tokens/s of 8). */
int64_t rp_model_lanes_for_cache(const rp_model *m, int64_t cache_bytes);

#endif
