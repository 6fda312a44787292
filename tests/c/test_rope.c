/* Rotary position embeddings (core/nn/rope.h) against a double-precision reference written from the
 * math: theta_i = base^(-2i/d_rot); a pair (x_p, x_q) rotated by phi becomes
 * (x_p cos phi - x_q sin phi, x_q cos phi + x_p sin phi); half pairing p = i, q = i + d_rot/2,
 * interleaved p = 2i, q = 2i+1; features >= d_rot pass through. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "rp.h"

#define S(...) CHECK_SHAPE(__VA_ARGS__)

static uint64_t rng_state = 4242;

static const char *pair_name(rp_pairing p) { return p == RP_PAIR_HALF ? "half" : "interleaved"; }

/* Rotates one row of D features: pair j by the angle whose cosine and sine are c[j], s[j]. */
static void ref_rotate_row(double *y, const double *x, int64_t D, int64_t d_rot,
                           rp_pairing pairing, const double *c, const double *s)
{
    int64_t h = d_rot / 2;
    for (int64_t f = 0; f < D; f++) y[f] = x[f];
    for (int64_t j = 0; j < h; j++) {
        int64_t p = pairing == RP_PAIR_HALF ? j : 2 * j;
        int64_t q = pairing == RP_PAIR_HALF ? j + h : 2 * j + 1;
        y[p] = x[p] * c[j] - x[q] * s[j];
        y[q] = x[q] * c[j] + x[p] * s[j];
    }
}

static double max_abs_f(const float *x, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fabs((double)x[i]) > m ? fabs((double)x[i]) : m;
    return m;
}

static void fill_rand(float *x, int64_t n, double lo, double hi)
{
    for (int64_t i = 0; i < n; i++) x[i] = (float)check_rand(&rng_state, lo, hi);
}

/* ---------------------------------------------------------------- theta, angles */

static void test_theta_angles(void)
{
    const int64_t drots[3] = {2, 8, 64};
    const double bases[2] = {10000.0, 500.0};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 2; b++) {
            double got[32], want[32];
            int64_t h = drots[a] / 2;
            rp_rope_theta(got, drots[a], bases[b]);
            for (int64_t i = 0; i < h; i++) want[i] = pow(bases[b], -2.0 * (double)i / (double)drots[a]);
            char label[64];
            snprintf(label, sizeof label, "rp_rope_theta d_rot=%lld base=%g", (long long)drots[a],
                     bases[b]);
            CHECK_CLOSE(got, want, h, 1e-15, label); /* theta <= 1, a few double ulps */
        }

    /* angles: computed in double, stored as float. At pos ~1e6 a float angle would be off by
     * ~0.03 rad; the double one gives cos/sin within float rounding (6e-8). */
    const int64_t d_rot = 16, h = d_rot / 2, n = 6;
    const int64_t explicit_pos[6] = {0, 1, 17, 10001, 123456, 999999};
    const int64_t offsets[2] = {0, 20000};
    const double scales[2] = {1.0, 2.0};
    double theta[8];
    for (int64_t i = 0; i < h; i++) theta[i] = pow(10000.0, -2.0 * (double)i / (double)d_rot);
    for (int mode = 0; mode < 3; mode++)
        for (int sc = 0; sc < 2; sc++) {
            float cg[48], sg[48];
            double cw[48], sw[48];
            const int64_t *pos = mode == 2 ? explicit_pos : NULL;
            int64_t offset = mode == 2 ? 0 : offsets[mode];
            rp_rope_angles(cg, sg, pos, offset, n, d_rot, 10000.0, scales[sc]);
            for (int64_t r = 0; r < n; r++)
                for (int64_t i = 0; i < h; i++) {
                    double p = pos ? (double)pos[r] : (double)(offset + r);
                    cw[r * h + i] = cos(p * theta[i] * scales[sc]);
                    sw[r * h + i] = sin(p * theta[i] * scales[sc]);
                }
            char label[96];
            snprintf(label, sizeof label, "rp_rope_angles cos, %s, scale %g",
                     mode == 2 ? "explicit positions up to 999999" : mode ? "offset 20000" : "offset 0",
                     scales[sc]);
            CHECK_CLOSE(cg, cw, n * h, 1e-7, label);
            snprintf(label, sizeof label, "rp_rope_angles sin, %s, scale %g",
                     mode == 2 ? "explicit positions up to 999999" : mode ? "offset 20000" : "offset 0",
                     scales[sc]);
            CHECK_CLOSE(sg, sw, n * h, 1e-7, label);
        }
}

