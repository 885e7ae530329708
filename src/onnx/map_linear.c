/* ONNX in, by op family: Gemm and MatMul as linear layers (a bias Add after them fused) or matrix products. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "importer.h"

/* A linear layer from weights kept [out][in] (transposed: [in][out]) and an
 * optional bias of `out` values. */
static poet_status add_linear(importer *im, const Onnx__NodeProto *np, int x, const value *w, bool transposed,
                              const value *bias, const char *out_name, const Onnx__NodeProto *named, int named_output)
{
    if (w->t.ndim != 2 || !w->t.is_float) return im_refuse(im, np, "its weights are not a 2-d float tensor");
    int64_t fin = transposed ? w->t.dims[0] : w->t.dims[1], fout = transposed ? w->t.dims[1] : w->t.dims[0];
    const poet_shape *xs = im_shape_of(im, x);
    if (xs->dim[xs->ndim - 1] != fin) return im_refuse(im, np, "its weights do not fit its input's last dimension");
    if (bias && bias->t.n != (uint64_t)fout) return im_refuse(im, np, "its bias does not have one value per output");
    poet_attrs a = {.features = (int32_t)fout, .flags = bias ? 0 : POET_ATTR_NO_BIAS};
    int v = im_add_node(im, POET_OP_LINEAR, &x, 1, &a, out_name);
    if (v < 0) return im->err->status;
    poet_status st = im_fill(im, w, false, 0, transposed ? fin : 0, transposed ? fout : 0);
    if (!st && bias) st = im_fill(im, bias, false, (uint64_t)(fin * fout), 0, 0);
    return st ? st : im_name_output(im, named, named_output, v);
}

poet_status im_map_gemm(importer *im, const Onnx__NodeProto *np)
{
    if (attr_int(np, "transA", 0) || attr_float(np, "alpha", 1.0f) != 1.0f || attr_float(np, "beta", 1.0f) != 1.0f)
        return im_refuse(im, np, "only Gemm with transA 0, alpha 1 and beta 1 is supported");
    int x = im_activation(im, np, 0);
    const value *w = x < 0 ? NULL : im_known_value(im, np, 1);
    if (!w) return im->err->status;
    const value *c = im_input_name(np, 2) ? im_known_value(im, np, 2) : NULL;
    if (im_input_name(np, 2) && !c) return im->err->status;
    if (im_shape_of(im, x)->ndim != 2) return im_refuse(im, np, "its input is not 2-d");
    return add_linear(im, np, x, w, attr_int(np, "transB", 0) == 0, c, np->output[0], np, 0);
}

/* The Add that follows a MatMul with a weight, when it adds a bias to it
 * and nothing else reads the product: fused into one linear layer. */
static int bias_add_after(importer *im, int at, const char *product, int64_t features, const value **bias)
{
    if (im_find(im, product) < 0 ? false : im->uses[im_find(im, product)] != 1) return -1;
    for (int k = at + 1; k < (int)im->gp->n_node; k++) {
        const Onnx__NodeProto *n = im->gp->node[k];
        if (!onnx_is_op(n, "Add") || n->n_input != 2) continue;
        int side = im_input_name(n, 0) && strcmp(n->input[0], product) == 0 ? 0
                   : im_input_name(n, 1) && strcmp(n->input[1], product) == 0 ? 1 : -1;
        if (side < 0) continue;
        int b = im_find(im, im_input_name(n, 1 - side));
        if (b < 0 || !im->vals[b].known || !im->vals[b].t.is_float || im->vals[b].t.n != (uint64_t)features ||
            im->vals[b].t.dims[im->vals[b].t.ndim - 1] != features)
            return -1;
        *bias = &im->vals[b];
        return k;
    }
    return -1;
}

/* An op of two activations. */
poet_status im_add_pair(importer *im, const Onnx__NodeProto *np, poet_op op, const value *a, const value *b)
{
    int in[2] = {a->node, b->node};
    return im_emit(im, np, op, in, 2, NULL);
}

poet_status im_map_matmul(importer *im, const Onnx__NodeProto *np, int at)
{
    const value *a = im_input_value(im, np, 0, true), *b = a ? im_input_value(im, np, 1, true) : NULL;
    if (!b) return im->err->status;
    if (a->node >= 0 && b->node >= 0) return im_add_pair(im, np, POET_OP_MATMUL, a, b);
    if (a->node < 0 || b->t.ndim != 2) return im_refuse(im, np, "only x @ W with a 2-d W, or a product of two activations");
    const value *bias = NULL;
    int add = bias_add_after(im, at, np->output[0], b->t.dims[1], &bias);
    if (add < 0) return add_linear(im, np, a->node, b, true, NULL, np->output[0], np, 0);
    im->skip[add] = true;
    const Onnx__NodeProto *addn = im->gp->node[add];
    return add_linear(im, np, a->node, b, true, bias, addn->output[0], addn, 0);
}
