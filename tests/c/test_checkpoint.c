/* rp_checkpoint_save / rp_checkpoint_load (core/io/checkpoint.h, format docs/checkpoint.md):
 * round trip (config, every parameter bitwise, RNG, optimiser), the header bytes, damaged files
 * (truncated, flipped bytes, wrong version, empty, trailing data, consistent-checksum forgeries),
 * bad paths, no temporary file left behind, and bit-identical resume of training.
 *
 * Offsets used below come from docs/checkpoint.md: header 16 bytes ("RPCK", u32 version, u64
 * file size), model config at 16 (vocab first), flags at 128, tensor count at 132, parameter
 * count at 136, first tensor at 144 in a version 1 file (a model without an optimiser); a file
 * with an optimiser is version 7, whose blocks of versions 2 to 6 put the flags 212 bytes
 * further (V7_SHIFT); FNV-1a 64 of everything before it in the last 8 bytes.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "rp.h"

static char g_dir[64];

static void path_in(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", g_dir, name);
}

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)len + 1);
    size_t got = fread(b, 1, (size_t)len, f);
    fclose(f);
    *n = got;
    return b;
}

static void spit(const char *path, const uint8_t *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        printf("FATAL: cannot write %s: %s\n", path, strerror(errno));
        exit(2);
    }
    if (n) fwrite(b, 1, n, f);
    fclose(f);
}

/* FNV-1a 64, written independently of the core. */
static uint64_t fnv(const uint8_t *p, size_t n)
{
    uint64_t h = 14695981039346656037ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

static void put64(uint8_t *b, uint64_t x)
{
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(x >> (8 * i));
}

static uint64_t get64(const uint8_t *b)
{
    uint64_t x = 0;
    for (int i = 0; i < 8; i++) x |= (uint64_t)b[i] << (8 * i);
    return x;
}

static void reseal(uint8_t *b, size_t n) { put64(b + n - 8, fnv(b, n - 8)); }

/* Names in the temporary folder other than the allowed ones (NULL-terminated list). */
static int stray_files(const char *const *allowed)
{
    DIR *d = opendir(g_dir);
    if (!d) return -1;
    int stray = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        int ok = 0;
        for (const char *const *a = allowed; *a; a++) ok |= !strcmp(e->d_name, *a);
        if (!ok) {
            printf("  stray file: %s\n", e->d_name);
            stray++;
        }
    }
    closedir(d);
    return stray;
}

static rp_model_cfg tiny_cfg(void)
{
    rp_model_cfg c = rp_model_cfg_default(7);
    c.d_model = 16;
    c.heads = 2;
    c.layers = 2;
    c.d_ff = 24;
    c.seq_len = 8;
    c.max_batch = 3;
    c.pe.mode = RP_PE_ROPER;
    c.dropout = 0.1; /* so that the model's RNG matters for resume */
    c.seed = 42;
    return c;
}

static int cfg_equal(const rp_model_cfg *a, const rp_model_cfg *b)
{
    return a->vocab == b->vocab && a->d_model == b->d_model && a->heads == b->heads &&
           a->layers == b->layers && a->d_ff == b->d_ff && a->seq_len == b->seq_len &&
           a->max_batch == b->max_batch && a->norm == b->norm && a->act == b->act &&
           a->pe.mode == b->pe.mode && a->pe.pairing == b->pe.pairing && a->seed == b->seed &&
           !memcmp(&a->dropout, &b->dropout, sizeof(double)) &&
           !memcmp(&a->pe.fraction_qk, &b->pe.fraction_qk, sizeof(double)) &&
           !memcmp(&a->pe.fraction_v, &b->pe.fraction_v, sizeof(double)) &&
           !memcmp(&a->pe.base, &b->pe.base, sizeof(double));
}

/* Every field of the optimiser's config, by its row (core/nn/optim.h), bit for bit. */
static int opt_cfg_equal(const rp_adam_cfg *a, const rp_adam_cfg *b)
{
    for (int i = 0; i < rp_adam_nkeys; i++) {
        const rp_optim_key *k = &rp_adam_keys[i];
        double x = rp_adam_cfg_get(a, k), y = rp_adam_cfg_get(b, k);
        if (k->type == RP_OPT_NUM ? memcmp(&x, &y, sizeof x) != 0
                                  : rp_adam_cfg_get_int(a, k) != rp_adam_cfg_get_int(b, k))
            return 0;
    }
    return 1;
}

/* docs/checkpoint.md: the blocks of versions 2 to 6 of a model without a frequency table or
 * positions (56 + 72 + 28 + 4 + 4 + 48 bytes), before the counts of a version 7 file. */
enum { V7_SHIFT = 212 };

/* The size of version 7's optimiser config: the entry count, then per row its name's length,
 * the name, the encoding and the value. */
static size_t opt_block_size(void)
{
    size_t n = 4;
    for (int i = 0; i < rp_adam_nkeys; i++) n += 4 + strlen(rp_adam_keys[i].name) + 4 + 8;
    return n;
}

static rp_adam_cfg odd_opt_cfg(void)
{
    rp_adam_cfg oc = rp_adam_cfg_default();
    oc.lr = 3e-3;
    oc.beta1 = 0.85;
    oc.beta2 = 0.995;
    oc.eps = 1e-7;
    oc.weight_decay = 0.01;
    oc.decoupled = 1;
    oc.clip = 0.75;
    oc.schedule = RP_SCHED_COSINE;
    oc.warmup = 3;
    oc.total_steps = 40;
    oc.min_lr = 1e-4;
    oc.d_model = 16;
    return oc;
}

/* ---- round trip ---------------------------------------------------------------------------- */

static void test_round_trip(void)
{
    printf("-- round trip\n");
    rp_model_cfg c = tiny_cfg();
    c.norm = RP_NORM_POST;
    c.act = RP_ACT_GELU;
    c.pe.pairing = RP_PAIR_INTERLEAVED;
    c.pe.fraction_v = 0.5;
    c.pe.base = 500.0;
    c.seed = 0xFEEDFACECAFEBEEFULL;
    rp_model *m = check_model_new(&c);
    int64_t n = rp_model_param_count(m);
    uint64_t seed = 1;
    float *p = rp_model_params(m)->data;
    for (int64_t i = 0; i < n; i++) p[i] = (float)check_rand(&seed, -2, 2);
    p[0] = -0.0f;
    p[1] = 1e-40f; /* a subnormal survives */
    rp_rng *r = rp_model_rng(m);
    for (int k = 0; k < 5; k++) rp_rng_u64(r);
    rp_rng_normal(r); /* leaves a spare */
    rp_rng rng_before = *r;

    rp_adam_cfg oc = odd_opt_cfg();
    rp_adam_state os = {malloc((size_t)n * sizeof(float)), malloc((size_t)n * sizeof(float)), n,
                        17};
    for (int64_t i = 0; i < n; i++) {
        os.m[i] = (float)check_rand(&seed, -1, 1);
        os.v[i] = (float)check_rand(&seed, 0, 1);
    }

    char path[128];
    path_in(path, sizeof path, "rt.ckpt");
    CHECK_STATUS(rp_checkpoint_save(path, m, &oc, &os), RP_OK, NULL);
    size_t len = 0;
    uint8_t *b = slurp(path, &len);
    CHECK(b && len > 16 && !memcmp(b, "RPCK", 4), "file starts with RPCK");
    CHECK(b && b[4] == 7 && b[5] == 0 && b[6] == 0 && b[7] == 0,
          "version 7 (an optimiser), little-endian");
    CHECK(b && get64(b + 8) == len, "header size %llu == file size %zu",
          b ? (unsigned long long)get64(b + 8) : 0ULL, len);
    CHECK(b && get64(b + len - 8) == fnv(b, len - 8), "trailer is FNV-1a 64 of the rest");
    CHECK(b && get64(b + 16) == 7, "vocab at offset 16");
    /* size: header + config (versions 1 to 7) + counts + tensors + rng + optimiser (its config,
     * step and n, m and v) + checksum */
    size_t want = 16 + 112 + V7_SHIFT + 16 + 44 + opt_block_size() + 16 + 8;
    for (int i = 0; i < rp_model_num_tensors(m); i++) {
        const rp_param_info *pi = rp_model_param(m, i);
        want += 4 + strlen(pi->name) + 4 + 8 * (size_t)pi->ndim + 4 * (size_t)pi->numel;
    }
    want += 2 * 4 * (size_t)n;
    CHECK(len == want, "file size %zu, docs/checkpoint.md gives %zu", len, want);
    free(b);

    rp_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    CHECK_STATUS(rp_checkpoint_load(path, &ck), RP_OK, NULL);
    if (ck.model) {
        CHECK(cfg_equal(rp_model_config(ck.model), &c), "model config restored");
        CHECK(rp_model_param_count(ck.model) == n, "parameter count");
        int same_layout = rp_model_num_tensors(ck.model) == rp_model_num_tensors(m);
        for (int i = 0; same_layout && i < rp_model_num_tensors(m); i++)
            same_layout = !strcmp(rp_model_param(ck.model, i)->name, rp_model_param(m, i)->name);
        CHECK(same_layout, "layout names");
        CHECK(!memcmp(rp_model_params(ck.model)->data, p, (size_t)n * sizeof(float)),
              "every parameter bitwise");
        rp_rng *r2 = rp_model_rng(ck.model);
        CHECK(!memcmp(r2->s, rng_before.s, sizeof r2->s) && r2->has_spare == 1 &&
                  !memcmp(&r2->spare, &rng_before.spare, sizeof(double)),
              "RNG state restored (with its spare normal)");
        CHECK(rp_rng_u64(r2) == rp_rng_u64(r), "RNG continues the same stream");
        CHECK(ck.has_optim == 1, "optimiser present");
        CHECK(opt_cfg_equal(&ck.opt_cfg, &oc), "optimiser config restored");
        CHECK(ck.opt_state.n == n && ck.opt_state.step == 17, "optimiser n %lld, step %lld",
              (long long)ck.opt_state.n, (long long)ck.opt_state.step);
        CHECK(ck.opt_state.m && !memcmp(ck.opt_state.m, os.m, (size_t)n * sizeof(float)),
              "m bitwise");
        CHECK(ck.opt_state.v && !memcmp(ck.opt_state.v, os.v, (size_t)n * sizeof(float)),
              "v bitwise");
        rp_checkpoint_free_optim(&ck);
        CHECK(!ck.opt_state.m && !ck.opt_state.v && !ck.has_optim, "free_optim clears");
        rp_checkpoint_free_optim(&ck); /* twice is harmless */
        rp_model_free(ck.model);
    }

    /* without the optimiser (version 1 as before); saving over an existing file replaces it */
    CHECK_STATUS(rp_checkpoint_save(path, m, NULL, NULL), RP_OK, NULL);
    b = slurp(path, &len);
    CHECK(b && len > 16 && b[4] == 1, "version 1 without an optimiser");
    free(b);
    memset(&ck, 0, sizeof ck);
    CHECK_STATUS(rp_checkpoint_load(path, &ck), RP_OK, NULL);
    if (ck.model) {
        CHECK(!ck.has_optim && !ck.opt_state.m && !ck.opt_state.v, "no optimiser section");
        CHECK(!memcmp(rp_model_params(ck.model)->data, p, (size_t)n * sizeof(float)),
              "parameters bitwise (no optimiser)");
        rp_checkpoint_free_optim(&ck);
        rp_model_free(ck.model);
    }

    /* argument errors at save */
    CHECK_STATUS(rp_checkpoint_save(path, m, &oc, NULL), RP_ERR_ARG, "both");
    os.n = n - 1;
    CHECK_STATUS(rp_checkpoint_save(path, m, &oc, &os), RP_ERR_ARG, "floats, the model");
    os.n = n;
    oc.beta2 = 1.5;
    CHECK_STATUS(rp_checkpoint_save(path, m, &oc, &os), RP_ERR_ARG,
                 "optimiser config: beta2 must be in [0, 1), got 1.5");

    const char *allowed[] = {"rt.ckpt", NULL};
    CHECK(stray_files(allowed) == 0, "only rt.ckpt in the folder (no temporary files)");
    unlink(path);
    free(os.m);
    free(os.v);
    rp_model_free(m);
}

