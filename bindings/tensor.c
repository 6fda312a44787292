/* The roper.Tensor userdata: its lifetime, constructors, queries (shape, size, stride, ...), data
 * movement (contiguous, clone, copy, fill, zero) and the registration of every method and
 * metamethod (rp.Tensor, the roper.Tensor metatable). Views, slicing and element access are in
 * tensor_index.c (tensor_index.h), arithmetic, reductions and matmul in tensor_math.c
 * (tensor_math.h), t:save in interop.c (interop.h).
 *
 * The userdata holds the rp_tensor struct by value (one storage reference). A released tensor
 * (storage NULL, after t:free() or __close) raises "attempt to use a released tensor" on use.
 * Every function checks all its arguments before it calls core; results are pushed as empty
 * userdata first and filled in place, so a Lua error can never leak a reference.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "interop.h"
#include "modules.h"
#include "tensor_index.h"
#include "tensor_math.h"
#include "userdata.h"

/* ---- small helpers ---- */

/* Pushes a new zero-filled contiguous tensor of the given (checked) shape and returns it. */
static rp_tensor *push_new(lua_State *L, int ndim, const int64_t *shape)
{
    rp_tensor *out = lrp_newtensor(L);
    rp_status st = rp_tensor_new(out, ndim, shape);
    if (st != RP_OK) lrp_raise(L, st);
    return out;
}

/* Pushes a fresh table with the n sizes (or strides) at v (a copy: pushing may release the
 * tensor they come from). */
static void push_sizes(lua_State *L, int n, const int64_t *src)
{
    int64_t v[RP_MAX_DIMS];
    memcpy(v, src, (size_t)n * sizeof *v);
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_pushinteger(L, (lua_Integer)v[i]);
        lua_rawseti(L, -2, i + 1);
    }
}

/* ---- lifetime ---- */

/* __gc, __close and t:free(): drop the storage reference; safe on a released tensor and when
 * called twice. */
static int t_release(lua_State *L)
{
    rp_tensor *t = lrp_totensor(L, 1);
    if (t) rp_tensor_release(t);
    return 0;
}

/* ---- constructors ---- */

/* Descends the first elements of the nested table at arg to find its shape; returns ndim. Raises
 * when nested deeper than RP_MAX_DIMS or with too many elements. */
static int nested_shape(lua_State *L, int arg, int64_t *shape)
{
    int ndim = 0;
    int64_t numel = 1;
    lua_pushvalue(L, arg);
    while (lua_type(L, -1) == LUA_TTABLE) {
        if (ndim == RP_MAX_DIMS)
            lrp_argerror(L, arg, "nested table deeper than %d levels", RP_MAX_DIMS);
        lua_Unsigned n = lua_rawlen(L, -1);
        if (n == 0) {
            shape[ndim++] = 0;
            break; /* nothing below an empty level */
        }
        if (n > (lua_Unsigned)RP_MAX_NUMEL || !rp_mul_i64(numel, (int64_t)n, &numel) ||
            numel > RP_MAX_NUMEL)
            lrp_argerror(L, arg, "nested table has too many elements (more than 2^40)");
        shape[ndim++] = (int64_t)n;
        lua_rawgeti(L, -1, 1);
        lua_remove(L, -2);
    }
    lua_pop(L, 1);
    return ndim;
}

/* Writes "[2][1]" for path[0..depth-1] into buf. */
static const char *path_str(char *buf, size_t len, const lua_Integer *path, int depth)
{
    size_t pos = 0;
    buf[0] = '\0';
    for (int i = 0; i < depth && pos + 24 < len; i++) {
        int n = snprintf(buf + pos, len - pos, "[%lld]", (long long)path[i]);
        if (n < 0) break;
        pos += (size_t)n;
    }
    return buf;
}

/* Copies the nested table on top of the stack (nesting level depth) into dst (contiguous
 * strides of shape), checking that it is rectangular and holds only numbers. */
