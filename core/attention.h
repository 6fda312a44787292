/* Multi-head scaled dot-product attention with selectable positional encodings.
 *
 * Layout: q is [B, T, H, D], k is [B, S, H, D], v is [B, S, H, Dv], out is [B, T, H, Dv],
 * att is [B, H, T, S]. Keys/values sit at positions 0 .. S-1, queries at q_offset .. q_offset+T-1
 * (q_offset = S - T for self-attention over a window, larger for chunks of a longer stream).
 * Under the causal mask query n sees keys i <= n.
 *
 * pe modes (what each does is the mode table of pe.h; the kernels follow its rp_pe_scheme):
 *  NONE, SINUSOIDAL, LEARNED: plain attention (absolute encodings are added to embeddings
 *      elsewhere).
 *  ROPE: q and k rotated by their positions (first d_rot_qk features).
 *  ROPER: as ROPE, and v_i rotated by +i*theta (first d_rot_v features), weighted sum, then the
 *      result o_n rotated by -n*theta: o_n = sum_i a_{n,i} R((i-n)theta) v_i.
 *  ROPER_LEGACY: the labml code of 2022-05-31 .. 2024-06-20, which rotated v twice:
 *      o_n = sum_i a_{n,i} R((2i-n)theta) v_i.
 *  With cfg.rotate the rotary modes rotate any subset of q, k, v and o instead (pe.h), each by its
 *  own width (d_rot_q, d_rot_k, d_rot_o when set).
 */
#ifndef RP_ATTENTION_H
#define RP_ATTENTION_H

#include <stdint.h>

#include "pe.h"
#include "rope.h"
#include "tensor.h"

typedef struct rp_attn_cfg {
    rp_pe pe;
    int causal;
    double scale;           /* usually 1/sqrt(D) */
    double base;            /* rope base, RP_ROPE_BASE */
    rp_pairing pairing;
    int64_t d_rot_qk;       /* rotated q/k features (even, <= D) for rope modes */
    int64_t d_rot_v;        /* rotated v features (even, <= Dv) for roper modes */
    int64_t q_offset;       /* position of the first query */
    /* The placement ablation (rotary modes): rotate = the placements rotated (RP_ROT_* bits of
     * pe.h), 0 = the mode's own. Widths: q takes d_rot_q, k d_rot_k, o d_rot_o when those are
     * > 0; otherwise q and k take d_rot_qk and o takes d_rot_v. */
    int rotate;
    int64_t d_rot_q, d_rot_k, d_rot_o;
    /* Every position (queries and keys) shifted by pos_offset >= 0: key i sits at pos_offset + i,
     * query t at pos_offset + q_offset + t (the shift test of the placement ablation; the mask
     * and the relative distances do not change). */
    int64_t pos_offset;
} rp_attn_cfg;

/* The scheme cfg asks for (pe, rotate and the widths resolved as above); RP_ERR_ARG as
 * rp_pe_scheme_init. Widths are not checked (rp_attention_check does). */
rp_status rp_attn_scheme(const rp_attn_cfg *cfg, rp_pe_scheme *s);

/* Strided rows: element (b, t, h, d) of q, k, v, out (and of their gradients) is at
 * p[(b * L + t) * ld + h * W + d], with L = T (q, out) or S (k, v) and W = D (q, k) or Dv (v, out).
 * A contiguous [B, L, H, W] tensor has ld = H * W; the model's fused qkv buffer [B, T, 3C] has
 * ld = 3C with k = qkv + C and v = qkv + 2C. */

/* Threads: the (b, h) pairs are spread over nthreads OpenMP threads (more than B * H is fine).
 * Results are bitwise the same for any nthreads. */

/* Floats of scratch that rp_attention_forward / _backward need for these dims when run with
 * nthreads threads (each thread gets its own slice); never decreases as T, S or nthreads grow. */
int64_t rp_attention_scratch_floats(int64_t T, int64_t S, int64_t D, int64_t Dv, int nthreads);

/* The forward pass (flash attention: tiles of at most 32 queries x 128 keys with an online
 * softmax, nothing of size T x S stored). Overwrites out; lse ([B, H, T]: each query's
 * log-sum-exp of its scaled scores over the keys it sees, what the backward needs) when not
 * NULL; att ([B, H, T, S], the softmax weights, 0 on masked keys) when not NULL — only on request,
 * it costs one more score product. scratch holds rp_attention_scratch_floats(T, S, D, Dv,
 * nthreads) floats; the (b, h) pairs are spread over nthreads OpenMP threads (nthreads >= 1).
 * Dims and cfg must already be valid (rp_attention_check). With q_offset >= 0 every query sees at
 * least key 0, so no row is fully masked. */
