/* Tensors (core/tensor/tensor.h) and tensor ops (core/tensor/ops.h) against naive loops written here. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "rp.h"

#define S(...) CHECK_SHAPE(__VA_ARGS__)

static uint64_t rng_state = 12345;


static int shape_is(const rp_tensor *t, int ndim, const int64_t *shape)
{
    if (t->ndim != ndim) return 0;
    for (int d = 0; d < ndim; d++)
        if (t->shape[d] != shape[d]) return 0;
    return 1;
}

/* A contiguous tensor holding 0, 1, 2, ... in row-major order. */
static rp_tensor iota(int ndim, const int64_t *shape)
{
    rp_tensor t = check_new(ndim, shape);
    float *p = rp_tensor_data(&t);
    for (int64_t i = 0; i < rp_tensor_numel(&t); i++) p[i] = (float)i;
    return t;
}

static rp_tensor randt(int ndim, const int64_t *shape, double lo, double hi)
{
    rp_tensor t = check_new(ndim, shape);
    check_fill_rand(&t, &rng_state, lo, hi);
    return t;
}

/* ---------------------------------------------------------------- storage, creation */

static void test_storage(void)
{
    rp_storage *s = rp_storage_new(0);
    CHECK(s && s->data && s->n == 0 && s->refcount == 1, "rp_storage_new(0)");
    rp_storage_release(s);
    rp_storage_release(NULL);

    s = rp_storage_new(100);
    CHECK(s && ((uintptr_t)s->data % 64) == 0, "storage data 64-byte aligned");
    int zero = 1;
    for (int i = 0; i < 100; i++) zero &= s->data[i] == 0.0f;
    CHECK(zero, "storage zero-filled");
    rp_storage_retain(s);
    CHECK(s->refcount == 2, "refcount after retain: %ld", s->refcount);
    rp_storage_release(s);
    CHECK(s->refcount == 1, "refcount after release: %ld", s->refcount);
    rp_storage_release(s);

    /* the count of held memory: whole 64-byte lines (at least one) while a storage or a buffer
     * lives, the peak never below it */
    int64_t h0 = rp_mem_held();
    rp_storage *s0 = rp_storage_new(0), *s100 = rp_storage_new(100);
    CHECK(rp_mem_held() - h0 == 64 + 448, "held %lld after storages of 0 and 100 floats, want 512",
          (long long)(rp_mem_held() - h0));
    rp_storage_retain(s100);
    rp_storage_release(s100);
    CHECK(rp_mem_held() - h0 == 512, "a released reference frees nothing (held %lld)",
          (long long)(rp_mem_held() - h0));
    float *b17 = rp_buffer_new(17), *b0 = rp_buffer_new(0);
    CHECK(b17 && b0 && (uintptr_t)b17 % 64 == 0, "buffers of 17 and 0 floats, 64-byte aligned");
    CHECK(rp_mem_held() - h0 == 512 + 128 + 64, "held %lld with the buffers, want 704",
          (long long)(rp_mem_held() - h0));
    CHECK(rp_mem_peak() >= rp_mem_held(), "peak %lld >= held %lld", (long long)rp_mem_peak(),
          (long long)rp_mem_held());
    int64_t peak = rp_mem_peak();
    rp_buffer_free(b17, 17);
    rp_buffer_free(b0, 0);
    rp_buffer_free(NULL, 5);
    rp_storage_release(s100);
    rp_storage_release(s0);
    CHECK(rp_mem_held() == h0, "held %lld after freeing everything, want %lld",
          (long long)rp_mem_held(), (long long)h0);
    CHECK(rp_mem_peak() == peak, "the peak stays (%lld, want %lld)", (long long)rp_mem_peak(),
          (long long)peak);
    CHECK(rp_buffer_new(-1) == NULL && rp_buffer_new((int64_t)1 << 41) == NULL,
          "a buffer of -1 or 2^41 floats is refused");

    /* A view keeps the storage alive after the original is released (ASan reports a UAF
     * otherwise). */
    rp_tensor t = iota(2, S(4, 5));
    CHECK(t.storage->refcount == 1, "new tensor refcount %ld", t.storage->refcount);
    rp_tensor v, w;
    rp_tensor_view(&v, &t);
    CHECK(v.storage == t.storage && t.storage->refcount == 2, "view shares and retains (%ld)",
          t.storage->refcount);
    CHECK_STATUS(rp_tensor_transpose(&w, &t, 0, 1), RP_OK, NULL);
    CHECK(t.storage->refcount == 3, "transpose retains: refcount %ld", t.storage->refcount);
    rp_tensor_release(&t);
    CHECK(t.storage == NULL, "release empties the tensor");
    rp_tensor_release(&t); /* twice is safe */
    CHECK(v.storage->refcount == 2, "after releasing the original: refcount %ld",
          v.storage->refcount);
    int ok = 1;
    for (int64_t i = 0; i < 4; i++)
        for (int64_t j = 0; j < 5; j++) ok &= *check_at(&w, S(j, i)) == (float)(i * 5 + j);
    CHECK(ok, "transposed view readable after the original was released");
    rp_tensor_release(&v);
    CHECK(w.storage->refcount == 1, "refcount %ld", w.storage->refcount);
    rp_tensor_release(&w);
}

static void test_new(void)
{
    rp_tensor t;
    CHECK_STATUS(rp_tensor_new(&t, 3, S(2, 3, 4)), RP_OK, NULL);
    CHECK(shape_is(&t, 3, S(2, 3, 4)), "shape");
    CHECK(t.stride[0] == 12 && t.stride[1] == 4 && t.stride[2] == 1 && t.offset == 0,
          "strides %lld %lld %lld offset %lld", (long long)t.stride[0], (long long)t.stride[1],
          (long long)t.stride[2], (long long)t.offset);
    CHECK(rp_tensor_numel(&t) == 24 && rp_tensor_is_contiguous(&t), "numel/contiguous");
    CHECK(t.storage->n >= 24, "storage size %zu", t.storage->n);
    CHECK(rp_tensor_data(&t) == t.storage->data + t.offset, "rp_tensor_data");
    int zero = 1;
    for (int i = 0; i < 24; i++) zero &= rp_tensor_data(&t)[i] == 0.0f;
    CHECK(zero, "rp_tensor_new zero-fills");

    rp_tensor tt, like;
    CHECK_STATUS(rp_tensor_transpose(&tt, &t, 0, 2), RP_OK, NULL);
    rp_tensor_fill(&tt, 3.0f);
    CHECK_STATUS(rp_tensor_new_like(&like, &tt), RP_OK, NULL);
    CHECK(shape_is(&like, 3, S(4, 3, 2)) && rp_tensor_is_contiguous(&like) &&
              like.storage != t.storage && rp_tensor_data(&like)[5] == 0.0f,
          "new_like: shape of the view, contiguous, fresh, zero");
    rp_tensor_release(&like);
    rp_tensor_release(&tt);
    rp_tensor_release(&t);

    CHECK_STATUS(rp_tensor_new(&t, 0, NULL), RP_OK, NULL);
    CHECK(t.ndim == 0 && rp_tensor_numel(&t) == 1 && rp_tensor_data(&t)[0] == 0.0f, "scalar");
    rp_tensor_release(&t);

    CHECK_STATUS(rp_tensor_new(&t, 2, S(0, 3)), RP_OK, NULL);
    CHECK(rp_tensor_numel(&t) == 0 && t.storage != NULL, "empty tensor [0 x 3]");
    rp_tensor_release(&t);

    check_poison(&t);
    rp_status st = rp_tensor_new(&t, 2, S(-1, 3));
    CHECK(st != RP_OK && t.storage == NULL, "negative size rejected (status %d)", (int)st);
    check_poison(&t);
    st = rp_tensor_new(&t, RP_MAX_DIMS + 1, S(1, 1, 1, 1, 1, 1, 1, 1, 1));
    CHECK(st != RP_OK && t.storage == NULL, "ndim > RP_MAX_DIMS rejected (status %d)", (int)st);
    check_poison(&t);
    st = rp_tensor_new(&t, 2, S((int64_t)1 << 30, (int64_t)1 << 30));
    CHECK(st != RP_OK && t.storage == NULL, "more than RP_MAX_NUMEL elements rejected (%d)",
          (int)st);
    /* an empty shape is held to the limit of its sizes other than 0: its strides are their
     * product ([0 x 2^32 x 2^32] once got a stride of 2^64) */
    CHECK_STATUS(rp_tensor_new(&t, 3, S(0, (int64_t)1 << 32, (int64_t)1 << 32)), RP_ERR_SHAPE,
                 "shape [0 x 4294967296 x 4294967296] is too large (its sizes other than 0 "
                 "multiply to more than 2^40)");
    CHECK(t.storage == NULL, "empty shape over the limit leaves t empty");
    CHECK_STATUS(rp_tensor_new(&t, 3, S(INT64_MAX, 0, INT64_MAX)), RP_ERR_SHAPE, "is too large");
    CHECK_STATUS(rp_tensor_new(&t, 2, S(RP_MAX_NUMEL, 0)), RP_OK, NULL);
    CHECK(t.stride[0] == 1 && t.stride[1] == 1 && rp_tensor_numel(&t) == 0,
          "[2^40 x 0]: strides %lld %lld", (long long)t.stride[0], (long long)t.stride[1]);
    rp_tensor e;
    CHECK_STATUS(rp_tensor_reshape(&e, &t, 3, S(0, RP_MAX_NUMEL, RP_MAX_NUMEL)), RP_ERR_SHAPE,
                 "shape [0 x 1099511627776 x 1099511627776] is too large");
    CHECK_STATUS(rp_tensor_reshape(&e, &t, 3, S(0, -1, RP_MAX_NUMEL)), RP_ERR_SHAPE,
                 "cannot reshape [1099511627776 x 0] into [0 x -1 x 1099511627776]");
    CHECK_STATUS(rp_tensor_reshape(&e, &t, 3, S(RP_MAX_NUMEL, 0, 1)), RP_OK, NULL);
    CHECK(e.ndim == 3 && e.stride[0] == 1 && e.stride[1] == 1, "reshape to [2^40 x 0 x 1]");
    rp_tensor_release(&e);
    CHECK_STATUS(rp_tensor_expand(&e, &t, 3, S(RP_MAX_NUMEL, RP_MAX_NUMEL, 0)), RP_ERR_SHAPE,
                 "is too large");
    rp_tensor_release(&t);
}

