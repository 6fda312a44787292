/* The data-parallel layer (dist.h): finds and opens the MPI plugin when the process was launched
 * by MPI, and forwards the collectives to it. */
#define _GNU_SOURCE /* dladdr */
#include "dist.h"
#include "clock.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { ST_NEW, ST_READY, ST_FAILED, ST_DONE };

static struct {
    int state;          /* ST_* */
    rp_status init_st;  /* the status of the first rp_dist_init */
    char init_msg[512]; /* its message when it failed */
    const rp_dist_ops *ops; /* NULL: one rank of one */
    int rank, size, local_size;
    double comm_s;
    int64_t comm_calls;
} g = {ST_NEW, RP_OK, "", NULL, 0, 1, 1, 0.0, 0};

uint64_t rp_fnv64(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

int rp_dist_launched(void)
{
    const char *a = getenv("OMPI_COMM_WORLD_SIZE"), *b = getenv("PMIX_RANK");
    return (a != NULL && *a != '\0') || (b != NULL && *b != '\0');
}

static int file_exists(const char *path) { return access(path, R_OK) == 0; }

rp_status rp_dist_plugin_path(char *buf, size_t cap)
{
    const char *env = getenv("ROPER_MPI_PLUGIN");
    if (env != NULL && *env != '\0') {
        if (!file_exists(env))
            return rp_error(RP_ERR_IO, "ROPER_MPI_PLUGIN=%s: no such file", env);
        if (strlen(env) >= cap) return rp_error(RP_ERR_IO, "ROPER_MPI_PLUGIN is too long");
        strcpy(buf, env);
        return RP_OK;
    }
    Dl_info info;
    if (dladdr((const void *)&g, &info) == 0 || info.dli_fname == NULL)
        return rp_error(RP_ERR_IO, "cannot tell where the roper library is (dladdr failed); "
                                   "set ROPER_MPI_PLUGIN to the path of roper_mpi.so");
    char self[PATH_MAX];
    if (realpath(info.dli_fname, self) == NULL) {
        /* the main program as "roper" found through PATH: the kernel's own name */
        ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
        if (k <= 0) return rp_error(RP_ERR_IO, "cannot resolve %s", info.dli_fname);
        self[k] = '\0';
    }
    char *slash = strrchr(self, '/');
    if (slash == NULL) return rp_error(RP_ERR_IO, "cannot resolve %s", info.dli_fname);
    *slash = '\0';
    static const char *const rel[] = {"", "/roper", "/../lib/roper", "/../../roper"};
    char tried[4 * (PATH_MAX + 2)] = "";
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        char path[PATH_MAX];
        int k = snprintf(path, sizeof path, "%s%s/roper_mpi.so", self, rel[i]);
        if (k < 0 || (size_t)k >= sizeof path) continue;
        char real[PATH_MAX];
        if (file_exists(path) && realpath(path, real) != NULL) {
            if (strlen(real) >= cap) return rp_error(RP_ERR_IO, "plugin path too long: %s", real);
            strcpy(buf, real);
            return RP_OK;
        }
        size_t used = strlen(tried);
        snprintf(tried + used, sizeof tried - used, "%s%s", used ? ", " : "", path);
    }
    return rp_error(RP_ERR_IO, "the MPI plugin roper_mpi.so is not installed (looked in %s); "
                               "build it with make (it needs Debian's libopenmpi-dev) or set "
                               "ROPER_MPI_PLUGIN",
                    tried);
}

static rp_status fail_init(rp_status st)
{
    g.state = ST_FAILED;
    g.init_st = st;
    snprintf(g.init_msg, sizeof g.init_msg, "%s", rp_last_error());
    return st;
}

rp_status rp_dist_init(void)
{
    if (g.state == ST_READY) return RP_OK;
    if (g.state == ST_DONE) return rp_error(RP_ERR_ARG, "MPI was finalised in this process");
    if (g.state == ST_FAILED) return rp_error(g.init_st, "%s", g.init_msg);
    if (!rp_dist_launched()) {
        g.state = ST_READY;
        return RP_OK;
    }
    char path[PATH_MAX];
    rp_status st = rp_dist_plugin_path(path, sizeof path);
    if (st != RP_OK) return fail_init(st);
    /* RTLD_GLOBAL: libmpi's symbols are then visible to the components Open MPI dlopens */
    void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (h == NULL) {
        const char *why = dlerror();
        return fail_init(rp_error(RP_ERR_IO, "cannot load the MPI plugin %s: %s (Debian's "
                                             "openmpi-bin and libopenmpi-dev provide libmpi)",
                                  path, why ? why : "unknown error"));
    }
    const rp_dist_ops *(*get)(void) = NULL;
    *(void **)&get = dlsym(h, "rp_dist_mpi_ops");
    const rp_dist_ops *ops = get ? get() : NULL;
    if (ops == NULL || ops->abi != RP_DIST_ABI)
        return fail_init(rp_error(RP_ERR_IO, "%s is not a roper MPI plugin of this version "
                                             "(interface %d expected)",
                                  path, RP_DIST_ABI));
    char msg[256] = "";
    if (ops->init(&g.rank, &g.size, &g.local_size, msg, sizeof msg) != 0)
        return fail_init(rp_error(RP_ERR_IO, "MPI failed to start: %s", msg));
    g.ops = ops; /* the plugin stays loaded for the life of the process */
    g.state = ST_READY;
    return RP_OK;
}

