/* roper.Task: the task generators of tasks/task.h (rp.tasks.addition, rp.tasks.substring_index,
 * rp.tasks.substring_prefix, rp.tasks.text, rp.tasks.grid_offset, rp.tasks.lm), and the task
 * table for the Lua parts (internals.task_keys): vocabulary, encode/decode,
 * packed training batches as [B x seq_len] tensors, evaluation problems and the answer check, and
 * the 2-D layout positions of grid_offset.
 *
 * The userdata holds the rp_task pointer (NULL before rp_task_new succeeds and after
 * task:free(), __gc or __close); its user value 1 is the path string of a text task (core's
 * config points into it, so it lives as long as the task). The options are the rows of core's
 * task table (tasks/task.h), read here by type and checked by the rows one by one before
 * rp_task_new runs; file problems of rp.tasks.text and rp.tasks.lm are returned as nil, "path:
 * reason" (Lua io style), misuse raises. Scratch buffers are Lua userdata and results are pushed
 * as empty tensors before core fills them, so a Lua error never leaks.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "modules.h"
#include "userdata.h"
#include "task.h"

typedef struct lrp_task {
    rp_task *t;
} lrp_task;

static const char *const split_names[] = {"train", "valid", "test", NULL};

/* ---- the userdata ---- */

/* The live task at idx: raises "roper.Task expected, got X" and "attempt to use a released
 * task". */
static rp_task *check_task(lua_State *L, int idx)
{
    lrp_task *u = (lrp_task *)lrp_checkudata(L, idx, LRP_TASK_MT);
    if (u->t == NULL) lrp_argerror(L, idx, "attempt to use a released task");
    return u->t;
}

/* Pushes a new, empty (released-state) task userdata with one user value; paces the collector
 * first (lrp_gc_pace). */
static lrp_task *new_task(lua_State *L)
{
    lrp_gc_pace(L, 0);
    lrp_task *u = (lrp_task *)lua_newuserdatauv(L, sizeof *u, 1);
    u->t = NULL; /* empty: safe for __gc */
    luaL_setmetatable(L, LRP_TASK_MT);
    return u;
}

/* __gc, __close and task:free(): free the task; safe on a released task and when called twice. */
static int t_release(lua_State *L)
{
    lrp_task *u = (lrp_task *)luaL_testudata(L, 1, LRP_TASK_MT);
    if (u && u->t) {
        rp_task_free(u->t);
        u->t = NULL;
    }
    return 0;
}

static int64_t vocab_size(const rp_task *t)
{
    int64_t n = 0;
    rp_task_vocab(t, &n);
    return n;
}

/* tostring(task): "roper.Task: addition (writeup, up to 8 digits), vocab 19, seq_len 256". */
static int t_tostring(lua_State *L)
{
    lrp_task *u = (lrp_task *)lrp_checkudata(L, 1, LRP_TASK_MT);
    if (u->t == NULL) {
        lua_pushliteral(L, "roper.Task (released)");
        return 1;
    }
    const rp_task_cfg c = *rp_task_config(u->t); /* copies: pushing may release the task */
    int64_t vocab = vocab_size(u->t);
    switch (c.kind) {
    case RP_TASK_ADDITION:
        lua_pushfstring(L, "addition (%s, up to %I digit%s%s)", rp_add_format_names[c.format],
                        (LUAI_UACINT)c.max_digits, c.max_digits == 1 ? "" : "s",
                        c.labml_digit_quirk ? ", digit quirk" : "");
        break;
    case RP_TASK_SUBSTR_INDEX:
        lua_pushfstring(L, "substring_index (%I letters)", (LUAI_UACINT)c.str_len);
        break;
    case RP_TASK_SUBSTR_PREFIX:
        lua_pushfstring(L, "substring_prefix (copies of %I, filler 1..%I)",
                        (LUAI_UACINT)c.substr_len, (LUAI_UACINT)(c.rnd_len - 1));
        break;
    case RP_TASK_GRID_OFFSET:
        lua_pushfstring(L, "grid_offset (%I x %I, %I letters, offsets up to %I)",
                        (LUAI_UACINT)c.rows, (LUAI_UACINT)c.cols, (LUAI_UACINT)c.alphabet,
                        (LUAI_UACINT)c.max_offset);
        break;
    default:
        lua_getiuservalue(L, 1, 1);
        lua_pushfstring(L, "%s (%s)", c.kind == RP_TASK_LM ? "lm" : "text",
                        lua_tostring(L, -1) ? lua_tostring(L, -1) : "?");
        break;
    }
    lua_pushfstring(L, "roper.Task: %s, vocab %I, seq_len %I", lua_tostring(L, -1),
                    (LUAI_UACINT)vocab, (LUAI_UACINT)c.seq_len);
    return 1;
}

