/* Checkpoint files (core/io/checkpoint.h; the format byte by byte: docs/checkpoint.md).
 *
 * Everything is little-endian whatever the host: integers are written byte by byte with shifts,
 * floats and doubles as their IEEE-754 bit patterns. The checksum is FNV-1a 64 over every byte
 * before it.
 *
 * Saving serialises twice through the same code: once counting bytes (the total size goes into the
 * header), once writing through rp_file_write_atomic (core/io/fileio.h: an anonymous temporary file,
 * fsync, rename over path; stale temporaries of killed saves are removed). Loading checks the first 16 bytes against the file's size (magic, version, declared
 * size, and that size against rp_mem_available()) before reading the whole file into memory,
 * then the checksum, then parses section by section (one reader each) with a bounds check on
 * every read, and builds nothing until the stored parameter count is known to agree with the
 * stored config (rp_model_memory: core's own layout pass) and to fit in the file.
 *
 * The config's fields are written and read through the config schema (model_schema.h): the
 * version a config needs is the newest row it uses, a row's version names its block and its type
 * the encoding; the stored config must pass rp_model_cfg_check, as rp.model's does, and a save
 * checks it first, so a file the reader refuses is never written.
 *
 * The optimiser's config is written and read through its rows (optim.h's rp_adam_keys): from
 * version 7 on, as one entry per row, by name (w_opt_cfg), so that every row is stored, a row's
 * place in the table does not matter, and a row added later reads as its default from the files
 * written before it; versions 1 to 6 hold the fields of OPT_V1_ORDER at fixed places
 * (r_opt_cfg_v1 reads them still).
 */
#include "checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checked.h"
#include "fileio.h"
#include "json.h" /* rp_json_printable */
#include "model_schema.h"
#include "sysmem.h"

#define CK_MAGIC "RPCK"
#define CK_HEADER 16u  /* magic, version, file size */
#define CK_POS_VERSION 5u /* the version that holds the model's positions */
#define CK_TRAILER 8u  /* checksum */
#define CK_FLAG_OPTIM 1u /* an optimiser section follows; the config rows' ck_flag bits: 2
                          * linear attention, 4 RoPE before its feature map */
#define CK_OPT_VERSION 7u /* the version whose optimiser config is one entry per row, by name */
#define CK_OPT_NAME_MAX 64u /* the longest name of an optimiser entry the reader takes, NUL
                             * included */

#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME 0x100000001b3ULL

static uint64_t fnv1a(uint64_t h, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= FNV_PRIME;
    }
    return h;
}

static void put_le(uint8_t *b, uint64_t x, int n)
{
    for (int i = 0; i < n; i++) b[i] = (uint8_t)(x >> (8 * i));
}

static uint64_t get_le(const uint8_t *b, int n)
{
    uint64_t x = 0;
    for (int i = 0; i < n; i++) x |= (uint64_t)b[i] << (8 * i);
    return x;
}

