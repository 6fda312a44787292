/* What this build of the library is: its compiler target, and whether it is the portable build.
 *
 * The native build (make, in build/) compiles with -march=native and runs OpenBLAS's fastest
 * kernels for the CPU: its results depend on the CPU in the last bits (vector widths of the
 * hand-written kernels, the summation order of OpenBLAS's kernels).
 * The portable build (make PORTABLE=1, in build-portable/) compiles for the x86-64-v3 level (AVX2,
 * FMA, BMI1/2, F16C, MOVBE, LZCNT: Intel since Haswell, 2013; AMD since Excavator/Zen, 2015/2017)
 * and always runs OpenBLAS's Haswell kernels (rp_blas_wanted_coretype): the same instructions in
 * the same order on every CPU that can run it, so a run gives the same bits on every such machine
 * (with the same thread count, OpenBLAS and C library). It is slower where the CPU has AVX-512.
 * The sanitizer build (make SANITIZE=1, in build-san/) compiles for plain x86-64 at -O1. */
#ifndef RP_BUILD_H
#define RP_BUILD_H

#include <stddef.h>

/* "portable", "native" or "sanitize". */
const char *rp_build_kind(void);

/* The compiler target: "x86-64-v3" (portable), "native" (-march=native; the -march name when the
 * Makefile's MARCH set another) or "x86-64". */
const char *rp_build_target(void);

/* 1 when this CPU runs every instruction the build may use (always 1 outside the portable build);
 * else 0, with a sentence naming the missing level written into why[0..len) when why is not
 * NULL. Compiled for plain x86-64, so it is safe to call first thing on any CPU. */
int rp_build_cpu_ok(char *why, size_t len);

#endif
