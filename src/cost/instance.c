/* The costed graph: a training graph priced on a device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "poet/cost.h"
#include "poet/alq.h"
#include "poet/sparse.h"

void poet_instance_free(poet_instance *inst)
{
    if (!inst) return;
    free(inst->nodes);
    free(inst->edges);
    inst->nodes = NULL;
    inst->edges = NULL;
    inst->T = inst->n_edges = 0;
}

/* n is the graph's node c costs: its op, or for a gradient its forward node's. */
static void price_node(poet_cnode *c, const poet_profile *d, const poet_graph *g, const poet_node *n)
{
    bool grad = n->op == POET_OP_GRAD;
    int kind = poet_cost_kind(g, n);
    double elements = (double)c->bytes / (double)d->bytes_per_element;
    c->time_s = poet_cost_node_s(d, kind, grad, c->flops, elements);
    c->compute_j = poet_cost_node_j(d, kind, grad, c->flops, elements);
    c->pagein_j = poet_cost_pagein_j(d, c->bytes);
    c->pageout_j = poet_cost_pageout_j(d, c->bytes);
    c->pagein_s = poet_cost_pagein_s(d, c->bytes);
    c->pageout_s = poet_cost_pageout_s(d, c->bytes);
}

static void node_op_label(const poet_graph *g, const poet_node *n, char *out, size_t cap)
{
    if (n->op == POET_OP_GRAD)
        snprintf(out, cap, "%s_grad", poet_op_name(g->nodes[n->fwd].op));
    else
        snprintf(out, cap, "%s", poet_op_name(n->op));
}

static bool has_input(const poet_node *n, int before, int u)
{
    for (int j = 0; j < before; j++)
        if (n->inputs[j] == u) return true;
    return false;
}

poet_status poet_instance_from_graph(const poet_graph *g, const poet_profile *d, poet_instance *out, poet_err *err)
{
    poet_status st = poet_profile_validate(d, err);
    if (st) return st;
    if (g->loss < 0) return poet_fail(err, POET_ERR_INVALID, "graph '%s' has no backward pass yet", g->model);
    if (d->bytes_per_element != g->elem_bytes)
        return poet_fail(err, POET_ERR_UNSUPPORTED, "device '%s' stores %d-byte elements; zoo graphs use %d", d->name,
                         d->bytes_per_element, g->elem_bytes);
    size_t n_nodes = g->n_nodes > 0 ? (size_t)g->n_nodes : 0, n_edges = 0;
    if (n_nodes < 1 || n_nodes > POET_MAX_NODES)
        return poet_fail(err, POET_ERR_LIMIT, "graph '%s' has %d nodes; poet accepts 1 to %d", g->model, g->n_nodes,
                         POET_MAX_NODES);
    for (size_t v = 0; v < n_nodes; v++) n_edges += (size_t)g->nodes[v].n_inputs;
    poet_instance inst;
    memset(&inst, 0, sizeof inst);
    snprintf(inst.model, sizeof inst.model, "%s", g->model);
    inst.batch = g->batch;
    inst.device = *d;
    inst.T = g->n_nodes;
    inst.nodes = calloc(n_nodes, sizeof *inst.nodes);
    inst.edges = calloc(n_edges + 1, sizeof *inst.edges);
    if (!inst.nodes || !inst.edges) {
        poet_instance_free(&inst);
        return poet_fail(err, POET_ERR_NOMEM, "out of memory costing graph '%s'", g->model);
    }
    for (int v = 0; v < g->n_nodes; v++) {
        const poet_node *n = &g->nodes[v];
        poet_cnode *c = &inst.nodes[v];
        snprintf(c->name, sizeof c->name, "%s", n->name);
        node_op_label(g, n, c->op, sizeof c->op);
        c->is_backward = v >= g->n_forward;
        c->bytes = n->bytes;
        c->flops = n->flops;
        price_node(c, d, g, n);
        for (int j = 0; j < n->n_inputs; j++) /* an input read twice is one edge */
            if (!has_input(n, j, n->inputs[j])) inst.edges[inst.n_edges++] = (poet_edge){n->inputs[j], v};
    }
    double elem = (double)g->elem_bytes;
    inst.parameter_bytes = elem * (double)(poet_graph_param_count(g) + poet_graph_buffer_count(g));
    inst.gradient_bytes = elem * (double)poet_graph_trained_count(g);
    inst.buffer_bytes = elem * (double)poet_graph_buffer_count(g);
    if ((st = poet_instance_validate(&inst, err))) {
        poet_instance_free(&inst);
        return st;
    }
    *out = inst;
    return POET_OK;
}

