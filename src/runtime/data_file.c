/* A user's data set from files: NumPy's .npy (inputs, with the labels in a
 * second .npy) and .npz (arrays x and y, or x_train and y_train with
 * x_test and y_test), and CSV (the label first, then the values). Every
 * count, size and offset a file states is checked before it is used, and
 * inputs that are not finite numbers are refused (they would train
 * nothing but NaN). */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "poet/file.h"
#include "poet/runtime.h"
#include "../base/checked.h"
#include "data_formats.h"

enum { MAX_CLASSES = 1 << 16 };

/* ---- CSV: label, value, value, ... ---- */

static bool csv_number(const char **p, double *v)
{
    char *end;
    while (**p == ' ' || **p == '\t') (*p)++;
    *v = strtod(*p, &end);
    if (end == *p) return false;
    *p = end;
    while (**p == ' ' || **p == '\t') (*p)++;
    return true;
}

static const char *line_end(const char *p) { return p + strcspn(p, "\n"); }

/* Values of one row, stored when t->x is set; counts them in *cols. */
static poet_status csv_row(const char *p, const char *end, const char *path, uint64_t row, uint64_t line, table *t,
                           uint64_t *cols, poet_err *err)
{
    double v;
    if (!csv_number(&p, &v) || v != floor(v) || v < 0 || v >= MAX_CLASSES)
        return poet_fail(err, POET_ERR_PARSE, "'%s' line %llu: the first value must be a class label 0..%d", path,
                         (unsigned long long)line, MAX_CLASSES - 1);
    if (t->y) t->y[row] = (int32_t)v;
    uint64_t c = 0;
    for (; p < end && *p != '\r'; c++) {
        if (*p++ != ',' || !csv_number(&p, &v) || !isfinite(v) || fabs(v) > 3.4e38)
            return poet_fail(err, POET_ERR_PARSE, "'%s' line %llu, column %llu: expected a finite number", path,
                             (unsigned long long)line, (unsigned long long)c + 2);
        if (t->x) {
            if (c >= t->cols) break;
            t->x[row * t->cols + c] = (float)v;
        }
    }
    *cols = c;
    return POET_OK;
}

/* Two passes: count, then fill. */
poet_status data_parse_csv(const named_file *f, table *t, poet_err *err)
{
    const char *text = (const char *)f->bytes, *p = text;
    double v;
    const char *q = p;
    uint64_t header = !csv_number(&q, &v);
    if (header) p = *line_end(p) ? line_end(p) + 1 : line_end(p);
    const char *body = p;
    memset(t, 0, sizeof *t);
    for (int pass = 0; pass < 2; pass++) {
        uint64_t row = 0;
        for (p = body; *p; row++) {
            const char *end = line_end(p);
            if (end == p || (end == p + 1 && *p == '\r')) {
                if (*end && end[1]) return poet_fail(err, POET_ERR_PARSE, "'%s' line %llu is empty", f->path,
                                                     (unsigned long long)(row + header + 1));
                break;
            }
            uint64_t cols = 0;
            poet_status st = csv_row(p, end, f->path, row, row + header + 1, t, &cols, err);
            if (st) return st;
            if (row == 0 && !pass) t->cols = cols;
            if (cols != t->cols || !cols)
                return poet_fail(err, POET_ERR_PARSE, "'%s' line %llu has %llu values after its label, the first row %llu",
                                 f->path, (unsigned long long)(row + header + 1), (unsigned long long)cols,
                                 (unsigned long long)t->cols);
            p = *end ? end + 1 : end;
        }
        if (pass) break;
        t->rows = row;
        uint64_t n;
        if (!row) return poet_fail(err, POET_ERR_PARSE, "'%s' holds no rows", f->path);
        if (row > INT32_MAX || !ck_mul(row, t->cols, &n) || n > SIZE_MAX / sizeof(float))
            return poet_fail(err, POET_ERR_INVALID, "'%s' holds too many values", f->path);
        t->x = malloc((size_t)n * sizeof(float));
        t->y = malloc((size_t)row * sizeof(int32_t));
        if (!t->x || !t->y) return poet_fail(err, POET_ERR_NOMEM, "out of memory reading '%s'", f->path);
    }
    return POET_OK;
}

/* ---- examples, from any of the formats ---- */

/* Inputs and labels of one set, and one example's shape. */
typedef struct examples {
    uint64_t n, per;
    int rank;
    uint64_t dims[NPY_MAX_RANK];
    float *x;
    int32_t *y;
} examples;

static void examples_free(examples *e)
{
    free(e->x), free(e->y);
    memset(e, 0, sizeof *e);
}

