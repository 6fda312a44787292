/* The argument checks of args.h: errors, numbers, shapes, dims, indices, option tables.
 * Nothing here holds C memory across a call that may raise. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "args.h"

/* ---- errors ---- */


/* Pushes "rp.<key>" (or "rp.<key>.<key2>") when the value at index f is a field of the module
 * table (kept in the registry under LRP_MODULE_KEY) or of one of its tables (rp.optim, rp.Tensor,
 * ...), or "roper.Tensor.__add" for a metamethod of the module's metatables; returns 1 then, else
 * 0 with nothing pushed. Fields of the module itself win. */
static int push_public_name(lua_State *L, int f)
{
    if (lua_getfield(L, LUA_REGISTRYINDEX, LRP_MODULE_KEY) != LUA_TTABLE) {
        lua_pop(L, 1);
        return 0;
    }
    int mod = lua_gettop(L);
    for (int level = 1; level <= 2; level++) {
        lua_pushnil(L);
        while (lua_next(L, mod) != 0) {
            if (lua_type(L, -2) != LUA_TSTRING) {
                lua_pop(L, 1);
                continue;
            }
            if (level == 1 && lua_rawequal(L, -1, f)) {
                lua_pushfstring(L, "rp.%s", lua_tostring(L, -2));
                lua_replace(L, mod);
                lua_settop(L, mod);
                return 1;
            }
            if (level == 2 && lua_type(L, -1) == LUA_TTABLE) {
                int sub = lua_gettop(L);
                lua_pushnil(L);
                while (lua_next(L, sub) != 0) {
                    if (lua_type(L, -2) == LUA_TSTRING && lua_rawequal(L, -1, f)) {
                        lua_pushfstring(L, "rp.%s.%s", lua_tostring(L, sub - 1),
                                        lua_tostring(L, -2));
                        lua_replace(L, mod);
                        lua_settop(L, mod);
                        return 1;
                    }
                    lua_pop(L, 1);
                }
            }
            lua_pop(L, 1);
        }
    }
    lua_settop(L, mod - 1);
    /* a metamethod called directly (getmetatable(t).__add(t, 1)): "roper.Tensor.__add" */
    static const char *const mts[] = {LRP_TENSOR_MT, LRP_RNG_MT, LRP_MODEL_MT, LRP_OPTIM_MT,
                                      LRP_TASK_MT, LRP_TOKENIZER_MT, NULL};
    for (int i = 0; mts[i]; i++) {
        if (luaL_getmetatable(L, mts[i]) != LUA_TTABLE) {
            lua_pop(L, 1);
            continue;
        }
        int mt = lua_gettop(L);
        lua_pushnil(L);
        while (lua_next(L, mt) != 0) {
            if (lua_type(L, -2) == LUA_TSTRING && lua_rawequal(L, -1, f)) {
                lua_pushfstring(L, "%s.%s", mts[i], lua_tostring(L, -2));
                lua_replace(L, mt);
                lua_settop(L, mt);
                return 1;
            }
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    return 0;
}

/* Raises core's last error as "<public name>: <message>" (the running function's public name when
 * it has one, "roper" otherwise). */
int lrp_raise(lua_State *L, rp_status st)
{
    const char *msg = rp_last_error();
    lua_Debug ar;
    const char *name = "roper";
    if (lua_getstack(L, 0, &ar)) {
        lua_getinfo(L, "f", &ar); /* pushes the running function */
        if (push_public_name(L, lua_gettop(L))) name = lua_tostring(L, -1);
    }
    if (msg == NULL || msg[0] == '\0') return luaL_error(L, "%s: %s error", name, rp_status_name(st));
    return luaL_error(L, "%s: %s", name, msg);
}

int lrp_argerror_msg(lua_State *L, int arg, const char *msg)
{
    lua_Debug ar;
    if (!lua_getstack(L, 0, &ar)) return luaL_error(L, "bad argument #%d (%s)", arg, msg);
    lua_getinfo(L, "nf", &ar); /* pushes the running function */
    if (ar.namewhat != NULL && strcmp(ar.namewhat, "method") == 0) {
        /* t:f(x): Lua's convention, x is argument #1 and t is "self" */
        arg--;
        if (arg == 0) return luaL_error(L, "calling '%s' on bad self (%s)", ar.name, msg);
    }
    const char *name = ar.name;
    /* no name, '?' (rp.optim[kind](...)) or a description ("integer index", t[1](...)): the
     * function's public name instead */
    if (name == NULL || strcmp(name, "?") == 0 || strchr(name, ' ') != NULL)
        name = push_public_name(L, lua_gettop(L)) ? lua_tostring(L, -1) : "?";
    return luaL_error(L, "bad argument #%d to '%s' (%s)", arg, name, msg);
}

int lrp_argerror(lua_State *L, int arg, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const char *msg = lua_pushvfstring(L, fmt, ap);
    va_end(ap);
    return lrp_argerror_msg(L, arg, msg);
}

/* Whether the running function is a method of the type tname ("roper.Tensor": a field of
 * rp.Tensor, and not also a function of the module, as rp.matmul is) called without ':'
 * (x.sum() instead of x:sum(), so that no self came). Pushes values; the caller raises. */
static int method_without_colon(lua_State *L, const char *tname)
{
    lua_Debug ar;
    if (!lua_getstack(L, 0, &ar)) return 0;
    luaL_checkstack(L, 6, NULL);
    lua_getinfo(L, "nf", &ar); /* pushes the running function */
    int f = lua_gettop(L);
    if (ar.name == NULL || (ar.namewhat != NULL && strcmp(ar.namewhat, "method") == 0)) return 0;
    const char *dot = strchr(tname, '.');
    if (dot == NULL || lua_getfield(L, LUA_REGISTRYINDEX, LRP_MODULE_KEY) != LUA_TTABLE) return 0;
    int mod = lua_gettop(L);
    if (lua_getfield(L, mod, dot + 1) != LUA_TTABLE) return 0;
    lua_pushstring(L, ar.name);
    lua_rawget(L, -2); /* rp.Tensor[name] */
    if (!lua_rawequal(L, -1, f)) return 0;
    lua_pushstring(L, ar.name);
    lua_rawget(L, mod); /* rp[name]: a module function that is also a method (rp.matmul) */
    return !lua_rawequal(L, -1, f);
}

void *lrp_checkudata(lua_State *L, int idx, const char *tname)
{
    void *p = luaL_testudata(L, idx, tname);
    if (p == NULL) {
        const char *got;
        if (luaL_getmetafield(L, idx, "__name") == LUA_TSTRING) got = lua_tostring(L, -1);
        else if (lua_type(L, idx) == LUA_TLIGHTUSERDATA) got = "light userdata";
        else got = luaL_typename(L, idx);
        if (idx == 1 && method_without_colon(L, tname)) {
            lua_Debug ar;
            lua_getstack(L, 0, &ar);
            lua_getinfo(L, "n", &ar);
            lrp_argerror(L, idx, "%s expected, got %s; call methods with ':', as in x:%s()", tname,
                         got, ar.name);
        }
        lrp_argerror(L, idx, "%s expected, got %s", tname, got);
    }
    return p;
}

const char *lrp_shape_str_n(char *buf, int ndim, const int64_t *shape)
{
    size_t len = RP_SHAPE_STR_LEN, pos = 0;
    buf[pos++] = '[';
    for (int i = 0; i < ndim && pos < len - 32; i++) {
        int n = snprintf(buf + pos, len - pos, i ? " x %lld" : "%lld", (long long)shape[i]);
        if (n < 0) break;
        pos += (size_t)n;
    }
    buf[pos++] = ']';
    buf[pos] = '\0';
    return buf;
}

const char *lrp_shape_str(char *buf, const rp_tensor *t)
{
    return lrp_shape_str_n(buf, t->ndim, t->shape);
}

/* ---- the option readers' messages ---- */

const char *const lrp_mark_names[LRP_MK_COUNT] = {
    "{key}", "{got}",  "{names}", "{help}", "{type}", "{field}", "{what}", "{index}",
    "{n}",   "{row}",  "{max}",   "{p}",    "{i}",    "{rows}",  "{half}", "{A}",
    "{dims}", "{shape}", "{forms}", "{noun}", "{lists}", "{matrix}", "{number}"};

const lrp_template lrp_msgs[LRP_M_COUNT] = {
    /* the typed reads of an option (lrp_opt*, rp.model's config keys by their schema type) */
    [LRP_M_NUMBER] = {"number", "option '{key}' must be a number, got {got}"},
    [LRP_M_FINITE] = {"finite", "option '{key}' must be finite, got {got}"},
    [LRP_M_INTEGER] = {"integer", "option '{key}' must be an integer, got {got}"},
    [LRP_M_BOOLEAN] = {"boolean", "option '{key}' must be a boolean, got {got}"},
    [LRP_M_ENUM] = {"enum", "option '{key}' must be one of {names}, got {got}"}, /* "a", "b" */
    [LRP_M_ROTATE] = {"rotate", "option '{key}' must name the rotated placements, distinct "
                                "letters of \"qkvo\" (\"qk\", \"vo\", \"qkvo\", ...), got {got}"},
    /* an option table's keys (lrp_checkopts), a required key (rp.model's) */
    [LRP_M_NAMES] = {"names", "option names must be strings, got {got}"},
    [LRP_M_UNKNOWN] = {"unknown", "unknown option '{key}' (known: {names})"}, /* a, b */
    [LRP_M_REQUIRED] = {"required", "option '{key}' ({help}) is required"},
    /* the rotary base (lrp_optbase) */
    [LRP_M_BASE_EXCLUDE] = {"base_exclude", "options 'rope_theta' and 'base' exclude each other "
                                            "(rope_theta is Hugging Face's name of base)"},
    [LRP_M_POSITIVE] = {"positive", "option '{key}' must be > 0, got {got}"},
    /* Hugging Face's rope_scaling (lrp_opt_rope_scaling) */
    [LRP_M_HF_TABLE] = {"hf_table", "option 'rope_scaling' must be a table (Hugging Face's "
                                    "config.json rope_scaling), got {got}"},
    [LRP_M_HF_EXCLUDE] = {"hf_exclude", "options 'rope_scaling' and '{key}' exclude each other "
                                        "(give Hugging Face's table or roper's keys)"},
    [LRP_M_HF_DIFFER] = {"hf_differ", "option 'rope_scaling': 'rope_type' and 'type' differ"},
    [LRP_M_HF_TYPE_STRING] = {"hf_type_string", "option 'rope_scaling': 'rope_type' (or 'type') "
                                                "must be a string, got {got}"},
    [LRP_M_HF_UNSUPPORTED] = {"hf_unsupported",
                              "option 'rope_scaling': rope_type \"{type}\" (LongRoPE's per-pair "
                              "factors) is not supported; give the frequencies as option 'freq'"},
    [LRP_M_HF_TYPE] = {"hf_type", "option 'rope_scaling': rope_type \"{type}\" is not {names}"},
    [LRP_M_HF_UNKNOWN] = {"hf_unknown", "option 'rope_scaling': unknown field {field} (roper "
                                        "reads rope_type or type, {names})"}, /* {field}: 'x' */
    [LRP_M_HF_NOTHING] = {"hf_nothing", "option 'rope_scaling': field '{field}' does nothing for "
                                        "rope_type \"{type}\""},
    [LRP_M_HF_BOOLEAN] = {"hf_boolean", "option 'rope_scaling': '{field}' must be a boolean, got "
                                        "{got}"},
    [LRP_M_HF_NUMBER] = {"hf_number", "option 'rope_scaling': '{field}' must be a finite number, "
                                      "got {got}"},
    [LRP_M_HF_INTEGER] = {"hf_integer", "option 'rope_scaling': '{field}' must be an integer in "
                                        "1..{max}, got {got}"},
    [LRP_M_HF_NEEDS] = {"hf_needs", "option 'rope_scaling': rope_type \"{type}\" needs {names}"},
    /* {what}: core's range or rule message in the fields' names (rp_model_cfg_check_shown) */
    [LRP_M_HF_RANGE] = {"hf_range", "option 'rope_scaling': {what}"},
    /* roper's attention_factor 0 is "the scaling's own", Hugging Face's multiplies cos and sin
     * by 0: not a value roper can hold */
    [LRP_M_HF_ZERO] = {"hf_zero", "option 'rope_scaling': 'attention_factor' 0 multiplies every "
                                  "score by 0 in Hugging Face's reading; leave the field out for "
                                  "the scaling's own factor"},
    /* DeepSeek's mscale and mscale_all_dim give attention_factor (their ratio:
     * lrp_opt_rope_scaling) */
    [LRP_M_HF_MSCALE] = {"hf_mscale",
                         "option 'rope_scaling': 'mscale' and 'mscale_all_dim' give an attention "
                         "factor of {got} (get_mscale(factor, mscale) / get_mscale(factor, "
                         "mscale_all_dim)); it must be a finite number > 0"},
    /* the own tables freq, angles, mix (freq.c: lrp_freq_tables, table_sizes, copy_table) */
    [LRP_M_FREQ_BOTH] = {"freq_both", "give option 'freq' or 'angles', not both"},
    [LRP_M_ANGLES_NOTHING] = {"angles_nothing", "option 'angles': nothing is rotated here (a "
                                                "rotary pe is needed)"},
    [LRP_M_ANGLES_CALLS] = {"angles_calls", "option 'angles': a function is sampled for {rows} "
                                            "positions x {half} pairs, more than 2^24 calls"},
    [LRP_M_ANGLES_VALUE] = {"angles_value", "option 'angles': the function's value at p = {p}, "
                                            "i = {i}"},
    [LRP_M_ENTRY] = {"entry", "option '{key}'{index}"},
    [LRP_M_FINITE_NUMBER] = {"finite_number", "{what} must be a finite number, got {got}"},
    [LRP_M_TABLE_TENSOR] = {"table_tensor", "option '{key}' must be a {dims}-D tensor ({shape}), "
                                            "got {got}"},
    [LRP_M_TABLE_KIND] = {"table_kind", "option '{key}' must be a tensor, a list{forms}, got "
                                        "{got}"},
    [LRP_M_TABLE_FIRST] = {"table_first", "option '{key}'[1] must be a list of {noun}, got {got}"},
    [LRP_M_TABLE_EMPTY] = {"table_empty", "option '{key}' must not be empty"},
    [LRP_M_TABLE_ROW] = {"table_row", "option '{key}'[{row}] must be a list of {n} {noun}, got "
                                      "{got}"},
    [LRP_M_MIX_SIZE] = {"mix_size", "option 'mix' is [{rows} x {n}]; [{A} x {half}] expected (the "
                                    "positions' axes x d_rot/2)"},
    /* positions (nn.c's reader) and option sections (lrp_optaxes) */
    [LRP_M_POS_KIND] = {"pos_kind", "{what} must be a table of integers{lists} or a 1-D "
                                    "tensor{matrix}{number}, got {got}"},
    [LRP_M_POS_LISTS] = {"pos_lists", " (or of lists of integers)"},
    [LRP_M_POS_MATRIX] = {"pos_matrix", " (or [n x axes])"},
    [LRP_M_POS_NUMBER] = {"pos_number", " or a number"},
    [LRP_M_POS_AXES] = {"pos_axes", "{what}[1] holds {n} integers: 1 to {max} axes expected"},
    [LRP_M_POS_ROW] = {"pos_row", "{what}[{row}] must be a list of {n} integers (as {what}[1]), "
                                  "got {got}"},
    [LRP_M_POS_INTEGER] = {"pos_integer", "{what}{index} must be an integer within 2^53, got "
                                          "{got}"},
    [LRP_M_SECTIONS] = {"sections", "option 'sections' must be a list of 1 to {max} pair counts "
                                    "(one per axis), got {got}"},
    [LRP_M_SECTIONS_ENTRY] = {"sections_entry", "option 'sections'[{row}] must be an integer >= 0 "
                                                "(a pair count), got {got}"},
};

/* Pushes template t with its count marks filled in (values[k] for marks[k]) and returns it; no
 * length limit. */
static const char *push_filled(lua_State *L, const char *t, const char *const *marks,
                               const char *const *values, int count)
{
    size_t longest = 0, n = strlen(t) + 1;
    for (int k = 0; k < count; k++) {
        size_t len = values[k] ? strlen(values[k]) : 0;
        longest = len > longest ? len : longest;
    }
    for (const char *p = t; *p; p++) n += *p == '{' ? longest : 0; /* room for every mark */
    luaL_Buffer b;
    char *buf = luaL_buffinitsize(L, &b, n);
    rp_fill_marks(buf, n, t, marks, values, count);
    luaL_pushresultsize(&b, strlen(buf));
    return lua_tostring(L, -1);
}

const char *lrp_pushmsg(lua_State *L, lrp_msg m, const char *const *values)
{
    return push_filled(L, lrp_msgs[m].text, lrp_mark_names, values, LRP_MK_COUNT);
}

void lrp_push_msgs(lua_State *L, const lrp_template *rows, int n, const char *const *marks,
                   const char *const *values, int count)
{
    lua_createtable(L, 0, n);
    for (int m = 0; m < n; m++) {
        push_filled(L, rows[m].text, marks, values, count);
        lua_setfield(L, -2, rows[m].name);
    }
}

int lrp_opterror(lua_State *L, int arg, lrp_msg m, const char *const *values)
{
    return lrp_argerror_msg(L, arg, lrp_pushmsg(L, m, values));
}

/* ---- numbers ---- */

void lrp_setstr(lua_State *L, const char *key, const char *s)
{
    if (!s) return;
    lua_pushstring(L, s);
    lua_setfield(L, -2, key);
}

const char *lrp_describe(lua_State *L, int idx)
{
    switch (lua_type(L, idx)) {
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx))
            return lua_pushfstring(L, "%I", (LUAI_UACINT)lua_tointeger(L, idx));
        /* a NaN as "nan" (printf's sign of a NaN differs between machines) */
        if (isnan((double)lua_tonumber(L, idx))) return lua_pushliteral(L, "nan");
        return lua_pushfstring(L, "%f", (LUAI_UACNUMBER)lua_tonumber(L, idx));
    case LUA_TSTRING: {
        size_t n;
        const char *s = lua_tolstring(L, idx, &n);
        if (n <= 40) return lua_pushfstring(L, "string \"%s\"", s);
        return lua_pushliteral(L, "string");
    }
    case LUA_TUSERDATA:
        if (luaL_getmetafield(L, idx, "__name") == LUA_TSTRING) return lua_tostring(L, -1);
        return lua_pushliteral(L, "userdata");
    default:
        return lua_pushstring(L, luaL_typename(L, idx));
    }
}

