/* .npy files (core/io/npy.h): the files NumPy made (tests/fixtures/interop, README there) read bit
 * for bit and written back byte for byte, integer files (token ids: every size, both byte orders,
 * float32's exact range) read exactly and written as int32 / int64, round trips of every shape
 * kind and of strided views, and every refusal with its exact message (crafted headers,
 * truncations, sizes, special files).
 */
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

static char g_dir[64];

static void path_in(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", g_dir, name);
}


/* values(n) of tests/reference/make_interop.py, in float64. */
static double value(int64_t k, int specials)
{
    static const double sp[] = {-0.0, INFINITY, -INFINITY, NAN, 1e-40, 3.4028236e38, 1e-46,
                                1.5 * 0x1p-149, 1 + 0x1p-24, 1 + 3 * 0x1p-24, -(1 + 0x1p-24),
                                0x1p-126 * (1 - 0x1p-24)};
    if (specials && k < 12) return sp[k];
    return (double)((k * 7919) % 1009 - 504) / 7.0 + (double)k * 1e-3;
}

/* IDS of tests/reference/make_interop.py: the integer fixtures hold those their type holds. */
static const int64_t IDS[12] = {0,     1,      2,     -1,        127,       -128,
                                255,   32767,  -32768, 65535,    16777216,  -16777216};

/* The message every dtype refusal ends with. */
#define READS "(only float32, float64 and integers: f4, f8, i1, i2, i4, i8, u1, u2, u4, u8 in " \
              "either byte order)"

/* Bitwise equality of floats, any NaN equal to any NaN. */
static int same_float(float a, float b)
{
    if (isnan(a) && isnan(b)) return 1;
    uint32_t x, y;
    memcpy(&x, &a, 4);
    memcpy(&y, &b, 4);
    return x == y;
}

/* rp_npy_load(path) must fail with exactly "path: <tail>". */
static void expect_fail(const char *path, const char *tail)
{
    rp_tensor t;
    char want[1024];
    snprintf(want, sizeof want, "%s: %s", path, tail);
    rp_status st = rp_npy_load(path, &t, NULL);
    CHECK(st == RP_ERR_IO && strcmp(rp_last_error(), want) == 0 && t.storage == NULL,
          "%s\n   got  (%d) \"%s\"\n   want \"%s\"", path, (int)st, rp_last_error(), want);
}

/* ---- the files NumPy made ---------------------------------------------------------------------- */

typedef struct {
    const char *file;
    int ndim;
    int64_t shape[RP_MAX_DIMS];
    int64_t first; /* values(first + n): the index of the first value, for the scalar */
    int specials;
    rp_npy_dtype dtype;
    int same_bytes; /* our writer gives NumPy's bytes back (float32, version 1.0) */
} npy_case;

static const npy_case cases[] = {
    {"np_f32_3x4.npy", 2, {3, 4}, 0, 1, RP_NPY_F32, 1},
    {"np_f32_7.npy", 1, {7}, 0, 0, RP_NPY_F32, 1},
    {"np_f32_scalar.npy", 0, {0}, 12, 0, RP_NPY_F32, 1},
    {"np_f32_empty.npy", 2, {0, 3}, 0, 0, RP_NPY_F32, 1},
    {"np_f32_8d.npy", 8, {1, 2, 1, 3, 1, 2, 1, 2}, 0, 0, RP_NPY_F32, 1},
    {"np_f64_4x5.npy", 2, {4, 5}, 0, 1, RP_NPY_F64, 0},
    {"np_f32_v2.npy", 2, {2, 3}, 0, 0, RP_NPY_F32, 0},
    {"np_f64_v3.npy", 1, {3}, 0, 0, RP_NPY_F64, 0},
    {"np_f32_big.npy", 1, {4}, 0, 0, RP_NPY_F32, 0},
    {"np_f64_big.npy", 1, {4}, 0, 0, RP_NPY_F64, 0},
};

