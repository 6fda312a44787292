#include "tensor.h"

#include <stdio.h>
#include <string.h>

#include "checked.h"

/* For a shape check_shape accepted: every stride is at most the product of the sizes other than
 * 0, within RP_MAX_NUMEL, so none overflows. */
static void set_contiguous_strides(rp_tensor *t)
{
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        t->stride[i] = s;
        s *= t->shape[i] > 0 ? t->shape[i] : 1;
    }
}

const char *rp_shape_too_large(int ndim, const int64_t *shape)
{
    for (int i = 0; i < ndim; i++)
        if (shape[i] == 0)
            return "is too large (its sizes other than 0 multiply to more than 2^40)";
    return "has more than 2^40 elements";
}

/* Checks ndim/sizes (the rule of rp_shape_span) and returns the element count in *numel. */
static rp_status check_shape(int ndim, const int64_t *shape, int64_t *numel)
{
    if (ndim < 0 || ndim > RP_MAX_DIMS)
        return rp_error(RP_ERR_SHAPE, "a tensor has 0 to %d dims, got %d", RP_MAX_DIMS, ndim);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0)
            return rp_error(RP_ERR_SHAPE, "size %lld of dim %d is negative", (long long)shape[i],
                            i + 1);
    if (!rp_shape_span(ndim, shape, RP_MAX_NUMEL, numel)) {
        char buf[RP_SHAPE_STR_LEN];
        return rp_error(RP_ERR_SHAPE, "shape %s %s", rp_shape_str(buf, sizeof buf, ndim, shape),
                        rp_shape_too_large(ndim, shape));
    }
    return RP_OK;
}

static void clear(rp_tensor *t) { memset(t, 0, sizeof *t); }

rp_status rp_tensor_new(rp_tensor *out, int ndim, const int64_t *shape)
{
    clear(out);
    int64_t n;
    RP_TRY(check_shape(ndim, shape, &n));
    rp_storage *s = rp_storage_new((size_t)n);
    if (!s) return RP_ERR_NOMEM;
    out->storage = s;
    out->offset = 0;
    out->ndim = ndim;
    for (int i = 0; i < ndim; i++) out->shape[i] = shape[i];
    set_contiguous_strides(out);
    return RP_OK;
}

rp_status rp_tensor_new_like(rp_tensor *out, const rp_tensor *t)
{
    return rp_tensor_new(out, t->ndim, t->shape);
}

void rp_tensor_release(rp_tensor *t)
{
    if (!t) return;
    rp_storage_release(t->storage);
    clear(t);
}

int64_t rp_tensor_numel(const rp_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

int rp_tensor_is_contiguous(const rp_tensor *t)
{
    if (rp_tensor_numel(t) == 0) return 1; /* nothing to lay out */
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] == 1) continue;
        if (t->stride[i] != s) return 0;
        s *= t->shape[i];
    }
    return 1;
}

float *rp_tensor_data(const rp_tensor *t) { return t->storage->data + t->offset; }

char *rp_shape_str(char *buf, size_t len, int ndim, const int64_t *shape)
{
    size_t pos = 0;
    if (len == 0) return buf;
    buf[0] = '\0';
    pos += (size_t)snprintf(buf + pos, len - pos, "[");
    for (int i = 0; i < ndim && pos < len; i++)
        pos += (size_t)snprintf(buf + pos, len - pos, i ? " x %lld" : "%lld", (long long)shape[i]);
    if (pos < len) snprintf(buf + pos, len - pos, "]");
    return buf;
}

char *rp_tensor_shape_str(char *buf, size_t len, const rp_tensor *t)
{
    return rp_shape_str(buf, len, t->ndim, t->shape);
}

int rp_tensor_same_shape(const rp_tensor *a, const rp_tensor *b)
{
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return 1;
}

int64_t rp_tensor_index_offset(const rp_tensor *t, const int64_t *idx)
{
    int64_t off = 0;
    for (int i = 0; i < t->ndim; i++) off += idx[i] * t->stride[i];
    return off;
}

