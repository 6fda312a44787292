/* rp_sgemm / rp_sgemm_naive (core/sys/blas.h), rp_matmul (core/tensor/ops.h) and the attention kernels'
 * register-tile products rp_tile_mm (core/tensor/tile.h) against a double-precision triple loop written
 * here. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "rp.h"
#include "tile.h"

#define S(...) CHECK_SHAPE(__VA_ARGS__)

static uint64_t rng_state = 777;

/* A float sum of K products of magnitude <= ma*mb has a worst-case error ~K*eps*ma*mb, a typical
 * one ~sqrt(K)*eps*ma*mb (eps = 6e-8); blocked BLAS kernels stay close to the typical case. 1e-5 *
 * sqrt(K) leaves two orders of magnitude of room without hiding a wrong element (which is off by
 * ~ma*mb). */
static double gemm_tol(int64_t K, double alpha, double ma, double mb, double beta, double mc)
{
    return 1e-5 * sqrt((double)(K > 1 ? K : 1)) * fabs(alpha) * ma * mb + 1e-6 * fabs(beta) * mc +
           1e-30;
}

/* ---------------------------------------------------------------- rp_sgemm */

static const float SENTINEL = 12345.0f;

static void gemm_case(int ta, int tb, int64_t M, int64_t N, int64_t K, int64_t pad, float alpha,
                      float beta)
{
    /* stored shapes: A is (K, M) when ta else (M, K); B is (N, K) when tb else (K, N) */
    int64_t arows = ta ? K : M, acols = ta ? M : K;
    int64_t brows = tb ? N : K, bcols = tb ? K : N;
    int64_t lda = acols + pad, ldb = bcols + 2 * pad, ldc = N + 3 * pad;
    size_t na = (size_t)(arows * lda + 1), nb = (size_t)(brows * ldb + 1), nc = (size_t)(M * ldc + 1);
    float *A = malloc(na * sizeof(float)), *B = malloc(nb * sizeof(float));
    float *A0 = malloc(na * sizeof(float)), *B0 = malloc(nb * sizeof(float));
    float *C0 = malloc(nc * sizeof(float)), *C1 = malloc(nc * sizeof(float));
    float *C2 = malloc(nc * sizeof(float));
    double *want = malloc((size_t)(M * N + 1) * sizeof(double));
    float *got1 = malloc((size_t)(M * N + 1) * sizeof(float));
    float *got2 = malloc((size_t)(M * N + 1) * sizeof(float));
    double ma = 0, mb = 0, mc = 0;
    /* padding of A and B is NaN: reading it would poison the result */
    for (int64_t r = 0; r < arows; r++)
        for (int64_t c = 0; c < lda; c++) {
            float x = c < acols ? (float)check_rand(&rng_state, -1.0, 1.0) : NAN;
            A[r * lda + c] = x;
            if (c < acols && fabs((double)x) > ma) ma = fabs((double)x);
        }
    for (int64_t r = 0; r < brows; r++)
        for (int64_t c = 0; c < ldb; c++) {
            float x = c < bcols ? (float)check_rand(&rng_state, -2.0, 2.0) : NAN;
            B[r * ldb + c] = x;
            if (c < bcols && fabs((double)x) > mb) mb = fabs((double)x);
        }
    /* C: NaN when beta == 0 (must be overwritten, not propagated); padding is a sentinel that must
     * survive */
    for (int64_t r = 0; r < M; r++)
        for (int64_t c = 0; c < ldc; c++) {
            float x = c >= N ? SENTINEL : beta == 0.0f ? NAN : (float)check_rand(&rng_state, -3.0, 3.0);
            C0[r * ldc + c] = x;
            if (c < N && beta != 0.0f && fabs((double)x) > mc) mc = fabs((double)x);
        }
    memcpy(A0, A, na * sizeof(float));
    memcpy(B0, B, nb * sizeof(float));
    memcpy(C1, C0, nc * sizeof(float));
    memcpy(C2, C0, nc * sizeof(float));

    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++) {
                double a = (double)(ta ? A[k * lda + i] : A[i * lda + k]);
                double b = (double)(tb ? B[j * ldb + k] : B[k * ldb + j]);
                s += a * b;
            }
            want[i * N + j] = (double)alpha * s +
                              (beta == 0.0f ? 0.0 : (double)beta * (double)C0[i * ldc + j]);
        }

    rp_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C1, ldc);
    rp_sgemm_naive(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C2, ldc);

    int pad_ok1 = 1, pad_ok2 = 1;
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++) {
            got1[i * N + j] = C1[i * ldc + j];
            got2[i * N + j] = C2[i * ldc + j];
        }
        for (int64_t j = N; j < ldc; j++) {
            pad_ok1 &= C1[i * ldc + j] == SENTINEL;
            pad_ok2 &= C2[i * ldc + j] == SENTINEL;
        }
    }
    char label[160];
    double tol = gemm_tol(K, (double)alpha, ma, mb, (double)beta, mc);
    snprintf(label, sizeof label, "rp_sgemm       tA=%d tB=%d M=%lld N=%lld K=%lld lda=%lld ldb=%lld ldc=%lld alpha=%g beta=%g",
             ta, tb, (long long)M, (long long)N, (long long)K, (long long)lda, (long long)ldb,
             (long long)ldc, (double)alpha, (double)beta);
    CHECK_CLOSE(got1, want, M * N, tol, label);
    snprintf(label, sizeof label, "rp_sgemm_naive tA=%d tB=%d M=%lld N=%lld K=%lld lda=%lld ldb=%lld ldc=%lld alpha=%g beta=%g",
             ta, tb, (long long)M, (long long)N, (long long)K, (long long)lda, (long long)ldb,
             (long long)ldc, (double)alpha, (double)beta);
    CHECK_CLOSE(got2, want, M * N, tol, label);
    snprintf(label, sizeof label, "rp_sgemm vs rp_sgemm_naive tA=%d tB=%d %lldx%lldx%lld", ta, tb,
             (long long)M, (long long)N, (long long)K);
    CHECK_CLOSE(got1, got2, M * N, tol, label);
    CHECK(pad_ok1 && pad_ok2, "C beyond column N untouched (sgemm %d, naive %d) tA=%d tB=%d",
          pad_ok1, pad_ok2, ta, tb);
    CHECK(memcmp(A, A0, na * sizeof(float)) == 0 && memcmp(B, B0, nb * sizeof(float)) == 0,
          "A and B unchanged");

    free(A);
    free(B);
    free(A0);
    free(B0);
    free(C0);
    free(C1);
    free(C2);
    free(want);
    free(got1);
    free(got2);
}

