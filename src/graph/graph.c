/* Training graph: construction with shape inference, and autodiff. */
#include "poet/graph.h"
#include "../ops/ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

poet_status poet_graph_init(poet_graph *g, const char *model, int batch, poet_err *err)
{
    memset(g, 0, sizeof *g);
    if (batch <= 0) return poet_fail(err, POET_ERR_INVALID, "batch size must be > 0, got %d", batch);
    snprintf(g->model, sizeof g->model, "%s", model ? model : "");
    g->batch = batch;
    g->elem_bytes = 4;
    g->loss = -1;
    return POET_OK;
}

void poet_graph_free(poet_graph *g)
{
    if (!g) return;
    free(g->nodes);
    g->nodes = NULL;
    g->n_nodes = g->cap = 0;
}

/* Reserves the next node slot, or records why not. */
static poet_node *append(poet_graph *g)
{
    if (g->n_nodes >= POET_MAX_NODES) {
        poet_fail(&g->err, POET_ERR_LIMIT, "graph '%s' exceeds the limit of %d nodes", g->model, POET_MAX_NODES);
        return NULL;
    }
    if (g->n_nodes == g->cap) {
        int cap = g->cap ? 2 * g->cap : 64;
        poet_node *p = realloc(g->nodes, (size_t)cap * sizeof *p);
        if (!p) {
            poet_fail(&g->err, POET_ERR_NOMEM, "out of memory building graph '%s'", g->model);
            return NULL;
        }
        g->nodes = p;
        g->cap = cap;
    }
    poet_node *n = &g->nodes[g->n_nodes];
    memset(n, 0, sizeof *n);
    n->fwd = -1;
    n->wrt = 0;
    return n;
}

/* Sets bytes from the shape; rejects tensors too large to be real. */
static poet_status finish_node(poet_graph *g, poet_node *n)
{
    uint64_t numel = poet_shape_numel(&n->shape);
    if (numel > POET_MAX_TENSOR_BYTES / (uint64_t)g->elem_bytes)
        return poet_fail(&g->err, POET_ERR_LIMIT, "node '%s': output tensor exceeds %llu bytes", n->name,
                         (unsigned long long)POET_MAX_TENSOR_BYTES);
    n->bytes = numel * (uint64_t)g->elem_bytes;
    g->n_nodes++;
    return POET_OK;
}

/* Fills the general window fields from the square shorthands, and the
 * defaults of unset fields, so that kernels read one set of fields. */
static void normalize_attrs(poet_node *n)
{
    poet_attrs *a = &n->attrs;
    bool window = n->op == POET_OP_CONV2D || n->op == POET_OP_MAXPOOL2D || n->op == POET_OP_AVGPOOL2D;
    if (window && a->kh == 0 && a->kw == 0) {
        a->kh = a->kw = a->kernel;
        a->sh = a->sw = a->stride;
        a->pt = a->pl = a->pb = a->pr = a->pad;
    }
    if (window && a->dh == 0 && a->dw == 0) a->dh = a->dw = 1;
    if (n->op == POET_OP_CONV2D && a->groups == 0) a->groups = 1;
    if ((n->op == POET_OP_BATCHNORM2D || n->op == POET_OP_LAYERNORM) && a->eps == 0) a->eps = 1e-5f;
    if (n->op == POET_OP_BATCHNORM2D && a->momentum == 0) a->momentum = 0.1f;
}

int poet_graph_add(poet_graph *g, poet_op op, const int *inputs, int n_inputs, const poet_attrs *attrs,
                   const char *name)
{
    if (g->err.status) return -1;
    const op_def *def = op_get(op);
    if (!def || !def->infer) {
        poet_fail(&g->err, POET_ERR_INVALID, "op %d cannot be added to a forward graph", (int)op);
        return -1;
    }
    if (g->loss >= 0) {
        poet_fail(&g->err, POET_ERR_INVALID, "graph '%s' already has its backward pass", g->model);
        return -1;
    }
    if (n_inputs < def->min_inputs || n_inputs > def->max_inputs) {
        poet_fail(&g->err, POET_ERR_INVALID, "%s takes %d to %d inputs, got %d", def->name, def->min_inputs,
                  def->max_inputs, n_inputs);
        return -1;
    }
    for (int i = 0; i < n_inputs; i++)
        if (inputs[i] < 0 || inputs[i] >= g->n_nodes) {
            poet_fail(&g->err, POET_ERR_INVALID, "%s input %d refers to node %d, which does not exist yet", def->name,
                      i, inputs[i]);
            return -1;
        }
    poet_node *n = append(g);
    if (!n) return -1;
    n->op = op;
    n->n_inputs = n_inputs;
    for (int i = 0; i < n_inputs; i++) n->inputs[i] = inputs[i];
    if (attrs) n->attrs = *attrs;
    normalize_attrs(n);
    if (name && *name)
        snprintf(n->name, sizeof n->name, "%s", name);
    else
        snprintf(n->name, sizeof n->name, "%s%d", def->name, g->n_nodes);
    if (def->infer(g, n, &g->err) || finish_node(g, n)) return -1;
    g->n_forward = g->n_nodes;
    return g->n_nodes - 1;
}

