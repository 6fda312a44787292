#include "attention.h"

#include <math.h>
#include <string.h>

#include "blas.h"
#include "parallel.h"

/* ---- the kernels ------------------------------------------------------------------------------
 *
 * Per (b, h) the work is blocked into row blocks of at most RB queries. Under the causal mask the
 * queries t0 .. t1-1 of a block see keys 0 .. kmax-1 with kmax = min(S, q_offset + t1), so every
 * matmul of the block runs over those keys only: at T = S, q_offset = 0 the matmuls do
 * 1/2 + RB/(2T) of the full T x S work (0.5625 at T = 512), and RB = 32 .. 128 measured the same.
 *
 * Forward per block: scores = scale Q'_blk K'^T (sgemm, into att), masked softmax in place (rows
 * sum to 1, masked entries exactly 0), Y = A_blk V' (sgemm), out = R(-n) Y for roper.
 * Backward per block (A from att): dY = R(+n) dout (roper), dA = dY V'^T, dS = A * (dA -
 * rowsum(dA * A)) * scale (masked entries 0), dV' += A^T dY, dQ' = dS K' -> dq += R(-n) dQ',
 * dK' += dS^T Q'_blk; after the blocks dk += R(-i) dK', dv += R(-i) dV' (R(-2i) for legacy).
 * Q', K', V' are recomputed from q, k, v; unrotated gradients accumulate straight into dq, dk, dv
 * (sgemm with beta = 1 on their strided rows).
 *
 * Rotations: Q' = R(n) q, K' = R(i) k (rope modes), V' = R(i) v (roper; R(2i) v for roper_legacy)
 * are built in the thread's scratch from cos/sin tables computed once per call; unrotated
 * operands are read in place through their row stride (sgemm takes any leading dimension).
 *
 * Threads: the (b, h) pairs are spread over nthreads OpenMP threads; inside the parallel region
 * OpenBLAS runs on one thread (set outside the region, restored after), so every pair is computed
 * by the same single-threaded code whatever nthreads is: results do not depend on nthreads. */

#define RB_MAX 64

static int64_t row_block(int64_t T) { return T < RB_MAX ? T : RB_MAX; }

/* cos/sin tables: at most T + S rows of d_rot_qk/2 pairs (q, k) and of d_rot_v/2 pairs (o, v). */
static int64_t table_floats(int64_t T, int64_t S, int64_t D, int64_t Dv)
{
    return (T + S) * (D + Dv);
}

/* One thread's slice: Q' [T, D], K' [S, D], V' [S, Dv], dK' [S, D], dV' [S, Dv] and, per row
 * block, dS [RB, S], dQ' [RB, D], dY [RB, Dv] and P [RB, S] (the weights of the block when the
 * caller keeps none: the forward's scores and softmax, the backward's recomputation of them; the
 * forward's output block uses the dY slot). */
static int64_t thread_floats(int64_t T, int64_t S, int64_t D, int64_t Dv)
{
    return T * D + 2 * S * (D + Dv) + row_block(T) * (2 * S + D + Dv);
}

/* The slots of a thread slice ws (see thread_floats). */
typedef struct {
    float *Q, *K, *V, *dK, *dV, *dS, *dQ, *dY, *P;
} slots;

static void thread_slots(slots *sl, float *ws, int64_t T, int64_t S, int64_t D, int64_t Dv)
{
    int64_t rb = row_block(T);
    sl->Q = ws;
    sl->K = sl->Q + T * D;
    sl->V = sl->K + S * D;
    sl->dK = sl->V + S * Dv;
    sl->dV = sl->dK + S * D;
    sl->dS = sl->dV + S * Dv;
    sl->dQ = sl->dS + rb * S;
    sl->dY = sl->dQ + rb * D;
    sl->P = sl->dY + rb * Dv;
}

int64_t rp_attention_scratch_floats(int64_t T, int64_t S, int64_t D, int64_t Dv, int nthreads)
{
    if (nthreads < 1) nthreads = 1;
    return table_floats(T, S, D, Dv) + (int64_t)nthreads * thread_floats(T, S, D, Dv);
}