/* ---- damaged files --------------------------------------------------------------------------- */

/* Loads path expecting RP_ERR_IO with message "<path>: <want>" (want_exact) or containing want;
 * ck must be left untouched. */
static int expect_io(const char *path, const char *want, int exact, const char *what)
{
    rp_checkpoint ck;
    memset(&ck, 0xA5, sizeof ck);
    rp_checkpoint before = ck;
    rp_status st = rp_checkpoint_load(path, &ck);
    char full[512];
    snprintf(full, sizeof full, "%s: %s", path, want);
    const char *msg = rp_last_error();
    int ok = st == RP_ERR_IO && (exact ? !strcmp(msg, full) : (strstr(msg, want) != NULL &&
                                                               !strncmp(msg, path, strlen(path))));
    ok = ok && !memcmp(&ck, &before, sizeof ck);
    if (st == RP_OK && ck.model) { /* should not happen; do not leak */
        rp_checkpoint_free_optim(&ck);
        rp_model_free(ck.model);
    }
    return CHECK(ok, "%s: status %s, message \"%s\", want \"%s\"%s", what, rp_status_name(st), msg,
                 full, exact ? "" : " (substring)");
}

/* The newest format version the reader must accept, from the tables that give versions,
 * independently of the reader's own loop: every config row's since, every mode's since (the
 * mode table), every scaling's since (the scaling table), the positions' section (5) and the
 * optimiser's config by row (7: docs/checkpoint.md). */
static unsigned newest_from_tables(void)
{
    unsigned v = 7;
    for (int i = 0; i < rp_model_cfg_nkeys; i++)
        if (rp_model_cfg_keys[i].since > v) v = rp_model_cfg_keys[i].since;
    for (int pe = 0; pe < (int)RP_PE_COUNT; pe++)
        if ((unsigned)rp_pe_mode_of((rp_pe)pe)->since > v) v = (unsigned)rp_pe_mode_of((rp_pe)pe)->since;
    for (int sc = 0; sc < (int)RP_SCALING_COUNT; sc++)
        if (rp_scaling_of((rp_rope_scaling)sc)->since > v)
            v = rp_scaling_of((rp_rope_scaling)sc)->since;
    return v;
}

