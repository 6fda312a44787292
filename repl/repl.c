/* roper: the interactive workbench and script runner (build/roper).
 *
 *   roper                     REPL on a terminal (GNU readline); line-by-line evaluation of piped stdin
 *   roper script.lua a b      runs a script; `arg` is set as lua5.4 sets it (scripts/NAME.lua,
 *                             when the current folder has none, is the installed one)
 *   roper -e 'stmt' / -i / -l mod / -v / -h / - (stdin as a script) / -- (end of options)
 *   roper --kernel            (the only argument) the REPL behind a machine-readable protocol for
 *                             the Jupyter kernel (repl_kernel.c, docs/notebooks.md)
 *   roper --blas-coretype     (the only argument) prints the OPENBLAS_CORETYPE this CPU needs
 *   roper --blas-env          (the only argument) prints NAME=value for every variable a roper
 *                             process should start with and lacks (tests/with_blas_env exports them)
 *
 * At start the process re-executes itself with OPENBLAS_CORETYPE (the fastest kernels OpenBLAS
 * has for this CPU) and OMP_WAIT_POLICY=passive (idle threads sleep) unless the user set them
 * (rp_blas_fix_env, core/sys/blas.h): both are read only when the libraries load. An OPENBLAS_CORETYPE
 * naming slower kernels than this CPU runs is dropped first (unless ROPER_KEEP_CORETYPE is set).
 *
 * The module is linked in statically and preloaded (`require "roper"` works in scripts), then
 * loaded as the global `rp`; the global `help(f)` prints rp.help(f) (or why there is none), and an
 * input line "?name" is help("name").
 *
 * This file: signals during a computation, calling Lua, printing results, the read-eval-print
 * loop and the command line. Reading lines (readline or getline), the history and the completion
 * are in repl_input.c (repl.h).
 *
 * REPL notes:
 *  - each input is tried first as `return <line>` (so expressions print), then as a statement; an
 *    incomplete chunk ("<eof>" at the end of the syntax error, as lua.c does) asks for more lines;
 *  - results are printed one per line: tables through rp.inspect (nested, sorted keys, a depth
 *    limit, <cycle> for a table inside itself, as wide as the terminal), anything else with
 *    luaL_tolstring (tensors print through __tostring);
 *  - a line "?name" is help for name (torch7's trepl has the same shortcut): "?" alone lists the
 *    topics, "?rp.rope.rotate" or "?t.narrow" the help of that value, "?fraction_v" a search;
 *  - errors print a traceback and the session continues;
 *  - exit() or quit() leaves as Ctrl-D does; the bare name prints how to leave (define_leave);
 *  - Ctrl-C at the prompt discards the line; during a computation it sets a hook that raises
 *    "interrupted!" at the next Lua instruction (lua.c's lstop). Code running inside C (a long
 *    sgemm) sees it when it returns to Lua; the third Ctrl-C in a row kills the process;
 *  - readline runs through its callback interface with our own select loop, so a SIGINT at the
 *    prompt is handled outside the signal handler (no longjmp out of readline);
 *  - history: $ROPER_HISTORY, else ~/.roper_history (an empty $ROPER_HISTORY disables the file),
 *    read at start and appended at exit (also on os.exit); multi-line chunks stay one entry
 *    (timestamped history file with history_multiline_entries);
 *  - when stdin is not a tty, lines are read with getline() (readline would echo them), no prompt
 *    is shown, each chunk is compiled with the line numbers of the input (errors say stdin:7, the
 *    line where it went wrong, as `lua5.4 - < file` would) and the exit status is 1 if any chunk
 *    failed;
 *  - roper -e 'text' prints the values of an expression as the REPL does (roper -e
 *    'rp.ones{2}:sum()' prints 2); a statement runs as in lua5.4 -e.
 *
 * ROPER_PARENT_PID=<pid> in the environment (scripts/lib/runner.lua sets it for the runs it
 * starts): Linux sends this process SIGTERM when its parent dies (prctl PR_SET_PDEATHSIG), even
 * when the parent is killed with SIGKILL; if the parent is already gone (its pid is not our
 * parent's any more), the process exits at once. So a run never trains on as an orphan.
 */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "repl.h"