/* ---------------------------------------------------------------- the kernel */

enum { KN = 2, KT = 5, KM = 3, KD = 10 };
#define KSIZE (KN * KT * KM * KD)

/* Reference of rp_rope_forward from the float tables. */
static void ref_forward(double *out, const float *in, const float *ct, const float *st, int64_t N,
                        int64_t T, int64_t M, int64_t D, int64_t d_rot, rp_pairing pairing,
                        int sign)
{
    int64_t h = d_rot / 2;
    double x[64], c[32], s[32];
    for (int64_t n = 0; n < N; n++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t m = 0; m < M; m++) {
                int64_t row = ((n * T + t) * M + m) * D;
                for (int64_t f = 0; f < D; f++) x[f] = (double)in[row + f];
                for (int64_t j = 0; j < h; j++) {
                    c[j] = (double)ct[t * h + j];
                    s[j] = (sign < 0 ? -1.0 : 1.0) * (double)st[t * h + j];
                }
                ref_rotate_row(out + row, x, D, d_rot, pairing, c, s);
            }
}

static void test_forward(void)
{
    const int64_t drots[3] = {2, 6, 10};
    const int64_t pos[KT] = {0, 3, 12345, 70000, 7};
    float in[KSIZE], out[KSIZE], buf[KSIZE], back[KSIZE];
    double want[KSIZE];
    fill_rand(in, KSIZE, -2.0, 2.0);
    double mx = max_abs_f(in, KSIZE);
    for (int a = 0; a < 3; a++)
        for (int pm = 0; pm < 2; pm++)
            for (int sign = -1; sign <= 1; sign += 2)
                for (int pp = 0; pp < 2; pp++) {
                    int64_t d_rot = drots[a];
                    rp_pairing pairing = (rp_pairing)pm;
                    float ct[KT * 5], st[KT * 5];
                    rp_rope_angles(ct, st, pp ? pos : NULL, 0, KT, d_rot, 10000.0, 1.0);
                    char label[160];
                    snprintf(label, sizeof label, "rp_rope_forward d_rot=%lld %s sign %+d %s",
                             (long long)d_rot, pair_name(pairing), sign,
                             pp ? "positions up to 70000" : "positions 0..4");
                    rp_rope_forward(out, in, ct, st, KN, KT, KM, KD, d_rot, pairing, sign);
                    ref_forward(want, in, ct, st, KN, KT, KM, KD, d_rot, pairing, sign);
                    /* two float products and a sum per output: a few 1e-7 relative */
                    CHECK_CLOSE(out, want, KSIZE, 1e-6 * mx, label);

                    memcpy(buf, in, sizeof buf);
                    rp_rope_forward(buf, buf, ct, st, KN, KT, KM, KD, d_rot, pairing, sign);
                    snprintf(label, sizeof label, "rp_rope_forward in place d_rot=%lld %s sign %+d %s",
                             (long long)d_rot, pair_name(pairing), sign,
                             pp ? "positions up to 70000" : "positions 0..4");
                    CHECK_CLOSE(buf, out, KSIZE, 1e-7 * mx, label);

                    rp_rope_forward(back, out, ct, st, KN, KT, KM, KD, d_rot, pairing, -sign);
                    snprintf(label, sizeof label, "forward(%+d) then forward(%+d) = identity d_rot=%lld %s %s",
                             sign, -sign, (long long)d_rot, pair_name(pairing),
                             pp ? "positions up to 70000" : "positions 0..4");
                    /* cos^2 + sin^2 of float tables is 1 within ~1e-7 */
                    CHECK_CLOSE(back, in, KSIZE, 1e-6 * mx, label);

                    double nin[KN * KT * KM], nout[KN * KT * KM];
                    for (int r = 0; r < KN * KT * KM; r++) {
                        double s0 = 0, s1 = 0;
                        for (int f = 0; f < KD; f++) {
                            s0 += (double)in[r * KD + f] * (double)in[r * KD + f];
                            s1 += (double)out[r * KD + f] * (double)out[r * KD + f];
                        }
                        nin[r] = sqrt(s0);
                        nout[r] = sqrt(s1);
                    }
                    snprintf(label, sizeof label, "row norms preserved d_rot=%lld %s sign %+d %s",
                             (long long)d_rot, pair_name(pairing), sign,
                             pp ? "positions up to 70000" : "positions 0..4");
                    CHECK_CLOSE(nout, nin, KN * KT * KM, 1e-6 * mx, label);
                }

    /* half and interleaved agree up to the feature permutation interleaved[2j] = half[j],
     * interleaved[2j+1] = half[j + d_rot/2]; features >= d_rot stay in place */
    for (int a = 0; a < 3; a++) {
        int64_t d_rot = drots[a], h = d_rot / 2;
        float ct[KT * 5], st[KT * 5], xi[KSIZE], oh[KSIZE], oi[KSIZE], oi_back[KSIZE];
        rp_rope_angles(ct, st, pos, 0, KT, d_rot, 10000.0, 1.0);
        for (int r = 0; r < KN * KT * KM; r++)
            for (int64_t f = 0; f < KD; f++) {
                int64_t g = f >= d_rot ? f : (f % 2 == 0 ? f / 2 : f / 2 + h);
                xi[r * KD + f] = in[r * KD + g];
            }
        rp_rope_forward(oh, in, ct, st, KN, KT, KM, KD, d_rot, RP_PAIR_HALF, 1);
        rp_rope_forward(oi, xi, ct, st, KN, KT, KM, KD, d_rot, RP_PAIR_INTERLEAVED, 1);
        for (int r = 0; r < KN * KT * KM; r++)
            for (int64_t f = 0; f < KD; f++) {
                int64_t g = f >= d_rot ? f : (f % 2 == 0 ? f / 2 : f / 2 + h);
                oi_back[r * KD + g] = oi[r * KD + f];
            }
        char label[96];
        snprintf(label, sizeof label, "half == permuted interleaved, d_rot=%lld", (long long)d_rot);
        CHECK_CLOSE(oi_back, oh, KSIZE, 1e-7 * mx, label);
    }

    /* a hand-computed case: D=4, d_rot=4, position 1, half pairing, base 10000:
     * theta = (1, 0.01); pairs (x0, x2) by 1 rad and (x1, x3) by 0.01 rad */
    {
        const float x[4] = {1.0f, 2.0f, 3.0f, 4.0f};
        float c[2], s[2], y[4];
        rp_rope_angles(c, s, NULL, 1, 1, 4, 10000.0, 1.0);
        rp_rope_forward(y, x, c, s, 1, 1, 1, 4, 4, RP_PAIR_HALF, 1);
        const double w[4] = {1 * cos(1.0) - 3 * sin(1.0), 2 * cos(0.01) - 4 * sin(0.01),
                             3 * cos(1.0) + 1 * sin(1.0), 4 * cos(0.01) + 2 * sin(0.01)};
        CHECK_CLOSE(y, w, 4, 1e-6, "hand-computed half rotation at position 1");
        rp_rope_forward(y, x, c, s, 1, 1, 1, 4, 4, RP_PAIR_INTERLEAVED, 1);
        const double wi[4] = {1 * cos(1.0) - 2 * sin(1.0), 2 * cos(1.0) + 1 * sin(1.0),
                              3 * cos(0.01) - 4 * sin(0.01), 4 * cos(0.01) + 3 * sin(0.01)};
        CHECK_CLOSE(y, wi, 4, 1e-6, "hand-computed interleaved rotation at position 1");
    }
}

