/* The userdata types of the roper module (roper.Tensor, roper.Model, roper.Optim; roper.Rng,
 * roper.Task, roper.Tokenizer and roper.Comm are private to rng.c, tasks.c, tokenizer.c and
 * dist.c) and the helpers that check and create them (userdata.c); their metatable names
 * and the registry keys are in args.h, whose errors name them. model.c and optim.c both use the model and
 * optimiser helpers from here, so neither needs the other. The rules these helpers serve are in
 * args.h.
 */
#ifndef LRP_USERDATA_H
#define LRP_USERDATA_H

#include <stddef.h>
#include <stdint.h>

#include <lua.h>

#include "rp.h"

/* ---- the C memory behind the userdata ---- */

/* Lua's collector counts only Lua's own heap, not the buffers core holds behind a tensor, a model
 * or an optimiser (core/tensor/storage.h: rp_mem_held), so without help dead ones would stay until
 * Lua's heap alone triggered a cycle. lrp_gc_pace, called by every helper below that creates a
 * userdata owning C memory (before core allocates it), collects when rp_mem_held exceeds this
 * state's limit: base (the C memory held after the last full collection, an upper bound of the
 * memory live) plus room, which is base itself, at least LRP_GC_MIN_BYTES and at least Lua's heap
 * over LRP_GC_LUA_SHARE (the pause of Lua's own collector, 200%, applied to the memory it cannot
 * see). It first runs a basic step (lua_gc LUA_GCSTEP 0), which in generational mode (lua.c's and
 * roper's) is a young collection: it frees the dead among the objects that have not yet survived
 * two collections, at a cost that does not grow with the old heap. When that leaves more held than
 * base plus half the room, a full collection follows (in incremental mode, about every time) and
 * base becomes the memory held after it; a young collection that leaves less than base lowers base
 * to that. The count so stays at or below 2 base + 16 MiB (half Lua's heap in place of 16 MiB when
 * that heap is over 32 MiB) plus the buffer being made: a loop that keeps K bytes alive and makes
 * and drops a buffer of B bytes each time peaks within 2 K + B + 16 MiB, twice its live set plus
 * 16 MiB, whatever the sizes; and a full collection, whose work grows with Lua's heap, comes at
 * most once per half the room of C memory allocated. tight (before a model, which core refuses when
 * it needs more than the memory left: rp_mem_available) also collects, in full, when rp_mem_held
 * exceeds the memory left, so that dead models do not make a new one fail. It collects nothing, and
 * leaves the limit as it was (the next constructor tries again), while the collector is stopped
 * (collectgarbage "stop") or inside a finalizer. Like any allocation, it may run finalizers. */
#define LRP_GC_MIN_BYTES ((int64_t)16 << 20)
#define LRP_GC_LUA_SHARE 2
void lrp_gc_pace(lua_State *L, int tight);

/* Registers release (a __gc function: safe on a released object and when called twice) as the
 * metatable's __gc and __close (mt: the type's metatable, whose __name names the type) and, as
 * free, a method (meth: the method table) that checks its self ("calling 'free' on bad self
 * (roper.Tensor expected, got number)") and releases it at once. */
void lrp_set_release(lua_State *L, int mt, int meth, lua_CFunction release);
/* Registers a userdata type: its metatable mt_name (luaL_newmetatable, which sets __name) with
 * the method table of methods as __index, also set as mod[public_name] (rp.Model, ...), tostring
 * as __tostring, and release, unless NULL, as free, __gc and __close (lrp_set_release). The
 * stack is left as it was. */
void lrp_open_type(lua_State *L, int mod, const char *mt_name, const char *public_name,
                   const luaL_Reg *methods, lua_CFunction release, lua_CFunction tostring);

/* The thin wrappers from a declaration (torch7 cwrap's idea): sets t[name] (t: a table at index
 * t) to a closure of fn whose upvalue 1 is the row (a light userdata), for each of the n rows at
 * rows, stride bytes apart, each of which starts with its name (a const char *); fn reads what it
 * calls from its row. rp.blas.*, the tokenizer's and the communicator's queries, the
 * generator's draws (rp.rand, g:uniform, ...). */
