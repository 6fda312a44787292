/* .npy files (core/io/npy.h; the format and every message: docs/interop.md).
 *
 * A file is the magic "\x93NUMPY", the version (two bytes), the header length (u16 for 1.0, u32
 * for 2.0 and 3.0, little-endian), the header (a Python dict literal: 'descr', 'fortran_order',
 * 'shape') and the raw data. Values are converted byte by byte (in the file's byte order whatever
 * the host's), floats as their IEEE-754 bit patterns, integers as two's complement.
 */
#include "npy.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checked.h"
#include "fileio.h"
#include "json.h"
#include "sysmem.h"

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_ALIGN 64              /* NumPy's ARRAY_ALIGN */
#define NPY_GROWTH_DIGITS 21      /* NumPy's GROWTH_AXIS_MAX_DIGITS */
#define CHUNK 65536               /* bytes per read while converting */

int rp_npy_magic(const void *b, size_t n)
{
    if (n == 0) return 0;
    return memcmp(b, NPY_MAGIC, n < NPY_MAGIC_LEN ? n : NPY_MAGIC_LEN) == 0;
}

/* "(2, 3)", "(3,)", "()": a shape as Python prints the tuple. */
static const char *tuple_str(char *buf, size_t n, int ndim, const int64_t *shape)
{
    size_t o = 0;
    o += (size_t)snprintf(buf + o, n - o, "(");
    for (int i = 0; i < ndim && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (o < n) snprintf(buf + o, n - o, ndim == 1 ? ",)" : ")");
    return buf;
}

/* The dtypes read: the descr without its byte order, and what each holds. */
static const struct {
    const char *name; /* "f4" */
    rp_npy_dtype dt;
    char kind; /* 'f' float, 'i' signed, 'u' unsigned integer */
    int size;  /* bytes per value */
} dtypes[] = {
    {"f4", RP_NPY_F32, 'f', 4}, {"f8", RP_NPY_F64, 'f', 8}, {"i1", RP_NPY_I8, 'i', 1},
    {"i2", RP_NPY_I16, 'i', 2}, {"i4", RP_NPY_I32, 'i', 4}, {"i8", RP_NPY_I64, 'i', 8},
    {"u1", RP_NPY_U8, 'u', 1},  {"u2", RP_NPY_U16, 'u', 2}, {"u4", RP_NPY_U32, 'u', 4},
    {"u8", RP_NPY_U64, 'u', 8},
};
#define N_DTYPES (sizeof dtypes / sizeof dtypes[0])

/* ---- writing -------------------------------------------------------------------------------- */

typedef struct {
    FILE *f;
    int err;
    rp_npy_dtype dt; /* RP_NPY_F32, RP_NPY_I32 or RP_NPY_I64 */
    uint8_t buf[CHUNK];
    size_t used;
} npy_writer;

static void w_flush(npy_writer *w)
{
    if (w->used && !w->err && fwrite(w->buf, 1, w->used, w->f) != w->used)
        w->err = errno ? errno : EIO;
    w->used = 0;
}

/* rp_run_fn: n floats at p, stride apart, little-endian into the buffer: float32 bit for bit, or
 * as int32 / int64 (every value already checked by rp_npy_first_unfit). */
static void w_run(float *p, int64_t n, int64_t stride, void *ctx)
{
    npy_writer *w = ctx;
    int size = w->dt == RP_NPY_I64 ? 8 : 4;
    for (int64_t i = 0; i < n; i++) {
        if (w->used + 8 > sizeof w->buf) w_flush(w);
        float x = p[i * stride];
        uint64_t u;
        if (w->dt == RP_NPY_F32) {
            uint32_t b;
            memcpy(&b, &x, 4);
            u = b;
        } else {
            u = (uint64_t)(int64_t)x; /* two's complement; the high bytes dropped for int32 */
        }
        for (int b = 0; b < size; b++) w->buf[w->used++] = (uint8_t)(u >> (8 * b));
    }
}

/* The integers of a written dtype: -lim .. lim - 1, lim = 2^31 or 2^63. */
static double int_limit(rp_npy_dtype dt) { return ldexp(1.0, dt == RP_NPY_I64 ? 63 : 31); }

/* 1 when x is an integer of -lim .. lim - 1 (not NaN, not infinite). */
static int fits_int(double x, double lim) { return x == floor(x) && x >= -lim && x < lim; }

typedef struct {
    double lim;
    int64_t k, bad;
} unfit_job;

/* rp_run_fn: counts the elements and remembers the first that does not fit. */
static void u_run(float *p, int64_t n, int64_t stride, void *ctx)
{
    unfit_job *j = ctx;
    for (int64_t i = 0; i < n && j->bad < 0; i++)
        if (!fits_int((double)p[i * stride], j->lim)) j->bad = j->k + i;
    j->k += n;
}

const char *rp_npy_unfit_reason(char *buf, size_t n, float value, rp_npy_dtype dtype)
{
    const char *name = dtype == RP_NPY_I64 ? "int64" : "int32";
    double x = (double)value;
    if (isnan(x)) snprintf(buf, n, "is nan, not an integer (dtype %s)", name);
    else if (!isfinite(x) || x != floor(x))
        snprintf(buf, n, "is %.9g, not an integer (dtype %s)", x, name);
    else if (dtype == RP_NPY_I64)
        snprintf(buf, n, "is %.0f, outside int64 (%lld..%lld)", x, (long long)INT64_MIN,
                 (long long)INT64_MAX);
    else
        snprintf(buf, n, "is %.0f, outside int32 (%ld..%ld)", x, (long)INT32_MIN, (long)INT32_MAX);
    return buf;
}

int64_t rp_npy_first_unfit(const rp_tensor *t, rp_npy_dtype dtype, int64_t idx[RP_MAX_DIMS])
{
    if (dtype != RP_NPY_I32 && dtype != RP_NPY_I64) return -1;
    unfit_job j = {int_limit(dtype), 0, -1};
    rp_tensor_foreach_run(t, u_run, &j);
    if (j.bad >= 0) rp_unravel(t->ndim, t->shape, j.bad, idx);
    return j.bad;
}

typedef struct {
    const rp_tensor *t;
    rp_npy_dtype dt;
    char header[512]; /* the whole preamble: magic, version, length, dict, padding, newline */
    size_t header_len;
} save_job;

/* The preamble as NumPy 1.24's np.save writes it for a C-ordered array of this shape and dtype. */
static void make_header(save_job *j)
{
    const rp_tensor *t = j->t;
    char dict[400], shape[300];
    tuple_str(shape, sizeof shape, t->ndim, t->shape);
    const char *descr = j->dt == RP_NPY_I64 ? "<i8" : j->dt == RP_NPY_I32 ? "<i4" : "<f4";
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                     descr, shape);
    size_t len = (size_t)n;
    if (t->ndim > 0) { /* spare room for the first axis to grow in place */
        char first[32];
        int digits = snprintf(first, sizeof first, "%lld", (long long)t->shape[0]);
        for (int i = digits; i < NPY_GROWTH_DIGITS; i++) dict[len++] = ' ';
        dict[len] = '\0';
    }
    size_t hlen = len + 1; /* the newline */
    size_t pad = NPY_ALIGN - ((NPY_MAGIC_LEN + 2 + 2 + hlen) % NPY_ALIGN);
    size_t total_dict = hlen + pad; /* fits in u16: at most a few hundred bytes */
    char *h = j->header;
    memcpy(h, NPY_MAGIC, NPY_MAGIC_LEN);
    h[6] = 1;
    h[7] = 0;
    h[8] = (char)(total_dict & 0xff);
    h[9] = (char)(total_dict >> 8);
    memcpy(h + 10, dict, len);
    memset(h + 10 + len, ' ', pad);
    h[10 + len + pad] = '\n';
    j->header_len = 10 + total_dict;
}

