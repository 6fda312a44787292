/* The transformer's inside, shared by the files that implement model.h (and by nothing else):
 *
 *   model_config.c    the config: defaults, checks, the positional scheme it resolves to
 *   model_layout.c    the parameter layout (names, shapes, offsets, init kinds), initialisation,
 *                     the parameter accessors
 *   model_memory.c    the memory plan (one bump planner for activations, gradients, the decode
 *                     buffer and the decoders of any number of lanes, run to count and then to
 *                     assign), rp_model_memory, creation, freeing
 *   model_block.c     the transformer block and the head, one definition that the training
 *                     forward and decoding run with their own products and attention
 *                     (rpm_block_ops); the projections' places, the absolute table
 *   model_forward.c   token checks, the forward pass, introspection of the last forward
 *   model_backward.c  the backward pass
 *   model_decode.c    the KV cache (through rp_attention_decode) and generation
 *
 * ---- Activation buffer (floats; N = max_batch * seq_len rows; every piece is rounded up to a
 * multiple of 16 floats so that each starts on a 64-byte line). No (T, T) attention weights are
 * kept: the kernels compute them block by block in their scratch, forward and backward, and
 * rp_model_attention_weights recomputes a layer's from its saved qkv on request. ----
 *
 *   x0        (N, C)    embedding output (+ sinusoidal table / learned rows): the residual
 *                       stream entering layer 0 (rp_model_residual(-1))
 *   per layer l = 0 .. layers-1, in this order:
 *     ln1       (N, C)  post-norm only: LN1(res1) (= h1, the FF input and its residual)
 *     ln1_mean  (N)     \ saved LayerNorm statistics of LN1 (pre-norm: of LN1(x))
 *     ln1_rstd  (N)     /
 *     qkv       (N, 3C) the fused projection, columns [q | k | v] (unrotated)
 *     lse       (B, H, T) softmax attention: each query's log-sum-exp of its scores (the
 *                       backward recomputes the weights from it; none for linear attention)
 *     atty      (N, C)  attention output before the output projection (heads side by side)
 *     mask1     (N, C)  dropout mask of the attention branch (only when cfg.dropout > 0)
 *     res1      (N, C)  x + drop(attn proj)
 *     ln2       (N, C)  post-norm only: LN2(res2) = layer output
 *     ln2_mean  (N), ln2_rstd (N)   statistics of LN2 (pre-norm: of LN2(res1))
 *     fch       (N, F)  FF pre-activation (LN2(res1) or h1) @ W1^T + b1; ReLU: relu of it,
 *                       computed in place (its backward needs only where the input was > 0,
 *                       which the output tells), GELU: as it is
 *     mask2     (N, C)  dropout mask of the FF branch (only when cfg.dropout > 0)
 *     res2      (N, C)  pre-norm: res1 + drop(ff) = layer output;  post-norm: h1 + drop(ff)
 *   lnf_mean (N), lnf_rstd (N)   statistics of the final LayerNorm (pre-norm only)
 *   logits    (N, V)
 *   ce_stats  (N, 2)    per row the largest logit and 1 / its softmax's sum (the cross-entropy's,
 *                       from which the backward recomputes the probabilities: no (N, V) buffer
 *                       besides the logits)
 *   losses    (N)       per-row cross-entropy
 *   sin_table (seq_len, C)  the sinusoidal table (pe sinusoidal only)
 *   attn_scratch        the attention kernel's scratch for (seq_len, nthreads at creation)
 *
 * Pre-norm keeps no LayerNorm output (LN1(x), LN2(res1), the final LN(x_L), la[l].ln1/ln2 are
 * NULL): the forward computes each into the work buffer right before the product that reads it,
 * and the backward recomputes it there, by the same rp_layernorm_forward call on the same saved
 * input (bitwise the forward's values; the call writes the statistics again, with the values they
 * hold), right before the weight gradient that needs it. LayerNorm's own backward needs only its
 * input and statistics.
 * The layer output (the residual stream after layer l) is res2 for pre-norm and ln2 for post-norm.
 * Rows are packed for the B, T of the last forward: row n = b * T + t.
 *
 * ---- Activation-gradient buffer (sized once; backward reuses it layer after layer; a forward
 * uses work and dF as scratch, so nothing in it outlives a call) ----
 *   dx   (N, C)   gradient of the residual stream at the current point
 *   work (N, C)   forward: the pre-norm LayerNorm outputs and the output of the attention / FF
 *                 output projections (before dropout and the residual add);
 *                 backward, pre-norm: the dropout-masked branch gradient (dropout only), then the
 *                 recomputed LayerNorm output, overwritten in place by its gradient (the weight
 *                 gradient reads it first) for the LayerNorm backward;
 *                 backward, post-norm: d res2, then d h1; the attention branch's dropout-masked
 *                 gradient (dx holds the FF branch's, as dx is free then);
 *                 rp_model_attention_weights' scratch
 *   then one region of max(N F, 4 N C, N V) floats for the gradients that are never live at once:
 *   dF   (N, F)   at its start: the FF branch. GELU: the forward computes act(fch) here right
 *                 before the W2 product, and the backward recomputes it here for W2's gradient;
 *                 then (either activation) the backward writes d act = dproj @ W2 here and
 *                 multiplies that in place by act'(fch) (= d fch)
 *   datty (N, C)  at its start, and dqkv (N, 3C) right after it (64-byte aligned): the attention
 *                 branch
 *   dlogits (N, V)  at its start: the head, before the first layer's backward
 * The backward overwrites its targets (the _set kernels, layers.h: no memset) except where the
 * accumulation is the residual sum (dx; post-norm's work in the FF branch), dqkv (softmax
 * attention's backward overwrites it (rp_attn_io.set); linear attention's accumulates: zeroed
 * first). dlogits too is overwritten (rp_crossentropy_backward_set, unscored rows 0), from the
 * logits and ce_stats. The parameter gradients always accumulate.
 *
 * ---- A decoder of nl lanes (plan_lanes in model_memory.c: the one plan of every decoder) ----
 *   lanes (nl rpm_lane), act and wrow (nl int64 each), the rows of a step (nl each): x, ln, y,
 *   proj, res (C), qkv (3C), h, ha (F), logits (V), mean, rstd; then the lanes' KV caches
 *   (softmax: layers x rpm_cache_layer_floats each, every layer a cache of rp_attention_decode
 *   for seq_len positions) or running states (linear: layers x rpm_state_layer_doubles each);
 *   then the lanes' windows (seq_len tokens each; none when rpm_unbounded). Every piece (and
 *   every lane's cache, state and window) starts on a 64-byte line.
 *
 * ---- Decode buffer (cache_mem) ----
 *   dec, the model's own decoder of 1 lane (rp_model_cache_feed, rp_model_generate); then what
 *   every decoder of the model shares: the decode scratch of rp_attention_decode (softmax), the
 *   pick scratch gen_p (V doubles) and gen_sort (V pairs); dec_w, the decode weights: every
 *   weight matrix transposed for rp_linear_rows_forward (rpm_proj_of gives each one's place):
 *   per layer qkv^T (C, 3C), out^T (C, C), w1^T (C, F), w2^T (F, C), then head^T (C, V)
 *   (rpm_dec_layer_floats per layer); dec_rel; dec_rope, the cos/sin rows of positions
 *   0 .. seq_len-1 that rp_attention_decode reads (rp_attention_decode_rows; softmax rotary
 *   modes: seq_len x d_rot floats per rotated placement, 128 KiB for S with rope, 256 KiB with
 *   roper), built with the decode weights when the model is new or its frequencies changed
 *   since (rp_model_set_freq marks them), so no token computes them. The weights are copies:
 *   rp_model_cache_reset, rp_model_generate and rp_model_generate_batch transpose the parameters into them before
 *   decoding, so the cached path never uses weights older than its call (or its reset).
 *   rp_model_generate_batch allocates a decoder of its lanes once per call (rpm_decoder_new),
 *   outside the model; rp_model_memory counts the model's, rp_model_batch_lanes sizes the
 *   batch's by the same plan (rpm_decoder_bytes).
 *
 * ---- Other memory, all allocated by rp_model_new ----
 *   copies of the last tokens / targets / mask (N each). Nothing is allocated per step.
 *
 * ---- RNG streams ----
 *   Initialisation: one rp_rng seeded with cfg.seed, drawn in layout order (uniform values as
 *   lo + (hi - lo) * rp_rng_uniform, the formula of rp_rng_fill_uniform; normals rp_rng_normal).
 *   Dropout: rp_model_rng, seeded with cfg.seed ^ RP_DROPOUT_SEED_XOR, so dropout masks do not
 *   repeat the initialisation stream. Each training forward draws, per layer, the attention-branch
 *   mask (B*T*C values) then the FF-branch mask, through rp_dropout_forward.
 */
