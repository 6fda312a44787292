/* Decoding (model.h): sequences through KV caches a token at a time, and generation by greedy or
 * sampled decoding over them, one sequence (rp_model_cache_*, rp_model_generate) or a batch of
 * lanes (rp_model_generate_batch).
 *
 * Both run the same code: a decoder of nl lanes, each lane one sequence with its own cache (or
 * linear-attention state), advances every busy lane by one token per step. The rows of a step
 * (one per busy lane) go through the layers together; every per-row operation gives a row the
 * same bits whatever rows come with it:
 *  - the projections: rp_linear_rows_forward on the transposed weights (dec_w), whose sums have
 *    one fixed order per element (OpenBLAS's do not: at K = 64, N = 192 a row of a product of 7
 *    or more rows differs in its last bits from the same row alone);
 *  - embeddings, LayerNorm (per row, statistics in double), activations and residual adds:
 *    elementwise or per row, no reduction across rows;
 *  - attention: rp_attention_decode (or rp_linattn_forward over the lane's state) per lane, the
 *    same call with the same cache contents whatever the other lanes hold.
 * So a prompt's tokens are bitwise those of one-at-a-time decoding, and sampling draws from the
 * problem's own generator. Rows that want no logits (prompt tokens before the last) stop after
 * the last layer's attention. One sequence uses the model's own cache and rows (nothing
 * allocated); a batch allocates its lanes once per call. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"
#include "model_impl.h"

/* One lane: a sequence being decoded. Its cache holds positions 0 .. len-1; src[0 .. pend-1] are
 * the tokens still to feed before the next pick (the prompt, a re-encoded window, or the last
 * picked token). */
typedef struct {
    int64_t prob;          /* the prompt it decodes; -1 when idle */
    float *kv;             /* softmax: its cache, layers x rpm_cache_layer_floats */
    double *lin;           /* linear: its running state, layers x rp_linattn_state_doubles */
    int32_t *win;          /* windowed modes: the tokens at positions 0 .. len-1 (seq_len) */
    const int32_t *src;
    int64_t pend, len;
    int64_t k;             /* tokens emitted for prob */
    int32_t last;          /* unbounded modes: the last picked token (src points here) */
    int32_t feed;          /* this step: the token fed, at position pos */
    int64_t pos;
} lane;

/* nl lanes and the rows of one step (nl rows each: x, ln, qkv (3C), y, proj, res (C), h, ha (F),
 * logits (V), mean, rstd). act lists the busy lanes of the step (row i = lane act[i]); wrow the
 * rows that want logits (increasing): row j of logits belongs to lane act[wrow[j]]. */
typedef struct {
    rp_model *m;
    int64_t nl;
    lane *lanes;
    int64_t *act, *wrow;
    float *x, *ln, *mean, *rstd, *qkv, *y, *proj, *res, *h, *ha, *logits;
} decoder;

/* 1 when the decode state has no window: linear attention without an absolute table carries
 * its running state to any position (the rotations take any position), so it never re-encodes. */
static int unbounded(const rp_model *m) { return m->linear && m->pe.absolute == RP_ABS_NONE; }

static int64_t state_doubles(const rp_model *m)
{
    return m->cfg.layers * rp_linattn_state_doubles(m->cfg.heads, m->dk, m->dk);
}

/* The transposed weights of layer l (qkv^T, out^T, w1^T, w2^T in a row) and of the head. */
static float *dec_layer(const rp_model *m, int64_t l)
{
    return m->dec_w + l * rpm_dec_layer_floats(&m->cfg);
}

/* Transposes the parameters into dec_w (the layout of model_impl.h). */
static void refresh_weights(rp_model *m)
{
    const rp_model_cfg *c = &m->cfg;
    const float *w = m->params->data;
    int64_t C = c->d_model, F = c->d_ff;
    for (int64_t l = 0; l < c->layers; l++) {
        const layer_params *p = &m->lp[l];
        float *d = dec_layer(m, l);
        rp_transpose(d, w + p->qkvw, 3 * C, C);
        rp_transpose(d + 3 * C * C, w + p->outw, C, C);
        rp_transpose(d + 4 * C * C, w + p->w1w, F, C);
        rp_transpose(d + 4 * C * C + C * F, w + p->w2w, C, F);
    }
    rp_transpose(dec_layer(m, c->layers), w + m->off_head_w, c->vocab, C);
    rpm_rel_decode_refresh(m);
}

