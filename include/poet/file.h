/* poet: the rules for the files poet reads and writes, in one place.
 *
 * Input: a path is opened without blocking (a FIFO would wait for a writer
 * forever), checked to be a regular file, checked against a size limit, and
 * only then read.
 *
 * Output: a path that exists must be a regular file, or a symbolic link
 * that leads to one or to nothing yet; a device, FIFO, directory or socket
 * is refused rather than replaced by a file. A symbolic link is written
 * through: its target is replaced, the link stays. The new content goes to
 * a temporary file in the target's directory (unnamed where the system
 * allows, so that a killed write leaves nothing behind), is synced, and is
 * renamed over the target, so that the target holds its old content or all
 * of the new. */
#ifndef POET_FILE_H
#define POET_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "poet/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define POET_MAX_FILE_BYTES (256u << 20)
#define POET_MAX_DATA_BYTES ((uint64_t)2 << 30)  /* a user's data set, read whole */
#define POET_MAX_ONNX_BYTES ((uint64_t)2 << 30) /* protobuf's own limit: ONNX models hold their weights */

/* Reads path into a NUL-terminated buffer the caller frees. */
poet_status poet_read_file(const char *path, char **data, size_t *len, poet_err *err);
/* The same with another limit. */
poet_status poet_read_file_max(const char *path, uint64_t max_bytes, char **data, size_t *len, poet_err *err);
/* Opens path for reading under the input rule: a descriptor of a regular
 * file of at most max_bytes (its size in *size), for the caller to close. */
poet_status poet_open_input(const char *path, uint64_t max_bytes, int *fd, uint64_t *size, poet_err *err);

/* Whether path may be written under the output rule, checked before the
 * work whose result it will hold: what exists there, and that its
 * directory exists and is writable. */
poet_status poet_check_output(const char *path, poet_err *err);
/* Writes data to path under the output rule, atomically. */
poet_status poet_write_file_atomic(const char *path, const void *data, size_t len, poet_err *err);

/* An advisory lock on directory dir, held until poet_unlock or the
 * process's end (a crash included): a file "lock" in it, locked with
 * flock and holding the holder's process id, so that a second holder is
 * refused with a message naming the first. */
poet_status poet_lock_dir(const char *dir, int *lock, poet_err *err);
void poet_unlock(int lock);

#ifdef __cplusplus
}
#endif
#endif