/* f(x) = <dout, forward(x)> in double */
static double fwd_dot(const float *x, const float *dout, const float *ct, const float *st,
                      int64_t N, int64_t T, int64_t M, int64_t D, int64_t d_rot,
                      rp_pairing pairing, int sign)
{
    float y[256];
    rp_rope_forward(y, x, ct, st, N, T, M, D, d_rot, pairing, sign);
    double s = 0;
    for (int64_t i = 0; i < N * T * M * D; i++) s += (double)dout[i] * (double)y[i];
    return s;
}

static void test_backward(void)
{
    enum { N = 1, T = 3, M = 2, D = 6, NE = N * T * M * D };
    const int64_t drots[2] = {4, 6};
    const int64_t pos[T] = {2, 11, 5000};
    for (int a = 0; a < 2; a++)
        for (int pm = 0; pm < 2; pm++)
            for (int sign = -1; sign <= 1; sign += 2) {
                int64_t d_rot = drots[a];
                rp_pairing pairing = (rp_pairing)pm;
                float ct[T * 3], st[T * 3], x[NE], dout[NE], y[NE], g[NE], g0[NE], acc[NE];
                rp_rope_angles(ct, st, pos, 0, T, d_rot, 10000.0, 1.0);
                fill_rand(x, NE, -1.0, 1.0);
                fill_rand(dout, NE, -1.0, 1.0);
                fill_rand(g0, NE, -1.0, 1.0);
                char label[128];

                /* <dout, J x> == <J^T dout, x> */
                rp_rope_forward(y, x, ct, st, N, T, M, D, d_rot, pairing, sign);
                memset(g, 0, sizeof g);
                rp_rope_backward(g, dout, ct, st, N, T, M, D, d_rot, pairing, sign);
                double lhs = 0, rhs = 0;
                for (int i = 0; i < NE; i++) {
                    lhs += (double)dout[i] * (double)y[i];
                    rhs += (double)g[i] * (double)x[i];
                }
                CHECK(fabs(lhs - rhs) < 1e-5, "<dout, Jx> = %.9g vs <J^T dout, x> = %.9g (d_rot=%lld %s sign %+d)",
                      lhs, rhs, (long long)d_rot, pair_name(pairing), sign);

                /* backward accumulates */
                memcpy(acc, g0, sizeof acc);
                rp_rope_backward(acc, dout, ct, st, N, T, M, D, d_rot, pairing, sign);
                double want_acc[NE];
                for (int i = 0; i < NE; i++) want_acc[i] = (double)g0[i] + (double)g[i];
                snprintf(label, sizeof label, "rp_rope_backward accumulates d_rot=%lld %s sign %+d",
                         (long long)d_rot, pair_name(pairing), sign);
                CHECK_CLOSE(acc, want_acc, NE, 3e-7, label);

                /* backward == the rotation by -sign */
                float rinv[NE];
                rp_rope_forward(rinv, dout, ct, st, N, T, M, D, d_rot, pairing, -sign);
                snprintf(label, sizeof label, "rp_rope_backward == forward(-sign) d_rot=%lld %s sign %+d",
                         (long long)d_rot, pair_name(pairing), sign);
                CHECK_CLOSE(g, rinv, NE, 1e-6, label);

                /* finite differences of f(x) = <dout, forward(x)>; f is linear, so the only error
                 * is float rounding of forward (~1e-7 * |y| per element) divided by 2h = 0.02 */
                double fd[NE];
                const float hstep = 0.01f;
                for (int i = 0; i < NE; i++) {
                    float xp[NE], xm[NE];
                    memcpy(xp, x, sizeof xp);
                    memcpy(xm, x, sizeof xm);
                    xp[i] += hstep;
                    xm[i] -= hstep;
                    double step = (double)xp[i] - (double)xm[i];
                    fd[i] = (fwd_dot(xp, dout, ct, st, N, T, M, D, d_rot, pairing, sign) -
                             fwd_dot(xm, dout, ct, st, N, T, M, D, d_rot, pairing, sign)) / step;
                }
                snprintf(label, sizeof label, "rp_rope_backward vs finite differences d_rot=%lld %s sign %+d",
                         (long long)d_rot, pair_name(pairing), sign);
                CHECK_CLOSE(g, fd, NE, 1e-4, label);
            }
}

