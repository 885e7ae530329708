/* Internal: a host trainer's pass over a data set (the learning methods'
 * loops), on the public training API. */
#ifndef POET_SRC_LEARN_BATCHES_H
#define POET_SRC_LEARN_BATCHES_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "poet/runtime.h"

/* A host trainer's pass over a data set: each epoch's full batches in
 * poet_train_order's order, gathered into x and y for the step. */
typedef struct learn_batches {
    const poet_dataset *d;
    int rows;
    uint64_t per;
    float *x;
    int32_t *y;
    int *perm;
} learn_batches;

static inline poet_status learn_batches_init(learn_batches *b, poet_engine *e, const poet_dataset *d, const char *who,
                                          poet_err *err)
{
    int classes;
    memset(b, 0, sizeof *b);
    b->d = d;
    poet_dev_batch_shape(poet_engine_device(e), &b->rows, &b->per, &classes);
    if (d->n_train < b->rows)
        return poet_fail(err, POET_ERR_INVALID, "%s: %d training examples, a batch is %d", who, d->n_train, b->rows);
    b->x = malloc(4 * (size_t)b->rows * b->per), b->y = malloc(4 * (size_t)b->rows);
    b->perm = malloc(sizeof(int) * (size_t)d->n_train);
    if (!b->x || !b->y || !b->perm) return poet_fail(err, POET_ERR_NOMEM, "out of memory for %s", who);
    return POET_OK;
}

static inline void learn_batches_free(learn_batches *b) { free(b->x), free(b->y), free(b->perm); }

static inline poet_status learn_batches_epoch(learn_batches *b, uint64_t seed, int epoch,
                                           poet_status (*step)(void *ctx, const float *x, const int32_t *y, poet_err *err),
                                           void *ctx, poet_err *err)
{
    poet_train_order(seed, epoch, b->d->n_train, b->perm);
    for (int k = 0; k + b->rows <= b->d->n_train; k += b->rows) {
        poet_train_gather(b->x, b->y, b->rows, b->per, b->d->train_x, b->d->train_y, b->perm + k);
        poet_status st = step(ctx, b->x, b->y, err);
        if (st) return st;
    }
    return POET_OK;
}

#endif
