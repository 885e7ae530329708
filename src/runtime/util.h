/* Internal: the host runtime's clock (and the core's hash, rt_mix64). */
#ifndef POET_SRC_RUNTIME_UTIL_H
#define POET_SRC_RUNTIME_UTIL_H

#include <stdint.h>
#include <string.h>
#include <time.h>

#include "../core/kernels.h" /* rt_mix64 */

/* Monotonic seconds, for host timing (needs _POSIX_C_SOURCE). */
static inline double rt_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Rows idx[0..rows) of xs (per floats each) and ys into one batch. */
static inline void rt_gather_rows(float *x, int32_t *y, int rows, uint64_t per, const float *xs, const int32_t *ys,
                                  const int *idx)
{
    for (int r = 0; r < rows; r++) {
        memcpy(x + (size_t)r * per, xs + (size_t)idx[r] * per, (size_t)per * sizeof(float));
        y[r] = ys[idx[r]];
    }
}

#endif
