/* The relative-position terms of pe shaw, xl, t5, deberta and alibi inside the flash kernels of
 * attention.c (the formulas: attention.h; the hooks: attention_impl.h).
 *
 * Every term depends on the distance delta = n - i (query position minus key position) through a
 * table row: Ek and Ev rows r = idx(delta) = clamp(ka + ks delta, 0, kR - 1) (shaw: k - delta of
 * 2k + 1 rows; xl: delta - lo of the call's rows; deberta c2p: k + delta of 2k), Eq rows
 * r' = clamp(qa + qs delta, 0, qR - 1) (deberta p2c: k - delta), and the bias rows of t5 and
 * alibi one value per distance. Per head (b, h), in the thread's slots:
 *
 *  - per query block (rows t0 .. t0+nr-1, the keys they see): its distances reach the table rows
 *    blo .. blo+nb-1 (at most nr + kmax - 1 of them, at most 2k + 1 for shaw); QE = Q'_w Ek^T
 *    [nr, nb] (rp_tile_mm, Q'_w = s (q + w), = Q' without w) and, per score row, score +=
 *    QE[r, idx(delta) - blo] gathered (a straight run of QE, reversed for shaw, with the clipped
 *    ends constant);
 *  - deberta's p2c per head: KE = (s Eq) K'^T [nq, kvis] (only the rows the call's distances
 *    reach), score += KE[r'(delta), i] (the clipped runs are rows of KE, read straight); for a
 *    single query (decode) the dot products of the keys with their one row each instead;
 *  - t5, alibi: a row of bias values per distance of the call, score += brow[e] with
 *    e = dhi - delta (increasing with the key);
 *  - shaw's Ev, forward: per query row the bucket sums W[r, idx] of the unnormalised weights p,
 *    rescaled with O by the online softmax's correction, then O += W Ev before O / l;
 *  - backward (dS = P (dP - Drow), dP including dY . Ev[idx] for shaw): the bucket sums
 *    G[r, idx] of dS give dQ' += G Ek and dEk += G^T Q'_w per block; shaw's WB[r, idx] of P give
 *    dEv += WB^T dY; deberta's Hk[r', i] of dS give dK' += Hk^T (s Eq), dEq += s Hk K' per head;
 *    xl's du = s sum (dS K'), dw = s sum (G Ek); t5's per-distance sums of dS go to the buckets.
 *
 * Table gradients go to the (b, h) pair's own slice of the scratch; rpa_rel_reduce adds the
 * slices to the caller's gradients in the order of the pairs, so results do not depend on the
 * thread count. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention_impl.h"
#include "parallel.h"
#include "tile.h"

static rp_rel_kind rel_kind(const rp_attn_cfg *cfg)
{
    const rp_pe_mode *m = cfg ? rp_pe_mode_of(cfg->pe) : NULL;
    return m ? m->rel : RP_REL_NONE;
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

static imap ek_map(rp_rel_kind kind, int64_t k, int64_t dlo, int64_t nd)
{
    switch (kind) {
    case RP_REL_SHAW: return (imap){k, -1, 2 * k + 1};
    case RP_REL_XL: return (imap){-dlo, 1, nd};
    case RP_REL_DEBERTA: return (imap){k, 1, 2 * k};
    default: return (imap){0, 1, 0};
    }
}

static imap eq_map(int64_t k) { return (imap){k, -1, 2 * k}; }

/* The rows distances dlo .. dhi reach: *lo .. *lo + *n - 1. */
static void map_range(imap m, int64_t dlo, int64_t dhi, int64_t *lo, int64_t *n)
{
    int64_t x = clampi(m.a + m.s * dlo, 0, m.R - 1), y = clampi(m.a + m.s * dhi, 0, m.R - 1);
    *lo = x < y ? x : y;
    *n = (x < y ? y - x : x - y) + 1;
}

/* ---- sizes ---- */

