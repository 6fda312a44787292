/* Task generators: the algorithmic tasks of the RoPER write-up and character-level language
 * modelling, behind one interface (rules: docs/tasks.md, which names labml's originals).
 *
 * Every task has a character vocabulary (token id = index into it), packs training sequences of
 * seq_len + 1 tokens that start at a problem boundary (inputs = the first seq_len, targets = the
 * last seq_len, -1 where a position is not scored), and, where the metric is accuracy, draws
 * evaluation problems (a question to prompt with and the exact expected answer) and checks a
 * generated continuation. The same rng state gives the same data on every platform.
 */
#ifndef RP_TASK_H
#define RP_TASK_H

#include <stddef.h>
#include <stdint.h>

#include "rng.h"
#include "status.h"

typedef enum {
    RP_TASK_ADDITION = 0,   /* ?d=A+B; <steps> and d==S#   or labml's  ?x=A+B; <steps> x==S\n */
    RP_TASK_SUBSTR_INDEX,   /* ?s='<13 letters>'; s[i:]=='<suffix>'# */
    RP_TASK_SUBSTR_PREFIX,  /* labml copy_repeat: acgt and >, 16-char copies, scored chars 2..16 */
    RP_TASK_TEXT,           /* character-level language modelling on a UTF-8 file */
    RP_TASK_GRID_OFFSET,    /* a rows x cols grid with a marked cell *, then ?+1-2=<symbol># */
    RP_TASK_LM              /* language modelling on token ids (train/valid/test .npy files) */
} rp_task_kind;

/* The kinds' names, in rp_task_kind order, NULL-terminated: "addition", "substring_index",
 * "substring_prefix", "text", "grid_offset", "lm" (rp.tasks.<kind>, messages). */
extern const char *const rp_task_kind_names[];

typedef enum { RP_ADD_WRITEUP = 0, RP_ADD_LABML = 1 } rp_add_format;

/* The options of a task (what rp.tasks.<kind> reads, task:config() returns). Each field but kind
 * is a row of the task table below, which gives its option name, kinds, default, range and help;
 * the comments here say what the field means. */
typedef struct rp_task_cfg {
    rp_task_kind kind;
    int64_t seq_len;          /* T of the packed sequences */
    /* addition */
    rp_add_format format;     /* writeup or labml */
    int64_t max_digits;       /* the longest operand (digits) */
    int labml_digit_quirk;    /* 1: labml's randrange(1, 11) digits (a digit may be 10 and carry);
                                 the option quirk */
    /* substring by index */
    int64_t str_len;          /* letters per string */
    /* substring by prefix */
    int64_t substr_len;       /* the copy length */
    int64_t rnd_len;          /* filler lengths 1 .. rnd_len - 1 */
    /* text */
    const char *path;         /* UTF-8 file (or a directory: every regular file in it, sorted) */
    double valid_fraction;    /* the last share of the text is the validation split */
    int64_t max_bytes;        /* the largest corpus (bytes, over all files of a folder) */
    /* grid offset (docs/tasks.md) */
    int64_t rows, cols;       /* the grid */
    int64_t alphabet;         /* the symbols are the first `alphabet` letters a.. */
    int64_t max_offset;       /* |dr|, |dc| <= max_offset */
    /* lm (docs/language_model.md): path is a folder with train.npy, valid.npy and test.npy, 1-D
     * arrays of token ids of an integer dtype, every id in 0..vocab_size-1 */
    int64_t vocab_size;       /* the tokenizer's vocabulary */
} rp_task_cfg;

/* The splits of an lm task (and of text: train, valid). */
typedef enum { RP_SPLIT_TRAIN = 0, RP_SPLIT_VALID = 1, RP_SPLIT_TEST = 2 } rp_task_split;

/* The largest vocab_size of an lm task: token ids travel as float32 (exact up to 2^24). */
#define RP_TASK_LM_MAX_VOCAB ((int64_t)1 << 24)

/* The largest rows and cols of a grid_offset task, and its largest max_offset. */
#define RP_TASK_GRID_MAX_SIDE 32
#define RP_TASK_GRID_MAX_OFFSET 9