/* ---------------------------------------------------------------- tensor level */

/* Reference of rp_rope_rotate in double from positions and the cfg. */
static void ref_rope_rotate(double *want, const rp_tensor *x, const rp_rope_cfg *cfg)
{
    int64_t D = x->shape[x->ndim - 1], h = cfg->d_rot / 2;
    int64_t outer[RP_MAX_DIMS];
    int no = x->ndim - 1;
    for (int d = 0; d < no; d++) outer[d] = x->shape[d];
    int64_t idx[RP_MAX_DIMS] = {0}, nrows = check_numel(no, outer);
    for (int64_t r = 0; r < nrows; r++) {
        int64_t t = cfg->pos_dim >= 0 ? idx[cfg->pos_dim] : 0;
        double p = cfg->positions ? (double)cfg->positions[t] : (double)(cfg->offset + t);
        double xr[64], c[32], s[32];
        for (int64_t f = 0; f < D; f++) {
            idx[no] = f;
            xr[f] = (double)*check_at(x, idx);
        }
        idx[no] = 0;
        for (int64_t j = 0; j < h; j++) {
            double ang = cfg->sign * cfg->scale * p * pow(cfg->base, -2.0 * (double)j / (double)cfg->d_rot);
            c[j] = cos(ang);
            s[j] = sin(ang);
        }
        ref_rotate_row(want + r * D, xr, D, cfg->d_rot, cfg->pairing, c, s);
        check_next_index(no, outer, idx);
    }
}