static void fill_nested(lua_State *L, int arg, float *dst, int depth, int ndim,
                        const int64_t *shape, lua_Integer *path)
{
    char buf[256];
    lua_Unsigned n = lua_rawlen(L, -1);
    if (n != (lua_Unsigned)shape[depth])
        lrp_argerror(L, arg, "ragged nested table: %s has %I entries, expected %I",
                     depth ? path_str(buf, sizeof buf, path, depth) : "the table", (LUAI_UACINT)n,
                     (LUAI_UACINT)shape[depth]);
    int64_t inner = 1;
    for (int i = depth + 1; i < ndim; i++) inner *= shape[i];
    luaL_checkstack(L, 4, "nested table");
    for (lua_Integer i = 1; i <= (lua_Integer)n; i++) {
        int type = lua_rawgeti(L, -1, i);
        path[depth] = i;
        if (depth + 1 < ndim) {
            if (type != LUA_TTABLE)
                lrp_argerror(L, arg, "ragged nested table: expected a table at %s, got %s",
                             path_str(buf, sizeof buf, path, depth + 1), lrp_describe(L, -1));
            fill_nested(L, arg, dst + (i - 1) * inner, depth + 1, ndim, shape, path);
        } else {
            if (type != LUA_TNUMBER)
                lrp_argerror(L, arg, "expected a number at %s, got %s",
                             path_str(buf, sizeof buf, path, depth + 1), lrp_describe(L, -1));
            dst[i - 1] = (float)lua_tonumber(L, -1);
        }
        lua_pop(L, 1);
    }
}

/* rp.tensor(values): from a number (1-D, one element), a flat or nested rectangular table of
 * numbers, or a tensor (copied). */
static int l_tensor(lua_State *L)
{
    int type = lua_type(L, 1);
    if (type == LUA_TNUMBER) {
        int64_t one = 1;
        rp_tensor *out = push_new(L, 1, &one);
        rp_tensor_data(out)[0] = (float)lua_tonumber(L, 1);
        return 1;
    }
    if (type == LUA_TTABLE) {
        int64_t shape[RP_MAX_DIMS];
        lua_Integer path[RP_MAX_DIMS];
        int ndim = nested_shape(L, 1, shape);
        rp_tensor *out = push_new(L, ndim, shape);
        lua_pushvalue(L, 1);
        fill_nested(L, 1, rp_tensor_data(out), 0, ndim, shape, path);
        lua_pop(L, 1);
        return 1;
    }
    if (lrp_totensor(L, 1)) {
        rp_tensor *src = lrp_checktensor(L, 1);
        rp_tensor *out = lrp_newtensor(L);
        src = lrp_checktensor(L, 1); /* again after the allocation (args.h) */
        rp_status st = rp_tensor_clone(out, src);
        if (st != RP_OK) return lrp_raise(L, st);
        return 1;
    }
    return lrp_argerror(L, 1, "number, table or tensor expected, got %s", lrp_describe(L, 1));
}

/* rp.zeros(shape) */
static int l_zeros(lua_State *L)
{
    int64_t shape[RP_MAX_DIMS];
    int ndim = lrp_shape_args(L, 1, lua_gettop(L), shape, 0);
    push_new(L, ndim, shape);
    return 1;
}

/* rp.ones(shape) */
static int l_ones(lua_State *L)
{
    int64_t shape[RP_MAX_DIMS];
    int ndim = lrp_shape_args(L, 1, lua_gettop(L), shape, 0);
    rp_tensor_fill(push_new(L, ndim, shape), 1.0f);
    return 1;
}

/* rp.full(shape, value): the value is the last argument. */
static int l_full(lua_State *L)
{
    int top = lua_gettop(L);
    int64_t shape[RP_MAX_DIMS];
    if (top < 2) {
        if (top < 1) lrp_shape_args(L, 1, 0, shape, 0);
        return lrp_argerror(L, 2, "value must be a number, got no value");
    }
    double v = lrp_checknumber(L, top, "value");
    int ndim = lrp_shape_args(L, 1, top - 1, shape, 0);
    rp_tensor_fill(push_new(L, ndim, shape), (float)v);
    return 1;
}

/* rp.range(a, b[, step]): a, a+step, ... up to and including b (torch7). The count takes a
 * tolerance of 1e-9 steps (rp.range(0, 0.3, 0.1) has 4 values), and a last value that lies past b
 * as a float32 is dropped; a range of integers must stay within 2^24 (the integers a float32
 * holds: past them values would repeat or fall outside a..b). */
