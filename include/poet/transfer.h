/* poet: the one storage interface, where tensors page to and from: flash,
 * an SD card, QSPI on a board (the device library calls it, a port
 * implements it), a file or RAM on a host (poet/storage.h's back-ends),
 * and the host's DMA worker, which runs any of these on a thread.
 * Freestanding. */
#ifndef POET_TRANSFER_H
#define POET_TRANSFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "poet/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define POET_DEV_STORAGE_VERSION 1

/* Transfers may complete later than they start, as DMA does: poet never
 * touches the RAM of a transfer before waiting for it, and waits for a
 * page-out before reusing its buffer. A back-end without DMA does the copy
 * in start and returns at once from wait. */
typedef struct poet_dev_storage {
    uint32_t version; /* POET_DEV_STORAGE_VERSION */
    void *ctx;
    uint64_t capacity_bytes;
    /* Starts copying bytes between RAM and storage offset; sets *ticket,
     * increasing from 0 in the order of starts. */
    poet_status (*start)(void *ctx, bool write, uint64_t offset, void *ram, size_t bytes, long *ticket,
                         poet_err *err);
    /* Returns once transfer `ticket` and every one before it completed
     * (ticket < 0: every one started); reports the first that failed. */
    poet_status (*wait)(void *ctx, long ticket, poet_err *err);
    /* Makes what was written durable; called after a step that paged. */
    poet_status (*sync)(void *ctx, poet_err *err);
    /* After a failed step: forget transfers and failures, so that the next
     * step may run. */
    void (*reset)(void *ctx);
} poet_dev_storage;

#ifdef __cplusplus
}
#endif
#endif
