/* Multi-head scaled dot-product attention with selectable positional encodings.
 *
 * Layout: q is [B, T, H, D], k is [B, S, H, D], v is [B, S, H, Dv], out is [B, T, H, Dv],
 * att is [B, H, T, S]. Keys/values sit at positions 0 .. S-1, queries at q_offset .. q_offset+T-1
 * (q_offset = S - T for self-attention over a window, larger for chunks of a longer stream).
 * Under the causal mask query n sees keys i <= n.
 *
 * pe modes (what each does is the mode table of pe.h; the kernels follow cfg.scheme, the mode's
 * rp_pe_scheme):
 *  NONE, SINUSOIDAL, LEARNED: plain attention (absolute encodings are added to embeddings
 *      elsewhere).
 *  ROPE: q and k rotated by their positions (first d_rot_q and d_rot_k features).
 *  ROPER: as ROPE, and v_i rotated by +i*theta (first d_rot_v features), weighted sum, then the
 *      result o_n rotated by -n*theta (first d_rot_o): o_n = sum_i a_{n,i} R((i-n)theta) v_i.
 *  ROPER_LEGACY: the labml code of 2022-05-31 .. 2024-06-20, which rotated v twice:
 *      o_n = sum_i a_{n,i} R((2i-n)theta) v_i.
 *  With a rotate mask the rotary modes rotate any subset of q, k, v and o instead (pe.h), each by
 *  its own width.
 *  SHAW, XL, T5, DEBERTA, ALIBI: relative-position terms added to the scores (and, for shaw, to
 *      the values), from tables the caller passes in cfg.tables: see "relative-position terms"
 *      below.
 */
#ifndef RP_ATTENTION_H
#define RP_ATTENTION_H

#include <stdint.h>

#include "pe.h"
#include "rope_freq.h"
#include "rope.h"
#include "tensor.h"

/* ---- relative-position terms (pe shaw, xl, t5, deberta, alibi) ---------------------------------
 *
 * Query t sits at n = pos_offset + q_offset + t, key i at pos_offset + i; these modes see only the
 * distance n - i = q_offset + t - i (pos_offset cancels). With s = cfg->scale, head h:
 *
 *   score(n, i) = s [ (q_n + u_h) . k_i + (q_n + w_h) . Ek_h[r(n,i)] + k_i . Eq_h[r'(n,i)] ]
 *                 + bias_h(n, i)
 *   out_n       = sum_i a_{n,i} (v_i + Ev[r(n,i)]),   a_{n,.} = softmax of score(n, .) over the
 *                                                     keys n sees (the causal mask as for the others)
 *
 * Each mode has some of the terms; the others are zero (their tables are not read):
 *
 *  shaw (Shaw et al. 2018; RoFormer eq. 5, f_k = W_k x + p^k_r, f_v = W_v x + p^v_r):
 *      r = clip(i - n, -k, k) + k with k = rel_clip: 2k + 1 rows. Ek = a^K = rel->ek [2k+1, D] and
 *      Ev = a^V = rel->ev [2k+1, Dv], one table for all heads (as in the paper).
 *  xl (Transformer-XL, Dai et al. 2019; RoFormer eq. 7):
 *      q.k + q.(W_kR R_{n-i}) + u.k + v.(W_kR R_{n-i}) (terms a, b, c, d of the paper), scaled.
 *      Ek_h[r] = the projected relative encoding (W_kR R_{n-i}) of head h, computed by the caller:
 *      rel->ek [rows, H, D], row r for the distance n - i = lo + r, where rows and lo come from
 *      rp_attention_rel_rows (the distances of the call's visible pairs, ascending). u = rel->u
 *      and the paper's v = rel->w, [H, D] each.
 *  t5 (Raffel et al. 2020): bias_h(n, i) = rel->bias[h * buckets + rp_attention_t5_bucket(i - n,
 *      !causal, rel_buckets, rel_max_distance)], rel->bias [H, buckets].
 *  deberta (He et al. 2020; RoFormer eq. 10, content-to-position and position-to-content):
 *      with delta(a, b) = clamp(a - b + k, 0, 2k - 1) (0 for a - b <= -k, 2k - 1 for a - b >= k),
 *      c2p q_n . K^r_h[delta(n, i)] and p2c k_i . Q^r_h[delta(i, n)]: Ek = K^r = rel->ek and
 *      Eq = Q^r = rel->eq, [2k, H, D] each. The paper's 1/sqrt(3d) is the caller's cfg->scale.
 *  alibi (Press et al. 2022): bias_h(n, i) = -m_h |n - i| (under the causal mask n - i >= 0), the
 *      slopes m_h of rp_attention_alibi_slopes. No tables.
 *
 * Tables are row-major float32, read only, owned by the caller; they must hold the rows above
 * (nothing checks their sizes). The kernels compute no T x S x D tensor and no T x S matrix: per
 * query block the products with the table rows its distances reach, gathered into each tile. */

