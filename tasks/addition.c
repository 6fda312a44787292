/* Addition with step-by-step explanations: the write-up format (?d=A+B; ... and d==S#) and labml's
 * (?x=A+B; ... x==S\n), rules in docs/tasks.md (labml's: labml_nn/experiments/arithmetic_dataset.py
 * in labml's repository, github.com/labmlai/annotated_deep_learning_paper_implementations). */
#include <stdio.h>
#include <string.h>

#include "task_impl.h"

#define ADD_MAX_LEN 40   /* longest operand/answer text we accept in a question */

const char *rp__add_vocab(rp_add_format f)
{
    /* labml: list(string.digits + 'xe =\n?+;'); write-up: the same with d for x, # for \n, plus
     * the letters a n of " and " */
    return f == RP_ADD_LABML ? "0123456789xe =\n?+;" : "0123456789de =#?+;an";
}

/* labml's make_int: n "digits", the first from lo0..hi, the others 0..hi (hi 10 with the quirk). */
static int64_t make_int(rp_rng *rng, int64_t n, int quirk)
{
    int64_t hi = quirk ? 10 : 9, res = 0;
    for (int64_t i = 0; i < n; i++) res = res * 10 + rp_rng_int(rng, i == 0 ? 1 : 0, hi);
    return res;
}

static void draw_operands(rp_task *t, rp_rng *rng, int64_t n_digits, int64_t *x, int64_t *y)
{
    if (n_digits > 0) {   /* length generalisation: exactly n_digits digits, never the quirk */
        *x = make_int(rng, n_digits, 0);
        *y = make_int(rng, n_digits, 0);
        return;
    }
    int q = t->cfg.labml_digit_quirk;
    *x = make_int(rng, rp_rng_int(rng, 1, t->cfg.max_digits), q);
    *y = make_int(rng, rp_rng_int(rng, 1, t->cfg.max_digits), q);
}

int64_t rp__add_problem_text(rp_task *t, rp_rng *rng, char *buf)
{
    int64_t x, y;
    draw_operands(t, rng, 0, &x, &y);
    int labml = t->cfg.format == RP_ADD_LABML;
    char var = labml ? 'x' : 'd';
    const char *sep = labml ? " " : " and ";
    size_t cap = RP_TASK_PROBLEM_CAP, n;
    n = (size_t)snprintf(buf, cap, "?%c=%lld+%lld; ", var, (long long)x, (long long)y);
    int64_t s = x + y, carry = 0, e = 0;
    while (x > 0 || y > 0 || carry > 0) {   /* labml's get_add_explanation */
        int64_t rx = x % 10, ry = y % 10, total = rx + ry + carry;
        n += (size_t)snprintf(buf + n, cap - n, "%s%llde%lld+%llde%lld+%llde%lld==%llde%lld",
                              e ? sep : "", (long long)rx, (long long)e, (long long)ry,
                              (long long)e, (long long)carry, (long long)e, (long long)total,
                              (long long)e);
        x /= 10, y /= 10, carry = total / 10;
        e++;
    }
    n += (size_t)snprintf(buf + n, cap - n, "%s%c==%lld%c", sep, var, (long long)s,
                          labml ? '\n' : '#');
    RP_ASSERT(n < cap);
    return (int64_t)n;
}

rp_status rp__add_problem(rp_task *t, rp_rng *rng, int64_t n_digits, char *q, size_t qcap, char *a,
                          size_t acap)
{
    if (n_digits < 0 || n_digits > RP_TASK_MAX_DIGITS)
        return rp_error(RP_ERR_ARG, "problem: n_digits must be in 0..%d, got %lld",
                        RP_TASK_MAX_DIGITS, (long long)n_digits);
    int64_t x, y;
    draw_operands(t, rng, n_digits, &x, &y);
    char qb[64], ab[32];
    snprintf(qb, sizeof qb, "?%c=%lld+%lld;", t->cfg.format == RP_ADD_LABML ? 'x' : 'd',
             (long long)x, (long long)y);
    snprintf(ab, sizeof ab, "%lld", (long long)(x + y));
    if (!q || !a || strlen(qb) >= qcap || strlen(ab) >= acap)
        return rp_error(RP_ERR_ARG, "problem: buffers too small (need %zu and %zu bytes)",
                        strlen(qb) + 1, strlen(ab) + 1);
    memcpy(q, qb, strlen(qb) + 1);
    memcpy(a, ab, strlen(ab) + 1);
    return RP_OK;
}

/* Reads a run of 1..ADD_MAX_LEN decimal digits at *p into out (NUL-terminated). */
static int read_digits(const char **p, char *out)
{
    size_t n = 0;
    while (**p >= '0' && **p <= '9') {
        if (n >= ADD_MAX_LEN) return 0;
        out[n++] = *(*p)++;
    }
    out[n] = '\0';
    return n > 0;
}

/* Decimal string sum without leading zeros. */
static void add_decimal(const char *a, const char *b, char *out)
{
    char rev[ADD_MAX_LEN + 2];
    size_t la = strlen(a), lb = strlen(b), n = 0;
    int carry = 0;
    while (la > 0 || lb > 0 || carry) {
        int d = carry + (la > 0 ? a[--la] - '0' : 0) + (lb > 0 ? b[--lb] - '0' : 0);
        rev[n++] = (char)('0' + d % 10);
        carry = d / 10;
    }
    while (n > 1 && rev[n - 1] == '0') n--;
    for (size_t i = 0; i < n; i++) out[i] = rev[n - 1 - i];
    out[n] = '\0';
}

int rp__add_check(const rp_task *t, const char *question, const char *continuation)
{
    int labml = t->cfg.format == RP_ADD_LABML;
    char var = labml ? 'x' : 'd', term = labml ? '\n' : '#';
    char xa[ADD_MAX_LEN + 1], ya[ADD_MAX_LEN + 1], want[ADD_MAX_LEN + 2];
    const char *p = question;
    if (*p == '?') p++;
    if (*p++ != var || *p++ != '=' || !read_digits(&p, xa) || *p++ != '+' || !read_digits(&p, ya) ||
        *p++ != ';')
        return 0;
    while (*p == ' ') p++;
    if (*p) return 0;
    add_decimal(xa, ya, want);
    const char *end = strchr(continuation, term);
    if (!end) return 0;
    const char key[4] = {var, '=', '=', '\0'};
    const char *ans = NULL;
    for (const char *s = continuation; s + 3 <= end; s++)
        if (memcmp(s, key, 3) == 0) ans = s + 3;
    if (!ans) return 0;
    size_t n = (size_t)(end - ans);
    return n == strlen(want) && memcmp(ans, want, n) == 0;
}
