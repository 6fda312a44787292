/* Small matrix products in registers (tile.h). */
#include "tile.h"

/* The tile shapes of each vector width, chosen by measuring the attention kernels (causal,
 * T 512, d_k 32, one thread; docs/measured.md "Attention tiles per vector width" gives the
 * candidates and their times). C is cut into panels of at most NV_MAX vectors, left to right,
 * and each panel into tiles of rows_of[nv - 1] rows (nv: the panel's vectors), top to bottom:
 *  - AVX-512 (RP_VL 16, 32 registers): panels of 4 vectors, tiles of 6 x 4 vectors (8 rows for
 *    narrower panels), at most 24 accumulators;
 *  - AVX2 (RP_VL 8, 16 registers): panels of 3 vectors, tiles of 4 x 3: 12 accumulators, the 3
 *    vectors of B's row and the broadcast take all 16 registers, so B's row is loaded once per k
 *    (the 3 x 4 tiles used before need 17 and read one vector of B from memory for every row);
 *  - 4 floats (SSE without FMA, NEON): panels of 4, tiles of 3 x 4 (SSE measured; NEON, with 32
 *    registers, not measured and kept as it was).
 * One row (M = 1: decoding) goes in tiles of up to NV_ROW vectors, so that 8 sums, each a chain
 * of K dependent multiply-adds, are in flight (the panels above give it 3 or 4). */
#if RP_VL == 16
#define NV_MAX 4
static const int rows_of[NV_MAX] = {8, 8, 8, 6};
#elif RP_VL == 8
#define NV_MAX 3
static const int rows_of[NV_MAX] = {8, 6, 4};
#else
#define NV_MAX 4
static const int rows_of[NV_MAX] = {8, 6, 4, 3};
#endif
#define MR_MAX 8
#define NV_ROW 8

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
            _Pragma("GCC unroll 8") for (int v = 0; v < NV; v++) acc[r][v] =                       \
                accumulate ? rp_vload(C + r * ldc + v * RP_VL) : rp_vsplat(0.0f);                  \
        for (int64_t k = 0; k < K; k++) {                                                          \
            rp_vf b[NV];                                                                           \
            _Pragma("GCC unroll 8") for (int v = 0; v < NV; v++) b[v] =                            \
                rp_vload(B + k * ldb + v * RP_VL);                                                 \
            _Pragma("GCC unroll 8") for (int r = 0; r < MR; r++)                                   \
            {                                                                                      \
                rp_vf a = rp_vsplat(A[r * sa + k * sk]);                                           \
                _Pragma("GCC unroll 8") for (int v = 0; v < NV; v++) acc[r][v] =                   \
                    rp_vfma(a, b[v], acc[r][v]);                                                   \
            }                                                                                      \
        }                                                                                          \
        _Pragma("GCC unroll 8") for (int r = 0; r < MR; r++)                                       \
            _Pragma("GCC unroll 8") for (int v = 0; v < NV; v++)                                   \
                rp_vstore(C + r * ldc + v * RP_VL, acc[r][v]);                                     \
    }

/* The tiles of MR rows and 1 .. NV_MAX vectors, and their row of the table. */
#if NV_MAX == 3
#define TILES_OF_ROWS(MR) TILE(MR, 1) TILE(MR, 2) TILE(MR, 3)
#define ROW_OF_TILES(MR) {tile_##MR##_1, tile_##MR##_2, tile_##MR##_3}
#else
#define TILES_OF_ROWS(MR) TILE(MR, 1) TILE(MR, 2) TILE(MR, 3) TILE(MR, 4)
#define ROW_OF_TILES(MR) {tile_##MR##_1, tile_##MR##_2, tile_##MR##_3, tile_##MR##_4}
#endif
TILES_OF_ROWS(1)
TILES_OF_ROWS(2)
TILES_OF_ROWS(3)
TILES_OF_ROWS(4)
TILES_OF_ROWS(5)
TILES_OF_ROWS(6)
TILES_OF_ROWS(7)
TILES_OF_ROWS(8)

static tile_fn *const tiles[MR_MAX][NV_MAX] = {
    ROW_OF_TILES(1), ROW_OF_TILES(2), ROW_OF_TILES(3), ROW_OF_TILES(4),
    ROW_OF_TILES(5), ROW_OF_TILES(6), ROW_OF_TILES(7), ROW_OF_TILES(8),
};

/* One row: tiles of NV_MAX + 1 .. NV_ROW vectors beside those above. */
#if NV_MAX == 3
TILE(1, 4)
#endif
TILE(1, 5)
TILE(1, 6)
TILE(1, 7)
TILE(1, 8)
static tile_fn *const row_tiles[NV_ROW] = {tile_1_1, tile_1_2, tile_1_3, tile_1_4,
                                           tile_1_5, tile_1_6, tile_1_7, tile_1_8};

void rp_tile_mm(float *C, int64_t ldc, const float *A, int64_t sa, int64_t sk, const float *B,
                int64_t ldb, int64_t M, int64_t N, int64_t K, int accumulate)
{
    int64_t nvec = N / RP_VL;
    if (M == 1) {
        for (int64_t v0 = 0; v0 < nvec; v0 += NV_ROW) {
            int nv = nvec - v0 < NV_ROW ? (int)(nvec - v0) : NV_ROW;
            row_tiles[nv - 1](C + v0 * RP_VL, ldc, A, sa, sk, B + v0 * RP_VL, ldb, K, accumulate);
        }
        return;
    }
    for (int64_t v0 = 0; v0 < nvec; v0 += NV_MAX) {
        int nv = nvec - v0 < NV_MAX ? (int)(nvec - v0) : NV_MAX;
        int mr = rows_of[nv - 1];
        for (int64_t i0 = 0; i0 < M; i0 += mr) {
            int m = M - i0 < mr ? (int)(M - i0) : mr;
            tiles[m - 1][nv - 1](C + i0 * ldc + v0 * RP_VL, ldc, A + i0 * sa, sa, sk,
                                 B + v0 * RP_VL, ldb, K, accumulate);
        }
    }
}
