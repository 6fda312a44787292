#include "storage.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"

static _Atomic int64_t held_bytes, peak_bytes;

/* Adds bytes (negative when freed) to the count and raises the peak to the new count. */
static void count(int64_t bytes)
{
    int64_t now = atomic_fetch_add_explicit(&held_bytes, bytes, memory_order_relaxed) + bytes;
    int64_t peak = atomic_load_explicit(&peak_bytes, memory_order_relaxed);
    while (now > peak && !atomic_compare_exchange_weak_explicit(&peak_bytes, &peak, now,
                                                                memory_order_relaxed,
                                                                memory_order_relaxed)) {
    }
}

/* n floats as allocated: rounded up to whole 64-byte lines, at least one line. */
static size_t line_bytes(size_t n)
{
    size_t bytes = ((n * sizeof(float) + 63) / 64) * 64;
    return bytes == 0 ? 64 : bytes;
}

rp_storage *rp_storage_new(size_t n)
{
    if (n > ((size_t)1 << 40)) {
        rp_error(RP_ERR_NOMEM, "cannot allocate %zu floats", n);
        return NULL;
    }
    rp_storage *s = malloc(sizeof *s);
    size_t bytes = line_bytes(n);
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
    count((int64_t)bytes);
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
        count(-(int64_t)line_bytes(s->n));
        free(s->data);
        free(s);
    }
}

float *rp_buffer_new(int64_t n)
{
    if (n < 0 || n > ((int64_t)1 << 40)) return NULL;
    size_t bytes = line_bytes((size_t)n);
    float *p = aligned_alloc(64, bytes);
    if (p) count((int64_t)bytes);
    return p;
}

void rp_buffer_free(float *p, int64_t n)
{
    if (!p) return;
    count(-(int64_t)line_bytes((size_t)n));
    free(p);
}

int64_t rp_mem_held(void)
{
    return atomic_load_explicit(&held_bytes, memory_order_relaxed);
}

int64_t rp_mem_peak(void)
{
    return atomic_load_explicit(&peak_bytes, memory_order_relaxed);
}
