/* The task table (task.h): one row per option of a task, and what comes from the rows: the
 * defaults, the range checks and the rules between options. Calls go one way: task.c ->
 * task_keys.c -> grid.c (the grid's sizes). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "field.h"
#include "task_impl.h"

const char *const rp_add_format_names[] = {"writeup", "labml", NULL};

/* Enum fields are read and written as ints. */
_Static_assert(sizeof(rp_add_format) == sizeof(int), "the format is an int");

/* ---- the defaults and bounds that follow from the rows before them ---- */

/* addition: labml's own operand length and digit quirk */
static double max_digits_def(const rp_task_cfg *c, double def)
{
    return c->format == RP_ADD_LABML ? 7 : def;
}

static double quirk_def(const rp_task_cfg *c, double def)
{
    return c->format == RP_ADD_LABML ? 1 : def;
}

/* grid offset: max_offset's default is capped at its bound; seq_len's is raised to one problem */
static double max_offset_def(const rp_task_cfg *c, double def)
{
    double hi = (double)rp_task_grid_max_offset(c);
    return def < hi ? def : hi;
}

static double seq_len_def(const rp_task_cfg *c, double def)
{
    if (c->kind != RP_TASK_GRID_OFFSET) return def;
    double len = (double)rp_task_grid_problem_len(c);
    return def > len ? def : len;
}

/* grid offset: every row holds a whole problem and its answer */
static rp_status seq_len_rule(const rp_task_cfg *c)
{
    if (c->kind != RP_TASK_GRID_OFFSET) return RP_OK;
    int64_t len = rp_task_grid_problem_len(c);
    if (c->seq_len < len)
        return rp_error(RP_ERR_ARG,
                        "option 'seq_len' must be >= %lld, the length of one problem ((rows + "
                        "%lld) * cols), got %lld", (long long)len,
                        (long long)rp_task_grid_query_rows(c), (long long)c->seq_len);
    return RP_OK;
}

#define F(field) offsetof(rp_task_cfg, field)
#define KIND(k) RP_TASK_BIT(RP_TASK_##k)
#define ALL_KINDS                                                                                 \
    (KIND(ADDITION) | KIND(SUBSTR_INDEX) | KIND(SUBSTR_PREFIX) | KIND(TEXT) | KIND(GRID_OFFSET) | \
     KIND(LM))

/* The order is the order of reading (a default or bound may use the rows before it) and of the
 * options listed in messages; rp.experiment offers the RUN rows in this order. */
