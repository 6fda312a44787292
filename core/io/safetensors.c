/* safetensors files of a model's weights (core/io/safetensors.h; the format and every message:
 * docs/interop.md).
 *
 * Reading goes in stages, each complete before the next: the header length against the file and
 * the limit; the header, parsed by the strict reader of core/io/json.h; every entry (keys, dtype,
 * shape, offsets, sizes); the offsets together (sorted: they must tile the data exactly); the
 * metadata; the entries against the model; only then the data, read whole into a buffer and
 * converted into the parameters, so a failure at any stage leaves the model as it was.
 */
#include "safetensors.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "axes_plan.h"
#include "checked.h"
#include "checkpoint.h"
#include "fileio.h"
#include "json.h"
#include "model_schema.h"
#include "npy.h"
#include "sysmem.h"

#define LEN_BYTES 8u
/* The most JSON values a header may hold: far above any model's (about 10 a tensor), and a
 * bound on what a forged header can make the parser allocate (36 bytes a value). */
#define MAX_VALUES ((size_t)1 << 21)

/* Every dtype of the format, with its size; roper reads F32 and F64. */
static const struct {
    const char *name;
    size_t size;
} dtypes[] = {{"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
              {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
              {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8}};
#define NDTYPES ((int)(sizeof dtypes / sizeof dtypes[0]))
#define DT_F32 11
#define DT_F64 12

int rp_safetensors_magic(const void *b, size_t n)
{
    const uint8_t *p = b;
    if (n < LEN_BYTES + 1) return 0;
    uint64_t len = 0;
    for (int i = 0; i < 8; i++) len |= (uint64_t)p[i] << (8 * i);
    return len >= 2 && p[8] == '{';
}

static uint64_t get_le(const uint8_t *b, int n)
{
    uint64_t x = 0;
    for (int i = 0; i < n; i++) x |= (uint64_t)b[i] << (8 * i);
    return x;
}

/* "[2 x 3]" */
static const char *shape_str(char *buf, size_t n, int ndim, const int64_t *shape)
{
    return rp_shape_str(buf, n, ndim, shape);
}

/* ---- the model's positions and own tables ---------------------------------------------------- */

/* The extras (safetensors.h): what a model holds beside its parameters. */
const rp_safetensors_extra rp_safetensors_extras[RP_X_COUNT] = {
    [RP_X_FREQ] = {"roper.freq", "freq", "F64", 1, 1, "[pairs]"},
    [RP_X_ANGLES] = {"roper.angles", "angles", "F64", 2, 2, "[positions x pairs]"},
    [RP_X_POSITIONS] = {"roper.positions", "positions", "I64", 1, 2,
                     "[rows] or [rows x axes], 1 to 3 axes"},
    [RP_X_SECTIONS] = {"roper.sections", "sections", "I64", 1, 1, "[axes]"},
    [RP_X_MIX] = {"roper.mix", "mix", "F64", 2, 2, "[axes x pairs]"},
};

const char *rp_safetensors_axes_list(char *buf, size_t n)
{
    if (!n) return buf;
    buf[0] = '\0';
    for (int k = 0; k < RP_AXES_COUNT; k++)
        snprintf(buf + strlen(buf), n - strlen(buf), "%s%s", k ? ", " : "", rp_axes_names[k]);
    return buf;
}

/* the table's short name here */
static const rp_safetensors_extra *const extras = rp_safetensors_extras;

typedef struct {
    int ndim;
    int64_t shape[2];
    const void *data; /* NULL: not held */
} st_extra;

/* m's extras (the ones it holds have data). */
static void model_extras(const rp_model *m, st_extra *x)
{
    memset(x, 0, RP_X_COUNT * sizeof *x);
    const rp_rope_freq *f = rp_model_freq(m);
    if (f->theta) x[RP_X_FREQ] = (st_extra){1, {f->n_theta, 0}, f->theta};
    if (f->angles) x[RP_X_ANGLES] = (st_extra){2, {f->rows, f->n_angles}, f->angles};
    int64_t rows = 0;
    const int64_t *pos = rp_model_positions(m, &rows);
    if (!pos) return;
    int A = f->axes.n;
    x[RP_X_POSITIONS] = A ? (st_extra){2, {rows, A}, pos} : (st_extra){1, {rows, 0}, pos};
    if (A && f->axes.map == RP_AXES_SECTIONS)
        x[RP_X_SECTIONS] = (st_extra){1, {A, 0}, f->axes.sections};
    if (A && f->axes.mix) x[RP_X_MIX] = (st_extra){2, {A, f->axes.n_mix}, f->axes.mix};
}

static int64_t extra_numel(const st_extra *x)
{
    return x->ndim == 1 ? x->shape[0] : x->shape[0] * x->shape[1];
}

/* ---- writing -------------------------------------------------------------------------------- */

/* The header: the metadata, then every parameter in layout order; padded with spaces to a
 * multiple of 8 bytes. *out is malloc'ed. */
static rp_status make_header(const char *path, rp_model *m, char **out, size_t *len)
{
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    if (!f) return rp_error(RP_ERR_NOMEM, "%s: out of memory", path);
    char cfg[2048];
    size_t n = rp_model_cfg_to_json(rp_model_config(m), cfg, sizeof cfg);
    RP_ASSERT(n < sizeof cfg);
    st_extra x[RP_X_COUNT];
    model_extras(m, x);
    const rp_rope_freq *fr = rp_model_freq(m);
    fputs("{\"__metadata__\":{\"format\":\"pt\"", f);
    if (x[RP_X_POSITIONS].ndim == 2)
        fprintf(f, ",\"" RP_SAFETENSORS_AXES_KEY "\":\"%s\"", rp_axes_names[fr->axes.map]);
    fputs(",\"roper.config\":", f);
    rp_json_write_string(f, cfg, n);
    for (int k = 0; k < RP_X_COUNT; k++)
        if (x[k].data) fprintf(f, ",\"%s\":\"%s\"", extras[k].key, extras[k].key);
    fputs(",\"roper.version\":\"" RP_SAFETENSORS_VERSION "\"}", f);
    uint64_t off = 0;
    for (int i = 0; i < rp_model_num_tensors(m); i++) {
        const rp_param_info *p = rp_model_param(m, i);
        fputc(',', f);
        rp_json_write_string(f, p->name, strlen(p->name));
        fputs(":{\"dtype\":\"F32\",\"shape\":[", f);
        for (int d = 0; d < p->ndim; d++)
            fprintf(f, "%s%lld", d ? "," : "", (long long)p->shape[d]);
        uint64_t bytes = (uint64_t)p->numel * 4u;
        fprintf(f, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                (unsigned long long)(off + bytes));
        off += bytes;
    }
    for (int k = 0; k < RP_X_COUNT; k++) {
        if (!x[k].data) continue;
        uint64_t bytes = (uint64_t)extra_numel(&x[k]) * 8u;
        fprintf(f, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld", extras[k].key,
                extras[k].dtype, (long long)x[k].shape[0]);
        if (x[k].ndim == 2) fprintf(f, ",%lld", (long long)x[k].shape[1]);
        fprintf(f, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                (unsigned long long)(off + bytes));
        off += bytes;
    }
    fputc('}', f);
    fflush(f);
    while (size % 8 != 0) {
        fputc(' ', f);
        fflush(f);
    }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || !buf) {
        free(buf);
        return rp_error(RP_ERR_NOMEM, "%s: out of memory", path);
    }
    *out = buf;
    *len = size;
    return RP_OK;
}

typedef struct {
    rp_model *m;
    const char *header;
    size_t hlen;
} save_job;

static int write_safetensors(FILE *f, void *ctx)
{
    const save_job *j = ctx;
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)j->hlen >> (8 * i));
    if (fwrite(b, 1, 8, f) != 8 || fwrite(j->header, 1, j->hlen, f) != j->hlen)
        return errno ? errno : EIO;
    uint8_t *buf = malloc(65536);
    if (!buf) return ENOMEM;
    const float *data = rp_model_params(j->m)->data;
    int64_t total = rp_model_param_count(j->m), i = 0; /* the layout is the buffer, in order */
    int e = 0;
    while (i < total && !e) {
        int64_t k = total - i < 16384 ? total - i : 16384;
        for (int64_t t = 0; t < k; t++) {
            uint32_t u;
            memcpy(&u, &data[i + t], 4);
            for (int c = 0; c < 4; c++) buf[4 * t + c] = (uint8_t)(u >> (8 * c));
        }
        if (fwrite(buf, 1, (size_t)(4 * k), f) != (size_t)(4 * k)) e = errno ? errno : EIO;
        i += k;
    }
    st_extra x[RP_X_COUNT]; /* then the extras, in the header's order: 8-byte words, little-endian */
    model_extras(j->m, x);
    for (int k = 0; k < RP_X_COUNT && !e; k++) {
        const uint8_t *src = x[k].data;
        for (int64_t n = extra_numel(&x[k]), w = 0; src && w < n && !e;) {
            int64_t c = n - w < 8192 ? n - w : 8192;
            for (int64_t t = 0; t < c; t++) {
                uint64_t u;
                memcpy(&u, src + 8 * (w + t), 8);
                for (int c2 = 0; c2 < 8; c2++) buf[8 * t + c2] = (uint8_t)(u >> (8 * c2));
            }
            if (fwrite(buf, 1, (size_t)(8 * c), f) != (size_t)(8 * c)) e = errno ? errno : EIO;
            w += c;
        }
    }
    free(buf);
    return e;
}