void lrp_checkend(lua_State *L, int idx, const char *last)
{
    if (lua_gettop(L) >= idx)
        lrp_argerror(L, idx, "unexpected argument after %s (%s)", last, lrp_describe(L, idx));
}

double lrp_checknumber(lua_State *L, int arg, const char *what)
{
    if (lua_type(L, arg) != LUA_TNUMBER)
        lrp_argerror(L, arg, "%s must be a number, got %s", what, lrp_describe(L, arg));
    return (double)lua_tonumber(L, arg);
}

double lrp_checkfinite(lua_State *L, int arg, const char *what)
{
    double x = lrp_checknumber(L, arg, what);
    if (!isfinite(x)) lrp_argerror(L, arg, "%s must be finite, got %s", what, lrp_describe(L, arg));
    return x;
}

int lrp_tointeger(lua_State *L, int idx, lua_Integer *out)
{
    if (lua_type(L, idx) != LUA_TNUMBER) return 0;
    int ok = 0;
    lua_Integer v = lua_tointegerx(L, idx, &ok);
    if (ok) *out = v;
    return ok;
}

lua_Integer lrp_checkint(lua_State *L, int arg, const char *what)
{
    lua_Integer v = 0;
    if (!lrp_tointeger(L, arg, &v))
        lrp_argerror(L, arg, "%s must be an integer, got %s", what, lrp_describe(L, arg));
    return v;
}