const rp_task_key rp_task_keys[] = {
    {.name = "format", .kinds = KIND(ADDITION), .type = RP_TASK_KEY_ENUM, .offset = F(format),
     .def = RP_ADD_WRITEUP, .names = rp_add_format_names, .flags = RP_TASK_KEY_RUN,
     .help = "problem format"},
    {.name = "max_digits", .kinds = KIND(ADDITION), .type = RP_TASK_KEY_INT,
     .offset = F(max_digits), .def = 8, .lo = 1, .hi = RP_TASK_MAX_DIGITS, .def_of = max_digits_def,
     .flags = RP_TASK_KEY_RUN, .help = "largest operand length (8 for writeup, 7 for labml)"},
    {.name = "quirk", .kinds = KIND(ADDITION), .type = RP_TASK_KEY_BOOL,
     .offset = F(labml_digit_quirk), .def = 0, .def_of = quirk_def, .flags = RP_TASK_KEY_RUN,
     .help = "labml's digit quirk (on for labml)"},
    {.name = "str_len", .kinds = KIND(SUBSTR_INDEX), .type = RP_TASK_KEY_INT, .offset = F(str_len),
     .def = 13, .lo = 1, .hi = RP_TASK_MAX_STR_LEN, .flags = RP_TASK_KEY_RUN,
     .help = "letters per string"},
    {.name = "substr_len", .kinds = KIND(SUBSTR_PREFIX), .type = RP_TASK_KEY_INT,
     .offset = F(substr_len), .def = 16, .lo = 2, .hi = RP_TASK_MAX_PIECE,
     .flags = RP_TASK_KEY_RUN, .help = "copy length"},
    {.name = "rnd_len", .kinds = KIND(SUBSTR_PREFIX), .type = RP_TASK_KEY_INT, .offset = F(rnd_len),
     .def = 12, .lo = 2, .hi = RP_TASK_MAX_PIECE, .flags = RP_TASK_KEY_RUN,
     .help = "filler lengths 1..rnd_len-1"},
    {.name = "path", .kinds = KIND(TEXT), .type = RP_TASK_KEY_PATH, .offset = F(path),
     .flags = RP_TASK_KEY_REQUIRED, .what = "a UTF-8 text file",
     .help = "a UTF-8 file or a folder of them"},
    {.name = "path", .kinds = KIND(LM), .type = RP_TASK_KEY_PATH, .offset = F(path),
     .flags = RP_TASK_KEY_REQUIRED, .what = "a folder of token ids",
     .help = "a folder of token ids (train.npy, valid.npy, test.npy)"},
    {.name = "valid_fraction", .kinds = KIND(TEXT), .type = RP_TASK_KEY_NUM,
     .offset = F(valid_fraction), .def = 0.1, .lo = 0, .hi = 1,
     .flags = RP_TASK_KEY_HI_OPEN | RP_TASK_KEY_RUN, .help = "share kept for validation"},
    {.name = "vocab_size", .kinds = KIND(LM), .type = RP_TASK_KEY_INT, .offset = F(vocab_size),
     .def = 0, .lo = 1, .hi = (double)RP_TASK_LM_MAX_VOCAB, .flags = RP_TASK_KEY_REQUIRED,
     .what = "the tokenizer's", .help = "the vocabulary of the token ids"},
    {.name = "rows", .kinds = KIND(GRID_OFFSET), .type = RP_TASK_KEY_INT, .offset = F(rows),
     .def = 6, .lo = 2, .hi = RP_TASK_GRID_MAX_SIDE, .flags = RP_TASK_KEY_RUN,
     .help = "grid rows"},
    {.name = "cols", .kinds = KIND(GRID_OFFSET), .type = RP_TASK_KEY_INT, .offset = F(cols),
     .def = 8, .lo = 2, .hi = RP_TASK_GRID_MAX_SIDE, .flags = RP_TASK_KEY_RUN,
     .help = "grid columns, the layout width (token i at row i // cols, column i % cols)"},
    {.name = "alphabet", .kinds = KIND(GRID_OFFSET), .type = RP_TASK_KEY_INT, .offset = F(alphabet),
     .def = 8, .lo = 2, .hi = 26, .flags = RP_TASK_KEY_RUN, .help = "letters a.. in the grid"},
    {.name = "max_offset", .kinds = KIND(GRID_OFFSET), .type = RP_TASK_KEY_INT,
     .offset = F(max_offset), .def = 3, .lo = 1, .hi = RP_TASK_GRID_MAX_OFFSET,
     .def_of = max_offset_def, .hi_of = rp_task_grid_max_offset,
     .note = " (at most 9, rows - 1 and cols - 1)",
     .flags = RP_TASK_KEY_RUN, .help = "largest |row| and |column| offset asked for"},
    {.name = "seq_len", .kinds = ALL_KINDS, .type = RP_TASK_KEY_INT, .offset = F(seq_len),
     .def = 256, .lo = 8, .hi = (double)RP_TASK_MAX_SEQ_LEN, .def_of = seq_len_def,
     .rule = seq_len_rule, .help = "tokens per packed row (grid_offset: at least one problem)"},
    {.name = "max_bytes", .kinds = KIND(TEXT), .type = RP_TASK_KEY_INT, .offset = F(max_bytes),
     .def = (double)RP_TASK_DEFAULT_MAX_BYTES, .lo = 1, .hi = HUGE_VAL, .flags = RP_TASK_KEY_RUN,
     .help = "the largest corpus in bytes (a folder's files together)"},
};
const int rp_task_nkeys = (int)(sizeof rp_task_keys / sizeof rp_task_keys[0]);

#undef F
#undef KIND
#undef ALL_KINDS

int rp_task_key_applies(const rp_task_key *k, rp_task_kind kind)
{
    return (k->kinds & RP_TASK_BIT(kind)) != 0;
}

const rp_task_key *rp_task_key_of(const char *name, rp_task_kind kind)
{
    for (int i = 0; name && i < rp_task_nkeys; i++)
        if (rp_task_key_applies(&rp_task_keys[i], kind) && strcmp(rp_task_keys[i].name, name) == 0)
            return &rp_task_keys[i];
    return NULL;
}

double rp_task_cfg_get(const rp_task_cfg *c, const rp_task_key *k)
{
    if (k->type != RP_TASK_KEY_NUM) return (double)rp_task_cfg_get_int(c, k);
    double v;
    memcpy(&v, (const char *)c + k->offset, sizeof v);
    return v;
}

void rp_task_cfg_set(rp_task_cfg *c, const rp_task_key *k, double v)
{
    if (k->type != RP_TASK_KEY_NUM) {
        rp_task_cfg_set_int(c, k, (int64_t)v);
        return;
    }
    memcpy((char *)c + k->offset, &v, sizeof v);
}

int64_t rp_task_cfg_get_int(const rp_task_cfg *c, const rp_task_key *k)
{
    return rp_field_get_int(c, k->offset, k->type == RP_TASK_KEY_INT);
}