static int write_npy(FILE *f, void *ctx)
{
    const save_job *j = ctx;
    if (fwrite(j->header, 1, j->header_len, f) != j->header_len) return errno ? errno : EIO;
    npy_writer *w = malloc(sizeof *w);
    if (!w) return ENOMEM;
    w->f = f;
    w->err = 0;
    w->dt = j->dt;
    w->used = 0;
    rp_tensor_foreach_run(j->t, w_run, w);
    w_flush(w);
    int e = w->err;
    free(w);
    return e;
}

rp_status rp_npy_save_as(const char *path, const rp_tensor *t, rp_npy_dtype dtype)
{
    if (!path || !*path) return rp_error(RP_ERR_ARG, ".npy path is empty");
    if (!t || !t->storage) return rp_error(RP_ERR_ARG, "%s: no tensor to save", path);
    if (dtype != RP_NPY_F32 && dtype != RP_NPY_I32 && dtype != RP_NPY_I64)
        return rp_error(RP_ERR_ARG, "%s: cannot write dtype %d (float32, int32 and int64 are "
                                    "written)", path, (int)dtype);
    int64_t idx[RP_MAX_DIMS];
    int64_t bad = rp_npy_first_unfit(t, dtype, idx);
    if (bad >= 0) {
        char at[300], why[160];
        tuple_str(at, sizeof at, t->ndim, idx);
        rp_npy_unfit_reason(why, sizeof why, rp_tensor_data(t)[rp_tensor_index_offset(t, idx)],
                            dtype);
        return rp_error(RP_ERR_ARG, "%s: element at index %s %s", path, at, why);
    }
    save_job j;
    j.t = t;
    j.dt = dtype;
    make_header(&j);
    return rp_file_write_atomic(path, write_npy, &j);
}

