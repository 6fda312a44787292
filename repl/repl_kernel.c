/* roper --kernel: the REPL's evaluation, printing, completion and help behind a small
 * machine-readable protocol, for the Jupyter kernel (python/roper_kernel drives it; see
 * docs/notebooks.md). One Lua session lives as long as the process.
 *
 * Requests come on stdin, each a header line "<verb> <bytes>[ <cursor>]\n" and then <bytes> bytes
 * of text:
 *   execute <n>           a cell: evaluated as the REPL evaluates an input (first as
 *                         "return <cell>;" so that expressions give values, else as statements;
 *                         "?name" is help on name), in the chunk "cell"; a cell of several
 *                         lines whose last line is an expression gives that expression's values
 *                         (statements, then a value to show, as a notebook cell often ends)
 *   complete <n>          the cell up to the cursor: the completions of the word that ends there
 *   inspect <n> <cursor>  the cell and a byte offset: the help of the word around the cursor
 *   is_complete <n>       whether the cell is complete, incomplete (a block left open) or invalid
 * The replies go to file descriptor 3 (or the one $ROPER_KERNEL_FD names), one JSON object a line:
 *   execute      {"status":"ok","results":[{"text":T,"html":H},...]} (one item per value, html
 *                for a tensor: rp.tohtml) or {"status":"error","kind":K,"message":M,
 *                "traceback":B} with K "syntax", "runtime" or "interrupted"
 *   complete     {"status":"ok","start":S,"matches":[...]} (S: the byte where the word starts)
 *   inspect      {"status":"ok","found":true,"text":T} or {"status":"ok","found":false}
 *   is_complete  {"status":"complete"|"incomplete"|"invalid"}
 *   a bad request {"status":"error","kind":"protocol","message":M}
 * Framing: a request whose header declares more than 64 MiB, or an unknown verb, is skipped by its
 * declared length (read and dropped) and gets one protocol error. A header line that does not
 * declare a length (no verb and byte count, or longer than MAX_HEADER bytes) leaves no way to find
 * the next request: it gets one protocol error, and the session ends (a line on stderr, exit
 * status 1). No text of a refused request is ever read as a request. Completion and inspect look
 * at a word of at most MAX_WORD bytes (no name is longer), in time linear in the cell.
 * What the cell prints goes to stdout and stderr as it is written, and stdout is flushed before
 * each reply, so everything a cell printed is in the pipe before its reply is. The requests are
 * read from a copy of stdin, and stdin itself becomes /dev/null: io.read() in a cell reads
 * nothing (no hang, no request eaten). Both pipes are closed in the programs a cell starts
 * (os.execute, io.popen), so a program left running never holds them open.
 *
 * SIGINT during a cell is the REPL's Ctrl-C ("interrupted!" at the next Lua instruction; the third
 * in a row ends the process); between requests it is ignored. The Jupyter kernel starts roper in a
 * session of its own and sends an interrupt to that whole process group, so a program the cell
 * runs (os.execute, io.popen) gets it too, as a terminal's Ctrl-C reaches its foreground group:
 * `os.execute("sleep 12")` ends at once and returns nil, "signal", 2 (system() ignores SIGINT in
 * roper itself while it waits).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>

#include "repl.h"

static int g_reply_fd = 3;
static FILE *g_requests; /* the requests: what was stdin */
static const repl_eval *g_ev; /* repl.c's evaluation */
#define MAX_REQUEST (64u << 20) /* bytes of one request's text */
#define MAX_HEADER 256          /* bytes of a header line, its newline included */
#define MAX_WORD 1024           /* bytes of a word that completion or inspect looks up */
#define CELL "=cell"
#define EOFMARK "<eof>"

/* ------------------------------------------------------------------------------------------ */
/* Replies: JSON built in a growing buffer, written to REPLY_FD as one line                      */

typedef struct {
    char *s;
    size_t n, cap;
    int failed; /* out of memory */
} jbuf;

