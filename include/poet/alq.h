/* poet: multi-bit weights, ALQ-style (docs/alq.md).
 *
 * A linear layer's rows are cut into groups of `group` consecutive weights
 * (the last group of a row may be shorter); each group is a sum of a few
 * scaled binary vectors, w_g = sum_i a_i b_i with b_i in {-1,+1}^n and
 * a_i > 0, at most POET_ALQ_MAX_TERMS terms, and each group has its own
 * number of terms (0: the group is zero). The average bit width is the
 * mean number of terms per weight, which can fall below one. Following Qu
 * et al., "Adaptive Loss-aware Quantization for Multi-bit Networks" (CVPR
 * 2020), implemented from its description.
 *
 * This header is the device's: the packed format and the product that
 * reads it, freestanding (no allocation, no stdio, no libm). The group
 * arithmetic ALQ trains with, and the trainer, are the host's
 * (poet/quantize.h). */
#ifndef POET_ALQ_H
#define POET_ALQ_H

#include <stdbool.h>
#include <stdint.h>

#include "poet/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define POET_ALQ_MAX_TERMS 6

/* ---- the packed format (device library) ----
 * Groups in row order. For each group: terms[g] (0-6); its terms' scales,
 * consecutive in alpha; its terms' signs, one bit per weight (1: +1,
 * 0: -1, least significant bit first), each term's bits starting on a
 * fresh byte, consecutive in bits. */
typedef struct poet_alq_layer {
    uint32_t rows, cols, group;
    const uint8_t *terms; /* rows x groups_per_row */
    const float *alpha;
    const uint8_t *bits;
    const float *bias; /* rows, or NULL */
} poet_alq_layer;

static inline uint32_t poet_alq_groups_per_row(const poet_alq_layer *l) { return (l->cols + l->group - 1) / l->group; }

/* The packed sizes of a layer whose group g has terms[g] terms: scales,
 * sign bytes, and in all (with the term counts, one byte a group). */
typedef struct poet_alq_size {
    uint64_t alphas, bit_bytes, bytes;
    uint64_t sign_bits; /* sum over groups of terms x group length: bits per weight x weights */
} poet_alq_size;
poet_alq_size poet_alq_layer_size(uint32_t rows, uint32_t cols, uint32_t group, const uint8_t *terms);

/* Checks the shape (group >= 1, every count at most POET_ALQ_MAX_TERMS). */
poet_status poet_alq_check(const poet_alq_layer *l, poet_err *err);

/* y[b x rows + r] = bias[r] + sum over the row's groups and their terms of
 * a_i (b_i . x_group), for b < batch. */
void poet_alq_forward(const poet_alq_layer *l, const float *x, uint32_t batch, float *y);

/* The dense weights the layer stands for (rows x cols). */
void poet_alq_dequantize(const poet_alq_layer *l, float *w);

#ifdef __cplusplus
}
#endif
#endif