/* Grid offset: the rows the query takes, ceil(8 / cols) (its 8 tokens ?, sign, digit, sign,
 * digit, =, answer, #, padded with '.' to whole rows); the length of one problem, (rows + query
 * rows) * cols tokens (the least seq_len); and the largest max_offset, min(9, rows - 1, cols -
 * 1) (9: RP_TASK_GRID_MAX_OFFSET). Of c's rows and cols only, unchecked (cols >= 1). */
int64_t rp_task_grid_query_rows(const rp_task_cfg *c);
int64_t rp_task_grid_problem_len(const rp_task_cfg *c);
int64_t rp_task_grid_max_offset(const rp_task_cfg *c);

/* The default corpus size limit of text tasks (max_bytes). */
#define RP_TASK_DEFAULT_MAX_BYTES ((int64_t)256 << 20)

/* The longest addition operand (max_digits, and n_digits of rp_task_problem). */
#define RP_TASK_MAX_DIGITS 18

/* ---- the task table: one row per option ----
 * The one place that gives each option of a task its name, the kinds that read it, its type,
 * field, default, range and help (task_keys.c's rp_task_keys). From the rows come
 * rp_task_cfg_default, the checks of rp_task_new (rp_task_cfg_check), the options that
 * rp.tasks.<kind> knows and reads and task:config() (bindings/tasks.c), and rp.experiment's task
 * keys with scripts/train.lua's --<key> (internals.task_keys, rows with RP_TASK_KEY_RUN). A new
 * option is a field of rp_task_cfg and its row (docs/architecture.md, "Adding a task key"). The
 * rows of one kind are read in row order, so a default or a bound may depend on the rows before
 * it (def_of, hi_of, rule). Every message names the option as Lua does ("option 'alphabet' must
 * be in 2..26, got 27"). */
typedef enum {
    RP_TASK_KEY_INT,  /* int64_t in lo..hi (hi may be INFINITY: no upper end) */
    RP_TASK_KEY_NUM,  /* double in [lo, hi] ([lo, hi) with RP_TASK_KEY_HI_OPEN) */
    RP_TASK_KEY_ENUM, /* an enum stored as an int: a value of names */
    RP_TASK_KEY_BOOL, /* int 0 or 1 */
    RP_TASK_KEY_PATH, /* const char *, nonempty: a file or a folder (no default) */
} rp_task_key_type;

/* The bit of a kind in a row's kinds. */
#define RP_TASK_BIT(kind) (1u << (unsigned)(kind))

enum {
    RP_TASK_KEY_HI_OPEN = 1,  /* RP_TASK_KEY_NUM: hi itself is outside the range */
    RP_TASK_KEY_REQUIRED = 2, /* no default: rp.tasks.<kind> needs the option */
    RP_TASK_KEY_RUN = 4,      /* a key of rp.experiment (and scripts/train.lua's --<name>) */
};

typedef struct rp_task_key {
    const char *name;         /* the option's name: rp.tasks.<kind>, task:config(), messages */
    unsigned kinds;           /* RP_TASK_BIT of every kind that reads it */
    rp_task_key_type type;
    size_t offset;            /* of the field in rp_task_cfg */
    double def;               /* the default (an enum's value, a bool's 0 or 1) */
    double lo, hi;            /* RP_TASK_KEY_INT and _NUM: the range */
    int flags;                /* RP_TASK_KEY_* */
    const char *const *names; /* RP_TASK_KEY_ENUM: the names in value order, NULL-terminated */
    /* the default from the rows before it, given def, or NULL (def) */
    double (*def_of)(const rp_task_cfg *c, double def);
    /* the upper end from the rows before it, or NULL (hi) */
    int64_t (*hi_of)(const rp_task_cfg *c);
    /* a rule with the rows before it, checked after the range, or NULL: RP_OK or RP_ERR_ARG
     * with its message */
    rp_status (*rule)(const rp_task_cfg *c);
    const char *note;         /* in the range message, after the range */
    const char *what;         /* RP_TASK_KEY_REQUIRED: what the value is, for the message */
    const char *help;         /* one line: rp.experiment.keys(), the scripts' --help */
} rp_task_key;

extern const rp_task_key rp_task_keys[];
extern const int rp_task_nkeys;

/* "writeup", "labml", NULL: the format row's names. */
extern const char *const rp_add_format_names[];