/* The tables of cfg->tables (NULL where the mode does not use them; shapes as above). */
typedef struct rp_attn_rel {
    const float *ek;   /* shaw a^K [2k+1, D]; xl W_kR R [rows, H, D]; deberta K^r [2k, H, D] */
    const float *eq;   /* deberta Q^r [2k, H, D] */
    const float *ev;   /* shaw a^V [2k+1, Dv] */
    const float *u;    /* xl u [H, D] */
    const float *w;    /* xl v [H, D] (the paper's v; w here, v is the values) */
    const float *bias; /* t5 [H, buckets] */
} rp_attn_rel;

/* Gradients of the tables for rp_attention_backward: same shapes as the tables of rp_attn_rel,
 * ACCUMULATED (+=). NULL members (or a NULL struct) are not computed. The sums over the batch and
 * the heads run in a fixed order: bitwise the same for any nthreads. */
typedef struct rp_attn_rel_grad {
    float *ek, *eq, *ev, *u, *w, *bias;
} rp_attn_rel_grad;

/* Member t (RP_TAB_* of pe.h: ek, eq, ev, u, w, bias) of rel and of g. */
static inline const float **rp_attn_rel_member(rp_attn_rel *rel, int t)
{
    const float **m[RP_TAB_COUNT] = {&rel->ek, &rel->eq, &rel->ev, &rel->u, &rel->w, &rel->bias};
    return m[t];
}
static inline float **rp_attn_rel_grad_member(rp_attn_rel_grad *g, int t)
{
    float **m[RP_TAB_COUNT] = {&g->ek, &g->eq, &g->ev, &g->u, &g->w, &g->bias};
    return m[t];
}

/* Limits of rel_clip and rel_buckets (rp_attention_check, the model config). */

typedef struct rp_attn_cfg {
    /* The positional scheme, resolved (pe.h's rp_pe_scheme, built by rp_pe_scheme_init: a model's
     * rp_model_cfg_scheme, rp.attention's rp_attention_plan): the mode, the placements rotated
     * (every rotary mode's own or the placement ablation's, RP_ROT_* bits), the width of each
     * (even, at most D for q and k and Dv for v and o; 0 where not rotated), v's angle factor,
     * the output's sign, base and pairing. */
    rp_pe_scheme scheme;
    int causal;
    double scale;           /* usually 1/sqrt(D) */
    int64_t q_offset;       /* position of the first query */
    /* Every position (queries and keys) shifted by pos_offset >= 0: key i sits at pos_offset + i,
     * query t at pos_offset + q_offset + t (the shift test of the placement ablation; the mask
     * and the relative distances do not change). */
    int64_t pos_offset;
    /* Relative modes (the terms above): their limits (pe.h: clip k for shaw and deberta, buckets
     * and max_distance for t5; the other modes ignore them) and the tables (NULL: none; required
     * by shaw, xl, t5, deberta). */
    rp_rel_cfg rel;
    const rp_attn_rel *tables;
    /* Rotary modes: the frequency scheme (context extension, xPos, user frequencies or angles;
     * core/nn/rope_freq.h), NULL = the standard theta of `scheme.base`. YaRN's temperature
     * multiplies `scale`. Borrowed for the call. */
    const rp_rope_freq *freq;
    /* Rotary modes: explicit positions, one row of A = rp_rope_freq_axes(freq) integers per
     * sequence index (vector positions when freq->axes.n > 1): key i sits at pos[i * A .. i * A +
     * A), query t at row q_offset + t (the same rows for every batch row), for pos_rows rows
     * (>= S and >= q_offset + T; decoding: >= cap). Entries within +-2^53 (>= 0 and below the
     * table's rows with user angles). NULL: index i sits at pos_offset + i on every axis (with
     * axes, Qwen2-VL's text positions (t, t, t)). pos excludes pos_offset > 0. Borrowed. */
    const int64_t *pos;
    int64_t pos_rows;
    /* rp_attention_decode only: the cos/sin rows of positions 0 .. cap-1 that
     * rp_attention_decode_rows built for this cfg (its scheme and freq) and the call's cap,
     * read in place of computing the position's row; NULL: each call computes its row. Borrowed;
     * the other calls ignore it. */
    const float *rope_rows;
} rp_attn_cfg;