rp_status rp_safetensors_save(const char *path, rp_model *m)
{
    if (!path || !*path) return rp_error(RP_ERR_ARG, "safetensors path is empty");
    if (!m) return rp_error(RP_ERR_ARG, "%s: no model to save", path);
    if (rp_model_cfg_check(rp_model_config(m)) != RP_OK) /* never what the reader refuses */
        return rp_error_why(RP_ERR_ARG, path, RP_BAD_MODEL_CONFIG ": {why}");
    save_job j = {m, NULL, 0};
    char *header = NULL;
    RP_TRY(make_header(path, m, &header, &j.hlen));
    j.header = header;
    rp_status st = rp_file_write_atomic(path, write_safetensors, &j);
    free(header);
    return st;
}

/* ---- reading: the file's structure ---------------------------------------------------------- */

typedef struct {
    const char *name; /* decoded, in the document's strings */
    size_t name_len;
    int dtype;        /* index into dtypes */
    int ndim;
    int64_t shape[RP_MAX_DIMS];
    int64_t numel;
    uint64_t begin, end; /* byte offsets into the data */
} st_entry;

typedef struct {
    const char *path;
    int fd;
    uint64_t size, hlen, data_size; /* data_size: the bytes after the header */
    char *header;
    rp_json_doc doc;
    st_entry *e;
    size_t n;
    size_t meta; /* the __metadata__ node or RP_JSON_NONE */
} st_file;

static void st_close(st_file *f)
{
    if (f->fd >= 0) close(f->fd);
    free(f->header);
    rp_json_free(&f->doc);
    free(f->e);
    f->fd = -1;
    f->header = NULL;
    f->e = NULL;
}

/* A name for a message: "\"layers.0.attn.qkv.weight\"" (quoted, non-printable bytes as \xNN). */
static const char *qname(char *buf, size_t n, const char *s, size_t len)
{
    return rp_json_quoted(buf, n, s, len, RP_JSON_NAME_TEXT);
}

/* RP_ERR_IO "path: bad header (tensor "w": <what>)" */
static rp_status bad_entry(const st_file *f, const st_entry *e, const char *what)
{
    char q[300];
    return rp_error(RP_ERR_IO, "%s: bad header (tensor %s: %s)", f->path,
                    qname(q, sizeof q, e->name, e->name_len), what);
}

/* "<prefix>: <the last error>" for a failed number conversion. */
static rp_status bad_number(const st_file *f, const st_entry *e, const char *prefix)
{
    char msg[300];
    snprintf(msg, sizeof msg, "%s: %s", prefix, rp_last_error());
    return bad_entry(f, e, msg);
}

