/* The roper.Tensor userdata: constructors, methods, indexing and metamethods.
 *
 * The userdata holds the rp_tensor struct by value (one storage reference). A released tensor
 * (storage NULL, after __close) raises "attempt to use a released tensor" on use. Every function
 * checks all its arguments before it calls core; results are pushed as empty userdata first and
 * filled in place, so a Lua error can never leak a reference.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "roper.h"
#include "userdata.h"

/* ---- small helpers ---- */

/* The shape at first..last as lrp_checkshape, but a shape table must be the last argument. */
static int shape_args(lua_State *L, int first, int last, int64_t *shape, int allow_infer)
{
    if (last < first)
        lrp_argerror(L, first,
                     "shape expected (a table of sizes, or sizes as numbers), got no value");
    if (lua_type(L, first) == LUA_TTABLE && last > first)
        lrp_argerror(L, first + 1, "unexpected argument after the shape table (%s)",
                     lrp_describe(L, first + 1));
    return lrp_checkshape(L, first, last, shape, allow_infer);
}

/* Pushes a new zero-filled contiguous tensor of the given (checked) shape and returns it. */
static rp_tensor *push_new(lua_State *L, int ndim, const int64_t *shape)
{
    rp_tensor *out = lrp_newtensor(L);
    rp_status st = rp_tensor_new(out, ndim, shape);
    if (st != RP_OK) lrp_raise(L, st);
    return out;
}

/* Pointer to the element at the 0-based indices idx[0..ndim-1] (already range-checked). */
static float *elem_ptr(const rp_tensor *t, const int64_t *idx)
{
    int64_t off = 0;
    for (int i = 0; i < t->ndim; i++) off += idx[i] * t->stride[i];
    return rp_tensor_data(t) + off;
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

/* __gc and __close: drop the storage reference; safe on a released tensor and when called twice. */
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
        if (n > 0 && (lua_Unsigned)(RP_MAX_NUMEL / numel) < n)
            lrp_argerror(L, arg, "nested table has too many elements (more than 2^40)");
        shape[ndim++] = (int64_t)n;
        numel *= (int64_t)n;
        if (n == 0) break;
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
    int ndim = shape_args(L, 1, lua_gettop(L), shape, 0);
    push_new(L, ndim, shape);
    return 1;
}

/* rp.ones(shape) */
static int l_ones(lua_State *L)
{
    int64_t shape[RP_MAX_DIMS];
    int ndim = shape_args(L, 1, lua_gettop(L), shape, 0);
    rp_tensor_fill(push_new(L, ndim, shape), 1.0f);
    return 1;
}

/* rp.full(shape, value): the value is the last argument. */
static int l_full(lua_State *L)
{
    int top = lua_gettop(L);
    int64_t shape[RP_MAX_DIMS];
    if (top < 2) {
        if (top < 1) shape_args(L, 1, 0, shape, 0);
        return lrp_argerror(L, 2, "value must be a number, got no value");
    }
    double v = lrp_checknumber(L, top, "value");
    int ndim = shape_args(L, 1, top - 1, shape, 0);
    rp_tensor_fill(push_new(L, ndim, shape), (float)v);
    return 1;
}

