/* Task generators, common part: the task object, encode/decode and the dispatch to the kinds
 * (rules: docs/tasks.md). The options' defaults and checks come from the task table
 * (task_keys.c); the helpers the kinds share (UTF-8, the vocabulary) are in task_vocab.c, so that
 * calls go one way: task.c -> task_keys.c -> addition.c, substring.c, grid.c, text.c ->
 * task_vocab.c. */
#include <stdlib.h>
#include <string.h>

#include "task_impl.h"

const char *const rp_task_kind_names[] = {"addition",    "substring_index", "substring_prefix",
                                          "text",        "grid_offset",     "lm",
                                          NULL};
_Static_assert(sizeof rp_task_kind_names / sizeof *rp_task_kind_names == RP_TASK_LM + 2,
               "a name per kind");

static rp_status set_ascii_vocab(rp_task *t, const char *chars)
{
    int32_t cps[128];
    int64_t n = 0;
    for (const char *p = chars; *p; p++) cps[n++] = (unsigned char)*p;
    return rp__task_set_vocab(t, cps, n);
}

rp_task *rp_task_new(const rp_task_cfg *cfg)
{
    if (!cfg) {
        rp_error(RP_ERR_ARG, "task: NULL config");
        return NULL;
    }
    if (rp_task_cfg_check(cfg) != RP_OK) return NULL;
    rp_task *t = calloc(1, sizeof *t);
    if (!t) {
        rp_error(RP_ERR_NOMEM, "task: allocation");
        return NULL;
    }
    t->cfg = *cfg;
    t->cfg.path = NULL;
    rp_status st = RP_OK;
    switch (cfg->kind) {
    case RP_TASK_ADDITION: st = set_ascii_vocab(t, rp__add_vocab(cfg->format)); break;
    case RP_TASK_SUBSTR_INDEX: st = set_ascii_vocab(t, rp__sidx_vocab()); break;
    case RP_TASK_SUBSTR_PREFIX:
        st = set_ascii_vocab(t, rp__spre_vocab());
        if (st == RP_OK) st = rp__spre_init(t);
        break;
    case RP_TASK_GRID_OFFSET: st = rp__grid_init(t); break;
    case RP_TASK_TEXT:
    case RP_TASK_LM:
        t->path = strdup(cfg->path);
        if (!t->path) {
            st = rp_error(RP_ERR_NOMEM, "task: allocation");
            break;
        }
        t->cfg.path = t->path;
        st = cfg->kind == RP_TASK_TEXT ? rp__text_load(t) : rp__lm_load(t);
        break;
    }
    if (st != RP_OK) {
        rp_task_free(t);
        return NULL;
    }
    return t;
}

rp_status rp_task_split_sizes(const rp_task *t, int64_t *train, int64_t *valid)
{
    if (t->cfg.kind != RP_TASK_TEXT && t->cfg.kind != RP_TASK_LM)
        return rp_error(RP_ERR_ARG, "task: only text and lm tasks have splits of a fixed size");
    RP_TRY(rp_task_split_len(t, RP_SPLIT_TRAIN, train));
    return rp_task_split_len(t, RP_SPLIT_VALID, valid);
}

void rp_task_free(rp_task *t)
{
    if (!t) return;
    free(t->path);
    free(t->vocab);
    free(t->lookup);
    free(t->tokens);
    free(t->sp_out);
    free(t->sp_pure);
    free(t->sp_mask);
    free(t);
}

const rp_task_cfg *rp_task_config(const rp_task *t) { return &t->cfg; }

const int32_t *rp_task_vocab(const rp_task *t, int64_t *n)
{
    if (n) *n = t->n_vocab;
    return t->vocab;
}

rp_status rp_task_encode(const rp_task *t, const char *text, size_t text_len, int32_t *out,
                         int64_t cap, int64_t *n)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    int64_t k = 0;
    if (n) *n = 0;
    if (t->cfg.kind == RP_TASK_LM)
        return rp_error(RP_ERR_ARG, "encode: an lm task's vocabulary is its tokenizer's");
    if (cap < 0) return rp_error(RP_ERR_ARG, "encode: negative capacity %lld", (long long)cap);
    if (!text && text_len) return rp_error(RP_ERR_ARG, "encode: NULL text");
    while (i < text_len) {
        size_t at = i;
        int32_t cp = rp__utf8_next(s, text_len, &i);
        if (cp < 0) return rp_error(RP_ERR_ARG, "encode: invalid UTF-8 at byte %zu", at);
        int32_t id = rp__task_lookup_id(t, cp);
        if (id < 0) {
            char buf[5] = {0};
            if (cp >= 0x20 && cp != 0x7F) rp__utf8_put(cp, buf);
            return rp_error(RP_ERR_ARG,
                            "encode: character U+%04X '%s' at byte %zu is not in the vocabulary",
                            (unsigned)cp, buf, at);
        }
        if (k < cap) out[k] = id;
        k++;
    }
    if (n) *n = k;
    return RP_OK;
}

