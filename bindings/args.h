/* The rules of a binding function, and the argument checks every binding file uses (args.c).
 *
 * Each binding header is named for what it holds: this one the rules and everything that reads
 * and checks a Lua value (errors, numbers, shapes, dims, indices, option tables), in args.c, and
 * the names of the userdata types and registry keys the errors name; userdata.h the module's
 * userdata types and their check/new helpers, in userdata.c; modules.h the registration function
 * of each binding file (called by roper.c); roper.h the module entry (luaopen_roper, the embedded
 * Lua sources). Every other header is named for the file that defines what it declares (freq.h,
 * tensor_index.h, tensor_math.h, model_run.h, interop.h), for the files that call it. A
 * binding file includes the ones it uses, never a header of a file that calls it (registration
 * included: tests/lua/layering_spec.lua); no header includes another binding header (roper.h's
 * include of modules.h, kept until tasks.c and optim.c include modules.h, is the exception).
 *
 * Rules every binding function follows:
 *  - Check every argument first (raising Lua's standard `bad argument #N to 'f' (msg)`), then call
 *    core. Core must never see an input it would reject or assert on.
 *  - Lua code can run in the middle of a binding: an option table's __index (every lua_getfield
 *    on a user's table, so every lrp_opt* read), and any finalizer (__gc) at any call that
 *    allocates Lua memory (lrp_newtensor, lua_newuserdatauv, lua_pushstring/fstring,
 *    lua_createtable, ...). That code may release (__close) any object, the call's own arguments
 *    included. So a binding works in three phases:
 *      1. read and check every Lua value it needs (arguments, option fields, nested tables),
 *         copying what it keeps into C locals (numbers, config structs, a copy of a tensor's
 *         struct) or into scratch userdata on the stack; pointers into objects taken here serve
 *         the checks only;
 *      2. create every result and scratch userdata;
 *      3. fetch its objects again (lrp_checktensor, lrp_checkmodel, ...: they raise "attempt to
 *         use a released ..." for an object released meanwhile) and call core, with no Lua call
 *         that allocates or can run Lua code between the fetch and the last use of the pointers.
 *    A loop that must allocate while it reads an object's memory reads through a private view
 *    (a tensor userdata of its own holding a storage reference, as t:totable does) or fetches
 *    the object again at each step (m:params). Objects whose pointers are used (generators,
 *    strings) stay on the Lua stack for the whole call, never only in a table the user can
 *    change. tests/lua/reentry_spec.lua and the fuzz test (tests/fuzz) try this with metamethods
 *    and finalizers that close the call's arguments.
 *  - Never raise while holding C memory: results are created as (empty) userdata on the Lua stack
 *    first (lrp_newtensor) and core fills them in place; scratch buffers are Lua userdata too.
 *  - Lua dims and indices are 1-based (negative ones count from the end, -1 = last); they are
 *    converted to 0-based exactly once, by the helpers below.
 *  - A non-OK core status becomes the error "<public name>: <rp_last_error()>" (lrp_raise, e.g.
 *    "rp.rope.angles: cannot allocate ... floats"), only after temporaries have been released.
 */
#ifndef LRP_ARGS_H
#define LRP_ARGS_H

#include <stdint.h>

#include <lauxlib.h>
#include <lua.h>

#include "rp.h"

/* ---- the names of the module's userdata types and registry keys (userdata.h has the types;
 * the errors here name them) ---- */

#define LRP_TENSOR_MT "roper.Tensor"
#define LRP_RNG_MT "roper.Rng"
#define LRP_MODEL_MT "roper.Model"
#define LRP_OPTIM_MT "roper.Optim"
#define LRP_TASK_MT "roper.Task"
#define LRP_TOKENIZER_MT "roper.Tokenizer"
#define LRP_COMM_MT "roper.Comm"
/* Metatables of plain result tables that print in their own way (__tostring, set by the module's
 * Lua part bindings/lua/print.lua): m:params(), m:grads() and rp.model_memory(cfg). */
#define LRP_PARAMS_MT "roper.Params"
#define LRP_GRADS_MT "roper.Grads"
#define LRP_MEMORY_MT "roper.Memory"
/* Registry key of the module table (for the public names in argument errors). */
#define LRP_MODULE_KEY "roper.module"
/* Registry key of the module's default generator (a roper.Rng userdata). */
#define LRP_DEFAULT_RNG_KEY "roper.default_rng"

