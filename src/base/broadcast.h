/* NumPy broadcasting of two shapes, shared by shape inference and the
 * ONNX constant folder. */
#ifndef POET_SRC_BASE_BROADCAST_H
#define POET_SRC_BASE_BROADCAST_H

#include <stdbool.h>
#include <stdint.h>

/* The broadcast shape of a (na dims) and b (nb dims) into out, which holds
 * max(na, nb) dims; false where a dimension pair is neither equal nor 1. */
static inline bool broadcast_dims(int na, const int64_t *a, int nb, const int64_t *b, int *n, int64_t *out)
{
    *n = na > nb ? na : nb;
    for (int k = 0; k < *n; k++) {
        int ja = na - *n + k, jb = nb - *n + k;
        int64_t da = ja >= 0 ? a[ja] : 1, db = jb >= 0 ? b[jb] : 1;
        if (da != db && da != 1 && db != 1) return false;
        out[k] = da == 1 ? db : da;
    }
    return true;
}

#endif
