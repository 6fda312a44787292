/* Internal to tasks/: the task object and the per-kind hooks (not part of the public API). */
#ifndef RP_TASK_IMPL_H
#define RP_TASK_IMPL_H

#include "task.h"

/* Longest problem text of the algorithmic tasks, in bytes (addition <= ~700 at 18 digits,
 * substring by index <= 2 * RP_TASK_MAX_STR_LEN + 40, grid offset <= (32 + 4) * 32). */
#define RP_TASK_PROBLEM_CAP 4096
#define RP_TASK_MAX_STR_LEN 1000
#define RP_TASK_MAX_SEQ_LEN ((int64_t)1 << 24) /* seq_len */
#define RP_TASK_MAX_PIECE (1 << 16)   /* substr_len, rnd_len */

typedef struct { int32_t cp, id; } rp_task_cpid;

struct rp_task {
    rp_task_cfg cfg;
    char *path;          /* owned copy of cfg.path (text) */
    int32_t *vocab;      /* id -> code point */
    int64_t n_vocab;
    rp_task_cpid *lookup;/* sorted by code point, for encode */
    int32_t ascii_id[128];
    /* text, lm */
    int32_t *tokens;
    int64_t n_tokens, n_train;
    int64_t split_at[4];  /* lm: split s is tokens[split_at[s] .. split_at[s + 1]) */
    /* substring by prefix scratch (out, mask, pure) */
    char *sp_out, *sp_pure;
    unsigned char *sp_mask;
};

/* task_vocab.c: the helpers every part of tasks/ may call (it calls nothing in tasks/). */
/* UTF-8. decode: the code point at s[*i] (advances *i), or -1 for invalid UTF-8 (overlong forms,
 * surrogates, > U+10FFFF, truncated sequences). encode: bytes written (1..4). */
int32_t rp__utf8_next(const unsigned char *s, size_t n, size_t *i);
int rp__utf8_put(int32_t cp, char *out);
/* Vocabulary from a list of distinct code points in id order. */
rp_status rp__task_set_vocab(rp_task *t, const int32_t *cps, int64_t n);
/* The id of an ASCII character of an algorithmic vocabulary (asserts it is in it). */
int32_t rp__ascii_id(const rp_task *t, char c);
/* The id of code point cp, or -1 when it is not in the vocabulary. */
int32_t rp__task_lookup_id(const rp_task *t, int32_t cp);

/* addition.c */
const char *rp__add_vocab(rp_add_format f);
int64_t rp__add_problem_text(rp_task *t, rp_rng *rng, char *buf);
rp_status rp__add_problem(rp_task *t, rp_rng *rng, int64_t n_digits, char *q, size_t qcap,
                          char *a, size_t acap);
int rp__add_check(const rp_task *t, const char *question, const char *continuation);

/* substring.c */
const char *rp__sidx_vocab(void);
const char *rp__spre_vocab(void);
int64_t rp__sidx_problem_text(rp_task *t, rp_rng *rng, char *buf);
rp_status rp__sidx_problem(rp_task *t, rp_rng *rng, char *q, size_t qcap, char *a, size_t acap);
int rp__sidx_check(const rp_task *t, const char *question, const char *continuation);
rp_status rp__spre_init(rp_task *t);
void rp__spre_sequence(rp_task *t, rp_rng *rng, int32_t *inputs, int32_t *targets);

/* grid.c */
rp_status rp__grid_init(rp_task *t);
void rp__grid_sequence(rp_task *t, rp_rng *rng, int32_t *inputs, int32_t *targets);
rp_status rp__grid_problem(rp_task *t, rp_rng *rng, char *q, size_t qcap, char *a, size_t acap);
int rp__grid_check(const rp_task *t, const char *question, const char *continuation);
void rp__grid_positions(const rp_task *t, int64_t n, int32_t *rc);

/* text.c */
rp_status rp__text_load(rp_task *t);
rp_status rp__text_batch(rp_task *t, rp_rng *rng, int64_t B, int split, int32_t *inputs,
                         int32_t *targets);

/* lm.c */
rp_status rp__lm_load(rp_task *t);

#endif
