/* Two storage back-ends for poet_dev_storage. Port these for a real board:
 * sd_card wraps the SD driver (here semihosting file I/O on the host),
 * ram_store a memory-mapped region (QSPI flash in memory-mapped mode, or
 * spare RAM). */
#ifndef POET_FIRMWARE_STORAGE_H
#define POET_FIRMWARE_STORAGE_H

#include "poet/device.h"

enum { SD_QUEUE = 16 };

typedef struct sd_job {
    bool write;
    uint32_t offset;
    void *ram;
    uint32_t bytes;
} sd_job;

/* An SD card whose transfers complete later, as with DMA: a started
 * transfer is queued and done when waited for (or when the queue is full),
 * so a program that touched a buffer before waiting would see it. */
typedef struct sd_card {
    int handle;
    sd_job queue[SD_QUEUE];
    long started, completed;
    bool failed;
    poet_err first;
    long fail_write_at, fail_read_at; /* fault injection: fail the Nth (from 1); 0 never */
    long writes, reads;
    bool created; /* the file did not exist: nothing is stored on it yet */
} sd_card;

/* Creates (or truncates) the file at path as a card of capacity bytes;
 * with keep, opens it as it is when it exists (a card that outlives a
 * reset: the model store). */
poet_status sd_card_open(sd_card *c, const char *path, uint64_t capacity, bool keep, poet_dev_storage *out,
                         poet_err *err);

/* Storage in memory that the CPU copies to and from at once. */
typedef struct ram_store {
    unsigned char *base;
    long done;
} ram_store;

void ram_store_open(ram_store *r, void *base, uint64_t capacity, poet_dev_storage *out);

#endif