static int l_range(lua_State *L)
{
    double a = lrp_checkfinite(L, 1, "a");
    double b = lrp_checkfinite(L, 2, "b");
    double step = lua_isnoneornil(L, 3) ? 1.0 : lrp_checkfinite(L, 3, "step");
    if (step == 0.0) return lrp_argerror(L, 3, "step must be nonzero");
    double span = b - a; /* finite a and b may still overflow here */
    double q = isfinite(span) ? span / step : b / step - a / step;
    if (q < 0.0)
        return lrp_argerror(L, 3, "step %f does not lead from %f to %f", (LUAI_UACNUMBER)step,
                            (LUAI_UACNUMBER)a, (LUAI_UACNUMBER)b);
    double nf = floor(q + 1e-9) + 1.0;
    if (!(nf <= (double)RP_MAX_NUMEL))
        return lrp_argerror(L, 3, "range has too many elements (more than 2^40)");
    int64_t n = (int64_t)nf;
    if (n > 1) {
        float last = (float)(a + (double)(n - 1) * step), fb = (float)b;
        if (step > 0.0 ? last > fb : last < fb) n--;
    }
    if (a == floor(a) && step == floor(step)) {
        double last = a + (double)(n - 1) * step, lim = 16777216.0; /* 2^24 */
        int at_a = fabs(a) > lim;
        double v = at_a ? a : last;
        if (at_a || fabs(last) > lim) {
            lua_pushfstring(L, "a range of integers must stay between -2^24 and 2^24 (a float32 "
                               "holds every integer up to 2^24), got %s ",
                            at_a ? "a =" : "the last value");
            if (fabs(v) < 0x1p62) lua_pushfstring(L, "%I", (LUAI_UACINT)v);
            else lua_pushfstring(L, "%f", (LUAI_UACNUMBER)v);
            lua_concat(L, 2);
            return lrp_argerror(L, at_a ? 1 : 2, "%s", lua_tostring(L, -1));
        }
    }
    rp_tensor *out = push_new(L, 1, &n);
    float *d = rp_tensor_data(out);
    for (int64_t i = 0; i < n; i++) d[i] = (float)(a + (double)i * step);
    return 1;
}

/* rp.linspace(a, b, n): n values from a to b inclusive. */
static int l_linspace(lua_State *L)
{
    double a = lrp_checkfinite(L, 1, "a");
    double b = lrp_checkfinite(L, 2, "b");
    lua_Integer n = lrp_checkint(L, 3, "n");
    if (n < 0 || n > RP_MAX_NUMEL)
        return lrp_argerror(L, 3, "n must be between 0 and 2^40, got %I", (LUAI_UACINT)n);
    int64_t n64 = (int64_t)n;
    rp_tensor *out = push_new(L, 1, &n64);
    float *d = rp_tensor_data(out);
    double span = b - a; /* finite a and b may still overflow here: then each end weighted */
    for (int64_t i = 0; i < n64; i++) {
        double t = (double)i / (double)(n64 - 1);
        double x = i == n64 - 1 ? b : isfinite(span) ? a + span * t : a * (1.0 - t) + b * t;
        d[i] = (float)(n64 == 1 ? a : x);
    }
    return 1;
}

/* rp.eye(n): the n x n identity. */
static int l_eye(lua_State *L)
{
    lua_Integer n = lrp_checkint(L, 1, "n");
    if (n < 0 || n > ((lua_Integer)1 << 20))
        return lrp_argerror(L, 1, "n must be between 0 and 2^20, got %I", (LUAI_UACINT)n);
    int64_t shape[2] = {(int64_t)n, (int64_t)n};
    rp_tensor *out = push_new(L, 2, shape);
    float *d = rp_tensor_data(out);
    for (int64_t i = 0; i < n; i++) d[i * n + i] = 1.0f;
    return 1;
}

/* rp.is_tensor(x) */
static int l_is_tensor(lua_State *L)
{
    lua_pushboolean(L, lrp_totensor(L, 1) != NULL);
    return 1;
}

/* ---- queries ---- */

/* t:shape() */
static int m_shape(lua_State *L)
{
    rp_tensor *t = lrp_checktensor(L, 1);
    push_sizes(L, t->ndim, t->shape);
    return 1;
}

