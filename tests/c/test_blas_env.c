/* The OpenBLAS kernel rule and the OpenMP wait policy (core/sys/blas.h): rp_blas_coretype_rule driven
 * by a table of (CPU features, core OpenBLAS reports) cases, no real CPU needed; then the
 * environment functions (rp_blas_wanted_env, rp_omp_wait_policy, rp_blas_core_reason) with the
 * variables set and unset in this process. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rp.h"

/* CPU feature sets: avx2, fma, avx512 f, bw, dq, vl, bf16 */
static const rp_cpu_features NONE = {0, 0, 0, 0, 0, 0, 0};
static const rp_cpu_features AVX2_ONLY = {1, 0, 0, 0, 0, 0, 0};
static const rp_cpu_features AVX2 = {1, 1, 0, 0, 0, 0, 0};
static const rp_cpu_features AVX512 = {1, 1, 1, 1, 1, 1, 0};
static const rp_cpu_features AVX512_BF16 = {1, 1, 1, 1, 1, 1, 1};
static const rp_cpu_features NO_F = {1, 1, 0, 1, 1, 1, 0};
static const rp_cpu_features NO_BW = {1, 1, 1, 0, 1, 1, 0};
static const rp_cpu_features NO_DQ = {1, 1, 1, 1, 0, 1, 0};
static const rp_cpu_features NO_VL = {1, 1, 1, 1, 1, 0, 0};

typedef struct {
    const char *name;
    const rp_cpu_features *cpu;
    const char *reported; /* what openblas_get_corename() says */
    const char *want;     /* the OPENBLAS_CORETYPE to set, NULL for none */
    const char *why;      /* a part of the reason, NULL when want is NULL */
} rule_case;

static const rule_case cases[] = {
    /* the Prescott fallback of CPUs OpenBLAS 0.3.21 does not know */
    {"Prescott, AVX-512", &AVX512, "Prescott", "SkylakeX", "AVX-512 CPU that OpenBLAS does not know"},
    {"Prescott, AVX-512 BF16", &AVX512_BF16, "Prescott", "SkylakeX", "AVX-512 CPU"},
    {"Prescott, AVX2 + FMA", &AVX2, "Prescott", "Haswell", "AVX2 CPU that OpenBLAS does not know"},
    {"Prescott, AVX-512 without VL", &NO_VL, "Prescott", "Haswell", "AVX2 CPU"},
    {"Prescott, AVX2 without FMA", &AVX2_ONLY, "Prescott", NULL, NULL},
    {"Prescott, no AVX", &NONE, "Prescott", NULL, NULL},
    {"prescott (any case)", &AVX512, "prescott", "SkylakeX", "AVX-512 CPU"},
    /* AVX-512 CPUs that 0.3.21 maps to its AVX2 kernels (Zen 4) */
    {"Haswell, AVX-512", &AVX512, "Haswell", "SkylakeX", "AVX-512 CPU that OpenBLAS maps to Haswell"},
    {"Zen, AVX-512", &AVX512, "Zen", "SkylakeX", "AVX-512 CPU that OpenBLAS maps to Zen"},
    {"Zen, AVX-512 BF16 (SkylakeX, not Cooperlake)", &AVX512_BF16, "Zen", "SkylakeX", "maps to Zen"},
    {"haswell (any case), AVX-512", &AVX512, "haswell", "SkylakeX", "maps to haswell"},
    {"Haswell, AVX-512 without F", &NO_F, "Haswell", NULL, NULL},
    {"Haswell, AVX-512 without BW", &NO_BW, "Haswell", NULL, NULL},
    {"Zen, AVX-512 without DQ", &NO_DQ, "Zen", NULL, NULL},
    {"Zen, AVX-512 without VL", &NO_VL, "Zen", NULL, NULL},
    /* OpenBLAS's own choice is right */
    {"Haswell, AVX2", &AVX2, "Haswell", NULL, NULL},
    {"Zen, AVX2 (Zen 3)", &AVX2, "Zen", NULL, NULL},
    {"SkylakeX, AVX-512", &AVX512, "SkylakeX", NULL, NULL},
    {"Cooperlake, AVX-512 BF16", &AVX512_BF16, "Cooperlake", NULL, NULL},
    {"Sandybridge, AVX-512 (not a core the rule moves)", &AVX512, "Sandybridge", NULL, NULL},
    {"no core reported", &AVX512, NULL, NULL, NULL},
};

