/* OpenMP helpers for core/ (internal). RP_PARALLEL_FOR(cond) puts
 * "#pragma omp parallel for schedule(static) if (cond)" before an independent loop; without
 * -fopenmp (make NO_OMP=1) it expands to nothing, so -Wunknown-pragmas stays quiet. */
#ifndef RP_PARALLEL_H
#define RP_PARALLEL_H

#ifdef _OPENMP
#define RP_PRAGMA_(x) _Pragma(#x)
#define RP_PARALLEL_FOR(cond) RP_PRAGMA_(omp parallel for schedule(static) if (cond))
#else
#define RP_PARALLEL_FOR(cond)
#endif

#endif
