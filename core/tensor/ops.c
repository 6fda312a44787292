#include "ops.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "blas.h"

rp_status rp_broadcast_shape(int *ndim, int64_t *shape, const rp_tensor *a, const rp_tensor *b)
{
    int n = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int i = 0; i < n; i++) {
        int ia = i - (n - a->ndim), ib = i - (n - b->ndim);
        int64_t sa = ia >= 0 ? a->shape[ia] : 1, sb = ib >= 0 ? b->shape[ib] : 1;
        if (sa != sb && sa != 1 && sb != 1) {
            char b1[RP_SHAPE_STR_LEN], b2[RP_SHAPE_STR_LEN];
            return rp_error(RP_ERR_SHAPE, "shapes %s and %s do not broadcast",
                            rp_tensor_shape_str(b1, sizeof b1, a),
                            rp_tensor_shape_str(b2, sizeof b2, b));
        }
        shape[i] = sa == 1 ? sb : sa;
    }
    *ndim = n;
    return RP_OK;
}

/* Advances a row-major multi-index over dims 0..last-1 (the innermost dim is a run).
 * Returns 0 when done. */
static int next_outer(int64_t *idx, const int64_t *shape, int last)
{
    for (int i = last - 1; i >= 0; i--) {
        if (++idx[i] < shape[i]) return 1;
        idx[i] = 0;
    }
    return 0;
}

static int64_t outer_offset(const int64_t *idx, const int64_t *stride, int last)
{
    int64_t off = 0;
    for (int i = 0; i < last; i++) off += idx[i] * stride[i];
    return off;
}

static double apply_binop(rp_binop op, double x, double y)
{
    switch (op) {
    case RP_ADD: return x + y;
    case RP_SUB: return x - y;
    case RP_MUL: return x * y;
    case RP_DIV: return x / y;
    case RP_POW: return pow(x, y);
    case RP_MAXIMUM: return (x != x || x > y) ? x : y;
    case RP_MINIMUM: return (x != x || x < y) ? x : y;
    }
    return 0.0;
}

rp_status rp_binary(rp_tensor *out, rp_binop op, const rp_tensor *a, const rp_tensor *b)
{
    memset(out, 0, sizeof *out);
    int ndim;
    int64_t shape[RP_MAX_DIMS];
    RP_TRY(rp_broadcast_shape(&ndim, shape, a, b));
    rp_tensor ea, eb;
    RP_TRY(rp_tensor_expand(&ea, a, ndim, shape));
    rp_status st = rp_tensor_expand(&eb, b, ndim, shape);
    if (st == RP_OK) st = rp_tensor_new(out, ndim, shape);
    if (st != RP_OK) {
        rp_tensor_release(&ea);
        rp_tensor_release(&eb);
        return st;
    }
    if (rp_tensor_numel(out) > 0) {
        float *o = rp_tensor_data(out);
        const float *pa = rp_tensor_data(&ea), *pb = rp_tensor_data(&eb);
        if (ndim == 0) {
            o[0] = (float)apply_binop(op, (double)pa[0], (double)pb[0]);
        } else {
            int last = ndim - 1;
            int64_t n = shape[last], sa = ea.stride[last], sb = eb.stride[last];
            int64_t idx[RP_MAX_DIMS] = {0};
            do {
                float *orow = o + outer_offset(idx, out->stride, last);
                const float *ra = pa + outer_offset(idx, ea.stride, last);
                const float *rb = pb + outer_offset(idx, eb.stride, last);
                for (int64_t j = 0; j < n; j++)
                    orow[j] = (float)apply_binop(op, (double)ra[j * sa], (double)rb[j * sb]);
            } while (next_outer(idx, shape, last));
        }
    }
    rp_tensor_release(&ea);
    rp_tensor_release(&eb);
    return RP_OK;
}

rp_status rp_binary_scalar(rp_tensor *out, rp_binop op, const rp_tensor *a, double s, int s_first)
{
    RP_TRY(rp_tensor_clone(out, a));
    float *o = rp_tensor_data(out);
    int64_t n = rp_tensor_numel(out);
    for (int64_t i = 0; i < n; i++)
        o[i] = (float)(s_first ? apply_binop(op, s, (double)o[i]) : apply_binop(op, (double)o[i], s));
    return RP_OK;
}

