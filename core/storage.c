#include "storage.h"

#include <stdlib.h>
#include <string.h>

#include "status.h"

rp_storage *rp_storage_new(size_t n)
{
    if (n > ((size_t)1 << 40)) {
        rp_error(RP_ERR_NOMEM, "cannot allocate %zu floats", n);
        return NULL;
    }
    rp_storage *s = malloc(sizeof *s);
    size_t bytes = ((n * sizeof(float) + 63) / 64) * 64;
    if (bytes == 0) bytes = 64;
    float *data = s ? aligned_alloc(64, bytes) : NULL;
    if (!s || !data) {
        free(s);
        free(data);
        rp_error(RP_ERR_NOMEM, "cannot allocate %zu floats", n);
        return NULL;
    }
    memset(data, 0, bytes);
    s->data = data;
    s->n = n;
    s->refcount = 1;
    return s;
}

void rp_storage_retain(rp_storage *s)
{
    RP_ASSERT(s && s->refcount > 0);
    s->refcount++;
}

void rp_storage_release(rp_storage *s)
{
    if (!s) return;
    RP_ASSERT(s->refcount > 0);
    if (--s->refcount == 0) {
        free(s->data);
        free(s);
    }
}