static void test_damaged(void)
{
    printf("-- damaged files\n");
    rp_model_cfg c = tiny_cfg();
    rp_model *m = check_model_new(&c);
    int64_t n = rp_model_param_count(m);
    rp_adam_cfg oc = rp_adam_cfg_default();
    rp_adam_state os = {calloc((size_t)n, sizeof(float)), calloc((size_t)n, sizeof(float)), n, 3};
    char good[128], bad[128];
    path_in(good, sizeof good, "good.ckpt");
    path_in(bad, sizeof bad, "bad.ckpt");
    CHECK_STATUS(rp_checkpoint_save(good, m, &oc, &os), RP_OK, NULL);
    size_t len = 0;
    uint8_t *b = slurp(good, &len);
    if (!b) {
        CHECK(0, "cannot read %s", good);
        return;
    }
    uint8_t *copy = malloc(len + 16);
    char want[256], what[64];

    /* truncated: every length up to 400 bytes, and some in the middle and at the end */
    int trunc_ok = 1, trunc_n = 0;
    size_t lens[420];
    for (size_t k = 0; k <= 400 && k < len; k++) lens[trunc_n++] = k;
    size_t extra[] = {len / 3, len / 2, len - 100, len - 9, len - 8, len - 1};
    for (size_t k = 0; k < sizeof extra / sizeof extra[0]; k++) lens[trunc_n++] = extra[k];
    int before_fail = check_failed_;
    for (int k = 0; k < trunc_n; k++) {
        size_t l = lens[k];
        spit(bad, b, l);
        if (l == 0)
            snprintf(want, sizeof want, "empty file (not a roper checkpoint)");
        else if (l < 16)
            snprintf(want, sizeof want, "truncated (%zu bytes, shorter than the 16-byte header)",
                     l);
        else
            snprintf(want, sizeof want, "truncated (%zu of %zu bytes)", l, len);
        snprintf(what, sizeof what, "truncated to %zu bytes", l);
        if (!expect_io(bad, want, 1, what)) trunc_ok = 0;
    }
    CHECK(trunc_ok && check_failed_ == before_fail,
          "%d truncated copies each give RP_ERR_IO \"truncated ...\"", trunc_n);

    /* one flipped byte */
    size_t offs[] = {0, 3, 4, 7, 8, 15, 16, 20, 127, 128, 132, 136, 144, 150, 1000, len / 2,
                     len - 100, len - 9, len - 8, len - 1};
    for (size_t k = 0; k < sizeof offs / sizeof offs[0]; k++) {
        size_t o = offs[k];
        memcpy(copy, b, len);
        copy[o] ^= 0x5A;
        spit(bad, copy, len);
        snprintf(what, sizeof what, "byte %zu flipped", o);
        if (o < 4) {
            expect_io(bad, "not a roper checkpoint", 1, what);
        } else if (o < 8) {
            uint32_t v = (uint32_t)copy[4] | (uint32_t)copy[5] << 8 | (uint32_t)copy[6] << 16 |
                         (uint32_t)copy[7] << 24;
            snprintf(want, sizeof want,
                     "version %lu is not supported (this roper reads versions 1 to %u)",
                     (unsigned long)v, newest_from_tables());
            expect_io(bad, want, 1, what);
        } else if (o < 16) {
            uint64_t d = get64(copy + 8);
            if (d < len)
                snprintf(want, sizeof want, "%zu bytes where the header says %llu (trailing data)",
                         len, (unsigned long long)d);
            else
                snprintf(want, sizeof want, "truncated (%zu of %llu bytes)", len,
                         (unsigned long long)d);
            expect_io(bad, want, 1, what);
        } else {
            expect_io(bad, "checksum mismatch", 1, what);
        }
    }

    /* wrong version (the newest + 1, 8 today), with a valid checksum too: the version is checked
     * first; the newest the reader accepts is the newest of the tables (docs/checkpoint.md: 7) */
    unsigned newest = newest_from_tables();
    CHECK(newest == 7, "the tables' newest version %u, docs/checkpoint.md's 7", newest);
    memcpy(copy, b, len);
    copy[4] = (unsigned char)(newest + 1);
    spit(bad, copy, len);
    snprintf(want, sizeof want, "version %u is not supported (this roper reads versions 1 to %u)",
             newest + 1, newest);
    expect_io(bad, want, 1, "the newest version + 1");
    reseal(copy, len);
    spit(bad, copy, len);
    expect_io(bad, want, 1, "the newest version + 1, resealed");

    /* not a checkpoint at all, and an empty file */
    spit(bad, (const uint8_t *)"hello, world\n", 13);
    expect_io(bad, "not a roper checkpoint", 1, "text file");
    spit(bad, b, 0);
    expect_io(bad, "empty file (not a roper checkpoint)", 1, "empty file");

    /* trailing data */
    memcpy(copy, b, len);
    memset(copy + len, 0, 16);
    spit(bad, copy, len + 16);
    snprintf(want, sizeof want, "%zu bytes where the header says %zu (trailing data)", len + 16,
             len);
    expect_io(bad, want, 1, "16 bytes appended");

    /* forgeries with a valid checksum: the parser's own checks */
    memcpy(copy, b, len);
    put64(copy + 16, (uint64_t)0x7FFFFFFF); /* vocab 2^31-1: ~275 GB of parameters */
    reseal(copy, len);
    spit(bad, copy, len);
    expect_io(bad, "parameters stored, the stored config needs", 0, "huge vocab");
    memcpy(copy, b, len);
    {   /* huge vocab with a parameter count to match: must not allocate it */
        uint64_t V = 0x7FFFFFFF, C = 16, F = 24, L = 2;
        uint64_t per = 2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + F * C + F + C * F + C;
        put64(copy + 16, V);
        put64(copy + 136 + V7_SHIFT, V * C + L * per + 2 * C + V * C + V);
        reseal(copy, len);
        spit(bad, copy, len);
        expect_io(bad, "parameters do not fit in the file", 0, "huge vocab and count");
    }
    memcpy(copy, b, len);
    memset(copy + 132 + V7_SHIFT, 0xFF, 4); /* tensor count */
    reseal(copy, len);
    spit(bad, copy, len);
    expect_io(bad, "4294967295 tensors", 0, "huge tensor count");
    memcpy(copy, b, len);
    memset(copy + 144 + V7_SHIFT, 0xFF, 3), copy[147 + V7_SHIFT] = 0x7F; /* name length */
    reseal(copy, len);
    spit(bad, copy, len);
    expect_io(bad, "corrupted (tensor 0: name of 2147483647 bytes)", 1, "huge name length");
    memcpy(copy, b, len);
    copy[148 + V7_SHIFT + 11] = 'u'; /* "embed.weight" -> "embed.weighu" */
    reseal(copy, len);
    spit(bad, copy, len);
    expect_io(bad, "tensor 0 is embed.weighu (7 x 16), the model expects embed.weight (7 x 16)", 1,
              "renamed tensor");
    copy[148 + V7_SHIFT + 11] = 0x01; /* a byte outside printable ASCII: shown as \x01 */
    reseal(copy, len);
    spit(bad, copy, len);
    expect_io(bad, "tensor 0 is embed.weigh\\x01 (7 x 16), the model expects embed.weight (7 x 16)",
              1, "a control byte in a name");
    {   /* "embed.weight" and two NUL bytes (L = 14; the file 2 bytes longer): the format's names
         * have no NUL */
        memcpy(copy, b, 148 + V7_SHIFT + 12);
        memset(copy + 148 + V7_SHIFT + 12, 0, 2);
        memcpy(copy + 148 + V7_SHIFT + 14, b + 148 + V7_SHIFT + 12, len - (148 + V7_SHIFT + 12));
        copy[144 + V7_SHIFT] = 14;
        put64(copy + 8, len + 2);
        reseal(copy, len + 2);
        spit(bad, copy, len + 2);
        expect_io(bad, "corrupted (tensor 0: a NUL byte in its name)", 1, "NUL bytes after a name");
    }
    {   /* the model's RNG (44 bytes after the tensors: s[0..3], spare, has_spare): states no
         * generator reaches */
        size_t rng_at = 144 + V7_SHIFT;
        for (int i = 0; i < rp_model_num_tensors(m); i++) {
            const rp_param_info *pi = rp_model_param(m, i);
            rng_at += 4 + strlen(pi->name) + 4 + 8 * (size_t)pi->ndim + 4 * (size_t)pi->numel;
        }
        double nan_ = NAN, inf_ = -INFINITY;
        uint64_t u;
        memcpy(copy, b, len);
        memset(copy + rng_at, 0, 32);
        reseal(copy, len);
        spit(bad, copy, len);
        expect_io(bad, "corrupted (RNG state all zeros)", 1, "an all-zero xoshiro state");
        memcpy(copy, b, len);
        memset(copy + rng_at + 8, 0, 24); /* one word left: a state the generator leaves */
        reseal(copy, len);
        spit(bad, copy, len);
        rp_checkpoint ck;
        if (CHECK_STATUS(rp_checkpoint_load(bad, &ck), RP_OK, NULL)) {
            rp_checkpoint_free_optim(&ck);
            rp_model_free(ck.model);
        }
        memcpy(copy, b, len);
        memcpy(&u, &nan_, 8);
        put64(copy + rng_at + 32, u);
        copy[rng_at + 40] = 1; /* has_spare */
        reseal(copy, len);
        spit(bad, copy, len);
        expect_io(bad, "corrupted (RNG spare normal nan)", 1, "a NaN spare normal");
        memcpy(&u, &inf_, 8);
        put64(copy + rng_at + 32, u);
        copy[rng_at + 40] = 0;
        reseal(copy, len);
        spit(bad, copy, len);
        expect_io(bad, "corrupted (RNG spare normal -inf)", 1, "an infinite spare, has_spare 0");
    }
    memcpy(copy, b, len);
    copy[128 + V7_SHIFT] = 9; /* unknown flag (1 optimiser, 2 linear attention, 4 rope before
                               * phi) */
    reseal(copy, len);
    spit(bad, copy, len);
    expect_io(bad, "corrupted (unknown flags 0x9)", 1, "unknown flag");
    memcpy(copy, b, len);
    {   /* a config beyond 2^40 floats: refused by core's layout pass before anything is built */
        put64(copy + 24, (uint64_t)1 << 20); /* d_model 2^20: ~2^43 floats of weights */
        reseal(copy, len);
        spit(bad, copy, len);
        expect_io(bad,
                  "cannot build the model: model of d_model 1048576, 2 layers, max_batch 3 x "
                  "seq_len 8 needs 2.64e+13 floats (more than 2^40)",
                  0, "d_model 2^20");
    }
    memcpy(copy, b, len);
    copy[16 + 8] = 5; /* d_model 5 with heads 2 */
    reseal(copy, len);
    spit(bad, copy, len);
    expect_io(bad, "bad model config: d_model 5 is not divisible by heads 2", 1, "bad config");
    memcpy(copy, b, len);
    /* optimiser beta2 (the value of the config's third entry, right after the RNG's 44 bytes:
     * docs/checkpoint.md) */
    {
        size_t tensors_end = 144 + V7_SHIFT;
        for (int i = 0; i < rp_model_num_tensors(m); i++) {
            const rp_param_info *pi = rp_model_param(m, i);
            tensors_end += 4 + strlen(pi->name) + 4 + 8 * (size_t)pi->ndim + 4 * (size_t)pi->numel;
        }
        double beta2 = 1.5;
        uint64_t u;
        memcpy(&u, &beta2, 8);
        size_t at_beta2 = tensors_end + 44 + 4 + (4 + 2 + 12) + (4 + 5 + 12) + 4 + 5 + 4;
        CHECK(!memcmp(copy + at_beta2 - 9, "beta2", 5), "beta2's entry where the docs put it");
        put64(copy + at_beta2, u);
        reseal(copy, len);
        spit(bad, copy, len);
        expect_io(bad, "bad optimiser config: beta2 must be in [0, 1), got 1.5", 1, "bad beta2");
        /* the optimiser step (after its config): 2^63-1 once loaded, and the next step
         * overflowed step + 1; up to 2^53 loads, and the count stops there */
        memcpy(copy, b, len);
        size_t at_step = tensors_end + 44 + opt_block_size();
        put64(copy + at_step, (uint64_t)INT64_MAX);
        reseal(copy, len);
        spit(bad, copy, len);
        char w[200];
        snprintf(w, sizeof w, "corrupted (optimiser state: %lld floats at step "
                 "9223372036854775807 for %lld parameters; steps 0 to 2^53)", (long long)os.n,
                 (long long)os.n);
        expect_io(bad, w, 1, "step 2^63-1");
        put64(copy + at_step, (uint64_t)RP_ADAM_MAX_STEP + 1);
        reseal(copy, len);
        spit(bad, copy, len);
        expect_io(bad, "at step 9007199254740993 for", 0, "step 2^53+1");
        put64(copy + at_step, (uint64_t)RP_ADAM_MAX_STEP);
        reseal(copy, len);
        spit(bad, copy, len);
        rp_checkpoint ck;
        if (CHECK_STATUS(rp_checkpoint_load(bad, &ck), RP_OK, NULL)) {
            int64_t np = ck.opt_state.n;
            float *g = calloc((size_t)np, sizeof *g);
            rp_adam_step(&ck.opt_cfg, &ck.opt_state, rp_model_params(ck.model)->data, g, np);
            rp_adam_step(&ck.opt_cfg, &ck.opt_state, rp_model_params(ck.model)->data, g, np);
            CHECK(ck.opt_state.step == RP_ADAM_MAX_STEP &&
                      rp_adam_next_step(&ck.opt_state) == RP_ADAM_MAX_STEP,
                  "the step count stops at 2^53: %lld", (long long)ck.opt_state.step);
            free(g);
            rp_checkpoint_free_optim(&ck);
            rp_model_free(ck.model);
        }
    }
    {   /* saving refuses a step beyond 2^53 too */
        rp_adam_state big = os;
        big.step = RP_ADAM_MAX_STEP + 1;
        CHECK_STATUS(rp_checkpoint_save(bad, m, &oc, &big), RP_ERR_ARG,
                     "optimiser step must be between 0 and 2^53, got 9007199254740993");
    }

    /* paths */
    char missing[128];
    path_in(missing, sizeof missing, "missing.ckpt");
    expect_io(missing, "No such file or directory", 1, "missing file");
    expect_io(g_dir, "not a regular file (a folder)", 1, "directory");
    CHECK_STATUS(rp_checkpoint_load(NULL, NULL), RP_ERR_ARG, "empty");

    /* saving: a directory as path, an unwritable folder; nothing left behind */
    CHECK_STATUS(rp_checkpoint_save(g_dir, m, &oc, &os), RP_ERR_IO, "not a regular file");
    {
        char w[256];
        snprintf(w, sizeof w, "%s: not a regular file (a folder)", g_dir);
        CHECK(!strcmp(rp_last_error(), w), "save to a directory: \"%s\"", rp_last_error());
    }
    CHECK_STATUS(rp_checkpoint_save("/nonexistent/dir/x.ckpt", m, &oc, &os), RP_ERR_IO,
                 "/nonexistent/dir/x.ckpt: No such file or directory");
    char sub[128], inside[160];
    path_in(sub, sizeof sub, "sub");
    mkdir(sub, 0700);
    snprintf(inside, sizeof inside, "%s/x.ckpt", sub);
    mkdir(inside, 0700); /* a directory in the way */
    CHECK_STATUS(rp_checkpoint_save(inside, m, &oc, &os), RP_ERR_IO,
                 "not a regular file (a folder)");
    DIR *d = opendir(sub);
    int entries = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) entries++;
    if (d) closedir(d);
    CHECK(entries == 1, "failed save left %d entries in %s (want only x.ckpt/)", entries, sub);
    rmdir(inside);
    rmdir(sub);

    /* a write that fails half way (file size limit: EFBIG): the old file stays, no temporary */
    {
        struct rlimit old_lim, lim;
        void (*old_sig)(int) = signal(SIGXFSZ, SIG_IGN);
        getrlimit(RLIMIT_FSIZE, &old_lim);
        lim = old_lim;
        lim.rlim_cur = 1000;
        if (setrlimit(RLIMIT_FSIZE, &lim) == 0) {
            rp_status st = rp_checkpoint_save(good, m, &oc, &os);
            char msg[512];
            snprintf(msg, sizeof msg, "%s", rp_last_error());
            setrlimit(RLIMIT_FSIZE, &old_lim);
            char w[256];
            snprintf(w, sizeof w, "%s: %s", good, strerror(EFBIG));
            CHECK(st == RP_ERR_IO && !strcmp(msg, w), "write past the size limit: %s \"%s\"",
                  rp_status_name(st), msg);
            size_t len2 = 0;
            uint8_t *b2 = slurp(good, &len2);
            CHECK(b2 && len2 == len && !memcmp(b, b2, len), "the old file is intact");
            free(b2);
        } else {
            CHECK(0, "setrlimit: %s", strerror(errno));
        }
        signal(SIGXFSZ, old_sig);
    }
    const char *allowed[] = {"good.ckpt", "bad.ckpt", NULL};
    CHECK(stray_files(allowed) == 0, "no temporary files after failed saves");

    unlink(good);
    unlink(bad);
    free(copy);
    free(b);
    free(os.m);
    free(os.v);
    rp_model_free(m);
}

