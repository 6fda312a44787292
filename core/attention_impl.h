/* What attention.c (the flash kernels) and attention_rel.c (the relative-position terms of pe
 * shaw, xl, t5, deberta, alibi) share: the block sizes, a thread's slots, the call context and
 * the hooks attention.c calls where a mode has relative terms. Internal to core/. */
#ifndef RP_ATTENTION_IMPL_H
#define RP_ATTENTION_IMPL_H

#include <stdint.h>

#include "attention.h"
#include "simd.h"

/* Queries and keys per block (BC a multiple of every RP_VL). Of 16..128 queries x 32..256 keys,
 * 32 x 128 measured fastest (B 16, T 512, H 4, d_k 32: 10% under 64 x 64). */
#define BR 32
#define BC 128

static inline int64_t row_block(int64_t T) { return T < BR ? T : BR; }

/* A thread's slots of the relative terms (attention_rel.c says which mode uses which), and the
 * state of the current head and query block. */
typedef struct {
    float *EkT, *EkR, *Ev, *QE, *W, *WB, *dYE, *Qw, *dQw, *EqT, *EqR, *KE, *Hk, *pkey, *brow, *gd;
    const float *q, *w; /* the head's q rows (ldq apart) and w row, for Q'_w = s (q + w) */
    int64_t ldq;
    float *pair;    /* the (b, h) pair's slice of table gradients (backward) */
    int64_t blo, nb; /* the query block's table rows: blo .. blo + nb - 1 */
    const float *qw; /* the query block's Q'_w rows (Dp apart) */
} rel_slots;

/* The slots of a thread slice (floats): Q [T, Dp], K [Sp, Dp], Kt [D, Sp], V [Sp, Dvp] (the
 * forward's V' or the backward's transpose [Dv, Sp]), dK [Sp, Dp], dV [Sp, Dvp], and per query
 * block P [rb, BC], dP [rb, BC], O [rb, Dvp] (the forward's output accumulator, the backward's
 * dY), dQ [rb, Dp], m [rb], l [rb] (the forward's running max and sum, the backward's L and
 * Drow); then the relative slots. */
typedef struct {
    float *Q, *K, *Kt, *V, *dK, *dV, *P, *dP, *O, *dQ, *m, *l;
    int64_t ldkt; /* Kt's row stride: Sp here, the cache's in the decode entry */
    rel_slots rel;
} slots;

/* The relative terms of a call (kind RP_REL_NONE: none, every hook is skipped). Table rows are
 * indexed by the distance delta = n - i: idx(delta) = clamp(a + sg delta, 0, R - 1), for Ek (and
 * shaw's Ev) with (ka, ks, kR), for Eq with (qa, qs, qR); the call's distances dlo .. dhi reach
 * the rows ilo .. ilo + ne - 1 of Ek and jlo .. jlo + nq - 1 of Eq. Distance rows (t5, alibi
 * bias; t5 buckets) are indexed by e = dhi - delta, which grows with the key. */
typedef struct {
    rp_rel_kind kind;
    const rp_attn_rel *tab;
    const rp_attn_rel_grad *grad; /* backward: the table gradients asked for (NULL: none) */
    int64_t H, D, Dv;
    int64_t dlo, dhi, nd;
    int64_t ka, ks, kR, ilo, ne, ek_ldr, ek_ldh, ldE;
    int64_t qa, qs, qR, jlo, nq, ldQ;
    int64_t buckets;
    const float *bkt;  /* t5: the bucket of each distance row (nd) */
    float *pairs;      /* per (b, h) pair: pair_floats of table gradients */
    int64_t pair_floats;
    /* offsets in a pair slice */
    int64_t p_eq, p_ev, p_u, p_w, p_bias;
} rel_ctx;

typedef struct {
    int64_t T, S, H, D, Dv, Dp, Dvp, Sp, ldq, ldk, ldv, ldo;
    int64_t hq, hk, hv, ho; /* rotated pairs of q, k, v and the output (0 when not rotated) */
    int o_sign;         /* the output's rotation: o_n = R(o_sign n theta) Y_n */
    int64_t kvis;       /* keys any query sees: min(S, q_offset + T) under the mask, else S */
    const rp_attn_cfg *cfg;
    float scale;
    /* cos/sin tables (NULL when not rotated); row r of q/o is query t = r, of k/v key i = r.
     * The decode entry leaves hq, hk, hv at 0 (its q, k, v arrive rotated) and sets only o. */
    const float *qc, *qs, *kc, *ks, *vc, *vs, *oc, *os;
    float *slices; /* thread slices, slice floats apart */
    int64_t slice;
    /* the call's buffers (the backward's gradients are NULL in the forward and vice versa) */
    float *out, *att_w, *lse_w, *dq, *dk, *dv;
    const float *q, *k, *v, *lse, *dout, *fout;
    rel_ctx rel;
} attn_ctx;