rp_status rp_npy_save(const char *path, const rp_tensor *t)
{
    return rp_npy_save_as(path, t, RP_NPY_F32);
}

/* ---- the header dict ------------------------------------------------------------------------ */

/* The header is the Python dict literal NumPy writes and reads back with ast.literal_eval; this
 * reader takes the part of Python's grammar that every NumPy reads alike, for exactly the keys
 * 'descr', 'fortran_order' and 'shape', each once (docs/interop.md):
 *  - strings in '...' or "...": no prefix, no escapes, no line break and no NUL inside; in
 *    version 3.0 valid UTF-8 (1.0 and 2.0 are Latin-1: any other byte);
 *  - True and False;
 *  - the shape, a tuple of Python decimal integers: no sign, no leading zero (0, 00 and 0_0 are
 *    0), single underscores between digits; Python 2's 3L in versions 1.0 and 2.0 (NumPy filters
 *    the L out there, not in 3.0);
 *  - whitespace (space, tab, form feed, CR, LF) between the tokens inside the braces; after the
 *    closing brace spaces, tabs and form feeds, then at most one newline (NumPy's padding);
 *    nothing before the opening brace (Python refused a leading space or tab before 3.10);
 *  - no NUL byte anywhere (Python refuses one in source text).
 * Keys and strings are compared with their lengths, never as C strings. */

/* A cursor over the dict text; msg receives the first problem ("at byte 12: expected ':'"). */
typedef struct {
    const char *s;
    size_t n, pos;
    int long_ints; /* Python 2's 3L (versions 1.0 and 2.0) */
    int utf8;      /* strings must be UTF-8 (version 3.0) */
    char msg[160];
} cursor;

/* A string of the header: its bytes are s[0..len-1] of the text (not NUL-terminated). */
typedef struct {
    const char *s;
    size_t len;
} span;

static int c_fail(cursor *c, const char *what)
{
    if (!c->msg[0]) snprintf(c->msg, sizeof c->msg, "at byte %zu: %s", c->pos, what);
    return 0;
}

