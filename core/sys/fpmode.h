/* Subnormal floats in roper's kernels: flushed to zero.
 *
 * A float32 below 2^-126 (about 1.2e-38) in magnitude is subnormal. x86 processors compute an
 * operation with a subnormal input or result in a microcode assist that costs on the order of
 * 100 cycles, and trained attention produces them in numbers: softmax weights exp(s - max) of
 * scores more than 87 below their row's maximum, and the products of those weights in the
 * backward pass. A language model of 1.45M parameters at its 355th step of training ran its steps
 * 7.2 times slower for it (5.09 against 0.70 CPU-seconds a step, the portable build on one
 * thread, the same losses to four decimals). So the kernels run with the processor's
 * flush-to-zero and denormals-are-zero modes on (x86's MXCSR FTZ and DAZ bits; Arm's FPCR.FZ),
 * as oneDNN and TensorFlow's CPU kernels do: a subnormal input reads as zero and a result that
 * would be subnormal is zero. Values of 2^-126 and above are computed exactly as before.
 *
 * The mode is a property of the thread. rp_fp_flush_begin sets it in the calling thread and
 * returns the caller's own mode, which rp_fp_flush_end gives back, so the caller's arithmetic
 * outside the kernels (Lua's numbers, a C program's doubles) keeps IEEE's gradual underflow.
 * The kernels' OpenMP threads take the same mode: the outermost rp_fp_flush_begin sets it in every
 * thread of the pool (one parallel region) and the matching rp_fp_flush_end sets them back (one
 * more), so every thread of a kernel computes the same way (a result does not depend on which
 * thread computed it) and code outside the kernels runs as before in every thread.
 * OpenBLAS's own threads (its pthreads build) keep their mode: the kernels flush what they write,
 * so the matrix products rarely see a subnormal input. On other processors both calls do nothing.
 */
#ifndef RP_FPMODE_H
#define RP_FPMODE_H

typedef struct rp_fpmode {
    unsigned long long saved; /* the calling thread's control register before begin */
} rp_fpmode;

/* Flush-to-zero and denormals-are-zero on in the calling thread and in every OpenMP thread of
 * the pool (rp_max_threads() of them; the pool is left alone when called inside a parallel
 * region). Nests: inside another's scope it only returns the mode. Cannot fail. */
rp_fpmode rp_fp_flush_begin(void);

/* The mode of the calling thread (and of the pool) as it was before the matching
 * rp_fp_flush_begin; nothing when that call was nested. */
void rp_fp_flush_end(rp_fpmode m);

#endif