int rp_dist_active(void) { return g.state == ST_READY && g.ops != NULL; }
int rp_dist_ready(void) { return g.state == ST_READY; }
int rp_dist_rank(void) { return rp_dist_active() ? g.rank : 0; }
int rp_dist_size(void) { return rp_dist_active() ? g.size : 1; }
int rp_dist_local_size(void) { return rp_dist_active() ? g.local_size : 1; }
double rp_dist_comm_seconds(void) { return g.comm_s; }
int64_t rp_dist_comm_calls(void) { return g.comm_calls; }
const char *rp_dist_version(void) { return rp_dist_active() ? g.ops->version() : ""; }

/* RP_OK when collectives may run now; the error otherwise. */
static rp_status usable(const char *what)
{
    if (g.state == ST_READY) return RP_OK;
    if (g.state == ST_DONE) return rp_error(RP_ERR_ARG, "%s: MPI was finalised", what);
    return rp_error(RP_ERR_ARG, "%s: the communication layer is not initialised", what);
}

static rp_status plugin_fail(const char *what, const char *msg)
{
    return rp_error(RP_ERR_IO, "%s failed: %s", what, msg);
}

/* The status of an allreduce that started at t0 and returned rc, counted in the statistics. */
static rp_status allreduce_done(int rc, double t0, const char *msg)
{
    g.comm_s += rp_clock_seconds() - t0;
    g.comm_calls++;
    return rc == 0 ? RP_OK : plugin_fail("MPI_Allreduce", msg);
}

rp_status rp_dist_allreduce_f32(float *buf, int64_t n)
{
    RP_TRY(usable("allreduce"));
    if (g.ops == NULL || n <= 0) return RP_OK;
    char msg[256] = "";
    double t0 = rp_clock_seconds();
    return allreduce_done(g.ops->allreduce_f32(buf, n, msg, sizeof msg), t0, msg);
}

rp_status rp_dist_allreduce_f64(double *buf, int64_t n)
{
    RP_TRY(usable("allreduce"));
    if (g.ops == NULL || n <= 0) return RP_OK;
    char msg[256] = "";
    double t0 = rp_clock_seconds();
    return allreduce_done(g.ops->allreduce_f64(buf, n, msg, sizeof msg), t0, msg);
}

rp_status rp_dist_agree(uint64_t h, int *same)
{
    RP_TRY(usable("agree"));
    *same = 1;
    if (g.ops == NULL) return RP_OK;
    /* max(h) and max(~h) = ~min(h): every h is equal when max == min */
    uint64_t v[2] = {h, ~h};
    char msg[256] = "";
    if (g.ops->allreduce_max_u64(v, 2, msg, sizeof msg) != 0)
        return plugin_fail("MPI_Allreduce", msg);
    *same = v[0] == ~v[1];
    return RP_OK;
}

rp_status rp_dist_bcast(void *buf, int64_t bytes, int root)
{
    RP_TRY(usable("bcast"));
    if (root < 0 || root >= rp_dist_size())
        return rp_error(RP_ERR_RANGE, "bcast: root %d out of range (%d ranks)", root,
                        rp_dist_size());
    if (g.ops == NULL || bytes <= 0) return RP_OK;
    char msg[256] = "";
    return g.ops->bcast(buf, bytes, root, msg, sizeof msg) == 0 ? RP_OK
                                                                 : plugin_fail("MPI_Bcast", msg);
}

rp_status rp_dist_barrier(void)
{
    RP_TRY(usable("barrier"));
    if (g.ops == NULL) return RP_OK;
    char msg[256] = "";
    return g.ops->barrier(msg, sizeof msg) == 0 ? RP_OK : plugin_fail("MPI_Barrier", msg);
}

_Noreturn void rp_dist_abort(int code)
{
    fflush(stdout);
    fflush(stderr);
    if (rp_dist_active()) g.ops->abort(code);
    _Exit(code);
}

rp_status rp_dist_finalize(void)
{
    if (g.state == ST_DONE) return RP_OK;
    int was_active = rp_dist_active();
    g.state = ST_DONE;
    if (!was_active) return RP_OK;
    fflush(stdout);
    char msg[256] = "";
    return g.ops->finalize(msg, sizeof msg) == 0 ? RP_OK : plugin_fail("MPI_Finalize", msg);
}
