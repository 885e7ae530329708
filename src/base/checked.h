/* Internal: overflow-checked arithmetic on the sizes, offsets and counts a
 * file states. Every reader that sums or scales such a value (device
 * images, patches, binary schedules, checkpoints) does it with these, and
 * treats a false return as a malformed file: a sum that wraps is how a
 * crafted header makes a small total out of huge parts. Freestanding. */
#ifndef POET_SRC_BASE_CHECKED_H
#define POET_SRC_BASE_CHECKED_H

#include <stdbool.h>
#include <stdint.h>

/* *out = a + b; false (and *out untouched) when it does not fit in 64 bits. */
static inline bool ck_add(uint64_t a, uint64_t b, uint64_t *out)
{
    uint64_t r;
    if (__builtin_add_overflow(a, b, &r)) return false;
    *out = r;
    return true;
}

/* *out = a * b; false when it does not fit in 64 bits. */
static inline bool ck_mul(uint64_t a, uint64_t b, uint64_t *out)
{
    uint64_t r;
    if (__builtin_mul_overflow(a, b, &r)) return false;
    *out = r;
    return true;
}

/* *at advanced past count items of size bytes, then rounded up to a
 * multiple of align (a power of two): where the next section starts. */
static inline bool ck_place(uint64_t *at, uint64_t count, uint64_t size, uint64_t align)
{
    uint64_t bytes, end;
    if (!ck_mul(count, size, &bytes) || !ck_add(*at, bytes, &end) || !ck_add(end, align - 1, &end)) return false;
    *at = end & ~(align - 1);
    return true;
}

#endif