static void test_sgemm(void)
{
    /* the last two are above rp_sgemm's threading threshold (2^21 multiply-adds): split into
     * row blocks (M >= N) and column blocks (N > M) of odd sizes over the OpenMP threads */
    const int64_t sizes[][3] = {{37, 19, 53}, {53, 37, 19}, {1, 1, 1},    {1, 29, 1},
                                {23, 1, 31},  {1, 1, 40},   {64, 48, 96}, {3, 4, 1000},
                                {301, 257, 67}, {67, 301, 131}};
    const size_t nsizes = sizeof sizes / sizeof sizes[0];
    for (size_t s = 0; s < nsizes; s++)
        for (int ta = 0; ta <= 1; ta++)
            for (int tb = 0; tb <= 1; tb++) {
                int64_t M = sizes[s][0], N = sizes[s][1], K = sizes[s][2];
                gemm_case(ta, tb, M, N, K, 0, 1.0f, 0.0f);
                gemm_case(ta, tb, M, N, K, 3, 0.5f, -1.5f);
                gemm_case(ta, tb, M, N, K, 1, -2.0f, 1.0f);
                gemm_case(ta, tb, M, N, K, 5, 1.25f, 0.0f);
            }
    /* alpha = 0, beta = 0: C is overwritten with zeros even where it held NaN */
    float A[4] = {1, 2, 3, 4}, B[4] = {5, 6, 7, 8}, C[4] = {NAN, NAN, NAN, NAN};
    const float zeros[4] = {0, 0, 0, 0};
    rp_sgemm(0, 0, 2, 2, 2, 0.0f, A, 2, B, 2, 0.0f, C, 2);
    CHECK_CLOSE(C, zeros, 4, 0.0, "rp_sgemm alpha=0 beta=0 over NaN");
    for (int i = 0; i < 4; i++) C[i] = NAN;
    rp_sgemm_naive(0, 0, 2, 2, 2, 0.0f, A, 2, B, 2, 0.0f, C, 2);
    CHECK_CLOSE(C, zeros, 4, 0.0, "rp_sgemm_naive alpha=0 beta=0 over NaN");
    /* a small exact case */
    const float want[4] = {1 * 5 + 2 * 7, 1 * 6 + 2 * 8, 3 * 5 + 4 * 7, 3 * 6 + 4 * 8};
    rp_sgemm(0, 0, 2, 2, 2, 1.0f, A, 2, B, 2, 0.0f, C, 2);
    CHECK_CLOSE(C, want, 4, 0.0, "rp_sgemm [[1,2],[3,4]] @ [[5,6],[7,8]]");
}