/* Upper bounds of a call's rows (for the scratch): Ek/Ev rows ne, Eq rows nq, distances nd (at
 * most T + S - 1), the leading dims of the transposed tables, t5's buckets. */
typedef struct {
    rp_rel_kind kind;
    int64_t ne, nq, nd, ldE, ldQ, buckets;
} rel_dims;

static rel_dims dims_of(const rp_attn_cfg *cfg, int64_t T, int64_t S)
{
    rel_dims d = {rel_kind(cfg), 0, 0, T + S - 1, 0, 0, 0};
    int64_t k = d.kind == RP_REL_SHAW || d.kind == RP_REL_DEBERTA ? cfg->rel_clip : 0;
    if (d.kind == RP_REL_SHAW) d.ne = 2 * k + 1 < d.nd ? 2 * k + 1 : d.nd;
    if (d.kind == RP_REL_XL) d.ne = d.nd;
    if (d.kind == RP_REL_DEBERTA) d.ne = d.nq = 2 * k < d.nd ? 2 * k : d.nd;
    if (d.ne) d.ldE = rp_vl_round(d.ne) + RP_VL;
    if (d.nq) d.ldQ = rp_vl_round(d.nq) + RP_VL;
    if (d.kind == RP_REL_T5) d.buckets = cfg->rel_buckets;
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
    if (d.kind == RP_REL_NONE) return;
    int64_t Dp = rp_vl_round(D), Dvp = rp_vl_round(Dv), Sp = rp_vl_round(S), rb = row_block(T);
    int64_t ndp = rp_vl_round(d.nd), shaw = d.kind == RP_REL_SHAW, xl = d.kind == RP_REL_XL;
    int64_t deb = d.kind == RP_REL_DEBERTA, t5 = d.kind == RP_REL_T5;
    int64_t ev = Dv * d.ldE > d.ne * Dvp ? Dv * d.ldE : d.ne * Dvp;
    const int64_t s[NREL] = {D * d.ldE,      d.ne * Dp,          shaw * ev,      rb * d.ldE,
                             rb * d.ldE,     shaw * rb * d.ldE,  shaw * rb * d.ldE,
                             xl * rb * Dp,   xl * rb * Dp,       (T == 1) * D * d.ldQ, d.nq * Dp,
                             (T > 1) * d.nq * Sp,  d.nq * Sp,    (T == 1) * deb * Sp,
                             (t5 || d.kind == RP_REL_ALIBI) * ndp, t5 * ndp};
    memcpy(z, s, sizeof s);
}

int64_t rpa_rel_thread_floats(const rp_attn_cfg *cfg, int64_t T, int64_t S, int64_t D, int64_t Dv)
{
    int64_t z[NREL], n = 0;
    rel_sizes(z, cfg, T, S, D, Dv);
    for (int i = 0; i < NREL; i++) n += z[i];
    return n;
}

void rpa_rel_thread_slots(rel_slots *rs, float *ws, const rp_attn_cfg *cfg, int64_t T, int64_t S,
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
    int64_t Dp = rp_vl_round(D), xl = d->kind == RP_REL_XL;
    int64_t ev = d->kind == RP_REL_SHAW ? d->ne * rp_vl_round(Dv) : 0;
    off[0] = d->ne * Dp;
    off[1] = off[0] + d->nq * Dp;
    off[2] = off[1] + ev;
    off[3] = off[2] + xl * Dp;
    off[4] = off[3] + xl * Dp;
    return off[4] + d->buckets;
}

int64_t rpa_rel_call_floats(const rp_attn_cfg *cfg, int64_t B, int64_t T, int64_t S, int64_t H,
                            int64_t D, int64_t Dv, int backward)
{
    rel_dims d = dims_of(cfg, T, S);
    if (d.kind == RP_REL_NONE) return 0;
    int64_t off[5], n = d.kind == RP_REL_T5 ? rp_vl_round(d.nd) : 0;
    return n + (backward ? B * H * pair_layout(&d, D, Dv, off) : 0);
}