/* ---- shapes ---- */

int64_t lrp_numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

/* Reads the size at stack index idx (position pos, 1-based, in the shape) into *out; raises
 * `bad argument #arg` when it is not an integer >= 0 (or -1 when allow_infer). */
static void read_size(lua_State *L, int arg, int idx, int pos, int allow_infer, int64_t *out)
{
    lua_Integer v = 0;
    if (!lrp_tointeger(L, idx, &v))
        lrp_argerror(L, arg, "size %d must be an integer, got %s", pos, lrp_describe(L, idx));
    if (v < 0 && !(allow_infer && v == -1))
        lrp_argerror(L, arg, "size %d must be >= 0%s, got %I", pos, allow_infer ? " (or -1)" : "",
                     (LUAI_UACINT)v);
    if (v > RP_MAX_NUMEL)
        lrp_argerror(L, arg, "size %d is too large (%I > 2^40)", pos, (LUAI_UACINT)v);
    *out = (int64_t)v;
}

int lrp_checkshape(lua_State *L, int first, int last, int64_t *shape, int allow_infer)
{
    int ndim = 0;
    int type = lua_type(L, first);
    if (type == LUA_TTABLE) {
        lua_Unsigned n = lua_rawlen(L, first);
        if (n > RP_MAX_DIMS)
            lrp_argerror(L, first, "shape has %d dims, at most %d allowed",
                         (int)(n > 1000 ? 1000 : n), RP_MAX_DIMS);
        for (int i = 1; i <= (int)n; i++) {
            lua_rawgeti(L, first, i);
            read_size(L, first, -1, i, allow_infer, &shape[ndim++]);
            lua_pop(L, 1);
        }
    } else if (type == LUA_TNUMBER) {
        if (last - first + 1 > RP_MAX_DIMS)
            lrp_argerror(L, first, "shape has %d dims, at most %d allowed", last - first + 1,
                         RP_MAX_DIMS);
        for (int arg = first; arg <= last; arg++) {
            read_size(L, arg, arg, arg - first + 1, allow_infer, &shape[ndim]);
            ndim++;
        }
    } else {
        lrp_argerror(L, first, "shape expected (a table of sizes, or sizes as numbers), got %s",
                     lrp_describe(L, first));
    }
    int ninfer = 0;
    int64_t known[RP_MAX_DIMS], numel; /* the sizes, a -1 counted as 1 */
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == -1 && ++ninfer > 1) lrp_argerror(L, first, "only one size may be -1");
        known[i] = shape[i] == -1 ? 1 : shape[i];
    }
    if (!rp_shape_span(ndim, known, RP_MAX_NUMEL, &numel)) { /* the rule of rp_tensor_new */
        char buf[RP_SHAPE_STR_LEN];
        lrp_argerror(L, first, "shape %s has too many elements (more than 2^40)",
                     lrp_shape_str_n(buf, ndim, shape));
    }
    return ndim;
}

