/* Core's tables for the Lua parts and the PyTorch companion: rp.pe_modes, rp.model_keys,
 * rp.scalings, rp.model_rules, rp.model_layout, rp.safetensors_extras, rp.axes_rules and the
 * private table's model_keys, optim_keys, task_keys and pe_modes. Every row of every table goes
 * through one pusher, push_rows: a table is declared as its columns (a Lua key, how to read the
 * row's field at an offset: a string, an integer, a number, a boolean, a bit of a flags field, an
 * enum by its names, or a function for what is computed), and push_rows makes the Lua list of rows (and, optionally, the
 * same rows by name). The three key tables (the config schema's, the optimiser's, the tasks')
 * share the fields of a key row (name, type, default, range), set by one function
 * (set_key_fields) from each table's own first column.
 * The functions here read core's tables only; nothing else of the module calls them but the
 * registration (lrp_open_tables, lrp_tables_internals: modules.h).
 */
#include <stddef.h>
#include <string.h>

#include "args.h"
#include "freq.h"
#include "modules.h"
#include "optim.h"
#include "task.h"

/* ---- the row pusher ---- */

typedef enum {
    COL_STR,  /* a const char * (NULL: the key is left out) */
    COL_INT,  /* an integer of size 4 (int, an enum, uint32_t) or 8 (int64_t) */
    COL_NUM,  /* a double */
    COL_BOOL, /* an int, as a boolean */
    COL_FLAG, /* an int of flags, as a boolean: whether it has the column's bit (mask) */
    COL_NAME, /* an int (an enum), as names[value] */
    COL_FN,   /* fn(L, row) pushes the value and returns 1, or pushes nothing and returns 0 (the
                 key is left out); with no key (FIELDS) it sets fields of the row's table, which
                 is on the top of the stack, itself and returns 0 */
} col_kind;

typedef struct {
    const char *key;
    col_kind kind;
    size_t off, size;
    const char *const *names;                  /* COL_NAME */
    int (*fn)(lua_State *L, const void *row); /* COL_FN */
    int64_t mask;                             /* COL_FLAG */
} col;

#define FIELD(T, f) .off = offsetof(T, f), .size = sizeof(((T *)NULL)->f)
#define STR(k, T, f) {.key = k, .kind = COL_STR, FIELD(T, f)}
#define INT(k, T, f) {.key = k, .kind = COL_INT, FIELD(T, f)}
#define NUM(k, T, f) {.key = k, .kind = COL_NUM, FIELD(T, f)}
#define BOOL(k, T, f) {.key = k, .kind = COL_BOOL, FIELD(T, f)}
#define FLAG(k, T, f, bit) {.key = k, .kind = COL_FLAG, FIELD(T, f), .mask = bit}
#define NAME(k, T, f, list) {.key = k, .kind = COL_NAME, FIELD(T, f), .names = list}
#define FN(k, func) {.key = k, .kind = COL_FN, .fn = func}
#define FIELDS(func) {.key = NULL, .kind = COL_FN, .fn = func}
#define NCOLS(cols) ((int)(sizeof cols / sizeof *cols))

/* A table of rows: n rows, either in an array (base, stride) or by index (at(i)); each row a Lua
 * table of nrec fields (a size hint) set from cols in order; by: when set, the STR column whose
 * value also keys the row (t[name] = t[i]). */
typedef struct {
    int n;
    const void *base;
    size_t stride;
    const void *(*at)(int i);
    const col *cols;
    int ncols, nrec;
    const char *by;
} rows_desc;

/* The integer of size bytes at p (a signed field; the tables' unsigned ones are small). */
static int64_t get_int(const void *p, size_t size)
{
    int8_t a;
    int16_t b;
    int32_t c;
    int64_t d;
    switch (size) {
    case 1: memcpy(&a, p, 1); return a;
    case 2: memcpy(&b, p, 2); return b;
    case 4: memcpy(&c, p, 4); return c;
    default: memcpy(&d, p, 8); return d;
    }
}

/* Pushes the value of column c of row (1), or nothing (0). */
static int push_col(lua_State *L, const col *c, const void *row)
{
    const char *p = (const char *)row + c->off;
    switch (c->kind) {
    case COL_STR: {
        const char *s;
        memcpy(&s, p, sizeof s);
        if (!s) return 0;
        lua_pushstring(L, s);
        return 1;
    }
    case COL_INT: lua_pushinteger(L, (lua_Integer)get_int(p, c->size)); return 1;
    case COL_NUM: {
        double x;
        memcpy(&x, p, sizeof x);
        lua_pushnumber(L, (lua_Number)x);
        return 1;
    }
    case COL_BOOL: lua_pushboolean(L, get_int(p, c->size) != 0); return 1;
    case COL_FLAG: lua_pushboolean(L, (get_int(p, c->size) & c->mask) != 0); return 1;
    case COL_NAME: lua_pushstring(L, c->names[get_int(p, c->size)]); return 1;
    case COL_FN: return c->fn(L, row);
    }
    return 0;
}

/* Pushes the rows of d as a new list (and by name: d->by). */
static void push_rows(lua_State *L, const rows_desc *d)
{
    lua_createtable(L, d->n, d->by ? d->n : 0);
    for (int i = 0; i < d->n; i++) {
        const void *row = d->at ? d->at(i) : (const char *)d->base + (size_t)i * d->stride;
        lua_createtable(L, 0, d->nrec);
        for (int j = 0; j < d->ncols; j++)
            if (push_col(L, &d->cols[j], row)) lua_setfield(L, -2, d->cols[j].key);
        if (d->by) {
            lua_getfield(L, -1, d->by);
            lua_pushvalue(L, -2);
            lua_settable(L, -4);
        }
        lua_rawseti(L, -2, i + 1);
    }
}

