/* Small graphs that together use every op the runtime executes, each with a
 * parameter before it so that its input gradient matters to the loss. */
#ifndef POET_TESTS_GRAPHS_H
#define POET_TESTS_GRAPHS_H

#include "poet/poet.h"

enum { N_TEST_GRAPHS = 6 };

static int tg_add(poet_graph *g, poet_op op, int a, int b, poet_attrs at)
{
    int in[2] = {a, b};
    return poet_graph_add(g, op, in, a < 0 ? 0 : b < 0 ? 1 : 2, &at, NULL);
}

/* conv (stride 1 and 2, padding), batch norm, relu, max and average pool,
 * flatten, linear, dropout, softmax cross-entropy */
static int tg_cnn(poet_graph *g)
{
    poet_attrs none = {0};
    int x = tg_add(g, POET_OP_INPUT, -1, -1, (poet_attrs){.ndim = 4, .dim = {4, 2, 6, 6}});
    x = tg_add(g, POET_OP_CONV2D, x, -1, (poet_attrs){.features = 3, .kernel = 3, .stride = 1, .pad = 1});
    x = tg_add(g, POET_OP_BATCHNORM2D, x, -1, none);
    x = tg_add(g, POET_OP_RELU, x, -1, none);
    x = tg_add(g, POET_OP_MAXPOOL2D, x, -1, (poet_attrs){.kernel = 2, .stride = 2});
    x = tg_add(g, POET_OP_CONV2D, x, -1, (poet_attrs){.features = 4, .kernel = 3, .stride = 2, .pad = 1});
    x = tg_add(g, POET_OP_AVGPOOL2D, x, -1, (poet_attrs){.kernel = 2, .stride = 1});
    x = tg_add(g, POET_OP_FLATTEN, x, -1, none);
    x = tg_add(g, POET_OP_LINEAR, x, -1, (poet_attrs){.features = 5});
    x = tg_add(g, POET_OP_DROPOUT, x, -1, (poet_attrs){.p = 0.3f});
    x = tg_add(g, POET_OP_LINEAR, x, -1, (poet_attrs){.features = 3});
    return tg_add(g, POET_OP_SOFTMAX_CE, x, -1, none);
}

/* add with equal shapes and with a zero-padded second input, global pool */
static int tg_residual(poet_graph *g)
{
    poet_attrs none = {0};
    int x = tg_add(g, POET_OP_INPUT, -1, -1, (poet_attrs){.ndim = 4, .dim = {4, 2, 4, 4}});
    int a = tg_add(g, POET_OP_RELU, tg_add(g, POET_OP_CONV2D, x, -1, (poet_attrs){.features = 4, .kernel = 3, .stride = 1, .pad = 1}), -1, none);
    int b = tg_add(g, POET_OP_CONV2D, a, -1, (poet_attrs){.features = 2, .kernel = 1, .stride = 1});
    int s = tg_add(g, POET_OP_ADD, a, b, none);
    int c = tg_add(g, POET_OP_CONV2D, s, -1, (poet_attrs){.features = 4, .kernel = 3, .stride = 1, .pad = 1});
    int t = tg_add(g, POET_OP_ADD, s, c, none);
    int p = tg_add(g, POET_OP_GLOBAL_AVGPOOL, t, -1, none);
    return tg_add(g, POET_OP_SOFTMAX_CE, tg_add(g, POET_OP_LINEAR, p, -1, (poet_attrs){.features = 3}), -1, none);
}

/* attention (scores, softmax, context), layer norm, gelu */
static int tg_attention(poet_graph *g)
{
    poet_attrs none = {0}, at = {.heads = 2, .seq = 4};
    int x = tg_add(g, POET_OP_INPUT, -1, -1, (poet_attrs){.ndim = 2, .dim = {8, 6}});
    int h = tg_add(g, POET_OP_LINEAR, x, -1, (poet_attrs){.features = 6});
    int q = tg_add(g, POET_OP_LINEAR, h, -1, (poet_attrs){.features = 6});
    int k = tg_add(g, POET_OP_LINEAR, h, -1, (poet_attrs){.features = 6});
    int v = tg_add(g, POET_OP_LINEAR, h, -1, (poet_attrs){.features = 6});
    int p = tg_add(g, POET_OP_SOFTMAX, tg_add(g, POET_OP_ATTN_SCORES, q, k, at), -1, (poet_attrs){.axis = -1});
    int o = tg_add(g, POET_OP_LINEAR, tg_add(g, POET_OP_ATTN_CONTEXT, p, v, at), -1, (poet_attrs){.features = 6});
    int n = tg_add(g, POET_OP_LAYERNORM, tg_add(g, POET_OP_ADD, h, o, none), -1, none);
    int f = tg_add(g, POET_OP_LINEAR, tg_add(g, POET_OP_GELU, n, -1, none), -1, (poet_attrs){.features = 3});
    return tg_add(g, POET_OP_SOFTMAX_CE, f, -1, none);
}

