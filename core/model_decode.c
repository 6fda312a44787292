/* Decoding (model.h): one sequence through a KV cache, a token at a time, and generation by
 * greedy or sampled decoding over it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"
#include "model_impl.h"

void rp_model_cache_reset(rp_model *m)
{
    m->cache_len = 0;
    if (m->linear)
        memset(m->lin_state, 0,
               (size_t)(m->cfg.layers * rp_linattn_state_doubles(m->cfg.heads, m->dk, m->dk)) *
                   sizeof(double));
}
int64_t rp_model_cache_len(const rp_model *m) { return m->cache_len; }

/* One token at position pos through the model with the cache; the head runs only when
 * want_logits (the logits land in c_logits). The layer code of rp_model_forward for one row;
 * the attention is rp_attention_decode (the forward's kernel for one query over the cached
 * keys 0 .. pos) or, for linear attention, rp_linattn_forward over its running state. */
static void cache_step(rp_model *m, int32_t tok, int64_t pos, int want_logits)
{
    const rp_model_cfg *c = &m->cfg;
    const float *w = m->params->data;
    int64_t C = c->d_model, F = c->d_ff, V = c->vocab, H = c->heads, dk = m->dk;
    int pre = c->norm == RP_NORM_PRE;
    rp_attn_cfg acfg = rpm_attn_cfg(m, pos);
    float *x = m->c_x;

    const float *e = w + m->off_embed + (int64_t)tok * C;
    const float *pe = m->pe.absolute == RP_ABS_LEARNED      ? w + m->off_pos + pos * C
                      : m->pe.absolute == RP_ABS_SINUSOIDAL ? m->sin_table + pos * C
                                                            : NULL;
    for (int64_t j = 0; j < C; j++) x[j] = pe ? e[j] + pe[j] : e[j];

    for (int64_t l = 0; l < c->layers; l++) {
        const layer_params *p = &m->lp[l];
        const float *attn_in = x;
        if (pre) {
            rp_layernorm_forward(m->c_ln, m->c_mean, m->c_rstd, x, w + p->ln1w, w + p->ln1b, 1, C);
            attn_in = m->c_ln;
        }
        float *q = m->c_qkv, *k = q + C, *v = q + 2 * C;
        rp_linear_forward(q, attn_in, w + p->qkvw, w + p->qkvb, 1, C, 3 * C);
        if (m->linear) {
            /* the kernel rotates q, k, v and the output itself; the state carries the prefix */
            rp_linattn_cfg lc = rpm_linattn_cfg(m, pos);
            double *st = m->lin_state + l * rp_linattn_state_doubles(H, dk, dk);
            rp_linattn_forward(m->c_y, C, m->attn_scratch, st, NULL, q, 3 * C, k, 3 * C, v, 3 * C,
                               1, 1, H, dk, dk, &lc, 1);
        } else {
            rp_attention_decode(m->c_y, m->c_scratch, q, k, v, m->kcache + l * c->seq_len * C,
                                m->vcache + l * c->seq_len * C, C, pos, H, dk, dk, &acfg);
        }
        rp_linear_forward(m->c_proj, m->c_y, w + p->outw, w + p->outb, 1, C, C);
        rp_residual_forward(m->c_res, x, m->c_proj, C);
        float *ff_in;
        if (pre) {
            rp_layernorm_forward(m->c_ln, m->c_mean, m->c_rstd, m->c_res, w + p->ln2w,
                                 w + p->ln2b, 1, C);
            ff_in = m->c_ln;
        } else {
            rp_layernorm_forward(x, m->c_mean, m->c_rstd, m->c_res, w + p->ln1w, w + p->ln1b, 1,
                                 C);
            ff_in = x; /* h1 */
        }
        rp_linear_forward(m->c_h, ff_in, w + p->w1w, w + p->w1b, 1, C, F);
        rpm_act_forward(m, m->c_ha, m->c_h, F);
        rp_linear_forward(m->c_proj, m->c_ha, w + p->w2w, w + p->w2b, 1, F, C);
        if (pre) {
            rp_residual_forward(x, m->c_res, m->c_proj, C);
        } else {
            rp_residual_forward(m->c_res, x, m->c_proj, C);
            rp_layernorm_forward(x, m->c_mean, m->c_rstd, m->c_res, w + p->ln2w, w + p->ln2b, 1,
                                 C);
        }
    }
    if (!want_logits) return;
    const float *head_in = x;
    if (pre) {
        rp_layernorm_forward(m->c_ln, m->c_mean, m->c_rstd, x, w + m->off_normf_w,
                             w + m->off_normf_b, 1, C);
        head_in = m->c_ln;
    }
    rp_linear_forward(m->c_logits, head_in, w + m->off_head_w, w + m->off_head_b, 1, C, V);
}

