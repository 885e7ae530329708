/* poet: training multi-bit weights (docs/alq.md; the format is poet/alq.h).
 *
 * Every convolution's and linear layer's weights (by rows,
 * poet_weight_rows) become groups of scaled binary terms; the
 * rest of the model (biases, other layers) trains as usual under the
 * engine's optimizer and schedule. Three methods:
 * - ALQ (Qu et al., CVPR 2020, from its description): a quadratic model of
 *   the loss from AMSGrad's moments. Coordinate steps are AMSGrad on the
 *   scales with the gradient g_a = B^T g_w; basis steps move every weight's
 *   code to the one nearest w* = w_hat - d / h (d, h: the weight's first
 *   moment and its diagonal curvature, sqrt(v_max) / lr) and refit the
 *   scales by least squares weighted by h; pruning epochs remove, pooled
 *   over all layers, the terms whose removal raises the modelled loss
 *   least, dl = -d_a a + 0.5 h_a a^2, until the average bit width reaches
 *   the target, so each group ends with its own number of terms.
 * - STE, the fixed-bit-width baseline: full-precision latent weights,
 *   quantized at every step by greedy residual binarization with a
 *   least-squares refit to the same number of terms in every group (below
 *   one bit: one term in the groups of largest norm, zero elsewhere), the
 *   gradient passed straight through to the latent weights.
 * - BWN: STE with one term per row (a group is a whole row). */
#ifndef POET_QUANTIZE_H
#define POET_QUANTIZE_H

#include "poet/alq.h"
#include "poet/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum poet_quant_method { POET_QUANT_ALQ, POET_QUANT_STE, POET_QUANT_BWN } poet_quant_method;

typedef struct poet_quant_options {
    poet_quant_method method;
    uint32_t group;       /* weights per group (ALQ, STE); BWN: a row */
    uint32_t init_terms;  /* ALQ: terms every group starts with, 1-6 */
    double target_bits;   /* average bit width: ALQ prunes to it, STE holds it; BWN: 1 */
    int epochs;           /* in all */
    int prune_epochs;     /* ALQ: P; epochs 1 to P each prune their share toward the target (what
                           * is left at the end is pruned then), the others fine-tune */
    int basis_every;      /* ALQ: steps between basis steps */
    float lr;             /* of the scales (ALQ) or the latent weights (STE, BWN); AMSGrad */
    uint64_t seed;        /* shuffles */
} poet_quant_options;

typedef struct poet_quant poet_quant;

/* Quantizes e's convolutions and linear layers (g's; every parameter must train) from the
 * weights e holds now. */
poet_status poet_quant_new(poet_engine *e, const poet_graph *g, const poet_quant_options *o, poet_quant **out,
                           poet_err *err);
void poet_quant_free(poet_quant *q);

/* Trains for the options' epochs over d's training set; e then holds the
 * quantized weights. */
poet_status poet_quant_train(poet_quant *q, const poet_dataset *d, poet_err *err);

/* The average bit width now (sign bits per linear weight) and the packed
 * bytes of the quantized layers (their biases in float included). */
double poet_quant_bits(const poet_quant *q);
uint64_t poet_quant_bytes(const poet_quant *q);

/* Layer k (of the quantized layers, in graph order) in the packed format, its
 * arrays owned by q until the next call or poet_quant_free. Returns false
 * past the last layer. */
bool poet_quant_layer(poet_quant *q, int k, poet_alq_layer *out);

/* ---- ALQ's group arithmetic (learn/alq_fit.c) ----
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