static double apply_unop(rp_unop op, double x)
{
    switch (op) {
    case RP_NEG: return -x;
    case RP_EXP: return exp(x);
    case RP_LOG: return log(x);
    case RP_ABS: return fabs(x);
    case RP_SQRT: return sqrt(x);
    case RP_TANH: return tanh(x);
    case RP_RELU: return x <= 0.0 ? 0.0 : x; /* NaN stays NaN, as max(x, 0) in the model */
    case RP_SIN: return sin(x);
    case RP_COS: return cos(x);
    case RP_SIGMOID: return 1.0 / (1.0 + exp(-x));
    }
    return 0.0;
}

rp_status rp_unary(rp_tensor *out, rp_unop op, const rp_tensor *a)
{
    RP_TRY(rp_tensor_clone(out, a));
    float *o = rp_tensor_data(out);
    int64_t n = rp_tensor_numel(out);
    for (int64_t i = 0; i < n; i++) o[i] = (float)apply_unop(op, (double)o[i]);
    return RP_OK;
}

/* Reduces one strided run of n elements. */
static double reduce_run(rp_reduce_op op, const float *p, int64_t n, int64_t stride)
{
    if (op == RP_SUM || op == RP_MEAN) {
        double acc = 0.0;
        for (int64_t j = 0; j < n; j++) acc += (double)p[j * stride];
        return op == RP_MEAN ? (n > 0 ? acc / (double)n : (double)NAN) : acc;
    }
    double m = (double)p[0];
    for (int64_t j = 1; j < n; j++) {
        double x = (double)p[j * stride];
        if (m != m) break; /* NaN wins */
        if (x != x || (op == RP_MAX ? x > m : x < m)) m = x;
    }
    return m;
}

static const char *reduce_name(rp_reduce_op op)
{
    switch (op) {
    case RP_SUM: return "sum";
    case RP_MEAN: return "mean";
    case RP_MAX: return "max";
    case RP_MIN: return "min";
    }
    return "reduce";
}

/* Shared walk for reductions along one dim: the view `moved` has dim moved to the end. */
static rp_status move_dim_last(rp_tensor *moved, const rp_tensor *a, int dim, const char *what)
{
    if (dim < 0 || dim >= a->ndim) {
        char buf[RP_SHAPE_STR_LEN];
        return rp_error(RP_ERR_RANGE, "%s: dim %d out of range for %s", what, dim + 1,
                        rp_tensor_shape_str(buf, sizeof buf, a));
    }
    int perm[RP_MAX_DIMS], k = 0;
    for (int i = 0; i < a->ndim; i++)
        if (i != dim) perm[k++] = i;
    perm[k] = dim;
    return rp_tensor_permute(moved, a, perm);
}

static rp_status reduced_shape_new(rp_tensor *out, const rp_tensor *a, int dim, int keepdim)
{
    int64_t shape[RP_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < a->ndim; i++) {
        if (i == dim) {
            if (keepdim) shape[n++] = 1;
        } else {
            shape[n++] = a->shape[i];
        }
    }
    return rp_tensor_new(out, n, shape);
}

/* Calls fn(out_index, run_pointer, n, stride) for each run of `moved` along its last dim. */
typedef void (*run_visit)(void *ctx, int64_t k, const float *p, int64_t n, int64_t stride);

static void visit_runs(const rp_tensor *moved, run_visit fn, void *ctx)
{
    int last = moved->ndim - 1;
    int64_t n = moved->shape[last], stride = moved->stride[last];
    int64_t outer = 1;
    for (int i = 0; i < last; i++) outer *= moved->shape[i];
    if (outer == 0) return;
    const float *base = rp_tensor_data(moved);
    int64_t idx[RP_MAX_DIMS] = {0};
    int64_t k = 0;
    do {
        fn(ctx, k++, base + outer_offset(idx, moved->stride, last), n, stride);
    } while (last > 0 && next_outer(idx, moved->shape, last));
}

typedef struct {
    rp_reduce_op op;
    float *out;
} reduce_ctx;

static void reduce_visit(void *vctx, int64_t k, const float *p, int64_t n, int64_t stride)
{
    reduce_ctx *c = vctx;
    c->out[k] = (float)reduce_run(c->op, p, n, stride);
}