/* Largest magnitude for integer-valued positions, offsets and random integer bounds (2^53: exact
 * in a double, and far from int64 overflow when sizes are added). */
#define LRP_MAX_POS ((int64_t)1 << 53)

/* ---- errors ---- */

/* Raises "<public name>: <rp_last_error()>": the running function's public name as in
 * lrp_argerror ("rp.load", "rp.Tensor.matmul"), "roper" when it has none. Call only after
 * releasing C temporaries. */
int lrp_raise(lua_State *L, rp_status st);
/* Raises `bad argument #arg to 'name' (msg)` as luaL_argerror does (methods: `calling 'name' on
 * bad self` for arg 1 and the arguments counted from x in t:f(x)), except that where the call
 * site gives no name, or only '?' (rp.optim[kind](m, opts)) or a description ("integer index"),
 * the name is the function's public one ("rp.optim.adam"), found in the module table. Every
 * binding raises its argument errors through these (never luaL_argerror / luaL_checkudata). */
int lrp_argerror_msg(lua_State *L, int arg, const char *msg);
/* The same with a printf-style message (lua_pushfstring formats: %s %d %I %f %p %%). */
int lrp_argerror(lua_State *L, int arg, const char *fmt, ...);
/* The userdata of metatable tname at idx, or `bad argument #idx ... (roper.Model expected, got
 * number)` (luaL_checkudata's message, through lrp_argerror). */
void *lrp_checkudata(lua_State *L, int idx, const char *tname);
/* "[2 x 3]" for t (a 0-dim tensor gives "[]") into buf (RP_SHAPE_STR_LEN bytes); returns buf. */
const char *lrp_shape_str(char *buf, const rp_tensor *t);
/* The same for a bare shape (sizes may be -1). */
const char *lrp_shape_str_n(char *buf, int ndim, const int64_t *shape);

/* ---- the option readers' messages ---- */

/* The marks of the option readers' message templates (lrp_msgs), by the index of their values in
 * lrp_opterror's values array: {key} the option's name, {got} the value as lrp_describe names
 * it, {names} a list of names as the message lists them, {help} a config key's help, {type} a
 * rope_type, {field} a rope_scaling field, {what} a named value (an option, an entry of one),
 * {index} "[r]" or "[r][a]" (1-based), {n} a count, {row} a 1-based row, {max} a bound, {p} {i}
 * a sampled position and pair, {rows} {half} the positions and pairs sampled or expected, {A}
 * the positions' axes, {dims} {shape} {forms} {noun} a table option's (freq.c's table_opt),
 * {lists} {matrix} {number} the forms a positions reader takes beside a list of integers. */
typedef enum {
    LRP_MK_KEY, LRP_MK_GOT, LRP_MK_NAMES, LRP_MK_HELP, LRP_MK_TYPE, LRP_MK_FIELD, LRP_MK_WHAT,
    LRP_MK_INDEX, LRP_MK_N, LRP_MK_ROW, LRP_MK_MAX, LRP_MK_P, LRP_MK_I, LRP_MK_ROWS, LRP_MK_HALF,
    LRP_MK_A, LRP_MK_DIMS, LRP_MK_SHAPE, LRP_MK_FORMS, LRP_MK_NOUN, LRP_MK_LISTS, LRP_MK_MATRIX,
    LRP_MK_NUMBER, LRP_MK_COUNT
} lrp_mark;

/* The option readers' messages: the typed reads of args.c (as rp.model reads the config schema's
 * keys, and every binding its options), the rotary base and Hugging Face's rope_scaling (freq.c),
 * the own tables freq, angles and mix (freq.c), the positions (nn.c) and option sections. */