void rp_unravel(int ndim, const int64_t *shape, int64_t k, int64_t *idx)
{
    for (int d = ndim - 1; d >= 0; d--) {
        idx[d] = k % shape[d];
        k /= shape[d];
    }
}

char *rp_index_str(char *buf, size_t len, int ndim, const int64_t *idx)
{
    size_t pos = 0;
    if (len == 0) return buf;
    buf[0] = '\0';
    for (int d = 0; d < ndim && pos < len; d++)
        pos += (size_t)snprintf(buf + pos, len - pos, "[%lld]", (long long)idx[d] + 1);
    return buf;
}

void rp_tensor_view(rp_tensor *out, const rp_tensor *src)
{
    *out = *src;
    rp_storage_retain(out->storage);
}

static rp_status check_dim(const rp_tensor *t, int dim, const char *what)
{
    if (dim < 0 || dim >= t->ndim) {
        char buf[RP_SHAPE_STR_LEN];
        return rp_error(RP_ERR_RANGE, "%s: dim %d out of range for %s", what, dim + 1,
                        rp_tensor_shape_str(buf, sizeof buf, t));
    }
    return RP_OK;
}

rp_status rp_tensor_reshape(rp_tensor *out, const rp_tensor *src, int ndim, const int64_t *shape)
{
    clear(out);
    if (ndim < 0 || ndim > RP_MAX_DIMS)
        return rp_error(RP_ERR_SHAPE, "a tensor has 0 to %d dims, got %d", RP_MAX_DIMS, ndim);
    int64_t want[RP_MAX_DIMS];
    int infer = -1;
    for (int i = 0; i < ndim; i++) {
        want[i] = shape[i];
        if (shape[i] == -1) {
            if (infer >= 0) return rp_error(RP_ERR_SHAPE, "only one size may be -1");
            infer = i;
            want[i] = 1; /* counted as 1 until it is known */
        } else if (shape[i] < 0) {
            return rp_error(RP_ERR_SHAPE, "size %lld of dim %d is negative", (long long)shape[i],
                            i + 1);
        }
    }
    int64_t n = rp_tensor_numel(src), known;
    RP_TRY(check_shape(ndim, want, &known));
    char b1[RP_SHAPE_STR_LEN], b2[RP_SHAPE_STR_LEN];
    if (infer >= 0) {
        if (known == 0 || n % known != 0)
            return rp_error(RP_ERR_SHAPE, "cannot reshape %s into %s",
                            rp_tensor_shape_str(b1, sizeof b1, src),
                            rp_shape_str(b2, sizeof b2, ndim, shape));
        want[infer] = n / known; /* the shape now has n elements, n within the limit */
        known = n;
    }
    if (known != n)
        return rp_error(RP_ERR_SHAPE, "cannot reshape %s (%lld elements) into %s (%lld elements)",
                        rp_tensor_shape_str(b1, sizeof b1, src), (long long)n,
                        rp_shape_str(b2, sizeof b2, ndim, want), (long long)known);
    rp_tensor c;
    RP_TRY(rp_tensor_contiguous(&c, src));
    *out = c; /* takes over c's reference */
    out->ndim = ndim;
    for (int i = 0; i < ndim; i++) out->shape[i] = want[i];
    set_contiguous_strides(out);
    return RP_OK;
}

rp_status rp_tensor_transpose(rp_tensor *out, const rp_tensor *src, int d0, int d1)
{
    clear(out);
    RP_TRY(check_dim(src, d0, "transpose"));
    RP_TRY(check_dim(src, d1, "transpose"));
    rp_tensor_view(out, src);
    int64_t s = out->shape[d0], st = out->stride[d0];
    out->shape[d0] = out->shape[d1];
    out->stride[d0] = out->stride[d1];
    out->shape[d1] = s;
    out->stride[d1] = st;
    return RP_OK;
}

rp_status rp_tensor_permute(rp_tensor *out, const rp_tensor *src, const int *perm)
{
    clear(out);
    int seen[RP_MAX_DIMS] = {0};
    for (int i = 0; i < src->ndim; i++) {
        if (perm[i] < 0 || perm[i] >= src->ndim || seen[perm[i]])
            return rp_error(RP_ERR_ARG, "permute: dims must be a permutation of 1..%d",
                            src->ndim);
        seen[perm[i]] = 1;
    }
    rp_tensor_view(out, src);
    for (int i = 0; i < src->ndim; i++) {
        out->shape[i] = src->shape[perm[i]];
        out->stride[i] = src->stride[perm[i]];
    }
    return RP_OK;
}