/* The convolution or linear layer a node computes or differentiates, or -1. */
static int layer_of(const poet_graph *g, const poet_node *n)
{
    uint64_t rows, cols;
    int f = n->op == POET_OP_GRAD ? n->fwd : (int)(n - g->nodes);
    return f >= 0 && poet_weight_rows(&g->nodes[f], &rows, &cols) ? f : -1;
}

poet_status poet_instance_sparse(const poet_graph *g, const poet_profile *d, uint32_t sparsity_bp, poet_instance *out,
                                 poet_err *err)
{
    if (sparsity_bp >= 10000)
        return poet_fail(err, POET_ERR_INVALID, "sparsity %u.%02u%% keeps no weight", sparsity_bp / 100, sparsity_bp % 100);
    poet_instance inst;
    poet_status st = poet_instance_from_graph(g, d, &inst, err);
    if (st) return st;
    double packed_extra = 0;
    for (int v = 0; v < g->n_nodes; v++) {
        int f = layer_of(g, &g->nodes[v]);
        uint64_t rows, cols;
        if (f < 0 || !poet_weight_rows(&g->nodes[f], &rows, &cols)) continue;
        if (cols > POET_SPARSE_MAX_COLS) {
            poet_instance_free(&inst);
            return poet_fail(err, POET_ERR_LIMIT, "node %s: %llu weights a row; sorted rows hold at most %u (16-bit columns)",
                             g->nodes[f].name, (unsigned long long)cols, POET_SPARSE_MAX_COLS);
        }
        double share = (double)poet_sparse_keep((uint32_t)cols, sparsity_bp) / (double)cols;
        poet_cnode *c = &inst.nodes[v];
        c->flops *= share;
        price_node(c, d, g, &g->nodes[v]);
        if (v == f) packed_extra += (double)sizeof(uint16_t) * (double)(rows * cols);
    }
    inst.parameter_bytes += packed_extra;
    *out = inst;
    return POET_OK;
}

poet_status poet_instance_set_multibit(poet_instance *inst, const poet_graph *g, double bits, uint32_t group,
                                      poet_err *err)
{
    if (!(bits > 0 && bits <= POET_ALQ_MAX_TERMS) || !group)
        return poet_fail(err, POET_ERR_INVALID, "multi-bit weights: %g bits in groups of %u (need 0 < bits <= %d, groups >= 1)",
                         bits, group, POET_ALQ_MAX_TERMS);
    bool any_frozen = false;
    uint64_t rows, cols;
    for (int v = 0; v < g->n_forward; v++)
        any_frozen |= poet_weight_rows(&g->nodes[v], &rows, &cols) && (g->nodes[v].attrs.flags & POET_ATTR_FREEZE_WEIGHTS);
    double bytes = inst->parameter_bytes;
    for (int v = 0; v < g->n_forward; v++) {
        const poet_node *n = &g->nodes[v];
        if (!poet_weight_rows(n, &rows, &cols) || (any_frozen && !(n->attrs.flags & POET_ATTR_FREEZE_WEIGHTS))) continue;
        uint64_t len = group < cols ? group : cols, full = cols / len, rest = cols % len;
        double groups = (double)(rows * (full + (rest > 0))), sign_bytes = (double)rows * (full * ((len + 7) / 8) + (rest + 7) / 8);
        /* the terms spread evenly over the groups: bits x groups scales */
        bytes -= (double)g->elem_bytes * (double)(rows * cols);
        bytes += groups + bits * (4.0 * groups + sign_bytes);
    }
    inst->parameter_bytes = bytes;
    return POET_OK;
}