int lrp_shape_args(lua_State *L, int first, int last, int64_t *shape, int allow_infer)
{
    if (last < first)
        lrp_argerror(L, first,
                     "shape expected (a table of sizes, or sizes as numbers), got no value");
    if (lua_type(L, first) == LUA_TTABLE && last > first)
        lrp_checkend(L, first + 1, "the shape table");
    return lrp_checkshape(L, first, last, shape, allow_infer);
}

void lrp_infer_shape(lua_State *L, int arg, const rp_tensor *t, int ndim, int64_t *shape)
{
    int64_t numel = rp_tensor_numel(t), known = 1;
    int infer = -1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == -1) infer = i;
        else known *= shape[i]; /* bounded by lrp_checkshape */
    }
    char a[RP_SHAPE_STR_LEN], b[RP_SHAPE_STR_LEN];
    if (infer >= 0) {
        if (known == 0 || numel % known != 0)
            lrp_argerror(L, arg, "cannot fit %s (%I elements) into shape %s", lrp_shape_str(a, t),
                         (LUAI_UACINT)numel, lrp_shape_str_n(b, ndim, shape));
        shape[infer] = numel / known;
        known = numel;
    }
    if (known != numel)
        lrp_argerror(L, arg, "cannot fit %s (%I elements) into shape %s (%I elements)",
                     lrp_shape_str(a, t), (LUAI_UACINT)numel, lrp_shape_str_n(b, ndim, shape),
                     (LUAI_UACINT)known);
}