typedef enum {
    LRP_M_NUMBER, LRP_M_FINITE, LRP_M_INTEGER, LRP_M_BOOLEAN, LRP_M_ENUM, LRP_M_ROTATE,
    LRP_M_NAMES, LRP_M_UNKNOWN, LRP_M_REQUIRED,
    LRP_M_BASE_EXCLUDE, LRP_M_POSITIVE,
    LRP_M_HF_TABLE, LRP_M_HF_EXCLUDE, LRP_M_HF_DIFFER, LRP_M_HF_TYPE_STRING, LRP_M_HF_UNSUPPORTED,
    LRP_M_HF_TYPE, LRP_M_HF_UNKNOWN, LRP_M_HF_NOTHING, LRP_M_HF_BOOLEAN, LRP_M_HF_NUMBER,
    LRP_M_HF_INTEGER, LRP_M_HF_NEEDS, LRP_M_HF_RANGE, LRP_M_HF_ZERO, LRP_M_HF_MSCALE,
    LRP_M_FREQ_BOTH, LRP_M_ANGLES_NOTHING, LRP_M_ANGLES_CALLS, LRP_M_ANGLES_VALUE, LRP_M_ENTRY,
    LRP_M_FINITE_NUMBER, LRP_M_TABLE_TENSOR, LRP_M_TABLE_KIND, LRP_M_TABLE_FIRST,
    LRP_M_TABLE_EMPTY, LRP_M_TABLE_ROW, LRP_M_MIX_SIZE,
    LRP_M_POS_KIND, LRP_M_POS_LISTS, LRP_M_POS_MATRIX, LRP_M_POS_NUMBER, LRP_M_POS_AXES,
    LRP_M_POS_ROW, LRP_M_POS_INTEGER,
    LRP_M_SECTIONS, LRP_M_SECTIONS_ENTRY,
    LRP_M_COUNT
} lrp_msg;

/* A message template of a table: name the key rp.option_messages() gives it, text the template
 * (marks of lrp_mark), filled by core's rp_fill_marks. Both static strings. */
typedef struct {
    const char *name, *text;
} lrp_template;
/* The templates, one per lrp_msg (args.c): the one home of these texts, which
 * rp.option_messages() exports by name (the PyTorch companion fills those of Hugging Face's
 * rope_scaling reader too: python/gen_schema.lua). */
extern const lrp_template lrp_msgs[LRP_M_COUNT];
/* The marks' texts ("{key}", ...), one per lrp_mark. */
extern const char *const lrp_mark_names[LRP_MK_COUNT];

/* Pushes message m filled in (rp_fill_marks: values[k] for mark k, LRP_MK_COUNT of them; a NULL
 * leaves its mark) and returns it; no length limit. */
const char *lrp_pushmsg(lua_State *L, lrp_msg m, const char *const *values);
/* Pushes a new table of the n messages of rows (lrp_msgs): t[name] =
 * text with its count marks filled in (rp_fill_marks: values[k] for marks[k], a NULL leaves its
 * mark; count 0: the texts as they are), no length limit. The export of a table of templates. */
void lrp_push_msgs(lua_State *L, const lrp_template *rows, int n, const char *const *marks,
                   const char *const *values, int count);
/* Raises `bad argument #arg` (lrp_argerror_msg) with message m filled in (lrp_pushmsg). */
int lrp_opterror(lua_State *L, int arg, lrp_msg m, const char *const *values);
/* The values of a message's marks, by mark: LRP_MARKS([LRP_MK_KEY] = key, [LRP_MK_GOT] = got)
 * (the marks left out are NULL). */
#define LRP_MARKS(...) ((const char *[LRP_MK_COUNT]){__VA_ARGS__})

/* ---- numbers ---- */

/* A value of type number at arg (strings are not coerced); `what` names it in errors. */
double lrp_checknumber(lua_State *L, int arg, const char *what);
/* As lrp_checknumber, and finite. */
double lrp_checkfinite(lua_State *L, int arg, const char *what);
/* An integer-valued number at arg (2 and 2.0 are fine; 2.5, nan, 1e300 and "2" are not). */
lua_Integer lrp_checkint(lua_State *L, int arg, const char *what);
/* 1 and *out set when the value at idx is an integer-valued number; 0 otherwise. */
int lrp_tointeger(lua_State *L, int idx, lua_Integer *out);
/* Pushes a description of the value at idx for messages: numbers as numbers, else the type name. */
const char *lrp_describe(lua_State *L, int idx);
/* For a function whose arguments end at idx - 1: raises `bad argument #idx ... (unexpected
 * argument after <last> (<the value>))` when the call has one more (a nil too), so that an
 * option nobody reads is not taken for understood ("after the path", "after the shape table"). */