typedef struct {
    int64_t T, S, H, D, Dv, ldq, ldk, ldv, ldo;
    int64_t hq, hv, ho; /* rotated pairs of q/k, of v and of the output (0 when not rotated) */
    int o_sign;         /* the output's rotation: o_n = R(o_sign n theta) Y_n */
    int64_t kvis;    /* keys any query sees: min(S, q_offset + T) under the mask, else S */
    const rp_attn_cfg *cfg;
    float scale;
    /* cos/sin tables (NULL when not rotated); row r of q/o is query t = r, of k/v key i = r.
     * The decode entry leaves hq, hv at 0 (its q, k, v arrive rotated) and sets only o. */
    const float *qc, *qs, *kc, *ks, *vc, *vs, *oc, *os;
    float *slices;   /* thread slices, thread_floats() apart */
    int64_t slice;
    /* the call's buffers (the backward's gradients are NULL in the forward and vice versa) */
    float *out, *att_w, *dq, *dk, *dv;
    const float *q, *k, *v, *att, *dout;
} attn_ctx;

static void ctx_init(attn_ctx *c, float *scratch, int64_t T, int64_t S, int64_t H, int64_t D,
                     int64_t Dv, int64_t ldq, int64_t ldk, int64_t ldv, int64_t ldo,
                     const rp_attn_cfg *cfg)
{
    memset(c, 0, sizeof *c);
    c->T = T, c->S = S, c->H = H, c->D = D, c->Dv = Dv;
    c->ldq = ldq, c->ldk = ldk, c->ldv = ldv, c->ldo = ldo;
    c->cfg = cfg;
    c->scale = (float)cfg->scale;
    c->kvis = cfg->causal && cfg->q_offset + T < S ? cfg->q_offset + T : S;
    c->slices = scratch + table_floats(T, S, D, Dv);
    c->slice = thread_floats(T, S, D, Dv);
    rp_pe_scheme s;
    (void)rp_pe_scheme_init(&s, cfg->pe, cfg->d_rot_qk, cfg->d_rot_v, cfg->base, cfg->pairing);
    c->o_sign = s.o_sign;
    /* Tables in double -> float (rp_rope_angles). Queries at q_offset .. q_offset+T-1 reuse the
     * key table when it covers them (self-attention: q_offset = S - T); the v and output tables
     * reuse the q/k ones when the angles are the same (same width, v_angle 1). Every table
     * takes at most rows * D (or rows * Dv) floats, so they fit in table_floats(). */
    float *p = scratch;
    int64_t qo = cfg->q_offset;
    if (s.d_rot_qk) {
        int64_t h = c->hq = s.d_rot_qk / 2;
        float *kc = p, *ks = p + S * h;
        p += 2 * S * h;
        rp_rope_angles(kc, ks, NULL, 0, S, s.d_rot_qk, s.base, 1.0);
        c->kc = kc, c->ks = ks;
        if (qo + T <= S) {
            c->qc = kc + qo * h, c->qs = ks + qo * h;
        } else {
            float *qc = p, *qs = p + T * h;
            p += 2 * T * h;
            rp_rope_angles(qc, qs, NULL, qo, T, s.d_rot_qk, s.base, 1.0);
            c->qc = qc, c->qs = qs;
        }
    }
    if (s.d_rot_v) {
        int64_t h = c->hv = s.d_rot_v / 2;
        if (h == c->hq && s.v_angle == 1.0) {
            c->vc = c->kc, c->vs = c->ks;
        } else {
            float *vc = p, *vs = p + S * h;
            p += 2 * S * h;
            rp_rope_angles(vc, vs, NULL, 0, S, s.d_rot_v, s.base, s.v_angle);
            c->vc = vc, c->vs = vs;
        }
    }
    if (s.d_rot_o) {
        int64_t h = c->ho = s.d_rot_o / 2;
        if (h == c->hq) {
            c->oc = c->qc, c->os = c->qs;
        } else if (h == c->hv && s.v_angle == 1.0 && qo + T <= S) {
            c->oc = c->vc + qo * h, c->os = c->vs + qo * h;
        } else {
            float *oc = p, *os = p + T * h;
            p += 2 * T * h;
            rp_rope_angles(oc, os, NULL, qo, T, s.d_rot_o, s.base, 1.0);
            c->oc = oc, c->os = os;
        }
    }
}

