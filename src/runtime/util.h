/* Internal: the host runtime's clock (and the core's hash, rt_mix64). */
#ifndef POET_SRC_RUNTIME_UTIL_H
#define POET_SRC_RUNTIME_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/kernels.h" /* rt_mix64 */
#include "poet/runtime.h"

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

/* A host trainer's pass over a data set: each epoch's full batches in
 * poet_train_order's order, gathered into x and y for the step. */
typedef struct rt_batches {
    const poet_dataset *d;
    int rows;
    uint64_t per;
    float *x;
    int32_t *y;
    int *perm;
} rt_batches;

static inline poet_status rt_batches_init(rt_batches *b, poet_engine *e, const poet_dataset *d, const char *who,
                                          poet_err *err)
{
    int classes;
    memset(b, 0, sizeof *b);
    b->d = d;
    poet_engine_batch_shape(e, &b->rows, &b->per, &classes);
    if (d->n_train < b->rows)
        return poet_fail(err, POET_ERR_INVALID, "%s: %d training examples, a batch is %d", who, d->n_train, b->rows);
    b->x = malloc(4 * (size_t)b->rows * b->per), b->y = malloc(4 * (size_t)b->rows);
    b->perm = malloc(sizeof(int) * (size_t)d->n_train);
    if (!b->x || !b->y || !b->perm) return poet_fail(err, POET_ERR_NOMEM, "out of memory for %s", who);
    return POET_OK;
}

static inline void rt_batches_free(rt_batches *b) { free(b->x), free(b->y), free(b->perm); }

static inline poet_status rt_batches_epoch(rt_batches *b, uint64_t seed, int epoch,
                                           poet_status (*step)(void *ctx, const float *x, const int32_t *y, poet_err *err),
                                           void *ctx, poet_err *err)
{
    poet_train_order(seed, epoch, b->d->n_train, b->perm);
    for (int k = 0; k + b->rows <= b->d->n_train; k += b->rows) {
        rt_gather_rows(b->x, b->y, b->rows, b->per, b->d->train_x, b->d->train_y, b->perm + k);
        poet_status st = step(ctx, b->x, b->y, err);
        if (st) return st;
    }
    return POET_OK;
}

#endif
