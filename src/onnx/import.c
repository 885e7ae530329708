/* ONNX in: the model's graph into poet's ops, its initializers into poet's
 * weights (docs/onnx.md). Nodes are read in the file's order, which ONNX
 * requires to be topological; a node whose inputs are all known is folded
 * into a constant; the rest map to poet's op registry, by op family in
 * map_*.c, on the values and nodes of values.c. This file keeps the
 * dispatch and the graph around it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "importer.h"
#include "poet/file.h"


/* Identity of an activation renames it; of an initializer, it is a weight of
 * its own (exporters merge equal initializers through Identity). */
static poet_status map_identity(importer *im, const Onnx__NodeProto *np, int at)
{
    const value *x = im_viewed_input(im, np, 0, true);
    if (!x) return im->err->status;
    if (x->node >= 0) return im_name_view(im, np, 0, x->node, &x->view);
    tensor copy = {0};
    poet_status st = fold_node(np, &(fold_input){&x->t, NULL}, 1, &copy, im->err);
    if (st) return st;
    int v = im_define_known(im, np->output[0], &copy);
    if (v < 0) return im->err->status;
    im->vals[v].from = x->from.kind == FROM_NONE ? x->from : (origin){FROM_IDENTITY, at, x->from.transposed};
    return POET_OK;
}

/* ---- a node ---- */

static bool all_known(importer *im, const Onnx__NodeProto *np)
{
    for (size_t j = 0; j < np->n_input; j++) {
        int v = im_input_name(np, (int)j) ? im_find(im, np->input[j]) : -1;
        if (im_input_name(np, (int)j) && (v < 0 || !im->vals[v].known)) return false;
    }
    return np->n_input > 0;
}

