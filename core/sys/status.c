#include "status.h"

#include <stdarg.h>
#include <string.h>

static _Thread_local char rp_err_buf[512];
static _Thread_local rp_status rp_err_status = RP_OK;

const char *rp_last_error(void) { return rp_err_buf; }
rp_status rp_last_status(void) { return rp_err_status; }

/* A NaN that printf wrote as "-nan" made "nan": the sign printf gives a NaN differs between
 * machines, and the messages are the same on all of them. Only where a number stands: after the
 * start, a space, '(', '[', '{' or '=', and before the end, a space, ',', ';', ')', ']' or '}'
 * (a path "x -nan: ..." keeps its name). */
static void unsign_nans(char *s)
{
    for (char *p = strstr(s, "-nan"); p; p = strstr(p + 1, "-nan")) {
        int before = p == s || strchr(" ([{=", p[-1]) != NULL;
        int after = p[4] == '\0' || strchr(" ,;)]}", p[4]) != NULL;
        if (before && after) memmove(p, p + 1, strlen(p + 1) + 1);
    }
}

rp_status rp_error(rp_status st, const char *fmt, ...)
{
    rp_err_status = st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rp_err_buf, sizeof rp_err_buf, fmt, ap);
    va_end(ap);
    unsign_nans(rp_err_buf);
    return st;
}

const char *rp_status_name(rp_status st)
{
    switch (st) {
    case RP_OK: return "ok";
    case RP_ERR_SHAPE: return "shape";
    case RP_ERR_ARG: return "argument";
    case RP_ERR_RANGE: return "range";
    case RP_ERR_NOMEM: return "out of memory";
    case RP_ERR_IO: return "io";
    }
    return "unknown";
}

const char *rp_fill_marks(char *buf, size_t n, const char *t, const char *const *marks,
                          const char *const *values, int count)
{
    size_t at = 0;
    if (!n) return buf;
    buf[0] = '\0';
    for (const char *p = t; *p && at + 1 < n;) {
        const char *text = NULL;
        size_t skip = 1;
        for (int i = 0; i < count && !text; i++) {
            size_t len = strlen(marks[i]);
            if (strncmp(p, marks[i], len) != 0) continue;
            skip = len;
            text = values[i] ? values[i] : marks[i];
        }
        if (!text) { /* plain text */
            buf[at++] = *p++;
            buf[at] = '\0';
            continue;
        }
        int w = snprintf(buf + at, n - at, "%s", text);
        if (w < 0) break;
        at = at + (size_t)w < n ? at + (size_t)w : n - 1;
        p += skip;
    }
    return buf;
}

/* rp_error_marks with "where: " before the filled template (NULL: none); the template is filled
 * before the message is recorded, so a value may be rp_last_error(). */
static rp_status error_marks_at(rp_status st, const char *where, const char *t,
                                const char *const *marks, const char *const *values, int count)
{
    char msg[sizeof rp_err_buf];
    rp_fill_marks(msg, sizeof msg, t, marks, values, count);
    return where ? rp_error(st, "%s: %s", where, msg) : rp_error(st, "%s", msg);
}

rp_status rp_error_marks(rp_status st, const char *t, const char *const *marks,
                         const char *const *values, int count)
{
    return error_marks_at(st, NULL, t, marks, values, count);
}

rp_status rp_error_why(rp_status st, const char *where, const char *t)
{
    static const char *const marks[] = {"{why}"};
    const char *why = rp_err_buf;
    return error_marks_at(st, where, t, marks, &why, 1);
}
