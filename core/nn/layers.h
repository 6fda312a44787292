/* Layer kernels of the transformer: forward/backward pairs over explicit float buffers (llm.c
 * style). Dim letters: N rows (= B*T tokens), C features, OC output features, V vocabulary.
 *
 * Argument order: forward (out, saved..., inp..., weights..., dims); backward
 * (dinp..., dweights..., dout, saved/inputs..., weights..., dims).
 * Forward OVERWRITES its outputs. Backward ACCUMULATES (+=) into every d* buffer; a NULL d*
 * pointer skips that gradient. A backward's _set variant OVERWRITES the input gradient dinp
 * instead (the weight gradients still accumulate), bit for bit what the accumulating entry gives
 * on a zeroed dinp: no memset before it. Kernels never allocate and never fail: callers check
 * dims.
 * Rows are processed in parallel with OpenMP where it pays; results do not depend on the thread
 * count (no reductions across threads change order), except inside sgemm.
 */
#ifndef RP_LAYERS_H
#define RP_LAYERS_H

#include <stdint.h>

#include "rng.h"

/* ---- embedding ---- */

/* out[n, :] = wte[tok[n], :] (+ wpe[pos[n], :] when wpe != NULL; pos[n] = n % T).
 * out (N, C), tok (N) with 0 <= tok < V (caller checks), wte (V, C), wpe (T, C) or NULL. */
void rp_embedding_forward(float *out, const int32_t *tok, const float *wte, const float *wpe,
                          int64_t N, int64_t T, int64_t C);
/* dwte[tok[n], :] += dout[n, :]; dwpe[n % T, :] += dout[n, :] (when dwpe != NULL). */
void rp_embedding_backward(float *dwte, float *dwpe, const float *dout, const int32_t *tok,
                           int64_t N, int64_t T, int64_t C);

/* ---- layer normalisation (eps 1e-5, biased variance, as torch.nn.LayerNorm) ---- */

/* out (N, C) = (inp - mean) * rstd * w + b; saves mean (N) and rstd (N). */
void rp_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *w,
                          const float *b, int64_t N, int64_t C);
/* dinp (N, C), dw (C), db (C) accumulate. inp, mean and rstd are the forward's input and saved
 * statistics (not its output). */
void rp_layernorm_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                           const float *mean, const float *rstd, const float *w, int64_t N,
                           int64_t C);
/* The same with dinp OVERWRITTEN (not NULL; dw, db accumulate): bit for bit what
 * rp_layernorm_backward accumulates onto a zeroed dinp. dinp must not overlap the inputs. */
void rp_layernorm_backward_set(float *dinp, float *dw, float *db, const float *dout,
                               const float *inp, const float *mean, const float *rstd,
                               const float *w, int64_t N, int64_t C);

/* ---- linear: out (N, OC) = inp (N, C) @ w^T + b, w (OC, C), b (OC) or NULL; sgemm ---- */
void rp_linear_forward(float *out, const float *inp, const float *w, const float *b, int64_t N,
                       int64_t C, int64_t OC);
/* dinp (N, C) += dout @ w; dw (OC, C) += dout^T @ inp; db (OC) += column sums of dout. */
void rp_linear_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                        const float *w, int64_t N, int64_t C, int64_t OC);
/* The same, except that dinp (N, C) = dout @ w is OVERWRITTEN (not NULL; dw and db still
 * accumulate), and only after dw and db have read inp: dinp may be inp itself (the buffer is
 * reused for the gradient), never dout. dinp holds exactly what rp_linear_backward accumulates
 * onto zeros (one sgemm with beta 0 instead of a memset and beta 1). */
void rp_linear_backward_set(float *dinp, float *dw, float *db, const float *dout,
                            const float *inp, const float *w, int64_t N, int64_t C, int64_t OC);

/* ---- row-invariant linear (decoding): out (N, OC) = inp (N, C) @ wt + b ----
 * wt (C, OC) is the weight TRANSPOSED (rp_transpose of w (OC, C)), b (OC) or NULL; OVERWRITES
 * out; out must not overlap inp. Every element is the float sum over k = 0 .. C-1 IN ORDER,
 * acc = inp[n][k] * wt[k][o] + acc from acc = 0 (one rounding: fused where the target has FMA,
 * rp_fmadd), then acc + b[o] (no other rounding). So a row's result is bitwise the same
 * whatever N is and whichever rows come with it (and for any thread count; OpenMP over column
 * blocks for large products), which OpenBLAS does not promise: the batched and the one-sequence
 * decoders run every projection through this kernel so that they agree bit for bit. The columns
 * in whole vectors go through rp_tile_mm (core/tensor/tile.h). */
