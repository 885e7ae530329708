/* Internal: asynchronous transfers between the arena and storage on one
 * worker thread, as a DMA engine would overlap them with compute: any
 * storage (poet_dev_storage) in, the same interface out (dma_io), whose
 * transfers run in submission order; each gets a ticket to wait for. */
#ifndef POET_SRC_RUNTIME_DMA_H
#define POET_SRC_RUNTIME_DMA_H

#include <pthread.h>
#include <stdbool.h>

#include "poet/transfer.h"

typedef struct dma_job {
    bool write; /* arena -> storage */
    void *ram;
    uint64_t offset;
    size_t bytes;
} dma_job;

typedef struct dma {
    const poet_dev_storage *storage; /* each job started and waited for in turn */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t work, done_cv;
    dma_job *ring;
    long cap;
    long submitted, completed; /* tickets: job k is done when completed > k */
    bool stop, failed, started;
    poet_err err; /* the first failure */
} dma;

/* Room for cap jobs in flight; allocates now, never later. */
poet_status dma_start(dma *d, const poet_dev_storage *storage, long cap, poet_err *err);
void dma_stop(dma *d);
/* Returns the job's ticket. The ring never overflows: the caller keeps at
 * most cap jobs in flight (one stage's transfers). */
long dma_submit(dma *d, dma_job job);
/* Waits until every job up to ticket has completed; a failure of any job
 * so far is reported (and sticks until dma_reset). */
poet_status dma_wait(dma *d, long ticket, poet_err *err);
poet_status dma_wait_all(dma *d, poet_err *err);
/* After a failed step: drops the failure (the storage's too) so that the
 * next step may run. */
void dma_reset(dma *d);
/* The worker as the storage interface the device library calls. */
poet_dev_storage dma_io(dma *d);

#endif
