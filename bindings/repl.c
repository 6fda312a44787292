/* roper: the interactive workbench and script runner (build/roper).
 *
 *   roper                     REPL on a terminal (GNU readline); line-by-line evaluation of piped stdin
 *   roper script.lua a b      runs a script; `arg` is set as lua5.4 sets it
 *   roper -e 'stmt' / -i / -l mod / -v / -h / - (stdin as a script) / -- (end of options)
 *   roper --blas-coretype     (first argument only) prints the OPENBLAS_CORETYPE this CPU needs
 *
 * The module is linked in statically and preloaded (`require "roper"` works in scripts), then
 * loaded as the global `rp`; the global `help(f)` prints rp.help(f).
 *
 * REPL notes:
 *  - each input is tried first as `return <line>` (so expressions print), then as a statement; an
 *    incomplete chunk ("<eof>" at the end of the syntax error, as lua.c does) asks for more lines;
 *  - results are printed with luaL_tolstring (tensors print through __tostring), tab-separated;
 *  - errors print a traceback and the session continues;
 *  - Ctrl-C at the prompt discards the line; during a computation it sets a hook that raises
 *    "interrupted!" at the next Lua instruction (lua.c's lstop). Code running inside C (a long
 *    sgemm) sees it when it returns to Lua; the third Ctrl-C in a row kills the process;
 *  - readline runs through its callback interface with our own select loop, so a SIGINT at the
 *    prompt is handled outside the signal handler (no longjmp out of readline);
 *  - history: $ROPER_HISTORY, else ~/.roper_history (an empty $ROPER_HISTORY disables the file),
 *    read at start and appended at exit (also on os.exit); multi-line chunks stay one entry
 *    (timestamped history file with history_multiline_entries);
 *  - when stdin is not a tty, lines are read with getline() (readline would echo them), no prompt
 *    is shown and the exit status is 1 if any chunk failed.
 *
 * ROPER_PARENT_PID=<pid> in the environment (scripts/lib/runner.lua sets it for the runs it
 * starts): Linux sends this process SIGTERM when its parent dies (prctl PR_SET_PDEATHSIG), even
 * when the parent is killed with SIGKILL; if the parent is already gone (its pid is not our
 * parent's any more), the process exits at once. So a run never trains on as an orphan.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include <readline/history.h>
#include <readline/readline.h>

#include "rp.h"

int luaopen_roper(lua_State *L);

#define PROGNAME "roper"
#define CHUNKNAME "=stdin"
#define PROMPT1 "roper> "
#define PROMPT2 "   >> "
#define HISTORY_FILE ".roper_history"
#define HISTORY_MAX_LINES 5000

static lua_State *globalL = NULL;
static const char *progname = PROGNAME; /* NULL in the REPL: messages carry no prefix */
static int g_interactive = 0;           /* stdin is a terminal and the REPL runs */

/* ------------------------------------------------------------------------------------------ */
/* Signals                                                                                     */

enum { SIGMODE_DEFAULT, SIGMODE_LUA, SIGMODE_PROMPT };

static volatile sig_atomic_t g_sigint_pending = 0; /* Ctrl-C at the prompt */
static volatile sig_atomic_t g_sigwinch = 0;
static volatile sig_atomic_t g_interrupts = 0; /* Ctrl-C presses during one computation */

/* The hook set by the signal handler: raises an error at the next Lua instruction. */
static void lstop(lua_State *L, lua_Debug *ar) {
    (void)ar;
    lua_sethook(L, NULL, 0, 0);
    luaL_error(L, "interrupted!");
}

static void on_sigint_lua(int sig) {
    static const char msg[] =
        "\n(interrupt pending: the computation stops when it returns to Lua; "
        "Ctrl-C again kills " PROGNAME ")\n";
    int n = g_interrupts + 1;
    g_interrupts = n;
    if (n >= 3) { /* stuck in C code: give up like an unhandled SIGINT */
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    if (n == 2) {
        ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)w;
    }
    /* lua_sethook is safe to call from a signal handler (see lua.c). */
    lua_sethook(globalL, lstop, LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT, 1);
}

static void on_sigint_prompt(int sig) {
    (void)sig;
    g_sigint_pending = 1;
}

static void on_sigwinch(int sig) {
    (void)sig;
    g_sigwinch = 1;
}

