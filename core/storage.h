/* Refcounted, 64-byte aligned float buffers. Tensors are views onto a storage. */
#ifndef RP_STORAGE_H
#define RP_STORAGE_H

#include <stddef.h>

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

#endif
