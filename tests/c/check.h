/* A tiny test harness for the C tests (one test program per area, each with its own main).
 *
 *   CHECK(cond, fmt, ...)                  one check; prints file:line, the expression and the
 *                                          message when cond is false
 *   CHECK_CLOSE(got, want, n, tol, label)  one check over n elements: |got[i] - want[i]| <= tol
 *                                          (absolute). got and want may each be float* or double*.
 *                                          Prints the max abs diff and its index always, and the
 *                                          first mismatches (index, got, want) on failure. NaN
 *                                          matches only NaN, an infinity only the same infinity.
 *   CHECK_STATUS(expr, want, substr)       one check: expr returns want, and (when want != RP_OK
 *                                          and substr != NULL) rp_last_error() contains substr
 *   CHECK_MSG(expr, want, msg)             one check: expr returns want, and (when want != RP_OK)
 *                                          rp_last_error() is exactly msg
 *   check_summary(name)                    prints "<name>: N passed, N failed", returns the exit code
 *
 * Set CHECK_VERBOSE=1 in the environment to also print the error message of every CHECK_STATUS.
 *
 * Below the harness: a few helpers shared by the tests (a deterministic generator that does not
 * depend on rp_rng, strided element access written independently of the core, tensor creation).
 */
#ifndef RP_TEST_CHECK_H
#define RP_TEST_CHECK_H

/* A GCC bug on aarch64: GCC 12.2 (Debian 12's aarch64-linux-gnu-gcc; its arm64 gcc is the same
 * version) stops with "internal compiler error: in vect_transform_reduction, at
 * tree-vect-loop.cc:7457" when its loop vectorizer turns a maximum over values widened from float
 * into vector fmaxnm, the tests' idiom
 *     double m = 0.0; for (i = 0; i < 72; i++) m = fmax(m, fabs((double)a[i] - (double)b[i]));
 * (test_attention, test_rope_axes and test_rope_freq at -O2; x86-64's GCC has no such vector
 * maximum and compiles them). The test programs are compiled without the loop vectorizer there
 * (the library never includes this file and keeps it): the same results, since without
 * -ffast-math the vectorizer changes no result, only slower reference loops. */
#if defined(__aarch64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-loop-vectorize")
#endif

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rp.h"

static int check_passed_ = 0;
static int check_failed_ = 0;

#if defined(__GNUC__)
#define CHECK_PRINTF_(a, b) __attribute__((format(printf, a, b)))
#else
#define CHECK_PRINTF_(a, b)
#endif

static inline int check_cond_(int ok, const char *file, int line, const char *expr, const char *fmt,
                              ...) CHECK_PRINTF_(5, 6);
static inline int check_cond_(int ok, const char *file, int line, const char *expr, const char *fmt,
                              ...)
{
    if (ok) {
        check_passed_++;
        return 1;
    }
    check_failed_++;
    printf("FAIL %s:%d: CHECK(%s): ", file, line, expr);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    return 0;
}

#define CHECK(cond, ...) check_cond_((cond) ? 1 : 0, __FILE__, __LINE__, #cond, __VA_ARGS__)

static inline double check_elem_(const void *p, int is_double, int64_t i)
{
    return is_double ? ((const double *)p)[i] : (double)((const float *)p)[i];
}