/* 1 when the byte at the cursor is one of set (never for the end or a NUL). */
static int c_at(cursor *c, const char *set)
{
    return c->pos < c->n && c->s[c->pos] != '\0' && strchr(set, c->s[c->pos]) != NULL;
}

static void c_ws(cursor *c)
{
    while (c_at(c, " \t\f\r\n")) c->pos++;
}

static int c_peek(cursor *c) { return c->pos < c->n ? (unsigned char)c->s[c->pos] : -1; }

static int c_digit(cursor *c) { return c_peek(c) >= '0' && c_peek(c) <= '9'; }

static int c_char(cursor *c, char ch, const char *what)
{
    c_ws(c);
    if (c_peek(c) != (unsigned char)ch) return c_fail(c, what);
    c->pos++;
    return 1;
}

/* A quoted string ('...' or "...", no escapes) into *out. */
static int c_string(cursor *c, span *out)
{
    c_ws(c);
    int q = c_peek(c);
    if (q != '\'' && q != '"') return c_fail(c, "expected a quoted string");
    size_t start = ++c->pos;
    while (c->pos < c->n && c->s[c->pos] != (char)q) {
        char ch = c->s[c->pos];
        if (ch == '\\') return c_fail(c, "escapes in strings are not supported");
        if (ch == '\n' || ch == '\r') return c_fail(c, "a line break inside a string");
        size_t k = 1;
        if (c->utf8 && (k = rp_json_utf8_len(c->s + c->pos, c->n - c->pos)) == 0)
            return c_fail(c, "invalid UTF-8 in a string");
        c->pos += k;
    }
    if (c->pos >= c->n) return c_fail(c, "unterminated string");
    out->s = c->s + start;
    out->len = c->pos - start;
    c->pos++;
    return 1;
}

static int span_is(span a, const char *b)
{
    return a.len == strlen(b) && memcmp(a.s, b, a.len) == 0;
}

/* One size: a Python decimal integer literal (see above) without a sign. */
static int c_size(cursor *c, int64_t *out)
{
    if (c_peek(c) == '-') return c_fail(c, "shape sizes must be integers >= 0");
    if (!c_digit(c)) return c_fail(c, "expected a size or ')'");
    size_t start = c->pos;
    int zero = c_peek(c) == '0';
    uint64_t v = 0;
    for (;;) {
        if (c_peek(c) == '_') {
            c->pos++;
            if (!c_digit(c)) return c_fail(c, "'_' must stand between two digits");
        } else if (!c_digit(c)) {
            break;
        }
        uint64_t d = (uint64_t)(c->s[c->pos] - '0');
        if (zero && d != 0) {
            c->pos = start;
            return c_fail(c, "a size with a leading zero (Python refuses 02)");
        }
        if (!rp_mul_u64(v, 10, &v) || !rp_add_u64(v, d, &v) || v > (uint64_t)INT64_MAX) {
            c->pos = start;
            return c_fail(c, "shape size is too large");
        }
        c->pos++;
    }
    if (c->long_ints && c_peek(c) == 'L') c->pos++;
    *out = (int64_t)v;
    return 1;
}

/* The tuple of sizes: "()", "(3,)", "(2, 3)", "(2, 3,)". */
static int c_shape(cursor *c, int *ndim, int64_t *shape, int *too_many)
{
    *ndim = 0;
    *too_many = 0;
    if (!c_char(c, '(', "expected '(' (the shape is a tuple)")) return 0;
    int commas = 0;
    size_t close;
    for (;;) {
        c_ws(c);
        if (c_peek(c) == ')') {
            close = c->pos++;
            break;
        }
        int64_t v;
        if (!c_size(c, &v)) return 0;
        if (*ndim < RP_MAX_DIMS) shape[*ndim] = v;
        else *too_many = 1;
        (*ndim)++;
        c_ws(c);
        if (c_peek(c) == ',') {
            c->pos++;
            commas++;
            continue;
        }
        if (c_peek(c) != ')') return c_fail(c, "expected ',' or ')' in the shape");
    }
    if (*ndim == 1 && commas == 0) {
        c->pos = close;
        return c_fail(c, "a shape of one size needs a comma: (n,)");
    }
    return 1;
}