rp_status rp_reduce(rp_tensor *out, rp_reduce_op op, const rp_tensor *a, int dim, int keepdim)
{
    memset(out, 0, sizeof *out);
    rp_tensor moved;
    RP_TRY(move_dim_last(&moved, a, dim, reduce_name(op)));
    if ((op == RP_MAX || op == RP_MIN) && a->shape[dim] == 0) {
        rp_tensor_release(&moved);
        char buf[RP_SHAPE_STR_LEN];
        return rp_error(RP_ERR_SHAPE, "%s: dim %d of %s is empty", reduce_name(op), dim + 1,
                        rp_tensor_shape_str(buf, sizeof buf, a));
    }
    rp_status st = reduced_shape_new(out, a, dim, keepdim);
    if (st == RP_OK) {
        reduce_ctx c = {op, rp_tensor_data(out)};
        visit_runs(&moved, reduce_visit, &c);
    }
    rp_tensor_release(&moved);
    return st;
}

typedef struct {
    rp_reduce_op op;
    double acc;
    int64_t count;
} all_ctx;

static void all_run(float *p, int64_t n, int64_t stride, void *vctx)
{
    all_ctx *c = vctx;
    double r = reduce_run(c->op == RP_MEAN ? RP_SUM : c->op, p, n, stride);
    if (c->count == 0)
        c->acc = r;
    else if (c->op == RP_SUM || c->op == RP_MEAN)
        c->acc += r;
    else if (c->acc == c->acc && (r != r || (c->op == RP_MAX ? r > c->acc : r < c->acc)))
        c->acc = r;
    c->count += n;
}

rp_status rp_reduce_all(double *result, rp_reduce_op op, const rp_tensor *a)
{
    int64_t n = rp_tensor_numel(a);
    if (n == 0) {
        if (op == RP_MAX || op == RP_MIN) {
            char buf[RP_SHAPE_STR_LEN];
            return rp_error(RP_ERR_SHAPE, "%s of an empty tensor %s", reduce_name(op),
                            rp_tensor_shape_str(buf, sizeof buf, a));
        }
        *result = op == RP_MEAN ? (double)NAN : 0.0;
        return RP_OK;
    }
    all_ctx c = {op, 0.0, 0};
    rp_tensor_foreach_run(a, all_run, &c);
    *result = op == RP_MEAN ? c.acc / (double)n : c.acc;
    return RP_OK;
}

rp_status rp_dot(double *result, const rp_tensor *a, const rp_tensor *b)
{
    if (a->ndim != 1 || b->ndim != 1 || a->shape[0] != b->shape[0]) {
        char ba[RP_SHAPE_STR_LEN], bb[RP_SHAPE_STR_LEN];
        return rp_error(RP_ERR_SHAPE, "dot: expected two 1-D tensors of one length, got %s and %s",
                        rp_tensor_shape_str(ba, sizeof ba, a), rp_tensor_shape_str(bb, sizeof bb, b));
    }
    double acc = 0.0;
    if (a->shape[0] > 0) {
        const float *pa = rp_tensor_data(a), *pb = rp_tensor_data(b);
        for (int64_t i = 0; i < a->shape[0]; i++)
            acc += (double)pa[i * a->stride[0]] * (double)pb[i * b->stride[0]];
    }
    *result = acc;
    return RP_OK;
}

static void argmax_visit(void *vctx, int64_t k, const float *p, int64_t n, int64_t stride)
{
    float *out = vctx;
    int64_t best = 0;
    for (int64_t j = 1; j < n; j++) {
        float x = p[j * stride], m = p[best * stride];
        if (m != m) break;
        if (x != x || x > m) best = j;
    }
    out[k] = (float)best;
}

rp_status rp_argmax(rp_tensor *out, const rp_tensor *a, int dim, int keepdim)
{
    memset(out, 0, sizeof *out);
    rp_tensor moved;
    RP_TRY(move_dim_last(&moved, a, dim, "argmax"));
    if (a->shape[dim] == 0) {
        rp_tensor_release(&moved);
        char buf[RP_SHAPE_STR_LEN];
        return rp_error(RP_ERR_SHAPE, "argmax: dim %d of %s is empty", dim + 1,
                        rp_tensor_shape_str(buf, sizeof buf, a));
    }
    rp_status st = reduced_shape_new(out, a, dim, keepdim);
    if (st == RP_OK) visit_runs(&moved, argmax_visit, rp_tensor_data(out));
    rp_tensor_release(&moved);
    return st;
}