/* ---- resume ---------------------------------------------------------------------------------- */

enum { RB = 3, RT = 8, N_FIRST = 5, M_MORE = 6 };

static void batch_for(int step, int32_t *tok, int32_t *tgt)
{
    uint64_t s = 1000 + (uint64_t)step;
    for (int i = 0; i < RB * RT; i++) {
        tok[i] = (int32_t)(check_rand_u64(&s) % 7);
        tgt[i] = (int32_t)(check_rand_u64(&s) % 7);
    }
    tgt[RT - 1] = -1; /* one unscored position */
}

static int train_steps(rp_model *m, const rp_adam_cfg *oc, rp_adam_state *os, int from, int count,
                       float *losses)
{
    int32_t tok[RB * RT], tgt[RB * RT];
    for (int s = from; s < from + count; s++) {
        batch_for(s, tok, tgt);
        rp_model_zero_grad(m);
        float loss = NAN;
        if (rp_model_forward(m, tok, tgt, NULL, RB, RT, 1, &loss) != RP_OK ||
            rp_model_backward(m) != RP_OK) {
            printf("FAIL: training step %d: %s\n", s, rp_last_error());
            return 0;
        }
        losses[s] = loss;
        rp_adam_step(oc, os, rp_model_params(m)->data, rp_model_grads(m)->data,
                     rp_model_param_count(m));
    }
    return 1;
}

static void test_resume(void)
{
    printf("-- resume is bit-identical\n");
    rp_model_cfg c = tiny_cfg();
    rp_adam_cfg oc = odd_opt_cfg();
    oc.lr = 1e-2;
    oc.warmup = 2;
    oc.total_steps = N_FIRST + M_MORE - 2;
    float straight[N_FIRST + M_MORE], resumed[N_FIRST + M_MORE];

    rp_model *a = check_model_new(&c);
    int64_t n = rp_model_param_count(a);
    rp_adam_state sa = {calloc((size_t)n, sizeof(float)), calloc((size_t)n, sizeof(float)), n, 0};
    int ok = train_steps(a, &oc, &sa, 0, N_FIRST + M_MORE, straight);

    rp_model *b = check_model_new(&c);
    rp_adam_state sb = {calloc((size_t)n, sizeof(float)), calloc((size_t)n, sizeof(float)), n, 0};
    ok = ok && train_steps(b, &oc, &sb, 0, N_FIRST, resumed);
    char path[128];
    path_in(path, sizeof path, "resume.ckpt");
    CHECK_STATUS(rp_checkpoint_save(path, b, &oc, &sb), RP_OK, NULL);
    rp_model_free(b);
    free(sb.m);
    free(sb.v);
    rp_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    CHECK_STATUS(rp_checkpoint_load(path, &ck), RP_OK, NULL);
    if (ck.model && ck.has_optim) {
        CHECK(ck.opt_state.step == N_FIRST, "step %lld after %d steps",
              (long long)ck.opt_state.step, N_FIRST);
        ok = ok && train_steps(ck.model, &ck.opt_cfg, &ck.opt_state, N_FIRST, M_MORE, resumed);
        CHECK(ok, "training ran");
        int same = ok && !memcmp(straight, resumed, sizeof straight);
        for (int s = 0; ok && s < N_FIRST + M_MORE; s++)
            if (memcmp(&straight[s], &resumed[s], sizeof(float)))
                printf("  step %d: straight %.9g, resumed %.9g\n", s, (double)straight[s],
                       (double)resumed[s]);
        CHECK(same, "%d + %d steps with a save/load in between == %d straight (every loss bitwise)",
              N_FIRST, M_MORE, N_FIRST + M_MORE);
        CHECK(straight[N_FIRST + M_MORE - 1] < straight[0], "loss fell: %.6g -> %.6g",
              (double)straight[0], (double)straight[N_FIRST + M_MORE - 1]);
        CHECK(!memcmp(rp_model_params(ck.model)->data, rp_model_params(a)->data,
                      (size_t)n * sizeof(float)),
              "final parameters bitwise");
        CHECK(!memcmp(ck.opt_state.m, sa.m, (size_t)n * sizeof(float)) &&
                  !memcmp(ck.opt_state.v, sa.v, (size_t)n * sizeof(float)) &&
                  ck.opt_state.step == sa.step,
              "final optimiser state bitwise");
    } else {
        CHECK(0, "resume checkpoint did not load with an optimiser");
    }
    if (ck.model) {
        rp_checkpoint_free_optim(&ck);
        rp_model_free(ck.model);
    }
    unlink(path);
    free(sa.m);
    free(sa.v);
    rp_model_free(a);
}


/* ---- special files, kills, stale temporaries ------------------------------------------------ */

/* Runs rp_checkpoint_load(path) in a child with a 5 s alarm, so that a regression that blocks
 * (a FIFO without a writer) fails this check instead of hanging the suite. Returns 1 when the
 * child ended by itself with RP_ERR_IO and a message containing want. */
