/* Substring tasks: by index (?s='<s>'; s[i:]=='<suffix>'#, our documented design) and by prefix
 * (labml's copy_repeat, CopyPermRepeatDataset), rules in docs/tasks.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "task_impl.h"

const char *rp__sidx_vocab(void) { return "0123456789abcdefghijklmnopqrstuvwxyz ?=';[]:#"; }
const char *rp__spre_vocab(void) { return "acgt>"; }

/* ---- substring by index ---- */

static int64_t sidx_draw(rp_task *t, rp_rng *rng, char *s)
{
    int64_t n = t->cfg.str_len;
    for (int64_t k = 0; k < n; k++) s[k] = (char)('a' + rp_rng_int(rng, 0, 25));
    s[n] = '\0';
    return rp_rng_int(rng, 0, n - 1);
}

int64_t rp__sidx_problem_text(rp_task *t, rp_rng *rng, char *buf)
{
    char s[RP_TASK_MAX_STR_LEN + 1];
    int64_t i = sidx_draw(t, rng, s);
    int n = snprintf(buf, RP_TASK_PROBLEM_CAP, "?s='%s'; s[%lld:]=='%s'#", s, (long long)i, s + i);
    RP_ASSERT(n > 0 && n < RP_TASK_PROBLEM_CAP);
    return n;
}

rp_status rp__sidx_problem(rp_task *t, rp_rng *rng, char *q, size_t qcap, char *a, size_t acap)
{
    char s[RP_TASK_MAX_STR_LEN + 1];
    int64_t i = sidx_draw(t, rng, s);
    size_t nq = strlen(s) + 32, na = strlen(s) + 3;
    if (!q || !a || qcap < nq || acap < na)
        return rp_error(RP_ERR_ARG, "problem: buffers too small (need %zu and %zu bytes)", nq, na);
    snprintf(q, qcap, "?s='%s'; s[%lld:]==", s, (long long)i);
    snprintf(a, acap, "'%s'", s + i);
    return RP_OK;
}

int rp__sidx_check(const rp_task *t, const char *question, const char *continuation)
{
    const char *p = question;
    if (*p == '?') p++;
    if (strncmp(p, "s='", 3) != 0) return 0;
    p += 3;
    const char *s = p;
    while (*p >= 'a' && *p <= 'z') p++;
    size_t len = (size_t)(p - s);
    if (strncmp(p, "'; s[", 5) != 0) return 0;
    p += 5;
    if (!(*p >= '0' && *p <= '9')) return 0;
    size_t i = 0;
    while (*p >= '0' && *p <= '9') {
        if (i > RP_TASK_MAX_STR_LEN) return 0;
        i = i * 10 + (size_t)(*p++ - '0');
    }
    if (strcmp(p, ":]==") != 0) return 0;
    if (i > len) i = len;   /* Python slicing: s[i:] is '' past the end */
    const char *end = strchr(continuation, '#');
    if (!end) return 0;
    size_t n = (size_t)(end - continuation), m = len - i;
    return n == m + 2 && continuation[0] == '\'' && continuation[n - 1] == '\'' &&
           memcmp(continuation + 1, s + i, m) == 0;
}

/* ---- substring by prefix (copy_repeat) ---- */

static size_t spre_cap(const rp_task *t)
{
    return (size_t)(t->cfg.seq_len + t->cfg.rnd_len + 2 * t->cfg.substr_len + 2);
}

rp_status rp__spre_init(rp_task *t)
{
    size_t cap = spre_cap(t);
    t->sp_out = malloc(cap);
    t->sp_pure = malloc(cap);
    t->sp_mask = malloc(cap);
    if (!t->sp_out || !t->sp_pure || !t->sp_mask)
        return rp_error(RP_ERR_NOMEM, "task: substring-by-prefix buffers");
    return RP_OK;
}

void rp__spre_sequence(rp_task *t, rp_rng *rng, int32_t *inputs, int32_t *targets)
{
    static const char letters[4] = {'a', 'c', 'g', 't'};
    char *out = t->sp_out, *pure = t->sp_pure;
    unsigned char *mask = t->sp_mask;
    int64_t T = t->cfg.seq_len, L = t->cfg.substr_len, no = 0, np = 0;
    size_t cap = spre_cap(t);
    for (int64_t k = 0; k < L; k++) {               /* pure = random_string(substr_len) */
        char c = letters[rp_rng_int(rng, 0, 3)];
        out[no] = c, mask[no++] = 0, pure[np++] = c;
    }
    while (no <= T) {
        int64_t n = rp_rng_int(rng, 1, t->cfg.rnd_len - 1);   /* randrange(1, rnd_len) */
        for (int64_t k = 0; k < n; k++) {
            char c = letters[rp_rng_int(rng, 0, 3)];
            out[no] = c, mask[no++] = 0, pure[np++] = c;
        }
        out[no] = '>', mask[no++] = 0;
        int64_t off = rp_rng_int(rng, 0, np - L - 1);          /* randrange(0, len(pure) - L) */
        int64_t np0 = np;
        for (int64_t k = 0; k < L; k++) {
            char c = pure[off + k];
            out[no] = c, mask[no++] = k > 0;
            pure[np0 + k] = c;
        }
        np = np0 + L;
        RP_ASSERT((size_t)no <= cap && (size_t)np <= cap);
    }
    for (int64_t j = 0; j < T; j++) {
        inputs[j] = rp__ascii_id(t, out[j]);
        targets[j] = mask[j + 1] ? rp__ascii_id(t, out[j + 1]) : -1;
    }
}
