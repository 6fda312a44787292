/* The communicator's checks that other binding files use (comm.c: roper.Comm, rp.mpi). */
#ifndef LRP_COMM_H
#define LRP_COMM_H

#include <lua.h>

/* Checks that idx holds a roper.Comm and that MPI is still usable in this process; raises
 * "<what>: MPI was finalised in this process" otherwise. */
void lrp_checkcomm(lua_State *L, int idx, const char *what);
/* Prints "roper: rank r of n: <what>: <msg>; ending every rank of the job" and ends the whole
 * job (MPI_Abort): for a failure in the middle of a collective step, where the other ranks wait
 * for this one. Never returns. */
_Noreturn void lrp_dist_abort(lua_State *L, const char *what, const char *msg);

#endif