/* Pushes the NULL-terminated names (at most max) as a list. */
static void push_names(lua_State *L, const char *const *names, int max)
{
    lua_newtable(L);
    for (int i = 0; i < max && names[i]; i++) {
        lua_pushstring(L, names[i]);
        lua_rawseti(L, -2, i + 1);
    }
}

/* Pushes the names of the scalings that read any of the RP_READS_* bits in reads, in code
 * order. */
static void push_scalings(lua_State *L, int reads)
{
    lua_newtable(L);
    for (int s = 0, n = 0; s < RP_SCALING_COUNT; s++)
        if (rp_scaling_of((rp_rope_scaling)s)->reads & reads) {
            lua_pushstring(L, rp_scaling_names[s]);
            lua_rawseti(L, -2, ++n);
        }
}

/* Pushes the names of the config keys of the rows k for which keep(k, arg) holds, in row
 * order. */
static void push_key_names(lua_State *L, int (*keep)(const rp_cfg_key *k, const void *arg),
                           const void *arg)
{
    lua_newtable(L);
    for (int i = 0, n = 0; i < rp_model_cfg_nkeys; i++)
        if (keep(&rp_model_cfg_keys[i], arg)) {
            lua_pushstring(L, rp_model_cfg_keys[i].name);
            lua_rawseti(L, -2, ++n);
        }
}

/* ---- rp.pe_modes: the mode table (core/nn/pe.h) ---- */

static const char *const rel_uses[] = {"table", "proj_sin", "proj_shared", "shared", NULL};
_Static_assert(sizeof rel_uses / sizeof *rel_uses == RP_PARAM_SHARED + 2, "a name per use");
static const char *const rel_inits[] = {"uniform", "zeros", "normal", NULL};
_Static_assert(sizeof rel_inits / sizeof *rel_inits == RP_RI_NORMAL + 2, "a name per init");

static int rel_param_rows(lua_State *L, const void *row)
{
    lua_pushstring(L, rp_rel_dim_of(((const rp_rel_param *)row)->rows)->name);
    return 1;
}
static int rel_param_cols(lua_State *L, const void *row)
{
    lua_pushstring(L, rp_rel_dim_of(((const rp_rel_param *)row)->cols)->name);
    return 1;
}
static const col rel_param_cols_[] = {
    STR("name", rp_rel_param, name),  NAME("use", rp_rel_param, use, rel_uses),
    FN("rows", rel_param_rows),       FN("cols", rel_param_cols),
    NAME("init", rp_rel_param, init, rel_inits),
};

static const rp_rel_desc *rel_of(const void *row) { return rp_rel_of(((const rp_pe_mode *)row)->rel); }

static int mode_rotate(lua_State *L, const void *row)
{
    char rot[5];
    lua_pushstring(L, rp_rotate_name(((const rp_pe_mode *)row)->rotate, rot));
    return 1;
}
static int mode_relative(lua_State *L, const void *row)
{
    lua_pushboolean(L, rel_of(row)->terms != 0);
    return 1;
}
static int mode_rel(lua_State *L, const void *row)
{
    lua_pushstring(L, rel_of(row)->name);
    return 1;
}
static int mode_scale_terms(lua_State *L, const void *row)
{
    lua_pushinteger(L, (lua_Integer)rel_of(row)->scale_terms);
    return 1;
}
static int mode_rel_params(lua_State *L, const void *row)
{
    const rp_rel_desc *rel = rel_of(row);
    const rows_desc d = {.n = rel->nparams, .base = rel->params, .stride = sizeof *rel->params,
                         .cols = rel_param_cols_, .ncols = NCOLS(rel_param_cols_), .nrec = 5};
    push_rows(L, &d);
    return 1;
}
/* the dims the parameters name: their formulas (pe.c's dims table) */
static int mode_rel_dims(lua_State *L, const void *row)
{
    const rp_rel_desc *rel = rel_of(row);
    lua_newtable(L);
    for (int i = 0; i < 2 * rel->nparams; i++) {
        const rp_rel_dim_desc *d =
            rp_rel_dim_of(i % 2 ? rel->params[i / 2].cols : rel->params[i / 2].rows);
        lua_createtable(L, 0, 3);
        lrp_setstr(L, "of", d->of);
        lua_pushinteger(L, (lua_Integer)d->times);
        lua_setfield(L, -2, "times");
        lua_pushinteger(L, (lua_Integer)d->plus);
        lua_setfield(L, -2, "plus");
        lua_setfield(L, -2, d->name);
    }
    return 1;
}
static int reads_rel_key(const rp_cfg_key *k, const void *rel)
{
    return k->use == RP_CFG_RELATIVE && (((const rp_rel_desc *)rel)->uses & k->use_arg);
}
static int mode_rel_keys(lua_State *L, const void *row)
{
    push_key_names(L, reads_rel_key, rel_of(row));
    return 1;
}
static const void *mode_at(int i) { return rp_pe_mode_of((rp_pe)i); }

static const col mode_cols[] = {
    STR("name", rp_pe_mode, name),
    NAME("absolute", rp_pe_mode, absolute, rp_pe_absolute_names),
    FN("rotate", mode_rotate),
    BOOL("rotary", rp_pe_mode, rotary),
    BOOL("linear", rp_pe_mode, linear),
    FN("relative", mode_relative),
    NUM("v_angle", rp_pe_mode, v_angle),
    INT("o_sign", rp_pe_mode, o_sign),
    FN("rel", mode_rel),
    FN("scale_terms", mode_scale_terms),
    FN("rel_params", mode_rel_params),
    FN("rel_dims", mode_rel_dims),
    FN("rel_keys", mode_rel_keys),
};