void lrp_checkend(lua_State *L, int idx, const char *last);
/* t[key] = s for the table t at the top of the stack (the stack is left as it was); nothing when
 * s is NULL. For the tables the exports of core's tables build. */
void lrp_setstr(lua_State *L, const char *key, const char *s);

/* ---- shapes, dims and indices ---- */

/* Reads a shape into shape[RP_MAX_DIMS] and returns ndim: either a table of sizes at arg `first`
 * (then `last` is ignored), or the numbers at first..last. Sizes are integers >= 0 (or one -1 when
 * allow_infer), at most RP_MAX_DIMS of them, and the product of the nonzero sizes is at most
 * RP_MAX_NUMEL. A -1 is left in place (see lrp_infer_shape). Raises on anything else. */
int lrp_checkshape(lua_State *L, int first, int last, int64_t *shape, int allow_infer);
/* The shape at first..last as lrp_checkshape, but a shape table must be the last argument (the
 * constructors and t:view/t:reshape: "unexpected argument after the shape table"). */
int lrp_shape_args(lua_State *L, int first, int last, int64_t *shape, int allow_infer);
/* Replaces a -1 in shape so that the shape has numel elements; raises `bad argument #arg` when
 * that is impossible or when the counts differ ("cannot view [7] as [2 x -1]"). */
void lrp_infer_shape(lua_State *L, int arg, const rp_tensor *t, int ndim, int64_t *shape);
/* Product of sizes (callers have bounded it already). */
int64_t lrp_numel(int ndim, const int64_t *shape);

/* 0-based dim for the 1-based (negative from the end) dim d of a tensor with ndim dims, or -1. */
int lrp_todim(lua_Integer d, int ndim);
/* 0-based index for the 1-based (negative from the end) index i into a dim of size n, or -1. */
int64_t lrp_toindex(lua_Integer i, int64_t n);
/* "; dims and indices are 1-based (1 is the first, -1 the last)" when zero is true (a dim, index
 * or bound of 0 was given: a 0-based habit), else "": the end of every out-of-range message. */
const char *lrp_base_hint(int zero);
/* The dim at arg for t (integer, in range) as 0-based; raises "dim 5 out of range for [2 x 3]". */
int lrp_checkdim(lua_State *L, int arg, const rp_tensor *t);
/* The index at arg into dim d of t as 0-based; raises
 * "index 7 out of range for dim 1 of [2 x 3]". */
int64_t lrp_checkindex(lua_State *L, int arg, const rp_tensor *t, int d);

/* Checks that src broadcasts to dst's shape (numpy rules, leading size-1 dims of src ignored);
 * raises `bad argument #arg (cannot broadcast [..] to [..])`. */
void lrp_check_broadcast_to(lua_State *L, int arg, const rp_tensor *src, const rp_tensor *dst);
/* A view of src without its leading size-1 dims beyond dst_ndim (so core's copy accepts it).
 * Fills *out with a new reference; returns the status of the core view calls. */
rp_status lrp_squeeze_lead(rp_tensor *out, const rp_tensor *src, int dst_ndim);

/* ---- option tables ---- */

/* The value at idx must be nil, none or a table; every key of the table must be a string among
 * `known` (a NULL-terminated list). Raises "unknown option 'fracton'" etc. Returns 1 if a table.
 * An entry lrp_freq_keys_mark in known stands for the names of the config schema's rows of the
 * frequency scheme (scope RP_CFG_SCOPE_FREQ): first the scaling's (scaling and the rows that
 * apply to scalings), then the others (xpos, xpos_scale_base), each group in row order; an entry
 * lrp_attention_keys_mark for those of the positional scheme and the relative limits (scopes
 * RP_CFG_SCOPE_PE and RP_CFG_SCOPE_REL: rp.attention's config keys), in row order; an entry
 * lrp_linear_keys_mark for rp.linear_attention's config keys, each at its row's place
 * (rp_cfg_key.linear, model_schema.h), the entries after the mark in known filling the places no
 * row holds, in order (so the mark ends the list: {lrp_linear_keys_mark, "eps", "q_offset",
 * NULL} is pe, linear_rope, eps, base, ...). */
