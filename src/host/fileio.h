/* Internal: see poet/file.h; and the one loader of poet's text formats. */
#ifndef POET_SRC_HOST_FILEIO_H
#define POET_SRC_HOST_FILEIO_H

#include "poet/file.h"

/* Parses the text of a whole file into out; a parser of one format. */
typedef poet_status (*text_parser)(void *out, const char *text, size_t len, poet_err *err);

/* Reads path (poet_read_file) and parses it, its errors prefixed with the
 * path ("dev.json: ..."). */
poet_status host_read_parsed(const char *path, text_parser parse, void *out, poet_err *err);

#endif