static void test_shape_str(void)
{
    char buf[RP_SHAPE_STR_LEN];
    CHECK(strcmp(rp_shape_str(buf, sizeof buf, 3, S(2, 3, 4)), "[2 x 3 x 4]") == 0, "got '%s'",
          buf);
    CHECK(strcmp(rp_shape_str(buf, sizeof buf, 0, NULL), "[]") == 0, "scalar: got '%s'", buf);
    CHECK(strcmp(rp_shape_str(buf, sizeof buf, 1, S(7)), "[7]") == 0, "got '%s'", buf);
    int64_t big[RP_MAX_DIMS];
    for (int d = 0; d < RP_MAX_DIMS; d++) big[d] = INT64_MAX;
    rp_shape_str(buf, sizeof buf, RP_MAX_DIMS, big);
    CHECK(strlen(buf) < RP_SHAPE_STR_LEN && buf[0] == '[' && buf[strlen(buf) - 1] == ']' &&
              strstr(buf, "9223372036854775807 x 9223372036854775807"),
          "8 dims of INT64_MAX fit: '%s'", buf);
    char small[6];
    memset(small, 'z', sizeof small);
    rp_shape_str(small, sizeof small, 3, S(2, 3, 4));
    CHECK(memchr(small, '\0', sizeof small) != NULL, "truncated output is terminated");

    rp_tensor t = check_new(2, S(5, 6)), u;
    CHECK(strcmp(rp_tensor_shape_str(buf, sizeof buf, &t), "[5 x 6]") == 0, "got '%s'", buf);
    CHECK_STATUS(rp_tensor_transpose(&u, &t, 0, 1), RP_OK, NULL);
    CHECK(!rp_tensor_same_shape(&t, &u), "[5 x 6] vs [6 x 5]");
    rp_tensor v = check_new(2, S(6, 5));
    CHECK(rp_tensor_same_shape(&u, &v), "same shape, different strides");
    rp_tensor w = check_new(3, S(6, 5, 1));
    CHECK(!rp_tensor_same_shape(&v, &w), "different ndim");
    int64_t idx[2] = {4, 3};
    CHECK(rp_tensor_index_offset(&u, idx) == 4 * u.stride[0] + 3 * u.stride[1] &&
              rp_tensor_index_offset(&u, idx) == 3 * 6 + 4,
          "index_offset %lld", (long long)rp_tensor_index_offset(&u, idx));
    rp_tensor_release(&t);
    rp_tensor_release(&u);
    rp_tensor_release(&v);
    rp_tensor_release(&w);
}

/* ---------------------------------------------------------------- views */

static void test_reshape(void)
{
    char buf[RP_SHAPE_STR_LEN];
    rp_tensor t = iota(3, S(2, 3, 4)), r;
    CHECK_STATUS(rp_tensor_reshape(&r, &t, 2, S(6, 4)), RP_OK, NULL);
    CHECK(shape_is(&r, 2, S(6, 4)) && r.storage == t.storage && t.storage->refcount == 2 &&
              rp_tensor_data(&r) == rp_tensor_data(&t) && rp_tensor_is_contiguous(&r),
          "contiguous reshape is a view: %s", rp_tensor_shape_str(buf, sizeof buf, &r));
    CHECK(*check_at(&r, S(5, 3)) == 23.0f, "value");
    rp_tensor_release(&r);

    CHECK_STATUS(rp_tensor_reshape(&r, &t, 2, S(4, -1)), RP_OK, NULL);
    CHECK(shape_is(&r, 2, S(4, 6)), "-1 inferred: %s", rp_tensor_shape_str(buf, sizeof buf, &r));
    rp_tensor_release(&r);
    CHECK_STATUS(rp_tensor_reshape(&r, &t, 4, S(-1, 2, 1, 3)), RP_OK, NULL);
    CHECK(shape_is(&r, 4, S(4, 2, 1, 3)), "-1 inferred first: %s",
          rp_tensor_shape_str(buf, sizeof buf, &r));
    rp_tensor_release(&r);
    CHECK_STATUS(rp_tensor_reshape(&r, &t, 1, S(-1)), RP_OK, NULL);
    CHECK(shape_is(&r, 1, S(24)), "flatten");
    rp_tensor_release(&r);

    check_poison(&r);
    CHECK_STATUS(rp_tensor_reshape(&r, &t, 2, S(5, 5)), RP_ERR_SHAPE, "[2 x 3 x 4]");
    CHECK(strstr(rp_last_error(), "[5 x 5]") != NULL, "message names the target shape: \"%s\"",
          rp_last_error());
    CHECK(r.storage == NULL, "out empty on failure");
    CHECK_STATUS(rp_tensor_reshape(&r, &t, 2, S(5, -1)), RP_ERR_SHAPE, NULL);
    check_poison(&r);
    rp_status st = rp_tensor_reshape(&r, &t, 3, S(-1, -1, 6));
    CHECK(st != RP_OK && r.storage == NULL, "two -1 rejected (status %d)", (int)st);
    CHECK(t.storage->refcount == 1, "failed reshapes leak no reference (%ld)",
          t.storage->refcount);

    /* A contiguous narrow (offset != 0) reshapes as a view. */
    rp_tensor n;
    CHECK_STATUS(rp_tensor_narrow(&n, &t, 0, 1, 1), RP_OK, NULL);
    CHECK_STATUS(rp_tensor_reshape(&r, &n, 2, S(3, 4)), RP_OK, NULL);
    CHECK(r.storage == t.storage && *check_at(&r, S(0, 0)) == 12.0f &&
              *check_at(&r, S(2, 3)) == 23.0f,
          "reshape of an offset view");
    rp_tensor_release(&r);
    rp_tensor_release(&n);

    /* Non-contiguous: a copy, in row-major order of the view. */
    rp_tensor tt;
    CHECK_STATUS(rp_tensor_transpose(&tt, &t, 1, 2), RP_OK, NULL); /* [2,4,3] */
    CHECK_STATUS(rp_tensor_reshape(&r, &tt, 2, S(8, 3)), RP_OK, NULL);
    CHECK(r.storage != t.storage && rp_tensor_is_contiguous(&r), "non-contiguous reshape copies");
    float want[24], got[24];
    check_gather(want, &tt);
    check_gather(got, &r);
    CHECK_CLOSE(got, want, 24, 0.0, "reshape of a transposed tensor");
    rp_tensor_release(&r);
    rp_tensor_release(&tt);
    rp_tensor_release(&t);
}

