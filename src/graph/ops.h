/* Internal: the op registry, the single source of truth for shape
 * inference, FLOPs, parameters and which tensors each backward reads. */
#ifndef POET_SRC_GRAPH_OPS_H
#define POET_SRC_GRAPH_OPS_H

#include "poet/graph.h"

typedef enum grad_rule {
    GRAD_NONE,      /* no gradient flows through (input) */
    GRAD_ALIAS,     /* inputs' gradient is the output gradient itself */
    GRAD_FUSED,     /* one node: gradient of input 0 and of the parameters */
    GRAD_PER_INPUT  /* one node per input that needs a gradient */
} grad_rule;

/* What a backward node reads besides the output gradient. */
enum { READ_IN0 = 1, READ_IN1 = 2, READ_OUT = 4 };

typedef struct op_def {
    const char *name;
    int min_inputs, max_inputs;
    /* Fills n->shape, n->params, n->buffers and n->flops from n->attrs and
     * the input nodes; returns 0 or a message via poet_fail. */
    poet_status (*infer)(const poet_graph *g, poet_node *n, poet_err *err);
    grad_rule grad;
    unsigned reads[2]; /* per input differentiated: READ_* mask */
    bool seeds_grad;   /* the loss: its backward needs no incoming gradient */
} op_def;

const op_def *op_get(poet_op op);

#endif