/* ---- dims and indices ---- */

int lrp_todim(lua_Integer d, int ndim)
{
    if (d < 0) {
        if (d < -(lua_Integer)ndim) return -1;
        return (int)(ndim + d);
    }
    if (d < 1 || d > ndim) return -1;
    return (int)(d - 1);
}

int64_t lrp_toindex(lua_Integer i, int64_t n)
{
    if (i < 0) {
        if (i < -(lua_Integer)n) return -1;
        return (int64_t)(n + i);
    }
    if (i < 1 || i > n) return -1;
    return (int64_t)(i - 1);
}

const char *lrp_base_hint(int zero)
{
    return zero ? "; dims and indices are 1-based (1 is the first, -1 the last)" : "";
}

int lrp_checkdim(lua_State *L, int arg, const rp_tensor *t)
{
    lua_Integer d = lrp_checkint(L, arg, "dim");
    int r = lrp_todim(d, t->ndim);
    if (r < 0) {
        char buf[RP_SHAPE_STR_LEN];
        lrp_argerror(L, arg, "dim %I out of range for %s%s", (LUAI_UACINT)d, lrp_shape_str(buf, t),
                     lrp_base_hint(d == 0));
    }
    return r;
}

int64_t lrp_checkindex(lua_State *L, int arg, const rp_tensor *t, int d)
{
    lua_Integer i = lrp_checkint(L, arg, "index");
    int64_t r = lrp_toindex(i, t->shape[d]);
    if (r < 0) {
        char buf[RP_SHAPE_STR_LEN];
        lrp_argerror(L, arg, "index %I out of range for dim %d of %s%s", (LUAI_UACINT)i, d + 1,
                     lrp_shape_str(buf, t), lrp_base_hint(i == 0));
    }
    return r;
}