static void set_sigint(int mode) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: a blocked read in Lua code is interrupted too */
    if (mode == SIGMODE_LUA)
        sa.sa_handler = on_sigint_lua;
    else if (mode == SIGMODE_PROMPT)
        sa.sa_handler = on_sigint_prompt;
    else
        sa.sa_handler = SIG_DFL;
    sigaction(SIGINT, &sa, NULL);
}

/* ------------------------------------------------------------------------------------------ */
/* Calling Lua                                                                                 */

static void l_message(const char *pname, const char *msg) {
    fflush(stdout);
    if (pname) fprintf(stderr, "%s: ", pname);
    fprintf(stderr, "%s\n", msg);
    fflush(stderr);
}

/* Reports a failed status: the message (with its traceback) is on the top of the stack. */
static int report(lua_State *L, int status) {
    if (status != LUA_OK) {
        const char *msg = lua_tostring(L, -1);
        if (msg == NULL) msg = "(error object is not a string)";
        l_message(progname, msg);
        lua_pop(L, 1);
    }
    return status;
}

/* Message handler: adds a traceback (non-string errors go through __tostring when they can). */
static int msghandler(lua_State *L) {
    const char *msg = lua_tostring(L, 1);
    if (msg == NULL) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
        msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    luaL_traceback(L, L, msg, 1);
    return 1;
}

/* Calls the function below its narg arguments with the message handler, Ctrl-C armed. */
static int docall(lua_State *L, int narg, int nres) {
    int status;
    int base = lua_gettop(L) - narg;
    lua_pushcfunction(L, msghandler);
    lua_insert(L, base);
    g_interrupts = 0;
    set_sigint(SIGMODE_LUA);
    status = lua_pcall(L, narg, nres, base);
    set_sigint(g_interactive ? SIGMODE_PROMPT : SIGMODE_DEFAULT);
    lua_sethook(L, NULL, 0, 0); /* an interrupt that arrived too late to fire */
    lua_remove(L, base);
    return status;
}

static int dochunk(lua_State *L, int status) {
    if (status == LUA_OK) status = docall(L, 0, 0);
    return report(L, status);
}

static int dostring(lua_State *L, const char *s, const char *name) {
    return dochunk(L, luaL_loadbuffer(L, s, strlen(s), name));
}

/* require(name) into the global `name`. */
static int dolibrary(lua_State *L, const char *name) {
    int status;
    lua_getglobal(L, "require");
    lua_pushstring(L, name);
    status = docall(L, 1, 1);
    if (status == LUA_OK) lua_setglobal(L, name);
    return report(L, status);
}

/* ------------------------------------------------------------------------------------------ */
/* Printing results                                                                            */

/* Builds "v1\tv2\t...\n" with luaL_tolstring, then writes it in one go. */
static int print_values(lua_State *L) {
    int n = lua_gettop(L);
    size_t len;
    const char *s;
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 1; i <= n; i++) {
        luaL_tolstring(L, i, NULL);
        luaL_addvalue(&b);
        luaL_addchar(&b, i < n ? '\t' : '\n');
    }
    luaL_pushresult(&b);
    s = lua_tolstring(L, -1, &len);
    fwrite(s, 1, len, stdout);
    fflush(stdout);
    return 0;
}

/* Prints every value on the stack (a __tostring may fail or be interrupted: protected). */
static int print_results(lua_State *L) {
    int n = lua_gettop(L);
    int status = LUA_OK;
    if (n > 0) {
        luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
        lua_pushcfunction(L, print_values);
        lua_insert(L, 1);
        status = docall(L, n, 0);
        if (status != LUA_OK) {
            l_message(progname, lua_pushfstring(L, "error printing the results (%s)",
                                                lua_tostring(L, -1)));
            lua_pop(L, 2);
        }
    }
    return status;
}

/* ------------------------------------------------------------------------------------------ */
/* History                                                                                     */

static char *g_hist_path = NULL;
static int g_hist_added = 0;
static int g_hist_saved = 0;

static void history_start(void) {
    const char *env = getenv("ROPER_HISTORY");
    using_history();
    history_comment_char = '#'; /* timestamps "#<digits>" delimit multi-line entries */
    history_write_timestamps = 1;
    history_multiline_entries = 1;
    if (env != NULL) {
        if (env[0] != '\0') g_hist_path = strdup(env);
    } else {
        const char *home = getenv("HOME");
        if (home != NULL && home[0] != '\0') {
            size_t n = strlen(home) + sizeof HISTORY_FILE + 2;
            g_hist_path = malloc(n);
            if (g_hist_path) snprintf(g_hist_path, n, "%s/%s", home, HISTORY_FILE);
        }
    }
    if (g_hist_path) read_history(g_hist_path); /* a missing file is fine */
}

