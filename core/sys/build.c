#include "build.h"

#include <stdio.h>

#if defined(RP_PORTABLE)
#define KIND "portable"
#define TARGET "x86-64-v3"
#elif defined(__SANITIZE_ADDRESS__)
#define KIND "sanitize"
#define TARGET "x86-64"
#else
#define KIND "native"
#if defined(RP_MARCH) /* the Makefile's MARCH (make MARCH=x86-64-v3) */
#define TARGET RP_MARCH
#else
#define TARGET "native"
#endif
#endif

const char *rp_build_kind(void) { return KIND; }
const char *rp_build_target(void) { return TARGET; }

#if defined(RP_PORTABLE) && defined(__x86_64__)
__attribute__((target("arch=x86-64"))) int rp_build_cpu_ok(char *why, size_t len)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("x86-64-v3")) return 1;
    if (why && len)
        snprintf(why, len,
                 "this portable build of roper needs an x86-64-v3 CPU (AVX2, FMA, BMI1/2: Intel "
                 "Haswell or AMD Zen and later); this CPU is older: use the native build (make)");
    return 0;
}
#else
int rp_build_cpu_ok(char *why, size_t len)
{
    if (why && len) why[0] = '\0';
    return 1;
}
#endif
