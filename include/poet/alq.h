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
 * The first part is the device's: the packed format and the product that
 * reads it, freestanding (no allocation, no stdio, no libm). The second is
 * the host's: the group arithmetic ALQ trains with, and the trainer. */
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

/* ---- ALQ's group arithmetic (host) ----
 * A group of n weights with I terms: alpha[I], codes[j x I + i] = b_i[j]
 * in {-1, +1}. */

/* Weighted least squares: the scales minimizing sum_j h_j (t_j -
 * sum_i alpha_i codes[j][i])^2 (h NULL: all 1). Codes that repeat a term
 * (or its negation) make the system singular; those terms get scale 0 and
 * the call returns false. */
bool poet_alq_refit(const int8_t *codes, uint32_t n, uint32_t I, const float *t, const float *h, double *alpha);

/* Greedy residual binarization with a least-squares refit of every scale
 * after each new term: I terms for the n weights w. Scales come out
 * positive (a term whose scale the refit makes negative is negated), and
 * zero where the residual vanished before the I-th term. Returns the terms
 * used (at most I). */
uint32_t poet_alq_init_group(const float *w, uint32_t n, uint32_t I, int8_t *codes, double *alpha);

/* For each target t_j, the code in {-1,+1}^I whose value sum_i alpha_i
 * c_i is nearest (ties to the smaller value): 2^I candidates sorted once,
 * then a binary search per weight. scratch: 2^I doubles and 2^I uint8_t. */
void poet_alq_nearest_codes(const double *alpha, uint32_t I, const float *t, uint32_t n, int8_t *codes,
                            double *scratch_values, uint8_t *scratch_masks);

/* The `count` entries of dl (a coordinate's modelled loss increase if
 * removed) that are smallest, ties to the lower index: marks them in
 * remove[] (1) and returns how many it marked (count, or n if smaller).
 * order: n scratch. */
uint64_t poet_alq_pick_prune(const double *dl, uint64_t n, uint64_t count, uint8_t *remove, uint64_t *order);

#ifdef __cplusplus
}
#endif
#endif