/* ---- construction ---- */

/* Checks the options table at idx (a table or nil) against known and the optional `kind` key
 * (as task:config() reports it; it must name the constructor). */
static void check_task_opts(lua_State *L, int idx, const char *const *known, rp_task_kind kind)
{
    lrp_checkopts(L, idx, known);
    if (lrp_hasopt(L, idx, "kind")) {
        int k = lrp_optenum(L, idx, "kind", rp_task_kind_names, (int)kind);
        if (k != (int)kind)
            lrp_argerror(L, idx, "option 'kind' is \"%s\", but this is rp.tasks.%s",
                         rp_task_kind_names[k], rp_task_kind_names[kind]);
    }
}

/* Makes the task from cfg into a new userdata (pushed). Returns 1 (the task) or, for a failing
 * text task with a file problem, 2 (nil, "path: reason"). */
static int make_task(lua_State *L, int opts, const rp_task_cfg *cfg)
{
    lrp_task *u = new_task(L);
    if (cfg->path) { /* keep the path string alive with the task */
        lua_pushstring(L, cfg->path);
        lua_setiuservalue(L, -2, 1);
        lua_getiuservalue(L, -1, 1);
        rp_task_cfg c = *cfg;
        c.path = lua_tostring(L, -1);
        lua_pop(L, 1); /* the user value keeps it */
        u->t = rp_task_new(&c);
    } else {
        u->t = rp_task_new(cfg);
    }
    if (u->t != NULL) return 1;
    const char *msg = rp_last_error();
    if (msg == NULL || msg[0] == '\0') return lrp_raise(L, RP_ERR_NOMEM);
    switch (rp_last_status()) {
    case RP_ERR_IO: /* a file problem (the message names the file): nil, message */
        lua_pushnil(L);
        lua_pushstring(L, msg);
        return 2;
    case RP_ERR_NOMEM: return luaL_error(L, "%s", msg);
    default: return lrp_argerror(L, opts, "%s", msg);
    }
}

/* Reads the value of row k from the options table at 1 into *cfg (the option is there); a path
 * is left on the stack (core's config points into it). Raises naming the option. */
static void read_key(lua_State *L, const rp_task_key *k, rp_task_cfg *cfg)
{
    switch (k->type) {
    case RP_TASK_KEY_INT:
        rp_task_cfg_set_int(cfg, k, (int64_t)lrp_optinteger(L, 1, k->name, 0));
        break;
    case RP_TASK_KEY_NUM: rp_task_cfg_set(cfg, k, lrp_optnumber(L, 1, k->name, 0)); break;
    case RP_TASK_KEY_ENUM:
        rp_task_cfg_set_int(cfg, k, lrp_optenum(L, 1, k->name, k->names, 0));
        break;
    case RP_TASK_KEY_BOOL: rp_task_cfg_set_int(cfg, k, lrp_optboolean(L, 1, k->name, 0)); break;
    case RP_TASK_KEY_PATH: {
        if (lua_getfield(L, 1, k->name) != LUA_TSTRING)
            lrp_argerror(L, 1, "option '%s' must be a string, got %s", k->name,
                         lrp_describe(L, -1));
        size_t len;
        const char *path = lua_tolstring(L, -1, &len);
        if (len == 0) lrp_argerror(L, 1, "option '%s' must not be empty", k->name);
        if (strlen(path) != len) lrp_argerror(L, 1, "option '%s' contains a NUL byte", k->name);
        memcpy((char *)cfg + k->offset, &path, sizeof path); /* the string stays on the stack */
        break;
    }
    }
}