/* ---- broadcasting ---- */

void lrp_check_broadcast_to(lua_State *L, int arg, const rp_tensor *src, const rp_tensor *dst)
{
    int lead = 0;
    while (src->ndim - lead > dst->ndim && src->shape[lead] == 1) lead++;
    int ok = src->ndim - lead <= dst->ndim;
    for (int i = 0; ok && i < src->ndim - lead; i++) {
        int64_t s = src->shape[src->ndim - 1 - i], d = dst->shape[dst->ndim - 1 - i];
        if (s != d && s != 1) ok = 0;
    }
    if (!ok) {
        char a[RP_SHAPE_STR_LEN], b[RP_SHAPE_STR_LEN];
        lrp_argerror(L, arg, "cannot broadcast %s to %s", lrp_shape_str(a, src),
                     lrp_shape_str(b, dst));
    }
}

rp_status lrp_squeeze_lead(rp_tensor *out, const rp_tensor *src, int dst_ndim)
{
    rp_tensor_view(out, src);
    while (out->ndim > dst_ndim && out->shape[0] == 1) {
        rp_tensor next;
        rp_status st = rp_tensor_select(&next, out, 0, 0);
        rp_tensor_release(out);
        if (st != RP_OK) return st;
        *out = next;
    }
    return RP_OK;
}

/* ---- option tables ---- */

const char lrp_freq_keys_mark[] = "(the frequency rows)";
const char lrp_attention_keys_mark[] = "(the attention's rows)";
const char lrp_linear_keys_mark[] = "(linear attention's rows)";

int lrp_is_scaling_row(const rp_cfg_key *k)
{
    return k->use == RP_CFG_SCALED || k->use == RP_CFG_SCALINGS ||
           k->offset == offsetof(rp_model_cfg, freq.scaling);
}

/* The rows of rp.linear_attention at their places (rp_cfg_key.linear), the names of fill in the
 * places no row holds, in order, into out from at (n entries); returns the new at. */
static int expand_linear(const char *const *fill, const char **out, int at, int n)
{
    int last = 0;
    for (int i = 0; i < rp_model_cfg_nkeys; i++)
        if (rp_model_cfg_keys[i].linear > last) last = rp_model_cfg_keys[i].linear;
    for (int place = 1; (place <= last || *fill) && at < n - 1; place++) {
        const char *name = NULL;
        for (int i = 0; i < rp_model_cfg_nkeys && !name; i++)
            if (rp_model_cfg_keys[i].linear == place) name = rp_model_cfg_keys[i].name;
        if (!name && *fill) name = *fill++;
        if (name) out[at++] = name;
    }
    return at;
}