static void test_transpose_permute(void)
{
    rp_tensor t = iota(3, S(2, 3, 4)), r;
    CHECK_STATUS(rp_tensor_transpose(&r, &t, 0, 2), RP_OK, NULL);
    CHECK(shape_is(&r, 3, S(4, 3, 2)) && r.stride[0] == 1 && r.stride[1] == 4 &&
              r.stride[2] == 12 && !rp_tensor_is_contiguous(&r),
          "transpose shape/strides");
    int ok = 1;
    int64_t idx[3] = {0};
    do ok &= *check_at(&r, idx) == (float)(idx[2] * 12 + idx[1] * 4 + idx[0]);
    while (check_next_index(3, r.shape, idx));
    CHECK(ok, "transpose values");
    rp_tensor_release(&r);
    CHECK_STATUS(rp_tensor_transpose(&r, &t, 1, 1), RP_OK, NULL);
    CHECK(shape_is(&r, 3, S(2, 3, 4)) && rp_tensor_is_contiguous(&r), "transpose(d, d)");
    rp_tensor_release(&r);
    check_poison(&r);
    rp_status st = rp_tensor_transpose(&r, &t, 0, 3);
    CHECK(st != RP_OK && r.storage == NULL, "transpose dim 3 of 3-D rejected (%d)", (int)st);
    check_poison(&r);
    st = rp_tensor_transpose(&r, &t, -1, 0);
    CHECK(st != RP_OK && r.storage == NULL, "transpose dim -1 rejected (%d)", (int)st);

    CHECK_STATUS(rp_tensor_permute(&r, &t, (const int[]){2, 0, 1}), RP_OK, NULL);
    CHECK(shape_is(&r, 3, S(4, 2, 3)), "permute shape");
    ok = 1;
    memset(idx, 0, sizeof idx);
    do ok &= *check_at(&r, idx) == (float)(idx[1] * 12 + idx[2] * 4 + idx[0]);
    while (check_next_index(3, r.shape, idx));
    CHECK(ok, "permute values: out[i][j][k] = src[j][k][i]");
    rp_tensor_release(&r);
    const int bad[4][3] = {{0, 0, 1}, {0, 1, 3}, {-1, 0, 1}, {2, 2, 2}};
    for (int b = 0; b < 4; b++) {
        check_poison(&r);
        st = rp_tensor_permute(&r, &t, bad[b]);
        CHECK(st != RP_OK && r.storage == NULL, "bad perm {%d,%d,%d} rejected (%d)", bad[b][0],
              bad[b][1], bad[b][2], (int)st);
    }
    CHECK(t.storage->refcount == 1, "no leaked references (%ld)", t.storage->refcount);
    rp_tensor_release(&t);
}

static void test_narrow_select_expand(void)
{
    rp_tensor t = iota(3, S(2, 3, 4)), r;
    CHECK_STATUS(rp_tensor_narrow(&r, &t, 1, 1, 2), RP_OK, NULL);
    CHECK(shape_is(&r, 3, S(2, 2, 4)) && r.storage == t.storage, "narrow shape");
    int ok = 1;
    int64_t idx[3] = {0};
    do ok &= *check_at(&r, idx) == (float)(idx[0] * 12 + (idx[1] + 1) * 4 + idx[2]);
    while (check_next_index(3, r.shape, idx));
    CHECK(ok, "narrow values");
    rp_tensor_release(&r);
    CHECK_STATUS(rp_tensor_narrow(&r, &t, 2, 4, 0), RP_OK, NULL);
    CHECK(shape_is(&r, 3, S(2, 3, 0)) && rp_tensor_numel(&r) == 0, "empty narrow at the end");
    rp_tensor_release(&r);
    check_poison(&r);
    CHECK_STATUS(rp_tensor_narrow(&r, &t, 2, 3, 2), RP_ERR_RANGE, NULL);
    CHECK(r.storage == NULL, "out empty on failure");
    CHECK_STATUS(rp_tensor_narrow(&r, &t, 2, -1, 2), RP_ERR_RANGE, NULL);
    CHECK_STATUS(rp_tensor_narrow(&r, &t, 2, 0, -1), RP_ERR_RANGE, NULL);
    CHECK_STATUS(rp_tensor_narrow(&r, &t, 0, 0, 3), RP_ERR_RANGE, NULL);
    check_poison(&r);
    rp_status st = rp_tensor_narrow(&r, &t, 3, 0, 1);
    CHECK(st != RP_OK && r.storage == NULL, "narrow of dim 3 of a 3-D tensor rejected (%d)",
          (int)st);

    CHECK_STATUS(rp_tensor_select(&r, &t, 2, 3), RP_OK, NULL);
    CHECK(shape_is(&r, 2, S(2, 3)), "select removes the dim");
    ok = 1;
    memset(idx, 0, sizeof idx);
    do ok &= *check_at(&r, idx) == (float)(idx[0] * 12 + idx[1] * 4 + 3);
    while (check_next_index(2, r.shape, idx));
    CHECK(ok, "select values");
    rp_tensor s1;
    CHECK_STATUS(rp_tensor_select(&s1, &r, 0, 1), RP_OK, NULL);
    rp_tensor s0;
    CHECK_STATUS(rp_tensor_select(&s0, &s1, 0, 2), RP_OK, NULL);
    CHECK(s0.ndim == 0 && rp_tensor_numel(&s0) == 1 && rp_tensor_data(&s0)[0] == 23.0f,
          "select down to a scalar: %g", (double)rp_tensor_data(&s0)[0]);
    rp_tensor_release(&s0);
    rp_tensor_release(&s1);
    rp_tensor_release(&r);
    check_poison(&r);
    CHECK_STATUS(rp_tensor_select(&r, &t, 2, 4), RP_ERR_RANGE, NULL);
    CHECK(r.storage == NULL, "out empty on failure");
    CHECK_STATUS(rp_tensor_select(&r, &t, 0, -1), RP_ERR_RANGE, NULL);
    check_poison(&r);
    st = rp_tensor_select(&r, &t, 3, 0);
    CHECK(st != RP_OK && r.storage == NULL, "select of dim 3 rejected (%d)", (int)st);

    /* expand: [3,1] -> [2,3,4] */
    rp_tensor c = iota(2, S(3, 1));
    CHECK_STATUS(rp_tensor_expand(&r, &c, 3, S(2, 3, 4)), RP_OK, NULL);
    CHECK(shape_is(&r, 3, S(2, 3, 4)) && r.stride[0] == 0 && r.stride[2] == 0 &&
              r.storage == c.storage,
          "expand shape and stride-0 dims (strides %lld %lld %lld)", (long long)r.stride[0],
          (long long)r.stride[1], (long long)r.stride[2]);
    ok = 1;
    memset(idx, 0, sizeof idx);
    do ok &= *check_at(&r, idx) == (float)idx[1];
    while (check_next_index(3, r.shape, idx));
    CHECK(ok && !rp_tensor_is_contiguous(&r), "expand values");
    rp_tensor_release(&r);
    CHECK_STATUS(rp_tensor_expand(&r, &c, 2, S(3, 1)), RP_OK, NULL);
    CHECK(shape_is(&r, 2, S(3, 1)), "expand to the same shape");
    rp_tensor_release(&r);
    check_poison(&r);
    CHECK_STATUS(rp_tensor_expand(&r, &c, 2, S(4, 5)), RP_ERR_SHAPE, NULL);
    CHECK(r.storage == NULL, "out empty on failure");
    check_poison(&r);
    st = rp_tensor_expand(&r, &c, 1, S(3));
    CHECK(st != RP_OK && r.storage == NULL, "expand to fewer dims rejected (%d)", (int)st);
    rp_tensor_release(&c);
    rp_tensor_release(&t);
}

