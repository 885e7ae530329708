/* ONNX in, by op family: batch, layer and instance norm, and the ReduceMean patterns that are layer norms. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "importer.h"

poet_status im_map_batchnorm(importer *im, const Onnx__NodeProto *np)
{
    /* training_mode 1 or 0: poet trains with batch statistics and infers with running ones either way */
    for (int k = 1; k < (int)np->n_output; k++)
        if (np->output[k] && *np->output[k] && im_find(im, np->output[k]) >= 0 && im->uses[im_find(im, np->output[k])])
            return im_refuse(im, np, "its running mean and variance outputs are not supported");
    int x = im_activation(im, np, 0);
    const value *w[4];
    for (int j = 1; j <= 4 && x >= 0; j++)
        if (!(w[j - 1] = im_known_value(im, np, j))) return im->err->status;
    if (x < 0) return im->err->status;
    poet_attrs a = {.eps = attr_float(np, "epsilon", 1e-5f), .momentum = 1.0f - attr_float(np, "momentum", 0.9f)};
    if (a.momentum == 0) a.momentum = 1e-7f; /* 0 means "the default" to the registry; ONNX's momentum 1 freezes */
    int v = im_add_node(im, POET_OP_BATCHNORM2D, &x, 1, &a, np->output[0]);
    if (v < 0) return im->err->status;
    uint64_t c = (uint64_t)im_shape_of(im, x)->dim[1];
    for (int j = 0; j < 4; j++)
        if (w[j]->t.n != c) return im_refuse(im, np, "scale, bias, mean and variance need one value per channel");
    poet_status st;
    if ((st = im_fill(im, w[0], false, 0, 0, 0)) || (st = im_fill(im, w[1], false, c, 0, 0)) ||
        (st = im_fill(im, w[2], true, 0, 0, 0)) || (st = im_fill(im, w[3], true, c, 0, 0)))
        return st;
    return im_name_output(im, np, 0, v);
}

/* LayerNormalization (opset 17), or the pattern PyTorch exports it as below
 * opset 17: ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div, then an
 * optional Mul by the scale and Add of the bias. */
static poet_status add_layernorm(importer *im, const Onnx__NodeProto *np, int x, float eps, const value *gamma,
                                 const value *beta, const Onnx__NodeProto *named)
{
    const poet_shape *xs = im_shape_of(im, x);
    uint64_t d = (uint64_t)xs->dim[xs->ndim - 1];
    if ((gamma && gamma->t.n != d) || (beta && beta->t.n != d))
        return im_refuse(im, np, "scale and bias need one value per element of the last dimension");
    poet_attrs a = {.eps = eps, .flags = gamma ? 0 : POET_ATTR_NO_AFFINE};
    int v = im_add_node(im, POET_OP_LAYERNORM, &x, 1, &a, named->output[0]);
    if (v < 0) return im->err->status;
    poet_status st = POET_OK;
    if (gamma) st = im_fill(im, gamma, false, 0, 0, 0);
    if (!st && gamma && beta) st = im_fill(im, beta, false, d, 0, 0); /* a missing beta stays 0 */
    return st ? st : im_name_output(im, named, 0, v);
}

poet_status im_map_layernorm(importer *im, const Onnx__NodeProto *np)
{
    if (attr_int(np, "axis", -1) != -1) return im_refuse(im, np, "only axis -1 (the last dimension) is supported");
    int x = im_activation(im, np, 0);
    const value *g = x < 0 ? NULL : im_known_value(im, np, 1);
    if (!g) return im->err->status;
    const value *b = im_input_name(np, 2) ? im_known_value(im, np, 2) : NULL;
    return add_layernorm(im, np, x, attr_float(np, "epsilon", 1e-5f), g, b, np);
}

/* x times (op mul) or plus (add) a per-channel tensor t, [C] as [C, 1...]
 * against x's channel axis; trained where t is an initializer, as
 * everywhere. Nothing where t is a constant 1 (mul) or 0 (add). */
static int per_channel(importer *im, const Onnx__NodeProto *np, int x, poet_op op, const value *t, const char *suffix)
{
    const value *trained = im_trained_tensor(im, t);
    bool trivial = !trained;
    for (uint64_t k = 0; trivial && k < t->t.n; k++) trivial = tensor_real(&t->t, k) == (op == POET_OP_MUL ? 1 : 0);
    if (trivial) return x;
    const poet_shape *s = im_shape_of(im, x);
    if (t->t.n != (uint64_t)s->dim[1]) return im_refuse(im, np, "its scale and bias need one value per channel"), -1;
    poet_attrs a = {.ndim = s->ndim - 1, .dim = {(int32_t)s->dim[1], 1, 1},
                    .flags = trained ? POET_ATTR_OPERAND_PARAM : POET_ATTR_OPERAND_CONST};
    int v = im_add_step(im, np, op, x, &a, suffix);
    return v < 0 || im_fill(im, trained ? trained : t, !trained, 0, 0, 0) ? -1 : v;
}