/* Empties the lane's cache (and zeroes a linear state). */
static void lane_clear(const rp_model *m, lane *ln)
{
    ln->len = 0;
    if (m->linear) memset(ln->lin, 0, (size_t)state_doubles(m) * sizeof(double));
}

void rp_model_cache_reset(rp_model *m)
{
    lane ln = {.lin = m->lin_state};
    lane_clear(m, &ln);
    m->cache_len = 0;
}
int64_t rp_model_cache_len(const rp_model *m) { return m->cache_len; }

/* The embedding rows of the step: token (+ the absolute table's row of its position). */
static void step_embed(const decoder *d, int64_t na)
{
    const rp_model *m = d->m;
    const float *w = m->params->data;
    int64_t C = m->cfg.d_model;
    for (int64_t i = 0; i < na; i++) {
        const lane *ln = &d->lanes[d->act[i]];
        const float *e = w + m->off_embed + (int64_t)ln->feed * C;
        const float *pe = m->pe.absolute == RP_ABS_LEARNED ? w + m->off_pos + ln->pos * C
                          : m->pe.absolute == RP_ABS_SINUSOIDAL ? m->sin_table + ln->pos * C
                                                                : NULL;
        float *x = d->x + i * C;
        for (int64_t j = 0; j < C; j++) x[j] = pe ? e[j] + pe[j] : e[j];
    }
}

/* Attention of layer l for every row: each lane's query over its own cache (or state). */
static void step_attend(const decoder *d, int64_t na, int64_t l)
{
    rp_model *m = d->m;
    int64_t C = m->cfg.d_model, H = m->cfg.heads, dk = m->dk, Tm = m->cfg.seq_len;
    for (int64_t i = 0; i < na; i++) {
        const lane *ln = &d->lanes[d->act[i]];
        float *q = d->qkv + i * 3 * C, *k = q + C, *v = q + 2 * C, *y = d->y + i * C;
        if (m->linear) {
            /* the kernel rotates q, k, v and the output itself; the state carries the prefix */
            rp_linattn_cfg lc = rpm_linattn_cfg(m, ln->pos);
            double *st = ln->lin + l * rp_linattn_state_doubles(H, dk, dk);
            rp_linattn_forward(y, C, m->attn_scratch, st, NULL, q, 3 * C, k, 3 * C, v, 3 * C, 1, 1,
                               H, dk, dk, &lc, 1);
        } else {
            rp_attn_cfg acfg = rpm_attn_cfg(m, ln->pos);
            rp_attn_rel rel;
            rpm_rel_decode_tables(m, l, &rel);
            acfg.rel = &rel;
            rp_attention_decode(y, m->c_scratch, q, k, v, ln->kv + l * rpm_cache_layer_floats(m),
                                Tm, ln->pos, H, dk, dk, &acfg);
        }
    }
}

/* Moves the rows that want logits (d->wrow, increasing) of x and y to rows 0 .. nlog-1. */
static void keep_logit_rows(decoder *d, int64_t nlog)
{
    int64_t C = d->m->cfg.d_model;
    for (int64_t j = 0; j < nlog; j++) {
        int64_t r = d->wrow[j]; /* >= j: no row is overwritten before it is moved */
        if (r == j) continue;
        memcpy(d->x + j * C, d->x + r * C, (size_t)C * sizeof(float));
        memcpy(d->y + j * C, d->y + r * C, (size_t)C * sizeof(float));
    }
}

/* One step: the na rows of d->act through every layer (the layer code of rp_model_forward, one
 * row per lane), then the head for the nlog rows that want logits (d->wrow): their logits land
 * in rows 0 .. nlog-1 of d->logits. A row that wants no logits is fed for its keys and values
 * only: in the last layer it stops after the attention (which stores them). */