rp_status rp_softmax(rp_tensor *out, const rp_tensor *a, int dim)
{
    memset(out, 0, sizeof *out);
    rp_tensor moved_out;
    RP_TRY(rp_tensor_clone(out, a));
    rp_status st = move_dim_last(&moved_out, out, dim, "softmax");
    if (st != RP_OK) {
        rp_tensor_release(out);
        return st;
    }
    int last = moved_out.ndim - 1;
    int64_t n = moved_out.shape[last], stride = moved_out.stride[last];
    int64_t outer = rp_tensor_numel(&moved_out) / (n > 0 ? n : 1);
    if (n > 0 && outer > 0) {
        float *base = rp_tensor_data(&moved_out);
        int64_t idx[RP_MAX_DIMS] = {0};
        do {
            float *p = base + outer_offset(idx, moved_out.stride, last);
            double m = -HUGE_VAL; /* HUGE_VAL: a double infinity (INFINITY is a float) */
            for (int64_t j = 0; j < n; j++)
                if ((double)p[j * stride] > m) m = (double)p[j * stride];
            double sum = 0.0;
            for (int64_t j = 0; j < n; j++) sum += exp((double)p[j * stride] - m);
            for (int64_t j = 0; j < n; j++) p[j * stride] = (float)(exp((double)p[j * stride] - m) / sum);
        } while (last > 0 && next_outer(idx, moved_out.shape, last));
    }
    rp_tensor_release(&moved_out);
    return RP_OK;
}

/* How a [rows x cols] matrix with strides (rs, cs) can be handed to sgemm: untransposed with
 * ld = rs, or transposed with ld = cs. Returns 0 when neither works (a copy is needed). */
static int gemm_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, int *trans,
                       int64_t *ld)
{
    if (cs == 1 || cols == 1) {
        int64_t l = rows == 1 ? cols : rs;
        if (l >= cols && l >= 1) {
            *trans = 0;
            *ld = l;
            return 1;
        }
    }
    if (rs == 1 || rows == 1) {
        int64_t l = cols == 1 ? rows : cs;
        if (l >= rows && l >= 1) {
            *trans = 1;
            *ld = l;
            return 1;
        }
    }
    return 0;
}

/* A 2-D (at least) view of a 1-D operand: as a row (1 x K) or a column (K x 1). */
static void as_matrix(rp_tensor *m, const rp_tensor *t, int as_row)
{
    rp_tensor_view(m, t);
    if (t->ndim != 1) return;
    m->ndim = 2;
    if (as_row) {
        m->shape[0] = 1;
        m->stride[0] = t->shape[0] * t->stride[0];
        m->shape[1] = t->shape[0];
        m->stride[1] = t->stride[0];
    } else {
        m->shape[0] = t->shape[0];
        m->stride[0] = t->stride[0];
        m->shape[1] = 1;
        m->stride[1] = 1;
    }
}