static void test_numpy_files(void)
{
    char path[512], out[512];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const npy_case *k = &cases[c];
        check_interop_fixture(path, sizeof path, k->file);
        rp_tensor t;
        rp_npy_dtype dt = (rp_npy_dtype)-1;
        if (!CHECK_STATUS(rp_npy_load(path, &t, &dt), RP_OK, NULL)) continue;
        int same = t.ndim == k->ndim && dt == k->dtype && rp_tensor_is_contiguous(&t);
        for (int d = 0; same && d < k->ndim; d++) same = t.shape[d] == k->shape[d];
        CHECK(same, "%s: ndim %d dtype %d", k->file, t.ndim, (int)dt);
        int64_t n = rp_tensor_numel(&t), bad = -1;
        const float *x = rp_tensor_data(&t);
        for (int64_t i = 0; i < n && bad < 0; i++)
            if (!same_float(x[i], (float)value(k->first + i, k->specials))) bad = i;
        CHECK(bad < 0, "%s: value %lld is %.9g, want %.9g", k->file, (long long)bad,
              bad >= 0 ? (double)x[bad] : 0.0, bad >= 0 ? (double)(float)value(k->first + bad, k->specials) : 0.0);
        if (k->same_bytes) {
            path_in(out, sizeof out, "again.npy");
            CHECK_STATUS(rp_npy_save(out, &t), RP_OK, NULL);
            size_t na = 0, nb = 0;
            unsigned char *a = check_read_bytes(path, &na), *b = check_read_bytes(out, &nb);
            CHECK(a && b && na == nb && memcmp(a, b, na) == 0,
                  "%s: written again, %zu bytes, NumPy's file %zu bytes", k->file, nb, na);
            free(a);
            free(b);
            unlink(out);
        }
        rp_tensor_release(&t);
    }
    /* the special values of the float64 file, as the rules say (not only as the cast says) */
    rp_tensor t;
    if (CHECK_STATUS(rp_npy_load(check_interop_fixture(path, sizeof path, "np_f64_4x5.npy"), &t, NULL), RP_OK,
                     NULL)) {
        const float *x = rp_tensor_data(&t);
        CHECK(x[0] == 0.0f && signbit(x[0]), "-0.0 stays negative zero");
        CHECK(isinf(x[1]) && x[1] > 0 && isinf(x[2]) && x[2] < 0 && isnan(x[3]), "inf, -inf, nan");
        CHECK(x[4] > 0 && x[4] < FLT_MIN, "1e-40 is a float32 subnormal: %g", (double)x[4]);
        CHECK(isinf(x[5]), "3.4028236e38 overflows to inf: %g", (double)x[5]);
        CHECK(x[6] == 0.0f, "1e-46 underflows to 0");
        CHECK(x[7] == 0x1p-148f, "1.5 * 2^-149 ties to even: 2^-148, got %a", (double)x[7]);
        CHECK(x[8] == 1.0f, "1 + 2^-24 ties to even: 1, got %a", (double)x[8]);
        CHECK(x[9] == 1.0f + 0x1p-22f, "1 + 3 * 2^-24 ties to even: 1 + 2^-22, got %a", (double)x[9]);
        CHECK(x[10] == -1.0f, "-(1 + 2^-24) ties to -1");
        CHECK(x[11] == FLT_MIN, "2^-126 (1 - 2^-24) ties up to 2^-126, got %a", (double)x[11]);
        rp_tensor_release(&t);
    }
    /* the kinds roper refuses */
    static const struct {
        const char *file, *msg;
    } refused[] = {
        {"np_f32_fortran.npy",
         "Fortran-order arrays are not supported (save np.ascontiguousarray(a))"},
        {"np_f16.npy", "dtype '<f2' is not supported " READS},
        {"np_bool.npy", "dtype '|b1' is not supported " READS},
        {"np_object.npy", "object arrays ('|O') are not supported " READS},
        {"np_structured.npy", "structured arrays are not supported " READS},
        {"np_i64_2p24p1.npy", "integer 16777217 at index (1, 1) is beyond float32's exact range "
                              "(|x| <= 2^24 = 16777216)"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        expect_fail(check_interop_fixture(path, sizeof path, refused[i].file), refused[i].msg);
}

/* ---- integers (token ids) ---------------------------------------------------------------------- */

/* The integer files NumPy wrote: every value of IDS the type holds, exactly, in either byte order;
 * the little-endian int32 and int64 ones written back as NumPy wrote them. */
static void test_integer_files(void)
{
    static const struct {
        const char *file;
        rp_npy_dtype dtype;
        int64_t lo, hi;    /* the type's range */
        int save_as_again; /* 1: rp_npy_save_as in this dtype gives NumPy's bytes back */
    } files[] = {
        {"np_i64.npy", RP_NPY_I64, INT64_MIN, INT64_MAX, 1},
        {"np_i64_be.npy", RP_NPY_I64, INT64_MIN, INT64_MAX, 0},
        {"np_i32.npy", RP_NPY_I32, INT32_MIN, INT32_MAX, 1},
        {"np_i32_be.npy", RP_NPY_I32, INT32_MIN, INT32_MAX, 0},
        {"np_i16.npy", RP_NPY_I16, INT16_MIN, INT16_MAX, 0},
        {"np_i8.npy", RP_NPY_I8, INT8_MIN, INT8_MAX, 0},
        {"np_u64.npy", RP_NPY_U64, 0, INT64_MAX, 0},
        {"np_u32.npy", RP_NPY_U32, 0, UINT32_MAX, 0},
        {"np_u16.npy", RP_NPY_U16, 0, UINT16_MAX, 0},
        {"np_u8.npy", RP_NPY_U8, 0, UINT8_MAX, 0},
    };
    char path[512], out[512];
    path_in(out, sizeof out, "ids.npy");
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        float want[12];
        int64_t n = 0;
        for (int i = 0; i < 12; i++)
            if (IDS[i] >= files[f].lo && IDS[i] <= files[f].hi) want[n++] = (float)IDS[i];
        rp_tensor t;
        rp_npy_dtype dt = (rp_npy_dtype)-1;
        check_interop_fixture(path, sizeof path, files[f].file);
        if (!CHECK_STATUS(rp_npy_load(path, &t, &dt), RP_OK, NULL)) continue;
        int shape_ok = n == 12 ? t.ndim == 2 && t.shape[0] == 3 && t.shape[1] == 4
                               : t.ndim == 1 && t.shape[0] == n;
        CHECK(shape_ok && dt == files[f].dtype && rp_tensor_numel(&t) == n,
              "%s: ndim %d, dtype %d", files[f].file, t.ndim, (int)dt);
        const float *x = rp_tensor_data(&t);
        int64_t bad = -1;
        for (int64_t i = 0; i < n && bad < 0 && shape_ok; i++)
            if (x[i] != want[i]) bad = i;
        CHECK(bad < 0, "%s: value %lld is %.9g, want %.9g", files[f].file, (long long)bad,
              bad >= 0 ? (double)x[bad] : 0.0, bad >= 0 ? (double)want[bad] : 0.0);
        if (files[f].save_as_again) {
            CHECK_STATUS(rp_npy_save_as(out, &t, files[f].dtype), RP_OK, NULL);
            size_t na = 0, nb = 0;
            unsigned char *a = check_read_bytes(path, &na), *b = check_read_bytes(out, &nb);
            CHECK(a && b && na == nb && memcmp(a, b, na) == 0,
                  "%s: written again, %zu bytes, NumPy's file %zu bytes", files[f].file, nb, na);
            free(a);
            free(b);
            unlink(out);
        }
        rp_tensor_release(&t);
    }
}

/* A version 1.0 file of this descr and shape whose data are the n bytes at data. */
static void write_ints(const char *path, const char *descr, const char *shape, const void *data,
                       size_t n)
{
    char h[256];
    snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
    size_t pre = 10, hl = strlen(h), total = pre + hl + 1, pad = (64 - total % 64) % 64;
    unsigned char *b = calloc(1, total + pad + n);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (unsigned char)((hl + pad + 1) & 0xff);
    b[9] = (unsigned char)((hl + pad + 1) >> 8);
    memcpy(b + pre, h, hl);
    memset(b + pre + hl, ' ', pad);
    b[pre + hl + pad] = '\n';
    memcpy(b + total + pad, data, n);
    check_write_bytes(path, b, total + pad + n);
    free(b);
}