/* Appends this session's entries (also runs at exit(), e.g. os.exit in the REPL). */
static void history_save(void) {
    if (g_hist_saved) return;
    g_hist_saved = 1;
    if (g_hist_path && g_hist_added > 0) {
        struct stat st;
        int err;
        if (stat(g_hist_path, &st) == 0)
            err = append_history(g_hist_added, g_hist_path);
        else
            err = write_history(g_hist_path);
        if (err != 0)
            fprintf(stderr, PROGNAME ": cannot write history file %s: %s\n", g_hist_path,
                    strerror(err));
        else
            history_truncate_file(g_hist_path, HISTORY_MAX_LINES);
    }
    clear_history();
    free(g_hist_path);
    g_hist_path = NULL;
}

static void saveline(const char *line) {
    HIST_ENTRY *last;
    if (!g_interactive || line[0] == '\0') return;
    last = history_length > 0 ? history_get(history_base + history_length - 1) : NULL;
    if (last && last->line && strcmp(last->line, line) == 0) return; /* no consecutive repeats */
    add_history(line);
    g_hist_added++;
}

/* ------------------------------------------------------------------------------------------ */
/* Completion of globals, table fields and methods (rp.rope.ro<TAB>, x:na<TAB>)                */

typedef struct {
    const char *text; /* the word being completed */
    char **items;
    size_t n, cap;
} completion;