#ifndef RP_MODEL_IMPL_H
#define RP_MODEL_IMPL_H

#include "model.h"

/* Distinguishes the dropout stream from the initialisation stream of the same seed. */
#define RP_DROPOUT_SEED_XOR 0xD1B54A32D192ED03ULL

/* Parameter offsets of one layer (floats into the parameter / gradient buffers). rel[i]: the
 * relative kind's parameter i (its row's params, pe.c; model_rel.c), -1 where there is none. */
typedef struct {
    int64_t ln1w, ln1b, qkvw, qkvb, outw, outb, ln2w, ln2b, w1w, w1b, w2w, w2b;
    int64_t rel[RP_REL_MAX_PARAMS];
} layer_params;

/* Activation pointers of one layer (see the layout at the top). */
typedef struct {
    float *ln1, *ln1_mean, *ln1_rstd, *qkv, *lse, *atty, *mask1, *res1;
    float *ln2, *ln2_mean, *ln2_rstd, *fch, *mask2, *res2;
    float *rel_tab; /* the relative tables computed from projections (model_rel.c) */
} layer_acts;

/* (value, index) for the top-k sort of generation. */
typedef struct {
    float v;
    int32_t i;
} gen_pair;

/* One lane of a decoder: a sequence being decoded. Its cache holds positions 0 .. len-1;
 * src[0 .. pend-1] are the tokens still to feed before the next pick (the prompt, a re-encoded
 * window, or the last picked token). */
