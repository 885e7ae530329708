/* Tensors known at import, and the ops the importer computes on them: the
 * shape arithmetic (Shape, Gather, Concat, Unsqueeze, Slice, Cast, ...)
 * that exporters emit around reshapes, and constants built from constants. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/broadcast.h"
#include "../base/hash.h"
#include "internal.h"

/* Tensors read from the file: 2 GiB of floats, more than protobuf holds.
 * Tensors computed at import (shape arithmetic, masks, a broadcast class
 * token) are far smaller; a file that asks for more (a ConstantOfShape of
 * 2^28 elements, a fuzz find) is refused before it takes the memory. */
enum { READ_MAX_ELEMENTS = 1 << 29, FOLD_MAX_ELEMENTS = 1 << 24 };

void tensor_free(tensor *t)
{
    free(t->f);
    free(t->i);
    memset(t, 0, sizeof *t);
}

static poet_status tensor_alloc_within(tensor *t, bool is_float, int ndim, const int64_t *dims, uint64_t limit,
                                       poet_err *err)
{
    memset(t, 0, sizeof *t);
    t->is_float = is_float;
    t->ndim = ndim;
    t->n = 1;
    for (int k = 0; k < ndim; k++) {
        if (dims[k] < 0 || (dims[k] && t->n > limit / (uint64_t)dims[k]))
            return poet_fail(err, POET_ERR_LIMIT, "a constant of over %llu elements or with a negative dimension",
                             (unsigned long long)limit);
        t->dims[k] = dims[k];
        t->n *= (uint64_t)dims[k];
    }
    if (is_float) t->f = calloc(t->n + 1, sizeof *t->f);
    else t->i = calloc(t->n + 1, sizeof *t->i);
    if (!t->f && !t->i) return poet_fail(err, POET_ERR_NOMEM, "out of memory for a constant");
    return POET_OK;
}

static poet_status tensor_alloc(tensor *t, bool is_float, int ndim, const int64_t *dims, poet_err *err)
{
    return tensor_alloc_within(t, is_float, ndim, dims, FOLD_MAX_ELEMENTS, err);
}

int64_t tensor_int(const tensor *t, uint64_t k)
{
    return t->is_float ? (int64_t)t->f[k] : t->i[k];
}

double tensor_real(const tensor *t, uint64_t k)
{
    return t->is_float ? (double)t->f[k] : (double)t->i[k];
}