static poet_status fold(importer *im, const Onnx__NodeProto *np)
{
    fold_input in[16] = {{0}};
    onnx_shape shapes[16];
    int n = (int)np->n_input < 16 ? (int)np->n_input : 16;
    for (int j = 0; j < n; j++) {
        int v = im_input_name(np, j) ? im_find(im, np->input[j]) : -1;
        if (v >= 0 && im->vals[v].node >= 0) shapes[j] = im_value_shape(im, &im->vals[v]);
        if (v >= 0) in[j] = (fold_input){im->vals[v].known ? &im->vals[v].t : NULL,
                                         im->vals[v].node >= 0 ? &shapes[j] : NULL};
    }
    tensor t;
    poet_status st = fold_node(np, in, n, &t, im->err);
    if (st) return st;
    int v = im_define_known(im, np->output[0], &t);
    if (v < 0) return im->err->status;
    im->folded++;
    /* a trained tensor broadcast by Expand is still that tensor where a
     * Concat reads it (im_map_concat) */
    int of = onnx_is_op(np, "Expand") ? im_find(im, np->input[0]) : -1;
    const value *trained = of >= 0 ? im_trained_tensor(im, &im->vals[of]) : NULL;
    if (trained) im->vals[v].expanded = (int)(trained - im->vals);
    /* reshaped (PyTorch unsqueezes nn.PReLU's slope to [C, 1, 1]), a weight
     * is still that weight, element for element */
    bool reshaped = onnx_is_op(np, "Unsqueeze") || onnx_is_op(np, "Squeeze") || onnx_is_op(np, "Reshape");
    int same = reshaped ? im_find(im, np->input[0]) : -1;
    if (same >= 0 && im->vals[same].from.kind != FROM_NONE && !im->vals[same].from.transposed && t.is_float)
        im->vals[v].from = im->vals[same].from;
    /* a weight the exporter transposes stays that weight, to write back */
    int src = onnx_is_op(np, "Transpose") && t.ndim == 2 ? im_find(im, np->input[0]) : -1;
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
        return im_refuse(im, np, "a Constant without a value poet reads");
    }
    if (st) return st;
    return im_define_known(im, np->output[0], &t) < 0 ? im->err->status : POET_OK;
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
        return im_refuse(im, np, "ops outside the default ONNX domain are not supported");
    if (onnx_is_op(np, "Constant")) return map_constant(im, np);
    if (onnx_is_op(np, "Identity")) return map_identity(im, np, at);
    if (all_known(im, np) || onnx_is_op(np, "Shape")) return fold(im, np);
    for (size_t k = 0; k < sizeof UNARY / sizeof *UNARY; k++)
        if (onnx_is_op(np, UNARY[k].name))
            return im_map_unary(im, np, UNARY[k].op,
                             &(poet_attrs){.flags = UNARY[k].op == POET_OP_GLOBAL_AVGPOOL ? POET_ATTR_KEEPDIMS : 0});
    if (onnx_is_op(np, "Conv")) return im_map_conv(im, np);
    if (onnx_is_op(np, "Gemm")) return im_map_gemm(im, np);
    if (onnx_is_op(np, "MatMul")) return im_map_matmul(im, np, at);
    if (onnx_is_op(np, "Add")) return im_map_binary(im, np, POET_OP_ADD);
    if (onnx_is_op(np, "Sub")) return im_map_binary(im, np, POET_OP_SUB);
    if (onnx_is_op(np, "Mul")) return im_map_binary(im, np, POET_OP_MUL);
    if (onnx_is_op(np, "Div")) return im_map_binary(im, np, POET_OP_DIV);
    if (onnx_is_op(np, "Clip")) return im_map_clip(im, np);
    if (onnx_is_op(np, "LeakyRelu"))
        return im_map_unary(im, np, POET_OP_LEAKY_RELU, &(poet_attrs){.alpha = attr_float(np, "alpha", 0.01f)});
    if (onnx_is_op(np, "PRelu")) return im_map_prelu(im, np);
    if (onnx_is_op(np, "Elu")) return im_map_unary(im, np, POET_OP_ELU, &(poet_attrs){.alpha = attr_float(np, "alpha", 1.0f)});
    if (onnx_is_op(np, "HardSigmoid"))
        return im_map_unary(im, np, POET_OP_HARDSIGMOID,
                         &(poet_attrs){.alpha = attr_float(np, "alpha", 0.2f), .beta = attr_float(np, "beta", 0.5f)});
    if (onnx_is_op(np, "BatchNormalization")) return im_map_batchnorm(im, np);
    if (onnx_is_op(np, "LayerNormalization")) return im_map_layernorm(im, np);
    if (onnx_is_op(np, "InstanceNormalization")) return im_map_instancenorm(im, np);
    if (onnx_is_op(np, "ReduceMean")) return im_map_layernorm_pattern(im, np, at);
    if (onnx_is_op(np, "MaxPool")) return im_map_pool(im, np, true);
    if (onnx_is_op(np, "AveragePool")) return im_map_pool(im, np, false);
    if (onnx_is_op(np, "Flatten")) return im_map_flatten(im, np);
    if (onnx_is_op(np, "Reshape")) return im_map_reshape(im, np);
    if (onnx_is_op(np, "Squeeze") || onnx_is_op(np, "Unsqueeze")) return im_map_squeeze(im, np);
    if (onnx_is_op(np, "Transpose")) return im_map_transpose(im, np);
    if (onnx_is_op(np, "Pad")) return im_map_pad(im, np);
    if (onnx_is_op(np, "Concat")) return im_map_concat(im, np);
    if (onnx_is_op(np, "Split")) return im_map_split(im, np);
    if (onnx_is_op(np, "Slice")) return im_map_slice(im, np);
    if (onnx_is_op(np, "Gather")) return im_map_gather(im, np);
    if (onnx_is_op(np, "Resize") || onnx_is_op(np, "Upsample")) return im_map_resize(im, np);
    if (im_ends_output(im, np)) return im_map_output_softmax(im, np);
    if (onnx_is_op(np, "Softmax")) return im_map_softmax(im, np);
    if (onnx_is_op(np, "Dropout")) return im_map_dropout(im, np);
    if (onnx_is_op(np, "Cast")) {
        if (attr_int(np, "to", ONNX_FLOAT) != ONNX_FLOAT) return im_refuse(im, np, "a cast of an activation to another type than float");
        int x = im_activation(im, np, 0);
        return x < 0 ? im->err->status : im_name_output(im, np, 0, x);
    }
    return im_refuse(im, np, "this op is not supported (docs/onnx.md lists those that are)");
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
        int v = im_define_known(im, p->name, &t);
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
        if (o && o->input ? strcmp(vi->name, o->input) == 0 : im_find(im, vi->name) < 0) in = vi;
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
    int v = im_add_node(im, POET_OP_INPUT, NULL, 0, &a, in->name);
    int at = v < 0 ? -1 : im_define(im, in->name);
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
        if (np->n_output < 1 || !np->output[0] || !*np->output[0]) return im_refuse(im, np, "no output");
        for (size_t j = 0; j < np->n_input; j++)
            if (np->input[j] && *np->input[j] && im_find(im, np->input[j]) < 0 && im_define(im, np->input[j]) < 0)
                return im->err->status;
        for (size_t j = 0; j < np->n_output; j++)
            if (np->output[j] && *np->output[j] && im_find(im, np->output[j]) < 0 && im_define(im, np->output[j]) < 0)
                return im->err->status;
    }
    im->uses = calloc((size_t)im->n_vals + 1, sizeof *im->uses);
    im->skip = calloc(im->gp->n_node + 1, sizeof *im->skip);
    if (!im->uses || !im->skip) return poet_fail(im->err, POET_ERR_NOMEM, "out of memory reading the ONNX graph");
    for (size_t k = 0; k < im->gp->n_node; k++)
        for (size_t j = 0; j < im->gp->node[k]->n_input; j++) {
            int v = im->gp->node[k]->input[j] ? im_find(im, im->gp->node[k]->input[j]) : -1;
            if (v >= 0) im->uses[v]++;
        }
    for (size_t k = 0; k < im->gp->n_output; k++) {
        int v = im->gp->output[k]->name ? im_find(im, im->gp->output[k]->name) : -1;
        if (v >= 0) im->uses[v]++;
    }
    return POET_OK;
}