static void jb_add(jbuf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->s, cap);
        if (p == NULL) {
            b->failed = 1;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
}

static void jb_lit(jbuf *b, const char *s) { jb_add(b, s, strlen(s)); }

/* A JSON string: quotes, backslashes and control characters escaped; other bytes as they are
 * (the reader decodes UTF-8, replacing invalid bytes). */
static void jb_str(jbuf *b, const char *s, size_t n) {
    size_t run = 0;
    jb_lit(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        jb_add(b, s + run, i - run);
        run = i + 1;
        if (c == '"') jb_lit(b, "\\\"");
        else if (c == '\\') jb_lit(b, "\\\\");
        else if (c == '\n') jb_lit(b, "\\n");
        else if (c == '\t') jb_lit(b, "\\t");
        else {
            char esc[8];
            snprintf(esc, sizeof esc, "\\u%04x", c);
            jb_lit(b, esc);
        }
    }
    jb_add(b, s + run, n - run);
    jb_lit(b, "\"");
}

static void jb_cstr(jbuf *b, const char *s) { jb_str(b, s, strlen(s)); }

/* Writes the reply and a newline; returns 0, or -1 when the reader is gone. */
static int jb_send(jbuf *b) {
    static const char oom[] =
        "{\"status\":\"error\",\"kind\":\"protocol\",\"message\":\"out of memory\"}\n";
    const char *s;
    size_t n;
    int rc = 0;
    jb_lit(b, "\n");
    s = b->failed ? oom : b->s;
    n = b->failed ? sizeof oom - 1 : b->n;
    fflush(stdout);
    fflush(stderr);
    while (n > 0) {
        ssize_t w = write(g_reply_fd, s, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            rc = -1;
            break;
        }
        s += w;
        n -= (size_t)w;
    }
    free(b->s);
    memset(b, 0, sizeof *b);
    return rc;
}

static int send_protocol_error(const char *msg) {
    jbuf b = {0};
    jb_lit(&b, "{\"status\":\"error\",\"kind\":\"protocol\",\"message\":");
    jb_cstr(&b, msg);
    jb_lit(&b, "}");
    return jb_send(&b);
}

/* ------------------------------------------------------------------------------------------ */
/* Requests                                                                                    */

static int is_incomplete(lua_State *L, int status) {
    size_t n, m = strlen(EOFMARK);
    const char *msg;
    if (status != LUA_ERRSYNTAX) return 0;
    msg = lua_tolstring(L, -1, &n);
    return msg != NULL && n >= m && strcmp(msg + n - m, EOFMARK) == 0;
}

/* Pushes the text a .. glue .. b .. tail (a and b of na and nb bytes, joined by length: a NUL
 * byte in a cell stays where "%s" formatting would cut the text) and returns it, its length in
 * *n. */
static const char *push_joined(lua_State *L, const char *a, size_t na, const char *glue,
                               const char *b, size_t nb, const char *tail, size_t *n) {
    lua_pushlstring(L, a, na);
    lua_pushstring(L, glue);
    lua_pushlstring(L, b, nb);
    lua_pushstring(L, tail);
    lua_concat(L, 4);
    return lua_tolstring(L, -1, n);
}

/* Compiles the cell on the top: "return <cell>;" first, as the REPL does with a line; then, for
 * a cell of several lines whose last line is an expression by itself,
 * "<all but the last line>\nreturn <last line>;" (statements, then the
 * values to show, as a notebook cell often ends; a last line that is a call shows what it
 * returns, as the REPL shows it); else the cell itself. Every text is compiled whole, by its
 * length, as Lua compiles a file (a NUL byte is a syntax error, not the end of the cell).
 * Replaces it with the function (LUA_OK) or the cell's own error message. */