static void test_rule_table(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const rule_case *c = &cases[i];
        char why[160];
        memset(why, 'x', sizeof why);
        const char *got = rp_blas_coretype_rule(c->cpu, c->reported, why, sizeof why);
        if (c->want == NULL) {
            CHECK(got == NULL, "%s: want no coretype, got %s", c->name, got ? got : "(null)");
            CHECK(why[0] == '\0', "%s: the reason is empty, got '%.40s'", c->name, why);
        } else {
            CHECK(got != NULL && strcmp(got, c->want) == 0, "%s: want %s, got %s", c->name, c->want,
                  got ? got : "(null)");
            CHECK(strstr(why, c->why) != NULL, "%s: the reason '%s' says '%s'", c->name, why,
                  c->why);
        }
        /* no reason buffer: the same answer */
        const char *again = rp_blas_coretype_rule(c->cpu, c->reported, NULL, 0);
        CHECK(again == got, "%s: the answer does not depend on the reason buffer", c->name);
    }
    /* a short buffer is cut, never overrun */
    char small[8] = "1234567";
    char guard = small[7];
    rp_blas_coretype_rule(&AVX512, "Haswell", small, 4);
    CHECK(strlen(small) == 3 && small[7] == guard, "a 4-byte reason buffer holds '%s'", small);
}

/* sets or (value NULL) unsets a variable */
static void put(const char *name, const char *value)
{
    if (value) setenv(name, value, 1);
    else unsetenv(name);
}

static int find(int n, const char **names, const char **values, const char *name, const char *value)
{
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0) return value == NULL || strcmp(values[i], value) == 0;
    return 0;
}

static void test_wait_policy(void)
{
    const char *names[RP_BLAS_ENV_MAX], *values[RP_BLAS_ENV_MAX];
    put("OMP_WAIT_POLICY", NULL);
    put("GOMP_SPINCOUNT", NULL);
    put("ROPER_OMP_WAIT_POLICY", NULL);
    const char *w = rp_omp_wanted_wait_policy();
    CHECK(w && strcmp(w, "passive") == 0, "nothing set: passive, got %s", w ? w : "(null)");
    int n = rp_blas_wanted_env(names, values);
    CHECK(n >= 2 && n <= RP_BLAS_ENV_MAX, "nothing set: %d variables", n);
    CHECK(find(n, names, values, "OMP_WAIT_POLICY", "passive"), "nothing set: OMP_WAIT_POLICY=passive");
    CHECK(find(n, names, values, "ROPER_OMP_WAIT_POLICY", "passive"), "with its marker");
    CHECK(strstr(rp_omp_wait_policy(), "libgomp's default") != NULL, "unset: '%s'",
          rp_omp_wait_policy());

    /* what roper sets is told apart from what the user sets */
    put("OMP_WAIT_POLICY", "passive");
    put("ROPER_OMP_WAIT_POLICY", "passive");
    CHECK(strcmp(rp_omp_wait_policy(), "passive (set by roper)") == 0, "roper's: '%s'",
          rp_omp_wait_policy());
    CHECK(rp_omp_wanted_wait_policy() == NULL, "set: nothing more wanted");
    n = rp_blas_wanted_env(names, values);
    CHECK(!find(n, names, values, "OMP_WAIT_POLICY", NULL), "set: OMP_WAIT_POLICY not wanted again");
    put("ROPER_OMP_WAIT_POLICY", NULL);
    CHECK(strcmp(rp_omp_wait_policy(), "passive (set by the user: OMP_WAIT_POLICY=passive)") == 0,
          "the user's passive: '%s'", rp_omp_wait_policy());
    put("OMP_WAIT_POLICY", "active");
    put("ROPER_OMP_WAIT_POLICY", "passive");
    CHECK(rp_omp_wanted_wait_policy() == NULL, "the user's active stays");
    CHECK(strstr(rp_omp_wait_policy(), "set by the user: OMP_WAIT_POLICY=active") != NULL,
          "the user's active (a stale marker): '%s'", rp_omp_wait_policy());

    /* a spin count of the user's also keeps the policy unset */
    put("OMP_WAIT_POLICY", NULL);
    put("ROPER_OMP_WAIT_POLICY", NULL);
    put("GOMP_SPINCOUNT", "1000");
    CHECK(rp_omp_wanted_wait_policy() == NULL, "GOMP_SPINCOUNT set: no policy wanted");
    n = rp_blas_wanted_env(names, values);
    CHECK(!find(n, names, values, "OMP_WAIT_POLICY", NULL), "GOMP_SPINCOUNT set: none wanted");
    CHECK(strstr(rp_omp_wait_policy(), "GOMP_SPINCOUNT=1000") != NULL, "'%s'",
          rp_omp_wait_policy());
    /* an empty value counts as unset */
    put("GOMP_SPINCOUNT", "");
    CHECK(rp_omp_wanted_wait_policy() != NULL, "an empty GOMP_SPINCOUNT is unset");
    put("GOMP_SPINCOUNT", NULL);
}

