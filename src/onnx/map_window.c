/* ONNX in, by op family: windows: convolutions, pools and the zero padding before them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "importer.h"

enum { WINDOW_MAX = 1 << 20 }; /* a window's sizes, strides, dilations and pads */

/* kernel_shape, strides, pads, dilations of a window over `dims` (2: H and
 * W; 1: L of [N, C, L], which poet reads as [N, C, 1, L]). */
static poet_status window_attrs(importer *im, const Onnx__NodeProto *np, int dims, poet_attrs *a, bool pool)
{
    int nk, ns, np_, nd;
    const int64_t *k = attr_ints(np, "kernel_shape", &nk), *s = attr_ints(np, "strides", &ns);
    const int64_t *p = attr_ints(np, "pads", &np_), *d = attr_ints(np, "dilations", &nd);
    static const char *const AUTO_PAD[] = {"NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"};
    bool known_pad = false;
    for (int j = 0; j < 4; j++) known_pad = known_pad || attr_is(np, "auto_pad", "NOTSET", AUTO_PAD[j]);
    if (!known_pad) return im_refuse(im, np, "auto_pad is none of NOTSET, VALID, SAME_UPPER and SAME_LOWER");
    if ((nk >= 0 && nk != dims) || (ns >= 0 && ns != dims) || (np_ >= 0 && np_ != 2 * dims) ||
        (nd >= 0 && nd != dims) || dims < 1 || dims > 2)
        return im_refuse(im, np, "only 1-d (N, C, L) and 2-d (N, C, H, W) windows are supported");
    for (int j = 0; pool && j < nd; j++)
        if (d[j] != 1) return im_refuse(im, np, "pools with dilation are not supported");
    if (nk < 0 && pool) return im_refuse(im, np, "kernel_shape is required");
    /* each entry as poet keeps it, in 32 bits: checked before it is narrowed */
    for (int j = 0; j < nk; j++)
        if (k[j] < 1 || k[j] > WINDOW_MAX) return im_refuse(im, np, "a kernel_shape entry is outside 1 to 2^20");
    for (int j = 0; j < ns; j++)
        if (s[j] < 1 || s[j] > WINDOW_MAX) return im_refuse(im, np, "a stride is outside 1 to 2^20");
    for (int j = 0; j < nd; j++)
        if (d[j] < 1 || d[j] > WINDOW_MAX) return im_refuse(im, np, "a dilation is outside 1 to 2^20");
    for (int j = 0; j < np_; j++)
        if (p[j] < 0 || p[j] > WINDOW_MAX) return im_refuse(im, np, "a pad is outside 0 to 2^20");
    int h = dims - 2; /* H's index in the lists: -1 where there is none */
    if (nk >= 0) a->kh = (int32_t)(h >= 0 ? k[h] : 1), a->kw = (int32_t)k[dims - 1];
    a->sh = (int32_t)(h >= 0 && ns >= 0 ? s[h] : 1), a->sw = (int32_t)(ns >= 0 ? s[dims - 1] : 1);
    a->dh = (int32_t)(h >= 0 && nd >= 0 ? d[h] : 1), a->dw = (int32_t)(nd >= 0 ? d[dims - 1] : 1);
    if (np_ >= 0) { /* begins of each axis, then ends */
        a->pt = (int32_t)(h >= 0 ? p[h] : 0), a->pb = (int32_t)(h >= 0 ? p[dims + h] : 0);
        a->pl = (int32_t)p[dims - 1], a->pr = (int32_t)p[2 * dims - 1];
    }
    return POET_OK;
}

/* H and W of a window's input: [N, C, L] is [N, C, 1, L]. */
static void window_size(const poet_shape *x, int64_t size[2])
{
    size[0] = x->ndim == 3 ? 1 : x->dim[2], size[1] = x->dim[x->ndim - 1];
}

/* auto_pad SAME_UPPER or SAME_LOWER (Keras' "same", through converters):
 * the padding that gives ceil(size / stride) outputs, its odd unit at the
 * end (UPPER) or at the beginning (LOWER). */
