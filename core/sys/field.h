/* A table row's integer field in the struct it describes: the rows of the optimiser's keys
 * (core/nn/optim.c) and of the tasks' keys (tasks/task_keys.c) name a field by its offset and say
 * whether it is an int64_t or an int; these read and write it. Header only.
 */
#ifndef RP_FIELD_H
#define RP_FIELD_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The integer at byte offset off of base: an int64_t when wide, else an int. */
static inline int64_t rp_field_get_int(const void *base, size_t off, int wide)
{
    const char *at = (const char *)base + off;
    if (wide) {
        int64_t v;
        memcpy(&v, at, sizeof v);
        return v;
    }
    int v;
    memcpy(&v, at, sizeof v);
    return v;
}

/* Writes v there (overwrites): an int64_t when wide, else an int (v clamped to int's range;
 * callers check the range first, so the clamp only keeps an unchecked value defined). */
static inline void rp_field_set_int(void *base, size_t off, int wide, int64_t v)
{
    char *at = (char *)base + off;
    if (wide) {
        memcpy(at, &v, sizeof v);
        return;
    }
    int i = v < INT_MIN ? INT_MIN : v > INT_MAX ? INT_MAX : (int)v;
    memcpy(at, &i, sizeof i);
}

#endif