/* Integers beyond float32's exact range (+-2^24) are refused naming the value and its index,
 * the edges themselves are read; sign extension and byte order of every size; truncation. */
static void test_integer_range(void)
{
    char p[512];
    path_in(p, sizeof p, "int.npy");
    /* int64 little-endian: 2^24 + 1 at index (1, 0) of a 2 x 2 array */
    static const unsigned char le8[32] = {1, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff,
                                          0xff, 0xff, 0xff, 1, 0, 0, 1, 0, 0, 0, 0};
    write_ints(p, "<i8", "(2, 2)", le8, 32);
    expect_fail(p, "integer 16777217 at index (1, 0) is beyond float32's exact range (|x| <= "
                   "2^24 = 16777216)");
    /* big-endian int32: -2^24 - 1 at index (2,), after -2^24 and 2^24 (read) */
    static const unsigned char be4[12] = {0xff, 0, 0, 0, 1, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff};
    write_ints(p, ">i4", "(3,)", be4, 12);
    expect_fail(p, "integer -16777217 at index (2,) is beyond float32's exact range (|x| <= "
                   "2^24 = 16777216)");
    rp_tensor t;
    write_ints(p, ">i4", "(2,)", be4, 8);
    if (CHECK_STATUS(rp_npy_load(p, &t, NULL), RP_OK, NULL)) {
        const float *x = rp_tensor_data(&t);
        CHECK(x[0] == -16777216.0f && x[1] == 16777216.0f, ">i4 edges: %g %g", (double)x[0],
              (double)x[1]);
        rp_tensor_release(&t);
    }
    /* the largest of each wide type, the smallest signed ones */
    static const unsigned char ones[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    write_ints(p, "<u8", "()", ones, 8);
    expect_fail(p, "integer 18446744073709551615 at index () is beyond float32's exact range "
                   "(|x| <= 2^24 = 16777216)");
    write_ints(p, ">u4", "(1, 1)", ones, 4);
    expect_fail(p, "integer 4294967295 at index (0, 0) is beyond float32's exact range (|x| <= "
                   "2^24 = 16777216)");
    static const unsigned char min8[8] = {0, 0, 0, 0, 0, 0, 0, 0x80};
    write_ints(p, "<i8", "(1,)", min8, 8);
    expect_fail(p, "integer -9223372036854775808 at index (0,) is beyond float32's exact range "
                "(|x| <= 2^24 = 16777216)");
    write_ints(p, ">i8", "(1,)", min8 + 4, 4); /* 4 bytes of 8: truncated */
    expect_fail(p, "truncated (the data of shape (1,) '>i8' needs 8 bytes, the file has 4)");
    /* sign extension and byte order: 0xff80 is -128 as '>i2', 65408 as '>u2', -32513 as '<i2' */
    static const struct {
        const char *descr;
        float want[2];
    } small[] = {
        {">i2", {-128.0f, 127.0f}},  {"<i2", {-32513.0f, 32512.0f}}, {">u2", {65408.0f, 127.0f}},
        {"|i1", {-1.0f, -128.0f}},   {"<i1", {-1.0f, -128.0f}},      {"|u1", {255.0f, 128.0f}},
        {">u1", {255.0f, 128.0f}},
    };
    static const unsigned char sb[4] = {0xff, 0x80, 0x00, 0x7f};
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) {
        write_ints(p, small[i].descr, "(2,)", sb, small[i].descr[2] == '1' ? 2 : 4);
        if (!CHECK_STATUS(rp_npy_load(p, &t, NULL), RP_OK, NULL)) continue;
        const float *x = rp_tensor_data(&t);
        CHECK(x[0] == small[i].want[0] && x[1] == small[i].want[1], "%s: %g %g, want %g %g",
              small[i].descr, (double)x[0], (double)x[1], (double)small[i].want[0],
              (double)small[i].want[1]);
        rp_tensor_release(&t);
    }
    unlink(p);
}

/* rp_npy_save_as: int32 and int64 files of any view, read back exactly (and by NumPy: the header
 * is np.save's); a value the type cannot hold is refused naming it, before the file is touched. */