int lrp_checkopts(lua_State *L, int idx, const char *const *known);
/* The marks of lrp_checkopts (their addresses, not their texts, are what counts). */
extern const char lrp_freq_keys_mark[];
extern const char lrp_attention_keys_mark[];
extern const char lrp_linear_keys_mark[];
/* The names known stands for, its marks expanded as lrp_checkopts expands them, in out (at most
 * n - 1 of them, then NULL; LRP_MAX_KNOWN is more than any list: the longest, rp.model's, is the
 * schema's rows and 8); returns their count. A binding that reads its options in this order
 * names the first bad one of them. */
#define LRP_MAX_KNOWN 256
int lrp_known_names(const char *const *known, const char **out, int n);
/* 1 for a row of the scaling: scaling itself and the keys of RP_CFG_SCALED and RP_CFG_SCALINGS
 * (what a rope_scaling table sets). */
int lrp_is_scaling_row(const rp_cfg_key *k);
/* 1 when the options table at idx (or nil) has a non-nil field key. */
int lrp_hasopt(lua_State *L, int idx, const char *key);
/* Field readers: the default when the table is nil or the field is nil, else a checked value.
 * Errors name the option: "bad argument #2 to 'rotate' (option 'base' must be a number, got
 * string)". */
double lrp_optnumber(lua_State *L, int idx, const char *key, double def);
double lrp_optfinite(lua_State *L, int idx, const char *key, double def);
lua_Integer lrp_optinteger(lua_State *L, int idx, const char *key, lua_Integer def);
int lrp_optboolean(lua_State *L, int idx, const char *key, int def);
/* The position of the field's string value in names (NULL-terminated), or def when absent. */
int lrp_optenum(lua_State *L, int idx, const char *key, const char *const *names, int def);
/* The field as a rotate mask (RP_ROT_* bits of core/nn/pe.h): a string of distinct letters of
 * "qkvo" (rp_rotate_from_name), or 0 when absent. */
int lrp_optrotate(lua_State *L, int idx, const char *key);

/* Reads row k of the config schema (core/config/model_schema.h) from the option table at idx into
 * cfg when it is present, by the row's type and names only (its range is the caller's rule: a
 * planner's, core/config/plan.h); returns 1 when it was present, 0 (cfg kept) when absent. */
int lrp_optcfgvalue(lua_State *L, int idx, rp_model_cfg *cfg, const rp_cfg_key *k);
/* Reads row k of the config schema (core/config/model_schema.h) from the option table at idx into
 * cfg when it is present (an absent key keeps cfg's value): by the row's type and names, then
 * checked against its range (rp_model_cfg_check_key, given). Raises naming the option table. */
void lrp_optcfgkey(lua_State *L, int idx, rp_model_cfg *cfg, const rp_cfg_key *k);

/* Refuses a key of rp.model's config among a call's options (rp.attention's, rp.rope.*'s) whose
 * value does nothing for the call's pe, by the rule of rp.model's config (core/config/model_schema.h,
 * rp_model_cfg_check_used: base with pe shaw, rel_clip with t5, scaling_factor without scaling;
 * a key at its default is accepted), raising naming the options table at idx. view holds the
 * options that are such keys, the schema's defaults for the others (normalised here). No Lua code
 * runs but the error. */
void lrp_check_used(lua_State *L, int idx, rp_model_cfg *view);

/* ---- files ---- */

/* A file name at arg: a nonempty string without NUL bytes; raises "path must be a string, got
 * 42", "path must not be empty", "path contains a NUL byte". */
const char *lrp_checkpath(lua_State *L, int arg);
/* Pushes nil and rp_last_error() (a file error, "path: reason"); returns 2, for
 * `return lrp_pushfail(L);` (Lua io style: the environment failed, not the caller). */
int lrp_pushfail(lua_State *L);

/* Option names that several binding files read and core has no NULL-terminated table of (the
 * config's enums are core's: rp_pe_names, rp_pairing_names, ...): the nonfinite option of
 * m:train_step and opt:step ("error", "skip"). */
extern const char *const lrp_nonfinite_names[];

#endif