void lrp_set_queries(lua_State *L, int t, lua_CFunction fn, const void *rows, size_t stride,
                     int n);
#define LRP_SET_QUERIES(L, t, fn, rows) \
    lrp_set_queries(L, t, fn, rows, sizeof *(rows), (int)(sizeof(rows) / sizeof *(rows)))

/* ---- tensors ---- */

/* The live tensor at idx; raises "roper.Tensor expected, got X" for anything else and
 * "attempt to use a released tensor" for one released (free, __close). */
rp_tensor *lrp_checktensor(lua_State *L, int idx);
/* The tensor at idx (possibly released) or NULL when idx holds no roper.Tensor. */
rp_tensor *lrp_totensor(lua_State *L, int idx);
/* Pushes a new, empty (released-state) tensor userdata and returns its struct, for core to fill.
 * The userdata is valid at every moment, so raising afterwards never leaks. Paces the collector
 * first (lrp_gc_pace). */
rp_tensor *lrp_newtensor(lua_State *L);

/* ---- models and optimisers ---- */

/* The roper.Model userdata. m is NULL until rp_model_new succeeds and again after
 * free/__gc/__close (a released model). */
typedef struct lrp_model {
    rp_model *m;
} lrp_model;

/* The roper.Optim userdata; its user value 1 is the roper.Model it updates (kept alive by it).
 * buf holds the Adam moments, st.m = buf->data and st.v = buf->data + st.n; buf is NULL until
 * they are allocated and again after free/__gc/__close (a released optimiser). */
typedef struct lrp_optim {
    rp_adam_cfg cfg;
    rp_adam_state st;
    rp_storage *buf;
} lrp_optim;

/* The live model at idx: raises "roper.Model expected, got X" and "attempt to use a released
 * model". */
rp_model *lrp_checkmodel(lua_State *L, int idx);
/* Pushes a new, empty (released-state) model userdata and returns it, for rp_model_new. Paces
 * the collector first (lrp_gc_pace, tight). */
lrp_model *lrp_newmodel(lua_State *L);
/* The live optimiser at idx (raises as lrp_checkmodel: "attempt to use a released optimiser"). */
lrp_optim *lrp_checkoptim(lua_State *L, int idx);
/* Pushes a new, empty optimiser userdata bound to the model at model_idx (its user value), with
 * cfg copied in; no moments yet (see lrp_optim_alloc). Paces the collector first
 * (lrp_gc_pace). */
lrp_optim *lrp_newoptim(lua_State *L, int model_idx, const rp_adam_cfg *cfg);
/* Allocates o's zeroed moments for n floats (step 0); RP_ERR_NOMEM when that fails. */
rp_status lrp_optim_alloc(lrp_optim *o, int64_t n);
/* The live model of the live optimiser at idx (argument idx); raises "the optimiser's model was
 * released" when it was. */
rp_model *lrp_optim_model(lua_State *L, int idx);
/* The live optimiser at opt_idx, which must update the model at model_idx; raises
 * "the optimiser belongs to another model" otherwise. */
lrp_optim *lrp_checkoptim_for(lua_State *L, int opt_idx, int model_idx);

/* ---- communicators (dist.c's roper.Comm; here, below model_run.c, which uses them too) ---- */

/* Checks that idx holds a roper.Comm and that MPI is still usable in this process; raises
 * "<what>: MPI was finalised in this process" otherwise. */
void lrp_checkcomm(lua_State *L, int idx, const char *what);
/* Prints "roper: rank r of n: <what>: <msg>; ending every rank of the job" and ends the whole
 * job (MPI_Abort): for a failure in the middle of a collective step, where the other ranks wait
 * for this one. Never returns. */
_Noreturn void lrp_dist_abort(lua_State *L, const char *what, const char *msg);

#endif