/* What the header says. */
typedef struct {
    span descr;
    int descr_is_list;
    int fortran;
    int ndim, too_many_dims;
    int64_t shape[RP_MAX_DIMS];
} npy_header;

/* Python's True or False. */
static int c_bool(cursor *c, int *out)
{
    static const char *const words[] = {"False", "True"};
    for (int v = 0; v < 2; v++) {
        size_t k = strlen(words[v]);
        if (c->n - c->pos >= k && memcmp(c->s + c->pos, words[v], k) == 0) {
            c->pos += k;
            *out = v;
            return 1;
        }
    }
    return c_fail(c, "'fortran_order' must be True or False");
}

/* What may follow the dict: spaces, tabs and form feeds, then at most one newline. */
static int c_tail(cursor *c)
{
    while (c_at(c, " \t\f")) c->pos++;
    if (c->n - c->pos >= 2 && c->s[c->pos] == '\r' && c->s[c->pos + 1] == '\n') c->pos += 2;
    else if (c->pos < c->n && c->s[c->pos] == '\n') c->pos++;
    if (c->pos != c->n) return c_fail(c, "unexpected text after the dict");
    return 1;
}

/* Parses the dict into h; 0 with c->msg set when it is malformed (unknown, missing or repeated
 * keys included). A structured dtype (descr a list) stops the parse with descr_is_list set. */
static int parse_dict(cursor *c, npy_header *h)
{
    const char *nul = memchr(c->s, '\0', c->n);
    if (nul) {
        c->pos = (size_t)(nul - c->s);
        return c_fail(c, "a NUL byte");
    }
    int seen[3] = {0, 0, 0};
    static const char *const keys[] = {"descr", "fortran_order", "shape"};
    if (c_peek(c) != '{') return c_fail(c, "expected '{' (the header is a dict)");
    c->pos++;
    c_ws(c);
    while (c_peek(c) != '}') {
        span key;
        size_t kpos = c->pos;
        if (!c_string(c, &key)) return 0;
        int k = -1;
        for (int i = 0; i < 3; i++)
            if (span_is(key, keys[i])) k = i;
        char m[120], p[64];
        if (k < 0) {
            c->pos = kpos;
            snprintf(m, sizeof m, "unknown key '%s'", rp_json_printable(p, sizeof p, key.s,
                                                                         key.len));
            return c_fail(c, m);
        }
        if (seen[k]) {
            c->pos = kpos;
            snprintf(m, sizeof m, "key '%s' appears twice", keys[k]);
            return c_fail(c, m);
        }
        seen[k] = 1;
        if (!c_char(c, ':', "expected ':' after a key")) return 0;
        c_ws(c);
        if (k == 0) {
            if (c_peek(c) == '[') {
                h->descr_is_list = 1;
                return 1;
            }
            if (!c_string(c, &h->descr)) return 0;
        } else if (k == 1) {
            if (!c_bool(c, &h->fortran)) return 0;
        } else {
            if (!c_shape(c, &h->ndim, h->shape, &h->too_many_dims)) return 0;
        }
        c_ws(c);
        if (c_peek(c) == ',') {
            c->pos++;
            c_ws(c);
            continue;
        }
        if (c_peek(c) != '}') return c_fail(c, "expected ',' or '}' in the dict");
    }
    c->pos++;
    if (!c_tail(c)) return 0;
    for (int i = 0; i < 3; i++) {
        if (!seen[i]) {
            snprintf(c->msg, sizeof c->msg, "no '%s' key", keys[i]);
            return 0;
        }
    }
    return 1;
}

/* What a descr reads as: dtypes[type], in big-endian order or not. */
typedef struct {
    int type;
    int big;
} npy_type;

