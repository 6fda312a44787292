/* Status codes and the thread-local error message. */
#ifndef RP_STATUS_H
#define RP_STATUS_H

#include <stdio.h>
#include <stdlib.h>

typedef enum {
    RP_OK = 0,
    RP_ERR_SHAPE,  /* shapes do not fit together */
    RP_ERR_ARG,    /* a bad argument value (odd d_rot, unknown mode, ...) */
    RP_ERR_RANGE,  /* an index or size out of range */
    RP_ERR_NOMEM,  /* allocation failed */
    RP_ERR_IO      /* a file could not be read or written */
} rp_status;

/* The message of the last failing call on this thread ("" if none). Valid until the next failure. */
const char *rp_last_error(void);
/* The status that call recorded with its message (RP_OK if none): for functions that return a
 * pointer (NULL on failure) and so cannot return the status themselves. */
rp_status rp_last_status(void);

/* Records a printf-style message for this thread and returns st, so callers can write
 * `return rp_error(RP_ERR_SHAPE, "expected %s, got %s", a, b);`. */
rp_status rp_error(rp_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* A message template filled in: t copied to buf (n bytes, NUL-terminated, cut to fit) with each
 * of the count marks ("{pe}", "{a}", ...) replaced by its value (values[i] for marks[i]; a NULL
 * value leaves the mark as it is). Returns buf. Only the messages that belong to a row of a rule
 * table are such templates (one loop raises every row's: the schema's rules and needs, the
 * frequency scheme's scalar rules, the vector positions' wordings, what needs a rotary pe, which
 * a config rule shares); every other message is a printf format written where it is raised. Each
 * value is copied as it is (a mark inside a value stays). */
const char *rp_fill_marks(char *buf, size_t n, const char *t, const char *const *marks,
                          const char *const *values, int count);

/* rp_error with the template t filled in (rp_fill_marks) as the message: returns st. */
rp_status rp_error_marks(rp_status st, const char *t, const char *const *marks,
                         const char *const *values, int count);
/* rp_error with this thread's last message as the value of {why}, the one mark of template t:
 * "where: " (where: a file's path, or NULL for no prefix) then t filled ("path: bad positions:
 * {why}" keeps a failed call's message behind the file's path and what failed). Returns st. */
rp_status rp_error_why(rp_status st, const char *where, const char *t);

/* Short name of a status code ("shape", "argument", ...). */
const char *rp_status_name(rp_status st);

/* Guards our own invariants only (never reachable from Lua input): prints file:line and aborts. */
#define RP_ASSERT(cond)                                                                     \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "%s:%d: RP_ASSERT(%s) failed\n", __FILE__, __LINE__, #cond);   \
            abort();                                                                        \
        }                                                                                   \
    } while (0)

/* Propagate a non-OK status. */
#define RP_TRY(expr)                         \
    do {                                     \
        rp_status rp_try_st_ = (expr);       \
        if (rp_try_st_ != RP_OK) return rp_try_st_; \
    } while (0)

#endif