poet_status tensor_from_proto(const Onnx__TensorProto *p, tensor *t, const char *what, poet_err *err)
{
    memset(t, 0, sizeof *t);
    if (p->n_external_data)
        return poet_fail(err, POET_ERR_UNSUPPORTED, "%s: tensor '%s' keeps its data in an external file", what,
                         p->name ? p->name : "");
    if (p->n_dims > TENSOR_MAX_DIMS)
        return poet_fail(err, POET_ERR_UNSUPPORTED, "%s: tensor '%s' has %zu dimensions", what, p->name ? p->name : "",
                         p->n_dims);
    int type = p->has_data_type ? p->data_type : 0;
    bool is_float = type == ONNX_FLOAT || type == ONNX_DOUBLE;
    if (!is_float && type != ONNX_INT64 && type != ONNX_INT32 && type != ONNX_BOOL)
        return poet_fail(err, POET_ERR_UNSUPPORTED, "%s: tensor '%s' has data type %d (poet reads float, double, "
                         "int64, int32 and bool)", what, p->name ? p->name : "", type);
    static const size_t width[] = {[ONNX_FLOAT] = 4, [ONNX_INT32] = 4, [ONNX_INT64] = 8, [ONNX_BOOL] = 1,
                                   [ONNX_DOUBLE] = 8};
    uint64_t want = 1;
    for (size_t k = 0; k < p->n_dims; k++)
        want = p->dims[k] < 0 || (p->dims[k] && want > UINT64_MAX / 16 / (uint64_t)p->dims[k]) ? UINT64_MAX / 16
                                                                                            : want * (uint64_t)p->dims[k];
    size_t have = p->has_raw_data ? p->raw_data.len / width[type]
                  : type == ONNX_FLOAT ? p->n_float_data
                  : type == ONNX_INT64 ? p->n_int64_data
                  : type == ONNX_DOUBLE ? p->n_double_data
                                        : p->n_int32_data;
    /* checked before allocating, so that a shape alone cannot ask for memory */
    if (have != want || (p->has_raw_data && p->raw_data.len != want * width[type]))
        return poet_fail(err, POET_ERR_PARSE, "%s: tensor '%s' holds %zu values where its shape says %llu", what,
                         p->name ? p->name : "", have, (unsigned long long)want);
    poet_status st = tensor_alloc_within(t, is_float, (int)p->n_dims, p->dims, READ_MAX_ELEMENTS, err);
    if (st) return st;
    const uint8_t *raw = p->raw_data.data;
    for (uint64_t k = 0; k < t->n; k++) {
        if (type == ONNX_FLOAT) {
            uint32_t u = raw ? (uint32_t)le_get(raw + 4 * k, 4) : 0;
            if (raw) memcpy(&t->f[k], &u, 4);
            else t->f[k] = p->float_data[k];
        } else if (type == ONNX_DOUBLE) {
            double d;
            uint64_t u = raw ? le_get(raw + 8 * k, 8) : 0;
            if (raw) memcpy(&d, &u, 8);
            else d = p->double_data[k];
            t->f[k] = (float)d;
        } else if (type == ONNX_INT64) {
            t->i[k] = raw ? (int64_t)le_get(raw + 8 * k, 8) : p->int64_data[k];
        } else if (type == ONNX_INT32) {
            t->i[k] = raw ? (int32_t)(uint32_t)le_get(raw + 4 * k, 4) : p->int32_data[k];
        } else {
            t->i[k] = raw ? raw[k] != 0 : p->int32_data[k] != 0;
        }
    }
    return POET_OK;
}

/* ---- attributes ---- */

const Onnx__AttributeProto *attr_find(const Onnx__NodeProto *np, const char *name)
{
    for (size_t k = 0; k < np->n_attribute; k++)
        if (np->attribute[k]->name && strcmp(np->attribute[k]->name, name) == 0) return np->attribute[k];
    return NULL;
}

int64_t attr_int(const Onnx__NodeProto *np, const char *name, int64_t dflt)
{
    const Onnx__AttributeProto *a = attr_find(np, name);
    return a && a->has_i ? a->i : dflt;
}

bool attr_int_in(const Onnx__NodeProto *np, const char *name, int64_t dflt, int64_t lo, int64_t hi, int64_t *out)
{
    *out = attr_int(np, name, dflt);
    return *out >= lo && *out <= hi;
}

float attr_float(const Onnx__NodeProto *np, const char *name, float dflt)
{
    const Onnx__AttributeProto *a = attr_find(np, name);
    return a && a->has_f ? a->f : dflt;
}

bool attr_is(const Onnx__NodeProto *np, const char *name, const char *dflt, const char *want)
{
    const Onnx__AttributeProto *a = attr_find(np, name);
    if (!a || !a->has_s) return strcmp(dflt, want) == 0;
    return a->s.len == strlen(want) && memcmp(a->s.data, want, a->s.len) == 0;
}

const int64_t *attr_ints(const Onnx__NodeProto *np, const char *name, int *n)
{
    const Onnx__AttributeProto *a = attr_find(np, name);
    *n = a ? (int)a->n_ints : -1;
    return a ? a->ints : NULL;
}

/* ---- folding ---- */

const char *onnx_node_label(const Onnx__NodeProto *np)
{
    return np->name && *np->name ? np->name : np->n_output && np->output[0] ? np->output[0] : "";
}

poet_status onnx_refuse(const Onnx__NodeProto *np, const char *why, poet_err *err)
{
    return poet_fail(err, POET_ERR_UNSUPPORTED, "node '%s' (%s): %s", onnx_node_label(np), np->op_type, why);
}

bool onnx_is_op(const Onnx__NodeProto *np, const char *op) { return strcmp(np->op_type, op) == 0; }

