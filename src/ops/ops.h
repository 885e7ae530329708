/* Internal: the op registry, the single source of truth for shape
 * inference, FLOPs, parameters and which tensors each backward reads. */
#ifndef POET_SRC_OPS_OPS_H
#define POET_SRC_OPS_OPS_H

#include "poet/ops.h"

typedef enum grad_rule {
    GRAD_NONE,      /* no gradient flows through (input) */
    GRAD_ALIAS,     /* inputs' gradient is the output gradient itself */
    GRAD_FUSED,     /* one node: gradient of input 0 and of the parameters */
    GRAD_PER_INPUT  /* one node per input that needs a gradient */
} grad_rule;

/* What a backward node reads besides the output gradient. */
enum { READ_IN0 = 1, READ_IN1 = 2, READ_OUT = 4, READ_MASK = 8 }; /* READ_MASK: the node after the forward node */

typedef struct op_def {
    const char *name;
    int min_inputs, max_inputs;
    /* Fills n->shape, n->params, n->buffers and n->flops from n->attrs and
     * the input nodes; returns 0 or a message via poet_fail. */
    poet_status (*infer)(const poet_graph *g, poet_node *n, poet_err *err);
    grad_rule grad;
    /* per input differentiated, a READ_* mask; then ([WEIGHT_READS]) what
     * the weights' gradient adds to them while the weights train */
    unsigned reads[3];
    bool seeds_grad;   /* the loss: its backward needs no incoming gradient */
    /* For ops whose gradient depends on their attributes (add, sub, mul,
     * div with a parameter or constant operand): overrides grad and reads. */
    grad_rule (*grad_of)(const poet_node *n);
    unsigned (*reads_of)(const poet_node *n, int wrt);
} op_def;

enum { WEIGHT_READS = 2 };

const op_def *op_get(poet_op op);
/* The gradient rule of node n, and what its gradient wrt input wrt
 * (POET_GRAD_PARAMS_ONLY for the parameters alone) reads. */
grad_rule op_grad_rule(const poet_node *n);
unsigned op_reads(const poet_node *n, int wrt);

#endif
