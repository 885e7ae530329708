/* Internal: the reference float32 kernels, forward and backward, one per op
 * of the registry. Deterministic: a fixed loop order and no threads, so that
 * a recomputation reproduces the dropped tensor bit for bit. Kernels use no
 * memory besides their arguments. */
#ifndef POET_SRC_RUNTIME_KERNELS_H
#define POET_SRC_RUNTIME_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#include "poet/graph.h"

typedef struct kernel_ctx {
    const poet_graph *g;
    const poet_node *n;               /* the node computed */
    const float *in[POET_MAX_INPUTS]; /* its inputs, in n->inputs order */
    float *out;
    /* The forward node's parameters (a grad node: its forward node's). */
    const float *params;
    /* Parameter gradients to write, or NULL (a recomputation: no side effects). */
    float *grads;
    /* Batch-norm running statistics: read in inference, and in training
     * written to running_out when not NULL (first computation only). */
    const float *running;
    float *running_out;
    const float *batch_x;   /* the input node's data */
    const int32_t *labels;  /* one per row of the loss */
    uint64_t dropout_seed;  /* per step */
    bool training;
} kernel_ctx;

/* Computes ctx->n; returns false for an op the runtime does not execute. */
bool kernel_run(const kernel_ctx *ctx);

/* Which of a grad node's inputs is what (NULL when not read). */
typedef struct grad_reads {
    const float *dy, *x0, *x1, *y;
} grad_reads;

grad_reads kernel_grad_reads(const kernel_ctx *ctx);

/* Parameters of a forward node, and how to initialise them. */
uint64_t kernel_fan_in(const poet_graph *g, const poet_node *n);

#endif