static uint64_t f64_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static double bits_f64(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* ---- writing -------------------------------------------------------------------------------- */

/* f == NULL: only count. err: the errno of the first failed write (0 while all is well). */
typedef struct {
    FILE *f;
    uint64_t size;
    uint64_t hash;
    int err;
} writer;

static void w_bytes(writer *w, const void *p, size_t n)
{
    w->size += n;
    if (!w->f || w->err) return;
    w->hash = fnv1a(w->hash, p, n);
    if (n && fwrite(p, 1, n, w->f) != n) w->err = errno ? errno : EIO;
}

static void w_uint(writer *w, uint64_t x, int n)
{
    uint8_t b[8];
    put_le(b, x, n);
    w_bytes(w, b, (size_t)n);
}

static void w_u32(writer *w, uint32_t x) { w_uint(w, x, 4); }
static void w_i32(writer *w, int32_t x) { w_uint(w, (uint32_t)x, 4); }
static void w_u64(writer *w, uint64_t x) { w_uint(w, x, 8); }
static void w_i64(writer *w, int64_t x) { w_uint(w, (uint64_t)x, 8); }
static void w_f64(writer *w, double x) { w_uint(w, f64_bits(x), 8); }

static void w_floats(writer *w, const float *x, int64_t n)
{
    if (!w->f) {
        w->size += (uint64_t)n * 4u;
        return;
    }
    uint8_t buf[4096];
    int64_t i = 0;
    while (i < n) {
        int64_t k = n - i < 1024 ? n - i : 1024;
        for (int64_t j = 0; j < k; j++) {
            uint32_t u;
            memcpy(&u, &x[i + j], 4);
            put_le(buf + 4 * j, u, 4);
        }
        w_bytes(w, buf, (size_t)(4 * k));
        i += k;
    }
}

/* The format version m needs: its config's (rp_model_cfg_version: the oldest version that holds
 * it, so that files of models an older roper can describe stay readable by it), and 3 for the
 * model's own frequency table. */
static uint32_t model_version(const rp_model *m)
{
    const rp_rope_freq *f = rp_model_freq(m);
    uint32_t v = rp_model_cfg_version(rp_model_config(m));
    if (rp_model_positions(m, NULL)) return v > CK_POS_VERSION ? v : CK_POS_VERSION;
    return (f->theta || f->angles) && v < 3 ? 3u : v;
}

/* The format version of a file of m, with an optimiser when oc is not NULL: the model's, and at
 * least CK_OPT_VERSION with an optimiser (the version that holds its config by row). */
static uint32_t file_version(const rp_model *m, const rp_adam_cfg *oc)
{
    uint32_t v = model_version(m);
    return oc && v < CK_OPT_VERSION ? CK_OPT_VERSION : v;
}

/* The config fields of format version v's block, in file order (docs/checkpoint.md), into rows;
 * returns their count. Version 1 holds its fields grouped by type (the integers, the enums, the
 * numbers, the seed) and keeps the two-valued attention and linear_rope as flag bits instead;
 * the later versions hold theirs in schema order. */
static int block_rows(uint32_t v, const rp_cfg_key **rows)
{
    static const rp_cfg_type v1_order[4] = {RP_CFG_INT, RP_CFG_ENUM, RP_CFG_NUM, RP_CFG_SEED};
    int n = 0;
    for (int pass = 0; pass < (v == 1 ? 4 : 1); pass++)
        for (int i = 0; i < rp_model_cfg_nkeys; i++) {
            const rp_cfg_key *k = &rp_model_cfg_keys[i];
            if (k->since == v && !k->ck_flag && (v != 1 || k->type == v1_order[pass]))
                rows[n++] = k;
        }
    return n;
}

/* The newest format version, from the tables that give every version: the newest of a config
 * row's since and of every value's value_since (the mode table's and the scaling table's since,
 * pe.c and rope_freq.c), and this file's own sections (3: the frequency table, 5: the
 * positions, 7: the optimiser's config by row). A new row or value of a newer version raises
 * it, with nothing here to change. */
static uint32_t newest_version(void)
{
    uint32_t v = CK_POS_VERSION > CK_OPT_VERSION ? CK_POS_VERSION : CK_OPT_VERSION;
    for (int i = 0; i < rp_model_cfg_nkeys; i++) {
        const rp_cfg_key *k = &rp_model_cfg_keys[i];
        if (k->since > v) v = k->since;
        for (int64_t x = 0; k->value_since && k->names && k->names[x]; x++)
            if (k->value_since(x) > v) v = k->value_since(x);
    }
    return v;
}

/* One config field, by its row's type: int64, int32 (enums, rotate), double or uint64. */
static void w_field(writer *w, const rp_model_cfg *c, const rp_cfg_key *k)
{
    int64_t v = rp_model_cfg_get_int(c, k);
    switch (k->type) {
    case RP_CFG_INT: w_i64(w, v); break;
    case RP_CFG_NUM: w_f64(w, rp_model_cfg_get_num(c, k)); break;
    case RP_CFG_SEED: w_u64(w, (uint64_t)v); break;
    default: w_i32(w, (int32_t)v); break;
    }
}

/* Version v's block of config fields; versions 2 and 3 hold one more int32 after their first
 * field (2: reserved, 0; 3: the kind of the model's own table), given as word. */
static void w_block(writer *w, const rp_model_cfg *c, uint32_t v, int32_t word)
{
    const rp_cfg_key *rows[RP_CFG_MAX_KEYS];
    int n = block_rows(v, rows);
    for (int i = 0; i < n; i++) {
        w_field(w, c, rows[i]);
        if (i == 0 && (v == 2 || v == 3)) w_i32(w, word);
    }
}

/* Version 5's section: the model's positions (docs/checkpoint.md): i32 axes (0: explicit 1-D
 * positions), i32 map, i64 sections[3], i64 n_mix, i64 rows, the mix matrix [axes x n_mix]
 * (doubles), the positions [rows x max(axes, 1)] (int64). rows 0: none. */
static void w_positions(writer *w, const rp_model *m)
{
    int64_t rows = 0;
    const int64_t *pos = rp_model_positions(m, &rows);
    const rp_rope_axes *ax = &rp_model_freq(m)->axes;
    int A = pos && ax->n > 0 ? ax->n : 1;
    int64_t n_mix = pos && ax->mix ? ax->n_mix : 0;
    w_i32(w, pos ? (int32_t)ax->n : 0);
    w_i32(w, pos ? (int32_t)ax->map : 0);
    for (int a = 0; a < RP_MAX_AXES; a++) w_i64(w, pos ? ax->sections[a] : 0);
    w_i64(w, n_mix);
    w_i64(w, pos ? rows : 0);
    for (int64_t i = 0; i < A * n_mix; i++) w_f64(w, ax->mix[i]);
    for (int64_t i = 0; pos && i < rows * A; i++) w_i64(w, pos[i]);
}

/* The config blocks of the versions up to version, and after version 3's block the model's own
 * frequency table, after version 4's the positions (docs/checkpoint.md). */
static void w_model_cfg(writer *w, const rp_model *m, uint32_t version)
{
    const rp_model_cfg *c = rp_model_config(m);
    const rp_rope_freq *f = rp_model_freq(m);
    for (uint32_t v = 1; v <= version; v++) {
        w_block(w, c, v, v == 3 ? (f->theta ? 1 : f->angles ? 2 : 0) : 0);
        if (v != 3) continue;
        int64_t rows = f->theta ? 1 : f->angles ? f->rows : 0;
        int64_t n = f->theta ? f->n_theta : f->angles ? f->n_angles : 0;
        w_i64(w, rows);
        w_i64(w, n);
        const double *t = f->theta ? f->theta : f->angles;
        for (int64_t i = 0; i < rows * n; i++) w_f64(w, t[i]);
    }
    if (version >= CK_POS_VERSION) w_positions(w, m);
}

/* An optimiser entry's encoding (version 7): a number as f64, an integer or an enum as i64. */
enum { CK_OPT_F64 = 0, CK_OPT_I64 = 1 };

static uint32_t opt_encoding(const rp_optim_key *k)
{
    return k->type == RP_OPT_NUM ? CK_OPT_F64 : CK_OPT_I64;
}

/* The optimiser's config (version 7, docs/checkpoint.md): u32 the number of entries, then one
 * per row of rp_adam_keys, in row order: u32 the name's length, the name, u32 the encoding
 * (opt_encoding), the value (8 bytes). */
static void w_opt_cfg(writer *w, const rp_adam_cfg *c)
{
    w_u32(w, (uint32_t)rp_adam_nkeys);
    for (int i = 0; i < rp_adam_nkeys; i++) {
        const rp_optim_key *k = &rp_adam_keys[i];
        size_t len = strlen(k->name);
        w_u32(w, (uint32_t)len);
        w_bytes(w, k->name, len);
        w_u32(w, opt_encoding(k));
        if (k->type == RP_OPT_NUM) w_f64(w, rp_adam_cfg_get(c, k));
        else w_i64(w, rp_adam_cfg_get_int(c, k));
    }
}

/* Everything after the header and before the checksum. */
static void w_body(writer *w, rp_model *m, const rp_adam_cfg *oc, const rp_adam_state *os)
{
    w_model_cfg(w, m, file_version(m, oc));
    int np = rp_model_num_tensors(m);
    const rp_model_cfg *mc = rp_model_config(m);
    uint32_t flags = oc ? CK_FLAG_OPTIM : 0u;
    for (int i = 0; i < rp_model_cfg_nkeys; i++) /* attention, linear_rope */
        if (rp_model_cfg_keys[i].ck_flag && rp_model_cfg_get_int(mc, &rp_model_cfg_keys[i]) == 1)
            flags |= (uint32_t)rp_model_cfg_keys[i].ck_flag;
    w_u32(w, flags);
    w_u32(w, (uint32_t)np);
    w_u64(w, (uint64_t)rp_model_param_count(m));
    const float *data = rp_model_params(m)->data;
    for (int i = 0; i < np; i++) {
        const rp_param_info *p = rp_model_param(m, i);
        size_t len = strlen(p->name);
        w_u32(w, (uint32_t)len);
        w_bytes(w, p->name, len);
        w_u32(w, (uint32_t)p->ndim);
        for (int d = 0; d < p->ndim; d++) w_i64(w, p->shape[d]);
        w_floats(w, data + p->offset, p->numel);
    }
    const rp_rng *r = rp_model_rng(m);
    for (int k = 0; k < 4; k++) w_u64(w, r->s[k]);
    w_f64(w, r->spare);
    w_i32(w, (int32_t)r->has_spare);
    if (oc) {
        w_opt_cfg(w, oc);
        w_i64(w, os->step);
        w_i64(w, os->n);
        w_floats(w, os->m, os->n);
        w_floats(w, os->v, os->n);
    }
}

/* The second serialisation pass, writing into f (rp_file_write_atomic's writer). */
typedef struct {
    rp_model *m;
    const rp_adam_cfg *oc;
    const rp_adam_state *os;
    uint64_t total; /* bytes, from the counting pass */
} save_job;

static int write_checkpoint(FILE *f, void *ctx)
{
    const save_job *j = ctx;
    writer w = {f, 0, FNV_OFFSET, 0};
    w_bytes(&w, CK_MAGIC, 4);
    w_u32(&w, file_version(j->m, j->oc));
    w_u64(&w, j->total);
    w_body(&w, j->m, j->oc, j->os);
    w_u64(&w, w.hash); /* the hash of everything before it (w_uint reads w.hash first) */
    if (!w.err && w.size != j->total) return EIO; /* our own bug: the two passes disagree */
    return w.err;
}

rp_status rp_checkpoint_save(const char *path, rp_model *m, const rp_adam_cfg *opt_cfg,
                             const rp_adam_state *opt_state)
{
    if (!path || !*path) return rp_error(RP_ERR_ARG, "checkpoint path is empty");
    if (!m) return rp_error(RP_ERR_ARG, "%s: no model to save", path);
    if (rp_model_cfg_check(rp_model_config(m)) != RP_OK) /* never what the reader refuses */
        return rp_error_why(RP_ERR_ARG, path, RP_BAD_MODEL_CONFIG ": {why}");
    if ((opt_cfg == NULL) != (opt_state == NULL))
        return rp_error(RP_ERR_ARG, "%s: the optimiser needs both its config and its state", path);
    if (opt_cfg) {
        rp_status st = rp_adam_cfg_check(opt_cfg);
        if (st != RP_OK) return rp_error_why(st, path, "optimiser config: {why}");
        int64_t np = rp_model_param_count(m);
        if (opt_state->n != np)
            return rp_error(RP_ERR_ARG,
                            "%s: the optimiser state has %lld floats, the model %lld parameters",
                            path, (long long)opt_state->n, (long long)np);
        if (opt_state->step < 0 || opt_state->step > RP_ADAM_MAX_STEP)
            return rp_error(RP_ERR_ARG, "%s: optimiser step must be between 0 and 2^53, got %lld",
                            path, (long long)opt_state->step);
        if (np > 0 && (!opt_state->m || !opt_state->v))
            return rp_error(RP_ERR_ARG, "%s: the optimiser state has no m or v buffer", path);
    }

    writer w = {NULL, CK_HEADER, FNV_OFFSET, 0};
    w_body(&w, m, opt_cfg, opt_state);
    save_job job = {m, opt_cfg, opt_state, w.size + CK_TRAILER};
    return rp_file_write_atomic(path, write_checkpoint, &job);
}

/* ---- reading -------------------------------------------------------------------------------- */

typedef struct {
    const uint8_t *p;
    uint64_t n, pos; /* n: end of the parsable bytes (before the checksum) */
    const char *what; /* first failure: what could not be read */
} reader;

static int r_need(reader *r, uint64_t k, const char *what)
{
    if (r->what) return 0;
    if (k > r->n - r->pos) {
        r->what = what;
        return 0;
    }
    return 1;
}

static uint64_t r_uint(reader *r, int n, const char *what)
{
    if (!r_need(r, (uint64_t)n, what)) return 0;
    uint64_t x = get_le(r->p + r->pos, n);
    r->pos += (uint64_t)n;
    return x;
}

static uint32_t r_u32(reader *r, const char *what) { return (uint32_t)r_uint(r, 4, what); }
static int32_t r_i32(reader *r, const char *what) { return (int32_t)(uint32_t)r_uint(r, 4, what); }
static uint64_t r_u64(reader *r, const char *what) { return r_uint(r, 8, what); }
static int64_t r_i64(reader *r, const char *what) { return (int64_t)r_uint(r, 8, what); }
static double r_f64(reader *r, const char *what) { return bits_f64(r_uint(r, 8, what)); }

/* Position of n floats (bounds-checked), advancing past them; NULL when they do not fit. */
static const uint8_t *r_floats(reader *r, int64_t n, const char *what)
{
    uint64_t bytes;
    if (n < 0 || !rp_mul_u64((uint64_t)n, 4u, &bytes) || bytes > r->n - r->pos) {
        if (!r->what) r->what = what;
        return NULL;
    }
    if (r->what) return NULL;
    const uint8_t *at = r->p + r->pos;
    r->pos += bytes;
    return at;
}

static void copy_floats(float *dst, const uint8_t *src, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)get_le(src + 4 * i, 4);
        memcpy(&dst[i], &u, 4);
    }
}

