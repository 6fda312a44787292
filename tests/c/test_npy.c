/* .npy files (core/io/npy.h): the files NumPy made (tests/fixtures/interop, README there) read bit
 * for bit and written back byte for byte, round trips of every shape kind and of strided views,
 * and every refusal with its exact message (crafted headers, truncations, sizes, special files).
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
        {"np_f32_big.npy", "big-endian data ('>f4') is not supported (save a.astype('<f4'))"},
        {"np_f64_big.npy", "big-endian data ('>f8') is not supported (save a.astype('<f8'))"},
        {"np_i64.npy", "dtype '<i8' is not supported (only float32 '<f4' and float64 '<f8')"},
        {"np_f16.npy", "dtype '<f2' is not supported (only float32 '<f4' and float64 '<f8')"},
        {"np_bool.npy", "dtype '|b1' is not supported (only float32 '<f4' and float64 '<f8')"},
        {"np_object.npy",
         "object arrays ('|O') are not supported (only float32 '<f4' and float64 '<f8')"},
        {"np_structured.npy",
         "structured arrays are not supported (only float32 '<f4' and float64 '<f8')"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        expect_fail(check_interop_fixture(path, sizeof path, refused[i].file), refused[i].msg);
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
        {"'>f4'", "big-endian data ('>f4') is not supported (save a.astype('<f4'))"},
        {"'<i4'", "dtype '<i4' is not supported (only float32 '<f4' and float64 '<f8')"},
        {"'>i4'", "dtype '>i4' is not supported (only float32 '<f4' and float64 '<f8')"},
        {"'|O'", "object arrays ('|O') are not supported (only float32 '<f4' and float64 '<f8')"},
        {"[('a', '<f4')]",
         "structured arrays are not supported (only float32 '<f4' and float64 '<f8')"},
        {"'=f4'", "dtype '=f4' is not supported (only float32 '<f4' and float64 '<f8')"},
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
         "dtype '<f4\\xe9' is not supported (only float32 '<f4' and float64 '<f8')"},
        {3, "{'descr': '<f4\xc3\xa9', 'fortran_order': False, 'shape': (2, 3), }\n", 0,
         "dtype '<f4\\xc3\\xa9' is not supported (only float32 '<f4' and float64 '<f8')"},
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
