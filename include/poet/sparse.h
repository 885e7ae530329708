/* poet: DRESS-style nested sparse subnets, the device side (docs/sparse.md).
 *
 * One backbone holds several sparse subnetworks, nested: at sparsity levels
 * s_1 < ... < s_K, level k keeps in every row of a layer (an output
 * feature) its ceil((1 - s_k) x row length) largest-magnitude weights. Each
 * row is stored once, sorted by magnitude with the column of each value, so
 * a level's weights are a prefix of every row: switching level changes one
 * number per layer and moves no weight. Follows the description of Qu et
 * al., "DRESS: Dynamic REal-time Sparse Subnets" (CVPR 2022 workshop), whose
 * code is not public: DRESS-style.
 *
 * Freestanding: no allocation, no stdio, no libm; the caller owns every
 * buffer. Sparsities are in basis points (1/10000), so that the count a
 * level keeps is integer arithmetic, the same on every platform. */
#ifndef POET_SPARSE_H
#define POET_SPARSE_H

#include <stdint.h>

#include "poet/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define POET_SPARSE_MAX_LEVELS 8
#define POET_SPARSE_MAX_COLS 65536u /* columns are 16-bit */

typedef struct poet_sparse_layer {
    uint32_t rows, cols;                   /* output and input features */
    uint32_t n_levels;
    uint32_t level;                        /* in use; the only field a switch changes */
    uint32_t keep[POET_SPARSE_MAX_LEVELS]; /* weights each row keeps at each level, nonincreasing */
    const float *values;                   /* rows x cols, each row by magnitude, largest first */
    const uint16_t *columns;               /* the column of each value */
    const float *bias;                     /* rows, or NULL */
} poet_sparse_layer;

/* ceil((1 - s) x cols) for s = sparsity_bp / 10000. */
uint32_t poet_sparse_keep(uint32_t cols, uint32_t sparsity_bp);

/* Bytes of a packed rows x cols layer: a float and a 16-bit column per weight. */
uint64_t poet_sparse_bytes(uint32_t rows, uint32_t cols);

/* The magnitude order of one row: order[j] is the column of its j-th
 * largest |w|, ties to the lower column (so every platform agrees). */
void poet_sparse_row_order(const float *row, uint32_t cols, uint16_t *order);

/* Which weights level `keep` holds: mask[r x cols + c] = 1 where column c is
 * among row r's `keep` largest magnitudes, else 0. order: cols scratch. */
void poet_sparse_mask(const float *dense, uint32_t rows, uint32_t cols, uint32_t keep, uint8_t *mask,
                      uint16_t *order);

/* Packs a dense row-major rows x cols matrix into values and columns (each
 * rows x cols) for the given levels (strictly increasing sparsities, each
 * below 10000), and describes it in *out at level 0. */
poet_status poet_sparse_pack(const float *dense, const float *bias, uint32_t rows, uint32_t cols,
                             const uint16_t *sparsity_bp, uint32_t n_levels, float *values, uint16_t *columns,
                             poet_sparse_layer *out, poet_err *err);

/* Selects the level the layer runs at. */
poet_status poet_sparse_set_level(poet_sparse_layer *l, uint32_t level, poet_err *err);

/* y[b x rows + r] = bias[r] + the row's kept weights times x[b x cols + ...],
 * for b < batch: the layer at its level. */
void poet_sparse_forward(const poet_sparse_layer *l, const float *x, uint32_t batch, float *y);

#ifdef __cplusplus
}
#endif
#endif