/* rp.tasks.<kind>(opts) -> task | nil, "path: reason" (upvalue 1: the kind). The options are the
 * rows of the task table that the kind reads (core's tasks/task.h), and kind (as task:config()
 * reports it). Each is read in row order, by its type, or set to the default that the rows before
 * it give (rp_task_cfg_set_default), and checked against its row as it is read
 * (rp_task_cfg_check_key), so a message names the first bad option. A kind with required options
 * takes a table. */
static int l_new(lua_State *L)
{
    rp_task_kind kind = (rp_task_kind)lua_tointeger(L, lua_upvalueindex(1));
    const char *known[32];
    char with[128]; /* the required options: "'path' and 'vocab_size'" */
    int n = 0;
    size_t wlen = 0;
    with[0] = '\0';
    for (int i = 0; i < rp_task_nkeys && n < 30; i++) {
        const rp_task_key *k = &rp_task_keys[i];
        if (!rp_task_key_applies(k, kind)) continue;
        known[n++] = k->name;
        if ((k->flags & RP_TASK_KEY_REQUIRED) && wlen < sizeof with)
            wlen += (size_t)snprintf(with + wlen, sizeof with - wlen, "%s'%s'",
                                     wlen ? " and " : "", k->name);
    }
    known[n++] = "kind";
    known[n] = NULL;
    if (wlen && lua_type(L, 1) != LUA_TTABLE)
        lrp_argerror(L, 1, "options table expected (with %s), got %s", with, lrp_describe(L, 1));
    check_task_opts(L, 1, known, kind);
    lua_settop(L, 1);
    rp_task_cfg cfg = rp_task_cfg_default(kind);
    for (int i = 0; i < rp_task_nkeys; i++) {
        const rp_task_key *k = &rp_task_keys[i];
        if (!rp_task_key_applies(k, kind)) continue;
        if (lrp_hasopt(L, 1, k->name)) {
            read_key(L, k, &cfg);
        } else if (k->flags & RP_TASK_KEY_REQUIRED) {
            rp_task_key_missing(k);
            lrp_argerror(L, 1, "%s", rp_last_error());
        } else {
            rp_task_cfg_set_default(&cfg, k);
        }
        if (rp_task_cfg_check_key(&cfg, k) != RP_OK) lrp_argerror(L, 1, "%s", rp_last_error());
    }
    return make_task(L, 1, &cfg);
}

/* ---- methods ---- */

static int has_problems(const rp_task_cfg *c)
{
    return c->kind == RP_TASK_ADDITION || c->kind == RP_TASK_SUBSTR_INDEX ||
           c->kind == RP_TASK_GRID_OFFSET;
}

/* Raises for a task without evaluation problems (method name what). */
static void check_has_problems(lua_State *L, const rp_task *t, const char *what)
{
    const rp_task_cfg *c = rp_task_config(t);
    if (!has_problems(c))
        luaL_error(L, "task:%s needs an addition, substring_index or grid_offset task (this is %s)",
                   what, rp_task_kind_names[c->kind]);
}

/* Raises for an lm task (method name what): its vocabulary is its tokenizer's. */
static void check_not_lm(lua_State *L, const rp_task *t, const char *what)
{
    if (rp_task_config(t)->kind == RP_TASK_LM)
        luaL_error(L, "task:%s: an lm task's vocabulary is its tokenizer's (tok:%s)", what,
                   strcmp(what, "vocab") == 0 ? "piece" : what);
}

