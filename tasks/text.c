/* Character-level language modelling on UTF-8 text: a file, or every regular file of a directory
 * (sorted by name, concatenated); vocabulary = the sorted distinct code points; the last
 * valid_fraction of the code points is the validation split. Files are read through
 * core/io/fileio.h: never blocking, regular files only, at most max_bytes in all. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fileio.h"
#include "sysmem.h"
#include "task_impl.h"

typedef struct { unsigned char *data; size_t n; } bytes;

/* Appends the regular file path (at most budget bytes; rp_file_read_all never blocks and refuses
 * what is not a regular file) to b and checks that it is UTF-8. */
static rp_status append_file(bytes *b, const char *path, int64_t budget)
{
    char *data;
    int64_t len;
    RP_TRY(rp_file_read_all(path, budget, "max_bytes", &data, &len));
    size_t i = 0;
    while (i < (size_t)len) {
        size_t at = i;
        if (rp__utf8_next((const unsigned char *)data, (size_t)len, &i) < 0) {
            free(data);
            return rp_error(RP_ERR_IO, "%s: invalid UTF-8 at byte %zu (not a text file?)", path,
                            at);
        }
    }
    if (b->data == NULL) { /* the first file: take its buffer */
        b->data = (unsigned char *)data;
        b->n = (size_t)len;
        return RP_OK;
    }
    unsigned char *d = realloc(b->data, b->n + (size_t)len + 1);
    if (!d) {
        free(data);
        return rp_error(RP_ERR_NOMEM, "%s: out of memory", path);
    }
    memcpy(d + b->n, data, (size_t)len);
    b->data = d;
    b->n += (size_t)len;
    free(data);
    return RP_OK;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every regular file of folder dir (symbolic links followed; other entries skipped without being
 * opened), sorted by name and concatenated into b; their total size at most max_bytes. */
static rp_status read_dir(bytes *b, const char *dir, int64_t max_bytes)
{
    DIR *d = opendir(dir);
    if (!d) return rp_error(RP_ERR_IO, "%s: %s", dir, strerror(errno));
    char **names = NULL;
    size_t n = 0, cap = 0;
    int64_t total = 0;
    rp_status st = RP_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
            continue;
        struct stat sb;
        if (fstatat(dirfd(d), e->d_name, &sb, 0) != 0 || !S_ISREG(sb.st_mode)) continue;
        if (n == cap) {
            char **nn = realloc(names, (cap * 2 + 16) * sizeof *names);
            if (!nn) {
                st = rp_error(RP_ERR_NOMEM, "%s: out of memory", dir);
                break;
            }
            names = nn;
            cap = cap * 2 + 16;
        }
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        char *full = malloc(len);
        if (!full) {
            st = rp_error(RP_ERR_NOMEM, "%s: out of memory", dir);
            break;
        }
        snprintf(full, len, "%s/%s", dir, e->d_name);
        names[n++] = full;
        total += (int64_t)sb.st_size;
    }
    closedir(d);
    if (st == RP_OK && n == 0) st = rp_error(RP_ERR_IO, "%s: no regular files in this folder", dir);
    if (st == RP_OK && total > max_bytes) {
        char a[32], c[32];
        st = rp_error(RP_ERR_IO, "%s: its %zu files hold %s, more than the limit of %s (max_bytes)",
                      dir, n, rp_bytes_str(a, sizeof a, (double)total),
                      rp_bytes_str(c, sizeof c, (double)max_bytes));
    }
    if (st == RP_OK) {
        qsort(names, n, sizeof *names, name_cmp);
        for (size_t i = 0; i < n && st == RP_OK; i++)
            st = append_file(b, names[i], max_bytes - (int64_t)b->n);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return st;
}

static int cp_cmp(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

rp_status rp__text_load(rp_task *t)
{
    const char *path = t->path;
    bytes b = {NULL, 0};
    struct stat sb;
    rp_status st;
    /* stat never blocks (it opens nothing): a folder is read as one, anything else goes through
     * the reader, which refuses what is not a regular file */
    if (stat(path, &sb) != 0) return rp_error(RP_ERR_IO, "%s: %s", path, strerror(errno));
    st = S_ISDIR(sb.st_mode) ? read_dir(&b, path, t->cfg.max_bytes)
                             : append_file(&b, path, t->cfg.max_bytes);
    if (st == RP_OK && b.n == 0)
        st = rp_error(RP_ERR_IO, "%s: empty (no text to train on)", path);
    int32_t *cps = NULL, *sorted = NULL;
    size_t n = 0;
    if (st == RP_OK) {
        cps = malloc(b.n * sizeof *cps);
        sorted = malloc(b.n * sizeof *sorted);
        if (!cps || !sorted) st = rp_error(RP_ERR_NOMEM, "%s: out of memory", path);
    }
    if (st == RP_OK) {
        size_t i = 0;
        while (i < b.n) cps[n++] = rp__utf8_next(b.data, b.n, &i);   /* validated on reading */
        memcpy(sorted, cps, n * sizeof *cps);
        qsort(sorted, n, sizeof *sorted, cp_cmp);
        size_t m = 0;
        for (size_t k = 0; k < n; k++)
            if (m == 0 || sorted[m - 1] != sorted[k]) sorted[m++] = sorted[k];
        st = rp__task_set_vocab(t, sorted, (int64_t)m);
        if (st == RP_OK) {
            for (size_t k = 0; k < n; k++) {   /* id = index in the sorted vocabulary */
                size_t lo = 0, hi = m;
                while (hi - lo > 1) {
                    size_t mid = lo + (hi - lo) / 2;
                    if (sorted[mid] <= cps[k]) lo = mid;
                    else hi = mid;
                }
                cps[k] = (int32_t)lo;
            }
            t->tokens = cps;
            cps = NULL;
            t->n_tokens = (int64_t)n;
            int64_t n_valid = (int64_t)((double)n * t->cfg.valid_fraction);
            t->n_train = t->n_tokens - n_valid;
        }
    }
    free(cps);
    free(sorted);
    free(b.data);
    return st;
}

rp_status rp__text_batch(rp_task *t, rp_rng *rng, int64_t B, int split, int32_t *inputs,
                         int32_t *targets)
{
    int64_t T = t->cfg.seq_len;
    int64_t start = split ? t->n_train : 0, len = split ? t->n_tokens - t->n_train : t->n_train;
    int lm = t->cfg.kind == RP_TASK_LM;
    if (lm) { /* lm: three splits */
        start = t->split_at[split];
        len = t->split_at[split + 1] - start;
    }
    if (len < T + 1)
        return rp_error(RP_ERR_ARG,
                        "the %s split of %s has %lld %s, a window needs seq_len + 1 = %lld",
                        split == 0 ? "train" : split == 1 ? "validation" : "test", t->path,
                        (long long)len, lm ? "tokens" : "characters", (long long)(T + 1));
    for (int64_t b = 0; b < B; b++) {
        const int32_t *w = t->tokens + start + rp_rng_int(rng, 0, len - (T + 1));
        memcpy(inputs + b * T, w, (size_t)T * sizeof *w);
        memcpy(targets + b * T, w + 1, (size_t)T * sizeof *w);
    }
    return RP_OK;
}