/* ---- autodiff ---- */

typedef struct grad_lists {
    int *head; /* per forward node: first contribution, -1 if none */
    int *node; /* contribution: the gradient node */
    int *next;
    int n, cap;
} grad_lists;

static poet_status push_contrib(grad_lists *l, int tensor, int grad_node, poet_graph *g)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        int *a = realloc(l->node, (size_t)cap * sizeof *a);
        if (!a) return poet_fail(&g->err, POET_ERR_NOMEM, "out of memory in autodiff");
        l->node = a;
        int *b = realloc(l->next, (size_t)cap * sizeof *b);
        if (!b) return poet_fail(&g->err, POET_ERR_NOMEM, "out of memory in autodiff");
        l->next = b;
        l->cap = cap;
    }
    l->node[l->n] = grad_node;
    l->next[l->n] = l->head[tensor];
    l->head[tensor] = l->n++;
    return POET_OK;
}

/* of is an index: append may move the nodes */
static int emit_grad_sum(poet_graph *g, const int *terms, int n_terms, int of)
{
    poet_node *n = append(g);
    if (!n) return -1;
    n->op = POET_OP_GRAD_SUM;
    n->n_inputs = n_terms;
    memcpy(n->inputs, terms, (size_t)n_terms * sizeof *terms);
    n->shape = g->nodes[terms[0]].shape;
    n->flops = (double)(n_terms - 1) * (double)poet_shape_numel(&n->shape);
    snprintf(n->name, sizeof n->name, "%.*s.grad_sum", POET_NAME_BYTES - 10, g->nodes[of].name);
    return finish_node(g, n) ? -1 : g->n_nodes - 1;
}

/* Sums the contributions to tensor f into one gradient node; groups of at
 * most POET_MAX_INPUTS terms are chained. Returns the node, or -1. */
static int gradient_of(poet_graph *g, grad_lists *l, int f)
{
    int terms[POET_MAX_INPUTS], n = 0, acc = -1;
    for (int c = l->head[f]; c >= 0; c = l->next[c]) {
        if (n == POET_MAX_INPUTS) {
            if ((acc = emit_grad_sum(g, terms, n, f)) < 0) return -1;
            n = 0;
            terms[n++] = acc;
        }
        terms[n++] = l->node[c];
    }
    if (n == 1) return terms[0];
    return emit_grad_sum(g, terms, n, f);
}

/* Of forward node f's input channels, the share its weight gradient reads:
 * those of the channel_select after it (ratio:R), or all. */
static double channel_share(const poet_graph *g, int f, unsigned reads)
{
    const poet_node *sel = &g->nodes[f + 1];
    if (!(reads & READ_MASK) || sel->op != POET_OP_CHANNEL_SELECT) return 1.0;
    return (double)sel->attrs.features / (double)g->nodes[sel->inputs[0]].shape.dim[sel->attrs.axis];
}

/* Emits the gradient of forward node f with respect to input wrt. */
static int emit_grad(poet_graph *g, int f, int wrt, int dy)
{
    poet_node *n = append(g);
    if (!n) return -1;
    const poet_node *fw = &g->nodes[f];
    n->op = POET_OP_GRAD;
    n->fwd = f;
    n->wrt = wrt;
    if (dy >= 0) n->inputs[n->n_inputs++] = dy;
    unsigned reads = op_reads(fw, wrt);
    if (reads & READ_IN0) n->inputs[n->n_inputs++] = fw->inputs[0];
    if (reads & READ_IN1) n->inputs[n->n_inputs++] = fw->inputs[1];
    if (reads & READ_OUT) n->inputs[n->n_inputs++] = f;
    if (reads & READ_MASK) n->inputs[n->n_inputs++] = f + 1;
    if (wrt >= 0) {
        n->shape = g->nodes[fw->inputs[wrt]].shape;
    } else {
        n->shape.ndim = 1; /* parameter gradients live in persistent memory */
    }
    /* POET's convention: backward costs twice the forward FLOPs; an op with
     * one gradient node per input splits them, a node that skips the input
     * gradient does only the weight-gradient half. */
    if (op_grad_rule(fw) == GRAD_PER_INPUT)
        n->flops = 2.0 * fw->flops / fw->n_inputs;
    else /* and a bias alone costs a sum of dY; weights that read only some input channels, their share */
        n->flops = (wrt < 0 ? 0.0 : fw->flops) +
                   (fw->attrs.flags & POET_ATTR_FREEZE_WEIGHTS ? 0.0 : fw->flops * channel_share(g, f, reads));
    if (n->flops == 0) n->flops = (double)poet_shape_numel(&fw->shape);
    if (wrt < 0)
        snprintf(n->name, sizeof n->name, "%.*s.grad_params", POET_NAME_BYTES - 13, fw->name);
    else if (fw->n_inputs > 1)
        snprintf(n->name, sizeof n->name, "%.*s.grad%c", POET_NAME_BYTES - 7, fw->name, (char)('0' + wrt));
    else
        snprintf(n->name, sizeof n->name, "%.*s.grad", POET_NAME_BYTES - 6, fw->name);
    return finish_node(g, n) ? -1 : g->n_nodes - 1;
}