static bool finite_nonneg(double x) { return isfinite(x) && x >= 0; }

poet_status poet_instance_validate(const poet_instance *inst, poet_err *err)
{
    if (inst->T < 1 || inst->T > POET_MAX_NODES)
        return poet_fail(err, POET_ERR_LIMIT, "graph has %d nodes; poet accepts 1 to %d", inst->T, POET_MAX_NODES);
    if (inst->n_edges < 0 || inst->n_edges > POET_MAX_EDGES)
        return poet_fail(err, POET_ERR_LIMIT, "graph has %d edges; poet accepts at most %d", inst->n_edges,
                         POET_MAX_EDGES);
    poet_status st = poet_profile_validate(&inst->device, err);
    if (st) return st;
    double total_s = 0, total_j = 0;
    for (int i = 0; i < inst->T; i++) {
        const poet_cnode *c = &inst->nodes[i];
        total_s += c->time_s + c->pagein_s + c->pageout_s;
        total_j += c->compute_j + c->pagein_j + c->pageout_j;
        if (c->bytes > POET_MAX_TENSOR_BYTES)
            return poet_fail(err, POET_ERR_LIMIT, "node %d ('%s'): %llu bytes exceeds the limit of %llu", i, c->name,
                             (unsigned long long)c->bytes, (unsigned long long)POET_MAX_TENSOR_BYTES);
        double v[] = {c->flops, c->time_s, c->compute_j, c->pagein_j, c->pageout_j, c->pagein_s, c->pageout_s};
        for (size_t k = 0; k < sizeof v / sizeof *v; k++)
            if (!finite_nonneg(v[k]))
                return poet_fail(err, POET_ERR_INVALID, "node %d ('%s'): costs must be finite and >= 0", i, c->name);
    }
    /* so that budgets of time (the total times a runtime factor up to 1e6) and every sum a planner forms stay
     * finite: an infinite cost would make a feasible budget look infeasible */
    if (!(total_s <= POET_MAX_ITERATION_COST && total_j <= POET_MAX_ITERATION_COST))
        return poet_fail(err, POET_ERR_LIMIT, "graph '%s': an iteration's costs add up to %g s and %g J, more than the "
                         "limit of %g (is the device profile off by orders of magnitude?)", inst->model, total_s,
                         total_j, POET_MAX_ITERATION_COST);
    for (int e = 0; e < inst->n_edges; e++) {
        poet_edge ed = inst->edges[e];
        if (ed.src < 0 || ed.dst < 0 || ed.src >= inst->T || ed.dst >= inst->T)
            return poet_fail(err, POET_ERR_INVALID, "edge %d (%d -> %d) refers to a node outside 0..%d", e, ed.src,
                             ed.dst, inst->T - 1);
        if (ed.src >= ed.dst)
            return poet_fail(err, POET_ERR_INVALID,
                             "edge %d (%d -> %d) does not go forward: nodes must be in topological order (a cycle?)",
                             e, ed.src, ed.dst);
    }
    if (!finite_nonneg(inst->parameter_bytes) || !finite_nonneg(inst->gradient_bytes))
        return poet_fail(err, POET_ERR_INVALID, "parameter and gradient bytes must be finite and >= 0");
    return POET_OK;
}

/* Peak of POET's stage accounting for the schedule that computes each node
 * once and keeps every tensor from its producer to its last consumer: in
 * stage t, node t's output plus every earlier tensor still to be read. */
