#include "attention.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "attention_impl.h"
#include "checked.h"
#include "parallel.h"
#include "tile.h"

rp_status rp_attn_scheme(const rp_attn_cfg *cfg, rp_pe_scheme *s)
{
    int64_t d_rot[4] = {cfg->d_rot_q > 0 ? cfg->d_rot_q : cfg->d_rot_qk,
                        cfg->d_rot_k > 0 ? cfg->d_rot_k : cfg->d_rot_qk, cfg->d_rot_v,
                        cfg->d_rot_o > 0 ? cfg->d_rot_o : cfg->d_rot_v};
    return rp_pe_scheme_init(s, cfg->pe, cfg->rotate, d_rot, cfg->base, cfg->pairing);
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
 * its transpose [D, Sp], V' = R(i) v [Sp, Dvp] (forward) or its transpose [Dv, Sp] (backward);
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

/* The slots of a thread slice: attention_impl.h. */
#define NSLOTS 12

/* The slot sizes in the order of the slots struct. */
static void slot_sizes(int64_t sizes[NSLOTS], int64_t T, int64_t S, int64_t D, int64_t Dv)
{
    int64_t Dp = rp_vl_round(D), Dvp = rp_vl_round(Dv), Sp = rp_vl_round(S), rb = row_block(T);
    const int64_t z[NSLOTS] = {T * Dp,  Sp * Dp, D * Sp,   Sp * Dvp, Sp * Dp, Sp * Dvp,
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
    sl->ldkt = rp_vl_round(S);
    rpa_rel_thread_slots(&sl->rel, ws, cfg, T, S, D, Dv);
}

static int64_t thread_floats(int64_t T, int64_t S, int64_t D, int64_t Dv, const rp_attn_cfg *cfg)
{
    int64_t sizes[NSLOTS], n = 0;
    slot_sizes(sizes, T, S, D, Dv);
    for (int i = 0; i < NSLOTS; i++) n += sizes[i];
    return n + rpa_rel_thread_floats(cfg, T, S, D, Dv);
}

/* Layout: the cos/sin tables, the relative terms' part of the call, the thread slices. */
int64_t rp_attention_scratch_floats(const rp_attn_cfg *cfg, int64_t B, int64_t T, int64_t S,
                                    int64_t H, int64_t D, int64_t Dv, int nthreads)
{
    if (nthreads < 1) nthreads = 1;
    return table_floats(T, S, D, Dv) + rpa_rel_call_floats(cfg, B, T, S, H, D, Dv, 1) +
           (int64_t)nthreads * thread_floats(T, S, D, Dv, cfg);
}

static void ctx_dims(attn_ctx *c, int64_t T, int64_t S, int64_t H, int64_t D, int64_t Dv)
{
    c->T = T, c->S = S, c->H = H, c->D = D, c->Dv = Dv;
    c->Dp = rp_vl_round(D), c->Dvp = rp_vl_round(Dv), c->Sp = rp_vl_round(S);
}

static void ctx_init(attn_ctx *c, float *scratch, int64_t B, int64_t T, int64_t S, int64_t H,
                     int64_t D, int64_t Dv, int64_t ldq, int64_t ldk, int64_t ldv, int64_t ldo,
                     const rp_attn_cfg *cfg, const rp_attn_rel_grad *drel)
{
    memset(c, 0, sizeof *c);
    ctx_dims(c, T, S, H, D, Dv);
    c->ldq = ldq, c->ldk = ldk, c->ldv = ldv, c->ldo = ldo;
    c->cfg = cfg;
    c->scale = (float)(cfg->scale * rp_rope_freq_score_scale(cfg->freq));
    c->kvis = cfg->causal && cfg->q_offset + T < S ? cfg->q_offset + T : S;
    float *call = scratch + table_floats(T, S, D, Dv);
    rpa_rel_init(c, call, drel);
    c->slices = call + rpa_rel_call_floats(cfg, B, T, S, H, D, Dv, 1);
    c->slice = thread_floats(T, S, D, Dv, cfg);
    rp_pe_scheme s;
    (void)rp_attn_scheme(cfg, &s);
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
    if (s.d_rot_k) {
        int64_t h = c->hk = s.d_rot_k / 2;
        float *kc = p, *ks = p + S * h;
        p += 2 * S * h;
        rp_rope_freq_tables(kc, ks, fq, s.d_rot_k, s.base, 1.0, -1, NULL, p0, S);
        c->kc = kc, c->ks = ks;
    }
    if (s.d_rot_q) {
        int64_t h = c->hq = s.d_rot_q / 2;
        if (h == c->hk && qo + T <= S && !xp) {
            c->qc = c->kc + qo * h, c->qs = c->ks + qo * h;
        } else {
            float *qc = p, *qs = p + T * h;
            p += 2 * T * h;
            rp_rope_freq_tables(qc, qs, fq, s.d_rot_q, s.base, 1.0, 1, NULL, p0 + qo, T);
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
            rp_rope_freq_tables(vc, vs, fq, s.d_rot_v, s.base, s.v_angle, -1, NULL, p0, S);
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
            rp_rope_freq_tables(oc, os, fq, s.d_rot_o, s.base, 1.0, 1, NULL, p0 + qo, T);
            c->oc = oc, c->os = os;
        }
    }
}

/* ---- rows: rotation, scaling, padding ---- */

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
 * a strided gradient row. */
static inline void rot_row_back(float *restrict dst, const float *restrict g, const float *cs,
                                const float *sn, int64_t h, float sgn, float mul, int64_t W,
                                rp_pairing pairing)
{
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

/* Rows 0 .. n-1 of a strided input (src, ld) rotated by the table rows 0 .. n-1 (h pairs; h = 0:
 * copied) into dst [rows, Wp] (rows >= n zeroed up to `rows`); optionally also transposed into
 * dt [W, ldt] (columns n .. rows-1 zeroed). */
static void build_rows(float *dst, float *dt, int64_t ldt, const float *src, int64_t ld, int64_t n,
                       int64_t rows, const float *cs, const float *sn, int64_t h, float mul,
                       int64_t W, int64_t Wp, rp_pairing pairing)
{
    for (int64_t r = 0; r < n; r++)
        rot_row(dst + r * Wp, src + r * ld, cs ? cs + r * h : NULL, sn ? sn + r * h : NULL, h,
                1.0f, mul, W, Wp, pairing);
    if (rows > n) memset(dst + n * Wp, 0, sizeof(float) * (size_t)((rows - n) * Wp));
    if (!dt) return;
    for (int64_t d = 0; d < W; d++) {
        float *col = dt + d * ldt;
        for (int64_t r = 0; r < rows; r++) col[r] = dst[r * Wp + d];
    }
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
 * are keys the query sees: with mo the row's running maximum, returns the new maximum
 * mn = max(mo, p[0 .. n)), sets p[j] = e^(p[j] - mn) for j < n and 0 after, and adds their sum
 * to *sum. The maximum and the sum go over whole vectors (lane-wise, then across the lanes). */
static inline float softmax_step(float *p, int64_t n, int64_t bcp, float mo, float *sum)
{
    for (int64_t j = n; j < bcp; j++) p[j] = -FLT_MAX;
    rp_vf vm = rp_vload(p);
    for (int64_t j = RP_VL; j < bcp; j += RP_VL) vm = rp_vmax(vm, rp_vload(p + j));
    float bm = rp_vhmax(vm), mn = bm > mo ? bm : mo;
    RP_SIMD
    for (int64_t j = 0; j < bcp; j++) p[j] = rp_exp_nonpos(p[j] - mn);
    for (int64_t j = n; j < bcp; j++) p[j] = 0.0f;
    rp_vf vs = rp_vload(p);
    for (int64_t j = RP_VL; j < bcp; j += RP_VL) vs += rp_vload(p + j);
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
            if (c->rel.kind && n) rpa_rel_scores(c, sl, t0 + r, r, j0, n);
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
    rp_pairing pairing = c->cfg->pairing;
    for (int64_t t0 = 0; t0 < T; t0 += rb) {
        int64_t nr = T - t0 < rb ? T - t0 : rb, kmax = visible(c, t0 + nr - 1);
        for (int64_t r = 0; r < nr; r++) sl->m[r] = -FLT_MAX, sl->l[r] = 0.0f;
        memset(sl->O, 0, sizeof(float) * (size_t)(nr * Dvp));
        if (c->rel.kind) rpa_rel_block(c, sl, t0, nr, 0);
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
                if (c->rel.kind) rpa_rel_scores(c, sl, t0 + r, r, j0, n);
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
                    if (c->rel.kind == RP_REL_SHAW) rpa_rel_rescale(c, sl, r, corr);
                } else {
                    sl->l[r] += sum;
                }
                sl->m[r] = mn;
                if (c->rel.kind == RP_REL_SHAW) rpa_rel_weights(c, sl, t0 + r, r, j0, n);
            }
            /* O += P V'_blk (the weights of the keys past bc are 0: they are left out) */
            rp_tile_mm(sl->O, Dvp, sl->P, BC, 1, sl->V + j0 * Dvp, Dvp, nr, Dvp, bc, 1);
        }
        if (c->rel.kind == RP_REL_SHAW) rpa_rel_out(c, sl, nr);
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

/* Q' = scale R(n) q [T, Dp] and K' = R(i) k [kvp, Dp] with its transpose Kt [D, Sp] of head
 * (b, h) into the thread's slots (the forward and the backward start alike). */
static void build_qk(const attn_ctx *c, const slots *sl, int64_t b, int64_t h)
{
    int64_t T = c->T, D = c->D, kvis = c->kvis;
    build_rows(sl->Q, NULL, 0, c->q + b * T * c->ldq + h * D, c->ldq, T, T, c->qc, c->qs, c->hq,
               c->scale, D, c->Dp, c->cfg->pairing);
    build_rows(sl->K, sl->Kt, c->Sp, c->k + b * c->S * c->ldk + h * D, c->ldk, kvis,
               rp_vl_round(kvis), c->kc, c->ks, c->hk, 1.0f, D, c->Dp, c->cfg->pairing);
}

static void head_forward(const attn_ctx *c, float *ws, int64_t b, int64_t h)
{
    int64_t T = c->T, Dv = c->Dv, kvis = c->kvis;
    slots sl;
    thread_slots(&sl, ws, T, c->S, c->D, Dv, c->cfg);
    build_qk(c, &sl, b, h);
    /* V' = R(i) v */
    build_rows(sl.V, NULL, 0, c->v + b * c->S * c->ldv + h * Dv, c->ldv, kvis, rp_vl_round(kvis),
               c->vc, c->vs, c->hv, 1.0f, Dv, c->Dvp, c->cfg->pairing);
    if (c->rel.kind) rpa_rel_head(c, &sl, c->q + b * T * c->ldq + h * c->D, c->ldq, b, h, 0);
    forward_blocks(c, &sl, c->out + b * T * c->ldo + h * Dv,
                   c->lse_w ? c->lse_w + (b * c->H + h) * T : NULL,
                   c->att_w ? c->att_w + (b * c->H + h) * T * c->S : NULL);
}

/* ---- backward ---- */

static void head_backward(const attn_ctx *c, float *ws, int64_t b, int64_t h)
{
    int64_t T = c->T, D = c->D, Dv = c->Dv, Dp = c->Dp, Dvp = c->Dvp, Sp = c->Sp;
    int64_t rb = row_block(T), kvis = c->kvis, kvp = rp_vl_round(kvis);
    rp_pairing pairing = c->cfg->pairing;
    slots sl;
    thread_slots(&sl, ws, T, c->S, D, Dv, c->cfg);
    build_qk(c, &sl, b, h);
    /* V'^T into the V slot, through the dV slot (zeroed after) */
    build_rows(sl.dV, sl.V, Sp, c->v + b * c->S * c->ldv + h * Dv, c->ldv, kvis, kvp, c->vc, c->vs,
               c->hv, 1.0f, Dv, Dvp, pairing);
    memset(sl.dK, 0, sizeof(float) * (size_t)(kvp * Dp));
    memset(sl.dV, 0, sizeof(float) * (size_t)(kvp * Dvp));
    if (c->rel.kind) rpa_rel_head(c, &sl, c->q + b * T * c->ldq + h * D, c->ldq, b, h, 1);
    const float *doh = c->dout + b * T * c->ldo + h * Dv, *ofh = c->fout + b * T * c->ldo + h * Dv;
    const float *lse = c->lse + (b * c->H + h) * T;
    float *dqh = c->dq + b * T * c->ldq + h * D;
    for (int64_t t0 = 0; t0 < T; t0 += rb) {
        int64_t nr = T - t0 < rb ? T - t0 : rb, kmax = visible(c, t0 + nr - 1);
        for (int64_t r = 0; r < nr; r++) {
            int64_t t = t0 + r;
            const float *g = doh + t * c->ldo, *o = ofh + t * c->ldo;
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
        if (c->rel.kind) rpa_rel_block(c, &sl, t0, nr, 1);
        for (int64_t j0 = 0; j0 < kmax; j0 += BC) {
            int64_t bc = kmax - j0 < BC ? kmax - j0 : BC, bcp = rp_vl_round(bc);
            block_scores(c, &sl, t0, nr, j0, bcp);
            /* dP = dY V'^T */
            rp_tile_mm(sl.dP, BC, sl.O, Dvp, 1, sl.V + j0, Sp, nr, bcp, Dv, 0);
            for (int64_t r = 0; r < nr; r++) {
                float *p = sl.P + r * BC, *dp = sl.dP + r * BC, L = sl.m[r], Dr = sl.l[r];
                int64_t n = seen_in_block(c, t0 + r, j0, bc);
                if (c->rel.kind && n) {
                    rpa_rel_scores(c, &sl, t0 + r, r, j0, n);
                    if (c->rel.kind == RP_REL_SHAW) rpa_rel_dp(c, &sl, t0 + r, r, j0, n);
                }
                RP_SIMD
                for (int64_t j = 0; j < n; j++) {
                    float x = p[j] - L;
                    float e = rp_exp_nonpos(x < 0.0f ? x : 0.0f);
                    p[j] = e;
                    dp[j] = e * (dp[j] - Dr);
                }
                for (int64_t j = n; j < bcp; j++) p[j] = dp[j] = 0.0f;
                if (c->rel.kind && n) rpa_rel_ds(c, &sl, t0 + r, r, j0, n);
            }
            /* dV' += P^T dY, dQ' += dS K', dK' += dS^T Q' */
            rp_tile_mm(sl.dV + j0 * Dvp, Dvp, sl.P, 1, BC, sl.O, Dvp, bc, Dvp, nr, 1);
            rp_tile_mm(sl.dQ, Dp, sl.dP, BC, 1, sl.K + j0 * Dp, Dp, nr, Dp, bc, 1);
            rp_tile_mm(sl.dK + j0 * Dp, Dp, sl.dP, 1, BC, sl.Q + t0 * Dp, Dp, bc, Dp, nr, 1);
        }
        if (c->rel.kind) rpa_rel_block_back(c, &sl, nr);
        /* dq += scale R(-n) dQ' */
        for (int64_t r = 0; r < nr; r++) {
            int64_t t = t0 + r;
            rot_row_back(dqh + t * c->ldq, sl.dQ + r * Dp, c->hq ? c->qc + t * c->hq : NULL,
                         c->hq ? c->qs + t * c->hq : NULL, c->hq, 1.0f, c->scale, D, pairing);
        }
    }
    if (c->rel.kind) rpa_rel_head_back(c, &sl);
    /* dk += R(-i) dK', dv += R(-i) dV' (roper_legacy: R(-2i), its v table) */
    float *dkh = c->dk + b * c->S * c->ldk + h * D, *dvh = c->dv + b * c->S * c->ldv + h * Dv;
    for (int64_t i = 0; i < kvis; i++) {
        rot_row_back(dkh + i * c->ldk, sl.dK + i * Dp, c->hk ? c->kc + i * c->hk : NULL,
                     c->hk ? c->ks + i * c->hk : NULL, c->hk, 1.0f, 1.0f, D, pairing);
        rot_row_back(dvh + i * c->ldv, sl.dV + i * Dvp, c->hv ? c->vc + i * c->hv : NULL,
                     c->hv ? c->vs + i * c->hv : NULL, c->hv, 1.0f, 1.0f, Dv, pairing);
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

void rp_attention_forward(float *out, int64_t ldo, float *lse, float *att, float *scratch,
                          const float *q, int64_t ldq, const float *k, int64_t ldk, const float *v,
                          int64_t ldv, int64_t B, int64_t T, int64_t S, int64_t H, int64_t D,
                          int64_t Dv, const rp_attn_cfg *cfg, int nthreads)
{
    attn_ctx c;
    ctx_init(&c, scratch, B, T, S, H, D, Dv, ldq, ldk, ldv, ldo, cfg, NULL);
    c.out = out, c.lse_w = lse, c.att_w = att, c.q = q, c.k = k, c.v = v;
    run_pairs(&c, B, nthreads, 0);
}

void rp_attention_backward(float *dq, float *dk, float *dv, const rp_attn_rel_grad *drel,
                           float *scratch, const float *dout, const float *out, int64_t ldo,
                           const float *lse, const float *q, int64_t ldq, const float *k,
                           int64_t ldk, const float *v, int64_t ldv, int64_t B, int64_t T,
                           int64_t S, int64_t H, int64_t D, int64_t Dv, const rp_attn_cfg *cfg,
                           int nthreads)
{
    attn_ctx c;
    ctx_init(&c, scratch, B, T, S, H, D, Dv, ldq, ldk, ldv, ldo, cfg, drel);
    c.dq = dq, c.dk = dk, c.dv = dv, c.dout = dout, c.fout = out, c.lse = lse;
    c.q = q, c.k = k, c.v = v;
    run_pairs(&c, B, nthreads, 1);
    if (c.rel.kind && drel) rpa_rel_reduce(&c, B, nthreads);
}

/* ---- decoding ------------------------------------------------------------------------------
 *
 * The cache of one layer keeps, per head, the rotated keys transposed (Kt [D, capp]) and the
 * rotated values as rows (V [cap, Dvp]), the operands forward_blocks reads: a decode step writes
 * one column and one row and attends over the cache where it lies. */

/* The floats of one head's part of a cache. */
static int64_t cache_head_floats(int64_t cap, int64_t D, int64_t Dv)
{
    return D * rp_vl_round(cap) + cap * rp_vl_round(Dv);
}

/* a * b + c for sizes >= 0, saturating at INT64_MAX (core/checked.h). */
static int64_t sat_mul_add(int64_t a, int64_t b, int64_t c)
{
    return rp_sat_add_i64(rp_sat_mul_i64(a, b), c);
}

int64_t rp_attention_cache_floats(int64_t cap, int64_t H, int64_t D, int64_t Dv)
{
    if (cap > INT64_MAX / 2 || Dv > INT64_MAX / 2) return INT64_MAX;
    int64_t head = sat_mul_add(D, rp_vl_round(cap), 0);
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
           rpa_rel_call_floats(cfg, 1, 1, cap, H, D, Dv, 0) +
           rpa_rel_thread_floats(cfg, 1, cap, D, Dv);
}

/* The cos/sin row of position pos for d_rot features with angles times `scale` and the xPos
 * side, taken from *p. */
static void one_row(float **cs, float **sn, float **p, int64_t pos, int64_t d_rot,
                    const rp_pe_scheme *s, const rp_rope_freq *fq, double scale, int side)
{
    *cs = *p, *sn = *p + d_rot / 2;
    *p += d_rot;
    rp_rope_freq_tables(*cs, *sn, fq, d_rot, s->base, scale, side, NULL, pos, 1);
}

void rp_attention_decode(float *out, float *scratch, float *q, const float *k, const float *v,
                         float *cache, int64_t cap, int64_t pos, int64_t H, int64_t D, int64_t Dv,
                         const rp_attn_cfg *cfg)
{
    rp_pe_scheme s;
    (void)rp_attn_scheme(cfg, &s);
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
    float *p = scratch, *qc = NULL, *qs = NULL, *kc = NULL, *ks = NULL, *vc = NULL, *vs = NULL;
    const rp_rope_freq *fq = cfg->freq;
    if (s.d_rot_q) one_row(&qc, &qs, &p, pos, s.d_rot_q, &s, fq, 1.0, 1);
    if (s.d_rot_k) one_row(&kc, &ks, &p, pos, s.d_rot_k, &s, fq, 1.0, -1);
    if (s.d_rot_v) one_row(&vc, &vs, &p, pos, s.d_rot_v, &s, fq, s.v_angle, -1);
    if (s.d_rot_o) {
        float *oc, *os;
        one_row(&oc, &os, &p, pos, s.d_rot_o, &s, fq, 1.0, 1);
        c.oc = oc, c.os = os;
        c.ho = s.d_rot_o / 2;
        c.o_sign = s.o_sign;
    }
    int64_t hq = s.d_rot_q / 2, hk = s.d_rot_k / 2, hv = s.d_rot_v / 2, Dp = c.Dp, Dvp = c.Dvp;
    int64_t capp = rp_vl_round(cap), hs = cache_head_floats(cap, D, Dv);
    slots sl;
    memset(&sl, 0, sizeof sl);
    sl.Q = p, sl.K = sl.Q + Dp, sl.P = sl.K + Dp, sl.O = sl.P + BC, sl.m = sl.O + Dvp;
    sl.l = sl.m + 1;
    sl.ldkt = capp;
    float *call = sl.l + 1;
    rpa_rel_init(&c, call, NULL);
    rpa_rel_thread_slots(&sl.rel, call + rpa_rel_call_floats(cfg, 1, 1, cap, H, D, Dv, 0), cfg, 1,
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
        if (c.rel.kind) rpa_rel_head(&c, &sl, q + h * D, D, 0, h, 0);
        forward_blocks(&c, &sl, out + h * Dv, NULL, NULL);
    }
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
    if (!rp_pe_mode_of(cfg->pe)) return rp_error(RP_ERR_ARG, "unknown pe %d", (int)cfg->pe);
    if (cfg->pairing != RP_PAIR_HALF && cfg->pairing != RP_PAIR_INTERLEAVED)
        return rp_error(RP_ERR_ARG, "unknown pairing %d", (int)cfg->pairing);
    if (!isfinite(cfg->scale))
        return rp_error(RP_ERR_ARG, "scale must be finite");
    rp_pe_scheme sc;
    RP_TRY(rp_attn_scheme(cfg, &sc));
    if (sc.rotate && (!(cfg->base > 0.0) || !isfinite(cfg->base)))
        return rp_error(RP_ERR_ARG, "base must be positive and finite");
    /* the widths by the names the caller set them under */
    int64_t Dv = v->shape[3];
    if (sc.rotate & RP_ROT_Q)
        RP_TRY(check_d_rot(cfg->d_rot_q > 0 ? "d_rot_q" : "d_rot_qk", sc.d_rot_q, D, "d_k"));
    if (sc.rotate & RP_ROT_K)
        RP_TRY(check_d_rot(cfg->d_rot_k > 0 ? "d_rot_k" : "d_rot_qk", sc.d_rot_k, D, "d_k"));
    if (sc.rotate & RP_ROT_V) RP_TRY(check_d_rot("d_rot_v", sc.d_rot_v, Dv, "d_v"));
    if (sc.rotate & RP_ROT_O)
        RP_TRY(check_d_rot(cfg->d_rot_o > 0 ? "d_rot_o" : "d_rot_v", sc.d_rot_o, Dv, "d_v"));
    if (cfg->pos_offset < 0)
        return rp_error(RP_ERR_ARG, "pos_offset must be >= 0, got %lld",
                        (long long)cfg->pos_offset);
    if (cfg->q_offset < 0)
        return rp_error(RP_ERR_ARG, "q_offset must be >= 0, got %lld", (long long)cfg->q_offset);
    int64_t qlast = cfg->pos_offset + cfg->q_offset + q->shape[1] - 1;
    RP_TRY(rp_pe_scheme_check_freq(&sc, cfg->freq, qlast, cfg->pos_offset + S - 1));
    return rpa_rel_check(cfg);
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
    if (st == RP_OK)
        rp_attention_forward(rp_tensor_data(out), H * Dv, NULL, rp_tensor_data(att),
                             rp_tensor_data(&scratch), rp_tensor_data(&qc), H * D,
                             rp_tensor_data(&kc), H * D, rp_tensor_data(&vc), H * Dv, B, T, S, H,
                             D, Dv, &c, nthreads);
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