/* the environment variables the kernel choice reads, saved and cleared, then restored */
static const char *const CORE_VARS[] = {"OPENBLAS_CORETYPE", "ROPER_BLAS_DETECTED",
                                        "ROPER_BLAS_REPLACED", "ROPER_KEEP_CORETYPE"};
#define N_CORE_VARS (sizeof CORE_VARS / sizeof CORE_VARS[0])

#define KEEP_NOTE_HASWELL                                                                          \
    ", in place of OPENBLAS_CORETYPE=Haswell from the environment (slower kernels on this CPU; "  \
    "ROPER_KEEP_CORETYPE=1 keeps such a value)"

/* The portable build (make PORTABLE=1) runs OpenBLAS's Haswell kernels on every CPU, whatever the
 * environment asks (ROPER_KEEP_CORETYPE included): any other value is dropped and Haswell wanted,
 * and the reason says which. The variables are cleared by the caller. */
static void test_core_reason_portable(void)
{
    const char *names[RP_BLAS_ENV_MAX], *values[RP_BLAS_ENV_MAX];
    static const char NOT_HASWELL[] =
        ", not the portable build's Haswell kernels: its results are not the same on every machine "
        "then; start with OPENBLAS_CORETYPE=Haswell (the roper REPL does this itself)";
    static const char SET[] = "set by roper: the portable build runs OpenBLAS's Haswell kernels on "
                              "every CPU (its results are the same on every x86-64-v3 machine)";
    char want[512];

    /* unset: OpenBLAS's own choice is never what the portable build runs with */
    CHECK(rp_blas_dropped_coretype() == NULL, "unset: nothing dropped");
    const char *w = rp_blas_wanted_coretype();
    CHECK(w && strcmp(w, "Haswell") == 0, "unset: Haswell wanted, got %s", w ? w : "(null)");
    int n = rp_blas_wanted_env(names, values);
    CHECK(find(n, names, values, "OPENBLAS_CORETYPE", "Haswell"), "unset: OPENBLAS_CORETYPE=Haswell");
    snprintf(want, sizeof want, "chosen by OpenBLAS%s", NOT_HASWELL);
    CHECK(strcmp(rp_blas_core_reason(), want) == 0, "unset: '%s'", rp_blas_core_reason());

    /* any other value is dropped, whatever the CPU, and ROPER_KEEP_CORETYPE does not keep it */
    static const char *const OTHERS[] = {"Prescott", "SkylakeX", "haswellx", "Zen"};
    for (size_t i = 0; i < sizeof OTHERS / sizeof OTHERS[0]; i++) {
        for (int keep = 0; keep <= 1; keep++) {
            put("OPENBLAS_CORETYPE", OTHERS[i]);
            put("ROPER_KEEP_CORETYPE", keep ? "1" : NULL);
            const char *d = rp_blas_dropped_coretype();
            CHECK(d && strcmp(d, OTHERS[i]) == 0, "%s (keep %d): dropped, got %s", OTHERS[i], keep,
                  d ? d : "(null)");
            w = rp_blas_wanted_coretype();
            CHECK(w && strcmp(w, "Haswell") == 0, "%s (keep %d): Haswell wanted", OTHERS[i], keep);
            snprintf(want, sizeof want, "set in the environment (OPENBLAS_CORETYPE=%s)%s", OTHERS[i],
                     NOT_HASWELL);
            CHECK(strcmp(rp_blas_core_reason(), want) == 0, "%s: '%s'", OTHERS[i],
                  rp_blas_core_reason());
        }
    }
    put("ROPER_KEEP_CORETYPE", NULL);

    /* Haswell itself, in any case: kept, nothing more wanted; after a dropped value the reason
     * names the value it replaced, and nothing is dropped a second time */
    put("OPENBLAS_CORETYPE", "haswell");
    CHECK(rp_blas_dropped_coretype() == NULL, "haswell: kept");
    CHECK(rp_blas_wanted_coretype() == NULL, "haswell: nothing wanted");
    n = rp_blas_wanted_env(names, values);
    CHECK(!find(n, names, values, "OPENBLAS_CORETYPE", NULL), "haswell: not wanted again");
    CHECK(strcmp(rp_blas_core_reason(), SET) == 0, "haswell: '%s'", rp_blas_core_reason());
    put("ROPER_BLAS_REPLACED", "Prescott");
    snprintf(want, sizeof want, "%s, in place of OPENBLAS_CORETYPE=Prescott from the environment",
             SET);
    CHECK(strcmp(rp_blas_core_reason(), want) == 0, "replaced: '%s'", rp_blas_core_reason());
    put("OPENBLAS_CORETYPE", "SkylakeX");
    CHECK(rp_blas_dropped_coretype() == NULL, "nothing dropped twice");
}

