/* A clock for durations: the training time of rp.experiment.run, the seconds in MPI_Allreduce. */
#ifndef RP_CLOCK_H
#define RP_CLOCK_H

/* Seconds on the monotonic clock (POSIX CLOCK_MONOTONIC: it does not jump when the date is set),
 * counted from an unspecified start: only the difference of two calls means something.
 * Resolution: nanoseconds on Linux. Cannot fail. */
double rp_clock_seconds(void);

#endif
