#include "rng.h"

#include <math.h>

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void rp_rng_seed(rp_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) { /* splitmix64 */
        x += 0x9E3779B97F4A7C15ULL;
        uint64_t z = x;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        r->s[i] = z ^ (z >> 31);
    }
    r->spare = 0.0;
    r->has_spare = 0;
}

uint64_t rp_rng_u64(rp_rng *r)
{
    uint64_t *s = r->s; /* xoshiro256** */
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

void rp_rng_jump(rp_rng *r)
{
    static const uint64_t jump[4] = {0x180EC6D33CFD0ABAULL, 0xD5A61266F0C9392CULL,
                                     0xA9582618E03FC9AAULL, 0x39ABDC4529B1661CULL};
    uint64_t t[4] = {0, 0, 0, 0};
    for (int i = 0; i < 4; i++)
        for (int b = 0; b < 64; b++) {
            if (jump[i] & ((uint64_t)1 << b))
                for (int w = 0; w < 4; w++) t[w] ^= r->s[w];
            (void)rp_rng_u64(r);
        }
    for (int w = 0; w < 4; w++) r->s[w] = t[w];
    r->spare = 0.0;
    r->has_spare = 0;
}

double rp_rng_uniform(rp_rng *r) { return (double)(rp_rng_u64(r) >> 11) * 0x1.0p-53; }

double rp_rng_normal(rp_rng *r)
{
    if (r->has_spare) {
        r->has_spare = 0;
        return r->spare;
    }
    double u, v, s;
    do {
        u = 2.0 * rp_rng_uniform(r) - 1.0;
        v = 2.0 * rp_rng_uniform(r) - 1.0;
        s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    double f = sqrt(-2.0 * log(s) / s);
    r->spare = v * f;
    r->has_spare = 1;
    return u * f;
}

int64_t rp_rng_int(rp_rng *r, int64_t lo, int64_t hi)
{
    uint64_t range = (uint64_t)hi - (uint64_t)lo + 1u;
    if (range == 0) return (int64_t)rp_rng_u64(r); /* the full 64-bit range */
    uint64_t threshold = (0u - range) % range;
    uint64_t x;
    do x = rp_rng_u64(r);
    while (x < threshold);
    return (int64_t)((uint64_t)lo + x % range);
}

/* Fills t in row-major index order (whatever its strides). */
typedef enum { FILL_UNIFORM, FILL_NORMAL, FILL_INT } fill_kind;

static void fill(rp_rng *r, rp_tensor *t, fill_kind kind, double a, double b, int64_t ia,
                 int64_t ib)
{
    int64_t n = rp_tensor_numel(t);
    if (n == 0) return;
    float *base = rp_tensor_data(t);
    int64_t idx[RP_MAX_DIMS] = {0};
    for (int64_t k = 0; k < n; k++) {
        double x;
        switch (kind) {
        case FILL_UNIFORM: x = a + (b - a) * rp_rng_uniform(r); break;
        case FILL_NORMAL: x = a + b * rp_rng_normal(r); break;
        default: x = (double)rp_rng_int(r, ia, ib); break;
        }
        float f = (float)x;
        /* uniform: a draw that rounds up to b as a float (within half a float's step of it)
         * becomes the float below b, so every value stays in [a, b); no other value changes */
        if (kind == FILL_UNIFORM)
            while ((double)f >= b && f > (float)a) f = nextafterf(f, -INFINITY);
        base[rp_tensor_index_offset(t, idx)] = f;
        for (int i = t->ndim - 1; i >= 0; i--) {
            if (++idx[i] < t->shape[i]) break;
            idx[i] = 0;
        }
    }
}

void rp_rng_fill_uniform(rp_rng *r, rp_tensor *t, double lo, double hi)
{
    fill(r, t, FILL_UNIFORM, lo, hi, 0, 0);
}

void rp_rng_fill_normal(rp_rng *r, rp_tensor *t, double mean, double std)
{
    fill(r, t, FILL_NORMAL, mean, std, 0, 0);
}

void rp_rng_fill_int(rp_rng *r, rp_tensor *t, int64_t lo, int64_t hi)
{
    fill(r, t, FILL_INT, 0, 0, lo, hi);
}
