/* Refcounted, 64-byte aligned float buffers. Tensors are views onto a storage.
 *
 * The count of held memory: every storage, and every buffer of rp_buffer_new (a model's blocks),
 * adds its bytes (as allocated: rounded up to 64) to a process-wide count while it lives. That
 * is the memory core keeps beyond a call (tensors, a model's parameters, gradients and blocks,
 * an optimiser's moments), which the garbage collector of a caller (Lua's, say) does not see:
 * the caller reads the count to pace its collector (bindings/userdata.c). The count is atomic, so
 * storages of different threads may be created and released at the same time.
 */
#ifndef RP_STORAGE_H
#define RP_STORAGE_H

#include <stddef.h>
#include <stdint.h>

typedef struct rp_storage {
    float *data;    /* n floats, 64-byte aligned */
    size_t n;
    long refcount;  /* not atomic: a storage belongs to one Lua state / thread */
} rp_storage;

/* A new storage of n floats, zero-filled, refcount 1. n == 0 is allowed (data stays valid).
 * Returns NULL with RP_ERR_NOMEM recorded when allocation fails. Release with rp_storage_release. */
rp_storage *rp_storage_new(size_t n);

/* Adds a reference. */
void rp_storage_retain(rp_storage *s);

/* Drops a reference; frees data and struct when it reaches zero. NULL is a no-op. */
void rp_storage_release(rp_storage *s);

/* A buffer of n >= 0 floats with one owner (no refcount), 64-byte aligned, NOT cleared (its pages
 * stay out of the resident set until written), counted in rp_mem_held until rp_buffer_free.
 * NULL when allocation fails (no message recorded: the caller names what it allocates). */
float *rp_buffer_new(int64_t n);

/* Frees a buffer of rp_buffer_new(n), with the same n. NULL is a no-op. */
void rp_buffer_free(float *p, int64_t n);

/* The bytes that live storages and buffers hold now, in the whole process. */
int64_t rp_mem_held(void);

/* The most rp_mem_held has been at any moment since the process started. */
int64_t rp_mem_peak(void);

#endif
