/* The device library's kernel dispatch: each op's kernels, forward and backward
 * (see kernels.h; the kernels by op family: kernel_ops.h). */
#include "kernel_ops.h"

/* ---- dispatch ---- */

static void grad_sum(const kernel_ctx *c)
{
    idx total = knode_numel(c->n);
    kernel_copy_forward(c, c->in[0]);
    for (int k = 1; k < c->n->n_inputs; k++)
        for (idx i = 0; i < total; i++) c->out[i] += c->in[k][i];
}

static void input_forward(const kernel_ctx *c) { kernel_copy_forward(c, c->batch_x); }
static void pass_forward(const kernel_ctx *c) { kernel_copy_forward(c, c->in[0]); }
static void maxpool_forward(const kernel_ctx *c) { kernel_pool_forward(c, true); }
static void maxpool_backward(const kernel_ctx *c) { kernel_pool_backward(c, true); }
static void avgpool_forward(const kernel_ctx *c) { kernel_pool_forward(c, false); }
static void avgpool_backward(const kernel_ctx *c) { kernel_pool_backward(c, false); }

typedef void (*kernel_fn)(const kernel_ctx *);

/* Each forward op's kernels, forward and backward, in one row, so that an op
 * joins in one place. No backward kernel: flatten and reshape pass dY on as
 * it is (the training graph has no grad node for them). */
static const struct {
    kernel_fn forward, backward;
} kernels[POET_OP_COUNT] = {
    [POET_OP_INPUT] = {input_forward, NULL},
    [POET_OP_CONV2D] = {kernel_conv_forward, kernel_conv_backward},
    [POET_OP_BATCHNORM2D] = {kernel_batchnorm_forward, kernel_batchnorm_backward},
    [POET_OP_MAXPOOL2D] = {maxpool_forward, maxpool_backward},
    [POET_OP_AVGPOOL2D] = {avgpool_forward, avgpool_backward},
    [POET_OP_GLOBAL_AVGPOOL] = {kernel_global_avgpool_forward, kernel_global_avgpool_backward},
    [POET_OP_ADD] = {kernel_binary_forward, kernel_binary_backward},
    [POET_OP_SUB] = {kernel_binary_forward, kernel_binary_backward},
    [POET_OP_MUL] = {kernel_binary_forward, kernel_binary_backward},
    [POET_OP_DIV] = {kernel_binary_forward, kernel_binary_backward},
    [POET_OP_FLATTEN] = {pass_forward, NULL},
    [POET_OP_RESHAPE] = {pass_forward, NULL},
    [POET_OP_LINEAR] = {kernel_linear_forward, kernel_linear_backward},
    [POET_OP_DROPOUT] = {kernel_dropout_forward, kernel_dropout_backward},
    [POET_OP_SOFTMAX_CE] = {kernel_softmax_ce_forward, kernel_softmax_ce_backward},
    [POET_OP_LAYERNORM] = {kernel_layernorm_forward, kernel_layernorm_backward},
    [POET_OP_SOFTMAX] = {kernel_softmax_forward, kernel_softmax_backward},
    [POET_OP_ATTN_SCORES] = {kernel_attn_scores_forward, kernel_attn_scores_backward},
    [POET_OP_ATTN_CONTEXT] = {kernel_attn_context_forward, kernel_attn_context_backward},
    [POET_OP_MATMUL] = {kernel_matmul_forward, kernel_matmul_backward},
    [POET_OP_TRANSPOSE] = {kernel_transpose_forward, kernel_transpose_backward},
    [POET_OP_CONCAT] = {kernel_concat_forward, kernel_concat_backward},
    [POET_OP_SLICE] = {kernel_slice_forward, kernel_slice_backward},
    [POET_OP_UPSAMPLE2D] = {kernel_upsample2d_forward, kernel_upsample2d_backward},
    [POET_OP_RELU] = {kernel_unary_run_forward, kernel_unary_run_backward},
    [POET_OP_RELU_MASK] = {kernel_relu_mask_forward, NULL},
    [POET_OP_CHANNEL_SELECT] = {kernel_channel_select_forward, NULL},
    [POET_OP_POOL_INDEX] = {kernel_pool_index_forward, NULL},
    [POET_OP_GELU] = {kernel_unary_run_forward, kernel_unary_run_backward},
    [POET_OP_SIGMOID] = {kernel_unary_run_forward, kernel_unary_run_backward},
    [POET_OP_TANH] = {kernel_unary_run_forward, kernel_unary_run_backward},
    [POET_OP_ERF] = {kernel_unary_run_forward, kernel_unary_run_backward},
    [POET_OP_HARDSIGMOID] = {kernel_unary_run_forward, kernel_unary_run_backward},
    [POET_OP_HARDSWISH] = {kernel_unary_run_forward, kernel_unary_run_backward},
    [POET_OP_CLIP] = {kernel_unary_run_forward, kernel_unary_run_backward},
    [POET_OP_LEAKY_RELU] = {kernel_unary_run_forward, kernel_unary_run_backward},
    [POET_OP_SOFTPLUS] = {kernel_unary_run_forward, kernel_unary_run_backward},
    [POET_OP_PRELU] = {kernel_prelu_forward, kernel_prelu_backward},
    [POET_OP_ELU] = {kernel_unary_run_forward, kernel_unary_run_backward},
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