#include "roper.h"
#include "rp.h"
#include "tokenizer.h"

#define CHUNKNAME "=stdin"

static lua_State *globalL = NULL;
static const char *progname = PROGNAME; /* NULL in the REPL: messages carry no prefix */
static int g_interactive = 0;           /* stdin is a terminal and the REPL runs */

/* ------------------------------------------------------------------------------------------ */
/* Signals                                                                                     */

enum { SIGMODE_DEFAULT, SIGMODE_LUA, SIGMODE_PROMPT, SIGMODE_IGNORE };
static int g_kernel = 0; /* roper --kernel: a SIGINT between requests is ignored */

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

static void set_sigint(int mode) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: a blocked read in Lua code is interrupted too */
    if (mode == SIGMODE_LUA)
        sa.sa_handler = on_sigint_lua;
    else if (mode == SIGMODE_PROMPT)
        sa.sa_handler = repl_on_sigint_prompt;
    else if (mode == SIGMODE_IGNORE)
        sa.sa_handler = SIG_IGN;
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
    set_sigint(g_kernel ? SIGMODE_IGNORE : g_interactive ? SIGMODE_PROMPT : SIGMODE_DEFAULT);
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

#define REG_INSPECT "roper.repl.inspect" /* rp.inspect, kept when the REPL starts */
#define REG_QUERY "roper.repl.query"     /* the "?name" handler of help_chunk */

/* Pushes the text of the value at index i: a table without __tostring through rp.inspect (nested,
 * as wide as the terminal), anything else through luaL_tolstring (tensors through __tostring). */
static void push_value_text(lua_State *L, int i) {
    int is_plain_table = lua_type(L, i) == LUA_TTABLE;
    if (is_plain_table && luaL_getmetafield(L, i, "__tostring") != LUA_TNIL) {
        lua_pop(L, 1);
        is_plain_table = 0;
    }
    if (is_plain_table && lua_getfield(L, LUA_REGISTRYINDEX, REG_INSPECT) == LUA_TFUNCTION) {
        lua_pushvalue(L, i);
        lua_createtable(L, 0, 1);
        lua_pushinteger(L, repl_columns());
        lua_setfield(L, -2, "width");
        lua_call(L, 2, 1);
        if (lua_type(L, -1) == LUA_TSTRING) return;
        lua_pop(L, 1);
        luaL_tolstring(L, i, NULL);
        return;
    }
    if (is_plain_table) lua_pop(L, 1); /* not a function */
    luaL_tolstring(L, i, NULL);
}

/* Builds the text of every value, one per line ("v1\nv2\n..."), then writes it in one go. */
static int print_values(lua_State *L) {
    int n = lua_gettop(L);
    size_t len;
    const char *s;
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 1; i <= n; i++) {
        push_value_text(L, i);
        luaL_addvalue(&b);
        luaL_addchar(&b, '\n');
    }
    luaL_pushresult(&b);
    s = lua_tolstring(L, -1, &len);
    fwrite(s, 1, len, stdout);
    fflush(stdout);
    return 0;
}

/* Prints the n values on the top of the stack and pops them (a __tostring may fail or be
 * interrupted: protected). */
static int print_results(lua_State *L, int n) {
    int status = LUA_OK;
    if (n > 0) {
        luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
        lua_pushcfunction(L, print_values);
        lua_insert(L, -n - 1);
        status = docall(L, n, 0);
        if (status != LUA_OK) {
            l_message(progname, lua_pushfstring(L, PRINT_ERROR_HEAD "%s", lua_tostring(L, -1)));
            lua_pop(L, 2);
        }
    }
    return status;
}

/* ------------------------------------------------------------------------------------------ */
/* What the kernel mode (repl_kernel.c) uses                                                   */