/* Diagonals of a 3 x 5 matrix and of its transpose (a strided view) at every offset k, element by
 * element against (i, i + k) read from the matrix itself; empty past the corners; 2-D only. */
static void test_diagonal(void)
{
    rp_tensor m = iota(2, S(3, 5)), mt, d;
    CHECK_STATUS(rp_tensor_transpose(&mt, &m, 0, 1), RP_OK, NULL);
    const rp_tensor *mats[2] = {&m, &mt};
    for (int w = 0; w < 2; w++) {
        const rp_tensor *a = mats[w];
        int64_t rows = a->shape[0], cols = a->shape[1];
        for (int64_t k = -6; k <= 6; k++) {
            CHECK_STATUS(rp_tensor_diagonal(&d, a, k), RP_OK, NULL);
            int64_t want = 0; /* count the (i, i + k) inside the matrix */
            for (int64_t i = 0; i < rows; i++)
                if (i + k >= 0 && i + k < cols) want++;
            CHECK(d.ndim == 1 && d.shape[0] == want && d.storage == m.storage,
                  "diagonal %lld of %s: %lld elements, want %lld", (long long)k,
                  w ? "the transpose" : "[3 x 5]", (long long)d.shape[0], (long long)want);
            int ok = 1;
            for (int64_t i = 0, j = 0; i < rows && d.ndim == 1; i++) {
                if (i + k < 0 || i + k >= cols) continue;
                int64_t at[2] = {i, i + k}, one[1] = {j++};
                ok &= *check_at(&d, one) == *check_at(a, at);
            }
            CHECK(ok, "diagonal %lld of %s: the values (i, i + k)", (long long)k,
                  w ? "the transpose" : "[3 x 5]");
            rp_tensor_release(&d);
        }
    }
    check_poison(&d);
    rp_tensor v = iota(1, S(4));
    CHECK_STATUS(rp_tensor_diagonal(&d, &v, 0), RP_ERR_SHAPE, "expected a 2-D tensor, got [4]");
    CHECK(d.storage == NULL, "out empty on failure");
    rp_tensor_release(&v);
    rp_tensor_release(&mt);
    rp_tensor_release(&m);
}

/* rp_dot against a sum of products in long double, on contiguous and strided 1-D views; shapes
 * that are not two 1-D tensors of one length are refused. */
static void test_dot(void)
{
    rp_tensor m = randt(2, S(7, 3), -2, 2), a, b, c, e;
    CHECK_STATUS(rp_tensor_select(&a, &m, 1, 0), RP_OK, NULL); /* stride 3 */
    rp_tensor v = randt(1, S(7), -2, 2);
    double got = -1;
    CHECK_STATUS(rp_dot(&got, &a, &v), RP_OK, NULL);
    long double want = 0;
    for (int64_t i = 0; i < 7; i++) {
        int64_t at[2] = {i, 0}, one[1] = {i};
        want += (long double)*check_at(&m, at) * (long double)*check_at(&v, one);
    }
    CHECK(fabs(got - (double)want) <= 1e-12, "dot of a strided column and a vector: %.17g vs %.17g",
          got, (double)want);
    CHECK_STATUS(rp_tensor_narrow(&b, &v, 0, 2, 0), RP_OK, NULL);
    CHECK_STATUS(rp_tensor_narrow(&c, &a, 0, 5, 0), RP_OK, NULL);
    CHECK_STATUS(rp_dot(&got, &b, &c), RP_OK, NULL);
    CHECK(got == 0.0, "the dot of two empty vectors is 0");
    CHECK_STATUS(rp_dot(&got, &m, &v), RP_ERR_SHAPE, "got [7 x 3] and [7]");
    CHECK_STATUS(rp_tensor_narrow(&e, &v, 0, 0, 6), RP_OK, NULL);
    CHECK_STATUS(rp_dot(&got, &e, &v), RP_ERR_SHAPE, "got [6] and [7]");
    rp_tensor_release(&e);
    rp_tensor_release(&c);
    rp_tensor_release(&b);
    rp_tensor_release(&v);
    rp_tensor_release(&a);
    rp_tensor_release(&m);
}

/* ---------------------------------------------------------------- data movement */

static void test_contiguous_clone_copy(void)
{
    rp_tensor t = iota(3, S(2, 3, 4)), r, tt;
    CHECK_STATUS(rp_tensor_contiguous(&r, &t), RP_OK, NULL);
    CHECK(r.storage == t.storage && t.storage->refcount == 2,
          "contiguous of a contiguous tensor is itself, retained");
    rp_tensor_release(&r);
    CHECK_STATUS(rp_tensor_permute(&tt, &t, (const int[]){1, 2, 0}), RP_OK, NULL);
    CHECK_STATUS(rp_tensor_contiguous(&r, &tt), RP_OK, NULL);
    CHECK(r.storage != t.storage && rp_tensor_is_contiguous(&r) && shape_is(&r, 3, S(3, 4, 2)),
          "contiguous of a permuted view copies");
    float want[24], got[24];
    check_gather(want, &tt);
    memcpy(got, rp_tensor_data(&r), sizeof got);
    CHECK_CLOSE(got, want, 24, 0.0, "contiguous values");
    rp_tensor_release(&r);

    CHECK_STATUS(rp_tensor_clone(&r, &t), RP_OK, NULL);
    CHECK(r.storage != t.storage && rp_tensor_is_contiguous(&r), "clone shares nothing");
    rp_tensor_data(&r)[0] = -1.0f;
    CHECK(rp_tensor_data(&t)[0] == 0.0f, "writing the clone leaves the source alone");
    rp_tensor_release(&r);
    CHECK_STATUS(rp_tensor_clone(&r, &tt), RP_OK, NULL);
    memcpy(got, rp_tensor_data(&r), sizeof got);
    CHECK_CLOSE(got, want, 24, 0.0, "clone of a permuted view");
    rp_tensor_release(&r);

    /* copy with broadcasting into a permuted destination */
    rp_tensor base = check_new(3, S(4, 2, 3)), dst;
    CHECK_STATUS(rp_tensor_permute(&dst, &base, (const int[]){1, 2, 0}), RP_OK, NULL); /* [2,3,4] */
    rp_tensor src = iota(2, S(3, 1));
    CHECK_STATUS(rp_tensor_copy(&dst, &src), RP_OK, NULL);
    int ok = 1;
    int64_t idx[3] = {0};
    do ok &= *check_at(&dst, idx) == (float)idx[1];
    while (check_next_index(3, dst.shape, idx));
    CHECK(ok, "broadcast copy [3 x 1] -> permuted [2 x 3 x 4]");
    rp_tensor src2 = iota(2, S(3, 2));
    CHECK_STATUS(rp_tensor_copy(&dst, &src2), RP_ERR_SHAPE, NULL);
    rp_tensor src3 = iota(4, S(1, 2, 3, 4));
    rp_status st = rp_tensor_copy(&dst, &src3);
    CHECK(st != RP_OK, "copy of a 4-D source into a 3-D destination rejected (%d)", (int)st);
    rp_tensor_release(&src);
    rp_tensor_release(&src2);
    rp_tensor_release(&src3);
    rp_tensor_release(&dst);
    rp_tensor_release(&base);

    /* overlapping views of one storage */
    rp_tensor line = iota(1, S(10)), a, b;
    CHECK_STATUS(rp_tensor_narrow(&a, &line, 0, 2, 8), RP_OK, NULL);
    CHECK_STATUS(rp_tensor_narrow(&b, &line, 0, 0, 8), RP_OK, NULL);
    CHECK_STATUS(rp_tensor_copy(&a, &b), RP_OK, NULL); /* shift right by 2 */
    const float want_r[10] = {0, 1, 0, 1, 2, 3, 4, 5, 6, 7};
    CHECK_CLOSE(rp_tensor_data(&line), want_r, 10, 0.0, "overlapping copy, shift right");
    for (int i = 0; i < 10; i++) rp_tensor_data(&line)[i] = (float)i;
    CHECK_STATUS(rp_tensor_copy(&b, &a), RP_OK, NULL); /* shift left by 2 */
    const float want_l[10] = {2, 3, 4, 5, 6, 7, 8, 9, 8, 9};
    CHECK_CLOSE(rp_tensor_data(&line), want_l, 10, 0.0, "overlapping copy, shift left");
    rp_tensor_release(&a);
    rp_tensor_release(&b);
    rp_tensor_release(&line);

    rp_tensor sq = iota(2, S(3, 3)), sqt;
    CHECK_STATUS(rp_tensor_transpose(&sqt, &sq, 0, 1), RP_OK, NULL);
    CHECK_STATUS(rp_tensor_copy(&sq, &sqt), RP_OK, NULL);
    const float want_t[9] = {0, 3, 6, 1, 4, 7, 2, 5, 8};
    CHECK_CLOSE(rp_tensor_data(&sq), want_t, 9, 0.0, "copy a matrix onto itself transposed");
    rp_tensor_release(&sqt);
    rp_tensor_release(&sq);

    /* fill touches only the view */
    rp_tensor m = check_new(2, S(4, 5)), mn;
    CHECK_STATUS(rp_tensor_narrow(&mn, &m, 1, 1, 3), RP_OK, NULL);
    rp_tensor_fill(&mn, 7.0f);
    float wantf[20];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 5; j++) wantf[i * 5 + j] = (j >= 1 && j <= 3) ? 7.0f : 0.0f;
    CHECK_CLOSE(rp_tensor_data(&m), wantf, 20, 0.0, "fill of a narrowed view");
    rp_tensor_release(&mn);
    rp_tensor_release(&m);
    rp_tensor_release(&tt);
    rp_tensor_release(&t);
}