static inline int check_close_(const void *got, int got_d, const void *want, int want_d, int64_t n,
                               double tol, const char *label, const char *file, int line)
{
    int64_t bad = 0, imax = -1;
    double maxdiff = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double g = check_elem_(got, got_d, i), w = check_elem_(want, want_d, i);
        int ok;
        double diff;
        if (isnan(g) || isnan(w)) {
            ok = isnan(g) && isnan(w);
            diff = ok ? 0.0 : HUGE_VAL;
        } else if (isinf(g) || isinf(w)) {
            ok = g == w;
            diff = ok ? 0.0 : HUGE_VAL;
        } else {
            diff = fabs(g - w);
            ok = diff <= tol;
        }
        if (imax < 0 || diff > maxdiff) {
            maxdiff = diff;
            imax = i;
        }
        if (!ok) {
            if (bad < 5)
                printf("FAIL %s:%d: %s: [%lld] got %.9g want %.9g (diff %.3g, tol %.3g)\n", file,
                       line, label, (long long)i, g, w, diff, tol);
            bad++;
        }
    }
    if (bad) {
        check_failed_++;
        printf("FAIL %s:%d: %s: %lld of %lld elements differ; max|diff| %.3g at [%lld], tol %.3g\n",
               file, line, label, (long long)bad, (long long)n, maxdiff, (long long)imax, tol);
        fflush(stdout);
        return 0;
    }
    check_passed_++;
    printf("  ok %s: max|diff| %.3g at [%lld] (n %lld, tol %.3g)\n", label, maxdiff,
           (long long)imax, (long long)n, tol);
    return 1;
}

#define CHECK_IS_DOUBLE_(p) _Generic((p), double *: 1, const double *: 1, default: 0)
#define CHECK_CLOSE(got, want, n, tol, label)                                                 \
    check_close_((const void *)(got), CHECK_IS_DOUBLE_(got), (const void *)(want),           \
                 CHECK_IS_DOUBLE_(want), (int64_t)(n), (double)(tol), (label), __FILE__, __LINE__)

static inline int check_status_(rp_status got, rp_status want, const char *substr,
                                const char *expr, const char *file, int line)
{
    const char *msg = rp_last_error();
    int ok = got == want;
    if (ok && want != RP_OK && substr && !strstr(msg, substr)) ok = 0;
    if (ok) {
        check_passed_++;
        if (getenv("CHECK_VERBOSE") && want != RP_OK)
            printf("  ok %s -> %s: \"%s\"\n", expr, rp_status_name(got), msg);
        return 1;
    }
    check_failed_++;
    printf("FAIL %s:%d: %s: got status %s (%d), want %s (%d)%s%s%s; message \"%s\"\n", file, line,
           expr, rp_status_name(got), (int)got, rp_status_name(want), (int)want,
           substr && want != RP_OK ? " with \"" : "", substr && want != RP_OK ? substr : "",
           substr && want != RP_OK ? "\" in the message" : "", msg);
    fflush(stdout);
    return 0;
}

#define CHECK_STATUS(expr, want, substr) \
    check_status_((expr), (want), (substr), #expr, __FILE__, __LINE__)

/* CHECK_MSG(expr, want, msg): one check: expr returns want and, when want != RP_OK, rp_last_error()
 * is exactly msg. */
static inline void check_msg_(rp_status got, rp_status want, const char *msg, const char *expr,
                              const char *file, int line)
{
    const char *m = rp_last_error();
    int ok = got == want && (want == RP_OK || strcmp(m, msg) == 0);
    check_cond_(ok, file, line, expr, "got %s \"%s\", want %s \"%s\"", rp_status_name(got),
                got == RP_OK ? "" : m, rp_status_name(want), want == RP_OK ? "" : msg);
}

#define CHECK_MSG(expr, want, msg) check_msg_((expr), (want), (msg), #expr, __FILE__, __LINE__)

static inline int check_summary(const char *name)
{
    printf("%s: %d passed, %d failed\n", name, check_passed_, check_failed_);
    fflush(stdout);
    return check_failed_ ? 1 : 0;
}

/* ---- helpers shared by the tests ---- */

/* splitmix64: a test-only generator, independent of rp_rng. */
static inline uint64_t check_rand_u64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi). */
static inline double check_rand(uint64_t *state, double lo, double hi)
{
    return lo + (hi - lo) * ((double)(check_rand_u64(state) >> 11) * 0x1.0p-53);
}

/* n floats uniform in [lo, hi) from state, malloc'ed (at least one float; the caller frees). */
static inline float *check_rand_floats(uint64_t *state, int64_t n, double lo, double hi)
{
    float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) p[i] = (float)check_rand(state, lo, hi);
    return p;
}

