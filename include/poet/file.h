/* poet: whole-file reads with a size limit, and atomic writes. */
#ifndef POET_FILE_H
#define POET_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "poet/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define POET_MAX_FILE_BYTES (256u << 20)

/* Reads path into a NUL-terminated buffer the caller frees. */
poet_status poet_read_file(const char *path, char **data, size_t *len, poet_err *err);
/* The same with another limit (ONNX models hold their weights). */
poet_status poet_read_file_max(const char *path, uint64_t max_bytes, char **data, size_t *len, poet_err *err);
/* Writes to a temporary file beside path, syncs it and renames it over path,
 * so that path holds either its old content or all of the new, and nothing
 * is left behind on failure. */
poet_status poet_write_file_atomic(const char *path, const void *data, size_t len, poet_err *err);

#ifdef __cplusplus
}
#endif
#endif
