#include "attention.h"

#include <math.h>
#include <string.h>

#include "blas.h"

static const char *const pe_names[] = {"none", "sinusoidal", "learned",
                                       "rope", "roper",      "roper_legacy"};

const char *rp_pe_name(rp_pe pe)
{
    if ((int)pe < 0 || (int)pe >= (int)(sizeof pe_names / sizeof pe_names[0])) return "?";
    return pe_names[pe];
}

int rp_pe_from_name(const char *name)
{
    for (int i = 0; i < (int)(sizeof pe_names / sizeof pe_names[0]); i++)
        if (strcmp(name, pe_names[i]) == 0) return i;
    return -1;
}

static int rotates_qk(rp_pe pe)
{
    return pe == RP_PE_ROPE || pe == RP_PE_ROPER || pe == RP_PE_ROPER_LEGACY;
}

static int rotates_v(rp_pe pe) { return pe == RP_PE_ROPER || pe == RP_PE_ROPER_LEGACY; }

int64_t rp_attention_scratch_floats(int64_t T, int64_t S, int64_t D, int64_t Dv)
{
    /* q, k, v, o head buffers plus cos/sin tables for q, k (D/2 each) and v, o (Dv/2 each) */
    return 2 * (T + S) * (D + Dv);
}

/* Copies head h of batch b out of a [B, L, H, W] buffer into dst [L, W]. */
static void gather_head(float *dst, const float *src, int64_t b, int64_t h, int64_t L, int64_t H,
                        int64_t W)
{
    for (int64_t l = 0; l < L; l++)
        memcpy(dst + l * W, src + ((b * L + l) * H + h) * W, sizeof(float) * (size_t)W);
}

/* Row-wise masked softmax of att [T, S] in place: row t sees keys 0 .. q_offset + t when causal;
 * masked entries become exactly 0. */
static void masked_softmax(float *att, int64_t T, int64_t S, int64_t q_offset, int causal)
{
    for (int64_t t = 0; t < T; t++) {
        float *row = att + t * S;
        int64_t n = causal ? q_offset + t + 1 : S;
        if (n > S) n = S;
        float m = row[0];
        for (int64_t i = 1; i < n; i++)
            if (row[i] > m) m = row[i];
        double sum = 0.0;
        for (int64_t i = 0; i < n; i++) {
            float e = expf(row[i] - m);
            row[i] = e;
            sum += (double)e;
        }
        float inv = (float)(1.0 / sum);
        for (int64_t i = 0; i < n; i++) row[i] *= inv;
        for (int64_t i = n; i < S; i++) row[i] = 0.0f;
    }
}