/* 1 when the decode state has no window: linear attention without an absolute table carries
 * its running state to any position (the rotations take any position), so it never re-encodes. */
static int unbounded(const rp_model *m) { return m->linear && m->pe.absolute == RP_ABS_NONE; }

rp_status rp_model_cache_feed(rp_model *m, const int32_t *tokens, int64_t n, float *logits_out)
{
    const rp_model_cfg *c = &m->cfg;
    if (n < 1) return rp_error(RP_ERR_ARG, "cache feed needs n >= 1 tokens, got %lld", (long long)n);
    if (!tokens) return rp_error(RP_ERR_ARG, "tokens is NULL");
    if (unbounded(m) ? n > RP_I32_MAX - m->cache_len : n > c->seq_len - m->cache_len)
        return rp_error(RP_ERR_RANGE,
                        "cache holds %lld of seq_len %lld positions; %lld more do not fit",
                        (long long)m->cache_len, (long long)c->seq_len, (long long)n);
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= c->vocab)
            return rp_error(RP_ERR_RANGE, "token %ld at [%lld] is outside the vocabulary 0..%lld",
                            (long)tokens[i], (long long)(i + 1), (long long)(c->vocab - 1));
    for (int64_t i = 0; i < n; i++) {
        cache_step(m, tokens[i], m->cache_len, i == n - 1);
        m->cache_len++;
    }
    if (logits_out) memcpy(logits_out, m->c_logits, (size_t)c->vocab * sizeof(float));
    return RP_OK;
}

/* Descending by value, ties by ascending index (a total order: deterministic). */
static int gen_pair_cmp(const void *pa, const void *pb)
{
    const gen_pair *a = pa, *b = pb;
    if (a->v > b->v) return -1;
    if (a->v < b->v) return 1;
    return (a->i > b->i) - (a->i < b->i);
}

/* Picks the next token from logits (V floats) under g (already checked). */
static int32_t gen_pick(rp_model *m, const float *logits, const rp_gen_cfg *g)
{
    int64_t V = m->cfg.vocab;
    if (g->temperature == 0.0) {
        int64_t best = 0;
        for (int64_t i = 1; i < V; i++)
            if (logits[i] > logits[best]) best = i;
        return (int32_t)best;
    }
    /* candidates: all tokens in index order, or the top_k largest logits */
    int64_t k = V;
    gen_pair *cand = m->gen_sort;
    for (int64_t i = 0; i < V; i++) {
        cand[i].v = logits[i];
        cand[i].i = (int32_t)i;
    }
    if (g->top_k > 0 && g->top_k < V) {
        qsort(cand, (size_t)V, sizeof *cand, gen_pair_cmp);
        k = g->top_k;
    }
    double mx = (double)cand[0].v;
    for (int64_t i = 1; i < k; i++)
        if ((double)cand[i].v > mx) mx = (double)cand[i].v;
    double sum = 0.0;
    for (int64_t i = 0; i < k; i++) {
        m->gen_p[i] = exp(((double)cand[i].v - mx) / g->temperature);
        sum += m->gen_p[i];
    }
    double u = rp_rng_uniform(g->rng) * sum, acc = 0.0;
    int64_t last = 0;
    for (int64_t i = 0; i < k; i++) {
        if (m->gen_p[i] <= 0.0) continue;
        last = i;
        acc += m->gen_p[i];
        if (u < acc) return cand[i].i;
    }
    return cand[last].i; /* rounding left u just above the total */
}