/* rp_model_new, or the test program stops (exit 2) with core's message: a model the test needs
 * could not be made. */
static inline rp_model *check_model_new(const rp_model_cfg *c)
{
    rp_model *m = rp_model_new(c);
    if (!m) {
        printf("FATAL: rp_model_new: %s\n", rp_last_error());
        exit(2);
    }
    return m;
}

/* A small model config, about 2 KB of parameters: vocab 5, d_model 8, one head (d_k 8: fractions
 * 0.25, 0.5, 0.75 give even widths), one layer, d_ff 4, seq_len 6, max_batch 1, pe and seed as
 * given, the rest rp_model_cfg_default's. */
static inline rp_model_cfg check_small_cfg(rp_pe pe, uint64_t seed)
{
    rp_model_cfg c = rp_model_cfg_default(5);
    c.d_model = 8;
    c.heads = 1;
    c.layers = 1;
    c.d_ff = 4;
    c.seq_len = 6;
    c.max_batch = 1;
    c.pe.mode = pe;
    c.seed = seed;
    return c;
}

/* The positional scheme an attention test takes (rp_attn_cfg.scheme), built as core builds one
 * (rp_pe_scheme_init): mode pe with the placements rotate (0: the mode's own), each rotated one
 * with its width (q, k, v, o; the others 0), base 10000 and half pairing. A pe or rotate that
 * rp_pe_scheme_init refuses gives its zeroed scheme. */
static inline rp_pe_scheme check_scheme_rot(rp_pe pe, int rotate, int64_t q, int64_t k, int64_t v,
                                            int64_t o)
{
    rp_pe_cfg c = {.mode = pe, .rotate = rotate, .base = 10000.0, .pairing = RP_PAIR_HALF};
    const int64_t d_rot[4] = {q, k, v, o};
    rp_pe_scheme s;
    (void)rp_pe_scheme_init(&s, &c, d_rot);
    return s;
}
/* The mode's own placements: q and k d_rot_qk features, v and o d_rot_v. */
static inline rp_pe_scheme check_scheme(rp_pe pe, int64_t d_rot_qk, int64_t d_rot_v)
{
    return check_scheme_rot(pe, 0, d_rot_qk, d_rot_qk, d_rot_v, d_rot_v);
}
/* *s with the widths of its rotated placements set (q and k d_rot_qk, v and o d_rot_v): its
 * mode, placements, base and pairing kept. */
static inline void check_scheme_widths(rp_pe_scheme *s, int64_t d_rot_qk, int64_t d_rot_v)
{
    rp_pe_cfg c = {.mode = s->pe, .rotate = s->rotate, .base = s->base, .pairing = s->pairing};
    const int64_t d_rot[4] = {d_rot_qk, d_rot_qk, d_rot_v, d_rot_v};
    (void)rp_pe_scheme_init(s, &c, d_rot);
}

/* The sets of modes the tests loop over, read off the mode table (pe.h) so that a new mode enters
 * every loop of its kind: every mode, the rotary ones (all, or those linear attention supports),
 * those without relative terms (the plain and rotary ones), the relative ones (all, or those
 * that read a config key); and the lists of them the expected messages hold (check_pe_msg).
 * What a test expects of a mode (its reference formula) stays written out in the test, which
 * then fails until the new mode's is there. */
typedef enum {
    CHECK_PE_ALL,
    CHECK_PE_ROTARY,
    CHECK_PE_LINEAR_ROTARY, /* the rotary ones linear attention supports */
    CHECK_PE_NOT_RELATIVE,
    CHECK_PE_RELATIVE,
    CHECK_PE_CLIP,   /* the relative ones that read rel_clip */
    CHECK_PE_BUCKETS /* the relative ones that read rel_buckets */
} check_pe_set;