/* ---------------------------------------------------------------- rp_matmul */

/* Reference matmul in double with numpy semantics, reading the tensors through their strides. */
static void ref_matmul(const rp_tensor *a, const rp_tensor *b, int *ond, int64_t *oshape,
                       double *out)
{
    int a1 = a->ndim == 1, b1 = b->ndim == 1;
    int64_t M = a1 ? 1 : a->shape[a->ndim - 2], K = a->shape[a->ndim - 1];
    int64_t N = b1 ? 1 : b->shape[b->ndim - 1];
    int abn = a1 ? 0 : a->ndim - 2, bbn = b1 ? 0 : b->ndim - 2;
    int nb = abn > bbn ? abn : bbn;
    int64_t bshape[RP_MAX_DIMS];
    for (int d = 0; d < nb; d++) {
        int da = d - (nb - abn), db = d - (nb - bbn);
        int64_t sa = da >= 0 ? a->shape[da] : 1, sb = db >= 0 ? b->shape[db] : 1;
        bshape[d] = sa == 1 ? sb : sa;
    }
    *ond = 0;
    for (int d = 0; d < nb; d++) oshape[(*ond)++] = bshape[d];
    if (!a1) oshape[(*ond)++] = M;
    if (!b1) oshape[(*ond)++] = N;
    int64_t nbatch = check_numel(nb, bshape), o = 0;
    int64_t bidx[RP_MAX_DIMS] = {0};
    for (int64_t bi = 0; bi < nbatch; bi++) {
        int64_t ia[RP_MAX_DIMS] = {0}, ib[RP_MAX_DIMS] = {0};
        for (int d = 0; d < nb; d++) {
            int da = d - (nb - abn), db = d - (nb - bbn);
            if (da >= 0) ia[da] = a->shape[da] == 1 ? 0 : bidx[d];
            if (db >= 0) ib[db] = b->shape[db] == 1 ? 0 : bidx[d];
        }
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double s = 0;
                for (int64_t k = 0; k < K; k++) {
                    if (a1) ia[0] = k;
                    else {
                        ia[abn] = i;
                        ia[abn + 1] = k;
                    }
                    if (b1) ib[0] = k;
                    else {
                        ib[bbn] = k;
                        ib[bbn + 1] = j;
                    }
                    s += (double)*check_at(a, ia) * (double)*check_at(b, ib);
                }
                out[o++] = s;
            }
        check_next_index(nb, bshape, bidx);
    }
}