/* One config field, by its row's type (w_field's encoding). */
static void r_field(reader *r, rp_model_cfg *c, const rp_cfg_key *k, const char *what)
{
    switch (k->type) {
    case RP_CFG_INT: rp_model_cfg_set_int(c, k, r_i64(r, what)); break;
    case RP_CFG_NUM: rp_model_cfg_set_num(c, k, r_f64(r, what)); break;
    case RP_CFG_SEED: rp_model_cfg_set_int(c, k, (int64_t)r_u64(r, what)); break;
    default: rp_model_cfg_set_int(c, k, r_i32(r, what)); break;
    }
}

/* Version v's block of config fields (w_block's layout) into c; returns the int32 after the first
 * field of versions 2 and 3 (0 for the others). */
static int32_t r_block(reader *r, rp_model_cfg *c, uint32_t v, const char *what)
{
    const rp_cfg_key *rows[RP_CFG_MAX_KEYS];
    int n = block_rows(v, rows);
    int32_t word = 0;
    for (int i = 0; i < n; i++) {
        r_field(r, c, rows[i], what);
        if (i == 0 && (v == 2 || v == 3)) word = r_i32(r, what);
    }
    return word;
}

/* The fields of the optimiser's config in versions 1 to 6, in file order; each row's type gives
 * its encoding there (a number f64, an integer i64, an enum i32). Fixed: the rows added since
 * are in version 7's entries only. */
