/* poet: the op registry's vocabulary: ops, shapes, attributes and the
 * nodes of a training graph, as plain data, with the helpers that read a
 * node's parameters. Freestanding: the device library (poet/device.h)
 * checks an image's nodes against the same registry the host builds
 * graphs with (poet/graph.h). */
#ifndef POET_OPS_H
#define POET_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "poet/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define POET_MAX_DIMS 4
#define POET_MAX_INPUTS 8
#define POET_NAME_BYTES 48
#define POET_MAX_NODES 100000             /* largest graph poet accepts */
#define POET_MAX_TENSOR_BYTES (1ULL << 50) /* 1 PiB: larger is a mistake */

typedef enum poet_op {
    POET_OP_INPUT,
    POET_OP_CONV2D,
    POET_OP_BATCHNORM2D,
    POET_OP_RELU,
    POET_OP_MAXPOOL2D,
    POET_OP_AVGPOOL2D,
    POET_OP_GLOBAL_AVGPOOL,
    POET_OP_ADD,
    POET_OP_FLATTEN,
    POET_OP_LINEAR,
    POET_OP_DROPOUT,
    POET_OP_SOFTMAX_CE,   /* softmax cross-entropy loss; labels come with the batch */
    POET_OP_LAYERNORM,
    POET_OP_GELU,
    POET_OP_SOFTMAX,      /* over the last dimension */
    POET_OP_ATTN_SCORES,  /* per head: Q K^T / sqrt(d), the first matmul of attention */
    POET_OP_ATTN_CONTEXT, /* per head: P V, the second matmul of attention */
    POET_OP_GRAD,         /* gradient w.r.t. input `wrt` of forward node `fwd` */
    POET_OP_GRAD_SUM,     /* sum of the gradient contributions to one tensor */
    POET_OP_SUB,          /* elementwise, broadcasting like add, mul and div */
    POET_OP_MUL,
    POET_OP_DIV,
    POET_OP_MATMUL,       /* batched matrix product of two tensors, leading dimensions broadcast */
    POET_OP_SIGMOID,
    POET_OP_TANH,
    POET_OP_ERF,
    POET_OP_HARDSIGMOID,  /* max(0, min(1, alpha x + beta)) */
    POET_OP_HARDSWISH,    /* x * max(0, min(1, x / 6 + 1 / 2)) */
    POET_OP_CLIP,         /* min(max(x, alpha), beta): relu6 and hardtanh */
    POET_OP_TRANSPOSE,
    POET_OP_RESHAPE,      /* the same elements in another shape */
    POET_OP_CONCAT,
    POET_OP_SLICE,        /* [start, end) of one axis */
    POET_OP_RELU_MASK,    /* the sign bits of a relu's output, 32 a word: what its backward reads instead */
    POET_OP_POOL_INDEX,   /* per max-pool output, its window's argmax, 4 bytes a word: what its backward reads */
    POET_OP_CHANNEL_SELECT, /* the input channels of a conv or linear layer whose weights train (ratio:R): what its
                             * weight gradient reads */
    POET_OP_UPSAMPLE2D,   /* nearest neighbour: each element of H and W repeated sh x sw times */
    POET_OP_LEAKY_RELU,   /* x where x > 0, alpha x elsewhere */
    POET_OP_SOFTPLUS,     /* log(1 + exp(x)): Mish's first step */
    POET_OP_ELU,          /* x where x > 0, alpha (exp(x) - 1) elsewhere */
    POET_OP_PRELU,        /* x where x > 0, slope x elsewhere: the slope a trained operand, broadcast */
    POET_OP_COUNT
} poet_op;

/* wrt value of a gradient node that only accumulates parameter gradients
 * (its forward input needs no gradient, e.g. the first convolution). */
#define POET_GRAD_PARAMS_ONLY (-1)

typedef struct poet_shape {
    int ndim;
    int64_t dim[POET_MAX_DIMS];
} poet_shape;