static int load_cell(lua_State *L) {
    size_t len, n;
    const char *cell = lua_tolstring(L, -1, &len);
    const char *end = cell + len;
    const char *ret = push_joined(L, "", 0, "return ", cell, len, ";", &n);
    const char *last = end;
    int status = luaL_loadbuffer(L, ret, n, CELL);
    if (status == LUA_OK) {
        lua_replace(L, -3);
        lua_pop(L, 1);
        return LUA_OK;
    }
    lua_pop(L, 2); /* the message and the text with return */
    while (last > cell && (last[-1] == '\n' || last[-1] == ' ' || last[-1] == '\t' || last[-1] == '\r'))
        last--;
    while (last > cell && last[-1] != '\n') last--;
    /* the last line must be an expression by itself ("return end;" compiles inside a block) */
    if (last > cell) {
        const char *alone = push_joined(L, "", 0, "return ", last, (size_t)(end - last), ";", &n);
        int ok = luaL_loadbuffer(L, alone, n, CELL) == LUA_OK;
        lua_pop(L, 2);
        if (!ok) last = cell;
    }
    /* nor may it continue the line above, as Lua reads the cell: "d = a\n  - b" is d = a - b,
     * "x = f\n(1)" a call of f. It does when the cell compiles as statements and either the
     * lines before it and it, apart (";" between), do not, or it starts with what a call's
     * arguments start with: "(", "{", a string. */
    if (last > cell && luaL_loadbuffer(L, cell, len, CELL) == LUA_OK) {
        lua_pop(L, 1);
        const char *apart = push_joined(L, cell, (size_t)(last - 1 - cell), ";\n", last,
                                        (size_t)(end - last), "", &n);
        int ok = luaL_loadbuffer(L, apart, n, CELL) == LUA_OK;
        lua_pop(L, 2);
        const char *first = last + strspn(last, " \t\r");
        if (!ok || (*first != '\0' && strchr("({\"'[", *first) != NULL)) last = cell;
    } else if (last > cell) {
        lua_pop(L, 1); /* the cell's own message: it is compiled again below */
    }
    if (last > cell) {
        const char *split = push_joined(L, cell, (size_t)(last - 1 - cell), "\nreturn ", last,
                                        (size_t)(end - last), ";", &n);
        if (luaL_loadbuffer(L, split, n, CELL) == LUA_OK) {
            lua_replace(L, -3); /* over the cell */
            lua_pop(L, 1);      /* the text */
            return LUA_OK;
        }
        lua_pop(L, 2); /* the message and the text */
    }
    status = luaL_loadbuffer(L, cell, len, CELL);
    lua_remove(L, -2);
    return status;
}

/* The error on the top as an execute reply: the message (before the traceback) and the whole. */
static int send_error(lua_State *L, const char *kind) {
    jbuf b = {0};
    size_t n;
    const char *msg = lua_tolstring(L, -1, &n);
    const char *tb;
    if (msg == NULL) {
        msg = "(error object is not a string)";
        n = strlen(msg);
    }
    tb = strstr(msg, "\nstack traceback:");
    if (strcmp(kind, "runtime") == 0) {
        size_t head = tb ? (size_t)(tb - msg) : n;
        static const char intr[] = "interrupted!";
        if (head >= sizeof intr - 1 && memcmp(msg + head - (sizeof intr - 1), intr, sizeof intr - 1) == 0)
            kind = "interrupted";
    }
    jb_lit(&b, "{\"status\":\"error\",\"kind\":");
    jb_cstr(&b, kind);
    jb_lit(&b, ",\"message\":");
    jb_str(&b, msg, tb ? (size_t)(tb - msg) : n);
    jb_lit(&b, ",\"traceback\":");
    jb_str(&b, msg, n);
    jb_lit(&b, "}");
    lua_pop(L, 1);
    return jb_send(&b);
}

/* Pushes the text of every value on the stack and, after each, rp.tohtml(v) or nil; called
 * protected (a __tostring may fail or be interrupted). */
