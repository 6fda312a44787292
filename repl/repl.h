/* The REPL's input (repl_input.c) as the REPL program (repl.c) uses it: reading a line (readline
 * on a terminal, getline otherwise), the history, the SIGINT handler of the prompt, the
 * completion; and what repl.c and the kernel mode (repl_kernel.c) give each other. Not part of
 * the module: the Makefile builds repl/ (repl.c, repl_input.c) into build/roper only, and the
 * module (bindings/) never includes this header (tests/lua/layering_spec.lua).
 */
#ifndef ROPER_REPL_H
#define ROPER_REPL_H

#include <lua.h>

#define PROGNAME "roper"
#define HISTORY_FILE ".roper_history" /* in $HOME, unless $ROPER_HISTORY is set */

/* What repl_pushline read. */
enum { READ_LINE = 1, READ_EOF = 0, READ_INTERRUPTED = -1, READ_ERROR = -2 };

/* The head of the message when showing a result fails (its __tostring raised): the error, with
 * its traceback, follows it (the REPL, -e and the kernel). */
#define PRINT_ERROR_HEAD "error printing the results: "

/* On a terminal, before the first line: readline set up (completion on L's globals, SIGWINCH),
 * the history file read, its saving registered with atexit. */
void repl_input_start(lua_State *L);
/* After the last line: the history saved, the completions and readline's handler cleared. */
void repl_input_stop(void);

/* Pushes the next input line (without its newline): through readline between repl_input_start and
 * repl_input_stop (prompt "roper> " for the first line of a chunk, "   >> " after), else from
 * stdin with getline(). Returns READ_LINE, READ_EOF, READ_INTERRUPTED (Ctrl-C at the prompt;
 * nothing pushed then or at EOF) or READ_ERROR (stdin cannot be read, e.g. it is a folder: the
 * message "cannot read stdin: <reason>" pushed instead of a line). */
int repl_pushline(lua_State *L, int firstline);
/* How many lines repl_pushline has read from piped stdin (getline) so far: the number of the line
 * it read last. */
int repl_lines_read(void);
/* The width the REPL prints to: the terminal's columns (readline's idea of them) in a terminal
 * session, else $COLUMNS when it is a number from 20 to 10000, else 80. */
int repl_columns(void);

/* The completions of the word `text` (a global, a keyword, rp.rope.ro, x:na): what the REPL's
 * Tab offers, each passed to each() in sorted order (the whole word: "rp.rope.rotate"). Returns
 * how many, or -1 when collecting them failed. L is the session's state. */
int repl_complete(lua_State *L, const char *text, void (*each)(const char *item, void *ud),
                  void *ud);
/* Where the word that ends at byte `at` of s starts (after the last of the REPL's word breaks:
 * blanks, operators, brackets, quotes, commas, "?"). */
size_t repl_word_start(const char *s, size_t at);
/* Where the word that starts at or before byte `at` of s[0 .. n) ends: the first word break at or
 * after `at`, else n. Linear in the bytes it passes. */
size_t repl_word_end(const char *s, size_t n, size_t at);

/* Adds a chunk to the history (terminal sessions only; no empty lines, no consecutive repeats). */
void repl_saveline(const char *line);

/* The SIGINT handler while the prompt waits: the next repl_pushline returns READ_INTERRUPTED. */
void repl_on_sigint_prompt(int sig);

/* What repl.c gives the kernel mode (repl_kernel.c, roper --kernel), as function pointers: the
 * files call each other one way only (tests/lua/layering_spec.lua). */
typedef struct {
    /* Calls the function below its narg arguments as the REPL calls an input: with a traceback
     * added to an error, and SIGINT raising "interrupted!" in Lua meanwhile. */
    int (*docall)(lua_State *L, int narg, int nres);
    /* Pushes the text the REPL prints for the value at index i (a table through rp.inspect). */
    void (*push_value_text)(lua_State *L, int i);
    /* Pushes the function of "?name" (the name's help text, or nil and why there is none) and
     * returns 1, or pushes nothing and returns 0 when it is missing. */
    int (*push_query)(lua_State *L);
} repl_eval;

/* roper --kernel (repl_kernel.c): serves requests until stdin ends; 0, or 1 when the reply pipe
 * is gone or $ROPER_KERNEL_FD is malformed. */
int repl_kernel(lua_State *L, const repl_eval *ev);

#endif