typedef struct {
    float counter;
    int64_t total;
    int calls;
} run_ctx;

static void number_run(float *p, int64_t n, int64_t stride, void *vctx)
{
    run_ctx *c = vctx;
    c->calls++;
    c->total += n;
    for (int64_t i = 0; i < n; i++) {
        p[i * stride] = c->counter;
        c->counter += 1.0f;
    }
}

static void test_foreach_run(void)
{
    /* Numbering the elements run by run must give row-major index order of the view. */
    const int64_t shapes[3][3] = {{2, 3, 4}, {4, 2, 3}, {1, 5, 1}};
    const int perms[3][3] = {{0, 1, 2}, {2, 0, 1}, {1, 0, 2}};
    for (int c = 0; c < 3; c++) {
        rp_tensor base = check_new(3, shapes[c]), v;
        CHECK_STATUS(rp_tensor_permute(&v, &base, perms[c]), RP_OK, NULL);
        run_ctx ctx = {0.0f, 0, 0};
        rp_tensor_foreach_run(&v, number_run, &ctx);
        int64_t n = rp_tensor_numel(&v);
        float got[24], want[24];
        check_gather(got, &v);
        for (int64_t i = 0; i < n; i++) want[i] = (float)i;
        CHECK(ctx.total == n && ctx.calls >= 1, "runs cover %lld of %lld elements in %d calls",
              (long long)ctx.total, (long long)n, ctx.calls);
        CHECK_CLOSE(got, want, n, 0.0, "foreach_run visits elements in index order");
        rp_tensor_release(&v);
        rp_tensor_release(&base);
    }
    /* A narrowed view (gaps between runs). */
    rp_tensor base = check_new(2, S(4, 6)), v;
    rp_tensor_fill(&base, -1.0f);
    CHECK_STATUS(rp_tensor_narrow(&v, &base, 1, 2, 3), RP_OK, NULL);
    run_ctx ctx = {0.0f, 0, 0};
    rp_tensor_foreach_run(&v, number_run, &ctx);
    float want[24];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 6; j++) want[i * 6 + j] = (j >= 2 && j < 5) ? (float)(i * 3 + j - 2) : -1.0f;
    CHECK_CLOSE(rp_tensor_data(&base), want, 24, 0.0, "foreach_run on a narrowed view");
    rp_tensor_release(&v);
    rp_tensor_release(&base);

    rp_tensor sc = check_new(0, NULL);
    ctx = (run_ctx){5.0f, 0, 0};
    rp_tensor_foreach_run(&sc, number_run, &ctx);
    CHECK(ctx.total == 1 && rp_tensor_data(&sc)[0] == 5.0f, "scalar: one element (%lld)",
          (long long)ctx.total);
    rp_tensor_release(&sc);
    rp_tensor e = check_new(2, S(3, 0));
    ctx = (run_ctx){0.0f, 0, 0};
    rp_tensor_foreach_run(&e, number_run, &ctx);
    CHECK(ctx.total == 0, "empty tensor: no elements visited (%lld)", (long long)ctx.total);
    rp_tensor_release(&e);
}

/* ---------------------------------------------------------------- elementwise ops */

/* Element of t broadcast to an output of out_ndim dims at out_idx (numpy rules). */
static double bcast_get(const rp_tensor *t, int out_ndim, const int64_t *out_idx)
{
    int64_t idx[RP_MAX_DIMS] = {0};
    int lead = out_ndim - t->ndim;
    for (int d = 0; d < t->ndim; d++) idx[d] = t->shape[d] == 1 ? 0 : out_idx[d + lead];
    return (double)*check_at(t, idx);
}

static double ref_binop(rp_binop op, double x, double y)
{
    switch (op) {
    case RP_ADD: return x + y;
    case RP_SUB: return x - y;
    case RP_MUL: return x * y;
    case RP_DIV: return x / y;
    case RP_POW: return pow(x, y);
    case RP_MAXIMUM: return x > y ? x : y;
    case RP_MINIMUM: return x < y ? x : y;
    }
    return NAN;
}

static const char *binop_names[] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum"};

/* Max |x| of n doubles, at least 1. */
static double max_abs1(const double *x, int64_t n)
{
    double m = 1.0;
    for (int64_t i = 0; i < n; i++)
        if (fabs(x[i]) > m) m = fabs(x[i]);
    return m;
}