static int value_items(lua_State *L) {
    int n = lua_gettop(L);
    luaL_checkstack(L, 2 * n + LUA_MINSTACK, "too many results");
    if (lua_getglobal(L, "rp") == LUA_TTABLE) lua_getfield(L, -1, "tohtml");
    else lua_pushnil(L);
    lua_remove(L, -2); /* rp.tohtml or nil at n + 1 */
    for (int i = 1; i <= n; i++) {
        g_ev->push_value_text(L, i);
        if (lua_isfunction(L, n + 1)) {
            lua_pushvalue(L, n + 1);
            lua_pushvalue(L, i);
            lua_call(L, 1, 1);
            if (lua_type(L, -1) != LUA_TSTRING) {
                lua_pop(L, 1);
                lua_pushnil(L);
            }
        } else {
            lua_pushnil(L);
        }
    }
    return 2 * n;
}

static int do_execute(lua_State *L) {
    size_t len;
    const char *cell = lua_tolstring(L, -1, &len);
    const char *p = cell;
    int status, base, n;
    jbuf b = {0};
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    if (*p == '?') { /* help, printed as the REPL prints it */
        if (!g_ev->push_query(L)) {
            lua_pushliteral(L, "help is not available");
            return send_error(L, "runtime");
        }
        lua_pushstring(L, p + 1);
        status = g_ev->docall(L, 1, 2);
        if (status != LUA_OK) return send_error(L, "runtime");
        {
            size_t tl;
            const char *text = luaL_tolstring(L, lua_isnil(L, -2) ? -1 : -2, &tl);
            fwrite(text, 1, tl, stdout);
            fputc('\n', stdout);
        }
        lua_settop(L, 0);
        jb_lit(&b, "{\"status\":\"ok\",\"results\":[]}");
        return jb_send(&b);
    }
    status = load_cell(L);
    if (status != LUA_OK) return send_error(L, "syntax");
    base = lua_gettop(L) - 1;
    status = g_ev->docall(L, 0, LUA_MULTRET);
    if (status != LUA_OK) return send_error(L, "runtime");
    n = lua_gettop(L) - base;
    lua_pushcfunction(L, value_items);
    lua_insert(L, base + 1);
    status = g_ev->docall(L, n, LUA_MULTRET);
    if (status != LUA_OK) {
        lua_pushfstring(L, PRINT_ERROR_HEAD "%s", lua_tostring(L, -1));
        lua_remove(L, -2);
        return send_error(L, "runtime");
    }
    jb_lit(&b, "{\"status\":\"ok\",\"results\":[");
    for (int i = base + 1; i + 1 <= lua_gettop(L); i += 2) {
        size_t tl;
        const char *text = lua_tolstring(L, i, &tl);
        jb_lit(&b, i > base + 1 ? ",{\"text\":" : "{\"text\":");
        jb_str(&b, text ? text : "", text ? tl : 0);
        if (lua_type(L, i + 1) == LUA_TSTRING) {
            const char *html = lua_tolstring(L, i + 1, &tl);
            jb_lit(&b, ",\"html\":");
            jb_str(&b, html, tl);
        }
        jb_lit(&b, "}");
    }
    jb_lit(&b, "]}");
    lua_settop(L, 0);
    return jb_send(&b);
}

static void add_match(const char *item, void *ud) {
    jbuf *b = ud;
    if (b->failed) return;
    if (b->s[b->n - 1] != '[') jb_lit(b, ",");
    jb_cstr(b, item);
}

static int do_complete(lua_State *L) {
    size_t len;
    const char *code = lua_tolstring(L, -1, &len);
    size_t start = repl_word_start(code, len);
    jbuf b = {0};
    char num[32];
    snprintf(num, sizeof num, "%zu", start);
    jb_lit(&b, "{\"status\":\"ok\",\"start\":");
    jb_lit(&b, num);
    jb_lit(&b, ",\"matches\":[");
    if (!b.failed && start < len && len - start <= MAX_WORD && strlen(code + start) == len - start)
        repl_complete(L, code + start, add_match, &b);
    jb_lit(&b, "]}");
    lua_settop(L, 0);
    return jb_send(&b);
}