static int is_name(const char *s) {
    if (!(s[0] == '_' || (s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z'))) return 0;
    for (const char *p = s + 1; *p; p++)
        if (!(*p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              (*p >= '0' && *p <= '9')))
            return 0;
    return 1;
}

static void completion_add(lua_State *L, completion *c, size_t plen, const char *key) {
    size_t klen = strlen(key);
    char *s;
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 64;
        char **items = realloc(c->items, cap * sizeof *items);
        if (!items) luaL_error(L, "out of memory");
        c->items = items;
        c->cap = cap;
    }
    s = malloc(plen + klen + 1);
    if (!s) luaL_error(L, "out of memory");
    memcpy(s, c->text, plen);
    memcpy(s + plen, key, klen + 1);
    c->items[c->n++] = s;
}

/* The table that holds the methods of the value on the top: its metatable's __index when that
 * is a table, else (for a userdata such as a tensor whose __index is a function) the table
 * roper.<Name> for a metatable named "roper.<Name>". Pushes it or nil. */
static void push_methods(lua_State *L) {
    if (!lua_getmetatable(L, -1)) {
        lua_pushnil(L);
        return;
    }
    if (lua_getfield(L, -1, "__index") == LUA_TTABLE) {
        lua_remove(L, -2);
        return;
    }
    lua_pop(L, 1);
    if (lua_getfield(L, -1, "__name") == LUA_TSTRING) {
        const char *name = lua_tostring(L, -1);
        if (strncmp(name, "roper.", 6) == 0) {
            luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
            if (lua_getfield(L, -1, "roper") == LUA_TTABLE) {
                lua_getfield(L, -1, name + 6);
                lua_replace(L, -5);
                lua_pop(L, 3);
                return;
            }
            lua_pop(L, 2);
        }
    }
    lua_pop(L, 2);
    lua_pushnil(L);
}

/* Adds the keys of the value on the top that start with `partial`, then those of its methods
 * (following __index tables a few levels). Pops the value. */
static void collect_keys(lua_State *L, completion *c, size_t plen, const char *partial) {
    size_t len = strlen(partial);
    for (int depth = 0; depth < 5 && !lua_isnil(L, -1); depth++) {
        if (lua_istable(L, -1)) {
            lua_pushnil(L);
            while (lua_next(L, -2)) {
                lua_pop(L, 1);
                if (lua_type(L, -1) == LUA_TSTRING) {
                    const char *key = lua_tostring(L, -1);
                    if (strncmp(key, partial, len) == 0 && is_name(key) &&
                        (partial[0] == '_' || strncmp(key, "__", 2) != 0))
                        completion_add(L, c, plen, key);
                }
            }
        }
        push_methods(L);
        lua_remove(L, -2);
    }
    lua_pop(L, 1);
}

/* One step of a dotted path: t[name] without metamethods, falling back to the methods table. */
static void path_step(lua_State *L, const char *name, size_t len) {
    lua_pushlstring(L, name, len);
    for (int depth = 0; depth < 5; depth++) {
        if (lua_istable(L, -2)) {
            lua_pushvalue(L, -1);
            if (lua_rawget(L, -3) != LUA_TNIL) {
                lua_replace(L, -3);
                lua_pop(L, 1);
                return;
            }
            lua_pop(L, 1);
        }
        lua_pushvalue(L, -2);
        push_methods(L);
        lua_remove(L, -2);
        if (lua_isnil(L, -1)) {
            lua_pop(L, 1);
            break;
        }
        lua_replace(L, -3);
    }
    lua_pop(L, 2);
    lua_pushnil(L);
}

static int collect_completions(lua_State *L) {
    static const char *const keywords[] = {"and",   "break",  "do",       "else", "elseif",
                                           "end",   "false",  "for",      "function",
                                           "goto",  "if",     "in",       "local", "nil",
                                           "not",   "or",     "repeat",   "return", "then",
                                           "true",  "until",  "while",    NULL};
    completion *c = lua_touserdata(L, 1);
    const char *text = c->text;
    const char *last = NULL;
    for (const char *p = text; *p; p++)
        if (*p == '.' || *p == ':') last = p;
    lua_settop(L, 1);
    lua_pushglobaltable(L);
    if (last == NULL) {
        for (int i = 0; keywords[i]; i++)
            if (strncmp(keywords[i], text, strlen(text)) == 0) completion_add(L, c, 0, keywords[i]);
        collect_keys(L, c, 0, text);
        return 0;
    }
    /* walk the path up to the last separator */
    for (const char *start = text; start <= last && !lua_isnil(L, -1);) {
        const char *end = strpbrk(start, ".:");
        if (end == start) { /* "a..b", ".x" */
            lua_pop(L, 1);
            return 0;
        }
        path_step(L, start, (size_t)(end - start));
        start = end + 1;
    }
    if (!lua_isnil(L, -1)) collect_keys(L, c, (size_t)(last + 1 - text), last + 1);
    return 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static completion g_compl;
static size_t g_compl_next;

static void completion_clear(void) {
    for (size_t i = g_compl_next; i < g_compl.n; i++) free(g_compl.items[i]);
    free(g_compl.items);
    memset(&g_compl, 0, sizeof g_compl);
    g_compl_next = 0;
}

static char *completion_generator(const char *text, int state) {
    if (state == 0) {
        lua_State *L = globalL;
        int top = lua_gettop(L);
        completion_clear();
        g_compl.text = text;
        lua_pushcfunction(L, collect_completions);
        lua_pushlightuserdata(L, &g_compl);
        if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
            lua_settop(L, top);
            completion_clear();
            return NULL;
        }
        lua_settop(L, top);
        if (g_compl.n > 1) { /* sort, drop duplicates (a key in a table and in its methods) */
            size_t k = 1;
            qsort(g_compl.items, g_compl.n, sizeof *g_compl.items, cmp_str);
            for (size_t i = 1; i < g_compl.n; i++) {
                if (strcmp(g_compl.items[i], g_compl.items[k - 1]) == 0)
                    free(g_compl.items[i]);
                else
                    g_compl.items[k++] = g_compl.items[i];
            }
            g_compl.n = k;
        }
    }
    if (g_compl_next < g_compl.n) return g_compl.items[g_compl_next++]; /* readline frees it */
    completion_clear();
    return NULL;
}

static char **roper_completion(const char *text, int start, int end) {
    (void)start;
    (void)end;
    rl_attempted_completion_over = 1; /* never fall back to file names */
    rl_completion_append_character = '\0';
    return rl_completion_matches(text, completion_generator);
}

/* ------------------------------------------------------------------------------------------ */
/* Reading lines                                                                               */

enum { READ_LINE = 1, READ_EOF = 0, READ_INTERRUPTED = -1 };

static char *g_rl_line = NULL;
static int g_rl_done = 0;

static void rl_line_handler(char *line) {
    g_rl_line = line;
    g_rl_done = 1;
    rl_callback_handler_remove(); /* also keeps readline from redisplaying the prompt */
}

static void readline_setup(void) {
    rl_readline_name = PROGNAME;
    rl_catch_signals = 0; /* SIGINT and SIGWINCH are ours (see readline_read) */
    rl_catch_sigwinch = 0;
    rl_attempted_completion_function = roper_completion;
    rl_basic_word_break_characters = " \t\n\"\\'`><=;+-*/%^~#&|{}()[],";
    rl_completer_word_break_characters = rl_basic_word_break_characters;
    {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESTART;
        sa.sa_handler = on_sigwinch;
        sigaction(SIGWINCH, &sa, NULL);
    }
}

/* One line through readline's callback interface. SIGINT and SIGWINCH stay blocked except inside
 * pselect, so a Ctrl-C is never lost between the flag test and the wait. */
static int readline_read(const char *prompt, char **out) {
    sigset_t block, orig;
    int fd = fileno(rl_instream ? rl_instream : stdin);
    int result = READ_LINE;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGWINCH);
    sigprocmask(SIG_BLOCK, &block, &orig);
    g_rl_line = NULL;
    g_rl_done = 0;
    g_sigint_pending = 0;
    rl_callback_handler_install(prompt, rl_line_handler);
    while (!g_rl_done) {
        fd_set fds;
        int r;
        if (g_sigwinch) {
            g_sigwinch = 0;
            rl_resize_terminal();
        }
        if (g_sigint_pending) {
            g_sigint_pending = 0;
            rl_point = rl_end;
            rl_redisplay();
            fputs("^C\n", rl_outstream ? rl_outstream : stdout);
            rl_replace_line("", 0);
            rl_free_line_state();
            rl_callback_sigcleanup();
            rl_callback_handler_remove();
            result = READ_INTERRUPTED;
            break;
        }
        FD_ZERO(&fds);
        FD_SET(fd, &fds);
        r = pselect(fd + 1, &fds, NULL, NULL, NULL, &orig);
        if (r < 0) {
            if (errno == EINTR) continue;
            rl_callback_handler_remove();
            result = READ_EOF;
            break;
        }
        if (r > 0) rl_callback_read_char();
    }
    sigprocmask(SIG_SETMASK, &orig, NULL);
    if (result == READ_LINE && g_rl_line == NULL) {
        fputs("\n", rl_outstream ? rl_outstream : stdout); /* Ctrl-D: end the prompt line */
        result = READ_EOF;
    }
    fflush(stdout);
    *out = result == READ_LINE ? g_rl_line : NULL;
    if (result != READ_LINE) free(g_rl_line);
    g_rl_line = NULL;
    return result;
}

/* Pushes the next input line (without its newline). */
static int pushline(lua_State *L, int firstline) {
    char *line = NULL;
    size_t len;
    if (g_interactive) {
        int r = readline_read(firstline ? PROMPT1 : PROMPT2, &line);
        if (r != READ_LINE) return r;
        len = strlen(line);
    } else {
        size_t cap = 0;
        ssize_t n = getline(&line, &cap, stdin);
        if (n < 0) {
            free(line);
            return READ_EOF;
        }
        len = (size_t)n;
        if (len > 0 && line[len - 1] == '\n') line[--len] = '\0';
    }
    lua_pushlstring(L, line, len);
    free(line);
    return READ_LINE;
}

/* ------------------------------------------------------------------------------------------ */
/* The read-eval-print loop                                                                    */

#define EOFMARK "<eof>"
#define MARKLEN (sizeof(EOFMARK) / sizeof(char) - 1)

/* A syntax error that ends in "<eof>" means the chunk is incomplete; pops the message then. */
static int incomplete(lua_State *L, int status) {
    if (status == LUA_ERRSYNTAX) {
        size_t lmsg;
        const char *msg = lua_tolstring(L, -1, &lmsg);
        if (lmsg >= MARKLEN && strcmp(msg + lmsg - MARKLEN, EOFMARK) == 0) {
            lua_pop(L, 1);
            return 1;
        }
    }
    return 0;
}

/* Tries "return <line>;" for the line on the top; on success replaces it with the function. */
static int addreturn(lua_State *L) {
    const char *line = lua_tostring(L, -1);
    const char *retline = lua_pushfstring(L, "return %s;", line);
    int status = luaL_loadbuffer(L, retline, strlen(retline), CHUNKNAME);
    if (status == LUA_OK) {
        lua_remove(L, -2); /* the modified line */
        saveline(line);
        lua_remove(L, -2); /* the line */
    } else {
        lua_pop(L, 2); /* the error message and the modified line */
    }
    return status;
}

/* Compiles the line on the top as a statement, reading more lines while it is incomplete.
 * Replaces it with the function or the error message; READ_INTERRUPTED drops it. */
static int multiline(lua_State *L) {
    for (;;) {
        size_t len;
        const char *chunk = lua_tolstring(L, -1, &len);
        int status = luaL_loadbuffer(L, chunk, len, CHUNKNAME);
        int r;
        if (!incomplete(L, status)) {
            saveline(chunk);
            lua_remove(L, -2);
            return status;
        }
        r = pushline(L, 0);
        if (r == READ_INTERRUPTED) {
            lua_pop(L, 1);
            return READ_INTERRUPTED;
        }
        if (r == READ_EOF) { /* report the incomplete chunk's error */
            status = luaL_loadbuffer(L, chunk, len, CHUNKNAME);
            saveline(chunk);
            lua_remove(L, -2);
            return status;
        }
        lua_pushliteral(L, "\n");
        lua_insert(L, -2);
        lua_concat(L, 3);
    }
}

/* Reads and evaluates chunks until EOF. Returns the number of chunks that failed. */
static int run_repl(lua_State *L) {
    int failures = 0;
    const char *oldprogname = progname;
    progname = NULL;
    if (g_interactive) {
        readline_setup();
        history_start();
        atexit(history_save);
        set_sigint(SIGMODE_PROMPT);
    }
    for (;;) {
        int status, r;
        lua_settop(L, 0);
        r = pushline(L, 1);
        if (r == READ_EOF) break;
        if (r == READ_INTERRUPTED) continue;
        if (lua_rawlen(L, -1) == 0) continue; /* empty line */
        status = addreturn(L);
        if (status != LUA_OK) {
            status = multiline(L);
            if (status == READ_INTERRUPTED) continue;
        }
        if (status == LUA_OK) status = docall(L, 0, LUA_MULTRET);
        if (status != LUA_OK && g_interactive && g_interrupts == 1) {
            fflush(stdout);
            fputs("\n", stderr); /* after the ^C the terminal echoed */
        }
        if (status == LUA_OK)
            status = print_results(L);
        else
            report(L, status);
        if (status != LUA_OK) failures++;
    }
    lua_settop(L, 0);
    if (g_interactive) {
        set_sigint(SIGMODE_DEFAULT);
        history_save();
        completion_clear();
        rl_callback_handler_remove();
    }
    progname = oldprogname;
    return failures;
}

/* ------------------------------------------------------------------------------------------ */
/* Command line                                                                                */

static void print_usage(FILE *f) {
    fprintf(f,
            "usage: " PROGNAME " [options] [script [args]]\n"
            "Available options are:\n"
            "  -e stat    execute string 'stat'\n"
            "  -i         enter the REPL after running 'script' and -e\n"
            "  -l mod     require library 'mod' into global 'mod'\n"
            "  -v         show version information (with the OpenBLAS core and threads)\n"
            "  -h, --help show this help\n"
            "  --         stop handling options\n"
            "  -          run stdin as a script and stop handling options\n"
            "With no script and no -e: a REPL when stdin is a terminal (history in\n"
            "$ROPER_HISTORY, default ~/" HISTORY_FILE "), else every line of stdin is evaluated\n"
            "and printed as in the REPL; the exit status is then 1 if any chunk failed.\n"
            "The module is loaded as the global 'rp'; help(f) prints its documentation,\n"
            "help() lists the topics.\n"
            "  --blas-coretype (as the only argument) prints the OPENBLAS_CORETYPE this CPU\n"
            "                  needs, or nothing when it needs none.\n");
}

static void print_version(void) {
    printf(PROGNAME " %s  (" LUA_RELEASE ")  OpenBLAS core %s, %d thread%s\n", RP_VERSION,
           rp_blas_core(), rp_blas_threads(), rp_blas_threads() == 1 ? "" : "s");
    fflush(stdout);
}

enum { HAS_ERROR = 1, HAS_I = 2, HAS_V = 4, HAS_E = 8, HAS_H = 16 };

/* Lua.c's collectargs: sets *first to the index of the script (or argc when none). */
static int collectargs(char **argv, int *first) {
    int args = 0;
    int i;
    for (i = 1; argv[i] != NULL; i++) {
        *first = i;
        if (argv[i][0] != '-') return args; /* the script */
        switch (argv[i][1]) {
        case '-':
            if (strcmp(argv[i], "--help") == 0) {
                args |= HAS_H;
                break;
            }
            if (argv[i][2] != '\0') return HAS_ERROR;
            *first = i + 1;
            return args;
        case '\0':
            return args; /* "-": stdin as the script */
        case 'h':
            if (argv[i][2] != '\0') return HAS_ERROR;
            args |= HAS_H;
            break;
        case 'i':
            if (argv[i][2] != '\0') return HAS_ERROR;
            args |= HAS_I;
            break;
        case 'v':
            if (argv[i][2] != '\0') return HAS_ERROR;
            args |= HAS_V;
            break;
        case 'W':
            if (argv[i][2] != '\0') return HAS_ERROR;
            break;
        case 'e':
            args |= HAS_E;
            /* FALLTHROUGH */
        case 'l':
            if (argv[i][2] == '\0') {
                i++;
                if (argv[i] == NULL || argv[i][0] == '-') return HAS_ERROR;
            }
            break;
        default:
            return HAS_ERROR;
        }
    }
    *first = i;
    return args;
}

/* Runs -e, -l and -W in order. */
static int runargs(lua_State *L, char **argv, int n) {
    for (int i = 1; i < n; i++) {
        int option = argv[i][1];
        if (option == '-') break;
        if (option == 'W') lua_warning(L, "@on", 0);
        if (option == 'e' || option == 'l') {
            const char *extra = argv[i] + 2;
            int status;
            if (*extra == '\0') extra = argv[++i];
            status = option == 'e' ? dostring(L, extra, "=(command line)") : dolibrary(L, extra);
            if (status != LUA_OK) return 0;
        }
    }
    return 1;
}

/* The global `arg`: arg[0] the script, arg[1..] its arguments, negative indices the interpreter. */
static void createargtable(lua_State *L, char **argv, int argc, int script) {
    int narg;
    if (script == argc) script = 0;
    narg = argc - (script + 1);
    lua_createtable(L, narg, script + 1);
    for (int i = 0; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i - script);
    }
    lua_setglobal(L, "arg");
}