/* Whether row k is read by tasks of kind (1) or not (0). */
int rp_task_key_applies(const rp_task_key *k, rp_task_kind kind);
/* The row of kind named name, or NULL. */
const rp_task_key *rp_task_key_of(const char *name, rp_task_kind kind);
/* A field as a double and set from one (RP_TASK_KEY_NUM), and the _int pair for the other types
 * but PATH (exact for every int64_t). */
double rp_task_cfg_get(const rp_task_cfg *c, const rp_task_key *k);
void rp_task_cfg_set(rp_task_cfg *c, const rp_task_key *k, double v);
int64_t rp_task_cfg_get_int(const rp_task_cfg *c, const rp_task_key *k);
void rp_task_cfg_set_int(rp_task_cfg *c, const rp_task_key *k, int64_t v);
/* Sets row k's field of c to its default, given the rows before it (def_of); a PATH to NULL. */
void rp_task_cfg_set_default(rp_task_cfg *c, const rp_task_key *k);
/* Checks row k's field of c against its range (hi_of) and then its rule: RP_ERR_ARG ("option
 * 'alphabet' must be in 2..26, got 27", "option 'max_bytes' must be >= 1, got 0", "option
 * 'path' (a UTF-8 text file) is required"). */
rp_status rp_task_cfg_check_key(const rp_task_cfg *c, const rp_task_key *k);
/* Records and returns RP_ERR_ARG "option 'vocab_size' (the tokenizer's) is required" for a
 * required row k. */
rp_status rp_task_key_missing(const rp_task_key *k);

/* Defaults for a kind: every row's default, in row order (seq_len 256; addition writeup 8 digits;
 * path NULL; vocab_size 0, which lm tasks must set). */
rp_task_cfg rp_task_cfg_default(rp_task_kind kind);
/* Sets c's addition format and the defaults that follow from it: writeup 8 digits without the
 * quirk, labml 7 digits with labml's 0..10 digit quirk (make_int in labml's
 * arithmetic_dataset.py). Overwrites format, max_digits and labml_digit_quirk only. */
void rp_task_cfg_addition_format(rp_task_cfg *c, rp_add_format format);
/* Checks c: its kind, then every row of its kind in row order (rp_task_cfg_check_key). Fields of
 * other kinds are ignored. */
rp_status rp_task_cfg_check(const rp_task_cfg *c);

typedef struct rp_task rp_task;

/* A new task. RP_ERR_ARG for a bad config (rp_task_cfg_check). Text tasks: RP_ERR_IO ("path:
 * reason") when the corpus cannot be used: missing or unreadable; not a regular file or a folder
 * (FIFOs, devices and sockets are refused at once, never opened in a way that blocks); a folder
 * without regular files; more than max_bytes bytes; empty; invalid UTF-8; or a split too short
 * for one window of seq_len + 1 characters (the training split, and the validation split when
 * valid_fraction > 0), so that a run fails here and not after its training. */
rp_task *rp_task_new(const rp_task_cfg *cfg);
void rp_task_free(rp_task *t);
const rp_task_cfg *rp_task_config(const rp_task *t);

/* Text tasks: the characters (tokens) of the training split and of the validation split (0
 * without one). A batch of a split needs at least seq_len + 1 of them; checking before a run
 * starts tells a corpus too small for it. RP_ERR_ARG for the other kinds (their problems are
 * generated without end). */
rp_status rp_task_split_sizes(const rp_task *t, int64_t *train, int64_t *valid);

/* The tokens of split s of a text task (train, valid) or an lm task (train, valid, test) into
 * *n. RP_ERR_ARG for the other kinds or splits. */
rp_status rp_task_split_len(const rp_task *t, int split, int64_t *n);

/* Evaluation windows of an lm task (deterministic; docs/language_model.md): the split's tokens
 * s[0 .. n) are cut into W = ceil((n - 1) / T) windows of T + 1 tokens (T = seq_len), window k
 * starting at k * T; the last one, when it would run past the end, starts at n - T - 1 instead,
 * with the targets an earlier window scored set to -1. So every token but the first is a target
 * exactly once, at position (its index - 1) mod T of its window but in the shifted last window.
 * Writes the rows of windows first .. first + B - 1 that exist (inputs, targets: B x T, as
 * rp_task_batch) and their count into *rows (0 when first >= W), and W into *windows. RP_ERR_ARG
 * for other kinds, a bad split or a split shorter than T + 1 tokens. */
