/* poet: the training graph (forward + loss + backward) built from the op
 * registry (poet/ops.h), autodiff, what trains, and the model zoo. Knows
 * nothing about devices or plans. */
#ifndef POET_GRAPH_H
#define POET_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "poet/ops.h"
#include "poet/status.h"

#ifdef __cplusplus
extern "C" {
#endif

poet_status poet_graph_init(poet_graph *g, const char *model, int batch, poet_err *err);
void poet_graph_free(poet_graph *g);

/* Appends a forward node after inferring its shape, bytes, FLOPs and
 * parameters. Returns the node's index, or -1 after an error, which is kept
 * in g->err; later calls then do nothing and return -1 too, so a model can be
 * built without checking each call. */
int poet_graph_add(poet_graph *g, poet_op op, const int *inputs, int n_inputs,
                   const poet_attrs *attrs, const char *name);

/* Derives the backward nodes of the loss node `loss`, in reverse
 * topological order of the forward pass; sums gradient contributions of
 * tensors with several consumers in explicit POET_OP_GRAD_SUM nodes. */
poet_status poet_graph_autodiff(poet_graph *g, int loss, poet_err *err);

/* Chooses which parameter tensors train and derives the backward pass
 * again (poet_graph_autodiff), so that it computes and saves only what
 * those gradients need: nothing below the lowest trained layer, and no
 * input of a layer whose weights are frozen kept for their gradient.
 * spec (docs/partial.md): "all"; "biases" (biases and norms' beta);
 * "last:N" (the last N nodes with parameters); "ratio:R" (everything
 * trains, but of each conv's (not grouped) and linear layer's C input
 * channels only ceil(R x C), 0 < R <= 1: a channel_select node after the
 * layer holds them for its weight gradient; which ones the device image
 * says, chosen by weight norm); "mask:FILE" (lines "NODE
 * all|weights|bias|none [ratio:R]"; nodes not named are frozen); any of them followed
 * by "+frozen-bn": batch norms normalize with their running statistics and
 * leave them as they are (POET_ATTR_BN_EVAL); "+masks": relus and max
 * pools keep a bit mask or argmax indices for their backward where that
 * frees what it read; "+ratio:R": the trained layers' weights train on
 * ceil(R x C) input channels, as ratio:R does for all. g must have its backward pass; on failure it is
 * unchanged. */
poet_status poet_graph_set_trainable(poet_graph *g, const char *spec, poet_err *err);

uint64_t poet_graph_param_count(const poet_graph *g);  /* trainable */
uint64_t poet_graph_trained_count(const poet_graph *g); /* of those, the ones that train */
uint64_t poet_graph_buffer_count(const poet_graph *g); /* non-trainable */

/* ---- model zoo ---- */
typedef struct poet_model_info {
    const char *name;
    const char *description;
    const char *dataset;  /* data set it is meant to train on, or NULL */
    int default_batch;
    bool trainable;       /* the runtime can execute it */
    bool reference;       /* POET's reference instances include it */
} poet_model_info;

int poet_zoo_count(void);
const poet_model_info *poet_zoo_info(int i);
const poet_model_info *poet_zoo_find(const char *name);
/* Builds forward, loss and backward graph of a zoo model. batch <= 0 means
 * the model's default batch size. */
poet_status poet_zoo_build(const char *name, int batch, poet_graph *out, poet_err *err);

#ifdef __cplusplus
}
#endif
#endif