static const char *const OPT_V1_ORDER[] = {"lr", "beta1", "beta2", "eps", "weight_decay",
                                           "decoupled", "schedule", "clip", "warmup",
                                           "total_steps", "min_lr", "d_model"};

static void shape_str(char *buf, size_t n, int ndim, const int64_t *shape)
{
    if (ndim == 1)
        snprintf(buf, n, "(%lld)", (long long)shape[0]);
    else
        snprintf(buf, n, "(%lld x %lld)", (long long)shape[0], (long long)shape[1]);
}

/* The checks that need only the first bytes (hlen of them) and the file size n: emptiness,
 * magic, header length, version, and the size the header declares. */
static rp_status check_header(const char *path, const uint8_t *b, uint64_t hlen, uint64_t n)
{
    if (n == 0) return rp_error(RP_ERR_IO, "%s: empty file (not a roper checkpoint)", path);
    if (memcmp(b, CK_MAGIC, hlen < 4 ? (size_t)hlen : 4) != 0)
        return rp_error(RP_ERR_IO, "%s: not a roper checkpoint", path);
    if (n < CK_HEADER)
        return rp_error(RP_ERR_IO, "%s: truncated (%llu bytes, shorter than the %u-byte header)",
                        path, (unsigned long long)n, CK_HEADER);
    uint32_t version = (uint32_t)get_le(b + 4, 4);
    uint32_t newest = newest_version();
    if (version < 1 || version > newest)
        return rp_error(RP_ERR_IO, "%s: version %lu is not supported (this roper reads versions 1 to %u)", path,
                        (unsigned long)version, newest);
    uint64_t declared = get_le(b + 8, 8);
    if (declared < CK_HEADER + CK_TRAILER)
        return rp_error(RP_ERR_IO, "%s: corrupted (declared size %llu bytes is too small)", path,
                        (unsigned long long)declared);
    if (n < declared)
        return rp_error(RP_ERR_IO, "%s: truncated (%llu of %llu bytes)", path,
                        (unsigned long long)n, (unsigned long long)declared);
    if (n > declared)
        return rp_error(RP_ERR_IO, "%s: %llu bytes where the header says %llu (trailing data)",
                        path, (unsigned long long)n, (unsigned long long)declared);
    return RP_OK;
}

/* Reads path into *buf (*size bytes) after checking its header against its size, so that only
 * a file that claims to be a checkpoint of exactly its size, and that fits in memory, is read
 * into memory; then checks the checksum. RP_ERR_IO with "path: reason". */
