/* ONNX in: the model's graph into poet's ops, its initializers into poet's
 * weights (docs/onnx.md). Nodes are read in the file's order, which ONNX
 * requires to be topological; a node whose inputs are all known is folded
 * into a constant; the rest map to poet's op registry. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "poet/file.h"

typedef struct importer {
    const Onnx__GraphProto *gp;
    int opset;
    poet_onnx_model *m;
    value *vals;
    int n_vals, cap_vals;
    int *slot; /* open-addressing index into vals by name */
    int slots;
    int *uses; /* per value: consumers in the graph, graph outputs included */
    bool *skip; /* ONNX nodes a pattern already mapped */
    uint64_t cap_params, cap_buffers;
    int cap_bind;
    int batch, folded;
    const char *loss_output; /* the output the loss reads */
    poet_err *err;
} importer;

/* ---- names ---- */

static uint32_t hash_name(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static int find(const importer *im, const char *name)
{
    if (!name || !*name) return -1;
    for (uint32_t k = hash_name(name) & (uint32_t)(im->slots - 1);; k = (k + 1) & (uint32_t)(im->slots - 1)) {
        int v = im->slot[k];
        if (v < 0) return -1;
        if (strcmp(im->vals[v].name, name) == 0) return v;
    }
}

static poet_status grow_slots(importer *im)
{
    int slots = im->slots ? 2 * im->slots : 1024;
    int *slot = malloc((size_t)slots * sizeof *slot);
    if (!slot) return poet_fail(im->err, POET_ERR_NOMEM, "out of memory reading the ONNX graph");
    for (int k = 0; k < slots; k++) slot[k] = -1;
    for (int v = 0; v < im->n_vals; v++) {
        uint32_t k = hash_name(im->vals[v].name) & (uint32_t)(slots - 1);
        while (slot[k] >= 0) k = (k + 1) & (uint32_t)(slots - 1);
        slot[k] = v;
    }
    free(im->slot);
    im->slot = slot;
    im->slots = slots;
    return POET_OK;
}

/* Adds a value, or returns the placeholder a reader created for the name;
 * a name produced twice is refused. Returns its index or -1. */
static int define(importer *im, const char *name)
{
    int v = find(im, name);
    if (v >= 0 && (im->vals[v].known || im->vals[v].node >= 0))
        return poet_fail(im->err, POET_ERR_PARSE, "the name '%s' is produced twice (the graph is not valid ONNX)",
                         name), -1;
    if (v >= 0) return v;
    if ((im->n_vals + 1) * 2 > im->slots && grow_slots(im)) return -1;
    if (im->n_vals == im->cap_vals) {
        int cap = im->cap_vals ? 2 * im->cap_vals : 256;
        value *p = realloc(im->vals, (size_t)cap * sizeof *p);
        if (!p) return poet_fail(im->err, POET_ERR_NOMEM, "out of memory reading the ONNX graph"), -1;
        im->vals = p;
        im->cap_vals = cap;
    }
    char *copy = malloc(strlen(name) + 1);
    if (!copy) return poet_fail(im->err, POET_ERR_NOMEM, "out of memory reading the ONNX graph"), -1;
    strcpy(copy, name);
    v = im->n_vals++;
    im->vals[v] = (value){copy, -1, false, {0}, {FROM_NONE, -1, false}, {{0}, {0, {0}}}, -1};
    uint32_t k = hash_name(name) & (uint32_t)(im->slots - 1);
    while (im->slot[k] >= 0) k = (k + 1) & (uint32_t)(im->slots - 1);
    im->slot[k] = v;
    return v;
}

/* Defines name as a known tensor, taking t over (freed on failure); its
 * index, or -1 after an error. */
static int define_known(importer *im, const char *name, tensor *t)
{
    int v = define(im, name);
    if (v < 0) {
        tensor_free(t);
        return -1;
    }
    im->vals[v].known = true;
    im->vals[v].t = *t;
    return v;
}

static poet_status refuse(importer *im, const Onnx__NodeProto *np, const char *what)
{
    return onnx_refuse(np, what, im->err);
}

static const char *input_name(const Onnx__NodeProto *np, int j)
{
    return j < (int)np->n_input && np->input[j] && *np->input[j] ? np->input[j] : NULL;
}

static bool padded(const int32_t pad[4]) { return pad[0] || pad[1] || pad[2] || pad[3]; }

/* Input j as a value, a view of its node included; NULL (absent optional
 * input) after an error when required. */
static const value *viewed_input(importer *im, const Onnx__NodeProto *np, int j, bool required)
{
    const char *name = input_name(np, j);
    int v = name ? find(im, name) : -1;
    if (v >= 0 && !im->vals[v].known && im->vals[v].node < 0) v = -1; /* named, not produced yet */
    if (v < 0 && (required || name))
        poet_fail(im->err, POET_ERR_PARSE, "node '%s' (%s): input '%s' is not computed before it (dangling, or the "
                  "graph is not in topological order)", onnx_node_label(np), np->op_type, name ? name : "(missing)");
    return v < 0 ? NULL : &im->vals[v];
}

/* Input j as a value that is its node as it is. */
static const value *input_value(importer *im, const Onnx__NodeProto *np, int j, bool required)
{
    const value *v = viewed_input(im, np, j, required);
    if (v && padded(v->view.pad))
        return onnx_refuse(np, "it reads a zero-padded tensor (a Pad folds only into the Conv or AveragePool that "
                           "reads it)", im->err), NULL;
    if (v && v->view.shape.ndim)
        return onnx_refuse(np, "an input of more than 4 dimensions (poet reads such only through Reshape, "
                           "Transpose, Squeeze and Unsqueeze)", im->err), NULL;
    return v;
}

/* Input j as a poet node (an activation); -1 after an error. */
static int activation(importer *im, const Onnx__NodeProto *np, int j)
{
    const value *v = input_value(im, np, j, true);
    if (!v) return -1;
    if (v->node < 0) {
        refuse(im, np, "an input poet needs computed at training time is a constant here");
        return -1;
    }
    return v->node;
}

/* Input j as a known tensor; NULL after an error when required. */
static const tensor *known(importer *im, const Onnx__NodeProto *np, int j, bool required)
{
    const value *v = input_value(im, np, j, required);
    if (!v) return NULL;
    if (!v->known) {
        refuse(im, np, "an input poet needs as a constant or initializer is computed at training time");
        return NULL;
    }
    return &v->t;
}

static const value *known_value(importer *im, const Onnx__NodeProto *np, int j)
{
    return known(im, np, j, true) ? &im->vals[find(im, input_name(np, j))] : NULL;
}

/* ---- poet nodes and their weights ---- */

static poet_status reserve_floats(importer *im, float **p, uint64_t *cap, uint64_t need)
{
    if (need <= *cap) return POET_OK;
    uint64_t c = *cap ? *cap : 4096;
    while (c < need) c *= 2;
    float *q = realloc(*p, (size_t)c * sizeof *q);
    if (!q) return poet_fail(im->err, POET_ERR_NOMEM, "out of memory for the model's weights");
    *p = q;
    *cap = c;
    return POET_OK;
}

/* Adds a poet node for the ONNX output `out`; its parameters and buffers are
 * zero until fill() writes them. Returns the node or -1. */
static int add_node(importer *im, poet_op op, const int *inputs, int n_inputs, const poet_attrs *a, const char *out)
{
    poet_graph *g = &im->m->graph;
    char name[POET_NAME_BYTES];
    snprintf(name, sizeof name, "%.*s", POET_NAME_BYTES - 1, out);
    int v = poet_graph_add(g, op, inputs, n_inputs, a, name);
    if (v < 0) return poet_fail(im->err, g->err.status, "%s", g->err.msg), -1;
    const poet_node *n = &g->nodes[v];
    if (reserve_floats(im, &im->m->params, &im->cap_params, im->m->n_params + n->params) ||
        reserve_floats(im, &im->m->buffers, &im->cap_buffers, im->m->n_buffers + n->buffers))
        return -1;
    if (n->params) memset(im->m->params + im->m->n_params, 0, (size_t)n->params * sizeof(float));
    if (n->buffers) memset(im->m->buffers + im->m->n_buffers, 0, (size_t)n->buffers * sizeof(float));
    im->m->n_params += n->params;
    im->m->n_buffers += n->buffers;
    return v;
}

/* The name of a step np maps to beside its own output: "OUTPUT/suffix",
 * the output cut where the two would not fit. */
static void step_name(char name[POET_NAME_BYTES], const Onnx__NodeProto *np, const char *suffix)
{
    snprintf(name, POET_NAME_BYTES, "%.*s/%s", POET_NAME_BYTES - 2 - (int)strlen(suffix), np->output[0], suffix);
}

/* A one-input step of np's mapping, named by step_name. */
static int add_step(importer *im, const Onnx__NodeProto *np, poet_op op, int x, const poet_attrs *a, const char *suffix)
{
    char name[POET_NAME_BYTES];
    step_name(name, np, suffix);
    return add_node(im, op, &x, 1, a, name);
}

/* Names output k of np as poet node v. */
static poet_status name_output(importer *im, const Onnx__NodeProto *np, int k, int v)
{
    int at = k < (int)np->n_output ? define(im, np->output[k]) : -1;
    if (at < 0) return im->err->status ? im->err->status : refuse(im, np, "an output is missing");
    im->vals[at].node = v;
    return POET_OK;
}

/* Adds a poet node for np's first output and names that output after it. */
static poet_status emit(importer *im, const Onnx__NodeProto *np, poet_op op, const int *inputs, int n_inputs,
                        const poet_attrs *a)
{
    int v = add_node(im, op, inputs, n_inputs, a, np->output[0]);
    return v < 0 ? im->err->status : name_output(im, np, 0, v);
}

/* Copies tensor t into the last node's parameters (or buffers) at offset,
 * transposed from [rows][cols] when rows > 0, and records where it goes
 * back to. */
static poet_status fill(importer *im, const value *src, bool buffer, uint64_t offset, int64_t rows, int64_t cols)
{
    const poet_node *n = &im->m->graph.nodes[im->m->graph.n_nodes - 1];
    const tensor *t = &src->t;
    uint64_t count = buffer ? n->buffers : n->params;
    float *base = (buffer ? im->m->buffers + im->m->n_buffers : im->m->params + im->m->n_params) - count + offset;
    if (offset + t->n > count)
        return poet_fail(im->err, POET_ERR_INVALID, "tensor '%s' does not fit node '%s'", src->name, n->name);
    for (uint64_t k = 0; k < t->n; k++) base[transposed_at(k, rows, cols)] = (float)tensor_real(t, k);
    if (src->from.kind == FROM_NONE) return POET_OK; /* a folded constant: nothing to write back */
    /* the ONNX tensor is src, or its transpose; poet holds that, or its transpose */
    bool flip = (rows > 0) != src->from.transposed;
    int64_t orows = src->from.transposed ? t->dims[1] : t->dims[0], ocols = src->from.transposed ? t->dims[0] : t->dims[1];
    if (im->m->n_bind == im->cap_bind) {
        int cap = im->cap_bind ? 2 * im->cap_bind : 64;
        binding *b = realloc(im->m->bind, (size_t)cap * sizeof *b);
        if (!b) return poet_fail(im->err, POET_ERR_NOMEM, "out of memory reading the ONNX graph");
        im->m->bind = b;
        im->cap_bind = cap;
    }
    uint64_t first = (buffer ? im->m->n_buffers : im->m->n_params) - count;
    im->m->bind[im->m->n_bind++] = (binding){src->from, buffer, first + offset, t->n, flip ? orows : 0, flip ? ocols : 0};
    return POET_OK;
}

/* ---- the ops ---- */

static int64_t prod(const int64_t *d, int n)
{
    int64_t p = 1;
    for (int k = 0; k < n; k++) p *= d[k];
    return p;
}

static const poet_shape *shape_of(const importer *im, int node) { return &im->m->graph.nodes[node].shape; }

/* The shape ONNX gives the value of a node: its node's, or its view's. */
static onnx_shape value_shape(const importer *im, const value *v)
{
    if (v->view.shape.ndim) return v->view.shape;
    const poet_shape *n = shape_of(im, v->node);
    onnx_shape s = {n->ndim, {0}};
    for (int k = 0; k < n->ndim; k++) s.dim[k] = n->dim[k];
    if (s.ndim == 4) s.dim[2] += v->view.pad[0] + v->view.pad[2], s.dim[3] += v->view.pad[1] + v->view.pad[3];
    return s;
}

/* Names output k of np as node v seen through view w. */
static poet_status name_view(importer *im, const Onnx__NodeProto *np, int k, int v, const view *w)
{
    view copy = *w; /* w may lie in im->vals, which naming may move */
    poet_status st = name_output(im, np, k, v);
    if (!st) im->vals[find(im, np->output[k])].view = copy;
    return st;
}

/* Input j as a node, read in the shape *s ONNX gives it (which may have
 * more than 4 dimensions); -1 after an error. */
static int shaped_activation(importer *im, const Onnx__NodeProto *np, int j, onnx_shape *s)
{
    const value *v = viewed_input(im, np, j, true);
    if (v && padded(v->view.pad)) v = input_value(im, np, j, true); /* refuses it */
    if (v && v->node < 0) return activation(im, np, j);
    if (v) *s = value_shape(im, v);
    return v ? v->node : -1;
}

/* Input j as a node, and the zero padding (top, left, bottom, right) a Pad
 * before it leaves to np; -1 after an error. */
static int padded_activation(importer *im, const Onnx__NodeProto *np, int j, int32_t pad[4])
{
    const value *v = viewed_input(im, np, j, true);
    if (v && v->view.shape.ndim) v = input_value(im, np, j, true); /* refuses it */
    if (v && v->node < 0) return activation(im, np, j);
    if (v) memcpy(pad, v->view.pad, sizeof v->view.pad);
    return v ? v->node : -1;
}

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
    if (!known_pad) return refuse(im, np, "auto_pad is none of NOTSET, VALID, SAME_UPPER and SAME_LOWER");
    if ((nk >= 0 && nk != dims) || (ns >= 0 && ns != dims) || (np_ >= 0 && np_ != 2 * dims) ||
        (nd >= 0 && nd != dims) || dims < 1 || dims > 2)
        return refuse(im, np, "only 1-d (N, C, L) and 2-d (N, C, H, W) windows are supported");
    for (int j = 0; pool && j < nd; j++)
        if (d[j] != 1) return refuse(im, np, "pools with dilation are not supported");
    if (nk < 0 && pool) return refuse(im, np, "kernel_shape is required");
    /* each entry as poet keeps it, in 32 bits: checked before it is narrowed */
    for (int j = 0; j < nk; j++)
        if (k[j] < 1 || k[j] > WINDOW_MAX) return refuse(im, np, "a kernel_shape entry is outside 1 to 2^20");
    for (int j = 0; j < ns; j++)
        if (s[j] < 1 || s[j] > WINDOW_MAX) return refuse(im, np, "a stride is outside 1 to 2^20");
    for (int j = 0; j < nd; j++)
        if (d[j] < 1 || d[j] > WINDOW_MAX) return refuse(im, np, "a dilation is outside 1 to 2^20");
    for (int j = 0; j < np_; j++)
        if (p[j] < 0 || p[j] > WINDOW_MAX) return refuse(im, np, "a pad is outside 0 to 2^20");
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

static poet_status map_conv(importer *im, const Onnx__NodeProto *np)
{
    int32_t pad[4];
    int x = padded_activation(im, np, 0, pad);
    const value *w = x < 0 ? NULL : known_value(im, np, 1);
    if (!w) return im->err->status;
    const value *b = input_name(np, 2) ? known_value(im, np, 2) : NULL;
    if (input_name(np, 2) && !b) return im->err->status;
    int dims = (int)w->t.ndim - 2; /* 1-d convolutions read [N, C, L] as [N, C, 1, L] */
    if (dims != 1 && dims != 2) return refuse(im, np, "only 1-d and 2-d convolutions are supported");
    int64_t kh = dims == 2 ? w->t.dims[2] : 1, kw = w->t.dims[w->t.ndim - 1], groups;
    if (!attr_int_in(np, "group", 1, 1, shape_of(im, x)->ndim > 1 ? shape_of(im, x)->dim[1] : 1, &groups))
        return refuse(im, np, "group is outside 1 to its input's channels");
    poet_attrs a = {.features = (int32_t)w->t.dims[0], .groups = (int32_t)groups,
                    .kh = (int32_t)kh, .kw = (int32_t)kw, .flags = b ? 0 : POET_ATTR_NO_BIAS};
    poet_status st = window_attrs(im, np, dims, &a, false);
    if (st) return st;
    same_pads(np, shape_of(im, x), &a);
    add_pads(&a, pad);
    if (a.kh != kh || a.kw != kw) return refuse(im, np, "kernel_shape differs from the weights'");
    if (shape_of(im, x)->ndim != dims + 2) return refuse(im, np, "its input's rank does not fit its weights'");
    int v = add_node(im, POET_OP_CONV2D, &x, 1, &a, np->output[0]);
    if (v < 0) return im->err->status;
    if (w->t.n + (b ? b->t.n : 0) != im->m->graph.nodes[v].params)
        return refuse(im, np, "its weights or bias do not fit its input's channels and groups");
    if ((st = fill(im, w, false, 0, 0, 0)) || (b && (st = fill(im, b, false, w->t.n, 0, 0)))) return st;
    return name_output(im, np, 0, v);
}

/* A linear layer from weights kept [out][in] (transposed: [in][out]) and an
 * optional bias of `out` values. */
static poet_status add_linear(importer *im, const Onnx__NodeProto *np, int x, const value *w, bool transposed,
                              const value *bias, const char *out_name, const Onnx__NodeProto *named, int named_output)
{
    if (w->t.ndim != 2 || !w->t.is_float) return refuse(im, np, "its weights are not a 2-d float tensor");
    int64_t fin = transposed ? w->t.dims[0] : w->t.dims[1], fout = transposed ? w->t.dims[1] : w->t.dims[0];
    const poet_shape *xs = shape_of(im, x);
    if (xs->dim[xs->ndim - 1] != fin) return refuse(im, np, "its weights do not fit its input's last dimension");
    if (bias && bias->t.n != (uint64_t)fout) return refuse(im, np, "its bias does not have one value per output");
    poet_attrs a = {.features = (int32_t)fout, .flags = bias ? 0 : POET_ATTR_NO_BIAS};
    int v = add_node(im, POET_OP_LINEAR, &x, 1, &a, out_name);
    if (v < 0) return im->err->status;
    poet_status st = fill(im, w, false, 0, transposed ? fin : 0, transposed ? fout : 0);
    if (!st && bias) st = fill(im, bias, false, (uint64_t)(fin * fout), 0, 0);
    return st ? st : name_output(im, named, named_output, v);
}

static poet_status map_gemm(importer *im, const Onnx__NodeProto *np)
{
    if (attr_int(np, "transA", 0) || attr_float(np, "alpha", 1.0f) != 1.0f || attr_float(np, "beta", 1.0f) != 1.0f)
        return refuse(im, np, "only Gemm with transA 0, alpha 1 and beta 1 is supported");
    int x = activation(im, np, 0);
    const value *w = x < 0 ? NULL : known_value(im, np, 1);
    if (!w) return im->err->status;
    const value *c = input_name(np, 2) ? known_value(im, np, 2) : NULL;
    if (input_name(np, 2) && !c) return im->err->status;
    if (shape_of(im, x)->ndim != 2) return refuse(im, np, "its input is not 2-d");
    return add_linear(im, np, x, w, attr_int(np, "transB", 0) == 0, c, np->output[0], np, 0);
}

/* The Add that follows a MatMul with a weight, when it adds a bias to it
 * and nothing else reads the product: fused into one linear layer. */
static int bias_add_after(importer *im, int at, const char *product, int64_t features, const value **bias)
{
    if (find(im, product) < 0 ? false : im->uses[find(im, product)] != 1) return -1;
    for (int k = at + 1; k < (int)im->gp->n_node; k++) {
        const Onnx__NodeProto *n = im->gp->node[k];
        if (!onnx_is_op(n, "Add") || n->n_input != 2) continue;
        int side = input_name(n, 0) && strcmp(n->input[0], product) == 0 ? 0
                   : input_name(n, 1) && strcmp(n->input[1], product) == 0 ? 1 : -1;
        if (side < 0) continue;
        int b = find(im, input_name(n, 1 - side));
        if (b < 0 || !im->vals[b].known || !im->vals[b].t.is_float || im->vals[b].t.n != (uint64_t)features ||
            im->vals[b].t.dims[im->vals[b].t.ndim - 1] != features)
            return -1;
        *bias = &im->vals[b];
        return k;
    }
    return -1;
}

/* An op of two activations. */
static poet_status add_pair(importer *im, const Onnx__NodeProto *np, poet_op op, const value *a, const value *b)
{
    int in[2] = {a->node, b->node};
    return emit(im, np, op, in, 2, NULL);
}

static poet_status map_matmul(importer *im, const Onnx__NodeProto *np, int at)
{
    const value *a = input_value(im, np, 0, true), *b = a ? input_value(im, np, 1, true) : NULL;
    if (!b) return im->err->status;
    if (a->node >= 0 && b->node >= 0) return add_pair(im, np, POET_OP_MATMUL, a, b);
    if (a->node < 0 || b->t.ndim != 2) return refuse(im, np, "only x @ W with a 2-d W, or a product of two activations");
    const value *bias = NULL;
    int add = bias_add_after(im, at, np->output[0], b->t.dims[1], &bias);
    if (add < 0) return add_linear(im, np, a->node, b, true, NULL, np->output[0], np, 0);
    im->skip[add] = true;
    const Onnx__NodeProto *addn = im->gp->node[add];
    return add_linear(im, np, a->node, b, true, bias, addn->output[0], addn, 0);
}

/* The trained tensor a known value is: an initializer (through Identity or
 * a folded Transpose), or one broadcast by a folded Expand (ViT's class
 * token); NULL for a constant, or what folded from constants. */
static const value *trained_tensor(const importer *im, const value *v)
{
    if (v->expanded >= 0) v = &im->vals[v->expanded];
    return v->known && v->t.is_float && v->from.kind != FROM_NONE ? v : NULL;
}

/* Whether tensor t broadcasts into shape x without enlarging it (NumPy's
 * rule: trailing dimensions equal, or 1 in t). */
static bool within(const tensor *t, const poet_shape *x)
{
    if (t->ndim > x->ndim) return false;
    for (int k = 1; k <= t->ndim; k++)
        if (t->dims[t->ndim - k] != 1 && t->dims[t->ndim - k] != x->dim[x->ndim - k]) return false;
    return true;
}

static poet_status map_binary(importer *im, const Onnx__NodeProto *np, poet_op op)
{
    const value *a = input_value(im, np, 0, true), *b = a ? input_value(im, np, 1, true) : NULL;
    if (!b) return im->err->status;
    if (a->node >= 0 && b->node >= 0) return add_pair(im, np, op, a, b);
    bool left = a->node < 0;
    const value *operand = left ? a : b;
    int x = left ? b->node : a->node;
    /* an initializer is a trained parameter (PyTorch exports them so); a
     * Constant, or what folded from constants, stays constant */
    const value *trained = trained_tensor(im, operand);
    if (trained && trained != operand && !within(&operand->t, shape_of(im, x)))
        return refuse(im, np, "a trained operand expanded beyond the shape of the other");
    bool param = trained != NULL;
    if (trained) operand = trained;
    if (operand->t.ndim > POET_MAX_DIMS) return refuse(im, np, "a constant operand of more than 4 dimensions");
    poet_attrs at = {.ndim = operand->t.ndim ? operand->t.ndim : 1,
                     .flags = (param ? POET_ATTR_OPERAND_PARAM : POET_ATTR_OPERAND_CONST) | (left ? POET_ATTR_OPERAND_LEFT : 0)};
    at.dim[0] = 1;
    for (int k = 0; k < operand->t.ndim; k++) at.dim[k] = (int32_t)operand->t.dims[k];
    int v = add_node(im, op, &x, 1, &at, np->output[0]);
    if (v < 0) return im->err->status;
    poet_status st = fill(im, operand, !param, 0, 0, 0);
    return st ? st : name_output(im, np, 0, v);
}

/* PRelu: x, or slope x below 0, its slope an initializer that trains
 * (nn.PReLU's weight), broadcast into x. */
static poet_status map_prelu(importer *im, const Onnx__NodeProto *np)
{
    int x = activation(im, np, 0);
    const value *v = x < 0 ? NULL : known_value(im, np, 1);
    if (!v) return im->err->status;
    const value *slope = trained_tensor(im, v);
    if (!slope) return refuse(im, np, "its slope is not an initializer (poet trains it)");
    if (slope->t.ndim > POET_MAX_DIMS) return refuse(im, np, "a slope of more than 4 dimensions");
    poet_attrs a = {.ndim = slope->t.ndim ? slope->t.ndim : 1, .dim = {1}};
    for (int k = 0; k < slope->t.ndim; k++) a.dim[k] = (int32_t)slope->t.dims[k];
    int y = add_node(im, POET_OP_PRELU, &x, 1, &a, np->output[0]);
    if (y < 0) return im->err->status;
    poet_status st = fill(im, slope, false, 0, 0, 0);
    return st ? st : name_output(im, np, 0, y);
}

static poet_status map_unary(importer *im, const Onnx__NodeProto *np, poet_op op, const poet_attrs *a)
{
    int x = activation(im, np, 0);
    return x < 0 ? im->err->status : emit(im, np, op, &x, 1, a);
}

static poet_status map_clip(importer *im, const Onnx__NodeProto *np)
{
    poet_attrs a = {.alpha = attr_float(np, "min", -3.4028235e38f), .beta = attr_float(np, "max", 3.4028235e38f)};
    for (int j = 1; j <= 2; j++) {
        if (!input_name(np, j)) continue;
        const tensor *t = known(im, np, j, true);
        if (!t) return im->err->status;
        if (t->n != 1) return refuse(im, np, "min and max must be scalars");
        *(j == 1 ? &a.alpha : &a.beta) = (float)tensor_real(t, 0);
    }
    return map_unary(im, np, POET_OP_CLIP, &a);
}

static poet_status map_batchnorm(importer *im, const Onnx__NodeProto *np)
{
    /* training_mode 1 or 0: poet trains with batch statistics and infers with running ones either way */
    for (int k = 1; k < (int)np->n_output; k++)
        if (np->output[k] && *np->output[k] && find(im, np->output[k]) >= 0 && im->uses[find(im, np->output[k])])
            return refuse(im, np, "its running mean and variance outputs are not supported");
    int x = activation(im, np, 0);
    const value *w[4];
    for (int j = 1; j <= 4 && x >= 0; j++)
        if (!(w[j - 1] = known_value(im, np, j))) return im->err->status;
    if (x < 0) return im->err->status;
    poet_attrs a = {.eps = attr_float(np, "epsilon", 1e-5f), .momentum = 1.0f - attr_float(np, "momentum", 0.9f)};
    if (a.momentum == 0) a.momentum = 1e-7f; /* 0 means "the default" to the registry; ONNX's momentum 1 freezes */
    int v = add_node(im, POET_OP_BATCHNORM2D, &x, 1, &a, np->output[0]);
    if (v < 0) return im->err->status;
    uint64_t c = (uint64_t)shape_of(im, x)->dim[1];
    for (int j = 0; j < 4; j++)
        if (w[j]->t.n != c) return refuse(im, np, "scale, bias, mean and variance need one value per channel");
    poet_status st;
    if ((st = fill(im, w[0], false, 0, 0, 0)) || (st = fill(im, w[1], false, c, 0, 0)) ||
        (st = fill(im, w[2], true, 0, 0, 0)) || (st = fill(im, w[3], true, c, 0, 0)))
        return st;
    return name_output(im, np, 0, v);
}

/* LayerNormalization (opset 17), or the pattern PyTorch exports it as below
 * opset 17: ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div, then an
 * optional Mul by the scale and Add of the bias. */
static poet_status add_layernorm(importer *im, const Onnx__NodeProto *np, int x, float eps, const value *gamma,
                                 const value *beta, const Onnx__NodeProto *named)
{
    const poet_shape *xs = shape_of(im, x);
    uint64_t d = (uint64_t)xs->dim[xs->ndim - 1];
    if ((gamma && gamma->t.n != d) || (beta && beta->t.n != d))
        return refuse(im, np, "scale and bias need one value per element of the last dimension");
    poet_attrs a = {.eps = eps, .flags = gamma ? 0 : POET_ATTR_NO_AFFINE};
    int v = add_node(im, POET_OP_LAYERNORM, &x, 1, &a, named->output[0]);
    if (v < 0) return im->err->status;
    poet_status st = POET_OK;
    if (gamma) st = fill(im, gamma, false, 0, 0, 0);
    if (!st && gamma && beta) st = fill(im, beta, false, d, 0, 0); /* a missing beta stays 0 */
    return st ? st : name_output(im, named, 0, v);
}

static poet_status map_layernorm(importer *im, const Onnx__NodeProto *np)
{
    if (attr_int(np, "axis", -1) != -1) return refuse(im, np, "only axis -1 (the last dimension) is supported");
    int x = activation(im, np, 0);
    const value *g = x < 0 ? NULL : known_value(im, np, 1);
    if (!g) return im->err->status;
    const value *b = input_name(np, 2) ? known_value(im, np, 2) : NULL;
    return add_layernorm(im, np, x, attr_float(np, "epsilon", 1e-5f), g, b, np);
}

/* x times (op mul) or plus (add) a per-channel tensor t, [C] as [C, 1...]
 * against x's channel axis; trained where t is an initializer, as
 * everywhere. Nothing where t is a constant 1 (mul) or 0 (add). */
static int per_channel(importer *im, const Onnx__NodeProto *np, int x, poet_op op, const value *t, const char *suffix)
{
    const value *trained = trained_tensor(im, t);
    bool trivial = !trained;
    for (uint64_t k = 0; trivial && k < t->t.n; k++) trivial = tensor_real(&t->t, k) == (op == POET_OP_MUL ? 1 : 0);
    if (trivial) return x;
    const poet_shape *s = shape_of(im, x);
    if (t->t.n != (uint64_t)s->dim[1]) return refuse(im, np, "its scale and bias need one value per channel"), -1;
    poet_attrs a = {.ndim = s->ndim - 1, .dim = {(int32_t)s->dim[1], 1, 1},
                    .flags = trained ? POET_ATTR_OPERAND_PARAM : POET_ATTR_OPERAND_CONST};
    int v = add_step(im, np, op, x, &a, suffix);
    return v < 0 || fill(im, trained ? trained : t, !trained, 0, 0, 0) ? -1 : v;
}

/* InstanceNormalization: each (image, channel) normalized over the rest,
 * which is how PyTorch exports GroupNorm (between reshapes to [N, G, rest],
 * with a constant scale 1 and bias 0, its affine after it as Mul and Add):
 * a layer norm over the last dimension of [N, C, rest], reshaped to it and
 * back where the rest has more than one dimension; then its scale and bias. */
static poet_status map_instancenorm(importer *im, const Onnx__NodeProto *np)
{
    int x = activation(im, np, 0);
    const value *scale = x < 0 ? NULL : known_value(im, np, 1), *bias = scale ? known_value(im, np, 2) : NULL;
    if (!bias) return im->err->status;
    poet_shape s = *shape_of(im, x);
    if (s.ndim < 3) return refuse(im, np, "its input has no dimension to normalize over");
    int cur = x;
    if (s.ndim > 3) {
        poet_attrs flat = {.ndim = 3, .dim = {(int32_t)s.dim[0], (int32_t)s.dim[1], (int32_t)(s.dim[2] * s.dim[3])}};
        if ((cur = add_step(im, np, POET_OP_RESHAPE, cur, &flat, "rows")) < 0) return im->err->status;
    }
    poet_attrs norm = {.eps = attr_float(np, "epsilon", 1e-5f), .flags = POET_ATTR_NO_AFFINE};
    if ((cur = add_step(im, np, POET_OP_LAYERNORM, cur, &norm, "norm")) < 0) return im->err->status;
    if (s.ndim > 3) {
        poet_attrs back = {.ndim = 4};
        for (int k = 0; k < 4; k++) back.dim[k] = (int32_t)s.dim[k];
        if ((cur = add_step(im, np, POET_OP_RESHAPE, cur, &back, "back")) < 0) return im->err->status;
    }
    if ((cur = per_channel(im, np, cur, POET_OP_MUL, scale, "scale")) < 0) return im->err->status;
    if ((cur = per_channel(im, np, cur, POET_OP_ADD, bias, "bias")) < 0) return im->err->status;
    return name_output(im, np, 0, cur);
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
        int v = find(im, n->input[j]);
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

static poet_status reshape_to(importer *im, const Onnx__NodeProto *np, int x, const int64_t *dims, int ndim);

/* ReduceMean over one axis other than a pool's (mean pooling over a
 * sequence's tokens, x.mean(1)): that axis moved last, the others made one,
 * a global average pool over it, then the shape ONNX gives the mean. */
static poet_status map_mean_axis(importer *im, const Onnx__NodeProto *np, int x)
{
    int na;
    const int64_t *axes = attr_ints(np, "axes", &na);
    poet_shape s = *shape_of(im, x);
    int64_t a = na == 1 ? (axes[0] < 0 ? axes[0] + s.ndim : axes[0]) : -1;
    if (a < 0 || a >= s.ndim || s.ndim < 2)
        return refuse(im, np, "ReduceMean is supported over one axis, over H and W (a global average pool), or as "
                              "the start of a layer norm");
    int cur = x;
    if (a != s.ndim - 1) {
        poet_attrs t = {0};
        for (int k = 0, j = 0; k < s.ndim; k++)
            if (k != a) t.perm[j++] = k;
        t.perm[s.ndim - 1] = (int32_t)a;
        if ((cur = add_step(im, np, POET_OP_TRANSPOSE, cur, &t, "last")) < 0) return im->err->status;
    }
    poet_attrs rows = {.ndim = 3, .dim = {1, (int32_t)(poet_shape_numel(&s) / (uint64_t)s.dim[a]), (int32_t)s.dim[a]}};
    if ((cur = add_step(im, np, POET_OP_RESHAPE, cur, &rows, "rows")) < 0) return im->err->status;
    if ((cur = add_step(im, np, POET_OP_GLOBAL_AVGPOOL, cur, NULL, "mean")) < 0) return im->err->status;
    int64_t dims[TENSOR_MAX_DIMS];
    int nd = 0;
    bool keep = attr_int(np, "keepdims", 1);
    for (int k = 0; k < s.ndim; k++)
        if (k != a || keep) dims[nd++] = k == a ? 1 : s.dim[k];
    return reshape_to(im, np, cur, dims, nd);
}

static poet_status map_layernorm_pattern(importer *im, const Onnx__NodeProto *np, int at)
{
    int x = activation(im, np, 0);
    if (x < 0) return im->err->status;
    int rank = shape_of(im, x)->ndim;
    const char *what = "ReduceMean is supported only over H and W or L (a global average pool) or as the start of a "
                       "layer norm over the last dimension";
    /* the mean over L of [N, C, L] is also over the last dimension: a layer norm where the pattern follows */
    int sub = next_reader(im, at, np->output[0], "Sub");
    bool norm = reduces_last(np, rank) && sub >= 0 && strcmp(im->gp->node[sub]->input[0], np->input[0]) == 0;
    if (!norm && spatial_mean(np, rank))
        return map_unary(im, np, POET_OP_GLOBAL_AVGPOOL,
                         &(poet_attrs){.flags = attr_int(np, "keepdims", 1) ? POET_ATTR_KEEPDIMS : 0});
    if (!norm) return map_mean_axis(im, np, x);
    const char *d = im->gp->node[sub]->output[0];
    int pw = next_reader(im, sub, d, "Pow");
    int mean2 = pw < 0 ? -1 : next_reader(im, pw, im->gp->node[pw]->output[0], "ReduceMean");
    int add = mean2 < 0 ? -1 : next_reader(im, mean2, im->gp->node[mean2]->output[0], "Add");
    int sq = add < 0 ? -1 : next_reader(im, add, im->gp->node[add]->output[0], "Sqrt");
    int div = sq < 0 ? -1 : next_reader(im, sq, im->gp->node[sq]->output[0], "Div");
    if (div < 0 || !reduces_last(im->gp->node[mean2], rank) || strcmp(im->gp->node[div]->input[0], d) != 0)
        return refuse(im, np, what);
    const value *two = known_operand(im, im->gp->node[pw], d);
    const value *eps = known_operand(im, im->gp->node[add], im->gp->node[mean2]->output[0]);
    if (!two || two->t.n != 1 || tensor_real(&two->t, 0) != 2.0 || !eps || eps->t.n != 1) return refuse(im, np, what);
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

static poet_status map_pool(importer *im, const Onnx__NodeProto *np, bool max)
{
    if (max && np->n_output > 1 && np->output[1] && *np->output[1])
        return refuse(im, np, "the Indices output is not supported");
    if (max && attr_int(np, "storage_order", 0)) return refuse(im, np, "storage_order 1 is not supported");
    bool count_pad = !max && attr_int(np, "count_include_pad", 0);
    poet_attrs a = {0};
    int nk;
    attr_ints(np, "kernel_shape", &nk);
    poet_status st = window_attrs(im, np, nk < 0 ? 2 : nk, &a, true);
    int32_t pad[4] = {0};
    int x = st ? -1 : max ? activation(im, np, 0) : padded_activation(im, np, 0, pad);
    if (x < 0) return st ? st : im->err->status;
    same_pads(np, shape_of(im, x), &a);
    if (padded(pad)) {
        /* the zeros a Pad adds are elements of the input: the mean counts them */
        if (!count_pad && (a.pt || a.pl || a.pb || a.pr))
            return refuse(im, np, "a Pad before it while its own pads are not counted (count_include_pad 0)");
        count_pad = true;
        add_pads(&a, pad);
    }
    a.flags = count_pad ? POET_ATTR_COUNT_PAD : 0;
    if (attr_int(np, "ceil_mode", 0)) {
        if (count_pad) return refuse(im, np, "ceil_mode 1 with count_include_pad 1 is not supported");
        ceil_windows(shape_of(im, x), &a);
    }
    return emit(im, np, max ? POET_OP_MAXPOOL2D : POET_OP_AVGPOOL2D, &x, 1, &a);
}

/* Reshape to dims: a node, nothing when the shape does not change, or a
 * view of x when it has more than 4 dimensions. */
static poet_status reshape_to(importer *im, const Onnx__NodeProto *np, int x, const int64_t *dims, int ndim)
{
    if (ndim < 1) return refuse(im, np, "a result of no dimensions is not supported");
    if (ndim > POET_MAX_DIMS) {
        view w = {{0}, {ndim, {0}}};
        memcpy(w.shape.dim, dims, (size_t)ndim * sizeof *dims);
        return name_view(im, np, 0, x, &w);
    }
    const poet_shape *s = shape_of(im, x);
    bool same = s->ndim == ndim;
    for (int k = 0; same && k < ndim; k++) same = s->dim[k] == dims[k];
    if (same) return name_output(im, np, 0, x);
    poet_attrs a = {.ndim = ndim};
    for (int k = 0; k < ndim; k++) a.dim[k] = (int32_t)dims[k];
    return emit(im, np, POET_OP_RESHAPE, &x, 1, &a);
}

static poet_status map_reshape(importer *im, const Onnx__NodeProto *np)
{
    onnx_shape s;
    int x = shaped_activation(im, np, 0, &s);
    const tensor *shape = x < 0 ? NULL : known(im, np, 1, true);
    if (!shape) return im->err->status;
    int64_t dims[TENSOR_MAX_DIMS];
    int nd;
    poet_status st = reshape_target(np, s.dim, s.ndim, shape, dims, &nd, im->err);
    return st ? st : reshape_to(im, np, x, dims, nd);
}

static poet_status map_flatten(importer *im, const Onnx__NodeProto *np)
{
    onnx_shape s;
    int x = shaped_activation(im, np, 0, &s);
    if (x < 0) return im->err->status;
    int64_t axis = attr_int(np, "axis", 1);
    if (axis < 0) axis += s.ndim;
    if (axis < 0 || axis > s.ndim) return refuse(im, np, "axis out of range");
    int64_t dims[2] = {prod(s.dim, (int)axis), prod(s.dim + axis, s.ndim - (int)axis)};
    if (axis != 1 || s.ndim <= 2 || s.ndim > POET_MAX_DIMS) return reshape_to(im, np, x, dims, 2);
    return emit(im, np, POET_OP_FLATTEN, &x, 1, NULL); /* [N, rest]: poet's own flatten */
}

/* Squeeze and Unsqueeze of an activation: a reshape. */
static poet_status map_squeeze(importer *im, const Onnx__NodeProto *np)
{
    onnx_shape s;
    int x = shaped_activation(im, np, 0, &s);
    if (x < 0) return im->err->status;
    const tensor *axes = input_name(np, 1) ? known(im, np, 1, true) : NULL;
    if (input_name(np, 1) && !axes) return im->err->status;
    int64_t dims[TENSOR_MAX_DIMS];
    int nd;
    poet_status st = squeeze_dims(np, s.dim, s.ndim, axes, dims, &nd, im->err);
    return st ? st : reshape_to(im, np, x, dims, nd);
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
    if (n_groups > POET_MAX_DIMS) return refuse(im, np, "a transpose of more than 4 dimensions that do not merge to 4");
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
    if (!moves) return name_view(im, np, 0, x, &w); /* the element order stays */
    poet_attrs r = {.ndim = n_groups};
    for (int k = 0; k < n_groups; k++) r.dim[k] = (int32_t)dims[k];
    int merged = add_step(im, np, POET_OP_RESHAPE, x, &r, "merged");
    int v = merged < 0 ? -1 : add_node(im, POET_OP_TRANSPOSE, &merged, 1, &a, np->output[0]);
    return v < 0 ? im->err->status : name_view(im, np, 0, v, &w);
}

static poet_status map_transpose(importer *im, const Onnx__NodeProto *np)
{
    onnx_shape s;
    int x = shaped_activation(im, np, 0, &s);
    if (x < 0) return im->err->status;
    int r = s.ndim, n;
    const int64_t *perm = attr_ints(np, "perm", &n);
    if (n >= 0 && n != r) return refuse(im, np, "perm has another length than the input's rank");
    int32_t p[TENSOR_MAX_DIMS];
    bool seen[TENSOR_MAX_DIMS] = {false};
    for (int k = 0; k < r; k++) {
        p[k] = (int32_t)(n >= 0 ? perm[k] : r - 1 - k);
        if (p[k] < 0 || p[k] >= r || seen[p[k]]) return refuse(im, np, "perm is not a permutation of its axes");
        seen[p[k]] = true;
    }
    if (r > POET_MAX_DIMS) return transpose_merged(im, np, x, &s, p);
    poet_attrs a = {0};
    memcpy(a.perm, p, (size_t)r * sizeof *p);
    return map_unary(im, np, POET_OP_TRANSPOSE, &a);
}

/* Pad with zeros, of H and W: a view, which the Conv or AveragePool that
 * reads it takes into its own padding (PyTorch exports AvgPool2d, and
 * F.pad or nn.ZeroPad2d before a convolution, so). */
static poet_status map_pad(importer *im, const Onnx__NodeProto *np)
{
    bool constant = attr_is(np, "mode", "constant", "constant");
    if (input_name(np, 3)) return refuse(im, np, "its axes input is not supported");
    const value *x = viewed_input(im, np, 0, true);
    if (!x) return im->err->status;
    if (x->node < 0) return activation(im, np, 0), im->err->status;
    int64_t pads[2 * TENSOR_MAX_DIMS];
    int n;
    const int64_t *attr = attr_ints(np, "pads", &n); /* below opset 11 */
    if (n < 0) {
        const tensor *t = known(im, np, 1, true);
        if (!t) return im->err->status;
        n = (int)t->n;
        for (int k = 0; k < n && k < 2 * TENSOR_MAX_DIMS; k++) pads[k] = tensor_int(t, (uint64_t)k);
    } else {
        for (int k = 0; k < n && k < 2 * TENSOR_MAX_DIMS; k++) pads[k] = attr[k];
    }
    onnx_shape s = value_shape(im, x);
    if (n != 2 * s.ndim) return refuse(im, np, "its pads do not have two values per dimension of its input");
    const tensor *with = input_name(np, 2) ? known(im, np, 2, true) : NULL;
    if (input_name(np, 2) && !with) return im->err->status;
    double zero = with && with->n ? tensor_real(with, 0) : attr_float(np, "value", 0.0f);
    bool any = false, spatial = s.ndim == 4 && !x->view.shape.ndim;
    for (int k = 0; k < n; k++) {
        if (pads[k] < 0) return refuse(im, np, "negative pads (cropping) are not supported");
        if (pads[k] > INT32_MAX / 4) return refuse(im, np, "its pads are too large");
        any |= pads[k] != 0;
        spatial &= pads[k] == 0 || k % s.ndim >= 2;
    }
    if (!any) return name_view(im, np, 0, x->node, &x->view);
    if (!constant || zero != 0) return refuse(im, np, "only padding with zeros (mode constant, value 0) is supported");
    if (!spatial) return refuse(im, np, "only padding of H and W of an [N, C, H, W] tensor is supported");
    view w = x->view;
    const int64_t add[4] = {pads[2], pads[3], pads[6], pads[7]}; /* begins of H, W, then ends */
    for (int k = 0; k < 4; k++) {
        if (w.pad[k] > INT32_MAX / 2 - add[k]) return refuse(im, np, "its pads are too large");
        w.pad[k] += (int32_t)add[k];
    }
    return name_view(im, np, 0, x->node, &w);
}

/* The trained tensor a Concat's first or last input is (ViT's class token,
 * an initializer, or one broadcast by Expand), or NULL; *left says which.
 * A constant that does not train is not one. */
static const value *concat_param(importer *im, const Onnx__NodeProto *np, bool *left)
{
    for (int end = 0; end < 2 && np->n_input > 1; end++) {
        int j = end ? (int)np->n_input - 1 : 0, v = input_name(np, j) ? find(im, np->input[j]) : -1;
        const value *t = v < 0 ? NULL : trained_tensor(im, &im->vals[v]);
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
    return add_node(im, POET_OP_CONCAT, in, have, a, name);
}

/* A Concat of more than 8 inputs is a chain of concats, each of at most 8
 * and the next one's first input (DenseNet's blocks concatenate up to 49);
 * a trained tensor first or last is the parameter operand of a concat of
 * one input, the others' concat. */
static poet_status map_concat(importer *im, const Onnx__NodeProto *np)
{
    int64_t axis;
    if (!attr_int_in(np, "axis", 0, -POET_MAX_DIMS, POET_MAX_DIMS - 1, &axis))
        return refuse(im, np, "axis is outside the ranks poet supports");
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
        if ((in[have++] = activation(im, np, j)) < 0) return im->err->status;
    }
    if (!param) return emit(im, np, POET_OP_CONCAT, in, have, &a);
    if (param->t.ndim < 1 || param->t.ndim > POET_MAX_DIMS)
        return refuse(im, np, "a trained input of no or more than 4 dimensions");
    if (have > 1 && (in[0] = concat_part(im, np, in, have, &a, ++part)) < 0) return im->err->status;
    a.flags = POET_ATTR_OPERAND_PARAM | (left ? POET_ATTR_OPERAND_LEFT : 0), a.ndim = param->t.ndim;
    for (int k = 0; k < param->t.ndim; k++) a.dim[k] = (int32_t)param->t.dims[k];
    int v = add_node(im, POET_OP_CONCAT, in, 1, &a, np->output[0]);
    if (v < 0) return im->err->status;
    poet_status st = fill(im, param, false, 0, 0, 0);
    return st ? st : name_output(im, np, 0, v);
}

/* One slice node of [start, end) on axis, named as output k. */
static poet_status add_slice(importer *im, const Onnx__NodeProto *np, int x, int axis, int64_t start, int64_t end, int k)
{
    const poet_shape *s = shape_of(im, x);
    if (start == 0 && end == s->dim[axis]) return name_output(im, np, k, x);
    poet_attrs a = {.axis = axis, .start = (int32_t)start, .end = (int32_t)end};
    int v = add_node(im, POET_OP_SLICE, &x, 1, &a, np->output[k]);
    return v < 0 ? im->err->status : name_output(im, np, k, v);
}

static poet_status map_split(importer *im, const Onnx__NodeProto *np)
{
    int x = activation(im, np, 0);
    if (x < 0) return im->err->status;
    const poet_shape *s = shape_of(im, x);
    int64_t axis = attr_int(np, "axis", 0);
    if (axis < 0) axis += s->ndim;
    if (axis < 0 || axis >= s->ndim) return refuse(im, np, "axis out of range");
    int n_out = (int)np->n_output, na;
    const int64_t *attr = attr_ints(np, "split", &na);
    const tensor *sizes = np->n_input > 1 && input_name(np, 1) ? known(im, np, 1, true) : NULL;
    if (np->n_input > 1 && input_name(np, 1) && !sizes) return im->err->status;
    int64_t at = 0, size = s->dim[axis];
    for (int k = 0; k < n_out; k++) {
        int64_t len = sizes ? (k < (int)sizes->n ? tensor_int(sizes, (uint64_t)k) : -1)
                      : na >= 0 ? (k < na ? attr[k] : -1)
                                : size / n_out;
        if (len <= 0 || at + len > size || (!sizes && na < 0 && size % n_out))
            return refuse(im, np, "split sizes do not add up to the axis");
        poet_status st = add_slice(im, np, x, (int)axis, at, at + len, k);
        if (st) return st;
        at += len;
    }
    return at == size ? POET_OK : refuse(im, np, "split sizes do not add up to the axis");
}

/* Slice of an activation: one contiguous range on each axis it names. */
static poet_status map_slice(importer *im, const Onnx__NodeProto *np)
{
    int x = activation(im, np, 0);
    const tensor *starts = x < 0 ? NULL : known(im, np, 1, true), *ends = starts ? known(im, np, 2, true) : NULL;
    if (!ends) return im->err->status;
    const tensor *axes = input_name(np, 3) ? known(im, np, 3, true) : NULL, *steps = input_name(np, 4) ? known(im, np, 4, true) : NULL;
    if ((input_name(np, 3) && !axes) || (input_name(np, 4) && !steps)) return im->err->status;
    int cur = x, changed = 0;
    for (uint64_t j = 0; j < starts->n; j++) {
        const poet_shape *s = shape_of(im, cur);
        int64_t axis = axes ? tensor_int(axes, j) : (int64_t)j;
        if (axis < 0) axis += s->ndim;
        if (axis < 0 || axis >= s->ndim || j >= ends->n) return refuse(im, np, "an axis out of range");
        if (steps && tensor_int(steps, j) != 1) return refuse(im, np, "steps other than 1 are not supported");
        int64_t d = s->dim[axis], b = tensor_int(starts, j), e = tensor_int(ends, j);
        b = b < 0 ? b + d : b, e = e < 0 ? e + d : e;
        b = b < 0 ? 0 : b > d ? d : b, e = e < 0 ? 0 : e > d ? d : e;
        if (e <= b) return refuse(im, np, "an empty slice");
        if (b == 0 && e == d) continue;
        if (changed++) return refuse(im, np, "slices along more than one axis are not supported");
        poet_attrs a = {.axis = (int32_t)axis, .start = (int32_t)b, .end = (int32_t)e};
        if ((cur = add_node(im, POET_OP_SLICE, &cur, 1, &a, np->output[0])) < 0) return im->err->status;
    }
    return name_output(im, np, 0, cur);
}

/* Gather of one index along an axis of an activation (ViT's x[:, 0]): a
 * slice, then a reshape that drops the axis where the index is a scalar. */
static poet_status map_gather(importer *im, const Onnx__NodeProto *np)
{
    int x = activation(im, np, 0);
    const tensor *at = x < 0 ? NULL : known(im, np, 1, true);
    if (!at) return im->err->status;
    const poet_shape *s = shape_of(im, x);
    int64_t axis = attr_int(np, "axis", 0);
    if (axis < 0) axis += s->ndim;
    if (axis < 0 || axis >= s->ndim) return refuse(im, np, "axis out of range");
    if (at->is_float || at->n != 1 || at->ndim > 1)
        return refuse(im, np, "only one index (a scalar, or a list of one) into an activation is supported");
    int64_t d = s->dim[axis], i = tensor_int(at, 0) < 0 ? tensor_int(at, 0) + d : tensor_int(at, 0);
    if (i < 0 || i >= d) return refuse(im, np, "its index is out of range");
    int cur = x;
    if (d > 1) {
        poet_attrs a = {.axis = (int32_t)axis, .start = (int32_t)i, .end = (int32_t)i + 1};
        if ((cur = add_step(im, np, POET_OP_SLICE, x, &a, "slice")) < 0) return im->err->status;
    }
    if (at->ndim == 1) return name_output(im, np, 0, cur);
    int64_t dims[TENSOR_MAX_DIMS];
    int nd = 0;
    for (int k = 0; k < shape_of(im, cur)->ndim; k++)
        if (k != axis) dims[nd++] = shape_of(im, cur)->dim[k];
    return reshape_to(im, np, cur, dims, nd);
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
static poet_status map_resize(importer *im, const Onnx__NodeProto *np)
{
    int x = activation(im, np, 0);
    if (x < 0) return im->err->status;
    if (!attr_is(np, "mode", "nearest", "nearest")) return refuse(im, np, "only mode nearest is supported");
    bool modern = onnx_is_op(np, "Resize") && im->opset >= 11; /* inputs X, roi, scales, sizes */
    int at_scales = modern ? 2 : 1, at_sizes = modern ? 3 : -1;
    const tensor *scales = input_name(np, at_scales) ? known(im, np, at_scales, true) : NULL;
    if (input_name(np, at_scales) && !scales) return im->err->status;
    const tensor *sizes = at_sizes > 0 && input_name(np, at_sizes) ? known(im, np, at_sizes, true) : NULL;
    if (at_sizes > 0 && input_name(np, at_sizes) && !sizes) return im->err->status;
    const Onnx__AttributeProto *fixed = attr_find(np, "scales"); /* Upsample-7 */
    int ns = fixed ? (int)fixed->n_floats : -1;
    const poet_shape *s = shape_of(im, x);
    if (s->ndim != 4) return refuse(im, np, "only [N, C, H, W] inputs are resized");
    int64_t out[4];
    for (int k = 0; k < 4; k++) {
        if (sizes && sizes->n == 4) out[k] = tensor_int(sizes, (uint64_t)k);
        else if (scales && scales->n == 4)
            out[k] = (int64_t)floor((double)s->dim[k] * tensor_real(scales, (uint64_t)k));
        else if (ns == 4) out[k] = (int64_t)floor((double)s->dim[k] * fixed->floats[k]);
        else return refuse(im, np, "it needs four scales or four sizes");
    }
    if (out[0] != s->dim[0] || out[1] != s->dim[1]) return refuse(im, np, "only H and W are resized");
    if (out[2] < s->dim[2] || out[3] < s->dim[3] || out[2] % s->dim[2] || out[3] % s->dim[3])
        return refuse(im, np, "only whole multiples of H and W are supported");
    if (out[2] / s->dim[2] > 64 || out[3] / s->dim[3] > 64 || out[2] > 1 << 24 || out[3] > 1 << 24)
        return refuse(im, np, "factors above 64, or sides above 2^24, are not supported");
    coord_mode c;
    round_mode r;
    nearest_modes(np, &c, &r);
    /* opset 10's Resize and Upsample repeat: floor(x / scale) */
    for (int k = 2; modern && k < 4; k++)
        for (int64_t o = 0; o < out[k]; o++)
            if (nearest_source(c, r, o, s->dim[k], out[k]) != o / (out[k] / s->dim[k]))
                return refuse(im, np, "its coordinate transformation and nearest mode do not repeat every element "
                                      "(asymmetric with floor, or half_pixel with rounding, do)");
    poet_attrs a = {.sh = (int32_t)(out[2] / s->dim[2]), .sw = (int32_t)(out[3] / s->dim[3])};
    if (a.sh == 1 && a.sw == 1) return name_output(im, np, 0, x);
    return emit(im, np, POET_OP_UPSAMPLE2D, &x, 1, &a);
}

/* A Softmax or LogSoftmax over the classes that makes the output the loss
 * reads (PyTorch's MNIST example ends with log_softmax): the loss, softmax
 * cross-entropy, takes it over and reads its input. Exact for LogSoftmax,
 * whose softmax is the input's; the intent for Softmax (probabilities out,
 * trained on their logits). The ONNX written back keeps it. */
static bool ends_output(const importer *im, const Onnx__NodeProto *np)
{
    return (onnx_is_op(np, "Softmax") || onnx_is_op(np, "LogSoftmax")) && np->n_output > 0 && im->loss_output &&
           strcmp(np->output[0], im->loss_output) == 0;
}

/* The input of a Softmax or LogSoftmax and its axis, counted from 0; the
 * input is -1 after an error. */
static int softmax_input(importer *im, const Onnx__NodeProto *np, int64_t *axis, int *rank)
{
    int x = activation(im, np, 0);
    if (x < 0) return -1;
    *rank = shape_of(im, x)->ndim;
    *axis = attr_int(np, "axis", im->opset >= 13 ? -1 : 1);
    if (*axis < 0) *axis += *rank;
    return x;
}

static poet_status map_output_softmax(importer *im, const Onnx__NodeProto *np)
{
    int64_t axis;
    int r, x = softmax_input(im, np, &axis, &r);
    if (x < 0) return im->err->status;
    if (axis != r - 1) return refuse(im, np, "a softmax at the output over other than the last axis (the classes)");
    snprintf(im->m->summary.output_op, sizeof im->m->summary.output_op, "%s", np->op_type);
    return name_output(im, np, 0, x);
}

static poet_status map_softmax(importer *im, const Onnx__NodeProto *np)
{
    int64_t axis;
    int r, x = softmax_input(im, np, &axis, &r);
    if (x < 0) return im->err->status;
    if (im->opset < 13 && axis != r - 1)
        return refuse(im, np, "below opset 13 only softmax over the last axis is supported");
    poet_attrs a = {.axis = (int32_t)axis};
    return emit(im, np, POET_OP_SOFTMAX, &x, 1, &a);
}

static poet_status map_dropout(importer *im, const Onnx__NodeProto *np)
{
    int mask = np->n_output > 1 && np->output[1] ? find(im, np->output[1]) : -1;
    if (mask >= 0 && im->uses[mask] > 0) return refuse(im, np, "the mask output is not supported");
    float p = attr_float(np, "ratio", 0.5f);
    if (input_name(np, 1)) {
        const tensor *t = known(im, np, 1, true);
        if (!t) return im->err->status;
        p = (float)tensor_real(t, 0);
    }
    poet_attrs a = {.p = p};
    return map_unary(im, np, POET_OP_DROPOUT, &a);
}

/* Identity of an activation renames it; of an initializer, it is a weight of
 * its own (exporters merge equal initializers through Identity). */
static poet_status map_identity(importer *im, const Onnx__NodeProto *np, int at)
{
    const value *x = viewed_input(im, np, 0, true);
    if (!x) return im->err->status;
    if (x->node >= 0) return name_view(im, np, 0, x->node, &x->view);
    tensor copy = {0};
    poet_status st = fold_node(np, &(fold_input){&x->t, NULL}, 1, &copy, im->err);
    if (st) return st;
    int v = define_known(im, np->output[0], &copy);
    if (v < 0) return im->err->status;
    im->vals[v].from = x->from.kind == FROM_NONE ? x->from : (origin){FROM_IDENTITY, at, x->from.transposed};
    return POET_OK;
}

/* ---- a node ---- */

static bool all_known(importer *im, const Onnx__NodeProto *np)
{
    for (size_t j = 0; j < np->n_input; j++) {
        int v = input_name(np, (int)j) ? find(im, np->input[j]) : -1;
        if (input_name(np, (int)j) && (v < 0 || !im->vals[v].known)) return false;
    }
    return np->n_input > 0;
}

static poet_status fold(importer *im, const Onnx__NodeProto *np)
{
    fold_input in[16] = {{0}};
    onnx_shape shapes[16];
    int n = (int)np->n_input < 16 ? (int)np->n_input : 16;
    for (int j = 0; j < n; j++) {
        int v = input_name(np, j) ? find(im, np->input[j]) : -1;
        if (v >= 0 && im->vals[v].node >= 0) shapes[j] = value_shape(im, &im->vals[v]);
        if (v >= 0) in[j] = (fold_input){im->vals[v].known ? &im->vals[v].t : NULL,
                                         im->vals[v].node >= 0 ? &shapes[j] : NULL};
    }
    tensor t;
    poet_status st = fold_node(np, in, n, &t, im->err);
    if (st) return st;
    int v = define_known(im, np->output[0], &t);
    if (v < 0) return im->err->status;
    im->folded++;
    /* a trained tensor broadcast by Expand is still that tensor where a
     * Concat reads it (map_concat) */
    int of = onnx_is_op(np, "Expand") ? find(im, np->input[0]) : -1;
    const value *trained = of >= 0 ? trained_tensor(im, &im->vals[of]) : NULL;
    if (trained) im->vals[v].expanded = (int)(trained - im->vals);
    /* reshaped (PyTorch unsqueezes nn.PReLU's slope to [C, 1, 1]), a weight
     * is still that weight, element for element */
    bool reshaped = onnx_is_op(np, "Unsqueeze") || onnx_is_op(np, "Squeeze") || onnx_is_op(np, "Reshape");
    int same = reshaped ? find(im, np->input[0]) : -1;
    if (same >= 0 && im->vals[same].from.kind != FROM_NONE && !im->vals[same].from.transposed && t.is_float)
        im->vals[v].from = im->vals[same].from;
    /* a weight the exporter transposes stays that weight, to write back */
    int src = onnx_is_op(np, "Transpose") && t.ndim == 2 ? find(im, np->input[0]) : -1;
    if (src >= 0 && im->vals[src].from.kind != FROM_NONE) {
        im->vals[v].from = im->vals[src].from;
        im->vals[v].from.transposed = !im->vals[v].from.transposed;
    }
    return POET_OK;
}

static poet_status map_constant(importer *im, const Onnx__NodeProto *np)
{
    const Onnx__AttributeProto *a = attr_find(np, "value");
    tensor t = {0};
    poet_status st;
    if (a && a->t) {
        st = tensor_from_proto(a->t, &t, onnx_node_label(np), im->err);
    } else if ((a = attr_find(np, "value_float")) || (a = attr_find(np, "value_int"))) {
        t = (tensor){.is_float = a->has_f, .ndim = 0, .n = 1};
        if (t.is_float) st = (t.f = malloc(sizeof *t.f)) ? (t.f[0] = a->f, POET_OK) : POET_ERR_NOMEM;
        else st = (t.i = malloc(sizeof *t.i)) ? (t.i[0] = a->i, POET_OK) : POET_ERR_NOMEM;
        if (st) return poet_fail(im->err, st, "out of memory");
    } else if ((a = attr_find(np, "value_ints")) || (a = attr_find(np, "value_floats"))) {
        bool f = a->n_floats > 0;
        int64_t n = (int64_t)(f ? a->n_floats : a->n_ints);
        t = (tensor){.is_float = f, .ndim = 1, .dims = {n}, .n = (uint64_t)n};
        st = (f ? (void *)(t.f = calloc((size_t)n + 1, sizeof *t.f)) : (void *)(t.i = calloc((size_t)n + 1, sizeof *t.i)))
                 ? POET_OK
                 : poet_fail(im->err, POET_ERR_NOMEM, "out of memory");
        for (int64_t k = 0; !st && k < n; k++) {
            if (f) t.f[k] = a->floats[k];
            else t.i[k] = a->ints[k];
        }
    } else {
        return refuse(im, np, "a Constant without a value poet reads");
    }
    if (st) return st;
    return define_known(im, np->output[0], &t) < 0 ? im->err->status : POET_OK;
}

typedef struct unary_op {
    const char *name;
    poet_op op;
} unary_op;

static const unary_op UNARY[] = {{"Relu", POET_OP_RELU},         {"Sigmoid", POET_OP_SIGMOID},
                                 {"Tanh", POET_OP_TANH},         {"Erf", POET_OP_ERF},
                                 {"Softplus", POET_OP_SOFTPLUS}, {"HardSwish", POET_OP_HARDSWISH},
                                 {"GlobalAveragePool", POET_OP_GLOBAL_AVGPOOL}};

static poet_status map_node(importer *im, const Onnx__NodeProto *np, int at)
{
    if (np->domain && *np->domain && strcmp(np->domain, "ai.onnx") != 0)
        return refuse(im, np, "ops outside the default ONNX domain are not supported");
    if (onnx_is_op(np, "Constant")) return map_constant(im, np);
    if (onnx_is_op(np, "Identity")) return map_identity(im, np, at);
    if (all_known(im, np) || onnx_is_op(np, "Shape")) return fold(im, np);
    for (size_t k = 0; k < sizeof UNARY / sizeof *UNARY; k++)
        if (onnx_is_op(np, UNARY[k].name))
            return map_unary(im, np, UNARY[k].op,
                             &(poet_attrs){.flags = UNARY[k].op == POET_OP_GLOBAL_AVGPOOL ? POET_ATTR_KEEPDIMS : 0});
    if (onnx_is_op(np, "Conv")) return map_conv(im, np);
    if (onnx_is_op(np, "Gemm")) return map_gemm(im, np);
    if (onnx_is_op(np, "MatMul")) return map_matmul(im, np, at);
    if (onnx_is_op(np, "Add")) return map_binary(im, np, POET_OP_ADD);
    if (onnx_is_op(np, "Sub")) return map_binary(im, np, POET_OP_SUB);
    if (onnx_is_op(np, "Mul")) return map_binary(im, np, POET_OP_MUL);
    if (onnx_is_op(np, "Div")) return map_binary(im, np, POET_OP_DIV);
    if (onnx_is_op(np, "Clip")) return map_clip(im, np);
    if (onnx_is_op(np, "LeakyRelu"))
        return map_unary(im, np, POET_OP_LEAKY_RELU, &(poet_attrs){.alpha = attr_float(np, "alpha", 0.01f)});
    if (onnx_is_op(np, "PRelu")) return map_prelu(im, np);
    if (onnx_is_op(np, "Elu")) return map_unary(im, np, POET_OP_ELU, &(poet_attrs){.alpha = attr_float(np, "alpha", 1.0f)});
    if (onnx_is_op(np, "HardSigmoid"))
        return map_unary(im, np, POET_OP_HARDSIGMOID,
                         &(poet_attrs){.alpha = attr_float(np, "alpha", 0.2f), .beta = attr_float(np, "beta", 0.5f)});
    if (onnx_is_op(np, "BatchNormalization")) return map_batchnorm(im, np);
    if (onnx_is_op(np, "LayerNormalization")) return map_layernorm(im, np);
    if (onnx_is_op(np, "InstanceNormalization")) return map_instancenorm(im, np);
    if (onnx_is_op(np, "ReduceMean")) return map_layernorm_pattern(im, np, at);
    if (onnx_is_op(np, "MaxPool")) return map_pool(im, np, true);
    if (onnx_is_op(np, "AveragePool")) return map_pool(im, np, false);
    if (onnx_is_op(np, "Flatten")) return map_flatten(im, np);
    if (onnx_is_op(np, "Reshape")) return map_reshape(im, np);
    if (onnx_is_op(np, "Squeeze") || onnx_is_op(np, "Unsqueeze")) return map_squeeze(im, np);
    if (onnx_is_op(np, "Transpose")) return map_transpose(im, np);
    if (onnx_is_op(np, "Pad")) return map_pad(im, np);
    if (onnx_is_op(np, "Concat")) return map_concat(im, np);
    if (onnx_is_op(np, "Split")) return map_split(im, np);
    if (onnx_is_op(np, "Slice")) return map_slice(im, np);
    if (onnx_is_op(np, "Gather")) return map_gather(im, np);
    if (onnx_is_op(np, "Resize") || onnx_is_op(np, "Upsample")) return map_resize(im, np);
    if (ends_output(im, np)) return map_output_softmax(im, np);
    if (onnx_is_op(np, "Softmax")) return map_softmax(im, np);
    if (onnx_is_op(np, "Dropout")) return map_dropout(im, np);
    if (onnx_is_op(np, "Cast")) {
        if (attr_int(np, "to", ONNX_FLOAT) != ONNX_FLOAT) return refuse(im, np, "a cast of an activation to another type than float");
        int x = activation(im, np, 0);
        return x < 0 ? im->err->status : name_output(im, np, 0, x);
    }
    return refuse(im, np, "this op is not supported (docs/onnx.md lists those that are)");
}

/* ---- the graph ---- */

static poet_status read_initializers(importer *im)
{
    for (size_t k = 0; k < im->gp->n_initializer; k++) {
        const Onnx__TensorProto *p = im->gp->initializer[k];
        if (!p->name || !*p->name) return poet_fail(im->err, POET_ERR_PARSE, "initializer %zu has no name", k);
        tensor t;
        poet_status st = tensor_from_proto(p, &t, "initializer", im->err);
        if (st) return st;
        int v = define_known(im, p->name, &t);
        if (v < 0) return im->err->status;
        im->vals[v].from = (origin){FROM_INITIALIZER, (int)k, false};
    }
    return POET_OK;
}

/* The data input: named, or the first graph input that is no initializer. */
static poet_status read_input(importer *im, const poet_onnx_options *o)
{
    const Onnx__ValueInfoProto *in = NULL;
    for (size_t k = 0; k < im->gp->n_input && !in; k++) {
        const Onnx__ValueInfoProto *vi = im->gp->input[k];
        if (!vi->name) continue;
        if (o && o->input ? strcmp(vi->name, o->input) == 0 : find(im, vi->name) < 0) in = vi;
    }
    if (!in) return poet_fail(im->err, POET_ERR_NOT_FOUND, "the model has no input %s%s%s", o && o->input ? "named '" : "",
                              o && o->input ? o->input : "besides its initializers", o && o->input ? "'" : "");
    const Onnx__TypeProto *tp = in->type;
    const Onnx__TensorShapeProto *sp = tp && tp->tensor_type ? tp->tensor_type->shape : NULL;
    if (!tp || !tp->tensor_type || tp->tensor_type->elem_type != ONNX_FLOAT || !sp)
        return poet_fail(im->err, POET_ERR_UNSUPPORTED, "input '%s' is not a float tensor of known rank", in->name);
    if (sp->n_dim < 1 || sp->n_dim > POET_MAX_DIMS)
        return poet_fail(im->err, POET_ERR_UNSUPPORTED, "input '%s' has %zu dimensions (1 to 4 are supported)", in->name,
                         sp->n_dim);
    poet_attrs a = {.ndim = (int32_t)sp->n_dim};
    for (size_t k = 0; k < sp->n_dim; k++) {
        const Onnx__TensorShapeProto__Dimension *d = sp->dim[k];
        bool fixed = d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value > 0;
        if (k == 0) {
            int want = o && o->batch > 0 ? o->batch : fixed ? (int)d->dim_value : 1;
            if (fixed && want != d->dim_value)
                return poet_fail(im->err, POET_ERR_UNSUPPORTED,
                                 "input '%s' was exported with batch %lld; give --batch %lld, or export with a dynamic "
                                 "batch axis (dynamic_axes) to train at another", in->name, (long long)d->dim_value,
                                 (long long)d->dim_value);
            a.dim[0] = want;
        } else if (fixed && d->dim_value <= (1 << 30)) {
            a.dim[k] = (int32_t)d->dim_value;
        } else {
            return poet_fail(im->err, POET_ERR_UNSUPPORTED, "input '%s': dimension %zu is not a fixed size", in->name, k);
        }
    }
    im->batch = a.dim[0];
    int v = add_node(im, POET_OP_INPUT, NULL, 0, &a, in->name);
    int at = v < 0 ? -1 : define(im, in->name);
    if (at < 0) return im->err->status;
    im->vals[at].node = v;
    return POET_OK;
}

/* Every name any node reads gets a value now (a placeholder until a node
 * produces it), so that consumers can be counted by value. */
static poet_status count_uses(importer *im)
{
    for (size_t k = 0; k < im->gp->n_node; k++) {
        const Onnx__NodeProto *np = im->gp->node[k];
        if (!np->op_type) return poet_fail(im->err, POET_ERR_PARSE, "node %zu has no op", k);
        /* before any node is mapped: patterns look ahead at later nodes' outputs */
        if (np->n_output < 1 || !np->output[0] || !*np->output[0]) return refuse(im, np, "no output");
        for (size_t j = 0; j < np->n_input; j++)
            if (np->input[j] && *np->input[j] && find(im, np->input[j]) < 0 && define(im, np->input[j]) < 0)
                return im->err->status;
        for (size_t j = 0; j < np->n_output; j++)
            if (np->output[j] && *np->output[j] && find(im, np->output[j]) < 0 && define(im, np->output[j]) < 0)
                return im->err->status;
    }
    im->uses = calloc((size_t)im->n_vals + 1, sizeof *im->uses);
    im->skip = calloc(im->gp->n_node + 1, sizeof *im->skip);
    if (!im->uses || !im->skip) return poet_fail(im->err, POET_ERR_NOMEM, "out of memory reading the ONNX graph");
    for (size_t k = 0; k < im->gp->n_node; k++)
        for (size_t j = 0; j < im->gp->node[k]->n_input; j++) {
            int v = im->gp->node[k]->input[j] ? find(im, im->gp->node[k]->input[j]) : -1;
            if (v >= 0) im->uses[v]++;
        }
    for (size_t k = 0; k < im->gp->n_output; k++) {
        int v = im->gp->output[k]->name ? find(im, im->gp->output[k]->name) : -1;
        if (v >= 0) im->uses[v]++;
    }
    return POET_OK;
}

/* The loss: softmax cross-entropy over the output, its leading dimensions
 * as rows. */
static poet_status add_loss(importer *im, const poet_onnx_options *o)
{
    const char *name = im->loss_output;
    int v = name ? find(im, name) : -1;
    if (v < 0 || im->vals[v].node < 0)
        return poet_fail(im->err, POET_ERR_NOT_FOUND, "the model has no output %s%s%s computed from its input",
                         name ? "'" : "", name ? name : "", name ? "'" : "");
    if (padded(im->vals[v].view.pad) || im->vals[v].view.shape.ndim)
        return poet_fail(im->err, POET_ERR_UNSUPPORTED, "output '%s' is padded or has more than 4 dimensions", name);
    int x = im->vals[v].node;
    poet_shape s = *shape_of(im, x);
    if (s.ndim < 2) return poet_fail(im->err, POET_ERR_UNSUPPORTED, "output '%s' is not [rows, classes]", name);
    if (s.ndim > 2) {
        poet_attrs a = {.ndim = 2, .dim = {(int32_t)(poet_shape_numel(&s) / (uint64_t)s.dim[s.ndim - 1]), (int32_t)s.dim[s.ndim - 1]}};
        if ((x = add_node(im, POET_OP_RESHAPE, &x, 1, &a, "rows")) < 0) return im->err->status;
    }
    int loss = add_node(im, POET_OP_SOFTMAX_CE, &x, 1, NULL, "loss");
    if (loss < 0) return im->err->status;
    snprintf(im->m->summary.output, sizeof im->m->summary.output, "%.*s", POET_NAME_BYTES - 1, name);
    poet_status st = poet_graph_autodiff(&im->m->graph, loss, im->err);
    if (!st && o && o->train) st = poet_graph_set_trainable(&im->m->graph, o->train, im->err);
    return st;
}

static int opset_of(const Onnx__ModelProto *mp)
{
    for (size_t k = 0; k < mp->n_opset_import; k++) {
        const Onnx__OperatorSetIdProto *o = mp->opset_import[k];
        if (!o->domain || !*o->domain || strcmp(o->domain, "ai.onnx") == 0) return o->has_version ? (int)o->version : 0;
    }
    return 0;
}

/* An initializer trained by two nodes (weights tied in the model) would be
 * trained as two copies and written back as one of them: refused. */
static poet_status refuse_tied(importer *im)
{
    const binding *b = im->m->bind;
    for (int k = 0; k < im->m->n_bind; k++)
        for (int j = 0; j < k && b[k].from.kind == FROM_INITIALIZER; j++)
            if (b[j].from.kind == FROM_INITIALIZER && b[j].from.index == b[k].from.index &&
                (b[j].at != b[k].at || b[j].buffer != b[k].buffer))
                return poet_fail(im->err, POET_ERR_UNSUPPORTED, "initializer '%s' is the weights of two nodes (tied "
                                 "weights): poet would train two copies and write back one; untie them before export",
                                 im->gp->initializer[b[k].from.index]->name);
    return POET_OK;
}

static poet_status build(importer *im, const poet_onnx_options *o)
{
    poet_status st;
    im->loss_output = o && o->output ? o->output : im->gp->n_output ? im->gp->output[0]->name : NULL;
    if ((st = grow_slots(im)) || (st = read_initializers(im)) || (st = read_input(im, o)) || (st = count_uses(im)))
        return st;
    int nodes = (int)im->gp->n_node;
    /* Constants read nothing: known before any pattern looks ahead at them */
    for (int k = 0; k < nodes; k++)
        if (onnx_is_op(im->gp->node[k], "Constant")) {
            if ((st = map_node(im, im->gp->node[k], k))) return st;
            im->skip[k] = true;
        }
    for (int k = 0; k < nodes; k++)
        if (!im->skip[k] && (st = map_node(im, im->gp->node[k], k))) return st;
    if ((st = refuse_tied(im)) || (st = add_loss(im, o))) return st;
    poet_onnx_summary *s = &im->m->summary;
    s->opset = im->opset;
    s->onnx_nodes = nodes;
    s->folded = im->folded;
    s->forward_nodes = im->m->graph.n_forward;
    s->initializers = im->m->n_bind;
    s->params = im->m->n_params;
    s->buffers = im->m->n_buffers;
    const poet_node *in = &im->m->graph.nodes[0];
    snprintf(s->input, sizeof s->input, "%s", in->name);
    s->input_ndim = in->shape.ndim;
    for (int k = 0; k < in->shape.ndim; k++) s->input_dims[k] = in->shape.dim[k];
    return POET_OK;
}

static void importer_free(importer *im)
{
    for (int v = 0; v < im->n_vals; v++) {
        free(im->vals[v].name);
        tensor_free(&im->vals[v].t);
    }
    free(im->vals);
    free(im->slot);
    free(im->uses);
    free(im->skip);
}

/* Names reach terminals: one with a control character (an escape
 * sequence) is refused, wherever the model holds it. */
static bool printable(const char *s)
{
    for (; s && *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) return false;
    return true;
}

static bool values_printable(Onnx__ValueInfoProto *const *v, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (!printable(v[k]->name)) return false;
    return true;
}

static bool names_printable(const Onnx__GraphProto *g)
{
    bool ok = printable(g->name) && values_printable(g->input, g->n_input) &&
              values_printable(g->output, g->n_output) && values_printable(g->value_info, g->n_value_info);
    for (size_t k = 0; ok && k < g->n_initializer; k++) ok = printable(g->initializer[k]->name);
    for (size_t k = 0; ok && k < g->n_node; k++) {
        const Onnx__NodeProto *np = g->node[k];
        ok = printable(np->name) && printable(np->op_type);
        for (size_t j = 0; ok && j < np->n_input; j++) ok = printable(np->input[j]);
        for (size_t j = 0; ok && j < np->n_output; j++) ok = printable(np->output[j]);
    }
    return ok;
}

poet_status poet_onnx_import_bytes(const uint8_t *data, size_t len, const char *name, const poet_onnx_options *o,
                                   poet_onnx_model **out, poet_err *err)
{
    poet_err local = {0};
    if (!err) err = &local; /* the importer reads back the status it records */
    *out = NULL;
    Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, len, data);
    if (!mp || !mp->graph)
        return onnx__model_proto__free_unpacked(mp, NULL),
               poet_fail(err, POET_ERR_PARSE, "%s: not an ONNX model (the protobuf does not parse, or has no graph)", name);
    if (!names_printable(mp->graph))
        return onnx__model_proto__free_unpacked(mp, NULL),
               poet_fail(err, POET_ERR_PARSE, "%s: a name in the model holds a control character", name);
    int opset = opset_of(mp);
    poet_onnx_model *m = calloc(1, sizeof *m);
    poet_status st = m ? POET_OK : poet_fail(err, POET_ERR_NOMEM, "out of memory reading %s", name);
    if (!st && (opset < 7 || opset > 17))
        st = poet_fail(err, POET_ERR_UNSUPPORTED, "%s: opset %d (poet reads opsets 7 to 17)", name, opset);
    if (!st) st = poet_graph_init(&m->graph, mp->graph->name && *mp->graph->name ? mp->graph->name : "onnx",
                                  o && o->batch > 0 ? o->batch : 1, err);
    importer im = {mp->graph, opset, m, NULL, 0, 0, NULL, 0, NULL, NULL, 0, 0, 0, 0, 0, NULL, err};
    if (!st) st = build(&im, o);
    importer_free(&im);
    onnx__model_proto__free_unpacked(mp, NULL);
    if (!st) {
        m->graph.batch = im.batch;
        m->file = malloc(len ? len : 1);
        if (!m->file) st = poet_fail(err, POET_ERR_NOMEM, "out of memory keeping %s", name);
        else memcpy(m->file, data, len), m->file_len = len;
    }
    if (st) {
        poet_onnx_free(m);
        return st;
    }
    *out = m;
    return POET_OK;
}

poet_status poet_onnx_import(const char *path, const poet_onnx_options *o, poet_onnx_model **out, poet_err *err)
{
    char *data = NULL;
    size_t len = 0;
    *out = NULL;
    /* protobuf's own limit is 2 GiB */
    poet_status st = poet_read_file_max(path, POET_MAX_ONNX_BYTES, &data, &len, err);
    if (st) return st;
    st = poet_onnx_import_bytes((const uint8_t *)data, len, path, o, out, err);
    free(data);
    return st;
}

void poet_onnx_free(poet_onnx_model *m)
{
    if (!m) return;
    poet_graph_free(&m->graph);
    free(m->params);
    free(m->buffers);
    free(m->bind);
    free(m->file);
    free(m);
}

const poet_graph *poet_onnx_graph(const poet_onnx_model *m) { return &m->graph; }

const float *poet_onnx_params(const poet_onnx_model *m, uint64_t *count)
{
    *count = m->n_params;
    return m->params;
}

const float *poet_onnx_buffers(const poet_onnx_model *m, uint64_t *count)
{
    *count = m->n_buffers;
    return m->buffers;
}

void poet_onnx_summarize(const poet_onnx_model *m, poet_onnx_summary *s) { *s = m->summary; }
