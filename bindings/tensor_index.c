/* roper.Tensor views, slicing and element access: t:view, t:reshape, t:transpose, t:t, t:permute,
 * t:narrow, t:select, t:sub, t[i] and t[i] = x (__index, __newindex), t:get, t:set, t:item,
 * t:totable. Registered by tensor.c (tensor_index.h); the rules are in args.h.
 */
#include <limits.h>
#include <string.h>

#include "args.h"
#include "tensor_index.h"
#include "userdata.h"

/* Pointer to the element at the 0-based indices idx[0..ndim-1] (already range-checked). */
static float *elem_ptr(const rp_tensor *t, const int64_t *idx)
{
    int64_t off = 0;
    for (int i = 0; i < t->ndim; i++) off += idx[i] * t->stride[i];
    return rp_tensor_data(t) + off;
}

/* ---- views ---- */

/* t:view(shape) / t:reshape(shape): shape as a table or numbers, one size may be -1. */
static int reshape_common(lua_State *L, int need_contiguous)
{
    rp_tensor *t = lrp_checktensor(L, 1);
    int64_t shape[RP_MAX_DIMS];
    int ndim = lrp_shape_args(L, 2, lua_gettop(L), shape, 1);
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

int lrp_tensor_view(lua_State *L) { return reshape_common(L, 1); }
int lrp_tensor_reshape(lua_State *L) { return reshape_common(L, 0); }

/* t:transpose(d1, d2) */
int lrp_tensor_transpose(lua_State *L)
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
int lrp_tensor_t(lua_State *L)
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
int lrp_tensor_permute(lua_State *L)
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
            return lrp_argerror(L, arg, "dim %I out of range for %s%s", (LUAI_UACINT)d,
                                lrp_shape_str(buf, t), lrp_base_hint(d == 0));
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
int lrp_tensor_narrow(lua_State *L)
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
        return lrp_argerror(L, 3, "start %I out of range for dim %d of %s%s", (LUAI_UACINT)start,
                            d + 1, lrp_shape_str(buf, t), lrp_base_hint(start == 0));
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
int lrp_tensor_select(lua_State *L)
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
                return lrp_argerror(L, arg, "index %I out of range for dim %d of %s%s",
                                    (LUAI_UACINT)a, k + 1, lrp_shape_str(buf, t),
                                    lrp_base_hint(a == 0));
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
                        return lrp_argerror(L, arg, "index %I out of range for dim %d of %s%s",
                                            (LUAI_UACINT)a, k + 1, lrp_shape_str(buf, t),
                                            lrp_base_hint(a == 0));
                    start = i0;
                    len = 1;
                } else if (!to_range(a, b, size, &start, &len)) {
                    return lrp_argerror(L, arg, "range {%I, %I} out of range for dim %d of %s%s",
                                        (LUAI_UACINT)a, (LUAI_UACINT)b, k + 1,
                                        lrp_shape_str(buf, t), lrp_base_hint(a == 0 || b == 0));
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

/* t:diag([k]): of a 2-D t its k-th diagonal (default 0; k > 0 above the main one, k < 0 below)
 * as a 1-D view; of a 1-D t of size n a new (n + |k|) x (n + |k|) matrix with t on its k-th
 * diagonal and zeros elsewhere (torch.diag). */
int lrp_tensor_diag(lua_State *L)
{
    rp_tensor *t = lrp_checktensor(L, 1);
    char buf[RP_SHAPE_STR_LEN];
    lua_Integer k = lua_isnoneornil(L, 2) ? 0 : lrp_checkint(L, 2, "k");
    if (t->ndim != 1 && t->ndim != 2)
        return lrp_argerror(L, 1, "diag takes a 1-D or 2-D tensor, got %s", lrp_shape_str(buf, t));
    if (t->ndim == 2) {
        rp_tensor *out = lrp_newtensor(L);
        t = lrp_checktensor(L, 1); /* again after the allocation (args.h) */
        rp_status st = rp_tensor_diagonal(out, t, (int64_t)k);
        if (st != RP_OK) return lrp_raise(L, st);
        return 1;
    }
    int64_t n = t->shape[0];
    int64_t mag = k < -RP_I32_MAX || k > RP_I32_MAX ? RP_I32_MAX : k < 0 ? -k : k; /* |k|, bounded */
    if (n + mag > RP_I32_MAX || (n + mag) * (n + mag) > RP_MAX_NUMEL)
        return lrp_argerror(L, 2, "diag of %s with k = %I gives too large a matrix",
                            lrp_shape_str(buf, t), (LUAI_UACINT)k);
    int64_t shape[2] = {n + mag, n + mag};
    rp_tensor *out = lrp_newtensor(L);
    rp_tensor d;
    rp_status st = rp_tensor_new(out, 2, shape);
    if (st != RP_OK) return lrp_raise(L, st);
    st = rp_tensor_diagonal(&d, out, (int64_t)k);
    if (st != RP_OK) return lrp_raise(L, st);
    t = lrp_checktensor(L, 1); /* again after the allocations; no Lua call from here on */
    st = rp_tensor_copy(&d, t);
    rp_tensor_release(&d);
    if (st != RP_OK) return lrp_raise(L, st);
    return 1;
}

/* t:sub(a1, b1[, a2, b2, ...]): inclusive ranges per dim (negatives count from the end). */
int lrp_tensor_sub(lua_State *L)
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
            return lrp_argerror(L, 2 + 2 * k, "range %I..%I out of range for dim %d of %s%s",
                                (LUAI_UACINT)a, (LUAI_UACINT)b, k + 1, lrp_shape_str(buf, t),
                                lrp_base_hint(a == 0 || b == 0));
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
int lrp_tensor_index(lua_State *L)
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
int lrp_tensor_newindex(lua_State *L)
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
int lrp_tensor_get(lua_State *L)
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
int lrp_tensor_set(lua_State *L)
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
int lrp_tensor_item(lua_State *L)
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
int lrp_tensor_totable(lua_State *L)
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