typedef struct {
    int64_t prob;          /* the prompt it decodes; -1 when idle */
    float *kv;             /* softmax: its cache, layers x rpm_cache_layer_floats */
    double *lin;           /* linear: its running state, layers x rpm_state_layer_doubles */
    int32_t *win;          /* windowed modes: the tokens at positions 0 .. len-1 (seq_len) */
    const int32_t *src;
    int64_t pend, len;
    int64_t k;             /* tokens emitted for prob */
    int32_t last;          /* unbounded modes: the last picked token (src points here) */
    int32_t feed;          /* this step: the token fed, at position pos */
    int64_t pos;
} rpm_lane;

/* A decoder: nl lanes and the rows of one step (the layout above). act lists the busy lanes of
 * the step (row i = lane act[i]); wrow the nlog rows that want logits (increasing): row j of
 * logits belongs to lane act[wrow[j]]. */
typedef struct {
    rp_model *m;
    int64_t nl;
    rpm_lane *lanes;
    int64_t *act, *wrow;
    int64_t nlog;
    float *x, *ln, *mean, *rstd, *qkv, *y, *proj, *res, *h, *ha, *logits;
} rpm_decoder;

struct rp_model {
    rp_model_cfg cfg;
    int64_t dk;
    rp_pe_scheme pe;               /* what the attention rotates (rp_model_cfg_scheme) */
    rp_rope_freq freq;             /* its frequencies: the config's, with the tables below */
    double *freq_table;            /* rp_model_set_freq's copy (theta or angles), or NULL */
    int64_t *pos_table;            /* rp_model_set_positions' copy [pos_rows x A], or NULL */
    int64_t pos_rows;
    double *mix_table;             /* its copy of the mix matrix (freq.axes.mix), or NULL */
    /* learn_freq (model_freq.c): "rope.freq" at off_freq (-1: none), [RP_MAX_AXES x freq_half];
     * freq_eff the scheme the attention reads (freq with the learned values in freq_buf
     * [RP_MAX_AXES x freq_half] doubles); freq_acc [seq_len x freq_half] doubles and freq_axis
     * [freq_half] ints, the backward's scratch */
    int64_t off_freq, freq_half;
    rp_rope_freq freq_eff;
    double *freq_buf, *freq_acc;
    int *freq_axis;
    int linear;                    /* cfg.attention == RP_ATTN_LINEAR */
    double lin_min_den;            /* the last forward's smallest denominator (linear) */