int lrp_known_names(const char *const *known, const char **out, int n)
{
    int at = 0;
    for (const char *const *k = known; *k && at < n - 1; k++) {
        if (*k == lrp_linear_keys_mark) { /* the entries after it fill its free places */
            at = expand_linear(k + 1, out, at, n);
            break;
        }
        if (*k == lrp_attention_keys_mark) {
            for (int i = 0; i < rp_model_cfg_nkeys && at < n - 1; i++) {
                rp_cfg_scope s = rp_model_cfg_scope(&rp_model_cfg_keys[i]);
                if (s == RP_CFG_SCOPE_PE || s == RP_CFG_SCOPE_REL)
                    out[at++] = rp_model_cfg_keys[i].name;
            }
            continue;
        }
        if (*k != lrp_freq_keys_mark) {
            out[at++] = *k;
            continue;
        }
        for (int pass = 1; pass >= 0; pass--)
            for (int i = 0; i < rp_model_cfg_nkeys && at < n - 1; i++) {
                const rp_cfg_key *r = &rp_model_cfg_keys[i];
                if (rp_model_cfg_scope(r) == RP_CFG_SCOPE_FREQ && lrp_is_scaling_row(r) == pass)
                    out[at++] = r->name;
            }
    }
    out[at] = NULL;
    return at;
}

int lrp_checkopts(lua_State *L, int idx, const char *const *given)
{
    const char *buf[LRP_MAX_KNOWN];
    lrp_known_names(given, buf, LRP_MAX_KNOWN);
    const char *const *known = buf;
    int type = lua_type(L, idx);
    if (type == LUA_TNONE || type == LUA_TNIL) return 0;
    if (type != LUA_TTABLE)
        lrp_argerror(L, idx, "options table expected, got %s", lrp_describe(L, idx));
    idx = lua_absindex(L, idx);
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
        lua_pop(L, 1); /* value */
        if (lua_type(L, -1) != LUA_TSTRING)
            lrp_opterror(L, idx, LRP_M_NAMES, LRP_MARKS([LRP_MK_GOT] = lrp_describe(L, -1)));
        const char *key = lua_tostring(L, -1);
        int found = 0;
        for (const char *const *k = known; *k; k++)
            if (strcmp(*k, key) == 0) found = 1;
        if (!found) {
            luaL_Buffer b;
            luaL_buffinit(L, &b);
            for (const char *const *k = known; *k; k++) {
                if (k != known) luaL_addstring(&b, ", ");
                luaL_addstring(&b, *k);
            }
            luaL_pushresult(&b);
            lrp_opterror(L, idx, LRP_M_UNKNOWN,
                         LRP_MARKS([LRP_MK_KEY] = key, [LRP_MK_NAMES] = lua_tostring(L, -1)));
        }
    }
    return 1;
}

/* Pushes field key of the options table at idx (nil when idx is not a table); returns its type. */
static int opt_get(lua_State *L, int idx, const char *key)
{
    if (lua_type(L, idx) != LUA_TTABLE) {
        lua_pushnil(L);
        return LUA_TNIL;
    }
    return lua_getfield(L, idx, key);
}

int lrp_hasopt(lua_State *L, int idx, const char *key)
{
    int t = opt_get(L, idx, key);
    lua_pop(L, 1);
    return t != LUA_TNIL;
}

double lrp_optnumber(lua_State *L, int idx, const char *key, double def)
{
    int t = opt_get(L, idx, key);
    if (t == LUA_TNIL) {
        lua_pop(L, 1);
        return def;
    }
    if (t != LUA_TNUMBER)
        lrp_opterror(L, idx, LRP_M_NUMBER,
                     LRP_MARKS([LRP_MK_KEY] = key, [LRP_MK_GOT] = lrp_describe(L, -1)));
    double v = (double)lua_tonumber(L, -1);
    lua_pop(L, 1);
    return v;
}

double lrp_optfinite(lua_State *L, int idx, const char *key, double def)
{
    double v = lrp_optnumber(L, idx, key, def);
    if (!isfinite(v)) {
        lua_pushnumber(L, (lua_Number)v);
        lrp_opterror(L, idx, LRP_M_FINITE,
                     LRP_MARKS([LRP_MK_KEY] = key, [LRP_MK_GOT] = lrp_describe(L, -1)));
    }
    return v;
}

lua_Integer lrp_optinteger(lua_State *L, int idx, const char *key, lua_Integer def)
{
    int t = opt_get(L, idx, key);
    if (t == LUA_TNIL) {
        lua_pop(L, 1);
        return def;
    }
    lua_Integer v = 0;
    if (!lrp_tointeger(L, -1, &v))
        lrp_opterror(L, idx, LRP_M_INTEGER,
                     LRP_MARKS([LRP_MK_KEY] = key, [LRP_MK_GOT] = lrp_describe(L, -1)));
    lua_pop(L, 1);
    return v;
}