static poet_status from_arrays(const nd_array *x, const nd_array *y, const char *xs, const char *ys, examples *e,
                               poet_err *err)
{
    memset(e, 0, sizeof *e);
    if (x->rank < 2 || x->dims[0] == 0)
        return poet_fail(err, POET_ERR_INVALID, "inputs '%s' must be [N, ...] with N > 0 examples", xs);
    if (y->rank != 1 || y->dims[0] != x->dims[0])
        return poet_fail(err, POET_ERR_INVALID, "labels '%s' must be [N] for the %llu examples of '%s'%s", ys,
                         (unsigned long long)x->dims[0], xs, y->rank == 2 ? " (save y.reshape(-1))" : "");
    if (y->kind == 'f')
        return poet_fail(err, POET_ERR_INVALID, "labels '%s' are floats; save them as integers (y.astype(np.int64))", ys);
    e->n = x->dims[0];
    e->per = x->count / e->n;
    e->rank = x->rank - 1;
    memcpy(e->dims, x->dims + 1, sizeof e->dims[0] * (size_t)e->rank);
    if (e->n > INT32_MAX || x->count > SIZE_MAX / sizeof(float))
        return poet_fail(err, POET_ERR_INVALID, "'%s' holds too many examples or values", xs);
    e->x = malloc((size_t)x->count * sizeof(float) + 1);
    e->y = malloc((size_t)e->n * sizeof(int32_t));
    if (!e->x || !e->y) return poet_fail(err, POET_ERR_NOMEM, "out of memory reading '%s'", xs);
    for (uint64_t i = 0; i < x->count; i++) {
        double v = data_element(x, i);
        if (!isfinite(v) || fabs(v) > 3.4e38)
            return poet_fail(err, POET_ERR_INVALID, "inputs '%s': example %llu holds %g, not a finite float32", xs,
                             (unsigned long long)(i / e->per), v);
        e->x[i] = (float)v;
    }
    for (uint64_t i = 0; i < e->n; i++) {
        double v = data_element(y, i);
        if (v < 0 || v >= MAX_CLASSES)
            return poet_fail(err, POET_ERR_INVALID, "labels '%s': example %llu's label is %.0f, not a class 0..%d", ys,
                             (unsigned long long)i, v, MAX_CLASSES - 1);
        e->y[i] = (int32_t)v;
    }
    return POET_OK;
}

/* A whole file in memory, under poet's input rule. */
static poet_status slurp(const char *path, char **buf, named_file *f, poet_err *err)
{
    size_t len;
    poet_status st = poet_read_file_max(path, POET_MAX_DATA_BYTES, buf, &len, err);
    if (!st) *f = (named_file){path, (const uint8_t *)*buf, len};
    return st;
}

static bool ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);
    if (n < t) return false;
    for (size_t i = 0; i < t; i++)
        if (tolower((unsigned char)s[n - t + i]) != tail[i]) return false;
    return true;
}

static poet_status npy_pair(const char *xpath, const char *ypath, examples *e, poet_err *err)
{
    char *xb = NULL, *yb = NULL;
    named_file xf, yf;
    nd_array x, y;
    poet_status st = slurp(xpath, &xb, &xf, err);
    if (!st) st = slurp(ypath, &yb, &yf, err);
    if (!st) st = data_parse_npy(&xf, &x, err);
    if (!st) st = data_parse_npy(&yf, &y, err);
    if (!st) st = from_arrays(&x, &y, xpath, ypath, e, err);
    free(xb), free(yb);
    return st;
}

/* Names as messages show them: "FILE:x". */
static void entry_label(const char *path, int k, char *out, size_t cap)
{
    snprintf(out, cap, "%s:%.*s", path, (int)(strlen(data_npz_names[k]) - 4), data_npz_names[k]);
}

static poet_status npz_set(const named_file *f, uint8_t *buf[], size_t len[], int kx, examples *e, poet_err *err)
{
    char xs[600], ys[600];
    entry_label(f->path, kx, xs, sizeof xs), entry_label(f->path, kx + 1, ys, sizeof ys);
    if (!buf[kx + 1]) return poet_fail(err, POET_ERR_INVALID, "'%s' has '%s' but no '%s' labels", f->path,
                                       data_npz_names[kx], data_npz_names[kx + 1]);
    named_file xf = {xs, buf[kx], len[kx]}, yf = {ys, buf[kx + 1], len[kx + 1]};
    nd_array x, y;
    poet_status st = data_parse_npy(&xf, &x, err);
    if (!st) st = data_parse_npy(&yf, &y, err);
    return st ? st : from_arrays(&x, &y, xs, ys, e, err);
}

/* An .npz's set, and its test set where it has x_test; read as a test
 * file (test NULL), its x and y or else its x_test and y_test. */
