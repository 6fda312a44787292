/* roper.Tokenizer: SentencePiece tokenizers (text/tokenizer.h): rp.tokenizer.train,
 * rp.tokenizer.load, and the methods encode, decode, vocab_size, piece, id, unk_id, bos_id,
 * eos_id, byte_fallback, free.
 *
 * The userdata holds the rp_tok pointer (NULL before it is made and after free, __gc or
 * __close); its user value 1 is the .model path (for tostring). Options and arguments are checked
 * here, through core's own checks (rp_tok_train_cfg_check, rp_tok_check_id) where core has them,
 * before core runs; a file that cannot be read, written or trained on gives nil, message; misuse
 * raises. Buffers are Lua userdata, so a Lua error never leaks.
 */
#include <math.h>
#include <string.h>

#include "args.h"
#include "modules.h"
#include "tokenizer.h"
#include "userdata.h"

/* The longest text encode takes (bytes); the ids buffer starts at as many ids. */
#define MAX_TEXT ((size_t)1 << 30)

typedef struct lrp_tok {
    rp_tok *t;
} lrp_tok;

static rp_tok *check_tok(lua_State *L, int idx)
{
    lrp_tok *u = (lrp_tok *)lrp_checkudata(L, idx, LRP_TOKENIZER_MT);
    if (u->t == NULL) lrp_argerror(L, idx, "attempt to use a released tokenizer");
    return u->t;
}

/* Pushes a new, empty tokenizer userdata (one user value, the path); paces the collector first
 * (the model is C memory Lua does not see). */
static lrp_tok *new_tok(lua_State *L)
{
    lrp_gc_pace(L, 0);
    lrp_tok *u = (lrp_tok *)lua_newuserdatauv(L, sizeof *u, 1);
    u->t = NULL;
    luaL_setmetatable(L, LRP_TOKENIZER_MT);
    return u;
}

static int tok_release(lua_State *L)
{
    lrp_tok *u = (lrp_tok *)luaL_testudata(L, 1, LRP_TOKENIZER_MT);
    if (u && u->t) {
        rp_tok_free(u->t);
        u->t = NULL;
    }
    return 0;
}

/* The result of a constructor whose core call returned st, with the userdata at idx: the
 * tokenizer, or nil and the message of a file problem, or an error. */
static int finish(lua_State *L, int idx, rp_status st)
{
    if (st == RP_OK) {
        lua_pushvalue(L, idx);
        return 1;
    }
    if (st == RP_ERR_NOMEM) return lrp_raise(L, st);
    lua_pushnil(L);
    lua_pushstring(L, rp_last_error());
    return 2;
}

/* A path string at stack index idx (a value read from an option), checked as option key. */
static const char *opt_path(lua_State *L, int opts, int idx, const char *key, const char *what)
{
    if (lua_type(L, idx) != LUA_TSTRING)
        lrp_argerror(L, opts, "option '%s' must be %s, got %s", key, what, lrp_describe(L, idx));
    size_t len;
    const char *s = lua_tolstring(L, idx, &len);
    if (len == 0) lrp_argerror(L, opts, "option '%s' must not be empty", key);
    if (strlen(s) != len) lrp_argerror(L, opts, "option '%s' contains a NUL byte", key);
    return s;
}