/* task:vocab() -> { [id + 1] = character } */
static int t_vocab(lua_State *L)
{
    check_not_lm(L, check_task(L, 1), "vocab");
    int64_t n = vocab_size(check_task(L, 1));
    lua_createtable(L, (int)n, 0);
    for (int64_t i = 0; i < n; i++) {
        int64_t n2 = 0;
        long cp = (long)rp_task_vocab(check_task(L, 1), &n2)[i]; /* again after each push */
        lua_pushfstring(L, "%U", cp);
        lua_rawseti(L, -2, (lua_Integer)(i + 1));
    }
    return 1;
}

/* task:vocab_size() -> integer */
static int t_vocab_size(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)vocab_size(check_task(L, 1)));
    return 1;
}

/* A string argument without NUL bytes (core takes C strings). */
static const char *check_cstring(lua_State *L, int arg, const char *what, size_t *len)
{
    if (lua_type(L, arg) != LUA_TSTRING)
        lrp_argerror(L, arg, "%s must be a string, got %s", what, lrp_describe(L, arg));
    const char *s = lua_tolstring(L, arg, len);
    if (strlen(s) != *len) lrp_argerror(L, arg, "%s contains a NUL byte", what);
    return s;
}

/* task:encode(str) -> { ids } */
static int t_encode(lua_State *L)
{
    check_not_lm(L, check_task(L, 1), "encode");
    size_t len;
    const char *s = check_cstring(L, 2, "text", &len);
    if ((int64_t)len > RP_I32_MAX) return lrp_argerror(L, 2, "text is too long");
    lua_settop(L, 2);
    int32_t *ids = (int32_t *)lua_newuserdatauv(L, (len ? len : 1) * sizeof(int32_t), 0);
    int64_t n = 0;
    rp_status st = rp_task_encode(check_task(L, 1), s, len, ids, (int64_t)len, &n);
    if (st == RP_ERR_ARG) return lrp_argerror(L, 2, "%s", rp_last_error());
    if (st != RP_OK) return lrp_raise(L, st);
    if (n > (int64_t)len) return luaL_error(L, "task:encode: core needs %I tokens for %I bytes",
                                            (LUAI_UACINT)n, (LUAI_UACINT)len);
    lua_createtable(L, (int)n, 0);
    for (int64_t i = 0; i < n; i++) {
        lua_pushinteger(L, (lua_Integer)ids[i]);
        lua_rawseti(L, -2, (lua_Integer)(i + 1));
    }
    return 1;
}

/* The id value at stack index vidx (position pos, 1-based) in 0..V-1, or raises. */
static int32_t check_id(lua_State *L, int arg, int vidx, int64_t pos, int64_t V)
{
    lua_Integer v = 0;
    if (!lrp_tointeger(L, vidx, &v) || v < 0 || v >= V)
        lrp_argerror(L, arg, "token at [%I] must be an integer in 0..%I (vocab %I), got %s",
                     (LUAI_UACINT)pos, (LUAI_UACINT)(V - 1), (LUAI_UACINT)V,
                     lrp_describe(L, vidx));
    return (int32_t)v;
}

