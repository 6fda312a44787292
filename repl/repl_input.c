/* The REPL's input (build/roper, see repl.c): reading lines through GNU readline's callback
 * interface or getline(), the history file, and the completion of globals, table fields and
 * methods. repl.h is its interface; repl.c (the main program and the evaluation loop) uses it and
 * nothing here uses repl.c.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>

#include <readline/history.h>
#include <readline/readline.h>

#include "repl.h"

#define PROMPT1 "roper> "
#define PROMPT2 "   >> "
#define HISTORY_MAX_LINES 5000
/* Where a word to complete starts: after the last of these (readline's word breaks, and the
 * kernel's: repl_word_start). */
static char WORD_BREAKS[] = " \t\n\"\\'`><=;+-*/%^~#&|{}()[],?";

static lua_State *g_L = NULL;  /* the REPL's state, for the completions */
static int g_interactive = 0;  /* stdin is a terminal and the REPL runs (repl_input_start) */

/* ------------------------------------------------------------------------------------------ */
/* Signals at the prompt                                                                       */

static volatile sig_atomic_t g_sigint_pending = 0; /* Ctrl-C at the prompt */
static volatile sig_atomic_t g_sigwinch = 0;

void repl_on_sigint_prompt(int sig) {
    (void)sig;
    g_sigint_pending = 1;
}

static void on_sigwinch(int sig) {
    (void)sig;
    g_sigwinch = 1;
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

void repl_saveline(const char *line) {
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

/* Fills g_compl with the completions of text: sorted, without duplicates (a key in a table and in
 * its methods). Returns 0, or -1 (g_compl empty) when collecting them failed. */
static int complete_word(lua_State *L, const char *text) {
    int top = lua_gettop(L);
    completion_clear();
    g_compl.text = text;
    lua_pushcfunction(L, collect_completions);
    lua_pushlightuserdata(L, &g_compl);
    if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
        lua_settop(L, top);
        completion_clear();
        return -1;
    }
    lua_settop(L, top);
    if (g_compl.n > 1) {
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
    return 0;
}

static char *completion_generator(const char *text, int state) {
    if (state == 0 && complete_word(g_L, text) != 0) return NULL;
    if (g_compl_next < g_compl.n) return g_compl.items[g_compl_next++]; /* readline frees it */
    completion_clear();
    return NULL;
}

size_t repl_word_start(const char *s, size_t at) {
    while (at > 0 && strchr(WORD_BREAKS, s[at - 1]) == NULL) at--;
    return at;
}

size_t repl_word_end(const char *s, size_t n, size_t at) {
    while (at < n && strchr(WORD_BREAKS, s[at]) == NULL) at++;
    return at;
}

int repl_complete(lua_State *L, const char *text, void (*each)(const char *item, void *ud),
                  void *ud) {
    size_t n;
    if (complete_word(L, text) != 0) return -1;
    n = g_compl.n;
    for (size_t i = 0; i < n; i++) each(g_compl.items[i], ud);
    completion_clear();
    return (int)(n > INT_MAX ? INT_MAX : n);
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
    rl_basic_word_break_characters = WORD_BREAKS;
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

int repl_columns(void) {
    const char *env = getenv("COLUMNS");
    if (g_interactive) {
        int rows = 0, cols = 0;
        rl_get_screen_size(&rows, &cols);
        if (cols >= 20) return cols;
    }
    if (env != NULL) {
        long c = strtol(env, NULL, 10);
        if (c >= 20 && c <= 10000) return (int)c;
    }
    return 80;
}

static int g_lines_read = 0; /* lines read from stdin by getline (piped input) */

int repl_lines_read(void) { return g_lines_read; }

int repl_pushline(lua_State *L, int firstline) {
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
            int err = ferror(stdin) ? errno : 0; /* getline fails at the end and on an error */
            free(line);
            if (err == 0) return READ_EOF;
            lua_pushfstring(L, "cannot read stdin: %s", strerror(err));
            return READ_ERROR;
        }
        len = (size_t)n;
        if (len > 0 && line[len - 1] == '\n') line[--len] = '\0';
        if (g_lines_read < INT_MAX) g_lines_read++;
    }
    lua_pushlstring(L, line, len);
    free(line);
    return READ_LINE;
}

/* ------------------------------------------------------------------------------------------ */
/* Start and end                                                                               */

void repl_input_start(lua_State *L) {
    g_L = L;
    g_interactive = 1;
    readline_setup();
    history_start();
    atexit(history_save);
}

void repl_input_stop(void) {
    history_save();
    completion_clear();
    rl_callback_handler_remove();
    g_interactive = 0;
    g_L = NULL;
}
