/* Decoding (model.h): sequences through KV caches a token at a time, and generation by greedy or
 * sampled decoding over them, one sequence (rp_model_cache_*, rp_model_generate) or a batch of
 * lanes (rp_model_generate_batch).
 *
 * Both run the same code: a decoder of nl lanes (model_impl.h; laid out by the plan of
 * model_memory.c), each lane one sequence with its own cache (or linear-attention state),
 * advances every busy lane by one token per step. The rows of a step (one per busy lane) go
 * through the layers together, each layer the training forward's block (rpm_block_forward) with
 * this file's products and attention; every per-row operation gives a row the same bits whatever
 * rows come with it:
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

#include "fpmode.h"
#include "layers.h"
#include "model_impl.h"
#include "sysmem.h"

/* Builds dec_rope from the model's scheme and frequencies. */
static void rope_rows_refresh(rp_model *m)
{
    rp_attn_cfg acfg = rpm_attn_cfg(m, 0);
    rp_attention_decode_rows(m->dec_rope, &acfg, m->cfg.seq_len);
}

/* Transposes the parameters into dec_w (the layout of model_impl.h, rpm_proj_of), and builds
 * the cos/sin rows when they are stale. */
static void refresh_weights(rp_model *m)
{
    rpm_freq_refresh(m); /* learn_freq: the parameter's values of now (dec_rope then stale) */
    if (m->dec_rope && m->dec_rope_stale) rope_rows_refresh(m);
    m->dec_rope_stale = 0;
    const float *w = m->params->data;
    for (int64_t l = 0; l < m->cfg.layers; l++)
        for (rpm_proj p = RPM_PROJ_QKV; p <= RPM_PROJ_W2; p++) {
            rpm_proj_info pi = rpm_proj_of(m, l, p);
            rp_transpose(m->dec_w + pi.dec, w + pi.w, pi.out, pi.in);
        }
    rpm_proj_info head = rpm_proj_of(m, 0, RPM_PROJ_HEAD);
    rp_transpose(m->dec_w + head.dec, w + head.w, head.out, head.in);
    rpm_rel_decode_refresh(m);
}

/* Empties the lane's cache (and zeroes a linear state). */
static void lane_clear(const rp_model *m, rpm_lane *ln)
{
    ln->len = 0;
    if (m->linear)
        memset(ln->lin, 0,
               (size_t)(m->cfg.layers * rpm_state_layer_doubles(m)) * sizeof(double));
}

void rp_model_cache_reset(rp_model *m) { lane_clear(m, &m->dec.lanes[0]); }
int64_t rp_model_cache_len(const rp_model *m) { return m->dec.lanes[0].len; }

/* The embedding rows of the step: token (+ the absolute table's row of its position). */
static void step_embed(const rpm_decoder *d, int64_t na)
{
    const rp_model *m = d->m;
    const float *tab = rpm_abs_table(m);
    int64_t C = m->cfg.d_model;
    for (int64_t i = 0; i < na; i++) {
        const rpm_lane *ln = &d->lanes[d->act[i]];
        rp_embedding_forward(d->x + i * C, &ln->feed, m->params->data + m->off_embed,
                             tab ? tab + ln->pos * C : NULL, 1, 1, C);
    }
}

/* Attention of layer l for every row: each lane's query over its own cache (or state), on the
 * calling thread (the lanes spread over 2 threads, each with its own scratch, were no faster on a
 * shared 2-core machine: measured in November 2026, twice). */