/* The mode table as a new table: t[i] = {name =, absolute =, rotate =, rotary =, linear =,
 * relative =, v_angle =, o_sign =, rel =, scale_terms =, rel_params =, rel_dims =, rel_keys =} in
 * the table's order, and t[name] = the same row; rel: the relative kind's name, scale_terms and
 * rel_params its row's (rel_params[i] = {name =, use =, rows =, cols =, init =}, the enums by
 * name); rel_dims[dim] = {of =, times =, plus =} for each dim rel_params name (pe.h's
 * rp_rel_dim_of: times x of + plus); rel_keys lists the config keys the kind reads (the schema's
 * RP_CFG_RELATIVE rows whose keys the kind's row uses). */
static void push_pe_modes(lua_State *L)
{
    const rows_desc d = {.n = (int)RP_PE_COUNT, .at = mode_at, .cols = mode_cols,
                         .ncols = NCOLS(mode_cols), .nrec = 6, .by = "name"};
    push_rows(L, &d);
}

/* rp.pe_modes() -> the mode table (push_pe_modes), a new table at each call. */
static int l_pe_modes(lua_State *L)
{
    push_pe_modes(L);
    return 1;
}

/* ---- the key tables' common fields ---- */

/* One row of a key table of core (the config schema's rp_cfg_key, the optimiser's rp_optim_key,
 * the tasks' rp_task_key) as the Lua parts see it: what set_key_fields sets, in one shape for
 * every table. kind says
 * what the default is; cols which of the range's fields the row has (a table's INT rows may have
 * no upper end, its enum rows no range at all). */
typedef enum {
    KEY_NUM,   /* default, lo, hi: numbers */
    KEY_INT,   /* default, lo, hi: integers */
    KEY_ENUM,  /* default: names[def]; names: the list */
    KEY_BOOL,  /* default: def != 0 */
    KEY_BLANK, /* default: "" (not set: the mode's own) */
} key_kind;

enum {
    KEY_LO = 1,   /* the row has lo */
    KEY_HI = 2,   /* the row has hi */
    KEY_OPEN = 4, /* the row has lo_open and hi_open */
};

typedef struct key_row {
    const char *name, *type;  /* type: the table's name of the row's type ("number", "int", ...) */
    key_kind kind;
    int cols;                 /* KEY_* */
    double def, lo, hi;
    const char *const *names; /* KEY_ENUM: NULL-terminated */
    int lo_open, hi_open;
} key_row;

static void push_key_number(lua_State *L, const char *field, double v, int integer)
{
    if (integer) lua_pushinteger(L, (lua_Integer)v);
    else lua_pushnumber(L, (lua_Number)v);
    lua_setfield(L, -2, field);
}

/* Sets the fields of row r in the table on the top of the stack: name, type, default, and as
 * its kind and cols say lo, hi, lo_open, hi_open, names. */
static void set_key_fields(lua_State *L, const key_row *r)
{
    lua_pushstring(L, r->name);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, r->type);
    lua_setfield(L, -2, "type");
    switch (r->kind) {
    case KEY_NUM:
    case KEY_INT: push_key_number(L, "default", r->def, r->kind == KEY_INT); break;
    case KEY_ENUM:
        lua_pushstring(L, r->names[(int)r->def]);
        lua_setfield(L, -2, "default");
        lua_newtable(L);
        for (int j = 0; r->names[j]; j++) {
            lua_pushstring(L, r->names[j]);
            lua_rawseti(L, -2, j + 1);
        }
        lua_setfield(L, -2, "names");
        break;
    case KEY_BOOL:
        lua_pushboolean(L, r->def != 0.0);
        lua_setfield(L, -2, "default");
        break;
    case KEY_BLANK:
        lua_pushliteral(L, "");
        lua_setfield(L, -2, "default");
        break;
    }
    if (r->cols & KEY_LO) push_key_number(L, "lo", r->lo, r->kind == KEY_INT);
    if (r->cols & KEY_HI) push_key_number(L, "hi", r->hi, r->kind == KEY_INT);
    if (r->cols & KEY_OPEN) {
        lua_pushboolean(L, r->lo_open);
        lua_setfield(L, -2, "lo_open");
        lua_pushboolean(L, r->hi_open);
        lua_setfield(L, -2, "hi_open");
    }
}

/* ---- rp.model_keys: the config schema's rows (core/config/model_schema.h) ---- */

/* by rp_cfg_type: the type's name, what its default is, which range fields it has */
static const char *const key_types[] = {"int", "number", "enum", "seed", "rotate", "bool"};
static const key_kind key_kinds[] = {KEY_INT, KEY_NUM,   KEY_ENUM,
                                         KEY_INT, KEY_BLANK, KEY_BOOL};
static const int key_range_cols[] = {KEY_LO | KEY_HI | KEY_OPEN,
                                     KEY_LO | KEY_HI | KEY_OPEN,
                                     KEY_OPEN,
                                     KEY_OPEN,
                                     KEY_OPEN,
                                     KEY_OPEN};
_Static_assert(sizeof key_types / sizeof *key_types == RP_CFG_BOOL + 1, "a name per type");
_Static_assert(sizeof key_range_cols / sizeof *key_range_cols == RP_CFG_BOOL + 1,
               "columns per type");
static const char *const key_uses[] = {"always", "rotary",   "placement", "relative",
                                       "freq",   "scaled",   "scalings",  "xpos",
                                       "linear_rotary"};