static rp_status read_checked(const char *path, uint8_t **buf, uint64_t *size)
{
    int fd;
    int64_t fsize;
    RP_TRY(rp_file_open_read(path, &fd, &fsize)); /* never blocks; regular files only */
    uint8_t *b = NULL;
    rp_status st;
    uint64_t n = (uint64_t)fsize;
    uint8_t hdr[CK_HEADER];
    size_t hlen = 0, got = 0;
    int e = rp_file_read_full(fd, hdr, n < CK_HEADER ? (size_t)n : CK_HEADER, &hlen);
    if (e) goto io_error;
    if (hlen < CK_HEADER && hlen < n) n = hlen; /* the file shrank meanwhile */
    if ((st = check_header(path, hdr, hlen, n)) != RP_OK) goto fail;
    if (n > (uint64_t)SIZE_MAX) {
        st = rp_error(RP_ERR_IO, "%s: file too large", path);
        goto fail;
    }
    if ((st = rp_mem_check(path, "reading the file", (double)n)) != RP_OK) goto fail;
    b = malloc((size_t)n);
    if (!b) {
        st = rp_error(RP_ERR_IO, "%s: out of memory reading %llu bytes", path,
                      (unsigned long long)n);
        goto fail;
    }
    memcpy(b, hdr, CK_HEADER);
    e = rp_file_read_full(fd, b + CK_HEADER, (size_t)(n - CK_HEADER), &got);
    if (e) goto io_error;
    if (got != n - CK_HEADER) { /* the file shrank meanwhile */
        st = rp_error(RP_ERR_IO, "%s: truncated (%llu of %llu bytes)", path,
                      (unsigned long long)got + CK_HEADER, (unsigned long long)n);
        goto fail;
    }
    if (fnv1a(FNV_OFFSET, b, (size_t)(n - CK_TRAILER)) != get_le(b + n - CK_TRAILER, 8)) {
        st = rp_error(RP_ERR_IO, "%s: checksum mismatch", path);
        goto fail;
    }
    close(fd);
    *buf = b;
    *size = n;
    return RP_OK;
io_error:
    st = rp_error(RP_ERR_IO, "%s: %s", path, strerror(e));
fail:
    close(fd);
    free(b);
    return st;
}

/* ---- the sections, each checked as it is read (the checksum is already known to be right) ---- */

static rp_status past_end(const char *path, const reader *r)
{
    return rp_error(RP_ERR_IO, "%s: corrupted (%s runs past the end)", path, r->what);
}

/* What the model section says: the config (flags included), the frequency table (version 3), the
 * tensor and float counts. */
typedef struct {
    rp_model_cfg cfg;
    int32_t freq_kind;       /* 0 none, 1 theta (one row), 2 angles */
    int64_t freq_rows, freq_n, freq_cells; /* freq_cells = freq_rows * freq_n */
    const uint8_t *freq_at;  /* freq_cells little-endian doubles in the file */
    rp_rope_axes axes;       /* version 5: the positions' axes (mix NULL: see mix_at) */
    int64_t pos_rows;        /* 0: none */
    const uint8_t *mix_at;   /* axes.n x axes.n_mix doubles */
    const uint8_t *pos_at;   /* pos_rows x max(axes.n, 1) int64 */
    uint32_t flags;
    uint32_t ntensors;
    uint64_t total;
} model_head;

/* Version 5's positions section (w_positions) into h: its sizes checked against the file, the
 * values later by rp_model_set_positions (read_positions). */
static rp_status read_pos_head(const char *path, reader *r, model_head *h)
{
    const char *w = "the positions";
    rp_rope_axes *ax = &h->axes;
    ax->n = (int)r_i32(r, w);
    ax->map = (rp_axes_map)r_i32(r, w);
    for (int a = 0; a < RP_MAX_AXES; a++) ax->sections[a] = r_i64(r, w);
    ax->n_mix = r_i64(r, w);
    h->pos_rows = r_i64(r, w);
    if (r->what) return past_end(path, r);
    int64_t A = ax->n > 0 ? ax->n : 1, mix_cells = 0, pos_cells = 0;
    uint64_t mb = 0, pb = 0;
    int bad = ax->n < 0 || ax->n > RP_MAX_AXES || ax->n_mix < 0 || h->pos_rows < 0 ||
              (h->pos_rows == 0 && (ax->n || ax->n_mix)) || !rp_mul_i64(A, ax->n_mix, &mix_cells) ||
              !rp_mul_i64(A, h->pos_rows, &pos_cells) ||
              !rp_mul_u64((uint64_t)mix_cells, 8u, &mb) || !rp_mul_u64((uint64_t)pos_cells, 8u, &pb) ||
              mb > r->n - r->pos || pb > r->n - r->pos - mb;
    if (bad)
        return rp_error(RP_ERR_IO, "%s: corrupted (positions: %d axes, %lld rows, mix %lld)", path,
                        ax->n, (long long)h->pos_rows, (long long)ax->n_mix);
    h->mix_at = r->p + r->pos;
    r->pos += mb;
    h->pos_at = r->p + r->pos;
    r->pos += pb;
    return RP_OK;
}

/* The model config, the flags and the counts. The config must pass rp_model_cfg_check, the
 * stored float count must be the one core's layout gives for it (rp_model_memory, which also
 * refuses, without allocating, configs beyond 2^40 floats: a forged config cannot make the
 * reader allocate absurd sizes) and those floats must fit in what is left of the file. */