/* InstanceNormalization: each (image, channel) normalized over the rest,
 * which is how PyTorch exports GroupNorm (between reshapes to [N, G, rest],
 * with a constant scale 1 and bias 0, its affine after it as Mul and Add):
 * a layer norm over the last dimension of [N, C, rest], reshaped to it and
 * back where the rest has more than one dimension; then its scale and bias. */
poet_status im_map_instancenorm(importer *im, const Onnx__NodeProto *np)
{
    int x = im_activation(im, np, 0);
    const value *scale = x < 0 ? NULL : im_known_value(im, np, 1), *bias = scale ? im_known_value(im, np, 2) : NULL;
    if (!bias) return im->err->status;
    poet_shape s = *im_shape_of(im, x);
    if (s.ndim < 3) return im_refuse(im, np, "its input has no dimension to normalize over");
    int cur = x;
    if (s.ndim > 3) {
        poet_attrs flat = {.ndim = 3, .dim = {(int32_t)s.dim[0], (int32_t)s.dim[1], (int32_t)(s.dim[2] * s.dim[3])}};
        if ((cur = im_add_step(im, np, POET_OP_RESHAPE, cur, &flat, "rows")) < 0) return im->err->status;
    }
    poet_attrs norm = {.eps = attr_float(np, "epsilon", 1e-5f), .flags = POET_ATTR_NO_AFFINE};
    if ((cur = im_add_step(im, np, POET_OP_LAYERNORM, cur, &norm, "norm")) < 0) return im->err->status;
    if (s.ndim > 3) {
        poet_attrs back = {.ndim = 4};
        for (int k = 0; k < 4; k++) back.dim[k] = (int32_t)s.dim[k];
        if ((cur = im_add_step(im, np, POET_OP_RESHAPE, cur, &back, "back")) < 0) return im->err->status;
    }
    if ((cur = per_channel(im, np, cur, POET_OP_MUL, scale, "scale")) < 0) return im->err->status;
    if ((cur = per_channel(im, np, cur, POET_OP_ADD, bias, "bias")) < 0) return im->err->status;
    return im_name_output(im, np, 0, cur);
}

/* The node after `from` that reads `name` as input `slot`, with op `op`. */
static int next_reader(const importer *im, int from, const char *name, const char *op)
{
    for (int k = from + 1; k < (int)im->gp->n_node; k++) {
        const Onnx__NodeProto *n = im->gp->node[k];
        for (size_t j = 0; j < n->n_input; j++)
            if (n->input[j] && strcmp(n->input[j], name) == 0) return onnx_is_op(n, op) ? k : -1;
    }
    return -1;
}

static bool reduces_last(const Onnx__NodeProto *n, int rank)
{
    int na;
    const int64_t *axes = attr_ints(n, "axes", &na);
    return na == 1 && (axes[0] == -1 || axes[0] == rank - 1) && attr_int(n, "keepdims", 1) == 1;
}

static const value *known_operand(importer *im, const Onnx__NodeProto *n, const char *activation_name)
{
    for (int j = 0; j < 2 && j < (int)n->n_input; j++) {
        if (n->input[j] && strcmp(n->input[j], activation_name) == 0) continue;
        int v = im_find(im, n->input[j]);
        return v >= 0 && im->vals[v].known ? &im->vals[v] : NULL;
    }
    return NULL;
}

/* ReduceMean over H and W of N, C, H, W, or over L of N, C, L: a global
 * average pool. */
static bool spatial_mean(const Onnx__NodeProto *np, int rank)
{
    int na;
    const int64_t *axes = attr_ints(np, "axes", &na);
    if (rank == 3 && na == 1) return axes[0] == 2 || axes[0] == -1;
    if (rank != 4 || na != 2) return false;
    int64_t a = axes[0] < 0 ? axes[0] + 4 : axes[0], b = axes[1] < 0 ? axes[1] + 4 : axes[1];
    return (a == 2 && b == 3) || (a == 3 && b == 2);
}

/* ReduceMean over one axis other than a pool's (mean pooling over a
 * sequence's tokens, x.mean(1)): that axis moved last, the others made one,
 * a global average pool over it, then the shape ONNX gives the mean. */