/* The ops ONNX brings: a grouped, dilated, asymmetrically padded conv, a
 * depthwise conv without bias, padded pools (max; average counting the
 * padding), hardswish, batch norm with its own eps and momentum, clip,
 * nearest upsampling by 2 x 3, a per-channel scale as a parameter, global
 * pooling that keeps its dimensions, reshape. */
static int tg_cnn_onnx(poet_graph *g)
{
    poet_attrs none = {0};
    int x = tg_add(g, POET_OP_INPUT, -1, -1, (poet_attrs){.ndim = 4, .dim = {2, 4, 7, 7}});
    x = tg_add(g, POET_OP_CONV2D, x, -1,
               (poet_attrs){.features = 6, .kh = 3, .kw = 2, .sh = 1, .sw = 2, .pt = 1, .pb = 2, .pr = 1, .dh = 1, .dw = 2,
                            .groups = 2});
    x = tg_add(g, POET_OP_MAXPOOL2D, x, -1, (poet_attrs){.kh = 3, .kw = 2, .sh = 2, .sw = 1, .pt = 1, .pl = 1, .pb = 1});
    x = tg_add(g, POET_OP_HARDSWISH, x, -1, none);
    x = tg_add(g, POET_OP_AVGPOOL2D, x, -1,
               (poet_attrs){.kh = 2, .kw = 2, .sh = 1, .sw = 1, .pt = 1, .pl = 1, .flags = POET_ATTR_COUNT_PAD});
    x = tg_add(g, POET_OP_BATCHNORM2D, x, -1, (poet_attrs){.eps = 1e-3f, .momentum = 0.3f});
    x = tg_add(g, POET_OP_CLIP, x, -1, (poet_attrs){.alpha = -0.5f, .beta = 0.8f});
    x = tg_add(g, POET_OP_CONV2D, x, -1, (poet_attrs){.features = 6, .kernel = 3, .stride = 1, .pad = 1, .groups = 6,
                                                      .flags = POET_ATTR_NO_BIAS});
    x = tg_add(g, POET_OP_UPSAMPLE2D, x, -1, (poet_attrs){.sh = 2, .sw = 3});
    x = tg_add(g, POET_OP_MUL, x, -1, (poet_attrs){.ndim = 3, .dim = {6, 1, 1}, .flags = POET_ATTR_OPERAND_PARAM});
    x = tg_add(g, POET_OP_GLOBAL_AVGPOOL, x, -1, (poet_attrs){.flags = POET_ATTR_KEEPDIMS});
    x = tg_add(g, POET_OP_RESHAPE, x, -1, (poet_attrs){.ndim = 2, .dim = {2, 6}});
    x = tg_add(g, POET_OP_LINEAR, x, -1, (poet_attrs){.features = 3});
    return tg_add(g, POET_OP_SOFTMAX_CE, x, -1, none);
}

/* Sequences: linear over 3-d input, constant and parameter operands
 * (broadcast, one of them left), sigmoid, transpose, batched matmul,
 * softmax off the last axis, erf, tanh, slice, broadcast sub, hardsigmoid,
 * concat, a trained parameter concatenated before the tokens (ViT's class
 * token), exact gelu, layer norm without affine, a product of two
 * activations, reshape. */
static int tg_seq_onnx(poet_graph *g)
{
    poet_attrs none = {0};
    int x = tg_add(g, POET_OP_INPUT, -1, -1, (poet_attrs){.ndim = 3, .dim = {2, 3, 4}});
    int h = tg_add(g, POET_OP_LINEAR, x, -1, (poet_attrs){.features = 5});
    int c = tg_add(g, POET_OP_ADD, h, -1, (poet_attrs){.ndim = 1, .dim = {5}, .flags = POET_ATTR_OPERAND_CONST});
    int s = tg_add(g, POET_OP_SIGMOID, c, -1, none);
    int t = tg_add(g, POET_OP_TRANSPOSE, s, -1, (poet_attrs){.perm = {0, 2, 1}});
    int m = tg_add(g, POET_OP_MATMUL, h, t, none);
    int p = tg_add(g, POET_OP_SOFTMAX, m, -1, (poet_attrs){.axis = 1});
    int q = tg_add(g, POET_OP_MATMUL, p, h, none);
    int th = tg_add(g, POET_OP_TANH, tg_add(g, POET_OP_ERF, q, -1, none), -1, none);
    int sl = tg_add(g, POET_OP_SLICE, th, -1, (poet_attrs){.axis = 1, .start = 0, .end = 1});
    int d = tg_add(g, POET_OP_SUB, th, sl, none);
    int dv = tg_add(g, POET_OP_DIV, s, -1,
                    (poet_attrs){.ndim = 2, .dim = {1, 5}, .flags = POET_ATTR_OPERAND_PARAM | POET_ATTR_OPERAND_LEFT});
    int hs = tg_add(g, POET_OP_HARDSIGMOID, dv, -1, (poet_attrs){.alpha = 0.2f, .beta = 0.5f});
    int in2[2] = {d, hs};
    int cat = poet_graph_add(g, POET_OP_CONCAT, in2, 2, &(poet_attrs){.axis = 2}, NULL);
    int tok = tg_add(g, POET_OP_CONCAT, cat, -1,
                     (poet_attrs){.axis = 1, .ndim = 3, .dim = {1, 1, 10},
                                  .flags = POET_ATTR_OPERAND_PARAM | POET_ATTR_OPERAND_LEFT});
    int ge = tg_add(g, POET_OP_GELU, tok, -1, (poet_attrs){.flags = POET_ATTR_GELU_ERF});
    int ln = tg_add(g, POET_OP_LAYERNORM, ge, -1, (poet_attrs){.flags = POET_ATTR_NO_AFFINE});
    int mm = tg_add(g, POET_OP_MUL, ln, ge, none);
    int r = tg_add(g, POET_OP_RESHAPE, mm, -1, (poet_attrs){.ndim = 2, .dim = {8, 10}});
    return tg_add(g, POET_OP_SOFTMAX_CE, tg_add(g, POET_OP_LINEAR, r, -1, (poet_attrs){.features = 4}), -1, none);
}