/* ---- the public helpers ---- */

int64_t rp_attention_rel_rows(const rp_attn_cfg *cfg, int64_t T, int64_t S, int64_t *lo)
{
    rp_rel_kind kind = rel_kind(cfg);
    int64_t dlo = 0, dhi = 0;
    if (lo) *lo = 0;
    switch (kind) {
    case RP_REL_SHAW: return 2 * cfg->rel_clip + 1;
    case RP_REL_DEBERTA: return 2 * cfg->rel_clip;
    case RP_REL_XL:
        distances(cfg, T, S, &dlo, &dhi);
        if (lo) *lo = dlo;
        return dhi - dlo + 1;
    default: return 0;
    }
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

/* A table a mode reads: its name in rp_attn_rel, the pointer given, its shape. */
typedef struct {
    const char *name;
    const float *p;
    const char *shape;
} table_need;

rp_status rpa_rel_check(const rp_attn_cfg *cfg)
{
    rp_rel_kind kind = rel_kind(cfg);
    const char *pe = rp_pe_name(cfg->pe);
    if ((kind == RP_REL_SHAW || kind == RP_REL_DEBERTA) &&
        (cfg->rel_clip < 1 || cfg->rel_clip > RP_REL_MAX_CLIP))
        return rp_error(RP_ERR_ARG, "clip must be in 1 .. %d for pe %s, got %lld",
                        RP_REL_MAX_CLIP, pe, (long long)cfg->rel_clip);
    if (kind == RP_REL_T5) {
        int64_t nb = cfg->rel_buckets, md = cfg->rel_max_distance;
        if (nb < 2 || nb > RP_REL_MAX_BUCKETS)
            return rp_error(RP_ERR_ARG, "buckets must be in 2 .. %d for pe t5, got %lld",
                            RP_REL_MAX_BUCKETS, (long long)nb);
        if (!cfg->causal && nb < 4)
            return rp_error(RP_ERR_ARG,
                            "buckets must be >= 4 for pe t5 without the causal mask, got %lld",
                            (long long)nb);
        int64_t exact = cfg->causal ? nb / 2 : nb / 4;
        if (md <= exact)
            return rp_error(RP_ERR_ARG, "max_distance must exceed buckets / %d = %lld for pe t5 "
                            "(%s), got %lld", cfg->causal ? 2 : 4, (long long)exact,
                            cfg->causal ? "causal" : "bidirectional", (long long)md);
        if (md > RP_I32_MAX)
            return rp_error(RP_ERR_ARG, "max_distance must be at most 2^31-1, got %lld",
                            (long long)md);
    }
    const rp_attn_rel *t = cfg->rel;
    rp_attn_rel none = {0};
    if (!t) t = &none;
    table_need need[3];
    int nn = 0;
    switch (kind) {
    case RP_REL_SHAW:
        need[nn++] = (table_need){"ek", t->ek, "a^K [2 clip + 1, D]"};
        need[nn++] = (table_need){"ev", t->ev, "a^V [2 clip + 1, Dv]"};
        break;
    case RP_REL_XL:
        need[nn++] = (table_need){"ek", t->ek, "W_kR R [rows, H, D]"};
        need[nn++] = (table_need){"u", t->u, "[H, D]"};
        need[nn++] = (table_need){"w", t->w, "[H, D]"};
        break;
    case RP_REL_T5: need[nn++] = (table_need){"bias", t->bias, "[H, buckets]"}; break;
    case RP_REL_DEBERTA:
        need[nn++] = (table_need){"ek", t->ek, "K^r [2 clip, H, D]"};
        need[nn++] = (table_need){"eq", t->eq, "Q^r [2 clip, H, D]"};
        break;
    default: break;
    }
    for (int i = 0; i < nn; i++)
        if (!need[i].p)
            return rp_error(RP_ERR_ARG, "pe %s needs the table rel->%s (%s)", pe, need[i].name,
                            need[i].shape);
    return RP_OK;
}

/* ---- the call and the head ---- */

void rpa_rel_init(attn_ctx *c, float *call, const rp_attn_rel_grad *grad)
{
    rel_ctx *r = &c->rel;
    memset(r, 0, sizeof *r);
    const rp_attn_cfg *cfg = c->cfg;
    r->kind = rel_kind(cfg);
    if (r->kind == RP_REL_NONE) return;
    rel_dims d = dims_of(cfg, c->T, c->S);
    r->tab = cfg->rel;
    r->grad = grad;
    r->H = c->H, r->D = c->D, r->Dv = c->Dv;
    distances(cfg, c->T, c->S, &r->dlo, &r->dhi);
    r->nd = r->dhi - r->dlo + 1;
    int64_t k = cfg->rel_clip;
    if (d.ne) {
        imap m = ek_map(r->kind, k, r->dlo, r->nd);
        r->ka = m.a, r->ks = m.s, r->kR = m.R, r->ldE = d.ldE;
        map_range(m, r->dlo, r->dhi, &r->ilo, &r->ne);
        r->ek_ldr = r->kind == RP_REL_SHAW ? c->D : c->H * c->D;
        r->ek_ldh = r->kind == RP_REL_SHAW ? 0 : c->D;
    }
    if (d.nq) {
        imap m = eq_map(k);
        r->qa = m.a, r->qs = m.s, r->qR = m.R, r->ldQ = d.ldQ;
        map_range(m, r->dlo, r->dhi, &r->jlo, &r->nq);
    }
    float *p = call;
    if (r->kind == RP_REL_T5) {
        r->buckets = cfg->rel_buckets;
        for (int64_t e = 0; e < r->nd; e++)
            p[e] = (float)rp_attention_t5_bucket(e - r->dhi, !cfg->causal, cfg->rel_buckets,
                                                 cfg->rel_max_distance);
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

void rpa_rel_head(const attn_ctx *c, slots *sl, const float *q, int64_t ldq, int64_t b, int64_t h,
                  int backward)
{
    const rel_ctx *r = &c->rel;
    rel_slots *rs = &sl->rel;
    const rp_attn_rel *tb = r->tab;
    int64_t D = c->D, Dp = c->Dp, Dv = c->Dv, Dvp = c->Dvp, kvis = c->kvis;
    float s = c->scale;
    rs->q = q, rs->ldq = ldq;
    rs->w = r->kind == RP_REL_XL ? tb->w + h * D : NULL;
    if (r->kind == RP_REL_XL) { /* Q' = s (q + u) */
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
    if (r->kind == RP_REL_SHAW) { /* Ev rows ilo .. (forward: rows; backward: transposed) */
        const float *ev = tb->ev + r->ilo * Dv;
        if (backward)
            transpose_rows(rs->Ev, r->ldE, ev, Dv, r->ne, Dv, 1.0f);
        else
            copy_rows(rs->Ev, Dvp, ev, Dv, r->ne, Dv, 1.0f);
    }
    if (r->kind == RP_REL_DEBERTA) { /* Eq rows jlo .. jlo+nq-1, times s */
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
                    rs->pkey[i] += kt[i] * e[clampi(r->qa + r->qs * (qo - i), 0, r->qR - 1) - r->jlo];
            }
        }
    }
    if (r->kind == RP_REL_T5) {
        const float *bias = tb->bias + h * r->buckets;
        for (int64_t e = 0; e < r->nd; e++) rs->brow[e] = bias[(int64_t)r->bkt[e]];
        if (backward) memset(rs->gd, 0, sizeof(float) * (size_t)r->nd);
    }
    if (r->kind == RP_REL_ALIBI) {
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

void rpa_rel_block(const attn_ctx *c, slots *sl, int64_t t0, int64_t nr, int backward)
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
    if (r->kind == RP_REL_XL) { /* Q'_w = s (q + w) */
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
    if (!backward && r->kind != RP_REL_SHAW) return;
    for (int64_t i = 0; i < nr; i++) memset(rs->W + i * ldE, 0, sizeof(float) * (size_t)nb);
    if (backward && r->kind == RP_REL_SHAW) {
        /* dYE = dY Ev^T over the block's rows */
        rp_tile_mm(rs->dYE, ldE, sl->O, Dvp, 1, rs->Ev + off, ldE, nr, nbp, c->Dv, 0);
        if (r->grad && r->grad->ev)
            for (int64_t i = 0; i < nr; i++) memset(rs->WB + i * ldE, 0, sizeof(float) * (size_t)nb);
    }
}

/* ---- per score row ---- */

void rpa_rel_scores(const attn_ctx *c, const slots *sl, int64_t t, int64_t r, int64_t j0,
                    int64_t n)
{
    const rel_ctx *x = &c->rel;
    const rel_slots *rs = &sl->rel;
    float *p = sl->P + r * BC;
    int64_t del0 = c->cfg->q_offset + t - j0; /* the distance of key j0 + j: del0 - j */
    if (x->ne)
        add_gather(p, rs->QE + r * x->ldE, n, ek_start(c, sl, t, j0), -x->ks, 0, rs->nb - 1);
    if (x->kind == RP_REL_DEBERTA) {
        if (c->T > 1) {
            add_gather_cols(p, rs->KE + j0, c->Sp, n, x->qa + x->qs * del0 - x->jlo, -x->qs, 0,
                            x->nq - 1);
        } else {
            RP_SIMD
            for (int64_t j = 0; j < n; j++) p[j] += rs->pkey[j0 + j];
        }
    }
    if (x->kind == RP_REL_T5 || x->kind == RP_REL_ALIBI) {
        const float *br = rs->brow + (x->dhi - del0);
        RP_SIMD
        for (int64_t j = 0; j < n; j++) p[j] += br[j];
    }
}

void rpa_rel_rescale(const attn_ctx *c, const slots *sl, int64_t r, float corr)
{
    float *w = sl->rel.W + r * c->rel.ldE;
    RP_SIMD
    for (int64_t i = 0; i < sl->rel.nb; i++) w[i] *= corr;
}

void rpa_rel_weights(const attn_ctx *c, const slots *sl, int64_t t, int64_t r, int64_t j0,
                     int64_t n)
{
    scatter_add(sl->rel.W + r * c->rel.ldE, sl->P + r * BC, n, ek_start(c, sl, t, j0),
                -c->rel.ks, 0, sl->rel.nb - 1);
}

void rpa_rel_out(const attn_ctx *c, const slots *sl, int64_t nr)
{
    const rel_ctx *x = &c->rel;
    const rel_slots *rs = &sl->rel;
    rp_tile_mm(sl->O, c->Dvp, rs->W, x->ldE, 1, rs->Ev + (rs->blo - x->ilo) * c->Dvp, c->Dvp, nr,
               c->Dvp, rs->nb, 1);
}

/* ---- backward ---- */

void rpa_rel_dp(const attn_ctx *c, const slots *sl, int64_t t, int64_t r, int64_t j0, int64_t n)
{
    add_gather(sl->dP + r * BC, sl->rel.dYE + r * c->rel.ldE, n, ek_start(c, sl, t, j0),
               -c->rel.ks, 0, sl->rel.nb - 1);
}

void rpa_rel_ds(const attn_ctx *c, const slots *sl, int64_t t, int64_t r, int64_t j0, int64_t n)
{
    const rel_ctx *x = &c->rel;
    const rel_slots *rs = &sl->rel;
    const float *p = sl->P + r * BC, *ds = sl->dP + r * BC;
    if (x->ne) {
        int64_t c0 = ek_start(c, sl, t, j0);
        scatter_add(rs->W + r * x->ldE, ds, n, c0, -x->ks, 0, rs->nb - 1);
        if (x->kind == RP_REL_SHAW && rs->pair && x->grad->ev)
            scatter_add(rs->WB + r * x->ldE, p, n, c0, -x->ks, 0, rs->nb - 1);
    }
    int64_t del0 = c->cfg->q_offset + t - j0;
    if (x->kind == RP_REL_DEBERTA)
        scatter_cols(rs->Hk + j0, c->Sp, ds, n, x->qa + x->qs * del0 - x->jlo, -x->qs, 0,
                     x->nq - 1);
    if (x->kind == RP_REL_T5 && rs->pair && x->grad->bias) {
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

void rpa_rel_block_back(const attn_ctx *c, slots *sl, int64_t nr)
{
    const rel_ctx *x = &c->rel;
    rel_slots *rs = &sl->rel;
    if (!x->ne) return;
    int64_t Dp = c->Dp, Dvp = c->Dvp, ldE = x->ldE, nb = rs->nb, off = rs->blo - x->ilo;
    const rp_attn_rel_grad *g = rs->pair ? x->grad : NULL;
    const float *ekr = rs->EkR + off * Dp;
    if (x->kind == RP_REL_XL) {
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
    if (x->kind == RP_REL_SHAW && g && g->ev) /* dEv += WB^T dY */
        rp_tile_mm(rs->pair + x->p_ev + off * Dvp, Dvp, rs->WB, 1, ldE, sl->O, Dvp, nb, Dvp, nr,
                   1);
}

void rpa_rel_head_back(const attn_ctx *c, slots *sl)
{
    const rel_ctx *x = &c->rel;
    rel_slots *rs = &sl->rel;
    int64_t Dp = c->Dp, kvis = c->kvis;
    const rp_attn_rel_grad *g = rs->pair ? x->grad : NULL;
    if (x->kind == RP_REL_DEBERTA) {
        /* dK' += Hk^T (s Eq); dEq = s Hk K' (the slice's only term of this head) */
        rp_tile_mm(sl->dK, Dp, rs->Hk, 1, c->Sp, rs->EqR, Dp, kvis, Dp, x->nq, 1);
        if (g && g->eq) {
            float *de = rs->pair + x->p_eq;
            rp_tile_mm(de, Dp, rs->Hk, c->Sp, 1, sl->K, Dp, x->nq, Dp, kvis, 0);
            for (int64_t i = 0; i < x->nq * Dp; i++) de[i] *= c->scale;
        }
    }
    if (x->kind == RP_REL_T5 && g && g->bias) {
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

void rpa_rel_reduce(const attn_ctx *c, int64_t B, int nthreads)
{
    int nt = nthreads < 1 ? 1 : nthreads;
    const rel_ctx *x = &c->rel;
    const rp_attn_rel_grad *g = x->grad;
    int64_t D = c->D, Dv = c->Dv, H = c->H, Dp = c->Dp, Dvp = c->Dvp;
    if (x->ne && g->ek)
        reduce(x, B, nt, g->ek + x->ilo * x->ek_ldr, x->ek_ldr, x->ek_ldh, x->ne, D, 0, Dp);
    if (x->kind == RP_REL_DEBERTA && g->eq)
        reduce(x, B, nt, g->eq + x->jlo * H * D, H * D, D, x->nq, D, x->p_eq, Dp);
    if (x->kind == RP_REL_SHAW && g->ev)
        reduce(x, B, nt, g->ev + x->ilo * Dv, Dv, 0, x->ne, Dv, x->p_ev, Dvp);
    if (x->kind == RP_REL_XL && g->u) reduce(x, B, nt, g->u, 0, D, 1, D, x->p_u, 0);
    if (x->kind == RP_REL_XL && g->w) reduce(x, B, nt, g->w, 0, D, 1, D, x->p_w, 0);
    if (x->kind == RP_REL_T5 && g->bias)
        reduce(x, B, nt, g->bias, 0, x->buckets, 1, x->buckets, x->p_bias, 0);
}