static void dec_step(decoder *d, int64_t na, int64_t nlog)
{
    rp_model *m = d->m;
    const rp_model_cfg *c = &m->cfg;
    const float *w = m->params->data;
    int64_t C = c->d_model, F = c->d_ff, V = c->vocab;
    int pre = c->norm == RP_NORM_PRE;
    step_embed(d, na);
    for (int64_t l = 0; l < c->layers; l++) {
        const layer_params *p = &m->lp[l];
        const float *wt = dec_layer(m, l);
        const float *attn_in = d->x;
        if (pre) {
            rp_layernorm_forward(d->ln, d->mean, d->rstd, d->x, w + p->ln1w, w + p->ln1b, na, C);
            attn_in = d->ln;
        }
        rp_linear_rows_forward(d->qkv, attn_in, wt, w + p->qkvb, na, C, 3 * C);
        step_attend(d, na, l);
        if (l == c->layers - 1 && nlog < na) {
            keep_logit_rows(d, nlog);
            na = nlog;
            if (na == 0) return;
        }
        rp_linear_rows_forward(d->proj, d->y, wt + 3 * C * C, w + p->outb, na, C, C);
        rp_residual_forward(d->res, d->x, d->proj, na * C);
        float *ff_in;
        if (pre) {
            rp_layernorm_forward(d->ln, d->mean, d->rstd, d->res, w + p->ln2w, w + p->ln2b, na,
                                 C);
            ff_in = d->ln;
        } else {
            rp_layernorm_forward(d->x, d->mean, d->rstd, d->res, w + p->ln1w, w + p->ln1b, na,
                                 C);
            ff_in = d->x; /* h1 */
        }
        rp_linear_rows_forward(d->h, ff_in, wt + 4 * C * C, w + p->w1b, na, C, F);
        rpm_act_forward(m, d->ha, d->h, na * F);
        rp_linear_rows_forward(d->proj, d->ha, wt + 4 * C * C + C * F, w + p->w2b, na, F, C);
        if (pre) {
            rp_residual_forward(d->x, d->res, d->proj, na * C);
        } else {
            rp_residual_forward(d->res, d->x, d->proj, na * C);
            rp_layernorm_forward(d->x, d->mean, d->rstd, d->res, w + p->ln2w, w + p->ln2b, na,
                                 C);
        }
    }
    /* the head: x holds the rows that want logits, in order */
    const float *head_in = d->x;
    if (pre) {
        rp_layernorm_forward(d->ln, d->mean, d->rstd, d->x, w + m->off_normf_w,
                             w + m->off_normf_b, nlog, C);
        head_in = d->ln;
    }
    rp_linear_rows_forward(d->logits, head_in, dec_layer(m, c->layers), w + m->off_head_b, nlog,
                           C, V);
}

/* Takes the next token of every busy lane (the first na entries of d->act, in lane order) and
 * notes which rows want logits; returns na and sets *nlog. RP_ERR_RANGE when an unbounded lane
 * would pass position 2^31-2. */
static rp_status dec_gather(decoder *d, int64_t *na_out, int64_t *nlog)
{
    int64_t na = 0, nw = 0;
    for (int64_t i = 0; i < d->nl; i++) {
        lane *ln = &d->lanes[i];
        if (ln->prob < 0) continue;
        if (ln->len >= RP_I32_MAX)
            return rp_error(RP_ERR_RANGE, "a sequence reached position %lld, the largest there is",
                            (long long)ln->len);
        ln->feed = *ln->src++;
        ln->pos = ln->len++;
        if (--ln->pend == 0) d->wrow[nw++] = na;
        d->act[na++] = i;
    }
    *na_out = na;
    *nlog = nw;
    return RP_OK;
}

/* ---- picking a token ---- */

/* Descending by value, ties by ascending index (a total order: deterministic). */
static int gen_pair_cmp(const void *pa, const void *pb)
{
    const gen_pair *a = pa, *b = pb;
    if (a->v > b->v) return -1;
    if (a->v < b->v) return 1;
    return (a->i > b->i) - (a->i < b->i);
}

/* Picks the next token from logits (V floats) under g (already checked), drawing from rng. */
static int32_t gen_pick(rp_model *m, const float *logits, const rp_gen_cfg *g, rp_rng *rng)
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
    double u = rp_rng_uniform(rng) * sum, acc = 0.0;
    int64_t last = 0;
    for (int64_t i = 0; i < k; i++) {
        if (m->gen_p[i] <= 0.0) continue;
        last = i;
        acc += m->gen_p[i];
        if (u < acc) return cand[i].i;
    }
    return cand[last].i; /* rounding left u just above the total */
}

/* ---- generation over a decoder ---- */

/* What a generation run reads: prompt p is tokens[off[p] .. off[p+1]-1]; its new tokens go to
 * out + p * n_new and their count to n_out[p]; it samples from rngs[p]. */