void rp_attention_forward(float *out, int64_t ldo, float *lse, float *att, float *scratch,
                          const float *q, int64_t ldq, const float *k, int64_t ldk, const float *v,
                          int64_t ldv, int64_t B, int64_t T, int64_t S, int64_t H, int64_t D,
                          int64_t Dv, const rp_attn_cfg *cfg, int nthreads);

/* The backward pass: dq += dL/dq, dk += dL/dk, dv += dL/dv (ACCUMULATES; same strides as q, k,
 * v), given dout and the forward's out (both rows ldo apart), its lse and its inputs q, k, v. The
 * weights are recomputed tile by tile from q, k and lse (FlashAttention-2's backward: one more
 * Q K^T product, nothing of size T x S stored). RoPE's backward is the reverse rotation of the
 * gradient; RoPER's output rotation by -n is undone on dout by +n. dq, dk, dv may point into one
 * fused buffer (they never overlap). */
void rp_attention_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                           const float *out, int64_t ldo, const float *lse, const float *q,
                           int64_t ldq, const float *k, int64_t ldk, const float *v, int64_t ldv,
                           int64_t B, int64_t T, int64_t S, int64_t H, int64_t D, int64_t Dv,
                           const rp_attn_cfg *cfg, int nthreads);

/* Decoding with a KV cache: one new token at position pos of one sequence, through the same
 * query-block code as rp_attention_forward (scores, online softmax, weighted sum, output
 * rotation) over the cache where it lies.
 * cache holds one layer of one sequence, rp_attention_cache_floats(cap, H, D, Dv) floats (that
 * count saturates at INT64_MAX) for positions 0 .. cap-1 (pos < cap): per head h, at h * (D * capp + cap * Dvp), the keys k_i
 * rotated by +i theta (where the mode rotates them) transposed, element (d, i) at [d * capp + i],
 * then the values v_i rotated by +v_angle i theta, element (i, e) at [D * capp + i * Dvp + e]
 * (capp, Dvp: cap and Dv rounded up to the kernels' vector width, rp_vl_round; the padding of
 * a value row is 0). It stores the new k (H * D floats) and v (H * Dv) at position pos this way,
 * rotates q (H * D) by +pos IN PLACE, and OVERWRITES out (H * Dv) with the causal attention of
 * that query over positions 0 .. pos, rotated by o_sign pos theta where the mode says. The
 * cache's positions past pos never affect the result (they need no initialisation). cfg: pe, scale,
 * base, pairing, d_rot_qk, d_rot_v as for the forward (checked by the caller); causal and
 * q_offset are ignored. scratch holds rp_attention_decode_scratch_floats(cap, H, D, Dv) floats.
 * Single-threaded. */
int64_t rp_attention_cache_floats(int64_t cap, int64_t H, int64_t D, int64_t Dv);
int64_t rp_attention_decode_scratch_floats(int64_t S, int64_t H, int64_t D, int64_t Dv);
void rp_attention_decode(float *out, float *scratch, float *q, const float *k, const float *v,
                         float *cache, int64_t cap, int64_t pos, int64_t H, int64_t D, int64_t Dv,
                         const rp_attn_cfg *cfg);

/* Validates tensors and cfg for the tensor-level call: q [B,T,H,D], k [B,S,H,D], v [B,S,H,Dv]
 * (all 4-D, sizes >= 1), the rotated widths (even, >= 2, at most D for q/k and Dv for v/o), the
 * rotate mask, q_offset >= 0, pos_offset >= 0, scale finite.
 * Returns RP_ERR_SHAPE / RP_ERR_ARG with a message naming the problem. */
rp_status rp_attention_check(const rp_tensor *q, const rp_tensor *k, const rp_tensor *v,
                             const rp_attn_cfg *cfg);

/* Tensor-level forward: checks, makes inputs contiguous, allocates out [B,T,H,Dv] and
 * att [B,H,T,S] (caller releases both). */
rp_status rp_attention(rp_tensor *out, rp_tensor *att, const rp_tensor *q, const rp_tensor *k,
                       const rp_tensor *v, const rp_attn_cfg *cfg);

#endif
