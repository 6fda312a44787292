/* Seeded deterministic random numbers: xoshiro256** seeded through splitmix64.
 * Streams depend only on the seed and the sequence of calls: integer arithmetic throughout, and
 * doubles built from the top 53 bits, so they are the same on every platform. Normal deviates use
 * the Marsaglia polar method (sqrt and log from libm). */
#ifndef RP_RNG_H
#define RP_RNG_H

#include <stdint.h>

#include "tensor.h"

typedef struct rp_rng {
    uint64_t s[4];
    double spare;    /* the second deviate of the last polar-method pair */
    int has_spare;
} rp_rng;

/* (Re)starts the stream for seed (any 64-bit value). */
void rp_rng_seed(rp_rng *r, uint64_t seed);
/* Advances r by 2^128 draws of rp_rng_u64 (xoshiro256's jump polynomial) and drops a normal
 * deviate kept back. The generators seed s, jumped 0, 1, 2, ... times are consecutive
 * non-overlapping pieces of the stream of s (2^128 draws each): independent streams, as the
 * per-prompt generators of batched generation use them. */
void rp_rng_jump(rp_rng *r);
/* Next raw 64-bit output. */
uint64_t rp_rng_u64(rp_rng *r);
/* Uniform in [0, 1) with 53 random bits. */
double rp_rng_uniform(rp_rng *r);
/* Standard normal deviate. */
double rp_rng_normal(rp_rng *r);
/* Uniform integer in [lo, hi] inclusive, without modulo bias. Requires lo <= hi. */
int64_t rp_rng_int(rp_rng *r, int64_t lo, int64_t hi);

/* Fill t (any strides) in index order, one draw per element (overwrite): uniform in [lo, hi) (as
 * floats: a draw that rounds to hi is stored as the float below it), normal(mean, std), integers
 * [lo, hi] (exact where |lo|, |hi| <= 2^24, the integers a float holds; rounded beyond). */
void rp_rng_fill_uniform(rp_rng *r, rp_tensor *t, double lo, double hi);
void rp_rng_fill_normal(rp_rng *r, rp_tensor *t, double mean, double std);
void rp_rng_fill_int(rp_rng *r, rp_tensor *t, int64_t lo, int64_t hi);

#endif