static void test_save_ints(void)
{
    char p[512];
    path_in(p, sizeof p, "w.npy");
    int64_t shape[2] = {2, 3};
    rp_tensor t, back;
    rp_tensor_new(&t, 2, shape);
    float *x = rp_tensor_data(&t);
    static const float v[6] = {0.0f, -1.0f, 16777216.0f, -2147483648.0f, 2147483520.0f, 7.0f};
    memcpy(x, v, sizeof v);
    static const struct {
        rp_npy_dtype dt;
        const char *descr;
        int size;
    } kinds[] = {{RP_NPY_I32, "<i4", 4}, {RP_NPY_I64, "<i8", 8}};
    for (int k = 0; k < 2; k++) {
        CHECK_STATUS(rp_npy_save_as(p, &t, kinds[k].dt), RP_OK, NULL);
        size_t n = 0;
        unsigned char *b = check_read_bytes(p, &n);
        char dict[128];
        snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (2, 3), }",
                 kinds[k].descr);
        CHECK(b && n == 128 + 6 * (size_t)kinds[k].size && memcmp(b + 10, dict, strlen(dict)) == 0,
              "%s: header and size (%zu bytes)", kinds[k].descr, n);
        /* -2^31 as two's complement, little-endian, in both widths */
        CHECK(b && n >= 128 + 4 * (size_t)kinds[k].size && b[128 + 3 * kinds[k].size] == 0 &&
                  b[128 + 4 * kinds[k].size - 1] == (kinds[k].size == 4 ? 0x80 : 0xff),
              "%s: -2^31 bytes", kinds[k].descr);
        free(b);
        rp_npy_dtype dt;
        /* 2^31 - 128 and -2^31 are beyond 2^24: the reader refuses them as ids */
        if (CHECK(rp_npy_load(p, &back, &dt) == RP_ERR_IO, "%s: read back", kinds[k].descr))
            CHECK(strstr(rp_last_error(), "integer -2147483648 at index (1, 0) is beyond"),
                  "%s: %s", kinds[k].descr, rp_last_error());
    }
    /* ids within 2^24 come back exactly, from a transposed view too */
    x[3] = -16777216.0f;
    x[4] = 65535.0f;
    rp_tensor tr;
    rp_tensor_transpose(&tr, &t, 0, 1);
    for (int k = 0; k < 2; k++) {
        rp_npy_dtype dt = RP_NPY_F32;
        if (!CHECK_STATUS(rp_npy_save_as(p, &tr, kinds[k].dt), RP_OK, NULL) ||
            !CHECK_STATUS(rp_npy_load(p, &back, &dt), RP_OK, NULL))
            continue;
        int ok = dt == kinds[k].dt && back.ndim == 2 && back.shape[0] == 3 && back.shape[1] == 2;
        for (int i = 0; ok && i < 3; i++)
            for (int j = 0; ok && j < 2; j++) ok = rp_tensor_data(&back)[i * 2 + j] == x[j * 3 + i];
        CHECK(ok, "%s: a transposed view read back", kinds[k].descr);
        rp_tensor_release(&back);
    }
    rp_tensor_release(&tr);
    /* refusals: the first element that does not fit, by its index; no file is written */
    unlink(p);
    static const struct {
        int at;
        float value;
        rp_npy_dtype dt;
        const char *msg;
    } bad[] = {
        {2, 1.5f, RP_NPY_I64, "element at index (0, 2) is 1.5, not an integer (dtype int64)"},
        {0, NAN, RP_NPY_I32, "element at index (0, 0) is nan, not an integer (dtype int32)"},
        {0, -NAN, RP_NPY_I32, "element at index (0, 0) is nan, not an integer (dtype int32)"},
        {4, -INFINITY, RP_NPY_I64, "element at index (1, 1) is -inf, not an integer (dtype int64)"},
        {5, 2147483648.0f, RP_NPY_I32,
         "element at index (1, 2) is 2147483648, outside int32 (-2147483648..2147483647)"},
        {1, -2147483904.0f, RP_NPY_I32,
         "element at index (0, 1) is -2147483904, outside int32 (-2147483648..2147483647)"},
        {3, 9223372036854775808.0f, RP_NPY_I64,
         "element at index (1, 0) is 9223372036854775808, outside int64 "
         "(-9223372036854775808..9223372036854775807)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rp_tensor u;
        rp_tensor_clone(&u, &t);
        rp_tensor_data(&u)[bad[i].at] = bad[i].value;
        char want[600];
        snprintf(want, sizeof want, "%s: %s", p, bad[i].msg);
        int64_t idx[RP_MAX_DIMS] = {-1, -1};
        CHECK(rp_npy_first_unfit(&u, bad[i].dt, idx) == bad[i].at && idx[0] == bad[i].at / 3 &&
                  idx[1] == bad[i].at % 3,
              "first unfit %zu", i);
        CHECK_STATUS(rp_npy_save_as(p, &u, bad[i].dt), RP_ERR_ARG, want);
        CHECK(access(p, F_OK) != 0, "nothing written for %zu", i);
        rp_tensor_release(&u);
    }
    /* -2^63 fits int64; float32 holds no integer between 2^63 - 2^39 and 2^63 */
    x[0] = -9223372036854775808.0f;
    x[1] = 9223371487098961920.0f;
    x[2] = 5.0f;
    x[3] = x[4] = x[5] = 0.0f;
    int64_t idx[RP_MAX_DIMS];
    CHECK(rp_npy_first_unfit(&t, RP_NPY_I64, idx) == -1, "int64's edges fit");
    CHECK(rp_npy_first_unfit(&t, RP_NPY_I32, idx) == 0, "int32 refuses -2^63");
    x[1] = 1.5f;
    CHECK(rp_npy_first_unfit(&t, RP_NPY_F32, idx) == -1, "float32 holds anything");
    char want[600];
    snprintf(want, sizeof want, "%s: cannot write dtype 1 (float32, int32 and int64 are written)", p);
    CHECK_STATUS(rp_npy_save_as(p, &t, RP_NPY_F64), RP_ERR_ARG, want);
    rp_tensor_release(&t);
}

/* ---- round trips ------------------------------------------------------------------------------- */

/* Saves t, loads it back, compares every element with t's logical contents bit for bit. */
static void round_trip(const rp_tensor *t, const char *label)
{
    char path[512];
    path_in(path, sizeof path, "rt.npy");
    if (!CHECK_STATUS(rp_npy_save(path, t), RP_OK, NULL)) return;
    rp_tensor u;
    if (!CHECK_STATUS(rp_npy_load(path, &u, NULL), RP_OK, NULL)) return;
    int ok = rp_tensor_same_shape(t, &u) && rp_tensor_is_contiguous(&u);
    int64_t idx[RP_MAX_DIMS] = {0}, n = rp_tensor_numel(t), i = 0;
    const float *src = rp_tensor_data(t), *dst = rp_tensor_data(&u);
    for (; ok && i < n; i++) {
        uint32_t a, b;
        memcpy(&a, src + rp_tensor_index_offset(t, idx), 4);
        memcpy(&b, dst + i, 4);
        ok = a == b; /* bit for bit: -0.0 and NaN payloads included */
        check_next_index(t->ndim, t->shape, idx);
    }
    CHECK(ok, "%s: round trip differs at element %lld", label, (long long)(i - 1));
    size_t len = 0;
    unsigned char *b = check_read_bytes(path, &len);
    size_t hdr = b ? (size_t)(10 + b[8] + 256 * b[9]) : 0;
    CHECK(b && hdr % 64 == 0 && b[hdr - 1] == '\n' && len == hdr + 4 * (size_t)n,
          "%s: header of %zu bytes, file of %zu", label, hdr, len);
    free(b);
    rp_tensor_release(&u);
    unlink(path);
}