/* t:size([dim]) */
static int m_size(lua_State *L)
{
    rp_tensor *t = lrp_checktensor(L, 1);
    if (lua_isnoneornil(L, 2)) {
        push_sizes(L, t->ndim, t->shape);
        return 1;
    }
    lua_pushinteger(L, (lua_Integer)t->shape[lrp_checkdim(L, 2, t)]);
    return 1;
}

/* t:stride([dim]) */
static int m_stride(lua_State *L)
{
    rp_tensor *t = lrp_checktensor(L, 1);
    if (lua_isnoneornil(L, 2)) {
        push_sizes(L, t->ndim, t->stride);
        return 1;
    }
    lua_pushinteger(L, (lua_Integer)t->stride[lrp_checkdim(L, 2, t)]);
    return 1;
}

/* t:dim() */
static int m_dim(lua_State *L)
{
    rp_tensor *t = lrp_checktensor(L, 1);
    lua_pushinteger(L, t->ndim);
    return 1;
}

/* t:numel() */
static int m_numel(lua_State *L)
{
    rp_tensor *t = lrp_checktensor(L, 1);
    lua_pushinteger(L, (lua_Integer)rp_tensor_numel(t));
    return 1;
}

/* #t: size of dim 1 (0-dim tensors have no length). */
static int t_len(lua_State *L)
{
    rp_tensor *t = lrp_checktensor(L, 1);
    if (t->ndim == 0) return lrp_argerror(L, 1, "a 0-dim tensor has no length");
    lua_pushinteger(L, (lua_Integer)t->shape[0]);
    return 1;
}

/* t:is_contiguous() (an empty tensor always is) */
static int m_is_contiguous(lua_State *L)
{
    rp_tensor *t = lrp_checktensor(L, 1);
    lua_pushboolean(L, rp_tensor_is_contiguous(t));
    return 1;
}

/* ---- data movement ---- */

/* t:contiguous() */
static int m_contiguous(lua_State *L)
{
    rp_tensor *t = lrp_checktensor(L, 1);
    rp_tensor *out = lrp_newtensor(L);
    t = lrp_checktensor(L, 1); /* again after the allocation (args.h) */
    rp_status st = rp_tensor_contiguous(out, t);
    if (st != RP_OK) return lrp_raise(L, st);
    return 1;
}

/* t:clone() */
static int m_clone(lua_State *L)
{
    rp_tensor *t = lrp_checktensor(L, 1);
    rp_tensor *out = lrp_newtensor(L);
    t = lrp_checktensor(L, 1); /* again after the allocation (args.h) */
    rp_status st = rp_tensor_clone(out, t);
    if (st != RP_OK) return lrp_raise(L, st);
    return 1;
}

/* t:copy(src): broadcast copy of src into t; returns t. */
static int m_copy(lua_State *L)
{
    rp_tensor *t = lrp_checktensor(L, 1);
    rp_tensor *src = lrp_checktensor(L, 2);
    lrp_check_broadcast_to(L, 2, src, t);
    rp_tensor sq;
    rp_status st = lrp_squeeze_lead(&sq, src, t->ndim);
    if (st == RP_OK) {
        st = rp_tensor_copy(t, &sq);
        rp_tensor_release(&sq);
    }
    if (st != RP_OK) return lrp_raise(L, st);
    lua_settop(L, 1);
    return 1;
}

/* t:fill(v): returns t. */
static int m_fill(lua_State *L)
{
    rp_tensor *t = lrp_checktensor(L, 1);
    double v = lrp_checknumber(L, 2, "value");
    rp_tensor_fill(t, (float)v);
    lua_settop(L, 1);
    return 1;
}

/* t:zero(): returns t. */
static int m_zero(lua_State *L)
{
    rp_tensor *t = lrp_checktensor(L, 1);
    rp_tensor_fill(t, 0.0f);
    lua_settop(L, 1);
    return 1;
}

/* ---- registration ---- */