/* Rotates n rows of width W (src rows ld_src apart) into dst (rows ld_dst apart) by the first
 * 2 half features: rp_rope_forward row by row with sign (row r uses table row r). */
static void rotate_rows(float *dst, int64_t ld_dst, const float *src, int64_t ld_src, int64_t n,
                        int64_t W, const float *cs, const float *sn, int64_t half, int sign,
                        const rp_attn_cfg *cfg)
{
    for (int64_t r = 0; r < n; r++)
        rp_rope_forward(dst + r * ld_dst, src + r * ld_src, cs + r * half, sn + r * half, 1, 1, 1,
                        W, 2 * half, cfg->pairing, sign);
}

/* The rows of the forward's operands for head (b, h): Q' (T rows), K', V' (kvis rows), each
 * either rotated into ws or the input itself (pointer + row stride). */
typedef struct {
    const float *Q, *K, *V;
    int64_t lq, lk, lv;
} operands;

static void build_operands(operands *o, const attn_ctx *c, float *ws, int64_t b, int64_t h)
{
    int64_t T = c->T, S = c->S, D = c->D, Dv = c->Dv;
    const float *qh = c->q + b * T * c->ldq + h * D, *kh = c->k + b * S * c->ldk + h * D;
    const float *vh = c->v + b * S * c->ldv + h * Dv;
    slots sl;
    thread_slots(&sl, ws, T, S, D, Dv);
    float *Qb = sl.Q, *Kb = sl.K, *Vb = sl.V;
    if (c->hq) {
        rotate_rows(Qb, D, qh, c->ldq, T, D, c->qc, c->qs, c->hq, 1, c->cfg);
        rotate_rows(Kb, D, kh, c->ldk, c->kvis, D, c->kc, c->ks, c->hq, 1, c->cfg);
        o->Q = Qb, o->lq = D, o->K = Kb, o->lk = D;
    } else {
        o->Q = qh, o->lq = c->ldq, o->K = kh, o->lk = c->ldk;
    }
    if (c->hv) {
        rotate_rows(Vb, Dv, vh, c->ldv, c->kvis, Dv, c->vc, c->vs, c->hv, 1, c->cfg);
        o->V = Vb, o->lv = Dv;
    } else {
        o->V = vh, o->lv = c->ldv;
    }
}

/* Keys seen by query t (position q_offset + t). */
static inline int64_t visible(const attn_ctx *c, int64_t t)
{
    int64_t n = c->cfg->q_offset + t + 1;
    return c->cfg->causal && n < c->S ? n : c->S;
}

/* Keys seen by any query of the block ending before t1. */
static inline int64_t block_keys(const attn_ctx *c, int64_t t1)
{
    return visible(c, t1 - 1);
}

/* The loops below are marked RP_SIMD / RP_SIMD_REDUCE (parallel.h): -O2 vectorizes only such
 * marked loops, and softmax is a large part of the time at d_k = 32. */

/* e^x for x <= 0, in float, without a libm call so that the loops around it vectorize (glibc's
 * expf is scalar). Cephes' expf: x = k ln2 + r with |r| <= ln2/2 (ln2 split in two so that k ln2
 * is exact), e^r by a degree-5 minimax polynomial in r (times r^2, plus 1 + r), times 2^k built
 * from its bits. Checked against exp() in double for every float in [-87, 0]: relative error at
 * most 8.2e-8 (glibc's expf: 6.0e-8). |x| is clamped at 87 (e^-87 ~ 1.6e-38, the bottom of the
 * normal range; below that a probability is 0 for every purpose); the clamp works on the bits
 * because a float compare-and-select may trap and blocks vectorization without
 * -fno-trapping-math. NaN (and -inf, from infinite inputs) give NaN. */
