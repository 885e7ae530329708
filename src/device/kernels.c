/* The device library's kernel dispatch: each op's kernels, forward and backward
 * (see kernels.h; the kernels by op family: kernel_ops.h). */
#include "kernel_ops.h"

/* ---- dispatch ---- */

static void grad_sum(const kernel_ctx *c)
{
    idx total = numel(c->n);
    copy_forward(c, c->in[0]);
    for (int k = 1; k < c->n->n_inputs; k++)
        for (idx i = 0; i < total; i++) c->out[i] += c->in[k][i];
}

static void input_forward(const kernel_ctx *c) { copy_forward(c, c->batch_x); }
static void pass_forward(const kernel_ctx *c) { copy_forward(c, c->in[0]); }
static void maxpool_forward(const kernel_ctx *c) { pool_forward(c, true); }
static void maxpool_backward(const kernel_ctx *c) { pool_backward(c, true); }
static void avgpool_forward(const kernel_ctx *c) { pool_forward(c, false); }
static void avgpool_backward(const kernel_ctx *c) { pool_backward(c, false); }

typedef void (*kernel_fn)(const kernel_ctx *);

/* Each forward op's kernels, forward and backward, in one row, so that an op
 * joins in one place. No backward kernel: flatten and reshape pass dY on as
 * it is (the training graph has no grad node for them). */
static const struct {
    kernel_fn forward, backward;
} kernels[POET_OP_COUNT] = {
    [POET_OP_INPUT] = {input_forward, NULL},
    [POET_OP_CONV2D] = {conv_forward, conv_backward},
    [POET_OP_BATCHNORM2D] = {batchnorm_forward, batchnorm_backward},
    [POET_OP_MAXPOOL2D] = {maxpool_forward, maxpool_backward},
    [POET_OP_AVGPOOL2D] = {avgpool_forward, avgpool_backward},
    [POET_OP_GLOBAL_AVGPOOL] = {global_avgpool_forward, global_avgpool_backward},
    [POET_OP_ADD] = {binary_forward, binary_backward},
    [POET_OP_SUB] = {binary_forward, binary_backward},
    [POET_OP_MUL] = {binary_forward, binary_backward},
    [POET_OP_DIV] = {binary_forward, binary_backward},
    [POET_OP_FLATTEN] = {pass_forward, NULL},
    [POET_OP_RESHAPE] = {pass_forward, NULL},
    [POET_OP_LINEAR] = {linear_forward, linear_backward},
    [POET_OP_DROPOUT] = {dropout_forward, dropout_backward},
    [POET_OP_SOFTMAX_CE] = {softmax_ce_forward, softmax_ce_backward},
    [POET_OP_LAYERNORM] = {layernorm_forward, layernorm_backward},
    [POET_OP_SOFTMAX] = {softmax_forward, softmax_backward},
    [POET_OP_ATTN_SCORES] = {attn_scores_forward, attn_scores_backward},
    [POET_OP_ATTN_CONTEXT] = {attn_context_forward, attn_context_backward},
    [POET_OP_MATMUL] = {matmul_forward, matmul_backward},
    [POET_OP_TRANSPOSE] = {transpose_forward, transpose_backward},
    [POET_OP_CONCAT] = {concat_forward, concat_backward},
    [POET_OP_SLICE] = {slice_forward, slice_backward},
    [POET_OP_UPSAMPLE2D] = {upsample2d_forward, upsample2d_backward},
    [POET_OP_RELU] = {unary_run_forward, unary_run_backward},
    [POET_OP_RELU_MASK] = {relu_mask_forward, NULL},
    [POET_OP_CHANNEL_SELECT] = {channel_select_forward, NULL},
    [POET_OP_POOL_INDEX] = {pool_index_forward, NULL},
    [POET_OP_GELU] = {unary_run_forward, unary_run_backward},
    [POET_OP_SIGMOID] = {unary_run_forward, unary_run_backward},
    [POET_OP_TANH] = {unary_run_forward, unary_run_backward},
    [POET_OP_ERF] = {unary_run_forward, unary_run_backward},
    [POET_OP_HARDSIGMOID] = {unary_run_forward, unary_run_backward},
    [POET_OP_HARDSWISH] = {unary_run_forward, unary_run_backward},
    [POET_OP_CLIP] = {unary_run_forward, unary_run_backward},
    [POET_OP_LEAKY_RELU] = {unary_run_forward, unary_run_backward},
    [POET_OP_SOFTPLUS] = {unary_run_forward, unary_run_backward},
    [POET_OP_PRELU] = {prelu_forward, prelu_backward},
    [POET_OP_ELU] = {unary_run_forward, unary_run_backward},
};

/* The kernel of a node: a forward op's own, a grad node's its forward op's
 * backward, or the sum of gradient contributions. */
static kernel_fn kernel_of(const kernel_ctx *c)
{
    int op = c->n->op;
    if (op == POET_OP_GRAD_SUM) return grad_sum;
    bool grad = op == POET_OP_GRAD;
    if (grad) op = fwd_of(c)->op;
    if (op >= POET_OP_COUNT) return NULL;
    return grad ? kernels[op].backward : kernels[op].forward;
}

bool kernel_run(const kernel_ctx *c)
{
    kernel_fn run = kernel_of(c);
    if (run) run(c);
    return run != NULL;
}