/* Broadcast index: the element of t that output element o of shape out
 * (right-aligned) reads. */
static uint64_t bcast_index(const tensor *t, const tensor *out, uint64_t o)
{
    uint64_t idx = 0, stride = 1;
    for (int k = out->ndim - 1, j = t->ndim - 1; k >= 0; k--, j--) {
        uint64_t c = o % (uint64_t)out->dims[k];
        o /= (uint64_t)out->dims[k];
        if (j < 0) continue;
        if (t->dims[j] != 1) idx += c * stride;
        stride *= (uint64_t)t->dims[j];
    }
    return idx;
}

static poet_status broadcast_shape(const Onnx__NodeProto *np, const tensor *a, const tensor *b, int *ndim,
                                   int64_t *dims, poet_err *err)
{
    if (!broadcast_dims(a->ndim, a->dims, b->ndim, b->dims, ndim, dims))
        return onnx_refuse(np, "constant operands do not broadcast", err);
    return POET_OK;
}

static poet_status fold_binary(const Onnx__NodeProto *np, const tensor *a, const tensor *b, tensor *out, poet_err *err)
{
    int ndim;
    int64_t dims[TENSOR_MAX_DIMS];
    bool is_float = a->is_float || b->is_float, cmp = onnx_is_op(np, "Equal");
    poet_status st = broadcast_shape(np, a, b, &ndim, dims, err);
    if (st || (st = tensor_alloc(out, is_float && !cmp, ndim, dims, err))) return st;
    for (uint64_t o = 0; o < out->n; o++) {
        uint64_t ia = bcast_index(a, out, o), ib = bcast_index(b, out, o);
        if (cmp) {
            out->i[o] = tensor_real(a, ia) == tensor_real(b, ib);
        } else if (is_float && onnx_is_op(np, "Mod")) {
            if (!attr_int(np, "fmod", 0)) return onnx_refuse(np, "a float Mod needs fmod 1", err);
            out->f[o] = fmodf((float)tensor_real(a, ia), (float)tensor_real(b, ib));
        } else if (is_float) {
            float x = (float)tensor_real(a, ia), y = (float)tensor_real(b, ib);
            out->f[o] = onnx_is_op(np, "Add") ? x + y : onnx_is_op(np, "Sub") ? x - y : onnx_is_op(np, "Mul") ? x * y
                        : onnx_is_op(np, "Div") ? x / y : powf(x, y);
        } else {
            int64_t x = a->i[ia], y = b->i[ib];
            bool mod = onnx_is_op(np, "Mod");
            if ((onnx_is_op(np, "Div") || mod) && y == 0)
                return onnx_refuse(np, "integer division by zero in a constant", err);
            /* Mod: the sign of the divisor, as Python's %, unless fmod 1 asks for C's */
            int64_t r = mod ? x % y : 0;
            if (mod && !attr_int(np, "fmod", 0) && r != 0 && (r < 0) != (y < 0)) r += y;
            out->i[o] = onnx_is_op(np, "Add") ? x + y : onnx_is_op(np, "Sub") ? x - y : onnx_is_op(np, "Mul") ? x * y
                        : onnx_is_op(np, "Div") ? x / y : mod ? r : (int64_t)pow((double)x, (double)y);
        }
    }
    return POET_OK;
}

static poet_status fold_unary(const Onnx__NodeProto *np, const tensor *a, tensor *out, poet_err *err)
{
    bool cast = onnx_is_op(np, "Cast");
    int64_t to = attr_int(np, "to", ONNX_FLOAT);
    bool is_float = cast ? (to == ONNX_FLOAT || to == ONNX_DOUBLE) : a->is_float;
    if (cast && !is_float && to != ONNX_INT64 && to != ONNX_INT32 && to != ONNX_BOOL)
        return onnx_refuse(np, "cast to a type poet does not keep", err);
    poet_status st = tensor_alloc(out, is_float, a->ndim, a->dims, err);
    if (st) return st;
    for (uint64_t k = 0; k < a->n; k++) {
        double x = tensor_real(a, k);
        double y = onnx_is_op(np, "Neg") ? -x : onnx_is_op(np, "Sqrt") ? sqrt(x) : onnx_is_op(np, "Floor") ? floor(x)
                   : onnx_is_op(np, "Ceil") ? ceil(x) : x; /* Cast, Identity */
        if (is_float) out->f[k] = (float)y;
        else out->i[k] = cast && to == ONNX_BOOL ? y != 0 : (int64_t)y;
    }
    return POET_OK;
}

