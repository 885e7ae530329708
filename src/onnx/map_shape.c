/* ONNX in, by op family: shapes and data movement: reshapes, transposes, concat, split, slice, gather, resize. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "importer.h"

/* Reshape to dims: a node, nothing when the shape does not change, or a
 * view of x when it has more than 4 dimensions. */
poet_status im_reshape_to(importer *im, const Onnx__NodeProto *np, int x, const int64_t *dims, int ndim)
{
    if (ndim < 1) return im_refuse(im, np, "a result of no dimensions is not supported");
    if (ndim > POET_MAX_DIMS) {
        view w = {{0}, {ndim, {0}}};
        memcpy(w.shape.dim, dims, (size_t)ndim * sizeof *dims);
        return im_name_view(im, np, 0, x, &w);
    }
    const poet_shape *s = im_shape_of(im, x);
    bool same = s->ndim == ndim;
    for (int k = 0; same && k < ndim; k++) same = s->dim[k] == dims[k];
    if (same) return im_name_output(im, np, 0, x);
    poet_attrs a = {.ndim = ndim};
    for (int k = 0; k < ndim; k++) a.dim[k] = (int32_t)dims[k];
    return im_emit(im, np, POET_OP_RESHAPE, &x, 1, &a);
}

poet_status im_map_reshape(importer *im, const Onnx__NodeProto *np)
{
    onnx_shape s;
    int x = im_shaped_activation(im, np, 0, &s);
    const tensor *shape = x < 0 ? NULL : im_known(im, np, 1, true);
    if (!shape) return im->err->status;
    int64_t dims[TENSOR_MAX_DIMS];
    int nd;
    poet_status st = reshape_target(np, s.dim, s.ndim, shape, dims, &nd, im->err);
    return st ? st : im_reshape_to(im, np, x, dims, nd);
}

poet_status im_map_flatten(importer *im, const Onnx__NodeProto *np)
{
    onnx_shape s;
    int x = im_shaped_activation(im, np, 0, &s);
    if (x < 0) return im->err->status;
    int64_t axis = attr_int(np, "axis", 1);
    if (axis < 0) axis += s.ndim;
    if (axis < 0 || axis > s.ndim) return im_refuse(im, np, "axis out of range");
    int64_t dims[2] = {im_prod(s.dim, (int)axis), im_prod(s.dim + axis, s.ndim - (int)axis)};
    if (axis != 1 || s.ndim <= 2 || s.ndim > POET_MAX_DIMS) return im_reshape_to(im, np, x, dims, 2);
    return im_emit(im, np, POET_OP_FLATTEN, &x, 1, NULL); /* [N, rest]: poet's own flatten */
}

/* Squeeze and Unsqueeze of an activation: a reshape. */
poet_status im_map_squeeze(importer *im, const Onnx__NodeProto *np)
{
    onnx_shape s;
    int x = im_shaped_activation(im, np, 0, &s);
    if (x < 0) return im->err->status;
    const tensor *axes = im_input_name(np, 1) ? im_known(im, np, 1, true) : NULL;
    if (im_input_name(np, 1) && !axes) return im->err->status;
    int64_t dims[TENSOR_MAX_DIMS];
    int nd;
    poet_status st = squeeze_dims(np, s.dim, s.ndim, axes, dims, &nd, im->err);
    return st ? st : im_reshape_to(im, np, x, dims, nd);
}

/* A transpose of more than 4 dimensions, as x in shape s: axes of size 1
 * go, and axes that stay neighbours, in order, move as one. x is reshaped
 * to those groups (at most 4 of them) and the groups are transposed; the
 * result is a view of that in its ONNX shape. */
