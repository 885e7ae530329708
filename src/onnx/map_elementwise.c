/* ONNX in, by op family: elementwise ops of one and two operands, dropout and softmax. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "importer.h"

/* The trained tensor a known value is: an initializer (through Identity or
 * a folded Transpose), or one broadcast by a folded Expand (ViT's class
 * token); NULL for a constant, or what folded from constants. */
const value *im_trained_tensor(const importer *im, const value *v)
{
    if (v->expanded >= 0) v = &im->vals[v->expanded];
    return v->known && v->t.is_float && v->from.kind != FROM_NONE ? v : NULL;
}

/* Whether tensor t broadcasts into shape x without enlarging it (NumPy's
 * rule: trailing dimensions equal, or 1 in t). */
static bool fits_operand(const tensor *t, const poet_shape *x)
{
    if (t->ndim > x->ndim) return false;
    for (int k = 1; k <= t->ndim; k++)
        if (t->dims[t->ndim - k] != 1 && t->dims[t->ndim - k] != x->dim[x->ndim - k]) return false;
    return true;
}

poet_status im_map_binary(importer *im, const Onnx__NodeProto *np, poet_op op)
{
    const value *a = im_input_value(im, np, 0, true), *b = a ? im_input_value(im, np, 1, true) : NULL;
    if (!b) return im->err->status;
    if (a->node >= 0 && b->node >= 0) return im_add_pair(im, np, op, a, b);
    bool left = a->node < 0;
    const value *operand = left ? a : b;
    int x = left ? b->node : a->node;
    /* an initializer is a trained parameter (PyTorch exports them so); a
     * Constant, or what folded from constants, stays constant */
    const value *trained = im_trained_tensor(im, operand);
    if (trained && trained != operand && !fits_operand(&operand->t, im_shape_of(im, x)))
        return im_refuse(im, np, "a trained operand expanded beyond the shape of the other");
    bool param = trained != NULL;
    if (trained) operand = trained;
    if (operand->t.ndim > POET_MAX_DIMS) return im_refuse(im, np, "a constant operand of more than 4 dimensions");
    poet_attrs at = {.ndim = operand->t.ndim ? operand->t.ndim : 1,
                     .flags = (param ? POET_ATTR_OPERAND_PARAM : POET_ATTR_OPERAND_CONST) | (left ? POET_ATTR_OPERAND_LEFT : 0)};
    at.dim[0] = 1;
    for (int k = 0; k < operand->t.ndim; k++) at.dim[k] = (int32_t)operand->t.dims[k];
    int v = im_add_node(im, op, &x, 1, &at, np->output[0]);
    if (v < 0) return im->err->status;
    poet_status st = im_fill(im, operand, !param, 0, 0, 0);
    return st ? st : im_name_output(im, np, 0, v);
}

/* PRelu: x, or slope x below 0, its slope an initializer that trains
 * (nn.PReLU's weight), broadcast into x. */
poet_status im_map_prelu(importer *im, const Onnx__NodeProto *np)
{
    int x = im_activation(im, np, 0);
    const value *v = x < 0 ? NULL : im_known_value(im, np, 1);
    if (!v) return im->err->status;
    const value *slope = im_trained_tensor(im, v);
    if (!slope) return im_refuse(im, np, "its slope is not an initializer (poet trains it)");
    if (slope->t.ndim > POET_MAX_DIMS) return im_refuse(im, np, "a slope of more than 4 dimensions");
    poet_attrs a = {.ndim = slope->t.ndim ? slope->t.ndim : 1, .dim = {1}};
    for (int k = 0; k < slope->t.ndim; k++) a.dim[k] = (int32_t)slope->t.dims[k];
    int y = im_add_node(im, POET_OP_PRELU, &x, 1, &a, np->output[0]);
    if (y < 0) return im->err->status;
    poet_status st = im_fill(im, slope, false, 0, 0, 0);
    return st ? st : im_name_output(im, np, 0, y);
}

poet_status im_map_unary(importer *im, const Onnx__NodeProto *np, poet_op op, const poet_attrs *a)
{
    int x = im_activation(im, np, 0);
    return x < 0 ? im->err->status : im_emit(im, np, op, &x, 1, a);
}

poet_status im_map_clip(importer *im, const Onnx__NodeProto *np)
{
    poet_attrs a = {.alpha = attr_float(np, "min", -3.4028235e38f), .beta = attr_float(np, "max", 3.4028235e38f)};
    for (int j = 1; j <= 2; j++) {
        if (!im_input_name(np, j)) continue;
        const tensor *t = im_known(im, np, j, true);
        if (!t) return im->err->status;
        if (t->n != 1) return im_refuse(im, np, "min and max must be scalars");
        *(j == 1 ? &a.alpha : &a.beta) = (float)tensor_real(t, 0);
    }
    return im_map_unary(im, np, POET_OP_CLIP, &a);
}

/* A Softmax or LogSoftmax over the classes that makes the output the loss
 * reads (PyTorch's MNIST example ends with log_softmax): the loss, softmax
 * cross-entropy, takes it over and reads its input. Exact for LogSoftmax,
 * whose softmax is the input's; the intent for Softmax (probabilities out,
 * trained on their logits). The ONNX written back keeps it. */
bool im_ends_output(const importer *im, const Onnx__NodeProto *np)
{
    return (onnx_is_op(np, "Softmax") || onnx_is_op(np, "LogSoftmax")) && np->n_output > 0 && im->loss_output &&
           strcmp(np->output[0], im->loss_output) == 0;
}

/* The input of a Softmax or LogSoftmax and its axis, counted from 0; the
 * input is -1 after an error. */
static int softmax_input(importer *im, const Onnx__NodeProto *np, int64_t *axis, int *rank)
{
    int x = im_activation(im, np, 0);
    if (x < 0) return -1;
    *rank = im_shape_of(im, x)->ndim;
    *axis = attr_int(np, "axis", im->opset >= 13 ? -1 : 1);
    if (*axis < 0) *axis += *rank;
    return x;
}

poet_status im_map_output_softmax(importer *im, const Onnx__NodeProto *np)
{
    int64_t axis;
    int r, x = softmax_input(im, np, &axis, &r);
    if (x < 0) return im->err->status;
    if (axis != r - 1) return im_refuse(im, np, "a softmax at the output over other than the last axis (the classes)");
    snprintf(im->m->summary.output_op, sizeof im->m->summary.output_op, "%s", np->op_type);
    return im_name_output(im, np, 0, x);
}

poet_status im_map_softmax(importer *im, const Onnx__NodeProto *np)
{
    int64_t axis;
    int r, x = softmax_input(im, np, &axis, &r);
    if (x < 0) return im->err->status;
    if (im->opset < 13 && axis != r - 1)
        return im_refuse(im, np, "below opset 13 only softmax over the last axis is supported");
    poet_attrs a = {.axis = (int32_t)axis};
    return im_emit(im, np, POET_OP_SOFTMAX, &x, 1, &a);
}

poet_status im_map_dropout(importer *im, const Onnx__NodeProto *np)
{
    int mask = np->n_output > 1 && np->output[1] ? im_find(im, np->output[1]) : -1;
    if (mask >= 0 && im->uses[mask] > 0) return im_refuse(im, np, "the mask output is not supported");
    float p = attr_float(np, "ratio", 0.5f);
    if (im_input_name(np, 1)) {
        const tensor *t = im_known(im, np, 1, true);
        if (!t) return im->err->status;
        p = (float)tensor_real(t, 0);
    }
    poet_attrs a = {.p = p};
    return im_map_unary(im, np, POET_OP_DROPOUT, &a);
}
