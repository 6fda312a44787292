/* OpenMP helpers for core/ (internal). RP_PARALLEL_FOR(cond) puts
 * "#pragma omp parallel for schedule(static) if (cond)" before an independent loop, RP_SIMD
 * "#pragma omp simd"; without -fopenmp (make NO_OMP=1) both expand to nothing, so
 * -Wunknown-pragmas stays quiet. */
#ifndef RP_PARALLEL_H
#define RP_PARALLEL_H

#ifdef _OPENMP
#define RP_PRAGMA_(x) _Pragma(#x)
#define RP_PARALLEL_FOR(cond) RP_PRAGMA_(omp parallel for schedule(static) if (cond))
/* RP_SIMD: the loop that follows has no loop-carried dependence; vectorise it. */
#define RP_SIMD RP_PRAGMA_(omp simd)
#else
#define RP_PARALLEL_FOR(cond)
#define RP_SIMD
#endif

#endif