/* One tensor entry (node v of the root) into e: its keys, dtype, shape and offsets. */
static rp_status read_entry(const st_file *f, size_t v, st_entry *e)
{
    const rp_json_doc *d = &f->doc;
    const rp_json_node *x = &d->nodes[v];
    e->name = d->strings + x->key;
    e->name_len = x->key_len;
    char msg[512], q[300];
    if (x->type != RP_JSON_OBJECT) {
        snprintf(msg, sizeof msg, "is %s, not an object", rp_json_type_name(x->type));
        return rp_error(RP_ERR_IO, "%s: bad header (tensor %s %s)", f->path,
                        qname(q, sizeof q, e->name, e->name_len), msg);
    }
    static const char *const keys[] = {"dtype", "shape", "data_offsets"};
    size_t at[3] = {RP_JSON_NONE, RP_JSON_NONE, RP_JSON_NONE};
    for (size_t c = x->first; c != RP_JSON_NONE; c = d->nodes[c].next) {
        int k = 0;
        while (k < 3 && !(strlen(keys[k]) == d->nodes[c].key_len &&
                          strcmp(keys[k], d->strings + d->nodes[c].key) == 0))
            k++;
        if (k == 3) {
            snprintf(msg, sizeof msg, "unknown key %s",
                     qname(q, sizeof q, d->strings + d->nodes[c].key, d->nodes[c].key_len));
            return bad_entry(f, e, msg);
        }
        at[k] = c;
    }
    for (int k = 0; k < 3; k++) {
        if (at[k] == RP_JSON_NONE) {
            snprintf(msg, sizeof msg, "no \"%s\"", keys[k]);
            return bad_entry(f, e, msg);
        }
    }
    /* dtype */
    const rp_json_node *dt = &d->nodes[at[0]];
    if (dt->type != RP_JSON_STRING) {
        snprintf(msg, sizeof msg, "dtype must be a string, got %s", rp_json_type_name(dt->type));
        return bad_entry(f, e, msg);
    }
    e->dtype = -1;
    for (int i = 0; i < NDTYPES; i++)
        if (strlen(dtypes[i].name) == dt->str_len &&
            strcmp(dtypes[i].name, d->strings + dt->str) == 0)
            e->dtype = i;
    if (e->dtype < 0) {
        snprintf(msg, sizeof msg, "unknown dtype %s", qname(q, sizeof q, d->strings + dt->str,
                                                              dt->str_len));
        return bad_entry(f, e, msg);
    }
    /* shape */
    const rp_json_node *sh = &d->nodes[at[1]];
    if (sh->type != RP_JSON_ARRAY)
        return bad_entry(f, e, "shape must be an array of integers >= 0");
    int too_many = 0;
    e->ndim = 0;
    for (size_t c = sh->first; c != RP_JSON_NONE; c = d->nodes[c].next) {
        uint64_t s = 0;
        if (d->nodes[c].type != RP_JSON_NUMBER)
            return bad_entry(f, e, "shape must be an array of integers >= 0");
        if (rp_json_u64(d, c, &s) != RP_OK) return bad_number(f, e, "shape");
        if (s > (uint64_t)INT64_MAX) {
            snprintf(msg, sizeof msg, "shape: %llu is out of range", (unsigned long long)s);
            return bad_entry(f, e, msg);
        }
        if (e->ndim < RP_MAX_DIMS) e->shape[e->ndim] = (int64_t)s;
        else too_many = 1;
        e->ndim++;
    }
    /* data_offsets */
    const rp_json_node *of = &d->nodes[at[2]];
    if (of->type != RP_JSON_ARRAY || of->count != 2 ||
        d->nodes[of->first].type != RP_JSON_NUMBER ||
        d->nodes[d->nodes[of->first].next].type != RP_JSON_NUMBER)
        return bad_entry(f, e, "data_offsets must be [begin, end]");
    if (rp_json_u64(d, of->first, &e->begin) != RP_OK ||
        rp_json_u64(d, d->nodes[of->first].next, &e->end) != RP_OK)
        return bad_number(f, e, "data_offsets");
    if (e->end < e->begin) {
        snprintf(msg, sizeof msg, "data_offsets [%llu, %llu] end before they begin",
                 (unsigned long long)e->begin, (unsigned long long)e->end);
        return bad_entry(f, e, msg);
    }
    /* sizes */
    if (too_many)
        return rp_error(RP_ERR_IO, "%s: tensor %s has %d dims, more than the %d a tensor holds",
                        f->path, qname(q, sizeof q, e->name, e->name_len), e->ndim, RP_MAX_DIMS);
    char shp[RP_SHAPE_STR_LEN];
    shape_str(shp, sizeof shp, e->ndim, e->shape);
    if (!rp_shape_span(e->ndim, e->shape, RP_MAX_NUMEL, &e->numel)) /* a tensor's limit */
        return rp_error(RP_ERR_IO, "%s: tensor %s of shape %s %s", f->path,
                        qname(q, sizeof q, e->name, e->name_len), shp,
                        rp_shape_too_large(e->ndim, e->shape));
    uint64_t need = (uint64_t)e->numel * dtypes[e->dtype].size; /* at most 2^43 */
    if (e->end - e->begin != need)
        return rp_error(RP_ERR_IO, "%s: tensor %s: data_offsets [%llu, %llu] hold %llu bytes, its "
                                   "shape %s of %s needs %llu", f->path,
                        qname(q, sizeof q, e->name, e->name_len), (unsigned long long)e->begin,
                        (unsigned long long)e->end, (unsigned long long)(e->end - e->begin), shp,
                        dtypes[e->dtype].name, (unsigned long long)need);
    if (e->end > f->data_size)
        return rp_error(RP_ERR_IO, "%s: truncated (tensor %s ends at byte %llu of the data, the "
                                   "file has %llu data bytes)", f->path,
                        qname(q, sizeof q, e->name, e->name_len), (unsigned long long)e->end,
                        (unsigned long long)f->data_size);
    return RP_OK;
}