/* The rows of the tables ek, eq, ev that cfg's mode needs for a call of T queries over S keys
 * (cfg->q_offset, cfg->causal): shaw 2 rel_clip + 1, deberta 2 rel_clip, xl one row per distance
 * n - i of the call's visible pairs, 0 for the other modes (t5's bias is [H, buckets]). *lo (when
 * not NULL) gets the distance of xl's row 0 (0 for the other modes): under the causal mask
 * lo = max(0, q_offset - (S - 1)), else q_offset - (S - 1); the last row is q_offset + T - 1. */
int64_t rp_attention_rel_rows(const rp_attn_cfg *cfg, int64_t T, int64_t S, int64_t *lo);

/* The shape of table t (RP_TAB_*: ek, eq, ev, u, w, bias) of cfg's mode for a call of T queries
 * over S keys, H heads, D and Dv features: its dims into shape (2 or 3 of them, as above), their
 * number returned; 0 when the mode does not read the table. */
int rp_attention_rel_shape(const rp_attn_cfg *cfg, int t, int64_t T, int64_t S, int64_t H,
                           int64_t D, int64_t Dv, int64_t shape[3]);

/* T5's bucket of the relative position rel = i - n, exactly as _relative_position_bucket of
 * HF transformers' T5Attention: bidirectional halves the buckets and puts rel > 0 in the upper
 * half; of the (remaining) nb buckets, distances below nb / 2 get their own, the others
 * nb / 2 + trunc(logf(d / (nb/2)) / log(max_distance / (nb/2)) * (nb - nb/2)) in float32 as
 * there, at most nb - 1. Needs buckets >= 2 (>= 4 bidirectional) and max_distance > nb / 2
 * (rp_attention_check). */
int64_t rp_attention_t5_bucket(int64_t rel, int bidirectional, int64_t buckets,
                               int64_t max_distance);

/* ALiBi's head slopes (Press et al. 2022, their get_slopes) into slopes[0 .. H): H a power of two:
 * m_h = 2^(-8 (h + 1) / H); otherwise with p the largest power of two below H, the p slopes for p
 * heads, then every other slope of the 2p list (m = 2^(-4 (2j + 1) / p), j = 0 .. H - p - 1).
 * In double; H >= 1. */
void rp_attention_alibi_slopes(double *slopes, int64_t H);

/* Threads: the (b, h) pairs are spread over nthreads OpenMP threads (more than B * H is fine).
 * Results are bitwise the same for any nthreads. */

/* Floats of scratch that rp_attention_forward / _backward need for these dims and cfg's mode when
 * run with nthreads threads (each thread gets its own slice; the relative modes add per-thread
 * table products and, for the backward's table gradients, one slice per (b, h) pair); never
 * decreases as B, T, S or nthreads grow. cfg NULL: a mode without relative terms. */
int64_t rp_attention_scratch_floats(const rp_attn_cfg *cfg, int64_t B, int64_t T, int64_t S,
                                    int64_t H, int64_t D, int64_t Dv, int nthreads);

/* The operands of rp_attention_forward and rp_attention_backward (and of linear attention's
 * rp_linattn_forward and rp_linattn_backward, core/nn/linear_attention.h, which read the members
 * their comments there name): the dims, the strided rows of q, k, v and out (and of their
 * gradients), the outputs, the scratch and the threads.
 *
 * Strided rows: element (b, t, h, d) of q, k, v, out (and of dq, dk, dv, dout) is at
 * p[(b * L + t) * ld + h * W + d], with L = T (q, out) or S (k, v) and W = D (q, k) or Dv (v, out).
 * A contiguous [B, L, H, W] tensor has ld = H * W; the model's fused qkv buffer [B, T, 3C] has
 * ld = 3C with k = qkv + C and v = qkv + 2C. Members a pass does not use are ignored (0, NULL). */