static double max_abs_t(const rp_tensor *t)
{
    double m = 0;
    int64_t idx[RP_MAX_DIMS] = {0};
    if (rp_tensor_numel(t) == 0) return 0;
    do {
        double x = fabs((double)*check_at(t, idx));
        m = x > m ? x : m;
    } while (check_next_index(t->ndim, t->shape, idx));
    return m;
}

static void matmul_case(const char *name, const rp_tensor *a, const rp_tensor *b)
{
    char sa[RP_SHAPE_STR_LEN], sb[RP_SHAPE_STR_LEN], so[RP_SHAPE_STR_LEN], label[200];
    int ond;
    int64_t oshape[RP_MAX_DIMS];
    int64_t cap = 4096;
    double *want = malloc((size_t)cap * sizeof(double));
    float *got[2] = {malloc((size_t)cap * sizeof(float)), malloc((size_t)cap * sizeof(float))};
    ref_matmul(a, b, &ond, oshape, want);
    int64_t n = check_numel(ond, oshape);
    RP_ASSERT(n <= cap);
    float a_before[4096], b_before[4096];
    check_gather(a_before, a);
    check_gather(b_before, b);
    double tol = gemm_tol(a->shape[a->ndim - 1], 1.0, max_abs_t(a), max_abs_t(b), 0.0, 0.0);
    for (int naive = 0; naive <= 1; naive++) {
        rp_tensor out;
        snprintf(label, sizeof label, "rp_matmul%s %s @ %s %s", naive ? "(naive)" : "",
                 rp_tensor_shape_str(sa, sizeof sa, a), rp_tensor_shape_str(sb, sizeof sb, b),
                 name);
        rp_status st = rp_matmul(&out, a, b, naive);
        if (!CHECK(st == RP_OK, "%s: status %s: %s", label, rp_status_name(st), rp_last_error())) {
            memset(got[naive], 0, (size_t)cap * sizeof(float));
            continue;
        }
        int shape_ok = out.ndim == ond;
        for (int d = 0; shape_ok && d < ond; d++) shape_ok = out.shape[d] == oshape[d];
        if (CHECK(shape_ok, "%s: result %s, want %s", label,
                  rp_tensor_shape_str(so, sizeof so, &out), rp_shape_str(sa, sizeof sa, ond, oshape))) {
            check_gather(got[naive], &out);
            CHECK_CLOSE(got[naive], want, n, tol, label);
        }
        rp_tensor_release(&out);
    }
    snprintf(label, sizeof label, "rp_matmul sgemm vs naive %s", name);
    CHECK_CLOSE(got[0], got[1], n, tol, label);
    float after[4096];
    check_gather(after, a);
    int same = memcmp(after, a_before, sizeof(float) * (size_t)rp_tensor_numel(a)) == 0;
    check_gather(after, b);
    same &= memcmp(after, b_before, sizeof(float) * (size_t)rp_tensor_numel(b)) == 0;
    CHECK(same, "%s: inputs unchanged", name);
    free(want);
    free(got[0]);
    free(got[1]);
}

static rp_tensor randt(int ndim, const int64_t *shape)
{
    rp_tensor t = check_new(ndim, shape);
    check_fill_rand(&t, &rng_state, -1.0, 1.0);
    return t;
}