/* Normalizes axis against rank (negative counts from the end). */
static bool axis_in(int64_t axis, int rank, int *out)
{
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return false;
    *out = (int)axis;
    return true;
}

static poet_status fold_shape(const Onnx__NodeProto *np, const fold_input *x, tensor *out, poet_err *err)
{
    int rank = x->shape ? x->shape->ndim : x->t->ndim;
    int64_t start = attr_int(np, "start", 0), end = attr_int(np, "end", rank);
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = start < 0 ? 0 : start > rank ? rank : start;
    end = end < start ? start : end > rank ? rank : end;
    int64_t n = end - start;
    poet_status st = tensor_alloc(out, false, 1, &n, err);
    for (int64_t k = 0; !st && k < n; k++) out->i[k] = x->shape ? x->shape->dim[start + k] : x->t->dims[start + k];
    return st;
}

/* Outer, along and inner sizes of t around axis. */
static void split_at(const tensor *t, int axis, uint64_t *outer, uint64_t *along, uint64_t *inner)
{
    *outer = *inner = 1;
    *along = (uint64_t)t->dims[axis];
    for (int k = 0; k < axis; k++) *outer *= (uint64_t)t->dims[k];
    for (int k = axis + 1; k < t->ndim; k++) *inner *= (uint64_t)t->dims[k];
}

static void copy_elem(tensor *dst, uint64_t d, const tensor *src, uint64_t s)
{
    if (dst->is_float) dst->f[d] = (float)tensor_real(src, s);
    else dst->i[d] = tensor_int(src, s);
}

static poet_status fold_gather(const Onnx__NodeProto *np, const tensor *data, const tensor *idx, tensor *out,
                               poet_err *err)
{
    int axis;
    if (data->ndim < 1 || !axis_in(attr_int(np, "axis", 0), data->ndim, &axis) ||
        data->ndim + idx->ndim - 1 > TENSOR_MAX_DIMS)
        return onnx_refuse(np, "axis outside the data", err);
    int64_t dims[TENSOR_MAX_DIMS];
    int nd = 0;
    for (int k = 0; k < axis; k++) dims[nd++] = data->dims[k];
    for (int k = 0; k < idx->ndim; k++) dims[nd++] = idx->dims[k];
    for (int k = axis + 1; k < data->ndim; k++) dims[nd++] = data->dims[k];
    poet_status st = tensor_alloc(out, data->is_float, nd, dims, err);
    if (st) return st;
    uint64_t outer, along, inner, o = 0;
    split_at(data, axis, &outer, &along, &inner);
    for (uint64_t a = 0; a < outer; a++)
        for (uint64_t j = 0; j < idx->n; j++) {
            int64_t at = tensor_int(idx, j);
            if (at < 0) at += (int64_t)along;
            if (at < 0 || (uint64_t)at >= along) return onnx_refuse(np, "an index outside the data", err);
            for (uint64_t b = 0; b < inner; b++, o++) copy_elem(out, o, data, (a * along + (uint64_t)at) * inner + b);
        }
    return POET_OK;
}

