/* roper.Tensor arithmetic and reductions: the elementwise operators and functions (add, mul, div,
 * pow, __add .. __unm, exp .. neg), sum, mean, max, min, t:argmax, t:softmax, t:norm, and
 * rp.maxdiff / t:maxdiff, rp.matmul / t:matmul. Registered by tensor.c (tensor_math.h; rp.matmul by nn.c); the rules are in args.h.
 */
#include <math.h>
#include <string.h>

#include "args.h"
#include "tensor_math.h"
#include "userdata.h"

/* ---- arithmetic ---- */

static const char *const binop_names[] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum"};

/* Elementwise a op b (upvalue 1: rp_binop) with numbers on either side: the methods add, mul,
 * div, pow and the metamethods __add, __sub, __mul, __div, __pow. */
int lrp_tensor_binop(lua_State *L)
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
        int64_t numel; /* the rule of rp_tensor_new: a 0 does not lift the limit */
        if (!rp_shape_span(nd, shape, RP_MAX_NUMEL, &numel))
            return lrp_argerror(L, 2, "shapes %s and %s broadcast to %s: too many elements",
                                lrp_shape_str(sa, a), lrp_shape_str(sb, b),
                                lrp_shape_str_n(sc, nd, shape));
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
int lrp_tensor_unop(lua_State *L)
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
int lrp_tensor_reduce(lua_State *L)
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
int lrp_tensor_argmax(lua_State *L)
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
int lrp_tensor_softmax(lua_State *L)
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
int lrp_tensor_norm(lua_State *L)
{
    rp_tensor *t = lrp_checktensor(L, 1);
    double acc = 0.0;
    if (rp_tensor_numel(t) > 0) rp_tensor_foreach_run(t, sumsq_run, &acc);
    lua_pushnumber(L, (lua_Number)sqrt(acc));
    return 1;
}

/* t:dot(u) -> number: the dot product of two 1-D tensors of one length (double accumulation). */
int lrp_tensor_dot(lua_State *L)
{
    rp_tensor *a = lrp_checktensor(L, 1);
    rp_tensor *b = lrp_checktensor(L, 2);
    char sa[RP_SHAPE_STR_LEN], sb[RP_SHAPE_STR_LEN];
    if (a->ndim != 1)
        return lrp_argerror(L, 1, "dot takes 1-D tensors, got %s (rp.matmul multiplies matrices)",
                            lrp_shape_str(sa, a));
    if (b->ndim != 1 || b->shape[0] != a->shape[0])
        return lrp_argerror(L, 2, "dot needs two 1-D tensors of one length, got %s and %s",
                            lrp_shape_str(sa, a), lrp_shape_str(sb, b));
    double r = 0.0;
    rp_status st = rp_dot(&r, a, b);
    if (st != RP_OK) return lrp_raise(L, st);
    lua_pushnumber(L, (lua_Number)r);
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
int lrp_maxdiff(lua_State *L)
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

/* ---- matmul ---- */

/* rp.matmul(a, b) / a:matmul(b): a (.., M, K) @ b (.., K, N) -> (.., M, N) with broadcast batch
 * dims; a 1-D a is a row and a 1-D b a column, and that dim is dropped (numpy). */
int lrp_matmul(lua_State *L)
{
    rp_tensor *a = lrp_checktensor(L, 1);
    rp_tensor *b = lrp_checktensor(L, 2);
    char sa[RP_SHAPE_STR_LEN], sb[RP_SHAPE_STR_LEN];
    if (a->ndim < 1)
        return lrp_argerror(L, 1, "matmul needs at least 1 dim, got %s", lrp_shape_str(sa, a));
    if (b->ndim < 1)
        return lrp_argerror(L, 2, "matmul needs at least 1 dim, got %s", lrp_shape_str(sb, b));
    int64_t M = a->ndim >= 2 ? a->shape[a->ndim - 2] : 1;
    int64_t K = a->shape[a->ndim - 1];
    int64_t Kb = b->ndim >= 2 ? b->shape[b->ndim - 2] : b->shape[0];
    int64_t N = b->ndim >= 2 ? b->shape[b->ndim - 1] : 1;
    if (K != Kb)
        return lrp_argerror(L, 2, "shapes %s and %s do not fit for matmul (inner sizes %I and %I)",
                            lrp_shape_str(sa, a), lrp_shape_str(sb, b), (LUAI_UACINT)K,
                            (LUAI_UACINT)Kb);
    /* batch dims */
    rp_tensor ba, bb;
    memset(&ba, 0, sizeof ba);
    memset(&bb, 0, sizeof bb);
    ba.ndim = a->ndim > 2 ? a->ndim - 2 : 0;
    bb.ndim = b->ndim > 2 ? b->ndim - 2 : 0;
    for (int i = 0; i < ba.ndim; i++) ba.shape[i] = a->shape[i];
    for (int i = 0; i < bb.ndim; i++) bb.shape[i] = b->shape[i];
    int64_t shape[RP_MAX_DIMS + 2];
    int nd = 0;
    if (rp_broadcast_shape(&nd, shape, &ba, &bb) != RP_OK)
        return lrp_argerror(L, 2, "batch dims of %s and %s do not broadcast", lrp_shape_str(sa, a),
                            lrp_shape_str(sb, b));
    if (M > RP_I32_MAX || N > RP_I32_MAX || K > RP_I32_MAX)
        return lrp_argerror(L, 2, "matmul sizes must be at most 2^31-1 (M = %I, N = %I, K = %I)",
                            (LUAI_UACINT)M, (LUAI_UACINT)N, (LUAI_UACINT)K);
    if (a->ndim >= 2) shape[nd++] = M;
    if (b->ndim >= 2) shape[nd++] = N;
    int64_t span;
    if (nd > RP_MAX_DIMS || !rp_shape_span(nd, shape, RP_MAX_NUMEL, &span)) /* rp_tensor_new's rule */
        return lrp_argerror(L, 2, "matmul of %s and %s gives too large a result",
                            lrp_shape_str(sa, a), lrp_shape_str(sb, b));
    rp_tensor *out = lrp_newtensor(L);
    rp_status st;
    if (lrp_numel(nd, shape) == 0 || K == 0) {
        st = rp_tensor_new(out, nd, shape); /* zeros */
    } else {
        a = lrp_checktensor(L, 1); /* again: the allocation may have run a finalizer */
        b = lrp_checktensor(L, 2);
        st = rp_matmul(out, a, b, 0);
    }
    if (st != RP_OK) return lrp_raise(L, st);
    return 1;
}