static void test_round_trips(void)
{
    uint64_t seed = 42;
    static const struct {
        int ndim;
        int64_t shape[RP_MAX_DIMS];
    } shapes[] = {{0, {0}},         {1, {0}},          {2, {0, 3}},    {3, {3, 0, 2}},
                  {1, {5}},         {2, {2, 3}},       {3, {4, 1, 7}}, {2, {1, 1000}},
                  {8, {1, 2, 1, 3, 1, 2, 1, 2}},       {4, {2, 3, 4, 5}}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        rp_tensor t;
        if (!CHECK_STATUS(rp_tensor_new(&t, shapes[s].ndim, shapes[s].shape), RP_OK, NULL)) continue;
        float *x = rp_tensor_data(&t);
        for (int64_t i = 0; i < rp_tensor_numel(&t); i++) x[i] = (float)check_rand(&seed, -3, 3);
        char label[64];
        snprintf(label, sizeof label, "shape %zu", s);
        round_trip(&t, label);
        rp_tensor_release(&t);
    }
    /* special values, NaN payloads */
    int64_t n8 = 8;
    rp_tensor sp;
    rp_tensor_new(&sp, 1, &n8);
    uint32_t bits[8] = {0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00001u,
                        0xffa00123u, 0x00000001u, 0x007fffffu, 0x7f7fffffu};
    memcpy(rp_tensor_data(&sp), bits, sizeof bits);
    round_trip(&sp, "special values and NaN payloads");
    rp_tensor_release(&sp);
    /* views: transposed, narrowed, selected, broadcast (stride 0), permuted */
    int64_t shape[3] = {3, 4, 5};
    rp_tensor base, v, w;
    rp_tensor_new(&base, 3, shape);
    float *x = rp_tensor_data(&base);
    for (int i = 0; i < 60; i++) x[i] = (float)i - 7.25f;
    rp_tensor_transpose(&v, &base, 0, 2);
    round_trip(&v, "transposed view");
    rp_tensor_release(&v);
    rp_tensor_narrow(&v, &base, 1, 1, 2);
    round_trip(&v, "narrowed view");
    rp_tensor_narrow(&w, &v, 2, 3, 2);
    round_trip(&w, "narrowed twice");
    rp_tensor_release(&w);
    rp_tensor_release(&v);
    rp_tensor_select(&v, &base, 1, 2);
    round_trip(&v, "selected view");
    rp_tensor_select(&w, &v, 0, 1);
    round_trip(&w, "selected down to 1-D");
    rp_tensor_release(&w);
    rp_tensor_release(&v);
    int perm[3] = {2, 0, 1};
    rp_tensor_permute(&v, &base, perm);
    round_trip(&v, "permuted view");
    rp_tensor_release(&v);
    int64_t one = 1, big[2] = {6, 5};
    rp_tensor row;
    rp_tensor_narrow(&row, &base, 0, 0, 1);
    rp_tensor_select(&w, &row, 1, 0); /* [1 x 5] */
    rp_tensor_expand(&v, &w, 2, big);
    round_trip(&v, "broadcast view (stride 0)");
    rp_tensor_release(&v);
    rp_tensor_release(&w);
    rp_tensor_release(&row);
    (void)one;
    rp_tensor_release(&base);
}

/* The header of a [2 x 3] tensor is NumPy 1.24's, byte for byte. */
static void test_header_text(void)
{
    int64_t shape[2] = {2, 3};
    rp_tensor t;
    rp_tensor_new(&t, 2, shape);
    char path[512];
    path_in(path, sizeof path, "h.npy");
    CHECK_STATUS(rp_npy_save(path, &t), RP_OK, NULL);
    size_t n = 0;
    unsigned char *b = check_read_bytes(path, &n);
    const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    size_t dl = strlen(dict);
    int ok = b && n == 128 + 24 && memcmp(b, "\x93NUMPY\x01\x00\x76\x00", 10) == 0 &&
             memcmp(b + 10, dict, dl) == 0 && b[127] == '\n';
    for (size_t i = 10 + dl; ok && i < 127; i++) ok = b[i] == ' ';
    CHECK(ok, "header of a [2 x 3] tensor (%zu bytes)", n);
    free(b);
    unlink(path);
    rp_tensor_release(&t);
}

/* ---- refusals ------------------------------------------------------------------------------------ */

/* A file: the preamble of version major.0, the hl header bytes exactly as given, then ndata bytes
 * of data (zeros). */
static void write_npy_raw(const char *path, int major, const char *header, size_t hl, size_t ndata)
{
    size_t pre = major == 1 ? 10 : 12, n = pre + hl + ndata;
    unsigned char *b = calloc(1, n);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)major;
    for (size_t i = 0; i < pre - 8; i++) b[8 + i] = (unsigned char)((uint32_t)hl >> (8 * i));
    memcpy(b + pre, header, hl);
    check_write_bytes(path, b, n);
    free(b);
}

/* A file: the v1.0 (or v2/v3) preamble with the header (hl bytes) padded with spaces and a newline
 * to 64 bytes, then ndata bytes of data (zeros). */
static void write_npy_n(const char *path, int major, const char *header, size_t hl, size_t ndata)
{
    size_t pre = major == 1 ? 10 : 12;
    size_t total = pre + hl + 1;
    size_t pad = (64 - total % 64) % 64;
    char *h = malloc(hl + pad + 1);
    memcpy(h, header, hl);
    memset(h + hl, ' ', pad);
    h[hl + pad] = '\n';
    write_npy_raw(path, major, h, hl + pad + 1, ndata);
    free(h);
}

static void write_npy(const char *path, int major, const char *header, size_t ndata)
{
    write_npy_n(path, major, header, strlen(header), ndata);
}

