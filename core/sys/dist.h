/* Data-parallel communication between processes: a thin layer over MPI that loads Open MPI only
 * when the process was launched by mpirun (or srun with PMIx).
 *
 * core/ holds no MPI code: the MPI calls live in a plugin, build/roper_mpi.so (mpi/roper_mpi.c,
 * linked with libmpi.so.40), which rp_dist_init opens with dlopen. A process that never calls
 * rp_dist_init, or calls it without being launched by MPI, loads nothing of MPI and is one rank of
 * one (every collective below then returns its input unchanged).
 *
 * The state is per process (MPI can be initialised and finalised once per process): every
 * function here acts on MPI_COMM_WORLD and must be called from the main thread only (MPI is
 * initialised with MPI_THREAD_FUNNELED; OpenMP loops inside core never call it).
 *
 * Collectives must be called by every rank in the same order with the same sizes. An MPI error
 * aborts the whole job (MPI's default handler): a failure is never a hang. A rank that cannot go
 * on must call rp_dist_abort, which ends every rank of the job.
 */
#ifndef RP_DIST_H
#define RP_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

/* The plugin's interface (mpi/roper_mpi.c exports `const rp_dist_ops *rp_dist_mpi_ops(void)`).
 * Every int-returning entry returns 0 on success, or -1 with a message written to msg (cap bytes,
 * NUL-terminated). */
#define RP_DIST_ABI 1
typedef struct rp_dist_ops {
    int abi; /* RP_DIST_ABI */
    /* MPI_Init_thread(FUNNELED) (unless MPI is initialised already); this rank, the world size and
     * the number of ranks on this node */
    int (*init)(int *rank, int *size, int *local_size, char *msg, size_t cap);
    /* in-place element-wise sums over the ranks (float32 in chunks of at most 4M elements) */
    int (*allreduce_f32)(float *buf, int64_t n, char *msg, size_t cap);
    int (*allreduce_f64)(double *buf, int64_t n, char *msg, size_t cap);
    /* in-place element-wise maximum over the ranks */
    int (*allreduce_max_u64)(uint64_t *buf, int64_t n, char *msg, size_t cap);
    /* bytes from root to every rank (in chunks below 2^31 bytes) */
    int (*bcast)(void *buf, int64_t bytes, int root, char *msg, size_t cap);
    int (*barrier)(char *msg, size_t cap);
    /* MPI_Abort(MPI_COMM_WORLD, code): ends every rank; does not return */
    void (*abort)(int code);
    int (*finalize)(char *msg, size_t cap);
    const char *(*version)(void); /* "Open MPI v4.1.4, ..." (MPI_Get_library_version) */
} rp_dist_ops;

/* 1 when an MPI launcher started this process: OMPI_COMM_WORLD_SIZE (mpirun, mpiexec) or
 * PMIX_RANK (srun --mpi=pmix) is in the environment. */
int rp_dist_launched(void);

/* Initialises the layer once per process (later calls return the first call's status):
 * launched, it opens the plugin (rp_dist_plugin_path) and MPI; otherwise it is one rank of one
 * and loads nothing. RP_ERR_IO when the plugin cannot be loaded or MPI fails to start (message
 * says which and why); RP_ERR_ARG after rp_dist_finalize. */
rp_status rp_dist_init(void);

/* 1 between a launched rp_dist_init and rp_dist_finalize (MPI is up); 0 otherwise. */
int rp_dist_active(void);
/* 1 after rp_dist_init succeeded (launched or not) and before rp_dist_finalize. */
int rp_dist_ready(void);

/* This rank (0-based), the number of ranks and the ranks on this node; 0, 1, 1 when not active. */
int rp_dist_rank(void);
int rp_dist_size(void);
int rp_dist_local_size(void);

/* In-place sums of buf[0..n) over the ranks (overwrites buf with the sum on every rank). The
 * same ranks give the same bits on every rank (Open MPI reduces each element once and spreads the
 * result). Not active: buf is left as it is. RP_ERR_ARG when not initialised or finalised. */
rp_status rp_dist_allreduce_f32(float *buf, int64_t n);
rp_status rp_dist_allreduce_f64(double *buf, int64_t n);

/* *same = 1 when every rank passed the same value h (a hash), else 0, on every rank. */
rp_status rp_dist_agree(uint64_t h, int *same);

/* Copies bytes of buf from rank root to every other rank (overwrites theirs). */
rp_status rp_dist_bcast(void *buf, int64_t bytes, int root);

rp_status rp_dist_barrier(void);

/* Ends every rank of the job with exit status code (MPI_Abort) when active; otherwise exits this
 * process with code. Never returns. */
_Noreturn void rp_dist_abort(int code);

/* Shuts MPI down cleanly (collective: every rank must call it). Not active: marks the layer
 * finalised. Idempotent. */
rp_status rp_dist_finalize(void);

/* Seconds spent inside allreduce calls since rp_dist_init (wall clock), and their number. */
double rp_dist_comm_seconds(void);
int64_t rp_dist_comm_calls(void);

/* The MPI library's version line ("" when not active). */
const char *rp_dist_version(void);

/* The plugin file rp_dist_init opens: $ROPER_MPI_PLUGIN when set, else roper_mpi.so found beside
 * the object holding this code (the build folder) or in <that folder>/roper/, ../lib/roper/ or
 * ../../roper/ (the installed layouts of bin/roper, lib/libroper.so and lib/lua/5.4/roper.so).
 * Writes the path to buf (cap bytes); RP_ERR_IO when none exists (the message lists where it
 * looked). */
rp_status rp_dist_plugin_path(char *buf, size_t cap);

/* FNV-1a 64 of n bytes (continuing from h; start with RP_FNV64_INIT). */
#define RP_FNV64_INIT 0xcbf29ce484222325ull
uint64_t rp_fnv64(uint64_t h, const void *p, size_t n);

#endif