static void test_core_reason(void)
{
    char *saved[N_CORE_VARS];
    for (size_t i = 0; i < N_CORE_VARS; i++) {
        const char *v = getenv(CORE_VARS[i]);
        saved[i] = v ? strdup(v) : NULL;
        put(CORE_VARS[i], NULL);
    }
    const char *names[RP_BLAS_ENV_MAX], *values[RP_BLAS_ENV_MAX];
    rp_cpu_features cpu = rp_cpu_detect();
    printf("  this CPU: avx2 %d fma %d avx512 f %d bw %d dq %d vl %d bf16 %d; OpenBLAS core %s\n",
           cpu.avx2, cpu.fma, cpu.avx512f, cpu.avx512bw, cpu.avx512dq, cpu.avx512vl,
           cpu.avx512_bf16, rp_blas_core());
    if (strcmp(rp_build_kind(), "portable") == 0) {
        test_core_reason_portable();
        for (size_t i = 0; i < N_CORE_VARS; i++) {
            put(CORE_VARS[i], saved[i]);
            free(saved[i]);
        }
        return;
    }

    /* a value found in the environment is dropped exactly when the rule would replace it as a
     * choice of OpenBLAS's (Prescott: on every CPU with AVX2 and FMA) */
    put("OPENBLAS_CORETYPE", "Prescott");
    const char *faster = rp_blas_coretype_rule(&cpu, "Prescott", NULL, 0);
    const char *r = rp_blas_core_reason();
    int n = rp_blas_wanted_env(names, values);
    if (faster) {
        const char *d = rp_blas_dropped_coretype();
        CHECK(d && strcmp(d, "Prescott") == 0, "Prescott dropped: '%s'", d ? d : "(null)");
        CHECK(rp_blas_wanted_coretype() == faster, "wanted: the rule's %s", faster);
        CHECK(find(n, names, values, "OPENBLAS_CORETYPE", faster), "OPENBLAS_CORETYPE=%s wanted",
              faster);
        char want[200];
        snprintf(want, sizeof want,
                 "set in the environment (OPENBLAS_CORETYPE=Prescott), slower than %s on this %s "
                 "CPU: start without it",
                 faster, strcmp(faster, "SkylakeX") == 0 ? "AVX-512" : "AVX2");
        CHECK(strncmp(r, want, strlen(want)) == 0, "'%s'", r);
    } else { /* a CPU without AVX2: Prescott is the best there is, and the value is kept */
        CHECK(rp_blas_dropped_coretype() == NULL, "Prescott kept on this CPU");
        CHECK(strcmp(r, "set by the user: OPENBLAS_CORETYPE=Prescott") == 0, "'%s'", r);
    }

    /* ROPER_KEEP_CORETYPE keeps any value, and the reason names it as the user's */
    put("ROPER_KEEP_CORETYPE", "1");
    CHECK(rp_blas_dropped_coretype() == NULL, "kept with ROPER_KEEP_CORETYPE");
    CHECK(rp_blas_wanted_coretype() == NULL, "kept: nothing wanted");
    n = rp_blas_wanted_env(names, values);
    CHECK(!find(n, names, values, "OPENBLAS_CORETYPE", NULL), "kept: not wanted");
    CHECK(strcmp(rp_blas_core_reason(), "set by the user: OPENBLAS_CORETYPE=Prescott") == 0, "'%s'",
          rp_blas_core_reason());
    /* an empty ROPER_KEEP_CORETYPE counts as unset */
    put("ROPER_KEEP_CORETYPE", "");
    CHECK((rp_blas_dropped_coretype() != NULL) == (faster != NULL), "an empty keep is unset");
    put("ROPER_KEEP_CORETYPE", NULL);

    /* dropped once (the marker is set): never a second time, so re-executing cannot loop */
    put("ROPER_BLAS_REPLACED", "Haswell");
    CHECK(rp_blas_dropped_coretype() == NULL, "nothing dropped twice");
    put("ROPER_BLAS_REPLACED", NULL);

    /* a value the rule leaves alone is never dropped */
    put("OPENBLAS_CORETYPE", "SkylakeX");
    CHECK(rp_blas_dropped_coretype() == NULL, "SkylakeX is never dropped");

    /* set by roper: the marker holds the core OpenBLAS chose, and the rule must give the value */
    put("ROPER_BLAS_DETECTED", "Haswell");
    r = rp_blas_core_reason();
    int avx512 = cpu.avx512f && cpu.avx512bw && cpu.avx512dq && cpu.avx512vl;
    if (avx512)
        CHECK(strcmp(r, "set by roper: AVX-512 CPU that OpenBLAS maps to Haswell") == 0, "'%s'", r);
    else /* this CPU would not get SkylakeX from the rule: someone else set it */
        CHECK(strcmp(r, "set by the user: OPENBLAS_CORETYPE=SkylakeX") == 0, "'%s'", r);
    /* the same after a dropped value: the reason says what it replaced */
    put("ROPER_BLAS_REPLACED", "Haswell");
    r = rp_blas_core_reason();
    if (avx512)
        CHECK(strcmp(r, "set by roper: AVX-512 CPU that OpenBLAS maps to Haswell" KEEP_NOTE_HASWELL) ==
                  0,
              "'%s'", r);
    /* a shell's copy of OpenBLAS's own choice, after a dropped value */
    put("OPENBLAS_CORETYPE", "Cooperlake");
    put("ROPER_BLAS_DETECTED", "Cooperlake");
    r = rp_blas_core_reason();
    CHECK(strcmp(r, "chosen by OpenBLAS for this CPU" KEEP_NOTE_HASWELL) == 0, "'%s'", r);

    /* unset: OpenBLAS's own choice, and the variable is wanted exactly when the rule says so */
    put("OPENBLAS_CORETYPE", NULL);
    put("ROPER_BLAS_DETECTED", NULL);
    put("ROPER_BLAS_REPLACED", NULL);
    const char *want = rp_blas_coretype_rule(&cpu, rp_blas_core(), NULL, 0);
    CHECK(rp_blas_wanted_coretype() == want, "wanted_coretype follows the rule");
    n = rp_blas_wanted_env(names, values);
    CHECK(!find(n, names, values, "ROPER_BLAS_REPLACED", NULL), "no marker of a dropped value");
    if (want) {
        CHECK(find(n, names, values, "OPENBLAS_CORETYPE", want), "OPENBLAS_CORETYPE=%s wanted", want);
        CHECK(find(n, names, values, "ROPER_BLAS_DETECTED", rp_blas_core()), "with the marker");
        CHECK(strstr(rp_blas_core_reason(), "chosen by OpenBLAS, slower than") != NULL, "'%s'",
              rp_blas_core_reason());
    } else {
        CHECK(!find(n, names, values, "OPENBLAS_CORETYPE", NULL), "no OPENBLAS_CORETYPE wanted");
        CHECK(strcmp(rp_blas_core_reason(), "chosen by OpenBLAS for this CPU") == 0, "'%s'",
              rp_blas_core_reason());
    }

    /* the process re-executed without a dropped value: a shell still holding the value is told
     * to replace it, by OpenBLAS's own choice (or the rule's) and the marker */
    put("ROPER_BLAS_REPLACED", "Haswell");
    n = rp_blas_wanted_env(names, values);
    CHECK(find(n, names, values, "OPENBLAS_CORETYPE", want ? want : rp_blas_core()),
          "OPENBLAS_CORETYPE=%s named", want ? want : rp_blas_core());
    CHECK(find(n, names, values, "ROPER_BLAS_DETECTED", rp_blas_core()), "with the marker");
    CHECK(find(n, names, values, "ROPER_BLAS_REPLACED", "Haswell"), "and the value replaced");
    CHECK(n <= RP_BLAS_ENV_MAX, "%d variables", n);
    if (!want)
        CHECK(strcmp(rp_blas_core_reason(), "chosen by OpenBLAS for this CPU" KEEP_NOTE_HASWELL) == 0,
              "'%s'", rp_blas_core_reason());

    for (size_t i = 0; i < N_CORE_VARS; i++) {
        put(CORE_VARS[i], saved[i]);
        free(saved[i]);
    }
}

int main(void)
{
    test_rule_table();
    test_wait_policy();
    test_core_reason();
    return check_summary("test_blas_env");
}
