/* Task generators (tasks/task.h): every generated problem is parsed and re-solved by an
 * independent checker written here (sscanf/strtoll, the addition redone digit by digit, the
 * slicing redone, the grid offset looked up cell by cell), packing and score masks are checked
 * against labml's rules (and the grid offset's own), and the text task, encode/decode,
 * rp_task_check, the 2-D positions and the error paths are exercised. */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "rp.h"
#include "task.h"

/* The documented vocabularies (docs/tasks.md), id = index. */
static const char V_WRITEUP[] = "0123456789de =#?+;an";
static const char V_LABML[] = "0123456789xe =\n?+;";
static const char V_SIDX[] = "0123456789abcdefghijklmnopqrstuvwxyz ?=';[]:#";
static const char V_SPRE[] = "acgt>";
static const char V_GRID[] = "abcdefgh0123456789*?+-=#.";   /* grid offset, alphabet 8 */

static int vocab_is(const rp_task *t, const char *want)
{
    int64_t n;
    const int32_t *v = rp_task_vocab(t, &n);
    if (n != (int64_t)strlen(want)) return 0;
    for (int64_t i = 0; i < n; i++)
        if (v[i] != (unsigned char)want[i]) return 0;
    return 1;
}

static rp_task *new_task(rp_task_cfg c)
{
    rp_task *t = rp_task_new(&c);
    if (!t) {
        printf("FATAL: rp_task_new failed: %s\n", rp_last_error());
        exit(2);
    }
    return t;
}

/* ---- the independent addition checker ---- */

typedef struct {
    int64_t n_problems, n_cut;
    int64_t max_operand, min_operand;
    int64_t len_seen[20];           /* operand digit counts seen */
    int64_t above_max_digits;       /* operands with more digits than max_digits (labml quirk) */
    int64_t place_carry_from_ten;   /* operand values whose digits cannot all be 0..9 draws */
    int bad;
} add_stats;

static int n_dec_digits(int64_t v)
{
    int n = 1;
    while (v >= 10) v /= 10, n++;
    return n;
}

/* Parses one complete problem at p (without the leading '?'); returns its length including the
 * terminator, or 0 (and reports) when it is malformed. */
static size_t check_add_problem(const char *p, int labml, add_stats *st)
{
    char var = labml ? 'x' : 'd';
    const char *sep = labml ? " " : " and ";
    const char *s = p;
    char v;
    long long x, y;
    int n = 0;
    if (sscanf(s, "%c=%lld+%lld;%n", &v, &x, &y, &n) != 3 || n == 0 || v != var) {
        CHECK(0, "addition: bad header in \"%.60s\"", p);
        return 0;
    }
    /* the operands as printed: no sign, no leading zero */
    {
        const char *q = s + 2;
        CHECK(q[0] >= '1' && q[0] <= '9', "addition: leading digit of x in \"%.40s\"", p);
        q = strchr(s, '+') + 1;
        CHECK(q[0] >= '1' && q[0] <= '9', "addition: leading digit of y in \"%.40s\"", p);
    }
    s += n;
    if (*s++ != ' ') {
        CHECK(0, "addition: no space after ';' in \"%.60s\"", p);
        return 0;
    }
    /* the steps, recomputed place by place */
    long long rx_, ry_, c_, tot, e1, e2, e3, e4;
    long long xx = x, yy = y, carry = 0, e = 0;
    while (xx > 0 || yy > 0 || carry > 0) {
        if (e > 0) {
            if (strncmp(s, sep, strlen(sep)) != 0) {
                CHECK(0, "addition: separator before step %lld in \"%.80s\"", e, p);
                return 0;
            }
            s += strlen(sep);
        }
        n = 0;
        if (sscanf(s, "%llde%lld+%llde%lld+%llde%lld==%llde%lld%n", &rx_, &e1, &ry_, &e2, &c_, &e3,
                   &tot, &e4, &n) != 8 || n == 0) {
            CHECK(0, "addition: step %lld unreadable in \"%.80s\"", e, s);
            return 0;
        }
        long long rx = xx % 10, ry = yy % 10;
        if (!CHECK(rx_ == rx && ry_ == ry && c_ == carry && tot == rx + ry + carry && e1 == e &&
                       e2 == e && e3 == e && e4 == e,
                   "addition: step %lld of %lld+%lld is \"%.*s\"", e, x, y, n, s))
            return 0;
        s += n;
        carry = (rx + ry + carry) / 10, xx /= 10, yy /= 10, e++;
    }
    CHECK(e >= 1, "addition: no steps");
    char tail[64];
    snprintf(tail, sizeof tail, "%s%c==%lld%c", sep, var, x + y, labml ? '\n' : '#');
    if (strncmp(s, tail, strlen(tail)) != 0) {
        CHECK(0, "addition: ending of %lld+%lld is \"%.30s\"", x, y, s);
        return 0;
    }
    s += strlen(tail);
    st->n_problems++;
    int64_t ops[2] = {x, y};
    for (int k = 0; k < 2; k++) {
        int64_t o = ops[k];
        if (o > st->max_operand) st->max_operand = o;
        if (st->min_operand == 0 || o < st->min_operand) st->min_operand = o;
        int nd = n_dec_digits(o);
        st->len_seen[nd < 20 ? nd : 19]++;
    }
    return (size_t)(s - p);
}

/* Decodes a packed sequence (inputs + the last target) with the documented vocabulary. */
static void to_text(const int32_t *in, const int32_t *tg, int64_t T, const char *vocab, char *out)
{
    for (int64_t j = 0; j < T; j++) out[j] = vocab[in[j]];
    out[T] = tg[T - 1] >= 0 ? vocab[tg[T - 1]] : '*';
    out[T + 1] = '\0';
}

static void check_shift(const int32_t *in, const int32_t *tg, int64_t T, int64_t nv, const char *what)
{
    int ok = 1;
    for (int64_t j = 0; j < T; j++) {
        if (in[j] < 0 || in[j] >= nv) ok = 0;
        if (j + 1 < T && tg[j] != in[j + 1]) ok = 0;
    }
    if (tg[T - 1] < 0 || tg[T - 1] >= nv) ok = 0;
    CHECK(ok, "%s: targets are the inputs shifted by one", what);
}

static void run_addition(rp_add_format fmt, int64_t max_digits, int quirk, int64_t T, int n_seeds,
                         add_stats *st)
{
    rp_task_cfg c = rp_task_cfg_default(RP_TASK_ADDITION);
    c.format = fmt, c.max_digits = max_digits, c.labml_digit_quirk = quirk, c.seq_len = T;
    rp_task *t = new_task(c);
    int labml = fmt == RP_ADD_LABML;
    const char *V = labml ? V_LABML : V_WRITEUP;
    CHECK(vocab_is(t, V), "addition vocabulary (format %d)", (int)fmt);
    int64_t B = 4;
    int32_t *in = malloc((size_t)(B * T) * sizeof *in), *tg = malloc((size_t)(B * T) * sizeof *tg);
    char *txt = malloc((size_t)T + 2);
    memset(st, 0, sizeof *st);
    for (int seed = 0; seed < n_seeds; seed++) {
        rp_rng r;
        rp_rng_seed(&r, (uint64_t)seed * 7919u + 1);
        CHECK_STATUS(rp_task_batch(t, &r, B, 0, in, tg), RP_OK, NULL);
        for (int64_t b = 0; b < B; b++) {
            check_shift(in + b * T, tg + b * T, T, (int64_t)strlen(V), "addition");
            to_text(in + b * T, tg + b * T, T, V, txt);
            if (!CHECK(txt[0] == '?', "addition: sequence starts at '?'")) continue;
            size_t pos = 0, L = (size_t)T + 1;
            while (pos < L) {
                CHECK(txt[pos] == '?', "addition: problem starts with '?'");
                pos++;
                const char *term = memchr(txt + pos, labml ? '\n' : '#', L - pos);
                if (!term) { st->n_cut++; break; }   /* the last problem, cut off */
                size_t n = check_add_problem(txt + pos, labml, st);
                if (!n) { st->bad++; break; }
                CHECK(txt + pos + n - 1 == term, "addition: problem ends at its terminator");
                pos += n;
            }
            CHECK(pos <= L, "addition: packing overran");
        }
    }
    free(in), free(tg), free(txt);
    rp_task_free(t);
}

static void test_addition(void)
{
    add_stats st;
    /* write-up: operands 1..8 digits, digits 0..9, leading digit non-zero, no quirk */
    run_addition(RP_ADD_WRITEUP, 8, 0, 256, 200, &st);
    CHECK(st.n_problems > 1000 && st.bad == 0, "writeup: %lld problems parsed", (long long)st.n_problems);
    CHECK(st.n_cut > 700 && st.n_cut <= 800, "writeup: sequences end in a cut problem unless one ends exactly (%lld)", (long long)st.n_cut);
    CHECK(st.max_operand <= 99999999 && st.min_operand >= 1, "writeup operands in 1..99999999 (max %lld)",
          (long long)st.max_operand);
    int all = 1;
    for (int d = 1; d <= 8; d++) all &= st.len_seen[d] > 0;
    CHECK(all && st.len_seen[9] == 0, "writeup: every digit count 1..8 occurs, none above");
    /* roughly uniform digit counts: each about 1/8 of the operands */
    int64_t tot = 2 * st.n_problems;
    for (int d = 1; d <= 8; d++)
        CHECK(st.len_seen[d] > tot / 16 && st.len_seen[d] < tot / 5, "writeup: %d-digit share %lld of %lld",
              d, (long long)st.len_seen[d], (long long)tot);

    /* labml with the quirk: 7 digits, some operands get an 8th digit, never above 11111110 */
    run_addition(RP_ADD_LABML, 7, 1, 512, 200, &st);
    CHECK(st.n_problems > 1000 && st.bad == 0, "labml: %lld problems parsed", (long long)st.n_problems);
    CHECK(st.len_seen[8] > 0 && st.len_seen[9] == 0, "labml quirk: %lld operands with 8 digits",
          (long long)st.len_seen[8]);
    CHECK(st.max_operand <= 11111110 && st.max_operand > 9999999, "labml quirk: max operand %lld",
          (long long)st.max_operand);
    /* labml without the quirk */
    run_addition(RP_ADD_LABML, 7, 0, 512, 100, &st);
    CHECK(st.n_problems > 500 && st.bad == 0 && st.max_operand <= 9999999,
          "labml without quirk: max operand %lld", (long long)st.max_operand);
    /* large operands (18 digits, quirk: 19 digits) stay exact */
    run_addition(RP_ADD_WRITEUP, 18, 1, 1024, 30, &st);
    CHECK(st.bad == 0 && st.max_operand <= 1111111111111111110LL, "18 digits with quirk: max %lld",
          (long long)st.max_operand);
    /* short sequences: seq_len 8 */
    run_addition(RP_ADD_WRITEUP, 3, 0, 8, 50, &st);
    CHECK(st.bad == 0 && st.n_cut == 200, "seq_len 8: %lld cut", (long long)st.n_cut);
}