/* Adds the script's directory (lowest priority) to package.path, so a script can require its
 * sibling files from any working directory. */
static void add_script_dir(lua_State *L, const char *fname) {
    const char *slash = strrchr(fname, '/');
    if (lua_getglobal(L, "package") != LUA_TTABLE) {
        lua_pop(L, 1);
        return;
    }
    lua_getfield(L, -1, "path");
    if (slash == NULL)
        lua_pushfstring(L, "%s;./?.lua", lua_tostring(L, -1));
    else {
        lua_pushlstring(L, fname, (size_t)(slash - fname));
        lua_pushfstring(L, "%s;%s/?.lua;%s/?/init.lua", lua_tostring(L, -2), lua_tostring(L, -1),
                        lua_tostring(L, -1));
        lua_remove(L, -2);
    }
    lua_setfield(L, -3, "path");
    lua_pop(L, 2);
}

static int handle_script(lua_State *L, char **argv) {
    int status;
    const char *fname = argv[0];
    if (strcmp(fname, "-") == 0 && strcmp(argv[-1], "--") != 0)
        fname = NULL; /* stdin */
    else
        add_script_dir(L, fname);
    status = luaL_loadfile(L, fname);
    if (status == LUA_OK) {
        int n;
        if (lua_getglobal(L, "arg") != LUA_TTABLE) luaL_error(L, "'arg' is not a table");
        n = (int)luaL_len(L, -1);
        luaL_checkstack(L, n + 3, "too many arguments to script");
        for (int i = 1; i <= n; i++) lua_rawgeti(L, -i, i);
        lua_remove(L, -n - 1);
        status = docall(L, n, LUA_MULTRET);
    }
    return report(L, status);
}

