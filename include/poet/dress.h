/* poet: DRESS-style training of nested sparse subnets, the host side
 * (docs/sparse.md; the device side is poet/sparse.h).
 *
 * Every convolution and linear layer of a model is sparse at each level
 * (a row: one output's weights, poet_weight_rows): level k keeps, in
 * each row, the ceil((1 - s_k) x row length) weights of largest magnitude,
 * so the levels nest. Training runs the levels one after the other on each
 * batch, each on the weights its mask keeps, and adds their gradients
 * (each masked to its level's weights, weighted by the level's share of the
 * loss) into one gradient buffer; one optimizer step then updates the
 * shared weights, and the masks follow the new magnitudes at the next
 * step. The activations in memory are one subnet's at a time, so the
 * schedule planned for the dense model serves every level. Follows the
 * description of Qu et al., "DRESS: Dynamic REal-time Sparse Subnets" (CVPR
 * 2022 workshop); the paper's code is not public. */
#ifndef POET_DRESS_H
#define POET_DRESS_H

#include "poet/runtime.h"
#include "poet/sparse.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct poet_dress_options {
    uint32_t n_levels;
    uint16_t sparsity_bp[POET_SPARSE_MAX_LEVELS]; /* increasing, each below 10000 */
    double loss_weight[POET_SPARSE_MAX_LEVELS];   /* of each level's loss; all 0: equal */
    int epochs;                                   /* poet_dress_train's */
    uint64_t seed;                                /* shuffles */
} poet_dress_options;

typedef struct poet_dress poet_dress;

/* A trainer on e (built for g, whose convolutions and linear layers become sparse; every
 * parameter must train). */
poet_status poet_dress_new(poet_engine *e, const poet_graph *g, const poet_dress_options *o, poet_dress **out,
                           poet_err *err);
void poet_dress_free(poet_dress *t);

/* The sparse layers: their forward nodes in g, at most max. */
int poet_dress_layers(const poet_dress *t, int *nodes, int max);

/* Trains all levels jointly for the options' epochs over d's training set. */
poet_status poet_dress_train(poet_dress *t, const poet_dataset *d, poet_err *err);

/* Prunes the model to level k (the weights outside its masks set to zero)
 * and holds those masks from then on instead of following the magnitudes:
 * with a trainer of that single level, poet_dress_train then fine-tunes
 * the pruned model (the per-level baseline). The engine's train mask
 * (poet_dev_set_train_mask) then keeps the pruned weights and their
 * optimizer state as they are; poet_dress_free clears it. */
poet_status poet_dress_prune(poet_dress *t, uint32_t level, poet_err *err);

/* Mean loss and accuracy on d's test set of the subnet at level k (the
 * dense weights are restored afterwards). */
poet_status poet_dress_evaluate(poet_dress *t, const poet_dataset *d, uint32_t level, double *loss,
                                double *accuracy, poet_err *err);

#ifdef __cplusplus
}
#endif
#endif