static int by_offset(const void *a, const void *b)
{
    const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* The tensors must tile the data: sorted by offset, each starts where the previous one ended,
 * the first at 0 and the last ends at the end of the file. */
static rp_status check_tiling(const st_file *f)
{
    const st_entry **s = malloc((f->n ? f->n : 1) * sizeof *s);
    if (!s) return rp_error(RP_ERR_NOMEM, "%s: out of memory", f->path);
    for (size_t i = 0; i < f->n; i++) s[i] = &f->e[i];
    qsort(s, f->n, sizeof *s, by_offset);
    rp_status st = RP_OK;
    uint64_t at = 0;
    char q1[300], q2[300];
    for (size_t i = 0; i < f->n && st == RP_OK; i++) {
        if (s[i]->begin < at)
            st = rp_error(RP_ERR_IO, "%s: tensors %s (bytes %llu..%llu) and %s (bytes %llu..%llu) "
                                     "overlap", f->path,
                          qname(q1, sizeof q1, s[i - 1]->name, s[i - 1]->name_len),
                          (unsigned long long)s[i - 1]->begin, (unsigned long long)s[i - 1]->end,
                          qname(q2, sizeof q2, s[i]->name, s[i]->name_len),
                          (unsigned long long)s[i]->begin, (unsigned long long)s[i]->end);
        else if (s[i]->begin > at)
            st = rp_error(RP_ERR_IO, "%s: bytes %llu..%llu of the data belong to no tensor",
                          f->path, (unsigned long long)at, (unsigned long long)s[i]->begin);
        else
            at = s[i]->end;
    }
    if (st == RP_OK && at < f->data_size)
        st = rp_error(RP_ERR_IO, "%s: %llu bytes after the last tensor (trailing data)", f->path,
                      (unsigned long long)(f->data_size - at));
    free(s);
    return st;
}

/* __metadata__: an object of strings. */
static rp_status check_metadata(const st_file *f, size_t v)
{
    const rp_json_doc *d = &f->doc;
    if (d->nodes[v].type != RP_JSON_OBJECT)
        return rp_error(RP_ERR_IO, "%s: bad header (__metadata__ is %s, not an object)", f->path,
                        rp_json_type_name(d->nodes[v].type));
    for (size_t c = d->nodes[v].first; c != RP_JSON_NONE; c = d->nodes[c].next) {
        if (d->nodes[c].type != RP_JSON_STRING) {
            char q[300];
            return rp_error(RP_ERR_IO, "%s: bad header (__metadata__ %s is %s, not a string)",
                            f->path, qname(q, sizeof q, d->strings + d->nodes[c].key,
                                           d->nodes[c].key_len),
                            rp_json_type_name(d->nodes[c].type));
        }
    }
    return RP_OK;
}

/* Opens path and checks its whole structure (nothing about a model yet). On failure f is closed. */
static rp_status st_open(const char *path, st_file *f)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    f->path = path;
    f->meta = RP_JSON_NONE;
    int64_t fsize;
    RP_TRY(rp_file_open_read(path, &f->fd, &fsize));
    f->size = (uint64_t)fsize;
    rp_status st = RP_OK;
    uint8_t lenb[LEN_BYTES];
    size_t got = 0;
    int e = rp_file_read_full(f->fd, lenb, LEN_BYTES, &got);
    if (e) goto io_error;
    if (got < LEN_BYTES) {
        st = got == 0 ? rp_error(RP_ERR_IO, "%s: empty file (not a safetensors file)", path)
                      : rp_error(RP_ERR_IO, "%s: truncated (%zu bytes, shorter than the 8-byte "
                                            "header length)", path, got);
        goto fail;
    }
    if (f->size < LEN_BYTES) f->size = LEN_BYTES; /* it grew since the stat */
    /* roper's other files, named (their first bytes would read as a huge header length) */
    if (rp_checkpoint_magic(lenb, 4) || rp_npy_magic(lenb, 6)) {
        st = rp_error(RP_ERR_IO, "%s: not a safetensors file (a %s; rp.load reads it)", path,
                      rp_checkpoint_magic(lenb, 4) ? "roper checkpoint" : ".npy file");
        goto fail;
    }
    f->hlen = get_le(lenb, 8);
    if (f->hlen > f->size - LEN_BYTES) {
        st = rp_error(RP_ERR_IO, "%s: truncated (the header length says %llu bytes, %llu follow "
                                 "it)", path, (unsigned long long)f->hlen,
                      (unsigned long long)(f->size - LEN_BYTES));
        goto fail;
    }
    if (f->hlen > RP_SAFETENSORS_MAX_HEADER) {
        st = rp_error(RP_ERR_IO, "%s: header length %llu is more than the %u bytes safetensors "
                                 "allows", path, (unsigned long long)f->hlen,
                      RP_SAFETENSORS_MAX_HEADER);
        goto fail;
    }
    f->data_size = f->size - LEN_BYTES - f->hlen;
    if ((st = rp_mem_check(path, "the header", (double)f->hlen)) != RP_OK) goto fail;
    f->header = malloc((size_t)f->hlen + 1);
    if (!f->header) {
        st = rp_error(RP_ERR_NOMEM, "%s: out of memory for the header", path);
        goto fail;
    }
    e = rp_file_read_full(f->fd, f->header, (size_t)f->hlen, &got);
    if (e) goto io_error;
    if (got != f->hlen) {
        st = rp_error(RP_ERR_IO, "%s: truncated (read %zu of the header's %llu bytes)", path, got,
                      (unsigned long long)f->hlen);
        goto fail;
    }
    f->header[f->hlen] = '\0';
    if (f->hlen == 0 || f->header[0] != '{') {
        st = rp_error(RP_ERR_IO, "%s: bad header (it must start with '{')", path);
        goto fail;
    }
    if (rp_json_parse(&f->doc, f->header, (size_t)f->hlen, MAX_VALUES) != RP_OK) {
        char msg[400];
        snprintf(msg, sizeof msg, "%s", rp_last_error());
        st = rp_error(rp_last_status() == RP_ERR_NOMEM ? RP_ERR_NOMEM : RP_ERR_IO,
                      "%s: bad header (%s)", path, msg);
        goto fail;
    }
    const rp_json_node *root = &f->doc.nodes[0];
    f->e = malloc((root->count ? root->count : 1) * sizeof *f->e);
    if (!f->e) {
        st = rp_error(RP_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    for (size_t c = root->first; c != RP_JSON_NONE; c = f->doc.nodes[c].next) {
        const rp_json_node *x = &f->doc.nodes[c];
        if (x->key_len == 12 && strcmp(f->doc.strings + x->key, "__metadata__") == 0) {
            if ((st = check_metadata(f, c)) != RP_OK) goto fail;
            f->meta = c;
            continue;
        }
        memset(&f->e[f->n], 0, sizeof f->e[f->n]);
        if ((st = read_entry(f, c, &f->e[f->n])) != RP_OK) goto fail;
        f->n++;
    }
    if ((st = check_tiling(f)) != RP_OK) goto fail;
    return RP_OK;
io_error:
    st = rp_error(RP_ERR_IO, "%s: %s", path, strerror(e));
fail:
    st_close(f);
    return st;
}

/* The metadata string under key, or NULL (its length in *len). */
static const char *meta_get(const st_file *f, const char *key, size_t *len)
{
    if (f->meta == RP_JSON_NONE) return NULL;
    size_t v = rp_json_get(&f->doc, f->meta, key);
    if (v == RP_JSON_NONE) return NULL;
    *len = f->doc.nodes[v].str_len;
    return f->doc.strings + f->doc.nodes[v].str;
}

/* The roper.config of the file into *cfg: *has = 0 when there is none. A roper.config needs
 * roper.version RP_SAFETENSORS_VERSION. */
static rp_status file_config(const st_file *f, rp_model_cfg *cfg, int *has)
{
    size_t clen = 0, vlen = 0;
    const char *c = meta_get(f, "roper.config", &clen);
    const char *v = meta_get(f, "roper.version", &vlen);
    *has = c != NULL;
    if (!c) return RP_OK;
    char q[300];
    if (!v)
        return rp_error(RP_ERR_IO, "%s: the metadata has roper.config but no roper.version",
                        f->path);
    if (vlen != strlen(RP_SAFETENSORS_VERSION) || strcmp(v, RP_SAFETENSORS_VERSION) != 0)
        return rp_error(RP_ERR_IO, "%s: roper.version %s is not supported (this is version %s)",
                        f->path, qname(q, sizeof q, v, vlen), RP_SAFETENSORS_VERSION);
    if (rp_model_cfg_from_json(c, clen, cfg) != RP_OK)
        return rp_error_why(RP_ERR_IO, f->path, RP_BAD_ROPER_CONFIG);
    return RP_OK;
}

/* The extra that is map m's own table (rp_axes_maps: its option), -1 for none. */
static int map_extra(int m)
{
    for (int k = 0; rp_axes_maps[m].table && k < RP_X_COUNT; k++)
        if (strcmp(extras[k].option, rp_axes_maps[m].table) == 0) return k;
    return -1;
}

/* The extras the metadata names: e[k] the entry of extras[k] or NULL; map the positions' map. */
typedef struct {
    const st_entry *e[RP_X_COUNT];
    rp_axes_map map;
} st_named;

/* Finds the tensors the metadata names and checks what the model cannot see: each exists, is
 * named once, has its dtype and rank; roper.axes is a map's name; then the rules between the map,
 * its table and the positions (rp_axes_plan: with vector positions only, each map with its own
 * table, a table with a row per axis). */
static rp_status find_extras(const st_file *f, st_named *x)
{
    char q[RP_JSON_NAME_TEXT + 8], shp[RP_SHAPE_STR_LEN];
    x->map = RP_AXES_AXIAL;
    for (int k = 0; k < RP_X_COUNT; k++) {
        x->e[k] = NULL;
        size_t len = 0;
        const char *name = meta_get(f, extras[k].key, &len);
        if (!name) continue;
        for (size_t i = 0; i < f->n && !x->e[k]; i++)
            if (f->e[i].name_len == len && memcmp(f->e[i].name, name, len) == 0)
                x->e[k] = &f->e[i];
        const st_entry *e = x->e[k];
        const char *key = extras[k].key, *tensor = rp_json_quoted(q, sizeof q, name, len,
                                                                  RP_JSON_NAME_TEXT);
        if (!e)
            return rp_error(RP_ERR_IO, "%s: no tensor %s (the metadata's %s names it)", f->path,
                            tensor, key);
        for (int j = 0; j < k; j++)
            if (x->e[j] == e)
                return rp_error(RP_ERR_IO, "%s: the metadata's %s and %s both name tensor %s",
                                f->path, extras[j].key, key, tensor);
        if (strcmp(dtypes[e->dtype].name, extras[k].dtype) != 0)
            return rp_error(RP_ERR_IO, "%s: tensor %s (the metadata's %s) has dtype %s, not %s",
                            f->path, tensor, key, dtypes[e->dtype].name, extras[k].dtype);
        if (e->ndim < extras[k].ndim_lo || e->ndim > extras[k].ndim_hi ||
            (k == RP_X_POSITIONS && e->ndim == 2 &&
             (e->shape[1] < 1 || e->shape[1] > RP_MAX_AXES)))
            return rp_error(RP_ERR_IO, "%s: tensor %s (the metadata's %s) is %s; %s expected",
                            f->path, tensor, key, shape_str(shp, sizeof shp, e->ndim, e->shape),
                            extras[k].shape);
    }
    size_t alen = 0;
    const char *axes = meta_get(f, RP_SAFETENSORS_AXES_KEY, &alen);
    if (axes) {
        int m = 0;
        while (m < RP_AXES_COUNT && !(strlen(rp_axes_names[m]) == alen &&
                                      memcmp(rp_axes_names[m], axes, alen) == 0))
            m++;
        if (m == RP_AXES_COUNT) {
            char list[64];
            return rp_error(RP_ERR_IO, "%s: " RP_SAFETENSORS_AXES_KEY " %s is not one of %s",
                            f->path, rp_json_quoted(q, sizeof q, axes, alen, RP_JSON_NAME_TEXT),
                            rp_safetensors_axes_list(list, sizeof list));
        }
        x->map = (rp_axes_map)m;
    }
    const st_entry *p = x->e[RP_X_POSITIONS];
    /* the rules between the map, its table and the positions: core's planner, in the file's
     * wording (axes_plan.h) */
    rp_axes_given g = {.map = axes ? (int)x->map : -1, .A = p && p->ndim == 2 ? p->shape[1] : 0,
                       .pos_given = p != NULL, .axes_name = RP_SAFETENSORS_AXES_KEY,
                       .positions_name = extras[RP_X_POSITIONS].key};
    char tq[RP_AXES_COUNT][300], ts[RP_AXES_COUNT][RP_SHAPE_STR_LEN];
    for (int m = 0; m < RP_AXES_COUNT; m++) {
        int k = map_extra(m);
        if (k < 0) continue;
        const st_entry *e = x->e[k];
        g.table_name[m] = extras[k].key, g.given[m] = e != NULL;
        if (!e) continue;
        g.rows[m] = e->shape[0];
        g.tensor[m] = qname(tq[m], sizeof tq[m], e->name, e->name_len);
        g.shape[m] = shape_str(ts[m], sizeof ts[m], e->ndim, e->shape);
    }
    if (rp_axes_plan(RP_AXW_METADATA, &g) != RP_OK)
        return rp_error_why(RP_ERR_IO, f->path, "{why}");
    return RP_OK;
}

static int n_extras(const st_named *x)
{
    int n = 0;
    for (int k = 0; k < RP_X_COUNT; k++) n += x->e[k] != NULL;
    return n;
}

static int is_extra(const st_named *x, const st_entry *e)
{
    for (int k = 0; k < RP_X_COUNT; k++)
        if (x->e[k] == e) return 1;
    return 0;
}

/* The fields that give the weights their meaning (the config schema's RP_CFG_WEIGHTS rows: not
 * seq_len, max_batch, dropout, seed) must agree. */
static rp_status compare_config(const st_file *f, const rp_model_cfg *a, const rp_model_cfg *b)
{
    const char *what = "the file's roper.config has";
    for (int i = 0; i < rp_model_cfg_nkeys; i++) {
        const rp_cfg_key *k = &rp_model_cfg_keys[i];
        if (!(k->flags & RP_CFG_WEIGHTS)) continue;
        double x = rp_model_cfg_get_num(a, k), y = rp_model_cfg_get_num(b, k);
        if (x == y) continue;
        if (k->type == RP_CFG_NUM)
            return rp_error(RP_ERR_IO, "%s: %s %s %.17g, the model %.17g", f->path, what, k->name,
                            x, y);
        char vx[64], vy[64];
        const char *quote = k->type == RP_CFG_ENUM ? "\"" : "";
        return rp_error(RP_ERR_IO, "%s: %s %s %s%s%s, the model %s%s%s", f->path, what, k->name,
                        quote, rp_model_cfg_value_str(a, k, vx, sizeof vx), quote, quote,
                        rp_model_cfg_value_str(b, k, vy, sizeof vy), quote);
    }
    return RP_OK;
}

/* Every entry against m (names, dtypes, shapes; every parameter once); *where[i] receives the
 * entry of parameter i. */
static rp_status match(const st_file *f, const st_named *x, rp_model *m, const st_entry **where)
{
    int np = rp_model_num_tensors(m);
    for (int i = 0; i < np; i++) where[i] = NULL;
    char q[300], a[RP_SHAPE_STR_LEN], b[RP_SHAPE_STR_LEN];
    for (int k = 0; k < RP_X_COUNT; k++) {
        const st_entry *e = x->e[k];
        if (e && strlen(e->name) == e->name_len && rp_model_find_param(m, e->name) >= 0)
            return rp_error(RP_ERR_IO, "%s: the metadata's %s names tensor %s, a parameter of the "
                            "model", f->path, extras[k].key,
                            qname(q, sizeof q, e->name, e->name_len));
    }
    for (size_t k = 0; k < f->n; k++) {
        const st_entry *e = &f->e[k];
        if (is_extra(x, e)) continue;
        int i = strlen(e->name) == e->name_len ? rp_model_find_param(m, e->name) : -1;
        if (i < 0)
            return rp_error(RP_ERR_IO, "%s: tensor %s is not a parameter of the model", f->path,
                            qname(q, sizeof q, e->name, e->name_len));
        if (e->dtype != DT_F32 && e->dtype != DT_F64)
            return rp_error(RP_ERR_IO, "%s: tensor %s has dtype %s; roper reads F32 and F64 "
                                       "(convert with .float())", f->path,
                            qname(q, sizeof q, e->name, e->name_len), dtypes[e->dtype].name);
        const rp_param_info *p = rp_model_param(m, i);
        int same = p->ndim == e->ndim;
        for (int d = 0; same && d < p->ndim; d++) same = p->shape[d] == e->shape[d];
        if (!same)
            return rp_error(RP_ERR_IO, "%s: tensor %s is %s, the model's is %s", f->path,
                            qname(q, sizeof q, e->name, e->name_len),
                            shape_str(a, sizeof a, e->ndim, e->shape),
                            shape_str(b, sizeof b, p->ndim, p->shape));
        where[i] = e;
    }
    for (int i = 0; i < np; i++)
        if (!where[i])
            return rp_error(RP_ERR_IO, "%s: no tensor \"%s\" (the model has %d parameter tensors, "
                                       "the file %zu)", f->path, rp_model_param(m, i)->name, np,
                            f->n - (size_t)n_extras(x));
    return RP_OK;
}

/* The 8-byte little-endian words of entry e (F64 or I64) as a malloc'ed array, or NULL: from
 * data (the file's data), or read from the file when data is NULL. */
static void *words(const st_file *f, const uint8_t *data, const st_entry *e)
{
    size_t n = (size_t)(e->numel ? e->numel : 1) * 8u;
    uint64_t *w = malloc(n);
    uint8_t *buf = data ? NULL : malloc(n);
    if (w && !data) {
        size_t got = 0;
        if (!buf || lseek(f->fd, (off_t)(LEN_BYTES + f->hlen + e->begin), SEEK_SET) < 0 ||
            rp_file_read_full(f->fd, buf, (size_t)e->numel * 8u, &got) != 0 ||
            got != (size_t)e->numel * 8u) {
            free(w);
            w = NULL;
        }
    }
    const uint8_t *src = data ? data + e->begin : buf;
    if (w)
        for (int64_t i = 0; i < e->numel; i++) w[i] = get_le(src + 8 * i, 8);
    free(buf);
    return w;
}

/* Gives m the file's own tables and positions (x), checked by rp_model_set_freq and
 * rp_model_set_positions as a checkpoint's are; m NULL: checks them only, against a model of the
 * checked cfg (rp_model_cfg_check_freq, rp_model_cfg_check_positions). data: the file's data, or
 * NULL to read the tables from the file. */
static rp_status apply_extras(const st_file *f, const uint8_t *data, const st_named *x,
                              rp_model *m, const rp_model_cfg *cfg)
{
    const st_entry *th = x->e[RP_X_FREQ], *an = x->e[RP_X_ANGLES], *p = x->e[RP_X_POSITIONS];
    const st_entry *se = x->e[RP_X_SECTIONS], *mx = x->e[RP_X_MIX];
    double *theta = th ? words(f, data, th) : NULL, *angles = an ? words(f, data, an) : NULL;
    int64_t *pos = p ? words(f, data, p) : NULL, *sections = se ? words(f, data, se) : NULL;
    double *mix = mx ? words(f, data, mx) : NULL;
    rp_status st = RP_OK;
    if (m) cfg = rp_model_config(m);
    rp_rope_freq own = rp_model_cfg_freq(cfg); /* without m: the scheme set_freq would give it */
    if (theta) own.theta = theta, own.n_theta = th->numel;
    if (angles) own.angles = angles, own.rows = an->shape[0], own.n_angles = an->shape[1];
    if ((th && !theta) || (an && !angles) || (p && !pos) || (se && !sections) || (mx && !mix))
        st = rp_error(RP_ERR_NOMEM, "%s: out of memory for the positions", f->path);
    if (st == RP_OK && (th || an) &&
        (m ? rp_model_set_freq(m, theta, th ? th->numel : 0, angles, an ? an->shape[0] : 0,
                               an ? an->shape[1] : 0)
           : rp_model_cfg_check_freq(cfg, &own)) != RP_OK)
        st = rp_error_why(RP_ERR_IO, f->path, "bad frequency table: {why}");
    rp_pe_scheme sc = rp_model_cfg_scheme(cfg);
    int64_t w = sc.d_rot_q > sc.d_rot_k ? sc.d_rot_q : sc.d_rot_k;
    w = sc.d_rot_v > w ? sc.d_rot_v : w;
    w = sc.d_rot_o > w ? sc.d_rot_o : w;
    if (st == RP_OK && mx && mx->shape[1] != w / 2) { /* rp.model's rule: a pair per column */
        char q[300], shp[RP_SHAPE_STR_LEN];
        st = rp_error(RP_ERR_IO, "%s: bad positions: tensor %s (the metadata's %s) is %s; [%lld x "
                                 "%lld] expected (the positions' axes x d_rot/2)", f->path,
                      qname(q, sizeof q, mx->name, mx->name_len), extras[RP_X_MIX].key,
                      shape_str(shp, sizeof shp, mx->ndim, mx->shape), (long long)mx->shape[0],
                      (long long)(w / 2));
    }
    if (st == RP_OK && p) {
        rp_rope_axes ax;
        memset(&ax, 0, sizeof ax);
        ax.n = p->ndim == 2 ? (int)p->shape[1] : 0;
        ax.map = x->map;
        for (int a = 0; se && a < ax.n; a++) ax.sections[a] = sections[a];
        ax.mix = mix;
        ax.n_mix = mx ? mx->shape[1] : 0;
        own.axes = ax;
        if ((m ? rp_model_set_positions(m, &ax, pos, p->shape[0])
               : rp_model_cfg_check_positions(cfg, &own, pos, p->shape[0])) != RP_OK)
            st = rp_error_why(RP_ERR_IO, f->path, "bad positions: {why}");
    }
    free(theta);
    free(angles);
    free(pos);
    free(sections);
    free(mix);
    return st;
}

/* An F64 parameter's values must round to a float32 of the same kind: a finite value beyond
 * float32's range (which would become inf) is refused, named by its 1-based index: "w.st: tensor
 * "head.weight" element [2][3] is 1e+39, beyond float32's range". NaN and infinities are kept, as
 * F32's are (a model saved with allow_nonfinite loads). */
static rp_status check_f64_range(const st_file *f, const st_entry *e, const uint8_t *src)
{
    for (int64_t j = 0; j < e->numel; j++) {
        uint64_t u = get_le(src + 8 * j, 8);
        double v;
        memcpy(&v, &u, 8);
        if (!isfinite(v) || isfinite((float)v)) continue;
        int64_t idx[RP_MAX_DIMS];
        rp_unravel(e->ndim, e->shape, j, idx);
        char at[RP_MAX_DIMS * 22 + 1], q[300];
        return rp_error(RP_ERR_IO, "%s: tensor %s element %s is %.9g, beyond float32's range",
                        f->path, qname(q, sizeof q, e->name, e->name_len),
                        rp_index_str(at, sizeof at, e->ndim, idx), v);
    }
    return RP_OK;
}

/* Reads the data; gives m the file's own tables and positions when apply is set; copies the
 * parameters in (every check of the structure done: the last step). */
static rp_status read_into(st_file *f, const st_named *x, int apply, rp_model *m,
                           const st_entry **where)
{
    RP_TRY(rp_mem_check(f->path, "the data", (double)f->data_size));
    uint8_t *data = malloc(f->data_size ? (size_t)f->data_size : 1);
    if (!data) return rp_error(RP_ERR_NOMEM, "%s: out of memory for the data", f->path);
    size_t got = 0;
    int e = 0;
    if (lseek(f->fd, (off_t)(LEN_BYTES + f->hlen), SEEK_SET) < 0) e = errno ? errno : EIO;
    if (!e) e = rp_file_read_full(f->fd, data, (size_t)f->data_size, &got);
    if (e || got != f->data_size) {
        free(data);
        if (e) return rp_error(RP_ERR_IO, "%s: %s", f->path, strerror(e));
        return rp_error(RP_ERR_IO, "%s: truncated (read %zu of %llu data bytes)", f->path, got,
                        (unsigned long long)f->data_size);
    }
    rp_status st = RP_OK;
    for (int i = 0; st == RP_OK && i < rp_model_num_tensors(m); i++)
        if (where[i]->dtype == DT_F64) st = check_f64_range(f, where[i], data + where[i]->begin);
    if (st == RP_OK && apply) st = apply_extras(f, data, x, m, NULL);
    float *params = rp_model_params(m)->data;
    for (int i = 0; st == RP_OK && i < rp_model_num_tensors(m); i++) {
        const rp_param_info *p = rp_model_param(m, i);
        const st_entry *en = where[i];
        const uint8_t *src = data + en->begin;
        float *dst = params + p->offset;
        for (int64_t j = 0; j < p->numel; j++) {
            if (en->dtype == DT_F32) {
                uint32_t u = (uint32_t)get_le(src + 4 * j, 4);
                memcpy(&dst[j], &u, 4);
            } else {
                uint64_t u = get_le(src + 8 * j, 8);
                double v;
                memcpy(&v, &u, 8);
                dst[j] = (float)v; /* round to nearest, ties to even */
            }
        }
    }
    free(data);
    return st;
}

/* Matches the opened file against m and reads it in (apply: the file's positions and own tables
 * too). */
static rp_status load_into(st_file *f, const st_named *x, int apply, rp_model *m)
{
    int np = rp_model_num_tensors(m);
    const st_entry **where = malloc((size_t)np * sizeof *where);
    if (!where) return rp_error(RP_ERR_NOMEM, "%s: out of memory", f->path);
    rp_status st = match(f, x, m, where);
    if (st == RP_OK) st = read_into(f, x, apply, m, where);
    free(where);
    return st;
}

rp_status rp_safetensors_load_into(const char *path, rp_model *m)
{
    if (!path || !*path) return rp_error(RP_ERR_ARG, "safetensors path is empty");
    if (!m) return rp_error(RP_ERR_ARG, "%s: no model to load into", path);
    st_file f;
    RP_TRY(st_open(path, &f));
    rp_model_cfg cfg;
    int has = 0;
    rp_status st = file_config(&f, &cfg, &has);
    if (st == RP_OK && has && rp_model_cfg_check(&cfg) != RP_OK) /* as rp_safetensors_load */
        st = rp_error_why(RP_ERR_IO, path, RP_BAD_MODEL_CONFIG ": {why}");
    if (st == RP_OK && has) st = compare_config(&f, &cfg, rp_model_config(m));
    st_named x;
    if (st == RP_OK) st = find_extras(&f, &x);
    if (st == RP_OK) st = load_into(&f, &x, 0, m); /* the weights only: m keeps its positions */
    st_close(&f);
    return st;
}

/* What rp_safetensors_load checks before it builds the model: the file's config (*cfg) and the
 * tensors its metadata names (*x), the config checked and the parameters it needs held. */
static rp_status load_head(const st_file *f, rp_model_cfg *cfg, st_named *x)
{
    const char *path = f->path;
    int has = 0;
    RP_TRY(file_config(f, cfg, &has));
    if (!has)
        return rp_error(RP_ERR_IO, "%s: no roper.config in the metadata (not written by roper: "
                        "build the model from its config, then load the weights into it)", path);
    RP_TRY(find_extras(f, x));
    int64_t params = 0, held = 0;
    rp_status st = rp_model_memory(cfg, NULL, &params); /* checks the config, allocating nothing */
    if (st != RP_OK)
        return rp_error_why(RP_ERR_IO, path,
                            st == RP_ERR_NOMEM ? RP_CANNOT_BUILD_MODEL
                                               : RP_BAD_MODEL_CONFIG ": {why}");
    for (size_t k = 0; k < f->n; k++) /* saturating (it cannot reach 2^63: 2^21 entries of 2^40) */
        if (!is_extra(x, &f->e[k]) && !rp_add_i64(held, f->e[k].numel, &held)) held = INT64_MAX;
    if (params > held) /* a forged config cannot make the loader allocate a model for nothing */
        return rp_error(RP_ERR_IO, "%s: the config needs %lld parameters, the file holds %lld",
                        path, (long long)params, (long long)held);
    return RP_OK;
}

rp_status rp_safetensors_load(const char *path, rp_model **out)
{
    if (!path || !*path) return rp_error(RP_ERR_ARG, "safetensors path is empty");
    if (!out) return rp_error(RP_ERR_ARG, "%s: no model pointer to load into", path);
    st_file f;
    RP_TRY(st_open(path, &f));
    rp_model_cfg cfg;
    st_named x;
    rp_model *m = NULL;
    rp_status st = load_head(&f, &cfg, &x);
    if (st != RP_OK) goto done;
    m = rp_model_new(&cfg);
    if (!m) {
        st = rp_error_why(RP_ERR_IO, path, RP_CANNOT_BUILD_MODEL);
        goto done;
    }
    st = load_into(&f, &x, 1, m);
    if (st == RP_OK) {
        *out = m;
        m = NULL;
    }
done:
    rp_model_free(m);
    st_close(&f);
    return st;
}

rp_status rp_safetensors_check(const char *path)
{
    if (!path || !*path) return rp_error(RP_ERR_ARG, "safetensors path is empty");
    st_file f;
    RP_TRY(st_open(path, &f));
    rp_model_cfg cfg;
    st_named x;
    rp_status st = load_head(&f, &cfg, &x);
    if (st == RP_OK) st = apply_extras(&f, NULL, &x, NULL, &cfg);
    st_close(&f);
    return st;
}