typedef struct {
    const int32_t *tokens;
    const int64_t *off;
    int64_t n, n_new;
    const rp_gen_cfg *g;
    rp_rng *rngs;
    int32_t *out;
    int64_t *n_out;
} gen_job;

/* Starts prompt p on lane ln: an empty cache, then the prompt (a windowed model keeps its last
 * seq_len tokens). */
static void lane_start(const rp_model *m, lane *ln, const gen_job *j, int64_t p)
{
    const int32_t *pr = j->tokens + j->off[p];
    int64_t np = j->off[p + 1] - j->off[p], Tm = m->cfg.seq_len;
    lane_clear(m, ln);
    ln->prob = p;
    ln->k = 0;
    j->n_out[p] = 0;
    if (unbounded(m)) {
        ln->src = pr;
        ln->pend = np;
        return;
    }
    int64_t start = np > Tm ? np - Tm : 0;
    memcpy(ln->win, pr + start, (size_t)(np - start) * sizeof(int32_t));
    ln->src = ln->win;
    ln->pend = np - start;
}

/* The lane picked t and goes on: t is fed next; a windowed lane whose window is full re-encodes
 * its last keep - 1 tokens and t from position 0 (keep = seq_len / 2, at least 1). */
static void lane_continue(const rp_model *m, lane *ln, int32_t t)
{
    if (unbounded(m)) {
        ln->last = t;
        ln->src = &ln->last;
        ln->pend = 1;
        return;
    }
    int64_t Tm = m->cfg.seq_len, keep = Tm / 2 > 0 ? Tm / 2 : 1;
    if (ln->len == Tm) {
        memmove(ln->win, ln->win + Tm - (keep - 1), (size_t)(keep - 1) * sizeof(int32_t));
        ln->win[keep - 1] = t;
        lane_clear(m, ln);
        ln->src = ln->win;
        ln->pend = keep;
    } else {
        ln->win[ln->len] = t;
        ln->src = ln->win + ln->len;
        ln->pend = 1;
    }
}

/* Runs every prompt of j through the lanes of d (all idle): the first nl prompts start at once,
 * and each lane that finishes (stop token or n_new tokens) takes the next prompt. */
static rp_status dec_run(decoder *d, const gen_job *j)
{
    rp_model *m = d->m;
    int64_t next = 0, V = m->cfg.vocab;
    for (int64_t i = 0; i < d->nl; i++) {
        d->lanes[i].prob = -1;
        if (next < j->n) lane_start(m, &d->lanes[i], j, next++);
    }
    for (;;) {
        int64_t na, nlog;
        RP_TRY(dec_gather(d, &na, &nlog));
        if (na == 0) return RP_OK;
        dec_step(d, na, nlog);
        for (int64_t r = 0; r < nlog; r++) {
            lane *ln = &d->lanes[d->act[d->wrow[r]]];
            int64_t p = ln->prob;
            const float *lg = d->logits + r * V;
            int32_t t = gen_pick(m, lg, j->g, j->rngs ? &j->rngs[p] : NULL);
            if (j->g->logits)
                memcpy(j->g->logits + (p * j->n_new + ln->k) * V, lg, (size_t)V * sizeof(float));
            j->out[p * j->n_new + ln->k++] = t;
            j->n_out[p] = ln->k;
            if (t != j->g->stop_token && ln->k < j->n_new) {
                lane_continue(m, ln, t);
            } else {
                ln->prob = -1;
                if (next < j->n) lane_start(m, ln, j, next++);
            }
        }
    }
}

