/* Grid offset (our design, rules and layout in docs/tasks.md): a rows x cols grid of letters laid
 * out row by row without separators, one cell marked '*', then on the next layout row(s) the
 * query "?<sign><digit><sign><digit>=", the symbol at that (row, column) offset from the marked
 * cell and '#', padded with '.' to whole layout rows of cols tokens. Token i of a problem sits at
 * layout position (i / cols, i % cols), so a 2-D encoding reads (row, column) and a 1-D encoding
 * the flattened index. */
#include <string.h>

#include "task_impl.h"

/* The query and its answer: '?', sign, digit, sign, digit, '=', the symbol, '#'. */
#define GRID_QUERY_LEN 8

static const char grid_tail[] = "0123456789*?+-=#.";

int64_t rp_task_grid_query_rows(const rp_task_cfg *c)
{
    return (GRID_QUERY_LEN + c->cols - 1) / c->cols;
}

int64_t rp_task_grid_problem_len(const rp_task_cfg *c)
{
    return (c->rows + rp_task_grid_query_rows(c)) * c->cols;
}

int64_t rp_task_grid_max_offset(const rp_task_cfg *c)
{
    int64_t hi = (c->rows < c->cols ? c->rows : c->cols) - 1;
    return hi < RP_TASK_GRID_MAX_OFFSET ? hi : RP_TASK_GRID_MAX_OFFSET;
}

rp_status rp__grid_init(rp_task *t)
{
    int32_t cps[26 + sizeof grid_tail];
    int64_t n = 0;
    for (int64_t k = 0; k < t->cfg.alphabet; k++) cps[n++] = 'a' + (int32_t)k;
    for (const char *p = grid_tail; *p; p++) cps[n++] = (unsigned char)*p;
    return rp__task_set_vocab(t, cps, n);
}

/* One problem into buf (rp__grid_problem_len bytes, not NUL-terminated); returns the index of
 * the answer symbol in it. Draws: the rows * cols symbols row by row (each uniform 0..alphabet-1),
 * the offset (one draw over the (2m+1)^2 - 1 nonzero (dr, dc) with |dr|, |dc| <= m =
 * max_offset, in row-major order of dr then dc), then the marked row and the marked column,
 * each uniform over the cells whose target stays in the grid. */
static int64_t grid_draw(const rp_task *t, rp_rng *rng, char *buf)
{
    int64_t R = t->cfg.rows, C = t->cfg.cols, m = t->cfg.max_offset, side = 2 * m + 1;
    for (int64_t i = 0; i < R * C; i++)
        buf[i] = (char)('a' + rp_rng_int(rng, 0, t->cfg.alphabet - 1));
    int64_t k = rp_rng_int(rng, 0, side * side - 2);
    if (k >= (side * side - 1) / 2) k++;   /* skip (0, 0) */
    int64_t dr = k / side - m, dc = k % side - m;
    int64_t r = rp_rng_int(rng, dr < 0 ? -dr : 0, R - 1 - (dr > 0 ? dr : 0));
    int64_t c = rp_rng_int(rng, dc < 0 ? -dc : 0, C - 1 - (dc > 0 ? dc : 0));
    char answer = buf[(r + dr) * C + (c + dc)];
    buf[r * C + c] = '*';
    char *q = buf + R * C;
    q[0] = '?';
    q[1] = dr < 0 ? '-' : '+';
    q[2] = (char)('0' + (dr < 0 ? -dr : dr));
    q[3] = dc < 0 ? '-' : '+';
    q[4] = (char)('0' + (dc < 0 ? -dc : dc));
    q[5] = '=';
    q[6] = answer;
    q[7] = '#';
    int64_t len = rp_task_grid_problem_len(&t->cfg);
    for (int64_t i = R * C + GRID_QUERY_LEN; i < len; i++) buf[i] = '.';
    return R * C + 6;
}

void rp__grid_sequence(rp_task *t, rp_rng *rng, int32_t *inputs, int32_t *targets)
{
    char buf[RP_TASK_PROBLEM_CAP];
    int64_t T = t->cfg.seq_len, filled = 0, len = rp_task_grid_problem_len(&t->cfg);
    RP_ASSERT(len <= RP_TASK_PROBLEM_CAP);
    while (filled < T + 1) {
        int64_t ans = grid_draw(t, rng, buf);
        for (int64_t j = 0; j < len && filled < T + 1; j++, filled++) {
            int32_t id = rp__ascii_id(t, buf[j]);
            if (filled < T) inputs[filled] = id;
            if (filled > 0) targets[filled - 1] = j == ans ? id : -1;
        }
    }
}

rp_status rp__grid_problem(rp_task *t, rp_rng *rng, char *q, size_t qcap, char *a, size_t acap)
{
    char buf[RP_TASK_PROBLEM_CAP];
    int64_t ans = grid_draw(t, rng, buf);
    size_t nq = (size_t)ans + 1;
    if (!q || !a || qcap < nq || acap < 2)
        return rp_error(RP_ERR_ARG, "problem: buffers too small (need %zu and 2 bytes)", nq);
    memcpy(q, buf, (size_t)ans);
    q[ans] = '\0';
    a[0] = buf[ans];
    a[1] = '\0';
    return RP_OK;
}

/* A signed single-digit offset at p ('+' or '-', then 0..9), or 0 when it is not one. */
static int read_offset(const char *p, int64_t *v)
{
    if ((p[0] != '+' && p[0] != '-') || p[1] < '0' || p[1] > '9') return 0;
    *v = p[0] == '-' ? -(int64_t)(p[1] - '0') : (int64_t)(p[1] - '0');
    return 1;
}

int rp__grid_check(const rp_task *t, const char *question, const char *continuation)
{
    int64_t R = t->cfg.rows, C = t->cfg.cols, n = R * C, mark = -1, dr, dc;
    if (strlen(question) != (size_t)(n + 6)) return 0;
    for (int64_t i = 0; i < n; i++) {
        char ch = question[i];
        if (ch == '*' && mark < 0) mark = i;
        else if (ch < 'a' || ch >= 'a' + t->cfg.alphabet) return 0;
    }
    const char *qy = question + n;
    if (mark < 0 || qy[0] != '?' || !read_offset(qy + 1, &dr) || !read_offset(qy + 3, &dc) ||
        qy[5] != '=' || (dr == 0 && dc == 0))
        return 0;
    int64_t r = mark / C + dr, c = mark % C + dc;
    if (r < 0 || r >= R || c < 0 || c >= C) return 0;
    const char *end = strchr(continuation, '#');
    size_t len = end ? (size_t)(end - continuation) : strlen(continuation);
    return len == 1 && continuation[0] == question[r * C + c];
}

void rp__grid_positions(const rp_task *t, int64_t n, int32_t *rc)
{
    int64_t C = t->cfg.cols;
    for (int64_t i = 0; i < n; i++) {
        rc[2 * i] = (int32_t)(i / C);
        rc[2 * i + 1] = (int32_t)(i % C);
    }
}