rp_status rp_task_windows(const rp_task *t, int split, int64_t first, int64_t B, int32_t *inputs,
                          int32_t *targets, int64_t *rows, int64_t *windows);

/* The vocabulary: n code points (Unicode scalar values; ASCII for the algorithmic tasks), token
 * id i <-> code point vocab[i]. The algorithmic tasks list their characters in a fixed order
 * documented in docs/tasks.md; text tasks sort the code points of the whole file. */
const int32_t *rp_task_vocab(const rp_task *t, int64_t *n);

/* (An lm task has no code points: its vocabulary is its tokenizer's; n = vocab_size, NULL is
 * returned, and encode and decode give RP_ERR_ARG.) */

/* Text <-> tokens. encode: RP_ERR_ARG naming the first character outside the vocabulary (and its
 * byte offset), or invalid UTF-8; writes at most cap tokens, *n = the count needed. decode: writes
 * UTF-8 into out (cap bytes, NUL-terminated when it fits), *len = bytes needed (without NUL). */
rp_status rp_task_encode(const rp_task *t, const char *text, size_t text_len, int32_t *out,
                         int64_t cap, int64_t *n);
rp_status rp_task_decode(const rp_task *t, const int32_t *tokens, int64_t n, char *out, size_t cap,
                         size_t *len);

/* B training sequences: inputs (B, seq_len) and targets (B, seq_len), targets[b][j] = the token
 * after inputs[b][j], or -1 where it is not scored (substring by prefix scores only characters
 * 2..16 of each copy, grid offset only the answer symbol; the others score everything).
 * Algorithmic tasks draw fresh problems from rng and start every sequence at a problem boundary
 * (the last problem is cut off); text tasks take windows at uniform random offsets of the train
 * (split 0) or validation (split 1) part, lm tasks of the train, valid or test (2) split. */
rp_status rp_task_batch(rp_task *t, rp_rng *rng, int64_t B, int split, int32_t *inputs,
                        int32_t *targets);

/* One evaluation problem (tasks with an accuracy metric: addition, substring by index, grid
 * offset): question = the prompt text (for addition "?d=A+B;" or "?x=A+B;"; for substring by index
 * "?s='...'; s[i:]=="; for grid offset the rows * cols grid symbols then "?+1-2="), answer = the
 * exact expected answer text ("S" for addition, "'suffix'" for substring by index, one letter for
 * grid offset). n_digits > 0 fixes the operand digit count (addition only: both operands
 * have exactly n_digits digits, for length generalisation); 0 draws from the training
 * distribution. RP_ERR_ARG for tasks without problems or a too small buffer. */
rp_status rp_task_problem(rp_task *t, rp_rng *rng, int64_t n_digits, char *question, size_t qcap,
                          char *answer, size_t acap);

/* Whether a generated continuation of `question` answers it exactly: the continuation is cut at
 * the task's terminator ('#', or '\n' for labml), the answer extracted (addition: the text after
 * the last "d==" / "x=="; substring: the whole text before the terminator) and compared with the
 * true answer recomputed from the question. Returns 1 (correct), 0 (wrong or no terminator).
 * Grid offset: the text before the first '#' (the whole continuation when it has none: its
 * training scores only the answer symbol, never the '#') must be exactly the symbol at the
 * question's offset from its marked cell. */
int rp_task_check(const rp_task *t, const char *question, const char *continuation);

/* Grid offset tasks: the 2-D layout positions of the first n tokens of a packed training row or
 * of a problem's question (both start at a problem boundary): rc[2 * i] = i / cols (row),
 * rc[2 * i + 1] = i % cols (column), for i in 0..n-1. Every problem fills whole layout rows, so
 * the rows keep counting across the problems of a row (problem k starts at row k * (rows +
 * query rows), column 0). Overwrites rc (2 * n entries). RP_ERR_ARG for the other kinds or a
 * negative n. */
rp_status rp_task_positions2d(const rp_task *t, int64_t n, int32_t *rc);

#endif