static const char help_chunk[] =
    "local rp = ...\n"
    "function help(...)\n"
    "  if type(rp) ~= 'table' or type(rp.help) ~= 'function' then\n"
    "    io.stderr:write('help: rp.help is not available\\n') return\n"
    "  end\n"
    "  local ok, text = pcall(rp.help, ...)\n"
    "  if not ok then io.stderr:write('help: ', tostring(text), '\\n') return end\n"
    "  if text ~= nil then print(text) end\n"
    "end\n";

/* Preloads the module, loads it as the global `rp` and defines `help`. */
static int load_roper(lua_State *L) {
    int status;
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
    lua_pushcfunction(L, luaopen_roper);
    lua_setfield(L, -2, "roper");
    lua_pop(L, 1);
    lua_getglobal(L, "require");
    lua_pushliteral(L, "roper");
    status = docall(L, 1, 1);
    if (status != LUA_OK) return report(L, status);
    lua_pushvalue(L, -1);
    lua_setglobal(L, "rp");
    status = luaL_loadbuffer(L, help_chunk, sizeof help_chunk - 1, "=(roper help)");
    if (status != LUA_OK) return report(L, status);
    lua_insert(L, -2);
    return report(L, docall(L, 1, 0));
}

/* Everything runs here, in protected mode; pushes true on success. */
static int pmain(lua_State *L) {
    int argc = (int)lua_tointeger(L, 1);
    char **argv = (char **)lua_touserdata(L, 2);
    int script = 0;
    int args = collectargs(argv, &script);
    int failures;
    luaL_checkversion(L);
    if (argv[0] && argv[0][0]) progname = argv[0];
    if (args == HAS_ERROR) {
        fprintf(stderr, "%s: unrecognized option or missing argument '%s'\n", progname,
                argv[script]);
        print_usage(stderr);
        return 0;
    }
    if (args & HAS_H) {
        print_usage(stdout);
        lua_pushboolean(L, 1);
        return 1;
    }
    if (args & HAS_V) print_version();
    luaL_openlibs(L);
    createargtable(L, argv, argc, script);
    lua_gc(L, LUA_GCRESTART);
    lua_gc(L, LUA_GCGEN, 0, 0);
    if (load_roper(L) != LUA_OK) return 0;
    if (!runargs(L, argv, script)) return 0;
    if (script < argc && handle_script(L, argv + script) != LUA_OK) return 0;
    if ((args & HAS_I) || (script == argc && !(args & (HAS_E | HAS_V)))) {
        g_interactive = isatty(STDIN_FILENO);
        if (g_interactive) {
            printf(PROGNAME " %s (" LUA_RELEASE ", OpenBLAS %s x%d)  help() lists the topics, "
                   "Ctrl-D exits\n",
                   RP_VERSION, rp_blas_core(), rp_blas_threads());
            fflush(stdout);
        }
        failures = run_repl(L);
        if (failures > 0 && !g_interactive) return 0;
    }
    lua_pushboolean(L, 1);
    return 1;
}

