/* Softmax attention, one unit: the shared state (block sizes, a thread's slots, the call
 * context), the relative-position terms, the flash kernels (forward, backward) that run them at
 * fixed points of their loops (per call, head, query block and score row, over the same slots),
 * the decode entry over a KV cache, and the checks. Which relative terms run is the mode's
 * relative kind (its row of pe.c: RP_TERM_* bits), so a kind made of these terms needs no code
 * here. */
#include "attention.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checked.h"
#include "fpmode.h"
#include "parallel.h"
#include "simd.h"
#include "tile.h"

/* Queries and keys per block (BC a multiple of every RP_VL). Of 16..128 queries x 32..256 keys,
 * 32 x 128 measured fastest (B 16, T 512, H 4, d_k 32: 10% under 64 x 64). */
#define BR 32
#define BC 128

static inline int64_t row_block(int64_t T) { return T < BR ? T : BR; }

/* A thread's slots of the relative terms (rel_sizes says which term uses which), and the state of
 * the current head and query block. */
typedef struct {
    float *EkT, *EkR, *Ev, *QE, *W, *WB, *dYE, *Qw, *dQw, *EqT, *EqR, *KE, *Hk, *pkey, *brow, *gd;
    const float *q, *w; /* the head's q rows (ldq apart) and w row, for Q'_w = s (q + w) */
    int64_t ldq;
    float *pair;    /* the (b, h) pair's slice of table gradients (backward) */
    int64_t blo, nb; /* the query block's table rows: blo .. blo + nb - 1 */
    const float *qw; /* the query block's Q'_w rows (Dp apart) */
} rel_slots;

/* The slots of a thread slice (floats): Q [T, Dp], K [Sp, Dp], Kt [D, ldkt], V [Sp, Dvp] (the
 * forward's V' or the backward's transpose [Dv, ldkt]), dK [Sp, Dp], dV [Sp, Dvp], and per query
 * block P [rb, BC], dP [rb, BC], O [rb, Dvp] (the forward's output accumulator, the backward's
 * dY), dQ [rb, Dp], m [rb], l [rb] (the forward's running max and sum, the backward's L and
 * Drow); then the relative slots. */
typedef struct {
    float *Q, *K, *Kt, *V, *dK, *dV, *P, *dP, *O, *dQ, *m, *l;
    int64_t ldkt; /* the row stride of Kt and of the backward's V'^T: rp_attention_cache_ld(S)
                   * (Sp, padded by one line where rows would fall into the same cache sets;
                   * about 4% of the AVX2 attention at S 512), the cache's in the decode entry */
    rel_slots rel;
} slots;

/* The relative terms of a call (terms 0: none, every rel_ step is skipped). Table rows are
 * indexed by the distance delta = n - i: idx(delta) = clamp(a + sg delta, 0, R - 1), for Ek (and
 * Ev) with (ka, ks, kR), for Eq with (qa, qs, qR); the call's distances dlo .. dhi reach the rows
 * ilo .. ilo + ne - 1 of Ek and jlo .. jlo + nq - 1 of Eq. Distance rows (the bucket and slope
 * biases; the buckets) are indexed by e = dhi - delta, which grows with the key. */