static inline float exp_nonpos(float x)
{
    union {
        float f;
        uint32_t u;
    } c;
    c.f = x;
    uint32_t mag = c.u & 0x7FFFFFFFu;                  /* |x|; NaN has the largest magnitudes */
    mag = mag < 0x42AE0000u ? mag : 0x42AE0000u;       /* min(|x|, 87) */
    c.u = mag | 0x80000000u;
    float xc = c.f;                                    /* -min(|x|, 87) */
    /* round(xc / ln2) by the 1.5 * 2^23 trick (exact for |value| < 2^22) */
    float kf = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = (xc - kf * 0.693359375f) - kf * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float e = (p * (r * r) + r) + 1.0f;
    union {
        int32_t i;
        float f;
    } two_k;
    two_k.i = ((int32_t)kf + 127) * (1 << 23); /* kf in [-126, 0]: a normal power of two */
    return e * two_k.f + (x - x);              /* + 0, or NaN for NaN and -inf (no branch) */
}

/* Softmax of row[0 .. n-1] in place (scores already scaled), row[n .. S-1] = 0 exactly.
 * exp in float after subtracting the row max (the largest term is exactly 1); the sum of the
 * n <= S terms in double, so its rounding does not grow with S. */
static void softmax_row(float *row, int64_t n, int64_t S)
{
    float m = row[0];
    RP_SIMD_REDUCE(max, m)
    for (int64_t i = 1; i < n; i++) m = row[i] > m ? row[i] : m;
    double sum = 0.0;
    RP_SIMD_REDUCE(+, sum)
    for (int64_t i = 0; i < n; i++) {
        float e = exp_nonpos(row[i] - m);
        row[i] = e;
        sum += (double)e;
    }
    float inv = (float)(1.0 / sum);
    RP_SIMD
    for (int64_t i = 0; i < n; i++) row[i] *= inv;
    if (S > n) memset(row + n, 0, sizeof(float) * (size_t)(S - n));
}

/* The weights of row block t0 .. t1-1 (nr rows, the first kmax keys): ab [nr, S] (rows S apart)
 * = the causal softmax of scale Q'_blk K'^T, exactly 0 on masked keys. The forward pass and the
 * backward's recomputation run this same code, so the recomputed weights are bitwise those of
 * the forward. */
static void block_weights(const attn_ctx *c, const operands *o, float *ab, int64_t t0, int64_t t1)
{
    int64_t S = c->S, nr = t1 - t0, kmax = block_keys(c, t1);
    rp_sgemm(0, 1, nr, kmax, c->D, c->scale, o->Q + t0 * o->lq, o->lq, o->K, o->lk, 0.0f, ab, S);
    for (int64_t t = t0; t < t1; t++) softmax_row(ab + (t - t0) * S, visible(c, t), S);
}

static void head_forward(const attn_ctx *c, float *ws, int64_t b, int64_t h)
{
    int64_t T = c->T, S = c->S, D = c->D, Dv = c->Dv, rb = row_block(T);
    operands o;
    build_operands(&o, c, ws, b, h);
    slots sl;
    thread_slots(&sl, ws, T, S, D, Dv);
    float *Ob = sl.dY;
    /* the weights go to att when the caller keeps them, else to the thread's P tile */
    float *a = c->att_w ? c->att_w + (b * c->H + h) * T * S : NULL;
    float *oh = c->out + b * T * c->ldo + h * Dv;
    for (int64_t t0 = 0; t0 < T; t0 += rb) {
        int64_t t1 = t0 + rb < T ? t0 + rb : T, nr = t1 - t0, kmax = block_keys(c, t1);
        float *ab = a ? a + t0 * S : sl.P;
        block_weights(c, &o, ab, t0, t1);
        if (c->ho) {
            /* o_n = R(o_sign n) sum_i a_{n,i} V'_i (roper: R(-n)) */
            rp_sgemm(0, 0, nr, Dv, kmax, 1.0f, ab, S, o.V, o.lv, 0.0f, Ob, Dv);
            rotate_rows(oh + t0 * c->ldo, c->ldo, Ob, Dv, nr, Dv, c->oc + t0 * c->ho,
                        c->os + t0 * c->ho, c->ho, c->o_sign, c->cfg);
        } else {
            rp_sgemm(0, 0, nr, Dv, kmax, 1.0f, ab, S, o.V, o.lv, 0.0f, oh + t0 * c->ldo, c->ldo);
        }
    }
}

/* dS = A * (dA - rowsum(dA * A)) * scale over the n visible keys of a row, 0 on the masked keys
 * up to kmax (explicitly, so that masked entries contribute nothing whatever dA holds). The row
 * sum in double. */