static void check_binary_case(const char *name, const rp_tensor *a, const rp_tensor *b,
                              int out_ndim, const int64_t *out_shape)
{
    char label[160], sa[RP_SHAPE_STR_LEN], sb[RP_SHAPE_STR_LEN];
    int64_t n = check_numel(out_ndim, out_shape);
    float *got = malloc(sizeof(float) * (size_t)(n + 1));
    double *want = malloc(sizeof(double) * (size_t)(n + 1));
    int bn;
    int64_t bshape[RP_MAX_DIMS];
    CHECK_STATUS(rp_broadcast_shape(&bn, bshape, a, b), RP_OK, NULL);
    CHECK(bn == out_ndim && memcmp(bshape, out_shape, sizeof(int64_t) * (size_t)bn) == 0,
          "%s: rp_broadcast_shape", name);
    for (int op = RP_ADD; op <= RP_MINIMUM; op++) {
        rp_tensor out;
        snprintf(label, sizeof label, "%s %s %s %s", binop_names[op],
                 rp_tensor_shape_str(sa, sizeof sa, a), rp_tensor_shape_str(sb, sizeof sb, b),
                 name);
        if (!CHECK_STATUS(rp_binary(&out, (rp_binop)op, a, b), RP_OK, NULL)) continue;
        CHECK(shape_is(&out, out_ndim, out_shape), "%s: result shape %s", label,
              rp_tensor_shape_str(sa, sizeof sa, &out));
        int64_t idx[RP_MAX_DIMS] = {0}, i = 0;
        if (n > 0) do {
                want[i++] = (double)(float)ref_binop((rp_binop)op, bcast_get(a, out_ndim, idx),
                                                     bcast_get(b, out_ndim, idx));
            } while (check_next_index(out_ndim, out_shape, idx));
        if (shape_is(&out, out_ndim, out_shape)) {
            check_gather(got, &out);
            /* +,-,*,/,max,min of two floats are correctly rounded: 1 ulp of slack. powf may be
             * a few ulps off libm's pow. */
            double tol = (op == RP_POW ? 8e-7 : 1.2e-7) * max_abs1(want, n);
            CHECK_CLOSE(got, want, n, tol, label);
        }
        rp_tensor_release(&out);
    }
    free(got);
    free(want);
}

/* b's values: magnitudes in [0.25, 2), every third one negative. a's values are positive so that
 * pow is defined. */
static void fill_b(rp_tensor *t)
{
    int64_t n = rp_tensor_numel(t);
    float *v = malloc(sizeof(float) * (size_t)(n + 1));
    for (int64_t i = 0; i < n; i++) {
        v[i] = (float)check_rand(&rng_state, 0.25, 2.0);
        if (i % 3 == 1) v[i] = -v[i];
    }
    check_scatter(t, v);
    free(v);
}

static void test_binary(void)
{
    {   /* [3,1,5] with [4,1] */
        rp_tensor a = randt(3, S(3, 1, 5), 0.25, 2.0), b = check_new(2, S(4, 1));
        fill_b(&b);
        check_binary_case("contiguous", &a, &b, 3, S(3, 4, 5));
        check_binary_case("swapped", &b, &a, 3, S(3, 4, 5));
        rp_tensor_release(&a);
        rp_tensor_release(&b);
    }
    {   /* transposed a [5,7] with narrowed b [7] */
        rp_tensor a0 = randt(2, S(7, 5), 0.25, 2.0), b0 = check_new(1, S(9)), a, b;
        fill_b(&b0);
        CHECK_STATUS(rp_tensor_transpose(&a, &a0, 0, 1), RP_OK, NULL);
        CHECK_STATUS(rp_tensor_narrow(&b, &b0, 0, 1, 7), RP_OK, NULL);
        check_binary_case("transposed a, narrowed b", &a, &b, 2, S(5, 7));
        rp_tensor_release(&a);
        rp_tensor_release(&b);
        rp_tensor_release(&a0);
        rp_tensor_release(&b0);
    }
    {   /* permuted a [2,3,4] with a narrowed b [2,3,4] (gaps), and a size-1 vs scalar */
        rp_tensor a0 = randt(3, S(4, 2, 3), 0.25, 2.0), b0 = check_new(3, S(2, 5, 4)), a, b;
        fill_b(&b0);
        CHECK_STATUS(rp_tensor_permute(&a, &a0, (const int[]){1, 2, 0}), RP_OK, NULL);
        CHECK_STATUS(rp_tensor_narrow(&b, &b0, 1, 1, 3), RP_OK, NULL);
        check_binary_case("permuted a, narrowed b", &a, &b, 3, S(2, 3, 4));
        rp_tensor s = check_new(0, NULL);
        rp_tensor_data(&s)[0] = -1.5f;
        check_binary_case("scalar b", &a, &s, 3, S(2, 3, 4));
        rp_tensor one = randt(1, S(1), 0.25, 2.0);
        check_binary_case("[1] a", &one, &b, 3, S(2, 3, 4));
        rp_tensor_release(&one);
        rp_tensor_release(&s);
        rp_tensor_release(&a);
        rp_tensor_release(&b);
        rp_tensor_release(&a0);
        rp_tensor_release(&b0);
    }
    {   /* [4,1,3] with [1,6,1]; an expanded (stride-0) input; empty */
        rp_tensor a = randt(3, S(4, 1, 3), 0.25, 2.0), b = check_new(3, S(1, 6, 1));
        fill_b(&b);
        check_binary_case("both broadcast", &a, &b, 3, S(4, 6, 3));
        rp_tensor ae;
        CHECK_STATUS(rp_tensor_expand(&ae, &a, 3, S(4, 6, 3)), RP_OK, NULL);
        check_binary_case("expanded a", &ae, &b, 3, S(4, 6, 3));
        rp_tensor_release(&ae);
        rp_tensor e = check_new(2, S(0, 3)), c = randt(1, S(3), 0.25, 2.0);
        check_binary_case("empty", &e, &c, 2, S(0, 3));
        rp_tensor_release(&e);
        rp_tensor_release(&c);
        rp_tensor_release(&a);
        rp_tensor_release(&b);
    }
    {   /* inputs are not modified */
        rp_tensor a = randt(2, S(3, 4), 0.25, 2.0), b = randt(2, S(3, 4), 0.25, 2.0), out;
        float a0[12], b0[12];
        memcpy(a0, rp_tensor_data(&a), sizeof a0);
        memcpy(b0, rp_tensor_data(&b), sizeof b0);
        CHECK_STATUS(rp_binary(&out, RP_DIV, &a, &b), RP_OK, NULL);
        CHECK(memcmp(a0, rp_tensor_data(&a), sizeof a0) == 0 &&
                  memcmp(b0, rp_tensor_data(&b), sizeof b0) == 0 && out.storage != a.storage &&
                  out.storage != b.storage,
              "rp_binary leaves its inputs alone and returns fresh storage");
        rp_tensor_release(&out);
        rp_tensor_release(&a);
        rp_tensor_release(&b);
    }
    {   /* errors */
        rp_tensor a = check_new(2, S(3, 4)), b = check_new(1, S(5)), out;
        check_poison(&out);
        CHECK_STATUS(rp_binary(&out, RP_ADD, &a, &b), RP_ERR_SHAPE, "[3 x 4]");
        CHECK(strstr(rp_last_error(), "[5]") != NULL, "message names both shapes: \"%s\"",
              rp_last_error());
        CHECK(out.storage == NULL, "out empty on failure");
        int nd;
        int64_t sh[RP_MAX_DIMS];
        CHECK_STATUS(rp_broadcast_shape(&nd, sh, &a, &b), RP_ERR_SHAPE, NULL);
        rp_tensor c = check_new(3, S(2, 1, 3)), d = check_new(2, S(4, 2));
        CHECK_STATUS(rp_binary(&out, RP_MUL, &c, &d), RP_ERR_SHAPE, "[2 x 1 x 3]");
        CHECK(strstr(rp_last_error(), "[4 x 2]") != NULL, "message names both shapes: \"%s\"",
              rp_last_error());
        rp_tensor_release(&a);
        rp_tensor_release(&b);
        rp_tensor_release(&c);
        rp_tensor_release(&d);
    }
}

static void test_binary_scalar(void)
{
    rp_tensor a0 = randt(2, S(5, 3), 0.25, 2.0), a;
    CHECK_STATUS(rp_tensor_transpose(&a, &a0, 0, 1), RP_OK, NULL);
    float av[15], got[15];
    double want[15];
    check_gather(av, &a);
    const double scalars[2] = {1.5, -0.75};
    for (int op = RP_ADD; op <= RP_MINIMUM; op++)
        for (int si = 0; si < 2; si++)
            for (int first = 0; first <= 1; first++) {
                double s = scalars[si];
                if (op == RP_POW && first && s < 0) continue; /* (-0.75)^a is NaN */
                rp_tensor out;
                char label[96];
                snprintf(label, sizeof label, "%s scalar %g %s", binop_names[op], s,
                         first ? "first" : "second");
                if (!CHECK_STATUS(rp_binary_scalar(&out, (rp_binop)op, &a, s, first), RP_OK,
                                  NULL))
                    continue;
                CHECK(shape_is(&out, 2, S(3, 5)), "%s: shape", label);
                for (int i = 0; i < 15; i++)
                    want[i] = (double)(float)(first ? ref_binop((rp_binop)op, s, (double)av[i])
                                                    : ref_binop((rp_binop)op, (double)av[i], s));
                check_gather(got, &out);
                /* the scalar may be rounded to float first: a few ulps */
                CHECK_CLOSE(got, want, 15, 8e-7 * max_abs1(want, 15), label);
                rp_tensor_release(&out);
            }
    rp_tensor_release(&a);
    rp_tensor_release(&a0);
}