typedef struct {
    int terms; /* the kind's RP_TERM_* bits (pe.h) */
    const rp_attn_rel *tab;
    const rp_attn_rel_grad *grad; /* backward: the table gradients asked for (NULL: none) */
    int64_t H, D, Dv;
    int64_t dlo, dhi, nd;
    int64_t ka, ks, kR, ilo, ne, ek_ldr, ek_ldh, ldE;
    int64_t qa, qs, qR, jlo, nq, ldQ;
    int64_t buckets;
    const float *bkt;  /* RP_TERM_BUCKET: the bucket of each distance row (nd) */
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
    int set; /* backward: overwrite dq, dk, dv (rp_attn_io.set) */
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

/* ---- the relative-position terms -----------------------------------------------------------
 *
 * The terms of the mode's relative kind (pe.h's RP_TERM_* bits; the kinds named below are
 * examples). Every term depends on the distance delta = n - i (query position minus key
 * position) through a table row: Ek and Ev rows r = idx(delta) = clamp(ka + ks delta, 0, kR - 1)
 * (shaw: k - delta of 2k + 1 rows; xl: delta - lo of the call's rows; deberta c2p: k + delta of
 * 2k), Eq rows r' = clamp(qa + qs delta, 0, qR - 1) (deberta p2c: k - delta), and the bias rows
 * (BUCKET, SLOPE) one value per distance. Per head (b, h), in the thread's slots:
 *
 *  - EK per query block (rows t0 .. t0+nr-1, the keys they see): its distances reach the table
 *    rows blo .. blo+nb-1 (at most nr + kmax - 1 of them, at most 2k + 1 for shaw); QE = Q'_w Ek^T
 *    [nr, nb] (rp_tile_mm, Q'_w = s (q + w) with UW, = Q' without) and, per score row, score +=
 *    QE[r, idx(delta) - blo] gathered (a straight run of QE, reversed for a sign of -1, with the
 *    clipped ends constant);
 *  - EQ per head: KE = (s Eq) K'^T [nq, kvis] (only the rows the call's distances reach),
 *    score += KE[r'(delta), i] (the clipped runs are rows of KE, read straight); for a single
 *    query (decode) the dot products of the keys with their one row each instead;
 *  - BUCKET, SLOPE: a row of bias values per distance of the call, score += brow[e] with
 *    e = dhi - delta (increasing with the key);
 *  - EV, forward: per query row the bucket sums W[r, idx] of the unnormalised weights p,
 *    rescaled with O by the online softmax's correction, then O += W Ev before O / l;
 *  - backward (dS = P (dP - Drow), dP including dY . Ev[idx] with EV): the bucket sums
 *    G[r, idx] of dS give dQ' += G Ek and dEk += G^T Q'_w per block; EV's WB[r, idx] of P give
 *    dEv += WB^T dY; EQ's Hk[r', i] of dS give dK' += Hk^T (s Eq), dEq += s Hk K' per head;
 *    UW's du = s sum (dS K'), dw = s sum (G Ek); BUCKET's per-distance sums of dS go to the
 *    buckets.
 *
 * Table gradients go to the (b, h) pair's own slice of the scratch; rel_reduce adds the
 * slices to the caller's gradients in the order of the pairs, so results do not depend on the
 * thread count. */

/* The relative kind of cfg's mode (NULL cfg: RP_REL_NONE's row, no terms). */
static const rp_rel_desc *rel_desc(const rp_attn_cfg *cfg)
{
    const rp_pe_mode *m = cfg ? rp_pe_mode_of(cfg->scheme.pe) : NULL;
    return rp_rel_of(m ? m->rel : RP_REL_NONE);
}

static int64_t clampi(int64_t x, int64_t lo, int64_t hi) { return x < lo ? lo : x > hi ? hi : x; }

/* The distances n - i of a call's visible pairs: dlo .. dhi. */
static void distances(const rp_attn_cfg *cfg, int64_t T, int64_t S, int64_t *dlo, int64_t *dhi)
{
    int64_t lo = cfg->q_offset - (S - 1);
    *dlo = cfg->causal && lo < 0 ? 0 : lo;
    *dhi = cfg->q_offset + T - 1;
}

/* A table's row of distance delta: clamp(a + s delta, 0, R - 1). */
typedef struct {
    int64_t a, s, R;
} imap;

/* The map of a table whose rows follow the distance by (rows, sign) (pe.h): clip rows
 * clamp(k + sign delta, 0, R - 1), or one row per distance, delta - dlo of nd. */
static imap row_map(rp_rel_rows rows, int sign, int64_t k, int64_t dlo, int64_t nd)
{
    if (rows == RP_ROWS_DISTANCE) return (imap){-dlo, 1, nd};
    return (imap){k, sign, rp_rel_clip_rows(rows, k)};
}

/* The rows distances dlo .. dhi reach: *lo .. *lo + *n - 1. */
static void map_range(imap m, int64_t dlo, int64_t dhi, int64_t *lo, int64_t *n)
{
    int64_t x = clampi(m.a + m.s * dlo, 0, m.R - 1), y = clampi(m.a + m.s * dhi, 0, m.R - 1);
    *lo = x < y ? x : y;
    *n = (x < y ? y - x : x - y) + 1;
}

/* ---- sizes ---- */

/* Upper bounds of a call's rows (for the scratch): Ek/Ev rows ne, Eq rows nq, distances nd (at
 * most T + S - 1), the leading dims of the transposed tables, the buckets. */
typedef struct {
    int terms;
    int64_t ne, nq, nd, ldE, ldQ, buckets;
} rel_dims;

/* The rows a call reaches of a table whose rows follow the distance: at most nd. */
static int64_t rows_bound(rp_rel_rows rows, int64_t k, int64_t nd)
{
    int64_t r = rows == RP_ROWS_DISTANCE ? nd : rp_rel_clip_rows(rows, k);
    return r < nd ? r : nd;
}

static rel_dims dims_of(const rp_attn_cfg *cfg, int64_t T, int64_t S)
{
    const rp_rel_desc *x = rel_desc(cfg);
    rel_dims d = {x->terms, 0, 0, T + S - 1, 0, 0, 0};
    int64_t k = x->uses & RP_USES_CLIP ? cfg->rel.clip : 0;
    if (d.terms & RP_TERM_EK) d.ne = rows_bound(x->ek_rows, k, d.nd);
    if (d.terms & RP_TERM_EQ) d.nq = rows_bound(x->eq_rows, k, d.nd);
    if (d.ne) d.ldE = rp_vl_round(d.ne) + RP_VL;
    if (d.nq) d.ldQ = rp_vl_round(d.nq) + RP_VL;
    if (d.terms & RP_TERM_BUCKET) d.buckets = cfg->rel.buckets;
    return d;
}

#define NREL 16

/* The sizes of the thread slots in the order of rel_slots: EkT [D, ldE], EkR [ne, Dp], Ev
 * (forward rows [ne, Dvp], backward transposed [Dv, ldE]), QE, W (backward: G), WB, dYE
 * [rb, ldE], Qw, dQw [rb, Dp], EqT [D, ldQ] (one query), EqR [nq, Dp], KE, Hk [nq, Sp], pkey
 * [Sp] (one query), brow, gd [nd]. */
static void rel_sizes(int64_t z[NREL], const rp_attn_cfg *cfg, int64_t T, int64_t S, int64_t D,
                      int64_t Dv)
{
    memset(z, 0, sizeof(int64_t) * NREL);
    rel_dims d = dims_of(cfg, T, S);
    if (!d.terms) return;
    int64_t Dp = rp_vl_round(D), Dvp = rp_vl_round(Dv), Sp = rp_vl_round(S), rb = row_block(T);
    int64_t ndp = rp_vl_round(d.nd), ev = !!(d.terms & RP_TERM_EV), uw = !!(d.terms & RP_TERM_UW);
    int64_t eq = !!(d.terms & RP_TERM_EQ), bkt = !!(d.terms & RP_TERM_BUCKET);
    int64_t bias = !!(d.terms & (RP_TERM_BUCKET | RP_TERM_SLOPE));
    int64_t evf = Dv * d.ldE > d.ne * Dvp ? Dv * d.ldE : d.ne * Dvp;
    const int64_t s[NREL] = {D * d.ldE,      d.ne * Dp,          ev * evf,       rb * d.ldE,
                             rb * d.ldE,     ev * rb * d.ldE,    ev * rb * d.ldE,
                             uw * rb * Dp,   uw * rb * Dp,       (T == 1) * D * d.ldQ, d.nq * Dp,
                             (T > 1) * d.nq * Sp,  d.nq * Sp,    (T == 1) * eq * Sp,
                             bias * ndp,     bkt * ndp};
    memcpy(z, s, sizeof s);
}

/* Sizes (cfg NULL or a mode without relative terms: 0): floats of a thread's relative slots, and
 * of the call's own part (the bucket rows; backward: also the B * H pair slices). */
static int64_t rel_thread_floats(const rp_attn_cfg *cfg, int64_t T, int64_t S, int64_t D,
                                 int64_t Dv)
{
    int64_t z[NREL], n = 0;
    rel_sizes(z, cfg, T, S, D, Dv);
    for (int i = 0; i < NREL; i++) n += z[i];
    return n;
}

/* Carves a thread's relative slots from ws (rel_thread_floats of them). */
static void rel_thread_slots(rel_slots *rs, float *ws, const rp_attn_cfg *cfg, int64_t T, int64_t S,
                          int64_t D, int64_t Dv)
{
    memset(rs, 0, sizeof *rs);
    int64_t z[NREL];
    rel_sizes(z, cfg, T, S, D, Dv);
    float **dst[NREL] = {&rs->EkT, &rs->EkR, &rs->Ev,  &rs->QE,  &rs->W,  &rs->WB,
                         &rs->dYE, &rs->Qw,  &rs->dQw, &rs->EqT, &rs->EqR, &rs->KE,
                         &rs->Hk,  &rs->pkey, &rs->brow, &rs->gd};
    for (int i = 0; i < NREL; i++) {
        *dst[i] = z[i] ? ws : NULL;
        ws += z[i];
    }
}

/* A pair slice: dEk [ne, Dp], dEq [nq, Dp], dEv [ne, Dvp], du, dw [Dp], dbias [buckets]; offsets
 * of each into *off (p_eq, p_ev, p_u, p_w, p_bias), the total returned. */
static int64_t pair_layout(const rel_dims *d, int64_t D, int64_t Dv, int64_t off[5])
{
    int64_t Dp = rp_vl_round(D), uw = !!(d->terms & RP_TERM_UW);
    int64_t ev = d->terms & RP_TERM_EV ? d->ne * rp_vl_round(Dv) : 0;
    off[0] = d->ne * Dp;
    off[1] = off[0] + d->nq * Dp;
    off[2] = off[1] + ev;
    off[3] = off[2] + uw * Dp;
    off[4] = off[3] + uw * Dp;
    return off[4] + d->buckets;
}

static int64_t rel_call_floats(const rp_attn_cfg *cfg, int64_t B, int64_t T, int64_t S, int64_t H,
                            int64_t D, int64_t Dv, int backward)
{
    rel_dims d = dims_of(cfg, T, S);
    if (!d.terms) return 0;
    int64_t off[5], n = d.terms & RP_TERM_BUCKET ? rp_vl_round(d.nd) : 0;
    return n + (backward ? B * H * pair_layout(&d, D, Dv, off) : 0);
}

/* ---- the public helpers ---- */

int64_t rp_attention_rel_rows(const rp_attn_cfg *cfg, int64_t T, int64_t S, int64_t *lo)
{
    const rp_rel_desc *x = rel_desc(cfg);
    int64_t dlo = 0, dhi = 0;
    if (lo) *lo = 0;
    if (!(x->terms & RP_TERM_EK)) return 0;
    if (x->ek_rows != RP_ROWS_DISTANCE) return rp_rel_clip_rows(x->ek_rows, cfg->rel.clip);
    distances(cfg, T, S, &dlo, &dhi);
    if (lo) *lo = dlo;
    return dhi - dlo + 1;
}

int64_t rp_attention_t5_bucket(int64_t rel, int bidirectional, int64_t buckets,
                               int64_t max_distance)
{
    int64_t nb = buckets, base = 0, n;
    if (bidirectional) {
        nb /= 2;
        if (rel > 0) base = nb;
        n = rel < 0 ? -rel : rel;
    } else {
        n = rel < 0 ? -rel : 0;
    }
    int64_t max_exact = nb / 2;
    if (n < max_exact) return base + n;
    /* float32 as torch: log(n / max_exact) / log(max_distance / max_exact) * (nb - max_exact) */
    float x = logf((float)n / (float)max_exact) /
              (float)log((double)max_distance / (double)max_exact) * (float)(nb - max_exact);
    int64_t large = max_exact + (int64_t)x;
    return base + (large < nb - 1 ? large : nb - 1);
}

static double alibi_slope(int64_t h, int64_t H)
{
    int64_t p = 1;
    while (p * 2 <= H) p *= 2;
    if (h < p) return exp2(-8.0 * (double)(h + 1) / (double)p);
    return exp2(-4.0 * (double)(2 * (h - p) + 1) / (double)p);
}

void rp_attention_alibi_slopes(double *slopes, int64_t H)
{
    for (int64_t h = 0; h < H; h++) slopes[h] = alibi_slope(h, H);
}

/* The tables of rp_attn_rel as fields (RP_TAB_* order). */
static const char *const tab_names[RP_TAB_COUNT] = {"ek", "eq", "ev", "u", "w", "bias"};

static const float *tab_of(const rp_attn_rel *r, int t)
{
    rp_attn_rel copy = *r;
    return *rp_attn_rel_member(&copy, t);
}

int rp_attention_rel_shape(const rp_attn_cfg *cfg, int t, int64_t T, int64_t S, int64_t H,
                           int64_t D, int64_t Dv, int64_t shape[3])
{
    const rp_rel_desc *x = rel_desc(cfg);
    if (!(rp_rel_tables(x) >> t & 1)) return 0;
    int64_t lo;
    switch (t) {
    case RP_TAB_EK:
    case RP_TAB_EV:
        shape[0] = rp_attention_rel_rows(cfg, T, S, &lo);
        if (x->ek_heads) {
            shape[1] = H, shape[2] = t == RP_TAB_EK ? D : Dv;
            return 3;
        }
        shape[1] = t == RP_TAB_EK ? D : Dv;
        return 2;
    case RP_TAB_EQ:
        shape[0] = rp_rel_clip_rows(x->eq_rows, cfg->rel.clip), shape[1] = H, shape[2] = D;
        return 3;
    case RP_TAB_BIAS: shape[0] = H, shape[1] = cfg->rel.buckets; return 2;
    default: shape[0] = H, shape[1] = D; return 2; /* u, w */
    }
}

/* Table t's shape in words: "a^K [2 clip + 1, D]" (a table whose rows follow the distance, by
 * its symbol), "[H, D]". */
static const char *shape_words(char *buf, size_t n, const rp_rel_desc *x, int t)
{
    static const char *const rows[] = {"", "2 clip + 1", "2 clip", "rows"};
    switch (t) {
    case RP_TAB_EK:
    case RP_TAB_EV:
        snprintf(buf, n, "%s [%s, %s%s]", x->sym[t], rows[x->ek_rows], x->ek_heads ? "H, " : "",
                 t == RP_TAB_EK ? "D" : "Dv");
        break;
    case RP_TAB_EQ: snprintf(buf, n, "%s [%s, H, D]", x->sym[t], rows[x->eq_rows]); break;
    case RP_TAB_BIAS: snprintf(buf, n, "[H, buckets]"); break;
    default: snprintf(buf, n, "[H, D]"); break;
    }
    return buf;
}

/* rp_attention_check's part for the relative modes (rel_clip, rel_buckets, rel_max_distance, the
 * tables). */
static rp_status rel_check(const rp_attn_cfg *cfg)
{
    const rp_rel_desc *x = rel_desc(cfg);
    const char *pe = rp_pe_name(cfg->scheme.pe);
    RP_TRY(rp_rel_cfg_check(cfg->scheme.pe, &cfg->rel, cfg->causal)); /* the limits' rule */
    rp_attn_rel none = {0};
    const rp_attn_rel *t = cfg->tables ? cfg->tables : &none;
    int tables = rp_rel_tables(x);
    char words[64];
    for (int i = 0; i < RP_TAB_COUNT; i++)
        if ((tables >> i & 1) && !tab_of(t, i))
            return rp_error(RP_ERR_ARG, "pe %s needs the table rel->%s (%s)", pe, tab_names[i],
                            shape_words(words, sizeof words, x, i));
    return RP_OK;
}

/* ---- the call and the head ---- */

/* Sets c->rel for c's dims and cfg (c->T, S, H, D, Dv, kvis, cfg set), with the call's part in
 * call (rel_call_floats of them); grad: the backward's table gradients or NULL. */
static void rel_init(attn_ctx *c, float *call, const rp_attn_rel_grad *grad)
{
    rel_ctx *r = &c->rel;
    memset(r, 0, sizeof *r);
    const rp_attn_cfg *cfg = c->cfg;
    const rp_rel_desc *x = rel_desc(cfg);
    r->terms = x->terms;
    if (!r->terms) return;
    rel_dims d = dims_of(cfg, c->T, c->S);
    r->tab = cfg->tables;
    r->grad = grad;
    r->H = c->H, r->D = c->D, r->Dv = c->Dv;
    distances(cfg, c->T, c->S, &r->dlo, &r->dhi);
    r->nd = r->dhi - r->dlo + 1;
    int64_t k = cfg->rel.clip;
    if (d.ne) {
        imap m = row_map(x->ek_rows, x->ek_sign, k, r->dlo, r->nd);
        r->ka = m.a, r->ks = m.s, r->kR = m.R, r->ldE = d.ldE;
        map_range(m, r->dlo, r->dhi, &r->ilo, &r->ne);
        r->ek_ldr = x->ek_heads ? c->H * c->D : c->D;
        r->ek_ldh = x->ek_heads ? c->D : 0;
    }
    if (d.nq) {
        imap m = row_map(x->eq_rows, x->eq_sign, k, r->dlo, r->nd);
        r->qa = m.a, r->qs = m.s, r->qR = m.R, r->ldQ = d.ldQ;
        map_range(m, r->dlo, r->dhi, &r->jlo, &r->nq);
    }
    float *p = call;
    if (r->terms & RP_TERM_BUCKET) {
        r->buckets = cfg->rel.buckets;
        for (int64_t e = 0; e < r->nd; e++)
            p[e] = (float)rp_attention_t5_bucket(e - r->dhi, !cfg->causal, cfg->rel.buckets,
                                                 cfg->rel.max_distance);
        r->bkt = p;
        p += rp_vl_round(d.nd);
    }
    if (grad) {
        int64_t off[5];
        r->pair_floats = pair_layout(&d, c->D, c->Dv, off);
        r->p_eq = off[0], r->p_ev = off[1], r->p_u = off[2], r->p_w = off[3], r->p_bias = off[4];
        r->pairs = p;
    }
}

/* dst [rows, ldt] = src^T for rows 0 .. W-1 of the transposed (src: n rows ld apart, W wide),
 * times mul, columns n .. ldt-1 zero. */
static void transpose_rows(float *dst, int64_t ldt, const float *src, int64_t ld, int64_t n,
                           int64_t W, float mul)
{
    for (int64_t d = 0; d < W; d++) {
        float *row = dst + d * ldt;
        for (int64_t x = 0; x < n; x++) row[x] = src[x * ld + d] * mul;
        for (int64_t x = n; x < ldt; x++) row[x] = 0.0f;
    }
}

/* dst [n, Wp] = mul * src rows (ld apart), zero padded from W to Wp. */
static void copy_rows(float *dst, int64_t Wp, const float *src, int64_t ld, int64_t n, int64_t W,
                      float mul)
{
    for (int64_t x = 0; x < n; x++) {
        for (int64_t d = 0; d < W; d++) dst[x * Wp + d] = src[x * ld + d] * mul;
        for (int64_t d = W; d < Wp; d++) dst[x * Wp + d] = 0.0f;
    }
}

/* Per head, after Q', K', Kt (and V) are in place: the head's table operands; Q' becomes
 * s (q + u) with UW (q: the head's q rows, ldq apart). backward: also the backward's operands and
 * the pair's gradient slice zeroed. */
static void rel_head(const attn_ctx *c, slots *sl, const float *q, int64_t ldq, int64_t b,
                     int64_t h, int backward)
{
    const rel_ctx *r = &c->rel;
    rel_slots *rs = &sl->rel;
    const rp_attn_rel *tb = r->tab;
    int64_t D = c->D, Dp = c->Dp, Dv = c->Dv, Dvp = c->Dvp, kvis = c->kvis;
    float s = c->scale;
    rs->q = q, rs->ldq = ldq;
    rs->w = r->terms & RP_TERM_UW ? tb->w + h * D : NULL;
    if (r->terms & RP_TERM_UW) { /* Q' = s (q + u) */
        const float *u = tb->u + h * D;
        for (int64_t t = 0; t < c->T; t++) {
            float *dst = sl->Q + t * Dp;
            const float *src = q + t * ldq;
            RP_SIMD
            for (int64_t d = 0; d < D; d++) dst[d] = (src[d] + u[d]) * s;
        }
    }
    if (r->ne) { /* the rows ilo .. ilo+ne-1 of head h's Ek: transposed, and as rows (backward) */
        const float *ek = tb->ek + r->ilo * r->ek_ldr + h * r->ek_ldh;
        transpose_rows(rs->EkT, r->ldE, ek, r->ek_ldr, r->ne, D, 1.0f);
        if (backward) copy_rows(rs->EkR, Dp, ek, r->ek_ldr, r->ne, D, 1.0f);
    }
    if (r->terms & RP_TERM_EV) { /* Ev rows ilo .. (forward: rows; backward: transposed) */
        const float *ev = tb->ev + r->ilo * Dv;
        if (backward)
            transpose_rows(rs->Ev, r->ldE, ev, Dv, r->ne, Dv, 1.0f);
        else
            copy_rows(rs->Ev, Dvp, ev, Dv, r->ne, Dv, 1.0f);
    }
    if (r->terms & RP_TERM_EQ) { /* Eq rows jlo .. jlo+nq-1, times s */
        const float *eq = tb->eq + r->jlo * c->H * D + h * D;
        copy_rows(rs->EqR, Dp, eq, c->H * D, r->nq, D, s);
        if (backward) memset(rs->Hk, 0, sizeof(float) * (size_t)(r->nq * c->Sp));
        if (c->T > 1) { /* KE = (s Eq) K'^T */
            rp_tile_mm(rs->KE, c->Sp, rs->EqR, Dp, 1, sl->Kt, sl->ldkt, r->nq, rp_vl_round(kvis), D,
                       0);
        } else { /* one query at q_offset: key i meets only row r'(q_offset - i) */
            int64_t qo = c->cfg->q_offset;
            transpose_rows(rs->EqT, r->ldQ, eq, c->H * D, r->nq, D, s);
            for (int64_t i = 0; i < kvis; i++) rs->pkey[i] = 0.0f;
            for (int64_t d = 0; d < D; d++) {
                const float *kt = sl->Kt + d * sl->ldkt, *e = rs->EqT + d * r->ldQ;
                for (int64_t i = 0; i < kvis; i++)
                    rs->pkey[i] +=
                        kt[i] * e[clampi(r->qa + r->qs * (qo - i), 0, r->qR - 1) - r->jlo];
            }
        }
    }
    if (r->terms & RP_TERM_BUCKET) {
        const float *bias = tb->bias + h * r->buckets;
        for (int64_t e = 0; e < r->nd; e++) rs->brow[e] = bias[(int64_t)r->bkt[e]];
        if (backward) memset(rs->gd, 0, sizeof(float) * (size_t)r->nd);
    }
    if (r->terms & RP_TERM_SLOPE) {
        double m = alibi_slope(h, c->H);
        for (int64_t e = 0; e < r->nd; e++) {
            int64_t delta = r->dhi - e;
            rs->brow[e] = (float)(-m * (double)(delta < 0 ? -delta : delta));
        }
    }
    rs->pair = NULL;
    if (backward && r->grad) {
        rs->pair = r->pairs + (b * c->H + h) * r->pair_floats;
        memset(rs->pair, 0, sizeof(float) * (size_t)r->pair_floats);
    }
}

/* ---- gathers and scatters along a row ----
 *
 * For keys j = 0 .. n-1 of a score row the table row is clamp(c + st j, lo, hi) (st = +-1,
 * lo <= hi): a run of constant rows (j < ja), a straight run (ja <= j < jb), a constant run. */
static void runs(int64_t c, int64_t st, int64_t lo, int64_t hi, int64_t n, int64_t *ja,
                 int64_t *jb)
{
    if (st > 0) {
        *ja = clampi(lo - c, 0, n), *jb = clampi(hi - c + 1, 0, n);
    } else {
        *ja = clampi(c - hi, 0, n), *jb = clampi(c - lo + 1, 0, n);
    }
}

/* p[j] += src[clamp(c + st j, lo, hi)] for j < n. */
static void add_gather(float *restrict p, const float *restrict src, int64_t n, int64_t c,
                       int64_t st, int64_t lo, int64_t hi)
{
    int64_t ja, jb;
    runs(c, st, lo, hi, n, &ja, &jb);
    float a = src[st > 0 ? lo : hi], z = src[st > 0 ? hi : lo];
    RP_SIMD
    for (int64_t j = 0; j < ja; j++) p[j] += a;
    if (st > 0) {
        RP_SIMD
        for (int64_t j = ja; j < jb; j++) p[j] += src[c + j];
    } else {
        RP_SIMD
        for (int64_t j = ja; j < jb; j++) p[j] += src[c - j];
    }
    RP_SIMD
    for (int64_t j = jb; j < n; j++) p[j] += z;
}

/* dst[clamp(c + st j, lo, hi)] += x[j] for j < n (the constant runs summed first). */
static void scatter_add(float *restrict dst, const float *restrict x, int64_t n, int64_t c,
                        int64_t st, int64_t lo, int64_t hi)
{
    int64_t ja, jb;
    runs(c, st, lo, hi, n, &ja, &jb);
    if (ja > 0) {
        float sum = 0.0f;
        RP_SIMD_REDUCE(+, sum)
        for (int64_t j = 0; j < ja; j++) sum += x[j];
        dst[st > 0 ? lo : hi] += sum;
    }
    if (st > 0) {
        RP_SIMD
        for (int64_t j = ja; j < jb; j++) dst[c + j] += x[j];
    } else {
        RP_SIMD
        for (int64_t j = ja; j < jb; j++) dst[c - j] += x[j];
    }
    if (jb < n) {
        float sum = 0.0f;
        RP_SIMD_REDUCE(+, sum)
        for (int64_t j = jb; j < n; j++) sum += x[j];
        dst[st > 0 ? hi : lo] += sum;
    }
}

/* The same along the columns of M (rows ld apart): p[j] += M[clamp(c + st j, lo, hi), j] and
 * M[clamp(c + st j, lo, hi), j] += x[j] for j < n (the clipped runs read or write a row of M
 * straight, the run between walks a diagonal). */
static void add_gather_cols(float *restrict p, const float *restrict M, int64_t ld, int64_t n,
                            int64_t c, int64_t st, int64_t lo, int64_t hi)
{
    int64_t ja, jb;
    runs(c, st, lo, hi, n, &ja, &jb);
    const float *a = M + (st > 0 ? lo : hi) * ld, *z = M + (st > 0 ? hi : lo) * ld;
    RP_SIMD
    for (int64_t j = 0; j < ja; j++) p[j] += a[j];
    for (int64_t j = ja; j < jb; j++) p[j] += M[(c + st * j) * ld + j];
    RP_SIMD
    for (int64_t j = jb; j < n; j++) p[j] += z[j];
}

static void scatter_cols(float *restrict M, int64_t ld, const float *restrict x, int64_t n,
                         int64_t c, int64_t st, int64_t lo, int64_t hi)
{
    int64_t ja, jb;
    runs(c, st, lo, hi, n, &ja, &jb);
    float *a = M + (st > 0 ? lo : hi) * ld, *z = M + (st > 0 ? hi : lo) * ld;
    RP_SIMD
    for (int64_t j = 0; j < ja; j++) a[j] += x[j];
    for (int64_t j = ja; j < jb; j++) M[(c + st * j) * ld + j] += x[j];
    RP_SIMD
    for (int64_t j = jb; j < n; j++) z[j] += x[j];
}

/* The Ek row run of query t and keys j0 ..: row clamp(c + st j, 0, nb - 1) of the block's QE. */
static int64_t ek_start(const attn_ctx *c, const slots *sl, int64_t t, int64_t j0)
{
    const rel_ctx *r = &c->rel;
    return r->ka + r->ks * (c->cfg->q_offset + t - j0) - sl->rel.blo;
}

/* ---- per query block ---- */

/* Per query block t0 .. t0+nr-1: its table rows and products (backward: after dY is in sl->O). */
static void rel_block(const attn_ctx *c, slots *sl, int64_t t0, int64_t nr, int backward)
{
    const rel_ctx *r = &c->rel;
    rel_slots *rs = &sl->rel;
    if (!r->ne) return;
    int64_t D = c->D, Dp = c->Dp, Dvp = c->Dvp, qo = c->cfg->q_offset, ldE = r->ldE;
    /* the block's distances and rows */
    int64_t bdlo = qo + t0 - (visible(c, t0) - 1), bdhi = qo + t0 + nr - 1;
    imap m = {r->ka, r->ks, r->kR};
    map_range(m, bdlo, bdhi, &rs->blo, &rs->nb);
    int64_t nb = rs->nb, nbp = rp_vl_round(nb), off = rs->blo - r->ilo;
    rs->qw = sl->Q + t0 * Dp;
    if (r->terms & RP_TERM_UW) { /* Q'_w = s (q + w) */
        for (int64_t i = 0; i < nr; i++) {
            float *dst = rs->Qw + i * Dp;
            const float *src = rs->q + (t0 + i) * rs->ldq, *w = rs->w;
            RP_SIMD
            for (int64_t d = 0; d < D; d++) dst[d] = (src[d] + w[d]) * c->scale;
            for (int64_t d = D; d < Dp; d++) dst[d] = 0.0f;
        }
        rs->qw = rs->Qw;
    }
    /* QE = Q'_w Ek^T over the block's rows */
    rp_tile_mm(rs->QE, ldE, rs->qw, Dp, 1, rs->EkT + off, ldE, nr, nbp, D, 0);
    if (!backward && !(r->terms & RP_TERM_EV)) return;
    for (int64_t i = 0; i < nr; i++) memset(rs->W + i * ldE, 0, sizeof(float) * (size_t)nb);
    if (backward && (r->terms & RP_TERM_EV)) {
        /* dYE = dY Ev^T over the block's rows */
        rp_tile_mm(rs->dYE, ldE, sl->O, Dvp, 1, rs->Ev + off, ldE, nr, nbp, c->Dv, 0);
        if (r->grad && r->grad->ev)
            for (int64_t i = 0; i < nr; i++)
                memset(rs->WB + i * ldE, 0, sizeof(float) * (size_t)nb);
    }
}

/* ---- per score row ---- */

/* Adds the terms to the scores of query t (row r of the block) in sl->P, keys j0 .. j0+n-1. */
static void rel_scores(const attn_ctx *c, const slots *sl, int64_t t, int64_t r, int64_t j0,
                    int64_t n)
{
    const rel_ctx *x = &c->rel;
    const rel_slots *rs = &sl->rel;
    float *p = sl->P + r * BC;
    int64_t del0 = c->cfg->q_offset + t - j0; /* the distance of key j0 + j: del0 - j */
    if (x->ne)
        add_gather(p, rs->QE + r * x->ldE, n, ek_start(c, sl, t, j0), -x->ks, 0, rs->nb - 1);
    if (x->terms & RP_TERM_EQ) {
        if (c->T > 1) {
            add_gather_cols(p, rs->KE + j0, c->Sp, n, x->qa + x->qs * del0 - x->jlo, -x->qs, 0,
                            x->nq - 1);
        } else {
            RP_SIMD
            for (int64_t j = 0; j < n; j++) p[j] += rs->pkey[j0 + j];
        }
    }
    if (x->terms & (RP_TERM_BUCKET | RP_TERM_SLOPE)) {
        const float *br = rs->brow + (x->dhi - del0);
        RP_SIMD
        for (int64_t j = 0; j < n; j++) p[j] += br[j];
    }
}

/* Forward (EV): the row's value-table weights times corr (the online-softmax rescale), and the
 * row's new weights p (keys j0 .. j0+n-1) added to them; at the block's end O += W Ev. */
static void rel_rescale(const attn_ctx *c, const slots *sl, int64_t r, float corr)
{
    float *w = sl->rel.W + r * c->rel.ldE;
    RP_SIMD
    for (int64_t i = 0; i < sl->rel.nb; i++) w[i] *= corr;
}

static void rel_weights(const attn_ctx *c, const slots *sl, int64_t t, int64_t r, int64_t j0,
                     int64_t n)
{
    scatter_add(sl->rel.W + r * c->rel.ldE, sl->P + r * BC, n, ek_start(c, sl, t, j0),
                -c->rel.ks, 0, sl->rel.nb - 1);
}

static void rel_out(const attn_ctx *c, const slots *sl, int64_t nr)
{
    const rel_ctx *x = &c->rel;
    const rel_slots *rs = &sl->rel;
    rp_tile_mm(sl->O, c->Dvp, rs->W, x->ldE, 1, rs->Ev + (rs->blo - x->ilo) * c->Dvp, c->Dvp, nr,
               c->Dvp, rs->nb, 1);
}

/* ---- backward ---- */

/* One score row of the backward: p[j] = e^(min(p[j] - L, 0)) (the forward's weight, from the
 * row's log-sum-exp L) and dp[j] = p[j] (dp[j] - Dr) (the score gradient, Dr = dY . Y) for the n
 * keys the query sees, 0 for j = n .. bcp-1 (bcp a multiple of RP_VL). Whole vectors, the last
 * partial one through a copy, so no key falls to a scalar loop. */
static inline void weights_and_ds(float *p, float *dp, int64_t n, int64_t bcp, float L, float Dr)
{
    const rp_vf vL = rp_vsplat(L), vD = rp_vsplat(Dr), zero = rp_vsplat(0.0f);
    int64_t nf = n / RP_VL * RP_VL;
    for (int64_t j = 0; j < nf; j += RP_VL) {
        rp_vf x = rp_vload(p + j) - vL;
        rp_vf e = rp_vexp_nonpos((rp_vf)((rp_vi)x & (x < zero)));
        rp_vstore(p + j, e);
        rp_vstore(dp + j, e * (rp_vload(dp + j) - vD));
    }
    if (nf < n) {
        float a[RP_VL], b[RP_VL];
        memcpy(a, p + nf, sizeof(float) * (size_t)(n - nf));
        memcpy(b, dp + nf, sizeof(float) * (size_t)(n - nf));
        for (int64_t j = n - nf; j < RP_VL; j++) a[j] = b[j] = 0.0f;
        rp_vf x = rp_vload(a) - vL;
        rp_vf e = rp_vexp_nonpos((rp_vf)((rp_vi)x & (x < zero)));
        rp_vstore(a, e);
        rp_vstore(b, e * (rp_vload(b) - vD));
        memcpy(p + nf, a, sizeof(float) * (size_t)(n - nf));
        memcpy(dp + nf, b, sizeof(float) * (size_t)(n - nf));
    }
    for (int64_t j = n; j < bcp; j++) p[j] = dp[j] = 0.0f;
}


/* Backward: dP += dY Ev[r] (EV) before dS; then the row's P and dS gathered into the tables'
 * sums; at the block's end the table terms of dQ' and the tables' gradients of the block; at the
 * head's end the Eq terms of dK' and the head's gradients. */
static void rel_dp(const attn_ctx *c, const slots *sl, int64_t t, int64_t r, int64_t j0, int64_t n)
{
    add_gather(sl->dP + r * BC, sl->rel.dYE + r * c->rel.ldE, n, ek_start(c, sl, t, j0),
               -c->rel.ks, 0, sl->rel.nb - 1);
}

static void rel_ds(const attn_ctx *c, const slots *sl, int64_t t, int64_t r, int64_t j0, int64_t n)
{
    const rel_ctx *x = &c->rel;
    const rel_slots *rs = &sl->rel;
    const float *p = sl->P + r * BC, *ds = sl->dP + r * BC;
    if (x->ne) {
        int64_t c0 = ek_start(c, sl, t, j0);
        scatter_add(rs->W + r * x->ldE, ds, n, c0, -x->ks, 0, rs->nb - 1);
        if ((x->terms & RP_TERM_EV) && rs->pair && x->grad->ev)
            scatter_add(rs->WB + r * x->ldE, p, n, c0, -x->ks, 0, rs->nb - 1);
    }
    int64_t del0 = c->cfg->q_offset + t - j0;
    if (x->terms & RP_TERM_EQ)
        scatter_cols(rs->Hk + j0, c->Sp, ds, n, x->qa + x->qs * del0 - x->jlo, -x->qs, 0,
                     x->nq - 1);
    if ((x->terms & RP_TERM_BUCKET) && rs->pair && x->grad->bias) {
        float *g = rs->gd + (x->dhi - del0);
        RP_SIMD
        for (int64_t j = 0; j < n; j++) g[j] += ds[j];
    }
}

/* acc[d] += s * sum_r X[r, d] over nr rows Dp apart (rows in order). */
static void add_row_sum(float *acc, const float *X, int64_t nr, int64_t Dp, float s)
{
    for (int64_t d = 0; d < Dp; d++) {
        float sum = 0.0f;
        for (int64_t i = 0; i < nr; i++) sum += X[i * Dp + d];
        acc[d] += s * sum;
    }
}

static void rel_block_back(const attn_ctx *c, slots *sl, int64_t nr)
{
    const rel_ctx *x = &c->rel;
    rel_slots *rs = &sl->rel;
    if (!x->ne) return;
    int64_t Dp = c->Dp, Dvp = c->Dvp, ldE = x->ldE, nb = rs->nb, off = rs->blo - x->ilo;
    const rp_attn_rel_grad *g = rs->pair ? x->grad : NULL;
    const float *ekr = rs->EkR + off * Dp;
    if (x->terms & RP_TERM_UW) {
        /* du = s sum_n (dS K')_n before dQ' takes the position term dQw = G Ek; dw = s sum dQw */
        if (g && g->u) add_row_sum(rs->pair + x->p_u, sl->dQ, nr, Dp, c->scale);
        rp_tile_mm(rs->dQw, Dp, rs->W, ldE, 1, ekr, Dp, nr, Dp, nb, 0);
        if (g && g->w) add_row_sum(rs->pair + x->p_w, rs->dQw, nr, Dp, c->scale);
        for (int64_t i = 0; i < nr * Dp; i++) sl->dQ[i] += rs->dQw[i];
    } else {
        rp_tile_mm(sl->dQ, Dp, rs->W, ldE, 1, ekr, Dp, nr, Dp, nb, 1); /* dQ' += G Ek */
    }
    if (g && g->ek) /* dEk += G^T Q'_w */
        rp_tile_mm(rs->pair + off * Dp, Dp, rs->W, 1, ldE, rs->qw, Dp, nb, Dp, nr, 1);
    if ((x->terms & RP_TERM_EV) && g && g->ev) /* dEv += WB^T dY */
        rp_tile_mm(rs->pair + x->p_ev + off * Dvp, Dvp, rs->WB, 1, ldE, sl->O, Dvp, nb, Dvp, nr,
                   1);
}

static void rel_head_back(const attn_ctx *c, slots *sl)
{
    const rel_ctx *x = &c->rel;
    rel_slots *rs = &sl->rel;
    int64_t Dp = c->Dp, kvis = c->kvis;
    const rp_attn_rel_grad *g = rs->pair ? x->grad : NULL;
    if (x->terms & RP_TERM_EQ) {
        /* dK' += Hk^T (s Eq); dEq = s Hk K' (the slice's only term of this head) */
        rp_tile_mm(sl->dK, Dp, rs->Hk, 1, c->Sp, rs->EqR, Dp, kvis, Dp, x->nq, 1);
        if (g && g->eq) {
            float *de = rs->pair + x->p_eq;
            rp_tile_mm(de, Dp, rs->Hk, c->Sp, 1, sl->K, Dp, x->nq, Dp, kvis, 0);
            for (int64_t i = 0; i < x->nq * Dp; i++) de[i] *= c->scale;
        }
    }
    if ((x->terms & RP_TERM_BUCKET) && g && g->bias) {
        float *db = rs->pair + x->p_bias;
        for (int64_t e = 0; e < x->nd; e++) db[(int64_t)x->bkt[e]] += rs->gd[e];
    }
}

/* out rows (ldr apart; head h at h * ldh, ldh 0: one table for all heads) += the pair slices'
 * rows (lds apart from offset off), W wide, over the pairs in order: (b, h) for b = 0 .. B-1 for
 * a head's rows, every pair for a shared table. */
static void reduce(const rel_ctx *x, int64_t B, int nt, float *out, int64_t ldr, int64_t ldh,
                   int64_t rows, int64_t W, int64_t off, int64_t lds)
{
    int64_t H = x->H, ng = ldh ? H : 1;
    (void)nt;
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(static) if (ng * rows * W * B * H > 32768)
#endif
    for (int64_t gi = 0; gi < ng * rows; gi++) {
        int64_t h = gi / rows, i = gi % rows;
        float *o = out + i * ldr + h * ldh;
        for (int64_t b = 0; b < B; b++)
            for (int64_t hh = ldh ? h : 0; hh < (ldh ? h + 1 : H); hh++) {
                const float *src = x->pairs + (b * H + hh) * x->pair_floats + off + i * lds;
                RP_SIMD
                for (int64_t d = 0; d < W; d++) o[d] += src[d];
            }
    }
}

/* After the backward's pairs: the table gradients += the pair slices, in a fixed order (rows
 * spread over nthreads OpenMP threads). */
static void rel_reduce(const attn_ctx *c, int64_t B, int nthreads)
{
    int nt = nthreads < 1 ? 1 : nthreads;
    const rel_ctx *x = &c->rel;
    const rp_attn_rel_grad *g = x->grad;
    int64_t D = c->D, Dv = c->Dv, H = c->H, Dp = c->Dp, Dvp = c->Dvp;
    if (x->ne && g->ek)
        reduce(x, B, nt, g->ek + x->ilo * x->ek_ldr, x->ek_ldr, x->ek_ldh, x->ne, D, 0, Dp);
    if ((x->terms & RP_TERM_EQ) && g->eq)
        reduce(x, B, nt, g->eq + x->jlo * H * D, H * D, D, x->nq, D, x->p_eq, Dp);
    if ((x->terms & RP_TERM_EV) && g->ev)
        reduce(x, B, nt, g->ev + x->ilo * Dv, Dv, 0, x->ne, Dv, x->p_ev, Dvp);
    if ((x->terms & RP_TERM_UW) && g->u) reduce(x, B, nt, g->u, 0, D, 1, D, x->p_u, 0);
    if ((x->terms & RP_TERM_UW) && g->w) reduce(x, B, nt, g->w, 0, D, 1, D, x->p_w, 0);
    if ((x->terms & RP_TERM_BUCKET) && g->bias)
        reduce(x, B, nt, g->bias, 0, x->buckets, 1, x->buckets, x->p_bias, 0);
}

/* ---- the kernels ------------------------------------------------------------------------------
 *
 * Flash attention on the CPU: per (b, h) the queries go in blocks of at most BR rows and, inside
 * a block, the keys in blocks of BC; only a BR x BC tile of scores ever exists.
 *
 * Forward per query block, for each key block (under the causal mask only the keys some query of
 * the block sees, up to kmax = min(S, q_offset + t1)):
 *   scores   s = Q' K'^T_blk                       (rp_tile_mm; Q' carries the scale)
 *   online softmax per row: m' = max(m, max_j s_j), c = e^(m - m'), p_j = e^(s_j - m'),
 *            l = c l + sum_j p_j, O = c O, m = m'  (masked keys: p = 0 exactly)
 *   O += P V'_blk                                  (rp_tile_mm)
 * then y = O / l, out = R(o_sign n) y where the mode rotates the output (roper: R(-n)), and the
 * row's log-sum-exp L = m + log l goes to lse for the backward.
 * Backward per query block (FlashAttention-2's order), with dY = R(-o_sign n) dout and
 * Drow = <dout, out> per row (= <dY, Y>: the rotation keeps inner products), per key block:
 *   P = e^(s - L) recomputed from the same scores, dP = dY V'^T_blk, dS = P (dP - Drow),
 *   dV' += P^T dY, dQ' += dS K', dK' += dS^T Q'
 * then dq += scale R(-n) dQ' per block; after all blocks dk += R(-i) dK', dv += R(-i) dV'
 * (R(-2i) for roper_legacy, its v table).
 *
 * Operands per head, in the thread's slice: Q' = scale R(n) q [T, Dp], K' = R(i) k [Sp, Dp] and
 * its transpose [D, ldkt], V' = R(i) v [Sp, Dvp] (forward) or its transpose [Dv, ldkt] (backward);
 * Dp, Dvp, Sp are D, Dv, S rounded up to the vector width (rp_vl_round) with zeros in the
 * padding, so every tile product runs over whole vectors. The exponentials are in float
 * (rp_exp_nonpos, simd.h); every sum runs in a fixed order.
 *
 * Threads: the (b, h) pairs are spread over nthreads OpenMP threads; a pair is computed by one
 * thread with the same code whatever nthreads is, so results do not depend on nthreads. */

/* cos/sin tables: T rows of at most D/2 pairs (q) and Dv/2 (o), S rows of at most D/2 (k) and
 * Dv/2 (v). */
static int64_t table_floats(int64_t T, int64_t S, int64_t D, int64_t Dv)
{
    return (T + S) * (D + Dv);
}

/* The slots of a thread slice (the slots struct above). */
#define NSLOTS 12

/* The slot sizes in the order of the slots struct. */
static void slot_sizes(int64_t sizes[NSLOTS], int64_t T, int64_t S, int64_t D, int64_t Dv)
{
    int64_t Dp = rp_vl_round(D), Dvp = rp_vl_round(Dv), Sp = rp_vl_round(S), rb = row_block(T);
    int64_t ldt = rp_attention_cache_ld(S), vz = Sp * Dvp > Dv * ldt ? Sp * Dvp : Dv * ldt;
    const int64_t z[NSLOTS] = {T * Dp,  Sp * Dp, D * ldt,  vz,       Sp * Dp, Sp * Dvp,
                               rb * BC, rb * BC, rb * Dvp, rb * Dp,  rb,      rb};
    memcpy(sizes, z, sizeof z);
}

static void thread_slots(slots *sl, float *ws, int64_t T, int64_t S, int64_t D, int64_t Dv,
                         const rp_attn_cfg *cfg)
{
    int64_t sizes[NSLOTS];
    slot_sizes(sizes, T, S, D, Dv);
    float **dst[NSLOTS] = {&sl->Q, &sl->K, &sl->Kt, &sl->V, &sl->dK, &sl->dV,
                           &sl->P, &sl->dP, &sl->O, &sl->dQ, &sl->m,  &sl->l};
    for (int i = 0; i < NSLOTS; i++) {
        *dst[i] = ws;
        ws += sizes[i];
    }
    sl->ldkt = rp_attention_cache_ld(S);
    rel_thread_slots(&sl->rel, ws, cfg, T, S, D, Dv);
}

static int64_t thread_floats(int64_t T, int64_t S, int64_t D, int64_t Dv, const rp_attn_cfg *cfg)
{
    int64_t sizes[NSLOTS], n = 0;
    slot_sizes(sizes, T, S, D, Dv);
    for (int i = 0; i < NSLOTS; i++) n += sizes[i];
    return n + rel_thread_floats(cfg, T, S, D, Dv);
}

/* Layout: the cos/sin tables, the relative terms' part of the call, the thread slices. */
int64_t rp_attention_scratch_floats(const rp_attn_cfg *cfg, int64_t B, int64_t T, int64_t S,
                                    int64_t H, int64_t D, int64_t Dv, int nthreads)
{
    if (nthreads < 1) nthreads = 1;
    return table_floats(T, S, D, Dv) + rel_call_floats(cfg, B, T, S, H, D, Dv, 1) +
           (int64_t)nthreads * thread_floats(T, S, D, Dv, cfg);
}

static void ctx_dims(attn_ctx *c, int64_t T, int64_t S, int64_t H, int64_t D, int64_t Dv)
{
    c->T = T, c->S = S, c->H = H, c->D = D, c->Dv = Dv;
    c->Dp = rp_vl_round(D), c->Dvp = rp_vl_round(Dv), c->Sp = rp_vl_round(S);
}

/* The call context of io's dims and strides (its buffers are the caller's to set) and cfg, with
 * the backward's table gradients drel (NULL: none; the forward's). */
static void ctx_init(attn_ctx *c, const rp_attn_io *io, const rp_attn_cfg *cfg,
                     const rp_attn_rel_grad *drel)
{
    int64_t B = io->B, T = io->T, S = io->S, H = io->H, D = io->D, Dv = io->Dv;
    float *scratch = io->scratch;
    memset(c, 0, sizeof *c);
    ctx_dims(c, T, S, H, D, Dv);
    c->ldq = io->ldq, c->ldk = io->ldk, c->ldv = io->ldv, c->ldo = io->ldo;
    c->q = io->q, c->k = io->k, c->v = io->v;
    c->cfg = cfg;
    c->scale = (float)(cfg->scale * rp_rope_freq_score_scale(cfg->freq));
    c->kvis = cfg->causal && cfg->q_offset + T < S ? cfg->q_offset + T : S;
    float *call = scratch + table_floats(T, S, D, Dv);
    rel_init(c, call, drel);
    c->slices = call + rel_call_floats(cfg, B, T, S, H, D, Dv, 1);
    c->slice = thread_floats(T, S, D, Dv, cfg);
    rp_pe_scheme s = cfg->scheme;
    c->o_sign = s.o_sign;
    /* Tables in double -> float (rp_rope_angles); key i at position p0 + i, query t at
     * p0 + q_offset + t. A table reuses an earlier one where the angles are the same: q the k
     * table when it covers the queries (self-attention: q_offset = S - T), v the k table (same
     * width, v_angle 1), o the q table (same width) or the v table. Every table takes at most
     * rows * D (q, k) or rows * Dv (v, o) floats, so they fit in table_floats(). */
    float *p = scratch;
    int64_t qo = cfg->q_offset, p0 = cfg->pos_offset;
    /* xPos scales the query side (q, o) by zeta^(+p) and the key side (k, v) by zeta^(-p):
     * a table is shared only within a side then */
    const rp_rope_freq *fq = cfg->freq;
    int xp = fq && fq->xpos > 0.0;
    /* explicit positions: keys from row 0, queries from row q_offset */
    int64_t A = rp_rope_freq_axes(fq);
    const int64_t *kpos = cfg->pos, *qpos = cfg->pos ? cfg->pos + qo * A : NULL;
    if (s.d_rot_k) {
        int64_t h = c->hk = s.d_rot_k / 2;
        float *kc = p, *ks = p + S * h;
        p += 2 * S * h;
        rp_rope_freq_tables(kc, ks, fq, s.d_rot_k, s.base, 1.0, -1, kpos, p0, S);
        c->kc = kc, c->ks = ks;
    }
    if (s.d_rot_q) {
        int64_t h = c->hq = s.d_rot_q / 2;
        if (h == c->hk && qo + T <= S && !xp) {
            c->qc = c->kc + qo * h, c->qs = c->ks + qo * h;
        } else {
            float *qc = p, *qs = p + T * h;
            p += 2 * T * h;
            rp_rope_freq_tables(qc, qs, fq, s.d_rot_q, s.base, 1.0, 1, qpos, p0 + qo, T);
            c->qc = qc, c->qs = qs;
        }
    }
    if (s.d_rot_v) {
        int64_t h = c->hv = s.d_rot_v / 2;
        if (h == c->hk && s.v_angle == 1.0) {
            c->vc = c->kc, c->vs = c->ks;
        } else {
            float *vc = p, *vs = p + S * h;
            p += 2 * S * h;
            rp_rope_freq_tables(vc, vs, fq, s.d_rot_v, s.base, s.v_angle, -1, kpos, p0, S);
            c->vc = vc, c->vs = vs;
        }
    }
    if (s.d_rot_o) {
        int64_t h = c->ho = s.d_rot_o / 2;
        if (h == c->hq) {
            c->oc = c->qc, c->os = c->qs;
        } else if (h == c->hv && s.v_angle == 1.0 && qo + T <= S && !xp) {
            c->oc = c->vc + qo * h, c->os = c->vs + qo * h;
        } else {
            float *oc = p, *os = p + T * h;
            p += 2 * T * h;
            rp_rope_freq_tables(oc, os, fq, s.d_rot_o, s.base, 1.0, 1, qpos, p0 + qo, T);
            c->oc = oc, c->os = os;
        }
    }
}

/* ---- rows: rotation, scaling, padding ---- */

/* How many rows ahead the strided rows of q, k, v (build_rows), of dout, out and dq (the
 * backward's query blocks) and of dk, dv (its end) are prefetched (rp_prefetch_row): 8 measured
 * faster than 4 and 16 (B 16, T 512, H 4, d_k 32, AVX2). */
#define PF_ROWS 8

/* dst[0 .. W) = mul * R(sgn phi) src over the first 2h features by the table row (cs, sn), the
 * rest copied times mul; dst[W .. Wp) = 0. Pairs as rp_rope_forward: y_a = x_a c - x_b s,
 * y_b = x_b c + x_a s with s = sgn sin. h = 0: a plain (scaled) copy. */
static inline void rot_row(float *restrict dst, const float *restrict src, const float *cs,
                           const float *sn, int64_t h, float sgn, float mul, int64_t W, int64_t Wp,
                           rp_pairing pairing)
{
    if (pairing == RP_PAIR_HALF) {
        RP_SIMD
        for (int64_t i = 0; i < h; i++) {
            float x1 = src[i], x2 = src[i + h], s = sgn * sn[i];
            dst[i] = (x1 * cs[i] - x2 * s) * mul;
            dst[i + h] = (x2 * cs[i] + x1 * s) * mul;
        }
    } else {
        RP_SIMD
        for (int64_t i = 0; i < h; i++) {
            float x1 = src[2 * i], x2 = src[2 * i + 1], s = sgn * sn[i];
            dst[2 * i] = (x1 * cs[i] - x2 * s) * mul;
            dst[2 * i + 1] = (x2 * cs[i] + x1 * s) * mul;
        }
    }
    RP_SIMD
    for (int64_t i = 2 * h; i < W; i++) dst[i] = src[i] * mul;
    for (int64_t i = W; i < Wp; i++) dst[i] = 0.0f;
}

/* dst[0 .. W) += mul * R(-sgn phi) g: the backward of rot_row (its transpose), accumulating into
 * a strided gradient row; set: dst = 0 + that term (what the accumulation gives on zeros). */
static inline void rot_row_back(float *restrict dst, const float *restrict g, const float *cs,
                                const float *sn, int64_t h, float sgn, float mul, int64_t W,
                                rp_pairing pairing, int set)
{
    if (set)
        for (int64_t i = 0; i < W; i++) dst[i] = 0.0f;
    if (pairing == RP_PAIR_HALF) {
        RP_SIMD
        for (int64_t i = 0; i < h; i++) {
            float g1 = g[i], g2 = g[i + h], s = sgn * sn[i];
            dst[i] += (g1 * cs[i] + g2 * s) * mul;
            dst[i + h] += (g2 * cs[i] - g1 * s) * mul;
        }
    } else {
        RP_SIMD
        for (int64_t i = 0; i < h; i++) {
            float g1 = g[2 * i], g2 = g[2 * i + 1], s = sgn * sn[i];
            dst[2 * i] += (g1 * cs[i] + g2 * s) * mul;
            dst[2 * i + 1] += (g2 * cs[i] - g1 * s) * mul;
        }
    }
    RP_SIMD
    for (int64_t i = 2 * h; i < W; i++) dst[i] += g[i] * mul;
}

/* dt [W, ldt] = the first W columns of x [rows, Wp] transposed (W <= Wp): with AVX in blocks of
 * 8 x 8 through registers (rp_transpose8), else element by element; the values are only moved. */
static void transpose_into(float *dt, int64_t ldt, const float *x, int64_t Wp, int64_t rows,
                           int64_t W)
{
    int64_t r0 = 0;
#if defined(__AVX__)
    for (; r0 + 8 <= rows; r0 += 8) {
        const float *row[8];
        for (int i = 0; i < 8; i++) row[i] = x + (r0 + i) * Wp;
        for (int64_t d0 = 0; d0 < W; d0 += 8) { /* Wp is a multiple of RP_VL >= 8 */
            __m256 t[8];
            rp_transpose8(t, row, d0);
            int64_t nd = W - d0 < 8 ? W - d0 : 8;
            for (int64_t d = 0; d < nd; d++) _mm256_storeu_ps(dt + (d0 + d) * ldt + r0, t[d]);
        }
    }
#endif
    for (int64_t d = 0; d < W; d++)
        for (int64_t r = r0; r < rows; r++) dt[d * ldt + r] = x[r * Wp + d];
}

/* Rows 0 .. n-1 of a strided input (src, ld) rotated by the table rows 0 .. n-1 (h pairs; h = 0:
 * copied) into dst [rows, Wp] (rows >= n zeroed up to `rows`); optionally also transposed into
 * dt [W, ldt] (columns n .. rows-1 zeroed). */
static void build_rows(float *dst, float *dt, int64_t ldt, const float *src, int64_t ld, int64_t n,
                       int64_t rows, const float *cs, const float *sn, int64_t h, float mul,
                       int64_t W, int64_t Wp, rp_pairing pairing)
{
    for (int64_t r = 0; r < n; r++) {
        if (r + PF_ROWS < n) rp_prefetch_row(src + (r + PF_ROWS) * ld, W, 0);
        rot_row(dst + r * Wp, src + r * ld, cs ? cs + r * h : NULL, sn ? sn + r * h : NULL, h,
                1.0f, mul, W, Wp, pairing);
    }
    if (rows > n) memset(dst + n * Wp, 0, sizeof(float) * (size_t)((rows - n) * Wp));
    if (dt) transpose_into(dt, ldt, dst, Wp, rows, W);
}

/* ---- softmax pieces ---- */

/* The scores of query rows t0 .. t0+nr-1 and key block j0 (bcp keys, a multiple of RP_VL) into
 * P [nr, BC]: Q' K'^T. */
static void block_scores(const attn_ctx *c, const slots *sl, int64_t t0, int64_t nr, int64_t j0,
                         int64_t bcp)
{
    rp_tile_mm(sl->P, BC, sl->Q + t0 * c->Dp, c->Dp, 1, sl->Kt + j0, sl->ldkt, nr, bcp, c->D, 0);
}

/* The softmax step of one score row p[0 .. bcp) (bcp a multiple of RP_VL) of which the first n
 * (n >= 1) are keys the query sees: with mo the row's running maximum, returns the new maximum
 * mn = max(mo, p[0 .. n)), sets p[j] = e^(p[j] - mn) for j < n and 0 after, and sets *sum to
 * their sum. Two passes over the row: the maximum (lane-wise, then across the lanes), then the
 * exponentials, stored and summed lane-wise in the same loop (the lanes of the last vector past
 * n are 0; the vectors after it are only zeroed), then across the lanes. */
static inline float softmax_step(float *p, int64_t n, int64_t bcp, float mo, float *sum)
{
    int64_t nf = n / RP_VL * RP_VL;
    float tail[RP_VL];
    rp_vf vm = rp_vsplat(-FLT_MAX);
    for (int64_t j = 0; j < nf; j += RP_VL) vm = rp_vmax(vm, rp_vload(p + j));
    if (nf < n) {
        for (int64_t j = 0; j < RP_VL; j++) tail[j] = nf + j < n ? p[nf + j] : -FLT_MAX;
        vm = rp_vmax(vm, rp_vload(tail));
    }
    float bm = rp_vhmax(vm), mn = bm > mo ? bm : mo;
    rp_vf vmn = rp_vsplat(mn), vs = rp_vsplat(0.0f);
    for (int64_t j = 0; j < nf; j += RP_VL) {
        rp_vf e = rp_vexp_nonpos(rp_vload(p + j) - vmn);
        rp_vstore(p + j, e);
        vs += e;
    }
    int64_t j1 = nf;
    if (nf < n) {
        rp_vstore(tail, rp_vexp_nonpos(rp_vload(tail) - vmn));
        for (int64_t j = n - nf; j < RP_VL; j++) tail[j] = 0.0f;
        rp_vstore(p + nf, rp_vload(tail));
        vs += rp_vload(tail);
        j1 += RP_VL;
    }
    for (int64_t j = j1; j < bcp; j++) p[j] = 0.0f;
    *sum = rp_vhsum(vs);
    return mn;
}

/* ---- forward ---- */

/* The weights of query rows t0 .. t0+nr-1 over all S keys into att rows (S apart): e^(s - L)
 * by the scores of the same tile products, 0 on masked keys. */
static void block_weights_out(const attn_ctx *c, const slots *sl, float *att, int64_t t0,
                              int64_t nr)
{
    int64_t S = c->S, kmax = visible(c, t0 + nr - 1);
    for (int64_t j0 = 0; j0 < kmax; j0 += BC) {
        int64_t bc = kmax - j0 < BC ? kmax - j0 : BC, bcp = rp_vl_round(bc);
        block_scores(c, sl, t0, nr, j0, bcp);
        for (int64_t r = 0; r < nr; r++) {
            int64_t n = seen_in_block(c, t0 + r, j0, bc);
            float *p = sl->P + r * BC, *a = att + (t0 + r) * S + j0, L = sl->m[r];
            if (c->rel.terms && n) rel_scores(c, sl, t0 + r, r, j0, n);
            RP_SIMD
            for (int64_t j = 0; j < n; j++) {
                float x = p[j] - L;
                a[j] = rp_exp_nonpos(x < 0.0f ? x : 0.0f);
            }
            for (int64_t j = n; j < bc; j++) a[j] = 0.0f;
        }
    }
    for (int64_t r = 0; r < nr; r++)
        if (S > kmax) memset(att + (t0 + r) * S + kmax, 0, sizeof(float) * (size_t)(S - kmax));
}

/* The query blocks of one head over operands already in place: sl->Q (T rows, Dp apart), sl->Kt
 * (ldkt apart) and sl->V (Dvp apart) for the keys 0 .. kvis-1. Writes the output rows (oh, ldo
 * apart), lse[t] and the weights (att) where not NULL. */
static void forward_blocks(const attn_ctx *c, slots *sl, float *oh, float *lse, float *att)
{
    int64_t T = c->T, Dv = c->Dv, Dvp = c->Dvp, rb = row_block(T);
    rp_pairing pairing = c->cfg->scheme.pairing;
    for (int64_t t0 = 0; t0 < T; t0 += rb) {
        int64_t nr = T - t0 < rb ? T - t0 : rb, kmax = visible(c, t0 + nr - 1);
        for (int64_t r = 0; r < nr; r++) sl->m[r] = -FLT_MAX, sl->l[r] = 0.0f;
        memset(sl->O, 0, sizeof(float) * (size_t)(nr * Dvp));
        if (c->rel.terms) rel_block(c, sl, t0, nr, 0);
        for (int64_t j0 = 0; j0 < kmax; j0 += BC) {
            int64_t bc = kmax - j0 < BC ? kmax - j0 : BC, bcp = rp_vl_round(bc);
            block_scores(c, sl, t0, nr, j0, bcp);
            for (int64_t r = 0; r < nr; r++) {
                float *p = sl->P + r * BC;
                int64_t n = seen_in_block(c, t0 + r, j0, bc);
                if (n == 0) {
                    memset(p, 0, sizeof(float) * (size_t)bcp);
                    continue;
                }
                if (c->rel.terms) rel_scores(c, sl, t0 + r, r, j0, n);
                float mo = sl->m[r], sum;
                float mn = softmax_step(p, n, bcp, mo, &sum);
                if (sl->l[r] == 0.0f) { /* the row's first keys: nothing to rescale */
                    sl->l[r] = sum;
                } else if (mn > mo) {
                    float corr = rp_exp_nonpos(mo - mn);
                    float *o = sl->O + r * Dvp;
                    sl->l[r] = sl->l[r] * corr + sum;
                    RP_SIMD
                    for (int64_t d = 0; d < Dvp; d++) o[d] *= corr;
                    if (c->rel.terms & RP_TERM_EV) rel_rescale(c, sl, r, corr);
                } else {
                    sl->l[r] += sum;
                }
                sl->m[r] = mn;
                if (c->rel.terms & RP_TERM_EV) rel_weights(c, sl, t0 + r, r, j0, n);
            }
            /* O += P V'_blk (the weights of the keys past bc are 0: they are left out) */
            rp_tile_mm(sl->O, Dvp, sl->P, BC, 1, sl->V + j0 * Dvp, Dvp, nr, Dvp, bc, 1);
        }
        if (c->rel.terms & RP_TERM_EV) rel_out(c, sl, nr);
        for (int64_t r = 0; r < nr; r++) {
            int64_t t = t0 + r;
            float inv = 1.0f / sl->l[r];
            float *dst = oh + t * c->ldo, *o = sl->O + r * Dvp;
            if (c->ho) {
                rot_row(dst, o, c->oc + t * c->ho, c->os + t * c->ho, c->ho, (float)c->o_sign,
                        inv, Dv, Dv, pairing);
            } else {
                RP_SIMD
                for (int64_t d = 0; d < Dv; d++) dst[d] = o[d] * inv;
            }
            /* from here on m holds the row's log-sum-exp L */
            sl->m[r] += logf(sl->l[r]);
            if (lse) lse[t] = sl->m[r];
        }
        if (att) block_weights_out(c, sl, att, t0, nr);
    }
}

/* Q' = scale R(n) q [T, Dp] and K' = R(i) k [kvp, Dp] with its transpose Kt [D, ldkt] of head
 * (b, h) into the thread's slots (the forward and the backward start alike). */
static void build_qk(const attn_ctx *c, const slots *sl, int64_t b, int64_t h)
{
    int64_t T = c->T, D = c->D, kvis = c->kvis;
    build_rows(sl->Q, NULL, 0, c->q + b * T * c->ldq + h * D, c->ldq, T, T, c->qc, c->qs, c->hq,
               c->scale, D, c->Dp, c->cfg->scheme.pairing);
    build_rows(sl->K, sl->Kt, sl->ldkt, c->k + b * c->S * c->ldk + h * D, c->ldk, kvis,
               rp_vl_round(kvis), c->kc, c->ks, c->hk, 1.0f, D, c->Dp, c->cfg->scheme.pairing);
}

static void head_forward(const attn_ctx *c, float *ws, int64_t b, int64_t h)
{
    int64_t T = c->T, Dv = c->Dv, kvis = c->kvis;
    slots sl;
    thread_slots(&sl, ws, T, c->S, c->D, Dv, c->cfg);
    build_qk(c, &sl, b, h);
    /* V' = R(i) v */
    build_rows(sl.V, NULL, 0, c->v + b * c->S * c->ldv + h * Dv, c->ldv, kvis, rp_vl_round(kvis),
               c->vc, c->vs, c->hv, 1.0f, Dv, c->Dvp, c->cfg->scheme.pairing);
    if (c->rel.terms) rel_head(c, &sl, c->q + b * T * c->ldq + h * c->D, c->ldq, b, h, 0);
    forward_blocks(c, &sl, c->out + b * T * c->ldo + h * Dv,
                   c->lse_w ? c->lse_w + (b * c->H + h) * T : NULL,
                   c->att_w ? c->att_w + (b * c->H + h) * T * c->S : NULL);
}

/* ---- backward ---- */

static void head_backward(const attn_ctx *c, float *ws, int64_t b, int64_t h)
{
    int64_t T = c->T, D = c->D, Dv = c->Dv, Dp = c->Dp, Dvp = c->Dvp;
    int64_t rb = row_block(T), kvis = c->kvis, kvp = rp_vl_round(kvis);
    rp_pairing pairing = c->cfg->scheme.pairing;
    slots sl;
    thread_slots(&sl, ws, T, c->S, D, Dv, c->cfg);
    build_qk(c, &sl, b, h);
    /* V'^T into the V slot, through the dV slot (zeroed after) */
    build_rows(sl.dV, sl.V, sl.ldkt, c->v + b * c->S * c->ldv + h * Dv, c->ldv, kvis, kvp, c->vc, c->vs,
               c->hv, 1.0f, Dv, Dvp, pairing);
    memset(sl.dK, 0, sizeof(float) * (size_t)(kvp * Dp));
    memset(sl.dV, 0, sizeof(float) * (size_t)(kvp * Dvp));
    if (c->rel.terms) rel_head(c, &sl, c->q + b * T * c->ldq + h * D, c->ldq, b, h, 1);
    const float *doh = c->dout + b * T * c->ldo + h * Dv, *ofh = c->fout + b * T * c->ldo + h * Dv;
    const float *lse = c->lse + (b * c->H + h) * T;
    float *dqh = c->dq + b * T * c->ldq + h * D;
    for (int64_t t0 = 0; t0 < T; t0 += rb) {
        int64_t nr = T - t0 < rb ? T - t0 : rb, kmax = visible(c, t0 + nr - 1);
        for (int64_t r = 0; r < nr; r++) {
            int64_t t = t0 + r;
            const float *g = doh + t * c->ldo, *o = ofh + t * c->ldo;
            if (t + PF_ROWS < T) {
                rp_prefetch_row(g + PF_ROWS * c->ldo, Dv, 0);
                rp_prefetch_row(o + PF_ROWS * c->ldo, Dv, 0);
            }
            /* dY = R(-o_sign n) dout (roper: R(+n)) */
            if (c->ho)
                rot_row(sl.O + r * Dvp, g, c->oc + t * c->ho, c->os + t * c->ho, c->ho,
                        (float)-c->o_sign, 1.0f, Dv, Dvp, pairing);
            else
                rot_row(sl.O + r * Dvp, g, NULL, NULL, 0, 1.0f, 1.0f, Dv, Dvp, pairing);
            double dot = 0.0;
            for (int64_t d = 0; d < Dv; d++) dot += (double)g[d] * (double)o[d];
            sl.l[r] = (float)dot;
            sl.m[r] = lse[t];
        }
        memset(sl.dQ, 0, sizeof(float) * (size_t)(nr * Dp));
        if (c->rel.terms) rel_block(c, &sl, t0, nr, 1);
        for (int64_t j0 = 0; j0 < kmax; j0 += BC) {
            int64_t bc = kmax - j0 < BC ? kmax - j0 : BC, bcp = rp_vl_round(bc);
            block_scores(c, &sl, t0, nr, j0, bcp);
            /* dP = dY V'^T */
            rp_tile_mm(sl.dP, BC, sl.O, Dvp, 1, sl.V + j0, sl.ldkt, nr, bcp, Dv, 0);
            for (int64_t r = 0; r < nr; r++) {
                float *p = sl.P + r * BC, *dp = sl.dP + r * BC, L = sl.m[r], Dr = sl.l[r];
                int64_t n = seen_in_block(c, t0 + r, j0, bc);
                if (c->rel.terms && n) {
                    rel_scores(c, &sl, t0 + r, r, j0, n);
                    if (c->rel.terms & RP_TERM_EV) rel_dp(c, &sl, t0 + r, r, j0, n);
                }
                weights_and_ds(p, dp, n, bcp, L, Dr);
                if (c->rel.terms && n) rel_ds(c, &sl, t0 + r, r, j0, n);
            }
            /* dV' += P^T dY, dQ' += dS K', dK' += dS^T Q' */
            rp_tile_mm(sl.dV + j0 * Dvp, Dvp, sl.P, 1, BC, sl.O, Dvp, bc, Dvp, nr, 1);
            rp_tile_mm(sl.dQ, Dp, sl.dP, BC, 1, sl.K + j0 * Dp, Dp, nr, Dp, bc, 1);
            rp_tile_mm(sl.dK + j0 * Dp, Dp, sl.dP, 1, BC, sl.Q + t0 * Dp, Dp, bc, Dp, nr, 1);
        }
        if (c->rel.terms) rel_block_back(c, &sl, nr);
        /* dq += scale R(-n) dQ' */
        for (int64_t r = 0; r < nr; r++) {
            int64_t t = t0 + r;
            if (r + PF_ROWS < nr) rp_prefetch_row(dqh + (t + PF_ROWS) * c->ldq, D, 1);
            rot_row_back(dqh + t * c->ldq, sl.dQ + r * Dp, c->hq ? c->qc + t * c->hq : NULL,
                         c->hq ? c->qs + t * c->hq : NULL, c->hq, 1.0f, c->scale, D, pairing,
                         c->set);
        }
    }
    if (c->rel.terms) rel_head_back(c, &sl);
    /* dk += R(-i) dK', dv += R(-i) dV' (roper_legacy: R(-2i), its v table) */
    float *dkh = c->dk + b * c->S * c->ldk + h * D, *dvh = c->dv + b * c->S * c->ldv + h * Dv;
    for (int64_t i = 0; i < kvis; i++) {
        if (i + PF_ROWS < kvis) {
            rp_prefetch_row(dkh + (i + PF_ROWS) * c->ldk, D, 1);
            rp_prefetch_row(dvh + (i + PF_ROWS) * c->ldv, Dv, 1);
        }
        rot_row_back(dkh + i * c->ldk, sl.dK + i * Dp, c->hk ? c->kc + i * c->hk : NULL,
                     c->hk ? c->ks + i * c->hk : NULL, c->hk, 1.0f, 1.0f, D, pairing, c->set);
        rot_row_back(dvh + i * c->ldv, sl.dV + i * Dvp, c->hv ? c->vc + i * c->hv : NULL,
                     c->hv ? c->vs + i * c->hv : NULL, c->hv, 1.0f, 1.0f, Dv, pairing, c->set);
    }
    /* keys no query sees have gradient 0 */
    for (int64_t i = kvis; c->set && i < c->S; i++) {
        memset(dkh + i * c->ldk, 0, sizeof(float) * (size_t)D);
        memset(dvh + i * c->ldv, 0, sizeof(float) * (size_t)Dv);
    }
}

/* The loop over the (b, h) pairs: nthreads OpenMP threads, each with its own scratch slice. */
static void run_pairs(const attn_ctx *c, int64_t B, int nthreads, int backward)
{
    int64_t npairs = B * c->H;
    int nt = nthreads < 1 ? 1 : nthreads;
    if ((int64_t)nt > npairs) nt = (int)npairs;
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
#endif
    for (int64_t p = 0; p < npairs; p++) {
        int id = 0;
#ifdef _OPENMP
        id = omp_get_thread_num();
#endif
        float *ws = c->slices + (int64_t)id * c->slice;
        if (backward)
            head_backward(c, ws, p / c->H, p % c->H);
        else
            head_forward(c, ws, p / c->H, p % c->H);
    }
}

void rp_attention_forward(const rp_attn_io *io, const rp_attn_cfg *cfg)
{
    attn_ctx c;
    ctx_init(&c, io, cfg, NULL);
    c.out = io->out, c.lse_w = io->lse, c.att_w = io->att;
    rp_fpmode fm = rp_fp_flush_begin();
    run_pairs(&c, io->B, io->nthreads, 0);
    rp_fp_flush_end(fm);
}

void rp_attention_backward(const rp_attn_io *io, const rp_attn_cfg *cfg)
{
    attn_ctx c;
    ctx_init(&c, io, cfg, io->drel);
    c.dq = io->dq, c.dk = io->dk, c.dv = io->dv, c.dout = io->dout, c.fout = io->out;
    c.set = io->set != 0;
    c.lse = io->lse;
    rp_fpmode fm = rp_fp_flush_begin();
    run_pairs(&c, io->B, io->nthreads, 1);
    if (c.rel.terms && io->drel) rel_reduce(&c, io->B, io->nthreads);
    rp_fp_flush_end(fm);
}

/* ---- decoding ------------------------------------------------------------------------------
 *
 * The cache of one layer keeps, per head, the rotated keys transposed (Kt [D, capp]) and the
 * rotated values as rows (V [cap, Dvp]), the operands forward_blocks reads: a decode step writes
 * one column and one row and attends over the cache where it lies. */

int64_t rp_attention_cache_ld(int64_t cap)
{
    int64_t capp = rp_vl_round(cap);
    return capp % 256 == 0 ? capp + 16 : capp;
}

/* The floats of one head's part of a cache. */
static int64_t cache_head_floats(int64_t cap, int64_t D, int64_t Dv)
{
    return D * rp_attention_cache_ld(cap) + cap * rp_vl_round(Dv);
}

/* a * b + c for sizes >= 0, saturating at INT64_MAX (core/sys/checked.h). */
static int64_t sat_mul_add(int64_t a, int64_t b, int64_t c)
{
    return rp_sat_add_i64(rp_sat_mul_i64(a, b), c);
}

int64_t rp_attention_cache_floats(int64_t cap, int64_t H, int64_t D, int64_t Dv)
{
    if (cap > INT64_MAX / 2 || Dv > INT64_MAX / 2) return INT64_MAX;
    int64_t head = sat_mul_add(D, rp_attention_cache_ld(cap), 0);
    head = head == INT64_MAX ? head : sat_mul_add(cap, rp_vl_round(Dv), head);
    return head == INT64_MAX ? head : sat_mul_add(H, head, 0);
}

/* Tables for one position (q/k, v, output: at most D + 2 Dv floats), the query and key rows
 * (Dp each), a score row (BC), the output row (Dvp), m and l; the relative terms' part of a
 * forward of one query over cap keys. */
int64_t rp_attention_decode_scratch_floats(const rp_attn_cfg *cfg, int64_t cap, int64_t H,
                                           int64_t D, int64_t Dv)
{
    return 2 * (D + Dv) + 2 * rp_vl_round(D) + BC + rp_vl_round(Dv) + 2 +
           rel_call_floats(cfg, 1, 1, cap, H, D, Dv, 0) +
           rel_thread_floats(cfg, 1, cap, D, Dv);
}

/* The rotated placements of decoding, in the order of their rows (q, k, v, o): each one's width,
 * angle factor and xPos side. Returns their number. */
typedef struct {
    int64_t d_rot;
    double scale;
    int side;
} dec_place;

static int dec_places(const rp_pe_scheme *s, dec_place pl[4])
{
    const dec_place all[4] = {{s->d_rot_q, 1.0, 1}, {s->d_rot_k, 1.0, -1},
                              {s->d_rot_v, s->v_angle, -1}, {s->d_rot_o, 1.0, 1}};
    int n = 0;
    for (int i = 0; i < 4; i++)
        if (all[i].d_rot) pl[n++] = all[i];
    return n;
}

int64_t rp_attention_decode_rows_floats(const rp_attn_cfg *cfg, int64_t cap)
{
    rp_pe_scheme s = cfg->scheme;
    dec_place pl[4];
    int n = dec_places(&s, pl);
    int64_t total = 0;
    for (int i = 0; i < n; i++) total = sat_mul_add(cap, pl[i].d_rot, total);
    return total;
}

void rp_attention_decode_rows(float *rows, const rp_attn_cfg *cfg, int64_t cap)
{
    rp_pe_scheme s = cfg->scheme;
    dec_place pl[4];
    int n = dec_places(&s, pl);
    for (int i = 0; i < n; i++) {
        int64_t half = pl[i].d_rot / 2;
        rp_rope_freq_tables(rows, rows + cap * half, cfg->freq, pl[i].d_rot, s.base, pl[i].scale,
                            pl[i].side, cfg->pos, 0, cap);
        rows += cap * pl[i].d_rot;
    }
}

/* The cos/sin row of sequence index pos (at its row of the explicit positions vpos when not
 * NULL) for placement pl: from the built rows at *tab (tables of cap positions; *tab moves past
 * them), or, *tab NULL, computed into *p (which moves past it). */
static void one_row(const float **cs, const float **sn, float **p, const float **tab,
                    int64_t cap, int64_t pos, const dec_place *pl, double base,
                    const rp_rope_freq *fq, const int64_t *vpos)
{
    int64_t half = pl->d_rot / 2;
    if (*tab) {
        *cs = *tab + pos * half, *sn = *tab + (cap + pos) * half;
        *tab += cap * pl->d_rot;
        return;
    }
    float *row = *p;
    *p += pl->d_rot;
    rp_rope_freq_tables(row, row + half, fq, pl->d_rot, base, pl->scale, pl->side,
                        vpos ? vpos + pos * rp_rope_freq_axes(fq) : NULL, pos, 1);
    *cs = row, *sn = row + half;
}

void rp_attention_decode(float *out, float *scratch, float *q, const float *k, const float *v,
                         float *cache, int64_t cap, int64_t pos, int64_t H, int64_t D, int64_t Dv,
                         const rp_attn_cfg *cfg)
{
    rp_fpmode fm = rp_fp_flush_begin();
    rp_pe_scheme s = cfg->scheme;
    /* the query over keys 0 .. pos: T = 1 at q_offset pos, causal */
    rp_attn_cfg dc = *cfg;
    dc.causal = 1;
    dc.q_offset = pos;
    attn_ctx c;
    memset(&c, 0, sizeof c);
    ctx_dims(&c, 1, pos + 1, H, D, Dv);
    c.ldo = H * Dv;
    c.kvis = c.S;
    c.cfg = &dc;
    c.scale = (float)(cfg->scale * rp_rope_freq_score_scale(cfg->freq));
    float *p = scratch;
    const float *cs[4] = {NULL}, *sn[4] = {NULL};
    const float *tab = cfg->rope_rows;
    dec_place pl[4];
    int np = dec_places(&s, pl);
    for (int i = 0; i < np; i++) one_row(&cs[i], &sn[i], &p, &tab, cap, pos, &pl[i], s.base,
                                         cfg->freq, cfg->pos);
    /* the rows by placement (dec_places keeps the order q, k, v, o) */
    int i = 0;
    const float *qc = NULL, *qs = NULL, *kc = NULL, *ks = NULL, *vc = NULL, *vs = NULL;
    if (s.d_rot_q) qc = cs[i], qs = sn[i++];
    if (s.d_rot_k) kc = cs[i], ks = sn[i++];
    if (s.d_rot_v) vc = cs[i], vs = sn[i++];
    if (s.d_rot_o) {
        c.oc = cs[i], c.os = sn[i];
        c.ho = s.d_rot_o / 2;
        c.o_sign = s.o_sign;
    }
    int64_t hq = s.d_rot_q / 2, hk = s.d_rot_k / 2, hv = s.d_rot_v / 2, Dp = c.Dp, Dvp = c.Dvp;
    int64_t capp = rp_attention_cache_ld(cap), hs = cache_head_floats(cap, D, Dv);
    slots sl;
    memset(&sl, 0, sizeof sl);
    sl.Q = p, sl.K = sl.Q + Dp, sl.P = sl.K + Dp, sl.O = sl.P + BC, sl.m = sl.O + Dvp;
    sl.l = sl.m + 1;
    sl.ldkt = capp;
    float *call = sl.l + 1;
    rel_init(&c, call, NULL);
    rel_thread_slots(&sl.rel, call + rel_call_floats(cfg, 1, 1, cap, H, D, Dv, 0), cfg, 1,
                         cap, D, Dv);
    for (int64_t h = 0; h < H; h++) {
        float *kt = cache + h * hs, *vr = kt + D * capp;
        /* q by +pos (in place, then scaled into Q'), k by +pos into column pos of Kt, v by
         * +v_angle pos into row pos of V (zero padded) */
        rot_row(sl.K, q + h * D, qc, qs, hq, 1.0f, 1.0f, D, D, s.pairing);
        memcpy(q + h * D, sl.K, sizeof(float) * (size_t)D);
        rot_row(sl.Q, sl.K, NULL, NULL, 0, 1.0f, c.scale, D, Dp, s.pairing);
        rot_row(sl.K, k + h * D, kc, ks, hk, 1.0f, 1.0f, D, D, s.pairing);
        for (int64_t d = 0; d < D; d++) kt[d * capp + pos] = sl.K[d];
        rot_row(vr + pos * Dvp, v + h * Dv, vc, vs, hv, 1.0f, 1.0f, Dv, Dvp, s.pairing);
        sl.Kt = kt, sl.V = vr;
        if (c.rel.terms) rel_head(&c, &sl, q + h * D, D, 0, h, 0);
        forward_blocks(&c, &sl, out + h * Dv, NULL, NULL);
    }
    rp_fp_flush_end(fm);
}

static rp_status check_d_rot(const char *name, int64_t d_rot, int64_t width, const char *wname)
{
    if (d_rot <= 0 || d_rot % 2 != 0)
        return rp_error(RP_ERR_ARG, "%s must be even and positive, got %lld", name,
                        (long long)d_rot);
    if (d_rot > width)
        return rp_error(RP_ERR_ARG, "%s %lld exceeds %s %lld", name, (long long)d_rot, wname,
                        (long long)width);
    return RP_OK;
}

rp_status rp_attention_check_positions(const rp_attn_cfg *cfg, int64_t T, int64_t S,
                                       int64_t *qlast, int64_t *klast)
{
    if (cfg->pos_offset != 0)
        return rp_error(RP_ERR_ARG, "pos_offset %lld and explicit positions exclude each other "
                                    "(shift the positions instead)", (long long)cfg->pos_offset);
    int64_t need = cfg->q_offset + T > S ? cfg->q_offset + T : S;
    if (cfg->pos_rows < need)
        return rp_error(RP_ERR_ARG, "positions hold %lld rows; this call reads %lld (keys 0..%lld, "
                                    "queries %lld..%lld)", (long long)cfg->pos_rows,
                        (long long)need, (long long)(S - 1), (long long)cfg->q_offset,
                        (long long)(cfg->q_offset + T - 1));
    int A = rp_rope_freq_axes(cfg->freq);
    const int64_t lim = (int64_t)1 << 53;
    int64_t hi = 0;
    for (int64_t i = 0; i < need * A; i++) {
        int64_t p = cfg->pos[i];
        if (p < -lim || p > lim)
            return rp_error(RP_ERR_ARG, "positions: row %lld, axis %lld holds %lld; positions "
                                        "must be within 2^53", (long long)(i / A),
                            (long long)(i % A), (long long)p);
        if (p < 0 && cfg->freq && cfg->freq->angles)
            return rp_error(RP_ERR_ARG, "positions: row %lld holds %lld, below 0, where the angle "
                                        "table starts", (long long)(i / A), (long long)p);
        if (p > hi) hi = p;
    }
    *qlast = *klast = hi;
    return RP_OK;
}

rp_status rp_attention_check(const rp_tensor *q, const rp_tensor *k, const rp_tensor *v,
                             const rp_attn_cfg *cfg)
{
    char got[RP_SHAPE_STR_LEN], want[RP_SHAPE_STR_LEN];
    if (q->ndim != 4)
        return rp_error(RP_ERR_SHAPE, "expected q as [B x T x H x D], got %s",
                        rp_tensor_shape_str(got, sizeof got, q));
    for (int i = 0; i < 4; i++)
        if (q->shape[i] < 1)
            return rp_error(RP_ERR_SHAPE, "q %s has an empty dim",
                            rp_tensor_shape_str(got, sizeof got, q));
    int64_t B = q->shape[0], H = q->shape[2], D = q->shape[3];
    if (k->ndim != 4 || k->shape[0] != B || k->shape[1] < 1 || k->shape[2] != H ||
        k->shape[3] != D) {
        rp_tensor_shape_str(got, sizeof got, k);
        if (k->ndim != 4 || k->shape[1] < 1)
            return rp_error(RP_ERR_SHAPE, "expected k as [%lld x S x %lld x %lld], got %s",
                            (long long)B, (long long)H, (long long)D, got);
        int64_t w[4] = {B, k->shape[1], H, D};
        return rp_error(RP_ERR_SHAPE, "expected k as %s, got %s",
                        rp_shape_str(want, sizeof want, 4, w), got);
    }
    int64_t S = k->shape[1];
    if (v->ndim != 4 || v->shape[0] != B || v->shape[1] != S || v->shape[2] != H ||
        v->shape[3] < 1) {
        rp_tensor_shape_str(got, sizeof got, v);
        if (v->ndim != 4 || v->shape[3] < 1)
            return rp_error(RP_ERR_SHAPE, "expected v as [%lld x %lld x %lld x Dv], got %s",
                            (long long)B, (long long)S, (long long)H, got);
        int64_t w[4] = {B, S, H, v->shape[3]};
        return rp_error(RP_ERR_SHAPE, "expected v as %s, got %s",
                        rp_shape_str(want, sizeof want, 4, w), got);
    }
    const rp_pe_scheme sc = cfg->scheme;
    if (!rp_pe_mode_of(sc.pe)) return rp_error(RP_ERR_ARG, "unknown pe %d", (int)sc.pe);
    if (sc.pairing != RP_PAIR_HALF && sc.pairing != RP_PAIR_INTERLEAVED)
        return rp_error(RP_ERR_ARG, "unknown pairing %d", (int)sc.pairing);
    if (!isfinite(cfg->scale))
        return rp_error(RP_ERR_ARG, "scale must be finite");
    RP_TRY(rp_pe_scheme_check(&sc));
    if (sc.rotate && (!(sc.base > 0.0) || !isfinite(sc.base)))
        return rp_error(RP_ERR_ARG, "base must be positive and finite");
    int64_t Dv = v->shape[3];
    if (sc.rotate & RP_ROT_Q) RP_TRY(check_d_rot("d_rot_q", sc.d_rot_q, D, "d_k"));
    if (sc.rotate & RP_ROT_K) RP_TRY(check_d_rot("d_rot_k", sc.d_rot_k, D, "d_k"));
    if (sc.rotate & RP_ROT_V) RP_TRY(check_d_rot("d_rot_v", sc.d_rot_v, Dv, "d_v"));
    if (sc.rotate & RP_ROT_O) RP_TRY(check_d_rot("d_rot_o", sc.d_rot_o, Dv, "d_v"));
    if (cfg->pos_offset < 0)
        return rp_error(RP_ERR_ARG, "pos_offset must be >= 0, got %lld",
                        (long long)cfg->pos_offset);
    if (cfg->q_offset < 0)
        return rp_error(RP_ERR_ARG, "q_offset must be >= 0, got %lld", (long long)cfg->q_offset);
    int64_t qlast = cfg->pos_offset + cfg->q_offset + q->shape[1] - 1;
    int64_t klast = cfg->pos_offset + S - 1;
    if (cfg->pos) RP_TRY(rp_attention_check_positions(cfg, q->shape[1], S, &qlast, &klast));
    RP_TRY(rp_pe_scheme_check_freq(&sc, cfg->freq, qlast, klast));
    return rel_check(cfg);
}

rp_status rp_attention(rp_tensor *out, rp_tensor *att, const rp_tensor *q, const rp_tensor *k,
                       const rp_tensor *v, const rp_attn_cfg *cfg)
{
    memset(out, 0, sizeof *out);
    memset(att, 0, sizeof *att);
    RP_TRY(rp_attention_check(q, k, v, cfg));
    rp_attn_cfg c = *cfg;
    int64_t B = q->shape[0], T = q->shape[1], H = q->shape[2], D = q->shape[3];
    int64_t S = k->shape[1], Dv = v->shape[3];
    rp_tensor qc = {0}, kc = {0}, vc = {0}, scratch = {0};
    rp_status st = rp_tensor_contiguous(&qc, q);
    if (st == RP_OK) st = rp_tensor_contiguous(&kc, k);
    if (st == RP_OK) st = rp_tensor_contiguous(&vc, v);
    int64_t so[4] = {B, T, H, Dv}, sa[4] = {B, H, T, S};
    int nthreads = rp_max_threads();
    int64_t ns = rp_attention_scratch_floats(&c, B, T, S, H, D, Dv, nthreads);
    if (st == RP_OK) st = rp_tensor_new(out, 4, so);
    if (st == RP_OK) st = rp_tensor_new(att, 4, sa);
    if (st == RP_OK) st = rp_tensor_new(&scratch, 1, &ns);
    if (st == RP_OK && (T > RP_I32_MAX || S > RP_I32_MAX || D > RP_I32_MAX || Dv > RP_I32_MAX))
        st = rp_error(RP_ERR_SHAPE, "attention: a dim exceeds 2^31-1");
    if (st == RP_OK) {
        rp_attn_io io = {.B = B, .T = T, .S = S, .H = H, .D = D, .Dv = Dv,
                         .q = rp_tensor_data(&qc), .k = rp_tensor_data(&kc),
                         .v = rp_tensor_data(&vc), .ldq = H * D, .ldk = H * D, .ldv = H * Dv,
                         .out = rp_tensor_data(out), .ldo = H * Dv, .att = rp_tensor_data(att),
                         .scratch = rp_tensor_data(&scratch), .nthreads = nthreads};
        rp_attention_forward(&io, &c);
    }
    rp_tensor_release(&qc);
    rp_tensor_release(&kc);
    rp_tensor_release(&vc);
    rp_tensor_release(&scratch);
    if (st != RP_OK) {
        rp_tensor_release(out);
        rp_tensor_release(att);
    }
    return st;
}