/* poet_attrs.flags */
enum {
    POET_ATTR_NO_BIAS = 1,        /* conv2d, linear: no bias after the weights */
    POET_ATTR_COUNT_PAD = 2,      /* avgpool2d: padded zeros count in the mean */
    POET_ATTR_OPERAND_PARAM = 4,  /* add, sub, mul, div with one input: the other operand is a trained parameter;
                                   * concat: a trained parameter is concatenated with its one input */
    POET_ATTR_OPERAND_CONST = 8,  /* ... or a constant, kept with the buffers */
    POET_ATTR_OPERAND_LEFT = 16,  /* ... and it is the left argument */
    POET_ATTR_KEEPDIMS = 32,      /* global_avgpool: output N, C, 1, 1 */
    POET_ATTR_NO_AFFINE = 64,     /* layernorm: no gamma and beta */
    POET_ATTR_GELU_ERF = 128,     /* gelu: exact, x Phi(x), rather than the tanh approximation */
    POET_ATTR_FREEZE_WEIGHTS = 256, /* the weights (conv, linear), gamma (norms) or parameter operand do not train */
    POET_ATTR_FREEZE_BIAS = 512,    /* the bias (conv, linear) or beta (norms) does not train */
    POET_ATTR_BN_EVAL = 1024,       /* batchnorm2d: normalizes with its running statistics, in training too */
    POET_ATTR_COMPACT_READ = 2048   /* relu, maxpool2d, conv2d, linear: the next node (relu_mask, pool_index,
                                     * channel_select) is what the backward reads */
};

/* Every field is 4 bytes, so the struct has one layout everywhere (the
 * device image carries it as it is). */
typedef struct poet_attrs {
    int32_t ndim, dim[POET_MAX_DIMS]; /* input: its shape; reshape: the output's; add...div, concat, prelu: the operand's */
    int32_t features;                 /* conv2d: output channels; linear: output features; channel_select: kept */
    int32_t kernel, stride, pad;      /* conv2d, pools: square shorthands for the fields below */
    int32_t kh, kw, sh, sw;           /* window and strides */
    int32_t pt, pl, pb, pr;           /* padding: top, left, bottom, right */
    int32_t dh, dw, groups;           /* conv2d: dilations (0: 1) and groups (0: 1) */
    int32_t heads, seq;               /* attention: heads; sequence length (rows = batch * seq) */
    int32_t axis, start, end;         /* softmax (-1: the last), concat, slice; negative counts from the end;
                                       * channel_select: the channel axis, and where its channels start in the
                                       * list of every select's channels; conv2d, linear: end is how many input
                                       * channels its weights train on (ratio:R; 0: all) */
    int32_t perm[POET_MAX_DIMS];      /* transpose */
    int32_t flags;                    /* POET_ATTR_* */
    float p;                          /* dropout probability */
    float alpha, beta;                /* clip: min, max; hardsigmoid: slope, offset; leaky_relu, elu: alpha */
    float eps, momentum;              /* batch and layer norm (0: 1e-5; 0: 0.1, PyTorch's) */
} poet_attrs;

typedef struct poet_node {
    char name[POET_NAME_BYTES];
    poet_op op;
    int n_inputs;
    int inputs[POET_MAX_INPUTS]; /* tensors this node reads: its edges */
    int fwd;                     /* POET_OP_GRAD: forward node; otherwise -1 */
    int wrt;                     /* POET_OP_GRAD: input of fwd, or POET_GRAD_PARAMS_ONLY */
    poet_attrs attrs;
    poet_shape shape;            /* of the output tensor */
    uint64_t bytes;              /* of the output tensor */
    double flops;                /* POET's FLOP convention, see docs/graph.md */
    uint64_t params;             /* trainable parameters owned by this node */
    uint64_t buffers;            /* non-trainable state (batch-norm running stats) */
} poet_node;