/* The word around the cursor: the REPL's word characters on both sides, without a trailing
 * separator ("rp.rope." is "rp.rope"). */
static int do_inspect(lua_State *L, size_t cursor) {
    size_t len;
    const char *code = lua_tolstring(L, -1, &len);
    size_t start, end;
    jbuf b = {0};
    if (cursor > len) cursor = len;
    start = repl_word_start(code, cursor);
    end = repl_word_end(code, len, cursor);
    while (end > start && (code[end - 1] == '.' || code[end - 1] == ':')) end--;
    if (end > start && end - start <= MAX_WORD && memchr(code + start, '\0', end - start) == NULL &&
        g_ev->push_query(L)) {
        lua_pushlstring(L, code + start, end - start);
        if (g_ev->docall(L, 1, 2) == LUA_OK && lua_type(L, -2) == LUA_TSTRING) {
            size_t tl;
            const char *text = lua_tolstring(L, -2, &tl);
            jb_lit(&b, "{\"status\":\"ok\",\"found\":true,\"text\":");
            jb_str(&b, text, tl);
            jb_lit(&b, "}");
            lua_settop(L, 0);
            return jb_send(&b);
        }
    }
    lua_settop(L, 0);
    jb_lit(&b, "{\"status\":\"ok\",\"found\":false}");
    return jb_send(&b);
}

static int do_is_complete(lua_State *L) {
    size_t len;
    const char *code = lua_tolstring(L, -1, &len);
    const char *p = code;
    const char *verdict = "complete";
    jbuf b = {0};
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    if (*p != '?') {
        int status = load_cell(L);
        if (status != LUA_OK) verdict = is_incomplete(L, status) ? "incomplete" : "invalid";
    }
    lua_settop(L, 0);
    jb_lit(&b, "{\"status\":");
    jb_cstr(&b, verdict);
    jb_lit(&b, "}");
    return jb_send(&b);
}

/* Reads and drops n bytes of the requests; returns 0, or -1 at their end. */
static int skip_bytes(unsigned long long n) {
    char buf[1 << 16];
    while (n > 0) {
        size_t k = n < sizeof buf ? (size_t)n : sizeof buf;
        if (fread(buf, 1, k, g_requests) != k) return -1;
        n -= k;
    }
    return 0;
}

/* Reads one header line into header[MAX_HEADER] (NUL-terminated, without its newline). Returns
 * 1, 0 at the end of the requests before any byte, -1 for a line longer than MAX_HEADER (read up
 * to MAX_HEADER bytes only) or cut by the end. */
static int read_header(char header[MAX_HEADER]) {
    size_t n = 0;
    for (;;) {
        int c = getc(g_requests);
        if (c == EOF) {
            if (n == 0) return 0;
            header[n] = '\0';
            return -1;
        }
        if (c == '\n') {
            header[n] = '\0';
            return 1;
        }
        if (n + 1 >= MAX_HEADER) {
            header[n] = '\0';
            return -1;
        }
        header[n++] = (char)c;
    }
}

/* A decimal number of digits only at *p (no sign, no blank), advancing p; 0 when there is none
 * or it passes 2^63. */
static int parse_count(const char **p, unsigned long long *v) {
    const char *s = *p;
    unsigned long long x = 0;
    if (*s < '0' || *s > '9') return 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (x > (1ull << 59)) return 0;
        x = x * 10 + (unsigned long long)(*s - '0');
    }
    *v = x;
    *p = s;
    return 1;
}