/* rp.range(a, b[, step]): a, a+step, ... up to and including b (torch7). */
static int l_range(lua_State *L)
{
    double a = lrp_checkfinite(L, 1, "a");
    double b = lrp_checkfinite(L, 2, "b");
    double step = lua_isnoneornil(L, 3) ? 1.0 : lrp_checkfinite(L, 3, "step");
    if (step == 0.0) return lrp_argerror(L, 3, "step must be nonzero");
    double q = (b - a) / step;
    if (q < 0.0)
        return lrp_argerror(L, 3, "step %f does not lead from %f to %f", (LUAI_UACNUMBER)step,
                            (LUAI_UACNUMBER)a, (LUAI_UACNUMBER)b);
    double nf = floor(q + 1e-9) + 1.0;
    if (!(nf <= (double)RP_MAX_NUMEL))
        return lrp_argerror(L, 3, "range has too many elements (more than 2^40)");
    int64_t n = (int64_t)nf;
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
    for (int64_t i = 0; i < n64; i++) {
        double x = i == n64 - 1 ? b : a + (b - a) * (double)i / (double)(n64 - 1);
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

/* ---- views ---- */

/* t:view(shape) / t:reshape(shape): shape as a table or numbers, one size may be -1. */
static int reshape_common(lua_State *L, int need_contiguous)
{
    rp_tensor *t = lrp_checktensor(L, 1);
    int64_t shape[RP_MAX_DIMS];
    int ndim = shape_args(L, 2, lua_gettop(L), shape, 1);
    lrp_infer_shape(L, 2, t, ndim, shape);
    if (need_contiguous && !rp_tensor_is_contiguous(t)) {
        char a[RP_SHAPE_STR_LEN], b[RP_SHAPE_STR_LEN];
        return lrp_argerror(L, 1, "view needs a contiguous tensor, got %s with strides %s "
                                  "(use reshape or contiguous)",
                            lrp_shape_str(a, t), lrp_shape_str_n(b, t->ndim, t->stride));
    }
    rp_tensor *out = lrp_newtensor(L);
    t = lrp_checktensor(L, 1); /* again after the allocation (args.h) */
    rp_status st = rp_tensor_reshape(out, t, ndim, shape);
    if (st != RP_OK) return lrp_raise(L, st);
    return 1;
}

static int m_view(lua_State *L) { return reshape_common(L, 1); }
static int m_reshape(lua_State *L) { return reshape_common(L, 0); }

/* t:transpose(d1, d2) */
static int m_transpose(lua_State *L)
{
    rp_tensor *t = lrp_checktensor(L, 1);
    int d0 = lrp_checkdim(L, 2, t), d1 = lrp_checkdim(L, 3, t);
    rp_tensor *out = lrp_newtensor(L);
    t = lrp_checktensor(L, 1); /* again after the allocation (args.h) */
    rp_status st = rp_tensor_transpose(out, t, d0, d1);
    if (st != RP_OK) return lrp_raise(L, st);
    return 1;
}

/* t:t(): transpose of a 2-D tensor. */
static int m_t(lua_State *L)
{
    rp_tensor *t = lrp_checktensor(L, 1);
    if (t->ndim != 2) {
        char buf[RP_SHAPE_STR_LEN];
        return lrp_argerror(L, 1, "t() needs a 2-D tensor, got %s (use transpose)",
                            lrp_shape_str(buf, t));
    }
    rp_tensor *out = lrp_newtensor(L);
    t = lrp_checktensor(L, 1); /* again after the allocation (args.h) */
    rp_status st = rp_tensor_transpose(out, t, 0, 1);
    if (st != RP_OK) return lrp_raise(L, st);
    return 1;
}

/* t:permute(d1, d2, ...) (or a table of dims): out dim i is t's dim d_i. */
static int m_permute(lua_State *L)
{
    rp_tensor *t = lrp_checktensor(L, 1);
    char buf[RP_SHAPE_STR_LEN];
    int top = lua_gettop(L), n, first = 2;
    if (lua_type(L, 2) == LUA_TTABLE) {
        lua_Unsigned len = lua_rawlen(L, 2);
        n = len > 100 ? 100 : (int)len;
        luaL_checkstack(L, n + 4, "permute");
        for (int i = 1; i <= n; i++) lua_rawgeti(L, 2, i);
        first = top + 1;
    } else {
        n = top - 1;
    }
    if (n != t->ndim)
        return lrp_argerror(L, 2, "permute needs %d dims for %s, got %d", t->ndim,
                            lrp_shape_str(buf, t), n);
    int perm[RP_MAX_DIMS], seen[RP_MAX_DIMS] = {0};
    for (int i = 0; i < n; i++) {
        int arg = first == 2 ? i + 2 : 2;
        lua_Integer d = 0;
        if (!lrp_tointeger(L, first + i, &d))
            return lrp_argerror(L, arg, "dim must be an integer, got %s",
                                lrp_describe(L, first + i));
        int d0 = lrp_todim(d, t->ndim);
        if (d0 < 0)
            return lrp_argerror(L, arg, "dim %I out of range for %s", (LUAI_UACINT)d,
                                lrp_shape_str(buf, t));
        if (seen[d0]) return lrp_argerror(L, arg, "dim %d repeated in permute", d0 + 1);
        seen[d0] = 1;
        perm[i] = d0;
    }
    rp_tensor *out = lrp_newtensor(L);
    t = lrp_checktensor(L, 1); /* again after the allocation (args.h) */
    rp_status st = rp_tensor_permute(out, t, perm);
    if (st != RP_OK) return lrp_raise(L, st);
    return 1;
}

/* Converts an inclusive 1-based range [a, b] (negatives count from the end) over a dim of size n
 * into start/len (0-based). Returns 0 when invalid. b == a - 1 gives an empty range. */
static int to_range(lua_Integer a, lua_Integer b, int64_t n, int64_t *start, int64_t *len)
{
    if (a < -(lua_Integer)n || b < -(lua_Integer)n - 1 || a > n + 1 || b > n) return 0;
    int64_t a0 = a < 0 ? n + a : a - 1;
    int64_t b0 = b < 0 ? n + b : b - 1;
    if (a0 < 0 || a0 > n || b0 < a0 - 1 || b0 >= n) return 0;
    *start = a0;
    *len = b0 - a0 + 1;
    return 1;
}

/* t:narrow(dim, start, len): elements start .. start+len-1 of dim (start 1-based, negative from
 * the end). */
static int m_narrow(lua_State *L)
{
    rp_tensor *t = lrp_checktensor(L, 1);
    char buf[RP_SHAPE_STR_LEN];
    int d = lrp_checkdim(L, 2, t);
    lua_Integer start = lrp_checkint(L, 3, "start");
    lua_Integer len = lrp_checkint(L, 4, "length");
    int64_t n = t->shape[d];
    if (len < 0) return lrp_argerror(L, 4, "length must be >= 0, got %I", (LUAI_UACINT)len);
    int64_t s0 = -1;
    if (start < 0 && start >= -(lua_Integer)n) s0 = n + start;
    else if (start >= 1 && start <= n + 1) s0 = start - 1;
    if (s0 < 0 || (s0 == n && len > 0))
        return lrp_argerror(L, 3, "start %I out of range for dim %d of %s", (LUAI_UACINT)start,
                            d + 1, lrp_shape_str(buf, t));
    if (len > n - s0)
        return lrp_argerror(L, 4, "length %I at start %I out of range for dim %d of %s",
                            (LUAI_UACINT)len, (LUAI_UACINT)start, d + 1, lrp_shape_str(buf, t));
    rp_tensor *out = lrp_newtensor(L);
    t = lrp_checktensor(L, 1); /* again after the allocation (args.h) */
    rp_status st = rp_tensor_narrow(out, t, d, s0, (int64_t)len);
    if (st != RP_OK) return lrp_raise(L, st);
    return 1;
}

/* t:select(dim, i): index i of dim, which is removed. */
static int m_select(lua_State *L)
{
    rp_tensor *t = lrp_checktensor(L, 1);
    int d = lrp_checkdim(L, 2, t);
    int64_t i = lrp_checkindex(L, 3, t, d);
    rp_tensor *out = lrp_newtensor(L);
    t = lrp_checktensor(L, 1); /* again after the allocation (args.h) */
    rp_status st = rp_tensor_select(out, t, d, i);
    if (st != RP_OK) return lrp_raise(L, st);
    return 1;
}

/* ---- slicing ---- */

enum { SL_ALL, SL_RANGE, SL_SELECT };
typedef struct {
    int kind;
    int64_t start, len; /* SL_RANGE: start/len; SL_SELECT: start is the index */
} slice;

/* Applies n slices (one per leading dim of src) into out by chained narrow/select views. out is
 * untouched (empty) on failure. Never raises. */
static rp_status apply_slices(rp_tensor *out, const rp_tensor *src, const slice *sl, int n)
{
    rp_tensor cur;
    rp_tensor_view(&cur, src);
    int d = 0;
    for (int i = 0; i < n; i++) {
        rp_tensor next;
        rp_status st;
        if (sl[i].kind == SL_ALL) {
            d++;
            continue;
        } else if (sl[i].kind == SL_RANGE) {
            st = rp_tensor_narrow(&next, &cur, d, sl[i].start, sl[i].len);
            d++;
        } else {
            st = rp_tensor_select(&next, &cur, d, sl[i].start);
        }
        rp_tensor_release(&cur);
        if (st != RP_OK) return st;
        cur = next;
    }
    *out = cur;
    return RP_OK;
}

/* Parses the slicing spec (a table at stack index idx, reported as argument arg) for t into sl;
 * returns the number of specs. Also computes the shape of the result (res_ndim/res_shape).
 * Raises on any invalid spec. */
static int parse_spec(lua_State *L, int arg, int idx, const rp_tensor *t, slice *sl, int *res_ndim,
                      int64_t *res_shape)
{
    char buf[RP_SHAPE_STR_LEN];
    lua_Unsigned n = lua_rawlen(L, idx);
    if (n > (lua_Unsigned)t->ndim)
        return lrp_argerror(L, arg, "too many indices (%d) for %s", (int)(n > 100 ? 100 : n),
                            lrp_shape_str(buf, t));
    int rn = 0;
    for (int k = 0; k < (int)n; k++) {
        int64_t size = t->shape[k];
        int type = lua_rawgeti(L, idx, k + 1);
        lua_Integer a = 0, b = 0;
        if (type == LUA_TNUMBER) {
            if (!lrp_tointeger(L, -1, &a))
                return lrp_argerror(L, arg, "index %d of the slice must be an integer, got %s",
                                    k + 1, lrp_describe(L, -1));
            int64_t i0 = lrp_toindex(a, size);
            if (i0 < 0)
                return lrp_argerror(L, arg, "index %I out of range for dim %d of %s",
                                    (LUAI_UACINT)a, k + 1, lrp_shape_str(buf, t));
            sl[k].kind = SL_SELECT;
            sl[k].start = i0;
        } else if (type == LUA_TTABLE) {
            lua_Unsigned m = lua_rawlen(L, -1);
            if (m > 2)
                return lrp_argerror(L, arg, "slice %d must be {}, {i} or {a, b}, got %d entries",
                                    k + 1, (int)(m > 100 ? 100 : m));
            if (m == 0) {
                sl[k].kind = SL_ALL;
                res_shape[rn++] = size;
            } else {
                lua_rawgeti(L, -1, 1);
                if (!lrp_tointeger(L, -1, &a))
                    return lrp_argerror(L, arg, "slice %d must hold integers, got %s", k + 1,
                                        lrp_describe(L, -1));
                lua_rawgeti(L, -2, (lua_Integer)m);
                if (!lrp_tointeger(L, -1, &b))
                    return lrp_argerror(L, arg, "slice %d must hold integers, got %s", k + 1,
                                        lrp_describe(L, -1));
                lua_pop(L, 2);
                int64_t start, len;
                if (m == 1) {
                    int64_t i0 = lrp_toindex(a, size);
                    if (i0 < 0)
                        return lrp_argerror(L, arg, "index %I out of range for dim %d of %s",
                                            (LUAI_UACINT)a, k + 1, lrp_shape_str(buf, t));
                    start = i0;
                    len = 1;
                } else if (!to_range(a, b, size, &start, &len)) {
                    return lrp_argerror(L, arg, "range {%I, %I} out of range for dim %d of %s",
                                        (LUAI_UACINT)a, (LUAI_UACINT)b, k + 1,
                                        lrp_shape_str(buf, t));
                }
                sl[k].kind = SL_RANGE;
                sl[k].start = start;
                sl[k].len = len;
                res_shape[rn++] = len;
            }
        } else {
            return lrp_argerror(L, arg, "index %d of the slice must be a number or a table, got %s",
                                k + 1, lrp_describe(L, -1));
        }
        lua_pop(L, 1);
    }
    for (int k = (int)n; k < t->ndim; k++) res_shape[rn++] = t->shape[k];
    *res_ndim = rn;
    return (int)n;
}

/* t:sub(a1, b1[, a2, b2, ...]): inclusive ranges per dim (negatives count from the end). */
static int m_sub(lua_State *L)
{
    rp_tensor *t = lrp_checktensor(L, 1);
    char buf[RP_SHAPE_STR_LEN];
    int nargs = lua_gettop(L) - 1;
    if (nargs % 2 != 0)
        return lrp_argerror(L, nargs + 1, "sub takes pairs of bounds (a, b), got %d numbers",
                            nargs);
    if (nargs / 2 > t->ndim)
        return lrp_argerror(L, 2 * t->ndim + 2, "too many ranges (%d) for %s", nargs / 2,
                            lrp_shape_str(buf, t));
    slice sl[RP_MAX_DIMS];
    for (int k = 0; k < nargs / 2; k++) {
        lua_Integer a = lrp_checkint(L, 2 + 2 * k, "bound");
        lua_Integer b = lrp_checkint(L, 3 + 2 * k, "bound");
        if (!to_range(a, b, t->shape[k], &sl[k].start, &sl[k].len))
            return lrp_argerror(L, 2 + 2 * k, "range %I..%I out of range for dim %d of %s",
                                (LUAI_UACINT)a, (LUAI_UACINT)b, k + 1, lrp_shape_str(buf, t));
        sl[k].kind = SL_RANGE;
    }
    rp_tensor *out = lrp_newtensor(L);
    t = lrp_checktensor(L, 1); /* again after the allocation (args.h) */
    rp_status st = apply_slices(out, t, sl, nargs / 2);
    if (st != RP_OK) return lrp_raise(L, st);
    return 1;
}

/* __index: t[i] (a number for 1-D, else select(1, i)), t[{...}] (slicing; a number when every
 * dim is selected), t.name / t:name (methods, upvalue 1 is the method table). */
static int t_index(lua_State *L)
{
    int kt = lua_type(L, 2);
    if (kt == LUA_TSTRING) {
        lua_pushvalue(L, 2);
        lua_rawget(L, lua_upvalueindex(1));
        return 1;
    }
    rp_tensor *t = lrp_checktensor(L, 1);
    if (kt == LUA_TNUMBER) {
        if (t->ndim == 0) return lrp_argerror(L, 2, "cannot index a 0-dim tensor (use item)");
        int64_t i = lrp_checkindex(L, 2, t, 0);
        if (t->ndim == 1) {
            lua_pushnumber(L, (lua_Number)rp_tensor_data(t)[i * t->stride[0]]);
            return 1;
        }
        rp_tensor *out = lrp_newtensor(L);
        t = lrp_checktensor(L, 1); /* again after the allocation (args.h) */
        rp_status st = rp_tensor_select(out, t, 0, i);
        if (st != RP_OK) return lrp_raise(L, st);
        return 1;
    }
    if (kt == LUA_TTABLE) {
        slice sl[RP_MAX_DIMS];
        int64_t rshape[RP_MAX_DIMS];
        int rndim = 0;
        int n = parse_spec(L, 2, 2, t, sl, &rndim, rshape);
        if (rndim == 0 && n == t->ndim && t->ndim > 0) {
            int64_t idx[RP_MAX_DIMS];
            for (int k = 0; k < n; k++) idx[k] = sl[k].start;
            lua_pushnumber(L, (lua_Number)*elem_ptr(t, idx));
            return 1;
        }
        rp_tensor *out = lrp_newtensor(L);
        t = lrp_checktensor(L, 1); /* again after the allocation (args.h) */
        rp_status st = apply_slices(out, t, sl, n);
        if (st != RP_OK) return lrp_raise(L, st);
        return 1;
    }
    return lrp_argerror(L, 2, "tensor index must be an integer, a table or a method name, got %s",
                        lrp_describe(L, 2));
}

/* Assigns the value at stack index 3 (number: fill; tensor: broadcast copy) into view. Releases
 * view. Returns the status. Never raises. */
static rp_status assign_view(lua_State *L, rp_tensor *view, const rp_tensor *src)
{
    rp_status st = RP_OK;
    if (src == NULL) {
        rp_tensor_fill(view, (float)lua_tonumber(L, 3));
    } else {
        rp_tensor sq;
        st = lrp_squeeze_lead(&sq, src, view->ndim);
        if (st == RP_OK) {
            st = rp_tensor_copy(view, &sq);
            rp_tensor_release(&sq);
        }
    }
    rp_tensor_release(view);
    return st;
}

/* __newindex: t[i] = x, t[{...}] = x with x a number (fill) or a tensor (broadcast copy). */
static int t_newindex(lua_State *L)
{
    rp_tensor *t = lrp_checktensor(L, 1);
    int kt = lua_type(L, 2);
    if (kt == LUA_TSTRING)
        return lrp_argerror(L, 2, "cannot set field '%s' of a tensor", lua_tostring(L, 2));
    const rp_tensor *src = NULL;
    if (lua_type(L, 3) != LUA_TNUMBER) {
        if (!lrp_totensor(L, 3))
            return lrp_argerror(L, 3, "number or tensor expected, got %s", lrp_describe(L, 3));
        src = lrp_checktensor(L, 3);
    }
    slice sl[RP_MAX_DIMS];
    int n;
    rp_tensor dst_shape; /* only ndim/shape are used, for the broadcast check */
    memset(&dst_shape, 0, sizeof dst_shape);
    if (kt == LUA_TNUMBER) {
        if (t->ndim == 0) return lrp_argerror(L, 2, "cannot index a 0-dim tensor (use fill)");
        sl[0].kind = SL_SELECT;
        sl[0].start = lrp_checkindex(L, 2, t, 0);
        n = 1;
        dst_shape.ndim = t->ndim - 1;
        for (int i = 1; i < t->ndim; i++) dst_shape.shape[i - 1] = t->shape[i];
    } else if (kt == LUA_TTABLE) {
        n = parse_spec(L, 2, 2, t, sl, &dst_shape.ndim, dst_shape.shape);
    } else {
        return lrp_argerror(L, 2, "tensor index must be an integer or a table, got %s",
                            lrp_describe(L, 2));
    }
    if (src) lrp_check_broadcast_to(L, 3, src, &dst_shape);
    rp_tensor view;
    rp_status st = apply_slices(&view, t, sl, n);
    if (st == RP_OK) st = assign_view(L, &view, src);
    if (st != RP_OK) return lrp_raise(L, st);
    return 0;
}

/* ---- elements ---- */

/* Reads ndim indices at args first.. into idx (0-based), checking count and ranges. */
static void check_indices(lua_State *L, const rp_tensor *t, int first, int count, const char *fname,
                          int64_t *idx)
{
    if (count != t->ndim) {
        char buf[RP_SHAPE_STR_LEN];
        lrp_argerror(L, first, "%s needs %d %s for %s, got %d", fname, t->ndim,
                     t->ndim == 1 ? "index" : "indices", lrp_shape_str(buf, t), count);
    }
    for (int i = 0; i < count; i++) idx[i] = lrp_checkindex(L, first + i, t, i);
}

/* t:get(i, j, ...) */
static int m_get(lua_State *L)
{
    rp_tensor *t = lrp_checktensor(L, 1);
    int64_t idx[RP_MAX_DIMS];
    int count = lua_gettop(L) - 1;
    if (count > RP_MAX_DIMS) count = RP_MAX_DIMS + 1;
    check_indices(L, t, 2, count, "get", idx);
    lua_pushnumber(L, (lua_Number)*elem_ptr(t, idx));
    return 1;
}

/* t:set(i, j, ..., value): returns t. */
static int m_set(lua_State *L)
{
    rp_tensor *t = lrp_checktensor(L, 1);
    int top = lua_gettop(L);
    int64_t idx[RP_MAX_DIMS];
    if (top < 2) return lrp_argerror(L, 2, "set needs %d indices and a value", t->ndim);
    double v = lrp_checknumber(L, top, "value");
    int count = top - 2;
    if (count > RP_MAX_DIMS) count = RP_MAX_DIMS + 1;
    check_indices(L, t, 2, count, "set", idx);
    *elem_ptr(t, idx) = (float)v;
    lua_settop(L, 1);
    return 1;
}

/* t:item(): the value of a one-element tensor. */
static int m_item(lua_State *L)
{
    rp_tensor *t = lrp_checktensor(L, 1);
    if (rp_tensor_numel(t) != 1) {
        char buf[RP_SHAPE_STR_LEN];
        return lrp_argerror(L, 1, "item() needs a tensor of one element, got %s",
                            lrp_shape_str(buf, t));
    }
    int64_t idx[RP_MAX_DIMS] = {0};
    lua_pushnumber(L, (lua_Number)*elem_ptr(t, idx));
    return 1;
}

/* Pushes nested tables for dims d.. of t starting at p. */
static void push_nested(lua_State *L, const rp_tensor *t, int d, const float *p)
{
    int64_t n = t->shape[d];
    luaL_checkstack(L, 3, "totable");
    lua_createtable(L, n > INT_MAX ? INT_MAX : (int)n, 0);
    for (int64_t i = 0; i < n; i++) {
        const float *q = p + i * t->stride[d];
        if (d == t->ndim - 1) lua_pushnumber(L, (lua_Number)*q);
        else push_nested(L, t, d + 1, q);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
}

/* t:totable(): nested tables (flat for 1-D; a 0-dim tensor gives its number). */
static int m_totable(lua_State *L)
{
    rp_tensor *t = lrp_checktensor(L, 1);
    if (t->ndim == 0) {
        lua_pushnumber(L, (lua_Number)*rp_tensor_data(t));
        return 1;
    }
    /* the tables are built while the data is read, and each allocation may run a finalizer that
     * releases t: read through a private view that holds its own storage reference */
    lua_settop(L, 1);
    rp_tensor *pin = lrp_newtensor(L); /* 2 */
    rp_tensor_view(pin, lrp_checktensor(L, 1));
    push_nested(L, pin, 0, rp_tensor_data(pin));
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

/* ---- arithmetic ---- */

static const char *const binop_names[] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum"};

/* Elementwise a op b (upvalue 1: rp_binop) with numbers on either side: the methods add, mul,
 * div, pow and the metamethods __add, __sub, __mul, __div, __pow. */
static int t_binop(lua_State *L)
{
    rp_binop op = (rp_binop)lua_tointeger(L, lua_upvalueindex(1));
    rp_tensor *a = lrp_totensor(L, 1), *b = lrp_totensor(L, 2);
    rp_status st;
    if (a && b) {
        a = lrp_checktensor(L, 1);
        b = lrp_checktensor(L, 2);
        int64_t shape[RP_MAX_DIMS];
        char sa[RP_SHAPE_STR_LEN], sb[RP_SHAPE_STR_LEN], sc[RP_SHAPE_STR_LEN];
        int nd = 0;
        if (rp_broadcast_shape(&nd, shape, a, b) != RP_OK)
            return lrp_argerror(L, 2, "shapes %s and %s do not broadcast", lrp_shape_str(sa, a),
                                lrp_shape_str(sb, b));
        int64_t p = 1;
        for (int i = 0; i < nd; i++) {
            if (shape[i] == 0) {
                p = 0;
                break;
            }
            if (shape[i] > RP_MAX_NUMEL / p)
                return lrp_argerror(L, 2, "shapes %s and %s broadcast to %s: too many elements",
                                    lrp_shape_str(sa, a), lrp_shape_str(sb, b),
                                    lrp_shape_str_n(sc, nd, shape));
            p *= shape[i];
        }
        rp_tensor *out = lrp_newtensor(L);
        a = lrp_checktensor(L, 1); /* again after the allocation (args.h) */
        b = lrp_checktensor(L, 2);
        st = rp_binary(out, op, a, b);
    } else if (a) {
        a = lrp_checktensor(L, 1);
        if (lua_type(L, 2) != LUA_TNUMBER)
            return lrp_argerror(L, 2, "tensor or number expected, got %s", lrp_describe(L, 2));
        rp_tensor *out = lrp_newtensor(L);
        a = lrp_checktensor(L, 1); /* again after the allocation (args.h) */
        st = rp_binary_scalar(out, op, a, (double)lua_tonumber(L, 2), 0);
    } else if (b) {
        b = lrp_checktensor(L, 2);
        if (lua_type(L, 1) != LUA_TNUMBER)
            return lrp_argerror(L, 1, "tensor or number expected, got %s", lrp_describe(L, 1));
        rp_tensor *out = lrp_newtensor(L);
        b = lrp_checktensor(L, 2); /* again after the allocation (args.h) */
        st = rp_binary_scalar(out, op, b, (double)lua_tonumber(L, 1), 1);
    } else {
        return lrp_argerror(L, 1, "tensor expected for '%s', got %s", binop_names[op],
                            lrp_describe(L, 1));
    }
    if (st != RP_OK) return lrp_raise(L, st);
    return 1;
}

/* Elementwise f(t) (upvalue 1: rp_unop): exp, log, ..., neg and __unm. */
static int t_unop(lua_State *L)
{
    rp_unop op = (rp_unop)lua_tointeger(L, lua_upvalueindex(1));
    rp_tensor *t = lrp_checktensor(L, 1);
    rp_tensor *out = lrp_newtensor(L);
    t = lrp_checktensor(L, 1); /* again after the allocation (args.h) */
    rp_status st = rp_unary(out, op, t);
    if (st != RP_OK) return lrp_raise(L, st);
    return 1;
}

/* ---- reductions ---- */

static const char *const reduce_names[] = {"sum", "mean", "max", "min"};

/* Reads the optional keepdim at arg (nil/none: 0; otherwise a boolean). */
static int check_keepdim(lua_State *L, int arg)
{
    if (lua_isnoneornil(L, arg)) return 0;
    if (lua_type(L, arg) != LUA_TBOOLEAN)
        return lrp_argerror(L, arg, "keepdim must be a boolean, got %s", lrp_describe(L, arg));
    return lua_toboolean(L, arg);
}

/* t:sum([dim[, keepdim]]), mean, max, min (upvalue 1: rp_reduce_op): without dim, a number over
 * all elements; with dim, a tensor. max/min of nothing is an error, mean of nothing is nan. */
static int t_reduce(lua_State *L)
{
    rp_reduce_op op = (rp_reduce_op)lua_tointeger(L, lua_upvalueindex(1));
    rp_tensor *t = lrp_checktensor(L, 1);
    char buf[RP_SHAPE_STR_LEN];
    int minmax = op == RP_MAX || op == RP_MIN;
    rp_status st;
    if (lua_isnoneornil(L, 2)) {
        if (!lua_isnoneornil(L, 3)) return lrp_argerror(L, 3, "keepdim needs a dim");
        if (minmax && rp_tensor_numel(t) == 0)
            return lrp_argerror(L, 1, "%s of an empty tensor %s", reduce_names[op],
                                lrp_shape_str(buf, t));
        double r = 0.0;
        st = rp_reduce_all(&r, op, t);
        if (st != RP_OK) return lrp_raise(L, st);
        lua_pushnumber(L, (lua_Number)r);
        return 1;
    }
    int d = lrp_checkdim(L, 2, t);
    int keep = check_keepdim(L, 3);
    if (minmax && t->shape[d] == 0)
        return lrp_argerror(L, 2, "%s over dim %d of size 0 in %s", reduce_names[op], d + 1,
                            lrp_shape_str(buf, t));
    rp_tensor *out = lrp_newtensor(L);
    t = lrp_checktensor(L, 1); /* again after the allocation (args.h) */
    st = rp_reduce(out, op, t, d, keep);
    if (st != RP_OK) return lrp_raise(L, st);
    return 1;
}

static void add_one_run(float *p, int64_t n, int64_t stride, void *ctx)
{
    (void)ctx;
    for (int64_t i = 0; i < n; i++) p[i * stride] += 1.0f;
}

/* t:argmax(dim[, keepdim]): 1-based indices of the max along dim, as floats. */
static int m_argmax(lua_State *L)
{
    rp_tensor *t = lrp_checktensor(L, 1);
    int d = lrp_checkdim(L, 2, t);
    int keep = check_keepdim(L, 3);
    if (t->shape[d] == 0) {
        char buf[RP_SHAPE_STR_LEN];
        return lrp_argerror(L, 2, "argmax over dim %d of size 0 in %s", d + 1,
                            lrp_shape_str(buf, t));
    }
    rp_tensor *out = lrp_newtensor(L);
    t = lrp_checktensor(L, 1); /* again after the allocation (args.h) */
    rp_status st = rp_argmax(out, t, d, keep);
    if (st != RP_OK) return lrp_raise(L, st);
    rp_tensor_foreach_run(out, add_one_run, NULL);
    return 1;
}

/* t:softmax(dim) */
static int m_softmax(lua_State *L)
{
    rp_tensor *t = lrp_checktensor(L, 1);
    int d = lrp_checkdim(L, 2, t);
    rp_tensor *out = lrp_newtensor(L);
    t = lrp_checktensor(L, 1); /* again after the allocation (args.h) */
    rp_status st = rp_softmax(out, t, d);
    if (st != RP_OK) return lrp_raise(L, st);
    return 1;
}

static void sumsq_run(float *p, int64_t n, int64_t stride, void *ctx)
{
    double *acc = (double *)ctx;
    for (int64_t i = 0; i < n; i++) {
        double x = (double)p[i * stride];
        *acc += x * x;
    }
}

/* t:norm(): Euclidean norm over all elements. */
static int m_norm(lua_State *L)
{
    rp_tensor *t = lrp_checktensor(L, 1);
    double acc = 0.0;
    if (rp_tensor_numel(t) > 0) rp_tensor_foreach_run(t, sumsq_run, &acc);
    lua_pushnumber(L, (lua_Number)sqrt(acc));
    return 1;
}

/* max |a - b| over same-shaped a and b (any strides); nan when any difference is nan. */
static double max_abs_diff(const rp_tensor *a, const rp_tensor *b)
{
    if (rp_tensor_numel(a) == 0) return 0.0;
    const float *pa = rp_tensor_data(a), *pb = rp_tensor_data(b);
    int64_t idx[RP_MAX_DIMS] = {0};
    int64_t oa = 0, ob = 0;
    double m = 0.0;
    int has_nan = 0;
    for (;;) {
        double x = fabs((double)pa[oa] - (double)pb[ob]);
        if (isnan(x)) has_nan = 1;
        else if (x > m) m = x;
        int d = a->ndim - 1;
        for (; d >= 0; d--) {
            idx[d]++;
            oa += a->stride[d];
            ob += b->stride[d];
            if (idx[d] < a->shape[d]) break;
            oa -= a->stride[d] * a->shape[d];
            ob -= b->stride[d] * b->shape[d];
            idx[d] = 0;
        }
        if (d < 0) break;
    }
    return has_nan ? (double)NAN : m;
}

/* t:maxdiff(u) and rp.maxdiff(a, b): max abs difference; shapes must match. */
static int l_maxdiff(lua_State *L)
{
    rp_tensor *a = lrp_checktensor(L, 1);
    rp_tensor *b = lrp_checktensor(L, 2);
    if (!rp_tensor_same_shape(a, b)) {
        char sa[RP_SHAPE_STR_LEN], sb[RP_SHAPE_STR_LEN];
        return lrp_argerror(L, 2, "shapes %s and %s differ", lrp_shape_str(sa, a),
                            lrp_shape_str(sb, b));
    }
    lua_pushnumber(L, (lua_Number)max_abs_diff(a, b));
    return 1;
}

/* ---- registration ---- */

static const luaL_Reg methods[] = {
    {"shape", m_shape},       {"size", m_size},
    {"dim", m_dim},           {"numel", m_numel},
    {"stride", m_stride},     {"is_contiguous", m_is_contiguous},
    {"view", m_view},         {"reshape", m_reshape},
    {"t", m_t},               {"transpose", m_transpose},
    {"permute", m_permute},   {"narrow", m_narrow},
    {"select", m_select},     {"sub", m_sub},
    {"get", m_get},           {"set", m_set},
    {"item", m_item},         {"contiguous", m_contiguous},
    {"clone", m_clone},       {"copy", m_copy},
    {"fill", m_fill},         {"zero", m_zero},
    {"totable", m_totable},   {"argmax", m_argmax},
    {"softmax", m_softmax},   {"norm", m_norm},
    {"matmul", lrp_matmul},   {"maxdiff", l_maxdiff},
    {NULL, NULL},
};

static const luaL_Reg constructors[] = {
    {"tensor", l_tensor},     {"zeros", l_zeros},     {"ones", l_ones},
    {"full", l_full},         {"range", l_range},     {"linspace", l_linspace},
    {"eye", l_eye},           {"is_tensor", l_is_tensor}, {"maxdiff", l_maxdiff},
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
    set_op_closures(L, meth, t_binop, binop_methods);
    set_op_closures(L, meth, t_unop, unop_methods);
    set_op_closures(L, meth, t_reduce, reduce_methods);
    lua_pushvalue(L, meth);
    lua_setfield(L, mod, "Tensor");

    lua_pushvalue(L, meth);
    lua_pushcclosure(L, t_index, 1);
    lua_setfield(L, mt, "__index");
    lua_pushcfunction(L, t_newindex);
    lua_setfield(L, mt, "__newindex");
    lua_pushcfunction(L, t_release);
    lua_setfield(L, mt, "__gc");
    lua_pushcfunction(L, t_release);
    lua_setfield(L, mt, "__close");
    lua_pushcfunction(L, t_len);
    lua_setfield(L, mt, "__len");
    set_op_closures(L, mt, t_binop, binop_meta);
    lua_pushinteger(L, RP_NEG);
    lua_pushcclosure(L, t_unop, 1);
    lua_setfield(L, mt, "__unm");
    lua_settop(L, mt - 1);

    lua_pushvalue(L, mod);
    luaL_setfuncs(L, constructors, 0);
    lua_pop(L, 1);
}
