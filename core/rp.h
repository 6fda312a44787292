/* roper core: umbrella header.
 *
 * Conventions (hold for every file in core/):
 *  - C11, no Lua. Fallible calls return rp_status and leave a message in rp_last_error().
 *  - Dim letters: B batch, T query length, S key length, H heads, D (d_k) head size,
 *    Dv value head size, C model width, V vocabulary. Shapes are row-major, outermost first.
 *  - Indices and positions are 0-based here; the Lua binding converts from 1-based.
 *  - Ownership is in the name: *_new returns something the caller releases; *_view retains the
 *    storage it shares; kernels (plain float* functions) own nothing and never allocate.
 *  - Kernels: <op>_forward overwrites its outputs; <op>_backward accumulates (+=) into d* buffers.
 */
#ifndef RP_H
#define RP_H

#define RP_VERSION "0.1.0"

#include "status.h"
#include "checked.h"
#include "storage.h"
#include "tensor.h"
#include "rng.h"
#include "blas.h"
#include "build.h"
#include "clock.h"
#include "ops.h"
#include "rope.h"
#include "rope_freq.h"
#include "axes_plan.h"
#include "pe.h"
#include "attention.h"
#include "linear_attention.h"
#include "layers.h"
#include "model.h"
#include "model_schema.h"
#include "plan.h"
#include "optim.h"
#include "checkpoint.h"
#include "json.h"
#include "npy.h"
#include "safetensors.h"
#include "sysmem.h"
#include "fileio.h"
#include "dist.h"

#endif