typedef struct rp_attn_io {
    int64_t B, T, S, H, D, Dv;
    const float *q, *k, *v;
    int64_t ldq, ldk, ldv; /* the row strides of q and dq, k and dk, v and dv */
    float *out;            /* [B, T, H, Dv] rows ldo apart: the forward OVERWRITES it, the
                            * backward reads it (the forward's) */
    int64_t ldo;           /* the row stride of out and dout */
    float *lse;            /* [B, H, T]: each query's log-sum-exp of its scaled scores over the
                            * keys it sees; the forward writes it when not NULL, the backward
                            * reads it */
    float *att;            /* forward, when not NULL: the weights [B, H, T, S], 0 on masked keys */
    const float *dout;     /* backward: the gradient of out */
    float *dq, *dk, *dv;   /* backward: ACCUMULATED (+=), or OVERWRITTEN with set; they may lie
                            * in one fused buffer (they never overlap) */
    int set;               /* backward: 1 OVERWRITES dq, dk and dv (every element of their rows'
                            * D or Dv features: 0 + its gradient, the bits accumulating onto
                            * zeros gives, so a caller need not clear them), 0 ACCUMULATES */
    const rp_attn_rel_grad *drel; /* backward: the table gradients, ACCUMULATED (NULL: none) */
    float *scratch;        /* rp_attention_scratch_floats(cfg, B, T, S, H, D, Dv, nthreads)
                            * (linear attention: rp_linattn_scratch_floats) */
    int nthreads;          /* >= 1 */
    /* Linear attention only (rp_linattn_forward), NULL otherwise; the softmax kernels ignore
     * them. Operands, not configuration: memory the call reads and writes. */
    double *state;         /* the recurrent state (rp_linattn_state_doubles per sequence), read
                            * and written back in place (NULL: a zero initial state, nothing
                            * saved) */
    float *min_den;        /* when not NULL: receives the smallest denominator */
} rp_attn_io;

/* The forward pass (flash attention: tiles of at most 32 queries x 128 keys with an online
 * softmax, nothing of size T x S stored): OVERWRITES io->out, and io->lse and io->att where not
 * NULL (att only on request: it costs one more score product). Dims and cfg must already be valid
 * (rp_attention_check). With q_offset >= 0 every query sees at least key 0, so no row is fully
 * masked. */
void rp_attention_forward(const rp_attn_io *io, const rp_attn_cfg *cfg);

/* The backward pass: dq += dL/dq, dk += dL/dk, dv += dL/dv (ACCUMULATES; io->set: =, OVERWRITES), given io->dout, the
 * forward's out and lse and its inputs q, k, v (the same io and cfg). The weights are recomputed
 * tile by tile from q, k and lse (FlashAttention-2's backward: one more Q K^T product, nothing of
 * size T x S stored). RoPE's backward is the reverse rotation of the gradient; RoPER's output
 * rotation by -n is undone on dout by +n. Relative modes: io->drel (NULL: none) ACCUMULATES the
 * gradients of cfg->tables's tables (rp_attn_rel_grad); dq and dk include the table terms either
 * way. */
void rp_attention_backward(const rp_attn_io *io, const rp_attn_cfg *cfg);

/* Decoding with a KV cache: one new token at position pos of one sequence, through the same
 * query-block code as rp_attention_forward (scores, online softmax, weighted sum, output
 * rotation) over the cache where it lies.
 * cache holds one layer of one sequence, rp_attention_cache_floats(cap, H, D, Dv) floats (that
 * count saturates at INT64_MAX) for positions 0 .. cap-1 (pos < cap): per head h, at h * (D * capp + cap * Dvp), the keys k_i
 * rotated by +i theta (where the mode rotates them) transposed, element (d, i) at [d * capp + i],
 * then the values v_i rotated by +v_angle i theta, element (i, e) at [D * capp + i * Dvp + e]
 * (capp = rp_attention_cache_ld(cap); Dvp: Dv rounded up to the kernels' vector width,
 * rp_vl_round; the padding of a value row is 0). It stores the new k (H * D floats) and v
 * (H * Dv) at position pos this way, rotates q (H * D) by +pos IN PLACE, and OVERWRITES out (H * Dv) with the causal attention of
 * that query over positions 0 .. pos, rotated by o_sign pos theta where the mode says (the
 * cos/sin rows from cfg->rope_rows when set, else computed for pos). The
 * cache's positions past pos never affect the result (they need no initialisation). cfg: scheme,
 * scale, freq and pos as for the forward (checked by the caller); causal and q_offset are
 * ignored. Relative modes: cfg's rel_* and tables as for the forward of T = 1 query
 * at q_offset pos over S = pos + 1 keys under the causal mask (xl: rel->ek has pos + 1 rows, row r
 * for the distance r). scratch holds rp_attention_decode_scratch_floats(cfg, cap, H, D, Dv) floats
 * (cfg NULL: a mode without relative terms). Single-threaded. */