rp_status rp_model_generate(rp_model *m, const int32_t *prompt, int64_t n_prompt, int64_t n_new,
                            const rp_gen_cfg *g, int32_t *out, int64_t *n_out)
{
    const rp_model_cfg *c = &m->cfg;
    if (n_out) *n_out = 0;
    if (!g) return rp_error(RP_ERR_ARG, "generation config is NULL");
    if (!prompt || n_prompt < 1)
        return rp_error(RP_ERR_ARG, "generation needs a prompt of >= 1 tokens, got %lld",
                        (long long)n_prompt);
    if (n_new < 0) return rp_error(RP_ERR_ARG, "n_new %lld must be >= 0", (long long)n_new);
    if (n_new > 0 && !out) return rp_error(RP_ERR_ARG, "output buffer is NULL");
    if (!(g->temperature >= 0.0) || !isfinite(g->temperature))
        return rp_error(RP_ERR_ARG, "temperature %g must be finite and >= 0", g->temperature);
    if (g->top_k < 0) return rp_error(RP_ERR_ARG, "top_k %lld must be >= 0", (long long)g->top_k);
    if (g->temperature > 0.0 && !g->rng)
        return rp_error(RP_ERR_ARG, "sampling with temperature %g needs an rng", g->temperature);
    if (g->stop_token < -1)
        return rp_error(RP_ERR_ARG, "stop_token %ld must be >= 0, or -1 for none",
                        (long)g->stop_token);
    for (int64_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= c->vocab)
            return rp_error(RP_ERR_RANGE,
                            "prompt token %ld at [%lld] is outside the vocabulary 0..%lld",
                            (long)prompt[i], (long long)(i + 1), (long long)(c->vocab - 1));

    rp_model_cache_reset(m);
    if (unbounded(m)) {
        /* the running state carries the whole prompt and every new token: no window */
        RP_TRY(rp_model_cache_feed(m, prompt, n_prompt, NULL));
        for (int64_t k = 0; k < n_new; k++) {
            int32_t t = gen_pick(m, m->c_logits, g);
            out[k] = t;
            if (n_out) *n_out = k + 1;
            if (t == g->stop_token || k + 1 == n_new) break;
            RP_TRY(rp_model_cache_feed(m, &t, 1, NULL));
        }
        return RP_OK;
    }
    int64_t Tm = c->seq_len, keep = Tm / 2 > 0 ? Tm / 2 : 1;
    int32_t *win = m->gen_win; /* the tokens in the cache, positions 0 .. cache_len-1 */
    /* a prompt longer than the window: its last seq_len tokens */
    int64_t start = n_prompt > Tm ? n_prompt - Tm : 0, wlen = n_prompt - start;
    memcpy(win, prompt + start, (size_t)wlen * sizeof(int32_t));
    RP_TRY(rp_model_cache_feed(m, win, wlen, NULL));
    for (int64_t k = 0; k < n_new; k++) {
        int32_t t = gen_pick(m, m->c_logits, g);
        out[k] = t;
        if (n_out) *n_out = k + 1;
        if (t == g->stop_token || k + 1 == n_new) break;
        if (m->cache_len == Tm) {
            /* the window is full: re-encode its last keep - 1 tokens and t, from position 0 */
            memmove(win, win + Tm - (keep - 1), (size_t)(keep - 1) * sizeof(int32_t));
            win[keep - 1] = t;
            rp_model_cache_reset(m);
            RP_TRY(rp_model_cache_feed(m, win, keep, NULL));
        } else {
            win[m->cache_len] = t;
            RP_TRY(rp_model_cache_feed(m, &t, 1, NULL));
        }
    }
    return RP_OK;
}