_Static_assert(sizeof key_uses / sizeof *key_uses == RP_CFG_LINEAR_ROTARY + 1, "a name per use");
static const char *const key_jsons[] = {"set", "applies", "always", "required"};
_Static_assert(sizeof key_jsons / sizeof *key_jsons == RP_CFG_JSON_REQUIRED + 1,
               "a name per json");

static int key_placements(lua_State *L, const void *row)
{
    const rp_cfg_key *k = row;
    char rot[5];
    if (k->use != RP_CFG_PLACEMENT) return 0;
    lua_pushstring(L, rp_rotate_name(k->use_arg, rot));
    return 1;
}
static int key_scalings(lua_State *L, const void *row)
{
    const rp_cfg_key *k = row;
    if (k->use != RP_CFG_SCALINGS) return 0;
    push_scalings(L, k->use_arg);
    return 1;
}
static int key_rope_scaling(lua_State *L, const void *row)
{
    if (!lrp_is_scaling_row(row)) return 0;
    lua_pushboolean(L, 1);
    return 1;
}
static int key_names(lua_State *L, const void *row)
{
    const rp_cfg_key *k = row;
    if (k->type != RP_CFG_BOOL) return 0;
    push_names(L, rp_model_cfg_names(k), 2);
    return 1;
}
static int key_range(lua_State *L, const void *row)
{
    char msg[512];
    if (!rp_model_cfg_range_msg(NULL, row, msg, sizeof msg)) return 0;
    lua_pushstring(L, msg);
    return 1;
}
/* the needs of row k (model_schema.h), in order, each {fact =, holds = {the names of the fact's
 * values it holds for}, why = its message, {list} filled in} */
static int key_needs(lua_State *L, const void *row)
{
    const rp_cfg_key *k = row;
    char buf[256];
    lua_newtable(L);
    for (int i = 0, n = 0; i < rp_model_cfg_nneeds; i++) {
        const rp_cfg_need *r = &rp_model_cfg_needs[i];
        if (!rp_model_cfg_need_applies(r, k)) continue;
        lua_createtable(L, 0, 3);
        lua_pushstring(L, rp_model_cfg_fact_key(r->fact));
        lua_setfield(L, -2, "fact");
        lua_newtable(L);
        for (int v = 0, m = 0; rp_model_cfg_fact_name(r->fact, v, buf, sizeof buf); v++)
            if (r->holds(k, v)) {
                lua_pushstring(L, buf);
                lua_rawseti(L, -2, ++m);
            }
        lua_setfield(L, -2, "holds");
        lua_pushstring(L, rp_model_cfg_need_why(r, k, NULL, buf, sizeof buf));
        lua_setfield(L, -2, "why");
        lua_rawseti(L, -2, ++n);
    }
    return 1;
}

/* The key row of a config schema row: its type's name, kind and range fields, the range of
 * rp_model_cfg_range. */
static int model_key_fields(lua_State *L, const void *row)
{
    const rp_cfg_key *k = row;
    const rp_cfg_range range = rp_model_cfg_range(k);
    const key_row r = {.name = k->name, .type = key_types[k->type], .kind = key_kinds[k->type],
                       .cols = key_range_cols[k->type], .def = k->def, .lo = range.lo,
                       .hi = range.hi, .names = k->names, .lo_open = range.lo_open,
                       .hi_open = range.hi_open};
    set_key_fields(L, &r);
    return 0;
}

static const col key_cols[] = {
    FIELDS(model_key_fields),
    FLAG("unset0", rp_cfg_key, flags, RP_CFG_UNSET0),
    FLAG("required", rp_cfg_key, flags, RP_CFG_REQUIRED),
    INT("since", rp_cfg_key, since),
    STR("help", rp_cfg_key, help),
    NAME("use", rp_cfg_key, use, key_uses),
    NAME("json", rp_cfg_key, json, key_jsons),
    FN("placements", key_placements),
    FN("scalings", key_scalings),
    FN("rope_scaling", key_rope_scaling),
    STR("unset_as", rp_cfg_key, unset_as),
    STR("freq", rp_cfg_key, freq_name),
    FN("names", key_names),
    FN("range", key_range),
    FN("needs", key_needs),
};

/* Pushes the config schema's rows (model_schema.c) as a list of tables, in row order: name,
 * type, default, lo, hi (int and number), names (enum), lo_open, hi_open (the key row: the
 * shape every key table has), then key_cols: unset0, required, since, help, use (when the key
 * does something: rp_cfg_use's name), json (what a safetensors roper.config holds of it:
 * rp_cfg_json's name), placements (use "placement": the letters of use_arg), scalings (use
 * "scalings": the names in use_arg), rope_scaling (true on the rows Hugging Face's rope_scaling
 * sets, which exclude it: lrp_is_scaling_row), unset_as (the key its 0 stands for), freq (the
 * rp_rope_freq field a row of the frequency scheme sets), names (a bool's too), range
 * (rp_model_cfg_range_msg's template, {value} left) and needs (key_needs: when the key does
 * something, and why not). */
static void push_model_keys(lua_State *L)
{
    const rows_desc d = {.n = rp_model_cfg_nkeys, .base = rp_model_cfg_keys,
                         .stride = sizeof *rp_model_cfg_keys, .cols = key_cols,
                         .ncols = NCOLS(key_cols), .nrec = 13};
    push_rows(L, &d);
}

/* rp.model_keys() -> the config schema's rows (push_model_keys), a new table at each call. */
static int l_model_keys(lua_State *L)
{
    push_model_keys(L);
    return 1;
}

/* ---- internals.optim_keys: the optimiser's rows (core/nn/optim.h) ---- */