/* task:decode(ids) -> string (ids: a table or a 1-D tensor of token ids) */
static int t_decode(lua_State *L)
{
    check_not_lm(L, check_task(L, 1), "decode");
    int64_t V = vocab_size(check_task(L, 1)), n = 0;
    lua_settop(L, 2);
    int is_tensor = lrp_totensor(L, 2) != NULL;
    if (is_tensor) {
        rp_tensor *x = lrp_checktensor(L, 2);
        if (x->ndim != 1) {
            char buf[RP_SHAPE_STR_LEN];
            return lrp_argerror(L, 2, "ids must be a 1-D tensor, got %s", lrp_shape_str(buf, x));
        }
        n = x->shape[0];
    } else if (lua_type(L, 2) == LUA_TTABLE) {
        n = (int64_t)lua_rawlen(L, 2);
    } else {
        return lrp_argerror(L, 2, "ids must be a table or a tensor, got %s", lrp_describe(L, 2));
    }
    if (n > RP_I32_MAX / 4) return lrp_argerror(L, 2, "ids has too many entries");
    int32_t *ids = (int32_t *)lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof(int32_t), 0);
    size_t cap = (size_t)n * 4 + 1, len = 0;
    char *out = (char *)lua_newuserdatauv(L, cap, 0);
    if (is_tensor) {
        rp_tensor *x = lrp_checktensor(L, 2); /* again after the allocations */
        const float *d = rp_tensor_data(x);
        for (int64_t i = 0; i < n; i++) {
            double v = (double)d[i * x->stride[0]];
            if (v == floor(v) && fabs(v) <= (double)LRP_MAX_POS) lua_pushinteger(L, (lua_Integer)v);
            else lua_pushnumber(L, (lua_Number)v);
            ids[i] = check_id(L, 2, -1, i + 1, V);
            lua_pop(L, 1);
        }
    } else {
        for (int64_t i = 0; i < n; i++) {
            lua_rawgeti(L, 2, (lua_Integer)(i + 1));
            ids[i] = check_id(L, 2, -1, i + 1, V);
            lua_pop(L, 1);
        }
    }
    rp_status st = rp_task_decode(check_task(L, 1), ids, n, out, cap, &len);
    if (st != RP_OK) return lrp_raise(L, st);
    if (len >= cap) return luaL_error(L, "task:decode: core needs %I bytes for %I tokens",
                                      (LUAI_UACINT)len, (LUAI_UACINT)n);
    lua_pushlstring(L, out, len);
    return 1;
}

/* Pushes the generator for argument arg: the roper.Rng given there, or the module's default
 * generator for nil/none (kept on the stack so that nothing can collect it during the call). */
static void push_rng_arg(lua_State *L, int arg)
{
    if (!lua_isnoneornil(L, arg)) {
        lrp_checkudata(L, arg, LRP_RNG_MT);
        lua_pushvalue(L, arg);
        return;
    }
    lua_getfield(L, LUA_REGISTRYINDEX, LRP_DEFAULT_RNG_KEY);
    if (luaL_testudata(L, -1, LRP_RNG_MT) == NULL) luaL_error(L, "the default generator is missing");
}

/* task:batch(B[, rng[, split]]) -> inputs, targets ([B x seq_len] tensors; targets -1 where not
 * scored) */
static int t_batch(lua_State *L)
{
    const rp_task_cfg cfg = *rp_task_config(check_task(L, 1)), *c = &cfg;
    lua_Integer B = lrp_checkint(L, 2, "B");
    if (B < 1) return lrp_argerror(L, 2, "B must be >= 1, got %I", (LUAI_UACINT)B);
    if (B > RP_I32_MAX / c->seq_len)
        return lrp_argerror(L, 2, "a batch of %I sequences of %I tokens is too large",
                            (LUAI_UACINT)B, (LUAI_UACINT)c->seq_len);
    if (!lua_isnoneornil(L, 3)) lrp_checkudata(L, 3, LRP_RNG_MT);
    int split = 0;
    if (!lua_isnoneornil(L, 4)) {
        const char *s = lua_type(L, 4) == LUA_TSTRING ? lua_tostring(L, 4) : NULL;
        split = -1;
        for (int i = 0; s && split_names[i]; i++)
            if (strcmp(s, split_names[i]) == 0) split = i;
        if (split < 0 || (split == 2 && c->kind != RP_TASK_LM))
            return lrp_argerror(L, 4, "split must be \"train\"%s \"valid\"%s, got %s",
                                c->kind == RP_TASK_LM ? "," : " or",
                                c->kind == RP_TASK_LM ? " or \"test\"" : "", lrp_describe(L, 4));
        if (split == 1 && c->kind != RP_TASK_TEXT && c->kind != RP_TASK_LM)
            return lrp_argerror(L, 4, "split \"valid\" exists only for text and lm tasks (this "
                                      "is %s)", rp_task_kind_names[c->kind]);
        if (split == 1 && c->kind == RP_TASK_TEXT && c->valid_fraction <= 0.0)
            return lrp_argerror(L, 4, "the task has no validation split (valid_fraction 0)");
    }
    lua_settop(L, 4);
    push_rng_arg(L, 3);                /* 5 */
    int64_t n = (int64_t)B * c->seq_len, shape[2] = {(int64_t)B, c->seq_len};
    rp_tensor *in = lrp_newtensor(L);  /* 6 */
    rp_tensor *tg = lrp_newtensor(L);  /* 7 */
    rp_status st = rp_tensor_new(in, 2, shape);
    if (st == RP_OK) st = rp_tensor_new(tg, 2, shape);
    if (st != RP_OK) return lrp_raise(L, st);
    int32_t *ibuf = (int32_t *)lua_newuserdatauv(L, (size_t)n * sizeof(int32_t), 0);
    int32_t *tbuf = (int32_t *)lua_newuserdatauv(L, (size_t)n * sizeof(int32_t), 0);
    st = rp_task_batch(check_task(L, 1), (rp_rng *)lua_touserdata(L, 5), (int64_t)B, split, ibuf,
                       tbuf);
    if (st != RP_OK) return lrp_raise(L, st);
    float *di = rp_tensor_data(in), *dt = rp_tensor_data(tg);
    for (int64_t i = 0; i < n; i++) {
        di[i] = (float)ibuf[i];
        dt[i] = (float)tbuf[i];
    }
    lua_settop(L, 7);
    return 2;
}