static void same_pads(const Onnx__NodeProto *np, const poet_shape *x, poet_attrs *a)
{
    bool upper = attr_is(np, "auto_pad", "NOTSET", "SAME_UPPER");
    if (!upper && !attr_is(np, "auto_pad", "NOTSET", "SAME_LOWER")) return;
    int64_t size[2], k[2] = {a->kh, a->kw}, s[2] = {a->sh, a->sw}, d[2] = {a->dh, a->dw};
    window_size(x, size);
    int32_t *lo[2] = {&a->pt, &a->pl}, *hi[2] = {&a->pb, &a->pr};
    for (int j = 0; j < 2; j++) {
        int64_t out = (size[j] + s[j] - 1) / s[j], total = (out - 1) * s[j] + (k[j] - 1) * d[j] + 1 - size[j];
        if (total < 0) total = 0;
        *lo[j] = (int32_t)(upper ? total / 2 : total - total / 2), *hi[j] = (int32_t)(total - *lo[j]);
    }
}

/* Adds the zero padding a Pad before the window left to it. */
static void add_pads(poet_attrs *a, const int32_t pad[4])
{
    a->pt += pad[0], a->pl += pad[1], a->pb += pad[2], a->pr += pad[3];
}

poet_status im_map_conv(importer *im, const Onnx__NodeProto *np)
{
    int32_t pad[4];
    int x = im_padded_activation(im, np, 0, pad);
    const value *w = x < 0 ? NULL : im_known_value(im, np, 1);
    if (!w) return im->err->status;
    const value *b = im_input_name(np, 2) ? im_known_value(im, np, 2) : NULL;
    if (im_input_name(np, 2) && !b) return im->err->status;
    int dims = (int)w->t.ndim - 2; /* 1-d convolutions read [N, C, L] as [N, C, 1, L] */
    if (dims != 1 && dims != 2) return im_refuse(im, np, "only 1-d and 2-d convolutions are supported");
    int64_t kh = dims == 2 ? w->t.dims[2] : 1, kw = w->t.dims[w->t.ndim - 1], groups;
    if (!attr_int_in(np, "group", 1, 1, im_shape_of(im, x)->ndim > 1 ? im_shape_of(im, x)->dim[1] : 1, &groups))
        return im_refuse(im, np, "group is outside 1 to its input's channels");
    poet_attrs a = {.features = (int32_t)w->t.dims[0], .groups = (int32_t)groups,
                    .kh = (int32_t)kh, .kw = (int32_t)kw, .flags = b ? 0 : POET_ATTR_NO_BIAS};
    poet_status st = window_attrs(im, np, dims, &a, false);
    if (st) return st;
    same_pads(np, im_shape_of(im, x), &a);
    add_pads(&a, pad);
    if (a.kh != kh || a.kw != kw) return im_refuse(im, np, "kernel_shape differs from the weights'");
    if (im_shape_of(im, x)->ndim != dims + 2) return im_refuse(im, np, "its input's rank does not fit its weights'");
    int v = im_add_node(im, POET_OP_CONV2D, &x, 1, &a, np->output[0]);
    if (v < 0) return im->err->status;
    if (w->t.n + (b ? b->t.n : 0) != im->m->graph.nodes[v].params)
        return im_refuse(im, np, "its weights or bias do not fit its input's channels and groups");
    if ((st = im_fill(im, w, false, 0, 0, 0)) || (b && (st = im_fill(im, b, false, w->t.n, 0, 0)))) return st;
    return im_name_output(im, np, 0, v);
}

/* ceil_mode 1: windows that start inside the (left-padded) input and run
 * past its end count too. The same windows come from padding the bottom
 * and right further: positions past the end are absent to a max pool, and
 * to an average that does not count padding. */
static void ceil_windows(const poet_shape *x, poet_attrs *a)
{
    int64_t size[2], k[2] = {a->kh, a->kw}, s[2] = {a->sh, a->sw};
    window_size(x, size);
    int32_t *lo[2] = {&a->pt, &a->pl}, *hi[2] = {&a->pb, &a->pr};
    for (int d = 0; d < 2; d++) {
        int64_t span = size[d] + *lo[d] + *hi[d] - k[d];
        if (span < 0) continue;
        int64_t out = (span + s[d] - 1) / s[d] + 1;
        if ((out - 1) * s[d] >= size[d] + *lo[d]) out--; /* the last window must start inside */
        int64_t need = (out - 1) * s[d] + k[d] - size[d] - *lo[d];
        if (need > *hi[d]) *hi[d] = (int32_t)need;
    }
}