static inline int check_pe_in(int pe, check_pe_set set)
{
    const rp_pe_mode *m = rp_pe_mode_of((rp_pe)pe);
    int relative = rp_rel_of(m->rel)->terms != 0;
    switch (set) {
    case CHECK_PE_ROTARY: return m->rotary;
    case CHECK_PE_LINEAR_ROTARY: return m->rotary && m->linear;
    case CHECK_PE_NOT_RELATIVE: return !relative;
    case CHECK_PE_RELATIVE: return relative;
    case CHECK_PE_CLIP: return (rp_rel_of(m->rel)->uses & RP_USES_CLIP) != 0;
    case CHECK_PE_BUCKETS: return (rp_rel_of(m->rel)->uses & RP_USES_BUCKETS) != 0;
    default: return 1;
    }
}

/* The names of the modes of set as messages list them, "rope, roper or roper_legacy" (joined here,
 * not by core's rp_pe_list), into buf. */
static inline const char *check_pe_list(char *buf, size_t n, check_pe_set set)
{
    int count = 0, done = 0;
    for (int pe = 0; pe < (int)RP_PE_COUNT; pe++) count += check_pe_in(pe, set);
    buf[0] = '\0';
    for (int pe = 0; pe < (int)RP_PE_COUNT; pe++)
        if (check_pe_in(pe, set)) {
            const char *sep = done == 0 ? "" : done == count - 1 ? " or " : ", ";
            snprintf(buf + strlen(buf), n - strlen(buf), "%s%s", sep, rp_pe_name((rp_pe)pe));
            done++;
        }
    return buf;
}

/* Every mode with its code, as an enum's range message lists them:
 * "none (0), ... or alibi (10)". */
static inline const char *check_pe_values(char *buf, size_t n)
{
    buf[0] = '\0';
    for (int pe = 0; pe < (int)RP_PE_COUNT; pe++)
        snprintf(buf + strlen(buf), n - strlen(buf), "%s%s (%d)",
                 pe == 0 ? "" : pe == (int)RP_PE_COUNT - 1 ? " or " : ", ", rp_pe_name((rp_pe)pe),
                 pe);
    return buf;
}

/* msg with each of {rotary}, {linear_rotary}, {clip} and {buckets} replaced by check_pe_list of
 * that set, {values} by check_pe_values and {count} by the number of modes (the first code that
 * is no mode), into buf: an expected message that lists modes. */
static inline const char *check_pe_msg(char *buf, size_t n, const char *msg)
{
    static const char *const tokens[] = {"{rotary}", "{linear_rotary}", "{clip}", "{buckets}",
                                         "{values}", "{count}"};
    static const check_pe_set sets[] = {CHECK_PE_ROTARY, CHECK_PE_LINEAR_ROTARY, CHECK_PE_CLIP,
                                        CHECK_PE_BUCKETS};
    size_t at = 0;
    buf[0] = '\0';
    while (*msg && at + 1 < n) {
        int i = 0;
        while (i < 6 && strncmp(msg, tokens[i], strlen(tokens[i])) != 0) i++;
        if (i == 6) {
            buf[at++] = *msg++;
            buf[at] = '\0';
            continue;
        }
        if (i < 4) check_pe_list(buf + at, n - at, sets[i]);
        else if (i == 4) check_pe_values(buf + at, n - at);
        else snprintf(buf + at, n - at, "%d", (int)RP_PE_COUNT);
        at += strlen(buf + at);
        msg += strlen(tokens[i]);
    }
    return buf;
}

/* for (pe over the modes of set) statement: CHECK_EACH_PE(pe, CHECK_PE_ROTARY) { ... } */
#define CHECK_EACH_PE(pe, set)                    \
    for (int pe = 0; pe < (int)RP_PE_COUNT; pe++) \
        if (!check_pe_in(pe, set)) {              \
        } else

/* Writes n bytes to path, or stops the test program (exit 2). */
static inline void check_write_bytes(const char *path, const void *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(b, 1, n, f) != n) || fclose(f) != 0) {
        printf("FATAL: cannot write %s\n", path);
        exit(2);
    }
}

