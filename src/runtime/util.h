/* Internal: the host runtime's clock (and the core's hash, rt_mix64). */
#ifndef POET_SRC_RUNTIME_UTIL_H
#define POET_SRC_RUNTIME_UTIL_H

#include <stdint.h>
#include <time.h>

#include "../core/kernels.h" /* rt_mix64 */

/* Monotonic seconds, for host timing (needs _POSIX_C_SOURCE). */
static inline double rt_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