static int push_query(lua_State *L) {
    if (lua_getfield(L, LUA_REGISTRYINDEX, REG_QUERY) == LUA_TFUNCTION) return 1;
    lua_pop(L, 1);
    return 0;
}

static const repl_eval kernel_eval = {docall, push_value_text, push_query};

/* ------------------------------------------------------------------------------------------ */
/* The read-eval-print loop                                                                    */

/* Compiles the chunk s (len bytes) named `name` as if it started at line `line` of its input:
 * line - 1 newlines are read before it, so error messages and tracebacks give the input's line
 * numbers (piped input). Lua cannot start a chunk at another line, and lexing the newlines costs
 * about 10 ns each, so beyond PAD_MAX lines (where a session of many lines would spend seconds
 * on them) the chunk is named "stdin (from line <line>)" instead: its messages read
 * "stdin (from line 12345):2: ...", the chunk's second line. Pushes the function or the error
 * message, as luaL_loadbuffer. */
#define PAD_MAX 10000
typedef struct {
    int pad;       /* newlines still to give */
    const char *s; /* then the chunk */
    size_t len;
} padded_chunk;

static const char *read_padded(lua_State *L, void *data, size_t *size) {
    static char newlines[256];
    padded_chunk *c = data;
    (void)L;
    if (newlines[0] != '\n') memset(newlines, '\n', sizeof newlines);
    if (c->pad > 0) {
        int n = c->pad < (int)sizeof newlines ? c->pad : (int)sizeof newlines;
        c->pad -= n;
        *size = (size_t)n;
        return newlines;
    }
    if (c->s == NULL) return NULL;
    const char *s = c->s;
    *size = c->len;
    c->s = NULL;
    return s;
}

static int load_at(lua_State *L, const char *s, size_t len, const char *name, int line) {
    if (line <= 1) return luaL_loadbuffer(L, s, len, name);
    if (line > PAD_MAX) {
        char far[64];
        snprintf(far, sizeof far, "%s (from line %d)", name, line);
        return luaL_loadbuffer(L, s, len, far);
    }
    padded_chunk c = {line - 1, s, len};
    return lua_load(L, read_padded, &c, name, NULL);
}

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

/* Tries "return <line>;" for the line on the top (line `at` of the input); on success replaces it
 * with the function. */
static int addreturn(lua_State *L, int at) {
    const char *line = lua_tostring(L, -1);
    size_t len;
    const char *retline;
    int status;
    lua_pushliteral(L, "return "); /* concatenated, not formatted: a NUL byte in the line stays */
    lua_pushvalue(L, -2);
    lua_pushliteral(L, ";");
    lua_concat(L, 3);
    retline = lua_tolstring(L, -1, &len);
    status = load_at(L, retline, len, CHUNKNAME, at);
    if (status == LUA_OK) {
        lua_remove(L, -2); /* the modified line */
        repl_saveline(line);
        lua_remove(L, -2); /* the line */
    } else {
        lua_pop(L, 2); /* the error message and the modified line */
    }
    return status;
}

/* Compiles the line on the top (line `at` of the input) as a statement, reading more lines while
 * it is incomplete. Replaces it with the function or the error message; READ_INTERRUPTED drops
 * it; READ_ERROR replaces it with the message of the failed read. */
static int multiline(lua_State *L, int at) {
    for (;;) {
        size_t len;
        const char *chunk = lua_tolstring(L, -1, &len);
        int status = load_at(L, chunk, len, CHUNKNAME, at);
        int r;
        if (!incomplete(L, status)) {
            repl_saveline(chunk);
            lua_remove(L, -2);
            return status;
        }
        r = repl_pushline(L, 0);
        if (r == READ_INTERRUPTED) {
            lua_pop(L, 1);
            return READ_INTERRUPTED;
        }
        if (r == READ_ERROR) { /* the message replaces the chunk */
            lua_remove(L, -2);
            return READ_ERROR;
        }
        if (r == READ_EOF) { /* report the incomplete chunk's error */
            status = load_at(L, chunk, len, CHUNKNAME, at);
            repl_saveline(chunk);
            lua_remove(L, -2);
            return status;
        }
        lua_pushliteral(L, "\n");
        lua_insert(L, -2);
        lua_concat(L, 3);
    }
}