/* Keys seen by query t (position q_offset + t). */
static inline int64_t visible(const attn_ctx *c, int64_t t)
{
    int64_t n = c->cfg->q_offset + t + 1;
    return c->cfg->causal && n < c->S ? n : c->S;
}

/* Keys of the block starting at j0 (bc of them) that query t sees: 0 .. bc. */
static inline int64_t seen_in_block(const attn_ctx *c, int64_t t, int64_t j0, int64_t bc)
{
    int64_t n = visible(c, t) - j0;
    return n < 0 ? 0 : n < bc ? n : bc;
}

/* ---- the hooks of attention_rel.c ----
 *
 * Sizes (cfg NULL or a mode without relative terms: 0): floats of a thread's relative slots, and
 * of the call's own part (t5's bucket rows; backward: also the B * H pair slices). */
int64_t rpa_rel_thread_floats(const rp_attn_cfg *cfg, int64_t T, int64_t S, int64_t D,
                              int64_t Dv);
int64_t rpa_rel_call_floats(const rp_attn_cfg *cfg, int64_t B, int64_t T, int64_t S, int64_t H,
                            int64_t D, int64_t Dv, int backward);
/* Carves a thread's relative slots from ws (rpa_rel_thread_floats of them). */
void rpa_rel_thread_slots(rel_slots *rs, float *ws, const rp_attn_cfg *cfg, int64_t T, int64_t S,
                          int64_t D, int64_t Dv);
/* Sets c->rel for c's dims and cfg (c->T, S, H, D, Dv, kvis, cfg set), with the call's part in
 * call (rpa_rel_call_floats of them); grad: the backward's table gradients or NULL. */
void rpa_rel_init(attn_ctx *c, float *call, const rp_attn_rel_grad *grad);
/* Per head, after Q', K', Kt (and V) are in place: the head's table operands; Q' becomes
 * s (q + u) for xl (q: the head's q rows, ldq apart). backward: also the backward's operands and
 * the pair's gradient slice zeroed. */
void rpa_rel_head(const attn_ctx *c, slots *sl, const float *q, int64_t ldq, int64_t b, int64_t h,
                  int backward);
/* Per query block t0 .. t0+nr-1: its table rows and products (backward: after dY is in sl->O). */
void rpa_rel_block(const attn_ctx *c, slots *sl, int64_t t0, int64_t nr, int backward);
/* Adds the terms to the scores of query t (row r of the block) in sl->P, keys j0 .. j0+n-1. */
void rpa_rel_scores(const attn_ctx *c, const slots *sl, int64_t t, int64_t r, int64_t j0,
                    int64_t n);
/* Forward (shaw): the row's value-table weights times corr (the online-softmax rescale), and the
 * row's new weights p (keys j0 .. j0+n-1) added to them; at the block's end O += W Ev. */
void rpa_rel_rescale(const attn_ctx *c, const slots *sl, int64_t r, float corr);
void rpa_rel_weights(const attn_ctx *c, const slots *sl, int64_t t, int64_t r, int64_t j0,
                     int64_t n);
void rpa_rel_out(const attn_ctx *c, const slots *sl, int64_t nr);
/* Backward: dP += dY Ev[r] (shaw) before dS; then the row's P and dS gathered into the tables'
 * sums; at the block's end the table terms of dQ' and the tables' gradients of the block; at the
 * head's end the Eq terms of dK' and the head's gradients. */
void rpa_rel_dp(const attn_ctx *c, const slots *sl, int64_t t, int64_t r, int64_t j0, int64_t n);
void rpa_rel_ds(const attn_ctx *c, const slots *sl, int64_t t, int64_t r, int64_t j0, int64_t n);
void rpa_rel_block_back(const attn_ctx *c, slots *sl, int64_t nr);
void rpa_rel_head_back(const attn_ctx *c, slots *sl);
/* After the backward's pairs: the table gradients += the pair slices, in a fixed order (rows
 * spread over nthreads OpenMP threads). */
void rpa_rel_reduce(const attn_ctx *c, int64_t B, int nthreads);
/* rp_attention_check's part for the relative modes (rel_clip, rel_buckets, rel_max_distance, the
 * tables). */
rp_status rpa_rel_check(const rp_attn_cfg *cfg);

#endif