static void test_refusals(void)
{
    char p[512];
    path_in(p, sizeof p, "bad.npy");
    check_write_bytes(p, "", 0);
    expect_fail(p, "empty file (not a .npy file)");
    check_write_bytes(p, "hello world, this is text", 25);
    expect_fail(p, "not a .npy file (no \\x93NUMPY magic)");
    check_write_bytes(p, "\x93NUM", 4);
    expect_fail(p, "truncated (4 bytes, shorter than the 10-byte .npy preamble)");
    check_write_bytes(p, "\x93NUMPY\x04\x00\x10\x00", 10);
    expect_fail(p, ".npy format version 4.0 is not supported (1.0, 2.0 and 3.0 are)");
    check_write_bytes(p, "\x93NUMPY\x01\x01\x10\x00", 10);
    expect_fail(p, ".npy format version 1.1 is not supported (1.0, 2.0 and 3.0 are)");
    check_write_bytes(p, "\x93NUMPY\x02\x00\x10\x00\x00", 11);
    expect_fail(p, "truncated (11 bytes, shorter than the 12-byte .npy 2.0 preamble)");
    /* header lengths: larger than the file, larger than the limit */
    unsigned char hb[80] = "\x93NUMPY\x01\x00\xff\xff";
    check_write_bytes(p, hb, sizeof hb);
    expect_fail(p, "truncated (the header needs 65545 bytes, the file has 80)");
    memcpy(hb, "\x93NUMPY\x02\x00\xff\xff\xff\xff", 12);
    check_write_bytes(p, hb, sizeof hb);
    expect_fail(p, "truncated (the header needs 4294967307 bytes, the file has 80)");
    memcpy(hb, "\x93NUMPY\x03\x00\xa0\x86\x01\x00", 12); /* 100000 */
    check_write_bytes(p, hb, sizeof hb);
    CHECK(truncate(p, 200000) == 0, "truncate: %s", strerror(errno));
    expect_fail(p, "header of 100000 bytes is more than the 65536 this reader accepts");
    /* malformed dicts */
    static const struct {
        const char *header, *msg;
    } dicts[] = {
        {"{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}",
         "bad .npy header (at byte 16: expected ',' or '}' in the dict)"},
        {"{'descr' '<f4', 'fortran_order': False, 'shape': (2,)}",
         "bad .npy header (at byte 9: expected ':' after a key)"},
        {"{'descr': '<f4', 'fortran_order': False}", "bad .npy header (no 'shape' key)"},
        {"{'descr': '<f4', 'shape': (2,), }", "bad .npy header (no 'fortran_order' key)"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}",
         "bad .npy header (at byte 56: unknown key 'extra')"},
        {"{'shape': (2,), 'shape': (2,)}", "bad .npy header (at byte 16: key 'shape' appears twice)"},
        {"{'descr': '<f4', 'fortran_order': maybe, 'shape': (2,)}",
         "bad .npy header (at byte 34: 'fortran_order' must be True or False)"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3)}",
         "bad .npy header (at byte 52: a shape of one size needs a comma: (n,))"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}",
         "bad .npy header (at byte 51: shape sizes must be integers >= 0)"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}",
         "bad .npy header (at byte 51: shape size is too large)"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': [2]}",
         "bad .npy header (at byte 50: expected '(' (the shape is a tuple))"},
        {"[1, 2]", "bad .npy header (at byte 0: expected '{' (the header is a dict))"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x",
         "bad .npy header (at byte 56: unexpected text after the dict)"},
        {"{'descr': '<\\f4', 'fortran_order': False, 'shape': (2,)}",
         "bad .npy header (at byte 12: escapes in strings are not supported)"},
        {"{'descr': '<f4, 'fortran_order': False, 'shape': (2,)}",
         "bad .npy header (at byte 17: expected ',' or '}' in the dict)"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3 4)}",
         "bad .npy header (at byte 56: expected ',' or ')' in the shape)"},
    };
    for (size_t i = 0; i < sizeof dicts / sizeof dicts[0]; i++) {
        write_npy(p, 1, dicts[i].header, 0);
        expect_fail(p, dicts[i].msg);
    }
    /* accepted variants: double quotes, no trailing comma, Python 2 longs (not in 3.0: NumPy
     * filters the L out of 1.0 and 2.0 headers only), other key order, v2 */
    static const char *const fine[] = {
        "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2, 3)}",
        "{'shape': (2L, 3L), 'fortran_order': False, 'descr': '<f4'}",
        "{ 'descr' : '<f4' , 'fortran_order' : False , 'shape' : ( 2 , 3 , ) , }",
    };
    for (size_t i = 0; i < 3; i++) {
        for (int major = 1; major <= (i == 1 ? 2 : 3); major++) {
            write_npy(p, major, fine[i], 24);
            rp_tensor t;
            CHECK(rp_npy_load(p, &t, NULL) == RP_OK && t.ndim == 2 && t.shape[0] == 2 &&
                      t.shape[1] == 3,
                  "variant %zu, version %d.0: %s", i, major, rp_last_error());
            rp_tensor_release(&t);
        }
    }
    /* dtypes and order */
    static const struct {
        const char *descr, *msg;
    } dts[] = {
        {"'>f2'", "dtype '>f2' is not supported " READS},
        {"'|i4'", "dtype '|i4' is not supported " READS}, /* '|' only for the 1-byte types */
        {"'<i3'", "dtype '<i3' is not supported " READS},
        {"'<c8'", "dtype '<c8' is not supported " READS},
        {"'<U4'", "dtype '<U4' is not supported " READS},
        {"'i8'", "dtype 'i8' is not supported " READS},
        {"'<i8 '", "dtype '<i8 ' is not supported " READS},
        {"'|O'", "object arrays ('|O') are not supported " READS},
        {"[('a', '<f4')]", "structured arrays are not supported " READS},
        {"'=f4'", "dtype '=f4' is not supported " READS},
    };
    char h[256];
    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
        snprintf(h, sizeof h, "{'descr': %s, 'fortran_order': False, 'shape': (2,), }",
                 dts[i].descr);
        write_npy(p, 1, h, 8);
        expect_fail(p, dts[i].msg);
    }
    write_npy(p, 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 24);
    expect_fail(p, "Fortran-order arrays are not supported (save np.ascontiguousarray(a))");
    /* sizes */
    write_npy(p, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1), }",
              4);
    expect_fail(p, "9 dims, more than the 8 a tensor holds");
    write_npy(p, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1048576, 1048577), }", 0);
    expect_fail(p, "shape (1048576, 1048577) has more than 2^40 elements");
    /* an empty shape is held to the limit of its sizes other than 0 (its strides), as
     * rp_tensor_new holds it: (0, 2^32, 2^32) once gave strides that overflowed */
    write_npy(p, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2097152, 2097152, 0), }", 0);
    expect_fail(p, "shape (2097152, 2097152, 0) is too large (its sizes other than 0 multiply to "
                   "more than 2^40)");
    write_npy(p, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4294967296, "
                    "4294967296), }", 0);
    expect_fail(p, "shape (0, 4294967296, 4294967296) is too large (its sizes other than 0 "
                   "multiply to more than 2^40)");
    write_npy(p, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 0, 99999999999, 7), }",
              0);
    expect_fail(p, "shape (3, 0, 99999999999, 7) is too large (its sizes other than 0 multiply "
                   "to more than 2^40)");
    write_npy(p, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 0, 1048576, 349525), }",
              0);
    rp_tensor z;
    CHECK(rp_npy_load(p, &z, NULL) == RP_OK && z.ndim == 4 && rp_tensor_numel(&z) == 0 &&
              z.stride[0] == (int64_t)1048576 * 349525 && z.stride[1] == z.stride[0],
          "an empty shape whose other sizes fit: %s", rp_last_error());
    rp_tensor_release(&z);
    write_npy(p, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 20);
    expect_fail(p, "truncated (the data of shape (2, 3) '<f4' needs 24 bytes, the file has 20)");
    write_npy(p, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", 47);
    expect_fail(p, "truncated (the data of shape (2, 3) '<f8' needs 48 bytes, the file has 47)");
    write_npy(p, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 28);
    expect_fail(p, "4 bytes after the data of shape (2, 3) '<f4' (trailing data)");
    write_npy(p, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 0);
    expect_fail(p, "truncated (the data of shape () '<f4' needs 4 bytes, the file has 0)");
    write_npy(p, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 5), }", 4);
    expect_fail(p, "4 bytes after the data of shape (0, 5) '<f4' (trailing data)");
    /* a sparse file larger than memory: refused before allocating */
    write_npy(p, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (68719476736,), }", 0);
    if (CHECK(truncate(p, 128 + ((off_t)1 << 38)) == 0, "sparse file: %s", strerror(errno))) {
        rp_tensor t;
        rp_status st = rp_npy_load(p, &t, NULL);
        CHECK(st == RP_ERR_IO && strstr(rp_last_error(), ": the array needs 256.0 GiB, more than the "),
              "sparse 256 GiB array: \"%s\"", rp_last_error());
    }
    unlink(p);
    /* not files */
    char q[512];
    path_in(q, sizeof q, "missing.npy");
    expect_fail(q, "No such file or directory");
    expect_fail(g_dir, "not a regular file (a folder)");
    path_in(q, sizeof q, "fifo");
    if (CHECK(mkfifo(q, 0600) == 0, "mkfifo: %s", strerror(errno))) {
        expect_fail(q, "not a regular file (a FIFO)");
        unlink(q);
    }
    rp_tensor t;
    CHECK_STATUS(rp_npy_load("", &t, NULL), RP_ERR_ARG, ".npy path is empty");
    CHECK_STATUS(rp_npy_load(NULL, &t, NULL), RP_ERR_ARG, ".npy path is empty");
}

