/* The grid offset task (tasks/grid.c, rules in docs/tasks.md): every packed problem is parsed
 * by a solver written here (the grid read back cell by cell, the marked cell found, the offset
 * read from the query and the answer looked up), the layout (whole rows of cols tokens, '.'
 * padding), the score mask (the answer symbol only), the draw distribution, determinism, the
 * evaluation problems and rp_task_check, the 2-D positions and every configuration error with its
 * exact message. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rp.h"
#include "task.h"

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

static rp_task *new_task(rp_task_cfg c)
{
    rp_task *t = rp_task_new(&c);
    if (!t) {
        printf("FATAL: rp_task_new failed: %s\n", rp_last_error());
        exit(2);
    }
    return t;
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

static void test_layout(void)
{
    rp_task_cfg c = rp_task_cfg_default(RP_TASK_GRID_OFFSET);
    CHECK(c.rows == 6 && c.cols == 8 && c.alphabet == 8 && c.max_offset == 3 && c.seq_len == 256,
          "grid_offset defaults");
    rp_task *t = new_task(c);
    int64_t n = 0;
    const int32_t *v = rp_task_vocab(t, &n);
    char want[64];
    vocab_of(8, want);
    int ok = n == (int64_t)strlen(want);
    for (int64_t i = 0; ok && i < n; i++) ok = v[i] == want[i];
    CHECK(ok, "vocabulary \"%s\"", want);
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
static void test_example(void)
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

static void test_problems(void)
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

static void test_determinism(void)
{
    rp_task_cfg c = rp_task_cfg_default(RP_TASK_GRID_OFFSET);
    rp_task *t1 = new_task(c), *t2 = new_task(c);
    int32_t a1[3 * 256], b1[3 * 256], a2[3 * 256], b2[3 * 256], a3[3 * 256], b3[3 * 256];
    rp_rng r1, r2, r3;
    rp_rng_seed(&r1, 42), rp_rng_seed(&r2, 42), rp_rng_seed(&r3, 43);
    CHECK_STATUS(rp_task_batch(t1, &r1, 3, 0, a1, b1), RP_OK, NULL);
    CHECK_STATUS(rp_task_batch(t2, &r2, 3, 0, a2, b2), RP_OK, NULL);
    CHECK_STATUS(rp_task_batch(t1, &r3, 3, 0, a3, b3), RP_OK, NULL);
    CHECK(memcmp(a1, a2, sizeof a1) == 0 && memcmp(b1, b2, sizeof b1) == 0, "same seed, same data");
    CHECK(memcmp(a1, a3, sizeof a1) != 0, "another seed, other data");
    /* split 1 draws fresh problems too */
    rp_rng_seed(&r1, 42);
    CHECK_STATUS(rp_task_batch(t1, &r1, 3, 1, a2, b2), RP_OK, NULL);
    CHECK(memcmp(a1, a2, sizeof a1) == 0, "split 1 is the same generator");
    char txt[300];
    size_t len = 0;
    CHECK_STATUS(rp_task_decode(t1, a1, 256, txt, sizeof txt, &len), RP_OK, NULL);
    int32_t back[300];
    int64_t n = 0;
    CHECK_STATUS(rp_task_encode(t1, txt, len, back, 300, &n), RP_OK, NULL);
    CHECK(n == 256 && memcmp(back, a1, 256 * sizeof *back) == 0, "encode(decode(x)) == x");
    CHECK_STATUS(rp_task_encode(t1, "ab*z", 4, back, 300, &n), RP_ERR_ARG,
                 "encode: character U+007A 'z' at byte 3 is not in the vocabulary");
    rp_task_free(t1), rp_task_free(t2);
}

static void test_positions(void)
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

static void cfg_error(rp_task_cfg c, const char *want)
{
    rp_task *t = rp_task_new(&c);
    CHECK(t == NULL && strcmp(rp_last_error(), want) == 0, "config error \"%s\", want \"%s\"",
          t ? "(made a task)" : rp_last_error(), want);
    rp_task_free(t);
}

static void test_config(void)
{
    rp_task_cfg c = rp_task_cfg_default(RP_TASK_GRID_OFFSET), d;
    d = c, d.rows = 1, cfg_error(d, "task: rows must be in 2..32, got 1");
    d = c, d.rows = 33, cfg_error(d, "task: rows must be in 2..32, got 33");
    d = c, d.cols = 1, cfg_error(d, "task: cols must be in 2..32, got 1");
    d = c, d.cols = 33, cfg_error(d, "task: cols must be in 2..32, got 33");
    d = c, d.alphabet = 1, cfg_error(d, "task: alphabet must be in 2..26, got 1");
    d = c, d.alphabet = 27, cfg_error(d, "task: alphabet must be in 2..26, got 27");
    d = c, d.max_offset = 0,
    cfg_error(d, "task: max_offset must be in 1..5 (at most 9, rows - 1 and cols - 1), got 0");
    d = c, d.max_offset = 6,
    cfg_error(d, "task: max_offset must be in 1..5 (at most 9, rows - 1 and cols - 1), got 6");
    d = c, d.rows = 32, d.cols = 32, d.seq_len = 2000, d.max_offset = 10,
    cfg_error(d, "task: max_offset must be in 1..9 (at most 9, rows - 1 and cols - 1), got 10");
    d = c, d.rows = 20, d.cols = 3, d.max_offset = 3,
    cfg_error(d, "task: max_offset must be in 1..2 (at most 9, rows - 1 and cols - 1), got 3");
    d = c, d.seq_len = 55,
    cfg_error(d, "task: seq_len must be >= 56, the length of one grid_offset problem "
                 "((rows + 1) * cols), got 55");
    d = c, d.cols = 3, d.max_offset = 2, d.seq_len = 26,
    cfg_error(d, "task: seq_len must be >= 27, the length of one grid_offset problem "
                 "((rows + 3) * cols), got 26");
    d = c, d.seq_len = 7, cfg_error(d, "task: seq_len must be in 8..268435456, got 7");
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
}

int main(void)
{
    test_layout();
    test_example();
    test_problems();
    test_determinism();
    test_positions();
    test_config();
    return check_summary("test_task_grid");
}