/* rp.tokenizer.train(opts) -> tok | nil, message */
static int l_train(lua_State *L)
{
    static const char *const known[] = {"input", "model", "vocab_size", "type", "byte_fallback",
                                        "character_coverage", "max_sentence_length",
                                        "input_sentence_size", "threads", NULL};
    if (lua_type(L, 1) != LUA_TTABLE)
        return lrp_argerror(L, 1, "options table expected (with 'input' and 'model'), got %s",
                            lrp_describe(L, 1));
    lrp_checkopts(L, 1, known);
    lua_settop(L, 1);
    rp_tok_train_cfg cfg = rp_tok_train_cfg_default();
    /* 2: model path, 3: the input paths (a table of strings this call owns) */
    int type = lua_getfield(L, 1, "model");
    if (type == LUA_TNIL) return lrp_argerror(L, 1, "option 'model' (the .model file to write) is required");
    const char *model = opt_path(L, 1, 2, "model", "a file name");
    lua_newtable(L);
    type = lua_getfield(L, 1, "input"); /* 4 */
    if (type == LUA_TNIL)
        return lrp_argerror(L, 1, "option 'input' (a text file or a table of them) is required");
    int64_t n = 0;
    if (type == LUA_TSTRING) {
        opt_path(L, 1, 4, "input", "a file name or a table of file names");
        lua_pushvalue(L, 4);
        lua_rawseti(L, 3, ++n);
    } else if (type == LUA_TTABLE) {
        int64_t len = (int64_t)lua_rawlen(L, 4);
        if (len < 1) return lrp_argerror(L, 1, "option 'input' must not be an empty table");
        if (len > 100000) return lrp_argerror(L, 1, "option 'input' has more than 100000 files");
        for (int64_t i = 1; i <= len; i++) {
            lua_rawgeti(L, 4, (lua_Integer)i);
            if (lua_type(L, -1) != LUA_TSTRING)
                return lrp_argerror(L, 1, "option 'input' [%I] must be a file name, got %s",
                                    (LUAI_UACINT)i, lrp_describe(L, -1));
            size_t sl;
            const char *s = lua_tolstring(L, -1, &sl);
            if (sl == 0 || strlen(s) != sl)
                return lrp_argerror(L, 1, "option 'input' [%I] %s", (LUAI_UACINT)i,
                                    sl == 0 ? "must not be empty" : "contains a NUL byte");
            lua_rawseti(L, 3, ++n);
        }
    } else {
        return lrp_argerror(L, 1, "option 'input' must be a file name or a table of file names, got %s",
                            lrp_describe(L, 4));
    }
    lua_settop(L, 3);
    cfg.vocab_size = (int64_t)lrp_optinteger(L, 1, "vocab_size", (lua_Integer)cfg.vocab_size);
    cfg.type = (rp_tok_type)lrp_optenum(L, 1, "type", rp_tok_type_names, (int)cfg.type);
    cfg.byte_fallback = lrp_optboolean(L, 1, "byte_fallback", cfg.byte_fallback);
    cfg.character_coverage = lrp_optnumber(L, 1, "character_coverage", cfg.character_coverage);
    cfg.max_sentence_length = (int64_t)lrp_optinteger(L, 1, "max_sentence_length",
                                                      (lua_Integer)cfg.max_sentence_length);
    cfg.input_sentence_size = (int64_t)lrp_optinteger(L, 1, "input_sentence_size",
                                                      (lua_Integer)cfg.input_sentence_size);
    cfg.threads = (int64_t)lrp_optinteger(L, 1, "threads", (lua_Integer)cfg.threads);
    /* the paths as C strings, in a buffer of this call (the strings stay in table 3) */
    const char **paths = (const char **)lua_newuserdatauv(L, (size_t)n * sizeof *paths, 0); /* 4 */
    for (int64_t i = 0; i < n; i++) {
        lua_rawgeti(L, 3, (lua_Integer)(i + 1));
        paths[i] = lua_tostring(L, -1); /* table 3 keeps the string */
        lua_pop(L, 1);
    }
    cfg.inputs = paths;
    cfg.n_inputs = n;
    if (rp_tok_train_cfg_check(&cfg) != RP_OK) return lrp_argerror(L, 1, "%s", rp_last_error());
    lrp_tok *u = new_tok(L); /* 5 */
    lua_pushvalue(L, 2);
    lua_setiuservalue(L, 5, 1);
    return finish(L, 5, rp_tok_train(&cfg, model, &u->t));
}