rp_status rp_task_decode(const rp_task *t, const int32_t *tokens, int64_t n, char *out, size_t cap,
                         size_t *len)
{
    size_t k = 0;
    if (len) *len = 0;
    if (t->cfg.kind == RP_TASK_LM)
        return rp_error(RP_ERR_ARG, "decode: an lm task's vocabulary is its tokenizer's");
    if (n < 0) return rp_error(RP_ERR_ARG, "decode: negative token count %lld", (long long)n);
    for (int64_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= t->n_vocab)
            return rp_error(RP_ERR_ARG, "decode: token %d at %lld is outside the vocabulary (0..%lld)",
                            (int)tokens[i], (long long)i, (long long)(t->n_vocab - 1));
        char buf[4];
        int m = rp__utf8_put(t->vocab[tokens[i]], buf);
        for (int j = 0; j < m; j++, k++)
            if (k < cap) out[k] = buf[j];
    }
    if (cap > 0) out[k < cap ? k : cap - 1] = '\0';
    if (len) *len = k;
    return RP_OK;
}

/* Problems of an algorithmic task concatenated until the sequence holds seq_len + 1 tokens (the
 * last one cut off), exactly labml's get_packed_math_input. */
static void pack_problems(rp_task *t, rp_rng *rng, int32_t *inputs, int32_t *targets)
{
    char buf[RP_TASK_PROBLEM_CAP];
    int64_t T = t->cfg.seq_len, filled = 0;
    while (filled < T + 1) {
        int64_t len = t->cfg.kind == RP_TASK_ADDITION ? rp__add_problem_text(t, rng, buf)
                                                      : rp__sidx_problem_text(t, rng, buf);
        for (int64_t j = 0; j < len && filled < T + 1; j++, filled++) {
            int32_t id = rp__ascii_id(t, buf[j]);
            if (filled < T) inputs[filled] = id;
            if (filled > 0) targets[filled - 1] = id;
        }
    }
}

rp_status rp_task_batch(rp_task *t, rp_rng *rng, int64_t B, int split, int32_t *inputs,
                        int32_t *targets)
{
    if (B < 0) return rp_error(RP_ERR_ARG, "batch: negative batch size %lld", (long long)B);
    if (t->cfg.kind == RP_TASK_LM && split == RP_SPLIT_TEST)
        return rp__text_batch(t, rng, B, split, inputs, targets);
    if (split != 0 && split != 1)
        return rp_error(RP_ERR_ARG, "batch: split must be 0 (train) or 1 (validation), got %d",
                        split);
    if (t->cfg.kind == RP_TASK_TEXT || t->cfg.kind == RP_TASK_LM)
        return rp__text_batch(t, rng, B, split, inputs, targets);
    int64_t T = t->cfg.seq_len;
    for (int64_t b = 0; b < B; b++) {
        if (t->cfg.kind == RP_TASK_SUBSTR_PREFIX)
            rp__spre_sequence(t, rng, inputs + b * T, targets + b * T);
        else if (t->cfg.kind == RP_TASK_GRID_OFFSET)
            rp__grid_sequence(t, rng, inputs + b * T, targets + b * T);
        else
            pack_problems(t, rng, inputs + b * T, targets + b * T);
    }
    return RP_OK;
}

rp_status rp_task_problem(rp_task *t, rp_rng *rng, int64_t n_digits, char *question, size_t qcap,
                          char *answer, size_t acap)
{
    switch (t->cfg.kind) {
    case RP_TASK_ADDITION:
        return rp__add_problem(t, rng, n_digits, question, qcap, answer, acap);
    case RP_TASK_SUBSTR_INDEX:
        if (n_digits != 0)
            return rp_error(RP_ERR_ARG, "problem: n_digits applies to addition only");
        return rp__sidx_problem(t, rng, question, qcap, answer, acap);
    case RP_TASK_GRID_OFFSET:
        if (n_digits != 0)
            return rp_error(RP_ERR_ARG, "problem: n_digits applies to addition only");
        return rp__grid_problem(t, rng, question, qcap, answer, acap);
    default:
        return rp_error(RP_ERR_ARG, "problem: the %s task has no evaluation problems",
                        t->cfg.kind == RP_TASK_TEXT ? "text" : t->cfg.kind == RP_TASK_LM
                                                                   ? "lm" : "substring-by-prefix");
    }
}

int rp_task_check(const rp_task *t, const char *question, const char *continuation)
{
    if (!question || !continuation) return 0;
    switch (t->cfg.kind) {
    case RP_TASK_ADDITION: return rp__add_check(t, question, continuation);
    case RP_TASK_SUBSTR_INDEX: return rp__sidx_check(t, question, continuation);
    case RP_TASK_GRID_OFFSET: return rp__grid_check(t, question, continuation);
    default: return 0;
    }
}

rp_status rp_task_positions2d(const rp_task *t, int64_t n, int32_t *rc)
{
    if (t->cfg.kind != RP_TASK_GRID_OFFSET)
        return rp_error(RP_ERR_ARG, "positions2d: only grid_offset tasks have 2-D positions");
    if (n < 0) return rp_error(RP_ERR_ARG, "positions2d: negative token count %lld", (long long)n);
    rp__grid_positions(t, n, rc);
    return RP_OK;
}