/* task:problem([rng[, n_digits]]) -> question, answer */
static int t_problem(lua_State *L)
{
    rp_task *t = check_task(L, 1);
    const rp_task_cfg cfg = *rp_task_config(t), *c = &cfg;
    check_has_problems(L, t, "problem");
    if (!lua_isnoneornil(L, 2)) lrp_checkudata(L, 2, LRP_RNG_MT);
    int64_t nd = 0;
    if (!lua_isnoneornil(L, 3)) {
        if (c->kind != RP_TASK_ADDITION)
            return lrp_argerror(L, 3, "n_digits applies to addition tasks only");
        lua_Integer v = lrp_checkint(L, 3, "n_digits");
        if (v < 1 || v > RP_TASK_MAX_DIGITS)
            return lrp_argerror(L, 3, "n_digits must be in 1..%d, got %I", RP_TASK_MAX_DIGITS,
                                (LUAI_UACINT)v);
        nd = (int64_t)v;
    }
    lua_settop(L, 3);
    push_rng_arg(L, 2); /* 4 */
    size_t qcap = 128 + 2 * (size_t)c->str_len, acap = 64 + (size_t)c->str_len;
    if (c->kind == RP_TASK_GRID_OFFSET) qcap = (size_t)rp_task_grid_problem_len(c) + 1, acap = 8;
    char *q = (char *)lua_newuserdatauv(L, qcap, 0);
    char *a = (char *)lua_newuserdatauv(L, acap, 0);
    rp_status st = rp_task_problem(check_task(L, 1), (rp_rng *)lua_touserdata(L, 4), nd, q, qcap,
                                   a, acap);
    if (st != RP_OK) return lrp_raise(L, st);
    q[qcap - 1] = '\0';
    a[acap - 1] = '\0';
    lua_pushstring(L, q);
    lua_pushstring(L, a);
    return 2;
}

/* task:check(question, continuation) -> boolean */
static int t_check(lua_State *L)
{
    rp_task *t = check_task(L, 1);
    check_has_problems(L, t, "check");
    size_t ql, cl;
    const char *q = check_cstring(L, 2, "question", &ql);
    const char *cont = check_cstring(L, 3, "continuation", &cl);
    lua_pushboolean(L, rp_task_check(t, q, cont) == 1);
    return 1;
}

/* task:config() -> table: kind and the options of the constructor (the rows of the task table
 * that the kind reads), as rp.tasks.<kind> takes them. */