static void rotate_case(const char *name, const rp_tensor *x, const rp_rope_cfg *cfg)
{
    int64_t n = rp_tensor_numel(x);
    double *want = malloc(sizeof(double) * (size_t)n);
    float *got = malloc(sizeof(float) * (size_t)n), *before = malloc(sizeof(float) * (size_t)n);
    float *after = malloc(sizeof(float) * (size_t)n);
    check_gather(before, x);
    rp_tensor out;
    char label[200], sx[RP_SHAPE_STR_LEN];
    snprintf(label, sizeof label, "rp_rope_rotate %s %s d_rot=%lld %s sign %+d scale %g base %g pos_dim %d",
             name, rp_tensor_shape_str(sx, sizeof sx, x), (long long)cfg->d_rot,
             pair_name(cfg->pairing), cfg->sign, cfg->scale, cfg->base, cfg->pos_dim);
    rp_status st = rp_rope_rotate(&out, x, cfg);
    if (CHECK(st == RP_OK, "%s: status %s: %s", label, rp_status_name(st), rp_last_error())) {
        if (CHECK(rp_tensor_same_shape(&out, x), "%s: result shape", label)) {
            ref_rope_rotate(want, x, cfg);
            check_gather(got, &out);
            /* float cos/sin tables (6e-8) and float products: 1e-6 relative to max|x| */
            CHECK_CLOSE(got, want, n, 1e-6 * max_abs_f(before, n), label);
        }
        rp_tensor_release(&out);
    }
    check_gather(after, x);
    CHECK(memcmp(before, after, sizeof(float) * (size_t)n) == 0, "%s: input unchanged", label);
    free(want);
    free(got);
    free(before);
    free(after);
}

