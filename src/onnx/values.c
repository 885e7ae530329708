/* The ONNX importer's values and the poet nodes it makes: names looked up
 * by hash, known tensors and activations, views, new nodes and their
 * weights. import.c and every map_*.c build on these. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/hash.h"
#include "importer.h"

/* ---- names ---- */

static uint32_t hash_name(const char *s)
{
    uint32_t h = FNV1A_START;
    for (; *s; s++) h = fnv1a_byte(h, (uint8_t)*s);
    return h;
}

int im_find(const importer *im, const char *name)
{
    if (!name || !*name) return -1;
    for (uint32_t k = hash_name(name) & (uint32_t)(im->slots - 1);; k = (k + 1) & (uint32_t)(im->slots - 1)) {
        int v = im->slot[k];
        if (v < 0) return -1;
        if (strcmp(im->vals[v].name, name) == 0) return v;
    }
}

poet_status im_grow_slots(importer *im)
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
int im_define(importer *im, const char *name)
{
    int v = im_find(im, name);
    if (v >= 0 && (im->vals[v].known || im->vals[v].node >= 0))
        return poet_fail(im->err, POET_ERR_PARSE, "the name '%s' is produced twice (the graph is not valid ONNX)",
                         name), -1;
    if (v >= 0) return v;
    if ((im->n_vals + 1) * 2 > im->slots && im_grow_slots(im)) return -1;
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
int im_define_known(importer *im, const char *name, tensor *t)
{
    int v = im_define(im, name);
    if (v < 0) {
        tensor_free(t);
        return -1;
    }
    im->vals[v].known = true;
    im->vals[v].t = *t;
    return v;
}

poet_status im_refuse(importer *im, const Onnx__NodeProto *np, const char *what)
{
    return onnx_refuse(np, what, im->err);
}

const char *im_input_name(const Onnx__NodeProto *np, int j)
{
    return j < (int)np->n_input && np->input[j] && *np->input[j] ? np->input[j] : NULL;
}

bool im_padded(const int32_t pad[4]) { return pad[0] || pad[1] || pad[2] || pad[3]; }

/* Input j as a value, a view of its node included; NULL (absent optional
 * input) after an error when required. */
const value *im_viewed_input(importer *im, const Onnx__NodeProto *np, int j, bool required)
{
    const char *name = im_input_name(np, j);
    int v = name ? im_find(im, name) : -1;
    if (v >= 0 && !im->vals[v].known && im->vals[v].node < 0) v = -1; /* named, not produced yet */
    if (v < 0 && (required || name))
        poet_fail(im->err, POET_ERR_PARSE, "node '%s' (%s): input '%s' is not computed before it (dangling, or the "
                  "graph is not in topological order)", onnx_node_label(np), np->op_type, name ? name : "(missing)");
    return v < 0 ? NULL : &im->vals[v];
}

/* Input j as a value that is its node as it is. */
const value *im_input_value(importer *im, const Onnx__NodeProto *np, int j, bool required)
{
    const value *v = im_viewed_input(im, np, j, required);
    if (v && im_padded(v->view.pad))
        return onnx_refuse(np, "it reads a zero-padded tensor (a Pad folds only into the Conv or AveragePool that "
                           "reads it)", im->err), NULL;
    if (v && v->view.shape.ndim)
        return onnx_refuse(np, "an input of more than 4 dimensions (poet reads such only through Reshape, "
                           "Transpose, Squeeze and Unsqueeze)", im->err), NULL;
    return v;
}

/* Input j as a poet node (an activation); -1 after an error. */
int im_activation(importer *im, const Onnx__NodeProto *np, int j)
{
    const value *v = im_input_value(im, np, j, true);
    if (!v) return -1;
    if (v->node < 0) {
        im_refuse(im, np, "an input poet needs computed at training time is a constant here");
        return -1;
    }
    return v->node;
}

/* Input j as a known tensor; NULL after an error when required. */
const tensor *im_known(importer *im, const Onnx__NodeProto *np, int j, bool required)
{
    const value *v = im_input_value(im, np, j, required);
    if (!v) return NULL;
    if (!v->known) {
        im_refuse(im, np, "an input poet needs as a constant or initializer is computed at training time");
        return NULL;
    }
    return &v->t;
}

const value *im_known_value(importer *im, const Onnx__NodeProto *np, int j)
{
    return im_known(im, np, j, true) ? &im->vals[im_find(im, im_input_name(np, j))] : NULL;
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
 * zero until im_fill() writes them. Returns the node or -1. */
int im_add_node(importer *im, poet_op op, const int *inputs, int n_inputs, const poet_attrs *a, const char *out)
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
int im_add_step(importer *im, const Onnx__NodeProto *np, poet_op op, int x, const poet_attrs *a, const char *suffix)
{
    char name[POET_NAME_BYTES];
    step_name(name, np, suffix);
    return im_add_node(im, op, &x, 1, a, name);
}

/* Names output k of np as poet node v. */
poet_status im_name_output(importer *im, const Onnx__NodeProto *np, int k, int v)
{
    int at = k < (int)np->n_output ? im_define(im, np->output[k]) : -1;
    if (at < 0) return im->err->status ? im->err->status : im_refuse(im, np, "an output is missing");
    im->vals[at].node = v;
    return POET_OK;
}

/* Adds a poet node for np's first output and names that output after it. */
poet_status im_emit(importer *im, const Onnx__NodeProto *np, poet_op op, const int *inputs, int n_inputs,
                        const poet_attrs *a)
{
    int v = im_add_node(im, op, inputs, n_inputs, a, np->output[0]);
    return v < 0 ? im->err->status : im_name_output(im, np, 0, v);
}

/* Copies tensor t into the last node's parameters (or buffers) at offset,
 * transposed from [rows][cols] when rows > 0, and records where it goes
 * back to. */
poet_status im_fill(importer *im, const value *src, bool buffer, uint64_t offset, int64_t rows, int64_t cols)
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

int64_t im_prod(const int64_t *d, int n)
{
    int64_t p = 1;
    for (int k = 0; k < n; k++) p *= d[k];
    return p;
}

const poet_shape *im_shape_of(const importer *im, int node) { return &im->m->graph.nodes[node].shape; }

/* The shape ONNX gives the value of a node: its node's, or its view's. */
onnx_shape im_value_shape(const importer *im, const value *v)
{
    if (v->view.shape.ndim) return v->view.shape;
    const poet_shape *n = im_shape_of(im, v->node);
    onnx_shape s = {n->ndim, {0}};
    for (int k = 0; k < n->ndim; k++) s.dim[k] = n->dim[k];
    if (s.ndim == 4) s.dim[2] += v->view.pad[0] + v->view.pad[2], s.dim[3] += v->view.pad[1] + v->view.pad[3];
    return s;
}

/* Names output k of np as node v seen through view w. */
poet_status im_name_view(importer *im, const Onnx__NodeProto *np, int k, int v, const view *w)
{
    view copy = *w; /* w may lie in im->vals, which naming may move */
    poet_status st = im_name_output(im, np, k, v);
    if (!st) im->vals[im_find(im, np->output[k])].view = copy;
    return st;
}

/* Input j as a node, read in the shape *s ONNX gives it (which may have
 * more than 4 dimensions); -1 after an error. */
int im_shaped_activation(importer *im, const Onnx__NodeProto *np, int j, onnx_shape *s)
{
    const value *v = im_viewed_input(im, np, j, true);
    if (v && im_padded(v->view.pad)) v = im_input_value(im, np, j, true); /* refuses it */
    if (v && v->node < 0) return im_activation(im, np, j);
    if (v) *s = im_value_shape(im, v);
    return v ? v->node : -1;
}

/* Input j as a node, and the zero padding (top, left, bottom, right) a Pad
 * before it leaves to np; -1 after an error. */
int im_padded_activation(importer *im, const Onnx__NodeProto *np, int j, int32_t pad[4])
{
    const value *v = im_viewed_input(im, np, j, true);
    if (v && v->view.shape.ndim) v = im_input_value(im, np, j, true); /* refuses it */
    if (v && v->node < 0) return im_activation(im, np, j);
    if (v) memcpy(pad, v->view.pad, sizeof v->view.pad);
    return v ? v->node : -1;
}