static void step_attend(const rpm_decoder *d, int64_t na, int64_t l)
{
    rp_model *m = d->m;
    int64_t C = m->cfg.d_model, H = m->cfg.heads, dk = m->dk, Tm = m->cfg.seq_len;
    for (int64_t i = 0; i < na; i++) {
        const rpm_lane *ln = &d->lanes[d->act[i]];
        float *q = d->qkv + i * 3 * C, *k = q + C, *v = q + 2 * C, *y = d->y + i * C;
        if (m->linear) {
            /* the kernel rotates q, k, v and the output itself; the state carries the prefix */
            rp_linattn_cfg lc = rpm_linattn_cfg(m, ln->pos);
            double *st = ln->lin + l * rpm_state_layer_doubles(m);
            rp_attn_io io = {.B = 1, .T = 1, .S = 1, .H = H, .D = dk, .Dv = dk, .q = q, .k = k,
                             .v = v, .ldq = 3 * C, .ldk = 3 * C, .ldv = 3 * C, .out = y,
                             .ldo = C, .scratch = m->attn_scratch, .nthreads = 1, .state = st};
            rp_linattn_forward(&io, &lc);
        } else {
            rp_attn_cfg acfg = rpm_attn_cfg(m, ln->pos);
            rp_attn_rel rel;
            rpm_rel_decode_tables(m, l, &rel);
            acfg.tables = &rel;
            acfg.rope_rows = m->dec_rope;
            rp_attention_decode(y, m->c_scratch, q, k, v, ln->kv + l * rpm_cache_layer_floats(m),
                                Tm, ln->pos, H, dk, dk, &acfg);
        }
    }
}

/* Moves the rows that want logits (d->wrow, increasing) of x and y to rows 0 .. nlog-1. */
static void keep_logit_rows(rpm_decoder *d, int64_t nlog)
{
    int64_t C = d->m->cfg.d_model;
    for (int64_t j = 0; j < nlog; j++) {
        int64_t r = d->wrow[j]; /* >= j: no row is overwritten before it is moved */
        if (r == j) continue;
        memcpy(d->x + j * C, d->x + r * C, (size_t)C * sizeof(float));
        memcpy(d->y + j * C, d->y + r * C, (size_t)C * sizeof(float));
    }
}

/* Decoding's side of the block (rpm_block_ops): the products by rp_linear_rows_forward on the
 * transposed weights, attention per lane. */
static void dec_linear(void *ctx, int64_t l, rpm_proj p, float *out, const float *in, int64_t n)
{
    const rp_model *m = ((const rpm_decoder *)ctx)->m;
    rpm_proj_info pi = rpm_proj_of(m, l, p);
    rp_linear_rows_forward(out, in, m->dec_w + pi.dec, m->params->data + pi.b, n, pi.in, pi.out);
}

/* A row that wants no logits is fed for its keys and values only: in the last layer it stops
 * after the attention (which stores them); the rows that go on are moved up. */
static int64_t dec_attend(void *ctx, int64_t l, const rpm_block_bufs *b, int64_t n)
{
    rpm_decoder *d = ctx;
    step_attend(d, n, l);
    if (l < d->m->cfg.layers - 1 || d->nlog == n) return n;
    keep_logit_rows(d, d->nlog);
    return d->nlog;
}

static const rpm_block_ops dec_ops = {dec_linear, dec_attend};

/* One step: the na rows of d->act through every block (one row per lane; the rows keep the
 * layer output in x), then the head for the d->nlog rows that want logits (d->wrow): their
 * logits land in rows 0 .. nlog-1 of d->logits. */
static void dec_step(rpm_decoder *d, int64_t na)
{
    rp_model *m = d->m;
    rpm_block_bufs b = {.x = d->x, .ln = d->ln, .ln1_mean = d->mean, .ln1_rstd = d->rstd,
                        .ln2_mean = d->mean, .ln2_rstd = d->rstd, .qkv = d->qkv, .y = d->y,
                        .proj = d->proj, .res1 = d->res, .h1 = d->x, .fch = d->h, .act = d->ha,
                        .res2 = m->cfg.norm == RP_NORM_PRE ? d->x : d->res, .out = d->x};
    step_embed(d, na);
    for (int64_t l = 0; l < m->cfg.layers && na > 0; l++)
        na = rpm_block_forward(m, &dec_ops, d, l, &b, na, 0);
    if (na > 0) rpm_head_forward(m, &dec_ops, d, d->logits, d->x, d->ln, d->mean, d->rstd, na);
}

/* Takes the next token of every busy lane (the first na entries of d->act, in lane order) and
 * notes which rows want logits (d->nlog of them); returns na. RP_ERR_RANGE when an unbounded
 * lane would pass position 2^31-2. */