/* The loss: softmax cross-entropy over the output, its leading dimensions
 * as rows. */
static poet_status add_loss(importer *im, const poet_onnx_options *o)
{
    const char *name = im->loss_output;
    int v = name ? im_find(im, name) : -1;
    if (v < 0 || im->vals[v].node < 0)
        return poet_fail(im->err, POET_ERR_NOT_FOUND, "the model has no output %s%s%s computed from its input",
                         name ? "'" : "", name ? name : "", name ? "'" : "");
    if (im_padded(im->vals[v].view.pad) || im->vals[v].view.shape.ndim)
        return poet_fail(im->err, POET_ERR_UNSUPPORTED, "output '%s' is padded or has more than 4 dimensions", name);
    int x = im->vals[v].node;
    poet_shape s = *im_shape_of(im, x);
    if (s.ndim < 2) return poet_fail(im->err, POET_ERR_UNSUPPORTED, "output '%s' is not [rows, classes]", name);
    if (s.ndim > 2) {
        poet_attrs a = {.ndim = 2, .dim = {(int32_t)(poet_shape_numel(&s) / (uint64_t)s.dim[s.ndim - 1]), (int32_t)s.dim[s.ndim - 1]}};
        if ((x = im_add_node(im, POET_OP_RESHAPE, &x, 1, &a, "rows")) < 0) return im->err->status;
    }
    int loss = im_add_node(im, POET_OP_SOFTMAX_CE, &x, 1, NULL, "loss");
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
    if ((st = im_grow_slots(im)) || (st = read_initializers(im)) || (st = read_input(im, o)) || (st = count_uses(im)))
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