static void test_matmul(void)
{
    {
        rp_tensor a = randt(2, S(5, 7)), b = randt(2, S(7, 3));
        matmul_case("2-D", &a, &b);
        rp_tensor a3 = randt(3, S(2, 5, 7));
        matmul_case("batched a, 2-D b", &a3, &b);
        rp_tensor b3 = randt(3, S(4, 7, 3)), a4 = randt(4, S(2, 1, 5, 7));
        matmul_case("2-D a, batched b", &a, &b3);
        matmul_case("4-D with broadcast batch", &a4, &b3);
        rp_tensor v = randt(1, S(7)), w = randt(1, S(7));
        matmul_case("1-D a", &v, &b);
        matmul_case("1-D b", &a, &w);
        matmul_case("1-D dot", &v, &w);
        matmul_case("1-D a, batched b", &v, &b3);
        matmul_case("batched a, 1-D b", &a3, &w);
        rp_tensor_release(&a);
        rp_tensor_release(&b);
        rp_tensor_release(&a3);
        rp_tensor_release(&b3);
        rp_tensor_release(&a4);
        rp_tensor_release(&v);
        rp_tensor_release(&w);
    }
    {   /* transposed (non-contiguous) inputs, one of the last two strides 1 */
        rp_tensor a0 = randt(2, S(7, 5)), b0 = randt(2, S(3, 7)), a, b;
        CHECK_STATUS(rp_tensor_transpose(&a, &a0, 0, 1), RP_OK, NULL);
        CHECK_STATUS(rp_tensor_transpose(&b, &b0, 0, 1), RP_OK, NULL);
        matmul_case("both transposed", &a, &b);
        rp_tensor c = randt(2, S(7, 3));
        matmul_case("transposed a", &a, &c);
        rp_tensor_release(&c);
        rp_tensor_release(&a);
        rp_tensor_release(&b);
        rp_tensor_release(&a0);
        rp_tensor_release(&b0);
    }
    {   /* neither of the last two strides is 1 */
        rp_tensor a0 = randt(3, S(5, 7, 2)), b0 = randt(3, S(7, 3, 3)), a, b;
        CHECK_STATUS(rp_tensor_select(&a, &a0, 2, 1), RP_OK, NULL);
        CHECK_STATUS(rp_tensor_select(&b, &b0, 2, 2), RP_OK, NULL);
        matmul_case("strided (no unit stride)", &a, &b);
        rp_tensor_release(&a);
        rp_tensor_release(&b);
        rp_tensor_release(&a0);
        rp_tensor_release(&b0);
    }
    {   /* batched, transposed last dims, narrowed and permuted batch dims */
        rp_tensor a0 = randt(4, S(2, 3, 7, 5)), b0 = randt(3, S(4, 7, 6)), a, b;
        CHECK_STATUS(rp_tensor_transpose(&a, &a0, 2, 3), RP_OK, NULL);
        CHECK_STATUS(rp_tensor_narrow(&b, &b0, 0, 1, 3), RP_OK, NULL);
        matmul_case("batched transposed a, narrowed batch of b", &a, &b);
        rp_tensor c0 = randt(4, S(3, 2, 5, 7)), c;
        CHECK_STATUS(rp_tensor_permute(&c, &c0, (const int[]){1, 0, 2, 3}), RP_OK, NULL);
        matmul_case("permuted batch dims", &c, &b);
        rp_tensor e;
        CHECK_STATUS(rp_tensor_expand(&e, &b0, 4, S(2, 4, 7, 6)), RP_OK, NULL);
        rp_tensor f = randt(4, S(2, 4, 5, 7));
        matmul_case("expanded (stride-0) batch of b", &f, &e);
        rp_tensor_release(&f);
        rp_tensor_release(&e);
        rp_tensor_release(&c);
        rp_tensor_release(&c0);
        rp_tensor_release(&a);
        rp_tensor_release(&b);
        rp_tensor_release(&a0);
        rp_tensor_release(&b0);
    }
    {   /* long K, and empty dims (K = 0 gives zeros) */
        rp_tensor a = randt(2, S(4, 300)), b = randt(2, S(300, 5));
        matmul_case("K=300", &a, &b);
        rp_tensor_release(&a);
        rp_tensor_release(&b);
        rp_tensor e = randt(2, S(0, 7)), c = randt(2, S(7, 3));
        matmul_case("M=0", &e, &c);
        rp_tensor_release(&e);
        rp_tensor_release(&c);
        rp_tensor k0a = check_new(2, S(5, 0)), k0b = check_new(2, S(0, 3));
        matmul_case("K=0", &k0a, &k0b);
        rp_tensor_release(&k0a);
        rp_tensor_release(&k0b);
    }
    {   /* errors */
        rp_tensor a = check_new(2, S(5, 7)), b = check_new(2, S(6, 3)), out;
        check_poison(&out);
        CHECK_STATUS(rp_matmul(&out, &a, &b, 0), RP_ERR_SHAPE, NULL);
        CHECK(out.storage == NULL, "out empty on failure");
        CHECK(strstr(rp_last_error(), "[5 x 7]") && strstr(rp_last_error(), "[6 x 3]"),
              "message names both shapes: \"%s\"", rp_last_error());
        CHECK_STATUS(rp_matmul(&out, &a, &b, 1), RP_ERR_SHAPE, NULL);
        rp_tensor a3 = check_new(3, S(2, 5, 7)), b3 = check_new(3, S(3, 7, 4));
        CHECK_STATUS(rp_matmul(&out, &a3, &b3, 0), RP_ERR_SHAPE, NULL);
        rp_tensor v = check_new(1, S(7)), w = check_new(1, S(6));
        CHECK_STATUS(rp_matmul(&out, &v, &w, 0), RP_ERR_SHAPE, NULL);
        rp_tensor s = check_new(0, NULL);
        check_poison(&out);
        rp_status st = rp_matmul(&out, &s, &a, 0);
        CHECK(st != RP_OK && out.storage == NULL, "0-D operand rejected (%d)", (int)st);
        rp_tensor_release(&a);
        rp_tensor_release(&b);
        rp_tensor_release(&a3);
        rp_tensor_release(&b3);
        rp_tensor_release(&v);
        rp_tensor_release(&w);
        rp_tensor_release(&s);
    }
}