static int t_config(lua_State *L)
{
    const rp_task_cfg cfg = *rp_task_config(check_task(L, 1)), *c = &cfg;
    lua_createtable(L, 0, 6);
    lua_pushstring(L, rp_task_kind_names[c->kind]);
    lua_setfield(L, -2, "kind");
    for (int i = 0; i < rp_task_nkeys; i++) {
        const rp_task_key *k = &rp_task_keys[i];
        if (!rp_task_key_applies(k, c->kind)) continue;
        switch (k->type) {
        case RP_TASK_KEY_INT: lua_pushinteger(L, (lua_Integer)rp_task_cfg_get_int(c, k)); break;
        case RP_TASK_KEY_NUM: lua_pushnumber(L, (lua_Number)rp_task_cfg_get(c, k)); break;
        case RP_TASK_KEY_ENUM: lua_pushstring(L, k->names[rp_task_cfg_get_int(c, k)]); break;
        case RP_TASK_KEY_BOOL: lua_pushboolean(L, (int)rp_task_cfg_get_int(c, k)); break;
        case RP_TASK_KEY_PATH: lua_getiuservalue(L, 1, 1); break; /* the task's own copy */
        }
        lua_setfield(L, -2, k->name);
    }
    return 1;
}

/* task:split_sizes() -> train, valid[, test]: the characters of a text task's training and
 * validation splits, the tokens of an lm task's three (a batch of a split needs seq_len + 1 of
 * them). */
static int t_split_sizes(lua_State *L)
{
    rp_task *t = check_task(L, 1);
    int64_t n[3] = {0, 0, 0};
    int lm = rp_task_config(t)->kind == RP_TASK_LM;
    if (rp_task_split_sizes(t, &n[0], &n[1]) != RP_OK)
        return luaL_error(L, "task:split_sizes needs a text or lm task (this is %s)",
                          rp_task_kind_names[rp_task_config(t)->kind]);
    if (lm && rp_task_split_len(t, RP_SPLIT_TEST, &n[2]) != RP_OK) return lrp_raise(L, RP_ERR_ARG);
    for (int i = 0; i < 2 + lm; i++) lua_pushinteger(L, (lua_Integer)n[i]);
    return 2 + lm;
}

/* task:windows(split, first, B) -> inputs, targets ([rows x seq_len]), windows: the evaluation
 * windows first .. first + B - 1 (1-based) of an lm task's split (rp_task_windows; rows < B at
 * the end, 0 past it: then inputs and targets are nil) and the split's number of windows */
static int t_windows(lua_State *L)
{
    const rp_task_cfg cfg = *rp_task_config(check_task(L, 1)), *c = &cfg;
    if (c->kind != RP_TASK_LM)
        return luaL_error(L, "task:windows needs an lm task (this is %s)",
                          rp_task_kind_names[c->kind]);
    int split = -1;
    const char *s = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : NULL;
    for (int i = 0; s && split_names[i]; i++)
        if (strcmp(s, split_names[i]) == 0) split = i;
    if (split < 0)
        return lrp_argerror(L, 2, "split must be \"train\", \"valid\" or \"test\", got %s",
                            lrp_describe(L, 2));
    lua_Integer first = lrp_checkint(L, 3, "first");
    if (first < 1) return lrp_argerror(L, 3, "first must be >= 1, got %I", (LUAI_UACINT)first);
    lua_Integer B = lrp_checkint(L, 4, "B");
    if (B < 1) return lrp_argerror(L, 4, "B must be >= 1, got %I", (LUAI_UACINT)B);
    if (B > RP_I32_MAX / c->seq_len)
        return lrp_argerror(L, 4, "%I windows of %I tokens are too many", (LUAI_UACINT)B,
                            (LUAI_UACINT)c->seq_len);
    lua_settop(L, 4);
    int64_t n = (int64_t)B * c->seq_len, rows = 0, windows = 0;
    int32_t *ibuf = (int32_t *)lua_newuserdatauv(L, (size_t)n * sizeof(int32_t), 0); /* 5 */
    int32_t *tbuf = (int32_t *)lua_newuserdatauv(L, (size_t)n * sizeof(int32_t), 0); /* 6 */
    rp_status st = rp_task_windows(check_task(L, 1), split, (int64_t)first - 1, (int64_t)B, ibuf,
                                   tbuf, &rows, &windows);
    if (st != RP_OK) return luaL_error(L, "task:windows: %s", rp_last_error());
    if (rows == 0) {
        lua_pushnil(L);
        lua_pushnil(L);
        lua_pushinteger(L, (lua_Integer)windows);
        return 3;
    }
    int64_t shape[2] = {rows, c->seq_len};
    rp_tensor *in = lrp_newtensor(L);  /* 7 */
    rp_tensor *tg = lrp_newtensor(L);  /* 8 */
    st = rp_tensor_new(in, 2, shape);
    if (st == RP_OK) st = rp_tensor_new(tg, 2, shape);
    if (st != RP_OK) return lrp_raise(L, st);
    float *di = rp_tensor_data(in), *dt = rp_tensor_data(tg);
    for (int64_t i = 0; i < rows * c->seq_len; i++) {
        di[i] = (float)ibuf[i];
        dt[i] = (float)tbuf[i];
    }
    lua_pushinteger(L, (lua_Integer)windows);
    return 3;
}