rp_status rp_tensor_narrow(rp_tensor *out, const rp_tensor *src, int dim, int64_t start,
                           int64_t len)
{
    clear(out);
    RP_TRY(check_dim(src, dim, "narrow"));
    if (start < 0 || len < 0 || start > src->shape[dim] || len > src->shape[dim] - start) {
        char buf[RP_SHAPE_STR_LEN];
        return rp_error(RP_ERR_RANGE, "narrow: elements %lld..%lld out of range for dim %d of %s",
                        (long long)start + 1, (long long)(start + len), dim + 1,
                        rp_tensor_shape_str(buf, sizeof buf, src));
    }
    rp_tensor_view(out, src);
    out->shape[dim] = len;
    if (len > 0) out->offset += start * src->stride[dim];
    return RP_OK;
}

rp_status rp_tensor_select(rp_tensor *out, const rp_tensor *src, int dim, int64_t index)
{
    clear(out);
    RP_TRY(check_dim(src, dim, "select"));
    if (index < 0 || index >= src->shape[dim]) {
        char buf[RP_SHAPE_STR_LEN];
        return rp_error(RP_ERR_RANGE, "select: index %lld out of range for dim %d of %s",
                        (long long)index + 1, dim + 1, rp_tensor_shape_str(buf, sizeof buf, src));
    }
    rp_tensor_view(out, src);
    out->offset += index * src->stride[dim];
    for (int i = dim; i + 1 < src->ndim; i++) {
        out->shape[i] = src->shape[i + 1];
        out->stride[i] = src->stride[i + 1];
    }
    out->ndim = src->ndim - 1;
    return RP_OK;
}

rp_status rp_tensor_diagonal(rp_tensor *out, const rp_tensor *src, int64_t k)
{
    clear(out);
    if (src->ndim != 2) {
        char buf[RP_SHAPE_STR_LEN];
        return rp_error(RP_ERR_SHAPE, "diagonal: expected a 2-D tensor, got %s",
                        rp_tensor_shape_str(buf, sizeof buf, src));
    }
    int64_t rows = src->shape[0], cols = src->shape[1];
    /* the first element (r0, c0) and how many fit from there (-k only where k > -rows) */
    int64_t r0 = 0, c0 = 0, len = 0;
    if (k >= 0 && k < cols) c0 = k;
    else if (k < 0 && k > -rows) r0 = -k;
    else rows = 0; /* past the corner: empty */
    if (rows > 0) len = rows - r0 < cols - c0 ? rows - r0 : cols - c0;
    rp_tensor_view(out, src);
    if (len > 0) out->offset += r0 * src->stride[0] + c0 * src->stride[1];
    out->ndim = 1;
    out->shape[0] = len;
    out->stride[0] = src->stride[0] + src->stride[1];
    return RP_OK;
}

rp_status rp_tensor_expand(rp_tensor *out, const rp_tensor *src, int ndim, const int64_t *shape)
{
    clear(out);
    char b1[RP_SHAPE_STR_LEN], b2[RP_SHAPE_STR_LEN];
    int64_t n;
    RP_TRY(check_shape(ndim, shape, &n));
    if (ndim < src->ndim)
        return rp_error(RP_ERR_SHAPE, "cannot broadcast %s to %s",
                        rp_tensor_shape_str(b1, sizeof b1, src),
                        rp_shape_str(b2, sizeof b2, ndim, shape));
    rp_tensor v;
    rp_tensor_view(&v, src);
    int lead = ndim - src->ndim;
    for (int i = ndim - 1; i >= 0; i--) {
        int j = i - lead;
        if (j >= 0 && src->shape[j] == shape[i]) {
            v.shape[i] = shape[i];
            v.stride[i] = src->stride[j];
        } else if (j < 0 || src->shape[j] == 1) {
            v.shape[i] = shape[i];
            v.stride[i] = 0;
        } else {
            rp_tensor_release(&v);
            return rp_error(RP_ERR_SHAPE, "cannot broadcast %s to %s",
                            rp_tensor_shape_str(b1, sizeof b1, src),
                            rp_shape_str(b2, sizeof b2, ndim, shape));
        }
    }
    v.ndim = ndim;
    *out = v;
    return RP_OK;
}