/* A decoder of one lane over the model's own cache and rows. */
static void single_decoder(rp_model *m, decoder *d, lane *ln, int64_t *act, int64_t *wrow)
{
    memset(ln, 0, sizeof *ln);
    ln->kv = m->kvcache, ln->lin = m->lin_state, ln->win = m->gen_win;
    ln->len = m->cache_len;
    d->m = m, d->nl = 1, d->lanes = ln, d->act = act, d->wrow = wrow;
    d->x = m->c_x, d->ln = m->c_ln, d->mean = m->c_mean, d->rstd = m->c_rstd, d->qkv = m->c_qkv;
    d->y = m->c_y, d->proj = m->c_proj, d->res = m->c_res, d->h = m->c_h, d->ha = m->c_ha;
    d->logits = m->c_logits;
}

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
    if (m->cache_len == 0) refresh_weights(m); /* a new sequence: the weights of now */
    decoder d;
    lane ln;
    int64_t act, wrow;
    single_decoder(m, &d, &ln, &act, &wrow);
    ln.prob = 0;
    ln.src = tokens;
    ln.pend = n;
    for (int64_t i = 0; i < n; i++) {
        int64_t na, nlog;
        RP_TRY(dec_gather(&d, &na, &nlog));
        dec_step(&d, na, nlog);
        m->cache_len = ln.len;
    }
    if (logits_out) memcpy(logits_out, m->c_logits, (size_t)c->vocab * sizeof(float));
    return RP_OK;
}

/* The checks of a generation config shared by both entries (rng: the single entry's). */
static rp_status check_gen(const rp_gen_cfg *g, int need_rng)
{
    if (!g) return rp_error(RP_ERR_ARG, "generation config is NULL");
    if (!(g->temperature >= 0.0) || !isfinite(g->temperature))
        return rp_error(RP_ERR_ARG, "temperature %g must be finite and >= 0", g->temperature);
    if (g->top_k < 0) return rp_error(RP_ERR_ARG, "top_k %lld must be >= 0", (long long)g->top_k);
    if (need_rng && g->temperature > 0.0 && !g->rng)
        return rp_error(RP_ERR_ARG, "sampling with temperature %g needs an rng", g->temperature);
    if (g->stop_token < -1)
        return rp_error(RP_ERR_ARG, "stop_token %ld must be >= 0, or -1 for none",
                        (long)g->stop_token);
    return RP_OK;
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
    RP_TRY(check_gen(g, 1));
    for (int64_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= c->vocab)
            return rp_error(RP_ERR_RANGE,
                            "prompt token %ld at [%lld] is outside the vocabulary 0..%lld",
                            (long)prompt[i], (long long)(i + 1), (long long)(c->vocab - 1));

    rp_model_cache_reset(m);
    if (n_new == 0) return RP_OK;
    refresh_weights(m);
    decoder d;
    lane ln;
    int64_t act, wrow, off[2] = {0, n_prompt}, count = 0;
    single_decoder(m, &d, &ln, &act, &wrow);
    gen_job j = {prompt, off, 1, n_new, g, g->rng, out, &count};
    rp_status st = dec_run(&d, &j);
    m->cache_len = ln.len;
    if (n_out) *n_out = count;
    return st;
}

/* ---- batches ---- */

/* bytes rounded up to 64 (every piece of a batch decoder starts on a cache line). */
static int64_t piece(int64_t bytes) { return (bytes + 63) / 64 * 64; }

/* The bytes of one lane of a batch decoder: its share of the lane table and rows, and its cache
 * (or state) and window; batch_alloc needs at most nl times this for nl lanes. */
static int64_t lane_bytes(const rp_model *m)
{
    const rp_model_cfg *c = &m->cfg;
    int64_t C = c->d_model, F = c->d_ff, V = c->vocab, Tm = c->seq_len, f = sizeof(float);
    int64_t b = piece(sizeof(lane)) + 2 * piece(sizeof(int64_t));
    b += 8 * piece(C * f) + 2 * piece(F * f) + piece(V * f) + 2 * piece(f);
    if (m->linear) b += piece(state_doubles(m) * (int64_t)sizeof(double));
    else b += piece(c->layers * rpm_cache_layer_floats(m) * f);
    if (!unbounded(m)) b += piece(Tm * (int64_t)sizeof(int32_t));
    return b;
}

int64_t rp_model_batch_lanes(const rp_model *m, int64_t n, int64_t max_lanes)
{
    int64_t nl = n < max_lanes ? n : max_lanes;
    int64_t fit = RP_GEN_BATCH_BYTES / lane_bytes(m);
    if (nl > fit) nl = fit;
    return nl < 1 ? 1 : nl;
}

/* Bump allocation of the pieces of a batch decoder out of one block. */
static void *cut(char **p, int64_t bytes)
{
    void *q = *p;
    *p += piece(bytes);
    return q;
}