/* rp.tokenizer.load(path) -> tok | nil, message */
static int l_load(lua_State *L)
{
    const char *path = lrp_checkpath(L, 1);
    lua_settop(L, 1);
    lrp_tok *u = new_tok(L); /* 2 */
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, 2, 1);
    return finish(L, 2, rp_tok_load(path, &u->t));
}

/* tostring(tok): "roper.Tokenizer: unigram, vocab 8000, byte fallback (m.model)" */
static int tok_tostring(lua_State *L)
{
    lrp_tok *u = (lrp_tok *)lrp_checkudata(L, 1, LRP_TOKENIZER_MT);
    if (u->t == NULL) {
        lua_pushliteral(L, "roper.Tokenizer (released)");
        return 1;
    }
    const char *type = rp_tok_type_name(u->t);
    int64_t V = rp_tok_vocab_size(u->t);
    int bf = rp_tok_byte_fallback(u->t);
    lua_getiuservalue(L, 1, 1);
    const char *path = lua_tostring(L, -1);
    lua_pushfstring(L, "roper.Tokenizer: %s, vocab %I%s (%s)", type, (LUAI_UACINT)V,
                    bf ? ", byte fallback" : "", path ? path : "?");
    return 1;
}

/* tok:encode(text[, {tensor = true, continued = true}]) -> { ids } | tensor (continued: the text
 * continues another, rp_tok_encode_continued) */
static rp_status encode_with(rp_tok *t, int continued, const char *text, size_t len, int32_t *ids,
                             int64_t cap, int64_t *n)
{
    return continued ? rp_tok_encode_continued(t, text, len, ids, cap, n)
                     : rp_tok_encode(t, text, len, ids, cap, n);
}

static int tok_encode(lua_State *L)
{
    static const char *const known[] = {"tensor", "continued", NULL};
    check_tok(L, 1);
    if (lua_type(L, 2) != LUA_TSTRING)
        return lrp_argerror(L, 2, "text must be a string, got %s", lrp_describe(L, 2));
    size_t len;
    const char *text = lua_tolstring(L, 2, &len);
    if (len > MAX_TEXT) return lrp_argerror(L, 2, "text is longer than 1 GiB");
    lrp_checkopts(L, 3, known);
    int as_tensor = lrp_optboolean(L, 3, "tensor", 0);
    int continued = lrp_optboolean(L, 3, "continued", 0);
    lua_settop(L, 3);
    int64_t cap = (int64_t)len + 16, n = 0;
    int32_t *ids = (int32_t *)lua_newuserdatauv(L, (size_t)cap * sizeof(int32_t), 0); /* 4 */
    rp_status st = encode_with(check_tok(L, 1), continued, text, len, ids, cap, &n);
    if (st == RP_OK && n > cap) { /* a normalization that lengthens the text */
        cap = n;
        ids = (int32_t *)lua_newuserdatauv(L, (size_t)cap * sizeof(int32_t), 0);
        lua_replace(L, 4);
        st = encode_with(check_tok(L, 1), continued, text, len, ids, cap, &n);
    }
    /* core's refusal of continued for a model that marks word ends is about the option */
    if (st == RP_ERR_ARG && continued && rp_tok_whitespace_suffix(check_tok(L, 1)))
        return lrp_argerror(L, 3, "option 'continued': %s", rp_last_error());
    if (st == RP_ERR_ARG) return lrp_argerror(L, 2, "%s", rp_last_error());
    if (st != RP_OK) return lrp_raise(L, st);
    if (n > cap) return luaL_error(L, "tok:encode: the ids changed between two calls");
    if (as_tensor) {
        rp_tensor *x = lrp_newtensor(L);
        int64_t shape[1] = {n};
        st = rp_tensor_new(x, 1, shape);
        if (st != RP_OK) return lrp_raise(L, st);
        float *d = rp_tensor_data(x);
        for (int64_t i = 0; i < n; i++) d[i] = (float)ids[i]; /* exact: ids < 2^24 */
        return 1;
    }
    lua_createtable(L, n > INT32_MAX ? INT32_MAX : (int)n, 0);
    for (int64_t i = 0; i < n; i++) {
        lua_pushinteger(L, (lua_Integer)ids[i]);
        lua_rawseti(L, -2, (lua_Integer)(i + 1));
    }
    return 1;
}

