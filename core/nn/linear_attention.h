/* Causal linear attention (Katharopoulos et al. 2020, "Transformers are RNNs") with rotary
 * position embeddings as in RoFormer (Su et al., section 3.3, eq. 19) and RoPER's value rotation.
 *
 * Feature map phi(x) = elu(x) + 1 elementwise (x > 0: x + 1, else exp(x)), so phi > 0. Keys,
 * values and queries of one call come from one sequence (self-attention, S == T): row t of the
 * call sits at position n = q_offset + t, and query n sees keys m <= n (causal). No 1/sqrt(d)
 * scale. R_p rotates the first d_rot features by the angles p * theta_i with
 * theta_i = base^(-2i/d_rot) (rp_rope_theta; pairing as in rope.h), later features pass through.
 *
 * pe modes (cfg.scheme.pe) and placement (cfg.placement):
 *  NONE (SINUSOIDAL and LEARNED behave the same here; their encodings live in the embeddings):
 *      out_n = sum_{m<=n} (phi(q_n) . phi(k_m)) v_m / (sum_{m<=n} phi(q_n) . phi(k_m) + eps)
 *  ROPE, RP_LIN_AFTER (the default; RoFormer eq. 19): rotate after the feature map, in the
 *      numerator only:  w_nm = (R_n phi(q_n)) . (R_m phi(k_m))  (may be negative; depends on the
 *      positions only through n - m),  den_n = sum_{m<=n} phi(q_n) . phi(k_m) + eps,
 *      out_n = sum_{m<=n} w_nm v_m / den_n
 *  ROPE, RP_LIN_BEFORE (performer style): rotate before the feature map, in numerator and
 *      denominator:  w_nm = phi(R_n q_n) . phi(R_m k_m),  den_n = sum_{m<=n} w_nm + eps
 *  ROPER, either placement: w and den as for ROPE with that placement; values rotated by their
 *      position (first d_rot_v features) and the sum rotated back by -n:
 *      out_n = R_{-n} sum_{m<=n} w_nm R_m v_m / den_n = sum_{m<=n} w_nm R_{m-n} v_m / den_n
 *  ROPER_LEGACY: not supported (rp_linattn_check returns RP_ERR_ARG).
 *
 * Computation: the recurrent form. With q~_n, k~_m the numerator features (R phi or phi R) and
 * qd_n, kd_m the denominator features (phi(q), phi(k) for AFTER; q~, k~ otherwise) the kernel
 * keeps S_n = sum_{m<=n} k~_m v~_m^T (D x Dv, v~_m = R_m v_m for roper, else v_m) and
 * z_n = sum_{m<=n} kd_m (D), and out_n = R_{-n}^{roper} S_n^T q~_n / (qd_n . z_n + eps): time
 * O(B H T D Dv), no O(T^2) data.
 *
 * Numerics: the features, the rotations and S are float, vectorised: phi's exp is a polynomial
 * within 1.5 ulp of e^x (0 below x = -87); cos/sin are computed in double and rounded to float;
 * S_n = S_{n-1} + k~_n v~_n^T and u_n = S_n^T q~_n use fmaf with a fixed summation order. z and
 * the denominators are double; out_n = u_n * (float)(1 / den_n), rotated back in float. Against
 * the same recurrence in double, outputs and gradients agree within 3e-7 of their largest
 * magnitude (measured at T = 512 and 2048, D = Dv = 32, q, k in [-2, 2], every mode); the tests
 * compare with a float64 pairwise reference.
 *
 * Operands: the kernels take softmax attention's operand struct rp_attn_io (core/nn/attention.h)
 * with their own cfg (rp_linattn_cfg below); each kernel's comment names the members it reads.
 * Layout (rp_attn_io's strided rows with S = T): element (b, t, h, d) of q, k (width W = D) and
 * of v, out (W = Dv), and of their gradients, is at p[(b * T + t) * ld + h * W + d]. A contiguous
 * [B, T, H, W] tensor has ld = H * W; the model's fused qkv buffer [B, T, 3C] has ld = 3C with
 * k = qkv + C and v = qkv + 2C.
 *
 * Threads: the (b, h) pairs are spread over nthreads OpenMP threads (more than B * H is fine);
 * every pair is computed by the same sequential code, so results are bitwise the same for any
 * nthreads (and without OpenMP).
 */
#ifndef RP_LINEAR_ATTENTION_H
#define RP_LINEAR_ATTENTION_H

#include <stdint.h>

#include "attention.h" /* rp_attn_io, the operands */
#include "pe.h"        /* rp_pe, the mode table */
#include "rope.h"      /* rp_pairing */
#include "status.h"
#include "tensor.h"

typedef enum {
    RP_LIN_AFTER = 0,  /* rotate phi(x): RoFormer eq. 19, unrotated denominator (the default) */
    RP_LIN_BEFORE = 1  /* phi(R x): rotated numerator and denominator */
} rp_lin_placement;