    /* layout */
    int nparams;
    rp_param_info *info;
    int64_t nfloats;
    int64_t off_embed, off_pos, off_normf_w, off_normf_b, off_head_w, off_head_b;
    int64_t off_rel; /* the relative kind's shared parameter P (deberta's (2k, C)); -1: none */
    layer_params *lp;
    rp_storage *params, *grads;

    /* activations */
    float *act_mem;
    int64_t act_floats;
    float *x0, *lnf_mean, *lnf_rstd, *logits, *ce_stats, *losses;
    layer_acts *la;
    float *sin_table;
    float *xl_table; /* RP_PARAM_PROJ_SIN (xl): the sinusoid R_d, d = 0 .. seq_len-1 (seq_len, C) */
    float *attn_scratch;
    int64_t attn_scratch_floats;
    int nthreads;

    /* activation gradients */
    float *grad_mem;
    int64_t grad_floats;
    float *dx, *work, *dF, *datty, *dqkv, *dlogits; /* dF, datty, dlogits: one region */
    float *drel; /* the gradient of one layer's computed tables (rel_tab) */

    /* the last forward */
    int32_t *tokens, *targets;
    uint8_t *mask;
    int has_mask;
    int64_t lastB, lastT;
    int have_fwd, have_targets, dropped;
    int64_t nscored;

    rp_rng rng;

    /* the cached path (cache_mem holds all of it: the decode buffer above) */
    float *cache_mem;
    int64_t cache_floats;          /* its size (rp_buffer_new) */
    rpm_decoder dec;               /* the model's own (its lane's len: the positions cached) */
    float *c_scratch;              /* rp_attention_decode's scratch (softmax) */
    double *gen_p;                 /* generation: the candidates' weights (V) */
    gen_pair *gen_sort;            /* and the candidates (V) */
    float *dec_w;                  /* the transposed weights of decoding (layout above) */
    float *dec_rel;                /* relative modes: per layer, the tables decoding reads */
    float *dec_rope;               /* rotary modes: the cos/sin rows decoding reads, or NULL */
    int dec_rope_stale;            /* 1: dec_rope is to be built (frequencies new or changed) */
};

/* ---- model_config.c ---- */

/* ---- model_layout.c ---- */
/* a + b and a * b for sizes >= 0, saturating at INT64_MAX (counting passes of huge configs). */
int64_t rpm_sat_add(int64_t a, int64_t b);
int64_t rpm_sat_mul(int64_t a, int64_t b);
/* Builds the layout into m->info / m->lp, or only counts it when they are NULL: returns the
 * number of entries and sets m->nfloats and the off_* fields (sizes saturate at INT64_MAX, so
 * a huge config counts without overflow). */
int rpm_build_layout(rp_model *m);
/* Fills the parameter buffer from cfg.seed by each entry's init kind (layout order). */
void rpm_init_params(rp_model *m);

/* ---- model_memory.c ---- */
/* 1 when the decode state has no window: linear attention without an absolute table carries
 * its running state to any position (the rotations take any position), so it never re-encodes
 * (and its lanes have no window). */
int rpm_unbounded(const rp_model *m);
/* The floats of one layer's KV cache of one sequence (rp_attention_cache_floats for seq_len),
 * and the doubles of one layer's linear-attention state of one sequence. */
int64_t rpm_cache_layer_floats(const rp_model *m);
int64_t rpm_state_layer_doubles(const rp_model *m);
/* The bytes of a decoder of nl >= 1 lanes (the layout above) as rpm_decoder_new allocates it:
 * the counting pass of the plan that lays out the model's own decoder too (O(1) in nl;
 * saturates at INT64_MAX). */
int64_t rpm_decoder_bytes(const rp_model *m, int64_t nl);
/* A decoder of nl lanes of m in one new block (*block, for the caller to free), every lane
 * idle with an empty cache; RP_ERR_NOMEM. */
rp_status rpm_decoder_new(rp_model *m, rpm_decoder *d, int64_t nl, void **block);