static rp_status dec_gather(rpm_decoder *d, int64_t *na_out)
{
    int64_t na = 0, nw = 0;
    for (int64_t i = 0; i < d->nl; i++) {
        rpm_lane *ln = &d->lanes[i];
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
    d->nlog = nw;
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
    int nucleus = g->top_p > 0.0 && g->top_p < 1.0;
    if ((g->top_k > 0 && g->top_k < V) || nucleus) {
        qsort(cand, (size_t)V, sizeof *cand, gen_pair_cmp);
        if (g->top_k > 0 && g->top_k < V) k = g->top_k;
    }
    double mx = (double)cand[0].v;
    for (int64_t i = 1; i < k; i++)
        if ((double)cand[i].v > mx) mx = (double)cand[i].v;
    double sum = 0.0;
    for (int64_t i = 0; i < k; i++) {
        m->gen_p[i] = exp(((double)cand[i].v - mx) / g->temperature);
        sum += m->gen_p[i];
    }
    if (nucleus) { /* the fewest candidates (descending) holding top_p of the total */
        double keep = g->top_p * sum, acc = 0.0;
        int64_t n = 0;
        while (n < k) {
            acc += m->gen_p[n++];
            if (acc >= keep) break;
        }
        k = n;
        sum = acc;
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
static void lane_start(const rp_model *m, rpm_lane *ln, const gen_job *j, int64_t p)
{
    const int32_t *pr = j->tokens + j->off[p];
    int64_t np = j->off[p + 1] - j->off[p], Tm = m->cfg.seq_len;
    lane_clear(m, ln);
    ln->prob = p;
    ln->k = 0;
    j->n_out[p] = 0;
    if (rpm_unbounded(m)) {
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
static void lane_continue(const rp_model *m, rpm_lane *ln, int32_t t)
{
    if (rpm_unbounded(m)) {
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
static rp_status dec_run(rpm_decoder *d, const gen_job *j)
{
    rp_model *m = d->m;
    int64_t next = 0, V = m->cfg.vocab;
    for (int64_t i = 0; i < d->nl; i++) {
        d->lanes[i].prob = -1;
        if (next < j->n) lane_start(m, &d->lanes[i], j, next++);
    }
    for (;;) {
        int64_t na;
        RP_TRY(dec_gather(d, &na));
        if (na == 0) return RP_OK;
        dec_step(d, na);
        for (int64_t r = 0; r < d->nlog; r++) {
            rpm_lane *ln = &d->lanes[d->act[d->wrow[r]]];
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

static rp_status model_cache_feed(rp_model *m, const int32_t *tokens, int64_t n, float *logits_out)
{
    const rp_model_cfg *c = &m->cfg;
    if (n < 1) return rp_error(RP_ERR_ARG, "cache feed needs n >= 1 tokens, got %lld", (long long)n);
    if (!tokens) return rp_error(RP_ERR_ARG, "tokens is NULL");
    rpm_decoder *d = &m->dec;
    rpm_lane *ln = &d->lanes[0];
    if (rpm_unbounded(m) ? n > RP_I32_MAX - ln->len : n > c->seq_len - ln->len)
        return rp_error(RP_ERR_RANGE,
                        "cache holds %lld of seq_len %lld positions; %lld more do not fit",
                        (long long)ln->len, (long long)c->seq_len, (long long)n);
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= c->vocab)
            return rp_error(RP_ERR_RANGE, "token %ld at [%lld] is outside the vocabulary 0..%lld",
                            (long)tokens[i], (long long)(i + 1), (long long)(c->vocab - 1));
    if (ln->len == 0) refresh_weights(m); /* a new sequence: the weights of now */
    ln->prob = 0;
    ln->src = tokens;
    ln->pend = n;
    for (int64_t i = 0; i < n; i++) {
        int64_t na;
        RP_TRY(dec_gather(d, &na));
        dec_step(d, na);
    }
    if (logits_out) memcpy(logits_out, d->logits, (size_t)c->vocab * sizeof(float));
    return RP_OK;
}

rp_status rp_model_cache_feed(rp_model *m, const int32_t *tokens, int64_t n, float *logits_out)
{
    rp_fpmode fm = rp_fp_flush_begin();
    rp_status st = model_cache_feed(m, tokens, n, logits_out);
    rp_fp_flush_end(fm);
    return st;
}

/* The checks of a generation config shared by both entries (rng: the single entry's). */
static rp_status check_gen(const rp_gen_cfg *g, int need_rng)
{
    if (!g) return rp_error(RP_ERR_ARG, "generation config is NULL");
    if (!(g->temperature >= 0.0) || !isfinite(g->temperature))
        return rp_error(RP_ERR_ARG, "temperature %g must be finite and >= 0", g->temperature);
    if (g->top_k < 0) return rp_error(RP_ERR_ARG, "top_k %lld must be >= 0", (long long)g->top_k);
    if (!(g->top_p >= 0.0 && g->top_p <= 1.0))
        return rp_error(RP_ERR_ARG, "top_p %g must be in [0, 1]", g->top_p);
    if (need_rng && g->temperature > 0.0 && !g->rng)
        return rp_error(RP_ERR_ARG, "sampling with temperature %g needs an rng", g->temperature);
    if (g->stop_token < -1)
        return rp_error(RP_ERR_ARG, "stop_token %ld must be >= 0, or -1 for none",
                        (long)g->stop_token);
    return RP_OK;
}

static rp_status model_generate(rp_model *m, const int32_t *prompt, int64_t n_prompt,
                                int64_t n_new, const rp_gen_cfg *g, int32_t *out, int64_t *n_out)
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
    int64_t off[2] = {0, n_prompt}, count = 0;
    gen_job j = {prompt, off, 1, n_new, g, g->rng, out, &count};
    rp_status st = dec_run(&m->dec, &j);
    if (n_out) *n_out = count;
    return st;
}

rp_status rp_model_generate(rp_model *m, const int32_t *prompt, int64_t n_prompt, int64_t n_new,
                            const rp_gen_cfg *g, int32_t *out, int64_t *n_out)
{
    rp_fpmode fm = rp_fp_flush_begin();
    rp_status st = model_generate(m, prompt, n_prompt, n_new, g, out, n_out);
    rp_fp_flush_end(fm);
    return st;
}

/* ---- batches ---- */

int64_t rp_model_batch_lanes(const rp_model *m, int64_t n, int64_t max_lanes)
{
    int64_t hi = n < max_lanes ? n : max_lanes, lo = 1;
    if (hi <= 1) return 1;
    if (rpm_decoder_bytes(m, hi) <= RP_GEN_BATCH_BYTES) return hi;
    /* the most lanes whose decoder fits: bytes grow with the lanes */
    while (lo + 1 < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (rpm_decoder_bytes(m, mid) <= RP_GEN_BATCH_BYTES)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

int64_t rp_model_lanes_for_cache(const rp_model *m, int64_t cache_bytes)
{
    if (cache_bytes < 0) return RP_LANES_MIN;
    const rp_model_cfg *c = &m->cfg;
    int64_t weights = rpm_sat_mul(rpm_sat_add(rpm_sat_mul(c->layers, rpm_dec_layer_floats(c)),
                                              rpm_sat_mul(c->d_model, c->vocab)),
                                  sizeof(float));
    int64_t lane = rpm_decoder_bytes(m, 2) - rpm_decoder_bytes(m, 1);
    int64_t n = cache_bytes > weights && lane > 0 ? (cache_bytes - weights) / lane : 0;
    return n < RP_LANES_MIN ? RP_LANES_MIN : n > RP_LANES_MAX ? RP_LANES_MAX : n;
}

int64_t rp_model_default_lanes(const rp_model *m)
{
    return rp_model_lanes_for_cache(m, rp_cache_bytes());
}

static rp_status model_generate_batch(rp_model *m, const int32_t *tokens, const int64_t *offsets,
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

    rpm_decoder d;
    void *block = NULL;
    RP_TRY(rpm_decoder_new(m, &d, rp_model_batch_lanes(m, n, max_lanes), &block));
    refresh_weights(m);
    gen_job j = {tokens, offsets, n, n_new, g, rngs, out, n_out};
    rp_status st = dec_run(&d, &j);
    free(block);
    return st;
}

rp_status rp_model_generate_batch(rp_model *m, const int32_t *tokens, const int64_t *offsets,
                                  int64_t n, int64_t n_new, const rp_gen_cfg *g, rp_rng *rngs,
                                  int64_t max_lanes, int32_t *out, int64_t *n_out)
{
    rp_fpmode fm = rp_fp_flush_begin();
    rp_status st =
        model_generate_batch(m, tokens, offsets, n, n_new, g, rngs, max_lanes, out, n_out);
    rp_fp_flush_end(fm);
    return st;
}
