/* The MPI plugin of roper's data-parallel layer (core/sys/dist.h): the only code that includes mpi.h.
 * Built as build/roper_mpi.so, linked with Open MPI's libmpi.so.40, and opened by rp_dist_init
 * with dlopen only when the process was launched by mpirun or srun, so nothing else of roper
 * needs MPI at run time. Every call is on MPI_COMM_WORLD from the main thread
 * (MPI_THREAD_FUNNELED); errors keep MPI's default handler (MPI_ERRORS_ARE_FATAL: the job ends),
 * and the return codes are checked all the same.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <mpi.h>

#include "dist.h"

const rp_dist_ops *rp_dist_mpi_ops(void);

/* Chunks of at most 4M elements: Open MPI 4.1's default allreduce for large float messages
 * (Rabenseifner) took 73 ms for 10M floats on 2 ranks where 4M-float pieces take 5 ms each
 * (measured here). */
#define CHUNK ((int64_t)1 << 22)

static int fail(int rc, const char *what, char *msg, size_t cap)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "error %d", rc);
    snprintf(msg, cap, "%s: %s", what, text);
    return -1;
}

static int p_init(int *rank, int *size, int *local_size, char *msg, size_t cap)
{
    int inited = 0, provided = 0, rc;
    MPI_Initialized(&inited);
    if (!inited) {
        rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
        if (rc != MPI_SUCCESS) return fail(rc, "MPI_Init_thread", msg, cap);
        if (provided < MPI_THREAD_FUNNELED) {
            snprintf(msg, cap, "MPI_Init_thread gave thread level %d (FUNNELED needed)", provided);
            return -1;
        }
    }
    if ((rc = MPI_Comm_rank(MPI_COMM_WORLD, rank)) != MPI_SUCCESS)
        return fail(rc, "MPI_Comm_rank", msg, cap);
    if ((rc = MPI_Comm_size(MPI_COMM_WORLD, size)) != MPI_SUCCESS)
        return fail(rc, "MPI_Comm_size", msg, cap);
    MPI_Comm node;
    rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, *rank, MPI_INFO_NULL, &node);
    if (rc != MPI_SUCCESS) return fail(rc, "MPI_Comm_split_type", msg, cap);
    rc = MPI_Comm_size(node, local_size);
    MPI_Comm_free(&node);
    if (rc != MPI_SUCCESS) return fail(rc, "MPI_Comm_size", msg, cap);
    return 0;
}

static int allreduce(void *buf, int64_t n, size_t elem, MPI_Datatype type, MPI_Op op, char *msg,
                     size_t cap)
{
    char *p = (char *)buf;
    for (int64_t i = 0; i < n; i += CHUNK) {
        int64_t k = n - i < CHUNK ? n - i : CHUNK;
        int rc = MPI_Allreduce(MPI_IN_PLACE, p + (size_t)i * elem, (int)k, type, op,
                               MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return fail(rc, "MPI_Allreduce", msg, cap);
    }
    return 0;
}

static int p_allreduce_f32(float *buf, int64_t n, char *msg, size_t cap)
{
    return allreduce(buf, n, sizeof *buf, MPI_FLOAT, MPI_SUM, msg, cap);
}

static int p_allreduce_f64(double *buf, int64_t n, char *msg, size_t cap)
{
    return allreduce(buf, n, sizeof *buf, MPI_DOUBLE, MPI_SUM, msg, cap);
}

static int p_allreduce_max_u64(uint64_t *buf, int64_t n, char *msg, size_t cap)
{
    return allreduce(buf, n, sizeof *buf, MPI_UINT64_T, MPI_MAX, msg, cap);
}

static int p_bcast(void *buf, int64_t bytes, int root, char *msg, size_t cap)
{
    char *p = (char *)buf;
    for (int64_t i = 0; i < bytes; i += INT_MAX / 2) {
        int64_t k = bytes - i < INT_MAX / 2 ? bytes - i : INT_MAX / 2;
        int rc = MPI_Bcast(p + i, (int)k, MPI_BYTE, root, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return fail(rc, "MPI_Bcast", msg, cap);
    }
    return 0;
}

static int p_barrier(char *msg, size_t cap)
{
    int rc = MPI_Barrier(MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : fail(rc, "MPI_Barrier", msg, cap);
}

static void p_abort(int code)
{
    MPI_Abort(MPI_COMM_WORLD, code);
}

static int p_finalize(char *msg, size_t cap)
{
    int done = 0;
    MPI_Finalized(&done);
    if (done) return 0;
    int rc = MPI_Finalize();
    return rc == MPI_SUCCESS ? 0 : fail(rc, "MPI_Finalize", msg, cap);
}

static const char *p_version(void)
{
    static char text[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (MPI_Get_library_version(text, &len) != MPI_SUCCESS) return "";
    char *nl = strpbrk(text, ",\n"); /* "Open MPI v4.1.4, package: ..." -> "Open MPI v4.1.4" */
    if (nl) *nl = '\0';
    return text;
}

const rp_dist_ops *rp_dist_mpi_ops(void)
{
    static const rp_dist_ops ops = {RP_DIST_ABI,         p_init,   p_allreduce_f32,
                                    p_allreduce_f64,     p_allreduce_max_u64, p_bcast,
                                    p_barrier,           p_abort,  p_finalize,
                                    p_version};
    return &ops;
}