rp_status rp_matmul(rp_tensor *out, const rp_tensor *a, const rp_tensor *b, int use_naive)
{
    memset(out, 0, sizeof *out);
    char b1[RP_SHAPE_STR_LEN], b2[RP_SHAPE_STR_LEN];
    if (a->ndim < 1 || b->ndim < 1)
        return rp_error(RP_ERR_SHAPE, "matmul needs tensors of at least 1 dim, got %s and %s",
                        rp_tensor_shape_str(b1, sizeof b1, a),
                        rp_tensor_shape_str(b2, sizeof b2, b));
    rp_tensor ma, mb;
    as_matrix(&ma, a, 1);
    as_matrix(&mb, b, 0);
    int64_t M = ma.shape[ma.ndim - 2], K = ma.shape[ma.ndim - 1];
    int64_t K2 = mb.shape[mb.ndim - 2], N = mb.shape[mb.ndim - 1];
    rp_status st = RP_OK;
    if (K != K2)
        st = rp_error(RP_ERR_SHAPE, "matmul: %s and %s do not fit (%lld columns vs %lld rows)",
                      rp_tensor_shape_str(b1, sizeof b1, a), rp_tensor_shape_str(b2, sizeof b2, b),
                      (long long)K, (long long)K2);
    else if (M > RP_I32_MAX || N > RP_I32_MAX || K > RP_I32_MAX)
        st = rp_error(RP_ERR_SHAPE, "matmul: a dim exceeds 2^31-1");
    /* batch dims: broadcast ma.shape[:-2] with mb.shape[:-2] */
    rp_tensor ba = ma, bb = mb;
    ba.ndim -= 2;
    bb.ndim -= 2;
    int bnd = 0;
    int64_t bshape[RP_MAX_DIMS + 1];
    if (st == RP_OK) {
        st = rp_broadcast_shape(&bnd, bshape, &ba, &bb);
        if (st != RP_OK)
            st = rp_error(RP_ERR_SHAPE, "matmul: batch dims of %s and %s do not broadcast",
                          rp_tensor_shape_str(b1, sizeof b1, a),
                          rp_tensor_shape_str(b2, sizeof b2, b));
    }
    if (st == RP_OK && bnd + 2 > RP_MAX_DIMS)
        st = rp_error(RP_ERR_SHAPE, "matmul: result would have more than %d dims", RP_MAX_DIMS);
    /* expanded operands [batch.., M, K] and [batch.., K, N] */
    rp_tensor ea = {0}, eb = {0};
    if (st == RP_OK) {
        int64_t sa[RP_MAX_DIMS], sb[RP_MAX_DIMS];
        memcpy(sa, bshape, sizeof(int64_t) * (size_t)bnd);
        memcpy(sb, bshape, sizeof(int64_t) * (size_t)bnd);
        sa[bnd] = M; sa[bnd + 1] = K;
        sb[bnd] = K; sb[bnd + 1] = N;
        st = rp_tensor_expand(&ea, &ma, bnd + 2, sa);
        if (st == RP_OK) st = rp_tensor_expand(&eb, &mb, bnd + 2, sb);
    }
    rp_tensor_release(&ma);
    rp_tensor_release(&mb);
    /* layouts, copying operands sgemm cannot take as they are */
    int ta = 0, tb = 0;
    int64_t lda = 1, ldb = 1;
    if (st == RP_OK && !gemm_layout(M, K, ea.stride[bnd], ea.stride[bnd + 1], &ta, &lda)) {
        rp_tensor c;
        st = rp_tensor_clone(&c, &ea);
        rp_tensor_release(&ea);
        ea = c;
        if (st == RP_OK) gemm_layout(M, K, ea.stride[bnd], ea.stride[bnd + 1], &ta, &lda);
    }
    if (st == RP_OK && !gemm_layout(K, N, eb.stride[bnd], eb.stride[bnd + 1], &tb, &ldb)) {
        rp_tensor c;
        st = rp_tensor_clone(&c, &eb);
        rp_tensor_release(&eb);
        eb = c;
        if (st == RP_OK) gemm_layout(K, N, eb.stride[bnd], eb.stride[bnd + 1], &tb, &ldb);
    }
    rp_tensor res = {0};
    if (st == RP_OK) {
        int64_t rs[RP_MAX_DIMS];
        memcpy(rs, bshape, sizeof(int64_t) * (size_t)bnd);
        rs[bnd] = M;
        rs[bnd + 1] = N;
        st = rp_tensor_new(&res, bnd + 2, rs);
    }
    if (st == RP_OK && M > 0 && N > 0) {
        int64_t nb = 1;
        for (int i = 0; i < bnd; i++) nb *= bshape[i];
        int64_t idx[RP_MAX_DIMS] = {0};
        const float *pa = rp_tensor_data(&ea), *pb = rp_tensor_data(&eb);
        float *pc = rp_tensor_data(&res);
        for (int64_t k = 0; k < nb; k++) {
            const float *A = pa + outer_offset(idx, ea.stride, bnd);
            const float *Bm = pb + outer_offset(idx, eb.stride, bnd);
            float *C = pc + k * M * N;
            if (use_naive)
                rp_sgemm_naive(ta, tb, M, N, K, 1.0f, A, lda, Bm, ldb, 0.0f, C, N);
            else
                rp_sgemm(ta, tb, M, N, K, 1.0f, A, lda, Bm, ldb, 0.0f, C, N);
            next_outer(idx, bshape, bnd);
        }
    }
    rp_tensor_release(&ea);
    rp_tensor_release(&eb);
    if (st != RP_OK) {
        rp_tensor_release(&res);
        return st;
    }
    /* drop the dims that 1-D operands added (numpy) */
    if (a->ndim == 1 || b->ndim == 1) {
        int64_t fs[RP_MAX_DIMS];
        int fn = 0;
        for (int i = 0; i < bnd; i++) fs[fn++] = bshape[i];
        if (a->ndim != 1) fs[fn++] = M;
        if (b->ndim != 1) fs[fn++] = N;
        st = rp_tensor_reshape(out, &res, fn, fs);
        rp_tensor_release(&res);
        return st;
    }
    *out = res;
    return RP_OK;
}
