/* What the task kinds share (declared in task_impl.h): UTF-8 decoding and encoding, and the
 * vocabulary (id <-> code point). Calls nothing else in tasks/. */
#include <stdlib.h>

#include "task_impl.h"

int32_t rp__utf8_next(const unsigned char *s, size_t n, size_t *i)
{
    size_t p = *i;
    unsigned c = s[p];
    int len;
    uint32_t cp, min;
    if (c < 0x80) {
        *i = p + 1;
        return (int32_t)c;
    } else if ((c & 0xE0) == 0xC0) {
        len = 2, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        len = 3, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        len = 4, cp = c & 0x07, min = 0x10000;
    } else {
        return -1;
    }
    if (n - p < (size_t)len) return -1;
    for (int k = 1; k < len; k++) {
        unsigned b = s[p + (size_t)k];
        if ((b & 0xC0) != 0x80) return -1;
        cp = (cp << 6) | (b & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return -1;
    *i = p + (size_t)len;
    return (int32_t)cp;
}

int rp__utf8_put(int32_t cp, char *out)
{
    uint32_t c = (uint32_t)cp;
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    } else if (c < 0x800) {
        out[0] = (char)(0xC0 | (c >> 6));
        out[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    } else if (c < 0x10000) {
        out[0] = (char)(0xE0 | (c >> 12));
        out[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        out[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (c >> 18));
    out[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((c >> 6) & 0x3F));
    out[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

static int cpid_cmp(const void *a, const void *b)
{
    int32_t x = ((const rp_task_cpid *)a)->cp, y = ((const rp_task_cpid *)b)->cp;
    return (x > y) - (x < y);
}

rp_status rp__task_set_vocab(rp_task *t, const int32_t *cps, int64_t n)
{
    t->vocab = malloc((size_t)n * sizeof *t->vocab);
    t->lookup = malloc((size_t)n * sizeof *t->lookup);
    if (!t->vocab || !t->lookup) return rp_error(RP_ERR_NOMEM, "task: vocabulary allocation");
    t->n_vocab = n;
    for (int i = 0; i < 128; i++) t->ascii_id[i] = -1;
    for (int64_t i = 0; i < n; i++) {
        t->vocab[i] = cps[i];
        t->lookup[i].cp = cps[i];
        t->lookup[i].id = (int32_t)i;
        if (cps[i] >= 0 && cps[i] < 128) t->ascii_id[cps[i]] = (int32_t)i;
    }
    qsort(t->lookup, (size_t)n, sizeof *t->lookup, cpid_cmp);
    return RP_OK;
}

int32_t rp__ascii_id(const rp_task *t, char c)
{
    unsigned char u = (unsigned char)c;
    RP_ASSERT(u < 128 && t->ascii_id[u] >= 0);
    return t->ascii_id[u];
}

int32_t rp__task_lookup_id(const rp_task *t, int32_t cp)
{
    if (cp >= 0 && cp < 128) return t->ascii_id[cp];
    int64_t lo = 0, hi = t->n_vocab - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (t->lookup[mid].cp == cp) return t->lookup[mid].id;
        if (t->lookup[mid].cp < cp) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}