/* The header is read as the Python literal NumPy reads (ast.literal_eval), no more: keys and
 * strings with a NUL were once compared as C strings ('descr\0' was 'descr', '<f4\0junk' was
 * '<f4'), and (02, 3), a leading tab and text after the newline were taken. */
static void test_header_grammar(void)
{
    char p[512];
    path_in(p, sizeof p, "grammar.npy");
    static const struct {
        int major;
        const char *header;
        size_t len; /* 0: strlen */
        const char *msg;
    } bad[] = {
        {1, "{'descr\0': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 60,
         "bad .npy header (at byte 7: a NUL byte)"},
        {1, "{'descr': '<f4\0junk', 'fortran_order': False, 'shape': (2, 3), }", 65,
         "bad .npy header (at byte 14: a NUL byte)"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape\0xyz': (2, 3), }", 64,
         "bad .npy header (at byte 47: a NUL byte)"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (02, 3), }", 0,
         "bad .npy header (at byte 51: a size with a leading zero (Python refuses 02))"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0_1, 3), }", 0,
         "bad .npy header (at byte 51: a size with a leading zero (Python refuses 02))"},
        {1, "\t{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 0,
         "bad .npy header (at byte 0: expected '{' (the header is a dict))"},
        {1, " {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 0,
         "bad .npy header (at byte 0: expected '{' (the header is a dict))"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2_, 3), }", 0,
         "bad .npy header (at byte 53: '_' must stand between two digits)"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2__0, 3), }", 0,
         "bad .npy header (at byte 53: '_' must stand between two digits)"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0x2, 3), }", 0,
         "bad .npy header (at byte 52: expected ',' or ')' in the shape)"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (+2, 3), }", 0,
         "bad .npy header (at byte 51: expected a size or ')')"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': ((2, 3)), }", 0,
         "bad .npy header (at byte 51: expected a size or ')')"},
        {1, "{'descr': '<f4', 'fortran_order': Falsey, 'shape': (2, 3), }", 0,
         "bad .npy header (at byte 39: expected ',' or '}' in the dict)"},
        {1, "{'descr': '<f4\n', 'fortran_order': False, 'shape': (2, 3), }", 0,
         "bad .npy header (at byte 14: a line break inside a string)"},
        {1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 0,
         "bad .npy header (at byte 17: key 'descr' appears twice)"},
        {1, "{'d\x01': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 0,
         "bad .npy header (at byte 1: unknown key 'd\\x01')"},
        {1, "{u'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 0,
         "bad .npy header (at byte 1: expected a quoted string)"},
        {1, "{'descr':\v'<f4', 'fortran_order': False, 'shape': (2, 3), }", 0,
         "bad .npy header (at byte 9: expected a quoted string)"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n  ", 0,
         "bad .npy header (at byte 60: unexpected text after the dict)"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n\n", 0,
         "bad .npy header (at byte 60: unexpected text after the dict)"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } # note\n", 0,
         "bad .npy header (at byte 60: unexpected text after the dict)"},
        {3, "{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }\n", 0,
         "bad .npy header (at byte 52: expected ',' or ')' in the shape)"},
        {3, "{'descr': '<f4\xff', 'fortran_order': False, 'shape': (2, 3), }\n", 0,
         "bad .npy header (at byte 14: invalid UTF-8 in a string)"},
        {3, "{'descr': '<f4\xed\xa0\x80', 'fortran_order': False, 'shape': (2, 3), }\n", 0,
         "bad .npy header (at byte 14: invalid UTF-8 in a string)"},
        {1, "{'descr': '<f4\xe9', 'fortran_order': False, 'shape': (2, 3), }\n", 0,
         "dtype '<f4\\xe9' is not supported " READS},
        {3, "{'descr': '<f4\xc3\xa9', 'fortran_order': False, 'shape': (2, 3), }\n", 0,
         "dtype '<f4\\xc3\\xa9' is not supported " READS},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t len = bad[i].len ? bad[i].len : strlen(bad[i].header);
        write_npy_raw(p, bad[i].major, bad[i].header, len, 24);
        expect_fail(p, bad[i].msg);
    }
    /* what Python reads too: whitespace and line breaks inside the braces, a form feed, decimal
     * integers with underscores, 00, the newline written as CR LF, no newline at all */
    static const struct {
        const char *header;
        int64_t rows;
    } good[] = {
        {"{'descr': '<f4',\n 'fortran_order': False,\r\n\t'shape': (2,\f 3)}\n", 2},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1_0, 3), }   \n", 10},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (00, 3), }\t\f \r\n", 0},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (0_0, 3), }", 0},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        for (int major = 1; major <= 3; major++) {
            write_npy_raw(p, major, good[i].header, strlen(good[i].header),
                          (size_t)good[i].rows * 12);
            rp_tensor t;
            CHECK(rp_npy_load(p, &t, NULL) == RP_OK && t.ndim == 2 &&
                      t.shape[0] == good[i].rows && t.shape[1] == 3,
                  "accepted header %zu, version %d.0: %s", i, major, rp_last_error());
            rp_tensor_release(&t);
        }
    }
    unlink(p);
}

