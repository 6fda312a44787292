#include "storage.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#endif

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

/* The 64-byte alignment by hand: malloc's blocks are aligned to at least 8 bytes. */
_Static_assert(_Alignof(max_align_t) >= 8, "malloc aligns to 8 bytes or more");

/* bytes (a multiple of 64) at a 64-byte boundary, from one malloc of bytes + 64: the first
 * boundary after the block's start, the distance to it (8 to 64) in the byte before. Not
 * aligned_alloc: glibc (2.36) serves that from a block 64 + 32 bytes larger than the one it
 * keeps, so the block a freed buffer leaves is too small, on its own, for the next buffer of the
 * same size; a loop of dropped tensors of up to 32 MiB each (glibc's largest dynamic mmap
 * threshold: above it every block is mapped and unmapped) so grew the heap, resident, to 7 to
 * 25 times what core held, even when each tensor was freed at once (8 times). A malloc block of
 * the same size is reused as it is. Under ASan the bytes before the boundary (but its last 8)
 * and after the buffer are poisoned, so an overrun is reported as with aligned_alloc. NULL when
 * malloc fails. */
static float *lines_alloc(size_t bytes)
{
    unsigned char *raw = malloc(bytes + 64);
    if (raw == NULL) return NULL;
    size_t lead = 64 - (size_t)((uintptr_t)raw & 63);
    unsigned char *p = raw + lead;
    p[-1] = (unsigned char)lead;
    POISON(raw, lead - 8);
    POISON(p + bytes, 64 - lead);
    return (float *)(void *)p;
}

/* Frees a buffer of lines_alloc; NULL is a no-op. */
static void lines_free(float *data)
{
    if (data == NULL) return;
    unsigned char *p = (unsigned char *)data;
    free(p - p[-1]);
}

rp_storage *rp_storage_new(size_t n)
{
    if (n > ((size_t)1 << 40)) {
        rp_error(RP_ERR_NOMEM, "cannot allocate %zu floats", n);
        return NULL;
    }
    rp_storage *s = malloc(sizeof *s);
    size_t bytes = line_bytes(n);
    float *data = s ? lines_alloc(bytes) : NULL;
    if (!s || !data) {
        free(s);
        lines_free(data);
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
        lines_free(s->data);
        free(s);
    }
}

float *rp_buffer_new(int64_t n)
{
    if (n < 0 || n > ((int64_t)1 << 40)) return NULL;
    size_t bytes = line_bytes((size_t)n);
    float *p = lines_alloc(bytes);
    if (p) count((int64_t)bytes);
    return p;
}

void rp_buffer_free(float *p, int64_t n)
{
    if (!p) return;
    count(-(int64_t)line_bytes((size_t)n));
    lines_free(p);
}

int64_t rp_mem_held(void)
{
    return atomic_load_explicit(&held_bytes, memory_order_relaxed);
}

int64_t rp_mem_peak(void)
{
    return atomic_load_explicit(&peak_bytes, memory_order_relaxed);
}