static rp_status read_model_head(const char *path, reader *r, model_head *h, uint32_t version)
{
    rp_model_cfg *mc = &h->cfg;
    *mc = rp_model_cfg_default(0); /* the fields of later versions keep their defaults */
    h->freq_kind = 0, h->freq_rows = h->freq_n = h->freq_cells = 0, h->freq_at = NULL;
    memset(&h->axes, 0, sizeof h->axes);
    h->pos_rows = 0, h->mix_at = h->pos_at = NULL; /* versions 1 to 4: no positions */
    for (uint32_t v = 1; v <= version; v++) {
        const char *w = v == 3 ? "the frequency settings" : "the model config";
        int32_t word = r_block(r, mc, v, w);
        if (v != 3) continue;
        h->freq_kind = word;
        h->freq_rows = r_i64(r, w);
        h->freq_n = r_i64(r, w);
        if (r->what) return past_end(path, r);
        int64_t rows = h->freq_rows, n = h->freq_n;
        uint64_t bytes = 0;
        int bad = h->freq_kind < 0 || h->freq_kind > 2 || rows < 0 || n < 0 ||
                  (h->freq_kind == 0) != (rows == 0 || n == 0) ||
                  (h->freq_kind == 1 && rows != 1) || !rp_mul_i64(rows, n, &h->freq_cells) ||
                  !rp_mul_u64((uint64_t)h->freq_cells, 8u, &bytes) || bytes > r->n - r->pos;
        if (bad)
            return rp_error(RP_ERR_IO, "%s: corrupted (frequency table kind %ld, %lld x %lld)",
                            path, (long)h->freq_kind, (long long)rows, (long long)n);
        h->freq_at = r->p + r->pos;
        r->pos += bytes;
    }
    if (version >= CK_POS_VERSION) RP_TRY(read_pos_head(path, r, h));
    h->flags = r_u32(r, "the flags");
    h->ntensors = r_u32(r, "the parameter count");
    h->total = r_u64(r, "the parameter count");
    if (r->what) return past_end(path, r);
    uint32_t known = CK_FLAG_OPTIM;
    for (int i = 0; i < rp_model_cfg_nkeys; i++) known |= (uint32_t)rp_model_cfg_keys[i].ck_flag;
    if (h->flags & ~known)
        return rp_error(RP_ERR_IO, "%s: corrupted (unknown flags 0x%lx)", path,
                        (unsigned long)h->flags);
    for (int i = 0; i < rp_model_cfg_nkeys; i++) /* attention, linear_rope */
        if (rp_model_cfg_keys[i].ck_flag)
            rp_model_cfg_set_int(mc, &rp_model_cfg_keys[i],
                                 (h->flags & (uint32_t)rp_model_cfg_keys[i].ck_flag) != 0);
    int64_t want = 0;
    rp_status st = rp_model_memory(mc, NULL, &want);
    if (st == RP_ERR_NOMEM) return rp_error_why(RP_ERR_IO, path, RP_CANNOT_BUILD_MODEL);
    if (st != RP_OK) return rp_error_why(RP_ERR_IO, path, RP_BAD_MODEL_CONFIG ": {why}");
    if ((uint64_t)want != h->total)
        return rp_error(RP_ERR_IO,
                        "%s: corrupted (%llu parameters stored, the stored config needs %lld)",
                        path, (unsigned long long)h->total, (long long)want);
    if (h->total > (r->n - r->pos) / 4u)
        return rp_error(RP_ERR_IO, "%s: corrupted (%llu parameters do not fit in the file)", path,
                        (unsigned long long)h->total);
    return RP_OK;
}

/* One tensor entry: its name and shape must be those of parameter i of m; copies its data. */
static rp_status read_tensor(const char *path, reader *r, rp_model *m, uint32_t i)
{
    const rp_param_info *p = rp_model_param(m, (int)i);
    uint32_t len = r_u32(r, "a tensor name");
    char name[48];
    int64_t shape[2] = {0, 0};
    if (!r->what && len >= sizeof name)
        return rp_error(RP_ERR_IO, "%s: corrupted (tensor %lu: name of %lu bytes)", path,
                        (unsigned long)i, (unsigned long)len);
    if (r_need(r, len, "a tensor name")) {
        memcpy(name, r->p + r->pos, len);
        name[len] = '\0';
        r->pos += len;
        if (memchr(name, '\0', len)) /* the format: ASCII without NUL ("w\0" is not "w") */
            return rp_error(RP_ERR_IO, "%s: corrupted (tensor %lu: a NUL byte in its name)", path,
                            (unsigned long)i);
    }
    uint32_t ndim = r_u32(r, "a tensor shape");
    if (!r->what && (ndim < 1 || ndim > 2))
        return rp_error(RP_ERR_IO, "%s: corrupted (tensor %lu: ndim %lu)", path,
                        (unsigned long)i, (unsigned long)ndim);
    for (uint32_t d = 0; d < ndim && !r->what; d++) shape[d] = r_i64(r, "a tensor shape");
    if (r->what) return past_end(path, r);
    char got[64], want[64];
    shape_str(got, sizeof got, (int)ndim, shape);
    shape_str(want, sizeof want, p->ndim, p->shape);
    if (strcmp(name, p->name) != 0 || strcmp(got, want) != 0) {
        char shown[RP_JSON_NAME_TEXT]; /* a forged name's other bytes as \xNN */
        return rp_error(RP_ERR_IO, "%s: tensor %lu is %s %s, the model expects %s %s", path,
                        (unsigned long)i, rp_json_printable(shown, sizeof shown, name, len), got,
                        p->name, want);
    }
    const uint8_t *src = r_floats(r, p->numel, "the parameter data");
    if (!src) return past_end(path, r);
    copy_floats(rp_model_params(m)->data + p->offset, src, p->numel);
    return RP_OK;
}

/* The model's own frequency table (version 3), checked by rp_model_set_freq. */
static rp_status read_freq(const char *path, const model_head *h, rp_model *m)
{
    if (!h->freq_kind) return RP_OK;
    int64_t k = h->freq_cells;
    RP_TRY(rp_mem_check(path, "the frequency table", 8.0 * (double)k));
    double *t = malloc((size_t)k * sizeof(double));
    if (!t) return rp_error(RP_ERR_IO, "%s: out of memory for the frequency table", path);
    for (int64_t i = 0; i < k; i++) t[i] = bits_f64(get_le(h->freq_at + 8 * i, 8));
    rp_status st = h->freq_kind == 1
                       ? rp_model_set_freq(m, t, h->freq_n, NULL, 0, 0)
                       : rp_model_set_freq(m, NULL, 0, t, h->freq_rows, h->freq_n);
    free(t);
    return st == RP_OK ? RP_OK : rp_error_why(RP_ERR_IO, path, "bad frequency table: {why}");
}