static uint64_t trained(const poet_node *n) { return poet_param_trained(n->op, &n->attrs, n->params); }

static poet_status backprop_node(poet_graph *g, grad_lists *l, const bool *needs, int f)
{
    const op_def *def = op_get(g->nodes[f].op);
    int dy = -1;
    if (!def->seeds_grad) {
        if (l->head[f] < 0) return POET_OK; /* does not reach the loss */
        if ((dy = gradient_of(g, l, f)) < 0) return g->err.status;
    }
    const poet_node *fw = &g->nodes[f];
    int n_in = fw->n_inputs, ins[POET_MAX_INPUTS];
    memcpy(ins, fw->inputs, sizeof ins);
    bool has_params = trained(fw) > 0;
    switch (op_grad_rule(fw)) {
    case GRAD_NONE: return POET_OK;
    case GRAD_ALIAS:
        for (int j = 0; j < n_in; j++) {
            if (!needs[ins[j]]) continue;
            /* an input broadcast or zero-padded into the output receives a
             * reduction or a slice of dY: a node */
            int node = poet_shape_numel(&g->nodes[ins[j]].shape) == poet_shape_numel(&fw->shape)
                           ? dy
                           : emit_grad(g, f, j, dy);
            if (node < 0 || push_contrib(l, ins[j], node, g)) return g->err.status;
        }
        return POET_OK;
    case GRAD_FUSED: {
        if (!needs[ins[0]] && !has_params) return POET_OK;
        int wrt = needs[ins[0]] ? 0 : POET_GRAD_PARAMS_ONLY;
        int node = emit_grad(g, f, wrt, dy);
        if (node < 0) return g->err.status;
        return wrt == 0 ? push_contrib(l, ins[0], node, g) : POET_OK;
    }
    case GRAD_PER_INPUT:
        for (int j = 0; j < n_in; j++) {
            if (!needs[ins[j]]) continue;
            int node = emit_grad(g, f, j, dy);
            if (node < 0 || push_contrib(l, ins[j], node, g)) return g->err.status;
        }
        return POET_OK;
    }
    return POET_OK;
}

poet_status poet_graph_autodiff(poet_graph *g, int loss, poet_err *err)
{
    if (g->err.status) return poet_fail(err, g->err.status, "%s", g->err.msg);
    if (g->loss >= 0) return poet_fail(err, POET_ERR_INVALID, "graph '%s' already has its backward pass", g->model);
    if (loss != g->n_nodes - 1 || loss < 0 || !op_get(g->nodes[loss].op)->seeds_grad)
        return poet_fail(err, POET_ERR_INVALID, "graph '%s': the loss must be the last forward node", g->model);
    int F = g->n_nodes;
    bool *needs = calloc((size_t)F, sizeof *needs);
    grad_lists l = {calloc((size_t)F, sizeof(int)), NULL, NULL, 0, 0};
    poet_status st = POET_OK;
    if (!needs || !l.head) {
        st = poet_fail(err, POET_ERR_NOMEM, "out of memory in autodiff");
        goto done;
    }
    for (int f = 0; f < F; f++) {
        const poet_node *n = &g->nodes[f];
        l.head[f] = -1;
        needs[f] = trained(n) > 0;
        for (int j = 0; j < n->n_inputs; j++) needs[f] = needs[f] || needs[n->inputs[j]];
    }
    for (int f = loss; f >= 0 && !st; f--) st = backprop_node(g, &l, needs, f);
    if (st) {
        poet_fail(err, st, "%s", g->err.msg);
        g->n_nodes = F;
        memset(&g->err, 0, sizeof g->err);
    } else {
        g->loss = loss;
    }
done:
    free(needs);
    free(l.head);
    free(l.node);
    free(l.next);
    return st;
}

uint64_t poet_graph_param_count(const poet_graph *g)
{
    uint64_t s = 0;
    for (int i = 0; i < g->n_forward; i++) s += g->nodes[i].params;
    return s;
}

uint64_t poet_graph_trained_count(const poet_graph *g)
{
    uint64_t s = 0;
    for (int i = 0; i < g->n_forward; i++) s += trained(&g->nodes[i]);
    return s;
}

uint64_t poet_graph_buffer_count(const poet_graph *g)
{
    uint64_t s = 0;
    for (int i = 0; i < g->n_forward; i++) s += g->nodes[i].buffers;
    return s;
}