static int load_in_child(const char *path, const char *want)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(5);
        rp_checkpoint ck;
        rp_status st = rp_checkpoint_load(path, &ck);
        _exit(st == RP_ERR_IO && strstr(rp_last_error(), want) ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void test_special_files(void)
{
    printf("-- special files\n");
    char fifo[128];
    path_in(fifo, sizeof fifo, "fifo");
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo: %s", strerror(errno));
    CHECK(load_in_child(fifo, "not a regular file (a FIFO)"), "load of a FIFO returns at once");
    CHECK(load_in_child("/dev/zero", "/dev/zero: not a regular file (a character device)"),
          "load of /dev/zero");
    CHECK(load_in_child("/dev/null", "not a regular file (a character device)"),
          "load of /dev/null");
    /* saving over them is refused and leaves them as they were */
    rp_model_cfg c = tiny_cfg();
    rp_model *m = check_model_new(&c);
    CHECK_STATUS(rp_checkpoint_save(fifo, m, NULL, NULL), RP_ERR_IO,
                 "not a regular file (a FIFO)");
    struct stat sb;
    CHECK(stat(fifo, &sb) == 0 && S_ISFIFO(sb.st_mode), "the FIFO is still a FIFO");
    CHECK_STATUS(rp_checkpoint_save("/dev/null", m, NULL, NULL), RP_ERR_IO,
                 "/dev/null: not a regular file (a character device)");
    CHECK(stat("/dev/null", &sb) == 0 && S_ISCHR(sb.st_mode), "/dev/null is still a device");
    unlink(fifo);
    /* a symbolic link to a checkpoint loads; saving through it replaces the link by the file */
    char good[128], link[128];
    path_in(good, sizeof good, "target.ckpt");
    path_in(link, sizeof link, "link.ckpt");
    CHECK_STATUS(rp_checkpoint_save(good, m, NULL, NULL), RP_OK, NULL);
    CHECK(symlink(good, link) == 0, "symlink: %s", strerror(errno));
    rp_checkpoint ck;
    rp_status lst = rp_checkpoint_load(link, &ck);
    CHECK(lst == RP_OK, "a symbolic link to a checkpoint loads: %s", rp_last_error());
    if (lst == RP_OK) rp_model_free(ck.model);
    CHECK_STATUS(rp_checkpoint_save(link, m, NULL, NULL), RP_OK, NULL);
    CHECK(lstat(link, &sb) == 0 && S_ISREG(sb.st_mode), "the link was replaced by a file");
    unlink(link);
    unlink(good);
    rp_model_free(m);
}

/* The pid of a process that has ended (a child that exited and was reaped). */
static pid_t dead_pid(void)
{
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    waitpid(pid, NULL, 0);
    return pid;
}

/* How many entries of g_dir start with prefix. */
static int count_prefix(const char *prefix)
{
    DIR *d = opendir(g_dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (!strncmp(e->d_name, prefix, strlen(prefix))) n++;
    if (d) closedir(d);
    return n;
}

/* A save removes "<path>.tmp.<pid>" of dead processes, keeps those of live ones and of other
 * paths; 25 SIGKILLs at varied moments of a save of a large model never damage the checkpoint,
 * and after one more save no temporary file of it is left. */
static void test_kills_and_stale_temps(int named)
{
    printf("-- kills during a save, stale temporaries (%s temporary file)\n",
           named ? "named" : "anonymous");
    if (named) setenv("ROPER_NO_TMPFILE", "1", 1);
    char path[128], stale[160], live[160], other[160];
    path_in(path, sizeof path, "k.ckpt");
    pid_t dead = dead_pid();
    snprintf(stale, sizeof stale, "%s.tmp.%ld", path, (long)dead);
    snprintf(live, sizeof live, "%s.tmp.%ld", path, (long)getppid());
    path_in(other, sizeof other, "other.ckpt.tmp.1");
    const uint8_t junk[3] = {1, 2, 3};
    spit(stale, junk, 3);
    spit(live, junk, 3);
    spit(other, junk, 3);
    rp_model_cfg c = tiny_cfg();
    c.d_model = 256;
    c.d_ff = 1024;
    c.layers = 4;
    c.vocab = 1000; /* about 3.7M parameters: 15 MB */
    rp_model *m = check_model_new(&c);
    CHECK_STATUS(rp_checkpoint_save(path, m, NULL, NULL), RP_OK, NULL);
    CHECK(access(stale, F_OK) != 0, "the dead process's temporary was removed");
    CHECK(access(live, F_OK) == 0, "a live process's temporary was kept");
    CHECK(access(other, F_OK) == 0, "another path's temporary was kept");
    unlink(live);
    unlink(other);

    int loads_ok = 1, seen = 0;
    char prefix[64];
    snprintf(prefix, sizeof prefix, "k.ckpt.tmp.");
    for (int k = 0; k < 25; k++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            for (;;) rp_checkpoint_save(path, m, NULL, NULL);
        }
        struct timespec ts = {0, (long)(1 + (k * 7) % 60) * 1000000L};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        seen += count_prefix(prefix) > 0; /* this kill hit a save with its temporary on disk */
        rp_checkpoint ck;
        if (rp_checkpoint_load(path, &ck) != RP_OK) {
            loads_ok = 0;
            printf("  after kill %d: %s\n", k, rp_last_error());
        } else {
            rp_model_free(ck.model);
        }
    }
    CHECK(loads_ok, "the checkpoint loads after every kill");
    printf("  kills that left a temporary on disk: %d of 25\n", seen);
    if (named) CHECK(seen > 0, "with a named temporary, some kills hit a save (%d)", seen);
    CHECK_STATUS(rp_checkpoint_save(path, m, NULL, NULL), RP_OK, NULL);
    CHECK(count_prefix(prefix) == 0, "no temporary left after the next save (%d)",
          count_prefix(prefix));
    unlink(path);
    rp_model_free(m);
    unsetenv("ROPER_NO_TMPFILE");
}

/* ---- old checkpoints keep loading ---------------------------------------------------------- */

/* The files in tests/fixtures/checkpoints/ were written by an earlier commit (README there);
 * expected.h holds what was in memory when they were saved. */
typedef struct {
    const char *name;
    int64_t numel;
    uint64_t fnv;     /* FNV-1a 64 of the little-endian float bytes */
    double first;     /* the first value */
} ck_tensor;

/* The config fields the fixtures' writer records (make_checkpoints.c), by the names rp_model_cfg
 * had when the fixtures were written (its positional fields flat, before rp_pe_cfg): expected.h
 * is written by that program, never edited. */
typedef struct {
    int64_t vocab, d_model, heads, layers, d_ff, seq_len, max_batch;
    int norm, act;
    double dropout;
    int pe;
    double fraction_qk, fraction_v, rope_base;
    int pairing;
    uint64_t seed;
    int attention, linear_rope;
} ck_cfg;

typedef struct {
    const char *file;
    ck_cfg cfg;
    int64_t nparams;
    int ntensors;
    ck_tensor tensors[40];
    rp_rng rng;
    int has_optim;
    rp_adam_cfg opt_cfg;
    int64_t opt_step;
    uint64_t opt_m_fnv, opt_v_fnv;
    double loss; /* forward (train = 0) on ck_batch(-1) */
} ck_fixture;

#include "../fixtures/checkpoints/expected.h"

static uint64_t fnv_floats(const float *x, int64_t n)
{
    uint64_t h = 14695981039346656037ULL;
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        for (int k = 0; k < 4; k++) h = (h ^ (uint8_t)(u >> (8 * k))) * 1099511628211ULL;
    }
    return h;
}

enum { FB = 2, FT = 8 };

/* make_checkpoints.c's batches: step s of its training, s = -1 for the recorded loss. */
static void ck_batch(int s, int64_t vocab, int32_t *tok, int32_t *tgt)
{
    uint64_t x = 0x9E3779B97F4A7C15ULL * (uint64_t)(s + 17);
    for (int i = 0; i < FB * FT; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        tok[i] = (int32_t)(x % (uint64_t)vocab);
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        tgt[i] = (int32_t)(x % (uint64_t)vocab);
    }
    tgt[3] = -1;
}

static void check_old_file(const ck_fixture *f)
{
    char path[256];
    const char *dir = getenv("ROPER_CKPT_FIXTURES");
    snprintf(path, sizeof path, "%s/%s", dir ? dir : "tests/fixtures/checkpoints", f->file);
    rp_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    if (!CHECK_STATUS(rp_checkpoint_load(path, &ck), RP_OK, NULL) || !ck.model) {
        printf("  %s: %s\n", path, rp_last_error());
        return;
    }
    rp_model *m = ck.model;
    const rp_model_cfg *c = rp_model_config(m);
    const ck_cfg *e = &f->cfg;
    CHECK(c->vocab == e->vocab && c->d_model == e->d_model && c->heads == e->heads &&
              c->layers == e->layers && c->d_ff == e->d_ff && c->seq_len == e->seq_len &&
              c->max_batch == e->max_batch && (int)c->norm == e->norm && (int)c->act == e->act &&
              (int)c->pe.mode == e->pe && (int)c->pe.pairing == e->pairing && c->seed == e->seed &&
              !memcmp(&c->dropout, &e->dropout, sizeof(double)) &&
              !memcmp(&c->pe.fraction_qk, &e->fraction_qk, sizeof(double)) &&
              !memcmp(&c->pe.fraction_v, &e->fraction_v, sizeof(double)) &&
              !memcmp(&c->pe.base, &e->rope_base, sizeof(double)) &&
              (int)c->attention == e->attention && (int)c->linear_rope == e->linear_rope,
          "%s: config", f->file);
    CHECK(rp_model_param_count(m) == f->nparams && rp_model_num_tensors(m) == f->ntensors,
          "%s: %lld parameters in %d tensors, want %lld in %d", f->file,
          (long long)rp_model_param_count(m), rp_model_num_tensors(m), (long long)f->nparams,
          f->ntensors);
    const float *w = rp_model_params(m)->data;
    int bad = 0;
    for (int i = 0; i < f->ntensors && i < rp_model_num_tensors(m); i++) {
        const rp_param_info *p = rp_model_param(m, i);
        const ck_tensor *t = &f->tensors[i];
        if (strcmp(p->name, t->name) != 0 || p->numel != t->numel ||
            fnv_floats(w + p->offset, p->numel) != t->fnv || (double)w[p->offset] != t->first) {
            printf("  %s: tensor %d %s (%lld, first %a), want %s (%lld, first %a)\n", f->file, i,
                   p->name, (long long)p->numel, (double)w[p->offset], t->name,
                   (long long)t->numel, t->first);
            bad++;
        }
    }
    CHECK(bad == 0, "%s: every parameter value (%d tensors differ)", f->file, bad);
    rp_rng *r = rp_model_rng(m);
    CHECK(!memcmp(r->s, f->rng.s, sizeof r->s) && r->has_spare == f->rng.has_spare &&
              !memcmp(&r->spare, &f->rng.spare, sizeof(double)),
          "%s: RNG state", f->file);
    CHECK(ck.has_optim == f->has_optim, "%s: optimiser present %d, want %d", f->file,
          ck.has_optim, f->has_optim);
    if (f->has_optim && ck.has_optim) {
        /* the fields these files hold (docs/checkpoint.md: versions 1 to 6) as saved, every row
         * added since at its default */
        static const char *const v1_fields[] = {"lr", "beta1", "beta2", "eps", "weight_decay",
                                                "decoupled", "schedule", "clip", "warmup",
                                                "total_steps", "min_lr", "d_model"};
        rp_adam_cfg want = rp_adam_cfg_default();
        for (size_t i = 0; i < sizeof v1_fields / sizeof v1_fields[0]; i++) {
            const rp_optim_key *k = rp_adam_key(v1_fields[i]);
            if (k->type == RP_OPT_NUM) rp_adam_cfg_set(&want, k, rp_adam_cfg_get(&f->opt_cfg, k));
            else rp_adam_cfg_set_int(&want, k, rp_adam_cfg_get_int(&f->opt_cfg, k));
        }
        CHECK(opt_cfg_equal(&ck.opt_cfg, &want), "%s: optimiser config", f->file);
        CHECK(ck.opt_state.n == f->nparams && ck.opt_state.step == f->opt_step,
              "%s: optimiser n %lld, step %lld", f->file, (long long)ck.opt_state.n,
              (long long)ck.opt_state.step);
        CHECK(fnv_floats(ck.opt_state.m, ck.opt_state.n) == f->opt_m_fnv &&
                  fnv_floats(ck.opt_state.v, ck.opt_state.n) == f->opt_v_fnv,
              "%s: optimiser m and v", f->file);
    } else if (!f->has_optim) {
        rp_adam_cfg def = rp_adam_cfg_default();
        CHECK(opt_cfg_equal(&ck.opt_cfg, &def) && ck.opt_state.n == 0 && !ck.opt_state.m,
              "%s: no optimiser: default config, empty state", f->file);
    }
    int32_t tok[FB * FT], tgt[FB * FT];
    ck_batch(-1, f->cfg.vocab, tok, tgt);
    float loss = NAN;
    CHECK_STATUS(rp_model_forward(m, tok, tgt, NULL, FB, FT, 0, &loss), RP_OK, NULL);
    CHECK(fabs((double)loss - f->loss) <= 1e-5 * fabs(f->loss), "%s: loss %.9g, recorded %.9g",
          f->file, (double)loss, f->loss);
    rp_checkpoint_free_optim(&ck);
    rp_model_free(m);
}