poet_status im_map_pool(importer *im, const Onnx__NodeProto *np, bool max)
{
    if (max && np->n_output > 1 && np->output[1] && *np->output[1])
        return im_refuse(im, np, "the Indices output is not supported");
    if (max && attr_int(np, "storage_order", 0)) return im_refuse(im, np, "storage_order 1 is not supported");
    bool count_pad = !max && attr_int(np, "count_include_pad", 0);
    poet_attrs a = {0};
    int nk;
    attr_ints(np, "kernel_shape", &nk);
    poet_status st = window_attrs(im, np, nk < 0 ? 2 : nk, &a, true);
    int32_t pad[4] = {0};
    int x = st ? -1 : max ? im_activation(im, np, 0) : im_padded_activation(im, np, 0, pad);
    if (x < 0) return st ? st : im->err->status;
    same_pads(np, im_shape_of(im, x), &a);
    if (im_padded(pad)) {
        /* the zeros a Pad adds are elements of the input: the mean counts them */
        if (!count_pad && (a.pt || a.pl || a.pb || a.pr))
            return im_refuse(im, np, "a Pad before it while its own pads are not counted (count_include_pad 0)");
        count_pad = true;
        add_pads(&a, pad);
    }
    a.flags = count_pad ? POET_ATTR_COUNT_PAD : 0;
    if (attr_int(np, "ceil_mode", 0)) {
        if (count_pad) return im_refuse(im, np, "ceil_mode 1 with count_include_pad 1 is not supported");
        ceil_windows(im_shape_of(im, x), &a);
    }
    return im_emit(im, np, max ? POET_OP_MAXPOOL2D : POET_OP_AVGPOOL2D, &x, 1, &a);
}

/* Pad with zeros, of H and W: a view, which the Conv or AveragePool that
 * reads it takes into its own padding (PyTorch exports AvgPool2d, and
 * F.pad or nn.ZeroPad2d before a convolution, so). */
poet_status im_map_pad(importer *im, const Onnx__NodeProto *np)
{
    bool constant = attr_is(np, "mode", "constant", "constant");
    if (im_input_name(np, 3)) return im_refuse(im, np, "its axes input is not supported");
    const value *x = im_viewed_input(im, np, 0, true);
    if (!x) return im->err->status;
    if (x->node < 0) return im_activation(im, np, 0), im->err->status;
    int64_t pads[2 * TENSOR_MAX_DIMS];
    int n;
    const int64_t *attr = attr_ints(np, "pads", &n); /* below opset 11 */
    if (n < 0) {
        const tensor *t = im_known(im, np, 1, true);
        if (!t) return im->err->status;
        n = (int)t->n;
        for (int k = 0; k < n && k < 2 * TENSOR_MAX_DIMS; k++) pads[k] = tensor_int(t, (uint64_t)k);
    } else {
        for (int k = 0; k < n && k < 2 * TENSOR_MAX_DIMS; k++) pads[k] = attr[k];
    }
    onnx_shape s = im_value_shape(im, x);
    if (n != 2 * s.ndim) return im_refuse(im, np, "its pads do not have two values per dimension of its input");
    const tensor *with = im_input_name(np, 2) ? im_known(im, np, 2, true) : NULL;
    if (im_input_name(np, 2) && !with) return im->err->status;
    double zero = with && with->n ? tensor_real(with, 0) : attr_float(np, "value", 0.0f);
    bool any = false, spatial = s.ndim == 4 && !x->view.shape.ndim;
    for (int k = 0; k < n; k++) {
        if (pads[k] < 0) return im_refuse(im, np, "negative pads (cropping) are not supported");
        if (pads[k] > INT32_MAX / 4) return im_refuse(im, np, "its pads are too large");
        any |= pads[k] != 0;
        spatial &= pads[k] == 0 || k % s.ndim >= 2;
    }
    if (!any) return im_name_view(im, np, 0, x->node, &x->view);
    if (!constant || zero != 0) return im_refuse(im, np, "only padding with zeros (mode constant, value 0) is supported");
    if (!spatial) return im_refuse(im, np, "only padding of H and W of an [N, C, H, W] tensor is supported");
    view w = x->view;
    const int64_t add[4] = {pads[2], pads[3], pads[6], pads[7]}; /* begins of H, W, then ends */
    for (int k = 0; k < 4; k++) {
        if (w.pad[k] > INT32_MAX / 2 - add[k]) return im_refuse(im, np, "its pads are too large");
        w.pad[k] += (int32_t)add[k];
    }
    return im_name_view(im, np, 0, x->node, &w);
}