static uint64_t keep_all_peak(const poet_instance *inst, const int *last, uint64_t *diff)
{
    for (int i = 0; i < inst->T; i++)
        if (last[i] > i) {
            diff[i + 1] += inst->nodes[i].bytes;
            diff[last[i] + 1] -= inst->nodes[i].bytes;
        }
    uint64_t live = 0, peak = 0;
    for (int t = 0; t < inst->T; t++) {
        live += diff[t];
        uint64_t here = live + inst->nodes[t].bytes;
        if (here > peak) peak = here;
    }
    return peak;
}

/* Stage t holds node t and all of its distinct inputs at once; edges come
 * in any order, so they are grouped by consumer first. */
static uint64_t min_budget(const poet_instance *inst, int *start, int *src, int *mark, int *at)
{
    int T = inst->T;
    for (int t = 0; t <= T; t++) start[t] = 0;
    for (int e = 0; e < inst->n_edges; e++) start[inst->edges[e].dst + 1]++;
    for (int t = 0; t < T; t++) start[t + 1] += start[t];
    for (int e = 0; e < inst->n_edges; e++) src[start[inst->edges[e].dst]++] = inst->edges[e].src;
    for (int t = T; t > 0; t--) start[t] = start[t - 1]; /* undo the fill's advance */
    start[0] = 0;
    for (int t = 0; t < T; t++) mark[t] = -1;
    uint64_t best = 0;
    for (int t = 0; t < T; t++) {
        uint64_t need = inst->nodes[t].bytes;
        for (int k = start[t]; k < start[t + 1]; k++)
            if (mark[src[k]] != t) {
                mark[src[k]] = t;
                need += inst->nodes[src[k]].bytes;
            }
        if (need > best) best = need, *at = t;
    }
    return best;
}

uint64_t poet_instance_persistent_bytes(const poet_instance *inst, int optimizer_slots)
{
    double buffers = inst->buffer_bytes, batch = 4.0 * inst->batch;
    for (int i = 0; i < inst->T; i++)
        if (!inst->nodes[i].is_backward && strcmp(inst->nodes[i].op, "input") == 0) batch += (double)inst->nodes[i].bytes;
    return (uint64_t)(inst->parameter_bytes + buffers + (1.0 + optimizer_slots) * inst->gradient_bytes + batch);
}

poet_status poet_instance_stats_compute(const poet_instance *inst, poet_instance_stats *out, poet_err *err)
{
    memset(out, 0, sizeof *out);
    int T = inst->T;
    out->nodes = T;
    out->edges = inst->n_edges;
    out->parameter_bytes = inst->parameter_bytes;
    out->gradient_bytes = inst->gradient_bytes;
    for (int i = 0; i < T; i++) {
        const poet_cnode *c = &inst->nodes[i];
        if (!c->is_backward) {
            out->forward_nodes++;
            out->forward_activation_bytes += c->bytes;
        }
        out->full_memory_energy_j += c->compute_j;
        out->full_memory_time_s += c->time_s;
    }
    int *last = malloc((size_t)T * sizeof *last);
    int *start = malloc((size_t)(T + 1) * sizeof *start);
    int *src = malloc((size_t)(inst->n_edges + 1) * sizeof *src);
    uint64_t *diff = calloc((size_t)T + 1, sizeof *diff);
    poet_status st = POET_OK;
    if (!last || !start || !src || !diff) {
        st = poet_fail(err, POET_ERR_NOMEM, "out of memory analysing graph '%s'", inst->model);
    } else {
        for (int i = 0; i < T; i++) last[i] = i;
        for (int e = 0; e < inst->n_edges; e++)
            if (inst->edges[e].dst > last[inst->edges[e].src]) last[inst->edges[e].src] = inst->edges[e].dst;
        out->keep_all_peak_bytes = keep_all_peak(inst, last, diff);
        out->min_budget_bytes = min_budget(inst, start, src, last, &out->min_budget_node);
    }
    free(last);
    free(start);
    free(src);
    free(diff);
    return st;
}