/* by rp_optim_type: the type's name, what its default is, which range fields it has */
static const char *const optim_types[] = {"number", "int", "enum"};
static const key_kind optim_kinds[] = {KEY_NUM, KEY_INT, KEY_ENUM};
static const int optim_range_cols[] = {KEY_LO | KEY_HI | KEY_OPEN, KEY_LO | KEY_OPEN, 0};

static int optim_key_fields(lua_State *L, const void *row)
{
    const rp_optim_key *k = row;
    const key_row r = {.name = k->name, .type = optim_types[k->type], .kind = optim_kinds[k->type],
                       .cols = optim_range_cols[k->type], .def = k->def, .lo = k->lo, .hi = k->hi,
                       .names = k->names, .lo_open = k->flags & RP_OPT_LO_OPEN,
                       .hi_open = k->flags & RP_OPT_HI_OPEN};
    set_key_fields(L, &r);
    return 0;
}
static int optim_key_experiment(lua_State *L, const void *row)
{
    const rp_optim_key *k = row;
    if (k->experiment <= 0) return 0;
    lua_pushinteger(L, k->experiment);
    return 1;
}

static const col optim_key_cols[] = {
    FIELDS(optim_key_fields),
    FLAG("option", rp_optim_key, flags, RP_OPT_OPTION),
    STR("pair", rp_optim_key, pair),
    STR("help", rp_optim_key, help),
    FN("experiment", optim_key_experiment),
};

/* The optimiser's rows as a list of tables, in row order: the key row (name, type, default, lo,
 * hi, lo_open, hi_open, names), option (an option of rp.optim), pair (the option that holds it
 * with the next row), help, experiment (its place among rp.experiment's optimiser keys; absent:
 * not offered). */
static void push_optim_keys(lua_State *L)
{
    const rows_desc d = {.n = rp_adam_nkeys, .base = rp_adam_keys, .stride = sizeof *rp_adam_keys,
                         .cols = optim_key_cols, .ncols = NCOLS(optim_key_cols), .nrec = 11};
    push_rows(L, &d);
}

/* internals.optim_check(name, value) -> nil, or core's message for the optimiser's row name at
 * value, the other fields at their defaults (rp_adam_cfg_check_key: "lr must be at most
 * 3.40282347e+38 (float32's largest), got 1e+39"): the one wording of the rows' ranges, for
 * rp.experiment's optimiser keys. value: a number (an integer for an int or enum row). */
static int l_optim_check(lua_State *L)
{
    const rp_optim_key *k = rp_adam_key(luaL_checkstring(L, 1));
    if (!k) return luaL_argerror(L, 1, "not an optimiser key");
    rp_adam_cfg c = rp_adam_cfg_default();
    if (k->type == RP_OPT_NUM) rp_adam_cfg_set(&c, k, (double)luaL_checknumber(L, 2));
    else rp_adam_cfg_set_int(&c, k, (int64_t)luaL_checkinteger(L, 2));
    if (rp_adam_cfg_check_key(&c, k) == RP_OK) return 0;
    lua_pushstring(L, rp_last_error());
    return 1;
}

/* ---- internals.task_keys: the task table (tasks/task.h) ---- */

/* by rp_task_key_type: the type's name, what its default is, which range fields it has */
static const char *const task_types[] = {"int", "number", "enum", "bool", "path"};
static const key_kind task_kinds[] = {KEY_INT, KEY_NUM, KEY_ENUM, KEY_BOOL, KEY_BLANK};
static const int task_range_cols[] = {KEY_LO | KEY_HI, KEY_LO | KEY_HI | KEY_OPEN, 0, 0, 0};

static int task_key_fields(lua_State *L, const void *row)
{
    const rp_task_key *k = row;
    const key_row r = {.name = k->name, .type = task_types[k->type], .kind = task_kinds[k->type],
                       .cols = task_range_cols[k->type], .def = k->def, .lo = k->lo, .hi = k->hi,
                       .names = k->names,
                       .hi_open = (k->flags & RP_TASK_KEY_HI_OPEN) != 0};
    set_key_fields(L, &r);
    return 0;
}
static int task_key_kinds(lua_State *L, const void *row)
{
    lua_newtable(L);
    for (int kind = 0, n = 0; rp_task_kind_names[kind]; kind++) {
        if (!rp_task_key_applies(row, (rp_task_kind)kind)) continue;
        lua_pushstring(L, rp_task_kind_names[kind]);
        lua_rawseti(L, -2, ++n);
    }
    return 1;
}

static const col task_key_cols[] = {
    FIELDS(task_key_fields),
    FN("kinds", task_key_kinds),
    FLAG("run", rp_task_key, flags, RP_TASK_KEY_RUN),
    FLAG("required", rp_task_key, flags, RP_TASK_KEY_REQUIRED),
    STR("help", rp_task_key, help),
};

/* The task table's rows as a list of tables, in row order: the key row (name, type, default, lo,
 * hi, lo_open, hi_open, names; a path's default ""), kinds (the kinds that read it, by name), run
 * (a key of rp.experiment), required, help. */
static void push_task_keys(lua_State *L)
{
    const rows_desc d = {.n = rp_task_nkeys, .base = rp_task_keys, .stride = sizeof *rp_task_keys,
                         .cols = task_key_cols, .ncols = NCOLS(task_key_cols), .nrec = 12};
    push_rows(L, &d);
}

/* ---- rp.scalings: the scaling table and the frequency rules (core/nn/rope_freq.h) ---- */

