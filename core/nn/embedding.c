/* Token (+ learned position) embedding: a row gather forward, a row scatter-add backward. */
#include "layers.h"
#include "parallel.h"

#include <string.h>

/* Rows are independent: one OpenMP thread per block of rows. */
void rp_embedding_forward(float *out, const int32_t *tok, const float *wte, const float *wpe,
                          int64_t N, int64_t T, int64_t C)
{
    RP_PARALLEL_FOR(N * C >= 32768)
    for (int64_t n = 0; n < N; n++) {
        float *o = out + n * C;
        const float *e = wte + (int64_t)tok[n] * C;
        if (wpe) {
            const float *p = wpe + (n % T) * C;
            for (int64_t c = 0; c < C; c++) o[c] = e[c] + p[c];
        } else {
            memcpy(o, e, (size_t)C * sizeof(float));
        }
    }
}

/* Serial over rows, in row order: repeated tokens (and every n with the same n % T) add into the
 * same gradient row, so a parallel loop over rows would race. The sum per row of dwte/dwpe is
 * therefore always in increasing n, whatever the thread count. N * C adds are cheap next to the
 * matrix products around this layer. */
void rp_embedding_backward(float *dwte, float *dwpe, const float *dout, const int32_t *tok,
                           int64_t N, int64_t T, int64_t C)
{
    for (int64_t n = 0; n < N; n++) {
        const float *g = dout + n * C;
        if (dwte) {
            float *d = dwte + (int64_t)tok[n] * C;
            for (int64_t c = 0; c < C; c++) d[c] += g[c];
        }
        if (dwpe) {
            float *d = dwpe + (n % T) * C;
            for (int64_t c = 0; c < C; c++) d[c] += g[c];
        }
    }
}
