/* OpenMP helpers for core/ (internal). RP_PARALLEL_FOR(cond) puts
 * "#pragma omp parallel for schedule(static) if (cond)" before an independent loop, RP_SIMD
 * "#pragma omp simd", RP_PARALLEL_FOR_SIMD(cond) both at once; without -fopenmp (make NO_OMP=1)
 * they expand to nothing, so -Wunknown-pragmas stays quiet. */
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
/* RP_PARALLEL_FOR_SIMD(cond): both, for an elementwise loop (threads take contiguous pieces). */
#define RP_PARALLEL_FOR_SIMD(cond) RP_PRAGMA_(omp parallel for simd schedule(static) if (cond))
/* RP_SIMD_REDUCE(op, var): a reduction loop the compiler may vectorise (the sum reassociated
 * into vector lanes). The order of every sum is still fixed for a given build, so results do not
 * depend on the thread count (they may differ from a NO_OMP build in the last bits). */
#define RP_SIMD_REDUCE(op, var) RP_PRAGMA_(omp simd reduction(op : var))
#else
#define RP_PARALLEL_FOR(cond)
#define RP_SIMD
#define RP_PARALLEL_FOR_SIMD(cond)
#define RP_SIMD_REDUCE(op, var)
#endif

/* OpenMP's current maximum number of threads (>= 1; 1 without OpenMP). */
static inline int rp_max_threads(void)
{
#ifdef _OPENMP
    int n = omp_get_max_threads();
    return n < 1 ? 1 : n;
#else
    return 1;
#endif
}

/* Width of a column block for loops that sum columns over all rows (gradients of biases and
 * LayerNorm weights): an equal share of the ncols columns per OpenMP thread, rounded up to 16
 * (64-byte lines) and capped at max_cols (the caller's stack accumulators). Each task then streams
 * long contiguous pieces of every row; narrow blocks (16 columns of 2 KB rows) were several times
 * slower. The width never changes a result: every column is summed on its own, over rows in
 * order. */
static inline int64_t rp_col_block(int64_t ncols, int64_t max_cols)
{
    int64_t nt = rp_max_threads();
    int64_t cb = (ncols + nt - 1) / nt;
    cb = (cb + 15) / 16 * 16;
    return cb < max_cols ? cb : max_cols;
}

#endif
