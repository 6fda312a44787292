/* Small matrix products in registers (tile.h). */
#include "tile.h"

/* Accumulator tiles that fit the register file: 32 vector registers with AVX-512, 16 otherwise,
 * leaving room for the broadcast and the row of B. */
#if RP_VL == 16
#define NACC 24
#else
#define NACC 12
#endif
#define MR_MAX 8
#define NV_MAX 4

typedef void tile_fn(float *C, int64_t ldc, const float *A, int64_t sa, int64_t sk,
                     const float *B, int64_t ldb, int64_t K, int accumulate);

/* One MR x (NV * RP_VL) tile of C over all of K; the loops over r and v unroll completely, so the
 * accumulators live in registers. */
#define TILE(MR, NV)                                                                               \
    static void tile_##MR##_##NV(float *C, int64_t ldc, const float *A, int64_t sa, int64_t sk,    \
                                 const float *B, int64_t ldb, int64_t K, int accumulate)           \
    {                                                                                              \
        rp_vf acc[MR][NV];                                                                         \
        _Pragma("GCC unroll 8") for (int r = 0; r < MR; r++)                                       \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[r][v] =                       \
                accumulate ? rp_vload(C + r * ldc + v * RP_VL) : rp_vsplat(0.0f);                  \
        for (int64_t k = 0; k < K; k++) {                                                          \
            rp_vf b[NV];                                                                           \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) b[v] =                            \
                rp_vload(B + k * ldb + v * RP_VL);                                                 \
            _Pragma("GCC unroll 8") for (int r = 0; r < MR; r++)                                   \
            {                                                                                      \
                rp_vf a = rp_vsplat(A[r * sa + k * sk]);                                           \
                _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[r][v] =                   \
                    rp_vfma(a, b[v], acc[r][v]);                                                   \
            }                                                                                      \
        }                                                                                          \
        _Pragma("GCC unroll 8") for (int r = 0; r < MR; r++)                                       \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)                                   \
                rp_vstore(C + r * ldc + v * RP_VL, acc[r][v]);                                     \
    }

#define TILES_OF_ROWS(MR) TILE(MR, 1) TILE(MR, 2) TILE(MR, 3) TILE(MR, 4)
TILES_OF_ROWS(1)
TILES_OF_ROWS(2)
TILES_OF_ROWS(3)
TILES_OF_ROWS(4)
TILES_OF_ROWS(5)
TILES_OF_ROWS(6)
TILES_OF_ROWS(7)
TILES_OF_ROWS(8)

#define ROW_OF_TILES(MR) {tile_##MR##_1, tile_##MR##_2, tile_##MR##_3, tile_##MR##_4}
static tile_fn *const tiles[MR_MAX][NV_MAX] = {
    ROW_OF_TILES(1), ROW_OF_TILES(2), ROW_OF_TILES(3), ROW_OF_TILES(4),
    ROW_OF_TILES(5), ROW_OF_TILES(6), ROW_OF_TILES(7), ROW_OF_TILES(8),
};

void rp_tile_mm(float *C, int64_t ldc, const float *A, int64_t sa, int64_t sk, const float *B,
                int64_t ldb, int64_t M, int64_t N, int64_t K, int accumulate)
{
    int64_t nvec = N / RP_VL;
    for (int64_t v0 = 0; v0 < nvec; v0 += NV_MAX) {
        int nv = nvec - v0 < NV_MAX ? (int)(nvec - v0) : NV_MAX;
        int mr = NACC / nv < MR_MAX ? NACC / nv : MR_MAX;
        for (int64_t i0 = 0; i0 < M; i0 += mr) {
            int m = M - i0 < mr ? (int)(M - i0) : mr;
            tiles[m - 1][nv - 1](C + i0 * ldc + v0 * RP_VL, ldc, A + i0 * sa, sa, sk,
                                 B + v0 * RP_VL, ldb, K, accumulate);
        }
    }
}