static poet_status fold_concat(const Onnx__NodeProto *np, const fold_input *in, int n_in, tensor *out, poet_err *err)
{
    const tensor *first = in[0].t;
    int axis;
    if (!axis_in(attr_int(np, "axis", 0), first->ndim, &axis)) return onnx_refuse(np, "axis outside the inputs", err);
    int64_t dims[TENSOR_MAX_DIMS];
    memcpy(dims, first->dims, sizeof dims);
    bool is_float = false;
    dims[axis] = 0;
    for (int j = 0; j < n_in; j++) {
        const tensor *t = in[j].t;
        if (!t || t->ndim != first->ndim) return onnx_refuse(np, "inputs of different ranks", err);
        for (int k = 0; k < t->ndim; k++)
            if (k != axis && t->dims[k] != first->dims[k]) return onnx_refuse(np, "inputs differ off the axis", err);
        dims[axis] += t->dims[axis];
        is_float = is_float || t->is_float;
    }
    poet_status st = tensor_alloc(out, is_float, first->ndim, dims, err);
    if (st) return st;
    uint64_t outer, total, inner, at = 0;
    split_at(out, axis, &outer, &total, &inner);
    for (int j = 0; j < n_in; j++) {
        uint64_t o2, len, i2;
        split_at(in[j].t, axis, &o2, &len, &i2);
        for (uint64_t a = 0; a < outer; a++)
            for (uint64_t k = 0; k < len * inner; k++) copy_elem(out, (a * total + at) * inner + k, in[j].t, a * len * inner + k);
        at += len;
    }
    return POET_OK;
}

/* The dimensions Unsqueeze or Squeeze make of in_dims: the axes come from
 * an attribute (opset < 13) or the second input (axes, may be NULL). */
poet_status squeeze_dims(const Onnx__NodeProto *np, const int64_t *in_dims, int in_ndim, const tensor *axes_in,
                         int64_t *dims, int *ndim, poet_err *err)
{
    int64_t axes[TENSOR_MAX_DIMS];
    int na;
    const int64_t *attr = attr_ints(np, "axes", &na);
    if (axes_in) na = (int)axes_in->n;
    if (na > TENSOR_MAX_DIMS) return onnx_refuse(np, "too many axes", err);
    for (int k = 0; k < na; k++) axes[k] = axes_in ? tensor_int(axes_in, (uint64_t)k) : attr[k];
    bool unsq = onnx_is_op(np, "Unsqueeze");
    int rank = unsq ? in_ndim + (na < 0 ? 0 : na) : in_ndim;
    if (rank > TENSOR_MAX_DIMS) return onnx_refuse(np, "too many dimensions", err);
    bool mark[TENSOR_MAX_DIMS] = {false};
    for (int k = 0; k < na; k++) {
        int a;
        if (!axis_in(axes[k], rank, &a)) return onnx_refuse(np, "an axis out of range", err);
        mark[a] = true;
    }
    *ndim = 0;
    for (int k = 0, j = 0; k < rank; k++) {
        if (unsq) dims[(*ndim)++] = mark[k] ? 1 : in_dims[j++];
        else if (!(mark[k] || (na < 0 && in_dims[k] == 1))) dims[(*ndim)++] = in_dims[k];
        else if (in_dims[k] != 1) return onnx_refuse(np, "squeezes a dimension that is not 1", err);
    }
    return POET_OK;
}

static poet_status fold_axes(const Onnx__NodeProto *np, const fold_input *in, int n_in, tensor *out, poet_err *err)
{
    const tensor *x = in[0].t;
    int64_t dims[TENSOR_MAX_DIMS];
    int nd;
    poet_status st = squeeze_dims(np, x->dims, x->ndim, n_in > 1 ? in[1].t : NULL, dims, &nd, err);
    if (st || (st = tensor_alloc(out, x->is_float, nd, dims, err))) return st;
    for (uint64_t k = 0; k < x->n; k++) copy_elem(out, k, x, k);
    return POET_OK;
}

/* Reshape's target: 0 copies the input's dimension (unless allowzero), -1
 * takes what is left. Shared with the importer's reshape of activations. */