/* ---- substring by index ---- */

static size_t check_sidx_problem(const char *p, int64_t str_len, int64_t *seen)
{
    char s[1100], suf[1100];
    long long i;
    int n = 0;
    if (sscanf(p, "s='%1099[a-z]'; s[%lld:]=='%1099[a-z]'#%n", s, &i, suf, &n) != 3 || n == 0) {
        CHECK(0, "substring: unreadable \"%.60s\"", p);
        return 0;
    }
    if (!CHECK((int64_t)strlen(s) == str_len && i >= 0 && i < str_len && strcmp(s + i, suf) == 0,
               "substring: \"%.*s\"", n, p))
        return 0;
    seen[i]++;
    return (size_t)n;
}

static void test_substr_index(void)
{
    rp_task_cfg c = rp_task_cfg_default(RP_TASK_SUBSTR_INDEX);
    CHECK(c.str_len == 13 && c.seq_len == 256, "substring-by-index defaults");
    rp_task *t = new_task(c);
    CHECK(vocab_is(t, V_SIDX), "substring-by-index vocabulary");
    int64_t T = c.seq_len, B = 3, seen[13] = {0}, n_problems = 0, bad = 0;
    int32_t in[3 * 256], tg[3 * 256];
    char txt[300];
    int64_t letters[26] = {0};
    for (int seed = 0; seed < 200; seed++) {
        rp_rng r;
        rp_rng_seed(&r, (uint64_t)seed + 100);
        CHECK_STATUS(rp_task_batch(t, &r, B, 1, in, tg), RP_OK, NULL);
        for (int64_t b = 0; b < B; b++) {
            check_shift(in + b * T, tg + b * T, T, (int64_t)strlen(V_SIDX), "substring");
            to_text(in + b * T, tg + b * T, T, V_SIDX, txt);
            size_t pos = 0, L = (size_t)T + 1;
            while (pos < L) {
                if (!CHECK(txt[pos] == '?', "substring: problem starts with '?'")) break;
                pos++;
                if (!memchr(txt + pos, '#', L - pos)) break;
                size_t n = check_sidx_problem(txt + pos, 13, seen);
                if (!n) { bad++; break; }
                for (size_t k = 3; k < 16; k++) letters[txt[pos + k] - 'a']++;
                pos += n, n_problems++;
            }
        }
    }
    CHECK(bad == 0 && n_problems > 3000, "substring: %lld problems parsed", (long long)n_problems);
    int all = 1;
    for (int i = 0; i < 13; i++) all &= seen[i] > n_problems / 20;
    CHECK(all, "substring: every index 0..12 occurs about uniformly");
    all = 1;
    for (int i = 0; i < 26; i++) all &= letters[i] > n_problems * 13 / 52;
    CHECK(all, "substring: every letter a..z occurs");

    /* evaluation problems and the checker */
    rp_rng r;
    rp_rng_seed(&r, 5);
    for (int k = 0; k < 200; k++) {
        char q[128], a[64], s[64], cont[128];
        long long i;
        int n = 0;
        CHECK_STATUS(rp_task_problem(t, &r, 0, q, sizeof q, a, sizeof a), RP_OK, NULL);
        if (!CHECK(sscanf(q, "?s='%63[a-z]'; s[%lld:]==%n", s, &i, &n) == 2 && q[n] == '\0',
                   "substring question \"%s\"", q))
            continue;
        snprintf(cont, sizeof cont, "'%s'", s + i);
        CHECK(strcmp(a, cont) == 0, "substring answer \"%s\" for \"%s\"", a, q);
        snprintf(cont, sizeof cont, "'%s'#", s + i);
        CHECK(rp_task_check(t, q, cont) == 1, "check correct \"%s\"", cont);
        snprintf(cont, sizeof cont, "'%s'#?s='abc'; s[1:]=='bc'#", s + i);
        CHECK(rp_task_check(t, q, cont) == 1, "check stops at the first '#'");
        snprintf(cont, sizeof cont, "'%s'", s + i);
        CHECK(rp_task_check(t, q, cont) == 0, "check: no terminator");
        snprintf(cont, sizeof cont, "'%s'#", s + i + 1);
        CHECK(rp_task_check(t, q, cont) == 0, "check: wrong (one short)");
        snprintf(cont, sizeof cont, "'%sa'#", s + i);
        CHECK(rp_task_check(t, q, cont) == 0, "check: wrong (one long)");
        snprintf(cont, sizeof cont, "%s#", s + i);
        CHECK(rp_task_check(t, q, cont) == 0, "check: missing quotes");
        CHECK(rp_task_check(t, q, "") == 0 && rp_task_check(t, q, "#") == 0 &&
                  rp_task_check(t, q, "]]=:'#") == 0 && rp_task_check(t, q, "\xff\xfe#") == 0,
              "check: garbage");
    }
    CHECK(rp_task_check(t, "?s='abc'; s[5:]==", "''#") == 1, "check: python slicing past the end");
    CHECK(rp_task_check(t, "garbage", "''#") == 0, "check: unparsable question");
    char q[8], a[64];
    CHECK_STATUS(rp_task_problem(t, &r, 0, q, sizeof q, a, sizeof a), RP_ERR_ARG, "too small");
    char q2[64];
    CHECK_STATUS(rp_task_problem(t, &r, 3, q2, sizeof q2, a, sizeof a), RP_ERR_ARG, "n_digits");
    rp_task_free(t);
}

/* ---- substring by prefix (copy_repeat) ---- */

static void test_substr_prefix(void)
{
    rp_task_cfg c = rp_task_cfg_default(RP_TASK_SUBSTR_PREFIX);
    CHECK(c.substr_len == 16 && c.rnd_len == 12, "copy_repeat defaults");
    c.seq_len = 512;
    rp_task *t = new_task(c);
    CHECK(vocab_is(t, V_SPRE), "copy_repeat vocabulary");
    int64_t T = 512, B = 2, n_copies = 0, n_scored = 0, fill_seen[12] = {0};
    int32_t *in = malloc((size_t)(B * T) * sizeof *in), *tg = malloc((size_t)(B * T) * sizeof *tg);
    char txt[520], pure[1200];
    int bad = 0;
    for (int seed = 0; seed < 100 && !bad; seed++) {
        rp_rng r;
        rp_rng_seed(&r, (uint64_t)seed * 31 + 3);
        CHECK_STATUS(rp_task_batch(t, &r, B, 0, in, tg), RP_OK, NULL);
        for (int64_t b = 0; b < B && !bad; b++) {
            const int32_t *x = in + b * T, *y = tg + b * T;
            for (int64_t j = 0; j < T; j++) txt[j] = V_SPRE[x[j]];
            txt[T] = '\0';
            /* expected mask, rebuilt from the '>' markers: chars 2..16 of each copy */
            int64_t want_scored[600];
            for (int64_t j = 0; j <= T; j++) want_scored[j] = 0;
            int64_t np = 16, pos = 16;
            memcpy(pure, txt, 16);
            for (int64_t j = 0; j < 16; j++) bad |= txt[j] == '>';
            while (pos < T && !bad) {
                int64_t f = 0;
                while (pos < T && txt[pos] != '>') pure[np++] = txt[pos++], f++;
                if (pos >= T) break;
                if (f < 1 || f > 11) { bad = 1; CHECK(0, "filler length %lld", (long long)f); break; }
                fill_seen[f]++;
                pos++;   /* '>' */
                int64_t n = T - pos < 16 ? T - pos : 16;
                /* the copy must be pure[off..off+16) for some off in 0..np-17 */
                int found = 0;
                for (int64_t off = 0; off + 16 < np + 1 && off <= np - 17 && !found; off++)
                    found = memcmp(pure + off, txt + pos, (size_t)n) == 0;
                if (!found) { bad = 1; CHECK(0, "copy at %lld not found in the pure text", (long long)pos); break; }
                for (int64_t k = 1; k < 16; k++) want_scored[pos + k] = 1;
                for (int64_t k = 0; k < n; k++) bad |= txt[pos + k] == '>';
                if (n == 16) memcpy(pure + np, txt + pos, 16), np += 16;
                pos += 16;
                n_copies++;
            }
            /* targets: -1 exactly where copy_repeat's mask is false */
            int ok = 1;
            for (int64_t j = 0; j < T; j++) {
                if (want_scored[j + 1]) {
                    n_scored++;
                    if (j + 1 < T ? y[j] != x[j + 1] : (y[j] < 0 || y[j] > 3)) ok = 0;
                } else if (y[j] != -1) {
                    ok = 0;
                }
            }
            if (!CHECK(ok, "copy_repeat: -1 exactly where the mask is false (seed %d)", seed)) bad = 1;
        }
    }
    CHECK(!bad && n_copies > 2000, "copy_repeat: %lld copies checked, %lld scored targets",
          (long long)n_copies, (long long)n_scored);
    int all = 1;
    for (int f = 1; f <= 11; f++) all &= fill_seen[f] > 0;
    CHECK(all, "copy_repeat: every filler length 1..11 occurs");
    rp_rng r;
    rp_rng_seed(&r, 1);
    char q[64], a[64];
    CHECK_STATUS(rp_task_problem(t, &r, 0, q, sizeof q, a, sizeof a), RP_ERR_ARG, "no evaluation");
    CHECK(rp_task_check(t, "?", "#") == 0, "copy_repeat: check is always 0");
    free(in), free(tg);
    rp_task_free(t);
}

