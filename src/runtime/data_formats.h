/* Internal: the formats of users' data files, read from memory with every
 * stated size checked: NumPy's .npy arrays and .npz archives (zip files of
 * .npy arrays, numpy.c), and CSV tables (data_file.c). */
#ifndef POET_SRC_RUNTIME_DATA_FORMATS_H
#define POET_SRC_RUNTIME_DATA_FORMATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "poet/status.h"

enum { NPY_MAX_RANK = 8 };

/* One array as its .npy holds it. */
typedef struct nd_array {
    char kind;   /* 'f' float, 'i' signed, 'u' unsigned, 'b' bool */
    int item;    /* bytes an element */
    bool swap;   /* big-endian */
    int rank;
    uint64_t dims[NPY_MAX_RANK], count;
    const uint8_t *data;
} nd_array;

typedef struct named_file {
    const char *path; /* in messages */
    const uint8_t *bytes;
    size_t len;
} named_file;

/* An .npy file (format 1, 2 or 3) holding exactly its array's bytes. */
poet_status data_parse_npy(const named_file *f, nd_array *a, poet_err *err);
/* Element i, converted to a double. */
double data_element(const nd_array *a, uint64_t i);

/* The arrays of an .npz that poet reads, by name. */
enum { NPZ_X, NPZ_Y, NPZ_X_TRAIN, NPZ_Y_TRAIN, NPZ_X_TEST, NPZ_Y_TEST, NPZ_ARRAYS };
extern const char *const data_npz_names[NPZ_ARRAYS];
/* Each of them unpacked into buf[k] (len[k] bytes, for the caller to
 * free), NULL where the archive lacks it. */
poet_status data_read_npz(const named_file *f, uint8_t *buf[NPZ_ARRAYS], size_t len[NPZ_ARRAYS], poet_err *err);

/* A CSV table of rows "label,value,...": rows x cols values, labels apart. */
typedef struct table {
    uint64_t rows, cols;
    float *x;
    int32_t *y;
} table;
/* The table of a NUL-terminated CSV text (f->bytes[f->len] == 0); a first
 * line whose first field is not a number is a header. The caller frees
 * t->x and t->y, on failure too. */
poet_status data_parse_csv(const named_file *f, table *t, poet_err *err);

#endif