poet_status reshape_target(const Onnx__NodeProto *np, const int64_t *in_dims, int in_ndim, const tensor *shape,
                           int64_t *dims, int *ndim, poet_err *err)
{
    if (shape->ndim != 1 || shape->n > TENSOR_MAX_DIMS) return onnx_refuse(np, "its shape is not a short 1-d tensor", err);
    uint64_t total = 1, known = 1;
    for (int k = 0; k < in_ndim; k++) total *= (uint64_t)in_dims[k];
    int infer = -1;
    *ndim = (int)shape->n;
    bool allowzero = attr_int(np, "allowzero", 0) != 0;
    for (int k = 0; k < *ndim; k++) {
        int64_t d = tensor_int(shape, (uint64_t)k);
        if (d == 0 && !allowzero) {
            if (k >= in_ndim) return onnx_refuse(np, "a 0 in its shape past the input's rank", err);
            d = in_dims[k];
        }
        if (d == -1) {
            if (infer >= 0) return onnx_refuse(np, "two -1 in its shape", err);
            infer = k;
            d = 1;
        } else if (d < 0) {
            return onnx_refuse(np, "a negative dimension in its shape", err);
        }
        dims[k] = d;
        known *= (uint64_t)d;
    }
    if (infer >= 0) {
        if (!known || total % known) return onnx_refuse(np, "no dimension makes its -1 fit the input", err);
        dims[infer] = (int64_t)(total / known);
        known = total;
    }
    if (known != total) return onnx_refuse(np, "its shape holds another number of elements than its input", err);
    return POET_OK;
}

static poet_status fold_reshape(const Onnx__NodeProto *np, const tensor *x, const tensor *shape, tensor *out,
                                poet_err *err)
{
    int64_t dims[TENSOR_MAX_DIMS];
    int nd;
    poet_status st = reshape_target(np, x->dims, x->ndim, shape, dims, &nd, err);
    if (st || (st = tensor_alloc(out, x->is_float, nd, dims, err))) return st;
    for (uint64_t k = 0; k < x->n; k++) copy_elem(out, k, x, k);
    return POET_OK;
}

/* Slice of a constant along its axes, steps of any sign. */
static poet_status fold_slice(const Onnx__NodeProto *np, const fold_input *in, int n_in, tensor *out, poet_err *err)
{
    const tensor *x = in[0].t;
    if (n_in < 3 || !in[1].t || !in[2].t) return onnx_refuse(np, "a slice of a constant without starts and ends", err);
    int64_t start[TENSOR_MAX_DIMS] = {0}, step[TENSOR_MAX_DIMS], dims[TENSOR_MAX_DIMS];
    for (int k = 0; k < x->ndim; k++) step[k] = 1, dims[k] = x->dims[k];
    for (uint64_t j = 0; j < in[1].t->n; j++) {
        int a = (int)j;
        if (n_in > 3 && in[3].t && (j >= in[3].t->n || !axis_in(tensor_int(in[3].t, j), x->ndim, &a)))
            return onnx_refuse(np, "an axis out of range", err);
        if (a >= x->ndim || j >= in[2].t->n) return onnx_refuse(np, "starts and ends do not match the input", err);
        int64_t d = x->dims[a], s = tensor_int(in[1].t, j), e = tensor_int(in[2].t, j);
        int64_t st = n_in > 4 && in[4].t && j < in[4].t->n ? tensor_int(in[4].t, j) : 1;
        if (st == 0) return onnx_refuse(np, "a step of 0", err);
        s = s < 0 ? s + d : s, e = e < 0 ? e + d : e;
        if (st > 0) s = s < 0 ? 0 : s > d ? d : s, e = e < 0 ? 0 : e > d ? d : e;
        else s = s < 0 ? -1 : s > d - 1 ? d - 1 : s, e = e < -1 ? -1 : e > d - 1 ? d - 1 : e;
        start[a] = s, step[a] = st;
        dims[a] = st > 0 ? (e > s ? (e - s + st - 1) / st : 0) : (s > e ? (s - e - st - 1) / -st : 0);
    }
    poet_status st = tensor_alloc(out, x->is_float, x->ndim, dims, err);
    if (st) return st;
    for (uint64_t o = 0; o < out->n; o++) {
        uint64_t rest = o, src = 0, stride = 1;
        for (int k = x->ndim - 1; k >= 0; k--) {
            int64_t c = (int64_t)(rest % (uint64_t)dims[k]);
            rest /= (uint64_t)dims[k];
            src += (uint64_t)(start[k] + c * step[k]) * stride;
            stride *= (uint64_t)x->dims[k];
        }
        copy_elem(out, o, x, src);
    }
    return POET_OK;
}