static double ref_unop(rp_unop op, double x)
{
    switch (op) {
    case RP_NEG: return -x;
    case RP_EXP: return exp(x);
    case RP_LOG: return log(x);
    case RP_ABS: return fabs(x);
    case RP_SQRT: return sqrt(x);
    case RP_TANH: return tanh(x);
    case RP_RELU: return x > 0 ? x : 0.0;
    case RP_SIN: return sin(x);
    case RP_COS: return cos(x);
    case RP_SIGMOID: return 1.0 / (1.0 + exp(-x));
    }
    return NAN;
}

static void test_unary(void)
{
    static const char *names[] = {"neg",  "exp",  "log", "abs", "sqrt",
                                  "tanh", "relu", "sin", "cos", "sigmoid"};
    rp_tensor a0 = randt(2, S(6, 4), -3.0, 3.0), a;
    CHECK_STATUS(rp_tensor_transpose(&a, &a0, 0, 1), RP_OK, NULL);
    rp_tensor p0 = randt(2, S(6, 4), 0.01, 5.0), p;
    CHECK_STATUS(rp_tensor_transpose(&p, &p0, 0, 1), RP_OK, NULL);
    float got[24], xv[24];
    double want[24];
    for (int op = RP_NEG; op <= RP_SIGMOID; op++) {
        const rp_tensor *x = (op == RP_LOG || op == RP_SQRT) ? &p : &a;
        rp_tensor out;
        if (!CHECK_STATUS(rp_unary(&out, (rp_unop)op, x), RP_OK, NULL)) continue;
        CHECK(shape_is(&out, 2, S(4, 6)), "%s: shape", names[op]);
        check_gather(xv, x);
        for (int i = 0; i < 24; i++) want[i] = (double)(float)ref_unop((rp_unop)op, (double)xv[i]);
        check_gather(got, &out);
        char label[64];
        snprintf(label, sizeof label, "unary %s (transposed input)", names[op]);
        /* float libm functions are within a few ulps */
        CHECK_CLOSE(got, want, 24, 4e-7 * max_abs1(want, 24), label);
        rp_tensor_release(&out);
    }
    /* special values */
    rp_tensor sp = check_new(1, S(3)), out;
    rp_tensor_data(&sp)[0] = 0.0f;
    rp_tensor_data(&sp)[1] = -1.0f;
    rp_tensor_data(&sp)[2] = 100.0f;
    CHECK_STATUS(rp_unary(&out, RP_LOG, &sp), RP_OK, NULL);
    CHECK(isinf(rp_tensor_data(&out)[0]) && rp_tensor_data(&out)[0] < 0 &&
              isnan(rp_tensor_data(&out)[1]),
          "log(0) = -inf, log(-1) = NaN");
    rp_tensor_release(&out);
    CHECK_STATUS(rp_unary(&out, RP_SIGMOID, &sp), RP_OK, NULL);
    CHECK(rp_tensor_data(&out)[2] == 1.0f && fabsf(rp_tensor_data(&out)[1] - 0.26894142f) < 2e-7f,
          "sigmoid(100) = 1, sigmoid(-1)");
    rp_tensor_release(&out);
    rp_tensor_release(&sp);
    rp_tensor_release(&a);
    rp_tensor_release(&a0);
    rp_tensor_release(&p);
    rp_tensor_release(&p0);
}

/* ---------------------------------------------------------------- reductions, softmax */