/* The id at stack index vidx (entry pos of ids, argument arg) into ids[pos - 1]: an integer in
 * the vocabulary, else raises. */
static void read_id(lua_State *L, int arg, int vidx, int64_t pos, int32_t *out)
{
    lua_Integer v = 0;
    if (!lrp_tointeger(L, vidx, &v))
        lrp_argerror(L, arg, "id at [%I] must be an integer, got %s", (LUAI_UACINT)pos,
                     lrp_describe(L, vidx));
    if (rp_tok_check_id(check_tok(L, 1), (int64_t)v, pos) != RP_OK)
        lrp_argerror(L, arg, "%s", rp_last_error());
    *out = (int32_t)v;
}

/* tok:decode(ids) -> string (ids: a table or a 1-D tensor) */
static int tok_decode(lua_State *L)
{
    check_tok(L, 1);
    lua_settop(L, 2);
    int64_t n = 0;
    int is_tensor = lrp_totensor(L, 2) != NULL;
    if (is_tensor) {
        rp_tensor *x = lrp_checktensor(L, 2);
        if (x->ndim != 1) {
            char buf[RP_SHAPE_STR_LEN];
            return lrp_argerror(L, 2, "ids must be a table or a 1-D tensor, got %s",
                                lrp_shape_str(buf, x));
        }
        n = x->shape[0];
    } else if (lua_type(L, 2) == LUA_TTABLE) {
        n = (int64_t)lua_rawlen(L, 2);
    } else {
        return lrp_argerror(L, 2, "ids must be a table or a 1-D tensor, got %s", lrp_describe(L, 2));
    }
    if (n > (int64_t)(MAX_TEXT / sizeof(int32_t))) return lrp_argerror(L, 2, "ids has too many entries");
    int32_t *ids = (int32_t *)lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof(int32_t), 0); /* 3 */
    size_t cap = (size_t)n * 8 + 64, len = 0;
    char *out = (char *)lua_newuserdatauv(L, cap, 0); /* 4 */
    if (is_tensor) {
        rp_tensor *x = lrp_checktensor(L, 2); /* again after the allocations */
        const float *d = rp_tensor_data(x);
        int64_t stride = x->stride[0];
        for (int64_t i = 0; i < n; i++) {
            double v = (double)d[i * stride];
            if (v == floor(v) && fabs(v) <= 2147483648.0) {
                if (rp_tok_check_id(check_tok(L, 1), (int64_t)v, i + 1) != RP_OK)
                    return lrp_argerror(L, 2, "%s", rp_last_error());
                ids[i] = (int32_t)v;
            } else {
                lua_pushnumber(L, (lua_Number)v);
                return lrp_argerror(L, 2, "id at [%I] must be an integer, got %s",
                                    (LUAI_UACINT)(i + 1), lrp_describe(L, -1));
            }
        }
    } else {
        for (int64_t i = 0; i < n; i++) {
            lua_rawgeti(L, 2, (lua_Integer)(i + 1));
            read_id(L, 2, -1, i + 1, &ids[i]);
            lua_pop(L, 1);
        }
    }
    rp_status st = rp_tok_decode(check_tok(L, 1), ids, n, out, cap, &len);
    if (st == RP_OK && len > cap) {
        cap = len;
        out = (char *)lua_newuserdatauv(L, cap, 0);
        lua_replace(L, 4);
        st = rp_tok_decode(check_tok(L, 1), ids, n, out, cap, &len);
    }
    if (st != RP_OK) return lrp_raise(L, st);
    if (len > cap) return luaL_error(L, "tok:decode: the text changed between two calls");
    lua_pushlstring(L, out, len);
    return 1;
}