static poet_status fold_constant_of_shape(const Onnx__NodeProto *np, const tensor *shape, tensor *out, poet_err *err)
{
    const Onnx__AttributeProto *a = attr_find(np, "value");
    tensor v = {0};
    poet_status st = POET_OK;
    if (a && a->t && (st = tensor_from_proto(a->t, &v, "ConstantOfShape", err))) return st;
    if (shape->n > TENSOR_MAX_DIMS) return onnx_refuse(np, "too many dimensions", err);
    int64_t dims[TENSOR_MAX_DIMS];
    for (uint64_t k = 0; k < shape->n; k++) dims[k] = tensor_int(shape, k);
    bool is_float = a && a->t ? v.is_float : true;
    st = tensor_alloc(out, is_float, (int)shape->n, dims, err);
    for (uint64_t k = 0; !st && k < out->n; k++) {
        if (is_float) out->f[k] = v.n ? v.f[0] : 0.0f;
        else out->i[k] = v.n ? v.i[0] : 0;
    }
    tensor_free(&v);
    return st;
}

static poet_status fold_range(const Onnx__NodeProto *np, const fold_input *in, tensor *out, poet_err *err)
{
    double s = tensor_real(in[0].t, 0), e = tensor_real(in[1].t, 0), d = tensor_real(in[2].t, 0);
    if (d == 0) return onnx_refuse(np, "a delta of 0", err);
    double count = ceil((e - s) / d);
    int64_t n = count > 0 ? (int64_t)count : 0;
    bool is_float = in[0].t->is_float;
    poet_status st = tensor_alloc(out, is_float, 1, &n, err);
    for (int64_t k = 0; !st && k < n; k++) {
        if (is_float) out->f[k] = (float)(s + (double)k * d);
        else out->i[k] = (int64_t)s + k * (int64_t)d;
    }
    return st;
}

static poet_status fold_where(const Onnx__NodeProto *np, const fold_input *in, tensor *out, poet_err *err)
{
    int nd1, nd;
    int64_t d1[TENSOR_MAX_DIMS], dims[TENSOR_MAX_DIMS];
    tensor tmp = {0};
    poet_status st = broadcast_shape(np, in[1].t, in[2].t, &nd1, d1, err);
    if (st) return st;
    tmp.ndim = nd1;
    memcpy(tmp.dims, d1, (size_t)nd1 * sizeof *d1);
    if ((st = broadcast_shape(np, in[0].t, &tmp, &nd, dims, err))) return st;
    bool is_float = in[1].t->is_float || in[2].t->is_float;
    if ((st = tensor_alloc(out, is_float, nd, dims, err))) return st;
    for (uint64_t o = 0; o < out->n; o++) {
        bool c = tensor_real(in[0].t, bcast_index(in[0].t, out, o)) != 0;
        const tensor *src = c ? in[1].t : in[2].t;
        copy_elem(out, o, src, bcast_index(src, out, o));
    }
    return POET_OK;
}

static poet_status fold_expand(const Onnx__NodeProto *np, const tensor *x, const tensor *shape, tensor *out,
                               poet_err *err)
{
    if (shape->n > TENSOR_MAX_DIMS) return onnx_refuse(np, "too many dimensions", err);
    tensor target = {0};
    target.ndim = (int)shape->n;
    for (uint64_t k = 0; k < shape->n; k++) target.dims[k] = tensor_int(shape, k);
    int nd;
    int64_t dims[TENSOR_MAX_DIMS];
    poet_status st = broadcast_shape(np, x, &target, &nd, dims, err);
    if (st || (st = tensor_alloc(out, x->is_float, nd, dims, err))) return st;
    for (uint64_t o = 0; o < out->n; o++) copy_elem(out, o, x, bcast_index(x, out, o));
    return POET_OK;
}

