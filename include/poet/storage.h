/* poet: storage that tensors page to, flash or an SD card, reached through a
 * table of functions; the host's back-ends (a file, RAM, a fault-injecting
 * wrapper), each an implementation of the one storage interface the device
 * library calls (poet_dev_storage, poet/transfer.h). */
#ifndef POET_STORAGE_H
#define POET_STORAGE_H

#include <stddef.h>
#include <stdint.h>

#include "poet/status.h"
#include "poet/transfer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Storage on a host: the one storage interface (poet/transfer.h), whose
 * transfers these back-ends do at once in start, and how to close it. */
typedef struct poet_storage {
    poet_dev_storage io;
    void (*close)(void *ctx); /* of io.ctx */
} poet_storage;

/* A file of capacity_bytes standing in for flash, at path: created, or
 * reused where it is poet's storage file from an earlier run; any other
 * non-empty file is refused, not overwritten (a checkpoint or a data set
 * given by mistake). */
poet_status poet_storage_open_file(const char *path, uint64_t capacity_bytes, poet_storage *out, poet_err *err);
/* The same in a file without a name in dir (NULL: $TMPDIR, else /tmp),
 * which nobody else can open and which is gone when closed or when the
 * process dies. */
poet_status poet_storage_open_temp(const char *dir, uint64_t capacity_bytes, poet_storage *out, poet_err *err);
/* RAM standing in for storage, for tests. */
poet_status poet_storage_open_memory(uint64_t capacity_bytes, poet_storage *out, poet_err *err);

/* Fault injection: call number n (counting from 1) of the kind fails; 0 never. */
typedef struct poet_storage_faults {
    long fail_read_at, fail_write_at, fail_sync_at;
    long reads, writes, syncs; /* calls seen so far */
} poet_storage_faults;

/* Wraps inner so that the calls f names fail; f must outlive the result,
 * which takes ownership of inner. */
poet_status poet_storage_with_faults(poet_storage *inner, poet_storage_faults *f, poet_storage *out, poet_err *err);
void poet_storage_close(poet_storage *s);

#ifdef __cplusplus
}
#endif
#endif
