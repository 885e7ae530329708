/* DRESS-style nested sparse layers (poet/sparse.h). Freestanding. */
#include "poet/sparse.h"

#include <stdbool.h>
#include <string.h>

uint32_t poet_sparse_keep(uint32_t cols, uint32_t sparsity_bp)
{
    /* ceil((1 - s) n) = n - floor(s n) */
    return cols - (uint32_t)((uint64_t)cols * sparsity_bp / 10000u);
}

uint64_t poet_sparse_bytes(uint32_t rows, uint32_t cols)
{
    return (uint64_t)rows * cols * (sizeof(float) + sizeof(uint16_t));
}

static float magnitude(float x) { return x < 0 ? -x : x; }

/* Column a comes before column b in the row's magnitude order. */
static bool before(const float *row, uint16_t a, uint16_t b)
{
    float ma = magnitude(row[a]), mb = magnitude(row[b]);
    return ma > mb || (ma == mb && a < b);
}

static void sift_down(const float *row, uint16_t *h, uint32_t at, uint32_t n)
{
    for (;;) {
        uint32_t c = 2 * at + 1;
        if (c >= n) return;
        if (c + 1 < n && before(row, h[c], h[c + 1])) c++;
        if (!before(row, h[at], h[c])) return;
        uint16_t t = h[at];
        h[at] = h[c], h[c] = t;
        at = c;
    }
}

/* Heap sort: in place, n log n, and no recursion on a device's stack. */
void poet_sparse_row_order(const float *row, uint32_t cols, uint16_t *order)
{
    for (uint32_t c = 0; c < cols; c++) order[c] = (uint16_t)c;
    for (uint32_t i = cols / 2; i-- > 0;) sift_down(row, order, i, cols);
    for (uint32_t n = cols; n > 1; n--) {
        uint16_t t = order[0];
        order[0] = order[n - 1], order[n - 1] = t;
        sift_down(row, order, 0, n - 1);
    }
}

void poet_sparse_mask(const float *dense, uint32_t rows, uint32_t cols, uint32_t keep, uint8_t *mask,
                      uint16_t *order)
{
    for (uint32_t r = 0; r < rows; r++) {
        const float *row = dense + (uint64_t)r * cols;
        uint8_t *m = mask + (uint64_t)r * cols;
        poet_sparse_row_order(row, cols, order);
        memset(m, 0, cols);
        for (uint32_t j = 0; j < keep && j < cols; j++) m[order[j]] = 1;
    }
}

static bool finite(float x) { return x - x == 0; }

static poet_status check_levels(uint32_t rows, uint32_t cols, const uint16_t *sparsity_bp, uint32_t n_levels,
                                poet_err *err)
{
    if (!rows || !cols) return poet_fail(err, POET_ERR_INVALID, "sparse layer: %u x %u weights", (unsigned)rows, (unsigned)cols);
    if (cols > POET_SPARSE_MAX_COLS)
        return poet_fail(err, POET_ERR_LIMIT, "sparse layer: %u columns, at most %u (16-bit indices)", (unsigned)cols,
                         (unsigned)POET_SPARSE_MAX_COLS);
    if (!n_levels || n_levels > POET_SPARSE_MAX_LEVELS)
        return poet_fail(err, POET_ERR_INVALID, "sparse layer: %u levels, need 1 to %d", (unsigned)n_levels,
                         POET_SPARSE_MAX_LEVELS);
    for (uint32_t k = 0; k < n_levels; k++) {
        if (sparsity_bp[k] >= 10000)
            return poet_fail(err, POET_ERR_INVALID, "sparse layer: level %u keeps nothing (sparsity %u bp)", (unsigned)k,
                             (unsigned)sparsity_bp[k]);
        if (k && sparsity_bp[k] <= sparsity_bp[k - 1])
            return poet_fail(err, POET_ERR_INVALID, "sparse layer: sparsities must increase (level %u)", (unsigned)k);
    }
    return POET_OK;
}

poet_status poet_sparse_pack(const float *dense, const float *bias, uint32_t rows, uint32_t cols,
                             const uint16_t *sparsity_bp, uint32_t n_levels, float *values, uint16_t *columns,
                             poet_sparse_layer *out, poet_err *err)
{
    poet_status st = check_levels(rows, cols, sparsity_bp, n_levels, err);
    if (st) return st;
    for (uint64_t i = 0; i < (uint64_t)rows * cols; i++)
        if (!finite(dense[i]))
            return poet_fail(err, POET_ERR_INVALID, "sparse layer: weight %u of row %u is not finite",
                             (unsigned)(i % cols), (unsigned)(i / cols));
    for (uint32_t r = 0; r < rows; r++) {
        const float *row = dense + (uint64_t)r * cols;
        uint16_t *order = columns + (uint64_t)r * cols;
        poet_sparse_row_order(row, cols, order);
        for (uint32_t j = 0; j < cols; j++) values[(uint64_t)r * cols + j] = row[order[j]];
    }
    poet_sparse_layer l = {rows, cols, n_levels, 0, {0}, values, columns, bias};
    for (uint32_t k = 0; k < n_levels; k++) l.keep[k] = poet_sparse_keep(cols, sparsity_bp[k]);
    *out = l;
    return POET_OK;
}

poet_status poet_sparse_set_level(poet_sparse_layer *l, uint32_t level, poet_err *err)
{
    if (level >= l->n_levels)
        return poet_fail(err, POET_ERR_INVALID, "sparse layer: level %u, the layer has %u", (unsigned)level, (unsigned)l->n_levels);
    l->level = level;
    return POET_OK;
}

void poet_sparse_forward(const poet_sparse_layer *l, const float *x, uint32_t batch, float *y)
{
    uint32_t keep = l->keep[l->level];
    for (uint32_t b = 0; b < batch; b++) {
        const float *xb = x + (uint64_t)b * l->cols;
        for (uint32_t r = 0; r < l->rows; r++) {
            const float *v = l->values + (uint64_t)r * l->cols;
            const uint16_t *c = l->columns + (uint64_t)r * l->cols;
            float s = 0;
            for (uint32_t j = 0; j < keep; j++) s += v[j] * xb[c[j]];
            y[(uint64_t)b * l->rows + r] = l->bias ? s + l->bias[r] : s;
        }
    }
}