/* Whether the line is a help query: "?" after optional blanks. */
static int is_query(const char *line) {
    while (*line == ' ' || *line == '\t') line++;
    return *line == '?';
}

/* Runs the help query on the top (the line "?name"): the query function of help_chunk with the
 * text after the "?". Pops the line. */
static int run_query(lua_State *L) {
    const char *line = lua_tostring(L, -1);
    const char *q = strchr(line, '?') + 1;
    int status;
    repl_saveline(line);
    if (lua_getfield(L, LUA_REGISTRYINDEX, REG_QUERY) != LUA_TFUNCTION) {
        lua_pop(L, 2);
        l_message(progname, "help is not available");
        return LUA_ERRRUN;
    }
    lua_pushstring(L, q);
    lua_remove(L, -3); /* the line */
    status = docall(L, 1, 2);
    if (status == LUA_OK) { /* the text, or nil and the message: print the one there is */
        size_t len;
        const char *text = luaL_tolstring(L, lua_isnil(L, -2) ? -1 : -2, &len);
        fwrite(text, 1, len, stdout);
        fputc('\n', stdout);
        fflush(stdout);
        lua_pop(L, 3);
    }
    return report(L, status);
}

/* exit and quit, the REPL's globals (as Python's): exit() or quit() leaves the REPL as Ctrl-D
 * does (the loop ends after that chunk: the history is kept, and piped input still exits 1 when a
 * chunk failed); with arguments they are os.exit (exit(3)); the bare name prints how to leave.
 * Defined by run_repl only where the global is nil (not in scripts, -e or the kernel). */
static int g_leave = 0; /* exit() or quit() was called */

static int leave_call(lua_State *L) { /* 1: the exit table itself, then the arguments */
    int n = lua_gettop(L);
    if (n <= 1) {
        g_leave = 1;
        return 0;
    }
    lua_getglobal(L, "os");
    if (lua_type(L, -1) != LUA_TTABLE || lua_getfield(L, -1, "exit") != LUA_TFUNCTION)
        return luaL_error(L, "os.exit is not available");
    for (int i = 2; i <= n; i++) lua_pushvalue(L, i);
    lua_call(L, n - 1, 0);
    return 0;
}

static int leave_text(lua_State *L) {
    lua_pushliteral(L, "exit() or quit() leaves, as Ctrl-D does (os.exit(code) with an exit status)");
    return 1;
}