static poet_status map_mean_axis(importer *im, const Onnx__NodeProto *np, int x)
{
    int na;
    const int64_t *axes = attr_ints(np, "axes", &na);
    poet_shape s = *im_shape_of(im, x);
    int64_t a = na == 1 ? (axes[0] < 0 ? axes[0] + s.ndim : axes[0]) : -1;
    if (a < 0 || a >= s.ndim || s.ndim < 2)
        return im_refuse(im, np, "ReduceMean is supported over one axis, over H and W (a global average pool), or as "
                              "the start of a layer norm");
    int cur = x;
    if (a != s.ndim - 1) {
        poet_attrs t = {0};
        for (int k = 0, j = 0; k < s.ndim; k++)
            if (k != a) t.perm[j++] = k;
        t.perm[s.ndim - 1] = (int32_t)a;
        if ((cur = im_add_step(im, np, POET_OP_TRANSPOSE, cur, &t, "last")) < 0) return im->err->status;
    }
    poet_attrs rows = {.ndim = 3, .dim = {1, (int32_t)(poet_shape_numel(&s) / (uint64_t)s.dim[a]), (int32_t)s.dim[a]}};
    if ((cur = im_add_step(im, np, POET_OP_RESHAPE, cur, &rows, "rows")) < 0) return im->err->status;
    if ((cur = im_add_step(im, np, POET_OP_GLOBAL_AVGPOOL, cur, NULL, "mean")) < 0) return im->err->status;
    int64_t dims[TENSOR_MAX_DIMS];
    int nd = 0;
    bool keep = attr_int(np, "keepdims", 1);
    for (int k = 0; k < s.ndim; k++)
        if (k != a || keep) dims[nd++] = k == a ? 1 : s.dim[k];
    return im_reshape_to(im, np, cur, dims, nd);
}

poet_status im_map_layernorm_pattern(importer *im, const Onnx__NodeProto *np, int at)
{
    int x = im_activation(im, np, 0);
    if (x < 0) return im->err->status;
    int rank = im_shape_of(im, x)->ndim;
    const char *what = "ReduceMean is supported only over H and W or L (a global average pool) or as the start of a "
                       "layer norm over the last dimension";
    /* the mean over L of [N, C, L] is also over the last dimension: a layer norm where the pattern follows */
    int sub = next_reader(im, at, np->output[0], "Sub");
    bool norm = reduces_last(np, rank) && sub >= 0 && strcmp(im->gp->node[sub]->input[0], np->input[0]) == 0;
    if (!norm && spatial_mean(np, rank))
        return im_map_unary(im, np, POET_OP_GLOBAL_AVGPOOL,
                         &(poet_attrs){.flags = attr_int(np, "keepdims", 1) ? POET_ATTR_KEEPDIMS : 0});
    if (!norm) return map_mean_axis(im, np, x);
    const char *d = im->gp->node[sub]->output[0];
    int pw = next_reader(im, sub, d, "Pow");
    int mean2 = pw < 0 ? -1 : next_reader(im, pw, im->gp->node[pw]->output[0], "ReduceMean");
    int add = mean2 < 0 ? -1 : next_reader(im, mean2, im->gp->node[mean2]->output[0], "Add");
    int sq = add < 0 ? -1 : next_reader(im, add, im->gp->node[add]->output[0], "Sqrt");
    int div = sq < 0 ? -1 : next_reader(im, sq, im->gp->node[sq]->output[0], "Div");
    if (div < 0 || !reduces_last(im->gp->node[mean2], rank) || strcmp(im->gp->node[div]->input[0], d) != 0)
        return im_refuse(im, np, what);
    const value *two = known_operand(im, im->gp->node[pw], d);
    const value *eps = known_operand(im, im->gp->node[add], im->gp->node[mean2]->output[0]);
    if (!two || two->t.n != 1 || tensor_real(&two->t, 0) != 2.0 || !eps || eps->t.n != 1) return im_refuse(im, np, what);
    int steps[] = {at, sub, pw, mean2, add, sq, div};
    for (size_t k = 0; k < sizeof steps / sizeof *steps; k++) im->skip[steps[k]] = true;
    const Onnx__NodeProto *last = im->gp->node[div];
    const value *gamma = NULL, *beta = NULL;
    int mul = next_reader(im, div, last->output[0], "Mul");
    if (mul >= 0 && (gamma = known_operand(im, im->gp->node[mul], last->output[0]))) {
        im->skip[mul] = true;
        last = im->gp->node[mul];
        int badd = next_reader(im, mul, last->output[0], "Add");
        if (badd >= 0 && (beta = known_operand(im, im->gp->node[badd], last->output[0]))) {
            im->skip[badd] = true;
            last = im->gp->node[badd];
        }
    }
    return add_layernorm(im, np, x, (float)tensor_real(&eps->t, 0), gamma, beta, last);
}