static void softmax_backward_row(float *ds, const float *a, int64_t n, int64_t kmax, float scale)
{
    double dot = 0.0;
    RP_SIMD_REDUCE(+, dot)
    for (int64_t i = 0; i < n; i++) dot += (double)ds[i] * (double)a[i];
    float fd = (float)dot;
    RP_SIMD
    for (int64_t i = 0; i < n; i++) ds[i] = a[i] * (ds[i] - fd) * scale;
    if (kmax > n) memset(ds + n, 0, sizeof(float) * (size_t)(kmax - n));
}

static void head_backward(const attn_ctx *c, float *ws, int64_t b, int64_t h)
{
    int64_t T = c->T, S = c->S, D = c->D, Dv = c->Dv, rb = row_block(T), kvis = c->kvis;
    operands o;
    build_operands(&o, c, ws, b, h);
    slots sl;
    thread_slots(&sl, ws, T, S, D, Dv);
    float *dKb = sl.dK, *dVb = sl.dV, *dSb = sl.dS, *dQb = sl.dQ, *dYb = sl.dY;
    /* the forward's weights, or their recomputation block by block (bitwise the same) */
    const float *a = c->att ? c->att + (b * c->H + h) * T * S : NULL;
    const float *doh = c->dout + b * T * c->ldo + h * Dv;
    float *dqh = c->dq + b * T * c->ldq + h * D, *dkh = c->dk + b * S * c->ldk + h * D;
    float *dvh = c->dv + b * S * c->ldv + h * Dv;
    /* dK', dV' accumulate over the row blocks: straight into dk, dv when unrotated */
    float *dK = dkh, *dV = dvh;
    int64_t ldK = c->ldk, ldV = c->ldv;
    if (c->hq) {
        dK = dKb, ldK = D;
        memset(dKb, 0, sizeof(float) * (size_t)(kvis * D));
    }
    if (c->hv) {
        dV = dVb, ldV = Dv;
        memset(dVb, 0, sizeof(float) * (size_t)(kvis * Dv));
    }
    for (int64_t t0 = 0; t0 < T; t0 += rb) {
        int64_t t1 = t0 + rb < T ? t0 + rb : T, nr = t1 - t0, kmax = block_keys(c, t1);
        const float *ab = a ? a + t0 * S : sl.P;
        if (!a) block_weights(c, &o, sl.P, t0, t1);
        /* dY = d(sum_i a V'_i): the output was R(o_sign n) Y, so dY = R(-o_sign n) dout (roper:
         * R(+n) dout), the forward kernel with sign -o_sign */
        const float *dY = doh + t0 * c->ldo;
        int64_t ldY = c->ldo;
        if (c->ho) {
            rotate_rows(dYb, Dv, dY, c->ldo, nr, Dv, c->oc + t0 * c->ho, c->os + t0 * c->ho, c->ho,
                        -c->o_sign, c->cfg);
            dY = dYb, ldY = Dv;
        }
        /* dA = dY V'^T, then dS in place */
        rp_sgemm(0, 1, nr, kmax, Dv, 1.0f, dY, ldY, o.V, o.lv, 0.0f, dSb, kmax);
        for (int64_t t = t0; t < t1; t++)
            softmax_backward_row(dSb + (t - t0) * kmax, ab + (t - t0) * S, visible(c, t), kmax,
                                 c->scale);
        /* dV' += A^T dY */
        rp_sgemm(1, 0, kmax, Dv, nr, 1.0f, ab, S, dY, ldY, 1.0f, dV, ldV);
        /* dQ' = dS K'; dq += R(-n) dQ' (rp_rope_backward with the forward's sign +1) */
        if (c->hq) {
            rp_sgemm(0, 0, nr, D, kmax, 1.0f, dSb, kmax, o.K, o.lk, 0.0f, dQb, D);
            for (int64_t t = t0; t < t1; t++)
                rp_rope_backward(dqh + t * c->ldq, dQb + (t - t0) * D, c->qc + t * c->hq,
                                 c->qs + t * c->hq, 1, 1, 1, D, 2 * c->hq, c->cfg->pairing, 1);
        } else {
            rp_sgemm(0, 0, nr, D, kmax, 1.0f, dSb, kmax, o.K, o.lk, 1.0f, dqh + t0 * c->ldq,
                     c->ldq);
        }
        /* dK' += dS^T Q' */
        rp_sgemm(1, 0, kmax, D, nr, 1.0f, dSb, kmax, o.Q + t0 * o.lq, o.lq, 1.0f, dK, ldK);
    }
    /* dk += R(-i) dK', dv += R(-i) dV' (roper_legacy: R(-2i), its v table) */
    if (c->hq)
        for (int64_t i = 0; i < kvis; i++)
            rp_rope_backward(dkh + i * c->ldk, dKb + i * D, c->kc + i * c->hq, c->ks + i * c->hq,
                             1, 1, 1, D, 2 * c->hq, c->cfg->pairing, 1);
    if (c->hv)
        for (int64_t i = 0; i < kvis; i++)
            rp_rope_backward(dvh + i * c->ldv, dVb + i * Dv, c->vc + i * c->hv,
                             c->vs + i * c->hv, 1, 1, 1, Dv, 2 * c->hv, c->cfg->pairing, 1);
}