/* task:positions2d([n]) -> [n x 2] tensor of (row, column) = (i // cols, i % cols) for the first
 * n tokens (default seq_len) of a packed row or a question of a grid_offset task */
static int t_positions2d(lua_State *L)
{
    const rp_task_cfg cfg = *rp_task_config(check_task(L, 1)), *c = &cfg;
    if (c->kind != RP_TASK_GRID_OFFSET)
        return luaL_error(L, "task:positions2d needs a grid_offset task (this is %s)",
                          rp_task_kind_names[c->kind]);
    int64_t n = c->seq_len, hi = (int64_t)rp_task_key_of("seq_len", c->kind)->hi;
    if (!lua_isnoneornil(L, 2)) {
        lua_Integer v = lrp_checkint(L, 2, "n");
        if (v < 0 || v > hi)
            return lrp_argerror(L, 2, "n must be in 0..%I, got %I", (LUAI_UACINT)hi,
                                (LUAI_UACINT)v);
        n = (int64_t)v;
    }
    lua_settop(L, 2);
    int64_t shape[2] = {n, 2};
    rp_tensor *out = lrp_newtensor(L); /* 3 */
    rp_status st = rp_tensor_new(out, 2, shape);
    if (st != RP_OK) return lrp_raise(L, st);
    int32_t *rc = (int32_t *)lua_newuserdatauv(L, (size_t)(n ? 2 * n : 1) * sizeof(int32_t), 0);
    st = rp_task_positions2d(check_task(L, 1), n, rc);
    if (st != RP_OK) return lrp_raise(L, st);
    float *d = rp_tensor_data(out);
    for (int64_t i = 0; i < 2 * n; i++) d[i] = (float)rc[i];
    lua_settop(L, 3);
    return 1;
}

/* ---- registration ---- */

static const luaL_Reg task_methods[] = {
    {"split_sizes", t_split_sizes},
    {"vocab", t_vocab},     {"vocab_size", t_vocab_size}, {"encode", t_encode},
    {"decode", t_decode},   {"batch", t_batch},           {"problem", t_problem},
    {"check", t_check},     {"config", t_config},         {"positions2d", t_positions2d},
    {"windows", t_windows},
    {NULL, NULL},
};

void lrp_open_tasks(lua_State *L, int mod)
{
    mod = lua_absindex(L, mod);
    lrp_open_type(L, mod, LRP_TASK_MT, "Task", task_methods, t_release, t_tostring);

    lua_createtable(L, 0, RP_TASK_LM + 1); /* rp.tasks.<kind>: l_new with the kind */
    for (int kind = 0; rp_task_kind_names[kind]; kind++) {
        lua_pushinteger(L, kind);
        lua_pushcclosure(L, l_new, 1);
        lua_setfield(L, -2, rp_task_kind_names[kind]);
    }
    lua_setfield(L, mod, "tasks");
}