void rp_linear_rows_forward(float *out, const float *inp, const float *wt, const float *b,
                            int64_t N, int64_t C, int64_t OC);
/* dst (cols, rows) = src (rows, cols)^T; OVERWRITES dst (not overlapping src). */
void rp_transpose(float *dst, const float *src, int64_t rows, int64_t cols);

/* ---- activations, elementwise over n values (out may equal inp) ----
 * backward: dinp += dout * act'(inp); _set: dinp = that term OVERWRITTEN, bit for bit what the
 * accumulating entry gives on a zeroed dinp, and dinp may equal dout (in place). */
void rp_relu_forward(float *out, const float *inp, int64_t n);
void rp_relu_backward(float *dinp, const float *dout, const float *inp, int64_t n);
void rp_relu_backward_set(float *dinp, const float *dout, const float *inp, int64_t n);
/* rp_relu_backward_set over an (N, F) buffer, and the bias gradient of the product that made
 * inp: db[j] += sum_n dinp[n][j], ACCUMULATED, each column summed in double over increasing n and
 * added once (the bits of rp_linear_backward's db on that dinp), in the same pass over the
 * rows. dinp may equal dout. */
void rp_relu_backward_set_bias(float *dinp, float *db, const float *dout, const float *inp,
                               int64_t N, int64_t F);
/* GELU, exact erf form (torch.nn.functional.gelu default). */
void rp_gelu_forward(float *out, const float *inp, int64_t n);
void rp_gelu_backward(float *dinp, const float *dout, const float *inp, int64_t n);
void rp_gelu_backward_set(float *dinp, const float *dout, const float *inp, int64_t n);

/* ---- residual: out = a + b (out may equal a or b); backward da += dout, db += dout ---- */
void rp_residual_forward(float *out, const float *a, const float *b, int64_t n);
void rp_residual_backward(float *da, float *db, const float *dout, int64_t n);

/* ---- softmax cross-entropy over logits (N, V) ----
 * losses[n] = -log softmax(logits[n])[target[n]] for scored rows; a row is scored when
 * target[n] >= 0 and (mask == NULL or mask[n] != 0); unscored rows get loss 0.
 * Returns the number of scored rows. stats (N, 2) receives what the backward needs of each scored
 * row, its largest logit and 1 / sum e^(logit - largest) (0, 0 for unscored rows): no (N, V)
 * buffer besides the logits. One pass over each row; e^x in float (relative error at most
 * 8.4e-8; a shift below -87 counts as -87), the sums and the loss in double, rounded once. A NaN
 * logit gives its row a NaN loss, as does a row of -inf only. */
int64_t rp_crossentropy_forward(float *losses, float *stats, const float *logits,
                                const int32_t *target, const uint8_t *mask, int64_t N, int64_t V);
/* dlogits (N, V) += dloss * (softmax(logits) - onehot(target)) for scored rows, where
 * dloss = scale (1 / number of scored rows for a mean loss), the probabilities recomputed from
 * the logits and the forward's stats (the same logits). Unscored rows get nothing. */
void rp_crossentropy_backward(float *dlogits, const float *logits, const float *stats,
                              const int32_t *target, const uint8_t *mask, float scale, int64_t N,
                              int64_t V);
/* The same, OVERWRITING every row of dlogits (unscored rows 0): no memset before it. */
void rp_crossentropy_backward_set(float *dlogits, const float *logits, const float *stats,
                                  const int32_t *target, const uint8_t *mask, float scale,
                                  int64_t N, int64_t V);

/* ---- dropout (inverted): out = inp * mask, mask[i] = 0 with probability p, else 1/(1-p),
 * drawn from rng in index order, one uniform draw per element, kept when u >= p (so a run is
 * reproducible from the rng state). out may equal inp. p = 0: out = inp, nothing is drawn and
 * mask and rng are not touched (both may be NULL); 0 <= p < 1. ---- */
void rp_dropout_forward(float *out, float *mask, const float *inp, float p, rp_rng *rng,
                        int64_t n);
/* dinp += dout * mask (p = 0: dinp += dout; mask may then be NULL). */
void rp_dropout_backward(float *dinp, const float *dout, const float *mask, float p, int64_t n);
/* dinp = dout * mask OVERWRITTEN, bit for bit rp_dropout_backward onto a zeroed dinp; dinp may
 * equal dout. */
void rp_dropout_backward_set(float *dinp, const float *dout, const float *mask, float p,
                             int64_t n);

#endif