static poet_status transpose_merged(importer *im, const Onnx__NodeProto *np, int x, const onnx_shape *s,
                                    const int32_t *perm)
{
    int group_of[TENSOR_MAX_DIMS], first[TENSOR_MAX_DIMS], n_groups = 0, last = -2;
    for (int k = 0; k < s->ndim; k++) group_of[k] = -1;
    for (int k = 0; k < s->ndim; k++) { /* groups in output order */
        int axis = perm[k];
        if (s->dim[axis] == 1) continue;
        int prev = axis - 1; /* the nearest input axis before it that is not of size 1 */
        while (prev >= 0 && s->dim[prev] == 1) prev--;
        if (prev != last || n_groups == 0) first[n_groups++] = axis;
        group_of[axis] = n_groups - 1, last = axis;
    }
    if (n_groups > POET_MAX_DIMS) return im_refuse(im, np, "a transpose of more than 4 dimensions that do not merge to 4");
    int64_t dims[POET_MAX_DIMS];
    poet_attrs a = {0};
    int order = 0; /* the groups in input order: input axis order of their first axes */
    for (int axis = 0; axis < s->ndim; axis++) {
        int g = group_of[axis];
        if (g < 0 || first[g] != axis) continue;
        dims[order] = 1;
        for (int k = axis; k < s->ndim; k++)
            if (group_of[k] == g) dims[order] *= s->dim[k];
        a.perm[g] = order++;
    }
    view w = {{0}, {s->ndim, {0}}};
    for (int k = 0; k < s->ndim; k++) w.shape.dim[k] = s->dim[perm[k]];
    bool moves = false;
    for (int k = 0; k < n_groups; k++) moves |= a.perm[k] != k;
    if (!moves) return im_name_view(im, np, 0, x, &w); /* the element order stays */
    poet_attrs r = {.ndim = n_groups};
    for (int k = 0; k < n_groups; k++) r.dim[k] = (int32_t)dims[k];
    int merged = im_add_step(im, np, POET_OP_RESHAPE, x, &r, "merged");
    int v = merged < 0 ? -1 : im_add_node(im, POET_OP_TRANSPOSE, &merged, 1, &a, np->output[0]);
    return v < 0 ? im->err->status : im_name_view(im, np, 0, v, &w);
}

poet_status im_map_transpose(importer *im, const Onnx__NodeProto *np)
{
    onnx_shape s;
    int x = im_shaped_activation(im, np, 0, &s);
    if (x < 0) return im->err->status;
    int r = s.ndim, n;
    const int64_t *perm = attr_ints(np, "perm", &n);
    if (n >= 0 && n != r) return im_refuse(im, np, "perm has another length than the input's rank");
    int32_t p[TENSOR_MAX_DIMS];
    bool seen[TENSOR_MAX_DIMS] = {false};
    for (int k = 0; k < r; k++) {
        p[k] = (int32_t)(n >= 0 ? perm[k] : r - 1 - k);
        if (p[k] < 0 || p[k] >= r || seen[p[k]]) return im_refuse(im, np, "perm is not a permutation of its axes");
        seen[p[k]] = true;
    }
    if (r > POET_MAX_DIMS) return transpose_merged(im, np, x, &s, p);
    poet_attrs a = {0};
    memcpy(a.perm, p, (size_t)r * sizeof *p);
    return im_map_unary(im, np, POET_OP_TRANSPOSE, &a);
}

/* The trained tensor a Concat's first or last input is (ViT's class token,
 * an initializer, or one broadcast by Expand), or NULL; *left says which.
 * A constant that does not train is not one. */
static const value *concat_param(importer *im, const Onnx__NodeProto *np, bool *left)
{
    for (int end = 0; end < 2 && np->n_input > 1; end++) {
        int j = end ? (int)np->n_input - 1 : 0, v = im_input_name(np, j) ? im_find(im, np->input[j]) : -1;
        const value *t = v < 0 ? NULL : im_trained_tensor(im, &im->vals[v]);
        if (!t) continue;
        *left = end == 0;
        return t;
    }
    return NULL;
}

/* A concat of part of np's inputs, named after its output and the part. */
static int concat_part(importer *im, const Onnx__NodeProto *np, const int *in, int have, const poet_attrs *a, int part)
{
    char name[POET_NAME_BYTES];
    snprintf(name, sizeof name, "%.*s/part%d", POET_NAME_BYTES - 16, np->output[0], part);
    return im_add_node(im, POET_OP_CONCAT, in, have, a, name);
}

/* A Concat of more than 8 inputs is a chain of concats, each of at most 8
 * and the next one's first input (DenseNet's blocks concatenate up to 49);
 * a trained tensor first or last is the parameter operand of a concat of
 * one input, the others' concat. */