static void test_rotate(void)
{
    rp_rope_cfg def = rp_rope_cfg_default(6);
    CHECK(def.d_rot == 6 && def.base == 10000.0 && def.pairing == RP_PAIR_HALF && def.sign == 1 &&
              def.scale == 1.0 && def.pos_dim == -1 && def.offset == 0 && def.positions == NULL,
          "rp_rope_cfg_default");

    rp_tensor x = check_new(4, S(2, 5, 3, 8)); /* B, T, H, D */
    check_fill_rand(&x, &rng_state, -1.0, 1.0);
    rp_rope_cfg cfg = rp_rope_cfg_default(8);
    cfg.pos_dim = 1;
    rotate_case("[B,T,H,D]", &x, &cfg);
    cfg.pairing = RP_PAIR_INTERLEAVED;
    rotate_case("[B,T,H,D]", &x, &cfg);
    cfg.d_rot = 4;
    cfg.offset = 7;
    cfg.sign = -1;
    cfg.base = 500.0;
    cfg.scale = 2.0;
    rotate_case("offset 7", &x, &cfg);
    cfg.pairing = RP_PAIR_HALF;
    rotate_case("offset 7", &x, &cfg);
    const int64_t pos[5] = {0, 3, 10000, 20001, 5};
    cfg = rp_rope_cfg_default(6);
    cfg.pos_dim = 1;
    cfg.positions = pos;
    rotate_case("explicit positions", &x, &cfg);
    cfg.offset = 99; /* ignored when positions are given */
    rotate_case("explicit positions, offset ignored", &x, &cfg);

    /* positions along dim 2 of [B, H, T, D], and along dim 0 */
    rp_tensor xb = check_new(4, S(2, 3, 5, 8));
    check_fill_rand(&xb, &rng_state, -1.0, 1.0);
    cfg = rp_rope_cfg_default(8);
    cfg.pos_dim = 2;
    cfg.offset = 12000;
    rotate_case("[B,H,T,D] offset 12000", &xb, &cfg);
    cfg.pos_dim = 0;
    rotate_case("positions along dim 0", &xb, &cfg);
    rp_tensor xt = check_new(2, S(5, 8));
    check_fill_rand(&xt, &rng_state, -1.0, 1.0);
    cfg = rp_rope_cfg_default(8);
    cfg.pos_dim = 0;
    rotate_case("[T,D]", &xt, &cfg);

    /* a non-contiguous input: [B,H,T,D] viewed as [B,T,H,D] */
    rp_tensor xv;
    CHECK_STATUS(rp_tensor_transpose(&xv, &xb, 1, 2), RP_OK, NULL);
    cfg = rp_rope_cfg_default(8);
    cfg.pos_dim = 1;
    cfg.offset = 3;
    rotate_case("transposed view", &xv, &cfg);
    cfg.pairing = RP_PAIR_INTERLEAVED;
    cfg.d_rot = 6;
    rotate_case("transposed view", &xv, &cfg);

    /* one vector */
    rp_tensor v = check_new(1, S(10));
    check_fill_rand(&v, &rng_state, -1.0, 1.0);
    cfg = rp_rope_cfg_default(10);
    cfg.offset = 12;
    rotate_case("one vector at offset 12", &v, &cfg);
    const int64_t p1[1] = {4242};
    cfg.positions = p1;
    cfg.d_rot = 6;
    rotate_case("one vector at positions[0] = 4242", &v, &cfg);

    /* d_rot < D: the tail passes through */
    rp_tensor x10 = check_new(3, S(4, 2, 10));
    check_fill_rand(&x10, &rng_state, -1.0, 1.0);
    cfg = rp_rope_cfg_default(6);
    cfg.pos_dim = 0;
    rotate_case("d_rot < D", &x10, &cfg);

    /* relative position: <R(m) q, R(n) k> depends only on m - n */
    {
        rp_tensor q = check_new(2, S(1, 8)), k = check_new(2, S(1, 8)), qr, kr;
        check_fill_rand(&q, &rng_state, -1.0, 1.0);
        check_fill_rand(&k, &rng_state, -1.0, 1.0);
        const int64_t shifts[4] = {0, 1, 1000, 50000};
        double dots[4], first[4];
        for (int i = 0; i < 4; i++) {
            rp_rope_cfg cq = rp_rope_cfg_default(8), ck = rp_rope_cfg_default(8);
            cq.pos_dim = ck.pos_dim = 0;
            cq.offset = 9 + shifts[i];
            ck.offset = 2 + shifts[i];
            CHECK_STATUS(rp_rope_rotate(&qr, &q, &cq), RP_OK, NULL);
            CHECK_STATUS(rp_rope_rotate(&kr, &k, &ck), RP_OK, NULL);
            dots[i] = 0;
            for (int f = 0; f < 8; f++)
                dots[i] += (double)rp_tensor_data(&qr)[f] * (double)rp_tensor_data(&kr)[f];
            first[i] = i == 0 ? dots[0] : first[0];
            rp_tensor_release(&qr);
            rp_tensor_release(&kr);
        }
        /* |q||k| <= 8; float tables: ~1e-6 */
        CHECK_CLOSE(dots, first, 4, 5e-6, "<R(9+c) q, R(2+c) k> independent of c");
        rp_tensor_release(&q);
        rp_tensor_release(&k);
    }

    /* errors */
    rp_tensor out;
    cfg = rp_rope_cfg_default(5);
    cfg.pos_dim = 1;
    check_poison(&out);
    CHECK_STATUS(rp_rope_rotate(&out, &x, &cfg), RP_ERR_ARG, "d_rot");
    CHECK(out.storage == NULL, "out empty on failure");
    cfg.d_rot = 10; /* > D = 8 */
    CHECK_STATUS(rp_rope_rotate(&out, &x, &cfg), RP_ERR_ARG, "d_rot");
    cfg.d_rot = 0;
    CHECK_STATUS(rp_rope_rotate(&out, &x, &cfg), RP_ERR_ARG, "d_rot");
    cfg.d_rot = -2;
    CHECK_STATUS(rp_rope_rotate(&out, &x, &cfg), RP_ERR_ARG, "d_rot");
    cfg.d_rot = 8;
    cfg.pos_dim = 4;
    CHECK_STATUS(rp_rope_rotate(&out, &x, &cfg), RP_ERR_ARG, "position dim");
    cfg.pos_dim = -2;
    CHECK_STATUS(rp_rope_rotate(&out, &x, &cfg), RP_ERR_ARG, "position dim");
    CHECK(out.storage == NULL && check_poison_intact(), "out still empty, dummy untouched");
    rp_tensor s0 = check_new(0, NULL);
    cfg = rp_rope_cfg_default(2);
    rp_status st = rp_rope_rotate(&out, &s0, &cfg);
    CHECK(st != RP_OK && out.storage == NULL, "0-D input rejected (%d)", (int)st);

    rp_tensor_release(&s0);
    rp_tensor_release(&x10);
    rp_tensor_release(&v);
    rp_tensor_release(&xv);
    rp_tensor_release(&xt);
    rp_tensor_release(&xb);
    rp_tensor_release(&x);
}