/* tok:piece(id) -> string */
static int tok_piece(lua_State *L)
{
    check_tok(L, 1);
    lua_Integer id = lrp_checkint(L, 2, "id");
    const char *p = NULL;
    size_t len = 0;
    if (rp_tok_check_id(check_tok(L, 1), (int64_t)id, 0) != RP_OK)
        return lrp_argerror(L, 2, "%s", rp_last_error());
    lua_settop(L, 2);
    rp_tok_piece(check_tok(L, 1), (int32_t)id, &p, &len);
    /* copied into a buffer of this call first: pushing a string allocates, which may run a
     * finalizer that frees the tokenizer */
    char *buf = (char *)lua_newuserdatauv(L, len ? len : 1, 0);
    rp_tok_piece(check_tok(L, 1), (int32_t)id, &p, &len);
    memcpy(buf, p, len);
    lua_pushlstring(L, buf, len);
    return 1;
}

/* tok:id(piece) -> integer (unk_id for a piece the vocabulary has not) */
static int tok_id(lua_State *L)
{
    check_tok(L, 1);
    if (lua_type(L, 2) != LUA_TSTRING)
        return lrp_argerror(L, 2, "piece must be a string, got %s", lrp_describe(L, 2));
    size_t len;
    const char *s = lua_tolstring(L, 2, &len);
    lua_pushinteger(L, (lua_Integer)rp_tok_id(check_tok(L, 1), s, len));
    return 1;
}

/* tok:vocab_size(), tok:unk_id(), tok:bos_id(), tok:eos_id() -> integer (-1: the model has no
 * such piece) and tok:byte_fallback() -> boolean: queries of the model, one row each (the wrapper
 * comes from the declaration: lrp_set_queries), the core function that answers it. */
typedef struct tok_query_row {
    const char *name;
    int64_t (*size)(const rp_tok *t);
    int32_t (*id)(const rp_tok *t);
    int (*flag)(const rp_tok *t);
} tok_query_row;

static const tok_query_row tok_queries[] = {
    {"vocab_size", rp_tok_vocab_size, NULL, NULL},
    {"unk_id", NULL, rp_tok_unk_id, NULL},
    {"bos_id", NULL, rp_tok_bos_id, NULL},
    {"eos_id", NULL, rp_tok_eos_id, NULL},
    {"byte_fallback", NULL, NULL, rp_tok_byte_fallback},
};

/* One query: its row is the closure's upvalue. */
static int tok_query(lua_State *L)
{
    const tok_query_row *q = (const tok_query_row *)lua_touserdata(L, lua_upvalueindex(1));
    const rp_tok *t = check_tok(L, 1);
    if (q->flag) lua_pushboolean(L, q->flag(t));
    else lua_pushinteger(L, (lua_Integer)(q->size ? q->size(t) : q->id(t)));
    return 1;
}

static const luaL_Reg tok_methods[] = {
    {"encode", tok_encode}, {"decode", tok_decode}, {"piece", tok_piece}, {"id", tok_id},
    {NULL, NULL}};

static const luaL_Reg tok_funcs[] = {{"train", l_train}, {"load", l_load}, {NULL, NULL}};

void lrp_open_tokenizer(lua_State *L, int mod)
{
    mod = lua_absindex(L, mod);
    lrp_open_type(L, mod, LRP_TOKENIZER_MT, "Tokenizer", tok_methods, tok_release, tok_tostring);
    lua_getfield(L, mod, "Tokenizer"); /* the method table */
    LRP_SET_QUERIES(L, -1, tok_query, tok_queries);
    lua_pop(L, 1);

    luaL_newlib(L, tok_funcs);
    lua_setfield(L, mod, "tokenizer");
}