/* The model's positions (version 5), checked by rp_model_set_positions. */
static rp_status read_positions(const char *path, const model_head *h, rp_model *m)
{
    if (!h->pos_rows) return RP_OK;
    int64_t A = h->axes.n > 0 ? h->axes.n : 1, nm = A * h->axes.n_mix, np = A * h->pos_rows;
    RP_TRY(rp_mem_check(path, "the positions", 8.0 * (double)(nm + np)));
    double *mix = malloc((size_t)(nm ? nm : 1) * sizeof(double));
    int64_t *pos = malloc((size_t)np * sizeof(int64_t));
    rp_status st = RP_OK;
    if (!mix || !pos) {
        st = rp_error(RP_ERR_IO, "%s: out of memory for the positions", path);
    } else {
        for (int64_t i = 0; i < nm; i++) mix[i] = bits_f64(get_le(h->mix_at + 8 * i, 8));
        for (int64_t i = 0; i < np; i++) pos[i] = (int64_t)get_le(h->pos_at + 8 * i, 8);
        rp_rope_axes ax = h->axes;
        ax.mix = nm ? mix : NULL;
        if (rp_model_set_positions(m, &ax, pos, h->pos_rows) != RP_OK)
            st = rp_error_why(RP_ERR_IO, path, "bad positions: {why}");
    }
    free(mix);
    free(pos);
    return st;
}

/* The parameter table: as many tensors and floats as the model built from the config has. */
static rp_status read_params(const char *path, reader *r, const model_head *h, rp_model *m)
{
    int have_np = rp_model_num_tensors(m);
    int64_t have_total = rp_model_param_count(m);
    if ((int64_t)h->ntensors != have_np || (int64_t)h->total != have_total)
        return rp_error(RP_ERR_IO,
                        "%s: %lu tensors with %llu floats stored, the model has %d with %lld",
                        path, (unsigned long)h->ntensors, (unsigned long long)h->total, have_np,
                        (long long)have_total);
    for (uint32_t i = 0; i < h->ntensors; i++) RP_TRY(read_tensor(path, r, m, i));
    return RP_OK;
}

static rp_status read_rng(const char *path, reader *r, rp_rng *rng)
{
    memset(rng, 0, sizeof *rng);
    for (int k = 0; k < 4; k++) rng->s[k] = r_u64(r, "the RNG state");
    rng->spare = r_f64(r, "the RNG state");
    rng->has_spare = (int)r_i32(r, "the RNG state");
    if (r->what) return past_end(path, r);
    if (rng->has_spare != 0 && rng->has_spare != 1)
        return rp_error(RP_ERR_IO, "%s: corrupted (RNG has_spare %d)", path, rng->has_spare);
    /* states no generator reaches: xoshiro256** stays at all zeros (dropout would keep every
     * unit), and the spare normal is a finite number (0 when there is none) */
    if (!(rng->s[0] | rng->s[1] | rng->s[2] | rng->s[3]))
        return rp_error(RP_ERR_IO, "%s: corrupted (RNG state all zeros)", path);
    if (!isfinite(rng->spare))
        return rp_error(RP_ERR_IO, "%s: corrupted (RNG spare normal %s)", path,
                        isnan(rng->spare) ? "nan" : rng->spare > 0 ? "inf" : "-inf");
    return RP_OK;
}

/* The optimiser's config of a file of version 1 to 6 into c: the fields of OPT_V1_ORDER. */
static void r_opt_cfg_v1(reader *r, rp_adam_cfg *c)
{
    const char *w = "the optimiser config";
    for (size_t i = 0; i < sizeof OPT_V1_ORDER / sizeof OPT_V1_ORDER[0]; i++) {
        const rp_optim_key *k = rp_adam_key(OPT_V1_ORDER[i]);
        if (k->type == RP_OPT_NUM) rp_adam_cfg_set(c, k, r_f64(r, w));
        else if (k->type == RP_OPT_INT) rp_adam_cfg_set_int(c, k, r_i64(r, w));
        else rp_adam_cfg_set_int(c, k, r_i32(r, w));
    }
}

/* The optimiser's config of a file of version 7 on (w_opt_cfg) into c, over its defaults: each
 * entry must name a row of this roper's table, once, in the row's encoding, an enum's value an
 * int; a row without an entry (added after the file was written) keeps its default. */