poet_status im_map_concat(importer *im, const Onnx__NodeProto *np)
{
    int64_t axis;
    if (!attr_int_in(np, "axis", 0, -POET_MAX_DIMS, POET_MAX_DIMS - 1, &axis))
        return im_refuse(im, np, "axis is outside the ranks poet supports");
    poet_attrs a = {.axis = (int32_t)axis};
    int in[POET_MAX_INPUTS], have = 0, part = 0;
    bool left = false;
    const value *param = concat_param(im, np, &left);
    int from = param && left ? 1 : 0, to = (int)np->n_input - (param && !left ? 1 : 0);
    for (int j = from; j < to; j++) {
        if (have == POET_MAX_INPUTS) {
            if ((in[0] = concat_part(im, np, in, have, &a, ++part)) < 0) return im->err->status;
            have = 1;
        }
        if ((in[have++] = im_activation(im, np, j)) < 0) return im->err->status;
    }
    if (!param) return im_emit(im, np, POET_OP_CONCAT, in, have, &a);
    if (param->t.ndim < 1 || param->t.ndim > POET_MAX_DIMS)
        return im_refuse(im, np, "a trained input of no or more than 4 dimensions");
    if (have > 1 && (in[0] = concat_part(im, np, in, have, &a, ++part)) < 0) return im->err->status;
    a.flags = POET_ATTR_OPERAND_PARAM | (left ? POET_ATTR_OPERAND_LEFT : 0), a.ndim = param->t.ndim;
    for (int k = 0; k < param->t.ndim; k++) a.dim[k] = (int32_t)param->t.dims[k];
    int v = im_add_node(im, POET_OP_CONCAT, in, 1, &a, np->output[0]);
    if (v < 0) return im->err->status;
    poet_status st = im_fill(im, param, false, 0, 0, 0);
    return st ? st : im_name_output(im, np, 0, v);
}

/* One slice node of [start, end) on axis, named as output k. */
static poet_status add_slice(importer *im, const Onnx__NodeProto *np, int x, int axis, int64_t start, int64_t end, int k)
{
    const poet_shape *s = im_shape_of(im, x);
    if (start == 0 && end == s->dim[axis]) return im_name_output(im, np, k, x);
    poet_attrs a = {.axis = axis, .start = (int32_t)start, .end = (int32_t)end};
    int v = im_add_node(im, POET_OP_SLICE, &x, 1, &a, np->output[k]);
    return v < 0 ? im->err->status : im_name_output(im, np, k, v);
}

poet_status im_map_split(importer *im, const Onnx__NodeProto *np)
{
    int x = im_activation(im, np, 0);
    if (x < 0) return im->err->status;
    const poet_shape *s = im_shape_of(im, x);
    int64_t axis = attr_int(np, "axis", 0);
    if (axis < 0) axis += s->ndim;
    if (axis < 0 || axis >= s->ndim) return im_refuse(im, np, "axis out of range");
    int n_out = (int)np->n_output, na;
    const int64_t *attr = attr_ints(np, "split", &na);
    const tensor *sizes = np->n_input > 1 && im_input_name(np, 1) ? im_known(im, np, 1, true) : NULL;
    if (np->n_input > 1 && im_input_name(np, 1) && !sizes) return im->err->status;
    int64_t at = 0, size = s->dim[axis];
    for (int k = 0; k < n_out; k++) {
        int64_t len = sizes ? (k < (int)sizes->n ? tensor_int(sizes, (uint64_t)k) : -1)
                      : na >= 0 ? (k < na ? attr[k] : -1)
                                : size / n_out;
        if (len <= 0 || at + len > size || (!sizes && na < 0 && size % n_out))
            return im_refuse(im, np, "split sizes do not add up to the axis");
        poet_status st = add_slice(im, np, x, (int)axis, at, at + len, k);
        if (st) return st;
        at += len;
    }
    return at == size ? POET_OK : im_refuse(im, np, "split sizes do not add up to the axis");
}