static int rule_scalings(lua_State *L, const void *row)
{
    const rp_freq_rule *r = row;
    if (!r->reads) return 0;
    push_scalings(L, r->reads);
    return 1;
}
static int rule_has_lo(const rp_freq_rule *r)
{
    return r->kind == RP_FREQ_RULE_MIN || r->kind == RP_FREQ_RULE_MIN2;
}
static int rule_lo(lua_State *L, const void *row)
{
    if (!rule_has_lo(row)) return 0;
    lua_pushnumber(L, ((const rp_freq_rule *)row)->lo);
    return 1;
}
static int rule_lo_open(lua_State *L, const void *row)
{
    if (!rule_has_lo(row)) return 0;
    lua_pushboolean(L, ((const rp_freq_rule *)row)->lo_open);
    return 1;
}
static int rule_names(lua_State *L, const void *row)
{
    const rp_freq_rule *r = row;
    if (!r->names) return 0;
    push_names(L, r->names, 64);
    return 1;
}
static const col freq_rule_cols[] = {
    NAME("kind", rp_freq_rule, kind, rp_freq_rule_kinds),
    STR("a", rp_freq_rule, a),
    STR("b", rp_freq_rule, b),
    STR("ka", rp_freq_rule, ka),
    STR("kb", rp_freq_rule, kb),
    FN("scalings", rule_scalings),
    FN("lo", rule_lo),
    FN("lo_open", rule_lo_open),
    FN("names", rule_names),
    STR("why", rp_freq_rule, why),
};

static int reads_scaling_key(const rp_cfg_key *k, const void *desc)
{
    const rp_scaling_desc *d = desc;
    return (k->use == RP_CFG_SCALED && (d->reads & RP_READS_FACTOR)) ||
           (k->use == RP_CFG_SCALINGS && (d->reads & k->use_arg));
}
static int scaling_keys(lua_State *L, const void *row)
{
    push_key_names(L, reads_scaling_key, row);
    return 1;
}
static int scaling_own_score(lua_State *L, const void *row)
{
    lua_pushboolean(L, ((const rp_scaling_desc *)row)->score != NULL);
    return 1;
}
static const void *scaling_at(int i) { return rp_scaling_of((rp_rope_scaling)i); }

static const col scaling_cols[] = {
    STR("name", rp_scaling_desc, name),
    STR("hf", rp_scaling_desc, hf),
    FN("keys", scaling_keys),
    INT("since", rp_scaling_desc, since),
    BOOL("per_position", rp_scaling_desc, per_position),
    FN("own_score", scaling_own_score),
};

/* rp.scalings() -> the scaling table (core/nn/rope_freq.h) as a new table: t[i] = {name =, hf =,
 * keys =, since =, per_position =, own_score =, hf_fields =, hf_needs =} in code order, and
 * t[name] = the same row (hf_fields, hf_needs: lrp_set_hf_fields, for a scaling with hf); keys:
 * the config keys the scaling reads (the schema's rows of RP_CFG_SCALED and RP_CFG_SCALINGS that
 * apply to it), in row order; hf: Hugging Face's rope_type (nil for ntk); t.hf_map: the
 * rope_scaling fields and the keys they set (lrp_push_hf_map); t.rules: rp_rope_freq_check's
 * scalar rules (rp_freq_rules), in order: {kind = "min" | "min2" | "below" | "name", a =, b = (the
 * rp_rope_freq fields), ka =, kb = (the config keys that set them), scalings = (the names of the
 * scalings it applies to; nil: every scheme), lo =, lo_open = (min, min2), names = (name), why =
 * (the message: {a}, {b}, {A}, {B}, {scaling})}. */
static int l_scalings(lua_State *L)
{
    lua_settop(L, 0);
    const rows_desc scalings = {.n = RP_SCALING_COUNT, .at = scaling_at, .cols = scaling_cols,
                                .ncols = NCOLS(scaling_cols), .nrec = 6, .by = "name"};
    push_rows(L, &scalings);
    for (int s = 0; s < RP_SCALING_COUNT; s++)
        if (rp_scaling_of((rp_rope_scaling)s)->hf) {
            lua_rawgeti(L, -1, s + 1);
            lrp_set_hf_fields(L, (rp_rope_scaling)s);
            lua_pop(L, 1);
        }
    lrp_push_hf_map(L);
    lua_setfield(L, -2, "hf_map");
    const rows_desc rules = {.n = rp_freq_nrules, .base = rp_freq_rules,
                             .stride = sizeof *rp_freq_rules, .cols = freq_rule_cols,
                             .ncols = NCOLS(freq_rule_cols), .nrec = 8};
    push_rows(L, &rules);
    lua_setfield(L, -2, "rules");
    return 1;
}

/* ---- rp.model_rules: the rules between keys (core/config/model_schema.h) ---- */

static int rule_check_max(lua_State *L, const void *row)
{
    const rp_cfg_rule *r = row;
    if (!r->check || !r->max) return 0;
    lua_pushinteger(L, (lua_Integer)r->max);
    return 1;
}
static int rule_coded_why(lua_State *L, const void *row)
{
    const rp_cfg_rule *r = row;
    if (!r->check || !r->why) return 0;
    lua_pushstring(L, r->why);
    return 1;
}
static int rule_when(lua_State *L, const void *row)
{
    const rp_cfg_rule *r = row;
    if (r->check) return 0;
    push_names(L, r->when, 3);
    return 1;
}
static int rule_unset(lua_State *L, const void *row)
{
    const rp_cfg_rule *r = row;
    if (r->check) return 0;
    push_names(L, r->unset, 5);
    return 1;
}
static int rule_pe(lua_State *L, const void *row)
{
    const rp_cfg_rule *r = row;
    if (r->check || !r->pe_holds) return 0;
    lua_newtable(L);
    for (int p = 0, n = 0; p < (int)RP_PE_COUNT; p++)
        if (r->pe_holds((rp_pe)p)) {
            lua_pushstring(L, rp_pe_name((rp_pe)p));
            lua_rawseti(L, -2, ++n);
        }
    return 1;
}
static int rule_data_why(lua_State *L, const void *row)
{
    const rp_cfg_rule *r = row;
    char list[160], why[512];
    if (r->check) return 0;
    lua_pushstring(L, rp_model_cfg_fill(r->why, NULL, rp_model_cfg_rule_list(r, list, sizeof list),
                                        why, sizeof why));
    return 1;
}
static const col cfg_rule_cols[] = {
    STR("check", rp_cfg_rule, check), FN("why", rule_coded_why), FN("max", rule_check_max),
    FN("when", rule_when),            FN("unset", rule_unset),   FN("pe", rule_pe),
    FN("why", rule_data_why),
};

