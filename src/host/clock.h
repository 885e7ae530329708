/* Internal: the host's one monotonic clock, for the planner's limits and
 * the runtime's timings. */
#ifndef POET_SRC_HOST_CLOCK_H
#define POET_SRC_HOST_CLOCK_H

/* Seconds since an arbitrary start. */
double host_now_s(void);

#endif