static void define_leave(lua_State *L) {
    lua_newtable(L);
    lua_createtable(L, 0, 3);
    lua_pushcfunction(L, leave_call);
    lua_setfield(L, -2, "__call");
    lua_pushcfunction(L, leave_text);
    lua_setfield(L, -2, "__tostring");
    lua_pushliteral(L, "roper.exit");
    lua_setfield(L, -2, "__name");
    lua_setmetatable(L, -2);
    for (int i = 0; i < 2; i++) {
        const char *name = i == 0 ? "exit" : "quit";
        if (lua_getglobal(L, name) == LUA_TNIL) {
            lua_pushvalue(L, -2);
            lua_setglobal(L, name);
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
}

/* Reads and evaluates chunks until EOF (or exit()). Returns the number of chunks that failed. */
static int run_repl(lua_State *L) {
    int failures = 0, status = LUA_OK;
    const char *oldprogname = progname;
    progname = NULL;
    if (g_interactive) {
        repl_input_start(L);
        set_sigint(SIGMODE_PROMPT);
    }
    define_leave(L);
    g_leave = 0;
    while (!g_leave) {
        int r, at;
        lua_settop(L, 0);
        r = repl_pushline(L, 1);
        if (r == READ_EOF) break;
        if (r == READ_INTERRUPTED) continue;
        if (r == READ_ERROR) { /* stdin cannot be read: the message is on the top */
            status = READ_ERROR;
            break;
        }
        /* piped input: the chunk's line numbers are the input's; a terminal's lines are each 1 */
        at = g_interactive ? 1 : repl_lines_read();
        if (lua_rawlen(L, -1) == 0) continue; /* empty line */
        if (is_query(lua_tostring(L, -1))) {
            status = run_query(L);
            if (status != LUA_OK) failures++;
            continue;
        }
        status = addreturn(L, at);
        if (status != LUA_OK) {
            status = multiline(L, at);
            if (status == READ_INTERRUPTED) continue;
            if (status == READ_ERROR) break;
        }
        if (status == LUA_OK) status = docall(L, 0, LUA_MULTRET);
        if (status != LUA_OK && g_interactive && g_interrupts == 1) {
            fflush(stdout);
            fputs("\n", stderr); /* after the ^C the terminal echoed */
        }
        if (status == LUA_OK)
            status = print_results(L, lua_gettop(L));
        else
            report(L, status);
        if (status != LUA_OK) failures++;
    }
    if (status == READ_ERROR) { /* as `roper - < folder` says it; the exit status is then 1 */
        l_message(oldprogname, lua_tostring(L, -1));
        failures++;
    }
    lua_settop(L, 0);
    if (g_interactive) {
        set_sigint(SIGMODE_DEFAULT);
        repl_input_stop();
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
            "  -e stat    execute string 'stat' (an expression's values are printed)\n"
            "  -i         enter the REPL after running 'script' and -e\n"
            "  -l mod     require library 'mod' into global 'mod'\n"
            "  -v         show version information (with the OpenBLAS core and threads)\n"
            "  -W         turn warnings on\n"
            "  -h, --help show this help\n"
            "  --         stop handling options\n"
            "  -          run stdin as a script and stop handling options\n"
            "With no script and no -e: a REPL when stdin is a terminal (history in\n"
            "$ROPER_HISTORY, default ~/" HISTORY_FILE "), else every line of stdin is evaluated\n"
            "and printed as in the REPL; the exit status is then 1 if any chunk failed.\n"
            "The module is loaded as the global 'rp'; help(f) prints its documentation,\n"
            "help() lists the topics, help(\"word\") searches them; a line ?name is help(\"name\").\n"
            "  --kernel        (as the only argument) serves the Jupyter kernel's requests on\n"
            "                  stdin (docs/notebooks.md).\n"
            "  --blas-coretype (as the only argument) prints the OPENBLAS_CORETYPE this CPU\n"
            "                  needs, or nothing when it needs none.\n"
            "  --blas-env      (as the only argument) prints NAME=value for each variable roper\n"
            "                  sets before OpenBLAS and OpenMP load (OPENBLAS_CORETYPE,\n"
            "                  OMP_WAIT_POLICY) and that is not set yet, or whose value it\n"
            "                  replaces (an OPENBLAS_CORETYPE naming slower kernels than the\n"
            "                  CPU runs; ROPER_KEEP_CORETYPE=1 keeps it).\n");
}

/* A command line that names an option the parser does not know, or one without its argument or
 * with arguments it takes none of: the message, then the usage, on stderr. */
static void refuse_option(const char *arg) {
    fprintf(stderr, "%s: unrecognized option or missing argument '%s'\n", progname, arg);
    print_usage(stderr);
}

static void print_version(void) {
    printf(PROGNAME " %s  (" LUA_RELEASE ")  OpenBLAS core %s, %d thread%s\n", RP_VERSION,
           rp_blas_core(), rp_blas_threads(), rp_blas_threads() == 1 ? "" : "s");
    printf("  kernels: %s (%s)\n", rp_blas_core(), rp_blas_core_reason());
    printf("  OpenMP wait policy: %s\n", rp_omp_wait_policy());
    printf("  build: %s (-march=%s)\n", rp_build_kind(), rp_build_target());
    if (!rp_tok_available()) printf("  tokenizer: none (built without SentencePiece: NO_SENTENCEPIECE=1)\n");
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

/* -e text: an expression's values are printed as the REPL prints them (roper -e '1 + 1' prints
 * 2); anything else runs as a statement, as lua5.4 -e runs it. */
static int doexpr(lua_State *L, const char *s) {
    const char *name = "=(command line)";
    const char *ret = lua_pushfstring(L, "return %s;", s);
    int status = luaL_loadbuffer(L, ret, strlen(ret), name);
    lua_remove(L, -2); /* the text with return */
    if (status != LUA_OK) {
        lua_pop(L, 1); /* not an expression */
        return dostring(L, s, name);
    }
    int base = lua_gettop(L) - 1; /* below the function */
    status = docall(L, 0, LUA_MULTRET);
    if (status != LUA_OK) return report(L, status);
    return print_results(L, lua_gettop(L) - base);
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
            status = option == 'e' ? doexpr(L, extra) : dolibrary(L, extra);
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

/* `roper scripts/NAME.lua` when the current folder has no such file: the installed script,
 * <the binary's folder>/../share/roper/scripts/NAME.lua (where `make install` puts it), so the
 * commands that the docs and the scripts print work from any folder. Returns fname itself when
 * there is no such script (the error then names what the user typed). */
static const char *installed_script(const char *fname) {
    static char found[PATH_MAX];
    char exe[PATH_MAX], path[2 * PATH_MAX];
    ssize_t n;
    char *slash;
    if (strncmp(fname, "scripts/", 8) != 0 || access(fname, F_OK) == 0) return fname;
    n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return fname;
    exe[n] = '\0';
    slash = strrchr(exe, '/');
    if (slash == NULL) return fname;
    *slash = '\0';
    snprintf(path, sizeof path, "%s/../share/" PROGNAME "/%s", exe, fname);
    if (realpath(path, found) == NULL || access(found, R_OK) != 0) return fname;
    return found;
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

/* The global help(f): prints rp.help(f), or the message when there is no help. Returns the query
 * function of "?name": a name path that has a value (?rp.zeros, ?t.narrow, ?t:narrow, ?rp.rope)
 * gives the help of that value when it has one, anything else is looked up as text. The query
 * returns the help text, or nil and why there is none. */
static const char help_chunk[] =
    "local rp = ...\n"
    "local function lookup(...)\n"
    "  if type(rp) ~= 'table' or type(rp.help) ~= 'function' then\n"
    "    return nil, 'rp.help is not available'\n"
    "  end\n"
    "  local ok, text, msg = pcall(rp.help, ...)\n"
    "  if not ok then return nil, tostring(text) end\n"
    "  return text, msg\n"
    "end\n"
    "local function show(text, msg)\n"
    "  if text ~= nil then print(text) else print(msg) end\n"
    "end\n"
    "function help(...) show(lookup(...)) end\n"
    "local function value_of(path)\n"
    "  if not path:match('^[%a_][%w_]*$') and not path:match('^[%a_][%w_]*[.:][%a_][%w_.:]*$')\n"
    "     or path:find('[.:][.:]') or path:find('[.:]$') then return nil end\n"
    "  local cur = _ENV\n"
    "  for part in path:gmatch('[^.:]+') do\n"
    "    local tp = type(cur)\n"
    "    if tp ~= 'table' and tp ~= 'userdata' then return nil end\n"
    "    local ok, v = pcall(function() return cur[part] end)\n"
    "    if not ok then return nil end\n"
    "    cur = v\n"
    "  end\n"
    "  return cur\n"
    "end\n"
    "return function(q)\n"
    "  q = q:match('^%s*(.-)%s*$')\n"
    "  if q == '' then return lookup() end\n"
    "  local v = value_of(q)\n"
    "  if v ~= nil and type(v) ~= 'string' then\n"
    "    local text = lookup(v)\n"
    "    if text ~= nil then return text end\n"
    "  end\n"
    "  return lookup(q)\n"
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
    lua_getfield(L, -1, "inspect");
    lua_setfield(L, LUA_REGISTRYINDEX, REG_INSPECT);
    status = luaL_loadbuffer(L, help_chunk, sizeof help_chunk - 1, "=(roper help)");
    if (status != LUA_OK) return report(L, status);
    lua_insert(L, -2);
    status = docall(L, 1, 1);
    if (status == LUA_OK) lua_setfield(L, LUA_REGISTRYINDEX, REG_QUERY);
    return report(L, status);
}

/* Everything runs here, in protected mode; pushes true on success. */
static int pmain(lua_State *L) {
    int argc = (int)lua_tointeger(L, 1);
    char **argv = (char **)lua_touserdata(L, 2);
    int script = 0;
    int kernel = argc == 2 && strcmp(argv[1], "--kernel") == 0;
    int args = kernel ? 0 : collectargs(argv, &script);
    int failures;
    luaL_checkversion(L);
    if (kernel) {
        luaL_openlibs(L);
        createargtable(L, argv, 1, 1);
        lua_gc(L, LUA_GCRESTART);
        lua_gc(L, LUA_GCGEN, 0, 0);
        g_kernel = 1;
        set_sigint(SIGMODE_IGNORE);
        if (load_roper(L) != LUA_OK) return 0;
        lua_pushboolean(L, repl_kernel(L, &kernel_eval) == 0);
        return 1;
    }
    if (argv[0] && argv[0][0]) progname = argv[0];
    if (args == HAS_ERROR) {
        refuse_option(argv[script]);
        return 0;
    }
    if (args & HAS_H) {
        print_usage(stdout);
        lua_pushboolean(L, 1);
        return 1;
    }
    if (args & HAS_V) print_version();
    if (script < argc) argv[script] = (char *)installed_script(argv[script]);
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
            printf(PROGNAME " %s (" LUA_RELEASE ", OpenBLAS %s x%d)\n"
                   "help() lists the topics, ?name is help on name, Ctrl-D or exit() leaves\n",
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
    char why[192];
    if (!rp_build_cpu_ok(why, sizeof why)) { /* the portable build on a CPU below x86-64-v3 */
        fprintf(stderr, PROGNAME ": %s\n", why);
        return EXIT_FAILURE;
    }
    if (argc >= 2 && (strcmp(argv[1], "--blas-env") == 0 || strcmp(argv[1], "--blas-coretype") == 0)) {
        int core_only = strcmp(argv[1], "--blas-coretype") == 0;
        if (argc > 2) { /* the only argument, as --kernel */
            if (argv[0][0]) progname = argv[0];
            refuse_option(argv[1]);
            return EXIT_FAILURE;
        }
        rp_blas_drop_coretype(argv); /* to read OpenBLAS's own choice */
        const char *names[RP_BLAS_ENV_MAX], *values[RP_BLAS_ENV_MAX];
        int n = rp_blas_wanted_env(names, values);
        for (int i = 0; i < n; i++) {
            if (!core_only) printf("%s=%s\n", names[i], values[i]);
            else if (strcmp(names[i], "OPENBLAS_CORETYPE") == 0) printf("%s\n", values[i]);
        }
        return EXIT_SUCCESS;
    }
    /* re-executes itself with OPENBLAS_CORETYPE and OMP_WAIT_POLICY when needed */
    rp_blas_fix_env(argv);
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
    /* under mpirun: a clean end shuts MPI down on every rank; a failed script ends the whole job,
     * since the other ranks may be waiting for this one in a collective */
    if (rp_dist_active()) {
        if (result && status == LUA_OK) rp_dist_finalize();
        else rp_dist_abort(EXIT_FAILURE);
    }
    lua_close(L);
    globalL = NULL;
    return (result && status == LUA_OK) ? EXIT_SUCCESS : EXIT_FAILURE;
}