#define NPY_READS "only float32, float64 and integers: f4, f8, i1, i2, i4, i8, u1, u2, u4, u8 " \
                  "in either byte order"

/* The dtype problems, in the words docs/interop.md lists; RP_OK for the descrs of dtypes[]: '<'
 * or '>' and the name, for the 1-byte ones '|' too (NumPy writes '|i1'). The descr is printed
 * with its bytes outside printable ASCII as \xNN. */
static rp_status check_descr(const char *path, const npy_header *h, npy_type *ty)
{
    if (h->descr_is_list)
        return rp_error(RP_ERR_IO, "%s: structured arrays are not supported (" NPY_READS ")",
                        path);
    span d = h->descr;
    for (int i = 0; d.len == 3 && i < (int)N_DTYPES; i++) {
        if (memcmp(d.s + 1, dtypes[i].name, 2) != 0) continue;
        if (d.s[0] == '<' || d.s[0] == '>' || (d.s[0] == '|' && dtypes[i].size == 1)) {
            ty->type = i;
            ty->big = d.s[0] == '>';
            return RP_OK;
        }
    }
    char p[80];
    rp_json_printable(p, sizeof p, d.s, d.len);
    if (memchr(d.s, 'O', d.len))
        return rp_error(RP_ERR_IO, "%s: object arrays ('%s') are not supported (" NPY_READS ")",
                        path, p);
    return rp_error(RP_ERR_IO, "%s: dtype '%s' is not supported (" NPY_READS ")", path, p);
}

/* ---- reading -------------------------------------------------------------------------------- */

static uint64_t get_le(const uint8_t *b, int n)
{
    uint64_t x = 0;
    for (int i = 0; i < n; i++) x |= (uint64_t)b[i] << (8 * i);
    return x;
}

static uint64_t get_be(const uint8_t *b, int n)
{
    uint64_t x = 0;
    for (int i = 0; i < n; i++) x = x << 8 | b[i];
    return x;
}

/* One value of type ty at b into *out; 0 for an integer beyond +-RP_NPY_EXACT_INT, whose decimal
 * digits go to num (32 bytes). */
static int convert(const uint8_t *b, npy_type ty, float *out, char *num)
{
    int size = dtypes[ty.type].size;
    uint64_t u = ty.big ? get_be(b, size) : get_le(b, size);
    switch (dtypes[ty.type].kind) {
    case 'f':
        if (size == 4) {
            uint32_t w = (uint32_t)u;
            memcpy(out, &w, 4);
        } else {
            double x;
            memcpy(&x, &u, 8);
            *out = (float)x; /* round to nearest, ties to even */
        }
        return 1;
    case 'i': {
        if (size < 8 && (u >> (8 * size - 1)) & 1) u |= ~(uint64_t)0 << (8 * size); /* sign */
        int64_t v;
        memcpy(&v, &u, 8);
        if (v < -RP_NPY_EXACT_INT || v > RP_NPY_EXACT_INT) {
            snprintf(num, 32, "%lld", (long long)v);
            return 0;
        }
        *out = (float)v;
        return 1;
    }
    default:
        if (u > RP_NPY_EXACT_INT) {
            snprintf(num, 32, "%llu", (unsigned long long)u);
            return 0;
        }
        *out = (float)u;
        return 1;
    }
}

/* Reads numel values of type ty from fd into dst, converting. *bytes_read counts what arrived;
 * *bad is the index of the first integer float32 cannot hold (num its digits: see convert), or
 * -1. */