/* ---- addition evaluation problems, n_digits and the checker ---- */

static void test_addition_problems(void)
{
    for (int f = 0; f < 2; f++) {
        rp_task_cfg c = rp_task_cfg_default(RP_TASK_ADDITION);
        rp_task_cfg_addition_format(&c, (rp_add_format)f);
        CHECK(c.format == (rp_add_format)f && c.max_digits == (f ? 7 : 8) &&
                  c.labml_digit_quirk == f && c.seq_len == 256,
              "format %d defaults: %lld digits, quirk %d", f, (long long)c.max_digits,
              c.labml_digit_quirk);
        rp_task *t = new_task(c);
        char var = f ? 'x' : 'd', term = f ? '\n' : '#';
        rp_rng r;
        rp_rng_seed(&r, 77);
        for (int64_t nd = 0; nd <= 18; nd++) {
            for (int k = 0; k < 20; k++) {
                char q[64], a[32], cont[256], v;
                long long x, y;
                int n = 0;
                CHECK_STATUS(rp_task_problem(t, &r, nd, q, sizeof q, a, sizeof a), RP_OK, NULL);
                if (!CHECK(sscanf(q, "?%c=%lld+%lld;%n", &v, &x, &y, &n) == 3 && v == var && q[n] == '\0',
                           "question \"%s\"", q))
                    continue;
                if (nd > 0)
                    CHECK(n_dec_digits(x) == nd && n_dec_digits(y) == nd, "n_digits %lld: %s",
                          (long long)nd, q);
                else
                    CHECK(n_dec_digits(x) <= (f ? 8 : 8) && x >= 1 && y >= 1, "training distribution: %s", q);
                char want[32];
                snprintf(want, sizeof want, "%lld", x + y);
                CHECK(strcmp(a, want) == 0, "answer %s for %s", a, q);
                snprintf(cont, sizeof cont, " 1e0+2e0+0e0==3e0 %s%c==%s%c", f ? "" : "and ", var, want, term);
                CHECK(rp_task_check(t, q, cont) == 1, "check correct: %s", cont);
                snprintf(cont, sizeof cont, "%c==%s%cgarbage after", var, want, term);
                CHECK(rp_task_check(t, q, cont) == 1, "check ignores what follows the terminator");
                snprintf(cont, sizeof cont, " %c==1 and %c==%s%c", var, var, want, term);
                CHECK(rp_task_check(t, q, cont) == 1, "check takes the last %c==", var);
                snprintf(cont, sizeof cont, " %c==%s", var, want);
                CHECK(rp_task_check(t, q, cont) == 0, "check: missing terminator");
                snprintf(cont, sizeof cont, " %c==%lld%c", var, x + y + 1, term);
                CHECK(rp_task_check(t, q, cont) == 0, "check: wrong answer");
                snprintf(cont, sizeof cont, " %c==0%s%c", var, want, term);
                CHECK(rp_task_check(t, q, cont) == 0, "check: leading zero is wrong");
                snprintf(cont, sizeof cont, " %c==%s %c", var, want, term);
                CHECK(rp_task_check(t, q, cont) == 0, "check: trailing space is wrong");
                snprintf(cont, sizeof cont, "%c%c==%s", term, var, want);
                CHECK(rp_task_check(t, q, cont) == 0, "check: answer after the terminator");
                snprintf(cont, sizeof cont, " %c==%s%c", f ? 'd' : 'x', want, term);
                CHECK(rp_task_check(t, q, cont) == 0, "check: the other format's variable");
                CHECK(rp_task_check(t, q, "") == 0 && rp_task_check(t, q, "??++;;") == 0 &&
                          rp_task_check(t, q, "\xc3(==#\n") == 0,
                      "check: garbage");
            }
        }
        char q[64], a[32], small[4];
        CHECK_STATUS(rp_task_problem(t, &r, 19, q, sizeof q, a, sizeof a), RP_ERR_ARG, "n_digits");
        CHECK_STATUS(rp_task_problem(t, &r, -1, q, sizeof q, a, sizeof a), RP_ERR_ARG, "n_digits");
        CHECK_STATUS(rp_task_problem(t, &r, 5, small, sizeof small, a, sizeof a), RP_ERR_ARG, "too small");
        CHECK_STATUS(rp_task_problem(t, &r, 5, q, sizeof q, small, 2), RP_ERR_ARG, "too small");
        /* a question without '?' (labml master's prompt) and a large sum */
        char qq[64];
        snprintf(qq, sizeof qq, "%c=999999999999999999+999999999999999999;", var);
        char cc[64];
        snprintf(cc, sizeof cc, " %c==1999999999999999998%c", var, term);
        CHECK(rp_task_check(t, qq, cc) == 1, "check: 18-digit operands, no '?'");
        snprintf(qq, sizeof qq, "?%c=12+", var);
        CHECK(rp_task_check(t, qq, cc) == 0, "check: malformed question");
        rp_task_free(t);
    }
}

/* ---- determinism and round trips ---- */

static void test_determinism(void)
{
    rp_task_kind kinds[4] = {RP_TASK_ADDITION, RP_TASK_SUBSTR_INDEX, RP_TASK_SUBSTR_PREFIX,
                             RP_TASK_GRID_OFFSET};
    const char *vs[4] = {V_WRITEUP, V_SIDX, V_SPRE, V_GRID};
    for (int k = 0; k < 4; k++) {
        rp_task_cfg c = rp_task_cfg_default(kinds[k]);
        rp_task *t1 = new_task(c), *t2 = new_task(c);
        int64_t T = c.seq_len, B = 3;
        int32_t a1[3 * 256], b1[3 * 256], a2[3 * 256], b2[3 * 256], a3[3 * 256], b3[3 * 256];
        rp_rng r1, r2, r3;
        rp_rng_seed(&r1, 42), rp_rng_seed(&r2, 42), rp_rng_seed(&r3, 43);
        rp_task_batch(t1, &r1, B, 0, a1, b1);
        rp_task_batch(t2, &r2, B, 0, a2, b2);
        rp_task_batch(t1, &r3, B, 0, a3, b3);
        CHECK(memcmp(a1, a2, sizeof a1) == 0 && memcmp(b1, b2, sizeof b1) == 0,
              "kind %d: same seed, same data", k);
        CHECK(memcmp(a1, a3, sizeof a1) != 0, "kind %d: another seed, other data", k);
        /* decode -> encode round trip, and decode against the documented vocabulary */
        char txt[300];
        size_t len = 0;
        CHECK_STATUS(rp_task_decode(t1, a1, T, txt, sizeof txt, &len), RP_OK, NULL);
        int ok = len == (size_t)T && txt[T] == '\0';
        for (int64_t j = 0; j < T && ok; j++) ok = txt[j] == vs[k][a1[j]];
        CHECK(ok, "kind %d: decode", k);
        int32_t back[300];
        int64_t n = 0;
        CHECK_STATUS(rp_task_encode(t1, txt, len, back, 300, &n), RP_OK, NULL);
        CHECK(n == T && memcmp(back, a1, (size_t)T * sizeof *back) == 0, "kind %d: encode(decode(x)) == x", k);
        /* a small cap: the count needed, nothing written past cap */
        back[2] = -7;
        CHECK_STATUS(rp_task_encode(t1, txt, len, back, 2, &n), RP_OK, NULL);
        CHECK(n == T && back[2] == -7, "kind %d: encode with a small cap", k);
        char small[5];
        CHECK_STATUS(rp_task_decode(t1, a1, T, small, sizeof small, &len), RP_OK, NULL);
        CHECK(len == (size_t)T && small[4] == '\0' && memcmp(small, txt, 4) == 0, "kind %d: decode truncates", k);
        rp_task_free(t1), rp_task_free(t2);
    }
    /* encode errors */
    rp_task_cfg c = rp_task_cfg_default(RP_TASK_ADDITION);
    rp_task *t = new_task(c);
    int32_t out[16];
    int64_t n;
    CHECK_STATUS(rp_task_encode(t, "?d=1x", 5, out, 16, &n), RP_ERR_ARG, "byte 4");
    CHECK_STATUS(rp_task_encode(t, "?d=\xe6\x97\xa5", 6, out, 16, &n), RP_ERR_ARG, "not in the vocabulary");
    CHECK_STATUS(rp_task_encode(t, "?d\xc3", 3, out, 16, &n), RP_ERR_ARG, "invalid UTF-8");
    CHECK_STATUS(rp_task_encode(t, "\xc0\xaf", 2, out, 16, &n), RP_ERR_ARG, "invalid UTF-8");
    int32_t badtok[2] = {3, 20};
    char buf[8];
    size_t len;
    CHECK_STATUS(rp_task_decode(t, badtok, 2, buf, sizeof buf, &len), RP_ERR_ARG, "outside the vocabulary");
    const rp_task_cfg *cc = rp_task_config(t);
    CHECK(cc->kind == RP_TASK_ADDITION && cc->max_digits == 8 && cc->format == RP_ADD_WRITEUP &&
              cc->labml_digit_quirk == 0 && cc->seq_len == 256 && cc->path == NULL,
          "addition defaults");
    CHECK_STATUS(rp_task_batch(t, NULL, 1, 2, out, out), RP_ERR_ARG, "split");
    CHECK_STATUS(rp_task_batch(t, NULL, -1, 0, out, out), RP_ERR_ARG, "batch");
    rp_task_free(t);
}

/* ---- text ---- */

static char tmpdir[64];

static void write_file(const char *name, const char *data, size_t n)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", tmpdir, name);
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(data, 1, n, f) != n) {
        printf("FATAL: cannot write %s\n", p);
        exit(2);
    }
    fclose(f);
}