/* The documented default of rp_linattn_cfg.eps, added to every denominator. */
#define RP_LINATTN_EPS 1e-6

typedef struct rp_linattn_cfg {
    /* The positional scheme, resolved as for softmax attention (pe.h's rp_pe_scheme, built by
     * rp_pe_scheme_init; a model's rp_model_cfg_scheme, rp.linear_attention's planner): pe NONE /
     * SINUSOIDAL / LEARNED (all plain), ROPE, ROPER, with the mode's own placements; q and k
     * rotate one width (d_rot_q = d_rot_k, even, 2..D) for rope/roper, v and the output one
     * (d_rot_v = d_rot_o, even, 2..Dv) for roper; base and pairing. */
    rp_pe_scheme scheme;
    rp_lin_placement placement; /* where rope/roper rotate q and k (ignored for plain modes) */
    double eps;        /* > 0, finite: added to the denominator; RP_LINATTN_EPS */
    int64_t q_offset;  /* position of row 0 of the call (>= 0) */
} rp_linattn_cfg;

/* A cfg with the defaults: the scheme of the given pe (rp_pe_scheme_init) with q and k D features
 * wide and v and the output Dv (where it rotates them), base RP_ROPE_BASE, half pairing;
 * placement after, eps RP_LINATTN_EPS, q_offset 0. A pe that is not a mode stays in scheme.pe
 * for rp_linattn_check to refuse. */
rp_linattn_cfg rp_linattn_cfg_default(rp_pe pe, int64_t D, int64_t Dv);

/* Name <-> enum: "after", "before" (rp_lin_placement_names, in enum order, NULL-terminated).
 * rp_lin_placement_name gives "?" for an invalid value, rp_lin_placement_from_name -1 for an
 * unknown name. */
extern const char *const rp_lin_placement_names[3];
const char *rp_lin_placement_name(rp_lin_placement p);
int rp_lin_placement_from_name(const char *name);

/* Validates the head sizes and cfg: D, Dv >= 1; pe known and not ROPER_LEGACY; placement and
 * pairing known; the scheme resolved (rp_pe_scheme_check) with the mode's own placements; for
 * rope/roper base positive and finite and the q/k width (named d_rot_qk) even in 2..D, d_rot_k
 * equal to d_rot_q; for roper d_rot_v even in 2..Dv, d_rot_o equal to it; eps positive and
 * finite; q_offset >= 0. Returns RP_OK, or RP_ERR_ARG with a message naming the problem
 * (rp_last_error()). The kernels below assume a cfg that passed. */
rp_status rp_linattn_check(int64_t D, int64_t Dv, const rp_linattn_cfg *cfg);
/* The one rule of eps (rp_linattn_check's, rp.linear_attention's planner's): RP_OK for a finite
 * eps > 0, else RP_ERR_ARG "eps must be a finite number > 0, got 0". */
rp_status rp_linattn_check_eps(double eps);

/* Doubles of recurrent state per sequence: H * (D * Dv + D). The state of B sequences is
 * [B][H][D * Dv + D]: per (b, h) first S (D x Dv, row-major: S[f * Dv + j] = sum over the keys
 * seen so far of k~_f v~_j, the numerator features of the key times the (rotated) value), then
 * z (D: the sum of the denominator features: phi(k) for AFTER and plain modes, phi(R_m k) for
 * BEFORE). The kernel keeps S in float: it stores float values widened to double and rounds what
 * it reads to float (exact for a state it wrote); z is double throughout. */
int64_t rp_linattn_state_doubles(int64_t H, int64_t D, int64_t Dv);

/* Floats of scratch rp_linattn_forward / rp_linattn_backward need for these dims with nthreads
 * threads (float cos/sin tables plus one slice per thread of O(T (D + Dv) + D Dv): the features
 * of every position, the state, the backward's per-position gradients); never decreases as T or
 * nthreads grow. The kernels store doubles in it (aligned internally to 64 bytes, the spare
 * floats included), so it must be allocated memory (malloc, an rp_storage), not a declared float
 * array. */
int64_t rp_linattn_scratch_floats(int64_t T, int64_t D, int64_t Dv, int nthreads);

/* The forward pass over T positions of B sequences, on the operands io: B, T, H, D, Dv; q, k, v
 * with their row strides ldq, ldk, ldv; out and ldo; scratch; nthreads; state and min_den (the
 * members rp_attn_io keeps for linear attention). The other members are not read (S: the keys
 * are the call's T rows; lse, att, dout, dq, dk, dv, set, drel). OVERWRITES io->out (rows io->ldo
 * apart; nothing beyond the H * Dv values of a row is written). io->scratch:
 * rp_linattn_scratch_floats(T, D, Dv, nthreads) floats, contents ignored. io->state: NULL for
 * training (zero initial state, nothing saved), or B * rp_linattn_state_doubles(H, D, Dv) doubles
 * ([B][H][D*Dv + D], see above): the initial state is read from it and the final state written
 * back (in place), so a prompt can be processed in one call and then one token per call (T = 1,
 * q_offset = its position); the result equals one call over the whole sequence (bitwise, for the
 * same cfg apart from q_offset). A zeroed state behaves as NULL. io->min_den: NULL, or receives
 * the smallest denominator den_n (eps included) over all (b, h, t), rounded to float (+inf when
 * B * H * T == 0). Dims and cfg must be valid (rp_linattn_check); B, T, H >= 0. */