static int read_values(int fd, float *dst, int64_t numel, npy_type ty, uint64_t *bytes_read,
                       int64_t *bad, char *num)
{
    size_t item = (size_t)dtypes[ty.type].size;
    uint8_t *buf = malloc(CHUNK);
    if (!buf) return ENOMEM;
    int64_t done = 0;
    int e = 0;
    *bytes_read = 0;
    *bad = -1;
    while (done < numel && *bad < 0) {
        int64_t k = numel - done;
        if (k > (int64_t)(CHUNK / item)) k = (int64_t)(CHUNK / item);
        size_t got;
        e = rp_file_read_full(fd, buf, (size_t)k * item, &got);
        *bytes_read += got;
        if (e || got != (size_t)k * item) break;
        for (int64_t i = 0; i < k; i++) {
            if (!convert(buf + item * (size_t)i, ty, &dst[done + i], num)) {
                *bad = done + i;
                break;
            }
        }
        done += k;
    }
    free(buf);
    return e;
}

rp_status rp_npy_load(const char *path, rp_tensor *out, rp_npy_dtype *dtype)
{
    if (!path || !*path) return rp_error(RP_ERR_ARG, ".npy path is empty");
    if (!out) return rp_error(RP_ERR_ARG, "%s: no tensor to load into", path);
    memset(out, 0, sizeof *out);
    int fd;
    int64_t fsize;
    RP_TRY(rp_file_open_read(path, &fd, &fsize));
    uint64_t size = (uint64_t)fsize;
    rp_status st = RP_OK;
    char *text = NULL;
    uint8_t pre[12];
    size_t got = 0;
    int e = rp_file_read_full(fd, pre, size < 12 ? (size_t)size : 12, &got);
    if (e) goto io_error;
    if (got < 12 && got < size) size = got; /* the file shrank meanwhile */
    if (size == 0) {
        st = rp_error(RP_ERR_IO, "%s: empty file (not a .npy file)", path);
        goto done;
    }
    if (!rp_npy_magic(pre, got)) {
        st = rp_error(RP_ERR_IO, "%s: not a .npy file (no \\x93NUMPY magic)", path);
        goto done;
    }
    if (size < 10) {
        st = rp_error(RP_ERR_IO, "%s: truncated (%llu bytes, shorter than the 10-byte .npy "
                                 "preamble)", path, (unsigned long long)size);
        goto done;
    }
    int major = pre[6], minor = pre[7];
    if ((major != 1 && major != 2 && major != 3) || minor != 0) {
        st = rp_error(RP_ERR_IO, "%s: .npy format version %d.%d is not supported (1.0, 2.0 and "
                                 "3.0 are)", path, major, minor);
        goto done;
    }
    size_t lenbytes = major == 1 ? 2 : 4, start = 8 + lenbytes;
    if (size < start) {
        st = rp_error(RP_ERR_IO, "%s: truncated (%llu bytes, shorter than the %zu-byte .npy %d.0 "
                                 "preamble)", path, (unsigned long long)size, start, major);
        goto done;
    }
    uint64_t hlen = get_le(pre + 8, (int)lenbytes);
    if (start + hlen > size) {
        st = rp_error(RP_ERR_IO, "%s: truncated (the header needs %llu bytes, the file has %llu)",
                      path, (unsigned long long)(start + hlen), (unsigned long long)size);
        goto done;
    }
    if (hlen > RP_NPY_MAX_HEADER) {
        st = rp_error(RP_ERR_IO, "%s: header of %llu bytes is more than the %d this reader "
                                 "accepts", path, (unsigned long long)hlen, RP_NPY_MAX_HEADER);
        goto done;
    }
    text = malloc((size_t)hlen + 1);
    if (!text) {
        st = rp_error(RP_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    /* the preamble read may have taken bytes of the header already */
    size_t have = got - start < hlen ? got - start : (size_t)hlen;
    memcpy(text, pre + start, have);
    size_t more = 0;
    e = rp_file_read_full(fd, text + have, (size_t)hlen - have, &more);
    if (e) goto io_error;
    if (have + more != hlen) {
        st = rp_error(RP_ERR_IO, "%s: truncated (the header needs %llu bytes, the file has %llu)",
                      path, (unsigned long long)(start + hlen),
                      (unsigned long long)(start + have + more));
        goto done;
    }
    text[hlen] = '\0';
    if (got > start + hlen) { /* a tiny header: the preamble read went past it */
        if (lseek(fd, (off_t)(start + hlen), SEEK_SET) < 0) goto io_errno;
    }

    npy_header h;
    memset(&h, 0, sizeof h);
    cursor c = {text, (size_t)hlen, 0, major <= 2, major == 3, ""};
    if (!parse_dict(&c, &h)) {
        st = rp_error(RP_ERR_IO, "%s: bad .npy header (%s)", path, c.msg);
        goto done;
    }
    npy_type ty = {0, 0};
    if ((st = check_descr(path, &h, &ty)) != RP_OK) goto done;
    if (h.fortran) {
        st = rp_error(RP_ERR_IO, "%s: Fortran-order arrays are not supported (save "
                                 "np.ascontiguousarray(a))", path);
        goto done;
    }
    if (h.too_many_dims) {
        st = rp_error(RP_ERR_IO, "%s: %d dims, more than the %d a tensor holds", path, h.ndim,
                      RP_MAX_DIMS);
        goto done;
    }
    char shp[300];
    tuple_str(shp, sizeof shp, h.ndim, h.shape);
    int64_t numel; /* the rule of core/tensor/tensor.h, so that rp_tensor_new takes the shape */
    if (!rp_shape_span(h.ndim, h.shape, RP_MAX_NUMEL, &numel)) {
        st = rp_error(RP_ERR_IO, "%s: shape %s %s", path, shp,
                      rp_shape_too_large(h.ndim, h.shape));
        goto done;
    }
    char dname[8]; /* the descr as the file has it ('<f4', '|u1'): checked above */
    memcpy(dname, h.descr.s, 3);
    dname[3] = '\0';
    size_t item = (size_t)dtypes[ty.type].size;
    uint64_t need = (uint64_t)numel * item, avail = size - start - hlen; /* numel <= 2^40 */
    if (avail < need) {
        st = rp_error(RP_ERR_IO, "%s: truncated (the data of shape %s '%s' needs %llu bytes, the "
                                 "file has %llu)", path, shp, dname, (unsigned long long)need,
                      (unsigned long long)avail);
        goto done;
    }
    if (avail > need) {
        st = rp_error(RP_ERR_IO, "%s: %llu bytes after the data of shape %s '%s' (trailing data)",
                      path, (unsigned long long)(avail - need), shp, dname);
        goto done;
    }
    if ((st = rp_mem_check(path, "the array", (double)numel * 4.0)) != RP_OK) goto done;
    if (rp_tensor_new(out, h.ndim, h.shape) != RP_OK) {
        st = rp_error_why(RP_ERR_NOMEM, path, "{why}");
        goto done;
    }
    uint64_t read_bytes = 0;
    int64_t bad;
    char num[32];
    e = read_values(fd, rp_tensor_data(out), numel, ty, &read_bytes, &bad, num);
    if (e) goto io_error;
    if (bad >= 0) {
        char at[300];
        int64_t idx[RP_MAX_DIMS];
        rp_unravel(h.ndim, h.shape, bad, idx);
        tuple_str(at, sizeof at, h.ndim, idx);
        st = rp_error(RP_ERR_IO, "%s: integer %s at index %s is beyond float32's exact range "
                                 "(|x| <= 2^24 = %d)", path, num, at, RP_NPY_EXACT_INT);
        goto done;
    }
    if (read_bytes != need) {
        st = rp_error(RP_ERR_IO, "%s: truncated (the data of shape %s '%s' needs %llu bytes, the "
                                 "file has %llu)", path, shp, dname, (unsigned long long)need,
                      (unsigned long long)read_bytes);
        goto done;
    }
    if (dtype) *dtype = dtypes[ty.type].dt;
    goto done;
io_errno:
    e = errno ? errno : EIO;
io_error:
    st = rp_error(RP_ERR_IO, "%s: %s", path, strerror(e));
done:
    if (st != RP_OK) rp_tensor_release(out);
    free(text);
    close(fd);
    return st;
}