static void test_text(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/roper_test_tasks_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        printf("FATAL: mkdtemp: %s\n", strerror(errno));
        exit(2);
    }
    /* 900 code points of "aé" (train) then 100 of "b日" (validation) */
    char *data = malloc(4000);
    size_t n = 0;
    for (int i = 0; i < 450; i++) memcpy(data + n, "a\xc3\xa9", 3), n += 3;
    for (int i = 0; i < 50; i++) memcpy(data + n, "b\xe6\x97\xa5", 4), n += 4;
    write_file("split.txt", data, n);
    char path[256];
    snprintf(path, sizeof path, "%s/split.txt", tmpdir);
    rp_task_cfg c = rp_task_cfg_default(RP_TASK_TEXT);
    c.path = path, c.seq_len = 16;
    rp_task *t = new_task(c);
    CHECK(rp_task_config(t)->path != path && strcmp(rp_task_config(t)->path, path) == 0,
          "text: the task keeps its own copy of path");
    int64_t nv;
    const int32_t *v = rp_task_vocab(t, &nv);
    CHECK(nv == 4 && v[0] == 'a' && v[1] == 'b' && v[2] == 0xE9 && v[3] == 0x65E5,
          "text: vocab = sorted distinct code points");
    int32_t in[8 * 16], tg[8 * 16];
    int ok_tr = 1, ok_va = 1;
    for (int seed = 0; seed < 50; seed++) {
        rp_rng r;
        rp_rng_seed(&r, (uint64_t)seed);
        CHECK_STATUS(rp_task_batch(t, &r, 8, 0, in, tg), RP_OK, NULL);
        for (int j = 0; j < 8 * 16; j++) ok_tr &= (in[j] == 0 || in[j] == 2) && (tg[j] == 0 || tg[j] == 2);
        for (int b = 0; b < 8; b++)
            for (int j = 0; j < 15; j++) ok_tr &= tg[b * 16 + j] == in[b * 16 + j + 1] && in[b * 16 + j] != in[b * 16 + j + 1];
        CHECK_STATUS(rp_task_batch(t, &r, 8, 1, in, tg), RP_OK, NULL);
        for (int j = 0; j < 8 * 16; j++) ok_va &= (in[j] == 1 || in[j] == 3) && (tg[j] == 1 || tg[j] == 3);
    }
    CHECK(ok_tr, "text: train windows come from the first 90%% and targets are shifted inputs");
    CHECK(ok_va, "text: validation windows come from the last 10%%");
    /* round trip with non-ASCII text */
    const char *s = "ab\xc3\xa9\xe6\x97\xa5" "a";
    int32_t tok[8];
    int64_t k;
    CHECK_STATUS(rp_task_encode(t, s, strlen(s), tok, 8, &k), RP_OK, NULL);
    CHECK(k == 5 && tok[0] == 0 && tok[1] == 1 && tok[2] == 2 && tok[3] == 3 && tok[4] == 0, "text: encode");
    char back[16];
    size_t len;
    CHECK_STATUS(rp_task_decode(t, tok, k, back, sizeof back, &len), RP_OK, NULL);
    CHECK(len == strlen(s) && strcmp(back, s) == 0, "text: decode(encode(s)) == s");
    CHECK_STATUS(rp_task_encode(t, "a\xf0\x9f\x98\x80", 5, tok, 8, &k), RP_ERR_ARG, "U+1F600");
    char q[8], a[8];
    rp_rng r;
    rp_rng_seed(&r, 1);
    CHECK_STATUS(rp_task_problem(t, &r, 0, q, sizeof q, a, sizeof a), RP_ERR_ARG, "text");
    rp_task_free(t);

    /* a window longer than the validation split */
    c.seq_len = 100;
    t = new_task(c);
    int32_t big[200];
    CHECK_STATUS(rp_task_batch(t, &r, 1, 0, big, big + 100), RP_OK, NULL);
    CHECK_STATUS(rp_task_batch(t, &r, 1, 1, big, big + 100), RP_ERR_ARG, "validation split");
    rp_task_free(t);
    c.seq_len = 900;
    t = new_task(c);
    int32_t *huge = malloc(2 * 900 * sizeof *huge);
    CHECK_STATUS(rp_task_batch(t, &r, 1, 0, huge, huge + 900), RP_ERR_ARG, "train split");
    free(huge);
    rp_task_free(t);

    /* a directory: regular files sorted by name, subdirectories skipped */
    char sub[256];
    snprintf(sub, sizeof sub, "%s/dir", tmpdir);
    mkdir(sub, 0700);
    char sub2[256];
    snprintf(sub2, sizeof sub2, "%s/dir/c_subdir", tmpdir);
    mkdir(sub2, 0700);
    write_file("dir/b.txt", "BBBBBBBBBBBBBBBBBBBB", 20);
    write_file("dir/a.txt", "AAAAAAAAAAAAAAAAAAAA", 20);
    c.path = sub, c.seq_len = 8, c.valid_fraction = 0.5;
    t = new_task(c);
    v = rp_task_vocab(t, &nv);
    CHECK(nv == 2 && v[0] == 'A' && v[1] == 'B', "directory: vocabulary");
    int32_t i8[8], t8[8];
    CHECK_STATUS(rp_task_batch(t, &r, 1, 0, i8, t8), RP_OK, NULL);
    int allA = 1;
    for (int j = 0; j < 8; j++) allA &= i8[j] == 0 && t8[j] == 0;
    CHECK_STATUS(rp_task_batch(t, &r, 1, 1, i8, t8), RP_OK, NULL);
    int allB = 1;
    for (int j = 0; j < 8; j++) allB &= i8[j] == 1 && t8[j] == 1;
    CHECK(allA && allB, "directory: a.txt before b.txt");
    rp_task_free(t);

    /* errors: missing file, empty file, invalid UTF-8 (a surrogate, a bad byte in a directory) */
    c.valid_fraction = 0.1;
    char p2[300];
    snprintf(p2, sizeof p2, "%s/missing.txt", tmpdir);
    c.path = p2;
    CHECK(rp_task_new(&c) == NULL, "missing file");
    char want[400];
    snprintf(want, sizeof want, "%s: No such file", p2);
    CHECK(strstr(rp_last_error(), want) != NULL, "message \"%s\"", rp_last_error());
    write_file("empty.txt", "", 0);
    snprintf(p2, sizeof p2, "%s/empty.txt", tmpdir);
    CHECK(rp_task_new(&c) == NULL && strstr(rp_last_error(), p2) && strstr(rp_last_error(), "empty"),
          "empty file: \"%s\"", rp_last_error());
    write_file("bad.txt", "ok\xed\xa0\x80", 5);
    snprintf(p2, sizeof p2, "%s/bad.txt", tmpdir);
    CHECK(rp_task_new(&c) == NULL && strstr(rp_last_error(), p2) &&
              strstr(rp_last_error(), "invalid UTF-8 at byte 2"),
          "invalid UTF-8: \"%s\"", rp_last_error());
    write_file("dir/z.txt", "x\x80", 2);
    c.path = sub;
    CHECK(rp_task_new(&c) == NULL && strstr(rp_last_error(), "z.txt: invalid UTF-8 at byte 1"),
          "invalid UTF-8 in a directory: \"%s\"", rp_last_error());
    {
        /* the error status itself: file problems are RP_ERR_IO (the binding returns nil,
         * message for them), a bad config is RP_ERR_ARG */
        rp_task *tt = rp_task_new(&c);
        CHECK(tt == NULL && rp_last_status() == RP_ERR_IO, "a bad file in a folder: io, got %s",
              rp_status_name(rp_last_status()));
        c.seq_len = 2;
        tt = rp_task_new(&c);
        CHECK(tt == NULL && rp_last_status() == RP_ERR_ARG, "seq_len 2: argument, got %s",
              rp_status_name(rp_last_status()));
        c.seq_len = 8;
    }
    /* clean up */
    const char *files[] = {"split.txt", "empty.txt", "bad.txt", "dir/a.txt", "dir/b.txt", "dir/z.txt"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(p2, sizeof p2, "%s/%s", tmpdir, files[i]);
        unlink(p2);
    }
    rmdir(sub2), rmdir(sub), rmdir(tmpdir);
    free(data);
}

/* ---- configuration errors ---- */

static void cfg_error(rp_task_cfg c, const char *field)
{
    rp_task *t = rp_task_new(&c);
    CHECK(t == NULL && strstr(rp_last_error(), field) != NULL, "config error naming %s: \"%s\"", field,
          rp_last_error());
    rp_task_free(t);
}