void rp_tensor_foreach_run(const rp_tensor *t, rp_run_fn fn, void *ctx)
{
    int64_t n = rp_tensor_numel(t);
    if (n == 0) return;
    float *base = rp_tensor_data(t);
    if (t->ndim == 0) {
        fn(base, 1, 1, ctx);
        return;
    }
    int last = t->ndim - 1;
    int64_t run = t->shape[last], rstride = t->stride[last];
    if (rp_tensor_is_contiguous(t)) {
        fn(base, n, 1, ctx);
        return;
    }
    int64_t idx[RP_MAX_DIMS] = {0};
    for (;;) {
        int64_t off = 0;
        for (int i = 0; i < last; i++) off += idx[i] * t->stride[i];
        fn(base + off, run, rstride, ctx);
        int i = last - 1;
        while (i >= 0) {
            if (++idx[i] < t->shape[i]) break;
            idx[i] = 0;
            i--;
        }
        if (i < 0) return;
    }
}

rp_status rp_tensor_contiguous(rp_tensor *out, const rp_tensor *src)
{
    clear(out);
    if (rp_tensor_is_contiguous(src)) {
        rp_tensor_view(out, src);
        return RP_OK;
    }
    return rp_tensor_clone(out, src);
}

rp_status rp_tensor_clone(rp_tensor *out, const rp_tensor *src)
{
    RP_TRY(rp_tensor_new(out, src->ndim, src->shape));
    rp_status st = rp_tensor_copy(out, src);
    if (st != RP_OK) rp_tensor_release(out);
    return st;
}

static int overlaps(const rp_tensor *a, const rp_tensor *b)
{
    return a->storage == b->storage;
}

rp_status rp_tensor_copy(rp_tensor *dst, const rp_tensor *src)
{
    rp_tensor e;
    RP_TRY(rp_tensor_expand(&e, src, dst->ndim, dst->shape));
    if (overlaps(dst, src)) {
        rp_tensor tmp;
        rp_status st = rp_tensor_clone(&tmp, &e);
        rp_tensor_release(&e);
        if (st != RP_OK) return st;
        e = tmp;
    }
    if (rp_tensor_numel(dst) == 0) {
        rp_tensor_release(&e);
        return RP_OK;
    }
    if (dst->ndim == 0) {
        rp_tensor_data(dst)[0] = rp_tensor_data(&e)[0];
        rp_tensor_release(&e);
        return RP_OK;
    }
    /* Walk dst and e (same shape) together, one innermost run at a time. */
    int last = dst->ndim - 1;
    int64_t idx[RP_MAX_DIMS] = {0};
    float *db = rp_tensor_data(dst);
    const float *sb = rp_tensor_data(&e);
    int64_t n = dst->shape[last], ds = dst->stride[last], ss = e.stride[last];
    for (;;) {
        int64_t doff = 0, soff = 0;
        for (int i = 0; i < last; i++) {
            doff += idx[i] * dst->stride[i];
            soff += idx[i] * e.stride[i];
        }
        for (int64_t j = 0; j < n; j++) db[doff + j * ds] = sb[soff + j * ss];
        int i = last - 1;
        while (i >= 0) {
            if (++idx[i] < dst->shape[i]) break;
            idx[i] = 0;
            i--;
        }
        if (i < 0) break;
    }
    rp_tensor_release(&e);
    return RP_OK;
}

static void fill_run(float *p, int64_t n, int64_t stride, void *ctx)
{
    float v = *(const float *)ctx;
    for (int64_t j = 0; j < n; j++) p[j * stride] = v;
}

void rp_tensor_fill(rp_tensor *t, float value)
{
    rp_tensor_foreach_run(t, fill_run, &value);
}
