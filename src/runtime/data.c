/* Data sets from Debian packages: the 8x8 digits of python3-sklearn and
 * Fashion-MNIST of dataset-fashion-mnist, read with zlib. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "poet/file.h"
#include "poet/runtime.h"

#define DIGITS_DIR "/usr/lib/python3/dist-packages/sklearn/datasets/data"
#define FASHION_DIR "/usr/share/datasets/fashion-mnist"
enum { DIGITS_ROWS = 1797, DIGITS_TEST = 360, MAX_LINE = 4096 };

void poet_dataset_free(poet_dataset *d)
{
    if (!d) return;
    free(d->train_x), free(d->test_x), free(d->train_y), free(d->test_y);
    memset(d, 0, sizeof *d);
}

static poet_status alloc_split(poet_dataset *d, int n_train, int n_test, poet_err *err)
{
    size_t per = (size_t)d->channels * (size_t)d->height * (size_t)d->width;
    d->n_train = n_train;
    d->n_test = n_test;
    d->train_x = malloc((size_t)n_train * per * sizeof(float));
    d->test_x = malloc((size_t)n_test * per * sizeof(float));
    d->train_y = malloc((size_t)n_train * sizeof(int32_t));
    d->test_y = malloc((size_t)n_test * sizeof(int32_t));
    if (!d->train_x || !d->test_x || !d->train_y || !d->test_y)
        return poet_fail(err, POET_ERR_NOMEM, "out of memory loading data set '%s'", d->name);
    return POET_OK;
}

/* Under poet's input rule (poet/file.h): a missing file names the package
 * that ships it. */
static poet_status open_gz(const char *dir, const char *file, const char *package, char *path, size_t cap, gzFile *out,
                           poet_err *err)
{
    snprintf(path, cap, "%s/%s", dir, file);
    if (access(path, F_OK) != 0)
        return poet_fail(err, POET_ERR_NOT_FOUND, "cannot open '%s': install Debian's %s (apt-get install %s)", path,
                         package, package);
    int fd;
    uint64_t size;
    poet_status st = poet_open_input(path, POET_MAX_FILE_BYTES, &fd, &size, err);
    if (st) return st;
    if (!(*out = gzdopen(fd, "rb"))) {
        close(fd);
        return poet_fail(err, POET_ERR_NOMEM, "out of memory opening '%s'", path);
    }
    return POET_OK;
}

/* One CSV row: 64 pixel values 0..16, then the class, then the line's end
 * and nothing else. */
static poet_status digits_row(const char *line, float *x, int32_t *y, const char *path, int row, poet_err *err)
{
    const char *p = line;
    for (int k = 0; k <= 64; k++) {
        char *end = (char *)p;
        long v = isdigit((unsigned char)*p) ? strtol(p, &end, 10) : -1;
        bool last = k == 64;
        if (last && *end == '\r') end++;
        bool ends_well = last ? *end == '\n' || !*end : *end == ',';
        if (end == p || v < 0 || v > (last ? 9 : 16) || !ends_well)
            return poet_fail(err, POET_ERR_PARSE, "'%s' row %d: expected 64 values 0..16 and a class 0..9, and "
                                                  "nothing after them", path, row + 1);
        if (last) *y = (int32_t)v;
        else x[k] = (float)v / 16.0f;
        p = end + 1;
    }
    return POET_OK;
}

/* The last DIGITS_TEST rows are the test set (sklearn's file is not sorted by class). */
static poet_status load_digits(const char *dir, poet_dataset *d, poet_err *err)
{
    char path[512], line[MAX_LINE];
    *d = (poet_dataset){.channels = 1, .height = 8, .width = 8, .classes = 10};
    snprintf(d->name, sizeof d->name, "digits");
    gzFile f;
    poet_status st = open_gz(dir ? dir : DIGITS_DIR, "digits.csv.gz", "python3-sklearn", path, sizeof path, &f, err);
    if (st) return st;
    st = alloc_split(d, DIGITS_ROWS - DIGITS_TEST, DIGITS_TEST, err);
    int row = 0;
    while (!st && gzgets(f, line, sizeof line)) {
        if (row == DIGITS_ROWS) {
            st = poet_fail(err, POET_ERR_PARSE, "'%s' has more than %d rows", path, DIGITS_ROWS);
            break;
        }
        bool train = row < d->n_train;
        int i = train ? row : row - d->n_train;
        st = digits_row(line, (train ? d->train_x : d->test_x) + (size_t)i * 64, (train ? d->train_y : d->test_y) + i,
                        path, row, err);
        row++;
    }
    if (!st && row != DIGITS_ROWS) st = poet_fail(err, POET_ERR_PARSE, "'%s' has %d rows, expected %d", path, row, DIGITS_ROWS);
    gzclose(f);
    if (st) poet_dataset_free(d);
    return st;
}

