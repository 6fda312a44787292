/* Checked integer arithmetic: the one place where a size, stride, offset or count that comes from
 * a file or from Lua is multiplied or added before it is known to be small.
 *
 * Each helper computes the exact result (GCC's and clang's __builtin_*_overflow compute in
 * infinite precision, so no check can itself overflow) and returns 1 with *out set, or returns 0
 * when the result does not fit in the type (*out is then unspecified): the caller refuses the
 * input. The rule of every reader: a value from outside is combined with another only through
 * these, or after a check that bounds both (say so in a comment where it is done).
 *
 * rp_shape_span is the size rule of every tensor shape (core/tensor/tensor.h): the product of the sizes
 * other than 0, which is what a contiguous layout's strides reach, must itself be within the
 * limit, so an empty shape ((0, 2^32, 2^32)) is held to the same arithmetic as a full one.
 */
#ifndef RP_CHECKED_H
#define RP_CHECKED_H

#include <stdint.h>

/* a * b and a + b into *out; 0 on overflow. */
static inline int rp_mul_i64(int64_t a, int64_t b, int64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

static inline int rp_add_i64(int64_t a, int64_t b, int64_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}

static inline int rp_mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

static inline int rp_add_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}

/* a * b and a + b for sizes >= 0, saturating at INT64_MAX: a counting pass over a huge config,
 * which a limit then refuses, never overflows. */
static inline int64_t rp_sat_mul_i64(int64_t a, int64_t b)
{
    int64_t p;
    return rp_mul_i64(a, b, &p) ? p : INT64_MAX;
}

static inline int64_t rp_sat_add_i64(int64_t a, int64_t b)
{
    int64_t s;
    return rp_add_i64(a, b, &s) ? s : INT64_MAX;
}

/* For shape[0..ndim-1] (sizes >= 0; 0 when one is negative): 1 when the product of its sizes
 * other than 0 is at most limit, with *numel the element count (0 when a size is 0); 0 when it
 * exceeds limit. */
static inline int rp_shape_span(int ndim, const int64_t *shape, int64_t limit, int64_t *numel)
{
    int64_t span = 1;
    int empty = 0;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return 0;
        if (shape[i] == 0) {
            empty = 1;
            continue;
        }
        if (!rp_mul_i64(span, shape[i], &span) || span > limit) return 0;
    }
    *numel = empty ? 0 : span;
    return 1;
}

#endif
