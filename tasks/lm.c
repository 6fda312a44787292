/* Language modelling on token ids (docs/language_model.md): a folder with train.npy, valid.npy
 * and test.npy, each a 1-D array of ids of an integer dtype (what the ids cache of the Lua layer
 * writes, or NumPy's np.save of a tokenised text), every id below vocab_size. The splits are
 * kept one after the other in t->tokens; rp_task_batch draws random windows of a split,
 * rp_task_windows cuts a split into the deterministic windows of the evaluation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npy.h"
#include "task_impl.h"

static const char *const split_files[3] = {"train.npy", "valid.npy", "test.npy"};

/* Reads one split into a new int32 array (*ids, *n). */
static rp_status load_split(const rp_task *t, const char *file, int32_t **ids, int64_t *n)
{
    size_t len = strlen(t->path) + strlen(file) + 2;
    char *path = malloc(len);
    if (!path) return rp_error(RP_ERR_NOMEM, "%s: out of memory", t->path);
    snprintf(path, len, "%s/%s", t->path, file);
    rp_tensor x;
    memset(&x, 0, sizeof x);
    rp_npy_dtype dtype = RP_NPY_F32;
    rp_status st = rp_npy_load(path, &x, &dtype);
    if (st == RP_OK) {
        if (dtype == RP_NPY_F32 || dtype == RP_NPY_F64)
            st = rp_error(RP_ERR_IO, "%s: holds floating-point numbers, not token ids (an integer "
                                     "dtype: int32, int64, uint16, ...)", path);
        else if (x.ndim != 1)
            st = rp_error(RP_ERR_IO, "%s: must be a 1-D array of token ids, got %d dimensions",
                          path, x.ndim);
        else if (x.shape[0] == 0)
            st = rp_error(RP_ERR_IO, "%s: empty (no tokens)", path);
    }
    if (st == RP_OK) {
        const float *d = rp_tensor_data(&x);
        *n = x.shape[0];
        *ids = malloc((size_t)*n * sizeof **ids);
        if (!*ids) st = rp_error(RP_ERR_NOMEM, "%s: out of memory", path);
        for (int64_t i = 0; st == RP_OK && i < *n; i++) {
            float v = d[i]; /* an integer file's values are exact (|v| <= 2^24: npy.h) */
            if (!(v >= 0.0f && (double)v < (double)t->cfg.vocab_size)) {
                st = rp_error(RP_ERR_IO, "%s: token id %.0f at index %lld is outside the "
                                         "vocabulary 0..%lld (vocab_size %lld)", path, (double)v,
                              (long long)i, (long long)(t->cfg.vocab_size - 1),
                              (long long)t->cfg.vocab_size);
                break;
            }
            (*ids)[i] = (int32_t)v;
        }
        if (st != RP_OK) {
            free(*ids);
            *ids = NULL;
        }
    }
    rp_tensor_release(&x);
    free(path);
    return st;
}

rp_status rp__lm_load(rp_task *t)
{
    int32_t *part[3] = {NULL, NULL, NULL};
    int64_t n[3] = {0, 0, 0}, total = 0;
    rp_status st = RP_OK;
    for (int s = 0; s < 3 && st == RP_OK; s++) {
        st = load_split(t, split_files[s], &part[s], &n[s]);
        if (st == RP_OK) total += n[s]; /* each below RP_MAX_NUMEL (the npy reader's bound) */
    }
    if (st == RP_OK) {
        t->tokens = malloc((size_t)total * sizeof *t->tokens);
        if (!t->tokens) st = rp_error(RP_ERR_NOMEM, "%s: out of memory", t->path);
    }
    if (st == RP_OK) {
        int64_t at = 0;
        for (int s = 0; s < 3; s++) {
            t->split_at[s] = at;
            memcpy(t->tokens + at, part[s], (size_t)n[s] * sizeof *t->tokens);
            at += n[s];
        }
        t->split_at[3] = at;
        t->n_tokens = at;
        t->n_train = n[0];
        t->n_vocab = t->cfg.vocab_size;
    }
    for (int s = 0; s < 3; s++) free(part[s]);
    return st;
}

rp_status rp_task_split_len(const rp_task *t, int split, int64_t *n)
{
    *n = 0;
    if (t->cfg.kind == RP_TASK_TEXT && (split == RP_SPLIT_TRAIN || split == RP_SPLIT_VALID)) {
        *n = split == RP_SPLIT_TRAIN ? t->n_train : t->n_tokens - t->n_train;
        return RP_OK;
    }
    if (t->cfg.kind != RP_TASK_LM)
        return rp_error(RP_ERR_ARG, "task: only text and lm tasks have splits of a fixed size");
    if (split < RP_SPLIT_TRAIN || split > RP_SPLIT_TEST)
        return rp_error(RP_ERR_ARG, "task: split must be 0 (train), 1 (valid) or 2 (test), got %d",
                        split);
    *n = t->split_at[split + 1] - t->split_at[split];
    return RP_OK;
}

static const char *split_name(int split)
{
    return split == RP_SPLIT_TRAIN ? "train" : split == RP_SPLIT_VALID ? "valid" : "test";
}

rp_status rp_task_windows(const rp_task *t, int split, int64_t first, int64_t B, int32_t *inputs,
                          int32_t *targets, int64_t *rows, int64_t *windows)
{
    *rows = 0;
    *windows = 0;
    if (t->cfg.kind != RP_TASK_LM)
        return rp_error(RP_ERR_ARG, "windows: only lm tasks have evaluation windows");
    int64_t n;
    RP_TRY(rp_task_split_len(t, split, &n));
    int64_t T = t->cfg.seq_len;
    if (first < 0 || B < 0)
        return rp_error(RP_ERR_ARG, "windows: first and B must be >= 0, got %lld and %lld",
                        (long long)first, (long long)B);
    if (n < T + 1)
        return rp_error(RP_ERR_ARG, "windows: the %s split of %s has %lld %s, a window needs "
                                    "seq_len + 1 = %lld", split_name(split), t->path,
                        (long long)n, n == 1 ? "token" : "tokens", (long long)(T + 1));
    const int32_t *s = t->tokens + t->split_at[split];
    int64_t W = (n - 1 + T - 1) / T;
    *windows = W;
    for (int64_t r = 0; r < B && first + r < W; r++) {
        int64_t k = first + r, start = k * T, scored_from = start; /* targets s[j + 1], j >= .. */
        if (start + T + 1 > n) start = n - T - 1;                  /* the last window, shifted */
        for (int64_t j = 0; j < T; j++) {
            inputs[r * T + j] = s[start + j];
            targets[r * T + j] = start + j >= scored_from ? s[start + j + 1] : -1;
        }
        *rows = r + 1;
    }
    return RP_OK;
}