static void test_old_files(void)
{
    printf("-- checkpoints written by 7dfef96 load\n");
    int n = (int)(sizeof ck_fixtures / sizeof ck_fixtures[0]);
    for (int i = 0; i < n; i++) check_old_file(&ck_fixtures[i]);
    CHECK(n == 4, "%d fixture files", n);
}

/* ---- version 3: the frequency scheme -------------------------------------------------------- */


/* The logits of m and of l (a model loaded from m's file, tiny_cfg's sizes) for one sequence of 8
 * tokens: the same bits. */
static void same_logits(rp_model *m, rp_model *l, const char *what)
{
    int32_t tok[8] = {1, 2, 3, 4, 5, 6, 0, 1};
    CHECK_STATUS(rp_model_forward(m, tok, NULL, NULL, 1, 8, 0, NULL), RP_OK, what);
    float l1[8 * 7];
    memcpy(l1, rp_model_logits(m), sizeof l1);
    CHECK_STATUS(rp_model_forward(l, tok, NULL, NULL, 1, 8, 0, NULL), RP_OK, what);
    CHECK(!memcmp(l1, rp_model_logits(l), sizeof l1), "%s: logits bitwise", what);
}
/* Saves m, checks the version byte and the size docs/checkpoint.md gives (version 1 + 56 + 72
 * bytes + the table), loads it and compares config, table and logits. */
static void v3_case(rp_model *m, const char *what, uint32_t want_version, int64_t table)
{
    char path[128];
    path_in(path, sizeof path, "v3.ckpt");
    CHECK_STATUS(rp_checkpoint_save(path, m, NULL, NULL), RP_OK, what);
    size_t len = 0;
    uint8_t *b = slurp(path, &len);
    size_t want = 16 + 112 + 16 + 44 + 8 + (want_version >= 2 ? 56 : 0) +
                  (want_version >= 3 ? 72 + 8 * (size_t)table : 0);
    for (int i = 0; i < rp_model_num_tensors(m); i++) {
        const rp_param_info *pi = rp_model_param(m, i);
        want += 4 + strlen(pi->name) + 4 + 8 * (size_t)pi->ndim + 4 * (size_t)pi->numel;
    }
    CHECK(b && b[4] == want_version, "%s: version %d, want %u", what, b ? b[4] : -1, want_version);
    CHECK(len == want, "%s: file size %zu, docs/checkpoint.md gives %zu", what, len, want);
    free(b);
    rp_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    CHECK_STATUS(rp_checkpoint_load(path, &ck), RP_OK, what);
    if (ck.model) {
        const rp_model_cfg *a = rp_model_config(ck.model), *c = rp_model_config(m);
        CHECK(a->freq.scaling == c->freq.scaling && a->freq.factor == c->freq.factor &&
                  a->freq.orig_len == c->freq.orig_len &&
                  a->freq.yarn_alpha == c->freq.yarn_alpha &&
                  a->freq.yarn_beta == c->freq.yarn_beta && a->freq.xpos == c->freq.xpos &&
                  a->freq.xpos_scale_base == c->freq.xpos_scale_base,
              "%s: frequency settings restored", what);
        CHECK(rp_rope_freq_equal(rp_model_freq(ck.model), rp_model_freq(m)),
              "%s: the frequency scheme and its table restored", what);
        same_logits(m, ck.model, what);
        rp_model_free(ck.model);
    }
    unlink(path);
}