/* Truncating a good file at every length gives an error each time, never a crash. */
static void test_truncations(void)
{
    char p[512], q[512];
    path_in(p, sizeof p, "full.npy");
    path_in(q, sizeof q, "cut.npy");
    int64_t shape[2] = {3, 5};
    rp_tensor t;
    rp_tensor_new(&t, 2, shape);
    rp_tensor_fill(&t, 1.5f);
    rp_npy_save(p, &t);
    rp_tensor_release(&t);
    size_t n = 0;
    unsigned char *b = check_read_bytes(p, &n);
    int bad = 0;
    for (size_t len = 0; len < n; len++) {
        check_write_bytes(q, b, len);
        rp_tensor u;
        if (rp_npy_load(q, &u, NULL) != RP_ERR_IO || u.storage) bad++;
    }
    CHECK(bad == 0, "%d of %zu truncated files were not refused", bad, n);
    /* every single byte of the header changed: refused or read, never a crash */
    int read_ok = 0;
    for (size_t i = 0; i < 128; i++) {
        unsigned char save = b[i];
        b[i] = (unsigned char)(save ^ 0x5a);
        check_write_bytes(q, b, n);
        rp_tensor u;
        if (rp_npy_load(q, &u, NULL) == RP_OK) read_ok++;
        rp_tensor_release(&u);
        b[i] = save;
    }
    CHECK(read_ok < 128, "%d of 128 damaged headers read", read_ok);
    free(b);
    unlink(p);
    unlink(q);
}

static void test_save_errors(void)
{
    int64_t two = 2;
    rp_tensor t;
    rp_tensor_new(&t, 1, &two);
    char p[512];
    path_in(p, sizeof p, "no/such/folder/x.npy");
    CHECK(rp_npy_save(p, &t) == RP_ERR_IO && strstr(rp_last_error(), "x.npy: No such file or directory"),
          "missing folder: %s", rp_last_error());
    CHECK(rp_npy_save(g_dir, &t) == RP_ERR_IO && strstr(rp_last_error(), ": not a regular file (a folder)"),
          "a folder: %s", rp_last_error());
    CHECK_STATUS(rp_npy_save("", &t), RP_ERR_ARG, ".npy path is empty");
    rp_tensor empty;
    memset(&empty, 0, sizeof empty);
    path_in(p, sizeof p, "x.npy");
    CHECK_STATUS(rp_npy_save(p, &empty), RP_ERR_ARG, "x.npy: no tensor to save");
    CHECK_STATUS(rp_npy_save(p, NULL), RP_ERR_ARG, "x.npy: no tensor to save");
    rp_tensor_release(&t);
}

static int leftovers(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "ls -A %s", g_dir);
    FILE *f = popen(cmd, "r");
    int n = 0;
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        printf("  left behind: %s", line);
        n++;
    }
    if (f) pclose(f);
    return n;
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/rp_npy_test.XXXXXX");
    if (!mkdtemp(g_dir)) {
        printf("FATAL: mkdtemp: %s\n", strerror(errno));
        return 2;
    }
    test_numpy_files();
    test_integer_files();
    test_integer_range();
    test_save_ints();
    test_round_trips();
    test_header_text();
    test_refusals();
    test_header_grammar();
    test_truncations();
    test_save_errors();
    CHECK(leftovers() == 0, "temporary folder empty at the end");
    CHECK(rmdir(g_dir) == 0, "removed %s: %s", g_dir, strerror(errno));
    return check_summary("test_npy");
}