/* ---- model_block.c: the transformer block, one definition for every path ---- */
/* The block's products and the head. */
typedef enum { RPM_PROJ_QKV, RPM_PROJ_OUT, RPM_PROJ_W1, RPM_PROJ_W2, RPM_PROJ_HEAD } rpm_proj;
/* Where a product lives: its weight (out, in) and bias as offsets into the parameters, its
 * sizes, and the offset of its transposed weight (in, out) in dec_w. */
typedef struct {
    int64_t w, b, in, out, dec;
} rpm_proj_info;
/* Product p of layer l (any l for RPM_PROJ_HEAD). */
rpm_proj_info rpm_proj_of(const rp_model *m, int64_t l, rpm_proj p);
/* Floats of one layer's transposed weights in dec_w: 3C^2 + C^2 + 2 C F (saturating). */
int64_t rpm_dec_layer_floats(const rp_model_cfg *c);
/* The table added to the embeddings, (seq_len, C) (pe learned: the parameters; sinusoidal: the
 * model's table), or NULL. */
const float *rpm_abs_table(const rp_model *m);

/* Where one block reads and writes its n rows (row-major, C = d_model, F = d_ff). Pointers may
 * repeat where a path reuses a buffer whose value is dead by then (decoding keeps one ln, one
 * proj and one mean / rstd for every LayerNorm, and the layer output in x).
 *   x (n, C)     the layer input (the rows an attend cut are moved within it)
 *   ln (n, C)    pre-norm: LN1(x), then LN2(res1)
 *   ln1_mean, ln1_rstd, ln2_mean, ln2_rstd (n)  the LayerNorms' statistics
 *   qkv (n, 3C), lse (attend's; may be NULL), y (n, C) the attention output
 *   proj (n, C)  the output of the attention's and of the feed-forward's output product
 *   mask1, mask2 (n, C)  dropout masks (with drop only)
 *   res1 (n, C)  x + drop(attention)
 *   h1 (n, C)    post-norm: LN1(res1), the feed-forward's input and residual
 *   fch (n, F)   the feed-forward's pre-activation; act (n, F) its activation
 *   res2 (n, C)  (pre-norm: res1, post-norm: h1) + drop(feed-forward): pre-norm's layer output
 *   out (n, C)   post-norm: LN2(res2), the layer output */
typedef struct {
    const float *x;
    float *ln, *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd;
    float *qkv, *lse, *y, *proj, *mask1, *res1, *h1, *fch, *act, *mask2, *res2, *out;
} rpm_block_bufs;

/* What differs between the paths that run the block: how a product is computed (the training
 * forward: rp_linear_forward on the parameters; decoding: rp_linear_rows_forward on dec_w) and
 * how attention is (the forward: over (B, T) sequences; decoding: each row's lane over its own
 * cache). ctx is the path's own. */
typedef struct {
    /* out (n, o) = in (n, i) W^T + b for product p of layer l, (o, i) its sizes (rpm_proj_of);
     * OVERWRITES out */
    void (*linear)(void *ctx, int64_t l, rpm_proj p, float *out, const float *in, int64_t n);
    /* the attention of layer l over the n rows of b->qkv into b->y (and b->lse); returns the
     * rows that go on through the block: n, or fewer (then the rows kept are rows 0 .. of b->x
     * and b->y; 0 ends the block there) */
    int64_t (*attend)(void *ctx, int64_t l, const rpm_block_bufs *b, int64_t n);
} rpm_block_ops;

/* Block l over n rows (the model's norm, activation and dropout; drop != 0: dropout on both
 * branches, masks drawn from the model's rng): LayerNorm, the qkv product, attention, the
 * output product and residual, LayerNorm, the feed-forward and residual (model.h). Returns the
 * rows that went through (attend's count). */
int64_t rpm_block_forward(rp_model *m, const rpm_block_ops *ops, void *ctx, int64_t l,
                          const rpm_block_bufs *b, int64_t n, int drop);
/* The head over n rows of the last layer's output x: pre-norm's final LayerNorm (into ln, with
 * its statistics in mean, rstd), then logits (n, V) by the head product. */