/* Slice of an activation: one contiguous range on each axis it names. */
poet_status im_map_slice(importer *im, const Onnx__NodeProto *np)
{
    int x = im_activation(im, np, 0);
    const tensor *starts = x < 0 ? NULL : im_known(im, np, 1, true), *ends = starts ? im_known(im, np, 2, true) : NULL;
    if (!ends) return im->err->status;
    const tensor *axes = im_input_name(np, 3) ? im_known(im, np, 3, true) : NULL, *steps = im_input_name(np, 4) ? im_known(im, np, 4, true) : NULL;
    if ((im_input_name(np, 3) && !axes) || (im_input_name(np, 4) && !steps)) return im->err->status;
    int cur = x, changed = 0;
    for (uint64_t j = 0; j < starts->n; j++) {
        const poet_shape *s = im_shape_of(im, cur);
        int64_t axis = axes ? tensor_int(axes, j) : (int64_t)j;
        if (axis < 0) axis += s->ndim;
        if (axis < 0 || axis >= s->ndim || j >= ends->n) return im_refuse(im, np, "an axis out of range");
        if (steps && tensor_int(steps, j) != 1) return im_refuse(im, np, "steps other than 1 are not supported");
        int64_t d = s->dim[axis], b = tensor_int(starts, j), e = tensor_int(ends, j);
        b = b < 0 ? b + d : b, e = e < 0 ? e + d : e;
        b = b < 0 ? 0 : b > d ? d : b, e = e < 0 ? 0 : e > d ? d : e;
        if (e <= b) return im_refuse(im, np, "an empty slice");
        if (b == 0 && e == d) continue;
        if (changed++) return im_refuse(im, np, "slices along more than one axis are not supported");
        poet_attrs a = {.axis = (int32_t)axis, .start = (int32_t)b, .end = (int32_t)e};
        if ((cur = im_add_node(im, POET_OP_SLICE, &cur, 1, &a, np->output[0])) < 0) return im->err->status;
    }
    return im_name_output(im, np, 0, cur);
}

/* Gather of one index along an axis of an activation (ViT's x[:, 0]): a
 * slice, then a reshape that drops the axis where the index is a scalar. */
poet_status im_map_gather(importer *im, const Onnx__NodeProto *np)
{
    int x = im_activation(im, np, 0);
    const tensor *at = x < 0 ? NULL : im_known(im, np, 1, true);
    if (!at) return im->err->status;
    const poet_shape *s = im_shape_of(im, x);
    int64_t axis = attr_int(np, "axis", 0);
    if (axis < 0) axis += s->ndim;
    if (axis < 0 || axis >= s->ndim) return im_refuse(im, np, "axis out of range");
    if (at->is_float || at->n != 1 || at->ndim > 1)
        return im_refuse(im, np, "only one index (a scalar, or a list of one) into an activation is supported");
    int64_t d = s->dim[axis], i = tensor_int(at, 0) < 0 ? tensor_int(at, 0) + d : tensor_int(at, 0);
    if (i < 0 || i >= d) return im_refuse(im, np, "its index is out of range");
    int cur = x;
    if (d > 1) {
        poet_attrs a = {.axis = (int32_t)axis, .start = (int32_t)i, .end = (int32_t)i + 1};
        if ((cur = im_add_step(im, np, POET_OP_SLICE, x, &a, "slice")) < 0) return im->err->status;
    }
    if (at->ndim == 1) return im_name_output(im, np, 0, cur);
    int64_t dims[TENSOR_MAX_DIMS];
    int nd = 0;
    for (int k = 0; k < im_shape_of(im, cur)->ndim; k++)
        if (k != axis) dims[nd++] = im_shape_of(im, cur)->dim[k];
    return im_reshape_to(im, np, cur, dims, nd);
}

/* A nearest Resize's coordinate transformation and rounding, read once. */
typedef enum { HALF_PIXEL, ASYMMETRIC, TF_HALF_PIXEL, ALIGN_CORNERS, PYTORCH_HALF_PIXEL } coord_mode;
typedef enum { PREFER_FLOOR, PREFER_CEIL, FLOOR, CEIL } round_mode;