int64_t rp_attention_cache_floats(int64_t cap, int64_t H, int64_t D, int64_t Dv);

/* The floats from one key row of a cache to the next (capp above): cap rounded up to the vector
 * width (rp_vl_round), plus 16 (one 64-byte line) when that is a multiple of 256 floats: rows a
 * multiple of 1 KiB apart put the column a decode step writes, and the columns it reads, of every
 * row (and of every lane's cache) in the same few cache sets, which evict one another (seq_len
 * 512: two sets of each 4 KiB page offset; the S model's 64 lanes decoded at about the speed of
 * 16). The forward and backward kernels lay out their transposed keys and values (S columns)
 * with the same stride. cap >= 1 (below 2^62). */
int64_t rp_attention_cache_ld(int64_t cap);

/* The cos/sin rows decoding reads (cfg->rope_rows), built once for positions 0 .. cap-1 instead
 * of one row per token: for each placement cfg's mode rotates, in the order q, k, v, o, its cos
 * table [cap x d_rot/2] then its sin table [cap x d_rot/2] (d_rot that placement's width), from
 * one rp_rope_freq_tables call over the positions with the placement's angle factor (v_angle for
 * v, else 1) and xPos side (+1 for q and o, -1 for k and v): row p holds the bits a call for
 * position p alone gives (every scaling, dynamic NTK included, is a function of the position).
 * rp_attention_decode_rows_floats gives their floats (sum of cap x d_rot over the rotated
 * placements; 0 when nothing rotates; saturates at INT64_MAX); rp_attention_decode_rows
 * OVERWRITES rows with them. cfg as for rp_attention_decode (checked by the caller, cfg->freq
 * valid for positions 0 .. cap-1). */
int64_t rp_attention_decode_rows_floats(const rp_attn_cfg *cfg, int64_t cap);
void rp_attention_decode_rows(float *rows, const rp_attn_cfg *cfg, int64_t cap);

int64_t rp_attention_decode_scratch_floats(const rp_attn_cfg *cfg, int64_t cap, int64_t H,
                                           int64_t D, int64_t Dv);
void rp_attention_decode(float *out, float *scratch, float *q, const float *k, const float *v,
                         float *cache, int64_t cap, int64_t pos, int64_t H, int64_t D, int64_t Dv,
                         const rp_attn_cfg *cfg);

/* Validates tensors and cfg for the tensor-level call: q [B,T,H,D], k [B,S,H,D], v [B,S,H,Dv]
 * (all 4-D, sizes >= 1), the scheme (resolved: rp_pe_scheme_check; a known pairing; base > 0 and
 * finite where it rotates; the rotated widths even, >= 2, at most D for q/k and Dv for v/o),
 * q_offset >= 0, pos_offset >= 0, scale finite; relative modes: rel_clip in
 * 1 .. RP_REL_MAX_CLIP (shaw, deberta), rel_buckets in 2 .. RP_REL_MAX_BUCKETS (>= 4 without the
 * causal mask) and rel_max_distance > buckets / 2 (causal) or > buckets / 4 (t5), and the tables
 * the mode reads present in cfg->tables (their sizes are not checked: rp_attention_rel_rows).
 * Returns RP_ERR_SHAPE / RP_ERR_ARG with a message naming the problem. */
rp_status rp_attention_check(const rp_tensor *q, const rp_tensor *k, const rp_tensor *v,
                             const rp_attn_cfg *cfg);

/* cfg->pos (not NULL) for a call of T queries over S keys (part of rp_attention_check): pos_offset
 * 0, at least max(S, q_offset + T) rows, entries within +-2^53 (and >= 0 with user angles);
 * *qlast and *klast get the largest entry read (the last row the angle table needs). RP_ERR_ARG
 * ("positions hold 2 rows; this call reads 3 (keys 0..2, queries 0..2)"). */
rp_status rp_attention_check_positions(const rp_attn_cfg *cfg, int64_t T, int64_t S,
                                       int64_t *qlast, int64_t *klast);

/* Tensor-level forward: checks, makes inputs contiguous, allocates out [B,T,H,Dv] and
 * att [B,H,T,S] (caller releases both). Relative modes read their tables from cfg->tables. */
rp_status rp_attention(rp_tensor *out, rp_tensor *att, const rp_tensor *q, const rp_tensor *k,
                       const rp_tensor *v, const rp_attn_cfg *cfg);

#endif
