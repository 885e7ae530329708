/* Internal: the runtime's one hash and one clock. */
#ifndef POET_SRC_RUNTIME_UTIL_H
#define POET_SRC_RUNTIME_UTIL_H

#include <stdint.h>
#include <time.h>

/* SplitMix64 (Steele, Lea, Flood 2014): a counter-based hash, so that
 * weights, dropout masks and shuffles follow from a seed and an index. */
static inline uint64_t rt_mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Monotonic seconds, for host timing (needs _POSIX_C_SOURCE). */
static inline double rt_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
