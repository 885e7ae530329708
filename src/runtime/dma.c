/* The transfer worker: any storage, its transfers run on a thread. */
#include "dma.h"

#include <stdlib.h>
#include <string.h>

static void *worker(void *arg)
{
    dma *d = arg;
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (!d->stop && d->completed == d->submitted) pthread_cond_wait(&d->work, &d->mu);
        if (d->stop && d->completed == d->submitted) break;
        dma_job job = d->ring[d->completed % d->cap];
        bool skip = d->failed;
        pthread_mutex_unlock(&d->mu);
        poet_err e = {0};
        poet_status st = POET_OK;
        long ticket;
        if (!skip) st = d->storage->start(d->storage->ctx, job.write, job.offset, job.ram, job.bytes, &ticket, &e);
        if (!skip && !st) st = d->storage->wait(d->storage->ctx, ticket, &e);
        pthread_mutex_lock(&d->mu);
        if (st && !d->failed) {
            d->failed = true;
            d->err = e;
            if (!d->err.status) d->err.status = st;
        }
        d->completed++;
        pthread_cond_broadcast(&d->done_cv);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

poet_status dma_start(dma *d, const poet_dev_storage *storage, long cap, poet_err *err)
{
    memset(d, 0, sizeof *d);
    d->storage = storage;
    d->cap = cap > 0 ? cap : 1;
    d->ring = calloc((size_t)d->cap, sizeof *d->ring);
    if (!d->ring) return poet_fail(err, POET_ERR_NOMEM, "out of memory for the transfer queue");
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->work, NULL);
    pthread_cond_init(&d->done_cv, NULL);
    if (pthread_create(&d->thread, NULL, worker, d)) {
        dma_stop(d);
        return poet_fail(err, POET_ERR_NOMEM, "cannot start the transfer thread");
    }
    d->started = true;
    return POET_OK;
}

void dma_stop(dma *d)
{
    if (d->started) {
        pthread_mutex_lock(&d->mu);
        d->stop = true;
        pthread_cond_broadcast(&d->work);
        pthread_mutex_unlock(&d->mu);
        pthread_join(d->thread, NULL);
    }
    if (d->ring) {
        pthread_mutex_destroy(&d->mu);
        pthread_cond_destroy(&d->work);
        pthread_cond_destroy(&d->done_cv);
    }
    free(d->ring);
    memset(d, 0, sizeof *d);
}

long dma_submit(dma *d, dma_job job)
{
    pthread_mutex_lock(&d->mu);
    while (d->submitted - d->completed >= d->cap) pthread_cond_wait(&d->done_cv, &d->mu);
    long ticket = d->submitted;
    d->ring[ticket % d->cap] = job;
    d->submitted++;
    pthread_cond_signal(&d->work);
    pthread_mutex_unlock(&d->mu);
    return ticket;
}

poet_status dma_wait(dma *d, long ticket, poet_err *err)
{
    pthread_mutex_lock(&d->mu);
    while (d->completed <= ticket) pthread_cond_wait(&d->done_cv, &d->mu);
    poet_status st = d->failed ? d->err.status : POET_OK;
    if (st && err) *err = d->err;
    pthread_mutex_unlock(&d->mu);
    return st;
}

poet_status dma_wait_all(dma *d, poet_err *err)
{
    pthread_mutex_lock(&d->mu);
    long last = d->submitted - 1;
    pthread_mutex_unlock(&d->mu);
    return dma_wait(d, last, err);
}

void dma_reset(dma *d)
{
    pthread_mutex_lock(&d->mu);
    d->failed = false;
    memset(&d->err, 0, sizeof d->err);
    pthread_mutex_unlock(&d->mu);
    d->storage->reset(d->storage->ctx);
}

/* ---- the worker as the one storage interface ---- */

static poet_status io_start(void *ctx, bool write, uint64_t offset, void *ram, size_t bytes, long *ticket,
                            poet_err *err)
{
    (void)err;
    *ticket = dma_submit(ctx, (dma_job){write, ram, offset, bytes});
    return POET_OK;
}

static poet_status io_wait(void *ctx, long ticket, poet_err *err)
{
    return ticket < 0 ? dma_wait_all(ctx, err) : dma_wait(ctx, ticket, err);
}

static poet_status io_sync(void *ctx, poet_err *err)
{
    dma *d = ctx;
    return d->storage->sync(d->storage->ctx, err);
}

static void io_reset(void *ctx) { dma_reset(ctx); }

poet_dev_storage dma_io(dma *d)
{
    return (poet_dev_storage){POET_DEV_STORAGE_VERSION, d, d->storage->capacity_bytes, io_start, io_wait, io_sync,
                              io_reset};
}