/* rp.model_rules() -> rp_model_cfg_check's rules between keys (model_schema.h), in order, as a
 * new table: t[i] = {check = name, why =, max =} for a coded rule (why: its message, nil when it
 * gives pe.h's or rope_freq.h's; max: its bound, nil for none), {when =, pe =, unset =, why =}
 * for a data rule (pe: the modes it holds for, nil for any; why: its message, {list} filled in);
 * t.messages = {grid =, linear =}: rp.experiment's refusal of its positions grid without a
 * rotary pe and softmax attention (pe.h's RP_PE_GRID_NEEDS, {list} filled in: the rotary modes;
 * {pe} and {linear} left) and the text of {linear} with linear attention, which
 * experiment/check.lua fills in. */
static int l_model_rules(lua_State *L)
{
    lua_settop(L, 0);
    const rows_desc d = {.n = rp_model_cfg_nrules, .base = rp_model_cfg_rules,
                         .stride = sizeof *rp_model_cfg_rules, .cols = cfg_rule_cols,
                         .ncols = NCOLS(cfg_rule_cols), .nrec = 4};
    push_rows(L, &d);
    char list[160], grid[512];
    static const char *const mark[] = {"{list}"};
    const char *const value[] = {rp_pe_list(list, sizeof list, 1, 0, 0)};
    lua_createtable(L, 0, 2);
    lrp_setstr(L, "grid", rp_fill_marks(grid, sizeof grid, RP_PE_GRID_NEEDS, mark, value, 1));
    lrp_setstr(L, "linear", RP_PE_WITH_LINEAR);
    lua_setfield(L, -2, "messages");
    return 1;
}

/* ---- rp.model_layout: the parameter layout (core/model/model.h) ---- */

static int layout_rel(lua_State *L, const void *row)
{
    if (((const rp_layout_row *)row)->name) return 0;
    lua_pushboolean(L, 1);
    return 1;
}
static int layout_dims(lua_State *L, const void *row)
{
    const rp_layout_row *r = row;
    if (!r->name) return 0;
    lua_createtable(L, 2, 0);
    for (int j = 0; j < 2 && r->dims[j] != RP_LD_NONE; j++) {
        lua_pushstring(L, rp_layout_dim_of(r->dims[j])->name);
        lua_rawseti(L, -2, j + 1);
    }
    return 1;
}
static int layout_init(lua_State *L, const void *row)
{
    const rp_layout_row *r = row;
    if (!r->name) return 0;
    lua_pushstring(L, rp_init_names[r->init]);
    return 1;
}
static int layout_fan_in(lua_State *L, const void *row)
{
    const rp_layout_row *r = row;
    if (!r->name || r->fan_in == RP_LD_NONE) return 0;
    lua_pushstring(L, rp_layout_dim_of(r->fan_in)->name);
    return 1;
}
static int layout_when(lua_State *L, const void *row)
{
    const rp_layout_row *r = row;
    if (!r->name || r->cond == RP_LAYOUT_ALWAYS) return 0;
    lua_createtable(L, 0, 2);
    if (r->cond == RP_LAYOUT_IF_KEY) {
        lrp_setstr(L, "key", r->key);
        if (rp_model_cfg_key(r->key, (size_t)-1)->type == RP_CFG_BOOL) {
            lua_pushboolean(L, strcmp(r->value, "true") == 0);
            lua_setfield(L, -2, "value");
        } else {
            lrp_setstr(L, "value", r->value);
        }
    } else {
        lrp_setstr(L, "absolute", r->value);
    }
    return 1;
}
static const col layout_cols[] = {
    NAME("scope", rp_layout_row, scope, rp_layout_scope_names),
    FN("rel", layout_rel),
    STR("name", rp_layout_row, name),
    FN("dims", layout_dims),
    FN("init", layout_init),
    FN("fan_in", layout_fan_in),
    FN("when", layout_when),
};
static const col layout_dim_cols[] = {
    STR("of", rp_layout_dim_desc, of),
    INT("times", rp_layout_dim_desc, times),
    INT("plus", rp_layout_dim_desc, plus),
};

/* rp.model_layout() -> the parameter layout table (core/model/model.h) as a new table: t[i] =
 * {name =, scope =, dims =, init =, fan_in =, when =} in row order, or {rel = true, scope =} for
 * the relative kind's parameters of the scope (rp.pe_modes()'s rel_params); dims the names of the
 * dims (one or two), fan_in a dim's name (nil: none), when nil (always), {key =, value =} (the
 * key does something and holds value: a boolean for a bool key) or {absolute =} (the mode's
 * absolute table); t.dims[name] = {of =, times =, plus =} for every dim (of nil: the constant
 * plus). */