static void test_config(void)
{
    rp_task_cfg c = rp_task_cfg_default(RP_TASK_ADDITION), d;
    d = c, d.seq_len = 7, cfg_error(d, "seq_len");
    d = c, d.max_digits = 0, cfg_error(d, "max_digits");
    d = c, d.max_digits = 19, cfg_error(d, "max_digits");
    d = c, d.format = (rp_add_format)2,
    cfg_error(d, "option 'format' must be writeup or labml, got 2");
    d = c, d.labml_digit_quirk = 2, cfg_error(d, "option 'quirk' must be 0 or 1, got 2");
    d = c, d.kind = (rp_task_kind)9, cfg_error(d, "kind");
    c = rp_task_cfg_default(RP_TASK_SUBSTR_INDEX);
    d = c, d.str_len = 0, cfg_error(d, "str_len");
    d = c, d.str_len = 1001, cfg_error(d, "option 'str_len' must be in 1..1000, got 1001");
    d = c, d.seq_len = ((int64_t)1 << 24) + 1, cfg_error(d, "seq_len");
    c = rp_task_cfg_default(RP_TASK_SUBSTR_PREFIX);
    d = c, d.substr_len = 1, cfg_error(d, "option 'substr_len' must be in 2..65536, got 1");
    d = c, d.rnd_len = 1, cfg_error(d, "rnd_len");
    d = c, d.substr_len = (1 << 16) + 1, cfg_error(d, "substr_len");
    d = c, d.rnd_len = (1 << 16) + 1, cfg_error(d, "rnd_len");
    c = rp_task_cfg_default(RP_TASK_TEXT);
    CHECK(c.valid_fraction > 0.0999 && c.valid_fraction < 0.1001 && c.path == NULL, "text defaults");
    d = c, cfg_error(d, "option 'path' (a UTF-8 text file) is required");
    d = c, d.path = "/etc/hostname", d.valid_fraction = 1.0,
    cfg_error(d, "option 'valid_fraction' must be in [0, 1), got 1");
    d = c, d.path = "/etc/hostname", d.valid_fraction = -0.1, cfg_error(d, "valid_fraction");
    /* grid offset: the whole message of every option, exactly */
    c = rp_task_cfg_default(RP_TASK_GRID_OFFSET);
    d = c, d.rows = 4, d.cols = 3;
    CHECK(rp_task_grid_query_rows(&d) == 3 && rp_task_grid_problem_len(&d) == 21 &&
              rp_task_grid_max_offset(&d) == 2 && rp_task_grid_query_rows(&c) == 1 &&
              rp_task_grid_problem_len(&c) == 56 && rp_task_grid_max_offset(&c) == 5,
          "grid sizes: 8 query tokens on ceil(8 / cols) rows, max_offset min(9, rows-1, cols-1)");
    d = c, d.rows = 20, d.cols = 32;
    CHECK(rp_task_grid_max_offset(&d) == 9 && rp_task_grid_problem_len(&d) == 21 * 32,
          "grid sizes of a large grid");
    d = c, d.rows = 1, cfg_error(d, "option 'rows' must be in 2..32, got 1");
    d = c, d.rows = 33, cfg_error(d, "option 'rows' must be in 2..32, got 33");
    d = c, d.cols = 1, cfg_error(d, "option 'cols' must be in 2..32, got 1");
    d = c, d.cols = 33, cfg_error(d, "option 'cols' must be in 2..32, got 33");
    d = c, d.alphabet = 1, cfg_error(d, "option 'alphabet' must be in 2..26, got 1");
    d = c, d.alphabet = 27, cfg_error(d, "option 'alphabet' must be in 2..26, got 27");
    d = c, d.max_offset = 0,
    cfg_error(d, "option 'max_offset' must be in 1..5 (at most 9, rows - 1 and cols - 1), got 0");
    d = c, d.max_offset = 6,
    cfg_error(d, "option 'max_offset' must be in 1..5 (at most 9, rows - 1 and cols - 1), got 6");
    d = c, d.rows = 32, d.cols = 32, d.seq_len = 2000, d.max_offset = 10,
    cfg_error(d, "option 'max_offset' must be in 1..9 (at most 9, rows - 1 and cols - 1), got 10");
    d = c, d.rows = 20, d.cols = 3, d.max_offset = 3,
    cfg_error(d, "option 'max_offset' must be in 1..2 (at most 9, rows - 1 and cols - 1), got 3");
    d = c, d.seq_len = 55,
    cfg_error(d, "option 'seq_len' must be >= 56, the length of one problem "
                 "((rows + 1) * cols), got 55");
    d = c, d.cols = 3, d.max_offset = 2, d.seq_len = 26,
    cfg_error(d, "option 'seq_len' must be >= 27, the length of one problem "
                 "((rows + 3) * cols), got 26");
    d = c, d.seq_len = 7, cfg_error(d, "option 'seq_len' must be in 8..16777216, got 7");
    /* the limits themselves are accepted */
    rp_task_cfg ok[3] = {c, c, c};
    ok[0].seq_len = 56;
    ok[1].rows = 2, ok[1].cols = 2, ok[1].alphabet = 2, ok[1].max_offset = 1, ok[1].seq_len = 16;
    ok[2].rows = 32, ok[2].cols = 32, ok[2].alphabet = 26, ok[2].max_offset = 9;
    ok[2].seq_len = 1056;
    for (int k = 0; k < 3; k++) {
        rp_task *t = rp_task_new(&ok[k]);
        CHECK(t != NULL, "limit case %d makes a task: %s", k, t ? "" : rp_last_error());
        rp_task_free(t);
    }
    CHECK(rp_task_new(NULL) == NULL, "NULL config");
    rp_task_free(NULL);
    /* a copy_repeat whose first string already fills the window: no copies, nothing scored */
    c = rp_task_cfg_default(RP_TASK_SUBSTR_PREFIX);
    c.seq_len = 8;
    rp_task *t = new_task(c);
    int32_t in[8], tg[8];
    rp_rng r;
    rp_rng_seed(&r, 3);
    CHECK_STATUS(rp_task_batch(t, &r, 1, 0, in, tg), RP_OK, NULL);
    int none = 1;
    for (int j = 0; j < 8; j++) none &= tg[j] == -1 && in[j] >= 0 && in[j] < 4;
    CHECK(none, "copy_repeat with substr_len > seq_len: nothing scored");
    rp_task_free(t);
}

/* ---- corpora that are not plain files, the size limit, split sizes ---- */

/* Makes a text task on path in a child with a 5 s alarm (a regression that blocks fails instead
 * of hanging); 1 when the child ended by itself with RP_ERR_IO and a message holding want. */
static int text_fails_in_child(const char *path, const char *want)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(5);
        rp_task_cfg c = rp_task_cfg_default(RP_TASK_TEXT);
        c.path = path;
        rp_task *t = rp_task_new(&c);
        if (t == NULL && rp_last_status() == RP_ERR_IO && strstr(rp_last_error(), want)) _exit(0);
        printf("  %s: %s\n", path, t ? "made a task" : rp_last_error());
        fflush(stdout);
        _exit(1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void test_text_files(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/roper_test_files_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        printf("FATAL: mkdtemp: %s\n", strerror(errno));
        exit(2);
    }
    char fifo[256], only[256], onlyfifo[300], empty[256], p[300], want[400];
    snprintf(fifo, sizeof fifo, "%s/fifo", tmpdir);
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo: %s", strerror(errno));
    snprintf(want, sizeof want, "%s: not a regular file (a FIFO)", fifo);
    CHECK(text_fails_in_child(fifo, want), "a FIFO is refused at once");
    CHECK(text_fails_in_child("/dev/zero", "/dev/zero: not a regular file (a character device)"),
          "/dev/zero is refused (not read until memory runs out)");
    CHECK(text_fails_in_child("/dev/null", "/dev/null: not a regular file (a character device)"),
          "/dev/null is refused");
    /* a folder holding only a FIFO and a subfolder; an empty folder */
    snprintf(only, sizeof only, "%s/only", tmpdir);
    mkdir(only, 0700);
    snprintf(onlyfifo, sizeof onlyfifo, "%s/f", only);
    mkfifo(onlyfifo, 0600);
    snprintf(p, sizeof p, "%s/sub", only);
    mkdir(p, 0700);
    snprintf(want, sizeof want, "%s: no regular files in this folder", only);
    CHECK(text_fails_in_child(only, want), "a folder of a FIFO and a folder");
    snprintf(empty, sizeof empty, "%s/empty", tmpdir);
    mkdir(empty, 0700);
    snprintf(want, sizeof want, "%s: no regular files in this folder", empty);
    CHECK(text_fails_in_child(empty, want), "an empty folder");
    /* a binary file */
    write_file("bin.dat", "\x7f" "ELF\x02\x01\x01\xff\xfe", 9);
    snprintf(p, sizeof p, "%s/bin.dat", tmpdir);
    CHECK(text_fails_in_child(p, "invalid UTF-8 at byte 7 (not a text file?)"), "a binary file");

    /* max_bytes: exactly the size passes, one byte less fails before reading */
    char text[1000];
    for (int i = 0; i < 1000; i++) text[i] = (char)('a' + i % 7);
    write_file("t.txt", text, 1000);
    snprintf(p, sizeof p, "%s/t.txt", tmpdir);
    rp_task_cfg c = rp_task_cfg_default(RP_TASK_TEXT);
    c.path = p, c.seq_len = 8, c.max_bytes = 1000;
    rp_task *t = rp_task_new(&c);
    CHECK(t != NULL, "max_bytes = the file size: %s", t ? "ok" : rp_last_error());
    int64_t tr = -1, va = -1;
    if (t) {
        CHECK_STATUS(rp_task_split_sizes(t, &tr, &va), RP_OK, NULL);
        CHECK(tr == 900 && va == 100, "split sizes 900 / 100, got %lld / %lld", (long long)tr,
              (long long)va);
    }
    rp_task_free(t);
    c.max_bytes = 999;
    t = rp_task_new(&c);
    snprintf(want, sizeof want, "%s: 1000 B is more than the limit of 999 B (max_bytes)", p);
    CHECK(t == NULL && rp_last_status() == RP_ERR_IO && !strcmp(rp_last_error(), want),
          "max_bytes one below: \"%s\"", t ? "made a task" : rp_last_error());
    rp_task_free(t);
    /* a folder counts all its files */
    snprintf(p, sizeof p, "%s/two", tmpdir);
    mkdir(p, 0700);
    write_file("two/a.txt", text, 600);
    write_file("two/b.txt", text, 600);
    c.path = p, c.max_bytes = 1199;
    t = rp_task_new(&c);
    snprintf(want, sizeof want, "%s: its 2 files hold 1.2 KiB, more than the limit of 1.2 KiB "
                                "(max_bytes)", p);
    CHECK(t == NULL && !strcmp(rp_last_error(), want), "a folder over max_bytes: \"%s\"",
          t ? "made a task" : rp_last_error());
    rp_task_free(t);
    c.max_bytes = 1200;
    t = rp_task_new(&c);
    CHECK(t != NULL, "a folder at max_bytes");
    rp_task_free(t);
    c.max_bytes = 0;
    cfg_error(c, "max_bytes");
    CHECK(rp_task_cfg_default(RP_TASK_TEXT).max_bytes == ((int64_t)256 << 20),
          "the default limit is 256 MiB");
    /* split sizes: no validation split, and kinds without splits */
    c.max_bytes = RP_TASK_DEFAULT_MAX_BYTES, c.valid_fraction = 0.0;
    t = rp_task_new(&c);
    CHECK(t && rp_task_split_sizes(t, &tr, &va) == RP_OK && tr == 1200 && va == 0,
          "valid_fraction 0: all train");
    rp_task_free(t);
    rp_task_cfg ca = rp_task_cfg_default(RP_TASK_ADDITION);
    t = rp_task_new(&ca);
    CHECK_STATUS(rp_task_split_sizes(t, &tr, &va), RP_ERR_ARG, "only text and lm tasks");
    rp_task_free(t);

    const char *files[] = {"fifo", "only/f", "only/sub", "only", "empty", "bin.dat", "t.txt",
                           "two/a.txt", "two/b.txt", "two"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(p, sizeof p, "%s/%s", tmpdir, files[i]);
        if (unlink(p) != 0) rmdir(p);
    }
    CHECK(rmdir(tmpdir) == 0, "the test folder is empty at the end: %s", strerror(errno));
}