static void test_reduce(void)
{
    static const char *names[] = {"sum", "mean", "max", "min"};
    rp_tensor c = randt(3, S(3, 4, 5), -2.0, 2.0);
    rp_tensor base = randt(3, S(5, 3, 4), -2.0, 2.0), pm;
    CHECK_STATUS(rp_tensor_permute(&pm, &base, (const int[]){1, 2, 0}), RP_OK, NULL);
    const rp_tensor *inputs[2] = {&c, &pm};
    const char *in_names[2] = {"contiguous", "permuted"};
    for (int in = 0; in < 2; in++) {
        const rp_tensor *a = inputs[in];
        for (int dim = 0; dim < 3; dim++)
            for (int keep = 0; keep <= 1; keep++) {
                int64_t oshape[3];
                int ond = 0;
                for (int d = 0; d < 3; d++) {
                    if (d != dim) oshape[ond++] = a->shape[d];
                    else if (keep) oshape[ond++] = 1;
                }
                int64_t on = check_numel(ond, oshape);
                for (int op = RP_SUM; op <= RP_MIN + 1; op++) { /* RP_MIN + 1: argmax */
                    double want[20];
                    float got[20];
                    int64_t o = 0, idx[3] = {0};
                    /* out index order: dims other than dim, row-major */
                    int64_t it[3] = {0};
                    int64_t ishape[3];
                    int n_it = 0;
                    for (int d = 0; d < 3; d++)
                        if (d != dim) ishape[n_it++] = a->shape[d];
                    do {
                        int k = 0;
                        for (int d = 0; d < 3; d++)
                            if (d != dim) idx[d] = it[k++];
                        double acc = op == RP_MAX || op == RP_MIN + 1 ? -HUGE_VAL
                                     : op == RP_MIN                  ? HUGE_VAL
                                                                     : 0.0;
                        int64_t arg = -1;
                        for (idx[dim] = 0; idx[dim] < a->shape[dim]; idx[dim]++) {
                            double x = (double)*check_at(a, idx);
                            if (op == RP_SUM || op == RP_MEAN) acc += x;
                            else if (op == RP_MIN) acc = x < acc ? x : acc;
                            else if (x > acc) {
                                acc = x;
                                arg = idx[dim];
                            }
                        }
                        if (op == RP_MEAN) acc /= (double)a->shape[dim];
                        want[o++] = op == RP_MIN + 1 ? (double)arg : (double)(float)acc;
                    } while (check_next_index(2, ishape, it));
                    rp_tensor out;
                    rp_status st = op == RP_MIN + 1 ? rp_argmax(&out, a, dim, keep)
                                                    : rp_reduce(&out, (rp_reduce_op)op, a, dim, keep);
                    char label[96];
                    snprintf(label, sizeof label, "%s dim %d keepdim %d %s",
                             op == RP_MIN + 1 ? "argmax" : names[op], dim, keep, in_names[in]);
                    if (!CHECK(st == RP_OK, "%s: status %d: %s", label, (int)st, rp_last_error()))
                        continue;
                    if (CHECK(shape_is(&out, ond, oshape), "%s: result shape", label)) {
                        check_gather(got, &out);
                        /* sums of <= 5 values in [-2, 2) accumulated in double, rounded once */
                        CHECK_CLOSE(got, want, on, 1e-6, label);
                    }
                    rp_tensor_release(&out);
                }
            }
        /* reduce_all */
        double s = 0, mx = -HUGE_VAL, mn = HUGE_VAL;
        int64_t idx[3] = {0};
        do {
            double x = (double)*check_at(a, idx);
            s += x;
            mx = x > mx ? x : mx;
            mn = x < mn ? x : mn;
        } while (check_next_index(3, a->shape, idx));
        double r[4];
        for (int op = RP_SUM; op <= RP_MIN; op++)
            CHECK_STATUS(rp_reduce_all(&r[op], (rp_reduce_op)op, a), RP_OK, NULL);
        const double want_all[4] = {s, s / 60.0, mx, mn};
        char label[64];
        snprintf(label, sizeof label, "reduce_all sum/mean/max/min %s", in_names[in]);
        CHECK_CLOSE(r, want_all, 4, 1e-9, label); /* double sums of 60 floats */
    }
    rp_tensor_release(&c);
    rp_tensor_release(&pm);
    rp_tensor_release(&base);

    /* Sums in double: 1e8 + 16 ones - 1e8 is 16 (a float accumulator loses the ones). */
    rp_tensor row = check_new(2, S(2, 18)), out;
    for (int j = 0; j < 2; j++) {
        float *p = rp_tensor_data(&row) + j * 18;
        p[0] = 1e8f;
        for (int i = 1; i < 17; i++) p[i] = 1.0f;
        p[17] = -1e8f;
    }
    CHECK_STATUS(rp_reduce(&out, RP_SUM, &row, 1, 0), RP_OK, NULL);
    CHECK(out.storage && rp_tensor_data(&out)[0] == 16.0f && rp_tensor_data(&out)[1] == 16.0f,
          "sum accumulates in double: got %.9g, want 16",
          out.storage ? (double)rp_tensor_data(&out)[0] : (double)NAN);
    rp_tensor_release(&out);
    double all = 0;
    CHECK_STATUS(rp_reduce_all(&all, RP_SUM, &row), RP_OK, NULL);
    CHECK(all == 32.0, "reduce_all sum in double: got %.17g, want 32", all);
    CHECK_STATUS(rp_reduce_all(&all, RP_MEAN, &row), RP_OK, NULL);
    CHECK(fabs(all - 32.0 / 36.0) < 1e-12, "reduce_all mean: got %.17g", all);
    rp_tensor_release(&row);

    /* empty dims */
    rp_tensor e = check_new(2, S(3, 0));
    CHECK_STATUS(rp_reduce(&out, RP_SUM, &e, 1, 0), RP_OK, NULL);
    CHECK(shape_is(&out, 1, S(3)) && rp_tensor_data(&out)[0] == 0.0f &&
              rp_tensor_data(&out)[2] == 0.0f,
          "sum over an empty dim is 0");
    rp_tensor_release(&out);
    CHECK_STATUS(rp_reduce(&out, RP_MEAN, &e, 1, 1), RP_OK, NULL);
    CHECK(shape_is(&out, 2, S(3, 1)) && isnan(rp_tensor_data(&out)[1]),
          "mean over an empty dim is NaN");
    rp_tensor_release(&out);
    check_poison(&out);
    CHECK_STATUS(rp_reduce(&out, RP_MAX, &e, 1, 0), RP_ERR_SHAPE, NULL);
    CHECK(out.storage == NULL, "out empty on failure");
    CHECK_STATUS(rp_reduce(&out, RP_MIN, &e, 1, 0), RP_ERR_SHAPE, NULL);
    CHECK_STATUS(rp_reduce(&out, RP_MAX, &e, 0, 0), RP_OK, NULL);
    CHECK(shape_is(&out, 1, S(0)), "max over a non-empty dim of an empty tensor: [0]");
    rp_tensor_release(&out);
    check_poison(&out);
    rp_status st = rp_argmax(&out, &e, 1, 0);
    CHECK(st != RP_OK && out.storage == NULL, "argmax over an empty dim fails (%d)", (int)st);
    CHECK_STATUS(rp_reduce_all(&all, RP_SUM, &e), RP_OK, NULL);
    CHECK(all == 0.0, "reduce_all sum of empty = %g", all);
    CHECK_STATUS(rp_reduce_all(&all, RP_MEAN, &e), RP_OK, NULL);
    CHECK(isnan(all), "reduce_all mean of empty = %g", all);
    CHECK_STATUS(rp_reduce_all(&all, RP_MAX, &e), RP_ERR_SHAPE, NULL);
    CHECK_STATUS(rp_reduce_all(&all, RP_MIN, &e), RP_ERR_SHAPE, NULL);
    rp_tensor_release(&e);

    rp_tensor t = check_new(3, S(2, 3, 4));
    check_poison(&out);
    st = rp_reduce(&out, RP_SUM, &t, 3, 0);
    CHECK(st != RP_OK && out.storage == NULL, "reduce over dim 3 of 3-D rejected (%d)", (int)st);
    check_poison(&out);
    st = rp_argmax(&out, &t, 3, 0);
    CHECK(st != RP_OK && out.storage == NULL, "argmax over dim 3 of 3-D rejected (%d)", (int)st);
    check_poison(&out);
    st = rp_softmax(&out, &t, 3);
    CHECK(st != RP_OK && out.storage == NULL, "softmax over dim 3 of 3-D rejected (%d)", (int)st);
    rp_tensor_release(&t);
}

static void test_softmax(void)
{
    rp_tensor base = randt(3, S(5, 3, 4), -5.0, 5.0), a;
    CHECK_STATUS(rp_tensor_permute(&a, &base, (const int[]){1, 2, 0}), RP_OK, NULL); /* [3,4,5] */
    /* one line along dim 2 with large values: needs max subtraction */
    const float big[5] = {1000.0f, 999.0f, -1000.0f, 1000.5f, 80.0f};
    for (int64_t i = 0; i < 5; i++) *check_at(&a, S(1, 2, i)) = big[i];
    float got[60];
    double want[60], sums[60], ones[60];
    for (int dim = 0; dim < 3; dim++) {
        rp_tensor out;
        if (!CHECK_STATUS(rp_softmax(&out, &a, dim), RP_OK, NULL)) continue;
        CHECK(shape_is(&out, 3, S(3, 4, 5)), "softmax dim %d: shape", dim);
        int64_t idx[3] = {0};
        do { /* want at idx: over the line through idx along dim */
            int64_t j[3] = {idx[0], idx[1], idx[2]};
            double m = -HUGE_VAL, s = 0;
            for (j[dim] = 0; j[dim] < a.shape[dim]; j[dim]++) {
                double x = (double)*check_at(&a, j);
                m = x > m ? x : m;
            }
            for (j[dim] = 0; j[dim] < a.shape[dim]; j[dim]++)
                s += exp((double)*check_at(&a, j) - m);
            want[(idx[0] * 4 + idx[1]) * 5 + idx[2]] = exp((double)*check_at(&a, idx) - m) / s;
        } while (check_next_index(3, a.shape, idx));
        check_gather(got, &out);
        char label[64];
        snprintf(label, sizeof label, "softmax dim %d (permuted input)", dim);
        /* probabilities <= 1, float exp of a float difference: a few 1e-7 */
        CHECK_CLOSE(got, want, 60, 1e-6, label);
        memset(idx, 0, sizeof idx);
        int nl = 0;
        do {
            if (idx[dim] != 0) continue;
            int64_t j[3] = {idx[0], idx[1], idx[2]};
            double s = 0;
            for (j[dim] = 0; j[dim] < a.shape[dim]; j[dim]++) s += (double)*check_at(&out, j);
            sums[nl] = s;
            ones[nl++] = 1.0;
        } while (check_next_index(3, a.shape, idx));
        snprintf(label, sizeof label, "softmax dim %d: lines sum to 1", dim);
        CHECK_CLOSE(sums, ones, nl, 1e-6, label);
        rp_tensor_release(&out);
    }
    rp_tensor_release(&a);
    rp_tensor_release(&base);
}

int main(void)
{
    test_storage();
    test_new();
    test_shape_str();
    test_reshape();
    test_transpose_permute();
    test_narrow_select_expand();
    test_diagonal();
    test_dot();
    test_contiguous_clone_copy();
    test_foreach_run();
    test_binary();
    test_binary_scalar();
    test_unary();
    test_reduce();
    test_softmax();
    CHECK(check_poison_intact(), "failing calls released what was in out");
    return check_summary("test_tensor");
}