/* Reads one request: pushes its text, sets verb (its first 15 characters) and cursor. Returns 1,
 * 0 at the end of stdin (a request cut short included), -1 for a request refused and skipped by
 * its declared length (the reply is sent here), -2 for a header that declares no length (the
 * reply is sent here; the session must end: the next request cannot be found). */
static int read_request(lua_State *L, char verb[16], size_t *cursor) {
    char header[MAX_HEADER];
    unsigned long long n = 0, at = 0;
    const char *p = header;
    size_t vl;
    int got, ok;
    char *buf;
    got = read_header(header);
    if (got == 0) return 0;
    /* "<verb> <bytes>[ <cursor>]": one blank between the fields, digits only */
    vl = strcspn(header, " ");
    p = header + vl;
    ok = got > 0 && vl > 0 && *p == ' ';
    if (ok) {
        p++;
        ok = parse_count(&p, &n);
    }
    if (ok && *p == ' ') {
        p++;
        ok = parse_count(&p, &at);
    }
    if (!ok || *p != '\0') {
        send_protocol_error(got < 0 ? "bad request header (longer than 255 bytes): the session ends"
                                    : "bad request header (expected \"<verb> <bytes>[ <cursor>]\"): "
                                      "the session ends");
        return -2;
    }
    if (n > MAX_REQUEST) {
        char msg[128];
        if (skip_bytes(n) != 0) return 0;
        snprintf(msg, sizeof msg, "a request of %llu bytes is refused (at most 64 MiB; skipped)", n);
        send_protocol_error(msg);
        return -1;
    }
    /* a verb longer than any known one is unknown: its first 15 characters are kept */
    if (vl > 15) vl = 15;
    memcpy(verb, header, vl);
    verb[vl] = '\0';
    *cursor = (size_t)at;
    buf = malloc(n + 1);
    if (buf == NULL) return 0;
    if (fread(buf, 1, n, g_requests) != n) {
        free(buf);
        return 0;
    }
    buf[n] = '\0';
    lua_pushlstring(L, buf, n);
    free(buf);
    return 1;
}

int repl_kernel(lua_State *L, const repl_eval *ev) {
    g_ev = ev;
    const char *fd = getenv("ROPER_KERNEL_FD");
    if (fd != NULL && *fd != '\0') {
        char *end;
        long v = strtol(fd, &end, 10);
        if (*end != '\0' || v < 0 || v > 1023) {
            fprintf(stderr, PROGNAME " --kernel: ROPER_KERNEL_FD must be a file descriptor, got %s\n", fd);
            return 1;
        }
        g_reply_fd = (int)v;
    }
    {
        int req = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
        int null = open("/dev/null", O_RDONLY);
        if (req < 0 || null < 0 || dup2(null, STDIN_FILENO) < 0 ||
            (g_requests = fdopen(req, "rb")) == NULL) {
            fprintf(stderr, PROGNAME " --kernel: cannot set up the request pipe: %s\n", strerror(errno));
            return 1;
        }
        close(null);
        clearerr(stdin);
        fcntl(g_reply_fd, F_SETFD, FD_CLOEXEC);
    }
    for (;;) {
        char verb[16];
        size_t cursor = 0;
        int r, rc;
        lua_settop(L, 0);
        r = read_request(L, verb, &cursor);
        if (r == 0) return 0;
        if (r == -2) {
            fputs(PROGNAME " --kernel: a request header without its length; the session ends\n",
                  stderr);
            return 1;
        }
        if (r < 0) continue;
        if (strcmp(verb, "execute") == 0) rc = do_execute(L);
        else if (strcmp(verb, "complete") == 0) rc = do_complete(L);
        else if (strcmp(verb, "inspect") == 0) rc = do_inspect(L, cursor);
        else if (strcmp(verb, "is_complete") == 0) rc = do_is_complete(L);
        else rc = send_protocol_error("unknown request (execute, complete, inspect, is_complete)");
        if (rc != 0) return 1; /* the reader is gone */
    }
}