/* ---- grid offset: the packed problems re-solved by solve() below (the grid read back cell by
 * cell, the marked cell found, the offset read from the query, the answer looked up), the layout
 * (whole rows of cols tokens, '.' padding), the score mask (the answer only), the draw
 * distribution, determinism, the evaluation problems and rp_task_check, the 2-D positions and
 * every configuration error with its exact message ---- */

/* The first problem of rp_rng seed 1 at rows 3, cols 5, alphabet 4, max_offset 2 (docs/tasks.md
 * shows it): the grid bcadd / ccbba / bc*bd, the query ?+0+2= asks for row 2, column 4: d. */
#define GRID_SEED1 "bcaddccbbabc*bd?+0+2=d#.."

/* The documented vocabulary: the first `alphabet` letters, then these (docs/tasks.md). */
static const char V_TAIL[] = "0123456789*?+-=#.";

static void vocab_of(int64_t alphabet, char *out)
{
    int64_t n = 0;
    for (int64_t k = 0; k < alphabet; k++) out[n++] = (char)('a' + k);
    strcpy(out + n, V_TAIL);
}

static rp_task_cfg grid_cfg(int64_t rows, int64_t cols, int64_t alphabet, int64_t max_offset,
                            int64_t seq_len)
{
    rp_task_cfg c = rp_task_cfg_default(RP_TASK_GRID_OFFSET);
    c.rows = rows, c.cols = cols, c.alphabet = alphabet, c.max_offset = max_offset;
    c.seq_len = seq_len;
    return c;
}

typedef struct {
    int64_t problems, bad;
    int64_t offsets[19][19];   /* [dr + 9][dc + 9] */
    int64_t letters[26];
    int64_t marks[32 * 32];
} grid_stats;

/* Solves the question text q (rows * cols cells then "?<s><d><s><d>="): the answer letter, or 0
 * when q is not a well-formed question of this shape (reported). */
static char solve(const char *q, int64_t R, int64_t C, int64_t alphabet, int64_t max_offset,
                  grid_stats *st)
{
    int64_t mark = -1, stars = 0;
    for (int64_t i = 0; i < R * C; i++) {
        if (q[i] == '*') {
            stars++, mark = i;
        } else if (!CHECK(q[i] >= 'a' && q[i] < 'a' + alphabet, "cell %lld is '%c'", (long long)i,
                          q[i])) {
            return 0;
        }
    }
    if (!CHECK(stars == 1, "one marked cell, got %lld", (long long)stars)) return 0;
    const char *y = q + R * C;
    if (!CHECK(y[0] == '?' && (y[1] == '+' || y[1] == '-') && y[2] >= '0' && y[2] <= '9' &&
                   (y[3] == '+' || y[3] == '-') && y[4] >= '0' && y[4] <= '9' && y[5] == '=',
               "query \"%.6s\"", y))
        return 0;
    int dr = (y[2] - '0') * (y[1] == '-' ? -1 : 1), dc = (y[4] - '0') * (y[3] == '-' ? -1 : 1);
    CHECK(!(dr == 0 && dc == 0), "offset (0, 0)");
    CHECK(dr >= -max_offset && dr <= max_offset && dc >= -max_offset && dc <= max_offset,
          "offset (%d, %d) within %lld", dr, dc, (long long)max_offset);
    CHECK(!(y[1] == '-' && y[2] == '0') && !(y[3] == '-' && y[4] == '0'), "zero is written +0");
    int64_t r = mark / C + dr, c = mark % C + dc;
    if (!CHECK(r >= 0 && r < R && c >= 0 && c < C, "target (%lld, %lld) in the grid", (long long)r,
               (long long)c))
        return 0;
    if (st) {
        st->offsets[dr + 9][dc + 9]++;
        st->marks[mark]++;
        for (int64_t i = 0; i < R * C; i++)
            if (q[i] != '*') st->letters[q[i] - 'a']++;
    }
    return q[r * C + c];
}

/* Packs B rows of seq_len from nseeds seeds and re-solves every complete problem. */
static void run_packed(int64_t R, int64_t C, int64_t alphabet, int64_t m, int64_t T, int nseeds,
                       grid_stats *st)
{
    rp_task *t = new_task(grid_cfg(R, C, alphabet, m, T));
    char V[64];
    vocab_of(alphabet, V);
    int64_t nv = 0;
    rp_task_vocab(t, &nv);
    int64_t qrows = (8 + C - 1) / C, P = (R + qrows) * C, B = 2;
    int32_t *in = malloc((size_t)(B * T) * sizeof *in), *tg = malloc((size_t)(B * T) * sizeof *tg);
    char *txt = malloc((size_t)T + 2);
    for (int seed = 0; seed < nseeds; seed++) {
        rp_rng r;
        rp_rng_seed(&r, (uint64_t)seed + 7);
        CHECK_STATUS(rp_task_batch(t, &r, B, 0, in, tg), RP_OK, NULL);
        for (int64_t b = 0; b < B; b++) {
            const int32_t *x = in + b * T, *y = tg + b * T;
            int ok = 1;
            for (int64_t j = 0; j < T; j++) {
                ok &= x[j] >= 0 && x[j] < nv;
                txt[j] = V[x[j]];
            }
            if (!CHECK(ok, "inputs in the vocabulary")) continue;
            /* the scored positions: exactly those followed by a problem's answer */
            for (int64_t j = 0; j < T; j++) {
                int64_t next = (j + 1) % P;
                if (next == R * C + 6) {
                    if (j + 1 < T) ok &= y[j] == x[j + 1];
                    else ok &= y[j] >= 0 && y[j] < alphabet;
                } else {
                    ok &= y[j] == -1;
                }
            }
            CHECK(ok, "%lldx%lld: only the answers are scored, and they are the next tokens",
                  (long long)R, (long long)C);
            for (int64_t p0 = 0; p0 + P <= T; p0 += P) {
                const char *pr = txt + p0;
                char want = solve(pr, R, C, alphabet, m, st);
                if (!want) { st->bad++; continue; }
                st->problems++;
                ok = pr[R * C + 6] == want && pr[R * C + 7] == '#';
                for (int64_t k = R * C + 8; k < P; k++) ok &= pr[k] == '.';
                CHECK(ok, "answer, '#' and padding in \"%.*s\"", (int)P, pr);
            }
        }
    }
    free(in), free(tg), free(txt);
    rp_task_free(t);
}

static void test_grid_layout(void)
{
    rp_task_cfg c = rp_task_cfg_default(RP_TASK_GRID_OFFSET);
    CHECK(c.rows == 6 && c.cols == 8 && c.alphabet == 8 && c.max_offset == 3 && c.seq_len == 256,
          "grid_offset defaults");
    rp_task *t = new_task(c);
    char want[64];
    vocab_of(8, want);
    CHECK(vocab_is(t, want) && strcmp(want, V_GRID) == 0, "vocabulary \"%s\"", want);
    rp_task_free(t);

    static grid_stats st;
    memset(&st, 0, sizeof st);
    run_packed(6, 8, 8, 3, 256, 400, &st);
    CHECK(st.bad == 0 && st.problems > 3000, "6x8: %lld problems solved", (long long)st.problems);
    int all = 1;
    for (int dr = -3; dr <= 3; dr++)
        for (int dc = -3; dc <= 3; dc++) {
            int64_t k = st.offsets[dr + 9][dc + 9];
            /* 48 nonzero offsets, uniform: about problems / 48 each */
            if (dr == 0 && dc == 0) all &= k == 0;
            else all &= k > st.problems / 48 / 2 && k < st.problems / 48 * 2;
        }
    CHECK(all, "every nonzero offset within 3 occurs about uniformly, (0, 0) never");
    all = 1;
    for (int i = 0; i < 48; i++) all &= st.marks[i] > 0;
    CHECK(all, "every cell is marked sometimes");
    all = 1;
    for (int i = 0; i < 8; i++) all &= st.letters[i] > st.problems * 47 / 8 / 2;
    for (int i = 8; i < 26; i++) all &= st.letters[i] == 0;
    CHECK(all, "the letters a..h, each about equally often, and no other");

    /* narrow grids: the query spans rows (cols 2, 3, 5) and is padded; cols 4 and 8 fit it exactly;
     * the largest grid; a 2-letter alphabet */
    int64_t shapes[][5] = {{2, 2, 2, 1, 16},   {3, 3, 5, 2, 64},  {5, 5, 26, 4, 100},
                           {4, 4, 4, 3, 64},   {2, 9, 3, 1, 40},  {32, 32, 26, 9, 2200},
                           {7, 2, 6, 1, 90}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        memset(&st, 0, sizeof st);
        int64_t *s = shapes[k];
        run_packed(s[0], s[1], s[2], s[3], s[4], 60, &st);
        CHECK(st.bad == 0 && st.problems >= 60, "%lldx%lld: %lld problems solved",
              (long long)s[0], (long long)s[1], (long long)st.problems);
    }
}

/* The text of one layout: cols 5 gives the query on two padded rows. */
static void test_grid_example(void)
{
    rp_task *t = new_task(grid_cfg(3, 5, 4, 2, 40));
    int32_t in[40], tg[40];
    rp_rng r;
    rp_rng_seed(&r, 1);
    CHECK_STATUS(rp_task_batch(t, &r, 1, 0, in, tg), RP_OK, NULL);
    char txt[41];
    size_t len = 0;
    CHECK_STATUS(rp_task_decode(t, in, 25, txt, sizeof txt, &len), RP_OK, NULL);
    /* problem length (3 + 2) * 5 = 25: the grid, "?<s><d><s>" + "<d>=<answer>#.", where the
     * answer is the cell the query points at */
    char want = solve(txt, 3, 5, 4, 2, NULL);
    CHECK(len == 25 && txt[15] == '?' && txt[20] == '=' && txt[21] == want && txt[22] == '#' &&
              txt[23] == '.' && txt[24] == '.',
          "layout of \"%s\"", txt);
    int scored = 0;
    for (int j = 0; j < 40; j++) scored += tg[j] >= 0;
    CHECK(scored == 1 && tg[20] == in[21], "one answer scored in 40 tokens, at input 20");
    /* the draws pinned: rp_rng is the same on every platform, so is this text */
    CHECK(strcmp(txt, GRID_SEED1) == 0, "seed 1 gives \"%s\", documented \"%s\"", txt, GRID_SEED1);
    rp_task_free(t);
}