/* Allocates a decoder of nl lanes in one block (*block, to free); RP_ERR_NOMEM. */
static rp_status batch_alloc(rp_model *m, decoder *d, int64_t nl, void **block)
{
    const rp_model_cfg *c = &m->cfg;
    int64_t C = c->d_model, F = c->d_ff, V = c->vocab, Tm = c->seq_len, f = sizeof(float);
    int64_t bytes = lane_bytes(m) * nl;
    char *p = aligned_alloc(64, (size_t)bytes);
    if (!p)
        return rp_error(RP_ERR_NOMEM, "cannot allocate %lld lanes of batched decoding (%lld bytes)",
                        (long long)nl, (long long)bytes);
    *block = p;
    d->m = m, d->nl = nl;
    d->lanes = cut(&p, nl * (int64_t)sizeof(lane));
    d->act = cut(&p, nl * (int64_t)sizeof(int64_t));
    d->wrow = cut(&p, nl * (int64_t)sizeof(int64_t));
    d->x = cut(&p, nl * C * f), d->ln = cut(&p, nl * C * f), d->y = cut(&p, nl * C * f);
    d->proj = cut(&p, nl * C * f), d->res = cut(&p, nl * C * f);
    d->qkv = cut(&p, nl * 3 * C * f);
    d->h = cut(&p, nl * F * f), d->ha = cut(&p, nl * F * f), d->logits = cut(&p, nl * V * f);
    d->mean = cut(&p, nl * f), d->rstd = cut(&p, nl * f);
    for (int64_t i = 0; i < nl; i++) {
        lane *ln = &d->lanes[i];
        memset(ln, 0, sizeof *ln);
        if (m->linear) {
            ln->lin = cut(&p, state_doubles(m) * (int64_t)sizeof(double));
        } else {
            ln->kv = cut(&p, c->layers * rpm_cache_layer_floats(m) * f);
        }
        if (!unbounded(m)) ln->win = cut(&p, Tm * (int64_t)sizeof(int32_t));
    }
    return RP_OK;
}

rp_status rp_model_generate_batch(rp_model *m, const int32_t *tokens, const int64_t *offsets,
                                  int64_t n, int64_t n_new, const rp_gen_cfg *g, rp_rng *rngs,
                                  int64_t max_lanes, int32_t *out, int64_t *n_out)
{
    const rp_model_cfg *c = &m->cfg;
    if (n < 0) return rp_error(RP_ERR_ARG, "n %lld must be >= 0", (long long)n);
    if (n_new < 0) return rp_error(RP_ERR_ARG, "n_new %lld must be >= 0", (long long)n_new);
    if (max_lanes < 1)
        return rp_error(RP_ERR_ARG, "max_lanes %lld must be >= 1", (long long)max_lanes);
    if (n == 0) return RP_OK;
    if (!tokens || !offsets || !n_out || (n_new > 0 && !out))
        return rp_error(RP_ERR_ARG, "tokens, offsets, out or n_out is NULL");
    RP_TRY(check_gen(g, 0));
    if (g->temperature > 0.0 && !rngs)
        return rp_error(RP_ERR_ARG, "sampling with temperature %g needs rngs", g->temperature);
    if (offsets[0] != 0) return rp_error(RP_ERR_ARG, "offsets[0] must be 0");
    for (int64_t p = 0; p < n; p++) {
        if (offsets[p + 1] - offsets[p] < 1)
            return rp_error(RP_ERR_ARG, "prompt %lld has %lld tokens; it needs >= 1",
                            (long long)(p + 1), (long long)(offsets[p + 1] - offsets[p]));
        for (int64_t i = offsets[p]; i < offsets[p + 1]; i++)
            if (tokens[i] < 0 || tokens[i] >= c->vocab)
                return rp_error(RP_ERR_RANGE,
                                "token %ld at [%lld][%lld] is outside the vocabulary 0..%lld",
                                (long)tokens[i], (long long)(p + 1),
                                (long long)(i - offsets[p] + 1), (long long)(c->vocab - 1));
    }
    for (int64_t p = 0; p < n; p++) n_out[p] = 0;
    if (n_new == 0) return RP_OK;

    decoder d;
    void *block = NULL;
    RP_TRY(batch_alloc(m, &d, rp_model_batch_lanes(m, n, max_lanes), &block));
    refresh_weights(m);
    gen_job j = {tokens, offsets, n, n_new, g, rngs, out, n_out};
    rp_status st = dec_run(&d, &j);
    free(block);
    return st;
}