static poet_status fold_transpose(const Onnx__NodeProto *np, const tensor *x, tensor *out, poet_err *err)
{
    int n;
    const int64_t *perm = attr_ints(np, "perm", &n);
    int64_t p[TENSOR_MAX_DIMS], dims[TENSOR_MAX_DIMS];
    if (n >= 0 && n != x->ndim) return onnx_refuse(np, "perm of the wrong length", err);
    for (int k = 0; k < x->ndim; k++) {
        p[k] = n >= 0 ? perm[k] : x->ndim - 1 - k;
        if (p[k] < 0 || p[k] >= x->ndim) return onnx_refuse(np, "perm out of range", err);
        dims[k] = x->dims[p[k]];
    }
    poet_status st = tensor_alloc(out, x->is_float, x->ndim, dims, err);
    if (st) return st;
    uint64_t stride[TENSOR_MAX_DIMS];
    for (int k = x->ndim - 1, s = 1; k >= 0; k--) stride[k] = (uint64_t)s, s *= (int)x->dims[k];
    for (uint64_t o = 0; o < out->n; o++) {
        uint64_t rest = o, src = 0;
        for (int k = x->ndim - 1; k >= 0; k--) {
            src += (rest % (uint64_t)dims[k]) * stride[p[k]];
            rest /= (uint64_t)dims[k];
        }
        copy_elem(out, o, x, src);
    }
    return POET_OK;
}

static poet_status fold_dispatch(const Onnx__NodeProto *np, const fold_input *in, int n_in, tensor *out, poet_err *err)
{
    const tensor *a = n_in > 0 ? in[0].t : NULL, *b = n_in > 1 ? in[1].t : NULL;
    if (onnx_is_op(np, "Shape") && n_in >= 1 && (in[0].t || in[0].shape)) return fold_shape(np, &in[0], out, err);
    for (int j = 0; j < n_in; j++)
        if (!in[j].t && !(onnx_is_op(np, "Slice") && j >= 3) && !(onnx_is_op(np, "Clip") && j >= 1))
            return onnx_refuse(np, "an input is neither a constant nor computed", err);
    if (!a) return onnx_refuse(np, "no input", err);
    if ((onnx_is_op(np, "Add") || onnx_is_op(np, "Sub") || onnx_is_op(np, "Mul") || onnx_is_op(np, "Div") || onnx_is_op(np, "Pow") ||
         onnx_is_op(np, "Equal") || onnx_is_op(np, "Mod")) && b)
        return fold_binary(np, a, b, out, err);
    if (onnx_is_op(np, "Cast") || onnx_is_op(np, "Identity") || onnx_is_op(np, "Neg") || onnx_is_op(np, "Sqrt") || onnx_is_op(np, "Floor") ||
        onnx_is_op(np, "Ceil"))
        return fold_unary(np, a, out, err);
    if (onnx_is_op(np, "Gather") && b) return fold_gather(np, a, b, out, err);
    if (onnx_is_op(np, "Concat")) return fold_concat(np, in, n_in, out, err);
    if (onnx_is_op(np, "Unsqueeze") || onnx_is_op(np, "Squeeze")) return fold_axes(np, in, n_in, out, err);
    if (onnx_is_op(np, "Reshape") && b) return fold_reshape(np, a, b, out, err);
    if (onnx_is_op(np, "Slice")) return fold_slice(np, in, n_in, out, err);
    if (onnx_is_op(np, "ConstantOfShape")) return fold_constant_of_shape(np, a, out, err);
    if (onnx_is_op(np, "Range") && n_in == 3) return fold_range(np, in, out, err);
    if (onnx_is_op(np, "Where") && n_in == 3) return fold_where(np, in, out, err);
    if (onnx_is_op(np, "Expand") && b) return fold_expand(np, a, b, out, err);
    if (onnx_is_op(np, "Transpose")) return fold_transpose(np, a, out, err);
    return onnx_refuse(np, "poet cannot compute this op on constants", err);
}

poet_status fold_node(const Onnx__NodeProto *np, const fold_input *in, int n_in, tensor *out, poet_err *err)
{
    memset(out, 0, sizeof *out);
    poet_status st = fold_dispatch(np, in, n_in, out, err);
    if (st) tensor_free(out); /* a fold that failed half-way keeps nothing */
    return st;
}