/* ROPER_PARENT_PID (see the top): die with the parent. */
static void follow_parent(void) {
    const char *s = getenv("ROPER_PARENT_PID");
    if (s == NULL || *s == '\0') return;
    char *end = NULL;
    long want = strtol(s, &end, 10);
    if (*end != '\0' || want <= 0) return;
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0) return;
    if (getppid() != (pid_t)want) {
        fprintf(stderr, PROGNAME ": the process that started this run (pid %ld) is gone\n", want);
        exit(EXIT_FAILURE);
    }
}

int main(int argc, char **argv) {
    int status, result;
    lua_State *L;
    if (argc >= 2 && strcmp(argv[1], "--blas-coretype") == 0) {
        const char *core = rp_blas_wanted_coretype();
        if (core) printf("%s\n", core);
        return EXIT_SUCCESS;
    }
    rp_blas_fix_coretype(argv); /* re-executes itself with OPENBLAS_CORETYPE when needed */
    follow_parent();
    L = luaL_newstate();
    if (L == NULL) {
        l_message(argv[0], "cannot create state: not enough memory");
        return EXIT_FAILURE;
    }
    globalL = L;
    lua_gc(L, LUA_GCSTOP);
    lua_pushcfunction(L, pmain);
    lua_pushinteger(L, argc);
    lua_pushlightuserdata(L, argv);
    status = lua_pcall(L, 2, 1, 0);
    result = lua_toboolean(L, -1);
    report(L, status);
    lua_close(L);
    globalL = NULL;
    return (result && status == LUA_OK) ? EXIT_SUCCESS : EXIT_FAILURE;
}