static void test_version3(void)
{
    printf("-- version 3: scalings, xPos, the model's own frequencies\n");
    rp_model_cfg c = tiny_cfg();
    c.dropout = 0.0;
    rp_model *m = check_model_new(&c);
    v3_case(m, "standard scheme", 1, 0);
    rp_model_free(m);
    const struct {
        rp_rope_scaling s;
        double factor, xpos;
        int64_t orig_len;
        const char *what;
    } cases[] = {{RP_SCALING_PI, 2.0, 0.0, 0, "pi"},
                 {RP_SCALING_NTK, 3.5, 0.0, 0, "ntk"},
                 {RP_SCALING_YARN, 4.0, 0.0, 3, "yarn"},
                 {RP_SCALING_NONE, 1.0, 0.4, 0, "xpos"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rp_model_cfg d = c;
        d.freq.scaling = cases[i].s;
        d.freq.factor = cases[i].factor;
        d.freq.xpos = cases[i].xpos;
        d.freq.xpos_scale_base = cases[i].xpos > 0 ? 4.0 : d.freq.xpos_scale_base;
        d.freq.orig_len = cases[i].orig_len;
        d.freq.yarn_beta = cases[i].s == RP_SCALING_YARN ? 8.0 : d.freq.yarn_beta;
        m = check_model_new(&d);
        v3_case(m, cases[i].what, 3, 0);
        rp_model_free(m);
    }
    /* the model's own tables: d_k 8, four pairs */
    m = check_model_new(&c);
    double theta[5] = {1.0, 0.25, 0.0625, 1.0 / 3.0, 7.0};
    CHECK_STATUS(rp_model_set_freq(m, theta, 5, NULL, 0, 0), RP_OK, NULL);
    v3_case(m, "freq", 3, 5);
    double ang[9 * 4];
    for (int i = 0; i < 36; i++) ang[i] = 0.1 * (double)(i * i % 17) - 0.3;
    CHECK_STATUS(rp_model_set_freq(m, NULL, 0, ang, 9, 4), RP_OK, NULL);
    v3_case(m, "angles", 3, 36);
    CHECK_STATUS(rp_model_set_freq(m, NULL, 0, ang, 7, 4), RP_ERR_ARG,
                 "angles hold positions 0..6; position 7 is asked");
    CHECK_STATUS(rp_model_set_freq(m, theta, 3, NULL, 0, 0), RP_ERR_ARG,
                 "freq holds 3 frequencies; d_rot_q 8 needs 4");
    CHECK(rp_rope_freq_equal(rp_model_freq(m), &(rp_rope_freq){.factor = 1, .angles = ang, .rows = 9,
                                                               .n_angles = 4, .yarn_alpha = 1,
                                                               .yarn_beta = 32,
                                                               .xpos_scale_base = 512}),
          "a refused table leaves the model's as it was");

    /* damaged version 3 files: a bad table kind, a NaN in the table (checksums resealed) */
    char path[128];
    path_in(path, sizeof path, "v3bad.ckpt");
    CHECK_STATUS(rp_checkpoint_save(path, m, NULL, NULL), RP_OK, NULL);
    size_t len = 0;
    uint8_t *b = slurp(path, &len);
    if (b) {
        size_t fo = 16 + 112 + 56; /* the version 3 block */
        b[fo + 4] = 5;
        reseal(b, len);
        spit(path, b, len);
        expect_io(path, "corrupted (frequency table kind 5, 9 x 4)", 1, "table kind 5");
        b[fo + 4] = 2;
        put64(b + fo + 72, 0x7FF8000000000000ULL); /* angles[0][0] = NaN */
        reseal(b, len);
        spit(path, b, len);
        expect_io(path, "bad frequency table: angles: position 0, pair 0 has angle nan; angles "
                        "must be finite", 1, "a NaN angle");
        free(b);
    }
    unlink(path);
    rp_model_free(m);
}

/* Version 5: the model's positions. m saved, the file's size the layout of docs/checkpoint.md
 * (A axes, n_mix pairs of a mix matrix, 8 rows), loaded with the same positions and axes, the
 * same logits bit for bit. */
static void v5_case(rp_model *m, const char *what, int A, int64_t n_mix, int64_t rows)
{
    char path[128];
    path_in(path, sizeof path, "v5.ckpt");
    CHECK_STATUS(rp_checkpoint_save(path, m, NULL, NULL), RP_OK, what);
    size_t len = 0;
    uint8_t *b = slurp(path, &len);
    int W = A > 0 ? A : 1;
    size_t want = 16 + 112 + 16 + 44 + 8 + 56 + 72 + 28 + 4 + 48 + 8 * (size_t)(W * n_mix) +
                  8 * (size_t)rows * (size_t)W;
    for (int i = 0; i < rp_model_num_tensors(m); i++) {
        const rp_param_info *pi = rp_model_param(m, i);
        want += 4 + strlen(pi->name) + 4 + 8 * (size_t)pi->ndim + 4 * (size_t)pi->numel;
    }
    CHECK(b && b[4] == 5, "%s: version %d, want 5", what, b ? b[4] : -1);
    CHECK(len == want, "%s: file size %zu, docs/checkpoint.md gives %zu", what, len, want);
    /* learn_freq: the first field of version 5's block, at 284 (no frequency table) */
    int learn = rp_model_config(m)->learn_freq;
    CHECK(b && len > 288 && (uint32_t)get64(b + 284) == (uint32_t)learn,
          "%s: learn_freq %d at 284", what, learn);
    free(b);
    rp_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    CHECK_STATUS(rp_checkpoint_load(path, &ck), RP_OK, what);
    if (ck.model) {
        CHECK(rp_model_config(ck.model)->learn_freq == learn, "%s: learn_freq %d restored", what,
              learn);
        int64_t ra = 0, rb = 0;
        const int64_t *pa = rp_model_positions(m, &ra), *pb = rp_model_positions(ck.model, &rb);
        CHECK(ra == rows && rb == rows &&
                  (rows ? pb && !memcmp(pa, pb, (size_t)(ra * W) * sizeof(int64_t)) : !pb),
              "%s: the positions restored (%lld rows)", what, (long long)rows);
        CHECK(rp_rope_freq_equal(rp_model_freq(ck.model), rp_model_freq(m)),
              "%s: the axes (map, sections, mix) restored", what);
        same_logits(m, ck.model, what);
        rp_model_free(ck.model);
    }
    unlink(path);
}

static void test_version5(void)
{
    printf("-- version 5: the model's positions\n");
    rp_model_cfg c = tiny_cfg();
    c.dropout = 0.0;
    rp_model *m = check_model_new(&c);
    int32_t tok[8] = {1, 2, 3, 4, 5, 6, 0, 1};
    CHECK_STATUS(rp_model_forward(m, tok, NULL, NULL, 1, 8, 0, NULL), RP_OK, NULL);
    float plain[8 * 7];
    memcpy(plain, rp_model_logits(m), sizeof plain);
    /* a 2 x 4 grid, axial (d_k 8: two pairs per axis) */
    int64_t grid[16], line[8];
    for (int i = 0; i < 8; i++) grid[2 * i] = i / 4, grid[2 * i + 1] = i % 4, line[i] = 3 + i;
    rp_rope_axes ax = {.n = 2, .map = RP_AXES_AXIAL};
    CHECK_STATUS(rp_model_set_positions(m, &ax, grid, 8), RP_OK, NULL);
    CHECK_STATUS(rp_model_forward(m, tok, NULL, NULL, 1, 8, 0, NULL), RP_OK, NULL);
    CHECK(memcmp(plain, rp_model_logits(m), sizeof plain) != 0, "the grid changes the logits");
    v5_case(m, "axial grid", 2, 0, 8);
    double W[8] = {0.5, 0.25, -0.125, 1.0, 0.75, -0.5, 0.0625, 2.0};
    ax.map = RP_AXES_MIXED, ax.mix = W, ax.n_mix = 4;
    CHECK_STATUS(rp_model_set_positions(m, &ax, grid, 8), RP_OK, NULL);
    v5_case(m, "mixed grid", 2, 4, 8);
    ax = (rp_rope_axes){.n = 0};
    CHECK_STATUS(rp_model_set_positions(m, &ax, line, 8), RP_OK, NULL);
    v5_case(m, "explicit 1-D positions", 0, 0, 8);
    CHECK_STATUS(rp_model_set_positions(m, &ax, line, 7), RP_ERR_ARG,
                 "positions hold 7 rows; the model's seq_len is 8");
    ax = (rp_rope_axes){.n = 2, .map = RP_AXES_SECTIONS, .sections = {1, 1}};
    CHECK_STATUS(rp_model_set_positions(m, &ax, grid, 8), RP_ERR_ARG,
                 "sections {1, 1} hold 2 pairs; d_rot_q 8 has 4");
    int64_t r = 0;
    CHECK(rp_model_positions(m, &r) && r == 8 && rp_model_positions(m, NULL)[0] == 3,
          "a refused call leaves the positions as they were");
    /* NULL restores the index: the plain logits again, and a file of version 1 */
    CHECK_STATUS(rp_model_set_positions(m, NULL, NULL, 0), RP_OK, NULL);
    CHECK_STATUS(rp_model_forward(m, tok, NULL, NULL, 1, 8, 0, NULL), RP_OK, NULL);
    CHECK(!memcmp(plain, rp_model_logits(m), sizeof plain), "no positions: the plain logits");
    v3_case(m, "positions removed", 1, 0);

    /* damaged version 5 files (checksums resealed): sizes beyond the file, sections that do
     * not add up */
    ax = (rp_rope_axes){.n = 2, .map = RP_AXES_AXIAL};
    CHECK_STATUS(rp_model_set_positions(m, &ax, grid, 8), RP_OK, NULL);
    char path[128];
    path_in(path, sizeof path, "v5bad.ckpt");
    CHECK_STATUS(rp_checkpoint_save(path, m, NULL, NULL), RP_OK, NULL);
    size_t len = 0;
    uint8_t *b = slurp(path, &len);
    if (b) {
        size_t po = 16 + 112 + 56 + 72 + 28 + 4; /* the positions section, after learn_freq */
        put64(b + po + 40, 1000000);         /* rows */
        reseal(b, len);
        spit(path, b, len);
        expect_io(path, "corrupted (positions: 2 axes, 1000000 rows, mix 0)", 1, "rows 10^6");
        put64(b + po + 40, 8);
        b[po + 4] = 1; /* map sections, sections {1, 1} */
        put64(b + po + 8, 1);
        put64(b + po + 16, 1);
        reseal(b, len);
        spit(path, b, len);
        expect_io(path, "bad positions: sections {1, 1} hold 2 pairs; d_rot_q 8 has 4", 1,
                  "sections {1, 1}");
        free(b);
    }
    unlink(path);
    rp_model_free(m);

    /* learn_freq: version 5 with or without positions, restored; a model without either is
     * written as before (version 1) */
    c.learn_freq = 1;
    m = check_model_new(&c);
    v5_case(m, "learn_freq", 0, 0, 0);
    CHECK_STATUS(rp_model_set_positions(m, &ax, grid, 8), RP_OK, NULL);
    v5_case(m, "learn_freq and an axial grid", 2, 0, 8);
    rp_model_free(m);
    c.learn_freq = 0;
    m = check_model_new(&c);
    v3_case(m, "learn_freq 0", 1, 0);
    rp_model_free(m);
}

/* tie_embeddings: version 6 (docs/checkpoint.md): the version 5 layout with tie_embeddings, an
 * i32, at 288 (after learn_freq, before the positions), no head.weight entry; read back with the
 * same config and logits; with positions too (they move 4 bytes further). */
static void v6_case(rp_model *m, const char *what, int64_t rows, int W)
{
    char path[128];
    path_in(path, sizeof path, "v6.ckpt");
    CHECK_STATUS(rp_checkpoint_save(path, m, NULL, NULL), RP_OK, what);
    size_t len = 0;
    uint8_t *b = slurp(path, &len);
    size_t want = 16 + 112 + 16 + 44 + 8 + 56 + 72 + 28 + 4 + 4 + 48 + 8 * (size_t)rows * (size_t)W;
    for (int i = 0; i < rp_model_num_tensors(m); i++) {
        const rp_param_info *pi = rp_model_param(m, i);
        want += 4 + strlen(pi->name) + 4 + 8 * (size_t)pi->ndim + 4 * (size_t)pi->numel;
    }
    CHECK(b && b[4] == 6, "%s: version %d, want 6", what, b ? b[4] : -1);
    CHECK(len == want, "%s: file size %zu, docs/checkpoint.md gives %zu", what, len, want);
    CHECK(b && len > 300 && get64(b + 284) == ((uint64_t)1 << 32),
          "%s: learn_freq 0 at 284, tie_embeddings 1 at 288", what);
    free(b);
    rp_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    CHECK_STATUS(rp_checkpoint_load(path, &ck), RP_OK, what);
    if (ck.model) {
        CHECK(rp_model_config(ck.model)->tie_embeddings == 1 &&
                  rp_model_find_param(ck.model, "head.weight") == -1 &&
                  rp_model_param_count(ck.model) == rp_model_param_count(m),
              "%s: tie_embeddings restored, no head.weight", what);
        int64_t rb = 0;
        rp_model_positions(ck.model, &rb);
        CHECK(rb == rows, "%s: %lld position rows restored", what, (long long)rows);
        same_logits(m, ck.model, what);
        rp_model_free(ck.model);
    }
    unlink(path);
}

static void test_version6(void)
{
    printf("-- version 6: tied embeddings\n");
    rp_model_cfg c = tiny_cfg();
    c.dropout = 0.0;
    c.tie_embeddings = 1;
    rp_model *m = check_model_new(&c);
    v6_case(m, "tie_embeddings", 0, 1);
    int64_t pos[8] = {0, 2, 4, 6, 8, 10, 12, 14};
    rp_rope_axes one = {.n = 0};
    CHECK_STATUS(rp_model_set_positions(m, &one, pos, 8), RP_OK, NULL);
    v6_case(m, "tie_embeddings with 1-D positions", 8, 1);
    rp_model_free(m);
}

/* ---- version 7: the optimiser's config by row ------------------------------------------------ */

/* One entry of version 7's optimiser config (docs/checkpoint.md). */
typedef struct {
    const char *name;
    uint32_t len; /* of the name (may differ from strlen for forgeries) */
    uint32_t enc; /* 0 f64, 1 i64 */
    uint64_t bits;
} opt_entry;

/* c's entries, one per row in row order (as a save writes them); returns their count. */
static int entries_of(const rp_adam_cfg *c, opt_entry *e)
{
    for (int i = 0; i < rp_adam_nkeys; i++) {
        const rp_optim_key *k = &rp_adam_keys[i];
        double x = rp_adam_cfg_get(c, k);
        uint64_t u;
        memcpy(&u, &x, 8);
        e[i] = (opt_entry){k->name, (uint32_t)strlen(k->name), k->type == RP_OPT_NUM ? 0u : 1u,
                           k->type == RP_OPT_NUM ? u : (uint64_t)rp_adam_cfg_get_int(c, k)};
    }
    return rp_adam_nkeys;
}

/* Writes to path the file b (len bytes, a version 7 file with an optimiser whose config starts
 * at `at`) with that config replaced by count and the n entries e, resealed. */
static void forge_opt(const char *path, const uint8_t *b, size_t len, size_t at, uint32_t count,
                      const opt_entry *e, int n)
{
    size_t old = opt_block_size(), add = 4;
    for (int i = 0; i < n; i++) add += 4 + e[i].len + 4 + 8;
    size_t out_len = len - old + add;
    uint8_t *o = malloc(out_len), *p = o + at;
    memcpy(o, b, at);
    for (int k = 0; k < 4; k++) *p++ = (uint8_t)(count >> (8 * k));
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < 4; k++) *p++ = (uint8_t)(e[i].len >> (8 * k));
        memcpy(p, e[i].name, e[i].len);
        p += e[i].len;
        for (int k = 0; k < 4; k++) *p++ = (uint8_t)(e[i].enc >> (8 * k));
        put64(p, e[i].bits);
        p += 8;
    }
    memcpy(p, b + at + old, len - at - old);
    put64(o + 8, out_len);
    reseal(o, out_len);
    spit(path, o, out_len);
    free(o);
}