/* The loop over the (b, h) pairs: nthreads OpenMP threads, each with its own scratch slice; the
 * sgemm calls inside run on their calling thread (OpenBLAS is kept single-threaded, blas.h).
 * Measured at B=16, T=512, H=4, d_k=32 on 2 cores, this beats a serial loop over a threaded
 * OpenBLAS by about 2x. */
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

void rp_attention_forward(float *out, int64_t ldo, float *att, float *scratch, const float *q,
                          int64_t ldq, const float *k, int64_t ldk, const float *v, int64_t ldv,
                          int64_t B, int64_t T, int64_t S, int64_t H, int64_t D, int64_t Dv,
                          const rp_attn_cfg *cfg, int nthreads)
{
    attn_ctx c;
    ctx_init(&c, scratch, T, S, H, D, Dv, ldq, ldk, ldv, ldo, cfg);
    c.out = out, c.att_w = att, c.q = q, c.k = k, c.v = v;
    run_pairs(&c, B, nthreads, 0);
}

void rp_attention_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                           int64_t ldo, const float *att, const float *q, int64_t ldq,
                           const float *k, int64_t ldk, const float *v, int64_t ldv, int64_t B,
                           int64_t T, int64_t S, int64_t H, int64_t D, int64_t Dv,
                           const rp_attn_cfg *cfg, int nthreads)
{
    attn_ctx c;
    ctx_init(&c, scratch, T, S, H, D, Dv, ldq, ldk, ldv, ldo, cfg);
    c.dq = dq, c.dk = dk, c.dv = dv, c.dout = dout, c.att = att, c.q = q, c.k = k, c.v = v;
    run_pairs(&c, B, nthreads, 1);
}

/* ---- decoding ------------------------------------------------------------------------------ */

/* Tables for one position (q/k, v, output: at most D + 2 Dv floats) and one thread slice of
 * head_forward (T = 1). */
int64_t rp_attention_decode_scratch_floats(int64_t S, int64_t H, int64_t D, int64_t Dv)
{
    return 2 * (D + Dv) + thread_floats(1, S, D, Dv);
}

/* The cos/sin row of position pos for d_rot features with angles times `scale`, taken from *p. */
static void one_row(float **cs, float **sn, float **p, int64_t pos, int64_t d_rot,
                    const rp_pe_scheme *s, double scale)
{
    *cs = *p, *sn = *p + d_rot / 2;
    *p += d_rot;
    rp_rope_angles(*cs, *sn, NULL, pos, 1, d_rot, s->base, scale);
}