static const luaL_Reg methods[] = {
    {"shape", m_shape},       {"size", m_size},
    {"dim", m_dim},           {"numel", m_numel},
    {"stride", m_stride},     {"is_contiguous", m_is_contiguous},
    {"view", lrp_tensor_view},         {"reshape", lrp_tensor_reshape},
    {"t", lrp_tensor_t},               {"transpose", lrp_tensor_transpose},
    {"permute", lrp_tensor_permute},   {"narrow", lrp_tensor_narrow},
    {"select", lrp_tensor_select},     {"sub", lrp_tensor_sub},
    {"get", lrp_tensor_get},           {"set", lrp_tensor_set},
    {"item", lrp_tensor_item},         {"contiguous", m_contiguous},
    {"clone", m_clone},       {"copy", m_copy},
    {"fill", m_fill},         {"zero", m_zero},
    {"totable", lrp_tensor_totable},   {"argmax", lrp_tensor_argmax},
    {"softmax", lrp_tensor_softmax},   {"norm", lrp_tensor_norm},
    {"dot", lrp_tensor_dot},           {"diag", lrp_tensor_diag},
    {"matmul", lrp_matmul},   {"maxdiff", lrp_maxdiff},
    {"save", lrp_tensor_save},
    {NULL, NULL},
};

static const luaL_Reg constructors[] = {
    {"tensor", l_tensor},     {"zeros", l_zeros},     {"ones", l_ones},
    {"full", l_full},         {"range", l_range},     {"linspace", l_linspace},
    {"eye", l_eye},           {"is_tensor", l_is_tensor}, {"maxdiff", lrp_maxdiff},
    {NULL, NULL},
};

typedef struct {
    const char *name;
    int op;
} named_op;

/* Sets t[name] = closure(fn, op) for each entry (t at index idx). */
static void set_op_closures(lua_State *L, int idx, lua_CFunction fn, const named_op *ops)
{
    idx = lua_absindex(L, idx);
    for (; ops->name; ops++) {
        lua_pushinteger(L, ops->op);
        lua_pushcclosure(L, fn, 1);
        lua_setfield(L, idx, ops->name);
    }
}

void lrp_open_tensor(lua_State *L, int mod)
{
    static const named_op binop_methods[] = {
        {"add", RP_ADD}, {"mul", RP_MUL}, {"div", RP_DIV}, {"pow", RP_POW}, {NULL, 0}};
    static const named_op binop_meta[] = {{"__add", RP_ADD}, {"__sub", RP_SUB}, {"__mul", RP_MUL},
                                          {"__div", RP_DIV}, {"__pow", RP_POW}, {NULL, 0}};
    static const named_op unop_methods[] = {
        {"exp", RP_EXP},   {"log", RP_LOG},   {"abs", RP_ABS},         {"sqrt", RP_SQRT},
        {"tanh", RP_TANH}, {"relu", RP_RELU}, {"sin", RP_SIN},         {"cos", RP_COS},
        {"sigmoid", RP_SIGMOID},              {"neg", RP_NEG},         {NULL, 0}};
    static const named_op reduce_methods[] = {
        {"sum", RP_SUM}, {"mean", RP_MEAN}, {"max", RP_MAX}, {"min", RP_MIN}, {NULL, 0}};

    mod = lua_absindex(L, mod);
    luaL_newmetatable(L, LRP_TENSOR_MT); /* also sets __name */
    int mt = lua_gettop(L);

    /* the method table: rp.Tensor */
    lua_newtable(L);
    int meth = lua_gettop(L);
    luaL_setfuncs(L, methods, 0);
    set_op_closures(L, meth, lrp_tensor_binop, binop_methods);
    set_op_closures(L, meth, lrp_tensor_unop, unop_methods);
    set_op_closures(L, meth, lrp_tensor_reduce, reduce_methods);
    lua_pushvalue(L, meth);
    lua_setfield(L, mod, "Tensor");

    lua_pushvalue(L, meth);
    lua_pushcclosure(L, lrp_tensor_index, 1);
    lua_setfield(L, mt, "__index");
    lua_pushcfunction(L, lrp_tensor_newindex);
    lua_setfield(L, mt, "__newindex");
    lrp_set_release(L, mt, meth, t_release);
    lua_pushcfunction(L, t_len);
    lua_setfield(L, mt, "__len");
    set_op_closures(L, mt, lrp_tensor_binop, binop_meta);
    lua_pushinteger(L, RP_NEG);
    lua_pushcclosure(L, lrp_tensor_unop, 1);
    lua_setfield(L, mt, "__unm");
    lua_settop(L, mt - 1);

    lua_pushvalue(L, mod);
    luaL_setfuncs(L, constructors, 0);
    lua_pop(L, 1);
}