static void nearest_modes(const Onnx__NodeProto *np, coord_mode *c, round_mode *r)
{
    static const char *const COORD[] = {"half_pixel", "asymmetric", "tf_half_pixel_for_nn", "align_corners",
                                        "pytorch_half_pixel"};
    static const char *const ROUND[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    *c = HALF_PIXEL, *r = PREFER_FLOOR;
    for (int k = 0; k < 5; k++)
        if (attr_is(np, "coordinate_transformation_mode", "half_pixel", COORD[k])) *c = (coord_mode)k;
    for (int k = 0; k < 4; k++)
        if (attr_is(np, "nearest_mode", "round_prefer_floor", ROUND[k])) *r = (round_mode)k;
}

/* The input index ONNX's nearest Resize reads for output index x of an
 * axis scaled from n to m. */
static int64_t nearest_source(coord_mode c, round_mode rm, int64_t x, int64_t n, int64_t m)
{
    double scale = (double)m / (double)n, s = ((double)x + 0.5) / scale - 0.5; /* half_pixel */
    if (c == ASYMMETRIC) s = (double)x / scale;
    if (c == TF_HALF_PIXEL) s = ((double)x + 0.5) / scale;
    if (c == ALIGN_CORNERS) s = m > 1 ? (double)x * (double)(n - 1) / (double)(m - 1) : 0;
    if (c == PYTORCH_HALF_PIXEL && m == 1) s = 0;
    double r = rm == FLOOR ? floor(s) : rm == CEIL ? ceil(s) : rm == PREFER_CEIL ? floor(s + 0.5) : ceil(s - 0.5);
    return r < 0 ? 0 : r > (double)(n - 1) ? n - 1 : (int64_t)r;
}

/* Resize (opset 10 on) and Upsample (7 to 9), nearest, to whole multiples
 * of H and W where every input element is repeated (PyTorch's
 * nn.Upsample(mode="nearest") and F.interpolate): upsample2d. */
poet_status im_map_resize(importer *im, const Onnx__NodeProto *np)
{
    int x = im_activation(im, np, 0);
    if (x < 0) return im->err->status;
    if (!attr_is(np, "mode", "nearest", "nearest")) return im_refuse(im, np, "only mode nearest is supported");
    bool modern = onnx_is_op(np, "Resize") && im->opset >= 11; /* inputs X, roi, scales, sizes */
    int at_scales = modern ? 2 : 1, at_sizes = modern ? 3 : -1;
    const tensor *scales = im_input_name(np, at_scales) ? im_known(im, np, at_scales, true) : NULL;
    if (im_input_name(np, at_scales) && !scales) return im->err->status;
    const tensor *sizes = at_sizes > 0 && im_input_name(np, at_sizes) ? im_known(im, np, at_sizes, true) : NULL;
    if (at_sizes > 0 && im_input_name(np, at_sizes) && !sizes) return im->err->status;
    const Onnx__AttributeProto *fixed = attr_find(np, "scales"); /* Upsample-7 */
    int ns = fixed ? (int)fixed->n_floats : -1;
    const poet_shape *s = im_shape_of(im, x);
    if (s->ndim != 4) return im_refuse(im, np, "only [N, C, H, W] inputs are resized");
    int64_t out[4];
    for (int k = 0; k < 4; k++) {
        if (sizes && sizes->n == 4) out[k] = tensor_int(sizes, (uint64_t)k);
        else if (scales && scales->n == 4)
            out[k] = (int64_t)floor((double)s->dim[k] * tensor_real(scales, (uint64_t)k));
        else if (ns == 4) out[k] = (int64_t)floor((double)s->dim[k] * fixed->floats[k]);
        else return im_refuse(im, np, "it needs four scales or four sizes");
    }
    if (out[0] != s->dim[0] || out[1] != s->dim[1]) return im_refuse(im, np, "only H and W are resized");
    if (out[2] < s->dim[2] || out[3] < s->dim[3] || out[2] % s->dim[2] || out[3] % s->dim[3])
        return im_refuse(im, np, "only whole multiples of H and W are supported");
    if (out[2] / s->dim[2] > 64 || out[3] / s->dim[3] > 64 || out[2] > 1 << 24 || out[3] > 1 << 24)
        return im_refuse(im, np, "factors above 64, or sides above 2^24, are not supported");
    coord_mode c;
    round_mode r;
    nearest_modes(np, &c, &r);
    /* opset 10's Resize and Upsample repeat: floor(x / scale) */
    for (int k = 2; modern && k < 4; k++)
        for (int64_t o = 0; o < out[k]; o++)
            if (nearest_source(c, r, o, s->dim[k], out[k]) != o / (out[k] / s->dim[k]))
                return im_refuse(im, np, "its coordinate transformation and nearest mode do not repeat every element "
                                      "(asymmetric with floor, or half_pixel with rounding, do)");
    poet_attrs a = {.sh = (int32_t)(out[2] / s->dim[2]), .sw = (int32_t)(out[3] / s->dim[3])};
    if (a.sh == 1 && a.sw == 1) return im_name_output(im, np, 0, x);
    return im_emit(im, np, POET_OP_UPSAMPLE2D, &x, 1, &a);
}