void rp_attention_forward(float *out, float *att, float *scratch, const float *q, const float *k,
                          const float *v, int64_t B, int64_t T, int64_t S, int64_t H, int64_t D,
                          int64_t Dv, const rp_attn_cfg *cfg)
{
    float *qb = scratch, *kb = qb + T * D, *vb = kb + S * D, *ob = vb + S * Dv;
    float *tab = ob + T * Dv;
    int64_t hq = cfg->d_rot_qk / 2, hv = cfg->d_rot_v / 2;
    float *qc = tab, *qs = qc + T * hq, *kc = qs + T * hq, *ks = kc + S * hq;
    float *vc = ks + S * hq, *vs = vc + S * hv, *oc = vs + S * hv, *os = oc + T * hv;
    int rqk = rotates_qk(cfg->pe), rv = rotates_v(cfg->pe);
    if (rqk) {
        rp_rope_angles(qc, qs, NULL, cfg->q_offset, T, cfg->d_rot_qk, cfg->base, 1.0);
        rp_rope_angles(kc, ks, NULL, 0, S, cfg->d_rot_qk, cfg->base, 1.0);
    }
    if (rv) {
        /* roper_legacy rotated the values twice: by 2i*theta */
        double vscale = cfg->pe == RP_PE_ROPER_LEGACY ? 2.0 : 1.0;
        rp_rope_angles(vc, vs, NULL, 0, S, cfg->d_rot_v, cfg->base, vscale);
        rp_rope_angles(oc, os, NULL, cfg->q_offset, T, cfg->d_rot_v, cfg->base, 1.0);
    }
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            float *a = att + (b * H + h) * T * S;
            gather_head(qb, q, b, h, T, H, D);
            gather_head(kb, k, b, h, S, H, D);
            gather_head(vb, v, b, h, S, H, Dv);
            if (rqk) {
                rp_rope_forward(qb, qb, qc, qs, 1, T, 1, D, cfg->d_rot_qk, cfg->pairing, 1);
                rp_rope_forward(kb, kb, kc, ks, 1, S, 1, D, cfg->d_rot_qk, cfg->pairing, 1);
            }
            if (rv) rp_rope_forward(vb, vb, vc, vs, 1, S, 1, Dv, cfg->d_rot_v, cfg->pairing, 1);
            rp_sgemm(0, 1, T, S, D, (float)cfg->scale, qb, D, kb, D, 0.0f, a, S);
            masked_softmax(a, T, S, cfg->q_offset, cfg->causal);
            rp_sgemm(0, 0, T, Dv, S, 1.0f, a, S, vb, Dv, 0.0f, ob, Dv);
            if (rv) rp_rope_forward(ob, ob, oc, os, 1, T, 1, Dv, cfg->d_rot_v, cfg->pairing, -1);
            for (int64_t t = 0; t < T; t++)
                memcpy(out + ((b * T + t) * H + h) * Dv, ob + t * Dv, sizeof(float) * (size_t)Dv);
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
    if ((int)cfg->pe < 0 || (int)cfg->pe > (int)RP_PE_ROPER_LEGACY)
        return rp_error(RP_ERR_ARG, "unknown pe %d", (int)cfg->pe);
    if (cfg->pairing != RP_PAIR_HALF && cfg->pairing != RP_PAIR_INTERLEAVED)
        return rp_error(RP_ERR_ARG, "unknown pairing %d", (int)cfg->pairing);
    if (!isfinite(cfg->scale))
        return rp_error(RP_ERR_ARG, "scale must be finite");
    if (rotates_qk(cfg->pe)) {
        if (!(cfg->base > 0.0) || !isfinite(cfg->base))
            return rp_error(RP_ERR_ARG, "base must be positive and finite");
        RP_TRY(check_d_rot("d_rot_qk", cfg->d_rot_qk, D, "d_k"));
    }
    if (rotates_v(cfg->pe)) RP_TRY(check_d_rot("d_rot_v", cfg->d_rot_v, v->shape[3], "d_v"));
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
    if (!rotates_qk(c.pe)) c.d_rot_qk = 0;
    if (!rotates_v(c.pe)) c.d_rot_v = 0;
    int64_t B = q->shape[0], T = q->shape[1], H = q->shape[2], D = q->shape[3];
    int64_t S = k->shape[1], Dv = v->shape[3];
    rp_tensor qc = {0}, kc = {0}, vc = {0}, scratch = {0};
    rp_status st = rp_tensor_contiguous(&qc, q);
    if (st == RP_OK) st = rp_tensor_contiguous(&kc, k);
    if (st == RP_OK) st = rp_tensor_contiguous(&vc, v);
    int64_t so[4] = {B, T, H, Dv}, sa[4] = {B, H, T, S};
    int64_t ns = rp_attention_scratch_floats(T, S, D, Dv);
    if (st == RP_OK) st = rp_tensor_new(out, 4, so);
    if (st == RP_OK) st = rp_tensor_new(att, 4, sa);
    if (st == RP_OK) st = rp_tensor_new(&scratch, 1, &ns);
    if (st == RP_OK && (T > INT32_MAX || S > INT32_MAX || D > INT32_MAX || Dv > INT32_MAX))
        st = rp_error(RP_ERR_SHAPE, "attention: a dim exceeds 2^31-1");
    if (st == RP_OK)
        rp_attention_forward(rp_tensor_data(out), rp_tensor_data(att), rp_tensor_data(&scratch),
                             rp_tensor_data(&qc), rp_tensor_data(&kc), rp_tensor_data(&vc), B, T,
                             S, H, D, Dv, &c);
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