static poet_status npz_sets(const named_file *f, examples *e, examples *test, poet_err *err)
{
    uint8_t *buf[NPZ_ARRAYS] = {0};
    size_t len[NPZ_ARRAYS] = {0};
    poet_status st = data_read_npz(f, buf, len, err);
    int kx = buf[NPZ_X] ? NPZ_X : test ? NPZ_X_TRAIN : NPZ_X_TEST;
    if (!st && !buf[kx])
        st = poet_fail(err, POET_ERR_INVALID, "'%s' holds neither x and y nor %s (np.savez(f, x=..., y=...))", f->path,
                       test ? "x_train and y_train" : "x_test and y_test");
    if (!st) st = npz_set(f, buf, len, kx, e, err);
    if (!st && test && buf[NPZ_X_TEST]) st = npz_set(f, buf, len, NPZ_X_TEST, test, err);
    for (int k = 0; k < NPZ_ARRAYS; k++) free(buf[k]);
    return st;
}

static poet_status csv_set(const named_file *f, examples *e, poet_err *err)
{
    table t;
    poet_status st = data_parse_csv(f, &t, err);
    if (st) {
        free(t.x), free(t.y);
        return st;
    }
    *e = (examples){.n = t.rows, .per = t.cols, .rank = 1, .dims = {t.cols}, .x = t.x, .y = t.y};
    return POET_OK;
}

/* One file of examples (labels: the .npy labels of an .npy, else NULL);
 * an .npz may bring its test set too (test NULL: the file is a test set). */
static poet_status read_set(const char *path, const char *labels, examples *e, examples *test, poet_err *err)
{
    char *buf;
    named_file f;
    poet_status st = slurp(path, &buf, &f, err);
    if (st) return st;
    bool npy = f.len >= 6 && memcmp(f.bytes, "\x93NUMPY", 6) == 0, npz = f.len >= 4 && memcmp(f.bytes, "PK", 2) == 0;
    if ((ends_with(path, ".npy") && !npy) || (ends_with(path, ".npz") && !npz))
        st = poet_fail(err, POET_ERR_PARSE, "'%s' is not a NumPy %s file", path, ends_with(path, ".npy") ? ".npy" : ".npz");
    else if (npy != (labels != NULL))
        st = poet_fail(err, POET_ERR_INVALID, npy ? "'%s' holds inputs only: name its labels (an .npy of [N] integers)"
                                                  : "'%s' holds its own labels: separate labels go with .npy inputs",
                       path);
    else if (npy) st = npy_pair(path, labels, e, err);
    else if (npz) st = npz_sets(&f, e, test, err);
    else if (ends_with(path, ".csv")) st = csv_set(&f, e, err);
    else st = poet_fail(err, POET_ERR_INVALID, "'%s' is neither NumPy (.npy, .npz) nor a .csv file", path);
    free(buf);
    return st;
}

/* ---- the data set ---- */

/* An example's shape without its 1s, as channels x height x width. */
static poet_status example_layout(const examples *e, const char *path, int chw[3], poet_err *err)
{
    uint64_t kept[NPY_MAX_RANK];
    int r = 0;
    for (int i = 0; i < e->rank; i++)
        if (e->dims[i] != 1) kept[r++] = e->dims[i];
    if (r > 3) return poet_fail(err, POET_ERR_INVALID, "'%s': examples have %d dimensions besides 1s; poet reads up to 3",
                                path, r);
    uint64_t c = r == 3 ? kept[0] : r == 2 ? kept[0] : 1, h = r == 3 ? kept[1] : 1, w = r ? kept[r - 1] : 1;
    if (c > INT32_MAX || h > INT32_MAX || w > INT32_MAX || !e->per)
        return poet_fail(err, POET_ERR_INVALID, "'%s': examples of %llu values are not a shape poet reads", path,
                         (unsigned long long)e->per);
    chw[0] = (int)c, chw[1] = (int)h, chw[2] = (int)w;
    return POET_OK;
}

/* Whether a layout has at most one dimension other than 1. */
static bool flat(const int chw[3]) { return (chw[0] > 1) + (chw[1] > 1) + (chw[2] > 1) <= 1; }

enum { SPLIT_SEED = 20221 }; /* the held-out examples do not change with --seed */