void rp_task_cfg_set_int(rp_task_cfg *c, const rp_task_key *k, int64_t v)
{
    rp_field_set_int(c, k->offset, k->type == RP_TASK_KEY_INT, v);
}

void rp_task_cfg_set_default(rp_task_cfg *c, const rp_task_key *k)
{
    if (k->type == RP_TASK_KEY_PATH) {
        const char *none = NULL;
        memcpy((char *)c + k->offset, &none, sizeof none);
        return;
    }
    rp_task_cfg_set(c, k, k->def_of ? k->def_of(c, k->def) : k->def);
}

rp_status rp_task_key_missing(const rp_task_key *k)
{
    return rp_error(RP_ERR_ARG, "option '%s' (%s) is required", k->name, k->what);
}

/* "writeup or labml" (the names of an enum row), into buf. */
static const char *name_list(const char *const *names, char *buf, size_t cap)
{
    size_t len = 0;
    int n = 0;
    while (names[n]) n++;
    buf[0] = '\0';
    for (int i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%s",
                                i == 0 ? "" : i == n - 1 ? " or " : ", ", names[i]);
    return buf;
}

static rp_status check_range(const rp_task_cfg *c, const rp_task_key *k)
{
    const char *note = k->note ? k->note : "";
    switch (k->type) {
    case RP_TASK_KEY_PATH: {
        const char *p;
        memcpy(&p, (const char *)c + k->offset, sizeof p);
        return p && p[0] ? RP_OK : rp_task_key_missing(k);
    }
    case RP_TASK_KEY_NUM: {
        double v = rp_task_cfg_get(c, k);
        int open = (k->flags & RP_TASK_KEY_HI_OPEN) != 0;
        if (v >= k->lo && (open ? v < k->hi : v <= k->hi)) return RP_OK;
        return rp_error(RP_ERR_ARG, "option '%s' must be in [%.14g, %.14g%c%s, got %.14g", k->name,
                        k->lo, k->hi, open ? ')' : ']', note, v);
    }
    case RP_TASK_KEY_INT: {
        int64_t v = rp_task_cfg_get_int(c, k), lo = (int64_t)k->lo;
        if (isinf(k->hi) && !k->hi_of) {
            if (v >= lo) return RP_OK;
            return rp_error(RP_ERR_ARG, "option '%s' must be >= %lld%s, got %lld", k->name,
                            (long long)lo, note, (long long)v);
        }
        int64_t hi = k->hi_of ? k->hi_of(c) : (int64_t)k->hi;
        if (v >= lo && v <= hi) return RP_OK;
        return rp_error(RP_ERR_ARG, "option '%s' must be in %lld..%lld%s, got %lld", k->name,
                        (long long)lo, (long long)hi, note, (long long)v);
    }
    case RP_TASK_KEY_BOOL:
    case RP_TASK_KEY_ENUM: {
        static const char *const bools[] = {"0", "1", NULL};
        const char *const *names = k->type == RP_TASK_KEY_BOOL ? bools : k->names;
        int64_t v = rp_task_cfg_get_int(c, k), n = 0;
        while (names[n]) n++;
        if (v >= 0 && v < n) return RP_OK;
        char list[128];
        return rp_error(RP_ERR_ARG, "option '%s' must be %s, got %lld", k->name,
                        name_list(names, list, sizeof list), (long long)v);
    }
    }
    return RP_OK;
}

rp_status rp_task_cfg_check_key(const rp_task_cfg *c, const rp_task_key *k)
{
    RP_TRY(check_range(c, k));
    return k->rule ? k->rule(c) : RP_OK;
}

rp_task_cfg rp_task_cfg_default(rp_task_kind kind)
{
    rp_task_cfg c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    for (int i = 0; i < rp_task_nkeys; i++) rp_task_cfg_set_default(&c, &rp_task_keys[i]);
    return c;
}

void rp_task_cfg_addition_format(rp_task_cfg *c, rp_add_format format)
{
    c->format = format;
    /* the addition rows whose default follows from the rows before them */
    for (int i = 0; i < rp_task_nkeys; i++) {
        const rp_task_key *k = &rp_task_keys[i];
        if (k->kinds == RP_TASK_BIT(RP_TASK_ADDITION) && k->def_of) rp_task_cfg_set_default(c, k);
    }
}

rp_status rp_task_cfg_check(const rp_task_cfg *c)
{
    if (c->kind < RP_TASK_ADDITION || c->kind > RP_TASK_LM)
        return rp_error(RP_ERR_ARG, "task: kind %d is not a task kind", (int)c->kind);
    for (int i = 0; i < rp_task_nkeys; i++)
        if (rp_task_key_applies(&rp_task_keys[i], c->kind))
            RP_TRY(rp_task_cfg_check_key(c, &rp_task_keys[i]));
    return RP_OK;
}