/* The whole file, malloc'ed with one spare byte, its size in *n (NULL when it cannot be read). */
static inline unsigned char *check_read_bytes(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)(len > 0 ? len : 0) + 1);
    *n = fread(b, 1, (size_t)(len > 0 ? len : 0), f);
    fclose(f);
    return b;
}

/* The path of an interop fixture (ROPER_INTEROP_FIXTURES, else tests/fixtures/interop) in buf. */
static inline const char *check_interop_fixture(char *buf, size_t n, const char *name)
{
    const char *dir = getenv("ROPER_INTEROP_FIXTURES");
    snprintf(buf, n, "%s/%s", dir ? dir : "tests/fixtures/interop", name);
    return buf;
}

/* A malloc'ed copy of n floats (the caller frees). */
static inline float *check_copy_floats(const float *x, int64_t n)
{
    float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    memcpy(p, x, sizeof(float) * (size_t)n);
    return p;
}

/* Advances the row-major multi-index idx over shape; returns 0 after the last index. */
static inline int check_next_index(int ndim, const int64_t *shape, int64_t *idx)
{
    for (int d = ndim - 1; d >= 0; d--) {
        if (++idx[d] < shape[d]) return 1;
        idx[d] = 0;
    }
    return 0;
}

/* Pointer to element idx of t, from the struct fields (not from rp_tensor_index_offset). */
static inline float *check_at(const rp_tensor *t, const int64_t *idx)
{
    int64_t off = t->offset;
    for (int d = 0; d < t->ndim; d++) off += idx[d] * t->stride[d];
    return t->storage->data + off;
}

static inline int64_t check_numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    return n;
}

/* Copies t's elements in row-major index order into dst (numel floats). */
static inline void check_gather(float *dst, const rp_tensor *t)
{
    int64_t idx[RP_MAX_DIMS] = {0};
    if (check_numel(t->ndim, t->shape) == 0) return;
    int64_t i = 0;
    do dst[i++] = *check_at(t, idx);
    while (check_next_index(t->ndim, t->shape, idx));
}

/* Writes values in row-major index order into t (any strides). */
static inline void check_scatter(rp_tensor *t, const float *src)
{
    int64_t idx[RP_MAX_DIMS] = {0};
    if (check_numel(t->ndim, t->shape) == 0) return;
    int64_t i = 0;
    do *check_at(t, idx) = src[i++];
    while (check_next_index(t->ndim, t->shape, idx));
}

/* Fills t (any strides) with uniform values in [lo, hi). */
static inline void check_fill_rand(rp_tensor *t, uint64_t *state, double lo, double hi)
{
    int64_t idx[RP_MAX_DIMS] = {0};
    if (check_numel(t->ndim, t->shape) == 0) return;
    do *check_at(t, idx) = (float)check_rand(state, lo, hi);
    while (check_next_index(t->ndim, t->shape, idx));
}

/* A new tensor; aborts the test program when creation fails (nothing sensible can follow). */
static inline rp_tensor check_new(int ndim, const int64_t *shape)
{
    rp_tensor t;
    rp_status st = rp_tensor_new(&t, ndim, shape);
    if (st != RP_OK) {
        printf("FATAL: rp_tensor_new failed: %s\n", rp_last_error());
        exit(2);
    }
    return t;
}

/* Failing calls must leave `out` empty without touching what was in it: check_poison() fills a
 * tensor with a reference to a dummy storage whose refcount must never change
 * (check_poison_intact()). */
static rp_storage check_dummy_storage_ = {NULL, 0, 1000};

static inline void check_poison(rp_tensor *t)
{
    memset(t, 0, sizeof *t);
    t->storage = &check_dummy_storage_;
    t->ndim = 1;
    t->shape[0] = 1;
    t->stride[0] = 1;
}

static inline int check_poison_intact(void) { return check_dummy_storage_.refcount == 1000; }

#define CHECK_SHAPE(...) (const int64_t[]){__VA_ARGS__}

#endif