static void test_blas_info(void)
{
    const char *core = rp_blas_core(), *config = rp_blas_config();
    const char *wanted = rp_blas_wanted_coretype();
    printf("  OpenBLAS core %s, config %s, threads %d, wanted coretype %s\n", core ? core : "(null)",
           config ? config : "(null)", rp_blas_threads(), wanted ? wanted : "(none)");
    CHECK(core && core[0] && config && config[0], "rp_blas_core/rp_blas_config are non-empty");
    int t0 = rp_blas_threads();
    CHECK(t0 >= 1, "rp_blas_threads() = %d", t0);
    rp_blas_set_threads(1);
    CHECK(rp_blas_threads() == 1, "after rp_blas_set_threads(1): %d", rp_blas_threads());
    rp_blas_set_threads(t0);
    CHECK(rp_blas_threads() == t0, "restored: %d, want %d", rp_blas_threads(), t0);
}

/* ---------------------------------------------------------------- rp_tile_mm */

/* One product of rp_tile_mm on padded, strided buffers: against the double triple loop (within
 * gemm_tol), bitwise against the documented order (every element: its start value, then the K
 * products added in order of k with one rounding each: fmaf where the target has FMA), C's
 * padding untouched, and row invariance (each row again as a product of one row, bitwise). */
static void tile_case(int64_t M, int64_t N, int64_t K, int trans_a, int acc)
{
    int64_t lda = (trans_a ? M : K) + 3, ldb = N + 5, ldc = N + 7;
    int64_t arows = trans_a ? K : M;
    float *A = check_rand_floats(&rng_state, arows * lda + 1, -1.0, 1.0);
    float *B = check_rand_floats(&rng_state, K * ldb + 1, -1.0, 1.0);
    float *C0 = check_rand_floats(&rng_state, M * ldc + 1, -1.0, 1.0);
    float *C = check_copy_floats(C0, M * ldc + 1), *R = check_copy_floats(C0, M * ldc + 1);
    int64_t sa = trans_a ? 1 : lda, sk = trans_a ? lda : 1;
    rp_tile_mm(C, ldc, A, sa, sk, B, ldb, M, N, K, acc);
    double *want = malloc(sizeof(double) * (size_t)(M * N > 0 ? M * N : 1));
    float *ordered = malloc(sizeof(float) * (size_t)(M * N > 0 ? M * N : 1));
    int64_t pad_bad = 0;
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++) {
            double w = acc ? (double)C0[i * ldc + j] : 0.0;
            float o = acc ? C0[i * ldc + j] : 0.0f;
            for (int64_t k = 0; k < K; k++) {
                float a = A[i * sa + k * sk], b = B[k * ldb + j];
                w += (double)a * (double)b;
#if defined(__FMA__) || defined(__AVX512F__) ||                                                   \
    (defined(__ARM_NEON) && defined(__ARM_FEATURE_FMA))
                o = fmaf(a, b, o); /* where rp_vfma fuses (core/tensor/simd.h) */
#else
                o = a * b + o;
#endif
            }
            want[i * N + j] = w;
            ordered[i * N + j] = o;
        }
        for (int64_t j = N; j < ldc; j++) pad_bad += memcmp(&C[i * ldc + j], &C0[i * ldc + j], 4) != 0;
    }
    float *got = malloc(sizeof(float) * (size_t)(M * N > 0 ? M * N : 1));
    for (int64_t i = 0; i < M; i++) memcpy(got + i * N, C + i * ldc, sizeof(float) * (size_t)N);
    char label[160];
    snprintf(label, sizeof label, "rp_tile_mm M=%lld N=%lld K=%lld %s %s == double",
             (long long)M, (long long)N, (long long)K, trans_a ? "A^T" : "A", acc ? "+=" : "=");
    CHECK_CLOSE(got, want, M * N, gemm_tol(K, 1.0, 1.0, 1.0, acc ? 1.0 : 0.0, 1.0), label);
    snprintf(label, sizeof label, "rp_tile_mm M=%lld N=%lld K=%lld %s %s == in-order float sums",
             (long long)M, (long long)N, (long long)K, trans_a ? "A^T" : "A", acc ? "+=" : "=");
    CHECK_CLOSE(got, ordered, M * N, 0.0, label);
    CHECK(pad_bad == 0, "rp_tile_mm M=%lld N=%lld K=%lld: %lld padding entries of C written",
          (long long)M, (long long)N, (long long)K, (long long)pad_bad);
    int64_t row_diff = 0;
    for (int64_t i = 0; i < M; i++) {
        rp_tile_mm(R + i * ldc, ldc, A + i * sa, sa, sk, B, ldb, 1, N, K, acc);
        row_diff += memcmp(R + i * ldc, C + i * ldc, sizeof(float) * (size_t)N) != 0;
    }
    CHECK(row_diff == 0, "rp_tile_mm M=%lld N=%lld K=%lld: %lld rows differ when computed alone",
          (long long)M, (long long)N, (long long)K, (long long)row_diff);
    free(A);
    free(B);
    free(C0);
    free(C);
    free(R);
    free(want);
    free(ordered);
    free(got);
}

static void test_tile(void)
{
    const int64_t vl = rp_vl_round(1);
    printf("  rp_tile_mm: vectors of %lld floats\n", (long long)vl);
    const int64_t Ms[] = {0, 1, 2, 3, 5, 7, 8, 9, 13, 17, 64};
    /* in vectors: every panel width and remainder of each vector width's tiles, and every tile of
     * a single row (up to 8 vectors, then a remainder) */
    const int64_t Ns[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    const int64_t Ks[] = {0, 1, 3, 32, 65};
    for (size_t a = 0; a < sizeof Ms / sizeof Ms[0]; a++)
        for (size_t b = 0; b < sizeof Ns / sizeof Ns[0]; b++)
            for (size_t c = 0; c < sizeof Ks / sizeof Ks[0]; c++)
                for (int t = 0; t < 4; t++)
                    tile_case(Ms[a], Ns[b] * vl, Ks[c], t & 1, t >> 1);
}

int main(void)
{
    test_blas_info();
    test_sgemm();
    test_matmul();
    test_tile();
    CHECK(check_poison_intact(), "failing calls released what was in out");
    return check_summary("test_blas");
}