void rpm_head_forward(rp_model *m, const rpm_block_ops *ops, void *ctx, float *logits,
                      const float *x, float *ln, float *mean, float *rstd, int64_t n);
/* out = relu / gelu(inp) over n floats (the cfg's activation); the backward OVERWRITES dinp
 * with dout * act'(inp) (the _set kernels: dinp may be dout). */
void rpm_act_forward(const rp_model *m, float *out, const float *inp, int64_t n);
void rpm_act_backward_set(const rp_model *m, float *dinp, const float *dout, const float *inp,
                          int64_t n);

/* ---- model_freq.c: learned frequencies (learn_freq) ---- */
/* d_rot/2 of the widest placement m's scheme rotates (the learned table's width). */
int64_t rpm_freq_half(const rp_model *m);
/* The parameter's values into freq_buf and freq_eff (and dec_rope marked stale when a value
 * changed): before a forward pass or a decoded sequence reads them. No-op without learn_freq. */
void rpm_freq_refresh(rp_model *m);
/* The parameter OVERWRITTEN with the scheme's frequencies (m->freq: its own theta or mix, else
 * the standard theta of the widest placement, axial's per block), rounded to float; unused rows
 * 0; then refreshed. No-op without learn_freq. */
void rpm_freq_reset(rp_model *m);
/* ACCUMULATES into the parameter's gradient the terms of one layer: qkv [B x T x 3C] the
 * attention's unrotated inputs and dqkv their gradients, out [B x T x C] its output and dout
 * that output's gradient (model_freq.c's header gives the formula). No-op without learn_freq. */
void rpm_freq_grad(rp_model *m, const float *qkv, const float *dqkv, const float *out,
                   const float *dout, int64_t B, int64_t T);

/* ---- model_rel.c: the relative modes (shaw, xl, t5, deberta, alibi) ---- */
/* Floats of one layer's computed tables (layer_acts rel_tab), of the model-level sinusoid
 * xl_table, of the gradient scratch drel, and of one layer's decode tables (dec_rel). */
int64_t rpm_rel_act_floats(const rp_model *m);
int64_t rpm_rel_table_floats(const rp_model *m);
int64_t rpm_rel_grad_floats(const rp_model *m);
int64_t rpm_rel_dec_floats(const rp_model *m);
/* Fills the sinusoid xl_table (once, at creation). */
void rpm_rel_init(rp_model *m);
/* Forward: the tables of layer l for a self-attention call of T positions, computed from the
 * current parameters where they are projections (xl, deberta) into the layer's activations, into
 * *rel (pointers into the parameters or the activations). */
void rpm_rel_forward(rp_model *m, int64_t l, int64_t T, rp_attn_rel *rel);
/* The tables of layer l of the last forward (no computation), for the backward and
 * rp_model_attention_weights. */
void rpm_rel_tables(const rp_model *m, int64_t l, rp_attn_rel *rel);
/* Backward, around rp_attention_backward of layer l: rpm_rel_grad_begin points *g at the
 * parameter gradients (accumulate) or the zeroed drel scratch; rpm_rel_grad_end carries drel
 * back through the projections into the parameter gradients. */
void rpm_rel_grad_begin(rp_model *m, int64_t l, int64_t T, rp_attn_rel_grad *g);
void rpm_rel_grad_end(rp_model *m, int64_t l, int64_t T);
/* Decoding: the tables of every layer from the current parameters into dec_rel (with the decode
 * weights, at a sequence start), and those of layer l into *rel. */
void rpm_rel_decode_refresh(rp_model *m);
void rpm_rel_decode_tables(const rp_model *m, int64_t l, rp_attn_rel *rel);

/* ---- model_forward.c (also used by the backward pass and decoding) ---- */
/* The attention cfg of the model's scheme (queries from position q_offset). */
rp_attn_cfg rpm_attn_cfg(const rp_model *m, int64_t q_offset);
rp_linattn_cfg rpm_linattn_cfg(const rp_model *m, int64_t q_offset);
/* Threads for the attention kernel at this T (bounded by the scratch sized at creation). */
int rpm_attn_threads(const rp_model *m, int64_t T);
/* The residual stream after layer l (-1: the embedding output) of the last forward. */
float *rpm_layer_out(const rp_model *m, int64_t l);

#endif