/* The last part of a fixed shuffle as the test set. */
static poet_status split(examples *all, double fraction, examples *test, poet_err *err)
{
    uint64_t n = all->n, k = (uint64_t)llround((double)n * fraction);
    if (k < 1 || k >= n)
        return poet_fail(err, POET_ERR_INVALID, "a test split of %g of %llu examples leaves no %s examples", fraction,
                         (unsigned long long)n, k < 1 ? "test" : "training");
    int *order = malloc((size_t)n * sizeof *order);
    float *x = malloc((size_t)(n * all->per) * sizeof(float));
    int32_t *y = malloc((size_t)n * sizeof(int32_t));
    if (!order || !x || !y) {
        free(order), free(x), free(y);
        return poet_fail(err, POET_ERR_NOMEM, "out of memory splitting the data set");
    }
    poet_train_order(SPLIT_SEED, 0, (int)n, order);
    poet_train_gather(x, y, (int)n, all->per, all->x, all->y, order);
    free(order), free(all->x), free(all->y);
    *test = *all;
    test->n = k, test->x = NULL, test->y = NULL;
    test->x = malloc((size_t)(k * all->per) * sizeof(float) + 1);
    test->y = malloc((size_t)k * sizeof(int32_t));
    all->x = x, all->y = y, all->n = n - k;
    if (!test->x || !test->y) return poet_fail(err, POET_ERR_NOMEM, "out of memory splitting the data set");
    memcpy(test->x, x + (size_t)(all->n * all->per), (size_t)(k * all->per) * sizeof(float));
    memcpy(test->y, y + (size_t)all->n, (size_t)k * sizeof(int32_t));
    return POET_OK;
}

static int classes_of(const examples *e, int at_least)
{
    for (uint64_t i = 0; i < e->n; i++)
        if (e->y[i] >= at_least) at_least = e->y[i] + 1;
    return at_least;
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static poet_status dataset_from(const poet_data_source *src, examples *train, examples *test, poet_dataset *d,
                                poet_err *err)
{
    poet_status st = read_set(src->data, src->labels, train, test, err);
    if (!st && src->test_data) {
        if (test->x) return poet_fail(err, POET_ERR_INVALID, "'%s' holds x_test already; name no other test set",
                                      src->data);
        st = read_set(src->test_data, src->test_labels, test, NULL, err);
    }
    if (st) return st;
    if (!test->x) {
        st = split(train, src->test_split > 0 ? src->test_split : POET_DEFAULT_TEST_SPLIT, test, err);
        d->held_out = src->test_split > 0 ? src->test_split : POET_DEFAULT_TEST_SPLIT;
    } else if (src->test_split > 0) {
        return poet_fail(err, POET_ERR_INVALID, "a test split was asked for, and '%s' brings a test set",
                         src->test_data ? src->test_data : src->data);
    }
    int chw[3], tchw[3];
    if (!st) st = example_layout(train, src->data, chw, err);
    if (!st) st = example_layout(test, src->test_data ? src->test_data : src->data, tchw, err);
    if (st) return st;
    if (memcmp(chw, tchw, sizeof chw) != 0 && train->per == test->per && (flat(chw) || flat(tchw))) {
        if (flat(chw)) memcpy(chw, tchw, sizeof chw); /* a CSV's rows take the shape of the test set's examples */
    } else if (memcmp(chw, tchw, sizeof chw) != 0) {
        return poet_fail(err, POET_ERR_INVALID, "test examples are %dx%dx%d, training examples %dx%dx%d", tchw[0],
                         tchw[1], tchw[2], chw[0], chw[1], chw[2]);
    }
    snprintf(d->name, sizeof d->name, "%s", base_name(src->data));
    d->channels = chw[0], d->height = chw[1], d->width = chw[2];
    d->classes = classes_of(test, classes_of(train, 0));
    d->n_train = (int)train->n, d->n_test = (int)test->n;
    d->train_x = train->x, d->train_y = train->y, d->test_x = test->x, d->test_y = test->y;
    *train = (examples){0}, *test = (examples){0};
    return POET_OK;
}

poet_status poet_dataset_open(const poet_data_source *src, poet_dataset *out, poet_err *err)
{
    memset(out, 0, sizeof *out);
    bool builtin = src->data && (strcmp(src->data, "digits") == 0 || strcmp(src->data, "fashion-mnist") == 0);
    if (!src->data) return poet_fail(err, POET_ERR_INVALID, "no data set named");
    if (builtin && (src->labels || src->test_data || src->test_split > 0))
        return poet_fail(err, POET_ERR_INVALID, "'%s' brings its own labels and test set", src->data);
    if (builtin) return poet_dataset_load(src->data, src->dir, out, err);
    if (access(src->data, F_OK) != 0)
        return poet_fail(err, POET_ERR_NOT_FOUND, "unknown data set '%s': not digits or fashion-mnist, and no such file",
                         src->data);
    if (src->test_labels && !src->test_data)
        return poet_fail(err, POET_ERR_INVALID, "test labels without the test inputs they label");
    if (src->test_split < 0 || src->test_split >= 1)
        return poet_fail(err, POET_ERR_INVALID, "a test split is a fraction between 0 and 1, got %g", src->test_split);
    examples train = {0}, test = {0};
    poet_status st = dataset_from(src, &train, &test, out, err);
    examples_free(&train), examples_free(&test);
    if (st) poet_dataset_free(out);
    return st;
}