void rp_linattn_forward(const rp_attn_io *io, const rp_linattn_cfg *cfg);

/* The backward pass of rp_linattn_forward run with state == NULL (zero initial state) on the
 * same q, k, v and cfg, on the operands io: B, T, H, D, Dv; q, k, v with ldq, ldk, ldv; dout and
 * ldo; dq, dk, dv; scratch; nthreads. The other members are not read (S as for the forward; out,
 * lse, att, set, drel, state, min_den). io->dq += dL/dq, io->dk += dL/dk, io->dv += dL/dv
 * (ACCUMULATES, whatever io->set says: there is no OVERWRITE form, so a caller that wants the
 * gradient alone clears them first; the same strides as q, k, v), given io->dout = dL/dout (rows
 * io->ldo apart). dq, dk, dv may point into one fused buffer (they must not overlap each other
 * or the inputs). io->scratch: the forward's size, contents ignored. It saves nothing from the
 * forward: a forward sweep computes the features of each position as it joins (kept in scratch;
 * phi' = min(phi, 1) needs no second exp), keeps S_n^T and z_n and gets
 * w_n = S_n g_y_n (g_y = R_n dout for roper, else dout), hence dq~ = w_n / den_n and
 * g_den_n = -(q~_n . w_n) / den_n^2 without recomputing the outputs; a reverse sweep accumulates
 * G = sum_{t>=n} q~_t g_u_t^T (D x Dv, kept also transposed so both products are row sweeps) and
 * Hz = sum_{t>=n} g_den_t qd_t for the key and value gradients and adds them as it goes. Float as
 * the forward (z, den, Hz and g_den in double, rounded to float where stored); the products of
 * the three sweeps over S^T, G, G^T sum their rows in two chains (even and odd rows) when the
 * width is a multiple of the vector width, so the gradients are not bitwise those of a backward
 * that follows the forward's order. Time O(B H T D Dv): 6 D Dv multiply-adds per position (S^T
 * and w; G, G^T and their products) against the forward's 2 (S, u), in about 1.5 times the
 * forward's time (measured at D = Dv = 32 on an AVX-512 Xeon: the forward's single chain waits on
 * each row's multiply-add). Results do not depend on nthreads. */
void rp_linattn_backward(const rp_attn_io *io, const rp_linattn_cfg *cfg);

/* Naive O(H T^2 D) introspection of ONE sequence (b = 0 of the given pointers, rows ldq / ldk
 * apart, positions q_offset + t): OVERWRITES w [H, T, T] with the numerator weights w_nm of the
 * mode (zeros above the diagonal, m > n) and den [H, T] with the denominators (eps included),
 * both in double from the explicit pairwise formulas (no recurrence), so they check the kernel
 * and let a benchmark report the smallest weight and denominator. For roper the weights are
 * those of rope with the same placement (the value rotation is not part of w). Allocates nothing
 * (works through the features in blocks on the stack). Dims and cfg must be valid. */
void rp_linattn_weights(double *w, double *den, const float *q, int64_t ldq, const float *k,
                        int64_t ldk, int64_t T, int64_t H, int64_t D, const rp_linattn_cfg *cfg);

/* The smallest normalised weight w_nm / den_n over m <= n of the output of rp_linattn_weights
 * (w [H, T, T], den [H, T]); +inf when H * T == 0. Negative when a rotated numerator is. */
double rp_linattn_min_weight(const double *w, const double *den, int64_t T, int64_t H);

/* Tensor-level forward for one call: q, k [B, T, H, D] and v [B, T, H, Dv] (4-D, sizes >= 1,
 * any strides; keys and queries at the same positions q_offset .. q_offset+T-1). Checks shapes
 * (RP_ERR_SHAPE, "expected k as [...], got [...]") and cfg (rp_linattn_check), then allocates and
 * fills out [B, T, H, Dv] and, when w / den are not NULL, w [B, H, T, T] and den [B, H, T]: the
 * numerator weights and denominators of rp_linattn_weights, rounded to float. The caller
 * releases what it gets (nothing on an error). */
rp_status rp_linear_attention(rp_tensor *out, rp_tensor *w, rp_tensor *den, const rp_tensor *q,
                              const rp_tensor *k, const rp_tensor *v, const rp_linattn_cfg *cfg);

#endif