/* ---------------------------------------------------------------- sinusoidal */

static void test_sinusoidal(void)
{
    const struct { int64_t T, d, offset; double base; } cases[3] = {
        {50, 16, 10000, 10000.0}, {3, 6, 0, 100.0}, {7, 2, 5, 10000.0}};
    for (int c = 0; c < 3; c++) {
        int64_t T = cases[c].T, d = cases[c].d;
        float *got = malloc(sizeof(float) * (size_t)(T * d));
        double *want = malloc(sizeof(double) * (size_t)(T * d));
        rp_sinusoidal_forward(got, T, d, cases[c].offset, cases[c].base);
        for (int64_t t = 0; t < T; t++)
            for (int64_t i = 0; i < d / 2; i++) {
                double p = (double)(cases[c].offset + t);
                double w = p / pow(cases[c].base, 2.0 * (double)i / (double)d);
                want[t * d + 2 * i] = sin(w);
                want[t * d + 2 * i + 1] = cos(w);
            }
        char label[96];
        snprintf(label, sizeof label, "rp_sinusoidal_forward T=%lld d=%lld offset %lld base %g",
                 (long long)T, (long long)d, (long long)cases[c].offset, cases[c].base);
        CHECK_CLOSE(got, want, T * d, 1e-7, label); /* double, rounded to float */
        free(got);
        free(want);
    }
}

int main(void)
{
    test_theta_angles();
    test_forward();
    test_backward();
    test_rotate();
    test_sinusoidal();
    return check_summary("test_rope");
}