static void test_grid_problems(void)
{
    rp_task_cfg c = rp_task_cfg_default(RP_TASK_GRID_OFFSET);
    rp_task *t = new_task(c);
    int64_t R = c.rows, C = c.cols;
    rp_rng r, rb;
    rp_rng_seed(&r, 5);
    for (int k = 0; k < 500; k++) {
        char q[128], a[8], cont[32];
        CHECK_STATUS(rp_task_problem(t, &r, 0, q, sizeof q, a, sizeof a), RP_OK, NULL);
        if (!CHECK(strlen(q) == (size_t)(R * C + 6) && strlen(a) == 1, "shape of \"%s\"", q))
            continue;
        char want = solve(q, R, C, c.alphabet, c.max_offset, NULL);
        CHECK(a[0] == want, "answer '%s' for \"%s\"", a, q);
        char wrong = want == 'a' ? 'b' : 'a';
        snprintf(cont, sizeof cont, "%c", want);
        CHECK(rp_task_check(t, q, cont) == 1, "check: the symbol alone");
        snprintf(cont, sizeof cont, "%c#", want);
        CHECK(rp_task_check(t, q, cont) == 1, "check: symbol and terminator");
        snprintf(cont, sizeof cont, "%c#abc*?+1", want);
        CHECK(rp_task_check(t, q, cont) == 1, "check stops at the first '#'");
        snprintf(cont, sizeof cont, "%c#", wrong);
        CHECK(rp_task_check(t, q, cont) == 0, "check: a wrong symbol");
        snprintf(cont, sizeof cont, "%c%c#", want, want);
        CHECK(rp_task_check(t, q, cont) == 0, "check: two symbols");
        snprintf(cont, sizeof cont, "%c.", want);
        CHECK(rp_task_check(t, q, cont) == 0, "check: a symbol and more without '#'");
        CHECK(rp_task_check(t, q, "") == 0 && rp_task_check(t, q, "#") == 0 &&
                  rp_task_check(t, q, "*#") == 0 && rp_task_check(t, q, "\xff#") == 0,
              "check: garbage");
    }
    /* the question is the start of the training problem drawn from the same state */
    rp_rng_seed(&r, 77), rp_rng_seed(&rb, 77);
    char q[128], a[8];
    int32_t in[256], tg[256];
    CHECK_STATUS(rp_task_problem(t, &r, 0, q, sizeof q, a, sizeof a), RP_OK, NULL);
    CHECK_STATUS(rp_task_batch(t, &rb, 1, 0, in, tg), RP_OK, NULL);
    char txt[257];
    size_t len;
    CHECK_STATUS(rp_task_decode(t, in, 256, txt, sizeof txt, &len), RP_OK, NULL);
    CHECK(strncmp(txt, q, strlen(q)) == 0 && txt[strlen(q)] == a[0],
          "problem and packed row from one state agree");
    /* hand-written questions: the checker reads them, whatever drew them */
    const char *g = "abababab" "cdcdcdcd" "a*aaaaaa" "bbbbbbbb" "cccccccc" "dddddddd";
    char hq[64];
    snprintf(hq, sizeof hq, "%s?-1+0=", g);
    CHECK(rp_task_check(t, hq, "d") == 1, "check: up one row, \"%s\"", hq);
    snprintf(hq, sizeof hq, "%s?+3+6=", g);
    CHECK(rp_task_check(t, hq, "d#") == 1, "check: (+3, +6)");
    snprintf(hq, sizeof hq, "%s?+4+0=", g);
    CHECK(rp_task_check(t, hq, "a#") == 0, "check: a target below the grid");
    snprintf(hq, sizeof hq, "%s?+0-2=", g);
    CHECK(rp_task_check(t, hq, "a#") == 0, "check: a target left of the grid");
    snprintf(hq, sizeof hq, "%s?+0+0=", g);
    CHECK(rp_task_check(t, hq, "*#") == 0 && rp_task_check(t, hq, "a#") == 0,
          "check: offset (0, 0)");
    snprintf(hq, sizeof hq, "%s?+1+0", g);
    CHECK(rp_task_check(t, hq, "b#") == 0, "check: question without '='");
    CHECK(rp_task_check(t, "ab*?+1+0=", "a#") == 0, "check: question of another shape");
    const char *g2 = "abababab" "cdcdcdcd" "a*aaaaaa" "bbbbbbbb" "cc*ccccc" "dddddddd";
    snprintf(hq, sizeof hq, "%s?+1+0=", g2);
    CHECK(rp_task_check(t, hq, "b#") == 0, "check: two marked cells");
    const char *g3 = "abababab" "cdcdcdcd" "a*aaaaaa" "bbbbbbbb" "cccccccc" "ddddddzd";
    snprintf(hq, sizeof hq, "%s?+1+0=", g3);
    CHECK(rp_task_check(t, hq, "b#") == 0, "check: a letter outside the alphabet");

    char small[8];
    CHECK_STATUS(rp_task_problem(t, &r, 0, small, sizeof small, a, sizeof a), RP_ERR_ARG,
                 "problem: buffers too small (need 55 and 2 bytes)");
    CHECK_STATUS(rp_task_problem(t, &r, 0, q, sizeof q, a, 1), RP_ERR_ARG, "too small");
    CHECK_STATUS(rp_task_problem(t, &r, 2, q, sizeof q, a, sizeof a), RP_ERR_ARG,
                 "problem: n_digits applies to addition only");
    rp_task_free(t);
}

/* Beside test_determinism's round trips: split 1 is the same generator, and a letter outside the
 * alphabet is not in the vocabulary. */
static void test_grid_determinism(void)
{
    rp_task *t = new_task(rp_task_cfg_default(RP_TASK_GRID_OFFSET));
    int32_t a1[3 * 256], b1[3 * 256], a2[3 * 256], b2[3 * 256];
    rp_rng r1, r2;
    rp_rng_seed(&r1, 42), rp_rng_seed(&r2, 42);
    CHECK_STATUS(rp_task_batch(t, &r1, 3, 0, a1, b1), RP_OK, NULL);
    CHECK_STATUS(rp_task_batch(t, &r2, 3, 1, a2, b2), RP_OK, NULL);
    CHECK(memcmp(a1, a2, sizeof a1) == 0 && memcmp(b1, b2, sizeof b1) == 0,
          "split 1 is the same generator");
    int32_t back[8];
    int64_t n = 0;
    CHECK_STATUS(rp_task_encode(t, "ab*z", 4, back, 8, &n), RP_ERR_ARG,
                 "encode: character U+007A 'z' at byte 3 is not in the vocabulary");
    rp_task_free(t);
}

static void test_grid_positions(void)
{
    rp_task *t = new_task(grid_cfg(3, 5, 4, 2, 40));
    int32_t rc[2 * 60];
    for (int i = 0; i < 2 * 60; i++) rc[i] = -9;
    CHECK_STATUS(rp_task_positions2d(t, 55, rc), RP_OK, NULL);
    int ok = 1;
    int64_t row = 0, col = 0;   /* walked cell by cell, a new row after 5 columns */
    for (int i = 0; i < 55; i++) {
        ok &= rc[2 * i] == row && rc[2 * i + 1] == col;
        if (++col == 5) col = 0, row++;
    }
    CHECK(ok && rc[2 * 55] == -9, "positions2d: (i / 5, i %% 5) for 55 tokens, nothing more written");
    CHECK(rc[2 * 25] == 5 && rc[2 * 25 + 1] == 0, "the second problem starts at row 5, column 0");
    CHECK_STATUS(rp_task_positions2d(t, 0, rc), RP_OK, NULL);
    CHECK_STATUS(rp_task_positions2d(t, -1, rc), RP_ERR_ARG,
                 "positions2d: negative token count -1");
    rp_task_free(t);
    t = new_task(rp_task_cfg_default(RP_TASK_ADDITION));
    CHECK_STATUS(rp_task_positions2d(t, 4, rc), RP_ERR_ARG,
                 "positions2d: only grid_offset tasks have 2-D positions");
    rp_task_free(t);
}