typedef struct poet_graph {
    char model[POET_NAME_BYTES];
    int batch;
    int elem_bytes;   /* bytes per element: 4 (float32) */
    int n_nodes;
    int cap;
    poet_node *nodes; /* topological order; forward nodes first, then backward */
    int n_forward;    /* nodes [0, n_forward) are the forward pass and the loss */
    int loss;         /* index of the loss node, -1 before autodiff */
    poet_err err;     /* first error of the builder; sticky */
} poet_graph;

const char *poet_op_name(poet_op op);
/* Returns POET_OP_COUNT when the name is unknown. */
poet_op poet_op_from_name(const char *name);
/* True for ops whose output gradient is simply passed to their inputs
 * (add, flatten), so that autodiff emits no node for them. */
bool poet_op_grad_is_alias(poet_op op);

/* A node's parameters are one or two tensors: its weights (conv, linear),
 * gamma (norms) or parameter operand, then its bias or beta. */
static inline void poet_param_split(poet_op op, const poet_attrs *a, uint64_t params, uint64_t *weights,
                                    uint64_t *bias)
{
    uint64_t b = 0;
    if ((op == POET_OP_CONV2D || op == POET_OP_LINEAR) && !(a->flags & POET_ATTR_NO_BIAS)) b = (uint64_t)a->features;
    if (op == POET_OP_BATCHNORM2D || op == POET_OP_LAYERNORM) b = params / 2;
    if (b > params) b = 0;
    *weights = params - b;
    *bias = b;
}

/* A convolution's or linear layer's weights as a matrix: one row per
 * output channel or feature (row-major in the parameters), each row the
 * weights it reads (inputs per group x kernel height x width). False for
 * other nodes. */
static inline bool poet_weight_rows(const poet_node *n, uint64_t *rows, uint64_t *cols)
{
    uint64_t w, b;
    if ((n->op != POET_OP_CONV2D && n->op != POET_OP_LINEAR) || n->attrs.features <= 0) return false;
    poet_param_split(n->op, &n->attrs, n->params, &w, &b);
    *rows = (uint64_t)n->attrs.features, *cols = w / *rows;
    return *cols > 0;
}

/* Of a conv's or linear layer's weight row, the weights that read one
 * input channel: the kernel (kh x kw), or 1. */
static inline uint64_t poet_channel_block(poet_op op, const poet_attrs *a)
{
    return op == POET_OP_CONV2D ? (uint64_t)a->kh * (uint64_t)a->kw : 1;
}

/* The same split counting only what trains: 0 for a tensor the
 * POET_ATTR_FREEZE_* flags freeze; of a conv's or linear layer's weights
 * that train on a.end input channels (ratio:R), those. Gradients and
 * optimizer state hold the trained weights (row by row, a row's trained
 * channels in the order of the image's list), then the trained bias. */
static inline void poet_param_trained_split(poet_op op, const poet_attrs *a, uint64_t params, uint64_t *weights,
                                            uint64_t *bias)
{
    poet_param_split(op, a, params, weights, bias);
    uint64_t block = poet_channel_block(op, a);
    bool layer = op == POET_OP_CONV2D || op == POET_OP_LINEAR;
    if (layer && a->end > 0 && a->features > 0 && block) *weights = (uint64_t)a->features * (uint64_t)a->end * block;
    if (a->flags & POET_ATTR_FREEZE_WEIGHTS) *weights = 0;
    if (a->flags & POET_ATTR_FREEZE_BIAS) *bias = 0;
}

/* Of a node's parameters, those that train. */
static inline uint64_t poet_param_trained(poet_op op, const poet_attrs *a, uint64_t params)
{
    uint64_t w, b;
    poet_param_trained_split(op, a, params, &w, &b);
    return w + b;
}

uint64_t poet_shape_numel(const poet_shape *s);

#ifdef __cplusplus
}
#endif
#endif