/* One training step of m from its optimiser (a fixed batch): how a loaded run goes on. */
static void one_step(rp_model *m, const rp_adam_cfg *oc, rp_adam_state *os)
{
    int32_t tok[RB * RT], tgt[RB * RT];
    batch_for(0, tok, tgt);
    float loss;
    rp_model_zero_grad(m);
    if (rp_model_forward(m, tok, tgt, NULL, RB, RT, 1, &loss) == RP_OK &&
        rp_model_backward(m) == RP_OK)
        rp_adam_step(oc, os, rp_model_params(m)->data, rp_model_grads(m)->data, os->n);
}

static void test_version7(void)
{
    printf("-- version 7: the optimiser's config by row\n");
    /* an old file (version 1's optimiser block) saved again is version 7: it loads to the same
     * optimiser, and a step from either gives the same bits */
    char path[128], bad[128];
    path_in(path, sizeof path, "v7.ckpt");
    path_in(bad, sizeof bad, "v7bad.ckpt");
    rp_checkpoint old, now;
    memset(&old, 0, sizeof old);
    memset(&now, 0, sizeof now);
    const char *dir = getenv("ROPER_CKPT_FIXTURES");
    char fixture[256];
    snprintf(fixture, sizeof fixture, "%s/roper_adam.rpck",
             dir ? dir : "tests/fixtures/checkpoints");
    if (!CHECK_STATUS(rp_checkpoint_load(fixture, &old), RP_OK, NULL) || !old.has_optim) return;
    CHECK_STATUS(rp_checkpoint_save(path, old.model, &old.opt_cfg, &old.opt_state), RP_OK, NULL);
    size_t len = 0;
    uint8_t *b = slurp(path, &len);
    CHECK(b && b[4] == 7, "an old file with an optimiser saved again: version 7");
    if (CHECK_STATUS(rp_checkpoint_load(path, &now), RP_OK, NULL)) {
        CHECK(opt_cfg_equal(&old.opt_cfg, &now.opt_cfg) &&
                  now.opt_state.step == old.opt_state.step &&
                  !memcmp(now.opt_state.m, old.opt_state.m, 4 * (size_t)old.opt_state.n) &&
                  !memcmp(now.opt_state.v, old.opt_state.v, 4 * (size_t)old.opt_state.n),
              "the same optimiser config and state");
        int64_t n = rp_model_param_count(old.model);
        /* the fixture's model has max_batch 2: steps on batches of RB = 3 load it for RB */
        rp_checkpoint a, c;
        memset(&a, 0, sizeof a);
        memset(&c, 0, sizeof c);
        if (CHECK_STATUS(rp_checkpoint_load_batch(fixture, RB, &a), RP_OK, NULL) &&
            CHECK_STATUS(rp_checkpoint_load_batch(path, RB, &c), RP_OK, NULL)) {
            one_step(a.model, &a.opt_cfg, &a.opt_state);
            one_step(c.model, &c.opt_cfg, &c.opt_state);
            CHECK(!memcmp(rp_model_params(a.model)->data, rp_model_params(c.model)->data,
                          4 * (size_t)n) &&
                      !memcmp(a.opt_state.m, c.opt_state.m, 4 * (size_t)n) &&
                      !memcmp(a.opt_state.v, c.opt_state.v, 4 * (size_t)n) &&
                      a.opt_state.step == c.opt_state.step,
                  "a step from the old file and from its version 7 copy: the same bits");
            rp_checkpoint_free_optim(&a);
            rp_checkpoint_free_optim(&c);
        }
        rp_model_free(a.model);
        rp_model_free(c.model);
        rp_checkpoint_free_optim(&now);
        rp_model_free(now.model);
    }

    /* the config's entries: where docs/checkpoint.md puts them */
    rp_model *m = old.model;
    size_t at = 144 + V7_SHIFT;
    for (int i = 0; i < rp_model_num_tensors(m); i++) {
        const rp_param_info *pi = rp_model_param(m, i);
        at += 4 + strlen(pi->name) + 4 + 8 * (size_t)pi->ndim + 4 * (size_t)pi->numel;
    }
    at += 44;
    opt_entry e[64], f[64];
    int n = entries_of(&old.opt_cfg, e);
    CHECK(b && at + opt_block_size() + 16 + 8 * (size_t)old.opt_state.n + 8 == len &&
              get64(b + at) == ((uint64_t)2 << 32 | (uint64_t)rp_adam_nkeys) &&
              !memcmp(b + at + 8, "lr", 2) && get64(b + at + 14) == e[0].bits,
          "the entry count, then lr's entry (name length 2, \"lr\", encoding 0, the value)");

    /* another order: the same config */
    for (int i = 0; i < n; i++) f[i] = e[n - 1 - i];
    forge_opt(bad, b, len, at, (uint32_t)n, f, n);
    memset(&now, 0, sizeof now);
    if (CHECK_STATUS(rp_checkpoint_load(bad, &now), RP_OK, "entries in reverse order")) {
        CHECK(opt_cfg_equal(&now.opt_cfg, &old.opt_cfg), "entries in reverse order: the config");
        rp_checkpoint_free_optim(&now);
        rp_model_free(now.model);
    }
    /* a row without an entry (a row added after the file was written) reads as its default */
    memcpy(f, e, sizeof e);
    const rp_optim_key *wd = rp_adam_key("weight_decay");
    int iwd = (int)(wd - rp_adam_keys);
    memmove(f + iwd, f + iwd + 1, (size_t)(n - iwd - 1) * sizeof f[0]);
    forge_opt(bad, b, len, at, (uint32_t)n - 1, f, n - 1);
    memset(&now, 0, sizeof now);
    if (CHECK_STATUS(rp_checkpoint_load(bad, &now), RP_OK, "no weight_decay entry")) {
        rp_adam_cfg want = old.opt_cfg;
        want.weight_decay = wd->def;
        CHECK(old.opt_cfg.weight_decay != wd->def && opt_cfg_equal(&now.opt_cfg, &want),
              "no weight_decay entry: its default, the other fields as stored");
        rp_checkpoint_free_optim(&now);
        rp_model_free(now.model);
    }
    /* forgeries: each entry's checks */
    struct {
        int entry;      /* the entry changed */
        opt_entry with; /* its new fields (name NULL: keep the name) */
        const char *want;
    } forged[] = {
        {1, {"momentum", 8, 0, 0}, "the optimiser setting momentum is unknown to this roper (a "
                                   "newer roper's file?)"},
        {1, {"lr", 2, 0, 0}, "corrupted (optimiser setting lr twice)"},
        {0, {"lr", 2, 1, 0}, "corrupted (optimiser setting lr: encoding 1, not 0)"},
        {0, {"lr", 0, 0, 0}, "corrupted (optimiser entry 0: name of 0 bytes)"},
        {0, {"lr", 64, 0, 0}, "corrupted (optimiser entry 0: name of 64 bytes)"},
        {2, {"Beta2", 5, 0, 0}, "corrupted (optimiser entry 2: not a name)"},
        {2, {"b\0ta2", 5, 0, 0}, "corrupted (optimiser entry 2: not a name)"},
        {-1, {"schedule", 8, 1, (uint64_t)1 << 40},
         "corrupted (optimiser setting schedule: 1099511627776)"},
        {-1, {"schedule", 8, 1, 7},
         "bad optimiser config: schedule must be constant, cosine or noam, got 7"},
    };
    static const char pad[64] = "lr";
    for (size_t t = 0; t < sizeof forged / sizeof forged[0]; t++) {
        memcpy(f, e, sizeof e);
        int i = forged[t].entry;
        if (i < 0) i = (int)(rp_adam_key(forged[t].with.name) - rp_adam_keys);
        f[i] = forged[t].with;
        if (f[i].len == 64) f[i].name = pad;
        forge_opt(bad, b, len, at, (uint32_t)n, f, n);
        char what[64];
        snprintf(what, sizeof what, "forged optimiser entry %zu", t);
        expect_io(bad, forged[t].want, 1, what);
    }
    free(b);
    unlink(path);
    unlink(bad);
    rp_checkpoint_free_optim(&old);
    rp_model_free(old.model);
}

/* ---- memory ---------------------------------------------------------------------------------- */

/* A sparse file with a valid header that claims more bytes than this process may allocate: the
 * loader refuses it before reading it into memory (overcommit would let malloc succeed). */
static void test_memory_cap(void)
{
    printf("-- a file larger than the memory available\n");
    int64_t avail = rp_mem_available();
    if (avail < 0) {
        printf("  skipped: rp_mem_available() cannot tell on this system\n");
        return;
    }
    char path[128];
    path_in(path, sizeof path, "huge.ckpt");
    uint64_t size = (uint64_t)avail + (uint64_t)avail / 2 + ((uint64_t)1 << 30);
    uint8_t hdr[16] = {'R', 'P', 'C', 'K', 1, 0, 0, 0};
    put64(hdr + 8, size);
    spit(path, hdr, sizeof hdr);
    if (truncate(path, (off_t)size) != 0) {
        printf("  skipped: cannot make a sparse file of %llu bytes: %s\n",
               (unsigned long long)size, strerror(errno));
        unlink(path);
        return;
    }
    expect_io(path, "reading the file needs ", 0, "sparse file larger than memory");
    const char *msg = rp_last_error();
    CHECK(strstr(msg, "of memory available") != NULL, "message names the memory: \"%s\"", msg);
    printf("  %s\n", msg);
    unlink(path);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/rp_ckpt_test.XXXXXX");
    if (!mkdtemp(g_dir)) {
        printf("FATAL: mkdtemp: %s\n", strerror(errno));
        return 2;
    }
    test_old_files();
    test_round_trip();
    test_version3();
    test_version5();
    test_version6();
    test_version7();
    test_damaged();
    test_resume();
    test_special_files();
    test_memory_cap();
    test_kills_and_stale_temps(0);
    test_kills_and_stale_temps(1);
    const char *none[] = {NULL};
    CHECK(stray_files(none) == 0, "temporary folder empty at the end");
    CHECK(rmdir(g_dir) == 0, "removed %s: %s", g_dir, strerror(errno));
    return check_summary("test_checkpoint");
}