/* Writes ids (n of them) to dir/name as int32 .npy. */
static void write_ids(const char *dir, const char *name, const int32_t *ids, int64_t n)
{
    char path[400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    rp_tensor t;
    int64_t shape[1] = {n};
    CHECK(rp_tensor_new(&t, 1, shape) == RP_OK, "tensor");
    float *d = rp_tensor_data(&t);
    for (int64_t i = 0; i < n; i++) d[i] = (float)ids[i];
    CHECK(rp_npy_save_as(path, &t, RP_NPY_I32) == RP_OK, "save %s: %s", path, rp_last_error());
    rp_tensor_release(&t);
}

/* The lm task: its splits from three .npy files, random windows inside a split, and the
 * evaluation windows against a naive cut of the stream (every token but the first a target
 * exactly once); the errors of a bad folder. */
static void test_lm(void)
{
    char dir[64], path[400];
    snprintf(dir, sizeof dir, "/tmp/roper_test_lm_XXXXXX");
    if (!mkdtemp(dir)) {
        printf("FATAL: mkdtemp: %s\n", strerror(errno));
        exit(2);
    }
    enum { V = 29, NTR = 300, NVA = 77, NTE = 40 };
    int32_t tr[NTR], va[NVA], te[NTE];
    rp_rng g;
    rp_rng_seed(&g, 5);
    for (int i = 0; i < NTR; i++) tr[i] = (int32_t)rp_rng_int(&g, 0, V - 1);
    for (int i = 0; i < NVA; i++) va[i] = (int32_t)rp_rng_int(&g, 0, V - 1);
    for (int i = 0; i < NTE; i++) te[i] = (int32_t)rp_rng_int(&g, 0, V - 1);
    write_ids(dir, "train.npy", tr, NTR);
    write_ids(dir, "valid.npy", va, NVA);
    write_ids(dir, "test.npy", te, NTE);
    rp_task_cfg c = rp_task_cfg_default(RP_TASK_LM);
    c.path = dir;
    c.vocab_size = V;
    c.seq_len = 8;
    rp_task *t = rp_task_new(&c);
    CHECK(t != NULL, "lm task: %s", rp_last_error());
    if (!t) return;
    int64_t n = 0, T = 8;
    CHECK(rp_task_split_len(t, RP_SPLIT_TEST, &n) == RP_OK && n == NTE, "test split %lld",
          (long long)n);
    /* random windows: slices of their split */
    int32_t in[4 * 8], tg[4 * 8];
    CHECK(rp_task_batch(t, &g, 4, RP_SPLIT_TEST, in, tg) == RP_OK, "batch of the test split");
    for (int b = 0; b < 4; b++) {
        int found = 0;
        for (int o = 0; o + T + 1 <= NTE && !found; o++) {
            int same = 1;
            for (int j = 0; j < T; j++)
                same = same && in[b * T + j] == te[o + j] && tg[b * T + j] == te[o + j + 1];
            found = same;
        }
        CHECK(found, "row %d is a window of the test split", b);
    }
    /* evaluation windows of the validation split, naively: window k at min(k T, n - T - 1) */
    int seen[NVA] = {0};
    int64_t rows = 0, W = 0, first = 0;
    do {
        CHECK(rp_task_windows(t, RP_SPLIT_VALID, first, 4, in, tg, &rows, &W) == RP_OK, "windows");
        for (int64_t r = 0; r < rows; r++) {
            int64_t k = first + r, start = k * T < NVA - T - 1 ? k * T : NVA - T - 1;
            for (int64_t j = 0; j < T; j++) {
                CHECK(in[r * T + j] == va[start + j], "input of window %lld", (long long)k);
                if (start + j >= k * T) {
                    CHECK(tg[r * T + j] == va[start + j + 1], "target of window %lld",
                          (long long)k);
                    seen[start + j + 1]++;
                } else {
                    CHECK(tg[r * T + j] == -1, "an earlier window's target is not scored");
                }
            }
        }
        first += 4;
    } while (rows == 4);
    CHECK(W == (NVA - 1 + T - 1) / T, "%lld windows", (long long)W);
    for (int i = 1; i < NVA; i++) CHECK(seen[i] == 1, "token %d scored %d times", i, seen[i]);
    CHECK(seen[0] == 0, "the first token is never a target");
    /* no characters */
    int32_t id;
    int64_t cnt;
    CHECK_STATUS(rp_task_encode(t, "a", 1, &id, 1, &cnt), RP_ERR_ARG, "tokenizer's");
    rp_task_free(t);
    /* a split shorter than a window; ids out of range; a float file */
    c.seq_len = 64;
    t = rp_task_new(&c);
    CHECK(t != NULL, "a short test split still loads");
    CHECK_STATUS(rp_task_windows(t, RP_SPLIT_TEST, 0, 1, in, tg, &rows, &W), RP_ERR_ARG,
                 "a window needs seq_len + 1 = 65");
    rp_task_free(t);
    c.vocab_size = 10;
    CHECK(rp_task_new(&c) == NULL && strstr(rp_last_error(), "is outside the vocabulary 0..9"),
          "an id outside the vocabulary: %s", rp_last_error());
    c.vocab_size = 0;
    CHECK(rp_task_new(&c) == NULL && strstr(rp_last_error(), "option 'vocab_size' must be in 1.."),
          "vocab_size 0: %s", rp_last_error());
    const char *names[] = {"train.npy", "valid.npy", "test.npy"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    CHECK(rmdir(dir) == 0, "the test folder is empty at the end");
}

/* ---- the task table ---- */

/* Every field of rp_task_cfg but kind has a row (a new field without one fails here), no kind
 * reads two rows of one name, every default passes its row's check, and every range is checked at
 * both ends (inclusive) and just outside them, with the row's message. */
static void test_task_table(void)
{
    static const size_t fields[] = {
        offsetof(rp_task_cfg, seq_len),    offsetof(rp_task_cfg, format),
        offsetof(rp_task_cfg, max_digits), offsetof(rp_task_cfg, labml_digit_quirk),
        offsetof(rp_task_cfg, str_len),    offsetof(rp_task_cfg, substr_len),
        offsetof(rp_task_cfg, rnd_len),    offsetof(rp_task_cfg, path),
        offsetof(rp_task_cfg, valid_fraction), offsetof(rp_task_cfg, max_bytes),
        offsetof(rp_task_cfg, rows),       offsetof(rp_task_cfg, cols),
        offsetof(rp_task_cfg, alphabet),   offsetof(rp_task_cfg, max_offset),
        offsetof(rp_task_cfg, vocab_size),
    };
    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
        int rows = 0;
        for (int i = 0; i < rp_task_nkeys; i++) rows += rp_task_keys[i].offset == fields[f];
        CHECK(rows >= 1, "field at offset %zu has a row", fields[f]);
    }
    for (int i = 0; i < rp_task_nkeys; i++) {
        const rp_task_key *k = &rp_task_keys[i];
        int fields_ok = 0;
        for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++)
            fields_ok |= k->offset == fields[f];
        CHECK(fields_ok && k->kinds != 0 && k->help && k->help[0],
              "row %s: a listed field, kinds, help", k->name);
        CHECK(!(k->flags & RP_TASK_KEY_REQUIRED) == !k->what, "row %s: what iff required", k->name);
        for (int kind = RP_TASK_ADDITION; kind <= RP_TASK_LM; kind++) {
            if (!rp_task_key_applies(k, (rp_task_kind)kind)) continue;
            CHECK(rp_task_key_of(k->name, (rp_task_kind)kind) == k,
                  "row %s: the only one of kind %d", k->name, kind);
            rp_task_cfg c = rp_task_cfg_default((rp_task_kind)kind);
            if (k->flags & RP_TASK_KEY_REQUIRED) {
                CHECK_STATUS(rp_task_cfg_check_key(&c, k), RP_ERR_ARG,
                             k->type == RP_TASK_KEY_PATH ? "is required" : "must be in 1..");
                continue;
            }
            CHECK(rp_task_cfg_check_key(&c, k) == RP_OK, "row %s: its default (kind %d) passes: %s",
                  k->name, kind, rp_last_error());
            if (k->type != RP_TASK_KEY_INT || k->hi_of || k->rule || isinf(k->hi)) continue;
            char want[160];
            int64_t lo = (int64_t)k->lo, hi = (int64_t)k->hi, ends[4] = {lo, hi, lo - 1, hi + 1};
            for (int e = 0; e < 4; e++) {
                rp_task_cfg_set_int(&c, k, ends[e]);
                rp_status st = rp_task_cfg_check_key(&c, k);
                snprintf(want, sizeof want, "option '%s' must be in %lld..%lld, got %lld", k->name,
                         (long long)k->lo, (long long)k->hi, (long long)ends[e]);
                CHECK(e < 2 ? st == RP_OK : st == RP_ERR_ARG && !strcmp(rp_last_error(), want),
                      "row %s at %lld: %s", k->name, (long long)ends[e],
                      st ? rp_last_error() : "ok");
            }
        }
    }
    /* the defaults, and those that follow from the rows before them */
    rp_task_cfg a = rp_task_cfg_default(RP_TASK_ADDITION);
    CHECK(a.seq_len == 256 && a.format == RP_ADD_WRITEUP && a.max_digits == 8 &&
              a.labml_digit_quirk == 0 && a.str_len == 13 && a.substr_len == 16 &&
              a.rnd_len == 12 && a.path == NULL && a.max_bytes == RP_TASK_DEFAULT_MAX_BYTES && a.rows == 6 &&
              a.cols == 8 && a.alphabet == 8 && a.max_offset == 3 && a.vocab_size == 0,
          "the defaults");
    a.seq_len = 40;
    rp_task_cfg_addition_format(&a, RP_ADD_LABML);
    CHECK(a.max_digits == 7 && a.labml_digit_quirk == 1 && a.seq_len == 40,
          "labml's defaults, seq_len kept");
    rp_task_cfg g = rp_task_cfg_default(RP_TASK_GRID_OFFSET);
    g.rows = 3, g.cols = 2;
    rp_task_cfg_set_default(&g, rp_task_key_of("max_offset", RP_TASK_GRID_OFFSET));
    rp_task_cfg_set_default(&g, rp_task_key_of("seq_len", RP_TASK_GRID_OFFSET));
    CHECK(g.max_offset == 1 && g.seq_len == 256, "a small grid's max_offset default is its bound");
    g.rows = 32, g.cols = 32;
    rp_task_cfg_set_default(&g, rp_task_key_of("seq_len", RP_TASK_GRID_OFFSET));
    CHECK(g.seq_len == 33 * 32, "a large grid's seq_len default is one problem");
    CHECK(rp_task_key_of("rows", RP_TASK_ADDITION) == NULL && rp_task_key_of(NULL, RP_TASK_TEXT) ==
          NULL, "rows is not an addition key");
    rp_task_cfg t = rp_task_cfg_default(RP_TASK_TEXT);
    t.path = "x", t.max_bytes = 0;
    CHECK_STATUS(rp_task_cfg_check(&t), RP_ERR_ARG, "option 'max_bytes' must be >= 1, got 0");
}

int main(void)
{
    test_addition();
    test_addition_problems();
    test_substr_index();
    test_substr_prefix();
    test_determinism();
    test_text();
    test_config();
    test_task_table();
    test_text_files();
    test_grid_layout();
    test_grid_example();
    test_grid_problems();
    test_grid_determinism();
    test_grid_positions();
    test_lm();
    return check_summary("test_tasks");
}
