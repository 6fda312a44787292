/* OpenMP helpers for core/ (internal). RP_PARALLEL_FOR(cond) puts
 * "#pragma omp parallel for schedule(static) if (cond)" before an independent loop, RP_SIMD
 * "#pragma omp simd"; without -fopenmp (make NO_OMP=1) both expand to nothing, so
 * -Wunknown-pragmas stays quiet. */
#ifndef RP_PARALLEL_H
#define RP_PARALLEL_H

#include <stdint.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#ifdef _OPENMP
#define RP_PRAGMA_(x) _Pragma(#x)
#define RP_PARALLEL_FOR(cond) RP_PRAGMA_(omp parallel for schedule(static) if (cond))
/* RP_SIMD: the loop that follows has no loop-carried dependence; vectorise it. */
#define RP_SIMD RP_PRAGMA_(omp simd)
#else
#define RP_PARALLEL_FOR(cond)
#define RP_SIMD
#endif

/* Width of a column block for loops that sum columns over all rows (gradients of biases and
 * LayerNorm weights): an equal share of the ncols columns per OpenMP thread, rounded up to 16
 * (64-byte lines) and capped at max_cols (the caller's stack accumulators). Each task then streams
 * long contiguous pieces of every row; narrow blocks (16 columns of 2 KB rows) were several times
 * slower. The width never changes a result: every column is summed on its own, over rows in
 * order. */
static inline int64_t rp_col_block(int64_t ncols, int64_t max_cols)
{
#ifdef _OPENMP
    int64_t nt = omp_get_max_threads();
#else
    int64_t nt = 1;
#endif
    int64_t cb = (ncols + nt - 1) / nt;
    cb = (cb + 15) / 16 * 16;
    return cb < max_cols ? cb : max_cols;
}

#endif