int lrp_optboolean(lua_State *L, int idx, const char *key, int def)
{
    int t = opt_get(L, idx, key);
    if (t == LUA_TNIL) {
        lua_pop(L, 1);
        return def;
    }
    if (t != LUA_TBOOLEAN)
        lrp_opterror(L, idx, LRP_M_BOOLEAN,
                     LRP_MARKS([LRP_MK_KEY] = key, [LRP_MK_GOT] = lrp_describe(L, -1)));
    int v = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return v;
}

int lrp_optenum(lua_State *L, int idx, const char *key, const char *const *names, int def)
{
    int t = opt_get(L, idx, key);
    if (t == LUA_TNIL) {
        lua_pop(L, 1);
        return def;
    }
    if (t == LUA_TSTRING) {
        const char *s = lua_tostring(L, -1);
        for (int i = 0; names[i]; i++) {
            if (strcmp(names[i], s) == 0) {
                lua_pop(L, 1);
                return i;
            }
        }
    }
    luaL_Buffer b;
    int top = lua_gettop(L);
    luaL_buffinit(L, &b);
    for (int i = 0; names[i]; i++) {
        if (i) luaL_addstring(&b, ", ");
        luaL_addchar(&b, '"');
        luaL_addstring(&b, names[i]);
        luaL_addchar(&b, '"');
    }
    luaL_pushresult(&b);
    const char *allowed = lua_tostring(L, -1); /* stays on the stack while it is used */
    const char *got = lrp_describe(L, top);    /* pushes its own string */
    return lrp_opterror(L, idx, LRP_M_ENUM,
                        LRP_MARKS([LRP_MK_KEY] = key, [LRP_MK_NAMES] = allowed,
                                  [LRP_MK_GOT] = got));
}

int lrp_optrotate(lua_State *L, int idx, const char *key)
{
    int t = opt_get(L, idx, key);
    if (t == LUA_TNIL) {
        lua_pop(L, 1);
        return 0;
    }
    int mask = -1;
    if (t == LUA_TSTRING) {
        size_t len;
        const char *s = lua_tolstring(L, -1, &len);
        if (strlen(s) == len) mask = rp_rotate_from_name(s);
    }
    if (mask > 0) {
        lua_pop(L, 1);
        return mask;
    }
    const char *got = lrp_describe(L, lua_gettop(L));
    return lrp_opterror(L, idx, LRP_M_ROTATE, LRP_MARKS([LRP_MK_KEY] = key, [LRP_MK_GOT] = got));
}

int lrp_optcfgvalue(lua_State *L, int idx, rp_model_cfg *cfg, const rp_cfg_key *k)
{
    if (!lrp_hasopt(L, idx, k->name)) return 0;
    switch (k->type) {
    case RP_CFG_NUM: rp_model_cfg_set_num(cfg, k, lrp_optnumber(L, idx, k->name, 0.0)); break;
    case RP_CFG_ENUM:
        rp_model_cfg_set_int(cfg, k, lrp_optenum(L, idx, k->name, k->names, 0));
        break;
    case RP_CFG_ROTATE: rp_model_cfg_set_int(cfg, k, lrp_optrotate(L, idx, k->name)); break;
    case RP_CFG_BOOL: rp_model_cfg_set_int(cfg, k, lrp_optboolean(L, idx, k->name, 0)); break;
    default: /* an integer; a seed keeps a negative one's bits */
        rp_model_cfg_set_int(cfg, k, (int64_t)lrp_optinteger(L, idx, k->name, 0));
    }
    return 1;
}

void lrp_optcfgkey(lua_State *L, int idx, rp_model_cfg *cfg, const rp_cfg_key *k)
{
    if (lrp_optcfgvalue(L, idx, cfg, k) && rp_model_cfg_check_key(cfg, k, 1) != RP_OK)
        lrp_argerror(L, idx, "%s", rp_last_error());
}

void lrp_check_used(lua_State *L, int idx, rp_model_cfg *view)
{
    rp_model_cfg_normalise(view);
    if (rp_model_cfg_check_used(view) != RP_OK) lrp_argerror(L, idx, "%s", rp_last_error());
}

/* ---- files ---- */

const char *lrp_checkpath(lua_State *L, int arg)
{
    if (lua_type(L, arg) != LUA_TSTRING)
        lrp_argerror(L, arg, "path must be a string, got %s", lrp_describe(L, arg));
    size_t len;
    const char *path = lua_tolstring(L, arg, &len);
    if (len == 0) lrp_argerror(L, arg, "path must not be empty");
    if (strlen(path) != len) lrp_argerror(L, arg, "path contains a NUL byte");
    return path;
}

int lrp_pushfail(lua_State *L)
{
    lua_pushnil(L);
    lua_pushstring(L, rp_last_error());
    return 2;
}

const char *const lrp_nonfinite_names[] = {"error", "skip", NULL};