/* One-dimensional windows over [N, C, L] (time series, audio): a padded
 * conv, batch norm, relu, a max pool, a strided dilated grouped conv, leaky
 * relu, softplus, elu, prelu with a slope per channel, an average pool
 * counting its padding, global pooling that keeps its dimensions, linear. */
static int tg_cnn1d(poet_graph *g)
{
    poet_attrs none = {0};
    int x = tg_add(g, POET_OP_INPUT, -1, -1, (poet_attrs){.ndim = 3, .dim = {2, 3, 17}});
    x = tg_add(g, POET_OP_CONV2D, x, -1, (poet_attrs){.features = 4, .kh = 1, .kw = 5, .sh = 1, .sw = 1, .pl = 2, .pr = 1});
    x = tg_add(g, POET_OP_BATCHNORM2D, x, -1, none);
    x = tg_add(g, POET_OP_RELU, x, -1, none);
    x = tg_add(g, POET_OP_MAXPOOL2D, x, -1, (poet_attrs){.kh = 1, .kw = 3, .sh = 1, .sw = 2, .pl = 1});
    x = tg_add(g, POET_OP_CONV2D, x, -1,
               (poet_attrs){.features = 6, .kh = 1, .kw = 3, .sh = 1, .sw = 2, .pl = 1, .pr = 1, .dh = 1, .dw = 2,
                            .groups = 2});
    x = tg_add(g, POET_OP_LEAKY_RELU, x, -1, (poet_attrs){.alpha = 0.1f});
    x = tg_add(g, POET_OP_ELU, tg_add(g, POET_OP_SOFTPLUS, x, -1, none), -1, (poet_attrs){.alpha = 0.7f});
    x = tg_add(g, POET_OP_PRELU, x, -1, (poet_attrs){.ndim = 2, .dim = {6, 1}});
    x = tg_add(g, POET_OP_AVGPOOL2D, x, -1,
               (poet_attrs){.kh = 1, .kw = 2, .sh = 1, .sw = 1, .pl = 1, .flags = POET_ATTR_COUNT_PAD});
    x = tg_add(g, POET_OP_GLOBAL_AVGPOOL, x, -1, (poet_attrs){.flags = POET_ATTR_KEEPDIMS});
    x = tg_add(g, POET_OP_RESHAPE, x, -1, (poet_attrs){.ndim = 2, .dim = {2, 6}});
    x = tg_add(g, POET_OP_LINEAR, x, -1, (poet_attrs){.features = 3});
    return tg_add(g, POET_OP_SOFTMAX_CE, x, -1, none);
}

static const char *test_graph_name(int k)
{
    static const char *names[N_TEST_GRAPHS] = {"cnn", "residual", "attention", "cnn_onnx", "seq_onnx", "cnn1d"};
    return names[k];
}

static poet_status test_graph_build(int k, poet_graph *g, poet_err *err)
{
    static int (*const build[N_TEST_GRAPHS])(poet_graph *) = {tg_cnn, tg_residual, tg_attention, tg_cnn_onnx,
                                                              tg_seq_onnx, tg_cnn1d};
    poet_status st = poet_graph_init(g, test_graph_name(k), 4, err);
    if (st) return st;
    int loss = build[k](g);
    if (loss < 0) {
        st = poet_fail(err, g->err.status, "%s", g->err.msg);
        poet_graph_free(g);
        return st;
    }
    if ((st = poet_graph_autodiff(g, loss, err))) poet_graph_free(g);
    return st;
}

#endif
