/* Internal: see poet/file.h. */
#ifndef POET_SRC_HOST_FILEIO_H
#define POET_SRC_HOST_FILEIO_H

#include "poet/file.h"

#endif