static rp_status r_opt_cfg(const char *path, reader *r, rp_adam_cfg *c)
{
    const char *w = "the optimiser config";
    char seen[256] = {0}; /* by row index */
    RP_ASSERT(rp_adam_nkeys <= (int)sizeof seen);
    uint32_t count = r_u32(r, w);
    for (uint32_t e = 0; e < count; e++) {
        uint32_t len = r_u32(r, w);
        if (r->what) return past_end(path, r);
        if (len == 0 || len >= CK_OPT_NAME_MAX)
            return rp_error(RP_ERR_IO, "%s: corrupted (optimiser entry %lu: name of %lu bytes)",
                            path, (unsigned long)e, (unsigned long)len);
        char name[CK_OPT_NAME_MAX];
        if (!r_need(r, len, w)) return past_end(path, r);
        memcpy(name, r->p + r->pos, len);
        name[len] = '\0';
        r->pos += len;
        const rp_optim_key *k = strlen(name) == len ? rp_adam_key(name) : NULL;
        if (!k) {
            int word = strlen(name) == len;
            for (uint32_t i = 0; word && i < len; i++)
                word = (name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') ||
                       name[i] == '_';
            if (!word)
                return rp_error(RP_ERR_IO, "%s: corrupted (optimiser entry %lu: not a name)", path,
                                (unsigned long)e);
            return rp_error(RP_ERR_IO,
                            "%s: the optimiser setting %s is unknown to this roper (a newer "
                            "roper's file?)",
                            path, name);
        }
        int i = (int)(k - rp_adam_keys);
        if (seen[i])
            return rp_error(RP_ERR_IO, "%s: corrupted (optimiser setting %s twice)", path, name);
        seen[i] = 1;
        uint32_t enc = r_u32(r, w);
        uint64_t bits = r_u64(r, w);
        if (r->what) return past_end(path, r);
        if (enc != opt_encoding(k))
            return rp_error(RP_ERR_IO,
                            "%s: corrupted (optimiser setting %s: encoding %lu, not %lu)", path,
                            name, (unsigned long)enc, (unsigned long)opt_encoding(k));
        int64_t v = (int64_t)bits;
        if (k->type == RP_OPT_NUM) rp_adam_cfg_set(c, k, bits_f64(bits));
        else if (k->type == RP_OPT_INT) rp_adam_cfg_set_int(c, k, v);
        else if (v < INT32_MIN || v > INT32_MAX)
            return rp_error(RP_ERR_IO, "%s: corrupted (optimiser setting %s: %lld)", path, name,
                            (long long)v);
        else rp_adam_cfg_set_int(c, k, v);
    }
    return RP_OK;
}

/* The optimiser section of a file of the given version: its config, step and n floats of m and
 * of v for the model's total. On failure os->m and os->v may be allocated (the caller frees
 * them). */
static rp_status read_optim(const char *path, reader *r, uint32_t version, uint64_t total,
                            rp_adam_cfg *oc, rp_adam_state *os)
{
    if (version >= CK_OPT_VERSION) RP_TRY(r_opt_cfg(path, r, oc));
    else r_opt_cfg_v1(r, oc);
    os->step = r_i64(r, "the optimiser state");
    os->n = r_i64(r, "the optimiser state");
    if (r->what) return past_end(path, r);
    if (rp_adam_cfg_check(oc) != RP_OK)
        return rp_error_why(RP_ERR_IO, path, "bad optimiser config: {why}");
    if (os->n != (int64_t)total || os->step < 0 || os->step > RP_ADAM_MAX_STEP)
        return rp_error(RP_ERR_IO,
                        "%s: corrupted (optimiser state: %lld floats at step %lld for %llu "
                        "parameters; steps 0 to 2^53)",
                        path, (long long)os->n, (long long)os->step, (unsigned long long)total);
    const uint8_t *sm = r_floats(r, os->n, "the optimiser state");
    const uint8_t *sv = r_floats(r, os->n, "the optimiser state");
    if (r->what) return past_end(path, r);
    size_t bytes = (size_t)(os->n ? os->n : 1) * sizeof(float);
    RP_TRY(rp_mem_check(path, "the optimiser state", 2.0 * (double)bytes));
    os->m = malloc(bytes);
    os->v = malloc(bytes);
    if (!os->m || !os->v)
        return rp_error(RP_ERR_IO, "%s: out of memory for the optimiser state", path);
    copy_floats(os->m, sm, os->n);
    copy_floats(os->v, sv, os->n);
    return RP_OK;
}

/* Nothing may follow the last section but the checksum (already checked by read_checked). */
static rp_status read_trailer(const char *path, const reader *r)
{
    if (r->pos != r->n)
        return rp_error(RP_ERR_IO, "%s: corrupted (%llu unexpected bytes before the checksum)",
                        path, (unsigned long long)(r->n - r->pos));
    return RP_OK;
}

/* The sections in file order; out is written only when all of them are good. */
static rp_status parse(const char *path, const uint8_t *b, uint64_t n, int64_t max_batch,
                       rp_checkpoint *out)
{
    reader r = {b, n - CK_TRAILER, CK_HEADER, NULL};
    model_head h;
    rp_model *m = NULL;
    rp_rng rng;
    rp_adam_cfg oc = rp_adam_cfg_default();
    rp_adam_state os = {NULL, NULL, 0, 0};
    int has_optim = 0;
    rp_status st;

    uint32_t version = (uint32_t)get_le(b + 4, 4);
    if ((st = read_model_head(path, &r, &h, version)) != RP_OK) goto fail;
    has_optim = (h.flags & CK_FLAG_OPTIM) != 0;
    if (max_batch > 0) h.cfg.max_batch = max_batch;
    m = rp_model_new(&h.cfg);
    if (!m) {
        st = rp_error_why(RP_ERR_IO, path, RP_CANNOT_BUILD_MODEL);
        goto fail;
    }
    if ((st = read_freq(path, &h, m)) != RP_OK) goto fail;
    if ((st = read_positions(path, &h, m)) != RP_OK) goto fail;
    if ((st = read_params(path, &r, &h, m)) != RP_OK) goto fail;
    if ((st = read_rng(path, &r, &rng)) != RP_OK) goto fail;
    if (has_optim && (st = read_optim(path, &r, version, h.total, &oc, &os)) != RP_OK) goto fail;
    if ((st = read_trailer(path, &r)) != RP_OK) goto fail;

    *rp_model_rng(m) = rng;
    out->model = m;
    out->has_optim = has_optim;
    out->opt_cfg = oc;
    out->opt_state = os;
    return RP_OK;
fail:
    free(os.m);
    free(os.v);
    rp_model_free(m);
    return st;
}

rp_status rp_checkpoint_load(const char *path, rp_checkpoint *ck)
{
    return rp_checkpoint_load_batch(path, 0, ck);
}

rp_status rp_checkpoint_load_batch(const char *path, int64_t max_batch, rp_checkpoint *ck)
{
    if (!path || !*path) return rp_error(RP_ERR_ARG, "checkpoint path is empty");
    if (!ck) return rp_error(RP_ERR_ARG, "%s: no checkpoint to load into", path);
    uint8_t *b = NULL;
    uint64_t n = 0;
    RP_TRY(read_checked(path, &b, &n));
    rp_status st = parse(path, b, n, max_batch, ck);
    free(b);
    return st;
}

int rp_checkpoint_magic(const void *b, size_t n)
{
    if (n == 0) return 0;
    return memcmp(b, CK_MAGIC, n < 4 ? n : 4) == 0;
}

void rp_checkpoint_free_optim(rp_checkpoint *ck)
{
    if (!ck) return;
    free(ck->opt_state.m);
    free(ck->opt_state.v);
    ck->opt_state.m = ck->opt_state.v = NULL;
    ck->opt_state.n = ck->opt_state.step = 0;
    ck->has_optim = 0;
}