static int l_model_layout(lua_State *L)
{
    lua_settop(L, 0);
    const rows_desc d = {.n = rp_model_layout_n, .base = rp_model_layout,
                         .stride = sizeof *rp_model_layout, .cols = layout_cols,
                         .ncols = NCOLS(layout_cols), .nrec = 6};
    push_rows(L, &d);
    lua_createtable(L, 0, RP_LD_COUNT);
    for (int dim = RP_LD_NONE + 1; dim < RP_LD_COUNT; dim++) {
        const rp_layout_dim_desc *x = rp_layout_dim_of((rp_layout_dim)dim);
        lua_createtable(L, 0, 3);
        for (int j = 0; j < NCOLS(layout_dim_cols); j++)
            if (push_col(L, &layout_dim_cols[j], x)) lua_setfield(L, -2, layout_dim_cols[j].key);
        lua_setfield(L, -2, x->name);
    }
    lua_setfield(L, -2, "dims");
    return 1;
}

/* ---- rp.safetensors_extras: what a safetensors file holds beside the parameters ---- */

static int extra_ranks(lua_State *L, const void *row)
{
    const rp_safetensors_extra *x = row;
    lua_createtable(L, 2, 0);
    for (int n = x->ndim_lo; n <= x->ndim_hi; n++) {
        lua_pushinteger(L, n);
        lua_rawseti(L, -2, n - x->ndim_lo + 1);
    }
    return 1;
}
/* the map whose own table it is */
static int extra_map(lua_State *L, const void *row)
{
    const rp_safetensors_extra *x = row;
    for (int m = 0; m < RP_AXES_COUNT; m++)
        if (rp_axes_maps[m].table && strcmp(rp_axes_maps[m].table, x->option) == 0) {
            lua_pushstring(L, rp_axes_names[m]);
            return 1;
        }
    return 0;
}
static const col extra_cols[] = {
    STR("key", rp_safetensors_extra, key),     STR("option", rp_safetensors_extra, option),
    STR("dtype", rp_safetensors_extra, dtype), FN("ranks", extra_ranks),
    STR("shape", rp_safetensors_extra, shape), FN("map", extra_map),
};

/* rp.safetensors_extras() -> what a model's safetensors file holds beside its parameters
 * (core/io/safetensors.h's extras table) as a new table: t[i] = {key =, option =, dtype =,
 * ranks =, shape =, map =} in the table's order (ranks: the ranks it may have; map: the
 * positions' map it belongs to (rp_axes_maps: the map whose table is its option), nil for
 * none), t.axes_key the metadata key of the map and t.version the roper.version it writes. */
static int l_safetensors_extras(lua_State *L)
{
    lua_settop(L, 0);
    const rows_desc d = {.n = RP_X_COUNT, .base = rp_safetensors_extras,
                         .stride = sizeof *rp_safetensors_extras, .cols = extra_cols,
                         .ncols = NCOLS(extra_cols), .nrec = 6};
    push_rows(L, &d);
    lrp_setstr(L, "axes_key", RP_SAFETENSORS_AXES_KEY);
    lrp_setstr(L, "version", RP_SAFETENSORS_VERSION);
    return 1;
}

/* ---- rp.axes_rules: the rules of the vector-position options (core/nn/axes_plan.h) ---- */

static const void *axes_map_at(int i) { return &rp_axes_maps[i]; }
static int axes_map_name(lua_State *L, const void *row)
{
    lua_pushstring(L, rp_axes_names[(const rp_axes_map_desc *)row - rp_axes_maps]);
    return 1;
}
static const col axes_map_cols[] = {
    FN("name", axes_map_name),
    STR("table", rp_axes_map_desc, table),
    STR("does", rp_axes_map_desc, does),
    STR("what", rp_axes_map_desc, what),
};

/* rp.axes_rules() -> the rules of the vector-position options (core/nn/axes_plan.h) as a new
 * table: maps[i] = {name =, table =, does =, what =} by rp_axes_map (table and the rest nil for
 * axial), rules = the rules' names in the order they are checked. */
static int l_axes_rules(lua_State *L)
{
    lua_settop(L, 0);
    lua_createtable(L, 0, 2);
    const rows_desc maps = {.n = RP_AXES_COUNT, .at = axes_map_at, .cols = axes_map_cols,
                            .ncols = NCOLS(axes_map_cols), .nrec = 4};
    push_rows(L, &maps);
    lua_setfield(L, -2, "maps");
    push_names(L, rp_axes_rule_names, RP_AXR_COUNT);
    lua_setfield(L, -2, "rules");
    return 1;
}

/* ---- registration ---- */

static const luaL_Reg table_funcs[] = {
    {"pe_modes", l_pe_modes},
    {"model_keys", l_model_keys},
    {"scalings", l_scalings},
    {"model_rules", l_model_rules},
    {"model_layout", l_model_layout},
    {"safetensors_extras", l_safetensors_extras},
    {"axes_rules", l_axes_rules},
    {NULL, NULL},
};

void lrp_open_tables(lua_State *L, int mod)
{
    lua_pushvalue(L, mod);
    luaL_setfuncs(L, table_funcs, 0);
    lua_pop(L, 1);
}

void lrp_tables_internals(lua_State *L, int priv)
{
    priv = lua_absindex(L, priv);
    push_model_keys(L);
    lua_setfield(L, priv, "model_keys");
    push_optim_keys(L);
    lua_setfield(L, priv, "optim_keys");
    lua_pushcfunction(L, l_optim_check);
    lua_setfield(L, priv, "optim_check");
    push_task_keys(L);
    lua_setfield(L, priv, "task_keys");
    push_pe_modes(L);
    lua_setfield(L, priv, "pe_modes");
}