void rp_attention_decode(float *out, float *scratch, float *q, const float *k, const float *v,
                         float *kcache, float *vcache, int64_t ldc, int64_t pos, int64_t H,
                         int64_t D, int64_t Dv, const rp_attn_cfg *cfg)
{
    rp_pe_scheme s;
    (void)rp_pe_scheme_init(&s, cfg->pe, cfg->d_rot_qk, cfg->d_rot_v, cfg->base, cfg->pairing);
    float *p = scratch, *cs, *sn;
    float *kr = kcache + pos * ldc, *vr = vcache + pos * ldc;
    /* the new token: q by +pos (in place), k and v into the cache at row pos */
    if (s.d_rot_qk) {
        one_row(&cs, &sn, &p, pos, s.d_rot_qk, &s, 1.0);
        rp_rope_forward(q, q, cs, sn, 1, 1, H, D, s.d_rot_qk, s.pairing, 1);
        rp_rope_forward(kr, k, cs, sn, 1, 1, H, D, s.d_rot_qk, s.pairing, 1);
    } else {
        memcpy(kr, k, sizeof(float) * (size_t)(H * D));
    }
    if (s.d_rot_v) {
        one_row(&cs, &sn, &p, pos, s.d_rot_v, &s, s.v_angle);
        rp_rope_forward(vr, v, cs, sn, 1, 1, H, Dv, s.d_rot_v, s.pairing, 1);
    } else {
        memcpy(vr, v, sizeof(float) * (size_t)(H * Dv));
    }
    /* the query over cache rows 0 .. pos through head_forward, with q, k, v already rotated:
     * only the output rotation is left to it */
    rp_attn_cfg dc = *cfg;
    dc.causal = 1;
    dc.q_offset = pos;
    attn_ctx c;
    memset(&c, 0, sizeof c);
    c.T = 1, c.S = pos + 1, c.H = H, c.D = D, c.Dv = Dv;
    c.ldq = H * D, c.ldk = ldc, c.ldv = ldc, c.ldo = H * Dv;
    c.kvis = c.S;
    c.cfg = &dc;
    c.scale = (float)cfg->scale;
    if (s.d_rot_o) {
        float *oc, *os;
        one_row(&oc, &os, &p, pos, s.d_rot_o, &s, 1.0);
        c.oc = oc, c.os = os;
        c.ho = s.d_rot_o / 2;
        c.o_sign = s.o_sign;
    }
    c.att_w = NULL; /* the weights stay in the thread slice */
    c.slices = p;
    c.slice = thread_floats(1, c.S, D, Dv);
    c.out = out, c.q = q, c.k = kcache, c.v = vcache;
    for (int64_t h = 0; h < H; h++) head_forward(&c, c.slices, 0, h);
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
    const rp_pe_mode *mode = rp_pe_mode_of(cfg->pe);
    if (!mode) return rp_error(RP_ERR_ARG, "unknown pe %d", (int)cfg->pe);
    if (cfg->pairing != RP_PAIR_HALF && cfg->pairing != RP_PAIR_INTERLEAVED)
        return rp_error(RP_ERR_ARG, "unknown pairing %d", (int)cfg->pairing);
    if (!isfinite(cfg->scale))
        return rp_error(RP_ERR_ARG, "scale must be finite");
    if (mode->rot_qk) {
        if (!(cfg->base > 0.0) || !isfinite(cfg->base))
            return rp_error(RP_ERR_ARG, "base must be positive and finite");
        RP_TRY(check_d_rot("d_rot_qk", cfg->d_rot_qk, D, "d_k"));
    }
    if (mode->v_angle != 0.0 || mode->o_sign != 0)
        RP_TRY(check_d_rot("d_rot_v", cfg->d_rot_v, v->shape[3], "d_v"));
    if (cfg->q_offset < 0)
        return rp_error(RP_ERR_ARG, "q_offset must be >= 0, got %lld", (long long)cfg->q_offset);
    return RP_OK;
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
    int64_t ns = rp_attention_scratch_floats(T, S, D, Dv, nthreads);
    if (st == RP_OK) st = rp_tensor_new(out, 4, so);
    if (st == RP_OK) st = rp_tensor_new(att, 4, sa);
    if (st == RP_OK) st = rp_tensor_new(&scratch, 1, &ns);
    if (st == RP_OK && (T > RP_I32_MAX || S > RP_I32_MAX || D > RP_I32_MAX || Dv > RP_I32_MAX))
        st = rp_error(RP_ERR_SHAPE, "attention: a dim exceeds 2^31-1");
    if (st == RP_OK)
        rp_attention_forward(rp_tensor_data(out), H * Dv, rp_tensor_data(att),
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