static uint32_t be32(const unsigned char *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* An IDX file (LeCun's format): magic 0x801 (labels) or 0x803 (images). */
static poet_status read_idx(const char *dir, const char *file, bool images, int expect_n, float *x, int32_t *y,
                            poet_err *err)
{
    char path[512];
    gzFile f;
    poet_status st = open_gz(dir ? dir : FASHION_DIR, file, "dataset-fashion-mnist", path, sizeof path, &f, err);
    if (st) return st;
    unsigned char h[16];
    int hbytes = images ? 16 : 8;
    if (gzread(f, h, (unsigned)hbytes) != hbytes || be32(h) != (images ? 0x803u : 0x801u) ||
        be32(h + 4) != (uint32_t)expect_n || (images && (be32(h + 8) != 28 || be32(h + 12) != 28)))
        st = poet_fail(err, POET_ERR_PARSE, "'%s' is not an IDX file of %d %s", path, expect_n,
                       images ? "28x28 images" : "labels");
    size_t n = (size_t)expect_n * (images ? 784u : 1u);
    unsigned char *buf = st ? NULL : malloc(n);
    if (!st && !buf) st = poet_fail(err, POET_ERR_NOMEM, "out of memory reading '%s'", path);
    if (!st && gzread(f, buf, (unsigned)n) != (int)n) st = poet_fail(err, POET_ERR_PARSE, "'%s' is truncated", path);
    if (!st && gzread(f, h, 1) != 0) st = poet_fail(err, POET_ERR_PARSE, "'%s' has data after its %d %s", path,
                                                    expect_n, images ? "images" : "labels");
    for (size_t i = 0; !st && i < n; i++) {
        if (images) {
            x[i] = (float)buf[i] / 255.0f;
        } else if (buf[i] > 9) {
            st = poet_fail(err, POET_ERR_PARSE, "'%s': label %u of example %zu is not a class 0..9", path, buf[i], i);
        } else {
            y[i] = buf[i];
        }
    }
    free(buf);
    gzclose(f);
    return st;
}

static poet_status load_fashion(const char *dir, poet_dataset *d, poet_err *err)
{
    *d = (poet_dataset){.channels = 1, .height = 28, .width = 28, .classes = 10};
    snprintf(d->name, sizeof d->name, "fashion-mnist");
    poet_status st = alloc_split(d, 60000, 10000, err);
    if (!st) st = read_idx(dir, "train-images-idx3-ubyte.gz", true, 60000, d->train_x, NULL, err);
    if (!st) st = read_idx(dir, "train-labels-idx1-ubyte.gz", false, 60000, NULL, d->train_y, err);
    if (!st) st = read_idx(dir, "t10k-images-idx3-ubyte.gz", true, 10000, d->test_x, NULL, err);
    if (!st) st = read_idx(dir, "t10k-labels-idx1-ubyte.gz", false, 10000, NULL, d->test_y, err);
    if (st) poet_dataset_free(d);
    return st;
}

poet_status poet_dataset_load(const char *name, const char *dir, poet_dataset *out, poet_err *err)
{
    memset(out, 0, sizeof *out);
    if (name && strcmp(name, "digits") == 0) return load_digits(dir, out, err);
    if (name && strcmp(name, "fashion-mnist") == 0) return load_fashion(dir, out, err);
    return poet_fail(err, POET_ERR_NOT_FOUND, "unknown data set '%s' (digits, fashion-mnist)", name ? name : "");
}

/* Dimensions other than 1, written "AxBxC" into out; their count. */
static int squeezed(const int64_t *dims, int n, char *out, size_t cap, uint64_t *count)
{
    int kept = 0;
    size_t at = 0;
    *count = 1;
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        *count *= (uint64_t)dims[i];
        if (dims[i] == 1) continue;
        at += (size_t)snprintf(out + at, at < cap ? cap - at : 0, "%s%lld", kept ? "x" : "", (long long)dims[i]);
        kept++;
    }
    if (!kept) snprintf(out, cap, "1");
    return kept;
}

poet_status poet_dataset_check_model(const poet_dataset *d, const poet_graph *g, poet_err *err)
{
    const poet_shape *in = &g->nodes[0].shape;
    const poet_node *logits = &g->nodes[g->nodes[g->loss].inputs[0]];
    int64_t ex[3] = {d->channels, d->height, d->width};
    char has[64], takes[64];
    uint64_t nd, nm;
    int rd = squeezed(ex, 3, has, sizeof has, &nd), rm = squeezed(in->dim + 1, in->ndim - 1, takes, sizeof takes, &nm);
    bool flat = rd <= 1 || rm <= 1;
    if (flat ? nd != nm : strcmp(has, takes) != 0)
        return poet_fail(err, POET_ERR_INVALID, "data set '%s' holds examples of %s values; model '%s' takes %s", d->name,
                         has, g->model, takes);
    if (d->classes > logits->shape.dim[1])
        return poet_fail(err, POET_ERR_INVALID, "data set '%s' has labels up to %d; model '%s' has %lld classes",
                         d->name, d->classes - 1, g->model, (long long)logits->shape.dim[1]);
    if (d->n_train < in->dim[0])
        return poet_fail(err, POET_ERR_INVALID, "data set '%s' has %d training examples, fewer than a batch of %lld",
                         d->name, d->n_train, (long long)in->dim[0]);
    return POET_OK;
}
